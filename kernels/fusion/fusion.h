/* fusion.h: the fusion family's ops, in one place: their size-symbol and tensor indices (the
 * order of each op's description in fusion_op.c, the one place an op's interface is declared) and
 * the implementations its description carries (CPU in fusion_cpu.c, CUDA in fusion_cuda.c (kernels: fusion.cu)).
 */
#ifndef FT_KERNELS_FUSION_H
#define FT_KERNELS_FUSION_H

#include "op/op.h"

/* fusion.dflare (DL_*) and fusion.dflash (DH_*) */
enum { DL_N, DL_T, DL_H, DL_D };
enum { DL_X, DL_W, DL_G, DL_F, DL_DF, DL_DX, DL_DW, DL_DG };
enum { DH_N, DH_T, DH_H, DH_TH };
enum { DH_X, DH_WFC, DH_G, DH_F, DH_DF, DH_DX, DH_DWFC, DH_DG };

extern const ft_op ft_op_fusion_dflare, ft_op_fusion_dflash;
extern const struct ft_cpu_impl ft_cpu_fusion_dflare, ft_cpu_fusion_dflash;
extern const struct ft_cuda_op ft_cuda_fusion_dflare, ft_cuda_fusion_dflash;

#endif
