/* linear.h: the dense projection of a drafter layer (SPEC.md linear): its size-symbol and
 * tensor indices (the order of its description in linear_op.c) and the implementations that
 * description carries (CPU in linear_cpu.c, CUDA in linear_cuda.c: GEMMs only, no kernel source).
 */
#ifndef FT_KERNELS_LINEAR_H
#define FT_KERNELS_LINEAR_H

#include "op/op.h"

/* linear (LN_*) */
enum { LN_M, LN_N, LN_K };
enum { LN_X, LN_W, LN_Y, LN_DY, LN_DX, LN_DW };

extern const ft_op ft_op_linear;
extern const struct ft_cpu_impl ft_cpu_linear;
extern const struct ft_cuda_op ft_cuda_linear;

#endif
