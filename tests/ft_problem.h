/* ft_problem.h: a real op's tuning problem on the cpu backend, sized from a preset, for the
 * tests of strategies and replays (header-only, like ft_test.h). */
#ifndef FT_PROBLEM_H
#define FT_PROBLEM_H

#include <stdio.h>
#include <string.h>

#include "op/backend.h"
#include "op/op.h"
#include "op/space.h"
#include "ft_test.h"

/* A problem of a real op on the cpu backend, sized from a preset (no tensors). */
typedef struct {
    const ft_op *op;
    const ft_backend *be;
    ft_call call;
    ft_space space; /* resolved for a 4-core machine, as the log says */
    ft_param params[FT_MAX_PARAMS];
    ft_config cands[512];
    int n;
    char preset[64];
} problem;

/* Fills p; 0 (with a failed check) when the op, its cpu backend or the preset is missing, or
 * it has fewer than `min` valid candidates. */
static inline int make_problem_min(problem *p, const char *opname, const char *preset, int min) {
    ft_err err = {0};
    memset(p, 0, sizeof *p);
    p->op = ft_op_find(opname, &err);
    if (!p->op || ft_backend_resolve("cpu", p->op, &p->be, &err)) {
        FT_CHECK(0, "cpu backend for %s: %s", opname, err.msg);
        return 0;
    }
    snprintf(p->preset, sizeof p->preset, "%s", preset);
    ft_call_init(&p->call, p->op);
    if (p->op->from_preset(&p->call, ft_preset_find(preset), &err)) {
        FT_CHECK(0, "%s", err.msg);
        return 0;
    }
    ft_call_resolve_backward(&p->call);
    p->space = *p->be->space(p->op);
    memcpy(p->params, p->space.params, (size_t)p->space.nparams * sizeof *p->params);
    p->space.params = p->params;
    ft_space_resolve(&p->space, 4);
    for (int64_t k = 0; k < ft_space_size(&p->space) && p->n < 512; k++) {
        ft_config cfg;
        ft_space_config_at(&p->space, k, &cfg);
        if (ft_space_valid(&p->space, &p->call, &cfg, NULL, 0)) p->cands[p->n++] = cfg;
    }
    FT_CHECK(p->n >= min, "%s at %s: %d candidates", opname, preset, p->n);
    return p->n >= min;
}

#endif
