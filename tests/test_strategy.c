/* test_strategy.c: search strategies (proposals, determinism, their pinned digests, options,
 * resume, rejected candidates, search quality on synthetic landscapes) and the landscape replay
 * (loading event logs). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "op/backend.h"
#include "traces/eventlog.h"
#include "core/json.h"
#include "op/op_json.h"
#include "tuner/replay.h"
#include "tuner/strategies/strategy.h"
#include "ft_problem.h"
#include "ft_test.h"

/* ---- a synthetic space --------------------------------------------------------------------- */

/* Two tile sizes (numeric, powers of two), a named mode and a thread count; a*b <= 2048 cuts
 * holes in the grid as the real constraints do: 58 (a, b) pairs x 3 x 5 = 870 candidates. */
static const char *const mode_labels[] = {"plain", "packed", "fused"};
static ft_param syn_params[] = {
    {"a", "tile a", 8, {1, 2, 4, 8, 16, 32, 64, 128}, NULL, 8, 0},
    {"b", "tile b", 8, {1, 2, 4, 8, 16, 32, 64, 128}, NULL, 8, 0},
    {"mode", "mode", 3, {0, 1, 2}, mode_labels, 0, 0},
    {"threads", "threads", 5, {1, 2, 4, 8, 16}, NULL, 16, 0},
};

static int syn_valid(const ft_call *c, const ft_config *cfg, char *why, size_t n) {
    (void)c;
    if (cfg->v[0] * cfg->v[1] > 2048) {
        snprintf(why, n, "a*b > 2048");
        return 0;
    }
    return 1;
}

static ft_space syn_space = {syn_params, 4, NULL, syn_valid};

#define MAXC 1024
static ft_config cands[MAXC];
static int ncands;

static void make_cands(void) {
    ncands = 0;
    for (int64_t k = 0; k < ft_space_size(&syn_space); k++) {
        ft_config cfg;
        ft_space_config_at(&syn_space, k, &cfg);
        if (ft_space_valid(&syn_space, NULL, &cfg, NULL, 0)) cands[ncands++] = cfg;
    }
}

static int ilog2(int v) {
    int k = 0;
    while (v > 1) {
        v >>= 1;
        k++;
    }
    return k;
}

typedef double (*landscape_fn)(const ft_config *cfg);

/* Time scales with the thread count (with a serial part), as on a real machine. */
static double threads_factor(int t) { return 0.15 + 0.85 / t; }

/* A separable bowl: each parameter has its own best value. Optimum a=16, b=4, packed, 16. */
static double bowl(const ft_config *c) {
    static const double mode[] = {1.3, 1.0, 1.15};
    int ia = ilog2(c->v[0]), ib = ilog2(c->v[1]);
    return (1 + 0.08 * (ia - 4) * (ia - 4) + 0.05 * (ib - 2) * (ib - 2)) * mode[c->v[2]] *
           threads_factor(c->v[3]);
}

/* A plateau with one good corner: a, b and mode change nothing except in the corner of large
 * tiles with mode=fused (6 of the 174 (a, b, mode) points); its best point is a=128, b=16. */
static double plateau(const ft_config *c) {
    int ia = ilog2(c->v[0]), ib = ilog2(c->v[1]);
    double t = 1.0;
    if (ia >= 5 && ib >= 4 && c->v[2] == 2) t = 0.6 - 0.03 * (ia - 5) - 0.02 * (ib - 4);
    return t * threads_factor(c->v[3]);
}

/* Interacting tile sizes: the best b depends on a (a ridge along ia + ib = S(mode)), the best
 * point on the ridge is a = 32. Optimum a=32, b=4, packed, 16. */
static double interact(const ft_config *c) {
    static const int ridge[] = {8, 7, 9};
    static const double mode[] = {1.1, 1.0, 1.05};
    int ia = ilog2(c->v[0]), ib = ilog2(c->v[1]);
    double off = ia + ib - ridge[c->v[2]];
    return (1 + 0.15 * off * off + 0.03 * (ia - 5) * (ia - 5)) * mode[c->v[2]] *
           threads_factor(c->v[3]);
}

/* The bowl with a third of the space rejected (fused needs at least 4 threads; a=128 fails). */
static double bowl_rejects(const ft_config *c) {
    if ((c->v[2] == 2 && c->v[3] < 4) || c->v[0] == 128) return INFINITY;
    return bowl(c);
}

static int argmin(landscape_fn f) {
    int best = 0;
    for (int i = 1; i < ncands; i++)
        if (f(&cands[i]) < f(&cands[best])) best = i;
    return best;
}

/* Run kind (with opts, NULL: ft_strategy_new's defaults) to exhaustion (or `max` proposals, or
 * until candidate `stop` is proposed; -1: never) on f; the sequence in seq, its length returned.
 * Checks every proposal is in range and new. */
static int run_seq_until(ft_strategy_kind kind, uint64_t seed, landscape_fn f, int *seq, int max,
                         const ft_strategy_opts *opts, int stop) {
    ft_strategy *st = opts ? ft_strategy_new_opts(kind, &syn_space, cands, ncands, seed, opts)
                           : ft_strategy_new(kind, &syn_space, cands, ncands, seed);
    FT_CHECK(st != NULL, "ft_strategy_new failed");
    if (!st) return 0;
    static unsigned char seen[MAXC];
    memset(seen, 0, sizeof seen);
    int n = 0, i;
    while (n < max && (i = ft_strategy_next(st)) >= 0) {
        FT_CHECK(i < ncands, "%s proposed %d of %d", ft_strategy_names[kind], i, ncands);
        if (i >= ncands) break;
        FT_CHECK(!seen[i], "%s (seed %llu) proposed %d twice", ft_strategy_names[kind],
                 (unsigned long long)seed, i);
        seen[i] = 1;
        seq[n++] = i;
        if (i == stop) break;
        ft_strategy_report(st, i, f(&cands[i]));
    }
    ft_strategy_free(st);
    return n;
}

static int run_seq_opts(ft_strategy_kind kind, uint64_t seed, landscape_fn f, int *seq, int max,
                        const ft_strategy_opts *opts) {
    return run_seq_until(kind, seed, f, seq, max, opts, -1);
}

static int run_seq(ft_strategy_kind kind, uint64_t seed, landscape_fn f, int *seq, int max) {
    return run_seq_opts(kind, seed, f, seq, max, NULL);
}

/* Evaluations until the exact optimum is proposed. */
static int evals_to_optimum(ft_strategy_kind kind, uint64_t seed, landscape_fn f) {
    static int seq[MAXC];
    int opt = argmin(f), n = run_seq_until(kind, seed, f, seq, MAXC, NULL, opt);
    for (int k = 0; k < n; k++)
        if (seq[k] == opt) return k + 1;
    return MAXC + 1;
}

/* ---- the strategies ------------------------------------------------------------------------ */

static void test_names(void) {
    for (int k = 0; k < FT_STRAT_COUNT; k++)
        FT_CHECK(ft_strategy_parse(ft_strategy_names[k]) == k, "%s", ft_strategy_names[k]);
    FT_CHECK(ft_strategy_names[FT_STRAT_COUNT] == NULL, "names are NULL-terminated");
    FT_CHECK(ft_strategy_parse("bogus") == -1 && ft_strategy_parse(NULL) == -1, "unknown -> -1");
    FT_CHECK(ft_strategy_new(FT_STRAT_RANDOM, &syn_space, cands, 0, 1) == NULL, "no candidates");
}

static void test_space_setup(void) {
    FT_CHECK(ncands == 870, "the synthetic space has %d valid candidates, want 870", ncands);
}

static void test_exhaustive_order(void) {
    static int seq[MAXC];
    int n = run_seq(FT_STRAT_EXHAUSTIVE, 5, bowl, seq, MAXC);
    FT_CHECK(n == ncands, "exhaustive proposed %d of %d", n, ncands);
    for (int k = 0; k < n; k++)
        if (seq[k] != k) {
            FT_CHECK(seq[k] == k, "exhaustive proposal %d is %d: not space order", k, seq[k]);
            break;
        }
}

/* Runs kind (seed) until it proposes nothing more, reporting score(n, i) for its n-th proposal
 * i (NAN: no report). Returns how many proposals; *bad counts those out of range or repeated. */
static int run_to_end(ft_strategy_kind kind, uint64_t seed, double (*score)(int n, int i),
                      int *bad) {
    ft_strategy *st = ft_strategy_new(kind, &syn_space, cands, ncands, seed);
    static unsigned char seen[MAXC];
    memset(seen, 0, sizeof seen);
    int i, n = 0;
    *bad = 0;
    while ((i = ft_strategy_next(st)) >= 0) {
        *bad += i >= ncands || seen[i];
        if (i < ncands) {
            seen[i] = 1;
            double f = score(n, i);
            if (!isnan(f)) ft_strategy_report(st, i, f);
        }
        n++;
    }
    ft_strategy_free(st);
    return n;
}

/* A third of the proposals (the 0th, 3rd, ...) never get their score. */
static double score_unreported(int n, int i) { return n % 3 != 0 ? interact(&cands[i]) : NAN; }

/* Proposals whose score never comes (next() called again) are not proposed again either. */
static void test_unreported(void) {
    for (int k = 0; k < FT_STRAT_COUNT; k++) {
        int dup, n = run_to_end((ft_strategy_kind)k, 3, score_unreported, &dup);
        FT_CHECK(n == ncands && !dup, "%s: %d proposals, %d repeated", ft_strategy_names[k], n,
                 dup);
    }
}

static void test_determinism(void) {
    static int a[MAXC], b[MAXC];
    for (int k = 0; k < FT_STRAT_COUNT; k++) {
        int na = run_seq((ft_strategy_kind)k, 42, interact, a, MAXC);
        int nb = run_seq((ft_strategy_kind)k, 42, interact, b, MAXC);
        FT_CHECK(na == nb && memcmp(a, b, (size_t)na * sizeof *a) == 0,
                 "%s: same seed, same scores, different proposals", ft_strategy_names[k]);
        if (k == FT_STRAT_EXHAUSTIVE) continue;
        na = run_seq((ft_strategy_kind)k, 1, interact, a, 50);
        nb = run_seq((ft_strategy_kind)k, 2, interact, b, 50);
        FT_CHECK(memcmp(a, b, 50 * sizeof *a) != 0, "%s: seeds 1 and 2 propose the same",
                 ft_strategy_names[k]);
    }
}

/* A resumed run: known results reported up front are never proposed and count as knowledge
 * (a guided strategy resumed next to the optimum finds it at once). */
static void test_reported_first(void) {
    int opt = argmin(bowl);
    for (int k = 0; k < FT_STRAT_COUNT; k++) {
        ft_strategy *st = ft_strategy_new((ft_strategy_kind)k, &syn_space, cands, ncands, 7);
        static unsigned char known[MAXC];
        memset(known, 0, sizeof known);
        int nknown = 0;
        for (int i = 0; i < ncands; i++)
            if (i % 3 == 0 && i != opt) {
                ft_strategy_report(st, i, bowl(&cands[i]));
                known[i] = 1;
                nknown++;
            }
        int i, n = 0, bad = 0, found = 0;
        while ((i = ft_strategy_next(st)) >= 0) {
            bad += known[i];
            if (i == opt && !found) found = n + 1;
            /* A result of a candidate not proposed yet arrives mid-run (another worker). */
            if (n == 5) {
                for (int j = ncands - 1; j >= 0; j--)
                    if (!known[j] && j != i && j != opt) {
                        ft_strategy_report(st, j, bowl(&cands[j]));
                        known[j] = 1;
                        nknown++;
                        break;
                    }
            }
            ft_strategy_report(st, i, bowl(&cands[i]));
            n++;
        }
        FT_CHECK(bad == 0, "%s proposed %d candidates reported up front", ft_strategy_names[k],
                 bad);
        FT_CHECK(n == ncands - nknown, "%s: %d proposals, want %d", ft_strategy_names[k], n,
                 ncands - nknown);
        if (k == FT_STRAT_ANNEAL || k == FT_STRAT_EVOLVE)
            FT_CHECK(found <= 40, "%s resumed with two thirds known found the optimum after %d",
                     ft_strategy_names[k], found);
        ft_strategy_free(st);
    }
}

/* Rejected candidates (INFINITY) and scores that are not numbers. */
static void test_rejected(void) {
    /* Everything rejected but one candidate. */
    for (int k = 0; k < FT_STRAT_COUNT; k++) {
        ft_strategy *st = ft_strategy_new((ft_strategy_kind)k, &syn_space, cands, ncands, 9);
        int i, n = 0, one = ncands / 2, at = 0;
        while ((i = ft_strategy_next(st)) >= 0) {
            n++;
            if (i == one) at = n;
            ft_strategy_report(st, i, i == one ? 1.0 : (n % 2 ? INFINITY : NAN));
        }
        FT_CHECK(n == ncands && at > 0, "%s with all but one rejected: %d proposals",
                 ft_strategy_names[k], n);
        ft_strategy_free(st);
    }
    /* A third rejected: the guided strategies still find the optimum (bound as below). */
    for (int k = FT_STRAT_ANNEAL; k <= FT_STRAT_EVOLVE; k++) {
        int worst = 0;
        for (uint64_t seed = 1; seed <= 10; seed++) {
            int e = evals_to_optimum((ft_strategy_kind)k, seed, bowl_rejects);
            if (e > worst) worst = e;
        }
        FT_CHECK(worst <= ncands / 4, "%s with a third rejected: optimum after %d (seeds 1-10)",
                 ft_strategy_names[k], worst);
    }
}

/* One candidate (a space without parameters) and a re-reported score. */
static void test_small(void) {
    ft_space empty = {NULL, 0, NULL, NULL};
    ft_config one = {0};
    for (int k = 0; k < FT_STRAT_COUNT; k++) {
        ft_strategy *st = ft_strategy_new((ft_strategy_kind)k, &empty, &one, 1, 1);
        FT_CHECK(ft_strategy_next(st) == 0, "%s: the only candidate", ft_strategy_names[k]);
        ft_strategy_report(st, 0, 1.0);
        ft_strategy_report(st, 0, 2.0); /* measured again: the new score replaces the old */
        FT_CHECK(ft_strategy_next(st) == -1, "%s: then nothing", ft_strategy_names[k]);
        ft_strategy_report(st, 5, 1.0); /* out of range: ignored */
        ft_strategy_free(st);
    }
}

/* ---- the proposals themselves -------------------------------------------------------------- */

static uint64_t fnv1a(uint64_t h, int v) {
    for (int b = 0; b < 4; b++)
        h = (h ^ (uint64_t)(((unsigned)v >> (8 * b)) & 0xff)) * 0x100000001b3ull;
    return h;
}

/* One run of kind folded into h: the proposals, then -2 and what next() says at the end. mode 0
 * reports every score, 1 withholds every third, 2 reports a third of the candidates up front
 * (a resumed run), 3 measures some again (every 7th proposal at half its score, and at every
 * 11th candidate i - 1 at twice the score of i). */
static uint64_t digest_run(uint64_t h, ft_strategy_kind kind, uint64_t seed, landscape_fn f,
                           int mode) {
    ft_strategy *st = ft_strategy_new(kind, &syn_space, cands, ncands, seed);
    FT_CHECK(st != NULL, "ft_strategy_new failed");
    if (!st) return h;
    static unsigned char seen[MAXC];
    memset(seen, 0, sizeof seen);
    int known = 0;
    if (mode == 2)
        for (int i = 0; i < ncands; i += 3, known++) {
            ft_strategy_report(st, i, f(&cands[i]));
            seen[i] = 1;
        }
    int i, n = 0;
    while ((i = ft_strategy_next(st)) >= 0) {
        FT_CHECK(i < ncands && !seen[i], "%s (seed %llu, mode %d) proposed %d again or past %d",
                 ft_strategy_names[kind], (unsigned long long)seed, mode, i, ncands);
        if (i >= ncands || seen[i]) break;
        seen[i] = 1;
        h = fnv1a(h, i);
        n++;
        if (mode == 1 && n % 3 == 0) continue;
        ft_strategy_report(st, i, f(&cands[i]));
        if (mode == 3 && n % 7 == 0) ft_strategy_report(st, i, 0.5 * f(&cands[i]));
        if (mode == 3 && n % 11 == 0 && i > 0) { /* a candidate not proposed becomes known */
            ft_strategy_report(st, i - 1, 2 * f(&cands[i]));
            known += !seen[i - 1];
            seen[i - 1] = 1;
        }
    }
    FT_CHECK(known + n == ncands && ft_strategy_next(st) == -1,
             "%s (seed %llu, mode %d): %d proposals and %d known of %d, then not -1 for good",
             ft_strategy_names[kind], (unsigned long long)seed, mode, n, known, ncands);
    h = fnv1a(fnv1a(h, -2), ft_strategy_next(st));
    ft_strategy_free(st);
    return h;
}

/* What each strategy proposes for given seeds and scores is pinned: replays (`flaretune replay`,
 * scripts/search-quality.sh) and resumed runs rely on it, and rewriting a strategy must not
 * change it. A deliberate change to what a strategy does changes its digest; the test prints
 * the new one. Every run goes to exhaustion: each candidate is proposed at most once, all of
 * them are (less those reported up front), and then -1 for good. */
static void test_pinned(void) {
    static const uint64_t want[FT_STRAT_COUNT] = {0x04876c30a3fd959bull, 0xf7e344da7290286bull,
                                                  0xe3adeb2efa618b4dull, 0x98161bc375870f45ull,
                                                  0x21ed325a14baaa88ull};
    landscape_fn fs[] = {bowl, plateau, interact, bowl_rejects};
    for (int k = 0; k < FT_STRAT_COUNT; k++) {
        uint64_t h = 0xcbf29ce484222325ull;
        for (int f = 0; f < 4; f++)
            for (uint64_t seed = 1; seed <= 3; seed++)
                h = digest_run(h, (ft_strategy_kind)k, seed, fs[f], 0);
        for (int mode = 1; mode <= 3; mode++)
            h = digest_run(h, (ft_strategy_kind)k, 40 + (uint64_t)mode, fs[mode], mode);
        FT_CHECK(h == want[k], "%s proposes differently: digest 0x%016llxull, want 0x%016llxull",
                 ft_strategy_names[k], (unsigned long long)h, (unsigned long long)want[k]);
    }
}

/* bayes with options `other`: still each candidate once, and other proposals than the
 * defaults' in the first 60. */
static void check_other_bayes(const ft_strategy_opts *other, const char *what) {
    static int x[MAXC], y[MAXC];
    int nx = run_seq(FT_STRAT_BAYES, 42, interact, x, 60);
    int ny = run_seq_opts(FT_STRAT_BAYES, 42, interact, y, MAXC, other);
    FT_CHECK(ny == ncands, "bayes %s: %d proposals of %d", what, ny, ncands);
    FT_CHECK(nx == 60 && memcmp(x, y, 60 * sizeof *x) != 0, "bayes %s: the same proposals",
             what);
}

/* The options: their documented defaults are what ft_strategy_new uses, another value changes
 * the proposals (still each candidate once), a value out of range is refused. */
static void test_options(void) {
    ft_strategy_opts o;
    ft_strategy_opts_default(&o);
    const ft_anneal_opts *a = &o.anneal;
    const ft_evolve_opts *e = &o.evolve;
    FT_CHECK(a->t0 == 0.10 && a->t1 == 0.005 && a->horizon == 0.25 && a->stale == 2 &&
                 a->free_steps == 2 && a->screen == 2 && a->top == 8 && a->restart_draws == 4,
             "anneal's defaults are not the documented ones");
    FT_CHECK(e->pop_min == 4 && e->pop_max == 8 && e->init == 0.5 && e->tournament == 3 &&
                 e->mut == 1.0 && e->step_p == 0.75 && e->screen == 4 && e->tries == 16,
             "evolve's defaults are not the documented ones");
    for (int k = 0; k < 2; k++) {
        const ft_model_opts *m = k ? &e->model : &a->model;
        FT_CHECK(m->min == 2 && m->ridge == 1.0 && m->sweeps == 3,
                 "the model's defaults in %s are not the documented ones", k ? "evolve" : "anneal");
    }
    for (int k = 0; k < FT_STRAT_COUNT; k++)
        FT_CHECK(ft_strategy_summary((ft_strategy_kind)k) != NULL, "%s has no summary",
                 ft_strategy_names[k]);
    FT_CHECK(ft_strategy_summary(FT_STRAT_COUNT) == NULL, "a summary for an unknown kind");

    static int x[MAXC], y[MAXC];
    for (int k = 0; k < FT_STRAT_COUNT; k++) {
        int nx = run_seq((ft_strategy_kind)k, 42, interact, x, MAXC);
        int ny = run_seq_opts((ft_strategy_kind)k, 42, interact, y, MAXC, &o);
        FT_CHECK(nx == ny && memcmp(x, y, (size_t)nx * sizeof *x) == 0,
                 "%s: the default options propose differently from ft_strategy_new",
                 ft_strategy_names[k]);
    }

    ft_strategy_opts other = o;
    other.anneal.screen = 1;
    other.anneal.top = 0;
    other.evolve.screen = 1;
    other.evolve.pop_max = 16;
    for (int k = FT_STRAT_ANNEAL; k <= FT_STRAT_EVOLVE; k++) {
        int nx = run_seq((ft_strategy_kind)k, 42, interact, x, 100);
        int ny = run_seq_opts((ft_strategy_kind)k, 42, interact, y, MAXC, &other);
        FT_CHECK(ny == ncands, "%s with other options: %d proposals of %d", ft_strategy_names[k],
                 ny, ncands);
        FT_CHECK(nx == 100 && memcmp(x, y, 100 * sizeof *x) != 0,
                 "%s: other options, the same proposals", ft_strategy_names[k]);
    }

    const ft_bayes_opts *bo = &o.bayes;
    FT_CHECK(bo->init == 5 && bo->local == 2 && bo->top == 3 && bo->xi == 0.0 &&
                 bo->fit_every == 1 && bo->cost_weight == 0.0 && bo->hamming == 2 &&
                 bo->recent == 96 && bo->train == 128 && bo->explore == 0 && bo->stratified == 5 &&
                 bo->stall == 128,
             "bayes's defaults are not the documented ones");
    /* Options by name, as replay --opt sets them. */
    {
        ft_strategy_opts n = o;
        ft_err err = {0};
        FT_CHECK(ft_strategy_opts_set(&n, "bayes.local=3", &err) == FT_OK && n.bayes.local == 3,
                 "bayes.local=3: %s", err.msg);
        FT_CHECK(ft_strategy_opts_set(&n, "anneal.t0=0.25", &err) == FT_OK && n.anneal.t0 == 0.25,
                 "anneal.t0=0.25: %s", err.msg);
        FT_CHECK(ft_strategy_opts_set(&n, "evolve.model.ridge=2", &err) == FT_OK &&
                     n.evolve.model.ridge == 2.0,
                 "evolve.model.ridge=2: %s", err.msg);
        FT_CHECK(ft_strategy_opts_set(&n, "bayes.local=2.5", &err) == FT_EINVAL &&
                     strstr(err.msg, "integer") && n.bayes.local == 3,
                 "a fractional count was taken: %s", err.msg);
        /* A value outside the option's own range is refused when set, naming it and the range;
         * the option keeps its value. */
        static const char *const out[][2] = {
            {"bayes.init=0", "bayes.init=0: out of range (1 to 1000000000)"},
            {"bayes.init=-3", "bayes.init=-3: out of range (1 to 1000000000)"},
            {"bayes.init=5e9", "bayes.init=5e9: out of range (1 to 1000000000)"},
            {"bayes.top=9", "bayes.top=9: out of range (1 to 8)"},
            {"bayes.cost_weight=1.5", "bayes.cost_weight=1.5: out of range (0 to 1)"},
            {"bayes.xi=-0.1", "bayes.xi=-0.1: out of range (0 or more)"},
            {"anneal.t0=0", "anneal.t0=0: out of range (above 0)"},
            {"evolve.model.ridge=0", "evolve.model.ridge=0: out of range (above 0)"},
            {"anneal.model.sweeps=1025", "anneal.model.sweeps=1025: out of range (0 to 1024)"},
        };
        for (size_t i = 0; i < sizeof out / sizeof out[0]; i++) {
            ft_strategy_opts was = n;
            FT_CHECK(ft_strategy_opts_set(&n, out[i][0], &err) == FT_EINVAL &&
                         strcmp(err.msg, out[i][1]) == 0 && memcmp(&was, &n, sizeof n) == 0,
                     "%s: '%s', want '%s'", out[i][0], err.msg, out[i][1]);
        }
        FT_CHECK(ft_strategy_opts_set(&n, "bayes.top=8", &err) == FT_OK && n.bayes.top == 8 &&
                     ft_strategy_opts_set(&n, "bayes.xi=0", &err) == FT_OK &&
                     ft_strategy_opts_set(&n, "anneal.t0=1e-9", &err) == FT_OK,
                 "a value at the edge of its range was refused: %s", err.msg);
        /* The ranges between options: the defaults keep them; one past another is named with
         * it. */
        ft_strategy_opts d;
        ft_strategy_opts_default(&d);
        FT_CHECK(ft_strategy_opts_check(&d, &err) == FT_OK, "the defaults: %s", err.msg);
        FT_CHECK(ft_strategy_opts_set(&d, "bayes.init=3", &err) == FT_OK &&
                     ft_strategy_opts_check(&d, &err) == FT_EINVAL &&
                     strcmp(err.msg, "bayes.stratified=5 is above bayes.init=3") == 0,
                 "bayes.init=3 with stratified 5: %s", err.msg);
        ft_strategy_opts_default(&d);
        FT_CHECK(ft_strategy_opts_set(&d, "evolve.pop_min=9", &err) == FT_OK &&
                     ft_strategy_opts_check(&d, &err) == FT_EINVAL &&
                     strcmp(err.msg, "evolve.pop_min=9 is above evolve.pop_max=8") == 0,
                 "evolve.pop_min=9: %s", err.msg);
        ft_strategy_opts_default(&d);
        FT_CHECK(ft_strategy_opts_set(&d, "bayes.train=16", &err) == FT_OK &&
                     ft_strategy_opts_check(&d, &err) == FT_EINVAL &&
                     strcmp(err.msg, "bayes.recent=96 is above bayes.train=16") == 0,
                 "bayes.train=16: %s", err.msg);
        /* An unknown option's error lists the options of its strategy, every one of them
         * (the whole table cut off at the message's length, the last bayes ones missing), or,
         * for no strategy's, the strategies that have options. */
        FT_CHECK(ft_strategy_opts_set(&n, "bayes.nope=1", &err) == FT_EINVAL &&
                     strstr(err.msg, "bayes's options: init, ") && strstr(err.msg, "log_scale") &&
                     strstr(err.msg, "recent") && !strstr(err.msg, "anneal"),
                 "an unknown bayes option's error: %s", err.msg);
        FT_CHECK(ft_strategy_opts_set(&n, "nope=1", &err) == FT_EINVAL &&
                     strstr(err.msg, "anneal.NAME, evolve.NAME, bayes.NAME"),
                 "an option of no strategy's: %s", err.msg);
        FT_CHECK(ft_strategy_opts_set(&n, "bayes.local", &err) == FT_EINVAL &&
                     ft_strategy_opts_set(&n, "=3", &err) == FT_EINVAL &&
                     ft_strategy_opts_set(&n, "bayes.xi=", &err) == FT_EINVAL &&
                     ft_strategy_opts_set(&n, "bayes.xi=nan", &err) == FT_EINVAL,
                 "malformed assignments were taken");
    }
    other.bayes.local = 0;
    check_other_bayes(&other, "without local steps");
    /* Crossings every second proposal (with the local steps, every fourth). */
    other = o;
    other.bayes.cross = 2;
    check_other_bayes(&other, "with crossings");

    /* Out-of-range options, each refused by the strategy that reads them: bayes's (cases 0 to
     * 9, 20 to 23), anneal's (10 to 14) and evolve's (15 to 19). */
    ft_strategy_opts bad[24];
    for (int k = 0; k < 24; k++)
        bad[k] = o;
    bad[0].bayes.init = 0;
    bad[1].bayes.top = 9;
    bad[2].bayes.local = -1;
    bad[3].bayes.cost_weight = 2;
    bad[4].bayes.xi = NAN;
    bad[5].bayes.train = 8;
    bad[6].bayes.train = 300;
    bad[7].bayes.recent = bad[7].bayes.train + 1;
    bad[8].bayes.explore = -1;
    bad[9].bayes.hamming = 3;
    bad[10].anneal.t0 = 0;
    bad[11].anneal.horizon = 2;
    bad[12].anneal.screen = 0;
    bad[13].anneal.top = -1;
    bad[14].anneal.model.ridge = 0;
    bad[15].evolve.pop_min = 9;
    bad[16].evolve.tries = 0;
    bad[17].evolve.step_p = 1.5;
    bad[18].evolve.mut = NAN;
    bad[19].evolve.model.min = -1;
    bad[20].bayes.stratified = -1;
    bad[21].bayes.stratified = bad[21].bayes.init + 1;
    bad[22].bayes.cross = -1;
    bad[23].bayes.stall = -1;
    for (int k = 0; k < 24; k++) {
        ft_strategy_kind kind = k < 10 || k >= 20 ? FT_STRAT_BAYES
                                : k < 15 ? FT_STRAT_ANNEAL
                                         : FT_STRAT_EVOLVE;
        ft_strategy *st = ft_strategy_new_opts(kind, &syn_space, cands, ncands, 1, &bad[k]);
        FT_CHECK(st == NULL, "%s accepted out-of-range options (case %d)", ft_strategy_names[kind],
                 k);
        ft_strategy_free(st);
        if (kind == FT_STRAT_BAYES) continue;
        /* The other strategies read none of anneal's and evolve's. */
        st = ft_strategy_new_opts(FT_STRAT_RANDOM, &syn_space, cands, ncands, 1, &bad[k]);
        FT_CHECK(st != NULL, "random refused options it has none of (case %d)", k);
        ft_strategy_free(st);
    }
}

/* bayes.stratified = k: the first k proposals are dealt from each parameter's shuffled values,
 * so within them every value of a parameter comes up as evenly as k allows (the grid's holes are
 * in a and b only, so mode and threads are dealt exactly); farthest draws (0) do not do that. */
static int dealt_evenly(const int *seq, int k) {
    int mode[3] = {0}, threads[5] = {0};
    for (int j = 0; j < k; j++) {
        mode[cands[seq[j]].v[2]]++;
        threads[ilog2(cands[seq[j]].v[3])]++;
    }
    for (int v = 0; v < 3; v++)
        if (mode[v] < k / 3 || mode[v] > (k + 2) / 3) return 0;
    for (int v = 0; v < 5; v++)
        if (threads[v] < k / 5 || threads[v] > (k + 4) / 5) return 0;
    return 1;
}

static void test_stratified(void) {
    ft_strategy_opts o;
    ft_strategy_opts_default(&o);
    o.bayes.init = 8;
    static int seq[MAXC];
    int spread_uneven = 0;
    for (uint64_t seed = 1; seed <= 20; seed++) {
        o.bayes.stratified = 8;
        int n = run_seq_opts(FT_STRAT_BAYES, seed, interact, seq, 8, &o);
        FT_CHECK(n == 8 && dealt_evenly(seq, 8), "seed %llu: 8 dealt proposals are uneven",
                 (unsigned long long)seed);
        /* Five dealt, then farthest draws: the five cover the five thread counts. */
        o.bayes.stratified = 5;
        n = run_seq_opts(FT_STRAT_BAYES, seed, interact, seq, 8, &o);
        FT_CHECK(n == 8 && dealt_evenly(seq, 5), "seed %llu: 5 dealt proposals are uneven",
                 (unsigned long long)seed);
        o.bayes.stratified = 0;
        n = run_seq_opts(FT_STRAT_BAYES, seed, interact, seq, 8, &o);
        spread_uneven += n == 8 && !dealt_evenly(seq, 8);
    }
    FT_CHECK(spread_uneven > 0, "farthest draws dealt evenly on all 20 seeds: the check is void");
}

/* interact with every value distinct, so that "the best known" is one candidate. */
static double interact_distinct(const ft_config *c) {
    return interact(c) * (1 + 1e-9 * (c->v[0] * 131 + c->v[1] * 17 + c->v[2] * 5 + c->v[3]));
}

/* The parameters in which candidates i and j differ. */
static int differing(int i, int j) {
    int d = 0;
    for (int p = 0; p < syn_space.nparams; p++)
        d += cands[i].v[p] != cands[j].v[p];
    return d;
}

/* Local steps with hamming 2, every proposal one, from the best known alone: each is one
 * parameter away from the best while any such candidate is untaken, else two parameters away
 * while any of those is; with hamming 1 the walk leaves the best once its one-parameter
 * neighbours are known. */
static void test_hamming_widens(void) {
    ft_strategy_opts o;
    ft_strategy_opts_default(&o);
    o.bayes.local = 1;
    o.bayes.top = 1;
    for (int hamming = 1; hamming <= 2; hamming++) {
        o.bayes.hamming = hamming;
        int widened = 0, left = 0;
        for (uint64_t seed = 1; seed <= 5; seed++) {
            ft_strategy *st =
                ft_strategy_new_opts(FT_STRAT_BAYES, &syn_space, cands, ncands, seed, &o);
            FT_CHECK(st != NULL, "bayes with hamming %d", hamming);
            if (!st) return;
            static unsigned char taken[MAXC];
            memset(taken, 0, sizeof taken);
            int best = -1, i;
            for (int n = 0; n < 300 && (i = ft_strategy_next(st)) >= 0; n++) {
                if (n >= o.bayes.init && best >= 0) {
                    int want = 0;
                    for (int d = 1; d <= hamming && !want; d++)
                        for (int j = 0; j < ncands && !want; j++)
                            if (!taken[j] && differing(j, best) == d) want = d;
                    if (want) {
                        FT_CHECK(differing(i, best) == want,
                                 "hamming %d, seed %llu, proposal %d: %d parameters from the "
                                 "best, where %d was open",
                                 hamming, (unsigned long long)seed, n + 1, differing(i, best),
                                 want);
                        widened += want == 2;
                    } else {
                        left += differing(i, best) > 1;
                    }
                }
                taken[i] = 1;
                double y = interact_distinct(&cands[i]);
                if (best < 0 || y < interact_distinct(&cands[best])) best = i;
                ft_strategy_report(st, i, y);
            }
            ft_strategy_free(st);
        }
        if (hamming == 2)
            FT_CHECK(widened > 0, "the best's neighbours were never all known: the check is void");
        else
            FT_CHECK(left > 0, "hamming 1 never left the best's neighbourhood");
    }
}

/* bayes.stall = S: the proposals are the same as without it up to the first one made once the
 * best known has gone S results without improving; that one is not a local step. Every proposal
 * is reported at once, so the results known before proposal d are the d before it. */
static void test_stall(void) {
    ft_strategy_opts off, on;
    ft_strategy_opts_default(&off);
    off.bayes.stall = 0;
    on = off;
    on.bayes.stall = 16;
    static int x[MAXC], y[MAXC];
    int diverged = 0;
    for (uint64_t seed = 1; seed <= 5; seed++) {
        int nx = run_seq_opts(FT_STRAT_BAYES, seed, interact, x, 300, &off);
        int ny = run_seq_opts(FT_STRAT_BAYES, seed, interact, y, 300, &on);
        FT_CHECK(nx == 300 && ny == 300, "seed %llu: %d and %d proposals of 300",
                 (unsigned long long)seed, nx, ny);
        int d = 0;
        while (d < nx && d < ny && x[d] == y[d])
            d++;
        if (d == nx || d == ny) continue;
        diverged++;
        int best_at = 0; /* results known when the best so far was found */
        for (int k = 1; k < d; k++)
            if (interact(&cands[x[k]]) < interact(&cands[x[best_at]])) best_at = k;
        FT_CHECK(d - (best_at + 1) >= on.bayes.stall,
                 "seed %llu: proposal %d differs, %d results after the best was found",
                 (unsigned long long)seed, d + 1, d - (best_at + 1));
        FT_CHECK(d % on.bayes.local != 0, "seed %llu: proposal %d, a local step, differs",
                 (unsigned long long)seed, d + 1);
    }
    FT_CHECK(diverged > 0, "the search never stalled for 16 results in 300: the check is void");
}

/* bayes.log_scale: on the synthetic space, whose numeric values double at each step, logs are
 * ranks and the proposals are the same either way; on a space of evenly spaced block sizes
 * (16, 32, ..., 256) whose time is a bowl in their log, the log scale finds the optimum
 * (a = 32) in fewer evaluations over seeds 1-15 than the ranks (printed). */
static ft_param even_params[] = {
    {"a",
     "block size",
     16,
     {16, 32, 48, 64, 80, 96, 112, 128, 144, 160, 176, 192, 208, 224, 240, 256},
     NULL,
     64,
     0},
    {"b", "tile", 4, {1, 2, 3, 4}, NULL, 1, 0},
};
static ft_space even_space = {even_params, 2, NULL, NULL};

static double even_bowl(const ft_config *c) {
    double la = log2(c->v[0]) - 5, db = c->v[1] - 3;
    return (1 + 0.3 * la * la) * (1 + 0.1 * db * db);
}

static void test_log_scale(void) {
    ft_strategy_opts ranks, logs;
    ft_strategy_opts_default(&logs);
    FT_CHECK(logs.bayes.log_scale == 1, "log_scale %d by default", logs.bayes.log_scale);
    ranks = logs;
    ranks.bayes.log_scale = 0;
    static int x[MAXC], y[MAXC];
    for (uint64_t seed = 1; seed <= 3; seed++) {
        int nx = run_seq_opts(FT_STRAT_BAYES, seed, interact, x, 200, &ranks);
        int ny = run_seq_opts(FT_STRAT_BAYES, seed, interact, y, 200, &logs);
        FT_CHECK(nx == ny && memcmp(x, y, (size_t)nx * sizeof x[0]) == 0,
                 "seed %llu: doubling values, the proposals differ", (unsigned long long)seed);
    }
    ft_config ec[64];
    int nec = 0;
    for (int64_t k = 0; k < ft_space_size(&even_space); k++)
        ft_space_config_at(&even_space, k, &ec[nec++]);
    int need[2][15];
    for (int scale = 0; scale < 2; scale++) {
        ft_strategy_opts *o = scale ? &logs : &ranks;
        for (uint64_t seed = 1; seed <= 15; seed++) {
            ft_strategy *st = ft_strategy_new_opts(FT_STRAT_BAYES, &even_space, ec, nec, seed, o);
            FT_CHECK(st != NULL, "bayes on the even space");
            if (!st) return;
            int n = 0, i;
            while ((i = ft_strategy_next(st)) >= 0) {
                n++;
                if (ec[i].v[0] == 32 && ec[i].v[1] == 3) break;
                ft_strategy_report(st, i, even_bowl(&ec[i]));
            }
            need[scale][seed - 1] = n;
            ft_strategy_free(st);
        }
    }
    int sum[2] = {0, 0};
    for (int k = 0; k < 15; k++) {
        sum[0] += need[0][k];
        sum[1] += need[1][k];
    }
    printf("    even block sizes, evaluations to the optimum over 15 seeds: ranks %d, logs %d\n",
           sum[0], sum[1]);
    FT_CHECK(sum[1] < sum[0], "the log scale needed %d evaluations, the ranks %d", sum[1], sum[0]);
}

/* Search quality. Random search needs (n+1)/2 = 435 evaluations on average to propose a unique
 * optimum among the 870 candidates, exhaustive 870 to know it has it. The guided strategies must
 * do it in a median of at most n/8 = 108 evaluations over seeds 1-15 and never need more than
 * n/3 = 290 (the values measured are printed; they are well below). Every run is deterministic
 * for its seed, so the check cannot flake: it changes only when the strategy does. */
static void test_quality(void) {
    struct {
        const char *name;
        landscape_fn f;
    } ls[] = {{"bowl", bowl}, {"plateau", plateau}, {"interact", interact}};
    enum { SEEDS = 15 };
    for (int k = FT_STRAT_ANNEAL; k <= FT_STRAT_BAYES; k++)
        for (size_t l = 0; l < sizeof ls / sizeof ls[0]; l++) {
            int e[SEEDS];
            for (int s = 0; s < SEEDS; s++)
                e[s] = evals_to_optimum((ft_strategy_kind)k, (uint64_t)s + 1, ls[l].f);
            for (int i = 1; i < SEEDS; i++) /* insertion sort */
                for (int j = i; j > 0 && e[j] < e[j - 1]; j--) {
                    int t = e[j];
                    e[j] = e[j - 1];
                    e[j - 1] = t;
                }
            fprintf(stderr, "  %-7s %-9s evaluations to the optimum: median %d, min %d, max %d\n",
                    ft_strategy_names[k], ls[l].name, e[SEEDS / 2], e[0], e[SEEDS - 1]);
            FT_CHECK(e[SEEDS / 2] <= ncands / 8, "%s on %s: median %d > %d", ft_strategy_names[k],
                     ls[l].name, e[SEEDS / 2], ncands / 8);
            FT_CHECK(e[SEEDS - 1] <= ncands / 3, "%s on %s: worst %d > %d", ft_strategy_names[k],
                     ls[l].name, e[SEEDS - 1], ncands / 3);
        }
}

/* ---- replay: landscapes from event logs ---------------------------------------------------- */

static int make_problem(problem *p, const char *opname, const char *preset) {
    return make_problem_min(p, opname, preset, 2);
}

static double fake_score(int i) { return 1e-3 * (1.0 + ((i * 37) % 101) / 50.0); }

/* Append one run of p to log `path`: every candidate but `skip` (-1: none) from `from` to
 * `to`, candidate `reject` rejected; with `pred`, each event carries pred[i] as predicted_s
 * (for an h200). */
static void write_run_predicted(const char *path, const problem *p, const char *run,
                                const char *key, int from, int to, int skip, int reject,
                                const double *pred) {
    ft_err err = {0};
    ft_eventlog *log;
    FT_CHECK(ft_eventlog_open(path, run, &log, &err) == FT_OK, "%s", err.msg);
    json_t *ev = problem_run_start(p, key);
    if (pred) json_object_set_new(ev, "predict", json_pack("{s:s}", "device", "h200"));
    ft_eventlog_write(log, ev, &err);
    for (int i = from; i < to; i++) {
        if (i == skip) continue;
        json_t *cfg = ft_config_to_json(&p->space, &p->cands[i]);
        if (i == reject)
            ev = json_pack("{s:s, s:o, s:i, s:s, s:s}", "event", "rejected", "config", cfg,
                           "candidate", i, "reason", "verify", "message", "mismatch");
        else
            ev = json_pack("{s:s, s:o, s:i, s:{s:f, s:i}}", "event", "measured", "config", cfg,
                           "candidate", i, "stats", "median_s", fake_score(i), "samples", 10);
        if (pred) json_object_set_new(ev, "predicted_s", json_real(pred[i]));
        ft_eventlog_write(log, ev, &err);
        if (i == from) { /* a verified event before the measured one is ignored */
            ev = json_pack("{s:s, s:o, s:i}", "event", "verified", "config",
                           ft_config_to_json(&p->space, &p->cands[i]), "candidate", i);
            ft_eventlog_write(log, ev, &err);
        }
    }
    ev = json_pack("{s:s}", "event", "run_end");
    ft_eventlog_write(log, ev, &err);
    ft_eventlog_close(log);
}

static void write_run(const char *path, const problem *p, const char *run, const char *key,
                      int from, int to, int skip, int reject) {
    write_run_predicted(path, p, run, key, from, to, skip, reject, NULL);
}

static void temp_path(char *buf, size_t n) { temp_file(buf, n, "strategy", ""); }

static void check_landscape(const ft_landscape *l, const problem *p, int reject) {
    FT_CHECK(l->ncands == p->n, "%d candidates, want %d", l->ncands, p->n);
    FT_CHECK(l->op == p->op, "op %s", l->op ? l->op->name : "?");
    FT_CHECK(l->nrejected == (reject >= 0), "%d rejected", l->nrejected);
    int best = -1;
    for (int i = 0; i < p->n && i < l->ncands; i++) {
        FT_CHECK(ft_config_equal(&l->cands[i], &p->cands[i]), "candidate %d differs", i);
        double want = i == reject ? INFINITY : fake_score(i);
        FT_CHECK(l->score[i] == want, "score %d: %g, want %g", i, l->score[i], want);
        if (i != reject && (best < 0 || fake_score(i) < fake_score(best))) best = i;
    }
    FT_CHECK(l->best == best, "optimum %d, want %d", l->best, best);
}

static void test_replay_load(void) {
    problem p, q;
    if (!make_problem(&p, "attention.kvproj", "small.dflare.train") ||
        !make_problem(&q, "loss", "small.dflare.train"))
        return;
    char path[512];
    ft_err err = {0};
    ft_landscape l;

    /* An exhaustive run, with a torn last line as a crash leaves it. */
    temp_path(path, sizeof path);
    write_run(path, &p, "r1", "k1", 0, p.n, -1, 3);
    FILE *f = fopen(path, "a");
    fputs("{\"event\":\"measured\",\"conf", f);
    fclose(f);
    FT_CHECK(ft_landscape_load(path, &l, &err) == FT_OK, "%s", err.msg);
    check_landscape(&l, &p, 3);
    FT_CHECK(l.nruns == 1 && strcmp(l.run, "r1") == 0, "run %s, %d runs", l.run, l.nruns);
    int first = ft_landscape_first_within(&l, 0.05), within = ft_landscape_count_within(&l, 0.05);
    FT_CHECK(first >= 1 && within >= 1, "first within %d, %d within", first, within);
    ft_replay_result r;
    ft_replay_opts o;
    ft_replay_opts_default(&o);
    FT_CHECK(ft_replay_run(&l, &o, &r, &err) == FT_OK, "%s", err.msg);
    FT_CHECK(r.to_target == first, "exhaustive replay reached the target at %d, want %d",
             r.to_target, first);
    o.kind = FT_STRAT_RANDOM;
    o.target = 0;
    o.budget = 2;
    FT_CHECK(ft_replay_run(&l, &o, &r, &err) == FT_OK && r.evaluations <= 2,
             "budget 2: %d evaluations", r.evaluations);
    o.budget = 0;
    o.seed = 3;
    for (int k = 0; k < FT_STRAT_COUNT; k++) {
        o.kind = (ft_strategy_kind)k;
        FT_CHECK(ft_replay_run(&l, &o, &r, &err) == FT_OK, "%s", err.msg);
        FT_CHECK(r.to_target >= 1 && r.best == l.score[l.best], "%s: target 0 reached at %d",
                 ft_strategy_names[k], r.to_target);
    }
    ft_landscape_free(&l);

    /* The last run is of another op: its landscape is the one loaded. */
    unlink(path);
    write_run(path, &p, "r1", "k1", 0, p.n, -1, 3);
    write_run(path, &q, "r2", "k2", 0, q.n, -1, -1);
    FT_CHECK(ft_landscape_load(path, &l, &err) == FT_OK, "%s", err.msg);
    check_landscape(&l, &q, -1);
    ft_landscape_free(&l);

    /* A missing candidate is a clear error. */
    write_run(path, &p, "r3", "k3", 0, p.n, 5, -1);
    FT_CHECK(ft_landscape_load(path, &l, &err) == FT_EFORMAT, "a missing candidate loads");
    FT_CHECK(strstr(err.msg, "neither measured nor rejected") && strstr(err.msg, "candidate 5"),
             "message: %s", err.msg);

    /* A run resumed by another with the same key: both together are exhaustive. */
    write_run(path, &p, "r4", "k4", 0, p.n / 2, -1, -1);
    write_run(path, &p, "r5", "k4", p.n / 2, p.n, -1, -1);
    FT_CHECK(ft_landscape_load(path, &l, &err) == FT_OK, "resumed: %s", err.msg);
    check_landscape(&l, &p, -1);
    FT_CHECK(l.nruns == 2 && strcmp(l.run, "r5") == 0, "run %s, %d runs", l.run, l.nruns);
    ft_landscape_free(&l);

    /* Not a tuning log. */
    f = fopen(path, "w");
    fputs("{\"event\":\"run_end\"}\n", f);
    fclose(f);
    FT_CHECK(ft_landscape_load(path, &l, &err) == FT_EFORMAT && strstr(err.msg, "run_start"),
             "no run_start: %s", err.msg);
    unlink(path);
    FT_CHECK(ft_landscape_load(path, &l, &err) == FT_EIO, "missing file");
}

/* The predicted-time rules on a landscape of 8 worked by hand (ms):
 *
 *   candidate   0    1    2    3    4    5    6     7
 *   score       5    3    8    1    2    9    rej   4      optimum 3, default 0
 *   predicted   4    2    9    1.5  3    8    1     -
 *
 * Predicted order 6 3 1 4 0 5 2 7 reaches the optimum at its 2nd evaluation (space order: 4th).
 * Ranks over 0..5 (6 rejected, 7 unpredicted): predicted 4 2 6 1 3 5, measured 4 3 5 1 2 6,
 * d^2 = 4: rho = 1 - 6 x 4 / (6 x 35) = 31/35. Pruning at factor F keeps predictions <= F (the
 * best is 1), the unpredicted 7 and the default 0: F = 1.4 keeps 6 7 0 (best kept 4 ms: 4x
 * the optimum), 1.5 adds 3 (the optimum), 2 adds 1, 4 adds 4. */
static void test_replay_predicted(void) {
    double score[8] = {5e-3, 3e-3, 8e-3, 1e-3, 2e-3, 9e-3, INFINITY, 4e-3};
    double pred[8] = {4e-3, 2e-3, 9e-3, 1.5e-3, 3e-3, 8e-3, 1e-3, NAN};
    ft_landscape l;
    memset(&l, 0, sizeof l);
    l.ncands = 8;
    l.score = score;
    l.predicted = pred;
    l.npredicted = 7;
    l.best = 3;
    l.def = 0;
    int order[8], want[8] = {6, 3, 1, 4, 0, 5, 2, 7};
    ft_predicted_order(pred, 8, order);
    FT_CHECK(memcmp(order, want, sizeof want) == 0, "order %d %d %d %d %d %d %d %d", order[0],
             order[1], order[2], order[3], order[4], order[5], order[6], order[7]);
    FT_CHECK(ft_landscape_first_within_predicted(&l, 0.05) == 2, "predicted order: %d",
             ft_landscape_first_within_predicted(&l, 0.05));
    FT_CHECK(ft_landscape_first_within(&l, 0.05) == 4, "space order: %d",
             ft_landscape_first_within(&l, 0.05));
    /* Within 100% (2 ms): candidate 3 still comes first; within 300% (4 ms) too. */
    FT_CHECK(ft_landscape_first_within_predicted(&l, 3.0) == 2, "target 300%%");
    int n = 0;
    FT_CHECK_NEAR(ft_landscape_rank_correlation(&l, &n), 31.0 / 35.0, 1e-12);
    FT_CHECK(n == 6, "compared %d", n);
    const struct {
        double f;
        int kept, best_kept, within;
        double ratio;
    } cases[] = {{1.4, 3, 0, 0, 4}, {1.5, 4, 1, 1, 1}, {2, 5, 1, 1, 1}, {4, 6, 1, 1, 1}};
    for (int k = 0; k < 4; k++) {
        ft_prune_outcome o;
        ft_landscape_prune(&l, cases[k].f, 0.05, &o);
        FT_CHECK(o.kept == cases[k].kept && o.best_kept == cases[k].best_kept &&
                     o.within_kept == cases[k].within && o.factor == cases[k].f,
                 "factor %g: kept %d, optimum %d, within %d", cases[k].f, o.kept, o.best_kept,
                 o.within_kept);
        FT_CHECK_NEAR(o.best_kept_ratio, cases[k].ratio, 1e-12);
    }
    /* Within 300% of the optimum, candidate 0 (5 ms) is too slow, 7 (4 ms) is in: 1.4 keeps
     * one within. */
    ft_prune_outcome o;
    ft_landscape_prune(&l, 1.4, 3.0, &o);
    FT_CHECK(o.within_kept == 1 && o.best_kept == 0, "target 300%%: within %d", o.within_kept);
    /* Nothing predicted: nothing to order by or prune. */
    double none[8];
    for (int i = 0; i < 8; i++)
        none[i] = NAN;
    l.predicted = none;
    l.npredicted = 0;
    unsigned char keep[8];
    FT_CHECK(ft_predicted_prune(none, 8, 1.5, -1, keep) == 8, "no predictions keep all");
    FT_CHECK(ft_landscape_first_within_predicted(&l, 0.05) == -1, "no predicted order");
    FT_CHECK(isnan(ft_landscape_rank_correlation(&l, &n)) && n == 0, "no correlation");
}

/* A log whose events carry predicted_s: the landscape has them, the device and the default. */
static void test_replay_load_predicted(void) {
    problem p;
    if (!make_problem(&p, "attention.kvproj", "small.dflare.train")) return;
    double *pred = malloc(sizeof *pred * (size_t)p.n);
    for (int i = 0; i < p.n; i++)
        pred[i] = fake_score((i + 1) % p.n); /* off by one: a poor predictor */
    char path[512];
    ft_err err = {0};
    ft_landscape l;
    temp_path(path, sizeof path);
    write_run_predicted(path, &p, "r1", "k1", 0, p.n, -1, 3, pred);
    FT_CHECK(ft_landscape_load(path, &l, &err) == FT_OK, "%s", err.msg);
    FT_CHECK(l.npredicted == p.n && strcmp(l.predict_device, "h200") == 0, "%d predicted for %s",
             l.npredicted, l.predict_device);
    int same = 1;
    for (int i = 0; i < p.n && i < l.ncands; i++)
        same &= l.predicted[i] == pred[i];
    FT_CHECK(same, "each candidate's prediction");
    ft_config def;
    ft_config_default(&p.space, &def);
    FT_CHECK(l.def >= 0 && ft_config_equal(&l.cands[l.def], &def), "default at %d", l.def);
    ft_landscape_free(&l);
    /* Without predictions: none, and no device. */
    unlink(path);
    write_run(path, &p, "r2", "k2", 0, p.n, -1, -1);
    FT_CHECK(ft_landscape_load(path, &l, &err) == FT_OK, "%s", err.msg);
    FT_CHECK(l.npredicted == 0 && l.predict_device[0] == 0 && isnan(l.predicted[0]),
             "no predictions");
    ft_landscape_free(&l);
    unlink(path);
    free(pred);
}


/* ---- batches, warm starts, costs, convergence ----------------------------------------------- */

/* A batch of k: k distinct candidates never proposed before (fewer only at the end), for every
 * strategy; results reported in reverse order; over the run each candidate exactly once. The
 * same seed gives the same batches (checked at k = 4; k = 1 is next() itself, covered above). */
static void test_batches(void) {
    static const int ks[] = {4, 16};
    for (int k = 0; k < FT_STRAT_COUNT; k++)
        for (size_t b = 0; b < sizeof ks / sizeof ks[0]; b++) {
            uint64_t digest[2] = {0xcbf29ce484222325ull, 0xcbf29ce484222325ull};
            int reps = ks[b] == 4 ? 2 : 1;
            for (int rep = 0; rep < reps; rep++) {
                ft_strategy *st = ft_strategy_new((ft_strategy_kind)k, &syn_space, cands, ncands, 9);
                static unsigned char seen[MAXC];
                memset(seen, 0, sizeof seen);
                int out[16], total = 0, short_batches = 0, bad = 0, n;
                while ((n = ft_strategy_next_batch(st, ks[b], out)) > 0) {
                    if (n < ks[b]) short_batches++;
                    for (int j = 0; j < n; j++) {
                        bad += out[j] < 0 || out[j] >= ncands || seen[out[j]];
                        if (out[j] >= 0 && out[j] < ncands) seen[out[j]] = 1;
                        digest[rep] = fnv1a(digest[rep], out[j]);
                    }
                    for (int j = n; j-- > 0;)
                        ft_strategy_report(st, out[j], interact(&cands[out[j]]));
                    total += n;
                }
                FT_CHECK(bad == 0 && total == ncands, "%s k=%d: %d proposals of %d, %d bad",
                         ft_strategy_names[k], ks[b], total, ncands, bad);
                FT_CHECK(short_batches <= 1, "%s k=%d: %d short batches before the end",
                         ft_strategy_names[k], ks[b], short_batches);
                ft_strategy_free(st);
            }
            FT_CHECK(reps == 1 || digest[0] == digest[1], "%s k=%d: same seed, different batches",
                     ft_strategy_names[k], ks[b]);
        }
    /* bayes: a batch begins with the pick next() would make from the same results. */
    int a[8], q[8];
    ft_strategy *s1 = ft_strategy_new(FT_STRAT_BAYES, &syn_space, cands, ncands, 3);
    ft_strategy *s2 = ft_strategy_new(FT_STRAT_BAYES, &syn_space, cands, ncands, 3);
    for (int i = 0; i < 6; i++) { /* the same spread start and results for both */
        int c1 = ft_strategy_next(s1), c2 = ft_strategy_next(s2);
        FT_CHECK(c1 == c2, "bayes: same seed, different start");
        ft_strategy_report(s1, c1, interact(&cands[c1]));
        ft_strategy_report(s2, c2, interact(&cands[c2]));
    }
    FT_CHECK(ft_strategy_next_batch(s1, 8, a) == 8, "bayes: a batch of 8");
    for (int j = 0; j < 8; j++)
        q[j] = ft_strategy_next(s2);
    FT_CHECK(a[0] == q[0], "bayes: a batch starts with the sequential pick");
    ft_strategy_free(s1);
    ft_strategy_free(s2);
}

/* Warm start: `first` is proposed first, in order, skipping known ones; bad indices are refused;
 * a prior equal to the landscape itself (another shape with the same ranking) takes bayes to
 * the optimum within a few evaluations for every seed, where cold it needs more. */
static void test_warm(void) {
    int opt = argmin(interact);
    for (int k = 0; k < FT_STRAT_COUNT; k++) {
        ft_strategy *st = ft_strategy_new((ft_strategy_kind)k, &syn_space, cands, ncands, 5);
        int first[3] = {7, 3, 11}, badf[1] = {ncands};
        FT_CHECK(ft_strategy_warm(st, badf, 1, NULL) == -1, "%s: warm index out of range accepted",
                 ft_strategy_names[k]);
        FT_CHECK(ft_strategy_warm(st, first, 3, NULL) == 0, "%s: warm refused",
                 ft_strategy_names[k]);
        ft_strategy_report(st, 3, 1.0); /* known already: skipped */
        FT_CHECK(ft_strategy_next(st) == 7 && ft_strategy_next(st) == 11,
                 "%s: warm candidates not proposed first, in order", ft_strategy_names[k]);
        ft_strategy_free(st);
    }
    static double prior[MAXC];
    for (int i = 0; i < ncands; i++)
        prior[i] = 3.0 * interact(&cands[i]); /* another shape: slower, the same ranking */
    int warm_worst = 0, cold_sum = 0, warm_sum = 0;
    for (uint64_t seed = 1; seed <= 10; seed++) {
        for (int w = 0; w < 2; w++) {
            ft_strategy *st = ft_strategy_new(FT_STRAT_BAYES, &syn_space, cands, ncands, seed);
            if (w) ft_strategy_warm(st, NULL, 0, prior);
            int n = 0, i;
            while ((i = ft_strategy_next(st)) >= 0) {
                n++;
                ft_strategy_report(st, i, interact(&cands[i]));
                if (i == opt) break;
            }
            if (w) {
                warm_sum += n;
                if (n > warm_worst) warm_worst = n;
            } else {
                cold_sum += n;
            }
            ft_strategy_free(st);
        }
    }
    printf("  bayes interact  evaluations to the optimum over 10 seeds: cold %d, warm (a prior "
           "with its ranking) %d, warm worst %d\n",
           cold_sum, warm_sum, warm_worst);
    FT_CHECK(warm_worst <= 3, "bayes with a perfect prior needed %d evaluations", warm_worst);
    FT_CHECK(warm_sum < cold_sum, "the prior did not help: warm %d, cold %d", warm_sum, cold_sum);
}

/* Scores no measurement gives, in turn: 0, negative, huge, then twice the landscape's own. */
static double score_odd(int n, int i) {
    return n % 5 == 0 ? 0.0 : n % 5 == 1 ? -1.0 : n % 5 == 2 ? 1e300 : interact(&cands[i]);
}

/* Convergence: never before the best has stood `patience` evaluations and as long as it took to
 * find it; never for a strategy without a model; and on a landscape where one candidate is 10x
 * faster than all the others (which are equal), bayes converges once it has it. */
static void test_converged(void) {
    for (int k = 0; k < FT_STRAT_COUNT; k++) {
        ft_strategy *st = ft_strategy_new((ft_strategy_kind)k, &syn_space, cands, ncands, 2);
        int i, n = 0, best_at = 0, early = 0, conv_at = -1;
        double best = INFINITY;
        while ((i = ft_strategy_next(st)) >= 0) {
            n++;
            double f = interact(&cands[i]);
            ft_strategy_report(st, i, f);
            if (f < best) {
                best = f;
                best_at = n;
            }
            if (ft_strategy_converged(st, 0.01, 10)) {
                early += n - best_at < 10 || n - best_at < best_at;
                if (conv_at < 0) conv_at = n;
            }
        }
        FT_CHECK(early == 0, "%s converged before its patience ran out", ft_strategy_names[k]);
        if (k == FT_STRAT_BAYES)
            FT_CHECK(conv_at > 0 && conv_at < ncands, "bayes never converged (at %d of %d)",
                     conv_at, ncands);
        else
            FT_CHECK(conv_at < 0, "%s has no model yet converged", ft_strategy_names[k]);
        FT_CHECK(!ft_strategy_converged(st, 0.01, 10), "%s: converged with nothing left",
                 ft_strategy_names[k]);
        ft_strategy_free(st);
    }
    /* scores no measurement gives (0, negative, huge) do not break a model: each candidate is
     * still proposed exactly once */
    for (int k = 0; k < FT_STRAT_COUNT; k++) {
        int bad, n = run_to_end((ft_strategy_kind)k, 6, score_odd, &bad);
        FT_CHECK(bad == 0 && n == ncands, "%s with odd scores: %d proposals of %d, %d bad",
                 ft_strategy_names[k], n, ncands, bad);
    }
    /* costs are taken (and bad ones ignored) by every strategy without changing a proposal
     * when it does not weigh them */
    for (int k = 0; k < FT_STRAT_COUNT; k++) {
        ft_strategy *a = ft_strategy_new((ft_strategy_kind)k, &syn_space, cands, ncands, 4);
        ft_strategy *b = ft_strategy_new((ft_strategy_kind)k, &syn_space, cands, ncands, 4);
        int diff = 0;
        for (int n = 0; n < 40; n++) {
            int i = ft_strategy_next(a), j = ft_strategy_next(b);
            diff += i != j;
            if (i < 0 || j < 0) break;
            ft_strategy_report_cost(a, i, 0.1 * (n + 1));
            ft_strategy_report_cost(a, i, NAN);
            ft_strategy_report_cost(a, -1, 1);
            ft_strategy_report(a, i, interact(&cands[i]));
            ft_strategy_report(b, j, interact(&cands[j]));
        }
        FT_CHECK(diff == 0, "%s: costs changed proposals with cost_weight 0",
                 ft_strategy_names[k]);
        ft_strategy_free(a);
        ft_strategy_free(b);
    }
}

int main(void) {
    make_cands();
    FT_RUN(test_space_setup);
    FT_RUN(test_names);
    FT_RUN(test_exhaustive_order);
    FT_RUN(test_unreported);
    FT_RUN(test_determinism);
    FT_RUN(test_reported_first);
    FT_RUN(test_rejected);
    FT_RUN(test_small);
    FT_RUN(test_pinned);
    FT_RUN(test_options);
    FT_RUN(test_stratified);
    FT_RUN(test_hamming_widens);
    FT_RUN(test_stall);
    FT_RUN(test_log_scale);
    FT_RUN(test_quality);
    FT_RUN(test_batches);
    FT_RUN(test_warm);
    FT_RUN(test_converged);
    FT_RUN(test_replay_load);
    FT_RUN(test_replay_predicted);
    FT_RUN(test_replay_load_predicted);
    return ft_test_finish();
}
