/* loss.h: the loss family's ops, in one place: their size-symbol and tensor indices (the
 * order of each op's description in loss_op.c, the one place an op's interface is declared) and
 * the implementations its description carries (CPU in loss_cpu.c, CUDA in loss_cuda.c (kernels: loss.cu)).
 */
#ifndef FT_KERNELS_LOSS_H
#define FT_KERNELS_LOSS_H

#include "op/op.h"

/* loss (LS_*) */
enum { LS_M, LS_H, LS_V };
enum {
    LS_HID,
    LS_WLM,
    LS_LABELS,
    LS_MASK,
    LS_LOSS,
    LS_CE,
    LS_Q,
    LS_W,
    LS_DH,
    LS_DWLM,
    LS_GNORM, /* final_norm = 1 only (appended: the earlier indices keep their meaning) */
    LS_DG
};


extern const ft_op ft_op_loss;
extern const struct ft_cpu_impl ft_cpu_loss;
extern const struct ft_cuda_op ft_cuda_loss;

#endif
