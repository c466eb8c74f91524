/* ceilings.c: measured bandwidth and FLOP-rate ceilings of this CPU (see
 * include/flaretune/ceilings.h). */
#include "flaretune/ceilings.h"
#include "flaretune/backend.h"

#include <cblas.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "flaretune/clock.h"
#include "flaretune/measure.h"
#include "flaretune/rng.h"
#include "flaretune/tensor.h"

long ft_llc_bytes(void) {
    /* sysfs gives the cache this core shares (one CCX on AMD); sysconf may report the whole
     * socket's L3 (256 MiB on an EPYC where a core sees 32 MiB). */
    FILE *f = fopen("/sys/devices/system/cpu/cpu0/cache/index3/size", "r");
    long kib = 0;
    if (f) {
        if (fscanf(f, "%ldK", &kib) != 1) kib = 0;
        fclose(f);
    }
    if (kib > 0) return kib * 1024;
    long l3 = sysconf(_SC_LEVEL3_CACHE_SIZE);
    if (l3 > 0) return l3;
    long l2 = sysconf(_SC_LEVEL2_CACHE_SIZE);
    return l2 > 0 ? l2 : 0;
}

typedef struct {
    float *a, *b, *c;
    size_t n;
    int threads;
} ceil_ctx;

static ft_status copy_run(void *p, int reps, double *secs, ft_err *err) {
    (void)err;
    ceil_ctx *x = p;
    double t0 = ft_now_s();
    for (int r = 0; r < reps; r++) {
        const float *src = (r & 1) ? x->b : x->a;
        float *dst = (r & 1) ? x->a : x->b;
        size_t n = x->n;
#pragma omp parallel for num_threads(x->threads) schedule(static)
        for (size_t i = 0; i < n; i++)
            dst[i] = src[i];
    }
    *secs = ft_now_s() - t0;
    return FT_OK;
}

static ft_status gemm_run(void *p, int reps, double *secs, ft_err *err) {
    (void)err;
    ceil_ctx *x = p;
    int n = (int)x->n;
    double t0 = ft_now_s();
    for (int r = 0; r < reps; r++)
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, x->a, n, x->b, n,
                    0.0f, x->c, n);
    *secs = ft_now_s() - t0;
    return FT_OK;
}

static void fill(float *p, size_t n, uint64_t seed) {
    ft_rng r;
    ft_rng_seed(&r, seed);
    for (size_t i = 0; i < n; i++)
        p[i] = (float)(ft_rng_uniform(&r) - 0.5);
}

ft_status ft_ceilings_cpu(int threads, ft_ceilings *c, ft_err *err) {
    memset(c, 0, sizeof *c);
    double start = ft_now_s();
    c->threads = threads;
    ft_measure_opts o;
    ft_measure_defaults(&o);
    o.min_samples = 5;
    o.min_time_s = 0.1;
    o.max_time_s = 0.5;
    o.max_noise = 0.02;
    ft_stats st;

    /* Copy: 8x the last-level cache, between 128 MiB and 1 GiB per buffer, so nothing stays
     * cached. */
    size_t bytes = (size_t)ft_llc_bytes() * 8;
    if (bytes < ((size_t)128 << 20)) bytes = (size_t)128 << 20;
    if (bytes > ((size_t)1 << 30)) bytes = (size_t)1 << 30;
    ceil_ctx x = {0};
    x.threads = threads;
    x.n = bytes / sizeof(float);
    x.a = ft_alloc(bytes);
    x.b = ft_alloc(bytes);
    if (!x.a || !x.b) {
        ft_free(x.a);
        ft_free(x.b);
        return ft_err_set(err, FT_ENOMEM, "out of memory for the bandwidth probe");
    }
    /* Any non-zero pattern will do for a copy; the page faults of first touch happen here. */
    for (size_t i = 0; i < x.n; i++)
        x.a[i] = x.b[i] = (float)(i & 1023) + 1.0f;
    ft_timed_fn copy = {NULL, copy_run, &x};
    ft_status s = ft_measure(&copy, &o, &st, err);
    ft_free(x.a);
    ft_free(x.b);
    if (s) return s;
    c->copy_bytes = (double)bytes;
    c->bw = 2.0 * (double)bytes / st.median;

    /* GEMM: large enough to run at the BLAS's full rate, small enough to take ~0.1 s. */
    int n = 1536;
    x.n = (size_t)n;
    size_t gb = (size_t)n * n * sizeof(float);
    x.a = ft_alloc(gb);
    x.b = ft_alloc(gb);
    x.c = ft_alloc(gb);
    if (!x.a || !x.b || !x.c) {
        ft_free(x.a);
        ft_free(x.b);
        ft_free(x.c);
        return ft_err_set(err, FT_ENOMEM, "out of memory for the GEMM probe");
    }
    fill(x.a, (size_t)n * n, 3);
    fill(x.b, (size_t)n * n, 4);
    openblas_set_num_threads(threads);
    o.min_samples = 3;
    o.min_time_s = 0.2;
    o.max_time_s = 1.0;
    ft_timed_fn gemm = {NULL, gemm_run, &x};
    s = ft_measure(&gemm, &o, &st, err);
    ft_free(x.a);
    ft_free(x.b);
    ft_free(x.c);
    if (s) return s;
    c->gemm_n = n;
    c->gemm = "sgemm";
    c->flops = 2.0 * n * (double)n * n / st.median;
    c->measured_s = ft_now_s() - start;
    return FT_OK;
}

double ft_roofline_s(const ft_ceilings *c, double bytes, double flops) {
    double tb = c->bw > 0 ? bytes / c->bw : 0, tf = c->flops > 0 ? flops / c->flops : 0;
    return tb > tf ? tb : tf;
}

ft_status ft_ceilings_of(const ft_backend *be, int threads, ft_ceilings *c, ft_err *err) {
    if (be && be->ceilings) return be->ceilings(c, err);
    return ft_ceilings_cpu(threads, c, err);
}
