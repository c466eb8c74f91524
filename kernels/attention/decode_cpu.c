/* decode_cpu.c: block attention at inference (SPEC.md attention.decode) on the CPU.
 *
 *   keys(r) = [k_ctx rows of r ; k_blk[r]],  vals(r) = [v_ctx rows of r ; v_blk[r]]
 *   o[r,b,h,:] = softmax(scale * q[r,b,h,:] . keys^T) @ vals,  lse[r,b,h] = log sum exp(...)
 *   query head h reads kv head h / (Hq/Hkv); no mask; ctx_lens ragged, 0 allowed.
 *   window W > 0 (a sliding-window layer): query b (position L + b) keeps only the context rows
 *   p > L + b - W. The keys before the window of query 0 are never read (a request costs
 *   O(W + B) keys whatever L is); query b > 0 masks the b rows at the window's start that query
 *   0 still sees (scores -inf, then P = 0).
 *   causal = 1: query b sees its block's keys 0..b only, the others masked the same way.
 *
 * Online softmax (flash form): the keys of a request go by in tiles; each tile gives a score
 * block S = Q K^T (rows x tile), the running row max m and sum l are updated, the accumulator
 * is rescaled by exp(m_old - m_new) and P V is added. Scores are kept in base 2 (the scale is
 * folded into the queries together with log2 e) so the exponentials are exp2.
 *
 * Napkin math at qwen3-8b, R = 1, L = 4096, B = 16 (Hq 32, Hkv 8, dh 128), fp32: the context K/V is
 * 2*L*Hkv*dh*4 = 33.5 MB (2.1 ms at the 16 GB/s of a 2-thread copy; one thread reads only about 6
 * GB/s), q/o 0.5 MB; FLOPs 4*dh*(L+B)*B*Hq = 1.08 GFLOP (8 ms at the ~136 GFLOP/s of a large sgemm:
 * a 2-core AMD EPYC (Zen 3) VM, 2026-11), so the FLOP term binds, and only if every K/V tile is
 * used by many query rows at once (pack, below) and the reading of K/V overlaps the arithmetic
 * (prefetch, below).
 *
 * Parameters (why each changes how the work is done):
 *   tile     keys per online-softmax step: long tiles make the two products larger (better BLAS
 *            efficiency, fewer rescales of the accumulator) but the score block (rows x tile)
 *            and the K/V tile leave L1/L2.
 *   pack     group: the Hq/Hkv query heads that share a kv head are stacked with the B queries
 *            into one matrix of B*G rows, so every K/V tile is read once and the products are
 *            G times taller. head: each query head alone (B rows): G times the K/V traffic and
 *            skinnier products.
 *   mm       blas: both products are cblas_sgemm on the tile (K/V rows have stride Hkv*dh,
 *            given to BLAS as the leading dimension), which packs its operands on every call.
 *            loops: register-blocked AVX2 kernels (6 rows x 16 columns, 12 accumulators); the
 *            K tile is transposed and the V tile copied into 16-column strips once per tile and
 *            used by every row block, the queries are packed once per task.
 *   span     kv heads a task carries through the keys together (tiles outer, heads inner). A
 *            K/V row of a position holds every head (4 KB at qwen3, one page): one head per
 *            task reads 512 bytes of it and comes back for the next head much later, after the
 *            line and the page's TLB entry are gone (page walks are dear under a hypervisor);
 *            a span of all heads uses the whole row at once. Costs span times the accumulator
 *            state per task and fewer, larger tasks.
 *   parts    each request's context is cut into this many runs of tiles, run as separate tasks
 *            and merged by log-sum-exp in a fixed order: needed when R * Hkv / span tasks cannot
 *            keep the threads busy, or context lengths are ragged. Costs the partial
 *            accumulators (tasks x rows x dh floats) and a merge pass.
 *   threads  OpenMP threads over tasks; every BLAS call runs single-threaded inside a task.
 * Whatever the config, the K/V rows of the next product are prefetched a few lines per register
 * block while the current one computes: a head's rows are 512-byte pieces 4 KB apart, which the
 * hardware prefetcher does not follow.
 * Tasks are independent and write their own output rows or partial slot, and merges run in
 * part order, so results are deterministic for any scheduling.
 *
 * Measured on that VM (qwen3-8b, R = 1, L = 4096, 2 threads, 2026-11): the default takes 11.6-12
 * ms, about 65% of the FLOP floor; BLAS products 13.5 ms (span 8) and 17.8 ms (one kv head per
 * task, no split); pack = head 16.7 ms. With 4 KB pages about a tenth of the time still stalls on
 * TLB misses for the K/V rows (with the K/V cache in huge pages that stall mostly disappears).
 */
#include <cblas.h>
#include <math.h>
#include <omp.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "attention/attention.h"
#include "attention/attention_ref.h"
#include "cpu/cpu.h"

/* The loops kernels are written with AVX2 + FMA intrinsics; elsewhere they fall back to plain C
 * (correct, several times slower), and the default product is BLAS. */
#if defined(__AVX2__) && defined(__FMA__)
#define DP_AVX2 1
#include <immintrin.h>
#else
#define DP_AVX2 0
#endif

/* ---- parameter space ------------------------------------------------------------------------ */

enum { DP_TILE, DP_PACK, DP_MM, DP_SPAN, DP_PARTS, DP_THREADS, DP_NPARAMS };
enum { PACK_GROUP, PACK_HEAD };
enum { MM_BLAS, MM_LOOPS };

static const char *const pack_labels[] = {"group", "head"};
static const char *const mm_labels[] = {"blas", "loops"};

static ft_param dp_params[DP_NPARAMS] = {
    [DP_TILE] = FT_PARAM(
        "tile",
        "keys per online-softmax step: larger products vs score block and K/V tile in cache", NULL,
        128, 32, 128, 512),
    [DP_PACK] = FT_PARAM("pack",
                         "stack the G query heads of a kv head into one B*G-row matrix (K/V read "
                         "once) or run each head alone",
                         pack_labels, PACK_GROUP, 0, 1),
    [DP_MM] = FT_PARAM(
        "mm", "score and PV products by cblas_sgemm on the tile, or register-blocked loops",
        mm_labels, DP_AVX2 ? MM_LOOPS : MM_BLAS, 0, 1),
    [DP_SPAN] = FT_PARAM("span",
                         "kv heads a task carries through the keys together: each K/V row (all "
                         "heads, one page) used at once vs more, smaller tasks",
                         NULL, 8, 1, 2, 8),
    [DP_PARTS] = FT_PARAM(
        "parts", "context of each request split into this many tasks, merged by log-sum-exp", NULL,
        2, 1, 2, 4),
    [DP_THREADS] = FT_THREADS_PARAM("OpenMP threads over tasks"),
};

static const char *const dp_constraints[] = {
    "tile >= the longest context plus B: one such candidate only (the default if it is one, else "
    "the smallest), the others are the same run",
    "span >= Hkv: one such candidate only (the default if it is one, else the smallest), the "
    "others are the same run",
    NULL,
};

/* Candidates of parameter i at or above `bound` all run the same way: is `value` the one kept
 * (the default when it is at or above the bound, else the smallest such)? So the default stays
 * valid at every shape. */
static int dp_kept(int i, int64_t bound, int value, int *kept) {
    const ft_param *p = &dp_params[i];
    *kept = -1;
    if (p->def >= bound)
        *kept = p->def;
    else
        for (int k = 0; k < p->n; k++)
            if (p->values[k] >= bound && (*kept < 0 || p->values[k] < *kept)) *kept = p->values[k];
    return value < bound || value == *kept;
}

static int dp_valid(const ft_call *c, const ft_config *cfg, char *why, size_t n) {
    int dup = 0;
    /* ctx_lens may not be allocated yet: bound the longest key run by Lsum + B. */
    const int64_t keys = c->dim[DC_LSUM] + c->dim[DC_B], Hkv = c->dim[DC_HKV];
    int kept;
    if (!dp_kept(DP_TILE, keys, cfg->v[DP_TILE], &kept)) {
        if (why)
            snprintf(why, n, "tile = %d >= Lsum + B = %lld is the same run as tile = %d",
                     cfg->v[DP_TILE], (long long)keys, kept);
        dup = 1; /* a duplicate, if nothing rules it out below */
    }
    if (!dp_kept(DP_SPAN, Hkv, cfg->v[DP_SPAN], &kept)) {
        if (why)
            snprintf(why, n, "span = %d >= Hkv = %lld is the same run as span = %d",
                     cfg->v[DP_SPAN], (long long)Hkv, kept);
        dup = 1; /* a duplicate, if nothing rules it out below */
    }
    return dup ? FT_CONFIG_DUPLICATE : FT_CONFIG_VALID;
}

/* ---- kernels -------------------------------------------------------------------------------- */

#define RB        6  /* rows of a register block (the AVX2 kernels are written for 6) */
#define CB        16 /* columns of a register block: two AVX vectors */
#define MAX_PARTS 4  /* the largest `parts` candidate (the merge keeps one value per part) */
#define LN2       0.6931471805599453

/* 2^x for x <= 0 (scores minus their running max), relative error about 1e-7: x = k + f with k
 * an integer and |f| <= 1/2, 2^f by its degree-6 Taylor polynomial, 2^k into the exponent bits.
 * (libm's exp2f is a call per element; the AVX2 form below does 8 at a time.) */
static const float exp2_c[7] = {1.5403530393381608e-4f,
                                1.3333558146428443e-3f,
                                9.6181291076284772e-3f,
                                5.5504108664821580e-2f,
                                2.4022650695910071e-1f,
                                6.9314718055994531e-1f,
                                1.0f};

static inline float exp2_neg(float x) {
    x = x < -126.0f ? -126.0f : x;
    const float magic = 12582912.0f; /* 1.5 * 2^23: adding it rounds to an integer */
    const float k = (x + magic) - magic, f = x - k;
    float p = exp2_c[0];
    for (int i = 1; i < 7; i++)
        p = p * f + exp2_c[i];
    union {
        int32_t i;
        float f;
    } e = {.i = ((int32_t)k + 127) << 23};
    return p * e.f;
}

/* s[t] = 2^(s[t] - m) for t < n; returns the sum. (The clamp of exp2_neg keeps GCC from
 * vectorising the plain loop under ISO C's trapping math, hence the explicit AVX2 form.) */
static float exp2_row(float *restrict s, int64_t n, float m) {
    int64_t t = 0;
    float sum = 0.0f;
#if DP_AVX2
    const __m256 vm = _mm256_set1_ps(m), lo = _mm256_set1_ps(-126.0f);
    __m256 acc = _mm256_setzero_ps();
    for (; t + 8 <= n; t += 8) {
        const __m256 x = _mm256_max_ps(_mm256_sub_ps(_mm256_loadu_ps(s + t), vm), lo);
        const __m256 k = _mm256_round_ps(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        const __m256 f = _mm256_sub_ps(x, k);
        __m256 p = _mm256_set1_ps(exp2_c[0]);
        for (int i = 1; i < 7; i++)
            p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(exp2_c[i]));
        const __m256i e =
            _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(k), _mm256_set1_epi32(127)), 23);
        p = _mm256_mul_ps(p, _mm256_castsi256_ps(e));
        _mm256_storeu_ps(s + t, p);
        acc = _mm256_add_ps(acc, p);
    }
    float part[8];
    _mm256_storeu_ps(part, acc);
    for (int i = 0; i < 8; i++)
        sum += part[i];
#endif
    for (; t < n; t++) {
        s[t] = exp2_neg(s[t] - m);
        sum += s[t];
    }
    return sum;
}

/* ---- the loops kernels ----------------------------------------------------------------------
 * Operands are packed per tile so the register-blocked kernels read them at unit stride: the
 * queries of a task in row blocks qp[rb][d][RB], the K tile in strips of CB keys kp[tb][d][CB]
 * (transposed), the V tile in strips of CB columns vp[db][t][CB]. K/V rows in the cache are
 * Hkv*dh floats apart (4 KB at dh 128): read in place, every row of a strip falls in the same
 * L1 set and the strip cannot stay in L1, which is what the packing avoids. */

/* kp[t/CB][d][t%CB] = k[t][d] for t < tlen, 0 up to the next multiple of CB. */
static void pack_k(const float *restrict k, int64_t ld, int64_t tlen, int64_t dh,
                   float *restrict kp) {
    const int64_t tpad = (tlen + CB - 1) / CB * CB;
    int64_t t0 = 0;
#if DP_AVX2
    /* 8 x 8 blocks through registers: 8 row loads, 24 shuffles, 8 stores. */
    if (dh % 8 == 0)
        for (; t0 + 8 <= tlen; t0 += 8)
            for (int64_t d = 0; d < dh; d += 8) {
                const float *src = k + t0 * ld + d;
                __m256 r[8], u[8], v[8];
                for (int i = 0; i < 8; i++)
                    r[i] = _mm256_loadu_ps(src + i * ld);
                for (int i = 0; i < 8; i += 2) {
                    u[i] = _mm256_unpacklo_ps(r[i], r[i + 1]);
                    u[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
                }
                for (int i = 0; i < 8; i += 4) {
                    v[i] = _mm256_shuffle_ps(u[i], u[i + 2], 0x44);
                    v[i + 1] = _mm256_shuffle_ps(u[i], u[i + 2], 0xEE);
                    v[i + 2] = _mm256_shuffle_ps(u[i + 1], u[i + 3], 0x44);
                    v[i + 3] = _mm256_shuffle_ps(u[i + 1], u[i + 3], 0xEE);
                }
                float *dst = kp + (t0 / CB) * dh * CB + d * CB + t0 % CB;
                for (int i = 0; i < 4; i++) {
                    _mm256_storeu_ps(dst + i * CB, _mm256_permute2f128_ps(v[i], v[i + 4], 0x20));
                    _mm256_storeu_ps(dst + (i + 4) * CB,
                                     _mm256_permute2f128_ps(v[i], v[i + 4], 0x31));
                }
            }
#endif
    for (; t0 < tpad; t0++) {
        float *dst = kp + (t0 / CB) * dh * CB + t0 % CB;
        for (int64_t d = 0; d < dh; d++)
            dst[d * CB] = t0 < tlen ? k[t0 * ld + d] : 0.0f;
    }
}

/* vp[d/CB][t][d%CB] = v[t][d] for the whole strips of columns (d < dh / CB * CB). */
static void pack_v(const float *restrict v, int64_t ld, int64_t tlen, int64_t dh,
                   float *restrict vp) {
    for (int64_t t = 0; t < tlen; t++)
        for (int64_t db = 0; db < dh / CB; db++)
            memcpy(vp + (db * tlen + t) * CB, v + t * ld + db * CB, CB * sizeof(float));
}

#if DP_AVX2
/* The accumulators are named variables: GCC keeps an array of twelve __m256 in memory, storing
 * every one back on each iteration. */
#define ACC_DECL(i) __m256 a##i##0, a##i##1
#define ACC_FMA(i, src)                                                                            \
    do {                                                                                           \
        const __m256 b_ = _mm256_broadcast_ss(src);                                                \
        a##i##0 = _mm256_fmadd_ps(b_, x0, a##i##0);                                                \
        a##i##1 = _mm256_fmadd_ps(b_, x1, a##i##1);                                                \
    } while (0)
#define ACC_STORE(i, dst)                                                                          \
    do {                                                                                           \
        _mm256_storeu_ps(dst, a##i##0);                                                            \
        _mm256_storeu_ps((dst) + 8, a##i##1);                                                      \
    } while (0)
/* The accumulators of all RB = 6 rows of a block, and their store to rows ld floats apart. */
#define ACC_DECL_ROWS                                                                              \
    ACC_DECL(0);                                                                                   \
    ACC_DECL(1);                                                                                   \
    ACC_DECL(2);                                                                                   \
    ACC_DECL(3);                                                                                   \
    ACC_DECL(4);                                                                                   \
    ACC_DECL(5)
#define ACC_STORE_ROWS(dst, ld)                                                                    \
    do {                                                                                           \
        ACC_STORE(0, dst);                                                                         \
        ACC_STORE(1, (dst) + (ld));                                                                \
        ACC_STORE(2, (dst) + 2 * (ld));                                                            \
        ACC_STORE(3, (dst) + 3 * (ld));                                                            \
        ACC_STORE(4, (dst) + 4 * (ld));                                                            \
        ACC_STORE(5, (dst) + 5 * (ld));                                                            \
    } while (0)

/* s[RB x CB] = q[RB rows of the block, d-major] . k strip [dh x CB]: 2*RB accumulators. */
static inline void scores_block(int64_t dh, const float *restrict qb, const float *restrict kb,
                                float *restrict s, int64_t lds) {
    ACC_DECL_ROWS;
    a00 = a01 = a10 = a11 = a20 = a21 = a30 = a31 = a40 = a41 = a50 = a51 = _mm256_setzero_ps();
    for (int64_t d = 0; d < dh; d++) {
        const __m256 x0 = _mm256_loadu_ps(kb + d * CB), x1 = _mm256_loadu_ps(kb + d * CB + 8);
        const float *q = qb + d * RB;
        ACC_FMA(0, q);
        ACC_FMA(1, q + 1);
        ACC_FMA(2, q + 2);
        ACC_FMA(3, q + 3);
        ACC_FMA(4, q + 4);
        ACC_FMA(5, q + 5);
    }
    ACC_STORE_ROWS(s, lds);
}

/* o[RB x CB] += p[RB x n] . v strip [n x CB]. */
static inline void pv_block(int64_t n, const float *restrict p, int64_t ldp,
                            const float *restrict vb, float *restrict o, int64_t ldo) {
    ACC_DECL_ROWS;
    a00 = _mm256_loadu_ps(o), a01 = _mm256_loadu_ps(o + 8);
    a10 = _mm256_loadu_ps(o + ldo), a11 = _mm256_loadu_ps(o + ldo + 8);
    a20 = _mm256_loadu_ps(o + 2 * ldo), a21 = _mm256_loadu_ps(o + 2 * ldo + 8);
    a30 = _mm256_loadu_ps(o + 3 * ldo), a31 = _mm256_loadu_ps(o + 3 * ldo + 8);
    a40 = _mm256_loadu_ps(o + 4 * ldo), a41 = _mm256_loadu_ps(o + 4 * ldo + 8);
    a50 = _mm256_loadu_ps(o + 5 * ldo), a51 = _mm256_loadu_ps(o + 5 * ldo + 8);
    for (int64_t k = 0; k < n; k++) {
        const __m256 x0 = _mm256_loadu_ps(vb + k * CB), x1 = _mm256_loadu_ps(vb + k * CB + 8);
        ACC_FMA(0, p + k);
        ACC_FMA(1, p + ldp + k);
        ACC_FMA(2, p + 2 * ldp + k);
        ACC_FMA(3, p + 3 * ldp + k);
        ACC_FMA(4, p + 4 * ldp + k);
        ACC_FMA(5, p + 5 * ldp + k);
    }
    ACC_STORE_ROWS(o, ldo);
}
#else
/* Portable forms of the two block kernels (ISO C forbids contracting a * b + c into an FMA, and
 * the compiler does not keep the accumulators in registers on its own). */
static inline void scores_block(int64_t dh, const float *restrict qb, const float *restrict kb,
                                float *restrict s, int64_t lds) {
    float acc[RB][CB] = {{0}};
    for (int64_t d = 0; d < dh; d++)
        for (int i = 0; i < RB; i++)
            for (int t = 0; t < CB; t++)
                acc[i][t] += qb[d * RB + i] * kb[d * CB + t];
    for (int i = 0; i < RB; i++)
        for (int t = 0; t < CB; t++)
            s[i * lds + t] = acc[i][t];
}

static inline void pv_block(int64_t n, const float *restrict p, int64_t ldp,
                            const float *restrict vb, float *restrict o, int64_t ldo) {
    for (int i = 0; i < RB; i++)
        for (int64_t k = 0; k < n; k++)
            for (int t = 0; t < CB; t++)
                o[i * ldo + t] += p[i * ldp + k] * vb[k * CB + t];
}
#endif

/* One query set (the B*G rows of a kv head under pack = group, the B rows of one query head
 * under pack = head) carried through the keys: its queries (scaled; blas: [rows][dh], loops: row
 * blocks d-major), accumulator, running max and sum, and the kv head it reads. */
typedef struct dp_set {
    float *q, *o, *m;
    double *l;
    int64_t j;
} dp_set;

/* Shared by the sets of a task: the score block (rows x ldt) and the packed K and V tiles. */
typedef struct dp_scratch {
    float *s, *kp, *vp;
} dp_scratch;

typedef struct dp_ctx {
    int64_t B, Hq, Hkv, dh, G, tile, ldt; /* ldt: tile rounded up to CB */
    int64_t W;                            /* sliding window (0: full attention) */
    int causal;                           /* query b sees block keys 0..b only */
    int64_t ng;                           /* query heads per set: G (group) or 1 (head) */
    int mm;
} dp_ctx;

/* Ask for lines [l0, l1) of rows of a K or V tile (rows of dh floats, ld apart; lines of 16
 * floats numbered row by row) to be brought into L2. A row of one kv head is 512 bytes with the
 * other heads' rows between, a pattern the hardware prefetcher does not run ahead of: without
 * this the packing copies stall on every line. The requests are spread over the other
 * product's loop, a few per register block, so they are in flight while it computes instead of
 * overflowing the miss queue in one burst. */
static void prefetch_lines(const float *p, int64_t ld, int64_t dh, int64_t l0, int64_t l1) {
    const int64_t per_row = (dh + 15) / 16;
    for (int64_t l = l0; l < l1; l++)
        __builtin_prefetch(p + l / per_row * ld + l % per_row * 16, 0, 2);
}

/* The two products of a tile, over the tlen keys or values at kv (rows ld floats apart): the
 * scores S = Q K^T into w->s, or O += P V. Meanwhile the pn rows at pf (for the scores the tile's
 * values, for P V the next tile's keys) are prefetched, a share per register block. */
typedef enum { TILE_SCORES, TILE_PV } dp_product;

static void tile_product(const dp_ctx *x, const dp_scratch *w, const dp_set *q, dp_product op,
                         int64_t rows, const float *kv, int64_t ld, int64_t tlen, const float *pf,
                         int64_t pn) {
    const int64_t dh = x->dh, ldt = x->ldt, nl = pn * ((dh + 15) / 16);
    const int pv = op == TILE_PV;
    if (x->mm == MM_BLAS) {
        prefetch_lines(pf, ld, dh, 0, nl);
        if (pv)
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)rows, (int)dh, (int)tlen,
                        1.0f, w->s, (int)ldt, kv, (int)ld, 1.0f, q->o, (int)dh);
        else
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)rows, (int)tlen, (int)dh,
                        1.0f, q->q, (int)dh, kv, (int)ld, 0.0f, w->s, (int)ldt);
        return;
    }
    /* One strip of CB columns stays in L1 while every row block goes by: CB keys (dh * CB floats,
     * 8 KB at dh 128) for the scores, CB value columns (tlen * CB floats) for P V, whose last
     * dh % CB columns are summed after. */
    if (pv) pack_v(kv, ld, tlen, dh, w->vp);
    else pack_k(kv, ld, tlen, dh, w->kp);
    const int64_t end = pv ? dh / CB * CB : tlen, nb = (rows + RB - 1) / RB;
    const int64_t nslots = (pv ? dh / CB : (tlen + CB - 1) / CB) * nb;
    for (int64_t j = 0, slot = 0; j < end; j += CB)
        for (int64_t i = 0; i < rows; i += RB, slot++) {
            prefetch_lines(pf, ld, dh, slot * nl / nslots, (slot + 1) * nl / nslots);
            if (pv) pv_block(tlen, w->s + i * ldt, ldt, w->vp + j * tlen, q->o + i * dh + j, dh);
            else scores_block(dh, q->q + i * dh, w->kp + j * dh, w->s + i * ldt + j, ldt);
        }
    if (!pv) return;
    if (end == 0) prefetch_lines(pf, ld, dh, 0, nl);
    for (int64_t r = 0; end < dh && r < rows; r++) /* dh not a multiple of CB: the rest */
        for (int64_t t = 0; t < tlen; t++) {
            const float p = w->s[r * ldt + t];
            for (int64_t d = end; d < dh; d++)
                q->o[r * dh + d] += p * kv[t * ld + d];
        }
}

/* Online-softmax update of every row for a tile of tlen scores: P = 2^(S - m_new) in place,
 * l = l * 2^(m_old - m_new) + sum P, the accumulator row rescaled by the same factor. */
static void tile_softmax(const dp_ctx *x, const dp_scratch *w, const dp_set *q, int64_t rows,
                         int64_t tlen) {
    const int64_t dh = x->dh, ldt = x->ldt;
    for (int64_t i = 0; i < rows; i++) {
        float *restrict s = w->s + i * ldt;
        float mx = -INFINITY;
#pragma omp simd reduction(max : mx)
        for (int64_t t = 0; t < tlen; t++)
            mx = s[t] > mx ? s[t] : mx;
        const float mold = q->m[i], mnew = mx > mold ? mx : mold;
        if (mnew == -INFINITY) { /* every key so far is outside the row's window */
            memset(s, 0, (size_t)tlen * sizeof(float));
            continue;
        }
        const float sum = exp2_row(s, tlen, mnew);
        if (mnew != mold) {
            const float corr = exp2f(mold - mnew); /* 0 on the first tile (mold = -inf) */
            q->l[i] *= corr;
            float *o = q->o + i * dh;
#pragma omp simd
            for (int64_t d = 0; d < dh; d++)
                o[d] *= corr;
        }
        q->l[i] += sum;
        q->m[i] = mnew;
    }
}

/* Under a window, set the scores of the context rows [t0, t0 + tlen) that query b (position
 * qpos0 + b) does not see, those before its window, to v: -inf before the softmax, 0 after (the
 * softmax's clamped exponent would leave 2^-126 there). */
static void mask_window(const dp_ctx *x, const dp_scratch *w, int64_t rows, int64_t qpos0,
                        int64_t t0, int64_t tlen, float v) {
    for (int64_t i = 0; x->W && i < rows; i++) {
        const int64_t lo = ft_ref_window_lo(x->W, qpos0 + i / x->ng);
        for (int64_t t = 0; t < tlen && t0 + t < lo; t++)
            w->s[i * x->ldt + t] = v;
    }
}

/* Under causal, set the scores of the block keys [t0, t0 + tlen) past query b's own (t > b) to
 * v, as mask_window does for the context. */
static void mask_causal(const dp_ctx *x, const dp_scratch *w, int64_t rows, int64_t t0,
                        int64_t tlen, float v) {
    for (int64_t i = 0; x->causal && i < rows; i++) {
        const int64_t first = i / x->ng + 1 - t0; /* first key of the tile it does not see */
        for (int64_t t = first > 0 ? first : 0; t < tlen; t++)
            w->s[i * x->ldt + t] = v;
    }
}

/* One run of keys of one request for nsets query sets: context rows [c0, c1) (kc, vc: the
 * request's row 0, kv head 0) and, when kb is set, the B block rows. Every set starts from
 * m = -inf, l = 0, O = 0. Tiles are the outer loop and sets the inner one, so the rows of a tile
 * (all kv heads of a position share a 4 KB row and its page) are used by every set of the task
 * while they are in cache and in the TLB. A tile never straddles the two buffers. */
static void attend_run(const dp_ctx *x, const dp_scratch *w, const dp_set *sets, int64_t nsets,
                       int64_t rows, const float *kc, const float *vc, int64_t c0, int64_t c1,
                       const float *kb, const float *vb, int64_t qpos0) {
    const int64_t ld = x->Hkv * x->dh, T = x->tile;
    const int64_t nctx = (c1 - c0 + T - 1) / T, ntiles = nctx + (kb ? (x->B + T - 1) / T : 0);
    for (int64_t s = 0; s < nsets; s++) {
        for (int64_t i = 0; i < rows; i++) {
            sets[s].m[i] = -INFINITY;
            sets[s].l[i] = 0.0;
        }
        memset(sets[s].o, 0, (size_t)(rows * x->dh) * sizeof(float));
    }
    for (int64_t i = 0; i < ntiles; i++) {
        /* Tile i: context rows from c0, then the block's rows. */
        const int64_t t0 = i < nctx ? c0 + i * T : (i - nctx) * T, end = i < nctx ? c1 : x->B;
        const int64_t tlen = end - t0 < T ? end - t0 : T;
        const float *k = (i < nctx ? kc : kb) + t0 * ld, *v = (i < nctx ? vc : vb) + t0 * ld;
        /* The tile after this one, whose keys the last set prefetches. */
        const float *nk = k;
        int64_t nlen = 0;
        if (i + 1 < ntiles) {
            const int64_t n0 = i + 1 < nctx ? c0 + (i + 1) * T : (i + 1 - nctx) * T;
            const int64_t nend = i + 1 < nctx ? c1 : x->B;
            nk = (i + 1 < nctx ? kc : kb) + n0 * ld;
            nlen = nend - n0 < T ? nend - n0 : T;
        }
        for (int64_t s = 0; s < nsets; s++) {
            const int64_t j = sets[s].j;
            tile_product(x, w, &sets[s], TILE_SCORES, rows, k + j * x->dh, ld, tlen, v + j * x->dh,
                         tlen);
            if (i < nctx) mask_window(x, w, rows, qpos0, t0, tlen, -INFINITY);
            else mask_causal(x, w, rows, t0, tlen, -INFINITY);
            tile_softmax(x, w, &sets[s], rows, tlen);
            if (i < nctx) mask_window(x, w, rows, qpos0, t0, tlen, 0.0f);
            else mask_causal(x, w, rows, t0, tlen, 0.0f);
            if (s + 1 < nsets)
                tile_product(x, w, &sets[s], TILE_PV, rows, v + j * x->dh, ld, tlen,
                             k + sets[s + 1].j * x->dh, sets[s + 1].j == j ? 0 : tlen);
            else
                tile_product(x, w, &sets[s], TILE_PV, rows, v + j * x->dh, ld, tlen,
                             nk + sets[0].j * x->dh, nlen);
        }
    }
}

/* ---- launcher ------------------------------------------------------------------------------- */

/* The call as its tasks see it: the kernels' view (x), the sizes, the task grid, the tensors and
 * where each thread's and each task's scratch lies. */
typedef struct dp_plan {
    dp_ctx x;
    int64_t R, B, Hq, Hkv, dh, G;
    int threads, parts;
    int64_t span, groups, spk, nsmax, rows, rpad, ntasks;
    float scale2;
    const float *q, *kctx, *vctx, *kblk, *vblk;
    const int32_t *lens;
    float *o, *lse;
    size_t q_b, m_b, l_b, acc_b, s_b, kp_b, vp_b, sets_b, per_thread, slot_b;
    int64_t *off;    /* first context row of each request */
    char *thread_ws; /* per_thread bytes a thread */
    char *part_ws;   /* parts > 1: slot_b bytes a task */
    ft_call *call;   /* for its deadline (ft_call_overdue) */
} dp_plan;

/* The call's sizes, tensors and task grid. */
static dp_plan plan_init(ft_call *c, const ft_config *cfg) {
    const int64_t R = c->dim[DC_R], B = c->dim[DC_B], Hq = c->dim[DC_HQ], Hkv = c->dim[DC_HKV];
    const int64_t dh = c->dim[DC_DH], G = Hq / Hkv;
    const int threads = cfg->v[DP_THREADS], parts = cfg->v[DP_PARTS];
    dp_ctx x = {.B = B, .Hq = Hq, .Hkv = Hkv, .dh = dh, .G = G, .tile = cfg->v[DP_TILE]};
    x.ldt = (x.tile + CB - 1) / CB * CB;
    x.ng = cfg->v[DP_PACK] == PACK_GROUP ? G : 1;
    x.mm = cfg->v[DP_MM];
    x.W = c->attrs.window;
    x.causal = c->attrs.causal;
    const int64_t span = cfg->v[DP_SPAN] < Hkv ? cfg->v[DP_SPAN] : Hkv; /* kv heads per task */
    const int64_t groups = (Hkv + span - 1) / span; /* kv head groups per request */
    const int64_t spk = G / x.ng;                   /* sets per kv head */
    const int64_t nsmax = span * spk;               /* sets per task (the last may have fewer) */
    const int64_t rows = B * x.ng;                  /* query rows of a set */
    const int64_t rpad = (rows + RB - 1) / RB * RB;
    const int64_t ntasks = R * groups * parts;
    const float scale2 = (float)(ft_attn_scale(&c->attrs, dh) * 1.4426950408889634); /* log2 e */
    const float *q = c->t[DC_Q]->data, *kctx = c->t[DC_KCTX]->data, *vctx = c->t[DC_VCTX]->data;
    const float *kblk = c->t[DC_KBLK]->data, *vblk = c->t[DC_VBLK]->data;
    const int32_t *lens = c->t[DC_LENS]->data;
    float *o = c->t[DC_O]->data, *lse = c->t[DC_LSE]->data;
    return (dp_plan){.x = x,
                     .R = R,
                     .B = B,
                     .Hq = Hq,
                     .Hkv = Hkv,
                     .dh = dh,
                     .G = G,
                     .threads = threads,
                     .parts = parts,
                     .span = span,
                     .groups = groups,
                     .spk = spk,
                     .nsmax = nsmax,
                     .rows = rows,
                     .rpad = rpad,
                     .ntasks = ntasks,
                     .scale2 = scale2,
                     .q = q,
                     .kctx = kctx,
                     .vctx = vctx,
                     .kblk = kblk,
                     .vblk = vblk,
                     .lens = lens,
                     .o = o,
                     .lse = lse};
}

/* Workspace: request offsets; per thread the shared tile scratch and the sets' queries,
 * accumulators, maxima and sums; with parts > 1 the accumulators, maxima and sums live in a
 * slot per task instead, for the merge. */
static ft_status plan_workspace(dp_plan *plan, ft_call *c, ft_err *err) {
    const dp_ctx *x = &plan->x;
    const int64_t R = plan->R, dh = plan->dh, rpad = plan->rpad, nsmax = plan->nsmax;
    const int threads = plan->threads, parts = plan->parts;
    const size_t off_b = (size_t)R * sizeof(int64_t);
    const size_t q_b = (size_t)(rpad * dh) * sizeof(float);
    const size_t s_b = (size_t)(rpad * x->ldt) * sizeof(float);
    const size_t kp_b = x->mm == MM_LOOPS ? (size_t)(dh * x->ldt) * sizeof(float) : 0;
    const size_t vp_b = x->mm == MM_LOOPS ? (size_t)(dh * x->tile) * sizeof(float) : 0;
    const size_t m_b = (size_t)rpad * sizeof(float), l_b = (size_t)rpad * sizeof(double);
    const size_t acc_b = ft_ws_size(q_b) + ft_ws_size(m_b) + ft_ws_size(l_b); /* o, m, l */
    const size_t sets_b = (size_t)nsmax * sizeof(dp_set);
    const size_t per_thread = ft_ws_size(sets_b) + ft_ws_size(s_b) + ft_ws_size(kp_b) +
                              ft_ws_size(vp_b) + (size_t)nsmax * (ft_ws_size(q_b) + acc_b);
    const size_t slot_b = (size_t)nsmax * acc_b;
    const size_t part_b = parts > 1 ? (size_t)plan->ntasks * slot_b : 0;
    char *ws = ft_ws_get(c->ws, ft_ws_size(off_b) + (size_t)threads * per_thread + part_b, err);
    if (!ws) return err ? err->status : FT_ENOMEM;
    plan->off = ft_ws_carve(&ws, off_b);
    plan->thread_ws = ft_ws_carve(&ws, (size_t)threads * per_thread);
    plan->part_ws = ft_ws_carve(&ws, part_b);
    for (int64_t r = 0, acc = 0; r < R; r++) {
        plan->off[r] = acc;
        acc += plan->lens[r];
    }
    plan->q_b = q_b;
    plan->m_b = m_b;
    plan->l_b = l_b;
    plan->acc_b = acc_b;
    plan->s_b = s_b;
    plan->kp_b = kp_b;
    plan->vp_b = vp_b;
    plan->sets_b = sets_b;
    plan->per_thread = per_thread;
    plan->slot_b = slot_b;
    return FT_OK;
}

/* The query sets of the task for request r, kv heads from j0 (nsets of them, accumulating into
 * slot when parts > 1). */
static void task_sets(const dp_plan *plan, dp_set *sets, int64_t nsets, int64_t r, int64_t j0,
                      char *slot) {
    const dp_ctx *x = &plan->x;
    const int64_t B = plan->B, Hq = plan->Hq, dh = plan->dh, G = plan->G;
    const float *q = plan->q, scale2 = plan->scale2;
    const size_t q_b = plan->q_b, m_b = plan->m_b, l_b = plan->l_b;
    for (int64_t s = 0; s < nsets; s++) {
        const int64_t h0 = j0 * G + s * x->ng; /* first query head of the set */
        sets[s].j = h0 / G;
        if (plan->parts > 1) { /* accumulate into this task's partial slot */
            sets[s].o = ft_ws_carve(&slot, q_b);
            sets[s].m = ft_ws_carve(&slot, m_b);
            sets[s].l = ft_ws_carve(&slot, l_b);
        }
        /* Query rows: row b*ng + e is query b of head h0 + e, times scale * log2 e;
         * blas takes them as rows, loops as blocks of RB rows stored d-major. */
        for (int64_t b = 0; b < B; b++)
            for (int64_t e = 0; e < x->ng; e++) {
                const int64_t row = b * x->ng + e;
                const float *src = q + ((r * B + b) * Hq + h0 + e) * dh;
                if (x->mm == MM_BLAS) {
                    float *dst = sets[s].q + row * dh;
#pragma omp simd
                    for (int64_t d = 0; d < dh; d++)
                        dst[d] = src[d] * scale2;
                } else {
                    float *dst = sets[s].q + (row / RB) * dh * RB + row % RB;
                    for (int64_t d = 0; d < dh; d++)
                        dst[d * RB] = src[d] * scale2;
                }
            }
    }
}

/* One task: part p of request r for kv head group g; with one part it writes o and lse. */
static void run_task(const dp_plan *plan, const dp_scratch *w, dp_set *sets, int64_t task) {
    const dp_ctx *x = &plan->x;
    const int64_t B = plan->B, Hq = plan->Hq, Hkv = plan->Hkv, dh = plan->dh, G = plan->G;
    const int64_t span = plan->span, groups = plan->groups, spk = plan->spk, rows = plan->rows;
    const int parts = plan->parts;
    float *o = plan->o, *lse = plan->lse;
    const int64_t p = task % parts, g = task / parts % groups, r = task / parts / groups;
    const int64_t j0 = g * span, j1 = j0 + span < Hkv ? j0 + span : Hkv;
    const int64_t nsets = (j1 - j0) * spk, L = plan->lens[r];
    task_sets(plan, sets, nsets, r, j0, plan->part_ws + (size_t)task * plan->slot_b);
    /* Part p covers context tiles [p*nt/parts, (p+1)*nt/parts) of the rows from cs (the start of
     * query 0's window, 0 without one); the last part also takes the block. */
    const int64_t lo = ft_ref_window_lo(x->W, L), cs = lo < L ? lo : L;
    const int64_t nt = (L - cs + x->tile - 1) / x->tile;
    const int64_t c0 = cs + p * nt / parts * x->tile;
    const int64_t e1 = cs + (p + 1) * nt / parts * x->tile, c1 = e1 < L ? e1 : L;
    const int last = p == parts - 1;
    const int64_t off = plan->off[r];
    attend_run(x, w, sets, nsets, rows, plan->kctx + off * Hkv * dh, plan->vctx + off * Hkv * dh,
               c0, c1, last ? plan->kblk + r * B * Hkv * dh : NULL,
               last ? plan->vblk + r * B * Hkv * dh : NULL, L);
    for (int64_t s = 0; parts == 1 && s < nsets; s++)
        for (int64_t b = 0; b < B; b++)
            for (int64_t e = 0; e < x->ng; e++) {
                const int64_t row = b * x->ng + e;
                const int64_t out = (r * B + b) * Hq + j0 * G + s * x->ng + e;
                const float inv = (float)(1.0 / sets[s].l[row]);
#pragma omp simd
                for (int64_t d = 0; d < dh; d++)
                    o[out * dh + d] = sets[s].o[row * dh + d] * inv;
                lse[out] = (float)((sets[s].m[row] + log2(sets[s].l[row])) * LN2);
            }
}

/* Merge the parts of (request, kv head group) u in part order. */
static void merge_parts(const dp_plan *plan, int64_t u) {
    const dp_ctx *x = &plan->x;
    const int64_t B = plan->B, Hq = plan->Hq, Hkv = plan->Hkv, dh = plan->dh, G = plan->G;
    const int64_t span = plan->span, groups = plan->groups, spk = plan->spk, rows = plan->rows;
    const int parts = plan->parts;
    const size_t q_b = plan->q_b, m_b = plan->m_b, l_b = plan->l_b, acc_b = plan->acc_b;
    float *o = plan->o, *lse = plan->lse;
    const int64_t r = u / groups, j0 = u % groups * span;
    const int64_t j1 = j0 + span < Hkv ? j0 + span : Hkv, nsets = (j1 - j0) * spk;
    for (int64_t s = 0; s < nsets; s++)
        for (int64_t row = 0; row < rows; row++) {
            const int64_t b = row / x->ng, e = row % x->ng;
            const int64_t out = (r * B + b) * Hq + j0 * G + s * x->ng + e;
            float *po[MAX_PARTS], pm[MAX_PARTS], f[MAX_PARTS];
            double pl[MAX_PARTS];
            float mmax = -INFINITY;
            for (int p = 0; p < parts; p++) {
                char *at = plan->part_ws + (size_t)(u * parts + p) * plan->slot_b + s * acc_b;
                po[p] = (float *)ft_ws_carve(&at, q_b) + row * dh;
                pm[p] = ((float *)ft_ws_carve(&at, m_b))[row];
                pl[p] = ((double *)ft_ws_carve(&at, l_b))[row];
                mmax = pm[p] > mmax ? pm[p] : mmax;
            }
            double l = 0.0;
            for (int p = 0; p < parts; p++) {
                f[p] = exp2f(pm[p] - mmax); /* 0 for an empty part */
                l += pl[p] * f[p];
            }
            float *dst = o + out * dh;
            for (int64_t d = 0; d < dh; d++) {
                float acc = 0.0f;
                for (int p = 0; p < parts; p++)
                    acc += po[p][d] * f[p];
                dst[d] = (float)(acc / l);
            }
            lse[out] = (float)((mmax + log2(l)) * LN2);
        }
}

/* One thread's share, inside the parallel region: its scratch, its tasks, then its merges. */
static void run_thread(const dp_plan *plan) {
    char *mine = plan->thread_ws + (size_t)omp_get_thread_num() * plan->per_thread;
    dp_set *sets = ft_ws_carve(&mine, plan->sets_b);
    dp_scratch w;
    w.s = ft_ws_carve(&mine, plan->s_b);
    w.kp = ft_ws_carve(&mine, plan->kp_b);
    w.vp = ft_ws_carve(&mine, plan->vp_b);
    for (int64_t s = 0; s < plan->nsmax; s++) {
        sets[s].q = ft_ws_carve(&mine, plan->q_b);
        sets[s].o = ft_ws_carve(&mine, plan->q_b);
        sets[s].m = ft_ws_carve(&mine, plan->m_b);
        sets[s].l = ft_ws_carve(&mine, plan->l_b);
        /* Padding rows of the queries stay zero: the loops kernels compute and drop them. */
        memset(sets[s].q, 0, plan->q_b);
    }

#pragma omp for schedule(dynamic, 1)
    for (int64_t task = 0; task < plan->ntasks; task++)
        if (!ft_call_overdue(plan->call)) run_task(plan, &w, sets, task);

    if (plan->parts > 1) {
#pragma omp for schedule(static)
        for (int64_t u = 0; u < plan->R * plan->groups; u++)
            merge_parts(plan, u);
    }
}

static ft_status dp_run(ft_call *c, const ft_config *cfg, ft_err *err) {
    dp_plan plan = plan_init(c, cfg);
    plan.call = c;
    if (plan.R == 0) return FT_OK;
    /* Every BLAS call below runs inside the parallel region on its own thread; a team of one
     * thread is not a parallel region to OpenBLAS, which would otherwise fan out. */
    ft_cpu_blas_threads(1);
    ft_status s = plan_workspace(&plan, c, err);
    if (s) return s;

#pragma omp parallel num_threads(plan.threads)
    run_thread(&plan);
    return FT_OK;
}

/* ---- registration --------------------------------------------------------------------------- */

FT_CPU_IMPL(attention_decode, dp);
