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

#include "flaretune/stats.h"
#include "flaretune/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ft_measure_opts {
    double warmup_s;    /* run (untimed) for at least this long first; default 0.05   */
    int min_samples;    /* default 10                                                  */
    double min_time_s;  /* default 0.25                                                */
    double max_time_s;  /* time cap; default 3                                         */
    int max_samples;    /* default 2000                                                */
    double max_noise;   /* stop when the median's 95% CI half-width / median < this;
                           default 0.01                                                */
    double batch_min_s; /* batch calls shorter than this into one sample; default 1e-4 */
    /* Early-abort screening (as PyTorch's TunableOp does): after `screen_after` samples, stop
     * when the median so far exceeds `screen_above` seconds per call. 0 disables. */
    double screen_above;
    int screen_after; /* default 3 */
    /* Optional: where each sample started (wall time, seconds since the epoch), for traces, and
     * each sample's value (seconds per call), for distributions; both hold sample_cap. */
    double *sample_start;
    double *sample_value;
    int sample_cap;
    /* Optional: stop before the next sample once *stop becomes non-zero (Ctrl-C); the stats
     * then cover the samples taken and are marked interrupted. */
    volatile int *stop;
} ft_measure_opts;


/* Time one call (or `reps` back-to-back calls) and return the seconds it took in *secs. `prep`
 * runs before each timed window with the sample index; both get `ctx`. */
typedef struct ft_timed_fn {
    ft_status (*prep)(void *ctx, int sample, ft_err *err); /* may be NULL */
    ft_status (*run)(void *ctx, int reps, double *secs, ft_err *err);
    void *ctx;
} ft_timed_fn;

void ft_measure_defaults(ft_measure_opts *o);
ft_status ft_measure(const ft_timed_fn *fn, const ft_measure_opts *o, ft_stats *st, ft_err *err);


#ifdef __cplusplus
}
#endif
#endif
