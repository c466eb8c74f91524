/* loss_ref.h: the float64 reference of the loss op and its weights (SPEC.md), the oracle every
 * backend is checked against; the contract all reference functions keep is op.h's, at
 * ft_op.reference.
 */
#ifndef FT_KERNELS_LOSS_REF_H
#define FT_KERNELS_LOSS_REF_H

#include <stdint.h>

#include "op/op.h" /* ft_loss_attrs */

#ifdef __cplusplus
extern "C" {
#endif

/* ---- loss: LM head + weighted cross entropy, forward and backward in one pass ------------ */

/* The effective gamma of the decay / progressive schemes (progressive: gamma0 + (gamma_max -
 * gamma0) * min(1, step / warmup_steps), with warmup_steps <= 0 meaning warm-up is over;
 * progressive_epoch: gamma + gamma_inc * floor(epoch), no cap). */
double ft_loss_gamma(const ft_loss_attrs *a);

/* The per-row weights of one block (SPEC.md weight table), shared by every backend so the
 * scheme is defined in one place. q[k] is the draft probability of row k's target token (only
 * read where scored), scored[k] = mask[k] && k > 0. Writes w[0..B-1] (w[0] = 0). */
void ft_loss_block_weights(const ft_loss_attrs *a, const double *q, const uint8_t *scored,
                           double *w);

/* The loss denominator for the whole batch given the weights and the scored flags. */
double ft_loss_denominator(const ft_loss_attrs *a, int64_t M, const double *w,
                           const uint8_t *scored);

/* labels[m] must lie in [0, V) where row m is scored; unscored rows may hold anything (such as
 * -100) and are never read. dw_lm may be NULL unless a->want_dw. */
void ft_ref_loss(int64_t M, int64_t H, int64_t V, const ft_loss_attrs *a,
                 const double *h,       /* [M,H]  */
                 const double *w_lm,    /* [V,H]  */
                 const int32_t *labels, /* [M]    */
                 const uint8_t *mask,   /* [M]    */
                 double *loss,          /* scalar */
                 double *ce,            /* [M]    */
                 double *q,             /* [M]    */
                 double *w,             /* [M]    weights before division by the denominator */
                 double *dh,            /* [M,H]  */
                 double *dw_lm);        /* [V,H]  or NULL */

/* The loss with the drafter's final RMSNorm fused in front of the LM head (final_norm = 1):
 * hn = h / sqrt(mean(h^2) + eps) * g_norm, then ft_ref_loss on hn (dw_lm uses hn); dh is the
 * gradient of the un-normed h through the norm and dg [H] that of the gain. */
void ft_ref_loss_normed(int64_t M, int64_t H, int64_t V, const ft_loss_attrs *a, double eps,
                        const double *h,      /* [M,H] un-normed */
                        const double *g_norm, /* [H]   */
                        const double *w_lm, const int32_t *labels, const uint8_t *mask,
                        double *loss, double *ce, double *q, double *w, double *dh, double *dg,
                        double *dw_lm);

#ifdef __cplusplus
}
#endif
#endif
