/* cuda_awbarrier.h under the SIMT emulator: the arrive-wait barrier (mbarrier) is not emulated (see
 * docs/kernel-dialect.md). */
#ifndef FT_EMU_STUB_CUDA_AWBARRIER_H
#define FT_EMU_STUB_CUDA_AWBARRIER_H
#error                                                                                             \
    "the arrive-wait barrier (mbarrier) is not emulated under FT_EMU: kernels use only what ft_cuda.h offers"
#endif
