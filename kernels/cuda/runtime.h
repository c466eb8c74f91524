/* runtime.h: the CUDA runtime as the host code sees it, shared by `cuda` (the GPU) and `cuda-emu`
 * (the same host code with the kernels run by the SIMT emulator): a context's device and
 * storage types, kernel module specs, the GEMM, and an op's CUDA implementation.
 *
 * The op code (kernels/FAMILY/OP_cuda.c) is written once against this interface, the backend's
 * calls (kernels/cuda/backend/cuda_backend.h: contexts, modules, launches, scratch) and ft_dev
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
 *
 * Defined in context.c (a context's accessors; the context itself is context.h), gemm.c (the
 * GEMM) and device.c (the stream).
 */
#ifndef FT_CUDA_RUNTIME_H
#define FT_CUDA_RUNTIME_H

#include <stddef.h>
#include <stdint.h>

#include "op/backend.h"
#include "cuda/device.h"
#include "op/op.h"

/* ---- the context: one per backend, opened on first use -------------------------------------- */

typedef struct ft_cuda_ctx ft_cuda_ctx;

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

/* One kernel module a configuration needs: a source under kernels/ and its -D macros, with
 * the kernels of it that the config launches and how (for `flaretune compile`: registers, shared
 * memory and occupancy per kernel, and pruning before timing). */
typedef struct ft_cuda_module_spec {
    const char *source; /* "fusion/fusion.cu" */
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

/* Device scratch slots a context keeps (ft_cuda_scratch, backend/cuda_backend.h). */
#define FT_CUDA_SCRATCH_SLOTS 4

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
    /* A line each for the transposes, the shape and layout, the types and scalars. */
    /* clang-format off */
    return (ft_gemm_desc){.trans_a = trans_a, .trans_b = trans_b,
                          .M = M, .N = N, .K = K, .lda = lda, .ldb = ldb, .ldc = N, .batch = 1,
                          .ab = ab, .c = c, .alpha = 1.0f, .beta = beta};
    /* clang-format on */
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
    /* Enqueue one call (forward, and the backward when c->backward) on the device; cfg has
     * passed the space's check (the backend refuses one that cannot run before it calls this).
     * Every output must be fully written (device memory starts NaN-poisoned under the
     * emulator). */
    ft_status (*run)(ft_cuda_ctx *x, const ft_cuda_call *call, const ft_config *cfg, ft_err *err);
} ft_cuda_op;

/* The CUDA implementation an op carries (NULL: the op has none). */
const ft_cuda_op *ft_cuda_op_of(const ft_op *op);

/* The device storage type a call asks for (its `dtype` attribute). */
ft_dt ft_cuda_call_dt(const ft_call *c);

#endif
