// y = 2x + 1; a value v >= 100 first runs (v - 100) million dependent steps: a
// request that keeps the device busy for seconds (the kill -9 tests), chosen by
// the input as the CPU tests' SlowOp does.
__kernel void spin(const __global INPUT0_TYPE* x, __global OUTPUT0_TYPE* y)
{
    const int i = get_global_id(0);
    const int rounds = x[i] >= 100.0f ? (int)(x[i] - 100.0f) : 0;
    float acc = x[i];
    for (int r = 0; r < rounds; ++r)
        for (int j = 0; j < 1000000; ++j)
            acc = acc * 0.9999f + 1e-6f;
    y[i] = x[i] * 2.0f + 1.0f + (acc > 1e30f ? 1.0f : 0.0f);
}
