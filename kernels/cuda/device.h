/* device.h: the device the CUDA backend's host code drives.
 *
 * One interface, two implementations: the real GPU (CUDA runtime API, kernels compiled at run time
 * by NVRTC for the device's exact architecture) and the SIMT emulator (the same kernel sources
 * compiled by the host C++ compiler against kernels/cuda/emu/, run on the CPU with device memory
 * in host memory). The backend's op code (grid sizing, multi-kernel sequences, workspaces,
 * config validation) is written once against this interface, so what the emulator checks on
 * any machine is the code the GPU runs.
 *
 * Kernel sources live in kernels/FAMILY/<name>.cu, written in the dialect of kernels/cuda/ft_cuda.h;
 * tunables are -D macros. A module is one source compiled with one set of macros; modules are
 * cached on disk, keyed by a hash of the source (with its includes), the options, the target
 * and the compiler's version, in $FLARETUNE_CACHE_DIR (default ~/.cache/flaretune), written
 * atomically so concurrent processes can share the cache. Kernel files written for other tools
 * (no ft_cuda.h, C++ kernels, __constant__ tables) compile as written with ft_dev_compile_file.
 */
#ifndef FLARETUNE_DEVICE_H
#define FLARETUNE_DEVICE_H

#include <stddef.h>
#include <stdint.h>

#include "core/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum { FT_DEV_CUDA = 0, FT_DEV_EMU } ft_dev_kind;

typedef struct ft_dev_props {
    char name[128];
    char arch[16];          /* compile target, e.g. "sm_90a"; "emu" for the emulator      */
    int cc_major, cc_minor; /* compute capability (the emulator reports the one it mimics) */
    int sm_count;
    int warp_size; /* 32                                                          */
    int max_threads_per_block, max_threads_per_sm;
    int regs_per_sm, max_regs_per_thread;
    size_t smem_per_block;       /* default static + dynamic limit                              */
    size_t smem_per_block_optin; /* with the opt-in attribute                               */
    size_t smem_per_sm;
    size_t l2_bytes, mem_bytes;
    int bus_width_bits, clock_khz, mem_clock_khz;
    int driver_version, runtime_version;
    int ecc;
} ft_dev_props;

typedef struct ft_dev ft_dev;
typedef struct ft_dev_module ft_dev_module;

typedef struct ft_dim3 {
    unsigned x, y, z;
} ft_dim3;

typedef enum { FT_COPY_H2D, FT_COPY_D2H, FT_COPY_D2D } ft_copy_kind;

/* The status of a CUDA runtime error (a cudaError_t, as an int; built with the toolkit only):
 * FT_ELOST for the errors that leave the process's context unusable, every later call failing
 * with the same error (a kernel's fault: an illegal or misaligned address, an illegal
 * instruction, a hardware stack error, an invalid PC or address space, an assert, a launch
 * failure or timeout; cudaError_t's documentation: "the process must be terminated and
 * relaunched"), FT_ENOMEM for an allocation that failed, else `otherwise`. Whoever gets
 * FT_ELOST charges the failure to the work that was running and ends its use of the device. */
ft_status ft_cuda_error_status(int cuda_error, ft_status otherwise);

/* Open device `ordinal` of `kind`. For FT_DEV_CUDA without a driver or a GPU this fails with
 * FT_ENODEV and one line saying why. */
ft_status ft_dev_open(ft_dev_kind kind, int ordinal, ft_dev **out, ft_err *err);
void ft_dev_close(ft_dev *d);
ft_dev_kind ft_dev_kind_of(const ft_dev *d);
const ft_dev_props *ft_dev_props_of(const ft_dev *d);

/* Device memory. The emulator fills fresh allocations with a NaN pattern (0xFF bytes) so a
 * kernel that reads before it writes shows it in its results (with zeros while launches are
 * profiled on a sample of their blocks: device_emu.c). */
ft_status ft_dev_alloc(ft_dev *d, size_t bytes, void **ptr, ft_err *err);
void ft_dev_free(ft_dev *d, void *ptr);
ft_status ft_dev_copy(ft_dev *d, void *dst, const void *src, size_t bytes, ft_copy_kind kind,
                      ft_err *err);
ft_status ft_dev_memset(ft_dev *d, void *dst, int byte, size_t bytes, ft_err *err);
ft_status ft_dev_sync(ft_dev *d, ft_err *err);

/* Compile kernels/<source> (e.g. "fusion/fusion.cu") with `defines` ("NAME=VALUE" or "NAME").
 * A compile error is FT_EINVAL with the compiler's first error line and the defines. The module
 * stays valid until the device is closed (the device keeps an in-memory cache too). When a
 * compile pool is attached to the device (kernels/cuda/backend/prefetch.h), a module it holds is waited
 * for there first, and one whose compile failed there returns that error. */
ft_status ft_dev_compile(ft_dev *d, const char *source, const char *const *defines, int ndefines,
                         ft_dev_module **out, ft_err *err);
/* Compile the module of ft_dev_compile into the device's disk cache without loading it, so a
 * later ft_dev_compile finds it there. Safe to call from several threads at once (a compile
 * pool does, kernels/cuda/backend/prefetch.h); *cached (may be NULL) is 1 when the cache had it. */
ft_status ft_dev_prepare(ft_dev *d, const char *source, const char *const *defines, int ndefines,
                         int *cached, ft_err *err);
/* A kernel file not written for flaretune (Kernel Tuner's, a benchmark's), compiled as written:
 * no ft_cuda.h, C++ or extern "C" kernels, __constant__ arrays the host fills. */
typedef struct ft_dev_source {
    const char *path; /* the file, absolute or relative to the working directory; its folder is
                         on the include path */
    const char *const *defines; /* "NAME=VALUE" or "NAME" */
    int ndefines;
    /* The file's compiler options ("-std=c++11", "-DX", "-Idir"): NVRTC gets them all; the
     * emulator honours -D and -I only (it compiles C++17 with the host compiler: the others name
     * NVRTC's choices, not the host's) and ignores the rest. */
    const char *const *options;
    int noptions;
    const char *const *kernels; /* the kernels to launch, by the names written in the source */
    int nkernels;
    /* __constant__ variables the host writes (the emulator's profile counts their reads as the
     * constant cache's, not as global traffic) */
    const char *const *symbols;
    int nsymbols;
} ft_dev_source;

/* Compile a kernel file as written. The module is cached like ft_dev_compile's, keyed by the
 * file, the headers it includes with quotes, the defines, the options, the kernels and the
 * symbols. ft_dev_launch and ft_dev_kernel_info then take the kernels' names as written (a C++
 * kernel "convolution_kernel", not its mangled name). A missing file, a kernel or symbol the file
 * does not have, or a compile error is one line naming it. */
ft_status ft_dev_compile_file(ft_dev *d, const ft_dev_source *src, ft_dev_module **out,
                              ft_err *err);
/* Copy `bytes` from host memory into the module's variable `symbol` (one of src->symbols), as
 * cudaMemcpyToSymbol does. FT_EINVAL naming the symbol when the module has no such symbol or it
 * is smaller than `bytes`. */
ft_status ft_dev_symbol_write(ft_dev *d, ft_dev_module *m, const char *symbol, const void *host,
                              size_t bytes, ft_err *err);

/* Resource usage of one kernel of a module (from ptxas on the GPU: -Xptxas=-v; the emulator
 * reports static shared memory only and 0 registers). */
typedef struct ft_kernel_info {
    int regs, spill_stores, spill_loads;
    size_t smem_static, stack_bytes, local_bytes;
    int max_threads;
} ft_kernel_info;
ft_status ft_dev_kernel_info(ft_dev_module *m, const char *kernel, ft_kernel_info *info,
                             ft_err *err);
/* Launch `kernel` of module m. args[i] points at the i-th argument's value, as with
 * cuLaunchKernel. smem is the dynamic shared memory in bytes. Launch errors (bad configuration,
 * and under the emulator: a barrier or warp collective not reached by every required thread, an
 * out-of-bounds shared access it detects) are returned with the kernel, block and thread named. */
ft_status ft_dev_launch(ft_dev *d, ft_dev_module *m, const char *kernel, ft_dim3 grid,
                        ft_dim3 block, size_t smem, void **args, ft_err *err);

#ifdef __cplusplus
}
#endif
#endif
