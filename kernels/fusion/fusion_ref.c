/* fusion_ref.c: float64 reference of the two context-fusion ops (SPEC.md fusion.dflare and
 * fusion.dflash), the oracle every fast fusion backend is checked against.
 *
 *   fusion.dflare:  a[i,:]   = softmax(w[i,:])
 *                   s[i,n,:] = sum_t a[i,t] * x[n,t,:]
 *                   f[i,n,:] = s[i,n,:] / sqrt(mean_h s[i,n,h]^2 + eps) * g
 *   fusion.dflash:  c[n,:]   = x[n,:,:].reshape(T*H) @ w_fc^T
 *                   f[n,:]   = c[n,:] / sqrt(mean_h c[n,h]^2 + eps) * g
 *
 * Backward of one RMSNorm row y = u * r * g, r = (mean_h u[h]^2 + eps)^(-1/2), given dy:
 *   dg[h] += dy[h] * u[h] * r
 *   du[h]  = r * g[h] * dy[h] - u[h] * r^3 * mean_j(g[j] * dy[j] * u[j])
 * (dr/du[h] = -r^3 * u[h] / H, hence the mean). Backward of a = softmax(w) given da:
 *   dw[t]  = a[t] * (da[t] - sum_t' a[t'] * da[t'])
 * Then dflare: dx[n,t,:] = sum_i a[i,t] * ds[i,n,:], da[i,t] = sum_{n,h} ds[i,n,h] * x[n,t,h];
 * dflash: dx[n,:] = dc[n,:] @ w_fc, dw_fc = sum_n dc[n,:]^T x[n,:] (x flattened to T*H).
 *
 * Napkin math: dflare costs about 2*D*N*T*H flops forward and twice that backward, dflash about
 * 2*N*H*T*H forward (the GEMM) and twice that backward. This file is the oracle, not a contender:
 * the loops follow the formulas one to one and everything accumulates in double.
 */
#include "fusion/fusion_ref.h"

#include <assert.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Scratch here is O(H + D*T) doubles, tiny next to the inputs; the API has no way to report a
 * failure, and an oracle that silently produced nothing would be worse than stopping. */
static double *ref_scratch(int64_t n) {
    double *p = calloc((size_t)(n > 0 ? n : 1), sizeof(double));
    if (!p) abort();
    return p;
}

/* 1 / sqrt(mean(u^2) + eps) over one row of H. */
static double rms_inv(int64_t H, double eps, const double *u) {
    double ss = 0.0;
    for (int64_t h = 0; h < H; h++)
        ss += u[h] * u[h];
    return 1.0 / sqrt(ss / (double)H + eps);
}

static void rmsnorm_row_fwd(int64_t H, double eps, const double *u, const double *g, double *y) {
    double r = rms_inv(H, eps, u);
    for (int64_t h = 0; h < H; h++)
        y[h] = u[h] * r * g[h];
}

/* du is overwritten; dg is accumulated into, since g is shared by every row. */
static void rmsnorm_row_bwd(int64_t H, double eps, const double *u, const double *g,
                            const double *dy, double *du, double *dg) {
    double r = rms_inv(H, eps, u);
    double dot = 0.0; /* sum_j g[j] dy[j] u[j]: the part of dy along u, through r */
    for (int64_t h = 0; h < H; h++)
        dot += g[h] * dy[h] * u[h];
    for (int64_t h = 0; h < H; h++) {
        du[h] = r * g[h] * dy[h] - u[h] * r * r * r * dot / (double)H;
        dg[h] += dy[h] * u[h] * r;
    }
}

/* a[i,:] = softmax(w[i,:]) for every draft layer i, with the max subtracted so large logits
 * cannot overflow. */
static void softmax_rows(int64_t D, int64_t T, const double *w, double *a) {
    for (int64_t i = 0; i < D; i++) {
        const double *wi = w + i * T;
        double m = wi[0];
        for (int64_t t = 1; t < T; t++)
            m = wi[t] > m ? wi[t] : m;
        double sum = 0.0;
        for (int64_t t = 0; t < T; t++)
            sum += exp(wi[t] - m);
        for (int64_t t = 0; t < T; t++)
            a[i * T + t] = exp(wi[t] - m) / sum;
    }
}

/* out[j] = sum over k < K of v[k] * m[j * mj + k * mk] for j < J, k ascending. */
static void matvec(int64_t J, int64_t K, const double *v, const double *m, int64_t mj, int64_t mk,
                   double *out) {
    for (int64_t j = 0; j < J; j++) {
        double acc = 0.0;
        for (int64_t k = 0; k < K; k++)
            acc += v[k] * m[j * mj + k * mk];
        out[j] = acc;
    }
}

/* s[:] = sum_t a[t] * x[n,t,:] for one token n (xn = x + n*T*H, at = a + i*T). */
static void mix_row(int64_t T, int64_t H, const double *at, const double *xn, double *s) {
    matvec(H, T, at, xn, 1, H, s);
}

/* ---- fusion.dflare ------------------------------------------------------------------------ */

int64_t ft_ref_fusion_dflare_init_col(int64_t i, int64_t T, int64_t D) {
    const int64_t col = i * T / D;
    return col < T - 1 ? col : T - 1;
}

void ft_ref_fusion_dflare_fwd(int64_t N, int64_t T, int64_t H, int64_t D, double eps,
                              const double *x, const double *w, const double *g, double *f) {
    assert(N >= 0 && T > 0 && H > 0 && D >= 0);
    double *a = ref_scratch(D * T);
    double *s = ref_scratch(H);
    softmax_rows(D, T, w, a);
    for (int64_t i = 0; i < D; i++)
        for (int64_t n = 0; n < N; n++) {
            mix_row(T, H, a + i * T, x + n * T * H, s);
            rmsnorm_row_fwd(H, eps, s, g, f + (i * N + n) * H);
        }
    free(s);
    free(a);
}

void ft_ref_fusion_dflare_bwd(int64_t N, int64_t T, int64_t H, int64_t D, double eps,
                              const double *x, const double *w, const double *g, const double *df,
                              double *dx, double *dw, double *dg) {
    assert(N >= 0 && T > 0 && H > 0 && D >= 0);
    double *a = ref_scratch(D * T);
    double *da = ref_scratch(D * T); /* gradient w.r.t. the softmax weights a[i,t] */
    double *s = ref_scratch(H);
    double *ds = ref_scratch(H);
    softmax_rows(D, T, w, a);
    if (dx) memset(dx, 0, (size_t)(N * T * H) * sizeof(double));
    memset(dg, 0, (size_t)H * sizeof(double));

    for (int64_t i = 0; i < D; i++)
        for (int64_t n = 0; n < N; n++) {
            const double *xn = x + n * T * H;
            mix_row(T, H, a + i * T, xn, s);
            rmsnorm_row_bwd(H, eps, s, g, df + (i * N + n) * H, ds, dg);
            /* s is linear in both a and x: each gets the other factor times ds. */
            for (int64_t t = 0; t < T; t++)
                for (int64_t h = 0; h < H; h++) {
                    if (dx) dx[(n * T + t) * H + h] += a[i * T + t] * ds[h];
                    da[i * T + t] += ds[h] * xn[t * H + h];
                }
        }

    for (int64_t i = 0; i < D; i++) {
        double dot = 0.0;
        for (int64_t t = 0; t < T; t++)
            dot += a[i * T + t] * da[i * T + t];
        for (int64_t t = 0; t < T; t++)
            dw[i * T + t] = a[i * T + t] * (da[i * T + t] - dot);
    }
    free(ds);
    free(s);
    free(da);
    free(a);
}

/* ---- fusion.dflash ------------------------------------------------------------------------ */

/* c[:] = xn @ w_fc^T for one token, xn being its T*H features flattened (t major). */
static void fc_row(int64_t K, int64_t H, const double *xn, const double *w_fc, double *c) {
    matvec(H, K, xn, w_fc, K, 1, c);
}

void ft_ref_fusion_dflash_fwd(int64_t N, int64_t T, int64_t H, double eps, const double *x,
                              const double *w_fc, const double *g, double *f) {
    assert(N >= 0 && T > 0 && H > 0);
    const int64_t K = T * H;
    double *c = ref_scratch(H);
    for (int64_t n = 0; n < N; n++) {
        fc_row(K, H, x + n * K, w_fc, c);
        rmsnorm_row_fwd(H, eps, c, g, f + n * H);
    }
    free(c);
}

void ft_ref_fusion_dflash_bwd(int64_t N, int64_t T, int64_t H, double eps, const double *x,
                              const double *w_fc, const double *g, const double *df, double *dx,
                              double *dw_fc, double *dg) {
    assert(N >= 0 && T > 0 && H > 0);
    const int64_t K = T * H;
    double *c = ref_scratch(H);
    double *dc = ref_scratch(H);
    if (dx) memset(dx, 0, (size_t)(N * K) * sizeof(double));
    memset(dw_fc, 0, (size_t)(H * K) * sizeof(double));
    memset(dg, 0, (size_t)H * sizeof(double));

    for (int64_t n = 0; n < N; n++) {
        const double *xn = x + n * K;
        fc_row(K, H, xn, w_fc, c);
        rmsnorm_row_bwd(H, eps, c, g, df + n * H, dc, dg);
        /* c = w_fc xn: dx gets w_fc^T dc, dw_fc gets the outer product dc xn^T. */
        for (int64_t o = 0; o < H; o++)
            for (int64_t k = 0; k < K; k++) {
                if (dx) dx[n * K + k] += dc[o] * w_fc[o * K + k];
                dw_fc[o * K + k] += dc[o] * xn[k];
            }
    }
    free(dc);
    free(c);
}
