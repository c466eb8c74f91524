/* strategy.c: search strategies over the valid configurations of a space
 * (see tuner/strategies/strategy.h): the registry of strategies, the public entry points and
 * the bookkeeping every strategy shares (what is known, proposed, the best).
 *
 * Each strategy lives in its own file as a table of functions (strategy_impl.h): exhaustive.c,
 * random.c, anneal.c and evolve.c. All of them see the candidates as points of a grid (grid.c);
 * the two guided ones screen their draws with a score model (model.c).
 *
 * Kernel landscapes, as recorded on real machines, look like this: one or two parameters
 * (the thread count, the fusion strategy, the GEMM path) move the time by integer factors, a
 * few tile sizes move it by tens of percent and interact (the best tile depends on the thread
 * count), the rest are plateaus where nothing changes within the noise, and the noise itself
 * (a busy core, a descheduled thread) makes a few candidates look far worse than they are. Small
 * CPU spaces have ~100 candidates and a single one within 5% of the optimum. The two guided
 * strategies are built for that shape: anneal walks one-parameter steps and restarts next to
 * the best few known; evolve breeds the best known and snaps children to valid candidates.
 *
 * The defaults of their options (each set and explained in the strategy's file) were chosen by
 * replaying recorded exhaustive landscapes of the cpu backend (`flaretune replay`: decode, train
 * attention, K/V projection, fusion and loss, recorded on a shared 2-core machine) and checked
 * on synthetic ones (tests/test_strategy.c and generated kernel-like landscapes of 50 to 20000
 * candidates), median evaluations to within 5% of the optimum over 100 seeds: anneal 19% of the
 * candidates on the recorded ones and 5% on the synthetic ones, evolve 23% and 5%, random 35%
 * and 24%.
 */
#include "tuner/strategies/strategy.h"

#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "strategy_impl.h"

const char *const ft_strategy_names[] = {"exhaustive", "random", "anneal", "evolve", "bayes",
                                         NULL};

/* By kind; each names itself as ft_strategy_names does. */
static const ft_strategy_type *const types[FT_STRAT_COUNT] = {
    [FT_STRAT_EXHAUSTIVE] = &ft_strategy_exhaustive,
    [FT_STRAT_RANDOM] = &ft_strategy_random,
    [FT_STRAT_ANNEAL] = &ft_strategy_anneal,
    [FT_STRAT_EVOLVE] = &ft_strategy_evolve,
    [FT_STRAT_BAYES] = &ft_strategy_bayes,
};

int ft_strategy_parse(const char *name) {
    for (int i = 0; name && ft_strategy_names[i]; i++)
        if (strcmp(name, ft_strategy_names[i]) == 0) return i;
    return -1;
}

const char *ft_strategy_summary(ft_strategy_kind kind) {
    return (int)kind >= 0 && kind < FT_STRAT_COUNT ? types[kind]->summary : NULL;
}

void ft_strategy_opts_default(ft_strategy_opts *o) {
    memset(o, 0, sizeof *o);
    for (int k = 0; k < FT_STRAT_COUNT; k++)
        if (types[k]->defaults)
            memcpy((char *)o + types[k]->opts_offset, types[k]->defaults, types[k]->opts_size);
}

/* Every option by its name on the command line: strategy.option (model options of anneal and
 * evolve as strategy.model.option), with the range each takes alone: lo to hi, above lo when
 * open, as the strategy's init checks it (those between options, such as bayes.recent <=
 * bayes.train or evolve.pop_min <= pop_max, are ft_strategy_opts_check's, and init's). A count
 * without an upper bound of its own takes at most COUNT_MAX. */
#define COUNT_MAX 1e9
#define OPT_I(st, f, lo, hi)                                                                       \
    { #st "." #f, offsetof(ft_strategy_opts, st.f), 0, lo, hi, 0 }
#define OPT_D(st, f, lo, hi, open)                                                                 \
    { #st "." #f, offsetof(ft_strategy_opts, st.f), 1, lo, hi, open }
#define OPT_MI(st, f, lo, hi)                                                                      \
    { #st ".model." #f, offsetof(ft_strategy_opts, st.model.f), 0, lo, hi, 0 }
#define OPT_MD(st, f, lo, hi, open)                                                                \
    { #st ".model." #f, offsetof(ft_strategy_opts, st.model.f), 1, lo, hi, open }
static const struct {
    const char *name;
    size_t offset;
    int real;
    double lo, hi;
    int lo_open; /* 1: above lo, not lo itself */
} option_table[] = {
    OPT_D(anneal, t0, 0, INFINITY, 1),
    OPT_D(anneal, t1, 0, INFINITY, 1),
    OPT_D(anneal, horizon, 0, 1, 0),
    OPT_I(anneal, stale, 0, 1 << 20),
    OPT_I(anneal, free_steps, 0, 1 << 20),
    OPT_I(anneal, screen, 1, 1 << 20),
    OPT_I(anneal, top, 0, 1 << 16),
    OPT_I(anneal, restart_draws, 1, 1 << 20),
    OPT_MI(anneal, min, 0, 1 << 20),
    OPT_MD(anneal, ridge, 0, INFINITY, 1),
    OPT_MI(anneal, sweeps, 0, 1 << 10),
    OPT_I(evolve, pop_min, 1, 1 << 16),
    OPT_I(evolve, pop_max, 1, 1 << 16),
    OPT_D(evolve, init, 0, 1, 0),
    OPT_I(evolve, tournament, 1, 1 << 20),
    OPT_D(evolve, mut, 0, 1 << 20, 0),
    OPT_D(evolve, step_p, 0, 1, 0),
    OPT_I(evolve, screen, 1, 1 << 20),
    OPT_I(evolve, tries, 1, 1 << 20),
    OPT_MI(evolve, min, 0, 1 << 20),
    OPT_MD(evolve, ridge, 0, INFINITY, 1),
    OPT_MI(evolve, sweeps, 0, 1 << 10),
    OPT_I(bayes, init, 1, COUNT_MAX),
    OPT_I(bayes, local, 0, COUNT_MAX),
    OPT_I(bayes, top, 1, 8),
    OPT_D(bayes, xi, 0, INFINITY, 0),
    OPT_I(bayes, fit_every, 1, COUNT_MAX),
    OPT_D(bayes, cost_weight, 0, 1, 0),
    OPT_I(bayes, hamming, 0, 2),
    OPT_I(bayes, recent, 0, 256),
    OPT_I(bayes, train, 16, 256),
    OPT_I(bayes, explore, 0, COUNT_MAX),
    OPT_I(bayes, stratified, 0, COUNT_MAX),
    OPT_I(bayes, cross, 0, COUNT_MAX),
    OPT_I(bayes, stall, 0, COUNT_MAX),
    OPT_I(bayes, log_scale, 0, 1),
};

ft_status ft_strategy_opts_set(ft_strategy_opts *o, const char *assignment, ft_err *err) {
    const char *eq = assignment ? strchr(assignment, '=') : NULL;
    if (!eq || eq == assignment)
        return ft_err_set(err, FT_EINVAL, "strategy option '%s' is not NAME=VALUE",
                          assignment ? assignment : "");
    size_t len = (size_t)(eq - assignment);
    for (size_t i = 0; i < sizeof option_table / sizeof option_table[0]; i++) {
        if (strlen(option_table[i].name) != len ||
            strncmp(option_table[i].name, assignment, len) != 0)
            continue;
        char *end;
        errno = 0;
        double v = strtod(eq + 1, &end);
        if (end == eq + 1 || *end || errno || !isfinite(v) ||
            (!option_table[i].real && v != floor(v)))
            return ft_err_set(err, FT_EINVAL, "strategy option %s wants %s, got '%s'",
                              option_table[i].name, option_table[i].real ? "a number" : "an integer",
                              eq + 1);
        double lo = option_table[i].lo, hi = option_table[i].hi;
        if (v < lo || (v == lo && option_table[i].lo_open) || v > hi) {
            char range[64];
            if (option_table[i].lo_open)
                snprintf(range, sizeof range, "above %g", lo);
            else if (hi == INFINITY)
                snprintf(range, sizeof range, "%g or more", lo);
            else
                snprintf(range, sizeof range, "%.10g to %.10g", lo, hi);
            return ft_err_set(err, FT_EINVAL, "%s: out of range (%s)", assignment, range);
        }
        char *field = (char *)o + option_table[i].offset;
        if (option_table[i].real)
            memcpy(field, &v, sizeof v);
        else
            *(int *)(void *)field = (int)v;
        return FT_OK;
    }
    /* The options of the strategy it names (all of them would not fit one message), else the
     * strategies that have options. */
    const size_t dot = strcspn(assignment, ".");
    char names[FT_ERR_MSG_LEN] = "";
    int listed = 0;
    for (size_t i = 0; i < sizeof option_table / sizeof option_table[0]; i++) {
        const char *n = option_table[i].name;
        if (dot < len && strncmp(n, assignment, dot + 1) == 0) {
            size_t at = strlen(names);
            snprintf(names + at, sizeof names - at, "%s%s", listed++ ? ", " : "", n + dot + 1);
        }
    }
    if (listed)
        return ft_err_set(err, FT_EINVAL, "unknown strategy option '%.*s' (%.*s's options: %s)",
                          (int)len, assignment, (int)dot, assignment, names);
    for (size_t i = 0; i < sizeof option_table / sizeof option_table[0]; i++) {
        const char *n = option_table[i].name;
        const size_t k = strcspn(n, ".");
        if (i == 0 || strncmp(n, option_table[i - 1].name, k + 1) != 0) {
            size_t at = strlen(names);
            snprintf(names + at, sizeof names - at, "%s%.*s.NAME", listed++ ? ", " : "", (int)k, n);
        }
    }
    return ft_err_set(err, FT_EINVAL, "unknown strategy option '%.*s' (options: %s)", (int)len,
                      assignment, names);
}

ft_status ft_strategy_opts_check(const ft_strategy_opts *o, ft_err *err) {
    if (o->evolve.pop_min > o->evolve.pop_max)
        return ft_err_set(err, FT_EINVAL, "evolve.pop_min=%d is above evolve.pop_max=%d",
                          o->evolve.pop_min, o->evolve.pop_max);
    if (o->bayes.recent > o->bayes.train)
        return ft_err_set(err, FT_EINVAL, "bayes.recent=%d is above bayes.train=%d",
                          o->bayes.recent, o->bayes.train);
    if (o->bayes.stratified > o->bayes.init)
        return ft_err_set(err, FT_EINVAL, "bayes.stratified=%d is above bayes.init=%d",
                          o->bayes.stratified, o->bayes.init);
    return FT_OK;
}

ft_strategy *ft_strategy_new_opts(ft_strategy_kind kind, const ft_space *s, const ft_config *cands,
                                  int ncands, uint64_t seed, const ft_strategy_opts *opts) {
    if (ncands < 1 || (int)kind < 0 || kind >= FT_STRAT_COUNT) return NULL;
    const ft_strategy_type *type = types[kind];
    ft_strategy *st = calloc(1, sizeof *st);
    if (!st) return NULL;
    st->type = type;
    if (ft_grid_build(st, s, cands, ncands)) {
        ft_strategy_free(st);
        return NULL;
    }
    ft_rng_seed(&st->rng, seed);
    st->best = -1;
    if (!(st->cost = malloc((size_t)ncands * sizeof *st->cost))) {
        ft_strategy_free(st);
        return NULL;
    }
    for (int c = 0; c < ncands; c++)
        st->cost[c] = NAN;
    const void *o =
        opts && type->defaults ? (const char *)opts + type->opts_offset : type->defaults;
    if (type->init(st, o)) {
        ft_strategy_free(st);
        return NULL;
    }
    return st;
}

ft_strategy *ft_strategy_new(ft_strategy_kind kind, const ft_space *s, const ft_config *cands,
                             int ncands, uint64_t seed) {
    return ft_strategy_new_opts(kind, s, cands, ncands, seed, NULL);
}

/* The next warm-start candidate not yet taken, proposed; -1 when they are spent. */
static int next_warm(ft_strategy *st) {
    return ft_grid_propose_next(st, st->warm, st->nwarm, &st->warm_at);
}

int ft_strategy_next(ft_strategy *st) {
    if (!st || st->ntaken >= st->nc) return -1;
    int c = next_warm(st);
    return c >= 0 ? c : st->type->next(st);
}

int ft_strategy_next_batch(ft_strategy *st, int k, int *out) {
    if (!st || k < 1 || !out) return 0;
    int n = 0;
    while (n < k && st->ntaken < st->nc) {
        int c = next_warm(st);
        if (c < 0) break;
        out[n++] = c;
    }
    if (n < k && st->ntaken < st->nc && st->type->batch) return n + st->type->batch(st, k - n, out + n);
    while (n < k && st->ntaken < st->nc) {
        int c = st->type->next(st);
        if (c < 0) break;
        out[n++] = c;
    }
    return n;
}

int ft_strategy_warm(ft_strategy *st, const int *first, int nfirst, const double *prior) {
    if (!st || nfirst < 0 || (nfirst > 0 && !first)) return -1;
    for (int j = 0; j < nfirst; j++)
        if (first[j] < 0 || first[j] >= st->nc) return -1;
    if (nfirst) {
        int *w = realloc(st->warm, (size_t)(st->nwarm + nfirst) * sizeof *w);
        if (!w) return -1;
        memcpy(w + st->nwarm, first, (size_t)nfirst * sizeof *w);
        st->warm = w;
        st->nwarm += nfirst;
    }
    if (prior) {
        if (!st->prior && !(st->prior = malloc((size_t)st->nc * sizeof *st->prior))) return -1;
        memcpy(st->prior, prior, (size_t)st->nc * sizeof *st->prior);
        st->model_n = -1;
    }
    return 0;
}

void ft_strategy_report_cost(ft_strategy *st, int i, double cost_s) {
    if (!st || i < 0 || i >= st->nc || !(cost_s >= 0) || !isfinite(cost_s)) return;
    st->cost[i] = cost_s;
}

int ft_strategy_converged(ft_strategy *st, double rel, int patience) {
    if (!st || st->ntaken >= st->nc) return 0;
    int since = st->nknown - st->best_at;
    if (st->best < 0 || since < patience || since < st->best_at || st->warm_at < st->nwarm ||
        !st->type->expected_gain)
        return 0;
    double g = st->type->expected_gain(st);
    return g >= 0 && g < rel;
}

static double clean(double s) { return isnan(s) ? INFINITY : s; }

void ft_strategy_report(ft_strategy *st, int i, double score) {
    if (!st || i < 0 || i >= st->nc) return;
    score = clean(score);
    int again = st->known[i];
    st->score[i] = score;
    if (!again) {
        st->known[i] = 1;
        st->nknown++;
    }
    if (!st->taken[i]) {
        st->taken[i] = 1;
        st->ntaken++;
    }
    if (again) {
        /* A score measured again may change any ranking: rebuild what depends on them. */
        st->nfin = 0;
        st->model_n = -1;
        for (int c = 0; c < st->nc; c++)
            if (st->known[c] && st->score[c] < INFINITY) st->fin[st->nfin++] = c;
        int was = st->best;
        st->best = -1;
        for (int c = 0; c < st->nc; c++)
            if (st->known[c] && (st->best < 0 || st->score[c] < st->score[st->best])) st->best = c;
        if (st->best != was) st->best_at = st->nknown;
    } else {
        if (score < INFINITY) st->fin[st->nfin++] = i;
        if (st->best < 0 || score < st->score[st->best]) {
            st->best = i;
            st->best_at = st->nknown;
        }
    }
    if (st->type->report) st->type->report(st, i, again);
}

void ft_strategy_free(ft_strategy *st) {
    if (!st) return;
    ft_grid_free(st);
    free(st->warm);
    free(st->prior);
    free(st->cost);
    free(st->state);
    free(st);
}
