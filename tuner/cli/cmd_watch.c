/* cmd_watch.c: `flaretune watch --profile P`: run the tuned drafter step (every kernel of the
 * profile for this device and backend, at its shape, with its winning config) in a loop on a
 * worker thread, and show each kernel's latency live: rolling p50, p95, max and jitter.
 *
 * The worker feeds the dashboard the same way a tuner does, with events of the dashboard's own
 * kinds (docs/dashboard.md): one `watch_start` per kernel, then `sample` events carrying the
 * latencies measured since the previous one (about ten a second per kernel). */
#include <getopt.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "core/clock.h"
#include "core/env.h"
#include "core/format.h"
#include "core/json.h"
#include "core/rng.h"
#include "core/status.h"
#include "kernels/registry.h"
#include "op/op_json.h"
#include "profiles/src/profile.h"
#include "traces/eventlog.h"
#include "tui/tui.h"

static void usage(FILE *f) {
    fprintf(f,
            "usage: flaretune watch --profile FILE [--backend B] [--op OP]... [--interval SEC]\n"
            "                       [--seed N]\n\n"
            "Run the tuned kernels of a profile live, as one drafter step after another: every\n"
            "entry of FILE for this device and backend (fusion, K/V projection, decode\n"
            "attention, loss: whatever ops it holds) at its shape, with its winning config and\n"
            "attributes, on random inputs. The dashboard shows each kernel's latency over the\n"
            "last %d calls as p50, p95, max and jitter (mean change between consecutive calls),\n"
            "against the median the profile recorded. Times are taken with the host clock\n"
            "around each call.\n\n"
            "  --profile FILE   the profile (flaretune tune ... --profile FILE)\n"
            "  --backend B      the backend whose entries run (default: auto)\n"
            "  --op OP          only this op (repeatable)\n"
            "  --interval SEC   pause between steps (default 0: back to back)\n"
            "  --seed N         seed of the random inputs (default 1)\n\n"
            "Keys: up/down select, Enter detail, p pause, s sort, / filter, ? help, q quit.\n"
            "Ctrl-C stops and exits with 130. See docs/dashboard.md.\n",
            FT_TUI_WINDOW);
}

static volatile int stop_flag, pause_flag;

static void on_signal(int sig) {
    (void)sig;
    stop_flag = 1;
}

enum { KEEP = 256 }; /* latencies a sample event carries at most */

typedef struct kernel {
    const ft_profile_entry *e;
    ft_call c;
    ft_workspace ws;
    ft_config cfg;
    char run[16], shape[160];
    double keep[KEEP]; /* this interval's latencies: a uniform sample when there are more */
    int nkeep;
    long seen, calls;
    double max;
    ft_tui_vring last; /* for the summary printed at the end */
} kernel;

typedef struct watch {
    const ft_backend *be;
    kernel *k;
    int nk;
    double interval;
    ft_tui_feed feed;
    ft_rng rng;
    ft_err err;
    int failed;
} watch;

static void take(watch *w, kernel *k, double v) {
    k->seen++;
    k->calls++;
    if (k->nkeep < KEEP)
        k->keep[k->nkeep++] = v;
    else { /* reservoir sampling keeps the interval's distribution */
        uint64_t j = ft_rng_below(&w->rng, (uint64_t)k->seen);
        if (j < KEEP) k->keep[j] = v;
    }
    if (!(v <= k->max)) k->max = v;
    ft_tui_vring_push(&k->last, v);
}

static void flush(watch *w, kernel *k) {
    if (!k->seen) return;
    /* The slowest call always travels: the rolling max must be exact. */
    int has_max = 0;
    for (int i = 0; i < k->nkeep; i++)
        has_max |= k->keep[i] == k->max;
    if (!has_max) k->keep[ft_rng_below(&w->rng, (uint64_t)k->nkeep)] = k->max;
    json_t *vals = json_array();
    for (int i = 0; i < k->nkeep; i++)
        json_array_append_new(vals, json_real(k->keep[i]));
    json_t *ev =
        json_pack("{s:s, s:f, s:s, s:o, s:I, s:f}", "event", "sample", "t", ft_wall_time(), "run",
                  k->run, "values", vals, "calls", (json_int_t)k->seen, "max_s", k->max);
    ft_tui_feed_push_new(&w->feed, ev);
    k->nkeep = 0;
    k->seen = 0;
    k->max = 0;
}

/* Wait s seconds in short slices, so that q or Ctrl-C (stop_flag) ends the wait within one
 * slice: the dashboard joins this thread before it exits, and --interval may be a minute. */
static void nap(double s) {
    double end = ft_now_s() + s, left;
    while (!stop_flag && (left = end - ft_now_s()) > 0)
        usleep((useconds_t)(fmin(left, 0.05) * 1e6));
}

static void *worker(void *arg) {
    watch *w = arg;
    double last_flush = ft_now_s();
    while (!stop_flag) {
        while (pause_flag && !stop_flag)
            nap(0.05);
        for (int i = 0; i < w->nk && !stop_flag; i++) {
            kernel *k = &w->k[i];
            ft_err err = {0};
            double dt = 0;
            ft_status s = ft_backend_time(w->be, &k->c, &k->cfg, 1, &dt, &err);
            if (s) {
                w->err = err;
                ft_err_wrap(&w->err, "%s", k->e->op->name);
                w->err.status = s;
                w->failed = 1;
                ft_tui_feed_push_new(&w->feed, json_pack("{s:s, s:f, s:s}", "event", "error", "t",
                                                         ft_wall_time(), "message", w->err.msg));
                return NULL;
            }
            take(w, k, dt);
        }
        /* About ten sample events a second, but a step's samples never wait out the interval
         * before the next step: with --interval 30 the first step shows at once, not at 30 s. */
        double now = ft_now_s();
        if (now + w->interval - last_flush >= 0.1) {
            for (int i = 0; i < w->nk; i++)
                flush(w, &w->k[i]);
            last_flush = now;
        }
        nap(w->interval);
    }
    return NULL;
}

/* Build kernel k's call at its entry's shape and attributes, with its config. */
static int kernel_prepare(watch *w, kernel *k, uint64_t seed) {
    const ft_profile_entry *e = k->e;
    ft_err err = {0};
    ft_call_init(&k->c, e->op);
    const char *name;
    json_t *v;
    json_object_foreach((json_t *)e->attrs, name, v) {
        char val[64];
        ft_json_value_text(v, val, sizeof val);
        if (ft_attrs_set(&k->c.attrs, e->op, name, val, &err))
            return ft_cli_fail(FT_EXIT_FAIL, "watch: %s: %s", e->op->name, err.msg);
    }
    const char *names[FT_MAX_SYMS];
    int64_t values[FT_MAX_SYMS];
    int n = 0;
    json_object_foreach((json_t *)e->shape, name, v) {
        if (n == FT_MAX_SYMS) break;
        names[n] = name;
        values[n++] = (int64_t)json_integer_value(v);
    }
    if (ft_call_from_dims(&k->c, names, values, n, seed, &err))
        return ft_cli_fail(FT_EXIT_FAIL, "watch: %s: %s", e->op->name, err.msg);
    k->c.ws = &k->ws;
    const ft_space *sp = w->be->space(e->op);
    if (ft_config_from_json(sp, e->config, &k->cfg, &err))
        return ft_cli_fail(FT_EXIT_FAIL, "watch: %s: the profile's config: %s", e->op->name,
                           err.msg);
    char why[256] = "";
    if (!ft_space_runnable(sp, &k->c, &k->cfg, why, sizeof why))
        return ft_cli_fail(FT_EXIT_FAIL, "watch: %s: the profile's config cannot run here: %s",
                           e->op->name, why);
    ft_call_dims_str(&k->c, k->shape, sizeof k->shape);
    /* One call now, so a kernel that cannot run fails before the dashboard starts. */
    if (w->be->run(&k->c, &k->cfg, &err))
        return ft_cli_fail(FT_EXIT_FAIL, "watch: %s: %s", e->op->name, err.msg);
    if (!ft_tui_vring_init(&k->last, FT_TUI_WINDOW))
        return ft_cli_fail(FT_EXIT_FAIL, "watch: out of memory");
    return 0;
}

static int wanted(const char *op, const char *const *ops, int nops) {
    if (!nops) return 1;
    for (int i = 0; i < nops; i++)
        if (!strcmp(op, ops[i])) return 1;
    return 0;
}

static void summary(const watch *w) {
    printf("%-17s %-18s %8s %8s %8s %8s %7s\n", "op", "shape", "p50", "p95", "max", "jitter",
           "calls");
    for (int i = 0; i < w->nk; i++) {
        const kernel *k = &w->k[i];
        double v[FT_TUI_WINDOW];
        for (int j = 0; j < k->last.n; j++)
            v[j] = ft_tui_vring_at(&k->last, j);
        double p50, p95, mx, jit;
        ft_tui_window_stats(v, k->last.n, &p50, &p95, &mx, &jit);
        char a[32], b[32], c[32], d[32];
        printf("%-17s %-18.18s %8s %8s %8s %8s %7ld\n", k->e->op->name, k->shape,
               ft_fmt_time(p50, 1, a, sizeof a), ft_fmt_time(p95, 1, b, sizeof b),
               ft_fmt_time(mx, 1, c, sizeof c), ft_fmt_time(jit, 1, d, sizeof d), k->calls);
    }
}

/* The command line of one watch. */
typedef struct {
    const char *path, *backend;
    const char *ops[32];
    int nops;
    double interval;
    unsigned long long seed;
} watch_args;

/* The options of `watch`: the codes of its own, and the table getopt_long reads. */
enum { O_PROFILE = 1, O_BACKEND, O_OP, O_INTERVAL, O_SEED };
static const struct option opts[] = {
    FT_CLI_ARG("profile", O_PROFILE),
    FT_CLI_ARG("backend", O_BACKEND),
    FT_CLI_LIST("op", O_OP),
    FT_CLI_ARG("interval", O_INTERVAL),
    FT_CLI_ARG("seed", O_SEED),
    FT_CLI_END,
};

static int watch_opt(void *ctx, int o, const char *arg) {
    watch_args *a = ctx;
    char *end;
    switch (o) {
    case O_PROFILE: a->path = arg; break;
    case O_BACKEND: a->backend = arg; break;
    case O_OP:
        if (a->nops == 32) return ft_cli_fail(FT_EXIT_USAGE, "watch: too many --op");
        a->ops[a->nops++] = arg;
        break;
    case O_INTERVAL:
        a->interval = strtod(arg, &end);
        if (*end || !(a->interval >= 0) || a->interval > 60)
            return ft_cli_fail(FT_EXIT_USAGE, "watch: --interval expects seconds in [0, 60]");
        break;
    case O_SEED:
        if (!ft_cli_seed(arg, &a->seed))
            return ft_cli_fail(FT_EXIT_USAGE, "watch: --seed expects a non-negative integer");
        break;
    default: return ft_cli_bad_option("watch", o);
    }
    return FT_EXIT_OK;
}

static int watch_parse(int argc, char **argv, watch_args *a) {
    memset(a, 0, sizeof *a);
    a->backend = "auto";
    a->seed = 1;
    int code = ft_cli_parse_options(argc, argv, "", opts, watch_opt, a);
    if (code) return code;
    if (optind < argc)
        return ft_cli_fail(FT_EXIT_USAGE, "watch: unexpected argument '%s'", argv[optind]);
    if (!a->path) return ft_cli_fail(FT_EXIT_USAGE, "watch: which profile? (--profile FILE)");
    for (int i = 0; i < a->nops; i++) {
        ft_err e = {0};
        if (!ft_op_find(a->ops[i], &e)) return ft_cli_fail_err(&e);
    }
    return FT_EXIT_OK;
}

/* The backend, the profile and this device's name (what the profile's entries are keyed by). */
static int watch_open(const watch_args *a, watch *w, ft_profile **prof, char *device, size_t n) {
    ft_err err = {0};
    w->interval = a->interval;
    if (ft_backend_resolve(a->backend, NULL, &w->be, &err)) return ft_cli_fail_err(&err);
    if (access(a->path, F_OK) != 0)
        return ft_cli_fail(FT_EXIT_FAIL, "watch: %s: no such profile", a->path);
    if (ft_profile_load(a->path, prof, &err)) return ft_cli_fail_err(&err);
    ft_env env;
    ft_env_probe(&env);
    ft_backend_device(w->be, &env, device, n);
    return FT_EXIT_OK;
}

/* The profile's entries that run here: this backend and device, the ops asked for. */
static int watch_select(const watch_args *a, watch *w, const ft_profile *prof, const char *device) {
    int n = ft_profile_count(prof);
    w->k = calloc((size_t)(n ? n : 1), sizeof *w->k);
    if (!w->k) return ft_cli_fail(FT_EXIT_FAIL, "watch: out of memory");
    for (int i = 0; i < n; i++) {
        const ft_profile_entry *e = ft_profile_entry_at(prof, i);
        if (strcmp(e->backend, w->be->name) || strcmp(e->device, device)) continue;
        if (!wanted(e->op->name, a->ops, a->nops) || !w->be->supports(e->op)) continue;
        w->k[w->nk++].e = e;
    }
    if (w->nk) return FT_EXIT_OK;
    fprintf(stderr, "flaretune: watch: %s has no entry%s for backend %s on this device (%s)\n",
            a->path, a->nops ? " of those ops" : "", w->be->name, device);
    for (int i = 0; i < n && i < 8; i++) {
        const ft_profile_entry *e = ft_profile_entry_at(prof, i);
        /* A hand-edited backend or device: its control characters become spaces, as in an
         * error line, so each entry stays one line. */
        char line[1024];
        snprintf(line, sizeof line, "%s on %s, %s", e->op->name, e->backend, e->device);
        ft_err_one_line(line);
        fprintf(stderr, "  it has: %s\n", line);
    }
    return FT_EXIT_FAIL;
}

/* Every kernel ready and run once, and the dashboard's feed opened with one watch_start each:
 * all that can fail before the dashboard takes the terminal. */
static int watch_prepare(const watch_args *a, watch *w, const char *device) {
    int code;
    if (!isatty(STDIN_FILENO) || !isatty(STDOUT_FILENO))
        return ft_cli_fail(FT_EXIT_USAGE,
                           "watch: the dashboard needs a terminal (stdin and stdout)");
    for (int i = 0; i < w->nk; i++) {
        snprintf(w->k[i].run, sizeof w->k[i].run, "w%d", i);
        if ((code = kernel_prepare(w, &w->k[i], a->seed + (uint64_t)i))) return code;
    }
    if (!ft_tui_feed_init(&w->feed)) return ft_cli_fail(FT_EXIT_FAIL, "watch: out of memory");
    ft_rng_seed(&w->rng, a->seed ^ 0x9e3779b97f4a7c15ull);
    for (int i = 0; i < w->nk; i++) {
        const kernel *k = &w->k[i];
        json_t *ev = json_pack("{s:s, s:f, s:s, s:s, s:s, s:s, s:s, s:O, s:O, s:O, s:f}", "event",
                               "watch_start", "t", ft_wall_time(), "run", k->run, "op",
                               k->e->op->name, "backend", w->be->name, "device", device, "profile",
                               a->path, "dims", k->e->shape, "attrs", k->e->attrs, "config",
                               k->e->config, "profile_median_s", k->e->median_s);
        ft_tui_feed_push_new(&w->feed, ev);
    }
    return FT_EXIT_OK;
}

/* The worker runs the kernels while the dashboard shows them, until q or Ctrl-C; then the
 * summary. Closes the feed. Returns the exit code: 130 when a signal ended it. */
static int watch_live(const watch_args *a, watch *w) {
    ft_cli_catch_stop(on_signal, 0);

    pthread_t th;
    if (pthread_create(&th, NULL, worker, w)) {
        int code = ft_cli_fail(FT_EXIT_FAIL, "watch: cannot start the worker thread");
        ft_tui_feed_free(&w->feed);
        return code;
    }
    char title[1100];
    snprintf(title, sizeof title, "watch %s", a->path);
    ft_tui_opts to;
    memset(&to, 0, sizeof to);
    to.title = title;
    to.feed = &w->feed;
    to.pause = &pause_flag;
    to.stop = &stop_flag;
    ft_tui_result res;
    ft_err err = {0};
    ft_status s = ft_tui_run(&to, &res, &err);
    int by_signal = stop_flag;
    stop_flag = 1;
    pause_flag = 0;
    pthread_join(th, NULL);
    ft_tui_feed_free(&w->feed);
    if (s) return ft_cli_fail_err(&err);
    if (w->failed) return ft_cli_fail(ft_cli_exit_code(w->err.status), "watch: %s", w->err.msg);
    summary(w);
    return by_signal && res.by_signal ? 130 : FT_EXIT_OK;
}

static void watch_free(watch *w, ft_profile *prof) {
    for (int i = 0; i < w->nk; i++) {
        w->k[i].c.ws = NULL;
        ft_call_free(&w->k[i].c);
        ft_ws_free(&w->k[i].ws);
        ft_tui_vring_free(&w->k[i].last);
    }
    free(w->k);
    ft_profile_free(prof);
}

static int run(int argc, char **argv) {
    watch_args a;
    watch w;
    memset(&w, 0, sizeof w);
    ft_profile *prof = NULL;
    char device[256];
    int code = watch_parse(argc, argv, &a);
    if (code || (code = watch_open(&a, &w, &prof, device, sizeof device))) return code;
    if (!(code = watch_select(&a, &w, prof, device)) && !(code = watch_prepare(&a, &w, device)))
        code = watch_live(&a, &w);
    watch_free(&w, prof);
    return code;
}

const ft_cmd ft_cmd_watch = {"watch", "run a profile's tuned kernels live in a terminal dashboard",
                             run, usage};
