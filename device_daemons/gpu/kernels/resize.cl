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

// TensorFlow's resize_bicubic: four taps a row and a column (the CPU kernels' ir/cubic.py indices and
// weights, 4 an output position), the rows blended first. global: (count)
__kernel void resize_cubic(__global const T* src, __global T* dst, __global const int* ys, __global const float* wy,
                           __global const int* xs, __global const float* wx, int h, int w, int oh, int ow, int count)
{
    int i = get_global_id(0);
    if (i >= count) return;
    int j = i % ow, r = (i / ow) % oh;
    long base = (long)(i / (ow * oh)) * h * w;
    float sum = 0.0f;
    for (int k = 0; k < 4; ++k) {
        int x = xs[4 * j + k];
        float column = 0.0f;
        for (int t = 0; t < 4; ++t)
            column += LD(src, base + (long)ys[4 * r + t] * w + x) * wy[4 * r + t];
        sum += column * wx[4 * j + k];
    }
    ST(dst, i, sum);
}
