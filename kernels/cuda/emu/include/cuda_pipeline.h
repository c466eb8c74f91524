/* cuda_pipeline.h under the SIMT emulator: the __pipeline_* primitives (use ft_cp_async_* of
 * ft_cuda.h) is not emulated (see docs/kernel-dialect.md). */
#ifndef FT_EMU_STUB_CUDA_PIPELINE_H
#define FT_EMU_STUB_CUDA_PIPELINE_H
#error                                                                                             \
    "the __pipeline_* primitives (use ft_cp_async_* of ft_cuda.h) is not emulated under FT_EMU: kernels use only what ft_cuda.h offers"
#endif
