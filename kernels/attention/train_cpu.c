/* train_cpu.c: block-sparse attention for drafter training (SPEC.md attention.train) on the CPU,
 * forward and backward.
 *
 *   block j of sequence s sees context keys p < anchors[s,j] and its own B keys (bidirectional);
 *   keep[s,j] = 0 sees nothing: o = 0, lse = -inf, no gradient.
 *   window W > 0 (a sliding-window layer): query b (position anchor + b) keeps only the context
 *   keys p > anchor + b - W. A block's keys start at query 0's window (rounded down to a strip
 *   of NR keys, where the packed contexts are cut), so the keys before it are never touched and
 *   a block costs O(W + B) keys whatever its anchor; the few keys at the start that a row does
 *   not see (fewer than B + NR) are masked: score -inf, then P = 0.
 *   causal = 1: query b sees its block's keys 0..b only; the others are masked the same way.
 *   per query row (head h reads kv head h / G, G = Hq/Hkv):
 *     S = scale q K^T,  lse = log sum exp S,  P = exp(S - lse),  o = P V
 *   backward, given do:  D = do . o,  dP = do V^T,  dS = P * (dP - D),
 *     dq = scale dS K,  dK += scale dS^T q,  dV += P^T do   (summed over every row seeing a key)
 *
 * Napkin math at qwen3-4b dflare, S = 1024, NB = 64, B = 16 (Hq 32, Hkv 8, dh 128), anchors
 * uniform in [0, S], 15 of 16 blocks kept: 4*dh*Hq*B*(anchor + B) FLOPs forward over the visible
 * scores = 8.3 GFLOP; the backward adds twice that (dV, dP, dQ, dK; recomputing S is not
 * counted), 25 GFLOP for a forward + backward call. Bytes: q, o, k/v ctx, k/v blk once = 48 MB
 * (about 100 MB with the gradients): 170 FLOP per byte, compute-bound. Floor = FLOPs / sgemm rate
 * = 8.3 GFLOP / 137 GFLOP/s (sgemm 2048^3, 2 threads, on a 2-core AMD EPYC (Zen 3) VM in
 * 2026-11; 73 GFLOP/s on one) = 61 ms forward, 182 ms forward + backward; bytes / bandwidth
 * (16 GB/s) is 3 and 6 ms.
 * Besides the GEMMs: one exp per visible score (8.6 M forward, 8-wide below) and row passes over
 * the score tile (max, sum, rescale, dS): a few percent. Measured there (shared, medians of
 * interleaved runs, min in brackets): default forward 90 ms (78) = 67% of the roofline, forward +
 * backward 286 ms (263) = 64%. One thread: 177 ms forward, 533 ms forward + backward, both 47
 * GFLOP/s, 64% of one core's sgemm rate.
 *
 * Work unit: one (block, kv head) pair. Its B queries times the G heads of the GQA group are
 * M = B*G rows (64 here) that share every K/V row they read, so each tile product is a GEMM of
 * M x keys x dh: the context prefix [0, anchor) then the block's own B keys, never a dense mask.
 * The forward and backward of a block run back to back in the same task (the backward needs the
 * block's o and lse, still in cache).
 *
 * Parameters (why each changes how the work is done):
 *   kv_tile  keys per tile (0: the whole visible row, anchor + B, in one tile). One tile means
 *            an exact softmax (no rescaling of o) and, in the backward, P reused from the
 *            forward without recomputing S = Q K^T (saves 1 of 7 GEMMs and the exps); but the
 *            score tile is M x (S + B) floats (266 KB at S = 1024, 790 KB at S = 3072), twice
 *            that in the backward (P and dP), which leaves L2. Tiles keep P, dP and the B strips
 *            in L2 (online softmax forward, P recomputed from lse backward) at the price of
 *            smaller GEMMs and more row passes. Whole rows win at S = 1024 by a few percent;
 *            at S = 3072 the backward prefers 128.
 *   gqa      pack: the G heads of a kv head form M = B*G rows (K/V read once per block);
 *            head: one head at a time, M = B rows (K/V read G times, smaller GEMMs; 1.5x slower
 *            under blas, a few percent under loops).
 *   gemm     blas: cblas_sgemm for every tile product; OpenBLAS packs both operands on every call
 *            (a third of its time here goes to sgemm_*copy: P is M x keys, re-packed per block).
 *            loops: a 6 x 16 AVX2 micro-kernel that reads A (Q, P, dS, even transposed) in place
 *            and B from strips packed once per call: every (sequence, kv head) context as K^T
 *            and V strips (plus K and V^T for the backward), which each block then reads a prefix
 *            of; only the block's own B rows are packed per block. 6-18% faster than blas here;
 *            the packed contexts cost 2 (forward) or 4 context-sized buffers of workspace.
 *   balance  order of the tasks over threads: static (contiguous equal counts, natural order),
 *            dynamic (one task at a time, natural order), lpt (largest first by visible keys;
 *            dynamic, or under dkv = private a greedy fixed assignment). Blocks differ in work
 *            from B keys (anchor 0) to S + B keys, so equal counts are not equal work; the
 *            natural order is pair-major, so neighbouring tasks share a context.
 *   dkv      backward only: how dk_ctx/dv_ctx, summed over every block that sees a context row,
 *            avoid races. owner: a task is one (sequence, kv head) pair looping over all its
 *            blocks, so it owns its rows of dk_ctx/dv_ctx (nseq*Hkv tasks: coarse). private:
 *            tasks are (block, kv head) pairs and each thread accumulates into its own copy of
 *            dk_ctx/dv_ctx (2*nseq*S*Hkv*dh floats per extra thread), summed in thread order at
 *            the end. owner wins when nseq*Hkv covers the threads evenly (8 pairs on 2 threads:
 *            private is 10-25% slower, its copies double the accumulator traffic); private wins
 *            when there are fewer pairs than threads (Hkv = 1, nseq = 1: 1.9x faster on 2).
 *   threads  OpenMP threads; BLAS runs single-threaded inside each task.
 * Determinism: every output element is written by one task (owner) or reduced over threads in a
 * fixed order from a fixed task-to-thread assignment (private; hence no dynamic there), and the
 * arithmetic of a task does not depend on which thread runs it.
 */
#include <cblas.h>
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attention/attention.h"
#include "attention/attention_ref.h"
#include "cpu/cpu.h"

#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
#endif

/* ---- parameter space ------------------------------------------------------------------------ */

enum { P_KV_TILE, P_GQA, P_GEMM, P_BALANCE, P_DKV, P_THREADS, P_COUNT };
enum { GQA_PACK, GQA_HEAD };
enum { GEMM_BLAS, GEMM_LOOPS };
/* The micro-kernel is written for AVX2 + FMA; its portable form is slower than OpenBLAS. */
#if defined(__AVX2__) && defined(__FMA__)
#define GEMM_DEFAULT GEMM_LOOPS
#else
#define GEMM_DEFAULT GEMM_BLAS
#endif
enum { BAL_STATIC, BAL_DYNAMIC, BAL_LPT };
enum { DKV_OWNER, DKV_PRIVATE };

static const char *const gqa_labels[] = {"pack", "head"};
static const char *const gemm_labels[] = {"blas", "loops"};
static const char *const balance_labels[] = {"static", "dynamic", "lpt"};
static const char *const dkv_labels[] = {"owner", "private"};

static ft_param tr_params[P_COUNT] = {
    [P_KV_TILE] = FT_PARAM("kv_tile",
                           "keys per tile (0: whole visible row, exact softmax, P reused by the "
                           "backward); smaller tiles keep scores and K/V in L2",
                           NULL, 0, 64, 128, 512, 0),
    [P_GQA] =
        FT_PARAM("gqa", "pack: B*G rows of a GQA group share each K/V read; head: B rows per head",
                 gqa_labels, GQA_PACK, 0, 1),
    [P_GEMM] = FT_PARAM("gemm",
                        "tile products through cblas_sgemm, or a 6x16 micro-kernel on operands "
                        "packed once per call",
                        gemm_labels, GEMM_DEFAULT, 0, 1),
    [P_BALANCE] = FT_PARAM("balance",
                           "task order: static equal counts, dynamic, or largest-first (blocks "
                           "differ in work from B to S + B keys)",
                           balance_labels, BAL_LPT, 0, 1, 2),
    [P_DKV] = FT_PARAM("dkv",
                       "backward: dk_ctx/dv_ctx owned per (sequence, kv head) task, or per-thread "
                       "copies reduced in thread order",
                       dkv_labels, DKV_OWNER, 0, 1),
    [P_THREADS] = FT_THREADS_PARAM("OpenMP threads (BLAS single-threaded inside tasks)"),
};

static const char *const tr_constraints[] = {
    "kv_tile >= S + B is the same run as kv_tile = 0 (one tile holds every visible key)",
    "gqa = head with G = Hq/Hkv = 1 is the same run as gqa = pack",
    "dkv only steers the backward: forward-only calls take dkv = owner",
    "dkv = private with balance = dynamic is not offered: private sums need a fixed "
    "task-to-thread assignment to be deterministic",
    NULL,
};

static int tr_valid(const ft_call *c, const ft_config *cfg, char *why, size_t n) {
    int dup = 0;
    const int64_t *d = c->dim;
    const int kt = cfg->v[P_KV_TILE];
    if (kt > 0 && kt >= d[TR_S] + d[TR_B]) {
        if (why)
            snprintf(why, n, "kv_tile = %d >= S + B = %lld duplicates kv_tile = 0", kt,
                     (long long)(d[TR_S] + d[TR_B]));
        dup = 1; /* a duplicate, if nothing rules it out below */
    }
    if (cfg->v[P_GQA] == GQA_HEAD && d[TR_HQ] == d[TR_HKV]) {
        if (why) snprintf(why, n, "gqa = head with Hq = Hkv duplicates gqa = pack");
        dup = 1; /* a duplicate, if nothing rules it out below */
    }
    if (!c->backward && cfg->v[P_DKV] != DKV_OWNER)
        return ft_config_why(FT_CONFIG_INVALID, why, n,
                             "dkv only steers the backward (forward-only call)");
    if (c->backward && cfg->v[P_DKV] == DKV_PRIVATE && cfg->v[P_BALANCE] == BAL_DYNAMIC)
        return ft_config_why(FT_CONFIG_INVALID, why, n,
                             "dkv = private needs a fixed task assignment (not dynamic)");
    return dup ? FT_CONFIG_DUPLICATE : FT_CONFIG_VALID;
}

/* ---- the call, unpacked --------------------------------------------------------------------- */

typedef struct tr_ctx {
    int64_t nseq, S, NB, B, Hq, Hkv, dh, G;
    int64_t E; /* Hkv*dh: floats between consecutive positions of one kv head */
    float scale;
    const float *q, *kc, *vc, *kb, *vb, *dout;
    const int32_t *anch;
    const uint8_t *keep;
    float *o, *lse, *dq, *dkc, *dvc, *dkb, *dvb;
    int bwd, loops;
    int64_t W;   /* sliding window (0: full attention) */
    int causal;  /* query b sees block keys 0..b only */
    int64_t ng;  /* heads per pass: G (gqa = pack) or 1 */
    int64_t T;   /* keys per tile */
    int64_t lds; /* floats per row of a score tile */
    /* gemm = loops: the context K and V of every (sequence, kv head) packed once per call, pair p
     * at offset p*psz: K^T and V strips for the forward, K strips and V^T for the backward. */
    float *pkT, *pvR, *pkR, *pvT;
    int64_t psz;
    ft_call *call; /* for its deadline (ft_call_overdue) */
} tr_ctx;

/* Where a block's keys (or values) come from: the context rows and the block's own rows (row
 * stride E), and under gemm = loops the context of this (sequence, kv head) packed once per call
 * for the micro-kernel, as X^T strips (pcols) and as X strips (prows). */
typedef struct tr_src {
    const float *ctx, *blk, *pcols, *prows;
} tr_src;

/* One thread's scratch. Rows r = b*ng + g: query b of the block, head g of the pass. */
typedef struct tr_work {
    float *q, *o, *dout, *dq; /* [M, dh] packed rows (q pre-scaled) */
    float *m, *l, *dd;        /* [M] running max (then lse), sum, do . o */
    float *s, *dp;            /* [M, lds] scores / P, and dP / dS */
    float *pk;                /* a K or V tile, packed for the micro-kernel (gemm = loops) */
    float *pq, *pdo;          /* q and do rows packed as B operands of dK, dV (gemm = loops) */
} tr_work;

/* ---- vector helpers ------------------------------------------------------------------------- */

#if defined(__AVX2__) && defined(__FMA__)
/* exp on 8 lanes (Cephes expf: 2^n * poly(r), r = x - n ln2, |error| ~ 1-2 ulp). The exps of the
 * scores are as many as the visible scores; glibc's scalar expf would cost as much as the GEMMs,
 * and GCC does not vectorise it without -ffast-math. */
static inline __m256 exp8(__m256 x) {
    x = _mm256_max_ps(x, _mm256_set1_ps(-87.0f));
    x = _mm256_min_ps(x, _mm256_set1_ps(88.0f));
    __m256 fx = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                                _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(fx, _mm256_set1_ps(0.693359375f), x);
    r = _mm256_fnmadd_ps(fx, _mm256_set1_ps(-2.12194440e-4f), r);
    __m256 y = _mm256_set1_ps(1.9875691500e-4f);
    y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(1.3981999507e-3f));
    y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(8.3334519073e-3f));
    y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(4.1665795894e-2f));
    y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(1.6666665459e-1f));
    y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(5.0000001201e-1f));
    y = _mm256_fmadd_ps(y, _mm256_mul_ps(r, r), _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
    __m256i e =
        _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(fx), _mm256_set1_epi32(127)), 23);
    return _mm256_mul_ps(y, _mm256_castsi256_ps(e));
}
#endif

/* p[t] = exp(p[t] - m) for t < n; returns sum_t p[t]. */
static float row_exp(int64_t n, float *restrict p, float m) {
    int64_t t = 0;
    float sum = 0.0f;
#if defined(__AVX2__) && defined(__FMA__)
    const __m256 vm = _mm256_set1_ps(m);
    __m256 acc = _mm256_setzero_ps();
    for (; t + 8 <= n; t += 8) {
        __m256 e = exp8(_mm256_sub_ps(_mm256_loadu_ps(p + t), vm));
        _mm256_storeu_ps(p + t, e);
        acc = _mm256_add_ps(acc, e);
    }
    __m128 h = _mm_add_ps(_mm256_castps256_ps128(acc), _mm256_extractf128_ps(acc, 1));
    h = _mm_add_ps(h, _mm_movehl_ps(h, h));
    h = _mm_add_ss(h, _mm_movehdup_ps(h));
    sum = _mm_cvtss_f32(h);
#endif
    for (; t < n; t++) {
        p[t] = expf(p[t] - m);
        sum += p[t];
    }
    return sum;
}

static float row_max(int64_t n, const float *restrict p) {
    float m = -INFINITY;
#pragma omp simd reduction(max : m)
    for (int64_t t = 0; t < n; t++)
        m = p[t] > m ? p[t] : m;
    return m;
}

static void row_scale(int64_t n, float *restrict p, float a) {
#pragma omp simd
    for (int64_t t = 0; t < n; t++)
        p[t] *= a;
}

/* ---- tile products: cblas_sgemm or the micro-kernel ------------------------------------------ */

/* The micro-kernel computes C[i, j] (+)= sum_p A(i, p) B[p, j] with A(i, p) = A[i*ars + p*acs],
 * so one kernel serves A and A^T (P for o and dq, P^T and dS^T for dV and dK), and B packed in
 * strips of NR columns: strip s holds rows p = 0..k-1 of columns [s*NR, s*NR + NR), NR floats a
 * row, zero past the last column. Packing makes every B read sequential (K and V rows are
 * Hkv*dh floats apart, a 4 KB stride at dh 128 that maps a whole tile onto a few cache sets),
 * and it is where K^T and V^T are formed. A 6 x 16 block of C lives in 12 ymm accumulators (more
 * than the 8 that the FMA latency x throughput of Zen 3 needs) while p runs over k. */
#define MR 6
#define NR 16

static int64_t strips(int64_t n) { return (n + NR - 1) / NR; }

/* B = rows [0, nc) of src0 then rows [0, k - nc) of src1 (row stride ld), n columns. */
static void pack_rows(float *restrict Bp, const float *src0, const float *src1, int64_t nc,
                      int64_t k, int64_t n, int64_t ld) {
    for (int64_t p = 0; p < k; p++) {
        const float *restrict src = p < nc ? src0 + p * ld : src1 + (p - nc) * ld;
        for (int64_t s = 0; s < strips(n); s++) {
            const int64_t nj = n - s * NR < NR ? n - s * NR : NR;
            float *restrict dst = Bp + (s * k + p) * NR;
            if (nj == NR) {
#pragma omp simd
                for (int j = 0; j < NR; j++)
                    dst[j] = src[s * NR + j];
            } else {
                for (int64_t j = 0; j < NR; j++)
                    dst[j] = j < nj ? src[s * NR + j] : 0.0f;
            }
        }
    }
}

#if defined(__AVX2__) && defined(__FMA__)
/* dst[i*NR + t] = row[t][p + i] for t, i < 8: an 8 x 8 transpose in registers. */
static inline void transpose8(const float *const *row, int64_t p, float *dst) {
    const __m256 r0 = _mm256_loadu_ps(row[0] + p), r1 = _mm256_loadu_ps(row[1] + p);
    const __m256 r2 = _mm256_loadu_ps(row[2] + p), r3 = _mm256_loadu_ps(row[3] + p);
    const __m256 r4 = _mm256_loadu_ps(row[4] + p), r5 = _mm256_loadu_ps(row[5] + p);
    const __m256 r6 = _mm256_loadu_ps(row[6] + p), r7 = _mm256_loadu_ps(row[7] + p);
    const __m256 t0 = _mm256_unpacklo_ps(r0, r1), t1 = _mm256_unpackhi_ps(r0, r1);
    const __m256 t2 = _mm256_unpacklo_ps(r2, r3), t3 = _mm256_unpackhi_ps(r2, r3);
    const __m256 t4 = _mm256_unpacklo_ps(r4, r5), t5 = _mm256_unpackhi_ps(r4, r5);
    const __m256 t6 = _mm256_unpacklo_ps(r6, r7), t7 = _mm256_unpackhi_ps(r6, r7);
    const __m256 s0 = _mm256_shuffle_ps(t0, t2, 0x44), s1 = _mm256_shuffle_ps(t0, t2, 0xEE);
    const __m256 s2 = _mm256_shuffle_ps(t1, t3, 0x44), s3 = _mm256_shuffle_ps(t1, t3, 0xEE);
    const __m256 s4 = _mm256_shuffle_ps(t4, t6, 0x44), s5 = _mm256_shuffle_ps(t4, t6, 0xEE);
    const __m256 s6 = _mm256_shuffle_ps(t5, t7, 0x44), s7 = _mm256_shuffle_ps(t5, t7, 0xEE);
    _mm256_storeu_ps(dst + 0 * NR, _mm256_permute2f128_ps(s0, s4, 0x20));
    _mm256_storeu_ps(dst + 1 * NR, _mm256_permute2f128_ps(s1, s5, 0x20));
    _mm256_storeu_ps(dst + 2 * NR, _mm256_permute2f128_ps(s2, s6, 0x20));
    _mm256_storeu_ps(dst + 3 * NR, _mm256_permute2f128_ps(s3, s7, 0x20));
    _mm256_storeu_ps(dst + 4 * NR, _mm256_permute2f128_ps(s0, s4, 0x31));
    _mm256_storeu_ps(dst + 5 * NR, _mm256_permute2f128_ps(s1, s5, 0x31));
    _mm256_storeu_ps(dst + 6 * NR, _mm256_permute2f128_ps(s2, s6, 0x31));
    _mm256_storeu_ps(dst + 7 * NR, _mm256_permute2f128_ps(s3, s7, 0x31));
}
#endif

/* B = X^T, X = rows [0, nc) of src0 then rows of src1 (row stride ld): n rows of k floats. */
static void pack_cols(float *restrict Bp, const float *src0, const float *src1, int64_t nc,
                      int64_t n, int64_t k, int64_t ld) {
    for (int64_t s = 0; s < strips(n); s++) {
        const float *row[NR];
        const int64_t nj = n - s * NR < NR ? n - s * NR : NR;
        for (int64_t t = 0; t < nj; t++) {
            const int64_t r = s * NR + t;
            row[t] = r < nc ? src0 + r * ld : src1 + (r - nc) * ld;
        }
        float *dst = Bp + s * k * NR;
        int64_t p = 0;
        if (nj == NR) {
#if defined(__AVX2__) && defined(__FMA__)
            for (; p + 8 <= k; p += 8) {
                transpose8(row, p, dst + p * NR);
                transpose8(row + 8, p, dst + p * NR + 8);
            }
#endif
            for (; p < k; p++)
                for (int t = 0; t < NR; t++)
                    dst[p * NR + t] = row[t][p];
        } else {
            for (; p < k; p++)
                for (int64_t t = 0; t < NR; t++)
                    dst[p * NR + t] = t < nj ? row[t][p] : 0.0f;
        }
    }
}

/* One mr x NR block (mr <= MR, a constant where inlined) over the whole k; nj <= NR columns of C
 * are stored. acc = 0 never reads C (outputs may hold anything). */
#if defined(__AVX2__) && defined(__FMA__)
/* The accumulators are named variables, not an array: GCC keeps an array of __m256 in registers
 * but also stores it back to the stack on every iteration, which halves the kernel's speed. */
#define MK_ROW(i)                                                                                  \
    if (mr > i) {                                                                                  \
        const __m256 ai = _mm256_broadcast_ss(a + i * ars);                                        \
        c##i##0 = _mm256_fmadd_ps(ai, b0, c##i##0);                                                \
        c##i##1 = _mm256_fmadd_ps(ai, b1, c##i##1);                                                \
    }
#define MK_STORE(i)                                                                                \
    if (mr > i) mk_store(C + i * ldc, c##i##0, c##i##1, nj, acc);

static inline __attribute__((always_inline)) void mk_store(float *r, __m256 lo, __m256 hi,
                                                           int64_t nj, int acc) {
    if (nj == NR) {
        if (acc) {
            lo = _mm256_add_ps(lo, _mm256_loadu_ps(r));
            hi = _mm256_add_ps(hi, _mm256_loadu_ps(r + 8));
        }
        _mm256_storeu_ps(r, lo);
        _mm256_storeu_ps(r + 8, hi);
    } else {
        float tmp[NR];
        _mm256_storeu_ps(tmp, lo);
        _mm256_storeu_ps(tmp + 8, hi);
        for (int64_t j = 0; j < nj; j++)
            r[j] = acc ? r[j] + tmp[j] : tmp[j];
    }
}

static inline __attribute__((always_inline)) void
mk_block(const int mr, int64_t k, const float *restrict A, int64_t ars, int64_t acs,
         const float *restrict Bp, float *restrict C, int64_t ldc, int64_t nj, int acc) {
    __m256 c00 = _mm256_setzero_ps(), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00;
    __m256 c30 = c00, c31 = c00, c40 = c00, c41 = c00, c50 = c00, c51 = c00;
    for (int64_t p = 0; p < k; p++) {
        const __m256 b0 = _mm256_load_ps(Bp + p * NR), b1 = _mm256_load_ps(Bp + p * NR + 8);
        const float *a = A + p * acs;
        MK_ROW(0) MK_ROW(1) MK_ROW(2) MK_ROW(3) MK_ROW(4) MK_ROW(5)
    }
    MK_STORE(0) MK_STORE(1) MK_STORE(2) MK_STORE(3) MK_STORE(4) MK_STORE(5)
}
#undef MK_ROW
#undef MK_STORE
#else
static inline void mk_block(const int mr, int64_t k, const float *restrict A, int64_t ars,
                            int64_t acs, const float *restrict Bp, float *restrict C, int64_t ldc,
                            int64_t nj, int acc) {
    float c[MR][NR] = {{0}};
    for (int64_t p = 0; p < k; p++) {
        const float *restrict b = Bp + p * NR;
        for (int i = 0; i < mr; i++) {
            const float ai = A[i * ars + p * acs];
#pragma omp simd
            for (int j = 0; j < NR; j++)
                c[i][j] = fmaf(ai, b[j], c[i][j]);
        }
    }
    for (int i = 0; i < mr; i++)
        for (int64_t j = 0; j < nj; j++)
            C[i * ldc + j] = acc ? C[i * ldc + j] + c[i][j] : c[i][j];
}
#endif

/* C[m, n] (+)= A(m x k) B(k x n), B packed with sstride floats between strips (k*NR, or more
 * when B is the first k rows of a longer packed matrix). Strips outermost: a strip (k x 64 bytes)
 * is read sequentially by every row block while it is hot in L1/L2. */
static void mk_gemm(int64_t m, int64_t n, int64_t k, const float *A, int64_t ars, int64_t acs,
                    const float *Bp, int64_t sstride, float *C, int64_t ldc, int acc) {
    for (int64_t s = 0; s < strips(n); s++) {
        const float *bs = Bp + s * sstride;
        const int64_t nj = n - s * NR < NR ? n - s * NR : NR;
        float *cs = C + s * NR;
        int64_t i = 0;
        for (; i + MR <= m; i += MR)
            mk_block(MR, k, A + i * ars, ars, acs, bs, cs + i * ldc, ldc, nj, acc);
        const float *ai = A + i * ars;
        float *ci = cs + i * ldc;
        switch (m - i) {
        case 5: mk_block(5, k, ai, ars, acs, bs, ci, ldc, nj, acc); break;
        case 4: mk_block(4, k, ai, ars, acs, bs, ci, ldc, nj, acc); break;
        case 3: mk_block(3, k, ai, ars, acs, bs, ci, ldc, nj, acc); break;
        case 2: mk_block(2, k, ai, ars, acs, bs, ci, ldc, nj, acc); break;
        case 1: mk_block(1, k, ai, ars, acs, bs, ci, ldc, nj, acc); break;
        default: break;
        }
    }
}

/* ---- tiles of the visible keys --------------------------------------------------------------
 * Visible key t of a block is context row t for t < a, block row t - a after: two buffers with
 * the same row stride E. A tile [t0, t0 + nt) splits into nc context rows and nb block rows:
 * two GEMM calls under blas, one packing (which joins them) and one kernel call under loops. */

static int64_t ctx_part(int64_t a, int64_t t0, int64_t nt) {
    const int64_t nc = a - t0;
    return nc < 0 ? 0 : nc > nt ? nt : nc;
}

/* C[M, 0:nt] = A[M, dh] X[t0 : t0+nt]^T (scores with X = K, dP with X = V). Under loops the
 * context part comes from X^T packed once per call (t0 is a multiple of NR there), and only the
 * block's own rows are packed here. */
static void tile_nt(const tr_ctx *x, tr_work *w, int64_t M, const float *A, const tr_src *X,
                    int64_t a, int64_t t0, int64_t nt, float *C) {
    const int64_t nc = ctx_part(a, t0, nt), nb = nt - nc, E = x->E, dh = x->dh;
    const float *pc = nc ? X->ctx + t0 * E : NULL, *pb = nb ? X->blk + (t0 + nc - a) * E : NULL;
    if (x->loops) {
        if (nc) mk_gemm(M, nc, dh, A, dh, 1, X->pcols + t0 * dh, dh * NR, C, x->lds, 0);
        if (nb) {
            pack_cols(w->pk, NULL, pb, 0, nb, dh, E);
            mk_gemm(M, nb, dh, A, dh, 1, w->pk, dh * NR, C + nc, x->lds, 0);
        }
        return;
    }
    if (nc)
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)M, (int)nc, (int)dh, 1.0f, A,
                    (int)dh, pc, (int)E, 0.0f, C, (int)x->lds);
    if (nb)
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)M, (int)nb, (int)dh, 1.0f, A,
                    (int)dh, pb, (int)E, 0.0f, C + nc, (int)x->lds);
}

/* C[M, dh] = beta C + P[M, 0:nt] X[t0 : t0+nt] (o with X = V, dq with X = K). */
static void tile_nn(const tr_ctx *x, tr_work *w, int64_t M, const float *P, const tr_src *X,
                    int64_t a, int64_t t0, int64_t nt, float *C, int beta) {
    const int64_t nc = ctx_part(a, t0, nt), nb = nt - nc, E = x->E, dh = x->dh;
    const float *pc = nc ? X->ctx + t0 * E : NULL, *pb = nb ? X->blk + (t0 + nc - a) * E : NULL;
    if (x->loops) {
        if (nc) mk_gemm(M, dh, nc, P, x->lds, 1, X->prows + t0 * NR, x->S * NR, C, dh, beta);
        if (nb) {
            pack_rows(w->pk, NULL, pb, 0, nb, dh, E);
            mk_gemm(M, dh, nb, P + nc, x->lds, 1, w->pk, nb * NR, C, dh, nc || beta);
        }
        return;
    }
    if (nc)
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)M, (int)dh, (int)nc, 1.0f, P,
                    (int)x->lds, pc, (int)E, beta ? 1.0f : 0.0f, C, (int)dh);
    if (nb)
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)M, (int)dh, (int)nb, 1.0f,
                    P + nc, (int)x->lds, pb, (int)E, nc || beta ? 1.0f : 0.0f, C, (int)dh);
}

/* Y[t0 : t0+nt] += P[M, 0:nt]^T A[M, dh] (dV with P, do; dK with dS, scaled q). Ap is A packed
 * (gemm = loops; packed once per pass, reused by every tile). */
static void tile_tn(const tr_ctx *x, int64_t M, const float *P, const float *A, const float *Ap,
                    float *yc, float *yb, int64_t a, int64_t t0, int64_t nt) {
    const int64_t nc = ctx_part(a, t0, nt), nb = nt - nc, E = x->E, dh = x->dh;
    if (x->loops) {
        if (nc) mk_gemm(nc, dh, M, P, 1, x->lds, Ap, M * NR, yc + t0 * E, E, 1);
        if (nb) mk_gemm(nb, dh, M, P + nc, 1, x->lds, Ap, M * NR, yb + (t0 + nc - a) * E, E, 1);
        return;
    }
    if (nc)
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)nc, (int)dh, (int)M, 1.0f, P,
                    (int)x->lds, A, (int)dh, 1.0f, yc + t0 * E, (int)E);
    if (nb)
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)nb, (int)dh, (int)M, 1.0f, P + nc,
                    (int)x->lds, A, (int)dh, 1.0f, yb + (t0 + nc - a) * E, (int)E);
}

/* ---- one block ------------------------------------------------------------------------------ */

/* Gather rows (block blk, heads h0 .. h0+ng) of a [.., B, Hq, dh] tensor into dst[M, dh]. */
static void gather(const tr_ctx *x, float *restrict dst, const float *restrict src, int64_t blk,
                   int64_t h0, float mul) {
    const int64_t w = x->ng * x->dh;
    for (int64_t b = 0; b < x->B; b++) {
        const float *s = src + ((blk * x->B + b) * x->Hq + h0) * x->dh;
        float *d = dst + b * w;
#pragma omp simd
        for (int64_t i = 0; i < w; i++)
            d[i] = s[i] * mul;
    }
}

static void scatter(const tr_ctx *x, float *restrict dst, const float *restrict src, int64_t blk,
                    int64_t h0, float mul) {
    const int64_t w = x->ng * x->dh;
    for (int64_t b = 0; b < x->B; b++) {
        float *d = dst + ((blk * x->B + b) * x->Hq + h0) * x->dh;
        const float *s = src + b * w;
#pragma omp simd
        for (int64_t i = 0; i < w; i++)
            d[i] = s[i] * mul;
    }
}

/* The first key index a block with anchor a computes: 0, or under a window the start of query
 * 0's window rounded down to a multiple of NR (the packed context strips start there). */
static int64_t block_first_key(const tr_ctx *x, int64_t a) {
    const int64_t lo = ft_ref_window_lo(x->W, a);
    return (lo < a ? lo : a) / NR * NR;
}

/* Set the scores of the keys [t0, t0 + nt) a row does not see to v: -inf before the softmax, 0
 * after it (the clamped exponent leaves exp(-87) there). Rows r = b*ng + g belong to query b at
 * position a + b: under a window the context keys before its window, under causal the block keys
 * past its own (t > a + b). */
static void mask_window(const tr_ctx *x, float *s, int64_t a, int64_t t0, int64_t nt, float v) {
    for (int64_t b = 0; (x->W || x->causal) && b < x->B; b++) {
        const int64_t lo = ft_ref_window_lo(x->W, a + b);
        const int64_t end = (lo < a ? lo : a) - t0, k = end < nt ? end : nt;
        const int64_t c0 = x->causal ? a + b + 1 - t0 : nt; /* first block key it does not see */
        for (int64_t g = 0; g < x->ng; g++) {
            float *row = s + (b * x->ng + g) * x->lds;
            for (int64_t t = 0; t < k; t++)
                row[t] = v;
            for (int64_t t = c0 > 0 ? c0 : 0; t < nt; t++)
                row[t] = v;
        }
    }
}

/* One row's online-softmax step over a tile of nt scores sr (first: the block's first tile):
 * m, l the running max and sum, o the row's accumulator. A row can meet a tile of keys all
 * outside its window (scores -inf): it adds nothing, and the exponent of -inf - -inf is kept
 * out of the arithmetic. */
static void softmax_step(int64_t nt, float *sr, float *m, float *l, float *o, int64_t dh,
                         int first) {
    const float mt = row_max(nt, sr);
    const float mn = first || mt > *m ? mt : *m;
    if (mn == -INFINITY) {
        memset(sr, 0, (size_t)nt * sizeof(float));
        *m = mn;
        *l = 0.0f;
        return;
    }
    if (first) {
        *m = mt;
        *l = row_exp(nt, sr, mt);
        return;
    }
    const float alpha = expf(*m - mn); /* 0 when nothing was seen before */
    *l = *l * alpha + row_exp(nt, sr, mn);
    *m = mn;
    row_scale(dh, o, alpha);
}

/* Forward and (when asked) backward of block blk (global index) for kv head j. dk_acc, dv_acc:
 * where the context gradients accumulate (the outputs, or this thread's private copies). */
static void run_block(const tr_ctx *x, tr_work *w, int64_t blk, int64_t j, float *dk_acc,
                      float *dv_acc) {
    const int64_t B = x->B, dh = x->dh, E = x->E, G = x->G, ng = x->ng, M = B * ng;
    const int64_t seq = blk / x->NB, a = x->anch[blk], n = a + B, T = x->T, lds = x->lds;
    const int64_t coff = seq * x->S * E + j * dh, boff = blk * B * E + j * dh;
    const int64_t pair = (seq * x->Hkv + j) * x->psz;
    const tr_src K = {x->kc + coff, x->kb + boff, x->loops ? x->pkT + pair : NULL,
                      x->loops && x->bwd ? x->pkR + pair : NULL};
    const tr_src V = {x->vc + coff, x->vb + boff, x->loops && x->bwd ? x->pvT + pair : NULL,
                      x->loops ? x->pvR + pair : NULL};

    if (x->bwd)
        for (int64_t b = 0; b < B; b++) {
            memset(x->dkb + boff + b * E, 0, (size_t)dh * sizeof(float));
            memset(x->dvb + boff + b * E, 0, (size_t)dh * sizeof(float));
        }
    if (!x->keep[blk]) { /* the empty softmax: o = 0, lse = -inf, no gradient */
        for (int64_t b = 0; b < B; b++) {
            const int64_t row = (blk * B + b) * x->Hq + j * G;
            memset(x->o + row * dh, 0, (size_t)(G * dh) * sizeof(float));
            for (int64_t g = 0; g < G; g++)
                x->lse[row + g] = -INFINITY;
            if (x->bwd) memset(x->dq + row * dh, 0, (size_t)(G * dh) * sizeof(float));
        }
        return;
    }

    const int64_t k0 = block_first_key(x, a); /* keys before k0 are outside every window */
    const int single = T >= n - k0;
    for (int64_t g0 = 0; g0 < G; g0 += ng) {
        const int64_t h0 = j * G + g0;
        gather(x, w->q, x->q, blk, h0, x->scale);

        /* forward: online softmax over the tiles (one tile: an exact softmax) */
        for (int64_t t0 = k0; t0 < n; t0 += T) {
            const int64_t nt = n - t0 < T ? n - t0 : T;
            tile_nt(x, w, M, w->q, &K, a, t0, nt, w->s);
            mask_window(x, w->s, a, t0, nt, -INFINITY);
            for (int64_t r = 0; r < M; r++)
                softmax_step(nt, w->s + r * lds, &w->m[r], &w->l[r], w->o + r * dh, dh, t0 == k0);
            mask_window(x, w->s, a, t0, nt, 0.0f);
            tile_nn(x, w, M, w->s, &V, a, t0, nt, w->o, t0 > k0);
        }
        for (int64_t r = 0; r < M; r++) {
            row_scale(dh, w->o + r * dh, 1.0f / w->l[r]);
            w->m[r] += logf(w->l[r]); /* m now holds lse */
        }
        scatter(x, x->o, w->o, blk, h0, 1.0f);
        for (int64_t b = 0; b < B; b++)
            for (int64_t g = 0; g < ng; g++)
                x->lse[(blk * B + b) * x->Hq + h0 + g] = w->m[b * ng + g];
        if (!x->bwd) continue;

        /* backward: P from lse (kept from the forward when there was one tile) */
        gather(x, w->dout, x->dout, blk, h0, 1.0f);
        for (int64_t r = 0; r < M; r++) {
            const float *dr = w->dout + r * dh, *orow = w->o + r * dh;
            float acc = 0.0f;
#pragma omp simd reduction(+ : acc)
            for (int64_t d = 0; d < dh; d++)
                acc += dr[d] * orow[d];
            w->dd[r] = acc;
        }
        memset(w->dq, 0, (size_t)(M * dh) * sizeof(float));
        if (x->loops) {
            pack_rows(w->pq, w->q, NULL, M, M, dh, dh);
            pack_rows(w->pdo, w->dout, NULL, M, M, dh, dh);
        }
        for (int64_t t0 = k0; t0 < n; t0 += T) {
            const int64_t nt = n - t0 < T ? n - t0 : T;
            if (single) {
                for (int64_t r = 0; r < M; r++)
                    row_scale(nt, w->s + r * lds, 1.0f / w->l[r]);
            } else {
                tile_nt(x, w, M, w->q, &K, a, t0, nt, w->s);
                mask_window(x, w->s, a, t0, nt, -INFINITY);
                for (int64_t r = 0; r < M; r++)
                    row_exp(nt, w->s + r * lds, w->m[r]);
                mask_window(x, w->s, a, t0, nt, 0.0f);
            }
            tile_tn(x, M, w->s, w->dout, w->pdo, dv_acc + coff, x->dvb + boff, a, t0, nt);
            tile_nt(x, w, M, w->dout, &V, a, t0, nt, w->dp);
            for (int64_t r = 0; r < M; r++) {
                const float *pr = w->s + r * lds, D = w->dd[r];
                float *dr = w->dp + r * lds;
#pragma omp simd
                for (int64_t t = 0; t < nt; t++)
                    dr[t] = pr[t] * (dr[t] - D);
            }
            tile_nn(x, w, M, w->dp, &K, a, t0, nt, w->dq, 1);
            tile_tn(x, M, w->dp, w->q, w->pq, dk_acc + coff, x->dkb + boff, a, t0, nt);
        }
        scatter(x, x->dq, w->dq, blk, h0, x->scale);
    }
}

/* ---- launcher ------------------------------------------------------------------------------- */

/* Pack item i of the call's contexts (gemm = loops): pair i / 4 (or / 2 forward only), as K^T,
 * V, K or V^T strips. Every block of the pair reads a prefix of these instead of packing its
 * context keys again (a block would otherwise re-pack anchor rows, S/2 on average). */
static void prepack(const tr_ctx *x, int64_t i) {
    const int64_t kinds = x->bwd ? 4 : 2, pair = i / kinds, kind = i % kinds;
    const int64_t seq = pair / x->Hkv, j = pair % x->Hkv, off = seq * x->S * x->E + j * x->dh;
    switch (kind) {
    case 0: pack_cols(x->pkT + pair * x->psz, x->kc + off, NULL, x->S, x->S, x->dh, x->E); break;
    case 1: pack_rows(x->pvR + pair * x->psz, x->vc + off, NULL, x->S, x->S, x->dh, x->E); break;
    case 2: pack_rows(x->pkR + pair * x->psz, x->kc + off, NULL, x->S, x->S, x->dh, x->E); break;
    default: pack_cols(x->pvT + pair * x->psz, x->vc + off, NULL, x->S, x->S, x->dh, x->E); break;
    }
}

typedef struct tr_task {
    int64_t work, id;
} tr_task;

/* Largest first; ties by id, so the order (and every assignment made from it) is fixed. */
static int task_cmp(const void *pa, const void *pb) {
    const tr_task *a = pa, *b = pb;
    if (a->work != b->work) return a->work > b->work ? -1 : 1;
    return a->id < b->id ? -1 : a->id > b->id;
}

static int64_t block_work(const tr_ctx *x, int64_t blk) {
    const int64_t a = x->anch[blk];
    return x->keep[blk] ? a - block_first_key(x, a) + x->B + 1 : 1;
}

/* Block tasks are numbered pair-major, (sequence, kv head, block): neighbours in the natural
 * order share the pair's K and V, so static chunks and dynamic dispatch walk one context at a
 * time. */
static int64_t task_block(const tr_ctx *x, int64_t id) {
    return id / (x->Hkv * x->NB) * x->NB + id % x->NB;
}

static void run_task(const tr_ctx *x, tr_work *w, int64_t id, float *dk, float *dv) {
    run_block(x, w, task_block(x, id), id / x->NB % x->Hkv, dk, dv);
}

/* One (sequence, kv head) pair: owns its rows of dk_ctx and dv_ctx. */
static void run_owner(const tr_ctx *x, tr_work *w, int64_t id) {
    const int64_t seq = id / x->Hkv, j = id % x->Hkv;
    for (int64_t t = 0; t < x->S; t++) {
        memset(x->dkc + (seq * x->S + t) * x->E + j * x->dh, 0, (size_t)x->dh * sizeof(float));
        memset(x->dvc + (seq * x->S + t) * x->E + j * x->dh, 0, (size_t)x->dh * sizeof(float));
    }
    for (int64_t jb = 0; jb < x->NB; jb++)
        run_block(x, w, seq * x->NB + jb, j, x->dkc, x->dvc);
}

/* The call's sizes, tensors and the parameters that shape a block's arithmetic. */
static tr_ctx ctx_init(const ft_call *c, const ft_config *cfg) {
    const int64_t *d = c->dim, S = d[TR_S], B = d[TR_B], Hq = d[TR_HQ], Hkv = d[TR_HKV];
    const int bwd = c->backward, kt = cfg->v[P_KV_TILE];
    const int64_t T = kt > 0 && kt < S + B ? kt : S + B;
    return (tr_ctx){
        .nseq = d[TR_NSEQ],
        .S = S,
        .NB = d[TR_NB],
        .B = B,
        .Hq = Hq,
        .Hkv = Hkv,
        .dh = d[TR_DH],
        .G = Hq / Hkv,
        .E = Hkv * d[TR_DH],
        .scale = (float)ft_attn_scale(&c->attrs, d[TR_DH]),
        .q = c->t[TR_Q]->data,
        .kc = c->t[TR_KCTX]->data,
        .vc = c->t[TR_VCTX]->data,
        .kb = c->t[TR_KBLK]->data,
        .vb = c->t[TR_VBLK]->data,
        .anch = c->t[TR_ANCH]->data,
        .keep = c->t[TR_KEEP]->data,
        .o = c->t[TR_O]->data,
        .lse = c->t[TR_LSE]->data,
        .dout = bwd ? c->t[TR_DO]->data : NULL,
        .dq = bwd ? c->t[TR_DQ]->data : NULL,
        .dkc = bwd ? c->t[TR_DKCTX]->data : NULL,
        .dvc = bwd ? c->t[TR_DVCTX]->data : NULL,
        .dkb = bwd ? c->t[TR_DKBLK]->data : NULL,
        .dvb = bwd ? c->t[TR_DVBLK]->data : NULL,
        .bwd = bwd,
        .W = c->attrs.window,
        .causal = c->attrs.causal,
        .loops = cfg->v[P_GEMM] == GEMM_LOOPS,
        .ng = cfg->v[P_GQA] == GQA_PACK ? Hq / Hkv : 1,
        .T = T,
        .lds = T,
    };
}

/* How the call's tasks run over the threads, and where their scratch lives. */
typedef struct tr_plan {
    int threads, bal;
    int priv, owner;      /* dkv = private / owner (both 0 forward only) */
    int64_t ntask, npack; /* tasks; context strips to pack first (gemm = loops) */
    int64_t csz;          /* floats of dk_ctx (and of dv_ctx) */
    tr_work *works;       /* one per thread */
    tr_task *order;       /* the tasks in the order they are handed out */
    int *assign;          /* task i runs on thread assign[i] (dkv = private, balance = lpt) */
    float *privbuf;       /* threads 1.. under dkv = private: their dk_ctx then dv_ctx copies */
} tr_plan;

/* Workspace: per-thread tiles, the task list, and under dkv = private one copy of dk_ctx and
 * dv_ctx per thread beyond the first (thread 0 sums straight into the outputs). */
static ft_status plan_workspace(tr_ctx *x, tr_plan *p, ft_call *c, ft_err *err) {
    const int threads = p->threads, priv = p->priv, owner = p->owner;
    const int64_t M = x->B * x->ng, ntask = owner ? x->nseq * x->Hkv : x->nseq * x->NB * x->Hkv;
    const int64_t csz = x->nseq * x->S * x->E;
    const size_t f = sizeof(float), rows_b = (size_t)(M * x->dh) * f, vec_b = (size_t)M * f;
    const size_t tile_b = (size_t)(M * x->lds) * f;
    /* loops: a block's own K or V rows packed either way; every context packed once */
    const int64_t pk_cols = strips(x->B) * NR * x->dh, pk_rows = x->B * strips(x->dh) * NR;
    const size_t pk_b = x->loops ? (size_t)(pk_cols > pk_rows ? pk_cols : pk_rows) * f : 0;
    const int64_t ps_cols = strips(x->S) * NR * x->dh, ps_rows = x->S * strips(x->dh) * NR;
    x->psz = ps_cols > ps_rows ? ps_cols : ps_rows;
    const int64_t npack = x->loops ? x->nseq * x->Hkv * (x->bwd ? 4 : 2) : 0;
    const size_t pre_b = (size_t)(npack * x->psz) * f;
    const size_t pq_b = x->loops && x->bwd ? (size_t)(M * strips(x->dh) * NR) * f : 0;
    const size_t per_thread = ft_ws_size(rows_b) * (x->bwd ? 4 : 2) + ft_ws_size(vec_b) * 3 +
                              ft_ws_size(tile_b) * (x->bwd ? 2 : 1) + ft_ws_size(pk_b) +
                              ft_ws_size(pq_b) * 2;
    const size_t task_b = (size_t)ntask * sizeof(tr_task), own_b = (size_t)ntask * sizeof(int);
    const size_t priv_b = priv ? (size_t)((threads - 1) * 2 * csz) * f : 0;
    const size_t work_b = (size_t)threads * sizeof(tr_work);
    char *ws = ft_ws_get(c->ws,
                         per_thread * (size_t)threads + ft_ws_size(work_b) + ft_ws_size(task_b) +
                             ft_ws_size(own_b) + ft_ws_size(priv_b) + ft_ws_size(pre_b),
                         err);
    if (!ws) return err ? err->status : FT_ENOMEM;
    p->ntask = ntask;
    p->npack = npack;
    p->csz = csz;
    p->works = ft_ws_carve(&ws, work_b);
    p->order = ft_ws_carve(&ws, task_b);
    p->assign = ft_ws_carve(&ws, own_b);
    p->privbuf = ft_ws_carve(&ws, priv_b);
    float *pre = ft_ws_carve(&ws, pre_b);
    if (x->loops) {
        const int64_t pairs = x->nseq * x->Hkv * x->psz;
        x->pkT = pre;
        x->pvR = pre + pairs;
        x->pkR = x->bwd ? pre + 2 * pairs : NULL;
        x->pvT = x->bwd ? pre + 3 * pairs : NULL;
    }
    for (int t = 0; t < threads; t++) {
        tr_work *w = &p->works[t];
        memset(w, 0, sizeof *w);
        w->q = ft_ws_carve(&ws, rows_b);
        w->o = ft_ws_carve(&ws, rows_b);
        w->m = ft_ws_carve(&ws, vec_b);
        w->l = ft_ws_carve(&ws, vec_b);
        w->dd = ft_ws_carve(&ws, vec_b);
        w->s = ft_ws_carve(&ws, tile_b);
        w->pk = ft_ws_carve(&ws, pk_b);
        w->pq = ft_ws_carve(&ws, pq_b);
        w->pdo = ft_ws_carve(&ws, pq_b);
        if (x->bwd) {
            w->dout = ft_ws_carve(&ws, rows_b);
            w->dq = ft_ws_carve(&ws, rows_b);
            w->dp = ft_ws_carve(&ws, tile_b);
        }
    }
    return FT_OK;
}

/* Tasks: (sequence, kv head) under owner, else (block, kv head); lpt sorts by work. */
static void plan_order(const tr_ctx *x, const tr_plan *p) {
    tr_task *order = p->order;
    for (int64_t i = 0; i < p->ntask; i++) {
        order[i].id = i;
        order[i].work = 0;
        if (p->bal != BAL_LPT) continue;
        if (p->owner)
            for (int64_t jb = 0; jb < x->NB; jb++)
                order[i].work += block_work(x, i / x->Hkv * x->NB + jb);
        else
            order[i].work = block_work(x, task_block(x, i));
    }
    if (p->bal == BAL_LPT) qsort(order, (size_t)p->ntask, sizeof *order, task_cmp);
}

/* Greedy longest-processing-time assignment: each task to the least loaded thread (lowest id on
 * ties), computed once so the private sums are reproducible. Up to 64 threads take tasks; any
 * beyond only join the final sum. */
static void plan_assign(const tr_plan *p, int nth) {
    int64_t load[64] = {0};
    const int nt = nth < 64 ? nth : 64;
    for (int64_t i = 0; i < p->ntask; i++) {
        int best = 0;
        for (int t = 1; t < nt; t++)
            if (load[t] < load[best]) best = t;
        p->assign[i] = best;
        load[best] += p->order[i].work;
    }
}

/* Task id, unless the call is overdue: run by the owner of its (sequence, kv head) (dkv = owner),
 * or adding its dk_ctx, dv_ctx into dk, dv. */
static void run_one(const tr_ctx *x, tr_work *w, int owner, int64_t id, float *dk, float *dv) {
    if (ft_call_overdue(x->call)) return;
    if (owner)
        run_owner(x, w, id);
    else
        run_task(x, w, id, dk, dv);
}

/* One thread's share of the call, inside the parallel region: the context packing, its tasks,
 * and under dkv = private its part of the sum of the copies. */
static void run_thread(const tr_ctx *x, const tr_plan *p) {
    const int64_t ntask = p->ntask, csz = p->csz;
    const tr_task *order = p->order;
    float *privbuf = p->privbuf;
    const int priv = p->priv, owner = p->owner, bal = p->bal;
    const int tid = omp_get_thread_num(), nth = omp_get_num_threads();
    tr_work *w = &p->works[tid];
    if (p->npack) {
#pragma omp for schedule(static)
        for (int64_t i = 0; i < p->npack; i++)
            prepack(x, i);
    }
    float *dk = x->dkc, *dv = x->dvc;
    if (priv && tid > 0) {
        dk = privbuf + (size_t)(tid - 1) * 2 * (size_t)csz;
        dv = dk + csz;
    }
    if (priv) {
        memset(dk, 0, (size_t)csz * sizeof(float));
        memset(dv, 0, (size_t)csz * sizeof(float));
    }
    if (priv && bal == BAL_LPT) {
#pragma omp single
        plan_assign(p, nth);
        for (int64_t i = 0; i < ntask; i++)
            if (p->assign[i] == tid && !ft_call_overdue(x->call)) run_task(x, w, order[i].id, dk, dv);
#pragma omp barrier
    } else if (bal == BAL_STATIC) {
#pragma omp for schedule(static)
        for (int64_t i = 0; i < ntask; i++)
            run_one(x, w, owner, order[i].id, dk, dv);
    } else {
#pragma omp for schedule(dynamic, 1)
        for (int64_t i = 0; i < ntask; i++)
            run_one(x, w, owner, order[i].id, dk, dv);
    }
    if (priv && nth > 1) {
        /* Sum the copies into the outputs in thread order. */
#pragma omp for schedule(static)
        for (int64_t e = 0; e < csz; e++) {
            float sk = x->dkc[e], sv = x->dvc[e];
            for (int t = 1; t < nth; t++) {
                sk += privbuf[(size_t)(t - 1) * 2 * (size_t)csz + (size_t)e];
                sv += privbuf[(size_t)(t - 1) * 2 * (size_t)csz + (size_t)(csz + e)];
            }
            x->dkc[e] = sk;
            x->dvc[e] = sv;
        }
    }
}

static ft_status tr_run(ft_call *c, const ft_config *cfg, ft_err *err) {
    tr_ctx x = ctx_init(c, cfg);
    x.call = c;
    tr_plan p = {0};
    p.threads = cfg->v[P_THREADS];
    p.bal = cfg->v[P_BALANCE];
    p.priv = x.bwd && cfg->v[P_DKV] == DKV_PRIVATE;
    p.owner = x.bwd && !p.priv;
    ft_status s = plan_workspace(&x, &p, c, err);
    if (s) return s;
    plan_order(&x, &p);

    ft_cpu_blas_threads(p.threads);
#pragma omp parallel num_threads(p.threads)
    run_thread(&x, &p);
    return FT_OK;
}

/* ---- registration --------------------------------------------------------------------------- */

FT_CPU_IMPL(attention_train, tr);
