/* tune.h: a tuning session: search an op's space on a backend for the fastest configuration
 * that matches the reference, with honest measurement, an event log, resume and a profile.
 *
 *   plan     the candidates are the valid configurations of the backend's space at the
 *            problem's sizes; the default configuration is measured first, as the baseline
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
 * backend, sizes, attributes, device, kernel sources) are not run again; a log whose last run has
 * another key is refused.
 */
#ifndef FLARETUNE_TUNE_H
#define FLARETUNE_TUNE_H

#include "flaretune/backend.h"
#include "flaretune/eventlog.h"
#include "flaretune/measure.h"
#include "flaretune/op.h"
#include "flaretune/strategy.h"

#ifdef __cplusplus
extern "C" {
#endif

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
    int confirm_top;      /* re-measure this many of the best, interleaved; default 3       */
    ft_measure_opts measure;
    double verify_flops_max;    /* largest reference run (FLOPs) before reducing the shape; 1e9 */
    const char *log_path;       /* event log to append to (NULL: none)                       */
    const char *profile_path;   /* profile to update with the winner (NULL: none)             */
    volatile int *stop;         /* raised by Ctrl-C: finish the event in flight and stop      */
    volatile int *pause;        /* while raised, wait between candidates (the dashboard's p)  */
    ft_event_listener listener; /* every event, as written (progress, the dashboard)        */
    void *listener_ctx;
} ft_tune_opts;

typedef struct ft_tune_result {
    int found; /* a verified, measured winner exists */
    ft_config winner, def;
    ft_stats winner_stats, default_stats;
    double speedup;       /* default median / winner median                       */
    double roofline_frac; /* the winner's fraction of this machine's roofline     */
    double verify_err;    /* the winner's worst relative error vs the reference   */
    int ntie;             /* configurations tied with the winner                 */
    int valid, evaluations, rejected, resumed, screened;
    int interrupted;
    char dims[256];
} ft_tune_result;

void ft_tune_defaults(ft_tune_opts *o);
ft_status ft_tune_run(const ft_tune_opts *o, ft_tune_result *r, ft_err *err);

/* The shape candidates are verified at: the preset itself when the reference costs at most
 * `flops_max` there, else a reduced preset of the same family (sizes halved in a fixed order,
 * kept odd so tiles leave remainders). Returns 1 when reduced. */
int ft_tune_verify_preset(const ft_op *op, const ft_attrs *attrs, const ft_preset *p,
                          double flops_max, ft_preset *out);

#ifdef __cplusplus
}
#endif
#endif
