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
 *   vec       bytes per vector access (2, 4, 8, 16; a whole number of elements): 16 is one 128-bit
 *             load per row segment, the widest a thread can issue. Narrower accesses let rows
 *             whose length is not a multiple of 8 bf16 / 4 floats run at all (H must be a
 *             multiple of the elements per access, or rows would be misaligned).
 *   cpt       vectors per thread per target row: each thread takes cpt vectors of each of the
 *             T rows (x is read exactly once), so threads per row = H / (elements x cpt) rounded
 *             up to a warp (stage=mma: warps of 8-column tiles). The trade between threads per
 *             row (parallelism, and the cost of the row's sum-of-squares reduction across warps)
 *             and registers per thread (stage=reg and the backward hold T * cpt * elements
 *             floats of x: occupancy).
 *   rpc       rows per block (threadIdx.y): more rows per block for small H, where one row is a
 *             warp or two and a block per row would leave the SM's block slots as the limit.
 *   stage     where a thread's slice of the row lives while its layers are made. reg: forward,
 *             the x tile in registers (T * cpt * elements floats: one block of a wide row, T = 9
 *             and H = 4096, fills an SM's registers and then cannot overlap its loads with its
 *             math); smem: forward, x copied once into shared memory by cp.async and re-read
 *             from there per group of layers, in at most 64 registers, so two blocks of 512
 *             threads share an SM and one's loads overlap the other's math. Backward: the dx
 *             accumulators (another T * cpt * elements floats) in registers or in shared memory
 *             (at most 512 threads per block then: the x tile keeps up to 128 registers).
 *             mma (bf16 forward, T <= 16): the staged row mixed on the tensor cores, the
 *             softmax rows as the A operand (split into bf16 hi + lo) and x as B through
 *             ldmatrix.trans; one barrier per pass and a fraction of the CUDA-core instructions,
 *             which at T = 9, D = 7 (63 FMAs per output element) decide the staged kernel's speed.
 *   group     staged forward: layers per round, their mixes held together and their sums of
 *             squares reduced with one barrier (a row spans many warps: a barrier per layer
 *             left the SM idle); more layers per round, more registers.
 *   ctas      backward: blocks per SM of its persistent grid: more blocks hide more latency,
 *             but each writes dg partial rows (one per row group) that must be reduced.
 *   reduce    backward: the sums over N of dg and da. partials: per-block partials in scratch
 *             summed in a fixed order by a small kernel (deterministic); atomic: float atomics
 *             into one accumulator (less scratch, no reduce pass over partials, order-dependent
 *             rounding).
 * The storage type (the call's `dtype` attribute) and T are compile-time too (the register tile
 * is T x cpt x vector floats); one module per (dtype, T, elements, cpt).
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
 *   vec, cpt, rpc  the norm kernels' shape: bytes per access, vectors per thread per pass over
 *             the row (threads per row = H / (elements x cpt), rounded up to a warp, at most
 *             1024; these kernels loop, so nothing is held in registers), rows per block.
 * One module per storage type: the norm kernels take the vector width at run time.
 * Scratch: dflare backward: dg partials (G x rpc x H floats, or H) and da partials (G x D x T,
 * or D x T). dflash: c (N x H floats, c = scratch), dc (N x H, backward) and dg partials.
 */
#include <stdio.h>
#include <string.h>

#include "cuda/cuda_backend.h"
#include "fusion/fusion.h"

#define FUS_SRC        "fusion/fusion.cu"
#define FUS_MAX_SMEM   (227 * 1024) /* the most dynamic shared memory a block may ask for */
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
    if (vec % esize) {
        if (why)
            snprintf(why, n, "vec=%d B is not a whole number of %d-byte %s elements", vec, esize,
                     esize == 2 ? "bf16" : "f32");
        return 0;
    }
    int el = vec / esize;
    if (H % el) {
        if (why)
            snprintf(why, n,
                     "H=%lld is not a multiple of %d elements (vec=%d B): rows would not "
                     "be %d-byte aligned",
                     (long long)H, el, vec, vec);
        return 0;
    }
    return el;
}

static void spec_init(ft_cuda_module_spec *s, int part, ft_dt dt) {
    memset(s, 0, sizeof *s);
    s->source = FUS_SRC;
    ft_cuda_spec_define(s, "FT_FUSION=%d", part);
    ft_cuda_spec_define(s, "FT_BF16=%d", dt == FT_DT_BF16 ? 1 : 0);
}

/* ==== fusion.dflare ========================================================================= */

enum { DLP_STRATEGY, DLP_K, DLP_VEC, DLP_CPT, DLP_RPC, DLP_STAGE, DLP_GROUP, DLP_CTAS, DLP_REDUCE };
enum { DL_PER_LAYER, DL_K_LAYERS, DL_ALL_LAYERS };
enum { DL_PARTIALS, DL_ATOMIC };
enum { DL_REG, DL_SMEM, DL_MMA };

static const char *const dl_strategy_labels[] = {"per_layer", "k_layers", "all_layers"};
static const char *const dl_stage_labels[] = {"reg", "smem", "mma"};
static const char *const dl_reduce_labels[] = {"partials", "atomic"};

/* Defaults of the parameters some calls do not use (they must keep them there). */
enum { DL_DEF_GROUP = 4, DL_DEF_CTAS = 2, DL_DEF_REDUCE = DL_PARTIALS };
static const int dl_groups[] = {1, 2, 4}; /* the candidates of group, ascending */

#define DL_BWD_SMEM_MAXT 512 /* __launch_bounds__ of dflare_bwd_smem */

/* Everything a config and a call fix about the launches. */
typedef struct dl_geom {
    int64_t N, T, H, D;
    int el, cpt, tpr, rpc, per_pass, npass, stage, group, ctas, atomic;
    int64_t nch, nrb;
} dl_geom;

static void dl_geom_of(const ft_call *c, const ft_config *cfg, int el, dl_geom *g) {
    g->N = c->dim[DL_N];
    g->T = c->dim[DL_T];
    g->H = c->dim[DL_H];
    g->D = c->dim[DL_D];
    g->el = el;
    g->cpt = cfg->v[DLP_CPT];
    g->nch = el ? g->H / el : 0;
    g->tpr = (int)fus_tpr(g->nch, g->cpt);
    g->rpc = cfg->v[DLP_RPC];
    int s = cfg->v[DLP_STRATEGY];
    g->per_pass = s == DL_PER_LAYER ? 1 : s == DL_K_LAYERS ? cfg->v[DLP_K] : (int)g->D;
    g->npass = (int)cdiv(g->D, g->per_pass);
    g->stage = cfg->v[DLP_STAGE];
    g->group = cfg->v[DLP_GROUP];
    g->ctas = cfg->v[DLP_CTAS];
    g->atomic = cfg->v[DLP_REDUCE] == DL_ATOMIC;
    g->nrb = cdiv(g->N, g->rpc);
}

/* Dynamic shared memory of the forward: the pass's softmax rows, rounded up to 16 bytes, then
 * with stage = smem the x of one row group. */
static size_t dl_fwd_smem(const dl_geom *g, ft_dt dt) {
    size_t a = (size_t)((g->per_pass * g->T + 3) & ~(int64_t)3) * sizeof(float);
    return a + (g->stage ? (size_t)(g->rpc * g->T * g->H) * ft_dt_size(dt) : 0);
}

/* Of the backward pass with the most layers: softmax rows, a da slot per warp, then with
 * stage = smem the float dx accumulators of one row group (T * cpt * elements per thread). */
static size_t dl_bwd_smem(const dl_geom *g) {
    int64_t warps = (int64_t)g->tpr * g->rpc / 32;
    return (size_t)(g->per_pass * g->T * (1 + warps)) * sizeof(float) +
           (g->stage == DL_SMEM ? (size_t)(g->rpc * g->T * g->tpr * g->cpt * g->el) * sizeof(float)
                                : 0);
}

static int dl_valid(const ft_call *c, const ft_config *cfg, char *why, size_t n) {
    int dup = 0;
    const int64_t T = c->dim[DL_T], H = c->dim[DL_H], D = c->dim[DL_D];
    const int strategy = cfg->v[DLP_STRATEGY], k = cfg->v[DLP_K], bwd = c->backward;
    if (strategy != DL_K_LAYERS && k != 2) {
        if (why) snprintf(why, n, "k only applies to strategy=k_layers (leave it at 2)");
        return 0;
    }
    if (strategy == DL_K_LAYERS && k >= D) {
        if (why) snprintf(why, n, "k_layers needs k < D=%lld (k >= D is all_layers)", (long long)D);
        dup = 1; /* a duplicate, if nothing rules it out below */
    }
    if (strategy == DL_PER_LAYER && D == 1) {
        if (why) snprintf(why, n, "with D=1, per_layer is all_layers");
        dup = 1; /* a duplicate, if nothing rules it out below */
    }
    int el = fus_elems(c, H, cfg->v[DLP_VEC], why, n);
    if (!el) return 0;
    dl_geom g;
    dl_geom_of(c, cfg, el, &g);
    if (g.tpr > 1024) {
        if (why)
            snprintf(why, n, "a row of %lld vectors needs %d threads at cpt=%d (at most 1024)",
                     (long long)g.nch, g.tpr, g.cpt);
        return 0;
    }
    if (g.cpt > 1 && fus_tpr(g.nch, g.cpt / 2) == g.tpr) {
        if (why)
            snprintf(why, n, "cpt=%d gives the same %d threads per row as cpt=%d", g.cpt, g.tpr,
                     g.cpt / 2);
        return 0;
    }
    if (T > 64) {
        if (why)
            snprintf(why, n, "T=%lld: the kernels take at most 64 target layers", (long long)T);
        return 0;
    }
    if ((bwd || g.stage == DL_REG) && T * g.cpt * el > FUS_TILE_MAX) {
        if (why)
            snprintf(why, n,
                     "a register tile of T*cpt*elements = %lld floats per thread "
                     "(at most %d)",
                     (long long)(T * g.cpt * el), FUS_TILE_MAX);
        return 0;
    }
    if (g.tpr * g.rpc > 1024) {
        if (why)
            snprintf(why, n, "%d threads per row x rpc=%d rows is more than 1024 threads", g.tpr,
                     g.rpc);
        return 0;
    }
    /* Parameters a call does not use keep their default (so no two configs run the same). */
    if ((bwd || g.stage != DL_SMEM) && g.group != DL_DEF_GROUP) {
        if (why)
            snprintf(why, n, "group applies to the forward with stage=smem (leave it at %d)",
                     DL_DEF_GROUP);
        return 0;
    }
    if (!bwd && g.stage == DL_SMEM) {
        /* Groups of at least the pass's layers are one round: keep one of them (the default when
         * it is one, else the smallest). */
        int eff = g.group < g.per_pass ? g.group : g.per_pass, keep = 0;
        if ((DL_DEF_GROUP < g.per_pass ? DL_DEF_GROUP : g.per_pass) == eff) keep = DL_DEF_GROUP;
        for (size_t q = 0; !keep && q < sizeof dl_groups / sizeof dl_groups[0]; q++)
            if ((dl_groups[q] < g.per_pass ? dl_groups[q] : g.per_pass) == eff) keep = dl_groups[q];
        if (g.group != keep) {
            if (why)
                snprintf(why, n,
                         "group=%d makes the same rounds as group=%d with %d layers "
                         "per pass",
                         g.group, keep, g.per_pass);
            return 0;
        }
    }
    if (!bwd && g.ctas != DL_DEF_CTAS) {
        if (why)
            snprintf(why, n, "ctas applies to the backward only (leave it at %d)", DL_DEF_CTAS);
        return 0;
    }
    if (!bwd && cfg->v[DLP_REDUCE] != DL_DEF_REDUCE) {
        if (why)
            snprintf(why, n, "reduce applies to the backward only (leave it at %s)",
                     dl_reduce_labels[DL_DEF_REDUCE]);
        return 0;
    }
    if (g.stage == DL_MMA) {
        const char *no = bwd                                ? "the backward has no mma stage"
                         : ft_cuda_call_dt(c) != FT_DT_BF16 ? "needs bf16 storage"
                         : el != 8                          ? "needs vec=16"
                         : T > 16 || g.per_pass > 16
                             ? "needs T <= 16 and at most 16 layers per pass"
                         : g.rpc != 1 ? "runs one row per block (rpc=1)"
                                      : NULL;
        if (no) {
            if (why) snprintf(why, n, "stage=mma %s", no);
            return 0;
        }
    }
    if (bwd && g.stage == DL_SMEM && g.tpr * g.rpc > DL_BWD_SMEM_MAXT) {
        if (why)
            snprintf(why, n,
                     "the backward with stage=smem runs at most %d threads per block "
                     "(%d here)",
                     DL_BWD_SMEM_MAXT, g.tpr * g.rpc);
        return 0;
    }
    size_t smem = bwd ? dl_bwd_smem(&g) : dl_fwd_smem(&g, ft_cuda_call_dt(c));
    if (smem > FUS_MAX_SMEM) {
        if (why)
            snprintf(why, n, "needs %zu bytes of shared memory per block (at most %d)", smem,
                     FUS_MAX_SMEM);
        return 0;
    }
    return dup ? FT_CONFIG_DUPLICATE : FT_CONFIG_VALID;
}

static const char *const dl_fwd_kernels[] = {"dflare_fwd", "dflare_fwd_smem", "dflare_fwd_mma"};

static void dl_spec(const ft_call *c, ft_dt dt, const dl_geom *g, ft_cuda_module_spec *s) {
    spec_init(s, 1, dt);
    ft_cuda_spec_define(s, "FT_T=%lld", (long long)g->T);
    ft_cuda_spec_define(s, "FT_VEC=%d", g->el);
    ft_cuda_spec_define(s, "FT_CPT=%d", g->cpt);
    if (!c->backward) {
        ft_cuda_spec_kernel(s, dl_fwd_kernels[g->stage], g->tpr * g->rpc, dl_fwd_smem(g, dt));
    } else {
        ft_cuda_spec_kernel(s, g->stage == DL_SMEM ? "dflare_bwd_smem" : "dflare_bwd",
                            g->tpr * g->rpc, dl_bwd_smem(g));
        ft_cuda_spec_kernel(s, "dflare_bwd_reduce", FUS_RED_THREAD, 0);
    }
}

static int dl_modules(const ft_call *c, ft_dt dt, const ft_config *cfg, ft_cuda_module_spec *out,
                      int max) {
    int el = fus_elems(c, c->dim[DL_H], cfg->v[DLP_VEC], NULL, 0);
    if (max < 1 || !el) return 0;
    dl_geom g;
    dl_geom_of(c, cfg, el, &g);
    dl_spec(c, dt, &g, &out[0]);
    return 1;
}

/* The persistent grid: ctas blocks per SM, no more than there are row groups. */
static int64_t persistent_grid(ft_cuda_ctx *x, int64_t nrb, int ctas) {
    int64_t G = (int64_t)ft_dev_props_of(ft_cuda_dev(x))->sm_count * ctas;
    return nrb < G ? nrb : G;
}

static ft_status dl_run(ft_cuda_ctx *x, const ft_cuda_call *dc, const ft_config *cfg, ft_err *err) {
    const ft_call *c = dc->c;
    char why[160];
    int el = fus_elems(c, c->dim[DL_H], cfg->v[DLP_VEC], why, sizeof why);
    if (!el) return ft_err_set(err, FT_EINVAL, "fusion.dflare on cuda: %s", why);
    dl_geom g;
    dl_geom_of(c, cfg, el, &g);
    ft_cuda_module_spec spec;
    dl_spec(c, dc->dt, &g, &spec);
    ft_dev_module *m;
    ft_status s = ft_cuda_module(x, &spec, &m, err);
    if (s) return s;

    int N = (int)g.N, H = (int)g.H, D = (int)g.D, per_pass = g.per_pass;
    float eps = (float)c->attrs.eps;
    void *xd = dc->d[DL_X], *wd = dc->d[DL_W], *gd = dc->d[DL_G], *fd = dc->d[DL_F];
    ft_dim3 block = {(unsigned)g.tpr, (unsigned)g.rpc, 1};

    if (!c->backward) {
        if (N == 0) return FT_OK;
        ft_dim3 grid = {(unsigned)g.nrb, (unsigned)g.npass, 1};
        if (g.stage == DL_MMA) {
            void *args[] = {&xd, &wd, &gd, &fd, &N, &H, &D, &per_pass, &eps};
            return ft_cuda_launch(x, m, "dflare_fwd_mma", grid, block, dl_fwd_smem(&g, dc->dt),
                                  args, err);
        }
        int group = g.stage == DL_SMEM ? g.group : 1;
        void *args[] = {&xd, &wd, &gd, &fd, &N, &H, &D, &per_pass, &group, &eps};
        return ft_cuda_launch(x, m, dl_fwd_kernels[g.stage], grid, block, dl_fwd_smem(&g, dc->dt),
                              args, err);
    }

    /* Backward: one launch per pass, then the reduction. */
    int64_t G = persistent_grid(x, g.nrb, g.ctas);
    int P = g.atomic ? 1 : (int)(G * g.rpc), Q = g.atomic ? 1 : (int)G;
    void *dgp, *dap;
    if ((s = ft_cuda_scratch(x, 0, (size_t)P * (size_t)H * sizeof(float), &dgp, err)) ||
        (s = ft_cuda_scratch(x, 1, (size_t)Q * (size_t)(D * g.T) * sizeof(float), &dap, err)))
        return s;
    if (g.atomic || N == 0) {
        if ((s = ft_dev_memset(ft_cuda_dev(x), dgp, 0, (size_t)P * (size_t)H * sizeof(float),
                               err)) ||
            (s = ft_dev_memset(ft_cuda_dev(x), dap, 0,
                               (size_t)Q * (size_t)(D * g.T) * sizeof(float), err)))
            return s;
    }
    void *dfd = dc->d[DL_DF], *dxd = dc->d[DL_DX], *dgd = dc->d[DL_DG], *dwd = dc->d[DL_DW];
    int atomic = g.atomic;
    for (int l0 = 0; N > 0 && l0 < D; l0 += per_pass) {
        int nl = D - l0 < per_pass ? D - l0 : per_pass, accum = l0 > 0;
        void *args[] = {&xd, &wd, &gd, &dfd, &fd, &dxd,   &dgp,    &dap,
                        &N,  &H,  &D,  &l0,  &nl, &accum, &atomic, &eps};
        if ((s = ft_cuda_launch(x, m, g.stage == DL_SMEM ? "dflare_bwd_smem" : "dflare_bwd",
                                (ft_dim3){(unsigned)G, 1, 1}, block, dl_bwd_smem(&g), args, err)))
            return s;
    }
    void *rargs[] = {&dgp, &P, &dap, &Q, &wd, &dgd, &dwd, &H, &D};
    return ft_cuda_launch(x, m, "dflare_bwd_reduce",
                          (ft_dim3){(unsigned)cdiv(H, FUS_RED_THREAD), 1, 1},
                          (ft_dim3){FUS_RED_THREAD, 1, 1}, 0, rargs, err);
}

static ft_param dl_params[] = {
    [DLP_STRATEGY] = {"strategy",
                      "passes over x: per_layer (D), k_layers (ceil(D/k)), all_layers (1); x is "
                      "the big tensor and never fits L2",
                      3,
                      {DL_PER_LAYER, DL_K_LAYERS, DL_ALL_LAYERS},
                      dl_strategy_labels,
                      DL_ALL_LAYERS,
                      0},
    [DLP_K] = {"k", "draft layers per pass with strategy=k_layers", 3, {2, 3, 4}, NULL, 2, 0},
    [DLP_VEC] = {"vec",
                 "bytes per vector load/store (16: one 128-bit access); H must be a multiple of "
                 "its elements",
                 4,
                 {2, 4, 8, 16},
                 NULL,
                 16,
                 0},
    [DLP_CPT] = {"cpt",
                 "vectors per thread per target row (x tile in registers with stage=reg and "
                 "backward): threads per row = H/(elements*cpt), rounded up to a warp",
                 3,
                 {1, 2, 4},
                 NULL,
                 1,
                 0},
    [DLP_RPC] =
        {"rpc", "rows per block (small H: a row is a warp or two)", 3, {1, 2, 4}, NULL, 1, 0},
    [DLP_STAGE] = {"stage",
                   "reg: x (backward: dx) held in registers; smem: x staged in shared memory by "
                   "cp.async (backward: dx accumulated there); mma: staged x mixed on the tensor "
                   "cores (bf16 forward)",
                   3,
                   {DL_REG, DL_SMEM, DL_MMA},
                   dl_stage_labels,
                   DL_SMEM,
                   0},
    [DLP_GROUP] = {"group",
                   "staged forward: layers per reduction round (one barrier per round; more "
                   "layers, more registers)",
                   3,
                   {1, 2, 4},
                   NULL,
                   DL_DEF_GROUP,
                   0},
    [DLP_CTAS] = {"ctas",
                  "backward: blocks per SM of its persistent grid: latency hiding against dg "
                  "partials to reduce",
                  3,
                  {1, 2, 4},
                  NULL,
                  DL_DEF_CTAS,
                  0},
    [DLP_REDUCE] = {"reduce",
                    "backward sums over N of dg and da: per-block partials reduced in order "
                    "(deterministic) or float atomics",
                    2,
                    {DL_PARTIALS, DL_ATOMIC},
                    dl_reduce_labels,
                    DL_DEF_REDUCE,
                    0},
};

static const char *const dl_constraints[] = {
    "k applies only to strategy=k_layers (other strategies keep k=2); k_layers needs k < D",
    "per_layer needs D > 1 (with one layer it is all_layers)",
    "vec is a whole number of elements (bf16 2 B, f32 4 B) and H a multiple of them",
    "threads per row = H/(elements*cpt) rounded up to a warp, at most 1024; cpt > 1 must give "
    "fewer threads per row than cpt/2",
    "T <= 64; where x is held in registers (stage=reg, and the backward) T * cpt * elements <= "
    "256 floats per thread",
    "threads per row * rpc <= 1024",
    "group: forward with stage=smem only (else the default); groups of at least the layers of "
    "a pass are the same (the default or the smallest is kept)",
    "ctas, reduce: backward only (else the default); backward with stage=smem: at most 512 "
    "threads per block",
    "stage=mma: forward, bf16, vec=16, T <= 16, at most 16 layers per pass, rpc=1",
    "shared memory per block <= 227 KiB (stage=smem: rpc*T*H elements of x forward, floats of "
    "dx backward)",
    NULL,
};

static ft_space dl_space = {dl_params, sizeof dl_params / sizeof dl_params[0], dl_constraints,
                            dl_valid};

const ft_cuda_op ft_cuda_fusion_dflare = {&dl_space, dl_modules, dl_run};

/* ==== fusion.dflash ========================================================================= */

enum { DHP_ALGO, DHP_C, DHP_VEC, DHP_CPT, DHP_RPC };
enum { DH_C_SCRATCH, DH_C_INPLACE };

static const char *const dh_c_labels[] = {"scratch", "inplace"};

#define DH_BWD_CTAS 2 /* blocks per SM of the backward norm's persistent grid */

typedef struct dh_geom {
    int64_t N, H, K;
    int el, tpr, rpc, inplace, algo;
    int64_t nrb;
} dh_geom;

static void dh_geom_of(const ft_call *c, const ft_config *cfg, int el, dh_geom *g) {
    g->N = c->dim[DH_N];
    g->H = c->dim[DH_H];
    g->K = c->dim[DH_TH];
    g->el = el;
    int64_t tpr = el ? fus_tpr(g->H / el, cfg->v[DHP_CPT]) : 32;
    g->tpr = (int)(tpr > 1024 ? 1024 : tpr);
    g->rpc = cfg->v[DHP_RPC];
    g->inplace = cfg->v[DHP_C] == DH_C_INPLACE;
    g->algo = cfg->v[DHP_ALGO];
    g->nrb = cdiv(g->N, g->rpc);
}

static int dh_valid(const ft_call *c, const ft_config *cfg, char *why, size_t n) {
    const int64_t H = c->dim[DH_H];
    int el = fus_elems(c, H, cfg->v[DHP_VEC], why, n);
    if (!el) return 0;
    dh_geom g;
    dh_geom_of(c, cfg, el, &g);
    int cpt = cfg->v[DHP_CPT];
    if (cpt > 1) {
        int64_t half = fus_tpr(H / el, cpt / 2);
        if ((half > 1024 ? 1024 : half) == g.tpr) {
            if (why)
                snprintf(why, n, "cpt=%d gives the same %d threads per row as cpt=%d", cpt, g.tpr,
                         cpt / 2);
            return 0;
        }
    }
    if (g.tpr * g.rpc > 1024) {
        if (why)
            snprintf(why, n, "%d threads per row x rpc=%d rows is more than 1024 threads", g.tpr,
                     g.rpc);
        return 0;
    }
    return 1;
}

static void dh_spec(const ft_call *c, ft_dt dt, const dh_geom *g, ft_cuda_module_spec *s) {
    spec_init(s, 2, dt);
    int threads = g->tpr * g->rpc;
    if (!c->backward) {
        ft_cuda_spec_kernel(s, g->inplace ? "dflash_norm_ip" : "dflash_norm", threads, 0);
    } else {
        ft_cuda_spec_kernel(s, g->inplace ? "dflash_norm_bwd_ip" : "dflash_norm_bwd", threads, 0);
        ft_cuda_spec_kernel(s, "dflash_dg", FUS_RED_THREAD, 0);
    }
}

static int dh_modules(const ft_call *c, ft_dt dt, const ft_config *cfg, ft_cuda_module_spec *out,
                      int max) {
    int el = fus_elems(c, c->dim[DH_H], cfg->v[DHP_VEC], NULL, 0);
    if (max < 1 || !el) return 0;
    dh_geom g;
    dh_geom_of(c, cfg, el, &g);
    dh_spec(c, dt, &g, &out[0]);
    return 1;
}

static ft_status dh_run(ft_cuda_ctx *x, const ft_cuda_call *dc, const ft_config *cfg, ft_err *err) {
    const ft_call *c = dc->c;
    char why[160];
    int el = fus_elems(c, c->dim[DH_H], cfg->v[DHP_VEC], why, sizeof why);
    if (!el) return ft_err_set(err, FT_EINVAL, "fusion.dflash on cuda: %s", why);
    dh_geom g;
    dh_geom_of(c, cfg, el, &g);
    ft_cuda_module_spec spec;
    dh_spec(c, dc->dt, &g, &spec);
    ft_dev_module *m;
    ft_status s = ft_cuda_module(x, &spec, &m, err);
    if (s) return s;

    const ft_dt dt = dc->dt;
    int N = (int)g.N, H = (int)g.H, vec = g.el;
    float eps = (float)c->attrs.eps;
    void *xd = dc->d[DH_X], *wd = dc->d[DH_WFC], *gd = dc->d[DH_G], *fd = dc->d[DH_F];
    ft_dim3 block = {(unsigned)g.tpr, (unsigned)g.rpc, 1};

    /* c = x.reshape(N, T*H) @ w_fc^T, into float32 scratch or into f. */
    void *cbuf = fd;
    if (!g.inplace &&
        (s = ft_cuda_scratch(x, 0, (size_t)g.N * (size_t)H * sizeof(float), &cbuf, err)))
        return s;
    ft_gemm_desc gc = {.trans_a = 0,
                       .trans_b = 1,
                       .M = g.N,
                       .N = g.H,
                       .K = g.K,
                       .lda = g.K,
                       .ldb = g.K,
                       .ldc = g.H,
                       .batch = 1,
                       .ab = dt,
                       .c = g.inplace ? dt : FT_DT_F32,
                       .alpha = 1.0f,
                       .beta = 0.0f};
    if ((s = ft_cuda_gemm(x, &gc, xd, wd, cbuf, g.algo, err)))
        return ft_err_wrap(err, "fusion.dflash: c = x w_fc^T");

    if (!c->backward) {
        if (N == 0) return FT_OK;
        ft_dim3 grid = {(unsigned)g.nrb, 1, 1};
        if (g.inplace) {
            void *args[] = {&fd, &gd, &N, &H, &vec, &eps};
            return ft_cuda_launch(x, m, "dflash_norm_ip", grid, block, 0, args, err);
        }
        void *args[] = {&cbuf, &gd, &fd, &N, &H, &vec, &eps};
        return ft_cuda_launch(x, m, "dflash_norm", grid, block, 0, args, err);
    }

    /* Backward: the norm's backward into dc (+ dg partials), dg, then the two GEMMs. */
    int64_t G = persistent_grid(x, g.nrb, DH_BWD_CTAS);
    int P = (int)(G * g.rpc);
    void *dcd, *dgp;
    if ((s = ft_cuda_scratch(x, 1, (size_t)g.N * (size_t)H * ft_dt_size(dt), &dcd, err)) ||
        (s = ft_cuda_scratch(x, 2, (size_t)P * (size_t)H * sizeof(float), &dgp, err)))
        return s;
    void *dfd = dc->d[DH_DF], *dxd = dc->d[DH_DX], *dwd = dc->d[DH_DWFC], *dgd = dc->d[DH_DG];
    if (N > 0) {
        ft_dim3 grid = {(unsigned)G, 1, 1};
        if (g.inplace) {
            void *args[] = {&fd, &gd, &dfd, &dcd, &dgp, &N, &H, &vec, &eps};
            s = ft_cuda_launch(x, m, "dflash_norm_bwd_ip", grid, block, 0, args, err);
        } else {
            void *args[] = {&cbuf, &gd, &dfd, &fd, &dcd, &dgp, &N, &H, &vec, &eps};
            s = ft_cuda_launch(x, m, "dflash_norm_bwd", grid, block, 0, args, err);
        }
        if (s) return s;
    }
    void *rargs[] = {&dgp, &P, &dgd, &H};
    if ((s = ft_cuda_launch(x, m, "dflash_dg", (ft_dim3){(unsigned)cdiv(H, FUS_RED_THREAD), 1, 1},
                            (ft_dim3){FUS_RED_THREAD, 1, 1}, 0, rargs, err)))
        return s;
    /* dx = dc @ w_fc  ([N,H] x [H,T*H]) */
    ft_gemm_desc gx = {.M = g.N,
                       .N = g.K,
                       .K = g.H,
                       .lda = g.H,
                       .ldb = g.K,
                       .ldc = g.K,
                       .batch = 1,
                       .ab = dt,
                       .c = dt,
                       .alpha = 1.0f,
                       .beta = 0.0f};
    if ((s = ft_cuda_gemm(x, &gx, dcd, wd, dxd, g.algo, err)))
        return ft_err_wrap(err, "fusion.dflash: dx = dc w_fc");
    /* dw_fc = dc^T @ x  ([H,N] x [N,T*H]) */
    ft_gemm_desc gw = {.trans_a = 1,
                       .M = g.H,
                       .N = g.K,
                       .K = g.N,
                       .lda = g.H,
                       .ldb = g.K,
                       .ldc = g.K,
                       .batch = 1,
                       .ab = dt,
                       .c = dt,
                       .alpha = 1.0f,
                       .beta = 0.0f};
    if ((s = ft_cuda_gemm(x, &gw, dcd, xd, dwd, g.algo, err)))
        return ft_err_wrap(err, "fusion.dflash: dw_fc = dc^T x");
    return FT_OK;
}

static ft_param dh_params[] = {
    [DHP_ALGO] = {"algo",
                  "cuBLASLt algorithm of every GEMM of the call, by rank among its heuristic's "
                  "candidates (0: its first choice)",
                  4,
                  {0, 1, 2, 3},
                  NULL,
                  0,
                  0},
    [DHP_C] = {"c",
               "where c lives: float32 scratch, or in f (storage type) normalised in place: no "
               "N x H float32 round trip",
               2,
               {DH_C_SCRATCH, DH_C_INPLACE},
               dh_c_labels,
               DH_C_SCRATCH,
               0},
    [DHP_VEC] = {"vec",
                 "bytes per vector access of the norm kernels (16: one 128-bit access)",
                 4,
                 {2, 4, 8, 16},
                 NULL,
                 16,
                 0},
    [DHP_CPT] = {"cpt",
                 "norm kernels: vectors per thread per pass over the row; threads per row = "
                 "H/(elements*cpt), rounded up to a warp, at most 1024",
                 4,
                 {1, 2, 4, 8},
                 NULL,
                 1,
                 0},
    [DHP_RPC] = {"rpc", "rows per block of the norm kernels", 3, {1, 2, 4}, NULL, 1, 0},
};

static const char *const dh_constraints[] = {
    "vec is a whole number of elements (bf16 2 B, f32 4 B) and H a multiple of them",
    "cpt > 1 must give fewer threads per row than cpt/2",
    "threads per row * rpc <= 1024",
    "algo must exist among cuBLASLt's candidates for the GEMM (checked when it runs on the GPU)",
    NULL,
};

static ft_space dh_space = {dh_params, sizeof dh_params / sizeof dh_params[0], dh_constraints,
                            dh_valid};

const ft_cuda_op ft_cuda_fusion_dflash = {&dh_space, dh_modules, dh_run};
