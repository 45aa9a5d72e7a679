// Winograd F(2x2, 3x3) for 3x3 stride-1 convolutions (group 1): each 2x2 block of
// outputs ("tile") comes from a 4x4 patch of the input with 16 multiplies per
// input channel instead of 36. Three launches:
//   wino_in   V[e][c][t] = (B^T d B)[e] for the 4x4 patch d of channel c under tile t
//   GEMM      M[e][m][t] = sum_c U[e][m][c] * V[e][c][t]   (tiled.cl's conv_tiled or
//             conv_mma with 16 groups: V is one "image" of 16*C channels of T pixels)
//   wino_out  the 2x2 outputs A^T M A of tile t, channel m, with the epilogue of
//             the other convolution kernels (bias, an Eltwise sum's other input,
//             activation, a place in a Concat's buffer)
// U = G g G^T is made on the host once. Tiles: t = (image * TH + ty) * TW + tx,
// TH = ceil(OH / 2), TW = ceil(OW / 2); a tile past the output's edge computes
// values nobody stores.

// global: (T rounded up, C)
__kernel void wino_in(__global const T* x, __global T* v, int C, int H, int W, int PH, int PW, int TH, int TW,
                      int NT)
{
    int t = get_global_id(0), c = get_global_id(1);
    if (t >= NT) return;
    int image = t / (TH * TW), r = t - image * TH * TW, ty = r / TW, tx = r - ty * TW;
    int y0 = 2 * ty - PH, x0 = 2 * tx - PW;
    __global const T* xc = x + ((size_t)image * C + c) * H * W;
    float d[4][4];
#pragma unroll
    for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            int iy = y0 + i, ix = x0 + j;
            d[i][j] = (iy >= 0 && iy < H && ix >= 0 && ix < W) ? LD(xc, iy * W + ix) : 0.0f;
        }
    // B^T d (rows), then (B^T d) B (columns); B^T = [1 0 -1 0; 0 1 1 0; 0 -1 1 0; 0 1 0 -1]
    float b[4][4];
#pragma unroll
    for (int j = 0; j < 4; ++j) {
        b[0][j] = d[0][j] - d[2][j];
        b[1][j] = d[1][j] + d[2][j];
        b[2][j] = d[2][j] - d[1][j];
        b[3][j] = d[1][j] - d[3][j];
    }
    size_t plane = (size_t)C * NT, at = (size_t)c * NT + t;
#pragma unroll
    for (int i = 0; i < 4; ++i) {
        ST(v, (4 * i + 0) * plane + at, b[i][0] - b[i][2]);
        ST(v, (4 * i + 1) * plane + at, b[i][1] + b[i][2]);
        ST(v, (4 * i + 2) * plane + at, b[i][2] - b[i][1]);
        ST(v, (4 * i + 3) * plane + at, b[i][1] - b[i][3]);
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
    float q[4][4];
#pragma unroll
    for (int e = 0; e < 16; ++e) q[e / 4][e % 4] = LD(mo, e * plane + at);
    // A^T q A, A^T = [1 1 1 0; 0 1 -1 -1]
    float s[2][4];
#pragma unroll
    for (int j = 0; j < 4; ++j) {
        s[0][j] = q[0][j] + q[1][j] + q[2][j];
        s[1][j] = q[1][j] - q[2][j] - q[3][j];
    }
    float bv = has_bias ? LD(bias, m) : 0.0f;
    int P = OH * OW;
#pragma unroll
    for (int i = 0; i < 2; ++i) {
        int oy = 2 * ty + i;
        if (oy >= OH) continue;
        float y2[2] = {s[i][0] + s[i][1] + s[i][2], s[i][1] - s[i][2] - s[i][3]};
#pragma unroll
        for (int j = 0; j < 2; ++j) {
            int ox = 2 * tx + j;
            if (ox >= OW) continue;
            int pix = oy * OW + ox;
            float value = y2[j] + bv;
            if (has_res) value += LD(res, ((size_t)image * O + m) * P + pix);
            ST(out, out_offset + image * out_image + m * P + pix, activate(value, act, act_a, act_b));
        }
    }
}
