/* session.c: one tuning session (see tuner/tune.h for the flow), in phases:
 * start (plan, resume, ceilings, run_start), search (the default, then the strategy), confirm
 * (the best few and the default again, interleaved) and finish (run_end, the profile entry). */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/clock.h"
#include "core/env.h"
#include "core/epitaph.h"
#include "core/filelock.h"
#include "core/format.h"
#include "core/json.h"
#include "core/load.h"
#include "core/sched.h"
#include "op/op_json.h"
#include "profiles/src/profile.h"
#include "traces/nvtx.h"
#include "tuner/ceilings.h"
#include "tuner/replay.h"
#include "tuner/tune.h"
#include "tuner/verify.h"

void ft_tune_defaults(ft_tune_opts *o) {
    memset(o, 0, sizeof *o);
    ft_attrs_default(&o->attrs);
    o->strategy = FT_STRAT_DEFAULT;
    o->seed = 1;
    o->converge = 0.005;
    o->patience = 20;
    o->warm = 1;
    o->screen = 1;
    o->screen_factor = 1.5;
    o->stop_factor = 20;
    o->stop_floor_s = 0.05;
    o->confirm_top = 3;
    ft_measure_defaults_for(FT_MEASURE_TUNE, &o->measure);
    o->verify_flops_max = 1e9;
    o->ceilings_every_s = 120;
    o->rank = -1;
}

int ft_tune_progress_target(int valid, int budget, int resumed_measured, int rejected) {
    int target = valid - rejected;
    const int most = budget > resumed_measured ? budget : resumed_measured;
    if (budget > 0 && most < target) target = most;
    return target > 0 ? target : 0;
}

void ft_tune_unranked_text(const json_t *ev, char *buf, size_t n) {
    const json_t *st = json_object_get(ev, "stats"), *stop = json_object_get(ev, "stopped");
    char a[32], b[32];
    if (n) buf[0] = '\0';
    ft_fmt_time(json_number_value(json_object_get(stop, "after_s")), 0, a, sizeof a);
    if (json_is_false(json_object_get(ev, "clean"))) {
        long disc = (long)json_integer_value(json_object_get(st, "discarded"));
        /* An unclean measurement's samples are every one it took (docs/events.md). */
        const json_t *tk = json_object_get(st, "taken");
        long taken = (long)json_integer_value(tk ? tk : json_object_get(st, "samples"));
        if (stop && taken > 0) /* the call stopped came after samples, discarded or not */
            snprintf(buf, n,
                     " (not measured cleanly: stopped after %s, its threads having lost over "
                     "half of it to other work; %ld of %ld samples before it discarded)",
                     a, disc, taken);
        else if (taken > 0)
            snprintf(buf, n, " (not measured cleanly: %ld of %ld samples discarded)", disc, taken);
        else if (stop)
            snprintf(buf, n,
                     " (not measured cleanly: stopped after %s before a sample, its threads "
                     "having lost over half of it to other work)",
                     a);
        else
            snprintf(buf, n, " (not measured cleanly: no sample was taken)");
    } else if (stop) {
        ft_fmt_time(json_number_value(json_object_get(stop, "limit_s")), 0, b, sizeof b);
        snprintf(buf, n, " (stopped after %s, past its limit of %s)", a, b);
    }
}

/* ---- the verification shape ---------------------------------------------------------------- */

static double preset_flops(const ft_op *op, const ft_attrs *attrs, const ft_preset *p) {
    ft_call c;
    ft_call_init(&c, op);
    c.attrs = *attrs;
    if (op->from_preset(&c, p, NULL)) return INFINITY;
    ft_call_resolve_backward(&c);
    return op->flops(&c);
}

int ft_tune_verify_preset(const ft_op *op, const ft_attrs *attrs, const ft_preset *p,
                          double flops_max, ft_preset *out) {
    *out = *p;
    if (preset_flops(op, attrs, out) <= flops_max) return 0;
    /* Shrink the sizes that only repeat work first (rows, requests, context, vocabulary), the
     * model's own widths last, so the kernels run the code paths of the real shape. Each step
     * halves one size and keeps it odd where it can, so tiles still leave remainders. */
    static const struct {
        const char *name;
        int64_t min;
    } order[] = {{"N", 5},    {"blocks", 2}, {"NB", 2}, {"nseq", 1}, {"R", 2}, {"L", 33},
                 {"S", 33},   {"V", 257},    {"H", 64}, {"T", 2},    {"D", 2}, {"Hq", 2}};
    char set[64];
    for (int guard = 0; guard < 200 && preset_flops(op, attrs, out) > flops_max; guard++) {
        int changed = 0;
        for (size_t k = 0; k < sizeof order / sizeof order[0] && !changed; k++) {
            int64_t *v = ft_preset_field(out, order[k].name);
            if (!v || *v <= order[k].min) continue;
            int64_t nv = *v / 2 + 1;
            if (nv < order[k].min) nv = order[k].min;
            if (!strcmp(order[k].name, "Hq")) { /* keep the GQA ratio's divisibility */
                nv = out->Hkv;
                if (nv >= *v) continue;
            }
            if (!strcmp(order[k].name, "H") && nv % 2) nv++; /* kernels may vectorise by 2 */
            snprintf(set, sizeof set, "%s=%lld", order[k].name, (long long)nv);
            char keep[64];
            memcpy(keep, out->name, sizeof keep);
            if (ft_preset_set(out, set, NULL) == FT_OK) changed = 1;
            memcpy(out->name, keep, sizeof keep);
        }
        if (!changed) break;
    }
    snprintf(out->name + strlen(out->name), sizeof out->name - strlen(out->name), "~verify");
    return 1;
}

/* ---- session state ------------------------------------------------------------------------- */

/* A candidate's state; C_PRUNED: predicted too slow to measure (--prune predicted). */
/* C_UNCLEAN: too few samples survived the scheduler (never ranked, measured again on resume);
 * C_STOPPED: the watchdog stopped a call far slower than the best. */
enum { C_UNKNOWN = 0, C_MEASURED, C_SCREENED, C_REJECTED, C_PRUNED, C_UNCLEAN, C_STOPPED };

typedef struct {
    int state;
    double median;        /* score: median seconds (INFINITY when rejected) */
    double verr;          /* worst relative error at verification           */
    char verr_output[32]; /* the output it was in                           */
    ft_stats stats;
    size_t peak; /* scratch bytes it used at the tuning shape       */
} cand_info;

typedef struct {
    const ft_tune_opts *o;
    const ft_space *s;
    ft_call c;   /* the tuning shape */
    ft_call vc;  /* the verification shape (its own random inputs) */
    ft_call ref; /* float64 reference outputs of vc */
    int reduced;
    ft_workspace ws;
    ft_config *cands;
    int ncands;
    cand_info *info;
    int def_idx;
    ft_eventlog *log;
    int log_lock;        /* descriptor of the log's lock (-1: none held here) */
    double cand_started; /* wall time the candidate in flight started (for traces) */
    ft_ceilings ceil;
    double ceil_at;     /* when the ceilings were last measured (monotonic seconds) */
    ft_load load_start; /* the rest of the machine while the ceilings were measured */
    ft_load load_run;   /* ... while the candidates and the confirmation were measured */
    int busy_candidates;
    int unclean, stopped;                   /* candidates (C_UNCLEAN, C_STOPPED) */
    double fastest;                         /* the fastest call of any candidate, dirty too */
    long samples_discarded, samples_taken; /* every measurement's, the confirmation's too */
    double bytes, flops;
    double best;
    int best_idx;
    int evaluations, rejected, screened, resumed, resumed_rejected;
    json_t *resume_notes; /* events of the log that resume did not trust */
    double t_start;
    ft_env env;
    char device[256], run_id[32];
    ft_strategy *strat;
    int ahead_jobs; /* threads compiling the candidates' kernels ahead (0: none asked) */
    int modules0[2]; /* the backend's kernel modules (compiled, cached) when the run began */
    /* Predicted time (o->predict): each candidate's seconds (NaN: none) and bound, the order
     * the exhaustive strategy measures in (NULL: space order) and where it is in it. */
    double *pred;
    const char **pred_bound;
    int *order, next_in_order;
    int npredicted, pruned;
    char pred_device[32], pred_why[FT_ERR_MSG_LEN];
    double *prior;          /* the warm start's prior (o->warm_log), NULL: none */
    int nprior;
    const char *search_end; /* why the search ended */
    int warmed;             /* warm-start candidates given to the strategy */
    /* Batches and distribution (o->batch, o->workers, ft_tune_serve): the best median the
     * candidate in flight is screened against (NaN: the best so far), where a worker's events
     * go instead of a log, and this host's name for events. */
    double screen_base;
    json_t *capture;
    char host[64];
    /* --candidate-timeout: the candidate in flight's record for core/epitaph.h (kept until the
     * next one: a handler may be writing it as it is cleared), and whether it is registered. */
    char *armed;
    int armed_on;
} session;

static json_t *cand_event(session *S, const char *kind, int i) {
    json_t *ev = json_pack("{s:s, s:o, s:i, s:f}", "event", kind, "config",
                           ft_config_to_json(S->s, &S->cands[i]), "candidate", i, "started",
                           S->cand_started);
    if (S->pred && !isnan(S->pred[i])) {
        json_object_set_new(ev, "predicted_s", json_real(S->pred[i]));
        json_object_set_new(ev, "predicted_bound", json_string(S->pred_bound[i]));
    }
    return ev;
}

/* In a distributed run every candidate event says where it was measured (a worker's already
 * do). */
static void say_where(const session *S, json_t *ev) {
    if (S->o->rank >= 0 && json_object_get(ev, "candidate") && !json_object_get(ev, "rank")) {
        json_object_set_new(ev, "rank", json_integer(S->o->rank));
        json_object_set_new(ev, "host", json_string(S->host));
        json_object_set_new(ev, "device", json_string(S->device));
    }
}

static void disarm(session *S);

/* Write one event: to the log, or, on a worker, into the reply. */
static ft_status emit(session *S, json_t *ev, ft_err *err) {
    say_where(S, ev);
    /* A candidate's outcome, never followed by the record of its failure (core/epitaph.h). */
    const char *kind = json_string_value(json_object_get(ev, "event"));
    if (kind && (!strcmp(kind, "measured") || !strcmp(kind, "rejected"))) disarm(S);
    if (S->capture) {
        json_object_set_new(ev, "t", json_real(ft_wall_time()));
        json_array_append_new(S->capture, ev);
        return FT_OK;
    }
    return ft_eventlog_write(S->log, ev, err);
}

static ft_status reject(session *S, int i, const char *reason, const char *message, ft_err *err) {
    json_t *ev = cand_event(S, "rejected", i);
    json_object_set_new(ev, "reason", json_string(reason));
    json_object_set_new(ev, "message", json_string(message));
    S->info[i].state = C_REJECTED;
    S->info[i].median = INFINITY;
    S->rejected++;
    return emit(S, ev, err);
}

/* Candidate i's kernel faulted on the GPU (recorded as rejected already): the context is lost
 * to every later launch, so the run ends here; with a log the same command resumes past it. */
static ft_status lost(session *S, int i, const ft_err *run_err, ft_err *err) {
    char cfg[256];
    ft_config_format(S->s, &S->cands[i], cfg, sizeof cfg);
    if (!err) return FT_ELOST;
    *err = *run_err;
    return ft_err_wrap(err, "the GPU is lost to this run: candidate %s faulted%s", cfg,
                       S->capture                    ? " (its answer is sent to rank 0)"
                       : ft_eventlog_fd(S->log) >= 0 ? ", and the log records it as rejected: "
                                                       "the same command resumes past it"
                                                     : "");
}

/* ---- verification -------------------------------------------------------------------------- */

/* The watchdog's scale: the best clean median so far, or before there is one, the fastest call
 * any candidate made (INFINITY: none yet). */
static double watch_scale(const session *S) { return isfinite(S->best) ? S->best : S->fastest; }

/* A `measured` event's "stopped" field: after how long, and why: past its limit (`limit_s`),
 * or (`lost`) its threads lost over half of it to other work once past `check_after_s`. */
static json_t *stopped_json(double after_s, double limit_s, int lost, double check_after_s) {
    if (lost)
        return json_pack("{s:f, s:b, s:f}", "after_s", after_s, "lost", 1, "check_after_s",
                         check_after_s);
    return json_pack("{s:f, s:f}", "after_s", after_s, "limit_s", limit_s);
}

/* The watchdog's limit on one call of candidate i (0: none): stop_factor x the best median so
 * far, or before there is a clean one, the fastest call seen (an upper bound on its kernel's
 * time however busy the machine), and never under stop_floor_s; the first candidate, the
 * default, sets the scale. */
static double call_limit(const session *S, int i) {
    double scale = watch_scale(S);
    if (!(S->o->stop_factor > 0) || !isfinite(scale) || i == S->def_idx) return 0;
    double limit = scale * S->o->stop_factor;
    return limit < S->o->stop_floor_s ? S->o->stop_floor_s : limit;
}

/* From when on a call whose thread lost over half of it is stopped (ft_call_watch): twice the
 * best so far (or the fastest call seen), never under stop_floor_s; the default too, at the
 * floor. Such a call could only be a contaminated sample, and on a busy machine a multi-
 * threaded one runs for as long as the scheduler pleases (its threads wait at every barrier). */
static double check_after(const session *S) {
    if (!(S->o->stop_factor > 0) || !(S->o->measure.max_lost > 0) ||
        strcmp(ft_backend_clock(S->o->be), "host") != 0)
        return 0; /* every sample kept, or a device clock the host's scheduler does not stretch */
    double scale = watch_scale(S);
    double at = isfinite(scale) ? 2 * scale : 0;
    return at < S->o->stop_floor_s ? S->o->stop_floor_s : at;
}

/* Candidate i's call ran past the watchdog's limit (at verification or in the measurement):
 * a `measured` event that says so; the candidate is never ranked. */
static json_t *stopped_event(session *S, int i, const ft_stats *st, double after_s, double limit_s,
                             double check_after_s) {
    S->evaluations++;
    /* Spoiled by the scheduler: not measured cleanly (measured again on resume), else slow. */
    if (st->unclean)
        S->unclean++;
    else
        S->stopped++;
    S->info[i].state = st->unclean ? C_UNCLEAN : C_STOPPED;
    S->info[i].median = INFINITY;
    S->info[i].stats = *st; /* no sample: what the confirmation falls back on says so too */
    json_t *ev = cand_event(S, "measured", i);
    json_object_set_new(ev, "stats", ft_stats_to_json(st));
    json_object_set_new(ev, "screened", json_false());
    json_object_set_new(ev, "clean", json_boolean(!st->unclean));
    json_object_set_new(ev, "stopped", stopped_json(after_s, limit_s, st->unclean, check_after_s));
    json_object_set_new(ev, "evaluation", json_integer(S->evaluations));
    return ev;
}

/* Run candidate i on the verification call and compare with the reference. Returns 1 when it
 * passed; on rejection the `rejected` event is written. Candidates are valid at the timing
 * shape; at the smaller verification shape one may duplicate another (a chunk that covers the
 * whole batch there): it is still run and verified there. One that cannot run there at all is
 * rejected as unverifiable, never measured unverified. */
static int verify_candidate(session *S, int i, ft_status *fatal, ft_err *err) {
    const ft_config *cfg = &S->cands[i];
    char why[256];
    *fatal = FT_OK;
    int verdict = ft_space_check(S->s, &S->vc, cfg, why, sizeof why);
    if (verdict == FT_CONFIG_INVALID) {
        char msg[400];
        snprintf(msg, sizeof msg, "cannot run at the verification shape: %s", why);
        *fatal = reject(S, i, "unverifiable", msg, err);
        return 0;
    }
    /* Poison the outputs so an entry the kernel forgets to write fails verification. */
    for (int t = 0; t < S->vc.op->ntensors; t++) {
        ft_role r = S->vc.op->tensors[t].role;
        if (ft_call_uses(&S->vc, t) && (r == FT_ROLE_OUT || r == FT_ROLE_GRAD_OUT)) {
            float *d = S->vc.t[t]->data;
            for (int64_t e = 0; e < ft_tensor_numel(S->vc.t[t]); e++) d[e] = NAN;
        }
    }
    ft_err run_err = {0};
    S->vc.ws = &S->ws;
    /* Its kernels compiled first, at both shapes (one when the verification shape is the
     * tuning one), outside the watchdog's clock: on a fresh cache a compile takes seconds where
     * the best runs in microseconds. A module that does not compile is the error its run would
     * give. */
    if (S->o->be->prepare && (S->o->be->prepare(&S->vc, cfg, &run_err) != FT_OK ||
                              (S->reduced && S->o->be->prepare(&S->c, cfg, &run_err) != FT_OK))) {
        *fatal = reject(S, i, "error", run_err.msg, err);
        return 0;
    }
    /* The watchdog covers the verification call too (its shape is at most the tuning one). */
    double limit = call_limit(S, i), check = check_after(S), t0 = ft_now_s();
    ft_call_watch(&S->vc, limit, check);
    ft_status st = S->o->be->run(&S->vc, cfg, &run_err);
    int spoiled = S->vc.spoiled;
    ft_call_watch(&S->vc, 0, 0);
    /* (a fault that lost the GPU is the candidate's however long it ran) */
    if (st != FT_ELOST && (st == FT_ETIMEDOUT || (limit > 0 && ft_now_s() - t0 > limit))) {
        ft_stats none;
        memset(&none, 0, sizeof none);
        none.median = NAN;
        none.unclean = spoiled; /* the scheduler's doing: measured again on resume */
        *fatal = emit(S, stopped_event(S, i, &none, ft_now_s() - t0, limit, check), err);
        return 0;
    }
    if (st) {
        *fatal = reject(S, i, "error", run_err.msg, err);
        if (!*fatal && st == FT_ELOST) *fatal = lost(S, i, &run_err, err);
        return 0;
    }
    ft_verify_result vr;
    ft_verify_outputs(&S->vc, &S->ref, &vr);
    json_t *ev = cand_event(S, vr.ok ? "verified" : "rejected", i);
    if (!vr.ok) {
        json_object_set_new(ev, "reason", json_string("verify"));
        json_object_set_new(ev, "message", json_string(vr.msg));
        S->info[i].state = C_REJECTED;
        S->info[i].median = INFINITY;
        S->rejected++;
    }
    json_object_set_new(ev, "max_rel_err", ft_json_number(vr.worst_rel));
    json_object_set_new(ev, "tolerance", json_real(vr.tol));
    json_object_set_new(ev, "output", json_string(vr.worst_name));
    json_object_set_new(ev, "reduced", json_boolean(S->reduced));
    if (verdict == FT_CONFIG_DUPLICATE) json_object_set_new(ev, "duplicate_at_verify", json_string(why));
    *fatal = emit(S, ev, err);
    S->info[i].verr = vr.worst_rel;
    snprintf(S->info[i].verr_output, sizeof S->info[i].verr_output, "%s", vr.worst_name);
    return vr.ok;
}

/* ---- measurement --------------------------------------------------------------------------- */

typedef struct {
    session *S;
    const ft_config *cfg;
    const ft_sched_probe *probe; /* the measurement's, and its mark as the call began */
    const ft_sched_mark *start;
} run_ctx;

/* The watchdog's view of the other threads: the longest run-queue wait since the call began. */
static double others_lost(const void *p) {
    const run_ctx *x = p;
    return ft_sched_delay_since(x->probe, x->start);
}

static void run_watch(void *p, double limit_s, double check_after_s, const ft_sched_probe *probe,
                      const ft_sched_mark *start) {
    run_ctx *x = p;
    ft_call_watch(&x->S->c, limit_s, check_after_s);
    x->probe = probe;
    x->start = start;
    if (check_after_s > 0 && probe && start) ft_call_watch_threads(&x->S->c, others_lost, x);
}

static ft_status timed_run(void *p, int reps, double *secs, ft_err *err) {
    run_ctx *x = p;
    ft_nvtx_push("samples", x->S->o->op->name, (uint64_t)(x->cfg - x->S->cands));
    ft_status s = ft_backend_time(x->S->o->be, &x->S->c, x->cfg, reps, secs, err);
    ft_nvtx_pop();
    return s;
}

#define MAX_TRACE 4096
#define HIST_BINS 16

/* The sample distribution as a small histogram between min and max, for the dashboard. */
static json_t *hist_json(const double *v, int n, double lo, double hi) {
    int counts[HIST_BINS] = {0};
    for (int k = 0; k < n; k++) {
        int b = hi > lo ? (int)((v[k] - lo) / (hi - lo) * HIST_BINS) : 0;
        counts[b < 0 ? 0 : b >= HIST_BINS ? HIST_BINS - 1 : b]++;
    }
    json_t *c = json_array();
    for (int b = 0; b < HIST_BINS; b++) json_array_append_new(c, json_integer(counts[b]));
    return json_pack("{s:f, s:f, s:o}", "lo", lo, "hi", hi, "counts", c);
}

/* Group the samples into at most 16 spans for the trace: [start, duration, samples]. */
static json_t *batches_json(const double *start, int n, double end) {
    json_t *arr = json_array();
    int groups = n < 16 ? n : 16;
    for (int g = 0; g < groups; g++) {
        int a = g * n / groups, b = (g + 1) * n / groups;
        double t_end = b < n ? start[b] : end;
        json_array_append_new(arr, json_pack("[f, f, i]", start[a], t_end - start[a], b - a));
    }
    return arr;
}

#define MAX_KERNEL_SPANS 64

/* The device kernels of the candidate's last sample batch, when the backend's clock records
 * them, as the `kernels` field of its `measured` event (the GPU track of traces). */
static void add_kernels(session *S, json_t *ev) {
    if (!S->o->be->last_kernels) return;
    ft_kernel_span spans[MAX_KERNEL_SPANS];
    int n = S->o->be->last_kernels(spans, MAX_KERNEL_SPANS);
    if (n <= 0) return;
    json_t *arr = json_array();
    for (int k = 0; k < n && k < MAX_KERNEL_SPANS; k++)
        json_array_append_new(arr, json_pack("{s:s, s:f, s:f}", "name", spans[k].name, "start",
                                             spans[k].start_s, "end", spans[k].end_s));
    json_object_set_new(ev, "kernels", arr);
}

/* The roof over the call with a candidate's scratch (it decides which cache level holds the
 * working set). */
static ft_roofline roof_of(const session *S, size_t scratch) {
    return ft_roofline_of(&S->ceil, S->bytes, S->flops, S->bytes + (double)scratch, 0);
}

/* The `measured` event of candidate i. */
static json_t *measured_event(session *S, int i, const ft_stats *st, const double *starts,
                              const double *values, const ft_load *load) {
    json_t *ev = cand_event(S, "measured", i);
    json_object_set_new(ev, "stats", ft_stats_to_json(st));
    json_object_set_new(ev, "screened", json_boolean(st->screened));
    json_object_set_new(ev, "clean", json_boolean(!st->unclean));
    int ns = st->samples < MAX_TRACE ? st->samples : MAX_TRACE;
    json_object_set_new(ev, "batches", batches_json(starts, ns, ft_wall_time()));
    json_object_set_new(ev, "hist", hist_json(values, ns, st->min, st->max));
    ft_roofline roof = roof_of(S, S->ws.peak);
    json_object_set_new(ev, "roofline_frac", ft_json_number(roof.floor_s / st->median));
    json_object_set_new(ev, "roofline", ft_roofline_to_json(&roof, st->median));
    json_object_set_new(ev, "peak_extra_bytes", json_integer((json_int_t)S->ws.peak));
    json_object_set_new(ev, "evaluation", json_integer(S->evaluations));
    json_object_set_new(ev, "load", ft_load_to_json(load));
    return ev;
}

/* Verify, then measure candidate i. *stopped is set when Ctrl-C interrupted the measurement
 * (the candidate is then dropped, not recorded). */
static ft_status evaluate_one(session *S, int i, int *stopped, ft_err *err) {
    *stopped = 0;
    cand_info *ci = &S->info[i];
    ft_status fatal;
    S->cand_started = ft_wall_time();
    if (!verify_candidate(S, i, &fatal, err)) return fatal;
    if (fatal) return fatal;
    ft_measure_opts mo = S->o->measure;
    double *starts = malloc(sizeof(double) * 2 * MAX_TRACE);
    if (!starts) return ft_err_set(err, FT_ENOMEM, "out of memory");
    double *values = starts + MAX_TRACE;
    mo.sample_start = starts;
    mo.sample_value = values;
    mo.sample_cap = MAX_TRACE;
    mo.stop = S->o->stop;
    double best = isnan(S->screen_base) ? S->best : S->screen_base;
    if (S->o->screen && isfinite(best) && i != S->def_idx)
        mo.screen_above = best * S->o->screen_factor;
    mo.call_limit_s = call_limit(S, i); /* the watchdog */
    mo.check_after_s = check_after(S);
    run_ctx rc = {.S = S, .cfg = &S->cands[i]};
    ft_timed_fn fn = {.run = timed_run, .ctx = &rc, .watch = run_watch};
    fn.host_clock = !strcmp(ft_backend_clock(S->o->be), "host");
    ft_stats st;
    S->c.ws = &S->ws;
    S->ws.peak = 0;
    ft_err run_err = {0};
    ft_load_mark m0, m1;
    ft_load_mark_take(&m0);
    ft_status s = ft_measure(&fn, &mo, &st, &run_err);
    ft_call_watch(&S->c, 0, 0);
    ft_load_mark_take(&m1);
    if (s) {
        /* It verified but failed at the tuning shape: record it like any other failure. */
        free(starts);
        ft_status r = reject(S, i, "error", run_err.msg, err);
        return r == FT_OK && s == FT_ELOST ? lost(S, i, &run_err, err) : r;
    }
    if (st.interrupted) {
        free(starts);
        *stopped = 1;
        return FT_OK;
    }
    ft_load load;
    ft_load_between(&m0, &m1, &load);
    ft_load_add(&S->load_run, &load);
    /* A candidate was measured on a busy machine when the load says so or, over spans too short
     * for the load to judge, when the scheduler took its share of the sampled time. */
    if (load.busy || (mo.max_lost > 0 && st.lost_frac >= mo.max_lost)) S->busy_candidates++;
    S->evaluations++;
    S->samples_discarded += st.discarded;
    if (st.fastest_s < S->fastest) S->fastest = st.fastest_s;
    S->samples_taken += st.taken;
    /* Only clean samples rank a candidate: one stopped or left without enough of them scores
     * as unmeasurable for the strategy and never reaches the confirmation. */
    ci->state = st.unclean ? C_UNCLEAN : st.stopped ? C_STOPPED : st.screened ? C_SCREENED : C_MEASURED;
    ci->median = ci->state == C_MEASURED || ci->state == C_SCREENED ? st.median : INFINITY;
    ci->stats = st;
    ci->peak = S->ws.peak;
    if (st.screened) S->screened++;
    if (ci->state == C_UNCLEAN) S->unclean++;
    if (ci->state == C_STOPPED) S->stopped++;
    json_t *ev = measured_event(S, i, &st, starts, values, &load);
    if (st.stopped)
        json_object_set_new(
            ev, "stopped",
            stopped_json(st.stopped_s, mo.call_limit_s, st.unclean, mo.check_after_s));
    free(starts);
    if (ci->state == C_MEASURED && st.median < S->best) {
        S->best = st.median;
        S->best_idx = i;
    }
    add_kernels(S, ev);
    return emit(S, ev, err);
}

/* With --candidate-timeout: the `rejected` event of candidate i (reason `ended`), registered to
 * be written to the log should the process end while it runs (core/epitaph.h), so that the run
 * resumed from the log goes on past it; and the alarm that ends it. */
static void arm(session *S, int i) {
    const double limit = S->o->candidate_timeout_s;
    if (!(limit > 0)) return;
    free(S->armed);
    S->armed = NULL;
    if (!S->capture && ft_eventlog_fd(S->log) >= 0) {
        S->cand_started = ft_wall_time();
        json_t *ev = cand_event(S, "rejected", i);
        json_object_set_new(ev, "reason", json_string("ended"));
        json_object_set_new(ev, "message",
                            json_sprintf("the process ended while it ran: it took longer than "
                                         "--candidate-timeout %g s, or faulted (the process's "
                                         "last line said which)",
                                         limit));
        say_where(S, ev);
        size_t n = 0;
        S->armed = ft_eventlog_line(S->log, ev, &n);
        json_decref(ev);
        if (S->armed) ft_epitaph_add(ft_eventlog_fd(S->log), S->armed, n, 1);
    }
    S->armed_on = 1;
    alarm((unsigned)ceil(limit)); /* past it, SIGALRM ends the process */
}

/* The candidate's own outcome is about to be written, or it has ended: no alarm, no record. */
static void disarm(session *S) {
    if (!S->armed_on) return;
    alarm(0);
    ft_epitaph_clear();
    S->armed_on = 0;
}

/* evaluate_one inside an NVTX range (the candidate id as payload). */
static ft_status evaluate(session *S, int i, int *stopped, ft_err *err) {
    char name[48];
    snprintf(name, sizeof name, "candidate %d", i);
    ft_nvtx_push(name, S->o->op->name, (uint64_t)i);
    if (S->o->measure_lock) pthread_mutex_lock(S->o->measure_lock);
    arm(S, i);
    ft_status s = evaluate_one(S, i, stopped, err);
    disarm(S);
    if (S->o->measure_lock) pthread_mutex_unlock(S->o->measure_lock);
    ft_nvtx_pop();
    return s;
}

/* ---- resume -------------------------------------------------------------------------------- */

static int find_candidate(session *S, const json_t *cfg_json) {
    ft_config cfg;
    if (ft_config_from_json(S->s, cfg_json, &cfg, NULL)) return -1;
    for (int i = 0; i < S->ncands; i++)
        if (ft_config_equal(&cfg, &S->cands[i])) return i;
    return -1;
}

/* The record of one candidate event of a resumed run, or (remote) of a worker's evaluation. */
static void resume_event(session *S, const json_t *ev, const char *kind, size_t line, int remote) {
    int measured = !strcmp(kind, "measured"), rejected = !strcmp(kind, "rejected");
    int verified = !strcmp(kind, "verified");
    if (!measured && !rejected && !verified) return;
    int i = find_candidate(S, json_object_get(ev, "config"));
    if (i < 0) return;
    cand_info *ci = &S->info[i];
    char why[128];
    if (verified) {
        ci->verr = json_number_value(json_object_get(ev, "max_rel_err"));
        const char *out = json_string_value(json_object_get(ev, "output"));
        snprintf(ci->verr_output, sizeof ci->verr_output, "%s", out ? out : "");
    } else if (rejected) {
        if (remote)
            S->rejected++;
        else if (ci->state == C_UNKNOWN)
            S->resumed++, S->resumed_rejected++;
        ci->state = C_REJECTED;
        ci->median = INFINITY;
    } else if (remote && json_is_false(json_object_get(ev, "clean"))) {
        S->evaluations++;
        S->unclean++;
        ci->state = C_UNCLEAN;
        ci->median = INFINITY;
    } else if (!ft_event_measured_ok(ev, why, sizeof why)) {
        /* Not trusted: the candidate is measured again. */
        json_array_append_new(S->resume_notes, json_pack("{s:I, s:s, s:i}", "event",
                                                         (json_int_t)line, "why", why, "cand", i));
    } else if (json_is_object(json_object_get(ev, "stopped"))) {
        if (remote)
            S->evaluations++;
        else if (ci->state == C_UNKNOWN)
            S->resumed++;
        if (ci->state != C_STOPPED) S->stopped++;
        ci->state = C_STOPPED;
        ci->median = INFINITY;
    } else {
        const json_t *st = json_object_get(ev, "stats");
        int screened = json_is_true(json_object_get(ev, "screened"));
        if (remote)
            S->evaluations++, S->screened += screened;
        else if (ci->state == C_UNKNOWN)
            S->resumed++;
        ci->state = screened ? C_SCREENED : C_MEASURED;
        ci->median = json_number_value(json_object_get(st, "median_s"));
        ci->stats.median = ci->median;
        ci->stats.iqr = json_number_value(json_object_get(st, "iqr_s"));
        ci->stats.samples = (int)json_integer_value(json_object_get(st, "samples"));
        ci->stats.batch = (int)json_integer_value(json_object_get(st, "batch"));
        ci->stats.ci_rel = json_number_value(json_object_get(st, "ci_rel"));
        const json_t *peak = json_object_get(ev, "peak_extra_bytes");
        ci->peak = json_is_integer(peak) && json_integer_value(peak) > 0
                       ? (size_t)json_integer_value(peak)
                       : 0;
        if (!screened && ci->median < S->best) {
            S->best = ci->median;
            S->best_idx = i;
        }
    }
}

/* Load what compatible earlier runs in the log already established. */
static ft_status resume_from_log(session *S, const char *path, const char *key, ft_err *err) {
    if (access(path, F_OK) != 0) return FT_OK;
    json_t *events;
    int torn;
    ft_status s = ft_eventlog_read(path, &events, &torn, err);
    if (s) return ft_err_wrap(err, "cannot resume");
    const char *last_key = NULL;
    const json_t *last_start = NULL;
    size_t k;
    json_t *ev;
    json_array_foreach(events, k, ev) {
        const char *kind = json_string_value(json_object_get(ev, "event"));
        if (!strcmp(kind, "run_start")) {
            last_key = json_string_value(json_object_get(ev, "key"));
            last_start = ev;
        } else if (!strncmp(kind, "report_", 7)) { /* a report's log: not to be mixed in */
            s = ft_err_set(err, FT_EINVAL,
                           "%s is not a tuning run's log: its line %zu is a '%s' event (a "
                           "report's log); use another --log",
                           path, k + 1, kind);
            json_decref(events);
            return s;
        }
    }
    if (last_key && strcmp(last_key, key) != 0) {
        const char *op = json_string_value(json_object_get(last_start, "op"));
        const char *be = json_string_value(json_object_get(last_start, "backend"));
        const char *dev = json_string_value(json_object_get(last_start, "device"));
        if (dev && strcmp(dev, S->device) != 0) { /* another machine, or this one's other CPUs */
            s = ft_err_set(err, FT_EINVAL,
                           "%s holds a run of %s on %s measured on '%s', and this one runs on "
                           "'%s' (a CPU's device counts the CPUs the process may use: taskset, "
                           "a cpuset): use another --log",
                           path, op ? op : "?", be ? be : "?", dev, S->device);
            json_decref(events);
            return s;
        }
        char *dims = json_dumps(json_object_get(last_start, "dims"), JSON_COMPACT);
        s = ft_err_set(err, FT_EINVAL,
                       "%s holds a run of %s on %s at %s that this one cannot continue (other op, "
                       "sizes, attributes, device or kernel sources); use another --log",
                       path, op ? op : "?", be ? be : "?", dims ? dims : "?");
        free(dims);
        json_decref(events);
        return s;
    }
    /* Results of every run in the log with this key count. */
    int in_scope = 0;
    const json_t *start = NULL;
    char why[128];
    json_array_foreach(events, k, ev) {
        const char *kind = json_string_value(json_object_get(ev, "event"));
        if (!strcmp(kind, "run_start")) {
            const char *kk = json_string_value(json_object_get(ev, "key"));
            in_scope = kk && !strcmp(kk, key);
            start = ev;
        } else if (in_scope && !ft_event_config_whole(start, ev, why, sizeof why)) {
            /* Damaged: read alone, it would pass for another candidate. */
            json_array_append_new(
                S->resume_notes,
                json_pack("{s:I, s:s, s:i}", "event", (json_int_t)(k + 1), "why", why, "cand", -1));
        } else if (in_scope) {
            resume_event(S, ev, kind, k + 1, 0);
        }
    }
    json_decref(events);
    return FT_OK;
}

/* ---- confirmation -------------------------------------------------------------------------- */

/* Stats a config can be ranked by: clean, of at least one sample, with a positive median. */
static int rankable(const ft_stats *st) {
    return !st->unclean && st->samples > 0 && isfinite(st->median) && st->median > 0;
}

/* Order candidate indices by median (insertion sort: a few hundred at most, and stable). */
static void sort_by_median(int *idx, int n, const cand_info *info) {
    for (int i = 1; i < n; i++) {
        int v = idx[i], j = i;
        while (j > 0 && info[idx[j - 1]].median > info[v].median) {
            idx[j] = idx[j - 1];
            j--;
        }
        idx[j] = v;
    }
}

/* Measure the chosen candidates again, interleaved, and return their stats in out[]. Each is
 * warmed the same way first (as long as one measurement's warm-up, run for run), the first
 * interleaved round is not counted, and every timed batch follows one untimed call of its own
 * config: each sample is taken warm, as a measurement of that config alone would take it. */
/* When the interleaved confirmation stops, beside the measurement defaults it builds on
 * (tuner/measure.c, docs/measurement.md). Each round times every contender once. */
static const struct {
    int max_rounds;     /* the sample buffers' size; the median has long stopped moving there  */
    int quick_rounds;   /* a median of ten rounds already shrugs off two outliers per config   */
    double quick_limit; /* ...so after them stop once this many times max_time_s has passed:
                         * the contenders together get twice what one search candidate may   */
    int full_rounds;    /* thirty rounds halve the median's interval against ten: stop there
                         * once each contender has had its min_time_s                         */
} confirm_rules = {.max_rounds = 400, .quick_rounds = 10, .quick_limit = 2.0, .full_rounds = 30};

static ft_status confirm(session *S, const int *idx, int n, ft_stats *out, ft_err *err) {
    double *x[16];
    int cap = confirm_rules.max_rounds, rounds = 0, batch[16];
    /* Each contender's clean samples (x[j][0..clean[j])) and the ones the scheduler spoiled. */
    int clean[16] = {0}, dirty[16] = {0};
    double lost_sum[16] = {0}, wall_sum[16] = {0};
    int classify = !strcmp(ft_backend_clock(S->o->be), "host") && S->o->measure.max_lost > 0;
    ft_sched_probe probe;
    for (int j = 0; j < n; j++) {
        x[j] = malloc(sizeof(double) * (size_t)cap);
        batch[j] = S->info[idx[j]].stats.batch > 0 ? S->info[idx[j]].stats.batch : 1;
        if (!x[j]) {
            for (int k = 0; k < j; k++) free(x[k]);
            return ft_err_set(err, FT_ENOMEM, "out of memory");
        }
    }
    ft_status s = FT_OK;
    for (int j = 0; j < n && !s; j++) {
        run_ctx rc = {.S = S, .cfg = &S->cands[idx[j]]};
        double t0 = ft_now_s(), secs;
        int calls = 0;
        do {
            s = timed_run(&rc, batch[j], &secs, err);
            calls++;
        } while (!s && (ft_now_s() - t0 < S->o->measure.warmup_s || calls < 2) && calls < 1000);
    }
    ft_load_mark m0, m1;
    ft_load_mark_take(&m0);
    if (classify) ft_sched_probe_open(&probe);
    /* Enough rounds for a stable median, within the time one candidate may take (x2). */
    double t0 = ft_now_s(), limit = confirm_rules.quick_limit * S->o->measure.max_time_s;
    for (int warm = 1; !s && rounds < cap && !(S->o->stop && *S->o->stop); warm = 0) {
        for (int j = 0; j < n && !s; j++) {
            run_ctx rc = {.S = S, .cfg = &S->cands[idx[j]]};
            double secs = 0;
            /* One untimed call after the switch from the previous candidate: its thread pool
             * (another team size, OpenMP's or the BLAS's) and caches are its own again, as in
             * a measurement of it alone; the busy spells still hit every candidate alike. */
            s = timed_run(&rc, 1, &secs, err);
            ft_sched_mark a, b;
            if (classify) {
                ft_sched_probe_refresh(&probe);
                ft_sched_mark_take(&probe, &a);
            }
            if (!s) {
                ft_call_watch(&S->c, 0, check_after(S) * batch[j]);
                s = timed_run(&rc, batch[j], &secs, err);
                ft_call_watch(&S->c, 0, 0);
                if (s == FT_ETIMEDOUT) { /* spoiled by the scheduler: a dirty sample */
                    s = FT_OK;
                    if (!warm) dirty[j]++;
                    continue;
                }
            }
            if (s || warm) continue;
            if (classify) {
                ft_sched_mark_take(&probe, &b);
                double wall = b.wall_s - a.wall_s, lost = ft_sched_lost(&probe, &a, &b);
                lost_sum[j] += lost;
                wall_sum[j] += wall;
                if (wall > 0 && lost > S->o->measure.max_lost * wall) {
                    dirty[j]++;
                    continue;
                }
            }
            x[j][clean[j]++] = secs / batch[j];
        }
        if (s || warm) continue;
        rounds++;
        /* The rules count rounds in which every contender got a clean sample. */
        int full = clean[0];
        for (int j = 1; j < n; j++)
            if (clean[j] < full) full = clean[j];
        double el = ft_now_s() - t0;
        if (full >= confirm_rules.quick_rounds && el >= limit) break;
        if (full >= confirm_rules.full_rounds && el >= S->o->measure.min_time_s * n) break;
        /* A busy machine: past the time limit with too few clean rounds, stop at twice it. */
        if (el >= 2 * limit && rounds >= confirm_rules.quick_rounds) break;
    }
    if (classify) ft_sched_probe_close(&probe);
    ft_load_mark_take(&m1);
    ft_load load;
    ft_load_between(&m0, &m1, &load);
    ft_load_add(&S->load_run, &load);
    for (int j = 0; j < n; j++) {
        memset(&out[j], 0, sizeof out[j]);
        out[j].batch = batch[j];
        out[j].total_s = ft_now_s() - t0;
        out[j].converged = 1;
        ft_stats_compute(x[j], clean[j], &out[j]);
        out[j].discarded = dirty[j];
        out[j].taken = clean[j] + dirty[j];
        out[j].lost_frac = wall_sum[j] > 0 ? lost_sum[j] / wall_sum[j] : 0;
        int need = S->o->measure.min_clean < rounds ? S->o->measure.min_clean : rounds;
        out[j].unclean = rounds > 0 && clean[j] < need;
        if (clean[j] == 0) out[j].median = NAN;
        S->samples_discarded += dirty[j];
        S->samples_taken += clean[j] + dirty[j];
        free(x[j]);
    }
    if (!s && rounds == 0) out[0].samples = 0; /* stopped before the first counted round */
    return s;
}

/* Two measurements of one config disagree beyond their noise: their 95% intervals are apart
 * and the medians differ by more than a quarter. The machine changed under the run (load, clock)
 * and the comparison is in doubt. */
static int disagree(const ft_stats *a, const ft_stats *b) {
    if (!(a->median > 0) || !(b->median > 0)) return 0;
    double ha = a->median * (isfinite(a->ci_rel) ? a->ci_rel : 0);
    double hb = b->median * (isfinite(b->ci_rel) ? b->ci_rel : 0);
    double lo = a->median < b->median ? a->median : b->median;
    double hi = a->median < b->median ? b->median : a->median;
    double hlo = a->median < b->median ? ha : hb, hhi = a->median < b->median ? hb : ha;
    return hi > 1.25 * lo && hi - hhi > lo + hlo;
}

/* ---- the profile entry --------------------------------------------------------------------- */

typedef struct {
    int found, winner, def_pos, interrupted;
    ft_stats ws, ds;       /* the winner's and the default's confirmed stats */
    json_t *tie;           /* configs within the noise of the winner         */
    json_t *unstable;      /* configs whose confirmation disagreed with their search */
    ft_roofline roof;      /* the winner's                                   */
    int roof_suspect;      /* above the roof after measuring the ceilings again */
} outcome;

static json_t *contention_json(const session *S) {
    json_t *o = json_object();
    json_object_set_new(o, "at_start", ft_load_to_json(&S->load_start));
    json_object_set_new(o, "during", ft_load_to_json(&S->load_run));
    json_object_set_new(o, "busy_candidates", json_integer(S->busy_candidates));
    /* What the scheduler cost the samples (docs/measurement.md): thrown away, out of all the
     * timed samples, and the candidates left without enough clean ones or stopped. */
    json_object_set_new(o, "samples_discarded", json_integer(S->samples_discarded));
    json_object_set_new(o, "samples_taken", json_integer(S->samples_taken));
    json_object_set_new(o, "unclean", json_integer(S->unclean));
    json_object_set_new(o, "stopped", json_integer(S->stopped));
    /* Busy as a whole: at the start or over all the measurements together (one candidate's
     * short span alone is within the ticks' resolution; it is counted in busy_candidates). */
    json_object_set_new(o, "busy", json_boolean(S->load_start.busy || S->load_run.busy));
    return o;
}

static json_t *profile_entry(session *S, const outcome *oc) {
    int w = oc->winner;
    json_t *e = json_object();
    json_object_set_new(e, "op", json_string(S->o->op->name));
    json_object_set_new(e, "backend", json_string(S->o->be->name));
    json_object_set_new(e, "device", json_string(S->device));
    json_object_set_new(e, "shape", ft_dims_to_json(&S->c));
    json_object_set_new(e, "attrs", ft_attrs_to_json(&S->c));
    json_object_set_new(e, "config", ft_config_to_json(S->s, &S->cands[w]));
    json_object_set_new(e, "stats", ft_stats_to_json(&oc->ws));
    if (oc->def_pos >= 0 && rankable(&oc->ds)) {
        json_object_set_new(e, "default",
                            json_pack("{s:o, s:o}", "config",
                                      ft_config_to_json(S->s, &S->cands[S->def_idx]), "stats",
                                      ft_stats_to_json(&oc->ds)));
        json_object_set_new(e, "speedup", ft_json_number(oc->ds.median / oc->ws.median));
    } else {
        json_object_set_new(e, "default", json_null());
        json_object_set_new(e, "speedup", json_null());
        if (oc->def_pos >= 0)
            json_object_set_new(e, "speedup_withheld",
                                json_string("the default was not measured cleanly (busy machine)"));
    }
    json_object_set_new(e, "roofline_frac", ft_json_number(oc->roof.floor_s / oc->ws.median));
    json_object_set_new(e, "roofline", ft_roofline_to_json(&oc->roof, oc->ws.median));
    json_object_set_new(e, "verification",
                        json_pack("{s:o, s:f, s:s, s:o, s:b}", "max_rel_err",
                                  ft_json_number(S->info[w].verr), "tolerance",
                                  S->c.attrs.dtype ? 1e-2 : ft_verify_tolerance(S->o->op, 0),
                                  "output", S->info[w].verr_output, "shape",
                                  ft_dims_to_json(&S->vc), "reduced", S->reduced));
    json_object_set_new(e, "tie", json_deep_copy(oc->tie));
    if (json_array_size(oc->unstable))
        json_object_set_new(e, "unstable", json_deep_copy(oc->unstable));
    json_object_set_new(e, "contention", contention_json(S));
    json_t *unclean = json_array();
    for (int i = 0; i < S->ncands; i++)
        if (S->info[i].state == C_UNCLEAN)
            json_array_append_new(unclean, ft_config_to_json(S->s, &S->cands[i]));
    if (json_array_size(unclean))
        json_object_set_new(e, "not_measured_cleanly", unclean);
    else
        json_decref(unclean);
    json_t *envj = ft_env_to_json(&S->env);
    if (S->o->be->device_details)
        json_object_set_new(envj, "device_details", json_string(S->o->be->device_details()));
    json_object_set_new(e, "environment", envj);
    char when[32];
    time_t now = time(NULL);
    strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", gmtime(&now));
    json_object_set_new(e, "tuned_at", json_string(when));
    json_object_set_new(e, "strategy", json_string(ft_strategy_names[S->o->strategy]));
    json_object_set_new(e, "evaluations", json_integer(S->evaluations + S->resumed));
    json_object_set_new(e, "space_valid", json_integer(S->ncands));
    if (oc->interrupted) json_object_set_new(e, "interrupted", json_true());
    return e;
}

/* ---- start --------------------------------------------------------------------------------- */

static void session_free(session *S) {
    disarm(S);
    free(S->armed);
    ft_strategy_free(S->strat);
    ft_call_free(&S->c);
    ft_call_free(&S->vc);
    ft_call_free(&S->ref);
    ft_ws_free(&S->ws);
    free(S->cands);
    free(S->info);
    free(S->pred);
    free(S->pred_bound);
    free(S->order);
    json_decref(S->resume_notes);
    free(S->prior);
    ft_eventlog_close(S->log);
    ft_file_unlock(S->log_lock);
}

/* Start compiling the candidates' kernels on background threads (the backend's prefetch): the
 * default first, then the space in order. Always on a backend whose validity check compiles
 * every candidate anyway (the GPU: the loop below then waits only for what is not compiled
 * yet), elsewhere only when asked (--jobs), so that a budget that reaches a few candidates
 * does not pay for compiling all of them. */
static void compile_ahead(session *S, int64_t total) {
    const ft_tune_opts *o = S->o;
    int jobs = o->jobs;
    if (!o->be->prefetch || total <= 0 || total >= INT32_MAX) return;
    if (jobs <= 0) {
        if (!o->be->valid_compiles) return;
        int cores = ft_env_usable_cpus();
        jobs = cores > FT_TUNE_MAX_JOBS ? FT_TUNE_MAX_JOBS : cores;
    }
    ft_config *cfgs = malloc(sizeof *cfgs * (size_t)(total + 1));
    if (!cfgs) return; /* only time is lost: the search compiles as it goes */
    int n = 0;
    ft_config_default(S->s, &cfgs[n++]);
    for (int64_t k = 0; k < total; k++) {
        ft_space_config_at(S->s, k, &cfgs[n]);
        if (!ft_config_equal(&cfgs[n], &cfgs[0])) n++;
    }
    o->be->prefetch(&S->c, cfgs, n, jobs);
    S->ahead_jobs = jobs;
    free(cfgs);
}

/* The search is over: what is still queued is not needed (the confirmation measures
 * candidates that ran), and would compete with it for the CPU. */
static void compile_ahead_stop(session *S) {
    if (S->ahead_jobs) S->o->be->prefetch(&S->c, NULL, 0, S->ahead_jobs);
    S->ahead_jobs = 0;
}

static ft_status plan(session *S, ft_err *err) {
    const ft_tune_opts *o = S->o;
    if (o->be->kernel_modules) o->be->kernel_modules(&S->modules0[0], &S->modules0[1]);
    S->s = o->be->space(o->op);
    ft_call_init(&S->c, o->op);
    S->c.attrs = o->attrs;
    ft_status s = ft_call_from_preset(&S->c, &o->preset, o->seed, err);
    if (s) return s;
    int64_t total = ft_space_size(S->s);
    S->cands = malloc(sizeof(ft_config) * (size_t)(total > 0 ? total : 1));
    if (!S->cands) return ft_err_set(err, FT_ENOMEM, "out of memory");
    compile_ahead(S, total);
    /* Validity is judged at the timing shape, the one the winner is for. */
    for (int64_t k = 0; k < total; k++) {
        ft_space_config_at(S->s, k, &S->cands[S->ncands]);
        if (ft_space_valid(S->s, &S->c, &S->cands[S->ncands], NULL, 0)) S->ncands++;
    }
    if (!S->ncands)
        return ft_err_set(err, FT_EINVAL, "%s on %s: no configuration of the space is valid at %s",
                          o->op->name, o->be->name, o->preset.name);
    S->info = calloc((size_t)S->ncands, sizeof *S->info);
    if (!S->info) return ft_err_set(err, FT_ENOMEM, "out of memory");
    ft_config def;
    ft_config_default(S->s, &def);
    S->def_idx = -1;
    for (int i = 0; i < S->ncands; i++) {
        S->info[i].median = INFINITY;
        if (ft_config_equal(&def, &S->cands[i])) S->def_idx = i;
    }
    /* The verification call: its own inputs (a different seed), at a reduced shape if needed. */
    ft_preset vp;
    S->reduced = ft_tune_verify_preset(o->op, &o->attrs, &o->preset, o->verify_flops_max, &vp);
    ft_call_init(&S->vc, o->op);
    S->vc.attrs = o->attrs;
    if ((s = ft_call_from_preset(&S->vc, &vp, o->seed + 7919, err))) return s;
    if ((s = ft_call_reference_f64(&S->vc, &S->ref, err))) return s;
    S->bytes = ft_call_io_bytes(&S->c);
    S->flops = o->op->flops(&S->c);
    S->best = INFINITY;
    S->fastest = INFINITY;
    S->best_idx = -1;
    return FT_OK;
}

/* ---- predicted time ------------------------------------------------------------------------ */

/* Each candidate's predicted time on the device of o->predict (the backend's hook), the order
 * the exhaustive strategy then measures in, and the prune: candidates not yet measured that are
 * predicted beyond prune_predicted x the best are never measured. A candidate the backend
 * cannot predict has no prediction (the first reason is kept); a prune without a single
 * prediction is an error. */
static ft_status predict_all(session *S, ft_err *err) {
    const ft_tune_opts *o = S->o;
    if (!o->predict) return FT_OK;
    if (!o->be->predict)
        return ft_err_set(err, FT_EUNSUPPORTED, "%s predicts no GPU time (--predict)", o->be->name);
    S->pred = malloc(sizeof *S->pred * (size_t)S->ncands);
    S->pred_bound = calloc((size_t)S->ncands, sizeof *S->pred_bound);
    S->order = malloc(sizeof *S->order * (size_t)S->ncands);
    if (!S->pred || !S->pred_bound || !S->order) return ft_err_set(err, FT_ENOMEM, "out of memory");
    for (int i = 0; i < S->ncands; i++) {
        ft_backend_prediction bp;
        ft_err e = {0};
        S->pred[i] = NAN;
        if (o->be->predict(&S->c, &S->cands[i], o->predict[0] ? o->predict : NULL, &bp, &e)) {
            if (!S->pred_why[0]) snprintf(S->pred_why, sizeof S->pred_why, "%s", e.msg);
            continue;
        }
        S->pred[i] = bp.seconds;
        S->pred_bound[i] = bp.bound;
        S->npredicted++;
        snprintf(S->pred_device, sizeof S->pred_device, "%s", bp.device);
    }
    if (o->prune_predicted > 0) {
        if (!S->npredicted)
            return ft_err_set(err, FT_EUNSUPPORTED,
                              "--prune predicted=%g needs predictions and none could be made: %s",
                              o->prune_predicted, S->pred_why);
        unsigned char *keep = malloc((size_t)S->ncands);
        if (!keep) return ft_err_set(err, FT_ENOMEM, "out of memory");
        ft_predicted_prune(S->pred, S->ncands, o->prune_predicted, S->def_idx, keep);
        for (int i = 0; i < S->ncands; i++)
            if (!keep[i] && S->info[i].state == C_UNKNOWN) {
                S->info[i].state = C_PRUNED;
                S->pruned++;
            }
        free(keep);
    }
    if (S->npredicted) {
        ft_predicted_order(S->pred, S->ncands, S->order);
    } else {
        free(S->order);
        S->order = NULL;
    }
    return FT_OK;
}

/* run_start's `predict`: the device, how many were predicted and pruned, the order. */
static json_t *predict_json(const session *S) {
    double best = INFINITY;
    const char *bound = NULL;
    for (int i = 0; i < S->ncands; i++)
        if (S->pred[i] < best) {
            best = S->pred[i];
            bound = S->pred_bound[i];
        }
    json_t *p = json_object();
    json_object_set_new(p, "device", S->pred_device[0] ? json_string(S->pred_device) : json_null());
    json_object_set_new(p, "predicted", json_integer(S->npredicted));
    json_object_set_new(p, "unpredicted", json_integer(S->ncands - S->npredicted));
    if (S->pred_why[0]) json_object_set_new(p, "why", json_string(S->pred_why));
    json_object_set_new(p, "best_s", ft_json_number(best));
    json_object_set_new(p, "best_bound", bound ? json_string(bound) : json_null());
    json_object_set_new(
        p, "order",
        json_string(S->order && S->o->strategy == FT_STRAT_EXHAUSTIVE ? "predicted" : "strategy"));
    json_object_set_new(p, "prune_factor",
                        S->o->prune_predicted > 0 ? json_real(S->o->prune_predicted) : json_null());
    json_object_set_new(p, "pruned", json_integer(S->pruned));
    return p;
}

/* Spearman's rank correlation between predicted and measured medians over the measured
 * candidates with a prediction (NaN below 3); *n how many. */
static double predict_rank(const session *S, int *n) {
    double *x = malloc(sizeof *x * 2 * (size_t)S->ncands);
    *n = 0;
    if (!x || !S->pred) {
        free(x);
        return NAN;
    }
    double *y = x + S->ncands;
    for (int i = 0; i < S->ncands; i++) {
        const cand_info *ci = &S->info[i];
        if (isnan(S->pred[i]) || !isfinite(ci->median)) continue;
        if (ci->state != C_MEASURED && ci->state != C_SCREENED) continue;
        x[*n] = S->pred[i];
        y[(*n)++] = ci->median;
    }
    double r = *n >= 3 ? ft_rank_correlation(x, y, *n) : NAN;
    free(x);
    return r;
}

static json_t *run_key(session *S) {
    return json_pack("{s:s, s:s, s:o, s:o, s:s, s:s}", "op", S->o->op->name, "backend",
                     S->o->be->name, "dims", ft_dims_to_json(&S->c), "attrs",
                     ft_attrs_to_json(&S->c), "device", S->device, "source_hash",
                     S->env.source_hash);
}

/* The largest thread count any candidate uses: the ceilings bound every one of them. */
static int max_threads(const session *S) {
    int ti = ft_space_param(S->s, "threads"), t = 1;
    for (int i = 0; ti >= 0 && i < S->ncands; i++)
        if (S->cands[i].v[ti] > t) t = S->cands[i].v[ti];
    return t;
}

static ft_status measure_ceilings(session *S, ft_err *err) {
    ft_load_mark m0, m1;
    ft_load_mark_take(&m0);
    ft_status s = ft_ceilings_of(S->o->be, max_threads(S), &S->ceil, err);
    /* Long enough a span to judge the load at the start (idle: this process takes no CPU). */
    double left = FT_LOAD_MIN_SPAN_S - (ft_now_s() - m0.wall_s);
    if (!s && left > 0) usleep((useconds_t)(left * 1e6) + 1000);
    ft_load_mark_take(&m1);
    ft_load_between(&m0, &m1, &S->load_start);
    S->ceil_at = ft_now_s();
    return s;
}

static ft_status write_run_start(session *S, const char *key, ft_err *err) {
    const ft_tune_opts *o = S->o;
    ft_config def;
    ft_config_default(S->s, &def);
    json_t *start = json_object();
    json_object_set_new(start, "event", json_string("run_start"));
    json_object_set_new(start, "format", json_integer(FT_EVENTLOG_FORMAT));
    json_object_set_new(start, "op", json_string(o->op->name));
    json_object_set_new(start, "backend", json_string(o->be->name));
    json_object_set_new(start, "preset", json_string(o->preset.name));
    json_object_set_new(start, "dims", ft_dims_to_json(&S->c));
    json_object_set_new(start, "attrs", ft_attrs_to_json(&S->c));
    json_object_set_new(start, "strategy", json_string(ft_strategy_names[o->strategy]));
    json_object_set_new(start, "converge", json_real(o->converge));
    json_object_set_new(start, "patience", json_integer(o->patience));
    json_object_set_new(start, "seed", json_integer((json_int_t)o->seed));
    json_object_set_new(start, "budget", json_integer(o->budget));
    json_object_set_new(start, "time_budget_s", json_real(o->time_budget_s));
    json_object_set_new(start, "screen", json_boolean(o->screen));
    json_object_set_new(start, "space_size", json_integer(ft_space_size(S->s)));
    json_object_set_new(start, "space_valid", json_integer(S->ncands));
    json_object_set_new(start, "resumed", json_integer(S->resumed));
    json_object_set_new(start, "resumed_rejected", json_integer(S->resumed_rejected));
    if (S->resumed) { /* what a resumed run's progress starts from */
        const cand_info *dci = S->def_idx >= 0 ? &S->info[S->def_idx] : NULL;
        json_object_set_new(start, "resumed_best_s",
                            isfinite(S->best) ? json_real(S->best) : json_null());
        json_object_set_new(start, "resumed_default_s",
                            dci && (dci->state == C_MEASURED || dci->state == C_SCREENED)
                                ? json_real(dci->median)
                                : json_null());
    }
    /* The untrusted events whose candidates no later event measured: those run again. */
    json_t *ignored = json_array();
    size_t k;
    json_t *note;
    json_array_foreach(S->resume_notes, k, note) {
        int c = (int)json_integer_value(json_object_get(note, "cand"));
        if (c >= 0 && S->info[c].state != C_UNKNOWN) continue; /* (-1: no candidate of its own) */
        json_t *copy = json_deep_copy(note);
        json_object_del(copy, "cand");
        json_array_append_new(ignored, copy);
    }
    if (json_array_size(ignored))
        json_object_set_new(start, "resume_ignored", ignored);
    else
        json_decref(ignored);
    json_object_set_new(start, "default", ft_config_to_json(S->s, &def));
    json_object_set_new(start, "verify_dims", ft_dims_to_json(&S->vc));
    json_object_set_new(start, "verify_reduced", json_boolean(S->reduced));
    json_object_set_new(start, "device", json_string(S->device));
    json_t *envj = ft_env_to_json(&S->env);
    if (o->be->device_details)
        json_object_set_new(envj, "device_details", json_string(o->be->device_details()));
    json_object_set_new(start, "env", envj);
    json_object_set_new(start, "source_hash", json_string(S->env.source_hash));
    json_object_set_new(start, "ceilings", ft_ceilings_to_json(&S->ceil));
    json_object_set_new(start, "load", ft_load_to_json(&S->load_start));
    json_object_set_new(start, "bytes", ft_json_number(S->bytes));
    json_object_set_new(start, "flops", ft_json_number(S->flops));
    json_object_set_new(start, "key", json_string(key));
    if (S->o->predict) json_object_set_new(start, "predict", predict_json(S));
    if (o->run_count > 1 && o->runs_command)
        json_object_set_new(start, "runs",
                            json_pack("{s:s, s:i, s:i}", "command", o->runs_command, "index",
                                      o->run_index, "of", o->run_count));
    return emit(S, start, err);
}

/* ---- warm start ---------------------------------------------------------------------------- */

#define WARM_MAX 4

/* Appends candidate i to first[] (at most WARM_MAX, each once) and its source to `from`. */
static void warm_add(session *S, int i, const ft_profile_entry *e, int exact, int *first, int *n,
                     json_t *from) {
    if (i < 0 || *n >= WARM_MAX) return;
    for (int j = 0; j < *n; j++)
        if (first[j] == i) return;
    first[(*n)++] = i;
    json_array_append_new(from, json_pack("{s:o, s:s, s:O, s:b}", "config",
                                          ft_config_to_json(S->s, &S->cands[i]), "device",
                                          e->device, "shape", e->shape, "exact_shape", exact));
}

/* The candidate of this run with e's configuration as exec would run it here (a thread count
 * above this machine's cores on the cores there are), -1 when it is not one. */
static int warm_candidate(session *S, const ft_profile_entry *e) {
    ft_config cfg;
    if (ft_profile_config(S->s, e->config, &cfg, NULL, 0, NULL)) return -1;
    for (int i = 0; i < S->ncands; i++)
        if (ft_config_equal(&cfg, &S->cands[i])) return i;
    return -1;
}

/* Candidates to measure first: the profile's winners for this op and backend, at the nearest
 * shape on this device, then the nearest on every other device, those that are candidates
 * here. A profile that cannot be read gives none (the run reads it again to save its winner,
 * and says then what is wrong). */
static int warm_from_profile(session *S, int *first, json_t *from) {
    ft_profile *p = NULL;
    int n = 0;
    if (!S->o->profile_path || ft_profile_load(S->o->profile_path, &p, NULL)) return 0;
    const char *be = S->o->be->name;
    int exact = 0;
    const ft_profile_entry *e = ft_profile_lookup_call(p, &S->c, be, S->device, &exact);
    if (e) warm_add(S, warm_candidate(S, e), e, exact, first, &n, from);
    json_t *shape = ft_dims_to_json(&S->c);
    /* Other devices, nearest shape first: one pass per device already taken. */
    for (int round = 0; round < WARM_MAX && shape; round++) {
        const ft_profile_entry *best = NULL;
        double bestd = INFINITY;
        for (int k = 0; k < ft_profile_count(p); k++) {
            const ft_profile_entry *x = ft_profile_entry_at(p, k);
            if (x->op != S->o->op || strcmp(x->backend, be) != 0 ||
                strcmp(x->device, S->device) == 0)
                continue;
            int seen = 0;
            for (size_t j = 0; j < json_array_size(from); j++)
                seen |= strcmp(json_string_value(json_object_get(json_array_get(from, j),
                                                                 "device")),
                               x->device) == 0;
            double d = ft_profile_shape_distance(shape, x->shape);
            if (!seen && d < bestd) {
                bestd = d;
                best = x;
            }
        }
        if (!best) break;
        size_t before = json_array_size(from);
        warm_add(S, warm_candidate(S, best), best, bestd == 0, first, &n, from);
        if (json_array_size(from) == before) /* not a candidate here: mark its device seen */
            json_array_append_new(from, json_pack("{s:n, s:s, s:O, s:b}", "config", "device",
                                                  best->device, "shape", best->shape,
                                                  "exact_shape", bestd == 0));
    }
    json_decref(shape);
    ft_profile_free(p);
    return n;
}

/* The prior: each candidate's median in warm_log (NaN where it has none), from its measured
 * events of the same op and backend. NULL with *why set when the log gives nothing usable. */
static double *warm_prior(session *S, const char **why, int *nprior) {
    json_t *events = NULL;
    int torn;
    ft_err e = {0};
    *nprior = 0;
    if (ft_eventlog_read(S->o->warm_log, &events, &torn, &e)) {
        *why = "cannot be read";
        return NULL;
    }
    double *prior = malloc(sizeof *prior * (size_t)S->ncands);
    int same = 0;
    for (int i = 0; prior && i < S->ncands; i++)
        prior[i] = NAN;
    for (size_t k = 0; prior && k < json_array_size(events); k++) {
        const json_t *ev = json_array_get(events, k);
        const char *kind = json_string_value(json_object_get(ev, "event"));
        if (!kind) continue;
        if (strcmp(kind, "run_start") == 0) {
            const char *op = json_string_value(json_object_get(ev, "op"));
            const char *be = json_string_value(json_object_get(ev, "backend"));
            same = op && be && strcmp(op, S->o->op->name) == 0 && strcmp(be, S->o->be->name) == 0;
            continue;
        }
        if (!same || strcmp(kind, "measured") != 0) continue;
        double med = json_number_value(json_object_get(json_object_get(ev, "stats"), "median_s"));
        ft_config cfg;
        if (!(med > 0) || json_is_true(json_object_get(ev, "screened")) ||
            ft_config_from_json(S->s, json_object_get(ev, "config"), &cfg, NULL))
            continue;
        for (int i = 0; i < S->ncands; i++)
            if (ft_config_equal(&cfg, &S->cands[i])) {
                *nprior += isnan(prior[i]);
                prior[i] = med;
                break;
            }
    }
    json_decref(events);
    if (prior && *nprior == 0) {
        *why = "has no measured candidate of this op and backend that is one here";
        free(prior);
        return NULL;
    }
    if (!prior) *why = "out of memory";
    return prior;
}

/* The warm start, said in a `warm` event: the profile's winners first (unless o->warm is 0),
 * the prior read from o->warm_log at the start. */
static ft_status warm_start(session *S, ft_err *err) {
    int first[WARM_MAX], n = 0;
    json_t *from = json_array();
    if (S->o->warm) n = warm_from_profile(S, first, from);
    if ((n || S->prior) && ft_strategy_warm(S->strat, first, n, S->prior)) {
        json_decref(from);
        return ft_err_set(err, FT_ENOMEM, "out of memory");
    }
    S->warmed = n;
    if (!n && !S->prior) {
        json_decref(from);
        return FT_OK;
    }
    json_t *ev = json_pack("{s:s, s:o, s:o, s:i}", "event", "warm", "first", from, "prior_log",
                           S->o->warm_log ? json_string(S->o->warm_log) : json_null(), "prior",
                           S->nprior);
    return emit(S, ev, err);
}

/* Plan, check the profile, lock and resume the log, measure the ceilings, write run_start. */
static ft_status start(session *S, ft_tune_result *r, ft_err *err) {
    const ft_tune_opts *o = S->o;
    ft_env_probe(&S->env);
    ft_backend_device(o->be, &S->env, S->device, sizeof S->device);
    ft_eventlog_run_id(S->run_id, sizeof S->run_id);
    S->resume_notes = json_array();
    ft_status s = plan(S, err);
    if (s) return s;
    ft_call_dims_str(&S->c, r->dims, sizeof r->dims);
    r->valid = S->ncands;
    /* Everything that can fail fails now, before the long work. */
    if (o->profile_path && (s = ft_profile_check_writable(o->profile_path, err))) return s;
    const char *why = NULL;
    if (o->warm_log && !(S->prior = warm_prior(S, &why, &S->nprior)))
        return ft_err_set(err, FT_EINVAL, "warm start: %s %s", o->warm_log, why);
    if (o->log_path && !o->log_locked && (S->log_lock = ft_file_trylock(o->log_path, err)) < 0)
        return ft_err_wrap(err, "tune %s", o->op->name);
    json_t *keyj = run_key(S);
    char *key = json_dumps(keyj, JSON_COMPACT | JSON_SORT_KEYS);
    json_decref(keyj);
    if (o->log_path) s = resume_from_log(S, o->log_path, key, err);
    if (!s) s = ft_eventlog_open(o->log_path, S->run_id, &S->log, err);
    if (!s && o->listener) ft_eventlog_set_listener(S->log, o->listener, o->listener_ctx);
    if (!s) s = predict_all(S, err);
    if (!s) {
        if (o->measure_lock) pthread_mutex_lock(o->measure_lock);
        s = measure_ceilings(S, err);
        if (o->measure_lock) pthread_mutex_unlock(o->measure_lock);
    }
    if (!s) s = write_run_start(S, key, err);
    free(key);
    return s;
}

/* ---- search -------------------------------------------------------------------------------- */

/* Measure the ceilings again when the run has gone on long enough for the machine to change. */
static ft_status maybe_refine_ceilings(session *S, ft_err *err) {
    if (S->o->ceilings_every_s <= 0 || ft_now_s() - S->ceil_at < S->o->ceilings_every_s)
        return FT_OK;
    ft_status s = ft_ceilings_refine(S->o->be, &S->ceil, err);
    S->ceil_at = ft_now_s();
    if (s) return s;
    json_t *ev = json_pack("{s:s, s:o}", "event", "ceilings", "ceilings",
                           ft_ceilings_to_json(&S->ceil));
    return emit(S, ev, err);
}

/* The next candidate to measure: with a prediction the exhaustive strategy takes them fastest
 * predicted first (the strategy still hears every result); else the strategy's pick. -1: none. */
static int next_candidate(session *S) {
    if (!S->order || S->o->strategy != FT_STRAT_EXHAUSTIVE) return ft_strategy_next(S->strat);
    while (S->next_in_order < S->ncands && S->info[S->order[S->next_in_order]].state != C_UNKNOWN)
        S->next_in_order++;
    return S->next_in_order < S->ncands ? S->order[S->next_in_order] : -1;
}

/* Tells the strategy what candidate i cost (the time since it started) and scored. */
static void report(session *S, int i) {
    ft_strategy_report_cost(S->strat, i, ft_wall_time() - S->cand_started);
    ft_strategy_report(S->strat, i, S->info[i].median);
}

/* ---- batches, here and on workers ---------------------------------------------------------- */

/* A worker's events for candidate i: each written to the log (with the index of this run's
 * list), its result taken as if measured here. */
static ft_status apply_remote(session *S, int i, json_t *events, ft_err *err) {
    size_t k;
    json_t *ev;
    ft_status s = FT_OK;
    json_array_foreach(events, k, ev) {
        const char *kind = json_string_value(json_object_get(ev, "event"));
        if (!kind) continue;
        json_object_set_new(ev, "candidate", json_integer(i));
        json_object_set_new(ev, "config", ft_config_to_json(S->s, &S->cands[i]));
        resume_event(S, ev, kind, 0, 1);
        if (!strcmp(kind, "measured")) /* this run's count, not the worker's */
            json_object_set_new(ev, "evaluation", json_integer(S->evaluations));
        if (!s) s = emit(S, json_incref(ev), err);
    }
    if (S->info[i].state == C_UNKNOWN) /* a worker that said nothing of it */
        return s ? s : reject(S, i, "error", "its worker sent no result", err);
    return s;
}

int ft_tune_batch_owner(const ft_tune_workers *w, int j) {
    int self = !w || w->self, nw = w ? w->n : 0;
    int slot = j % (nw + self);
    return self ? slot - 1 : slot;
}

/* What --budget leaves to measure: it counts the run's candidates measured, those resumed from
 * an earlier run of the key included (rejected ones do not count), so a run resumed after a
 * crash measures what the uninterrupted run would have, no more. */
static int budget_left(const session *S) {
    return S->o->budget - S->evaluations - (S->resumed - S->resumed_rejected);
}

/* One batch: up to o->batch candidates (one per process with workers and no batch given),
 * proposed together, shared out (batch_owner), each screened against the best known when the
 * batch began, then told to the strategy in the order proposed. *more: the strategy had
 * candidates to propose. */
static ft_status search_batch(session *S, int *stopped, int *more, ft_err *err) {
    const ft_tune_opts *o = S->o;
    const ft_tune_workers *w = o->workers && o->workers->n > 0 ? o->workers : NULL;
    int k = o->batch > 0 ? o->batch : (w ? w->n + w->self : 1);
    if (o->budget && k > budget_left(S)) k = budget_left(S);
    int *idx = malloc(sizeof(int) * (size_t)(k > 0 ? k : 1));
    if (!idx) return ft_err_set(err, FT_ENOMEM, "out of memory");
    int n = k > 0 ? ft_strategy_next_batch(S->strat, k, idx) : 0;
    *more = n > 0;
    ft_status s = FT_OK;
    S->screen_base = S->best;
    int sent = 0;
    for (int j = 0; j < n && !s; j++)
        if (ft_tune_batch_owner(w, j) >= 0) {
            json_t *cfg = ft_config_to_json(S->s, &S->cands[idx[j]]);
            s = w->send(w->ctx, ft_tune_batch_owner(w, j), cfg, S->best, err);
            json_decref(cfg);
            if (!s) sent = j + 1;
        }
    for (int j = 0; j < n && !s && !*stopped; j++)
        if (ft_tune_batch_owner(w, j) < 0) {
            S->cand_started = ft_wall_time();
            s = evaluate(S, idx[j], stopped, err);
        }
    /* Every answer is collected, even after Ctrl-C here: what the workers measured is kept. */
    for (int j = 0; j < sent; j++) {
        if (ft_tune_batch_owner(w, j) < 0) continue;
        json_t *events = NULL;
        ft_status r = w->recv(w->ctx, ft_tune_batch_owner(w, j), &events, err);
        if (!r) r = apply_remote(S, idx[j], events, err);
        json_decref(events);
        if (!s) s = r;
    }
    S->screen_base = NAN;
    for (int j = 0; j < n && !s; j++)
        if (S->info[idx[j]].state != C_UNKNOWN) {
            ft_strategy_report_cost(S->strat, idx[j], 0);
            ft_strategy_report(S->strat, idx[j], S->info[idx[j]].median);
        }
    free(idx);
    return s;
}

/* The default first (the baseline every speedup is against), then the strategy's picks until
 * the space, the budget or the time runs out, the search converges, or Ctrl-C. *stopped:
 * interrupted mid-candidate. */
static ft_status search(session *S, int *stopped, ft_err *err) {
    const ft_tune_opts *o = S->o;
    S->strat = ft_strategy_new(o->strategy, S->s, S->cands, S->ncands, o->seed);
    if (!S->strat) return ft_err_set(err, FT_ENOMEM, "out of memory");
    ft_status s = warm_start(S, err);
    if (s) return s;
    for (int i = 0; i < S->ncands; i++)
        if (S->info[i].state != C_UNKNOWN) ft_strategy_report(S->strat, i, S->info[i].median);
    *stopped = 0;
    S->search_end = "exhausted";
    if (S->def_idx >= 0 && S->info[S->def_idx].state == C_UNKNOWN) {
        if ((s = evaluate(S, S->def_idx, stopped, err))) return s;
        if (!*stopped) report(S, S->def_idx);
    }
    while (!*stopped && !(o->stop && *o->stop)) {
        while (o->pause && *o->pause && !(o->stop && *o->stop)) usleep(50000);
        if (o->budget && budget_left(S) <= 0) {
            S->search_end = "budget";
            break;
        }
        if (o->time_budget_s > 0 && ft_now_s() - S->t_start >= o->time_budget_s) {
            S->search_end = "time";
            break;
        }
        if (o->converge > 0 && ft_strategy_converged(S->strat, o->converge, o->patience)) {
            S->search_end = "converged";
            break;
        }
        if ((s = maybe_refine_ceilings(S, err))) return s;
        if (o->batch > 1 || (o->workers && o->workers->n > 0)) {
            int more = 0;
            if ((s = search_batch(S, stopped, &more, err))) return s;
            if (!more) break;
            continue;
        }
        int i = next_candidate(S);
        if (i < 0) break;
        if ((s = evaluate(S, i, stopped, err))) return s;
        if (!*stopped) report(S, i);
    }
    if (*stopped || (o->stop && *o->stop)) S->search_end = "interrupted";
    return FT_OK;
}

/* ---- confirm ------------------------------------------------------------------------------- */

/* A tie: the medians' 95% confidence intervals overlap. */
static void find_ties(session *S, const int *pick, int k, const ft_stats *cs, outcome *oc) {
    int w = oc->winner;
    for (int j = 0; j < k; j++) {
        if (pick[j] == pick[w] || cs[j].unclean) continue;
        double hw = cs[w].median * (isfinite(cs[w].ci_rel) ? cs[w].ci_rel : 0);
        double hj = cs[j].median * (isfinite(cs[j].ci_rel) ? cs[j].ci_rel : 0);
        if (cs[j].median - hj <= cs[w].median + hw)
            json_array_append_new(oc->tie, ft_config_to_json(S->s, &S->cands[pick[j]]));
    }
}

/* The best few (fully measured) and the default again, interleaved; the winner, its ties, and
 * whether its roofline fraction is possible. */
static ft_status confirm_phase(session *S, outcome *oc, ft_err *err) {
    const ft_tune_opts *o = S->o;
    int order[4096], n = 0;
    for (int i = 0; i < S->ncands && n < 4096; i++)
        if (S->info[i].state == C_MEASURED) order[n++] = i;
    if (n == 0) return FT_OK;
    sort_by_median(order, n, S->info);
    int pick[16], k = 0;
    int top = o->confirm_top < 1 ? 1 : o->confirm_top > 8 ? 8 : o->confirm_top;
    for (int j = 0; j < n && k < top; j++) pick[k++] = order[j];
    /* Near-ties beyond the top few go too (up to 8 in all): a candidate whose search median's
     * confidence interval reaches the best's may be the real winner, and only measuring them
     * side by side tells. */
    const ft_stats *b0 = &S->info[order[0]].stats;
    double reach = b0->median * (1 + (isfinite(b0->ci_rel) ? b0->ci_rel : 0));
    for (int j = k; j < n && k < 8; j++) {
        const ft_stats *sj = &S->info[order[j]].stats;
        if (sj->median * (1 - (isfinite(sj->ci_rel) ? sj->ci_rel : 0)) > reach) break;
        pick[k++] = order[j];
    }
    oc->def_pos = -1;
    for (int j = 0; j < k; j++)
        if (pick[j] == S->def_idx) oc->def_pos = j;
    /* The default is the baseline of every speedup: one the scheduler spoiled in the search
     * gets a second chance here, side by side with the others. */
    if (oc->def_pos < 0 && S->def_idx >= 0 &&
        (S->info[S->def_idx].state == C_MEASURED || S->info[S->def_idx].state == C_UNCLEAN)) {
        oc->def_pos = k;
        pick[k++] = S->def_idx;
    }
    ft_stats cs[16];
    double confirm_started = ft_wall_time();
    ft_status s = FT_OK;
    if (!oc->interrupted) {
        if (S->o->measure_lock) pthread_mutex_lock(S->o->measure_lock);
        s = confirm(S, pick, k, cs, err);
        if (S->o->measure_lock) pthread_mutex_unlock(S->o->measure_lock);
    }
    if (s) return s;
    int spoiled = 0; /* a contender the scheduler left without enough clean rounds */
    for (int j = 0; j < k && !oc->interrupted && cs[0].samples > 0; j++) spoiled |= cs[j].unclean;
    if (oc->interrupted || cs[0].samples == 0 || spoiled) {
        /* No time for a confirmation round, or a busy machine spoiled it: report the search's
         * own measurements (each of clean samples), and say so in the log. */
        if (spoiled) {
            json_t *cev = json_pack("{s:s, s:b, s:s, s:f, s:[], s:[]}", "event", "confirm",
                                    "clean", 0, "used", "search", "started", confirm_started,
                                    "configs", "stats");
            for (int j = 0; j < k; j++) {
                json_array_append_new(json_object_get(cev, "configs"),
                                      ft_config_to_json(S->s, &S->cands[pick[j]]));
                json_array_append_new(json_object_get(cev, "stats"), ft_stats_to_json(&cs[j]));
            }
            if ((s = emit(S, cev, err))) return s;
        }
        for (int j = 0; j < k; j++) cs[j] = S->info[pick[j]].stats;
    } else {
        json_t *cev = json_pack("{s:s, s:[], s:[], s:[], s:f}", "event", "confirm", "configs",
                                "stats", "search_medians_s", "started", confirm_started);
        for (int j = 0; j < k; j++) {
            json_array_append_new(json_object_get(cev, "configs"),
                                  ft_config_to_json(S->s, &S->cands[pick[j]]));
            json_array_append_new(json_object_get(cev, "stats"), ft_stats_to_json(&cs[j]));
            json_array_append_new(json_object_get(cev, "search_medians_s"),
                                  ft_json_number(S->info[pick[j]].stats.median));
            if (disagree(&cs[j], &S->info[pick[j]].stats))
                json_array_append_new(oc->unstable, ft_config_to_json(S->s, &S->cands[pick[j]]));
        }
        if ((s = emit(S, cev, err))) return s;
    }
    /* Only a clean measurement wins (the default's search stats may be unclean, or hold no
     * sample at all when its call was stopped before one). */
    oc->winner = -1;
    for (int j = 0; j < k; j++)
        if (rankable(&cs[j]) && (oc->winner < 0 || cs[j].median < cs[oc->winner].median))
            oc->winner = j;
    if (oc->winner < 0) return FT_OK; /* nothing measured cleanly: no winner */
    find_ties(S, pick, k, cs, oc);
    oc->ws = cs[oc->winner];
    oc->ds = oc->def_pos >= 0 ? cs[oc->def_pos] : cs[oc->winner];
    oc->winner = pick[oc->winner];
    oc->found = 1;
    /* The winner's roof, over its working set with its scratch (as its measured event's). A
     * fraction above 1 cannot be: measure the ceilings again; if it holds, say so. */
    oc->roof = roof_of(S, S->info[oc->winner].peak);
    if (oc->roof.floor_s / oc->ws.median > FT_ROOFLINE_MAX_FRAC && !oc->interrupted) {
        if ((s = ft_ceilings_refine(o->be, &S->ceil, err))) return s;
        oc->roof = roof_of(S, S->info[oc->winner].peak);
    }
    oc->roof_suspect = oc->roof.floor_s / oc->ws.median > FT_ROOFLINE_MAX_FRAC;
    return FT_OK;
}

/* ---- finish -------------------------------------------------------------------------------- */

static void fill_result(const session *S, const outcome *oc, ft_tune_result *r) {
    r->evaluations = S->evaluations;
    r->rejected = S->rejected;
    r->resumed = S->resumed;
    r->screened = S->screened;
    r->busy = S->load_start.busy || S->load_run.busy;
    r->load = S->load_run.known ? S->load_run : S->load_start;
    r->busy_candidates = S->busy_candidates;
    r->unclean = S->unclean;
    r->stopped = S->stopped;
    r->samples_discarded = S->samples_discarded;
    r->samples_taken = S->samples_taken;
    snprintf(r->predict_device, sizeof r->predict_device, "%s", S->pred_device);
    r->predicted = S->npredicted;
    r->pruned = S->pruned;
    r->rank_corr = predict_rank(S, &r->rank_n);
    snprintf(r->search_end, sizeof r->search_end, "%s", S->search_end ? S->search_end : "");
    r->warmed = S->warmed;
    r->speedup = NAN; /* no winner, no speedup: never a 0 that reads as "0x faster" */
    if (!oc->found) return;
    r->found = 1;
    r->winner = S->cands[oc->winner];
    r->winner_stats = oc->ws;
    if (oc->def_pos >= 0 && rankable(&oc->ds)) {
        r->def = S->cands[S->def_idx];
        r->default_stats = oc->ds;
        r->speedup = oc->ds.median / oc->ws.median;
    } else {
        const cand_info *d = S->def_idx >= 0 ? &S->info[S->def_idx] : NULL;
        snprintf(r->speedup_withheld, sizeof r->speedup_withheld, "%s",
                 !d                          ? "no default config"
                 : d->state == C_UNCLEAN || oc->def_pos >= 0
                     ? "the default was not measured cleanly (busy machine)"
                 : d->state == C_REJECTED    ? "the default was rejected"
                 : d->state == C_UNKNOWN     ? "the default was not measured"
                                             : "the default was not confirmed");
    }
    r->ntie = (int)json_array_size(oc->tie);
    r->nunstable = (int)json_array_size(oc->unstable);
    r->verify_err = S->info[oc->winner].verr;
    r->roofline_frac = oc->roof.floor_s / oc->ws.median;
    r->roofline_suspect = oc->roof_suspect;
    snprintf(r->roofline_level, sizeof r->roofline_level, "%s", oc->roof.level_name);
}

static ft_status finish(session *S, const outcome *oc, ft_tune_result *r, ft_err *err) {
    fill_result(S, oc, r);
    json_t *endev = json_pack("{s:s}", "event", "run_end");
    if (S->o->be->kernel_modules) { /* this run's share: compiled, or found in the disk cache */
        int m[2];
        S->o->be->kernel_modules(&m[0], &m[1]);
        json_object_set_new(endev, "kernel_modules",
                            json_pack("{s:i, s:i}", "compiled", m[0] - S->modules0[0], "cached",
                                      m[1] - S->modules0[1]));
    }
    if (!oc->found) {
        json_object_set_new(endev, "winner", json_null());
        if (S->unclean)
            json_object_set_new(endev, "no_winner",
                                json_string("no candidate was measured cleanly (busy machine)"));
    } else {
        json_object_set_new(endev, "winner", ft_config_to_json(S->s, &S->cands[oc->winner]));
        json_object_set_new(endev, "stats", ft_stats_to_json(&oc->ws));
        json_object_set_new(endev, "default_stats",
                            oc->def_pos >= 0 ? ft_stats_to_json(&oc->ds) : json_null());
        json_object_set_new(endev, "speedup", ft_json_number(r->speedup));
        if (r->speedup_withheld[0])
            json_object_set_new(endev, "speedup_withheld", json_string(r->speedup_withheld));
        json_object_set_new(endev, "roofline_frac", ft_json_number(r->roofline_frac));
        json_object_set_new(endev, "roofline", ft_roofline_to_json(&oc->roof, oc->ws.median));
        json_object_set_new(endev, "unstable", json_deep_copy(oc->unstable));
        if (S->o->profile_path) {
            json_t *entry = profile_entry(S, oc);
            ft_status s = ft_profile_update(S->o->profile_path, entry, err);
            json_decref(entry);
            if (s) {
                /* No run_end: the log keeps the measurements, and the same command resumes
                 * from them and saves again. */
                r->save_failed = 1;
                json_decref(endev);
                return s;
            }
            json_object_set_new(endev, "profile", json_string(S->o->profile_path));
            r->saved = 1;
        }
    }
    json_object_set_new(endev, "tie", json_deep_copy(oc->tie));
    json_object_set_new(endev, "evaluations", json_integer(S->evaluations));
    json_object_set_new(endev, "rejected", json_integer(S->rejected));
    json_object_set_new(endev, "screened", json_integer(S->screened));
    json_object_set_new(endev, "resumed", json_integer(S->resumed));
    json_object_set_new(endev, "interrupted", json_boolean(r->interrupted));
    json_object_set_new(endev, "search_end", json_string(r->search_end));
    json_object_set_new(endev, "contention", contention_json(S));
    json_object_set_new(endev, "ceilings", ft_ceilings_to_json(&S->ceil));
    json_object_set_new(endev, "elapsed_s", json_real(ft_now_s() - S->t_start));
    if (S->o->predict)
        json_object_set_new(endev, "predict",
                            json_pack("{s:o, s:i}", "rank_correlation",
                                      ft_json_number(r->rank_corr), "compared", r->rank_n));
    return emit(S, endev, err);
}

/* A session of o before anything runs: no log lock held, its clock and host noted. */
static void session_begin(session *S, const ft_tune_opts *o) {
    memset(S, 0, sizeof *S);
    S->o = o;
    S->log_lock = -1;
    S->t_start = ft_now_s();
    S->screen_base = NAN;
    gethostname(S->host, sizeof S->host - 1);
}

ft_status ft_tune_run(const ft_tune_opts *o, ft_tune_result *r, ft_err *err) {
    memset(r, 0, sizeof *r);
    session S;
    session_begin(&S, o);
    outcome oc;
    memset(&oc, 0, sizeof oc);
    oc.tie = json_array();
    oc.unstable = json_array();
    int stopped = 0;
    ft_status s = start(&S, r, err);
    if (!s) s = search(&S, &stopped, err);
    compile_ahead_stop(&S);
    if (!s) {
        r->interrupted = oc.interrupted = stopped || (o->stop && *o->stop);
        s = confirm_phase(&S, &oc, err);
    }
    if (!s) s = finish(&S, &oc, r, err);
    json_decref(oc.tie);
    json_decref(oc.unstable);
    session_free(&S);
    return s;
}

/* ---- a worker of a distributed run --------------------------------------------------------- */

/* One config a worker was handed: its events into the reply. */
static ft_status serve_one(session *S, json_t *cfg, double best, ft_err *err) {
    int i = find_candidate(S, cfg);
    if (i < 0) {
        json_t *ev = json_pack("{s:s, s:O, s:i, s:f, s:s, s:s}", "event", "rejected", "config",
                               cfg, "candidate", -1, "started", ft_wall_time(), "reason",
                               "error", "message",
                               "not a valid configuration of this rank's space at these sizes");
        return emit(S, ev, err);
    }
    S->info[i].state = C_UNKNOWN;
    S->screen_base = best;
    int stopped = 0;
    ft_status s = evaluate(S, i, &stopped, err);
    S->screen_base = NAN;
    return s;
}

ft_status ft_tune_serve(const ft_tune_opts *o, const ft_tune_server *srv, int *served,
                        ft_err *err) {
    *served = 0;
    session S;
    session_begin(&S, o);
    ft_env_probe(&S.env);
    ft_backend_device(o->be, &S.env, S.device, sizeof S.device);
    ft_eventlog_run_id(S.run_id, sizeof S.run_id);
    S.resume_notes = json_array();
    ft_status s = plan(&S, err);
    if (!s) s = ft_eventlog_open(NULL, S.run_id, &S.log, err);
    if (!s) s = measure_ceilings(&S, err);
    while (!s) {
        json_t *cfg = NULL;
        double best = INFINITY;
        int got = srv->next(srv->ctx, &cfg, &best, err);
        if (got <= 0) {
            if (got < 0) s = err && err->status ? err->status : FT_EINTERNAL;
            break;
        }
        S.capture = json_array();
        s = serve_one(&S, cfg, best, err);
        json_decref(cfg);
        /* A fault that lost the GPU is answered first (its rejection), then ends the worker. */
        if (!s || s == FT_ELOST) {
            ft_err kept = err ? *err : (ft_err){0};
            const ft_status r = srv->reply(srv->ctx, S.capture, err);
            if (r)
                s = r;
            else if (s && err)
                *err = kept;
        }
        json_decref(S.capture);
        S.capture = NULL;
        if (!s) (*served)++;
    }
    compile_ahead_stop(&S);
    session_free(&S);
    return s;
}
