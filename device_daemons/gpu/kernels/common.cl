// Shared by every built-in kernel file (prepended by programs.py).
//
// T is the storage type of tensors and weights: float, or half with -DMO_HALF.
// Half is read and written with vload_half / vstore_half_rte, which are core
// OpenCL (no cl_khr_fp16 needed): values are stored as half, arithmetic is float.
// Indexes are int: a tensor has fewer than 2^31 elements (the plan checks).
#ifdef MO_HALF
#define T half
#define LD(p, i) vload_half((i), (p))
#define ST(p, i, v) vstore_half_rte((v), (i), (p))
#else
#define T float
#define LD(p, i) ((p)[i])
#define ST(p, i, v) ((p)[i] = (v))
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

inline float activate(float v, int act, float a, float b) {
    switch (act) {
    case ACT_RELU: return v > 0.0f ? v : v * a;
    case ACT_CLAMP: return fmin(fmax(v, a), b);
    case ACT_SIGMOID: return 1.0f / (1.0f + exp(-v));
    case ACT_TANH: return tanh(v);
    case ACT_ELU: return v > 0.0f ? v : a * expm1(v);
    case ACT_ABS: return fabs(v);
    default: return v;
    }
}
