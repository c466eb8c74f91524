/* cpu.h: what the CPU kernels share (internal to kernels/cpu/).
 *
 * Each op's kernels/FAMILY/NAME_cpu.c defines one ft_cpu_impl (FT_CPU_IMPL): its parameter space
 * (declared once, next to the code it steers) and a run function. The backend (cpu_backend.c)
 * validates the configuration and provides the workspace before calling run, so run may assume:
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

/* An op's CPU implementation, ft_cpu_NAME, from the tables and functions its file names after
 * the prefix P: the space of the parameter table P_params with its constraint lines
 * P_constraints and its check P_valid, run by P_run. */
#define FT_CPU_IMPL(NAME, P)                                                                       \
    static ft_space P##_space = {P##_params, (int)(sizeof P##_params / sizeof P##_params[0]),      \
                                 P##_constraints, P##_valid};                                      \
    const ft_cpu_impl ft_cpu_##NAME = {&P##_space, P##_run}

/* Threads OpenBLAS uses for calls made outside a parallel region. */
void ft_cpu_blas_threads(int n);

#endif
