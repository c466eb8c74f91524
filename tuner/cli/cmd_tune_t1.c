/* cmd_tune_t1.c: `flaretune tune --t1 FILE`: tune a kernel a FAIR T1 file describes
 * (tuner/t1_tune.c), on the GPU or on the emulator, and write what was measured as a T4 results
 * file and a Kernel Tuner cache. */
#include <getopt.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "cli_mpi.h"
#include "core/npy.h"
#include "core/paths.h"
#include "cuda/kcache.h"
#include "profiles/src/profile.h"
#include "tui/tui.h"
#include "tuner/strategies/strategy.h"
#include "tuner/t1_tune.h"

/* The options of `tune --t1`: the codes of its own, and the table getopt_long reads. */
enum { O_STRATEGY = 1, O_BUDGET, O_T4, O_KT, O_LOG, O_TUI, O_PROFILE, O_CTIMEOUT };
static const struct option opts[] = {
    FT_CLI_T1_KERNEL_OPTIONS,
    FT_CLI_T1_ARG_OPTION,
    FT_CLI_T1_RUN_OPTIONS,
    FT_CLI_ARG("strategy", O_STRATEGY),
    FT_CLI_ARG("budget", O_BUDGET),
    FT_CLI_ARG("seed", FT_T1_OPT_SEED),
    FT_CLI_ARG("t4", O_T4),
    FT_CLI_ARG("kt-cache", O_KT),
    FT_CLI_ARG("log", O_LOG),
    FT_CLI_FLAG("tui", O_TUI),
    FT_CLI_ARG("profile", O_PROFILE),
    FT_CLI_ARG("candidate-timeout", O_CTIMEOUT),
    FT_CLI_END,
};

void ft_cli_tune_t1_usage(FILE *f) {
    fprintf(
        f,
        "       flaretune tune --t1 FILE [--kernel-file F] [--arg NAME=TYPE:SIZE[:FILL[:V]]]...\n"
        "                      [--backend cuda|cuda-emu] [--strategy S] [--budget N] [--seed N]\n"
        "                      [--blocks N] [--reps N] [--t4 OUT] [--kt-cache OUT]\n"
        "                      [--reference NAME=FILE.npy]... [--log LOG] [--tui]\n"
        "                      [--profile FILE] [--candidate-timeout S]\n\n"
        "Tune a kernel described by a FAIR T1 input file (docs/t1.md): every configuration\n"
        "its conditions allow is a candidate; each is compiled as written with its values\n"
        "as macros, checked against the default configuration's outputs, and timed: on\n"
        "`cuda` by the device's clock (CUPTI), on `cuda-emu` as the emulator's time for a\n"
        "sample of N blocks (default 8) scaled to the grid; --reps timed launches each\n"
        "(default 20; at most 256, and 5 on the emulator). The default backend is cuda where\n"
        "a GPU is present, else cuda-emu. --budget N evaluations (default 20; 0: all), the\n"
        "default configuration first. --t4 and --kt-cache write the measurements for replay\n"
        "and Kernel Tuner's tools. The Kernel Tuner cache is written as the run goes, each\n"
        "evaluation on the disk when it is done; run again with the same cache, what it holds\n"
        "is taken as measured and counts in the budget (a cache of another\n"
        "kernel, device, problem size or space is refused). --reference NAME=FILE.npy checks\n"
        "output NAME of every configuration, the default's included, against the file's\n"
        "array (of the argument's type and size) instead of the default's run. --log LOG\n"
        "appends the run's events (docs/events.md; op t1:KERNEL), which `flaretune top LOG`\n"
        "follows live; --tui shows them in the dashboard as the run goes (p pauses, q stops).\n"
        "--profile FILE merges the best configuration into a profile's kernels (atomic,\n"
        "locked; the faster of two for one kernel, backend, device and problem size), which\n"
        "`flaretune emit` writes for other builds (docs/profiles.md, docs/emit.md).\n"
        "--candidate-timeout S ends the process when one configuration takes longer than S\n"
        "seconds (a launch cannot be stopped part way), first recording it as failed in the\n"
        "Kernel Tuner cache and the log: the same command resumes past it.\n"
        "Ctrl-C stops the search after the configuration in flight, writes what was measured,\n"
        "and exits with 130; a second Ctrl-C ends at once, recording the configuration in\n"
        "flight as failed (one that never ends). Under mpirun every rank evaluates configurations "
        "on its own\n"
        "device and rank 0 runs the search (docs/distributed.md).\n");
}

static void progress(void *ctx, const ft_t1_tune_result *r, int i, const char *why) {
    const ft_t1 *t = ctx;
    char cfg[512];
    ft_config_format(&t->space, &r->cfgs[i], cfg, sizeof cfg);
    if (why)
        fprintf(stderr, "tune: [%d] %s: rejected: %s\n", r->nevals, cfg, why);
    else
        fprintf(stderr, "tune: [%d] %s: %.4g ms%s\n", r->nevals, cfg, r->secs[i] * 1e3,
                i == r->reference ? " (the reference)" : "");
}

/* The options of tune --t1 that the other T1 commands do not take. */
typedef struct {
    const char *t4, *kt, *profile;
    int tui;
    ft_t1_tune_opts to;
} tune_t1_args;

static volatile int stop_flag, pause_flag;

/* Ctrl-C (or SIGTERM): stop once the configuration that runs ends. One that never ends (an
 * endless loop on the emulator, which no flag reaches) would hold that forever: a second one
 * ends the process at once, the configuration in flight first recorded as failed
 * (core/epitaph.h), so the same command resumes past it rather than hang on it again. */
static void on_signal(int sig) {
    if (!stop_flag) {
        stop_flag = 1;
        return;
    }
    ft_cli_end_in_flight(sig,
                         "flaretune: stopped again while a configuration ran: ending; it is "
                         "recorded as failed, and the same command resumes past it\n",
                         "flaretune: stopped again while a configuration ran: ending\n");
}

/* --tui: the tuner on this thread, the dashboard on the main one. */
typedef struct {
    ft_t1 *t;
    const ft_t1_tune_opts *to;
    ft_t1_tune_result *r;
    ft_status s;
    ft_err err;
    ft_tui_feed *feed;
} worker;

static void *tune_worker(void *arg) {
    worker *w = arg;
    w->s = ft_t1_tune(w->t, w->to, w->r, &w->err);
    ft_cli_dash_end(w->feed, w->s ? &w->err : NULL, stop_flag ? "stopped" : "the run finished");
    return NULL;
}

/* Tune under the dashboard. Returns the tuner's status (w->err) or the dashboard's (err). */
static ft_status tune_dashboard(ft_t1 *t, ft_t1_tune_opts *to, ft_t1_tune_result *r,
                                const char *path, ft_err *err) {
    ft_tui_feed feed;
    if (!ft_tui_feed_init(&feed)) return ft_err_set(err, FT_ENOMEM, "tune: out of memory");
    to->listener = ft_tui_feed_listener;
    to->listener_ctx = &feed;
    to->pause = &pause_flag;
    to->progress = NULL; /* the terminal is the dashboard's */
    worker w = {.t = t, .to = to, .r = r, .feed = &feed};
    char title[160];
    snprintf(title, sizeof title, "tune --t1 %.140s", path);
    ft_cli_dash d = {.title = title, .feed = &feed, .worker = tune_worker, .arg = &w,
                     .pause = &pause_flag, .stop = &stop_flag, .expected_runs = 1,
                     .on_signal = on_signal,
                     .stopping = "flaretune: stopping the tuner (it finishes the configuration in flight)"};
    int done;
    ft_status s = ft_cli_dashboard(&d, &done, err);
    ft_tui_feed_free(&feed);
    if (s) return s;
    if (w.s && err) *err = w.err;
    return w.s;
}

static int tune_t1_opt(void *ctx, int opt, const char *arg) {
    tune_t1_args *c = ctx;
    long v;
    switch (opt) {
    case O_STRATEGY:
        c->to.strategy = ft_strategy_parse(arg);
        if (c->to.strategy < 0) return ft_cli_fail(FT_EXIT_USAGE, "tune: unknown strategy '%s'", arg);
        break;
    case O_BUDGET:
        if (!ft_cli_whole(arg, 0, 1000000, &v))
            return ft_cli_fail(FT_EXIT_USAGE, "tune: %s takes a non-negative count, not '%s'",
                               ft_cli_option_written(), arg);
        c->to.budget = (int)v;
        break;
    case O_T4: c->t4 = arg; break;
    case O_KT: c->kt = arg; break;
    case O_LOG: c->to.log = arg; break;
    case O_TUI: c->tui = 1; break;
    case O_PROFILE: c->profile = arg; break;
    case O_CTIMEOUT: return ft_cli_candidate_timeout("tune", arg, &c->to.candidate_timeout_s);
    }
    return FT_EXIT_OK;
}

/* The kernel cache's 128-bit key of a file's bytes, as 32 hex digits ("unreadable" when it
 * cannot be read). */
static void file_key(const char *path, char out[33]) {
    char *text = NULL;
    size_t len = 0;
    if (ft_kc_read_file(path, &text, &len) != 0) {
        snprintf(out, 33, "unreadable");
        return;
    }
    ft_kc_hash h;
    ft_kc_hash_init(&h);
    ft_kc_hash_bytes(&h, text, len);
    ft_kc_hash_hex(&h, out);
    free(text);
}

/* What every rank of a distributed run must share, one "what: value" line each, the same lines
 * in the same order on every rank: the T1 file, the kernel and its source (by their bytes, not
 * their paths), the problem, the space, the arguments, the reference files' bytes, the inputs'
 * seed, what a measurement is (--blocks, --reps), the backend and the device. A rank started
 * with another command line would measure another problem. */
static void run_key(const ft_t1 *t, const ft_t1_tune_opts *to, char *buf, size_t n) {
    char device[256], t1key[33], srckey[33], refkey[33];
    ft_t1_device(to, device, sizeof device);
    file_key(t->path, t1key);
    file_key(t->kernel_file, srckey);
    size_t k = (size_t)snprintf(buf, n, "T1 file: %s\nkernel: %s (source %s)\nproblem size:",
                                t1key, t->kernel_name, srckey);
    for (int d = 0; d < t->nproblem && k < n; d++)
        k += (size_t)snprintf(buf + k, n - k, " %lld", t->problem[d]);
    for (int p = 0; p < t->space.nparams && k < n; p++)
        k += (size_t)snprintf(buf + k, n - k, "\nparameter %d: %s, %d values", p,
                              t->space.params[p].name, t->space.params[p].n);
    for (int a = 0; a < t->nargs && k < n; a++)
        k += (size_t)snprintf(buf + k, n - k, "\nargument %s: %lld elements of %zu bytes",
                              t->args[a].name, (long long)t->args[a].elems, (size_t)t->args[a].elem_bytes);
    if (k < n) k += (size_t)snprintf(buf + k, n - k, "\nreference files:%s", to->nrefs ? "" : " none");
    for (int r = 0; r < to->nrefs && k < n; r++) {
        const char *eq = strchr(to->refs[r], '=');
        file_key(eq ? eq + 1 : "", refkey);
        k += (size_t)snprintf(buf + k, n - k, " %.*s=%s", eq ? (int)(eq - to->refs[r]) : 0,
                              to->refs[r], refkey);
    }
    if (k < n)
        snprintf(buf + k, n - k,
                 "\nseed: %llu\nblocks sampled: %d\ntimed runs: %d\nbackend: %s\ndevice: %s\n",
                 to->seed, to->blocks, to->reps, to->backend, device);
}

/* What can be refused before the search: the dashboard without a terminal (under mpirun the
 * ranks' output is a pipe), a profile that could not be written. Returns an exit code. */
static int check_outputs(const tune_t1_args *c) {
    ft_err err = {0};
    if (c->tui && ft_cli_mpi_size() > 1)
        return ft_cli_fail(FT_EXIT_USAGE,
                           "tune: --tui under mpirun: the ranks' output is a pipe, not a "
                           "terminal; follow the run with `flaretune top LOG` (--log LOG)");
    if (c->tui && (!isatty(STDIN_FILENO) || !isatty(STDOUT_FILENO)))
        return ft_cli_fail(FT_EXIT_USAGE, "tune: --tui needs a terminal (stdin and stdout)");
    if (c->profile && ft_profile_check_writable(c->profile, &err)) return ft_cli_fail_profile(&err);
    return FT_EXIT_OK;
}

/* What else can be refused before the search, once the T1 file is read: a file that declares no
 * output (every configuration would be rejected, nothing to compare), an output that is the
 * T1 file or its kernel (it would be overwritten or appended to), two outputs that name one
 * file (the last written would replace the other), and a --t4 file that could not
 * be written at the end (a folder, a folder without write access: the results would be lost). */
static int check_t1_outputs(const ft_t1 *t, const char *t4, const char *kt, const char *log,
                            const char *profile) {
    int code = ft_cli_t1_checkable("tune", t);
    if (code) return code;
    const char *const outs[][2] = {
        {"--t4", t4}, {"--kt-cache", kt}, {"--log", log}, {"--profile", profile}};
    for (size_t i = 0; i < sizeof outs / sizeof outs[0]; i++) {
        const char *p = outs[i][1];
        if (p && strcmp(p, "-") != 0 &&
            (ft_same_file(p, t->path) || (t->kernel_file && ft_same_file(p, t->kernel_file))))
            return ft_cli_fail(FT_EXIT_USAGE, "tune: %s %s is the T1 file or the kernel it tunes",
                               outs[i][0], p);
        for (size_t j = 0; j < i; j++)
            if (p && outs[j][1] && strcmp(p, "-") != 0 && ft_same_path(p, outs[j][1]))
                return ft_cli_fail(FT_EXIT_USAGE,
                                   "tune: %s and %s both name %s: give each its own file",
                                   outs[j][0], outs[i][0], p);
    }
    if (t4 && strcmp(t4, "-") != 0) {
        struct stat sb;
        if (stat(t4, &sb) == 0 && S_ISDIR(sb.st_mode))
            return ft_cli_fail(FT_EXIT_FAIL, "tune: --t4 %s is a directory, not a file", t4);
        char tmp[4096];
        ft_err err = {0};
        FILE *f = ft_file_create_tmp(t4, tmp, sizeof tmp, &err);
        if (!f) return ft_cli_fail(FT_EXIT_FAIL, "tune: --t4: %s", err.msg);
        fclose(f);
        unlink(tmp);
    }
    return FT_EXIT_OK;
}

/* A worker rank: evaluate what rank 0 hands out until it says the run is over. */
static int serve(ft_t1 *t, ft_t1_tune_opts *to) {
    to->kt_cache = NULL;
    to->log = NULL;
    to->progress = NULL;
    to->stop = NULL; /* rank 0 decides when the run stops; a worker answers what it was given */
    for (int j; (j = ft_cli_mpi_next_job()) >= 0;) {
        int served = 0;
        ft_err err = {0};
        if (j != 0) return ft_cli_fail(FT_EXIT_FAIL, "rank %d: rank 0 asked for job %d of 1", to->rank, j);
        if (ft_t1_tune_serve(t, to, ft_cli_mpi_server(), &served, &err))
            return ft_cli_fail(ft_cli_exit_code(err.status), "rank %d: %s", to->rank, err.msg);
    }
    return FT_EXIT_OK;
}

int ft_cli_tune_t1(int argc, char **argv) {
    tune_t1_args c = {0};
    ft_t1_tune_opts_default(&c.to);
    ft_cli_t1_args a = {.seed = c.to.seed};
    int code = ft_cli_t1_parse("tune", argc, argv, opts, &a, tune_t1_opt, &c);
    if (code) return code;
    if (c.to.candidate_timeout_s > 0) ft_cli_catch_candidate_timeout(); /* a worker's too */
    const char *path = a.path, *t4 = c.t4, *kt = c.kt;
    ft_t1_tune_opts to = c.to;
    ft_err err = {0};
    ft_t1 *t = NULL;
    /* Under mpirun: rank 0 tunes, the other ranks evaluate what it hands them, each on the
     * device of its node-local rank (docs/distributed.md). */
    const int mpi = ft_cli_mpi_start(NULL, NULL), helper = mpi && ft_cli_mpi_rank() > 0;
    const int many = mpi && ft_cli_mpi_size() > 1; /* rank 0 checks these once the ranks agree */
    if (helper) c.tui = 0, c.profile = NULL, t4 = NULL, kt = NULL;
    if (!many && (code = check_outputs(&c))) return code;
    if (ft_t1_load_args(path, a.kfile, a.argspecs, a.nargspecs, &t, &err)) return ft_cli_t1_fail("tune", &err);
    if (!helper) ft_cli_t1_note("tune", t);
    if (!many && (code = check_t1_outputs(t, t4, kt, to.log, c.profile))) {
        ft_t1_free(t);
        return code;
    }
    ft_cli_t1_apply("tune", &a, &to);
    const char *backend = to.backend;
    /* The cache is written as the run goes (and resumed from), unless it goes to stdout. */
    if (kt && strcmp(kt, "-") != 0) to.kt_cache = kt;
    to.progress = progress;
    to.progress_ctx = t;
    if (many) {
        char key[8192], why[1024];
        run_key(t, &to, key, sizeof key);
        if (!ft_cli_mpi_same_run(key, why, sizeof why)) {
            if (!helper) ft_cli_fail(FT_EXIT_USAGE, "tune: %s", why);
            ft_t1_free(t);
            ft_cli_mpi_end(0);
            return FT_EXIT_USAGE;
        }
        to.rank = ft_cli_mpi_world_rank();
        if (helper) {
            code = serve(t, &to);
            ft_t1_free(t);
            ft_cli_mpi_end(code != FT_EXIT_OK);
            return code;
        }
        ft_cli_mpi_groups(1);
        if ((code = check_outputs(&c)) ||
            (code = check_t1_outputs(t, t4, kt, to.log,
                                     c.profile))) { /* the workers end with nothing done */
            ft_cli_mpi_all_done();
            ft_t1_free(t);
            ft_cli_mpi_end(0);
            return code;
        }
        to.workers = ft_cli_mpi_workers(0, 0);
    }
    to.stop = &stop_flag;
    ft_cli_catch_stop(on_signal, 0); /* a second Ctrl-C ends the process at once */
    ft_t1_tune_result r;
    memset(&r, 0, sizeof r);
    ft_status s = c.tui ? tune_dashboard(t, &to, &r, path, &err) : ft_t1_tune(t, &to, &r, &err);
    if (to.workers) { /* the workers are done, whatever happened here */
        ft_cli_mpi_session_done(0);
        ft_cli_mpi_all_done();
    }
    if (s != FT_OK) code = s == FT_ENODEV ? (ft_cli_fail_err(&err), FT_EXIT_NODEV) : ft_cli_fail_err(&err);
    if (r.note[0]) fprintf(stderr, "tune: note: %s\n", r.note);
    /* What was measured is written even when the search stopped part way. */
    int t4_written = 0, kt_written = to.kt_cache != NULL; /* (the cache is kept as it goes) */
    if (r.nevals > 0) {
        ft_err e = {0};
        if (t4 && ft_t1_tune_export(t, &r, backend, FT_EXPORT_T4, t4, &e)) code = ft_cli_fail_err(&e);
        else
            t4_written = t4 != NULL;
        if (kt && !to.kt_cache && ft_t1_tune_export(t, &r, backend, FT_EXPORT_KT_CACHE, kt, &e))
            code = ft_cli_fail_err(&e);
        else if (kt)
            kt_written = 1;
    }
    int saved = 0;
    if (c.profile && r.best >= 0) {
        ft_err e = {0};
        json_t *entry = ft_t1_tune_profile_entry(t, &to, &r);
        if (!entry) code = ft_cli_fail(FT_EXIT_FAIL, "tune: out of memory");
        else if (ft_profile_update(c.profile, entry, &e))
            code = ft_cli_fail_profile(&e);
        else saved = 1;
        json_decref(entry);
    }
    if (s == FT_OK) {
        printf("%s from %s on %s: %d of %d configurations evaluated (%d rejected), %s strategy\n",
               t->kernel_name, path, backend, r.nevals, r.n, r.failed, ft_strategy_names[to.strategy]);
        if (r.resumed)
            printf("  resumed: %d of them from %s, not run again%s\n", r.resumed, kt,
                   r.resumed_unused ? " (and entries that are no candidate here, kept)" : "");
        printf("  timed by: %s\n", r.clock);
        if (r.best >= 0) {
            char cfg[512];
            ft_config_format(&t->space, &r.cfgs[r.best], cfg, sizeof cfg);
            printf("  best: %s: %.4g ms\n", cfg, r.secs[r.best] * 1e3);
            double ref = r.secs[r.reference];
            if (isfinite(ref) && r.best != r.reference)
                printf("  the reference (default) configuration: %.4g ms; %.2fx\n", ref * 1e3, ref / r.secs[r.best]);
        }
        /* (only what was written: a failed write said so above) */
        if (t4_written) printf("  T4 results: %s\n", t4);
        if (kt && kt_written) printf("  Kernel Tuner cache: %s\n", kt);
        if (saved) printf("  profile: %s\n", c.profile);
        else if (c.profile)
            fprintf(stderr, "tune: %s not written: no configuration passed its check\n", c.profile);
        if (r.interrupted) {
            fprintf(stderr, "tune: stopped after %d evaluations; what was measured is written\n",
                    r.nevals);
            code = 130;
        }
    }
    ft_t1_tune_result_free(&r);
    ft_t1_free(t);
    if (mpi) ft_cli_mpi_end(0);
    return code;
}
