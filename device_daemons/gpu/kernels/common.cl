// Shared by every built-in kernel file (prepended by programs.py).
//
// T is the storage type of tensors and weights: float, or half with -DMO_HALF.
// Half is read and written with vload_half / vstore_half_rte, which are core
// OpenCL (no cl_khr_fp16 needed): values are stored as half, arithmetic is float.
// Indexes are int: a tensor has fewer than 2^31 elements (the plan checks).
// LD4/LD8/ST8 move 4 or 8 consecutive values at element offset i (no alignment needed).
#ifdef MO_HALF
#define T half
#define LD(p, i) vload_half((i), (p))
#define ST(p, i, v) vstore_half_rte((v), (i), (p))
#define LD4(p, i) vload_half4(0, (p) + (i))
#define LD8(p, i) vload_half8(0, (p) + (i))
#define ST8(p, i, v) vstore_half8_rte((v), 0, (p) + (i))
#else
#define T float
#define LD(p, i) ((p)[i])
#define ST(p, i, v) ((p)[i] = (v))
#define LD4(p, i) vload4(0, (p) + (i))
#define LD8(p, i) vload8(0, (p) + (i))
#define ST8(p, i, v) vstore8((v), 0, (p) + (i))
#endif

// Activations, applied standalone (activation.cl) or fused into the epilogue of
// the layer before them (convolution, fully connected, eltwise, scale-shift).
#define ACT_NONE 0
#define ACT_RELU 1      // a: negative slope
#define ACT_CLAMP 2     // [a, b]
#define ACT_SIGMOID 3
#define ACT_TANH 4
#define ACT_ELU 5       // a: alpha
#define ACT_ABS 6
#define ACT_ERF 7
#define ACT_GELU_ERF 8  // x * Phi(x), erfc keeps the negative tail's relative accuracy
#define ACT_GELU_TANH 9
#define ACT_EXP 10
#define ACT_LOG 11
#define ACT_FLOOR 12
#define ACT_CEIL 13
#define ACT_ROUND 14    // halves to even (rint in the default rounding mode)
#define ACT_TRUNC 15
#define ACT_SOFTPLUS 16
#define ACT_SIGN 17     // NaN stays NaN (OpenCL's sign gives 0), as numpy and TensorFlow
#define ACT_SIN 18
#define ACT_COS 19
#define ACT_TAN 20
#define ACT_ASIN 21
#define ACT_ACOS 22
#define ACT_ATAN 23
#define ACT_SINH 24
#define ACT_COSH 25
#define ACT_ASINH 26
#define ACT_ACOSH 27
#define ACT_ATANH 28
#define ACT_LOG1P 29
#define ACT_EXPM1 30
#define ACT_SOFTSIGN 31

inline float activate(float v, int act, float a, float b) {
    switch (act) {
    case ACT_RELU: return v > 0.0f ? v : v * a;
    case ACT_CLAMP: return fmin(fmax(v, a), b);
    case ACT_SIGMOID: return 1.0f / (1.0f + exp(-v));
    case ACT_TANH: return tanh(v);
    case ACT_ELU: return v > 0.0f ? v : a * expm1(v);
    case ACT_ABS: return fabs(v);
    case ACT_ERF: return erf(v);
    case ACT_GELU_ERF: return 0.5f * v * erfc(-v * M_SQRT1_2_F);
    case ACT_GELU_TANH: return 0.5f * v * (1.0f + tanh(0.7978845608f * (v + 0.044715f * v * v * v)));
    case ACT_EXP: return exp(v);
    case ACT_LOG: return log(v);
    case ACT_FLOOR: return floor(v);
    case ACT_CEIL: return ceil(v);
    case ACT_ROUND: return rint(v);
    case ACT_TRUNC: return trunc(v);
    case ACT_SOFTPLUS: return v > 20.0f ? v : log1p(exp(v));  // (above 20 the sum is v to float's precision)
    case ACT_SIGN: return isnan(v) ? v : sign(v);
    case ACT_SIN: return sin(v);
    case ACT_COS: return cos(v);
    case ACT_TAN: return tan(v);
    case ACT_ASIN: return asin(v);
    case ACT_ACOS: return acos(v);
    case ACT_ATAN: return atan(v);
    case ACT_SINH: return sinh(v);
    case ACT_COSH: return cosh(v);
    case ACT_ASINH: return asinh(v);
    case ACT_ACOSH: return acosh(v);
    case ACT_ATANH: return atanh(v);
    case ACT_LOG1P: return log1p(v);
    case ACT_EXPM1: return expm1(v);
    case ACT_SOFTSIGN: return v / (1.0f + fabs(v));
    default: return v;
    }
}

inline float8 activate8(float8 v, int act, float a, float b) {
    switch (act) {
    case ACT_NONE: return v;
    case ACT_RELU: return select(v * a, v, v > 0.0f);
    case ACT_CLAMP: return fmin(fmax(v, a), b);
    default: {
        float t[8];
        vstore8(v, 0, t);
        for (int i = 0; i < 8; ++i) t[i] = activate(t[i], act, a, b);
        return vload8(0, t);
    }
    }
}

// x^-beta for x > 0 (LRN): exp2/log2 instead of pow, whose full-range accuracy
// costs several times more on some OpenCL compilers; rsqrt for Caffe's 0.75.
inline float pow_neg(float x, float beta) {
    if (beta == 0.75f) { float r = rsqrt(x); return r * sqrt(r); }
    if (beta == 0.5f) return rsqrt(x);
    if (beta == 1.0f) return 1.0f / x;
    return exp2(-beta * log2(x));
}
