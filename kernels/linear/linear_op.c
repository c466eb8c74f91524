/* linear_op.c: the interface of the drafter layer's dense projections (SPEC.md linear): a
 * Linear layer without bias, y = x @ w^T, as the q/k/v/o projections, the MLP's gate, up and
 * down projections and the LM head of a drafter step are. Tensors, sizes, preset shape,
 * realistic inputs, the float64 reference and the napkin math.
 *
 *   y[m,n] = sum_k x[m,k] * w[n,k]            backward: dx = dy @ w, dw = dy^T @ x
 *
 * grad_only=1 (with backward=1) runs the backward alone: what a training step pays for a layer
 * whose forward is timed elsewhere (the context K/V projection, which has no backward kernel).
 *
 * Napkin math: 2*M*N*K FLOPs forward, twice that backward, against (M*K + N*K + M*N) floats:
 * at the preset's shape (the MLP's fused gate and up projection, M = the rows of a step, N = 2*I,
 * K = H) that is M/3 FLOP per byte at M << N, K: a decode step's 64 rows make it bound by
 * reading w (memory), a training step's 512 or 8192 rows by the GEMM rate.
 * The op exists so that `flaretune step` times every GEMM of the drafter with the same
 * machinery (verification, the backend's clock, the profile's configs) as the tuned ops. */
#include <math.h>

#include "op/op.h"
#include "linear/linear.h"

static const char *const linear_syms[] = {"M", "N", "K", NULL};
static const ft_tensor_spec linear_tensors[] = {
    [LN_X] = {"x", FT_F32, "M,K", FT_ROLE_IN, 0, "input rows"},
    [LN_W] = {"w", FT_F32, "N,K", FT_ROLE_IN, 0, "weight (out x in), as a Linear layer keeps it"},
    [LN_Y] = {"y", FT_F32, "M,N", FT_ROLE_OUT, FT_TS_FORWARD, "output rows, x @ w^T"},
    [LN_DY] = {"dy", FT_F32, "M,N", FT_ROLE_GRAD_IN, 0, "upstream gradient of y"},
    [LN_DX] = {"dx", FT_F32, "M,K", FT_ROLE_GRAD_OUT, 0, "gradient of x, dy @ w"},
    [LN_DW] = {"dw", FT_F32, "N,K", FT_ROLE_GRAD_OUT, 0, "gradient of w, dy^T @ x"},
};
static const char *const linear_attrs[] = {"backward", "grad_only", "dtype", NULL};

static ft_status linear_check(ft_call *c, ft_err *err) {
    if (c->dim[LN_N] < 1 || c->dim[LN_K] < 1)
        return ft_err_set(err, FT_ESHAPE, "linear: N and K must be at least 1");
    if (c->attrs.grad_only && !c->backward)
        return ft_err_set(err, FT_EINVAL,
                          "linear: grad_only=1 needs backward=1 (else nothing runs)");
    /* The CPU path hands sizes to BLAS as int. */
    const int64_t lim = 2147483647;
    if (c->dim[LN_M] > lim || c->dim[LN_N] > lim || c->dim[LN_K] > lim ||
        c->dim[LN_M] * c->dim[LN_K] > lim * 8 || c->dim[LN_N] * c->dim[LN_K] > lim * 8)
        return ft_err_set(err, FT_ESHAPE, "linear: M=%lld N=%lld K=%lld is too large",
                          (long long)c->dim[LN_M], (long long)c->dim[LN_N],
                          (long long)c->dim[LN_K]);
    return FT_OK;
}

/* The widest GEMM of a draft layer: the MLP's gate and up projections as one [2I, H] weight,
 * over every row of the step's blocks. */
static ft_status linear_from_preset(ft_call *c, const ft_preset *p, ft_err *err) {
    (void)err;
    c->dim[LN_M] = p->blocks * p->B;
    c->dim[LN_N] = 2 * p->inter;
    c->dim[LN_K] = p->H;
    return FT_OK;
}

static void linear_fill(ft_call *c, const ft_preset *p, ft_rng *rng) {
    (void)p;
    ft_fill_normal(c->t[LN_X], rng, 0.0, 1.0);
    /* Kaiming-like scale, so y stays O(1) whatever K is. */
    ft_fill_normal(c->t[LN_W], rng, 0.0, 1.0 / sqrt((double)c->dim[LN_K]));
    if (c->backward) ft_fill_normal(c->t[LN_DY], rng, 0.0, 1.0);
}

/* out[i, j] ([rows, cols]) = sum over k < inner of a[i * ai + k * ak] * b[j * bj + k * bk], k
 * ascending. */
static void gemm_ref(int64_t rows, int64_t cols, int64_t inner, const double *a, int64_t ai,
                     int64_t ak, const double *b, int64_t bj, int64_t bk, double *out) {
    for (int64_t i = 0; i < rows; i++)
        for (int64_t j = 0; j < cols; j++) {
            double s = 0;
            for (int64_t k = 0; k < inner; k++)
                s += a[i * ai + k * ak] * b[j * bj + k * bk];
            out[i * cols + j] = s;
        }
}

static void linear_reference(const ft_call *c) {
    const int64_t M = c->dim[LN_M], N = c->dim[LN_N], K = c->dim[LN_K];
    const double *x = c->t[LN_X]->data, *w = c->t[LN_W]->data;
    if (!c->attrs.grad_only) gemm_ref(M, N, K, x, K, 1, w, K, 1, c->t[LN_Y]->data);
    if (!c->backward) return;
    const double *dy = c->t[LN_DY]->data;
    gemm_ref(M, K, N, dy, N, 1, w, 1, K, c->t[LN_DX]->data); /* dx = dy w    */
    gemm_ref(N, K, M, dy, 1, N, x, 1, K, c->t[LN_DW]->data); /* dw = dy^T x  */
}

static double linear_flops(const ft_call *c) {
    double gemm = 2.0 * (double)c->dim[LN_M] * (double)c->dim[LN_N] * (double)c->dim[LN_K];
    return gemm * ((c->attrs.grad_only ? 0.0 : 1.0) + (c->backward ? 2.0 : 0.0));
}

FT_OP_DEFINE(linear, linear, "linear", FT_BWD_OPTIONAL,
             "a drafter layer's dense projection, y = x w^T (q/k/v/o, MLP, LM head)");
