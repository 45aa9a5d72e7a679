// Winograd F(WM x WM, 3x3) for 3x3 stride-1 convolutions (group 1), WM = 2 or 4
// (-DWINO_M): each WM x WM block of outputs ("tile") comes from a WA x WA patch of
// the input (WA = WM + 2) with WA^2 multiplies per input channel instead of
// 9 * WM^2 (16 for 36 at WM = 2, 36 for 144 at WM = 4; the larger tile transforms
// with larger coefficients, so it loses more precision: FP32 plans only).
// Three launches:
//   wino_in   V[e][c][t] = (B^T d B)[e] for the patch d of channel c under tile t
//   GEMM      M[e][m][t] = sum_c U[e][m][c] * V[e][c][t]   (tiled.cl's conv_tiled or
//             conv_mma with WA^2 groups: V is one "image" of WA^2 * C channels of T pixels)
//   wino_out  the WM x WM outputs A^T M A of tile t, channel m, with the epilogue of
//             the other convolution kernels (bias, an Eltwise sum's other input,
//             activation, a place in a Concat's buffer)
// U = G g G^T is made on the host once (convolution.py's winograd_weights, with the
// G of these B and A). Tiles: t = (image * TH + ty) * TW + tx, TH = ceil(OH / WM),
// TW = ceil(OW / WM); a tile past the output's edge computes values nobody stores.
// The constant matrices are multiplied out by the compiler (zeros and ones vanish).
#ifndef WINO_M
#define WINO_M 2
#endif
#define WA (WINO_M + 2)

#if WINO_M == 2
__constant float BT[WA][WA] = {{1, 0, -1, 0}, {0, 1, 1, 0}, {0, -1, 1, 0}, {0, 1, 0, -1}};
__constant float AT[WINO_M][WA] = {{1, 1, 1, 0}, {0, 1, -1, -1}};
#elif WINO_M == 4
__constant float BT[WA][WA] = {{4, 0, -5, 0, 1, 0}, {0, -4, -4, 1, 1, 0}, {0, 4, -4, -1, 1, 0},
                               {0, -2, -1, 2, 1, 0}, {0, 2, -1, -2, 1, 0}, {0, 4, 0, -5, 0, 1}};
__constant float AT[WINO_M][WA] = {{1, 1, 1, 1, 1, 0}, {0, 1, -1, 2, -2, 0}, {0, 1, 1, 4, 4, 0},
                                   {0, 1, -1, 8, -8, 1}};
#else
#error "WINO_M is 2 or 4"
#endif

// OUT (ROWS x WA) = MAT (ROWS x WA, constant) x IN (WA x WA)
#define LEFT(ROWS, MAT, IN, OUT) \
    _Pragma("unroll") for (int i_ = 0; i_ < (ROWS); ++i_) \
        _Pragma("unroll") for (int j_ = 0; j_ < WA; ++j_) { \
            float sum_ = 0.0f; \
            _Pragma("unroll") for (int k_ = 0; k_ < WA; ++k_) sum_ += MAT[i_][k_] * IN[k_][j_]; \
            OUT[i_][j_] = sum_; \
        }

// global: (T rounded up, C)
__kernel void wino_in(__global const T* x, __global T* v, int C, int H, int W, int PH, int PW, int TH, int TW,
                      int NT)
{
    int t = get_global_id(0), c = get_global_id(1);
    if (t >= NT) return;
    int image = t / (TH * TW), r = t - image * TH * TW, ty = r / TW, tx = r - ty * TW;
    int y0 = WINO_M * ty - PH, x0 = WINO_M * tx - PW;
    __global const T* xc = x + ((size_t)image * C + c) * H * W;
    float d[WA][WA];
#pragma unroll
    for (int i = 0; i < WA; ++i)
#pragma unroll
        for (int j = 0; j < WA; ++j) {
            int iy = y0 + i, ix = x0 + j;
            d[i][j] = (iy >= 0 && iy < H && ix >= 0 && ix < W) ? LD(xc, iy * W + ix) : 0.0f;
        }
    float b[WA][WA];
    LEFT(WA, BT, d, b);  // B^T d
    size_t plane = (size_t)C * NT, at = (size_t)c * NT + t;
#pragma unroll
    for (int i = 0; i < WA; ++i)
#pragma unroll
        for (int j = 0; j < WA; ++j) {  // (B^T d) B
            float s = 0.0f;
#pragma unroll
            for (int k = 0; k < WA; ++k) s += b[i][k] * BT[j][k];
            ST(v, (WA * i + j) * plane + at, s);
        }
}

// global: (T rounded up, O); out index: out_offset + image * out_image + m * OH * OW + pixel
__kernel void wino_out(__global const T* mo, __global const T* bias, __global const T* res, __global T* out,
                       int O, int OH, int OW, int TH, int TW, int NT, int out_offset, int out_image, int has_bias,
                       int has_res, int act, float act_a, float act_b)
{
    int t = get_global_id(0), m = get_global_id(1);
    if (t >= NT) return;
    int image = t / (TH * TW), r = t - image * TH * TW, ty = r / TW, tx = r - ty * TW;
    size_t plane = (size_t)O * NT, at = (size_t)m * NT + t;
    float q[WA][WA];
#pragma unroll
    for (int e = 0; e < WA * WA; ++e) q[e / WA][e % WA] = LD(mo, e * plane + at);
    float s[WINO_M][WA];
    LEFT(WINO_M, AT, q, s);  // A^T q
    float bv = has_bias ? LD(bias, m) : 0.0f;
    int P = OH * OW;
#pragma unroll
    for (int i = 0; i < WINO_M; ++i) {
        int oy = WINO_M * ty + i;
        if (oy >= OH) continue;
#pragma unroll
        for (int j = 0; j < WINO_M; ++j) {
            int ox = WINO_M * tx + j;
            if (ox >= OW) continue;
            float value = bv;  // (A^T q) A
#pragma unroll
            for (int k = 0; k < WA; ++k) value += s[i][k] * AT[j][k];
            int pix = oy * OW + ox;
            if (has_res) value += LD(res, ((size_t)image * O + m) * P + pix);
            ST(out, out_offset + image * out_image + m * P + pix, activate(value, act, act_a, act_b));
        }
    }
}
