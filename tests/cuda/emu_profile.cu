/* emu_profile.cu: planted kernels for the emulator's profile (tests/test_emu_profile.c). Each
 * one does a single thing whose memory figures are known exactly: a coalesced copy, a strided
 * load, a 32-way bank conflict and its padded cure, a re-read, a divergent branch, float4
 * accesses, barriers. Launched as one warp (32 threads) unless said otherwise. */
#include "ft_cuda.h"

/* 32 lanes, consecutive floats: 1 load request of 4 sectors, 1 store request of 4. */
extern "C" __global__ void coalesced(const float *x, float *y) {
    unsigned t = threadIdx.x;
    y[t] = 2.0f * x[t];
}
FT_KERNEL_EXPORT(coalesced)

/* A stride of 32 floats: every lane in its own sector, 32 sectors where 4 would do. */
extern "C" __global__ void strided(const float *x, float *y) {
    unsigned t = threadIdx.x;
    y[t] = 2.0f * x[32 * t];
}
FT_KERNEL_EXPORT(strided)

/* A column of a 32 x 32 tile: all 32 words in bank 0 (32 wavefronts a request); with a row of
 * 33 floats (pad = 1) each lane has its own bank (1 wavefront). */
template <int PAD> __device__ void column(const float *x, float *y) {
    __shared__ float tile[32][32 + PAD];
    unsigned t = threadIdx.x;
    tile[t][0] = x[t];
    __syncthreads();
    y[t] = tile[t][0] + 1.0f;
}
extern "C" __global__ void bank_conflict(const float *x, float *y) { column<0>(x, y); }
FT_KERNEL_EXPORT(bank_conflict)
extern "C" __global__ void bank_padded(const float *x, float *y) { column<1>(x, y); }
FT_KERNEL_EXPORT(bank_padded)

/* Each lane reads its float and its neighbour's: 2 requests of 4 sectors for 128 distinct
 * bytes (every sector read twice). */
extern "C" __global__ void reread(const float *x, float *y) {
    unsigned t = threadIdx.x;
    y[t] = x[t] - x[(t + 1) & 31];
}
FT_KERNEL_EXPORT(reread)

/* Odd lanes only: requests of 16 lanes that still touch all 4 sectors (2 would hold the data). */
extern "C" __global__ void divergent(const float *x, float *y) {
    unsigned t = threadIdx.x;
    if (t & 1) y[t] = x[t] * 3.0f;
}
FT_KERNEL_EXPORT(divergent)

/* float4 per lane: 512 bytes a request (16 sectors); through shared memory, 4 wavefronts (one
 * per quarter-warp) without a conflict. */
extern "C" __global__ void vec4(const float4 *x, float4 *y) {
    __shared__ float4 s[32];
    unsigned t = threadIdx.x;
    s[t] = x[t];
    __syncthreads();
    y[t] = s[31 - t];
}
FT_KERNEL_EXPORT(vec4)

/* Three barriers per block; the launch has 3 blocks of 64 threads. */
extern "C" __global__ void barriers(const float *x, float *y) {
    __shared__ float s[64];
    unsigned t = threadIdx.x, i = blockIdx.x * 64 + t;
    s[t] = x[i];
    __syncthreads();
    float v = s[63 - t];
    __syncthreads();
    s[t] = v;
    __syncthreads();
    y[i] = s[t];
}
FT_KERNEL_EXPORT(barriers)
