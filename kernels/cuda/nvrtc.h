/* nvrtc.h: kernel sources compiled for a GPU architecture by NVRTC, without needing a GPU.
 *
 * One kernel source (named from kernels/: "fusion/fusion.cu") with its -D macros becomes a CUBIN for an exact architecture
 * ("sm_90a" on Hopper), compiled with ptxas's resource report on, so registers, spills, stack and
 * static shared memory of every kernel are known before anything runs. CUBINs are cached on disk
 * under $FLARETUNE_CACHE_DIR/nvrtc (default ~/.cache/flaretune/nvrtc), keyed by a hash of the
 * source and the headers it includes, the options, the architecture and NVRTC's version; files
 * are written under a private name and renamed into place, so concurrent processes share the
 * cache safely. Built only with the CUDA toolkit (FT_HAVE_CUDA).
 */
#ifndef FT_NVRTC_H
#define FT_NVRTC_H

#include <stddef.h>

#include "cuda/device.h"
#include "core/status.h"

#define FT_NVRTC_MAX_KERNELS 16

typedef struct ft_nvrtc_kernel {
    char name[96];    /* as ptxas reports it: a C++ kernel's mangled name */
    char written[96]; /* as the source writes it: from the name expressions, else the mangled
                         name's function name ("_Z18convolution_kernelPfS_S_": convolution_kernel) */
    ft_kernel_info info; /* regs, spill_stores, spill_loads, smem_static, stack_bytes */
} ft_nvrtc_kernel;

typedef struct ft_nvrtc_result {
    void *cubin; /* malloc'd; free with ft_nvrtc_result_free */
    size_t cubin_size;
    char *log; /* NVRTC's log with ptxas's report (malloc'd, may be empty) */
    int cached; /* 1: read from the disk cache */
    int nkernels;
    ft_nvrtc_kernel kernels[FT_NVRTC_MAX_KERNELS];
    char key[33];
    /* ft_nvrtc_compile_file's name expressions and what NVRTC lowered them to (malloc'd) */
    int nnames;
    struct ft_nvrtc_name {
        char expr[128];    /* "convolution_kernel", "&d_filter" */
        char lowered[256]; /* "_Z18convolution_kernelPfS_S_", "d_filter" */
    } *names;
} ft_nvrtc_result;

/* Compile kernels/<source> (an absolute path is taken as is) for `arch` ("sm_80",
 * "sm_90a", ...). A compile error is FT_EINVAL with the first error line and the defines;
 * out->kernels then still holds the resources ptxas reported before it refused (a kernel over
 * NVRTC's 48 KiB of static shared memory), when it ran. */
ft_status ft_nvrtc_compile(const char *source, const char *const *defines, int ndefines,
                           const char *arch, ft_nvrtc_result *out, ft_err *err);
void ft_nvrtc_result_free(ft_nvrtc_result *r);

/* The same for a module spec (its source and -D macros, cuda/runtime.h): what kfacts, an
 * emitted package's cubins and the variant tests compile. */
struct ft_cuda_module_spec;
ft_status ft_nvrtc_compile_module(const struct ft_cuda_module_spec *m, const char *arch,
                                  ft_nvrtc_result *out, ft_err *err);

/* A kernel file as written (not of flaretune's kernel tree): its path (absolute, or from the working
 * directory), its defines and compiler options (after flaretune's; a -std= of its own replaces
 * flaretune's -std=c++17), and name expressions to resolve: kernels by their written names
 * ("convolution_kernel", "ns::k<float>"), variables by their address ("&d_filter"). An
 * expression the file cannot resolve fails the compile, naming it. */
typedef struct ft_nvrtc_file {
    const char *path;
    const char *const *defines;
    int ndefines;
    const char *const *options;
    int noptions;
    const char *const *names;
    int nnames;
} ft_nvrtc_file;
#define FT_NVRTC_MAX_OPTIONS 16
#define FT_NVRTC_MAX_NAMES   64
ft_status ft_nvrtc_compile_file(const ft_nvrtc_file *f, const char *arch, ft_nvrtc_result *out,
                                ft_err *err);
/* The lowered name of a name expression of the result; NULL when it has none. */
const char *ft_nvrtc_lowered(const ft_nvrtc_result *r, const char *expr);
/* Resource report of one kernel of a result, by its reported or its written name; NULL when it
 * has no such kernel. */
const ft_nvrtc_kernel *ft_nvrtc_kernel_of(const ft_nvrtc_result *r, const char *name);
/* Parse ptxas's -v report (the "Compiling entry function" / "Used N registers" lines) into
 * kernels; returns how many were found. Exposed for tests. */
int ft_nvrtc_parse_ptxas(const char *log, ft_nvrtc_kernel *out, int max);
/* NVRTC's version as "13.0", for fingerprints. */
const char *ft_nvrtc_version(void);
/* Architectures NVRTC can target, e.g. for --arch validation: 1 when it accepts `arch`. */
int ft_nvrtc_arch_supported(const char *arch);

#endif
