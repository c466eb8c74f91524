/* emu_mma.cu: tensor-core sample kernels for the emulator's self-tests: one mma.sync tile with
 * fragments gathered straight from the PTX ISA's layout formulas, a tiled bf16 GEMM fed by
 * cp.async and ldmatrix, and a probe of every ldmatrix form. Also compiled by NVRTC. */
#include "ft_cuda.h"

/* One warp: D[16][8] = A[16][16] B[16][8] + C (A row-major, B given transposed as Bt[8][16],
 * bf16 bits). Element i of a fragment is read where the ISA's tables put it
 * (groupID g = lane >> 2, threadID_in_group t = lane % 4):
 *   A  a_i, i = 0..7:  row g for i in {0,1,4,5}, else g + 8;  col 2t + (i & 1), + 8 for i >= 4
 *   B  b_i, i = 0..3:  row 2t + (i & 1), + 8 for i >= 2;      col g
 *   C  c_i, i = 0..3:  row g for i < 2, else g + 8;           col 2t + (i & 1)
 * Register r holds elements 2r (low half) and 2r + 1 (high half). */
extern "C" __global__ void mma_tile(float *D, const uint16_t *A, const uint16_t *Bt,
                                    const float *C) {
    int lane = (int)threadIdx.x, g = lane >> 2, t = lane & 3;
    uint16_t ae[8], be[4];
    for (int i = 0; i < 8; i++) {
        int row = (i < 2 || (i >= 4 && i < 6)) ? g : g + 8;
        int col = 2 * t + (i & 1) + (i >= 4 ? 8 : 0);
        ae[i] = A[row * 16 + col];
    }
    for (int i = 0; i < 4; i++) {
        int row = 2 * t + (i & 1) + (i >= 2 ? 8 : 0), col = g;
        be[i] = Bt[col * 16 + row];
    }
    uint32_t a[4], b[2];
    float c[4], d[4];
    for (int r = 0; r < 4; r++)
        a[r] = (uint32_t)ae[2 * r] | ((uint32_t)ae[2 * r + 1] << 16);
    for (int r = 0; r < 2; r++)
        b[r] = (uint32_t)be[2 * r] | ((uint32_t)be[2 * r + 1] << 16);
    for (int i = 0; i < 4; i++)
        c[i] = C[(i < 2 ? g : g + 8) * 8 + 2 * t + (i & 1)];
    ft_mma_m16n8k16_bf16(d, a, b, c);
    for (int i = 0; i < 4; i++)
        D[(i < 2 ? g : g + 8) * 8 + 2 * t + (i & 1)] = d[i];
}
FT_KERNEL_EXPORT(mma_tile)

/* C[M][N] (float) = A[M][K] B (bf16): B is Bnk[N][K] when B_NK (the mma's "col" operand as is,
 * ldmatrix .x2) or Bkn[K][N] otherwise (ldmatrix .x4.trans). 128 threads per 64x64 block of C,
 * 4 warps of 32x32 (2 x 4 mma tiles each); K staged 32 at a time with 16-byte cp.async.
 * M and N multiples of 64, K of 32. */
#ifndef B_NK
#define B_NK 1
#endif
#define BM  64
#define BN  64
#define BK  32
#define PAD 8

extern "C" __global__ void __launch_bounds__(128)
    mma_gemm(float *__restrict__ C, const __nv_bfloat16 *__restrict__ A,
             const __nv_bfloat16 *__restrict__ B, int M, int N, int K) {
    __shared__ __align__(16) __nv_bfloat16 As[BM][BK + PAD];
#if B_NK
    __shared__ __align__(16) __nv_bfloat16 Bs[BN][BK + PAD];
#else
    __shared__ __align__(16) __nv_bfloat16 Bs[BK][BN + PAD];
#endif
    int tid = (int)threadIdx.x, lane = tid & 31, warp = tid >> 5;
    int wm = warp / 2, wn = warp % 2, g = lane >> 2, t = lane & 3;
    int m0 = (int)blockIdx.y * BM, n0 = (int)blockIdx.x * BN;
    float acc[2][4][4];
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 4; j++)
            for (int e = 0; e < 4; e++)
                acc[i][j][e] = 0.0f;
    for (int k0 = 0; k0 < K; k0 += BK) {
        for (int c = tid; c < BM * BK / 8; c += 128) {
            int r = c / (BK / 8), kc = (c % (BK / 8)) * 8;
            ft_cp_async_cg16(&As[r][kc], A + (size_t)(m0 + r) * K + k0 + kc);
        }
#if B_NK
        for (int c = tid; c < BN * BK / 8; c += 128) {
            int r = c / (BK / 8), kc = (c % (BK / 8)) * 8;
            ft_cp_async_ca16(&Bs[r][kc], B + (size_t)(n0 + r) * K + k0 + kc);
        }
#else
        for (int c = tid; c < BK * BN / 8; c += 128) {
            int r = c / (BN / 8), nc = (c % (BN / 8)) * 8;
            ft_cp_async_ca16(&Bs[r][nc], B + (size_t)(k0 + r) * N + n0 + nc);
        }
#endif
        ft_cp_async_commit();
        ft_cp_async_wait<0>();
        __syncthreads();
        for (int kk = 0; kk < BK; kk += 16) {
            uint32_t a[2][4], b[4][2];
            for (int mi = 0; mi < 2; mi++)
                ft_ldmatrix_x4(a[mi], &As[wm * 32 + mi * 16 + (lane % 16)][kk + (lane / 16) * 8]);
#if B_NK
            for (int ni = 0; ni < 4; ni++)
                ft_ldmatrix_x2(b[ni],
                               &Bs[wn * 32 + ni * 8 + (lane % 8)][kk + ((lane / 8) % 2) * 8]);
#else
            for (int ni = 0; ni < 4; ni += 2) {
                uint32_t r[4];
                ft_ldmatrix_x4_trans(r, &Bs[kk + (lane % 16)][wn * 32 + ni * 8 + (lane / 16) * 8]);
                b[ni][0] = r[0], b[ni][1] = r[1], b[ni + 1][0] = r[2], b[ni + 1][1] = r[3];
            }
#endif
            for (int mi = 0; mi < 2; mi++)
                for (int ni = 0; ni < 4; ni++)
                    ft_mma_m16n8k16_bf16(acc[mi][ni], a[mi], b[ni], acc[mi][ni]);
        }
        __syncthreads();
    }
    for (int mi = 0; mi < 2; mi++)
        for (int ni = 0; ni < 4; ni++)
            for (int e = 0; e < 4; e++) {
                int row = m0 + wm * 32 + mi * 16 + g + (e >= 2 ? 8 : 0);
                int col = n0 + wn * 32 + ni * 8 + 2 * t + (e & 1);
                C[(size_t)row * N + col] = acc[mi][ni][e];
            }
}
FT_KERNEL_EXPORT(mma_gemm)

/* Every ldmatrix form on four 8x8 matrices of 16-bit values whose rows sit in shared memory in
 * a scrambled order: lane l names row l % 8 of matrix l / 8, stored at row (5 l + 3) % 32.
 * src[32][8] holds the rows in matrix order; out[32][4] gets each lane's registers. */
extern "C" __global__ void ldmatrix_probe(uint32_t *out, const uint16_t *src, int num, int trans) {
    __shared__ __align__(16) uint16_t S[32][8];
    int lane = (int)threadIdx.x, at = (5 * lane + 3) % 32;
    ft_cp_async_ca8(&S[at][0], src + lane * 8);
    ft_cp_async_ca4(&S[at][4], src + lane * 8 + 4);
    ft_cp_async_ca4(&S[at][6], src + lane * 8 + 6);
    ft_cp_async_commit();
    ft_cp_async_wait_all();
    __syncwarp();
    uint32_t r[4] = {0, 0, 0, 0};
    const void *row = &S[at][0];
    if (num == 1 && !trans) ft_ldmatrix_x1(r, row);
    if (num == 2 && !trans) ft_ldmatrix_x2(r, row);
    if (num == 4 && !trans) ft_ldmatrix_x4(r, row);
    if (num == 1 && trans) ft_ldmatrix_x1_trans(r, row);
    if (num == 2 && trans) ft_ldmatrix_x2_trans(r, row);
    if (num == 4 && trans) ft_ldmatrix_x4_trans(r, row);
    for (int i = 0; i < 4; i++)
        out[lane * 4 + i] = r[i];
}
FT_KERNEL_EXPORT(ldmatrix_probe)
