/* linear_cpu.c: the dense projection on the CPU (SPEC.md linear): OpenBLAS's sgemm.
 *
 *   y = x @ w^T (forward), dx = dy @ w, dw = dy^T @ x (backward)
 *
 * Napkin math at small.dflare.train (M = 512, N = 2*3072, K = 1024): 6.4 GFLOP forward, 48 ms at
 * the ~135 GFLOP/s of a large sgemm on two cores; the decode shape (M = 64) reads the 25 MB
 * weight once for 0.8 GFLOP, so it is bound by that read (about 1.5 ms at 17 GB/s). There is
 * nothing to tile by hand here: the one tunable is the thread count OpenBLAS gets.
 */
#include <cblas.h>

#include "cpu/cpu.h"
#include "linear/linear.h"

enum { LN_P_THREADS };

static ft_param linear_params[] = {
    [LN_P_THREADS] = FT_THREADS_PARAM("OpenBLAS threads"),
};

static ft_status linear_run(ft_call *c, const ft_config *cfg, ft_err *err) {
    (void)err;
    const int M = (int)c->dim[LN_M], N = (int)c->dim[LN_N], K = (int)c->dim[LN_K];
    const float *x = c->t[LN_X]->data, *w = c->t[LN_W]->data;
    ft_cpu_blas_threads(cfg->v[LN_P_THREADS]);
    if (M > 0 && !c->attrs.grad_only)
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, M, N, K, 1.0f, x, K, w, K, 0.0f,
                    c->t[LN_Y]->data, N);
    if (!c->backward) return FT_OK;
    const float *dy = c->t[LN_DY]->data;
    float *dw = c->t[LN_DW]->data;
    if (M > 0)
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, M, K, N, 1.0f, dy, N, w, K, 0.0f,
                    c->t[LN_DX]->data, K);
    /* dw = dy^T @ x sums over the M rows; with none it is zero (sgemm is not called with a zero
     * inner size, which some BLAS builds reject). */
    if (M > 0)
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, N, K, M, 1.0f, dy, N, x, K, 0.0f, dw,
                    K);
    else
        for (int64_t i = 0; i < (int64_t)N * K; i++)
            dw[i] = 0.0f;
    return FT_OK;
}

static const char *const linear_constraints[] = {NULL};

static ft_space linear_space = {linear_params, sizeof linear_params / sizeof linear_params[0],
                                linear_constraints, NULL};

const ft_cpu_impl ft_cpu_linear = {&linear_space, linear_run};
