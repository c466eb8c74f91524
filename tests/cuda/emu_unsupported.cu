/* emu_unsupported.cu: what the emulator refuses at compile time (tests/test_emu.c compiles it with
 * USE=1..6 and expects each to fail with a clear first error line). Not compiled for the GPU. */
#include "ft_cuda.h"

#if USE == 3
#include <cooperative_groups.h>
#elif USE == 4
#include <cuda/barrier>
#elif USE == 5
#include <mma.h>
#endif

#if USE == 2
extern "C" __global__ void __cluster_dims__(2, 1, 1) kernel(float *y) {
#else
extern "C" __global__ void kernel(float *y) {
#endif
#if USE == 1
    asm volatile("trap;");
#elif USE == 6
    y[threadIdx.x] = undeclared_variable;
#endif
    y[threadIdx.x] = 0.0f;
}
FT_KERNEL_EXPORT(kernel)
