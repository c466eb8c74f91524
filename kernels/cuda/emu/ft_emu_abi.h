/* ft_emu_abi.h: the contract between the SIMT emulator's runtime (C, in the library) and a kernel
 * module (C++, compiled at run time against ft_emu.h and loaded with dlopen).
 *
 * Every emulated CUDA thread is a fiber with its own stack. The stack is a power-of-two region
 * aligned to its size, and its lowest page holds the thread's descriptor (ft_emu_thread), so
 * kernel code finds "itself" by masking its frame address: no thread-local storage, no call.
 * Above the descriptor is a guard page (PROT_NONE), so a stack overflow faults instead of
 * overwriting the descriptor.
 *
 * The module calls the runtime only through the table of function pointers in each descriptor
 * (ft_emu_api): barriers, warp collectives, yields and failures. A warp collective is generic:
 * each lane leaves its operands in its descriptor's `in`, and when every lane the mask names has
 * arrived at the same collective, the runtime calls the collective's combine function (module
 * code) once, which writes every lane's `out`. Shuffles, votes, mma.sync and ldmatrix are all
 * such collectives.
 */
#ifndef FT_EMU_ABI_H
#define FT_EMU_ABI_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Bumped whenever a structure below changes: a module built against another version is refused
 * (and recompiled, since the version is part of the cache key). */
#define FT_EMU_ABI_VERSION 3

/* clang says it builds with AddressSanitizer through __has_feature (gcc: __SANITIZE_ADDRESS__). */
#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define FT_EMU_HAS_ASAN_FEATURE 1
#endif
#endif
#ifndef FT_EMU_HAS_ASAN_FEATURE
#define FT_EMU_HAS_ASAN_FEATURE 0
#endif

/* log2 of a fiber's stack region (descriptor page + guard page + stack). The runtime passes its
 * own value to every module it compiles (-DFT_EMU_STACK_LOG2=...), so both sides agree. */
#ifndef FT_EMU_STACK_LOG2 /* the runtime's side: modules are given it */
#if defined(__SANITIZE_ADDRESS__) || FT_EMU_HAS_ASAN_FEATURE
#define FT_EMU_STACK_LOG2 19 /* 512 KiB: instrumented frames are several times larger */
#else
#define FT_EMU_STACK_LOG2 17 /* 128 KiB */
#endif
#endif
#define FT_EMU_STACK_BYTES ((size_t)1 << FT_EMU_STACK_LOG2)
#define FT_EMU_PAGE        4096u
#define FT_EMU_MAX_WARPS   32 /* 1024 threads per block */

/* The shape of CUDA's uint3 and dim3. */
typedef struct ft_emu_uint3 {
    unsigned x, y, z;
} ft_emu_uint3;

struct ft_emu_thread;

/* A kind of warp collective. Lanes match when they name the same descriptor and the same mask
 * (and, with same_site, the same source line). */
typedef struct ft_emu_coll {
    const char *name; /* "__shfl_xor_sync", "mma.sync.m16n8k16", ... */
    /* Called once when all lanes of `mask` have arrived; lanes[l] is lane l's descriptor, or NULL
     * for a lane outside the mask or beyond the block's last thread. Writes each lane's out. */
    void (*combine)(struct ft_emu_thread *const lanes[32], unsigned mask);
    int same_site;
    int full_warp; /* .aligned: the mask must be all 32 lanes */
} ft_emu_coll;

enum { FT_EMU_BAR_SYNC = 0, FT_EMU_BAR_COUNT, FT_EMU_BAR_AND, FT_EMU_BAR_OR };

/* What a profile module's access is (ft_emu_api.access): flags. */
enum {
    FT_EMU_ACCESS_WRITE = 1u << 0,  /* a store (with ATOMIC: a read-modify-write) */
    FT_EMU_ACCESS_ATOMIC = 1u << 1, /* an atomic                                  */
    FT_EMU_ACCESS_ASYNC = 1u << 2,  /* cp.async (its global read, its shared write) */
    FT_EMU_ACCESS_MATRIX = 1u << 3, /* ldmatrix (a lane's row of 16 bytes)       */
};

typedef struct ft_emu_api {
    unsigned abi;
    /* __syncthreads and its _count/_and/_or forms; returns the reduction (0 for SYNC). */
    int (*barrier)(struct ft_emu_thread *t, int op, int pred, const char *file, int line);
    /* Wait until the collective completes; t->out then holds this lane's result. */
    void (*collective)(struct ft_emu_thread *t, unsigned mask, const ft_emu_coll *c,
                       const char *file, int line);
    /* Let the other threads of the block run (spin loops, __nanosleep). */
    void (*yield)(struct ft_emu_thread *t);
    /* Stop the launch with an error naming this thread; never returns. */
    void (*fail)(struct ft_emu_thread *t, const char *file, int line, const char *msg);
    /* 1 when [p, p + bytes) lies in this block's shared memory (static or dynamic). */
    int (*is_shared)(struct ft_emu_thread *t, const void *p, size_t bytes);
    /* Lanes of t's warp that exist and have not exited. */
    unsigned (*active_mask)(struct ft_emu_thread *t);
    /* A profile module's load or store (FT_EMU_PROFILE: see emu/prof.h): the instruction at pc
     * touched [addr, addr + size). Modules built without the profile never call it. */
    void (*access)(struct ft_emu_thread *t, const void *pc, const void *addr, unsigned size,
                   unsigned flags);
} ft_emu_api;

typedef union ft_emu_io {
    unsigned char b[64];
    uint32_t u32[16];
    uint64_t u64[8];
    float f32[16];
    const void *ptr[8];
} ft_emu_io;

typedef struct ft_emu_thread {
    /* ---- read by kernel code ---- */
    ft_emu_uint3 tid, bid, bdim, gdim; /* threadIdx, blockIdx, blockDim, gridDim */
    unsigned lane, warp, linear;       /* lane in warp, warp in block, linear index in block */
    unsigned atomics;                  /* atomic operations so far (every 256th yields)      */
    unsigned char *dyn_smem;           /* the block's dynamic shared memory                  */
    size_t dyn_smem_bytes;
    const ft_emu_api *api;
    ft_emu_io in, out; /* a warp collective's operands and result */
    /* The runtime keeps its private per-thread state after this structure, on the same page. */
} ft_emu_thread;

/* What a module exports (ft_emu_module, C linkage). */
typedef void (*ft_emu_invoke_fn)(void **args);
typedef struct ft_emu_kernel {
    const char *name;
    ft_emu_invoke_fn invoke;
} ft_emu_kernel;
/* A variable of the module the host writes (a __constant__ or __device__ array of a source not
 * written for flaretune, cudaMemcpyToSymbol's target): found by name here, since the module's
 * symbols are hidden and C++ names are mangled. */
typedef struct ft_emu_symbol {
    const char *name;
    void *addr;
    size_t bytes;
} ft_emu_symbol;
typedef struct ft_emu_module_info {
    unsigned abi;
    unsigned stack_log2;
    int nkernels;
    const ft_emu_kernel *kernels;
    int nsymbols;
    const ft_emu_symbol *symbols;
} ft_emu_module_info;
typedef const ft_emu_module_info *(*ft_emu_module_fn)(void);
#define FT_EMU_MODULE_SYMBOL "ft_emu_module"

#ifdef __cplusplus
}
#endif
#endif
