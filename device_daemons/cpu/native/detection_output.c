/* DetectionOutput for the fast CPU backend: box decoding, per-class NMS (nms.c's
 * mo_nms_classes), the keep_top_k cut and the output rows, as kernels/detection.py's
 * DetectionOutput.forward computes them (its numpy code is the reference: decoding in
 * double, then float32; the same order of operations; tests/cpu/test_cpu_nms.py compares
 * the two). Small SSD and Faster R-CNN heads spent most of their DetectionOutput time in
 * numpy's per-call overhead. Built once per machine by native_build.py, with nms.c. The
 * decoding, the gathering of the scores and the NMS (over the classes) are shared out over
 * the calling thread's OpenMP team on large heads (PARALLEL_WORK): each element's value
 * does not depend on the thread that computes it. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "nms.c"  /* (one library: native_build.py hashes the files a source includes so) */

enum { CORNER = 0, CENTER_SIZE = 1, CORNER_SIZE = 2 };

static float clip01(float v) { return v < 0.0f ? 0.0f : v > 1.0f ? 1.0f : v; }

/* the area of a detected box as written (clipped after NMS or not) is above zero: the TF
 * Object Detection API drops the others (clip_to_window's filter_nonoverlapping) */
static int has_area(const float *b, int clip_after)
{
    float c[4];
    for (int j = 0; j < 4; ++j) c[j] = clip_after ? clip01(b[j]) : b[j];
    return (c[2] - c[0]) * (c[3] - c[1]) > 0.0f;
}

struct ranked { float score; int64_t q; };

static int by_score(const void *a, const void *b)  /* score descending, then position */
{
    const struct ranked *x = a, *y = b;
    if (x->score != y->score)
        return x->score > y->score ? -1 : 1;
    return (x->q > y->q) - (x->q < y->q);
}

static int by_position(const void *a, const void *b)
{
    const struct ranked *x = a, *y = b;
    return (x->q > y->q) - (x->q < y->q);
}

/* loc (n, priors, loc_classes, 4); conf (n, priors, classes); prior (priors, 4) corner boxes
 * and var (priors, 4) in double; labels: the classes but the background, n_labels of them.
 * drop_empty: a detection whose box (as written) has no area is dropped before the keep_top_k cut.
 * out (out_rows, 7) is filled: the detections, then one row starting -1, then zeros.
 * Returns the number of detections, or -1 when scratch memory cannot be had. */
int64_t mo_detection_output(const float *loc, const float *conf, const double *prior, const double *var,
                            int64_t n, int64_t priors, int64_t classes, int64_t loc_classes, int code_type,
                            const int64_t *labels, int64_t n_labels, float threshold, float nms_threshold,
                            float eta, int64_t top_k, int64_t keep_top_k, int clip_before, int clip_after,
                            int drop_empty, float *out, int64_t out_rows)
{
    int64_t cap = top_k < 0 || top_k > priors ? priors : top_k;
    int64_t per_label = cap > 0 ? cap : 1;  /* kept: per_label entries a label (mo_nms_classes) */
    int64_t labels_n = n_labels ? n_labels : 1;  /* (at least one: malloc(0) may give NULL) */
    int64_t groups = loc_classes > 1 ? n_labels : 1;
    float *decoded = malloc(sizeof(float) * loc_classes * priors * 4);
    float *boxes = malloc(sizeof(float) * groups * priors * 4);
    float *scores = malloc(sizeof(float) * labels_n * priors);
    int32_t *kept = malloc(sizeof(int32_t) * labels_n * per_label);
    int64_t *counts = malloc(sizeof(int64_t) * labels_n);
    int64_t *pos = malloc(sizeof(int64_t) * (labels_n * per_label + 1));
    if (!decoded || !boxes || !scores || !kept || !counts || !pos) {
        free(decoded); free(boxes); free(scores); free(kept); free(counts); free(pos);
        return -1;
    }
    memset(out, 0, sizeof(float) * out_rows * 7);
    int64_t written = 0;
    for (int64_t i = 0; i < n && written < out_rows; ++i) {
        const float *l = loc + i * priors * loc_classes * 4;
        const float *c = conf + i * priors * classes;
        #pragma omp parallel for collapse(2) if (loc_classes * priors >= PARALLEL_WORK)
        for (int64_t g = 0; g < loc_classes; ++g) {
            for (int64_t p = 0; p < priors; ++p) {
                const double *b = prior + p * 4, *v = var + p * 4;
                const float *t = l + (p * loc_classes + g) * 4;
                double x1, y1, x2, y2;
                double pw = b[2] - b[0], ph = b[3] - b[1];
                if (code_type == CORNER) {
                    x1 = b[0] + v[0] * t[0]; y1 = b[1] + v[1] * t[1];
                    x2 = b[2] + v[2] * t[2]; y2 = b[3] + v[3] * t[3];
                } else if (code_type == CORNER_SIZE) {
                    x1 = b[0] + v[0] * t[0] * pw; y1 = b[1] + v[1] * t[1] * ph;
                    x2 = b[2] + v[2] * t[2] * pw; y2 = b[3] + v[3] * t[3] * ph;
                } else {
                    double pcx = (b[0] + b[2]) / 2.0, pcy = (b[1] + b[3]) / 2.0;
                    double cx = v[0] * t[0] * pw + pcx, cy = v[1] * t[1] * ph + pcy;
                    double w = exp(v[2] * t[2]) * pw, h = exp(v[3] * t[3]) * ph;
                    x1 = cx - w / 2.0; y1 = cy - h / 2.0; x2 = cx + w / 2.0; y2 = cy + h / 2.0;
                }
                float *d = decoded + (g * priors + p) * 4;
                d[0] = (float)x1; d[1] = (float)y1; d[2] = (float)x2; d[3] = (float)y2;
                if (clip_before)
                    for (int k = 0; k < 4; ++k) d[k] = clip01(d[k]);
            }
        }
        /* the boxes of each label (shared: the one group), the scores label by label */
        if (loc_classes > 1)
            for (int64_t k = 0; k < n_labels; ++k)
                memcpy(boxes + k * priors * 4, decoded + labels[k] * priors * 4, sizeof(float) * priors * 4);
        else
            memcpy(boxes, decoded, sizeof(float) * priors * 4);
        #pragma omp parallel for if (n_labels * priors >= PARALLEL_WORK)
        for (int64_t k = 0; k < n_labels; ++k)
            for (int64_t p = 0; p < priors; ++p)
                scores[k * priors + p] = c[p * classes + labels[k]];
        if (mo_nms_classes(boxes, groups, scores, n_labels, priors, threshold, nms_threshold, eta, top_k, kept,
                           counts)) {
            written = -1;
            break;
        }
        /* the kept ones label by label (each in NMS order); over keep_top_k, the best
         * keep_top_k by score (ties: the earlier), still in that order */
        int64_t total = 0;
        for (int64_t k = 0; k < n_labels; ++k)
            for (int64_t j = 0; j < counts[k]; ++j) {
                const float *b = boxes + ((groups > 1 ? k : 0) * priors + kept[k * per_label + j]) * 4;
                if (!drop_empty || has_area(b, clip_after))  /* (before the keep_top_k cut, as the OD API) */
                    pos[total++] = k * per_label + j;
            }
        int64_t take = total;
        if (keep_top_k > -1 && keep_top_k < total) {
            /* the best keep_top_k by score, ties the earlier: sorted, then back in position order */
            struct ranked *r = malloc(sizeof(struct ranked) * total);
            if (!r) { written = -1; break; }
            for (int64_t q = 0; q < total; ++q) {
                int64_t k = pos[q] / per_label;
                r[q].score = scores[k * priors + kept[pos[q]]];
                r[q].q = q;
            }
            qsort(r, total, sizeof(struct ranked), by_score);
            qsort(r, keep_top_k, sizeof(struct ranked), by_position);
            for (int64_t q = 0; q < keep_top_k; ++q)
                r[q].q = pos[r[q].q];
            for (int64_t q = 0; q < keep_top_k; ++q)
                pos[q] = r[q].q;
            free(r);
            take = keep_top_k;
        }
        for (int64_t q = 0; q < take && written < out_rows; ++q) {
            int64_t k = pos[q] / per_label;
            int64_t p = kept[pos[q]];
            const float *b = boxes + ((groups > 1 ? k : 0) * priors + p) * 4;
            float *row = out + written * 7;
            row[0] = (float)i;
            row[1] = (float)labels[k];
            row[2] = scores[k * priors + p];
            for (int j = 0; j < 4; ++j) row[3 + j] = clip_after ? clip01(b[j]) : b[j];
            ++written;
        }
    }
    if (written >= 0 && written < out_rows)
        out[written * 7] = -1.0f;  /* the end marker, then zeros (as OpenVINO writes it) */
    free(decoded); free(boxes); free(scores); free(kept); free(counts); free(pos);
    return written;
}
