/* test_measure.c: the statistics and the stopping rules of measurement, driven by a fake timer
 * whose samples are known exactly. */
#include <math.h>
#include <string.h>

#include "flaretune/measure.h"
#include "flaretune/rng.h"
#include "ft_test.h"

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
} fake;

static ft_status fake_run(void *p, int reps, double *secs, ft_err *err) {
    (void)err;
    fake *f = p;
    double t = 0;
    for (int r = 0; r < reps; r++) t += f->base * (1 + f->noise * (2 * ft_rng_uniform(&f->rng) - 1));
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
    fake f = {.base = 1e-3, .noise = 0.001};
    ft_rng_seed(&f.rng, 1);
    ft_measure_opts o;
    ft_measure_defaults(&o);
    o.warmup_s = 0;
    o.min_time_s = 0;
    ft_timed_fn fn = {.prep = fake_prep, .run = fake_run, .ctx = &f};
    ft_stats st;
    FT_CHECK(ft_measure(&fn, &o, &st, NULL) == FT_OK, "measure");
    FT_CHECK(st.converged && st.samples == o.min_samples, "quiet: stops at the minimum count (%d)",
             st.samples);
    FT_CHECK(fabs(st.median - 1e-3) < 2e-6, "median %g", st.median);
    FT_CHECK(st.batch == 1, "1 ms calls are not batched");
    FT_CHECK(st.taken == st.samples && !st.discarded && !st.unclean,
             "a device clock: every sample taken is kept (%d of %d)", st.samples, st.taken);
    FT_CHECK(f.preps == st.samples + 1 && f.last_sample == st.samples - 1,
             "prep runs before every sample (and the warm-up): %d preps", f.preps);
}

static void test_noisy_samples_hit_the_cap(void) {
    fake f = {.base = 1e-3, .noise = 0.9};
    ft_rng_seed(&f.rng, 2);
    ft_measure_opts o;
    ft_measure_defaults(&o);
    o.warmup_s = 0;
    o.min_time_s = 0;
    o.max_samples = 50;
    o.max_noise = 1e-4;
    ft_timed_fn fn = {.run = fake_run, .ctx = &f};
    ft_stats st;
    FT_CHECK(ft_measure(&fn, &o, &st, NULL) == FT_OK, "measure");
    FT_CHECK(!st.converged && st.samples == 50, "noisy: runs to the cap, not converged (%d)",
             st.samples);
}

static void test_batches_short_calls(void) {
    fake f = {.base = 1e-6, .noise = 0};
    ft_rng_seed(&f.rng, 3);
    ft_measure_opts o;
    ft_measure_defaults(&o);
    o.warmup_s = 0;
    o.min_time_s = 0;
    ft_timed_fn fn = {.run = fake_run, .ctx = &f};
    ft_stats st;
    FT_CHECK(ft_measure(&fn, &o, &st, NULL) == FT_OK, "measure");
    FT_CHECK(st.batch == 100, "1 us calls batched to 100 us samples, got %d", st.batch);
    FT_CHECK(fabs(st.median - 1e-6) < 1e-12, "per-call median %g", st.median);
}

static void test_screening(void) {
    fake f = {.base = 2e-3, .noise = 0.01};
    ft_rng_seed(&f.rng, 4);
    ft_measure_opts o;
    ft_measure_defaults(&o);
    o.warmup_s = 0;
    o.screen_above = 1e-3; /* the best so far is twice as fast */
    ft_timed_fn fn = {.run = fake_run, .ctx = &f};
    ft_stats st;
    FT_CHECK(ft_measure(&fn, &o, &st, NULL) == FT_OK, "measure");
    FT_CHECK(st.screened && st.samples == o.screen_after, "dropped after %d samples: %d %d",
             o.screen_after, st.screened, st.samples);
    o.screen_above = 3e-3; /* competitive: measured fully */
    f.calls = 0;
    FT_CHECK(ft_measure(&fn, &o, &st, NULL) == FT_OK, "measure");
    FT_CHECK(!st.screened && st.samples >= o.min_samples, "a competitive candidate is kept");
}

static void test_stop_flag(void) {
    fake f = {.base = 1e-3, .noise = 0.5};
    ft_rng_seed(&f.rng, 5);
    volatile int stop = 1;
    ft_measure_opts o;
    ft_measure_defaults(&o);
    o.warmup_s = 0;
    o.stop = &stop;
    ft_timed_fn fn = {.run = fake_run, .ctx = &f};
    ft_stats st;
    FT_CHECK(ft_measure(&fn, &o, &st, NULL) == FT_OK, "measure");
    FT_CHECK(st.interrupted && st.samples == 0, "a raised stop flag ends it before sampling");
}

int main(void) {
    FT_RUN(test_quantiles);
    FT_RUN(test_rank_correlation);
    FT_RUN(test_converges_on_quiet_samples);
    FT_RUN(test_noisy_samples_hit_the_cap);
    FT_RUN(test_batches_short_calls);
    FT_RUN(test_screening);
    FT_RUN(test_stop_flag);
    return ft_test_finish();
}
