/* backend.c: what every backend shares (timing with the backend's clock, the device it keys its
 * results by, its dtypes and timer preference) and the float64 reference backend. The list of
 * backends is kernels/registry.c. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "op/backend.h"
#include "core/clock.h"
#include "core/env.h"

/* ---- ref: the float64 reference, the oracle every other backend is checked against -------- */

static int ref_available(char *why, size_t n) {
    (void)why;
    (void)n;
    return 1;
}

static int ref_supports(const ft_op *op) { return op != NULL; }

static ft_space ref_space = {NULL, 0, NULL, NULL};

static const ft_space *ref_space_of(const ft_op *op) { return op ? &ref_space : NULL; }

static ft_status ref_run(ft_call *c, const ft_config *cfg, ft_err *err) {
    if (cfg && cfg->n)
        return ft_err_set(err, FT_EINVAL, "the ref backend has no tunable parameters");
    return ft_call_reference(c, err);
}

const ft_backend ft_backend_ref = {
    .name = "ref",
    .summary = "float64 reference, single-threaded: the oracle every backend is verified against",
    .built = 1,
    .dtypes = 3, /* the oracle: computes in float64 whatever the storage */
    .available = ref_available,
    .supports = ref_supports,
    .space = ref_space_of,
    .run = ref_run,
};

/* ---- timing -------------------------------------------------------------------------------- */

ft_status ft_backend_time(const ft_backend *b, ft_call *c, const ft_config *cfg, int reps,
                          double *secs, ft_err *err) {
    if (b->timed) return b->timed(c, cfg, reps, secs, err);
    double t0 = ft_now_s();
    for (int r = 0; r < reps; r++) {
        ft_status s = b->run(c, cfg, err);
        if (s) return s;
        if (ft_call_overdue(c))
            return ft_err_set(err, FT_ETIMEDOUT, "%s: stopped after %.3g s (%s)", c->op->name,
                              ft_now_s() - t0,
                              c->spoiled ? "its thread lost over half of it to other work"
                                         : "past its time limit");
    }
    *secs = ft_now_s() - t0;
    return FT_OK;
}

char *ft_backend_device(const ft_backend *b, const ft_env *env, char *buf, size_t n) {
    if (b && b->device) {
        snprintf(buf, n, "%s", b->device());
        return buf;
    }
    return ft_env_device(env, b ? b->name : "cpu", buf, n);
}

ft_status ft_backend_check_attrs(const ft_backend *b, const ft_attrs *a, ft_err *err) {
    unsigned have = b->dtypes ? b->dtypes : 1u;
    if (a->dtype < 0 || a->dtype > 1 || !(have >> a->dtype & 1u))
        return ft_err_set(err, FT_EUNSUPPORTED,
                          "the %s backend does not store dtype=%s (a CUDA backend does; "
                          "cuda-emu runs its code on the CPU)",
                          b->name, ft_dtype_attr_names[a->dtype == 1 ? 1 : 0]);
    return FT_OK;
}

static const char *timer_pref;

ft_status ft_backend_prefer_timer(const char *name, ft_err *err) {
    static const char *const names[] = {"auto", "cupti", "events"};
    for (int i = 0; i < 3; i++)
        if (name && strcmp(name, names[i]) == 0) {
            timer_pref = names[i];
            return FT_OK;
        }
    return ft_err_set(err, FT_EINVAL, "unknown timer '%s' (auto, cupti or events)",
                      name ? name : "");
}

const char *ft_backend_timer_preference(void) {
    if (timer_pref) return timer_pref;
    const char *v = getenv("FLARETUNE_TIMER");
    return v && *v ? v : "auto";
}

const char *ft_backend_clock(const ft_backend *b) { return b->clock ? b->clock() : "host"; }
