/* context.h: what a CUDA context holds (internal to kernels/cuda/): the device, its scratch, the
 * cuBLASLt state, the timer. cuda_backend.c opens and closes contexts; context.c answers what
 * every other file of the platform may ask of one (runtime.h), so gemm.c and the ops never
 * depend on the backend that runs them.
 */
#ifndef FT_KERNELS_CUDA_CONTEXT_H
#define FT_KERNELS_CUDA_CONTEXT_H

#include "runtime.h"
#if FT_HAVE_CUDA
#include "timer.h"
#endif

struct ft_cuda_ctx {
    int emulated;
    ft_dev *dev;
    char fingerprint[256];
    char details[256];
    struct {
        void *p;
        size_t bytes;
    } scratch[FT_CUDA_SCRATCH_SLOTS];
    ft_gemm_state *gemm;
    struct ft_cuda_table *tables; /* ft_cuda_table's, newest first, freed with the context */
#if FT_HAVE_CUDA
    ft_timer *timer;
    /* CUPTI's clock against the wall clock, for kernel spans in traces. */
    double wall_minus_cupti_s;
#endif
    char clock[16];
    int cold;       /* flush L2 before every timed call */
    void *l2_flush; /* 2 x L2 bytes, written to evict it */
    /* The threads compiling ahead for this device (prefetch.h), made by the backend's
     * prefetch with pool_jobs threads; freed before the device closes. */
    struct ft_cuda_pool *pool;
    int pool_jobs;
};

#endif
