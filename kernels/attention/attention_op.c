/* attention_op.c: the interface of the three attention ops (SPEC.md attention.kvproj,
 * attention.decode, attention.train): tensors, attributes, size and index checks, preset sizes,
 * realistic inputs, the bridge to the float64 reference in kernels/attention/attention_ref.c, and
 * the napkin math.
 *
 * kvproj: two GEMMs per draft layer, 4*D*N*H*Hkv*dh FLOPs; compute-bound. Its backward is four
 * more of the same size (dc from dk and from dv, dw_k, dw_v): 8*D*N*H*Hkv*dh, so a forward +
 * backward call is 3x the forward; the norm and RoPE are O(D*N*Hkv*dh) and not counted.
 * decode: each (query row, query head, visible key) costs 2*dh for the score and 2*dh for the
 * value sum, so 4*dh*B*Hq*(L_r + B) per request; K/V are read once per kv head when the GQA group
 * is packed (2*L*Hkv*dh floats). At R = 1 the intensity is 2*G*B FLOP per K/V float (G =
 * Hq/Hkv): compute-bound on CPUs, bandwidth-bound on GPUs.
 * train: the same 4*dh per visible (row, head, key) forward, counting only visible keys
 * (anchor + B per block, kept blocks only); the backward adds 8*dh (dV, dP, dQ, dK; the
 * recomputation of the scores is not counted, being an implementation choice).
 * window = W > 0 (sliding-window layers, SPEC.md "Sliding window"): a query at position i counts
 * only the context keys p > i - W it sees, at most W - 1 of them, so a windowed layer costs
 * about 4*dh*B*Hq*(W + B) per block whatever the context length. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attention/attention.h"
#include "attention/attention_ref.h"
#include "op/op.h"

/* Context keys [0, L) that the query at position qpos sees: all of them, or under a window W
 * those p > qpos - W (ft_ref_window_lo). */
static int64_t visible_ctx(int64_t window, int64_t qpos, int64_t L) {
    int64_t lo = ft_ref_window_lo(window, qpos);
    return L - (lo < L ? lo : L);
}

/* The mean of visible_ctx over anchors a uniform in [0, S] for the query at a + b (sizes only:
 * planning before the anchors are drawn). */
static double mean_visible_ctx(int64_t window, int64_t b, int64_t S) {
    double sum = 0;
    for (int64_t a = 0; a <= S; a++)
        sum += (double)visible_ctx(window, a + b, a);
    return sum / (double)(S + 1);
}

static ft_status check_gqa(const char *op, int64_t Hq, int64_t Hkv, int64_t dh, ft_err *err) {
    if (Hkv < 1 || Hq < 1 || dh < 1)
        return ft_err_set(err, FT_ESHAPE, "%s: Hq, Hkv and dh must be at least 1", op);
    if (Hq % Hkv)
        return ft_err_set(err, FT_ESHAPE,
                          "%s: query heads Hq = %lld must be a multiple of kv heads Hkv = %lld", op,
                          (long long)Hq, (long long)Hkv);
    return FT_OK;
}

/* The sizes among syms (the op's symbols) that a preset field of the same name gives (B, Hq, Hkv,
 * dh, ...), from preset p; the op derives the others. */
static void preset_sizes(ft_call *c, const char *const *syms, const ft_preset *p) {
    for (int s = 0; syms[s]; s++) {
        const int64_t v = ft_preset_size(p, syms[s]);
        if (v >= 0) c->dim[s] = v;
    }
}

/* ---- attention.kvproj ---------------------------------------------------------------------- */

static const char *const kvproj_syms[] = {"Dc", "D", "N", "H", "KVD", "Hkv", "dh", NULL};
static const ft_tensor_spec kvproj_tensors[] = {
    [KP_C] = {"c", FT_F32, "Dc,N,H", FT_ROLE_IN, 0,
              "context features: Dc = D per layer (DFLARE) or 1 shared (DFlash)"},
    FT_TS_IN_GRAD(KP_WK, KP_DWK, "w_k", "D,KVD,H", "K projection per layer, KVD = Hkv*dh"),
    FT_TS_IN_GRAD(KP_WV, KP_DWV, "w_v", "D,KVD,H", "V projection per layer"),
    FT_TS_IN_GRAD(KP_GK, KP_DGK, "gk", "D,dh", "k_norm gain per layer"),
    [KP_POS] = {"pos", FT_I32, "N", FT_ROLE_IN, 0, "RoPE position of each context token"},
    FT_TS_OUT_GRAD(KP_K, KP_DK, "k", "D,N,Hkv,dh", "normed, rotated context keys"),
    FT_TS_OUT_GRAD(KP_V, KP_DV, "v", "D,N,Hkv,dh", "context values"),
    [KP_DCTX] = {"dc", FT_F32, "Dc,N,H", FT_ROLE_GRAD_OUT, 0,
                 "gradient of c (Dc = 1: summed over the D layers that share it)"},
};
static const char *const kvproj_attrs[] = {"eps",
                                           "rope_theta",
                                           "rope_scaling",
                                           "rope_factor",
                                           "rope_low_freq_factor",
                                           "rope_high_freq_factor",
                                           "rope_original_max_pos",
                                           "rope_beta_fast",
                                           "rope_beta_slow",
                                           "rope_truncate",
                                           "backward",
                                           "dtype",
                                           NULL};

static ft_status kvproj_check(ft_call *c, ft_err *err) {
    int64_t *d = c->dim;
    if (d[KP_DC] != 1 && d[KP_DC] != d[KP_D])
        return ft_err_set(err, FT_ESHAPE,
                          "attention.kvproj: c must have 1 (shared) or D = %lld (per layer) "
                          "leading rows, got %lld",
                          (long long)d[KP_D], (long long)d[KP_DC]);
    if (d[KP_DH] < 2 || d[KP_DH] % 2)
        return ft_err_set(err, FT_ESHAPE,
                          "attention.kvproj: head dim dh = %lld must be even (rotate-half RoPE)",
                          (long long)d[KP_DH]);
    if (d[KP_KVD] < 1 || d[KP_KVD] % d[KP_DH])
        return ft_err_set(err, FT_ESHAPE,
                          "attention.kvproj: w_k rows %lld must be a multiple of dh = %lld",
                          (long long)d[KP_KVD], (long long)d[KP_DH]);
    d[KP_HKV] = d[KP_KVD] / d[KP_DH];
    return ft_rope_check("attention.kvproj", &c->attrs, err);
}

static ft_status kvproj_from_preset(ft_call *c, const ft_preset *p, ft_err *err) {
    (void)err;
    int64_t *d = c->dim;
    preset_sizes(c, kvproj_syms, p);
    d[KP_DC] = strcmp(p->arch, "dflare") == 0 ? p->D : 1; /* per layer; DFlash shares one */
    d[KP_KVD] = p->Hkv * p->dh;
    /* The target's RoPE, unless the call named its own (--attr rope_*: that choice stands). */
    if (!c->attrs.rope.named) {
        c->attrs.rope_theta = p->rope_theta;
        c->attrs.rope = p->rope;
        c->attrs.rope.named = 0;
    }
    return FT_OK;
}

static void kvproj_fill(ft_call *c, const ft_preset *p, ft_rng *rng) {
    (void)p;
    ft_fill_normal(c->t[KP_C], rng, 0.0, 1.0);
    ft_fill_normal(c->t[KP_WK], rng, 0.0, 1.0 / sqrt((double)c->dim[KP_H]));
    ft_fill_normal(c->t[KP_WV], rng, 0.0, 1.0 / sqrt((double)c->dim[KP_H]));
    ft_fill_normal(c->t[KP_GK], rng, 1.0, 0.1);
    int32_t *pos = c->t[KP_POS]->data;
    int32_t start = (int32_t)ft_rng_below(rng, 4096);
    for (int64_t n = 0; n < c->dim[KP_N]; n++)
        pos[n] = start + (int32_t)n;
    if (c->backward) {
        ft_fill_normal(c->t[KP_DK], rng, 0.0, 1.0);
        ft_fill_normal(c->t[KP_DV], rng, 0.0, 1.0);
    }
}

static void kvproj_reference(const ft_call *c) {
    const int64_t *d = c->dim;
    double *inv_freq = calloc((size_t)(d[KP_DH] / 2 + 1), sizeof(double)), mscale;
    if (!inv_freq) abort(); /* dh/2 doubles; the reference has no way to report a failure */
    ft_rope_freqs(&c->attrs, d[KP_DH], inv_freq, &mscale);
    ft_ref_kvproj_fwd(d[KP_DC], d[KP_D], d[KP_N], d[KP_H], d[KP_HKV], d[KP_DH], c->attrs.eps,
                      inv_freq, mscale, c->t[KP_C]->data, c->t[KP_WK]->data, c->t[KP_WV]->data,
                      c->t[KP_GK]->data, c->t[KP_POS]->data, c->t[KP_K]->data, c->t[KP_V]->data);
    if (c->backward)
        ft_ref_kvproj_bwd(d[KP_DC], d[KP_D], d[KP_N], d[KP_H], d[KP_HKV], d[KP_DH], c->attrs.eps,
                          inv_freq, mscale, c->t[KP_C]->data, c->t[KP_WK]->data, c->t[KP_WV]->data,
                          c->t[KP_GK]->data, c->t[KP_POS]->data, c->t[KP_DK]->data,
                          c->t[KP_DV]->data, c->t[KP_DCTX]->data, c->t[KP_DWK]->data,
                          c->t[KP_DWV]->data, c->t[KP_DGK]->data);
    free(inv_freq);
}

static double kvproj_flops(const ft_call *c) {
    const int64_t *d = c->dim;
    const double fwd =
        4.0 * (double)d[KP_D] * (double)d[KP_N] * (double)d[KP_H] * (double)d[KP_KVD];
    return fwd * (c->backward ? 3.0 : 1.0);
}

FT_OP_DEFINE(attention_kvproj, kvproj, "attention.kvproj", FT_BWD_OPTIONAL,
             "context K/V projection: K = RoPE(k_norm(c W_k^T)), V = c W_v^T, per draft layer");

/* ---- attention.decode ---------------------------------------------------------------------- */

static const char *const decode_syms[] = {"R", "B", "Hq", "Hkv", "dh", "Lsum", NULL};
static const ft_tensor_spec decode_tensors[] = {
    [DC_Q] = {"q", FT_F32, "R,B,Hq,dh", FT_ROLE_IN, 0, "block queries (normed, rotated)"},
    [DC_LENS] = {"ctx_lens", FT_I32, "R", FT_ROLE_IN, 0, "context length of each request"},
    [DC_KCTX] = {"k_ctx", FT_F32, "Lsum,Hkv,dh", FT_ROLE_IN, 0,
                 "context keys, requests back to back (Lsum = sum ctx_lens)"},
    [DC_VCTX] = {"v_ctx", FT_F32, "Lsum,Hkv,dh", FT_ROLE_IN, 0, "context values"},
    [DC_KBLK] = {"k_blk", FT_F32, "R,B,Hkv,dh", FT_ROLE_IN, 0, "the block's own keys"},
    [DC_VBLK] = {"v_blk", FT_F32, "R,B,Hkv,dh", FT_ROLE_IN, 0, "the block's own values"},
    [DC_O] = {"o", FT_F32, "R,B,Hq,dh", FT_ROLE_OUT, 0, "attention output"},
    [DC_LSE] = {"lse", FT_F32, "R,B,Hq", FT_ROLE_OUT, 0, "log-sum-exp of the scaled scores"},
};
static const char *const decode_attrs[] = {"scale", "window", "causal", "dtype", NULL};

static ft_status decode_check(ft_call *c, ft_err *err) {
    const int64_t *d = c->dim;
    ft_status s = check_gqa("attention.decode", d[DC_HQ], d[DC_HKV], d[DC_DH], err);
    if (s) return s;
    const int32_t *lens = c->t[DC_LENS]->data;
    int64_t sum = 0;
    for (int64_t r = 0; r < d[DC_R]; r++) {
        if (lens[r] < 0)
            return ft_err_set(err, FT_EINVAL, "attention.decode: ctx_lens[%lld] = %d is negative",
                              (long long)r, lens[r]);
        sum += lens[r];
    }
    if (sum != d[DC_LSUM])
        return ft_err_set(err, FT_ESHAPE,
                          "attention.decode: ctx_lens sums to %lld but k_ctx and v_ctx hold %lld "
                          "rows",
                          (long long)sum, (long long)d[DC_LSUM]);
    return FT_OK;
}

static ft_status decode_from_preset(ft_call *c, const ft_preset *p, ft_err *err) {
    int64_t *d = c->dim;
    preset_sizes(c, decode_syms, p);
    d[DC_LSUM] = ft_preset_ctx_sum(p);
    if (d[DC_LSUM] < 0)
        return ft_err_set(err, FT_ESHAPE,
                          "attention.decode: R = %lld requests of about L = %lld context tokens "
                          "are too many (their K/V rows do not fit in 64 bits)",
                          (long long)p->R, (long long)p->L);
    return FT_OK;
}

static void decode_fill(ft_call *c, const ft_preset *p, ft_rng *rng) {
    int32_t *lens = c->t[DC_LENS]->data;
    int64_t R = c->dim[DC_R], Lsum = c->dim[DC_LSUM];
    for (int64_t r = 0; r < R; r++) {
        if (p) lens[r] = (int32_t)ft_preset_ctx_len(p, r);
        else lens[r] = (int32_t)(Lsum / R + (r < Lsum % R)); /* sizes only: spread evenly */
    }
    for (int i = DC_Q; i <= DC_VBLK; i++)
        if (i != DC_LENS) ft_fill_normal(c->t[i], rng, 0.0, 1.0);
}

static void decode_reference(const ft_call *c) {
    const int64_t *d = c->dim;
    ft_ref_attn_decode_fwd_win(
        d[DC_R], d[DC_B], d[DC_HQ], d[DC_HKV], d[DC_DH], ft_attn_scale(&c->attrs, d[DC_DH]),
        c->attrs.window, c->attrs.causal, c->t[DC_Q]->data, c->t[DC_LENS]->data, c->t[DC_KCTX]->data, c->t[DC_VCTX]->data,
        c->t[DC_KBLK]->data, c->t[DC_VBLK]->data, c->t[DC_O]->data, c->t[DC_LSE]->data);
}

/* Visible keys summed over the B query rows of every request (query b at position L_r + b). */
static double decode_flops(const ft_call *c) {
    const int64_t *d = c->dim, W = c->attrs.window, R = d[DC_R], B = d[DC_B];
    /* the block keys of a block's B rows: B each, or 1 + 2 + ... + B when causal */
    const double blk = c->attrs.causal ? (double)B * (double)(B + 1) / 2 : (double)B * (double)B;
    double keys = 0;
    if (W == 0) {
        keys = (double)B * (double)d[DC_LSUM] + (double)R * blk;
    } else {
        const int32_t *lens = c->t[DC_LENS] && c->t[DC_LENS]->data ? c->t[DC_LENS]->data : NULL;
        for (int64_t r = 0; r < R; r++) {
            /* sizes only: requests share the rows evenly, as decode_fill spreads them */
            const int64_t L = lens ? lens[r] : d[DC_LSUM] / R + (r < d[DC_LSUM] % R);
            for (int64_t b = 0; b < B; b++)
                keys += (double)visible_ctx(W, L + b, L);
            keys += blk;
        }
    }
    return 4.0 * (double)d[DC_DH] * (double)d[DC_HQ] * keys;
}

FT_OP_DEFINE(attention_decode, decode, "attention.decode", FT_BWD_NONE,
             "inference block attention: B queries per request over its context cache plus "
             "its own B keys, no mask, GQA");

/* ---- attention.train ----------------------------------------------------------------------- */

static const char *const train_syms[] = {"nseq", "S", "NB", "B", "Hq", "Hkv", "dh", NULL};
static const ft_tensor_spec train_tensors[] = {
    FT_TS_IN_GRAD(TR_Q, TR_DQ, "q", "nseq,NB,B,Hq,dh", "block queries"),
    FT_TS_IN_GRAD(TR_KCTX, TR_DKCTX, "k_ctx", "nseq,S,Hkv,dh", "context keys"),
    FT_TS_IN_GRAD(TR_VCTX, TR_DVCTX, "v_ctx", "nseq,S,Hkv,dh", "context values"),
    FT_TS_IN_GRAD(TR_KBLK, TR_DKBLK, "k_blk", "nseq,NB,B,Hkv,dh", "block keys"),
    FT_TS_IN_GRAD(TR_VBLK, TR_DVBLK, "v_blk", "nseq,NB,B,Hkv,dh", "block values"),
    [TR_ANCH] = {"anchors", FT_I32, "nseq,NB", FT_ROLE_IN, 0,
                 "block j sees context positions p < anchors[s,j], in [0, S]"},
    [TR_KEEP] = {"keep", FT_U8, "nseq,NB", FT_ROLE_IN, 0, "0: the block sees nothing"},
    FT_TS_OUT_GRAD(TR_O, TR_DO, "o", "nseq,NB,B,Hq,dh", "attention output (0 if not kept)"),
    [TR_LSE] = {"lse", FT_F32, "nseq,NB,B,Hq", FT_ROLE_OUT, 0, "log-sum-exp (-inf if not kept)"},
};
static const char *const train_attrs[] = {"scale", "backward", "window", "causal", "dtype", NULL};

static ft_status train_check(ft_call *c, ft_err *err) {
    const int64_t *d = c->dim;
    ft_status s = check_gqa("attention.train", d[TR_HQ], d[TR_HKV], d[TR_DH], err);
    if (s) return s;
    const int32_t *anchors = c->t[TR_ANCH]->data;
    const uint8_t *keep = c->t[TR_KEEP]->data;
    for (int64_t i = 0, n = d[TR_NSEQ] * d[TR_NB]; i < n; i++) {
        if (anchors[i] < 0 || anchors[i] > d[TR_S])
            return ft_err_set(err, FT_EINVAL,
                              "attention.train: anchors[%lld][%lld] = %d is outside [0, S = %lld]",
                              (long long)(i / d[TR_NB]), (long long)(i % d[TR_NB]), anchors[i],
                              (long long)d[TR_S]);
        if (keep[i] > 1)
            return ft_err_set(err, FT_EINVAL,
                              "attention.train: keep[%lld][%lld] = %d, expected 0 or 1",
                              (long long)(i / d[TR_NB]), (long long)(i % d[TR_NB]), keep[i]);
    }
    return FT_OK;
}

static ft_status train_from_preset(ft_call *c, const ft_preset *p, ft_err *err) {
    (void)err;
    preset_sizes(c, train_syms, p);
    return FT_OK;
}

static void train_fill(ft_call *c, const ft_preset *p, ft_rng *rng) {
    (void)p;
    for (int i = TR_Q; i <= TR_VBLK; i++)
        ft_fill_normal(c->t[i], rng, 0.0, 1.0);
    /* Anchors uniform over [0, S] (the trainers sample them from valid positions); about one
     * block in sixteen dropped, as padding does. */
    int32_t *anchors = c->t[TR_ANCH]->data;
    uint8_t *keep = c->t[TR_KEEP]->data;
    for (int64_t i = 0, n = c->dim[TR_NSEQ] * c->dim[TR_NB]; i < n; i++) {
        anchors[i] = (int32_t)ft_rng_below(rng, (uint64_t)c->dim[TR_S] + 1);
        keep[i] = ft_rng_below(rng, 16) != 0;
    }
    if (c->backward) ft_fill_normal(c->t[TR_DO], rng, 0.0, 1.0);
}

static void train_reference(const ft_call *c) {
    const int64_t *d = c->dim;
    double scale = ft_attn_scale(&c->attrs, d[TR_DH]);
    const int64_t W = c->attrs.window;
    ft_ref_attn_train_fwd_win(d[TR_NSEQ], d[TR_S], d[TR_NB], d[TR_B], d[TR_HQ], d[TR_HKV],
                              d[TR_DH], scale, W, c->attrs.causal, c->t[TR_Q]->data,
                              c->t[TR_KCTX]->data,
                              c->t[TR_VCTX]->data, c->t[TR_KBLK]->data, c->t[TR_VBLK]->data,
                              c->t[TR_ANCH]->data, c->t[TR_KEEP]->data, c->t[TR_O]->data,
                              c->t[TR_LSE]->data);
    if (c->backward)
        ft_ref_attn_train_bwd_win(d[TR_NSEQ], d[TR_S], d[TR_NB], d[TR_B], d[TR_HQ], d[TR_HKV],
                                  d[TR_DH], scale, W, c->attrs.causal, c->t[TR_Q]->data,
                                  c->t[TR_KCTX]->data,
                                  c->t[TR_VCTX]->data, c->t[TR_KBLK]->data, c->t[TR_VBLK]->data,
                                  c->t[TR_ANCH]->data, c->t[TR_KEEP]->data, c->t[TR_DO]->data,
                                  c->t[TR_DQ]->data, c->t[TR_DKCTX]->data, c->t[TR_DVCTX]->data,
                                  c->t[TR_DKBLK]->data, c->t[TR_DVBLK]->data);
}

/* Visible keys summed over the query rows of the kept blocks (query b at position anchor + b). */
static double train_flops(const ft_call *c) {
    const int64_t *d = c->dim, W = c->attrs.window, B = d[TR_B];
    /* the block keys of a block's B rows: B each, or 1 + 2 + ... + B when causal */
    const double blk = c->attrs.causal ? (double)B * (double)(B + 1) / 2 : (double)B * (double)B;
    double keys = 0; /* summed over the B rows of each block */
    if (c->t[TR_ANCH] && c->t[TR_KEEP]) {
        const int32_t *anchors = c->t[TR_ANCH]->data;
        const uint8_t *keep = c->t[TR_KEEP]->data;
        for (int64_t i = 0; i < d[TR_NSEQ] * d[TR_NB]; i++) {
            if (!keep[i]) continue;
            keys += blk;
            if (W == 0) {
                keys += (double)B * (double)anchors[i];
                continue;
            }
            for (int64_t b = 0; b < B; b++)
                keys += (double)visible_ctx(W, anchors[i] + b, anchors[i]);
        }
    } else if (W == 0) {
        /* Sizes only (planning): anchors average S/2. */
        keys = (double)d[TR_NSEQ] * (double)d[TR_NB] * ((double)B * (double)d[TR_S] / 2 + blk);
    } else {
        double per_block = blk;
        for (int64_t b = 0; b < B; b++)
            per_block += mean_visible_ctx(W, b, d[TR_S]);
        keys = (double)d[TR_NSEQ] * (double)d[TR_NB] * per_block;
    }
    double fwd = 4.0 * (double)d[TR_DH] * (double)d[TR_HQ] * keys;
    return fwd * (c->backward ? 3.0 : 1.0);
}

FT_OP_DEFINE(attention_train, train, "attention.train", FT_BWD_OPTIONAL,
             "training block-sparse attention: each block sees the context before its anchor "
             "plus itself (bidirectional)");
