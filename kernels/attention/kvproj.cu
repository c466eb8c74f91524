/* kvproj.cu: the k_norm + RoPE epilogue of the context K/V projection on CUDA (SPEC.md
 * attention.kvproj); the GEMMs (cuBLASLt, a CPU GEMM under the emulator) and their sequence are
 * in kernels/attention/attention_cuda.c.
 *
 *   u = c[i or 0] w_k[i]^T viewed [N, Hkv, dh];  k = rope(u / sqrt(mean_d u^2 + eps) * gk[i], pos)
 *   v = c[i or 0] w_v[i]^T                         (rotate-half, angle pos * inv_freq[m])
 *   rope(x) = mscale * (x cos + rotate_half(x) sin), inv_freq and mscale from the host
 *   (kernels/attention/rope.c: plain theta^(-2m/dh), or scaled by llama3 or yarn)
 *
 * Napkin math at qwen3-8b dflare train (D 7, N 3072, H 4096, KVD = Hkv*dh = 1024), bf16: the
 * GEMMs are 4 * D * N * H * KVD = 361 GFLOP (~0.4 ms at ~1 PFLOP/s dense bf16); the epilogue
 * touches D * N * KVD = 22 M elements of k: one extra pass (read + write, bf16) is ~90 MB, ~20 us
 * at ~4.8 TB/s, one through fp32 scratch ~180 MB and two passes ~360 MB. Small next to the GEMMs
 * at training sizes, not at decode sizes (N = R * B = 256), where launches and passes dominate.
 *
 * Kernels: one warp per head row (i, n, j) of dh elements; each lane takes the rotate-half pairs
 * (m, m + dh/2) for m = lane, lane + 32, ...; the row's sum of squares is a warp sum. Positions'
 * angles are formed in double (pos up to tens of thousands of radians: a float angle would be off
 * by ~1e-4) and their sin/cos rounded to float. So inv_freq comes as dh/2 doubles: a float
 * inv_freq alone puts pos * 6e-8 * inv_freq radians of error in the angle, a relative error of
 * ~1.5e-5 in k at dh 64-128 and positions near 4k (above the float32 bound of 1e-5). Rows of the
 * source are in the per-layer layout [D, N, Hkv, dh] or, after the wide GEMM, [N, D, Hkv, dh]
 * (`src_wide`). kv_norm          fp32 u -> fp32 u * r * gk in place           (epilogue=split, pass
 * 1) kv_rope          fp32 -> k (storage type), RoPE only          (epilogue=split, pass 2)
 *   kv_normrope      fp32 u -> k, norm + RoPE in one pass          (epilogue=fused)
 *   kv_normrope_ip   k (storage type, the GEMM's output) in place  (epilogue=inplace)
 *   kv_vcopy         wide: V scratch [N, D, KVD] -> v [D, N, KVD]
 * Backward (backward = 1), after the forward's fused epilogue left the fp32 u in scratch:
 *   kv_normrope_bwd  one warp per head row: dy = mscale R^T dk (angles pos * inv_freq[m], formed
 *                    in double from the host's ft_rope_freqs table), du = r (dy gk - xh
 *                    mean(dy gk xh)) into du [D, N, Hkv, dh] (storage type, the GEMMs' operand);
 *                    u is overwritten with dy * xh, the terms of dgk
 *   kv_dgk           dgk[i, e] = sum over (n, j) of those terms: one thread per (i, e), rows in a
 *                    fixed order (deterministic, no atomics), accumulated in double; D*dh
 *                    threads each reading N*Hkv floats, coalesced across e
 * The GEMMs of the backward (dc, dw_k, dw_v) are attention_cuda.c's.
 *
 * Defines: FT_BF16 (1: k, v, gk are __nv_bfloat16 on the device, else float; math is fp32, the
 * angles fp64). Everything else is an argument.
 */
#include "ft_cuda.h"

template <typename S, typename T, bool NORM, bool ROPE>
__device__ __forceinline__ void normrope(const S *src, T *dst, const st_t *gk, const int *pos,
                                         int D, int N, int Hkv, int dh, int src_wide, int dst_wide,
                                         float eps, const double *inv_freq, float mscale) {
    const int warps = (int)(blockDim.x >> 5), lane = threadIdx.x & 31;
    const long long row = (long long)blockIdx.x * warps + (threadIdx.x >> 5);
    if (row >= (long long)D * N * Hkv) return; /* whole warps */
    const int j = (int)(row % Hkv), n = (int)((row / Hkv) % N), i = (int)(row / ((long long)Hkv * N));
    const long long KVD = (long long)Hkv * dh;
    const long long so = (src_wide ? ((long long)n * D + i) : ((long long)i * N + n)) * KVD + j * dh;
    const long long do_ = (dst_wide ? ((long long)n * D + i) : ((long long)i * N + n)) * KVD + j * dh;
    const S *s = src + so;
    T *d = dst + do_;
    const int half = dh / 2;
    float r = 1.0f;
    if (NORM) {
        float ss = 0.0f;
        for (int e = lane; e < dh; e += 32) {
            const float x = ft_ldf(s + e);
            ss = fmaf(x, x, ss);
        }
        ss = ft_warp_sum(ss);
        r = 1.0f / sqrtf(ss / (float)dh + eps);
    }
    const st_t *g = gk + (long long)i * dh;
    const double p = ROPE ? (double)pos[n] : 0.0, ms = (double)mscale;
    for (int m = lane; m < half; m += 32) {
        float a = ft_ldf(s + m), b = ft_ldf(s + m + half);
        if (NORM) {
            a = a * r * ft_ldf(g + m);
            b = b * r * ft_ldf(g + m + half);
        }
        if (ROPE) {
            const double ang = p * inv_freq[m];
            const float cs = (float)(ms * cos(ang)), sn = (float)(ms * sin(ang));
            const float ra = a * cs - b * sn, rb = b * cs + a * sn;
            a = ra;
            b = rb;
        }
        ft_stf(d + m, a);
        ft_stf(d + m + half, b);
    }
}

#if FT_KEEP(kv_norm)
extern "C" __global__ void __launch_bounds__(256)
    kv_norm(float *u, const st_t *__restrict__ gk, const int *__restrict__ pos, int D, int N,
            int Hkv, int dh, int src_wide, float eps) {
    normrope<float, float, true, false>(u, u, gk, pos, D, N, Hkv, dh, src_wide, src_wide, eps,
                                        nullptr, 1.0f);
}
FT_KERNEL_EXPORT(kv_norm)
#endif

/* The parameters of kv_rope and of kv_normrope, which also norms. */
#define KV_ROPE_PARAMS                                                                             \
    const float *__restrict__ u, st_t *__restrict__ k, const st_t *__restrict__ gk,                \
        const int *__restrict__ pos, int D, int N, int Hkv, int dh, int src_wide, float eps,       \
        const double *__restrict__ inv_freq, float mscale

#if FT_KEEP(kv_rope)
extern "C" __global__ void __launch_bounds__(256) kv_rope(KV_ROPE_PARAMS) {
    normrope<float, st_t, false, true>(u, k, gk, pos, D, N, Hkv, dh, src_wide, 0, eps, inv_freq,
                                       mscale);
}
FT_KERNEL_EXPORT(kv_rope)
#endif

#if FT_KEEP(kv_normrope)
extern "C" __global__ void __launch_bounds__(256) kv_normrope(KV_ROPE_PARAMS) {
    normrope<float, st_t, true, true>(u, k, gk, pos, D, N, Hkv, dh, src_wide, 0, eps, inv_freq,
                                      mscale);
}
FT_KERNEL_EXPORT(kv_normrope)
#endif

#if FT_KEEP(kv_normrope_ip)
extern "C" __global__ void __launch_bounds__(256)
    kv_normrope_ip(st_t *k, const st_t *__restrict__ gk, const int *__restrict__ pos, int D, int N,
                   int Hkv, int dh, float eps, const double *__restrict__ inv_freq, float mscale) {
    normrope<st_t, st_t, true, true>(k, k, gk, pos, D, N, Hkv, dh, 0, 0, eps, inv_freq, mscale);
}
FT_KERNEL_EXPORT(kv_normrope_ip)
#endif

/* v[i, n, :] = w[n, i, :] (KVD elements per row), one thread per element. */
#if FT_KEEP(kv_vcopy)
extern "C" __global__ void __launch_bounds__(256)
    kv_vcopy(const st_t *__restrict__ w, st_t *__restrict__ v, int D, int N, int KVD) {
    const long long e = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (e >= (long long)D * N * KVD) return;
    const long long c = e % KVD, n = (e / KVD) % N, i = e / ((long long)KVD * N);
    v[e] = w[(n * D + i) * KVD + c];
}
FT_KERNEL_EXPORT(kv_vcopy)
#endif

/* Backward of norm + RoPE for head row (i, n, j); u in the forward's layout (src_wide), dk and du
 * in [D, N, Hkv, dh]. Each lane owns pairs (m, m + half): after the warp sums, it reads and
 * writes only its own entries of u, so u can take dy * xh in place. */
#if FT_KEEP(kv_normrope_bwd)
extern "C" __global__ void __launch_bounds__(256)
    kv_normrope_bwd(float *u, const st_t *__restrict__ dk, st_t *__restrict__ du,
                    const st_t *__restrict__ gk, const int *__restrict__ pos,
                    const double *__restrict__ inv_freq, float mscale, int D, int N, int Hkv,
                    int dh, int src_wide, float eps) {
    const int warps = (int)(blockDim.x >> 5), lane = threadIdx.x & 31;
    const long long row = (long long)blockIdx.x * warps + (threadIdx.x >> 5);
    if (row >= (long long)D * N * Hkv) return; /* whole warps */
    const int j = (int)(row % Hkv), n = (int)((row / Hkv) % N),
              i = (int)(row / ((long long)Hkv * N));
    const long long KVD = (long long)Hkv * dh;
    float *s = u + (src_wide ? ((long long)n * D + i) : ((long long)i * N + n)) * KVD + j * dh;
    const long long o = ((long long)i * N + n) * KVD + j * dh;
    const st_t *g = gk + (long long)i * dh, *dkr = dk + o;
    const int half = dh / 2;
    float ss = 0.0f;
    for (int e = lane; e < dh; e += 32)
        ss = fmaf(s[e], s[e], ss);
    ss = ft_warp_sum(ss);
    const float r = 1.0f / sqrtf(ss / (float)dh + eps);
    const double p = (double)pos[n];
    float proj = 0.0f;
    for (int pass = 0; pass < 2; pass++) {
        const float pm = proj / (float)dh;
        for (int m = lane; m < half; m += 32) {
            const double ang = p * inv_freq[m];
            const float cs = mscale * (float)cos(ang), sn = mscale * (float)sin(ang);
            const float a = ft_ldf(dkr + m), b = ft_ldf(dkr + m + half);
            const float y0 = a * cs + b * sn, y1 = b * cs - a * sn;
            const float x0 = s[m] * r, x1 = s[m + half] * r;
            const float t0 = y0 * ft_ldf(g + m), t1 = y1 * ft_ldf(g + m + half);
            if (pass == 0) {
                proj += t0 * x0 + t1 * x1;
            } else {
                ft_stf(du + o + m, r * (t0 - x0 * pm));
                ft_stf(du + o + m + half, r * (t1 - x1 * pm));
                s[m] = y0 * x0;
                s[m + half] = y1 * x1;
            }
        }
        if (pass == 0) proj = ft_warp_sum(proj);
    }
}
FT_KERNEL_EXPORT(kv_normrope_bwd)
#endif

#if FT_KEEP(kv_dgk)
extern "C" __global__ void __launch_bounds__(256)
    kv_dgk(const float *__restrict__ prod, st_t *__restrict__ dgk, int D, int N, int Hkv, int dh,
           int src_wide) {
    const long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= (long long)D * dh) return;
    const int i = (int)(t / dh), e = (int)(t % dh);
    const long long KVD = (long long)Hkv * dh;
    double acc = 0.0; /* N*Hkv terms: a float sum would drift past the tolerance */
    for (int n = 0; n < N; n++) {
        const float *rowp =
            prod + (src_wide ? ((long long)n * D + i) : ((long long)i * N + n)) * KVD + e;
        for (int j = 0; j < Hkv; j++)
            acc += (double)rowp[(long long)j * dh];
    }
    ft_stf(dgk + t, (float)acc);
}
FT_KERNEL_EXPORT(kv_dgk)
#endif
