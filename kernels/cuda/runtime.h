/* cuda_backend.h: the host side of the CUDA backend, shared by `cuda` (the GPU) and `cuda-emu`
 * (the same host code with the kernels run by the SIMT emulator).
 *
 * The op code (kernels/FAMILY/OP_cuda.c) is written once against this interface and ft_dev
 * (kernels/cuda/device.h): it sizes grids, picks modules by config, sequences kernels and
 * GEMMs, and never knows which device runs them. What differs lives below it: the device
 * (device_cuda.c / device_emu.c), the GEMM (cuBLASLt or a CPU GEMM, gemm.c), the clock (CUPTI,
 * CUDA events, or the host clock under the emulator, timer.c).
 *
 * Data flow of one call: the float tensors of the call (host float32) are copied to the device
 * in the call's storage type (the `dtype` attribute: f32, or bf16 rounded to nearest even), index
 * tensors as they are; the op's kernels run on the device's stream; outputs come back and are
 * widened to float32. Device copies of the inputs are kept with the call (ft_call.dev_state) and
 * made again only when a tensor of the call is replaced, so timing loops measure the kernels,
 * not the transfers.
 */
#ifndef FT_CUDA_BACKEND_H
#define FT_CUDA_BACKEND_H

#include <stddef.h>
#include <stdint.h>

#include "op/backend.h"
#include "cuda/device.h"
#include "op/op.h"

/* ---- the context: one per backend, opened on first use -------------------------------------- */

typedef struct ft_cuda_ctx ft_cuda_ctx;

/* The context of the `cuda` (emulated = 0) or `cuda-emu` (emulated = 1) backend, opened on first
 * use and kept for the process (closed at exit). Fails with FT_ENODEV and one line when there is
 * no GPU (or no toolkit in this build) for `cuda`. */
ft_status ft_cuda_ctx_get(int emulated, ft_cuda_ctx **out, ft_err *err);

ft_dev *ft_cuda_dev(ft_cuda_ctx *x);
/* 1 under the emulator. */
int ft_cuda_emulated(const ft_cuda_ctx *x);

/* ---- a call on the device -------------------------------------------------------------------- */

/* Storage type of a call's float tensors on the device. */
typedef enum { FT_DT_F32 = 0, FT_DT_BF16 = 1 } ft_dt;

typedef struct ft_cuda_call {
    const ft_call *c;
    ft_dt dt;                /* every float tensor (inputs, outputs, gradients) */
    void *d[FT_MAX_TENSORS]; /* device copy of each tensor that takes part, else NULL */
} ft_cuda_call;

size_t ft_dt_size(ft_dt dt);

/* ---- modules --------------------------------------------------------------------------------- */

#define FT_CUDA_MAX_DEFINES 24
#define FT_CUDA_MAX_KERNELS 6

/* One kernel module a configuration needs: a source of kernels/cuda/ and its -D macros, with
 * the kernels of it that the config launches and how (for `flaretune compile`: registers, shared
 * memory and occupancy per kernel, and pruning before timing). */
typedef struct ft_cuda_module_spec {
    const char *source; /* "fusion.cu" */
    int ndefines;
    char defines[FT_CUDA_MAX_DEFINES][48];
    int overflow; /* a define did not fit (too many, or too long): the module is refused */
    int nkernels;
    struct {
        const char *name;
        int block_threads; /* threads per block of its launch           */
        size_t dyn_smem;   /* dynamic shared memory per block, bytes    */
    } kernels[FT_CUDA_MAX_KERNELS];
} ft_cuda_module_spec;

/* Append a define ("NAME=VALUE", printf-style) / a kernel to a spec. */
void ft_cuda_spec_define(ft_cuda_module_spec *s, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
void ft_cuda_spec_kernel(ft_cuda_module_spec *s, const char *name, int block_threads,
                         size_t dyn_smem);

/* ---- tunables: one table per op ------------------------------------------------------------ */

/* An op's tunables are one X-macro list, a row per parameter in the order of its space:
 *
 *     #define OP_PARAMS(X)                                                                  \
 *         X(OP_P_CPT, "cpt", "FT_CPT", NULL, 1, "help text", 1, 2, 4)                       \
 *         ...
 *
 *   X(index, name, macro, labels, default, help, values...)
 *
 * index names the enum constant of the parameter (enum { OP_PARAMS(FT_CUDA_PARAM_INDEX) }),
 * name, labels (NULL or the names of values 0..n-1), default, help and the values make its
 * ft_param (static ft_param op_params[] = { OP_PARAMS(FT_CUDA_PARAM_ENTRY) }), and macro is the
 * -D macro its value is compiled in with (NULL: the host alone reads it; static const char
 * *const op_macros[] = { OP_PARAMS(FT_CUDA_PARAM_MACRO) }, emitted by ft_cuda_spec_params). */
#define FT_CUDA_NARGS(...)                                                                         \
    FT_CUDA_NARGS_(__VA_ARGS__, 16, 15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0)
#define FT_CUDA_NARGS_(a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14, a15, a16, n,   \
                       ...)                                                                        \
    n
#define FT_CUDA_PARAM_INDEX(index, name, macro, labels, def, help, ...) index,
#define FT_CUDA_PARAM_ENTRY(index, name, macro, labels, def, help, ...)                            \
    [index] = {name, help, FT_CUDA_NARGS(__VA_ARGS__), {__VA_ARGS__}, labels, def, 0},
#define FT_CUDA_PARAM_MACRO(index, name, macro, labels, def, help, ...) [index] = macro,

/* Append "MACRO=value" for each of the n parameters of cfg that names a macro (in order). */
void ft_cuda_spec_params(ft_cuda_module_spec *s, const char *const *macros, int n,
                         const ft_config *cfg);

/* An op's validity rules are an X-macro list too, a row per rule in the order they are checked
 * and shown (`flaretune space`): X(check, "the rule in one line"). FT_CUDA_RULE_TEXT makes the
 * space's constraint lines (static const char *const op_constraints[] = { OP_RULES(
 * FT_CUDA_RULE_TEXT) NULL }), FT_CUDA_RULE_CHECK the checks its valid function runs in turn: each
 * returns FT_CONFIG_VALID, FT_CONFIG_DUPLICATE (why said, if no later rule rules it out) or
 * FT_CONFIG_INVALID (why said). */
#define FT_CUDA_RULE_TEXT(check, text)  text,
#define FT_CUDA_RULE_CHECK(check, text) check,
typedef int (*ft_cuda_check)(const void *ctx, char *why, size_t n);

/* Run n checks in order on what the op's valid function gathered (ctx; a NULL check is a rule
 * the host cannot check): the first FT_CONFIG_INVALID, else FT_CONFIG_DUPLICATE if any said so,
 * else FT_CONFIG_VALID. */
int ft_cuda_rules_check(const ft_cuda_check *checks, size_t nchecks, const void *ctx, char *why,
                        size_t n);

/* Compile (or find in the caches) the module of a spec. */
ft_status ft_cuda_module(ft_cuda_ctx *x, const ft_cuda_module_spec *s, ft_dev_module **out,
                         ft_err *err);

/* Launch a kernel on the context's device (grid, block, dynamic shared memory, argument
 * pointers as cuLaunchKernel takes them). Errors name the kernel and the launch shape. */
ft_status ft_cuda_launch(ft_cuda_ctx *x, ft_dev_module *m, const char *kernel, ft_dim3 grid,
                         ft_dim3 block, size_t smem, void **args, ft_err *err);

/* A kernel's typed launcher, one per `extern "C" __global__` kernel of a .cu source, written
 * beside the op code that launches it:
 *
 *     FT_CUDA_KERNEL(dflare_bwd_reduce, (const float *dgp, int P, ..., int D), (&dgp, &P, ..., &D))
 *
 * defines `static ft_status launch_dflare_bwd_reduce(ft_cuda_ctx *x, ft_dev_module *m,
 * ft_dim3 grid, ft_dim3 block, size_t smem, const float *dgp, int P, ..., int D, ft_err *err)`:
 * the parameters are the kernel's, in its order, with a storage-type pointer (st_t *) as
 * void *. A call with the wrong arguments then fails to compile, and the kernel's name is
 * written once. The second list takes the address of each parameter, in the same order;
 * tests/test_compile.py checks both lists against the kernel's signature in the .cu file. */
#define FT_CUDA_UNPAREN(...) __VA_ARGS__
#define FT_CUDA_KERNEL(name, params, addrs)                                                        \
    static ft_status launch_##name(                                                                \
        ft_cuda_ctx *launch_x_, ft_dev_module *launch_m_, ft_dim3 launch_grid_,                    \
        ft_dim3 launch_block_, size_t launch_smem_, FT_CUDA_UNPAREN params, ft_err *launch_err_) { \
        void *launch_args_[] = {FT_CUDA_UNPAREN addrs};                                            \
        return ft_cuda_launch(launch_x_, launch_m_, #name, launch_grid_, launch_block_,            \
                              launch_smem_, launch_args_, launch_err_);                            \
    }
/* The name of a kernel that has a launcher (for module specs), checked at compile time. */
#define FT_CUDA_KERNEL_NAME(name) ((void)sizeof(&launch_##name), #name)

/* Device scratch: buffer `slot` (0..FT_CUDA_SCRATCH_SLOTS-1) of at least `bytes`, kept by the
 * context and reused by later calls (contents undefined; NaN-poisoned under the emulator). The
 * high-water mark of all slots is the op's peak extra device memory. */
#define FT_CUDA_SCRATCH_SLOTS 4
ft_status ft_cuda_scratch(ft_cuda_ctx *x, int slot, size_t bytes, void **p, ft_err *err);

/* A small read-only table the host computed (RoPE's frequencies), on the device: *p holds the
 * `bytes` of `host`. Tables are kept by content for the context's life, so a call that runs
 * again, timed or captured in a graph, finds its table and copies nothing (a copy from the host
 * waits for the stream). For tables of a few KiB that take few distinct values per process. */
ft_status ft_cuda_table(ft_cuda_ctx *x, const void *host, size_t bytes, const void **p,
                        ft_err *err);

/* ---- GEMM (gemm.c): cuBLASLt on the GPU, a CPU GEMM under the emulator ----------------------- */

/* C[M,N] = alpha * op(A) @ op(B) + beta * C, all row-major, batched with strides when
 * batch > 1. op(A) is [M,K]: A is [M,K] (lda >= K), or [K,M] with trans_a (lda >= M); likewise
 * op(B) is [K,N]: B is [K,N] (ldb >= N), or [N,K] with trans_b (ldb >= K). A and B are stored
 * in ab, C in c; compute is float32. */
typedef struct ft_gemm_desc {
    int trans_a, trans_b;
    int64_t M, N, K;
    int64_t lda, ldb, ldc;
    int64_t batch, stride_a, stride_b, stride_c; /* elements; batch 0 or 1: one GEMM */
    ft_dt ab, c;
    float alpha, beta;
} ft_gemm_desc;

/* One GEMM (no batch) with alpha 1 and C's leading dimension its width N: the shape most op
 * code asks for. */
static inline ft_gemm_desc ft_gemm_one(int trans_a, int trans_b, int64_t M, int64_t N, int64_t K,
                                       int64_t lda, int64_t ldb, ft_dt ab, ft_dt c, float beta) {
    return (ft_gemm_desc){.trans_a = trans_a,
                          .trans_b = trans_b,
                          .M = M,
                          .N = N,
                          .K = K,
                          .lda = lda,
                          .ldb = ldb,
                          .ldc = N,
                          .batch = 1,
                          .ab = ab,
                          .c = c,
                          .alpha = 1.0f,
                          .beta = beta};
}

/* `algo` is the rank of the algorithm among cuBLASLt's heuristic candidates for this GEMM (0 is
 * its first choice); the emulator ignores it. An algo beyond the candidates is FT_EUNSUPPORTED
 * with a line saying how many there are. */
#define FT_GEMM_MAX_ALGOS 8
ft_status ft_cuda_gemm(ft_cuda_ctx *x, const ft_gemm_desc *g, const void *A, const void *B, void *C,
                       int algo, ft_err *err);

/* ---- GPU internals shared by gemm.c and timer.c ---------------------------------------------- */

/* The stream every launch, copy and GEMM of a FT_DEV_CUDA device goes to (a cudaStream_t);
 * NULL for the emulator. */
void *ft_dev_cuda_stream(ft_dev *d);

/* gemm.c's state in a context (cuBLASLt handle, workspace, cached heuristics), made on first
 * use and closed with the context. */
typedef struct ft_gemm_state ft_gemm_state;
ft_gemm_state **ft_cuda_gemm_slot(ft_cuda_ctx *x);
void ft_gemm_state_close(ft_gemm_state *g);

/* ---- ops ------------------------------------------------------------------------------------- */

/* An op's CUDA implementation, carried by its description (ft_op.cuda). */
typedef struct ft_cuda_op {
    ft_space *space; /* the tunables of this op on the CUDA backend */
    /* The modules a configuration compiles, for static analysis; returns how many (<= max). */
    int (*modules)(const ft_call *c, ft_dt dt, const ft_config *cfg, ft_cuda_module_spec *out,
                   int max);
    /* Enqueue one call (forward, and the backward when c->backward) on the device. Every
     * output must be fully written (device memory starts NaN-poisoned under the emulator). */
    ft_status (*run)(ft_cuda_ctx *x, const ft_cuda_call *call, const ft_config *cfg, ft_err *err);
} ft_cuda_op;

/* The CUDA implementation an op carries (NULL: the op has none). */
const ft_cuda_op *ft_cuda_op_of(const ft_op *op);

/* The device storage type a call asks for (its `dtype` attribute). */
ft_dt ft_cuda_call_dt(const ft_call *c);

#endif
