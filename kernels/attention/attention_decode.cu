/* attention_decode.cu: block attention at inference on CUDA (SPEC.md attention.decode); the host
 * side that sizes, splits and sequences it is kernels/attention/attention_cuda.c.
 *
 *   keys(r) = [k_ctx rows of r ; k_blk[r]],  o[r,b,h,:] = softmax(scale q . keys^T) @ vals,
 *   lse[r,b,h] = log sum exp(scale q . keys^T)          (no mask; GQA: head h reads h / G)
 *   win = W > 0 (a sliding-window layer): query b (position L_r + b) keeps only the context
 *   keys p > L_r + b - W. The CTAs' key range starts at query 0's window, cs = max(0, L_r - W
 *   + 1), so the keys before it are neither staged nor scored (a request costs O(W + B) keys
 *   whatever L_r is); the rows of later queries mask the few keys at its start they do not see
 *   (score -inf). A step where a row sees no key leaves it untouched: its running max stays
 *   -inf, and the exponentials are taken against 0 instead (exp2(-inf) = 0, no NaN).
 *   causal = 1: query b sees its block's keys 0..b only (masked as the window masks).
 *
 * Napkin math at qwen3-8b decode (R = 16, L = 4096, B = 16, Hq 32, Hkv 8, dh 128), bf16: K/V of
 * the contexts are 2 * 16 * 4096 * 8 * 128 * 2 B = 268 MB, read once when the G = 4 query heads of
 * a kv head are packed with the B = 16 queries into one tile of M = B * G = 64 rows (every K/V
 * row staged in shared memory serves 64 query rows); 4 * dh * B * Hq * (L + B) * R = 17 GFLOP.
 * That is 128 FLOP per K/V element (64 FLOP/byte): under the H200's ~4.8 TB/s the floor is
 * ~56 us for the memory against ~17 us for the FLOPs at ~1 PFLOP/s dense bf16 on the tensor
 * cores (memory-bound); on the CUDA cores (~60 TFLOP/s fp32, less with the shuffles and bf16
 * conversions) the same math takes ~0.3 ms or more: compute-bound. Hence the tensor-core path,
 * with the CUDA-core one beside it (fp32 inputs, head dims that are not a multiple of 16, and a
 * baseline). One CTA takes one (request r, kv head j, split s): R * Hkv = 128 CTAs alone do not
 * fill 132 SMs twice, so the keys of a request are split across CTAs (split-KV), each CTA
 * writing its normalised partial o and its lse, and a merge kernel combining them:
 *   lse = log sum_s exp(lse_s),  o = sum_s exp(lse_s - lse) o_s.
 * Context lengths are ragged: a CTA finds its request's first context row by summing ctx_lens
 * over the requests before it (R is small), and a split whose range is empty writes lse = -inf
 * and o = 0, which the merge weighs by zero. Context and block keys come from their own buffers:
 * each staged row is read from k_ctx (key < L_r) or k_blk (key >= L_r), never concatenated.
 *
 * K/V tiles of KT keys (a kernel argument) are staged in shared memory by cp.async in a ring of
 * `stages` buffers (1: load then compute; 2, 3: the next tiles load while this one is used);
 * rows past the split's end are zero-filled and masked. The softmax is online, per step of 16
 * keys (mma) or 4 keys (simt: its steps are unrolled over the thread's dims, and 8 keys of 32
 * dims took NVRTC 20 s), in base 2 (scores times scale * log2 e, exp2f); accumulation is fp32 in
 * both paths.
 *
 *   decode_simt (FT_MMA 0): CUDA cores, f32 or bf16 storage. The CTA's threads are row slots of
 *     `tpr` threads (a power of two, an argument); slot m holds query row m = b * G + g of the
 *     tile, its threads each hold FT_DPT consecutive dims of q and of the accumulator o, and
 *     move them FT_DVEC at a time: each of its q, staged K and V rows, and o or partial o is
 *     read or written in chunks of one 16-, 8- or 4-byte access (float4, or 8 bf16 as uint4;
 *     one element where dh is odd), none for a chunk past dh. Every slot reads the same staged
 *     row. A warp holds 32 / tpr slots, a slot's threads being lanes 32 / tpr apart, so one
 *     phase of a vector access (8 lanes at 16 bytes, 16 at 8) is the same thread of several
 *     slots reading one chunk (a broadcast) up to tpr = 4 for 16 bytes; beyond, the phase's
 *     threads of a slot read chunks FT_DPT elements apart, in distinct banks while they span
 *     at most 128 bytes (every preset's head dim). (Threads of a slot side by side in a phase
 *     met in the same banks when FT_DPT elements are 128 bytes: 2 and 4 wavefronts per phase,
 *     f32 at dh 64 and 128. The interleaved layout, d = i * tpr + sub, took 246 registers and
 *     26 s of NVRTC at dh = 128, against 192 and 5 s for element accesses of consecutive dims;
 *     16-byte chunks take 113 registers and 0.5 s, bf16 on sm_90a, CUDA 13.0, 2026-12.)
 *     A score is a partial dot product reduced over the slot's threads by log2(TPR) shuffles;
 *     p then scales the thread's own dims of the V row. Slots past M compute on zeros and store
 *     nothing.
 *   decode_mma (FT_MMA 1, bf16, dh = FT_DH a multiple of 16): tensor cores through the dialect's
 *     wrappers, FlashAttention-2 style. Warp w owns FT_TPW tiles of 16 query rows; Q is staged
 *     once and held as mma A fragments (dh / 16 k-steps), S = Q K^T with K rows as the B operand
 *     (ldmatrix), P re-packed from the S accumulators as the A operand of O += P V (V through
 *     ldmatrix.trans), O in fp32 registers (dh / 2 floats per tile and thread). Rows past M are
 *     zero and not stored.
 *   decode_merge: one warp per output row (r, b, h), lanes over dims; the splits' partials are
 *     fp32 scratch [R, splits, Hkv, M, dh] and [R, splits, Hkv, M].
 *
 * Defines (what shapes registers, and the storage type):
 *   FT_BF16  1: q, k, v, o, lse are __nv_bfloat16 on the device, else float
 *   FT_MMA   0: decode_simt, 1: decode_mma (bf16 only)
 *   FT_DPT   simt: dims per thread, a power of two (dh <= tpr * DPT), at most 32
 *   FT_DVEC  simt: elements per access (1, 2, 4, 8; at most 16 bytes), dividing dh and FT_DPT,
 *            so that a chunk lies wholly inside dh or wholly past it and is aligned
 *   FT_TPW, FT_DH    mma: 16-row tiles per warp, head dim
 * Everything else (R, B, G, M, dh for simt, threads per row, warps (blockDim, at most MAXT), KT,
 * stages, splits, scale) is a kernel argument.
 */
#include "ft_cuda.h"

#ifndef FT_MMA
#define FT_MMA 0
#endif
#ifndef FT_DPT
#define FT_DPT 1
#endif
#ifndef FT_DVEC
#define FT_DVEC 1
#endif
#ifndef FT_TPW
#define FT_TPW 1
#endif
#ifndef FT_DH
#define FT_DH 16
#endif


#define MAXT     256 /* threads per CTA, at most (__launch_bounds__) */
#define KSTEP    16 /* keys per online-softmax step of decode_mma, and the split granularity */
#define SSTEP    4  /* keys per online-softmax step of decode_simt */
#define LOG2E    1.4426950408889634f
#define LN2      0.6931471805599453f

static_assert(FT_DPT == 1 || FT_DPT == 2 || FT_DPT == 4 || FT_DPT == 8 || FT_DPT == 16 ||
                  FT_DPT == 32,
              "FT_DPT: a power of two, 1 to 32 dims per thread");
static_assert((FT_DVEC == 1 || FT_DVEC == 2 || FT_DVEC == 4 || FT_DVEC == 8) &&
                  FT_DPT % FT_DVEC == 0 && FT_DVEC * sizeof(st_t) <= 16,
              "FT_DVEC: 1, 2, 4 or 8 elements per access, dividing FT_DPT, at most 16 bytes");
static_assert(FT_MMA == 0 || FT_BF16, "FT_MMA needs bf16 storage");
static_assert(FT_DH % 16 == 0 && FT_DH <= 256, "FT_DH: a multiple of 16, at most 256");
static_assert(FT_TPW == 1 || FT_TPW == 2, "FT_TPW: 1 or 2 tiles per warp");


/* The first context row of request r and its context length. */
__device__ __forceinline__ int ctx_start(const int *lens, int r, int *L) {
    int off = 0;
    for (int i = 0; i < r; i++)
        off += lens[i];
    *L = lens[r];
    return off;
}

/* Stage keys [t0, t0 + KT) of the CTA's (r, j) into ks/vs (rows of `ld` elements), zero-filling
 * rows at or past `t1`. `gran` is the copy unit in bytes (16, 8, 4: cp.async; 0: plain element
 * copies, for bf16 rows of an odd length). */
__device__ __forceinline__ void stage_tile(st_t *ks, st_t *vs, int ld, const st_t *kc,
                                           const st_t *vc, const st_t *kb, const st_t *vb, int off,
                                           int L, int r, int B, int Hkv, int j, int dh, int t0,
                                           int t1, int KT, int gran) {
    const int rowb = dh * (int)sizeof(st_t);
    if (gran == 0) {
        for (int e = threadIdx.x; e < 2 * KT * dh; e += blockDim.x) {
            int kv = e / (KT * dh), rem = e - kv * KT * dh, row = rem / dh, d = rem - row * dh;
            int t = t0 + row;
            float v = 0.0f;
            if (t < t1) {
                const st_t *src = t < L ? (kv ? vc : kc) + ((size_t)(off + t) * Hkv + j) * dh
                                        : (kv ? vb : kb) + ((size_t)(r * B + t - L) * Hkv + j) * dh;
                v = ft_ldf(src + d);
            }
            ft_stf((kv ? vs : ks) + row * ld + d, v);
        }
        return;
    }
    const int per_row = rowb / gran;
    for (int e = threadIdx.x; e < 2 * KT * per_row; e += blockDim.x) {
        int kv = e / (KT * per_row), rem = e - kv * KT * per_row, row = rem / per_row,
            c = rem - row * per_row;
        int t = t0 + row;
        const st_t *src = kv ? vc : kc; /* any valid address when zero-filling */
        int bytes = 0;
        if (t < t1) {
            src = t < L ? (kv ? vc : kc) + ((size_t)(off + t) * Hkv + j) * dh
                        : (kv ? vb : kb) + ((size_t)(r * B + t - L) * Hkv + j) * dh;
            bytes = gran;
        }
        const char *s8 = reinterpret_cast<const char *>(src) + (bytes ? c * gran : 0);
        char *d8 = reinterpret_cast<char *>((kv ? vs : ks) + row * ld) + c * gran;
        if (gran == 16) ft_cp_async_cg16(d8, s8, bytes);
        else if (gran == 8) ft_cp_async_ca8(d8, s8, bytes);
        else ft_cp_async_ca4(d8, s8, bytes);
    }
}

/* Wait until at most stages - 1 groups are pending (the tile about to be used has landed). */
__device__ __forceinline__ void wait_stage(int stages) {
    if (stages >= 3) ft_cp_async_wait<2>();
    else if (stages == 2) ft_cp_async_wait<1>();
    else ft_cp_async_wait<0>();
}

/* The split's key range [k0, k1) of request r, keys [cs, cs + nkeys): splits of whole
 * KSTEP-key steps. */
__device__ __forceinline__ void split_range(int cs, int nkeys, int splits, int s, int *k0,
                                            int *k1) {
    int per = (nkeys + splits - 1) / splits;
    per = (per + KSTEP - 1) / KSTEP * KSTEP;
    int a = s * per, b = a + per;
    *k0 = cs + (a < nkeys ? a : nkeys);
    *k1 = cs + (b < nkeys ? b : nkeys);
}

/* The first context key of request r (length L) that query 0 sees under window win (0: none). */
__device__ __forceinline__ int window_start(int L, int win) {
    const int lo = win > 0 ? L - win + 1 : 0;
    return lo > 0 ? lo : 0;
}

/* Does query b of the request see key t (context t < L, block after)? Under a window only the
 * context keys t > L + b - win; under causal only the block keys t - L <= b. */
__device__ __forceinline__ bool window_sees(int t, int L, int b, int win, int causal) {
    return t >= L ? !causal || t - L <= b : win == 0 || t > L + b - win;
}

/* The pipeline over the split's tiles, calling step(buffer, first key, keys valid) per tile. */
#define PIPELINE(STEP)                                                                             \
    const int ntiles = (k1 - k0 + KT - 1) / KT;                                                    \
    for (int p = 0; p < stages - 1; p++) {                                                         \
        if (p < ntiles)                                                                            \
            stage_tile(ks + p * KT * ld, vs + p * KT * ld, ld, k_ctx, v_ctx, k_blk, v_blk, off, L, \
                       r, B, Hkv, j, dh, k0 + p * KT, k1, KT, gran);                               \
        ft_cp_async_commit();                                                                      \
    }                                                                                              \
    for (int it = 0; it < ntiles; it++) {                                                          \
        const int nx = it + stages - 1;                                                            \
        if (nx < ntiles)                                                                           \
            stage_tile(ks + (nx % stages) * KT * ld, vs + (nx % stages) * KT * ld, ld, k_ctx,      \
                       v_ctx, k_blk, v_blk, off, L, r, B, Hkv, j, dh, k0 + nx * KT, k1, KT, gran); \
        ft_cp_async_commit();                                                                      \
        wait_stage(stages);                                                                        \
        __syncthreads();                                                                           \
        const int t0 = k0 + it * KT, nvalid = k1 - t0 < KT ? k1 - t0 : KT;                         \
        STEP(ks + (it % stages) * KT * ld, vs + (it % stages) * KT * ld, nvalid);                  \
        __syncthreads();                                                                           \
    }

/* The parameters of decode_simt and of decode_mma, its tensor-core variant. */
#define DECODE_PARAMS                                                                              \
    const st_t *__restrict__ q, const int *__restrict__ lens, const st_t *__restrict__ k_ctx,      \
        const st_t *__restrict__ v_ctx, const st_t *__restrict__ k_blk,                            \
        const st_t *__restrict__ v_blk, st_t *__restrict__ o, st_t *__restrict__ lse,              \
        float *__restrict__ po, float *__restrict__ plse, int B, int Hq, int Hkv, int dh, int KT,  \
        int stages, int ld, int gran, int tpr, float scale, int win, int causal

#if !FT_MMA
/* ==== CUDA cores ============================================================================== */

/* decode_simt's accesses of q, the staged K/V rows, o and the partial o: FT_DVEC consecutive
 * elements (aligned to their size) as one vector, dvec_t in the storage type and pvec_t (at most
 * 16 bytes, PVEC floats) for the fp32 partial o. ft_vld / ft_vst move them at the kernel's own
 * lines (which the memory profile names); these convert them from and to floats. */
#if FT_BF16 && FT_DVEC == 8
typedef uint4 dvec_t;
#elif FT_BF16 && FT_DVEC == 4
typedef uint2 dvec_t;
#elif FT_BF16 && FT_DVEC == 2
typedef uint32_t dvec_t;
#elif FT_DVEC == 4
typedef float4 dvec_t;
#elif FT_DVEC == 2
typedef float2 dvec_t;
#else
typedef st_t dvec_t;
#endif
#if FT_DVEC >= 4
#define PVEC 4
typedef float4 pvec_t;
#elif FT_DVEC == 2
#define PVEC 2
typedef float2 pvec_t;
#else
#define PVEC 1
typedef float pvec_t;
#endif

__device__ __forceinline__ void dvec_unpack(const dvec_t &v, float *x) {
#if FT_BF16 && FT_DVEC == 8
    ft_unpack_bf16x2(v.x, &x[0], &x[1]);
    ft_unpack_bf16x2(v.y, &x[2], &x[3]);
    ft_unpack_bf16x2(v.z, &x[4], &x[5]);
    ft_unpack_bf16x2(v.w, &x[6], &x[7]);
#elif FT_BF16 && FT_DVEC == 4
    ft_unpack_bf16x2(v.x, &x[0], &x[1]);
    ft_unpack_bf16x2(v.y, &x[2], &x[3]);
#elif FT_BF16 && FT_DVEC == 2
    ft_unpack_bf16x2(v, &x[0], &x[1]);
#elif FT_DVEC == 4
    x[0] = v.x, x[1] = v.y, x[2] = v.z, x[3] = v.w;
#elif FT_DVEC == 2
    x[0] = v.x, x[1] = v.y;
#elif FT_BF16
    x[0] = __bfloat162float(v);
#else
    x[0] = v;
#endif
}

__device__ __forceinline__ dvec_t dvec_pack(const float *x) {
#if FT_BF16 && FT_DVEC == 8
    return make_uint4(ft_pack_bf16x2(x[0], x[1]), ft_pack_bf16x2(x[2], x[3]),
                      ft_pack_bf16x2(x[4], x[5]), ft_pack_bf16x2(x[6], x[7]));
#elif FT_BF16 && FT_DVEC == 4
    return make_uint2(ft_pack_bf16x2(x[0], x[1]), ft_pack_bf16x2(x[2], x[3]));
#elif FT_BF16 && FT_DVEC == 2
    return ft_pack_bf16x2(x[0], x[1]);
#elif FT_DVEC == 4
    return make_float4(x[0], x[1], x[2], x[3]);
#elif FT_DVEC == 2
    return make_float2(x[0], x[1]);
#elif FT_BF16
    return __float2bfloat16(x[0]);
#else
    return x[0];
#endif
}

__device__ __forceinline__ pvec_t pvec_pack(const float *x) {
#if PVEC == 4
    return make_float4(x[0], x[1], x[2], x[3]);
#elif PVEC == 2
    return make_float2(x[0], x[1]);
#else
    return x[0];
#endif
}

#if FT_KEEP(decode_simt)
/* At least one CTA per SM, said explicitly: with the block size alone, ptxas (CUDA 13.0, sm_90a)
 * squeezed some modules down to an occupancy step and spilled (bf16 FT_DPT 16 into 64 registers
 * where 78 fit without, bf16 FT_DPT 32 at odd dh into 128). */
extern "C" __global__ void __launch_bounds__(MAXT, 1) decode_simt(DECODE_PARAMS) {
    FT_DYNAMIC_SMEM(st_t, ks);
    st_t *vs = ks + stages * KT * ld;
    const int s = blockIdx.x, splits = gridDim.x, j = blockIdx.y, r = blockIdx.z;
    const int G = Hq / Hkv, M = B * G;
    /* A warp holds 32 / tpr row slots; a slot's threads are lanes 32 / tpr apart, so the lanes
     * of one phase of a vector access share a sub (or few): broadcasts, not bank conflicts. */
    const int spw = 32 / tpr, lane = threadIdx.x & 31;
    const int slot = (threadIdx.x >> 5) * spw + lane % spw, sub = lane / spw;
    const bool active = slot < M;
    const int b = active ? slot / G : 0, g = active ? slot % G : 0;
    int L;
    const int off = ctx_start(lens, r, &L);
    const int cs = window_start(L, win);
    int k0, k1;
    split_range(cs, L + B - cs, splits, s, &k0, &k1);

    /* The thread's dims [d0, d0 + FT_DPT), in chunks of FT_DVEC: a chunk lies wholly inside dh
     * or wholly past it (the host's choice of FT_DVEC), and one past it is neither read nor
     * written (its q is zero). */
    const int d0 = sub * FT_DPT;
    const float qs = scale * LOG2E;
    float qr[FT_DPT], acc[FT_DPT];
    const st_t *qrow = q + ((size_t)(r * B + b) * Hq + j * G + g) * dh + d0;
#pragma unroll
    for (int i = 0; i < FT_DPT; i += FT_DVEC) {
        if (active && d0 + i < dh) {
            dvec_unpack(ft_vld<dvec_t>(qrow + i), &qr[i]);
#pragma unroll
            for (int e = 0; e < FT_DVEC; e++)
                qr[i + e] *= qs;
        } else {
#pragma unroll
            for (int e = 0; e < FT_DVEC; e++)
                qr[i + e] = 0.0f;
        }
    }
#pragma unroll
    for (int i = 0; i < FT_DPT; i++)
        acc[i] = 0.0f;
    float mrow = -INFINITY, lrow = 0.0f;

#define SIMT_STEP(KS, VS, NVALID)                                                                  \
    for (int c0 = 0; c0 < (NVALID); c0 += SSTEP) {                                                 \
        float sc[SSTEP];                                                                           \
        float mx = -INFINITY;                                                                      \
        _Pragma("unroll") for (int kk = 0; kk < SSTEP; kk++) {                                     \
            const st_t *kr = (KS) + (c0 + kk) * ld + d0;                                           \
            float dot = 0.0f;                                                                      \
            _Pragma("unroll") for (int i = 0; i < FT_DPT; i += FT_DVEC) {                          \
                if (d0 + i < dh) {                                                                 \
                    float x[FT_DVEC];                                                              \
                    dvec_unpack(ft_vld<dvec_t>(kr + i), x);                                        \
                    _Pragma("unroll") for (int e = 0; e < FT_DVEC; e++) dot =                      \
                        fmaf(qr[i + e], x[e], dot);                                                \
                }                                                                                  \
            }                                                                                      \
            for (int w = 16; w >= spw; w >>= 1)                                                    \
                dot += __shfl_xor_sync(0xffffffffu, dot, w);                                       \
            const bool vis_ = c0 + kk < (NVALID) && window_sees(t0 + c0 + kk, L, b, win, causal);  \
            sc[kk] = vis_ ? dot : -INFINITY;                                                       \
            mx = fmaxf(mx, sc[kk]);                                                                \
        }                                                                                          \
        const float mnew = fmaxf(mrow, mx), mref = mnew == -INFINITY ? 0.0f : mnew;                \
        const float alpha = exp2f(mrow - mref);                                                    \
        mrow = mnew;                                                                               \
        lrow *= alpha;                                                                             \
        _Pragma("unroll") for (int i = 0; i < FT_DPT; i++) acc[i] *= alpha;                        \
        _Pragma("unroll") for (int kk = 0; kk < SSTEP; kk++) {                                     \
            const float p = exp2f(sc[kk] - mref);                                                  \
            lrow += p;                                                                             \
            const st_t *vr = (VS) + (c0 + kk) * ld + d0;                                           \
            _Pragma("unroll") for (int i = 0; i < FT_DPT; i += FT_DVEC) {                          \
                if (d0 + i < dh) {                                                                 \
                    float x[FT_DVEC];                                                              \
                    dvec_unpack(ft_vld<dvec_t>(vr + i), x);                                        \
                    _Pragma("unroll") for (int e = 0; e < FT_DVEC; e++) acc[i + e] =               \
                        fmaf(p, x[e], acc[i + e]);                                                 \
                }                                                                                  \
            }                                                                                      \
        }                                                                                          \
    }

    PIPELINE(SIMT_STEP)
#undef SIMT_STEP

    /* Every slot of a processed step had a valid key, so lrow > 0 unless the range is empty. */
    const float inv = lrow > 0.0f ? 1.0f / lrow : 0.0f;
    const float l2 = lrow > 0.0f ? (mrow + log2f(lrow)) * LN2 : -INFINITY;
    if (!active) return;
#pragma unroll
    for (int i = 0; i < FT_DPT; i++)
        acc[i] *= inv;
    if (splits == 1) {
        st_t *orow = o + ((size_t)(r * B + b) * Hq + j * G + g) * dh + d0;
#pragma unroll
        for (int i = 0; i < FT_DPT; i += FT_DVEC)
            if (d0 + i < dh) ft_vst(orow + i, dvec_pack(&acc[i]));
        if (sub == 0) ft_stf(lse + (size_t)(r * B + b) * Hq + j * G + g, l2);
    } else {
        const size_t prow = ((size_t)(r * splits + s) * Hkv + j) * M + slot;
        float *prow_o = po + prow * dh + d0;
#pragma unroll
        for (int i = 0; i < FT_DPT; i += FT_DVEC)
            if (d0 + i < dh) {
#pragma unroll
                for (int h = 0; h < FT_DVEC; h += PVEC)
                    ft_vst(prow_o + i + h, pvec_pack(&acc[i + h]));
            }
        if (sub == 0) plse[prow] = l2;
    }
}
FT_KERNEL_EXPORT(decode_simt)
#endif

#else
/* ==== tensor cores ============================================================================ */

#define NKS (FT_DH / 16) /* k-steps of S = Q K^T */
#define NDT (FT_DH / 8)  /* n8 tiles of O */

#if FT_KEEP(decode_mma)
extern "C" __global__ void __launch_bounds__(MAXT) decode_mma(DECODE_PARAMS) {
    (void)tpr;
    FT_DYNAMIC_SMEM(st_t, ks);
    st_t *vs = ks + stages * KT * ld;
    st_t *qs_ = vs + stages * KT * ld; /* Q tile: warps * FT_TPW * 16 rows of ld */
    const int s = blockIdx.x, splits = gridDim.x, j = blockIdx.y, r = blockIdx.z;
    const int G = Hq / Hkv, M = B * G;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, gq = lane >> 2, cq = lane & 3;
    int L;
    const int off = ctx_start(lens, r, &L);
    const int cs = window_start(L, win);
    int k0, k1;
    split_range(cs, L + B - cs, splits, s, &k0, &k1);

    /* Stage Q (rows past M zero), 8 bf16 per copy: dh is a multiple of 16. */
    const int QR = (int)(blockDim.x >> 5) * FT_TPW * 16;
    for (int e = threadIdx.x; e < QR * (FT_DH / 8); e += blockDim.x) {
        const int m = e / (FT_DH / 8), c = e % (FT_DH / 8);
        st_t *dst = qs_ + m * ld + c * 8;
        if (m < M) {
            const int b = m / G, g = m % G;
            ft_cp_async_cg16(dst, q + ((size_t)(r * B + b) * Hq + j * G + g) * FT_DH + c * 8);
        } else {
            ft_cp_async_cg16(dst, q, 0);
        }
    }
    ft_cp_async_commit();
    ft_cp_async_wait_all();
    __syncthreads();

    uint32_t qa[FT_TPW][NKS][4];
    float acc[FT_TPW][NDT][4];
    float mrow[FT_TPW][2], lrow[FT_TPW][2];
#pragma unroll
    for (int u = 0; u < FT_TPW; u++) {
        const int row0 = (warp * FT_TPW + u) * 16;
#pragma unroll
        for (int k = 0; k < NKS; k++)
            ft_ldmatrix_x4(qa[u][k], qs_ + (row0 + (lane & 15)) * ld + k * 16 + (lane >> 4) * 8);
#pragma unroll
        for (int n = 0; n < NDT; n++)
            acc[u][n][0] = acc[u][n][1] = acc[u][n][2] = acc[u][n][3] = 0.0f;
        mrow[u][0] = mrow[u][1] = -INFINITY;
        lrow[u][0] = lrow[u][1] = 0.0f;
    }
    const float qsc = scale * LOG2E;

#define MMA_STEP(KS, VS, NVALID)                                                                   \
    for (int c0 = 0; c0 < (NVALID); c0 += KSTEP) {                                                 \
        /* K fragments of keys c0..c0+15 for every k-step: shared by the warp's tiles. */          \
        uint32_t kb[NKS][4];                                                                       \
        _Pragma("unroll") for (int k = 0; k < NKS; k++) ft_ldmatrix_x4(                            \
            kb[k], (KS) + (c0 + (lane & 7) + ((lane >> 4) << 3)) * ld + k * 16 +                   \
                       (((lane >> 3) & 1) << 3));                                                  \
        _Pragma("unroll") for (int u = 0; u < FT_TPW; u++) {                                       \
            float sc[2][4];                                                                        \
            _Pragma("unroll") for (int h = 0; h < 2; h++) {                                        \
                sc[h][0] = sc[h][1] = sc[h][2] = sc[h][3] = 0.0f;                                  \
                _Pragma("unroll") for (int k = 0; k < NKS; k++) {                                  \
                    const uint32_t bb[2] = {kb[k][2 * h], kb[k][2 * h + 1]};                       \
                    ft_mma_m16n8k16_bf16(sc[h], qa[u][k], bb, sc[h]);                              \
                }                                                                                  \
            }                                                                                      \
            float mx0 = -INFINITY, mx1 = -INFINITY;                                                \
            _Pragma("unroll") for (int h = 0; h < 2; h++) _Pragma("unroll") for (int e = 0; e < 4; \
                                                                                 e++) {            \
                const int key = c0 + h * 8 + 2 * cq + (e & 1);                                     \
                const int qb = ((warp * FT_TPW + u) * 16 + gq + 8 * (e >> 1)) / G;                 \
                const bool vis_ = key < (NVALID) && window_sees(t0 + key, L, qb, win, causal);     \
                sc[h][e] = vis_ ? sc[h][e] * qsc : -INFINITY;                                      \
                if (e < 2) mx0 = fmaxf(mx0, sc[h][e]);                                             \
                else mx1 = fmaxf(mx1, sc[h][e]);                                                   \
            }                                                                                      \
            mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffffu, mx0, 1));                                \
            mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffffu, mx0, 2));                                \
            mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffffu, mx1, 1));                                \
            mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffffu, mx1, 2));                                \
            const float mx0n = fmaxf(mrow[u][0], mx0), mx1n = fmaxf(mrow[u][1], mx1);              \
            /* a row that has seen no key yet keeps max -inf; exponents against 0 stay 0 */        \
            const float mn0 = mx0n == -INFINITY ? 0.0f : mx0n, mn1 = mx1n == -INFINITY ? 0.0f : mx1n; \
            const float al0 = exp2f(mrow[u][0] - mn0), al1 = exp2f(mrow[u][1] - mn1);              \
            mrow[u][0] = mx0n;                                                                     \
            mrow[u][1] = mx1n;                                                                     \
            float p[2][4];                                                                         \
            float ls0 = 0.0f, ls1 = 0.0f;                                                          \
            _Pragma("unroll") for (int h = 0; h < 2; h++) {                                        \
                p[h][0] = exp2f(sc[h][0] - mn0);                                                   \
                p[h][1] = exp2f(sc[h][1] - mn0);                                                   \
                p[h][2] = exp2f(sc[h][2] - mn1);                                                   \
                p[h][3] = exp2f(sc[h][3] - mn1);                                                   \
                ls0 += p[h][0] + p[h][1];                                                          \
                ls1 += p[h][2] + p[h][3];                                                          \
            }                                                                                      \
            lrow[u][0] = lrow[u][0] * al0 + ls0;                                                   \
            lrow[u][1] = lrow[u][1] * al1 + ls1;                                                   \
            const uint32_t pa[4] = {ft_pack_bf16x2(p[0][0], p[0][1]),                              \
                                    ft_pack_bf16x2(p[0][2], p[0][3]),                              \
                                    ft_pack_bf16x2(p[1][0], p[1][1]),                              \
                                    ft_pack_bf16x2(p[1][2], p[1][3])};                             \
            _Pragma("unroll") for (int n = 0; n < NDT; n += 2) {                                   \
                uint32_t vb[4];                                                                    \
                ft_ldmatrix_x4_trans(vb, (VS) + (c0 + (lane & 7) + (((lane >> 3) & 1) << 3)) * ld + \
                                             n * 8 + ((lane >> 4) << 3));                          \
                _Pragma("unroll") for (int h = 0; h < 2; h++) {                                    \
                    float *a4 = acc[u][n + h];                                                     \
                    a4[0] *= al0;                                                                  \
                    a4[1] *= al0;                                                                  \
                    a4[2] *= al1;                                                                  \
                    a4[3] *= al1;                                                                  \
                    const uint32_t bb[2] = {vb[2 * h], vb[2 * h + 1]};                             \
                    ft_mma_m16n8k16_bf16(a4, pa, bb, a4);                                          \
                }                                                                                  \
            }                                                                                      \
        }                                                                                          \
    }

    PIPELINE(MMA_STEP)
#undef MMA_STEP

#pragma unroll
    for (int u = 0; u < FT_TPW; u++) {
#pragma unroll
        for (int h = 0; h < 2; h++) {
            float l = lrow[u][h];
            l += __shfl_xor_sync(0xffffffffu, l, 1);
            l += __shfl_xor_sync(0xffffffffu, l, 2);
            const int m = (warp * FT_TPW + u) * 16 + gq + 8 * h;
            if (m >= M) continue;
            const float inv = l > 0.0f ? 1.0f / l : 0.0f;
            const float l2 = l > 0.0f ? (mrow[u][h] + log2f(l)) * LN2 : -INFINITY;
            const int b = m / G, g = m % G;
            if (splits == 1) {
                st_t *orow = o + ((size_t)(r * B + b) * Hq + j * G + g) * FT_DH;
#pragma unroll
                for (int n = 0; n < NDT; n++)
                    ft_st_bf16x2(orow + n * 8 + 2 * cq,
                                 __floats2bfloat162_rn(acc[u][n][2 * h] * inv,
                                                       acc[u][n][2 * h + 1] * inv));
                if (cq == 0) ft_stf(lse + (size_t)(r * B + b) * Hq + j * G + g, l2);
            } else {
                const size_t prow = ((size_t)(r * splits + s) * Hkv + j) * M + m;
#pragma unroll
                for (int n = 0; n < NDT; n++)
                    ft_vst(po + prow * FT_DH + n * 8 + 2 * cq,
                           make_float2(acc[u][n][2 * h] * inv, acc[u][n][2 * h + 1] * inv));
                if (cq == 0) plse[prow] = l2;
            }
        }
    }
}
FT_KERNEL_EXPORT(decode_mma)
#endif
#endif

/* ==== the split-KV merge ====================================================================== */

#if FT_KEEP(decode_merge)
extern "C" __global__ void __launch_bounds__(128)
    decode_merge(const float *__restrict__ po, const float *__restrict__ plse,
                 st_t *__restrict__ o, st_t *__restrict__ lse, int R, int B, int Hq, int Hkv,
                 int dh, int splits) {
    const int row = blockIdx.x * 4 + (threadIdx.x >> 5), lane = threadIdx.x & 31;
    if (row >= R * B * Hq) return; /* whole warps: no collective below */
    const int r = row / (B * Hq), b = (row / Hq) % B, h = row % Hq;
    const int G = Hq / Hkv, j = h / G, M = B * G, m = b * G + h % G;
    float mx = -INFINITY;
    for (int s = 0; s < splits; s++)
        mx = fmaxf(mx, plse[((size_t)(r * splits + s) * Hkv + j) * M + m]);
    float sum = 0.0f;
    for (int s = 0; s < splits; s++)
        sum += expf(plse[((size_t)(r * splits + s) * Hkv + j) * M + m] - mx);
    const float tot = mx + logf(sum);
    for (int d = lane; d < dh; d += 32) {
        float a = 0.0f;
        for (int s = 0; s < splits; s++) {
            const size_t pr = ((size_t)(r * splits + s) * Hkv + j) * M + m;
            const float w = expf(plse[pr] - tot);
            if (w > 0.0f) a = fmaf(w, po[pr * dh + d], a);
        }
        ft_stf(o + (size_t)row * dh + d, a);
    }
    if (lane == 0) ft_stf(lse + row, tot);
}
FT_KERNEL_EXPORT(decode_merge)
#endif
