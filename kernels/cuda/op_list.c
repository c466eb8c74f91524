/* op_list.c: the ops the CUDA backend implements (each defined in kernels/FAMILY/OP_cuda.c). */
#include <string.h>

#include "cuda_backend.h"

extern const ft_cuda_op ft_cuda_op_fusion_dflare, ft_cuda_op_fusion_dflash;
extern const ft_cuda_op ft_cuda_op_attention_decode, ft_cuda_op_attention_kvproj;
extern const ft_cuda_op ft_cuda_op_loss;
extern const ft_cuda_op ft_cuda_op_attention_train;

const ft_cuda_op *const ft_cuda_ops[] = {
    &ft_cuda_op_fusion_dflare,
    &ft_cuda_op_fusion_dflash,
    &ft_cuda_op_attention_decode,
    &ft_cuda_op_attention_kvproj,
    &ft_cuda_op_loss,
    &ft_cuda_op_attention_train,
    NULL,
};

const ft_cuda_op *ft_cuda_op_find(const char *name) {
    for (int i = 0; ft_cuda_ops[i]; i++)
        if (strcmp(ft_cuda_ops[i]->name, name) == 0) return ft_cuda_ops[i];
    return NULL;
}
