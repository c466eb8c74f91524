/* bayes.c: Bayesian optimisation over the candidate grid (see tuner/strategies/strategy.h).
 *
 * The model is a Gaussian process on the log of the score, over the candidates' grid
 * coordinates (grid.c). Its kernel is a product over the parameters, so it models how they
 * interact (the best tile depends on the thread count), not only their separate effects:
 *   k(a, b) = s2 * prod_p f_p(a_p, b_p)
 * with f_p a Matern 5/2 function of |x_a - x_b| / l_p on a numeric parameter, its values placed
 * over [0, 1] by their logs where all are positive, else by their ranks (ordinal: neighbouring
 * values are alike), and f_p = exp(-[a != b] / l_p) on a named one (any two labels are equally
 * far apart). The length scales l_p (one per parameter: a parameter that does not matter gets
 * a long one) and the noise are chosen by the marginal likelihood, coordinate by coordinate
 * over a ladder of values, refitted as results come in; the signal variance s2 and the mean
 * have their closed-form estimates. A rejected candidate counts as the worst score seen, so
 * the model steers away from the corner it lies in.
 *
 * Inference is exact, on a chosen training set: up to `train` results, past that many the best
 * few and the latest (build_training says why). Every candidate's mean is computed at each
 * step; its expected improvement only where a bound (from its most correlated training point)
 * says it could beat the best one found, which leaves the proposals exactly as a full pass
 * would make them at a half to a third of the cost on spaces of thousands.
 *
 * The next candidate maximises the expected improvement over the best known score (minimising:
 * E[max(0, best - y - xi)] under the posterior), in log units, so it reads as a relative
 * improvement: ft_strategy_converged compares the largest of them with its threshold. The
 * first `init` evaluations, before the model has anything to say, are dealt from each
 * parameter's shuffled values (`stratified` of them; any others are each the draw farthest from
 * everything taken); with a prior score per candidate
 * (ft_strategy_warm) the model starts from the prior's ranking instead, its mean a line in the
 * prior's log fitted to the results, so a landscape measured at another shape steers the
 * first proposals.
 *
 * Every `local`-th proposal is confined to the untaken neighbours of the best few known (the
 * one of them with the largest expected improvement): a model fitted to a few dozen points can
 * be confidently wrong about a lone optimum next to a good point, and a local step is cheap
 * insurance (what anneal and evolve do all the time, bayes does every other time). Once every
 * candidate one parameter away from a good point is known, the step widens to two parameters
 * around it before it moves on to the next best.
 *
 * A batch (ft_strategy_next_batch) is chosen one candidate at a time, each conditioned on the
 * ones before it as if they had scored the model's mean (the "kriging believer"), which lowers
 * the uncertainty around them and so spreads the batch; candidates proposed but not yet
 * reported are conditioned on in the same way by the next proposals.
 */
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "strategy_impl.h"

static const ft_bayes_opts bayes_defaults = {
    /* Five first proposals, all dealt from the parameters' shuffled values (stratified), then
     * the model. A first point drawn uniformly from the valid candidates favours the values
     * that occur in many of them (a small block size combines with every tile), and farthest
     * draws favour the corners of the grid; dealing each parameter's values evenly is a Latin
     * hypercube over what the user listed, which is what the parameters' ranges say about
     * where the optimum may be. Chosen by leave-one-landscape-out over nine landscapes (six
     * GPU, three CPU) against the earlier three farthest draws and against 1 or 3 dealt: this
     * setting was chosen in 8 of the 9 folds (docs/search.md). */
    .init = 5,
    /* Every second proposal is the best of the untaken neighbours of the three best known.
     * Without it the model, confident early, can settle on a wrong basin when the optimum is
     * a lone point (a thread count that only pays at one tile size): on two of the recorded
     * landscapes the search then reached 5% of the optimum within a quarter of the space in
     * only 63% and 84% of the seeds; with it, in 100% and 100%, at the price of about one more
     * evaluation elsewhere. Every third: 85% and 100%; from the single best only: 84%. */
    .local = 2,
    .top = 3,
    /* No margin: with the noise term the model already hedges against chasing noise, and a
     * margin delays the final descent into the optimum's neighbours. */
    .xi = 0.0,
    .fit_every = 1,
    .cost_weight = 0.0,
    /* The settings below were chosen by leave-one-landscape-out over the recorded GPU and CPU
     * landscapes (scripts/search-select.py; docs/search.md "How the defaults were chosen"):
     * each is the setting the rule picks, none was set for one landscape. A local step to any
     * other value of one parameter (hamming 1) rather than the next one: on GPU landscapes the
     * good block sizes are not next to each other (32 and 128 good, 48 and 64 not); the next
     * value only needed 1.3x the evaluations over all landscapes. And once every such
     * neighbour of a good point is known, two parameters at once around it (hamming 2) before
     * the next best: a lone optimum two changes away from a plateau of near-best points (the
     * A100 convolution's: block 32x4 where 128x2 and 128x1 are 7% and 11% slower) is then
     * reached from it. Chosen in 8 of the 9 folds; over 100 seeds and 4 orderings the A100
     * convolution's median to 5% went from 367.5 evaluations to 240, elsewhere within one. */
    .hamming = 2,
    /* Past 128 results, the best 32 and the 96 latest: a model of the best alone never learns
     * where the search is losing (on a needle landscape it then stalled at 1.47x the optimum
     * from the 25th evaluation to the 600th). 64, 128 and 256 results (three quarters latest)
     * were compared by leave-one-landscape-out on the methodology score: 128 was chosen in 9 of
     * the 9 folds (0.658 over all nine against 0.619 at 64 and 0.646 at 256). It only proposes
     * differently past the 64th result, so only the A100 convolution's needle moved: 305 -> 210.5
     * evaluations to 5%. A proposal there costs 4.7 ms of CPU (1.0 ms at 64). */
    .recent = 96,
    .train = 128,
    /* A random proposal every 4th or 8th did not help on any landscape it was tried on. */
    .explore = 0,
    .stratified = 5, /* with init, above */
    /* A crossing of two of the best known every 3rd, 4th or 6th proposal was chosen in none of
     * the nine folds, and needed more evaluations on the A100 convolution's lone optimum. */
    .cross = 0,
    /* Once the best has gone 128 results without improving, the proposals between local steps
     * are spread over what is untaken (the farthest of a few draws) rather than the model's
     * best, until it improves: a model fitted around a local optimum far from a lone needle
     * keeps proposing that region (on the A100 convolution, a quarter of the seeds sat at 1.47x
     * the optimum from about the 150th evaluation to past the 600th). The local steps go on.
     * Chosen by leave-one-landscape-out on the methodology score (every seed's best over the
     * budget, not only the median seed's count) against 64 and none: in 8 of the 9 folds; with
     * the A100 convolution left out the rule keeps none (docs/search.md). */
    .stall = 128,
    /* A numeric parameter whose values are all positive (block sizes, tiles, thread counts) is
     * placed on the log of its values, not on their ranks: a kernel's sizes act by ratios (16
     * to 32 threads doubles the work a block does, 240 to 256 adds 7%), so values listed in
     * even steps (block_size_x 16, 32, ..., 256) are near each other at the top of their range
     * and far apart at the bottom. Where the values double at each step the two are the same.
     * Chosen by leave-one-landscape-out over the nine landscapes against ranks: in 9 of the 9
     * folds on the methodology score and on the median counts alike (docs/search.md). */
    .log_scale = 1,
};

#define PRIOR_SHRINK 40.0 /* results at which the prior's slope counts half (fit_prior) */
#define NLADDER 7
#define NNOISE 4

/* Length scales tried, in units of a numeric parameter's span (named: the inverse weight of a
 * different label). A numeric parameter's factor is Matern 5/2 rather than the squared
 * exponential: kernel landscapes have kinks (a tile that stops fitting a cache), and the
 * rougher kernel predicted them better (about one evaluation fewer to 1% on the decode
 * landscapes, the same elsewhere). */
static const double ladder[NLADDER] = {0.125, 0.25, 0.5, 1, 2, 4, 16};
/* Noise, a fraction of the signal variance: ~1% to ~20% of the log spread. */
static const double noises[NNOISE] = {1e-4, 1e-3, 1e-2, 0.05};

typedef struct {
    ft_bayes_opts o;
    int ninit;
    ft_grid_deck deck;     /* the first o.stratified proposals' values            */
    int dealt;             /* proposals dealt from it so far                      */
    int li[FT_MAX_PARAMS]; /* each parameter's length scale, an index into ladder */
    int ni;                /* the noise, an index into noises                     */
    int fitted_n;          /* training set size at the last refit (0: never)      */
    double *F[FT_MAX_PARAMS]; /* kernel factor tables, pn x pn, for the current scales */
    /* the training set */
    int n;
    int *idx;
    double *y, *z, *L, *alpha, *kx;     /* kx: a column of L (factor) */
    double *w;                          /* the weighted improvements (bayes_next), nc */
    double *vb;                         /* the forward solves of exact_ei_block, nt x EI_BLOCK */
    /* means(): the candidates not known, their coordinates (parameter-major) and sums */
    int *ulist;
    unsigned char *upos;
    double *um, *ukmax, *uk;
    double ym, ys, s2;
    double pa, pb; /* prior mean: pa + pb * log(prior) (pb = 0: none) */
    /* the acquisition, over every candidate */
    double *ei, *mu, *ub; /* ub: a bound on each one's expected improvement */
    double best_l;        /* the best known log score at the last acquisition */
    int ei_at; /* ntaken when ei was computed; -1: stale */
    double gain;
    double *tables; /* storage of F */
} bayes_state;

/* The log of a finite score; a score at or below zero (which no measurement gives, but a
 * caller may report) counts as the smallest positive one rather than poisoning the model. */
static double lscore(const ft_strategy *st, int c) {
    return log(st->score[c] > 1e-300 ? st->score[c] : 1e-300);
}

static double phi(double z) { return 0.3989422804014327 * exp(-0.5 * z * z); }
static double Phi(double z) { return 0.5 * erfc(-z * 0.7071067811865476); }

/* f_p for the length scale index li. */
static void fill_table(const ft_strategy *st, bayes_state *b, int p) {
    int n = st->pn[p];
    double l = ladder[b->li[p]];
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++) {
            double f;
            if (st->named[p]) {
                f = i == j ? 1.0 : exp(-1.0 / l);
            } else {
                double d = n > 1 ? (double)(i - j) / (n - 1) : 0;
                if (b->o.log_scale && st->logpos[p][0] >= 0)
                    d = st->logpos[p][i] - st->logpos[p][j];
                double r = sqrt(5.0) * fabs(d) / l;
                f = (1 + r + r * r / 3) * exp(-r);
            }
            b->F[p][i * n + j] = f;
        }
}

static double kern(const ft_strategy *st, const bayes_state *b, int c1, int c2) {
    const signed char *a = st->pos + (size_t)c1 * st->nparams, *q = st->pos + (size_t)c2 * st->nparams;
    double k = 1;
    for (int p = 0; p < st->nparams; p++)
        k *= b->F[p][a[p] * st->pn[p] + q[p]];
    return k;
}

/* Cholesky of the training kernel (+ noise) into b->L; alpha = K^-1 z; the log marginal
 * likelihood with s2 at its estimate. -INFINITY when not positive definite. */
static double factor(const ft_strategy *st, bayes_state *b) {
    int n = b->n;
    double noise = noises[b->ni], *L = b->L, *col = b->kx;
    for (int i = 0; i < n; i++)
        for (int j = 0; j <= i; j++)
            L[i * n + j] = kern(st, b, b->idx[i], b->idx[j]) + (i == j ? noise : 0);
    /* Column by column, each later element less the product of its row's and column's factors
     * in this column: every element gets the same subtractions in the same order as a row by
     * row dot product would give it, and the inner loop runs along a row. */
    for (int k = 0; k < n; k++) {
        double d = L[k * n + k];
        if (!(d > 1e-12)) return -INFINITY;
        d = L[k * n + k] = sqrt(d);
        for (int i = k + 1; i < n; i++)
            col[i] = L[i * n + k] /= d;
        for (int i = k + 1; i < n; i++) {
            double *restrict Li = L + (size_t)i * n;
            const double lik = col[i], *restrict cj = col;
            for (int j = k + 1; j <= i; j++)
                Li[j] -= lik * cj[j];
        }
    }
    /* alpha = L^-T L^-1 z */
    double *a = b->alpha, logdet = 0, q = 0;
    for (int i = 0; i < n; i++) {
        double s = b->z[i];
        for (int k = 0; k < i; k++)
            s -= L[i * n + k] * a[k];
        a[i] = s / L[i * n + i];
        q += a[i] * a[i];
        logdet += log(L[i * n + i]);
    }
    for (int i = n; i-- > 0;) {
        double s = a[i];
        for (int k = i + 1; k < n; k++)
            s -= L[k * n + i] * a[k];
        a[i] = s / L[i * n + i];
    }
    b->s2 = q / n > 1e-12 ? q / n : 1e-12;
    return -0.5 * n * log(b->s2) - logdet;
}

/* The log score each training candidate stands for: measured, imputed (rejected: the worst
 * finite score) or fantasized (taken, not yet known: the model's mean, from the last
 * acquisition, or the prior mean before any). */
static int build_training(ft_strategy *st, bayes_state *b) {
    double worst = -INFINITY;
    for (int j = 0; j < st->nfin; j++) {
        double l = lscore(st, st->fin[j]);
        if (l > worst) worst = l;
    }
    int n = 0;
    if (st->nfin == 0) return b->n = 0;
    /* finite results, a selection of them when there are more than o.train */
    if (st->nfin <= b->o.train) {
        for (int j = 0; j < st->nfin; j++) {
            b->idx[n] = st->fin[j];
            b->y[n++] = lscore(st, st->fin[j]);
        }
    } else {
        /* The best half, then the most recent results: a model of the best alone never learns
         * where the search is losing, and keeps proposing a region whose every result fell out
         * of its training set (on a needle landscape it stalled at 1.47x the optimum from the
         * 25th evaluation to the 600th). */
        int *order = st->scratch, nbest = b->o.train - b->o.recent;
        for (int j = 0; j < st->nfin; j++)
            order[j] = st->fin[j];
        for (int j = 0; j < nbest; j++) { /* a partial selection: the best nbest by score */
            int m = j;
            for (int k = j + 1; k < st->nfin; k++)
                if (st->score[order[k]] < st->score[order[m]]) m = k;
            int t = order[j];
            order[j] = order[m];
            order[m] = t;
            b->idx[n] = order[j];
            b->y[n++] = lscore(st, order[j]);
        }
        for (int j = st->nfin - 1; j >= 0 && n < b->o.train; j--) {
            int c = st->fin[j], dup = 0;
            for (int k = 0; k < nbest && !dup; k++)
                dup = b->idx[k] == c;
            if (!dup) {
                b->idx[n] = c;
                b->y[n++] = lscore(st, c);
            }
        }
    }
    /* rejected ones (a few: they mark corners) and pending ones */
    for (int c = 0; c < st->nc && n < b->o.train + 16; c++) {
        if (st->known[c] && !(st->score[c] < INFINITY)) {
            b->idx[n] = c;
            b->y[n++] = worst;
        } else if (st->taken[c] && !st->known[c] && !isnan(b->mu[c])) {
            b->idx[n] = c;
            b->y[n++] = b->mu[c];
        }
    }
    return b->n = n;
}

/* A least-squares line y ~ a + slope * x, from its running sums (the prior's line in fit_prior,
 * the cost's in weigh_cost). */
typedef struct {
    double sx, sy, sxx, sxy;
    int m;
} line_fit;

static void line_add(line_fit *f, double x, double y) {
    f->sx += x;
    f->sy += y;
    f->sxx += x * x;
    f->sxy += x * y;
    f->m++;
}

/* The slope; `flat` when the x values do not spread (or there are none). */
static double line_slope(const line_fit *f, double flat) {
    if (f->m == 0) return flat;
    double mx = f->sx / f->m, my = f->sy / f->m, vx = f->sxx / f->m - mx * mx;
    return vx > 1e-12 ? (f->sxy / f->m - mx * my) / vx : flat;
}

static double prior_log(const ft_strategy *st, int c) {
    return st->prior && st->prior[c] > 0 && isfinite(st->prior[c]) ? log(st->prior[c]) : NAN;
}

/* The prior's line: log score ~ pa + pb * log prior, fitted to the results that have a prior
 * (slope 1 with fewer than 3: the prior's ranking as it is, its level moved to the results'). */
static void fit_prior(const ft_strategy *st, bayes_state *b, double fill) {
    b->pa = 0;
    b->pb = 0;
    if (!st->prior) return;
    line_fit f = {0};
    for (int i = 0; i < b->n; i++) {
        double x = prior_log(st, b->idx[i]);
        line_add(&f, isnan(x) ? fill : x, b->y[i]);
    }
    int m = f.m;
    if (m == 0) {
        b->pb = 1;
        return;
    }
    b->pb = m >= 3 ? line_slope(&f, 1) : 1;
    if (b->pb < 0) b->pb = 0;
    if (b->pb > 1.5) b->pb = 1.5;
    /* Shrunk toward no slope: the prior's ranking breaks ties where the results say little,
     * without outweighing them. Taken at face value (slope 1 until three results, then the fit)
     * a prior from another shape cost more than it saved: on five warm-started replays (three
     * ops, priors from other block sizes, context lengths and row counts) 41 evaluations to 5%
     * and 66 to 1% in all, against 56 and 63 cold; shrunk by m / (m + 40), 33 and 43. Without
     * the slope at all, 68 and 89: a little of the prior's ranking is what helps most. */
    b->pb *= (double)m / (m + PRIOR_SHRINK);
    b->pa = f.sy / m - b->pb * (f.sx / m);
}

/* The mean of the prior's log over the candidates that have one (what one without gets). */
static double prior_fill(const ft_strategy *st) {
    double s = 0;
    int m = 0;
    for (int c = 0; st->prior && c < st->nc; c++) {
        double x = prior_log(st, c);
        if (!isnan(x)) {
            s += x;
            m++;
        }
    }
    return m ? s / m : 0;
}

static double prior_mean(const ft_strategy *st, const bayes_state *b, int c, double fill) {
    if (b->pb == 0 && b->pa == 0) return 0;
    double x = prior_log(st, c);
    return b->pa + b->pb * (isnan(x) ? fill : x);
}

/* Standardise the training targets (after the prior's mean) into z. */
static void standardise(const ft_strategy *st, bayes_state *b, double fill) {
    int n = b->n;
    double s = 0, ss = 0;
    for (int i = 0; i < n; i++) {
        b->z[i] = b->y[i] - prior_mean(st, b, b->idx[i], fill);
        s += b->z[i];
    }
    b->ym = n ? s / n : 0;
    for (int i = 0; i < n; i++)
        ss += (b->z[i] - b->ym) * (b->z[i] - b->ym);
    b->ys = n > 1 && ss / n > 1e-12 ? sqrt(ss / n) : 1;
    for (int i = 0; i < n; i++)
        b->z[i] = (b->z[i] - b->ym) / b->ys;
}

/* Coordinate ascent of the marginal likelihood over the ladder, two sweeps. */
static void fit_scales(const ft_strategy *st, bayes_state *b) {
    double best = factor(st, b);
    for (int sweep = 0; sweep < 2; sweep++) {
        int moved = 0;
        for (int p = 0; p <= st->nparams; p++) {
            int *slot = p < st->nparams ? &b->li[p] : &b->ni;
            int keep = *slot, n = p < st->nparams ? NLADDER : NNOISE;
            for (int v = 0; v < n; v++) {
                if (v == keep) continue;
                *slot = v;
                if (p < st->nparams) fill_table(st, b, p);
                double lml = factor(st, b);
                if (lml > best + 1e-9) {
                    best = lml;
                    keep = v;
                    moved = 1;
                }
            }
            *slot = keep;
            if (p < st->nparams) fill_table(st, b, p);
        }
        if (!moved) break;
    }
    factor(st, b);
}

#define NOT_COMPUTED (-3.0) /* an expected improvement left uncomputed (acquire) */

/* Whether candidate c's bound on its expected improvement rules it out against the largest exact
 * one so far (b->gain): never with a cost to weigh, where every candidate is computed. */
static int ruled_out(const bayes_state *b, int c) {
    return b->ub[c] < b->gain && b->o.cost_weight <= 0;
}

/* Expected improvement (minimising) of a normal with this improvement of its mean and sd. */
static double ei_at(double imp, double sd) {
    double zz = imp / sd, ei = imp * Phi(zz) + sd * phi(zz);
    return ei > 0 ? ei : 0;
}

#define EI_BLOCK 8
/* Row i of EI_BLOCK forward solves side by side: vi (holding the right-hand sides) becomes
 * (vi - sum_k<i Li[k] V[k]) / Li[i], V[k] the rows before it. */
static void solve_row(const double *restrict Li, const double *restrict V, int i,
                      double *restrict vi) {
    double s[EI_BLOCK];
    for (int j = 0; j < EI_BLOCK; j++)
        s[j] = vi[j];
    for (int k = 0; k < i; k++) {
        const double l = Li[k], *vk = V + (size_t)k * EI_BLOCK;
#pragma omp simd
        for (int j = 0; j < EI_BLOCK; j++)
            s[j] -= l * vk[j];
    }
    for (int j = 0; j < EI_BLOCK; j++)
        vi[j] = s[j] / Li[i];
}

/* The expected improvements of the m (at most EI_BLOCK) untaken candidates cs over the best
 * known (b->best_l), from the current training set, into out: each one's posterior variance
 * through the Cholesky factor. The forward solves run side by side, one lane a candidate, so a
 * row of the factor is read once for all of them; each lane does what a solve of its own would,
 * in the same order, so the values do not depend on which candidates share a block. */
static void exact_ei_block(const ft_strategy *st, bayes_state *b, const int *cs, int m,
                           double *out) {
    int n = b->n;
    double q[EI_BLOCK] = {0}, *V = b->vb;
    for (int i = 0; i < n; i++) {
        const double *Li = b->L + (size_t)i * n;
        double *vi = V + (size_t)i * EI_BLOCK;
        for (int j = 0; j < EI_BLOCK; j++)
            vi[j] = j < m ? kern(st, b, cs[j], b->idx[i]) : 0;
        solve_row(Li, V, i, vi);
        for (int j = 0; j < EI_BLOCK; j++)
            q[j] += vi[j] * vi[j];
    }
    for (int j = 0; j < m; j++) {
        double var = b->s2 * (1 + noises[b->ni] - q[j]),
               sd = b->ys * sqrt(var > 1e-12 ? var : 1e-12);
        out[j] = ei_at(b->best_l - b->mu[cs[j]] - b->o.xi, sd);
    }
}

static double exact_ei(const ft_strategy *st, bayes_state *b, int c) {
    double ei;
    exact_ei_block(st, b, &c, 1, &ei);
    return ei;
}

/* For every candidate not known yet (b->ulist, nu of them, in order): the sum over the
 * training set of its kernel value times alpha (b->um) and its largest kernel value (b->ukmax).
 * The loops run over the candidates innermost, one training point and one parameter at a time,
 * each factor read from that parameter's column for the training point; every candidate's
 * products and sums are taken in the same order as kern() and a loop over the training set
 * would take them. Every ei is set to -1. Returns nu. */
static int means(const ft_strategy *st, bayes_state *b) {
    int nu = 0, np = st->nparams;
    for (int c = 0; c < st->nc; c++) {
        b->ei[c] = -1;
        if (st->known[c]) continue; /* its mean is never asked for */
        for (int p = 0; p < np; p++)
            b->upos[(size_t)p * st->nc + nu] = (unsigned char)st->pos[(size_t)c * np + p];
        b->ulist[nu] = c;
        b->um[nu] = 0;
        b->ukmax[nu++] = 0;
    }
    double *restrict k = b->uk, *restrict m = b->um, *restrict kmax = b->ukmax;
    for (int i = 0; i < b->n; i++) {
        const signed char *q = st->pos + (size_t)b->idx[i] * np;
        for (int p = 0; p < np; p++) {
            double col[FT_MAX_VALUES];
            for (int a = 0; a < st->pn[p]; a++)
                col[a] = b->F[p][a * st->pn[p] + q[p]];
            const unsigned char *restrict up = b->upos + (size_t)p * st->nc;
            if (p == 0)
                for (int u = 0; u < nu; u++)
                    k[u] = col[up[u]];
            else
                for (int u = 0; u < nu; u++)
                    k[u] *= col[up[u]];
        }
        double al = b->alpha[i];
        for (int u = 0; u < nu; u++) {
            m[u] += k[u] * al;
            kmax[u] = k[u] > kmax[u] ? k[u] : kmax[u];
        }
    }
    return nu;
}

/* Posterior mean and expected improvement of every untaken candidate (and the mean of the
 * taken ones, for fantasies), from the current training set. */
static void acquire(ft_strategy *st, bayes_state *b) {
    double fill = prior_fill(st);
    build_training(st, b);
    if (b->n == 0) {
        b->ei_at = -1;
        return;
    }
    fit_prior(st, b, fill);
    standardise(st, b, fill);
    int refit = b->fitted_n == 0 || b->n < b->fitted_n ||
                b->n >= b->fitted_n + (b->fitted_n < 40 ? b->o.fit_every : b->fitted_n / 8);
    if (refit) {
        fit_scales(st, b);
        b->fitted_n = b->n;
    } else if (factor(st, b) == -INFINITY) {
        fit_scales(st, b);
    }
    double best = INFINITY;
    for (int j = 0; j < st->nfin; j++) {
        double l = lscore(st, st->fin[j]);
        if (l < best) best = l;
    }
    b->best_l = best;
    int top = -1;
    /* First every mean, and the improvement each candidate could expect at most: expected
     * improvement grows with the posterior variance, and that is at most what conditioning on
     * its most correlated training point alone leaves, s2 (1 + noise - k^2 / (1 + noise)). */
    double noise = noises[b->ni];
    int nu = means(st, b);
    for (int u = 0; u < nu; u++) {
        int c = b->ulist[u];
        double mu = b->ym + prior_mean(st, b, c, fill) + b->ys * b->um[u], kmax = b->ukmax[u];
        b->mu[c] = mu;
        if (st->taken[c]) continue;
        double var = b->s2 * (1 + noise - kmax * kmax / (1 + noise));
        /* a hair above, so rounding never prunes one the exact value would keep */
        b->ub[c] = ei_at(best - mu - b->o.xi, 1.000001 * b->ys * sqrt(var > 1e-12 ? var : 1e-12));
        if (top < 0 || b->ub[c] > b->ub[top]) top = c;
    }
    /* Then the exact improvement where it could matter: from the candidate with the largest
     * bound on, every one whose bound reaches the largest exact improvement so far. Those left
     * (NOT_COMPUTED) cannot beat it; the local step computes a neighbour's when it needs it.
     * With a cost to weigh every candidate is computed (the weights reorder them).
     * They are computed EI_BLOCK at a time, chosen against the largest before the block; one
     * the largest so far within the block leaves out is then marked as left out, so the values
     * kept are those of one at a time (the proposals between refreshes, late in a long search,
     * rank what was kept). */
    b->gain = 0;
    if (top >= 0) b->gain = b->ei[top] = exact_ei(st, b, top);
    int pend[EI_BLOCK], np = 0;
    for (int c = 0; c <= st->nc; c++) {
        if (c < st->nc) {
            if (st->taken[c] || c == top) continue;
            if (ruled_out(b, c)) {
                b->ei[c] = NOT_COMPUTED;
                continue;
            }
            pend[np++] = c;
        }
        if (np == EI_BLOCK || (c == st->nc && np > 0)) {
            double e[EI_BLOCK];
            exact_ei_block(st, b, pend, np, e);
            for (int j = 0; j < np; j++) {
                int lo = ruled_out(b, pend[j]);
                b->ei[pend[j]] = lo ? NOT_COMPUTED : e[j];
                if (!lo && e[j] > b->gain) b->gain = e[j];
            }
            np = 0;
        }
    }
    b->ei_at = st->ntaken;
}

/* Weighs each expected improvement by the candidate's expected cost (cost_weight > 0): log
 * cost as a line in the model's mean log score, fitted to the candidates whose cost is known. */
static void weigh_cost(const ft_strategy *st, bayes_state *b, double *w) {
    for (int c = 0; c < st->nc; c++)
        w[c] = b->ei[c];
    if (b->o.cost_weight <= 0) return;
    line_fit f = {0};
    for (int c = 0; c < st->nc; c++)
        if (st->known[c] && st->cost[c] > 0) line_add(&f, b->mu[c], log(st->cost[c]));
    if (f.m < 3) return;
    double slope = line_slope(&f, 0), mx = f.sx / f.m;
    for (int c = 0; c < st->nc; c++)
        if (w[c] > 0) w[c] /= exp(b->o.cost_weight * slope * (b->mu[c] - mx));
}

/* Of the untaken candidates, the draw farthest (grid distance) from everything taken, over a
 * few draws. */
static int spread_pick(ft_strategy *st) {
    return ft_grid_farthest_draw(st, 16, st->taken, 1 << 30);
}

/* A first proposal, before the model has anything to say. */
static int init_pick(ft_strategy *st, bayes_state *b) {
    if (b->dealt >= b->o.stratified) return spread_pick(st);
    b->dealt++;
    return ft_grid_deck_draw(st, &b->deck);
}

/* The untaken candidate with the largest weighted improvement (ties: the first after a random
 * start, so equal seeds agree and different ones spread). */
static int best_untaken(ft_strategy *st, const double *w) {
    int start = (int)ft_rng_below(&st->rng, (uint64_t)st->nc), best = -1;
    for (int k = 0; k < st->nc; k++) {
        int c = (start + k) % st->nc;
        if (st->taken[c]) continue;
        if (best < 0 || w[c] > w[best]) best = c;
    }
    return best;
}

/* The untaken neighbour (one parameter one step away) with the largest weighted improvement
 * of the best known, else of the second best, ... of the top; -1 when all theirs are taken. */
/* The `want` (at most 8) best known finite candidates into top, best first; their count. */
static int top_known(const ft_strategy *st, int want, int *top) {
    int ntop = 0;
    for (int t = 0; t < want && t < 8; t++) {
        int best = -1;
        for (int j = 0; j < st->nfin; j++) {
            int c = st->fin[j], dup = 0;
            for (int q = 0; q < ntop; q++)
                dup |= top[q] == c;
            if (!dup && (best < 0 || st->score[c] < st->score[best])) best = c;
        }
        if (best < 0) break;
        top[ntop++] = best;
    }
    return ntop;
}

/* A weighted improvement, computed where the bound left it out. */
static double weight_of(ft_strategy *st, bayes_state *b, double *w, int c) {
    if (w[c] == NOT_COMPUTED) w[c] = b->ei[c] = exact_ei(st, b, c);
    return w[c];
}

/* Of a few children of the best eight known (two parents drawn, each parameter from either),
 * each snapped to the nearest untaken candidate, the one with the largest weighted improvement;
 * -1 when fewer than two are known. A child joins what two good points do well in different
 * parameters: a lone optimum two or more parameters away from every good point is not one
 * local step away. */
static int cross_pick(ft_strategy *st, bayes_state *b, double *w) {
    int top[8], ntop = top_known(st, 8, top), pick = -1;
    if (ntop < 2) return -1;
    for (int draw = 0; draw < 4; draw++) {
        int x = (int)ft_rng_below(&st->rng, (uint64_t)ntop), y;
        do
            y = (int)ft_rng_below(&st->rng, (uint64_t)ntop);
        while (y == x);
        const signed char *pa = st->pos + (size_t)top[x] * st->nparams,
                          *pb = st->pos + (size_t)top[y] * st->nparams;
        signed char child[FT_MAX_PARAMS];
        for (int p = 0; p < st->nparams; p++)
            child[p] = ft_rng_below(&st->rng, 2) ? pa[p] : pb[p];
        int c = ft_grid_nearest(st, child, 1);
        if (c >= 0 && (pick < 0 || weight_of(st, b, w, c) > weight_of(st, b, w, pick))) pick = c;
    }
    return pick;
}

/* Of the untaken candidates that differ from c in two parameters, the one with the largest
 * weighted improvement; -1 when there is none. */
static int pair_pick(ft_strategy *st, bayes_state *b, double *w, int c) {
    const signed char *pc = st->pos + (size_t)c * st->nparams;
    int64_t kc = st->key[c];
    int pick = -1;
    if (kc < 0) return -1;
    for (int p = 0; p < st->nparams; p++)
        for (int q = p + 1; q < st->nparams; q++)
            for (int x = 0; x < st->pn[p]; x++)
                for (int y = 0; y < st->pn[q]; y++) {
                    if (x == pc[p] || y == pc[q]) continue;
                    int j = ft_grid_lookup(st, kc + (x - pc[p]) * st->stride[p] +
                                                   (y - pc[q]) * st->stride[q]);
                    if (j < 0 || st->taken[j]) continue;
                    double v = weight_of(st, b, w, j);
                    if (pick < 0 || v > w[pick]) pick = j;
                }
    return pick;
}

static int local_pick(ft_strategy *st, bayes_state *b, double *w) {
    int top[8], nb[FT_MAX_PARAMS * FT_MAX_VALUES];
    int ntop = top_known(st, b->o.top, top);
    for (int t = 0; t < ntop; t++) {
        int m = b->o.hamming ? ft_grid_hamming_neighbours(st, top[t], nb)
                             : ft_grid_neighbours(st, top[t], nb),
            pick = -1;
        for (int j = 0; j < m; j++) {
            if (st->taken[nb[j]]) continue;
            double v = weight_of(st, b, w, nb[j]);
            if (pick < 0 || v > w[pick]) pick = nb[j];
        }
        if (pick >= 0) return pick;
        /* hamming 2: once every neighbour of this one is known, the step widens to two
         * parameters at once around it before it moves on to the next best (a lone optimum
         * that no single change of a good point reaches). */
        if (b->o.hamming == 2 && (pick = pair_pick(st, b, w, top[t])) >= 0) return pick;
    }
    return -1;
}

/* Whether the best known has gone o.stall results without improving. */
static int stalled(const ft_strategy *st, const bayes_state *b) {
    return b->o.stall && st->best >= 0 && st->nknown - st->best_at >= b->o.stall;
}

static int bayes_next(ft_strategy *st) {
    bayes_state *b = st->state;
    if (!st->prior && (st->nknown < b->ninit || st->nfin == 0))
        return ft_grid_propose(st, init_pick(st, b));
    if (st->nfin == 0) { /* only the prior: its best untaken */
        int best = -1;
        for (int c = 0; c < st->nc; c++)
            if (!st->taken[c] && !isnan(prior_log(st, c)) &&
                (best < 0 || st->prior[c] < st->prior[best]))
                best = c;
        return ft_grid_propose(st, best >= 0 ? best : spread_pick(st));
    }
    /* Late in a long search (past four training sets' worth of proposals) the acquisition is
     * refreshed every ntaken / 64 proposals: a search that far in is nearly a sweep, and a
     * full refresh per proposal made running a space of thousands to its end quadratic. */
    int every = st->ntaken < 4 * b->o.train ? 1 : st->ntaken / 64;
    if (b->ei_at < 0 || st->ntaken - b->ei_at >= every || b->ei_at > st->ntaken) acquire(st, b);
    if (b->ei_at < 0) return ft_grid_propose(st, spread_pick(st));
    double *w = b->w;
    weigh_cost(st, b, w);
    if (b->o.explore && st->ntaken % b->o.explore == b->o.explore - 1)
        return ft_grid_propose(st, ft_grid_random_untaken(st));
    int c = -1;
    if (b->o.local && st->ntaken % b->o.local == 0)
        c = local_pick(st, b, w);
    else if (stalled(st, b)) /* the model has stopped finding better: look where it is not */
        c = spread_pick(st);
    if (c < 0 && b->o.cross && st->ntaken % b->o.cross == b->o.cross - 1) c = cross_pick(st, b, w);
    return ft_grid_propose(st, c >= 0 ? c : best_untaken(st, w));
}

static int bayes_batch(ft_strategy *st, int k, int *out) {
    bayes_state *b = st->state;
    int n = 0;
    while (n < k && st->ntaken < st->nc) {
        b->ei_at = -1; /* each conditioned on the ones before it */
        int c = bayes_next(st);
        if (c < 0) break;
        out[n++] = c;
    }
    return n;
}

/* A new result is taken in by the next proposal that refreshes the acquisition; one measured
 * again changes what the model was fitted on, so it forces that. */
static void bayes_report(ft_strategy *st, int i, int again) {
    (void)i;
    bayes_state *b = st->state;
    if (again) b->ei_at = -1;
}

static double bayes_gain(ft_strategy *st) {
    bayes_state *b = st->state;
    if (st->nfin == 0 || (!st->prior && st->nknown < b->ninit)) return -1;
    if (b->ei_at != st->ntaken) acquire(st, b);
    return b->ei_at < 0 ? -1 : b->gain;
}

static int bayes_init(ft_strategy *st, const void *opts) {
    const ft_bayes_opts *o = opts;
    if (o->init < 1 || !(o->xi >= 0) || o->fit_every < 1 || !(o->cost_weight >= 0) ||
        o->cost_weight > 1 || o->local < 0 || o->top < 1 || o->top > 8 || o->train < 16 ||
        o->train > 256 || o->recent < 0 || o->recent > o->train || o->explore < 0 ||
        o->hamming < 0 || o->hamming > 2 || o->stratified < 0 || o->stratified > o->init ||
        o->cross < 0 || o->stall < 0 || o->log_scale < 0 || o->log_scale > 1)
        return -1;
    size_t tables = 0, nt = (size_t)o->train + 16;
    for (int p = 0; p < st->nparams; p++)
        tables += (size_t)st->pn[p] * st->pn[p];
    size_t nc = (size_t)st->nc;
    /* idx, then y z alpha w kx, L, vb, ei mu ub, um ukmax uk, tables; ulist, upos */
    size_t doubles = 3 * nt + nc + nt + nt * nt + nt * EI_BLOCK + 6 * nc + tables;
    bayes_state *b = calloc(1, sizeof *b + nt * sizeof(int) + doubles * sizeof(double) + 16 +
                                   nc * sizeof(int) + nc * (size_t)st->nparams);
    if (!b) return -1;
    st->state = b;
    b->o = *o;
    b->ninit = o->init;
    ft_grid_deck_init(st, &b->deck);
    b->idx = (int *)(b + 1);
    double *d = (double *)(((uintptr_t)(b->idx + nt) + 15) & ~(uintptr_t)15);
    b->y = d;
    b->z = d += nt;
    b->alpha = d += nt;
    b->w = d += nt;
    b->kx = d += nc;
    b->L = d += nt;
    b->vb = d += nt * nt;
    b->ei = d += nt * EI_BLOCK;
    b->mu = d += nc;
    b->ub = d += nc;
    b->um = d += nc;
    b->ukmax = d += nc;
    b->uk = d += nc;
    b->tables = d += nc;
    for (int p = 0; p < st->nparams; p++) {
        b->F[p] = d;
        d += (size_t)st->pn[p] * st->pn[p];
        b->li[p] = 3; /* a length scale of one span */
        fill_table(st, b, p);
    }
    b->ulist = (int *)d;
    b->upos = (unsigned char *)(b->ulist + nc);
    b->ni = 1;
    b->ei_at = -1;
    for (size_t c = 0; c < nc; c++)
        b->mu[c] = NAN;
    return 0;
}

const ft_strategy_type ft_strategy_bayes = {
    FT_STRATEGY(bayes),
    .summary = "Bayesian optimisation: a Gaussian process on log time, expected improvement",
    FT_STRATEGY_OPTS(bayes),
    .report = bayes_report,
    .batch = bayes_batch,
    .expected_gain = bayes_gain,
};
