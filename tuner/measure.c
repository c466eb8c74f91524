/* measure.c: warm-up, noise-based stopping and robust statistics (see
 * include/flaretune/measure.h). */
#include "flaretune/measure.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "flaretune/clock.h"
#include "flaretune/eventlog.h"

void ft_measure_defaults(ft_measure_opts *o) {
    o->warmup_s = 0.05;
    o->min_samples = 10;
    o->min_time_s = 0.25;
    o->max_time_s = 3.0;
    o->max_samples = 2000;
    o->max_noise = 0.01;
    o->batch_min_s = 1e-4;
    o->screen_above = 0;
    o->screen_after = 3;
    o->sample_start = NULL;
    o->sample_value = NULL;
    o->sample_cap = 0;
    o->stop = NULL;
}

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
