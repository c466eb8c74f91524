/* test_cuda_gemm.c: ft_cuda_gemm (kernels/cuda/gemm.c) against a naive float64 product.
 *
 * Every case runs through the `cuda-emu` context (OpenBLAS under the emulator) and, when this
 * machine has a GPU and the build has the toolkit, through the `cuda` context too (cuBLASLt), with
 * the same device-memory round trip: transposes, leading dimensions wider than the rows (the
 * padding holds NaN, so reading it shows), strided batches (with a broadcast operand), bf16
 * operands (compared to the product of the bf16-rounded values), a bf16 C, alpha and beta, beta
 * = 0 over a NaN-filled C (C must not be read), K = 0, odd sizes (7x5x13), every heuristic
 * candidate on the GPU; then the argument errors and their messages.
 */
#include <math.h>
#include <string.h>

#include "cuda/backend/cuda_backend.h"
#include "core/rng.h"
#include "ft_test.h"

static ft_rng rng;

static float bf16_round(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    u += 0x7fffu + ((u >> 16) & 1u);
    u &= 0xffff0000u;
    memcpy(&f, &u, 4);
    return f;
}

/* Store float v as element i of a buffer of type dt. */
static void put(void *buf, ft_dt dt, int64_t i, float v) {
    if (dt == FT_DT_F32) {
        ((float *)buf)[i] = v;
    } else {
        float r = bf16_round(v);
        uint32_t u;
        memcpy(&u, &r, 4);
        if (v != v) u = 0x7fc00000u;
        ((uint16_t *)buf)[i] = (uint16_t)(u >> 16);
    }
}

static float get(const void *buf, ft_dt dt, int64_t i) {
    if (dt == FT_DT_F32) return ((const float *)buf)[i];
    uint32_t u = (uint32_t)((const uint16_t *)buf)[i] << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

typedef struct gcase {
    const char *name;
    ft_gemm_desc g;
    int nan_c;   /* fill C with NaN first (only meaningful with beta = 0) */
    int algo;
} gcase;

/* Element counts of the stored operands: every batch and the padding. */
static int64_t extent(int64_t rows, int64_t ld, int64_t stride, int64_t nb) {
    return rows > 0 ? (nb - 1) * stride + (rows - 1) * ld + ld : 1;
}

/* Run one case on context x and compare with the float64 product. */
static void run_case(ft_cuda_ctx *x, const char *where, const gcase *tc) {
    const ft_gemm_desc *g = &tc->g;
    ft_dev *d = ft_cuda_dev(x);
    const int64_t nb = g->batch > 1 ? g->batch : 1;
    const int64_t a_rows = g->trans_a ? g->K : g->M, a_cols = g->trans_a ? g->M : g->K;
    const int64_t b_rows = g->trans_b ? g->N : g->K, b_cols = g->trans_b ? g->K : g->N;
    const int64_t na = extent(a_rows, g->lda, g->stride_a, nb);
    const int64_t nbb = extent(b_rows, g->ldb, g->stride_b, nb);
    const int64_t nc = extent(g->M, g->ldc, g->stride_c, nb);
    const size_t es = ft_dt_size(g->ab), cs = ft_dt_size(g->c);
    void *ha = ft_test_alloc((size_t)na * es), *hb = ft_test_alloc((size_t)nbb * es);
    void *hc = ft_test_alloc((size_t)nc * cs), *hc0 = ft_test_alloc((size_t)nc * cs);
    /* Padding and gaps hold NaN: a GEMM that reads them makes NaNs. */
    for (int64_t i = 0; i < na; i++)
        put(ha, g->ab, i, NAN);
    for (int64_t i = 0; i < nbb; i++)
        put(hb, g->ab, i, NAN);
    for (int64_t i = 0; i < nc; i++)
        put(hc, g->c, i, tc->nan_c ? NAN : (float)(2 * ft_rng_uniform(&rng) - 1));
    for (int64_t b = 0; b < nb; b++) {
        for (int64_t i = 0; i < a_rows; i++)
            for (int64_t j = 0; j < a_cols; j++)
                put(ha, g->ab, b * g->stride_a + i * g->lda + j,
                    (float)(2 * ft_rng_uniform(&rng) - 1));
        for (int64_t i = 0; i < b_rows; i++)
            for (int64_t j = 0; j < b_cols; j++)
                put(hb, g->ab, b * g->stride_b + i * g->ldb + j,
                    (float)(2 * ft_rng_uniform(&rng) - 1));
    }
    memcpy(hc0, hc, (size_t)nc * cs);

    void *da = NULL, *db = NULL, *dc = NULL;
    ft_err err = {0};
    ft_status s = ft_dev_alloc(d, (size_t)na * es, &da, &err);
    if (!s) s = ft_dev_alloc(d, (size_t)nbb * es, &db, &err);
    if (!s) s = ft_dev_alloc(d, (size_t)nc * cs, &dc, &err);
    if (!s) s = ft_dev_copy(d, da, ha, (size_t)na * es, FT_COPY_H2D, &err);
    if (!s) s = ft_dev_copy(d, db, hb, (size_t)nbb * es, FT_COPY_H2D, &err);
    if (!s) s = ft_dev_copy(d, dc, hc, (size_t)nc * cs, FT_COPY_H2D, &err);
    FT_CHECK(s == FT_OK, "%s %s: device buffers: %s", where, tc->name, err.msg);
    if (!s) {
        s = ft_cuda_gemm(x, g, da, db, dc, tc->algo, &err);
        FT_CHECK(s == FT_OK, "%s %s: %s", where, tc->name, err.msg);
    }
    if (!s) s = ft_dev_copy(d, hc, dc, (size_t)nc * cs, FT_COPY_D2H, &err);
    if (!s) s = ft_dev_sync(d, &err);
    if (!s) {
        /* The result, and nothing outside the M x N windows touched. */
        int bad = 0;
        double worst = 0;
        const double tol = g->c == FT_DT_BF16 ? 1.0 / 128 : 1e-5;
        for (int64_t b = 0; b < nb && bad < 5; b++)
            for (int64_t i = 0; i < g->M; i++)
                for (int64_t j = 0; j < g->N; j++) {
                    double acc = 0, mag = 0;
                    for (int64_t k = 0; k < g->K; k++) {
                        int64_t ia = g->trans_a ? k * g->lda + i : i * g->lda + k;
                        int64_t ib = g->trans_b ? j * g->ldb + k : k * g->ldb + j;
                        double av = get(ha, g->ab, b * g->stride_a + ia);
                        double bv = get(hb, g->ab, b * g->stride_b + ib);
                        acc += av * bv;
                        mag += fabs(av * bv);
                    }
                    int64_t ic = b * g->stride_c + i * g->ldc + j;
                    double c0 = g->beta != 0.0f ? get(hc0, g->c, ic) : 0.0;
                    double ref = (double)g->alpha * acc + (double)g->beta * c0;
                    double scale = fabs((double)g->alpha) * mag + fabs((double)g->beta * c0);
                    if (scale < 1e-3) scale = 1e-3;
                    double got = get(hc, g->c, ic), e = fabs(got - ref) / scale;
                    if (!(e <= tol)) {
                        if (bad++ < 5)
                            fprintf(stderr, "  [%lld][%lld][%lld] = %.9g, expected %.9g\n",
                                    (long long)b, (long long)i, (long long)j, got, ref);
                    }
                    if (!(e <= worst)) worst = e; /* NaN included */
                }
        FT_CHECK(bad == 0, "%s %s: %d wrong elements (worst relative error %.3g)", where,
                 tc->name, bad, worst);
        int touched = 0;
        for (int64_t ic = 0; ic < nc; ic++) {
            int64_t b = g->stride_c > 0 ? ic / g->stride_c : 0, r = ic - b * g->stride_c;
            int inside = b < nb && r / g->ldc < g->M && r % g->ldc < g->N;
            if (!inside && memcmp((char *)hc + ic * (int64_t)cs, (char *)hc0 + ic * (int64_t)cs,
                                  cs) != 0)
                touched++;
        }
        FT_CHECK(touched == 0, "%s %s: %d elements of C outside the result changed", where,
                 tc->name, touched);
    } else {
        FT_CHECK(0, "%s %s: %s", where, tc->name, err.msg);
    }
    ft_dev_free(d, da);
    ft_dev_free(d, db);
    ft_dev_free(d, dc);
    free(ha);
    free(hb);
    free(hc);
    free(hc0);
}

/* A packed, unbatched GEMM of M x N x K. */
static ft_gemm_desc packed(int ta, int tb, int64_t M, int64_t N, int64_t K, ft_dt ab, ft_dt c) {
    ft_gemm_desc g;
    memset(&g, 0, sizeof g);
    g.trans_a = ta, g.trans_b = tb;
    g.M = M, g.N = N, g.K = K;
    g.lda = (ta ? M : K) > 0 ? (ta ? M : K) : 1;
    g.ldb = (tb ? K : N) > 0 ? (tb ? K : N) : 1;
    g.ldc = N > 0 ? N : 1;
    g.ab = ab, g.c = c;
    g.alpha = 1.0f;
    return g;
}

static void run_all(ft_cuda_ctx *x, const char *where) {
    gcase cases[40];
    int n = 0;
    const ft_dt F = FT_DT_F32, H = FT_DT_BF16;
    for (int t = 0; t < 4; t++) {
        static const char *names[] = {"NN", "TN", "NT", "TT"};
        cases[n++] = (gcase){names[t], packed(t & 1, t >> 1, 7, 5, 13, F, F), 0, 0};
    }
    /* Leading dimensions larger than the rows, every transpose. */
    for (int t = 0; t < 4; t++) {
        static const char *names[] = {"NN wide ld", "TN wide ld", "NT wide ld", "TT wide ld"};
        gcase c = {names[t], packed(t & 1, t >> 1, 7, 5, 13, F, F), 0, 0};
        c.g.lda += 3, c.g.ldb += 2, c.g.ldc += 4;
        cases[n++] = c;
    }
    /* Strided batches with gaps between the matrices, and B shared by every batch. */
    {
        gcase c = {"batch 3", packed(0, 1, 7, 5, 13, F, F), 0, 0};
        c.g.lda = 15, c.g.ldc = 6;
        c.g.batch = 3;
        c.g.stride_a = 7 * 15 + 4, c.g.stride_b = 5 * 13 + 1, c.g.stride_c = 7 * 6 + 2;
        cases[n++] = c;
        c.name = "batch 4, B broadcast, beta";
        c.g.batch = 4, c.g.stride_b = 0, c.g.beta = -0.5f, c.g.trans_a = 1, c.g.lda = 9;
        c.g.stride_a = 13 * 9;
        cases[n++] = c;
    }
    /* bf16 operands, f32 and bf16 results. */
    for (int t = 0; t < 4; t++) {
        static const char *names[] = {"bf16 NN", "bf16 TN", "bf16 NT", "bf16 TT"};
        cases[n++] = (gcase){names[t], packed(t & 1, t >> 1, 7, 5, 13, H, F), 0, 0};
    }
    cases[n++] = (gcase){"bf16 -> bf16", packed(0, 0, 7, 5, 13, H, H), 0, 0};
    {
        gcase c = {"bf16 -> bf16, batch, beta, wide ld", packed(1, 1, 7, 5, 13, H, H), 0, 0};
        c.g.lda += 1, c.g.ldb += 3, c.g.ldc += 1;
        c.g.batch = 2, c.g.stride_a = 13 * c.g.lda, c.g.stride_b = 5 * c.g.ldb + 8;
        c.g.stride_c = 7 * c.g.ldc;
        c.g.beta = 1.0f, c.g.alpha = 2.0f;
        cases[n++] = c;
    }
    /* alpha and beta. */
    {
        gcase c = {"alpha 0.75", packed(0, 0, 7, 5, 13, F, F), 0, 0};
        c.g.alpha = 0.75f;
        cases[n++] = c;
        c.name = "beta 0.5";
        c.g.alpha = 1.0f, c.g.beta = 0.5f;
        cases[n++] = c;
        c.name = "alpha -2, beta 1";
        c.g.alpha = -2.0f, c.g.beta = 1.0f;
        cases[n++] = c;
        c.name = "alpha 0, beta 0.5";
        c.g.alpha = 0.0f, c.g.beta = 0.5f;
        cases[n++] = c;
    }
    /* beta = 0 must not read C (NaN there stays out of the result). */
    cases[n++] = (gcase){"beta 0 over NaN C", packed(0, 1, 7, 5, 13, F, F), 1, 0};
    cases[n++] = (gcase){"beta 0 over NaN bf16 C", packed(0, 1, 7, 5, 13, H, H), 1, 0};
    /* K = 0: C = beta C. */
    {
        gcase c = {"K 0, beta 0", packed(0, 0, 7, 5, 0, F, F), 1, 0};
        cases[n++] = c;
        c.name = "K 0, beta 1";
        c.nan_c = 0, c.g.beta = 1.0f;
        cases[n++] = c;
    }
    /* Sizes a tensor-core kernel tiles, odd ones, and a single element. */
    cases[n++] = (gcase){"64x96x200", packed(0, 1, 64, 96, 200, F, F), 0, 0};
    cases[n++] = (gcase){"bf16 64x96x200", packed(0, 1, 64, 96, 200, H, F), 0, 0};
    cases[n++] = (gcase){"33x17x129 TN", packed(1, 0, 33, 17, 129, F, F), 0, 0};
    cases[n++] = (gcase){"1x1x1", packed(0, 0, 1, 1, 1, F, F), 0, 0};
    cases[n++] = (gcase){"algo 1", packed(0, 0, 64, 96, 200, F, F), 0, 1};
    for (int i = 0; i < n; i++)
        run_case(x, where, &cases[i]);
}

static ft_cuda_ctx *emu(void) {
    ft_cuda_ctx *x = NULL;
    ft_err err = {0};
    ft_status s = ft_cuda_ctx_get(1, &x, &err);
    FT_CHECK(s == FT_OK && x, "cuda-emu context: %s", err.msg);
    return x;
}

static void test_emulator(void) {
    ft_cuda_ctx *x = emu();
    if (x) run_all(x, "cuda-emu");
}

static void test_gpu(void) {
    ft_cuda_ctx *x = NULL;
    ft_err err = {0};
    if (ft_cuda_ctx_get(0, &x, &err)) {
        fprintf(stderr, "  (no GPU here: %s)\n", err.msg);
        return;
    }
    run_all(x, "cuda");
    /* Every candidate the heuristic offers gives the same product; the one after the last is
     * refused with the count. */
    int found_end = 0;
    for (int a = 0; a < FT_GEMM_MAX_ALGOS && !found_end; a++) {
        gcase c = {"algo sweep", packed(0, 1, 128, 256, 512, FT_DT_BF16, FT_DT_F32), 0, a};
        ft_gemm_desc *g = &c.g;
        void *da = NULL, *db = NULL, *dc = NULL;
        ft_dev *d = ft_cuda_dev(x);
        ft_dev_alloc(d, 128 * 512 * 2, &da, NULL);
        ft_dev_alloc(d, 256 * 512 * 2, &db, NULL);
        ft_dev_alloc(d, 128 * 256 * 4, &dc, NULL);
        ft_dev_memset(d, da, 0, 128 * 512 * 2, NULL);
        ft_dev_memset(d, db, 0, 256 * 512 * 2, NULL);
        ft_status s = ft_cuda_gemm(x, g, da, db, dc, a, &err);
        if (s == FT_EUNSUPPORTED) {
            found_end = 1;
            FT_CHECK(strstr(err.msg, "candidate") != NULL, "message: %s", err.msg);
            fprintf(stderr, "  %s\n", err.msg);
        } else {
            FT_CHECK(s == FT_OK, "algo %d: %s", a, err.msg);
            ft_dev_free(d, da), ft_dev_free(d, db), ft_dev_free(d, dc);
            run_case(x, "cuda", &c);
            continue;
        }
        ft_dev_free(d, da), ft_dev_free(d, db), ft_dev_free(d, dc);
    }
}

static void expect(ft_cuda_ctx *x, const ft_gemm_desc *g, const void *A, const void *B, void *C,
                   int algo, ft_status want, const char *needle) {
    ft_err err = {0};
    ft_status s = ft_cuda_gemm(x, g, A, B, C, algo, &err);
    FT_CHECK(s == want, "status %s, expected %s (%s)", ft_status_name(s), ft_status_name(want),
             err.msg);
    if (needle) FT_CHECK(strstr(err.msg, needle) != NULL, "message '%s' lacks '%s'", err.msg, needle);
}

static void test_errors(void) {
    ft_cuda_ctx *x = emu();
    if (!x) return;
    float a[7 * 13], b[13 * 5], c[7 * 5];
    memset(a, 0, sizeof a), memset(b, 0, sizeof b), memset(c, 0, sizeof c);
    ft_gemm_desc g = packed(0, 0, 7, 5, 13, FT_DT_F32, FT_DT_F32);
    expect(x, &g, a, b, c, 0, FT_OK, NULL);

    ft_gemm_desc e = g;
    e.M = -1;
    expect(x, &e, a, b, c, 0, FT_EINVAL, "negative");
    e = g, e.K = -3;
    expect(x, &e, a, b, c, 0, FT_EINVAL, "negative");
    e = g, e.lda = 12;
    expect(x, &e, a, b, c, 0, FT_EINVAL, "lda 12 < K 13");
    e = g, e.trans_a = 1, e.lda = 6;
    expect(x, &e, a, b, c, 0, FT_EINVAL, "lda 6 < M 7");
    e = g, e.ldb = 4;
    expect(x, &e, a, b, c, 0, FT_EINVAL, "ldb 4 < N 5");
    e = g, e.trans_b = 1, e.ldb = 5;
    expect(x, &e, a, b, c, 0, FT_EINVAL, "ldb 5 < K 13");
    e = g, e.ldc = 3;
    expect(x, &e, a, b, c, 0, FT_EINVAL, "ldc 3 < N 5");
    expect(x, &g, NULL, b, c, 0, FT_EINVAL, "A is NULL");
    expect(x, &g, a, NULL, c, 0, FT_EINVAL, "B is NULL");
    expect(x, &g, a, b, NULL, 0, FT_EINVAL, "C is NULL");
    expect(x, NULL, a, b, c, 0, FT_EINVAL, "descriptor");
    {
        ft_err err = {0};
        FT_CHECK(ft_cuda_gemm(NULL, &g, a, b, c, 0, &err) == FT_EINVAL, "no context");
        FT_CHECK(strstr(err.msg, "context") != NULL, "message: %s", err.msg);
    }
    e = g, e.c = FT_DT_BF16;
    expect(x, &e, a, b, c, 0, FT_EUNSUPPORTED, "f32 x f32 -> bf16");
    e = g, e.ab = (ft_dt)7;
    expect(x, &e, a, b, c, 0, FT_EINVAL, "storage type");
    expect(x, &g, a, b, c, -1, FT_EINVAL, "algorithm -1");
    expect(x, &g, a, b, c, FT_GEMM_MAX_ALGOS, FT_EUNSUPPORTED, "candidates");
    e = g, e.batch = 2, e.stride_a = 91, e.stride_b = 65, e.stride_c = 20;
    expect(x, &e, a, b, c, 0, FT_EINVAL, "overwrite");
    e = g, e.batch = 2, e.stride_a = -1, e.stride_c = 35;
    expect(x, &e, a, b, c, 0, FT_EINVAL, "strides");
    e = g, e.batch = -2;
    expect(x, &e, a, b, c, 0, FT_EINVAL, "batch -2");
    /* The message names the GEMM. */
    e = g, e.lda = 1;
    expect(x, &e, a, b, c, 0, FT_EINVAL, "7x5x13 GEMM (A f32, B f32, C f32)");
    /* Empty products need no memory at all. */
    e = g, e.M = 0;
    expect(x, &e, NULL, NULL, NULL, 0, FT_OK, NULL);
    e = g, e.N = 0, e.ldb = 1, e.ldc = 1;
    expect(x, &e, NULL, NULL, NULL, 0, FT_OK, NULL);
    /* K = 0 reads neither A nor B. */
    e = g, e.K = 0, e.lda = 1;
    expect(x, &e, NULL, NULL, c, 0, FT_OK, NULL);
}

int main(void) {
    ft_rng_seed(&rng, 20261129);
    FT_RUN(test_emulator);
    FT_RUN(test_errors);
    FT_RUN(test_gpu);
    return ft_test_finish();
}
