/* ref.h: the float64 reference of every drafter op (SPEC.md), the oracle for every backend.
 *
 * Every function here takes and produces double arrays (index tensors keep their integer
 * types), accumulates in double, and is written to be obviously right rather than fast: one
 * loop nest per formula of SPEC.md. Arrays are dense and row-major, last index fastest; the
 * comment after each pointer gives its shape. Outputs are fully overwritten (no accumulation
 * into caller memory). The functions cannot fail: shapes and index ranges are validated by the
 * op layer (kernels/op_*.c) before they are called, so they only assert on programming errors.
 *
 * Backward functions recompute whatever forward state they need from the inputs.
 */
#ifndef FLARETUNE_REF_H
#define FLARETUNE_REF_H

#include <stdint.h>

#include "op/op.h" /* ft_loss_attrs */

#ifdef __cplusplus
extern "C" {
#endif

/* ---- fusion.dflare: adaptive layer fusion ------------------------------------------------ */

/* The target layer draft layer i starts on in SPEC's reference initialisation of w:
 * min(T-1, floor(i*T/D)) in integer arithmetic (never int(i/D*T) in floating point, which is one
 * less for some D, T <= 64, e.g. D = T = 22, i = 15). */
int64_t ft_ref_fusion_dflare_init_col(int64_t i, int64_t T, int64_t D);

void ft_ref_fusion_dflare_fwd(int64_t N, int64_t T, int64_t H, int64_t D, double eps,
                              const double *x, /* [N,T,H] */
                              const double *w, /* [D,T]   */
                              const double *g, /* [H]     */
                              double *f);      /* [D,N,H] */

void ft_ref_fusion_dflare_bwd(int64_t N, int64_t T, int64_t H, int64_t D, double eps,
                              const double *x,  /* [N,T,H] */
                              const double *w,  /* [D,T]   */
                              const double *g,  /* [H]     */
                              const double *df, /* [D,N,H] */
                              double *dx,       /* [N,T,H] */
                              double *dw,       /* [D,T]   */
                              double *dg);      /* [H]     */

/* ---- fusion.dflash: FC fusion ----------------------------------------------------------- */

void ft_ref_fusion_dflash_fwd(int64_t N, int64_t T, int64_t H, double eps,
                              const double *x,    /* [N,T,H]   */
                              const double *w_fc, /* [H,T*H]   */
                              const double *g,    /* [H]       */
                              double *f);         /* [N,H]     */

void ft_ref_fusion_dflash_bwd(int64_t N, int64_t T, int64_t H, double eps,
                              const double *x,    /* [N,T,H]   */
                              const double *w_fc, /* [H,T*H]   */
                              const double *g,    /* [H]       */
                              const double *df,   /* [N,H]     */
                              double *dx,         /* [N,T,H]   */
                              double *dw_fc,      /* [H,T*H]   */
                              double *dg);        /* [H]       */

/* ---- attention.kvproj: context K/V projection (Dc = 1 shared, or Dc = D per layer) -------
 * RoPE turns pair m by pos * inv_freq[m] and scales by mscale (ft_rope_freqs makes both from a
 * call's rope attributes; plain RoPE is inv_freq[m] = theta^(-2m/dh), mscale = 1). */

void ft_ref_kvproj_fwd(int64_t Dc, int64_t D, int64_t N, int64_t H, int64_t Hkv, int64_t dh,
                       double eps, const double *inv_freq, /* [dh/2]         */
                       double mscale, const double *c,     /* [Dc,N,H]       */
                       const double *w_k,                  /* [D,Hkv*dh,H]   */
                       const double *w_v,                  /* [D,Hkv*dh,H]   */
                       const double *gk,                   /* [D,dh]         */
                       const int32_t *pos,                 /* [N]            */
                       double *k,                          /* [D,N,Hkv,dh]   */
                       double *v);                         /* [D,N,Hkv,dh]   */

/* Its backward, given dk, dv: dc (for Dc = 1 summed over the D layers), dw_k, dw_v, dgk, all
 * overwritten. The rotation is inv_freq[dh/2] and mscale (ft_rope_freqs: angle pos * inv_freq[m],
 * rope(x) = mscale (x cos + rotate_half(x) sin)); the norm and the projection are recomputed. */
void ft_ref_kvproj_bwd(int64_t Dc, int64_t D, int64_t N, int64_t H, int64_t Hkv, int64_t dh,
                       double eps, const double *inv_freq, double mscale,
                       const double *c,    /* [Dc,N,H]       */
                       const double *w_k,  /* [D,Hkv*dh,H]   */
                       const double *w_v,  /* [D,Hkv*dh,H]   */
                       const double *gk,   /* [D,dh]         */
                       const int32_t *pos, /* [N]            */
                       const double *dk,   /* [D,N,Hkv,dh]   */
                       const double *dv,   /* [D,N,Hkv,dh]   */
                       double *dc,         /* [Dc,N,H]       */
                       double *dw_k,       /* [D,Hkv*dh,H]   */
                       double *dw_v,       /* [D,Hkv*dh,H]   */
                       double *dgk);       /* [D,dh]         */

/* ---- attention.decode: block attention at inference -------------------------------------
 * Request r's context rows start at sum_{r' < r} ctx_lens[r'] in k_ctx / v_ctx. */

void ft_ref_attn_decode_fwd(int64_t R, int64_t B, int64_t Hq, int64_t Hkv, int64_t dh, double scale,
                            const double *q,         /* [R,B,Hq,dh]          */
                            const int32_t *ctx_lens, /* [R]                  */
                            const double *k_ctx,     /* [sum ctx_lens,Hkv,dh] */
                            const double *v_ctx,     /* [sum ctx_lens,Hkv,dh] */
                            const double *k_blk,     /* [R,B,Hkv,dh]         */
                            const double *v_blk,     /* [R,B,Hkv,dh]         */
                            double *o,               /* [R,B,Hq,dh]          */
                            double *lse);            /* [R,B,Hq]             */

/* ---- attention.train: block-sparse attention for drafter training ------------------------
 * A query of block j of sequence s sees context positions p < anchors[s,j] and the B rows of
 * its own block; keep[s,j] = 0 blocks see nothing (o = 0, lse = -INFINITY, zero gradients). */

void ft_ref_attn_train_fwd(int64_t nseq, int64_t S, int64_t NB, int64_t B, int64_t Hq, int64_t Hkv,
                           int64_t dh, double scale, const double *q, /* [nseq,NB,B,Hq,dh]  */
                           const double *k_ctx,                       /* [nseq,S,Hkv,dh]    */
                           const double *v_ctx,                       /* [nseq,S,Hkv,dh]    */
                           const double *k_blk,                       /* [nseq,NB,B,Hkv,dh] */
                           const double *v_blk,                       /* [nseq,NB,B,Hkv,dh] */
                           const int32_t *anchors,                    /* [nseq,NB]          */
                           const uint8_t *keep,                       /* [nseq,NB]          */
                           double *o,                                 /* [nseq,NB,B,Hq,dh]  */
                           double *lse);                              /* [nseq,NB,B,Hq]     */

/* Its backward: the forward's inputs, then dout (o's shape, SPEC's `do`) and the gradients,
 * each the shape of the input it is the gradient of. */
void ft_ref_attn_train_bwd(int64_t nseq, int64_t S, int64_t NB, int64_t B, int64_t Hq, int64_t Hkv,
                           int64_t dh, double scale, const double *q, const double *k_ctx,
                           const double *v_ctx, const double *k_blk, const double *v_blk,
                           const int32_t *anchors, const uint8_t *keep,
                           const double *dout,                         /* [nseq,NB,B,Hq,dh] */
                           double *dq, double *dk_ctx, double *dv_ctx, /* q, k_ctx, v_ctx   */
                           double *dk_blk, double *dv_blk);            /* k_blk, v_blk      */

/* ---- sliding-window attention (SPEC.md "Sliding window") ---------------------------------
 * The same ops with a window W over the context: a query at position i (decode: ctx_len + b;
 * train: anchors[s,j] + b) sees the context keys p with i - W < p, besides those it already
 * sees; the block's own B keys stay visible, all of them, or with causal = 1 those at offsets
 * 0..b. window = 0 is full attention (the functions above are these with window = 0 and
 * causal = 0). */

int64_t ft_ref_window_lo(int64_t window, int64_t qpos); /* first visible context position */

void ft_ref_attn_decode_fwd_win(int64_t R, int64_t B, int64_t Hq, int64_t Hkv, int64_t dh,
                                double scale, int64_t window, int causal, const double *q,
                                const int32_t *ctx_lens, const double *k_ctx, const double *v_ctx,
                                const double *k_blk, const double *v_blk, double *o, double *lse);

void ft_ref_attn_train_fwd_win(int64_t nseq, int64_t S, int64_t NB, int64_t B, int64_t Hq,
                               int64_t Hkv, int64_t dh, double scale, int64_t window, int causal,
                               const double *q, const double *k_ctx, const double *v_ctx,
                               const double *k_blk, const double *v_blk, const int32_t *anchors,
                               const uint8_t *keep, double *o, double *lse);

void ft_ref_attn_train_bwd_win(int64_t nseq, int64_t S, int64_t NB, int64_t B, int64_t Hq,
                               int64_t Hkv, int64_t dh, double scale, int64_t window, int causal,
                               const double *q, const double *k_ctx, const double *v_ctx,
                               const double *k_blk, const double *v_blk, const int32_t *anchors,
                               const uint8_t *keep, const double *dout, double *dq, double *dk_ctx,
                               double *dv_ctx, double *dk_blk, double *dv_blk);

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
