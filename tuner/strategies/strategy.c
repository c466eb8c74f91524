/* strategy.c: search strategies over the valid configurations of a space
 * (see include/flaretune/strategy.h).
 *
 * Every strategy sees the candidates as points of a grid: coordinate p of a candidate is the
 * position of its value among parameter p's candidate values. Numeric parameters are ordered
 * (one step is the next larger or smaller candidate value); named ones are not (any other
 * label is one step away). Constraints cut holes in the grid, so a point built by a move,
 * a crossover or a mutation is mapped back to a candidate: exactly (a binary search on the
 * space-order index) for neighbours, to the nearest candidate for children.
 *
 * Kernel landscapes, as recorded on real machines, look like this: one or two parameters
 * (the thread count, the fusion strategy, the GEMM path) move the time by integer factors, a
 * few tile sizes move it by tens of percent and interact (the best tile depends on the thread
 * count), the rest are plateaus where nothing changes within the noise, and the noise itself
 * (a busy core, a descheduled thread) makes a few candidates look far worse than they are. Small
 * CPU spaces have ~100 candidates and a single one within 5% of the optimum. The two guided
 * strategies are built for that shape:
 *
 * - A score model, shared by both: log(score) as a sum of one effect per parameter value,
 *   fitted to the finite scores known. It never decides alone; it screens: of the few
 *   candidates a strategy drew, the one predicted fastest is evaluated. The main effects are what
 *   a few dozen results can estimate, and they carry most of the variance; the interactions are
 *   left to the strategies' own moves.
 * - anneal walks one-parameter steps with a Metropolis rule on relative differences
 *   (a candidate s is accepted from the current c with probability exp(-(s - c) / c / T)), the
 *   temperature decaying geometrically from ANNEAL_T0 to ANNEAL_T1 over a horizon proportional
 *   to the space. Steps onto known candidates are free (no evaluation), so on a plateau the
 *   walk crosses what it already knows and only pays for new ground; a step onto new ground
 *   takes the model's pick of ANNEAL_SCREEN unknown neighbours. It restarts when stuck (a run of
 *   free steps, or ANNEAL_STALE evaluations per parameter without a new best): next to the
 *   best of the ANNEAL_TOP best known candidates that still has unknown neighbours, since the
 *   optimum most often lies next to one of the best few (on the replayed landscapes, restarting
 *   only next to the single best took a fifth more evaluations, half more on the decode one);
 *   when all their neighbourhoods are known, at the model's pick of a few random candidates.
 * - evolve keeps the best results as its population (sqrt(candidates), 4 to 8; steady state,
 *   one child per evaluation), picks parents by tournament, crosses them uniformly, mutates each
 *   parameter with probability EVOLVE_MUT / nparams (numeric ones mostly by one step) and snaps
 *   the child to the nearest valid candidate. Children whose candidate is already known are
 *   drawn again; the model picks among EVOLVE_SCREEN new ones; after EVOLVE_TRIES draws the
 *   unknown candidate nearest the last child is taken. The first generation is stratified:
 *   each parameter's values are dealt from a shuffled deck, so every value is tried early.
 *
 * The constants were chosen by replaying recorded exhaustive landscapes of the cpu backend
 * (`flaretune replay`: decode, train attention, K/V projection, fusion and loss, recorded on a
 * shared 2-core machine) and checked on synthetic ones (tests/test_strategy.c and generated
 * kernel-like landscapes of 50 to 20000 candidates), median evaluations to within 5% of the
 * optimum over 100 seeds: anneal 19% of the candidates on the recorded ones and 5% on the
 * synthetic ones, evolve 23% and 5%, random 35% and 24%.
 */
#include "flaretune/strategy.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "flaretune/rng.h"

const char *const ft_strategy_names[] = {"exhaustive", "random", "anneal", "evolve", NULL};

int ft_strategy_parse(const char *name) {
    for (int i = 0; name && ft_strategy_names[i]; i++)
        if (strcmp(name, ft_strategy_names[i]) == 0) return i;
    return -1;
}

/* ---- hyper-parameters ---------------------------------------------------------------------- */

/* anneal */
#define ANNEAL_T0      0.10  /* start temperature: 10% worse is accepted with p = 1/e          */
#define ANNEAL_T1      0.005 /* end temperature                                                */
#define ANNEAL_HORIZON 0.25  /* cooling horizon after a (re)start, a fraction of the candidates */
#define ANNEAL_STALE   2     /* restart after STALE * nparams evaluations without a new best    */
#define ANNEAL_FREE    2     /* restart after FREE * nparams free steps in a row               */
#define ANNEAL_SCREEN  2     /* unknown neighbours drawn per evaluation; the model picks one    */
#define ANNEAL_TOP     8     /* a restart resumes next to one of the TOP best known             */
#define RESTART_DRAWS  4     /* random candidates a restart from scratch chooses among          */
/* evolve */
#define EVOLVE_POP_MIN    4 /* population: sqrt(candidates), within [MIN, MAX]              */
#define EVOLVE_POP_MAX    8
#define EVOLVE_INIT       0.5  /* stratified first generation, a fraction of the population    */
#define EVOLVE_TOURNAMENT 3    /* tournament size                                               */
#define EVOLVE_MUT        1.0  /* expected mutated parameters per child                         */
#define EVOLVE_STEP_P     0.75 /* numeric mutation: one step with this probability, else any    */
#define EVOLVE_SCREEN     4    /* distinct new children drawn per evaluation; the model picks   */
#define EVOLVE_TRIES      16   /* draws before taking the unknown candidate nearest a child     */
/* the score model */
#define MODEL_MIN    2   /* it speaks once it has MIN * nparams finite scores                */
#define MODEL_RIDGE  1.0 /* shrinks the effect of a value seen few times toward 0            */
#define MODEL_SWEEPS 3   /* backfitting sweeps                                               */

/* ---- the candidate grid -------------------------------------------------------------------- */

struct ft_strategy {
    ft_strategy_kind kind;
    int np, nc;
    int pn[FT_MAX_PARAMS];    /* candidate values of each parameter                    */
    int named[FT_MAX_PARAMS]; /* 1: unordered labels                                   */
    int64_t stride[FT_MAX_PARAMS];
    ft_config *cands;
    signed char *pos; /* nc * np coordinates; -1 where a value is not a candidate */
    int64_t *key;     /* space-order index of each candidate                         */
    int *sorted;      /* candidates by key                                            */
    double *score;
    unsigned char *known, *taken; /* taken: known or proposed                          */
    int nknown, ntaken;
    int best; /* best known, -1 before any */
    ft_rng rng;
    int *scratch; /* nc ints */

    int scan; /* exhaustive, random: next position in the order */
    int *perm;

    /* anneal */
    int cur, pending, pending_start;
    int evals_since_restart, stale;
    int horizon;

    /* the score model: log(score) ~ mu + sum_p eff[p][value position] */
    int *fin; /* known candidates with a finite score, in the order they became known */
    int nfin, model_n;
    double mu, eff[FT_MAX_PARAMS][FT_MAX_VALUES];

    /* evolve */
    int popsize, npop;
    int *pop; /* the best known finite candidates, best first */
    int init_left;
    int deck[FT_MAX_PARAMS][FT_MAX_VALUES], deck_at[FT_MAX_PARAMS];
};

static double clean(double s) { return isnan(s) ? INFINITY : s; }

static int value_pos(const ft_space *s, int p, int value) {
    for (int k = 0; k < s->params[p].n; k++)
        if (s->params[p].values[k] == value) return k;
    return -1;
}

static int64_t key_of(const ft_strategy *st, const signed char *pos) {
    int64_t k = 0;
    for (int p = 0; p < st->np; p++) {
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

/* Candidate with space-order index k, or -1 (not valid). */
static int lookup(const ft_strategy *st, int64_t k) {
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

/* Valid candidates one step from c: another value of one parameter (the next or previous one
 * for numeric parameters, any other for named ones). */
static int neighbours(const ft_strategy *st, int c, int *out) {
    const signed char *pc = st->pos + (size_t)c * st->np;
    int64_t kc = st->key[c];
    int n = 0;
    if (kc < 0) return 0;
    for (int p = 0; p < st->np; p++) {
        for (int q = 0; q < st->pn[p]; q++) {
            if (q == pc[p]) continue;
            if (!st->named[p] && abs(q - pc[p]) != 1) continue;
            int j = lookup(st, kc + (q - pc[p]) * st->stride[p]);
            if (j >= 0) out[n++] = j;
        }
    }
    return n;
}

static int distance(const ft_strategy *st, const signed char *a, const signed char *b) {
    int d = 0;
    for (int p = 0; p < st->np; p++)
        d += st->named[p] ? a[p] != b[p] : abs(a[p] - b[p]);
    return d;
}

/* The candidate nearest to the grid point `target` (ties broken at random), among the untaken
 * ones only when untaken_only; -1 when there is none. */
static int nearest(ft_strategy *st, const signed char *target, int untaken_only) {
    int exact = lookup(st, key_of(st, target));
    if (exact >= 0 && !(untaken_only && st->taken[exact])) return exact;
    int best = -1, bestd = 0, ties = 0;
    for (int c = 0; c < st->nc; c++) {
        if (untaken_only && st->taken[c]) continue;
        int d = distance(st, st->pos + (size_t)c * st->np, target);
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

static int random_untaken(ft_strategy *st) {
    int left = st->nc - st->ntaken;
    if (left <= 0) return -1;
    int k = (int)ft_rng_below(&st->rng, (uint64_t)left);
    for (int c = 0; c < st->nc; c++)
        if (!st->taken[c] && k-- == 0) return c;
    return -1;
}

/* ---- the score model ----------------------------------------------------------------------- */

/* log(score) ~ mu + sum_p eff[p][value of p], fitted by backfitting (ridge regression on one
 * parameter at a time, MODEL_SWEEPS rounds) to the finite scores known; refitted lazily when a
 * new score has arrived and the model is asked. */
static double log_score(double s) { return log(s > 1e-300 ? s : 1e-300); }

static int model_ready(const ft_strategy *st) {
    return st->nfin >= MODEL_MIN * st->np && st->nfin >= 3;
}

static void model_fit(ft_strategy *st) {
    if (st->model_n == st->nfin || !model_ready(st)) return;
    st->model_n = st->nfin;
    double sum = 0;
    for (int k = 0; k < st->nfin; k++)
        sum += log_score(st->score[st->fin[k]]);
    st->mu = sum / st->nfin;
    memset(st->eff, 0, sizeof st->eff);
    double acc[FT_MAX_VALUES];
    int cnt[FT_MAX_VALUES];
    for (int sweep = 0; sweep < MODEL_SWEEPS; sweep++)
        for (int p = 0; p < st->np; p++) {
            memset(acc, 0, sizeof acc);
            memset(cnt, 0, sizeof cnt);
            for (int k = 0; k < st->nfin; k++) {
                const signed char *pc = st->pos + (size_t)st->fin[k] * st->np;
                double r = log_score(st->score[st->fin[k]]) - st->mu;
                for (int q = 0; q < st->np; q++)
                    if (q != p && pc[q] >= 0) r -= st->eff[q][pc[q]];
                if (pc[p] >= 0) {
                    acc[pc[p]] += r;
                    cnt[pc[p]]++;
                }
            }
            for (int v = 0; v < st->pn[p]; v++)
                st->eff[p][v] = acc[v] / (cnt[v] + MODEL_RIDGE);
        }
}

static double model_predict(const ft_strategy *st, int c) {
    const signed char *pc = st->pos + (size_t)c * st->np;
    double y = st->mu;
    for (int p = 0; p < st->np; p++)
        if (pc[p] >= 0) y += st->eff[p][pc[p]];
    return y;
}

/* Of candidates a and b, the one the model prefers (a without a model). */
static int model_pick(ft_strategy *st, int a, int b) {
    if (b < 0 || !model_ready(st)) return a;
    if (a < 0) return b;
    model_fit(st);
    return model_predict(st, b) < model_predict(st, a) ? b : a;
}

/* Where a walk starts afresh: the model's pick of a few random untaken candidates, or before
 * the model speaks, the one of them farthest from everything known. */
static int fresh_point(ft_strategy *st) {
    int best = -1, bestd = -1;
    if (model_ready(st)) {
        for (int draw = 0; draw < RESTART_DRAWS; draw++)
            best = model_pick(st, best, random_untaken(st));
        return best;
    }
    for (int draw = 0; draw < RESTART_DRAWS; draw++) {
        int c = random_untaken(st);
        if (c < 0) return -1;
        int d = st->np * 64;
        for (int k = 0; k < st->nc; k++)
            if (st->known[k]) {
                int e = distance(st, st->pos + (size_t)c * st->np, st->pos + (size_t)k * st->np);
                if (e < d) d = e;
            }
        if (d > bestd) {
            best = c;
            bestd = d;
        }
    }
    return best;
}

static int propose(ft_strategy *st, int c) {
    if (c >= 0 && !st->taken[c]) {
        st->taken[c] = 1;
        st->ntaken++;
    }
    return c;
}

/* ---- exhaustive and random ----------------------------------------------------------------- */

static int ordered_next(ft_strategy *st, const int *order) {
    while (st->scan < st->nc) {
        int c = order ? order[st->scan] : st->scan;
        st->scan++;
        if (!st->taken[c]) return propose(st, c);
    }
    return -1;
}

/* ---- simulated annealing ------------------------------------------------------------------- */

static double anneal_temp(const ft_strategy *st) {
    double f = (double)st->evals_since_restart / st->horizon;
    if (f > 1) f = 1;
    return ANNEAL_T0 * pow(ANNEAL_T1 / ANNEAL_T0, f);
}

/* Metropolis on the relative difference; rejected candidates (INFINITY) are never moved to
 * unless the walk stands on one itself. */
static int anneal_accept(ft_strategy *st, double cur, double cand) {
    if (!(cand < INFINITY)) return !(cur < INFINITY);
    if (!(cur < INFINITY) || cand <= cur) return 1;
    double d = cur > 0 ? (cand - cur) / cur : INFINITY;
    return ft_rng_uniform(&st->rng) < exp(-d / anneal_temp(st));
}

static int has_untaken_neighbour(const ft_strategy *st, int c) {
    int n = neighbours(st, c, st->scratch);
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

static int anneal_next(ft_strategy *st) {
    if (st->pending >= 0) {
        int p = st->pending;
        st->pending = -1;
        if (st->known[p]) {
            st->evals_since_restart++;
            if (st->pending_start || st->cur < 0 ||
                anneal_accept(st, st->score[st->cur], st->score[p]))
                st->cur = p;
        }
    }
    int free_steps = 0, restart = st->cur < 0 || st->stale >= ANNEAL_STALE * st->np;
    for (int guard = 0; st->ntaken < st->nc; guard++) {
        if (guard > 64 * (st->np + 1)) return propose(st, random_untaken(st));
        if (restart || free_steps > ANNEAL_FREE * st->np) {
            restart = 0;
            free_steps = 0;
            st->stale = 0;
            st->evals_since_restart = 0;
            int top = restart_point(st);
            if (top >= 0) {
                st->cur = top;
            } else {
                int c = fresh_point(st);
                st->pending = c;
                st->pending_start = 1;
                return propose(st, c);
            }
        }
        int n = neighbours(st, st->cur, st->scratch), m = 0;
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
                j = model_pick(st, j, st->scratch[ft_rng_below(&st->rng, (uint64_t)u)]);
            st->pending = j;
            st->pending_start = 0;
            return propose(st, j);
        }
        free_steps++;
        if (anneal_accept(st, st->score[st->cur], st->score[j])) st->cur = j;
    }
    return -1;
}

/* ---- evolutionary -------------------------------------------------------------------------- */

static void pop_insert(ft_strategy *st, int c) {
    double s = st->score[c];
    if (!(s < INFINITY)) return;
    for (int k = 0; k < st->npop; k++)
        if (st->pop[k] == c) return;
    if (st->npop == st->popsize && !(s < st->score[st->pop[st->npop - 1]])) return;
    int k = st->npop < st->popsize ? st->npop++ : st->npop - 1;
    while (k > 0 && s < st->score[st->pop[k - 1]]) {
        st->pop[k] = st->pop[k - 1];
        k--;
    }
    st->pop[k] = c;
}

static void pop_rebuild(ft_strategy *st) {
    st->npop = 0;
    for (int c = 0; c < st->nc; c++)
        if (st->known[c]) pop_insert(st, c);
}

static int tournament(ft_strategy *st) {
    int w = st->pop[ft_rng_below(&st->rng, (uint64_t)st->npop)];
    for (int k = 1; k < EVOLVE_TOURNAMENT; k++) {
        int c = st->pop[ft_rng_below(&st->rng, (uint64_t)st->npop)];
        if (st->score[c] < st->score[w]) w = c;
    }
    return w;
}

/* A stratified first generation: each parameter's values are dealt from a shuffled deck. */
static int stratified(ft_strategy *st) {
    signed char target[FT_MAX_PARAMS];
    for (int p = 0; p < st->np; p++) {
        if (st->deck_at[p] == 0)
            for (int k = st->pn[p] - 1; k > 0; k--) {
                int j = (int)ft_rng_below(&st->rng, (uint64_t)k + 1), t = st->deck[p][k];
                st->deck[p][k] = st->deck[p][j];
                st->deck[p][j] = t;
            }
        target[p] = (signed char)st->deck[p][st->deck_at[p]];
        st->deck_at[p] = (st->deck_at[p] + 1) % st->pn[p];
    }
    return nearest(st, target, 1);
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
    if (st->ntaken >= st->nc) return -1;
    if (st->init_left > 0 || st->npop < 2) {
        if (st->init_left > 0) st->init_left--;
        return propose(st, stratified(st));
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
        int c = nearest(st, child, 0);
        if (c < 0 || st->taken[c] || c == pick) continue;
        drawn++;
        pick = model_pick(st, pick, c);
    }
    return propose(st, pick >= 0 ? pick : nearest(st, child, 1));
}

/* ---- the interface ------------------------------------------------------------------------- */

ft_strategy *ft_strategy_new(ft_strategy_kind kind, const ft_space *s, const ft_config *cands,
                             int ncands, uint64_t seed) {
    if (ncands < 1 || (int)kind < 0 || kind >= FT_STRAT_COUNT) return NULL;
    ft_strategy *st = calloc(1, sizeof *st);
    if (!st) return NULL;
    st->kind = kind;
    st->np = s->nparams;
    st->nc = ncands;
    size_t nc = (size_t)ncands;
    st->cands = malloc(nc * sizeof *st->cands);
    st->pos = malloc(nc * (size_t)(st->np ? st->np : 1));
    st->key = malloc(nc * sizeof *st->key);
    st->sorted = malloc(nc * sizeof *st->sorted);
    st->score = malloc(nc * sizeof *st->score);
    st->known = calloc(nc, 1);
    st->taken = calloc(nc, 1);
    st->scratch = malloc((nc > FT_MAX_PARAMS * FT_MAX_VALUES ? nc : FT_MAX_PARAMS * FT_MAX_VALUES) *
                         sizeof *st->scratch);
    st->perm = malloc(nc * sizeof *st->perm);
    st->pop = malloc((EVOLVE_POP_MAX) * sizeof *st->pop);
    st->fin = malloc(nc * sizeof *st->fin);
    if (!st->cands || !st->pos || !st->key || !st->sorted || !st->score || !st->known ||
        !st->taken || !st->scratch || !st->perm || !st->pop || !st->fin) {
        ft_strategy_free(st);
        return NULL;
    }
    memcpy(st->cands, cands, nc * sizeof *cands);
    int64_t stride = 1;
    for (int p = st->np - 1; p >= 0; p--) {
        st->pn[p] = s->params[p].n;
        st->named[p] = s->params[p].labels != NULL;
        st->stride[p] = stride;
        stride *= s->params[p].n;
    }
    for (int p = 0; p < st->np; p++)
        for (int k = 0; k < st->pn[p]; k++)
            st->deck[p][k] = k;
    for (int c = 0; c < ncands; c++) {
        signed char *pc = st->pos + (size_t)c * st->np;
        for (int p = 0; p < st->np; p++)
            pc[p] = (signed char)value_pos(s, p, cands[c].v[p]);
        st->key[c] = key_of(st, pc);
        st->sorted[c] = c;
        st->score[c] = INFINITY;
    }
    sort_by_key(st);

    ft_rng_seed(&st->rng, seed);
    st->best = -1;
    st->cur = -1;
    st->pending = -1;
    for (int c = 0; c < ncands; c++)
        st->perm[c] = c;
    if (kind == FT_STRAT_RANDOM)
        for (int c = ncands - 1; c > 0; c--) {
            int j = (int)ft_rng_below(&st->rng, (uint64_t)c + 1), t = st->perm[c];
            st->perm[c] = st->perm[j];
            st->perm[j] = t;
        }
    st->horizon = (int)(ANNEAL_HORIZON * ncands);
    if (st->horizon < 4 * st->np) st->horizon = 4 * st->np;
    if (st->horizon < 1) st->horizon = 1;
    int pop = (int)lround(sqrt((double)ncands));
    st->popsize = pop < EVOLVE_POP_MIN   ? EVOLVE_POP_MIN
                  : pop > EVOLVE_POP_MAX ? EVOLVE_POP_MAX
                                         : pop;
    st->init_left = kind == FT_STRAT_EVOLVE ? (int)(EVOLVE_INIT * st->popsize) : 0;
    return st;
}

int ft_strategy_next(ft_strategy *st) {
    if (!st || st->ntaken >= st->nc) return -1;
    switch (st->kind) {
    case FT_STRAT_EXHAUSTIVE: return ordered_next(st, NULL);
    case FT_STRAT_RANDOM: return ordered_next(st, st->perm);
    case FT_STRAT_ANNEAL: return anneal_next(st);
    case FT_STRAT_EVOLVE: return evolve_next(st);
    default: return -1;
    }
}

void ft_strategy_report(ft_strategy *st, int i, double score) {
    if (!st || i < 0 || i >= st->nc) return;
    score = clean(score);
    int again = st->known[i];
    st->score[i] = score;
    if (!again) {
        st->known[i] = 1;
        st->nknown++;
    }
    if (!st->taken[i]) {
        st->taken[i] = 1;
        st->ntaken++;
    }
    if (!again && score < INFINITY) st->fin[st->nfin++] = i;
    if (again) {
        st->nfin = 0;
        st->model_n = -1;
        for (int c = 0; c < st->nc; c++)
            if (st->known[c] && st->score[c] < INFINITY) st->fin[st->nfin++] = c;
        st->best = -1;
        for (int c = 0; c < st->nc; c++)
            if (st->known[c] && (st->best < 0 || st->score[c] < st->score[st->best])) st->best = c;
        pop_rebuild(st);
        return;
    }
    if (st->best < 0 || score < st->score[st->best]) {
        st->best = i;
        st->stale = 0;
    } else if (i == st->pending) {
        st->stale++;
    }
    pop_insert(st, i);
}

void ft_strategy_free(ft_strategy *st) {
    if (!st) return;
    free(st->cands);
    free(st->pos);
    free(st->key);
    free(st->sorted);
    free(st->score);
    free(st->known);
    free(st->taken);
    free(st->scratch);
    free(st->perm);
    free(st->pop);
    free(st->fin);
    free(st);
}
