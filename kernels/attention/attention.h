/* attention.h: the attention family's ops, in one place: their size-symbol and tensor indices (the
 * order of each op's description in attention_op.c, the one place an op's interface is declared)
 * and the implementations its description carries (CPU in kvproj_cpu.c, decode_cpu.c and
 * train_cpu.c, CUDA in attention_cuda.c and train_cuda.c (kernels: kvproj.cu, attention_decode.cu,
 * attention_train.cu)), and RoPE's frequencies (rope.c).
 */
#ifndef FT_KERNELS_ATTENTION_H
#define FT_KERNELS_ATTENTION_H

#include "op/op.h"

/* attention.kvproj (KP_*), attention.decode (DC_*), attention.train (TR_*) */
enum { KP_DC, KP_D, KP_N, KP_H, KP_KVD, KP_HKV, KP_DH };
/* KP_DCTX is the gradient of c (KP_DC is its leading size, Dc). */
enum {
    KP_C,
    KP_WK,
    KP_WV,
    KP_GK,
    KP_POS,
    KP_K,
    KP_V,
    KP_DK,
    KP_DV,
    KP_DCTX,
    KP_DWK,
    KP_DWV,
    KP_DGK
};
enum { DC_R, DC_B, DC_HQ, DC_HKV, DC_DH, DC_LSUM };
enum { DC_Q, DC_LENS, DC_KCTX, DC_VCTX, DC_KBLK, DC_VBLK, DC_O, DC_LSE };
enum { TR_NSEQ, TR_S, TR_NB, TR_B, TR_HQ, TR_HKV, TR_DH };
enum {
    TR_Q,
    TR_KCTX,
    TR_VCTX,
    TR_KBLK,
    TR_VBLK,
    TR_ANCH,
    TR_KEEP,
    TR_O,
    TR_LSE,
    TR_DO,
    TR_DQ,
    TR_DKCTX,
    TR_DVCTX,
    TR_DKBLK,
    TR_DVBLK
};

/* RoPE's frequencies for head dim dh (rope.c, SPEC.md attention.kvproj): inv_freq[m] for
 * m < dh/2 and the factor on cos and sin, from rope_theta and the rope scaling attributes:
 * angle = pos * inv_freq[m], rope(x) = mscale * (x cos + rotate_half(x) sin). Every RoPE of the
 * family (reference, CPU, CUDA) rotates with these. */
void ft_rope_freqs(const ft_attrs *a, int64_t dh, double *inv_freq /* dh/2 */, double *mscale);
/* The relations between rope attributes that no single one can check when it is set (llama3:
 * high_freq_factor > low_freq_factor; yarn: beta_fast > beta_slow, theta > 1); one line naming
 * `op` on failure. */
ft_status ft_rope_check(const char *op, const ft_attrs *a, ft_err *err);

extern const ft_op ft_op_attention_kvproj, ft_op_attention_decode, ft_op_attention_train;
extern const struct ft_cpu_impl ft_cpu_attention_kvproj, ft_cpu_attention_decode, ft_cpu_attention_train;
extern const struct ft_cuda_op ft_cuda_attention_kvproj, ft_cuda_attention_decode, ft_cuda_attention_train;

/* rope.c: the rotation frequencies of RoPE for head dim dh under the call's attributes:
 * inv_freq[m] for m < dh/2 (angle = pos * inv_freq[m]) and the magnitude scale *mscale
 * (rope(x) = mscale * (x cos + rotate_half(x) sin)). Every kvproj backward takes them from here. */
void ft_rope_freqs(const ft_attrs *a, int64_t dh, double *inv_freq, double *mscale);

#endif
