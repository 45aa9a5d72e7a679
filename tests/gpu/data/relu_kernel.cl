// The Inference Engine GPU guide's example ReLU (with its leaky slope define)
#pragma OPENCL EXTENSION cl_khr_fp16 : enable
__kernel void example_relu_kernel(const __global INPUT0_TYPE* input0, __global OUTPUT0_TYPE* output)
{
    const uint idx = get_global_id(0);
    const uint idy = get_global_id(1);
    const uint idbf = get_global_id(2);  // batches*features, as OpenCL supports 3D nd-ranges only
    const uint feature = idbf % OUTPUT0_DIMS[1];
    const uint batch = idbf / OUTPUT0_DIMS[1];
    const uint in_id = batch * INPUT0_PITCHES[0] + feature * INPUT0_PITCHES[1] + idy * INPUT0_PITCHES[2]
                       + idx * INPUT0_PITCHES[3] + INPUT0_OFFSET;
    const uint out_id = batch * OUTPUT0_PITCHES[0] + feature * OUTPUT0_PITCHES[1] + idy * OUTPUT0_PITCHES[2]
                        + idx * OUTPUT0_PITCHES[3] + OUTPUT0_OFFSET;
    INPUT0_TYPE value = input0[in_id];
    output[out_id] = value < 0 ? value * neg_slope : value;
}
