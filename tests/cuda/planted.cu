/* planted.cu: a tiled matrix-vector product with bugs planted on request, to show that the
 * emulator's checks catch the classic ones (tests/test_emu.c, test_planted_bugs).
 *
 *   y[r] = sum_k A[r][k] x[k]      A is M x K, row-major
 *
 * A block of TILE threads (TILE / 32 warps) stages x through shared memory TILE elements at a
 * time; warp w of block b owns row b * (TILE / 32) + w, its lanes take the tile's elements
 * lane, lane + 32, ..., and a shuffle reduction gathers the row's sum in lane 0.
 *
 *   PLANT=0  correct
 *   PLANT=1  off by one in the tile bound: the last element of x is dropped
 *   PLANT=2  the __syncthreads after the tile's use is missing: the next tile overwrites xs
 *            while other warps still read it
 *   PLANT=3  the wrong shuffle lane: the row's sum is taken from lane 1, which holds a part
 */
#include "ft_cuda.h"

#ifndef PLANT
#define PLANT 0
#endif
#ifndef TILE
#define TILE 128
#endif
#define WARPS (TILE / 32)

extern "C" __global__ void __launch_bounds__(TILE)
    gemv_tiled(float *__restrict__ y, const float *__restrict__ A, const float *__restrict__ x,
               int M, int K) {
    __shared__ float xs[TILE];
    int lane = (int)threadIdx.x & 31, w = (int)threadIdx.x >> 5;
    int row = (int)blockIdx.x * WARPS + w;
    float acc = 0.0f;
    for (int t0 = 0; t0 < K; t0 += TILE) {
        int k = t0 + (int)threadIdx.x;
#if PLANT == 1
        xs[threadIdx.x] = k < K - 1 ? x[k] : 0.0f;
#else
        xs[threadIdx.x] = k < K ? x[k] : 0.0f;
#endif
        __syncthreads();
        if (row < M)
            for (int j = lane; j < TILE && t0 + j < K; j += 32)
                acc += A[(size_t)row * K + t0 + j] * xs[j];
#if PLANT != 2
        __syncthreads();
#endif
    }
    for (int o = 16; o > 0; o >>= 1)
        acc += __shfl_down_sync(0xffffffffu, acc, o);
#if PLANT == 3
    float total = __shfl_sync(0xffffffffu, acc, 1);
#else
    float total = __shfl_sync(0xffffffffu, acc, 0);
#endif
    if (row < M && lane == 0) y[row] = total;
}
FT_KERNEL_EXPORT(gemv_tiled)
