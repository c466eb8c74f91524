/* fusion_cuda.c: the two context-fusion ops on the CUDA backend (SPEC.md fusion.dflare,
 * fusion.dflash): their tunable spaces, the kernel modules a configuration compiles, and the
 * launch sequences. The kernels, and the napkin math that shaped them, are in fusion.cu.
 *
 * ---- fusion.dflare: exposed parameters, and why ----
 *   strategy  per_layer: one pass over x per draft layer (grid.y = D); k_layers: k layers per pass;
 *             all_layers: one pass makes every layer. How many times x (the big tensor: 604 MB at
 *             qwen3-8b bf16, far more than L2) crosses the memory bus; more passes hold fewer
 *             softmax rows and, backward, re-read and re-write dx once per pass.
 *   k         layers per pass for k_layers (k < D).
 *   vec_bytes
 *             bytes per vector access (2, 4, 8, 16; a whole number of elements): 16 is one 128-bit
 *             load per row segment, the widest a thread can issue. Narrower accesses let rows
 *             whose length is not a multiple of 8 bf16 / 4 floats run at all (H must be a
 *             multiple of the elements per access, or rows would be misaligned).
 *   vecs_per_thread
 *             vectors per thread per target row: each thread takes vecs_per_thread vectors of each
 *             of the T rows (x is read exactly once), so threads per row = H / (elements x
 *             vecs_per_thread) rounded up to a warp (stage=mma: warps of 8-column tiles). The trade
 *             between threads per row (parallelism, and the cost of the row's sum-of-squares
 *             reduction across warps) and registers per thread (stage=reg and the backward hold T *
 *             vecs_per_thread * elements floats of x: occupancy).
 *   rows_per_block
 *             rows per block (threadIdx.y): more rows per block for small H, where one row is a
 *             warp or two and a block per row would leave the SM's block slots as the limit.
 *   stage     where a thread's slice of the row lives while its layers are made. reg: forward,
 *             the x tile in registers (T * vecs_per_thread * elements floats: one block of a wide
 *             row, T = 9 and H = 4096, fills an SM's registers and then cannot overlap its loads
 *             with its math); smem: forward, x copied once into shared memory by cp.async and
 *             re-read from there per group of layers, in at most 64 registers, so two blocks of 512
 *             threads share an SM and one's loads overlap the other's math. Backward: the dx
 *             accumulators (another T * vecs_per_thread * elements floats) in registers or in
 *             shared memory (at most 512 threads per block then: the x tile keeps up to 128
 *             registers). mma (bf16 forward, T <= 16): the staged row mixed on the tensor cores,
 *             the softmax rows as the A operand (split into bf16 hi + lo) and x as B through
 *             ldmatrix.trans; one barrier per pass and a fraction of the CUDA-core instructions,
 *             which at T = 9, D = 7 (63 FMAs per output element) decide the staged kernel's speed.
 *   group     staged forward: layers per round, their mixes held together and their sums of
 *             squares reduced with one barrier (a row spans many warps: a barrier per layer
 *             left the SM idle); more layers per round, more registers.
 *   blocks_per_sm
 *             backward: blocks per SM of its persistent grid: more blocks hide more latency,
 *             but each writes dg partial rows (one per row group) that must be reduced.
 *   reduce    backward: the sums over N of dg and da. partials: per-block partials in scratch
 *             summed in a fixed order by a small kernel (deterministic); atomic: float atomics
 *             into one accumulator (less scratch, no reduce pass over partials, order-dependent
 *             rounding).
 * The storage type (the call's `dtype` attribute) and T are compile-time too (the register tile
 * is T x vecs_per_thread x vector floats); one module per (dtype, T, elements, vecs_per_thread).
 *
 * ---- fusion.dflash: exposed parameters, and why ----
 *   algo      the cuBLASLt algorithm (rank among its heuristic's candidates) of every GEMM of the
 *             call: c = x w_fc^T forward, dx = dc w_fc and dw_fc = dc^T x backward. The GEMMs
 *             are the cost (2 N H T H FLOPs each) and the heuristic's first choice is not always
 *             the fastest for these skinny (decode) or long-K shapes.
 *   c         where c lives: scratch (float32, then the norm kernel writes f) or inplace (the
 *             GEMM writes c into f in the storage type and the norm rescales it there: no N x H
 *             float32 round trip and no scratch; with bf16, c is rounded once more before the
 *             norm). cuBLASLt has no row-norm epilogue, so this is as far as the norm fuses.
 *   vec_bytes, vecs_per_thread, rows_per_block
 *             the norm kernels' shape: bytes per access, vectors per thread per pass over
 *             the row (threads per row = H / (elements x vecs_per_thread), rounded up to a warp, at
 *             most 1024; these kernels loop, so nothing is held in registers), rows per block.
 * One module per storage type: the norm kernels take the vector width at run time.
 * Scratch: dflare backward: dg partials (G x rows_per_block x H floats, or H) and da partials (G x
 * D x T, or D x T). dflash: c (N x H floats, c = scratch), dc (N x H, backward) and dg partials.
 *
 * ---- adding a tunable: three places ----
 *   1. a row of the op's parameter table (DL_PARAMS / DH_PARAMS): its index, name, the -D macro
 *      it is compiled in with (every module spec defines it; NULL when only the host reads it),
 *      labels, default, help and values;
 *   2. its validity rule: a check function and its row in DL_RULES / DH_RULES with the line
 *      `flaretune space` shows, side by side (a parameter some calls do not use keeps its
 *      default there);
 *   3. its use: `#if` on the macro in fusion.cu (or cfg->v[index] in the host code).
 */
#include <stdio.h>
#include <string.h>

#include "cuda/backend/cuda_backend.h"
#include "fusion/fusion.h"

#define FUS_SRC        "fusion/fusion.cu"
#define FUS_TILE_MAX   256          /* floats of x a thread may hold (T * cpt * elements) */
#define FUS_RED_THREAD 256          /* threads per block of the reduce kernels */

static int64_t cdiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

/* Threads per row for nch vectors at cpt vectors per thread: a whole number of warps. */
static int64_t fus_tpr(int64_t nch, int cpt) {
    int64_t t = cdiv(nch, cpt);
    return t < 32 ? 32 : cdiv(t, 32) * 32;
}

/* The vector access rules shared by both ops: vec bytes must be a whole number of elements
 * and H a multiple of them. Returns the elements per access, or 0 with why. */
static int fus_elems(const ft_call *c, int64_t H, int vec, char *why, size_t n) {
    int esize = (int)ft_dt_size(ft_cuda_call_dt(c));
    if (vec % esize)
        return ft_config_why(FT_CONFIG_INVALID, why, n,
                             "vec_bytes=%d B is not a whole number of %d-byte %s elements", vec,
                             esize, esize == 2 ? "bf16" : "f32");
    int el = vec / esize;
    if (H % el)
        return ft_config_why(
            FT_CONFIG_INVALID, why, n,
            "H=%lld is not a multiple of %d elements (vec_bytes=%d B): rows would not "
            "be %d-byte aligned",
            (long long)H, el, vec, vec);
    return el;
}

/* The block rule shared by both ops: tpr threads per row times rpc rows at most 1024. */
static int fus_check_block(int tpr, int rpc, char *why, size_t n) {
    if (tpr * rpc > 1024)
        return ft_config_why(
            FT_CONFIG_INVALID, why, n,
            "%d threads per row x rows_per_block=%d rows is more than 1024 threads", tpr, rpc);
    return FT_CONFIG_VALID;
}

static void spec_init(ft_cuda_module_spec *s, int part, ft_dt dt) {
    memset(s, 0, sizeof *s);
    s->source = FUS_SRC;
    ft_cuda_spec_define(s, "FT_FUSION=%d", part);
    ft_cuda_spec_define(s, "FT_BF16=%d", dt == FT_DT_BF16 ? 1 : 0);
}

/* The module and the run of an op of prefix P (P_geom, P_geom_of, P_spec, P_launch), whose
 * vector accesses run along dim H_DIM with P_VEC bytes, named OPNAME in errors:
 *   P_prepare  the geometry and module spec of a config, or 0 with why (NULL: not said) when
 *              its vector access does not fit the call;
 *   P_modules  the op's one module (ft_cuda_op's modules hook);
 *   P_run      the config's module compiled or found in the caches, then P_launch with the
 *              geometry (ft_cuda_op's run hook). */
#define FUS_MODULE(P, H_DIM, P_VEC, OPNAME)                                                        \
    static int P##_prepare(const ft_call *c, ft_dt dt, const ft_config *cfg, P##_geom *g,          \
                           ft_cuda_module_spec *s, char *why, size_t n) {                          \
        int el = fus_elems(c, c->dim[H_DIM], cfg->v[P_VEC], why, n);                               \
        if (!el) return 0;                                                                         \
        P##_geom_of(c, cfg, el, g);                                                                \
        P##_spec(c, dt, cfg, g, s);                                                                \
        return 1;                                                                                  \
    }                                                                                              \
                                                                                                   \
    static int P##_modules(const ft_call *c, ft_dt dt, const ft_config *cfg,                       \
                           ft_cuda_module_spec *out, int max) {                                    \
        P##_geom g;                                                                                \
        return max >= 1 && P##_prepare(c, dt, cfg, &g, &out[0], NULL, 0);                          \
    }                                                                                              \
                                                                                                   \
    static ft_status P##_run(ft_cuda_ctx *x, const ft_cuda_call *call, const ft_config *cfg,       \
                             ft_err *err) {                                                        \
        char why[160];                                                                             \
        P##_geom g;                                                                                \
        ft_cuda_module_spec spec;                                                                  \
        if (!P##_prepare(call->c, call->dt, cfg, &g, &spec, why, sizeof why))                      \
            return ft_err_set(err, FT_EINVAL, "%s on cuda: %s", OPNAME, why);                      \
        ft_dev_module *m;                                                                          \
        ft_status s = ft_cuda_module(x, &spec, &m, err);                                           \
        if (s) return s;                                                                           \
        return P##_launch(x, m, call, &g, err);                                                    \
    }

/* ==== fusion.dflare ========================================================================= */

/* The launchers of fusion.cu's dflare kernels (FUS_DL_* below: values of this op's parameters;
 * DL_* in fusion.h: its sizes and tensors). */
/* The register and shared-memory variants of a pass take the same arguments. */
#define FUS_DL_FWD_KERNEL_PARAMS                                                                   \
    (const void *xs, const void *w, const void *g, void *f, int N, int H, int D, int per_pass,     \
     int group, float eps)
#define FUS_DL_FWD_KERNEL_ADDRS (&xs, &w, &g, &f, &N, &H, &D, &per_pass, &group, &eps)
#define FUS_DL_BWD_KERNEL_PARAMS                                                                   \
    (const void *xs, const void *w, const void *g, const void *df, void *f, void *dx, float *dgp,  \
     float *dap, int N, int H, int D, int l0, int nl, int accum, int atomic, float eps)
#define FUS_DL_BWD_KERNEL_ADDRS                                                                    \
    (&xs, &w, &g, &df, &f, &dx, &dgp, &dap, &N, &H, &D, &l0, &nl, &accum, &atomic, &eps)
FT_CUDA_KERNEL(dflare_fwd, FUS_DL_FWD_KERNEL_PARAMS, FUS_DL_FWD_KERNEL_ADDRS)
FT_CUDA_KERNEL(dflare_fwd_smem, FUS_DL_FWD_KERNEL_PARAMS, FUS_DL_FWD_KERNEL_ADDRS)
FT_CUDA_KERNEL(dflare_fwd_mma,
               (const void *xs, const void *w, const void *g, void *f, int N, int H, int D,
                int per_pass, float eps),
               (&xs, &w, &g, &f, &N, &H, &D, &per_pass, &eps))
FT_CUDA_KERNEL(dflare_bwd, FUS_DL_BWD_KERNEL_PARAMS, FUS_DL_BWD_KERNEL_ADDRS)
FT_CUDA_KERNEL(dflare_bwd_smem, FUS_DL_BWD_KERNEL_PARAMS, FUS_DL_BWD_KERNEL_ADDRS)
FT_CUDA_KERNEL(dflare_bwd_reduce,
               (const float *dgp, int P, const float *dap, int Q, const void *w, void *dg, void *dw,
                int H, int D),
               (&dgp, &P, &dap, &Q, &w, &dg, &dw, &H, &D))

enum { FUS_DL_PER_LAYER, FUS_DL_K_LAYERS, FUS_DL_ALL_LAYERS };
enum { FUS_DL_STAGE_REG, FUS_DL_STAGE_SMEM, FUS_DL_STAGE_MMA };
enum { FUS_DL_REDUCE_PARTIALS, FUS_DL_REDUCE_ATOMIC };

static const char *const dl_strategy_labels[] = {"per_layer", "k_layers", "all_layers"};
static const char *const dl_stage_labels[] = {"reg", "smem", "mma"};
static const char *const dl_reduce_labels[] = {"partials", "atomic"};

/* Defaults of the parameters some calls do not use (they must keep them there). */
enum { FUS_DL_DEF_GROUP = 4, FUS_DL_DEF_CTAS = 2, FUS_DL_DEF_REDUCE = FUS_DL_REDUCE_PARTIALS };
static const int dl_groups[] = {1, 2, 4}; /* the candidates of group, ascending */

/* The tunables: X(index, name, -D macro or NULL, labels, default, help, values...). */
#define DL_PARAMS(X)                                                                               \
    X(FUS_DL_P_STRATEGY, "strategy", NULL, dl_strategy_labels, FUS_DL_ALL_LAYERS,                  \
      "passes over x: per_layer (D), k_layers (ceil(D/k)), all_layers (1); x is the big tensor "   \
      "and never fits L2",                                                                         \
      FUS_DL_PER_LAYER, FUS_DL_K_LAYERS, FUS_DL_ALL_LAYERS)                                        \
    X(FUS_DL_P_K, "k", NULL, NULL, 2, "draft layers per pass with strategy=k_layers", 2, 3, 4)     \
    X(FUS_DL_P_VEC, "vec_bytes", NULL, NULL, 16,                                                   \
      "bytes per vector load/store (16: one 128-bit access); H must be a multiple of its "         \
      "elements",                                                                                  \
      2, 4, 8, 16)                                                                                 \
    X(FUS_DL_P_CPT, "vecs_per_thread", "FT_CPT", NULL, 1,                                          \
      "vectors per thread per target row (x tile in registers with stage=reg and backward): "      \
      "threads per row = H/(elements*vecs_per_thread), rounded up to a warp",                      \
      1, 2, 4)                                                                                     \
    X(FUS_DL_P_RPC, "rows_per_block", NULL, NULL, 1,                                               \
      "rows per block (small H: a row is a warp or two)", 1, 2, 4)                                 \
    X(FUS_DL_P_STAGE, "stage", NULL, dl_stage_labels, FUS_DL_STAGE_SMEM,                           \
      "reg: x (backward: dx) held in registers; smem: x staged in shared memory by cp.async "      \
      "(backward: dx accumulated there); mma: staged x mixed on the tensor cores (bf16 forward)",  \
      FUS_DL_STAGE_REG, FUS_DL_STAGE_SMEM, FUS_DL_STAGE_MMA)                                       \
    X(FUS_DL_P_GROUP, "group", NULL, NULL, FUS_DL_DEF_GROUP,                                       \
      "staged forward: layers per reduction round (one barrier per round; more layers, more "      \
      "registers)",                                                                                \
      1, 2, 4)                                                                                     \
    X(FUS_DL_P_CTAS, "blocks_per_sm", NULL, NULL, FUS_DL_DEF_CTAS,                                 \
      "backward: blocks per SM of its persistent grid: latency hiding against dg partials to "     \
      "reduce",                                                                                    \
      1, 2, 4)                                                                                     \
    X(FUS_DL_P_REDUCE, "reduce", NULL, dl_reduce_labels, FUS_DL_DEF_REDUCE,                        \
      "backward sums over N of dg and da: per-block partials reduced in order (deterministic) or " \
      "float atomics",                                                                             \
      FUS_DL_REDUCE_PARTIALS, FUS_DL_REDUCE_ATOMIC)

enum { DL_PARAMS(FT_CUDA_PARAM_INDEX) FUS_DL_NPARAMS };
static ft_param dl_params[] = {DL_PARAMS(FT_CUDA_PARAM_ENTRY)};
static const char *const dl_macros[] = {DL_PARAMS(FT_CUDA_PARAM_MACRO)};

#define DL_BWD_SMEM_MAXT 512 /* __launch_bounds__ of dflare_bwd_smem */

/* Everything a config and a call fix about the launches. */
typedef struct dl_geom {
    int64_t N, T, H, D;
    int el, cpt, tpr, rpc, per_pass, npass, stage, group, ctas, atomic;
    int dx; /* the backward forms dx (the attribute want_dx) */
    int64_t nch, nrb;
} dl_geom;

static void dl_geom_of(const ft_call *c, const ft_config *cfg, int el, dl_geom *g) {
    g->N = c->dim[DL_N];
    g->T = c->dim[DL_T];
    g->H = c->dim[DL_H];
    g->D = c->dim[DL_D];
    g->el = el;
    g->cpt = cfg->v[FUS_DL_P_CPT];
    g->nch = el ? g->H / el : 0;
    g->tpr = (int)fus_tpr(g->nch, g->cpt);
    g->rpc = cfg->v[FUS_DL_P_RPC];
    int s = cfg->v[FUS_DL_P_STRATEGY];
    g->per_pass = s == FUS_DL_PER_LAYER ? 1 : s == FUS_DL_K_LAYERS ? cfg->v[FUS_DL_P_K] : (int)g->D;
    g->npass = (int)cdiv(g->D, g->per_pass);
    g->stage = cfg->v[FUS_DL_P_STAGE];
    g->group = cfg->v[FUS_DL_P_GROUP];
    g->ctas = cfg->v[FUS_DL_P_CTAS];
    g->atomic = cfg->v[FUS_DL_P_REDUCE] == FUS_DL_REDUCE_ATOMIC;
    g->dx = c->attrs.want_dx != 0;
    g->nrb = cdiv(g->N, g->rpc);
}

/* Dynamic shared memory of the forward: the pass's softmax rows, rounded up to 16 bytes, then
 * with stage = smem the x of one row group. */
static size_t dl_fwd_smem(const dl_geom *g, ft_dt dt) {
    size_t a = (size_t)((g->per_pass * g->T + 3) & ~(int64_t)3) * sizeof(float);
    return a + (g->stage ? (size_t)(g->rpc * g->T * g->H) * ft_dt_size(dt) : 0);
}

/* Of the backward pass with the most layers: softmax rows, a da slot per warp, then with
 * stage = smem (and dx formed) the float dx accumulators of one row group (T * cpt * elements
 * per thread). */
static size_t dl_bwd_smem(const dl_geom *g) {
    int64_t warps = (int64_t)g->tpr * g->rpc / 32;
    return (size_t)(g->per_pass * g->T * (1 + warps)) * sizeof(float) +
           (g->stage == FUS_DL_STAGE_SMEM && g->dx
                ? (size_t)(g->rpc * g->T * g->tpr * g->cpt * g->el) * sizeof(float)
                : 0);
}

/* ---- validity: one check per rule, then the rules in order with their lines ---- */

/* What the checks read: the call, the config, and the geometry they make. */
typedef struct dl_check {
    const ft_call *c;
    const ft_config *cfg;
    int bwd;
    dl_geom g;
} dl_check;

static int dl_check_k(const void *ctx, char *why, size_t n) {
    const dl_check *v = ctx;
    const int strategy = v->cfg->v[FUS_DL_P_STRATEGY], k = v->cfg->v[FUS_DL_P_K];
    if (strategy != FUS_DL_K_LAYERS && k != 2)
        return ft_config_why(FT_CONFIG_INVALID, why, n,
                             "k only applies to strategy=k_layers (leave it at 2)");
    if (strategy == FUS_DL_K_LAYERS && k >= v->g.D)
        return ft_config_why(FT_CONFIG_DUPLICATE, why, n,
                             "k_layers needs k < D=%lld (k >= D is all_layers)", (long long)v->g.D);
    return FT_CONFIG_VALID;
}

static int dl_check_per_layer(const void *ctx, char *why, size_t n) {
    const dl_check *v = ctx;
    if (v->cfg->v[FUS_DL_P_STRATEGY] == FUS_DL_PER_LAYER && v->g.D == 1)
        return ft_config_why(FT_CONFIG_DUPLICATE, why, n, "with D=1, per_layer is all_layers");
    return FT_CONFIG_VALID;
}

static int dl_check_vec(const void *ctx, char *why, size_t n) {
    const dl_check *v = ctx;
    return fus_elems(v->c, v->g.H, v->cfg->v[FUS_DL_P_VEC], why, n) ? FT_CONFIG_VALID
                                                                    : FT_CONFIG_INVALID;
}

static int dl_check_threads(const void *ctx, char *why, size_t n) {
    const dl_geom *g = &((const dl_check *)ctx)->g;
    if (g->tpr > 1024)
        return ft_config_why(
            FT_CONFIG_INVALID, why, n,
            "a row of %lld vectors needs %d threads at vecs_per_thread=%d (at most 1024)",
            (long long)g->nch, g->tpr, g->cpt);
    if (g->cpt > 1 && fus_tpr(g->nch, g->cpt / 2) == g->tpr)
        return ft_config_why(
            FT_CONFIG_DUPLICATE, why, n,
            "vecs_per_thread=%d gives the same %d threads per row as vecs_per_thread=%d", g->cpt,
            g->tpr, g->cpt / 2);
    return FT_CONFIG_VALID;
}

static int dl_check_tile(const void *ctx, char *why, size_t n) {
    const dl_check *v = ctx;
    const int64_t T = v->g.T;
    if (T > 64)
        return ft_config_why(FT_CONFIG_INVALID, why, n,
                             "T=%lld: the kernels take at most 64 target layers", (long long)T);
    if ((v->bwd || v->g.stage == FUS_DL_STAGE_REG) && T * v->g.cpt * v->g.el > FUS_TILE_MAX)
        return ft_config_why(
            FT_CONFIG_INVALID, why, n,
            "a register tile of T*vecs_per_thread*elements = %lld floats per thread "
            "(at most %d)",
            (long long)(T * v->g.cpt * v->g.el), FUS_TILE_MAX);
    return FT_CONFIG_VALID;
}

static int dl_check_block(const void *ctx, char *why, size_t n) {
    const dl_geom *g = &((const dl_check *)ctx)->g;
    return fus_check_block(g->tpr, g->rpc, why, n);
}

/* Parameters a call does not use keep their default (so no two configs run the same). */
static int dl_check_group(const void *ctx, char *why, size_t n) {
    const dl_check *v = ctx;
    const dl_geom *g = &v->g;
    if ((v->bwd || g->stage != FUS_DL_STAGE_SMEM) && g->group != FUS_DL_DEF_GROUP)
        return ft_config_why(FT_CONFIG_INVALID, why, n,
                             "group applies to the forward with stage=smem (leave it at %d)",
                             FUS_DL_DEF_GROUP);
    if (v->bwd || g->stage != FUS_DL_STAGE_SMEM) return FT_CONFIG_VALID;
    /* Groups of at least the pass's layers are one round: keep one of them (the default when it
     * is one, else the smallest). */
    int eff = g->group < g->per_pass ? g->group : g->per_pass, keep = 0;
    if ((FUS_DL_DEF_GROUP < g->per_pass ? FUS_DL_DEF_GROUP : g->per_pass) == eff)
        keep = FUS_DL_DEF_GROUP;
    for (size_t q = 0; !keep && q < sizeof dl_groups / sizeof dl_groups[0]; q++)
        if ((dl_groups[q] < g->per_pass ? dl_groups[q] : g->per_pass) == eff) keep = dl_groups[q];
    if (g->group != keep)
        return ft_config_why(FT_CONFIG_INVALID, why, n,
                             "group=%d makes the same rounds as group=%d with %d layers per pass",
                             g->group, keep, g->per_pass);
    return FT_CONFIG_VALID;
}

static int dl_check_backward(const void *ctx, char *why, size_t n) {
    const dl_check *v = ctx;
    if (!v->bwd && v->g.ctas != FUS_DL_DEF_CTAS)
        return ft_config_why(FT_CONFIG_INVALID, why, n,
                             "blocks_per_sm applies to the backward only (leave it at %d)",
                             FUS_DL_DEF_CTAS);
    if (!v->bwd && v->cfg->v[FUS_DL_P_REDUCE] != FUS_DL_DEF_REDUCE)
        return ft_config_why(FT_CONFIG_INVALID, why, n,
                             "reduce applies to the backward only (leave it at %s)",
                             dl_reduce_labels[FUS_DL_DEF_REDUCE]);
    if (v->bwd && v->g.stage == FUS_DL_STAGE_SMEM && v->g.tpr * v->g.rpc > DL_BWD_SMEM_MAXT)
        return ft_config_why(FT_CONFIG_INVALID, why, n,
                             "the backward with stage=smem runs at most %d threads per block "
                             "(%d here)",
                             DL_BWD_SMEM_MAXT, v->g.tpr * v->g.rpc);
    return FT_CONFIG_VALID;
}

static int dl_check_mma(const void *ctx, char *why, size_t n) {
    const dl_check *v = ctx;
    if (v->g.stage != FUS_DL_STAGE_MMA) return FT_CONFIG_VALID;
    const char *no = v->bwd                                ? "the backward has no mma stage"
                     : ft_cuda_call_dt(v->c) != FT_DT_BF16 ? "needs bf16 storage"
                     : v->g.el != 8                        ? "needs vec_bytes=16"
                     : v->g.T > 16 || v->g.per_pass > 16
                         ? "needs T <= 16 and at most 16 layers per pass"
                     : v->g.rpc != 1 ? "runs one row per block (rows_per_block=1)"
                                     : NULL;
    if (no) return ft_config_why(FT_CONFIG_INVALID, why, n, "stage=mma %s", no);
    return FT_CONFIG_VALID;
}

static int dl_check_smem(const void *ctx, char *why, size_t n) {
    const dl_check *v = ctx;
    size_t smem = v->bwd ? dl_bwd_smem(&v->g) : dl_fwd_smem(&v->g, ft_cuda_call_dt(v->c));
    if (smem > FT_CUDA_MAX_SMEM)
        return ft_config_why(FT_CONFIG_INVALID, why, n,
                             "needs %zu bytes of shared memory per block (at most %d)", smem,
                             FT_CUDA_MAX_SMEM);
    return FT_CONFIG_VALID;
}

/* The rules, in the order they are checked: X(check, the line `flaretune space` shows). */
#define DL_RULES(X)                                                                                \
    X(dl_check_k,                                                                                  \
      "k applies only to strategy=k_layers (other strategies keep k=2); k_layers needs k < D")     \
    X(dl_check_per_layer, "per_layer needs D > 1 (with one layer it is all_layers)")               \
    X(dl_check_vec,                                                                                \
      "vec_bytes is a whole number of elements (bf16 2 B, f32 4 B) and H a multiple of "           \
      "them")                                                                                      \
    X(dl_check_threads,                                                                            \
      "threads per row = H/(elements*vecs_per_thread) rounded up to a warp, at most 1024; "        \
      "vecs_per_thread > 1 must give fewer threads per row than vecs_per_thread/2")                \
    X(dl_check_tile, "T <= 64; where x is held in registers (stage=reg, and the backward) T * "    \
                     "vecs_per_thread * elements <= 256 floats per thread")                        \
    X(dl_check_block, "threads per row * rows_per_block <= 1024")                                  \
    X(dl_check_group, "group: forward with stage=smem only (else the default); groups of at "      \
                      "least the layers of a pass are the same (the default or the smallest is "   \
                      "kept)")                                                                     \
    X(dl_check_backward, "blocks_per_sm, reduce: backward only (else the default); backward with " \
                         "stage=smem: at most 512 threads per block")                              \
    X(dl_check_mma, "stage=mma: forward, bf16, vec_bytes=16, T <= 16, at most 16 layers per "      \
                    "pass, rows_per_block=1")                                                      \
    X(dl_check_smem,                                                                               \
      "shared memory per block <= 227 KiB (stage=smem: rows_per_block*T*H elements of x "          \
      "forward, floats of dx backward)")

FT_CUDA_RULES(dl, DL_RULES);

static int dl_valid(const ft_call *c, const ft_config *cfg, char *why, size_t n) {
    dl_check v = {.c = c, .cfg = cfg, .bwd = c->backward};
    dl_geom_of(c, cfg, fus_elems(c, c->dim[DL_H], cfg->v[FUS_DL_P_VEC], NULL, 0), &v.g);
    return FT_CUDA_RULES_CHECK(dl, &v, why, n);
}

/* ---- modules and launches ---- */

static void dl_spec(const ft_call *c, ft_dt dt, const ft_config *cfg, const dl_geom *g,
                    ft_cuda_module_spec *s) {
    spec_init(s, 1, dt);
    /* Derived from the call and the config: T, and the elements per vector access. */
    ft_cuda_spec_define(s, "FT_T=%lld", (long long)g->T);
    ft_cuda_spec_define(s, "FT_VEC_ELEMS=%d", g->el);
    ft_cuda_spec_params(s, dl_macros, FUS_DL_NPARAMS, cfg);
    if (c->backward) ft_cuda_spec_define(s, "FT_DX=%d", g->dx);
    int threads = g->tpr * g->rpc;
    if (!c->backward) {
        const char *fwd = g->stage == FUS_DL_STAGE_MMA    ? FT_CUDA_KERNEL_NAME(dflare_fwd_mma)
                          : g->stage == FUS_DL_STAGE_SMEM ? FT_CUDA_KERNEL_NAME(dflare_fwd_smem)
                                                          : FT_CUDA_KERNEL_NAME(dflare_fwd);
        ft_cuda_spec_kernel(s, fwd, threads, dl_fwd_smem(g, dt));
    } else {
        ft_cuda_spec_kernel(s,
                            g->stage == FUS_DL_STAGE_SMEM ? FT_CUDA_KERNEL_NAME(dflare_bwd_smem)
                                                          : FT_CUDA_KERNEL_NAME(dflare_bwd),
                            threads, dl_bwd_smem(g));
        ft_cuda_spec_kernel(s, FT_CUDA_KERNEL_NAME(dflare_bwd_reduce), FUS_RED_THREAD, 0);
    }
}

/* The persistent grid: ctas blocks per SM, no more than there are row groups. */
static int64_t persistent_grid(ft_cuda_ctx *x, int64_t nrb, int ctas) {
    int64_t G = (int64_t)ft_dev_props_of(ft_cuda_dev(x))->sm_count * ctas;
    return nrb < G ? nrb : G;
}

/* Backward: one launch per pass, then the reduction. */
static ft_status dl_backward(ft_cuda_ctx *x, ft_dev_module *m, const ft_cuda_call *call,
                             const dl_geom *g, ft_err *err) {
    int N = (int)g->N, H = (int)g->H, D = (int)g->D;
    float eps = (float)call->c->attrs.eps;
    int64_t G = persistent_grid(x, g->nrb, g->ctas);
    int P = g->atomic ? 1 : (int)(G * g->rpc), Q = g->atomic ? 1 : (int)G;
    size_t dg_bytes = (size_t)P * (size_t)H * sizeof(float);
    size_t da_bytes = (size_t)Q * (size_t)(D * g->T) * sizeof(float);
    void *dgp, *dap;
    ft_status s;
    if ((s = ft_cuda_scratch(x, 0, dg_bytes, &dgp, err)) ||
        (s = ft_cuda_scratch(x, 1, da_bytes, &dap, err)))
        return s;
    if (g->atomic || N == 0) {
        if ((s = ft_dev_memset(ft_cuda_dev(x), dgp, 0, dg_bytes, err)) ||
            (s = ft_dev_memset(ft_cuda_dev(x), dap, 0, da_bytes, err)))
            return s;
    }
    void *const *d = call->d;
    __typeof__(launch_dflare_bwd) *bwd =
        g->stage == FUS_DL_STAGE_SMEM ? launch_dflare_bwd_smem : launch_dflare_bwd;
    ft_dim3 block = {(unsigned)g->tpr, (unsigned)g->rpc, 1};
    for (int l0 = 0; N > 0 && l0 < D; l0 += g->per_pass) {
        int nl = D - l0 < g->per_pass ? D - l0 : g->per_pass;
        if ((s = bwd(x, m, (ft_dim3){(unsigned)G, 1, 1}, block, dl_bwd_smem(g), d[DL_X], d[DL_W],
                     d[DL_G], d[DL_DF], d[DL_F], d[DL_DX], dgp, dap, N, H, D, l0, nl, l0 > 0,
                     g->atomic, eps, err)))
            return s;
    }
    return launch_dflare_bwd_reduce(x, m, (ft_dim3){(unsigned)cdiv(H, FUS_RED_THREAD), 1, 1},
                                    (ft_dim3){FUS_RED_THREAD, 1, 1}, 0, dgp, P, dap, Q, d[DL_W],
                                    d[DL_DG], d[DL_DW], H, D, err);
}

/* The launches of a config whose module is m. */
static ft_status dl_launch(ft_cuda_ctx *x, ft_dev_module *m, const ft_cuda_call *call,
                           const dl_geom *g, ft_err *err) {
    const ft_call *c = call->c;
    if (c->backward) return dl_backward(x, m, call, g, err);

    int N = (int)g->N, H = (int)g->H, D = (int)g->D;
    float eps = (float)c->attrs.eps;
    void *const *d = call->d;
    if (N == 0) return FT_OK;
    ft_dim3 grid = {(unsigned)g->nrb, (unsigned)g->npass, 1},
            block = {(unsigned)g->tpr, (unsigned)g->rpc, 1};
    size_t smem = dl_fwd_smem(g, call->dt);
    if (g->stage == FUS_DL_STAGE_MMA)
        return launch_dflare_fwd_mma(x, m, grid, block, smem, d[DL_X], d[DL_W], d[DL_G], d[DL_F], N,
                                     H, D, g->per_pass, eps, err);
    if (g->stage == FUS_DL_STAGE_SMEM)
        return launch_dflare_fwd_smem(x, m, grid, block, smem, d[DL_X], d[DL_W], d[DL_G], d[DL_F],
                                      N, H, D, g->per_pass, g->group, eps, err);
    return launch_dflare_fwd(x, m, grid, block, smem, d[DL_X], d[DL_W], d[DL_G], d[DL_F], N, H, D,
                             g->per_pass, 1, eps, err);
}

FUS_MODULE(dl, DL_H, FUS_DL_P_VEC, "fusion.dflare")

static ft_space dl_space = {dl_params, FUS_DL_NPARAMS, dl_constraints, dl_valid};

const ft_cuda_op ft_cuda_fusion_dflare = {&dl_space, dl_modules, dl_run};

/* ==== fusion.dflash ========================================================================= */

/* The launchers of fusion.cu's dflash kernels. */
FT_CUDA_KERNEL(dflash_norm,
               (const float *cs, const void *g, void *f, int N, int H, int vec, float eps),
               (&cs, &g, &f, &N, &H, &vec, &eps))
FT_CUDA_KERNEL(dflash_norm_ip, (void *f, const void *g, int N, int H, int vec, float eps),
               (&f, &g, &N, &H, &vec, &eps))
FT_CUDA_KERNEL(dflash_norm_bwd,
               (const float *cs, const void *g, const void *df, void *f, void *dc, float *dgp,
                int N, int H, int vec, float eps),
               (&cs, &g, &df, &f, &dc, &dgp, &N, &H, &vec, &eps))
FT_CUDA_KERNEL(dflash_norm_bwd_ip,
               (void *f, const void *g, const void *df, void *dc, float *dgp, int N, int H, int vec,
                float eps),
               (&f, &g, &df, &dc, &dgp, &N, &H, &vec, &eps))
FT_CUDA_KERNEL(dflash_dg, (const float *dgp, int P, void *dg, int H), (&dgp, &P, &dg, &H))

enum { FUS_DH_C_SCRATCH, FUS_DH_C_INPLACE };

static const char *const dh_c_labels[] = {"scratch", "inplace"};

/* The tunables: X(index, name, -D macro or NULL, labels, default, help, values...). */
#define DH_PARAMS(X)                                                                               \
    X(FUS_DH_P_ALGO, "algo", NULL, NULL, 0,                                                        \
      "cuBLASLt algorithm of every GEMM of the call, by rank among its heuristic's candidates "    \
      "(0: its first choice)",                                                                     \
      0, 1, 2, 3)                                                                                  \
    X(FUS_DH_P_C, "c", NULL, dh_c_labels, FUS_DH_C_SCRATCH,                                        \
      "where c lives: float32 scratch, or in f (storage type) normalised in place: no N x H "      \
      "float32 round trip",                                                                        \
      FUS_DH_C_SCRATCH, FUS_DH_C_INPLACE)                                                          \
    X(FUS_DH_P_VEC, "vec_bytes", NULL, NULL, 16,                                                   \
      "bytes per vector access of the norm kernels (16: one 128-bit access)", 2, 4, 8, 16)         \
    X(FUS_DH_P_CPT, "vecs_per_thread", NULL, NULL, 1,                                              \
      "norm kernels: vectors per thread per pass over the row; threads per row = "                 \
      "H/(elements*vecs_per_thread), rounded up to a warp, at most 1024",                          \
      1, 2, 4, 8)                                                                                  \
    X(FUS_DH_P_RPC, "rows_per_block", NULL, NULL, 1, "rows per block of the norm kernels", 1, 2, 4)

enum { DH_PARAMS(FT_CUDA_PARAM_INDEX) FUS_DH_NPARAMS };
static ft_param dh_params[] = {DH_PARAMS(FT_CUDA_PARAM_ENTRY)};
static const char *const dh_macros[] = {DH_PARAMS(FT_CUDA_PARAM_MACRO)};

#define DH_BWD_CTAS 2 /* blocks per SM of the backward norm's persistent grid */

typedef struct dh_geom {
    int64_t N, H, K;
    int el, tpr, rpc, inplace, algo;
    int64_t nrb;
} dh_geom;

static int64_t dh_tpr(int64_t H, int el, int cpt) {
    int64_t tpr = el ? fus_tpr(H / el, cpt) : 32;
    return tpr > 1024 ? 1024 : tpr;
}

static void dh_geom_of(const ft_call *c, const ft_config *cfg, int el, dh_geom *g) {
    g->N = c->dim[DH_N];
    g->H = c->dim[DH_H];
    g->K = c->dim[DH_TH];
    g->el = el;
    g->tpr = (int)dh_tpr(g->H, el, cfg->v[FUS_DH_P_CPT]);
    g->rpc = cfg->v[FUS_DH_P_RPC];
    g->inplace = cfg->v[FUS_DH_P_C] == FUS_DH_C_INPLACE;
    g->algo = cfg->v[FUS_DH_P_ALGO];
    g->nrb = cdiv(g->N, g->rpc);
}

/* ---- validity: one check per rule, then the rules in order with their lines ---- */

typedef struct dh_check {
    const ft_call *c;
    const ft_config *cfg;
    dh_geom g;
} dh_check;

static int dh_check_vec(const void *ctx, char *why, size_t n) {
    const dh_check *v = ctx;
    return fus_elems(v->c, v->g.H, v->cfg->v[FUS_DH_P_VEC], why, n) ? FT_CONFIG_VALID
                                                                    : FT_CONFIG_INVALID;
}

static int dh_check_cpt(const void *ctx, char *why, size_t n) {
    const dh_check *v = ctx;
    int cpt = v->cfg->v[FUS_DH_P_CPT];
    if (cpt > 1 && dh_tpr(v->g.H, v->g.el, cpt / 2) == v->g.tpr)
        return ft_config_why(
            FT_CONFIG_DUPLICATE, why, n,
            "vecs_per_thread=%d gives the same %d threads per row as vecs_per_thread=%d", cpt,
            v->g.tpr, cpt / 2);
    return FT_CONFIG_VALID;
}

static int dh_check_block(const void *ctx, char *why, size_t n) {
    const dh_geom *g = &((const dh_check *)ctx)->g;
    return fus_check_block(g->tpr, g->rpc, why, n);
}

/* The rules, in the order they are checked: X(check or NULL, the line `flaretune space`
 * shows). */
#define DH_RULES(X)                                                                                \
    X(dh_check_vec,                                                                                \
      "vec_bytes is a whole number of elements (bf16 2 B, f32 4 B) and H a multiple of "           \
      "them")                                                                                      \
    X(dh_check_cpt, "vecs_per_thread > 1 must give fewer threads per row than vecs_per_thread/2")  \
    X(dh_check_block, "threads per row * rows_per_block <= 1024")                                  \
    X(NULL, "algo must exist among cuBLASLt's candidates for the GEMM (checked when it runs on "   \
            "the GPU)")

FT_CUDA_RULES(dh, DH_RULES);

static int dh_valid(const ft_call *c, const ft_config *cfg, char *why, size_t n) {
    dh_check v = {.c = c, .cfg = cfg};
    dh_geom_of(c, cfg, fus_elems(c, c->dim[DH_H], cfg->v[FUS_DH_P_VEC], NULL, 0), &v.g);
    return FT_CUDA_RULES_CHECK(dh, &v, why, n);
}

/* ---- modules and launches ---- */

static void dh_spec(const ft_call *c, ft_dt dt, const ft_config *cfg, const dh_geom *g,
                    ft_cuda_module_spec *s) {
    spec_init(s, 2, dt);
    ft_cuda_spec_params(s, dh_macros, FUS_DH_NPARAMS, cfg);
    int threads = g->tpr * g->rpc;
    if (!c->backward) {
        ft_cuda_spec_kernel(
            s, g->inplace ? FT_CUDA_KERNEL_NAME(dflash_norm_ip) : FT_CUDA_KERNEL_NAME(dflash_norm),
            threads, 0);
    } else {
        ft_cuda_spec_kernel(s,
                            g->inplace ? FT_CUDA_KERNEL_NAME(dflash_norm_bwd_ip)
                                       : FT_CUDA_KERNEL_NAME(dflash_norm_bwd),
                            threads, 0);
        ft_cuda_spec_kernel(s, FT_CUDA_KERNEL_NAME(dflash_dg), FUS_RED_THREAD, 0);
    }
}

/* Backward: the norm's backward into dc (+ dg partials), dg, then the two GEMMs. */
static ft_status dh_backward(ft_cuda_ctx *x, ft_dev_module *m, const ft_cuda_call *call,
                             const dh_geom *g, void *cbuf, ft_err *err) {
    const ft_dt dt = call->dt;
    int N = (int)g->N, H = (int)g->H;
    float eps = (float)call->c->attrs.eps;
    void *const *d = call->d;
    int64_t G = persistent_grid(x, g->nrb, DH_BWD_CTAS);
    int P = (int)(G * g->rpc);
    void *dcd, *dgp;
    ft_status s;
    if ((s = ft_cuda_scratch(x, 1, (size_t)g->N * (size_t)H * ft_dt_size(dt), &dcd, err)) ||
        (s = ft_cuda_scratch(x, 2, (size_t)P * (size_t)H * sizeof(float), &dgp, err)))
        return s;
    if (N > 0) {
        ft_dim3 grid = {(unsigned)G, 1, 1}, block = {(unsigned)g->tpr, (unsigned)g->rpc, 1};
        if (g->inplace)
            s = launch_dflash_norm_bwd_ip(x, m, grid, block, 0, d[DH_F], d[DH_G], d[DH_DF], dcd,
                                          dgp, N, H, g->el, eps, err);
        else
            s = launch_dflash_norm_bwd(x, m, grid, block, 0, cbuf, d[DH_G], d[DH_DF], d[DH_F], dcd,
                                       dgp, N, H, g->el, eps, err);
        if (s) return s;
    }
    if ((s = launch_dflash_dg(x, m, (ft_dim3){(unsigned)cdiv(H, FUS_RED_THREAD), 1, 1},
                              (ft_dim3){FUS_RED_THREAD, 1, 1}, 0, dgp, P, d[DH_DG], H, err)))
        return s;
    /* dx = dc @ w_fc  ([N,H] x [H,T*H]), unless want_dx = 0 */
    ft_gemm_desc gx = ft_gemm_one(0, 0, g->N, g->K, g->H, g->H, g->K, dt, dt, 0.0f);
    if (call->c->attrs.want_dx &&
        (s = ft_cuda_gemm(x, &gx, dcd, d[DH_WFC], d[DH_DX], g->algo, err)))
        return ft_err_wrap(err, "fusion.dflash: dx = dc w_fc");
    /* dw_fc = dc^T @ x  ([H,N] x [N,T*H]) */
    ft_gemm_desc gw = ft_gemm_one(1, 0, g->H, g->K, g->N, g->H, g->K, dt, dt, 0.0f);
    if ((s = ft_cuda_gemm(x, &gw, dcd, d[DH_X], d[DH_DWFC], g->algo, err)))
        return ft_err_wrap(err, "fusion.dflash: dw_fc = dc^T x");
    return FT_OK;
}

/* The launches of a config whose module is m. */
static ft_status dh_launch(ft_cuda_ctx *x, ft_dev_module *m, const ft_cuda_call *call,
                           const dh_geom *g, ft_err *err) {
    const ft_call *c = call->c;
    const ft_dt dt = call->dt;
    ft_status s;
    int N = (int)g->N, H = (int)g->H;
    void *const *d = call->d;

    /* c = x.reshape(N, T*H) @ w_fc^T, into float32 scratch or into f. */
    void *cbuf = d[DH_F];
    if (!g->inplace &&
        (s = ft_cuda_scratch(x, 0, (size_t)g->N * (size_t)H * sizeof(float), &cbuf, err)))
        return s;
    ft_gemm_desc gc =
        ft_gemm_one(0, 1, g->N, g->H, g->K, g->K, g->K, dt, g->inplace ? dt : FT_DT_F32, 0.0f);
    if ((s = ft_cuda_gemm(x, &gc, d[DH_X], d[DH_WFC], cbuf, g->algo, err)))
        return ft_err_wrap(err, "fusion.dflash: c = x w_fc^T");
    if (c->backward) return dh_backward(x, m, call, g, cbuf, err);

    if (N == 0) return FT_OK;
    float eps = (float)c->attrs.eps;
    ft_dim3 grid = {(unsigned)g->nrb, 1, 1}, block = {(unsigned)g->tpr, (unsigned)g->rpc, 1};
    if (g->inplace)
        return launch_dflash_norm_ip(x, m, grid, block, 0, d[DH_F], d[DH_G], N, H, g->el, eps, err);
    return launch_dflash_norm(x, m, grid, block, 0, cbuf, d[DH_G], d[DH_F], N, H, g->el, eps, err);
}

FUS_MODULE(dh, DH_H, FUS_DH_P_VEC, "fusion.dflash")

static ft_space dh_space = {dh_params, FUS_DH_NPARAMS, dh_constraints, dh_valid};

const ft_cuda_op ft_cuda_fusion_dflash = {&dh_space, dh_modules, dh_run};
