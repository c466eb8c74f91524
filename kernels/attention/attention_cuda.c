/* attention_cuda.c: the context K/V projection and the inference block attention on the CUDA
 * backend (SPEC.md attention.kvproj, attention.decode): their tunable spaces, the kernel modules
 * a configuration compiles, and the launch sequences. The kernels, and the napkin math that
 * shaped them, are in kvproj.cu and attention_decode.cu.
 *
 * ---- attention.decode: exposed parameters, and why ----
 *   path      simt: the CUDA cores (f32 or bf16 storage, any head dim); mma: the tensor cores
 *             (mma.sync m16n8k16 bf16 through the dialect's wrappers, bf16 storage, dh a
 *             multiple of 16). At qwen3-8b decode the math is ~17 GFLOP against ~270 MB of K/V:
 *             only the tensor cores bring the FLOPs under the memory time (~56 us); the
 *             CUDA-core path is the baseline, the fp32 check and the fallback for odd head dims.
 *   keys_per_tile
 *             keys per K/V tile staged in shared memory (one cp.async batch and two barriers per
 *             tile): larger tiles, fewer barriers and longer copies in flight, more shared memory
 *             (fewer CTAs per SM). The online softmax steps 16 keys at a time inside a tile.
 *   splits    CTAs per (request, kv head) along the keys (split-KV), merged by a log-sum-exp
 *             kernel; auto: enough for two CTAs per SM (2 * SMs / (R * Hkv)), at most one split
 *             per two tiles of the longest request, at most 16. R * Hkv CTAs alone (128 at
 *             qwen3-8b, R = 16) do not fill an H200 twice; more splits cost the merge's reads
 *             and writes of [R, splits, Hkv, M, dh] fp32 partials.
 *   warps     simt: warps per CTA. The CTA's M = B * G query rows (the GQA group's heads packed
 *             with the block's queries, so each staged K/V row serves all of them) are spread
 *             over its threads, TPR threads per row (the largest power of two that still gives
 *             every row a slot): more warps, fewer dims of q and o per thread (registers) but more
 *             shuffles per score. (The mma path's warps follow from tiles_per_warp:
 *             ceil(M / 16 / tiles_per_warp).)
 *   tiles_per_warp
 *             mma: 16-row tiles per warp. Two tiles per warp share every K/V fragment loaded
 *             from shared memory (half the ldmatrix traffic) at twice the accumulator registers
 *             (dh <= 64 only: at dh = 128 two tiles would need ~190 registers and spill).
 *   stages    K/V tiles in the cp.async ring: 1 loads then computes; 2 and 3 keep the next
 *             tiles' copies in flight while one is used (more shared memory).
 * Compile-time: the storage type, and simt: dims per thread (rounded up to a power of two, so a
 * few modules serve every shape) and the elements per vector access (16, 8 or 4 bytes, or one
 * element, as dh allows); mma: the head dim and tiles_per_warp. Everything else is an argument:
 * one module per (dtype, dims per thread, access width) or (dh, tiles_per_warp). Scratch
 * (splits > 1): the partial o (R * splits * Hkv * M * dh floats) and lse.
 *
 * ---- attention.kvproj: exposed parameters, and why ----
 *   gemm      how the 2 * D projections run as cuBLASLt GEMMs (CPU GEMMs under the emulator).
 *             per_layer: 2 * D GEMMs of N x KVD x H, each written straight into its layer's k or
 *             v. batched: one strided-batched GEMM for K and one for V over the D layers (the
 *             shared context of DFlash is the A operand of every batch with stride 0): two
 *             launches instead of 2 * D, which matters at decode-sized N. wide (Dc = 1 only):
 *             K of all layers as one GEMM of N x D*KVD (w_k is already [D*KVD, H]), V likewise:
 *             the shared context is read twice, not 2 * D times, and the GEMM is D times wider;
 *             its output is [N, D, KVD], so it lands in scratch and the epilogue moves each
 *             layer's block to k or v (v by a copy kernel).
 *   epilogue  k_norm + RoPE. cuBLASLt has no per-head RMSNorm or rotary epilogue, so the GEMM
 *             cannot do them; "fused" here means what can be fused around it:
 *             split: the GEMM writes u = c w_k^T as fp32 scratch, one kernel normalises it in
 *               place, a second applies RoPE into k (two more passes over D*N*KVD floats);
 *             fused: the GEMM writes fp32 scratch, one kernel does norm + RoPE into k;
 *             inplace: the GEMM writes u in the storage type straight into k (no scratch, no
 *               fp32 round trip; u is rounded to bf16 once more before the norm with bf16) and
 *               one kernel does norm + RoPE in place. (wide + inplace: the GEMM's output is not
 *               in k's layout, so wide always goes through scratch: not a separate config.)
 *   algo      the cuBLASLt algorithm of every GEMM of the call (rank among its heuristic's
 *             candidates); the emulator's CPU GEMM ignores it.
 *   warps     warps per block of the norm/RoPE kernels (one warp per head row of dh).
 * RoPE's frequencies (plain, llama3 or yarn: kernels/attention/rope.c) are made on the host and
 * reach the kernels as dh/2 doubles in a device table (ft_cuda_table: copied once per distinct
 * table, not per run) with YaRN's scale as an argument, so no scaling needs its own module.
 * One module per storage type. Scratch: u (D * N * KVD floats) unless epilogue=inplace, and for
 * wide the V block (N * D * KVD in the storage type).
 * Backward (backward=1): the forward with epilogue=fused keeps u in fp32 scratch; one kernel turns
 * dk into du (RoPE's transpose, the RMSNorm Jacobian; du in the storage type, scratch slot 2) and
 * leaves dy * xh in u for a second, which sums dgk. Then the GEMMs by the same `gemm` choice
 * (wide, whose output layout is the forward's only, runs them per layer): dc = du w_k + dv w_v
 * (NN; a shared context accumulates the layers with beta 1, so per layer), dw_k = du^T c and
 * dw_v = dv^T c (TN; batched with c's stride 0 when shared). Four GEMMs of the forward's size.
 *
 * ---- adding a tunable: three places ----
 *   1. a row of the op's parameter table (DEC_PARAMS / KV_PARAMS): index, name, the -D macro it is
 *      compiled in with (NULL here: these modules' macros follow from several parameters, in
 *      dec_spec / kv_spec), labels, default, help and values;
 *   2. its validity rule: a check function and its row in DEC_RULES / KV_RULES with the line
 *      `flaretune space` shows, side by side;
 *   3. its use: in the kernel (attention_decode.cu, kvproj.cu) or cfg->v[index] on the host.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attention/attention.h"
#include "cuda/backend/cuda_backend.h"

static int64_t cdiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

/* ==== attention.decode ====================================================================== */

enum { DEC_PATH_SIMT, DEC_PATH_MMA };
enum { DEC_DEF_WARPS = 4, DEC_DEF_TPW = 1 }; /* defaults of what a path does not use */

static const char *const dec_path_labels[] = {"simt", "mma"};
/* splits: a named parameter (its values are 0..n-1, as every named one's), each the index of a
 * count in dec_split_counts; 0, auto, resolves against the device's SMs (dec_splits). */
static const char *const dec_split_labels[] = {"auto", "1", "2", "4", "8"};
static const int dec_split_counts[] = {0, 1, 2, 4, 8};

/* The tunables: X(index, name, -D macro or NULL, labels, default, help, values...). The
 * module's macros follow from the path (dec_spec), so none is passed as it is. */
#define DEC_PARAMS(X)                                                                              \
    X(DEC_P_PATH, "path", NULL, dec_path_labels, DEC_PATH_SIMT,                                    \
      "simt: CUDA cores (f32/bf16, any dh); mma: tensor cores, mma.sync m16n8k16 (bf16, dh a "     \
      "multiple of 16)",                                                                           \
      DEC_PATH_SIMT, DEC_PATH_MMA)                                                                 \
    X(DEC_P_KT, "keys_per_tile", NULL, NULL, 32,                                                   \
      "keys per K/V tile staged in shared memory (one copy batch, two barriers)", 32, 64, 128)     \
    X(DEC_P_SPLITS, "splits", NULL, dec_split_labels, 0,                                           \
      "CTAs per (request, kv head) along the keys, merged by log-sum-exp; auto: two CTAs per SM, " \
      "at most one split per two tiles",                                                           \
      0, 1, 2, 3, 4)                                                                               \
    X(DEC_P_WARPS, "warps", NULL, NULL, DEC_DEF_WARPS,                                             \
      "simt: warps per CTA over the M = B*G packed query rows (more warps: fewer dims per "        \
      "thread, more shuffles per score)",                                                          \
      2, 4, 8)                                                                                     \
    X(DEC_P_TPW, "tiles_per_warp", NULL, NULL, DEC_DEF_TPW,                                        \
      "mma: 16-row tiles per warp (two share each K/V fragment; dh <= 64)", 1, 2)                  \
    X(DEC_P_STAGES, "stages", NULL, NULL, 2,                                                       \
      "K/V tiles in the cp.async ring (1: load then compute; 2, 3: prefetch)", 1, 2, 3)

enum { DEC_PARAMS(FT_CUDA_PARAM_INDEX) DEC_NPARAMS };
static ft_param dec_params[] = {DEC_PARAMS(FT_CUDA_PARAM_ENTRY)};

#define DEC_SRC   "attention/attention_decode.cu"
#define DEC_KSTEP 16  /* keys per online-softmax step (KSTEP in the kernel) */
#define DEC_MAXT  256 /* threads per CTA, at most (MAXT in the kernel) */

typedef struct dec_geom {
    int64_t R, B, Hq, Hkv, dh, G, M, Lsum, maxkeys;
    int64_t win; /* sliding window (0: full attention) */
    int path, kt, splits, warps, tpw, stages;
    int tpr, dpt, dvec;  /* simt */
    int ld, gran, esize; /* staged row stride (elements), copy unit (bytes) */
    size_t smem;
} dec_geom;

static int pow2_at_least(int64_t v) {
    int p = 1;
    while (p < v)
        p <<= 1;
    return p;
}

static void dec_geom_of(const ft_call *c, const ft_config *cfg, dec_geom *g) {
    const int64_t *d = c->dim;
    g->R = d[DC_R];
    g->B = d[DC_B];
    g->Hq = d[DC_HQ];
    g->Hkv = d[DC_HKV];
    g->dh = d[DC_DH];
    g->G = g->Hkv ? g->Hq / g->Hkv : 1;
    g->M = g->B * g->G;
    g->Lsum = d[DC_LSUM];
    g->win = c->attrs.window;
    /* The longest request's keys: from ctx_lens when the call has them, else a bound. Under a
     * window a request's keys start at query 0's window: at most W - 1 context keys. */
    int64_t mx = g->Lsum;
    if (c->t[DC_LENS] && c->t[DC_LENS]->data && g->R > 0) {
        const int32_t *lens = c->t[DC_LENS]->data;
        mx = 0;
        for (int64_t r = 0; r < g->R; r++)
            if (lens[r] > mx) mx = lens[r];
    }
    if (g->win > 0 && mx > g->win - 1) mx = g->win - 1;
    g->maxkeys = mx + g->B;
    g->path = cfg->v[DEC_P_PATH];
    g->kt = cfg->v[DEC_P_KT];
    g->splits = dec_split_counts[cfg->v[DEC_P_SPLITS]];
    g->warps = cfg->v[DEC_P_WARPS];
    g->tpw = cfg->v[DEC_P_TPW];
    g->stages = cfg->v[DEC_P_STAGES];
    g->esize = (int)ft_dt_size(ft_cuda_call_dt(c));
    int64_t rowb = g->dh * g->esize;
    g->gran = rowb % 16 == 0 ? 16 : rowb % 8 == 0 ? 8 : rowb % 4 == 0 ? 4 : 0;
    if (g->path == DEC_PATH_MMA) {
        g->warps = (int)cdiv(cdiv(g->M, 16), g->tpw);
        g->ld = (int)g->dh + 8; /* 16 bytes of padding: conflict-free ldmatrix rows */
        g->tpr = 1;
        g->dpt = 1;
        g->dvec = 1;
    } else {
        int per = 16 / g->esize;
        g->ld = (int)(cdiv(g->dh, per) * per);
        int tpr = 32;
        while (tpr > 1 && (int64_t)g->warps * 32 / tpr < g->M)
            tpr >>= 1;
        g->tpr = tpr;
        g->dpt = pow2_at_least(cdiv(g->dh, tpr));
        /* Elements per access of q, the staged K/V rows and o: the widest of 16, 8 or 4 bytes
         * whose chunks each lie wholly inside dh or wholly past it (dh and dpt multiples of it),
         * so every chunk is aligned (q, o rows start at multiples of dh, staged rows at
         * multiples of 16 bytes) and a thread's chunks past dh are skipped whole. */
        g->dvec = 1;
        for (int v = 16 / g->esize; v > 1 && g->dvec == 1; v >>= 1)
            if (g->dh % v == 0 && g->dpt % v == 0) g->dvec = v;
    }
    g->smem = (size_t)2 * g->stages * g->kt * g->ld * g->esize;
    if (g->path == DEC_PATH_MMA) g->smem += (size_t)g->warps * g->tpw * 16 * g->ld * 2;
}

/* The splits a config runs with (auto resolved against the device's SMs). */
static int dec_splits(const dec_geom *g, int sm_count) {
    if (g->splits > 0) return g->splits;
    int64_t ctas = g->R * g->Hkv, s = ctas > 0 ? cdiv(2 * (int64_t)sm_count, ctas) : 1;
    int64_t cap = g->maxkeys / (2 * g->kt);
    if (s > cap) s = cap;
    if (s > 16) s = 16;
    return s < 1 ? 1 : (int)s;
}

/* ---- validity: one check per rule, then the rules in order with their lines ---- */

typedef struct dec_check {
    const ft_call *c;
    const ft_config *cfg;
    dec_geom g;
} dec_check;

/* Say why (printf-style) and rule the config out. */
#define DEC_NO(...)                                                                                \
    do {                                                                                           \
        if (why) snprintf(why, n, __VA_ARGS__);                                                    \
        return FT_CONFIG_INVALID;                                                                  \
    } while (0)

static int dec_check_mma(const void *ctx, char *why, size_t n) {
    const dec_check *v = ctx;
    if (v->g.path != DEC_PATH_MMA) return FT_CONFIG_VALID;
    if (ft_cuda_call_dt(v->c) != FT_DT_BF16)
        DEC_NO("path=mma needs bf16 storage (the tensor cores take bf16 operands)");
    if (v->g.dh % 16 || v->g.dh > 256) DEC_NO("path=mma needs dh a multiple of 16, at most 256");
    if (v->cfg->v[DEC_P_WARPS] != DEC_DEF_WARPS)
        DEC_NO("warps: simt only (mma: warps follow from tiles_per_warp)");
    return FT_CONFIG_VALID;
}

/* With path=mma the warps follow from tpw: their bound is checked after tpw's own. */
static int dec_check_tpw(const void *ctx, char *why, size_t n) {
    const dec_geom *g = &((const dec_check *)ctx)->g;
    if (g->path != DEC_PATH_MMA) {
        if (g->tpw != DEC_DEF_TPW) DEC_NO("tiles_per_warp: mma only");
        return FT_CONFIG_VALID;
    }
    if (g->tpw == 2 && g->dh > 64)
        DEC_NO("tiles_per_warp=2 needs dh <= 64 (two tiles' accumulators at dh=%lld would spill)",
               (long long)g->dh);
    if (g->tpw == 2 && cdiv(g->M, 16) < 2)
        DEC_NO("tiles_per_warp=2 needs at least two 16-row tiles");
    if ((int64_t)g->warps * 32 > DEC_MAXT)
        DEC_NO("%d warps (M=%lld rows, tiles_per_warp=%d) is more than %d threads", g->warps,
               (long long)g->M, g->tpw, DEC_MAXT);
    return FT_CONFIG_VALID;
}

static int dec_check_simt(const void *ctx, char *why, size_t n) {
    const dec_geom *g = &((const dec_check *)ctx)->g;
    if (g->path == DEC_PATH_MMA) return FT_CONFIG_VALID;
    if ((int64_t)g->warps * 32 < g->M)
        DEC_NO("warps=%d gives %d row slots for M=%lld rows", g->warps, g->warps * 32,
               (long long)g->M);
    if (g->dpt > 32)
        DEC_NO("%d dims of q and o per thread (dh=%lld over %d threads per row): over 32 "
               "spills (and takes NVRTC minutes)",
               g->dpt, (long long)g->dh, g->tpr);
    return FT_CONFIG_VALID;
}

static int dec_check_kt(const void *ctx, char *why, size_t n) {
    const dec_geom *g = &((const dec_check *)ctx)->g;
    if (g->kt > 32 && g->kt / 2 >= g->maxkeys)
        return ft_config_why(
            FT_CONFIG_DUPLICATE, why, n,
            "keys_per_tile=%d: the longest request has %lld keys (keys_per_tile=%d holds them)",
            g->kt, (long long)g->maxkeys, g->kt / 2);
    return FT_CONFIG_VALID;
}

static int dec_check_splits(const void *ctx, char *why, size_t n) {
    const dec_geom *g = &((const dec_check *)ctx)->g;
    if (g->splits > 1 && (int64_t)g->splits * DEC_KSTEP > g->maxkeys)
        DEC_NO("splits=%d: the longest request has %lld keys (fewer than %d per split)", g->splits,
               (long long)g->maxkeys, DEC_KSTEP);
    return FT_CONFIG_VALID;
}

static int dec_check_smem(const void *ctx, char *why, size_t n) {
    const dec_geom *g = &((const dec_check *)ctx)->g;
    if (g->smem > FT_CUDA_MAX_SMEM)
        DEC_NO("needs %zu bytes of shared memory per block (at most %d)", g->smem,
               FT_CUDA_MAX_SMEM);
    return FT_CONFIG_VALID;
}
#undef DEC_NO

/* The rules, in the order they are checked: X(check, the line `flaretune space` shows). */
#define DEC_RULES(X)                                                                               \
    X(dec_check_mma, "path=mma: bf16 storage, dh a multiple of 16 (at most 256), warps at its "    \
                     "default (the mma path has ceil(M/16/tiles_per_warp) warps, at most 8)")      \
    X(dec_check_tpw,                                                                               \
      "tiles_per_warp: mma only (simt keeps 1); tiles_per_warp=2 needs dh <= 64 and at least two " \
      "16-row tiles")                                                                              \
    X(dec_check_simt, "simt: warps*32 >= M = B*(Hq/Hkv) row slots; dims per thread (dh over the "  \
                      "threads per row, rounded up to a power of two) <= 32")                      \
    X(dec_check_kt, "keys_per_tile > 32 only when keys_per_tile/2 is shorter than the longest "    \
                    "request's keys (L_r + B)")                                                    \
    X(dec_check_splits, "splits > 1 only when the longest request has at least 16 keys per split") \
    X(dec_check_smem,                                                                              \
      "shared memory per block <= 227 KiB (2*stages*keys_per_tile rows of K/V, mma: + the Q "      \
      "tile)")

FT_CUDA_RULES(dec, DEC_RULES);

static int dec_valid(const ft_call *c, const ft_config *cfg, char *why, size_t n) {
    dec_check v = {.c = c, .cfg = cfg};
    dec_geom_of(c, cfg, &v.g);
    return FT_CUDA_RULES_CHECK(dec, &v, why, n);
}

/* The launchers of attention_decode.cu's kernels. decode_simt and decode_mma take the same
 * arguments. */
#define DEC_KERNEL_PARAMS                                                                          \
    (const void *q, const int *lens, const void *k_ctx, const void *v_ctx, const void *k_blk,      \
     const void *v_blk, void *o, void *lse, float *po, float *plse, int B, int Hq, int Hkv,        \
     int dh, int KT, int stages, int ld, int gran, int tpr, float scale, int win, int causal)
#define DEC_KERNEL_ADDRS                                                                           \
    (&q, &lens, &k_ctx, &v_ctx, &k_blk, &v_blk, &o, &lse, &po, &plse, &B, &Hq, &Hkv, &dh, &KT,     \
     &stages, &ld, &gran, &tpr, &scale, &win, &causal)
FT_CUDA_KERNEL(decode_simt, DEC_KERNEL_PARAMS, DEC_KERNEL_ADDRS)
FT_CUDA_KERNEL(decode_mma, DEC_KERNEL_PARAMS, DEC_KERNEL_ADDRS)
FT_CUDA_KERNEL(decode_merge,
               (const float *po, const float *plse, void *o, void *lse, int R, int B, int Hq,
                int Hkv, int dh, int splits),
               (&po, &plse, &o, &lse, &R, &B, &Hq, &Hkv, &dh, &splits))

static const char *dec_kernel(const dec_geom *g) {
    return g->path == DEC_PATH_MMA ? FT_CUDA_KERNEL_NAME(decode_mma)
                                   : FT_CUDA_KERNEL_NAME(decode_simt);
}

static void dec_spec(ft_dt dt, const dec_geom *g, ft_cuda_module_spec *s) {
    memset(s, 0, sizeof *s);
    s->source = DEC_SRC;
    ft_cuda_spec_define(s, "FT_BF16=%d", dt == FT_DT_BF16 ? 1 : 0);
    ft_cuda_spec_define(s, "FT_MMA=%d", g->path == DEC_PATH_MMA);
    if (g->path == DEC_PATH_MMA) {
        ft_cuda_spec_define(s, "FT_DH=%lld", (long long)g->dh);
        ft_cuda_spec_define(s, "FT_TPW=%d", g->tpw);
    } else {
        ft_cuda_spec_define(s, "FT_DPT=%d", g->dpt);
        ft_cuda_spec_define(s, "FT_DVEC=%d", g->dvec);
    }
    ft_cuda_spec_kernel(s, dec_kernel(g), g->warps * 32, g->smem);
    if (g->splits != 1) ft_cuda_spec_kernel(s, FT_CUDA_KERNEL_NAME(decode_merge), 128, 0);
}

static int dec_modules(const ft_call *c, ft_dt dt, const ft_config *cfg, ft_cuda_module_spec *out,
                       int max) {
    if (max < 1) return 0;
    dec_geom g;
    dec_geom_of(c, cfg, &g);
    dec_spec(dt, &g, &out[0]);
    return 1;
}

static ft_status dec_run(ft_cuda_ctx *x, const ft_cuda_call *call, const ft_config *cfg,
                         ft_err *err) {
    const ft_call *c = call->c;
    dec_geom g;
    dec_geom_of(c, cfg, &g);
    if (g.R == 0 || g.B == 0 || g.Hq == 0) return FT_OK;
    ft_cuda_module_spec spec;
    dec_spec(call->dt, &g, &spec);
    ft_dev_module *m;
    ft_status s = ft_cuda_module(x, &spec, &m, err);
    if (s) return s;

    int splits = dec_splits(&g, ft_dev_props_of(ft_cuda_dev(x))->sm_count);
    void *po = NULL, *plse = NULL;
    if (splits > 1) {
        size_t rows = (size_t)(g.R * splits * g.Hkv * g.M);
        if ((s = ft_cuda_scratch(x, 0, rows * (size_t)g.dh * sizeof(float), &po, err)) ||
            (s = ft_cuda_scratch(x, 1, rows * sizeof(float), &plse, err)))
            return s;
    }
    void *const *d = call->d;
    int B = (int)g.B, Hq = (int)g.Hq, Hkv = (int)g.Hkv, dh = (int)g.dh, win = (int)g.win;
    int causal = c->attrs.causal;
    float scale = (float)ft_attn_scale(&c->attrs, g.dh);
    __typeof__(launch_decode_simt) *decode =
        g.path == DEC_PATH_MMA ? launch_decode_mma : launch_decode_simt;
    ft_dim3 grid = {(unsigned)splits, (unsigned)g.Hkv, (unsigned)g.R};
    if ((s = decode(x, m, grid, (ft_dim3){(unsigned)g.warps * 32, 1, 1}, g.smem, d[DC_Q],
                    d[DC_LENS], d[DC_KCTX], d[DC_VCTX], d[DC_KBLK], d[DC_VBLK], d[DC_O], d[DC_LSE],
                    po, plse, B, Hq, Hkv, dh, g.kt, g.stages, g.ld, g.gran, g.tpr, scale, win,
                    causal, err)))
        return s;
    if (splits == 1) return FT_OK;
    return launch_decode_merge(x, m, (ft_dim3){(unsigned)cdiv(g.R * g.B * g.Hq, 4), 1, 1},
                               (ft_dim3){128, 1, 1}, 0, po, plse, d[DC_O], d[DC_LSE], (int)g.R, B,
                               Hq, Hkv, dh, splits, err);
}

static ft_space dec_space = {dec_params, DEC_NPARAMS, dec_constraints, dec_valid};

const ft_cuda_op ft_cuda_attention_decode = {&dec_space, dec_modules, dec_run};

/* ==== attention.kvproj ====================================================================== */

/* Values of the parameters (KV_*; KP_* in attention.h: the op's sizes and tensors). */
enum { KV_GEMM_PER_LAYER, KV_GEMM_BATCHED, KV_GEMM_WIDE };
enum { KV_EPI_SPLIT, KV_EPI_FUSED, KV_EPI_INPLACE };

static const char *const kv_gemm_labels[] = {"per_layer", "batched", "wide"};
static const char *const kv_epi_labels[] = {"split", "fused", "inplace"};

/* The tunables: X(index, name, -D macro or NULL, labels, default, help, values...). */
#define KV_PARAMS(X)                                                                               \
    X(KV_P_GEMM, "gemm", NULL, kv_gemm_labels, KV_GEMM_PER_LAYER,                                  \
      "per_layer: 2*D GEMMs into k and v; batched: one strided-batched GEMM each for K and V; "    \
      "wide (Dc = 1): one GEMM of D*KVD columns each, through scratch",                            \
      KV_GEMM_PER_LAYER, KV_GEMM_BATCHED, KV_GEMM_WIDE)                                            \
    X(KV_P_EPI, "epilogue", NULL, kv_epi_labels, KV_EPI_FUSED,                                     \
      "k_norm + RoPE (cuBLASLt has no such epilogue): split: fp32 u, a norm pass and a RoPE "      \
      "pass; fused: fp32 u, one pass; inplace: u written into k by the GEMM, one pass in place",   \
      KV_EPI_SPLIT, KV_EPI_FUSED, KV_EPI_INPLACE)                                                  \
    X(KV_P_ALGO, "algo", NULL, NULL, 0,                                                            \
      "cuBLASLt algorithm of every GEMM of the call, by rank among its heuristic's candidates "    \
      "(0: its first choice)",                                                                     \
      0, 1, 2, 3)                                                                                  \
    X(KV_P_WARPS, "warps", NULL, NULL, 4,                                                          \
      "warps per block of the epilogue kernels (one warp per head row)", 2, 4, 8)

enum { KV_PARAMS(FT_CUDA_PARAM_INDEX) KV_NPARAMS };
static ft_param kv_params[] = {KV_PARAMS(FT_CUDA_PARAM_ENTRY)};

#define KV_SRC "attention/kvproj.cu"

typedef struct kv_geom {
    int64_t Dc, D, N, H, Hkv, dh, KVD;
    int gemm, epi, algo, warps;
    int bwd; /* the call runs the backward */
} kv_geom;

static void kv_geom_of(const ft_call *c, const ft_config *cfg, kv_geom *g) {
    const int64_t *d = c->dim;
    g->Dc = d[KP_DC];
    g->D = d[KP_D];
    g->N = d[KP_N];
    g->H = d[KP_H];
    g->Hkv = d[KP_HKV];
    g->dh = d[KP_DH];
    g->KVD = d[KP_KVD];
    g->gemm = cfg->v[KV_P_GEMM];
    g->epi = cfg->v[KV_P_EPI];
    g->algo = cfg->v[KV_P_ALGO];
    g->warps = cfg->v[KV_P_WARPS];
    g->bwd = c->backward;
}

/* ---- validity: one check per rule, then the rules in order with their lines ---- */

static int kv_check_wide(const void *ctx, char *why, size_t n) {
    const kv_geom *g = ctx;
    if (g->gemm == KV_GEMM_WIDE && g->Dc != 1)
        return ft_config_why(FT_CONFIG_INVALID, why, n,
                             "gemm=wide needs one shared context (Dc = 1, DFlash); Dc = %lld",
                             (long long)g->Dc);
    if (g->gemm == KV_GEMM_WIDE && g->epi == KV_EPI_INPLACE)
        return ft_config_why(
            FT_CONFIG_INVALID, why, n,
            "gemm=wide writes [N, D, KVD] scratch, not k's layout: no in-place epilogue");
    return FT_CONFIG_VALID;
}

static int kv_check_bwd(const void *ctx, char *why, size_t n) {
    const kv_geom *g = ctx;
    if (g->bwd && g->epi != KV_EPI_FUSED)
        return ft_config_why(
            FT_CONFIG_INVALID, why, n,
            "backward=1 reads u after the forward: epilogue=fused keeps it (split and "
            "inplace overwrite it)");
    return FT_CONFIG_VALID;
}

static int kv_check_batched(const void *ctx, char *why, size_t n) {
    const kv_geom *g = ctx;
    if (g->gemm == KV_GEMM_BATCHED && g->D < 2)
        return ft_config_why(FT_CONFIG_DUPLICATE, why, n,
                             "gemm=batched with one layer is gemm=per_layer");
    return FT_CONFIG_VALID;
}

/* The rules, in the order they are checked: X(check or NULL, the line `flaretune space`
 * shows). */
#define KV_RULES(X)                                                                                \
    X(kv_check_wide, "gemm=wide: Dc = 1 (a shared context), and not with epilogue=inplace (its "   \
                     "output is not in k's layout)")                                               \
    X(kv_check_batched, "gemm=batched: D > 1")                                                     \
    X(kv_check_bwd, "backward=1: epilogue=fused (the backward reads the fp32 u it keeps)")         \
    X(NULL, "algo must exist among cuBLASLt's candidates for the GEMM (checked when it runs on "   \
            "the GPU)")

FT_CUDA_RULES(kv, KV_RULES);

static int kv_valid(const ft_call *c, const ft_config *cfg, char *why, size_t n) {
    kv_geom g;
    kv_geom_of(c, cfg, &g);
    return FT_CUDA_RULES_CHECK(kv, &g, why, n);
}

/* The launchers of kvproj.cu's kernels. */
FT_CUDA_KERNEL(kv_norm,
               (float *u, const void *gk, const int *pos, int D, int N, int Hkv, int dh,
                int src_wide, float eps),
               (&u, &gk, &pos, &D, &N, &Hkv, &dh, &src_wide, &eps))
/* kv_rope and kv_normrope take the same arguments. */
#define KV_ROPE_KERNEL_PARAMS                                                                      \
    (const float *u, void *k, const void *gk, const int *pos, int D, int N, int Hkv, int dh,       \
     int src_wide, float eps, const double *inv_freq, float mscale)
#define KV_ROPE_KERNEL_ADDRS                                                                       \
    (&u, &k, &gk, &pos, &D, &N, &Hkv, &dh, &src_wide, &eps, &inv_freq, &mscale)
FT_CUDA_KERNEL(kv_rope, KV_ROPE_KERNEL_PARAMS, KV_ROPE_KERNEL_ADDRS)
FT_CUDA_KERNEL(kv_normrope, KV_ROPE_KERNEL_PARAMS, KV_ROPE_KERNEL_ADDRS)
FT_CUDA_KERNEL(kv_normrope_ip,
               (void *k, const void *gk, const int *pos, int D, int N, int Hkv, int dh, float eps,
                const double *inv_freq, float mscale),
               (&k, &gk, &pos, &D, &N, &Hkv, &dh, &eps, &inv_freq, &mscale))
FT_CUDA_KERNEL(kv_vcopy, (const void *w, void *v, int D, int N, int KVD), (&w, &v, &D, &N, &KVD))
FT_CUDA_KERNEL(kv_normrope_bwd,
               (float *u, const void *dk, void *du, const void *gk, const int *pos,
                const double *inv_freq, float mscale, int D, int N, int Hkv, int dh, int src_wide,
                float eps),
               (&u, &dk, &du, &gk, &pos, &inv_freq, &mscale, &D, &N, &Hkv, &dh, &src_wide, &eps))
FT_CUDA_KERNEL(kv_dgk, (const float *prod, void *dgk, int D, int N, int Hkv, int dh, int src_wide),
               (&prod, &dgk, &D, &N, &Hkv, &dh, &src_wide))

static void kv_spec(ft_dt dt, const kv_geom *g, ft_cuda_module_spec *s) {
    memset(s, 0, sizeof *s);
    s->source = KV_SRC;
    ft_cuda_spec_define(s, "FT_BF16=%d", dt == FT_DT_BF16 ? 1 : 0);
    int t = g->warps * 32;
    if (g->epi == KV_EPI_SPLIT) {
        ft_cuda_spec_kernel(s, FT_CUDA_KERNEL_NAME(kv_norm), t, 0);
        ft_cuda_spec_kernel(s, FT_CUDA_KERNEL_NAME(kv_rope), t, 0);
    } else {
        ft_cuda_spec_kernel(s,
                            g->epi == KV_EPI_FUSED ? FT_CUDA_KERNEL_NAME(kv_normrope)
                                                   : FT_CUDA_KERNEL_NAME(kv_normrope_ip),
                            t, 0);
    }
    if (g->gemm == KV_GEMM_WIDE) ft_cuda_spec_kernel(s, FT_CUDA_KERNEL_NAME(kv_vcopy), 256, 0);
    if (g->bwd) {
        ft_cuda_spec_kernel(s, FT_CUDA_KERNEL_NAME(kv_normrope_bwd), t, 0);
        ft_cuda_spec_kernel(s, FT_CUDA_KERNEL_NAME(kv_dgk), 256, 0);
    }
}

static int kv_modules(const ft_call *c, ft_dt dt, const ft_config *cfg, ft_cuda_module_spec *out,
                      int max) {
    if (max < 1) return 0;
    kv_geom g;
    kv_geom_of(c, cfg, &g);
    kv_spec(dt, &g, &out[0]);
    return 1;
}

/* d once per layer: one batched GEMM when gemm=batched, else a GEMM per layer; layer i's A, B
 * and C start i * sa, sb and sc elements in (a stride 0 shares the operand). */
static ft_status kv_gemm_layers(ft_cuda_ctx *x, const kv_geom *g, ft_gemm_desc *d, const void *A,
                                int64_t sa, const void *B, int64_t sb, void *C, int64_t sc,
                                ft_err *err) {
    if (g->gemm == KV_GEMM_BATCHED) {
        d->batch = g->D;
        d->stride_a = sa;
        d->stride_b = sb;
        d->stride_c = sc;
        return ft_cuda_gemm(x, d, A, B, C, g->algo, err);
    }
    const size_t ab = ft_dt_size(d->ab), cs = ft_dt_size(d->c);
    for (int64_t i = 0; i < g->D; i++) {
        ft_status s = ft_cuda_gemm(x, d, (const char *)A + (size_t)(i * sa) * ab,
                                   (const char *)B + (size_t)(i * sb) * ab,
                                   (char *)C + (size_t)(i * sc) * cs, g->algo, err);
        if (s) return s;
    }
    return FT_OK;
}

/* One projection (K or V): per-layer GEMMs, one batched GEMM, or one wide GEMM into C with
 * row stride ldc (and per-layer stride sc); ct is C's type. */
static ft_status kv_gemm(ft_cuda_ctx *x, const kv_geom *g, ft_dt dt, const void *cd, const void *w,
                         void *C, ft_dt ct, ft_err *err) {
    ft_gemm_desc d = ft_gemm_one(0, 1, g->N, g->KVD, g->H, g->H, g->H, dt, ct, 0.0f);
    if (g->gemm == KV_GEMM_WIDE) {
        d.N = g->D * g->KVD;
        d.ldc = g->D * g->KVD;
        return ft_cuda_gemm(x, &d, cd, w, C, g->algo, err);
    }
    return kv_gemm_layers(x, g, &d, cd, g->Dc > 1 ? g->N * g->H : 0, w, g->KVD * g->H, C,
                          g->N * g->KVD, err);
}

/* RoPE's frequencies for the call (rope.c), as dh/2 doubles on the device, and its scale. The
 * device copy is the context's table of those exact numbers: a call run again (timed, or in a
 * captured sequence) copies nothing, since a copy from the host would wait for the stream. */
static ft_status kv_freqs(ft_cuda_ctx *x, const ft_call *c, const double **inv_freq, float *mscale,
                          ft_err *err) {
    const int64_t half = c->dim[KP_DH] / 2;
    double *host = malloc((size_t)(half > 0 ? half : 1) * sizeof(double)), ms;
    if (!host) return ft_err_set(err, FT_ENOMEM, "attention.kvproj: out of memory for RoPE");
    ft_rope_freqs(&c->attrs, c->dim[KP_DH], host, &ms);
    const void *d = NULL;
    ft_status s = ft_cuda_table(x, host, (size_t)half * sizeof(double), &d, err);
    free(host);
    *inv_freq = d;
    *mscale = (float)ms;
    return s;
}

/* ---- backward: the norm + RoPE backward kernel, then the GEMMs ---- */

/* dc (+)= A_i @ W_i over the layers (A: du or dv, [D, N, KVD]; W: [D, KVD, H]), beta 0 on the
 * first product into each dc block: batched when Dc = D and gemm=batched, else per layer (a
 * shared dc sums the layers, which one batched GEMM cannot write). */
static ft_status kv_bwd_dc(ft_cuda_ctx *x, const kv_geom *g, ft_dt dt, const void *A, const void *W,
                           void *dc, int first, ft_err *err) {
    const size_t es = ft_dt_size(dt);
    ft_gemm_desc d = ft_gemm_one(0, 0, g->N, g->H, g->KVD, g->KVD, g->H, dt, dt, 0.0f);
    if (g->gemm == KV_GEMM_BATCHED && g->Dc > 1) {
        d.beta = first ? 0.0f : 1.0f;
        d.batch = g->D;
        d.stride_a = g->N * g->KVD;
        d.stride_b = g->KVD * g->H;
        d.stride_c = g->N * g->H;
        return ft_cuda_gemm(x, &d, A, W, dc, g->algo, err);
    }
    for (int64_t i = 0; i < g->D; i++) {
        d.beta = first && (g->Dc > 1 || i == 0) ? 0.0f : 1.0f;
        ft_status s = ft_cuda_gemm(x, &d, (const char *)A + (size_t)(i * g->N * g->KVD) * es,
                                   (const char *)W + (size_t)(i * g->KVD * g->H) * es,
                                   (char *)dc + (size_t)((g->Dc > 1 ? i : 0) * g->N * g->H) * es,
                                   g->algo, err);
        if (s) return s;
    }
    return FT_OK;
}

/* dW_i = A_i^T @ c_i ([KVD, H]); one batched GEMM (c's stride 0 when shared) or per layer. */
static ft_status kv_bwd_dw(ft_cuda_ctx *x, const kv_geom *g, ft_dt dt, const void *A,
                           const void *cd, void *dw, ft_err *err) {
    ft_gemm_desc d = ft_gemm_one(1, 0, g->KVD, g->H, g->N, g->KVD, g->H, dt, dt, 0.0f);
    return kv_gemm_layers(x, g, &d, A, g->N * g->KVD, cd, g->Dc > 1 ? g->N * g->H : 0, dw,
                          g->KVD * g->H, err);
}

/* The backward, after the forward left the fp32 u in scratch slot 0, with the forward's RoPE
 * frequencies (the context's device table, kv_freqs: nothing copied per run). */
static ft_status kv_backward(ft_cuda_ctx *x, const ft_cuda_call *call, const kv_geom *g,
                             ft_dev_module *m, void *u, const double *freq_d, float mscale,
                             ft_err *err) {
    const ft_call *c = call->c;
    const ft_dt dt = call->dt;
    void *du;
    ft_status s;
    if ((s = ft_cuda_scratch(x, 2, (size_t)(g->D * g->N * g->KVD) * ft_dt_size(dt), &du, err)))
        return s;
    int D = (int)g->D, N = (int)g->N, Hkv = (int)g->Hkv, dh = (int)g->dh;
    int wide = g->gemm == KV_GEMM_WIDE;
    ft_dim3 grid = {(unsigned)cdiv(g->D * g->N * g->Hkv, g->warps), 1, 1},
            block = {(unsigned)g->warps * 32, 1, 1};
    if ((s = launch_kv_normrope_bwd(x, m, grid, block, 0, u, call->d[KP_DK], du, call->d[KP_GK],
                                    call->d[KP_POS], freq_d, mscale, D, N, Hkv, dh, wide,
                                    (float)c->attrs.eps, err)))
        return s;
    if ((s = launch_kv_dgk(x, m, (ft_dim3){(unsigned)cdiv(g->D * g->dh, 256), 1, 1},
                           (ft_dim3){256, 1, 1}, 0, u, call->d[KP_DGK], D, N, Hkv, dh, wide, err)))
        return s;
    void *dc = call->d[KP_DCTX];
    if ((s = kv_bwd_dc(x, g, dt, du, call->d[KP_WK], dc, 1, err)) ||
        (s = kv_bwd_dc(x, g, dt, call->d[KP_DV], call->d[KP_WV], dc, 0, err)))
        return ft_err_wrap(err, "attention.kvproj: dc = du w_k + dv w_v");
    if ((s = kv_bwd_dw(x, g, dt, du, call->d[KP_C], call->d[KP_DWK], err)))
        return ft_err_wrap(err, "attention.kvproj: dw_k = du^T c");
    if ((s = kv_bwd_dw(x, g, dt, call->d[KP_DV], call->d[KP_C], call->d[KP_DWV], err)))
        return ft_err_wrap(err, "attention.kvproj: dw_v = dv^T c");
    return FT_OK;
}

static ft_status kv_run(ft_cuda_ctx *x, const ft_cuda_call *call, const ft_config *cfg,
                        ft_err *err) {
    const ft_call *c = call->c;
    kv_geom g;
    kv_geom_of(c, cfg, &g);
    if (g.D == 0) return FT_OK;
    if (g.N == 0) { /* no rows: the weight and gain gradients are sums over nothing */
        const size_t es = ft_dt_size(call->dt), w = (size_t)(g.D * g.KVD * g.H) * es;
        ft_dev *dev = ft_cuda_dev(x);
        ft_status s = FT_OK;
        if (g.bwd && ((s = ft_dev_memset(dev, call->d[KP_DWK], 0, w, err)) ||
                      (s = ft_dev_memset(dev, call->d[KP_DWV], 0, w, err)) ||
                      (s = ft_dev_memset(dev, call->d[KP_DGK], 0, (size_t)(g.D * g.dh) * es, err))))
            return s;
        return FT_OK;
    }
    ft_cuda_module_spec spec;
    kv_spec(call->dt, &g, &spec);
    ft_dev_module *m;
    ft_status s = ft_cuda_module(x, &spec, &m, err);
    if (s) return s;

    const ft_dt dt = call->dt;
    void *cd = call->d[KP_C], *wk = call->d[KP_WK], *wv = call->d[KP_WV], *gk = call->d[KP_GK],
         *pos = call->d[KP_POS], *kd = call->d[KP_K], *vd = call->d[KP_V];
    const size_t elems = (size_t)(g.D * g.N * g.KVD);

    /* V: straight into v, or (wide) into scratch and moved. */
    if (g.gemm == KV_GEMM_WIDE) {
        void *vw;
        if ((s = ft_cuda_scratch(x, 1, elems * ft_dt_size(dt), &vw, err))) return s;
        if ((s = kv_gemm(x, &g, dt, cd, wv, vw, dt, err)))
            return ft_err_wrap(err, "attention.kvproj: v = c w_v^T");
        if ((s = launch_kv_vcopy(x, m, (ft_dim3){(unsigned)cdiv((int64_t)elems, 256), 1, 1},
                                 (ft_dim3){256, 1, 1}, 0, vw, vd, (int)g.D, (int)g.N, (int)g.KVD,
                                 err)))
            return s;
    } else if ((s = kv_gemm(x, &g, dt, cd, wv, vd, dt, err))) {
        return ft_err_wrap(err, "attention.kvproj: v = c w_v^T");
    }

    /* K: u = c w_k^T into fp32 scratch or (inplace) into k, then the epilogue. */
    void *u = kd;
    if (g.epi != KV_EPI_INPLACE && (s = ft_cuda_scratch(x, 0, elems * sizeof(float), &u, err)))
        return s;
    if ((s = kv_gemm(x, &g, dt, cd, wk, u, g.epi == KV_EPI_INPLACE ? dt : FT_DT_F32, err)))
        return ft_err_wrap(err, "attention.kvproj: u = c w_k^T");
    int D = (int)g.D, N = (int)g.N, Hkv = (int)g.Hkv, dh = (int)g.dh, wide = g.gemm == KV_GEMM_WIDE;
    float eps = (float)c->attrs.eps, mscale = 1.0f;
    const double *inv_freq = NULL;
    if ((s = kv_freqs(x, c, &inv_freq, &mscale, err))) return s;
    ft_dim3 grid = {(unsigned)cdiv(g.D * g.N * g.Hkv, g.warps), 1, 1},
            block = {(unsigned)g.warps * 32, 1, 1};
    if (g.epi == KV_EPI_INPLACE)
        return launch_kv_normrope_ip(x, m, grid, block, 0, kd, gk, pos, D, N, Hkv, dh, eps,
                                     inv_freq, mscale, err);
    if (g.epi == KV_EPI_SPLIT &&
        (s = launch_kv_norm(x, m, grid, block, 0, u, gk, pos, D, N, Hkv, dh, wide, eps, err)))
        return s;
    __typeof__(launch_kv_rope) *rope = g.epi == KV_EPI_SPLIT ? launch_kv_rope : launch_kv_normrope;
    if ((s = rope(x, m, grid, block, 0, u, kd, gk, pos, D, N, Hkv, dh, wide, eps, inv_freq, mscale,
                  err)))
        return s;
    return g.bwd ? kv_backward(x, call, &g, m, u, inv_freq, mscale, err) : FT_OK;
}

static ft_space kv_space = {kv_params, KV_NPARAMS, kv_constraints, kv_valid};

const ft_cuda_op ft_cuda_attention_kvproj = {&kv_space, kv_modules, kv_run};
