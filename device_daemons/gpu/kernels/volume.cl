// 3-D windows over NCDHW volumes (video, scans): Convolution (grouped, dilated, padded), Deconvolution and
// Pooling, direct kernels (the CPU kernels' volume.py; convolution.cl and pooling.cl are the 2-D ones, which
// these follow axis for axis, the depth axis added in front of H and W).
//
// The convolutions: a work item computes OCB output channels of one output value (its weights packed on the
// host as convolution.cl's conv_direct has them, [group][block of OCB channels][in channel][kz][ky][kx][OCB],
// zero-padded to whole blocks), so that an input value is loaded once for OCB multiply-adds; float sums, the
// epilogue of convolution.cl (bias, an Eltwise sum's other input, the activation, a Concat slice).
#define OCB 8

#define OUT_ARGS __global const T* res, int out_offset, int out_image, int has_res
#define PUT(n, oc, plane, pixel, O, v)                                                           \
    {                                                                                            \
        float v_ = (v);                                                                          \
        if (has_res) v_ += LD(res, ((n) * (O) + (oc)) * (plane) + (pixel));                      \
        ST(out, out_offset + (n) * out_image + (oc) * (plane) + (pixel), activate(v_, act, act_a, act_b)); \
    }

// A work item of conv3d / deconv3d: output value (od, oy, ox), block b of OCB output channels of group g,
// image n; acc the OCB sums; xg / wb the group's input volumes and the block's packed weights.
// global: (OW rounded up, OD * OH, N * G * blocks)
#define VOLUME_PROLOGUE                                                                  \
    int ox = get_global_id(0), zy = get_global_id(1), z = get_global_id(2);             \
    if (ox >= OW) return;                                                                \
    int oy = zy % OH, od = zy / OH;                                                      \
    int b = z % blocks, t = z / blocks, g = t % G, n = t / G;                            \
    float acc[OCB];                                                                      \
    for (int i = 0; i < OCB; ++i) acc[i] = 0.0f;                                         \
    int vol = D * H * W;                                                                 \
    __global const T* xg = x + (n * C + g * ICg) * vol;                                 \
    __global const T* wb = w + (g * blocks + b) * ICg * KD * KH * KW * OCB;

#define VOLUME_EPILOGUE                                                                  \
    int oc0 = g * OCg + b * OCB, left = OCg - b * OCB, pixel = (od * OH + oy) * OW + ox; \
    for (int i = 0; i < OCB; ++i) {                                                      \
        if (i < left) {                                                                  \
            int oc = oc0 + i;                                                            \
            PUT(n, oc, OD * OH * OW, pixel, O, acc[i] + (has_bias ? LD(bias, oc) : 0.0f)) \
        }                                                                                \
    }

#define VOLUME_ARGS                                                                                          \
    __global const T* x, __global const T* w, __global const T* bias, __global T* out,                      \
    int C, int D, int H, int W, int O, int OD, int OH, int OW, int G, int ICg, int OCg, int blocks,          \
    int KD, int KH, int KW, int SD, int SH, int SW, int PD, int PH, int PW, int DD, int DH, int DW,          \
    int has_bias, int act, float act_a, float act_b, OUT_ARGS

// Convolution: out[n][oc][od][oy][ox] = sum over the group's input channels and the window of
// x[iz = od*SD - PD + kz*DD][iy][ix] * weight (0 outside the volume).
__kernel void conv3d(VOLUME_ARGS)
{
    VOLUME_PROLOGUE
    int iz0 = od * SD - PD, iy0 = oy * SH - PH, ix0 = ox * SW - PW;
    for (int ic = 0; ic < ICg; ++ic) {
        __global const T* xc = xg + ic * vol;
        for (int kz = 0; kz < KD; ++kz) {
            int iz = iz0 + kz * DD;
            if (iz < 0 || iz >= D) continue;
            for (int ky = 0; ky < KH; ++ky) {
                int iy = iy0 + ky * DH;
                if (iy < 0 || iy >= H) continue;
                __global const T* row = xc + (iz * H + iy) * W;
                __global const T* wk = wb + (((ic * KD + kz) * KH + ky) * KW) * OCB;
                for (int kx = 0; kx < KW; ++kx) {
                    int ix = ix0 + kx * DW;
                    if (ix < 0 || ix >= W) continue;
                    float v = LD(row, ix);
                    for (int i = 0; i < OCB; ++i) acc[i] = mad(v, LD(wk, kx * OCB + i), acc[i]);
                }
            }
        }
    }
    VOLUME_EPILOGUE
}

// Deconvolution as a gather (convolution.cl's deconv, one axis more): output (od, oy, ox) takes input
// (iz, iy, ix) through tap (kz, ky, kx) when od + PD - kz*DD = iz*SD (and so on); the begin padding is
// cropped off, the end padding only shortens the output. Weights from Caffe's [C_in][C_out/g][KD][KH][KW].
__kernel void deconv3d(VOLUME_ARGS)
{
    VOLUME_PROLOGUE
    for (int kz = 0; kz < KD; ++kz) {
        int tz = od + PD - kz * DD;
        if (tz < 0 || tz % SD) continue;
        int iz = tz / SD;
        if (iz >= D) continue;
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
                int at = (iz * H + iy) * W + ix;
                __global const T* wk = wb + ((kz * KH + ky) * KW + kx) * OCB;
                for (int ic = 0; ic < ICg; ++ic) {
                    float v = LD(xg, ic * vol + at);
                    __global const T* wi = wk + ic * KD * KH * KW * OCB;
                    for (int i = 0; i < OCB; ++i) acc[i] = mad(v, LD(wi, i), acc[i]);
                }
            }
        }
    }
    VOLUME_EPILOGUE
}

// Pooling, Caffe semantics per axis as pooling.cl's pool: max over the volume's values of the window
// (padding never wins); avg divides their sum by the window clipped to the padded volume, or by the
// number of the volume's values in it (exclude_pad). A work item per output value.
// global: (OW rounded up, OD * OH, N * C)
__kernel void pool3d(__global const T* x, __global T* out, int D, int H, int W, int OD, int OH, int OW,
                     int KD, int KH, int KW, int SD, int SH, int SW, int PD, int PH, int PW,
                     int PD_END, int PH_END, int PW_END, int is_max, int exclude_pad)
{
    int ox = get_global_id(0), zy = get_global_id(1), c = get_global_id(2);
    if (ox >= OW) return;
    int oy = zy % OH, od = zy / OH;
    int z0 = od * SD - PD, y0 = oy * SH - PH, x0 = ox * SW - PW;
    int z1 = min(z0 + KD, D + PD_END), y1 = min(y0 + KH, H + PH_END), x1 = min(x0 + KW, W + PW_END);
    int za = max(z0, 0), ya = max(y0, 0), xa = max(x0, 0), zb = min(z1, D), yb = min(y1, H), xb = min(x1, W);
    __global const T* xc = x + c * D * H * W;
    float r = is_max ? -INFINITY : 0.0f;
    for (int zz = za; zz < zb; ++zz)
        for (int y = ya; y < yb; ++y) {
            __global const T* row = xc + (zz * H + y) * W;
            if (is_max)
                for (int xx = xa; xx < xb; ++xx) r = fmax(r, LD(row, xx));
            else
                for (int xx = xa; xx < xb; ++xx) r += LD(row, xx);
        }
    if (!is_max) {
        int count = exclude_pad ? (zb - za) * (yb - ya) * (xb - xa) : (z1 - z0) * (y1 - y0) * (x1 - x0);
        r /= (float)count;
    }
    ST(out, (c * OD + od) * OH * OW + oy * OW + ox, r);
}
