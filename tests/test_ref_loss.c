/* test_ref_loss.c: the float64 reference of the loss op (SPEC.md loss) and the shared weights.
 *
 * Expected values come from hand-worked closed forms (V = 2 with an identity LM head, equal
 * logits, hand-picked q) or from independent re-implementations in this file (a two-pass
 * logsumexp, the weight table written as O(B^2) loops, central differences of the D-PACE
 * surrogate and of the loss itself), never from the code under test.
 */
#include "core/rng.h"
#include "ft_test.h"
#include "loss/loss_ref.h"

#include <math.h>
#include <string.h>

#define LN2 0.69314718055994530942
#define LN3 1.09861228866810969140

static const ft_loss_scheme all_schemes[] = {
    FT_SCHEME_UNIFORM,   FT_SCHEME_DECAY,      FT_SCHEME_PROGRESSIVE,      FT_SCHEME_DPACE,
    FT_SCHEME_DPACE_CUM, FT_SCHEME_DPACE_CONT, FT_SCHEME_PROGRESSIVE_EPOCH};
static const char *scheme_names[] = {"uniform",   "decay",      "progressive",      "dpace",
                                     "dpace_cum", "dpace_cont", "progressive_epoch"};
static const ft_loss_norm all_norms[] = {FT_NORM_DEFAULT, FT_NORM_WEIGHT_SUM, FT_NORM_COUNT,
                                         FT_NORM_NUM_SEQS, FT_NORM_NONE};
#define N_SCHEMES ((int)(sizeof all_schemes / sizeof all_schemes[0]))
#define N_NORMS   ((int)(sizeof all_norms / sizeof all_norms[0]))

/* The decay's gamma and the progressive schedule (gamma0 to gamma_max over warmup_steps, now at
 * step). */
static void attrs_gammas(ft_loss_attrs *a, double gamma, double gamma0, double gamma_max,
                         double warmup_steps, double step) {
    a->gamma = gamma;
    a->gamma0 = gamma0;
    a->gamma_max = gamma_max;
    a->warmup_steps = warmup_steps;
    a->step = step;
}

static ft_loss_attrs attrs_make(int64_t B, ft_loss_scheme scheme) {
    ft_loss_attrs a;
    memset(&a, 0, sizeof a);
    a.B = B;
    a.scheme = scheme;
    attrs_gammas(&a, 7, 1, 7, 0, 0);
    a.alpha = 0.5;
    a.num_seqs = 1;
    a.norm = FT_NORM_DEFAULT;
    a.want_dw = 0;
    a.gamma_inc = 0.5;
    a.epoch = 2.7; /* progressive_epoch: gamma 8, not the decay default 7 */
    a.final_norm = 0;
    return a;
}

static int is_dpace(ft_loss_scheme s) {
    return s == FT_SCHEME_DPACE || s == FT_SCHEME_DPACE_CUM || s == FT_SCHEME_DPACE_CONT;
}

static int all_equal(const double *x, int64_t n, double value) {
    for (int64_t i = 0; i < n; i++)
        if (!(x[i] == value)) return 0;
    return 1;
}

/* ---- independent re-implementations ---------------------------------------------------- */

/* Cross entropy of one row: max first, then the shifted sum (a different order from the
 * reference's running maximum). */
static double expect_ce(const double *h_m, const double *w_lm, int64_t V, int64_t H,
                        int32_t label) {
    double zmax = -INFINITY, zl = 0;
    for (int64_t v = 0; v < V; v++) {
        double z = 0;
        for (int64_t i = 0; i < H; i++)
            z += w_lm[v * H + i] * h_m[i];
        if (z > zmax) zmax = z;
        if (v == label) zl = z;
    }
    double s = 0;
    for (int64_t v = 0; v < V; v++) {
        double z = 0;
        for (int64_t i = 0; i < H; i++)
            z += w_lm[v * H + i] * h_m[i];
        s += exp(z - zmax);
    }
    return zmax + log(s) - zl;
}

/* P_k of a block as an explicit product (O(B^2) overall). */
static double expect_prefix(const ft_loss_attrs *a, const double *q, const uint8_t *sc, int64_t k) {
    double p = 1;
    for (int64_t j = 1; j <= k; j++)
        p *= sc[j] ? (1 - a->alpha) * q[j] + a->alpha : 1.0;
    return p;
}

/* The SPEC.md weight table, literally; sc[] already excludes the anchor. */
static void expect_block_weights(const ft_loss_attrs *a, const double *q, const uint8_t *sc,
                                 double *w) {
    const int64_t B = a->B;
    double gamma = a->gamma;
    if (a->scheme == FT_SCHEME_PROGRESSIVE) {
        double t = a->warmup_steps > 0 ? a->step / a->warmup_steps : 1.0;
        gamma = a->gamma0 + (a->gamma_max - a->gamma0) * (t < 1 ? t : 1);
    }
    if (a->scheme == FT_SCHEME_PROGRESSIVE_EPOCH) {
        double whole = 0;
        while (whole + 1 <= a->epoch) /* whole epochs, counted */
            whole += 1;
        gamma = a->gamma + a->gamma_inc * whole;
    }
    for (int64_t k = 0; k < B; k++) {
        if (!sc[k]) {
            w[k] = 0;
            continue;
        }
        double tail = 0;
        for (int64_t m = k; m < B; m++)
            tail += sc[m] ? expect_prefix(a, q, sc, m) : 0.0;
        switch (a->scheme) {
        case FT_SCHEME_UNIFORM: w[k] = 1; break;
        case FT_SCHEME_DECAY:
        case FT_SCHEME_PROGRESSIVE:
        case FT_SCHEME_PROGRESSIVE_EPOCH: w[k] = exp(-(double)(k - 1) / gamma); break;
        case FT_SCHEME_DPACE: w[k] = tail; break;
        case FT_SCHEME_DPACE_CUM: w[k] = expect_prefix(a, q, sc, k); break;
        case FT_SCHEME_DPACE_CONT: w[k] = tail / expect_prefix(a, q, sc, k); break;
        case FT_SCHEME_COUNT:
        default: w[k] = NAN; break;
        }
    }
}

/* The SPEC.md denominator given weights and scored flags (anchors already excluded). */
static double expect_denominator(const ft_loss_attrs *a, int64_t M, const double *w,
                                 const uint8_t *sc) {
    ft_loss_norm n = a->norm;
    if (n == FT_NORM_DEFAULT) n = is_dpace(a->scheme) ? FT_NORM_NUM_SEQS : FT_NORM_WEIGHT_SUM;
    double d = 0;
    switch (n) {
    case FT_NORM_WEIGHT_SUM:
        for (int64_t m = 0; m < M; m++)
            d += w[m];
        return d;
    case FT_NORM_COUNT:
        for (int64_t m = 0; m < M; m++)
            d += sc[m] ? 1 : 0;
        return d;
    case FT_NORM_NUM_SEQS: return a->num_seqs;
    case FT_NORM_NONE: return 1;
    case FT_NORM_DEFAULT:
    case FT_NORM_COUNT_:
    default: return NAN;
    }
}

/* ---- random problems ------------------------------------------------------------------- */

typedef struct problem {
    int64_t M, H, V, B;
    double *h, *w_lm;
    int32_t *labels;
    uint8_t *mask; /* raw: anchors may hold 1 */
    uint8_t *sc;   /* mask && k > 0 */
} problem;

typedef struct result {
    double loss;
    double *ce, *q, *w, *dh, *dw;
} result;

static problem problem_random(uint64_t seed, int64_t nblk, int64_t B, int64_t H, int64_t V) {
    problem p;
    ft_rng r;
    ft_rng_seed(&r, seed);
    p.M = nblk * B;
    p.H = H;
    p.V = V;
    p.B = B;
    p.h = ft_test_alloc(sizeof(double) * (size_t)(p.M * H));
    p.w_lm = ft_test_alloc(sizeof(double) * (size_t)(V * H));
    p.labels = ft_test_alloc(sizeof(int32_t) * (size_t)p.M);
    p.mask = ft_test_alloc((size_t)p.M);
    p.sc = ft_test_alloc((size_t)p.M);
    for (int64_t i = 0; i < p.M * H; i++)
        p.h[i] = 0.8 * ft_rng_normal(&r);
    for (int64_t i = 0; i < V * H; i++)
        p.w_lm[i] = 0.5 * ft_rng_normal(&r);
    for (int64_t m = 0; m < p.M; m++) {
        int64_t k = m % B;
        p.mask[m] = ft_rng_uniform(&r) < 0.75;
        if (k == 1) p.mask[m] = 1; /* every block scores something */
        p.sc[m] = p.mask[m] && k > 0;
        /* Labels the reference must never read: out of range on anchors and unscored rows. */
        if (p.sc[m])
            p.labels[m] = (int32_t)ft_rng_below(&r, (uint64_t)V);
        else
            p.labels[m] = k == 0 ? (int32_t)V + 17 : -100;
    }
    return p;
}

static void problem_free(problem *p) { FT_FREE(p->h, p->w_lm, p->labels, p->mask, p->sc); }

static result result_alloc(const problem *p, double fill) {
    result o;
    o.loss = fill;
    o.ce = ft_test_alloc(sizeof(double) * (size_t)p->M);
    o.q = ft_test_alloc(sizeof(double) * (size_t)p->M);
    o.w = ft_test_alloc(sizeof(double) * (size_t)p->M);
    o.dh = ft_test_alloc(sizeof(double) * (size_t)(p->M * p->H));
    o.dw = ft_test_alloc(sizeof(double) * (size_t)(p->V * p->H));
    for (int64_t m = 0; m < p->M; m++)
        o.ce[m] = o.q[m] = o.w[m] = fill;
    for (int64_t i = 0; i < p->M * p->H; i++)
        o.dh[i] = fill;
    for (int64_t i = 0; i < p->V * p->H; i++)
        o.dw[i] = fill;
    return o;
}

static void result_free(result *o) { FT_FREE(o->ce, o->q, o->w, o->dh, o->dw); }

static void run_loss(const problem *p, const ft_loss_attrs *a, result *o) {
    ft_ref_loss(p->M, p->H, p->V, a, p->h, p->w_lm, p->labels, p->mask, &o->loss, o->ce, o->q, o->w,
                o->dh, a->want_dw ? o->dw : NULL);
}

/* The loss with weights and denominator held fixed: the function the gradients differentiate. */
static double fixed_weight_loss(const problem *p, const double *h, const double *w_lm,
                                const double *w, double denom) {
    double s = 0;
    for (int64_t m = 0; m < p->M; m++)
        if (p->sc[m]) s += w[m] * expect_ce(h + m * p->H, w_lm, p->V, p->H, p->labels[m]);
    return s / denom;
}

/* ---- ft_loss_gamma ---------------------------------------------------------------------- */

static void test_gamma(void) {
    ft_loss_attrs a = attrs_make(16, FT_SCHEME_DECAY);
    a.gamma = 3.5;
    a.warmup_steps = 100;
    a.step = 10;
    FT_CHECK(ft_loss_gamma(&a) == 3.5, "decay gamma %g", ft_loss_gamma(&a));

    a = attrs_make(16, FT_SCHEME_PROGRESSIVE);
    a.gamma = 99; /* not used by progressive */
    a.gamma0 = 1;
    a.gamma_max = 7;
    a.warmup_steps = 100;
    const double steps[] = {0, 25, 50, 100, 1000};
    const double want[] = {1, 2.5, 4, 7, 7};
    for (int i = 0; i < 5; i++) {
        a.step = steps[i];
        FT_CHECK_NEAR(ft_loss_gamma(&a), want[i], 1e-15);
    }
    a.step = 100; /* the end of warm-up lands exactly on gamma_max */
    a.gamma0 = 0.1;
    a.gamma_max = 0.7;
    FT_CHECK(ft_loss_gamma(&a) == 0.7, "end of warm-up gamma %.17g", ft_loss_gamma(&a));

    a.gamma0 = 2;
    a.gamma_max = 10;
    a.warmup_steps = 8;
    a.step = 2;
    FT_CHECK_NEAR(ft_loss_gamma(&a), 4.0, 1e-15);
    a.warmup_steps = 0; /* no warm-up at all: gamma_max from step 0 */
    a.step = 0;
    FT_CHECK(ft_loss_gamma(&a) == 10, "warmup 0 gamma %g", ft_loss_gamma(&a));
    a.warmup_steps = -3;
    FT_CHECK(ft_loss_gamma(&a) == 10, "warmup < 0 gamma %g", ft_loss_gamma(&a));

    /* progressive_epoch (AngelSlim): 7 + 0.5 per whole epoch, no cap; the fraction of an epoch
     * under way does not count; gamma0, gamma_max, step and warmup_steps play no part. */
    a = attrs_make(16, FT_SCHEME_PROGRESSIVE_EPOCH);
    a.gamma0 = 100;
    a.gamma_max = 200;
    a.step = 5;
    a.warmup_steps = 10;
    const double epochs[] = {0, 0.99, 1, 2.5, 6, 40};
    const double want_e[] = {7, 7, 7.5, 8, 10, 27};
    for (int i = 0; i < 6; i++) {
        a.epoch = epochs[i];
        FT_CHECK(ft_loss_gamma(&a) == want_e[i], "progressive_epoch at epoch %g: gamma %.17g",
                 epochs[i], ft_loss_gamma(&a));
    }
    a.gamma = 3;
    a.gamma_inc = 2;
    a.epoch = 2;
    FT_CHECK(ft_loss_gamma(&a) == 7, "gamma 3 + 2 per epoch at epoch 2: %g", ft_loss_gamma(&a));
    a.gamma_inc = 0; /* no rise: decay */
    a.epoch = 9;
    FT_CHECK(ft_loss_gamma(&a) == 3, "gamma_inc 0: %g", ft_loss_gamma(&a));
}

/* ---- ft_loss_block_weights -------------------------------------------------------------- */

/* The weights of a block of 6 (flags raw) under a against want, each within 1e-15. */
static void check_weights6(const ft_loss_attrs *a, const double *q, const uint8_t *raw,
                           const double *want) {
    double w[6];
    ft_loss_block_weights(a, q, raw, w);
    for (int k = 0; k < 6; k++)
        FT_CHECK_NEAR(w[k], want[k], 1e-15);
}

/* The decay's weights of uniform weights u (6 of them) at gamma: u_k e^-(k-1)/gamma, into w. */
static const double *decayed6(const double *u, double gamma, double *w) {
    for (int k = 0; k < 6; k++)
        w[k] = u[k] * exp(-(k - 1) / gamma);
    return w;
}

static void test_weights_uniform_decay_progressive(void) {
    /* Raw flags: the anchor says 1 but is never scored; row 2 is unscored. q is never read by
     * these schemes, so NaN everywhere must not leak into w. */
    const uint8_t raw[6] = {1, 1, 0, 1, 1, 1};
    double q[6], w[6];
    for (int k = 0; k < 6; k++)
        q[k] = NAN;

    ft_loss_attrs a = attrs_make(6, FT_SCHEME_UNIFORM);
    ft_loss_block_weights(&a, q, raw, w);
    const double uni[6] = {0, 1, 0, 1, 1, 1};
    for (int k = 0; k < 6; k++)
        FT_CHECK(w[k] == uni[k], "uniform w[%d] = %g", k, w[k]);

    /* gamma = 1: w_k = e^-(k-1), hand values. */
    const double e1[6] = {0, 1, 0, 0.1353352832366127, 0.049787068367863944, 0.018315638888734179};
    a = attrs_make(6, FT_SCHEME_DECAY);
    a.gamma = 1;
    check_weights6(&a, q, raw, e1);

    /* gamma = 7 (the DFlash default). */
    a.gamma = 7;
    check_weights6(&a, q, raw, decayed6(uni, 7.0, w));

    /* progressive 1 -> 7 over 100 steps: step 0 is gamma 1, step 50 gamma 4, then gamma 7. */
    a = attrs_make(6, FT_SCHEME_PROGRESSIVE);
    attrs_gammas(&a, 123, 1, 7, 100, 0);
    check_weights6(&a, q, raw, e1);
    a.step = 50;
    check_weights6(&a, q, raw, decayed6(uni, 4.0, w));
    a.step = 400;
    check_weights6(&a, q, raw, decayed6(uni, 7.0, w));
    a.step = 0;
    a.warmup_steps = 0;
    check_weights6(&a, q, raw, decayed6(uni, 7.0, w));
}

static void test_weights_dpace_by_hand(void) {
    /* B = 4, row 2 unscored, alpha 0.5, q1 = 0.5, q3 = 0.25: s = (0.75, 1, 0.625),
     * P = (0.75, 0.75, 0.46875). dpace w1 = P1 + P3 = 1.21875 (P2 is not scored), w3 = P3;
     * cum w1 = 0.75, w3 = 0.46875; cont w1 = 1.21875 / 0.75 = 1.625, w3 = 1. */
    const uint8_t sc[4] = {0, 1, 0, 1};
    const double q[4] = {NAN, 0.5, NAN, 0.25};
    const double want[3][4] = {{0, 1.21875, 0, 0.46875}, {0, 0.75, 0, 0.46875}, {0, 1.625, 0, 1.0}};
    const ft_loss_scheme s[3] = {FT_SCHEME_DPACE, FT_SCHEME_DPACE_CUM, FT_SCHEME_DPACE_CONT};
    for (int i = 0; i < 3; i++) {
        ft_loss_attrs a = attrs_make(4, s[i]);
        double w[4];
        ft_loss_block_weights(&a, q, sc, w);
        for (int k = 0; k < 4; k++)
            FT_CHECK(fabs(w[k] - want[i][k]) <= 1e-15, "%s w[%d] = %.17g, want %.17g",
                     scheme_names[s[i]], k, w[k], want[i][k]);
    }

    /* alpha = 1: every s is 1, so dpace counts the scored rows from k on, cum is 1 and cont
     * equals dpace. */
    const uint8_t sc6[6] = {1, 1, 1, 0, 1, 0};
    const double q6[6] = {0.3, 0.1, 0.9, 0.2, 0.4, 0.7};
    const double count_from[6] = {0, 3, 2, 0, 1, 0};
    for (int i = 0; i < 3; i++) {
        ft_loss_attrs a = attrs_make(6, s[i]);
        a.alpha = 1;
        double w[6];
        ft_loss_block_weights(&a, q6, sc6, w);
        for (int k = 0; k < 6; k++) {
            double e = s[i] == FT_SCHEME_DPACE_CUM ? (k > 0 && sc6[k] ? 1.0 : 0.0) : count_from[k];
            FT_CHECK(fabs(w[k] - e) <= 1e-15, "alpha 1 %s w[%d] = %g, want %g", scheme_names[s[i]],
                     k, w[k], e);
        }
    }
}

/* S(u) = sum_m sc_m * exp(sum_{j<=m} u_j), u_j = log s_j: the accepted-length surrogate. */
static double surrogate(const double *u, const uint8_t *sc, int64_t B) {
    double S = 0, acc = 0;
    for (int64_t m = 1; m < B; m++) {
        acc += u[m];
        if (sc[m]) S += exp(acc);
    }
    return S;
}

static void test_weights_dpace_is_surrogate_gradient(void) {
    ft_rng r;
    ft_rng_seed(&r, 0xd9ace);
    const int64_t Bs[4] = {4, 5, 8, 16};
    int checked = 0;
    for (int trial = 0; trial < 40; trial++) {
        const int64_t B = Bs[trial % 4];
        ft_loss_attrs a = attrs_make(B, FT_SCHEME_DPACE);
        a.alpha = trial % 5 == 0 ? 0.5 : 0.05 + 0.9 * ft_rng_uniform(&r);
        double q[16], u[16], w[16];
        uint8_t raw[16], sc[16];
        for (int64_t k = 0; k < B; k++) {
            q[k] = 0.01 + 0.99 * ft_rng_uniform(&r);
            raw[k] = ft_rng_uniform(&r) < 0.7;
            sc[k] = raw[k] && k > 0;
            u[k] = sc[k] ? log((1 - a.alpha) * q[k] + a.alpha) : 0.0;
        }
        ft_loss_block_weights(&a, q, raw, w);
        for (int64_t k = 0; k < B; k++) {
            if (!sc[k]) { /* s_k is the constant 1 there: no weight */
                FT_CHECK(w[k] == 0, "trial %d unscored w[%d] = %g", trial, (int)k, w[k]);
                continue;
            }
            const double eps = 1e-5, u0 = u[k];
            u[k] = u0 + eps;
            double sp = surrogate(u, sc, B);
            u[k] = u0 - eps;
            double sm = surrogate(u, sc, B);
            u[k] = u0;
            double d = (sp - sm) / (2 * eps);
            FT_CHECK(fabs(w[k] - d) <= 1e-8 * fmax(1, fabs(d)),
                     "trial %d B %d k %d: w = %.15g, dS/dlog s = %.15g", trial, (int)B, (int)k,
                     w[k], d);
            checked++;
        }
    }
    FT_CHECK(checked > 100, "only %d weights checked", checked);
}

static void test_weights_match_table(void) {
    /* Every scheme against the table written as loops; q and flags random, anchors raw 1. */
    ft_rng r;
    ft_rng_seed(&r, 77);
    for (int trial = 0; trial < 30; trial++) {
        const int64_t B = 2 + (int64_t)ft_rng_below(&r, 15);
        double q[16], w[16], want[16];
        uint8_t raw[16], sc[16];
        for (int64_t k = 0; k < B; k++) {
            raw[k] = k == 0 ? 1 : ft_rng_uniform(&r) < 0.6;
            sc[k] = raw[k] && k > 0;
            q[k] = sc[k] ? ft_rng_uniform(&r) : NAN; /* unscored q is never read */
        }
        for (int s = 0; s < N_SCHEMES; s++) {
            ft_loss_attrs a = attrs_make(B, all_schemes[s]);
            a.alpha = 0.1 + 0.8 * ft_rng_uniform(&r);
            a.gamma = 0.5 + 10 * ft_rng_uniform(&r);
            a.gamma0 = 0.5 + 3 * ft_rng_uniform(&r);
            a.gamma_max = 4 + 6 * ft_rng_uniform(&r);
            a.warmup_steps = 1000;
            a.step = 1500 * ft_rng_uniform(&r);
            ft_loss_block_weights(&a, q, raw, w);
            expect_block_weights(&a, q, sc, want);
            FT_CHECK(w[0] == 0, "%s anchor weight %g", scheme_names[s], w[0]);
            for (int64_t k = 0; k < B; k++)
                FT_CHECK(fabs(w[k] - want[k]) <= 1e-13 * fmax(1, fabs(want[k])),
                         "trial %d %s B %d w[%d] = %.17g, want %.17g", trial, scheme_names[s],
                         (int)B, (int)k, w[k], want[k]);
            /* The raw anchor flag changes nothing. */
            double w2[16];
            ft_loss_block_weights(&a, q, sc, w2);
            FT_CHECK(memcmp(w, w2, sizeof(double) * (size_t)B) == 0,
                     "%s: anchor flag changed the weights", scheme_names[s]);
        }
    }
}

/* ---- ft_loss_denominator ---------------------------------------------------------------- */

static void test_denominator(void) {
    /* Two blocks of 4; the anchor of block 0 says 1 but is not a scored row. */
    const double w[8] = {0, 0.5, 0, 2, 0, 1, 1, 0.25};
    const uint8_t raw[8] = {1, 1, 0, 1, 0, 1, 1, 1};
    for (int s = 0; s < N_SCHEMES; s++) {
        ft_loss_attrs a = attrs_make(4, all_schemes[s]);
        a.num_seqs = 3;
        const double def = is_dpace(all_schemes[s]) ? 3.0 : 4.75;
        const double want[5] = {def, 4.75, 5, 3, 1};
        for (int n = 0; n < N_NORMS; n++) {
            a.norm = all_norms[n];
            double d = ft_loss_denominator(&a, 8, w, raw);
            FT_CHECK(d == want[n], "%s norm %d: denominator %g, want %g", scheme_names[s], n, d,
                     want[n]);
        }
    }
    ft_loss_attrs a = attrs_make(4, FT_SCHEME_UNIFORM);
    const double zero[8] = {0};
    const uint8_t none[8] = {1, 0, 0, 0, 1, 0, 0, 0}; /* only anchors */
    FT_CHECK(ft_loss_denominator(&a, 8, zero, none) == 0, "empty weight sum");
    a.norm = FT_NORM_COUNT;
    FT_CHECK(ft_loss_denominator(&a, 8, zero, none) == 0, "anchors counted");
}

/* ---- ft_ref_loss: closed forms ---------------------------------------------------------- */

/* V = 2, H = 2, w_lm = I so z = h; two blocks of B = 2.
 *   row 0: anchor, mask 1, label 999 (out of range, never read)
 *   row 1: h = (0, ln 3), label 0: softmax (1/4, 3/4), ce = ln 4, q = 1/4
 *   row 2: anchor, mask 0, label -100
 *   row 3: h = (1, 1),    label 1: softmax (1/2, 1/2), ce = ln 2, q = 1/2 */
static problem problem_v2(void) {
    problem p;
    p.M = 4;
    p.H = 2;
    p.V = 2;
    p.B = 2;
    p.h = ft_test_alloc(sizeof(double) * 8);
    p.w_lm = ft_test_alloc(sizeof(double) * 4);
    p.labels = ft_test_alloc(sizeof(int32_t) * 4);
    p.mask = ft_test_alloc(4);
    p.sc = ft_test_alloc(4);
    const double h[8] = {0.3, -1.2, 0, LN3, 2, 1, 1, 1};
    const double eye[4] = {1, 0, 0, 1};
    const int32_t labels[4] = {999, 0, -100, 1};
    const uint8_t mask[4] = {1, 1, 0, 1}, sc[4] = {0, 1, 0, 1};
    memcpy(p.h, h, sizeof h);
    memcpy(p.w_lm, eye, sizeof eye);
    memcpy(p.labels, labels, sizeof labels);
    memcpy(p.mask, mask, sizeof mask);
    memcpy(p.sc, sc, sizeof sc);
    return p;
}

/* c1, c3: the scale w[m]/denom of rows 1 and 3. dz1 = c1 * ((1/4, 3/4) - (1, 0)) =
 * c1 * (-3/4, 3/4), dz3 = c3 * ((1/2, 1/2) - (0, 1)) = c3 * (1/2, -1/2); dh = dz (identity head)
 * and dw[v,:] = dz1[v] * h1 + dz3[v] * h3 with h1 = (0, ln 3), h3 = (1, 1). */
static void check_v2(const result *o, double loss, double c1, double c3, const char *what) {
    const double ce[4] = {0, 2 * LN2, 0, LN2}, q[4] = {1, 0.25, 1, 0.5};
    const double dh[8] = {0, 0, -0.75 * c1, 0.75 * c1, 0, 0, 0.5 * c3, -0.5 * c3};
    const double dw[4] = {0.5 * c3, -0.75 * c1 * LN3 + 0.5 * c3, -0.5 * c3,
                          0.75 * c1 * LN3 - 0.5 * c3};
    FT_CHECK(fabs(o->loss - loss) <= 1e-14 * fabs(loss), "%s: loss %.17g, want %.17g", what,
             o->loss, loss);
    for (int m = 0; m < 4; m++) {
        FT_CHECK(fabs(o->ce[m] - ce[m]) <= 1e-14, "%s: ce[%d] = %.17g", what, m, o->ce[m]);
        FT_CHECK(fabs(o->q[m] - q[m]) <= 1e-14, "%s: q[%d] = %.17g", what, m, o->q[m]);
    }
    for (int i = 0; i < 8; i++)
        FT_CHECK(fabs(o->dh[i] - dh[i]) <= 1e-14, "%s: dh[%d] = %.17g, want %.17g", what, i,
                 o->dh[i], dh[i]);
    FT_CHECK(o->dh[0] == 0 && o->dh[1] == 0 && o->dh[4] == 0 && o->dh[5] == 0,
             "%s: anchor dh rows not exactly 0", what);
    for (int i = 0; i < 4; i++)
        FT_CHECK(fabs(o->dw[i] - dw[i]) <= 1e-14, "%s: dw[%d] = %.17g, want %.17g", what, i,
                 o->dw[i], dw[i]);
}

static void test_loss_v2_closed_form(void) {
    problem p = problem_v2();
    result o = result_alloc(&p, NAN);

    /* uniform: w = (0,1,0,1), denominator 2, loss = (ln 4 + ln 2) / 2 = 1.5 ln 2. */
    ft_loss_attrs a = attrs_make(2, FT_SCHEME_UNIFORM);
    a.want_dw = 1;
    run_loss(&p, &a, &o);
    check_v2(&o, 1.5 * LN2, 0.5, 0.5, "uniform");
    FT_CHECK(o.w[0] == 0 && o.w[1] == 1 && o.w[2] == 0 && o.w[3] == 1, "uniform w");

    /* norm none: denominator 1, loss 3 ln 2, gradients doubled; count: 2 as by default. */
    a.norm = FT_NORM_NONE;
    run_loss(&p, &a, &o);
    check_v2(&o, 3 * LN2, 1, 1, "uniform/none");
    a.norm = FT_NORM_COUNT;
    run_loss(&p, &a, &o);
    check_v2(&o, 1.5 * LN2, 0.5, 0.5, "uniform/count");

    /* decay with B = 2: only k = 1 is scored, weight e^0 = 1: the same as uniform. */
    a = attrs_make(2, FT_SCHEME_DECAY);
    a.want_dw = 1;
    run_loss(&p, &a, &o);
    check_v2(&o, 1.5 * LN2, 0.5, 0.5, "decay");

    /* dpace, alpha 0.5: block 0 w1 = P1 = 0.5 * 1/4 + 0.5 = 0.625, block 1 w1 = 0.75;
     * denominator num_seqs = 1: loss = 0.625 ln 4 + 0.75 ln 2 = 2 ln 2. */
    a = attrs_make(2, FT_SCHEME_DPACE);
    a.want_dw = 1;
    run_loss(&p, &a, &o);
    check_v2(&o, 2 * LN2, 0.625, 0.75, "dpace");
    FT_CHECK(o.w[1] == 0.625 && o.w[3] == 0.75, "dpace w = %g %g", o.w[1], o.w[3]);
    a.num_seqs = 2;
    run_loss(&p, &a, &o);
    check_v2(&o, LN2, 0.3125, 0.375, "dpace/num_seqs 2");
    /* norm weight_sum: 1.375. */
    a.norm = FT_NORM_WEIGHT_SUM;
    run_loss(&p, &a, &o);
    check_v2(&o, 2 * LN2 / 1.375, 0.625 / 1.375, 0.75 / 1.375, "dpace/weight_sum");

    result_free(&o);
    problem_free(&p);
}

static void test_loss_decay_closed_form(void) {
    /* One block of B = 3 on the identity head: k = 1 has ce ln 4, k = 2 has ce ln 2. gamma = 1
     * gives w = (0, 1, 1/e): loss = (ln 4 + ln 2 / e) / (1 + 1/e). The anchor's label is out of
     * range and its mask is 1. */
    const double h[6] = {-0.4, 0.9, 0, LN3, 1, 1};
    const double w_lm[4] = {1, 0, 0, 1};
    const int32_t labels[3] = {-5, 0, 1};
    const uint8_t mask[3] = {1, 1, 1};
    double loss, ce[3], q[3], w[3], dh[6];
    ft_loss_attrs a = attrs_make(3, FT_SCHEME_DECAY);
    a.gamma = 1;
    ft_ref_loss(3, 2, 2, &a, h, w_lm, labels, mask, &loss, ce, q, w, dh, NULL);
    const double ie = exp(-1.0);
    const double want = (2 * LN2 + LN2 * ie) / (1 + ie);
    FT_CHECK_NEAR(loss, want, 1e-14);
    FT_CHECK(w[0] == 0 && w[1] == 1 && fabs(w[2] - ie) < 1e-16, "decay w %g %g %g", w[0], w[1],
             w[2]);
    /* dh row 1 = (1/denom) * (-3/4, 3/4), row 2 = (w2/denom) * (1/2, -1/2). */
    FT_CHECK_NEAR(dh[2], -0.75 / (1 + ie), 1e-14);
    FT_CHECK_NEAR(dh[3], 0.75 / (1 + ie), 1e-14);
    FT_CHECK_NEAR(dh[4], ie / (1 + ie) * 0.5, 1e-14);
    FT_CHECK_NEAR(dh[5], -ie / (1 + ie) * 0.5, 1e-14);
    FT_CHECK(dh[0] == 0 && dh[1] == 0 && ce[0] == 0 && q[0] == 1, "anchor row scored");
}

static void test_loss_equal_logits(void) {
    /* Every row of w_lm the same vector: all V logits of a row are equal, so ce = ln V,
     * q = 1/V, softmax = 1/V, and dh = (w/denom) * (mean of the rows - the label row) = 0. With
     * the default weight-sum denominator the loss is ln V whatever the weights. dw_lm[v,:] =
     * sum_m (w_m/denom) * (1/V - [v = label_m]) * h_m, summed here by hand. */
    problem p = problem_random(5, 3, 4, 8, 11);
    for (int64_t v = 1; v < p.V; v++)
        memcpy(p.w_lm + v * p.H, p.w_lm, sizeof(double) * 8);
    result o = result_alloc(&p, NAN);
    ft_loss_attrs a = attrs_make(4, FT_SCHEME_DECAY);
    a.gamma = 2;
    a.want_dw = 1;
    run_loss(&p, &a, &o);
    FT_CHECK_NEAR(o.loss, log(11.0), 1e-14);
    double wsum = 0;
    for (int64_t m = 0; m < p.M; m++) {
        int64_t k = m % 4;
        double wk = p.sc[m] ? exp(-(double)(k - 1) / 2) : 0.0;
        wsum += wk;
        FT_CHECK_NEAR(o.w[m], wk, 1e-15);
        FT_CHECK_NEAR(o.ce[m], p.sc[m] ? log(11.0) : 0.0, 1e-14);
        FT_CHECK_NEAR(o.q[m], p.sc[m] ? 1 / 11.0 : 1.0, 1e-15);
        for (int64_t i = 0; i < p.H; i++)
            FT_CHECK(fabs(o.dh[m * p.H + i]) < 1e-15, "dh[%d,%d] = %g", (int)m, (int)i,
                     o.dh[m * p.H + i]);
    }
    double want[11 * 8] = {0};
    for (int64_t m = 0; m < p.M; m++) {
        if (!p.sc[m]) continue;
        double c = exp(-(double)(m % 4 - 1) / 2) / wsum;
        for (int64_t v = 0; v < p.V; v++) {
            double g = c * (1 / 11.0 - (v == p.labels[m] ? 1.0 : 0.0));
            for (int64_t i = 0; i < p.H; i++)
                want[v * p.H + i] += g * p.h[m * p.H + i];
        }
    }
    double err = ft_test_rel_err(o.dw, want, p.V * p.H);
    FT_CHECK(err < 1e-13, "equal-logit dw_lm rel err %g", err);
    result_free(&o);
    problem_free(&p);
}

/* ---- ft_ref_loss: anchors, unscored rows, empty batches --------------------------------- */

static void test_loss_anchor_and_unscored(void) {
    /* mask = 1 on every anchor, anchor labels far out of range, unscored labels -100: the
     * reference must not read them (ASan / valgrind catch a read of w_lm past its end), and the
     * outputs must be those of the same batch with the anchor flags cleared. */
    problem p = problem_random(11, 3, 5, 8, 11);
    for (int64_t m = 0; m < p.M; m += p.B) {
        p.mask[m] = 1;
        p.labels[m] = m == 0 ? INT32_MAX : (int32_t)(-1 - m);
    }
    for (int s = 0; s < N_SCHEMES; s++) {
        ft_loss_attrs a = attrs_make(5, all_schemes[s]);
        a.want_dw = 1;
        result o1 = result_alloc(&p, NAN), o2 = result_alloc(&p, NAN);
        run_loss(&p, &a, &o1);
        for (int64_t m = 0; m < p.M; m += p.B)
            p.mask[m] = 0;
        run_loss(&p, &a, &o2);
        for (int64_t m = 0; m < p.M; m += p.B)
            p.mask[m] = 1;
        int same = o1.loss == o2.loss && !memcmp(o1.ce, o2.ce, sizeof(double) * (size_t)p.M) &&
                   !memcmp(o1.q, o2.q, sizeof(double) * (size_t)p.M) &&
                   !memcmp(o1.w, o2.w, sizeof(double) * (size_t)p.M) &&
                   !memcmp(o1.dh, o2.dh, sizeof(double) * (size_t)(p.M * p.H)) &&
                   !memcmp(o1.dw, o2.dw, sizeof(double) * (size_t)(p.V * p.H));
        FT_CHECK(same, "%s: anchor mask changed the outputs", scheme_names[s]);
        int unscored_rows = 0;
        for (int64_t m = 0; m < p.M; m++) {
            if (p.sc[m]) {
                FT_CHECK(o1.ce[m] > 0 && o1.q[m] < 1 && o1.w[m] > 0,
                         "%s: scored row %d ce %g q %g w %g", scheme_names[s], (int)m, o1.ce[m],
                         o1.q[m], o1.w[m]);
                continue;
            }
            unscored_rows++;
            FT_CHECK(o1.ce[m] == 0 && o1.q[m] == 1 && o1.w[m] == 0,
                     "%s: unscored row %d ce %g q %g w %g", scheme_names[s], (int)m, o1.ce[m],
                     o1.q[m], o1.w[m]);
            FT_CHECK(all_equal(o1.dh + m * p.H, p.H, 0.0), "%s: unscored row %d has dh",
                     scheme_names[s], (int)m);
        }
        FT_CHECK(unscored_rows > 3, "only %d unscored rows", unscored_rows);
        result_free(&o1);
        result_free(&o2);
    }
    problem_free(&p);
}

/* A random problem (seed) in which only the anchors carry mask = 1 and every label is garbage. */
static problem problem_nothing_scored(uint64_t seed) {
    problem p = problem_random(seed, 3, 4, 8, 11);
    for (int64_t m = 0; m < p.M; m++) {
        p.mask[m] = m % p.B == 0;
        p.sc[m] = 0;
        p.labels[m] = -100;
    }
    return p;
}

static void test_loss_nothing_scored(void) {
    /* Loss and gradients are 0 for every scheme and norm, and every output is overwritten. */
    problem p = problem_nothing_scored(12);
    for (int s = 0; s < N_SCHEMES; s++)
        for (int n = 0; n < N_NORMS; n++) {
            ft_loss_attrs a = attrs_make(4, all_schemes[s]);
            a.norm = all_norms[n];
            a.want_dw = 1;
            result o = result_alloc(&p, 123.0);
            run_loss(&p, &a, &o);
            FT_CHECK(o.loss == 0 && all_equal(o.ce, p.M, 0) && all_equal(o.q, p.M, 1) &&
                         all_equal(o.w, p.M, 0) && all_equal(o.dh, p.M * p.H, 0) &&
                         all_equal(o.dw, p.V * p.H, 0),
                     "%s norm %d: nothing scored but loss %g", scheme_names[s], n, o.loss);
            result_free(&o);
        }
    problem_free(&p);
}

/* The same with the final norm: dh, dg and dw_lm all exactly 0. */
static void test_loss_nothing_scored_final_norm(void) {
    problem p = problem_nothing_scored(14);
    double g[8], dg[8];
    for (int k = 0; k < 8; k++)
        g[k] = 1 + 0.1 * k;
    for (int s = 0; s < N_SCHEMES; s++) {
        ft_loss_attrs a = attrs_make(4, all_schemes[s]);
        a.want_dw = 1;
        a.final_norm = 1;
        result o = result_alloc(&p, 123.0);
        for (int k = 0; k < 8; k++)
            dg[k] = 123.0;
        ft_ref_loss_normed(p.M, p.H, p.V, &a, 1e-6, p.h, g, p.w_lm, p.labels, p.mask, &o.loss, o.ce,
                           o.q, o.w, o.dh, dg, o.dw);
        FT_CHECK(o.loss == 0 && all_equal(o.dh, p.M * p.H, 0) && all_equal(dg, 8, 0) &&
                     all_equal(o.dw, p.V * p.H, 0) && all_equal(o.w, p.M, 0),
                 "%s final norm: nothing scored but loss %g", scheme_names[s], o.loss);
        result_free(&o);
    }
    problem_free(&p);
}

static void test_loss_zero_denominator(void) {
    /* dpace with num_seqs = 0: rows are scored, so ce, q and w are reported as usual, but the
     * denominator is 0 and so are the loss and every gradient. */
    problem p = problem_random(13, 3, 4, 8, 11);
    ft_loss_attrs a = attrs_make(4, FT_SCHEME_DPACE);
    a.want_dw = 1;
    result o1 = result_alloc(&p, NAN), o0 = result_alloc(&p, 5.0);
    run_loss(&p, &a, &o1);
    a.num_seqs = 0;
    run_loss(&p, &a, &o0);
    FT_CHECK(o0.loss == 0 && all_equal(o0.dh, p.M * p.H, 0) && all_equal(o0.dw, p.V * p.H, 0),
             "zero denominator: loss %g", o0.loss);
    FT_CHECK(!memcmp(o0.ce, o1.ce, sizeof(double) * (size_t)p.M) &&
                 !memcmp(o0.q, o1.q, sizeof(double) * (size_t)p.M) &&
                 !memcmp(o0.w, o1.w, sizeof(double) * (size_t)p.M),
             "zero denominator changed ce/q/w");
    FT_CHECK(o1.loss > 0, "dpace loss %g", o1.loss);
    result_free(&o1);
    result_free(&o0);
    problem_free(&p);
}

/* ---- ft_ref_loss: random batches against independent formulas --------------------------- */

static void test_loss_forward_random(void) {
    for (int s = 0; s < N_SCHEMES; s++)
        for (int64_t B = 4; B <= 5; B++) {
            problem p = problem_random(100 + (uint64_t)(s * 10 + B), 3, B, 8, 11);
            ft_loss_attrs a = attrs_make(B, all_schemes[s]);
            attrs_gammas(&a, 3, 1.5, 6, 10, 4);
            a.alpha = 0.35;
            a.num_seqs = 2;
            result o = result_alloc(&p, NAN);
            run_loss(&p, &a, &o);
            double ce[15], q[15], w[15];
            for (int64_t m = 0; m < p.M; m++) {
                ce[m] = p.sc[m] ? expect_ce(p.h + m * p.H, p.w_lm, p.V, p.H, p.labels[m]) : 0.0;
                q[m] = exp(-ce[m]);
            }
            for (int64_t b = 0; b < 3; b++)
                expect_block_weights(&a, q + b * B, p.sc + b * B, w + b * B);
            double num = 0;
            for (int64_t m = 0; m < p.M; m++)
                num += w[m] * ce[m];
            double loss = num / expect_denominator(&a, p.M, w, p.sc);
            double e_ce = ft_test_rel_err(o.ce, ce, p.M), e_q = ft_test_rel_err(o.q, q, p.M);
            double e_w = ft_test_rel_err(o.w, w, p.M);
            FT_CHECK(e_ce < 1e-13 && e_q < 1e-13 && e_w < 1e-13, "%s B %d: rel err ce %g q %g w %g",
                     scheme_names[s], (int)B, e_ce, e_q, e_w);
            FT_CHECK(fabs(o.loss - loss) <= 1e-13 * fabs(loss), "%s B %d: loss %.17g, want %.17g",
                     scheme_names[s], (int)B, o.loss, loss);
            result_free(&o);
            problem_free(&p);
        }
}

static void test_loss_norm_overrides(void) {
    /* Each norm divides the same weighted sum by its own denominator, and the gradients by the
     * same number: loss * denom and dh * denom do not depend on the norm. */
    for (int s = 0; s < N_SCHEMES; s++) {
        problem p = problem_random(200 + (uint64_t)s, 3, 5, 8, 11);
        ft_loss_attrs a = attrs_make(5, all_schemes[s]);
        a.num_seqs = 2.5;
        a.gamma = 4;
        a.norm = FT_NORM_NONE;
        result base = result_alloc(&p, NAN);
        run_loss(&p, &a, &base);
        double num = 0, wsum = 0, count = 0;
        for (int64_t m = 0; m < p.M; m++) {
            num += base.w[m] * base.ce[m];
            wsum += base.w[m];
            count += p.sc[m];
        }
        FT_CHECK(fabs(base.loss - num) <= 1e-14 * num, "%s none: loss %.17g, want %.17g",
                 scheme_names[s], base.loss, num);
        const double def = is_dpace(all_schemes[s]) ? 2.5 : wsum;
        const double want[5] = {def, wsum, count, 2.5, 1};
        for (int n = 0; n < N_NORMS; n++) {
            a.norm = all_norms[n];
            result o = result_alloc(&p, NAN);
            run_loss(&p, &a, &o);
            FT_CHECK(fabs(o.loss * want[n] - num) <= 1e-13 * num,
                     "%s norm %d: loss %.17g, want %.17g / %g", scheme_names[s], n, o.loss, num,
                     want[n]);
            for (int64_t i = 0; i < p.M * p.H; i++)
                o.dh[i] *= want[n];
            double err = ft_test_rel_err(o.dh, base.dh, p.M * p.H);
            FT_CHECK(err < 1e-13, "%s norm %d: dh * denom off by %g", scheme_names[s], n, err);
            result_free(&o);
        }
        result_free(&base);
        problem_free(&p);
    }
}

/* Central differences (step eps) of fixed_weight_loss in each of the n entries of x, one of p's
 * inputs, into fd. */
static void fd_fixed_weight(problem *p, double *x, int64_t n, const double *w, double denom,
                            double eps, double *fd) {
    for (int64_t i = 0; i < n; i++) {
        double x0 = x[i];
        x[i] = x0 + eps;
        double lp = fixed_weight_loss(p, p->h, p->w_lm, w, denom);
        x[i] = x0 - eps;
        double lm = fixed_weight_loss(p, p->h, p->w_lm, w, denom);
        x[i] = x0;
        fd[i] = (lp - lm) / (2 * eps);
    }
}

static void test_loss_fd_gradients(void) {
    /* Central differences of L(h, w_lm) = sum_m w[m] * ce[m] / denom with w and denom held at
     * the values the forward produced. */
    for (int s = 0; s < N_SCHEMES; s++)
        for (int64_t B = 4; B <= 5; B++)
            for (int n = 0; n < 2; n++) {
                problem p = problem_random(300 + (uint64_t)(s * 100 + B * 10 + n), 3, B, 8, 11);
                ft_loss_attrs a = attrs_make(B, all_schemes[s]);
                a.want_dw = 1;
                attrs_gammas(&a, 2.5, 1, 5, 8, 3);
                a.num_seqs = 2;
                a.norm = n == 0 ? FT_NORM_DEFAULT : FT_NORM_COUNT;
                result o = result_alloc(&p, NAN);
                run_loss(&p, &a, &o);
                const double denom = expect_denominator(&a, p.M, o.w, p.sc);
                const double eps = 1e-5;

                double fd_h[15 * 8], fd_w[11 * 8];
                fd_fixed_weight(&p, p.h, p.M * p.H, o.w, denom, eps, fd_h);
                fd_fixed_weight(&p, p.w_lm, p.V * p.H, o.w, denom, eps, fd_w);
                double l0 = fixed_weight_loss(&p, p.h, p.w_lm, o.w, denom);
                FT_CHECK(fabs(o.loss - l0) <= 1e-13 * l0, "%s B %d: loss %.17g vs %.17g",
                         scheme_names[s], (int)B, o.loss, l0);
                double eh = ft_test_rel_err(o.dh, fd_h, p.M * p.H);
                double ew = ft_test_rel_err(o.dw, fd_w, p.V * p.H);
                FT_CHECK(eh < 1e-6, "%s B %d norm %d: dh rel err %g", scheme_names[s], (int)B, n,
                         eh);
                FT_CHECK(ew < 1e-6, "%s B %d norm %d: dw_lm rel err %g", scheme_names[s], (int)B, n,
                         ew);
                /* The gradients are not trivially small. */
                double nh = 0;
                for (int64_t i = 0; i < p.M * p.H; i++)
                    nh += fd_h[i] * fd_h[i];
                FT_CHECK(nh > 1e-6, "%s: |dh|^2 = %g", scheme_names[s], nh);
                result_free(&o);
                problem_free(&p);
            }
}

/* final_norm: the loss of hn = h / rms(h) * g (this file's own normalisation), and central
 * differences of it, weights and denominator held, for dh, dg and dw_lm. */
static void normed(const problem *p, const double *h, const double *g, double eps, double *hn) {
    for (int64_t m = 0; m < p->M; m++) {
        double ss = 0;
        for (int64_t k = 0; k < p->H; k++)
            ss += h[m * p->H + k] * h[m * p->H + k];
        const double rms = sqrt(ss / (double)p->H + eps);
        for (int64_t k = 0; k < p->H; k++)
            hn[m * p->H + k] = h[m * p->H + k] / rms * g[k];
    }
}

static double normed_loss(const problem *p, const double *h, const double *g, const double *w,
                          double denom) {
    double hn[15 * 8];
    normed(p, h, g, 1e-6, hn);
    return fixed_weight_loss(p, hn, p->w_lm, w, denom);
}

static void test_loss_final_norm(void) {
    for (int s = 0; s < N_SCHEMES; s += 3) { /* uniform, dpace, progressive_epoch */
        problem p = problem_random(500 + (uint64_t)s, 3, 5, 8, 11);
        for (int64_t i = 0; i < p.M * p.H; i++)
            p.h[i] *= 3.0; /* far from unit rms: the norm matters */
        double g[8], dg[8];
        for (int k = 0; k < 8; k++)
            g[k] = 0.7 + 0.1 * k;
        ft_loss_attrs a = attrs_make(5, all_schemes[s]);
        a.want_dw = 1;
        a.final_norm = 1;
        a.epoch = 3;
        a.norm = FT_NORM_WEIGHT_SUM;
        result o = result_alloc(&p, NAN), plain = result_alloc(&p, NAN);
        ft_ref_loss_normed(p.M, p.H, p.V, &a, 1e-6, p.h, g, p.w_lm, p.labels, p.mask, &o.loss, o.ce,
                           o.q, o.w, o.dh, dg, o.dw);
        /* Forward: the plain loss of hn, bit for bit in ce, q and w. */
        double hn[15 * 8];
        normed(&p, p.h, g, 1e-6, hn);
        ft_ref_loss(p.M, p.H, p.V, &a, hn, p.w_lm, p.labels, p.mask, &plain.loss, plain.ce, plain.q,
                    plain.w, plain.dh, plain.dw);
        FT_CHECK(fabs(o.loss - plain.loss) <= 1e-14 * plain.loss && o.loss > 0,
                 "%s: final norm loss %.17g vs %.17g", scheme_names[s], o.loss, plain.loss);
        FT_CHECK(ft_test_rel_err(o.w, plain.w, p.M) < 1e-14, "%s: weights", scheme_names[s]);

        const double denom = expect_denominator(&a, p.M, o.w, p.sc), eps = 1e-5;
        double fd_h[15 * 8], fd_g[8];
        for (int64_t i = 0; i < p.M * p.H; i++) {
            const double x = p.h[i];
            p.h[i] = x + eps;
            const double lp = normed_loss(&p, p.h, g, o.w, denom);
            p.h[i] = x - eps;
            const double lm = normed_loss(&p, p.h, g, o.w, denom);
            p.h[i] = x;
            fd_h[i] = (lp - lm) / (2 * eps);
        }
        for (int k = 0; k < 8; k++) {
            const double x = g[k];
            g[k] = x + eps;
            const double lp = normed_loss(&p, p.h, g, o.w, denom);
            g[k] = x - eps;
            const double lm = normed_loss(&p, p.h, g, o.w, denom);
            g[k] = x;
            fd_g[k] = (lp - lm) / (2 * eps);
        }
        const double eh = ft_test_rel_err(o.dh, fd_h, p.M * p.H);
        const double eg = ft_test_rel_err(dg, fd_g, 8);
        const double ew = ft_test_rel_err(o.dw, plain.dw, p.V * p.H);
        FT_CHECK(eh < 1e-6, "%s: final norm dh rel err %g", scheme_names[s], eh);
        FT_CHECK(eg < 1e-6, "%s: final norm dg rel err %g", scheme_names[s], eg);
        FT_CHECK(ew < 1e-14, "%s: dw_lm is not the plain loss's on hn (%g)", scheme_names[s], ew);
        /* The norm's Jacobian removes the component of dh along h: sum_k dh[m,k] h[m,k] = 0 per
         * row (the loss does not change when h is scaled). */
        for (int64_t m = 0; m < p.M; m++) {
            double dot_h = 0, nh = 0, nd = 0;
            for (int64_t k = 0; k < p.H; k++) {
                dot_h += o.dh[m * p.H + k] * p.h[m * p.H + k];
                nh += p.h[m * p.H + k] * p.h[m * p.H + k];
                nd += o.dh[m * p.H + k] * o.dh[m * p.H + k];
            }
            FT_CHECK(fabs(dot_h) <= 1e-6 * sqrt(nh * nd) + 1e-300,
                     "%s row %d: dh . h = %g (scale invariance, up to eps)", scheme_names[s],
                     (int)m, dot_h);
        }
        result_free(&o);
        result_free(&plain);
        problem_free(&p);
    }
}

static void test_loss_want_dw(void) {
    problem p = problem_random(400, 3, 4, 8, 11);
    for (int s = 0; s < N_SCHEMES; s++) {
        ft_loss_attrs a = attrs_make(4, all_schemes[s]);
        /* want_dw = 1 into NaN-filled and zero-filled buffers: same bits, nonzero. */
        a.want_dw = 1;
        result full = result_alloc(&p, NAN), full0 = result_alloc(&p, 0.0);
        run_loss(&p, &a, &full);
        run_loss(&p, &a, &full0);
        FT_CHECK(!memcmp(full.dw, full0.dw, sizeof(double) * (size_t)(p.V * p.H)) &&
                     !memcmp(full.dh, full0.dh, sizeof(double) * (size_t)(p.M * p.H)) &&
                     !memcmp(full.ce, full0.ce, sizeof(double) * (size_t)p.M) &&
                     !memcmp(full.q, full0.q, sizeof(double) * (size_t)p.M) &&
                     !memcmp(full.w, full0.w, sizeof(double) * (size_t)p.M),
                 "%s: outputs depend on their previous contents", scheme_names[s]);
        FT_CHECK(!all_equal(full.dw, p.V * p.H, 0.0), "%s: dw_lm all zero", scheme_names[s]);

        /* want_dw = 0 with a NULL dw_lm: same loss and dh. */
        a.want_dw = 0;
        result nodw = result_alloc(&p, NAN);
        run_loss(&p, &a, &nodw); /* run_loss passes NULL when !want_dw */
        FT_CHECK(nodw.loss == full.loss &&
                     !memcmp(nodw.dh, full.dh, sizeof(double) * (size_t)(p.M * p.H)),
                 "%s: want_dw changed loss or dh", scheme_names[s]);

        /* want_dw = 0 with a buffer: left untouched. */
        double *sentinel = ft_test_alloc(sizeof(double) * (size_t)(p.V * p.H));
        for (int64_t i = 0; i < p.V * p.H; i++)
            sentinel[i] = 42.0;
        ft_ref_loss(p.M, p.H, p.V, &a, p.h, p.w_lm, p.labels, p.mask, &nodw.loss, nodw.ce, nodw.q,
                    nodw.w, nodw.dh, sentinel);
        FT_CHECK(all_equal(sentinel, p.V * p.H, 42.0), "%s: want_dw = 0 wrote dw_lm",
                 scheme_names[s]);
        free(sentinel);
        result_free(&full);
        result_free(&full0);
        result_free(&nodw);
    }
    problem_free(&p);
}

int main(void) {
    FT_RUN(test_gamma);
    FT_RUN(test_weights_uniform_decay_progressive);
    FT_RUN(test_weights_dpace_by_hand);
    FT_RUN(test_weights_dpace_is_surrogate_gradient);
    FT_RUN(test_weights_match_table);
    FT_RUN(test_denominator);
    FT_RUN(test_loss_v2_closed_form);
    FT_RUN(test_loss_decay_closed_form);
    FT_RUN(test_loss_equal_logits);
    FT_RUN(test_loss_anchor_and_unscored);
    FT_RUN(test_loss_nothing_scored);
    FT_RUN(test_loss_zero_denominator);
    FT_RUN(test_loss_forward_random);
    FT_RUN(test_loss_norm_overrides);
    FT_RUN(test_loss_fd_gradients);
    FT_RUN(test_loss_want_dw);
    FT_RUN(test_loss_final_norm);
    FT_RUN(test_loss_nothing_scored_final_norm);
    return ft_test_finish();
}
