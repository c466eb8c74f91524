/* loss_cpu.c: the LM head and weighted cross entropy on the CPU, forward and backward in one call.
 *
 *   z[m,:] = h[m,:] @ w_lm^T,  ce[m] = logsumexp(z[m,:]) - z[m,labels[m]],  q[m] = exp(-ce[m])
 *   w = per-block weights (loss_weights.c),  loss = sum_m w[m] ce[m] / denom
 *   dz[m,:] = (w[m]/denom) (softmax(z[m,:]) - onehot(labels[m])),  dh = dz @ w_lm,
 *   dw_lm = dz^T @ h  (want_dw)                                                   (SPEC.md loss)
 *
 * Napkin math at the benchmark shape (qwen3-4b, H = 2560, V = 32768, 32 blocks of 16: M = 512):
 * each GEMM is 2*M*V*H = 86 GFLOP; the minimal work is the logits and dh GEMMs, 172 GFLOP (258
 * with dw_lm). A 2-core AMD EPYC (Zen 3) VM ran (2026-11) a 2048^3 sgemm at about 145
 * GFLOP/s and a 2-thread streaming copy at about 17 GB/s, so its floor is 1.19 s (1.78 s with
 * dw_lm). w_lm and dw_lm are 335 MB each, the logits 64 MB. A chunk of R rows streams w_lm
 * twice (logits, dh) for
 * 4*R*V*H FLOPs, R/2 flops per byte: one block (R ~ 14 scored rows) sits at the bandwidth ridge
 * (145/17 = 8.5 flops per byte) and OpenBLAS runs such skinny GEMMs far below either ceiling;
 * from R ~ 100 the GEMMs are compute-bound. dw_lm += dz^T @ h reads and writes all of dw_lm once
 * per chunk, so it favours few, tall chunks. Rows that are not scored (every block's anchor and
 * mask = 0) never enter a GEMM: each chunk packs its scored rows first, and every buffer is
 * sized by the fullest chunk's scored rows (86% of M at the preset's mask; the FLOP count and the
 * floor above count all M rows, so the packed kernel can beat that floor).
 *
 * Strategies (parameter `strategy`):
 *   materialize      per chunk of whole blocks, the chunk's logits [R, V] in scratch, softmax in
 *                    place, then dh = dz @ w_lm and dw_lm += dz^T @ h (the Liger-Kernel shape):
 *                    two GEMMs per chunk (three with dw_lm), scratch R*V*4 bytes.
 *   online           vocab tiles with a running max and sum per row, so no logits row exists
 *                    whole: pass 1 computes each row's logsumexp and target logit, then the
 *                    weights; pass 2 recomputes each tile and accumulates dh (and dw_lm) (the
 *                    Cut-Cross-Entropy shape): three GEMMs per chunk (four with dw_lm), so at most
 *                    2/3 (3/4) of the roofline, for R*vtile*4 bytes of scratch per thread.
 *   materialize_all  one [M, V] logits buffer: a single chunk, so w_lm and dw_lm are streamed
 *                    once each; the only strategy allowed M*V*4 bytes (capped at 1 GiB).
 *
 * Measured at the benchmark shape, scheme dpace (median, the machine shared with other jobs):
 * default (materialize, chunk 16, vocab, 2 threads) 1.27 s, about the floor, with 34 MiB of
 * scratch (1.78 s with dw_lm); online at best (chunk 32, vtile 4096, vocab) about 1.7 s (2.2 s
 * with dw_lm, where its extra GEMM costs less); chunk 1 about 5 s, where OpenBLAS's skinny GEMMs
 * bind; online with parallel=blas and small tiles pays a threaded GEMM per tile (up to 10 s).
 *
 * Why each parameter matters:
 *   chunk     blocks per chunk (whole blocks: D-PACE weights need q of every row of a block).
 *             Sets the GEMMs' M dimension: the flops per byte of w_lm read, the number of
 *             passes over w_lm (and dw_lm), and the scratch (R*V*4 when materialized).
 *   vtile     online: vocab columns per tile. Small tiles keep the tile's logits in L2 between
 *             the GEMM and the softmax and the w_lm tile in L3 between the recompute and the dh
 *             GEMM; large tiles give BLAS longer GEMMs and fewer calls.
 *   parallel  blas: OpenBLAS threads each GEMM over its whole extent and the softmax rows are
 *             split among the threads; vocab: each thread owns a contiguous vocab range and runs
 *             single-threaded GEMMs on it (no synchronisation inside the GEMMs, each thread
 *             streams its own part of w_lm and writes its own rows of dw_lm), then the per-range
 *             row statistics and dh partial sums are combined in range order ([threads, R, H]
 *             more scratch).
 *   threads   the cores used.
 *   norm_pass final_norm = 1 only: where the drafter's final RMSNorm runs. chunk: each chunk
 *             normalises the rows it packs (hn never exists whole, the row is in cache for
 *             the GEMMs) and turns its dh rows into the un-normed h's gradient right after its
 *             backward; separate: one pass over all M rows before the chunks (an [M, H] hn
 *             buffer, M*H*4 more bytes of scratch and traffic) and one after them.
 *
 * The final norm (final_norm = 1): r = 1/sqrt(mean(h^2) + eps), hn = h*r*g_norm feeds the LM
 * head and dw_lm; the backward turns dhn into dh = r*u - r^3*h*(u.h)/H with u = dhn*g_norm and
 * accumulates dg = sum_m dhn*h*r (double, rows in order, columns split among the threads).
 * O(M*H) each way, about ten flops and two passes over an [M, H] row block per element against
 * the GEMMs' 4*V flops per element of h: under 0.01% of the work at V = 32768.
 *
 * Precision: logsumexp is max-subtracted; exp sums are accumulated in float over 512 columns
 * and in double across them; the per-row weights, the loss and the denominator are double.
 * Determinism: every reduction has a fixed order for a fixed config and thread count (OpenBLAS
 * partitions GEMMs over M and N, never K).
 */
#include <cblas.h>
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <string.h>

#include "cpu/cpu.h"
#include "loss/loss.h"
#include "loss/loss_ref.h"

/* ---- parameter space ---------------------------------------------------------------------- */

enum { LSS_MATERIALIZE, LSS_ONLINE, LSS_MATERIALIZE_ALL };
enum { LSS_PAR_BLAS, LSS_PAR_VOCAB };
enum { LSS_NORM_CHUNK, LSS_NORM_SEPARATE };
enum { P_STRATEGY, P_CHUNK, P_VTILE, P_PARALLEL, P_THREADS, P_NORM, P_COUNT };

#define LSS_DEF_CHUNK  16
#define LSS_DEF_VTILE  4096
#define LSS_MAX_LOGITS ((int64_t)1 << 30) /* bytes of one materialized logits buffer */
#define LSS_SEG        512                /* columns summed in float before adding in double */
#define LSS_ALIGN      16                 /* vocab ranges start on 64-byte boundaries */

static const char *const strategy_names[] = {"materialize", "online", "materialize_all"};
static const char *const parallel_names[] = {"blas", "vocab"};
static const char *const norm_pass_names[] = {"chunk", "separate"};

static ft_param loss_params[P_COUNT] = {
    [P_STRATEGY] =
        FT_PARAM("strategy",
                 "materialize: chunk logits in scratch, 2 GEMMs; online: vocab tiles with a "
                 "running logsumexp, 3 GEMMs, tiny scratch; materialize_all: one M x V buffer",
                 strategy_names, LSS_MATERIALIZE, 0, 1, 2),
    [P_CHUNK] = FT_PARAM("chunk",
                         "blocks per chunk: the GEMMs' row count, i.e. flops per byte of w_lm "
                         "streamed, passes over w_lm and dw_lm, and the logits scratch",
                         NULL, LSS_DEF_CHUNK, 1, 2, 4, 8, 16, 32),
    [P_VTILE] = FT_PARAM("vtile",
                         "online: vocab columns per tile: cache residency of the logits tile and "
                         "the w_lm tile against the length of each GEMM",
                         NULL, LSS_DEF_VTILE, 256, 1024, 4096),
    [P_PARALLEL] =
        FT_PARAM("parallel",
                 "blas: OpenBLAS threads each GEMM; vocab: each thread owns a vocab range with its "
                 "own single-threaded GEMMs, partial sums combined in order",
                 parallel_names, LSS_PAR_VOCAB, 0, 1),
    [P_THREADS] = FT_THREADS_PARAM("cores used"),
    [P_NORM] =
        FT_PARAM("norm_pass",
                 "final_norm: chunk: the RMSNorm fused into each chunk's packing and its dh rows; "
                 "separate: one pass over all rows before and after (M*H*4 bytes of hn)",
                 norm_pass_names, LSS_NORM_CHUNK, 0, 1),
};

static const char *const loss_constraints[] = {
    "chunk: of the candidates covering the whole batch (all the same one chunk) only the "
    "default, or the smallest if the default does not cover it; materialize_all takes chunk's "
    "default",
    "vtile: only online uses it; the other strategies take its default",
    "parallel=blas needs threads > 1 (with one thread it is parallel=vocab)",
    "materialize: chunk*B*V*4 bytes, materialize_all: M*V*4 bytes of logits must fit in 1 GiB",
    "norm_pass: only final_norm=1 uses it; otherwise it keeps its default",
    NULL};

static int param_default_index_ok(int i, int value) { return value == loss_params[i].def; }

static int loss_valid(const ft_call *c, const ft_config *cfg, char *why, size_t n) {
    int dup = 0;
    const int strategy = cfg->v[P_STRATEGY], chunk = cfg->v[P_CHUNK];
    const int64_t B = c->attrs.loss.B, M = c->dim[LS_M], V = c->dim[LS_V];
    const int64_t nblk = B > 0 ? M / B : 0;
    if (strategy == LSS_MATERIALIZE_ALL) {
        if (!param_default_index_ok(P_CHUNK, chunk)) {
            snprintf(why, n, "materialize_all has one chunk: chunk keeps its default");
            return 0;
        }
        if (M * V * (int64_t)sizeof(float) > LSS_MAX_LOGITS) {
            snprintf(why, n, "materialize_all: M*V logits need more than 1 GiB");
            return 0;
        }
    } else {
        /* Chunks of at least as many blocks as the batch has all run it as one chunk. */
        const int kept = ft_param_kept(&loss_params[P_CHUNK], chunk, nblk);
        if (kept != chunk) {
            snprintf(why, n, "chunk=%d: the batch has %lld blocks (chunk=%d covers it)", chunk,
                     (long long)nblk, kept);
            dup = 1; /* a duplicate, if nothing rules it out below */
        }
        if (strategy == LSS_MATERIALIZE &&
            (int64_t)chunk * B * V * (int64_t)sizeof(float) > LSS_MAX_LOGITS) {
            snprintf(why, n, "materialize: chunk*B*V logits need more than 1 GiB");
            return 0;
        }
    }
    if (strategy != LSS_ONLINE && !param_default_index_ok(P_VTILE, cfg->v[P_VTILE])) {
        snprintf(why, n, "vtile only applies to strategy=online");
        return 0;
    }
    if (!c->attrs.loss.final_norm && !param_default_index_ok(P_NORM, cfg->v[P_NORM])) {
        snprintf(why, n, "norm_pass only applies to final_norm=1");
        return 0;
    }
    if (cfg->v[P_PARALLEL] == LSS_PAR_BLAS && cfg->v[P_THREADS] < 2) {
        snprintf(why, n, "parallel=blas with one thread is parallel=vocab");
        return 0;
    }
    return dup ? FT_CONFIG_DUPLICATE : FT_CONFIG_VALID;
}

/* ---- row kernels -------------------------------------------------------------------------- */

/* exp(x) in float for the softmax (x <= 0 up to rounding), written so GCC vectorises it
 * without -ffast-math: Cody-Waite reduction by ln 2 and a degree-6 polynomial on [-ln2/2, ln2/2]
 * (the Cephes expf coefficients, about 1 ulp). x is clamped to [-87, 88] so 2^n stays a normal
 * float (exp(-87) = 2e-38 is zero to every sum it enters); the clamp works on the float's bits
 * mapped to a monotone integer key, because a float compare-and-select is not if-converted under
 * the default -ftrapping-math. Rounding to the nearest n uses the 1.5 * 2^23 shifter. */
static inline float exp_fast(float x) {
    union {
        float f;
        int32_t i;
    } u = {.f = x};
    int32_t k = u.i ^ ((u.i >> 31) & 0x7fffffff);         /* ordered like x */
    const int32_t lo = (int32_t)0xc2ae0000u ^ 0x7fffffff; /* key of -87.0f */
    const int32_t hi = 0x42b00000;                        /* key of 88.0f */
    k = k < lo ? lo : k;
    k = k > hi ? hi : k;
    u.i = k ^ ((k >> 31) & 0x7fffffff);
    x = u.f;
    const float n = (x * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
    float r = x - n * 0.693359375f;
    r = r + n * 2.12194440e-4f;
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    const float e = p * r * r + r + 1.0f;
    union {
        int32_t i;
        float f;
    } scale = {.i = ((int32_t)n + 127) * (1 << 23)}; /* 2^n */
    return e * scale.f;
}

static float row_max(const float *restrict z, int64_t n) {
    float m = -INFINITY;
#pragma omp simd reduction(max : m)
    for (int64_t j = 0; j < n; j++)
        m = z[j] > m ? z[j] : m;
    return m;
}

/* sum_j exp(z[j] - mx); with `store`, z[j] is replaced by exp(z[j] - mx). */
static double row_expsum(float *restrict z, int64_t n, float mx, int store) {
    double total = 0;
    for (int64_t j0 = 0; j0 < n; j0 += LSS_SEG) {
        const int64_t j1 = j0 + LSS_SEG < n ? j0 + LSS_SEG : n;
        float s = 0;
        if (store) {
#pragma omp simd reduction(+ : s)
            for (int64_t j = j0; j < j1; j++) {
                const float p = exp_fast(z[j] - mx);
                z[j] = p;
                s += p;
            }
        } else {
#pragma omp simd reduction(+ : s)
            for (int64_t j = j0; j < j1; j++)
                s += exp_fast(z[j] - mx);
        }
        total += s;
    }
    return total;
}

/* z[j] = f * exp(z[j] - off): the recomputed logits of an online tile turned into dz. */
static void row_scaled_exp(float *restrict z, int64_t n, float off, float f) {
#pragma omp simd
    for (int64_t j = 0; j < n; j++)
        z[j] = f * exp_fast(z[j] - off);
}

/* ---- the call's state --------------------------------------------------------------------- */

typedef struct lss_ctx {
    int64_t M, H, V, B;
    const ft_loss_attrs *a;
    const float *h, *wl;
    const float *h0, *g; /* final_norm: the un-normed h and the norm's gain (else NULL) */
    float eps;
    const int32_t *labels;
    const uint8_t *mask;
    float *ce, *q, *w, *dh, *dw;
    int want_dw, strategy, par, threads;
    int64_t vtile, rows; /* rows: the most scored rows of any chunk */
    /* per call, [M] */
    double *qd, *wd, *ced;
    /* per chunk, [rows]: packed scored rows */
    int64_t n;      /* scored rows in the current chunk */
    int32_t *idx;   /* chunk row of packed row i */
    int32_t *lab;   /* label of packed row i */
    float *hp;      /* [rows, H] packed h */
    float *zl;      /* target logit */
    float *lse;     /* logsumexp */
    float *cmx;     /* row max over the whole vocabulary */
    double *csum;   /* sum of exp(z - cmx) over the whole vocabulary */
    float *s;       /* w[m] / denom (or w[m] when the denominator comes after the forward) */
    float *pmx;     /* [nt, rows] running max per vocab range */
    double *psum;   /* [nt, rows] running sum per vocab range */
    float *mul;     /* [nt, rows] backward multiplier per vocab range */
    float *logits;  /* materialize: [rows, V]; online: [nt, rows, vtile] */
    float *part;    /* [nt, rows, H] dh per vocab range */
    int dw_started; /* dw_lm has been written once (later chunks accumulate) */
    int norm_chunk; /* final_norm with norm_pass=chunk: run_chunk normalises what it packs */
    float *rstd;    /* final_norm: [M] 1/sqrt(mean(h^2) + eps) per row */
    double *dgd;    /* final_norm: [H] dg accumulated over the rows in order */
    float *hn;      /* final_norm with norm_pass=separate: [M, H] every row normalised */
} lss_ctx;

/* Vocab range [v0, v1) of range t out of nt, in LSS_ALIGN-column units. */
static void vocab_range(int64_t V, int t, int nt, int64_t *v0, int64_t *v1) {
    const int64_t units = (V + LSS_ALIGN - 1) / LSS_ALIGN;
    *v0 = units * t / nt * LSS_ALIGN;
    *v1 = t == nt - 1 ? V : units * (t + 1) / nt * LSS_ALIGN;
    if (*v0 > V) *v0 = V;
    if (*v1 > V) *v1 = V;
}

/* Forward over vocab range t: the range's running max and exp sum per packed row, and the target
 * logit of rows whose label lies in it. materialize keeps exp(z - max of the range) in the
 * logits buffer for the backward; online streams tiles through a small buffer. `inner` threads
 * split the rows of the softmax (blas mode; 1 inside a vocab-mode parallel region). */
static void fwd_range(lss_ctx *x, int t, int nt, int inner) {
    const int64_t n = x->n, H = x->H, V = x->V;
    const int keep = x->strategy != LSS_ONLINE;
    int64_t v0, v1;
    vocab_range(V, t, nt, &v0, &v1);
    float *mx = x->pmx + t * x->rows;
    double *sum = x->psum + t * x->rows;
    for (int64_t i = 0; i < n; i++) {
        mx[i] = -INFINITY;
        sum[i] = 0;
    }
    const int64_t vt = keep ? (v1 - v0 > 0 ? v1 - v0 : 1) : x->vtile;
    const int64_t lds = keep ? V : vt;
    for (int64_t t0 = v0; t0 < v1; t0 += vt) {
        const int64_t wdt = v1 - t0 < vt ? v1 - t0 : vt;
        float *S = keep ? x->logits + t0 : x->logits + (int64_t)t * x->rows * vt;
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)n, (int)wdt, (int)H, 1.0f, x->hp,
                    (int)H, x->wl + t0 * H, (int)H, 0.0f, S, (int)lds);
#pragma omp parallel for num_threads(inner) if (inner > 1) schedule(static)
        for (int64_t i = 0; i < n; i++) {
            float *z = S + i * lds;
            const int64_t l = x->lab[i];
            if (l >= t0 && l < t0 + wdt) x->zl[i] = z[l - t0];
            const float tm = row_max(z, wdt);
            if (tm > mx[i]) {
                sum[i] *= exp((double)mx[i] - (double)tm); /* exp(-inf) = 0 on the first tile */
                mx[i] = tm;
            }
            sum[i] += row_expsum(z, wdt, mx[i], keep);
        }
    }
}

/* Backward over vocab range t: dz on the range (materialize: the kept exp values times the row's
 * multiplier; online: recomputed logits), then part[t] = dz @ w_lm[range] and dw_lm[range]
 * (+)= dz^T @ h. */
static void bwd_range(lss_ctx *x, int t, int nt, int inner) {
    const int64_t n = x->n, H = x->H, V = x->V;
    const int keep = x->strategy != LSS_ONLINE;
    int64_t v0, v1;
    vocab_range(V, t, nt, &v0, &v1);
    float *part = x->part + t * x->rows * H;
    const float *mul = x->mul + t * x->rows;
    if (v1 <= v0) { /* an empty range contributes nothing */
        memset(part, 0, (size_t)(n * H) * sizeof(float));
        return;
    }
    const int64_t vt = keep ? v1 - v0 : x->vtile;
    const int64_t lds = keep ? V : vt;
    for (int64_t t0 = v0; t0 < v1; t0 += vt) {
        const int64_t wdt = v1 - t0 < vt ? v1 - t0 : vt;
        float *S = keep ? x->logits + t0 : x->logits + (int64_t)t * x->rows * vt;
        if (!keep)
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)n, (int)wdt, (int)H, 1.0f,
                        x->hp, (int)H, x->wl + t0 * H, (int)H, 0.0f, S, (int)lds);
#pragma omp parallel for num_threads(inner) if (inner > 1) schedule(static)
        for (int64_t i = 0; i < n; i++) {
            float *restrict z = S + i * lds;
            const float f = mul[i];
            if (keep) {
#pragma omp simd
                for (int64_t j = 0; j < wdt; j++)
                    z[j] *= f;
            } else {
                row_scaled_exp(z, wdt, x->lse[i], f);
            }
            const int64_t l = x->lab[i];
            if (l >= t0 && l < t0 + wdt) z[l - t0] -= x->s[i];
        }
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)n, (int)H, (int)wdt, 1.0f, S,
                    (int)lds, x->wl + t0 * H, (int)H, t0 == v0 ? 0.0f : 1.0f, part, (int)H);
        if (x->want_dw)
            cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)wdt, (int)H, (int)n, 1.0f, S,
                        (int)lds, x->hp, (int)H, x->dw_started ? 1.0f : 0.0f, x->dw + t0 * H,
                        (int)H);
    }
}

/* Run fn over every vocab range: one range with threaded BLAS and row-split softmax (blas), or
 * one range per thread with single-threaded BLAS (vocab). */
static void over_ranges(lss_ctx *x, void (*fn)(lss_ctx *, int, int, int)) {
    if (x->par == LSS_PAR_BLAS) {
        fn(x, 0, 1, x->threads);
        return;
    }
#pragma omp parallel num_threads(x->threads)
    fn(x, omp_get_thread_num(), omp_get_num_threads(), 1);
}

/* ---- the final RMSNorm ---------------------------------------------------------------------- */

/* hn = h * r * g for row h of H elements; returns r = 1/sqrt(mean(h^2) + eps). */
static float norm_row(const float *restrict h, const float *restrict g, float eps, int64_t H,
                      float *restrict hn) {
    double ss = 0;
    for (int64_t k = 0; k < H; k++)
        ss += (double)h[k] * h[k];
    const float r = (float)(1.0 / sqrt(ss / (double)H + eps));
#pragma omp simd
    for (int64_t k = 0; k < H; k++)
        hn[k] = h[k] * r * g[k];
    return r;
}

/* The norm's backward over rows rows[0..n) (ascending): dg += dhn * h * r (columns split among
 * the threads, each column summed over the rows in order: the same bits for any chunking), then
 * each dh row, holding dhn, becomes dh = r*u - r^3*h*(u.h)/H with u = dhn*g. */
static void norm_bwd_rows(lss_ctx *x, const int32_t *rows, int64_t base, int64_t n) {
    const int64_t H = x->H;
#pragma omp parallel for num_threads(x->threads) schedule(static)
    for (int64_t k0 = 0; k0 < H; k0 += 64) {
        const int64_t k1 = k0 + 64 < H ? k0 + 64 : H;
        for (int64_t i = 0; i < n; i++) {
            const int64_t m = base + rows[i];
            const float *d = x->dh + m * H, *hm = x->h0 + m * H;
            const double r = x->rstd[m];
            for (int64_t k = k0; k < k1; k++)
                x->dgd[k] += (double)d[k] * hm[k] * r;
        }
    }
#pragma omp parallel for num_threads(x->threads) schedule(static)
    for (int64_t i = 0; i < n; i++) {
        const int64_t m = base + rows[i];
        float *restrict d = x->dh + m * H;
        const float *restrict hm = x->h0 + m * H;
        const float r = x->rstd[m];
        double uh = 0;
        for (int64_t k = 0; k < H; k++)
            uh += (double)d[k] * x->g[k] * hm[k];
        const float cf = (float)((double)r * r * r * uh / (double)H);
#pragma omp simd
        for (int64_t k = 0; k < H; k++)
            d[k] = r * x->g[k] * d[k] - cf * hm[k];
    }
}

/* ---- one chunk of whole blocks ------------------------------------------------------------ */

static void run_chunk(lss_ctx *x, int64_t r0, int64_t r1, double gscale, int backward) {
    const int64_t H = x->H, B = x->B, R = x->rows;
    const int nt = x->par == LSS_PAR_VOCAB ? x->threads : 1;
    const int keep = x->strategy != LSS_ONLINE;
    /* Pack the scored rows: unscored rows (whose labels are never read) skip every GEMM. */
    int64_t n = 0;
    for (int64_t m = r0; m < r1; m++)
        if (m % B != 0 && x->mask[m]) {
            x->idx[n] = (int32_t)(m - r0);
            x->lab[n] = x->labels[m];
            n++;
        }
    x->n = n;
#pragma omp parallel for num_threads(x->threads) schedule(static)
    for (int64_t i = 0; i < n; i++) {
        const int64_t m = r0 + x->idx[i];
        if (x->norm_chunk)
            x->rstd[m] = norm_row(x->h0 + m * H, x->g, x->eps, H, x->hp + i * H);
        else
            memcpy(x->hp + i * H, x->h + m * H, (size_t)H * sizeof(float));
    }

    /* Forward: per-range statistics combined in range order, then the block weights. */
    for (int64_t m = r0; m < r1; m++) {
        x->ce[m] = 0;
        x->q[m] = 1;
        x->qd[m] = 1;
        x->ced[m] = 0;
    }
    if (n > 0) over_ranges(x, fwd_range);
    for (int64_t i = 0; i < n; i++) {
        float mx = -INFINITY;
        for (int t = 0; t < nt; t++)
            mx = x->pmx[t * R + i] > mx ? x->pmx[t * R + i] : mx;
        double sum = 0;
        for (int t = 0; t < nt; t++)
            sum += x->psum[t * R + i] * exp((double)x->pmx[t * R + i] - (double)mx);
        const double lse = (double)mx + log(sum);
        const double ce = lse - (double)x->zl[i];
        const int64_t m = r0 + x->idx[i];
        x->ced[m] = ce;
        x->qd[m] = exp(-ce);
        x->ce[m] = (float)ce;
        x->q[m] = (float)x->qd[m];
        x->lse[i] = (float)lse;
        x->cmx[i] = mx;
        x->csum[i] = sum;
    }
    for (int64_t b = r0; b < r1; b += B)
        ft_loss_block_weights(x->a, x->qd + b, x->mask + b, x->wd + b);
    for (int64_t m = r0; m < r1; m++)
        x->w[m] = (float)x->wd[m];

    /* Backward on the packed rows: dz = s * softmax - s * onehot with s = w[m] / denom folded
     * in. materialize kept exp(z - mx_t) of range t, so its multiplier rescales to the row's
     * max and divides by the row's sum; online recomputes exp(z - lse) and multiplies by s. */
    if (backward && n > 0) {
        for (int64_t i = 0; i < n; i++) {
            const double s = x->wd[r0 + x->idx[i]] * gscale;
            x->s[i] = (float)s;
            for (int t = 0; t < nt; t++)
                x->mul[t * R + i] =
                    keep ? (float)(s * exp((double)x->pmx[t * R + i] - (double)x->cmx[i]) /
                                   x->csum[i])
                         : (float)s;
        }
        over_ranges(x, bwd_range);
        if (x->want_dw) x->dw_started = 1;
    }
    /* dh rows of the chunk: the range partials summed in range order; unscored rows 0. */
#pragma omp parallel for num_threads(x->threads) schedule(static)
    for (int64_t m = r0; m < r1; m++)
        memset(x->dh + m * H, 0, (size_t)H * sizeof(float));
    if (backward && n > 0) {
#pragma omp parallel for num_threads(x->threads) schedule(static)
        for (int64_t i = 0; i < n; i++) {
            float *restrict d = x->dh + (r0 + x->idx[i]) * H;
            for (int t = 0; t < nt; t++) {
                const float *restrict p = x->part + (t * R + i) * H;
#pragma omp simd
                for (int64_t k = 0; k < H; k++)
                    d[k] += p[k];
            }
        }
        if (x->norm_chunk) norm_bwd_rows(x, x->idx, r0, n);
    }
}

/* ---- launcher ----------------------------------------------------------------------------- */

static int dpace_family(ft_loss_scheme s) {
    return s == FT_SCHEME_DPACE || s == FT_SCHEME_DPACE_CUM || s == FT_SCHEME_DPACE_CONT;
}

/* One buffer of the scratch: its bytes (at 64-byte alignment) added to *total and, when *cur
 * is not NULL, the buffer carved from it (else NULL). */
static void *loss_ws_take(char **cur, size_t *total, size_t bytes) {
    *total += ft_ws_size(bytes);
    return *cur ? ft_ws_carve(cur, bytes) : NULL;
}

/* The scratch of a config, every buffer the call carves in order: with cur NULL only its size,
 * else x's buffers carved from cur. Returns the bytes. */
static size_t loss_ws_layout(lss_ctx *x, char *cur) {
    const int64_t M = x->M, H = x->H, R = x->rows, nt = x->par == LSS_PAR_VOCAB ? x->threads : 1;
    const int64_t logits = x->strategy == LSS_ONLINE ? nt * R * x->vtile : R * x->V;
    size_t b = 0;
    x->qd = loss_ws_take(&cur, &b, (size_t)M * sizeof(double));
    x->wd = loss_ws_take(&cur, &b, (size_t)M * sizeof(double));
    x->ced = loss_ws_take(&cur, &b, (size_t)M * sizeof(double));
    x->idx = loss_ws_take(&cur, &b, (size_t)R * sizeof(int32_t));
    x->lab = loss_ws_take(&cur, &b, (size_t)R * sizeof(int32_t));
    x->hp = loss_ws_take(&cur, &b, (size_t)(R * H) * sizeof(float));
    x->zl = loss_ws_take(&cur, &b, (size_t)R * sizeof(float));
    x->lse = loss_ws_take(&cur, &b, (size_t)R * sizeof(float));
    x->cmx = loss_ws_take(&cur, &b, (size_t)R * sizeof(float));
    x->s = loss_ws_take(&cur, &b, (size_t)R * sizeof(float));
    x->csum = loss_ws_take(&cur, &b, (size_t)R * sizeof(double));
    x->pmx = loss_ws_take(&cur, &b, (size_t)(nt * R) * sizeof(float));
    x->mul = loss_ws_take(&cur, &b, (size_t)(nt * R) * sizeof(float));
    x->psum = loss_ws_take(&cur, &b, (size_t)(nt * R) * sizeof(double));
    x->logits = loss_ws_take(&cur, &b, (size_t)logits * sizeof(float));
    x->part = loss_ws_take(&cur, &b, (size_t)(nt * R * H) * sizeof(float));
    if (x->g) {
        x->rstd = loss_ws_take(&cur, &b, (size_t)M * sizeof(float));
        x->dgd = loss_ws_take(&cur, &b, (size_t)H * sizeof(double));
        if (!x->norm_chunk) x->hn = loss_ws_take(&cur, &b, (size_t)(M * H) * sizeof(float));
    }
    return b;
}

static ft_status loss_run(ft_call *c, const ft_config *cfg, ft_err *err) {
    lss_ctx x = {0};
    x.M = c->dim[LS_M];
    x.H = c->dim[LS_H];
    x.V = c->dim[LS_V];
    x.a = &c->attrs.loss;
    x.B = x.a->B;
    x.h = c->t[LS_HID]->data;
    x.wl = c->t[LS_WLM]->data;
    x.labels = c->t[LS_LABELS]->data;
    x.mask = c->t[LS_MASK]->data;
    x.ce = c->t[LS_CE]->data;
    x.q = c->t[LS_Q]->data;
    x.w = c->t[LS_W]->data;
    x.dh = c->t[LS_DH]->data;
    x.want_dw = x.a->want_dw != 0;
    x.dw = x.want_dw ? c->t[LS_DWLM]->data : NULL;
    x.strategy = cfg->v[P_STRATEGY];
    x.par = cfg->v[P_PARALLEL];
    x.threads = cfg->v[P_THREADS];
    x.vtile = cfg->v[P_VTILE];
    if (x.a->final_norm) {
        x.h0 = x.h;
        x.g = c->t[LS_GNORM]->data;
        x.eps = (float)c->attrs.eps;
        x.norm_chunk = cfg->v[P_NORM] == LSS_NORM_CHUNK;
    }
    const int64_t M = x.M, H = x.H, V = x.V, B = x.B;
    const int64_t chunk = x.strategy == LSS_MATERIALIZE_ALL ? M : cfg->v[P_CHUNK] * B;
    /* Buffers hold the scored rows of a chunk only: size them by the fullest chunk. */
    x.rows = 1;
    for (int64_t r0 = 0; r0 < M; r0 += chunk) {
        int64_t n = 0;
        for (int64_t m = r0; m < r0 + chunk && m < M; m++)
            n += m % B != 0 && x.mask[m];
        x.rows = n > x.rows ? n : x.rows;
    }
    if (x.vtile > V) x.vtile = V;
    char *cur = ft_ws_get(c->ws, loss_ws_layout(&x, NULL), err);
    if (!cur) return err ? err->status : FT_ENOMEM;
    loss_ws_layout(&x, cur);
    if (x.g) {
        for (int64_t k = 0; k < H; k++)
            x.dgd[k] = 0;
        if (!x.norm_chunk) {
            /* norm_pass=separate: every row normalised once, up front; the chunks read hn. */
#pragma omp parallel for num_threads(x.threads) schedule(static)
            for (int64_t m = 0; m < M; m++)
                x.rstd[m] = norm_row(x.h0 + m * H, x.g, x.eps, H, x.hn + m * H);
            x.h = x.hn;
        }
    }
    /* blas: the GEMMs' threads. vocab: GEMMs run inside the parallel region, single-threaded,
     * except with one thread, whose region is inactive: this keeps that one at one thread. */
    ft_cpu_blas_threads(x.threads);

    /* The denominator. For every scheme but D-PACE's the weights do not depend on q, and the
     * count / num_seqs / none norms do not read the weights, so it is known before the forward
     * and w[m]/denom is folded into dz directly. D-PACE weights under norm=weight_sum need every
     * row's q first: then dz carries w[m] alone and dh, dw_lm are divided at the end. */
    ft_loss_norm norm = x.a->norm;
    if (norm == FT_NORM_DEFAULT)
        norm = dpace_family(x.a->scheme) ? FT_NORM_NUM_SEQS : FT_NORM_WEIGHT_SUM;
    const int late = dpace_family(x.a->scheme) && norm == FT_NORM_WEIGHT_SUM;
    for (int64_t m = 0; m < M; m++)
        x.qd[m] = 1; /* read by no scheme whose weights are used here */
    for (int64_t b = 0; b < M; b += B)
        ft_loss_block_weights(x.a, x.qd + b, x.mask + b, x.wd + b);
    double denom = late ? 1.0 : ft_loss_denominator(x.a, M, x.wd, x.mask);
    const int backward = denom != 0;
    const double gscale = late || denom == 0 ? 1.0 : 1.0 / denom;

    for (int64_t r0 = 0; r0 < M && !ft_call_overdue(c); r0 += chunk)
        run_chunk(&x, r0, r0 + chunk < M ? r0 + chunk : M, gscale, backward);
    if (x.g && !x.norm_chunk && backward) {
        /* norm_pass=separate: the norm's backward over every scored row, in order (idx is
         * only [rows] long, so the rows are walked one chunk-sized run at a time). */
        for (int64_t r0 = 0; r0 < M; r0 += chunk) {
            const int64_t r1 = r0 + chunk < M ? r0 + chunk : M;
            int64_t n = 0;
            for (int64_t m = r0; m < r1; m++)
                if (m % B != 0 && x.mask[m]) x.idx[n++] = (int32_t)(m - r0);
            norm_bwd_rows(&x, x.idx, r0, n);
        }
    }

    if (late) denom = ft_loss_denominator(x.a, M, x.wd, x.mask);
    float *loss = c->t[LS_LOSS]->data;
    if (x.want_dw && (!x.dw_started || denom == 0))
        memset(x.dw, 0, (size_t)(V * H) * sizeof(float));
    float *dg = x.g ? c->t[LS_DG]->data : NULL;
    if (denom == 0) {
        memset(x.dh, 0, (size_t)(M * H) * sizeof(float));
        if (dg) memset(dg, 0, (size_t)H * sizeof(float));
        *loss = 0;
        return FT_OK;
    }
    if (dg) {
        const double f = late ? 1.0 / denom : 1.0; /* the norm's backward is linear in dhn */
        for (int64_t k = 0; k < H; k++)
            dg[k] = (float)(x.dgd[k] * f);
    }
    if (late) {
        const float inv = (float)(1.0 / denom);
#pragma omp parallel for num_threads(x.threads) schedule(static)
        for (int64_t i = 0; i < M * H; i++)
            x.dh[i] *= inv;
        if (x.want_dw) {
#pragma omp parallel for num_threads(x.threads) schedule(static)
            for (int64_t i = 0; i < V * H; i++)
                x.dw[i] *= inv;
        }
    }
    double sum = 0;
    for (int64_t m = 0; m < M; m++)
        sum += x.wd[m] * x.ced[m];
    *loss = (float)(sum / denom);
    return FT_OK;
}

FT_CPU_IMPL(loss, loss);
