// Convolution (and FullyConnected as a 1x1 convolution of 1x1 images) as a tiled
// GEMM for GPUs ("simt" style): out[g*M + m][n] = sum_k A[g][k][m] * B[g][k][n]
// where m is an output channel of group g, n an output pixel of the whole batch
// (image * OH*OW + pixel) and k runs over (input channel, ky, kx) of the group.
// B is never built: its values are read from the input where the tile needs
// them (an implicit GEMM). A work group computes a TM x TN tile of the output;
// each K step stages TK rows of A (the weights) and of B in __local memory and
// each of its (TM/WM) x (TN/WN) work items accumulates a WM x WN block in
// registers. A work item's rows and columns are strided by the number of work
// items along them, so that neighbouring work items read neighbouring __local
// words (no bank conflicts) and write neighbouring pixels (coalesced stores).
//
// Tile parameters are compile-time (-D TM=.. TN=.. TK=.. WM=.. WN=..): one source,
// many programs; the tuner (tuning.py) times them on the device.
// Weights are packed on the host as [G][Kp][Mp] (K and M zero-padded to whole
// tiles), so that weight loads need no bounds checks and a row of a tile is
// contiguous. koff[k] = ic*H*W + ky*DH*W + kx*DW and kyx[k] = (ky*DH << 16) | kx*DW
// locate the input value of row k relative to the window's top-left corner.
// With ks > 1 (a run-time argument) the K range is cut into ks slices (grid
// dimension 2 is G * ks): each slice writes its partial sums (float) to `part` and
// splitk_sum adds them and runs the epilogue - more work groups for layers
// whose output is small and whose K is long (late layers at batch 1).
#ifndef TM
#define TM 64
#endif
#ifndef TN
#define TN 64
#endif
#ifndef TK
#define TK 16
#endif
#ifndef WM
#define WM 4
#endif
#ifndef WN
#define WN 4
#endif

// Sibling convolutions (SIBLINGS, -DSIBLINGS): the convolutions of one input with
// the same window (an inception block's 1x1, 3x3_reduce and 5x5_reduce) as one
// GEMM, their weights and biases concatenated along M; output channel oc belongs to
// destination d = the number of bounds m1 <= m2 <= m3 at or below it (unused ones
// are M), whose own buffer, element offset and image stride it is written with.
#ifdef SIBLINGS
#define DEST_ARGS , __global T* out1, __global T* out2, __global T* out3, int m1, int m2, int m3, \
    int off1, int img1, int off2, int img2, int off3, int img3
#define DEST(oc, out, off, img, base, ch) \
    int d_ = ((oc) >= m1) + ((oc) >= m2) + ((oc) >= m3); \
    __global T* base = d_ == 0 ? (out) : d_ == 1 ? out1 : d_ == 2 ? out2 : out3; \
    int ch = (oc) - (d_ == 0 ? 0 : d_ == 1 ? m1 : d_ == 2 ? m2 : m3); \
    int off_ = d_ == 0 ? (off) : d_ == 1 ? off1 : d_ == 2 ? off2 : off3; \
    int img_ = d_ == 0 ? (img) : d_ == 1 ? img1 : d_ == 2 ? img2 : img3;
#else
#define DEST_ARGS
#define DEST(oc, out, off, img, base, ch) \
    __global T* base = (out); int ch = (oc); int off_ = (off); int img_ = (img);
#endif

// A max pooling of stride 1 that keeps the image's size (GoogLeNet's pool before
// pool_proj), read by the 1x1 convolution after it (POOLED, -DPOOLED): each B value
// is the maximum of its PKH x PKW window (padding PPH, PPW never wins), so the
// pooled tensor is never written.
#ifdef POOLED
#define POOL_ARGS , int PKH, int PKW, int PPH, int PPW
#else
#define POOL_ARGS
#endif

#define RM (TM / WM)                 // work items along M
#define RN (TN / WN)                 // work items along N
#define NT (RM * RN)                 // work items of a group
#define LNB (TN < NT ? TN : NT)      // B loads: work items along a tile row
#define LKB (NT / LNB)               //          rows loaded at once
#define CB (TN / LNB)                //          columns a work item loads
#define PB ((TK + LKB - 1) / LKB)    //          row passes
#define LMA (TM < NT ? TM : NT)      // A loads, the same
#define LKA (NT / LMA)
#define CA (TM / LMA)
#define PA ((TK + LKA - 1) / LKA)

// Any window, stride, padding, dilation and group; `one` (1x1 window, stride 1,
// no padding: B[k][n] is input channel k at pixel n) skips the window arithmetic,
// and also serves FullyConnected (H = W = 1: a row of x is an image).
// Output index: out_offset + image * out_image + channel * P + pixel (a producer
// writing into its slice of a Concat's buffer has its offset and image stride);
// res (has_res): an Eltwise sum's other input, added before the activation.
// global: (ceil(NTOT/TN) * RN, ceil(M/TM) * RM, G * ks), local: (RN, RM, 1)
__kernel __attribute__((reqd_work_group_size(RN, RM, 1)))
void conv_tiled(__global const T* x, __global const T* w, __global const T* bias, __global const T* res,
                __global T* out, __global float* part, __global const int* koff, __global const int* kyx,
                int C, int H, int W, int ICg, int OW, int P, int NTOT, int G, int M, int K, int Kp, int Mp,
                int SH, int SW, int PH, int PW, int one, int ks, int out_offset, int out_image,
                int has_bias, int has_res, int act, float act_a, float act_b DEST_ARGS POOL_ARGS)
{
    __local float As[TK][TM];
    __local float Bs[TK][TN];
    int tx = get_local_id(0), ty = get_local_id(1), tid = ty * RN + tx;
    int n0 = get_group_id(0) * TN, m0 = get_group_id(1) * TM;
    int g = get_group_id(2) % G, s = get_group_id(2) / G;
    int span = (Kp / TK + ks - 1) / ks * TK;
    int k_begin = s * span, k_end = min(Kp, k_begin + span);
    int HW = H * W;

    // A loads: rows ak + r*LKA, columns am + c*LMA of the tile
    int am = tid % LMA, ak = tid / LMA;
    __global const T* wa = w + (size_t)g * Kp * Mp + m0 + am;
    // B loads: rows bk + r*LKB, columns bn + c*LNB; where those columns' windows start
    int bn = tid % LNB, bk = tid / LNB;
    int col_base[CB], col_y[CB], col_x[CB];
#pragma unroll
    for (int c = 0; c < CB; ++c) {
        int n = n0 + bn + c * LNB;
        int image = n / P, p = n - image * P, oy = p / OW, ox = p - oy * OW;
        col_y[c] = n < NTOT ? oy * SH - PH : -(1 << 24);  // a column past the end reads zeros
        col_x[c] = ox * SW - PW;
        col_base[c] = n < NTOT ? (image * C + g * ICg) * HW + col_y[c] * W + col_x[c] : 0;
    }

    float acc[WM][WN];
#pragma unroll
    for (int i = 0; i < WM; ++i)
#pragma unroll
        for (int j = 0; j < WN; ++j) acc[i][j] = 0.0f;

    // one pass a K step: the tile loaded by the previous pass goes from registers
    // into __local memory and is multiplied, while the next tile's global loads
    // (issued before the multiply-adds) are in flight (a software pipeline)
    float ra[PA][CA], rb[PB][CB];
    for (int kt = k_begin; kt <= k_end; kt += TK) {
        if (kt > k_begin) {
#pragma unroll
            for (int r = 0; r < PA; ++r) {
                int kk = ak + r * LKA;
                if (kk < TK) {
#pragma unroll
                    for (int c = 0; c < CA; ++c) As[kk][am + c * LMA] = ra[r][c];
                }
            }
#pragma unroll
            for (int r = 0; r < PB; ++r) {
                int kk = bk + r * LKB;
                if (kk < TK) {
#pragma unroll
                    for (int c = 0; c < CB; ++c) Bs[kk][bn + c * LNB] = rb[r][c];
                }
            }
            barrier(CLK_LOCAL_MEM_FENCE);
        }
        if (kt < k_end) {
#pragma unroll
            for (int r = 0; r < PA; ++r) {
                int kk = ak + r * LKA;
                if (kk < TK) {
#pragma unroll
                    for (int c = 0; c < CA; ++c) ra[r][c] = LD(wa, (size_t)(kt + kk) * Mp + c * LMA);
                }
            }
#pragma unroll
            for (int r = 0; r < PB; ++r) {
                int kk = bk + r * LKB;
                if (kk < TK) {
                    int k = kt + kk;
                    bool kv = k < K;
                    if (one) {
#pragma unroll
                        for (int c = 0; c < CB; ++c) {
#ifdef POOLED
                            float v = 0.0f;
                            if (kv && col_y[c] >= 0) {
                                int y0 = max(col_y[c] - PPH, 0), y1 = min(col_y[c] - PPH + PKH, H);
                                int x0 = max(col_x[c] - PPW, 0), x1 = min(col_x[c] - PPW + PKW, W);
                                __global const T* xk = x + col_base[c] - col_y[c] * W - col_x[c] + k * HW;
                                v = -INFINITY;
                                for (int yy = y0; yy < y1; ++yy)
                                    for (int xx = x0; xx < x1; ++xx) v = fmax(v, LD(xk, yy * W + xx));
                            }
                            rb[r][c] = v;
#else
                            rb[r][c] = (kv && col_y[c] >= 0) ? LD(x, col_base[c] + k * HW) : 0.0f;
#endif
                        }
                    } else {
                        int off = kv ? koff[k] : 0, yx = kv ? kyx[k] : 0;
                        int dy = yx >> 16, dx = yx & 0xffff;
#pragma unroll
                        for (int c = 0; c < CB; ++c) {
                            int iy = col_y[c] + dy, ix = col_x[c] + dx;
                            rb[r][c] = (kv && iy >= 0 && iy < H && ix >= 0 && ix < W) ? LD(x, col_base[c] + off)
                                                                                    : 0.0f;
                        }
                    }
                }
            }
        }
        if (kt > k_begin) {
#pragma unroll
            for (int kk = 0; kk < TK; ++kk) {
                float a[WM], b[WN];
#pragma unroll
                for (int i = 0; i < WM; ++i) a[i] = As[kk][ty + i * RM];
#pragma unroll
                for (int j = 0; j < WN; ++j) b[j] = Bs[kk][tx + j * RN];
#pragma unroll
                for (int i = 0; i < WM; ++i)
#pragma unroll
                    for (int j = 0; j < WN; ++j) acc[i][j] = mad(a[i], b[j], acc[i][j]);
            }
            barrier(CLK_LOCAL_MEM_FENCE);
        }
    }

    // epilogue: bias, residual, activation; or the partial sums of a K slice
    int O = G * M;
    int img[WN], pix[WN];
#pragma unroll
    for (int j = 0; j < WN; ++j) {
        int n = n0 + tx + j * RN;
        img[j] = n / P;
        pix[j] = n - img[j] * P;
    }
#pragma unroll
    for (int i = 0; i < WM; ++i) {
        int m = m0 + ty + i * RM;
        if (m >= M) continue;
        int oc = g * M + m;
        if (ks > 1) {
#pragma unroll
            for (int j = 0; j < WN; ++j) {
                int n = n0 + tx + j * RN;
                if (n < NTOT) part[((size_t)s * O + oc) * NTOT + n] = acc[i][j];
            }
            continue;
        }
        float bv = has_bias ? LD(bias, oc) : 0.0f;
        DEST(oc, out, out_offset, out_image, dst, ch)
#pragma unroll
        for (int j = 0; j < WN; ++j) {
            int n = n0 + tx + j * RN;
            if (n >= NTOT) continue;
            float v = acc[i][j] + bv;
            if (has_res) v += LD(res, (img[j] * O + oc) * P + pix[j]);
            ST(dst, off_ + img[j] * img_ + ch * P + pix[j], activate(v, act, act_a, act_b));
        }
    }
}

// The sum of the ks partial results and the epilogue.
// global: (NTOT rounded up, O), O = G * M
__kernel void splitk_sum(__global const float* part, __global const T* bias, __global const T* res, __global T* out,
                         int ks, int O, int P, int NTOT, int out_offset, int out_image, int has_bias, int has_res,
                         int act, float act_a, float act_b DEST_ARGS)
{
    int n = get_global_id(0), oc = get_global_id(1);
    if (n >= NTOT) return;
    float v = has_bias ? LD(bias, oc) : 0.0f;
    for (int s = 0; s < ks; ++s) v += part[((size_t)s * O + oc) * NTOT + n];
    int image = n / P, p = n - image * P;
    if (has_res) v += LD(res, (image * O + oc) * P + p);
    DEST(oc, out, out_offset, out_image, dst, ch)
    ST(dst, off_ + image * img_ + ch * P + p, activate(v, act, act_a, act_b));
}
