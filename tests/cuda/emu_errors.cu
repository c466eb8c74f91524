/* emu_errors.cu: kernels that break the rules of barriers and warp collectives, for the
 * emulator's self-tests: each must end in a clear launch error, never a hang. (They compile for
 * the GPU too, where most of them would hang or return garbage.) */
#include "ft_cuda.h"

/* Half the block waits at one __syncthreads, half at another. */
extern "C" __global__ void divergent_barrier(float *y) {
    if (threadIdx.x < 16) {
        __syncthreads();
        y[threadIdx.x] = 1.0f;
    } else {
        __syncthreads();
        y[threadIdx.x] = 2.0f;
    }
}
FT_KERNEL_EXPORT(divergent_barrier)

/* Thread 5 leaves before the barrier the others wait at. */
extern "C" __global__ void exit_before_barrier(float *y) {
    if (threadIdx.x == 5) return;
    __syncthreads();
    y[threadIdx.x] = 1.0f;
}
FT_KERNEL_EXPORT(exit_before_barrier)

/* Lane 31 skips a full-warp shuffle and exits. */
extern "C" __global__ void missing_lane(float *y) {
    float v = (float)threadIdx.x;
    if ((threadIdx.x & 31) < 31) v += __shfl_down_sync(0xffffffffu, v, 1);
    y[threadIdx.x] = v;
}
FT_KERNEL_EXPORT(missing_lane)

/* Lane 31 skips the shuffle and goes on to a barrier. */
extern "C" __global__ void missing_lane_at_barrier(float *y) {
    float v = (float)threadIdx.x;
    if ((threadIdx.x & 31) != 31) v += __shfl_xor_sync(0xffffffffu, v, 1);
    __syncthreads();
    y[threadIdx.x] = v;
}
FT_KERNEL_EXPORT(missing_lane_at_barrier)

/* Lane 20 passes a mask that does not name it. */
extern "C" __global__ void mask_without_self(float *y) {
    unsigned lane = threadIdx.x & 31;
    unsigned mask = lane < 16 || lane == 20 ? 0x0000ffffu : 0xffff0000u;
    float v = __shfl_sync(mask, (float)lane, 0);
    y[threadIdx.x] = v;
}
FT_KERNEL_EXPORT(mask_without_self)

/* __trap in one thread of one block. */
extern "C" __global__ void trap_one(float *y) {
    if (blockIdx.x == 2 && threadIdx.x == 7) __trap();
    y[blockIdx.x * blockDim.x + threadIdx.x] = 1.0f;
}
FT_KERNEL_EXPORT(trap_one)

/* Writes one float past the dynamic shared memory it was given. */
extern "C" __global__ void dyn_overflow(float *y, int n) {
    FT_DYNAMIC_SMEM(float, buf);
    buf[threadIdx.x] = 1.0f;
    if (threadIdx.x == 0) buf[n] = 2.0f;
    __syncthreads();
    y[threadIdx.x] = buf[threadIdx.x];
}
FT_KERNEL_EXPORT(dyn_overflow)

/* An mma in a block whose second warp has only 16 threads. */
extern "C" __global__ void mma_partial_warp(float *y) {
    uint32_t a[4] = {0, 0, 0, 0}, b[2] = {0, 0};
    float c[4] = {0, 0, 0, 0}, d[4];
    ft_mma_m16n8k16_bf16(d, a, b, c);
    y[threadIdx.x] = d[0];
}
FT_KERNEL_EXPORT(mma_partial_warp)

/* ldmatrix from global memory. */
extern "C" __global__ void ldmatrix_global(uint32_t *y, const uint16_t *g) {
    uint32_t r[1];
    ft_ldmatrix_x1(r, g + 8 * (threadIdx.x % 8));
    y[threadIdx.x] = r[0];
}
FT_KERNEL_EXPORT(ldmatrix_global)

/* A float4 load from an address that is not 16-byte aligned. */
extern "C" __global__ void misaligned_float4(float *y, const float *x) {
    float4 v = ft_ld_float4(x + 1 + 4 * threadIdx.x);
    y[threadIdx.x] = v.x;
}
FT_KERNEL_EXPORT(misaligned_float4)

/* Reads one element past the end of x (n elements): the guard page after the buffer faults, or
 * in sanitizer builds, where kernels are instrumented too, AddressSanitizer reports it. */
extern "C" __global__ void read_past_end(float *y, const float *x, int n) {
    y[threadIdx.x] = x[threadIdx.x + (threadIdx.x == 0 ? n : 0)];
}
FT_KERNEL_EXPORT(read_past_end)

/* Thread 0 reads x[off] (far past the end, or before the start), the others x[0]. */
extern "C" __global__ void read_at(float *y, const float *x, long long off) {
    y[threadIdx.x] = x[threadIdx.x == 0 ? off : 0];
}
FT_KERNEL_EXPORT(read_at)

/* A local array of 256 KiB, more than the emulator's stack holds (a GPU would give it local
 * memory, up to 512 KiB a thread): n floats of it written, n up to 2^16. */
extern "C" __global__ void deep_stack(float *y, const float *x, int n) {
    volatile float big[1 << 16];
    for (int i = 0; i < n; i++)
        big[i] = x[i % 32];
    y[threadIdx.x] = big[n - 1 - threadIdx.x];
}
FT_KERNEL_EXPORT(deep_stack)

/* Says it started (flags[0]), waits until another launch sets flags[1], then reads one element
 * past the end of x (n elements). One thread. */
extern "C" __global__ void read_past_end_later(float *y, const float *x, volatile int *flags, int n) {
    flags[0] = 1;
    while (!flags[1]) {
    }
    y[0] = x[n];
}
FT_KERNEL_EXPORT(read_past_end_later)

/* Sets flags[1]. One thread. */
extern "C" __global__ void set_go(volatile int *flags) { flags[1] = 1; }
FT_KERNEL_EXPORT(set_go)

/* Thread 0 writes y[off], far past any fence (the others write y[lane]). */
extern "C" __global__ void write_at(float *y, const float *x, long long off) {
    y[threadIdx.x == 0 ? off : threadIdx.x] = x[0];
}
FT_KERNEL_EXPORT(write_at)
