/* DetectionOutput for the fast CPU backend: box decoding, per-class NMS (nms.c's
 * mo_nms_classes; with keep_top_k, best_first_nms: only as far as the rows written need),
 * the keep_top_k cut and the output rows, as kernels/detection.py's
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

/* A label's kept boxes in best_first_nms: corners and sizes (five arrays of cap in v),
 * grown as needed (most labels keep few: no label gets room for all its candidates) */
struct kept_boxes { float *v; int64_t n, cap; float adaptive; };

static int keep_box(struct kept_boxes *k, float x1, float y1, float x2, float y2, float size)
{
    if (k->n == k->cap) {
        int64_t cap = k->cap ? 2 * k->cap : 16;
        float *v = malloc(sizeof(float) * cap * 5);
        if (!v) return -1;
        for (int j = 0; j < 5 && k->n; ++j) memcpy(v + j * cap, k->v + j * k->cap, sizeof(float) * k->n);
        free(k->v);
        k->v = v;
        k->cap = cap;
    }
    float *v = k->v;
    int64_t c = k->cap, n = k->n++;
    v[n] = x1; v[c + n] = y1; v[2 * c + n] = x2; v[3 * c + n] = y2; v[4 * c + n] = size;
    return 0;
}

/* the labels' next candidates in a heap, best first: score key, then label */
struct head { uint32_t key; int32_t label; };

static int before(struct head a, struct head b) { return a.key > b.key || (a.key == b.key && a.label < b.label); }

static void sift_down(struct head *h, int64_t n, int64_t i)
{
    for (;;) {
        int64_t l = 2 * i + 1, r = l + 1, m = i;
        if (l < n && before(h[l], h[m])) m = l;
        if (r < n && before(h[r], h[m])) m = r;
        if (m == i) return;
        struct head t = h[i]; h[i] = h[m]; h[m] = t;
        i = m;
    }
}

/* mo_nms_classes' greedy NMS of every label (the same kept boxes per label, in the same
 * order) for a DetectionOutput that writes its best `want` (keep_top_k) detections only:
 * the candidates of all labels are visited best first - score, then label, then rank
 * in the label, the order of the keep_top_k cut - and the visit stops once `want` kept
 * boxes would be written (has_area, with drop_empty). Each later candidate would lose
 * that cut to every one of them, and a label's boxes are suppressed by better boxes of
 * that label only, so the rows are those of the full NMS and cut; the NMS of the
 * candidates never written (on an SSD head, most) is not computed. kept (classes, cap)
 * and kept_count as mo_nms_classes. Returns 0, or -1 when scratch memory cannot be had. */
VECTOR_CLONES
static int best_first_nms(const float *boxes, int64_t groups, const float *scores, int64_t classes, int64_t priors,
                          float threshold, float nms_threshold, float eta, int64_t top_k, int64_t want,
                          int drop_empty, int clip_after, int32_t *kept, int64_t *kept_count)
{
    int64_t cap = top_k < 0 || top_k > priors ? priors : top_k;
    for (int64_t c = 0; c < classes; ++c) kept_count[c] = 0;
    if (cap <= 0 || want <= 0 || classes <= 0) return 0;  /* (no label: malloc(0) may give NULL) */
    uint32_t *key = malloc(sizeof(uint32_t) * classes * priors);
    int32_t *ix = malloc(sizeof(int32_t) * classes * priors);
    int64_t *n = malloc(sizeof(int64_t) * classes * 2);
    struct head *heap = malloc(sizeof(struct head) * classes);
    struct kept_boxes *k = calloc(classes, sizeof(struct kept_boxes));
    int failed = !key || !ix || !n || !heap || !k;
    if (!failed) {
        /* each label's candidates, best first (shared out over the threads on large heads) */
        #pragma omp parallel if (classes > 1 && classes * priors >= PARALLEL_WORK) reduction(|:failed)
        {
        uint32_t *tkey = malloc(sizeof(uint32_t) * priors);
        int32_t *tix = malloc(sizeof(int32_t) * priors);
        failed = !tkey || !tix;
        #pragma omp for schedule(dynamic, 1)
        for (int64_t c = 0; c < classes; ++c)
            if (!failed)
                n[c] = candidates(scores + c * priors, priors, threshold, cap, key + c * priors, ix + c * priors,
                                  tkey, tix);
        free(tkey);
        free(tix);
        }
    }
    if (!failed) {
        int64_t *at = n + classes, heads = 0, written = 0;
        for (int64_t c = 0; c < classes; ++c) {
            at[c] = 0;
            k[c].adaptive = nms_threshold;
            if (n[c] > 0) heap[heads++] = (struct head){key[c * priors], (int32_t)c};
        }
        for (int64_t i = heads / 2 - 1; i >= 0; --i) sift_down(heap, heads, i);
        while (heads > 0 && written < want) {
            int64_t c = heap[0].label;
            int32_t p = ix[c * priors + at[c]];
            const float *a = boxes + ((groups > 1 ? c : 0) * priors + p) * 4;
            float asz = box_size(a[0], a[1], a[2], a[3]);
            struct kept_boxes *kc = &k[c];
            int64_t kcap = kc->cap;
            if (!suppressed(a[0], a[1], a[2], a[3], asz, kc->v, kc->v + kcap, kc->v + 2 * kcap, kc->v + 3 * kcap,
                            kc->v + 4 * kcap, kc->n, kc->adaptive)) {
                if (keep_box(kc, a[0], a[1], a[2], a[3], asz)) { failed = 1; break; }
                kept[c * cap + kept_count[c]++] = p;
                if (eta < 1 && kc->adaptive > 0.5f) kc->adaptive *= eta;
                written += !drop_empty || has_area(a, clip_after);
            }
            if (++at[c] < n[c])
                heap[0].key = key[c * priors + at[c]];
            else
                heap[0] = heap[--heads];
            sift_down(heap, heads, 0);
        }
    }
    if (k)
        for (int64_t c = 0; c < classes; ++c) free(k[c].v);
    free(key); free(ix); free(n); free(heap); free(k);
    return failed ? -1 : 0;
}

/* loc (n, priors, loc_classes, 4); conf (n, priors, classes); prior (priors, prior_size): corner
 * boxes in its last 4 values, divided by scale[4] unless NULL (R-FCN's priors in pixels); var
 * (priors, 4), NULL: ones (the variances encoded in the offsets); priors and variances decode
 * in double, as the numpy kernel's; labels: the classes but the background, n_labels of them.
 * drop_empty: a detection whose box (as written) has no area is dropped before the keep_top_k cut.
 * out (out_rows, 7) is filled: the detections, then one row starting -1, then zeros.
 * Returns the number of detections, or -1 when scratch memory cannot be had. */
int64_t mo_detection_output(const float *loc, const float *conf, const float *prior, int64_t prior_size,
                            const double *scale, const float *var,
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
    if (!decoded || !boxes || !scores || !kept || !counts) {
        free(decoded); free(boxes); free(scores); free(kept); free(counts);
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
                const float *bp = prior + p * prior_size + prior_size - 4;
                double b[4], v[4];
                for (int j = 0; j < 4; ++j) {
                    b[j] = scale ? (double)bp[j] / scale[j] : (double)bp[j];
                    v[j] = var ? (double)var[p * 4 + j] : 1.0;
                }
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
        if (keep_top_k > -1 ? best_first_nms(boxes, groups, scores, n_labels, priors, threshold, nms_threshold, eta,
                                             top_k, keep_top_k, drop_empty, clip_after, kept, counts)
                            : mo_nms_classes(boxes, groups, scores, n_labels, priors, threshold, nms_threshold, eta,
                                             top_k, kept, counts)) {
            written = -1;
            break;
        }
        /* the kept ones label by label, each in NMS order (no more than keep_top_k: best_first_nms),
         * but those of no area with drop_empty (which best_first_nms did not count either) */
        for (int64_t k = 0; k < n_labels; ++k)
            for (int64_t j = 0; j < counts[k] && written < out_rows; ++j) {
                int64_t p = kept[k * per_label + j];
                const float *b = boxes + ((groups > 1 ? k : 0) * priors + p) * 4;
                if (drop_empty && !has_area(b, clip_after))
                    continue;
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
    free(decoded); free(boxes); free(scores); free(kept); free(counts);
    return written;
}
