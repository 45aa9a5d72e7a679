/* Caffe SSD's per-class candidate selection and greedy NMS (GetMaxScoreIndex +
 * ApplyNMSFast), for DetectionOutput on the fast CPU backend. The numpy kernels in
 * device_daemons/cpu/kernels/detection.py are the reference; tests/cpu/test_cpu_nms.py
 * checks this gives exactly their result. Built once per machine by native/build.py. */
#include <stdint.h>
#include <stdlib.h>

/* Scores as unsigned keys in the same order (larger key: larger score); -0 counts as
 * +0 (equal scores must give equal keys: their order is then by index) */
static uint32_t score_key(float v)
{
    union { float f; uint32_t u; } x;
    x.f = v + 0.0f;  /* -0 + 0 = +0 */
    return (x.u & 0x80000000u) ? ~x.u : (x.u | 0x80000000u);
}

/* Indices of scores > threshold, best first (ties: lower index first, Caffe's stable
 * sort), at most cap of them, into ix; key/tmp: scratch of priors entries. Radix
 * selection of the cap-th best key, then a stable radix sort of the chosen ones: no
 * comparisons, so no mispredicted branches on data that looks random. */
static int64_t candidates(const float *scores, int64_t priors, float threshold, int64_t cap,
                          uint32_t *key, int32_t *ix, uint32_t *tkey, int32_t *tix)
{
    int64_t n = 0;
    for (int64_t p = 0; p < priors; ++p) {
        float v = scores[p];
        if (v > threshold) {  /* NaN never is */
            key[n] = score_key(v);
            ix[n++] = (int32_t)p;
        }
    }
    if (n > cap) {
        /* the cap-th largest key, 11 + 11 + 10 bits at a time */
        static const int shifts[3] = {21, 10, 0}, widths[3] = {11, 11, 10};
        uint32_t prefix = 0, mask = 0;
        int64_t need = cap;  /* how many of the keys matching prefix are still to take */
        int64_t hist[2048];
        for (int pass = 0; pass < 3; ++pass) {
            uint32_t w = (1u << widths[pass]) - 1;
            for (uint32_t b = 0; b <= w; ++b) hist[b] = 0;
            for (int64_t i = 0; i < n; ++i)
                hist[(key[i] >> shifts[pass]) & w] += (key[i] & mask) == prefix;
            uint32_t b = w;
            while (hist[b] < need) need -= hist[b--];
            prefix |= b << shifts[pass];
            mask |= w << shifts[pass];
        }
        /* prefix is that key: keep every larger key and the first `need` equal ones */
        int64_t m = 0;
        for (int64_t i = 0; i < n; ++i) {
            int take = key[i] > prefix || (key[i] == prefix && need > 0);
            need -= key[i] == prefix;
            key[m] = key[i];
            ix[m] = ix[i];
            m += take;
        }
        n = m;
    }
    /* stable LSD radix sort, descending keys (ascending ~key), 8 bits a pass */
    for (int shift = 0; shift < 32; shift += 8) {
        int64_t count[257] = {0};
        for (int64_t i = 0; i < n; ++i) count[((~key[i] >> shift) & 255) + 1]++;
        for (int b = 0; b < 256; ++b) count[b + 1] += count[b];
        for (int64_t i = 0; i < n; ++i) {
            int64_t at = count[(~key[i] >> shift) & 255]++;
            tkey[at] = key[i];
            tix[at] = ix[i];
        }
        uint32_t *k = key; key = tkey; tkey = k;
        int32_t *t = ix; ix = tix; tix = t;
    }
    /* four passes: the result is back in the arrays it started in */
    return n;
}

#define CHUNK 16
#define PARALLEL_WORK 16384  /* classes x priors from which the classes are shared out over the threads */

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define VECTOR_CLONES __attribute__((target_clones("avx2", "default")))  /* 8-wide where the CPU has it */
#else
#define VECTOR_CLONES
#endif

/* Caffe's BBoxSize of a corner box */
static inline float box_size(float x1, float y1, float x2, float y2)
{
    float w = x2 - x1, h = y2 - y1;
    return (w < 0 || h < 0) ? 0.0f : w * h;
}

/* Does a kept box (the nk of kx1 .. ks: corners and sizes) overlap box a (its corners and
 * size) by more than `adaptive`? The kept boxes a chunk at a time, without branches inside
 * (vectorized: selects and masks only, the form gcc's vectorizer takes; inlined into the
 * VECTOR_CLONES callers). */
static inline __attribute__((always_inline)) int suppressed(
    float ax1, float ay1, float ax2, float ay2, float asz, const float *kx1, const float *ky1, const float *kx2,
    const float *ky2, const float *ks, int64_t nk, float adaptive)
{
    int hit = 0, zero_hits = 0.0f > adaptive;  /* a threshold < 0 suppresses even disjoint boxes */
    for (int64_t q0 = 0; q0 < nk && !hit; q0 += CHUNK) {
        int64_t q1 = q0 + CHUNK < nk ? q0 + CHUNK : nk;
        for (int64_t q = q0; q < q1; ++q) {
            float bx1 = kx1[q], by1 = ky1[q], bx2 = kx2[q], by2 = ky2[q];
            float iw = (ax2 < bx2 ? ax2 : bx2) - (ax1 > bx1 ? ax1 : bx1);
            float ih = (ay2 < by2 ? ay2 : by2) - (ay1 > by1 ? ay1 : by1);
            iw = iw > 0 ? iw : 0.0f;
            ih = ih > 0 ? ih : 0.0f;
            /* Caffe's JaccardOverlap: 0 unless both extents are positive; an
             * underflowing product is 0 there too, so inter > 0 is that test */
            float inter = iw * ih;
            float overlap = inter / (asz + ks[q] - inter);
            int pos = inter > 0, big = overlap > adaptive;
            hit += (pos & big) | ((!pos) & zero_hits);
        }
    }
    return hit;
}

/* boxes: (groups, priors, 4) corner boxes, groups 1 (shared by the classes) or classes;
 * scores: (classes, priors). Per class c: kept[c * cap ...] the kept prior indices, best
 * first, kept_count[c] of them; cap = top_k < 0 ? priors : min(top_k, priors).
 * Returns 0, or -1 when scratch memory cannot be had. The classes are independent: on
 * enough work they are shared out over the calling thread's OpenMP team (the one oneDNN's
 * primitives run on, omp_set_num_threads), each thread with scratch of its own; every
 * class's result is the same whatever thread computes it. */
VECTOR_CLONES
int mo_nms_classes(const float *boxes, int64_t groups, const float *scores, int64_t classes, int64_t priors,
                   float threshold, float nms_threshold, float eta, int64_t top_k, int32_t *kept,
                   int64_t *kept_count)
{
    int64_t cap = top_k < 0 || top_k > priors ? priors : top_k;
    if (cap <= 0) {
        for (int64_t c = 0; c < classes; ++c) kept_count[c] = 0;
        return 0;
    }
    int failed = 0;
    #pragma omp parallel if (classes > 1 && classes * priors >= PARALLEL_WORK) reduction(|:failed)
    {
    float *kx1 = malloc(sizeof(float) * cap * 5);
    uint32_t *key = malloc(sizeof(uint32_t) * priors * 2);
    int32_t *ix = malloc(sizeof(int32_t) * priors * 2);
    failed = !kx1 || !key || !ix;
    float *ky1 = kx1 + cap, *kx2 = kx1 + 2 * cap, *ky2 = kx1 + 3 * cap, *ks = kx1 + 4 * cap;
    #pragma omp for schedule(dynamic, 1)
    for (int64_t c = 0; c < classes; ++c) {
        if (failed) continue;  /* (this thread has no scratch: the call fails) */
        const float *b = boxes + (groups > 1 ? c : 0) * priors * 4;
        int64_t n = candidates(scores + c * priors, priors, threshold, cap, key, ix, key + priors, ix + priors);
        int32_t *out = kept + c * cap;
        int64_t nk = 0;
        float adaptive = nms_threshold;
        for (int64_t i = 0; i < n; ++i) {
            const float *a = b + (int64_t)ix[i] * 4;
            float ax1 = a[0], ay1 = a[1], ax2 = a[2], ay2 = a[3];
            float asz = box_size(ax1, ay1, ax2, ay2);
            int hit = suppressed(ax1, ay1, ax2, ay2, asz, kx1, ky1, kx2, ky2, ks, nk, adaptive);
            if (hit) continue;
            out[nk] = ix[i];
            kx1[nk] = ax1; ky1[nk] = ay1; kx2[nk] = ax2; ky2[nk] = ay2; ks[nk] = asz;
            ++nk;
            if (eta < 1 && adaptive > 0.5f) adaptive *= eta;
        }
        kept_count[c] = nk;
    }
    free(kx1);
    free(key);
    free(ix);
    }
    return failed ? -1 : 0;
}
