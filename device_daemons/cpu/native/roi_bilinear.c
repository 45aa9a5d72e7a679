/* ROIPooling method=bilinear (TensorFlow's crop_and_resize) for the fast CPU backend:
 * kernels/roi_pooling.py's roi_bilinear is the reference (and runs where no compiler is);
 * tests/cpu/test_cpu_roi_bilinear.py checks both against TensorFlow.
 * mo_roi_bilinear_nhwc works on channels-last tensors (the oneDNN op of
 * onednn/roi_crop.py): each output pixel is the same interpolation of four pixel vectors,
 * contiguous over the channels (vectorized), optionally max-pooled in the same pass.
 * mo_roi_bilinear works on NCHW numpy arrays: per ROI and channel
 * the map's rows are first interpolated across (each row the output needs, at the output
 * columns), then each output row between two of them: the float32 operations and their
 * order are TensorFlow's (top = tl + (tr - tl) * dx, bottom likewise, top + (bottom - top)
 * * dy): each map row is interpolated across once, however many output rows read it,
 * and the second pass is contiguous over the output columns (vectorized). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* The sample positions of one ROI side in map pixels, as kernels/roi_pooling.py's _grid:
 * in double, then split into the lower pixel, the upper one (clamped), the float32 weight
 * and whether the sample lies on the map. */
static void grid(double start, double end, int64_t size, int64_t pooled, int64_t *lo, int64_t *hi, float *d,
                 unsigned char *ok)
{
    for (int64_t i = 0; i < pooled; ++i) {
        double pos = pooled > 1 ? start * (double)(size - 1) + (double)i * ((end - start) * (double)(size - 1)
                                                                            / (double)(pooled - 1))
                                : 0.5 * (start + end) * (double)(size - 1);
        ok[i] = pos >= 0 && pos <= (double)(size - 1);
        double f = (double)(int64_t)pos;  /* floor and ceil without libm (|pos| is small) */
        if (f > pos)
            f -= 1.0;
        double c = f == pos ? f : f + 1.0;
        d[i] = (float)(pos - f);
        int64_t a = (int64_t)f, b = (int64_t)c;
        lo[i] = a < 0 ? 0 : a > size - 1 ? size - 1 : a;
        hi[i] = b < 0 ? 0 : b > size - 1 ? size - 1 : b;
    }
}

/* feat (n, c, h, w); rois (rois_total, 5) [batch, x1, y1, x2, y2] normalized; batch[r] the
 * checked batch index of each of the first `count` ROIs; out (rois_total, c, ph, pw), every
 * value written (zeros outside the map and after `count`).
 * Returns 0, or -1 when scratch memory cannot be had. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
__attribute__((target_clones("avx2", "default")))
#endif
int mo_roi_bilinear(const float *feat, int64_t c, int64_t h, int64_t w, const float *rois, const int64_t *batch,
                    int64_t count, int64_t rois_total, int64_t ph, int64_t pw, float *out)
{
    int64_t *ylo = malloc(sizeof(int64_t) * (2 * ph + 2 * pw));
    float *dyx = malloc(sizeof(float) * (ph + pw));
    unsigned char *oks = malloc(ph + pw);
    float *across = malloc(sizeof(float) * h * pw);  /* each map row the ROI reads, at the output columns */
    if (!ylo || !dyx || !oks || !across) { free(ylo); free(dyx); free(oks); free(across); return -1; }
    int64_t *yhi = ylo + ph, *xlo = ylo + 2 * ph, *xhi = xlo + pw;
    float *dy = dyx, *dx = dyx + ph;
    unsigned char *yok = oks, *xok = oks + ph;
    for (int64_t r = 0; r < count; ++r) {
        const float *roi = rois + r * 5;
        grid(roi[2], roi[4], h, ph, ylo, yhi, dy, yok);
        grid(roi[1], roi[3], w, pw, xlo, xhi, dx, xok);
        int64_t first = h, last = -1;  /* the map rows some output row reads */
        for (int64_t i = 0; i < ph; ++i) {
            if (!yok[i])
                continue;
            first = ylo[i] < first ? ylo[i] : first;
            last = yhi[i] > last ? yhi[i] : last;
        }
        const float *plane = feat + batch[r] * c * h * w;
        float *o = out + r * c * ph * pw;
        for (int64_t ch = 0; ch < c; ++ch, plane += h * w, o += ph * pw) {
            for (int64_t y = first; y <= last; ++y) {
                const float *line = plane + y * w;
                float *a = across + y * pw;
                for (int64_t j = 0; j < pw; ++j) {
                    float left = line[xlo[j]], right = line[xhi[j]];
                    a[j] = left + (right - left) * dx[j];
                }
            }
            for (int64_t i = 0; i < ph; ++i) {
                float *row = o + i * pw;
                if (!yok[i]) {
                    memset(row, 0, sizeof(float) * pw);
                    continue;
                }
                const float *t = across + ylo[i] * pw, *b = across + yhi[i] * pw;
                float di = dy[i];
                for (int64_t j = 0; j < pw; ++j) {
                    float v = t[j] + (b[j] - t[j]) * di;
                    row[j] = xok[j] ? v : 0.0f;
                }
            }
        }
    }
    memset(out + count * c * ph * pw, 0, sizeof(float) * (rois_total - count) * c * ph * pw);  /* after the end marker */
    free(ylo);
    free(dyx);
    free(oks);
    free(across);
    return 0;
}

/* The same sampling, channels last: feat (n, h, w, c), every value of out written (zeros
 * outside the map and from `count` on). With a kh x kw max pooling after it (stride the
 * kernel, no padding: kh = kw = 1 for none), out is the pooled crops (rois_total, ph / kh,
 * pw / kw, c), each the maximum of its window's samples - the values the crop would have
 * written, so the result is the unfused pair's, without the crops ever in memory. The
 * float32 operations per sample are mo_roi_bilinear's (TensorFlow's). Returns 0, or -1
 * when scratch memory cannot be had. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
__attribute__((target_clones("avx512f", "avx2", "default")))
#endif
int mo_roi_bilinear_nhwc(const float *feat, int64_t c, int64_t h, int64_t w, const float *rois,
                         const int64_t *batch, int64_t count, int64_t rois_total, int64_t ph, int64_t pw,
                         int64_t kh, int64_t kw, float *out)
{
    int64_t *ylo = malloc(sizeof(int64_t) * (2 * ph + 2 * pw));
    float *dyx = malloc(sizeof(float) * (ph + pw));
    unsigned char *oks = malloc(ph + pw);
    if (!ylo || !dyx || !oks) { free(ylo); free(dyx); free(oks); return -1; }
    int64_t *yhi = ylo + ph, *xlo = ylo + 2 * ph, *xhi = xlo + pw;
    float *dy = dyx, *dx = dyx + ph;
    unsigned char *yok = oks, *xok = oks + ph;
    int64_t oh = ph / kh, ow = pw / kw;
    for (int64_t r = 0; r < rois_total; ++r) {
        float *o = out + r * oh * ow * c;
        if (r >= count) {
            memset(o, 0, sizeof(float) * oh * ow * c);  /* after the end marker */
            continue;
        }
        const float *roi = rois + r * 5;
        grid(roi[2], roi[4], h, ph, ylo, yhi, dy, yok);
        grid(roi[1], roi[3], w, pw, xlo, xhi, dx, xok);
        const float *map = feat + batch[r] * h * w * c;
        for (int64_t oi = 0; oi < oh; ++oi) {
            for (int64_t oj = 0; oj < ow; ++oj, o += c) {
                for (int64_t s = 0; s < kh * kw; ++s) {  /* the window's samples, the first written as it is */
                    int64_t i = oi * kh + s / kw, j = oj * kw + s % kw;
                    if (!yok[i] || !xok[j]) {  /* a sample off the map is 0 */
                        if (s == 0)
                            memset(o, 0, sizeof(float) * c);
                        else
                            for (int64_t k = 0; k < c; ++k)
                                o[k] = o[k] > 0.0f ? o[k] : 0.0f;
                        continue;
                    }
                    const float *t = map + ylo[i] * w * c, *b = map + yhi[i] * w * c;
                    const float *tl = t + xlo[j] * c, *tr = t + xhi[j] * c, *bl = b + xlo[j] * c, *br = b + xhi[j] * c;
                    float di = dy[i], dj = dx[j];
                    for (int64_t k = 0; k < c; ++k) {
                        float top = tl[k] + (tr[k] - tl[k]) * dj;
                        float bottom = bl[k] + (br[k] - bl[k]) * dj;
                        float v = top + (bottom - top) * di;
                        o[k] = s == 0 || v > o[k] ? v : o[k];
                    }
                }
            }
        }
    }
    free(ylo);
    free(dyx);
    free(oks);
    return 0;
}
