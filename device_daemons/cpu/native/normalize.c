/* Normalize across the channels (Caffe's Normalize with across_spatial false, OpenVINO's
 * NormalizeL2 over axis 1: SSD's conv4_3_norm) for the fast CPU backend, on channels-last
 * tensors (onednn/normalization.py): per pixel, the sum of the squares of its channel vector
 * (contiguous), then each value divided by sqrt(sum + eps) and multiplied by its
 * channel's scale - kernels/normalization.py's operations in its order. The sum runs in
 * eight float partial sums (vectorized) where numpy sums pairwise: the two agree to
 * float rounding. */
#include <math.h>
#include <stdint.h>

void mo_normalize_nhwc(const float *x, int64_t pixels, int64_t c, const float *scale, int64_t shared, float eps,
                       float *out)
{
    for (int64_t p = 0; p < pixels; ++p) {
        const float *v = x + p * c;
        float *o = out + p * c;
        float part[8] = {0, 0, 0, 0, 0, 0, 0, 0};
        int64_t k = 0;
        for (; k + 8 <= c; k += 8)
            for (int j = 0; j < 8; ++j)
                part[j] += v[k + j] * v[k + j];
        float sum = ((part[0] + part[1]) + (part[2] + part[3])) + ((part[4] + part[5]) + (part[6] + part[7]));
        for (; k < c; ++k)
            sum += v[k] * v[k];
        float norm = sqrtf(sum + eps);
        if (shared) {
            for (k = 0; k < c; ++k)
                o[k] = v[k] / norm * scale[0];
        } else {
            for (k = 0; k < c; ++k)
                o[k] = v[k] / norm * scale[k];
        }
    }
}
