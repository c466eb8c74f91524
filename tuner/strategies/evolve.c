/* evolve.c: an evolutionary search, steady state (see tuner/strategies/strategy.h).
 *
 * The population is the best results known (sqrt(candidates), pop_min to pop_max; one child
 * per evaluation). Parents are picked by tournament and crossed uniformly; each parameter of the
 * child mutates with probability mut / nparams (numeric ones mostly by one step) and the child
 * is snapped to the nearest valid candidate. Children whose candidate is already known are drawn
 * again; the score model picks among `screen` new ones; after `tries` draws the unknown
 * candidate nearest the last child is taken. The first generation is stratified: each
 * parameter's values are dealt from a shuffled deck, so every value is tried early. The options
 * and why each default has its value: evolve_defaults below.
 */
#include <math.h>
#include <stddef.h>
#include <stdlib.h>

#include "strategy_impl.h"

/* The defaults, chosen on the replayed landscapes (see strategy.c); what each is for: */
static const ft_evolve_opts evolve_defaults = {
    /* sqrt(candidates), but at least 4, so that a tournament of 3 has a choice and crossover
     * has distinct parents, and at most 8, so that the population stays the best few: on large
     * spaces the optimum lies in the basin of the best known, as for anneal's restarts. */
    .pop_min = 4,
    .pop_max = 8,
    /* Half the population from the stratified deck: the first results cover the values of
     * every parameter evenly, and breeding starts as soon as that gives it something to breed
     * from. */
    .init = 0.5,
    /* The best of three from a population of 4 to 8 favours the best without always choosing
     * them, so crossover mixes more than the top two. */
    .tournament = 3,
    /* One mutated parameter per child on average: a child is one step off the crossing of its
     * parents, as anneal's moves are; later draws for the same evaluation mutate more. */
    .mut = 1.0,
    /* Neighbouring tile sizes perform alike, so a numeric parameter usually moves by one step,
     * and sometimes anywhere, to leave a basin. */
    .step_p = 0.75,
    /* Children are spread wider than a walk's neighbours, so the model sees more of them than
     * anneal's 2 before one is evaluated; it still only screens. */
    .screen = 4,
    /* Once the population's neighbourhood is mostly known most children are known candidates:
     * after this many draws the unknown candidate nearest the last child is taken, so an
     * evaluation never waits on luck. */
    .tries = 16,
    .model = FT_MODEL_DEFAULTS,
};

typedef struct {
    ft_evolve_opts o;
    int popsize, npop;
    int init_left; /* stratified proposals still to make */
    ft_grid_deck deck;
    int pop[]; /* popsize: the best known finite candidates, best first */
} evolve_state;

/* 0 when every option is in range; the upper bounds keep the population small. */
static int evolve_check(const ft_evolve_opts *o) {
    int ok = o->pop_min >= 1 && o->pop_min <= o->pop_max && o->pop_max <= 1 << 16 && o->init >= 0 &&
             o->init <= 1 && o->tournament >= 1 && o->tournament <= 1 << 20 && o->mut >= 0 &&
             o->mut <= 1 << 20 && o->step_p >= 0 && o->step_p <= 1 && o->screen >= 1 &&
             o->screen <= 1 << 20 && o->tries >= 1 && o->tries <= 1 << 20;
    return ok ? ft_model_opts_check(&o->model) : -1;
}

static int evolve_init(ft_strategy *st, const void *opts) {
    const ft_evolve_opts *o = opts;
    if (evolve_check(o)) return -1;
    int pop = (int)lround(sqrt((double)st->nc));
    pop = pop < o->pop_min ? o->pop_min : pop > o->pop_max ? o->pop_max : pop;
    evolve_state *e = calloc(1, sizeof *e + (size_t)pop * sizeof e->pop[0]);
    if (!e) return -1;
    st->state = e;
    st->model = o->model;
    e->o = *o;
    e->popsize = pop;
    e->init_left = (int)(o->init * e->popsize);
    ft_grid_deck_init(st, &e->deck);
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
    const evolve_state *e = st->state;
    int w = e->pop[ft_rng_below(&st->rng, (uint64_t)e->npop)];
    for (int k = 1; k < e->o.tournament; k++) {
        int c = e->pop[ft_rng_below(&st->rng, (uint64_t)e->npop)];
        if (st->score[c] < st->score[w]) w = c;
    }
    return w;
}

static void mutate(ft_strategy *st, signed char *x, double rate) {
    const evolve_state *e = st->state;
    for (int p = 0; p < st->nparams; p++) {
        if (st->pn[p] < 2 || ft_rng_uniform(&st->rng) >= rate / st->nparams) continue;
        if (!st->named[p] && ft_rng_uniform(&st->rng) < e->o.step_p) {
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
        return ft_grid_propose(st, ft_grid_deck_draw(st, &e->deck));
    }
    signed char child[FT_MAX_PARAMS];
    int pick = -1, drawn = 0;
    for (int attempt = 0; attempt < e->o.tries && drawn < e->o.screen; attempt++) {
        int a = tournament(st), b = tournament(st);
        const signed char *pa = st->pos + (size_t)a * st->nparams, *pb = st->pos + (size_t)b * st->nparams;
        for (int p = 0; p < st->nparams; p++)
            child[p] = ft_rng_below(&st->rng, 2) ? pa[p] : pb[p];
        /* Later draws mutate more: the neighbourhood of the population is filling up. */
        mutate(st, child, e->o.mut * (1 + attempt / 4));
        int c = ft_grid_nearest(st, child, 0);
        if (c < 0 || st->taken[c] || c == pick) continue;
        drawn++;
        pick = ft_model_pick(st, pick, c);
    }
    return ft_grid_propose(st, pick >= 0 ? pick : ft_grid_nearest(st, child, 1));
}

const ft_strategy_type ft_strategy_evolve = {
    FT_STRATEGY(evolve),
    .summary = "evolutionary: tournament selection, crossover, mutation",
    FT_STRATEGY_OPTS(evolve),
    .report = evolve_report,
};
