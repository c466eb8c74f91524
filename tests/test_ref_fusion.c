/* test_ref_fusion.c: the float64 reference of fusion.dflare and fusion.dflash (SPEC.md).
 *
 * The reference is the oracle for every backend, so it is checked against things that do not
 * come from running it: numbers worked out by hand, cases that reduce to a plain RMSNorm
 * (T = 1, one dominant logit, a selecting w_fc), invariances of the formulas, and
 * central-difference gradients of sum(f * R) for a random R.
 */
#include "ft_grad.h"
#include "ft_test.h"

#include "core/rng.h"
#include "fusion/fusion_ref.h"

#include <math.h>
#include <string.h>

/* ---- helpers ------------------------------------------------------------------------------ */

/* A gain away from zero so no feature is switched off. */
static void fill_gain(ft_rng *r, double *g, int64_t n) {
    for (int64_t i = 0; i < n; i++)
        g[i] = 0.5 + ft_rng_uniform(r);
}

static double max_abs_diff(const double *a, const double *b, int64_t n) {
    double m = 0;
    for (int64_t i = 0; i < n; i++)
        m = fmax(m, fabs(a[i] - b[i]));
    return m;
}

/* y[h] = u[h] / sqrt(mean(u^2) + eps) * g[h], written out here independently of the library. */
static void hand_rmsnorm(int64_t H, double eps, const double *u, const double *g, double *y) {
    double ms = 0;
    for (int64_t h = 0; h < H; h++)
        ms += u[h] * u[h];
    ms /= (double)H;
    for (int64_t h = 0; h < H; h++)
        y[h] = u[h] / sqrt(ms + eps) * g[h];
}

/* The three gradients of either op: of x, of its weights (w or w_fc) and of g, and their sizes. */
typedef struct grads {
    double *dx, *dw, *dg;
    int64_t nx, nw, ng;
} grads;

static grads grads_new(int64_t nx, int64_t nw, int64_t ng) {
    grads d = {dalloc(nx), dalloc(nw), dalloc(ng), nx, nw, ng};
    return d;
}

static void grads_free(grads *d) { FT_FREE(d->dx, d->dw, d->dg); }

/* Every gradient of d against central differences of obj (of ctx, whose inputs are x, w and g),
 * over every entry (count large) or a random sample of entries; wname names w's. */
static void check_grads(objective_fn obj, void *ctx, double *x, double *w, double *g,
                        const char *wname, const grads *d, int64_t count, ft_rng *r) {
    CHECK_GRAD("dx", obj, ctx, x, d->dx, d->nx, count, r);
    CHECK_GRAD(wname, obj, ctx, w, d->dw, d->nw, count, r);
    CHECK_GRAD("dg", obj, ctx, g, d->dg, d->ng, count, r);
}

/* Outputs are overwritten, not accumulated into: the backward bwd_into of ctx writes into
 * gradients full of garbage (NaN, 1e300, -3) what it writes into clean ones. */
static void check_overwrites(void (*bwd_into)(const void *, grads *), const void *ctx,
                             const grads *clean, const char *wname) {
    grads dirty = grads_new(clean->nx, clean->nw, clean->ng);
    for (int64_t i = 0; i < dirty.nx; i++)
        dirty.dx[i] = NAN;
    for (int64_t i = 0; i < dirty.nw; i++)
        dirty.dw[i] = 1e300;
    for (int64_t i = 0; i < dirty.ng; i++)
        dirty.dg[i] = -3;
    bwd_into(ctx, &dirty);
    FT_CHECK(memcmp(clean->dx, dirty.dx, sizeof(double) * (size_t)dirty.nx) == 0,
             "dx depends on its old contents");
    FT_CHECK(memcmp(clean->dw, dirty.dw, sizeof(double) * (size_t)dirty.nw) == 0,
             "%s depends on its old contents", wname);
    FT_CHECK(memcmp(clean->dg, dirty.dg, sizeof(double) * (size_t)dirty.ng) == 0,
             "dg depends on its old contents");
    grads_free(&dirty);
}

/* ---- fusion.dflare: cases ------------------------------------------------------------------ */

typedef struct dflare_case {
    int64_t N, T, H, D;
    double eps;
    double *x, *w, *g; /* inputs */
    double *R;         /* the objective's random weights, [D,N,H] */
    double *f;         /* forward scratch */
} dflare_case;

static double dflare_objective(void *ctx) {
    dflare_case *c = ctx;
    ft_ref_fusion_dflare_fwd(c->N, c->T, c->H, c->D, c->eps, c->x, c->w, c->g, c->f);
    return sum_prod(c->f, c->R, c->D * c->N * c->H);
}

static dflare_case dflare_new(ft_rng *r, int64_t N, int64_t T, int64_t H, int64_t D) {
    dflare_case c = {N, T, H, D, 1e-6, NULL, NULL, NULL, NULL, NULL};
    c.x = dalloc(N * T * H);
    c.w = dalloc(D * T);
    c.g = dalloc(H);
    c.R = dalloc(D * N * H);
    c.f = dalloc(D * N * H);
    fill_normal(r, c.x, N * T * H, 1.0);
    fill_normal(r, c.w, D * T, 1.0);
    fill_gain(r, c.g, H);
    fill_normal(r, c.R, D * N * H, 1.0);
    return c;
}

static void dflare_free(dflare_case *c) { FT_FREE(c->x, c->w, c->g, c->R, c->f); }

/* ---- fusion.dflare: forward --------------------------------------------------------------- */

/* T = 1: the softmax is 1 whatever w holds, so every layer is rmsnorm(x) * g. Numbers by hand:
 * x = (1,-2,3,-4), mean(x^2) = 30/4 = 7.5. */
static void test_dflare_hand_T1(void) {
    const double x[4] = {1, -2, 3, -4}, g[4] = {0.5, 1, 2, -1}, w[2] = {3.0, -7.0};
    const double eps = 1e-6, rms = sqrt(7.5 + eps);
    const double want[4] = {1 / rms * 0.5, -2 / rms * 1, 3 / rms * 2, -4 / rms * -1};
    double f[8];
    ft_ref_fusion_dflare_fwd(1, 1, 4, 2, eps, x, w, g, f);
    for (int i = 0; i < 2; i++)
        for (int h = 0; h < 4; h++)
            FT_CHECK_NEAR(f[i * 4 + h], want[h], 1e-14);
}

/* T = 2 with w = (log 3, 0): the softmax is exactly (3/4, 1/4), so s = 0.75 x0 + 0.25 x1 (this
 * pins which t gets which weight). Second layer w = (0, log 3): the mirror image. */
static void test_dflare_hand_T2(void) {
    const double x[2 * 2] = {4, 0, 0, 8}; /* x[0,0,:] = (4,0), x[0,1,:] = (0,8) */
    const double w[2 * 2] = {log(3.0), 0, 0, log(3.0)};
    const double g[2] = {1, 3}, eps = 0;
    double f[2 * 2];
    ft_ref_fusion_dflare_fwd(1, 2, 2, 2, eps, x, w, g, f);
    /* layer 0: s = (3, 2), mean(s^2) = 6.5 */
    FT_CHECK_NEAR(f[0], 3 / sqrt(6.5), 1e-14);
    FT_CHECK_NEAR(f[1], 2 / sqrt(6.5) * 3, 1e-14);
    /* layer 1: s = (1, 6), mean(s^2) = 18.5 */
    FT_CHECK_NEAR(f[2], 1 / sqrt(18.5), 1e-14);
    FT_CHECK_NEAR(f[3], 6 / sqrt(18.5) * 3, 1e-14);
}

/* Random data with T = 1 against an RMSNorm written in this file. */
static void test_dflare_T1_is_rmsnorm(void) {
    ft_rng r;
    ft_rng_seed(&r, 11);
    dflare_case c = dflare_new(&r, 24, 1, 64, 3);
    double *want = dalloc(c.H);
    ft_ref_fusion_dflare_fwd(c.N, c.T, c.H, c.D, c.eps, c.x, c.w, c.g, c.f);
    double worst = 0;
    for (int64_t n = 0; n < c.N; n++) {
        hand_rmsnorm(c.H, c.eps, c.x + n * c.H, c.g, want);
        for (int64_t i = 0; i < c.D; i++)
            worst = fmax(worst, max_abs_diff(c.f + (i * c.N + n) * c.H, want, c.H));
    }
    FT_CHECK(worst < 1e-13, "max |f - rmsnorm(x) g| = %.3g", worst);
    free(want);
    dflare_free(&c);
}

/* One logit 50 above the rest: a = 1 - O(e^-50), below double rounding, so layer i is
 * rmsnorm(x[:, pick[i], :]) * g. Each layer picks a different target layer. */
static void test_dflare_dominant_logit(void) {
    ft_rng r;
    ft_rng_seed(&r, 12);
    dflare_case c = dflare_new(&r, 24, 4, 64, 3);
    const int64_t pick[3] = {2, 0, 3};
    for (int64_t i = 0; i < c.D; i++)
        for (int64_t t = 0; t < c.T; t++)
            c.w[i * c.T + t] = t == pick[i] ? 50.0 : 0.0;
    double *u = dalloc(c.H), *want = dalloc(c.H);
    ft_ref_fusion_dflare_fwd(c.N, c.T, c.H, c.D, c.eps, c.x, c.w, c.g, c.f);
    double worst = 0;
    for (int64_t i = 0; i < c.D; i++)
        for (int64_t n = 0; n < c.N; n++) {
            for (int64_t h = 0; h < c.H; h++)
                u[h] = c.x[(n * c.T + pick[i]) * c.H + h];
            hand_rmsnorm(c.H, c.eps, u, c.g, want);
            worst = fmax(worst, max_abs_diff(c.f + (i * c.N + n) * c.H, want, c.H));
        }
    FT_CHECK(worst < 1e-12, "max |f - rmsnorm(x[pick]) g| = %.3g", worst);
    FT_FREE(u, want);
    dflare_free(&c);
}

/* Equal logits in a row (different constants per row): the mix is the plain mean over t, and
 * every layer gives the same f. Huge logits (1e3) also check the softmax does not overflow. */
static void test_dflare_equal_logits(void) {
    ft_rng r;
    ft_rng_seed(&r, 13);
    dflare_case c = dflare_new(&r, 24, 4, 64, 3);
    const double consts[3] = {-2.5, 0.0, 1000.0};
    for (int64_t i = 0; i < c.D; i++)
        for (int64_t t = 0; t < c.T; t++)
            c.w[i * c.T + t] = consts[i];
    double *u = dalloc(c.H), *want = dalloc(c.H);
    ft_ref_fusion_dflare_fwd(c.N, c.T, c.H, c.D, c.eps, c.x, c.w, c.g, c.f);
    double worst = 0;
    int finite = 1;
    for (int64_t n = 0; n < c.N; n++) {
        for (int64_t h = 0; h < c.H; h++) {
            u[h] = 0;
            for (int64_t t = 0; t < c.T; t++)
                u[h] += c.x[(n * c.T + t) * c.H + h] / (double)c.T;
        }
        hand_rmsnorm(c.H, c.eps, u, c.g, want);
        for (int64_t i = 0; i < c.D; i++) {
            worst = fmax(worst, max_abs_diff(c.f + (i * c.N + n) * c.H, want, c.H));
            for (int64_t h = 0; h < c.H; h++)
                finite &= isfinite(c.f[(i * c.N + n) * c.H + h]);
        }
    }
    FT_CHECK(finite, "f has a non-finite value with logits of 1000");
    FT_CHECK(worst < 1e-13, "max |f - rmsnorm(mean_t x) g| = %.3g", worst);
    FT_FREE(u, want);
    dflare_free(&c);
}

/* Invariances of the formula: softmax ignores a constant added to a row of w; with eps = 0,
 * RMSNorm ignores a positive scale of x and every row of f / g has mean square exactly 1; f is
 * linear in g. */
static void test_dflare_invariances(void) {
    ft_rng r;
    ft_rng_seed(&r, 14);
    dflare_case c = dflare_new(&r, 24, 4, 64, 3);
    const int64_t nf = c.D * c.N * c.H;
    double *f0 = dalloc(nf), *f1 = dalloc(nf);
    double *x2 = dalloc(c.N * c.T * c.H), *w2 = dalloc(c.D * c.T), *g2 = dalloc(c.H);

    ft_ref_fusion_dflare_fwd(c.N, c.T, c.H, c.D, c.eps, c.x, c.w, c.g, f0);
    for (int64_t i = 0; i < c.D; i++)
        for (int64_t t = 0; t < c.T; t++)
            w2[i * c.T + t] = c.w[i * c.T + t] + 3.0 * (double)i - 5;
    ft_ref_fusion_dflare_fwd(c.N, c.T, c.H, c.D, c.eps, c.x, w2, c.g, f1);
    FT_CHECK(ft_test_rel_err(f1, f0, nf) < 1e-14, "shifting w rows changed f by %.3g",
             ft_test_rel_err(f1, f0, nf));

    for (int64_t h = 0; h < c.H; h++)
        g2[h] = 2.5 * c.g[h];
    ft_ref_fusion_dflare_fwd(c.N, c.T, c.H, c.D, c.eps, c.x, c.w, g2, f1);
    for (int64_t i = 0; i < nf; i++)
        f1[i] /= 2.5;
    FT_CHECK(ft_test_rel_err(f1, f0, nf) < 1e-14, "f is not linear in g: %.3g",
             ft_test_rel_err(f1, f0, nf));

    ft_ref_fusion_dflare_fwd(c.N, c.T, c.H, c.D, 0.0, c.x, c.w, c.g, f0);
    for (int64_t i = 0; i < c.N * c.T * c.H; i++)
        x2[i] = 7.0 * c.x[i];
    ft_ref_fusion_dflare_fwd(c.N, c.T, c.H, c.D, 0.0, x2, c.w, c.g, f1);
    FT_CHECK(ft_test_rel_err(f1, f0, nf) < 1e-14, "eps = 0: scaling x changed f by %.3g",
             ft_test_rel_err(f1, f0, nf));

    double worst = 0;
    for (int64_t row = 0; row < c.D * c.N; row++) {
        double ms = 0;
        for (int64_t h = 0; h < c.H; h++) {
            double y = f0[row * c.H + h] / c.g[h];
            ms += y * y / (double)c.H;
        }
        worst = fmax(worst, fabs(ms - 1.0));
    }
    FT_CHECK(worst < 1e-13, "eps = 0: mean((f/g)^2) off 1 by %.3g", worst);

    FT_FREE(f0, f1, x2, w2, g2);
    dflare_free(&c);
}

/* ---- fusion.dflare: backward -------------------------------------------------------------- */

static void dflare_bwd_into(const void *ctx, grads *d) {
    const dflare_case *c = ctx;
    ft_ref_fusion_dflare_bwd(c->N, c->T, c->H, c->D, c->eps, c->x, c->w, c->g, c->R, d->dx, d->dw,
                             d->dg);
}

static grads dflare_bwd(const dflare_case *c) {
    grads d = grads_new(c->N * c->T * c->H, c->D * c->T, c->H);
    dflare_bwd_into(c, &d);
    return d;
}

/* Every gradient against central differences of sum(f * R), over every entry (count large) or a
 * random sample of entries. */
static void dflare_grad_check(dflare_case *c, int64_t count, ft_rng *r) {
    grads d = dflare_bwd(c);
    check_grads(dflare_objective, c, c->x, c->w, c->g, "dw", &d, count, r);
    grads_free(&d);
}

static void test_dflare_grad_small(void) {
    ft_rng r;
    ft_rng_seed(&r, 21);
    dflare_case c = dflare_new(&r, 3, 3, 5, 2);
    dflare_grad_check(&c, 1 << 30, &r);
    dflare_free(&c);
}

/* SPEC's reference initialisation of w (0 except w[i, min(T-1, floor(i*T/D))] = 2), D > T. */
static void test_dflare_grad_reference_init(void) {
    ft_rng r;
    ft_rng_seed(&r, 22);
    dflare_case c = dflare_new(&r, 4, 3, 6, 5);
    for (int64_t i = 0; i < c.D; i++)
        for (int64_t t = 0; t < c.T; t++) {
            c.w[i * c.T + t] = t == ft_ref_fusion_dflare_init_col(i, c.T, c.D) ? 2.0 : 0.0;
        }
    dflare_grad_check(&c, 1 << 30, &r);
    dflare_free(&c);
}

/* The initial column is floor(i*T/D) in integers, capped at T-1. The public trainer computes
 * int(i/D*T) in floating point, which rounds 15/22*22 = 14.999... down to 14: the integer rule
 * is the one SPEC.md states and the one followed. Every D, T <= 64 against exact rational
 * arithmetic: col*D <= i*T < (col+1)*D. */
static void test_dflare_init_col(void) {
    FT_CHECK(ft_ref_fusion_dflare_init_col(15, 22, 22) == 15, "D = T = 22, i = 15: column %lld",
             (long long)ft_ref_fusion_dflare_init_col(15, 22, 22));
    FT_CHECK((int64_t)(15.0 / 22.0 * 22.0) == 14, "the floating-point rule differs here");
    FT_CHECK(ft_ref_fusion_dflare_init_col(6, 9, 7) == 7, "dflare preset D 7, T 9, i 6");
    FT_CHECK(ft_ref_fusion_dflare_init_col(7, 5, 8) == 4, "D 8, T 5, i 7: floor(35/8) = 4");
    FT_CHECK(ft_ref_fusion_dflare_init_col(9, 3, 10) == 2, "D > T: capped at T-1");
    int bad = 0;
    for (int64_t D = 1; D <= 64; D++)
        for (int64_t T = 1; T <= 64; T++)
            for (int64_t i = 0; i < D; i++) {
                const int64_t col = ft_ref_fusion_dflare_init_col(i, T, D);
                bad += col < 0 || col > T - 1 || col * D > i * T ||
                       (col < T - 1 && (col + 1) * D <= i * T) ||
                       (i > 0 && col < ft_ref_fusion_dflare_init_col(i - 1, T, D));
            }
    FT_CHECK(bad == 0, "%d (D, T, i) with a column off floor(i*T/D)", bad);
}

/* The brief's shape, a sample of entries per gradient, plus identities that hold exactly:
 * sum_t dw[i,t] = 0 (softmax ignores a shift of w[i,:]); sum dg * g = sum df * f (f is linear
 * in g); with eps = 0, sum dx * x = 0 (f does not change when x is scaled). */
static void test_dflare_grad_spec_shape(void) {
    ft_rng r;
    ft_rng_seed(&r, 23);
    dflare_case c = dflare_new(&r, 24, 4, 64, 3);
    dflare_grad_check(&c, 60, &r);

    grads d = dflare_bwd(&c);
    double worst = 0, scale = 0;
    for (int64_t i = 0; i < c.D; i++) {
        double s = 0;
        for (int64_t t = 0; t < c.T; t++) {
            s += d.dw[i * c.T + t];
            scale = fmax(scale, fabs(d.dw[i * c.T + t]));
        }
        worst = fmax(worst, fabs(s));
    }
    FT_CHECK(scale > 1e-3 && worst < 1e-12 * fmax(1, scale), "sum_t dw = %.3g (|dw| ~ %.3g)", worst,
             scale);
    ft_ref_fusion_dflare_fwd(c.N, c.T, c.H, c.D, c.eps, c.x, c.w, c.g, c.f);
    FT_CHECK_NEAR(sum_prod(d.dg, c.g, c.H), sum_prod(c.R, c.f, c.D * c.N * c.H), 1e-12);
    grads_free(&d);

    c.eps = 0;
    d = dflare_bwd(&c);
    const double xdx = sum_prod(d.dx, c.x, c.N * c.T * c.H);
    const double ref = norm2(d.dx, c.N * c.T * c.H) * norm2(c.x, c.N * c.T * c.H);
    FT_CHECK(fabs(xdx) < 1e-12 * ref, "eps = 0: sum dx * x = %.3g (scale %.3g)", xdx, ref);
    grads_free(&d);
    dflare_free(&c);
}

/* Outputs are overwritten, not accumulated into: garbage in the buffers changes nothing. */
static void test_dflare_overwrites(void) {
    ft_rng r;
    ft_rng_seed(&r, 24);
    dflare_case c = dflare_new(&r, 5, 3, 8, 2);
    grads clean = dflare_bwd(&c);
    check_overwrites(dflare_bwd_into, &c, &clean, "dw");
    for (int64_t i = 0; i < c.D * c.N * c.H; i++)
        c.f[i] = NAN;
    ft_ref_fusion_dflare_fwd(c.N, c.T, c.H, c.D, c.eps, c.x, c.w, c.g, c.f);
    int finite = 1;
    for (int64_t i = 0; i < c.D * c.N * c.H; i++)
        finite &= isfinite(c.f[i]);
    FT_CHECK(finite, "f kept a NaN from its old contents");
    grads_free(&clean);
    dflare_free(&c);
}

/* ---- fusion.dflash: cases ----------------------------------------------------------------- */

typedef struct dflash_case {
    int64_t N, T, H;
    double eps;
    double *x, *w_fc, *g, *R, *f;
} dflash_case;

static double dflash_objective(void *ctx) {
    dflash_case *c = ctx;
    ft_ref_fusion_dflash_fwd(c->N, c->T, c->H, c->eps, c->x, c->w_fc, c->g, c->f);
    return sum_prod(c->f, c->R, c->N * c->H);
}

static dflash_case dflash_new(ft_rng *r, int64_t N, int64_t T, int64_t H) {
    dflash_case c = {N, T, H, 1e-6, NULL, NULL, NULL, NULL, NULL};
    c.x = dalloc(N * T * H);
    c.w_fc = dalloc(H * T * H);
    c.g = dalloc(H);
    c.R = dalloc(N * H);
    c.f = dalloc(N * H);
    fill_normal(r, c.x, N * T * H, 1.0);
    fill_normal(r, c.w_fc, H * T * H, 1.0 / sqrt((double)(T * H)));
    fill_gain(r, c.g, H);
    fill_normal(r, c.R, N * H, 1.0);
    return c;
}

static void dflash_free(dflash_case *c) { FT_FREE(c->x, c->w_fc, c->g, c->R, c->f); }

/* By hand, T = 1, H = 2, w_fc = [[1,2],[3,4]] (out x in, so c = w_fc x, not w_fc^T x):
 * x = (1,1) gives c = (3,7), mean(c^2) = 29; x = (2,-1) gives c = (0,2), mean(c^2) = 2. */
static void test_dflash_hand(void) {
    const double x[4] = {1, 1, 2, -1}, w_fc[4] = {1, 2, 3, 4}, g[2] = {0.5, -2};
    const double eps = 1e-6;
    double f[4];
    ft_ref_fusion_dflash_fwd(2, 1, 2, eps, x, w_fc, g, f);
    FT_CHECK_NEAR(f[0], 3 / sqrt(29 + eps) * 0.5, 1e-14);
    FT_CHECK_NEAR(f[1], 7 / sqrt(29 + eps) * -2, 1e-14);
    FT_CHECK_NEAR(f[2], 0.0, 1e-14);
    FT_CHECK_NEAR(f[3], 2 / sqrt(2 + eps) * -2, 1e-14);
}

/* w_fc made of identity blocks: [0, I, 0] selects target layer 1 (the reshape is t major), so f
 * = rmsnorm(x[:,1,:]) g; [I/T, ..., I/T] averages the layers, which is exactly fusion.dflare
 * with equal logits. */
static void test_dflash_selecting_weights(void) {
    ft_rng r;
    ft_rng_seed(&r, 31);
    dflash_case c = dflash_new(&r, 24, 3, 16);
    const int64_t K = c.T * c.H;
    double *want = dalloc(c.H), *u = dalloc(c.H), *f2 = dalloc(c.N * c.H);

    for (int64_t o = 0; o < c.H; o++)
        for (int64_t k = 0; k < K; k++)
            c.w_fc[o * K + k] = k == c.H + o ? 1.0 : 0.0;
    ft_ref_fusion_dflash_fwd(c.N, c.T, c.H, c.eps, c.x, c.w_fc, c.g, c.f);
    double worst = 0;
    for (int64_t n = 0; n < c.N; n++) {
        for (int64_t h = 0; h < c.H; h++)
            u[h] = c.x[(n * c.T + 1) * c.H + h];
        hand_rmsnorm(c.H, c.eps, u, c.g, want);
        worst = fmax(worst, max_abs_diff(c.f + n * c.H, want, c.H));
    }
    FT_CHECK(worst < 1e-13, "[0,I,0]: max |f - rmsnorm(x[:,1]) g| = %.3g", worst);

    for (int64_t o = 0; o < c.H; o++)
        for (int64_t k = 0; k < K; k++)
            c.w_fc[o * K + k] = k % c.H == o ? 1.0 / 3.0 : 0.0;
    ft_ref_fusion_dflash_fwd(c.N, c.T, c.H, c.eps, c.x, c.w_fc, c.g, c.f);
    const double wz[3] = {0.25, 0.25, 0.25};
    ft_ref_fusion_dflare_fwd(c.N, c.T, c.H, 1, c.eps, c.x, wz, c.g, f2);
    FT_CHECK(ft_test_rel_err(c.f, f2, c.N * c.H) < 1e-14, "[I/3,I/3,I/3] vs dflare mean: %.3g",
             ft_test_rel_err(c.f, f2, c.N * c.H));
    FT_FREE(want, u, f2);
    dflash_free(&c);
}

/* ---- fusion.dflash: backward -------------------------------------------------------------- */

/* d->dw holds dw_fc. */
static void dflash_bwd_into(const void *ctx, grads *d) {
    const dflash_case *c = ctx;
    ft_ref_fusion_dflash_bwd(c->N, c->T, c->H, c->eps, c->x, c->w_fc, c->g, c->R, d->dx, d->dw,
                             d->dg);
}

static grads dflash_bwd(const dflash_case *c) {
    grads d = grads_new(c->N * c->T * c->H, c->H * c->T * c->H, c->H);
    dflash_bwd_into(c, &d);
    return d;
}

static void dflash_grad_check(dflash_case *c, int64_t count, ft_rng *r) {
    grads d = dflash_bwd(c);
    check_grads(dflash_objective, c, c->x, c->w_fc, c->g, "dw_fc", &d, count, r);
    grads_free(&d);
}

static void test_dflash_grad_small(void) {
    ft_rng r;
    ft_rng_seed(&r, 41);
    dflash_case c = dflash_new(&r, 3, 2, 4);
    dflash_grad_check(&c, 1 << 30, &r);
    dflash_free(&c);
}

/* The brief's shape (w_fc 64 x 256), sampled entries, plus exact identities: sum dg * g = sum
 * df * f (f linear in g); with eps = 0, f ignores a scale of x and of w_fc, so sum dx * x = 0
 * and sum dw_fc * w_fc = 0. */
static void test_dflash_grad_spec_shape(void) {
    ft_rng r;
    ft_rng_seed(&r, 42);
    dflash_case c = dflash_new(&r, 24, 4, 64);
    const int64_t nx = c.N * c.T * c.H, nw = c.H * c.T * c.H;
    dflash_grad_check(&c, 60, &r);

    grads d = dflash_bwd(&c);
    ft_ref_fusion_dflash_fwd(c.N, c.T, c.H, c.eps, c.x, c.w_fc, c.g, c.f);
    FT_CHECK_NEAR(sum_prod(d.dg, c.g, c.H), sum_prod(c.R, c.f, c.N * c.H), 1e-12);
    grads_free(&d);

    c.eps = 0;
    d = dflash_bwd(&c);
    const double xdx = sum_prod(d.dx, c.x, nx), xs = norm2(d.dx, nx) * norm2(c.x, nx);
    const double wdw = sum_prod(d.dw, c.w_fc, nw), ws = norm2(d.dw, nw) * norm2(c.w_fc, nw);
    FT_CHECK(fabs(xdx) < 1e-12 * xs, "eps = 0: sum dx * x = %.3g (scale %.3g)", xdx, xs);
    FT_CHECK(fabs(wdw) < 1e-12 * ws, "eps = 0: sum dw_fc * w_fc = %.3g (scale %.3g)", wdw, ws);
    grads_free(&d);
    dflash_free(&c);
}

static void test_dflash_overwrites(void) {
    ft_rng r;
    ft_rng_seed(&r, 43);
    dflash_case c = dflash_new(&r, 4, 2, 6);
    grads clean = dflash_bwd(&c);
    check_overwrites(dflash_bwd_into, &c, &clean, "dw_fc");
    grads_free(&clean);
    dflash_free(&c);
}

int main(void) {
    FT_RUN(test_dflare_hand_T1);
    FT_RUN(test_dflare_hand_T2);
    FT_RUN(test_dflare_T1_is_rmsnorm);
    FT_RUN(test_dflare_dominant_logit);
    FT_RUN(test_dflare_equal_logits);
    FT_RUN(test_dflare_invariances);
    FT_RUN(test_dflare_grad_small);
    FT_RUN(test_dflare_init_col);
    FT_RUN(test_dflare_grad_reference_init);
    FT_RUN(test_dflare_grad_spec_shape);
    FT_RUN(test_dflare_overwrites);
    FT_RUN(test_dflash_hand);
    FT_RUN(test_dflash_selecting_weights);
    FT_RUN(test_dflash_grad_small);
    FT_RUN(test_dflash_grad_spec_shape);
    FT_RUN(test_dflash_overwrites);
    return ft_test_finish();
}
