/* test_ref_attention.c: the float64 reference of attention.kvproj, attention.decode and
 * attention.train (SPEC.md).
 *
 * The reference is the oracle for every backend, so it is checked against things that do not
 * come from running it: numbers worked out by hand (RoPE angles and pairing, a two-key
 * softmax), closed forms (one key, identical keys, constant values per kv head), a plain
 * attention written in this file on explicitly concatenated and head-expanded K/V, properties
 * of the mask (keep, anchors, strictness, independence of blocks and requests), decode against
 * train on equivalent inputs, exact gradient identities, and central-difference gradients of
 * sum(o * R) for a random R.
 */
#include "ft_grad.h"
#include "ft_test.h"

#include "attention/attention.h"
#include "attention/attention_ref.h"
#include "core/rng.h"

#include <math.h>
#include <string.h>

/* ---- helpers ------------------------------------------------------------------------------ */

static double *dclone(const double *a, int64_t n) {
    double *b = dalloc(n);
    memcpy(b, a, (size_t)n * sizeof(double));
    return b;
}

static double max_abs(const double *a, int64_t n) {
    double m = 0;
    for (int64_t i = 0; i < n; i++)
        m = fmax(m, fabs(a[i]));
    return m;
}

static int all_zero(const double *a, int64_t n) {
    for (int64_t i = 0; i < n; i++)
        if (a[i] != 0.0) return 0;
    return 1;
}

/* a[0..n) += by: the perturbations of the mask tests. */
static void bump(double *a, int64_t n, double by) {
    for (int64_t i = 0; i < n; i++)
        a[i] += by;
}

/* Every one of the n rows (E doubles each) of a becomes row. */
static void set_rows(double *a, int64_t n, const double *row, int64_t E) {
    for (int64_t t = 0; t < n; t++)
        memcpy(a + t * E, row, sizeof(double) * (size_t)E);
}

/* row is added to every one of the n rows (E doubles each) of a. */
static void add_rows(double *a, int64_t n, const double *row, int64_t E) {
    for (int64_t t = 0; t < n; t++)
        for (int64_t e = 0; e < E; e++)
            a[t * E + e] += row[e];
}

/* n rows of Hkv heads (dh each) as n rows of Hq heads: query head h gets kv head h / (Hq/Hkv)
 * (plain MHA on the same keys). A new array. */
static double *repeat_heads(const double *a, int64_t n, int64_t Hkv, int64_t Hq, int64_t dh) {
    double *m = dalloc(n * Hq * dh);
    for (int64_t t = 0; t < n; t++)
        for (int64_t h = 0; h < Hq; h++)
            memcpy(m + (t * Hq + h) * dh, a + (t * Hkv + h / (Hq / Hkv)) * dh,
                   sizeof(double) * (size_t)dh);
    return m;
}

#define CHECK_REL(a, b, n, tol, what)                                                              \
    do {                                                                                           \
        double e_ = ft_test_rel_err(a, b, n);                                                      \
        FT_CHECK(e_ < (tol), "%s: rel err %.3g", what, e_);                                        \
    } while (0)

/* ---- a plain attention written here ------------------------------------------------------
 * One query against n explicit keys/values (rows of dh): the textbook formula with no max
 * subtraction (the tests keep scores small), so it shares nothing with the library's loop. */
static void plain_attention(int64_t n, int64_t dh, double scale, const double *q, const double *K,
                            const double *V, double *o, double *lse) {
    double z = 0;
    for (int64_t d = 0; d < dh; d++)
        o[d] = 0;
    for (int64_t t = 0; t < n; t++) {
        double e = exp(scale * sum_prod(q, K + t * dh, dh));
        z += e;
        for (int64_t d = 0; d < dh; d++)
            o[d] += e * V[t * dh + d];
    }
    for (int64_t d = 0; d < dh; d++)
        o[d] /= z;
    *lse = log(z);
}

/* Appends one key row and one value row (dh each) to the explicit K, V lists holding n rows;
 * returns n + 1. */
static int64_t push_kv(double *K, double *V, int64_t n, int64_t dh, const double *k,
                       const double *v) {
    memcpy(K + n * dh, k, sizeof(double) * (size_t)dh);
    memcpy(V + n * dh, v, sizeof(double) * (size_t)dh);
    return n + 1;
}

/* plain_attention of q on the n listed keys against the library's o (dh) and lse: the worst
 * differences go into *worst_o and *worst_lse (dh <= 64). */
static void vs_plain(int64_t n, int64_t dh, double scale, const double *q, const double *K,
                     const double *V, const double *o, double lse, double *worst_o,
                     double *worst_lse) {
    double want[64], wlse;
    plain_attention(n, dh, scale, q, K, V, want, &wlse);
    for (int64_t d = 0; d < dh; d++)
        *worst_o = fmax(*worst_o, fabs(o[d] - want[d]));
    *worst_lse = fmax(*worst_lse, fabs(lse - wlse));
}

/* =========================================================================================== */
/* attention.kvproj                                                                            */
/* =========================================================================================== */

/* By hand: H = dh = 2, Hkv = 1, w_k = I, w_v = swap, gk = (1, 2), theta = 1e6.
 * Row 0: c = (3,4) at pos 0: mean(u^2) = 12.5, no rotation.  v = (4,3).
 * Row 1: c = (1,0) at pos 1: mean(u^2) = 0.5; dh = 2 so inv_freq[0] = theta^0 = 1, angle 1 rad:
 *   k = (y0 cos 1 - y1 sin 1, y1 cos 1 + y0 sin 1) with y = (1/sqrt(0.5+eps), 0).  v = (0,1). */
static void test_kvproj_hand_dh2(void) {
    const double c[4] = {3, 4, 1, 0}, w_k[4] = {1, 0, 0, 1}, w_v[4] = {0, 1, 1, 0};
    const double gk[2] = {1, 2}, eps = 1e-6;
    const int32_t pos[2] = {0, 1};
    double k[4], v[4];
    const double inv_freq[1] = {1}; /* theta^0 */
    ft_ref_kvproj_fwd(1, 1, 2, 2, 1, 2, eps, inv_freq, 1.0, c, w_k, w_v, gk, pos, k, v);
    const double r0 = sqrt(12.5 + eps), y0 = 1 / sqrt(0.5 + eps);
    FT_CHECK_NEAR(k[0], 3 / r0, 1e-14);
    FT_CHECK_NEAR(k[1], 4 / r0 * 2, 1e-14);
    FT_CHECK_NEAR(k[2], y0 * cos(1.0), 1e-14);
    FT_CHECK_NEAR(k[3], y0 * sin(1.0), 1e-14);
    FT_CHECK_NEAR(v[0], 4, 1e-15);
    FT_CHECK_NEAR(v[1], 3, 1e-15);
    FT_CHECK_NEAR(v[2], 0, 1e-15);
    FT_CHECK_NEAR(v[3], 1, 1e-15);
}

/* By hand, dh = 4, theta = 1e4: inv_freq = (1, 1e4^(-1/2)) = (1, 0.01); rotate-half pairs
 * dimension m with m + 2 (not 2m with 2m+1). c = (1,1,1,1), w_k = I, gk = 1, eps = 0 gives
 * y = (1,1,1,1); at pos 2, pair (0,2) turns by 2 rad and pair (1,3) by 0.02 rad. */
static void test_kvproj_hand_rope_pairs(void) {
    double c[4] = {1, 1, 1, 1}, w[16] = {0}, gk[4] = {1, 1, 1, 1}, k[4], v[4];
    for (int i = 0; i < 4; i++)
        w[i * 4 + i] = 1;
    const int32_t pos[1] = {2};
    const double inv_freq[2] = {1, 0.01};
    ft_ref_kvproj_fwd(1, 1, 1, 4, 1, 4, 0.0, inv_freq, 1.0, c, w, w, gk, pos, k, v);
    FT_CHECK_NEAR(k[0], cos(2.0) - sin(2.0), 1e-14);
    FT_CHECK_NEAR(k[2], cos(2.0) + sin(2.0), 1e-14);
    FT_CHECK_NEAR(k[1], cos(0.02) - sin(0.02), 1e-14);
    FT_CHECK_NEAR(k[3], cos(0.02) + sin(0.02), 1e-14);
    for (int d = 0; d < 4; d++)
        FT_CHECK_NEAR(v[d], 1.0, 1e-15); /* no norm, no rope on v */
}

/* The reference rotates with the table it is given, whatever made it (a RoPE scaling): by hand,
 * dh = 4, inv_freq = (0.5, 0.003) (no theta gives these) and mscale = 1.25 at pos 3, y = (1,1,1,1)
 * as above: pair (0,2) turns by 1.5 rad, pair (1,3) by 0.009 rad, and both are scaled by 1.25;
 * v is neither rotated nor scaled. */
static void test_kvproj_hand_scaled_table(void) {
    double c[4] = {1, 1, 1, 1}, w[16] = {0}, gk[4] = {1, 1, 1, 1}, k[4], v[4];
    for (int i = 0; i < 4; i++)
        w[i * 4 + i] = 1;
    const int32_t pos[1] = {3};
    const double inv_freq[2] = {0.5, 0.003}, s = 1.25;
    ft_ref_kvproj_fwd(1, 1, 1, 4, 1, 4, 0.0, inv_freq, s, c, w, w, gk, pos, k, v);
    FT_CHECK_NEAR(k[0], s * (cos(1.5) - sin(1.5)), 1e-14);
    FT_CHECK_NEAR(k[2], s * (cos(1.5) + sin(1.5)), 1e-14);
    FT_CHECK_NEAR(k[1], s * (cos(0.009) - sin(0.009)), 1e-14);
    FT_CHECK_NEAR(k[3], s * (cos(0.009) + sin(0.009)), 1e-14);
    for (int d = 0; d < 4; d++)
        FT_CHECK_NEAR(v[d], 1.0, 1e-15);
}

typedef struct kv_case {
    int64_t Dc, D, N, H, Hkv, dh;
    double eps, mscale;
    double *inv_freq; /* plain RoPE at theta 1e6, written here: 1e6^(-2m/dh) */
    double *c, *w_k, *w_v, *gk, *k, *v;
    int32_t *pos;
} kv_case;

static kv_case kv_new(ft_rng *r, int64_t Dc, int64_t D, int64_t N, int64_t H, int64_t Hkv,
                      int64_t dh) {
    const int64_t E = Hkv * dh;
    kv_case c = {Dc, D, N, H, Hkv, dh, 1e-6, 1.0, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL};
    c.inv_freq = dalloc(dh / 2);
    for (int64_t m = 0; m < dh / 2; m++)
        c.inv_freq[m] = exp(-2.0 * (double)m / (double)dh * log(1e6));
    c.c = dalloc(Dc * N * H);
    c.w_k = dalloc(D * E * H);
    c.w_v = dalloc(D * E * H);
    c.gk = dalloc(D * dh);
    c.k = dalloc(D * N * E);
    c.v = dalloc(D * N * E);
    c.pos = ft_test_alloc((size_t)N * sizeof(int32_t));
    fill_normal(r, c.c, Dc * N * H, 1.0);
    fill_normal(r, c.w_k, D * E * H, 1.0 / sqrt((double)H));
    fill_normal(r, c.w_v, D * E * H, 1.0 / sqrt((double)H));
    for (int64_t i = 0; i < D * dh; i++)
        c.gk[i] = 0.5 + ft_rng_uniform(r);
    for (int64_t n = 0; n < N; n++)
        c.pos[n] = (int32_t)ft_rng_below(r, 4096);
    return c;
}

static void kv_run(kv_case *c) {
    ft_ref_kvproj_fwd(c->Dc, c->D, c->N, c->H, c->Hkv, c->dh, c->eps, c->inv_freq, c->mscale, c->c,
                      c->w_k, c->w_v, c->gk, c->pos, c->k, c->v);
}

static void kv_free(kv_case *c) {
    FT_FREE(c->inv_freq, c->c, c->w_k, c->w_v, c->gk, c->k, c->v, c->pos);
}

/* At pos 0 RoPE is the identity: k is the per-head RMSNorm of the projection times gk, and v
 * the plain projection, both computed here by hand (Dc = D, so layer i reads c[i]). */
static void test_kvproj_pos0_by_hand(void) {
    ft_rng r;
    ft_rng_seed(&r, 101);
    kv_case c = kv_new(&r, 3, 3, 8, 24, 2, 16);
    const int64_t E = c.Hkv * c.dh;
    for (int64_t n = 0; n < c.N; n++)
        c.pos[n] = 0;
    kv_run(&c);
    double *u = dalloc(c.dh), *wk = dalloc(c.N * E * c.D), *wv = dalloc(c.N * E * c.D);
    for (int64_t i = 0; i < c.D; i++)
        for (int64_t n = 0; n < c.N; n++)
            for (int64_t j = 0; j < c.Hkv; j++) {
                double ms = 0;
                for (int64_t d = 0; d < c.dh; d++) {
                    double ak = 0, av = 0;
                    for (int64_t h = 0; h < c.H; h++) {
                        double x = c.c[(i * c.N + n) * c.H + h];
                        ak += x * c.w_k[(i * E + j * c.dh + d) * c.H + h];
                        av += x * c.w_v[(i * E + j * c.dh + d) * c.H + h];
                    }
                    u[d] = ak;
                    ms += ak * ak / (double)c.dh;
                    wv[((i * c.N + n) * c.Hkv + j) * c.dh + d] = av;
                }
                for (int64_t d = 0; d < c.dh; d++)
                    wk[((i * c.N + n) * c.Hkv + j) * c.dh + d] =
                        u[d] / sqrt(ms + c.eps) * c.gk[i * c.dh + d];
            }
    CHECK_REL(c.k, wk, c.D * c.N * E, 1e-13, "k at pos 0 vs hand rmsnorm * gk");
    CHECK_REL(c.v, wv, c.D * c.N * E, 1e-13, "v vs hand projection");
    FT_FREE(u, wk, wv);
    kv_free(&c);
}

/* RoPE properties: it preserves the norm of every rotated pair (m, m + dh/2) (compare each row
 * with the same row at pos 0), it changes k when pos != 0, and it is relative: with rows
 * [a@0, b@5, a@7, b@12], the per-head dot k0.k1 equals k2.k3 (both a distance of 5). v does not
 * depend on pos. */
static void test_kvproj_rope_properties(void) {
    ft_rng r;
    ft_rng_seed(&r, 102);
    kv_case c = kv_new(&r, 1, 2, 4, 24, 2, 16);
    const int64_t E = c.Hkv * c.dh, half = c.dh / 2, nk = c.D * c.N * E;
    for (int64_t h = 0; h < c.H; h++) { /* rows 2, 3 repeat rows 0, 1 */
        c.c[2 * c.H + h] = c.c[0 * c.H + h];
        c.c[3 * c.H + h] = c.c[1 * c.H + h];
    }
    const int32_t p[4] = {0, 5, 7, 12};
    for (int n = 0; n < 4; n++)
        c.pos[n] = 0;
    kv_run(&c);
    double *k0 = dclone(c.k, nk), *v0 = dclone(c.v, nk);
    for (int n = 0; n < 4; n++)
        c.pos[n] = p[n];
    kv_run(&c);

    double worst_pair = 0, moved = 0, worst_rel = 0;
    for (int64_t i = 0; i < c.D; i++)
        for (int64_t n = 0; n < c.N; n++)
            for (int64_t j = 0; j < c.Hkv; j++) {
                const int64_t at = ((i * c.N + n) * c.Hkv + j) * c.dh;
                for (int64_t m = 0; m < half; m++) {
                    double a = c.k[at + m] * c.k[at + m] + c.k[at + m + half] * c.k[at + m + half];
                    double b = k0[at + m] * k0[at + m] + k0[at + m + half] * k0[at + m + half];
                    worst_pair = fmax(worst_pair, fabs(a - b) / b);
                }
                if (p[n] != 0)
                    for (int64_t d = 0; d < c.dh; d++)
                        moved = fmax(moved, fabs(c.k[at + d] - k0[at + d]));
            }
    for (int64_t i = 0; i < c.D; i++)
        for (int64_t j = 0; j < c.Hkv; j++) {
            const double *kr[4];
            for (int n = 0; n < 4; n++)
                kr[n] = c.k + ((i * c.N + n) * c.Hkv + j) * c.dh;
            double d01 = sum_prod(kr[0], kr[1], c.dh), d23 = sum_prod(kr[2], kr[3], c.dh);
            worst_rel = fmax(worst_rel, fabs(d01 - d23) / fmax(1, fabs(d01)));
        }
    FT_CHECK(worst_pair < 1e-13, "RoPE changed a pair's norm by %.3g (relative)", worst_pair);
    FT_CHECK(moved > 1e-3, "RoPE at pos != 0 left k unchanged (max change %.3g)", moved);
    FT_CHECK(worst_rel < 1e-12, "RoPE is not relative: k0.k1 - k2.k3 = %.3g", worst_rel);
    FT_CHECK(memcmp(c.v, v0, sizeof(double) * (size_t)nk) == 0, "v depends on pos");
    FT_FREE(k0, v0);
    kv_free(&c);
}

/* Per-head norm: with eps = 0, gk = 1 and pos = 0, every head of k has mean square 1 even when
 * one head's projection is 100 times larger (the norm is over dh per head, not over Hkv*dh).
 * With eps = 0, k ignores a positive scale of c while v scales with it. */
static void test_kvproj_norm_per_head(void) {
    ft_rng r;
    ft_rng_seed(&r, 103);
    kv_case c = kv_new(&r, 1, 2, 5, 24, 3, 8);
    const int64_t E = c.Hkv * c.dh, nk = c.D * c.N * E;
    c.eps = 0;
    for (int64_t i = 0; i < c.D * c.dh; i++)
        c.gk[i] = 1;
    for (int64_t n = 0; n < c.N; n++)
        c.pos[n] = 0;
    for (int64_t i = 0; i < c.D; i++) /* head 1 of every layer: 100x */
        for (int64_t e = c.dh; e < 2 * c.dh; e++)
            for (int64_t h = 0; h < c.H; h++)
                c.w_k[(i * E + e) * c.H + h] *= 100;
    kv_run(&c);
    double worst = 0;
    for (int64_t row = 0; row < c.D * c.N * c.Hkv; row++) {
        double ms = sum_prod(c.k + row * c.dh, c.k + row * c.dh, c.dh) / (double)c.dh;
        worst = fmax(worst, fabs(ms - 1));
    }
    FT_CHECK(worst < 1e-13, "per-head mean(k^2) off 1 by %.3g", worst);

    for (int64_t n = 0; n < c.N; n++)
        c.pos[n] = (int32_t)(17 * n);
    kv_run(&c);
    double *k0 = dclone(c.k, nk), *v0 = dclone(c.v, nk);
    for (int64_t i = 0; i < c.N * c.H; i++)
        c.c[i] *= 3;
    kv_run(&c);
    CHECK_REL(c.k, k0, nk, 1e-14, "eps = 0: k(3c) vs k(c)");
    for (int64_t i = 0; i < nk; i++)
        v0[i] *= 3;
    CHECK_REL(c.v, v0, nk, 1e-14, "v(3c) vs 3 v(c)");
    FT_FREE(k0, v0);
    kv_free(&c);
}

/* Layer indexing. Dc = D: layer i equals a one-layer run on c[i] with layer i's weights.
 * Dc = 1: equals Dc = D with c[0] copied to every layer, and with the same weights in every
 * layer, every layer's k and v are the same (all layers see the same input). */
static void test_kvproj_layers(void) {
    ft_rng r;
    ft_rng_seed(&r, 104);
    kv_case c = kv_new(&r, 3, 3, 6, 16, 2, 8);
    const int64_t E = c.Hkv * c.dh, NE = c.N * E;
    kv_run(&c);
    double *k1 = dalloc(NE), *v1 = dalloc(NE);
    for (int64_t i = 0; i < c.D; i++) {
        ft_ref_kvproj_fwd(1, 1, c.N, c.H, c.Hkv, c.dh, c.eps, c.inv_freq, c.mscale,
                          c.c + i * c.N * c.H, c.w_k + i * E * c.H, c.w_v + i * E * c.H,
                          c.gk + i * c.dh, c.pos, k1, v1);
        FT_CHECK(memcmp(c.k + i * NE, k1, sizeof(double) * (size_t)NE) == 0,
                 "Dc = D: layer %d k differs from its one-layer run", (int)i);
        FT_CHECK(memcmp(c.v + i * NE, v1, sizeof(double) * (size_t)NE) == 0,
                 "Dc = D: layer %d v differs from its one-layer run", (int)i);
    }

    double *kD = dalloc(c.D * NE), *vD = dalloc(c.D * NE);
    for (int64_t i = 1; i < c.D; i++)
        memcpy(c.c + i * c.N * c.H, c.c, sizeof(double) * (size_t)(c.N * c.H));
    ft_ref_kvproj_fwd(c.D, c.D, c.N, c.H, c.Hkv, c.dh, c.eps, c.inv_freq, c.mscale, c.c, c.w_k,
                      c.w_v, c.gk, c.pos, kD, vD);
    ft_ref_kvproj_fwd(1, c.D, c.N, c.H, c.Hkv, c.dh, c.eps, c.inv_freq, c.mscale, c.c, c.w_k, c.w_v,
                      c.gk, c.pos, c.k, c.v);
    FT_CHECK(memcmp(c.k, kD, sizeof(double) * (size_t)(c.D * NE)) == 0,
             "Dc = 1 k differs from Dc = D with c[0] everywhere");
    FT_CHECK(memcmp(c.v, vD, sizeof(double) * (size_t)(c.D * NE)) == 0,
             "Dc = 1 v differs from Dc = D with c[0] everywhere");

    for (int64_t i = 1; i < c.D; i++) {
        memcpy(c.w_k + i * E * c.H, c.w_k, sizeof(double) * (size_t)(E * c.H));
        memcpy(c.w_v + i * E * c.H, c.w_v, sizeof(double) * (size_t)(E * c.H));
        memcpy(c.gk + i * c.dh, c.gk, sizeof(double) * (size_t)c.dh);
    }
    for (int64_t i = 0; i < c.N * c.H; i++)
        c.c[i] = ft_rng_normal(&r); /* fresh c[0] */
    ft_ref_kvproj_fwd(1, c.D, c.N, c.H, c.Hkv, c.dh, c.eps, c.inv_freq, c.mscale, c.c, c.w_k, c.w_v,
                      c.gk, c.pos, c.k, c.v);
    for (int64_t i = 1; i < c.D; i++) {
        FT_CHECK(memcmp(c.k + i * NE, c.k, sizeof(double) * (size_t)NE) == 0,
                 "Dc = 1, same weights: layer %d k differs from layer 0", (int)i);
        FT_CHECK(memcmp(c.v + i * NE, c.v, sizeof(double) * (size_t)NE) == 0,
                 "Dc = 1, same weights: layer %d v differs from layer 0", (int)i);
    }
    FT_CHECK(max_abs(c.k, c.D * NE) > 0.1 && max_abs(c.v, c.D * NE) > 0.1, "k or v is ~0");
    FT_FREE(k1, v1, kD, vD);
    kv_free(&c);
}

/* ---- attention.kvproj backward ----------------------------------------------------------
 * The objective sum(k * Rk) + sum(v * Rv) for random Rk, Rv: its gradients are the backward
 * given dk = Rk, dv = Rv. The forward and the backward rotate with the case's one table (plain
 * RoPE at the case's theta, written here) and mscale. */

typedef struct kvb_case {
    kv_case f;
    double *rk, *rv;
    double *dc, *dw_k, *dw_v, *dgk;
} kvb_case;

static kvb_case kvb_new(ft_rng *r, int64_t Dc, int64_t D, int64_t N, int64_t H, int64_t Hkv,
                        int64_t dh, double theta) {
    kvb_case b = {kv_new(r, Dc, D, N, H, Hkv, dh), NULL, NULL, NULL, NULL, NULL, NULL};
    const int64_t E = Hkv * dh;
    b.rk = dalloc(D * N * E);
    b.rv = dalloc(D * N * E);
    fill_normal(r, b.rk, D * N * E, 1.0);
    fill_normal(r, b.rv, D * N * E, 1.0);
    for (int64_t m = 0; m < dh / 2; m++)
        b.f.inv_freq[m] = exp(-2.0 * (double)m / (double)dh * log(theta));
    b.dc = dalloc(Dc * N * H);
    b.dw_k = dalloc(D * E * H);
    b.dw_v = dalloc(D * E * H);
    b.dgk = dalloc(D * dh);
    return b;
}

static void kvb_free(kvb_case *b) {
    kv_free(&b->f);
    FT_FREE(b->rk, b->rv, b->dc, b->dw_k, b->dw_v, b->dgk);
}

static void kvb_bwd(kvb_case *b) {
    const kv_case *c = &b->f;
    ft_ref_kvproj_bwd(c->Dc, c->D, c->N, c->H, c->Hkv, c->dh, c->eps, c->inv_freq, c->mscale, c->c,
                      c->w_k, c->w_v, c->gk, c->pos, b->rk, b->rv, b->dc, b->dw_k, b->dw_v, b->dgk);
}

static double kvb_objective(void *ctx) {
    kvb_case *b = ctx;
    kv_run(&b->f);
    const int64_t n = b->f.D * b->f.N * b->f.Hkv * b->f.dh;
    return sum_prod(b->f.k, b->rk, n) + sum_prod(b->f.v, b->rv, n);
}

static void kvb_grad_check(kvb_case *b, int64_t count, ft_rng *r) {
    kv_case *c = &b->f;
    const int64_t E = c->Hkv * c->dh;
    kvb_bwd(b);
    CHECK_GRAD("dc", kvb_objective, b, c->c, b->dc, c->Dc * c->N * c->H, count, r);
    CHECK_GRAD("dw_k", kvb_objective, b, c->w_k, b->dw_k, c->D * E * c->H, count, r);
    CHECK_GRAD("dw_v", kvb_objective, b, c->w_v, b->dw_v, c->D * E * c->H, count, r);
    CHECK_GRAD("dgk", kvb_objective, b, c->gk, b->dgk, c->D * c->dh, count, r);
}

/* Every entry of every gradient by central differences, per-layer context (Dc = D) and one
 * shared context (Dc = 1, whose dc sums the D layers' contributions), positions in the
 * thousands so the rotation is far from the identity. */
static void test_kvproj_grad_full(void) {
    ft_rng r;
    ft_rng_seed(&r, 111);
    kvb_case b = kvb_new(&r, 3, 3, 4, 10, 2, 6, 1e4);
    kvb_grad_check(&b, 1 << 30, &r);
    kvb_free(&b);
    kvb_case s = kvb_new(&r, 1, 3, 5, 8, 3, 4, 1e6);
    s.f.eps = 1e-3;
    kvb_grad_check(&s, 1 << 30, &r);
    kvb_free(&s);
    /* A scaled table (yarn's shape: some frequencies divided, a ramp, mscale above 1), made by
     * ft_rope_freqs as every backend makes it. */
    kvb_case y = kvb_new(&r, 2, 2, 4, 8, 2, 8, 1e4);
    ft_attrs a;
    ft_attrs_default(&a);
    a.rope_theta = 1e4;
    a.rope.scaling = FT_ROPE_YARN;
    a.rope.factor = 8;
    a.rope.original_max_pos = 64;
    ft_rope_freqs(&a, y.f.dh, y.f.inv_freq, &y.f.mscale);
    FT_CHECK(y.f.mscale > 1.2 && y.f.inv_freq[y.f.dh / 2 - 1] <
                                     0.5 * pow(1e4, -(double)(y.f.dh - 2) / (double)y.f.dh),
             "yarn: mscale %.4f, the last frequency not divided", y.f.mscale);
    kvb_grad_check(&y, 1 << 30, &r);
    kvb_free(&y);
}

/* Exact properties. (1) The K path is linear in mscale: mscale 2 doubles dw_k and dgk and leaves
 * dw_v as it was.
 * (2) RMSNorm is scale-invariant, so with eps = 0 each head row's du is orthogonal to its u, and
 * summed over rows <dw_k[i, head j], w_k[i, head j]> = sum_n du . u = 0. (3) dv reaches only
 * dc and dw_v: with the same dk and another dv, dw_k and dgk do not change. */
static void test_kvproj_grad_properties(void) {
    ft_rng r;
    ft_rng_seed(&r, 112);
    kvb_case b = kvb_new(&r, 2, 2, 6, 12, 2, 8, 1e6);
    const kv_case *c = &b.f;
    const int64_t E = c->Hkv * c->dh, nW = c->D * E * c->H, nC = c->Dc * c->N * c->H;
    kvb_bwd(&b);
    double *dc1 = dclone(b.dc, nC), *dwk1 = dclone(b.dw_k, nW), *dwv1 = dclone(b.dw_v, nW),
           *dgk1 = dclone(b.dgk, c->D * c->dh);
    b.f.mscale = 2.0;
    kvb_bwd(&b);
    for (int64_t e = 0; e < nW; e++)
        dwk1[e] *= 2.0;
    for (int64_t e = 0; e < c->D * c->dh; e++)
        dgk1[e] *= 2.0;
    CHECK_REL(b.dw_k, dwk1, nW, 1e-14, "mscale 2: dw_k");
    CHECK_REL(b.dgk, dgk1, c->D * c->dh, 1e-14, "mscale 2: dgk");
    FT_CHECK(memcmp(b.dw_v, dwv1, sizeof(double) * (size_t)nW) == 0, "mscale 2 changed dw_v");
    FT_CHECK(ft_test_rel_err(b.dc, dc1, nC) > 1e-3, "mscale 2 left dc unchanged");
    b.f.mscale = 1.0;

    b.f.eps = 0.0;
    kvb_bwd(&b);
    for (int64_t i = 0; i < c->D; i++)
        for (int64_t j = 0; j < c->Hkv; j++) {
            const int64_t off = (i * E + j * c->dh) * c->H, n = c->dh * c->H;
            const double ip = sum_prod(b.dw_k + off, c->w_k + off, n);
            const double scale = norm2(b.dw_k + off, n) * norm2(c->w_k + off, n);
            FT_CHECK(scale > 1e-3 && fabs(ip) < 1e-12 * scale,
                     "eps 0: <dw_k, w_k> of layer %d head %d is %.3g (norms %.3g)", (int)i, (int)j,
                     ip, scale);
        }

    b.f.eps = 1e-6;
    kvb_bwd(&b);
    memcpy(dwk1, b.dw_k, sizeof(double) * (size_t)nW);
    memcpy(dgk1, b.dgk, sizeof(double) * (size_t)(c->D * c->dh));
    memcpy(dwv1, b.dw_v, sizeof(double) * (size_t)nW);
    fill_normal(&r, b.rv, c->D * c->N * E, 1.0);
    kvb_bwd(&b);
    FT_CHECK(memcmp(dwk1, b.dw_k, sizeof(double) * (size_t)nW) == 0, "dv changed dw_k");
    FT_CHECK(memcmp(dgk1, b.dgk, sizeof(double) * (size_t)(c->D * c->dh)) == 0, "dv changed dgk");
    FT_CHECK(ft_test_rel_err(dwv1, b.dw_v, nW) > 0.1, "a new dv left dw_v unchanged");
    FT_FREE(dc1, dwk1, dwv1, dgk1);
    kvb_free(&b);
}

/* =========================================================================================== */
/* attention.decode                                                                            */
/* =========================================================================================== */

typedef struct dec_case {
    int64_t R, B, Hq, Hkv, dh, Ltot;
    double scale;
    int32_t *ctx_lens;
    double *q, *k_ctx, *v_ctx, *k_blk, *v_blk, *o, *lse;
} dec_case;

static dec_case dec_new(ft_rng *r, int64_t R, int64_t B, int64_t Hq, int64_t Hkv, int64_t dh,
                        const int32_t *lens) {
    dec_case c = {R,    B,    Hq,   Hkv,  dh,   0,   1.0 / sqrt((double)dh), NULL, NULL,
                  NULL, NULL, NULL, NULL, NULL, NULL};
    c.ctx_lens = ft_test_alloc((size_t)R * sizeof(int32_t));
    for (int64_t i = 0; i < R; i++)
        c.Ltot += c.ctx_lens[i] = lens[i];
    c.q = dalloc(R * B * Hq * dh);
    c.k_ctx = dalloc(c.Ltot * Hkv * dh);
    c.v_ctx = dalloc(c.Ltot * Hkv * dh);
    c.k_blk = dalloc(R * B * Hkv * dh);
    c.v_blk = dalloc(R * B * Hkv * dh);
    c.o = dalloc(R * B * Hq * dh);
    c.lse = dalloc(R * B * Hq);
    fill_normal(r, c.q, R * B * Hq * dh, 1.0);
    fill_normal(r, c.k_ctx, c.Ltot * Hkv * dh, 1.0);
    fill_normal(r, c.v_ctx, c.Ltot * Hkv * dh, 1.0);
    fill_normal(r, c.k_blk, R * B * Hkv * dh, 1.0);
    fill_normal(r, c.v_blk, R * B * Hkv * dh, 1.0);
    return c;
}

static void dec_run(dec_case *c) {
    ft_ref_attn_decode_fwd(c->R, c->B, c->Hq, c->Hkv, c->dh, c->scale, c->q, c->ctx_lens, c->k_ctx,
                           c->v_ctx, c->k_blk, c->v_blk, c->o, c->lse);
}

static void dec_free(dec_case *c) {
    FT_FREE(c->ctx_lens, c->q, c->k_ctx, c->v_ctx, c->k_blk, c->v_blk, c->o, c->lse);
}

/* By hand: dh = 2, one head, scale 1, q = (1,0); context key (1,0) with value (2,0), block key
 * (0,1) with value (0,4). Scores 1 and 0: p = (e, 1) / (e + 1), lse = log(e + 1). */
static void test_decode_hand(void) {
    const double q[2] = {1, 0}, kc[2] = {1, 0}, vc[2] = {2, 0}, kb[2] = {0, 1}, vb[2] = {0, 4};
    const int32_t lens[1] = {1};
    double o[2], lse;
    const double e = exp(1.0);
    ft_ref_attn_decode_fwd(1, 1, 1, 1, 2, 1.0, q, lens, kc, vc, kb, vb, o, &lse);
    FT_CHECK_NEAR(o[0], 2 * e / (e + 1), 1e-15);
    FT_CHECK_NEAR(o[1], 4 / (e + 1), 1e-15);
    FT_CHECK_NEAR(lse, log(e + 1), 1e-15);
}

/* B = 1 and no context: each query sees one key, so o = its value and lse = scale q.k, with
 * query head h reading kv head h / (Hq/Hkv). */
static void test_decode_single_key(void) {
    ft_rng r;
    ft_rng_seed(&r, 201);
    const int32_t lens[3] = {0, 0, 0};
    dec_case c = dec_new(&r, 3, 1, 4, 2, 16, lens);
    dec_run(&c);
    for (int64_t rr = 0; rr < c.R; rr++)
        for (int64_t h = 0; h < c.Hq; h++) {
            const int64_t j = h / 2, row = rr * c.Hq + h;
            const double *kv = c.k_blk + (rr * c.Hkv + j) * c.dh;
            const double *vv = c.v_blk + (rr * c.Hkv + j) * c.dh;
            FT_CHECK_NEAR(c.lse[row], c.scale * sum_prod(c.q + row * c.dh, kv, c.dh), 1e-14);
            for (int64_t d = 0; d < c.dh; d++)
                FT_CHECK_NEAR(c.o[row * c.dh + d], vv[d], 1e-15);
        }
    dec_free(&c);
}

/* Every key of a request (context and block) is the same vector per kv head: the softmax is
 * uniform, o = the mean of the request's L_r + B values, lse = log(L_r + B) + scale q.k.
 * Ragged context lengths, one of them 0. */
static void test_decode_identical_keys(void) {
    ft_rng r;
    ft_rng_seed(&r, 202);
    const int32_t lens[3] = {0, 5, 11};
    dec_case c = dec_new(&r, 3, 4, 4, 2, 16, lens);
    double key[2 * 16];
    fill_normal(&r, key, 2 * 16, 1.0);
    set_rows(c.k_ctx, c.Ltot, key, 32);
    set_rows(c.k_blk, c.R * c.B, key, 32);
    dec_run(&c);
    double worst_o = 0, worst_l = 0;
    int64_t off = 0;
    for (int64_t rr = 0; rr < c.R; rr++) {
        const int64_t L = c.ctx_lens[rr];
        for (int64_t b = 0; b < c.B; b++)
            for (int64_t h = 0; h < c.Hq; h++) {
                const int64_t j = h / 2, row = (rr * c.B + b) * c.Hq + h;
                const double want_l =
                    log((double)(L + c.B)) + c.scale * sum_prod(c.q + row * c.dh, key + j * 16, 16);
                worst_l = fmax(worst_l, fabs(c.lse[row] - want_l));
                for (int64_t d = 0; d < c.dh; d++) {
                    double mean = 0;
                    for (int64_t t = 0; t < L; t++)
                        mean += c.v_ctx[((off + t) * 2 + j) * 16 + d];
                    for (int64_t t = 0; t < c.B; t++)
                        mean += c.v_blk[((rr * c.B + t) * 2 + j) * 16 + d];
                    mean /= (double)(L + c.B);
                    worst_o = fmax(worst_o, fabs(c.o[row * c.dh + d] - mean));
                }
            }
        off += L;
    }
    FT_CHECK(worst_o < 1e-14, "o vs mean of values: %.3g", worst_o);
    FT_CHECK(worst_l < 1e-13, "lse vs log(n) + scale q.k: %.3g", worst_l);
    dec_free(&c);
}

/* GQA mapping: every value of kv head j is 10 j + d (context and block alike). Whatever the
 * attention weights, o[.., h, d] = 10 (h / group) + d. Two groupings: 4/2 and 8/2. */
static void test_decode_gqa_mapping(void) {
    ft_rng r;
    ft_rng_seed(&r, 203);
    const int32_t lens[3] = {0, 5, 11};
    const int64_t hqs[2] = {4, 8};
    for (int s = 0; s < 2; s++) {
        dec_case c = dec_new(&r, 3, 4, hqs[s], 2, 16, lens);
        double vals[2 * 16];
        for (int64_t j = 0; j < 2; j++)
            for (int64_t d = 0; d < 16; d++)
                vals[j * 16 + d] = 10.0 * j + d;
        set_rows(c.v_ctx, c.Ltot, vals, 32);
        set_rows(c.v_blk, c.R * c.B, vals, 32);
        dec_run(&c);
        const int64_t group = c.Hq / 2;
        double worst = 0;
        for (int64_t row = 0; row < c.R * c.B * c.Hq; row++) {
            const int64_t h = row % c.Hq;
            for (int64_t d = 0; d < 16; d++)
                worst = fmax(worst, fabs(c.o[row * 16 + d] - (10.0 * (double)(h / group) + d)));
        }
        FT_CHECK(worst < 1e-13, "Hq %d: o vs the kv head's constant values: %.3g", (int)c.Hq,
                 worst);
        dec_free(&c);
    }
}

/* Against attention written in this file, on K/V expanded by hand: for every request and query
 * head, the keys are the request's context rows (at its prefix-sum offset) then its block rows,
 * taken from kv head h * Hkv / Hq (the same as h / (Hq/Hkv)), copied into a plain [n, dh] array.
 * Then decode with Hkv = Hq on K/V repeated per query head (plain MHA) gives the same. The
 * brief's shape: R = 3 with ragged ctx_lens {0, 37, 63} (100 context rows), B = 4. */
static void test_decode_vs_expanded_mha(void) {
    ft_rng r;
    ft_rng_seed(&r, 204);
    const int32_t lens[3] = {0, 37, 63};
    dec_case c = dec_new(&r, 3, 4, 4, 2, 16, lens);
    const int64_t dh = c.dh, nq = c.R * c.B * c.Hq;
    dec_run(&c);

    double *K = dalloc((c.Ltot + c.B) * dh), *V = dalloc((c.Ltot + c.B) * dh);
    double *o = dalloc(nq * dh), *lse = dalloc(nq);
    int64_t off = 0;
    for (int64_t rr = 0; rr < c.R; rr++) {
        const int64_t L = c.ctx_lens[rr];
        for (int64_t h = 0; h < c.Hq; h++) {
            const int64_t j = h * c.Hkv / c.Hq;
            for (int64_t t = 0; t < L + c.B; t++)
                for (int64_t d = 0; d < dh; d++) {
                    const int64_t src = t < L ? ((off + t) * c.Hkv + j) * dh + d
                                              : ((rr * c.B + t - L) * c.Hkv + j) * dh + d;
                    K[t * dh + d] = t < L ? c.k_ctx[src] : c.k_blk[src];
                    V[t * dh + d] = t < L ? c.v_ctx[src] : c.v_blk[src];
                }
            for (int64_t b = 0; b < c.B; b++) {
                const int64_t row = (rr * c.B + b) * c.Hq + h;
                plain_attention(L + c.B, dh, c.scale, c.q + row * dh, K, V, o + row * dh,
                                lse + row);
            }
        }
        off += L;
    }
    CHECK_REL(c.o, o, nq * dh, 1e-13, "o vs plain attention on expanded K/V");
    CHECK_REL(c.lse, lse, nq, 1e-13, "lse vs plain attention on expanded K/V");

    /* The same as MHA: repeat every kv head Hq/Hkv times. */
    double *kc = repeat_heads(c.k_ctx, c.Ltot, c.Hkv, c.Hq, dh);
    double *vc = repeat_heads(c.v_ctx, c.Ltot, c.Hkv, c.Hq, dh);
    double *kb = repeat_heads(c.k_blk, c.R * c.B, c.Hkv, c.Hq, dh);
    double *vb = repeat_heads(c.v_blk, c.R * c.B, c.Hkv, c.Hq, dh);
    ft_ref_attn_decode_fwd(c.R, c.B, c.Hq, c.Hq, dh, c.scale, c.q, c.ctx_lens, kc, vc, kb, vb, o,
                           lse);
    CHECK_REL(c.o, o, nq * dh, 1e-14, "GQA o vs MHA on repeated heads");
    CHECK_REL(c.lse, lse, nq, 1e-14, "GQA lse vs MHA on repeated heads");
    FT_FREE(K, V, o, lse, kc, vc, kb, vb);
    dec_free(&c);
}

/* Requests are independent and find their context at the prefix-sum offset: a batch with ragged
 * ctx_lens {0, 5, 11} equals each request run alone on its own slice of the cache. */
static void test_decode_requests_alone(void) {
    ft_rng r;
    ft_rng_seed(&r, 205);
    const int32_t lens[3] = {0, 5, 11};
    dec_case c = dec_new(&r, 3, 4, 4, 2, 16, lens);
    dec_run(&c);
    const int64_t E = c.Hkv * c.dh, per_o = c.B * c.Hq * c.dh, per_l = c.B * c.Hq;
    double *o = dalloc(per_o), *lse = dalloc(per_l);
    int64_t off = 0;
    for (int64_t rr = 0; rr < c.R; rr++) {
        ft_ref_attn_decode_fwd(1, c.B, c.Hq, c.Hkv, c.dh, c.scale, c.q + rr * per_o,
                               c.ctx_lens + rr, c.k_ctx + off * E, c.v_ctx + off * E,
                               c.k_blk + rr * c.B * E, c.v_blk + rr * c.B * E, o, lse);
        CHECK_REL(o, c.o + rr * per_o, per_o, 1e-15, "request alone vs in the batch (o)");
        CHECK_REL(lse, c.lse + rr * per_l, per_l, 1e-15, "request alone vs in the batch (lse)");
        off += c.ctx_lens[rr];
    }
    FT_FREE(o, lse);
    dec_free(&c);
}

/* Softmax properties: adding a vector u to every key of a request leaves o alone and moves lse
 * by scale q.u; permuting the context rows of a request changes nothing. */
static void test_decode_shift_and_permutation(void) {
    ft_rng r;
    ft_rng_seed(&r, 206);
    const int32_t lens[1] = {9};
    dec_case c = dec_new(&r, 1, 3, 4, 2, 8, lens);
    const int64_t nq = c.B * c.Hq, E = c.Hkv * c.dh;
    dec_run(&c);
    double *o0 = dclone(c.o, nq * c.dh), *l0 = dclone(c.lse, nq), *want = dalloc(nq);
    double u[2 * 8];
    fill_normal(&r, u, E, 1.0);
    add_rows(c.k_ctx, c.Ltot, u, E);
    add_rows(c.k_blk, c.B, u, E);
    dec_run(&c);
    for (int64_t row = 0; row < nq; row++)
        want[row] =
            l0[row] + c.scale * sum_prod(c.q + row * c.dh, u + (row % c.Hq) / 2 * c.dh, c.dh);
    CHECK_REL(c.o, o0, nq * c.dh, 1e-13, "shifted keys: o");
    CHECK_REL(c.lse, want, nq, 1e-13, "shifted keys: lse - scale q.u");

    memcpy(o0, c.o, sizeof(double) * (size_t)(nq * c.dh));
    memcpy(l0, c.lse, sizeof(double) * (size_t)nq);
    double *kc = dclone(c.k_ctx, c.Ltot * E), *vc = dclone(c.v_ctx, c.Ltot * E);
    for (int64_t t = 0; t < c.Ltot; t++) { /* row t goes to (5 t + 2) mod 9, a permutation */
        const int64_t dst = (5 * t + 2) % c.Ltot;
        memcpy(c.k_ctx + dst * E, kc + t * E, sizeof(double) * (size_t)E);
        memcpy(c.v_ctx + dst * E, vc + t * E, sizeof(double) * (size_t)E);
    }
    dec_run(&c);
    CHECK_REL(c.o, o0, nq * c.dh, 1e-14, "permuted context: o");
    CHECK_REL(c.lse, l0, nq, 1e-14, "permuted context: lse");
    FT_FREE(o0, l0, want, kc, vc);
    dec_free(&c);
}

/* Scores near 1000 overflow exp() unless the max is subtracted. dh = 2, one head, scale 1,
 * q = (1000, 0); keys (1,0), (0.99,0), (0.98,0) (two context rows, one block row): scores 1000,
 * 990, 980, so lse = 1000 + log(1 + e^-10 + e^-20) and o = (v0 + e^-10 v1 + e^-20 v2) / (same). */
static void test_decode_large_scores(void) {
    const double q[2] = {1000, 0}, kc[4] = {1, 0, 0.99, 0}, vc[4] = {1, 2, 3, 4};
    const double kb[2] = {0.98, 0}, vb[2] = {5, 6};
    const int32_t lens[1] = {2};
    double o[2], lse;
    ft_ref_attn_decode_fwd(1, 1, 1, 1, 2, 1.0, q, lens, kc, vc, kb, vb, o, &lse);
    const double e1 = exp(-10.0), e2 = exp(-20.0), z = 1 + e1 + e2;
    FT_CHECK(isfinite(lse) && isfinite(o[0]) && isfinite(o[1]), "overflow: lse %g o %g %g", lse,
             o[0], o[1]);
    FT_CHECK_NEAR(lse, 1000 + log1p(e1 + e2), 1e-15);
    FT_CHECK_NEAR(o[0], (1 + 3 * e1 + 5 * e2) / z, 1e-14);
    FT_CHECK_NEAR(o[1], (2 + 4 * e1 + 6 * e2) / z, 1e-14);
}

/* =========================================================================================== */
/* attention.train                                                                             */
/* =========================================================================================== */

typedef struct train_case {
    int64_t nseq, S, NB, B, Hq, Hkv, dh;
    double scale;
    double *q, *k_ctx, *v_ctx, *k_blk, *v_blk;
    int32_t *anchors;
    uint8_t *keep;
    double *R; /* the objective's random weights on o, and the upstream gradient dout */
    double *o, *lse;
    int64_t window; /* sliding window (0: full attention) */
    int causal;     /* query b sees block keys 0..b only */
} train_case;

typedef struct train_sizes {
    int64_t q, ctx, blk, lse, nblk;
} train_sizes;

static train_sizes tsz(const train_case *c) {
    train_sizes s = {c->nseq * c->NB * c->B * c->Hq * c->dh, c->nseq * c->S * c->Hkv * c->dh,
                     c->nseq * c->NB * c->B * c->Hkv * c->dh, c->nseq * c->NB * c->B * c->Hq,
                     c->nseq * c->NB};
    return s;
}

static train_case train_new(ft_rng *r, int64_t nseq, int64_t S, int64_t NB, int64_t B, int64_t Hq,
                            int64_t Hkv, int64_t dh) {
    train_case c = {nseq, S,    NB,   B,    Hq,   Hkv,  dh,   1.0 / sqrt((double)dh),
                    NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
                    NULL, NULL, 0,    0};
    train_sizes z = tsz(&c);
    c.q = dalloc(z.q);
    c.k_ctx = dalloc(z.ctx);
    c.v_ctx = dalloc(z.ctx);
    c.k_blk = dalloc(z.blk);
    c.v_blk = dalloc(z.blk);
    c.anchors = ft_test_alloc((size_t)z.nblk * sizeof(int32_t));
    c.keep = ft_test_alloc((size_t)z.nblk);
    c.R = dalloc(z.q);
    c.o = dalloc(z.q);
    c.lse = dalloc(z.lse);
    fill_normal(r, c.q, z.q, 1.0);
    fill_normal(r, c.k_ctx, z.ctx, 1.0);
    fill_normal(r, c.v_ctx, z.ctx, 1.0);
    fill_normal(r, c.k_blk, z.blk, 1.0);
    fill_normal(r, c.v_blk, z.blk, 1.0);
    fill_normal(r, c.R, z.q, 1.0);
    for (int64_t i = 0; i < z.nblk; i++) {
        c.anchors[i] = (int32_t)ft_rng_below(r, (uint64_t)S + 1);
        c.keep[i] = 1;
    }
    return c;
}

static void train_free(train_case *c) {
    FT_FREE(c->q, c->k_ctx, c->v_ctx, c->k_blk, c->v_blk, c->anchors, c->keep, c->R, c->o, c->lse);
}

static void train_fwd(train_case *c) {
    if (c->window == 0 && !c->causal) /* the full-attention entry point, as callers have it */
        ft_ref_attn_train_fwd(c->nseq, c->S, c->NB, c->B, c->Hq, c->Hkv, c->dh, c->scale, c->q,
                              c->k_ctx, c->v_ctx, c->k_blk, c->v_blk, c->anchors, c->keep, c->o,
                              c->lse);
    else
        ft_ref_attn_train_fwd_win(c->nseq, c->S, c->NB, c->B, c->Hq, c->Hkv, c->dh, c->scale,
                                  c->window, c->causal, c->q, c->k_ctx, c->v_ctx, c->k_blk,
                                  c->v_blk, c->anchors, c->keep, c->o, c->lse);
}

static double train_objective(void *ctx) {
    train_case *c = ctx;
    train_fwd(c);
    return sum_prod(c->o, c->R, tsz(c).q);
}

typedef struct train_grads {
    double *dq, *dk_ctx, *dv_ctx, *dk_blk, *dv_blk;
} train_grads;

static train_grads train_bwd(const train_case *c) {
    train_sizes z = tsz(c);
    train_grads g = {dalloc(z.q), dalloc(z.ctx), dalloc(z.ctx), dalloc(z.blk), dalloc(z.blk)};
    if (c->window == 0 && !c->causal)
        ft_ref_attn_train_bwd(c->nseq, c->S, c->NB, c->B, c->Hq, c->Hkv, c->dh, c->scale, c->q,
                              c->k_ctx, c->v_ctx, c->k_blk, c->v_blk, c->anchors, c->keep, c->R,
                              g.dq, g.dk_ctx, g.dv_ctx, g.dk_blk, g.dv_blk);
    else
        ft_ref_attn_train_bwd_win(c->nseq, c->S, c->NB, c->B, c->Hq, c->Hkv, c->dh, c->scale,
                                  c->window, c->causal, c->q, c->k_ctx, c->v_ctx, c->k_blk,
                                  c->v_blk, c->anchors, c->keep, c->R, g.dq, g.dk_ctx, g.dv_ctx,
                                  g.dk_blk, g.dv_blk);
    return g;
}

static void train_grads_free(train_grads *g) {
    FT_FREE(g->dq, g->dk_ctx, g->dv_ctx, g->dk_blk, g->dv_blk);
}

/* ---- forward ------------------------------------------------------------------------------ */

/* Train's forward of case c (already filled) against decode's over the same blocks: each block
 * a request whose context is the first anchors[s,j] rows of its sequence, with c's window and
 * causal block. */
static void check_train_vs_decode(train_case *c, const char *what) {
    train_fwd(c);
    train_sizes z = tsz(c);
    const int64_t E = c->Hkv * c->dh;
    int64_t Ltot = 0;
    for (int64_t i = 0; i < z.nblk; i++)
        Ltot += c->anchors[i];
    double *kc = dalloc(Ltot * E), *vc = dalloc(Ltot * E), *o = dalloc(z.q), *lse = dalloc(z.lse);
    int64_t off = 0;
    for (int64_t s = 0; s < c->nseq; s++)
        for (int64_t j = 0; j < c->NB; j++) {
            const int64_t a = c->anchors[s * c->NB + j];
            memcpy(kc + off * E, c->k_ctx + s * c->S * E, sizeof(double) * (size_t)(a * E));
            memcpy(vc + off * E, c->v_ctx + s * c->S * E, sizeof(double) * (size_t)(a * E));
            off += a;
        }
    if (c->window == 0 && !c->causal) /* the plain entry point, as the op's reference calls it */
        ft_ref_attn_decode_fwd(z.nblk, c->B, c->Hq, c->Hkv, c->dh, c->scale, c->q, c->anchors, kc,
                               vc, c->k_blk, c->v_blk, o, lse);
    else
        ft_ref_attn_decode_fwd_win(z.nblk, c->B, c->Hq, c->Hkv, c->dh, c->scale, c->window,
                                   c->causal, c->q, c->anchors, kc, vc, c->k_blk, c->v_blk, o, lse);
    const double eo = ft_test_rel_err(c->o, o, z.q), el = ft_test_rel_err(c->lse, lse, z.lse);
    FT_CHECK(eo < 1e-14, "%s: train o vs decode on context prefixes: rel err %.3g", what, eo);
    FT_CHECK(el < 1e-14, "%s: train lse vs decode on context prefixes: rel err %.3g", what, el);
    FT_FREE(kc, vc, o, lse);
}

/* Train forward equals decode on the equivalent input: block j of sequence s is a decode
 * request whose context is the first anchors[s,j] rows of sequence s. All blocks of all
 * sequences become one decode batch (ragged ctx_lens = the anchors), with anchors 0 and S
 * forced in. The brief's shape: nseq 2, S 40, NB 5, B 4, Hq 4, Hkv 2, dh 16. */
static void test_train_equals_decode_prefixes(void) {
    ft_rng r;
    ft_rng_seed(&r, 301);
    train_case c = train_new(&r, 2, 40, 5, 4, 4, 2, 16);
    c.anchors[0] = 0;
    c.anchors[3] = 40;
    c.anchors[6] = 1;
    c.anchors[9] = 40;
    check_train_vs_decode(&c, "full");
    train_free(&c);
}

/* The brief's equivalence, literally: one sequence, one block, anchor S, keep 1 is a decode
 * request with the whole context. */
static void test_train_equals_decode_one_block(void) {
    ft_rng r;
    ft_rng_seed(&r, 302);
    train_case c = train_new(&r, 1, 40, 1, 4, 4, 2, 16);
    c.anchors[0] = 40;
    train_fwd(&c);
    train_sizes z = tsz(&c);
    double *o = dalloc(z.q), *lse = dalloc(z.lse);
    const int32_t lens[1] = {40};
    ft_ref_attn_decode_fwd(1, c.B, c.Hq, c.Hkv, c.dh, c.scale, c.q, lens, c.k_ctx, c.v_ctx, c.k_blk,
                           c.v_blk, o, lse);
    CHECK_REL(c.o, o, z.q, 1e-15, "train (anchor S, one block) vs decode: o");
    CHECK_REL(c.lse, lse, z.lse, 1e-15, "train (anchor S, one block) vs decode: lse");
    FT_FREE(o, lse);
    train_free(&c);
}

/* The mask, probed by perturbation (block j = 1 of sequence 0 has anchor 7):
 * - context position 7 (= the anchor) is invisible, position 6 is visible (strict p < anchor);
 * - another block's K/V and the other sequence's context are invisible;
 * - an anchor 0 block ignores the whole context. */
static void test_train_mask_by_perturbation(void) {
    ft_rng r;
    ft_rng_seed(&r, 303);
    train_case c = train_new(&r, 2, 12, 3, 3, 4, 2, 8);
    train_sizes z = tsz(&c);
    const int64_t E = c.Hkv * c.dh, per_blk = c.B * c.Hq * c.dh;
    c.anchors[0] = 12;
    c.anchors[1] = 7;
    c.anchors[2] = 0;
    train_fwd(&c);
    double *o0 = dclone(c.o, z.q);
    const double *blk1 = c.o + 1 * per_blk, *ref1 = o0 + 1 * per_blk;

    bump(c.k_ctx + 7 * E, E, 5);
    bump(c.v_ctx + 7 * E, E, -3);
    train_fwd(&c);
    FT_CHECK(memcmp(blk1, ref1, sizeof(double) * (size_t)per_blk) == 0,
             "context position = anchor changed the block");
    FT_CHECK(ft_test_rel_err(c.o, o0, per_blk) > 1e-3, "anchor 12 block missed position 7");

    memcpy(c.o, o0, sizeof(double) * (size_t)z.q);
    bump(c.v_ctx + 6 * E, E, 1);
    train_fwd(&c);
    FT_CHECK(ft_test_rel_err(blk1, ref1, per_blk) > 1e-3,
             "context position anchor - 1 did not change the block");
    train_fwd(&c); /* re-baseline with the perturbed context */
    memcpy(o0, c.o, sizeof(double) * (size_t)z.q);

    bump(c.k_blk + 0 * c.B * E, c.B * E, 1); /* block 0's own K/V */
    bump(c.v_blk + 2 * c.B * E, c.B * E, 1); /* block 2's own V */
    bump(c.v_ctx + c.S * E, c.S * E, 1);     /* sequence 1 context */
    train_fwd(&c);
    FT_CHECK(memcmp(blk1, ref1, sizeof(double) * (size_t)per_blk) == 0,
             "another block or sequence changed block 1");

    memcpy(o0, c.o, sizeof(double) * (size_t)z.q);
    bump(c.k_ctx, c.S * E, 2);
    bump(c.v_ctx, c.S * E, -1);
    train_fwd(&c);
    FT_CHECK(memcmp(c.o + 2 * per_blk, o0 + 2 * per_blk, sizeof(double) * (size_t)per_blk) == 0,
             "anchor 0 block depends on the context");
    free(o0);
    train_free(&c);
}

/* GQA in train: values of kv head j are 10 j + d everywhere, so o[.., h, d] = 10 (h/group) + d. */
static void test_train_gqa_mapping(void) {
    ft_rng r;
    ft_rng_seed(&r, 304);
    train_case c = train_new(&r, 2, 10, 3, 4, 8, 2, 8);
    train_sizes z = tsz(&c);
    const int64_t E = c.Hkv * c.dh;
    double vals[2 * 8];
    for (int64_t i = 0; i < E; i++)
        vals[i] = 10.0 * (double)(i / c.dh) + i % c.dh;
    set_rows(c.v_ctx, z.ctx / E, vals, E);
    set_rows(c.v_blk, z.blk / E, vals, E);
    train_fwd(&c);
    double worst = 0;
    for (int64_t row = 0; row < z.lse; row++)
        for (int64_t d = 0; d < c.dh; d++)
            worst = fmax(worst,
                         fabs(c.o[row * c.dh + d] - (10.0 * (double)(row % c.Hq / 4) + (double)d)));
    FT_CHECK(worst < 1e-13, "o vs the kv head's constant values: %.3g", worst);
    train_free(&c);
}

/* ---- keep = 0 ----------------------------------------------------------------------------- */

/* Blocks 0 and 2 of a 3-block tensor (per doubles each) equal blocks 0 and 1 of a 2-block one. */
static int same_kept_blocks(const double *three, const double *two, int64_t per) {
    return memcmp(two, three, sizeof(double) * (size_t)per) == 0 &&
           memcmp(two + per, three + 2 * per, sizeof(double) * (size_t)per) == 0;
}

/* Block 1 of 3 dropped (anchor S, so it would see everything): its o is exactly 0 and its lse
 * -inf; its dq, dk_blk, dv_blk are exactly 0; and everything else (o, lse and every gradient
 * of blocks 0 and 2, and dk_ctx, dv_ctx) equals a run with block 1 removed altogether. */
static void test_train_keep0(void) {
    ft_rng r;
    ft_rng_seed(&r, 305);
    train_case c = train_new(&r, 1, 10, 3, 3, 4, 2, 8);
    train_sizes z = tsz(&c);
    c.anchors[0] = 4;
    c.anchors[1] = 10;
    c.anchors[2] = 10;
    c.keep[1] = 0;
    for (int64_t i = 0; i < z.q; i++)
        c.o[i] = NAN; /* outputs must be overwritten */
    train_fwd(&c);
    train_grads g = train_bwd(&c);
    const int64_t pq = c.B * c.Hq * c.dh, pl = c.B * c.Hq, pb = c.B * c.Hkv * c.dh;

    FT_CHECK(all_zero(c.o + pq, pq), "dropped block: o is not 0");
    int neg_inf = 1;
    for (int64_t i = 0; i < pl; i++)
        neg_inf &= isinf(c.lse[pl + i]) && c.lse[pl + i] < 0;
    FT_CHECK(neg_inf, "dropped block: lse is not -inf");
    FT_CHECK(all_zero(g.dq + pq, pq), "dropped block: dq is not 0");
    FT_CHECK(all_zero(g.dk_blk + pb, pb), "dropped block: dk_blk is not 0");
    FT_CHECK(all_zero(g.dv_blk + pb, pb), "dropped block: dv_blk is not 0");

    /* The same problem without block 1. */
    train_case d = c;
    d.NB = 2;
    int32_t anc[2] = {c.anchors[0], c.anchors[2]};
    uint8_t keep[2] = {1, 1};
    d.anchors = anc;
    d.keep = keep;
    train_sizes y = tsz(&d);
    double *q = dalloc(y.q), *kb = dalloc(y.blk), *vb = dalloc(y.blk), *R = dalloc(y.q);
    double *o = dalloc(y.q), *lse = dalloc(y.lse);
    memcpy(q, c.q, sizeof(double) * (size_t)pq);
    memcpy(q + pq, c.q + 2 * pq, sizeof(double) * (size_t)pq);
    memcpy(R, c.R, sizeof(double) * (size_t)pq);
    memcpy(R + pq, c.R + 2 * pq, sizeof(double) * (size_t)pq);
    memcpy(kb, c.k_blk, sizeof(double) * (size_t)pb);
    memcpy(kb + pb, c.k_blk + 2 * pb, sizeof(double) * (size_t)pb);
    memcpy(vb, c.v_blk, sizeof(double) * (size_t)pb);
    memcpy(vb + pb, c.v_blk + 2 * pb, sizeof(double) * (size_t)pb);
    d.q = q;
    d.k_blk = kb;
    d.v_blk = vb;
    d.R = R;
    d.o = o;
    d.lse = lse;
    train_fwd(&d);
    train_grads h = train_bwd(&d);
    FT_CHECK(same_kept_blocks(c.o, o, pq), "kept blocks' o depends on the dropped block");
    FT_CHECK(same_kept_blocks(c.lse, lse, pl), "kept blocks' lse depends on the dropped block");
    FT_CHECK(same_kept_blocks(g.dq, h.dq, pq), "kept blocks' dq depends on the dropped block");
    FT_CHECK(same_kept_blocks(g.dk_blk, h.dk_blk, pb), "kept dk_blk depends on the dropped block");
    FT_CHECK(same_kept_blocks(g.dv_blk, h.dv_blk, pb), "kept dv_blk depends on the dropped block");
    FT_CHECK(memcmp(h.dk_ctx, g.dk_ctx, sizeof(double) * (size_t)z.ctx) == 0,
             "dropped block contributed to dk_ctx");
    FT_CHECK(memcmp(h.dv_ctx, g.dv_ctx, sizeof(double) * (size_t)z.ctx) == 0,
             "dropped block contributed to dv_ctx");
    FT_CHECK(!all_zero(g.dk_ctx, z.ctx) && !all_zero(g.dv_ctx, z.ctx), "dk_ctx/dv_ctx all 0");
    train_grads_free(&h);
    FT_FREE(q, kb, vb, R, o, lse);

    /* Everything dropped: all outputs are the empty softmax and every gradient is 0, whatever
     * the gradient buffers held before. */
    for (int64_t i = 0; i < z.nblk; i++)
        c.keep[i] = 0;
    train_fwd(&c);
    train_grads_free(&g);
    g = (train_grads){dalloc(z.q), dalloc(z.ctx), dalloc(z.ctx), dalloc(z.blk), dalloc(z.blk)};
    for (int64_t i = 0; i < z.ctx; i++)
        g.dk_ctx[i] = g.dv_ctx[i] = 1;
    for (int64_t i = 0; i < z.blk; i++)
        g.dk_blk[i] = g.dv_blk[i] = 1;
    for (int64_t i = 0; i < z.q; i++)
        g.dq[i] = 1;
    ft_ref_attn_train_bwd(c.nseq, c.S, c.NB, c.B, c.Hq, c.Hkv, c.dh, c.scale, c.q, c.k_ctx, c.v_ctx,
                          c.k_blk, c.v_blk, c.anchors, c.keep, c.R, g.dq, g.dk_ctx, g.dv_ctx,
                          g.dk_blk, g.dv_blk);
    FT_CHECK(all_zero(c.o, z.q), "all dropped: o is not 0");
    FT_CHECK(all_zero(g.dq, z.q) && all_zero(g.dk_ctx, z.ctx) && all_zero(g.dv_ctx, z.ctx) &&
                 all_zero(g.dk_blk, z.blk) && all_zero(g.dv_blk, z.blk),
             "all dropped: a gradient is not 0");
    train_grads_free(&g);
    train_free(&c);
}

/* ---- backward ----------------------------------------------------------------------------- */

/* The small case every-entry gradient checks share: two sequences of S rows, 3 blocks of 3
 * queries, GQA 4 -> 2, dh 4, the six anchors given (0, S and in between), block 4 dropped. */
static train_case train_small(ft_rng *r, int64_t S, const int32_t anc[6]) {
    train_case c = train_new(r, 2, S, 3, 3, 4, 2, 4);
    for (int i = 0; i < 6; i++)
        c.anchors[i] = anc[i];
    c.keep[4] = 0;
    return c;
}

/* The brief's shape (nseq 2, S 40, NB 5, B 4, Hq 4, Hkv 2, dh 16) with anchors 0 and S in and
 * block 3 dropped, under window W (0: full attention). */
static train_case train_brief(ft_rng *r, int64_t W) {
    train_case c = train_new(r, 2, 40, 5, 4, 4, 2, 16);
    c.anchors[1] = 0;
    c.anchors[2] = 40;
    c.keep[3] = 0;
    c.window = W;
    return c;
}

static void train_grad_check(train_case *c, int64_t count, ft_rng *r) {
    train_sizes z = tsz(c);
    train_grads g = train_bwd(c);
    CHECK_GRAD("dq", train_objective, c, c->q, g.dq, z.q, count, r);
    CHECK_GRAD("dk_ctx", train_objective, c, c->k_ctx, g.dk_ctx, z.ctx, count, r);
    CHECK_GRAD("dv_ctx", train_objective, c, c->v_ctx, g.dv_ctx, z.ctx, count, r);
    CHECK_GRAD("dk_blk", train_objective, c, c->k_blk, g.dk_blk, z.blk, count, r);
    CHECK_GRAD("dv_blk", train_objective, c, c->v_blk, g.dv_blk, z.blk, count, r);
    train_grads_free(&g);
}

/* Every entry of every gradient by central differences: two sequences, anchors 0, S and in
 * between, one dropped block. */
static void test_train_grad_full(void) {
    ft_rng r;
    ft_rng_seed(&r, 311);
    const int32_t anc[6] = {0, 6, 3, 2, 5, 6};
    train_case c = train_small(&r, 6, anc);
    train_grad_check(&c, 1 << 30, &r);
    train_free(&c);
}

/* The brief's shape (nseq 2, S 40, NB 5, B 4, Hq 4, Hkv 2, dh 16) on 60 sampled entries of each
 * gradient, with a dropped block and anchors 0 and S; then identities that hold exactly:
 * - p sums to 1 over each row's keys, so summing dv over every key of a kv head gives the sum
 *   of dout over the kept query rows of that head's group;
 * - the ds of a row sum to 0 (softmax ignores a shift of the scores), so dk summed over every
 *   key of a kv head is 0;
 * - scores are bilinear in q and k, so sum dq . q = sum dk . k (both equal sum ds * score);
 * - context positions at or after the largest anchor of their sequence get no gradient. */
static void test_train_grad_spec_shape(void) {
    ft_rng r;
    ft_rng_seed(&r, 312);
    train_case c = train_brief(&r, 0);
    for (int64_t j = 0; j < c.NB; j++)
        c.anchors[c.NB + j] = (int32_t)(3 + 5 * j); /* max 23 */
    train_grad_check(&c, 60, &r);

    train_sizes z = tsz(&c);
    train_grads g = train_bwd(&c);
    const int64_t dh = c.dh, G = c.Hq / c.Hkv;
    double sdv[2 * 16] = {0}, sdo[2 * 16] = {0}, sdk[2 * 16] = {0};
    for (int64_t i = 0; i < z.ctx; i++) {
        sdv[i % (2 * dh)] += g.dv_ctx[i];
        sdk[i % (2 * dh)] += g.dk_ctx[i];
    }
    for (int64_t i = 0; i < z.blk; i++) {
        sdv[i % (2 * dh)] += g.dv_blk[i];
        sdk[i % (2 * dh)] += g.dk_blk[i];
    }
    for (int64_t row = 0; row < z.lse; row++) {
        if (!c.keep[row / (c.B * c.Hq)]) continue;
        for (int64_t d = 0; d < dh; d++)
            sdo[(row % c.Hq / G) * dh + d] += c.R[row * dh + d];
    }
    CHECK_REL(sdv, sdo, 2 * dh, 1e-13, "sum of dv per kv head vs sum of dout");
    FT_CHECK(max_abs(sdk, 2 * dh) < 1e-12 * max_abs(g.dk_ctx, z.ctx),
             "sum of dk per kv head is %.3g, not 0", max_abs(sdk, 2 * dh));

    const double qdq = sum_prod(g.dq, c.q, z.q);
    const double kdk = sum_prod(g.dk_ctx, c.k_ctx, z.ctx) + sum_prod(g.dk_blk, c.k_blk, z.blk);
    FT_CHECK(fabs(qdq - kdk) < 1e-12 * fabs(qdq) && fabs(qdq) > 1e-3,
             "sum dq.q = %.17g, sum dk.k = %.17g", qdq, kdk);

    const int64_t E = c.Hkv * dh;
    FT_CHECK(all_zero(g.dk_ctx + (c.S + 23) * E, (c.S - 23) * E) &&
                 all_zero(g.dv_ctx + (c.S + 23) * E, (c.S - 23) * E),
             "context rows past every anchor got a gradient");
    FT_CHECK(!all_zero(g.dv_ctx + (c.S + 22) * E, E), "row 22 (anchor 23 sees it) got nothing");
    train_grads_free(&g);
    train_free(&c);
}

/* ---- sliding window ------------------------------------------------------------------------
 * SPEC.md "Sliding window": the query at position i (decode: ctx_len + b; train: anchor + b)
 * sees the context positions p with i - W < p (and p < ctx_len or p < anchor), plus its block's
 * own B keys. */

/* Decode with a window against plain_attention on the keys each row should see, listed here by
 * the rule itself: two requests (contexts 9 and 2, so one window is cut by position 0), B = 4,
 * W = 6, GQA 4 -> 2. Then W = 1 leaves no context key (every row equals a request with no
 * context), and W = L + B, the widest window that matters, equals full attention. */
static void test_window_decode_by_plain(void) {
    ft_rng r;
    ft_rng_seed(&r, 321);
    const int32_t lens[2] = {9, 2};
    dec_case c = dec_new(&r, 2, 4, 4, 2, 8, lens);
    const int64_t W = 6, E = c.Hkv * c.dh, G = c.Hq / c.Hkv;
    double *o = dalloc(c.R * c.B * c.Hq * c.dh), *lse = dalloc(c.R * c.B * c.Hq);
    ft_ref_attn_decode_fwd_win(c.R, c.B, c.Hq, c.Hkv, c.dh, c.scale, W, 0, c.q, c.ctx_lens, c.k_ctx,
                               c.v_ctx, c.k_blk, c.v_blk, o, lse);
    double K[(9 + 4) * 8], V[(9 + 4) * 8], worst = 0, worst_lse = 0;
    int64_t off = 0, seen_cut = 0;
    for (int64_t rq = 0; rq < c.R; rq++) {
        const int64_t L = lens[rq];
        for (int64_t b = 0; b < c.B; b++)
            for (int64_t h = 0; h < c.Hq; h++) {
                const int64_t j = h / G, row = (rq * c.B + b) * c.Hq + h;
                int64_t n = 0;
                for (int64_t p = 0; p < L; p++) {
                    if (!(L + b - W < p)) continue; /* outside the window */
                    const int64_t at = (off + p) * E + j * c.dh;
                    n = push_kv(K, V, n, c.dh, c.k_ctx + at, c.v_ctx + at);
                }
                seen_cut += n < L;
                for (int64_t t = 0; t < c.B; t++) {
                    const int64_t at = (rq * c.B + t) * E + j * c.dh;
                    n = push_kv(K, V, n, c.dh, c.k_blk + at, c.v_blk + at);
                }
                vs_plain(n, c.dh, c.scale, c.q + row * c.dh, K, V, o + row * c.dh, lse[row], &worst,
                         &worst_lse);
            }
        off += L;
    }
    FT_CHECK(seen_cut > 0, "the window cut no row's context: the case tests nothing");
    FT_CHECK(worst < 1e-13 && worst_lse < 1e-13, "window 6 vs plain: o %.3g lse %.3g", worst,
             worst_lse);

    /* W = 1: no context key at all, as if every request had an empty context. */
    const int32_t none[2] = {0, 0};
    double *o0 = dalloc(c.R * c.B * c.Hq * c.dh), *lse0 = dalloc(c.R * c.B * c.Hq);
    ft_ref_attn_decode_fwd_win(c.R, c.B, c.Hq, c.Hkv, c.dh, c.scale, 1, 0, c.q, c.ctx_lens, c.k_ctx,
                               c.v_ctx, c.k_blk, c.v_blk, o, lse);
    ft_ref_attn_decode_fwd(c.R, c.B, c.Hq, c.Hkv, c.dh, c.scale, c.q, none, c.k_ctx, c.v_ctx,
                           c.k_blk, c.v_blk, o0, lse0);
    FT_CHECK(memcmp(o, o0, sizeof(double) * (size_t)(c.R * c.B * c.Hq * c.dh)) == 0,
             "window 1 still sees a context key");
    /* W = 9 + 4 reaches position 0 from every row of both requests: full attention. */
    ft_ref_attn_decode_fwd_win(c.R, c.B, c.Hq, c.Hkv, c.dh, c.scale, 13, 0, c.q, c.ctx_lens,
                               c.k_ctx, c.v_ctx, c.k_blk, c.v_blk, o, lse);
    dec_run(&c);
    FT_CHECK(memcmp(o, c.o, sizeof(double) * (size_t)(c.R * c.B * c.Hq * c.dh)) == 0 &&
                 memcmp(lse, c.lse, sizeof(double) * (size_t)(c.R * c.B * c.Hq)) == 0,
             "window L + B differs from full attention");
    FT_FREE(o0, lse0, o, lse);
    dec_free(&c);
}

/* The window's edge in train, by perturbation: block 0 has anchor 10, W = 5, so query b (position
 * 10 + b) sees context rows 6 + b .. 9. Row 6 moves query 0 only; row 5 moves nothing; row 9
 * moves every query (the last row before the anchor is in every window of W >= B = 4). */
static void test_window_train_edge(void) {
    ft_rng r;
    ft_rng_seed(&r, 322);
    train_case c = train_new(&r, 1, 12, 1, 4, 2, 1, 8);
    c.anchors[0] = 10;
    c.window = 5;
    train_fwd(&c);
    const int64_t per_q = c.Hq * c.dh, E = c.Hkv * c.dh, n = tsz(&c).q;
    double *o0 = dclone(c.o, n);
    bump(c.v_ctx + 5 * E, E, 3);
    train_fwd(&c);
    FT_CHECK(memcmp(c.o, o0, sizeof(double) * (size_t)n) == 0, "row 5 (outside) changed o");
    bump(c.v_ctx + 6 * E, E, 3);
    train_fwd(&c);
    FT_CHECK(ft_test_rel_err(c.o, o0, per_q) > 1e-3, "row 6 did not change query 0");
    FT_CHECK(memcmp(c.o + per_q, o0 + per_q, sizeof(double) * (size_t)(n - per_q)) == 0,
             "row 6 changed queries 1..3 (their windows start at 7..9)");
    memcpy(o0, c.o, sizeof(double) * (size_t)n);
    bump(c.v_ctx + 9 * E, E, 3);
    train_fwd(&c);
    for (int64_t b = 0; b < c.B; b++)
        FT_CHECK(ft_test_rel_err(c.o + b * per_q, o0 + b * per_q, per_q) > 1e-3,
                 "row 9 did not change query %d", (int)b);
    free(o0);
    train_free(&c);
}

/* Train with a window equals decode with the same window on the context prefixes (query b of a
 * block at position anchor + b is query b of a request at ctx_len + b), anchors 0, 1 and S in. */
static void test_window_train_equals_decode(void) {
    ft_rng r;
    ft_rng_seed(&r, 323);
    train_case c = train_new(&r, 2, 30, 5, 4, 4, 2, 8);
    c.window = 7;
    c.anchors[0] = 0;
    c.anchors[3] = 30;
    c.anchors[6] = 1;
    check_train_vs_decode(&c, "window");
    train_free(&c);
}

/* Every entry of every gradient by central differences under W = 3 < B + 1: anchors 0, S and in
 * between, one dropped block. Context rows no window reaches get exactly 0. */
static void test_window_train_grad(void) {
    ft_rng r;
    ft_rng_seed(&r, 324);
    const int32_t anc[6] = {0, 8, 5, 2, 7, 8};
    train_case c = train_small(&r, 8, anc);
    c.window = 3;
    train_grad_check(&c, 1 << 30, &r);
    /* sequence 0 (anchors 0, 8, 5) sees rows 3, 4 (anchor 5) and 6, 7 (anchor 8): rows 0-2 and 5
     * are outside every window. */
    train_grads g = train_bwd(&c);
    const int64_t E = c.Hkv * c.dh;
    FT_CHECK(all_zero(g.dk_ctx, 3 * E) && all_zero(g.dv_ctx + 5 * E, E),
             "context rows outside every window got a gradient");
    FT_CHECK(!all_zero(g.dv_ctx + 3 * E, E) && !all_zero(g.dv_ctx + 7 * E, E),
             "rows 3 and 7 (inside windows) got no gradient");
    train_grads_free(&g);
    /* A wider window on the brief's shape, sampled. */
    train_case d = train_brief(&r, 9);
    train_grad_check(&d, 60, &r);
    train_free(&d);
    train_free(&c);
}

/* causal = 1 (SpecForge's sliding layers): query b of a block sees its block's keys 0..b. Train
 * with a window against plain_attention on the keys listed by the rule (context rows p with
 * a + b - W < p < a, then block rows 0..b); row 0 sees one block key; the central-difference
 * gradients hold; and a block key c is invisible to the rows before it (perturbing it leaves
 * them exactly). */
static void test_causal_block(void) {
    ft_rng r;
    ft_rng_seed(&r, 325);
    train_case c = train_new(&r, 1, 12, 2, 4, 2, 1, 8);
    c.anchors[0] = 10;
    c.anchors[1] = 3;
    c.window = 5;
    c.causal = 1;
    train_fwd(&c);
    const int64_t E = c.Hkv * c.dh, dh = c.dh;
    double K[(12 + 4) * 8], V[(12 + 4) * 8], worst = 0;
    for (int64_t j = 0; j < c.NB; j++) {
        const int64_t a = c.anchors[j];
        for (int64_t b = 0; b < c.B; b++)
            for (int64_t h = 0; h < c.Hq; h++) {
                int64_t n = 0;
                for (int64_t p = 0; p < a; p++)
                    if (a + b - c.window < p)
                        n = push_kv(K, V, n, dh, c.k_ctx + p * E, c.v_ctx + p * E);
                for (int64_t t = 0; t <= b; t++)
                    n = push_kv(K, V, n, dh, c.k_blk + (j * c.B + t) * E,
                                c.v_blk + (j * c.B + t) * E);
                const int64_t row = (j * c.B + b) * c.Hq + h;
                vs_plain(n, dh, c.scale, c.q + row * dh, K, V, c.o + row * dh, c.lse[row], &worst,
                         &worst);
            }
    }
    FT_CHECK(worst < 1e-13, "causal block, window 5 vs plain: %.3g", worst);
    /* block 0's key 2 moves rows 2 and 3 only */
    const int64_t n = tsz(&c).q, per_q = c.Hq * dh;
    double *o0 = dclone(c.o, n);
    bump(c.v_blk + 2 * E, E, 3);
    train_fwd(&c);
    FT_CHECK(memcmp(c.o, o0, sizeof(double) * (size_t)(2 * per_q)) == 0,
             "block key 2 changed rows 0 and 1");
    FT_CHECK(ft_test_rel_err(c.o + 2 * per_q, o0 + 2 * per_q, 2 * per_q) > 1e-3,
             "block key 2 did not change rows 2 and 3");
    free(o0);
    train_free(&c);
    /* gradients, causal with and without a window */
    const int32_t anc[6] = {0, 8, 5, 2, 7, 8};
    train_case d = train_small(&r, 8, anc);
    d.causal = 1;
    train_grad_check(&d, 1 << 30, &r);
    d.window = 3;
    train_grad_check(&d, 1 << 30, &r);
    train_free(&d);
}

int main(void) {
    FT_RUN(test_kvproj_hand_dh2);
    FT_RUN(test_kvproj_hand_rope_pairs);
    FT_RUN(test_kvproj_hand_scaled_table);
    FT_RUN(test_kvproj_pos0_by_hand);
    FT_RUN(test_kvproj_rope_properties);
    FT_RUN(test_kvproj_norm_per_head);
    FT_RUN(test_kvproj_layers);
    FT_RUN(test_kvproj_grad_full);
    FT_RUN(test_kvproj_grad_properties);
    FT_RUN(test_decode_hand);
    FT_RUN(test_decode_single_key);
    FT_RUN(test_decode_identical_keys);
    FT_RUN(test_decode_gqa_mapping);
    FT_RUN(test_decode_vs_expanded_mha);
    FT_RUN(test_decode_requests_alone);
    FT_RUN(test_decode_shift_and_permutation);
    FT_RUN(test_decode_large_scores);
    FT_RUN(test_train_equals_decode_prefixes);
    FT_RUN(test_train_equals_decode_one_block);
    FT_RUN(test_train_mask_by_perturbation);
    FT_RUN(test_train_gqa_mapping);
    FT_RUN(test_train_keep0);
    FT_RUN(test_train_grad_full);
    FT_RUN(test_train_grad_spec_shape);
    FT_RUN(test_window_decode_by_plain);
    FT_RUN(test_window_train_edge);
    FT_RUN(test_window_train_equals_decode);
    FT_RUN(test_window_train_grad);
    FT_RUN(test_causal_block);
    return ft_test_finish();
}
