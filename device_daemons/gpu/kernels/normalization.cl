// SoftMax, Norm (LRN across and within channels), Normalize (SSD's L2 norm).

// SoftMax over the middle axis of (outer, A, inner), a work item a column. global: (inner rounded up, outer)
__kernel void softmax(__global const T* x, __global T* out, int A, int inner, int log_out)
{
    int i = get_global_id(0), n = get_global_id(1);
    if (i >= inner) return;
    int base = n * A * inner + i;
    float m = -INFINITY;
    for (int a = 0; a < A; ++a) m = fmax(m, LD(x, base + a * inner));
    float s = 0.0f;
    for (int a = 0; a < A; ++a) s += exp(LD(x, base + a * inner) - m);
    if (log_out) {  /* LogSoftmax: x - m - log(s), finite where the SoftMax underflows */
        float lse = m + log(s);
        for (int a = 0; a < A; ++a) ST(out, base + a * inner, LD(x, base + a * inner) - lse);
        return;
    }
    float inv = 1.0f / s;
    for (int a = 0; a < A; ++a) ST(out, base + a * inner, exp(LD(x, base + a * inner) - m) * inv);
}

// SoftMax of rows (inner == 1: a classifier's scores): a work group a row, its
// maximum and sum reduced in __local memory. global: (L, outer), local: (L, 1),
// L a power of 2
__kernel void softmax_rows(__global const T* x, __global T* out, int A, int log_out, __local float* red)
{
    int l = get_local_id(0), L = get_local_size(0), base = get_group_id(1) * A;
    float m = -INFINITY;
    for (int a = l; a < A; a += L) m = fmax(m, LD(x, base + a));
    red[l] = m;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int h = L / 2; h > 0; h >>= 1) {
        if (l < h) red[l] = fmax(red[l], red[l + h]);
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    m = red[0];
    barrier(CLK_LOCAL_MEM_FENCE);
    float s = 0.0f;
    for (int a = l; a < A; a += L) s += exp(LD(x, base + a) - m);
    red[l] = s;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int h = L / 2; h > 0; h >>= 1) {
        if (l < h) red[l] += red[l + h];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (log_out) {
        float lse = m + log(red[0]);
        for (int a = l; a < A; a += L) ST(out, base + a, LD(x, base + a) - lse);
        return;
    }
    float inv = 1.0f / red[0];
    for (int a = l; a < A; a += L) ST(out, base + a, exp(LD(x, base + a) - m) * inv);
}

// LRN across channels: y = x * (k + alpha/size * sum_{size channels around c} x^2)^-beta.
// global: (H*W rounded up, C, N)
__kernel void lrn_across(__global const T* x, __global T* out, int C, int plane, int size,
                         float alpha_n, float beta, float k)
{
    int p = get_global_id(0), c = get_global_id(1), n = get_global_id(2);
    if (p >= plane) return;
    int pre = (size - 1) / 2;
    int lo = max(c - pre, 0), hi = min(c + pre, C - 1);
    __global const T* xn = x + n * C * plane + p;
    float s = 0.0f;
    for (int j = lo; j <= hi; ++j) { float v = LD(xn, j * plane); s = mad(v, v, s); }
    float v = LD(xn, c * plane);
    ST(out, (n * C + c) * plane + p, v * pow_neg(mad(alpha_n, s, k), beta));
}

// LRN within a channel (Caffe WITHIN_CHANNEL): a size x size zero-padded window,
// y = x * (1 + alpha/size^2 * sum x^2)^-beta. global: (W rounded up, H, N*C)
__kernel void lrn_within(__global const T* x, __global T* out, int H, int W, int size, float alpha_n, float beta)
{
    int xx = get_global_id(0), y = get_global_id(1), z = get_global_id(2);
    if (xx >= W) return;
    int pre = (size - 1) / 2;
    __global const T* xc = x + z * H * W;
    float s = 0.0f;
    for (int yy = max(y - pre, 0); yy < min(y - pre + size, H); ++yy)
        for (int x2 = max(xx - pre, 0); x2 < min(xx - pre + size, W); ++x2) {
            float v = LD(xc, yy * W + x2);
            s = mad(v, v, s);
        }
    ST(out, (z * H + y) * W + xx, LD(xc, y * W + xx) * pow_neg(mad(alpha_n, s, 1.0f), beta));
}

// Normalize per pixel: y = x / sqrt(sum_c x^2 + eps) * scale[c]. global: (inner rounded up, N)
__kernel void normalize_pixel(__global const T* x, __global const T* scale, __global T* out, int C, int inner,
                              float eps, int shared)
{
    int i = get_global_id(0), n = get_global_id(1);
    if (i >= inner) return;
    int base = n * C * inner + i;
    float s = 0.0f;
    for (int c = 0; c < C; ++c) { float v = LD(x, base + c * inner); s = mad(v, v, s); }
    float inv = 1.0f / sqrt(s + eps);
    for (int c = 0; c < C; ++c)
        ST(out, base + c * inner, LD(x, base + c * inner) * inv * LD(scale, shared ? 0 : c));
}

// Normalize across spatial: one work group per image reduces sum x^2 over C*H*W
// in local memory, then scales the image. global: (L, N), local: (L, 1), L a power of 2
__kernel void normalize_image(__global const T* x, __global const T* scale, __global T* out, int C, int inner,
                              float eps, int shared, __local float* partial)
{
    int l = get_local_id(0), L = get_local_size(0), n = get_group_id(1);
    int count = C * inner, base = n * count;
    float s = 0.0f;
    for (int i = l; i < count; i += L) { float v = LD(x, base + i); s = mad(v, v, s); }
    partial[l] = s;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int half_l = L / 2; half_l > 0; half_l >>= 1) {
        if (l < half_l) partial[l] += partial[l + half_l];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    float inv = 1.0f / sqrt(partial[0] + eps);
    for (int i = l; i < count; i += L)
        ST(out, base + i, LD(x, base + i) * inv * LD(scale, shared ? 0 : i / inner));
}

// LayerNorm over one axis (A values `inner` apart): a work item per position of the other axes;
// weights / biases along the axis (has_w / has_b: 0 when the layer has none).
__kernel void layer_norm(__global const T* x, __global const T* w, __global const T* b, __global T* out, int A,
                         int inner, float eps, int has_w, int has_b)
{
    int i = get_global_id(0), o = get_global_id(1);
    if (i >= inner) return;
    int base = o * A * inner + i;
    float mean = 0.0f;
    for (int a = 0; a < A; ++a) mean += LD(x, base + a * inner);
    mean /= A;
    float var = 0.0f;
    for (int a = 0; a < A; ++a) { float d = LD(x, base + a * inner) - mean; var = mad(d, d, var); }
    float inv = rsqrt(var / A + eps);
    for (int a = 0; a < A; ++a) {
        float v = (LD(x, base + a * inner) - mean) * inv;
        if (has_w) v *= LD(w, a);
        if (has_b) v += LD(b, a);
        ST(out, base + a * inner, v);
    }
}

// GRN: each position's C channel values divided by sqrt(their sum of squares + bias). global: (inner, N)
__kernel void grn(__global const T* x, __global T* out, int C, int inner, float bias)
{
    int i = get_global_id(0), n = get_global_id(1);
    if (i >= inner) return;
    long base = (long)n * C * inner + i;
    float s = 0.0f;
    for (int c = 0; c < C; ++c) { float v = LD(x, base + (long)c * inner); s = mad(v, v, s); }
    float inv = 1.0f / sqrt(s + bias);
    for (int c = 0; c < C; ++c) ST(out, base + (long)c * inner, LD(x, base + (long)c * inner) * inv);
}
