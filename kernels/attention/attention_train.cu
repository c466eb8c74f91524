/* attention_train.cu: the kernels of attention.train on CUDA (SPEC.md attention.train); the host
 * side that sizes and sequences them is kernels/attention/train_cuda.c.
 *
 *   block j of sequence s sees context positions p < anchors[s,j] and its own B keys; keep = 0:
 *   o = 0, lse = -inf, no gradient.  s_t = scale q.k_t, o = softmax(s) V, lse = log sum exp(s).
 *   win = W > 0 (a sliding-window layer): query b (position anchor + b) keeps only the context
 *   keys p > anchor + b - W. A CTA's walk starts at query 0's window, max(0, anchor - W + 1), so
 *   the keys before it are neither loaded nor scored (a block costs O(W + B) keys whatever its
 *   anchor); later queries mask the few keys at its start they do not see (score -inf, p = 0).
 *   A row whose tile holds no key it sees keeps its running max at -inf and takes its
 *   exponentials against 0 (exp(-inf) = 0, never -inf - -inf). attn_bwd_kv skips the blocks
 *   whose windows end before its tile. causal = 1: query b sees its block's keys 0..b only
 *   (masked the same way; attn_bwd_kv, over context keys alone, does not change).
 *
 * Napkin math at qwen3-8b train (S 3072, NB 512, B 16, Hq 32, Hkv 8, dh 128), bf16: the anchors
 * average S/2, so a block's queries see ~1550 keys; 4 dh B Hq per visible key is ~2.6e11 FLOP
 * forward, ~3x that backward. K/V of one sequence (3072 x 8 x 128 x 2 B x 2 = 12.6 MB) stay in
 * L2 (60 MiB on an H200), so re-reading the context prefix once per block costs L2 bandwidth,
 * not HBM: the work is compute, and the query tile decides how often each K/V tile is reused.
 *
 * The query tile follows the DFlash block structure: one CTA takes one block (blockIdx.x = s *
 * NB + j) and, with the GQA group packed (npk = G = Hq/Hkv heads), the B x G query rows that share
 * kv head blockIdx.y, so each K/V tile loaded into shared memory serves B*G rows (64 at qwen3);
 * unpacked (npk = 1) one head's B rows per CTA: G times the CTAs and G times the K/V traffic.
 * Rows are b-major (row r = b * npk + g), so a CTA's rows of q are npk*dh contiguous elements per
 * b. The CTA walks only its visible keys, the context prefix [0, anchor) then the B block keys, as
 * one virtual sequence cut into tiles of KT keys (a tile may straddle the two buffers); a dropped
 * block (keep = 0) writes its zeros and leaves at once.
 *
 * Forward (attn_fwd): per tile, each warp takes rows r = warp, warp + W, ...: lane t computes the
 * score of key t (q row broadcast from shared memory, K rows padded to dh + 1 floats: no bank
 * conflicts), then the online softmax (running max m, sum l) and o = alpha o + p V with lanes over
 * dh. o, m, l live in shared memory (a warp owns its rows: no barrier between rows), so nothing
 * in registers scales with dh, the tile or the rows. With a backward the log-sum-exp is also
 * written in float32 to scratch (the recomputation needs it exactly; bf16 would shift every p).
 *
 * Backward, the usual recomputation (FlashAttention-2): D_r = do_r . o_r, p_t = exp(s_t - lse),
 * ds_t = p_t (do . v_t - D_r), dq = scale sum_t ds_t k_t, dk_t += scale ds_t q, dv_t += p_t do.
 *   attn_bwd_q   query-major, the forward's CTAs: dq owned (accumulated in shared memory), the
 *                block keys' dk/dv owned when the group is packed (the only CTA that sees them),
 *                else added with atomics. P and dS of a tile go to shared memory and the tile's
 *                dk/dv are a B*G-deep sum per (key, dim) element.
 *   Context dk/dv are summed over every block that sees the position, two ways (tunable `dkv`):
 *     keymajor   attn_bwd_kv owns a tile of KT context keys of one kv head (grid nseq*ceil(S/KT)
 *                x Hkv) and walks the blocks of its sequence whose anchor passes the tile, in
 *                order, recomputing their P and dS against its keys from q, do, lse and D (D
 *                saved by attn_bwd_q): deterministic, no atomics, no scratch beyond lse and D;
 *                costs a second recomputation of the context scores (the q pass skips its
 *                dk/dv sum for context tiles).
 *     atomic     attn_bwd_q adds each context tile's dk/dv with float atomics into float32
 *                accumulators (the outputs themselves with f32 storage, zeroed; float32 scratch
 *                and attn_cvt with bf16): one pass, order-dependent rounding, and contention on
 *                the early positions every block sees.
 *   (Per-block partials with a deterministic reduction are not offered: nseq*NB*S*Hkv*dh floats,
 *   6.4 GB at qwen3-8b.)
 *
 * Defines: FT_BF16 (storage: 1 bf16, else float; arithmetic float32), FT_DH (head dim: the
 * unrolled dot products, and with bf16 and dh % 16 == 0 the tensor-core kernels attn_fwd_mma and
 * attn_bwd_q_mma). The tile length, warps per CTA, packing, the dkv strategy and the core are
 * run-time choices (arguments, dynamic shared memory, or which kernel is launched), so one module
 * serves every config of a (dtype, dh).
 */
#include "ft_cuda.h"

#ifndef FT_DH
#define FT_DH 128
#endif
#define DH  FT_DH
#define DHP (FT_DH + 1) /* padded K/V rows in shared memory */

static_assert(FT_DH >= 1 && FT_DH <= 512, "FT_DH: 1 to 512");


__device__ __forceinline__ float ld1(const float *p) { return *p; }
__device__ __forceinline__ float ld1(const __nv_bfloat16 *p) { return __bfloat162float(*p); }
__device__ __forceinline__ void st1(float *p, float v) { *p = v; }
__device__ __forceinline__ void st1(__nv_bfloat16 *p, float v) { *p = __float2bfloat16(v); }

/* Dot product of a broadcast row a with a padded shared row b. */
__device__ __forceinline__ float dotdh(const float *a, const float *b) {
    float acc = 0.f;
#pragma unroll 8
    for (int d = 0; d < DH; d++)
        acc = fmaf(a[d], b[d], acc);
    return acc;
}

/* The geometry of one (block, kv head or head) CTA. */
struct cta {
    int s, blk, a, n, R, npk, G, h0, kvh;
    int k0, win; /* the first key walked (query 0's window start), the window (0: none) */
    int causal;  /* query b sees block keys 0..b only */
};

/* The first context position query b of a block with anchor a sees under window win. */
__device__ __forceinline__ int window_lo(int a, int b, int win) {
    const int lo = win > 0 ? a + b - win + 1 : 0;
    return lo < 0 ? 0 : lo > a ? a : lo;
}

__device__ __forceinline__ cta cta_of(const int *anchors, int NB, int B, int Hq, int Hkv, int npk,
                                      int win, int causal) {
    cta c;
    c.blk = blockIdx.x;
    c.s = c.blk / NB;
    c.a = anchors[c.blk];
    c.n = c.a + B;
    c.win = win;
    c.causal = causal;
    c.k0 = window_lo(c.a, 0, win);
    c.npk = npk;
    c.R = B * npk;
    c.G = Hq / Hkv;
    c.h0 = blockIdx.y * npk;
    c.kvh = c.h0 / c.G;
    return c;
}

/* Does CTA row r (query b = r / npk) see key tg of the walk? Context keys from its window's
 * start; block keys all, or under causal those at offsets 0..b. */
__device__ __forceinline__ bool row_sees(const cta &c, int r, int tg) {
    if (tg >= c.a) return !c.causal || tg - c.a <= r / c.npk;
    return c.win == 0 || tg > c.a + r / c.npk - c.win;
}

/* Global row index (blk*B + b)*Hq + h of CTA row r. */
__device__ __forceinline__ long long grow(const cta &c, int r, int B, int Hq) {
    return ((long long)c.blk * B + r / c.npk) * Hq + c.h0 + r % c.npk;
}

/* Load keys [t0, t0 + KT) of the virtual sequence (context [0, a), then the block's B keys) of
 * kv head kvh into padded shared rows, between two barriers (the previous tile is done with, the
 * new one is whole); keys past n are zero. Returns how many of the tile's keys are real. */
__device__ __forceinline__ int load_kv(float *ks, float *vs, const st_t *k_ctx, const st_t *v_ctx,
                                        const st_t *k_blk, const st_t *v_blk, const cta &c, int t0,
                                        int KT, int S, int B, int Hkv) {
    const int nt = blockDim.x;
    __syncthreads();
    for (int i = threadIdx.x; i < KT * DH; i += nt) {
        int t = i / DH, d = i % DH, tg = t0 + t;
        float kv = 0.f, vv = 0.f;
        if (tg < c.a) {
            long long off = (((long long)c.s * S + tg) * Hkv + c.kvh) * DH + d;
            kv = ld1(k_ctx + off);
            vv = ld1(v_ctx + off);
        } else if (tg < c.n) {
            long long off = (((long long)c.blk * B + (tg - c.a)) * Hkv + c.kvh) * DH + d;
            kv = ld1(k_blk + off);
            vv = ld1(v_blk + off);
        }
        ks[t * DHP + d] = kv;
        vs[t * DHP + d] = vv;
    }
    __syncthreads();
    return c.n - t0 < KT ? c.n - t0 : KT;
}

/* A dropped block's forward: o zero, lse (and lse32 when asked) -inf. */
__device__ __forceinline__ void fwd_dropped(const cta &c, st_t *o, st_t *lse, float *lse32, int B,
                                            int Hq) {
    const int nt = blockDim.x;
    for (int i = threadIdx.x; i < c.R * DH; i += nt)
        st1(o + grow(c, i / DH, B, Hq) * DH + i % DH, 0.f);
    for (int r = threadIdx.x; r < c.R; r += nt) {
        st1(lse + grow(c, r, B, Hq), -INFINITY);
        if (lse32) lse32[grow(c, r, B, Hq)] = -INFINITY;
    }
}

/* ==== forward ================================================================================
 * Shared memory (floats): qs R*DH (q * scale), os R*DH, ks KT*DHP, vs KT*DHP, ps W*KT, ms R, ls R.
 */
/* The parameters of attn_fwd and of attn_fwd_mma, its tensor-core variant. */
#define ATTN_FWD_PARAMS                                                                            \
    const st_t *__restrict__ q, const st_t *__restrict__ k_ctx, const st_t *__restrict__ v_ctx,    \
        const st_t *__restrict__ k_blk, const st_t *__restrict__ v_blk,                            \
        const int *__restrict__ anchors, const uint8_t *__restrict__ keep, st_t *__restrict__ o,   \
        st_t *__restrict__ lse, float *__restrict__ lse32, int S, int NB, int B, int Hq, int Hkv,  \
        int npk, int KT, float scale, int win, int causal

#if FT_KEEP(attn_fwd)
extern "C" __global__ void __launch_bounds__(256) attn_fwd(ATTN_FWD_PARAMS) {
    FT_DYNAMIC_SMEM(float, sm);
    const cta c = cta_of(anchors, NB, B, Hq, Hkv, npk, win, causal);
    const int R = c.R, W = blockDim.x / 32, warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int nt = blockDim.x;
    if (!keep[c.blk]) return fwd_dropped(c, o, lse, lse32, B, Hq);
    float *qs = sm, *os = qs + R * DH, *ks = os + R * DH, *vs = ks + KT * DHP, *ps = vs + KT * DHP;
    float *ms = ps + W * KT, *ls = ms + R;
    for (int i = threadIdx.x; i < R * DH; i += nt) {
        qs[i] = ld1(q + grow(c, i / DH, B, Hq) * DH + i % DH) * scale;
        os[i] = 0.f;
    }
    for (int r = threadIdx.x; r < R; r += nt) {
        ms[r] = -INFINITY;
        ls[r] = 0.f;
    }
    float *pw = ps + warp * KT;
    for (int t0 = c.k0; t0 < c.n; t0 += KT) {
        /* load_kv's first barrier also puts the prologue's writes (ms, ls) before the tile's use */
        const int nk = load_kv(ks, vs, k_ctx, v_ctx, k_blk, v_blk, c, t0, KT, S, B, Hkv);
        for (int r = warp; r < R; r += W) {
            const float *qr = qs + r * DH;
            float mx = -INFINITY;
            for (int t = lane; t < nk; t += 32) {
                float sc = row_sees(c, r, t0 + t) ? dotdh(qr, ks + t * DHP) : -INFINITY;
                pw[t] = sc;
                mx = fmaxf(mx, sc);
            }
            mx = ft_warp_max(mx);
            const float m_old = ms[r], m_new = fmaxf(m_old, mx);
            const float m_ref = m_new == -INFINITY ? 0.f : m_new; /* no key seen yet */
            const float alpha = expf(m_old - m_ref);
            float sum = 0.f;
            for (int t = lane; t < nk; t += 32) {
                float p = expf(pw[t] - m_ref);
                pw[t] = p;
                sum += p;
            }
            sum = ft_warp_sum(sum);
            __syncwarp();
            float *orow = os + r * DH;
            for (int d = lane; d < DH; d += 32) {
                float acc = orow[d] * alpha;
                for (int t = 0; t < nk; t++)
                    acc = fmaf(pw[t], vs[t * DHP + d], acc);
                orow[d] = acc;
            }
            __syncwarp();
            if (lane == 0) {
                ms[r] = m_new;
                ls[r] = ls[r] * alpha + sum;
            }
            __syncwarp();
        }
    }
    __syncthreads();
    for (int i = threadIdx.x; i < R * DH; i += nt) {
        int r = i / DH;
        st1(o + grow(c, r, B, Hq) * DH + i % DH, os[i] / ls[r]);
    }
    for (int r = threadIdx.x; r < R; r += nt) {
        float v = ms[r] + logf(ls[r]);
        st1(lse + grow(c, r, B, Hq), v);
        if (lse32) lse32[grow(c, r, B, Hq)] = v;
    }
}
FT_KERNEL_EXPORT(attn_fwd)
#endif

/* ==== forward on the tensor cores (core = mma; bf16 storage, dh a multiple of 16) =============
 * Each warp owns one 16-row tile of the CTA's rows (rows past R are zero: R padded to Rp, a
 * multiple of 16), its q fragments held in registers for the whole walk. Per 16 keys of a K/V
 * tile: S = Q K^T as 2 n-tiles of 8 keys x dh/16 k-steps of mma.sync m16n8k16 (bf16 in, float32
 * accumulate; the staged floats are exact bf16 values, so packing them loses nothing), the online
 * softmax on the accumulator fragments (a row is spread over the 4 lanes of a quad: two
 * shuffles), then O += P V with P's accumulators repacked in place as the A fragment (rounded to
 * bf16, as FlashAttention-2 does) and V from shared memory as B: dh/8 n-tiles of 4 floats per
 * lane (64 registers at dh 128). Fragments are packed from the float tiles in shared memory
 * (K/V staged once for both kernels) rather than loaded by ldmatrix, which needs bf16 tiles.
 * Shared memory (floats): qs Rp*DH, ks, vs KT*DHP. */
#if FT_BF16 && FT_DH % 16 == 0
#define NKS (DH / 16) /* k-steps of S = Q K^T */
#define NDT (DH / 8)  /* n-tiles of O */

/* The A fragments (m16n8k16, bf16) of rows row0 .. row0 + 15 of a float tile with rows of DH. */
__device__ __forceinline__ void frag_a(uint32_t (*f)[4], const float *base, int row0, int g,
                                       int tq) {
    const float *r0 = base + (row0 + g) * DH + tq * 2, *r1 = r0 + 8 * DH;
#pragma unroll
    for (int k = 0; k < NKS; k++) {
        f[k][0] = ft_pack_bf16x2(r0[k * 16], r0[k * 16 + 1]);
        f[k][1] = ft_pack_bf16x2(r1[k * 16], r1[k * 16 + 1]);
        f[k][2] = ft_pack_bf16x2(r0[k * 16 + 8], r0[k * 16 + 9]);
        f[k][3] = ft_pack_bf16x2(r1[k * 16 + 8], r1[k * 16 + 9]);
    }
}

/* acc[h] (16 rows x 8 keys, h = 0, 1) = A (16 x dh fragments) x rows c0 + 8h .. of t (padded). */
__device__ __forceinline__ void mma_rows(float (*acc)[4], const uint32_t (*a)[4], const float *t,
                                         int c0, int g, int tq) {
#pragma unroll
    for (int h = 0; h < 2; h++) {
        acc[h][0] = acc[h][1] = acc[h][2] = acc[h][3] = 0.f;
        const float *kr = t + (c0 + h * 8 + g) * DHP + tq * 2;
#pragma unroll
        for (int k = 0; k < NKS; k++) {
            uint32_t b[2] = {ft_pack_bf16x2(kr[k * 16], kr[k * 16 + 1]),
                             ft_pack_bf16x2(kr[k * 16 + 8], kr[k * 16 + 9])};
            ft_mma_m16n8k16_bf16(acc[h], a[k], b, acc[h]);
        }
    }
}

/* For each of the thread's four keys of the 16-key slice at c0 of the tile (accumulator element
 * [h][e] of row row0 + g, [h][2 + e] of row row0 + g + 8; t its index in the tile), f(h, e, t,
 * ok0, ok1) with whether each of the two rows sees it (a key past nk: neither). */
template <typename F>
__device__ __forceinline__ void each_key(const cta &c, int t0, int c0, int nk, int row0, int g,
                                         int tq, F &&f) {
#pragma unroll
    for (int h = 0; h < 2; h++)
#pragma unroll
        for (int e = 0; e < 2; e++) {
            const int t = c0 + h * 8 + tq * 2 + e;
            const bool ok = t < nk;
            const bool ok0 = ok && row_sees(c, row0 + g, t0 + t);
            const bool ok1 = ok && row_sees(c, row0 + g + 8, t0 + t);
            f(h, e, t, ok0, ok1);
        }
}

/* acc[j] (16 rows x 8 columns, j < NDT) += P x rows c0 .. c0 + 15 of t (padded, the rows as the
 * B operand; dh/8 n-tiles of 4 floats): P, a 16 x 16 (keys) tile held in accumulator fragments p
 * (mma_rows' layout), repacked in registers as the A fragment (rounded to bf16). */
__device__ __forceinline__ void mma_acc(float (*acc)[4], const float (*p)[4], const float *t,
                                        int c0, int g, int tq) {
    const uint32_t a[4] = {ft_pack_bf16x2(p[0][0], p[0][1]), ft_pack_bf16x2(p[0][2], p[0][3]),
                           ft_pack_bf16x2(p[1][0], p[1][1]), ft_pack_bf16x2(p[1][2], p[1][3])};
    const float *t0 = t + (c0 + tq * 2) * DHP + g;
#pragma unroll
    for (int j = 0; j < NDT; j++) {
        const float *tj = t0 + j * 8;
        uint32_t b[2] = {ft_pack_bf16x2(tj[0], tj[DHP]), ft_pack_bf16x2(tj[8 * DHP], tj[9 * DHP])};
        ft_mma_m16n8k16_bf16(acc[j], a, b, acc[j]);
    }
}

/* Store a warp's 16-row tile of accumulators (acc[j] as mma_acc leaves it: elements 0, 1 in row
 * r0 = row0 + g, 2, 3 in row r0 + 8, at columns j * 8 + tq * 2) into the CTA's rows of dst, each
 * value as f(v, h) makes it (h: 0 for row r0, 1 for row r0 + 8); rows past R are padding. */
template <typename F>
__device__ __forceinline__ void st_tile(const cta &c, st_t *dst, const float (*acc)[4], int r0,
                                        int tq, int R, int B, int Hq, F &&f) {
    const int r1 = r0 + 8;
#pragma unroll
    for (int j = 0; j < NDT; j++) {
        const int col = j * 8 + tq * 2;
        if (r0 < R) {
            st_t *p = dst + grow(c, r0, B, Hq) * DH + col;
            st1(p, f(acc[j][0], 0));
            st1(p + 1, f(acc[j][1], 0));
        }
        if (r1 < R) {
            st_t *p = dst + grow(c, r1, B, Hq) * DH + col;
            st1(p, f(acc[j][2], 1));
            st1(p + 1, f(acc[j][3], 1));
        }
    }
}

#if FT_KEEP(attn_fwd_mma)
extern "C" __global__ void __launch_bounds__(256) attn_fwd_mma(ATTN_FWD_PARAMS) {
    FT_DYNAMIC_SMEM(float, sm);
    const cta c = cta_of(anchors, NB, B, Hq, Hkv, npk, win, causal);
    const int R = c.R, warp = threadIdx.x / 32, lane = threadIdx.x % 32, nt = blockDim.x;
    if (!keep[c.blk]) return fwd_dropped(c, o, lse, lse32, B, Hq);
    const int Rp = (R + 15) & ~15;
    float *qs = sm, *ks = qs + Rp * DH, *vs = ks + KT * DHP;
    for (int i = threadIdx.x; i < Rp * DH; i += nt) {
        const int r = i / DH;
        qs[i] = r < R ? ld1(q + grow(c, r, B, Hq) * DH + i % DH) : 0.f;
    }
    __syncthreads();
    const int g = lane >> 2, tq = lane & 3, row0 = warp * 16;
    const bool active = row0 < Rp; /* uniform over the warp */
    uint32_t qf[NKS][4];
    float oacc[NDT][4];
    float m0 = -INFINITY, m1 = -INFINITY, l0 = 0.f, l1 = 0.f;
    if (active) {
        frag_a(qf, qs, row0, g, tq);
#pragma unroll
        for (int j = 0; j < NDT; j++)
            oacc[j][0] = oacc[j][1] = oacc[j][2] = oacc[j][3] = 0.f;
    }
    for (int t0 = c.k0; t0 < c.n; t0 += KT) {
        const int nk = load_kv(ks, vs, k_ctx, v_ctx, k_blk, v_blk, c, t0, KT, S, B, Hkv);
        if (!active) continue;
        for (int c0 = 0; c0 < nk; c0 += 16) {
            float sacc[2][4];
            mma_rows(sacc, qf, ks, c0, g, tq);
            /* Scale and mask (keys past nk), the rows' maxima over the quad. */
            float mx0 = -INFINITY, mx1 = -INFINITY;
            each_key(c, t0, c0, nk, row0, g, tq, [&](int h, int e, int, bool ok0, bool ok1) {
                sacc[h][e] = ok0 ? sacc[h][e] * scale : -INFINITY;
                sacc[h][2 + e] = ok1 ? sacc[h][2 + e] * scale : -INFINITY;
                mx0 = fmaxf(mx0, sacc[h][e]);
                mx1 = fmaxf(mx1, sacc[h][2 + e]);
            });
            mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffffu, mx0, 1));
            mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffffu, mx0, 2));
            mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffffu, mx1, 1));
            mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffffu, mx1, 2));
            /* a row that has seen no key keeps max -inf: its exponentials are taken against 0 */
            const float mx0n = fmaxf(m0, mx0), mx1n = fmaxf(m1, mx1);
            const float mn0 = mx0n == -INFINITY ? 0.f : mx0n, mn1 = mx1n == -INFINITY ? 0.f : mx1n;
            const float a0 = expf(m0 - mn0), a1 = expf(m1 - mn1);
            float s0 = 0.f, s1 = 0.f;
#pragma unroll
            for (int h = 0; h < 2; h++)
#pragma unroll
                for (int e = 0; e < 2; e++) {
                    sacc[h][e] = expf(sacc[h][e] - mn0);
                    sacc[h][2 + e] = expf(sacc[h][2 + e] - mn1);
                    s0 += sacc[h][e];
                    s1 += sacc[h][2 + e];
                }
            l0 = l0 * a0 + s0;
            l1 = l1 * a1 + s1;
            m0 = mx0n;
            m1 = mx1n;
            /* O rescaled to the new maxima, then O += P V. */
#pragma unroll
            for (int j = 0; j < NDT; j++) {
                oacc[j][0] *= a0;
                oacc[j][1] *= a0;
                oacc[j][2] *= a1;
                oacc[j][3] *= a1;
            }
            mma_acc(oacc, sacc, vs, c0, g, tq);
        }
    }
    if (!active) return;
    l0 += __shfl_xor_sync(0xffffffffu, l0, 1);
    l0 += __shfl_xor_sync(0xffffffffu, l0, 2);
    l1 += __shfl_xor_sync(0xffffffffu, l1, 1);
    l1 += __shfl_xor_sync(0xffffffffu, l1, 2);
    const int r0 = row0 + g, r1 = r0 + 8;
    st_tile(c, o, oacc, r0, tq, R, B, Hq, [&](float v, int h) { return v / (h ? l1 : l0); });
    if (tq == 0) {
        if (r0 < R) {
            const float v = m0 + logf(l0);
            st1(lse + grow(c, r0, B, Hq), v);
            if (lse32) lse32[grow(c, r0, B, Hq)] = v;
        }
        if (r1 < R) {
            const float v = m1 + logf(l1);
            st1(lse + grow(c, r1, B, Hq), v);
            if (lse32) lse32[grow(c, r1, B, Hq)] = v;
        }
    }
}
FT_KERNEL_EXPORT(attn_fwd_mma)
#endif
#endif

/* ==== backward, query-major ==================================================================
 * Shared memory (floats): qs, dos, dqs R*DH each, ks, vs KT*DHP, P, dS R*KT, Ds, lses R.
 * mode bits: 1 context dk/dv added into acc_kc/acc_vc with atomics (else left to attn_bwd_kv,
 * which reads D from Dbuf); 2 block dk/dv added into acc_kb/acc_vb with atomics (npk < G), else
 * written to dk_blk/dv_blk. */
enum { BQ_CTX_ATOMIC = 1, BQ_BLK_ATOMIC = 2 };

/* A dropped block's query-major backward: dq zero, and the block's dk/dv zero where this CTA
 * writes them (not added with atomics). */
__device__ __forceinline__ void bwd_q_dropped(const cta &c, st_t *dq, st_t *dk_blk, st_t *dv_blk,
                                              int B, int Hq, int Hkv, int mode) {
    const int nt = blockDim.x;
    for (int i = threadIdx.x; i < c.R * DH; i += nt)
        st1(dq + grow(c, i / DH, B, Hq) * DH + i % DH, 0.f);
    if (mode & BQ_BLK_ATOMIC) return;
    for (int i = threadIdx.x; i < B * DH; i += nt) {
        long long off = (((long long)c.blk * B + i / DH) * Hkv + c.kvh) * DH + i % DH;
        st1(dk_blk + off, 0.f);
        st1(dv_blk + off, 0.f);
    }
}

/* A tile's dk/dv from its P and dS (R x KT in shared memory), summed over the CTA's rows: context
 * keys added with atomics (BQ_CTX_ATOMIC; else skipped: attn_bwd_kv makes them), block keys
 * written (the CTA owns them) or added (BQ_BLK_ATOMIC). */
__device__ __forceinline__ void tile_kv(const cta &c, const float *qs, const float *dos,
                                        const float *P, const float *dS, int t0, int nk, int R,
                                        int KT, int S, int B, int Hkv, float scale, int mode,
                                        st_t *dk_blk, st_t *dv_blk, float *acc_kc, float *acc_vc,
                                        float *acc_kb, float *acc_vb) {
    for (int i = threadIdx.x; i < nk * DH; i += blockDim.x) {
        const int t = i / DH, d = i % DH, tg = t0 + t;
        if (tg < c.a && !(mode & BQ_CTX_ATOMIC)) continue;
        float dk = 0.f, dv = 0.f;
        for (int r = 0; r < R; r++) {
            dk = fmaf(dS[r * KT + t], qs[r * DH + d], dk);
            dv = fmaf(P[r * KT + t], dos[r * DH + d], dv);
        }
        dk *= scale;
        if (tg < c.a) {
            long long off = (((long long)c.s * S + tg) * Hkv + c.kvh) * DH + d;
            atomicAdd(acc_kc + off, dk);
            atomicAdd(acc_vc + off, dv);
        } else {
            long long off = (((long long)c.blk * B + (tg - c.a)) * Hkv + c.kvh) * DH + d;
            if (mode & BQ_BLK_ATOMIC) {
                atomicAdd(acc_kb + off, dk);
                atomicAdd(acc_vb + off, dv);
            } else {
                st1(dk_blk + off, dk);
                st1(dv_blk + off, dv);
            }
        }
    }
}

/* The backward's row terms, a warp per row: D_r = do_r . o_r and the row's logsumexp, into
 * shared memory (and D_r to Dbuf when the caller keeps it). */
__device__ __forceinline__ void row_deltas(const cta &c, const st_t *o, const st_t *dout,
                                           const float *lse32, float *Ds, float *lses, float *Dbuf,
                                           int B, int Hq) {
    const int W = blockDim.x / 32, warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    for (int r = warp; r < c.R; r += W) {
        const long long g = grow(c, r, B, Hq);
        float acc = 0.f;
        for (int d = lane; d < DH; d += 32)
            acc = fmaf(ld1(dout + g * DH + d), ld1(o + g * DH + d), acc);
        acc = ft_warp_sum(acc);
        if (lane == 0) {
            Ds[r] = acc;
            lses[r] = lse32[g];
            if (Dbuf) Dbuf[g] = acc;
        }
    }
}

/* The parameters of attn_bwd_q and of attn_bwd_q_mma, its tensor-core variant. */
#define ATTN_BWD_Q_PARAMS                                                                          \
    const st_t *__restrict__ q, const st_t *__restrict__ k_ctx, const st_t *__restrict__ v_ctx,    \
        const st_t *__restrict__ k_blk, const st_t *__restrict__ v_blk,                            \
        const int *__restrict__ anchors, const uint8_t *__restrict__ keep,                         \
        const st_t *__restrict__ o, const float *__restrict__ lse32,                               \
        const st_t *__restrict__ dout, st_t *__restrict__ dq, st_t *__restrict__ dk_blk,           \
        st_t *__restrict__ dv_blk, float *acc_kc, float *acc_vc, float *acc_kb, float *acc_vb,     \
        float *__restrict__ Dbuf, int S, int NB, int B, int Hq, int Hkv, int npk, int KT,          \
        float scale, int mode, int win, int causal

#if FT_KEEP(attn_bwd_q)
extern "C" __global__ void __launch_bounds__(256) attn_bwd_q(ATTN_BWD_Q_PARAMS) {
    FT_DYNAMIC_SMEM(float, sm);
    const cta c = cta_of(anchors, NB, B, Hq, Hkv, npk, win, causal);
    const int R = c.R, W = blockDim.x / 32, warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int nt = blockDim.x;
    if (!keep[c.blk]) return bwd_q_dropped(c, dq, dk_blk, dv_blk, B, Hq, Hkv, mode);
    float *qs = sm, *dos = qs + R * DH, *dqs = dos + R * DH, *ks = dqs + R * DH;
    float *vs = ks + KT * DHP, *P = vs + KT * DHP, *dS = P + R * KT, *Ds = dS + R * KT;
    float *lses = Ds + R;
    for (int i = threadIdx.x; i < R * DH; i += nt) {
        long long off = grow(c, i / DH, B, Hq) * DH + i % DH;
        qs[i] = ld1(q + off);
        dos[i] = ld1(dout + off);
        dqs[i] = 0.f;
    }
    row_deltas(c, o, dout, lse32, Ds, lses, Dbuf, B, Hq);
    for (int t0 = c.k0; t0 < c.n; t0 += KT) {
        const int nk = load_kv(ks, vs, k_ctx, v_ctx, k_blk, v_blk, c, t0, KT, S, B, Hkv);
        /* The tile's dk/dv are needed here for its block keys, and for all with atomics. */
        const int want_kv = (mode & BQ_CTX_ATOMIC) || t0 + nk > c.a;
        for (int r = warp; r < R; r += W) {
            const float *qr = qs + r * DH, *dor = dos + r * DH;
            const float lr = lses[r], Dr = Ds[r];
            for (int t = lane; t < KT; t += 32) {
                float p = 0.f, ds = 0.f;
                if (t < nk && row_sees(c, r, t0 + t)) {
                    p = expf(scale * dotdh(qr, ks + t * DHP) - lr);
                    ds = p * (dotdh(dor, vs + t * DHP) - Dr);
                }
                P[r * KT + t] = p;
                dS[r * KT + t] = ds;
            }
            __syncwarp();
            float *dqr = dqs + r * DH;
            for (int d = lane; d < DH; d += 32) {
                float acc = 0.f;
                for (int t = 0; t < nk; t++)
                    acc = fmaf(dS[r * KT + t], ks[t * DHP + d], acc);
                dqr[d] += scale * acc;
            }
            __syncwarp();
        }
        if (!want_kv) continue;
        __syncthreads();
        tile_kv(c, qs, dos, P, dS, t0, nk, R, KT, S, B, Hkv, scale, mode, dk_blk, dv_blk, acc_kc,
                acc_vc, acc_kb, acc_vb);
    }
    __syncthreads();
    for (int i = threadIdx.x; i < R * DH; i += nt)
        st1(dq + grow(c, i / DH, B, Hq) * DH + i % DH, dqs[i]);
}
FT_KERNEL_EXPORT(attn_bwd_q)
#endif

/* ==== backward, query-major, on the tensor cores (core = mma) ================================
 * As attn_bwd_q, a warp per 16-row tile with its q and do fragments in registers: per 16 keys,
 * S = Q K^T and dP = dO V^T (V rows as the B operand, like K), P = exp(scale S - lse) and
 * dS = P (dP - D) on the accumulator fragments, dQ += dS K (dS repacked as the A fragment, K as
 * B, transposed by the packing: dh/8 n-tiles of 4 floats). P and dS also go to shared memory,
 * where tile_kv sums the tile's dk/dv over the rows on the CUDA cores (the sum runs across the
 * warps' row tiles). Padded rows have q = do = 0 and lse = +inf: P = dS = 0.
 * Shared memory (floats): qs, dos Rp*DH, ks, vs KT*DHP, P, dS Rp*KT, Ds, lses Rp. */
#if FT_BF16 && FT_DH % 16 == 0
#if FT_KEEP(attn_bwd_q_mma)
extern "C" __global__ void __launch_bounds__(256) attn_bwd_q_mma(ATTN_BWD_Q_PARAMS) {
    FT_DYNAMIC_SMEM(float, sm);
    const cta c = cta_of(anchors, NB, B, Hq, Hkv, npk, win, causal);
    const int R = c.R, W = blockDim.x / 32, warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int nt = blockDim.x;
    if (!keep[c.blk]) return bwd_q_dropped(c, dq, dk_blk, dv_blk, B, Hq, Hkv, mode);
    const int Rp = (R + 15) & ~15;
    float *qs = sm, *dos = qs + Rp * DH, *ks = dos + Rp * DH, *vs = ks + KT * DHP;
    float *P = vs + KT * DHP, *dS = P + Rp * KT, *Ds = dS + Rp * KT, *lses = Ds + Rp;
    for (int i = threadIdx.x; i < Rp * DH; i += nt) {
        const int r = i / DH;
        const long long off = r < R ? grow(c, r, B, Hq) * DH + i % DH : 0;
        qs[i] = r < R ? ld1(q + off) : 0.f;
        dos[i] = r < R ? ld1(dout + off) : 0.f;
    }
    for (int r = R + threadIdx.x; r < Rp; r += nt) {
        Ds[r] = 0.f;
        lses[r] = INFINITY;
    }
    row_deltas(c, o, dout, lse32, Ds, lses, Dbuf, B, Hq);
    __syncthreads();
    const int g = lane >> 2, tq = lane & 3, row0 = warp * 16;
    const bool active = row0 < Rp; /* uniform over the warp */
    uint32_t qf[NKS][4], df[NKS][4];
    float dqacc[NDT][4];
    float lr0 = 0.f, lr1 = 0.f, D0 = 0.f, D1 = 0.f;
    if (active) {
        frag_a(qf, qs, row0, g, tq);
        frag_a(df, dos, row0, g, tq);
#pragma unroll
        for (int j = 0; j < NDT; j++)
            dqacc[j][0] = dqacc[j][1] = dqacc[j][2] = dqacc[j][3] = 0.f;
        lr0 = lses[row0 + g];
        lr1 = lses[row0 + g + 8];
        D0 = Ds[row0 + g];
        D1 = Ds[row0 + g + 8];
    }
    for (int t0 = c.k0; t0 < c.n; t0 += KT) {
        const int nk = load_kv(ks, vs, k_ctx, v_ctx, k_blk, v_blk, c, t0, KT, S, B, Hkv);
        const int want_kv = (mode & BQ_CTX_ATOMIC) || t0 + nk > c.a;
        if (active) {
            for (int c0 = 0; c0 < nk; c0 += 16) {
                float sacc[2][4], pacc[2][4];
                mma_rows(sacc, qf, ks, c0, g, tq);
                mma_rows(pacc, df, vs, c0, g, tq);
                /* P and dS of a key, in shared memory and over sacc (lse and D taken by value) */
                const auto p_ds = [&, lr0, lr1, D0, D1](int h, int e, int t, bool ok0, bool ok1) {
                    const float p0 = ok0 ? expf(sacc[h][e] * scale - lr0) : 0.f;
                    const float p1 = ok1 ? expf(sacc[h][2 + e] * scale - lr1) : 0.f;
                    const float ds0 = p0 * (pacc[h][e] - D0), ds1 = p1 * (pacc[h][2 + e] - D1);
                    P[(row0 + g) * KT + t] = p0;
                    P[(row0 + g + 8) * KT + t] = p1;
                    dS[(row0 + g) * KT + t] = ds0;
                    dS[(row0 + g + 8) * KT + t] = ds1;
                    sacc[h][e] = ds0;
                    sacc[h][2 + e] = ds1;
                };
                each_key(c, t0, c0, nk, row0, g, tq, p_ds);
                mma_acc(dqacc, sacc, ks, c0, g, tq);
            }
        }
        if (!want_kv) continue;
        __syncthreads();
        tile_kv(c, qs, dos, P, dS, t0, nk, R, KT, S, B, Hkv, scale, mode, dk_blk, dv_blk, acc_kc,
                acc_vc, acc_kb, acc_vb);
    }
    if (!active) return;
    st_tile(c, dq, dqacc, row0 + g, tq, R, B, Hq, [&](float v, int) { return v * scale; });
}
FT_KERNEL_EXPORT(attn_bwd_q_mma)
#endif
#endif

/* ==== backward, key-major (dkv = keymajor) ====================================================
 * One CTA per (sequence, tile of KT context positions) x kv head; walks the kept blocks of its
 * sequence whose anchor passes the tile's first position, all G heads of the group at once.
 * Shared memory (floats): ks, vs KT*DHP, dks, dvs KT*DH, qs, dos R*DH, P, dS R*KT, lses, Ds R;
 * R = B*G. */
/* (256, 1): with (256) alone ptxas held it to 32 registers and spilled on sm_80 (bf16). */
#if FT_KEEP(attn_bwd_kv)
extern "C" __global__ void __launch_bounds__(256, 1)
    attn_bwd_kv(const st_t *__restrict__ q, const st_t *__restrict__ k_ctx,
                const st_t *__restrict__ v_ctx, const int *__restrict__ anchors,
                const uint8_t *__restrict__ keep, const float *__restrict__ lse32,
                const float *__restrict__ Dbuf, const st_t *__restrict__ dout,
                st_t *__restrict__ dk_ctx, st_t *__restrict__ dv_ctx, int S, int NB, int B, int Hq,
                int Hkv, int KT, float scale, int win) {
    FT_DYNAMIC_SMEM(float, sm);
    const int ntile = (S + KT - 1) / KT, s = blockIdx.x / ntile, p0 = (blockIdx.x % ntile) * KT;
    const int kvh = blockIdx.y, G = Hq / Hkv, R = B * G, nk = S - p0 < KT ? S - p0 : KT;
    const int W = blockDim.x / 32, warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int nt = blockDim.x;
    float *ks = sm, *vs = ks + KT * DHP, *dks = vs + KT * DHP, *dvs = dks + KT * DH;
    float *qs = dvs + KT * DH, *dos = qs + R * DH, *P = dos + R * DH, *dS = P + R * KT;
    float *lses = dS + R * KT, *Ds = lses + R;
    for (int i = threadIdx.x; i < KT * DH; i += nt) {
        int t = i / DH, d = i % DH;
        float kv = 0.f, vv = 0.f;
        if (t < nk) {
            long long off = (((long long)s * S + p0 + t) * Hkv + kvh) * DH + d;
            kv = ld1(k_ctx + off);
            vv = ld1(v_ctx + off);
        }
        ks[t * DHP + d] = kv;
        vs[t * DHP + d] = vv;
        dks[i] = 0.f;
        dvs[i] = 0.f;
    }
    for (int j = 0; j < NB; j++) {
        const int blk = s * NB + j, a = anchors[blk];
        /* the block sees none of the tile: all of it at or past the anchor, or before query 0's
         * window */
        if (!keep[blk] || a <= p0 || p0 + nk <= window_lo(a, 0, win)) continue;
        const int nv = a - p0 < nk ? a - p0 : nk; /* keys of the tile this block sees */
        __syncthreads();                          /* the previous block's rows are consumed */
        for (int i = threadIdx.x; i < R * DH; i += nt) {
            long long off =
                (((long long)blk * B + i / DH / G) * Hq + kvh * G + (i / DH) % G) * DH + i % DH;
            qs[i] = ld1(q + off);
            dos[i] = ld1(dout + off);
        }
        for (int r = threadIdx.x; r < R; r += nt) {
            long long g = ((long long)blk * B + r / G) * Hq + kvh * G + r % G;
            lses[r] = lse32[g];
            Ds[r] = Dbuf[g];
        }
        __syncthreads();
        for (int r = warp; r < R; r += W) {
            const float *qr = qs + r * DH, *dor = dos + r * DH;
            const float lr = lses[r], Dr = Ds[r];
            for (int t = lane; t < KT; t += 32) {
                float p = 0.f, ds = 0.f;
                if (t < nv && p0 + t >= window_lo(a, r / G, win)) {
                    p = expf(scale * dotdh(qr, ks + t * DHP) - lr);
                    ds = p * (dotdh(dor, vs + t * DHP) - Dr);
                }
                P[r * KT + t] = p;
                dS[r * KT + t] = ds;
            }
        }
        __syncthreads();
        for (int i = threadIdx.x; i < nv * DH; i += nt) {
            const int t = i / DH, d = i % DH;
            float dk = 0.f, dv = 0.f;
            for (int r = 0; r < R; r++) {
                dk = fmaf(dS[r * KT + t], qs[r * DH + d], dk);
                dv = fmaf(P[r * KT + t], dos[r * DH + d], dv);
            }
            dks[i] += scale * dk;
            dvs[i] += dv;
        }
    }
    __syncthreads();
    for (int i = threadIdx.x; i < nk * DH; i += nt) {
        long long off = (((long long)s * S + p0 + i / DH) * Hkv + kvh) * DH + i % DH;
        st1(dk_ctx + off, dks[i]);
        st1(dv_ctx + off, dvs[i]);
    }
}
FT_KERNEL_EXPORT(attn_bwd_kv)
#endif

/* float32 accumulators to the storage type (dkv = atomic with bf16 storage). */
#if FT_KEEP(attn_cvt)
extern "C" __global__ void attn_cvt(const float *__restrict__ src, st_t *__restrict__ dst,
                                    long long n) {
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (long long)gridDim.x * blockDim.x)
        st1(dst + i, src[i]);
}
FT_KERNEL_EXPORT(attn_cvt)
#endif
