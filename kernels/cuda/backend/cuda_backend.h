/* cuda_backend.h: what the `cuda` and `cuda-emu` backends give the op code (cuda_backend.c):
 * the context of each, module specs built from an op's tunables and rules, modules compiled
 * or found in the caches, typed kernel launches, device scratch and tables. The types they
 * take are the runtime's (kernels/cuda/runtime.h). The backends' tables themselves,
 * ft_backend_cuda and ft_backend_cuda_emu, are declared in op/backend.h; the compile pool is
 * prefetch.h.
 */
#ifndef FT_CUDA_BACKEND_H
#define FT_CUDA_BACKEND_H

#include <stddef.h>

#include "cuda/runtime.h"

/* The context of the `cuda` (emulated = 0) or `cuda-emu` (emulated = 1) backend, opened on first
 * use and kept for the process (closed at exit). Fails with FT_ENODEV and one line when there is
 * no GPU (or no toolkit in this build) for `cuda`. */
ft_status ft_cuda_ctx_get(int emulated, ft_cuda_ctx **out, ft_err *err);

/* The most dynamic shared memory a block may ask for (the per-block opt-in limit of Hopper and
 * Blackwell): the ops' validity rules hold each kernel a config launches to it. */
#define FT_CUDA_MAX_SMEM (227 * 1024)

/* Append a define ("NAME=VALUE", printf-style) / a kernel to a spec. */
void ft_cuda_spec_define(ft_cuda_module_spec *s, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
void ft_cuda_spec_kernel(ft_cuda_module_spec *s, const char *name, int block_threads,
                         size_t dyn_smem);

/* ---- tunables: one table per op ------------------------------------------------------------ */

/* An op's tunables are one X-macro list, a row per parameter in the order of its space:
 *
 *     #define OP_PARAMS(X)                                                                  \
 *         X(OP_P_CPT, "cpt", "FT_CPT", NULL, 1, "help text", 1, 2, 4)                       \
 *         ...
 *
 *   X(index, name, macro, labels, default, help, values...)
 *
 * index names the enum constant of the parameter (enum { OP_PARAMS(FT_CUDA_PARAM_INDEX) }),
 * name, labels (NULL or the names of values 0..n-1), default, help and the values make its
 * ft_param (op/space.h's FT_PARAM; static ft_param op_params[] = {
 * OP_PARAMS(FT_CUDA_PARAM_ENTRY) }), and macro is the -D macro its value is compiled in with
 * (NULL: the host alone reads it; static const char *const op_macros[] = {
 * OP_PARAMS(FT_CUDA_PARAM_MACRO) }, emitted by ft_cuda_spec_params). */
#define FT_CUDA_PARAM_INDEX(index, name, macro, labels, def, help, ...) index,
#define FT_CUDA_PARAM_ENTRY(index, name, macro, labels, def, help, ...)                            \
    [index] = FT_PARAM(name, help, labels, def, __VA_ARGS__),
#define FT_CUDA_PARAM_MACRO(index, name, macro, labels, def, help, ...) [index] = macro,

/* Append "MACRO=value" for each of the n parameters of cfg that names a macro (in order). */
void ft_cuda_spec_params(ft_cuda_module_spec *s, const char *const *macros, int n,
                         const ft_config *cfg);

/* An op's validity rules are an X-macro list too, a row per rule in the order they are checked
 * and shown (`flaretune space`): X(check, "the rule in one line"). FT_CUDA_RULE_TEXT makes the
 * space's constraint lines (static const char *const op_constraints[] = { OP_RULES(
 * FT_CUDA_RULE_TEXT) NULL }), FT_CUDA_RULE_CHECK the checks its valid function runs in turn: each
 * returns FT_CONFIG_VALID, FT_CONFIG_DUPLICATE (why said, if no later rule rules it out) or
 * FT_CONFIG_INVALID (why said). */
#define FT_CUDA_RULE_TEXT(check, text)  text,
#define FT_CUDA_RULE_CHECK(check, text) check,
typedef int (*ft_cuda_check)(const void *ctx, char *why, size_t n);
/* Both tables of an op of prefix P from its rule list RULES: P_constraints and P_checks
 * (FT_CUDA_RULES(op, OP_RULES);), and the call of ft_cuda_rules_check that runs P_checks. */
#define FT_CUDA_RULES(P, RULES)                                                                    \
    static const char *const P##_constraints[] = {RULES(FT_CUDA_RULE_TEXT) NULL};                  \
    static const ft_cuda_check P##_checks[] = {RULES(FT_CUDA_RULE_CHECK)}
#define FT_CUDA_RULES_CHECK(P, ctx, why, n)                                                        \
    ft_cuda_rules_check(P##_checks, sizeof P##_checks / sizeof P##_checks[0], ctx, why, n)

/* Run n checks in order on what the op's valid function gathered (ctx; a NULL check is a rule
 * the host cannot check): the first FT_CONFIG_INVALID, else FT_CONFIG_DUPLICATE if any said so,
 * else FT_CONFIG_VALID. */
int ft_cuda_rules_check(const ft_cuda_check *checks, size_t nchecks, const void *ctx, char *why,
                        size_t n);

/* Compile (or find in the caches) the module of a spec. */
ft_status ft_cuda_module(ft_cuda_ctx *x, const ft_cuda_module_spec *s, ft_dev_module **out,
                         ft_err *err);

/* Launch a kernel on the context's device (grid, block, dynamic shared memory, argument
 * pointers as cuLaunchKernel takes them). Errors name the kernel and the launch shape. */
ft_status ft_cuda_launch(ft_cuda_ctx *x, ft_dev_module *m, const char *kernel, ft_dim3 grid,
                         ft_dim3 block, size_t smem, void **args, ft_err *err);

/* A kernel's typed launcher, one per `extern "C" __global__` kernel of a .cu source, written
 * beside the op code that launches it:
 *
 *     FT_CUDA_KERNEL(dflare_bwd_reduce, (const float *dgp, int P, ..., int D), (&dgp, &P, ..., &D))
 *
 * defines `static ft_status launch_dflare_bwd_reduce(ft_cuda_ctx *x, ft_dev_module *m,
 * ft_dim3 grid, ft_dim3 block, size_t smem, const float *dgp, int P, ..., int D, ft_err *err)`:
 * the parameters are the kernel's, in its order, with a storage-type pointer (st_t *) as
 * void *. A call with the wrong arguments then fails to compile, and the kernel's name is
 * written once. The second list takes the address of each parameter, in the same order;
 * tests/test_compile.py checks both lists against the kernel's signature in the .cu file. */
#define FT_CUDA_UNPAREN(...) __VA_ARGS__
#define FT_CUDA_KERNEL(name, params, addrs)                                                        \
    static ft_status launch_##name(                                                                \
        ft_cuda_ctx *launch_x_, ft_dev_module *launch_m_, ft_dim3 launch_grid_,                    \
        ft_dim3 launch_block_, size_t launch_smem_, FT_CUDA_UNPAREN params, ft_err *launch_err_) { \
        void *launch_args_[] = {FT_CUDA_UNPAREN addrs};                                            \
        return ft_cuda_launch(launch_x_, launch_m_, #name, launch_grid_, launch_block_,            \
                              launch_smem_, launch_args_, launch_err_);                            \
    }
/* The name of a kernel that has a launcher (for module specs), checked at compile time. */
#define FT_CUDA_KERNEL_NAME(name) ((void)sizeof(&launch_##name), #name)

/* Device scratch: buffer `slot` (0..FT_CUDA_SCRATCH_SLOTS-1) of at least `bytes`, kept by the
 * context and reused by later calls (contents undefined; NaN-poisoned under the emulator). The
 * high-water mark of all slots is the op's peak extra device memory. */
ft_status ft_cuda_scratch(ft_cuda_ctx *x, int slot, size_t bytes, void **p, ft_err *err);

/* A small read-only table the host computed (RoPE's frequencies), on the device: *p holds the
 * `bytes` of `host`. Tables are kept by content for the context's life, so a call that runs
 * again, timed or captured in a graph, finds its table and copies nothing (a copy from the host
 * waits for the stream). For tables of a few KiB that take few distinct values per process. */
ft_status ft_cuda_table(ft_cuda_ctx *x, const void *host, size_t bytes, const void **p,
                        ft_err *err);

#endif
