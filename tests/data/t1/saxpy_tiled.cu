// A kernel written for Kernel Tuner, not for flaretune: y = scale * coef[0] * x + y, each thread
// doing tile_size_x elements block_size_x apart. Like
// Kernel Tuner, the host passes every argument in order and also copies coef to the symbol.
#ifndef block_size_x
#define block_size_x 64
#endif
#ifndef tile_size_x
#define tile_size_x 1
#endif
#ifndef scale
#define scale 2.0
#endif

__constant__ float coef[4];

__global__ void saxpy_tiled(float *y, const float *x, const float *coef_arg, int n) {
    int i0 = blockIdx.x * block_size_x * tile_size_x + threadIdx.x;
#pragma unroll
    for (int t = 0; t < tile_size_x; t++) {
        int i = i0 + t * block_size_x;
        if (i < n) {
#if use_ldg
            float xv = __ldg(&x[i]);
#else
            float xv = x[i];
#endif
            y[i] = (float)scale * coef[0] * xv + y[i];
        }
    }
}
