/* kvproj_cpu.c: context K/V projection (SPEC.md attention.kvproj) on the CPU.
 *
 *   u = c[i or 0,n,:] @ w_k[i]^T   viewed as [Hkv, dh]
 *   k[i,n,j,:] = rope(u[j,:] / sqrt(mean_d u[j,d]^2 + eps) * gk[i,:], pos[n])   (rotate-half)
 *   rope turns pair m by pos * inv_freq[m] and scales by mscale (rope.c: plain, llama3, yarn)
 *   v[i,n,:]   = c[i or 0,n,:] @ w_v[i]^T
 *
 * Napkin math at qwen3-4b dflare, N = 2048 (D 7, H 2560, KVD = Hkv*dh = 1024), fp32: 2 GEMMs of
 * N x KVD x H per layer = 2*2*D*N*H*KVD = 150 GFLOP, against c (D*N*H*4 = 147 MB), the weights
 * (2*D*KVD*H*4 = 147 MB) and k, v (2*D*N*KVD*4 = 117 MB): 0.4 GB for 150 GFLOP, about 370
 * FLOP per byte, so compute-bound; floor = FLOPs / sgemm rate (about 1.1 s at the ~135 GFLOP/s
 * of a 2048^3 sgemm on a 2-core AMD EPYC (Zen 3) VM, 2026-11). The RMSNorm + RoPE epilogue is
 * D*N*KVD = 15 M elements (a few ms), and the cos/sin table is N*dh/2 pairs computed once per call
 * (positions are shared by every layer).
 *
 * Measured on that VM (2 threads, 2026-11): the default takes 1.12 s at qwen3-4b dflare (~98% of
 * the sgemm floor) and 0.75 s at dflash (Dc = 1, 107 GFLOP); the gemm forms and par differ by under
 * 10%, while chunks of 64 rows or fewer run 2-5x slower (BLAS re-packs the weights for every call).
 *
 * Parameters (why each changes how the work is done):
 *   gemm      per_layer: one GEMM for K and one for V per layer, written straight into k and v.
 *             kv_packed: K and V of a layer as one GEMM of 2*KVD columns; the weights are copied
 *               side by side first (2*KVD*H floats of workspace, a copy per layer in the time),
 *               and the wider B operand halves the passes over the layer's context rows.
 *             wide: Dc = 1 only: K of all layers in one GEMM of D*KVD columns (w_k is already
 *               [D*KVD, H], no copy), then V likewise: the shared context is read twice, not 2*D
 *               times, and each GEMM is D times wider.
 *             wide_packed: Dc = 1 only: K and V of all layers as one GEMM of 2*D*KVD columns
 *               (all weights copied side by side: 2*D*KVD*H floats of workspace).
 *             The packed and wide forms write into scratch rows; their epilogue moves each
 *             column block to its layer's k (normalised, rotated) or v (copied).
 *   epilogue  fused: norm + RoPE of a chunk of rows right after its GEMM, while the chunk is in
 *             cache. separate (per_layer only): one more pass over k after every GEMM, which
 *             costs a re-read of D*N*KVD floats from memory but lets the GEMMs run back to back.
 *   chunk     rows per GEMM call: small chunks keep the output (and the epilogue) in L2, large
 *             ones let BLAS amortise packing its operands over more rows.
 *   par       blas: each GEMM uses all threads (OpenBLAS splits it), the epilogue is a parallel
 *             loop. chunks: threads take whole row chunks and run single-threaded GEMMs and
 *             their own epilogue, with no synchronisation between GEMM and epilogue.
 *   bwd       backward only (backward = 1). The backward needs u = c w_k[i]^T, the projection
 *             before the norm, and turns dk into du through RoPE's transpose and the RMSNorm's
 *             Jacobian. Where u comes from is the choice:
 *             keep: the forward writes u aside (D*N*KVD floats of workspace: 58 MB at qwen3-4b
 *               dflare, N = 2048) and the backward reads it: no GEMM, one pass per layer.
 *             fused: u recomputed (one more GEMM of the forward's size per layer, a seventh of
 *               the call's GEMM work) per chunk of rows, the du pass right after that chunk's
 *               GEMM while it is in cache; N*KVD floats of workspace.
 *             separate: u of the whole layer recomputed first (one GEMM), then one pass over it.
 *             Then four GEMMs per layer: dc (+)= du w_k[i] + dv w_v[i] (Dc = 1 accumulates over
 *             the layers), dw_k[i] = du^T c, dw_v[i] = dv^T c; dgk sums per-thread partials in
 *             thread order.
 *   threads   OpenMP threads (and BLAS threads under par = blas).
 * Every row of the output depends only on its own row of c, so results are deterministic for any
 * thread assignment; the backward's sums over rows are BLAS GEMMs and fixed-order partials.
 *
 * Backward napkin math at qwen3-4b dflare, N = 2048: four GEMMs of the forward's size per layer,
 * twice the forward's FLOPs (300 GFLOP more), plus the u recompute (half the forward's again)
 * unless bwd = keep; the norm/RoPE backward is D*N*KVD = 15 M elements. u and du share one
 * buffer: [D, N, KVD] under keep (58 MB), [N, KVD] (8 MB) otherwise.
 */
#include <cblas.h>
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <string.h>

#include "attention/attention.h"
#include "cpu/cpu.h"

/* ---- parameter space ------------------------------------------------------------------------ */

enum { KV_GEMM, KV_EPI, KV_CHUNK, KV_PAR, KV_BWD, KV_THREADS, KV_NPARAMS };
enum { GEMM_PER_LAYER, GEMM_KV_PACKED, GEMM_WIDE, GEMM_WIDE_PACKED };
enum { EPI_FUSED, EPI_SEPARATE };
enum { PAR_BLAS, PAR_CHUNKS };

static const char *const gemm_labels[] = {"per_layer", "kv_packed", "wide", "wide_packed"};
static const char *const epi_labels[] = {"fused", "separate"};
static const char *const par_labels[] = {"blas", "chunks"};
enum { BWD_KEEP, BWD_FUSED, BWD_SEPARATE };
static const char *const bwd_labels[] = {"keep", "fused", "separate"};

static ft_param kv_params[KV_NPARAMS] = {
    [KV_GEMM] = FT_PARAM("gemm",
                         "how GEMMs are grouped: per layer and K/V, K|V packed per layer, all "
                         "layers wide (Dc = 1), or all layers and K|V packed (Dc = 1)",
                         gemm_labels, GEMM_PER_LAYER, 0, 1, 2, 3),
    [KV_EPI] = FT_PARAM(
        "epilogue", "RMSNorm + RoPE right after each chunk's GEMM (in cache) or as its own pass",
        epi_labels, EPI_FUSED, 0, 1),
    [KV_CHUNK] = FT_PARAM(
        "chunk", "rows per GEMM call: output in cache for the epilogue vs BLAS packing amortised",
        NULL, 1024, 16, 64, 256, 1024),
    [KV_PAR] = FT_PARAM(
        "par", "threads inside each GEMM (blas) or over row chunks with single-threaded GEMMs",
        par_labels, PAR_BLAS, 0, 1),
    [KV_BWD] = FT_PARAM("bwd",
                        "backward: u = c w_k^T kept from the forward (D*N*KVD floats of "
                        "workspace), or recomputed with the norm + RoPE backward per chunk right "
                        "after its GEMM (in cache) or as one pass after the layer's GEMM",
                        bwd_labels, BWD_KEEP, 0, 1, 2),
    [KV_THREADS] = FT_THREADS_PARAM("OpenMP and BLAS threads"),
};

static const char *const kv_constraints[] = {
    "gemm = wide or wide_packed needs one shared context (Dc = 1)",
    "epilogue = separate only with gemm = per_layer (the others write into scratch rows, which "
    "their epilogue consumes)",
    "par = chunks needs threads > 1 (with one thread it is par = blas)",
    "chunk >= N: one such candidate only (the default if it is one, else the smallest), the "
    "others are the same run",
    "bwd only steers the backward: forward-only calls take bwd = keep (the default)",
    NULL,
};

static int kv_valid(const ft_call *c, const ft_config *cfg, char *why, size_t n) {
    int dup = 0;
    const int gemm = cfg->v[KV_GEMM], epi = cfg->v[KV_EPI], chunk = cfg->v[KV_CHUNK];
    const int64_t N = c->dim[KP_N];
    if ((gemm == GEMM_WIDE || gemm == GEMM_WIDE_PACKED) && c->dim[KP_DC] != 1)
        return ft_config_why(FT_CONFIG_INVALID, why, n, "gemm = %s needs Dc = 1 (shared context)",
                             gemm_labels[gemm]);
    if (epi == EPI_SEPARATE && gemm != GEMM_PER_LAYER)
        return ft_config_why(FT_CONFIG_INVALID, why, n,
                             "epilogue = separate only with gemm = per_layer");
    if (!c->backward && cfg->v[KV_BWD] != BWD_KEEP)
        return ft_config_why(FT_CONFIG_INVALID, why, n,
                             "bwd only steers the backward (forward-only call)");
    if (cfg->v[KV_PAR] == PAR_CHUNKS && cfg->v[KV_THREADS] < 2)
        return ft_config_why(FT_CONFIG_INVALID, why, n,
                             "par = chunks with one thread duplicates par = blas");
    /* Chunks at or above N all run as one chunk: keep the default if it is one of them, else
     * the smallest, so the default stays valid at every shape. */
    const ft_param *p = &kv_params[KV_CHUNK];
    int kept = -1;
    if (p->def >= N)
        kept = p->def;
    else
        for (int k = 0; k < p->n; k++)
            if (p->values[k] >= N && (kept < 0 || p->values[k] < kept)) kept = p->values[k];
    if (chunk >= N && chunk != kept) {
        if (why)
            snprintf(why, n, "chunk = %d >= N = %lld is the same run as chunk = %d", chunk,
                     (long long)N, kept);
        dup = 1; /* a duplicate, if nothing rules it out below */
    }
    return dup ? FT_CONFIG_DUPLICATE : FT_CONFIG_VALID;
}

/* ---- kernels -------------------------------------------------------------------------------- */

/* mscale * cos/sin of pos[n] * inv_freq[m] for m < dh/2, in double then rounded: [N, half]
 * each. inv_freq (half doubles of scratch) is ft_rope_freqs's, computed once for all rows; the
 * scale (YaRN's) rides in the table, so the epilogue is the same whatever the scaling. */
static void rope_table(int64_t N, int64_t dh, const ft_attrs *attrs, const int32_t *pos,
                       double *inv_freq, float *cs, float *sn, int threads) {
    const int64_t half = dh / 2;
    double mscale;
    ft_rope_freqs(attrs, dh, inv_freq, &mscale);
#pragma omp parallel for num_threads(threads) schedule(static)
    for (int64_t n = 0; n < N; n++)
        for (int64_t m = 0; m < half; m++) {
            const double a = (double)pos[n] * inv_freq[m];
            cs[n * half + m] = (float)(mscale * cos(a));
            sn[n * half + m] = (float)(mscale * sin(a));
        }
}

/* RMSNorm over each head of one row, times g, then rotate-half RoPE with the row's cos/sin.
 * src may equal dst: index m and m + half are read before either is written, and no two
 * iterations touch the same index, so the simd loop is safe in place. */
static void norm_rope_row(const float *src, float *dst, int64_t Hkv, int64_t dh, const float *g,
                          const float *cs, const float *sn, float eps) {
    const int64_t half = dh / 2;
    for (int64_t j = 0; j < Hkv; j++) {
        const float *s = src + j * dh;
        float *d = dst + j * dh;
        float ss = 0.0f;
#pragma omp simd reduction(+ : ss)
        for (int64_t e = 0; e < dh; e++)
            ss += s[e] * s[e];
        const float r = 1.0f / sqrtf(ss / (float)dh + eps);
#pragma omp simd
        for (int64_t m = 0; m < half; m++) {
            const float y0 = s[m] * r * g[m], y1 = s[m + half] * r * g[m + half];
            d[m] = y0 * cs[m] - y1 * sn[m];
            d[m + half] = y1 * cs[m] + y0 * sn[m];
        }
    }
}

/* One GEMM family: out[n, 0:ncols] = a[n,:] @ w^T for the rows of a chunk. The output goes
 * either straight to `direct` (row stride KVD; RoPE in place when direct_g is set and the
 * epilogue is fused), or to `keep` (the backward's copy of u, row stride KVD) with the fused
 * epilogue writing direct from it, or to scratch rows whose column blocks of KVD are then moved
 * out: the first nk blocks to k of layers k0.., normalised and rotated (and u to u_keep when
 * kept), the next nv to v of layers v0... */
typedef struct kv_pass {
    const float *a, *w;
    int64_t ncols;
    float *direct;
    const float *direct_g;
    int64_t k0, nk, v0, nv;
    float *keep;
} kv_pass;

typedef struct kv_ctx {
    int64_t N, H, KVD, Hkv, dh;
    float eps;
    float *k, *v;
    float *u_keep; /* [D, N, KVD]: u for the backward (bwd = keep), else NULL */
    const float *gk, *cs, *sn;
    int epi_fused;
    ft_call *call; /* for its deadline (ft_call_overdue) */
} kv_ctx;

/* The GEMM and epilogue of rows [n0, n0 + nr) of a pass; scratch holds nr * ncols floats. */
static void kv_chunk(const kv_ctx *x, const kv_pass *p, int64_t n0, int64_t nr, float *scratch,
                     int threads) {
    const int64_t KVD = x->KVD, half = x->dh / 2;
    float *out = p->keep ? p->keep + n0 * KVD : p->direct ? p->direct + n0 * KVD : scratch;
    const int64_t ldo = p->direct ? KVD : p->ncols;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)nr, (int)p->ncols, (int)x->H, 1.0f,
                p->a + n0 * x->H, (int)x->H, p->w, (int)x->H, 0.0f, out, (int)ldo);
    if (p->direct) {
        if (!p->direct_g || !x->epi_fused) return;
#pragma omp parallel for num_threads(threads) schedule(static) if (threads > 1)
        for (int64_t n = 0; n < nr; n++)
            norm_rope_row(out + n * KVD, p->direct + (n0 + n) * KVD, x->Hkv, x->dh, p->direct_g,
                          x->cs + (n0 + n) * half, x->sn + (n0 + n) * half, x->eps);
        return;
    }
#pragma omp parallel for num_threads(threads) schedule(static) if (threads > 1)
    for (int64_t n = 0; n < nr; n++) {
        const float *row = out + n * ldo;
        for (int64_t s = 0; s < p->nk; s++) {
            const int64_t i = p->k0 + s;
            norm_rope_row(row + s * KVD, x->k + (i * x->N + n0 + n) * KVD, x->Hkv, x->dh,
                          x->gk + i * x->dh, x->cs + (n0 + n) * half, x->sn + (n0 + n) * half,
                          x->eps);
            if (x->u_keep)
                memcpy(x->u_keep + (i * x->N + n0 + n) * KVD, row + s * KVD,
                       (size_t)KVD * sizeof(float));
        }
        for (int64_t s = 0; s < p->nv; s++)
            memcpy(x->v + ((p->v0 + s) * x->N + n0 + n) * KVD, row + (p->nk + s) * KVD,
                   (size_t)KVD * sizeof(float));
    }
}

static void kv_run_pass(const kv_ctx *x, const kv_pass *p, int64_t chunk, int par, int threads,
                        float *scratch) {
    const int64_t nchunks = (x->N + chunk - 1) / chunk;
    if (par == PAR_BLAS) {
        ft_cpu_blas_threads(threads);
        for (int64_t ch = 0; ch < nchunks && !ft_call_overdue(x->call); ch++) {
            const int64_t n0 = ch * chunk, nr = x->N - n0 < chunk ? x->N - n0 : chunk;
            kv_chunk(x, p, n0, nr, scratch, threads);
        }
        return;
    }
    /* Chunks round-robin over threads (static): each thread owns one scratch slot. */
#pragma omp parallel num_threads(threads)
    {
        float *mine = scratch ? scratch + (size_t)omp_get_thread_num() * chunk * p->ncols : NULL;
#pragma omp for schedule(static, 1)
        for (int64_t ch = 0; ch < nchunks; ch++) {
            if (ft_call_overdue(x->call)) continue;
            const int64_t n0 = ch * chunk, nr = x->N - n0 < chunk ? x->N - n0 : chunk;
            kv_chunk(x, p, n0, nr, mine, 1);
        }
    }
}

/* Copy rows [0, na) of a and [0, nb) of b (each H floats) into one matrix, in parallel. */
static void pack_rows(float *dst, const float *a, int64_t na, const float *b, int64_t nb, int64_t H,
                      int threads) {
#pragma omp parallel for num_threads(threads) schedule(static)
    for (int64_t r = 0; r < na + nb; r++)
        memcpy(dst + r * H, r < na ? a + r * H : b + (r - na) * H, (size_t)H * sizeof(float));
}

/* ---- backward ------------------------------------------------------------------------------ */

/* One row of Hkv heads of the norm + RoPE backward, in place: u (the projection) becomes du,
 * given the row's dk, gain g and cos/sin (mscale folded in); dgk (dh doubles) accumulates
 * dy * xh. dxh goes through `tmp` (dh floats) since u is read to the end. */
static void norm_rope_bwd_row(float *u, const float *dk, int64_t Hkv, int64_t dh, const float *g,
                              const float *cs, const float *sn, float eps, double *dgk,
                              float *tmp) {
    const int64_t half = dh / 2;
    for (int64_t j = 0; j < Hkv; j++) {
        float *uj = u + j * dh;
        const float *dkj = dk + j * dh;
        float ss = 0.0f;
#pragma omp simd reduction(+ : ss)
        for (int64_t e = 0; e < dh; e++)
            ss += uj[e] * uj[e];
        const float r = 1.0f / sqrtf(ss / (float)dh + eps);
        float proj = 0.0f; /* sum_d dxh * xh */
        for (int64_t m = 0; m < half; m++) {
            const float a = dkj[m], b = dkj[m + half];
            const float y0 = a * cs[m] + b * sn[m], y1 = b * cs[m] - a * sn[m];
            const float x0 = uj[m] * r, x1 = uj[m + half] * r;
            dgk[m] += (double)y0 * x0;
            dgk[m + half] += (double)y1 * x1;
            tmp[m] = y0 * g[m];
            tmp[m + half] = y1 * g[m + half];
            proj += tmp[m] * x0 + tmp[m + half] * x1;
        }
        const float pm = proj / (float)dh;
#pragma omp simd
        for (int64_t e = 0; e < dh; e++)
            uj[e] = r * (tmp[e] - uj[e] * r * pm);
    }
}

/* The backward's state, carved from the call's one workspace beside the forward's. */
typedef struct kv_bwd_ctx {
    int64_t N, H, KVD, Hkv, dh;
    float eps;
    const float *cs, *sn; /* [N, dh/2], mscale folded in: the forward's table */
    float *u;             /* keep: [D, N, KVD], the forward's u; else [N, KVD] */
    int keep, fused;
    int64_t chunk;        /* rows per recompute GEMM (fused) */
    double *dgk_part;     /* [threads, dh] */
    float *tmp;           /* [threads, dh] */
} kv_bwd_ctx;

/* du for rows [n0, n0 + nr) of one layer: u (already there) to du in place. */
static void kv_bwd_rows(const kv_bwd_ctx *b, float *u, const float *dk, const float *g, int64_t n0,
                        int64_t nr, int threads) {
    const int64_t half = b->dh / 2;
#pragma omp parallel num_threads(threads) if (threads > 1)
    {
        const int t = omp_get_thread_num();
#pragma omp for schedule(static)
        for (int64_t n = n0; n < n0 + nr; n++)
            norm_rope_bwd_row(u + n * b->KVD, dk + n * b->KVD, b->Hkv, b->dh, g, b->cs + n * half,
                              b->sn + n * half, b->eps, b->dgk_part + (size_t)t * b->dh,
                              b->tmp + (size_t)t * b->dh);
    }
}

/* No rows: the weight and gain gradients are sums over nothing. */
static void kv_backward_empty(ft_call *c) {
    const int64_t D = c->dim[KP_D], H = c->dim[KP_H], KVD = c->dim[KP_KVD], dh = c->dim[KP_DH];
    memset(c->t[KP_DWK]->data, 0, (size_t)(D * KVD * H) * sizeof(float));
    memset(c->t[KP_DWV]->data, 0, (size_t)(D * KVD * H) * sizeof(float));
    memset(c->t[KP_DGK]->data, 0, (size_t)(D * dh) * sizeof(float));
}

static void kv_backward(ft_call *c, kv_bwd_ctx *b, int threads) {
    const int64_t Dc = c->dim[KP_DC], D = c->dim[KP_D], N = b->N, H = b->H, KVD = b->KVD;
    const int64_t dh = b->dh;
    const float *cin = c->t[KP_C]->data, *wk = c->t[KP_WK]->data, *wv = c->t[KP_WV]->data;
    const float *gk = c->t[KP_GK]->data, *dk = c->t[KP_DK]->data, *dv = c->t[KP_DV]->data;
    float *dc = c->t[KP_DCTX]->data, *dwk = c->t[KP_DWK]->data, *dwv = c->t[KP_DWV]->data;
    float *dgk = c->t[KP_DGK]->data;
    const size_t part_b = (size_t)threads * (size_t)dh * sizeof(double);
    ft_cpu_blas_threads(threads);

    for (int64_t i = 0; i < D && !ft_call_overdue(c); i++) {
        const float *a = cin + (Dc == 1 ? 0 : i) * N * H;
        const float *wki = wk + i * KVD * H, *wvi = wv + i * KVD * H;
        const float *dki = dk + i * N * KVD, *dvi = dv + i * N * KVD;
        float *u = b->keep ? b->u + i * N * KVD : b->u;
        memset(b->dgk_part, 0, part_b);
        if (b->keep) { /* u from the forward: du in one pass */
            kv_bwd_rows(b, u, dki, gk + i * dh, 0, N, threads);
        } else { /* u = c w_k^T, then du in place: chunk by chunk (fused) or the layer at once */
            const int64_t chunk = b->fused && b->chunk < N ? b->chunk : N;
            for (int64_t n0 = 0; n0 < N; n0 += chunk) {
                const int64_t nr = N - n0 < chunk ? N - n0 : chunk;
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)nr, (int)KVD, (int)H,
                            1.0f, a + n0 * H, (int)H, wki, (int)H, 0.0f, u + n0 * KVD, (int)KVD);
                kv_bwd_rows(b, u, dki, gk + i * dh, n0, nr, threads);
            }
        }
        for (int64_t e = 0; e < dh; e++) {
            double acc = 0.0;
            for (int t = 0; t < threads; t++)
                acc += b->dgk_part[(size_t)t * dh + e];
            dgk[i * dh + e] = (float)acc;
        }
        /* dc (+)= du w_k + dv w_v; a shared context sums its layers */
        float *dci = dc + (Dc == 1 ? 0 : i) * N * H;
        const float beta = Dc == 1 && i > 0 ? 1.0f : 0.0f;
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)N, (int)H, (int)KVD, 1.0f, u,
                    (int)KVD, wki, (int)H, beta, dci, (int)H);
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)N, (int)H, (int)KVD, 1.0f, dvi,
                    (int)KVD, wvi, (int)H, 1.0f, dci, (int)H);
        /* dw = d^T c */
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)KVD, (int)H, (int)N, 1.0f, u,
                    (int)KVD, a, (int)H, 0.0f, dwk + i * KVD * H, (int)H);
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)KVD, (int)H, (int)N, 1.0f, dvi,
                    (int)KVD, a, (int)H, 0.0f, dwv + i * KVD * H, (int)H);
    }
}

/* ---- launcher ------------------------------------------------------------------------------- */

static ft_status kv_run(ft_call *c, const ft_config *cfg, ft_err *err) {
    const int64_t Dc = c->dim[KP_DC], D = c->dim[KP_D], N = c->dim[KP_N], H = c->dim[KP_H];
    const int64_t KVD = c->dim[KP_KVD], Hkv = c->dim[KP_HKV], dh = c->dim[KP_DH], half = dh / 2;
    const int gemm = cfg->v[KV_GEMM], par = cfg->v[KV_PAR], threads = cfg->v[KV_THREADS];
    const int64_t chunk = cfg->v[KV_CHUNK] < N ? cfg->v[KV_CHUNK] : (N > 0 ? N : 1);
    const float *cin = c->t[KP_C]->data, *wk = c->t[KP_WK]->data, *wv = c->t[KP_WV]->data;
    const int keep = c->backward && cfg->v[KV_BWD] == BWD_KEEP;

    kv_ctx x = {.call = c,
                .N = N,
                .H = H,
                .KVD = KVD,
                .Hkv = Hkv,
                .dh = dh,
                .eps = (float)c->attrs.eps,
                .k = c->t[KP_K]->data,
                .v = c->t[KP_V]->data,
                .gk = c->t[KP_GK]->data,
                .epi_fused = cfg->v[KV_EPI] == EPI_FUSED};
    if (N == 0) {
        if (c->backward) kv_backward_empty(c);
        return FT_OK;
    }

    /* Workspace, one request for the call: the RoPE table, packed weights, one scratch block
     * of rows per worker, and for the backward u (all layers under keep) and its partials. */
    int64_t packed = 0, ncols = 0;
    switch (gemm) {
    case GEMM_KV_PACKED: packed = 2 * KVD, ncols = 2 * KVD; break;
    case GEMM_WIDE: ncols = D * KVD; break;
    case GEMM_WIDE_PACKED: packed = 2 * D * KVD, ncols = 2 * D * KVD; break;
    default: break;
    }
    const int64_t workers = par == PAR_CHUNKS ? threads : 1;
    const size_t table_b = (size_t)(N * half) * sizeof(float);
    const size_t pack_b = (size_t)(packed * H) * sizeof(float);
    const size_t scratch_b = (size_t)(workers * chunk * ncols) * sizeof(float);
    const size_t freq_b = (size_t)half * sizeof(double);
    const size_t u_b = c->backward ? (size_t)((keep ? D : 1) * N * KVD) * sizeof(float) : 0;
    const size_t part_b = c->backward ? (size_t)threads * (size_t)dh * sizeof(double) : 0;
    const size_t tmp_b = c->backward ? (size_t)threads * (size_t)dh * sizeof(float) : 0;
    char *ws = ft_ws_get(c->ws,
                         ft_ws_size(freq_b) + 2 * ft_ws_size(table_b) + ft_ws_size(pack_b) +
                             ft_ws_size(scratch_b) + ft_ws_size(u_b) + ft_ws_size(part_b) +
                             ft_ws_size(tmp_b),
                         err);
    if (!ws) return err ? err->status : FT_ENOMEM;
    double *inv_freq = ft_ws_carve(&ws, freq_b);
    float *cs = ft_ws_carve(&ws, table_b), *sn = ft_ws_carve(&ws, table_b);
    float *pack = ft_ws_carve(&ws, pack_b), *scratch = ft_ws_carve(&ws, scratch_b);
    kv_bwd_ctx b = {.N = N,
                    .H = H,
                    .KVD = KVD,
                    .Hkv = Hkv,
                    .dh = dh,
                    .eps = x.eps,
                    .cs = cs,
                    .sn = sn,
                    .keep = keep,
                    .fused = cfg->v[KV_BWD] == BWD_FUSED,
                    .chunk = chunk};
    b.u = ft_ws_carve(&ws, u_b);
    b.dgk_part = ft_ws_carve(&ws, part_b);
    b.tmp = ft_ws_carve(&ws, tmp_b);
    if (!ncols) scratch = NULL;
    if (keep) x.u_keep = b.u;
    rope_table(N, dh, &c->attrs, c->t[KP_POS]->data, inv_freq, cs, sn, threads);
    x.cs = cs;
    x.sn = sn;

    switch (gemm) {
    case GEMM_PER_LAYER:
        for (int64_t i = 0; i < D; i++) {
            const float *a = cin + (Dc == 1 ? 0 : i) * N * H;
            float *ki = x.k + i * N * KVD, *ui = keep ? x.u_keep + i * N * KVD : NULL;
            kv_pass pk = {a, wk + i * KVD * H, KVD, ki, x.gk + i * dh, 0, 0, 0, 0, ui};
            kv_pass pv = {a, wv + i * KVD * H, KVD, x.v + i * N * KVD, NULL, 0, 0, 0, 0, NULL};
            kv_run_pass(&x, &pk, chunk, par, threads, NULL);
            kv_run_pass(&x, &pv, chunk, par, threads, NULL);
        }
        if (!x.epi_fused) {
            const float *src = keep ? x.u_keep : x.k;
#pragma omp parallel for num_threads(threads) schedule(static)
            for (int64_t r = 0; r < D * N; r++) {
                const int64_t i = r / N, n = r % N;
                norm_rope_row(src + r * KVD, x.k + r * KVD, Hkv, dh, x.gk + i * dh, cs + n * half,
                              sn + n * half, x.eps);
            }
        }
        break;
    case GEMM_KV_PACKED:
        for (int64_t i = 0; i < D; i++) {
            pack_rows(pack, wk + i * KVD * H, KVD, wv + i * KVD * H, KVD, H, threads);
            kv_pass p = {cin + (Dc == 1 ? 0 : i) * N * H, pack, 2 * KVD, NULL, NULL, i, 1, i, 1,
                         NULL};
            kv_run_pass(&x, &p, chunk, par, threads, scratch);
        }
        break;
    case GEMM_WIDE: {
        kv_pass pk = {cin, wk, D * KVD, NULL, NULL, 0, D, 0, 0, NULL};
        kv_pass pv = {cin, wv, D * KVD, NULL, NULL, 0, 0, 0, D, NULL};
        kv_run_pass(&x, &pk, chunk, par, threads, scratch);
        kv_run_pass(&x, &pv, chunk, par, threads, scratch);
        break;
    }
    case GEMM_WIDE_PACKED: {
        pack_rows(pack, wk, D * KVD, wv, D * KVD, H, threads);
        kv_pass p = {cin, pack, 2 * D * KVD, NULL, NULL, 0, D, 0, D, NULL};
        kv_run_pass(&x, &p, chunk, par, threads, scratch);
        break;
    }
    default: return ft_err_set(err, FT_EINTERNAL, "attention.kvproj: unknown gemm %d", gemm);
    }
    if (c->backward && !ft_call_overdue(c)) kv_backward(c, &b, threads);
    return FT_OK;
}

/* ---- registration --------------------------------------------------------------------------- */

FT_CPU_IMPL(attention_kvproj, kv);
