/* evolve.c: an evolutionary search, steady state (see include/flaretune/strategy.h).
 *
 * The population is the best results known (sqrt(candidates), EVOLVE_POP_MIN to
 * EVOLVE_POP_MAX; one child per evaluation). Parents are picked by tournament and crossed
 * uniformly; each parameter of the child mutates with probability EVOLVE_MUT / nparams (numeric
 * ones mostly by one step) and the child is snapped to the nearest valid candidate. Children
 * whose candidate is already known are drawn again; the score model picks among EVOLVE_SCREEN
 * new ones; after EVOLVE_TRIES draws the unknown candidate nearest the last child is taken. The
 * first generation is stratified: each parameter's values are dealt from a shuffled deck, so
 * every value is tried early.
 */
#include <math.h>
#include <stdlib.h>

#include "strategy_impl.h"

#define EVOLVE_POP_MIN    4 /* population: sqrt(candidates), within [MIN, MAX]              */
#define EVOLVE_POP_MAX    8
#define EVOLVE_INIT       0.5  /* stratified first generation, a fraction of the population    */
#define EVOLVE_TOURNAMENT 3    /* tournament size                                               */
#define EVOLVE_MUT        1.0  /* expected mutated parameters per child                         */
#define EVOLVE_STEP_P     0.75 /* numeric mutation: one step with this probability, else any    */
#define EVOLVE_SCREEN     4    /* distinct new children drawn per evaluation; the model picks   */
#define EVOLVE_TRIES      16   /* draws before taking the unknown candidate nearest a child     */

typedef struct {
    int popsize, npop;
    int init_left; /* stratified proposals still to make */
    int deck[FT_MAX_PARAMS][FT_MAX_VALUES], deck_at[FT_MAX_PARAMS];
    int pop[]; /* popsize: the best known finite candidates, best first */
} evolve_state;

static int evolve_init(ft_strategy *st) {
    int pop = (int)lround(sqrt((double)st->nc));
    pop = pop < EVOLVE_POP_MIN ? EVOLVE_POP_MIN : pop > EVOLVE_POP_MAX ? EVOLVE_POP_MAX : pop;
    evolve_state *e = calloc(1, sizeof *e + (size_t)pop * sizeof e->pop[0]);
    if (!e) return -1;
    st->state = e;
    e->popsize = pop;
    e->init_left = (int)(EVOLVE_INIT * e->popsize);
    for (int p = 0; p < st->np; p++)
        for (int k = 0; k < st->pn[p]; k++)
            e->deck[p][k] = k;
    return 0;
}

static void pop_insert(ft_strategy *st, int c) {
    evolve_state *e = st->state;
    double s = st->score[c];
    if (!(s < INFINITY)) return;
    for (int k = 0; k < e->npop; k++)
        if (e->pop[k] == c) return;
    if (e->npop == e->popsize && !(s < st->score[e->pop[e->npop - 1]])) return;
    int k = e->npop < e->popsize ? e->npop++ : e->npop - 1;
    while (k > 0 && s < st->score[e->pop[k - 1]]) {
        e->pop[k] = e->pop[k - 1];
        k--;
    }
    e->pop[k] = c;
}

/* The population follows every score: a new one may join it, one measured again may leave. */
static void evolve_report(ft_strategy *st, int i, int again) {
    evolve_state *e = st->state;
    if (!again) {
        pop_insert(st, i);
        return;
    }
    e->npop = 0;
    for (int c = 0; c < st->nc; c++)
        if (st->known[c]) pop_insert(st, c);
}

static int tournament(ft_strategy *st) {
    evolve_state *e = st->state;
    int w = e->pop[ft_rng_below(&st->rng, (uint64_t)e->npop)];
    for (int k = 1; k < EVOLVE_TOURNAMENT; k++) {
        int c = e->pop[ft_rng_below(&st->rng, (uint64_t)e->npop)];
        if (st->score[c] < st->score[w]) w = c;
    }
    return w;
}

/* A stratified first generation: each parameter's values are dealt from a shuffled deck. */
static int stratified(ft_strategy *st) {
    evolve_state *e = st->state;
    signed char target[FT_MAX_PARAMS];
    for (int p = 0; p < st->np; p++) {
        if (e->deck_at[p] == 0)
            for (int k = st->pn[p] - 1; k > 0; k--) {
                int j = (int)ft_rng_below(&st->rng, (uint64_t)k + 1), t = e->deck[p][k];
                e->deck[p][k] = e->deck[p][j];
                e->deck[p][j] = t;
            }
        target[p] = (signed char)e->deck[p][e->deck_at[p]];
        e->deck_at[p] = (e->deck_at[p] + 1) % st->pn[p];
    }
    return ft_grid_nearest(st, target, 1);
}

static void mutate(ft_strategy *st, signed char *x, double rate) {
    for (int p = 0; p < st->np; p++) {
        if (st->pn[p] < 2 || ft_rng_uniform(&st->rng) >= rate / st->np) continue;
        if (!st->named[p] && ft_rng_uniform(&st->rng) < EVOLVE_STEP_P) {
            int d = ft_rng_below(&st->rng, 2) ? 1 : -1;
            if (x[p] + d < 0 || x[p] + d >= st->pn[p]) d = -d;
            x[p] = (signed char)(x[p] + d);
        } else {
            int q = (int)ft_rng_below(&st->rng, (uint64_t)st->pn[p] - 1);
            x[p] = (signed char)(q >= x[p] ? q + 1 : q);
        }
    }
}

static int evolve_next(ft_strategy *st) {
    evolve_state *e = st->state;
    if (e->init_left > 0 || e->npop < 2) {
        if (e->init_left > 0) e->init_left--;
        return ft_grid_propose(st, stratified(st));
    }
    signed char child[FT_MAX_PARAMS];
    int pick = -1, drawn = 0;
    for (int attempt = 0; attempt < EVOLVE_TRIES && drawn < EVOLVE_SCREEN; attempt++) {
        int a = tournament(st), b = tournament(st);
        const signed char *pa = st->pos + (size_t)a * st->np, *pb = st->pos + (size_t)b * st->np;
        for (int p = 0; p < st->np; p++)
            child[p] = ft_rng_below(&st->rng, 2) ? pa[p] : pb[p];
        /* Later draws mutate more: the neighbourhood of the population is filling up. */
        mutate(st, child, EVOLVE_MUT * (1 + attempt / 4));
        int c = ft_grid_nearest(st, child, 0);
        if (c < 0 || st->taken[c] || c == pick) continue;
        drawn++;
        pick = ft_model_pick(st, pick, c);
    }
    return ft_grid_propose(st, pick >= 0 ? pick : ft_grid_nearest(st, child, 1));
}

const ft_strategy_type ft_strategy_evolve = {
    .name = "evolve",
    .summary = "evolutionary: tournament selection, crossover, mutation",
    .init = evolve_init,
    .next = evolve_next,
    .report = evolve_report,
};
