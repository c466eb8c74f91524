// A 3x3 box filter over a w x h image (its input padded by one on every side), written for
// Kernel Tuner: a 2-D grid whose last column and row of blocks are partial, for test_t1_predict's
// sampled prediction against the whole launch. Each thread does tile_size_y rows.
#ifndef kernel_tuner
#define block_size_x 16
#define block_size_y 4
#define tile_size_y 1
#endif

extern "C" __global__ void stencil2d(float *out, const float *in, int w, int h) {
    const int x = blockIdx.x * block_size_x + threadIdx.x;
    const int y0 = (blockIdx.y * block_size_y + threadIdx.y) * tile_size_y;
    if (x >= w) return;
#pragma unroll
    for (int t = 0; t < tile_size_y; t++) {
        const int y = y0 + t;
        if (y >= h) return;
        float s = 0.0f;
#pragma unroll
        for (int dy = 0; dy < 3; dy++)
#pragma unroll
            for (int dx = 0; dx < 3; dx++)
                s += in[(y + dy) * (w + 2) + x + dx];
        out[y * w + x] = s * (1.0f / 9.0f);
    }
}
