/* ft_problem.h: a real op's tuning problem on the cpu backend, sized from a preset, for the
 * tests of strategies and replays (header-only, like ft_test.h). */
#ifndef FT_PROBLEM_H
#define FT_PROBLEM_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/json.h"
#include "op/backend.h"
#include "op/op_json.h"
#include "op/op.h"
#include "op/space.h"
#include "kernels/registry.h"
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

/* The run_start event of an exhaustive run of p under key: its op, backend, preset, dims,
 * attrs and default config. */
static inline json_t *problem_run_start(const problem *p, const char *key) {
    ft_config def;
    ft_config_default(&p->space, &def);
    return json_pack("{s:s, s:i, s:s, s:s, s:s, s:o, s:o, s:s, s:o, s:s}", "event", "run_start",
                     "format", 1, "op", p->op->name, "backend", p->be->name, "preset", p->preset,
                     "dims", ft_dims_to_json(&p->call), "attrs", ft_attrs_to_json(&p->call),
                     "strategy", "exhaustive", "default", ft_config_to_json(&p->space, &def), "key",
                     key);
}

/* One event as a line of f (a hand-made log); takes ev. */
static inline void put_event(FILE *f, json_t *ev) {
    char *s = json_dumps(ev, JSON_COMPACT);
    fprintf(f, "%s\n", s);
    free(s);
    json_decref(ev);
}

/* A new empty file $TMPDIR/ft_NAME_XXXXXX followed by suffix (TMPDIR unset: /tmp), its path into
 * buf; a failed check when it cannot be made. */
static inline void temp_file(char *buf, size_t n, const char *name, const char *suffix) {
    const char *dir = getenv("TMPDIR");
    snprintf(buf, n, "%s/ft_%s_XXXXXX%s", dir && *dir ? dir : "/tmp", name, suffix);
    int fd = mkstemps(buf, (int)strlen(suffix));
    FT_CHECK(fd >= 0, "mkstemps %s", buf);
    if (fd >= 0) close(fd);
}

#endif
