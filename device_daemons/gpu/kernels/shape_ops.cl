// Layout ops: one strided copy serves Concat (an input into its slice of the
// output), Split/Slice, Crop and Permute. desc holds, for up to 6 dims (after
// merging the dims that are contiguous on both sides): the shape iterated, the
// source strides and the destination strides, in elements.
#define MAX_RANK 6

// global: (count rounded up)
__kernel void copy_nd(__global const T* src, __global T* dst, __global const int* desc, int rank, int count,
                      int src_offset, int dst_offset)
{
    int i = get_global_id(0);
    if (i >= count) return;
    int s = src_offset, d = dst_offset, rest = i;
    for (int k = rank - 1; k >= 0; --k) {
        int n = desc[k];
        int idx = rest % n;
        rest /= n;
        s += idx * desc[MAX_RANK + k];
        d += idx * desc[2 * MAX_RANK + k];
    }
    ST(dst, d, LD(src, s));
}

// Gather: dst[o, j, k] = table[o, indices[b, j], k] over the table's axis of `size` entries (o: the entries
// before the axis, inner: after it, n: the indices of one batch, pre: the o of one batch - all of them without
// batch_dims, b = o / pre). An index that is no integer in [0, size) gives 0, as TensorFlow's Gather on a GPU
// (its CPU kernel fails the request instead).
// global: (count rounded up)
__kernel void gather(__global const T* table, __global const T* indices, __global T* dst, int n, int size, int inner,
                     int count, int pre)
{
    int i = get_global_id(0);
    if (i >= count) return;
    int k = i % inner, rest = i / inner;
    int j = rest % n, o = rest / n;
    float v = LD(indices, (long)(o / pre) * n + j);
    float value = 0.0f;
    if (v >= 0.0f && v < (float)size && v == floor(v))  // (compared as float first: a NaN or huge value fails)
        value = LD(table, ((long)o * size + (int)v) * inner + k);
    ST(dst, i, value);
}

// Storage type <-> float, around the custom layers (which always see float).
__kernel void to_float(__global const T* src, __global float* dst, int count)
{
    int i = get_global_id(0);
    if (i < count) dst[i] = LD(src, i);
}

__kernel void from_float(__global const float* src, __global T* dst, int count)
{
    int i = get_global_id(0);
    if (i < count) ST(dst, i, src[i]);
}
