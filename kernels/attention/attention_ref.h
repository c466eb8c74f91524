/* attention_ref.h: the float64 reference of the attention ops (SPEC.md), the oracle every backend
 * is checked against; the contract all reference functions keep is op.h's, at ft_op.reference.
 */
#ifndef FT_KERNELS_ATTENTION_REF_H
#define FT_KERNELS_ATTENTION_REF_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

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

#ifdef __cplusplus
}
#endif
#endif
