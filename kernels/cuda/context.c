/* context.c: a CUDA context's accessors (see context.h and runtime.h). */
#include "context.h"

ft_dev *ft_cuda_dev(ft_cuda_ctx *x) { return x->dev; }
int ft_cuda_emulated(const ft_cuda_ctx *x) { return x->emulated; }
ft_gemm_state **ft_cuda_gemm_slot(ft_cuda_ctx *x) { return &x->gemm; }

size_t ft_dt_size(ft_dt dt) { return dt == FT_DT_BF16 ? 2 : 4; }

ft_dt ft_cuda_call_dt(const ft_call *c) { return c->attrs.dtype ? FT_DT_BF16 : FT_DT_F32; }

const ft_cuda_op *ft_cuda_op_of(const ft_op *op) { return op ? op->cuda : NULL; }
