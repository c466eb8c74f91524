/* strategy_impl.h: what the search strategies share, private to tuner/strategies/.
 *
 * A strategy is a table of functions (ft_strategy_type) over one state (struct ft_strategy):
 * the candidate grid, what is known and proposed, the score model and the random stream, which
 * every strategy reads, and the strategy's own state behind st->state. strategy.c keeps the
 * bookkeeping every strategy needs and calls the strategy through its table; the grid (grid.c)
 * and the score model (model.c) are below the strategy files, so no two files call each other.
 */
#ifndef FLARETUNE_STRATEGY_IMPL_H
#define FLARETUNE_STRATEGY_IMPL_H

#include <stddef.h>
#include <stdint.h>

#include "core/rng.h"
#include "tuner/strategies/strategy.h"

typedef struct ft_strategy_type {
    const char *name;    /* as in ft_strategy_names */
    const char *summary; /* one line: how it searches */
    /* Its options: their defaults, their size and where they sit in ft_strategy_opts; defaults
     * is NULL when it has none. */
    const void *defaults;
    size_t opts_size, opts_offset;
    /* Sets up st->state, one allocation (strategy.c frees it), from the options (the defaults or
     * the caller's), once the grid is built and the generator seeded; nothing has been drawn
     * from it yet. 0, or -1 when an option is out of range or memory is short. */
    int (*init)(ft_strategy *st, const void *opts);
    /* The next candidate to propose (through ft_grid_propose), -1 when none; called only while
     * some candidate is neither known nor proposed. */
    int (*next)(ft_strategy *st);
    /* After strategy.c has recorded the score of i (known, fin and best up to date); again: i
     * was known before. NULL when the strategy learns nothing beyond that. */
    void (*report)(ft_strategy *st, int i, int again);
    /* Up to k candidates proposed together into out (each through ft_grid_propose); how many.
     * NULL: strategy.c calls next k times. */
    int (*batch)(ft_strategy *st, int k, int *out);
    /* The largest improvement, relative, the strategy's model expects of any untaken
     * candidate over the best known; NULL (or a negative value): it has no model. */
    double (*expected_gain)(ft_strategy *st);
} ft_strategy_type;

/* The fields of a strategy's table named after it, as FT_STRATEGY(anneal): its name "anneal"
 * and anneal_init, anneal_next; and of one with options, FT_STRATEGY_OPTS(anneal): its defaults
 * anneal_defaults, of type ft_anneal_opts, at ft_strategy_opts.anneal. */
#define FT_STRATEGY(P) .name = #P, .init = P##_init, .next = P##_next
#define FT_STRATEGY_OPTS(P)                                                                        \
    .defaults = &P##_defaults, .opts_size = sizeof(ft_##P##_opts),                                 \
    .opts_offset = offsetof(ft_strategy_opts, P)

extern const ft_strategy_type ft_strategy_exhaustive, ft_strategy_random, ft_strategy_anneal,
    ft_strategy_evolve, ft_strategy_bayes;

struct ft_strategy {
    const ft_strategy_type *type;
    void *state;

    /* the candidate grid (grid.c) */
    int nparams, nc;
    int pn[FT_MAX_PARAMS];    /* candidate values of each parameter                    */
    int named[FT_MAX_PARAMS]; /* 1: unordered labels                                   */
    /* each value's place on the log scale of its parameter's values, in [0, 1], for a
     * numeric parameter whose values are all positive and not all one; -1 for any other */
    double logpos[FT_MAX_PARAMS][FT_MAX_VALUES];
    int64_t stride[FT_MAX_PARAMS];
    ft_config *cands;
    signed char *pos; /* nc * nparams coordinates; -1 where a value is not a candidate */
    int64_t *key;     /* space-order index of each candidate                         */
    int *sorted;      /* candidates by key                                            */
    int *scratch;     /* nc ints, at least FT_MAX_PARAMS * FT_MAX_VALUES              */

    /* what is known */
    double *score;
    unsigned char *known, *taken; /* taken: known or proposed                          */
    int nknown, ntaken;
    int best;    /* best known, -1 before any */
    int best_at; /* nknown when it became the best */
    int *fin; /* known candidates with a finite score, in the order they became known */
    int nfin;
    ft_rng rng;

    /* what is known from elsewhere and what evaluations cost (ft_strategy_warm, _report_cost) */
    int *warm;      /* candidates to propose first, in order                          */
    int nwarm, warm_at;
    double *prior;  /* a prior score per candidate (NaN: none); NULL when none given   */
    double *cost;   /* seconds each known candidate cost to evaluate (NaN: not told)  */

    /* the score model (model.c): log(score) ~ mu + sum_p eff[p][value position] */
    ft_model_opts model; /* set by the strategy that uses it */
    int model_n;         /* nfin when last fitted; -1: refit */
    double mu, eff[FT_MAX_PARAMS][FT_MAX_VALUES];
};

/* ---- the candidate grid (grid.c) ----------------------------------------------------------- */

/* Allocates the grid and the score arrays of st for ncands candidates of s and fills the grid;
 * -1 when out of memory (ft_grid_free releases what was allocated). */
int ft_grid_build(ft_strategy *st, const ft_space *s, const ft_config *cands, int ncands);
void ft_grid_free(ft_strategy *st);
/* Space-order index of the grid point pos, -1 when a coordinate is not a candidate value. */
int64_t ft_grid_key(const ft_strategy *st, const signed char *pos);
/* Candidate with space-order index k, or -1 (not valid). */
int ft_grid_lookup(const ft_strategy *st, int64_t k);
/* Valid candidates one step from c into out (at most nparams * FT_MAX_VALUES); their count. */
int ft_grid_neighbours(const ft_strategy *st, int c, int *out);
/* Valid candidates that differ from c in one parameter, by any value (a Hamming distance of
 * one); their count (at most nparams * FT_MAX_VALUES). */
int ft_grid_hamming_neighbours(const ft_strategy *st, int c, int *out);
int ft_grid_distance(const ft_strategy *st, const signed char *a, const signed char *b);
/* The candidate nearest to the grid point target (ties broken at random), among the untaken
 * ones only when untaken_only; -1 when there is none. */
int ft_grid_nearest(ft_strategy *st, const signed char *target, int untaken_only);
/* An untaken candidate drawn uniformly, -1 when there is none. */
int ft_grid_random_untaken(ft_strategy *st);
/* Marks c (when >= 0) proposed and returns it. */
int ft_grid_propose(ft_strategy *st, int c);
/* The first candidate from position *at of order (n of them; NULL: every candidate, in space
 * order) that is not taken, proposed, with *at moved past it; -1 when the order is spent. */
int ft_grid_propose_next(ft_strategy *st, const int *order, int n, int *at);
/* Of `draws` untaken candidates drawn in turn, the one farthest (grid distance) from every
 * candidate marked in `from` (the first of the farthest; `none` is the distance when nothing is
 * marked); -1 when no candidate is untaken. */
int ft_grid_farthest_draw(ft_strategy *st, int draws, const unsigned char *from, int none);

/* A stratified draw: each parameter's values dealt from a deck shuffled anew each time it is
 * spent, so the first draws cover every value of every parameter evenly (a Latin hypercube over
 * the parameters' values, snapped to the nearest valid candidate). */
typedef struct {
    int card[FT_MAX_PARAMS][FT_MAX_VALUES], at[FT_MAX_PARAMS];
} ft_grid_deck;
void ft_grid_deck_init(const ft_strategy *st, ft_grid_deck *d);
/* The untaken candidate nearest the next dealt point; -1 when none is untaken. */
int ft_grid_deck_draw(ft_strategy *st, ft_grid_deck *d);

/* ---- the score model (model.c) ------------------------------------------------------------- */

/* Its defaults, in the options of the strategies that use it (chosen with theirs, on replayed
 * landscapes). min = 2: two results per parameter before the model screens anything; with
 * fewer, most value effects rest on one result and a single noisy one would steer the screens.
 * ridge = 1.0: the weight of one result, so a value seen once gets half its mean residual and
 * one seen n times n / (n + 1); an effect needs repeated evidence to count in full. sweeps = 3:
 * a few backfitting sweeps settle the main effects of a grid that is nearly balanced, and each
 * costs nfin * nparams^2 on every refit (one per new score the strategy asks about). */
#define FT_MODEL_DEFAULTS                                                                          \
    { .min = 2, .ridge = 1.0, .sweeps = 3 }

/* 0 when every option is in range, -1 otherwise. */
int ft_model_opts_check(const ft_model_opts *o);

int ft_model_ready(const ft_strategy *st);
/* Of candidates a and b, the one the model prefers (a without a model; either may be -1). */
int ft_model_pick(ft_strategy *st, int a, int b);

#endif
