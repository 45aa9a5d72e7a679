// Reductions (ReduceSum/Mean/Max/Min) and the running sum (CumSum), the CPU
// kernels' reduce.py family.

#define RED_SUM 0
#define RED_MEAN 1
#define RED_MAX 2
#define RED_MIN 3
#define RED_RANK 6  // reduce.py's MAX_RANK

// One work item an output element: desc holds, for up to RED_RANK dims each, the
// kept dims' sizes and input strides, then the reduced dims' sizes and strides (in
// elements; the reduced ones iterated innermost first). Accumulates in float.
// global: (count rounded up)
__kernel void reduce_nd(__global const T* src, __global T* dst, __global const int* desc, int kept_rank,
                        int reduced_rank, int reduced, int op, int count)
{
    int i = get_global_id(0);
    if (i >= count) return;
    int base = 0, rest = i;
    for (int k = kept_rank - 1; k >= 0; --k) {
        int n = desc[k];
        base += (rest % n) * desc[RED_RANK + k];
        rest /= n;
    }
    float acc = (op == RED_MAX) ? -INFINITY : (op == RED_MIN) ? INFINITY : 0.0f;
    for (int j = 0; j < reduced; ++j) {
        int s = base, r = j;
        for (int k = reduced_rank - 1; k >= 0; --k) {
            int n = desc[2 * RED_RANK + k];
            s += (r % n) * desc[3 * RED_RANK + k];
            r /= n;
        }
        float v = LD(src, s);
        if (op == RED_MAX) acc = (v > acc || isnan(v)) ? v : acc;  // (NaN wins, as numpy's max)
        else if (op == RED_MIN) acc = (v < acc || isnan(v)) ? v : acc;
        else acc += v;
    }
    ST(dst, i, op == RED_MEAN ? acc / (float)reduced : acc);
}

// CumSum along an axis of `size` (outer lines before it, inner elements after it): one work item a line,
// summed from its start (or its end when reverse), each sum without its own element when exclusive.
// global: (lines rounded up)
__kernel void cumsum(__global const T* src, __global T* dst, int size, int inner, int lines, int exclusive,
                     int reverse)
{
    int line = get_global_id(0);
    if (line >= lines) return;
    long start = (long)(line / inner) * size * inner + line % inner;
    float acc = 0.0f;
    for (int j = 0; j < size; ++j) {
        long at = start + (long)(reverse ? size - 1 - j : j) * inner;
        float v = LD(src, at);
        if (exclusive) {
            ST(dst, at, acc);
            acc += v;
        } else {
            acc += v;
            ST(dst, at, acc);
        }
    }
}

// ArgMax with top_k 1 along an axis of `size` (outer lines before it, inner elements after it; without an
// axis: each item's values flattened, inner 1): one work item a line. As the CPU kernel's sorts order them:
// with `first` (TensorFlow's ties) the smallest index of the largest value, NaN never (index 0 if all are);
// else (Caffe's) the largest index of the largest value, or the last NaN if there is one. Writes the index,
// the value (out_max_val 1: an axis given), or both, the value 1 element after the index (out_max_val 2).
// global: (lines rounded up)
__kernel void argmax(__global const T* src, __global T* dst, int size, int inner, int lines, int first,
                     int out_max_val)
{
    int line = get_global_id(0);
    if (line >= lines) return;
    long start = (long)(line / inner) * size * inner + line % inner;
    int best = -1, last_nan = -1;
    float top = 0.0f;
    for (int j = 0; j < size; ++j) {
        float v = LD(src, start + (long)j * inner);
        if (isnan(v))
            last_nan = j;
        else if (best < 0 || v > top || (!first && v == top)) {
            best = j;
            top = v;
        }
    }
    if (best < 0 || (!first && last_nan >= 0)) {
        best = (!first && last_nan >= 0) ? last_nan : 0;
        top = LD(src, start + (long)best * inner);
    }
    if (out_max_val == 1) {
        ST(dst, line, top);
    } else if (out_max_val == 2) {
        ST(dst, 2 * line, (float)best);
        ST(dst, 2 * line + 1, top);
    } else {
        ST(dst, line, (float)best);
    }
}
