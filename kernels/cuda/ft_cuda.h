/* ft_cuda.h: the one header every kernel source (kernels/FAMILY/NAME.cu) includes.
 *
 * Kernels are CUDA C compiled two ways from the same text:
 *   - by NVRTC for the GPU (__CUDACC_RTC__): the wrappers below are the real instructions
 *     (inline PTX) and bf16 comes from <cuda_bf16.h>;
 *   - by the host C++ compiler for the SIMT emulator (FT_EMU): emu/ft_emu.h provides threads,
 *     shared memory, barriers, warp collectives, atomics and exact emulations of the wrapped
 *     instructions, and rejects at compile time what it cannot emulate.
 * Only what differs between the two lives here; docs/kernel-dialect.md says what kernels may use.
 *
 *   FT_DYNAMIC_SMEM(type, name)   declares `type *name` pointing at the dynamic shared memory
 *   FT_KERNEL_EXPORT(name)        after each extern "C" __global__ kernel (no semicolon): lets
 *                                 the emulator launch it by name; nothing under NVRTC
 *   #if FT_KEEP(name) ... #endif  around each kernel and its export: a module keeps only the
 *                                 kernels its configuration launches when the host says which
 *                                 (-DFT_KEEP_SOME=1 -DFT_KEEP_<name>=1, from the module spec's
 *                                 kernel list), every kernel otherwise; a third to a fifth of
 *                                 the compile time of a whole source
 *   FT_CUDA_ARCH                  the target's compute capability * 100 (900 under the emulator)
 *   bf16:  __nv_bfloat16, __nv_bfloat162 with explicit conversions only (__float2bfloat16,
 *          __bfloat162float, __floats2bfloat162_rn, ...); ft_pack_bf16x2 / ft_unpack_bf16x2
 *   st_t:  the storage type of the module's float tensors (FT_BF16); ft_ldf / ft_stf
 *   loads: ft_ld_float4, ft_st_float4, ft_ld_bf16x2, ft_ld_bf16x8, ft_st_bf16x8 (aligned)
 *   warp:  ft_warp_sum, ft_warp_max (butterfly shuffles: every lane gets the result)
 *   mma:   ft_mma_m16n8k16_bf16(d, a, b, c)      mma.sync.aligned.m16n8k16.row.col.f32.bf16...
 *   ldmatrix: ft_ldmatrix_x{1,2,4}[_trans](r, row_address)    ldmatrix.sync.aligned.m8n8...b16
 *   cp.async: ft_cp_async_ca{4,8,16}(dst, src[, src_bytes]), ft_cp_async_cg16(...),
 *             ft_cp_async_commit(), ft_cp_async_wait<N>(), ft_cp_async_wait_all()
 */
#ifndef FT_CUDA_H
#define FT_CUDA_H

/* Undefined names are 0 in #if: no FT_KEEP_SOME keeps every kernel. */
#define FT_KEEP(name) (!FT_KEEP_SOME || FT_KEEP_##name)

#if defined(__CUDACC_RTC__) || defined(__CUDACC__)
/* ================================ the GPU (NVRTC) ============================================ */
/* bf16 without implicit conversions or operators, so that code written against the emulator's
 * minimal bf16 compiles here and the other way round. */
#define __CUDA_NO_BFLOAT16_CONVERSIONS__ 1
#define __CUDA_NO_BFLOAT16_OPERATORS__   1
#define __CUDA_NO_BFLOAT162_OPERATORS__  1
#include <cuda_bf16.h>

#if !defined(__CUDACC_RTC__)
#include <stdint.h>
#elif !defined(FT_CUDA_HAVE_STDINT)
typedef unsigned char uint8_t;
typedef unsigned short uint16_t;
typedef unsigned int uint32_t;
typedef unsigned long long uint64_t;
typedef signed char int8_t;
typedef short int16_t;
typedef int int32_t;
typedef long long int64_t;
#endif
#ifndef INFINITY
#define INFINITY __int_as_float(0x7f800000)
#endif
#ifndef NAN
#define NAN __int_as_float(0x7fffffff)
#endif

#define FT_CUDA_ARCH __CUDA_ARCH__
#define FT_DYNAMIC_SMEM(type, name)                                                                \
    extern __shared__ __align__(16) unsigned char ft_dynamic_smem_[];                              \
    type *name = reinterpret_cast<type *>(ft_dynamic_smem_)
#define FT_KERNEL_EXPORT(name)
#define FT_ASSUME_ALIGNED_(p, n, what)

__device__ __forceinline__ void ft_mma_m16n8k16_bf16(float *d, const uint32_t *a, const uint32_t *b,
                                                     const float *c) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
                 "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%10,%11,%12,%13};\n"
                 : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "f"(c[0]),
                   "f"(c[1]), "f"(c[2]), "f"(c[3]));
}

__device__ __forceinline__ unsigned ft_smem_addr_(const void *p) {
    return (unsigned)__cvta_generic_to_shared(p);
}
/* ldmatrix of 1, 2 or 4 8x8 b16 matrices (.trans: transposed), a register each; the outputs
 * are the variadic arguments. */
#define FT_LDMATRIX_(name, shape, operands, ...)                                                   \
    __device__ __forceinline__ void name(uint32_t *r, const void *row) {                           \
        asm volatile("ldmatrix.sync.aligned.m8n8." shape ".shared.b16 " operands ";\n"             \
                     : __VA_ARGS__                                                                 \
                     : "r"(ft_smem_addr_(row))                                                     \
                     : "memory");                                                                  \
    }
FT_LDMATRIX_(ft_ldmatrix_x1, "x1", "{%0}, [%1]", "=r"(r[0]))
FT_LDMATRIX_(ft_ldmatrix_x2, "x2", "{%0,%1}, [%2]", "=r"(r[0]), "=r"(r[1]))
FT_LDMATRIX_(ft_ldmatrix_x4, "x4", "{%0,%1,%2,%3}, [%4]", "=r"(r[0]), "=r"(r[1]), "=r"(r[2]),
             "=r"(r[3]))
FT_LDMATRIX_(ft_ldmatrix_x1_trans, "x1.trans", "{%0}, [%1]", "=r"(r[0]))
FT_LDMATRIX_(ft_ldmatrix_x2_trans, "x2.trans", "{%0,%1}, [%2]", "=r"(r[0]), "=r"(r[1]))
FT_LDMATRIX_(ft_ldmatrix_x4_trans, "x4.trans", "{%0,%1,%2,%3}, [%4]", "=r"(r[0]), "=r"(r[1]),
             "=r"(r[2]), "=r"(r[3]))

/* cp.async of n bytes (.ca: cached in L1, .cg: L2 only), src_bytes of them read, the rest zero. */
#define FT_CP_ASYNC_(name, cache, n)                                                               \
    __device__ __forceinline__ void name(void *dst, const void *src, int src_bytes = n) {          \
        asm volatile("cp.async." cache ".shared.global [%0], [%1], " #n ", %2;\n"                  \
                     ::"r"(ft_smem_addr_(dst)), "l"(__cvta_generic_to_global(src)), "r"(src_bytes) \
                     : "memory");                                                                  \
    }
FT_CP_ASYNC_(ft_cp_async_ca4, "ca", 4)
FT_CP_ASYNC_(ft_cp_async_ca8, "ca", 8)
FT_CP_ASYNC_(ft_cp_async_ca16, "ca", 16)
FT_CP_ASYNC_(ft_cp_async_cg16, "cg", 16)
#undef FT_LDMATRIX_
#undef FT_CP_ASYNC_
__device__ __forceinline__ void ft_cp_async_commit() {
    asm volatile("cp.async.commit_group;\n" ::: "memory");
}
template <int N> __device__ __forceinline__ void ft_cp_async_wait() {
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}
__device__ __forceinline__ void ft_cp_async_wait_all() {
    asm volatile("cp.async.wait_all;\n" ::: "memory");
}

#elif defined(FT_EMU)
/* ================================ the emulator =============================================== */
#include "emu/ft_emu.h"

#define FT_DYNAMIC_SMEM(type, name)                                                                \
    type *name = reinterpret_cast<type *>(::ft_emu::self()->dyn_smem)
#define FT_KERNEL_EXPORT(name)         FT_EMU_KERNEL_EXPORT(name)
#define FT_ASSUME_ALIGNED_(p, n, what) ::ft_emu::check_align(p, n, what, ft_file_, ft_line_)
#define FT_SITE_                       , FT_EMU_SITE

static inline void ft_mma_m16n8k16_bf16(float *d, const uint32_t *a, const uint32_t *b,
                                        const float *c, FT_EMU_SITE) {
    ft_emu::mma_m16n8k16_bf16(d, a, b, c, ft_file_, ft_line_);
}
#define FT_EMU_LDMATRIX_(name, n, trans)                                                           \
    static inline void name(uint32_t *r, const void *row, FT_EMU_SITE) {                           \
        ft_emu::ldmatrix<n, trans>(r, row, ft_file_, ft_line_);                                    \
    }
FT_EMU_LDMATRIX_(ft_ldmatrix_x1, 1, false)
FT_EMU_LDMATRIX_(ft_ldmatrix_x2, 2, false)
FT_EMU_LDMATRIX_(ft_ldmatrix_x4, 4, false)
FT_EMU_LDMATRIX_(ft_ldmatrix_x1_trans, 1, true)
FT_EMU_LDMATRIX_(ft_ldmatrix_x2_trans, 2, true)
FT_EMU_LDMATRIX_(ft_ldmatrix_x4_trans, 4, true)
#define FT_EMU_CP_ASYNC_(name, n)                                                                  \
    static inline void name(void *dst, const void *src, int src_bytes = n, FT_EMU_SITE) {          \
        ft_emu::cp_async(dst, src, n, src_bytes, ft_file_, ft_line_);                              \
    }
FT_EMU_CP_ASYNC_(ft_cp_async_ca4, 4)
FT_EMU_CP_ASYNC_(ft_cp_async_ca8, 8)
FT_EMU_CP_ASYNC_(ft_cp_async_ca16, 16)
FT_EMU_CP_ASYNC_(ft_cp_async_cg16, 16)
#undef FT_EMU_LDMATRIX_
#undef FT_EMU_CP_ASYNC_
static inline void ft_cp_async_commit() {}
template <int N> static inline void ft_cp_async_wait() {}
static inline void ft_cp_async_wait_all() {}

#else
#error "ft_cuda.h is compiled by NVRTC (the GPU) or with -DFT_EMU (the emulator)"
#endif

/* ================================ common to both ============================================= */
#ifndef FT_SITE_
#define FT_SITE_
#endif

/* The storage type of a module's float tensors: FT_BF16=1 when the call stores them in bfloat16
 * (its `dtype` attribute), else float. Arithmetic is float32 either way: ft_ldf / ft_stf read
 * and write one element of either type as a float (rounding to nearest even on the way out). */
#ifndef FT_BF16
#define FT_BF16 0
#endif
#if FT_BF16
typedef __nv_bfloat16 st_t;
#else
typedef float st_t;
#endif
__device__ __forceinline__ float ft_ldf(const float *p) { return *p; }
__device__ __forceinline__ float ft_ldf(const __nv_bfloat16 *p) { return __bfloat162float(*p); }
__device__ __forceinline__ void ft_stf(float *p, float v) { *p = v; }
__device__ __forceinline__ void ft_stf(__nv_bfloat16 *p, float v) { *p = __float2bfloat16(v); }

/* Two floats as bf16x2 (lo in the low half, as mma fragments and ldmatrix registers hold them). */
__device__ __forceinline__ uint32_t ft_pack_bf16x2(float lo, float hi) {
    return (uint32_t)__bfloat16_as_ushort(__float2bfloat16(lo)) |
           ((uint32_t)__bfloat16_as_ushort(__float2bfloat16(hi)) << 16);
}
__device__ __forceinline__ void ft_unpack_bf16x2(uint32_t v, float *lo, float *hi) {
    *lo = __bfloat162float(__ushort_as_bfloat16((unsigned short)(v & 0xffffu)));
    *hi = __bfloat162float(__ushort_as_bfloat16((unsigned short)(v >> 16)));
}

/* One access of a whole vector (T: float2, float4, uint2, uint4, ...; p aligned to sizeof(T)):
 * LDG/STG.E.64 or .128 on the GPU. The emulator copies it whole too, so its memory profile sees
 * the one access the GPU makes (the host compiler may split an assignment of a vector built
 * from scalars into one store per field). */
template <typename T> __device__ __forceinline__ T ft_vld(const void *p) {
#if defined(FT_EMU)
    T v;
    memcpy(&v, p, sizeof v);
    return v;
#else
    return *reinterpret_cast<const T *>(p);
#endif
}
template <typename T> __device__ __forceinline__ void ft_vst(void *p, const T &v) {
#if defined(FT_EMU)
    memcpy(p, &v, sizeof v);
#else
    *reinterpret_cast<T *>(p) = v;
#endif
}

/* Vector loads and stores: p must be aligned to the vector's size (the emulator checks). The
 * load `ld` and the store `st` of vectors V of elements E, `bytes` long. */
#define FT_VEC_ACCESS_(ld, st, E, V, bytes, what)                                                  \
    __device__ __forceinline__ V ld(const E *p FT_SITE_) {                                         \
        FT_ASSUME_ALIGNED_(p, bytes, "a " what " load");                                           \
        return ft_vld<V>(p);                                                                       \
    }                                                                                              \
    __device__ __forceinline__ void st(E *p, V v FT_SITE_) {                                       \
        FT_ASSUME_ALIGNED_(p, bytes, "a " what " store");                                          \
        ft_vst(p, v);                                                                              \
    }
FT_VEC_ACCESS_(ft_ld_float4, ft_st_float4, float, float4, 16, "float4")
FT_VEC_ACCESS_(ft_ld_bf16x2, ft_st_bf16x2, __nv_bfloat16, __nv_bfloat162, 4, "bf16x2")
#undef FT_VEC_ACCESS_
/* Eight bf16 (one 16-byte load) widened to floats. */
__device__ __forceinline__ void ft_ld_bf16x8(const __nv_bfloat16 *p, float *out FT_SITE_) {
    FT_ASSUME_ALIGNED_(p, 16, "a bf16x8 load");
    uint4 v = ft_vld<uint4>(p);
    ft_unpack_bf16x2(v.x, &out[0], &out[1]);
    ft_unpack_bf16x2(v.y, &out[2], &out[3]);
    ft_unpack_bf16x2(v.z, &out[4], &out[5]);
    ft_unpack_bf16x2(v.w, &out[6], &out[7]);
}
__device__ __forceinline__ void ft_st_bf16x8(__nv_bfloat16 *p, const float *in FT_SITE_) {
    FT_ASSUME_ALIGNED_(p, 16, "a bf16x8 store");
    uint4 v;
    v.x = ft_pack_bf16x2(in[0], in[1]);
    v.y = ft_pack_bf16x2(in[2], in[3]);
    v.z = ft_pack_bf16x2(in[4], in[5]);
    v.w = ft_pack_bf16x2(in[6], in[7]);
    ft_vst(p, v);
}

/* Warp reductions by butterfly shuffles over all 32 lanes: every lane gets the result. */
__device__ __forceinline__ float ft_warp_sum(float v) {
    for (int o = 16; o > 0; o >>= 1)
        v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}
__device__ __forceinline__ float ft_warp_max(float v) {
    for (int o = 16; o > 0; o >>= 1)
        v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

#endif
