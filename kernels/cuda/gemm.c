/* gemm.c: the one GEMM helper every CUDA op uses (ft_cuda_gemm, see runtime.h).
 *
 * On the GPU it is cuBLASLt with fp32 compute (CUBLAS_COMPUTE_32F: no TF32, so f32 GEMMs meet
 * the 1e-5 tolerances) and fp32 scale. Row-major operands are given to cuBLASLt's column-major
 * API by the usual transpose identity: row-major C = op(A) op(B) is column-major
 * C^T = op(B)^T op(A)^T, so B goes first, every matrix keeps its leading dimension, and each
 * operand's own transpose flag is kept. The algorithm is a tunable: `algo` is the rank of a
 * candidate among cublasLtMatmulAlgoGetHeuristic's first FT_GEMM_MAX_ALGOS for the GEMM's
 * shape, types, strides and pointer alignment; the candidates, descriptors and layouts are made
 * once per such key and cached in the context's state (ft_cuda_gemm_slot), with one workspace
 * for all GEMMs (32 MiB from Hopper on, as NVIDIA recommends there; 4 MiB before).
 *
 * Under the emulator device memory is host memory, so the same call is computed on the CPU by
 * OpenBLAS's sgemm, bf16 operands widened to float (bf16 is the upper half of a float) and a
 * bf16 C narrowed back with round-to-nearest-even. `algo` is checked but changes nothing there.
 *
 * Both paths share the argument checks, so a call the emulator accepts is one the GPU accepts
 * too; as in BLAS, C is not read when beta is 0 (the emulator's poisoned memory would show it).
 */
#include "runtime.h"
#include "device_emu.h"

#include <cblas.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if FT_HAVE_CUDA
#include <cublasLt.h>
#include <cuda_runtime.h>
#include <pthread.h>
#endif

/* ---- arguments ---------------------------------------------------------------------------------
 */

static const char *dt_name(ft_dt d) { return d == FT_DT_BF16 ? "bf16" : "f32"; }

/* "7x5x13 GEMM (A^T bf16, B bf16, C f32, batch 4)" for messages. */
static void describe(const ft_gemm_desc *g, char *buf, size_t n) {
    char batch[40] = "";
    if (g->batch > 1) snprintf(batch, sizeof batch, ", batch %lld", (long long)g->batch);
    snprintf(buf, n, "%lldx%lldx%lld GEMM (A%s %s, B%s %s, C %s%s)", (long long)g->M,
             (long long)g->N, (long long)g->K, g->trans_a ? "^T" : "", dt_name(g->ab),
             g->trans_b ? "^T" : "", dt_name(g->ab), dt_name(g->c), batch);
}

static ft_status check(const ft_gemm_desc *g, const void *A, const void *B, const void *C, int algo,
                       ft_err *err) {
    if (!g) return ft_err_set(err, FT_EINVAL, "ft_cuda_gemm: no GEMM descriptor");
    char d[160];
    describe(g, d, sizeof d);
    if (g->M < 0 || g->N < 0 || g->K < 0)
        return ft_err_set(err, FT_EINVAL, "%s: sizes must not be negative", d);
    if ((g->ab != FT_DT_F32 && g->ab != FT_DT_BF16) || (g->c != FT_DT_F32 && g->c != FT_DT_BF16))
        return ft_err_set(err, FT_EINVAL, "GEMM: unknown storage type (A/B %d, C %d)", (int)g->ab,
                          (int)g->c);
    if (g->ab == FT_DT_F32 && g->c == FT_DT_BF16)
        return ft_err_set(err, FT_EUNSUPPORTED,
                          "%s: cuBLASLt has no f32 x f32 -> bf16 GEMM with fp32 compute; store "
                          "A and B in bf16 or C in f32",
                          d);
    if (algo < 0) return ft_err_set(err, FT_EINVAL, "%s: algorithm %d (must be >= 0)", d, algo);
    if (algo >= FT_GEMM_MAX_ALGOS)
        return ft_err_set(err, FT_EUNSUPPORTED, "%s: algorithm %d; at most %d candidates are kept",
                          d, algo, FT_GEMM_MAX_ALGOS);
    /* Leading dimensions: at least the stored row's width (and 1, as BLAS asks). */
    int64_t a_cols = g->trans_a ? g->M : g->K, b_cols = g->trans_b ? g->K : g->N;
    if (g->lda < a_cols || g->lda < 1)
        return ft_err_set(err, FT_EINVAL, "%s: lda %lld < %s %lld (A is stored [%s] row-major)", d,
                          (long long)g->lda, g->trans_a ? "M" : "K", (long long)a_cols,
                          g->trans_a ? "K,M" : "M,K");
    if (g->ldb < b_cols || g->ldb < 1)
        return ft_err_set(err, FT_EINVAL, "%s: ldb %lld < %s %lld (B is stored [%s] row-major)", d,
                          (long long)g->ldb, g->trans_b ? "K" : "N", (long long)b_cols,
                          g->trans_b ? "N,K" : "K,N");
    if (g->ldc < g->N || g->ldc < 1)
        return ft_err_set(err, FT_EINVAL, "%s: ldc %lld < N %lld", d, (long long)g->ldc,
                          (long long)g->N);
    if (g->batch < 0)
        return ft_err_set(err, FT_EINVAL, "%s: batch %lld is negative", d, (long long)g->batch);
    if (g->batch > 1) {
        if (g->stride_a < 0 || g->stride_b < 0 || g->stride_c < 0)
            return ft_err_set(err, FT_EINVAL, "%s: batch strides must not be negative", d);
        int64_t c_span = g->M > 0 && g->N > 0 ? (g->M - 1) * g->ldc + g->N : 0;
        if (g->stride_c < c_span)
            return ft_err_set(err, FT_EINVAL,
                              "%s: stride_c %lld is less than one C matrix (%lld elements): "
                              "the batches would overwrite each other",
                              d, (long long)g->stride_c, (long long)c_span);
        if (g->batch > INT_MAX)
            return ft_err_set(err, FT_EUNSUPPORTED, "%s: more than %d batches", d, INT_MAX);
    }
    if (g->M == 0 || g->N == 0) return FT_OK; /* nothing to compute or read */
    if (!C) return ft_err_set(err, FT_EINVAL, "%s: C is NULL", d);
    if (g->K > 0 && (!A || !B))
        return ft_err_set(err, FT_EINVAL, "%s: %s is NULL", d, !A ? "A" : "B");
    /* OpenBLAS takes int sizes; cuBLASLt takes 64-bit ones, but one limit for both keeps the
     * emulator's answer the GPU's. */
    if (g->M > INT_MAX || g->N > INT_MAX || g->K > INT_MAX || g->lda > INT_MAX ||
        g->ldb > INT_MAX || g->ldc > INT_MAX)
        return ft_err_set(err, FT_EUNSUPPORTED, "%s: a size or leading dimension exceeds %d", d,
                          INT_MAX);
    return FT_OK;
}

/* ---- bf16 --------------------------------------------------------------------------------------
 */

static float bf16_to_f32(uint16_t h) {
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* Round to nearest even; NaN stays a (quiet) NaN of the same sign. */
static uint16_t f32_to_bf16(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x0040u);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

/* rows x cols of a row-major bf16 matrix with leading dimension ld, widened to a packed float
 * matrix (leading dimension cols). */
static void widen(const uint16_t *src, int64_t ld, int64_t rows, int64_t cols, float *dst) {
    for (int64_t i = 0; i < rows; i++)
        for (int64_t j = 0; j < cols; j++)
            dst[i * cols + j] = bf16_to_f32(src[i * ld + j]);
}

/* ---- the CPU path (the emulator) --------------------------------------------------------------
 */

/* C = beta * C over M x N (beta 0: zeros, C not read), for K = 0 or alpha = 0. */
static void scale_c(const ft_gemm_desc *g, void *C) {
    for (int64_t i = 0; i < g->M; i++)
        for (int64_t j = 0; j < g->N; j++) {
            int64_t k = i * g->ldc + j;
            if (g->c == FT_DT_F32) {
                float *c = (float *)C;
                c[k] = g->beta == 0.0f ? 0.0f : g->beta * c[k];
            } else {
                uint16_t *c = (uint16_t *)C;
                c[k] = f32_to_bf16(g->beta == 0.0f ? 0.0f : g->beta * bf16_to_f32(c[k]));
            }
        }
}

static ft_status gemm_host(const ft_gemm_desc *g, const void *A, const void *B, void *C,
                           ft_err *err) {
    const int64_t nb = g->batch > 1 ? g->batch : 1;
    const int64_t a_rows = g->trans_a ? g->K : g->M, a_cols = g->trans_a ? g->M : g->K;
    const int64_t b_rows = g->trans_b ? g->N : g->K, b_cols = g->trans_b ? g->K : g->N;
    const size_t ab_size = ft_dt_size(g->ab), c_size = ft_dt_size(g->c);
    if (g->K == 0 || g->alpha == 0.0f) {
        for (int64_t b = 0; b < nb; b++)
            scale_c(g, (char *)C + (size_t)(b * g->stride_c) * c_size);
        return FT_OK;
    }
    float *ta = NULL, *tb = NULL, *tc = NULL;
    if (g->ab == FT_DT_BF16) {
        ta = malloc((size_t)(a_rows * a_cols) * sizeof *ta);
        tb = malloc((size_t)(b_rows * b_cols) * sizeof *tb);
    }
    if (g->c == FT_DT_BF16) tc = malloc((size_t)(g->M * g->N) * sizeof *tc);
    if ((g->ab == FT_DT_BF16 && (!ta || !tb)) || (g->c == FT_DT_BF16 && !tc)) {
        free(ta);
        free(tb);
        free(tc);
        char d[160];
        describe(g, d, sizeof d);
        return ft_err_set(err, FT_ENOMEM, "%s: out of memory for the float copies", d);
    }
    for (int64_t b = 0; b < nb; b++) {
        const void *pa = (const char *)A + (size_t)(b * g->stride_a) * ab_size;
        const void *pb = (const char *)B + (size_t)(b * g->stride_b) * ab_size;
        void *pc = (char *)C + (size_t)(b * g->stride_c) * c_size;
        const float *fa = pa, *fb = pb;
        int64_t lda = g->lda, ldb = g->ldb, ldc = g->ldc;
        float *fc = pc;
        if (g->ab == FT_DT_BF16) {
            widen(pa, g->lda, a_rows, a_cols, ta);
            widen(pb, g->ldb, b_rows, b_cols, tb);
            fa = ta, fb = tb, lda = a_cols, ldb = b_cols;
        }
        if (g->c == FT_DT_BF16) {
            if (g->beta != 0.0f)
                widen(pc, g->ldc, g->M, g->N, tc);
            else
                memset(tc, 0, (size_t)(g->M * g->N) * sizeof *tc);
            fc = tc, ldc = g->N;
        }
        cblas_sgemm(CblasRowMajor, g->trans_a ? CblasTrans : CblasNoTrans,
                    g->trans_b ? CblasTrans : CblasNoTrans, (int)g->M, (int)g->N, (int)g->K,
                    g->alpha, fa, (int)lda, fb, (int)ldb, g->beta, fc, (int)ldc);
        if (g->c == FT_DT_BF16) {
            uint16_t *h = pc;
            for (int64_t i = 0; i < g->M; i++)
                for (int64_t j = 0; j < g->N; j++)
                    h[i * g->ldc + j] = f32_to_bf16(tc[i * g->N + j]);
        }
    }
    free(ta);
    free(tb);
    free(tc);
    return FT_OK;
}

/* ---- the GPU path: cuBLASLt -------------------------------------------------------------------
 */

#if FT_HAVE_CUDA

#define GEMM_PLANS 64

/* Everything cuBLASLt's heuristic depends on; zero-filled before use so it compares bytewise. */
typedef struct gemm_key {
    int64_t M, N, K, lda, ldb, ldc, batch, stride_a, stride_b, stride_c;
    int32_t trans_a, trans_b, ab, c;
    uint32_t align_a, align_b, align_c;
    int32_t pad;
} gemm_key;

typedef struct gemm_plan {
    int used;
    uint64_t last_use;
    gemm_key key;
    cublasLtMatmulDesc_t op;
    cublasLtMatrixLayout_t la, lb, lc; /* cuBLASLt's A (our B), B (our A), C and D */
    int nalgos;
    cublasLtMatmulHeuristicResult_t algos[FT_GEMM_MAX_ALGOS];
} gemm_plan;

struct ft_gemm_state {
    ft_dev *dev;
    cublasLtHandle_t lt;
    void *ws;
    size_t ws_bytes;
    int device; /* the CUDA device of the stream, made current around each call */
    pthread_mutex_t lock;
    uint64_t tick;
    gemm_plan plans[GEMM_PLANS];
};

static ft_status lt_fail(ft_err *err, cublasStatus_t st, const char *call, const ft_gemm_desc *g) {
    char d[160];
    describe(g, d, sizeof d);
    ft_status s = st == CUBLAS_STATUS_NOT_SUPPORTED || st == CUBLAS_STATUS_ARCH_MISMATCH
                      ? FT_EUNSUPPORTED
                  : st == CUBLAS_STATUS_ALLOC_FAILED ? FT_ENOMEM
                                                     : FT_EINTERNAL;
    return ft_err_set(err, s, "cuBLASLt %s failed for the %s: %s (%s)", call, d,
                      cublasLtGetStatusString(st), cublasLtGetStatusName(st));
}

static void plan_release(gemm_plan *p) {
    if (p->op) cublasLtMatmulDescDestroy(p->op);
    if (p->la) cublasLtMatrixLayoutDestroy(p->la);
    if (p->lb) cublasLtMatrixLayoutDestroy(p->lb);
    if (p->lc) cublasLtMatrixLayoutDestroy(p->lc);
    memset(p, 0, sizeof *p);
}

void ft_gemm_state_close(ft_gemm_state *s) {
    if (!s) return;
    for (int i = 0; i < GEMM_PLANS; i++)
        if (s->plans[i].used) plan_release(&s->plans[i]);
    if (s->lt) cublasLtDestroy(s->lt);
    if (s->ws) ft_dev_free(s->dev, s->ws);
    pthread_mutex_destroy(&s->lock);
    free(s);
}

static ft_status state_open(ft_cuda_ctx *x, ft_gemm_state **out, ft_err *err) {
    ft_gemm_state *s = calloc(1, sizeof *s);
    if (!s) return ft_err_set(err, FT_ENOMEM, "out of memory for the GEMM state");
    s->dev = ft_cuda_dev(x);
    pthread_mutex_init(&s->lock, NULL);
    cudaStream_t stream = (cudaStream_t)ft_dev_cuda_stream(s->dev);
    cudaError_t ce = cudaStreamGetDevice(stream, &s->device);
    if (ce != cudaSuccess) {
        ft_gemm_state_close(s);
        return ft_err_set(err, FT_EINTERNAL, "GEMM: cudaStreamGetDevice: %s",
                          cudaGetErrorString(ce));
    }
    cublasStatus_t st = cublasLtCreate(&s->lt);
    if (st != CUBLAS_STATUS_SUCCESS) {
        s->lt = NULL;
        ft_gemm_state_close(s);
        return ft_err_set(err, st == CUBLAS_STATUS_ALLOC_FAILED ? FT_ENOMEM : FT_EINTERNAL,
                          "cuBLASLt cublasLtCreate failed: %s (%s)", cublasLtGetStatusString(st),
                          cublasLtGetStatusName(st));
    }
    s->ws_bytes = (ft_dev_props_of(s->dev)->cc_major >= 9 ? 32u : 4u) << 20;
    ft_status fs = ft_dev_alloc(s->dev, s->ws_bytes, &s->ws, err);
    if (fs) {
        ft_gemm_state_close(s);
        return ft_err_wrap(err, "the cuBLASLt workspace");
    }
    *out = s;
    return FT_OK;
}

/* The alignment cuBLASLt may assume of a matrix (256 at most): that of its first element and,
 * when batched, of the step between matrices. */
static uint32_t align_of(const void *p, int64_t stride, int batched, size_t esize) {
    uint64_t v = (uint64_t)(uintptr_t)p | (batched ? (uint64_t)stride * esize : 0) | 256u;
    return (uint32_t)(v & (~v + 1));
}

static cudaDataType_t cuda_type(ft_dt d) { return d == FT_DT_BF16 ? CUDA_R_16BF : CUDA_R_32F; }

#define LT(call)                                                                                   \
    do {                                                                                           \
        cublasStatus_t st_ = (call);                                                               \
        if (st_ != CUBLAS_STATUS_SUCCESS) {                                                        \
            what = #call;                                                                          \
            st = st_;                                                                              \
            goto fail;                                                                             \
        }                                                                                          \
    } while (0)

static ft_status layout(cublasLtMatrixLayout_t *l, ft_dt dt, int64_t rows, int64_t cols, int64_t ld,
                        int64_t batch, int64_t stride, const char **what, cublasStatus_t *stp) {
    cublasStatus_t st =
        cublasLtMatrixLayoutCreate(l, cuda_type(dt), (uint64_t)rows, (uint64_t)cols, ld);
    if (st != CUBLAS_STATUS_SUCCESS) {
        *l = NULL;
        *what = "cublasLtMatrixLayoutCreate";
        *stp = st;
        return FT_EINTERNAL;
    }
    if (batch > 1) {
        int32_t n = (int32_t)batch;
        st = cublasLtMatrixLayoutSetAttribute(*l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &n, sizeof n);
        if (st == CUBLAS_STATUS_SUCCESS)
            st = cublasLtMatrixLayoutSetAttribute(*l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET,
                                                  &stride, sizeof stride);
        if (st != CUBLAS_STATUS_SUCCESS) {
            *what = "cublasLtMatrixLayoutSetAttribute";
            *stp = st;
            return FT_EINTERNAL;
        }
    }
    return FT_OK;
}

/* Descriptors, layouts and the heuristic's candidates for one key. */
static ft_status plan_make(ft_gemm_state *s, const ft_gemm_desc *g, const gemm_key *k, gemm_plan *p,
                           ft_err *err) {
    const char *what = "";
    cublasStatus_t st = CUBLAS_STATUS_SUCCESS;
    cublasLtMatmulPreference_t pref = NULL;
    memset(p, 0, sizeof *p);
    p->key = *k;
    LT(cublasLtMatmulDescCreate(&p->op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    /* Column-major C^T = op(B)^T op(A)^T: cuBLASLt's A is our B and its B our A. */
    cublasOperation_t ta = g->trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
    cublasOperation_t tb = g->trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
    LT(cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta));
    LT(cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb));
    /* A row-major [r, c] matrix with leading dimension ld is a column-major [c, r] one. */
    const int64_t nb = g->batch > 1 ? g->batch : 1;
    if (layout(&p->la, g->ab, g->trans_b ? g->K : g->N, g->trans_b ? g->N : g->K, g->ldb, nb,
               g->stride_b, &what, &st) ||
        layout(&p->lb, g->ab, g->trans_a ? g->M : g->K, g->trans_a ? g->K : g->M, g->lda, nb,
               g->stride_a, &what, &st) ||
        layout(&p->lc, g->c, g->N, g->M, g->ldc, nb, g->stride_c, &what, &st))
        goto fail;
    LT(cublasLtMatmulPreferenceCreate(&pref));
    uint64_t ws = s->ws_bytes;
    LT(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws,
                                            sizeof ws));
    /* Our B is cuBLASLt's A. */
    LT(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES,
                                            &k->align_b, sizeof k->align_b));
    LT(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
                                            &k->align_a, sizeof k->align_a));
    LT(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES,
                                            &k->align_c, sizeof k->align_c));
    LT(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES,
                                            &k->align_c, sizeof k->align_c));
    cublasLtMatmulHeuristicResult_t res[FT_GEMM_MAX_ALGOS];
    int n = 0;
    memset(res, 0, sizeof res);
    LT(cublasLtMatmulAlgoGetHeuristic(s->lt, p->op, p->la, p->lb, p->lc, p->lc, pref,
                                      FT_GEMM_MAX_ALGOS, res, &n));
    cublasLtMatmulPreferenceDestroy(pref);
    pref = NULL;
    for (int i = 0; i < n && i < FT_GEMM_MAX_ALGOS; i++)
        if (res[i].state == CUBLAS_STATUS_SUCCESS && res[i].workspaceSize <= s->ws_bytes)
            p->algos[p->nalgos++] = res[i];
    if (p->nalgos == 0) {
        char d[160];
        describe(g, d, sizeof d);
        plan_release(p);
        return ft_err_set(err, FT_EUNSUPPORTED, "cuBLASLt has no algorithm for the %s", d);
    }
    p->used = 1;
    return FT_OK;
fail:
    if (pref) cublasLtMatmulPreferenceDestroy(pref);
    plan_release(p);
    return lt_fail(err, st, what, g);
}

/* The plan of a key: from the cache, or made in the least recently used slot. */
static ft_status plan_get(ft_gemm_state *s, const ft_gemm_desc *g, const gemm_key *k,
                          gemm_plan **out, ft_err *err) {
    gemm_plan *victim = &s->plans[0];
    for (int i = 0; i < GEMM_PLANS; i++) {
        gemm_plan *p = &s->plans[i];
        if (p->used && memcmp(&p->key, k, sizeof *k) == 0) {
            p->last_use = ++s->tick;
            *out = p;
            return FT_OK;
        }
        if (!p->used || (victim->used && p->last_use < victim->last_use)) victim = p;
    }
    if (victim->used) plan_release(victim);
    ft_status st = plan_make(s, g, k, victim, err);
    if (st) return st;
    victim->last_use = ++s->tick;
    *out = victim;
    return FT_OK;
}

/* K = 0: C = beta * C, which cuBLASLt does not take; zeros and beta = 1 are easy. */
static ft_status gemm_gpu_k0(ft_gemm_state *s, const ft_gemm_desc *g, void *C, ft_err *err) {
    if (g->beta == 1.0f) return FT_OK;
    char d[160];
    describe(g, d, sizeof d);
    if (g->beta != 0.0f)
        return ft_err_set(err, FT_EUNSUPPORTED,
                          "%s: K = 0 with beta %g is not supported on the GPU", d, (double)g->beta);
    const size_t es = ft_dt_size(g->c);
    cudaStream_t stream = (cudaStream_t)ft_dev_cuda_stream(s->dev);
    const int64_t nb = g->batch > 1 ? g->batch : 1;
    for (int64_t b = 0; b < nb; b++) {
        cudaError_t e =
            cudaMemset2DAsync((char *)C + (size_t)(b * g->stride_c) * es, (size_t)g->ldc * es, 0,
                              (size_t)g->N * es, (size_t)g->M, stream);
        if (e != cudaSuccess)
            return ft_err_set(err, ft_cuda_error_status(e, FT_EINTERNAL),
                              "%s: cudaMemset2DAsync: %s", d, cudaGetErrorString(e));
    }
    return FT_OK;
}

static ft_status gemm_gpu(ft_cuda_ctx *x, const ft_gemm_desc *g, const void *A, const void *B,
                          void *C, int algo, ft_err *err) {
    ft_gemm_state **slot = ft_cuda_gemm_slot(x);
    if (!*slot) {
        ft_status st = state_open(x, slot, err);
        if (st) return st;
    }
    ft_gemm_state *s = *slot;
    int cur = -1;
    if (cudaGetDevice(&cur) == cudaSuccess && cur != s->device) cudaSetDevice(s->device);
    if (g->K == 0) return gemm_gpu_k0(s, g, C, err);

    gemm_key k;
    memset(&k, 0, sizeof k);
    const int batched = g->batch > 1;
    k.M = g->M, k.N = g->N, k.K = g->K;
    k.lda = g->lda, k.ldb = g->ldb, k.ldc = g->ldc;
    k.batch = batched ? g->batch : 1;
    k.stride_a = batched ? g->stride_a : 0;
    k.stride_b = batched ? g->stride_b : 0;
    k.stride_c = batched ? g->stride_c : 0;
    k.trans_a = g->trans_a != 0, k.trans_b = g->trans_b != 0;
    k.ab = (int32_t)g->ab, k.c = (int32_t)g->c;
    k.align_a = align_of(A, g->stride_a, batched, ft_dt_size(g->ab));
    k.align_b = align_of(B, g->stride_b, batched, ft_dt_size(g->ab));
    k.align_c = align_of(C, g->stride_c, batched, ft_dt_size(g->c));

    pthread_mutex_lock(&s->lock);
    gemm_plan *p = NULL;
    ft_status fs = plan_get(s, g, &k, &p, err);
    if (fs) {
        pthread_mutex_unlock(&s->lock);
        return fs;
    }
    if (algo >= p->nalgos) {
        int n = p->nalgos;
        pthread_mutex_unlock(&s->lock);
        char d[160];
        describe(g, d, sizeof d);
        return ft_err_set(err, FT_EUNSUPPORTED,
                          "%s: algorithm %d does not exist: cuBLASLt's heuristic has %d "
                          "candidate%s for it (0..%d)",
                          d, algo, n, n == 1 ? "" : "s", n - 1);
    }
    const float alpha = g->alpha, beta = g->beta;
    cublasStatus_t st = cublasLtMatmul(s->lt, p->op, &alpha, B, p->la, A, p->lb, &beta, C, p->lc, C,
                                       p->lc, &p->algos[algo].algo, s->ws, s->ws_bytes,
                                       (cudaStream_t)ft_dev_cuda_stream(s->dev));
    pthread_mutex_unlock(&s->lock);
    return st == CUBLAS_STATUS_SUCCESS ? FT_OK : lt_fail(err, st, "cublasLtMatmul", g);
}

#else /* !FT_HAVE_CUDA */

struct ft_gemm_state {
    int unused;
};

void ft_gemm_state_close(ft_gemm_state *s) { free(s); }

#endif

/* ---- the entry point ------------------------------------------------------------------------- */

ft_status ft_cuda_gemm(ft_cuda_ctx *x, const ft_gemm_desc *g, const void *A, const void *B, void *C,
                       int algo, ft_err *err) {
    if (!x) return ft_err_set(err, FT_EINVAL, "ft_cuda_gemm: no CUDA context");
    ft_status s = check(g, A, B, C, algo, err);
    if (s) return s;
    if (g->M == 0 || g->N == 0) return FT_OK;
    if (ft_cuda_emulated(x)) {
        /* The emulator's profile counts what cuBLASLt would do on the GPU. */
        double nb = g->batch > 1 ? (double)g->batch : 1.0, ab = (double)ft_dt_size(g->ab);
        double flops = 2.0 * (double)g->M * (double)g->N * (double)g->K * nb;
        double bytes =
            nb * (ab * (double)(g->M * g->K + g->K * g->N) +
                  (double)ft_dt_size(g->c) * (double)(g->M * g->N) * (g->beta != 0 ? 2 : 1));
        char what[96];
        snprintf(what, sizeof what, "gemm %lldx%lldx%lld%s", (long long)g->M, (long long)g->N,
                 (long long)g->K, g->batch > 1 ? " (batched)" : "");
        ft_dev_emu_profile_gemm(ft_cuda_dev(x), what, flops, bytes, g->ab == FT_DT_BF16);
        return gemm_host(g, A, B, C, err);
    }
#if FT_HAVE_CUDA
    return gemm_gpu(x, g, A, B, C, algo, err);
#else
    return ft_err_set(err, FT_ENODEV,
                      "GEMM on the GPU: flaretune was built without the CUDA toolkit");
#endif
}
