// Element-wise activations; each may run in place (x == out).

// ReLU (leaky), Clamp, sigmoid, tanh, elu, abs: common.cl's activate(). global: (count)
__kernel void activation(__global const T* x, __global T* out, int count, int act, float act_a, float act_b)
{
    int i = get_global_id(0);
    if (i < count) ST(out, i, activate(LD(x, i), act, act_a, act_b));
}

// PReLU: a slope per channel (or one for all). global: (inner rounded up, C, outer)
__kernel void prelu(__global const T* x, __global const T* slope, __global T* out, int C, int inner, int shared)
{
    int i = get_global_id(0), c = get_global_id(1), n = get_global_id(2);
    if (i >= inner) return;
    int k = (n * C + c) * inner + i;
    float v = LD(x, k);
    ST(out, k, v > 0.0f ? v : v * LD(slope, shared ? 0 : c));
}

// Power: (shift + scale * x) ^ power. global: (count)
__kernel void power(__global const T* x, __global T* out, int count, float scale, float shift, float p)
{
    int i = get_global_id(0);
    if (i >= count) return;
    float v = shift == 0.0f ? LD(x, i) * scale : mad(LD(x, i), scale, shift);  // (-0 + 0 would be +0: 1 / -0 is -inf)
    float r;
    if (p == 1.0f) r = v;
    else if (p == 2.0f) r = v * v;
    else if (p == 0.5f) r = sqrt(v);
    else if (p == -1.0f) r = 1.0f / v;
    else if (p == 0.0f) r = 1.0f;
    else r = pow(v, p);
    ST(out, i, r);
}

// FakeQuantize: clamped to [low, high], floor((v - low) * inv_step + 0.5) * out_step + out_low (the CPU
// kernel's order of operations). global: (count)
__kernel void fake_quantize(__global const T* x, __global T* out, int count, float low, float high, float inv_step,
                            float out_step, float out_low)
{
    int i = get_global_id(0);
    if (i >= count) return;
    float v = (fmin(fmax(LD(x, i), low), high) - low) * inv_step + 0.5f;
    ST(out, i, floor(v) * out_step + out_low);
}
