/* measure.c: warm-up, noise-based stopping and robust statistics (see
 * tuner/measure.h). */
#include "tuner/measure.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "traces/eventlog.h"
#include "core/sched.h"

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
            /* A sample whose threads lost more than 5% of it to other work is not the kernel's
             * time: the scheduler's slices are milliseconds, so a preempted sample loses tens
             * to thousands of times the call, while the probe's own reading and a quiet
             * machine's wake-ups stay under 1% (docs/measurement.md has the distributions). */
            .max_lost = 0.05,
            /* Five clean samples give a median that ignores two outliers; fewer is no
             * measurement of the kernel. */
            .min_clean = 5,
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
            .max_lost = 0.05,  /* as bench */
            .min_clean = 5,    /* as bench */
            /* Set per candidate from the best so far and tune's stop_factor. */
            .call_limit_s = 0,
            .check_after_s = 0,
        },
};

int ft_measure_parse_max_lost(const char *text, double *out) {
    if (!strcmp(text, "off")) {
        *out = 0;
        return 1;
    }
    char *end;
    double v = strtod(text, &end);
    if (end == text || *end || !(v > 0 && v <= 1)) return 0;
    *out = v;
    return 1;
}

void ft_measure_defaults_for(ft_measure_use use, ft_measure_opts *o) {
    *o = defaults[use];
    /* FLARETUNE_MAX_LOST: the machine-wide choice (a number in (0, 1], or "off"); a value that
     * does not parse leaves the default. */
    const char *env = getenv("FLARETUNE_MAX_LOST");
    if (env && *env) ft_measure_parse_max_lost(env, &o->max_lost);
}

void ft_measure_defaults(ft_measure_opts *o) { ft_measure_defaults_for(FT_MEASURE_BENCH, o); }

void ft_measure_opts_format(const ft_measure_opts *o, int host_clock, char *buf, size_t n) {
    int k = snprintf(buf, n,
                     "warmup %.9g s, %d to %d samples, %.9g to %.9g s, noise %.9g, batches of "
                     "%.9g s, screen after %d samples above %.9g s",
                     o->warmup_s, o->min_samples, o->max_samples, o->min_time_s, o->max_time_s,
                     o->max_noise, o->batch_min_s, o->screen_after, o->screen_above);
    if (host_clock && k >= 0 && (size_t)k < n)
        snprintf(buf + k, n - (size_t)k, ", max_lost %.9g (%d clean)", o->max_lost, o->min_clean);
}

/* One timed run of `reps` calls, stopped past call_limit_s a call, and what the scheduler
 * took from it (*lost_s of *wall_s; both 0 without a probe). */
static ft_status timed_sample(const ft_timed_fn *fn, const ft_measure_opts *o, ft_sched_probe *pr,
                              int reps, double *secs, double *wall_s, double *lost_s, ft_err *err) {
    ft_sched_mark m0, m1;
    if (pr) {
        ft_sched_probe_refresh(pr);
        ft_sched_mark_take(pr, &m0);
    }
    if (fn->watch)
        fn->watch(fn->ctx, o->call_limit_s * reps, o->check_after_s * reps, pr, pr ? &m0 : NULL);
    ft_status s = fn->run(fn->ctx, reps, secs, err);
    *wall_s = *lost_s = 0;
    if (pr) {
        ft_sched_mark_take(pr, &m1);
        *wall_s = m1.wall_s - m0.wall_s;
        *lost_s = ft_sched_lost(pr, &m0, &m1);
    }
    return s;
}

/* The calls per sample for a call of `fastest` seconds: enough for batch_min_s (at most 10000). */
static int batch_for(const ft_measure_opts *o, double fastest) {
    if (!(fastest < o->batch_min_s)) return 1;
    /* (the factor keeps an exact ratio from rounding up a whole call) */
    int b = (int)ceil(o->batch_min_s / (fastest > 1e-9 ? fastest : 1e-9) * (1 - 1e-12));
    return b > 10000 ? 10000 : b;
}

ft_status ft_measure(const ft_timed_fn *fn, const ft_measure_opts *o, ft_stats *st, ft_err *err) {
    memset(st, 0, sizeof *st);
    double start = ft_now_s();
    ft_status s = FT_OK;
    /* The probe watches the calling thread from the start and every other thread once it
     * exists (OpenMP's and the BLAS's pools start on the first call). */
    ft_sched_probe probe, *pr = NULL;
    if (fn->host_clock && o->max_lost > 0) {
        ft_sched_probe_open(&probe);
        pr = &probe;
    }
    /* x: the clean samples; all: every sample taken (4 x max_samples at most), all_start: when
     * each began */
    double *x = malloc(sizeof(double) * (size_t)o->max_samples);
    double *tmp = malloc(sizeof(double) * (size_t)o->max_samples);
    double *all = malloc(sizeof(double) * 4 * (size_t)o->max_samples);
    double *all_start = malloc(sizeof(double) * 4 * (size_t)o->max_samples);
    if (!x || !tmp || !all || !all_start) {
        free(x);
        free(tmp);
        free(all);
        free(all_start);
        if (pr) ft_sched_probe_close(pr);
        return ft_err_set(err, FT_ENOMEM, "out of memory for samples");
    }
    /* Warm-up: caches, page faults, thread pools, frequency; also sizes the batch, from its
     * fastest call (a call the scheduler stretched would size it too small). */
    double one = 0, fastest = INFINITY, wall = 0, lost = 0;
    int warm = 0, batch = 1, n = 0, taken = 0;
    int rebatched = 0;
    /* t0: the samples' start, for the time cap; since: the current round of samples' start,
     * for the minimum time (a restart at a larger batch begins a round) */
    double lost_sum = 0, wall_sum = 0, t0 = start, since = start, stop_t0 = start;
    do {
        if (fn->prep && (s = fn->prep(fn->ctx, -1, err))) goto out;
        stop_t0 = ft_now_s();
        if ((s = timed_sample(fn, o, pr, 1, &one, &wall, &lost, err))) break;
        if (one < fastest) fastest = one;
        warm++;
    } while (ft_now_s() - start < o->warmup_s && warm < 1000);
    if (!s) {
        batch = batch_for(o, fastest);
        t0 = since = ft_now_s();
    }
    while (!s) {
        double secs;
        if (o->stop && *o->stop) {
            st->interrupted = 1;
            break;
        }
        if (fn->prep && (s = fn->prep(fn->ctx, n, err))) break;
        double started = ft_wall_time();
        stop_t0 = ft_now_s();
        if ((s = timed_sample(fn, o, pr, batch, &secs, &wall, &lost, err))) break;
        all_start[taken] = started;
        all[taken++] = secs / batch;
        if (secs / batch < fastest) fastest = secs / batch;
        /* Every warm-up call stretched (a busy machine) sized the batch too small: once a
         * sample shows the call needs a batch over twice as large, or any batch at all where it
         * is timed one by one, the samples start again at it (twice at most), so short calls
         * are never timed one by one. */
        const int need = batch_for(o, fastest);
        if ((need > 2 * batch || (batch == 1 && need > 1)) && rebatched < 2) {
            batch = batch_for(o, fastest);
            rebatched++;
            /* everything the samples said is said again: their count, what the scheduler took
             * of them, and the minimum time they must span (the cap still counts from t0) */
            n = taken = st->discarded = 0;
            lost_sum = wall_sum = 0;
            since = ft_now_s();
            continue;
        }
        lost_sum += lost;
        wall_sum += wall;
        int clean = !(wall > 0 && lost > o->max_lost * wall);
        if (clean) {
            if (o->sample_start && n < o->sample_cap) o->sample_start[n] = started;
            if (o->sample_value && n < o->sample_cap) o->sample_value[n] = secs / batch;
            x[n++] = secs / batch;
        } else {
            st->discarded++;
        }
        const double now = ft_now_s(), elapsed = now - t0, round = now - since;
        if (n >= o->max_samples || taken >= 4 * o->max_samples || elapsed >= o->max_time_s) break;
        if (!clean) continue;
        int screen = o->screen_above > 0 && n >= o->screen_after;
        if ((n >= o->min_samples && round >= o->min_time_s) || screen) {
            memcpy(tmp, x, sizeof(double) * (size_t)n);
            ft_stats probe_st = {0};
            ft_stats_compute(tmp, n, &probe_st);
            if (screen && probe_st.median > o->screen_above) {
                st->screened = 1;
                break;
            }
            if (n >= o->min_samples && round >= o->min_time_s && probe_st.ci_rel < o->max_noise) {
                st->converged = 1;
                break;
            }
        }
    }
    /* A call past its limit ends the measurement: the candidate is far slower than the best,
     * or (when the scheduler took the time) not measured cleanly. */
    int stopped_dirty = 0;
    if (s == FT_ETIMEDOUT) {
        st->stopped = 1;
        st->stopped_s = ft_now_s() - stop_t0;
        stopped_dirty = wall > 0 && lost > o->max_lost * wall;
        s = FT_OK;
    }
    if (!s) {
        int discarded = st->discarded;
        /* Too few clean samples for what the budget gave: as many as were taken, up to
         * min_clean. A call slower than the whole budget gets its one clean sample; a call
         * the watchdog stopped decides by its own share. */
        int need = o->min_clean < taken ? o->min_clean : taken;
        int unclean = st->stopped ? stopped_dirty : !st->screened && (n == 0 || n < need);
        st->batch = batch;
        st->total_s = ft_now_s() - start;
        /* Unclean: the statistics of every sample, contaminated ones too. The scheduler only
         * adds time, so that median is an upper bound on the kernel's, to show, never to
         * rank. */
        if (unclean && !st->stopped) {
            /* The samples recorded for the caller are then every one taken, as the stats. */
            for (int i = 0; i < taken && i < o->sample_cap; i++) {
                if (o->sample_start) o->sample_start[i] = all_start[i];
                if (o->sample_value) o->sample_value[i] = all[i];
            }
            ft_stats_compute(all, taken, st);
        } else {
            ft_stats_compute(x, n, st);
        }
        /* The cap on samples reached before the minimum time, the noise target met: it held.
         * (Stopped by the time cap, it did not.) */
        if (!unclean && !st->screened && !st->interrupted && !st->stopped &&
            (n >= o->max_samples || taken >= 4 * o->max_samples) && n >= o->min_samples &&
            st->ci_rel < o->max_noise)
            st->converged = 1;
        st->unclean = unclean;
        st->discarded = discarded;
        st->taken = taken;
        st->fastest_s = fastest;
        st->lost_frac = wall_sum > 0 ? lost_sum / wall_sum : 0;
    }
out:
    if (pr) ft_sched_probe_close(pr);
    free(x);
    free(tmp);
    free(all);
    free(all_start);
    return s;
}
