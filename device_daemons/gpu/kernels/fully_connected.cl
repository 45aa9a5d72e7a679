// FullyConnected: y[r, o] = sum_i x[r, i] * w[i, o] + b[o], weights stored
// transposed (I, O) so that neighbouring work items (neighbouring o) read
// neighbouring weights. A work item computes RB rows of one output column.
// global: (O rounded up, ceil(R / RB))
#define RB 4

__kernel void fully_connected(__global const T* x, __global const T* w, __global const T* bias, __global T* out,
                              int R, int I, int O, int has_bias, int act, float act_a, float act_b)
{
    int o = get_global_id(0), r0 = get_global_id(1) * RB;
    if (o >= O) return;
    int rows = min(RB, R - r0);
    float acc[RB];
    for (int j = 0; j < RB; ++j) acc[j] = 0.0f;
    __global const T* xr = x + r0 * I;
    if (rows == RB) {
        for (int i = 0; i < I; ++i) {
            float wv = LD(w, i * O + o);
            for (int j = 0; j < RB; ++j) acc[j] = mad(LD(xr, j * I + i), wv, acc[j]);
        }
    } else {
        for (int i = 0; i < I; ++i) {
            float wv = LD(w, i * O + o);
            for (int j = 0; j < rows; ++j) acc[j] = mad(LD(xr, j * I + i), wv, acc[j]);
        }
    }
    float b = has_bias ? LD(bias, o) : 0.0f;
    for (int j = 0; j < rows; ++j) ST(out, (r0 + j) * O + o, activate(acc[j] + b, act, act_a, act_b));
}

// The same for CPU-like OpenCL devices (style "simd"): weights in their IR
// layout (O, I); a work item makes RB dot products of a weight row with 8-wide
// vector loads, which a CPU compiler keeps in vector registers (PoCL does not
// vectorize across the work items of fully_connected). global: (O, ceil(R / RB))
__kernel void fully_connected_rows(__global const T* x, __global const T* w, __global const T* bias,
                                   __global T* out, int R, int I, int O, int has_bias,
                                   int act, float act_a, float act_b)
{
    int o = get_global_id(0), r0 = get_global_id(1) * RB;
    if (o >= O) return;
    int rows = min(RB, R - r0);
    float8 acc[RB];
    for (int j = 0; j < RB; ++j) acc[j] = 0.0f;
    __global const T* wr = w + o * I;
    int i8 = I & ~7;
    for (int i = 0; i < i8; i += 8) {
        float8 wv = LD8(wr, i);
        for (int j = 0; j < rows; ++j) acc[j] = mad(LD8(x, (r0 + j) * I + i), wv, acc[j]);
    }
    float b = has_bias ? LD(bias, o) : 0.0f;
    for (int j = 0; j < rows; ++j) {
        float8 a = acc[j];
        float s = ((a.s0 + a.s1) + (a.s2 + a.s3)) + ((a.s4 + a.s5) + (a.s6 + a.s7));
        for (int i = i8; i < I; ++i) s = mad(LD(x, (r0 + j) * I + i), LD(wr, i), s);
        ST(out, (r0 + j) * O + o, activate(s + b, act, act_a, act_b));
    }
}

// GPUs at small batches: a work-group reduction per output (a GEMV, or a skinny
// GEMM for up to GRB rows of the batch a pass over the weights). Weights in
// their IR layout (O, I): the lx work items of an output read neighbouring
// 4-value chunks of its row (coalesced), each accumulates GRB partial sums, and a
// tree in __local memory adds them. opw outputs a work group.
// -D GRB=..; global: (lx, ceil(O / opw) * opw, ceil(R / GRB)), local: (lx, opw, 1);
// part: lx * opw * GRB floats of __local memory
#ifndef GRB
#define GRB 1
#endif
__kernel void fc_gemv(__global const T* x, __global const T* w, __global const T* bias, __global T* out,
                      int R, int I, int O, int has_bias, int act, float act_a, float act_b, __local float* part)
{
    int lx = get_local_id(0), ly = get_local_id(1), LX = get_local_size(0);
    int o = get_global_id(1), r0 = get_group_id(2) * GRB;
    int rows = min(GRB, R - r0);
    float acc[GRB];
#pragma unroll
    for (int j = 0; j < GRB; ++j) acc[j] = 0.0f;
    if (o < O) {
        __global const T* wr = w + (size_t)o * I;
        __global const T* xr = x + (size_t)r0 * I;
        int I4 = I & ~3;
        for (int i = lx * 4; i < I4; i += LX * 4) {
            float4 wv = LD4(wr, i);
#pragma unroll
            for (int j = 0; j < GRB; ++j)
                if (j < rows) acc[j] += dot(wv, LD4(xr, j * I + i));
        }
        for (int i = I4 + lx; i < I; i += LX) {
            float wv = LD(wr, i);
#pragma unroll
            for (int j = 0; j < GRB; ++j)
                if (j < rows) acc[j] = mad(wv, LD(xr, j * I + i), acc[j]);
        }
    }
    __local float* mine = part + ly * GRB * LX;
#pragma unroll
    for (int j = 0; j < GRB; ++j) mine[j * LX + lx] = acc[j];
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int half_ = LX / 2; half_ > 0; half_ >>= 1) {
        if (lx < half_) {
#pragma unroll
            for (int j = 0; j < GRB; ++j) mine[j * LX + lx] += mine[j * LX + lx + half_];
        }
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (lx == 0 && o < O) {
        float b = has_bias ? LD(bias, o) : 0.0f;
        for (int j = 0; j < rows; ++j) ST(out, (r0 + j) * O + o, activate(mine[j * LX] + b, act, act_a, act_b));
    }
}

// GPUs at batch 2 to 64: a skinny GEMM that reads the batch's rows once per work
// group instead of once per output (fc_gemv with GRB rows reads all of x for each
// output: for AlexNet's fc6 at batch 8 that is 1.2 GB through the cache by arithmetic,
// 8x its weights' bytes). A work group is LX x NY work items; each row of LX (a warp on NVIDIA)
// computes OPT outputs for GRB rows of the batch, its lanes taking 4-value chunks
// of the weight rows (coalesced); a chunk of KC values of the GRB rows of x is
// staged in __local memory and shared by the group's NY * OPT outputs; a row's
// partial sums are added across its lanes at the end.
// -D GRB=.. -D OPT=.. -D KC=..; global: (LX, ceil(O / (NY * OPT)) * NY, ceil(R / GRB)),
// local: (LX, NY, 1); xs: max(GRB * KC, NY * OPT * GRB * (LX + 1)) floats of __local memory
#ifndef OPT
#define OPT 4
#endif
#ifndef KC
#define KC 512
#endif
__kernel void fc_block(__global const T* x, __global const T* w, __global const T* bias, __global T* out,
                       int R, int I, int O, int has_bias, int act, float act_a, float act_b, __local float* xs)
{
    int lx = get_local_id(0), ly = get_local_id(1), LX = get_local_size(0), NY = get_local_size(1);
    int tid = ly * LX + lx, nt = LX * NY;
    int o0 = (get_group_id(1) * NY + ly) * OPT, r0 = get_group_id(2) * GRB;
    int rows = min(GRB, R - r0);
    float acc[OPT][GRB];
#pragma unroll
    for (int p = 0; p < OPT; ++p)
#pragma unroll
        for (int j = 0; j < GRB; ++j) acc[p][j] = 0.0f;
    __global const T* xr = x + (size_t)r0 * I;
    for (int c0 = 0; c0 < I; c0 += KC) {
        int kc = min(KC, I - c0), kc4 = kc & ~3;
        barrier(CLK_LOCAL_MEM_FENCE);
        for (int e = tid * 4; e < GRB * KC; e += nt * 4) {  // 4 values a load where a row has them
            int j = e / KC, i = e - j * KC;
            size_t at = (size_t)j * I + c0 + i;
            float4 v = 0.0f;
            if (j < rows && i + 3 < kc)
                v = LD4(xr, at);
            else if (j < rows)
                for (int t = 0; t < 4 && i + t < kc; ++t) ((float*)&v)[t] = LD(xr, at + t);
            vstore4(v, 0, xs + e);
        }
        barrier(CLK_LOCAL_MEM_FENCE);
        for (int i = lx * 4; i < kc4; i += LX * 4) {
            float4 xv[GRB];
#pragma unroll
            for (int j = 0; j < GRB; ++j) xv[j] = vload4(0, xs + j * KC + i);
#pragma unroll
            for (int p = 0; p < OPT; ++p) {
                if (o0 + p < O) {
                    float4 wv = LD4(w, (size_t)(o0 + p) * I + c0 + i);
#pragma unroll
                    for (int j = 0; j < GRB; ++j) acc[p][j] += dot(wv, xv[j]);
                }
            }
        }
        int i = kc4 + lx;
        if (i < kc) {
#pragma unroll
            for (int p = 0; p < OPT; ++p) {
                if (o0 + p < O) {
                    float wv = LD(w, (size_t)(o0 + p) * I + c0 + i);
#pragma unroll
                    for (int j = 0; j < GRB; ++j) acc[p][j] = mad(wv, xs[j * KC + i], acc[p][j]);
                }
            }
        }
    }
    // the lanes' partial sums: one row of LX + 1 (no bank conflicts) per (ly, p, j)
    barrier(CLK_LOCAL_MEM_FENCE);
#pragma unroll
    for (int p = 0; p < OPT; ++p)
#pragma unroll
        for (int j = 0; j < GRB; ++j) xs[((ly * OPT + p) * GRB + j) * (LX + 1) + lx] = acc[p][j];
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int q = tid; q < NY * OPT * GRB; q += nt) {
        int j = q % GRB, p = (q / GRB) % OPT, y = q / (GRB * OPT);
        int o = (get_group_id(1) * NY + y) * OPT + p;
        if (o >= O || j >= rows) continue;
        float s = 0.0f;
        for (int l = 0; l < LX; ++l) s += xs[q * (LX + 1) + l];
        float b = has_bias ? LD(bias, o) : 0.0f;
        ST(out, (size_t)(r0 + j) * O + o, activate(s + b, act, act_a, act_b));
    }
}

// MatMul of two tensors (attention): out[b] = op(A[b]) @ op(B[b]), op a transpose of the last two axes when
// ta / tb; a batch stride of 0 broadcasts that operand (its batch is 1). One work item per output value:
// these products are small next to the dense layers around them.
__kernel void matmul_batched(__global const T* a, __global const T* b, __global T* out, int m, int n, int k,
                             int a_stride, int b_stride, int ta, int tb)
{
    int col = get_global_id(0), row = get_global_id(1), batch = get_global_id(2);
    if (col >= n || row >= m) return;
    __global const T* pa = a + batch * a_stride;
    __global const T* pb = b + batch * b_stride;
    float acc = 0.0f;
    for (int i = 0; i < k; ++i) {
        float va = ta ? LD(pa, i * m + row) : LD(pa, row * k + i);
        float vb = tb ? LD(pb, col * k + i) : LD(pb, i * n + col);
        acc = mad(va, vb, acc);
    }
    ST(out, (batch * m + row) * n + col, acc);
}
