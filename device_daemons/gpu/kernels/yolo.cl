// RegionYolo, the CPU kernels' yolo.py (ReorgYolo is shape_ops.cl's strided copy): one work item a
// (image, region, position): logistic on x, y and the objectness, the classes a softmax (do_softmax) or a
// logistic each; the other coords pass. `entry` = coords + 1 + classes values `plane` (H*W) apart.
// global: (plane rounded up, regions, N)
__kernel void region_yolo(__global const T* x, __global T* out, int regions, int coords, int classes, int plane,
                          int do_softmax)
{
    int p = get_global_id(0), r = get_global_id(1), n = get_global_id(2);
    if (p >= plane) return;
    int entry = coords + 1 + classes;
    long base = ((long)n * regions + r) * entry * plane + p;
    for (int k = 0; k < coords; ++k) {
        float v = LD(x, base + (long)k * plane);
        ST(out, base + (long)k * plane, k < 2 ? 1.0f / (1.0f + exp(-v)) : v);
    }
    float obj = LD(x, base + (long)coords * plane);
    ST(out, base + (long)coords * plane, 1.0f / (1.0f + exp(-obj)));
    long cls = base + (long)(coords + 1) * plane;
    if (!do_softmax) {
        for (int k = 0; k < classes; ++k) {
            float v = LD(x, cls + (long)k * plane);
            ST(out, cls + (long)k * plane, 1.0f / (1.0f + exp(-v)));
        }
        return;
    }
    float top = -INFINITY, sum = 0.0f;
    for (int k = 0; k < classes; ++k) top = fmax(top, LD(x, cls + (long)k * plane));
    for (int k = 0; k < classes; ++k) sum += exp(LD(x, cls + (long)k * plane) - top);
    for (int k = 0; k < classes; ++k) ST(out, cls + (long)k * plane, exp(LD(x, cls + (long)k * plane) - top) / sum);
}
