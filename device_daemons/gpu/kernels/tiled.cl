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

// The rows and columns of a work item's register block within the tile: strided
// by the work items along them (neighbouring work items read neighbouring __local
// words); with -DVEC (WM and WN multiples of 4) quads of 4 neighbouring rows or
// columns, 4 * RM (4 * RN) apart, read as one float4 each (a quarter of the
// __local load instructions a multiply-add step)
#ifdef VEC
#define ROW(i) (((i) >> 2) * (4 * RM) + ty * 4 + ((i) & 3))
#define COL(j) (((j) >> 2) * (4 * RN) + tx * 4 + ((j) & 3))
#else
#define ROW(i) (ty + (i) * RM)
#define COL(j) (tx + (j) * RN)
#endif

// Any window, stride, padding, dilation and group; `one` (1x1 window, stride 1,
// no padding: B[k][n] is input channel k at pixel n) skips the window arithmetic,
// and also serves FullyConnected (H = W = 1: a row of x is an image).
// Output index: out_offset + image * out_image + channel * P + pixel (a producer
// writing into its slice of a Concat's buffer has its offset and image stride);
// res (has_res): an Eltwise sum's other input, added before the activation.
// global: (ceil(NTOT/TN) * RN, ceil(M/TM) * RM, G * ks), local: (RN, RM, 1)
#ifndef MMA
__kernel __attribute__((reqd_work_group_size(RN, RM, 1)))
void conv_tiled(__global const T* x, __global const T* w, __global const T* bias, __global const T* res,
                __global T* out, __global float* part, __global const int* koff, __global const int* kyx,
                int C, int H, int W, int ICg, int OW, int P, int NTOT, int G, int M, int K, int Kp, int Mp,
                int SH, int SW, int PH, int PW, int one, int ks, int out_offset, int out_image,
                int has_bias, int has_res, int act, float act_a, float act_b DEST_ARGS POOL_ARGS)
{
    __local float As[TK][TM] __attribute__((aligned(16)));
    __local float Bs[TK][TN] __attribute__((aligned(16)));
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
#ifdef VEC
#pragma unroll
                for (int q = 0; q < WM / 4; ++q) vstore4(*(__local const float4*)&As[kk][ROW(4 * q)], q, a);
#pragma unroll
                for (int q = 0; q < WN / 4; ++q) vstore4(*(__local const float4*)&Bs[kk][COL(4 * q)], q, b);
#else
#pragma unroll
                for (int i = 0; i < WM; ++i) a[i] = As[kk][ROW(i)];
#pragma unroll
                for (int j = 0; j < WN; ++j) b[j] = Bs[kk][COL(j)];
#endif
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
        int n = n0 + COL(j);
        img[j] = n / P;
        pix[j] = n - img[j] * P;
    }
#pragma unroll
    for (int i = 0; i < WM; ++i) {
        int m = m0 + ROW(i);
        if (m >= M) continue;
        int oc = g * M + m;
        if (ks > 1) {
#pragma unroll
            for (int j = 0; j < WN; ++j) {
                int n = n0 + COL(j);
                if (n < NTOT) part[((size_t)s * O + oc) * NTOT + n] = acc[i][j];
            }
            continue;
        }
        float bv = has_bias ? LD(bias, oc) : 0.0f;
        DEST(oc, out, out_offset, out_image, dst, ch)
#pragma unroll
        for (int j = 0; j < WN; ++j) {
            int n = n0 + COL(j);
            if (n >= NTOT) continue;
            float v = acc[i][j] + bv;
            if (has_res) v += LD(res, (img[j] * O + oc) * P + pix[j]);
            ST(dst, off_ + img[j] * img_ + ch * P + pix[j], activate(v, act, act_a, act_b));
        }
    }
}

#endif  // MMA

#ifdef MMA
// The same GEMM on NVIDIA's tensor cores (half plans only, -DMMA): each warp of
// the work group computes a WTM x WTN block of the TM x TN tile with PTX
// `mma.sync.m16n8k16` (half inputs, float accumulators: f16 products summed in
// f32, as cuDNN's FP16 convolutions do), reached from OpenCL through inline PTX
// (NVIDIA's OpenCL compiler takes `asm`; it reports no cl_khr_fp16, so half math
// is out of reach otherwise). A stage stages MK = 32 values of K: the weights
// (packed [G][Mp][Kp], K contiguous, loaded 8 halves at a time) and the input (the
// implicit GEMM's B, two K rows of a column a work item) as pairs of halves in
// 32-bit words, a row of MKW words per output channel or pixel - K contiguous,
// so that a fragment register is one __local word; MKW = 20 puts the eight rows
// and four words a fragment reads into 32 different banks. The next stage's
// global loads are in flight while the tensor cores work on this one.
// -DMMA_EMULATE computes each mma.sync from the same registers in plain OpenCL
// (the warp's fragments exchanged through __local memory): the register layout of
// the PTX ISA, checked on any OpenCL device (the tests run it on PoCL).
#ifndef MO_HALF
#error "conv_mma reads half tensors"
#endif
#define MK 32
#define MKW (MK / 2 + 4)
#define WGM (TM / WTM)             // warps along M
#define WGN (TN / WTN)             // warps along N
#define MT (WGM * WGN * 32)        // work items of a group
#define MI (WTM / 16)              // m16 tiles a warp
#define NI (WTN / 8)               // n8 tiles a warp
#define AQ (TM * 4 / MT)           // 8-half weight loads a work item a stage
#define BP (MK / 2 * TN / MT)      // pairs of input values a work item a stage

#ifdef MMA_EMULATE
inline float half_bits(uint h) {
    uint sign = (h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
    if (e == 0) return as_float(sign) + (sign ? -1.0f : 1.0f) * (float)m * 0x1.0p-24f;
    if (e == 31) return as_float(sign | 0x7f800000u | (m << 13));
    return as_float(sign | ((e + 112) << 23) | (m << 13));
}

// d += A (16x16, row) * B (16x8, col) as mma.sync.m16n8k16 with the PTX ISA's
// fragments: lane = 4 * group + t; A's registers: (row group, cols 2t..2t+1),
// (group + 8, 2t..), (group, 2t + 8..), (group + 8, 2t + 8..); B's: (rows 2t..2t+1,
// col group), (2t + 8.., group); d: (group, cols 2t, 2t + 1), (group + 8, the same);
// the lower half of a register is the lower index
inline void mma_16816(float* d, uint4 a, uint2 b, __local uint* ex, int lane) {
    barrier(CLK_LOCAL_MEM_FENCE);
    vstore4(a, 0, ex + lane * 6);
    vstore2(b, 0, ex + lane * 6 + 4);
    barrier(CLK_LOCAL_MEM_FENCE);
    int grp = lane >> 2, t = lane & 3;
    for (int e = 0; e < 4; ++e) {
        int r = grp + 8 * (e >> 1), c = 2 * t + (e & 1);
        float sum = 0.0f;
        for (int k = 0; k < 16; ++k) {
            uint aw = ex[((r & 7) * 4 + ((k & 7) >> 1)) * 6 + (r >> 3) + 2 * (k >> 3)];
            uint bw = ex[(c * 4 + ((k & 7) >> 1)) * 6 + 4 + (k >> 3)];
            int sh = 16 * (k & 1);
            sum = fma(half_bits((aw >> sh) & 0xffffu), half_bits((bw >> sh) & 0xffffu), sum);
        }
        d[e] += sum;
    }
}
#define MMA_16816(d, a, b) mma_16816((d), (a), (b), ex, lane)
#else
#ifndef MMA_ASM
#define MMA_ASM asm  // NVIDIA's OpenCL compiler takes GNU inline assembly of PTX
#endif
#define MMA_16816(d, a, b) \
    MMA_ASM volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, " \
                 "{%0,%1,%2,%3};" : "+f"((d)[0]), "+f"((d)[1]), "+f"((d)[2]), "+f"((d)[3]) \
                 : "r"((a).x), "r"((a).y), "r"((a).z), "r"((a).w), "r"((b).x), "r"((b).y))
#endif

// The arguments of conv_tiled (without a pooling read through); weights packed
// [G][Mp][Kp] (Kp a multiple of MK). global: (ceil(NTOT/TN) * MT, ceil(M/TM), G * ks), local: (MT, 1, 1)
__kernel __attribute__((reqd_work_group_size(MT, 1, 1)))
void conv_mma(__global const T* x_, __global const T* w_, __global const T* bias, __global const T* res,
              __global T* out, __global float* part, __global const int* koff, __global const int* kyx,
              int C, int H, int W, int ICg, int OW, int P, int NTOT, int G, int M, int K, int Kp, int Mp,
              int SH, int SW, int PH, int PW, int one, int ks, int out_offset, int out_image,
              int has_bias, int has_res, int act, float act_a, float act_b DEST_ARGS)
{
    __global const ushort* x = (__global const ushort*)x_;
    __local uint As[TM * MKW];
    __local uint Bs[TN * MKW];
    int tid = get_local_id(0), lane = tid & 31, warp = tid >> 5;
#ifdef MMA_EMULATE
    __local uint exchange[MT * 6];
    __local uint* ex = exchange + warp * 32 * 6;
#endif
    int wm0 = (warp % WGM) * WTM, wn0 = (warp / WGM) * WTN;
    int grp = lane >> 2, tq = lane & 3;
    int n0 = get_group_id(0) * TN, m0 = get_group_id(1) * TM;
    int g = get_group_id(2) % G, s = get_group_id(2) / G;
    int span = (Kp / MK + ks - 1) / ks * MK;
    int k_begin = s * span, k_end = min(Kp, k_begin + span);
    int HW = H * W;

    // weight loads: 8 halves q = tid + r * MT of the tile, row q / 4, quarter q % 4
    __global const uint4* wa = (__global const uint4*)((__global const ushort*)w_ + ((size_t)g * Mp + m0) * Kp);
    int kq = Kp / 8;
#ifdef ONE4
    // a 1x1 stride-1 layer whose images hold a multiple of 4 pixels (-DONE4): a work item
    // loads 4 neighbouring columns (one image's) of two K rows as two 8-byte loads, a
    // quarter of the load instructions; quad cq of the tile, pair rows bk + r * (MT / (TN / 4))
    int cq = tid % (TN / 4), bk = tid / (TN / 4);
    int n = n0 + 4 * cq;
    int image = n / P;
    int col_base = n < NTOT ? (image * C + g * ICg) * HW + (n - image * P) : -1;  // -1: past the end
#else
    // input loads: column bn of the tile, pair rows bk + r * (MT / TN)
    int bn = tid % TN, bk = tid / TN;
    int n = n0 + bn;
    int image = n / P, p = n - image * P, oy = p / OW, ox = p - oy * OW;
    int col_y = n < NTOT ? oy * SH - PH : -(1 << 24);  // a column past the end reads zeros
    int col_x = ox * SW - PW;
    int col_base = n < NTOT ? (image * C + g * ICg) * HW + col_y * W + col_x : 0;
#endif

    float acc[MI][NI][4];
#pragma unroll
    for (int i = 0; i < MI; ++i)
#pragma unroll
        for (int j = 0; j < NI; ++j)
#pragma unroll
            for (int e = 0; e < 4; ++e) acc[i][j][e] = 0.0f;

    uint4 ra[AQ];
#ifdef ONE4
#define BQ (MK / 2 * TN / 4 / MT)  // quads of pairs a work item a stage
    uint4 rb[BQ];
#else
    uint rb[BP];
#endif
    for (int kt = k_begin; kt < k_end + MK; kt += MK) {
        if (kt > k_begin) {  // the stage loaded last pass: registers -> __local
            barrier(CLK_LOCAL_MEM_FENCE);
#pragma unroll
            for (int r = 0; r < AQ; ++r) {
                int q = tid + r * MT;
                vstore4(ra[r], 0, As + (q >> 2) * MKW + (q & 3) * 4);
            }
#ifdef ONE4
#pragma unroll
            for (int r = 0; r < BQ; ++r) {
                __local uint* col = Bs + 4 * cq * MKW + bk + r * (MT / (TN / 4));
                col[0] = rb[r].s0;
                col[MKW] = rb[r].s1;
                col[2 * MKW] = rb[r].s2;
                col[3 * MKW] = rb[r].s3;
            }
#else
#pragma unroll
            for (int r = 0; r < BP; ++r) Bs[bn * MKW + bk + r * (MT / TN)] = rb[r];
#endif
            barrier(CLK_LOCAL_MEM_FENCE);
        }
        if (kt < k_end) {  // the next stage's global loads
#pragma unroll
            for (int r = 0; r < AQ; ++r) {
                int q = tid + r * MT;
                ra[r] = wa[(size_t)(q >> 2) * kq + kt / 8 + (q & 3)];
            }
#ifdef ONE4
#pragma unroll
            for (int r = 0; r < BQ; ++r) {
                int k = kt + 2 * (bk + r * (MT / (TN / 4)));
                uint4 lo = 0u, hi = 0u;
                if (col_base >= 0 && k < K) lo = convert_uint4(*(__global const ushort4*)(x + col_base + k * HW));
                if (col_base >= 0 && k + 1 < K)
                    hi = convert_uint4(*(__global const ushort4*)(x + col_base + (k + 1) * HW));
                rb[r] = lo | (hi << 16);
            }
#else
#pragma unroll
            for (int r = 0; r < BP; ++r) {
                int k = kt + 2 * (bk + r * (MT / TN));
                uint v[2];
#pragma unroll
                for (int h = 0; h < 2; ++h) {
                    int kk = k + h;
                    bool kv = kk < K;
                    if (one) {
                        v[h] = (kv && col_y >= 0) ? x[col_base + kk * HW] : 0u;
                    } else {
                        int off = kv ? koff[kk] : 0, yx = kv ? kyx[kk] : 0;
                        int iy = col_y + (yx >> 16), ix = col_x + (yx & 0xffff);
                        v[h] = (kv && iy >= 0 && iy < H && ix >= 0 && ix < W) ? x[col_base + off] : 0u;
                    }
                }
                rb[r] = v[0] | (v[1] << 16);
            }
#endif
        }
        if (kt > k_begin) {  // the tensor cores on the staged values
#pragma unroll
            for (int kw = 0; kw < MK / 2; kw += 8) {
                uint4 a[MI];
                uint2 b[NI];
#pragma unroll
                for (int i = 0; i < MI; ++i) {
                    __local const uint* row = As + (wm0 + i * 16 + grp) * MKW + kw + tq;
                    a[i] = (uint4)(row[0], row[8 * MKW], row[4], row[8 * MKW + 4]);
                }
#pragma unroll
                for (int j = 0; j < NI; ++j) {
                    __local const uint* col = Bs + (wn0 + j * 8 + grp) * MKW + kw + tq;
                    b[j] = (uint2)(col[0], col[4]);
                }
#pragma unroll
                for (int i = 0; i < MI; ++i)
#pragma unroll
                    for (int j = 0; j < NI; ++j) MMA_16816(acc[i][j], a[i], b[j]);
            }
        }
    }

    // epilogue: tiled.cl's, for the four values of each m16n8 tile a work item holds
    int O = G * M;
#pragma unroll
    for (int i = 0; i < MI; ++i) {
#pragma unroll
        for (int e2 = 0; e2 < 2; ++e2) {
            int m = m0 + wm0 + i * 16 + grp + 8 * e2;
            if (m >= M) continue;
            int oc = g * M + m;
            float bv = has_bias ? LD(bias, oc) : 0.0f;
            DEST(oc, out, out_offset, out_image, dst, ch)
#pragma unroll
            for (int j = 0; j < NI; ++j) {
#pragma unroll
                for (int e1 = 0; e1 < 2; ++e1) {
                    int nn = n0 + wn0 + j * 8 + 2 * tq + e1;
                    if (nn >= NTOT) continue;
                    float v = acc[i][j][2 * e2 + e1];
                    if (ks > 1) {
                        part[((size_t)s * O + oc) * NTOT + nn] = v;
                        continue;
                    }
                    int im = nn / P, px = nn - im * P;
                    v += bv;
                    if (has_res) v += LD(res, (im * O + oc) * P + px);
                    ST(dst, off_ + im * img_ + ch * P + px, activate(v, act, act_a, act_b));
                }
            }
        }
    }
}
#endif  // MMA

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
