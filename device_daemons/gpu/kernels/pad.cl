// Pad: constant, reflect (mirror without the edge value) or symmetric (mirror with it), the CPU kernels'
// pad.py. One work item an output element; desc holds, for each of `rank` dims (at most PAD_RANK), the
// output's size, the input's size, the input's stride and the pad before it. The CPU kernel has checked
// that a mirror needs one reflection at most.
#define PAD_RANK 6
#define PAD_CONSTANT 0
#define PAD_REFLECT 1
#define PAD_SYMMETRIC 2

// global: (count rounded up)
__kernel void pad_nd(__global const T* src, __global T* dst, __global const int* desc, int rank, int mode,
                     float value, int count)
{
    int i = get_global_id(0);
    if (i >= count) return;
    int s = 0, rest = i;
    for (int k = rank - 1; k >= 0; --k) {
        int out_n = desc[k], n = desc[PAD_RANK + k];
        int p = rest % out_n - desc[3 * PAD_RANK + k];
        rest /= out_n;
        if (p < 0 || p >= n) {
            if (mode == PAD_CONSTANT) {
                ST(dst, i, value);
                return;
            }
            if (mode == PAD_REFLECT)
                p = p < 0 ? -p : 2 * (n - 1) - p;
            else
                p = p < 0 ? -p - 1 : 2 * n - 1 - p;
        }
        s += p * desc[2 * PAD_RANK + k];
    }
    ST(dst, i, LD(src, s));
}
