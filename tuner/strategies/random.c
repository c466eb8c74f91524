/* random.c: uniform random search without replacement (see tuner/strategies/strategy.h).
 *
 * The order is one shuffle of the candidates, drawn when the strategy is made; candidates
 * already known (a resumed run, a result from another worker) are skipped. The baseline a
 * guided strategy has to beat.
 */
#include <stdlib.h>

#include "strategy_impl.h"

typedef struct {
    int scan;   /* next position in perm */
    int perm[]; /* the candidates in the order they are proposed */
} random_state;

static int random_init(ft_strategy *st, const void *opts) {
    (void)opts; /* none */
    random_state *x = malloc(sizeof *x + (size_t)st->nc * sizeof x->perm[0]);
    if (!x) return -1;
    st->state = x;
    x->scan = 0;
    for (int c = 0; c < st->nc; c++)
        x->perm[c] = c;
    for (int c = st->nc - 1; c > 0; c--) {
        int j = (int)ft_rng_below(&st->rng, (uint64_t)c + 1), t = x->perm[c];
        x->perm[c] = x->perm[j];
        x->perm[j] = t;
    }
    return 0;
}

static int random_next(ft_strategy *st) {
    random_state *x = st->state;
    return ft_grid_propose_next(st, x->perm, st->nc, &x->scan);
}

const ft_strategy_type ft_strategy_random = {
    FT_STRATEGY(random),
    .summary = "uniform without replacement",
};
