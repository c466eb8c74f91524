/* tune.h: a tuning session: search an op's space on a backend for the fastest configuration
 * that matches the reference, with honest measurement, an event log, resume and a profile.
 *
 *   plan     the candidates are the valid configurations of the backend's space at the
 *            problem's sizes; the default configuration is measured first, as the baseline;
 *            a backend that compiles kernels starts compiling theirs on background threads
 *            (jobs below)
 *   verify   every candidate runs once on fresh random inputs and is compared with the float64
 *            reference (at a reduced shape of the same family when the reference would take too
 *            long at the tuning shape); a mismatch is recorded and never selected
 *   measure  warm-up, samples until the median is known to the noise target (measure.h), with
 *            optional early-abort screening against the best so far
 *   search   a strategy (strategy.h) proposes candidates until the space, the evaluation budget
 *            or the time budget is exhausted, or Ctrl-C
 *   confirm  the best few and the default are measured again interleaved (A B C A B C ...); the
 *            winner is decided side by side and ties within the noise are reported
 *   record   every step is an event (eventlog.h, docs/events.md); the winner becomes a profile
 *            entry (docs/profiles.md)
 *
 * Resume: with a log, candidates already measured or rejected by a run with the same key (op,
 * backend, sizes, attributes, device, kernel sources) are not run again (a measured event without
 * a positive median is not trusted: that candidate runs again); a log whose last run has another
 * key is refused. One run writes a log at a time: it holds the log's lock (LOG.lock) and a second
 * run on the same log fails at once with FT_EBUSY.
 *
 * Validity is judged at the timing shape; a candidate that is a duplicate only at the smaller
 * verification shape is still verified there. The ceilings bound the largest thread count of
 * the space, are measured again every ceilings_every_s, and once more when the winner's
 * fraction comes out above 1 (then reported as suspect if it holds). The load the rest of the
 * machine put on it is measured around the ceilings, each candidate and the confirmation.
 */
#ifndef FLARETUNE_TUNE_H
#define FLARETUNE_TUNE_H

#include <pthread.h>

#include "op/backend.h"
#include "traces/eventlog.h"
#include "core/load.h"
#include "tuner/measure.h"
#include "op/op.h"
#include "tuner/strategies/strategy.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Other processes that evaluate candidates for this run (distributed tuning: the command line
 * connects them over MPI, docs/distributed.md). Worker w is handed candidates one at a time
 * with `send` (and the best median known, for screening) and answers each, in order, with
 * `recv`: the events its evaluation wrote (verified,
 * measured or rejected; a JSON array the caller then owns), each carrying its rank, host and
 * device. */
typedef struct ft_tune_workers {
    int n;
    int self; /* this process evaluates its share of each batch too */
    void *ctx;
    ft_status (*send)(void *ctx, int w, const json_t *config, double best, ft_err *err);
    ft_status (*recv)(void *ctx, int w, json_t **events, ft_err *err);
} ft_tune_workers;

/* Who evaluates the j-th candidate of a batch: -1 this process, else that worker (round robin
 * over this process, when it takes part, then the workers). */
int ft_tune_batch_owner(const ft_tune_workers *w, int j);

/* A worker's side of that (ft_tune_serve): `next` gives the next config to evaluate and the
 * best median known when it was handed out (returns 0 when the run is over, 1 with one, or -1
 * with err set); `reply` sends the events of its evaluation back. */
typedef struct ft_tune_server {
    void *ctx;
    int (*next)(void *ctx, json_t **config, double *best, ft_err *err);
    ft_status (*reply)(void *ctx, json_t *events, ft_err *err);
} ft_tune_server;

typedef struct ft_tune_opts {
    const ft_op *op;
    const ft_backend *be;
    ft_preset preset;
    ft_attrs attrs;
    ft_strategy_kind strategy;
    uint64_t seed;
    int budget;           /* candidates to measure at most (0: no limit)                    */
    double time_budget_s; /* wall-time budget of the search (0: no limit)                   */
    int screen;           /* early-abort screening on                                       */
    double screen_factor; /* drop a candidate whose first samples exceed factor x best; 1.5 */
    /* The watchdog: a call of a candidate that runs past stop_factor x the best call so far
     * (and past stop_floor_s) is stopped and the candidate recorded `stopped`; 20 and 0.05 s
     * (0: no watchdog). */
    double stop_factor;
    double stop_floor_s;
    int confirm_top;      /* re-measure this many of the best, interleaved, and every near-tie
                             beyond them (intervals reaching the best's), 8 in all; default 3 */
    /* Each candidate's measurement; the defaults are FT_MEASURE_TUNE's (measure.h). */
    ft_measure_opts measure;
    double verify_flops_max;    /* largest reference run (FLOPs) before reducing the shape; 1e9 */
    double ceilings_every_s;    /* measure the ceilings again after this long; 120 (0: never) */
    const char *log_path;       /* event log to append to (NULL: none)                       */
    int log_locked;             /* the caller holds the log's lock (ft_file_trylock): a run
                                   takes it itself otherwise, and a held one is FT_EBUSY      */
    const char *profile_path;   /* profile to update with the winner (NULL: none)             */
    volatile int *stop;         /* raised by Ctrl-C: finish the event in flight and stop      */
    volatile int *pause;        /* while raised, wait between candidates (the dashboard's p)  */
    ft_event_listener listener; /* every event, as written (progress, the dashboard)        */
    void *listener_ctx;
    /* Threads compiling the candidates' kernels ahead of the search (backend.h, prefetch), 1
     * to FT_TUNE_MAX_JOBS. 0 (the default): every core on a backend whose validity check
     * compiles every candidate anyway (the GPU), no compiling ahead on the others. */
    int jobs;
    /* Predicted time (backend.h, predict): each candidate's on the GPU named here ("h200"; ""
     * the one the backend runs on; NULL: no prediction). The exhaustive strategy then measures
     * them fastest predicted first (the others keep their own order), and every candidate's
     * events carry its prediction. A candidate the backend cannot predict has none. */
    const char *predict;
    /* With a prediction: candidates predicted slower than this many times the best prediction
     * (> 1) are never measured (0: none pruned). The default configuration is kept: it is the
     * baseline. */
    double prune_predicted;
    /* Stop the search once it has converged (ft_strategy_converged: the best has stood for
     * `patience` evaluations and as many as it took to find it, and the strategy's model
     * expects no other candidate to beat it by more than `converge`); 0: search until the
     * space, the budget or the time runs out. Only a strategy with a model (bayes) converges.
     * Defaults 0.005 and 20. */
    double converge;
    int patience;
    /* Warm start: measure first the winners the profile (profile_path) already holds for this
     * op and backend: at the nearest shape on this device, then on each other device; and,
     * when warm_log names another run's event log of the same op and backend (another shape,
     * another machine), take its measured times as the strategy's prior. Default on (1); 0:
     * cold. */
    int warm;
    const char *warm_log;
    /* Candidates proposed together (ft_strategy_next_batch) and evaluated before the strategy
     * hears any of them, each screened against the best known when the batch began; 0 or 1:
     * one at a time. With workers a batch is shared out over this process (workers->self)
     * and them (0: one candidate each). The same seed and batch give the same search, however many processes
     * evaluate it. */
    int batch;
    const ft_tune_workers *workers;
    /* This process's place in a distributed run (-1: not distributed): every candidate event
     * then says rank, host and device. */
    int rank;
    /* Seconds one candidate may take before the process gives up on it (0: no limit): the
     * process then ends (SIGALRM), which ends a distributed job; the log keeps what was
     * measured before. */
    double candidate_timeout_s;
    /* Held while this process measures (a candidate, the confirmation), when several sessions
     * run side by side in one process (rank 0 with groups of ranks): their measurements then
     * never overlap on its device. NULL: none. */
    pthread_mutex_t *measure_lock;
    /* This run's place among the runs of one command (`tune all`, --sweep): an id of the
     * command, the run's 1-based index and how many it runs, written in run_start ("runs") so a
     * dashboard following the logs knows more are to come. run_count 0 or 1: a single run. */
    const char *runs_command;
    int run_index, run_count;
} ft_tune_opts;

#define FT_TUNE_MAX_JOBS 64

typedef struct ft_tune_result {
    int found; /* a verified, measured winner exists */
    ft_config winner, def;
    ft_stats winner_stats, default_stats;
    double speedup;         /* default median / winner median; NaN when either is missing */
    double roofline_frac;   /* the winner's fraction of this machine's roofline     */
    int roofline_suspect;   /* above 1 after measuring the ceilings again: an error */
    char roofline_level[8]; /* the level whose bandwidth bounds it               */
    double verify_err;      /* the winner's worst relative error vs the reference   */
    int ntie;               /* configurations tied with the winner                 */
    int nunstable;          /* confirmed configs whose search median disagreed      */
    int busy;               /* other processes (or the host) took CPU during the run */
    int busy_candidates;    /* candidates measured while the machine was busy       */
    ft_load load;           /* the rest of the machine during the measurements      */
    /* The scheduler in the samples (docs/measurement.md): candidates that could not be
     * measured cleanly, samples thrown away as contaminated out of all those timed, and
     * candidates whose call the watchdog stopped. */
    int unclean, stopped;
    long samples_discarded, samples_taken;
    /* Why speedup is NaN though a winner was found ("" when it is known). */
    char speedup_withheld[96];
    int saved;              /* the winner went into the profile                     */
    /* The profile could not be written: ft_tune_run fails with why, and the rest of the
     * result (the winner, its timing) is filled in all the same, for the caller to show. */
    int save_failed;
    int valid, evaluations, rejected, resumed, screened;
    int interrupted;
    char dims[256];
    /* With a prediction: the device, how many candidates have one and how many were pruned,
     * and Spearman's rank correlation between predicted and measured medians over the rank_n
     * measured candidates that have one (NaN below 3). */
    char predict_device[32];
    int predicted, pruned, rank_n;
    double rank_corr;
    /* Why the search ended: "exhausted" (nothing left to propose), "converged", "budget",
     * "time" or "interrupted"; and how many warm-start candidates it was given. */
    char search_end[16];
    int warmed;
} ft_tune_result;

/* Progress, one rule for every front end: candidates measured (screened ones count, rejected
 * ones do not) out of what the run will measure: every valid configuration not rejected, or,
 * with a budget, the budget (those an earlier run of the key measured, and this one resumed,
 * count in it), or what was resumed where that is more (a log of a larger budget). Rejected
 * candidates are counted apart. */
int ft_tune_progress_target(int valid, int budget, int resumed_measured, int rejected);
/* Why a `measured` event is not ranked, for a progress line: "" for a clean measurement, else
 * " (...)": not measured cleanly (the samples discarded of those taken; or, when none was
 * taken, why: the watchdog stopped it, its threads having lost over half of it to other work),
 * or stopped past its limit. */
void ft_tune_unranked_text(const json_t *ev, char *buf, size_t n);

void ft_tune_defaults(ft_tune_opts *o);
ft_status ft_tune_run(const ft_tune_opts *o, ft_tune_result *r, ft_err *err);
/* A worker of a distributed run: plan the same candidates as the run's first process (the same
 * op, preset, attributes, backend and seed in o; no log, no profile), measure this device's
 * ceilings, then evaluate every config the server hands out until it says the run is over.
 * *served: how many. */
ft_status ft_tune_serve(const ft_tune_opts *o, const ft_tune_server *srv, int *served,
                        ft_err *err);

/* The shape candidates are verified at: the preset itself when the reference costs at most
 * `flops_max` there, else a reduced preset of the same family (sizes halved in a fixed order,
 * kept odd so tiles leave remainders). Returns 1 when reduced. */
int ft_tune_verify_preset(const ft_op *op, const ft_attrs *attrs, const ft_preset *p,
                          double flops_max, ft_preset *out);

#ifdef __cplusplus
}
#endif
#endif
