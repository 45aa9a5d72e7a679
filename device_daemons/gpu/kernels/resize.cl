// Resizing of H and W (Resample, Interp, Interpolate), the CPU kernels' resize.py and interpolate.py: the
// CPU kernels' own per-axis maps (source rows and columns, weights), computed on the host once per shape,
// and one work item an output value that blends the four source pixels (nearest: both of a pair the same,
// weight 0).
// global: (count rounded up)
__kernel void resize_maps(__global const T* src, __global T* dst, __global const int* ys, __global const float* fy,
                          __global const int* xs, __global const float* fx, int h, int w, int oh, int ow, int count)
{
    int i = get_global_id(0);
    if (i >= count) return;
    int j = i % ow, r = (i / ow) % oh;
    long base = (long)(i / (ow * oh)) * h * w;
    long top_row = base + (long)ys[2 * r] * w, bottom_row = base + (long)ys[2 * r + 1] * w;
    int x0 = xs[2 * j], x1 = xs[2 * j + 1];
    float a = LD(src, top_row + x0), b = LD(src, top_row + x1);
    float c = LD(src, bottom_row + x0), d = LD(src, bottom_row + x1);
    float top = a + (b - a) * fx[j], bottom = c + (d - c) * fx[j];
    ST(dst, i, top + (bottom - top) * fy[r]);
}
