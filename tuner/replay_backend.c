/* replay_backend.c: the `replay:LOG` backend: "measures" a candidate by reading its median from
 * a recorded exhaustive landscape (replay.h), so a tuning run, distributed or not, can be
 * compared exactly with another: the same seed and batch size must evaluate the same candidates
 * and pick the same winner (docs/distributed.md).
 *
 * Every timed call of a config takes reps x its recorded median; a config the recording rejected
 * (or never saw) fails to run, so it is rejected again. Outputs come from the float64 reference,
 * so verification passes and costs no kernel of the recording's backend. One landscape per
 * process (the command line opens it once).
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "op/backend.h"
#include "tuner/replay.h"

static ft_landscape L;
static int loaded;
static char device[256];

static int rp_available(char *why, size_t n) {
    if (!loaded) snprintf(why, n, "no landscape loaded (--backend replay:LOG)");
    return loaded;
}

static int rp_supports(const ft_op *op) { return loaded && op == L.op; }

static const ft_space *rp_space(const ft_op *op) { return op == L.op ? &L.space : NULL; }

/* The call must be at the recorded sizes and attributes. */
static ft_status same_problem(const ft_call *c, ft_err *err) {
    if (memcmp(c->dim, L.call.dim, sizeof c->dim) == 0 && c->backward == L.call.backward)
        return FT_OK;
    char a[256], b[256];
    ft_call_dims_str(c, a, sizeof a);
    ft_call_dims_str(&L.call, b, sizeof b);
    return ft_err_set(err, FT_EINVAL, "replay: the landscape was recorded at %s (preset %s), not %s",
                      b, L.preset, a);
}

static ft_status rp_run(ft_call *c, const ft_config *cfg, ft_err *err) {
    (void)cfg;
    return ft_backend_ref.run(c, NULL, err);
}

static ft_status rp_timed(ft_call *c, const ft_config *cfg, int reps, double *secs, ft_err *err) {
    ft_status s = same_problem(c, err);
    if (s) return s;
    ft_config def;
    if (!cfg) {
        ft_config_default(&L.space, &def);
        cfg = &def;
    }
    for (int i = 0; i < L.ncands; i++) {
        if (!ft_config_equal(cfg, &L.cands[i])) continue;
        if (!(L.score[i] < INFINITY))
            return ft_err_set(err, FT_EUNSUPPORTED, "replay: the recording rejected this config");
        *secs = L.score[i] * reps;
        return FT_OK;
    }
    return ft_err_set(err, FT_EUNSUPPORTED, "replay: the recording has no such config");
}

static const char *rp_clock(void) { return "replay"; }
static const char *rp_device(void) { return device; }

static const ft_backend replay_backend = {
    .name = "replay",
    .summary = "a recorded exhaustive landscape (replay:LOG): deterministic timings",
    .built = 1,
    FT_BACKEND_HOOKS(rp),
    .timed = rp_timed,
    .clock = rp_clock,
    .device = rp_device,
};

ft_status ft_replay_backend_check(const ft_backend *be, const ft_op *op, const ft_attrs *attrs,
                                  const ft_preset *p, ft_err *err) {
    if (be != &replay_backend || !loaded || op != L.op) return FT_OK;
    ft_call c;
    ft_call_init(&c, op);
    c.attrs = *attrs;
    if (op->from_preset(&c, p, NULL)) return FT_OK; /* said when the call is made */
    ft_call_resolve_backward(&c);
    return same_problem(&c, err);
}

ft_status ft_replay_backend_open(const char *log, const ft_backend **out, ft_err *err) {
    if (loaded) {
        *out = &replay_backend;
        return FT_OK;
    }
    ft_status s = ft_landscape_load(log, &L, err);
    if (s) return ft_err_wrap(err, "replay backend");
    if (!L.op) {
        /* A community file: its kernel is no op this binary can run a call of. */
        s = ft_err_set(err, FT_EINVAL,
                       "replay backend: %s is a %s file, which names no flaretune op to tune: "
                       "replay strategies against it with `flaretune replay %s`",
                       log, ft_landscape_format_name(&L), log);
        ft_landscape_free(&L);
        return s;
    }
    loaded = 1;
    snprintf(device, sizeof device, "replay: %s on %s", L.run, L.backend->name);
    *out = &replay_backend;
    return FT_OK;
}
