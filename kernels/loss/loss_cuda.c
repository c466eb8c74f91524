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
 *   tile_rows, tile_cols
 *             online: the logit tile, rows x vocab columns (LS_BM, LS_BN at compile time: a
 *             thread holds tile_rows*tile_cols/64 accumulators). Larger tiles reuse each staged h
 *             and w_lm element more often (tile_rows and tile_cols FMAs per element loaded) against
 *             registers, and the dh (dw_lm) pass reads and writes its float accumulator rows once
 *             per vocab (row) tile: larger tile_cols (tile_rows) means fewer such passes.
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
 * The final norm (final_norm = 1): a separate pass on either side of the strategy, not a
 * tunable: both strategies read h from global memory (cuBLASLt's GEMMs need it as a matrix,
 * and the online kernels stage it by cp.async), so normalising inside them would only move the
 * same M*H pass into every vocab tile's K loop. loss_norm_fwd writes hn (slot 3) and the
 * rows' 1/rms; after the loss, loss_norm_dg and loss_norm_dh turn dhn into dg and dh.
 *
 * Peak device memory beyond inputs and outputs (FT_CUDA_SCRATCH_SLOTS, floats):
 *   materialize  rows: 8*M + 4 (row statistics, ce, q, w, scale); logits: min(chunk*B, M) * V;
 *                plus cuBLASLt's workspace on the GPU (gemm.c: 32 MiB from Hopper on).
 *   online       rows: (2*S + 6)*M + 4, S the vocab splits of pass 1 (S <= ceil(2*SMs / row
 *                tiles) and <= vocab tiles, so S*M <= M + 2*SMs*tile_rows); with bf16 storage the
 *                float32 accumulators of dh (M*H) and, with want_dw, of dw_lm (V*H). Never
 *                V x M.
 *   final_norm   hn: M * H in the storage type; rows: M more (1/rms per row).
 * Slots: 0 rows, 1 logits / dh accumulator, 2 dw_lm accumulator, 3 hn.
 *
 * Cost and precision notes. online's pass 2 is written for correctness first: a block reads
 * and writes its float accumulator slab (tile_rows x H for dh, tile_cols x H for dw_lm) once per
 * tile of the other dimension and takes the dh / dw_lm products on the CUDA cores, so at qwen3-8b
 * it moves on the order of a terabyte and materialize is the fast strategy there. materialize with
 * bf16 storage accumulates dw_lm over chunks in bf16 (beta = 1 GEMMs): one rounding per chunk.
 * Determinism: no atomics anywhere; every sum has a fixed order for a fixed config and device.
 *
 * ---- adding a tunable: three places ----
 *   1. a row of LC_PARAMS: index, name, the -D macro it is compiled in with (every module spec
 *      defines it, as LS_BM and LS_BN; NULL: the host alone reads it), labels, default, help and
 *      values;
 *   2. its validity rule: the check in lc_valid and its line in lc_constraints (lc_valid checks
 *      B first, the line it shows fifth, so checks and lines are not one list here);
 *   3. its use: `#if` on the macro in loss.cu, or cfg->v[index] on the host.
 */
#include <stdio.h>
#include <string.h>

#include "cuda/backend/cuda_backend.h"
#include "loss/loss.h"
#include "loss/loss_ref.h"

#define LSC_SRC        "loss/loss.cu"
#define LSC_MAX_LOGITS ((int64_t)1 << 31) /* bytes of one chunk's float logits */
#define LSC_ROW_T      256                /* threads of the per-row and finishing kernels */
#define LSC_WT_T       64                 /* threads of loss_weights (one per block of B rows) */
#define LSC_BK         32                 /* loss.cu LS_BK */
#define LSC_MAX_B      1024               /* rows per block (the host's weight buffers) */

enum { LC_MATERIALIZE, LC_ONLINE };

static const char *const lc_strategy_labels[] = {"materialize", "online"};

/* The tunables: X(index, name, -D macro or NULL, labels, default, help, values...). */
#define LC_PARAMS(X)                                                                               \
    X(LC_P_STRATEGY, "strategy", NULL, lc_strategy_labels, LC_MATERIALIZE,                         \
      "materialize: chunk logits in scratch, cuBLASLt GEMMs, dz in place; online: vocab tiles "    \
      "with a running logsumexp, logits recomputed, scratch independent of V x M",                 \
      LC_MATERIALIZE, LC_ONLINE)                                                                   \
    X(LC_P_CHUNK, "chunk", NULL, NULL, 16,                                                         \
      "materialize: blocks per chunk: the GEMMs' rows (flops per byte of w_lm), passes over w_lm " \
      "and dw_lm, logits scratch chunk*B*V*4 bytes",                                               \
      1, 2, 4, 8, 16, 32)                                                                          \
    X(LC_P_ALGO, "algo", NULL, NULL, 0,                                                            \
      "materialize: cuBLASLt algorithm of its GEMMs, by rank among the heuristic's candidates "    \
      "(0: its first choice)",                                                                     \
      0, 1, 2, 3)                                                                                  \
    X(LC_P_BM, "tile_rows", "LS_BM", NULL, 16,                                                     \
      "online: rows of a logit tile (compile time): reuse of each staged w_lm element against "    \
      "registers",                                                                                 \
      16, 32)                                                                                      \
    X(LC_P_BN, "tile_cols", "LS_BN", NULL, 64,                                                     \
      "online: vocab columns of a logit tile (compile time): reuse of each staged h element, "     \
      "passes of the dh accumulator",                                                              \
      32, 64)                                                                                      \
    X(LC_P_WARPS, "warps", NULL, NULL, 4, "online: warps per block", 2, 4)                         \
    X(LC_P_STAGES, "stages", NULL, NULL, 2,                                                        \
      "online: shared-memory stages of the K loop (2: the next slice's cp.async overlaps the "     \
      "current slice's FMAs)",                                                                     \
      1, 2)

enum { LC_PARAMS(FT_CUDA_PARAM_INDEX) LC_NPARAMS };
static ft_param lc_params[] = {LC_PARAMS(FT_CUDA_PARAM_ENTRY)};
static const char *const lc_macros[] = {LC_PARAMS(FT_CUDA_PARAM_MACRO)};

static const char *const lc_constraints[] = {
    "chunk, algo: materialize only; tile_rows, tile_cols, warps, stages: online only (the others "
    "keep their "
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

/* Do the parameters idx[0..k-1], which only strategy=`strategy` uses, keep their defaults? */
static int lc_at_defaults(const ft_config *cfg, const int *idx, size_t k, const char *strategy,
                          char *why, size_t n) {
    for (size_t i = 0; i < k; i++)
        if (cfg->v[idx[i]] != lc_params[idx[i]].def)
            return ft_config_why(FT_CONFIG_INVALID, why, n,
                                 "%s applies to strategy=%s only (leave it at %d)",
                                 lc_params[idx[i]].name, strategy, lc_params[idx[i]].def);
    return 1;
}

static int lc_valid(const ft_call *c, const ft_config *cfg, char *why, size_t n) {
    int dup = 0;
    const int strategy = cfg->v[LC_P_STRATEGY], chunk = cfg->v[LC_P_CHUNK];
    const int64_t B = c->attrs.loss.B, M = c->dim[LS_M], V = c->dim[LS_V], H = c->dim[LS_H];
    const int64_t nblk = B > 0 ? M / B : 0;
    static const int online_only[] = {LC_P_BM, LC_P_BN, LC_P_WARPS, LC_P_STAGES};
    static const int mat_only[] = {LC_P_CHUNK, LC_P_ALGO};
    if (B > LSC_MAX_B)
        return ft_config_why(FT_CONFIG_INVALID, why, n, "B=%lld: blocks of at most %d rows",
                             (long long)B, LSC_MAX_B);
    if (strategy == LC_MATERIALIZE) {
        if (!lc_at_defaults(cfg, online_only, sizeof online_only / sizeof online_only[0], "online",
                            why, n))
            return 0;
        const int kept = ft_param_kept(&lc_params[LC_P_CHUNK], chunk, nblk);
        if (kept != chunk) {
            if (why)
                snprintf(why, n, "chunk=%d: the batch has %lld blocks (chunk=%d covers it)", chunk,
                         (long long)nblk, kept);
            dup = 1; /* a duplicate, if nothing rules it out below */
        }
        if ((int64_t)chunk * B * V * (int64_t)sizeof(float) > LSC_MAX_LOGITS)
            return ft_config_why(FT_CONFIG_INVALID, why, n,
                                 "materialize: chunk*B*V float logits exceed 2 GiB");
    } else {
        if (!lc_at_defaults(cfg, mat_only, sizeof mat_only / sizeof mat_only[0], "materialize", why,
                            n))
            return 0;
        if (ft_cuda_call_dt(c) == FT_DT_BF16 && H % 2)
            return ft_config_why(FT_CONFIG_INVALID, why, n,
                                 "online with bf16 storage needs H even (H=%lld)", (long long)H);
    }
    return dup ? FT_CONFIG_DUPLICATE : FT_CONFIG_VALID;
}

static ft_space lc_space = {lc_params, LC_NPARAMS, lc_constraints, lc_valid};

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
    g->strategy = cfg->v[LC_P_STRATEGY];
    g->bm = cfg->v[LC_P_BM];
    g->bn = cfg->v[LC_P_BN];
    g->threads = 32 * cfg->v[LC_P_WARPS];
    g->stages = cfg->v[LC_P_STAGES];
    g->algo = cfg->v[LC_P_ALGO];
    g->rows = (int64_t)cfg->v[LC_P_CHUNK] * g->B;
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

/* The launchers of loss.cu's kernels. */
FT_CUDA_KERNEL(loss_rows,
               (const float *Z, long long ldz, const int *labels, int r0, int V, float *pmx,
                float *psum, float *zt),
               (&Z, &ldz, &labels, &r0, &V, &pmx, &psum, &zt))
FT_CUDA_KERNEL(loss_grad_ip,
               (float *Z, long long ldz, const int *labels, int r0, int V, const float *lse,
                const float *sc),
               (&Z, &ldz, &labels, &r0, &V, &lse, &sc))
FT_CUDA_KERNEL(loss_weights,
               (const int *labels, const uint8_t *mask, const float *pmx, const float *psum,
                const float *zt, int ns, int M, int B, int b0, int nb, int scheme, float gamma,
                float alpha, float gscale, void *ce_out, void *q_out, void *w_out, float *lse_f,
                float *ce_f, float *q_f, float *w_f, float *sc_f),
               (&labels, &mask, &pmx, &psum, &zt, &ns, &M, &B, &b0, &nb, &scheme, &gamma, &alpha,
                &gscale, &ce_out, &q_out, &w_out, &lse_f, &ce_f, &q_f, &w_f, &sc_f))
FT_CUDA_KERNEL(loss_finish,
               (const float *w_f, const float *ce_f, int M, int late, float denom, float *red,
                void *loss_out),
               (&w_f, &ce_f, &M, &late, &denom, &red, &loss_out))
FT_CUDA_KERNEL(loss_scale, (void *out, const float *acc, long long n, const float *red),
               (&out, &acc, &n, &red))
FT_CUDA_KERNEL(loss_norm_fwd,
               (const void *h, const void *g, int H, float eps, void *hn, float *rstd),
               (&h, &g, &H, &eps, &hn, &rstd))
FT_CUDA_KERNEL(loss_norm_dg,
               (const void *dhn, const void *h, const float *rstd, int M, int H, void *dg),
               (&dhn, &h, &rstd, &M, &H, &dg))
FT_CUDA_KERNEL(loss_norm_dh, (void *dh, const void *h, const void *g, const float *rstd, int H),
               (&dh, &h, &g, &rstd, &H))
FT_CUDA_KERNEL(loss_online_fwd,
               (const void *h, const void *w, const int *labels, int M, int H, int V, int tps,
                int stages, float *pmx, float *psum, float *zt),
               (&h, &w, &labels, &M, &H, &V, &tps, &stages, &pmx, &psum, &zt))
/* loss_online_dh and loss_online_dw take the same parameters (acc: dacc or dwacc). */
#define LC_GRAD_KERNEL_PARAMS                                                                      \
    (const void *h, const void *w, const int *labels, const float *lse, const float *sc, int M,    \
     int H, int V, int stages, float *acc)
#define LC_GRAD_KERNEL_ADDRS (&h, &w, &labels, &lse, &sc, &M, &H, &V, &stages, &acc)
FT_CUDA_KERNEL(loss_online_dh, LC_GRAD_KERNEL_PARAMS, LC_GRAD_KERNEL_ADDRS)
FT_CUDA_KERNEL(loss_online_dw, LC_GRAD_KERNEL_PARAMS, LC_GRAD_KERNEL_ADDRS)

static void lc_spec(const ft_call *c, ft_dt dt, const ft_config *cfg, const lc_geom *g,
                    ft_cuda_module_spec *s) {
    memset(s, 0, sizeof *s);
    s->source = LSC_SRC;
    ft_cuda_spec_define(s, "FT_BF16=%d", dt == FT_DT_BF16 ? 1 : 0);
    ft_cuda_spec_params(s, lc_macros, LC_NPARAMS, cfg);
    if (g->strategy == LC_MATERIALIZE) {
        ft_cuda_spec_kernel(s, FT_CUDA_KERNEL_NAME(loss_rows), LSC_ROW_T, 0);
        ft_cuda_spec_kernel(s, FT_CUDA_KERNEL_NAME(loss_weights), LSC_WT_T, 0);
        ft_cuda_spec_kernel(s, FT_CUDA_KERNEL_NAME(loss_grad_ip), LSC_ROW_T, 0);
    } else {
        ft_cuda_spec_kernel(s, FT_CUDA_KERNEL_NAME(loss_online_fwd), g->threads, g->smem);
        ft_cuda_spec_kernel(s, FT_CUDA_KERNEL_NAME(loss_weights), LSC_WT_T, 0);
        ft_cuda_spec_kernel(s, FT_CUDA_KERNEL_NAME(loss_online_dh), g->threads, g->smem);
        if (c->attrs.loss.want_dw)
            ft_cuda_spec_kernel(s, FT_CUDA_KERNEL_NAME(loss_online_dw), g->threads, g->smem);
    }
    ft_cuda_spec_kernel(s, FT_CUDA_KERNEL_NAME(loss_finish), LSC_ROW_T, 0);
    ft_cuda_spec_kernel(s, FT_CUDA_KERNEL_NAME(loss_scale), LSC_ROW_T, 0);
}

/* final_norm: the norm's three kernels, a second module of the same source (a module holds at
 * most FT_CUDA_MAX_KERNELS kernels, and the loss's own take up to six). */
static void lc_norm_spec(ft_dt dt, const ft_config *cfg, ft_cuda_module_spec *s) {
    memset(s, 0, sizeof *s);
    s->source = LSC_SRC;
    ft_cuda_spec_define(s, "FT_BF16=%d", dt == FT_DT_BF16 ? 1 : 0);
    ft_cuda_spec_params(s, lc_macros, LC_NPARAMS, cfg);
    ft_cuda_spec_kernel(s, FT_CUDA_KERNEL_NAME(loss_norm_fwd), LSC_ROW_T, 0);
    ft_cuda_spec_kernel(s, FT_CUDA_KERNEL_NAME(loss_norm_dg), LSC_ROW_T, 0);
    ft_cuda_spec_kernel(s, FT_CUDA_KERNEL_NAME(loss_norm_dh), LSC_ROW_T, 0);
}

/* The SM count the online split uses for static analysis (the H100/H200 count; run() uses the
 * device's own). */
#define LSC_SPEC_SMS 132

static int lc_modules(const ft_call *c, ft_dt dt, const ft_config *cfg, ft_cuda_module_spec *out,
                      int max) {
    if (max < 1) return 0;
    lc_geom g;
    lc_geom_of(c, dt, cfg, LSC_SPEC_SMS, &g);
    lc_spec(c, dt, cfg, &g, &out[0]);
    if (!c->attrs.loss.final_norm || max < 2) return 1;
    lc_norm_spec(dt, cfg, &out[1]);
    return 2;
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

/* What the phases of a call share: the module, the geometry, the scalars of the loss and the
 * row scratch. */
typedef struct lc_state {
    ft_cuda_ctx *x;
    ft_dev_module *m, *mn; /* the loss's module; the final norm's (final_norm only) */
    const ft_cuda_call *call;
    const lc_geom *g;
    int want_dw, late, backward, scheme;
    float gscale, denom, gamma, alpha;
    int64_t ns;
    const void *hid; /* the LM head's input: h, or hn with final_norm */
    float *pmx, *psum, *zt, *lse, *cef, *qf, *wf, *scf, *red, *rstd;
} lc_state;

/* The weights, ce, q and w of blocks [b0, b0 + nb) (B rows each). */
static ft_status lc_weights(const lc_state *st, int b0, int nb, ft_err *err) {
    void *const *d = st->call->d;
    return launch_loss_weights(st->x, st->m, (ft_dim3){(unsigned)cdiv(nb, LSC_WT_T), 1, 1},
                               (ft_dim3){LSC_WT_T, 1, 1}, 0, d[LS_LABELS], d[LS_MASK], st->pmx,
                               st->psum, st->zt, (int)st->ns, (int)st->g->M, (int)st->g->B, b0, nb,
                               st->scheme, st->gamma, st->alpha, st->gscale, d[LS_CE], d[LS_Q],
                               d[LS_W], st->lse, st->cef, st->qf, st->wf, st->scf, err);
}

/* strategy=materialize: chunks of rows, each with its logits GEMM, the row statistics and
 * weights, and (backward) dz in place of the logits, then dh and dw_lm by GEMM. */
static ft_status lc_materialize(const lc_state *st, ft_err *err) {
    ft_cuda_ctx *x = st->x;
    const lc_geom *g = st->g;
    const ft_dt dt = st->call->dt;
    void *const *d = st->call->d;
    const int64_t M = g->M, H = g->H, V = g->V, B = g->B;
    const int64_t R = g->rows > 0 ? g->rows : 1;
    const int64_t ldz = dt == FT_DT_BF16 ? 2 * V : V; /* dz's leading dim, elements */
    const size_t es = ft_dt_size(dt);
    const ft_dim3 rowblk = {LSC_ROW_T, 1, 1};
    float *Z;
    ft_status s;
    if ((s = ft_cuda_scratch(x, 1, (size_t)R * (size_t)V * sizeof(float), (void **)&Z, err)))
        return s;
    for (int64_t r0 = 0; r0 < M; r0 += R) {
        const int64_t nr = M - r0 < R ? M - r0 : R;
        const void *hc = (const char *)st->hid + (size_t)(r0 * H) * es;
        ft_gemm_desc gz = ft_gemm_one(0, 1, nr, V, H, H, H, dt, FT_DT_F32, 0.0f);
        if ((s = ft_cuda_gemm(x, &gz, hc, d[LS_WLM], Z, g->algo, err)))
            return ft_err_wrap(err, "loss: logits = h w_lm^T");
        if ((s = launch_loss_rows(x, st->m, (ft_dim3){(unsigned)nr, 1, 1}, rowblk, 0, Z,
                                  (long long)V, d[LS_LABELS], (int)r0, (int)V, st->pmx, st->psum,
                                  st->zt, err)) ||
            (s = lc_weights(st, (int)(r0 / B), (int)(nr / B), err)))
            return s;
        if (!st->backward) continue;
        if ((s = launch_loss_grad_ip(x, st->m, (ft_dim3){(unsigned)nr, 1, 1}, rowblk, 0, Z,
                                     (long long)V, d[LS_LABELS], (int)r0, (int)V, st->lse, st->scf,
                                     err)))
            return s;
        void *dhc = (char *)d[LS_DH] + (size_t)(r0 * H) * es;
        ft_gemm_desc gh = ft_gemm_one(0, 0, nr, H, V, ldz, H, dt, dt, 0.0f);
        if ((s = ft_cuda_gemm(x, &gh, Z, d[LS_WLM], dhc, g->algo, err)))
            return ft_err_wrap(err, "loss: dh = dz w_lm");
        if (!st->want_dw) continue;
        ft_gemm_desc gw = ft_gemm_one(1, 0, V, H, nr, ldz, H, dt, dt, r0 > 0 ? 1.0f : 0.0f);
        if ((s = ft_cuda_gemm(x, &gw, Z, hc, d[LS_DWLM], g->algo, err)))
            return ft_err_wrap(err, "loss: dw_lm += dz^T h");
    }
    return FT_OK;
}

/* The float32 accumulator of an output of n elements: the output itself with f32 storage, else
 * scratch slot `slot`. */
static ft_status lc_acc(ft_cuda_ctx *x, ft_dt dt, int slot, int64_t n, void *out, float **acc,
                        ft_err *err) {
    *acc = out;
    if (dt != FT_DT_BF16) return FT_OK;
    return ft_cuda_scratch(x, slot, (size_t)n * sizeof(float), (void **)acc, err);
}

/* strategy=online: the logits made tile by tile and never stored; backward, dh and dw_lm
 * accumulated in float32 (the outputs themselves with f32 storage). */
static ft_status lc_online(const lc_state *st, ft_err *err) {
    ft_cuda_ctx *x = st->x;
    const lc_geom *g = st->g;
    const ft_dt dt = st->call->dt;
    void *const *d = st->call->d;
    const int M = (int)g->M, H = (int)g->H, V = (int)g->V;
    const ft_dim3 tblk = {(unsigned)g->threads, 1, 1};
    ft_status s;
    if (M == 0) return FT_OK;
    if ((s = launch_loss_online_fwd(x, st->m, (ft_dim3){(unsigned)g->rt, (unsigned)g->ns, 1}, tblk,
                                    g->smem, st->hid, d[LS_WLM], d[LS_LABELS], M, H, V, (int)g->tps,
                                    g->stages, st->pmx, st->psum, st->zt, err)) ||
        (s = lc_weights(st, 0, (int)(g->M / g->B), err)))
        return s;
    if (!st->backward) return FT_OK;
    float *dacc, *dwacc;
    if ((s = lc_acc(x, dt, 1, g->M * g->H, d[LS_DH], &dacc, err))) return s;
    if ((s = launch_loss_online_dh(x, st->m, (ft_dim3){(unsigned)g->rt, 1, 1}, tblk, g->smem,
                                   st->hid, d[LS_WLM], d[LS_LABELS], st->lse, st->scf, M, H, V,
                                   g->stages, dacc, err)))
        return s;
    if (!st->want_dw) return FT_OK;
    if ((s = lc_acc(x, dt, 2, g->V * g->H, d[LS_DWLM], &dwacc, err))) return s;
    return launch_loss_online_dw(x, st->m, (ft_dim3){(unsigned)g->nt, 1, 1}, tblk, g->smem, st->hid,
                                 d[LS_WLM], d[LS_LABELS], st->lse, st->scf, M, H, V, g->stages,
                                 dwacc, err);
}

/* The loss, the late denominator, then the gradients' last factor. */
static ft_status lc_finish(const lc_state *st, ft_err *err) {
    ft_cuda_ctx *x = st->x;
    const lc_geom *g = st->g;
    const ft_dt dt = st->call->dt;
    void *const *d = st->call->d;
    const int64_t M = g->M, H = g->H, V = g->V;
    const ft_dim3 rowblk = {LSC_ROW_T, 1, 1};
    ft_dev *dev = ft_cuda_dev(x);
    ft_status s;
    if ((s = launch_loss_finish(x, st->m, (ft_dim3){1, 1, 1}, rowblk, 0, st->wf, st->cef, (int)M,
                                st->late, st->denom, st->red, d[LS_LOSS], err)))
        return s;
    if (!st->backward || M == 0) {
        if ((s = ft_dev_memset(dev, d[LS_DH], 0, (size_t)(M * H) * ft_dt_size(dt), err))) return s;
        if (st->want_dw &&
            (s = ft_dev_memset(dev, d[LS_DWLM], 0, (size_t)(V * H) * ft_dt_size(dt), err)))
            return s;
        return FT_OK;
    }
    const int bf16acc = g->strategy == LC_ONLINE && dt == FT_DT_BF16;
    if (!st->late && !bf16acc) return FT_OK;
    for (int k = 0; k < 1 + st->want_dw; k++) {
        long long n = (long long)(k ? V * H : M * H);
        void *acc = NULL;
        if (bf16acc && (s = ft_cuda_scratch(x, k ? 2 : 1, (size_t)n * sizeof(float), &acc, err)))
            return s;
        unsigned grid = (unsigned)cdiv(n, LSC_ROW_T);
        if (grid > 4096) grid = 4096;
        if ((s = launch_loss_scale(x, st->m, (ft_dim3){grid, 1, 1}, rowblk, 0,
                                   k ? d[LS_DWLM] : d[LS_DH], acc, n, st->red, err)))
            return s;
    }
    return FT_OK;
}

/* final_norm: hn = rmsnorm(h) * g_norm into slot 3; the strategy then reads it as its h. */
static ft_status lc_norm_fwd(lc_state *st, const ft_attrs *a, ft_err *err) {
    const lc_geom *g = st->g;
    void *const *d = st->call->d;
    void *hn;
    ft_status s;
    if (g->M == 0) return FT_OK;
    if ((s = ft_cuda_scratch(st->x, 3, (size_t)(g->M * g->H) * ft_dt_size(st->call->dt), &hn, err)))
        return s;
    if ((s = launch_loss_norm_fwd(st->x, st->mn, (ft_dim3){(unsigned)g->M, 1, 1},
                                  (ft_dim3){LSC_ROW_T, 1, 1}, 0, d[LS_HID], d[LS_GNORM], (int)g->H,
                                  (float)a->eps, hn, st->rstd, err)))
        return s;
    st->hid = hn;
    return FT_OK;
}

/* final_norm, once dh holds the gradient of hn (scaled and narrowed): dg, then dh in place. */
static ft_status lc_norm_bwd(const lc_state *st, ft_err *err) {
    const lc_geom *g = st->g;
    void *const *d = st->call->d;
    ft_status s;
    if (g->M == 0)
        return ft_dev_memset(ft_cuda_dev(st->x), d[LS_DG], 0,
                             (size_t)g->H * ft_dt_size(st->call->dt), err);
    if ((s = launch_loss_norm_dg(st->x, st->mn, (ft_dim3){(unsigned)cdiv(g->H, LSC_ROW_T), 1, 1},
                                 (ft_dim3){LSC_ROW_T, 1, 1}, 0, d[LS_DH], d[LS_HID], st->rstd,
                                 (int)g->M, (int)g->H, d[LS_DG], err)))
        return s;
    return launch_loss_norm_dh(st->x, st->mn, (ft_dim3){(unsigned)g->M, 1, 1},
                               (ft_dim3){LSC_ROW_T, 1, 1}, 0, d[LS_DH], d[LS_HID], d[LS_GNORM],
                               st->rstd, (int)g->H, err);
}

static ft_status lc_run(ft_cuda_ctx *x, const ft_cuda_call *call, const ft_config *cfg,
                        ft_err *err) {
    const ft_call *c = call->c;
    const ft_loss_attrs *a = &c->attrs.loss;
    lc_geom g;
    lc_geom_of(c, call->dt, cfg, ft_dev_props_of(ft_cuda_dev(x))->sm_count, &g);
    ft_cuda_module_spec spec;
    lc_spec(c, call->dt, cfg, &g, &spec);
    ft_dev_module *m, *mn = NULL;
    ft_status s = ft_cuda_module(x, &spec, &m, err);
    if (s) return s;
    if (a->final_norm) {
        lc_norm_spec(call->dt, cfg, &spec);
        if ((s = ft_cuda_module(x, &spec, &mn, err))) return s;
    }

    lc_state st = {.x = x,
                   .m = m,
                   .mn = mn,
                   .call = call,
                   .g = &g,
                   .want_dw = a->want_dw != 0,
                   .scheme = (int)a->scheme,
                   .gamma = (float)ft_loss_gamma(a),
                   .alpha = (float)a->alpha,
                   .ns = g.strategy == LC_ONLINE ? g.ns : 1};
    const double denom = lc_denominator(c, &st.late);
    st.backward = st.late || denom != 0;
    st.gscale = st.late || denom == 0 ? 1.0f : (float)(1.0 / denom);
    st.denom = (float)denom;

    /* Row scratch: pmx, psum [ns][M], zt, lse, ce, q, w, sc [M], red [4], rstd [M]. */
    const int64_t M = g.M;
    float *rows;
    size_t nrows = (size_t)(2 * st.ns + 7) * (size_t)M + 4;
    if ((s = ft_cuda_scratch(x, 0, nrows * sizeof(float), (void **)&rows, err))) return s;
    st.pmx = rows;
    st.psum = st.pmx + st.ns * M;
    st.zt = st.psum + st.ns * M;
    st.lse = st.zt + M;
    st.cef = st.lse + M;
    st.qf = st.cef + M;
    st.wf = st.qf + M;
    st.scf = st.wf + M;
    st.red = st.scf + M;
    st.rstd = st.red + 4;
    st.hid = call->d[LS_HID];

    if (a->final_norm && (s = lc_norm_fwd(&st, &c->attrs, err))) return s;
    if ((s = g.strategy == LC_ONLINE ? lc_online(&st, err) : lc_materialize(&st, err))) return s;
    if ((s = lc_finish(&st, err))) return s;
    return a->final_norm ? lc_norm_bwd(&st, err) : FT_OK;
}

const ft_cuda_op ft_cuda_loss = {&lc_space, lc_modules, lc_run};
