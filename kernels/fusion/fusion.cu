/* fusion.cu: the kernels of the two context-fusion ops on CUDA (SPEC.md fusion.dflare,
 * fusion.dflash); the host side that sizes and sequences them is kernels/fusion/fusion_cuda.c.
 *
 * ---- fusion.dflare ----
 *   a[i,:] = softmax(w[i,:]);  s[i,n,:] = sum_t a[i,t] x[n,t,:];  f[i,n,:] = rmsnorm(s) * g
 * Napkin math at qwen3-8b dflare (N = 8192, T = 9, H = 4096, D = 7), bf16: x is 604 MB, f
 * 470 MB, 2*D*T*N*H = 4.2 GFLOP (4 FLOP/byte): memory-bound; at the H200's ~4.3 TB/s of copy
 * bandwidth the floor is ~250 us. So x is read exactly once and f written once. A block takes
 * one row group (blockDim.y rows of blockDim.x threads); blockIdx.y is the pass, `per_pass`
 * layers (all D: x crosses the bus once; 1: once per layer; k: ceil(D/k) times). The softmax of
 * w (D*T numbers) is computed by every block into shared memory. A thread takes its FT_CPT
 * vectors of FT_VEC_ELEMS elements of each of the T rows x[n,t,:] (16-byte accesses at
 * FT_VEC_ELEMS*sizeof = 16: a warp reads 512 contiguous bytes), then per layer: s = sum_t a[i,t] x_t, the row's sum of
 * squares (shuffles, then one round through shared memory when a row spans several warps),
 * f = s * r * g stored as vectors. Three ways to hold the row:
 *   dflare_fwd       x in registers (the x tile, T * CPT * VEC floats), one layer per round;
 *   dflare_fwd_smem  x staged in shared memory by cp.async and re-read per group of layers,
 *                    whose mixes are held together and reduced in one round (one barrier per
 *                    group); at most 64 registers, so two 512-thread blocks share an SM;
 *   dflare_fwd_mma   (bf16) x staged, the mix on the tensor cores (see the kernel).
 * Measured on an H200 at that shape (copy: 4.2 TB/s read + write): the register tile 488 us (one
 * block per SM, a barrier per layer), staged with 4 layers per round 421 us (61% of copy; 802 us
 * with one layer per round): the 63 FMAs per output element, their operand loads and the
 * barriers, not the memory, set the pace, hence the tensor-core variant.
 * Backward (the forward output f is written by the same kernel):
 *   ds_i = r_i g df_i - s_i r_i^3 mean(g df_i s_i),  dx_t = sum_i a[i,t] ds_i,
 *   da[i,t] = sum_{n,h} ds_i x_t,  dg = sum_{n,i} df_i s_i r_i,  dw_i = a_i (da_i - a_i . da_i).
 *   dflare_bwd(_smem) runs on a persistent grid (a few blocks per SM, each looping over row
 *   groups) with the x tile in registers and dx accumulated in registers or (_smem) in shared
 *   memory, so that the reductions over N leave one partial per block: dg in registers per
 *   thread, da per warp in shared memory; at the end each row group writes its dg partial row and
 * each block its da partial, or (FT reduce=atomic) adds them with atomics into zeroed float
 * accumulators. dflare_bwd_reduce sums the partials in a fixed order (deterministic for a fixed
 * config and device), converts dg and forms dw with the softmax Jacobian. With several passes each
 * pass is one launch that adds its layers' share to dx and to the dg partials.
 *
 * ---- fusion.dflash ----
 *   c = x.reshape(N, T*H) @ w_fc^T (ft_cuda_gemm: cuBLASLt), f = rmsnorm(c) * g
 *   dflash_norm: rows of c (float32 scratch) -> f; dflash_norm_ip: c stored in f (the storage
 *   type), normalised in place. dflash_norm_bwd(_ip): f, dc = r g df - c r^3 mean(g df c)
 *   (stored in the storage type: the next GEMMs read it) and per-row-group dg partials;
 *   dflash_dg sums them. The vector width is a run-time argument here (one kernel per width,
 *   picked by a switch): these loops re-read their row instead of holding it, so nothing about
 *   their registers depends on it.
 *
 * Defines (tunables that shape registers, and the storage type):
 *   FT_FUSION  1: the dflare kernels, 2: the dflash kernels, 3 (default): both
 *   FT_BF16       1: every float tensor of the call is __nv_bfloat16 on the device, else float;
 *                 arithmetic is float32 either way
 *   FT_T          dflare: target layers T (the x tile is T x FT_CPT x FT_VEC_ELEMS floats)
 *   FT_VEC_ELEMS  dflare: elements per vector access (1, 2, 4, 8; at most 16 bytes: the
 *                 tunable vec_bytes / the element size)
 *   FT_CPT        dflare: vectors per thread per target row, the tunable vecs_per_thread
 *                 (threads per row = H / (FT_VEC_ELEMS * FT_CPT))
 *   FT_DX         dflare backward: 1 (default) forms dx; 0 (the attribute want_dx = 0: the
 *                 target's states are frozen, as in training) leaves dx alone, and holds no
 *                 accumulators for it
 * Everything else (N, H, D, layers per pass, rows per block, eps) is a kernel argument.
 */
#include "ft_cuda.h"

#ifndef FT_FUSION
#define FT_FUSION 3
#endif
#ifndef FT_T
#define FT_T 9
#endif
#ifndef FT_VEC_ELEMS
#define FT_VEC_ELEMS 4
#endif
#ifndef FT_CPT
#define FT_CPT 1
#endif
#ifndef FT_DX
#define FT_DX 1
#endif


static_assert(FT_VEC_ELEMS == 1 || FT_VEC_ELEMS == 2 || FT_VEC_ELEMS == 4 || FT_VEC_ELEMS == 8,
              "FT_VEC_ELEMS: 1, 2, 4 or 8");
static_assert(FT_VEC_ELEMS * sizeof(st_t) <= 16,
              "FT_VEC_ELEMS: a vector access is at most 16 bytes");
static_assert(FT_CPT >= 1 && FT_CPT <= 8, "FT_CPT: 1 to 8 vectors per thread");
static_assert(FT_T >= 1 && FT_T <= 64, "FT_T: 1 to 64 target layers");

/* ---- loads and stores of V consecutive elements, widened to / narrowed from float ---------- */

__device__ __forceinline__ float ld1(const float *p) { return *p; }
__device__ __forceinline__ float ld1(const __nv_bfloat16 *p) { return __bfloat162float(*p); }
__device__ __forceinline__ void st1(float *p, float v) { *p = v; }
__device__ __forceinline__ void st1(__nv_bfloat16 *p, float v) { *p = __float2bfloat16(v); }

template <int V> __device__ __forceinline__ void ldv(const float *p, float *o) {
    if constexpr (V == 1) {
        o[0] = p[0];
    } else if constexpr (V == 2) {
        float2 v = ft_vld<float2>(p);
        o[0] = v.x;
        o[1] = v.y;
    } else {
#pragma unroll
        for (int k = 0; k < V; k += 4) {
            float4 v = ft_ld_float4(p + k);
            o[k] = v.x;
            o[k + 1] = v.y;
            o[k + 2] = v.z;
            o[k + 3] = v.w;
        }
    }
}

template <int V> __device__ __forceinline__ void ldv(const __nv_bfloat16 *p, float *o) {
    if constexpr (V == 1) {
        o[0] = __bfloat162float(p[0]);
    } else if constexpr (V == 2) {
        __nv_bfloat162 v = ft_ld_bf16x2(p);
        o[0] = __low2float(v);
        o[1] = __high2float(v);
    } else if constexpr (V == 4) {
        uint2 v = ft_vld<uint2>(p);
        ft_unpack_bf16x2(v.x, &o[0], &o[1]);
        ft_unpack_bf16x2(v.y, &o[2], &o[3]);
    } else {
        ft_ld_bf16x8(p, o);
    }
}

template <int V> __device__ __forceinline__ void stv(float *p, const float *v) {
    if constexpr (V == 1) {
        p[0] = v[0];
    } else if constexpr (V == 2) {
        ft_vst(p, make_float2(v[0], v[1]));
    } else {
#pragma unroll
        for (int k = 0; k < V; k += 4)
            ft_st_float4(p + k, make_float4(v[k], v[k + 1], v[k + 2], v[k + 3]));
    }
}

template <int V> __device__ __forceinline__ void stv(__nv_bfloat16 *p, const float *v) {
    if constexpr (V == 1) {
        p[0] = __float2bfloat16(v[0]);
    } else if constexpr (V == 2) {
        ft_st_bf16x2(p, __floats2bfloat162_rn(v[0], v[1]));
    } else if constexpr (V == 4) {
        ft_vst(p, make_uint2(ft_pack_bf16x2(v[0], v[1]), ft_pack_bf16x2(v[2], v[3])));
    } else {
        ft_st_bf16x8(p, v);
    }
}

/* ---- reductions over one row's threads ------------------------------------------------------ */

/* The sum of v over the blockDim.x threads of this thread's row (threadIdx.y), returned to all of
 * them. A row of one warp needs only shuffles; a row of several warps goes through `slot` (one
 * float per warp of the block, 32 at most) and one __syncthreads, which every thread of the block
 * reaches (the branch is uniform). Consecutive calls must alternate between two slots: a call's
 * slot is rewritten only after the next call's barrier, which every reader of it has passed. */
__device__ __forceinline__ float row_sum(float v, float *slot) {
    v = ft_warp_sum(v);
    if (blockDim.x == 32) return v;
    const int nw = (int)blockDim.x >> 5, w0 = (int)threadIdx.y * nw;
    if ((threadIdx.x & 31) == 0) slot[w0 + ((int)threadIdx.x >> 5)] = v;
    __syncthreads();
    float s = 0.0f;
    for (int k = 0; k < nw; k++)
        s += slot[w0 + k];
    return s;
}

/* Two sums at once (slot: two floats per warp), one barrier. */
__device__ __forceinline__ void row_sum2(float *u, float *v, float *slot) {
    float a = ft_warp_sum(*u), b = ft_warp_sum(*v);
    if (blockDim.x == 32) {
        *u = a;
        *v = b;
        return;
    }
    const int nw = (int)blockDim.x >> 5, w0 = (int)threadIdx.y * nw;
    if ((threadIdx.x & 31) == 0) {
        slot[2 * (w0 + ((int)threadIdx.x >> 5))] = a;
        slot[2 * (w0 + ((int)threadIdx.x >> 5)) + 1] = b;
    }
    __syncthreads();
    a = 0.0f;
    b = 0.0f;
    for (int k = 0; k < nw; k++) {
        a += slot[2 * (w0 + k)];
        b += slot[2 * (w0 + k) + 1];
    }
    *u = a;
    *v = b;
}

/* Layers computed per sweep over the row and per reduction round (at most). */
#define GMAX 4

/* The sums of v[0..n) (n <= GMAX, the same in every thread of the block) over the row's threads,
 * in one round: slot holds GMAX floats per warp of the block. Same slot rule as row_sum. */
__device__ __forceinline__ void row_sumN(float (&v)[GMAX], int n, float *slot) {
#pragma unroll
    for (int q = 0; q < GMAX; q++)
        if (q < n) v[q] = ft_warp_sum(v[q]);
    if (blockDim.x == 32) return;
    const int nw = (int)blockDim.x >> 5, w0 = (int)threadIdx.y * nw;
    if ((threadIdx.x & 31) == 0)
#pragma unroll
        for (int q = 0; q < GMAX; q++)
            if (q < n) slot[(w0 + ((int)threadIdx.x >> 5)) * GMAX + q] = v[q];
    __syncthreads();
#pragma unroll
    for (int q = 0; q < GMAX; q++) {
        if (q >= n) continue;
        float s = 0.0f;
        for (int k = 0; k < nw; k++)
            s += slot[(w0 + k) * GMAX + q];
        v[q] = s;
    }
}

#if FT_FUSION & 1
/* ================================ fusion.dflare =============================================== */

#define T_ FT_T

/* a[i*T + t] = softmax(w[i, :])[t] for the nl layers of w (already offset to the first), by the
 * block's threads; the caller synchronises before reading. */
__device__ __forceinline__ void dl_softmax(const st_t *__restrict__ w, int nl, float *a, int tid,
                                           int nthr, int grp = 1) {
    for (int i = tid; i < nl; i += nthr) {
        /* grp > 1: layers in blocks of grp (the last one nl % grp), each block t-major, so that
         * the block's weights of one t are adjacent: a[blk * T + t * nb + (i - blk)]. */
        const int blk = i - i % grp, nb = min(grp, nl - blk);
        float *ai = a + blk * T_ + (i - blk);
        float m = -INFINITY;
        for (int t = 0; t < T_; t++)
            m = fmaxf(m, ld1(w + i * T_ + t));
        float sum = 0.0f;
        for (int t = 0; t < T_; t++)
            sum += expf(ld1(w + i * T_ + t) - m);
        const float inv = 1.0f / sum;
        for (int t = 0; t < T_; t++) /* the exponentials again: one store each, no re-read */
            ai[t * nb] = expf(ld1(w + i * T_ + t) - m) * inv;
    }
}

/* The register tile of x: T x FT_CPT vectors per thread, as loaded. bf16 stays packed two to a
 * register (half the registers, which decides how many blocks an SM holds) and is widened where
 * it is used (a shift or a mask); float, and bf16 one element at a time, are floats. */
#if FT_BF16 && FT_VEC_ELEMS >= 2
#define XW (FT_VEC_ELEMS / 2)
typedef uint32_t xw_t;
__device__ __forceinline__ float xget(const xw_t (&r)[XW], int v) {
    return (v & 1) ? __uint_as_float(r[v >> 1] & 0xffff0000u) : __uint_as_float(r[v >> 1] << 16);
}
__device__ __forceinline__ void xload(const st_t *p, xw_t (&r)[XW]) {
    if constexpr (XW == 1) {
        r[0] = *reinterpret_cast<const uint32_t *>(p);
    } else if constexpr (XW == 2) {
        uint2 v = ft_vld<uint2>(p);
        r[0] = v.x;
        r[1] = v.y;
    } else {
        uint4 v = ft_vld<uint4>(p);
        r[0] = v.x;
        r[1] = v.y;
        r[2] = v.z;
        r[3] = v.w;
    }
}
#else
#define XW FT_VEC_ELEMS
typedef float xw_t;
__device__ __forceinline__ float xget(const xw_t (&r)[XW], int v) { return r[v]; }
__device__ __forceinline__ void xload(const st_t *p, xw_t (&r)[XW]) { ldv<FT_VEC_ELEMS>(p, r); }
#endif
typedef xw_t xtile_t[T_][FT_CPT][XW];

/* This thread's slice of the T rows of x[row] (zeros past H or when !live); x may also be a
 * shared buffer laid out like it, with row its row in the buffer. */
__device__ __forceinline__ void dl_load_x(const st_t *__restrict__ x, long long row, bool live,
                                          int H, int nch, xtile_t &xr) {
#pragma unroll
    for (int j = 0; j < FT_CPT; j++) {
        const int ch = (int)threadIdx.x + j * (int)blockDim.x;
        const bool ok = live && ch < nch;
#pragma unroll
        for (int t = 0; t < T_; t++) {
            if (ok) {
                xload(x + (row * T_ + t) * (long long)H + (long long)ch * FT_VEC_ELEMS, xr[t][j]);
            } else {
#pragma unroll
                for (int v = 0; v < XW; v++)
                    xr[t][j][v] = 0;
            }
        }
    }
}

/* Zeroes a thread's accumulators: one [FT_CPT][FT_VEC_ELEMS] set, or R of them. */
__device__ __forceinline__ void dl_zero(float (&a)[FT_CPT][FT_VEC_ELEMS]) {
#pragma unroll
    for (int j = 0; j < FT_CPT; j++)
#pragma unroll
        for (int v = 0; v < FT_VEC_ELEMS; v++)
            a[j][v] = 0.0f;
}
template <int R> __device__ __forceinline__ void dl_zero(float (&a)[R][FT_CPT][FT_VEC_ELEMS]) {
#pragma unroll
    for (int r = 0; r < R; r++)
        dl_zero(a[r]);
}

__device__ __forceinline__ void dl_load_vec(const st_t *__restrict__ p, bool live, int nch,
                                            float (&r)[FT_CPT][FT_VEC_ELEMS]) {
#pragma unroll
    for (int j = 0; j < FT_CPT; j++) {
        const int ch = (int)threadIdx.x + j * (int)blockDim.x;
        if (live && ch < nch) {
            ldv<FT_VEC_ELEMS>(p + (long long)ch * FT_VEC_ELEMS, r[j]);
        } else {
#pragma unroll
            for (int v = 0; v < FT_VEC_ELEMS; v++)
                r[j][v] = 0.0f;
        }
    }
}

/* s = sum_t a[t] x_t over the thread's slice; returns sum s^2. */
__device__ __forceinline__ float dl_mix(const xtile_t &xr, const float *__restrict__ a,
                                        float (&s)[FT_CPT][FT_VEC_ELEMS]) {
    float ss = 0.0f;
#pragma unroll
    for (int j = 0; j < FT_CPT; j++)
#pragma unroll
        for (int v = 0; v < FT_VEC_ELEMS; v++) {
            float acc = a[0] * xget(xr[0][j], v);
#pragma unroll
            for (int t = 1; t < T_; t++)
                acc = fmaf(a[t], xget(xr[t][j], v), acc);
            s[j][v] = acc;
            ss = fmaf(acc, acc, ss);
        }
    return ss;
}

/* Copy this thread's slice of the T rows of x[row] into its own slots of buf ([rows][T][H], the
 * same offsets as in x for row threadIdx.y; no other thread reads them) with cp.async, and wait
 * for it. Nothing for a row past N. */
__device__ __forceinline__ void dl_stage_x(const st_t *__restrict__ x, st_t *buf, long long row,
                                           int N, int H, int nch) {
    if (row >= N) return;
#pragma unroll
    for (int j = 0; j < FT_CPT; j++) {
        const int ch = (int)threadIdx.x + j * (int)blockDim.x;
        if (ch >= nch) continue;
#pragma unroll
        for (int t = 0; t < T_; t++) {
            const st_t *src = x + (row * T_ + t) * (long long)H + (long long)ch * FT_VEC_ELEMS;
            st_t *dst = buf + ((long long)threadIdx.y * T_ + t) * H + (long long)ch * FT_VEC_ELEMS;
            if constexpr (FT_VEC_ELEMS * sizeof(st_t) == 16)
                ft_cp_async_cg16(dst, src);
            else if constexpr (FT_VEC_ELEMS * sizeof(st_t) == 8)
                ft_cp_async_ca8(dst, src);
            else if constexpr (FT_VEC_ELEMS * sizeof(st_t) == 4)
                ft_cp_async_ca4(dst, src);
            else
                *dst = *src; /* 2 bytes: below cp.async's smallest copy */
        }
    }
    ft_cp_async_commit();
    ft_cp_async_wait_all();
}

/* Forward. Grid (row groups, passes), block (threads per row, rows per block): blockIdx.y is the
 * pass, layers [y * per_pass, ...). Each thread takes its slice of the T rows of x once:
 *   stage = 0: into registers (the x tile; one block of a wide row fills an SM's registers);
 *   stage = 1: into shared memory by cp.async (few registers: several blocks per SM overlap
 *              one's loads with another's math), re-read per layer group.
 * Layers go `group` (<= GMAX) at a time: their mixes in registers, their sums of squares in one
 * reduction round (one barrier per group instead of per layer). Dynamic shared memory:
 * per_pass * T floats of softmax (rounded up to 16 bytes), then with stage = 1 rows * T * H
 * elements of x. */
template <int stage, int GM>
__device__ __forceinline__ void dl_fwd(const st_t *__restrict__ x, const st_t *__restrict__ w,
                                       const st_t *__restrict__ g, st_t *__restrict__ f, int N,
                                       int H, int D, int per_pass, int group, float eps) {
    FT_DYNAMIC_SMEM(float, a_s);
    st_t *xs = reinterpret_cast<st_t *>(a_s + ((per_pass * T_ + 3) & ~3));
    __shared__ float red[2][32 * GMAX];
    const int l0 = (int)blockIdx.y * per_pass;
    const int nl = min(per_pass, D - l0);
    const int tid = (int)(threadIdx.y * blockDim.x + threadIdx.x);
    dl_softmax(w + l0 * T_, nl, a_s, tid, (int)(blockDim.x * blockDim.y));

    const int nch = H / FT_VEC_ELEMS;
    const long long row = (long long)blockIdx.x * blockDim.y + threadIdx.y;
    const bool live = row < N;
    float gr[FT_CPT][FT_VEC_ELEMS];
    dl_load_vec(g, true, nch, gr);
    xtile_t xr;
    if constexpr (stage)
        dl_stage_x(x, xs, row, N, H, nch);
    else
        dl_load_x(x, row, live, H, nch, xr);
    __syncthreads();

    const float inv_h = 1.0f / (float)H;
    int it = 0; /* reduction rounds so far: alternates the slots of red */
    for (int i0 = 0; i0 < nl; i0 += group) {
        const int ng = min(group, nl - i0);
        float s[GM][FT_CPT][FT_VEC_ELEMS];
        dl_zero(s);
#pragma unroll
        for (int j = 0; j < FT_CPT; j++) {
            const int ch = (int)threadIdx.x + j * (int)blockDim.x;
            const bool ok = live && ch < nch;
#pragma unroll
            for (int t = 0; t < T_; t++) {
                float xv[FT_VEC_ELEMS];
                if constexpr (!stage) {
#pragma unroll
                    for (int v = 0; v < FT_VEC_ELEMS; v++)
                        xv[v] = xget(xr[t][j], v);
                } else if (ok) {
                    (void)xr;
                    ldv<FT_VEC_ELEMS>(xs + ((long long)threadIdx.y * T_ + t) * H +
                                          (long long)ch * FT_VEC_ELEMS,
                                      xv);
                } else {
#pragma unroll
                    for (int v = 0; v < FT_VEC_ELEMS; v++)
                        xv[v] = 0.0f;
                }
#pragma unroll
                for (int q = 0; q < GM; q++) {
                    if (q >= ng) continue;
                    const float aq = a_s[(i0 + q) * T_ + t];
#pragma unroll
                    for (int v = 0; v < FT_VEC_ELEMS; v++)
                        s[q][j][v] = fmaf(aq, xv[v], s[q][j][v]);
                }
            }
        }
        float ss[GMAX];
#pragma unroll
        for (int q = 0; q < GMAX; q++) {
            ss[q] = 0.0f;
            if (q >= GM) continue;
#pragma unroll
            for (int j = 0; j < FT_CPT; j++)
#pragma unroll
                for (int v = 0; v < FT_VEC_ELEMS; v++)
                    ss[q] = fmaf(s[q][j][v], s[q][j][v], ss[q]);
        }
        row_sumN(ss, ng, red[it++ & 1]);
        if (!live) continue;
#pragma unroll
        for (int q = 0; q < GM; q++) {
            if (q >= ng) continue;
            const float r = rsqrtf(ss[q] * inv_h + eps);
            st_t *fr = f + ((long long)(l0 + i0 + q) * N + row) * H;
#pragma unroll
            for (int j = 0; j < FT_CPT; j++) {
                const int ch = (int)threadIdx.x + j * (int)blockDim.x;
                if (ch >= nch) continue;
                float o[FT_VEC_ELEMS];
#pragma unroll
                for (int v = 0; v < FT_VEC_ELEMS; v++)
                    o[v] = s[q][j][v] * r * gr[j][v];
                stv<FT_VEC_ELEMS>(fr + (long long)ch * FT_VEC_ELEMS, o);
            }
        }
    }
}

#if FT_CPT == 1
/* The staged forward (dflare_fwd_smem) with one vector per thread per row (FT_CPT > 1: dl_fwd<1,
 * GMAX> above, whose per-vector accumulators these rounds would spill): x[row] staged in shared
 * memory by cp.async, then the layers `group` at a time. A round of R layers (R a template
 * argument: the full groups and the last, shorter one each get straight-line code, no per-layer
 * tests): per t one read of the thread's staged vector and one of the R weights (dl_softmax laid
 * them out t-major per group), R mixes in registers, their sums of squares in one reduction round,
 * R rows of f stored. A thread without a vector (a row past N, or ch >= nch) reads a zero vector
 * with stride 0 and stores nothing. Few registers (at most 64: two blocks of 512 threads per SM,
 * one's loads overlapping the other's math). Dynamic shared memory: per_pass * T floats of softmax
 * (rounded up to 16 bytes), then rows * T * H elements of x. */

/* v, as far as the compiler can tell, changed here: what is computed from it inside a loop is not
 * hoisted out of the loop (where the compiler would hold T addresses in registers, and spill). */
__device__ __forceinline__ int dl_opaque(int v) {
#if !defined(FT_EMU)
    asm volatile("" : "+r"(v));
#endif
    return v;
}

/* R consecutive floats of shared memory (aligned to their vector: see dl_softmax's layout). */
template <int R> __device__ __forceinline__ void dl_ldw(const float *p, float (&o)[R]) {
    if constexpr (R == 4) {
        const float4 v = ft_vld<float4>(p);
        o[0] = v.x, o[1] = v.y, o[2] = v.z, o[3] = v.w;
    } else if constexpr (R == 2) {
        const float2 v = ft_vld<float2>(p);
        o[0] = v.x, o[1] = v.y;
    } else {
#pragma unroll
        for (int q = 0; q < R; q++)
            o[q] = p[q];
    }
}

/* A staged vector widened to floats; bf16: the low half shifted up, the high half masked. */
__device__ __forceinline__ void dl_ldx(const st_t *p, float (&o)[FT_VEC_ELEMS]) {
#if FT_BF16 && FT_VEC_ELEMS >= 2
    xw_t r[XW];
    xload(p, r);
#pragma unroll
    for (int v = 0; v < FT_VEC_ELEMS; v++)
        o[v] = xget(r, v);
#else
    ldv<FT_VEC_ELEMS>(p, o);
#endif
}

/* Four warp sums at once: the four values halved between lane halves, then quarters, so that
 * lane l ends with the sum over the warp of v[l / 8] (6 shuffles instead of 20). Lanes that
 * hold the same sum hold the same bits (every step adds the same two numbers on both sides). */
__device__ __forceinline__ float dl_warp_sum4(const float (&v)[4], int lane) {
    const bool hi = lane & 16, odd = lane & 8;
    const float k0 = (hi ? v[2] : v[0]) + __shfl_xor_sync(0xffffffffu, hi ? v[0] : v[2], 16);
    const float k1 = (hi ? v[3] : v[1]) + __shfl_xor_sync(0xffffffffu, hi ? v[1] : v[3], 16);
    float m = (odd ? k1 : k0) + __shfl_xor_sync(0xffffffffu, odd ? k0 : k1, 8);
#pragma unroll
    for (int o = 4; o > 0; o >>= 1)
        m += __shfl_xor_sync(0xffffffffu, m, o);
    return m;
}

/* The sums of v[0..R) over the row's threads in one round: warp sums, then (a row of several
 * warps) each warp's sums into slot (GMAX floats per warp of the block), one barrier, and lane k
 * of every warp takes warp k's sums and the warp sums them again. Every thread of the row gets
 * the same values. R >= 3: four at once (dl_warp_sum4). Same slot rule as row_sum. */
template <int R> __device__ __forceinline__ void row_sumR(float (&v)[R], float *slot) {
    const int lane = (int)threadIdx.x & 31;
    if constexpr (R >= 3) {
        float v4[4] = {v[0], v[1], v[2], R == 4 ? v[R - 1] : 0.0f};
        float m = dl_warp_sum4(v4, lane);
        if (blockDim.x > 32) {
            const int nw = (int)blockDim.x >> 5, w0 = (int)threadIdx.y * nw;
            if ((lane & 7) == 0) slot[(w0 + ((int)threadIdx.x >> 5)) * GMAX + (lane >> 3)] = m;
            __syncthreads();
            float u[4] = {0.0f, 0.0f, 0.0f, 0.0f};
            if (lane < nw) dl_ldw<4>(slot + (w0 + lane) * GMAX, u);
            m = dl_warp_sum4(u, lane);
        }
#pragma unroll
        for (int q = 0; q < R; q++)
            v[q] = __shfl_sync(0xffffffffu, m, 8 * q);
    } else {
#pragma unroll
        for (int q = 0; q < R; q++)
            v[q] = ft_warp_sum(v[q]);
        if (blockDim.x == 32) return;
        const int nw = (int)blockDim.x >> 5, w0 = (int)threadIdx.y * nw;
        float *mine = slot + (w0 + ((int)threadIdx.x >> 5)) * GMAX;
        if (lane == 0)
#pragma unroll
            for (int q = 0; q < R; q++)
                mine[q] = v[q];
        __syncthreads();
        float u[R];
#pragma unroll
        for (int q = 0; q < R; q++)
            u[q] = 0.0f;
        if (lane < nw) dl_ldw<R>(slot + (w0 + lane) * GMAX, u);
#pragma unroll
        for (int q = 0; q < R; q++)
            v[q] = ft_warp_sum(u[q]);
    }
}

/* One round: layers l0 + i0 .. + R of this thread's vector. xp: the thread's staged vector
 * (its t-th row xstride further); a: the round's weights ([t][R]); fp: f at the
 * thread's first vector of layer l0 + i0 (the next layer N * H further), moved on by R layers;
 * st: whether it stores. */
template <int R>
__device__ __forceinline__ void dl_round(const st_t *xp, int xstride, const float *a,
                                         const xw_t (&gp)[FT_CPT][XW], st_t *&fp, int N, int H,
                                         bool st, float inv_h, float eps, float *slot) {
    float s[R][FT_CPT][FT_VEC_ELEMS];
#pragma unroll
    for (int j = 0; j < FT_CPT; j++) {
        const st_t *p = xp;
        const int step = dl_opaque(xstride); /* the next t: one add per round, not a register */
#pragma unroll
        for (int t = 0; t < T_; t++, p += step) {
            float xv[FT_VEC_ELEMS], aq[R];
            dl_ldx(p, xv);
            dl_ldw<R>(a + t * R, aq);
#pragma unroll
            for (int q = 0; q < R; q++)
#pragma unroll
                for (int v = 0; v < FT_VEC_ELEMS; v++)
                    s[q][j][v] = t ? fmaf(aq[q], xv[v], s[q][j][v]) : aq[q] * xv[v];
        }
    }
    float ss[R];
#pragma unroll
    for (int q = 0; q < R; q++) {
        ss[q] = 0.0f;
#pragma unroll
        for (int j = 0; j < FT_CPT; j++)
#pragma unroll
            for (int v = 0; v < FT_VEC_ELEMS; v++)
                ss[q] = fmaf(s[q][j][v], s[q][j][v], ss[q]);
    }
    row_sumR<R>(ss, slot);
    if (!st) return; /* (then it stores in no round: fp is not needed) */
    /* N * H made here, where it is used, rather than held through the rounds in two registers. */
    const long long lN = (long long)dl_opaque(N) * H;
    st_t *fq = fp;
    fp += R * lN;
#pragma unroll
    for (int q = 0; q < R; q++, fq += lN) {
        const float r = rsqrtf(ss[q] * inv_h + eps);
#pragma unroll
        for (int j = 0; j < FT_CPT; j++) {
            float o[FT_VEC_ELEMS];
#pragma unroll
            for (int v = 0; v < FT_VEC_ELEMS; v++)
                o[v] = s[q][j][v] * r * xget(gp[j], v);
            stv<FT_VEC_ELEMS>(fq + (long long)j * blockDim.x * FT_VEC_ELEMS, o);
        }
    }
}

/* The rounds of G layers, then the rest (fewer than G) in one shorter round. */
template <int G>
__device__ __forceinline__ void
dl_rounds(const st_t *xp, int xstride, const float *a_s, int nl, const xw_t (&gp)[FT_CPT][XW],
          st_t *fp, int N, int H, bool st, float inv_h, float eps, float (*red)[32 * GMAX]) {
    int i0 = 0, it = 0; /* it: reduction rounds so far, alternates the slots of red */
    for (; i0 + G <= nl; i0 += G)
        dl_round<G>(xp, xstride, a_s + i0 * T_, gp, fp, N, H, st, inv_h, eps, red[it++ & 1]);
    const int rest = nl - i0;
    if constexpr (G == 4) {
        if (rest == 3)
            dl_round<3>(xp, xstride, a_s + i0 * T_, gp, fp, N, H, st, inv_h, eps, red[it & 1]);
        else if (rest == 2)
            dl_round<2>(xp, xstride, a_s + i0 * T_, gp, fp, N, H, st, inv_h, eps, red[it & 1]);
    }
    if constexpr (G > 1) {
        if (rest == 1)
            dl_round<1>(xp, xstride, a_s + i0 * T_, gp, fp, N, H, st, inv_h, eps, red[it & 1]);
    }
}

__device__ __forceinline__ void
dl_fwd_staged(const st_t *__restrict__ x, const st_t *__restrict__ w, const st_t *__restrict__ g,
              st_t *__restrict__ f, int N, int H, int D, int per_pass, int group, float eps) {
    FT_DYNAMIC_SMEM(float, a_s);
    st_t *xs = reinterpret_cast<st_t *>(a_s + ((per_pass * T_ + 3) & ~3));
    __shared__ __align__(16) float red[2][32 * GMAX];
    __shared__ __align__(16) st_t zero_x[FT_VEC_ELEMS];
    const int G = group >= 4 ? 4 : group >= 2 ? 2 : 1;
    const int l0 = (int)blockIdx.y * per_pass;
    const int nl = min(per_pass, D - l0);
    const int tid = (int)(threadIdx.y * blockDim.x + threadIdx.x);
    dl_softmax(w + l0 * T_, nl, a_s, tid, (int)(blockDim.x * blockDim.y), G);
    if (tid < FT_VEC_ELEMS) st1(zero_x + tid, 0.0f);

    const int nch = H / FT_VEC_ELEMS;
    const long long row = (long long)blockIdx.x * blockDim.y + threadIdx.y;
    const bool live = row < N;
    xw_t gp[FT_CPT][XW]; /* g as loaded (bf16: packed, widened where used) */
#pragma unroll
    for (int j = 0; j < FT_CPT; j++) {
        const int ch = (int)threadIdx.x + j * (int)blockDim.x;
        if (ch < nch) {
            xload(g + (long long)ch * FT_VEC_ELEMS, gp[j]);
        } else {
#pragma unroll
            for (int v = 0; v < XW; v++)
                gp[j][v] = 0;
        }
    }
    dl_stage_x(x, xs, row, N, H, nch);
    /* The thread's staged vector and the stride of its rows, or zero_x with stride 0 when it has
     * none (a row past N, or ch >= nch): then it stores nothing. */
    const bool ok = live && (int)threadIdx.x < nch;
    const st_t *xp =
        ok ? xs + (long long)threadIdx.y * T_ * H + threadIdx.x * FT_VEC_ELEMS : zero_x;
    const int xstride = ok ? H : 0;
    const bool st = ok;
    __syncthreads();

    const float inv_h = 1.0f / (float)H;
    st_t *fp = f + ((long long)l0 * N + row) * H + (long long)threadIdx.x * FT_VEC_ELEMS;
    if (G == 4)
        dl_rounds<4>(xp, xstride, a_s, nl, gp, fp, N, H, st, inv_h, eps, red);
    else if (G == 2)
        dl_rounds<2>(xp, xstride, a_s, nl, gp, fp, N, H, st, inv_h, eps, red);
    else
        dl_rounds<1>(xp, xstride, a_s, nl, gp, fp, N, H, st, inv_h, eps, red);
}

#endif /* FT_CPT == 1 */

/* The parameters of both forward kernels, dflare_fwd and dflare_fwd_smem. */
#define DL_FWD_PARAMS                                                                              \
    const st_t *__restrict__ x, const st_t *__restrict__ w, const st_t *__restrict__ g,            \
        st_t *__restrict__ f, int N, int H, int D, int per_pass, int group, float eps

/* The two stages as two kernels: each gets the registers its own path needs. The register-tile
 * kernel makes one layer per round (group = 1): more would add their mixes to a full tile. The
 * staged one keeps to 64 registers (two blocks of 512 threads per SM; no spill at T = 9 with
 * 16-byte vectors and up to GMAX layers per round). */
#if FT_KEEP(dflare_fwd)
extern "C" __global__ void dflare_fwd(DL_FWD_PARAMS) {
    dl_fwd<0, 1>(x, w, g, f, N, H, D, per_pass, group, eps);
}
FT_KERNEL_EXPORT(dflare_fwd)
#endif

#if FT_KEEP(dflare_fwd_smem)
extern "C" __global__ void __launch_bounds__(1024) dflare_fwd_smem(DL_FWD_PARAMS) {
#if FT_CPT == 1
    dl_fwd_staged(x, w, g, f, N, H, D, per_pass, group, eps);
#else
    dl_fwd<1, GMAX>(x, w, g, f, N, H, D, per_pass, group, eps);
#endif
}
FT_KERNEL_EXPORT(dflare_fwd_smem)
#endif

#if FT_BF16 && FT_T <= 16
/* Forward on the tensor cores (bf16, T <= 16, up to 16 layers per pass, one row per block).
 * Per row the mix is the product [layers x T] . [T x H]: one mma.m16n8k16 per 8 columns, with
 * the softmax rows as A (16 x 16, layers x targets, zero-padded) and x as B, read from the row
 * staged in shared memory by ldmatrix.trans (rows t >= T read a zero line). The weights are
 * split into bf16 hi + lo parts (two mmas into one fp32 accumulator), so they keep ~16 bits.
 * Lane (g, q) = (lane / 4, lane % 4) gets columns 2q, 2q+1 of an 8-column tile for layers g and
 * g + 8. Pass 1 sums the squares per layer; one barrier for every layer of the pass; pass 2 makes
 * the products again (cheaper than holding them) and stores f. Warp w owns a contiguous run of
 * tiles, two at a time (ldmatrix.x4). Block (32 * warps, 1); dynamic shared memory: per_pass * T
 * floats of softmax rounded up to 16 bytes, then T * H elements of x. */
/* This lane's part of ldmatrix.x4.trans over tiles tj and tj + 1 of the staged row xs: row mt
 * (target), or the zero line for a target or tile past the row. */
__device__ __forceinline__ void dl_ldm_tiles(uint32_t b[4], const st_t *xs, const uint32_t *zero16,
                                             int mt, int tj, int ntiles, int H) {
    ft_ldmatrix_x4_trans(b, mt < T_ && tj < ntiles ? (const void *)(xs + (long long)mt * H + tj * 8)
                                                   : (const void *)zero16);
}

/* d = (ahi + alo) b: the weights' bf16 hi and lo parts, two mmas into one fp32 accumulator. */
__device__ __forceinline__ void dl_mma_hilo(float d[4], const uint32_t ahi[4],
                                            const uint32_t alo[4], const uint32_t *b) {
    const float zc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    ft_mma_m16n8k16_bf16(d, ahi, b, zc);
    ft_mma_m16n8k16_bf16(d, alo, b, d);
}

template <int unused>
__device__ __forceinline__ void dl_fwd_mma(const st_t *__restrict__ x, const st_t *__restrict__ w,
                                           const st_t *__restrict__ g, st_t *__restrict__ f, int N,
                                           int H, int D, int per_pass, float eps) {
    FT_DYNAMIC_SMEM(float, a_s); /* (in a template, as the other kernels: one linkage for it) */
    st_t *xs = reinterpret_cast<st_t *>(a_s + ((per_pass * T_ + 3) & ~3));
    __shared__ float red[32][16];
    __shared__ __align__(16) uint32_t zero16[4];
    const int l0 = (int)blockIdx.y * per_pass;
    const int nl = min(per_pass, D - l0);
    const int tid = (int)threadIdx.x, nthr = (int)blockDim.x;
    const int warp = tid >> 5, lane = tid & 31, gq = lane >> 2, q = lane & 3;
    const long long row = blockIdx.x;
    dl_softmax(w + l0 * T_, nl, a_s, tid, nthr);
    if (tid < 4) zero16[tid] = 0u;

    /* Stage x[row] ([T][H], 16-byte pieces dealt round-robin to the block's threads). */
    const int nch = H / 8, ntiles = nch;
    for (int k = tid; k < T_ * nch; k += nthr) {
        const int t = k / nch, ch = k - t * nch;
        ft_cp_async_cg16(xs + (long long)t * H + ch * 8,
                         x + (row * T_ + t) * (long long)H + ch * 8);
    }
    ft_cp_async_commit();
    ft_cp_async_wait_all();
    __syncthreads();

    /* A fragments: rows (layers) gq and gq + 8, columns (targets) 2q, 2q+1, 2q+8, 2q+9. */
    uint32_t ahi[4], alo[4];
#pragma unroll
    for (int r = 0; r < 4; r++) {
        const int i = gq + (r & 1) * 8, t0 = 2 * q + (r >> 1) * 8;
        float v[2], h[2];
#pragma unroll
        for (int k = 0; k < 2; k++) {
            v[k] = i < nl && t0 + k < T_ ? a_s[i * T_ + t0 + k] : 0.0f;
            h[k] = __bfloat162float(__float2bfloat16(v[k]));
        }
        ahi[r] = ft_pack_bf16x2(h[0], h[1]);
        alo[r] = ft_pack_bf16x2(v[0] - h[0], v[1] - h[1]);
    }

    const int nwarps = nthr >> 5;
    const int per_warp = (((ntiles + nwarps - 1) / nwarps) + 1) & ~1;
    const int j0 = warp * per_warp, j1 = min(j0 + per_warp, ntiles);
    /* This lane's ldmatrix row: matrix lane / 8 is (targets 0-7 or 8-15) x (tile j or j + 1). */
    const int mt = (lane >> 3 & 1) * 8 + (lane & 7), mtile = lane >> 4;

    float ss0 = 0.0f, ss1 = 0.0f;
    for (int j = j0; j < j1; j += 2) {
        const int tj = j + mtile;
        uint32_t b[4];
        dl_ldm_tiles(b, xs, zero16, mt, tj, ntiles, H);
#pragma unroll
        for (int u = 0; u < 2; u++) {
            float d[4];
            dl_mma_hilo(d, ahi, alo, b + 2 * u);
            ss0 = fmaf(d[0], d[0], fmaf(d[1], d[1], ss0));
            ss1 = fmaf(d[2], d[2], fmaf(d[3], d[3], ss1));
        }
    }
    ss0 += __shfl_xor_sync(0xffffffffu, ss0, 1);
    ss1 += __shfl_xor_sync(0xffffffffu, ss1, 1);
    ss0 += __shfl_xor_sync(0xffffffffu, ss0, 2);
    ss1 += __shfl_xor_sync(0xffffffffu, ss1, 2);
    if (q == 0) {
        red[warp][gq] = ss0;
        red[warp][gq + 8] = ss1;
    }
    __syncthreads();
    ss0 = 0.0f;
    ss1 = 0.0f;
    for (int k = 0; k < nwarps; k++) {
        ss0 += red[k][gq];
        ss1 += red[k][gq + 8];
    }
    const float inv_h = 1.0f / (float)H;
    const float r0 = rsqrtf(ss0 * inv_h + eps), r1 = rsqrtf(ss1 * inv_h + eps);
    st_t *f0 = f + ((long long)(l0 + gq) * N + row) * H, *f1 = f0 + (long long)8 * N * H;

    for (int j = j0; j < j1; j += 2) {
        const int tj = j + mtile;
        uint32_t b[4];
        dl_ldm_tiles(b, xs, zero16, mt, tj, ntiles, H);
#pragma unroll
        for (int u = 0; u < 2; u++) {
            if (j + u >= ntiles) continue;
            float d[4];
            dl_mma_hilo(d, ahi, alo, b + 2 * u);
            const int h = (j + u) * 8 + 2 * q;
            __nv_bfloat162 gv = ft_ld_bf16x2(g + h);
            const float g0 = __low2float(gv), g1 = __high2float(gv);
            if (gq < nl)
                ft_st_bf16x2(f0 + h, __floats2bfloat162_rn(d[0] * r0 * g0, d[1] * r0 * g1));
            if (gq + 8 < nl)
                ft_st_bf16x2(f1 + h, __floats2bfloat162_rn(d[2] * r1 * g0, d[3] * r1 * g1));
        }
    }
}

#if FT_KEEP(dflare_fwd_mma)
extern "C" __global__ void __launch_bounds__(1024)
    dflare_fwd_mma(const st_t *__restrict__ x, const st_t *__restrict__ w,
                   const st_t *__restrict__ g, st_t *__restrict__ f, int N, int H, int D,
                   int per_pass, float eps) {
    dl_fwd_mma<0>(x, w, g, f, N, H, D, per_pass, eps);
}
FT_KERNEL_EXPORT(dflare_fwd_mma)
#endif
#endif

/* Backward of layers [l0, l0 + nl) (one pass), writing f of those layers too. Grid: G blocks
 * looping over row groups; block (threads per row, rows). The dx accumulators of a row are
 * registers (stage = 0: T * cpt * vector floats more per thread) or this thread's own slots of
 * a float buffer in shared memory (stage = 1: see dl_dxs). Dynamic shared memory: nl * T
 * floats of softmax, nl * T per warp of da partials, then with stage = 1 the dx buffer.
 *   dx:   accum = 0 stores this pass's share, 1 adds it to what earlier passes stored.
 *   dgp:  atomic = 0: one partial row of H floats per row group (blockIdx.x * blockDim.y +
 *         threadIdx.y), stored (accum = 0) or added to; atomic = 1: [H] accumulator, zeroed.
 *   dap:  atomic = 0: [G][D][T] partials (this pass stores its layers'); atomic = 1: [D][T]. */
/* This thread's dx accumulator of target t, vector j in the shared buffer: element v at
 * [v * blockDim.x]. The buffer is [rows][T][CPT][VEC][threads per row]: a thread's own slots,
 * interleaved with its neighbours' so a warp's accesses fall in distinct banks. */
__device__ __forceinline__ float *dl_dxs(float *dxs, int t, int j) {
    return dxs + (((long long)threadIdx.y * T_ + t) * FT_CPT + j) * FT_VEC_ELEMS * blockDim.x +
           threadIdx.x;
}

template <int stage>
__device__ __forceinline__ void
dl_bwd(const st_t *__restrict__ x, const st_t *__restrict__ w, const st_t *__restrict__ g,
       const st_t *__restrict__ df, st_t *__restrict__ f, st_t *__restrict__ dx,
       float *__restrict__ dgp, float *__restrict__ dap, int N, int H, int D, int l0, int nl,
       int accum, int atomic, float eps) {
    FT_DYNAMIC_SMEM(float, sm);
    __shared__ float red[2][64];
    const int tid = (int)(threadIdx.y * blockDim.x + threadIdx.x);
    const int nthr = (int)(blockDim.x * blockDim.y), nwarps = (nthr + 31) >> 5, warp = tid >> 5;
    float *a_s = sm, *daw = sm + nl * T_, *dxs = daw + nwarps * nl * T_;
    dl_softmax(w + l0 * T_, nl, a_s, tid, nthr);
    for (int k = tid; k < nwarps * nl * T_; k += nthr)
        daw[k] = 0.0f;

    const int nch = H / FT_VEC_ELEMS;
    float gr[FT_CPT][FT_VEC_ELEMS], dga[FT_CPT][FT_VEC_ELEMS];
    dl_load_vec(g, true, nch, gr);
    dl_zero(dga);
    __syncthreads();

    const float inv_h = 1.0f / (float)H;
    const int rpc = (int)blockDim.y, nrb = (N + rpc - 1) / rpc;
    int it = 0; /* reductions so far: alternates the slots of red */
    for (int rb = (int)blockIdx.x; rb < nrb; rb += (int)gridDim.x) {
        const long long row = (long long)rb * rpc + threadIdx.y;
        const bool live = row < N;
        xtile_t xr;
        float dxa[stage || !FT_DX ? 1 : T_][FT_CPT][FT_VEC_ELEMS];
        dl_load_x(x, row, live, H, nch, xr);
        if constexpr (!stage && FT_DX) dl_zero(dxa);

        for (int i = 0; i < nl; i++) {
            const float *a = a_s + i * T_;
            const long long off = ((long long)(l0 + i) * N + row) * H;
            float dfr[FT_CPT][FT_VEC_ELEMS], s[FT_CPT][FT_VEC_ELEMS];
            dl_load_vec(df + (live ? off : 0), live, nch, dfr);
            float ss = dl_mix(xr, a, s), gd = 0.0f;
#pragma unroll
            for (int j = 0; j < FT_CPT; j++)
#pragma unroll
                for (int v = 0; v < FT_VEC_ELEMS; v++)
                    gd = fmaf(gr[j][v] * dfr[j][v], s[j][v], gd);
            row_sum2(&ss, &gd, red[it++ & 1]);
            const float r = rsqrtf(ss * inv_h + eps);
            /* (r applied one at a time: r^3 alone underflows float32 at |x| ~ 1e13) */
            const float cc = r * (r * (r * gd)) * inv_h;

            /* f, ds (into s), dg and dx shares. */
#pragma unroll
            for (int j = 0; j < FT_CPT; j++) {
                float o[FT_VEC_ELEMS];
#pragma unroll
                for (int v = 0; v < FT_VEC_ELEMS; v++) {
                    const float sv = s[j][v];
                    o[v] = sv * r * gr[j][v];
                    dga[j][v] = fmaf(dfr[j][v] * sv, r, dga[j][v]);
                    s[j][v] = r * gr[j][v] * dfr[j][v] - sv * cc;
                }
                const int ch = (int)threadIdx.x + j * (int)blockDim.x;
                if (live && ch < nch) stv<FT_VEC_ELEMS>(f + off + (long long)ch * FT_VEC_ELEMS, o);
            }
#pragma unroll
            for (int t = 0; t < T_; t++) {
                float p = 0.0f;
#pragma unroll
                for (int j = 0; j < FT_CPT; j++) {
                    float *acc = stage ? dl_dxs(dxs, t, j) : dxa[stage || !FT_DX ? 0 : t][j];
                    const int st = stage ? (int)blockDim.x : 1;
#pragma unroll
                    for (int v = 0; v < FT_VEC_ELEMS; v++) {
                        if constexpr (FT_DX) {
                            const float prev = stage && i == 0 ? 0.0f : acc[v * st];
                            acc[v * st] = fmaf(a[t], s[j][v], prev);
                        }
                        p = fmaf(s[j][v], xget(xr[t][j], v), p);
                    }
                }
                p = ft_warp_sum(p);
                if ((tid & 31) == 0) daw[(warp * nl + i) * T_ + t] += p;
            }
        }

        if (!live || !FT_DX) continue;
#pragma unroll
        for (int j = 0; j < FT_CPT; j++) {
            const int ch = (int)threadIdx.x + j * (int)blockDim.x;
            if (ch >= nch) continue;
#pragma unroll
            for (int t = 0; t < T_; t++) {
                st_t *p = dx + (row * T_ + t) * (long long)H + (long long)ch * FT_VEC_ELEMS;
                const float *acc = stage ? dl_dxs(dxs, t, j) : dxa[stage || !FT_DX ? 0 : t][j];
                const int st = stage ? (int)blockDim.x : 1;
                float o[FT_VEC_ELEMS];
                if (accum) ldv<FT_VEC_ELEMS>(p, o);
#pragma unroll
                for (int v = 0; v < FT_VEC_ELEMS; v++)
                    o[v] = accum ? o[v] + acc[v * st] : acc[v * st];
                stv<FT_VEC_ELEMS>(p, o);
            }
        }
    }

    /* This block's shares of dg (per row group) and da (per block). */
#pragma unroll
    for (int j = 0; j < FT_CPT; j++) {
        const int ch = (int)threadIdx.x + j * (int)blockDim.x;
        if (ch >= nch) continue;
        if (atomic) {
#pragma unroll
            for (int v = 0; v < FT_VEC_ELEMS; v++)
                atomicAdd(dgp + (long long)ch * FT_VEC_ELEMS + v, dga[j][v]);
            continue;
        }
        float *p = dgp + ((long long)blockIdx.x * blockDim.y + threadIdx.y) * H + ch * FT_VEC_ELEMS;
#pragma unroll
        for (int v = 0; v < FT_VEC_ELEMS; v++)
            p[v] = accum ? p[v] + dga[j][v] : dga[j][v];
    }
    __syncthreads();
    for (int k = tid; k < nl * T_; k += nthr) {
        float sum = 0.0f;
        for (int q = 0; q < nwarps; q++)
            sum += daw[q * nl * T_ + k];
        if (atomic)
            atomicAdd(dap + l0 * T_ + k, sum);
        else
            dap[(long long)blockIdx.x * D * T_ + l0 * T_ + k] = sum;
    }
}

/* The parameters of dflare_bwd and of dflare_bwd_smem, its shared-memory variant. */
#define DL_BWD_PARAMS                                                                              \
    const st_t *__restrict__ x, const st_t *__restrict__ w, const st_t *__restrict__ g,            \
        const st_t *__restrict__ df, st_t *__restrict__ f, st_t *__restrict__ dx,                  \
        float *__restrict__ dgp, float *__restrict__ dap, int N, int H, int D, int l0, int nl,     \
        int accum, int atomic, float eps

#if FT_KEEP(dflare_bwd)
extern "C" __global__ void dflare_bwd(DL_BWD_PARAMS) {
    dl_bwd<0>(x, w, g, df, f, dx, dgp, dap, N, H, D, l0, nl, accum, atomic, eps);
}
FT_KERNEL_EXPORT(dflare_bwd)
#endif

/* At most 512 threads per block (the host keeps to it): up to 128 registers, room for the x
 * tile of a wide row once dx has moved to shared memory. */
#if FT_KEEP(dflare_bwd_smem)
extern "C" __global__ void __launch_bounds__(512) dflare_bwd_smem(DL_BWD_PARAMS) {
    dl_bwd<1>(x, w, g, df, f, dx, dgp, dap, N, H, D, l0, nl, accum, atomic, eps);
}
FT_KERNEL_EXPORT(dflare_bwd_smem)
#endif

/* dg[h] = sum_p dgp[p][h] (P rows), and in block 0: da[i,t] = sum_q dap[q][i][t] (Q blocks),
 * dw[i,:] = a_i * (da_i - a_i . da_i). Grid ceil(H / blockDim.x). */
#if FT_KEEP(dflare_bwd_reduce)
extern "C" __global__ void dflare_bwd_reduce(const float *__restrict__ dgp, int P,
                                             const float *__restrict__ dap, int Q,
                                             const st_t *__restrict__ w, st_t *__restrict__ dg,
                                             st_t *__restrict__ dw, int H, int D) {
    const int h = (int)(blockIdx.x * blockDim.x + threadIdx.x);
    if (h < H) {
        float sum = 0.0f;
        for (int p = 0; p < P; p++)
            sum += dgp[(long long)p * H + h];
        st1(dg + h, sum);
    }
    if (blockIdx.x != 0) return;
    for (int i = (int)threadIdx.x; i < D; i += (int)blockDim.x) {
        float a[T_], da[T_], m = -INFINITY, z = 0.0f, dot = 0.0f;
        for (int t = 0; t < T_; t++)
            m = fmaxf(m, ld1(w + i * T_ + t));
        for (int t = 0; t < T_; t++) {
            a[t] = expf(ld1(w + i * T_ + t) - m);
            z += a[t];
        }
        for (int t = 0; t < T_; t++) {
            a[t] /= z;
            float sum = 0.0f;
            for (int q = 0; q < Q; q++)
                sum += dap[((long long)q * D + i) * T_ + t];
            da[t] = sum;
            dot = fmaf(a[t], sum, dot);
        }
        for (int t = 0; t < T_; t++)
            st1(dw + i * T_ + t, a[t] * (da[t] - dot));
    }
}
FT_KERNEL_EXPORT(dflare_bwd_reduce)
#endif

#undef T_
#endif /* FT_FUSION & 1 */

#if FT_FUSION & 2
/* ================================ fusion.dflash =============================================== */

/* Forward norm of one row group per block: rows of c (CT: float scratch, or st_t when c lives in
 * f and this normalises it in place, c == f). The row is read twice (the second time from
 * cache): once for its sum of squares, once to scale. */
template <typename CT, int V>
__device__ __forceinline__ void dh_norm(const CT *c, const st_t *__restrict__ g, st_t *f, int N,
                                        int H, float eps) {
    __shared__ float red[32];
    const long long row = (long long)blockIdx.x * blockDim.y + threadIdx.y;
    const bool live = row < N;
    const int nch = H / V;
    const CT *cr = c + (live ? row : 0) * H;
    float ss = 0.0f;
    if (live)
        for (int ch = (int)threadIdx.x; ch < nch; ch += (int)blockDim.x) {
            float v[V];
            ldv<V>(cr + (long long)ch * V, v);
#pragma unroll
            for (int k = 0; k < V; k++)
                ss = fmaf(v[k], v[k], ss);
        }
    ss = row_sum(ss, red);
    if (!live) return;
    const float r = rsqrtf(ss / (float)H + eps);
    st_t *fr = f + row * H;
    for (int ch = (int)threadIdx.x; ch < nch; ch += (int)blockDim.x) {
        float v[V], gv[V];
        ldv<V>(cr + (long long)ch * V, v);
        ldv<V>(g + (long long)ch * V, gv);
#pragma unroll
        for (int k = 0; k < V; k++)
            v[k] = v[k] * r * gv[k];
        stv<V>(fr + (long long)ch * V, v);
    }
}

/* Backward norm over a persistent grid: f, dc and this row group's dg partial row
 * dgp[blockIdx.x * blockDim.y + threadIdx.y][:] (stored on the group's first row, then added
 * to: each element belongs to one thread). */
template <typename CT, int V>
__device__ __forceinline__ void
dh_norm_bwd(const CT *c, const st_t *__restrict__ g, const st_t *__restrict__ df, st_t *f,
            st_t *__restrict__ dc, float *__restrict__ dgp, int N, int H, float eps) {
    __shared__ float red[2][64];
    const int rpc = (int)blockDim.y, nrb = (N + rpc - 1) / rpc, nch = H / V;
    const float inv_h = 1.0f / (float)H;
    float *dgr = dgp + ((long long)blockIdx.x * rpc + threadIdx.y) * H;
    int it = 0;
    for (int rb = (int)blockIdx.x; rb < nrb; rb += (int)gridDim.x) {
        const bool first = rb == (int)blockIdx.x;
        const long long row = (long long)rb * rpc + threadIdx.y;
        const bool live = row < N;
        const long long off = (live ? row : 0) * H;
        float ss = 0.0f, gd = 0.0f;
        if (live)
            for (int ch = (int)threadIdx.x; ch < nch; ch += (int)blockDim.x) {
                float v[V], gv[V], dv[V];
                ldv<V>(c + off + (long long)ch * V, v);
                ldv<V>(g + (long long)ch * V, gv);
                ldv<V>(df + off + (long long)ch * V, dv);
#pragma unroll
                for (int k = 0; k < V; k++) {
                    ss = fmaf(v[k], v[k], ss);
                    gd = fmaf(gv[k] * dv[k], v[k], gd);
                }
            }
        row_sum2(&ss, &gd, red[it++ & 1]);
        const float r = rsqrtf(ss * inv_h + eps), cc = r * (r * (r * gd)) * inv_h;
        for (int ch = (int)threadIdx.x; ch < nch; ch += (int)blockDim.x) {
            float v[V], gv[V], dv[V], o[V];
            if (live) {
                ldv<V>(c + off + (long long)ch * V, v);
                ldv<V>(g + (long long)ch * V, gv);
                ldv<V>(df + off + (long long)ch * V, dv);
            } else {
#pragma unroll
                for (int k = 0; k < V; k++)
                    v[k] = gv[k] = dv[k] = 0.0f;
            }
#pragma unroll
            for (int k = 0; k < V; k++) {
                const float dgv = dv[k] * v[k] * r;
                dgr[ch * V + k] = first ? dgv : dgr[ch * V + k] + dgv;
                o[k] = r * gv[k] * dv[k] - v[k] * cc;
                v[k] = v[k] * r * gv[k];
            }
            if (!live) continue;
            stv<V>(f + off + (long long)ch * V, v);
            stv<V>(dc + off + (long long)ch * V, o);
        }
    }
}

#define DH_SWITCH(vec, call)                                                                       \
    switch (vec) {                                                                                 \
    case 1: call(1); break;                                                                        \
    case 2: call(2); break;                                                                        \
    case 4: call(4); break;                                                                        \
    default: call(8); break;                                                                       \
    }

/* Grid ceil(N / blockDim.y), block (threads per row, rows). vec: 1, 2, 4 or 8. */
#if FT_KEEP(dflash_norm)
extern "C" __global__ void dflash_norm(const float *__restrict__ c, const st_t *__restrict__ g,
                                       st_t *__restrict__ f, int N, int H, int vec, float eps) {
#define DH_CALL(V) dh_norm<float, V>(c, g, f, N, H, eps)
    DH_SWITCH(vec, DH_CALL)
#undef DH_CALL
}
FT_KERNEL_EXPORT(dflash_norm)
#endif

#if FT_KEEP(dflash_norm_ip)
extern "C" __global__ void dflash_norm_ip(st_t *f, const st_t *__restrict__ g, int N, int H,
                                          int vec, float eps) {
#define DH_CALL(V) dh_norm<st_t, V>(f, g, f, N, H, eps)
    DH_SWITCH(vec, DH_CALL)
#undef DH_CALL
}
FT_KERNEL_EXPORT(dflash_norm_ip)
#endif

/* Grid G <= ceil(N / blockDim.y) blocks looping over row groups; dgp: G * blockDim.y rows. */
#if FT_KEEP(dflash_norm_bwd)
extern "C" __global__ void dflash_norm_bwd(const float *__restrict__ c, const st_t *__restrict__ g,
                                           const st_t *__restrict__ df, st_t *__restrict__ f,
                                           st_t *__restrict__ dc, float *__restrict__ dgp, int N,
                                           int H, int vec, float eps) {
#define DH_CALL(V) dh_norm_bwd<float, V>(c, g, df, f, dc, dgp, N, H, eps)
    DH_SWITCH(vec, DH_CALL)
#undef DH_CALL
}
FT_KERNEL_EXPORT(dflash_norm_bwd)
#endif

#if FT_KEEP(dflash_norm_bwd_ip)
extern "C" __global__ void dflash_norm_bwd_ip(st_t *f, const st_t *__restrict__ g,
                                              const st_t *__restrict__ df, st_t *__restrict__ dc,
                                              float *__restrict__ dgp, int N, int H, int vec,
                                              float eps) {
#define DH_CALL(V) dh_norm_bwd<st_t, V>(f, g, df, f, dc, dgp, N, H, eps)
    DH_SWITCH(vec, DH_CALL)
#undef DH_CALL
}
FT_KERNEL_EXPORT(dflash_norm_bwd_ip)
#endif

/* dg[h] = sum_p dgp[p][h] over P partial rows, in order. Grid ceil(H / blockDim.x). */
#if FT_KEEP(dflash_dg)
extern "C" __global__ void dflash_dg(const float *__restrict__ dgp, int P, st_t *__restrict__ dg,
                                     int H) {
    const int h = (int)(blockIdx.x * blockDim.x + threadIdx.x);
    if (h >= H) return;
    float sum = 0.0f;
    for (int p = 0; p < P; p++)
        sum += dgp[(long long)p * H + h];
    st1(dg + h, sum);
}
FT_KERNEL_EXPORT(dflash_dg)
#endif

#undef DH_SWITCH
#endif /* FT_FUSION & 2 */
