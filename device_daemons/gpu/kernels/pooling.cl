// Pooling, Caffe semantics (see the CPU kernel): max over the image pixels of the
// window (padding never wins); avg divides the sum of the image pixels by the
// window clipped to the padded image, or by the image pixels only (exclude_pad).
// A work item per output value. global: (OW rounded up, OH, N*C)
__kernel void pool(__global const T* x, __global T* out, int H, int W, int OH, int OW,
                   int KH, int KW, int SH, int SW, int PH, int PW, int PH_END, int PW_END,
                   int is_max, int exclude_pad)
{
    int ox = get_global_id(0), oy = get_global_id(1), z = get_global_id(2);
    if (ox >= OW) return;
    int y0 = oy * SH - PH, x0 = ox * SW - PW;
    int y1 = min(y0 + KH, H + PH_END), x1 = min(x0 + KW, W + PW_END);
    int ya = max(y0, 0), xa = max(x0, 0), yb = min(y1, H), xb = min(x1, W);
    __global const T* xc = x + z * H * W;
    float r;
    if (is_max) {
        r = -INFINITY;
        for (int y = ya; y < yb; ++y)
            for (int xx = xa; xx < xb; ++xx) r = fmax(r, LD(xc, y * W + xx));
    } else {
        r = 0.0f;
        for (int y = ya; y < yb; ++y)
            for (int xx = xa; xx < xb; ++xx) r += LD(xc, y * W + xx);
        int count = exclude_pad ? (yb - ya) * (xb - xa) : (y1 - y0) * (x1 - x0);
        r /= (float)count;
    }
    ST(out, (z * OH + oy) * OW + ox, r);
}
