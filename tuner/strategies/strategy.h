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

#include "op/space.h"
#include "core/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
    FT_STRAT_EXHAUSTIVE = 0, /* every candidate, in space order                              */
    FT_STRAT_RANDOM,         /* uniform without replacement                                  */
    FT_STRAT_ANNEAL,         /* simulated annealing over one-parameter-step neighbours       */
    FT_STRAT_EVOLVE,         /* evolutionary: tournament selection, crossover, mutation      */
    FT_STRAT_BAYES,          /* Bayesian optimisation: a Gaussian process, expected improvement */
    FT_STRAT_COUNT
} ft_strategy_kind;

/* What `tune` searches with and `replay` marks when no strategy is named. */
#define FT_STRAT_DEFAULT FT_STRAT_BAYES

extern const char *const ft_strategy_names[]; /* indexed by kind, NULL-terminated */
/* Kind from name; -1 when unknown. */
int ft_strategy_parse(const char *name);

/* One line on how the strategy searches; NULL when kind is unknown. */
const char *ft_strategy_summary(ft_strategy_kind kind);

/* ---- options --------------------------------------------------------------------------------
 * The guided strategies have options, each with a default; exhaustive and random have none.
 * The defaults are what ft_strategy_new uses; they were chosen by replaying recorded landscapes,
 * and why each has its value is said where it is set: in the strategy's file
 * (tuner/strategies/anneal.c, evolve.c), the model's in tuner/strategies/strategy_impl.h. Other
 * values change the proposals, not their determinism. In range: counts >= 0 and those that draw
 * or select >= 1 (screen, restart_draws, tournament, tries, pop_min), probabilities and
 * fractions in [0, 1], t0, t1 and ridge > 0, mut >= 0, pop_min <= pop_max. */

/* The score model both guided strategies screen their draws with. */
typedef struct {
    int min; /* it speaks once it has min * nparams finite scores (and 3 at least); default 2 */
    double ridge; /* > 0: shrinks the effect of a value seen few times toward 0; default 1.0 */
    int sweeps;   /* backfitting sweeps; default 3 */
} ft_model_opts;

typedef struct {
    double t0;         /* start temperature (relative difference); default 0.10 */
    double t1;         /* end temperature; default 0.005 */
    double horizon;    /* cooling horizon after a (re)start, a fraction of the candidates; 0.25 */
    int stale;         /* restart after stale * nparams evaluations without a new best; 2 */
    int free_steps;    /* restart after free_steps * nparams free steps in a row; 2 */
    int screen;        /* unknown neighbours drawn per evaluation, the model picks one; 2 */
    int top;           /* a restart resumes next to one of the top best known; 8 */
    int restart_draws; /* random candidates a restart from scratch chooses among; 4 */
    ft_model_opts model;
} ft_anneal_opts;

typedef struct {
    int pop_min, pop_max; /* population: sqrt(candidates) within [pop_min, pop_max]; 4 and 8 */
    double init;          /* stratified first generation, a fraction of the population; 0.5 */
    int tournament;       /* tournament size; 3 */
    double mut;           /* expected mutated parameters per child; 1.0 */
    double step_p;        /* numeric mutation: one step with this probability, else any; 0.75 */
    int screen;           /* distinct new children drawn per evaluation, the model picks; 4 */
    int tries;            /* draws before taking the unknown candidate nearest a child; 16 */
    ft_model_opts model;
} ft_evolve_opts;

typedef struct {
    int init;  /* first evaluations before the model speaks (>= 1); default 5 */
    int local; /* every local-th proposal is a neighbour of the best `top` known; 2 (0: never) */
    int top;   /* 1..8; default 3 */
    double xi; /* expected improvement's margin, relative; default 0.0 */
    int fit_every;      /* refit the kernel's length scales every fit_every results; default 1 */
    double cost_weight; /* 0..1: how much a candidate's expected cost divides its improvement;
                         * default 0 (ignore cost) */
    int hamming;  /* local steps: 1, any other value of one parameter; 2, the same, then of
                   * two at once once those are all known; 0, the next or previous value of a
                   * numeric one; default 2 */
    int recent;   /* past `train` results, the model is fitted on the best (train - recent) and
                   * the `recent` latest; 0..train; default 48 */
    int train;    /* results the model is fitted on at most, 16..256; default 64 */
    int explore;  /* every explore-th proposal is drawn at random (0: never); default 0 */
    int stratified; /* of the first `init` proposals, this many are dealt from each
                     * parameter's shuffled values (ft_grid_deck), the rest are each the draw
                     * farthest from those taken; 0..init; default 5 */
    int cross;      /* every cross-th proposal is the best of a few crossings of the best
                     * eight known (0: never) */
    int stall;      /* once the best known has gone this many results without improving, the
                     * proposals between local steps are each the untaken candidate farthest
                     * from everything taken (of a few draws), not the model's best, until it
                     * improves (0: never); default 128 */
    int log_scale;  /* 1: a numeric parameter whose values are all positive is placed on the
                     * log of its values (1 to 2 as far apart as 128 to 256); 0: on their ranks
                     * (each value one step from the next); default 1 */
} ft_bayes_opts;

/* The options of every strategy; a strategy reads its own. */
typedef struct {
    ft_anneal_opts anneal;
    ft_evolve_opts evolve;
    ft_bayes_opts bayes;
} ft_strategy_opts;

/* Every option at its default. */
void ft_strategy_opts_default(ft_strategy_opts *o);
/* Set one option from "strategy.option=value" (anneal.t0=0.2, bayes.local=3,
 * evolve.model.ridge=2): an unknown name (the error lists them), a value that is not a number
 * (an integer for a count) or one outside the option's own range (the error names the
 * assignment and the range) is FT_EINVAL, and the option keeps its value. The ranges between
 * options are checked by ft_strategy_opts_check, and again when a strategy is made. */
ft_status ft_strategy_opts_set(ft_strategy_opts *o, const char *assignment, ft_err *err);
/* FT_EINVAL, naming both options, when one of them is past another (evolve.pop_min above
 * pop_max, bayes.recent above bayes.train, bayes.stratified above bayes.init). */
ft_status ft_strategy_opts_check(const ft_strategy_opts *o, ft_err *err);

typedef struct ft_strategy ft_strategy;

/* cands: the valid configurations of s (ncands >= 1), in space order; the strategy keeps its own
 * copy. NULL on allocation failure. Its options at their defaults. */
ft_strategy *ft_strategy_new(ft_strategy_kind kind, const ft_space *s, const ft_config *cands,
                             int ncands, uint64_t seed);
/* As ft_strategy_new, with kind's options from opts (NULL: the defaults); NULL also when one of
 * them is out of range. */
ft_strategy *ft_strategy_new_opts(ft_strategy_kind kind, const ft_space *s, const ft_config *cands,
                                  int ncands, uint64_t seed, const ft_strategy_opts *opts);
/* Index of the next candidate to evaluate, or -1 when there is nothing more to propose. */
int ft_strategy_next(ft_strategy *st);
/* Up to k (>= 1) candidates to evaluate next, into out; how many (0: nothing more to propose).
 * Each is proposed once, as by ft_strategy_next. A strategy with a model (bayes) chooses the k
 * together, each as if the ones before it had scored what the model expects (so a batch spreads
 * instead of piling onto one basin); the others propose their next k. Their results may be
 * reported in any order. */
int ft_strategy_next_batch(ft_strategy *st, int k, int *out);
/* The score of candidate i (proposed or not). */
void ft_strategy_report(ft_strategy *st, int i, double score);
/* What evaluating candidate i cost, in seconds (verification, compilation and measurement); a
 * strategy that weighs cost (bayes with cost_weight > 0) learns it; the others ignore it. Call
 * it before ft_strategy_report for the same candidate. */
void ft_strategy_report_cost(ft_strategy *st, int i, double cost_s);

/* ---- warm start -----------------------------------------------------------------------------
 * What is known before the first evaluation, from other problems: candidates worth measuring
 * first (other shapes' and other devices' winners, in order of preference), and a prior score
 * per candidate (the seconds another shape's landscape measured for the same configuration, NaN
 * where it has none), whose ranking a model may learn to trust. Call before the first
 * ft_strategy_next. `first` are proposed first, in order (those already known skipped); prior
 * (ncands values, may be NULL) is copied. 0, or -1 when out of memory or an index is out of
 * range. */
int ft_strategy_warm(ft_strategy *st, const int *first, int nfirst, const double *prior);

/* Has the search converged? Yes when the best known has stood for `patience` evaluations and
 * for as many as it took to find it (a search that found its best late is given as long again),
 * and the strategy's model expects no untaken candidate to beat it by more than `rel` (0.01: 1%)
 * in expectation. Always 0 for a strategy without a model, and once every candidate is taken
 * (the search is then exhausted, not converged).
 * (The patience matters as much as the model: on the recorded landscapes the model alone
 * stopped the search before the optimum in a third of the seeds.) */
int ft_strategy_converged(ft_strategy *st, double rel, int patience);
void ft_strategy_free(ft_strategy *st);

#ifdef __cplusplus
}
#endif
#endif
