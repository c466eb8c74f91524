/* loss_ref.c: the float64 reference of the loss op, LM head + weighted cross entropy.
 *
 *   z[m,:]  = h[m,:] @ w_lm^T
 *   ce[m]   = logsumexp(z[m,:]) - z[m,labels[m]]   on scored rows (mask && m % B > 0), else 0
 *   q[m]    = exp(-ce[m]),  w = per-block weights (loss_weights.c),  loss = sum w*ce / denom
 *   dz[m,:] = (w[m]/denom) * (softmax(z[m,:]) - onehot(labels[m]))
 *   dh = dz @ w_lm,  dw_lm = dz^T @ h                                       (SPEC.md loss)
 *
 * Napkin math at the qwen3-4b training shape (M = 512 blocks * 16 = 8192, V = 151936,
 * H = 2560): z alone is 2*M*V*H = 6.4 TFLOP and 5 GB in float32, so fused kernels stream it
 * in vocab chunks and never store it; dh and dw_lm cost 6.4 TFLOP each again. This reference
 * does the same without a [M,V] or even a [V] buffer: one pass over the vocab per scored row for
 * the forward and one more, recomputing z, for the backward (4*M*V*H FLOPs, 6 with dw_lm). It is
 * meant for the small shapes that verification uses.
 *
 * With final_norm (ft_ref_loss_normed) the drafter's final RMSNorm comes first, as the public
 * trainers apply it (SpecForge DFlashDraftModel.forward and AngelSlim QwenDFlareDraftModel.forward
 * both return self.norm(hidden_states) before the LM head):
 *
 *   r[m] = 1 / sqrt(mean_k h[m,k]^2 + eps),  hn[m,:] = h[m,:] * r[m] * g
 *   (loss, ce, q, w, dhn, dw_lm) = the loss above on hn
 *   dg[k]   = sum_m dhn[m,k] * h[m,k] * r[m]
 *   dh[m,:] = r[m] * u - r[m]^3 * h[m,:] * (u . h[m,:]) / H,   u = dhn[m,:] * g
 *
 * It composes the two in float64 with [M,H] buffers: O(M*H) next to the loss's O(M*V*H).
 */
#include "loss/loss_ref.h"

#include <assert.h>
#include <math.h>
#include <stdlib.h>

static double dot(const double *x, const double *y, int64_t n) {
    double s = 0;
    for (int64_t i = 0; i < n; i++)
        s += x[i] * y[i];
    return s;
}

/* logsumexp over v of h_m . w_lm[v,:], one pass with a running maximum. */
static double row_logsumexp(const double *h_m, const double *w_lm, int64_t V, int64_t H) {
    double mx = -INFINITY, sum = 0;
    for (int64_t v = 0; v < V; v++) {
        double z = dot(h_m, w_lm + v * H, H);
        if (z > mx) {
            sum = sum * exp(mx - z) + 1;
            mx = z;
        } else {
            sum += exp(z - mx);
        }
    }
    return mx + log(sum);
}

void ft_ref_loss(int64_t M, int64_t H, int64_t V, const ft_loss_attrs *a, const double *h,
                 const double *w_lm, const int32_t *labels, const uint8_t *mask, double *loss,
                 double *ce, double *q, double *w, double *dh, double *dw_lm) {
    const int64_t B = a->B;
    assert(M >= 0 && H > 0 && V > 0 && B > 0 && M % B == 0);
    assert(!a->want_dw || dw_lm);

    /* Forward: cross entropy and confidence per row. Unscored rows never touch their label. */
    for (int64_t m = 0; m < M; m++) {
        if (m % B == 0 || !mask[m]) {
            ce[m] = 0;
            q[m] = 1;
            continue;
        }
        assert(labels[m] >= 0 && labels[m] < V);
        const double *h_m = h + m * H;
        ce[m] = row_logsumexp(h_m, w_lm, V, H) - dot(h_m, w_lm + (int64_t)labels[m] * H, H);
        q[m] = exp(-ce[m]);
    }

    /* Weights per block, then the batch denominator. The shared helpers treat k = 0 as
     * unscored themselves, so the raw mask serves as the scored flags. */
    for (int64_t b = 0; b < M / B; b++)
        ft_loss_block_weights(a, q + b * B, mask + b * B, w + b * B);
    const double denom = ft_loss_denominator(a, M, w, mask);

    for (int64_t i = 0; i < M * H; i++)
        dh[i] = 0;
    if (a->want_dw)
        for (int64_t i = 0; i < V * H; i++)
            dw_lm[i] = 0;
    if (denom == 0) { /* nothing scored (or a zero num_seqs): no loss, no gradient */
        *loss = 0;
        return;
    }

    double sum = 0;
    for (int64_t m = 0; m < M; m++)
        sum += w[m] * ce[m];
    *loss = sum / denom;

    /* Backward: the weights are constants, so each row's gradient is the plain softmax cross
     * entropy gradient scaled by w[m]/denom. Unscored rows (whose labels are never read) and
     * rows with a zero scale contribute exactly nothing and are skipped. */
    for (int64_t m = 0; m < M; m++) {
        const double scale = w[m] / denom;
        if (m % B == 0 || !mask[m] || scale == 0) continue;
        const double *h_m = h + m * H;
        double *dh_m = dh + m * H;
        const int64_t label = labels[m];
        const double lse = ce[m] + dot(h_m, w_lm + label * H, H); /* logsumexp(z[m,:]) */
        for (int64_t v = 0; v < V; v++) {
            const double *w_v = w_lm + v * H;
            double p = exp(dot(h_m, w_v, H) - lse);
            double g = scale * (p - (v == label ? 1.0 : 0.0));
            for (int64_t i = 0; i < H; i++)
                dh_m[i] += g * w_v[i];
            if (a->want_dw) {
                double *dw_v = dw_lm + v * H;
                for (int64_t i = 0; i < H; i++)
                    dw_v[i] += g * h_m[i];
            }
        }
    }
}

void ft_ref_loss_normed(int64_t M, int64_t H, int64_t V, const ft_loss_attrs *a, double eps,
                        const double *h, const double *g_norm, const double *w_lm,
                        const int32_t *labels, const uint8_t *mask, double *loss, double *ce,
                        double *q, double *w, double *dh, double *dg, double *dw_lm) {
    assert(M >= 0 && H > 0 && eps >= 0);
    double *hn = calloc((size_t)(M * H > 0 ? M * H : 1), sizeof(double));
    double *r = malloc(sizeof(double) * (size_t)(M > 0 ? M : 1));
    assert(hn && r);
    for (int64_t m = 0; m < M; m++) {
        const double *h_m = h + m * H;
        r[m] = 1.0 / sqrt(dot(h_m, h_m, H) / (double)H + eps);
        for (int64_t k = 0; k < H; k++)
            hn[m * H + k] = h_m[k] * r[m] * g_norm[k];
    }
    /* dh receives the gradient of hn first, then is turned into that of h row by row. */
    ft_ref_loss(M, H, V, a, hn, w_lm, labels, mask, loss, ce, q, w, dh, dw_lm);
    for (int64_t k = 0; k < H; k++)
        dg[k] = 0;
    for (int64_t m = 0; m < M; m++) {
        const double *h_m = h + m * H;
        double *d = dh + m * H, uh = 0;
        for (int64_t k = 0; k < H; k++) {
            dg[k] += d[k] * h_m[k] * r[m];
            d[k] *= g_norm[k]; /* u */
            uh += d[k] * h_m[k];
        }
        const double c = r[m] * r[m] * r[m] * uh / (double)H;
        for (int64_t k = 0; k < H; k++)
            d[k] = r[m] * d[k] - c * h_m[k];
    }
    free(hn);
    free(r);
}
