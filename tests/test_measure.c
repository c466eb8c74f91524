/* test_measure.c: the statistics and the stopping rules of measurement, driven by a fake timer
 * whose samples are known exactly. */
#define _GNU_SOURCE
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/clock.h"
#include "core/json.h"
#include "core/load.h"
#include "core/rng.h"
#include "core/sched.h"
#include "ft_test.h"
#include "op/op.h"
#include "traces/eventlog.h"
#include "tuner/measure.h"

static void test_quantiles(void) {
    double x[] = {5, 1, 4, 2, 3};
    ft_stats st = {0};
    ft_stats_compute(x, 5, &st);
    FT_CHECK(st.median == 3 && st.q1 == 2 && st.q3 == 4 && st.iqr == 2, "1..5 quartiles");
    FT_CHECK(st.min == 1 && st.max == 5 && st.mean == 3, "min max mean");
    FT_CHECK_NEAR(st.stdev, sqrt(2.5), 1e-12);
    FT_CHECK_NEAR(st.ci_rel, 1.57 * 2 / sqrt(5) / 3, 1e-12);
    double y[] = {1, 2, 3, 4};
    ft_stats_compute(y, 4, &st);
    FT_CHECK(st.median == 2.5 && st.q1 == 1.75 && st.q3 == 3.25, "even count interpolates");
    ft_stats_compute(y, 0, &st);
    FT_CHECK(isnan(st.median) && st.samples == 0, "no samples");
}

/* A timer that returns scripted per-call times. */
typedef struct {
    ft_rng rng;
    double base, noise; /* per call: base * (1 + noise * uniform(-1, 1)) */
    int calls, preps;
    int last_sample;
    int slow_calls; /* the first slow_calls calls take slow seconds each (a busy start) */
    double slow;
    double sleep_s; /* and each of them sleeps this long (real time passes) */
} fake;

static ft_status fake_run(void *p, int reps, double *secs, ft_err *err) {
    (void)err;
    fake *f = p;
    double t = 0;
    for (int r = 0; r < reps; r++)
        t += f->calls + r < f->slow_calls
                 ? f->slow
                 : f->base * (1 + f->noise * (2 * ft_rng_uniform(&f->rng) - 1));
    if (f->sleep_s > 0 && f->calls < f->slow_calls) {
        struct timespec ts = {0, (long)(f->sleep_s * 1e9)};
        nanosleep(&ts, NULL);
    }
    f->calls += reps;
    *secs = t;
    return FT_OK;
}

static ft_status fake_prep(void *p, int sample, ft_err *err) {
    (void)err;
    fake *f = p;
    f->preps++;
    f->last_sample = sample;
    return FT_OK;
}

/* A fake call under measurement: its timer (base seconds a call with noise, the rng seeded with
 * seed), the options (the defaults without a warm-up) and the statistics of the last run. */
typedef struct {
    fake f;
    ft_timed_fn fn;
    ft_measure_opts o;
    ft_stats st;
} fake_bench;

static void fake_bench_init(fake_bench *b, double base, double noise, uint64_t seed) {
    memset(b, 0, sizeof *b);
    b->f.base = base;
    b->f.noise = noise;
    ft_rng_seed(&b->f.rng, seed);
    ft_measure_defaults(&b->o);
    b->o.warmup_s = 0;
    b->fn = (ft_timed_fn){.run = fake_run, .ctx = &b->f};
}

/* Measures it; the measurement itself must succeed. */
static void fake_measure(fake_bench *b) {
    FT_CHECK(ft_measure(&b->fn, &b->o, &b->st, NULL) == FT_OK, "measure");
}

/* Spearman's rank correlation: orders agreeing, reversed, one swap, ties (mean ranks:
 * x = 1, 2.5, 2.5, 4 against 1..4 gives 4.5 / sqrt(4.5 x 5) = 3 / sqrt(10)), and no answer
 * for fewer than two pairs or a constant side. */
static void test_rank_correlation(void) {
    double x[] = {1, 2, 3, 4, 5}, sq[] = {1, 4, 9, 16, 25}, rev[] = {9, 7, 5, 3, 1};
    double swap[] = {1, 3, 2, 5, 4}, flat[] = {2, 2, 2, 2, 2};
    FT_CHECK(ft_rank_correlation(x, sq, 5) == 1, "monotone: %g", ft_rank_correlation(x, sq, 5));
    FT_CHECK(ft_rank_correlation(x, rev, 5) == -1, "reversed");
    FT_CHECK_NEAR(ft_rank_correlation(x, swap, 5), 0.8, 1e-12);
    double tx[] = {1, 2, 2, 3}, ty[] = {10, 20, 30, 40};
    FT_CHECK_NEAR(ft_rank_correlation(tx, ty, 4), 3 / sqrt(10), 1e-12);
    FT_CHECK(isnan(ft_rank_correlation(x, sq, 1)) && isnan(ft_rank_correlation(x, flat, 5)),
             "undefined cases");
    /* The order under the ranks: by value, ties by index, NaN last. */
    double v[] = {3, NAN, 1, 3, -2, NAN};
    int order[6], want[6] = {4, 2, 0, 3, 1, 5};
    FT_CHECK(ft_argsort(v, 6, order) && memcmp(order, want, sizeof want) == 0,
             "argsort %d %d %d %d %d %d", order[0], order[1], order[2], order[3], order[4],
             order[5]);
}

static void test_converges_on_quiet_samples(void) {
    fake_bench b;
    fake_bench_init(&b, 1e-3, 0.001, 1);
    b.o.min_time_s = 0;
    b.fn.prep = fake_prep;
    fake_measure(&b);
    FT_CHECK(b.st.converged && b.st.samples == b.o.min_samples,
             "quiet: stops at the minimum count (%d)", b.st.samples);
    FT_CHECK(fabs(b.st.median - 1e-3) < 2e-6, "median %g", b.st.median);
    FT_CHECK(b.st.batch == 1, "1 ms calls are not batched");
    FT_CHECK(b.st.taken == b.st.samples && !b.st.discarded && !b.st.unclean,
             "a device clock: every sample taken is kept (%d of %d)", b.st.samples, b.st.taken);
    FT_CHECK(b.f.preps == b.st.samples + 1 && b.f.last_sample == b.st.samples - 1,
             "prep runs before every sample (and the warm-up): %d preps", b.f.preps);
}

static void test_noisy_samples_hit_the_cap(void) {
    fake_bench b;
    fake_bench_init(&b, 1e-3, 0.9, 2);
    b.o.min_time_s = 0;
    b.o.max_samples = 50;
    b.o.max_noise = 1e-4;
    fake_measure(&b);
    FT_CHECK(!b.st.converged && b.st.samples == 50, "noisy: runs to the cap, not converged (%d)",
             b.st.samples);
}

/* Quiet samples that reach the sample cap before the minimum time met the noise target: that
 * is convergence, not a cap that stopped it short. */
static void test_sample_cap_converged(void) {
    fake_bench b;
    fake_bench_init(&b, 1e-3, 0.001, 5);
    b.o.min_time_s = 1e6;
    b.o.max_time_s = 2e6;
    b.o.max_samples = 40;
    fake_measure(&b);
    FT_CHECK(b.st.samples == 40 && b.st.converged && b.st.ci_rel < b.o.max_noise,
             "40 quiet samples: converged %d, ci %g", b.st.converged, b.st.ci_rel);
    /* Stopped by the time cap before the minimum time, it did not converge. */
    fake_bench_init(&b, 1e-3, 0.001, 6);
    b.o.min_time_s = 1e6;
    b.o.max_time_s = 0.002;
    b.o.max_samples = 1000000;
    fake_measure(&b);
    FT_CHECK(!b.st.converged && b.st.samples >= b.o.min_samples && b.st.samples < b.o.max_samples &&
                 b.st.ci_rel < b.o.max_noise,
             "the time cap: converged %d after %d samples", b.st.converged, b.st.samples);
}

static void test_batches_short_calls(void) {
    fake_bench b;
    fake_bench_init(&b, 1e-6, 0, 3);
    b.o.min_time_s = 0;
    fake_measure(&b);
    FT_CHECK(b.st.batch == 100, "1 us calls batched to 100 us samples, got %d", b.st.batch);
    FT_CHECK(fabs(b.st.median - 1e-6) < 1e-12, "per-call median %g", b.st.median);
}

/* A warm-up the scheduler stretched (its one call 200 us) sizes no batch; the first sample shows
 * the call takes 1 us, and the samples start again in batches of 100, none of the unbatched
 * ones kept. A call just under the threshold (61 us: a batch of 2) is not timed one by one
 * either: 2 is not over twice 1, but one by one is no batch at all. */
static void test_batch_after_a_busy_warmup(void) {
    static const struct {
        double call_s;
        int batch;
    } cases[] = {{1e-6, 100}, {6.1e-5, 2}};
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        fake_bench b;
        fake_bench_init(&b, cases[k].call_s, 0, 4);
        b.f.slow_calls = 1;
        b.f.slow = 2e-4;
        b.o.min_time_s = 0;
        fake_measure(&b);
        FT_CHECK(b.st.batch == cases[k].batch,
                 "a %g s call batched by %d after the busy warm-up, got %d", cases[k].call_s,
                 cases[k].batch, b.st.batch);
        FT_CHECK(fabs(b.st.median - cases[k].call_s) < 1e-12 && b.st.taken == b.st.samples,
                 "per-call median %g from %d samples of %d taken", b.st.median, b.st.samples,
                 b.st.taken);
    }
}

/* After the samples start again at a larger batch, the minimum time counts from the restart:
 * ten samples taken at once after 0.2 s of slow ones do not converge on the slow ones' time
 * (they did, "converged" on a millisecond of samples). The samples here take no real time, so
 * the new round meets the noise target by the sample cap instead. */
static void test_restart_counts_its_own_time(void) {
    fake_bench b;
    fake_bench_init(&b, 1e-6, 0, 7);
    b.f.slow_calls = 8; /* the warm-up and the first samples: 200 us calls, 25 ms of real time */
    b.f.slow = 2e-4;
    b.f.sleep_s = 0.025;
    b.o.min_time_s = 0.1;
    b.o.max_time_s = 100;
    b.o.max_samples = 500;
    fake_measure(&b);
    FT_CHECK(b.st.batch == 100 && b.st.samples == 500 && b.st.converged,
             "after the restart: %d samples in batches of %d, converged %d (the minimum time "
             "counted from before it would stop at %d)",
             b.st.samples, b.st.batch, b.st.converged, b.o.min_samples);
}

static void test_screening(void) {
    fake_bench b;
    fake_bench_init(&b, 2e-3, 0.01, 4);
    b.o.screen_above = 1e-3; /* the best so far is twice as fast */
    fake_measure(&b);
    FT_CHECK(b.st.screened && b.st.samples == b.o.screen_after, "dropped after %d samples: %d %d",
             b.o.screen_after, b.st.screened, b.st.samples);
    b.o.screen_above = 3e-3; /* competitive: measured fully */
    b.f.calls = 0;
    fake_measure(&b);
    FT_CHECK(!b.st.screened && b.st.samples >= b.o.min_samples, "a competitive candidate is kept");
}

static void test_stop_flag(void) {
    volatile int stop = 1;
    fake_bench b;
    fake_bench_init(&b, 1e-3, 0.5, 5);
    b.o.stop = &stop;
    fake_measure(&b);
    FT_CHECK(b.st.interrupted && b.st.samples == 0, "a raised stop flag ends it before sampling");
}

/* ---- the scheduler in the samples (real threads, real clocks) ------------------------------- */

/* A call that computes for spin_s on the calling thread and, on the samples sleep_every picks
 * (1: all, 2: every other one, 0: none), sleeps sleep_s in the middle of it: a thread taken off
 * its CPU inside the call, as a descheduled one is. */
typedef struct {
    double spin_s, sleep_s;
    int sleep_every, calls;
} host_call;

static void spin_for(double s) {
    double t0 = ft_now_s();
    while (ft_now_s() - t0 < s) {
    }
}

static ft_status host_run(void *p, int reps, double *secs, ft_err *err) {
    (void)err;
    host_call *h = p;
    double t0 = ft_now_s();
    for (int r = 0; r < reps; r++) {
        spin_for(h->spin_s / 2);
        if (h->sleep_every && h->calls % h->sleep_every == 0) {
            struct timespec ts = {0, (long)(h->sleep_s * 1e9)};
            nanosleep(&ts, NULL);
        }
        spin_for(h->spin_s / 2);
        h->calls++;
    }
    *secs = ft_now_s() - t0;
    return FT_OK;
}

static void host_opts(ft_measure_opts *o) {
    ft_measure_defaults(o);
    o->max_lost = 0.05; /* the rule under test, whatever FLARETUNE_MAX_LOST says */
    o->warmup_s = 0.005;
    o->min_time_s = 0.05;
    o->max_time_s = 0.3;
    o->max_noise = 1e-9; /* never converges: every run takes its samples to the cap */
    o->max_samples = 60;
}

/* A call whose thread sleeps inside it on every sample is contaminated on every sample: none is
 * used and the measurement is unclean (its median, of every sample, shows the sleep). The same
 * call without the sleep is clean; with the sleep on every other sample, those are thrown away
 * and the median is the computing call's alone. */
static void test_sleep_inside_a_call_is_contaminated(void) {
    ft_measure_opts o;
    host_opts(&o);
    ft_stats st;
    host_call always = {.spin_s = 2e-4, .sleep_s = 2e-3, .sleep_every = 1};
    ft_timed_fn fn = {.run = host_run, .ctx = &always, .host_clock = 1};
    /* The samples handed back are those the statistics are of: an unclean measurement's are
     * every one taken, each begun within the measurement, its value within min..max. */
    enum { CAP = 4096 };
    static double starts[CAP], values[CAP];
    for (int i = 0; i < CAP; i++)
        starts[i] = values[i] = -1;
    o.sample_start = starts;
    o.sample_value = values;
    o.sample_cap = CAP;
    double before = ft_wall_time();
    FT_CHECK(ft_measure(&fn, &o, &st, NULL) == FT_OK, "measure");
    double after = ft_wall_time();
    FT_CHECK(st.unclean && st.discarded == st.samples && st.samples > 0,
             "every sleeping sample thrown away: %d of %d, unclean %d", st.discarded, st.samples,
             st.unclean);
    FT_CHECK(st.median > 2e-3 && st.lost_frac > 0.5, "the unclean median shows the sleep: %g (%g)",
             st.median, st.lost_frac);
    int bad = 0;
    for (int i = 0; i < st.samples && i < CAP; i++)
        bad +=
            !(starts[i] >= before && starts[i] <= after && (i == 0 || starts[i] > starts[i - 1]) &&
              values[i] >= st.min && values[i] <= st.max);
    FT_CHECK(bad == 0, "%d of the %d unclean samples handed back are not theirs", bad, st.samples);
    /* Its JSON form gives no confidence interval: the spread of contaminated samples says
     * nothing (the text says "an upper bound"). */
    json_t *j = ft_stats_to_json(&st);
    FT_CHECK(json_is_null(json_object_get(j, "ci_rel")) &&
                 json_is_false(json_object_get(j, "clean")),
             "an unclean measurement's JSON: ci_rel %s",
             json_is_null(json_object_get(j, "ci_rel")) ? "null" : "a number");
    json_decref(j);
    o.sample_start = o.sample_value = NULL;
    o.sample_cap = 0;

    /* Other processes on the machine take a computing call's CPU too, and that is thrown away
     * by the same rule: a busy spell can spoil one measurement, not five in a row. */
    host_call never = {.spin_s = 2e-4};
    fn.ctx = &never;
    int ok = 0;
    ft_load_mark m0, m1;
    ft_load_mark_take(&m0);
    for (int tries = 0; tries < 5 && !ok; tries++) {
        FT_CHECK(ft_measure(&fn, &o, &st, NULL) == FT_OK, "measure");
        ok = !st.unclean && st.samples >= o.min_clean && st.discarded < st.samples;
    }
    ft_load_mark_take(&m1);
    ft_load busy;
    ft_load_between(&m0, &m1, &busy);
    /* ...unless other processes kept the CPUs busy through all five (a machine loaded past its
     * cores for seconds): then the rule rightly threw the samples away, and says nothing of a
     * quiet CPU. */
    if (!ok && busy.read && busy.other_cpus >= FT_LOAD_BUSY_CPUS)
        fprintf(stderr,
                "a computing call: not judged, the machine was busy throughout (others "
                "used %.2f CPUs; %d kept, %d discarded)\n",
                busy.other_cpus, st.samples, st.discarded);
    else {
        FT_CHECK(ok, "a computing call is clean: %d kept, %d discarded", st.samples, st.discarded);
        FT_CHECK(st.median < 1e-3, "its median is the call's: %g", st.median);
    }

    /* Every other call sleeps, so at least half the samples taken (less the odd one) are
     * thrown away: how many are taken within max_time_s depends on how busy the machine is. */
    host_call half = {.spin_s = 2e-4, .sleep_s = 2e-3, .sleep_every = 2};
    fn.ctx = &half;
    ok = 0;
    for (int tries = 0; tries < 5 && !ok; tries++) {
        FT_CHECK(ft_measure(&fn, &o, &st, NULL) == FT_OK, "measure");
        ok = !st.unclean && st.discarded >= 3 &&
             2 * st.discarded + 1 >= st.samples + st.discarded && st.median < 1e-3;
    }
    FT_CHECK(ok, "every other sample slept: %d of %d discarded, median %g", st.discarded,
             st.samples + st.discarded, st.median);

    /* The same sleep on a device clock is the device's business: nothing is classified. */
    fn.ctx = &always;
    fn.host_clock = 0;
    FT_CHECK(ft_measure(&fn, &o, &st, NULL) == FT_OK, "measure");
    FT_CHECK(!st.unclean && st.discarded == 0, "a device clock is not classified");
}

/* A worker thread of the call that is kept waiting for its CPU: the worker and a hog share
 * CPU 0, so the worker's run-queue delay runs through every sample while the calling thread
 * (which only waits for it, spinning) loses nothing itself. */
typedef struct {
    volatile int go, done, quit;
} worker_sync;

static void pin_to_cpu0(void) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(0, &set);
    pthread_setaffinity_np(pthread_self(), sizeof set, &set);
}

static void *worker_main(void *p) {
    worker_sync *w = p;
    pin_to_cpu0();
    while (!w->quit) {
        if (!__atomic_load_n(&w->go, __ATOMIC_ACQUIRE)) continue; /* spins, as OpenMP's do */
        spin_for(5e-4);
        w->go = 0;
        __atomic_store_n(&w->done, 1, __ATOMIC_RELEASE);
    }
    return NULL;
}

static void *hog_main(void *p) {
    worker_sync *w = p;
    pin_to_cpu0();
    while (!w->quit) {
    }
    return NULL;
}

static ft_status worker_run(void *p, int reps, double *secs, ft_err *err) {
    (void)err;
    worker_sync *w = p;
    double t0 = ft_now_s();
    for (int r = 0; r < reps; r++) {
        w->done = 0;
        __atomic_store_n(&w->go, 1, __ATOMIC_RELEASE);
        while (!__atomic_load_n(&w->done, __ATOMIC_ACQUIRE) && ft_now_s() - t0 < 5) {
        }
    }
    *secs = ft_now_s() - t0;
    return FT_OK;
}

static void test_waiting_worker_is_contaminated(void) {
    if (sysconf(_SC_NPROCESSORS_ONLN) < 2) {
        fprintf(stderr, "  (one CPU: the worker test needs two)\n");
        return;
    }
    worker_sync w = {0};
    pthread_t wt, ht;
    FT_CHECK(pthread_create(&wt, NULL, worker_main, &w) == 0, "worker");
    FT_CHECK(pthread_create(&ht, NULL, hog_main, &w) == 0, "hog");
    ft_measure_opts o;
    host_opts(&o);
    ft_stats st;
    ft_timed_fn fn = {.run = worker_run, .ctx = &w, .host_clock = 1};
    FT_CHECK(ft_measure(&fn, &o, &st, NULL) == FT_OK, "measure");
    w.quit = 1;
    pthread_join(wt, NULL);
    pthread_join(ht, NULL);
    int taken = st.unclean ? st.samples : st.samples + st.discarded;
    /* The hog and the worker take turns of a scheduler slice (milliseconds): the samples in
     * which the worker waited are thrown away, those of its own turn are clean, and the kept
     * median is the worker's 0.5 ms of work, not the waits. */
    /* On a machine busy enough that the time cap lets only a sample or two be taken, those
     * are the worker's waits too. */
    FT_CHECK(taken > 0 && st.discarded >= (taken < 3 ? taken : 3) && st.lost_frac > 0.05,
             "a worker kept from its CPU spoils samples: %d of %d discarded (lost %.2f)",
             st.discarded, taken, st.lost_frac);
    FT_CHECK(st.unclean || st.median < 2e-3, "the clean samples are the work's: %g", st.median);
}

/* The watchdog's judge sees the workers too: a call whose worker waits for its CPU (it and two
 * hogs share CPU 0) while the calling thread spins on CPU 1, losing nothing itself, is spoiled,
 * not slow, even with its deadline and its judging due at the same moment (the two share a
 * floor in the tuner), and the judge names the worker as the cause. */
static void *forever_main(void *p) {
    worker_sync *w = p;
    pin_to_cpu0();
    while (!w->quit) {
    }
    return NULL;
}

typedef struct {
    const ft_sched_probe *probe;
    const ft_sched_mark *start;
} lost_view;

static double others_lost(const void *p) {
    const lost_view *v = p;
    return ft_sched_delay_since(v->probe, v->start);
}

static void test_judge_sees_a_waiting_worker(void) {
    if (sysconf(_SC_NPROCESSORS_ONLN) < 2) {
        fprintf(stderr, "  (one CPU: the judge's worker test needs two)\n");
        return;
    }
    cpu_set_t old, one;
    pthread_getaffinity_np(pthread_self(), sizeof old, &old);
    CPU_ZERO(&one);
    CPU_SET(1, &one);
    pthread_setaffinity_np(pthread_self(), sizeof one, &one);
    worker_sync w = {0};
    pthread_t t[3];
    for (int i = 0; i < 3; i++)
        FT_CHECK(pthread_create(&t[i], NULL, i ? hog_main : forever_main, &w) == 0, "thread %d", i);
    spin_for(0.02); /* all three running */
    ft_sched_probe probe;
    ft_sched_probe_open(&probe);
    ft_sched_mark m0;
    ft_sched_mark_take(&probe, &m0);
    ft_call c;
    memset(&c, 0, sizeof c);
    ft_call_watch(&c, 0.05, 0.05);
    lost_view view = {&probe, &m0};
    ft_call_watch_threads(&c, others_lost, &view);
    double t0 = ft_now_s();
    while (!ft_call_overdue(&c) && ft_now_s() - t0 < 10) {
    }
    double after = ft_now_s() - t0;
    w.quit = 1;
    for (int i = 0; i < 3; i++)
        pthread_join(t[i], NULL);
    ft_sched_probe_close(&probe);
    pthread_setaffinity_np(pthread_self(), sizeof old, &old);
    FT_CHECK(c.overdue && after < 10, "the call was stopped (after %.3f s)", after);
    FT_CHECK(c.spoiled, "stopped as spoiled by the scheduler, not as slow (after %.3f s)", after);
    /* ft_call_watch forgets the probe, which is gone once the measurement ends */
    ft_call_watch(&c, 0, 0);
    FT_CHECK(c.others_lost == NULL && c.others_ctx == NULL, "the probe is forgotten");
}

/* The watchdog: a call that would run forever is stopped at its limit, the measurement ends
 * `stopped` (not an error) and says after how long; a call inside its limit is not stopped. */
typedef struct {
    double deadline, call_s;
} spin_call;

static void spin_watch(void *p, double limit_s, double check_after_s, const ft_sched_probe *probe,
                       const ft_sched_mark *start) {
    (void)check_after_s;
    (void)probe;
    (void)start;
    ((spin_call *)p)->deadline = limit_s > 0 ? ft_now_s() + limit_s : 0;
}

static ft_status spin_run(void *p, int reps, double *secs, ft_err *err) {
    spin_call *c = p;
    double t0 = ft_now_s();
    for (int r = 0; r < reps; r++) {
        double s0 = ft_now_s();
        while (c->call_s <= 0 || ft_now_s() - s0 < c->call_s) {
            if (c->deadline > 0 && ft_now_s() > c->deadline)
                return ft_err_set(err, FT_ETIMEDOUT, "stopped");
            if (ft_now_s() - t0 > 10) return ft_err_set(err, FT_EINTERNAL, "never stopped");
        }
    }
    *secs = ft_now_s() - t0;
    return FT_OK;
}

static void test_watchdog_stops_a_call(void) {
    ft_measure_opts o;
    host_opts(&o);
    o.call_limit_s = 0.02;
    spin_call forever = {0, 0};
    ft_timed_fn fn = {.run = spin_run, .ctx = &forever, .host_clock = 1, .watch = spin_watch};
    ft_stats st;
    ft_err err = {0};
    double t0 = ft_now_s();
    FT_CHECK(ft_measure(&fn, &o, &st, &err) == FT_OK, "a stopped call is a result: %s", err.msg);
    FT_CHECK(st.stopped && st.stopped_s >= 0.02 && st.stopped_s < 5 && ft_now_s() - t0 < 5,
             "stopped after %g s", st.stopped_s);
    /* A 1 ms call well inside a 2 s limit (a busy machine can keep it from its CPU for tens
     * of milliseconds, which a 20 ms limit would count against it). */
    spin_call quick = {0, 1e-3};
    fn.ctx = &quick;
    o.call_limit_s = 2;
    FT_CHECK(ft_measure(&fn, &o, &st, &err) == FT_OK, "measure");
    FT_CHECK(!st.stopped && st.samples > 0, "a call inside its limit runs");
}

int main(void) {
    FT_RUN(test_quantiles);
    FT_RUN(test_rank_correlation);
    FT_RUN(test_converges_on_quiet_samples);
    FT_RUN(test_noisy_samples_hit_the_cap);
    FT_RUN(test_sample_cap_converged);
    FT_RUN(test_batches_short_calls);
    FT_RUN(test_batch_after_a_busy_warmup);
    FT_RUN(test_restart_counts_its_own_time);
    FT_RUN(test_screening);
    FT_RUN(test_stop_flag);
    FT_RUN(test_sleep_inside_a_call_is_contaminated);
    FT_RUN(test_waiting_worker_is_contaminated);
    FT_RUN(test_watchdog_stops_a_call);
    FT_RUN(test_judge_sees_a_waiting_worker);
    return ft_test_finish();
}
