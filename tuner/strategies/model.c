/* model.c: the score model the guided strategies (anneal, evolve) screen their draws with
 * (see strategy_impl.h).
 *
 * log(score) as a sum of one effect per parameter value, fitted to the finite scores known. It
 * never decides alone; it screens: of the few candidates a strategy drew, the one predicted
 * fastest is evaluated. The main effects are what a few dozen results can estimate, and they
 * carry most of the variance of a kernel landscape; the interactions are left to the
 * strategies' own moves.
 */
#include <math.h>
#include <string.h>

#include "strategy_impl.h"

/* The bounds keep the products below (min * nparams) within an int; a ridge of 0 would divide
 * 0 by 0 for a value never seen. */
int ft_model_opts_check(const ft_model_opts *o) {
    return o->min >= 0 && o->min <= 1 << 20 && o->ridge > 0 && o->ridge < INFINITY &&
                   o->sweeps >= 0 && o->sweeps <= 1 << 10
               ? 0
               : -1;
}

static double log_score(double s) { return log(s > 1e-300 ? s : 1e-300); }

int ft_model_ready(const ft_strategy *st) {
    return st->nfin >= st->model.min * st->nparams && st->nfin >= 3;
}

/* Backfitting (ridge regression on one parameter at a time, model.sweeps rounds) to the finite
 * scores known; refitted lazily when a new score has arrived and the model is asked. */
static void model_fit(ft_strategy *st) {
    if (st->model_n == st->nfin || !ft_model_ready(st)) return;
    st->model_n = st->nfin;
    double sum = 0;
    for (int k = 0; k < st->nfin; k++)
        sum += log_score(st->score[st->fin[k]]);
    st->mu = sum / st->nfin;
    memset(st->eff, 0, sizeof st->eff);
    double acc[FT_MAX_VALUES];
    int cnt[FT_MAX_VALUES];
    for (int sweep = 0; sweep < st->model.sweeps; sweep++)
        for (int p = 0; p < st->nparams; p++) {
            memset(acc, 0, sizeof acc);
            memset(cnt, 0, sizeof cnt);
            for (int k = 0; k < st->nfin; k++) {
                const signed char *pc = st->pos + (size_t)st->fin[k] * st->nparams;
                double r = log_score(st->score[st->fin[k]]) - st->mu;
                for (int q = 0; q < st->nparams; q++)
                    if (q != p && pc[q] >= 0) r -= st->eff[q][pc[q]];
                if (pc[p] >= 0) {
                    acc[pc[p]] += r;
                    cnt[pc[p]]++;
                }
            }
            for (int v = 0; v < st->pn[p]; v++)
                st->eff[p][v] = acc[v] / (cnt[v] + st->model.ridge);
        }
}

static double model_predict(const ft_strategy *st, int c) {
    const signed char *pc = st->pos + (size_t)c * st->nparams;
    double y = st->mu;
    for (int p = 0; p < st->nparams; p++)
        if (pc[p] >= 0) y += st->eff[p][pc[p]];
    return y;
}

int ft_model_pick(ft_strategy *st, int a, int b) {
    if (b < 0 || !ft_model_ready(st)) return a;
    if (a < 0) return b;
    model_fit(st);
    return model_predict(st, b) < model_predict(st, a) ? b : a;
}
