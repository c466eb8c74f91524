/* nvtx.h: NVTX ranges of a tuning run, so Nsight Systems shows what flaretune was doing.
 *
 * Ranges live in one NVTX domain, "flaretune": the whole tuning run, each candidate, each sample
 * batch. A range is colored by its op (a stable hash of the op name into a small palette, so one
 * op keeps its color across runs) and carries a uint64 payload (the candidate id). Without a tool
 * attached the calls cost next to nothing; in a build without the CUDA toolkit they do nothing.
 * Ranges are per thread: pop on the thread that pushed.
 */
#ifndef FLARETUNE_NVTX_H
#define FLARETUNE_NVTX_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Open a range named `name` (copied by the tool) colored by `op` (NULL or "": neutral gray). */
void ft_nvtx_push(const char *name, const char *op, uint64_t payload);
/* Close the innermost range this thread opened. */
void ft_nvtx_pop(void);
/* The ARGB color of op's ranges (exposed for tests). */
uint32_t ft_nvtx_color(const char *op);

#ifdef __cplusplus
}
#endif
#endif
