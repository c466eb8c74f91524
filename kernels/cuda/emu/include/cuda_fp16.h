/* cuda_fp16.h under the SIMT emulator: fp16 (__half) is not emulated (see docs/kernel-dialect.md).
 */
#ifndef FT_EMU_STUB_CUDA_FP16_H
#define FT_EMU_STUB_CUDA_FP16_H
#error "fp16 (__half) is not emulated under FT_EMU: kernels use only what ft_cuda.h offers"
#endif
