/* t1_tune.c: tuning a kernel described by a T1 file (tuner/t1_tune.h).
 *
 * The strategies are the tuner's own (strategy.h) over the configurations the file's conditions
 * allow. A candidate is compiled as written with its values as macros (ft_dev_compile_file: NVRTC
 * on a GPU, the host compiler on the emulator), its outputs reset to a NaN pattern, run once and
 * checked against the reference configuration's, then timed:
 *   cuda      the device's clock around each launch (CUPTI, else CUDA events: kernels/cuda/
 *             timer.h), `reps` launches after one warm-up, the median;
 *   cuda-emu  a sample of the grid's blocks (at even steps round the edges and across the
 *             interior: emu/prof.h), the emulator's wall time per block times the grid's
 *             blocks: what emulating the whole launch would take, a check of the pipeline, not
 *             a GPU's time.
 * The check runs the whole grid (on the emulator: where that is expected to take at most
 * FT_T1_EMU_WHOLE_S; else the timed sample) and compares every element the reference wrote:
 * floats within 1e-4 * max|ref| + 1e-6, NaN where and only where the reference has one, integers
 * exactly, and an element left unwritten is a failure (after a sampled run, the elements it did not
 * reach are not compared). What the reference wrote is known from two checked runs of it, its
 * write-only outputs reset to 0xFF bytes and then to 0x00 bytes: an element is unwritten only
 * where it kept both (so an int32 -1 or a uint8 255 it wrote counts), and the two runs must
 * agree where it wrote (else the kernel reads an output declared WriteOnly: refused). A
 * candidate runs checked once, reset to 0xFF, and a second time, reset to 0x00, only where it
 * left an element the reference wrote as the 0xFF bytes. A candidate that does not compile,
 * cannot launch, or disagrees is rejected with its reason and the search goes on.
 */
#define _GNU_SOURCE
#include "tuner/t1_tune.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/clock.h"
#include "core/env.h"
#include "core/epitaph.h"
#include "core/filelock.h"
#include "core/json.h"
#include "core/npy.h"
#include "core/paths.h"
#include "core/rng.h"
#include "core/stats.h"
#include "cuda/device_emu.h"
#include "kernels/registry.h"
#include "op/backend.h"
#include "op/op_json.h"
#include "traces/eventlog.h"
#include "tuner/strategies/strategy.h"
#if FT_HAVE_CUDA
#include "cuda/timer.h"
#endif

/* The most candidates one batch of a distributed run takes (one per process). */
#define FT_T1_MAX_BATCH 256

/* The longest whole-grid emulation a check runs, seconds (by the sample's rate). */
#define FT_T1_EMU_WHOLE_S 10.0

void ft_t1_tune_opts_default(ft_t1_tune_opts *o) {
    memset(o, 0, sizeof *o);
    o->emulate = 1;
    o->strategy = FT_STRAT_DEFAULT;
    o->budget = 20;
    o->seed = 1;
    o->blocks = 8;
    o->reps = 20;
    o->rank = -1;
}

/* What one candidate needs: its outputs read back (vectors marked Output). */
typedef struct outputs {
    int whole; /* the run covered the whole grid: an element it left unwritten is a failure */
    int n;
    int idx[FT_T1_MAX_ARGS];
    void *host[FT_T1_MAX_ARGS];
    size_t bytes[FT_T1_MAX_ARGS];
    int file[FT_T1_MAX_ARGS]; /* of a reference: given by a file, every element expected */
    /* of the write-only outputs of a run checked twice (mark_written): 1 where it wrote (NULL:
     * judged by the 0xFF reset alone) */
    unsigned char *written[FT_T1_MAX_ARGS];
} outputs;

static void outputs_free(outputs *o) {
    for (int i = 0; i < o->n; i++) {
        free(o->host[i]);
        free(o->written[i]);
    }
    memset(o, 0, sizeof *o);
}

static double elem(const ft_t1_arg *a, const void *buf, long long i) {
    switch (a->type) {
    case FT_T1_FLOAT: return ((const float *)buf)[i];
    case FT_T1_DOUBLE: return ((const double *)buf)[i];
    case FT_T1_INT32: return ((const int32_t *)buf)[i];
    case FT_T1_UINT8: return ((const uint8_t *)buf)[i];
    case FT_T1_INT8: return ((const int8_t *)buf)[i];
    case FT_T1_UINT32: return ((const uint32_t *)buf)[i];
    case FT_T1_INT16: return ((const int16_t *)buf)[i];
    case FT_T1_UINT16: return ((const uint16_t *)buf)[i];
    }
    return NAN;
}

/* Whether the n bytes at p are all v. */
static int all_bytes(const unsigned char *p, size_t n, unsigned char v) {
    for (size_t j = 0; j < n; j++)
        if (p[j] != v) return 0;
    return 1;
}

/* An element the run did not write: of a write-only output, one left as the reset pattern (0xFF
 * bytes: a NaN in float formats); of an output the kernel also reads, one still equal to its
 * first fill (the emulator's sample writes only part of it). */
static int untouched(const ft_t1_arg *a, const void *init, const void *buf, long long i) {
    const unsigned char *p = (const unsigned char *)buf + (size_t)i * a->elem_bytes;
    if (a->reads) return memcmp(p, (const unsigned char *)init + (size_t)i * a->elem_bytes, a->elem_bytes) == 0;
    return all_bytes(p, a->elem_bytes, 0xFF);
}

/* Whether a run wrote element i of its k-th output (a file's: every element). */
static int wrote(const ft_t1_arg *a, const void *init, const outputs *o, int k, long long i) {
    if (o->file[k]) return 1;
    if (o->written[k]) return o->written[k][i];
    return !untouched(a, init, o->host[k], i);
}

static int is_float(const ft_t1_arg *a) {
    return a->type == FT_T1_FLOAT || a->type == FT_T1_DOUBLE;
}

/* Compare what both runs wrote; *overlap counts the elements compared. */
static int agree(const ft_t1 *t, const ft_t1_bench *b, const outputs *ref, const outputs *got,
                 long long *overlap, char *why, size_t n) {
    *overlap = 0;
    for (int k = 0; k < ref->n; k++) {
        const ft_t1_arg *a = &t->args[ref->idx[k]];
        const void *init = ft_t1_bench_host(b, ref->idx[k]);
        double scale = 0;
        for (long long i = 0; i < a->elems; i++)
            if (wrote(a, init, ref, k, i)) {
                double v = fabs(elem(a, ref->host[k], i));
                if (isfinite(v) && v > scale) scale = v;
            }
        /* integers exactly; floats within a part of the output's scale */
        double tol = is_float(a) ? 1e-4 * scale + 1e-6 : 0;
        const char *whose = ref->file[k] ? "reference file" : "reference configuration";
        for (long long i = 0; i < a->elems; i++) {
            if (!wrote(a, init, ref, k, i)) continue;
            const int unwritten = !wrote(a, init, got, k, i);
            if (unwritten && !got->whole) continue; /* a sampled run did not reach it */
            /* Left as it was reset: a failure, but where a file expects an output the kernel
             * also reads to keep its first fill (that element's value is compared below). */
            if (unwritten && (!ref->file[k] || !a->reads)) {
                snprintf(why, n, "%s[%lld] not written, where the %s %s %.9g", a->name, i, whose,
                         ref->file[k] ? "has" : "wrote", elem(a, ref->host[k], i));
                return 0;
            }
            double r = elem(a, ref->host[k], i), g = elem(a, got->host[k], i);
            (*overlap)++;
            const size_t eb = a->elem_bytes;
            if (!memcmp((const unsigned char *)got->host[k] + (size_t)i * eb,
                        (const unsigned char *)ref->host[k] + (size_t)i * eb, eb))
                continue; /* the same to the bit (a NaN where the reference has that NaN) */
            if ((isnan(g) != isnan(r)) || (!isnan(r) && !(fabs(g - r) <= tol))) {
                if (is_float(a))
                    snprintf(why, n, "%s[%lld] = %.9g, the %s's %.9g (tolerance %.3g)", a->name, i,
                             g, whose, r, tol);
                else
                    snprintf(why, n, "%s[%lld] = %.9g, the %s's %.9g (integers compare exactly)",
                             a->name, i, g, whose, r);
                return 0;
            }
        }
    }
    return 1;
}

typedef struct runner {
    const ft_t1 *t;
    ft_t1_bench *b;
    ft_dev *d;
    const ft_t1_tune_opts *o;
#if FT_HAVE_CUDA
    ft_timer *timer;
#endif
} runner;

static ft_status read_outputs(runner *r, outputs *out, ft_err *err) {
    memset(out, 0, sizeof *out);
    out->whole = 0;
    for (int i = 0; i < r->t->nargs; i++) {
        const ft_t1_arg *a = &r->t->args[i];
        if (!a->output || a->scalar) continue;
        int k = out->n++;
        out->idx[k] = i;
        out->bytes[k] = (size_t)a->elems * a->elem_bytes;
        out->host[k] = malloc(out->bytes[k]);
        if (!out->host[k]) return ft_err_set(err, FT_ENOMEM, "%s: output %s: out of memory", r->t->path, a->name);
        ft_status s = ft_dev_copy(r->d, out->host[k], ft_t1_bench_arg(r->b, i), out->bytes[k], FT_COPY_D2H, err);
        if (s != FT_OK) return s;
    }
    return FT_OK;
}

/* Before a checked run: a write-only output to `fill` bytes (0xFF, a NaN pattern: what the run
 * leaves of it shows), an output it also reads to its first fill (the kernel's input). */
static ft_status reset_outputs(runner *r, int fill, ft_err *err) {
    for (int i = 0; i < r->t->nargs; i++) {
        const ft_t1_arg *a = &r->t->args[i];
        if (!a->output || a->scalar) continue;
        size_t bytes = (size_t)a->elems * a->elem_bytes;
        ft_status s = a->reads ? ft_dev_copy(r->d, ft_t1_bench_arg(r->b, i),
                                             ft_t1_bench_host(r->b, i), bytes, FT_COPY_H2D, err)
                               : ft_dev_memset(r->d, ft_t1_bench_arg(r->b, i), fill, bytes, err);
        if (s != FT_OK) return s;
    }
    return FT_OK;
}

/* One checked run of module m: the outputs reset (write-only ones to `fill` bytes), the whole
 * grid (or, on the emulator where !whole, the sample's blocks) launched, the outputs read into
 * *into. */
static ft_status checked_pass(runner *r, ft_dev_module *m, const long long g[3],
                              const long long bl[3], int whole, int fill, outputs *into,
                              ft_err *err) {
    ft_dim3 grid = {(unsigned)g[0], (unsigned)g[1], (unsigned)g[2]};
    ft_dim3 block = {(unsigned)bl[0], (unsigned)bl[1], (unsigned)bl[2]};
    size_t smem = (size_t)r->t->shared_bytes;
    void **argv = ft_t1_bench_argv(r->b);
    ft_status s = reset_outputs(r, fill, err);
    if (s == FT_OK && !whole) {
        ft_dim3 blocks[64];
        int nb = ft_t1_sample_blocks(g, r->o->blocks, blocks, 64);
        s = ft_dev_emu_launch_blocks(r->d, m, r->t->kernel_name, grid, block, smem, argv, blocks,
                                     nb, err);
    } else if (s == FT_OK) {
        s = ft_dev_launch(r->d, m, r->t->kernel_name, grid, block, smem, argv, err);
        if (s == FT_OK && ft_dev_kind_of(r->d) != FT_DEV_EMU) s = ft_dev_sync(r->d, err);
    }
    if (s == FT_OK) s = read_outputs(r, into, err);
    into->whole = whole;
    return s;
}

/* Run cfg once (checked, its write-only outputs reset to 0xFF) and time it: its statistics in
 * *stats. */
static ft_status run_one(runner *r, const ft_config *cfg, outputs *got, ft_stats *stats,
                         ft_err *err) {
    ft_dev_module *m = NULL;
    long long g[3], bl[3];
    ft_status s = ft_t1_launch(r->t, cfg, g, bl, err);
    if (s == FT_OK) s = ft_t1_bench_compile(r->b, cfg, &m, err);
    if (s != FT_OK) return s;
    ft_dim3 grid = {(unsigned)g[0], (unsigned)g[1], (unsigned)g[2]};
    ft_dim3 block = {(unsigned)bl[0], (unsigned)bl[1], (unsigned)bl[2]};
    size_t smem = (size_t)r->t->shared_bytes;
    void **argv = ft_t1_bench_argv(r->b);
    double xs[256];
    int reps = r->o->reps < 1 ? 1 : r->o->reps > 256 ? 256 : r->o->reps;
    if (ft_dev_kind_of(r->d) == FT_DEV_EMU) {
        ft_dim3 blocks[64];
        int nb = ft_t1_sample_blocks(g, r->o->blocks, blocks, 64);
        long long total = g[0] * g[1] * g[2];
        /* Timed: the sample, scaled to the grid. Checked: the whole grid where emulating it is
         * expected to take at most FT_T1_EMU_WHOLE_S, else the sample. */
        int emu_reps = reps > 5 ? 5 : reps;
        for (int k = 0; s == FT_OK && k < emu_reps; k++) {
            double t0 = ft_now_s();
            s = ft_dev_emu_launch_blocks(r->d, m, r->t->kernel_name, grid, block, smem, argv, blocks, nb, err);
            xs[k] = (ft_now_s() - t0) / nb * (double)total;
        }
        reps = emu_reps;
        int whole = s == FT_OK && xs[0] <= FT_T1_EMU_WHOLE_S;
        if (s == FT_OK) s = checked_pass(r, m, g, bl, whole, 0xFF, got, err);
    } else {
#if FT_HAVE_CUDA
        s = checked_pass(r, m, g, bl, 1, 0xFF, got, err);
        for (int k = 0; s == FT_OK && k < reps; k++) {
            int nk = 0;
            s = ft_timer_begin(r->timer, err);
            if (s == FT_OK) s = ft_dev_launch(r->d, m, r->t->kernel_name, grid, block, smem, argv, err);
            if (s == FT_OK) s = ft_timer_end(r->timer, &xs[k], &nk, err);
        }
#else
        s = ft_err_set(err, FT_EUNSUPPORTED, "built without the CUDA toolkit");
#endif
    }
    if (s != FT_OK) return s;
    ft_stats_compute(xs, reps, stats);
    return FT_OK;
}

/* Run cfg checked once more, as its first checked run was (got->whole), its write-only outputs
 * reset to 0x00 bytes this time, into *into. */
static ft_status check_again(runner *r, const ft_config *cfg, const outputs *got, outputs *into,
                             ft_err *err) {
    ft_dev_module *m = NULL;
    long long g[3], bl[3];
    ft_status s = ft_t1_launch(r->t, cfg, g, bl, err);
    if (s == FT_OK) s = ft_t1_bench_compile(r->b, cfg, &m, err); /* (from the cache) */
    if (s == FT_OK) s = checked_pass(r, m, g, bl, got->whole, 0x00, into, err);
    return s;
}

/* What a run wrote of each write-only output, from its two checked passes (reset to 0xFF, then
 * to 0x00): every element but those that kept both resets. */
static ft_status mark_written(const ft_t1 *t, outputs *first, const outputs *zeroed, ft_err *err) {
    for (int k = 0; k < first->n; k++) {
        const ft_t1_arg *a = &t->args[first->idx[k]];
        if (a->reads) continue;
        unsigned char *w = first->written[k] = malloc((size_t)a->elems);
        if (!w) return ft_err_set(err, FT_ENOMEM, "%s: output %s: out of memory", t->path, a->name);
        for (long long i = 0; i < a->elems; i++) {
            size_t at = (size_t)i * a->elem_bytes;
            w[i] = !(all_bytes((const unsigned char *)first->host[k] + at, a->elem_bytes, 0xFF) &&
                     all_bytes((const unsigned char *)zeroed->host[k] + at, a->elem_bytes, 0x00));
        }
    }
    return FT_OK;
}

/* Whether a candidate's failure (its message) is a check's: it ran, and its outputs disagreed
 * with the reference (agree()'s messages, or nothing to compare), rather than failing to
 * compile or run. */
static int check_failed(const char *msg) {
    return strstr(msg, "reference configuration") || strstr(msg, "reference file") ||
           strstr(msg, "no output element");
}

/* The backend's name as the cache and the log record it: "cuda" or "cuda-emu". */
static const char *backend_of(const ft_t1_tune_opts *o) {
    return o->backend ? o->backend : o->emulate ? "cuda-emu" : "cuda";
}

void ft_t1_device(const ft_t1_tune_opts *o, char *buf, size_t n) {
    const char *backend = backend_of(o);
    snprintf(buf, n, "%s", backend);
    ft_env env;
    ft_env_probe(&env);
    for (int i = 0; i < ft_backend_count(); i++)
        if (strcmp(ft_backend_at(i)->name, backend) == 0) ft_backend_device(ft_backend_at(i), &env, buf, n);
}

/* ---- the event log ------------------------------------------------------------------------- */

/* A result's statistics; one resumed from a cache has its median only. */
static json_t *stats_json(const ft_stats *st) {
    return st->samples ? ft_stats_to_json(st) : json_pack("{s:f}", "median_s", st->median);
}

typedef struct runlog {
    ft_eventlog *log;
    int lock;
    int measured;
} runlog;

static ft_status log_write(runlog *L, json_t *ev, ft_err *err) {
    if (!L->log) {
        json_decref(ev);
        return FT_OK;
    }
    return ft_eventlog_write(L->log, ev, err);
}

static ft_status log_start(runlog *L, const ft_t1 *t, const ft_t1_tune_opts *o,
                           const ft_t1_tune_result *res, ft_err *err) {
    L->lock = -1;
    if (!o->log && !o->listener) return FT_OK;
    if (o->log && (L->lock = ft_file_trylock(o->log, err)) < 0) return ft_err_wrap(err, "tune --t1");
    char run[32];
    ft_eventlog_run_id(run, sizeof run);
    ft_status s = ft_eventlog_open(o->log, run, &L->log, err);
    if (s != FT_OK) return s;
    if (o->listener) ft_eventlog_set_listener(L->log, o->listener, o->listener_ctx);
    char op[160];
    snprintf(op, sizeof op, "t1:%.150s", t->kernel_name);
    json_t *dims = json_object();
    static const char *const axis[] = {"x", "y", "z"};
    for (int d = 0; d < t->nproblem && d < 3; d++) json_object_set_new(dims, axis[d], json_integer(t->problem[d]));
    ft_config def;
    ft_config_default(&t->space, &def);
    int resumed_rejected = 0;
    for (int k = 0; k < res->resumed; k++) resumed_rejected += res->error[res->order[k]] != NULL;
    const char *backend = backend_of(o);
    json_t *ev = json_pack("{s:s, s:i, s:s, s:s, s:s, s:o, s:o, s:s, s:I, s:i, s:I, s:i, s:i, s:i, "
                           "s:o, s:s, s:s, s:s, s:{s:s, s:s}}",
                           "event", "run_start", "format", FT_EVENTLOG_FORMAT, "op", op, "backend",
                           backend, "preset", "", "dims", dims, "attrs", json_object(), "strategy",
                           ft_strategy_names[o->strategy], "seed", (json_int_t)o->seed, "budget",
                           o->budget, "space_size", (json_int_t)ft_space_size(&t->space),
                           "space_valid", res->n, "resumed", res->resumed, "resumed_rejected",
                           resumed_rejected, "default", ft_config_to_json(&t->space, &def),
                           "device", backend, "t1", t->path, "kernel_file", t->kernel_file, "key",
                           "t1", t->path, "kernel", t->kernel_name);
    if (!ev) return ft_err_set(err, FT_ENOMEM, "out of memory");
    return log_write(L, ev, err);
}

/* A rejected event of the log for cfg: why (reason, message: a new reference taken), and where
 * it was evaluated (where_of) when where is not NULL; NULL when out of memory. */
static json_t *rejected_event(const ft_t1 *t, const ft_config *cfg, const char *reason,
                              json_t *message, const json_t *where) {
    json_t *ev = json_pack("{s:s, s:o, s:s, s:o}", "event", "rejected", "config",
                           ft_config_to_json(&t->space, cfg), "reason", reason, "message", message);
    if (ev && where) json_object_update(ev, (json_t *)where);
    return ev;
}

/* Candidate i's event: measured (with its statistics) or rejected (why). */
static ft_status log_eval(runlog *L, const ft_t1 *t, const ft_t1_tune_result *res, int i,
                          const ft_stats *st, const json_t *where, ft_err *err) {
    if (!L->log) return FT_OK;
    json_t *ev;
    if (res->error[i]) {
        const char *e = res->error[i];
        ev = rejected_event(t, &res->cfgs[i], check_failed(e) ? "verify" : "error", json_string(e),
                            NULL);
    } else {
        ev = json_pack("{s:s, s:o, s:o, s:i}", "event", "measured", "config",
                       ft_config_to_json(&t->space, &res->cfgs[i]), "stats", ft_stats_to_json(st),
                       "evaluation", ++L->measured);
    }
    if (!ev) return ft_err_set(err, FT_ENOMEM, "out of memory");
    /* What evaluating it took (compile, check, timing), which `export` writes as its cost. */
    if (isfinite(res->cost[i])) json_object_set_new(ev, "cost_s", json_real(res->cost[i]));
    if (where) json_object_update(ev, (json_t *)where);
    return log_write(L, ev, err);
}

static void log_end(runlog *L, const ft_t1 *t, const ft_t1_tune_result *res, const char *why_end,
                    ft_err *err) {
    if (L->log) {
        const int best = res->best;
        const double ref = res->reference >= 0 ? res->secs[res->reference] : NAN;
        json_t *wst = best < 0 ? json_null() : stats_json(&res->best_stats);
        json_t *ev = json_pack(
            "{s:s, s:o, s:o, s:o, s:o, s:i, s:i, s:i, s:s, s:b}", "event", "run_end", "winner",
            best >= 0 ? ft_config_to_json(&t->space, &res->cfgs[best]) : json_null(), "stats", wst,
            "default_stats",
            res->reference >= 0 && isfinite(ref) ? stats_json(&res->ref_stats) : json_null(),
            "speedup", best >= 0 && isfinite(ref) ? json_real(ref / res->secs[best]) : json_null(),
            "evaluations", res->nevals, "rejected", res->failed, "resumed", res->resumed,
            "search_end", why_end, "interrupted", res->interrupted);
        if (ev) log_write(L, ev, err);
        ft_eventlog_close(L->log);
    }
    if (L->lock >= 0) ft_file_unlock(L->lock);
}

static const char *kt_error_of(const char *msg) {
    if (strstr(msg, "compil") || strstr(msg, "NVRTC")) return "CompilationFailedConfig";
    return "RuntimeFailedConfig";
}

/* Candidate i's outcome as both formats record it. */
static ft_export_result outcome_of(const ft_t1_tune_result *r, int i) {
    const char *e = r->error[i];
    return (ft_export_result){
        .failed = e != NULL,
        .kt_error = e ? kt_error_of(e) : NULL,
        .t4_invalidity = !e                ? NULL
                         : check_failed(e)  ? "correctness"
                         : strstr(e, "compil") ? "compile"
                                            : "runtime",
        .time_ms = r->secs[i] * 1e3,
        .cost_ms = r->cost[i] * 1e3,
        .bench_ms = 0,
        .t = r->when[i]};
}

static json_t *problem_size_json(const ft_t1 *t) {
    json_t *ps = json_array();
    for (int d = 0; d < t->nproblem; d++) json_array_append_new(ps, json_integer(t->problem[d]));
    return ps;
}

/* ---- expected outputs from files ------------------------------------------------------------ */

static int npy_matches(ft_t1_type t, ft_dtype d) {
    switch (t) {
    case FT_T1_FLOAT: return d == FT_F32;
    case FT_T1_DOUBLE: return d == FT_F64;
    case FT_T1_INT32: return d == FT_I32;
    case FT_T1_UINT8: return d == FT_U8;
    case FT_T1_INT8:
    case FT_T1_UINT32:
    case FT_T1_INT16:
    case FT_T1_UINT16: return 0; /* no such .npy type here (core/npy.c) */
    }
    return 0;
}

/* Read each "NAME=FILE.npy" of o->refs into expect[the argument's index] (malloc'd), checked
 * against the argument: an output vector of the file, of its type and size. */
static ft_status load_expected(const ft_t1 *t, const ft_t1_tune_opts *o, void **expect,
                               ft_err *err) {
    static const char *const tname[] = {"float", "double", "int32", "uint8", "int8"};
    for (int k = 0; k < o->nrefs; k++) {
        const char *spec = o->refs[k], *eq = strchr(spec, '=');
        if (!eq || eq == spec || !eq[1])
            return ft_err_set(err, FT_EINVAL, "--reference %s: NAME=FILE.npy is needed", spec);
        int a = -1;
        for (int i = 0; i < t->nargs; i++)
            if (strlen(t->args[i].name) == (size_t)(eq - spec) &&
                strncmp(t->args[i].name, spec, (size_t)(eq - spec)) == 0)
                a = i;
        if (a < 0 || !t->args[a].output || t->args[a].scalar) {
            char outs[256] = "";
            for (int i = 0; i < t->nargs; i++)
                if (t->args[i].output && !t->args[i].scalar)
                    snprintf(outs + strlen(outs), sizeof outs - strlen(outs), "%s%s", outs[0] ? ", " : "",
                             t->args[i].name);
            return ft_err_set(err, FT_EINVAL, "--reference %.*s: not an output of %s (its outputs: %s)",
                              (int)(eq - spec), spec, t->path, outs[0] ? outs : "none");
        }
        if (expect[a])
            return ft_err_set(err, FT_EINVAL, "--reference %s: output %s given twice", spec, t->args[a].name);
        const ft_t1_arg *arg = &t->args[a];
        ft_tensor *x = NULL;
        ft_status st = ft_npy_load(eq + 1, &x, err);
        if (st != FT_OK) return st;
        const long long n = (long long)ft_tensor_numel(x);
        if (!npy_matches(arg->type, x->dtype) || n != arg->elems) {
            st = ft_err_set(err, FT_EINVAL,
                            "--reference %s: %lld %s values, where output %s holds %lld %s",
                            spec, n, ft_dtype_name(x->dtype), arg->name, arg->elems, tname[arg->type]);
            ft_tensor_free(x);
            return st;
        }
        expect[a] = malloc((size_t)n * arg->elem_bytes);
        if (expect[a]) memcpy(expect[a], x->data, (size_t)n * arg->elem_bytes);
        ft_tensor_free(x);
        if (!expect[a]) return ft_err_set(err, FT_ENOMEM, "out of memory");
    }
    return FT_OK;
}

/* ---- the Kernel Tuner cache of the run: resumed from, appended to ---------------------------- */

/* Sum of the numbers of an entry's cost fields (ms); NaN when it has none. */
static double entry_cost_ms(const json_t *e) {
    static const char *const parts[] = {"compile_time", "verification_time", "benchmark_time"};
    double sum = 0;
    int any = 0;
    for (size_t k = 0; k < sizeof parts / sizeof parts[0]; k++) {
        const json_t *v = json_object_get(e, parts[k]);
        if (json_is_number(v)) sum += json_number_value(v), any = 1;
    }
    return any ? sum : NAN;
}

/* Epoch seconds of a cache entry's timestamp as flaretune and Kernel Tuner write it
 * ("2026-12-05 04:12:19.000000+00:00", UTC); NaN when it has none that reads so. */
static double entry_time(const json_t *e) {
    const char *ts = json_string_value(json_object_get(e, "timestamp"));
    struct tm tm;
    memset(&tm, 0, sizeof tm);
    double frac = 0;
    int used = 0;
    if (!ts || sscanf(ts, "%d-%d-%d %d:%d:%d%n", &tm.tm_year, &tm.tm_mon, &tm.tm_mday, &tm.tm_hour,
                      &tm.tm_min, &tm.tm_sec, &used) != 6)
        return NAN;
    if (ts[used] == '.') frac = strtod(ts + used, NULL);
    tm.tm_year -= 1900;
    tm.tm_mon -= 1;
    const time_t t = timegm(&tm);
    return t == (time_t)-1 ? NAN : (double)t + frac;
}

/* Read the cache at path (when there is one) into res: each entry of a candidate becomes that
 * candidate's result, resumed. Then start writing path again with those entries and any others
 * it held (*out). A cache of another problem is refused, naming the field that differs. */
static ft_status cache_open(const ft_t1 *t, const ft_t1_tune_opts *o, const ft_config *cands,
                            ft_t1_tune_result *res, ft_kt_cache **out, ft_err *err) {
    *out = NULL;
    const char *path = o->kt_cache;
    const char *device = backend_of(o);
    json_t *want = ft_export_wrap(&t->space, json_object(), FT_EXPORT_KT_CACHE, device,
                                  t->kernel_name, problem_size_json(t), device);
    if (!want) return ft_err_set(err, FT_ENOMEM, "out of memory");
    if (access(path, F_OK) != 0) return ft_kt_cache_begin(path, want, out, err);
    json_t *had = NULL;
    ft_status s = ft_kt_cache_read(path, &had, err);
    static const char *const same[] = {"kernel_name", "device_name", "problem_size",
                                       "tune_params_keys", "tune_params"};
    for (size_t k = 0; s == FT_OK && k < sizeof same / sizeof same[0]; k++)
        if (!json_equal(json_object_get(had, same[k]), json_object_get(want, same[k])))
            s = ft_err_set(err, FT_EINVAL,
                           "%s: a Kernel Tuner cache of another tuning problem (its %s differs "
                           "from this run's): give another --kt-cache, or move it away",
                           path, same[k]);
    json_t *cache = s == FT_OK ? json_object_get(had, "cache") : NULL;
    size_t matched = 0;
    for (int i = 0; cache && s == FT_OK && i < res->n; i++) {
        char key[4096];
        ft_t1_key(t, &cands[i], key, sizeof key);
        const json_t *e = json_object_get(cache, key);
        if (!e) continue;
        const json_t *tv = json_object_get(e, "time");
        /* a time, or the name of the error that failed it; anything else is a broken entry,
         * refused as replay refuses it rather than counted as a failed configuration */
        if (!json_is_string(tv) && !(json_is_number(tv) && json_number_value(tv) > 0)) {
            s = ft_err_set(err, FT_EFORMAT,
                           "%s: cache entry \"%.200s\" has no positive \"time\" (ms) nor an "
                           "error name: mend or remove it",
                           path, key);
            break;
        }
        matched++;
        double c = entry_cost_ms(e);
        res->cost[i] = isnan(c) ? 0 : c / 1e3;
        res->when[i] = entry_time(e);
        if (json_is_number(tv) && json_number_value(tv) > 0) {
            res->secs[i] = json_number_value(tv) / 1e3;
        } else {
            char why[160];
            /* the name of the error that failed it (the entry is one or the other) */
            snprintf(why, sizeof why, "in an earlier run: %.100s", json_string_value(tv));
            res->error[i] = strdup(why);
            if (!res->error[i]) s = ft_err_set(err, FT_ENOMEM, "out of memory");
            res->failed++;
        }
        res->order[res->nevals++] = i;
        res->resumed++;
    }
    if (s == FT_OK) {
        res->resumed_unused = (int)(json_object_size(cache) - matched);
        json_object_set(want, "cache", cache); /* every entry kept, used or not */
        s = ft_kt_cache_begin(path, want, out, err);
        want = NULL;
    }
    json_decref(want);
    json_decref(had);
    return s;
}

static ft_status cache_add(ft_kt_cache *c, const ft_t1 *t, const ft_t1_tune_result *r, int i,
                           ft_err *err) {
    if (!c) return FT_OK;
    ft_export_result x = outcome_of(r, i);
    char key[4096];
    json_t *e = ft_export_entry(&t->space, &r->cfgs[i], &x, FT_EXPORT_KT_CACHE, key, sizeof key);
    if (!e) return ft_err_set(err, FT_ENOMEM, "out of memory");
    return ft_kt_cache_add(c, key, e, err);
}

/* ---- evaluating candidates, here or on a worker ------------------------------------------- */

/* What a process evaluates candidates with: the device, the inputs and the clock (runner), and
 * what each candidate's outputs are checked against (want: the reference files where given,
 * else the reference configuration's outputs, ref). */
typedef struct evaluator {
    runner r;
    void *expect[FT_T1_MAX_ARGS];
    outputs ref, want; /* want borrows its arrays from ref and expect */
} evaluator;

/* Open the device, the inputs (from o->seed: every process of a run has the same) and the
 * clock; note says what is worth saying (a clock other than CUPTI). */
static ft_status evaluator_open(evaluator *ev, const ft_t1 *t, const ft_t1_tune_opts *o, char *note,
                                size_t nnote, ft_err *err) {
    (void)note, (void)nnote; /* (written only where CUPTI can be missing) */
    memset(ev, 0, sizeof *ev);
    ev->r = (runner){.t = t, .o = o};
    ft_status s = load_expected(t, o, ev->expect, err);
    if (s == FT_OK) s = ft_dev_open(o->emulate ? FT_DEV_EMU : FT_DEV_CUDA, 0, &ev->r.d, err);
    if (s == FT_OK) s = ft_t1_bench_open(t, ev->r.d, o->seed, &ev->r.b, err);
#if FT_HAVE_CUDA
    if (s == FT_OK && !o->emulate) {
        ft_err e2 = {0};
        if (ft_timer_open(ev->r.d, FT_TIMER_CUPTI, &ev->r.timer, &e2) != FT_OK) {
            snprintf(note, nnote, "CUPTI: %.200s; timed with CUDA events", e2.msg);
            s = ft_timer_open(ev->r.d, FT_TIMER_EVENTS, &ev->r.timer, err);
        }
    }
#endif
    return s;
}

/* Close it; clock (n bytes, NULL: not wanted) gets what timed the runs, where a device opened,
 * and note (nnote bytes, NULL: not wanted) what the compiles found worth saying (a constant
 * argument without its symbol) after what it held. */
static void evaluator_close(evaluator *ev, char *clock, size_t n, char *note, size_t nnote) {
    if (clock && ev->r.d)
        snprintf(clock, n, "%s", ev->r.o->emulate ? "emulator (sampled blocks, scaled to the grid)" : "device");
    const char *found = ev->r.b ? ft_t1_bench_note(ev->r.b) : "";
    if (note && found[0]) {
        size_t k = strlen(note);
        if (k < nnote) snprintf(note + k, nnote - k, "%s%s", k ? "; " : "", found);
    }
    outputs_free(&ev->ref);
    for (int i = 0; i < FT_T1_MAX_ARGS; i++) free(ev->expect[i]);
#if FT_HAVE_CUDA
    if (ev->r.timer) ft_timer_close(ev->r.timer);
#endif
    ft_t1_bench_close(ev->r.b);
    if (ev->r.d) ft_dev_close(ev->r.d);
}

/* Run the reference (default) configuration: what every candidate is checked against. It is
 * checked against the reference files itself, where given: *why says how it disagrees ("" when
 * it agrees). */
static ft_status evaluate_reference(evaluator *ev, const ft_config *def, ft_stats *st, char *why,
                                    size_t n, ft_err *err) {
    why[0] = '\0';
    outputs zeroed = {0};
    ft_status s = run_one(&ev->r, def, &ev->ref, st, err);
    if (s == FT_OK) s = check_again(&ev->r, def, &ev->ref, &zeroed, err);
    if (s == FT_OK) s = mark_written(ev->r.t, &ev->ref, &zeroed, err);
    if (s != FT_OK) {
        outputs_free(&zeroed);
        /* Compiling and launching call their failures bad arguments (a candidate's values); the
         * default configuration's are the kernel's or the file's: not a usage error. */
        if (err->status == FT_EINVAL) err->status = FT_EFORMAT;
        return ft_err_wrap(err, "the reference (default) configuration");
    }
    /* Its two runs must agree where it wrote: a kernel whose results depend on what an output
     * held before the run reads it, and nothing can be checked against it. */
    long long both = 0;
    char how[512];
    for (int k = 0; k < zeroed.n; k++)
        zeroed.written[k] = ev->ref.written[k]; /* (borrowed) */
    int same = agree(ev->r.t, ev->r.b, &ev->ref, &zeroed, &both, how, sizeof how);
    for (int k = 0; k < zeroed.n; k++)
        zeroed.written[k] = NULL;
    outputs_free(&zeroed);
    if (!same)
        return ft_err_set(err, FT_EFORMAT,
                          "%s: the reference (default) configuration's outputs depend on what they "
                          "held before the run (reset to 0xFF bytes, then to 0x00 bytes: %s): the "
                          "kernel reads an output declared WriteOnly; declare it ReadWrite "
                          "(AccessType), so that its fill is its input",
                          ev->r.t->path, how);
    /* A write-only output the reference left untouched, with no file to stand in for it: every
     * candidate that writes it would be rejected for having nothing to compare, and the broken
     * default would win. A read-write output may rightly stay as its fill (a status or overflow
     * buffer); only when no output has anything to compare (each read-write one as its fill,
     * as with a coefficient filled with 0) is that the same failure. */
    int comparable = 0, unchanged = -1;
    for (int k = 0; k < ev->ref.n; k++) {
        if (ev->expect[ev->ref.idx[k]]) {
            comparable = 1;
            continue;
        }
        const ft_t1_arg *a = &ev->r.t->args[ev->ref.idx[k]];
        const void *init = ft_t1_bench_host(ev->r.b, ev->ref.idx[k]);
        long long i = 0;
        while (i < a->elems && !wrote(a, init, &ev->ref, k, i))
            i++;
        if (i < a->elems)
            comparable = 1;
        else if (a->reads)
            unchanged = k;
        else
            return ft_err_set(err, FT_EFORMAT,
                              "%s: the reference (default) configuration wrote no element of its "
                              "output %s: nothing to check the other configurations against (fix "
                              "the kernel or its default values, or give --reference files)",
                              ev->r.t->path, a->name);
    }
    if (!comparable && unchanged >= 0)
        return ft_err_set(err, FT_EFORMAT,
                          "%s: the reference (default) configuration changed no element of its "
                          "output %s (each still holds its fill), nor wrote any other output: "
                          "nothing to check the other configurations against (fix the kernel, its "
                          "default values or its inputs' fills, or give --reference files)",
                          ev->r.t->path, ev->r.t->args[ev->ref.idx[unchanged]].name);
    outputs *want = &ev->want;
    want->n = ev->ref.n;
    want->whole = ev->ref.whole;
    for (int k = 0; k < ev->ref.n; k++) {
        want->idx[k] = ev->ref.idx[k];
        want->file[k] = ev->expect[ev->ref.idx[k]] != NULL;
        want->host[k] = want->file[k] ? ev->expect[ev->ref.idx[k]] : ev->ref.host[k];
        want->written[k] = want->file[k] ? NULL : ev->ref.written[k];
    }
    long long overlap = 0;
    if (ev->r.o->nrefs > 0) agree(ev->r.t, ev->r.b, want, &ev->ref, &overlap, why, n);
    return FT_OK;
}

/* Compile, run, check and time cfg: its statistics in *st, or why it is rejected in why (""
 * when it is not). Running out of memory, a file system error (a full disk, a compiler killed
 * by a signal) and a stop requested while it ran are errors, not a verdict on cfg: nothing is
 * recorded of it, so a rerun evaluates it again. A fault of cfg's kernel on the GPU is both:
 * FT_ELOST, with why set, for the context is lost to every later launch. */
static ft_status evaluate_candidate(evaluator *ev, const ft_config *cfg, ft_stats *st, char *why,
                                    size_t n, ft_err *err) {
    outputs got = {0};
    ft_err e = {0};
    why[0] = '\0';
    ft_status s = run_one(&ev->r, cfg, &got, st, &e);
    /* An element it left as the 0xFF reset, where the reference wrote: written with those bytes
     * (an int32 -1, a uint8 255) or never written? A second checked run, reset to 0x00, says. */
    int unsure = 0;
    for (int k = 0; s == FT_OK && k < got.n && !unsure; k++) {
        const ft_t1_arg *a = &ev->r.t->args[got.idx[k]];
        const void *init = ft_t1_bench_host(ev->r.b, got.idx[k]);
        for (long long i = 0; !a->reads && i < a->elems && !unsure; i++)
            unsure = wrote(a, init, &ev->want, k, i) && untouched(a, init, got.host[k], i);
    }
    if (unsure) {
        outputs zeroed = {0};
        s = check_again(&ev->r, cfg, &got, &zeroed, &e);
        if (s == FT_OK) s = mark_written(ev->r.t, &got, &zeroed, &e);
        outputs_free(&zeroed);
    }
    long long overlap = 0;
    if (s != FT_OK && s != FT_ELOST && ev->r.o->stop && *ev->r.o->stop) {
        outputs_free(&got);
        return ft_err_set(err, FT_EBUSY, "stopped while a configuration ran: %s", e.msg);
    }
    if (s == FT_ENOMEM || s == FT_EIO || s == FT_ELOST) {
        /* (a fault that lost the GPU's context is this configuration's: why says so) */
        if (s == FT_ELOST) snprintf(why, n, "%s", e.msg);
        outputs_free(&got);
        if (err) *err = e;
        return s;
    }
    if (s != FT_OK) snprintf(why, n, "%s", e.msg[0] ? e.msg : "failed");
    else if (!agree(ev->r.t, ev->r.b, &ev->want, &got, &overlap, why, n)) {
        if (!why[0]) snprintf(why, n, "its outputs disagree with the reference configuration's");
    } else if (overlap == 0)
        snprintf(why, n, "no output element written by both this and the reference run to compare");
    outputs_free(&got);
    return FT_OK;
}

/* Where a distributed run's candidate was evaluated: {"rank", "host", "device"} (NULL when the
 * run is not distributed). */
static json_t *where_of(const ft_t1_tune_opts *o) {
    if (o->rank < 0) return NULL;
    char host[256] = "";
    gethostname(host, sizeof host - 1);
    char device[256];
    ft_t1_device(o, device, sizeof device);
    return json_pack("{s:i, s:s, s:s}", "rank", o->rank, "host", host, "device", device);
}

/* A worker's answer for one candidate: [{"event": "measured", "stats", "cost_s"}] or
 * [{"event": "rejected", "message", "cost_s"}], each with where it was evaluated (where_of). */
static json_t *answer(const json_t *where, const ft_stats *st, const char *why, double cost) {
    json_t *a = why[0] ? json_pack("{s:s, s:s, s:f}", "event", "rejected", "message", why, "cost_s", cost)
                       : json_pack("{s:s, s:o, s:f}", "event", "measured", "stats", ft_stats_to_json(st),
                                   "cost_s", cost);
    if (a && where) json_object_set(a, "where", (json_t *)where);
    return a ? json_pack("[o]", a) : NULL;
}

/* ---- the search ----------------------------------------------------------------------------- */

/* A run's bookkeeping: where each outcome goes. */
typedef struct search {
    const ft_t1 *t;
    const ft_t1_tune_opts *o;
    ft_t1_tune_result *res;
    ft_kt_cache *cache;
    runlog *L;
    int stats_of; /* whose statistics res->best_stats holds: the fastest this run measured */
    json_t *here; /* where this process evaluates (where_of) */
    char *armed_cache, *armed_log; /* the records arm() registered last (core/epitaph.h) */
} search;

/* What the log says of a configuration in flight when the process ended: what could end it. */
static json_t *ended_message(const ft_t1_tune_opts *o) {
    if (!(o->candidate_timeout_s > 0))
        return json_string("the process ended while it ran: it reached past a device buffer, or "
                           "a second Ctrl-C ended it (the process's last line said which)");
    return json_sprintf("the process ended while it ran: it %stook longer than "
                        "--candidate-timeout %g s, or a second Ctrl-C ended it (the process's "
                        "last line said which)",
                        o->emulate ? "reached past a device buffer or " : "",
                        o->candidate_timeout_s);
}

/* --candidate-timeout: from on until off, SIGALRM ends the process past the limit (the command
 * line's handler writes the records of core/epitaph.h first). */
static void deadline(const ft_t1_tune_opts *o, int on) {
    if (o->candidate_timeout_s > 0) alarm(on ? (unsigned)ceil(o->candidate_timeout_s) : 0);
}

/* Before candidate i runs here: its failure, as the Kernel Tuner cache and the log would record
 * it, registered to be written should the process end while it runs (core/epitaph.h): on the
 * emulator a kernel that reaches past a buffer ends it (emu_guard.h), and on any backend a
 * candidate past --candidate-timeout does, for a launch cannot be stopped part way. The run
 * resumed from the cache then goes on past it instead of ending on it again (the log's record
 * informs; --t1 resumes from the cache alone). The texts are kept until the next candidate's:
 * a handler may be writing them as they are cleared. */
static void arm(search *S, int i) {
    deadline(S->o, 1);
    free(S->armed_cache);
    free(S->armed_log);
    S->armed_cache = S->armed_log = NULL;
    if (!S->o->emulate && !(S->o->candidate_timeout_s > 0)) return;
    if (S->cache) {
        ft_export_result x = {.failed = 1,
                              .kt_error = "RuntimeFailedConfig",
                              .t4_invalidity = "runtime",
                              .time_ms = NAN,
                              .t = (double)time(NULL)};
        char key[4096];
        json_t *e = ft_export_entry(&S->t->space, &S->res->cfgs[i], &x, FT_EXPORT_KT_CACHE, key,
                                    sizeof key);
        size_t n = 0;
        S->armed_cache = e ? ft_kt_cache_line(S->cache, key, e, &n) : NULL;
        if (S->armed_cache) ft_epitaph_add(ft_kt_cache_fd(S->cache), S->armed_cache, n, 1);
    }
    if (S->L->log) {
        json_t *ev = rejected_event(S->t, &S->res->cfgs[i], "ended", ended_message(S->o), S->here);
        size_t n = 0;
        S->armed_log = ev ? ft_eventlog_line(S->L->log, ev, &n) : NULL;
        if (S->armed_log) ft_epitaph_add(ft_eventlog_fd(S->L->log), S->armed_log, n, 0);
        json_decref(ev);
    }
}

/* The candidate ended on its own: no alarm, no record (its own outcome is written next). */
static void disarm(const search *S) {
    deadline(S->o, 0);
    ft_epitaph_clear();
}

/* Candidate i's outcome (its statistics, or why it was rejected), measured here or by a worker,
 * cost seconds after it was taken: into the result, the Kernel Tuner cache, the log and the
 * progress callback. The strategy hears it from the caller. */
static ft_status record(search *S, int i, const ft_stats *st, const char *why, double cost,
                        const json_t *where, ft_err *err) {
    ft_t1_tune_result *res = S->res;
    res->cost[i] = cost;
    res->when[i] = (double)time(NULL);
    res->order[res->nevals++] = i;
    if (why[0]) {
        res->error[i] = strdup(why);
        if (!res->error[i]) return ft_err_set(err, FT_ENOMEM, "out of memory");
        res->failed++;
    } else {
        res->secs[i] = st->median;
        if (S->stats_of < 0 || st->median < res->secs[S->stats_of]) {
            res->best_stats = *st;
            S->stats_of = i;
        }
    }
    if (S->o->progress) S->o->progress(S->o->progress_ctx, res, i, res->error[i]);
    ft_status s = cache_add(S->cache, S->t, res, i, err);
    if (s == FT_OK) s = log_eval(S->L, S->t, res, i, st, where ? where : S->here, err);
    return s;
}

static int stopping(const ft_t1_tune_opts *o) { return o->stop && *o->stop; }

/* Candidate i, taken t0 seconds into the run, evaluated in this process and recorded. FT_EBUSY
 * when a stop came while it ran (nothing recorded: the run ends interrupted). A kernel that
 * faulted on the GPU is recorded as failed, and then the run ends (FT_ELOST): nothing more can
 * run in this process, and the same command resumes past it. */
static ft_status evaluate_here(search *S, evaluator *ev, int i, double t0, ft_err *err) {
    ft_stats cst = {0};
    char why[512];
    ft_err e = {0};
    arm(S, i);
    ft_status s = evaluate_candidate(ev, &S->res->cfgs[i], &cst, why, sizeof why, &e);
    disarm(S);
    if (s == FT_EBUSY && stopping(S->o)) return FT_EBUSY;
    if (s != FT_OK && s != FT_ELOST) {
        if (err) *err = e;
        return s;
    }
    ft_status r = record(S, i, &cst, why, ft_now_s() - t0, NULL, err);
    if (r != FT_OK || s == FT_OK) return r;
    if (!err) return s;
    *err = e;
    char cfg[256];
    ft_config_format(&S->t->space, &S->res->cfgs[i], cfg, sizeof cfg);
    return ft_err_wrap(err, "the GPU is lost to this run: configuration %s faulted%s", cfg,
                       S->cache ? ", and the Kernel Tuner cache records it as failed: the same "
                                  "command resumes past it"
                                : " (with --kt-cache the same command would resume past it)");
}

static void tell(ft_strategy *st, const ft_t1_tune_result *res, int i) {
    ft_strategy_report_cost(st, i, res->cost[i]);
    ft_strategy_report(st, i, res->error[i] ? INFINITY : res->secs[i]);
}

/* One batch: up to one candidate per process (this one, when it takes part, and each worker),
 * proposed together, shared out as the op tuner shares them (ft_tune_batch_owner), recorded and
 * told to the strategy in the order proposed. *more: the strategy had candidates to propose. */
static ft_status search_batch(search *S, evaluator *ev, ft_strategy *st, int left, int *more,
                              ft_err *err) {
    const ft_tune_workers *w = S->o->workers;
    ft_t1_tune_result *res = S->res;
    int k = w->n + w->self, idx[FT_T1_MAX_BATCH], sent = 0;
    if (k > left) k = left;
    if (k > FT_T1_MAX_BATCH) k = FT_T1_MAX_BATCH;
    int n = k > 0 ? ft_strategy_next_batch(st, k, idx) : 0;
    *more = n > 0;
    ft_status s = FT_OK;
    double t0[FT_T1_MAX_BATCH];
    for (int j = 0; j < n && s == FT_OK; j++) {
        t0[j] = ft_now_s();
        if (ft_tune_batch_owner(w, j) < 0) continue;
        json_t *cfg = ft_config_to_json(&S->t->space, &res->cfgs[idx[j]]);
        s = w->send(w->ctx, ft_tune_batch_owner(w, j), cfg, NAN, err);
        json_decref(cfg);
        if (s == FT_OK) sent = j + 1;
    }
    for (int j = 0; j < n && s == FT_OK; j++) {
        if (ft_tune_batch_owner(w, j) >= 0) continue;
        s = evaluate_here(S, ev, idx[j], t0[j], err);
        if (s == FT_EBUSY) { /* not recorded: the run ends interrupted */
            s = FT_OK;
            break;
        }
    }
    /* Every answer is collected, even after an error here: what the workers measured is kept. */
    for (int j = 0; j < sent; j++) {
        if (ft_tune_batch_owner(w, j) < 0) continue;
        json_t *events = NULL;
        ft_status r = w->recv(w->ctx, ft_tune_batch_owner(w, j), &events, err);
        json_t *e = json_array_get(events, 0);
        const char *kind = json_string_value(json_object_get(e, "event"));
        if (r == FT_OK && !kind)
            r = ft_err_set(err, FT_EFORMAT, "a worker's answer has no event");
        ft_stats cst = {0};
        char why[512] = "";
        if (r == FT_OK && strcmp(kind, "measured") == 0)
            ft_stats_from_json(json_object_get(e, "stats"), &cst);
        else if (r == FT_OK)
            snprintf(why, sizeof why, "%s", json_string_value(json_object_get(e, "message"))
                                                ? json_string_value(json_object_get(e, "message"))
                                                : "its worker sent no reason");
        if (r == FT_OK)
            r = record(S, idx[j], &cst, why, json_number_value(json_object_get(e, "cost_s")),
                       json_object_get(e, "where"), err);
        json_decref(events);
        if (s == FT_OK) s = r;
    }
    for (int j = 0; j < n && s == FT_OK; j++)
        if (isfinite(res->secs[idx[j]]) || res->error[idx[j]]) tell(st, res, idx[j]);
    return s;
}

/* An empty result over t's candidates (space order): nothing evaluated yet, every time NaN. On
 * failure what was allocated is left for ft_t1_tune_result_free. */
static ft_status result_begin(const ft_t1 *t, ft_t1_tune_result *r, ft_err *err) {
    memset(r, 0, sizeof *r);
    r->best = r->reference = -1;
    int64_t n64 = 0;
    ft_status s = ft_t1_enumerate(t, &r->cfgs, &n64, err);
    if (s != FT_OK) return s;
    if (n64 > (1 << 22))
        return ft_err_set(err, FT_EFORMAT,
                          "%s: its conditions allow %lld configurations: more than tune takes "
                          "(2^22)",
                          t->path, (long long)n64);
    const int n = r->n = (int)n64;
    r->secs = calloc((size_t)n, sizeof *r->secs);
    r->cost = calloc((size_t)n, sizeof *r->cost);
    r->when = calloc((size_t)n, sizeof *r->when);
    r->error = calloc((size_t)n, sizeof *r->error);
    r->order = calloc((size_t)n, sizeof *r->order);
    if (!r->secs || !r->cost || !r->when || !r->error || !r->order)
        return ft_err_set(err, FT_ENOMEM, "%s: out of memory", t->path);
    for (int i = 0; i < n; i++)
        r->secs[i] = NAN;
    return FT_OK;
}

ft_status ft_t1_tune(ft_t1 *t, const ft_t1_tune_opts *o, ft_t1_tune_result *res, ft_err *err) {
    ft_status s = result_begin(t, res, err);
    if (s != FT_OK) return s;
    ft_config *cands = res->cfgs;
    const int n = res->n;
    evaluator ev;
    s = evaluator_open(&ev, t, o, res->note, sizeof res->note, err);
    runlog L = {.lock = -1};
    search S = {.t = t, .o = o, .res = res, .L = &L, .stats_of = -1, .here = where_of(o)};
    /* The cache is one run's: a second run on it would rewrite it from what it had read and lose
     * the first one's later entries (the log is locked the same way, in log_start). */
    int cache_lock = -1;
    if (s == FT_OK && o->kt_cache && (cache_lock = ft_file_trylock(o->kt_cache, err)) < 0)
        s = ft_err_wrap(err, "tune --t1: --kt-cache");
    if (s == FT_OK && o->kt_cache) s = cache_open(t, o, cands, res, &S.cache, err);
    if (s == FT_OK) s = log_start(&L, t, o, res, err);
    /* The reference: the default configuration, run and timed first. */
    ft_config def;
    ft_config_default(&t->space, &def);
    res->reference = (int)ft_t1_position(t, cands, n, &def);
    if (s == FT_OK && res->reference < 0)
        s = ft_err_set(err, FT_EINTERNAL, "%s: the default configuration is not a candidate", t->path);
    /* Its outputs are what every candidate is checked against, so it runs even when resumed
     * (its resumed figures stand). */
    const int ref_resumed = s == FT_OK && (isfinite(res->secs[res->reference]) || res->error[res->reference]);
    if (s == FT_OK) {
        double t0 = ft_now_s();
        ft_stats rst = {0};
        char why[512];
        deadline(o, 1);
        s = evaluate_reference(&ev, &cands[res->reference], &rst, why, sizeof why, err);
        deadline(o, 0);
        if (s == FT_OK && !ref_resumed) {
            if (!why[0]) res->ref_stats = rst;
            s = record(&S, res->reference, &rst, why, ft_now_s() - t0, NULL, err);
        } else if (s == FT_OK && o->progress) {
            o->progress(o->progress_ctx, res, res->reference, why[0] ? why : NULL);
        }
    }
    ft_strategy *st = s == FT_OK ? ft_strategy_new((ft_strategy_kind)o->strategy, &t->space, cands, n, o->seed) : NULL;
    if (s == FT_OK && !st) s = ft_err_set(err, FT_ENOMEM, "%s: out of memory", t->path);
    if (st) {
        tell(st, res, res->reference);
        for (int k = 0; k < res->nevals; k++) /* the resumed results */
            if (res->order[k] != res->reference) tell(st, res, res->order[k]);
    }
    /* --budget counts the run's evaluations, those resumed from the cache or log included: run
     * again after a crash, it evaluates what the uninterrupted run would have, no more. */
    int budget = o->budget > 0 ? o->budget : n;
    const int batched = o->workers && o->workers->n > 0;
    while (s == FT_OK && res->nevals < budget && res->nevals < n) {
        while (o->pause && *o->pause && !(o->stop && *o->stop)) {
            struct timespec nap = {0, 50 * 1000 * 1000};
            nanosleep(&nap, NULL);
        }
        if (o->stop && *o->stop) {
            res->interrupted = 1;
            break;
        }
        if (batched) {
            int more = 0;
            s = search_batch(&S, &ev, st, budget - res->nevals, &more, err);
            if (!more) break;
            continue;
        }
        int i = ft_strategy_next(st);
        if (i < 0) break;
        if (isfinite(res->secs[i]) || res->error[i]) continue; /* the reference, or resumed */
        s = evaluate_here(&S, &ev, i, ft_now_s(), err);
        if (s == FT_EBUSY) { /* not recorded: the run ends interrupted */
            s = FT_OK;
            res->interrupted = 1;
            break;
        }
        if (s == FT_OK) tell(st, res, i);
    }
    {
        ft_err e2 = {0};
        ft_status cs = ft_kt_cache_end(S.cache, &e2);
        if (s == FT_OK && cs != FT_OK) {
            s = cs;
            if (err) *err = e2;
        }
        if (cache_lock >= 0) ft_file_unlock(cache_lock);
    }
    ft_strategy_free(st);
    for (int k = 0; k < res->nevals; k++) {
        int i = res->order[k];
        if (isfinite(res->secs[i]) && (res->best < 0 || res->secs[i] < res->secs[res->best])) res->best = i;
    }
    if (res->best >= 0 && res->best != S.stats_of) /* resumed: its median only */
        res->best_stats = (ft_stats){.median = res->secs[res->best]};
    if (res->reference >= 0 && !res->ref_stats.samples && isfinite(res->secs[res->reference]))
        res->ref_stats = (ft_stats){.median = res->secs[res->reference]}; /* resumed likewise */
    {
        ft_err e2 = {0};
        log_end(&L, t, res,
                s != FT_OK                                 ? "error"
                : res->interrupted                         ? "interrupted"
                : res->nevals >= budget && res->nevals < n ? "budget"
                                                           : "exhausted",
                &e2);
    }
    json_decref(S.here);
    free(S.armed_cache);
    free(S.armed_log);
    evaluator_close(&ev, res->clock, sizeof res->clock, res->note, sizeof res->note);
    return s;
}

ft_status ft_t1_measure(ft_t1 *t, const ft_t1_tune_opts *o, const ft_config *cfg,
                        ft_t1_measure_result *r, ft_err *err) {
    memset(r, 0, sizeof *r);
    evaluator ev;
    ft_config def;
    ft_config_default(&t->space, &def);
    const int is_default = ft_config_equal(cfg, &def);
    ft_status s = evaluator_open(&ev, t, o, r->note, sizeof r->note, err);
    if (s == FT_OK) s = evaluate_reference(&ev, &def, &r->ref_stats, r->ref_why, sizeof r->ref_why, err);
    if (s == FT_OK && is_default) {
        r->stats = r->ref_stats;
        snprintf(r->why, sizeof r->why, "%s", r->ref_why);
    } else if (s == FT_OK) {
        /* (a fault that lost the GPU is cfg's failure, in r->why, as any other) */
        s = evaluate_candidate(&ev, cfg, &r->stats, r->why, sizeof r->why, err);
        if (s == FT_ELOST) s = FT_OK;
    }
    r->disagreed = r->why[0] && check_failed(r->why);
    evaluator_close(&ev, r->clock, sizeof r->clock, r->note, sizeof r->note);
    return s;
}

ft_status ft_t1_tune_serve(ft_t1 *t, const ft_t1_tune_opts *o, const ft_tune_server *srv,
                           int *served, ft_err *err) {
    *served = 0;
    evaluator ev;
    char note[320], why[512];
    ft_config def;
    ft_config_default(&t->space, &def);
    ft_stats rst = {0};
    json_t *where = where_of(o);
    ft_status s = evaluator_open(&ev, t, o, note, sizeof note, err);
    deadline(o, 1);
    if (s == FT_OK) s = evaluate_reference(&ev, &def, &rst, why, sizeof why, err);
    deadline(o, 0);
    while (s == FT_OK) {
        json_t *cfgj = NULL;
        double best;
        int got = srv->next(srv->ctx, &cfgj, &best, err);
        if (got <= 0) {
            if (got < 0) s = err && err->status ? err->status : FT_EINTERNAL;
            break;
        }
        const double t0 = ft_now_s();
        ft_config cfg;
        ft_stats cst = {0};
        s = ft_config_from_json(&t->space, cfgj, &cfg, err);
        json_decref(cfgj);
        deadline(o, 1);
        if (s == FT_OK) s = evaluate_candidate(&ev, &cfg, &cst, why, sizeof why, err);
        deadline(o, 0);
        /* A fault that lost the GPU is answered as the configuration's failure first (rank 0
         * records it), then ends this worker. */
        const ft_status lost = s == FT_ELOST ? s : FT_OK;
        ft_err kept = lost && err ? *err : (ft_err){0};
        if (lost) s = FT_OK;
        json_t *a = s == FT_OK ? answer(where, &cst, why, ft_now_s() - t0) : NULL;
        if (s == FT_OK && !a) s = ft_err_set(err, FT_ENOMEM, "out of memory");
        if (s == FT_OK) s = srv->reply(srv->ctx, a, err);
        json_decref(a);
        if (s == FT_OK) (*served)++;
        if (s == FT_OK && lost) {
            if (err) *err = kept;
            s = lost;
        }
    }
    json_decref(where);
    evaluator_close(&ev, NULL, 0, NULL, 0);
    return s;
}

/* The runs of a T1 kernel's event log (tune --t1 --log) as a result: what its last run and the
 * earlier runs of the same problem (the same "key") measured and rejected, each candidate its
 * latest; the time an evaluation took is from the event before it to its own. */
static ft_status result_from_log(const json_t *events, const char *name, const ft_t1 *t,
                                 const json_t *key, ft_t1_tune_result *r, ft_err *err) {
    ft_status s = result_begin(t, r, err);
    if (s != FT_OK) return s;
    const int n = r->n;
    int ours = 0;
    double prev = NAN;
    for (size_t e = 0; e < json_array_size(events); e++) {
        const json_t *ev = json_array_get(events, e);
        const char *what = json_string_value(json_object_get(ev, "event"));
        const json_t *tj = json_object_get(ev, "t");
        const double t_ev = json_number_value(tj);
        if (what &&
            (strcmp(what, "run_start") == 0 || strcmp(what, "measured") == 0 ||
             strcmp(what, "rejected") == 0) &&
            (!json_is_number(tj) || !(t_ev > 0) || !isfinite(t_ev)))
            return ft_err_set(err, FT_EFORMAT, "%s: event %zu: no time (t)", name, e + 1);
        if (what && strcmp(what, "run_start") == 0) {
            ours = json_equal(json_object_get(ev, "key"), (json_t *)key);
            prev = t_ev;
            continue;
        }
        const int measured = what && strcmp(what, "measured") == 0;
        if (!ours || !(measured || (what && strcmp(what, "rejected") == 0))) continue;
        ft_config cfg;
        ft_err e2 = {0};
        if (ft_config_from_json(&t->space, json_object_get(ev, "config"), &cfg, &e2))
            return ft_err_set(err, FT_EFORMAT, "%s: event %zu: %s", name, e + 1, e2.msg);
        const int i = (int)ft_t1_position(t, r->cfgs, n, &cfg);
        if (i < 0)
            return ft_err_set(err, FT_EFORMAT,
                              "%s: event %zu: a configuration %s does not allow (edited since?)",
                              name, e + 1, t->path);
        const double med =
            json_number_value(json_object_get(json_object_get(ev, "stats"), "median_s"));
        if (measured && !(med > 0 && med < 1e6))
            return ft_err_set(err, FT_EFORMAT,
                              "%s: event %zu: no median time in seconds (stats.median_s)", name,
                              e + 1);
        const json_t *cj = json_object_get(ev, "cost_s"); /* written since it was measured */
        const double cost = json_number_value(cj);
        const int again = isfinite(r->secs[i]) || r->error[i];
        free(r->error[i]);
        r->error[i] = NULL;
        if (!measured) {
            const char *m = json_string_value(json_object_get(ev, "message"));
            if (!(r->error[i] = strdup(m && *m ? m : "rejected")))
                return ft_err_set(err, FT_ENOMEM, "out of memory");
        }
        r->secs[i] = measured ? med : NAN;
        r->cost[i] = json_is_number(cj) && cost >= 0 && isfinite(cost) ? cost
                     : isfinite(prev) && t_ev >= prev                  ? t_ev - prev
                                                                       : 0;
        r->when[i] = t_ev;
        prev = t_ev;
        if (!again) r->order[r->nevals++] = i;
    }
    if (!r->nevals) return ft_err_set(err, FT_EFORMAT, "%s: its runs measured nothing", name);
    for (int i = 0; i < n; i++)
        r->failed += r->error[i] != NULL;
    return FT_OK;
}

/* rel as the log's run meant it: as it is when readable from here (or absolute), else from the
 * folder of the log. */
static void beside_log(const char *rel, const char *log, char *out, size_t n) {
    const char *slash = strrchr(log, '/');
    if (rel[0] == '/' || access(rel, R_OK) == 0 || !slash)
        snprintf(out, n, "%s", rel);
    else
        snprintf(out, n, "%.*s/%s", (int)(slash - log), log, rel);
}

/* Whether a run_start's dims ({"x": .., "y": .., "z": ..}) are t's problem size. */
static int same_dims(const json_t *dims, const ft_t1 *t) {
    static const char *const axis[] = {"x", "y", "z"};
    if (!json_is_object(dims) ||
        json_object_size(dims) != (size_t)(t->nproblem < 3 ? t->nproblem : 3))
        return 0;
    for (int d = 0; d < t->nproblem && d < 3; d++)
        if (json_integer_value(json_object_get(dims, axis[d])) != t->problem[d]) return 0;
    return 1;
}

/* The log's last run_start event (NULL: none). */
static const json_t *last_run_start(const json_t *events) {
    const json_t *start = NULL;
    for (size_t e = 0; e < json_array_size(events); e++) {
        const json_t *ev = json_array_get(events, e);
        const char *what = json_string_value(json_object_get(ev, "event"));
        if (what && strcmp(what, "run_start") == 0) start = ev;
    }
    return start;
}

int ft_t1_log_of(const json_t *events) {
    const char *op = json_string_value(json_object_get(last_run_start(events), "op"));
    return op && strncmp(op, "t1:", 3) == 0;
}

ft_status ft_t1_log_export(const json_t *events, const char *name, ft_export_format f,
                           const char *path, ft_err *err) {
    const json_t *start = last_run_start(events);
    const char *op = start ? json_string_value(json_object_get(start, "op")) : NULL;
    const char *t1 = start ? json_string_value(json_object_get(start, "t1")) : NULL;
    const char *kfile = start ? json_string_value(json_object_get(start, "kernel_file")) : NULL;
    const char *backend = start ? json_string_value(json_object_get(start, "backend")) : NULL;
    if (!op || strncmp(op, "t1:", 3) != 0 || !t1)
        return ft_err_set(err, FT_EFORMAT, "%s: not the log of a T1 kernel's run", name);
    if (!json_is_object(json_object_get(start, "key")))
        return ft_err_set(err, FT_EFORMAT, "%s: its run_start has no key", name);
    /* A path the run was given relative to its working directory: from here, or from the
     * log's folder. */
    char t1p[4096], kp[4096];
    beside_log(t1, name, t1p, sizeof t1p);
    if (kfile) beside_log(kfile, name, kp, sizeof kp);
    if (path && (ft_same_file(t1p, path) || (kfile && ft_same_file(kp, path))))
        return ft_err_set(err, FT_EINVAL, "%s: the output is the T1 file or kernel it reads", path);
    ft_t1 *t = NULL;
    ft_status s = ft_t1_load(t1p, kfile ? kp : NULL, &t, err);
    if (s != FT_OK)
        return ft_err_wrap(err, "%s: the log of %s's run needs the T1 file and kernel it names",
                           name, op + 3);
    ft_t1_tune_result r;
    s = result_from_log(events, name, t, json_object_get(start, "key"), &r, err);
    /* The file as it is now must describe the problem the log measured. */
    ft_config def;
    ft_config_default(&t->space, &def);
    json_t *def_now = ft_config_to_json(&t->space, &def);
    if (s == FT_OK && (json_integer_value(json_object_get(start, "space_valid")) != r.n ||
                       !json_equal(json_object_get(start, "default"), def_now) ||
                       !same_dims(json_object_get(start, "dims"), t)))
        s = ft_err_set(err, FT_EFORMAT,
                       "%s: %s has changed since the log's run (its problem size, parameters or "
                       "default differ): its measurements would be written for another problem",
                       name, t1p);
    json_decref(def_now);
    if (s == FT_OK) {
        const char *dev = json_string_value(json_object_get(start, "device"));
        snprintf(r.device, sizeof r.device, "%s", dev ? dev : "");
        s = ft_t1_tune_export(t, &r, backend ? backend : "", f, path, err);
    }
    ft_t1_tune_result_free(&r);
    ft_t1_free(t);
    return s;
}

void ft_t1_tune_result_free(ft_t1_tune_result *r) {
    for (int i = 0; r->error && i < r->n; i++) free(r->error[i]);
    free(r->error);
    free(r->cfgs);
    free(r->secs);
    free(r->cost);
    free(r->when);
    free(r->order);
    memset(r, 0, sizeof *r);
}

json_t *ft_t1_tune_profile_entry(const ft_t1 *t, const ft_t1_tune_opts *o,
                                 const ft_t1_tune_result *r) {
    if (r->best < 0) return NULL;
    const char *backend = backend_of(o);
    char device[256];
    ft_t1_device(o, device, sizeof device);
    const double ref = r->secs[r->reference];
    json_t *def = isfinite(ref) ? json_pack("{s:o, s:o}", "config",
                                            ft_config_to_json(&t->space, &r->cfgs[r->reference]),
                                            "stats", stats_json(&r->ref_stats))
                                : json_null();
    json_t *refs = json_array();
    for (int k = 0; k < o->nrefs; k++) json_array_append_new(refs, json_string(o->refs[k]));
    char when[32];
    time_t now = time(NULL);
    strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", gmtime(&now));
    const char *slash = strrchr(t->kernel_file, '/');
    json_t *e = json_pack(
        "{s:s, s:s, s:s, s:s?, s:s, s:o, s:o, s:o, s:o, s:o, s:{s:s, s:o}, s:s, s:s, s:i, s:i, s:i, "
        "s:s, s:b}",
        "kernel", t->kernel_name, "backend", backend, "device", device[0] ? device : backend,
        "benchmark", t->benchmark, "kernel_file", slash ? slash + 1 : t->kernel_file,
        "problem_size", problem_size_json(t), "config",
        ft_config_to_json(&t->space, &r->cfgs[r->best]), "stats", stats_json(&r->best_stats),
        "default", def, "speedup", isfinite(ref) ? json_real(ref / r->secs[r->best]) : json_null(),
        "verification", "checked_against",
        o->nrefs ? "reference files" : "the default configuration's outputs", "files", refs,
        "clock", r->clock, "strategy", ft_strategy_names[o->strategy], "evaluations", r->nevals,
        "rejected", r->failed, "space_valid", r->n, "tuned_at", when, "interrupted",
        r->interrupted);
    return e;
}

ft_status ft_t1_tune_export(const ft_t1 *t, const ft_t1_tune_result *r, const char *backend,
                            ft_export_format f, const char *path, ft_err *err) {
    json_t *entries = f == FT_EXPORT_KT_CACHE ? json_object() : json_array();
    /* In space order, as Kernel Tuner writes its cache. */
    for (int i = 0; i < r->n; i++) {
        int evaluated = isfinite(r->secs[i]) || r->error[i];
        if (!evaluated) continue;
        ft_export_result x = outcome_of(r, i);
        char key[1024];
        json_t *e = ft_export_entry(&t->space, &r->cfgs[i], &x, f, key, sizeof key);
        if (f == FT_EXPORT_KT_CACHE) json_object_set_new(entries, key, e);
        else json_array_append_new(entries, e);
    }
    json_t *doc = ft_export_wrap(&t->space, entries, f, r->device[0] ? r->device : backend,
                                 t->kernel_name, problem_size_json(t), backend);
    if (!doc) return ft_err_set(err, FT_ENOMEM, "out of memory");
    return ft_export_write(doc, f, path, err);
}
