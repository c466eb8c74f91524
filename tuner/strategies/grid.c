/* grid.c: the candidates as points of a grid, the ground every strategy walks on
 * (see strategy_impl.h).
 *
 * Coordinate p of a candidate is the position of its value among parameter p's candidate
 * values. Numeric parameters are ordered (one step is the next larger or smaller candidate
 * value); named ones are not (any other label is one step away). Constraints cut holes in the
 * grid, so a point built by a move, a crossover or a mutation is mapped back to a candidate:
 * exactly (a binary search on the space-order index) for neighbours, to the nearest candidate
 * for children.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "strategy_impl.h"

static int value_pos(const ft_space *s, int p, int value) {
    for (int k = 0; k < s->params[p].n; k++)
        if (s->params[p].values[k] == value) return k;
    return -1;
}

int64_t ft_grid_key(const ft_strategy *st, const signed char *pos) {
    int64_t k = 0;
    for (int p = 0; p < st->nparams; p++) {
        if (pos[p] < 0) return -1;
        k += pos[p] * st->stride[p];
    }
    return k;
}

/* st->sorted: the candidates by key (a merge sort through scratch; already sorted when the
 * candidates come in space order, as they should). */
static void sort_by_key(ft_strategy *st) {
    int n = st->nc, *a = st->sorted, *b = st->scratch;
    for (int w = 1; w < n; w *= 2) {
        for (int lo = 0; lo < n; lo += 2 * w) {
            int mid = lo + w < n ? lo + w : n, hi = lo + 2 * w < n ? lo + 2 * w : n;
            int i = lo, j = mid, k = lo;
            while (i < mid && j < hi)
                b[k++] = st->key[a[j]] < st->key[a[i]] ? a[j++] : a[i++];
            while (i < mid)
                b[k++] = a[i++];
            while (j < hi)
                b[k++] = a[j++];
        }
        int *t = a;
        a = b;
        b = t;
    }
    if (a != st->sorted) memcpy(st->sorted, a, (size_t)n * sizeof *a);
}

int ft_grid_build(ft_strategy *st, const ft_space *s, const ft_config *cands, int ncands) {
    st->nparams = s->nparams;
    st->nc = ncands;
    size_t nc = (size_t)ncands;
    st->cands = malloc(nc * sizeof *st->cands);
    st->pos = malloc(nc * (size_t)(st->nparams ? st->nparams : 1));
    st->key = malloc(nc * sizeof *st->key);
    st->sorted = malloc(nc * sizeof *st->sorted);
    st->score = malloc(nc * sizeof *st->score);
    st->known = calloc(nc, 1);
    st->taken = calloc(nc, 1);
    st->scratch = malloc((nc > FT_MAX_PARAMS * FT_MAX_VALUES ? nc : FT_MAX_PARAMS * FT_MAX_VALUES) *
                         sizeof *st->scratch);
    st->fin = malloc(nc * sizeof *st->fin);
    if (!st->cands || !st->pos || !st->key || !st->sorted || !st->score || !st->known ||
        !st->taken || !st->scratch || !st->fin)
        return -1;
    memcpy(st->cands, cands, nc * sizeof *cands);
    int64_t stride = 1;
    for (int p = st->nparams - 1; p >= 0; p--) {
        st->pn[p] = s->params[p].n;
        st->named[p] = s->params[p].labels != NULL;
        st->stride[p] = stride;
        stride *= s->params[p].n;
    }
    for (int p = 0; p < st->nparams; p++) {
        const ft_param *q = &s->params[p];
        int positive = !st->named[p];
        double lo = INFINITY, hi = -INFINITY;
        for (int k = 0; k < q->n; k++)
            positive &= q->values[k] > 0;
        for (int k = 0; k < q->n && positive; k++) {
            lo = fmin(lo, log(q->values[k]));
            hi = fmax(hi, log(q->values[k]));
        }
        for (int k = 0; k < q->n; k++) {
            double x = positive && hi > lo ? (log(q->values[k]) - lo) / (hi - lo) : -1;
            /* values that double at each step: their logs are their ranks, exactly */
            if (q->n > 1 && fabs(x - (double)k / (q->n - 1)) < 1e-9) x = (double)k / (q->n - 1);
            st->logpos[p][k] = x;
        }
    }
    for (int c = 0; c < ncands; c++) {
        signed char *pc = st->pos + (size_t)c * st->nparams;
        for (int p = 0; p < st->nparams; p++)
            pc[p] = (signed char)value_pos(s, p, cands[c].v[p]);
        st->key[c] = ft_grid_key(st, pc);
        st->sorted[c] = c;
        st->score[c] = INFINITY;
    }
    sort_by_key(st);
    return 0;
}

void ft_grid_free(ft_strategy *st) {
    free(st->cands);
    free(st->pos);
    free(st->key);
    free(st->sorted);
    free(st->score);
    free(st->known);
    free(st->taken);
    free(st->scratch);
    free(st->fin);
}

int ft_grid_lookup(const ft_strategy *st, int64_t k) {
    if (k < 0) return -1;
    int lo = 0, hi = st->nc - 1;
    while (lo <= hi) {
        int mid = lo + (hi - lo) / 2;
        int64_t m = st->key[st->sorted[mid]];
        if (m == k) return st->sorted[mid];
        if (m < k)
            lo = mid + 1;
        else
            hi = mid - 1;
    }
    return -1;
}

/* One step: another value of one parameter (the next or previous one for numeric parameters,
 * any other for named ones). */
int ft_grid_neighbours(const ft_strategy *st, int c, int *out) {
    const signed char *pc = st->pos + (size_t)c * st->nparams;
    int64_t kc = st->key[c];
    int n = 0;
    if (kc < 0) return 0;
    for (int p = 0; p < st->nparams; p++) {
        for (int q = 0; q < st->pn[p]; q++) {
            if (q == pc[p]) continue;
            if (!st->named[p] && abs(q - pc[p]) != 1) continue;
            int j = ft_grid_lookup(st, kc + (q - pc[p]) * st->stride[p]);
            if (j >= 0) out[n++] = j;
        }
    }
    return n;
}

int ft_grid_hamming_neighbours(const ft_strategy *st, int c, int *out) {
    const signed char *pc = st->pos + (size_t)c * st->nparams;
    int64_t kc = st->key[c];
    int n = 0;
    if (kc < 0) return 0;
    for (int p = 0; p < st->nparams; p++)
        for (int q = 0; q < st->pn[p]; q++) {
            int j = q == pc[p] ? -1 : ft_grid_lookup(st, kc + (q - pc[p]) * st->stride[p]);
            if (j >= 0) out[n++] = j;
        }
    return n;
}

int ft_grid_distance(const ft_strategy *st, const signed char *a, const signed char *b) {
    int d = 0;
    for (int p = 0; p < st->nparams; p++)
        d += st->named[p] ? a[p] != b[p] : abs(a[p] - b[p]);
    return d;
}

int ft_grid_nearest(ft_strategy *st, const signed char *target, int untaken_only) {
    int exact = ft_grid_lookup(st, ft_grid_key(st, target));
    if (exact >= 0 && !(untaken_only && st->taken[exact])) return exact;
    int best = -1, bestd = 0, ties = 0;
    for (int c = 0; c < st->nc; c++) {
        if (untaken_only && st->taken[c]) continue;
        int d = ft_grid_distance(st, st->pos + (size_t)c * st->nparams, target);
        if (best < 0 || d < bestd) {
            best = c;
            bestd = d;
            ties = 1;
        } else if (d == bestd && ft_rng_below(&st->rng, (uint64_t)++ties) == 0) {
            best = c;
        }
    }
    return best;
}

int ft_grid_random_untaken(ft_strategy *st) {
    int left = st->nc - st->ntaken;
    if (left <= 0) return -1;
    int k = (int)ft_rng_below(&st->rng, (uint64_t)left);
    for (int c = 0; c < st->nc; c++)
        if (!st->taken[c] && k-- == 0) return c;
    return -1;
}

int ft_grid_propose(ft_strategy *st, int c) {
    if (c >= 0 && !st->taken[c]) {
        st->taken[c] = 1;
        st->ntaken++;
    }
    return c;
}

int ft_grid_propose_next(ft_strategy *st, const int *order, int n, int *at) {
    while (*at < n) {
        int c = order ? order[*at] : *at;
        ++*at;
        if (!st->taken[c]) return ft_grid_propose(st, c);
    }
    return -1;
}

int ft_grid_farthest_draw(ft_strategy *st, int draws, const unsigned char *from, int none) {
    int best = -1, bestd = -1;
    for (int draw = 0; draw < draws; draw++) {
        int c = ft_grid_random_untaken(st);
        if (c < 0) break;
        int d = none;
        for (int k = 0; k < st->nc; k++)
            if (from[k]) {
                int e = ft_grid_distance(st, st->pos + (size_t)c * st->nparams,
                                         st->pos + (size_t)k * st->nparams);
                if (e < d) d = e;
            }
        if (d > bestd) {
            best = c;
            bestd = d;
        }
    }
    return best;
}

void ft_grid_deck_init(const ft_strategy *st, ft_grid_deck *d) {
    for (int p = 0; p < st->nparams; p++) {
        d->at[p] = 0;
        for (int k = 0; k < st->pn[p]; k++)
            d->card[p][k] = k;
    }
}

int ft_grid_deck_draw(ft_strategy *st, ft_grid_deck *d) {
    signed char target[FT_MAX_PARAMS];
    for (int p = 0; p < st->nparams; p++) {
        if (d->at[p] == 0)
            for (int k = st->pn[p] - 1; k > 0; k--) {
                int j = (int)ft_rng_below(&st->rng, (uint64_t)k + 1), t = d->card[p][k];
                d->card[p][k] = d->card[p][j];
                d->card[p][j] = t;
            }
        target[p] = (signed char)d->card[p][d->at[p]];
        d->at[p] = (d->at[p] + 1) % st->pn[p];
    }
    return ft_grid_nearest(st, target, 1);
}
