// Convolution (grouped, dilated, padded), its 1x1 fast path, depthwise
// convolution, and Deconvolution. Tensors NCHW.
//
// A work item computes OCB output channels of one output pixel: the input value
// is loaded once for OCB multiply-adds, the OCB weights of a tap are contiguous
// (weights packed on the host as [group][channel block][in channel][ky][kx][OCB],
// zero-padded to whole blocks) and the same for all work items of a row, which
// read neighbouring input pixels: coalesced on a GPU, vectorized across work
// items by PoCL on a CPU.
#define OCB 8

// Output index: out_offset + image * out_image + channel * plane + pixel (a
// producer writing into its slice of a Concat's buffer has its offset and image
// stride; else 0 and O * plane); res (has_res): an Eltwise sum's other input,
// added before the activation.
#define OUT_ARGS __global const T* res, int out_offset, int out_image, int has_res
#define PUT(n, oc, plane, pixel, O, v)                                                           \
    {                                                                                            \
        float v_ = (v);                                                                          \
        if (has_res) v_ += LD(res, ((n) * (O) + (oc)) * (plane) + (pixel));                      \
        ST(out, out_offset + (n) * out_image + (oc) * (plane) + (pixel), activate(v_, act, act_a, act_b)); \
    }

#define EPILOGUE(n, oc0, ocg_left, pixel, plane, O)                                        \
    for (int i = 0; i < OCB; ++i) {                                                        \
        if (i < (ocg_left)) {                                                              \
            int oc = (oc0) + i;                                                            \
            PUT(n, oc, plane, pixel, O, acc[i] + (has_bias ? LD(bias, oc) : 0.0f))         \
        }                                                                                  \
    }

// A work item of conv_direct / deconv: output pixel (ox, oy), block b of OCB
// output channels of group g, image n; acc the OCB sums; xg / wb the group's
// input planes and the block's packed weights.
#define BLOCK_PROLOGUE                                                           \
    int ox = get_global_id(0), oy = get_global_id(1), z = get_global_id(2);     \
    if (ox >= OW) return;                                                        \
    int b = z % blocks, t = z / blocks, g = t % G, n = t / G;                    \
    float acc[OCB];                                                              \
    for (int i = 0; i < OCB; ++i) acc[i] = 0.0f;                                 \
    __global const T* xg = x + (n * C + g * ICg) * H * W;                       \
    __global const T* wb = w + (g * blocks + b) * ICg * KH * KW * OCB;

// global: (OW rounded up, OH, N * G * blocks)
__kernel void conv_direct(__global const T* x, __global const T* w, __global const T* bias, __global T* out,
                          int C, int H, int W, int O, int OH, int OW, int G, int ICg, int OCg, int blocks,
                          int KH, int KW, int SH, int SW, int PH, int PW, int DH, int DW,
                          int has_bias, int act, float act_a, float act_b, OUT_ARGS)
{
    BLOCK_PROLOGUE
    int iy0 = oy * SH - PH, ix0 = ox * SW - PW;
    for (int ic = 0; ic < ICg; ++ic) {
        __global const T* xc = xg + ic * H * W;
        for (int ky = 0; ky < KH; ++ky) {
            int iy = iy0 + ky * DH;
            bool row_ok = iy >= 0 && iy < H;
            for (int kx = 0; kx < KW; ++kx) {
                int ix = ix0 + kx * DW;
                float v = (row_ok && ix >= 0 && ix < W) ? LD(xc, iy * W + ix) : 0.0f;
                __global const T* wk = wb + ((ic * KH + ky) * KW + kx) * OCB;
                for (int i = 0; i < OCB; ++i) acc[i] = mad(v, LD(wk, i), acc[i]);
            }
        }
    }
    EPILOGUE(n, g * OCg + b * OCB, OCg - b * OCB, oy * OW + ox, OH * OW, O)
}

// 1x1 kernel, no padding (any stride, groups): a work item per output pixel of
// the flattened plane. global: (OH*OW rounded up, 1, N * G * blocks)
__kernel void conv_1x1(__global const T* x, __global const T* w, __global const T* bias, __global T* out,
                       int C, int H, int W, int O, int OH, int OW, int G, int ICg, int OCg, int blocks,
                       int SH, int SW, int has_bias, int act, float act_a, float act_b, OUT_ARGS)
{
    int p = get_global_id(0), z = get_global_id(2);
    if (p >= OH * OW) return;
    int b = z % blocks, t = z / blocks, g = t % G, n = t / G;
    int src = (SH == 1 && SW == 1) ? p : (p / OW) * SH * W + (p % OW) * SW;
    float acc[OCB];
    for (int i = 0; i < OCB; ++i) acc[i] = 0.0f;
    __global const T* xg = x + (n * C + g * ICg) * H * W + src;
    __global const T* wb = w + (g * blocks + b) * ICg * OCB;
    int plane = H * W;
    for (int ic = 0; ic < ICg; ++ic) {
        float v = LD(xg, ic * plane);
        __global const T* wk = wb + ic * OCB;
        for (int i = 0; i < OCB; ++i) acc[i] = mad(v, LD(wk, i), acc[i]);
    }
    EPILOGUE(n, g * OCg + b * OCB, OCg - b * OCB, p, OH * OW, O)
}

// One input channel per group, one output channel per group (depthwise): a work
// item per output pixel. weights [C][KH][KW]. global: (OW rounded up, OH, N*C)
__kernel void conv_depthwise(__global const T* x, __global const T* w, __global const T* bias, __global T* out,
                             int C, int H, int W, int OH, int OW, int KH, int KW, int SH, int SW,
                             int PH, int PW, int DH, int DW, int has_bias, int act, float act_a, float act_b, OUT_ARGS)
{
    int ox = get_global_id(0), oy = get_global_id(1), z = get_global_id(2);
    if (ox >= OW) return;
    int c = z % C, n = z / C;
    __global const T* xc = x + z * H * W;
    __global const T* wc = w + c * KH * KW;
    float acc = has_bias ? LD(bias, c) : 0.0f;
    int iy0 = oy * SH - PH, ix0 = ox * SW - PW;
    for (int ky = 0; ky < KH; ++ky) {
        int iy = iy0 + ky * DH;
        if (iy < 0 || iy >= H) continue;
        for (int kx = 0; kx < KW; ++kx) {
            int ix = ix0 + kx * DW;
            if (ix >= 0 && ix < W) acc = mad(LD(xc, iy * W + ix), LD(wc, ky * KW + kx), acc);
        }
    }
    PUT(n, c, OH * OW, oy * OW + ox, C, acc)
}

// Deconvolution as a gather: output pixel (oy, ox) takes input (iy, ix) through
// tap (ky, kx) when oy + PH - ky*DH = iy*SH. weights packed like conv_direct's
// (from Caffe's [C_in][C_out/g][KH][KW]). global: (OW rounded up, OH, N*G*blocks)
__kernel void deconv(__global const T* x, __global const T* w, __global const T* bias, __global T* out,
                     int C, int H, int W, int O, int OH, int OW, int G, int ICg, int OCg, int blocks,
                     int KH, int KW, int SH, int SW, int PH, int PW, int DH, int DW,
                     int has_bias, int act, float act_a, float act_b, OUT_ARGS)
{
    BLOCK_PROLOGUE
    for (int ky = 0; ky < KH; ++ky) {
        int ty = oy + PH - ky * DH;
        if (ty < 0 || ty % SH) continue;
        int iy = ty / SH;
        if (iy >= H) continue;
        for (int kx = 0; kx < KW; ++kx) {
            int tx = ox + PW - kx * DW;
            if (tx < 0 || tx % SW) continue;
            int ix = tx / SW;
            if (ix >= W) continue;
            for (int ic = 0; ic < ICg; ++ic) {
                float v = LD(xg, (ic * H + iy) * W + ix);
                __global const T* wk = wb + ((ic * KH + ky) * KW + kx) * OCB;
                for (int i = 0; i < OCB; ++i) acc[i] = mad(v, LD(wk, i), acc[i]);
            }
        }
    }
    EPILOGUE(n, g * OCg + b * OCB, OCg - b * OCB, oy * OW + ox, OH * OW, O)
}

// --- the "simd" style (CPU-like OpenCL devices): im2col + a register-tiled GEMM
// whose work item computes MR output channels x 16 pixels with two 8-wide
// vectors per channel (PoCL does not vectorize the kernels above across work
// items); the weights are packed [group][block of MR channels][k][MR] so that a
// step of k reads MR weights at once.
#define MR 4

// col[(image*C + c)*KH*KW + ky*KW + kx][p] = x[image][c][oy*SH - PH + ky*DH][ox*SW - PW + kx*DW]
// (0 in the padding). global: (OH*OW rounded up, KH*KW, N*C)
__kernel void im2col(__global const T* x, __global T* col, int H, int W, int OH, int OW, int KH, int KW,
                     int SH, int SW, int PH, int PW, int DH, int DW)
{
    int p = get_global_id(0), t = get_global_id(1), z = get_global_id(2);
    int P = OH * OW;
    if (p >= P) return;
    int oy = p / OW, ox = p % OW, ky = t / KW, kx = t % KW;
    int iy = oy * SH - PH + ky * DH, ix = ox * SW - PW + kx * DW;
    float v = (iy >= 0 && iy < H && ix >= 0 && ix < W) ? LD(x, (z * H + iy) * W + ix) : 0.0f;
    ST(col, (z * KH * KW + t) * P + p, v);
}

// out[image][g*M + m][p] = sum_k w[g][m][k] * B[z][k][p] (+ bias, activation) for
// z = image*G + g; B is the im2col columns, or the input itself for a 1x1 kernel
// with stride 1 and no padding. global: (ceil(N/16), blocks = ceil(M/MR), images*G)
__kernel void conv_gemm(__global const T* w, __global const T* B, __global const T* bias, __global T* out,
                        int M, int N, int K, int G, int blocks, int has_bias, int act, float act_a, float act_b,
                        OUT_ARGS)
{
    int n0 = get_global_id(0) * 16, mb = get_global_id(1), z = get_global_id(2);
    int g = z % G;
    __global const T* A = w + (g * blocks + mb) * K * MR;
    __global const T* Bz = B + z * K * N;
    int m0 = mb * MR, rows = min(MR, M - m0), cols = min(16, N - n0);
    float8 lo[MR], hi[MR];
    for (int r = 0; r < MR; ++r) { lo[r] = 0.0f; hi[r] = 0.0f; }
    if (cols == 16) {
        for (int k = 0; k < K; ++k) {
            float8 b0 = LD8(Bz, k * N + n0), b1 = LD8(Bz, k * N + n0 + 8);
            float4 a = LD4(A, k * MR);
            lo[0] = mad((float8)(a.s0), b0, lo[0]); hi[0] = mad((float8)(a.s0), b1, hi[0]);
            lo[1] = mad((float8)(a.s1), b0, lo[1]); hi[1] = mad((float8)(a.s1), b1, hi[1]);
            lo[2] = mad((float8)(a.s2), b0, lo[2]); hi[2] = mad((float8)(a.s2), b1, hi[2]);
            lo[3] = mad((float8)(a.s3), b0, lo[3]); hi[3] = mad((float8)(a.s3), b1, hi[3]);
        }
    } else {
        for (int k = 0; k < K; ++k) {
            float t[16];
            for (int j = 0; j < 16; ++j) t[j] = j < cols ? LD(Bz, k * N + n0 + j) : 0.0f;
            float8 b0 = vload8(0, t), b1 = vload8(1, t);
            float4 a = LD4(A, k * MR);
            lo[0] = mad((float8)(a.s0), b0, lo[0]); hi[0] = mad((float8)(a.s0), b1, hi[0]);
            lo[1] = mad((float8)(a.s1), b0, lo[1]); hi[1] = mad((float8)(a.s1), b1, hi[1]);
            lo[2] = mad((float8)(a.s2), b0, lo[2]); hi[2] = mad((float8)(a.s2), b1, hi[2]);
            lo[3] = mad((float8)(a.s3), b0, lo[3]); hi[3] = mad((float8)(a.s3), b1, hi[3]);
        }
    }
    int image = z / G;
    for (int r = 0; r < rows; ++r) {
        int oc = g * M + m0 + r;
        float bv = has_bias ? LD(bias, oc) : 0.0f;
        float8 v0 = lo[r] + bv, v1 = hi[r] + bv;
        if (cols == 16) {
            if (has_res) {
                int at = (image * G * M + oc) * N + n0;
                v0 += LD8(res, at);
                v1 += LD8(res, at + 8);
            }
            int at = out_offset + image * out_image + oc * N + n0;
            ST8(out, at, activate8(v0, act, act_a, act_b));
            ST8(out, at + 8, activate8(v1, act, act_a, act_b));
        } else {
            float t[16];
            vstore8(v0, 0, t);
            vstore8(v1, 1, t);
            for (int j = 0; j < cols; ++j) PUT(image, oc, N, n0 + j, G * M, t[j])
        }
    }
}
