/* ft_emu.h: the CUDA dialect of kernels/cuda/ft_cuda.h, emulated on the CPU (FT_EMU).
 *
 * Kernel sources include ft_cuda.h, which includes this file when compiled by the host C++
 * compiler with -DFT_EMU (ft_dev_compile does that for FT_DEV_EMU). It turns CUDA C into plain
 * C++17 that the emulator's runtime runs with one fiber per CUDA thread:
 *
 *   threadIdx, blockIdx, ...  read from the calling fiber's descriptor, found by masking the
 *                             frame address (see ft_emu_abi.h)
 *   __shared__                static thread_local: one copy per OS worker thread, and a worker
 *                             runs one block at a time; the runtime poisons it (0xFF bytes)
 *                             before every block
 *   __syncthreads, shuffles,  calls into the runtime, which switches fibers until every thread
 *   votes, mma, ldmatrix      that must take part has arrived, and reports the launch as failed
 *                             (kernel, block, thread, source line) when that can never happen
 *   atomics                   GCC __atomic builtins (blocks may run on several OS threads)
 *
 * What the emulator does not emulate is a compile-time error here, not a wrong answer later:
 * inline PTX (asm), thread block clusters and distributed shared memory, TMA / cp.async.bulk,
 * wgmma, and the CUDA headers that expose them (see emu/include/).
 */
#ifndef FT_EMU_H
#define FT_EMU_H

#if !defined(__cplusplus) || __cplusplus < 201703L
#error "kernels are compiled as C++17 under FT_EMU (g++ -std=c++17)"
#endif

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <type_traits>
#include <utility>

#include "ft_emu_abi.h"

/* ---- keywords ------------------------------------------------------------------------------ */
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline __attribute__((always_inline))
#define __noinline__    __attribute__((noinline))
#define __launch_bounds__(...)
#define __grid_constant__
#define __shared__ static thread_local
#define __constant__
#define __align__(n) __attribute__((aligned(n)))
#define FT_CUDA_ARCH 900 /* the architecture the emulator mimics (H100-like) */

/* ---- what is not emulated: a compile-time error at the point of use -------------------------- */
/* FT_EMU_NOT_EMULATED_("message") is an error with that message where it is used. */
#define FT_EMU_PRAGMA_(x)         _Pragma(#x)
#define FT_EMU_NOT_EMULATED_(msg) FT_EMU_PRAGMA_(GCC error msg)
#define __managed__               FT_EMU_NOT_EMULATED_("__managed__ memory is not emulated under FT_EMU")
#define __cluster_dims__(...)                                                                      \
    FT_EMU_NOT_EMULATED_("thread block clusters (__cluster_dims__) are not emulated under FT_EMU")
#define __cluster_barrier_arrive(...)                                                              \
    FT_EMU_NOT_EMULATED_("cluster barriers are not emulated under FT_EMU")
#define __cluster_barrier_arrive_relaxed(...)                                                      \
    FT_EMU_NOT_EMULATED_("cluster barriers are not emulated under FT_EMU")
#define __cluster_barrier_wait(...)                                                                \
    FT_EMU_NOT_EMULATED_("cluster barriers are not emulated under FT_EMU")
#define __cluster_map_shared_rank(...)                                                             \
    FT_EMU_NOT_EMULATED_("distributed shared memory is not emulated under FT_EMU")
#define __cluster_query_shared_rank(...)                                                           \
    FT_EMU_NOT_EMULATED_("distributed shared memory is not emulated under FT_EMU")
#define __clusterDim(...)                                                                          \
    FT_EMU_NOT_EMULATED_("thread block clusters are not emulated under FT_EMU")
#define __clusterIdx(...)                                                                          \
    FT_EMU_NOT_EMULATED_("thread block clusters are not emulated under FT_EMU")
#define __clusterRelativeBlockIdx(...)                                                             \
    FT_EMU_NOT_EMULATED_("thread block clusters are not emulated under FT_EMU")
#define __clusterRelativeBlockRank(...)                                                            \
    FT_EMU_NOT_EMULATED_("thread block clusters are not emulated under FT_EMU")
#define __clusterSizeInBlocks(...)                                                                 \
    FT_EMU_NOT_EMULATED_("thread block clusters are not emulated under FT_EMU")
#define __clusterGridDimInClusters(...)                                                            \
    FT_EMU_NOT_EMULATED_("thread block clusters are not emulated under FT_EMU")
#define __cvta_generic_to_shared(...)                                                              \
    FT_EMU_NOT_EMULATED_(                                                                          \
        "__cvta_generic_to_shared (an address for inline PTX) is not emulated under FT_EMU")

/* The accessors behind threadIdx and friends: inlined, except in debug builds
 * (FLARETUNE_EMU_DEBUG=1 passes -DFT_EMU_DEBUG), where gdb can call them to print threadIdx. */
#if defined(FT_EMU_DEBUG)
#define FT_EMU_ACCESSOR_ static __attribute__((noinline, used))
#else
#define FT_EMU_ACCESSOR_ static __attribute__((always_inline)) inline
#endif

namespace ft_emu {

/* The calling CUDA thread: its descriptor sits at the base of its fiber's stack region. */
FT_EMU_ACCESSOR_ ft_emu_thread *self() {
    uintptr_t fp = (uintptr_t)__builtin_frame_address(0);
    return reinterpret_cast<ft_emu_thread *>(fp & ~(uintptr_t)(FT_EMU_STACK_BYTES - 1));
}

[[noreturn]] static inline void fail(const char *file, int line, const char *msg) {
    ft_emu_thread *t = self();
    t->api->fail(t, file, line, msg);
    __builtin_unreachable();
}

static inline void check_align(const void *p, size_t align, const char *what, const char *file,
                               int line) {
    if ((uintptr_t)p % align) {
        char msg[160];
        snprintf(msg, sizeof msg, "%s at %p is not %zu-byte aligned", what, p, align);
        fail(file, line, msg);
    }
}

/* ---- the profile (FT_EMU_PROFILE) ---------------------------------------------------------------
 * A profile module is compiled with GCC's -fsanitize=thread, which calls __tsan_readN /
 * __tsan_writeN / __tsan_atomicN_* before each load, store and atomic of the kernel code; the
 * definitions at the end of this file hand each one to the runtime (ft_emu_api.access), which
 * rebuilds the warps' requests (emu/prof.h). ft_emu_profile_live is 1 only while the runtime
 * runs this module's threads, so code run at load time (static constructors) reports nothing.
 * The emulator's own helpers that touch memory on behalf of a warp (ldmatrix's combine,
 * cp.async) are not instrumented and report their accesses as the instruction would make them. */
#if defined(FT_EMU_PROFILE)
#define FT_EMU_UNPROFILED_ __attribute__((no_sanitize_thread))
extern "C" __attribute__((visibility("default"), used)) int ft_emu_profile_live;
FT_EMU_UNPROFILED_ static inline void prof_note(const void *pc, const volatile void *addr,
                                                unsigned size, unsigned flags) {
    if (!ft_emu_profile_live) return;
    uintptr_t fp = (uintptr_t)__builtin_frame_address(0);
    ft_emu_thread *t = reinterpret_cast<ft_emu_thread *>(fp & ~(uintptr_t)(FT_EMU_STACK_BYTES - 1));
    t->api->access(t, pc, (const void *)addr, size, flags);
}
#define FT_EMU_PROF_NOTE_(addr, size, flags)                                                       \
    ::ft_emu::prof_note(__builtin_return_address(0), (addr), (size), (flags))
#else
#define FT_EMU_UNPROFILED_
#define FT_EMU_PROF_NOTE_(addr, size, flags) ((void)0)
#endif

template <typename T> static inline uint64_t to_bits(T v) {
    static_assert(sizeof(T) <= 8 && std::is_trivially_copyable<T>::value,
                  "warp shuffles move values of at most 8 bytes");
    uint64_t u = 0;
    memcpy(&u, &v, sizeof v);
    return u;
}
template <typename T> static inline T from_bits(uint64_t u) {
    T v;
    memcpy(&v, &u, sizeof v);
    return v;
}

} // namespace ft_emu

/* ---- vector types: every one of CUDA's vector_types.h, with its layout and alignment -------- */
/* A kernel brought in a T1 file declares double3 or short4 as readily as float4, and passes them
 * through device buffers the host lays out as CUDA does: so each type here has CUDA's size and
 * alignment (tests/data/foreign/vectors.cu asserts them on both compilers). */
typedef ft_emu_uint3 uint3;
struct dim3 {
    unsigned x, y, z;
    constexpr dim3(unsigned x_ = 1, unsigned y_ = 1, unsigned z_ = 1) : x(x_), y(y_), z(z_) {}
};
/* N1, N2 (aligned A2), N4 (aligned A4) of base B, and their make_ functions; N3 apart, as uint3
 * is the built-in variables' type. */
#define FT_EMU_VEC124_(N, B, A2, A4)                                                               \
    struct N##1 {                                                                                  \
        B x;                                                                                       \
    };                                                                                             \
    struct __attribute__((aligned(A2))) N##2 {                                                     \
        B x, y;                                                                                    \
    };                                                                                             \
    struct __attribute__((aligned(A4))) N##4 {                                                     \
        B x, y, z, w;                                                                              \
    };                                                                                             \
    static inline N##1 make_##N##1(B x) { return N##1 {x}; }                                       \
    static inline N##2 make_##N##2(B x, B y) { return N##2 {x, y}; }                               \
    static inline N##4 make_##N##4(B x, B y, B z, B w) { return N##4 {x, y, z, w}; }
#define FT_EMU_VEC3_(N, B)                                                                         \
    struct N##3 {                                                                                  \
        B x, y, z;                                                                                 \
    };                                                                                             \
    static inline N##3 make_##N##3(B x, B y, B z) { return N##3 {x, y, z}; }
/* CUDA 13's 4-vectors of 8-byte elements aligned to 16 or 32 bytes (N4 itself is 16). */
#define FT_EMU_VEC4A_(N, B)                                                                        \
    struct __attribute__((aligned(16))) N##4_16a {                                                 \
        B x, y, z, w;                                                                              \
    };                                                                                             \
    struct __attribute__((aligned(32))) N##4_32a {                                                 \
        B x, y, z, w;                                                                              \
    };                                                                                             \
    static inline N##4_16a make_##N##4_16a(B x, B y, B z, B w) { return N##4_16a {x, y, z, w}; }   \
    static inline N##4_32a make_##N##4_32a(B x, B y, B z, B w) { return N##4_32a {x, y, z, w}; }
FT_EMU_VEC124_(char, signed char, 2, 4)
FT_EMU_VEC3_(char, signed char)
FT_EMU_VEC124_(uchar, unsigned char, 2, 4)
FT_EMU_VEC3_(uchar, unsigned char)
FT_EMU_VEC124_(short, short, 4, 8)
FT_EMU_VEC3_(short, short)
FT_EMU_VEC124_(ushort, unsigned short, 4, 8)
FT_EMU_VEC3_(ushort, unsigned short)
FT_EMU_VEC124_(int, int, 8, 16)
FT_EMU_VEC3_(int, int)
FT_EMU_VEC124_(uint, unsigned, 8, 16)
static inline uint3 make_uint3(unsigned x, unsigned y, unsigned z) { return uint3{x, y, z}; }
FT_EMU_VEC124_(long, long, 2 * sizeof(long), 16)
FT_EMU_VEC3_(long, long)
FT_EMU_VEC4A_(long, long)
FT_EMU_VEC124_(ulong, unsigned long, 2 * sizeof(unsigned long), 16)
FT_EMU_VEC3_(ulong, unsigned long)
FT_EMU_VEC4A_(ulong, unsigned long)
FT_EMU_VEC124_(longlong, long long, 16, 16)
FT_EMU_VEC3_(longlong, long long)
FT_EMU_VEC4A_(longlong, long long)
FT_EMU_VEC124_(ulonglong, unsigned long long, 16, 16)
FT_EMU_VEC3_(ulonglong, unsigned long long)
FT_EMU_VEC4A_(ulonglong, unsigned long long)
FT_EMU_VEC124_(float, float, 8, 16)
FT_EMU_VEC3_(float, float)
FT_EMU_VEC124_(double, double, 16, 16)
FT_EMU_VEC3_(double, double)
FT_EMU_VEC4A_(double, double)
#undef FT_EMU_VEC124_
#undef FT_EMU_VEC3_
#undef FT_EMU_VEC4A_

/* ---- built-in variables ---------------------------------------------------------------------- */
namespace ft_emu {
FT_EMU_ACCESSOR_ const uint3 &thread_idx() { return self()->tid; }
FT_EMU_ACCESSOR_ const uint3 &block_idx() { return self()->bid; }
FT_EMU_ACCESSOR_ dim3 block_dim() {
    const ft_emu_uint3 &d = self()->bdim;
    return dim3(d.x, d.y, d.z);
}
FT_EMU_ACCESSOR_ dim3 grid_dim() {
    const ft_emu_uint3 &d = self()->gdim;
    return dim3(d.x, d.y, d.z);
}
} // namespace ft_emu
#define threadIdx (::ft_emu::thread_idx())
#define blockIdx  (::ft_emu::block_idx())
#define blockDim  (::ft_emu::block_dim())
#define gridDim   (::ft_emu::grid_dim())
static constexpr int warpSize = 32;

/* ---- barriers -------------------------------------------------------------------------------- */
/* The call site (file, line) travels with every barrier and collective: threads waiting at
 * different __syncthreads are a divergent barrier, and error messages name the line. */
#define FT_EMU_SITE const char *ft_file_ = __builtin_FILE(), int ft_line_ = __builtin_LINE()
static inline void __syncthreads(FT_EMU_SITE) {
    ft_emu_thread *t = ft_emu::self();
    t->api->barrier(t, FT_EMU_BAR_SYNC, 0, ft_file_, ft_line_);
}
static inline int __syncthreads_count(int pred, FT_EMU_SITE) {
    ft_emu_thread *t = ft_emu::self();
    return t->api->barrier(t, FT_EMU_BAR_COUNT, pred != 0, ft_file_, ft_line_);
}
static inline int __syncthreads_and(int pred, FT_EMU_SITE) {
    ft_emu_thread *t = ft_emu::self();
    return t->api->barrier(t, FT_EMU_BAR_AND, pred != 0, ft_file_, ft_line_);
}
static inline int __syncthreads_or(int pred, FT_EMU_SITE) {
    ft_emu_thread *t = ft_emu::self();
    return t->api->barrier(t, FT_EMU_BAR_OR, pred != 0, ft_file_, ft_line_);
}

/* ---- warp collectives ------------------------------------------------------------------------ */
namespace ft_emu {

static void combine_none(ft_emu_thread *const *, unsigned) {}

/* Shuffles: each lane computes its source lane (in.u32[2]) the way PTX shfl.sync does from the
 * lane operand b and the clamp/segment operand c the CUDA intrinsics pass; a source outside the
 * mask reads as all-ones bits (a NaN for floats), which real hardware leaves undefined. */
static void combine_shfl(ft_emu_thread *const lanes[32], unsigned mask) {
    for (int l = 0; l < 32; l++) {
        ft_emu_thread *t = lanes[l];
        if (!t) continue;
        unsigned j = t->in.u32[2];
        ft_emu_thread *s = (j < 32 && (mask >> j & 1u)) ? lanes[j] : nullptr;
        t->out.u64[0] = s ? s->in.u64[0] : ~(uint64_t)0;
    }
}
enum { SHFL_IDX, SHFL_UP, SHFL_DOWN, SHFL_XOR };
static const ft_emu_coll coll_shfl[4] = {{"__shfl_sync", combine_shfl, 1, 0},
                                         {"__shfl_up_sync", combine_shfl, 1, 0},
                                         {"__shfl_down_sync", combine_shfl, 1, 0},
                                         {"__shfl_xor_sync", combine_shfl, 1, 0}};
static const ft_emu_coll coll_syncwarp = {"__syncwarp", combine_none, 0, 0};

static inline unsigned shfl_source(int mode, unsigned lane, unsigned b, int width, const char *file,
                                   int line) {
    if (width < 1 || width > 32 || (width & (width - 1)))
        fail(file, line, "shuffle width must be a power of two from 1 to 32");
    unsigned segmask = (32u - (unsigned)width) & 31u;
    unsigned cval = mode == SHFL_UP ? 0u : 31u;
    unsigned max_lane = (lane & segmask) | (cval & ~segmask);
    unsigned min_lane = lane & segmask;
    b &= 31u;
    int j = (int)lane;
    bool ok = false;
    switch (mode) {
    case SHFL_UP: j = (int)lane - (int)b, ok = j >= (int)max_lane; break;
    case SHFL_DOWN: j = (int)(lane + b), ok = j <= (int)max_lane; break;
    case SHFL_XOR: j = (int)(lane ^ b), ok = j <= (int)max_lane; break;
    default: j = (int)(min_lane | (b & ~segmask)), ok = j <= (int)max_lane; break;
    }
    return ok ? (unsigned)j : lane;
}

template <typename T>
static inline T shfl(int mode, unsigned mask, T var, unsigned b, int width, const char *file,
                     int line) {
    ft_emu_thread *t = self();
    t->in.u64[0] = to_bits(var);
    t->in.u32[2] = shfl_source(mode, t->lane, b, width, file, line);
    t->api->collective(t, mask, &coll_shfl[mode], file, line);
    return from_bits<T>(t->out.u64[0]);
}

/* Votes: out.u32[0] = ballot of the lanes in the mask, out.u32[1] = the lanes present. */
static void combine_vote(ft_emu_thread *const lanes[32], unsigned) {
    unsigned bits = 0, present = 0;
    for (int l = 0; l < 32; l++)
        if (lanes[l]) {
            present |= 1u << l;
            if (lanes[l]->in.u32[0]) bits |= 1u << l;
        }
    for (int l = 0; l < 32; l++)
        if (lanes[l]) lanes[l]->out.u32[0] = bits, lanes[l]->out.u32[1] = present;
}
static const ft_emu_coll coll_ballot = {"__ballot_sync", combine_vote, 1, 0};
static const ft_emu_coll coll_any = {"__any_sync", combine_vote, 1, 0};
static const ft_emu_coll coll_all = {"__all_sync", combine_vote, 1, 0};
static const ft_emu_coll coll_uni = {"__uni_sync", combine_vote, 1, 0};

static inline const ft_emu_thread &vote(unsigned mask, int pred, const ft_emu_coll *c,
                                        const char *file, int line) {
    ft_emu_thread *t = self();
    t->in.u32[0] = pred != 0;
    t->api->collective(t, mask, c, file, line);
    return *t;
}

/* __reduce_*_sync: in.u32[0] the value, in.u32[1] the operation. */
enum { RED_ADD, RED_MIN, RED_MAX, RED_IMIN, RED_IMAX, RED_AND, RED_OR, RED_XOR };
static void combine_reduce(ft_emu_thread *const lanes[32], unsigned) {
    int op = -1;
    uint32_t acc = 0;
    for (int l = 0; l < 32; l++) {
        if (!lanes[l]) continue;
        uint32_t v = lanes[l]->in.u32[0];
        if (op < 0) {
            op = (int)lanes[l]->in.u32[1], acc = v;
            continue;
        }
        switch (op) {
        case RED_ADD: acc += v; break;
        case RED_MIN: acc = v < acc ? v : acc; break;
        case RED_MAX: acc = v > acc ? v : acc; break;
        case RED_IMIN: acc = (int32_t)v < (int32_t)acc ? v : acc; break;
        case RED_IMAX: acc = (int32_t)v > (int32_t)acc ? v : acc; break;
        case RED_AND: acc &= v; break;
        case RED_OR: acc |= v; break;
        default: acc ^= v; break;
        }
    }
    for (int l = 0; l < 32; l++)
        if (lanes[l]) lanes[l]->out.u32[0] = acc;
}
static const ft_emu_coll coll_reduce[8] = {
    {"__reduce_add_sync", combine_reduce, 1, 0}, {"__reduce_min_sync", combine_reduce, 1, 0},
    {"__reduce_max_sync", combine_reduce, 1, 0}, {"__reduce_min_sync", combine_reduce, 1, 0},
    {"__reduce_max_sync", combine_reduce, 1, 0}, {"__reduce_and_sync", combine_reduce, 1, 0},
    {"__reduce_or_sync", combine_reduce, 1, 0},  {"__reduce_xor_sync", combine_reduce, 1, 0}};
static inline uint32_t reduce(unsigned mask, uint32_t v, int op, const char *file, int line) {
    ft_emu_thread *t = self();
    t->in.u32[0] = v;
    t->in.u32[1] = (uint32_t)op;
    t->api->collective(t, mask, &coll_reduce[op], file, line);
    return t->out.u32[0];
}

/* __match_*_sync: in.u64[0] the value; out.u32[0] the lanes holding the same value, out.u32[1]
 * whether all lanes of the mask hold it. */
static void combine_match(ft_emu_thread *const lanes[32], unsigned) {
    unsigned present = 0;
    for (int l = 0; l < 32; l++)
        if (lanes[l]) present |= 1u << l;
    for (int l = 0; l < 32; l++) {
        if (!lanes[l]) continue;
        unsigned same = 0;
        for (int k = 0; k < 32; k++)
            if (lanes[k] && lanes[k]->in.u64[0] == lanes[l]->in.u64[0]) same |= 1u << k;
        lanes[l]->out.u32[0] = same;
        lanes[l]->out.u32[1] = same == present;
    }
}
static const ft_emu_coll coll_match_any = {"__match_any_sync", combine_match, 1, 0};
static const ft_emu_coll coll_match_all = {"__match_all_sync", combine_match, 1, 0};

} // namespace ft_emu

static inline void __syncwarp(unsigned mask = 0xffffffffu, FT_EMU_SITE) {
    ft_emu_thread *t = ft_emu::self();
    t->api->collective(t, mask, &ft_emu::coll_syncwarp, ft_file_, ft_line_);
}
template <typename T>
static inline T __shfl_sync(unsigned mask, T var, int src_lane, int width = warpSize, FT_EMU_SITE) {
    return ft_emu::shfl(ft_emu::SHFL_IDX, mask, var, (unsigned)src_lane, width, ft_file_, ft_line_);
}
template <typename T>
static inline T __shfl_up_sync(unsigned mask, T var, unsigned delta, int width = warpSize,
                               FT_EMU_SITE) {
    return ft_emu::shfl(ft_emu::SHFL_UP, mask, var, delta, width, ft_file_, ft_line_);
}
template <typename T>
static inline T __shfl_down_sync(unsigned mask, T var, unsigned delta, int width = warpSize,
                                 FT_EMU_SITE) {
    return ft_emu::shfl(ft_emu::SHFL_DOWN, mask, var, delta, width, ft_file_, ft_line_);
}
template <typename T>
static inline T __shfl_xor_sync(unsigned mask, T var, int lane_mask, int width = warpSize,
                                FT_EMU_SITE) {
    return ft_emu::shfl(ft_emu::SHFL_XOR, mask, var, (unsigned)lane_mask, width, ft_file_,
                        ft_line_);
}
static inline unsigned __ballot_sync(unsigned mask, int pred, FT_EMU_SITE) {
    return ft_emu::vote(mask, pred, &ft_emu::coll_ballot, ft_file_, ft_line_).out.u32[0];
}
static inline int __any_sync(unsigned mask, int pred, FT_EMU_SITE) {
    return ft_emu::vote(mask, pred, &ft_emu::coll_any, ft_file_, ft_line_).out.u32[0] != 0;
}
static inline int __all_sync(unsigned mask, int pred, FT_EMU_SITE) {
    const ft_emu_thread &t = ft_emu::vote(mask, pred, &ft_emu::coll_all, ft_file_, ft_line_);
    return t.out.u32[0] == t.out.u32[1];
}
static inline int __uni_sync(unsigned mask, int pred, FT_EMU_SITE) {
    const ft_emu_thread &t = ft_emu::vote(mask, pred, &ft_emu::coll_uni, ft_file_, ft_line_);
    return t.out.u32[0] == 0 || t.out.u32[0] == t.out.u32[1];
}
/* The lanes of the warp that exist and have not exited (the emulator runs no lane "inactive" in
 * a divergent branch, so this is the most a kernel may assume on hardware too). */
static inline unsigned __activemask(void) {
    ft_emu_thread *t = ft_emu::self();
    return t->api->active_mask(t);
}
/* The warp reductions: the unsigned form of each, and the int form of add, min and max (min and
 * max compare as signed). */
#define FT_EMU_REDUCE(name, op)                                                                    \
    static inline unsigned name(unsigned mask, unsigned v, FT_EMU_SITE) {                          \
        return ft_emu::reduce(mask, v, ft_emu::op, ft_file_, ft_line_);                            \
    }
#define FT_EMU_REDUCE_INT(name, op)                                                                \
    static inline int name(unsigned mask, int v, FT_EMU_SITE) {                                    \
        return (int)ft_emu::reduce(mask, (uint32_t)v, ft_emu::op, ft_file_, ft_line_);             \
    }
FT_EMU_REDUCE(__reduce_add_sync, RED_ADD)
FT_EMU_REDUCE_INT(__reduce_add_sync, RED_ADD)
FT_EMU_REDUCE(__reduce_min_sync, RED_MIN)
FT_EMU_REDUCE_INT(__reduce_min_sync, RED_IMIN)
FT_EMU_REDUCE(__reduce_max_sync, RED_MAX)
FT_EMU_REDUCE_INT(__reduce_max_sync, RED_IMAX)
FT_EMU_REDUCE(__reduce_and_sync, RED_AND)
FT_EMU_REDUCE(__reduce_or_sync, RED_OR)
FT_EMU_REDUCE(__reduce_xor_sync, RED_XOR)
#undef FT_EMU_REDUCE
#undef FT_EMU_REDUCE_INT
template <typename T> static inline unsigned __match_any_sync(unsigned mask, T v, FT_EMU_SITE) {
    ft_emu_thread *t = ft_emu::self();
    t->in.u64[0] = ft_emu::to_bits(v);
    t->api->collective(t, mask, &ft_emu::coll_match_any, ft_file_, ft_line_);
    return t->out.u32[0];
}
template <typename T>
static inline unsigned __match_all_sync(unsigned mask, T v, int *pred, FT_EMU_SITE) {
    ft_emu_thread *t = ft_emu::self();
    t->in.u64[0] = ft_emu::to_bits(v);
    t->api->collective(t, mask, &ft_emu::coll_match_all, ft_file_, ft_line_);
    *pred = (int)t->out.u32[1];
    return t->out.u32[1] ? mask : 0u;
}

/* ---- atomics --------------------------------------------------------------------------------- */
/* Relaxed, like CUDA's. Every 256th atomic of a thread and every failed atomicCAS yields to the
 * block's other threads, so a spin loop on an atomic cannot starve the thread it waits for. */
namespace ft_emu {
static inline void atomic_tick() {
    ft_emu_thread *t = self();
    if ((++t->atomics & 255u) == 0) t->api->yield(t);
}
template <typename T, typename F> static inline T atomic_update(T *p, F f) {
    atomic_tick();
    T old = __atomic_load_n(p, __ATOMIC_RELAXED);
    while (!__atomic_compare_exchange_n(p, &old, f(old), true, __ATOMIC_RELAXED, __ATOMIC_RELAXED))
        ;
    return old;
}
template <typename U, typename T, typename F> static inline T atomic_update_bits(T *p, F f) {
    static_assert(sizeof(U) == sizeof(T), "same size");
    U *u = reinterpret_cast<U *>(p);
    U old = atomic_update(u, [&](U bits) { return from_bits<U>(to_bits(f(from_bits<T>(bits)))); });
    return from_bits<T>(old);
}
} // namespace ft_emu
/* An atomic the compiler has a builtin for: its tick, then the builtin, relaxed. */
#define FT_EMU_ATOMIC_RMW(T, name, builtin)                                                        \
    static inline T name(T *p, T v) {                                                              \
        ft_emu::atomic_tick();                                                                     \
        return builtin(p, v, __ATOMIC_RELAXED);                                                    \
    }
#define FT_EMU_ATOMIC_INT(T)                                                                       \
    FT_EMU_ATOMIC_RMW(T, atomicAdd, __atomic_fetch_add)                                            \
    FT_EMU_ATOMIC_RMW(T, atomicSub, __atomic_fetch_sub)                                            \
    FT_EMU_ATOMIC_RMW(T, atomicExch, __atomic_exchange_n)                                          \
    static inline T atomicMin(T *p, T v) {                                                         \
        return ft_emu::atomic_update(p, [v](T o) { return v < o ? v : o; });                       \
    }                                                                                              \
    static inline T atomicMax(T *p, T v) {                                                         \
        return ft_emu::atomic_update(p, [v](T o) { return v > o ? v : o; });                       \
    }                                                                                              \
    FT_EMU_ATOMIC_RMW(T, atomicAnd, __atomic_fetch_and)                                            \
    FT_EMU_ATOMIC_RMW(T, atomicOr, __atomic_fetch_or)                                              \
    FT_EMU_ATOMIC_RMW(T, atomicXor, __atomic_fetch_xor)                                            \
    static inline T atomicCAS(T *p, T compare, T v) {                                              \
        ft_emu::atomic_tick();                                                                     \
        if (!__atomic_compare_exchange_n(p, &compare, v, false, __ATOMIC_RELAXED,                  \
                                         __ATOMIC_RELAXED)) {                                      \
            ft_emu_thread *t_ = ft_emu::self();                                                    \
            t_->api->yield(t_);                                                                    \
        }                                                                                          \
        return compare;                                                                            \
    }
FT_EMU_ATOMIC_INT(int)
FT_EMU_ATOMIC_INT(unsigned)
FT_EMU_ATOMIC_INT(unsigned long long)
FT_EMU_ATOMIC_INT(long long)
#undef FT_EMU_ATOMIC_INT
#undef FT_EMU_ATOMIC_RMW
static inline unsigned atomicInc(unsigned *p, unsigned v) {
    return ft_emu::atomic_update(p, [v](unsigned o) { return o >= v ? 0u : o + 1u; });
}
static inline unsigned atomicDec(unsigned *p, unsigned v) {
    return ft_emu::atomic_update(p, [v](unsigned o) { return (o == 0 || o > v) ? v : o - 1u; });
}
static inline float atomicAdd(float *p, float v) {
    return ft_emu::atomic_update_bits<uint32_t>(p, [v](float o) { return o + v; });
}
static inline double atomicAdd(double *p, double v) {
    return ft_emu::atomic_update_bits<uint64_t>(p, [v](double o) { return o + v; });
}
static inline float atomicExch(float *p, float v) {
    return ft_emu::atomic_update_bits<uint32_t>(p, [v](float) { return v; });
}

/* ---- memory, time, control ------------------------------------------------------------------- */
template <typename T> static inline T __ldg(const T *p) { return *p; }
template <typename T> static inline T __ldcg(const T *p) { return *p; }
template <typename T> static inline T __ldca(const T *p) { return *p; }
template <typename T> static inline T __ldcs(const T *p) { return *p; }
template <typename T> static inline T __ldlu(const T *p) { return *p; }
template <typename T> static inline void __stcg(T *p, T v) { *p = v; }
template <typename T> static inline void __stcs(T *p, T v) { *p = v; }
template <typename T> static inline void __stwt(T *p, T v) { *p = v; }
static inline void __threadfence(void) { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
static inline void __threadfence_block(void) { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
static inline void __threadfence_system(void) { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
static inline void __nanosleep(unsigned) {
    ft_emu_thread *t = ft_emu::self();
    t->api->yield(t);
}
static inline long long clock64(void) {
#if defined(__x86_64__)
    return (long long)__builtin_ia32_rdtsc();
#else
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000000000ll + ts.tv_nsec;
#endif
}
[[noreturn]] static inline void __trap(FT_EMU_SITE) {
    ft_emu::fail(ft_file_, ft_line_, "__trap() called");
}
[[noreturn]] static inline void __brkpt(FT_EMU_SITE) {
    ft_emu::fail(ft_file_, ft_line_, "__brkpt() called");
}

/* ---- math ------------------------------------------------------------------------------------ */
/* The fast intrinsics are computed exactly here: a kernel that is right only thanks to, or only
 * in spite of, their reduced precision shows up against the reference on the GPU. */
/* (Macros, since the C library declares functions of these names for its own use.) */
#define __expf(x)          expf(x)
#define __exp10f(x)        exp10f(x)
#define __logf(x)          logf(x)
#define __log2f(x)         log2f(x)
#define __log10f(x)        log10f(x)
#define __powf(x, y)       powf(x, y)
#define __sinf(x)          sinf(x)
#define __cosf(x)          cosf(x)
#define __tanf(x)          tanf(x)
#define __sincosf(x, s, c) sincosf(x, s, c)
static inline float rsqrtf(float x) { return 1.0f / sqrtf(x); }
static inline double rsqrt(double x) { return 1.0 / sqrt(x); }
static inline float __frsqrt_rn(float x) { return 1.0f / sqrtf(x); }
static inline float __fsqrt_rn(float x) { return sqrtf(x); }
static inline float __fdividef(float x, float y) { return x / y; }
static inline float fdividef(float x, float y) { return x / y; }
static inline float __fdiv_rn(float x, float y) { return x / y; }
static inline float __frcp_rn(float x) { return 1.0f / x; }
static inline float __fadd_rn(float x, float y) { return x + y; }
static inline float __fsub_rn(float x, float y) { return x - y; }
static inline float __fmul_rn(float x, float y) { return x * y; }
static inline float __fmaf_rn(float x, float y, float z) { return fmaf(x, y, z); }
static inline float __saturatef(float x) { return x >= 1.0f ? 1.0f : (x > 0.0f ? x : 0.0f); }
static inline int __float_as_int(float x) { return ft_emu::from_bits<int>(ft_emu::to_bits(x)); }
static inline unsigned __float_as_uint(float x) {
    return ft_emu::from_bits<unsigned>(ft_emu::to_bits(x));
}
static inline float __int_as_float(int x) { return ft_emu::from_bits<float>(ft_emu::to_bits(x)); }
static inline float __uint_as_float(unsigned x) {
    return ft_emu::from_bits<float>(ft_emu::to_bits(x));
}
static inline long long __double_as_longlong(double x) {
    return ft_emu::from_bits<long long>(ft_emu::to_bits(x));
}
static inline double __longlong_as_double(long long x) {
    return ft_emu::from_bits<double>(ft_emu::to_bits(x));
}
static inline int __float2int_rn(float x) { return (int)nearbyintf(x); }
static inline int __float2int_rz(float x) { return (int)x; }
static inline int __float2int_rd(float x) { return (int)floorf(x); }
static inline int __float2int_ru(float x) { return (int)ceilf(x); }
static inline unsigned __float2uint_rn(float x) { return (unsigned)nearbyintf(x); }
static inline float __int2float_rn(int x) { return (float)x; }
static inline int __popc(unsigned x) { return __builtin_popcount(x); }
static inline int __popcll(unsigned long long x) { return __builtin_popcountll(x); }
static inline int __clz(int x) { return x ? __builtin_clz((unsigned)x) : 32; }
static inline int __clzll(long long x) { return x ? __builtin_clzll((unsigned long long)x) : 64; }
static inline int __ffs(int x) { return __builtin_ffs(x); }
static inline int __ffsll(long long x) { return __builtin_ffsll(x); }
static inline unsigned __brev(unsigned x) {
    unsigned r = 0;
    for (int i = 0; i < 32; i++)
        r |= ((x >> i) & 1u) << (31 - i);
    return r;
}
static inline unsigned __byte_perm(unsigned x, unsigned y, unsigned s) {
    uint64_t v = ((uint64_t)y << 32) | x;
    unsigned r = 0;
    for (int i = 0; i < 4; i++)
        r |= (unsigned)((v >> (8 * ((s >> (4 * i)) & 7u))) & 0xffu) << (8 * i);
    return r;
}
static inline unsigned __funnelshift_l(unsigned lo, unsigned hi, unsigned s) {
    uint64_t v = ((uint64_t)hi << 32) | lo;
    return (unsigned)((v << (s & 31u)) >> 32);
}
static inline unsigned __funnelshift_r(unsigned lo, unsigned hi, unsigned s) {
    uint64_t v = ((uint64_t)hi << 32) | lo;
    return (unsigned)(v >> (s & 31u));
}
static inline int __mulhi(int x, int y) { return (int)(((long long)x * y) >> 32); }
static inline unsigned __umulhi(unsigned x, unsigned y) {
    return (unsigned)(((unsigned long long)x * y) >> 32);
}
/* CUDA's integer and floating min/max overloads. */
static inline int min(int a, int b) { return a < b ? a : b; }
static inline int max(int a, int b) { return a > b ? a : b; }
static inline unsigned min(unsigned a, unsigned b) { return a < b ? a : b; }
static inline unsigned max(unsigned a, unsigned b) { return a > b ? a : b; }
static inline unsigned min(int a, unsigned b) { return min((unsigned)a, b); }
static inline unsigned max(int a, unsigned b) { return max((unsigned)a, b); }
static inline unsigned min(unsigned a, int b) { return min(a, (unsigned)b); }
static inline unsigned max(unsigned a, int b) { return max(a, (unsigned)b); }
static inline long long min(long long a, long long b) { return a < b ? a : b; }
static inline long long max(long long a, long long b) { return a > b ? a : b; }
static inline unsigned long long min(unsigned long long a, unsigned long long b) {
    return a < b ? a : b;
}
static inline unsigned long long max(unsigned long long a, unsigned long long b) {
    return a > b ? a : b;
}
static inline float min(float a, float b) { return fminf(a, b); }
static inline float max(float a, float b) { return fmaxf(a, b); }
static inline double min(double a, double b) { return fmin(a, b); }
static inline double max(double a, double b) { return fmax(a, b); }

/* ---- bf16 (the subset of cuda_bf16.h that ft_cuda.h's dialect allows: explicit conversions) -- */
struct __nv_bfloat16_raw {
    unsigned short x;
};
struct __attribute__((aligned(2))) __nv_bfloat16 {
    unsigned short __x;
    __nv_bfloat16() = default;
    constexpr __nv_bfloat16(const __nv_bfloat16_raw &r) : __x(r.x) {}
    operator __nv_bfloat16_raw() const { return __nv_bfloat16_raw{__x}; }
};
struct __attribute__((aligned(4))) __nv_bfloat162 {
    __nv_bfloat16 x, y;
    __nv_bfloat162() = default;
    constexpr __nv_bfloat162(const __nv_bfloat16 &a, const __nv_bfloat16 &b) : x(a), y(b) {}
};
namespace ft_emu {
/* Round to nearest even; a NaN becomes the canonical 0x7fff, as on the GPU. */
static inline unsigned short float_to_bf16_bits(float f) {
    uint32_t u = from_bits<uint32_t>(to_bits(f));
    if ((u & 0x7fffffffu) > 0x7f800000u) return 0x7fff;
    u += 0x7fffu + ((u >> 16) & 1u);
    return (unsigned short)(u >> 16);
}
static inline __nv_bfloat16 bf16_from_bits(unsigned short b) {
    return __nv_bfloat16(__nv_bfloat16_raw{b});
}
} // namespace ft_emu
static inline __nv_bfloat16 __float2bfloat16(float f) {
    return ft_emu::bf16_from_bits(ft_emu::float_to_bf16_bits(f));
}
static inline __nv_bfloat16 __float2bfloat16_rn(float f) { return __float2bfloat16(f); }
static inline __nv_bfloat16 __float2bfloat16_rz(float f) {
    uint32_t u = ft_emu::from_bits<uint32_t>(ft_emu::to_bits(f));
    if ((u & 0x7fffffffu) > 0x7f800000u) return ft_emu::bf16_from_bits(0x7fff);
    return ft_emu::bf16_from_bits((unsigned short)(u >> 16));
}
static inline float __bfloat162float(__nv_bfloat16 h) {
    return ft_emu::from_bits<float>((uint64_t)h.__x << 16);
}
static inline unsigned short __bfloat16_as_ushort(__nv_bfloat16 h) { return h.__x; }
static inline __nv_bfloat16 __ushort_as_bfloat16(unsigned short b) {
    return ft_emu::bf16_from_bits(b);
}
static inline __nv_bfloat162 __floats2bfloat162_rn(float a, float b) {
    return __nv_bfloat162(__float2bfloat16(a), __float2bfloat16(b));
}
static inline __nv_bfloat162 __float22bfloat162_rn(float2 f) {
    return __floats2bfloat162_rn(f.x, f.y);
}
static inline __nv_bfloat162 __float2bfloat162_rn(float f) { return __floats2bfloat162_rn(f, f); }
static inline float2 __bfloat1622float2(__nv_bfloat162 h) {
    return float2{__bfloat162float(h.x), __bfloat162float(h.y)};
}
static inline float __low2float(__nv_bfloat162 h) { return __bfloat162float(h.x); }
static inline float __high2float(__nv_bfloat162 h) { return __bfloat162float(h.y); }
static inline __nv_bfloat16 __low2bfloat16(__nv_bfloat162 h) { return h.x; }
static inline __nv_bfloat16 __high2bfloat16(__nv_bfloat162 h) { return h.y; }
static inline __nv_bfloat162 __halves2bfloat162(__nv_bfloat16 a, __nv_bfloat16 b) {
    return __nv_bfloat162(a, b);
}
static inline __nv_bfloat162 __bfloat162bfloat162(__nv_bfloat16 a) { return __nv_bfloat162(a, a); }

/* ---- tensor-core and async-copy instructions (the emulations behind ft_cuda.h's wrappers) ---- */
namespace ft_emu {

static inline float bf16_lo(uint32_t r) { return from_bits<float>((uint64_t)(r & 0xffffu) << 16); }
static inline float bf16_hi(uint32_t r) { return from_bits<float>((uint64_t)(r >> 16) << 16); }

/* mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32, fragments as the PTX ISA lays them out
 * (groupID g = lane >> 2, threadID_in_group t = lane % 4; each .b32 holds two bf16, the lower
 * column or row in the low half):
 *   A 16x16: a[0] = A[g][2t..2t+1]   a[1] = A[g+8][2t..2t+1]
 *            a[2] = A[g][2t+8..+9]   a[3] = A[g+8][2t+8..+9]
 *   B 16x8:  b[0] = B[2t..2t+1][g]   b[1] = B[2t+8..2t+9][g]
 *   C/D 16x8 (f32): c[0] = C[g][2t]  c[1] = C[g][2t+1]  c[2] = C[g+8][2t]  c[3] = C[g+8][2t+1]
 * Lane operands: in.u32[0..3] = a, in.u32[4..5] = b, in.f32[6..9] = c; out.f32[0..3] = d.
 * The products are exact and the 16-term sums are accumulated in double and rounded once. */
static void combine_mma_m16n8k16_bf16(ft_emu_thread *const lanes[32], unsigned) {
    float A[16][16], B[16][8], C[16][8];
    for (int l = 0; l < 32; l++) {
        const ft_emu_io &in = lanes[l]->in;
        int g = l >> 2, t = l & 3;
        for (int r = 0; r < 4; r++) {
            int row = g + (r & 1) * 8, col = 2 * t + (r >> 1) * 8;
            A[row][col] = bf16_lo(in.u32[r]);
            A[row][col + 1] = bf16_hi(in.u32[r]);
        }
        for (int r = 0; r < 2; r++) {
            B[2 * t + r * 8][g] = bf16_lo(in.u32[4 + r]);
            B[2 * t + r * 8 + 1][g] = bf16_hi(in.u32[4 + r]);
        }
        C[g][2 * t] = in.f32[6];
        C[g][2 * t + 1] = in.f32[7];
        C[g + 8][2 * t] = in.f32[8];
        C[g + 8][2 * t + 1] = in.f32[9];
    }
    for (int l = 0; l < 32; l++) {
        int g = l >> 2, t = l & 3;
        for (int i = 0; i < 4; i++) {
            int row = g + (i >> 1) * 8, col = 2 * t + (i & 1);
            double acc = C[row][col];
            for (int k = 0; k < 16; k++)
                acc += (double)A[row][k] * (double)B[k][col];
            lanes[l]->out.f32[i] = (float)acc;
        }
    }
}
static const ft_emu_coll coll_mma = {"mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32",
                                     combine_mma_m16n8k16_bf16, 1, 1};

static inline void mma_m16n8k16_bf16(float *d, const uint32_t *a, const uint32_t *b, const float *c,
                                     const char *file, int line) {
    ft_emu_thread *t = self();
    for (int i = 0; i < 4; i++)
        t->in.u32[i] = a[i];
    t->in.u32[4] = b[0];
    t->in.u32[5] = b[1];
    for (int i = 0; i < 4; i++)
        t->in.f32[6 + i] = c[i];
    t->api->collective(t, 0xffffffffu, &coll_mma, file, line);
    for (int i = 0; i < 4; i++)
        d[i] = t->out.f32[i];
}

/* ldmatrix.sync.aligned.m8n8.x{1,2,4}{.trans}.shared.b16: lanes 8i..8i+7 give the addresses of
 * rows 0..7 of matrix i (16 bytes each). Lane l receives in register i the pair of elements
 * (row l/4, columns 2(l%4) and 2(l%4)+1) of matrix i, or with .trans (rows 2(l%4) and 2(l%4)+1,
 * column l/4), the first element in the low half. Lane operands: in.ptr[0] = its row address. */
template <int NUM, bool TRANS>
FT_EMU_UNPROFILED_ static void combine_ldmatrix(ft_emu_thread *const lanes[32], unsigned) {
    for (int l = 0; l < 32; l++) {
        int g = l >> 2, t = l & 3;
        for (int i = 0; i < NUM; i++) {
            uint16_t e[2];
            for (int k = 0; k < 2; k++) {
                int row = TRANS ? 2 * t + k : g, col = TRANS ? g : 2 * t + k;
                const unsigned char *p = (const unsigned char *)lanes[8 * i + row]->in.ptr[0];
                memcpy(&e[k], p + 2 * col, 2);
            }
            lanes[l]->out.u32[i] = (uint32_t)e[0] | ((uint32_t)e[1] << 16);
        }
    }
}
template <int NUM, bool TRANS> struct ldmatrix_coll { static const ft_emu_coll coll; };
template <int NUM, bool TRANS>
const ft_emu_coll ldmatrix_coll<NUM, TRANS>::coll = {
    NUM == 1   ? (TRANS ? "ldmatrix.sync.aligned.m8n8.x1.trans.shared.b16"
                        : "ldmatrix.sync.aligned.m8n8.x1.shared.b16")
    : NUM == 2 ? (TRANS ? "ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16"
                        : "ldmatrix.sync.aligned.m8n8.x2.shared.b16")
               : (TRANS ? "ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16"
                        : "ldmatrix.sync.aligned.m8n8.x4.shared.b16"),
    combine_ldmatrix<NUM, TRANS>, 1, 1};

template <int NUM, bool TRANS>
FT_EMU_UNPROFILED_ static inline void ldmatrix(uint32_t *r, const void *row, const char *file,
                                               int line) {
    ft_emu_thread *t = self();
    if (t->lane < 8u * NUM) {
        check_align(row, 16, "an ldmatrix row address", file, line);
        if (!t->api->is_shared(t, row, 16))
            fail(file, line, "an ldmatrix row address is not in this block's shared memory");
        FT_EMU_PROF_NOTE_(row, 16, FT_EMU_ACCESS_MATRIX);
    }
    t->in.ptr[0] = row;
    t->api->collective(t, 0xffffffffu, &ldmatrix_coll<NUM, TRANS>::coll, file, line);
    for (int i = 0; i < NUM; i++)
        r[i] = t->out.u32[i];
}

/* cp.async.{ca,cg}.shared.global: copied at once (commit and wait are no-ops); src_bytes < bytes
 * zero-fills the rest and reads only src_bytes (0 reads nothing), as the src-size operand does. */
FT_EMU_UNPROFILED_ static inline void cp_async(void *dst, const void *src, int bytes, int src_bytes,
                                               const char *file, int line) {
    ft_emu_thread *t = self();
    check_align(dst, (size_t)bytes, "a cp.async destination", file, line);
    if (src_bytes > 0) check_align(src, (size_t)bytes, "a cp.async source", file, line);
    if (src_bytes < 0 || src_bytes > bytes) fail(file, line, "cp.async src-size out of range");
    if (!t->api->is_shared(t, dst, (size_t)bytes))
        fail(file, line, "a cp.async destination is not in this block's shared memory");
    if (src_bytes > 0) FT_EMU_PROF_NOTE_(src, (unsigned)src_bytes, FT_EMU_ACCESS_ASYNC);
    FT_EMU_PROF_NOTE_(dst, (unsigned)bytes, FT_EMU_ACCESS_ASYNC | FT_EMU_ACCESS_WRITE);
    if (src_bytes > 0) memcpy(dst, src, (size_t)src_bytes);
    memset((unsigned char *)dst + src_bytes, 0, (size_t)(bytes - src_bytes));
}

/* ---- kernel registration --------------------------------------------------------------------- */
/* FT_KERNEL_EXPORT(name) instantiates invoke<&name>, which unpacks the launch's void **args into
 * the kernel's parameters (their types deduced from the kernel's own signature) and calls it. */
template <typename F> struct signature;
template <typename... A> struct signature<void (*)(A...)> {
    static constexpr size_t arity = sizeof...(A);
    /* Not profiled: reading the launch's arguments is no access of the kernel's. */
    template <void (*K)(A...), size_t... I>
    FT_EMU_UNPROFILED_ static void call(void **args, std::index_sequence<I...>) {
        (void)args;
        K(*static_cast<A *>(args[I])...);
    }
};
template <auto K> static void invoke(void **args) {
    using S = signature<decltype(K)>;
    S::template call<K>(args, std::make_index_sequence<S::arity>{});
}
enum { MAX_KERNELS = 256 };
static ft_emu_kernel kernels[MAX_KERNELS];
static int nkernels;
struct kernel_registration {
    kernel_registration(const char *name, ft_emu_invoke_fn fn) {
        if (nkernels < MAX_KERNELS) kernels[nkernels] = ft_emu_kernel{name, fn};
        nkernels++;
    }
};

enum { MAX_SYMBOLS = 64 };
static ft_emu_symbol symbols[MAX_SYMBOLS];
static int nsymbols;
struct symbol_registration {
    symbol_registration(const char *name, void *addr, size_t bytes) {
        if (nsymbols < MAX_SYMBOLS) symbols[nsymbols] = ft_emu_symbol{name, addr, bytes};
        nsymbols++;
    }
};

} // namespace ft_emu

#define FT_EMU_KERNEL_EXPORT(name)                                                                 \
    static const ::ft_emu::kernel_registration ft_emu_registration_##name(                         \
        #name, &::ft_emu::invoke<&name>);

extern "C" __attribute__((visibility("default"), used)) const ft_emu_module_info *
ft_emu_module(void) {
    static ft_emu_module_info info;
    info.abi = FT_EMU_ABI_VERSION;
    info.stack_log2 = FT_EMU_STACK_LOG2;
    info.nkernels = ft_emu::nkernels <= ft_emu::MAX_KERNELS ? ft_emu::nkernels : -1;
    info.kernels = ft_emu::kernels;
    info.nsymbols = ft_emu::nsymbols <= ft_emu::MAX_SYMBOLS ? ft_emu::nsymbols : -1;
    info.symbols = ft_emu::symbols;
    return &info;
}

#if defined(FT_EMU_PROFILE)
/* ThreadSanitizer's entry points, as GCC's -fsanitize=thread calls them: each reports the access
 * (the instruction is the hook's return address) and, for atomics, does the operation. */
extern "C" {
__attribute__((visibility("default"), used)) int ft_emu_profile_live = 0;
#define FT_EMU_HOOK_ __attribute__((no_sanitize_thread, visibility("hidden"), used))
FT_EMU_HOOK_ void __tsan_init(void) {}
FT_EMU_HOOK_ void __tsan_func_entry(void *) {}
FT_EMU_HOOK_ void __tsan_func_exit(void) {}
#define FT_EMU_HOOK_RW_(n)                                                                         \
    FT_EMU_HOOK_ void __tsan_read##n(void *a) { FT_EMU_PROF_NOTE_(a, n, 0); }                      \
    FT_EMU_HOOK_ void __tsan_write##n(void *a) { FT_EMU_PROF_NOTE_(a, n, FT_EMU_ACCESS_WRITE); }   \
    FT_EMU_HOOK_ void __tsan_unaligned_read##n(void *a) { FT_EMU_PROF_NOTE_(a, n, 0); }            \
    FT_EMU_HOOK_ void __tsan_unaligned_write##n(void *a) {                                         \
        FT_EMU_PROF_NOTE_(a, n, FT_EMU_ACCESS_WRITE);                                              \
    }
FT_EMU_HOOK_RW_(1)
FT_EMU_HOOK_RW_(2)
FT_EMU_HOOK_RW_(4)
FT_EMU_HOOK_RW_(8)
FT_EMU_HOOK_RW_(16)
FT_EMU_HOOK_ void __tsan_read_range(void *a, unsigned long n) {
    FT_EMU_PROF_NOTE_(a, (unsigned)n, 0);
}
FT_EMU_HOOK_ void __tsan_write_range(void *a, unsigned long n) {
    FT_EMU_PROF_NOTE_(a, (unsigned)n, FT_EMU_ACCESS_WRITE);
}
#define FT_EMU_RMW_ (FT_EMU_ACCESS_ATOMIC | FT_EMU_ACCESS_WRITE)
#define FT_EMU_HOOK_FETCH_(n, T, op, builtin)                                                      \
    FT_EMU_HOOK_ T __tsan_atomic##n##_##op(volatile T *a, T v, int) {                              \
        FT_EMU_PROF_NOTE_(a, sizeof(T), FT_EMU_RMW_);                                              \
        return builtin(a, v, __ATOMIC_SEQ_CST);                                                    \
    }
#define FT_EMU_HOOK_ATOMIC_(n, T)                                                                  \
    FT_EMU_HOOK_ T __tsan_atomic##n##_load(const volatile T *a, int) {                             \
        FT_EMU_PROF_NOTE_(a, sizeof(T), FT_EMU_ACCESS_ATOMIC);                                     \
        return __atomic_load_n(a, __ATOMIC_SEQ_CST);                                               \
    }                                                                                              \
    FT_EMU_HOOK_ void __tsan_atomic##n##_store(volatile T *a, T v, int) {                          \
        FT_EMU_PROF_NOTE_(a, sizeof(T), FT_EMU_RMW_);                                              \
        __atomic_store_n(a, v, __ATOMIC_SEQ_CST);                                                  \
    }                                                                                              \
    FT_EMU_HOOK_FETCH_(n, T, exchange, __atomic_exchange_n)                                        \
    FT_EMU_HOOK_FETCH_(n, T, fetch_add, __atomic_fetch_add)                                        \
    FT_EMU_HOOK_FETCH_(n, T, fetch_sub, __atomic_fetch_sub)                                        \
    FT_EMU_HOOK_FETCH_(n, T, fetch_and, __atomic_fetch_and)                                        \
    FT_EMU_HOOK_FETCH_(n, T, fetch_or, __atomic_fetch_or)                                          \
    FT_EMU_HOOK_FETCH_(n, T, fetch_xor, __atomic_fetch_xor)                                        \
    FT_EMU_HOOK_FETCH_(n, T, fetch_nand, __atomic_fetch_nand)                                      \
    FT_EMU_HOOK_ int __tsan_atomic##n##_compare_exchange_strong(volatile T *a, T *c, T v, int,     \
                                                                int) {                             \
        FT_EMU_PROF_NOTE_(a, sizeof(T), FT_EMU_RMW_);                                              \
        return __atomic_compare_exchange_n(a, c, v, 0, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);        \
    }                                                                                              \
    FT_EMU_HOOK_ int __tsan_atomic##n##_compare_exchange_weak(volatile T *a, T *c, T v, int,       \
                                                              int) {                               \
        FT_EMU_PROF_NOTE_(a, sizeof(T), FT_EMU_RMW_);                                              \
        return __atomic_compare_exchange_n(a, c, v, 1, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);        \
    }                                                                                              \
    FT_EMU_HOOK_ T __tsan_atomic##n##_compare_exchange_val(volatile T *a, T c, T v, int, int) {    \
        FT_EMU_PROF_NOTE_(a, sizeof(T), FT_EMU_RMW_);                                              \
        __atomic_compare_exchange_n(a, &c, v, 0, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);              \
        return c;                                                                                  \
    }
FT_EMU_HOOK_ATOMIC_(8, char)
FT_EMU_HOOK_ATOMIC_(16, short)
FT_EMU_HOOK_ATOMIC_(32, int)
FT_EMU_HOOK_ATOMIC_(64, long long)
FT_EMU_HOOK_ void __tsan_atomic_thread_fence(int) { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
FT_EMU_HOOK_ void __tsan_atomic_signal_fence(int) { __atomic_signal_fence(__ATOMIC_SEQ_CST); }
}
#endif

/* Inline PTX cannot run here: only the instructions ft_cuda.h wraps are emulated. Defined last so
 * the system headers above still compile. */
#define asm                                                                                        \
    FT_EMU_NOT_EMULATED_(                                                                          \
        "inline PTX (asm) is not emulated under FT_EMU: only the wrappers of ft_cuda.h are")
#define __asm__                                                                                    \
    FT_EMU_NOT_EMULATED_(                                                                          \
        "inline PTX (__asm__) is not emulated under FT_EMU: only the wrappers of ft_cuda.h are")

#endif
