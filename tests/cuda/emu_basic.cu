/* emu_basic.cu: sample kernels for the emulator's self-tests (tests/test_emu.c): indices, warp
 * shuffles and votes, atomics, dynamic shared memory, block reductions, a spin lock. Also
 * compiled for the GPU by test_emu_nvrtc. */
#include "ft_cuda.h"

/* Every thread writes its coordinates, packed, at its global linear index. */
extern "C" __global__ void indices(unsigned *out) {
    unsigned b = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
    unsigned t = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
    unsigned n = blockDim.x * blockDim.y * blockDim.z;
    out[b * n + t] = blockIdx.x | (blockIdx.y << 4) | (blockIdx.z << 8) | (threadIdx.x << 12) |
                     (threadIdx.y << 18) | (threadIdx.z << 24);
}
FT_KERNEL_EXPORT(indices)

/* Per warp: the sum of its 32 values by butterfly (every lane) and by shfl_down (lane 0). */
extern "C" __global__ void warp_sums(float *out, const float *x) {
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x, w = i / 32;
    float v = x[i];
    float s = ft_warp_sum(v);
    float d = v;
    for (int o = 16; o > 0; o >>= 1)
        d += __shfl_down_sync(0xffffffffu, d, o);
    float m = ft_warp_max(v);
    if ((threadIdx.x & 31) == 31) out[3 * w] = s; /* the butterfly leaves it in every lane */
    if ((threadIdx.x & 31) == 0) out[3 * w + 1] = d, out[3 * w + 2] = m;
}
FT_KERNEL_EXPORT(warp_sums)

/* Shuffle variants with widths; lane l's value is 100 + l. */
extern "C" __global__ void shuffles(int *out) {
    int lane = threadIdx.x & 31, v = 100 + lane;
    int *o = out + 8 * lane;
    o[0] = __shfl_sync(0xffffffffu, v, 3);
    o[1] = __shfl_sync(0xffffffffu, v, lane + 1, 8);
    o[2] = __shfl_up_sync(0xffffffffu, v, 2, 16);
    o[3] = __shfl_down_sync(0xffffffffu, v, 3, 16);
    o[4] = __shfl_xor_sync(0xffffffffu, v, 5);
    o[5] = __shfl_xor_sync(0xffffffffu, v, 9, 8);
    o[6] = __shfl_up_sync(0xffffffffu, v, 1);
    /* 64-bit values travel whole */
    long long big = ((long long)v << 32) | (long long)lane;
    long long got = __shfl_down_sync(0xffffffffu, big, 1);
    o[7] = (int)(got >> 32) + (int)(got & 0xffffffff);
}
FT_KERNEL_EXPORT(shuffles)

/* Votes and collectives over the full warp and over partial masks: even lanes vote among
 * themselves while the odd lanes of the lower half vote in a disjoint group of their own. */
extern "C" __global__ void votes(unsigned *out) {
    unsigned lane = threadIdx.x & 31;
    unsigned *o = out + 8 * lane;
    o[0] = __ballot_sync(0xffffffffu, lane % 3 == 0);
    o[1] = o[2] = o[3] = 0xdeadbeefu;
    if ((lane & 1) == 0) {
        o[1] = __ballot_sync(0x55555555u, lane < 10);
        o[2] = __all_sync(0x55555555u, lane < 40);
        o[3] = __any_sync(0x55555555u, lane == 30);
    } else if (lane < 16) {
        o[1] = __ballot_sync(0x0000aaaau, lane > 5);
        o[2] = __all_sync(0x0000aaaau, lane > 5);
        o[3] = __any_sync(0x0000aaaau, lane == 30);
    }
    __syncwarp();
    o[4] = __reduce_add_sync(0xffffffffu, lane);
    o[5] = __match_any_sync(0xffffffffu, lane / 4);
    o[6] = __activemask();
    o[7] = __syncthreads_count(lane & 1);
}
FT_KERNEL_EXPORT(votes)

/* Atomics on global and shared memory. gi: [0] count, [1] CAS count, [2] exch, [3] sub,
 * [4] min, [5] and, [6] or, [7] xor; gf: float sum; gu: [0] max, [1] inc; per block sums of the
 * shared atomics in sh. */
extern "C" __global__ void atomics(int *gi, float *gf, unsigned *gu, int *sh,
                                   unsigned long long *gull) {
    __shared__ int si, smax;
    __shared__ float sf;
    if (threadIdx.x == 0) si = 0, sf = 0.0f, smax = -1000;
    __syncthreads();
    int t = (int)(blockIdx.x * blockDim.x + threadIdx.x);
    atomicAdd(&gi[0], 1);
    int o = gi[1], assumed;
    do {
        assumed = o;
        o = atomicCAS(&gi[1], assumed, assumed + 3);
    } while (o != assumed);
    atomicExch(&gi[2], 7);
    atomicSub(&gi[3], 2);
    atomicMin(&gi[4], -t);
    atomicAnd(&gi[5], ~(1 << (t % 31)));
    atomicOr(&gi[6], 1 << (t % 31));
    atomicXor(&gi[7], t);
    atomicAdd(gf, 0.5f);
    atomicMax(&gu[0], (unsigned)t);
    atomicInc(&gu[1], 9u);
    atomicAdd(gull, 1ull << 33);
    atomicAdd(&si, 2);
    atomicAdd(&sf, 0.25f);
    atomicMax(&smax, (int)threadIdx.x);
    __syncthreads();
    if (threadIdx.x == 0) {
        sh[3 * blockIdx.x] = si;
        sh[3 * blockIdx.x + 1] = (int)(sf * 4.0f);
        sh[3 * blockIdx.x + 2] = smax;
    }
}
FT_KERNEL_EXPORT(atomics)

/* A spin lock in shared memory around a non-atomic increment; the holder sleeps inside the
 * critical section so that the others really spin (and must yield, or the block would hang). */
extern "C" __global__ void spinlock(int *out) {
    __shared__ int lock, count;
    if (threadIdx.x == 0) lock = 0, count = 0;
    __syncthreads();
    while (atomicCAS(&lock, 0, 1) != 0) {
    }
    int c = *(volatile int *)&count;
    __nanosleep(100);
    *(volatile int *)&count = c + 1;
    __threadfence_block();
    atomicExch(&lock, 0);
    __syncthreads();
    if (threadIdx.x == 0) out[blockIdx.x] = count;
}
FT_KERNEL_EXPORT(spinlock)

/* Reverse each block's slice through dynamic shared memory. */
extern "C" __global__ void reverse_dyn(float *y, const float *x) {
    FT_DYNAMIC_SMEM(float, buf);
    unsigned n = blockDim.x, base = blockIdx.x * n;
    buf[threadIdx.x] = x[base + threadIdx.x];
    __syncthreads();
    y[base + threadIdx.x] = buf[n - 1 - threadIdx.x];
}
FT_KERNEL_EXPORT(reverse_dyn)

/* Sum of a block's values: per-warp shuffles, then warp 0 over the warps' partial sums. */
extern "C" __global__ void block_sum(float *y, const float *x, int n) {
    __shared__ float part[32];
    int i = (int)(blockIdx.x * blockDim.x + threadIdx.x);
    float v = i < n ? x[i] : 0.0f;
    v = ft_warp_sum(v);
    int w = (int)threadIdx.x / 32, nw = ((int)blockDim.x + 31) / 32;
    if ((threadIdx.x & 31) == 0) part[w] = v;
    __syncthreads();
    if (w == 0) {
        v = (int)threadIdx.x < nw ? part[threadIdx.x] : 0.0f;
        v = ft_warp_sum(v);
        if (threadIdx.x == 0) y[blockIdx.x] = v;
    }
}
FT_KERNEL_EXPORT(block_sum)

/* Reads shared memory and an output nobody wrote: the emulator's poison makes them NaN. */
extern "C" __global__ void read_before_write(float *y, float *acc) {
    __shared__ float tile[64];
    if (threadIdx.x < 32) tile[threadIdx.x] = 1.0f; /* the upper half is never written */
    __syncthreads();
    y[threadIdx.x] = tile[threadIdx.x];
    acc[threadIdx.x] += 1.0f; /* accumulates into a buffer the host never cleared */
}
FT_KERNEL_EXPORT(read_before_write)

/* bf16 conversions and vector loads: y = bf16(x) widened back, 8 at a time. */
extern "C" __global__ void bf16_roundtrip(float *y, __nv_bfloat16 *h, const float *x) {
    unsigned i = 8 * (blockIdx.x * blockDim.x + threadIdx.x);
    float4 a = ft_ld_float4(x + i), b = ft_ld_float4(x + i + 4);
    float v[8] = {a.x, a.y, a.z, a.w, b.x, b.y, b.z, b.w};
    ft_st_bf16x8(h + i, v);
    float w[8];
    ft_ld_bf16x8(h + i, w);
    __nv_bfloat162 p = ft_ld_bf16x2(h + i);
    w[0] = __low2float(p);
    w[1] = __bfloat162float(__high2bfloat16(p));
    ft_st_float4(y + i, make_float4(w[0], w[1], w[2], w[3]));
    ft_st_float4(y + i + 4, make_float4(w[4], w[5], w[6], w[7]));
}
FT_KERNEL_EXPORT(bf16_roundtrip)

/* Many barriers: what a context switch costs (timing only). */
extern "C" __global__ void barriers(float *y, int rounds) {
    __shared__ float s[1024];
    float v = (float)threadIdx.x;
    for (int r = 0; r < rounds; r++) {
        s[threadIdx.x] = v;
        __syncthreads();
        v += s[(threadIdx.x + 1) % blockDim.x] * 0.5f;
        __syncthreads();
    }
    y[blockIdx.x * blockDim.x + threadIdx.x] = v;
}
FT_KERNEL_EXPORT(barriers)

/* y[i] = x[i - 1] through shared memory, with or without the barrier between the write and the
 * read. Without it, threads in linear order still see their left neighbour's value (it ran
 * first): only another order shows the missing barrier. */
extern "C" __global__ void shift_right(float *y, const float *x, int sync) {
    __shared__ float s[1024];
    unsigned i = threadIdx.x;
    s[i] = x[blockIdx.x * blockDim.x + i];
    if (sync) __syncthreads();
    y[blockIdx.x * blockDim.x + i] = i ? s[i - 1] : 0.0f;
}
FT_KERNEL_EXPORT(shift_right)
