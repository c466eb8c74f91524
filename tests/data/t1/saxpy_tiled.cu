// A kernel written for Kernel Tuner, not for flaretune: y = coef[0] * x + y, each thread doing
// tile_size_x elements block_size_x apart. Like Kernel Tuner, the host passes every argument in
// order and also copies coef to the symbol. Two things for the tests: `scale` picks between two
// ways of writing the same sum (a float tunable that must not change the result), and with
// tile_size_x == 3 the kernel forgets its last element (a wrong configuration to be caught).
// Its standalone values sit under #ifndef kernel_tuner, as in Kernel Tuner's own examples:
// Kernel Tuner defines kernel_tuner for every kernel it compiles, and so must flaretune, or
// these would replace the configuration's values.
#ifndef kernel_tuner
#define block_size_x 64
#define tile_size_x 1
#define scale 2.0
#endif

__constant__ float coef[4];

__global__ void saxpy_tiled(float *y, const float *x, const float *coef_arg, int n) {
    int i0 = blockIdx.x * block_size_x * tile_size_x + threadIdx.x;
#if tile_size_x == 3
    const int tiles = tile_size_x - 1;
#else
    const int tiles = tile_size_x;
#endif
#pragma unroll
    for (int t = 0; t < tiles; t++) {
        int i = i0 + t * block_size_x;
        if (i < n) {
#if use_ldg
            float xv = __ldg(&x[i]);
#else
            float xv = x[i];
#endif
            if ((float)scale > 1.0f)
                y[i] = coef[0] * xv + y[i];
            else
                y[i] = y[i] + xv * coef[0];
        }
    }
}
