/* mma.h under the SIMT emulator: WMMA (nvcuda::wmma; use ft_mma_m16n8k16_bf16 of ft_cuda.h) is not
 * emulated (see docs/kernel-dialect.md). */
#ifndef FT_EMU_STUB_MMA_H
#define FT_EMU_STUB_MMA_H
#error                                                                                             \
    "WMMA (nvcuda::wmma; use ft_mma_m16n8k16_bf16 of ft_cuda.h) is not emulated under FT_EMU: kernels use only what ft_cuda.h offers"
#endif
