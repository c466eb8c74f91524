/* loss.cu: the kernels of the loss op on CUDA (SPEC.md loss: LM head + weighted cross entropy,
 * forward and backward in one call); the host side that sizes and sequences them, and the
 * tunables, are in kernels/loss/loss_cuda.c.
 *
 *   z[m,:] = h[m,:] @ w_lm^T,  ce[m] = lse(z[m,:]) - z[m,labels[m]],  q[m] = exp(-ce[m])
 *   w = per-block weights (the formulas of kernels/loss/loss_weights.c),  loss = sum w ce / denom
 *   dz[m,:] = (w[m]/denom) (softmax(z[m,:]) - onehot(labels[m])),  dh = dz w_lm,  dw_lm = dz^T h
 *
 * Two strategies share the per-row statistics, the weights and the finishing kernels:
 *   materialize  per chunk of whole blocks the logits [R, V] in float32 scratch (cuBLASLt),
 *                loss_rows: each row's max, sum of exp and target logit (one block per row);
 *                loss_weights: the chunk's ce, q and weights (one thread per block of B rows:
 *                the D-PACE prefix product and suffix sum run over the block's q, never over
 *                the logits); loss_grad_ip: dz written over the logits in place (bf16: each
 *                row's dz in the first half of its own float row, tile by tile behind a barrier,
 *                so the GEMMs read it with a leading dimension of 2V), then the dh and dw_lm
 *                GEMMs (the Liger-Kernel shape).
 *   online       vocab tiles that never hold a logits row: loss_online_fwd computes [BM, BN]
 *                logit tiles (h and w_lm staged in shared memory BK columns at a time, by
 *                cp.async with one or two stages; bf16 on the tensor cores, mma.m16n8k16 with
 *                ldmatrix fragments, f32 on the CUDA cores) and keeps a running max and sum per row
 * over its vocab split, writing one (max, sum) partial per split and row; loss_weights combines the
 * partials in split order; loss_online_dh recomputes the tiles of its row tile over the whole
 * vocabulary and accumulates dz w_lm, loss_online_dw those of its vocab tile over every row and
 * accumulates dz^T h (the Cut Cross- Entropy shape). Each output tile belongs to one block, so the
 * accumulation is a plain read-modify-write: no atomics, the same bits in every run. loss_finish
 * the loss (and, when the denominator depends on the D-PACE weights, the denominator) by one block
 * in a fixed order; loss_scale applies 1/denom to the gradients when it was not folded into dz, and
 * narrows float32 accumulators to the storage type.
 *
 * The final norm (final_norm = 1), around either strategy: loss_norm_fwd writes hn = h r g (one
 * block per row, r = 1/sqrt(mean(h^2) + eps)) that the strategy then reads as its h; once dh
 * holds dhn (after loss_finish), loss_norm_dg sums dg = sum_m dhn h r (one thread per column,
 * rows in order, in double) and loss_norm_dh rewrites each dh row in place as
 * r u - r^3 h (u . h) / H with u = dhn g. O(M H) each: a few passes over h against the GEMMs'
 * M V H.
 *
 * Defines (compile-time: they size registers and shared memory):
 *   FT_BF16   1: every float tensor of the call is __nv_bfloat16 on the device, else float
 *   LS_BM     online: rows of a logit tile (16 or 32)
 *   LS_BN     online: vocab columns of a logit tile (32 or 64)
 * Threads per block (warps) and stages are kernel arguments: a thread (f32) owns the tile
 * elements tid + i * threads, i < LS_BM * LS_BN / 64, and a warp (bf16) the mma tiles
 * warp + i * warps, i < LS_BM * LS_BN / 256 (the counts at the fewest threads, two warps), so
 * the accumulators are registers whatever the warps.
 */
#include "ft_cuda.h"

#ifndef LS_BM
#define LS_BM 16
#endif
#ifndef LS_BN
#define LS_BN 32
#endif
#define LS_BK   32                   /* K (hidden) columns per shared-memory stage */
#define LS_CAP  (LS_BM * LS_BN / 64) /* tile elements per thread at two warps */
#define LS_MAXT 128                  /* online kernels: at most four warps */

static_assert(LS_BM == 16 || LS_BM == 32 || LS_BM == 64, "LS_BM: 16, 32 or 64");
static_assert(LS_BN == 32 || LS_BN == 64 || LS_BN == 128, "LS_BN: 32, 64 or 128");

#if FT_BF16
#define LS_EPU 2 /* elements per 4-byte cp.async */
#else
#define LS_EPU 1
#endif

__device__ __forceinline__ float ld1(const float *p) { return *p; }
__device__ __forceinline__ float ld1(const __nv_bfloat16 *p) { return __bfloat162float(*p); }
__device__ __forceinline__ void st1(float *p, float v) { *p = v; }
__device__ __forceinline__ void st1(__nv_bfloat16 *p, float v) { *p = __float2bfloat16(v); }

/* Scheme numbers (ft_loss_scheme). */
#define LS_UNIFORM     0
#define LS_DECAY       1
#define LS_PROGRESSIVE 2
#define LS_DPACE       3
#define LS_DPACE_CUM   4
#define LS_DPACE_CONT  5
#define LS_PROG_EPOCH  6 /* decay at the host's gamma, as progressive */

/* ---- block-wide reductions (blockDim.x a multiple of 32, at most 1024) ---------------------- */

/* red: 32 floats of shared memory; every thread gets the result; fixed order. block_gather:
 * lane 0 of each warp writes the warp's result v to red[warp], between barriers; it returns the
 * number of warps, whose results every thread then reads in red. */
__device__ __forceinline__ int block_gather(float v, float *red) {
    const int warp = (int)threadIdx.x >> 5, nw = (int)blockDim.x >> 5;
    __syncthreads();
    if ((threadIdx.x & 31) == 0) red[warp] = v;
    __syncthreads();
    return nw;
}
__device__ __forceinline__ float block_max(float v, float *red) {
    const int nw = block_gather(ft_warp_max(v), red);
    float r = red[0];
    for (int k = 1; k < nw; k++)
        r = fmaxf(r, red[k]);
    return r;
}
__device__ __forceinline__ float block_sum(float v, float *red) {
    const int nw = block_gather(ft_warp_sum(v), red);
    float r = 0.0f;
    for (int k = 0; k < nw; k++)
        r += red[k];
    return r;
}

/* ---- materialize: per-row statistics, dz in place ------------------------------------------- */

/* One block per row of the chunk (rows r0 + blockIdx.x): the row's max, sum of exp(z - max) and
 * target logit, as the single split's partial (pmx, psum, zt indexed by the global row). */
#if FT_KEEP(loss_rows)
extern "C" __global__ void __launch_bounds__(1024)
    loss_rows(const float *__restrict__ Z, long long ldz, const int *__restrict__ labels, int r0,
              int V, float *__restrict__ pmx, float *__restrict__ psum, float *__restrict__ zt) {
    __shared__ float red[32];
    const int row = r0 + (int)blockIdx.x;
    const float *z = Z + (long long)blockIdx.x * ldz;
    float mx = -INFINITY;
    for (int j = (int)threadIdx.x; j < V; j += (int)blockDim.x)
        mx = fmaxf(mx, z[j]);
    mx = block_max(mx, red);
    float s = 0.0f;
    for (int j = (int)threadIdx.x; j < V; j += (int)blockDim.x)
        s += expf(z[j] - mx);
    s = block_sum(s, red);
    if (threadIdx.x == 0) {
        pmx[row] = mx;
        psum[row] = s;
        const int l = labels[row];
        zt[row] = l >= 0 && l < V ? z[l] : 0.0f;
    }
}
FT_KERNEL_EXPORT(loss_rows)
#endif

/* One block per row: dz = sc (exp(z - lse) - onehot(label)) written over the row's logits, in
 * the storage type (bf16: into the first half of the row's own bytes; a tile of blockDim.x
 * columns is read, then written behind a barrier, so no column is overwritten before it is
 * read). sc = 0 (unscored rows) writes zeros. */
#if FT_KEEP(loss_grad_ip)
extern "C" __global__ void __launch_bounds__(1024)
    loss_grad_ip(float *__restrict__ Z, long long ldz, const int *__restrict__ labels, int r0,
                 int V, const float *__restrict__ lse, const float *__restrict__ sc) {
    const int row = r0 + (int)blockIdx.x;
    float *z = Z + (long long)blockIdx.x * ldz;
    st_t *dz = reinterpret_cast<st_t *>(z);
    const float s = sc[row], l = lse[row];
    const int label = labels[row];
    for (int j0 = 0; j0 < V; j0 += (int)blockDim.x) {
        const int j = j0 + (int)threadIdx.x;
        float g = 0.0f;
        if (j < V && s != 0.0f) g = s * (expf(z[j] - l) - (j == label ? 1.0f : 0.0f));
#if FT_BF16
        __syncthreads();
#endif
        if (j < V) st1(dz + j, g);
#if FT_BF16
        __syncthreads();
#endif
    }
}
FT_KERNEL_EXPORT(loss_grad_ip)
#endif

/* ---- the weights: one thread per block of B rows ------------------------------------------ */

/* Blocks [b0, b0 + nb) of the batch. Combines each scored row's ns (max, sum) partials in split
 * order into lse, ce and q; then the block's weights (kernels/loss/loss_weights.c, in double). Writes
 * the outputs ce, q, w and, in float32, lse, ce, w and sc = w * gscale. */
#if FT_KEEP(loss_weights)
extern "C" __global__ void __launch_bounds__(256)
    loss_weights(const int *__restrict__ labels, const uint8_t *__restrict__ mask,
                 const float *__restrict__ pmx, const float *__restrict__ psum,
                 const float *__restrict__ zt, int ns, int M, int B, int b0, int nb, int scheme,
                 float gamma, float alpha, float gscale, st_t *__restrict__ ce_out,
                 st_t *__restrict__ q_out, st_t *__restrict__ w_out, float *__restrict__ lse_f,
                 float *__restrict__ ce_f, float *__restrict__ q_f, float *__restrict__ w_f,
                 float *__restrict__ sc_f) {
    const int blk = b0 + (int)(blockIdx.x * blockDim.x + threadIdx.x);
    if (blk >= b0 + nb) return;
    const int m0 = blk * B;
    (void)labels;
    for (int k = 0; k < B; k++) {
        const int m = m0 + k;
        double ce = 0.0, q = 1.0, lse = 0.0;
        if (k > 0 && mask[m]) {
            float mx = -INFINITY;
            for (int s = 0; s < ns; s++)
                mx = fmaxf(mx, pmx[(long long)s * M + m]);
            double sum = 0.0;
            for (int s = 0; s < ns; s++)
                sum += (double)psum[(long long)s * M + m] *
                       exp((double)pmx[(long long)s * M + m] - (double)mx);
            lse = (double)mx + log(sum);
            ce = lse - (double)zt[m];
            q = exp(-ce);
        }
        lse_f[m] = (float)lse;
        ce_f[m] = (float)ce;
        q_f[m] = (float)q;
        st1(ce_out + m, (float)ce);
        st1(q_out + m, (float)q);
    }
    /* w[k] of the scheme (w[0] = 0); scored[k] = mask && k > 0. */
    const double a = (double)alpha;
    if (scheme == LS_UNIFORM || scheme == LS_DECAY || scheme == LS_PROGRESSIVE ||
        scheme == LS_PROG_EPOCH) {
        for (int k = 0; k < B; k++) {
            const int m = m0 + k;
            double w = 0.0;
            if (k > 0 && mask[m])
                w = scheme == LS_UNIFORM ? 1.0 : exp(-(double)(k - 1) / (double)gamma);
            w_f[m] = (float)w;
        }
    } else if (scheme == LS_DPACE || scheme == LS_DPACE_CUM) {
        double p = 1.0; /* prefix product of the smoothed s_j, unscored rows s = 1 */
        for (int k = 0; k < B; k++) {
            const int m = m0 + k;
            const int sc = k > 0 && mask[m];
            if (sc) p *= (1.0 - a) * (double)q_f[m] + a;
            w_f[m] = sc ? (float)p : 0.0f;
        }
        if (scheme == LS_DPACE) { /* suffix sum of mask_m P_m */
            double tail = 0.0;
            for (int k = B - 1; k >= 1; k--) {
                const int m = m0 + k;
                if (!mask[m]) continue;
                tail += (double)w_f[m];
                w_f[m] = (float)tail;
            }
        }
    } else { /* LS_DPACE_CONT: c_k = mask_k + s_{k+1} c_{k+1}, no division */
        double c = 0.0, s_next = 1.0;
        for (int k = B - 1; k >= 1; k--) {
            const int m = m0 + k;
            const int sc = mask[m] != 0;
            c = (sc ? 1.0 : 0.0) + s_next * c;
            w_f[m] = sc ? (float)c : 0.0f;
            s_next = sc ? (1.0 - a) * (double)q_f[m] + a : 1.0;
        }
        w_f[m0] = 0.0f;
    }
    for (int k = 0; k < B; k++) {
        const int m = m0 + k;
        const float w = k > 0 ? w_f[m] : 0.0f;
        w_f[m] = w;
        st1(w_out + m, w);
        sc_f[m] = (float)((double)w * (double)gscale);
    }
}
FT_KERNEL_EXPORT(loss_weights)
#endif

/* ---- finishing ----------------------------------------------------------------------------- */

/* One block: loss = sum w ce / denom, with denom = sum w (late = 1: the D-PACE weights under
 * norm = weight_sum) or the host's `denom`. red[0] = the factor still to apply to the gradients
 * (1/denom when late, else 1; 0 when the denominator is 0). Per-thread partials in a fixed
 * order, then a fixed tree: the same bits under any thread order. */
#if FT_KEEP(loss_finish)
extern "C" __global__ void __launch_bounds__(256)
    loss_finish(const float *__restrict__ w_f, const float *__restrict__ ce_f, int M, int late,
                float denom, float *__restrict__ red, st_t *__restrict__ loss_out) {
    __shared__ double sw[256], swc[256];
    const int t = (int)threadIdx.x, n = (int)blockDim.x;
    double a = 0.0, b = 0.0;
    for (int m = t; m < M; m += n) {
        a += (double)w_f[m];
        b += (double)w_f[m] * (double)ce_f[m];
    }
    sw[t] = a;
    swc[t] = b;
    __syncthreads();
    for (int o = n / 2; o > 0; o >>= 1) {
        if (t < o) {
            sw[t] += sw[t + o];
            swc[t] += swc[t + o];
        }
        __syncthreads();
    }
    if (t == 0) {
        const double d = late ? sw[0] : (double)denom;
        st1(loss_out, d != 0.0 ? (float)(swc[0] / d) : 0.0f);
        red[0] = d != 0.0 ? (late ? (float)(1.0 / d) : 1.0f) : 0.0f;
    }
}
FT_KERNEL_EXPORT(loss_finish)
#endif

/* out[i] = (acc ? acc[i] : out[i]) * red[0], over n elements (grid-stride). */
#if FT_KEEP(loss_scale)
extern "C" __global__ void __launch_bounds__(256)
    loss_scale(st_t *__restrict__ out, const float *__restrict__ acc, long long n,
               const float *__restrict__ red) {
    const float f = red[0];
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (long long)gridDim.x * blockDim.x) {
        const float v = acc ? acc[i] : ld1(out + i);
        st1(out + i, f != 0.0f ? v * f : 0.0f);
    }
}
FT_KERNEL_EXPORT(loss_scale)
#endif

/* ---- the final norm ------------------------------------------------------------------------ */

/* One block per row: hn[m,:] = h[m,:] * r * g, rstd[m] = r = 1/sqrt(mean(h[m,:]^2) + eps). */
#if FT_KEEP(loss_norm_fwd)
extern "C" __global__ void __launch_bounds__(1024)
    loss_norm_fwd(const st_t *__restrict__ h, const st_t *__restrict__ g, int H, float eps,
                  st_t *__restrict__ hn, float *__restrict__ rstd) {
    __shared__ float red[32];
    const long long row = (long long)blockIdx.x * H;
    float ss = 0.0f;
    for (int k = (int)threadIdx.x; k < H; k += (int)blockDim.x) {
        const float v = ld1(h + row + k);
        ss = fmaf(v, v, ss);
    }
    ss = block_sum(ss, red);
    const float r = rsqrtf(ss / (float)H + eps);
    for (int k = (int)threadIdx.x; k < H; k += (int)blockDim.x)
        st1(hn + row + k, ld1(h + row + k) * r * ld1(g + k));
    if (threadIdx.x == 0) rstd[blockIdx.x] = r;
}
FT_KERNEL_EXPORT(loss_norm_fwd)
#endif

/* One thread per column k: dg[k] = sum_m dhn[m,k] h[m,k] rstd[m], the rows in order (double). */
#if FT_KEEP(loss_norm_dg)
extern "C" __global__ void __launch_bounds__(256)
    loss_norm_dg(const st_t *__restrict__ dhn, const st_t *__restrict__ h,
                 const float *__restrict__ rstd, int M, int H, st_t *__restrict__ dg) {
    const int k = (int)(blockIdx.x * blockDim.x + threadIdx.x);
    if (k >= H) return;
    double s = 0.0;
    for (int m = 0; m < M; m++) {
        const long long i = (long long)m * H + k;
        s += (double)ld1(dhn + i) * (double)ld1(h + i) * (double)rstd[m];
    }
    st1(dg + k, (float)s);
}
FT_KERNEL_EXPORT(loss_norm_dg)
#endif

/* One block per row, in place: dh = r u - r^3 h (u . h) / H with u = dhn g. Each thread reads
 * its own columns before the block sum's barriers and writes them after. */
#if FT_KEEP(loss_norm_dh)
extern "C" __global__ void __launch_bounds__(1024)
    loss_norm_dh(st_t *__restrict__ dh, const st_t *__restrict__ h, const st_t *__restrict__ g,
                 const float *__restrict__ rstd, int H) {
    __shared__ float red[32];
    const long long row = (long long)blockIdx.x * H;
    const float r = rstd[blockIdx.x];
    float uh = 0.0f;
    for (int k = (int)threadIdx.x; k < H; k += (int)blockDim.x)
        uh = fmaf(ld1(dh + row + k) * ld1(g + k), ld1(h + row + k), uh);
    uh = block_sum(uh, red);
    const float c = r * r * r * uh / (float)H;
    for (int k = (int)threadIdx.x; k < H; k += (int)blockDim.x)
        st1(dh + row + k, r * ld1(g + k) * ld1(dh + row + k) - c * ld1(h + row + k));
}
FT_KERNEL_EXPORT(loss_norm_dh)
#endif

/* ---- online: logit tiles on the CUDA cores ------------------------------------------------- */

/* Shared memory of the tile loops: `stages` buffers of (LS_BM + LS_BN) x LS_BK elements (h rows
 * then w_lm rows), then the float tile [LS_BM][LS_BN + 1]. */
struct lt_smem {
    st_t *buf;
    float *zs;
};

__device__ __forceinline__ lt_smem lt_carve(unsigned char *base, int stages) {
    lt_smem s;
    s.buf = reinterpret_cast<st_t *>(base);
    const int bytes = stages * (LS_BM + LS_BN) * LS_BK * (int)sizeof(st_t);
    s.zs = reinterpret_cast<float *>(base + ((bytes + 15) & ~15));
    return s;
}

/* Issue the copies of K columns [k0, k0 + LS_BK) of h rows [r0, r0 + LS_BM) and w_lm rows
 * [v0, v0 + LS_BN) into buf; rows and columns past the ends are zero-filled. */
__device__ __forceinline__ void lt_load(st_t *buf, const st_t *__restrict__ h,
                                        const st_t *__restrict__ w, int M, int V, int H, int r0,
                                        int v0, int k0) {
    const int upr = LS_BK / LS_EPU; /* 4-byte units per row */
    for (int u = (int)threadIdx.x; u < (LS_BM + LS_BN) * upr; u += (int)blockDim.x) {
        const int r = u / upr, kk = (u - r * upr) * LS_EPU;
        const int k = k0 + kk;
        const st_t *src;
        int ok;
        if (r < LS_BM) {
            ok = r0 + r < M && k < H;
            src = h + (ok ? (long long)(r0 + r) * H + k : 0);
        } else {
            ok = v0 + r - LS_BM < V && k < H;
            src = w + (ok ? (long long)(v0 + r - LS_BM) * H + k : 0);
        }
        ft_cp_async_ca4(buf + r * LS_BK + kk, src, ok ? 4 : 0);
    }
    ft_cp_async_commit();
}

/* The K loop of one logit tile: stage K slices of h and w_lm (one or two buffers), and hand each
 * staged slice to `f`. Every thread of the block calls it (barriers inside). */
template <typename F>
__device__ __forceinline__ void lt_kloop(const st_t *__restrict__ h, const st_t *__restrict__ w,
                                         int M, int V, int H, int r0, int v0, int stages, st_t *buf,
                                         F f) {
    const int nk = (H + LS_BK - 1) / LS_BK;
    const int sz = (LS_BM + LS_BN) * LS_BK;
    if (stages > 1) lt_load(buf, h, w, M, V, H, r0, v0, 0);
    for (int kc = 0; kc < nk; kc++) {
        st_t *cur = buf + (stages > 1 ? (kc & 1) * sz : 0);
        if (stages > 1) {
            if (kc + 1 < nk) {
                lt_load(buf + ((kc + 1) & 1) * sz, h, w, M, V, H, r0, v0, (kc + 1) * LS_BK);
                ft_cp_async_wait<1>();
            } else {
                ft_cp_async_wait_all();
            }
        } else {
            lt_load(cur, h, w, M, V, H, r0, v0, kc * LS_BK);
            ft_cp_async_wait_all();
        }
        __syncthreads();
        f(cur, cur + LS_BM * LS_BK);
        __syncthreads();
    }
}

#if FT_BF16
/* The tile on the tensor cores: (LS_BM / 16) x (LS_BN / 8) mma.m16n8k16 tiles dealt round-robin
 * to the warps (at most LS_MT each, the count at two warps). h rows are the A operand (row
 * major: K contiguous) and w_lm rows the B operand (column major: K contiguous per vocab
 * column), both by ldmatrix (not transposed) from the staged slices; fp32 accumulation. */
#define LS_NMT (LS_BM / 16 * (LS_BN / 8))
#define LS_MT  (LS_NMT / 2)
__device__ __forceinline__ void lt_tile(const st_t *__restrict__ h, const st_t *__restrict__ w,
                                        int M, int V, int H, int r0, int v0, int stages, st_t *buf,
                                        float *zs) {
    const int lane = (int)threadIdx.x & 31, warp = (int)threadIdx.x >> 5;
    const int nw = (int)blockDim.x >> 5;
    float d[LS_MT][4];
#pragma unroll
    for (int i = 0; i < LS_MT; i++)
        d[i][0] = d[i][1] = d[i][2] = d[i][3] = 0.0f;
    lt_kloop(h, w, M, V, H, r0, v0, stages, buf, [&](const st_t *hs, const st_t *ws) {
#pragma unroll
        for (int k0 = 0; k0 < LS_BK; k0 += 16) {
#pragma unroll
            for (int i = 0; i < LS_MT; i++) {
                const int j = warp + i * nw;
                if (j < LS_NMT) {
                    const int m0 = (j / (LS_BN / 8)) * 16, n0 = (j % (LS_BN / 8)) * 8;
                    const int mi = lane >> 3;
                    uint32_t a[4], b[2];
                    ft_ldmatrix_x4(a, hs + (m0 + (mi & 1) * 8 + (lane & 7)) * LS_BK + k0 +
                                          (mi >> 1) * 8);
                    ft_ldmatrix_x2(b, ws + (n0 + (lane & 7)) * LS_BK + k0 + (mi & 1) * 8);
                    ft_mma_m16n8k16_bf16(d[i], a, b, d[i]);
                }
            }
        }
    });
    const int g = lane >> 2, t = lane & 3;
#pragma unroll
    for (int i = 0; i < LS_MT; i++) {
        const int j = warp + i * nw;
        if (j < LS_NMT) {
            const int m0 = (j / (LS_BN / 8)) * 16, n0 = (j % (LS_BN / 8)) * 8;
            float *z0 = zs + (m0 + g) * (LS_BN + 1) + n0 + 2 * t;
            float *z1 = z0 + 8 * (LS_BN + 1);
            z0[0] = d[i][0];
            z0[1] = d[i][1];
            z1[0] = d[i][2];
            z1[1] = d[i][3];
        }
    }
    __syncthreads();
}
#else
/* The tile on the CUDA cores: a thread owns tile elements e = tid + i * threads (i < LS_CAP). */
__device__ __forceinline__ void lt_tile(const st_t *__restrict__ h, const st_t *__restrict__ w,
                                        int M, int V, int H, int r0, int v0, int stages, st_t *buf,
                                        float *zs) {
    const int tid = (int)threadIdx.x, nt = (int)blockDim.x;
    float acc[LS_CAP];
#pragma unroll
    for (int i = 0; i < LS_CAP; i++)
        acc[i] = 0.0f;
    lt_kloop(h, w, M, V, H, r0, v0, stages, buf, [&](const st_t *hs, const st_t *ws) {
#pragma unroll 1
        for (int k = 0; k < LS_BK; k++) {
#pragma unroll
            for (int i = 0; i < LS_CAP; i++) {
                const int e = tid + i * nt;
                if (e < LS_BM * LS_BN) {
                    const int r = e / LS_BN, c = e - r * LS_BN;
                    acc[i] = fmaf(ld1(hs + r * LS_BK + k), ld1(ws + c * LS_BK + k), acc[i]);
                }
            }
        }
    });
#pragma unroll
    for (int i = 0; i < LS_CAP; i++) {
        const int e = tid + i * nt;
        if (e < LS_BM * LS_BN) zs[(e / LS_BN) * (LS_BN + 1) + e % LS_BN] = acc[i];
    }
    __syncthreads();
}
#endif

/* Pass 1. Grid (row tiles, vocab splits); split s takes vocab tiles [s*tps, (s+1)*tps). Per row:
 * the running max and sum of exp over the split (pmx, psum [ns][M]) and, in the split holding
 * the label, the target logit (zt [M]). */
#if FT_KEEP(loss_online_fwd)
extern "C" __global__ void __launch_bounds__(LS_MAXT, 1)
    loss_online_fwd(const st_t *__restrict__ h, const st_t *__restrict__ w,
                    const int *__restrict__ labels, int M, int H, int V, int tps, int stages,
                    float *__restrict__ pmx, float *__restrict__ psum, float *__restrict__ zt) {
    FT_DYNAMIC_SMEM(unsigned char, smem);
    __shared__ float rm[LS_BM], rs[LS_BM];
    const lt_smem sm = lt_carve(smem, stages);
    const int r0 = (int)blockIdx.x * LS_BM, split = (int)blockIdx.y;
    const int tid = (int)threadIdx.x, nt = (int)blockDim.x;
    const int warp = tid >> 5, lane = tid & 31, nw = nt >> 5;
    const int ntiles = (V + LS_BN - 1) / LS_BN;
    const int t0 = split * tps, t1 = min(ntiles, t0 + tps);
    if (tid < LS_BM) {
        rm[tid] = -INFINITY;
        rs[tid] = 0.0f;
    }
    for (int t = t0; t < t1; t++) {
        const int v0 = t * LS_BN;
        lt_tile(h, w, M, V, H, r0, v0, stages, sm.buf, sm.zs);
        const int ncol = min(LS_BN, V - v0);
        for (int r = warp; r < LS_BM; r += nw) {
            const float *zr = sm.zs + r * (LS_BN + 1);
            float mx = -INFINITY;
            for (int c = lane; c < ncol; c += 32)
                mx = fmaxf(mx, zr[c]);
            mx = ft_warp_max(mx);
            const float m_new = fmaxf(rm[r], mx);
            float s = 0.0f;
            for (int c = lane; c < ncol; c += 32)
                s += expf(zr[c] - m_new);
            s = ft_warp_sum(s);
            __syncwarp();
            if (lane == 0) {
                rs[r] = rs[r] * expf(rm[r] - m_new) + s;
                rm[r] = m_new;
                const int row = r0 + r;
                if (row < M) {
                    const int l = labels[row];
                    if (l >= v0 && l < v0 + ncol) zt[row] = zr[l - v0];
                }
            }
            __syncwarp();
        }
        __syncthreads();
    }
    if (tid < LS_BM && r0 + tid < M) {
        pmx[(long long)split * M + r0 + tid] = rm[tid];
        psum[(long long)split * M + r0 + tid] = rs[tid];
    }
}
FT_KERNEL_EXPORT(loss_online_fwd)
#endif

/* The tile's logits in zs turned into dz in place: sc[row] (exp(z - lse[row]) - onehot); rows
 * past M or with sc = 0 give 0. Ends with a barrier. */
__device__ __forceinline__ void lt_dz(float *zs, const int *__restrict__ labels,
                                      const float *__restrict__ lse, const float *__restrict__ sc,
                                      int M, int V, int r0, int v0) {
    for (int e = (int)threadIdx.x; e < LS_BM * LS_BN; e += (int)blockDim.x) {
        const int r = e / LS_BN, c = e - r * LS_BN;
        const int row = r0 + r, v = v0 + c;
        float g = 0.0f;
        if (row < M && v < V) {
            const float s = sc[row];
            if (s != 0.0f)
                g = s *
                    (expf(zs[r * (LS_BN + 1) + c] - lse[row]) - (v == labels[row] ? 1.0f : 0.0f));
        }
        zs[r * (LS_BN + 1) + c] = g;
    }
    __syncthreads();
}

/* s + sum over i < n of z[i * zs] p[i * H], in order (fmaf). */
__device__ __forceinline__ float lt_dot(const float *z, int zs, const st_t *p, int n, int H,
                                        float s) {
#pragma unroll 2
    for (int i = 0; i < n; i++, p += H)
        s = fmaf(z[i * zs], ld1(p), s);
    return s;
}

/* Pass 2, one gradient: the block owns one tile along one side and walks every tile along the
 * other, recomputing each tile's logits and turning them into dz, and accumulates
 * acc[its rows or columns, :] (float32; the first tile stores, the others add). dh (rows): the
 * block owns row tile blockIdx.x, walks the vocabulary, and acc = dacc [M, H] += dz_tile
 * w_lm[tile, :]. dw_lm (!rows): it owns vocab tile blockIdx.x, walks the row tiles, and
 * acc = dwacc [V, H] += dz_tile^T h[rows, :]. */
__device__ __forceinline__ void lt_grad(bool rows, unsigned char *smem, const st_t *__restrict__ h,
                                        const st_t *__restrict__ w, const int *__restrict__ labels,
                                        const float *__restrict__ lse, const float *__restrict__ sc,
                                        int M, int H, int V, int stages, float *__restrict__ acc) {
    const lt_smem sm = lt_carve(smem, stages);
    const int o0 = (int)blockIdx.x * (rows ? LS_BM : LS_BN); /* the owned tile's first index */
    const int tid = (int)threadIdx.x, nt = (int)blockDim.x;
    const int ntiles = rows ? (V + LS_BN - 1) / LS_BN : (M + LS_BM - 1) / LS_BM;
    const int nown = rows ? min(LS_BM, M - o0) : min(LS_BN, V - o0);
    /* dz's element (o, i), o along the owned side and i along the walked one */
    const int zo = rows ? LS_BN + 1 : 1, zi = rows ? 1 : LS_BN + 1;
    for (int t = 0; t < ntiles; t++) {
        const int r0 = rows ? o0 : t * LS_BM, v0 = rows ? t * LS_BN : o0;
        const int nsum = rows ? min(LS_BN, V - v0) : min(LS_BM, M - r0);
        lt_tile(h, w, M, V, H, r0, v0, stages, sm.buf, sm.zs);
        lt_dz(sm.zs, labels, lse, sc, M, V, r0, v0);
        for (int e = tid; e < nown * H; e += nt) {
            const int o = e / H, k = e - o * H;
            float *d = acc + (long long)(o0 + o) * H + k;
            const st_t *p = rows ? w + (long long)v0 * H + k : h + (long long)r0 * H + k;
            *d = lt_dot(sm.zs + o * zo, zi, p, nsum, H, t ? *d : 0.0f);
        }
        __syncthreads();
    }
}

/* The parameters of loss_online_dh and loss_online_dw (acc: dacc or dwacc, as lt_grad says).
 * Each kernel declares the dynamic shared memory itself: a declaration inside lt_grad, a C++
 * function, would conflict in linkage with the extern "C" kernels' (NVRTC warning 1556). */
#define LT_GRAD_PARAMS                                                                             \
    const st_t *__restrict__ h, const st_t *__restrict__ w, const int *__restrict__ labels,        \
        const float *__restrict__ lse, const float *__restrict__ sc, int M, int H, int V,          \
        int stages, float *__restrict__ acc

#if FT_KEEP(loss_online_dh)
extern "C" __global__ void __launch_bounds__(LS_MAXT, 1) loss_online_dh(LT_GRAD_PARAMS) {
    FT_DYNAMIC_SMEM(unsigned char, smem);
    lt_grad(true, smem, h, w, labels, lse, sc, M, H, V, stages, acc);
}
FT_KERNEL_EXPORT(loss_online_dh)
#endif

#if FT_KEEP(loss_online_dw)
extern "C" __global__ void __launch_bounds__(LS_MAXT, 1) loss_online_dw(LT_GRAD_PARAMS) {
    FT_DYNAMIC_SMEM(unsigned char, smem);
    lt_grad(false, smem, h, w, labels, lse, sc, M, H, V, stages, acc);
}
FT_KERNEL_EXPORT(loss_online_dw)
#endif
