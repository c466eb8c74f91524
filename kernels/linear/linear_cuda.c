/* linear_cuda.c: the dense projection on CUDA (SPEC.md linear): cuBLASLt GEMMs (ft_cuda_gemm,
 * kernels/cuda/gemm.c), fp32 compute, storage in the call's dtype; no kernel of its own.
 *
 *   y = x @ w^T, then (backward) dx = dy @ w and dw = dy^T @ x
 *
 * Napkin math on an H200 (4.8 TB/s, ~990 TFLOP/s dense bf16 tensor, ~60 TFLOP/s fp32 FMA):
 * the decode shape of qwen3-8b dflare (M = 256, N = 2*12288, K = 4096) reads a 201 MB fp32
 * weight for 52 GFLOP: about 42 us of memory, a little under 0.9 ms of fp32 FMA without tensor
 * cores: compute-bound in fp32, memory-bound in bf16. The tunable is cuBLASLt's algorithm.
 */
#include "cuda/backend/cuda_backend.h"
#include "linear/linear.h"

#define LN_PARAMS(X)                                                                               \
    X(LN_P_ALGO, "algo", NULL, NULL, 0,                                                            \
      "cuBLASLt algorithm of every GEMM of the call, by rank among its heuristic's candidates "    \
      "(0: its first choice)",                                                                     \
      0, 1, 2, 3)

enum { LN_PARAMS(FT_CUDA_PARAM_INDEX) LN_NPARAMS };
static ft_param linear_params[] = {LN_PARAMS(FT_CUDA_PARAM_ENTRY)};
static const char *const linear_constraints[] = {NULL};

static int linear_modules(const ft_call *c, ft_dt dt, const ft_config *cfg,
                          ft_cuda_module_spec *out, int max) {
    (void)c, (void)dt, (void)cfg, (void)out, (void)max;
    return 0; /* cuBLASLt only: nothing to compile */
}

static ft_status linear_run(ft_cuda_ctx *x, const ft_cuda_call *call, const ft_config *cfg,
                            ft_err *err) {
    const ft_call *c = call->c;
    const int64_t M = c->dim[LN_M], N = c->dim[LN_N], K = c->dim[LN_K];
    const ft_dt dt = call->dt;
    const int algo = cfg->v[LN_P_ALGO];
    void *const *d = call->d;
    ft_status s;
    /* y = x @ w^T  ([M,K] x [K,N], w stored [N,K]) */
    ft_gemm_desc gy = ft_gemm_one(0, 1, M, N, K, K, K, dt, dt, 0.0f);
    if (!c->attrs.grad_only && (s = ft_cuda_gemm(x, &gy, d[LN_X], d[LN_W], d[LN_Y], algo, err)))
        return ft_err_wrap(err, "linear: y = x w^T");
    if (!c->backward) return FT_OK;
    /* dx = dy @ w  ([M,N] x [N,K]) */
    ft_gemm_desc gx = ft_gemm_one(0, 0, M, K, N, N, K, dt, dt, 0.0f);
    if ((s = ft_cuda_gemm(x, &gx, d[LN_DY], d[LN_W], d[LN_DX], algo, err)))
        return ft_err_wrap(err, "linear: dx = dy w");
    /* dw = dy^T @ x  ([N,M] x [M,K]) */
    ft_gemm_desc gw = ft_gemm_one(1, 0, N, K, M, N, K, dt, dt, 0.0f);
    if ((s = ft_cuda_gemm(x, &gw, d[LN_DY], d[LN_X], d[LN_DW], algo, err)))
        return ft_err_wrap(err, "linear: dw = dy^T x");
    return FT_OK;
}

static ft_space linear_space = {linear_params, LN_NPARAMS, linear_constraints, NULL};

const ft_cuda_op ft_cuda_linear = {&linear_space, linear_modules, linear_run};
