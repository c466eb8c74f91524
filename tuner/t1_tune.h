/* t1_tune.h: tuning a kernel a T1 file describes, on a GPU or on the emulator (tuner/t1_tune.c).
 *
 * The tuner's strategies over the configurations the file allows; each candidate compiled as
 * written, run, checked against the reference (default) configuration's outputs, and timed; the
 * results written in the community's formats (FAIR T4, a Kernel Tuner cache) for `replay` and
 * Kernel Tuner's tools. */
#ifndef FLARETUNE_T1_TUNE_H
#define FLARETUNE_T1_TUNE_H

#include "core/stats.h"
#include "tuner/replay.h"
#include "tuner/t1.h"
#include "tuner/t1_run.h"
#include "tuner/tune.h"

typedef struct ft_t1_tune_result {
    int n;             /* candidates (the configurations the conditions allow), space order */
    ft_config *cfgs;
    double *secs;      /* median time of each evaluated one; NaN: not evaluated or failed   */
    double *cost;      /* seconds evaluating it took (compile, check, timing)               */
    double *when;      /* epoch seconds it was done                                         */
    char **error;      /* why it failed (NULL: it did not)                                  */
    int *order;        /* the evaluated candidates in the order the search took them       */
    int nevals, failed;
    int resumed;       /* of nevals, taken from the Kernel Tuner cache of an earlier run      */
    int interrupted;   /* *stop ended the search before its budget or the space did         */
    int resumed_unused; /* entries of that cache that are no candidate here (kept, not used) */
    int reference;     /* the default configuration: the reference, evaluated first         */
    int best;          /* fastest evaluated (-1: none)                                      */
    /* The statistics of the reference and of best where this run measured them (a resumed
     * one has its median only: ref_stats / best_stats .samples == 0). */
    ft_stats ref_stats, best_stats;
    char clock[64];    /* what timed it                                                      */
    char device[128];  /* the device's name when known                                      */
    char note[320];    /* something worth saying ("" when nothing)                          */
} ft_t1_tune_result;

typedef struct ft_t1_tune_opts {
    int emulate;      /* 1: the emulator (cuda-emu); 0: the GPU (cuda)                     */
    int strategy;     /* ft_strategy_kind                                                   */
    int budget;       /* evaluations at most, the reference included (0: every candidate)   */
    unsigned long long seed;
    int blocks;       /* the emulator's sample of the grid (2..64)                          */
    int reps;         /* timed launches (the emulator: at most 5)                           */
    /* A Kernel Tuner cache written as the run goes (NULL: none): each evaluation is appended
     * and flushed to the disk when it is done, so a run killed at any point keeps all it
     * measured; where the file exists, its entries for this problem are taken as measured
     * (resumed: not run again) and kept. A cache of another problem (kernel, device, problem
     * size, parameters or their values) is refused before anything runs. */
    const char *kt_cache;
    const char *backend; /* the cache's device_name: "cuda" or "cuda-emu" */
    /* Expected outputs, "NAME=FILE.npy" each (nrefs of them): output NAME of every candidate,
     * the default configuration's included, is checked against the file's array (its dtype the
     * argument's type, its size the argument's) instead of against the default configuration's
     * run. Each is read and checked before anything runs. */
    const char *refs[FT_T1_MAX_ARGS];
    int nrefs;
    /* An event log (docs/events.md) the run appends to (NULL: none): run_start, a measured or
     * rejected event per evaluation, run_end, as an op's tuning writes them, with the op
     * "t1:KERNEL", so `flaretune top LOG` follows a T1 run as it follows any other. The log's
     * lock (LOG.lock) is held for the run: a second writer fails at once. */
    const char *log;
    /* Every event also goes to listener (in-process: the dashboard), with or without a log. */
    void (*listener)(void *ctx, const json_t *ev);
    void *listener_ctx;
    /* --candidate-timeout: seconds one evaluation may take (0: no limit), the reference's and
     * a worker's included. Past it SIGALRM ends the process, for a launch cannot be stopped part
     * way; the caller's handler (the command line's) first writes what core/epitaph.h holds:
     * the configuration in flight as failed in the Kernel Tuner cache and rejected in the log,
     * so that the same run resumed goes on past it. */
    double candidate_timeout_s;
    /* Raised (SIGINT, the dashboard's q): the search stops after the candidate in flight, and
     * what was measured is kept (interrupted set). pause: while raised, no new candidate. */
    volatile int *stop, *pause;
    /* Other processes that evaluate candidates too (a distributed run: docs/distributed.md;
     * NULL or none: this process alone): the strategy proposes one candidate per process at a
     * time, shared out as an op's tuning shares them, and every outcome is recorded here. */
    const ft_tune_workers *workers;
    int rank; /* this process's rank in a distributed run (-1: not distributed): each event says
               * where its candidate was evaluated (rank, host, device) */
    /* Called after each evaluation (i: the candidate; why: its failure or NULL). */
    void (*progress)(void *ctx, const ft_t1_tune_result *r, int i, const char *why);
    void *progress_ctx;
} ft_t1_tune_opts;

void ft_t1_tune_opts_default(ft_t1_tune_opts *o);
/* Tune; r holds what was measured even when it fails part way (free it with
 * ft_t1_tune_result_free). The budget counts every evaluation, resumed ones included. */
ft_status ft_t1_tune(ft_t1 *t, const ft_t1_tune_opts *o, ft_t1_tune_result *r, ft_err *err);
void ft_t1_tune_result_free(ft_t1_tune_result *r);
/* One configuration timed and checked as tune --t1 evaluates it (bench --t1). */
typedef struct ft_t1_measure_result {
    ft_stats stats;     /* cfg's; of the reference's run when cfg is the default          */
    ft_stats ref_stats; /* the reference (default) configuration's                        */
    char why[512];      /* why cfg is rejected ("" when it passed its check)              */
    int disagreed;      /* it ran, and its outputs disagreed (else it did not compile/run) */
    char ref_why[512];  /* why the reference disagrees with the --reference files ("")    */
    char clock[64];     /* what timed it                                                  */
    char note[320];     /* something worth saying ("" when nothing)                       */
} ft_t1_measure_result;

/* Run the reference (default) configuration, then cfg (where it is another), each compiled,
 * run and timed as tune --t1 does; cfg's outputs checked against the reference's, or against
 * o's reference files. A cfg that fails to compile, run or agree is r->why, not an error. */
ft_status ft_t1_measure(ft_t1 *t, const ft_t1_tune_opts *o, const ft_config *cfg,
                        ft_t1_measure_result *r, ft_err *err);
/* A worker of a distributed run: open the device and the same inputs (o->seed), run the
 * reference configuration, then evaluate each configuration srv hands out, each against the
 * reference, and answer with its events ([{"event": "measured", "stats", "cost_s"}] or
 * [{"event": "rejected", "message", "cost_s"}]), until srv says the run is over. *served: how
 * many it evaluated. */
ft_status ft_t1_tune_serve(ft_t1 *t, const ft_t1_tune_opts *o, const ft_tune_server *srv,
                           int *served, ft_err *err);
/* The device fingerprint of o's backend, as profiles and event logs key results by
 * (docs/profiles.md); the backend's name where this build cannot tell. */
void ft_t1_device(const ft_t1_tune_opts *o, char *buf, size_t n);
/* The profile entry of a run that found a best configuration (docs/profiles.md, "Kernels"), for
 * ft_profile_update; NULL when it found none or out of memory. */
json_t *ft_t1_tune_profile_entry(const ft_t1 *t, const ft_t1_tune_opts *o,
                                 const ft_t1_tune_result *r);
/* The evaluated candidates as a T4 results file or a Kernel Tuner cache, written atomically. */
ft_status ft_t1_tune_export(const ft_t1 *t, const ft_t1_tune_result *r, const char *backend,
                            ft_export_format f, const char *path, ft_err *err);
/* The measurements of a T1 kernel's event log (tune --t1 --log; name for messages) in format f
 * to path: its T1 file, named in the log, read again for the space. Every run of the log for the
 * same problem counts, each candidate its latest event. */
ft_status ft_t1_log_export(const json_t *events, const char *name, ft_export_format f,
                           const char *path, ft_err *err);
/* Whether the last run of a log's events tuned a T1 kernel (tune --t1 --log): its export needs
 * ft_t1_log_export, which reads the T1 file for the space. */
int ft_t1_log_of(const json_t *events);

#endif
