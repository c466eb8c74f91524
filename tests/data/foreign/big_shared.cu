// A kernel with 56000 bytes of static shared memory: over the 48 KiB NVRTC allows, within what
// an A100 gives a block (test_nvrtc_foreign: the refusal's message and the resources kept).
extern "C" __global__ void big_shared(float *x) {
    __shared__ float s[14000];
    for (int i = threadIdx.x; i < 14000; i += blockDim.x)
        s[i] = x[i];
    __syncthreads();
    x[threadIdx.x] = s[13999 - threadIdx.x];
}
