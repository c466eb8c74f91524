/* attention_ref.c: float64 reference of the drafter's attention ops (SPEC.md attention.kvproj,
 * attention.decode, attention.train), the oracle every fast attention backend is checked against.
 *
 *   kvproj:  u = c[i or 0,n,:] @ w_k[i]^T  viewed as [Hkv, dh]
 *            k[i,n,j,:] = rope(u[j,:] / sqrt(mean_d u[j,d]^2 + eps) * gk[i,:], pos[n])
 *            v[i,n,j,:] = (c[i or 0,n,:] @ w_v[i]^T)[j*dh:(j+1)*dh]
 *            rope (rotate-half): for m < dh/2, a = pos * inv_freq[m] (theta^(-2m/dh), or as
 *              scaled by rope_scaling: kernels/attention/rope.c), times mscale (1 unless yarn):
 *              out[m]      = s (y[m] cos a - y[m+dh/2] sin a),
 *              out[m+dh/2] = s (y[m+dh/2] cos a + y[m] sin a)
 *   kvproj backward, given dk, dv (per head row; r = 1/sqrt(mean u^2 + eps), xh = u r):
 *            dy = mscale R(pos)^T dk   (the rotation's transpose: the angle negated)
 *            dgk[i,:] += dy * xh,   dxh = dy * gk[i],   du = r (dxh - xh mean_d(dxh * xh))
 *            dc[i or 0,n,:] += du @ w_k[i] + dv @ w_v[i]   (Dc = 1: summed over layers)
 *            dw_k[i] += du^T c[i or 0,n,:],  dw_v[i] += dv^T c[i or 0,n,:]
 *   attention of one query row q (head h reads kv head h / (Hq/Hkv)) over its visible keys K, V:
 *            s = scale * K q,  p = softmax(s),  o = p^T V,  lse = log sum exp(s)
 *     decode: the visible keys of request r are its ctx_lens[r] context rows then its B block rows.
 *     train:  block j of sequence s sees context positions p < anchors[s,j] then its own B rows;
 *             keep[s,j] = 0 sees nothing: o = 0, lse = -inf, no gradient anywhere.
 *     window W > 0 (sliding-window layers): the query at position i (decode ctx_lens[r] + b,
 *             train anchors[s,j] + b) keeps only the context keys p > i - W; its block's own
 *             rows stay visible, so a row always sees at least B keys.
 *     causal (SpecForge's sliding layers): query b sees its block's rows 0..b only.
 *   train backward, given do for the row (D = do . o):
 *            dp_t = do . v_t,  ds_t = p_t (dp_t - D)
 *            dq = scale sum_t ds_t k_t,  dk_t += scale ds_t q,  dv_t += p_t do
 *     accumulated over every query row (and every block) that sees key t.
 *
 * Napkin math: attention costs about 4*dh flops per (query row, head, visible key) forward and
 * twice that backward; kvproj is 2 GEMMs of N x H x Hkv*dh per draft layer. This file is the
 * oracle, not a contender: one loop nest per formula, double accumulation throughout, softmax
 * with the max subtracted so large scores cannot overflow.
 */
#include "attention/attention_ref.h"

#include <assert.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Scratch here is O(dh) or O(visible keys) doubles, tiny next to the inputs; the API has no way
 * to report a failure, and an oracle that silently produced nothing would be worse than stopping.
 */
static double *ref_scratch(int64_t n) {
    double *p = calloc((size_t)(n > 0 ? n : 1), sizeof(double));
    if (!p) abort();
    return p;
}

static double dot(int64_t n, const double *a, const double *b) {
    double acc = 0.0;
    for (int64_t i = 0; i < n; i++)
        acc += a[i] * b[i];
    return acc;
}

/* ---- attention.kvproj --------------------------------------------------------------------- */

void ft_ref_kvproj_fwd(int64_t Dc, int64_t D, int64_t N, int64_t H, int64_t Hkv, int64_t dh,
                       double eps, const double *inv_freq, double mscale, const double *c,
                       const double *w_k, const double *w_v, const double *gk, const int32_t *pos,
                       double *k, double *v) {
    assert(Dc == 1 || Dc == D);
    assert(N >= 0 && H > 0 && Hkv > 0 && dh > 0 && dh % 2 == 0);
    const int64_t half = dh / 2, E = Hkv * dh;
    double *u = ref_scratch(dh); /* one head's projected, normalised key before RoPE */

    for (int64_t i = 0; i < D; i++) {
        /* DFlash shares one context (Dc = 1) across layers; DFLARE gives each layer its own. */
        const double *ci = c + (Dc == 1 ? 0 : i) * N * H;
        const double *wk = w_k + i * E * H, *wv = w_v + i * E * H, *gki = gk + i * dh;
        for (int64_t n = 0; n < N; n++) {
            const double *cn = ci + n * H;
            for (int64_t j = 0; j < Hkv; j++) {
                double *kout = k + ((i * N + n) * Hkv + j) * dh;
                double *vout = v + ((i * N + n) * Hkv + j) * dh;
                for (int64_t d = 0; d < dh; d++) {
                    u[d] = dot(H, cn, wk + (j * dh + d) * H);
                    vout[d] = dot(H, cn, wv + (j * dh + d) * H);
                }
                double r = 1.0 / sqrt(dot(dh, u, u) / (double)dh + eps);
                for (int64_t d = 0; d < dh; d++)
                    u[d] = u[d] * r * gki[d];
                for (int64_t m = 0; m < half; m++) {
                    double ang = (double)pos[n] * inv_freq[m];
                    double cs = mscale * cos(ang), sn = mscale * sin(ang);
                    kout[m] = u[m] * cs - u[m + half] * sn;
                    kout[m + half] = u[m + half] * cs + u[m] * sn;
                }
            }
        }
    }
    free(u);
}

void ft_ref_kvproj_bwd(int64_t Dc, int64_t D, int64_t N, int64_t H, int64_t Hkv, int64_t dh,
                       double eps, const double *inv_freq, double mscale, const double *c,
                       const double *w_k, const double *w_v, const double *gk, const int32_t *pos,
                       const double *dk, const double *dv, double *dc, double *dw_k, double *dw_v,
                       double *dgk) {
    assert(Dc == 1 || Dc == D);
    assert(N >= 0 && H > 0 && Hkv > 0 && dh > 0 && dh % 2 == 0);
    const int64_t half = dh / 2, E = Hkv * dh;
    memset(dc, 0, sizeof(double) * (size_t)(Dc * N * H));
    memset(dw_k, 0, sizeof(double) * (size_t)(D * E * H));
    memset(dw_v, 0, sizeof(double) * (size_t)(D * E * H));
    memset(dgk, 0, sizeof(double) * (size_t)(D * dh));
    /* one head row: the projection u, its normalised xh, and the gradients dy (then du) */
    double *u = ref_scratch(dh), *dy = ref_scratch(dh);

    for (int64_t i = 0; i < D; i++) {
        const double *ci = c + (Dc == 1 ? 0 : i) * N * H;
        double *dci = dc + (Dc == 1 ? 0 : i) * N * H;
        const double *wk = w_k + i * E * H, *wv = w_v + i * E * H, *gki = gk + i * dh;
        double *dwk = dw_k + i * E * H, *dwv = dw_v + i * E * H, *dgki = dgk + i * dh;
        for (int64_t n = 0; n < N; n++) {
            const double *cn = ci + n * H;
            double *dcn = dci + n * H;
            for (int64_t j = 0; j < Hkv; j++) {
                const double *dkr = dk + ((i * N + n) * Hkv + j) * dh;
                const double *dvr = dv + ((i * N + n) * Hkv + j) * dh;
                for (int64_t d = 0; d < dh; d++)
                    u[d] = dot(H, cn, wk + (j * dh + d) * H);
                const double r = 1.0 / sqrt(dot(dh, u, u) / (double)dh + eps);
                /* R^T: out[m] = a cos + b sin, out[m+half] = b cos - a sin */
                for (int64_t m = 0; m < half; m++) {
                    const double ang = (double)pos[n] * inv_freq[m];
                    const double cs = cos(ang), sn = sin(ang);
                    dy[m] = mscale * (dkr[m] * cs + dkr[m + half] * sn);
                    dy[m + half] = mscale * (dkr[m + half] * cs - dkr[m] * sn);
                }
                double proj = 0.0; /* mean_d(dxh * xh) */
                for (int64_t d = 0; d < dh; d++) {
                    const double xh = u[d] * r;
                    dgki[d] += dy[d] * xh;
                    dy[d] *= gki[d]; /* now dxh */
                    proj += dy[d] * xh;
                }
                proj /= (double)dh;
                for (int64_t d = 0; d < dh; d++)
                    dy[d] = r * (dy[d] - u[d] * r * proj); /* now du */
                for (int64_t d = 0; d < dh; d++) {
                    const double *wkr = wk + (j * dh + d) * H, *wvr = wv + (j * dh + d) * H;
                    double *dwkr = dwk + (j * dh + d) * H, *dwvr = dwv + (j * dh + d) * H;
                    for (int64_t h = 0; h < H; h++) {
                        dcn[h] += dy[d] * wkr[h] + dvr[d] * wvr[h];
                        dwkr[h] += dy[d] * cn[h];
                        dwvr[h] += dvr[d] * cn[h];
                    }
                }
            }
        }
    }
    free(u);
    free(dy);
}

/* ---- one query row against its visible keys ----------------------------------------------
 * The visible keys of a row come from two buffers, the context (nc rows) then the block (nb
 * rows), both with `stride` doubles between rows (Hkv*dh: the row of the next position, same kv
 * head). key_row picks row t of that virtual concatenation without building it. */

static const double *key_row(int64_t t, int64_t nc, const double *ctx, const double *blk,
                             int64_t stride) {
    return t < nc ? ctx + t * stride : blk + (t - nc) * stride;
}

/* p[0..nc+nb) = softmax(scale * K q), o = p^T V; returns lse = log sum exp(scale * K q). */
static double attend_row(int64_t dh, double scale, const double *q, int64_t nc, const double *kc,
                         const double *vc, int64_t nb, const double *kb, const double *vb,
                         int64_t stride, double *p, double *o) {
    const int64_t n = nc + nb;
    assert(n > 0);
    double m = -INFINITY;
    for (int64_t t = 0; t < n; t++) {
        p[t] = scale * dot(dh, q, key_row(t, nc, kc, kb, stride));
        m = p[t] > m ? p[t] : m;
    }
    double sum = 0.0;
    for (int64_t t = 0; t < n; t++) {
        p[t] = exp(p[t] - m);
        sum += p[t];
    }
    for (int64_t t = 0; t < n; t++)
        p[t] /= sum;
    for (int64_t d = 0; d < dh; d++) {
        double acc = 0.0;
        for (int64_t t = 0; t < n; t++)
            acc += p[t] * key_row(t, nc, vc, vb, stride)[d];
        o[d] = acc;
    }
    return m + log(sum);
}

/* ---- attention.decode --------------------------------------------------------------------- */

/* The first context position the query at position qpos sees: qpos - W + 1 (the window holds the
 * query itself and the W - 1 positions before it), never below 0; 0 under full attention. */
int64_t ft_ref_window_lo(int64_t window, int64_t qpos) {
    assert(window >= 0);
    if (window == 0 || qpos - window + 1 < 0) return 0;
    return qpos - window + 1;
}

void ft_ref_attn_decode_fwd(int64_t R, int64_t B, int64_t Hq, int64_t Hkv, int64_t dh, double scale,
                            const double *q, const int32_t *ctx_lens, const double *k_ctx,
                            const double *v_ctx, const double *k_blk, const double *v_blk,
                            double *o, double *lse) {
    ft_ref_attn_decode_fwd_win(R, B, Hq, Hkv, dh, scale, 0, 0, q, ctx_lens, k_ctx, v_ctx, k_blk,
                               v_blk, o, lse);
}

void ft_ref_attn_decode_fwd_win(int64_t R, int64_t B, int64_t Hq, int64_t Hkv, int64_t dh,
                                double scale, int64_t window, int causal, const double *q,
                                const int32_t *ctx_lens, const double *k_ctx, const double *v_ctx,
                                const double *k_blk, const double *v_blk, double *o, double *lse) {
    assert(R >= 0 && B > 0 && Hkv > 0 && dh > 0 && Hq % Hkv == 0);
    const int64_t group = Hq / Hkv, stride = Hkv * dh;
    int64_t maxL = 0;
    for (int64_t r = 0; r < R; r++) {
        assert(ctx_lens[r] >= 0);
        maxL = ctx_lens[r] > maxL ? ctx_lens[r] : maxL;
    }
    double *p = ref_scratch(maxL + B);

    int64_t off = 0; /* first context row of request r: the prefix sum of ctx_lens */
    for (int64_t r = 0; r < R; r++) {
        const int64_t L = ctx_lens[r];
        for (int64_t b = 0; b < B; b++) {
            /* query b sits at position L + b: its window starts at lo, capped at the context end */
            int64_t lo = ft_ref_window_lo(window, L + b);
            lo = lo < L ? lo : L;
            for (int64_t h = 0; h < Hq; h++) {
                const int64_t j = h / group; /* GQA: the kv head this query head reads */
                const int64_t row = (r * B + b) * Hq + h;
                const int64_t cbase = (off + lo) * stride + j * dh, bbase = r * B * stride + j * dh;
                lse[row] = attend_row(dh, scale, q + row * dh, L - lo, k_ctx + cbase, v_ctx + cbase,
                                      causal ? b + 1 : B, k_blk + bbase, v_blk + bbase, stride, p,
                                      o + row * dh);
            }
        }
        off += L;
    }
    free(p);
}

/* ---- attention.train ---------------------------------------------------------------------- */

void ft_ref_attn_train_fwd(int64_t nseq, int64_t S, int64_t NB, int64_t B, int64_t Hq, int64_t Hkv,
                           int64_t dh, double scale, const double *q, const double *k_ctx,
                           const double *v_ctx, const double *k_blk, const double *v_blk,
                           const int32_t *anchors, const uint8_t *keep, double *o, double *lse) {
    ft_ref_attn_train_fwd_win(nseq, S, NB, B, Hq, Hkv, dh, scale, 0, 0, q, k_ctx, v_ctx, k_blk,
                              v_blk, anchors, keep, o, lse);
}

void ft_ref_attn_train_fwd_win(int64_t nseq, int64_t S, int64_t NB, int64_t B, int64_t Hq,
                               int64_t Hkv, int64_t dh, double scale, int64_t window, int causal,
                               const double *q, const double *k_ctx, const double *v_ctx,
                               const double *k_blk, const double *v_blk, const int32_t *anchors,
                               const uint8_t *keep, double *o, double *lse) {
    assert(nseq >= 0 && S >= 0 && NB >= 0 && B > 0 && Hkv > 0 && dh > 0 && Hq % Hkv == 0);
    const int64_t group = Hq / Hkv, stride = Hkv * dh;
    double *p = ref_scratch(S + B);

    for (int64_t s = 0; s < nseq; s++)
        for (int64_t jb = 0; jb < NB; jb++) {
            const int64_t blk = s * NB + jb, a = anchors[blk];
            assert(a >= 0 && a <= S);
            for (int64_t b = 0; b < B; b++)
                for (int64_t h = 0; h < Hq; h++) {
                    const int64_t row = (blk * B + b) * Hq + h, j = h / group;
                    if (!keep[blk]) {
                        /* A dropped block sees no key: the empty softmax. */
                        memset(o + row * dh, 0, (size_t)dh * sizeof(double));
                        lse[row] = -INFINITY;
                        continue;
                    }
                    /* query b sits at position a + b; its window keeps context rows [lo, a) */
                    int64_t lo = ft_ref_window_lo(window, a + b);
                    lo = lo < a ? lo : a;
                    const int64_t cbase = (s * S + lo) * stride + j * dh;
                    const int64_t bbase = blk * B * stride + j * dh;
                    lse[row] = attend_row(dh, scale, q + row * dh, a - lo, k_ctx + cbase,
                                          v_ctx + cbase, causal ? b + 1 : B, k_blk + bbase,
                                          v_blk + bbase, stride, p, o + row * dh);
                }
        }
    free(p);
}

void ft_ref_attn_train_bwd(int64_t nseq, int64_t S, int64_t NB, int64_t B, int64_t Hq, int64_t Hkv,
                           int64_t dh, double scale, const double *q, const double *k_ctx,
                           const double *v_ctx, const double *k_blk, const double *v_blk,
                           const int32_t *anchors, const uint8_t *keep, const double *dout,
                           double *dq, double *dk_ctx, double *dv_ctx, double *dk_blk,
                           double *dv_blk) {
    ft_ref_attn_train_bwd_win(nseq, S, NB, B, Hq, Hkv, dh, scale, 0, 0, q, k_ctx, v_ctx, k_blk,
                              v_blk, anchors, keep, dout, dq, dk_ctx, dv_ctx, dk_blk, dv_blk);
}

void ft_ref_attn_train_bwd_win(int64_t nseq, int64_t S, int64_t NB, int64_t B, int64_t Hq,
                               int64_t Hkv, int64_t dh, double scale, int64_t window, int causal,
                               const double *q, const double *k_ctx, const double *v_ctx,
                               const double *k_blk, const double *v_blk, const int32_t *anchors,
                               const uint8_t *keep, const double *dout, double *dq,
                               double *dk_ctx, double *dv_ctx, double *dk_blk, double *dv_blk) {
    assert(nseq >= 0 && S >= 0 && NB >= 0 && B > 0 && Hkv > 0 && dh > 0 && Hq % Hkv == 0);
    const int64_t group = Hq / Hkv, stride = Hkv * dh;
    double *p = ref_scratch(S + B);
    double *orow = ref_scratch(dh); /* the forward output of the row, recomputed */
    /* Every gradient is a sum over the query rows that see the key (or own the query): start at
     * zero so keys nobody sees, and dropped blocks, end with exactly 0. */
    memset(dq, 0, (size_t)(nseq * NB * B * Hq * dh) * sizeof(double));
    memset(dk_ctx, 0, (size_t)(nseq * S * stride) * sizeof(double));
    memset(dv_ctx, 0, (size_t)(nseq * S * stride) * sizeof(double));
    memset(dk_blk, 0, (size_t)(nseq * NB * B * stride) * sizeof(double));
    memset(dv_blk, 0, (size_t)(nseq * NB * B * stride) * sizeof(double));

    for (int64_t s = 0; s < nseq; s++)
        for (int64_t jb = 0; jb < NB; jb++) {
            const int64_t blk = s * NB + jb, a = anchors[blk];
            assert(a >= 0 && a <= S);
            if (!keep[blk]) continue;
            for (int64_t b = 0; b < B; b++)
                for (int64_t h = 0; h < Hq; h++) {
                    const int64_t row = (blk * B + b) * Hq + h, j = h / group;
                    /* the row's visible context rows [lo, a), nc of them (see the forward) */
                    int64_t lo = ft_ref_window_lo(window, a + b);
                    lo = lo < a ? lo : a;
                    const int64_t nc = a - lo, nb = causal ? b + 1 : B; /* keys it sees */
                    const int64_t cbase = (s * S + lo) * stride + j * dh;
                    const int64_t bbase = blk * B * stride + j * dh;
                    const double *qr = q + row * dh, *dor = dout + row * dh;
                    double *dqr = dq + row * dh;
                    attend_row(dh, scale, qr, nc, k_ctx + cbase, v_ctx + cbase, nb, k_blk + bbase,
                               v_blk + bbase, stride, p, orow);
                    /* sum_t p_t (do . v_t) = do . o: the softmax Jacobian's rank-one part. */
                    const double Dsum = dot(dh, dor, orow);
                    for (int64_t t = 0; t < nc + nb; t++) {
                        const double *kt = key_row(t, nc, k_ctx + cbase, k_blk + bbase, stride);
                        const double *vt = key_row(t, nc, v_ctx + cbase, v_blk + bbase, stride);
                        double *dkt = t < nc ? dk_ctx + cbase + t * stride
                                             : dk_blk + bbase + (t - nc) * stride;
                        double *dvt = t < nc ? dv_ctx + cbase + t * stride
                                             : dv_blk + bbase + (t - nc) * stride;
                        const double ds = p[t] * (dot(dh, dor, vt) - Dsum);
                        for (int64_t d = 0; d < dh; d++) {
                            dqr[d] += scale * ds * kt[d];
                            dkt[d] += scale * ds * qr[d];
                            dvt[d] += p[t] * dor[d];
                        }
                    }
                }
        }
    free(orow);
    free(p);
}
