/* strategy.h: search strategies over the valid configurations of a space.
 *
 * A strategy proposes which candidate to evaluate next and learns from the scores it is given.
 * Candidates are the valid configurations, listed once in space order; a strategy refers to
 * them by index. Scores are seconds (lower is better); INFINITY marks a rejected candidate.
 * A strategy never proposes a candidate whose score it already knows, so resuming a run (the
 * known results reported up front) costs no evaluation twice.
 *
 * With the same seed and the same scores, a strategy makes the same proposals: replaying a
 * recorded landscape is deterministic. (Live, the scores themselves are measurements.)
 */
#ifndef FLARETUNE_STRATEGY_H
#define FLARETUNE_STRATEGY_H

#include <stdint.h>

#include "flaretune/space.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
    FT_STRAT_EXHAUSTIVE = 0, /* every candidate, in space order                              */
    FT_STRAT_RANDOM,         /* uniform without replacement                                  */
    FT_STRAT_ANNEAL,         /* simulated annealing over one-parameter-step neighbours       */
    FT_STRAT_EVOLVE,         /* evolutionary: tournament selection, crossover, mutation      */
    FT_STRAT_COUNT
} ft_strategy_kind;

extern const char *const ft_strategy_names[]; /* indexed by kind, NULL-terminated */
/* Kind from name; -1 when unknown. */
int ft_strategy_parse(const char *name);

typedef struct ft_strategy ft_strategy;

/* cands: the valid configurations of s (ncands >= 1), in space order; the strategy keeps its own
 * copy. NULL on allocation failure. */
ft_strategy *ft_strategy_new(ft_strategy_kind kind, const ft_space *s, const ft_config *cands,
                             int ncands, uint64_t seed);
/* Index of the next candidate to evaluate, or -1 when there is nothing more to propose. */
int ft_strategy_next(ft_strategy *st);
/* The score of candidate i (proposed or not). */
void ft_strategy_report(ft_strategy *st, int i, double score);
void ft_strategy_free(ft_strategy *st);

#ifdef __cplusplus
}
#endif
#endif
