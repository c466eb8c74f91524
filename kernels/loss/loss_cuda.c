/* loss_cuda.c: the loss op on the CUDA backend (SPEC.md loss: LM head + weighted cross
 * entropy, forward and backward in one call): its tunable space, the kernel modules a
 * configuration compiles, and the launch sequences. The kernels are in loss.cu.
 *
 * Napkin math at qwen3-8b train (M = 8192 rows, H = 4096, V = 151936), bf16: each of the logits,
 * dh and dw_lm GEMMs is 2*M*V*H = 10.2 TFLOP, ~10 ms on an H200's ~1 PFLOP/s of dense bf16; the
 * logits in float32 would be 5 GB, hence chunks. w_lm is 1.2 GB: a chunk of R rows reads it
 * twice (three times with dw_lm) for 4*R*V*H FLOPs, R flops per byte: from R ~ 300 (about 20
 * blocks of 16) the GEMMs are compute-bound on that GPU.
 *
 * ---- exposed parameters, and why ----
 *   strategy  materialize: per chunk of whole blocks the logits [R, V] in float32 scratch by
 *             cuBLASLt, the softmax / CE kernel writing the weighted gradient over them in
 *             place, then cuBLASLt GEMMs for dh and dw_lm (the Liger-Kernel shape): three GEMMs
 *             at the roofline's own count, R*V*4 bytes of scratch. online: vocab-tiled kernels
 *             that never hold a logits row: pass 1 the per-row log-sum-exp and target logit
 *             (running max and sum per vocab split), the weights, pass 2 recomputing the tiles
 *             for dh (and once more for dw_lm) (the Cut-Cross-Entropy shape): one more logits
 *             GEMM's worth of FLOPs (two with dw_lm), the logit tiles on the tensor cores with
 *             bf16 storage (mma.sync m16n8k16) and on the CUDA cores with f32, the dh / dw_lm
 *             products on the CUDA cores, for scratch that does not grow with V x M.
 *   chunk     materialize: blocks per chunk (whole blocks: the D-PACE weights of a block need q
 *             of all its rows). The GEMMs' M dimension (flops per byte of w_lm streamed), the
 *             passes over w_lm and dw_lm, and the logits scratch (chunk*B*V*4 bytes).
 *   algo      materialize: the cuBLASLt algorithm of its GEMMs, by rank among the heuristic's
 *             candidates (skinny chunks and the long-K dw_lm GEMM are where its first choice
 *             is least often the best).
 *   bm, bn    online: the logit tile, rows x vocab columns (LS_BM, LS_BN at compile time: a
 *             thread holds bm*bn/64 accumulators). Larger tiles reuse each staged h and w_lm
 *             element more often (bm and bn FMAs per element loaded) against registers, and
 *             the dh (dw_lm) pass reads and writes its float accumulator rows once per vocab
 *             (row) tile: larger bn (bm) means fewer such passes.
 *   warps     online: threads per block / 32 (kernel argument): parallelism per tile against
 *             the number of blocks per SM.
 *   stages    online: shared-memory buffers of the K loop: 1 loads a K slice and waits for it,
 *             2 issues the next slice's cp.async before computing the current one.
 *
 * The denominator: for every scheme but D-PACE's, and for the count / num_seqs / none norms, it
 * does not depend on q, so the host computes it (kernels/loss/loss_weights.c) and w[m]/denom is
 * folded into dz. D-PACE weights under norm = weight_sum need every row's q first: dz carries
 * w[m] alone, loss_finish sums the weights on the device and loss_scale divides dh, dw_lm after.
 *
 * Peak device memory beyond inputs and outputs (FT_CUDA_SCRATCH_SLOTS, floats):
 *   materialize  rows: 8*M + 4 (row statistics, ce, q, w, scale); logits: min(chunk*B, M) * V;
 *                plus cuBLASLt's workspace on the GPU (gemm.c: 32 MiB from Hopper on).
 *   online       rows: (2*S + 6)*M + 4, S the vocab splits of pass 1 (S <= ceil(2*SMs / row
 *                tiles) and <= vocab tiles, so S*M <= M + 2*SMs*bm); with bf16 storage the
 *                float32 accumulators of dh (M*H) and, with want_dw, of dw_lm (V*H). Never
 *                V x M.
 * Slots: 0 rows, 1 logits / dh accumulator, 2 dw_lm accumulator.
 *
 * Cost and precision notes. online's pass 2 is written for correctness first: a block reads
 * and writes its float accumulator slab (bm x H for dh, bn x H for dw_lm) once per tile of the
 * other dimension and takes the dh / dw_lm products on the CUDA cores, so at qwen3-8b it moves
 * on the order of a terabyte and materialize is the fast strategy there. materialize with bf16
 * storage accumulates dw_lm over chunks in bf16 (beta = 1 GEMMs): one rounding per chunk.
 * Determinism: no atomics anywhere; every sum has a fixed order for a fixed config and device.
 */
#include <stdio.h>
#include <string.h>

#include "cuda/cuda_backend.h"
#include "flaretune/ref.h"
#include "loss/loss.h"

#define LSC_SRC        "loss/loss.cu"
#define LSC_MAX_LOGITS ((int64_t)1 << 31) /* bytes of one chunk's float logits */
#define LSC_ROW_T      256                /* threads of the per-row and finishing kernels */
#define LSC_WT_T       64                 /* threads of loss_weights (one per block of B rows) */
#define LSC_BK         32                 /* loss.cu LS_BK */
#define LSC_MAX_B      1024               /* rows per block (the host's weight buffers) */

enum { LCP_STRATEGY, LCP_CHUNK, LCP_ALGO, LCP_BM, LCP_BN, LCP_WARPS, LCP_STAGES, LCP_COUNT };
enum { LC_MATERIALIZE, LC_ONLINE };

static const char *const lc_strategy_labels[] = {"materialize", "online"};

static ft_param lc_params[LCP_COUNT] = {
    [LCP_STRATEGY] = {"strategy",
                      "materialize: chunk logits in scratch, cuBLASLt GEMMs, dz in place; "
                      "online: vocab tiles with a running logsumexp, logits recomputed, scratch "
                      "independent of V x M",
                      2,
                      {LC_MATERIALIZE, LC_ONLINE},
                      lc_strategy_labels,
                      LC_MATERIALIZE,
                      0},
    [LCP_CHUNK] = {"chunk",
                   "materialize: blocks per chunk: the GEMMs' rows (flops per byte of w_lm), "
                   "passes over w_lm and dw_lm, logits scratch chunk*B*V*4 bytes",
                   6,
                   {1, 2, 4, 8, 16, 32},
                   NULL,
                   16,
                   0},
    [LCP_ALGO] = {"algo",
                  "materialize: cuBLASLt algorithm of its GEMMs, by rank among the heuristic's "
                  "candidates (0: its first choice)",
                  4,
                  {0, 1, 2, 3},
                  NULL,
                  0,
                  0},
    [LCP_BM] = {"bm",
                "online: rows of a logit tile (compile time): reuse of each staged w_lm element "
                "against registers",
                2,
                {16, 32},
                NULL,
                16,
                0},
    [LCP_BN] = {"bn",
                "online: vocab columns of a logit tile (compile time): reuse of each staged h "
                "element, passes of the dh accumulator",
                2,
                {32, 64},
                NULL,
                64,
                0},
    [LCP_WARPS] = {"warps", "online: warps per block", 2, {2, 4}, NULL, 4, 0},
    [LCP_STAGES] = {"stages",
                    "online: shared-memory stages of the K loop (2: the next slice's cp.async "
                    "overlaps the current slice's FMAs)",
                    2,
                    {1, 2},
                    NULL,
                    2,
                    0},
};

static const char *const lc_constraints[] = {
    "chunk, algo: materialize only; bm, bn, warps, stages: online only (the others keep their "
    "defaults)",
    "chunk: of the candidates covering the whole batch only the default, or the smallest if the "
    "default does not cover it",
    "materialize: chunk*B*V*4 bytes of logits at most 2 GiB",
    "online with bf16 storage: H even (4-byte cp.async of bf16 pairs)",
    "B <= 1024",
    "algo must exist among cuBLASLt's candidates for the GEMM (checked when it runs on the GPU)",
    NULL,
};

static int64_t cdiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

static int lc_valid(const ft_call *c, const ft_config *cfg, char *why, size_t n) {
    int dup = 0;
    const int strategy = cfg->v[LCP_STRATEGY], chunk = cfg->v[LCP_CHUNK];
    const int64_t B = c->attrs.loss.B, M = c->dim[LS_M], V = c->dim[LS_V], H = c->dim[LS_H];
    const int64_t nblk = B > 0 ? M / B : 0;
    static const int online_only[] = {LCP_BM, LCP_BN, LCP_WARPS, LCP_STAGES};
    static const int mat_only[] = {LCP_CHUNK, LCP_ALGO};
    if (B > LSC_MAX_B) {
        if (why) snprintf(why, n, "B=%lld: blocks of at most %d rows", (long long)B, LSC_MAX_B);
        return 0;
    }
    if (strategy == LC_MATERIALIZE) {
        for (size_t i = 0; i < sizeof online_only / sizeof online_only[0]; i++)
            if (cfg->v[online_only[i]] != lc_params[online_only[i]].def) {
                if (why)
                    snprintf(why, n, "%s applies to strategy=online only (leave it at %d)",
                             lc_params[online_only[i]].name, lc_params[online_only[i]].def);
                return 0;
            }
        const ft_param *p = &lc_params[LCP_CHUNK];
        if (chunk >= nblk && chunk != p->def) {
            int smallest = chunk;
            for (int k = 0; k < p->n; k++)
                if (p->values[k] >= nblk && p->values[k] < smallest) smallest = p->values[k];
            if (p->def >= nblk || chunk != smallest) {
                if (why)
                    snprintf(why, n, "chunk=%d: the batch has %lld blocks (chunk=%d covers it)",
                             chunk, (long long)nblk, p->def >= nblk ? p->def : smallest);
                dup = 1; /* a duplicate, if nothing rules it out below */
            }
        }
        if ((int64_t)chunk * B * V * (int64_t)sizeof(float) > LSC_MAX_LOGITS) {
            if (why) snprintf(why, n, "materialize: chunk*B*V float logits exceed 2 GiB");
            return 0;
        }
    } else {
        for (size_t i = 0; i < sizeof mat_only / sizeof mat_only[0]; i++)
            if (cfg->v[mat_only[i]] != lc_params[mat_only[i]].def) {
                if (why)
                    snprintf(why, n, "%s applies to strategy=materialize only (leave it at %d)",
                             lc_params[mat_only[i]].name, lc_params[mat_only[i]].def);
                return 0;
            }
        if (ft_cuda_call_dt(c) == FT_DT_BF16 && H % 2) {
            if (why)
                snprintf(why, n, "online with bf16 storage needs H even (H=%lld)", (long long)H);
            return 0;
        }
    }
    return dup ? FT_CONFIG_DUPLICATE : FT_CONFIG_VALID;
}

static ft_space lc_space = {lc_params, LCP_COUNT, lc_constraints, lc_valid};

/* ---- geometry ------------------------------------------------------------------------------ */

typedef struct lc_geom {
    int64_t M, H, V, B;
    int strategy, bm, bn, threads, stages, algo;
    int64_t rows;            /* materialize: rows per chunk */
    int64_t rt, nt, ns, tps; /* online: row tiles, vocab tiles, splits, tiles per split */
    size_t smem;             /* online kernels' dynamic shared memory */
} lc_geom;

static void lc_geom_of(const ft_call *c, ft_dt dt, const ft_config *cfg, int sm_count, lc_geom *g) {
    memset(g, 0, sizeof *g);
    g->M = c->dim[LS_M];
    g->H = c->dim[LS_H];
    g->V = c->dim[LS_V];
    g->B = c->attrs.loss.B > 0 ? c->attrs.loss.B : 1;
    g->strategy = cfg->v[LCP_STRATEGY];
    g->bm = cfg->v[LCP_BM];
    g->bn = cfg->v[LCP_BN];
    g->threads = 32 * cfg->v[LCP_WARPS];
    g->stages = cfg->v[LCP_STAGES];
    g->algo = cfg->v[LCP_ALGO];
    g->rows = (int64_t)cfg->v[LCP_CHUNK] * g->B;
    if (g->rows > g->M) g->rows = g->M;
    g->rt = cdiv(g->M, g->bm);
    g->nt = cdiv(g->V, g->bn);
    int64_t ns = g->rt > 0 ? cdiv(2 * (int64_t)sm_count, g->rt) : 1;
    if (ns > g->nt) ns = g->nt;
    if (ns < 1) ns = 1;
    g->tps = cdiv(g->nt, ns);
    g->ns = cdiv(g->nt, g->tps);
    size_t buf = (size_t)g->stages * (size_t)(g->bm + g->bn) * LSC_BK * ft_dt_size(dt);
    g->smem = ((buf + 15) & ~(size_t)15) + (size_t)g->bm * (size_t)(g->bn + 1) * sizeof(float);
}

static void lc_spec(const ft_call *c, ft_dt dt, const lc_geom *g, ft_cuda_module_spec *s) {
    memset(s, 0, sizeof *s);
    s->source = LSC_SRC;
    ft_cuda_spec_define(s, "FT_BF16=%d", dt == FT_DT_BF16 ? 1 : 0);
    ft_cuda_spec_define(s, "LS_BM=%d", g->bm);
    ft_cuda_spec_define(s, "LS_BN=%d", g->bn);
    if (g->strategy == LC_MATERIALIZE) {
        ft_cuda_spec_kernel(s, "loss_rows", LSC_ROW_T, 0);
        ft_cuda_spec_kernel(s, "loss_weights", LSC_WT_T, 0);
        ft_cuda_spec_kernel(s, "loss_grad_ip", LSC_ROW_T, 0);
    } else {
        ft_cuda_spec_kernel(s, "loss_online_fwd", g->threads, g->smem);
        ft_cuda_spec_kernel(s, "loss_weights", LSC_WT_T, 0);
        ft_cuda_spec_kernel(s, "loss_online_dh", g->threads, g->smem);
        if (c->attrs.loss.want_dw) ft_cuda_spec_kernel(s, "loss_online_dw", g->threads, g->smem);
    }
    ft_cuda_spec_kernel(s, "loss_finish", LSC_ROW_T, 0);
    ft_cuda_spec_kernel(s, "loss_scale", LSC_ROW_T, 0);
}

/* The SM count the online split uses for static analysis (the H100/H200 count; run() uses the
 * device's own). */
#define LSC_SPEC_SMS 132

static int lc_modules(const ft_call *c, ft_dt dt, const ft_config *cfg, ft_cuda_module_spec *out,
                      int max) {
    if (max < 1) return 0;
    lc_geom g;
    lc_geom_of(c, dt, cfg, LSC_SPEC_SMS, &g);
    lc_spec(c, dt, &g, &out[0]);
    return 1;
}

/* ---- run ----------------------------------------------------------------------------------- */

static int dpace_family(ft_loss_scheme s) {
    return s == FT_SCHEME_DPACE || s == FT_SCHEME_DPACE_CUM || s == FT_SCHEME_DPACE_CONT;
}

/* The host's part of the denominator (loss_weights.c): late = 1 when it needs q (D-PACE weights
 * under weight_sum), else its value (the weights of the other schemes do not read q). */
static double lc_denominator(const ft_call *c, int *late) {
    const ft_loss_attrs *a = &c->attrs.loss;
    ft_loss_norm norm = a->norm;
    if (norm == FT_NORM_DEFAULT)
        norm = dpace_family(a->scheme) ? FT_NORM_NUM_SEQS : FT_NORM_WEIGHT_SUM;
    *late = dpace_family(a->scheme) && norm == FT_NORM_WEIGHT_SUM;
    if (*late) return 1.0;
    const int64_t M = c->dim[LS_M], B = a->B;
    const uint8_t *mask = c->t[LS_MASK]->data;
    double sum = 0;
    if (norm != FT_NORM_WEIGHT_SUM) return ft_loss_denominator(a, M, NULL, mask);
    /* weight_sum with q-independent weights: one block's weights at a time, q = 1. */
    double qb[LSC_MAX_B], wb[LSC_MAX_B];
    for (int64_t k = 0; k < B && k < LSC_MAX_B; k++)
        qb[k] = 1.0;
    for (int64_t b = 0; b < M; b += B) {
        ft_loss_block_weights(a, qb, mask + b, wb);
        for (int64_t k = 0; k < B; k++)
            sum += wb[k];
    }
    return sum;
}

static ft_status lc_run(ft_cuda_ctx *x, const ft_cuda_call *dc, const ft_config *cfg, ft_err *err) {
    const ft_call *c = dc->c;
    const ft_loss_attrs *a = &c->attrs.loss;
    const ft_dt dt = dc->dt;
    lc_geom g;
    lc_geom_of(c, dt, cfg, ft_dev_props_of(ft_cuda_dev(x))->sm_count, &g);
    ft_cuda_module_spec spec;
    lc_spec(c, dt, &g, &spec);
    ft_dev_module *m;
    ft_status s = ft_cuda_module(x, &spec, &m, err);
    if (s) return s;
    ft_dev *dev = ft_cuda_dev(x);

    const int want_dw = a->want_dw != 0, online = g.strategy == LC_ONLINE;
    int late;
    const double denom_h = lc_denominator(c, &late);
    const int backward = late || denom_h != 0;
    float gscale = late || denom_h == 0 ? 1.0f : (float)(1.0 / denom_h);
    float denom_f = (float)denom_h;
    const int64_t M = g.M, H = g.H, V = g.V, B = g.B;
    const int64_t ns = online ? g.ns : 1;
    int Mi = (int)M, Hi = (int)H, Vi = (int)V, Bi = (int)B, nsi = (int)ns;

    void *hd = dc->d[LS_HID], *wd = dc->d[LS_WLM], *lab = dc->d[LS_LABELS], *mk = dc->d[LS_MASK];
    void *lossd = dc->d[LS_LOSS], *ced = dc->d[LS_CE], *qd = dc->d[LS_Q], *wod = dc->d[LS_W];
    void *dhd = dc->d[LS_DH], *dwd = want_dw ? dc->d[LS_DWLM] : NULL;

    /* Row scratch: pmx, psum [ns][M], zt, lse, ce, q, w, sc [M], red [4]. */
    float *rows;
    size_t nrows = (size_t)(2 * ns + 6) * (size_t)M + 4;
    if ((s = ft_cuda_scratch(x, 0, nrows * sizeof(float), (void **)&rows, err))) return s;
    float *pmx = rows, *psum = pmx + ns * M, *zt = psum + ns * M, *lse = zt + M, *cef = lse + M,
          *qf = cef + M, *wf = qf + M, *scf = wf + M, *red = scf + M;

    int scheme = (int)a->scheme;
    float gamma = (float)ft_loss_gamma(a), alpha = (float)a->alpha;
    const ft_dim3 rowblk = {LSC_ROW_T, 1, 1}, wtblk = {LSC_WT_T, 1, 1};

    if (!online) {
        const int64_t R = g.rows > 0 ? g.rows : 1;
        const int64_t ldz = dt == FT_DT_BF16 ? 2 * V : V; /* dz's leading dim, elements */
        float *Z;
        if ((s = ft_cuda_scratch(x, 1, (size_t)R * (size_t)V * sizeof(float), (void **)&Z, err)))
            return s;
        long long ldzf = (long long)V;
        for (int64_t r0 = 0; r0 < M; r0 += R) {
            const int64_t nr = M - r0 < R ? M - r0 : R;
            const size_t es = ft_dt_size(dt);
            const void *hc = (const char *)hd + (size_t)(r0 * H) * es;
            ft_gemm_desc gz = {.trans_b = 1,
                               .M = nr,
                               .N = V,
                               .K = H,
                               .lda = H,
                               .ldb = H,
                               .ldc = V,
                               .batch = 1,
                               .ab = dt,
                               .c = FT_DT_F32,
                               .alpha = 1.0f};
            if ((s = ft_cuda_gemm(x, &gz, hc, wd, Z, g.algo, err)))
                return ft_err_wrap(err, "loss: logits = h w_lm^T");
            int r0i = (int)r0;
            void *ra[] = {&Z, &ldzf, &lab, &r0i, &Vi, &pmx, &psum, &zt};
            if ((s = ft_cuda_launch(x, m, "loss_rows", (ft_dim3){(unsigned)nr, 1, 1}, rowblk, 0, ra,
                                    err)))
                return s;
            int b0 = (int)(r0 / B), nb = (int)(nr / B);
            void *wa[] = {&lab,   &mk,    &pmx,    &psum, &zt, &nsi, &Mi,  &Bi,  &b0, &nb, &scheme,
                          &gamma, &alpha, &gscale, &ced,  &qd, &wod, &lse, &cef, &qf, &wf, &scf};
            if ((s = ft_cuda_launch(x, m, "loss_weights",
                                    (ft_dim3){(unsigned)cdiv(nb, LSC_WT_T), 1, 1}, wtblk, 0, wa,
                                    err)))
                return s;
            if (!backward) continue;
            void *ga[] = {&Z, &ldzf, &lab, &r0i, &Vi, &lse, &scf};
            if ((s = ft_cuda_launch(x, m, "loss_grad_ip", (ft_dim3){(unsigned)nr, 1, 1}, rowblk, 0,
                                    ga, err)))
                return s;
            void *dhc = (char *)dhd + (size_t)(r0 * H) * es;
            ft_gemm_desc gh = {.M = nr,
                               .N = H,
                               .K = V,
                               .lda = ldz,
                               .ldb = H,
                               .ldc = H,
                               .batch = 1,
                               .ab = dt,
                               .c = dt,
                               .alpha = 1.0f};
            if ((s = ft_cuda_gemm(x, &gh, Z, wd, dhc, g.algo, err)))
                return ft_err_wrap(err, "loss: dh = dz w_lm");
            if (want_dw) {
                ft_gemm_desc gw = {.trans_a = 1,
                                   .M = V,
                                   .N = H,
                                   .K = nr,
                                   .lda = ldz,
                                   .ldb = H,
                                   .ldc = H,
                                   .batch = 1,
                                   .ab = dt,
                                   .c = dt,
                                   .alpha = 1.0f,
                                   .beta = r0 > 0 ? 1.0f : 0.0f};
                if ((s = ft_cuda_gemm(x, &gw, Z, hc, dwd, g.algo, err)))
                    return ft_err_wrap(err, "loss: dw_lm += dz^T h");
            }
        }
    } else {
        int tps = (int)g.tps, stages = g.stages;
        if (M > 0) {
            void *fa[] = {&hd, &wd, &lab, &Mi, &Hi, &Vi, &tps, &stages, &pmx, &psum, &zt};
            if ((s = ft_cuda_launch(x, m, "loss_online_fwd",
                                    (ft_dim3){(unsigned)g.rt, (unsigned)g.ns, 1},
                                    (ft_dim3){(unsigned)g.threads, 1, 1}, g.smem, fa, err)))
                return s;
            int b0 = 0, nb = (int)(M / B);
            void *wa[] = {&lab,   &mk,    &pmx,    &psum, &zt, &nsi, &Mi,  &Bi,  &b0, &nb, &scheme,
                          &gamma, &alpha, &gscale, &ced,  &qd, &wod, &lse, &cef, &qf, &wf, &scf};
            if ((s = ft_cuda_launch(x, m, "loss_weights",
                                    (ft_dim3){(unsigned)cdiv(nb, LSC_WT_T), 1, 1}, wtblk, 0, wa,
                                    err)))
                return s;
        }
        if (backward && M > 0) {
            float *dacc = dhd;
            if (dt == FT_DT_BF16 &&
                (s = ft_cuda_scratch(x, 1, (size_t)(M * H) * sizeof(float), (void **)&dacc, err)))
                return s;
            void *da[] = {&hd, &wd, &lab, &lse, &scf, &Mi, &Hi, &Vi, &stages, &dacc};
            if ((s = ft_cuda_launch(x, m, "loss_online_dh", (ft_dim3){(unsigned)g.rt, 1, 1},
                                    (ft_dim3){(unsigned)g.threads, 1, 1}, g.smem, da, err)))
                return s;
            float *dwacc = dwd;
            if (want_dw) {
                if (dt == FT_DT_BF16 && (s = ft_cuda_scratch(x, 2, (size_t)(V * H) * sizeof(float),
                                                             (void **)&dwacc, err)))
                    return s;
                void *wa2[] = {&hd, &wd, &lab, &lse, &scf, &Mi, &Hi, &Vi, &stages, &dwacc};
                if ((s = ft_cuda_launch(x, m, "loss_online_dw", (ft_dim3){(unsigned)g.nt, 1, 1},
                                        (ft_dim3){(unsigned)g.threads, 1, 1}, g.smem, wa2, err)))
                    return s;
            }
        }
    }

    /* The loss, the late denominator, then the gradients' last factor. */
    void *fa[] = {&wf, &cef, &Mi, &late, &denom_f, &red, &lossd};
    if ((s = ft_cuda_launch(x, m, "loss_finish", (ft_dim3){1, 1, 1}, rowblk, 0, fa, err))) return s;
    if (!backward || M == 0) {
        if ((s = ft_dev_memset(dev, dhd, 0, (size_t)(M * H) * ft_dt_size(dt), err))) return s;
        if (want_dw && (s = ft_dev_memset(dev, dwd, 0, (size_t)(V * H) * ft_dt_size(dt), err)))
            return s;
        return FT_OK;
    }
    const int bf16acc = online && dt == FT_DT_BF16;
    if (late || bf16acc) {
        for (int k = 0; k < 1 + want_dw; k++) {
            void *out = k ? dwd : dhd;
            long long n = (long long)(k ? V * H : M * H);
            void *acc = NULL;
            if (bf16acc &&
                (s = ft_cuda_scratch(x, k ? 2 : 1, (size_t)n * sizeof(float), &acc, err)))
                return s;
            unsigned grid = (unsigned)cdiv(n, LSC_ROW_T);
            if (grid > 4096) grid = 4096;
            void *sa[] = {&out, &acc, &n, &red};
            if ((s = ft_cuda_launch(x, m, "loss_scale", (ft_dim3){grid, 1, 1}, rowblk, 0, sa, err)))
                return s;
        }
    }
    return FT_OK;
}

const ft_cuda_op ft_cuda_loss = {&lc_space, lc_modules, lc_run};
