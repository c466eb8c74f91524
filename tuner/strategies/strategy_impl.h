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

#include <stdint.h>

#include "flaretune/rng.h"
#include "flaretune/strategy.h"

typedef struct ft_strategy_type {
    const char *name;    /* as in ft_strategy_names */
    const char *summary; /* one line: how it searches */
    /* Sets up st->state, one allocation (strategy.c frees it), once the grid is built and the
     * generator seeded; nothing has been drawn from it yet. 0, or -1 when out of memory. */
    int (*init)(ft_strategy *st);
    /* The next candidate to propose (through ft_grid_propose), -1 when none; called only while
     * some candidate is neither known nor proposed. */
    int (*next)(ft_strategy *st);
    /* After strategy.c has recorded the score of i (known, fin and best up to date); again: i
     * was known before. NULL when the strategy learns nothing beyond that. */
    void (*report)(ft_strategy *st, int i, int again);
} ft_strategy_type;

extern const ft_strategy_type ft_strategy_exhaustive, ft_strategy_random, ft_strategy_anneal,
    ft_strategy_evolve;

struct ft_strategy {
    const ft_strategy_type *type;
    void *state;

    /* the candidate grid (grid.c) */
    int np, nc;
    int pn[FT_MAX_PARAMS];    /* candidate values of each parameter                    */
    int named[FT_MAX_PARAMS]; /* 1: unordered labels                                   */
    int64_t stride[FT_MAX_PARAMS];
    ft_config *cands;
    signed char *pos; /* nc * np coordinates; -1 where a value is not a candidate */
    int64_t *key;     /* space-order index of each candidate                         */
    int *sorted;      /* candidates by key                                            */
    int *scratch;     /* nc ints, at least FT_MAX_PARAMS * FT_MAX_VALUES              */

    /* what is known */
    double *score;
    unsigned char *known, *taken; /* taken: known or proposed                          */
    int nknown, ntaken;
    int best; /* best known, -1 before any */
    int *fin; /* known candidates with a finite score, in the order they became known */
    int nfin;
    ft_rng rng;

    /* the score model (model.c): log(score) ~ mu + sum_p eff[p][value position] */
    int model_n; /* nfin when last fitted; -1: refit */
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
/* Valid candidates one step from c into out (at most np * FT_MAX_VALUES); their count. */
int ft_grid_neighbours(const ft_strategy *st, int c, int *out);
int ft_grid_distance(const ft_strategy *st, const signed char *a, const signed char *b);
/* The candidate nearest to the grid point target (ties broken at random), among the untaken
 * ones only when untaken_only; -1 when there is none. */
int ft_grid_nearest(ft_strategy *st, const signed char *target, int untaken_only);
/* An untaken candidate drawn uniformly, -1 when there is none. */
int ft_grid_random_untaken(ft_strategy *st);
/* Marks c (when >= 0) proposed and returns it. */
int ft_grid_propose(ft_strategy *st, int c);

/* ---- the score model (model.c) ------------------------------------------------------------- */

int ft_model_ready(const ft_strategy *st);
/* Of candidates a and b, the one the model prefers (a without a model; either may be -1). */
int ft_model_pick(ft_strategy *st, int a, int b);

#endif
