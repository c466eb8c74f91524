/* measure.h: honest timing: warm-up, samples until the noise criterion holds, robust statistics.
 *
 * A measurement takes samples of one call until the median is known to the requested precision
 * (nvbench's idea, with a robust criterion): after at least `min_samples` samples and
 * `min_time_s` seconds, stop when the 95% confidence half-width of the median, estimated as
 * 1.57 * IQR / sqrt(n) (the boxplot notch), is under `max_noise` of the median; or stop at
 * `max_time_s`, saying the criterion was not met. Calls much shorter than the clock's useful
 * resolution are batched so one sample times several calls.
 *
 * The measured function gets a sample index before each timed run (outside the timed window), so
 * cold measurements can rotate to an input set that is not in cache.
 */
#ifndef FLARETUNE_MEASURE_H
#define FLARETUNE_MEASURE_H

#include <stddef.h>

#include "core/sched.h"
#include "core/stats.h"
#include "core/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ft_measure_opts {
    double warmup_s;    /* run (untimed) for at least this long first                   */
    int min_samples;    /* take at least this many samples                              */
    double min_time_s;  /* and sample for at least this long                            */
    double max_time_s;  /* time cap                                                     */
    int max_samples;    /* sample cap                                                   */
    double max_noise;   /* stop when the median's 95% CI half-width / median < this     */
    double batch_min_s; /* batch calls shorter than this into one sample                */
    /* Early-abort screening (as PyTorch's TunableOp does): after `screen_after` samples, stop
     * when the median so far exceeds `screen_above` seconds per call. 0 disables. */
    double screen_above;
    int screen_after;
    /* Optional: where each sample started (wall time, seconds since the epoch), for traces, and
     * each sample's value (seconds per call), for distributions; both hold sample_cap. The
     * first min(st->samples, sample_cap) entries are the samples the statistics are of: the
     * clean ones, or every one taken when the statistics are an unclean measurement's. */
    double *sample_start;
    double *sample_value;
    int sample_cap;
    /* Optional: stop before the next sample once *stop becomes non-zero (Ctrl-C); the stats
     * then cover the samples taken and are marked interrupted. */
    volatile int *stop;
    /* Samples the scheduler took from (core/sched.h): with a host clock, a sample
     * whose threads lost more than `max_lost` of it to other work is contaminated and not used;
     * the measurement goes on until it has its clean samples or its budget ends, and it is
     * `unclean` when it ends with fewer than min(min_clean, samples taken) clean ones. */
    double max_lost;
    int min_clean;
    /* The longest one call may run, seconds (0: no limit): a sample of `reps` calls gets
     * reps times this, and a call past it is stopped (ft_timed_fn.watch) and the measurement
     * ends `stopped`. Past check_after_s a call (reps times it) is also stopped once its thread
     * has lost over half of it to other work (ft_call_watch): it cannot be a clean sample, and
     * on a busy machine it would run for as long as the scheduler pleases. The tuner sets both
     * from the best so far. */
    double call_limit_s;
    double check_after_s;
} ft_measure_opts;

/* Time one call (or `reps` back-to-back calls) and return the seconds it took in *secs. `prep`
 * runs before each timed window with the sample index; both get `ctx`. */
typedef struct ft_timed_fn {
    ft_status (*prep)(void *ctx, int sample, ft_err *err); /* may be NULL */
    /* FT_ETIMEDOUT when a call ran past the deadline last given to limit(). */
    ft_status (*run)(void *ctx, int reps, double *secs, ft_err *err);
    void *ctx;
    /* 1 when run() reads the host clock around the call, so the host's scheduler stretches
     * it: only then are samples classified (max_lost). A device clock is not stretched. */
    int host_clock;
    /* Optional: before each run(), its limits from now (ft_call_watch: seconds, 0 for none),
     * and the scheduler probe with its mark at the run's start (NULL when samples are not
     * classified) for the judge to see the other threads' waits (ft_call_watch_threads);
     * run() stops the call past them where it can and returns FT_ETIMEDOUT. */
    void (*watch)(void *ctx, double limit_s, double check_after_s, const ft_sched_probe *probe,
                  const ft_sched_mark *start);
} ft_timed_fn;

/* What a measurement is for; each use has its own defaults, with the reason for every value, in
 * one table (tuner/measure.c, docs/measurement.md). */
typedef enum ft_measure_use {
    FT_MEASURE_BENCH, /* `bench`: one config, timed once, as precisely as a person will wait for */
    FT_MEASURE_TUNE,  /* `tune`'s search: dozens of candidates, each given less time           */
} ft_measure_use;

/* The defaults of `use`; no samples recorded, no stop flag. FLARETUNE_MAX_LOST in the
 * environment replaces max_lost's default (as ft_measure_parse_max_lost reads it). */
void ft_measure_defaults_for(ft_measure_use use, ft_measure_opts *o);
/* "off" (0: keep every sample) or a share in (0, 1]; 0 when the text is neither. */
int ft_measure_parse_max_lost(const char *text, double *out);
/* The defaults of FT_MEASURE_BENCH. */
void ft_measure_defaults(ft_measure_opts *o);
/* What o makes a measurement, as one line of its settings ("warmup 0.05 s, 5 to 200 samples,
 * ..."): two runs whose lines differ measure differently (the per-call fields, the samples'
 * arrays and the stop flag are not settings and are left out, and so are max_lost and
 * min_clean unless host_clock: only samples timed by the host's clock are judged). */
void ft_measure_opts_format(const ft_measure_opts *o, int host_clock, char *buf, size_t n);
ft_status ft_measure(const ft_timed_fn *fn, const ft_measure_opts *o, ft_stats *st, ft_err *err);

#ifdef __cplusplus
}
#endif
#endif
