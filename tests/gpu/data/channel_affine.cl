// y = x * weights[f] + biases[f] + OFFSETS[f % 3], in whatever format the .xml asks for
// (the pitches say where each BFYX element lives), one work item per element.
__kernel void channel_affine(const __global INPUT0_TYPE* x, const __global float* w, __global OUTPUT0_TYPE* y,
                             const __global float* b)
{
    const int i = get_global_id(0);
    const int X = OUTPUT0_DIMS[3], Y = OUTPUT0_DIMS[2], F = OUTPUT0_DIMS[1];
    const int xx = i % X, yy = (i / X) % Y, f = (i / (X * Y)) % F, n = i / (X * Y * F);
    if (n >= OUTPUT0_DIMS[0]) return;
    const int src = n * INPUT0_PITCHES[0] + f * INPUT0_PITCHES[1] + yy * INPUT0_PITCHES[2] + xx * INPUT0_PITCHES[3];
    const int dst = n * OUTPUT0_PITCHES[0] + f * OUTPUT0_PITCHES[1] + yy * OUTPUT0_PITCHES[2] + xx * OUTPUT0_PITCHES[3];
    y[dst] = x[src] * w[f] + b[f] + OFFSETS[f % 3] * SCALE;
}
