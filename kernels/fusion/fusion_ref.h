/* fusion_ref.h: the float64 reference of the fusion ops (SPEC.md), the oracle every backend is
 * checked against; the contract all reference functions keep is op.h's, at ft_op.reference.
 */
#ifndef FT_KERNELS_FUSION_REF_H
#define FT_KERNELS_FUSION_REF_H

#include <stdint.h>

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
                              double *dx,       /* [N,T,H], or NULL: not wanted */
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
                              double *dx,         /* [N,T,H], or NULL: not wanted */
                              double *dw_fc,      /* [H,T*H]   */
                              double *dg);        /* [H]       */

#ifdef __cplusplus
}
#endif
#endif
