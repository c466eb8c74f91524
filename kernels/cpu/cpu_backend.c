/* cpu_backend.c: the `cpu` backend: tunable float32 kernels for every op, threaded with OpenMP,
 * GEMMs through OpenBLAS. The op files hold the kernels; this file routes calls to them. */
#include <cblas.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "core/env.h"
#include "cpu.h"

/* The op's CPU implementation, its thread counts resolved for the CPUs this process may use
 * (once, whatever thread asks first: ft_space_resolve is idempotent and serialised). */
static const ft_cpu_impl *find(const ft_op *op) {
    const ft_cpu_impl *impl = op ? op->cpu : NULL;
    if (impl) ft_space_resolve(impl->space, ft_env_usable_cpus());
    return impl;
}

void ft_cpu_blas_threads(int n) { openblas_set_num_threads(n); }

static int cpu_available(char *why, size_t n) {
    (void)why;
    (void)n;
    return 1;
}

static int cpu_supports(const ft_op *op) { return find(op) != NULL; }

static const ft_space *cpu_space(const ft_op *op) {
    const ft_cpu_impl *impl = find(op);
    return impl ? impl->space : NULL;
}

static ft_status cpu_run(ft_call *c, const ft_config *cfg, ft_err *err) {
    const ft_cpu_impl *impl = find(c->op);
    if (!impl) return ft_err_set(err, FT_EUNSUPPORTED, "cpu backend does not implement %s", c->op->name);
    if (ft_backend_check_attrs(&ft_backend_cpu, &c->attrs, err)) return FT_EUNSUPPORTED;
    ft_config def;
    if (!cfg) {
        ft_config_default(impl->space, &def);
        cfg = &def;
    }
    char why[256];
    if (!ft_space_runnable(impl->space, c, cfg, why, sizeof why))
        return ft_err_set(err, FT_EINVAL, "%s on cpu: config not valid here: %s", c->op->name, why);
    ft_workspace local = {0};
    ft_workspace *saved = c->ws;
    if (!c->ws) c->ws = &local;
    c->overdue = c->spoiled = 0;
    ft_status s = impl->run(c, cfg, err);
    c->ws = saved;
    ft_ws_free(&local);
    if (!s && c->overdue)
        s = ft_err_set(err, FT_ETIMEDOUT, "%s on cpu: stopped (%s)", c->op->name,
                       c->spoiled ? "its thread lost over half the call to other work"
                                  : "past its time limit");
    return s;
}

const ft_backend ft_backend_cpu = {
    .name = "cpu",
    .summary = "float32 kernels tuned for this CPU: OpenMP threads, OpenBLAS GEMMs",
    .built = 1,
    FT_BACKEND_HOOKS(cpu),
};
