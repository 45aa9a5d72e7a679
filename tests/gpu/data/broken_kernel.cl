__kernel void broken(const __global float* x, __global float* y)
{
    y[get_global_id(0)] = x[get_global_id(0)]   // missing semicolon
}
