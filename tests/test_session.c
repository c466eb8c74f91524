/* test_session.c: the tuning session through its library entry (ft_tune_run), on the cpu
 * backend and on a simulated one whose clock is virtual (every figure exact):
 *   - validity is judged at the timing shape: configs that duplicate another only at the
 *     smaller verification shape are verified there, never rejected;
 *   - a confirmation that disagrees with the search (the machine changed) is reported;
 *   - what cannot work fails before the search: a profile path that cannot be written, a log
 *     another run holds.
 */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "core/filelock.h"
#include "ft_test.h"
#include "kernels/registry.h"
#include "traces/eventlog.h"
#include "tuner/ceilings.h"
#include "tuner/tune.h"

static char dir[128];

static json_t *read_log(const char *path) {
    json_t *ev = NULL;
    int torn = 0;
    ft_err err = {0};
    FT_CHECK(ft_eventlog_read(path, &ev, &torn, &err) == FT_OK, "%s", err.msg);
    return ev;
}

static int count_events(const json_t *evs, const char *kind, const char *field) {
    int n = 0;
    size_t i;
    json_t *e;
    json_array_foreach(evs, i, e) {
        if (strcmp(json_string_value(json_object_get(e, "event")), kind)) continue;
        n += !field || json_object_get(e, field) != NULL;
    }
    return n;
}

static void quick_opts(ft_tune_opts *o) {
    ft_tune_defaults(o);
    o->measure.max_time_s = o->measure.min_time_s = 0.02;
    o->measure.max_noise = 0.2;
    o->measure.warmup_s = 0.005;
    o->confirm_top = 2;
}

/* loss at tiny.dflare.train with a verification limit so low that the reference runs at the
 * smallest shape of the family (2 blocks): there chunk=2..32 all cover the batch. */
static void test_validity_at_timing_shape(void) {
    ft_err err = {0};
    ft_tune_opts o;
    quick_opts(&o);
    o.op = ft_op_find("loss", &err);
    FT_CHECK(ft_backend_resolve("cpu", o.op, &o.be, &err) == FT_OK, "%s", err.msg);
    o.preset = *ft_preset_find("tiny.dflare.train");
    o.verify_flops_max = 1;
    o.strategy = FT_STRAT_EXHAUSTIVE;
    char log[256];
    snprintf(log, sizeof log, "%s/validity.jsonl", dir);
    o.log_path = log;
    ft_tune_result r;
    FT_CHECK(ft_tune_run(&o, &r, &err) == FT_OK, "%s", err.msg);
    json_t *evs = read_log(log);
    const json_t *start = json_array_get(evs, 0);
    FT_CHECK(json_is_true(json_object_get(start, "verify_reduced")), "verified at a reduced shape");
    size_t i;
    json_t *e;
    int bad = 0;
    json_array_foreach(evs, i, e) {
        const char *reason = json_string_value(json_object_get(e, "reason"));
        if (reason && (!strcmp(reason, "invalid") || !strcmp(reason, "unverifiable"))) bad++;
    }
    FT_CHECK(bad == 0, "%d candidates of the timing shape rejected at the verification shape", bad);
    int dups = count_events(evs, "verified", "duplicate_at_verify");
    FT_CHECK(dups > 0, "duplicates at the verification shape were verified (%d)", dups);
    FT_CHECK(r.evaluations == r.valid && r.rejected == 0,
             "every valid config measured: %d of %d (%d rejected)", r.evaluations, r.valid,
             r.rejected);
    json_decref(evs);
}

/* ---- a simulated backend: fusion.dflash with three speeds, a virtual clock ---------------- */

static const char *const speed_labels[] = {"slow", "mid", "fast"};
static ft_param sim_params[] = {
    {"speed", "how fast the simulated kernel is", 3, {0, 1, 2}, speed_labels, 0, 0},
};
static ft_space sim_tunables = {sim_params, 1, NULL, NULL};
static double sim_base[] = {30e-6, 20e-6, 10e-6};
static int sim_last = -1, sim_switches;
static double sim_jitter; /* relative: timings spread by +-sim_jitter, in turn */
static long sim_calls;

static int sim_available(char *why, size_t n) {
    (void)why;
    (void)n;
    return 1;
}
static int sim_supports(const ft_op *op) { return op && !strcmp(op->name, "fusion.dflash"); }
static const ft_space *sim_space(const ft_op *op) { return sim_supports(op) ? &sim_tunables : NULL; }
static ft_status sim_run(ft_call *c, const ft_config *cfg, ft_err *err) {
    (void)cfg;
    return ft_call_reference(c, err); /* the outputs are right: only the clock is simulated */
}
/* The default ("slow") turns four times slower once configs alternate quickly, as a busy spell
 * that starts when the confirmation round does. */
static ft_status sim_timed(ft_call *c, const ft_config *cfg, int reps, double *secs, ft_err *err) {
    (void)c;
    (void)err;
    int k = cfg ? cfg->v[0] : 0;
    if (k != sim_last) sim_switches++;
    sim_last = k;
    double t = sim_base[k] * (k == 0 && sim_switches > 6 && sim_jitter == 0 ? 4 : 1);
    *secs = t * reps * (1 + sim_jitter * (double)(sim_calls++ % 3 - 1));
    return FT_OK;
}
static ft_status sim_ceilings(ft_ceilings *c, ft_err *err) {
    (void)err;
    memset(c, 0, sizeof *c);
    c->nlevels = 1;
    snprintf(c->level[0].name, sizeof c->level[0].name, "DRAM");
    c->level[0].bw = 1e12;
    c->flops = c->gemm_flops = 1e14;
    c->threads = 1;
    return FT_OK;
}
static const ft_backend sim_backend = {
    .name = "sim",
    .summary = "simulated: the reference's outputs on a virtual clock",
    .built = 1,
    FT_BACKEND_HOOKS(sim),
    .timed = sim_timed,
    .ceilings = sim_ceilings,
};

/* A run of fusion.dflash at tiny.dflare.train on the simulated backend, logged to dir/NAME. */
static void sim_opts(ft_tune_opts *o, char *log, size_t n, const char *name) {
    quick_opts(o);
    o->op = ft_op_find("fusion.dflash", NULL);
    o->be = &sim_backend;
    o->preset = *ft_preset_find("tiny.dflare.train");
    snprintf(log, n, "%s/%s", dir, name);
    o->log_path = log;
}

/* sim_opts on backend be with every candidate measured fully (exhaustive, no screening). */
static void full_opts(ft_tune_opts *o, char *log, size_t n, const char *name, const ft_backend *be) {
    sim_opts(o, log, n, name);
    o->be = be;
    o->strategy = FT_STRAT_EXHAUSTIVE;
    o->screen = 0;
}

/* A tuning run: its options, the log they name and its result. */
typedef struct {
    ft_tune_opts o;
    char log[256];
    ft_tune_result r;
} tuning;

/* A run on the simulated backend (sim_opts), logged to dir/NAME. */
static void sim_init(tuning *t, const char *log_name) {
    sim_opts(&t->o, t->log, sizeof t->log, log_name);
}

/* The speed label ("slow", "mid", "fast") of a logged config; NULL when there is none. */
static const char *speed_of(const json_t *config) {
    return json_string_value(json_object_get(config, "speed"));
}

/* The same for an event's config. */
static const char *event_speed(const json_t *e) { return speed_of(json_object_get(e, "config")); }

/* The speeds ("slow", "mid", "fast") the last confirm event of the log at path names, in its
 * order and comma-separated ("" when there is none). */
static void confirmed_speeds(const char *path, char *out, size_t n) {
    json_t *evs = read_log(path);
    const json_t *confirm = NULL;
    out[0] = 0;
    for (size_t i = 0; i < json_array_size(evs); i++) {
        const json_t *e = json_array_get(evs, i);
        if (!strcmp(json_string_value(json_object_get(e, "event")), "confirm")) confirm = e;
    }
    const json_t *cfgs = json_object_get(confirm, "configs");
    for (size_t i = 0; i < json_array_size(cfgs); i++)
        snprintf(out + strlen(out), n - strlen(out), "%s%s", i ? "," : "",
                 speed_of(json_array_get(cfgs, i)));
    json_decref(evs);
}

/* A run of the simulated backend with confirm_top 1, every candidate measured fully. */
static void tie_run(ft_tune_opts *o, char *log, size_t n, const char *name) {
    ft_err err = {0};
    ft_tune_result r;
    full_opts(o, log, n, name, &sim_backend);
    o->confirm_top = 1;
    FT_CHECK(ft_tune_run(o, &r, &err) == FT_OK, "%s", err.msg);
}

/* Near-ties beyond --confirm's top go into the confirmation round: with confirm_top 1, "mid"
 * (as fast as "fast": within the noise of the best) is measured again beside the best and the
 * default ("slow"), while a clear loser is not. */
static void test_confirm_near_ties(void) {
    ft_tune_opts o;
    char log[256], got[64];
    double keep[3];
    memcpy(keep, sim_base, sizeof keep);
    sim_base[0] = 10.4e-6; /* the default, slow: confirmed as the baseline */
    sim_base[1] = 10.0e-6; /* tied with fast: the medians alone cannot tell them apart */
    sim_base[2] = 10.0e-6;
    sim_jitter = 0.02;
    tie_run(&o, log, sizeof log, "ties.jsonl");
    confirmed_speeds(log, got, sizeof got);
    FT_CHECK(!strcmp(got, "mid,fast,slow") || !strcmp(got, "fast,mid,slow"),
             "the near-tie is confirmed with the best and the default: %s", got);
    sim_base[1] = 12e-6; /* a clear loser: not confirmed */
    tie_run(&o, log, sizeof log, "ties2.jsonl");
    confirmed_speeds(log, got, sizeof got);
    FT_CHECK(!strcmp(got, "fast,slow"), "a clear loser is not confirmed: %s", got);
    memcpy(sim_base, keep, sizeof keep);
    sim_jitter = 0;
}

static void test_confirmation_disagrees(void) {
    tuning t;
    sim_init(&t, "sim.jsonl");
    t.o.confirm_top = 3;
    t.o.screen = 0;
    ft_err err = {0};
    FT_CHECK(ft_tune_run(&t.o, &t.r, &err) == FT_OK, "%s", err.msg);
    FT_CHECK(t.r.found && t.r.winner.v[0] == 2, "the fast one wins");
    FT_CHECK(t.r.winner_stats.median == 10e-6, "its confirmed median, exact: %g",
             t.r.winner_stats.median);
    FT_CHECK(t.r.default_stats.median == 120e-6 && t.r.speedup == 12,
             "the default's confirmed median (%g) and the speedup from the same round (%g)",
             t.r.default_stats.median, t.r.speedup);
    FT_CHECK(t.r.nunstable == 1, "the default's confirmation disagrees with its search: %d",
             t.r.nunstable);
    json_t *evs = read_log(t.log);
    const json_t *end = json_array_get(evs, json_array_size(evs) - 1);
    const json_t *un = json_object_get(end, "unstable");
    FT_CHECK(json_array_size(un) == 1 && !strcmp(speed_of(json_array_get(un, 0)), "slow"),
             "run_end names it");
    json_decref(evs);
}

/* ---- batches shared with a worker (the protocol of distributed tuning, in one process) ------ */

/* Two queues between the run and a worker thread: what MPI carries between ranks. */
typedef struct {
    pthread_mutex_t m;
    pthread_cond_t cv;
    json_t *q[2][64]; /* [0]: to the worker ({config, best}; NULL: the run is over), [1]: back */
    int head[2], tail[2];
} chan;

static void chan_push(chan *ch, int way, json_t *v) {
    pthread_mutex_lock(&ch->m);
    ch->q[way][ch->tail[way]++ % 64] = v;
    pthread_cond_broadcast(&ch->cv);
    pthread_mutex_unlock(&ch->m);
}

static json_t *chan_pop(chan *ch, int way) {
    pthread_mutex_lock(&ch->m);
    while (ch->head[way] == ch->tail[way])
        pthread_cond_wait(&ch->cv, &ch->m);
    json_t *v = ch->q[way][ch->head[way]++ % 64];
    pthread_mutex_unlock(&ch->m);
    return v;
}

static ft_status ch_send(void *ctx, int w, const json_t *config, double best, ft_err *err) {
    (void)w;
    (void)err;
    chan_push(ctx, 0, json_pack("{s:O, s:f}", "config", config, "best", isfinite(best) ? best : -1));
    return FT_OK;
}

static ft_status ch_recv(void *ctx, int w, json_t **events, ft_err *err) {
    (void)w;
    (void)err;
    *events = chan_pop(ctx, 1);
    return FT_OK;
}

static int ch_next(void *ctx, json_t **config, double *best, ft_err *err) {
    (void)err;
    json_t *m = chan_pop(ctx, 0);
    if (!m) return 0;
    *config = json_incref(json_object_get(m, "config"));
    double b = json_number_value(json_object_get(m, "best"));
    *best = b > 0 ? b : INFINITY;
    json_decref(m);
    return 1;
}

static ft_status ch_reply(void *ctx, json_t *events, ft_err *err) {
    (void)err;
    chan_push(ctx, 1, json_deep_copy(events));
    return FT_OK;
}

typedef struct {
    ft_tune_opts o;
    ft_tune_server srv;
    int served;
    ft_status st;
    ft_err err;
} worker_arg;

static void *worker_main(void *p) {
    worker_arg *w = p;
    w->st = ft_tune_serve(&w->o, &w->srv, &w->served, &w->err);
    return NULL;
}

/* The configs of a log's measured and rejected events, in order, into one string. */
static void evaluated(const char *path, char *out, size_t n, int *rank1) {
    json_t *evs = read_log(path);
    out[0] = 0;
    *rank1 = 0;
    for (size_t i = 0; i < json_array_size(evs); i++) {
        const json_t *e = json_array_get(evs, i);
        const char *k = json_string_value(json_object_get(e, "event"));
        if (strcmp(k, "measured") && strcmp(k, "rejected")) continue;
        *rank1 += json_integer_value(json_object_get(e, "rank")) == 1;
        snprintf(out + strlen(out), n - strlen(out), "%s,",
                 event_speed(e));
    }
    json_decref(evs);
}

/* A batch of two shared with a worker thread evaluates what one process does with batches of
 * two, in the same order, and picks the same winner; the worker's events say rank 1. */
static void test_batches_with_a_worker(void) {
    ft_err err = {0};
    ft_tune_opts o;
    char log1[256], log2[256], a[256], b[256];
    sim_jitter = 1e-9; /* no busy spell: the clock is the same for both runs */
    full_opts(&o, log1, sizeof log1, "batch1.jsonl", &sim_backend);
    o.confirm_top = 1;
    o.batch = 2;
    ft_tune_result r1, r2;
    FT_CHECK(ft_tune_run(&o, &r1, &err) == FT_OK, "%s", err.msg);

    chan ch = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, {{0}}, {0, 0}, {0, 0}};
    worker_arg w;
    memset(&w, 0, sizeof w);
    w.o = o;
    w.o.log_path = NULL;
    w.o.rank = 1;
    w.srv = (ft_tune_server){&ch, ch_next, ch_reply};
    ft_tune_workers workers = {1, 1, &ch, ch_send, ch_recv};
    ft_tune_opts o2 = o;
    snprintf(log2, sizeof log2, "%s/batch2.jsonl", dir);
    o2.log_path = log2;
    o2.batch = 0; /* one per process: two */
    o2.workers = &workers;
    o2.rank = 0;
    pthread_t th;
    pthread_create(&th, NULL, worker_main, &w);
    FT_CHECK(ft_tune_run(&o2, &r2, &err) == FT_OK, "%s", err.msg);
    chan_push(&ch, 0, NULL);
    pthread_join(th, NULL);
    FT_CHECK(w.st == FT_OK, "worker: %s", w.err.msg);
    int ranked1, ranked2;
    evaluated(log1, a, sizeof a, &ranked1);
    evaluated(log2, b, sizeof b, &ranked2);
    FT_CHECK(!strcmp(a, b), "the same candidates in the same order: %s / %s", a, b);
    FT_CHECK(ranked1 == 0 && ranked2 == w.served && w.served >= 1,
             "the worker's events say rank 1 (%d of %d served)", ranked2, w.served);
    FT_CHECK(r1.found && r2.found && ft_config_equal(&r1.winner, &r2.winner),
             "the same winner");
    FT_CHECK(r2.evaluations == r1.evaluations, "the run counts the worker's evaluations: %d / %d",
             r2.evaluations, r1.evaluations);
    sim_jitter = 0;
}

/* ---- what fails before the search --------------------------------------------------------- */

static void test_fails_before_the_search(void) {
    tuning t;
    sim_init(&t, "early.jsonl");
    t.o.profile_path = "/nonexistent-dir/p.json";
    sim_switches = 0;
    ft_err err = {0};
    FT_CHECK(ft_tune_run(&t.o, &t.r, &err) != FT_OK && strstr(err.msg, "nonexistent-dir"),
             "an unwritable profile: %s", err.msg);
    FT_CHECK(access(t.log, F_OK) != 0 && sim_switches == 0, "nothing ran, no log written");
    /* A log another run holds: FT_EBUSY at once. */
    t.o.profile_path = NULL;
    int held = ft_file_trylock(t.log, &err);
    FT_CHECK(held >= 0, "%s", err.msg);
    ft_err e2 = {0};
    FT_CHECK(ft_tune_run(&t.o, &t.r, &e2) == FT_EBUSY && strstr(e2.msg, "in use"), "busy log: %s",
             e2.msg);
    FT_CHECK(access(t.log, F_OK) != 0 && sim_switches == 0, "nothing ran");
    ft_file_unlock(held);
    /* Free again: the same run goes through. */
    FT_CHECK(ft_tune_run(&t.o, &t.r, &e2) == FT_OK && t.r.found, "%s", e2.msg);
}

/* ---- the watchdog in a run: a backend whose middle config never ends by itself ------------ */

static ft_param spin_params[] = {
    {"speed", "how the spinning kernel behaves", 3, {0, 1, 2}, speed_labels, 0, 0},
};
static ft_space spin_space = {spin_params, 1, NULL, NULL};

static const ft_space *spin_space_of(const ft_op *op) { return sim_supports(op) ? &spin_space : NULL; }
/* "slow" (the default) computes for 40 µs, "fast" for 20 µs, "mid" spins until the watchdog's
 * deadline (as a CPU kernel looks between its tasks) or, were there none, for a minute. A call
 * stopped by the watchdog fails with FT_ETIMEDOUT, as the cpu backend's does. */
static int spin_sleeps;      /* the sleeper naps 1 ms at a time instead of computing... */
static int spin_sleeper = 1; /* ...and it is "mid", unless a test makes it another */
static int spin_mid_ends;    /* "mid" computes for 30 us, as the others do */
static ft_status spin_run(ft_call *c, const ft_config *cfg, ft_err *err) {
    int k = cfg ? cfg->v[0] : 0;
    double t0 = ft_now_s(), len = k == 0 ? 40e-6 : k == 2 ? 20e-6 : spin_mid_ends ? 30e-6 : 60;
    if (spin_sleeps && k == spin_sleeper && len < 60) len = 0.2; /* 4x the watchdog's floor */
    struct timespec nap = {0, 1000000};
    while (ft_now_s() - t0 < len && !ft_call_overdue(c))
        if (k == spin_sleeper && spin_sleeps) nanosleep(&nap, NULL);
    if (c->overdue) /* as the cpu backend says it */
        return ft_err_set(err, FT_ETIMEDOUT, "stopped (%s)", c->spoiled ? "spoiled" : "late");
    return ft_call_reference(c, err);
}
static const ft_backend spin_backend = {
    .name = "spin",
    .summary = "computes on the host clock; one config never ends by itself",
    .built = 1,
    .available = sim_available,
    .supports = sim_supports,
    .space = spin_space_of,
    .run = spin_run,
    .ceilings = sim_ceilings,
};

/* A run on the spin backend (full_opts), logged to dir/NAME. */
static void spin_init(tuning *s, const char *log_name) {
    full_opts(&s->o, s->log, sizeof s->log, log_name, &spin_backend);
}

/* ft_tune_run of s with `sleeper` napping when sleeps is set and "mid" ending when mid_ends is:
 * it must succeed and, when max_s > 0, end within max_s seconds. The spin settings are back to
 * their defaults after it. */
static void spin_tune(tuning *s, int sleeps, int sleeper, int mid_ends, double max_s) {
    spin_sleeps = sleeps;
    spin_sleeper = sleeper;
    spin_mid_ends = mid_ends;
    ft_err err = {0};
    double t0 = ft_now_s();
    FT_CHECK(ft_tune_run(&s->o, &s->r, &err) == FT_OK, "%s", err.msg);
    if (max_s > 0) FT_CHECK(ft_now_s() - t0 < max_s, "the run ended in %.1f s", ft_now_s() - t0);
    spin_sleeps = spin_mid_ends = 0;
    spin_sleeper = 1;
}

/* The run goes on past the config that would spin for a minute: its call is stopped at 20x the
 * best so far (the 50 ms floor here), it is recorded as stopped and never wins, and the rest are
 * measured. */
static void test_watchdog_in_a_run(void) {
    tuning s;
    spin_init(&s, "watchdog.jsonl");
    spin_tune(&s, 0, 1, 0, 30);
    FT_CHECK(s.r.found && s.r.winner.v[0] != 1 && s.r.stopped == 1 && s.r.evaluations == 3,
             "found %d, winner %d, stopped %d, evaluations %d", s.r.found, s.r.winner.v[0],
             s.r.stopped, s.r.evaluations);
    json_t *evs = read_log(s.log);
    int stopped_events = 0;
    for (size_t i = 0; i < json_array_size(evs); i++) {
        const json_t *e = json_array_get(evs, i), *st = json_object_get(e, "stopped");
        if (!json_is_object(st)) continue;
        stopped_events++;
        const char *speed = event_speed(e);
        double after = json_number_value(json_object_get(st, "after_s"));
        double limit = json_number_value(json_object_get(st, "limit_s"));
        FT_CHECK(speed && !strcmp(speed, "mid") && limit >= 0.05 && after >= limit && after < 10 &&
                     !json_object_get(st, "lost"),
                 "the stopped one: %s after %g s, limit %g s", speed ? speed : "?", after, limit);
    }
    FT_CHECK(stopped_events == 1, "one stopped event: %d", stopped_events);
    json_decref(evs);
}

/* A config whose thread is off its CPU for most of the call (it sleeps, as a descheduled one
 * waits) is stopped once past twice the best (at the 50 ms floor), long before the 20x limit
 * would end it: recorded as not measured cleanly, not as slow, and the run goes on. */
static void test_spoiled_call_in_a_run(void) {
    tuning s;
    spin_init(&s, "spoiled.jsonl");
    s.o.measure.max_lost = 0.05; /* the rule under test, whatever FLARETUNE_MAX_LOST says */
    s.o.stop_factor = 1e6;       /* no time limit to speak of: only the judge can stop it */
    spin_tune(&s, 1, 1, 0, 30);
    FT_CHECK(s.r.unclean >= 1 && s.r.stopped == 0 && (!s.r.found || s.r.winner.v[0] != 1),
             "unclean %d, stopped %d, winner %d", s.r.unclean, s.r.stopped,
             s.r.found ? s.r.winner.v[0] : -1);
    json_t *evs = read_log(s.log);
    int seen = 0;
    for (size_t i = 0; i < json_array_size(evs); i++) {
        const json_t *e = json_array_get(evs, i);
        const char *speed = event_speed(e);
        if (!speed || strcmp(speed, "mid") || !json_object_get(e, "stopped")) continue;
        seen++;
        FT_CHECK(json_is_false(json_object_get(e, "clean")), "the spoiled call is not clean");
        /* why it stopped: its lost time, not a limit (of 1e6 x the best here; 0 for the default) */
        const json_t *st = json_object_get(e, "stopped");
        FT_CHECK(json_is_true(json_object_get(st, "lost")) && !json_object_get(st, "limit_s") &&
                     json_number_value(json_object_get(st, "check_after_s")) >= 0.05,
                 "stopped: lost %d, limit_s %s", json_is_true(json_object_get(st, "lost")),
                 json_object_get(st, "limit_s") ? "given" : "absent");
    }
    FT_CHECK(seen == 1, "one stopped event of mid: %d", seen);
    json_decref(evs);
}

/* The default's every call is spoiled (its thread off the CPU), from its verification on: it
 * is stopped there before a single sample, gets its second chance in the confirmation and is
 * spoiled there too. The winner is a config measured cleanly, with a positive median, and the
 * speedup is withheld: a default without a sample is never a time of 0 that wins. */
static void test_default_never_measured(void) {
    tuning s;
    spin_init(&s, "default_spoiled.jsonl");
    s.o.measure.max_lost = 0.05;
    spin_tune(&s, 1, 0, 1, 0);
    /* On a machine so busy that the other two are not measured cleanly either, no config wins,
     * and the result must say that all three were unclean: a default never measured still never
     * wins, and a lost winner is never left unexplained. */
    int none_clean = !s.r.found && s.r.unclean >= 3;
    FT_CHECK(none_clean || (s.r.found && s.r.winner.v[0] != 0 && s.r.winner_stats.samples > 0 &&
                            s.r.winner_stats.median > 0 && !s.r.winner_stats.unclean),
             "found %d, winner %d, median %g s of %d samples, unclean %d", s.r.found,
             s.r.found ? s.r.winner.v[0] : -1, s.r.winner_stats.median, s.r.winner_stats.samples,
             s.r.unclean);
    FT_CHECK(isnan(s.r.speedup) && (!s.r.found || strstr(s.r.speedup_withheld, "default")),
             "speedup %g withheld '%s'", s.r.speedup, s.r.speedup_withheld);
}

/* Progress's target: every valid candidate not rejected, or the budget, which counts the
 * resumed candidates; never below what was resumed (a log of a larger budget, or an exhaustive
 * run of the same key, resumed under a smaller one reads 49/49, never 49/4). */
static void test_progress_target(void) {
    FT_CHECK(ft_tune_progress_target(96, 0, 0, 6) == 90, "no budget: valid less rejected");
    FT_CHECK(ft_tune_progress_target(96, 10, 0, 6) == 10, "the budget");
    FT_CHECK(ft_tune_progress_target(96, 10, 4, 6) == 10, "resumed ones count in the budget");
    FT_CHECK(ft_tune_progress_target(96, 4, 49, 3) == 49, "more resumed than the budget: %d",
             ft_tune_progress_target(96, 4, 49, 3));
    FT_CHECK(ft_tune_progress_target(52, 4, 60, 0) == 52, "never past the space");
}

/* The progress line's reason a measured event is not ranked says something true when no sample
 * was taken (a call the watchdog stopped for its lost time), never "0 of 0 samples". */
static void test_unranked_text(void) {
    static const struct {
        const char *ev, *want;
    } cases[] = {
        {"{\"clean\": true, \"stats\": {\"samples\": 10, \"taken\": 10, \"discarded\": 0}}", ""},
        {"{\"clean\": false, \"stats\": {\"samples\": 10, \"taken\": 10, \"discarded\": 7}}",
         " (not measured cleanly: 7 of 10 samples discarded)"},
        {"{\"clean\": false, \"stats\": {\"samples\": 0, \"taken\": 0, \"discarded\": 0}, "
         "\"stopped\": {\"after_s\": 0.25, \"lost\": true, \"check_after_s\": 0.05}}",
         " (not measured cleanly: stopped after 250.0 ms before a sample, its threads having lost "
         "over half of it to other work)"},
        {"{\"clean\": false, \"stats\": {\"samples\": 1, \"taken\": 1, \"discarded\": 0}, "
         "\"stopped\": {\"after_s\": 0.08, \"lost\": true, \"check_after_s\": 0.05}}",
         " (not measured cleanly: stopped after 80.00 ms, its threads having lost over half of it "
         "to other work; 0 of 1 samples before it discarded)"},
        {"{\"clean\": false, \"stats\": {\"samples\": 0, \"discarded\": 0}}",
         " (not measured cleanly: no sample was taken)"},
        {"{\"clean\": true, \"stats\": {\"samples\": 0}, \"stopped\": {\"after_s\": 2, "
         "\"limit_s\": 1}}",
         " (stopped after 2.000 s, past its limit of 1.000 s)"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        json_t *ev = json_loads(cases[i].ev, 0, NULL);
        char buf[200];
        ft_tune_unranked_text(ev, buf, sizeof buf);
        FT_CHECK(ev && !strcmp(buf, cases[i].want), "case %zu: '%s', want '%s'", i, buf,
                 cases[i].want);
        json_decref(ev);
    }
}

int main(void) {
    setenv("FLARETUNE_CEILINGS_CACHE", "off", 1);
    snprintf(dir, sizeof dir, "/tmp/ft_test_session_%d", (int)getpid());
    char cmd[320];
    snprintf(cmd, sizeof cmd, "rm -rf %s && mkdir -p %s", dir, dir);
    if (system(cmd) != 0) ft_test_skip("cannot make a scratch directory");
    FT_RUN(test_validity_at_timing_shape);
    FT_RUN(test_confirmation_disagrees);
    FT_RUN(test_confirm_near_ties);
    FT_RUN(test_fails_before_the_search);
    FT_RUN(test_batches_with_a_worker);
    FT_RUN(test_watchdog_in_a_run);
    FT_RUN(test_spoiled_call_in_a_run);
    FT_RUN(test_default_never_measured);
    FT_RUN(test_unranked_text);
    FT_RUN(test_progress_target);
    snprintf(cmd, sizeof cmd, "true %s", dir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
    return ft_test_finish();
}
