/* measure.c: warm-up, noise-based stopping and robust statistics (see
 * include/flaretune/measure.h). */
#include "flaretune/measure.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "flaretune/clock.h"
#include "flaretune/eventlog.h"

/* The defaults of every use, the one place they are set (docs/measurement.md lists them). The
 * unnamed fields (sample buffers, stop flag) are a caller's own and start empty. */
static const ft_measure_opts defaults[] = {
    [FT_MEASURE_BENCH] =
        {
            /* Thread pools, page faults of the scratch, library set-up and the clock frequency
             * settle before the first timed sample; 50 ms is spent again on every candidate. */
            .warmup_s = 0.05,
            /* Fewer samples give quartiles, and so an interval, that mean nothing. */
            .min_samples = 10,
            /* The samples span a quarter of a second, so one quiet spell of a few milliseconds
             * cannot pass for the machine. */
            .min_time_s = 0.25,
            /* One bench is waited for by a person: a noisy machine gets 3 s to reach the noise
             * target, then the result says it was not reached. */
            .max_time_s = 3.0,
            /* 2,000 samples narrow the interval (1 / sqrt(n)) past any noise target; the cap
             * bounds the sample buffers when calls are short. */
            .max_samples = 2000,
            /* A bench's median is the number a person compares across runs and against the
             * roofline: known to 1%. */
            .max_noise = 0.01,
            /* Calls under 100 µs are timed in batches: far above the clock's resolution and
             * the cost of reading it, so the clock adds under 0.1% to a sample. */
            .batch_min_s = 1e-4,
            /* Screening is the tuner's, set per candidate from the best so far. */
            .screen_above = 0,
            /* A median of three already ignores one outlier. */
            .screen_after = 3,
        },
    [FT_MEASURE_TUNE] =
        {
            .warmup_s = 0.05,  /* as bench, for the same reasons */
            .min_samples = 10, /* as bench */
            /* A tuner measures dozens of candidates, so each gets less time than one bench; the
             * confirmation round then re-measures the contenders side by side (after 30 rounds it
             * stops once min_time_s per contender has passed, after 10 at twice max_time_s). */
            .min_time_s = 0.1,
            .max_time_s = 1.0,
            .max_samples = 2000, /* as bench */
            /* 2% tells candidates apart during the search; the winner is decided by the
             * interleaved confirmation, not by these medians. */
            .max_noise = 0.02,
            .batch_min_s = 1e-4, /* as bench */
            /* Set per candidate from the best so far and tune's screen_factor. */
            .screen_above = 0,
            .screen_after = 3, /* as bench */
        },
};

void ft_measure_defaults_for(ft_measure_use use, ft_measure_opts *o) { *o = defaults[use]; }

void ft_measure_defaults(ft_measure_opts *o) { ft_measure_defaults_for(FT_MEASURE_BENCH, o); }

ft_status ft_measure(const ft_timed_fn *fn, const ft_measure_opts *o, ft_stats *st, ft_err *err) {
    memset(st, 0, sizeof *st);
    double start = ft_now_s();
    ft_status s;
    /* Warm-up: caches, page faults, thread pools, frequency; also sizes the batch. */
    double one = 0;
    int warm = 0;
    do {
        if (fn->prep && (s = fn->prep(fn->ctx, -1, err))) return s;
        if ((s = fn->run(fn->ctx, 1, &one, err))) return s;
        warm++;
    } while (ft_now_s() - start < o->warmup_s && warm < 1000);
    int batch = 1;
    if (one < o->batch_min_s) /* (the factor keeps an exact ratio from rounding up a whole call) */
        batch = (int)ceil(o->batch_min_s / (one > 1e-9 ? one : 1e-9) * (1 - 1e-12));
    if (batch > 10000) batch = 10000;

    double *x = malloc(sizeof(double) * (size_t)o->max_samples);
    double *tmp = malloc(sizeof(double) * (size_t)o->max_samples);
    if (!x || !tmp) {
        free(x);
        free(tmp);
        return ft_err_set(err, FT_ENOMEM, "out of memory for samples");
    }
    int n = 0;
    double t0 = ft_now_s();
    for (;;) {
        double secs;
        if (o->stop && *o->stop) {
            st->interrupted = 1;
            break;
        }
        if (fn->prep && (s = fn->prep(fn->ctx, n, err))) break;
        if (o->sample_start && n < o->sample_cap) o->sample_start[n] = ft_wall_time();
        if ((s = fn->run(fn->ctx, batch, &secs, err))) break;
        if (o->sample_value && n < o->sample_cap) o->sample_value[n] = secs / batch;
        x[n++] = secs / batch;
        double elapsed = ft_now_s() - t0;
        if (n >= o->max_samples || elapsed >= o->max_time_s) break;
        int screen = o->screen_above > 0 && n >= o->screen_after;
        if ((n >= o->min_samples && elapsed >= o->min_time_s) || screen) {
            memcpy(tmp, x, sizeof(double) * (size_t)n);
            ft_stats probe = {0};
            ft_stats_compute(tmp, n, &probe);
            if (screen && probe.median > o->screen_above) {
                st->screened = 1;
                break;
            }
            if (n >= o->min_samples && elapsed >= o->min_time_s && probe.ci_rel < o->max_noise) {
                st->converged = 1;
                break;
            }
        }
    }
    if (!s) {
        st->batch = batch;
        st->total_s = ft_now_s() - start;
        ft_stats_compute(x, n, st);
    }
    free(x);
    free(tmp);
    return s;
}
