/* anneal.c: simulated annealing over one-parameter steps (see tuner/strategies/strategy.h).
 *
 * The walk moves by one-parameter steps with a Metropolis rule on relative differences (a
 * candidate s is accepted from the current c with probability exp(-(s - c) / c / T)), the
 * temperature decaying geometrically from t0 to t1 over a horizon proportional to the space.
 * Steps onto known candidates are free (no evaluation), so on a plateau the walk crosses what it
 * already knows and only pays for new ground; a step onto new ground takes the score model's
 * pick of `screen` unknown neighbours. It restarts when stuck (a run of free steps, or `stale`
 * evaluations per parameter without a new best): next to the best of the `top` best known
 * candidates that still has unknown neighbours, since the optimum most often lies next to one
 * of the best few; when all their neighbourhoods are known, at the model's pick of a few random
 * candidates. The options and why each default has its value: anneal_defaults below.
 */
#include <math.h>
#include <stddef.h>
#include <stdlib.h>

#include "strategy_impl.h"

/* The defaults, chosen on the replayed landscapes (see strategy.c); what each is for: */
static const ft_anneal_opts anneal_defaults = {
    /* 10% worse is accepted with p = 1/e at the start: tile sizes move the time by tens of
     * percent, so an early walk crosses a tile ridge, while a step that costs an integer
     * factor (a thread count, a fusion strategy) is all but never taken (2x: p = e^-10). */
    .t0 = 0.10,
    /* At the end 1% worse (within the noise) still passes one time in seven and 5% worse
     * (a real difference) almost never: the walk ends as a descent that does not take noise
     * for a wall. */
    .t1 = 0.005,
    /* A quarter of the candidates: the guided strategies come within 5% of the optimum in a
     * median of 5% to 23% of them, so a walk has cooled by the time it should have arrived
     * (at least 4 * nparams evaluations, so that a small space still cools gradually). */
    .horizon = 0.25,
    /* Two evaluations per parameter without a new best: about one try of each direction of
     * every parameter from where the walk stands, after which its basin is spent. */
    .stale = 2,
    /* Two free steps per parameter in a row: the walk is crossing a plateau it already knows
     * and more steps would only cross it again. */
    .free_steps = 2,
    /* Two unknown neighbours for the model to choose between: it turns down clear losers,
     * while the walk's own draw still decides among close ones (the model has no
     * interactions; following them is the walk's job). */
    .screen = 2,
    /* The best few hold the optimum's basin, and noise can make any one of them look worse
     * than it is: restarting only next to the single best took a fifth more evaluations on
     * the replayed landscapes, half more on the decode one. */
    .top = 8,
    /* Enough draws for the model (before it speaks, the distance from everything known) to
     * steer a fresh start away from poor or known ground, few enough that it still explores. */
    .restart_draws = 4,
    .model = FT_MODEL_DEFAULTS,
};

typedef struct {
    ft_anneal_opts o;
    int cur;                 /* where the walk stands, -1 before it starts           */
    int pending;             /* the proposal whose score decides the next move, -1    */
    int pending_start;       /* 1: pending is a fresh start, taken whatever its score */
    int evals_since_restart; /* how far the cooling has gone                         */
    int stale;               /* evaluations without a new best                       */
    int horizon;             /* evaluations over which the temperature decays        */
    int top[];               /* o.top: the best known, for restart_point             */
} anneal_state;

/* 0 when every option is in range. The upper bounds keep horizon * candidates and the products
 * with nparams within an int, and the array top sizes small. */
static int anneal_check(const ft_anneal_opts *o) {
    int ok = o->t0 > 0 && o->t0 < INFINITY && o->t1 > 0 && o->t1 < INFINITY && o->horizon >= 0 &&
             o->horizon <= 1 && o->stale >= 0 && o->stale <= 1 << 20 && o->free_steps >= 0 &&
             o->free_steps <= 1 << 20 && o->screen >= 1 && o->screen <= 1 << 20 && o->top >= 0 &&
             o->top <= 1 << 16 && o->restart_draws >= 1 && o->restart_draws <= 1 << 20;
    return ok ? ft_model_opts_check(&o->model) : -1;
}

static int anneal_init(ft_strategy *st, const void *opts) {
    const ft_anneal_opts *o = opts;
    if (anneal_check(o)) return -1;
    anneal_state *a = calloc(1, sizeof *a + (size_t)o->top * sizeof a->top[0]);
    if (!a) return -1;
    st->state = a;
    st->model = o->model;
    a->o = *o;
    a->cur = -1;
    a->pending = -1;
    a->horizon = (int)(o->horizon * st->nc);
    if (a->horizon < 4 * st->nparams) a->horizon = 4 * st->nparams;
    if (a->horizon < 1) a->horizon = 1;
    return 0;
}

static double anneal_temp(const anneal_state *a) {
    double f = (double)a->evals_since_restart / a->horizon;
    if (f > 1) f = 1;
    return a->o.t0 * pow(a->o.t1 / a->o.t0, f);
}

/* Metropolis on the relative difference; rejected candidates (INFINITY) are never moved to
 * unless the walk stands on one itself. */
static int anneal_accept(ft_strategy *st, double cur, double cand) {
    if (!(cand < INFINITY)) return !(cur < INFINITY);
    if (!(cur < INFINITY) || cand <= cur) return 1;
    double d = cur > 0 ? (cand - cur) / cur : INFINITY;
    return ft_rng_uniform(&st->rng) < exp(-d / anneal_temp(st->state));
}

static int has_untaken_neighbour(const ft_strategy *st, int c) {
    int n = ft_grid_neighbours(st, c, st->scratch);
    for (int k = 0; k < n; k++)
        if (!st->taken[st->scratch[k]]) return 1;
    return 0;
}

/* Where a restart resumes the walk: the best of the `top` best known candidates that
 * still has unknown neighbours (-1: none has). On kernel landscapes the optimum is most often
 * next to one of the best few (its basin holds them), and noise can make any single one of
 * them look worse than it is. */
static int restart_point(ft_strategy *st) {
    anneal_state *a = st->state;
    int *top = a->top, ntop = a->o.top, n = 0;
    if (ntop == 0) return -1;
    for (int k = 0; k < st->nfin; k++) {
        int c = st->fin[k];
        if (n == ntop && !(st->score[c] < st->score[top[n - 1]])) continue;
        int j = n < ntop ? n++ : n - 1;
        for (; j > 0 && st->score[c] < st->score[top[j - 1]]; j--)
            top[j] = top[j - 1];
        top[j] = c;
    }
    for (int k = 0; k < n; k++)
        if (has_untaken_neighbour(st, top[k])) return top[k];
    return -1;
}

/* Where a walk starts afresh: the model's pick of a few random untaken candidates, or before
 * the model speaks, the one of them farthest from everything known. */
static int fresh_point(ft_strategy *st) {
    const anneal_state *a = st->state;
    if (ft_model_ready(st)) {
        int best = -1;
        for (int draw = 0; draw < a->o.restart_draws; draw++)
            best = ft_model_pick(st, best, ft_grid_random_untaken(st));
        return best;
    }
    return ft_grid_farthest_draw(st, a->o.restart_draws, st->known, st->nparams * 64);
}

static int anneal_next(ft_strategy *st) {
    anneal_state *a = st->state;
    if (a->pending >= 0) {
        int p = a->pending;
        a->pending = -1;
        if (st->known[p]) {
            a->evals_since_restart++;
            if (a->pending_start || a->cur < 0 ||
                anneal_accept(st, st->score[a->cur], st->score[p]))
                a->cur = p;
        }
    }
    int free_steps = 0, restart = a->cur < 0 || a->stale >= a->o.stale * st->nparams;
    for (int guard = 0; st->ntaken < st->nc; guard++) {
        if (guard > 64 * (st->nparams + 1)) return ft_grid_propose(st, ft_grid_random_untaken(st));
        if (restart || free_steps > a->o.free_steps * st->nparams) {
            restart = 0;
            free_steps = 0;
            a->stale = 0;
            a->evals_since_restart = 0;
            int top = restart_point(st);
            if (top >= 0) {
                a->cur = top;
            } else {
                int c = fresh_point(st);
                a->pending = c;
                a->pending_start = 1;
                return ft_grid_propose(st, c);
            }
        }
        int n = ft_grid_neighbours(st, a->cur, st->scratch), m = 0;
        for (int k = 0; k < n; k++) /* drop proposals still waiting for their score */
            if (st->known[st->scratch[k]] || !st->taken[st->scratch[k]])
                st->scratch[m++] = st->scratch[k];
        if (m == 0) {
            restart = 1;
            continue;
        }
        int j = st->scratch[ft_rng_below(&st->rng, (uint64_t)m)];
        if (!st->taken[j]) {
            /* New ground costs an evaluation: let the model choose among a few unknown
             * neighbours (known ones are free and walked as they come). */
            int u = 0;
            for (int k = 0; k < m; k++)
                if (!st->taken[st->scratch[k]]) st->scratch[u++] = st->scratch[k];
            for (int d = 1; d < a->o.screen && u > 1; d++)
                j = ft_model_pick(st, j, st->scratch[ft_rng_below(&st->rng, (uint64_t)u)]);
            a->pending = j;
            a->pending_start = 0;
            return ft_grid_propose(st, j);
        }
        free_steps++;
        if (anneal_accept(st, st->score[a->cur], st->score[j])) a->cur = j;
    }
    return -1;
}

/* A new best resets the count of evaluations without one; a score of the walk's own proposal
 * that is no better adds to it. Scores measured again change nothing here. */
static void anneal_report(ft_strategy *st, int i, int again) {
    anneal_state *a = st->state;
    if (again) return;
    if (st->best == i)
        a->stale = 0;
    else if (i == a->pending)
        a->stale++;
}

const ft_strategy_type ft_strategy_anneal = {
    FT_STRATEGY(anneal),
    .summary = "simulated annealing over one-parameter-step neighbours",
    FT_STRATEGY_OPTS(anneal),
    .report = anneal_report,
};
