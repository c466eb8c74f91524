/* loss_weights.c: the per-position weights and the denominator of the loss op (SPEC.md loss).
 *
 * One definition shared by the float64 reference, the CPU variants and the CUDA launchers, so a
 * scheme means the same thing on every backend. Per block of B rows, with k = 0 the anchor and
 * mask_k = scored[k] && k > 0:
 *
 *   uniform      w_k = mask_k
 *   decay        w_k = mask_k * exp(-(k-1)/gamma)
 *   progressive  decay with gamma = gamma0 + (gamma_max - gamma0) * min(1, step/warmup_steps)
 *   progressive_epoch
 *                decay with gamma + gamma_inc * floor(epoch) (AngelSlim's per-epoch rise, no cap)
 *   dpace        w_k = mask_k * sum_{m=k..B-1} mask_m * P_m          (= dS / dlog s_k)
 *   dpace_cum    w_k = mask_k * P_k
 *   dpace_cont   w_k = mask_k * sum_{m=k..B-1} mask_m * P_m / P_k
 *
 * where s_k = (1-alpha)*q_k + alpha on scored rows and 1 elsewhere, P_k = prod_{j=1..k} s_j and
 * S = sum_m mask_m * P_m is the accepted-length surrogate. Each block costs two passes over its
 * B rows and no memory beyond w: cheap next to the B*V*H of the LM head that produced q.
 *
 * Row k = 0 of a block counts as unscored whatever scored[0] holds (and ft_loss_denominator
 * skips every row m with m % B == 0), so a caller may pass the raw mask.
 */
#include "loss/loss_ref.h"

#include <assert.h>
#include <math.h>

double ft_loss_gamma(const ft_loss_attrs *a) {
    /* Whole epochs only: the public trainer reads int(state.epoch), and Hugging Face's epoch
     * is fractional within an epoch. */
    if (a->scheme == FT_SCHEME_PROGRESSIVE_EPOCH) return a->gamma + a->gamma_inc * floor(a->epoch);
    if (a->scheme != FT_SCHEME_PROGRESSIVE) return a->gamma;
    if (!(a->warmup_steps > 0)) return a->gamma_max; /* no warm-up: it is over */
    double t = a->step / a->warmup_steps;
    if (t >= 1) return a->gamma_max; /* exactly gamma_max, not gamma0 + (gamma_max - gamma0) */
    return a->gamma0 + (a->gamma_max - a->gamma0) * t;
}

/* The smoothed confidence of a scored row (D-PACE's asymmetric smoothing). */
static double smoothed(const ft_loss_attrs *a, double q) { return (1 - a->alpha) * q + a->alpha; }

void ft_loss_block_weights(const ft_loss_attrs *a, const double *q, const uint8_t *scored,
                           double *w) {
    const int64_t B = a->B;
    assert(B > 0);
    w[0] = 0;
    switch (a->scheme) {
    case FT_SCHEME_UNIFORM:
        for (int64_t k = 1; k < B; k++)
            w[k] = scored[k] ? 1.0 : 0.0;
        return;
    case FT_SCHEME_DECAY:
    case FT_SCHEME_PROGRESSIVE:
    case FT_SCHEME_PROGRESSIVE_EPOCH: {
        const double gamma = ft_loss_gamma(a);
        for (int64_t k = 1; k < B; k++)
            w[k] = scored[k] ? exp(-(double)(k - 1) / gamma) : 0.0;
        return;
    }
    case FT_SCHEME_DPACE:
    case FT_SCHEME_DPACE_CUM: {
        /* Forward: w[k] = P_k. Unscored rows have s = 1, so P carries through them. */
        double p = 1;
        for (int64_t k = 1; k < B; k++) {
            if (scored[k]) p *= smoothed(a, q[k]);
            w[k] = p;
        }
        if (a->scheme == FT_SCHEME_DPACE_CUM) {
            for (int64_t k = 1; k < B; k++)
                if (!scored[k]) w[k] = 0;
            return;
        }
        /* Backward: the suffix sum of mask_m * P_m. */
        double tail = 0;
        for (int64_t k = B - 1; k >= 1; k--) {
            if (scored[k]) {
                tail += w[k];
                w[k] = tail;
            } else {
                w[k] = 0;
            }
        }
        return;
    }
    case FT_SCHEME_DPACE_CONT: {
        /* The continuation value c_k = sum_{m>=k} mask_m * prod_{j=k+1..m} s_j, which is the
         * suffix sum over P_k, by its backward recursion c_k = mask_k + s_{k+1} * c_{k+1}: no
         * division, so a P_k that underflows to 0 (alpha = 0, q = 0) gives no 0/0. */
        double c = 0, s_next = 1;
        for (int64_t k = B - 1; k >= 1; k--) {
            c = (scored[k] ? 1.0 : 0.0) + s_next * c;
            w[k] = scored[k] ? c : 0.0;
            s_next = scored[k] ? smoothed(a, q[k]) : 1.0;
        }
        return;
    }
    case FT_SCHEME_COUNT:
    default:
        assert(!"ft_loss_block_weights: unknown scheme");
        for (int64_t k = 1; k < B; k++)
            w[k] = 0;
        return;
    }
}

double ft_loss_denominator(const ft_loss_attrs *a, int64_t M, const double *w,
                           const uint8_t *scored) {
    ft_loss_norm norm = a->norm;
    if (norm == FT_NORM_DEFAULT) {
        int dpace = a->scheme == FT_SCHEME_DPACE || a->scheme == FT_SCHEME_DPACE_CUM ||
                    a->scheme == FT_SCHEME_DPACE_CONT;
        norm = dpace ? FT_NORM_NUM_SEQS : FT_NORM_WEIGHT_SUM;
    }
    switch (norm) {
    case FT_NORM_WEIGHT_SUM: {
        double sum = 0;
        for (int64_t m = 0; m < M; m++)
            sum += w[m];
        return sum;
    }
    case FT_NORM_COUNT: {
        int64_t count = 0;
        for (int64_t m = 0; m < M; m++)
            count += (m % a->B != 0 && scored[m]) ? 1 : 0;
        return (double)count;
    }
    case FT_NORM_NUM_SEQS: return a->num_seqs;
    case FT_NORM_NONE: return 1.0;
    case FT_NORM_DEFAULT:
    case FT_NORM_COUNT_:
    default: assert(!"ft_loss_denominator: unknown norm"); return 0.0;
    }
}
