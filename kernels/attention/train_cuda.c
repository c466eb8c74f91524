/* train_cuda.c: attention.train on the CUDA backend (SPEC.md attention.train): its tunable
 * space, the kernel modules a configuration compiles, and the launch sequences. The kernels, and
 * the napkin math that shaped them, are in attention_train.cu.
 *
 * ---- exposed parameters, and why ----
 *   keys_per_tile
 *           keys per K/V tile in shared memory (16, 32, 64). Longer tiles: fewer barriers and
 *           online-softmax rescales per visible key and more keys per lane-parallel score step
 *           (a warp scores 32 keys at once: keys_per_tile=16 leaves half its lanes idle,
 *           keys_per_tile=64 gives each lane two), against more shared memory (2 keys_per_tile
 *           (dh+1) floats of K/V, and keys_per_tile per row of P and dS backward: occupancy) and
 *           more padding in a prefix's last tile. The same tile length cuts the key-major
 *           backward's context positions.
 *   pack    query rows of a CTA. group: the whole GQA group (B x G rows, 64 at qwen3) shares each
 *           K/V tile loaded: K/V cross into shared memory once per block and kv head. head: one
 *           query head per CTA (B rows): G times the CTAs (parallelism when nseq x NB x Hkv is
 *           small) but G times the K/V loads, and backward the block keys' dk/dv are shared by
 *           G CTAs (atomics).
 *   warps   warps per CTA (2, 4, 8): a warp owns rows (r = warp, warp + W, ...), so more warps,
 *           fewer rows per warp in turn and more latency hidden, against more CTA-wide barriers
 *           per tile and fewer resident CTAs.
 *   dkv     backward: how the context keys' dk/dv, summed over every block that sees them, are
 *           accumulated. keymajor: a second kernel owns a tile of context positions per kv head
 *           and walks the blocks that see it, recomputing their P and dS (deterministic, no
 *           atomics, no scratch but D per row; a second pass over the context scores).
 *           atomic: the query-major pass adds them with float atomics into float32 accumulators
 *           (the outputs with f32 storage, float32 scratch and a convert pass with bf16): one
 *           pass, order-dependent rounding, contention on the early positions. Per-block partials
 *           with a deterministic reduction would take nseq*NB*S*Hkv*dh floats (6.4 GB at
 *           qwen3-8b) and are not offered.
 *   core    inner products of the forward and of the query-major backward. cuda: FMAs on the CUDA
 *           cores, a lane per key for the scores, then a lane per dh column for o / dq (any dtype,
 *           any dh). mma (bf16, dh a multiple of 16): mma.sync m16n8k16 through the dialect's
 *           wrapper, a warp per 16-row tile (q, and backward do, as A fragments in registers):
 *           S = Q K^T and O += P V forward, S, dP = dO V^T and dQ += dS K backward; the online
 *           softmax and P, dS on the accumulator fragments. The tile's dk/dv (a sum over rows
 *           that crosses the warps' tiles) and the key-major pass stay on the CUDA cores. Needs a
 *           warp per row tile: warps >= ceil(rows/16), and no more than twice that (or 2).
 * Compile time: the storage type (the `dtype` attribute) and dh (the unrolled dot products); one
 * module per (dtype, dh), every tunable above is a run-time argument (dynamic shared memory).
 * Scratch: lse in float32 (slot 0, rows), D = do.o (slot 1, rows, keymajor), the float32 dk/dv
 * accumulators (slot 2, atomic with bf16: context, and block keys with pack=head).
 *
 * ---- adding a tunable: three places ----
 *   1. a row of TR_PARAMS: index, name, the -D macro it is compiled in with (NULL: the host
 *      alone reads it), labels, default, help and values;
 *   2. its validity rule: a check function and its row in TR_RULES with the line `flaretune
 *      space` shows, side by side (a parameter some calls do not use keeps its default there);
 *   3. its use: in attention_train.cu, or cfg->v[index] on the host.
 */
#include <stdio.h>
#include <string.h>

#include "attention/attention.h"
#include "cuda/backend/cuda_backend.h"

#define TR_SRC      "attention/attention_train.cu"
#define TR_CVT_T    256          /* threads per block of attn_cvt */

/* The launchers of attention_train.cu's kernels. The plain and mma variants of a kernel take the
 * same arguments: one parameter list each for the forward and the dq pass. */
#define TR_FWD_KERNEL_PARAMS                                                                       \
    (const void *q, const void *k_ctx, const void *v_ctx, const void *k_blk, const void *v_blk,    \
     const int *anchors, const uint8_t *keep, void *o, void *lse, float *lse32, int S, int NB,     \
     int B, int Hq, int Hkv, int npk, int KT, float scale, int win, int causal)
#define TR_FWD_KERNEL_ADDRS                                                                        \
    (&q, &k_ctx, &v_ctx, &k_blk, &v_blk, &anchors, &keep, &o, &lse, &lse32, &S, &NB, &B, &Hq,      \
     &Hkv, &npk, &KT, &scale, &win, &causal)
#define TR_BWDQ_KERNEL_PARAMS                                                                      \
    (const void *q, const void *k_ctx, const void *v_ctx, const void *k_blk, const void *v_blk,    \
     const int *anchors, const uint8_t *keep, const void *o, const float *lse32, const void *dout, \
     void *dq, void *dk_blk, void *dv_blk, float *acc_kc, float *acc_vc, float *acc_kb,            \
     float *acc_vb, float *Dbuf, int S, int NB, int B, int Hq, int Hkv, int npk, int KT,           \
     float scale, int mode, int win, int causal)
#define TR_BWDQ_KERNEL_ADDRS                                                                       \
    (&q, &k_ctx, &v_ctx, &k_blk, &v_blk, &anchors, &keep, &o, &lse32, &dout, &dq, &dk_blk,         \
     &dv_blk, &acc_kc, &acc_vc, &acc_kb, &acc_vb, &Dbuf, &S, &NB, &B, &Hq, &Hkv, &npk, &KT,        \
     &scale, &mode, &win, &causal)
FT_CUDA_KERNEL(attn_fwd, TR_FWD_KERNEL_PARAMS, TR_FWD_KERNEL_ADDRS)
FT_CUDA_KERNEL(attn_fwd_mma, TR_FWD_KERNEL_PARAMS, TR_FWD_KERNEL_ADDRS)
FT_CUDA_KERNEL(attn_bwd_q, TR_BWDQ_KERNEL_PARAMS, TR_BWDQ_KERNEL_ADDRS)
FT_CUDA_KERNEL(attn_bwd_q_mma, TR_BWDQ_KERNEL_PARAMS, TR_BWDQ_KERNEL_ADDRS)
FT_CUDA_KERNEL(attn_bwd_kv,
               (const void *q, const void *k_ctx, const void *v_ctx, const int *anchors,
                const uint8_t *keep, const float *lse32, const float *Dbuf, const void *dout,
                void *dk_ctx, void *dv_ctx, int S, int NB, int B, int Hq, int Hkv, int KT,
                float scale, int win),
               (&q, &k_ctx, &v_ctx, &anchors, &keep, &lse32, &Dbuf, &dout, &dk_ctx, &dv_ctx, &S,
                &NB, &B, &Hq, &Hkv, &KT, &scale, &win))
FT_CUDA_KERNEL(attn_cvt, (const float *src, void *dst, long long n), (&src, &dst, &n))

/* Values of the parameters (TR_PACK_*, ...; TR_* in attention.h alone: the op's sizes and
 * tensors). */
enum { TR_PACK_GROUP, TR_PACK_HEAD };
enum { TR_DKV_KEYMAJOR, TR_DKV_ATOMIC };
enum { TR_CORE_CUDA, TR_CORE_MMA };

static const char *const tr_pack_labels[] = {"group", "head"};
static const char *const tr_dkv_labels[] = {"keymajor", "atomic"};
static const char *const tr_core_labels[] = {"cuda", "mma"};

enum { TR_DEF_KT = 32, TR_DEF_WARPS = 4, TR_DEF_DKV = TR_DKV_KEYMAJOR };

/* The tunables: X(index, name, -D macro or NULL, labels, default, help, values...). */
#define TR_PARAMS(X)                                                                               \
    X(TR_P_KT, "keys_per_tile", NULL, NULL, TR_DEF_KT,                                             \
      "keys per K/V tile in shared memory: fewer barriers and softmax rescales per key and "       \
      "fuller warps (32 keys scored at once) against shared memory and tail padding",              \
      16, 32, 64)                                                                                  \
    X(TR_P_PACK, "pack", NULL, tr_pack_labels, TR_PACK_GROUP,                                      \
      "query rows of a CTA: the whole GQA group of a block (each K/V tile serves B*G rows) or "    \
      "one head (G times the CTAs and the K/V loads)",                                             \
      TR_PACK_GROUP, TR_PACK_HEAD)                                                                 \
    X(TR_P_WARPS, "warps", NULL, NULL, TR_DEF_WARPS,                                               \
      "warps per CTA, each owning query rows in turn: latency hiding against barriers and "        \
      "resident CTAs",                                                                             \
      2, 4, 8)                                                                                     \
    X(TR_P_DKV, "dkv", NULL, tr_dkv_labels, TR_DEF_DKV,                                            \
      "backward sum over blocks of the context keys' dk/dv: a key-major pass that owns its keys "  \
      "(deterministic) or float atomics from the query-major pass",                                \
      TR_DKV_KEYMAJOR, TR_DKV_ATOMIC)                                                              \
    X(TR_P_CORE, "core", NULL, tr_core_labels, TR_CORE_CUDA,                                       \
      "inner products of the forward and the query-major backward: CUDA-core FMAs (a lane per "    \
      "key, then per dh column) or the tensor cores (mma.sync m16n8k16, bf16, a warp per 16-row "  \
      "tile)",                                                                                     \
      TR_CORE_CUDA, TR_CORE_MMA)

enum { TR_PARAMS(FT_CUDA_PARAM_INDEX) TR_NPARAMS };
static ft_param tr_params[] = {TR_PARAMS(FT_CUDA_PARAM_ENTRY)};

static int64_t cdiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

typedef struct tr_geom {
    int64_t nseq, S, NB, B, Hq, Hkv, dh, G;
    int kt, npk, warps, atomic, mma, R;
} tr_geom;

static void tr_geom_of(const ft_call *c, const ft_config *cfg, tr_geom *g) {
    const int64_t *d = c->dim;
    g->nseq = d[TR_NSEQ];
    g->S = d[TR_S];
    g->NB = d[TR_NB];
    g->B = d[TR_B];
    g->Hq = d[TR_HQ];
    g->Hkv = d[TR_HKV];
    g->dh = d[TR_DH];
    g->G = g->Hkv > 0 ? g->Hq / g->Hkv : 1;
    g->kt = cfg->v[TR_P_KT];
    g->npk = cfg->v[TR_P_PACK] == TR_PACK_HEAD ? 1 : (int)g->G;
    g->warps = cfg->v[TR_P_WARPS];
    g->atomic = cfg->v[TR_P_DKV] == TR_DKV_ATOMIC;
    g->mma = cfg->v[TR_P_CORE] == TR_CORE_MMA;
    g->R = (int)(g->B * g->npk);
}

/* Dynamic shared memory of each kernel (attention_train.cu lists the layouts). */
static size_t tr_fwd_smem(const tr_geom *g) {
    int64_t kp = g->dh + 1;
    if (g->mma) return (size_t)(cdiv(g->R, 16) * 16 * g->dh + 2 * g->kt * kp) * sizeof(float);
    return (size_t)(2 * g->R * g->dh + 2 * g->kt * kp + g->warps * g->kt + 2 * g->R) *
           sizeof(float);
}
static size_t tr_bwdq_smem(const tr_geom *g) {
    int64_t kp = g->dh + 1;
    if (g->mma) {
        int64_t Rp = cdiv(g->R, 16) * 16;
        return (size_t)(2 * Rp * g->dh + 2 * g->kt * kp + 2 * Rp * g->kt + 2 * Rp) * sizeof(float);
    }
    return (size_t)(3 * g->R * g->dh + 2 * g->kt * kp + 2 * g->R * g->kt + 2 * g->R) *
           sizeof(float);
}
static size_t tr_bwdkv_smem(const tr_geom *g) {
    int64_t kp = g->dh + 1, R = g->B * g->G;
    return (size_t)(2 * g->kt * kp + 2 * g->kt * g->dh + 2 * R * g->dh + 2 * R * g->kt + 2 * R) *
           sizeof(float);
}

/* ---- validity: one check per rule, then the rules in order with their lines ---- */

typedef struct tr_check {
    const ft_call *c;
    const ft_config *cfg;
    int bwd;
    tr_geom g;
} tr_check;

static int tr_check_dh(const void *ctx, char *why, size_t n) {
    const tr_geom *g = &((const tr_check *)ctx)->g;
    if (g->dh > 512)
        return ft_config_why(FT_CONFIG_INVALID, why, n, "dh=%lld: the kernels take at most 512",
                             (long long)g->dh);
    return FT_CONFIG_VALID;
}

static int tr_check_kt(const void *ctx, char *why, size_t n) {
    const tr_geom *g = &((const tr_check *)ctx)->g;
    if (g->kt > 16 && g->kt / 2 >= g->S + g->B)
        return ft_config_why(
            FT_CONFIG_DUPLICATE, why, n,
            "keys_per_tile=%d: at most S+B=%lld keys, one tile already at keys_per_tile=%d", g->kt,
            (long long)(g->S + g->B), g->kt / 2);
    return FT_CONFIG_VALID;
}

static int tr_check_pack(const void *ctx, char *why, size_t n) {
    const tr_check *v = ctx;
    if (v->cfg->v[TR_P_PACK] == TR_PACK_HEAD && v->g.G == 1)
        return ft_config_why(FT_CONFIG_DUPLICATE, why, n, "pack=head is pack=group when Hq = Hkv");
    return FT_CONFIG_VALID;
}

static int tr_check_warps(const void *ctx, char *why, size_t n) {
    const tr_geom *g = &((const tr_check *)ctx)->g;
    if (g->warps > g->R)
        return ft_config_why(FT_CONFIG_INVALID, why, n,
                             "warps=%d: more warps than the %d query rows of a CTA", g->warps,
                             g->R);
    return FT_CONFIG_VALID;
}

static int tr_check_dkv(const void *ctx, char *why, size_t n) {
    const tr_check *v = ctx;
    if (!v->bwd && v->cfg->v[TR_P_DKV] != TR_DEF_DKV)
        return ft_config_why(FT_CONFIG_INVALID, why, n,
                             "dkv applies to the backward only (leave it at %s)",
                             tr_dkv_labels[TR_DEF_DKV]);
    if (v->bwd && v->cfg->v[TR_P_PACK] == TR_PACK_HEAD && !v->g.atomic)
        return ft_config_why(
            FT_CONFIG_INVALID, why, n,
            "pack=head backward shares each block key among G CTAs: it needs dkv=atomic");
    return FT_CONFIG_VALID;
}

static int tr_check_mma(const void *ctx, char *why, size_t n) {
    const tr_check *v = ctx;
    const tr_geom *g = &v->g;
    if (!g->mma) return FT_CONFIG_VALID;
    const int64_t tiles = cdiv(g->R, 16);
    const char *no = ft_cuda_call_dt(v->c) != FT_DT_BF16 ? "needs bf16 storage"
                     : g->dh % 16                        ? "needs dh a multiple of 16"
                     : tiles > g->warps                  ? "needs a warp per 16-row tile"
                     : g->warps > 2 && g->warps / 2 >= tiles
                         ? "with half the warps idle (the fewest warps that cover the tiles are "
                           "kept)"
                         : NULL;
    if (no)
        return ft_config_why(FT_CONFIG_INVALID, why, n, "core=mma %s (%d rows, warps=%d, dh=%lld)",
                             no, g->R, g->warps, (long long)g->dh);
    return FT_CONFIG_VALID;
}

static int tr_check_smem(const void *ctx, char *why, size_t n) {
    const tr_check *v = ctx;
    const tr_geom *g = &v->g;
    size_t smem = tr_fwd_smem(g);
    const char *k = g->mma ? FT_CUDA_KERNEL_NAME(attn_fwd_mma) : FT_CUDA_KERNEL_NAME(attn_fwd);
    if (v->bwd && tr_bwdq_smem(g) > smem)
        smem = tr_bwdq_smem(g),
        k = g->mma ? FT_CUDA_KERNEL_NAME(attn_bwd_q_mma) : FT_CUDA_KERNEL_NAME(attn_bwd_q);
    if (v->bwd && !g->atomic && tr_bwdkv_smem(g) > smem)
        smem = tr_bwdkv_smem(g), k = FT_CUDA_KERNEL_NAME(attn_bwd_kv);
    if (smem > FT_CUDA_MAX_SMEM)
        return ft_config_why(FT_CONFIG_INVALID, why, n,
                             "%s needs %zu bytes of shared memory per block (at most %d)", k, smem,
                             FT_CUDA_MAX_SMEM);
    return FT_CONFIG_VALID;
}

/* The rules, in the order they are checked: X(check, the line `flaretune space` shows). */
#define TR_RULES(X)                                                                                \
    X(tr_check_dh, "dh <= 512")                                                                    \
    X(tr_check_kt, "keys_per_tile > 16 needs keys_per_tile/2 < S+B (else the smaller tile "        \
                   "already holds every key)")                                                     \
    X(tr_check_pack, "pack=head needs Hq > Hkv (else it is pack=group)")                           \
    X(tr_check_warps, "warps <= query rows of a CTA (B*G with pack=group, B with pack=head)")      \
    X(tr_check_dkv, "dkv: backward only (else the default); pack=head backward needs dkv=atomic")  \
    X(tr_check_mma, "core=mma: bf16 storage, dh a multiple of 16, warps >= 16-row tiles "          \
                    "(ceil(rows/16)), and warps=2 or warps/2 < tiles (no warps idle by half)")     \
    X(tr_check_smem, "shared memory per block <= 227 KiB for each kernel the config launches")

FT_CUDA_RULES(tr, TR_RULES);

static int tr_valid(const ft_call *c, const ft_config *cfg, char *why, size_t n) {
    tr_check v = {.c = c, .cfg = cfg, .bwd = c->backward};
    tr_geom_of(c, cfg, &v.g);
    return FT_CUDA_RULES_CHECK(tr, &v, why, n);
}

static void tr_spec(const ft_call *c, ft_dt dt, const tr_geom *g, ft_cuda_module_spec *s) {
    memset(s, 0, sizeof *s);
    s->source = TR_SRC;
    ft_cuda_spec_define(s, "FT_BF16=%d", dt == FT_DT_BF16 ? 1 : 0);
    ft_cuda_spec_define(s, "FT_DH=%lld", (long long)g->dh);
    int threads = 32 * g->warps;
    ft_cuda_spec_kernel(s,
                        g->mma ? FT_CUDA_KERNEL_NAME(attn_fwd_mma) : FT_CUDA_KERNEL_NAME(attn_fwd),
                        threads, tr_fwd_smem(g));
    if (c->backward) {
        ft_cuda_spec_kernel(
            s, g->mma ? FT_CUDA_KERNEL_NAME(attn_bwd_q_mma) : FT_CUDA_KERNEL_NAME(attn_bwd_q),
            threads, tr_bwdq_smem(g));
        if (!g->atomic)
            ft_cuda_spec_kernel(s, FT_CUDA_KERNEL_NAME(attn_bwd_kv), threads, tr_bwdkv_smem(g));
        else if (dt == FT_DT_BF16)
            ft_cuda_spec_kernel(s, FT_CUDA_KERNEL_NAME(attn_cvt), TR_CVT_T, 0);
    }
}

static int tr_modules(const ft_call *c, ft_dt dt, const ft_config *cfg, ft_cuda_module_spec *out,
                      int max) {
    if (max < 1) return 0;
    tr_geom g;
    tr_geom_of(c, cfg, &g);
    tr_spec(c, dt, &g, &out[0]);
    return 1;
}

static ft_status tr_cvt(ft_cuda_ctx *x, ft_dev_module *m, const float *src, void *dst, long long n,
                        ft_err *err) {
    if (n == 0) return FT_OK;
    int64_t nb = cdiv(n, TR_CVT_T);
    if (nb > 4096) nb = 4096;
    return launch_attn_cvt(x, m, (ft_dim3){(unsigned)nb, 1, 1}, (ft_dim3){TR_CVT_T, 1, 1}, 0, src,
                           dst, n, err);
}

static ft_status tr_run(ft_cuda_ctx *x, const ft_cuda_call *call, const ft_config *cfg,
                        ft_err *err) {
    const ft_call *c = call->c;
    tr_geom g;
    tr_geom_of(c, cfg, &g);
    ft_cuda_module_spec spec;
    tr_spec(c, call->dt, &g, &spec);
    ft_dev_module *m;
    ft_status s = ft_cuda_module(x, &spec, &m, err);
    if (s) return s;
    ft_dev *dev = ft_cuda_dev(x);

    int S = (int)g.S, NB = (int)g.NB, B = (int)g.B, Hq = (int)g.Hq, Hkv = (int)g.Hkv;
    int npk = g.npk, KT = g.kt, win = (int)c->attrs.window, causal = c->attrs.causal;
    float scale = (float)ft_attn_scale(&c->attrs, g.dh);
    const int64_t nblk = g.nseq * g.NB, rows = nblk * g.B * g.Hq;
    const size_t ctx_el = (size_t)(g.nseq * g.S * g.Hkv * g.dh);
    const size_t blk_el = (size_t)(nblk * g.B * g.Hkv * g.dh);
    void *qd = call->d[TR_Q], *kcd = call->d[TR_KCTX], *vcd = call->d[TR_VCTX],
         *kbd = call->d[TR_KBLK];
    void *vbd = call->d[TR_VBLK], *ad = call->d[TR_ANCH], *keepd = call->d[TR_KEEP];
    void *od = call->d[TR_O], *lsed = call->d[TR_LSE];
    ft_dim3 grid = {(unsigned)nblk, (unsigned)(g.Hq / npk), 1};
    ft_dim3 block = {(unsigned)(32 * g.warps), 1, 1};

    void *lse32 = NULL;
    if (c->backward &&
        (s = ft_cuda_scratch(x, 0, (size_t)(rows > 0 ? rows : 1) * sizeof(float), &lse32, err)))
        return s;
    if (nblk > 0) {
        __typeof__(launch_attn_fwd) *fwd = g.mma ? launch_attn_fwd_mma : launch_attn_fwd;
        if ((s = fwd(x, m, grid, block, tr_fwd_smem(&g), qd, kcd, vcd, kbd, vbd, ad, keepd, od,
                     lsed, lse32, S, NB, B, Hq, Hkv, npk, KT, scale, win, causal, err)))
            return s;
    }
    if (!c->backward) return FT_OK;

    void *dod = call->d[TR_DO], *dqd = call->d[TR_DQ], *dkcd = call->d[TR_DKCTX],
         *dvcd = call->d[TR_DVCTX], *dkbd = call->d[TR_DKBLK], *dvbd = call->d[TR_DVBLK];
    const int bf16 = call->dt == FT_DT_BF16, blk_atomic = npk < g.G;
    void *acc_kc = NULL, *acc_vc = NULL, *acc_kb = NULL, *acc_vb = NULL, *Dbuf = NULL;
    if (g.atomic) {
        /* float32 accumulators, zeroed: the outputs themselves with f32 storage. */
        if (bf16) {
            size_t nel = 2 * ctx_el + (blk_atomic ? 2 * blk_el : 0);
            void *sc;
            if ((s = ft_cuda_scratch(x, 2, (nel ? nel : 1) * sizeof(float), &sc, err))) return s;
            acc_kc = sc;
            acc_vc = (float *)sc + ctx_el;
            if (blk_atomic) {
                acc_kb = (float *)sc + 2 * ctx_el;
                acc_vb = (float *)sc + 2 * ctx_el + blk_el;
            }
            if (nel && (s = ft_dev_memset(dev, sc, 0, nel * sizeof(float), err))) return s;
        } else {
            acc_kc = dkcd;
            acc_vc = dvcd;
            if (blk_atomic) acc_kb = dkbd, acc_vb = dvbd;
            if (ctx_el && ((s = ft_dev_memset(dev, dkcd, 0, ctx_el * sizeof(float), err)) ||
                           (s = ft_dev_memset(dev, dvcd, 0, ctx_el * sizeof(float), err))))
                return s;
            if (blk_atomic && blk_el &&
                ((s = ft_dev_memset(dev, dkbd, 0, blk_el * sizeof(float), err)) ||
                 (s = ft_dev_memset(dev, dvbd, 0, blk_el * sizeof(float), err))))
                return s;
        }
    } else if ((s = ft_cuda_scratch(x, 1, (size_t)(rows > 0 ? rows : 1) * sizeof(float), &Dbuf,
                                    err))) {
        return s;
    }
    int mode = (g.atomic ? 1 : 0) | (blk_atomic ? 2 : 0);
    if (nblk > 0) {
        __typeof__(launch_attn_bwd_q) *bwd_q = g.mma ? launch_attn_bwd_q_mma : launch_attn_bwd_q;
        if ((s = bwd_q(x, m, grid, block, tr_bwdq_smem(&g), qd, kcd, vcd, kbd, vbd, ad, keepd, od,
                       lse32, dod, dqd, dkbd, dvbd, acc_kc, acc_vc, acc_kb, acc_vb, Dbuf, S, NB, B,
                       Hq, Hkv, npk, KT, scale, mode, win, causal, err)))
            return s;
    }
    if (!g.atomic) {
        int64_t ntile = cdiv(g.S, g.kt);
        if (g.nseq * ntile > 0) {
            if ((s = launch_attn_bwd_kv(x, m,
                                        (ft_dim3){(unsigned)(g.nseq * ntile), (unsigned)Hkv, 1},
                                        block, tr_bwdkv_smem(&g), qd, kcd, vcd, ad, keepd, lse32,
                                        Dbuf, dod, dkcd, dvcd, S, NB, B, Hq, Hkv, KT, scale, win,
                                        err)))
                return s;
        }
    } else if (bf16) {
        if ((s = tr_cvt(x, m, acc_kc, dkcd, (long long)ctx_el, err)) ||
            (s = tr_cvt(x, m, acc_vc, dvcd, (long long)ctx_el, err)))
            return s;
        if (blk_atomic && ((s = tr_cvt(x, m, acc_kb, dkbd, (long long)blk_el, err)) ||
                           (s = tr_cvt(x, m, acc_vb, dvbd, (long long)blk_el, err))))
            return s;
    }
    return FT_OK;
}

static ft_space tr_space = {tr_params, TR_NPARAMS, tr_constraints, tr_valid};

const ft_cuda_op ft_cuda_attention_train = {&tr_space, tr_modules, tr_run};
