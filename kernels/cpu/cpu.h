/* cpu.h: what the CPU kernels share (internal to kernels/cpu/).
 *
 * Each op file kernels/cpu/<op>.c defines one ft_cpu_impl: its parameter space (declared once,
 * next to the code it steers) and a run function. The backend (cpu_backend.c) validates the
 * configuration and provides the workspace before calling run, so run may assume:
 *   - cfg is valid for c (every value a candidate, the space's constraint holds);
 *   - c->ws is non-NULL; every byte of scratch comes from it (ft_ws_get once per call);
 *   - every output that takes part is allocated (and must be fully overwritten);
 *   - float tensors are FT_F32.
 * Threads: parallel regions use exactly the config's thread count (num_threads clause). BLAS
 * calls outside a parallel region use ft_cpu_blas_threads(threads) first. For BLAS calls inside
 * one, call ft_cpu_blas_threads(1) before the region: Debian's OpenBLAS 0.3.21 (OpenMP build)
 * was measured to serialise concurrent calls from several threads otherwise. Results must be
 * deterministic for a fixed config and thread count: reductions combine partial sums in a fixed
 * order.
 */
#ifndef FT_KERNELS_CPU_H
#define FT_KERNELS_CPU_H

#include "op/backend.h"
#include "op/op.h"
#include "op/space.h"
#include "core/workspace.h"

/* An op's CPU implementation, carried by its description (ft_op.cpu). */
typedef struct ft_cpu_impl {
    ft_space *space;
    ft_status (*run)(ft_call *c, const ft_config *cfg, ft_err *err);
} ft_cpu_impl;

/* Threads OpenBLAS uses for calls made outside a parallel region. */
void ft_cpu_blas_threads(int n);

#endif
