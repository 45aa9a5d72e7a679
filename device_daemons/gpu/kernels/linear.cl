// Per-channel linear maps and element-wise sums/products/maxima; in place allowed.

// ScaleShift and BatchNormalization: y = x * scale[c] + shift[c].
// global: (inner rounded up, C, outer)
__kernel void scale_shift(__global const T* x, __global const T* scale, __global const T* shift, __global T* out,
                          int C, int inner, int has_scale, int has_shift, int act, float act_a, float act_b)
{
    int i = get_global_id(0), c = get_global_id(1), n = get_global_id(2);
    if (i >= inner) return;
    int k = (n * C + c) * inner + i;
    float v = LD(x, k);
    if (has_scale) v *= LD(scale, c);
    if (has_shift) v += LD(shift, c);
    ST(out, k, activate(v, act, act_a, act_b));
}

// Eltwise on two inputs: op 0 sum (ca * a + cb * b), 1 mul, 2 max, 3..8 the comparisons a < b, a <= b,
// a > b, a >= b, a == b, a != b (1.0 where it holds, else 0.0); with one input
// (use_b 0) the result is ca * a for sum, a otherwise. Longer input lists are a
// chain of launches accumulating into out. global: (count rounded up)
__kernel void eltwise(__global const T* a, __global const T* b, __global T* out, int count, int op,
                      float ca, float cb, int use_b, int act, float act_a, float act_b)
{
    int i = get_global_id(0);
    if (i >= count) return;
    float va = LD(a, i);
    float r;
    if (!use_b) {
        r = op == 0 ? ca * va : va;
    } else {
        float vb = LD(b, i);
        if (op == 0) r = ca * va + cb * vb;
        else if (op == 1) r = va * vb;
        else if (op == 2) r = fmax(va, vb);
        else if (op == 3) r = va < vb ? 1.0f : 0.0f;
        else if (op == 4) r = va <= vb ? 1.0f : 0.0f;
        else if (op == 5) r = va > vb ? 1.0f : 0.0f;
        else if (op == 6) r = va >= vb ? 1.0f : 0.0f;
        else if (op == 7) r = va == vb ? 1.0f : 0.0f;
        else if (op == 8) r = va != vb ? 1.0f : 0.0f;
        else if (op == 9) r = floor(va / vb);
        else {  /* floor_mod: fmod, then the divisor added where the signs differ (TensorFlow's FloorMod) */
            r = fmod(va, vb);
            if (r != 0.0f && ((vb < 0.0f) != (r < 0.0f))) r += vb;
        }
    }
    ST(out, i, activate(r, act, act_a, act_b));
}

// Select: a where cond is not 0, else b (one shape)
__kernel void select_where(__global const T* cond, __global const T* a, __global const T* b, __global T* out,
                           int count)
{
    int i = get_global_id(0);
    if (i >= count) return;
    ST(out, i, LD(cond, i) != 0.0f ? LD(a, i) : LD(b, i));
}
