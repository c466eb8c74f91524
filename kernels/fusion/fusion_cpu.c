/* fusion_cpu.c: the two context-fusion ops on the CPU, forward and backward (SPEC.md fusion.dflare,
 * fusion.dflash).
 *
 * ---- fusion.dflare (adaptive layer fusion) ----
 *   a[i,:] = softmax(w[i,:]);  s[i,n,:] = sum_t a[i,t] x[n,t,:];  f[i,n,:] = rmsnorm(s) * g
 * Napkin math at qwen3-4b dflare train (N = 2048, T = 9, H = 2560, D = 7), fp32: x is read once
 * (N*T*H*4 = 189 MB), f written once (D*N*H*4 = 147 MB), 2*D*T*N*H = 0.66 GFLOP (0.25 FLOP/byte).
 * Memory-bound: floor = 336 MB / copy bandwidth; a 2-core AMD EPYC (Zen 3) VM measured a copy
 * (2026-11) at 17-19 GB/s (read + write) with plain stores and 20-25 GB/s with streaming stores, so
 * 14-20 ms there. The backward (same call, same pass over the rows) adds df (147 MB) in and dx (189
 * MB) out: 672 MB in all, ~3 GFLOP, floor 27-40 ms.
 *   Per row n: pass 1 mixes s in h-blocks of 64 (the T x 64 block of x sits in L1 and serves
 * every layer of the pass) into a D x H scratch row (72 KB, L2) and sums s^2 (and g*df*s for the
 * backward); pass 2 writes f = s*r*g and, backward, block by block,
 *   ds = r*g*df - s*r^3*mean(g*df*s),  dx[n,t,:] = sum_i a[i,t] ds_i,  da[i,t] += ds_i . x[n,t,:],
 *   dg += sum_i df_i*s_i*r_i,  and at the end dw[i,:] = a*(da - a.da) (softmax Jacobian).
 * The D rows df[:,n,:] lie 4*N*H bytes apart, a multiple of 4 KB: read in place, block by block,
 * they map to the same cache sets and take the hardware prefetchers' stream slots from x, which
 * made the backward about 2x slower; each is copied into scratch first (one sequential stream at a
 * time). dg and da are sums over every row (N*H = 5M terms): each row's share is summed in float
 * lanes, then added into per-thread float64 partials that are combined in thread order. With
 * the backward, rows are dealt to threads statically, so results are bit-identical for a fixed
 * config and thread count (forward, nothing is reduced across rows and any deal gives the same
 * bits).
 *
 * Parameters (fusion.dflare):
 *   strategy  per_layer: one pass over a task's rows per draft layer (D passes over x);
 *             k_layers: k layers per pass; all_layers: one pass producing every layer. How many
 *             times x crosses the memory bus, unless the task's rows stay in cache between passes.
 *   k         layers per pass for k_layers (k < D; k >= D is all_layers).
 *   rows      rows per task: the unit OpenMP deals out (to whichever thread is free forward;
 *             round-robin backward, for reproducible partials), and the block of x the
 *             multi-pass strategies re-read from cache (92 KB a row at qwen3-4b: 4 rows fit
 *             L2, 64 rows fit L3).
 *   stream    non-temporal stores for f and dx: written once and not re-read here; without them
 *             every written line is first read for ownership (147 MB more traffic forward).
 *             Loses when the consumer wants f in cache (small N).
 *   prefetch  software prefetch of x (and df) this many 64-float blocks ahead, running into the
 *             thread's next row: the T rows of x are T streams that restart every token.
 *   threads   OpenMP threads over row tasks.
 *
 * ---- fusion.dflash (FC fusion) ----
 *   c[n,:] = x[n,:] @ w_fc^T   (K = T*H inputs);  f[n,:] = rmsnorm(c) * g
 * Napkin math at qwen3-4b dflash train (N = 2048, T = 5, H = 2560): 2*N*H*T*H = 134 GFLOP forward;
 * w_fc is 131 MB, x 105 MB, f 21 MB: GEMM-bound, floor = FLOPs / sgemm rate (OpenBLAS core Zen ran
 * this shape at 130-145 GFLOP/s on a 2-core EPYC VM in 2026-11, so ~1 s). Backward: dc by the
 * RMSNorm backward, dx = dc @ w_fc and dw_fc = dc^T @ x, two more GEMMs of the same size.
 *
 * Parameters (fusion.dflash):
 *   par       blas: each GEMM is one OpenBLAS call on `threads` threads, the RMSNorm an OpenMP
 *             loop after it; rows: OpenMP deals row chunks to threads, each runs single-threaded
 *             GEMMs on its chunk and normalises it while it is in its cache.
 *   chunk     rows per GEMM call (all: one GEMM, or one per thread with par=rows). Small chunks
 *             keep c (and dc) in cache for the norm and for dx = dc @ w_fc, but OpenBLAS
 *             repacks w_fc (131 MB) on every call and small-M GEMMs run below peak.
 *   threads   OpenMP / OpenBLAS threads.
 * Scratch: the backward keeps c, then dc, for every row (N*H floats, 21 MB: dw_fc = dc^T x is one
 * GEMM over all rows; split by chunk it would re-read and re-write the 131 MB dw_fc per chunk),
 * plus threads*H doubles of dg partials. The forward needs none: c is computed into f and
 * normalised in place.
 */
#include <cblas.h>
#include <math.h>
#include <omp.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#ifdef __AVX__
#include <immintrin.h>
#endif

#include "cpu/cpu.h"
#include "fusion/fusion.h"

/* ---- shared helpers ------------------------------------------------------------------------ */

/* Eight floats, as GCC's vector extension: AVX registers here, pairs of SSE registers or
 * scalars elsewhere. Loads and stores go through memcpy (unaligned, no aliasing questions). */
typedef float v8f __attribute__((vector_size(32)));

static inline v8f v8_load(const float *p) {
    v8f v;
    memcpy(&v, p, sizeof v);
    return v;
}

static inline void v8_store(float *p, v8f v) { memcpy(p, &v, sizeof v); }

static inline float v8_sum(v8f v) {
    return ((v[0] + v[4]) + (v[1] + v[5])) + ((v[2] + v[6]) + (v[3] + v[7]));
}

static inline v8f v8_splat(float a) { return (v8f){a, a, a, a, a, a, a, a}; }

/* a*b + c. Spelled out because ISO C mode (-std=c11) turns off GCC's automatic contraction of
 * a*b + c into one FMA, which would double the arithmetic instructions of every loop here. */
static inline v8f v8_fma(v8f a, v8f b, v8f c) {
#ifdef __FMA__
    return (v8f)_mm256_fmadd_ps((__m256)a, (__m256)b, (__m256)c);
#else
    return a * b + c;
#endif
}

/* Store eight floats at p; with nt, a streaming store that goes around the cache (no read for
 * ownership of the line; p must be 32-byte aligned). */
static inline void v8_put(float *p, v8f v, int nt) {
#ifdef __AVX__
    if (nt) {
        _mm256_stream_ps(p, (__m256)v);
        return;
    }
#else
    (void)nt;
#endif
    v8_store(p, v);
}

/* Streaming stores for a row segment: asked for, available, and the segment starts aligned
 * (then every group of eight in it is). Rows of odd H fall back to plain stores. */
static inline int fus_nt(const float *p, int stream) {
#ifdef __AVX__
    return stream && ((uintptr_t)p & 31) == 0;
#else
    (void)p;
    (void)stream;
    return 0;
#endif
}

#define FT_FUS_HB 64 /* h-block: T*64 floats of x (2.3 KB at T = 9) stay in L1 */

static inline void fus_fence(int stream) {
#ifdef __AVX__
    if (stream) _mm_sfence();
#else
    (void)stream;
#endif
}

/* ---- fusion.dflare ------------------------------------------------------------------------- */

enum {
    FUS_DL_P_STRATEGY,
    FUS_DL_P_K,
    FUS_DL_P_ROWS,
    FUS_DL_P_STREAM,
    FUS_DL_P_PREFETCH,
    FUS_DL_P_THREADS
};
enum { FUS_DL_PER_LAYER, FUS_DL_K_LAYERS, FUS_DL_ALL_LAYERS };

static const char *const dl_strategy_labels[] = {"per_layer", "k_layers", "all_layers"};

/* Everything one row's work reads, fixed for the call. */
typedef struct dl_ctx {
    int64_t N, T, H, D;
    double eps;
    const float *x, *g, *df;
    float *f, *dx;
    const float *a; /* [D,T] softmax(w) in float */
    int stream, prefetch, bwd;
} dl_ctx;

/* One thread's scratch (carved from the workspace, one slice per thread). */
typedef struct dl_scratch {
    float *s;   /* [D,HP]  the mixed rows of the current token                          */
    float *dfs; /* [D,HP]  df rows of the current token, copied together                */
    float *ds;  /* [D,HB]  ds of the current h-block                                    */
    float *dal; /* [D,T,8] lane partials of da for the current token                    */
    double *dg; /* [H]     dg over this thread's rows                                   */
    double *da; /* [D,T]   da over this thread's rows                                   */
    float *dgf; /* [HB]    one block of dg, summed over the pass's layers               */
    double *rr; /* [D]     r = 1/rms, per layer                                         */
    double *cc; /* [D]     r^3 * mean(g*df*s), per layer                                */
} dl_scratch;

/* Row stride of the per-token scratch rows: H plus one cache line, so that the D rows do not
 * all map to the same L1 sets (H = 2560 floats is 10 KB, a multiple of 2 KB). */
static inline int64_t dl_hp(int64_t H) { return H + 16; }

static size_t dl_scratch_bytes(int64_t T, int64_t H, int64_t D) {
    return 2 * ft_ws_size((size_t)(D * dl_hp(H)) * sizeof(float)) +
           ft_ws_size((size_t)(D * FT_FUS_HB) * sizeof(float)) +
           ft_ws_size((size_t)(D * T * 8) * sizeof(float)) +
           ft_ws_size((size_t)H * sizeof(double)) + ft_ws_size((size_t)(D * T) * sizeof(double)) +
           ft_ws_size(FT_FUS_HB * sizeof(float)) + 2 * ft_ws_size((size_t)D * sizeof(double));
}

static void dl_scratch_carve(char **cur, int64_t T, int64_t H, int64_t D, dl_scratch *sc) {
    sc->s = ft_ws_carve(cur, (size_t)(D * dl_hp(H)) * sizeof(float));
    sc->dfs = ft_ws_carve(cur, (size_t)(D * dl_hp(H)) * sizeof(float));
    sc->ds = ft_ws_carve(cur, (size_t)(D * FT_FUS_HB) * sizeof(float));
    sc->dal = ft_ws_carve(cur, (size_t)(D * T * 8) * sizeof(float));
    sc->dg = ft_ws_carve(cur, (size_t)H * sizeof(double));
    sc->da = ft_ws_carve(cur, (size_t)(D * T) * sizeof(double));
    sc->dgf = ft_ws_carve(cur, FT_FUS_HB * sizeof(float));
    sc->rr = ft_ws_carve(cur, (size_t)D * sizeof(double));
    sc->cc = ft_ws_carve(cur, (size_t)D * sizeof(double));
}

/* The hot loops come in two forms: a full 64-wide h-block with eight independent accumulators in
 * registers (the 4-cycle FMA latency hidden behind eight chains), and a generic form for the
 * last, partial block. */

/* s[j] = sum_t at[t] * xb[t*H + j], j < 64 (xb: the block's column of x[n,0,:]); returns
 * sum_j s[j]^2. */
static inline float dl_mix64(int64_t T, int64_t H, const float *restrict at,
                             const float *restrict xb, float *restrict s) {
    v8f acc[8];
    const v8f a0 = v8_splat(at[0]);
    for (int k = 0; k < 8; k++)
        acc[k] = a0 * v8_load(xb + 8 * k);
    for (int64_t t = 1; t < T; t++) {
        const v8f av = v8_splat(at[t]);
        const float *restrict xt = xb + t * H;
        for (int k = 0; k < 8; k++)
            acc[k] = v8_fma(av, v8_load(xt + 8 * k), acc[k]);
    }
    for (int k = 0; k < 8; k++)
        v8_store(s + 8 * k, acc[k]);
    v8f q0 = v8_fma(acc[1], acc[1], acc[0] * acc[0]), q1 = v8_fma(acc[3], acc[3], acc[2] * acc[2]);
    v8f q2 = v8_fma(acc[5], acc[5], acc[4] * acc[4]), q3 = v8_fma(acc[7], acc[7], acc[6] * acc[6]);
    return v8_sum((q0 + q1) + (q2 + q3));
}

/* dl_mix64 for any w <= 64. */
static inline float dl_mix(int64_t T, int64_t H, const float *restrict at, const float *restrict xb,
                           int w, float *restrict s) {
    if (w == FT_FUS_HB) return dl_mix64(T, H, at, xb, s);
    v8f ss = {0};
    int j = 0;
    for (; j + 8 <= w; j += 8) {
        v8f acc = v8_splat(at[0]) * v8_load(xb + j);
        for (int64_t t = 1; t < T; t++)
            acc = v8_fma(v8_splat(at[t]), v8_load(xb + t * H + j), acc);
        v8_store(s + j, acc);
        ss = v8_fma(acc, acc, ss);
    }
    float sum = v8_sum(ss);
    for (; j < w; j++) {
        float acc = at[0] * xb[j];
        for (int64_t t = 1; t < T; t++)
            acc += at[t] * xb[t * H + j];
        s[j] = acc;
        sum += acc * acc;
    }
    return sum;
}

/* sum_j g[j] * df[j] * s[j] over one block (two chains). */
static inline float dl_gdot(const float *restrict g, const float *restrict df,
                            const float *restrict s, int w) {
    v8f acc0 = {0}, acc1 = {0};
    int j = 0;
    for (; j + 16 <= w; j += 16) {
        acc0 = v8_fma(v8_load(g + j) * v8_load(df + j), v8_load(s + j), acc0);
        acc1 = v8_fma(v8_load(g + j + 8) * v8_load(df + j + 8), v8_load(s + j + 8), acc1);
    }
    for (; j + 8 <= w; j += 8)
        acc0 = v8_fma(v8_load(g + j) * v8_load(df + j), v8_load(s + j), acc0);
    float sum = v8_sum(acc0 + acc1);
    for (; j < w; j++)
        sum += g[j] * df[j] * s[j];
    return sum;
}

/* da lanes of an mi x mt tile (layers i.., targets t..) over one block's first w8 columns:
 * lanes[(a*T + b)*8 + l] += sum over j = l mod 8 of ds[a*HB + j] * x[b*H + j]. mi <= 2 and
 * mt <= 4 are constants at every call, so the mi*mt accumulators live in registers and each
 * block of 8 columns costs mi + mt loads for mi*mt FMAs. */
static inline __attribute__((always_inline)) void
dl_da_tile(const float *restrict ds, const float *restrict xb, int64_t H, int64_t T, int w8,
           float *restrict lanes, const int mi, const int mt) {
    v8f acc[2][4];
    for (int a = 0; a < mi; a++)
        for (int b = 0; b < mt; b++)
            acc[a][b] = v8_load(lanes + (a * T + b) * 8);
    for (int j = 0; j < w8; j += 8) {
        v8f d[2], x[4];
        for (int a = 0; a < mi; a++)
            d[a] = v8_load(ds + a * FT_FUS_HB + j);
        for (int b = 0; b < mt; b++)
            x[b] = v8_load(xb + b * H + j);
        for (int a = 0; a < mi; a++)
            for (int b = 0; b < mt; b++)
                acc[a][b] = v8_fma(d[a], x[b], acc[a][b]);
    }
    for (int a = 0; a < mi; a++)
        for (int b = 0; b < mt; b++)
            v8_store(lanes + (a * T + b) * 8, acc[a][b]);
}

/* da lanes for layers [i0, i1) and every t over one block: tiles of 2 layers x 4 targets,
 * then the scalar columns past w8. */
static void dl_da_block(const dl_ctx *c, dl_scratch *sc, const float *restrict xb, int w,
                        int64_t i0, int64_t i1) {
    const int64_t T = c->T, H = c->H;
    const int w8 = w & ~7;
    for (int64_t i = i0; i < i1; i += 2) {
        const int mi = i1 - i >= 2 ? 2 : 1;
        const float *ds = sc->ds + i * FT_FUS_HB;
        for (int64_t t = 0; t < T; t += 4) {
            const int mt = T - t >= 4 ? 4 : (int)(T - t);
            const float *x = xb + t * H;
            float *lanes = sc->dal + (i * T + t) * 8;
            switch (mi * 4 + mt) {
            case 12: dl_da_tile(ds, x, H, T, w8, lanes, 2, 4); break;
            case 11: dl_da_tile(ds, x, H, T, w8, lanes, 2, 3); break;
            case 10: dl_da_tile(ds, x, H, T, w8, lanes, 2, 2); break;
            case 9: dl_da_tile(ds, x, H, T, w8, lanes, 2, 1); break;
            case 8: dl_da_tile(ds, x, H, T, w8, lanes, 1, 4); break;
            case 7: dl_da_tile(ds, x, H, T, w8, lanes, 1, 3); break;
            case 6: dl_da_tile(ds, x, H, T, w8, lanes, 1, 2); break;
            default: dl_da_tile(ds, x, H, T, w8, lanes, 1, 1); break;
            }
        }
    }
    for (int64_t i = i0; i < i1; i++)
        for (int64_t t = 0; t < T; t++)
            for (int j = w8, l = 0; j < w; j++, l++)
                sc->dal[(i * T + t) * 8 + l] += sc->ds[i * FT_FUS_HB + j] * xb[t * H + j];
}

/* dx[n,t,block] (+)= sum_{i in [i0,i1)} a[i,t] * ds_i over one block. */
static void dl_dx_block(const dl_ctx *c, dl_scratch *sc, int64_t n, int64_t h0, int w, int64_t i0,
                        int64_t i1) {
    const int64_t T = c->T, H = c->H;
    const int w8 = w & ~7;
    for (int64_t t = 0; t < T; t++) {
        float *restrict dxt = c->dx + (n * T + t) * H + h0;
        const int nt = fus_nt(dxt, c->stream && i1 == c->D);
        const float *restrict at = c->a + t; /* a[i,t] = at[i*T] */
        if (w == FT_FUS_HB) {
            v8f acc[8];
            for (int k = 0; k < 8; k++)
                acc[k] = i0 == 0 ? v8_splat(0.0f) : v8_load(dxt + 8 * k);
            for (int64_t i = i0; i < i1; i++) {
                const v8f av = v8_splat(at[i * T]);
                const float *restrict ds = sc->ds + i * FT_FUS_HB;
                for (int k = 0; k < 8; k++)
                    acc[k] = v8_fma(av, v8_load(ds + 8 * k), acc[k]);
            }
            for (int k = 0; k < 8; k++)
                v8_put(dxt + 8 * k, acc[k], nt);
            continue;
        }
        for (int j = 0; j < w8; j += 8) {
            v8f acc = i0 == 0 ? v8_splat(0.0f) : v8_load(dxt + j);
            for (int64_t i = i0; i < i1; i++)
                acc = v8_fma(v8_splat(at[i * T]), v8_load(sc->ds + i * FT_FUS_HB + j), acc);
            v8_put(dxt + j, acc, nt);
        }
        for (int j = w8; j < w; j++) {
            float acc = i0 == 0 ? 0.0f : dxt[j];
            for (int64_t i = i0; i < i1; i++)
                acc += at[i * T] * sc->ds[i * FT_FUS_HB + j];
            dxt[j] = acc;
        }
    }
}

/* Row n, draft layers [i0, i1): f, and when the backward runs, this pass's share of dx (added
 * to the earlier passes' share unless i0 == 0), dg and da. */
static void dl_row(const dl_ctx *c, dl_scratch *sc, int64_t n, int64_t next, int64_t i0,
                   int64_t i1) {
    const int64_t T = c->T, H = c->H, N = c->N, HP = dl_hp(H);
    const float *xn = c->x + n * T * H;
    const float *g = c->g;
    const int bwd = c->bwd;

    /* df[i,n,:] for the pass's layers sit 4*N*H bytes apart: in place they would fight over the
     * same cache sets (and the hardware prefetchers' stream slots) with x. Copied one row
     * after the other they are single sequential streams, then read from L1/L2. */
    if (bwd)
        for (int64_t i = i0; i < i1; i++)
            memcpy(sc->dfs + i * HP, c->df + (i * N + n) * H, (size_t)H * sizeof(float));

    /* Pass 1: the mixed rows s (into scratch), their sum of squares, and g.df.s. */
    for (int64_t i = i0; i < i1; i++)
        sc->rr[i] = sc->cc[i] = 0.0;
    for (int64_t h0 = 0; h0 < H; h0 += FT_FUS_HB) {
        int w = (int)(H - h0 < FT_FUS_HB ? H - h0 : FT_FUS_HB);
        if (c->prefetch) {
            /* The block `prefetch` h-blocks ahead (into the thread's next row past the end of
             * this one) of x and, backward, df: the x rows of a token are T separate streams
             * that restart every row, which the hardware prefetchers pick up late. */
            int64_t pn = n, ph = h0 + (int64_t)c->prefetch * FT_FUS_HB;
            if (ph >= H) {
                pn = next;
                ph -= H;
            }
            if (pn >= 0 && ph < H) {
                const float *xp = c->x + pn * T * H + ph;
                for (int64_t t = 0; t < T; t++)
                    for (int k = 0; k < FT_FUS_HB; k += 16)
                        __builtin_prefetch(xp + t * H + k, 0, 2);
                if (bwd)
                    for (int64_t i = i0; i < i1; i++)
                        for (int k = 0; k < FT_FUS_HB; k += 16)
                            __builtin_prefetch(c->df + (i * N + pn) * H + ph + k, 0, 2);
            }
        }
        for (int64_t i = i0; i < i1; i++) {
            float *s = sc->s + i * HP + h0;
            sc->rr[i] += dl_mix(T, H, c->a + i * T, xn + h0, w, s);
            if (bwd) sc->cc[i] += dl_gdot(g + h0, sc->dfs + i * HP + h0, s, w);
        }
    }
    for (int64_t i = i0; i < i1; i++) {
        double r = 1.0 / sqrt(sc->rr[i] / (double)H + c->eps);
        sc->cc[i] = r * r * r * sc->cc[i] / (double)H;
        sc->rr[i] = r;
    }
    if (bwd) memset(sc->dal + i0 * T * 8, 0, (size_t)((i1 - i0) * T * 8) * sizeof(float));

    /* Pass 2: f; backward: ds, dg, dx and da, block by block. */
    for (int64_t h0 = 0; h0 < H; h0 += FT_FUS_HB) {
        const int w = (int)(H - h0 < FT_FUS_HB ? H - h0 : FT_FUS_HB);
        const int w8 = w & ~7;
        const float *restrict gb = g + h0;
        float *restrict dgf = sc->dgf;
        if (bwd) memset(dgf, 0, (size_t)w * sizeof(float));
        for (int64_t i = i0; i < i1; i++) {
            const float *restrict s = sc->s + i * HP + h0;
            const float r = (float)sc->rr[i];
            const v8f vr = v8_splat(r);
            float *restrict fi = c->f + (i * N + n) * H + h0;
            const int nt = fus_nt(fi, c->stream);
            if (!bwd) {
                for (int j = 0; j < w8; j += 8)
                    v8_put(fi + j, v8_load(s + j) * vr * v8_load(gb + j), nt);
                for (int j = w8; j < w; j++)
                    fi[j] = s[j] * r * gb[j];
                continue;
            }
            const float *restrict df = sc->dfs + i * HP + h0;
            const float cc = (float)sc->cc[i];
            const v8f vcc = v8_splat(cc);
            float *restrict ds = sc->ds + i * FT_FUS_HB;
            for (int j = 0; j < w8; j += 8) {
                v8f sv = v8_load(s + j), gv = v8_load(gb + j), dfv = v8_load(df + j);
                v8_put(fi + j, sv * vr * gv, nt);
                v8_store(ds + j, vr * gv * dfv - sv * vcc);
                v8_store(dgf + j, v8_fma(dfv * sv, vr, v8_load(dgf + j)));
            }
            for (int j = w8; j < w; j++) {
                fi[j] = s[j] * r * gb[j];
                ds[j] = r * gb[j] * df[j] - s[j] * cc;
                dgf[j] += df[j] * s[j] * r;
            }
        }
        if (!bwd) continue;
        for (int j = 0; j < w; j++)
            sc->dg[h0 + j] += (double)dgf[j];
        if (c->dx) dl_dx_block(c, sc, n, h0, w, i0, i1);
        dl_da_block(c, sc, xn + h0, w, i0, i1);
    }
    if (bwd)
        for (int64_t k = i0 * T; k < i1 * T; k++)
            sc->da[k] += (double)v8_sum(v8_load(sc->dal + k * 8));
}

/* One task: rows [n0, n0 + rows), its passes over the draft layers in order. The row after
 * the task's last, for prefetching, is the first of this thread's next task under the static
 * round-robin deal (`stride` rows on); under the dynamic one it is a guess. */
static void dl_task(const dl_ctx *c, dl_scratch *sc, int64_t n0, int64_t rows, int64_t per_pass,
                    int64_t stride) {
    const int64_t N = c->N, D = c->D, n1 = n0 + rows < N ? n0 + rows : N;
    for (int64_t i0 = 0; i0 < D; i0 += per_pass) {
        int64_t i1 = i0 + per_pass < D ? i0 + per_pass : D;
        for (int64_t n = n0; n < n1; n++) {
            int64_t next = n + 1 < n1 ? n + 1 : n0 + stride;
            dl_row(c, sc, n, next < N ? next : -1, i0, i1);
        }
    }
}

static int dl_valid(const ft_call *c, const ft_config *cfg, char *why, size_t n) {
    int dup = 0;
    int strategy = cfg->v[FUS_DL_P_STRATEGY], k = cfg->v[FUS_DL_P_K];
    if (strategy != FUS_DL_K_LAYERS && k != 2)
        return ft_config_why(FT_CONFIG_INVALID, why, n,
                             "k only applies to strategy=k_layers (leave it at 2)");
    if (strategy == FUS_DL_K_LAYERS && k >= c->dim[DL_D]) {
        if (why) snprintf(why, n, "k_layers needs k < D (k >= D is all_layers)");
        dup = 1; /* a duplicate, if nothing rules it out below */
    }
#ifndef __AVX__
    if (cfg->v[FUS_DL_P_STREAM])
        return ft_config_why(FT_CONFIG_INVALID, why, n, "streaming stores need an AVX build");
#endif
    return dup ? FT_CONFIG_DUPLICATE : FT_CONFIG_VALID;
}

static ft_status dl_run(ft_call *call, const ft_config *cfg, ft_err *err) {
    const int64_t N = call->dim[DL_N], T = call->dim[DL_T], H = call->dim[DL_H],
                  D = call->dim[DL_D];
    const int threads = cfg->v[FUS_DL_P_THREADS];
    const int64_t rows = cfg->v[FUS_DL_P_ROWS];
    const int strategy = cfg->v[FUS_DL_P_STRATEGY];
    const int64_t per_pass = strategy == FUS_DL_PER_LAYER  ? 1
                             : strategy == FUS_DL_K_LAYERS ? cfg->v[FUS_DL_P_K]
                                                       : D;
    const int bwd = call->backward;

    /* Workspace: a[D,T] in float, then one scratch slice per thread. */
    size_t a_bytes = ft_ws_size((size_t)(D * T) * sizeof(float));
    size_t slice = dl_scratch_bytes(T, H, D);
    char *cur = ft_ws_get(call->ws, a_bytes + (size_t)threads * slice, err);
    if (!cur) return err ? err->status : FT_ENOMEM;
    float *a = ft_ws_carve(&cur, (size_t)(D * T) * sizeof(float));
    char *slices = cur;

    /* Softmax of the fusion logits, in double (D*T numbers). */
    const float *w = call->t[DL_W]->data;
    for (int64_t i = 0; i < D; i++) {
        double m = w[i * T], sum = 0.0;
        for (int64_t t = 1; t < T; t++)
            m = w[i * T + t] > m ? w[i * T + t] : m;
        for (int64_t t = 0; t < T; t++)
            sum += exp((double)w[i * T + t] - m);
        for (int64_t t = 0; t < T; t++)
            a[i * T + t] = (float)(exp((double)w[i * T + t] - m) / sum);
    }

    dl_ctx c = {
        .N = N,
        .T = T,
        .H = H,
        .D = D,
        .eps = call->attrs.eps,
        .x = call->t[DL_X]->data,
        .g = call->t[DL_G]->data,
        .df = bwd ? call->t[DL_DF]->data : NULL,
        .f = call->t[DL_F]->data,
        .dx = bwd && call->attrs.want_dx ? call->t[DL_DX]->data : NULL,
        .a = a,
        .stream = cfg->v[FUS_DL_P_STREAM],
        .prefetch = cfg->v[FUS_DL_P_PREFETCH],
        .bwd = bwd,
    };
    const int64_t ntasks = (N + rows - 1) / rows;

    /* Zero every thread's partials here: a region may get fewer threads than asked for. */
    if (bwd)
        for (int th = 0; th < threads; th++) {
            dl_scratch sc;
            char *p = slices + (size_t)th * slice;
            dl_scratch_carve(&p, T, H, D, &sc);
            memset(sc.dg, 0, (size_t)H * sizeof(double));
            memset(sc.da, 0, (size_t)(D * T) * sizeof(double));
        }

#pragma omp parallel num_threads(threads)
    {
        dl_scratch sc;
        char *mine = slices + (size_t)omp_get_thread_num() * slice;
        dl_scratch_carve(&mine, T, H, D, &sc);
        const int64_t stride = (int64_t)omp_get_num_threads() * rows;
        if (bwd) {
            /* Tasks dealt round-robin in a fixed order: the same rows land on the same thread
             * every run, so the per-thread partials of dg and da are reproducible. */
#pragma omp for schedule(static, 1)
            for (int64_t task = 0; task < ntasks; task++)
                if (!ft_call_overdue(call)) dl_task(&c, &sc, task * rows, rows, per_pass, stride);
        } else {
            /* Nothing is reduced across rows: tasks go to whichever thread is free, which
             * keeps both busy when another process takes a core for a while. */
#pragma omp for schedule(dynamic, 1)
            for (int64_t task = 0; task < ntasks; task++)
                if (!ft_call_overdue(call)) dl_task(&c, &sc, task * rows, rows, per_pass, stride);
        }
        fus_fence(c.stream);
    }

    if (bwd) {
        /* Combine the per-thread partials in thread order (into thread 0's), then the softmax
         * Jacobian. */
        float *dg = call->t[DL_DG]->data, *dw = call->t[DL_DW]->data;
        dl_scratch sc0, sct;
        char *p = slices;
        dl_scratch_carve(&p, T, H, D, &sc0);
        for (int th = 1; th < threads; th++) {
            p = slices + (size_t)th * slice;
            dl_scratch_carve(&p, T, H, D, &sct);
            for (int64_t h = 0; h < H; h++)
                sc0.dg[h] += sct.dg[h];
            for (int64_t k = 0; k < D * T; k++)
                sc0.da[k] += sct.da[k];
        }
        for (int64_t h = 0; h < H; h++)
            dg[h] = (float)sc0.dg[h];
        for (int64_t i = 0; i < D; i++) {
            const double *da = sc0.da + i * T;
            double dot = 0.0;
            for (int64_t t = 0; t < T; t++)
                dot += (double)a[i * T + t] * da[t];
            for (int64_t t = 0; t < T; t++)
                dw[i * T + t] = (float)((double)a[i * T + t] * (da[t] - dot));
        }
    }
    return FT_OK;
}

static ft_param dl_params[] = {
    [FUS_DL_P_STRATEGY] =
        FT_PARAM("strategy",
                 "passes over x per row task: per_layer (D), k_layers (ceil(D/k)), all_layers (1)",
                 dl_strategy_labels, FUS_DL_ALL_LAYERS, FUS_DL_PER_LAYER, FUS_DL_K_LAYERS,
                 FUS_DL_ALL_LAYERS),
    [FUS_DL_P_K] = FT_PARAM("k", "draft layers per pass with strategy=k_layers", NULL, 2, 2, 3, 4),
    [FUS_DL_P_ROWS] = FT_PARAM(
        "rows", "rows per task: OpenMP chunk and the cache block x is re-read from between passes",
        NULL, 4, 1, 4, 16, 64),
    [FUS_DL_P_STREAM] = FT_PARAM(
        "stream", "non-temporal stores for f and dx: no read for ownership of lines written once",
        NULL, 1, 0, 1),
    [FUS_DL_P_PREFETCH] = FT_PARAM("prefetch",
                                   "software prefetch distance in 64-float h-blocks for x and df "
                                   "(0: leave it to the hardware prefetchers)",
                                   NULL, 0, 0, 8),
    [FUS_DL_P_THREADS] = FT_THREADS_PARAM("OpenMP threads over row tasks"),
};

static const char *const dl_constraints[] = {
    "k applies only to strategy=k_layers (other strategies keep k=2)",
    "strategy=k_layers needs k < D (k >= D is all_layers)",
    "stream=1 needs an AVX build (streaming stores)",
    NULL,
};

/* ---- fusion.dflash ------------------------------------------------------------------------- */

enum { FUS_DH_P_PAR, FUS_DH_P_CHUNK, FUS_DH_P_THREADS };
enum { FUS_DH_PAR_BLAS, FUS_DH_PAR_ROWS };

static const char *const dh_par_labels[] = {"blas", "rows"};
static const char *const dh_chunk_labels[] = {"32", "128", "512", "all"};
static const int64_t dh_chunk_rows[] = {32, 128, 512, 0}; /* 0: all rows */

typedef struct dh_ctx {
    int64_t N, H, K;
    double eps;
    const float *x, *wfc, *g, *df;
    float *f, *dx;
    float *cbuf; /* backward: [N,H] c, overwritten by dc; forward only: NULL (c lives in f) */
    int bwd;
} dh_ctx;

/* Rows [n0, n1): c = x @ w_fc^T, into f (forward only, normalised in place next) or cbuf. */
static void dh_gemm_c(const dh_ctx *c, int64_t n0, int64_t n1) {
    float *dst = c->bwd ? c->cbuf : c->f;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)(n1 - n0), (int)c->H, (int)c->K, 1.0f,
                c->x + n0 * c->K, (int)c->K, c->wfc, (int)c->K, 0.0f, dst + n0 * c->H, (int)c->H);
}

/* Rows [n0, n1): dx = dc @ w_fc. */
static void dh_gemm_dx(const dh_ctx *c, int64_t n0, int64_t n1) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)(n1 - n0), (int)c->K, (int)c->H,
                1.0f, c->cbuf + n0 * c->H, (int)c->H, c->wfc, (int)c->K, 0.0f, c->dx + n0 * c->K,
                (int)c->K);
}

/* Rows [o0, o1) of dw_fc = dc^T @ x (a sum over every row n, inside sgemm). */
static void dh_gemm_dw(const dh_ctx *c, float *dw, int64_t o0, int64_t o1) {
    if (o1 <= o0) return;
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)(o1 - o0), (int)c->K, (int)c->N, 1.0f,
                c->cbuf + o0, (int)c->H, c->x, (int)c->K, 0.0f, dw + o0 * c->K, (int)c->K);
}

/* sum_h u[h] * v[h] in eight float lanes, then double. */
static double dh_dot(const float *restrict u, const float *restrict v, int64_t n) {
    v8f acc = {0};
    int64_t j = 0;
    for (; j + 8 <= n; j += 8)
        acc += v8_load(u + j) * v8_load(v + j);
    double sum = (double)v8_sum(acc);
    for (; j < n; j++)
        sum += (double)(u[j] * v[j]);
    return sum;
}

/* Row n: f = rmsnorm(c) * g; backward: c is replaced by dc and dg gets this row's share. */
static void dh_norm_row(const dh_ctx *c, int64_t n, double *restrict dg) {
    const int64_t H = c->H;
    const float *restrict g = c->g;
    if (!c->bwd) {
        float *fr = c->f + n * H; /* holds c */
        const float r = (float)(1.0 / sqrt(dh_dot(fr, fr, H) / (double)H + c->eps));
#pragma omp simd
        for (int64_t h = 0; h < H; h++)
            fr[h] = fr[h] * r * g[h];
        return;
    }
    float *restrict cr = c->cbuf + n * H;
    float *restrict fr = c->f + n * H;
    const float *restrict df = c->df + n * H;
    const double rd = 1.0 / sqrt(dh_dot(cr, cr, H) / (double)H + c->eps);
    double gdot = 0.0; /* sum_h g*df*c, through r */
    {
        v8f acc = {0};
        int64_t j = 0;
        for (; j + 8 <= H; j += 8)
            acc += v8_load(g + j) * v8_load(df + j) * v8_load(cr + j);
        gdot = (double)v8_sum(acc);
        for (; j < H; j++)
            gdot += (double)(g[j] * df[j] * cr[j]);
    }
    const float r = (float)rd, cc = (float)(rd * rd * rd * gdot / (double)H);
#pragma omp simd
    for (int64_t h = 0; h < H; h++) {
        float u = cr[h];
        fr[h] = u * r * g[h];
        dg[h] += (double)(df[h] * u * r);
        cr[h] = r * g[h] * df[h] - u * cc;
    }
}

static int64_t dh_chunk(const ft_call *c, const ft_config *cfg) {
    int64_t N = c->dim[DH_N], rows = dh_chunk_rows[cfg->v[FUS_DH_P_CHUNK]];
    if (rows) return rows;
    if (cfg->v[FUS_DH_P_PAR] == FUS_DH_PAR_ROWS) {
        int64_t th = cfg->v[FUS_DH_P_THREADS];
        return N > 0 ? (N + th - 1) / th : 1;
    }
    return N > 0 ? N : 1;
}

static int dh_valid(const ft_call *c, const ft_config *cfg, char *why, size_t n) {
    int dup = 0;
    if (cfg->v[FUS_DH_P_PAR] == FUS_DH_PAR_ROWS && cfg->v[FUS_DH_P_THREADS] < 2)
        return ft_config_why(FT_CONFIG_INVALID, why, n,
                             "par=rows needs threads >= 2 (with one thread it is par=blas)");
    int64_t rows = dh_chunk_rows[cfg->v[FUS_DH_P_CHUNK]];
    if (rows && rows >= c->dim[DH_N]) {
        if (why) snprintf(why, n, "chunk=%lld >= N rows is the same as chunk=all", (long long)rows);
        dup = 1; /* a duplicate, if nothing rules it out below */
    }
    return dup ? FT_CONFIG_DUPLICATE : FT_CONFIG_VALID;
}

static ft_status dh_run(ft_call *call, const ft_config *cfg, ft_err *err) {
    const int64_t N = call->dim[DH_N], H = call->dim[DH_H], K = call->dim[DH_TH];
    const int threads = cfg->v[FUS_DH_P_THREADS];
    const int bwd = call->backward;
    const int64_t chunk = dh_chunk(call, cfg);
    const int64_t ntasks = (N + chunk - 1) / chunk;

    size_t dg_slice = ft_ws_size((size_t)H * sizeof(double));
    size_t cbytes = bwd ? ft_ws_size((size_t)(N * H) * sizeof(float)) : 0;
    char *cur = ft_ws_get(call->ws, cbytes + (bwd ? (size_t)threads * dg_slice : 0), err);
    if (!cur) return err ? err->status : FT_ENOMEM;
    dh_ctx c = {
        .N = N,
        .H = H,
        .K = K,
        .eps = call->attrs.eps,
        .x = call->t[DH_X]->data,
        .wfc = call->t[DH_WFC]->data,
        .g = call->t[DH_G]->data,
        .df = bwd ? call->t[DH_DF]->data : NULL,
        .f = call->t[DH_F]->data,
        .dx = bwd && call->attrs.want_dx ? call->t[DH_DX]->data : NULL,
        .cbuf = bwd ? ft_ws_carve(&cur, (size_t)(N * H) * sizeof(float)) : NULL,
        .bwd = bwd,
    };
    char *dg_parts = cur;
    if (bwd) memset(dg_parts, 0, (size_t)threads * dg_slice);
    float *dw = bwd ? call->t[DH_DWFC]->data : NULL;

    if (cfg->v[FUS_DH_P_PAR] == FUS_DH_PAR_BLAS) {
        ft_cpu_blas_threads(threads);
        for (int64_t task = 0; task < ntasks && !ft_call_overdue(call); task++) {
            int64_t n0 = task * chunk, n1 = n0 + chunk < N ? n0 + chunk : N;
            dh_gemm_c(&c, n0, n1);
#pragma omp parallel num_threads(threads)
            {
                double *dg = (double *)(void *)(dg_parts + (size_t)omp_get_thread_num() * dg_slice);
#pragma omp for schedule(static)
                for (int64_t n = n0; n < n1; n++)
                    dh_norm_row(&c, n, dg);
            }
            if (c.dx) dh_gemm_dx(&c, n0, n1);
        }
        if (bwd) dh_gemm_dw(&c, dw, 0, H);
    } else {
        /* OpenBLAS (0.3.21, OpenMP build) runs a call made inside a parallel region on its
         * whole pool and lets one such call in at a time: the threads' GEMMs would queue. With
         * the pool at one thread each call runs on its caller, all at once. */
        ft_cpu_blas_threads(1);
#pragma omp parallel num_threads(threads)
        {
            const int tid = omp_get_thread_num(), nth = omp_get_num_threads();
            double *dg = (double *)(void *)(dg_parts + (size_t)tid * dg_slice);
            /* BLAS inside the region runs on the calling thread: each chunk's GEMM, norm and dx
             * GEMM run back to back on one core while the chunk's c is in its cache. */
#pragma omp for schedule(static, 1)
            for (int64_t task = 0; task < ntasks; task++) {
                if (ft_call_overdue(call)) continue;
                int64_t n0 = task * chunk, n1 = n0 + chunk < N ? n0 + chunk : N;
                dh_gemm_c(&c, n0, n1);
                for (int64_t n = n0; n < n1; n++)
                    dh_norm_row(&c, n, dg);
                if (c.dx) dh_gemm_dx(&c, n0, n1);
            }
            /* dw_fc: each thread owns a band of output rows (the implicit barrier above has
             * made every dc row visible). */
            if (bwd) {
                int64_t o0 = H * tid / nth, o1 = H * (tid + 1) / nth;
                dh_gemm_dw(&c, dw, o0, o1);
            }
        }
    }

    if (bwd) {
        float *dg = call->t[DH_DG]->data;
        for (int64_t h = 0; h < H; h++) {
            double acc = 0.0;
            for (int th = 0; th < threads; th++)
                acc += ((const double *)(const void *)(dg_parts + (size_t)th * dg_slice))[h];
            dg[h] = (float)acc;
        }
    }
    return FT_OK;
}

static ft_param dh_params[] = {
    [FUS_DH_P_PAR] =
        FT_PARAM("par",
                 "blas: OpenBLAS threads each GEMM, the norm is its own loop; rows: each thread "
                 "runs single-threaded GEMMs on its row chunks and normalises them in cache",
                 dh_par_labels, FUS_DH_PAR_BLAS, FUS_DH_PAR_BLAS, FUS_DH_PAR_ROWS),
    [FUS_DH_P_CHUNK] = FT_PARAM("chunk",
                                "rows per GEMM call: small keeps c and dc in cache for the norm "
                                "and dx, but w_fc is repacked per call",
                                dh_chunk_labels, 3, 0, 1, 2, 3),
    [FUS_DH_P_THREADS] = FT_THREADS_PARAM("OpenMP / OpenBLAS threads"),
};

static const char *const dh_constraints[] = {
    "par=rows needs threads >= 2 (with one thread it is par=blas)",
    "chunk < N rows (a chunk of N or more rows is chunk=all)",
    NULL,
};

/* ---- registration --------------------------------------------------------------------------- */

FT_CPU_IMPL(fusion_dflare, dl);
FT_CPU_IMPL(fusion_dflash, dh);
