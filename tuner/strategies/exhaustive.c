/* exhaustive.c: every candidate, in space order (see tuner/strategies/strategy.h).
 *
 * The reference the guided strategies are measured against, and the strategy that records a
 * whole landscape for `flaretune replay`. Candidates already known (a resumed run) are skipped.
 */
#include <stdlib.h>

#include "strategy_impl.h"

typedef struct {
    int scan; /* next candidate in space order */
} exhaustive_state;

static int exhaustive_init(ft_strategy *st, const void *opts) {
    (void)opts; /* none */
    st->state = calloc(1, sizeof(exhaustive_state));
    return st->state ? 0 : -1;
}

static int exhaustive_next(ft_strategy *st) {
    exhaustive_state *x = st->state;
    return ft_grid_propose_next(st, NULL, st->nc, &x->scan);
}

const ft_strategy_type ft_strategy_exhaustive = {
    FT_STRATEGY(exhaustive),
    .summary = "every candidate, in space order",
};
