/* cmd_tune.c: `flaretune tune`: search for the fastest verified configuration of one op or of
 * every op, with progress on stderr, an event log, resume, and a profile. */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "cli_mpi.h"
#include "core/clock.h"
#include "core/env.h"
#include "core/filelock.h"
#include "core/format.h"
#include "core/json.h"
#include "core/paths.h"
#include "cuda/specs.h"
#include "kernels/registry.h"
#include "profiles/src/profile.h"
#include "traces/eventlog.h"
#include "traces/nvtx.h"
#include "tui/tui.h"
#include "tuner/replay.h"
#include "tuner/tune.h"

static void usage(FILE *f) {
    fprintf(
        f,
        "usage: flaretune tune OP|all [--preset P] [--set NAME=VALUE]... [--attr NAME=VALUE]...\n"
        "                      [--backend B] [--strategy S] [--budget N] [--time SEC]\n"
        "                      [--converge F|off] [--patience N] [--cold] [--warm-log LOG]\n"
        "                      [--sweep SIZE=v1,v2,...] [--profile FILE] [--log FILE]\n"
        "                      [--seed N] [--no-screen] [--confirm K] [--max-time S]\n"
        "                      [--noise X] [--max-lost X|off] [--watchdog F|off]\n"
        "                      [--jobs N] [--predict DEVICE|off]\n"
        "                      [--prune predicted=F] [--quiet] [--tui] [--batch K]\n"
        "                      [--candidate-timeout S] [--timer auto|cupti|events]\n"
        "       mpirun -np N flaretune tune OP|all ...   (distributed: docs/distributed.md)\n\n"
        "Find the fastest configuration of OP (or of every op the backend implements) that\n"
        "matches the float64 reference. Every candidate is verified once on fresh random\n"
        "inputs (at a reduced shape when the reference would be too slow), then measured until\n"
        "its median is known to --noise; candidates clearly slower than the best are dropped\n"
        "after a few samples (screening). At the end the best few and the default are measured\n"
        "again interleaved; a lead within the noise is reported as a tie.\n\n"
        "  --preset P         sizes (default small.dflare.train; attention.decode uses the\n"
        "                     .decode preset of the same model and drafter)\n"
        "  --strategy S       bayes (default: a Gaussian process on log time with expected\n"
        "                     improvement; docs/search.md), anneal, evolve, random, exhaustive\n"
        "  --converge F|off   stop the search once the best has stood for --patience\n"
        "                     evaluations and as many as it took to find it, and the model\n"
        "                     expects no other candidate to beat it by more than F (default\n"
        "                     0.5%%; bayes only); off: search every candidate\n"
        "  --patience N       evaluations the best must stand before converging (default 20)\n"
        "  --cold             no warm start: by default the winners --profile already holds\n"
        "                     for the op (nearest shape on this device, then other devices)\n"
        "                     are measured first\n"
        "  --batch K          propose K candidates at a time and measure them all before\n"
        "                     the strategy hears any (under mpirun: one per rank by default)\n"
        "  --candidate-timeout S  end the process when one candidate takes longer than S\n"
        "                     seconds, first writing it to the log as rejected: the same\n"
        "                     command resumes past it (under mpirun: the job ends)\n"
        "  --backend replay:LOG  measure nothing: each candidate takes its median in LOG's\n"
        "                     exhaustive landscape (same seed and batch: same search)\n"
        "  --warm-log LOG     another run's event log of the same op and backend (another\n"
        "                     shape or machine): its medians are the strategy's prior\n"
        "  --budget N         measure at most N candidates per op (screened ones count,\n"
        "                     rejected ones do not, resumed ones do; progress shows\n"
        "                     measured/budget)\n"
        "  --time SEC         stop searching an op after SEC seconds\n"
        "  --sweep SIZE=a,b   tune at each value of one preset size (one profile entry each)\n"
        "  --profile FILE     merge the winners into this profile (atomic, locked)\n"
        "  --log FILE         append events to FILE; running the same command again resumes,\n"
        "                     skipping every candidate already measured (with `all` or\n"
        "                     --sweep, FILE gets a suffix per op and size)\n"
        "  --no-screen        measure every candidate fully\n"
        "  --confirm K        re-measure the best K interleaved (default 3), with every\n"
        "                     near-tie (intervals that reach the best's) up to 8 in all\n"
        "  --max-time S       time cap per candidate (default 1)\n"
        "  --max-lost X|off   a sample whose threads lost more than this share of it to other\n"
        "                     work is thrown away (default 0.05; FLARETUNE_MAX_LOST sets it for\n"
        "                     every command); a candidate left with too few clean samples is\n"
        "                     'not measured cleanly' and never ranked (docs/measurement.md)\n"
        "  --watchdog F|off   stop a candidate's call past F times the best so far (and past\n"
        "                     50 ms); the candidate is recorded as stopped (default 20)\n"
        "  --noise X          target relative CI half-width of a median (default 0.02)\n"
        "  --timer T          the GPU clock: auto (CUPTI, else CUDA events), cupti or\n"
        "                     events (docs/cuda.md, \"Timing\")\n"
        "  --jobs N           threads compiling the candidates' kernels ahead of the search,\n"
        "                     1 to 64 (default: every core; on cuda always, since checking\n"
        "                     a candidate compiles it; on cuda-emu only when --jobs is given)\n"
        "  --predict DEVICE   predict each candidate's time on GPU DEVICE (a100, h100, h200,\n"
        "                     l40s, rtx4090, b200) before measuring any, from its napkin bytes\n"
        "                     and FLOPs and its kernels' occupancy (docs/cuda.md, \"Predicted\n"
        "                     time\"); off: none. Default: on cuda the GPU it runs on, else\n"
        "                     off. The exhaustive strategy then measures the fastest predicted\n"
        "                     first (random, anneal and evolve keep their own order); events\n"
        "                     carry predicted_s, and the summary gives the rank correlation of\n"
        "                     predicted and measured times\n"
        "  --prune predicted=F\n"
        "                     never measure a candidate predicted slower than F (> 1) times\n"
        "                     the best prediction (the default is kept as the baseline); said\n"
        "                     with the count; needs a prediction\n"
        "  --quiet            no progress\n"
        "  --tui              show the run in a terminal dashboard (docs/dashboard.md); p\n"
        "                     pauses and resumes the search, q stops it (as Ctrl-C)\n\n"
        "The profile and the logs are checked before the search: an unusable --profile or\n"
        "a --log another tuner is writing fails at once. Roofline fractions are against this\n"
        "machine's cache-aware ceilings; a busy machine is detected and said\n"
        "(docs/measurement.md).\n\n"
        "Ctrl-C finishes the event in flight, saves the best so far, and exits with 130.\n\n");
    ft_cli_tune_t1_usage(f);
}

static volatile int stop_flag, pause_flag;

/* Ctrl-C (or SIGTERM): finish the event in flight, save, exit 130. A second one ends the
 * process at once, before the profile is saved: one line says what is kept. */
static void on_signal(int sig) {
    if (!stop_flag) {
        stop_flag = 1;
        return;
    }
    static const char msg[] = "flaretune: stopped again: ending now, the profile not saved (a "
                              "--log keeps every result: the same command resumes from it)\n";
    ssize_t w = write(STDERR_FILENO, msg, sizeof msg - 1);
    (void)w;
    signal(sig, SIG_DFL);
    raise(sig);
}

/* ---- progress, rendered from the events ---------------------------------------------------- */

typedef struct {
    int tty, quiet;
    int valid, budget, resumed_measured, resumed_rejected, pruned;
    int measured, rejected, unclean;
    double best, def, t0;
    char op[64];
    char def_cfg[1024]; /* the default configuration, compact JSON with sorted keys */
} progress;

/* A configuration as progress compares it: compact JSON, keys sorted ("" when too long). */
static void config_text(const json_t *cfg, char *buf, size_t n) {
    size_t w = json_dumpb(cfg, buf, n - 1, JSON_COMPACT | JSON_SORT_KEYS);
    buf[w < n ? w : 0] = '\0';
}

/* Measured out of what the run will measure (ft_tune_progress_target); rejected apart. */
static int progress_target(const progress *p) {
    return ft_tune_progress_target(p->valid, p->budget, p->resumed_measured,
                                   p->resumed_rejected + p->rejected);
}

/* run_start's prediction: for which device, the best, the order, what was pruned. */
static void progress_predict(const json_t *pr) {
    if (!pr) return;
    int n = (int)json_integer_value(json_object_get(pr, "predicted"));
    int un = (int)json_integer_value(json_object_get(pr, "unpredicted"));
    int pruned = (int)json_integer_value(json_object_get(pr, "pruned"));
    const char *why = json_string_value(json_object_get(pr, "why"));
    char t[32];
    if (n == 0) {
        fprintf(stderr, "  no prediction: %s\n", why ? why : "none could be made");
        return;
    }
    fprintf(stderr,
            "  predicted on %s for %d of %d candidates (napkin figures: docs/cuda.md): best %s "
            "(%s-bound); %s\n",
            json_string_value(json_object_get(pr, "device")), n, n + un,
            ft_fmt_time(json_number_value(json_object_get(pr, "best_s")), 0, t, sizeof t),
            json_string_value(json_object_get(pr, "best_bound")),
            strcmp(json_string_value(json_object_get(pr, "order")), "predicted") == 0
                ? "measuring the fastest predicted first"
                : "the strategy keeps its own order");
    if (un)
        fprintf(stderr, "  %d candidate%s without a prediction: %s\n", un, un > 1 ? "s" : "", why);
    if (json_is_number(json_object_get(pr, "prune_factor")))
        fprintf(stderr,
                "  pruned %d of %d candidates predicted slower than %gx the best (--prune "
                "predicted=%g); the default is kept as the baseline\n",
                pruned, n + un, json_number_value(json_object_get(pr, "prune_factor")),
                json_number_value(json_object_get(pr, "prune_factor")));
}

static void progress_start(progress *p, const json_t *ev) {
    p->valid = (int)json_integer_value(json_object_get(ev, "space_valid"));
    p->budget = (int)json_integer_value(json_object_get(ev, "budget"));
    int resumed = (int)json_integer_value(json_object_get(ev, "resumed"));
    p->resumed_rejected = (int)json_integer_value(json_object_get(ev, "resumed_rejected"));
    p->resumed_measured = resumed - p->resumed_rejected;
    p->pruned = (int)json_integer_value(json_object_get(json_object_get(ev, "predict"), "pruned"));
    p->valid -= p->pruned;
    p->measured = p->rejected = 0;
    /* a resumed run starts from the best and the default its log already holds */
    const json_t *rb = json_object_get(ev, "resumed_best_s");
    const json_t *rd = json_object_get(ev, "resumed_default_s");
    p->best = json_is_number(rb) ? json_number_value(rb) : INFINITY;
    p->def = json_is_number(rd) ? json_number_value(rd) : INFINITY;
    config_text(json_object_get(ev, "default"), p->def_cfg, sizeof p->def_cfg);
    p->t0 = ft_now_s();
    snprintf(p->op, sizeof p->op, "%s", json_string_value(json_object_get(ev, "op")));
    char *dims = json_dumps(json_object_get(ev, "dims"), JSON_COMPACT);
    fprintf(stderr, "tune %s on %s at %s %s: %lld configurations, %d valid%s%s, strategy %s\n",
            p->op, json_string_value(json_object_get(ev, "backend")),
            json_string_value(json_object_get(ev, "preset")), dims ? dims : "",
            (long long)json_integer_value(json_object_get(ev, "space_size")), p->valid,
            resumed ? ", resumed " : "", resumed ? "(skipping measured ones)" : "",
            json_string_value(json_object_get(ev, "strategy")));
    free(dims);
    if (json_is_true(json_object_get(ev, "verify_reduced"))) {
        char *vd = json_dumps(json_object_get(ev, "verify_dims"), JSON_COMPACT);
        fprintf(stderr,
                "  verifying at a reduced shape %s (the reference would be too slow at the "
                "tuning shape)\n",
                vd ? vd : "");
        free(vd);
    }
    const json_t *ign = json_object_get(ev, "resume_ignored");
    for (size_t i = 0; i < json_array_size(ign); i++)
        fprintf(stderr,
                "  resume: event %lld of the log not trusted (%s): its candidate is measured "
                "again if the search comes to it\n",
                (long long)json_integer_value(json_object_get(json_array_get(ign, i), "event")),
                json_string_value(json_object_get(json_array_get(ign, i), "why")));
    progress_predict(json_object_get(ev, "predict"));
    const json_t *load = json_object_get(ev, "load");
    if (json_is_true(json_object_get(load, "busy")))
        fprintf(stderr,
                "  warning: the machine is busy: other processes use %.2f of %lld CPUs "
                "(steal %.0f%%); timings will show it\n",
                json_number_value(json_object_get(load, "other_cpus")),
                (long long)json_integer_value(json_object_get(load, "cpus")),
                100 * json_number_value(json_object_get(load, "steal_frac")));
}

static void progress_event(void *ctx, const json_t *ev) {
    progress *p = ctx;
    if (p->quiet) return;
    const char *kind = json_string_value(json_object_get(ev, "event"));
    char a[32], b[32];
    if (!strcmp(kind, "run_start")) {
        progress_start(p, ev);
        return;
    }
    int measured = !strcmp(kind, "measured"), rejected = !strcmp(kind, "rejected");
    if (!strcmp(kind, "warm")) {
        const json_t *first = json_object_get(ev, "first");
        for (size_t i = 0; i < json_array_size(first); i++) {
            const json_t *f = json_array_get(first, i);
            char *cfg = json_dumps(json_object_get(f, "config"), JSON_COMPACT);
            fprintf(stderr, "  warm start: %s %s (the profile's winner on %s at %s shape)\n",
                    json_is_null(json_object_get(f, "config")) ? "skipping" : "measuring first",
                    cfg ? cfg : "a config that is not a candidate here",
                    json_string_value(json_object_get(f, "device")),
                    json_is_true(json_object_get(f, "exact_shape")) ? "this" : "the nearest");
            free(cfg);
        }
        if (json_is_string(json_object_get(ev, "prior_log")))
            fprintf(stderr, "  warm start: the medians of %lld candidates in %s are the prior\n",
                    (long long)json_integer_value(json_object_get(ev, "prior")),
                    json_string_value(json_object_get(ev, "prior_log")));
        return;
    }
    if (!measured && !rejected) {
        if (!strcmp(kind, "run_end") && p->tty) fputc('\n', stderr);
        const char *end = json_string_value(json_object_get(ev, "search_end"));
        if (!strcmp(kind, "run_end") && end && !strcmp(end, "converged"))
            fprintf(stderr,
                    "  search converged after %lld of %d candidates (no new best for as long as "
                    "it took to find it; --converge off searches them all)\n",
                    (long long)json_integer_value(json_object_get(ev, "evaluations")), p->valid);
        return;
    }
    double med = INFINITY;
    /* What the scheduler did to it: "" for a clean measurement, else why it is not ranked. */
    char dirty[160] = "";
    if (rejected) {
        p->rejected++;
    } else {
        p->measured++;
        const json_t *st = json_object_get(ev, "stats");
        const json_t *stop = json_object_get(ev, "stopped");
        int clean = !json_is_false(json_object_get(ev, "clean"));
        ft_tune_unranked_text(ev, dirty, sizeof dirty);
        if (clean && !stop) {
            med = json_number_value(json_object_get(st, "median_s"));
            char cfg[sizeof p->def_cfg];
            config_text(json_object_get(ev, "config"), cfg, sizeof cfg);
            if (cfg[0] && !strcmp(cfg, p->def_cfg)) p->def = med;
            if (!json_is_true(json_object_get(ev, "screened")) && med < p->best) p->best = med;
        }
        if (!clean) p->unclean++;
    }
    int done = p->resumed_measured + p->measured, total = progress_target(p);
    if (total < done) total = done; /* (a default measured again past a spent budget) */
    double el = ft_now_s() - p->t0;
    double eta = p->measured ? el / p->measured * (total - done) : 0;
    if (eta < 0) eta = 0;
    if (p->tty) {
        int width = 24, fill = total ? done * width / total : width;
        char bar[32];
        for (int i = 0; i < width; i++)
            bar[i] = i < fill ? '#' : '.';
        bar[width] = '\0';
        fprintf(stderr, "\r\033[K  [%s] %d/%d measured  best %s", bar, done, total,
                ft_fmt_time(p->best, 0, a, sizeof a));
        if (isfinite(p->def) && isfinite(p->best))
            fprintf(stderr, " (x%.2f vs default)", p->def / p->best);
        if (p->rejected) fprintf(stderr, "  %d rejected", p->rejected);
        if (p->unclean) fprintf(stderr, "  %d not measured cleanly (busy)", p->unclean);
        fprintf(stderr, "  ETA %.0fs", eta);
        fflush(stderr);
    } else {
        char *cfg = json_dumps(json_object_get(ev, "config"), JSON_COMPACT);
        if (rejected)
            fprintf(stderr, "  rejected (%s): %s  %s\n",
                    json_string_value(json_object_get(ev, "reason")),
                    json_string_value(json_object_get(ev, "message")), cfg ? cfg : "");
        else
            fprintf(stderr, "  %d/%d %s%s%s  %s  best %s\n", done, total,
                    dirty[0] ? "-" : ft_fmt_time(med, 0, a, sizeof a),
                    json_is_true(json_object_get(ev, "screened")) ? " (screened)" : "", dirty,
                    cfg ? cfg : "", isfinite(p->best) ? ft_fmt_time(p->best, 0, b, sizeof b) : "-");
        free(cfg);
    }
}

/* ---- the command --------------------------------------------------------------------------- */

typedef struct {
    char op[48];
    ft_tune_result r;
    int ok;
    char unsaved[512]; /* the winner, when the profile could not be written ("" otherwise) */
} row;

/* A run without a winner only because the scheduler left nothing measured cleanly: not a
 * failure of the kernels (exit 0, the summary says so; a rerun measures them again). */
static int busy_only(const row *rw) {
    return !rw->r.found && !rw->r.interrupted && rw->r.unclean > 0;
}

/* One ft_tune_run: an op at one value of the sweep. Every job is planned (and its options
 * checked) before the first runs. */
typedef struct {
    const ft_op *op;
    const ft_backend *be;
    ft_attrs attrs;
    ft_preset preset;
    char log[1024];
    const char *predict; /* the device its candidates are predicted on (ft_tune_opts) */
} job;

typedef struct {
    ft_tune_opts to; /* the settings every job shares */
    job *jobs;
    int njobs;
    row *rows;
    int nrows, code;
    ft_status status; /* a run that failed stops the jobs: its error */
    ft_err err;
    ft_tui_feed *feed; /* --tui: where the worker says it has finished */
} tuning;

/* The profile of a finished run could not be written: its error line says where the result is
 * kept, the summary printed before it (tune_fail) and the job's event log, from which the same
 * command resumes and saves again. */
static void save_failed_note(const job *jb, ft_err *err) {
    if (!err) return;
    size_t k = strlen(err->msg);
    if (jb->log[0])
        snprintf(err->msg + k, sizeof err->msg - k,
                 " (the result is in the summary above and in the event log %s: the same command "
                 "resumes from it and saves again)",
                 jb->log);
    else
        snprintf(err->msg + k, sizeof err->msg - k,
                 " (the result is in the summary above only: there is no event log, --log)");
}

/* Job j into *rw on group g of the ranks (g = 0 and no workers when not distributed). */
static ft_status run_job(tuning *T, int j, int g, int quiet, row *rw, ft_err *err) {
    const job *jb = &T->jobs[j];
    ft_tune_opts to = T->to;
    to.op = jb->op;
    to.be = jb->be;
    to.attrs = jb->attrs;
    to.preset = jb->preset;
    to.log_path = jb->log[0] ? jb->log : NULL;
    to.predict = jb->predict;
    to.workers = ft_cli_mpi_workers(g, j);
    to.run_index = j + 1;
    to.run_count = T->njobs;
    if (quiet) { /* sessions side by side: no interleaved progress lines, one measurement at a
                    time on this process's device */
        static pthread_mutex_t measuring = PTHREAD_MUTEX_INITIALIZER;
        to.listener = NULL;
        to.measure_lock = &measuring;
    }
    snprintf(rw->op, sizeof rw->op, "%s", jb->op->name);
    ft_status s = ft_tune_run(&to, &rw->r, err);
    ft_cli_mpi_session_done(g); /* the group's workers go on to their next job */
    rw->ok = (!s || rw->r.save_failed) && rw->r.found;
    if (s && rw->r.save_failed) {
        ft_config_format(jb->be->space(jb->op), &rw->r.winner, rw->unsaved, sizeof rw->unsaved);
        save_failed_note(jb, err);
    }
    return s;
}

static void run_jobs_in_range(tuning *T) {
    for (int j = 0; j < T->njobs && !stop_flag; j++) {
        row *rw = &T->rows[T->nrows++];
        ft_status s = run_job(T, j, 0, 0, rw, &T->err);
        if (s) {
            if (!rw->r.save_failed) T->nrows--; /* a result that was not saved is still shown */
            T->status = s;
            return;
        }
        if (!rw->ok && !busy_only(rw)) T->code = FT_EXIT_VERIFY;
    }
}

/* Distributed with several jobs: one thread per group of ranks, each taking the next job. */
typedef struct {
    tuning *T;
    int g;
    pthread_mutex_t *lock;
    int *next;
    row *rows;       /* per job */
    ft_status *st;   /* per job */
    ft_err *errs;    /* per job */
} group_thread;

static void *run_group(void *arg) {
    group_thread *gt = arg;
    for (;;) {
        pthread_mutex_lock(gt->lock);
        int j = stop_flag ? gt->T->njobs : (*gt->next)++;
        pthread_mutex_unlock(gt->lock);
        if (j >= gt->T->njobs) break;
        gt->st[j] = run_job(gt->T, j, gt->g, 1, &gt->rows[j], &gt->errs[j]);
        if (gt->st[j]) stop_flag = 1; /* a failed run stops the others at their next job */
    }
    return NULL;
}

static void run_jobs_grouped(tuning *T, int ngroups) {
    group_thread gt[FT_CLI_MPI_MAX_RANKS];
    pthread_t th[FT_CLI_MPI_MAX_RANKS];
    pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
    int next = 0;
    row *rows = calloc((size_t)T->njobs, sizeof *rows);
    ft_status *st = calloc((size_t)T->njobs, sizeof *st);
    ft_err *errs = calloc((size_t)T->njobs, sizeof *errs);
    if (!rows || !st || !errs) {
        T->status = ft_err_set(&T->err, FT_ENOMEM, "out of memory");
    } else {
        for (int g = 0; g < ngroups; g++) {
            gt[g] = (group_thread){T, g, &lock, &next, rows, st, errs};
            pthread_create(&th[g], NULL, run_group, &gt[g]);
        }
        for (int g = 0; g < ngroups; g++)
            pthread_join(th[g], NULL);
        for (int j = 0; j < T->njobs; j++) {
            if (st[j] && !T->status) {
                T->status = st[j];
                T->err = errs[j];
            }
            /* Not run (stopped) or failed; a result that was not saved is still shown. */
            if (!rows[j].op[0] || (st[j] && !rows[j].r.save_failed)) continue;
            T->rows[T->nrows++] = rows[j];
            if (!rows[j].ok && !busy_only(&rows[j])) T->code = FT_EXIT_VERIFY;
        }
    }
    free(rows);
    free(st);
    free(errs);
}

/* The whole run as one NVTX range on the thread that tunes, colored by its op ("all" when the
 * jobs span several ops). */
static void run_jobs(tuning *T) {
    int one_op = T->njobs > 0 && T->jobs[0].op == T->jobs[T->njobs - 1].op;
    ft_nvtx_push("tune", one_op ? T->jobs[0].op->name : "all", 0);
    int ngroups = ft_cli_mpi_groups(T->feed ? 1 : T->njobs); /* --tui follows one session */
    if (ngroups > 1)
        run_jobs_grouped(T, ngroups);
    else
        run_jobs_in_range(T);
    ft_cli_mpi_all_done();
    ft_nvtx_pop();
}

/* --tui: the tuner on this thread, the dashboard on the main one. */
static void *tune_worker(void *arg) {
    tuning *T = arg;
    run_jobs(T);
    ft_cli_dash_end(T->feed, T->status ? &T->err : NULL,
                    stop_flag ? "stopped" : "every run finished");
    return NULL;
}

static int run_dashboard(tuning *T, const char *target) {
    ft_tui_feed feed;
    if (!ft_tui_feed_init(&feed)) return ft_cli_fail(FT_EXIT_FAIL, "tune: out of memory");
    T->feed = &feed;
    T->to.listener = ft_tui_feed_listener;
    T->to.listener_ctx = &feed;
    T->to.pause = &pause_flag;
    char title[128];
    snprintf(title, sizeof title, "tune %s", target);
    ft_cli_dash d = {.title = title, .feed = &feed, .worker = tune_worker, .arg = T,
                     .pause = &pause_flag, .stop = &stop_flag, .expected_runs = T->njobs,
                     .on_signal = on_signal,
                     .stopping = "flaretune: stopping the tuner (it finishes the candidate in flight)"};
    int done;
    ft_err err = {0};
    ft_status s = ft_cli_dashboard(&d, &done, &err);
    ft_tui_feed_free(&feed);
    if (s) return ft_cli_fail_err(&err);
    return 0;
}

static int parse_sweep(const char *arg, char *name, size_t n, long long *vals, int *nvals) {
    const char *eq = strchr(arg, '=');
    if (!eq || eq == arg || (size_t)(eq - arg) >= n) return 0;
    snprintf(name, n, "%.*s", (int)(eq - arg), arg);
    *nvals = 0;
    const char *p = eq + 1;
    while (*p && *nvals < 32) {
        char *end;
        long long v = strtoll(p, &end, 10);
        if (end == p || v < 1) return 0;
        vals[(*nvals)++] = v;
        p = end;
        if (*p == ',')
            p++;
        else if (*p)
            return 0;
    }
    return *nvals > 0;
}

/* The command line of one tune, and what it names: the ops and the values of the sweep. */
typedef struct {
    ft_cli_problem prob;
    ft_tune_opts to;
    const char *target, *sweep, *log;
    const char *predict; /* --predict: a device, "off", or NULL (the backend's default) */
    int quiet, tui;
    const ft_op *ops[16];
    int nops;
    char sweep_name[32];
    long long sweep_vals[32];
    int nsweep;
} tune_args;

/* The options of `tune`: the codes of its own, and the table getopt_long reads. */
enum {
    O_STRAT = 1,
    O_BUDGET,
    O_TIME,
    O_SWEEP,
    O_PROFILE,
    O_LOG,
    O_NOSCREEN,
    O_CONFIRM,
    O_WATCHDOG,
    O_QUIET,
    O_TUI,
    O_JOBS,
    O_PREDICT,
    O_PRUNE,
    O_CONVERGE,
    O_PATIENCE,
    O_COLD,
    O_WARMLOG,
    O_BATCH,
    O_CTIMEOUT
};
static const struct option opts[] = {
    FT_CLI_PROBLEM_OPTIONS,
    FT_CLI_ARG("strategy", O_STRAT),
    FT_CLI_ARG("budget", O_BUDGET),
    FT_CLI_ARG("time", O_TIME),
    FT_CLI_ARG("sweep", O_SWEEP),
    FT_CLI_ARG("profile", O_PROFILE),
    FT_CLI_ARG("log", O_LOG),
    FT_CLI_FLAG("no-screen", O_NOSCREEN),
    FT_CLI_ARG("confirm", O_CONFIRM),
    FT_CLI_MEASURE_OPTIONS,
    FT_CLI_ARG("watchdog", O_WATCHDOG),
    FT_CLI_FLAG("quiet", O_QUIET),
    FT_CLI_FLAG("tui", O_TUI),
    FT_CLI_ARG("jobs", O_JOBS),
    FT_CLI_ARG("predict", O_PREDICT),
    FT_CLI_ARG("prune", O_PRUNE),
    FT_CLI_ARG("converge", O_CONVERGE),
    FT_CLI_ARG("patience", O_PATIENCE),
    FT_CLI_FLAG("cold", O_COLD),
    FT_CLI_ARG("warm-log", O_WARMLOG),
    FT_CLI_ARG("batch", O_BATCH),
    FT_CLI_ARG("candidate-timeout", O_CTIMEOUT),
    FT_CLI_END,
};

/* --prune predicted=F: F > 1. Returns an exit code. */
static int parse_prune(const char *arg, double *factor) {
    const char *eq = strchr(arg, '=');
    if (!eq)
        return ft_cli_fail(FT_EXIT_USAGE, "tune: --prune expects predicted=FACTOR, got '%s'", arg);
    if (eq - arg != 9 || strncmp(arg, "predicted", 9) != 0)
        return ft_cli_fail(FT_EXIT_USAGE,
                           "tune: --prune: unknown criterion '%.*s' (predicted=FACTOR is the one "
                           "there is)",
                           (int)(eq - arg), arg);
    char *end;
    errno = 0;
    double v = strtod(eq + 1, &end);
    if (end == eq + 1 || *end || errno || !(v > 1) || !isfinite(v))
        return ft_cli_fail(FT_EXIT_USAGE,
                           "tune: --prune predicted=FACTOR expects a number > 1 (the slowest "
                           "prediction measured, as a multiple of the best), got '%s'",
                           eq + 1);
    *factor = v;
    return FT_EXIT_OK;
}

/* The most candidates --budget and --patience take (as tune --t1 --budget). */
#define FT_TUNE_MAX_COUNT 1000000

/* ft_cli_whole into an int (hi fits one). */
static int count(const char *arg, long lo, long hi, int *out) {
    long v;
    if (!ft_cli_whole(arg, lo, hi, &v)) return 0;
    *out = (int)v;
    return 1;
}

/* One option of tune's own (not a problem option). Returns an exit code, 0 when taken. */
static int tune_opt(void *ctx, int o, const char *arg) {
    tune_args *a = ctx;
    ft_tune_opts *to = &a->to;
    char *end;
    switch (o) {
    case O_STRAT: {
        int k = ft_strategy_parse(arg);
        if (k < 0)
            return ft_cli_fail(FT_EXIT_USAGE,
                               "tune: unknown strategy '%s' (exhaustive, random, anneal, evolve, "
                               "bayes)",
                               arg);
        to->strategy = (ft_strategy_kind)k;
        break;
    }
    case O_BUDGET:
        if (!count(arg, 1, FT_TUNE_MAX_COUNT, &to->budget))
            return ft_cli_fail(FT_EXIT_USAGE, "tune: --budget expects 1 to %d candidates, got '%s'",
                               FT_TUNE_MAX_COUNT, arg);
        break;
    case O_TIME:
        to->time_budget_s = strtod(arg, &end);
        if (*end || !(to->time_budget_s > 0))
            return ft_cli_fail(FT_EXIT_USAGE, "tune: --time expects seconds > 0");
        break;
    case O_SWEEP: a->sweep = arg; break;
    case O_PROFILE: to->profile_path = arg; break;
    case O_LOG:
        if (!*arg)
            return ft_cli_fail(FT_EXIT_USAGE,
                               "tune: --log needs a file name (leave --log out for no log)");
        a->log = arg;
        break;
    case O_NOSCREEN: to->screen = 0; break;
    case O_CONFIRM:
        if (!count(arg, 1, 8, &to->confirm_top))
            return ft_cli_fail(FT_EXIT_USAGE, "tune: --confirm expects 1 to 8, got '%s'", arg);
        break;
    case FT_OPT_MAX_TIME:
    case FT_OPT_NOISE:
    case FT_OPT_MAX_LOST: return ft_cli_measure_opt(&to->measure, o, arg, "tune");
    case O_WATCHDOG:
        if (!strcmp(arg, "off")) {
            to->stop_factor = 0;
            break;
        }
        to->stop_factor = strtod(arg, &end);
        if (end == arg || *end || !(to->stop_factor > 1))
            return ft_cli_fail(FT_EXIT_USAGE,
                               "tune: --watchdog expects a factor > 1 or 'off', got '%s'", arg);
        break;
    case O_QUIET: a->quiet = 1; break;
    case O_TUI: a->tui = 1; break;
    case O_JOBS:
        if (!count(arg, 1, FT_TUNE_MAX_JOBS, &to->jobs))
            return ft_cli_fail(FT_EXIT_USAGE, "tune: --jobs expects 1 to %d threads, got '%s'",
                               FT_TUNE_MAX_JOBS, arg);
        break;
    case O_PREDICT:
        if (strcmp(arg, "off") != 0 && !ft_gpu_spec_find(arg))
            return ft_cli_fail(FT_EXIT_USAGE, "tune: --predict: unknown GPU '%s' (%s, or off)", arg,
                               ft_gpu_spec_names());
        a->predict = arg;
        break;
    case O_PRUNE: /* one factor (replay's --prune takes several) */
        return parse_prune(arg, &to->prune_predicted);
    case O_CONVERGE: {
        if (strcmp(arg, "off") == 0) {
            to->converge = 0;
            break;
        }
        errno = 0;
        double v = strtod(arg, &end);
        if (end != arg && *end == '%' && !end[1]) {
            v /= 100;
            end++;
        }
        if (end == arg || *end || errno || !(v > 0) || !(v < 1))
            return ft_cli_fail(FT_EXIT_USAGE,
                               "tune: --converge expects a fraction such as 0.005 or 0.5%%, or "
                               "off, got '%s'",
                               arg);
        to->converge = v;
        break;
    }
    case O_PATIENCE:
        if (!count(arg, 1, FT_TUNE_MAX_COUNT, &to->patience))
            return ft_cli_fail(FT_EXIT_USAGE,
                               "tune: --patience expects 1 to %d evaluations, got '%s'",
                               FT_TUNE_MAX_COUNT, arg);
        break;
    case O_COLD: to->warm = 0; break;
    case O_WARMLOG: to->warm_log = arg; break;
    case O_BATCH: {
        char *rest;
        double v = strtod(arg, &rest);
        if (rest == arg || *rest || !(v >= 1) || v > 1e6 || v != (int)v)
            return ft_cli_fail(FT_EXIT_USAGE, "tune: --batch expects a whole number >= 1, got '%s'",
                               arg);
        to->batch = (int)v;
        break;
    }
    case O_CTIMEOUT: return ft_cli_candidate_timeout("tune", arg, &to->candidate_timeout_s);
    }
    return FT_EXIT_OK;
}

static int tune_parse(int argc, char **argv, tune_args *a) {
    memset(a, 0, sizeof *a);
    ft_tune_defaults(&a->to);
    int code = ft_cli_parse_op("tune", "an op name or `all`", argc, argv, opts, &a->prob, tune_opt,
                               a, &a->target);
    if (code) return code;
    if (a->prob.config)
        return ft_cli_fail(FT_EXIT_USAGE,
                           "tune: --config fixes a configuration; tune searches them (use bench)");
    return FT_EXIT_OK;
}

/* A backend by name, `replay:LOG` included. */
static ft_status tune_resolve(const char *name, const ft_op *op, const ft_backend **be,
                              ft_err *err) {
    if (!name || strncmp(name, "replay:", 7) != 0) return ft_backend_resolve(name, op, be, err);
    if (!name[7])
        return ft_err_set(err, FT_EINVAL,
                          "--backend replay:LOG: the log's path after 'replay:' is missing");
    ft_status s = ft_replay_backend_open(name + 7, be, err);
    if (!s && op && !(*be)->supports(op))
        s = ft_err_set(err, FT_EUNSUPPORTED, "%s holds a landscape of another op than %s",
                       name + 7, op->name);
    return s;
}

/* What can be checked before the search: the log and the profile are two files, the profile can
 * be written (found now, not after the search), the dashboard has a terminal, the ops exist on the
 * backend, the sweep is well formed. */
static int tune_check(tune_args *a) {
    ft_err err = {0};
    a->to.seed = a->prob.seed;
    a->to.stop = &stop_flag;
    if (a->log && ft_same_path(a->log, a->to.profile_path))
        return ft_cli_fail(FT_EXIT_USAGE,
                           "tune: --log and --profile both name %s: give each its own file",
                           a->log);
    if (a->to.profile_path && ft_profile_check_writable(a->to.profile_path, &err))
        return ft_cli_fail_profile(&err);
    if (a->tui && (!isatty(STDIN_FILENO) || !isatty(STDOUT_FILENO)))
        return ft_cli_fail(FT_EXIT_USAGE, "tune: --tui needs a terminal (stdin and stdout)");
    if (!strcmp(a->target, "all")) {
        for (int i = 0; i < ft_op_count(); i++) {
            const ft_backend *b;
            if (tune_resolve(a->prob.backend, ft_op_at(i), &b, NULL) == FT_OK)
                a->ops[a->nops++] = ft_op_at(i);
        }
        if (!a->nops) {
            if (tune_resolve(a->prob.backend, NULL, &a->to.be, &err))
                return ft_cli_fail_err(&err);
            return ft_cli_fail(FT_EXIT_USAGE, "tune: backend %s implements no op", a->prob.backend);
        }
    } else {
        const ft_op *op = ft_op_find(a->target, &err);
        if (!op) return ft_cli_fail_err(&err);
        a->ops[a->nops++] = op;
    }
    a->nsweep = 1;
    if (a->sweep &&
        !parse_sweep(a->sweep, a->sweep_name, sizeof a->sweep_name, a->sweep_vals, &a->nsweep))
        return ft_cli_fail(FT_EXIT_USAGE,
                           "tune: --sweep expects SIZE=v1,v2,... with positive integers, got '%s'",
                           a->sweep);
    return FT_EXIT_OK;
}

/* The attributes of op from --attr. With several ops, attributes of other ops do not apply to
 * this one: it takes those it accepts. Returns an exit code. */
static int tune_op_attrs(const tune_args *a, const ft_cli_problem *pp, const ft_op *op,
                         ft_call *tmp) {
    ft_call_init(tmp, op);
    int code = ft_cli_apply_attrs(pp, tmp);
    if (!code) return FT_EXIT_OK;
    if (a->nops == 1) return code;
    ft_attrs_default(&tmp->attrs);
    for (int i = 0; i < pp->nattrs; i++) {
        char name[64];
        const char *eq = strchr(pp->attrs[i], '=');
        snprintf(name, sizeof name, "%.*s", (int)(eq - pp->attrs[i]), pp->attrs[i]);
        if (ft_op_accepts_attr(op, name)) ft_attrs_set(&tmp->attrs, op, name, eq + 1, NULL);
    }
    return FT_EXIT_OK;
}

/* One job per value of the sweep for op, each with its preset and its log. */
static int tune_plan_sweep(const tune_args *a, const ft_cli_problem *pp, const ft_op *op,
                           const ft_backend *be, const ft_attrs *attrs, tuning *T) {
    ft_err err = {0};
    int code;
    for (int v = 0; v < a->nsweep && !stop_flag; v++) {
        job *jb = &T->jobs[T->njobs];
        jb->op = op;
        jb->be = be;
        jb->attrs = *attrs;
        if ((code = ft_cli_make_preset(pp, NULL, &jb->preset))) return code;
        if (a->sweep) {
            char set[64];
            snprintf(set, sizeof set, "%s=%lld", a->sweep_name, a->sweep_vals[v]);
            if (ft_preset_set(&jb->preset, set, &err)) return ft_cli_fail_err(&err);
        }
        if ((code = ft_cli_check_preset_attrs(pp, op, &jb->preset))) return code;
        if (ft_replay_backend_check(be, op, attrs, &jb->preset, &err)) return ft_cli_fail_err(&err);
        if (a->nops == 1 && v == 0) { /* (`tune all`: a size read by some of the ops) */
            ft_call c;
            ft_call_init(&c, op);
            c.attrs = *attrs;
            if (op->from_preset(&c, &jb->preset, NULL) == FT_OK &&
                (code = ft_cli_check_sets_read(pp, &c)))
                return code;
        }
        jb->log[0] = '\0';
        if (a->log) {
            if (a->nops == 1 && !a->sweep)
                snprintf(jb->log, sizeof jb->log, "%s", a->log);
            else if (a->sweep)
                snprintf(jb->log, sizeof jb->log, "%s.%s.%s%lld", a->log, op->name, a->sweep_name,
                         a->sweep_vals[v]);
            else
                snprintf(jb->log, sizeof jb->log, "%s.%s", a->log, op->name);
        }
        T->njobs++;
    }
    return FT_EXIT_OK;
}

/* The device backend be predicts on (ft_tune_opts.predict): --predict's, or by default the GPU
 * the `cuda` backend runs on ("") and nothing elsewhere. A prune needs a prediction. Returns an
 * exit code. */
static int tune_predict_of(const tune_args *a, const ft_backend *be, const char **out) {
    *out = NULL;
    if (a->predict && strcmp(a->predict, "off") != 0) {
        if (!be->predict)
            return ft_cli_fail(FT_EXIT_USAGE,
                               "tune: --predict %s: backend %s predicts no GPU time (cuda and "
                               "cuda-emu do)",
                               a->predict, be->name);
        *out = a->predict;
    } else if (!a->predict && be == &ft_backend_cuda) {
        *out = "";
    }
    if (a->to.prune_predicted > 0 && !*out)
        return ft_cli_fail(FT_EXIT_USAGE,
                           "tune: --prune predicted=%g needs a prediction: --predict DEVICE "
                           "(on %s there is none by default)",
                           a->to.prune_predicted, be->name);
    return FT_EXIT_OK;
}

/* Plan every run first, so a bad option shows before anything runs. */
static int tune_plan(const tune_args *a, tuning *T) {
    ft_err err = {0};
    int code;
    for (int k = 0; k < a->nops && !stop_flag; k++) {
        const ft_op *op = a->ops[k];
        const ft_backend *be;
        if (tune_resolve(a->prob.backend, op, &be, &err)) return ft_cli_fail_err(&err);
        char fallback[64];
        const char *def_preset = ft_cli_default_preset(op);
        if (a->prob.preset) {
            /* With one preset for several ops, attention.decode takes its decode sibling. */
            snprintf(fallback, sizeof fallback, "%s", a->prob.preset);
            char *dot = strrchr(fallback, '.');
            if (!strcmp(op->name, "attention.decode") && dot && !strcmp(dot, ".train"))
                strcpy(dot, ".decode");
            def_preset = fallback;
        }
        ft_cli_problem pp = a->prob;
        pp.preset = def_preset;
        ft_call tmp;
        if ((code = tune_op_attrs(a, &pp, op, &tmp))) return code;
        if (ft_backend_check_attrs(be, &tmp.attrs, &err)) return ft_cli_fail_err(&err);
        const char *predict;
        if ((code = tune_predict_of(a, be, &predict))) return code;
        int first = T->njobs;
        if ((code = tune_plan_sweep(a, &pp, op, be, &tmp.attrs, T))) return code;
        for (int j = first; j < T->njobs; j++)
            T->jobs[j].predict = predict;
    }
    return FT_EXIT_OK;
}

/* Every log of the run is ours before the first job starts: a second tuner on one of them
 * fails now with one line, and never measures what this one does. */
static int tune_lock_logs(const tuning *T, int *locks, int *nlocks) {
    ft_err err = {0};
    *nlocks = 0;
    for (int j = 0; j < T->njobs; j++) {
        if (!T->jobs[j].log[0]) continue;
        if ((locks[*nlocks] = ft_file_trylock(T->jobs[j].log, &err)) < 0) {
            while (*nlocks > 0)
                ft_file_unlock(locks[--*nlocks]);
            return ft_cli_fail_err(&err);
        }
        (*nlocks)++;
    }
    return FT_EXIT_OK;
}

/* What the summary's rows add up to, for the warnings after the table. */
typedef struct {
    int saved, busy, unstable, suspect;
    int unclean, stopped;   /* candidates not measured cleanly, stopped by the watchdog */
    long discarded, taken;  /* samples the scheduler spoiled, of all timed */
} tally;

static tally tune_print_table(const row *rows, int nrows) {
    tally t = {0};
    printf("%-17s %-34s %10s %10s %8s %13s %6s %s\n", "op", "shape", "default", "best", "speedup",
           "roofline", "tie", "verified (max rel err)");
    for (int i = 0; i < nrows; i++) {
        const row *rw = &rows[i];
        char a[32], b[32];
        const char *shape = rw->r.dims;
        t.busy += rw->r.busy;
        if (!rw->ok) {
            printf("%-17s %-34.34s %10s %10s %8s %13s %6s %s\n", rw->op, shape, "-", "-", "-", "-",
                   "-", busy_only(rw) ? "none measured cleanly (busy machine)" : "no candidate verified");
            t.unclean += rw->r.unclean;
            t.discarded += rw->r.samples_discarded;
            t.taken += rw->r.samples_taken;
            t.stopped += rw->r.stopped;
            continue;
        }
        t.saved += rw->r.saved;
        t.unstable += rw->r.nunstable > 0;
        t.suspect += rw->r.roofline_suspect;
        /* The default configuration may be invalid at this shape: then there is no baseline. */
        int has_def = rw->r.default_stats.samples > 0;
        char sp[16] = "-", roof[32];
        if (has_def) snprintf(sp, sizeof sp, "%.2fx%s", rw->r.speedup, rw->r.nunstable ? "?" : "");
        else if (rw->r.speedup_withheld[0]) snprintf(sp, sizeof sp, "withheld");
        t.unclean += rw->r.unclean;
        t.discarded += rw->r.samples_discarded;
        t.taken += rw->r.samples_taken;
        t.stopped += rw->r.stopped;
        snprintf(roof, sizeof roof, "%.0f%% %s%s", 100 * rw->r.roofline_frac, rw->r.roofline_level,
                 rw->r.roofline_suspect ? "!" : "");
        printf("%-17s %-34.34s %10s %10s %8s %13s %6s yes (%.1e)%s%s\n", rw->op, shape,
               has_def ? ft_fmt_time(rw->r.default_stats.median, 1, a, sizeof a) : "-",
               ft_fmt_time(rw->r.winner_stats.median, 1, b, sizeof b), sp, roof,
               rw->r.ntie ? "tie" : "-", rw->r.verify_err,
               rw->r.interrupted ? "  (interrupted)" : "", rw->r.busy ? "  (busy machine)" : "");
    }
    return t;
}

/* A line per run with a prediction: the device, how many were predicted and pruned, and the
 * rank correlation of predicted and measured times. */
static void tune_print_predictions(const row *rows, int nrows, double prune) {
    for (int i = 0; i < nrows; i++) {
        const ft_tune_result *r = &rows[i].r;
        if (!r->predicted) continue;
        printf("predicted %s on %s: %d of %d candidates", rows[i].op, r->predict_device,
               r->predicted, r->valid);
        if (prune > 0) printf(", %d pruned (predicted slower than %gx the best)", r->pruned, prune);
        if (r->rank_n >= 3 && isnan(r->rank_corr))
            printf("; the %d measured have one prediction (no rank correlation)\n", r->rank_n);
        else if (r->rank_n >= 3)
            printf("; rank correlation with the measurements %.2f over %d\n", r->rank_corr,
                   r->rank_n);
        else
            printf("; %d measured with a prediction (a rank correlation needs 3)\n", r->rank_n);
    }
}

static void tune_print_warnings(const row *rows, int nrows, const tally *t) {
    if (t->busy) {
        char lm[160];
        int first = 0;
        while (first < nrows - 1 && !rows[first].r.busy)
            first++;
        fprintf(stderr,
                "flaretune: warning: the machine was busy during %d of %d runs (%s: %s); "
                "multi-threaded timings and speedups are not what a quiet machine gives: run "
                "again quiet (docs/measurement.md)\n",
                t->busy, nrows, rows[first].op,
                ft_load_describe(&rows[first].r.load, lm, sizeof lm));
    }
    if (t->discarded || t->unclean || t->stopped) {
        fprintf(stderr,
                "flaretune: the scheduler took %ld of %ld timed samples from their calls (%.0f%%): "
                "they were thrown away",
                t->discarded, t->taken, t->taken ? 100.0 * (double)t->discarded / (double)t->taken : 0.0);
        if (t->unclean)
            fprintf(stderr, "; %d candidate%s could not be measured cleanly and %s not ranked",
                    t->unclean, t->unclean > 1 ? "s" : "", t->unclean > 1 ? "are" : "is");
        if (t->stopped)
            fprintf(stderr, "; the watchdog stopped %d candidate%s far slower than the best",
                    t->stopped, t->stopped > 1 ? "s" : "");
        fprintf(stderr, " (docs/measurement.md)\n");
        for (int i = 0; i < nrows; i++)
            if (rows[i].ok && rows[i].r.speedup_withheld[0])
                fprintf(stderr, "flaretune: %s: speedup withheld: %s\n", rows[i].op,
                        rows[i].r.speedup_withheld);
    }
    if (t->unstable)
        fprintf(stderr,
                "flaretune: warning: in %d run%s a config's confirmation disagreed with its "
                "search measurement beyond the noise (marked ?): the machine changed "
                "during the run\n",
                t->unstable, t->unstable > 1 ? "s" : "");
    if (t->suspect)
        fprintf(stderr,
                "flaretune: warning: %d winner%s above the roofline after measuring the "
                "ceilings again (marked !): a measurement error, see the log\n",
                t->suspect, t->suspect > 1 ? "s" : "");
}

/* The summary on stdout, its warnings on stderr, and the exit code: 130 when interrupted. */
static int tune_report(const tune_args *a, const tuning *T) {
    const row *rows = T->rows;
    int nrows = T->nrows;
    tally t = tune_print_table(rows, nrows);
    if (a->to.profile_path && t.saved) printf("profile: %s\n", a->to.profile_path);
    for (int i = 0; i < nrows; i++)
        if (rows[i].ok && rows[i].unsaved[0])
            printf("not saved: the winner of %s at %s: %s\n", rows[i].op, rows[i].r.dims,
                   rows[i].unsaved);
    tune_print_predictions(rows, nrows, a->to.prune_predicted);
    tune_print_warnings(rows, nrows, &t);
    if (stop_flag) {
        if (t.saved || (!a->to.profile_path && nrows && rows[0].ok))
            fprintf(stderr, "flaretune: interrupted; the best configurations so far are %s%s\n",
                    a->to.profile_path ? "saved" : "shown above",
                    a->log ? " and the log resumes where this run stopped" : "");
        else
            fprintf(stderr,
                    "flaretune: interrupted before a candidate was measured; nothing was "
                    "saved%s\n",
                    a->log ? " (the log resumes where this run stopped)" : "");
        return 130;
    }
    return T->code;
}

/* A run failed (T->status): the summary of the results there are first, those of the runs
 * before it and that of a run whose profile could not be written, so that an error at the end
 * loses no winner; then the error line. Returns the exit code. */
static int tune_fail(const tune_args *a, const tuning *T) {
    if (T->nrows > 0) {
        tune_report(a, T);
        fflush(stdout);
    }
    int saving = 0; /* the error is the profile's: exit as for any unusable profile */
    for (int i = 0; i < T->nrows; i++)
        saving |= T->rows[i].unsaved[0] != '\0';
    return saving ? ft_cli_fail_profile(&T->err) : ft_cli_fail_err(&T->err);
}

/* Plan, lock the logs, and run the jobs (under the dashboard with --tui). Returns an exit code;
 * T->status says whether a run failed. */
static int tune_run(tune_args *a, progress *pg, tuning *T, int planned) {
    static int locks[16 * 32];
    int nlocks = 0, code;
    ft_cli_catch_stop(on_signal, 0); /* a second Ctrl-C ends the process at once */

    memset(pg, 0, sizeof *pg);
    pg->tty = isatty(STDERR_FILENO);
    pg->quiet = a->quiet;
    a->to.listener = progress_event;
    a->to.listener_ctx = pg;

    if ((!planned && (code = tune_plan(a, T))) || (code = tune_lock_logs(T, locks, &nlocks)))
        return code;
    a->to.log_locked = 1;
    T->to = a->to;
    if (a->tui) {
        if ((code = run_dashboard(T, a->target))) return code;
    } else {
        run_jobs(T);
    }
    while (nlocks > 0)
        ft_file_unlock(locks[--nlocks]);
    return FT_EXIT_OK;
}

/* A worker rank of a distributed run: the same jobs as rank 0, each served until rank 0 ends
 * it; nothing written, nothing printed but an error. */
static int tune_serve_jobs(tune_args *a, tuning *T) {
    ft_tune_opts to = a->to;
    to.profile_path = NULL;
    to.log_path = NULL;
    to.listener = NULL;
    to.warm = 0;
    to.rank = ft_cli_mpi_world_rank();
    for (int j; (j = ft_cli_mpi_next_job()) >= 0;) {
        if (j >= T->njobs) {
            ft_cli_fail(FT_EXIT_FAIL, "rank %d: rank 0 asked for job %d of %d", to.rank, j,
                        T->njobs);
            return FT_EXIT_FAIL;
        }
        to.op = T->jobs[j].op;
        to.be = T->jobs[j].be;
        to.attrs = T->jobs[j].attrs;
        to.preset = T->jobs[j].preset;
        int served = 0;
        ft_err err = {0};
        if (ft_tune_serve(&to, ft_cli_mpi_server(), &served, &err)) {
            ft_cli_fail(ft_cli_exit_code(err.status), "rank %d: %s", to.rank, err.msg);
            return FT_EXIT_FAIL;
        }
    }
    return FT_EXIT_OK;
}

/* Ranks on several kinds of device: one run per kind (cli_mpi.c), each with its own logs (the
 * log name gets the kind's short hash, stable across reruns so each resumes) and the shared
 * profile, which keeps one entry per device. */
static int device_kinds = 1;
static int tune_split_devices(tuning *T) {
    if (!T->njobs) return FT_EXIT_OK;
    ft_env env;
    ft_env_probe(&env);
    char dev[256];
    ft_backend_device(T->jobs[0].be, &env, dev, sizeof dev);
    int kind;
    device_kinds = ft_cli_mpi_split_by_device(dev, &kind);
    if (device_kinds < 2) return FT_EXIT_OK;
    uint32_t h = ft_eventlog_device_tag(dev);
    for (int j = 0; j < T->njobs; j++) {
        size_t n = strlen(T->jobs[j].log);
        if (n && n + 10 < sizeof T->jobs[j].log)
            snprintf(T->jobs[j].log + n, sizeof T->jobs[j].log - n, ".%08x", h);
    }
    if (!ft_cli_mpi_rank()) printf("device kind %d of %d: %s\n", kind + 1, device_kinds, dev);
    return FT_EXIT_OK;
}

/* What every rank of a run must share, one "what: value" line each: the jobs, and for each its
 * op, backend, sizes and attributes; the kernel sources; what a measurement is (the options and,
 * with a host clock, FLARETUNE_MAX_LOST, which a host's environment may set). A worker started
 * with another command line (--set N=4800, another op, --noise) would measure something else
 * under rank 0's key. */
static void run_key(const tuning *T, const ft_tune_opts *to, char *buf, size_t n) {
    size_t k = 0;
    ft_env env;
    ft_env_probe(&env);
    k += (size_t)snprintf(buf + k, n - k, "jobs: %d\n", T->njobs);
    for (int j = 0; j < T->njobs && k < n; j++) {
        const job *jb = &T->jobs[j];
        ft_call c;
        ft_err err = {0};
        ft_call_init(&c, jb->op);
        c.attrs = jb->attrs;
        char dims[256] = "?", attrs[768];
        if (jb->op->from_preset(&c, &jb->preset, &err) == FT_OK)
            ft_call_dims_str(&c, dims, sizeof dims);
        ft_attrs_format_all(&c.attrs, jb->op, attrs, sizeof attrs);
        if (k < n)
            k += (size_t)snprintf(buf + k, n - k,
                                  "job %d op: %s\njob %d backend: %s\njob %d (%s) sizes: %s\n"
                                  "job %d (%s) attributes: %s\n",
                                  j, jb->op->name, j, jb->be->name, j, jb->op->name, dims, j,
                                  jb->op->name, attrs);
    }
    if (k < n) k += (size_t)snprintf(buf + k, n - k, "kernel sources: %s\n", env.source_hash);
    /* FLARETUNE_MAX_LOST judges samples timed by the host's clock only (a GPU's events are
     * not stretched by the scheduler): with no such job it is no part of the run. */
    int host = 0;
    for (int j = 0; j < T->njobs; j++)
        host |= !strcmp(ft_backend_clock(T->jobs[j].be), "host");
    char m[512];
    ft_measure_opts_format(&to->measure, host, m, sizeof m);
    if (k < n)
        snprintf(buf + k, n - k,
                 "measurement: %s\nscreening: %s, factor %.9g\nwatchdog: %.9g x the best, "
                 "%.9g s at least\nconfirmation: the best %d\n",
                 m, to->screen ? "on" : "off", to->screen_factor, to->stop_factor, to->stop_floor_s,
                 to->confirm_top);
}

/* Every rank's run key against rank 0's before any work: a difference ends the job on every
 * rank with rank 0's one line. */
static int tune_same_run(const tune_args *a, const tuning *T) {
    size_t n = 1024 + (size_t)T->njobs * 1536;
    char *key = malloc(n), why[1024];
    if (!key) return ft_cli_fail(FT_EXIT_FAIL, "tune: out of memory");
    run_key(T, &a->to, key, n);
    int same = ft_cli_mpi_same_run(key, why, sizeof why);
    free(key);
    if (same) return FT_EXIT_OK;
    if (!ft_cli_mpi_rank()) ft_cli_fail(FT_EXIT_USAGE, "tune: %s", why);
    return FT_EXIT_USAGE;
}

/* Under mpirun: rank 0 tunes with the others as its workers. Returns an exit code, or -1 when
 * this process is not distributed. Any rank that fails before the jobs are done ends the job
 * (MPI_Abort), so no rank is left waiting for it. */
static int run_distributed(tune_args *a, tuning *T, progress *pg) {
    if (!ft_cli_mpi_start(NULL, NULL)) return -1;
    if (ft_cli_mpi_size() > 1) a->to.rank = ft_cli_mpi_world_rank();
    /* Every rank plans the same jobs, then the ranks split by device: the roles come after. */
    int code = tune_plan(a, T), incomplete;
    if (!code) code = tune_split_devices(T);
    if (!code && (code = tune_same_run(a, T))) {
        ft_cli_mpi_end(0); /* every rank knows: they end together, rank 0 said why */
        return code;
    }
    if (ft_cli_mpi_rank()) {
        a->quiet = 1;
        a->to.profile_path = NULL;
        if (!code) code = tune_serve_jobs(a, T);
        incomplete = code != FT_EXIT_OK;
    } else {
        ft_cli_mpi_result_timeout(a->to.candidate_timeout_s);
        if (!code) code = tune_run(a, pg, T, 1);
        /* Ctrl-C is no failure: the session collected the batch in flight and run_jobs told
         * every worker the run is over, so the ranks end together (MPI_Finalize) and the job
         * exits 130, as one process does. */
        incomplete = code != FT_EXIT_OK || T->status;
        if (!code && T->status) {
            code = tune_fail(a, T);
        } else if (!code) {
            code = tune_report(a, T);
        }
    }
    ft_cli_mpi_end(incomplete && ft_cli_mpi_size() > 1);
    return code;
}

static int run(int argc, char **argv) {
    if (ft_cli_names_t1(argc, argv)) return ft_cli_tune_t1(argc, argv);
    tune_args a;
    static row rows[16 * 32];
    int code = tune_parse(argc, argv, &a);
    if (code || (code = tune_check(&a))) return code;
    if (a.to.candidate_timeout_s > 0) ft_cli_catch_candidate_timeout();
    /* One id for the runs of this command (run_start's "runs"), so `top` on their logs counts
     * them apart from older runs in the same files. */
    static char command_id[48];
    snprintf(command_id, sizeof command_id, "%ld-%.6f", (long)getpid(), ft_wall_time());
    a.to.runs_command = command_id;
    progress pg;
    tuning T;
    memset(&T, 0, sizeof T);
    T.jobs = calloc(16 * 32, sizeof *T.jobs);
    if (!T.jobs) return ft_cli_fail(FT_EXIT_FAIL, "tune: out of memory");
    T.rows = rows;
    int dcode = run_distributed(&a, &T, &pg);
    if (dcode >= 0) {
        free(T.jobs);
        return dcode;
    }
    code = tune_run(&a, &pg, &T, 0);
    free(T.jobs);
    if (code) return code;
    if (T.status) return tune_fail(&a, &T);
    return tune_report(&a, &T);
}
const ft_cmd ft_cmd_tune = {"tune", "search for the fastest verified configuration of an op", run,
                            usage};
