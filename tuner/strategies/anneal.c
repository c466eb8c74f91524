/* anneal.c: simulated annealing over one-parameter steps (see include/flaretune/strategy.h).
 *
 * The walk moves by one-parameter steps with a Metropolis rule on relative differences (a
 * candidate s is accepted from the current c with probability exp(-(s - c) / c / T)), the
 * temperature decaying geometrically from ANNEAL_T0 to ANNEAL_T1 over a horizon proportional
 * to the space. Steps onto known candidates are free (no evaluation), so on a plateau the walk
 * crosses what it already knows and only pays for new ground; a step onto new ground takes the
 * score model's pick of ANNEAL_SCREEN unknown neighbours. It restarts when stuck (a run of free
 * steps, or ANNEAL_STALE evaluations per parameter without a new best): next to the best of the
 * ANNEAL_TOP best known candidates that still has unknown neighbours, since the optimum most
 * often lies next to one of the best few (on the replayed landscapes, restarting only next to
 * the single best took a fifth more evaluations, half more on the decode one); when all their
 * neighbourhoods are known, at the model's pick of a few random candidates.
 */
#include <math.h>
#include <stdlib.h>

#include "strategy_impl.h"

#define ANNEAL_T0      0.10  /* start temperature: 10% worse is accepted with p = 1/e          */
#define ANNEAL_T1      0.005 /* end temperature                                                */
#define ANNEAL_HORIZON 0.25  /* cooling horizon after a (re)start, a fraction of the candidates */
#define ANNEAL_STALE   2     /* restart after STALE * nparams evaluations without a new best    */
#define ANNEAL_FREE    2     /* restart after FREE * nparams free steps in a row               */
#define ANNEAL_SCREEN  2     /* unknown neighbours drawn per evaluation; the model picks one    */
#define ANNEAL_TOP     8     /* a restart resumes next to one of the TOP best known             */
#define RESTART_DRAWS  4     /* random candidates a restart from scratch chooses among          */

typedef struct {
    int cur;                 /* where the walk stands, -1 before it starts          */
    int pending;             /* the proposal whose score decides the next move, -1   */
    int pending_start;       /* 1: pending is a fresh start, taken whatever its score */
    int evals_since_restart; /* how far the cooling has gone                        */
    int stale;               /* evaluations without a new best                      */
    int horizon;             /* evaluations over which the temperature decays       */
} anneal_state;

static int anneal_init(ft_strategy *st) {
    anneal_state *a = calloc(1, sizeof *a);
    if (!a) return -1;
    st->state = a;
    a->cur = -1;
    a->pending = -1;
    a->horizon = (int)(ANNEAL_HORIZON * st->nc);
    if (a->horizon < 4 * st->np) a->horizon = 4 * st->np;
    if (a->horizon < 1) a->horizon = 1;
    return 0;
}

static double anneal_temp(const anneal_state *a) {
    double f = (double)a->evals_since_restart / a->horizon;
    if (f > 1) f = 1;
    return ANNEAL_T0 * pow(ANNEAL_T1 / ANNEAL_T0, f);
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

/* Where a restart resumes the walk: the best of the ANNEAL_TOP best known candidates that
 * still has unknown neighbours (-1: none has). On kernel landscapes the optimum is most often
 * next to one of the best few (its basin holds them), and noise can make any single one of
 * them look worse than it is. */
static int restart_point(ft_strategy *st) {
    int top[ANNEAL_TOP], n = 0;
    for (int k = 0; k < st->nfin; k++) {
        int c = st->fin[k];
        if (n == ANNEAL_TOP && !(st->score[c] < st->score[top[n - 1]])) continue;
        int j = n < ANNEAL_TOP ? n++ : n - 1;
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
    int best = -1, bestd = -1;
    if (ft_model_ready(st)) {
        for (int draw = 0; draw < RESTART_DRAWS; draw++)
            best = ft_model_pick(st, best, ft_grid_random_untaken(st));
        return best;
    }
    for (int draw = 0; draw < RESTART_DRAWS; draw++) {
        int c = ft_grid_random_untaken(st);
        if (c < 0) return -1;
        int d = st->np * 64;
        for (int k = 0; k < st->nc; k++)
            if (st->known[k]) {
                int e = ft_grid_distance(st, st->pos + (size_t)c * st->np,
                                         st->pos + (size_t)k * st->np);
                if (e < d) d = e;
            }
        if (d > bestd) {
            best = c;
            bestd = d;
        }
    }
    return best;
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
    int free_steps = 0, restart = a->cur < 0 || a->stale >= ANNEAL_STALE * st->np;
    for (int guard = 0; st->ntaken < st->nc; guard++) {
        if (guard > 64 * (st->np + 1)) return ft_grid_propose(st, ft_grid_random_untaken(st));
        if (restart || free_steps > ANNEAL_FREE * st->np) {
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
            for (int d = 1; d < ANNEAL_SCREEN && u > 1; d++)
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
    .name = "anneal",
    .summary = "simulated annealing over one-parameter-step neighbours",
    .init = anneal_init,
    .next = anneal_next,
    .report = anneal_report,
};
