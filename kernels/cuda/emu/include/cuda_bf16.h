/* cuda_bf16.h under the SIMT emulator: the bf16 subset of the dialect (see ft_cuda.h). */
#ifndef FT_EMU_STUB_CUDA_BF16_H
#define FT_EMU_STUB_CUDA_BF16_H
#include "../ft_emu.h"
#endif
