/* emu_matmul.cu: a shared-memory tiled SGEMM, C[M,N] = A[M,K] B[K,N] (row-major floats), for
 * the emulator's self-tests. TILE x TILE threads per block, one element of C each; any M, N, K
 * (tiles past the edges load zeros). */
#include "ft_cuda.h"

#ifndef TILE
#define TILE 16
#endif

extern "C" __global__ void __launch_bounds__(TILE *TILE)
    sgemm_tiled(float *__restrict__ C, const float *__restrict__ A, const float *__restrict__ B,
                int M, int N, int K) {
    __shared__ float As[TILE][TILE + 1];
    __shared__ float Bs[TILE][TILE + 1];
    int tx = (int)threadIdx.x, ty = (int)threadIdx.y;
    int row = (int)blockIdx.y * TILE + ty, col = (int)blockIdx.x * TILE + tx;
    float acc = 0.0f;
    for (int k0 = 0; k0 < K; k0 += TILE) {
        As[ty][tx] = row < M && k0 + tx < K ? A[(size_t)row * K + k0 + tx] : 0.0f;
        Bs[ty][tx] = k0 + ty < K && col < N ? B[(size_t)(k0 + ty) * N + col] : 0.0f;
        __syncthreads();
        for (int k = 0; k < TILE; k++)
            acc += As[ty][k] * Bs[k][tx];
        __syncthreads();
    }
    if (row < M && col < N) C[(size_t)row * N + col] = acc;
}
FT_KERNEL_EXPORT(sgemm_tiled)
