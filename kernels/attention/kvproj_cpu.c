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
 *   threads   OpenMP threads (and BLAS threads under par = blas).
 * Every row of the output depends only on its own row of c, so results are deterministic for any
 * thread assignment.
 */
#include <cblas.h>
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <string.h>

#include "cpu/cpu.h"
#include "attention/attention.h"

/* ---- parameter space ------------------------------------------------------------------------ */

enum { KV_GEMM, KV_EPI, KV_CHUNK, KV_PAR, KV_THREADS, KV_NPARAMS };
enum { GEMM_PER_LAYER, GEMM_KV_PACKED, GEMM_WIDE, GEMM_WIDE_PACKED };
enum { EPI_FUSED, EPI_SEPARATE };
enum { PAR_BLAS, PAR_CHUNKS };

static const char *const gemm_labels[] = {"per_layer", "kv_packed", "wide", "wide_packed"};
static const char *const epi_labels[] = {"fused", "separate"};
static const char *const par_labels[] = {"blas", "chunks"};

static ft_param kv_params[KV_NPARAMS] = {
    [KV_GEMM] = {"gemm",
                 "how GEMMs are grouped: per layer and K/V, K|V packed per layer, all layers "
                 "wide (Dc = 1), or all layers and K|V packed (Dc = 1)",
                 4,
                 {0, 1, 2, 3},
                 gemm_labels,
                 GEMM_PER_LAYER,
                 0},
    [KV_EPI] = {"epilogue",
                "RMSNorm + RoPE right after each chunk's GEMM (in cache) or as its own pass",
                2,
                {0, 1},
                epi_labels,
                EPI_FUSED,
                0},
    [KV_CHUNK] = {"chunk",
                  "rows per GEMM call: output in cache for the epilogue vs BLAS packing amortised",
                  4,
                  {16, 64, 256, 1024},
                  NULL,
                  1024,
                  0},
    [KV_PAR] = {"par",
                "threads inside each GEMM (blas) or over row chunks with single-threaded GEMMs",
                2,
                {0, 1},
                par_labels,
                PAR_BLAS,
                0},
    [KV_THREADS] = {"threads", "OpenMP and BLAS threads", 1, {1}, NULL, 1, FT_PARAM_THREADS},
};

static const char *const kv_constraints[] = {
    "gemm = wide or wide_packed needs one shared context (Dc = 1)",
    "epilogue = separate only with gemm = per_layer (the others write into scratch rows, which "
    "their epilogue consumes)",
    "par = chunks needs threads > 1 (with one thread it is par = blas)",
    "chunk >= N: one such candidate only (the default if it is one, else the smallest), the "
    "others are the same run",
    NULL,
};

static int kv_valid(const ft_call *c, const ft_config *cfg, char *why, size_t n) {
    int dup = 0;
    const int gemm = cfg->v[KV_GEMM], epi = cfg->v[KV_EPI], chunk = cfg->v[KV_CHUNK];
    const int64_t N = c->dim[KP_N];
    if ((gemm == GEMM_WIDE || gemm == GEMM_WIDE_PACKED) && c->dim[KP_DC] != 1) {
        if (why) snprintf(why, n, "gemm = %s needs Dc = 1 (shared context)", gemm_labels[gemm]);
        return 0;
    }
    if (epi == EPI_SEPARATE && gemm != GEMM_PER_LAYER) {
        if (why) snprintf(why, n, "epilogue = separate only with gemm = per_layer");
        return 0;
    }
    if (cfg->v[KV_PAR] == PAR_CHUNKS && cfg->v[KV_THREADS] < 2) {
        if (why) snprintf(why, n, "par = chunks with one thread duplicates par = blas");
        return 0;
    }
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

static ft_space kv_space = {kv_params, KV_NPARAMS, kv_constraints, kv_valid};

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
 * epilogue is fused) or to scratch rows whose column blocks of KVD are then moved out: the
 * first nk blocks to k of layers k0.., normalised and rotated, the next nv to v of layers v0... */
typedef struct kv_pass {
    const float *a, *w;
    int64_t ncols;
    float *direct;
    const float *direct_g;
    int64_t k0, nk, v0, nv;
} kv_pass;

typedef struct kv_ctx {
    int64_t N, H, KVD, Hkv, dh;
    float eps;
    float *k, *v;
    const float *gk, *cs, *sn;
    int epi_fused;
    ft_call *call; /* for its deadline (ft_call_overdue) */
} kv_ctx;

/* The GEMM and epilogue of rows [n0, n0 + nr) of a pass; scratch holds nr * ncols floats. */
static void kv_chunk(const kv_ctx *x, const kv_pass *p, int64_t n0, int64_t nr, float *scratch,
                     int threads) {
    const int64_t KVD = x->KVD, half = x->dh / 2;
    float *out = p->direct ? p->direct + n0 * KVD : scratch;
    const int64_t ldo = p->direct ? KVD : p->ncols;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)nr, (int)p->ncols, (int)x->H, 1.0f,
                p->a + n0 * x->H, (int)x->H, p->w, (int)x->H, 0.0f, out, (int)ldo);
    if (p->direct) {
        if (!p->direct_g || !x->epi_fused) return;
#pragma omp parallel for num_threads(threads) schedule(static) if (threads > 1)
        for (int64_t n = 0; n < nr; n++)
            norm_rope_row(out + n * KVD, out + n * KVD, x->Hkv, x->dh, p->direct_g,
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

/* ---- launcher ------------------------------------------------------------------------------- */

static ft_status kv_run(ft_call *c, const ft_config *cfg, ft_err *err) {
    const int64_t Dc = c->dim[KP_DC], D = c->dim[KP_D], N = c->dim[KP_N], H = c->dim[KP_H];
    const int64_t KVD = c->dim[KP_KVD], Hkv = c->dim[KP_HKV], dh = c->dim[KP_DH], half = dh / 2;
    const int gemm = cfg->v[KV_GEMM], par = cfg->v[KV_PAR], threads = cfg->v[KV_THREADS];
    const int64_t chunk = cfg->v[KV_CHUNK] < N ? cfg->v[KV_CHUNK] : (N > 0 ? N : 1);
    const float *cin = c->t[KP_C]->data, *wk = c->t[KP_WK]->data, *wv = c->t[KP_WV]->data;

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
    if (N == 0) return FT_OK;

    /* Workspace: the RoPE table, packed weights, and one scratch block of rows per worker. */
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
    char *ws = ft_ws_get(c->ws,
                         ft_ws_size(freq_b) + 2 * ft_ws_size(table_b) + ft_ws_size(pack_b) +
                             ft_ws_size(scratch_b),
                         err);
    if (!ws) return err ? err->status : FT_ENOMEM;
    double *inv_freq = ft_ws_carve(&ws, freq_b);
    float *cs = ft_ws_carve(&ws, table_b), *sn = ft_ws_carve(&ws, table_b);
    float *pack = ft_ws_carve(&ws, pack_b), *scratch = ft_ws_carve(&ws, scratch_b);
    if (!ncols) scratch = NULL;
    rope_table(N, dh, &c->attrs, c->t[KP_POS]->data, inv_freq, cs, sn, threads);
    x.cs = cs;
    x.sn = sn;

    switch (gemm) {
    case GEMM_PER_LAYER:
        for (int64_t i = 0; i < D; i++) {
            const float *a = cin + (Dc == 1 ? 0 : i) * N * H;
            kv_pass pk = {a, wk + i * KVD * H, KVD, x.k + i * N * KVD, x.gk + i * dh, 0, 0, 0, 0};
            kv_pass pv = {a, wv + i * KVD * H, KVD, x.v + i * N * KVD, NULL, 0, 0, 0, 0};
            kv_run_pass(&x, &pk, chunk, par, threads, NULL);
            kv_run_pass(&x, &pv, chunk, par, threads, NULL);
        }
        if (!x.epi_fused) {
#pragma omp parallel for num_threads(threads) schedule(static)
            for (int64_t r = 0; r < D * N; r++) {
                const int64_t i = r / N, n = r % N;
                norm_rope_row(x.k + r * KVD, x.k + r * KVD, Hkv, dh, x.gk + i * dh, cs + n * half,
                              sn + n * half, x.eps);
            }
        }
        break;
    case GEMM_KV_PACKED:
        for (int64_t i = 0; i < D; i++) {
            pack_rows(pack, wk + i * KVD * H, KVD, wv + i * KVD * H, KVD, H, threads);
            kv_pass p = {cin + (Dc == 1 ? 0 : i) * N * H, pack, 2 * KVD, NULL, NULL, i, 1, i, 1};
            kv_run_pass(&x, &p, chunk, par, threads, scratch);
        }
        break;
    case GEMM_WIDE: {
        kv_pass pk = {cin, wk, D * KVD, NULL, NULL, 0, D, 0, 0};
        kv_pass pv = {cin, wv, D * KVD, NULL, NULL, 0, 0, 0, D};
        kv_run_pass(&x, &pk, chunk, par, threads, scratch);
        kv_run_pass(&x, &pv, chunk, par, threads, scratch);
        break;
    }
    case GEMM_WIDE_PACKED: {
        pack_rows(pack, wk, D * KVD, wv, D * KVD, H, threads);
        kv_pass p = {cin, pack, 2 * D * KVD, NULL, NULL, 0, D, 0, D};
        kv_run_pass(&x, &p, chunk, par, threads, scratch);
        break;
    }
    default: return ft_err_set(err, FT_EINTERNAL, "attention.kvproj: unknown gemm %d", gemm);
    }
    return FT_OK;
}

/* ---- registration --------------------------------------------------------------------------- */

const ft_cpu_impl ft_cpu_attention_kvproj = {&kv_space, kv_run};
