/* fusion_op.c: the interface of the two context-fusion ops (SPEC.md fusion.dflare and
 * fusion.dflash): tensors, attributes, size checks, preset sizes, realistic inputs, the bridge
 * to the float64 reference in kernels/fusion/fusion_ref.c, and the napkin math.
 *
 * fusion.dflare: forward 2*D*T*N*H FLOPs (the weighted sums; the norm is O(D*N*H)) against
 * N*T*H + D*N*H floats moved: memory-bound everywhere (0.25 FLOP/byte at fp32). The backward
 * recomputes s (2*D*T*N*H), forms dx and da (4*D*T*N*H).
 * fusion.dflash: the GEMM costs 2*N*H*(T*H) FLOPs forward and twice that backward (dx and dw_fc),
 * with N*T*H + H*T*H floats moved: compute-bound for any N beyond a few dozen rows.
 * Both: with want_dx = 0 (the trainers' case: x is the frozen target's) the backward forms no dx,
 * one GEMM less for fusion.dflash and no dx written for fusion.dflare. */
#include <math.h>

#include "fusion/fusion.h"
#include "fusion/fusion_ref.h"
#include "op/op.h"

/* ---- fusion.dflare ------------------------------------------------------------------------- */

static const char *const dflare_syms[] = {"N", "T", "H", "D", NULL};
static const ft_tensor_spec dflare_tensors[] = {
    FT_TS_IN_GRAD_FLAGS(DL_X, DL_DX, "x", "N,T,H", FT_TS_WANT_DX,
                        "the T target layers' states per token", "gradient of x (want_dx = 1)"),
    FT_TS_IN_GRAD(DL_W, DL_DW, "w", "D,T", "fusion logits, softmax over T per layer"),
    FT_TS_IN_GRAD(DL_G, DL_DG, "g", "H", "RMSNorm gain shared by every draft layer"),
    FT_TS_OUT_GRAD(DL_F, DL_DF, "f", "D,N,H", "fused context per draft layer"),
};
static const char *const dflare_attrs[] = {"eps", "backward", "want_dx", "dtype", NULL};

/* want_dx = 0 leaves dx out of the backward: without one it would change nothing. */
static ft_status check_want_dx(const ft_call *c, ft_err *err) {
    if (!c->attrs.want_dx && !c->backward)
        return ft_err_set(err, FT_EINVAL,
                          "%s: want_dx=0 needs backward=1 (it leaves dx out of the backward)",
                          c->op->name);
    return FT_OK;
}

static ft_status dflare_check(ft_call *c, ft_err *err) {
    if (c->dim[DL_T] < 1 || c->dim[DL_H] < 1 || c->dim[DL_D] < 1)
        return ft_err_set(err, FT_ESHAPE, "fusion.dflare: T, H and D must be at least 1");
    return check_want_dx(c, err);
}

static ft_status dflare_from_preset(ft_call *c, const ft_preset *p, ft_err *err) {
    (void)err;
    c->dim[DL_N] = p->N;
    c->dim[DL_T] = p->T;
    c->dim[DL_H] = p->H;
    c->dim[DL_D] = p->D;
    return FT_OK;
}

/* Target hidden states grow in magnitude with depth; give each layer its own scale so the
 * fusion weights matter and RMSNorm sees realistic spread. */
static void fill_states(ft_tensor *x, int64_t T, int64_t H, ft_rng *rng) {
    /* Standard normals (ft_rng_fill_normal), then each row of H scaled by its layer t. */
    float *p = x->data;
    const int64_t rows = ft_tensor_numel(x) / H;
    ft_rng_fill_normal(rng, p, rows * H, 0.0, 1.0);
#pragma omp parallel for schedule(static)
    for (int64_t j = 0; j < rows; j++) {
        const float s = (float)(0.5 + 0.25 * (double)(j % T));
        for (int64_t h = 0; h < H; h++)
            p[j * H + h] *= s;
    }
}

static void dflare_fill(ft_call *c, const ft_preset *p, ft_rng *rng) {
    (void)p;
    int64_t T = c->dim[DL_T], D = c->dim[DL_D];
    fill_states(c->t[DL_X], T, c->dim[DL_H], rng);
    /* SPEC.md's reference initialisation plus noise: layer i starts on target layer i*T/D. */
    float *w = c->t[DL_W]->data;
    for (int64_t i = 0; i < D; i++)
        for (int64_t t = 0; t < T; t++) {
            const int64_t hot = ft_ref_fusion_dflare_init_col(i, T, D);
            w[i * T + t] = (float)((t == hot ? 2.0 : 0.0) + 0.3 * ft_rng_normal(rng));
        }
    ft_fill_normal(c->t[DL_G], rng, 1.0, 0.1);
    if (c->backward) ft_fill_normal(c->t[DL_DF], rng, 0.0, 1.0);
}

static void dflare_reference(const ft_call *c) {
    const int64_t *d = c->dim;
    ft_ref_fusion_dflare_fwd(d[DL_N], d[DL_T], d[DL_H], d[DL_D], c->attrs.eps, c->t[DL_X]->data,
                             c->t[DL_W]->data, c->t[DL_G]->data, c->t[DL_F]->data);
    if (c->backward)
        ft_ref_fusion_dflare_bwd(d[DL_N], d[DL_T], d[DL_H], d[DL_D], c->attrs.eps, c->t[DL_X]->data,
                                 c->t[DL_W]->data, c->t[DL_G]->data, c->t[DL_DF]->data,
                                 c->attrs.want_dx ? c->t[DL_DX]->data : NULL, c->t[DL_DW]->data,
                                 c->t[DL_DG]->data);
}

static double dflare_flops(const ft_call *c) {
    const int64_t *d = c->dim;
    double fwd = 2.0 * (double)d[DL_D] * (double)d[DL_T] * (double)d[DL_N] * (double)d[DL_H];
    /* The backward recomputes s, writes f, and forms da and (want_dx) dx. */
    return fwd * (c->backward ? (c->attrs.want_dx ? 4.0 : 3.0) : 1.0);
}

FT_OP_DEFINE(fusion_dflare, dflare, "fusion.dflare", FT_BWD_OPTIONAL,
             "DFLARE adaptive layer fusion: per draft layer, a softmax-weighted mix of the T "
             "target states, RMSNorm'd");

/* ---- fusion.dflash ------------------------------------------------------------------------- */

static const char *const dflash_syms[] = {"N", "T", "H", "TH", NULL};
static const ft_tensor_spec dflash_tensors[] = {
    FT_TS_IN_GRAD_FLAGS(DH_X, DH_DX, "x", "N,T,H", FT_TS_WANT_DX,
                        "the T target layers' states per token", "gradient of x (want_dx = 1)"),
    FT_TS_IN_GRAD(DH_WFC, DH_DWFC, "w_fc", "H,TH", "FC weight (out x in), TH = T*H"),
    FT_TS_IN_GRAD(DH_G, DH_DG, "g", "H", "RMSNorm gain"),
    FT_TS_OUT_GRAD(DH_F, DH_DF, "f", "N,H", "fused context shared by every draft layer"),
};
static const char *const dflash_attrs[] = {"eps", "backward", "want_dx", "dtype", NULL};

static ft_status dflash_check(ft_call *c, ft_err *err) {
    if (c->dim[DH_T] < 1 || c->dim[DH_H] < 1)
        return ft_err_set(err, FT_ESHAPE, "fusion.dflash: T and H must be at least 1");
    ft_status s = check_want_dx(c, err);
    if (s) return s;
    if (c->dim[DH_TH] != c->dim[DH_T] * c->dim[DH_H])
        return ft_err_set(err, FT_ESHAPE,
                          "fusion.dflash: w_fc must be [H, T*H] = [%lld, %lld], got [%lld, %lld]",
                          (long long)c->dim[DH_H], (long long)(c->dim[DH_T] * c->dim[DH_H]),
                          (long long)c->dim[DH_H], (long long)c->dim[DH_TH]);
    return FT_OK;
}

static ft_status dflash_from_preset(ft_call *c, const ft_preset *p, ft_err *err) {
    (void)err;
    c->dim[DH_N] = p->N;
    c->dim[DH_T] = p->T;
    c->dim[DH_H] = p->H;
    c->dim[DH_TH] = p->T * p->H;
    return FT_OK;
}

static void dflash_fill(ft_call *c, const ft_preset *p, ft_rng *rng) {
    (void)p;
    fill_states(c->t[DH_X], c->dim[DH_T], c->dim[DH_H], rng);
    ft_fill_normal(c->t[DH_WFC], rng, 0.0, 1.0 / sqrt((double)c->dim[DH_TH]));
    ft_fill_normal(c->t[DH_G], rng, 1.0, 0.1);
    if (c->backward) ft_fill_normal(c->t[DH_DF], rng, 0.0, 1.0);
}

static void dflash_reference(const ft_call *c) {
    const int64_t *d = c->dim;
    ft_ref_fusion_dflash_fwd(d[DH_N], d[DH_T], d[DH_H], c->attrs.eps, c->t[DH_X]->data,
                             c->t[DH_WFC]->data, c->t[DH_G]->data, c->t[DH_F]->data);
    if (c->backward)
        ft_ref_fusion_dflash_bwd(d[DH_N], d[DH_T], d[DH_H], c->attrs.eps, c->t[DH_X]->data,
                                 c->t[DH_WFC]->data, c->t[DH_G]->data, c->t[DH_DF]->data,
                                 c->attrs.want_dx ? c->t[DH_DX]->data : NULL, c->t[DH_DWFC]->data,
                                 c->t[DH_DG]->data);
}

static double dflash_flops(const ft_call *c) {
    const int64_t *d = c->dim;
    double fwd = 2.0 * (double)d[DH_N] * (double)d[DH_H] * (double)d[DH_TH];
    /* The backward's GEMMs: dw_fc and (want_dx) dx, each the forward's size. */
    return fwd * (c->backward ? (c->attrs.want_dx ? 3.0 : 2.0) : 1.0);
}

FT_OP_DEFINE(fusion_dflash, dflash, "fusion.dflash", FT_BWD_OPTIONAL,
             "DFlash FC fusion: concat the T target states, one Linear to H, RMSNorm");
