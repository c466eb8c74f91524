/* cuda_fp8.h under the SIMT emulator: fp8 is not emulated (see docs/kernel-dialect.md). */
#ifndef FT_EMU_STUB_CUDA_FP8_H
#define FT_EMU_STUB_CUDA_FP8_H
#error "fp8 is not emulated under FT_EMU: kernels use only what ft_cuda.h offers"
#endif
