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
 *   kt        keys per K/V tile staged in shared memory (one cp.async batch and two barriers per
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
 *             shuffles per score. (The mma path's warps follow from tpw: ceil(M / 16 / tpw).)
 *   tpw       mma: 16-row tiles per warp. Two tiles per warp share every K/V fragment loaded
 *             from shared memory (half the ldmatrix traffic) at twice the accumulator registers
 *             (dh <= 64 only: at dh = 128 two tiles would need ~190 registers and spill).
 *   stages    K/V tiles in the cp.async ring: 1 loads then computes; 2 and 3 keep the next
 *             tiles' copies in flight while one is used (more shared memory).
 * Compile-time: the storage type, and simt: dims per thread (rounded up to a power of two, so a
 * few modules serve every shape); mma: the head dim and tpw. Everything else is an argument:
 * one module per (dtype, dims per thread) or (dh, tpw).
 * Scratch (splits > 1): the partial o (R * splits * Hkv * M * dh floats) and lse.
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
 * One module per storage type. Scratch: u (D * N * KVD floats) unless epilogue=inplace, and for
 * wide the V block (N * D * KVD in the storage type).
 */
#include <stdio.h>
#include <string.h>

#include "cuda/cuda_backend.h"
#include "attention/attention.h"

#define MAX_SMEM (227 * 1024) /* the most dynamic shared memory a block may ask for */

static int64_t cdiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

/* ==== attention.decode ====================================================================== */

enum { DP_PATH, DP_KT, DP_SPLITS, DP_WARPS, DP_TPW, DP_STAGES };
enum { DPATH_SIMT, DPATH_MMA };
enum { DD_WARPS = 4, DD_TPW = 1 }; /* defaults of what a path does not use */

static const char *const dpath_labels[] = {"simt", "mma"};
/* Labels are looked up by value (0: auto); values past the table print as numbers. */
static const char *const dsplit_labels[] = {"auto", "1", "2", "3", "4"};

#define DEC_SRC   "attention/attention_decode.cu"
#define DEC_KSTEP 16  /* keys per online-softmax step (KSTEP in the kernel) */
#define DEC_MAXT  256 /* threads per CTA, at most (MAXT in the kernel) */

typedef struct dec_geom {
    int64_t R, B, Hq, Hkv, dh, G, M, Lsum, maxkeys;
    int path, kt, splits, warps, tpw, stages;
    int tpr, dpt;       /* simt */
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
    /* The longest request's keys: from ctx_lens when the call has them, else a bound. */
    g->maxkeys = g->Lsum + g->B;
    if (c->t[DC_LENS] && c->t[DC_LENS]->data && g->R > 0) {
        const int32_t *lens = c->t[DC_LENS]->data;
        int64_t mx = 0;
        for (int64_t r = 0; r < g->R; r++)
            if (lens[r] > mx) mx = lens[r];
        g->maxkeys = mx + g->B;
    }
    g->path = cfg->v[DP_PATH];
    g->kt = cfg->v[DP_KT];
    g->splits = cfg->v[DP_SPLITS];
    g->warps = cfg->v[DP_WARPS];
    g->tpw = cfg->v[DP_TPW];
    g->stages = cfg->v[DP_STAGES];
    g->esize = (int)ft_dt_size(ft_cuda_call_dt(c));
    int64_t rowb = g->dh * g->esize;
    g->gran = rowb % 16 == 0 ? 16 : rowb % 8 == 0 ? 8 : rowb % 4 == 0 ? 4 : 0;
    if (g->path == DPATH_MMA) {
        g->warps = (int)cdiv(cdiv(g->M, 16), g->tpw);
        g->ld = (int)g->dh + 8; /* 16 bytes of padding: conflict-free ldmatrix rows */
        g->tpr = 1;
        g->dpt = 1;
    } else {
        int per = 16 / g->esize;
        g->ld = (int)(cdiv(g->dh, per) * per);
        int tpr = 32;
        while (tpr > 1 && (int64_t)g->warps * 32 / tpr < g->M)
            tpr >>= 1;
        g->tpr = tpr;
        g->dpt = pow2_at_least(cdiv(g->dh, tpr));
    }
    g->smem = (size_t)2 * g->stages * g->kt * g->ld * g->esize;
    if (g->path == DPATH_MMA) g->smem += (size_t)g->warps * g->tpw * 16 * g->ld * 2;
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

static int dec_valid(const ft_call *c, const ft_config *cfg, char *why, size_t n) {
    int dup = 0;
    dec_geom g;
    dec_geom_of(c, cfg, &g);
    int bf16 = ft_cuda_call_dt(c) == FT_DT_BF16;
#define NO(...)                                                                                    \
    do {                                                                                           \
        if (why) snprintf(why, n, __VA_ARGS__);                                                    \
        return 0;                                                                                  \
    } while (0)
    if (g.path == DPATH_MMA) {
        if (!bf16) NO("path=mma needs bf16 storage (the tensor cores take bf16 operands)");
        if (g.dh % 16 || g.dh > 256) NO("path=mma needs dh a multiple of 16, at most 256");
        if (cfg->v[DP_WARPS] != DD_WARPS) NO("warps: simt only (mma: warps follow from tpw)");
        if (g.tpw == 2 && g.dh > 64)
            NO("tpw=2 needs dh <= 64 (two tiles' accumulators at dh=%lld would spill)",
               (long long)g.dh);
        if (g.tpw == 2 && cdiv(g.M, 16) < 2) NO("tpw=2 needs at least two 16-row tiles");
        if ((int64_t)g.warps * 32 > DEC_MAXT)
            NO("%d warps (M=%lld rows, tpw=%d) is more than %d threads", g.warps,
               (long long)g.M, g.tpw, DEC_MAXT);
    } else {
        if (g.tpw != DD_TPW) NO("tpw: mma only");
        if ((int64_t)g.warps * 32 < g.M)
            NO("warps=%d gives %d row slots for M=%lld rows", g.warps, g.warps * 32,
               (long long)g.M);
        if (g.dpt > 32)
            NO("%d dims of q and o per thread (dh=%lld over %d threads per row): over 32 "
               "spills (and takes NVRTC minutes)",
               g.dpt, (long long)g.dh, g.tpr);
    }
    if (g.kt > 32 && g.kt / 2 >= g.maxkeys) {
        if (why)
            snprintf(why, n, "kt=%d: the longest request has %lld keys (kt=%d holds them)", g.kt,
                     (long long)g.maxkeys, g.kt / 2);
        dup = 1; /* a duplicate, if nothing rules it out below */
    }
    if (g.splits > 1 && (int64_t)g.splits * DEC_KSTEP > g.maxkeys)
        NO("splits=%d: the longest request has %lld keys (fewer than %d per split)", g.splits,
           (long long)g.maxkeys, DEC_KSTEP);
    if (g.smem > MAX_SMEM)
        NO("needs %zu bytes of shared memory per block (at most %d)", g.smem, MAX_SMEM);
    return dup ? FT_CONFIG_DUPLICATE : FT_CONFIG_VALID;
#undef NO
}

static const char *dec_kernel(const dec_geom *g) {
    return g->path == DPATH_MMA ? "decode_mma" : "decode_simt";
}

static void dec_spec(ft_dt dt, const dec_geom *g, ft_cuda_module_spec *s) {
    memset(s, 0, sizeof *s);
    s->source = DEC_SRC;
    ft_cuda_spec_define(s, "FT_BF16=%d", dt == FT_DT_BF16 ? 1 : 0);
    ft_cuda_spec_define(s, "FT_MMA=%d", g->path == DPATH_MMA);
    if (g->path == DPATH_MMA) {
        ft_cuda_spec_define(s, "FT_DH=%lld", (long long)g->dh);
        ft_cuda_spec_define(s, "FT_TPW=%d", g->tpw);
    } else {
        ft_cuda_spec_define(s, "FT_DPT=%d", g->dpt);
    }
    ft_cuda_spec_kernel(s, dec_kernel(g), g->warps * 32, g->smem);
    if (g->splits != 1) ft_cuda_spec_kernel(s, "decode_merge", 128, 0);
}

static int dec_modules(const ft_call *c, ft_dt dt, const ft_config *cfg, ft_cuda_module_spec *out,
                       int max) {
    if (max < 1) return 0;
    dec_geom g;
    dec_geom_of(c, cfg, &g);
    dec_spec(dt, &g, &out[0]);
    return 1;
}

static ft_status dec_run(ft_cuda_ctx *x, const ft_cuda_call *dc, const ft_config *cfg,
                         ft_err *err) {
    const ft_call *c = dc->c;
    char why[200];
    if (!dec_valid(c, cfg, why, sizeof why))
        return ft_err_set(err, FT_EINVAL, "attention.decode on cuda: %s", why);
    dec_geom g;
    dec_geom_of(c, cfg, &g);
    if (g.R == 0 || g.B == 0 || g.Hq == 0) return FT_OK;
    ft_cuda_module_spec spec;
    dec_spec(dc->dt, &g, &spec);
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
    void *qd = dc->d[DC_Q], *lens = dc->d[DC_LENS], *kc = dc->d[DC_KCTX], *vc = dc->d[DC_VCTX],
         *kb = dc->d[DC_KBLK], *vb = dc->d[DC_VBLK], *od = dc->d[DC_O], *ld_ = dc->d[DC_LSE];
    int B = (int)g.B, Hq = (int)g.Hq, Hkv = (int)g.Hkv, dh = (int)g.dh, KT = g.kt,
        stages = g.stages, ld = g.ld, gran = g.gran, tpr = g.tpr, R = (int)g.R;
    float scale = (float)ft_attn_scale(&c->attrs, g.dh);
    void *args[] = {&qd, &lens, &kc, &vc,   &kb,  &vb,     &od,    &ld_,  &po,
                    &plse, &B, &Hq, &Hkv, &dh, &KT, &stages, &ld, &gran, &tpr, &scale};
    ft_dim3 grid = {(unsigned)splits, (unsigned)g.Hkv, (unsigned)g.R};
    if ((s = ft_cuda_launch(x, m, dec_kernel(&g), grid, (ft_dim3){(unsigned)g.warps * 32, 1, 1},
                            g.smem, args, err)))
        return s;
    if (splits == 1) return FT_OK;
    void *margs[] = {&po, &plse, &od, &ld_, &R, &B, &Hq, &Hkv, &dh, &splits};
    return ft_cuda_launch(x, m, "decode_merge",
                          (ft_dim3){(unsigned)cdiv(g.R * g.B * g.Hq, 4), 1, 1},
                          (ft_dim3){128, 1, 1}, 0, margs, err);
}

static ft_param dec_params[] = {
    [DP_PATH] = {"path",
                 "simt: CUDA cores (f32/bf16, any dh); mma: tensor cores, mma.sync m16n8k16 "
                 "(bf16, dh a multiple of 16)",
                 2,
                 {DPATH_SIMT, DPATH_MMA},
                 dpath_labels,
                 DPATH_SIMT,
                 0},
    [DP_KT] = {"kt",
               "keys per K/V tile staged in shared memory (one copy batch, two barriers)",
               3,
               {32, 64, 128},
               NULL,
               32,
               0},
    [DP_SPLITS] = {"splits",
                   "CTAs per (request, kv head) along the keys, merged by log-sum-exp; auto: "
                   "two CTAs per SM, at most one split per two tiles",
                   5,
                   {0, 1, 2, 4, 8},
                   dsplit_labels,
                   0,
                   0},
    [DP_WARPS] = {"warps",
                  "simt: warps per CTA over the M = B*G packed query rows (more warps: fewer "
                  "dims per thread, more shuffles per score)",
                  3,
                  {2, 4, 8},
                  NULL,
                  DD_WARPS,
                  0},
    [DP_TPW] = {"tpw",
                "mma: 16-row tiles per warp (two share each K/V fragment; dh <= 64)",
                2,
                {1, 2},
                NULL,
                DD_TPW,
                0},
    [DP_STAGES] = {"stages",
                   "K/V tiles in the cp.async ring (1: load then compute; 2, 3: prefetch)",
                   3,
                   {1, 2, 3},
                   NULL,
                   2,
                   0},
};

static const char *const dec_constraints[] = {
    "path=mma: bf16 storage, dh a multiple of 16 (at most 256), warps at its default (the "
    "mma path has ceil(M/16/tpw) warps, at most 8)",
    "tpw: mma only (simt keeps 1); tpw=2 needs dh <= 64 and at least two 16-row tiles",
    "simt: warps*32 >= M = B*(Hq/Hkv) row slots; dims per thread (dh over the threads per row, "
    "rounded up to a power of two) <= 32",
    "kt > 32 only when kt/2 is shorter than the longest request's keys (L_r + B)",
    "splits > 1 only when the longest request has at least 16 keys per split",
    "shared memory per block <= 227 KiB (2*stages*kt rows of K/V, mma: + the Q tile)",
    NULL,
};

static ft_space dec_space = {dec_params, sizeof dec_params / sizeof dec_params[0],
                             dec_constraints, dec_valid};

const ft_cuda_op ft_cuda_attention_decode = {&dec_space, dec_modules,
                                                dec_run};

/* ==== attention.kvproj ====================================================================== */

enum { KP_P_GEMM, KP_P_EPI, KP_P_ALGO, KP_P_WARPS };
enum { KG_PER_LAYER, KG_BATCHED, KG_WIDE };
enum { KE_SPLIT, KE_FUSED, KE_INPLACE };

static const char *const kg_labels[] = {"per_layer", "batched", "wide"};
static const char *const ke_labels[] = {"split", "fused", "inplace"};

#define KV_SRC "attention/kvproj.cu"

typedef struct kv_geom {
    int64_t Dc, D, N, H, Hkv, dh, KVD;
    int gemm, epi, algo, warps;
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
    g->gemm = cfg->v[KP_P_GEMM];
    g->epi = cfg->v[KP_P_EPI];
    g->algo = cfg->v[KP_P_ALGO];
    g->warps = cfg->v[KP_P_WARPS];
}

static int kv_valid(const ft_call *c, const ft_config *cfg, char *why, size_t n) {
    int dup = 0;
    kv_geom g;
    kv_geom_of(c, cfg, &g);
    if (g.gemm == KG_WIDE && g.Dc != 1) {
        if (why)
            snprintf(why, n, "gemm=wide needs one shared context (Dc = 1, DFlash); Dc = %lld",
                     (long long)g.Dc);
        return 0;
    }
    if (g.gemm == KG_WIDE && g.epi == KE_INPLACE) {
        if (why)
            snprintf(why, n,
                     "gemm=wide writes [N, D, KVD] scratch, not k's layout: no in-place epilogue");
        return 0;
    }
    if (g.gemm == KG_BATCHED && g.D < 2) {
        if (why) snprintf(why, n, "gemm=batched with one layer is gemm=per_layer");
        dup = 1; /* a duplicate, if nothing rules it out below */
    }
    return dup ? FT_CONFIG_DUPLICATE : FT_CONFIG_VALID;
}

static void kv_spec(ft_dt dt, const kv_geom *g, ft_cuda_module_spec *s) {
    memset(s, 0, sizeof *s);
    s->source = KV_SRC;
    ft_cuda_spec_define(s, "FT_BF16=%d", dt == FT_DT_BF16 ? 1 : 0);
    int t = g->warps * 32;
    if (g->epi == KE_SPLIT) {
        ft_cuda_spec_kernel(s, "kv_norm", t, 0);
        ft_cuda_spec_kernel(s, "kv_rope", t, 0);
    } else {
        ft_cuda_spec_kernel(s, g->epi == KE_FUSED ? "kv_normrope" : "kv_normrope_ip", t, 0);
    }
    if (g->gemm == KG_WIDE) ft_cuda_spec_kernel(s, "kv_vcopy", 256, 0);
}

static int kv_modules(const ft_call *c, ft_dt dt, const ft_config *cfg, ft_cuda_module_spec *out,
                      int max) {
    if (max < 1) return 0;
    kv_geom g;
    kv_geom_of(c, cfg, &g);
    kv_spec(dt, &g, &out[0]);
    return 1;
}

/* One projection (K or V): per-layer GEMMs, one batched GEMM, or one wide GEMM into C with
 * row stride ldc (and per-layer stride sc); ct is C's type. */
static ft_status kv_gemm(ft_cuda_ctx *x, const kv_geom *g, ft_dt dt, const void *cd,
                         const void *w, void *C, ft_dt ct, ft_err *err) {
    const size_t ab = ft_dt_size(dt), cs = ft_dt_size(ct);
    ft_gemm_desc d = {.trans_a = 0,
                      .trans_b = 1,
                      .M = g->N,
                      .N = g->KVD,
                      .K = g->H,
                      .lda = g->H,
                      .ldb = g->H,
                      .ldc = g->KVD,
                      .batch = 1,
                      .ab = dt,
                      .c = ct,
                      .alpha = 1.0f,
                      .beta = 0.0f};
    if (g->gemm == KG_WIDE) {
        d.N = g->D * g->KVD;
        d.ldc = g->D * g->KVD;
        return ft_cuda_gemm(x, &d, cd, w, C, g->algo, err);
    }
    const int64_t sa = g->Dc > 1 ? g->N * g->H : 0, sb = g->KVD * g->H, sc = g->N * g->KVD;
    if (g->gemm == KG_BATCHED) {
        d.batch = g->D;
        d.stride_a = sa;
        d.stride_b = sb;
        d.stride_c = sc;
        return ft_cuda_gemm(x, &d, cd, w, C, g->algo, err);
    }
    for (int64_t i = 0; i < g->D; i++) {
        ft_status s = ft_cuda_gemm(x, &d, (const char *)cd + (size_t)(i * sa) * ab,
                                   (const char *)w + (size_t)(i * sb) * ab,
                                   (char *)C + (size_t)(i * sc) * cs, g->algo, err);
        if (s) return s;
    }
    return FT_OK;
}

static ft_status kv_run(ft_cuda_ctx *x, const ft_cuda_call *dc, const ft_config *cfg,
                        ft_err *err) {
    const ft_call *c = dc->c;
    char why[200];
    if (!kv_valid(c, cfg, why, sizeof why))
        return ft_err_set(err, FT_EINVAL, "attention.kvproj on cuda: %s", why);
    kv_geom g;
    kv_geom_of(c, cfg, &g);
    if (g.N == 0 || g.D == 0) return FT_OK;
    ft_cuda_module_spec spec;
    kv_spec(dc->dt, &g, &spec);
    ft_dev_module *m;
    ft_status s = ft_cuda_module(x, &spec, &m, err);
    if (s) return s;

    const ft_dt dt = dc->dt;
    void *cd = dc->d[KP_C], *wk = dc->d[KP_WK], *wv = dc->d[KP_WV], *gk = dc->d[KP_GK],
         *pos = dc->d[KP_POS], *kd = dc->d[KP_K], *vd = dc->d[KP_V];
    const size_t elems = (size_t)(g.D * g.N * g.KVD);

    /* V: straight into v, or (wide) into scratch and moved. */
    if (g.gemm == KG_WIDE) {
        void *vw;
        if ((s = ft_cuda_scratch(x, 1, elems * ft_dt_size(dt), &vw, err))) return s;
        if ((s = kv_gemm(x, &g, dt, cd, wv, vw, dt, err)))
            return ft_err_wrap(err, "attention.kvproj: v = c w_v^T");
        int D = (int)g.D, N = (int)g.N, KVD = (int)g.KVD;
        void *args[] = {&vw, &vd, &D, &N, &KVD};
        if ((s = ft_cuda_launch(x, m, "kv_vcopy", (ft_dim3){(unsigned)cdiv((int64_t)elems, 256), 1, 1},
                                (ft_dim3){256, 1, 1}, 0, args, err)))
            return s;
    } else if ((s = kv_gemm(x, &g, dt, cd, wv, vd, dt, err))) {
        return ft_err_wrap(err, "attention.kvproj: v = c w_v^T");
    }

    /* K: u = c w_k^T into fp32 scratch or (inplace) into k, then the epilogue. */
    void *u = kd;
    if (g.epi != KE_INPLACE && (s = ft_cuda_scratch(x, 0, elems * sizeof(float), &u, err)))
        return s;
    if ((s = kv_gemm(x, &g, dt, cd, wk, u, g.epi == KE_INPLACE ? dt : FT_DT_F32, err)))
        return ft_err_wrap(err, "attention.kvproj: u = c w_k^T");
    int D = (int)g.D, N = (int)g.N, Hkv = (int)g.Hkv, dh = (int)g.dh, wide = g.gemm == KG_WIDE;
    float eps = (float)c->attrs.eps, theta = (float)c->attrs.rope_theta;
    ft_dim3 grid = {(unsigned)cdiv(g.D * g.N * g.Hkv, g.warps), 1, 1},
            block = {(unsigned)g.warps * 32, 1, 1};
    if (g.epi == KE_INPLACE) {
        void *args[] = {&kd, &gk, &pos, &D, &N, &Hkv, &dh, &eps, &theta};
        return ft_cuda_launch(x, m, "kv_normrope_ip", grid, block, 0, args, err);
    }
    if (g.epi == KE_SPLIT) {
        void *args[] = {&u, &gk, &pos, &D, &N, &Hkv, &dh, &wide, &eps, &theta};
        if ((s = ft_cuda_launch(x, m, "kv_norm", grid, block, 0, args, err))) return s;
    }
    void *args[] = {&u, &kd, &gk, &pos, &D, &N, &Hkv, &dh, &wide, &eps, &theta};
    return ft_cuda_launch(x, m, g.epi == KE_SPLIT ? "kv_rope" : "kv_normrope", grid, block, 0,
                          args, err);
}

static ft_param kv_params[] = {
    [KP_P_GEMM] = {"gemm",
                   "per_layer: 2*D GEMMs into k and v; batched: one strided-batched GEMM each "
                   "for K and V; wide (Dc = 1): one GEMM of D*KVD columns each, through scratch",
                   3,
                   {KG_PER_LAYER, KG_BATCHED, KG_WIDE},
                   kg_labels,
                   KG_PER_LAYER,
                   0},
    [KP_P_EPI] = {"epilogue",
                  "k_norm + RoPE (cuBLASLt has no such epilogue): split: fp32 u, a norm pass "
                  "and a RoPE pass; fused: fp32 u, one pass; inplace: u written into k by the "
                  "GEMM, one pass in place",
                  3,
                  {KE_SPLIT, KE_FUSED, KE_INPLACE},
                  ke_labels,
                  KE_FUSED,
                  0},
    [KP_P_ALGO] = {"algo",
                   "cuBLASLt algorithm of every GEMM of the call, by rank among its heuristic's "
                   "candidates (0: its first choice)",
                   4,
                   {0, 1, 2, 3},
                   NULL,
                   0,
                   0},
    [KP_P_WARPS] = {"warps",
                    "warps per block of the epilogue kernels (one warp per head row)",
                    3,
                    {2, 4, 8},
                    NULL,
                    4,
                    0},
};

static const char *const kv_constraints[] = {
    "gemm=wide: Dc = 1 (a shared context), and not with epilogue=inplace (its output is not "
    "in k's layout)",
    "gemm=batched: D > 1",
    "algo must exist among cuBLASLt's candidates for the GEMM (checked when it runs on the GPU)",
    NULL,
};

static ft_space kv_space = {kv_params, sizeof kv_params / sizeof kv_params[0], kv_constraints,
                            kv_valid};

const ft_cuda_op ft_cuda_attention_kvproj = {&kv_space, kv_modules,
                                                kv_run};
