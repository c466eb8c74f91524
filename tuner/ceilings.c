/* ceilings.c: this machine's cache-aware ceilings, the best of every round and of the cache
 * (see tuner/ceilings.h).
 *
 * CPU probes, each thread on its own slice inside one OpenMP region (one fork per trial, so a
 * trial of a few milliseconds measures the cache, not the fork):
 *   - per level (L1, L2, L3 from sysfs, then memory): a working set of half the level's
 *     capacity for the threads used (memory: 8x the last-level cache, 128 MiB to 1 GiB),
 *     streamed by five kernels (a vector read, a vector write, a streaming write, a vector copy,
 *     libc's memcpy); the level's bandwidth is the best kernel's, the best of several trials;
 *   - the compute roof: a register-only FMA chain as wide as the build's vectors, and a sgemm
 *     of 2048^3 from the BLAS the kernels use; the roof is the higher.
 * A kernel's own loads may beat one probe kernel (streaming stores, wider loads), never all of
 * them and the hardware at once; a level is also never slower than the one below it.
 */
#define _GNU_SOURCE /* strptime, timegm */
#include "tuner/ceilings.h"
#include "core/json.h"
#include "core/load.h"
#include "op/backend.h"

#include <cblas.h>
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

#include "core/clock.h"
#include "core/env.h"
#include "traces/eventlog.h"
#include "core/filelock.h"
#include "core/npy.h"
#include "core/rng.h"
#include "core/tensor.h"

/* ---- the cache hierarchy from sysfs ------------------------------------------------------- */

typedef struct {
    int level;       /* 1, 2, 3 */
    long size;       /* bytes of one instance */
    int sharing;     /* logical CPUs sharing one instance */
} cache_info;

/* The number a sysfs file starts with ("32K" reads 32). */
static long read_long_file(const char *path) {
    FILE *f = fopen(path, "r");
    long v = 0;
    if (f) {
        if (fscanf(f, "%ld", &v) != 1) v = 0;
        fclose(f);
    }
    return v;
}

/* Count the CPUs of a sysfs list such as "0-3,8,10-11". */
static int cpu_list_count(const char *s) {
    int n = 0;
    while (*s) {
        char *end;
        long a = strtol(s, &end, 10);
        if (end == s) break;
        long b = a;
        if (*end == '-') b = strtol(end + 1, &end, 10);
        if (b >= a) n += (int)(b - a + 1);
        s = end;
        if (*s == ',') s++;
        else break;
    }
    return n > 0 ? n : 1;
}

/* The data caches of cpu0, smallest level first; returns how many. */
static int data_caches(cache_info *out, int max) {
    int n = 0;
    for (int idx = 0; idx < 8 && n < max; idx++) {
        char base[96], path[160], type[32] = "";
        snprintf(base, sizeof base, "/sys/devices/system/cpu/cpu0/cache/index%d", idx);
        snprintf(path, sizeof path, "%s/type", base);
        FILE *f = fopen(path, "r");
        if (!f) break;
        if (fscanf(f, "%31s", type) != 1) type[0] = '\0';
        fclose(f);
        if (strcmp(type, "Data") != 0 && strcmp(type, "Unified") != 0) continue;
        snprintf(path, sizeof path, "%s/level", base);
        int level = (int)read_long_file(path);
        snprintf(path, sizeof path, "%s/size", base);
        long kib = read_long_file(path);
        if (level < 1 || kib <= 0) continue;
        char list[256] = "0";
        snprintf(path, sizeof path, "%s/shared_cpu_list", base);
        if ((f = fopen(path, "r"))) {
            if (!fgets(list, sizeof list, f)) snprintf(list, sizeof list, "0");
            fclose(f);
        }
        out[n].level = level;
        out[n].size = kib * 1024;
        out[n].sharing = cpu_list_count(list);
        n++;
    }
    /* sysfs lists them by index, which is by level on every machine seen; make sure. */
    for (int i = 1; i < n; i++)
        for (int j = i; j > 0 && out[j - 1].level > out[j].level; j--) {
            cache_info t = out[j];
            out[j] = out[j - 1];
            out[j - 1] = t;
        }
    return n;
}

long ft_llc_bytes(void) {
    cache_info c[6];
    int n = data_caches(c, 6);
    if (n > 0) return c[n - 1].size; /* the instance this core sees (one CCX on AMD) */
    long l3 = sysconf(_SC_LEVEL3_CACHE_SIZE);
    if (l3 > 0) return l3;
    long l2 = sysconf(_SC_LEVEL2_CACHE_SIZE);
    return l2 > 0 ? l2 : 0;
}

/* ---- bandwidth probes --------------------------------------------------------------------- */

/* 64 bytes: one cache line, one AVX-512 register, two AVX ones; GCC splits it as needed. */
typedef float v16 __attribute__((vector_size(64)));

enum { K_READ, K_WRITE, K_STREAM, K_COPY, K_MEMCPY, K_COUNT };

static volatile float probe_sink;

/* Bytes per float counted by each kernel: reads and writes, as STREAM counts them. */
static int kind_bytes(int kind) { return kind == K_COPY || kind == K_MEMCPY ? 8 : 4; }

static void run_kind(int kind, float *a, float *b, size_t n, float val) {
    switch (kind) {
    case K_READ: {
        /* Eight independent sums: the loads, not the add latency, bound it. */
        v16 s0 = {0}, s1 = {0}, s2 = {0}, s3 = {0}, s4 = {0}, s5 = {0}, s6 = {0}, s7 = {0};
        for (size_t i = 0; i + 128 <= n; i += 128) {
            v16 x[8];
            memcpy(x, a + i, sizeof x);
            s0 += x[0], s1 += x[1], s2 += x[2], s3 += x[3];
            s4 += x[4], s5 += x[5], s6 += x[6], s7 += x[7];
        }
        v16 s = (s0 + s1) + (s2 + s3) + ((s4 + s5) + (s6 + s7));
        probe_sink = s[0] + s[15];
        break;
    }
    case K_WRITE: {
        v16 x;
        for (int l = 0; l < 16; l++) x[l] = val;
        for (size_t i = 0; i + 16 <= n; i += 16) memcpy(a + i, &x, sizeof x);
        break;
    }
    case K_STREAM: {
#if defined(__AVX512F__)
        __m512 x = _mm512_set1_ps(val);
        for (size_t i = 0; i + 16 <= n; i += 16) _mm512_stream_ps(a + i, x);
        _mm_sfence();
#elif defined(__AVX__)
        __m256 x = _mm256_set1_ps(val);
        for (size_t i = 0; i + 8 <= n; i += 8) _mm256_stream_ps(a + i, x);
        _mm_sfence();
#elif defined(__SSE__)
        __m128 x = _mm_set1_ps(val);
        for (size_t i = 0; i + 4 <= n; i += 4) _mm_stream_ps(a + i, x);
        _mm_sfence();
#else
        for (size_t i = 0; i < n; i++) a[i] = val;
#endif
        break;
    }
    case K_COPY:
        for (size_t i = 0; i + 16 <= n; i += 16) {
            v16 x;
            memcpy(&x, a + i, sizeof x);
            memcpy(b + i, &x, sizeof x);
        }
        break;
    case K_MEMCPY: memcpy(b, a, n * sizeof(float)); break;
    }
}

/* One trial: every thread streams its slice `reps` times; bytes per second over the region. */
static double trial(int kind, float *buf, size_t per_thread, int threads, int reps) {
    int team = threads;
    double t0 = ft_now_s();
#pragma omp parallel num_threads(threads)
    {
        int t = omp_get_thread_num();
#pragma omp single
        team = omp_get_num_threads();
        float *mine = buf + (size_t)t * per_thread;
        /* Reads and writes use the whole slice; a copy its two halves. */
        int copy = kind == K_COPY || kind == K_MEMCPY;
        size_t n = copy ? per_thread / 2 : per_thread;
        for (int r = 0; r < reps; r++) run_kind(kind, mine, mine + n, n, (float)(r + 1));
    }
    double dt = ft_now_s() - t0;
    int copy = kind == K_COPY || kind == K_MEMCPY;
    double floats = (double)(copy ? per_thread / 2 : per_thread) * team * reps;
    return dt > 0 ? floats * kind_bytes(kind) / dt : 0;
}

/* The best bandwidth of any kernel over a working set of `per_thread` floats per thread. */
static double probe_level(float *buf, size_t per_thread, int threads, int trials) {
    /* Repetitions for about 3 ms a trial at 50 GB/s per thread (more for small sets). */
    double bytes = (double)per_thread * 4 * threads;
    int reps = (int)ceil(3e-3 * 50e9 * threads / bytes);
    if (reps < 1) reps = 1;
    if (reps > 100000) reps = 100000;
    double best = 0;
    for (int k = 0; k < K_COUNT; k++) trial(k, buf, per_thread, threads, 1); /* fault in, warm */
    for (int t = 0; t < trials; t++)
        for (int k = 0; k < K_COUNT; k++) {
            double bw = trial(k, buf, per_thread, threads, reps);
            if (bw > best) best = bw;
        }
    return best;
}

/* ---- compute probes ----------------------------------------------------------------------- */

/* FLOP per second of a register-only FMA chain on every thread: twelve independent accumulators
 * (named, so they stay in registers) hide the FMA latency on two pipes. */
#if defined(__AVX512F__)
typedef __m512 fma_vec;
#define FMA_LANES 16
#define FMA_SET(x) _mm512_set1_ps(x)
#define FMA(a, m, c) _mm512_fmadd_ps(a, m, c)
static float fma_sum(fma_vec v) { return _mm512_reduce_add_ps(v); }
#elif defined(__FMA__)
typedef __m256 fma_vec;
#define FMA_LANES 8
#define FMA_SET(x) _mm256_set1_ps(x)
#define FMA(a, m, c) _mm256_fmadd_ps(a, m, c)
static float fma_sum(fma_vec v) {
    float l[8];
    _mm256_storeu_ps(l, v);
    return l[0] + l[1] + l[2] + l[3] + l[4] + l[5] + l[6] + l[7];
}
#else
typedef float fma_vec;
#define FMA_LANES 1
#define FMA_SET(x) (x)
#define FMA(a, m, c) ((a) * (m) + (c))
static float fma_sum(fma_vec v) { return v; }
#endif

static float fma_chain(long iters) {
    fma_vec m = FMA_SET(0.999999f), c = FMA_SET(1e-6f);
    fma_vec a0 = FMA_SET(0), a1 = FMA_SET(1), a2 = FMA_SET(2), a3 = FMA_SET(3), a4 = FMA_SET(4),
            a5 = FMA_SET(5), a6 = FMA_SET(6), a7 = FMA_SET(7), a8 = FMA_SET(8), a9 = FMA_SET(9),
            a10 = FMA_SET(10), a11 = FMA_SET(11);
    for (long i = 0; i < iters; i++) {
        a0 = FMA(a0, m, c), a1 = FMA(a1, m, c), a2 = FMA(a2, m, c), a3 = FMA(a3, m, c);
        a4 = FMA(a4, m, c), a5 = FMA(a5, m, c), a6 = FMA(a6, m, c), a7 = FMA(a7, m, c);
        a8 = FMA(a8, m, c), a9 = FMA(a9, m, c), a10 = FMA(a10, m, c), a11 = FMA(a11, m, c);
    }
    return fma_sum(a0) + fma_sum(a1) + fma_sum(a2) + fma_sum(a3) + fma_sum(a4) + fma_sum(a5) +
           fma_sum(a6) + fma_sum(a7) + fma_sum(a8) + fma_sum(a9) + fma_sum(a10) + fma_sum(a11);
}

static double probe_fma(int threads, int trials) {
    const long iters = 1000000;
    double best = 0;
    for (int t = 0; t < trials + 1; t++) {
        int team = threads;
        double t0 = ft_now_s();
#pragma omp parallel num_threads(threads)
        {
#pragma omp single
            team = omp_get_num_threads();
            probe_sink = fma_chain(iters);
        }
        double dt = ft_now_s() - t0;
        double rate = 2.0 * 12 * FMA_LANES * (double)iters * team / dt;
        if (t > 0 && rate > best) best = rate; /* the first trial warms the clocks */
    }
    return best;
}

static void fill(float *p, size_t n, uint64_t seed) {
    ft_rng r;
    ft_rng_seed(&r, seed);
    for (size_t i = 0; i < n; i++) p[i] = (float)(ft_rng_uniform(&r) - 0.5);
}

/* FLOP per second of sgemm n^3, the best of `trials` after one warm-up call. */
static ft_status probe_sgemm(int threads, int n, int trials, double *rate, ft_err *err) {
    size_t gb = (size_t)n * n * sizeof(float);
    float *a = ft_alloc(gb), *b = ft_alloc(gb), *c = ft_alloc(gb);
    if (!a || !b || !c) {
        ft_free(a);
        ft_free(b);
        ft_free(c);
        return ft_err_set(err, FT_ENOMEM, "out of memory for the GEMM probe");
    }
    fill(a, (size_t)n * n, 3);
    fill(b, (size_t)n * n, 4);
    openblas_set_num_threads(threads);
    double best = 0;
    for (int t = 0; t < trials + 1; t++) {
        double t0 = ft_now_s();
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, a, n, b, n, 0.0f, c,
                    n);
        double r = 2.0 * n * (double)n * n / (ft_now_s() - t0);
        if (t > 0 && r > best) best = r;
    }
    ft_free(a);
    ft_free(b);
    ft_free(c);
    *rate = best;
    return FT_OK;
}

static void finish(ft_ceilings *c);

/* ---- one CPU round ------------------------------------------------------------------------ */

static void level_set(ft_ceil_level *l, const char *name, double capacity, double probe,
                      double bw) {
    memset(l, 0, sizeof *l);
    snprintf(l->name, sizeof l->name, "%s", name);
    l->capacity = capacity;
    l->probe_bytes = probe;
    l->bw = l->bw_now = bw;
}

static void now_iso(char *buf, size_t n) {
    time_t now = time(NULL);
    struct tm tm;
    gmtime_r(&now, &tm);
    strftime(buf, n, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

/* The levels' bandwidths with `threads` threads into bw[] (one per level of the plan). */
typedef struct {
    int n;
    char name[FT_CEIL_MAX_LEVELS][8];
    double capacity[FT_CEIL_MAX_LEVELS];
    size_t per_thread[FT_CEIL_MAX_LEVELS]; /* floats each thread streams, at `threads` */
    size_t one_thread[FT_CEIL_MAX_LEVELS]; /* floats one thread alone streams: half an instance */
} level_plan;

static void plan_levels(int threads, size_t mem_per, level_plan *lp) {
    cache_info ci[6];
    int nc = data_caches(ci, 6);
    memset(lp, 0, sizeof *lp);
    double prev_per_thread = 0; /* bytes per thread the level below holds */
    for (int i = 0; i < nc && lp->n < FT_CEIL_MAX_LEVELS - 1; i++) {
        int instances = (threads + ci[i].sharing - 1) / ci[i].sharing;
        double capacity = (double)ci[i].size * instances;
        double per_thread_bytes = capacity / 2 / threads;
        /* A level that cannot hold twice what the one below does adds nothing measurable. */
        if (per_thread_bytes < 2 * prev_per_thread) continue;
        size_t per = (size_t)(per_thread_bytes / 4) & ~(size_t)255;
        if (per < 256 || per > mem_per) continue;
        snprintf(lp->name[lp->n], sizeof lp->name[0], "L%d", ci[i].level);
        lp->capacity[lp->n] = capacity;
        lp->one_thread[lp->n] = ((size_t)ci[i].size / 2 / 4) & ~(size_t)255;
        lp->per_thread[lp->n++] = per;
        prev_per_thread = (double)per * 4;
    }
    snprintf(lp->name[lp->n], sizeof lp->name[0], "DRAM");
    lp->capacity[lp->n] = 0;
    lp->one_thread[lp->n] = mem_per;
    lp->per_thread[lp->n++] = mem_per;
}

/* The memory probe's floats per thread: 8x the last-level cache in all, 128 MiB to 1 GiB. */
static size_t memory_floats_per_thread(int threads) {
    long llc = ft_llc_bytes();
    if (llc <= 0) llc = 32L << 20;
    double mem_total = 8.0 * (double)llc;
    if (mem_total < 128.0 * (1 << 20)) mem_total = 128.0 * (1 << 20);
    if (mem_total > 1024.0 * (1 << 20)) mem_total = 1024.0 * (1 << 20);
    return (size_t)(mem_total / 4 / threads) & ~(size_t)255;
}

/* The levels of a round without probing them (their names and capacities from sysfs, no
 * bandwidth): for the cache to fill in. */
static void cpu_plan_only(int threads, ft_ceilings *c) {
    memset(c, 0, sizeof *c);
    if (threads < 1) threads = 1;
    c->threads = threads;
    size_t mem_per = memory_floats_per_thread(threads);
    level_plan lp;
    plan_levels(threads, mem_per, &lp);
    for (int i = 0; i < lp.n; i++)
        level_set(&c->level[c->nlevels++], lp.name[i], lp.capacity[i],
                  (double)lp.per_thread[i] * 4 * threads, 0);
    c->copy_bytes = (double)mem_per * 4 * threads;
    c->gemm = "sgemm";
}

/* One round of the probes; `quick` (the cache already holds this machine's best) takes one
 * trial of each, the cache then supplying the best. */
static ft_status cpu_round(int threads, int quick, ft_ceilings *c, ft_err *err) {
    memset(c, 0, sizeof *c);
    if (threads < 1) threads = 1;
    double start = ft_now_s();
    c->threads = threads;
    /* Memory's working set first: it sizes the one buffer every probe shares. */
    size_t mem_per = memory_floats_per_thread(threads);
    float *buf = NULL;
    while (mem_per >= ((size_t)16 << 20) / 4 && !(buf = ft_alloc(mem_per * 4 * (size_t)threads)))
        mem_per /= 2;
    if (!buf) return ft_err_set(err, FT_ENOMEM, "out of memory for the bandwidth probes");
    size_t total = mem_per * (size_t)threads;
    for (size_t i = 0; i < total; i++) buf[i] = (float)(i & 1023) + 1.0f; /* non-zero, faulted in */

    level_plan lp;
    plan_levels(threads, mem_per, &lp);
    /* Each level with every thread, and with one: `threads` threads can always do what one does,
     * and on a busy machine the team waits for descheduled members where one thread does not. */
    for (int i = 0; i < lp.n; i++) {
        int last = i == lp.n - 1, trials = quick ? 1 : last ? 2 : 3;
        double bw = probe_level(buf, lp.per_thread[i], threads, trials);
        if (threads > 1) {
            double b1 = probe_level(buf, lp.one_thread[i], 1, trials);
            if (b1 > bw) bw = b1;
        }
        level_set(&c->level[c->nlevels++], lp.name[i], lp.capacity[i],
                  (double)lp.per_thread[i] * 4 * threads, bw);
    }
    ft_free(buf);
    c->copy_bytes = (double)total * 4;

    c->peak_flops = probe_fma(threads, quick ? 2 : 5);
    if (threads > 1) {
        double one = probe_fma(1, quick ? 2 : 5);
        if (one > c->peak_flops) c->peak_flops = one;
    }
    c->gemm_n = quick ? 1536 : 2048;
    c->gemm = "sgemm";
    ft_status s = probe_sgemm(threads, c->gemm_n, quick ? 1 : 2, &c->gemm_flops, err);
    if (s) return s;
    c->flops = c->flops_now = c->peak_flops > c->gemm_flops ? c->peak_flops : c->gemm_flops;
    char when[24];
    now_iso(when, sizeof when);
    for (int i = 0; i < c->nlevels; i++) memcpy(c->level[i].seen, when, sizeof when);
    memcpy(c->flops_seen, when, sizeof when);
    finish(c);
    c->rounds = 1;
    c->measured_s = ft_now_s() - start;
    c->measured_at = ft_wall_time();
    return FT_OK;
}

ft_status ft_ceilings_cpu(int threads, ft_ceilings *c, ft_err *err) {
    return cpu_round(threads, 0, c, err);
}

/* ---- combining rounds and the cache -------------------------------------------------------- */

static ft_ceil_level *level_named(ft_ceilings *c, const char *name) {
    for (int i = 0; i < c->nlevels; i++)
        if (!strcmp(c->level[i].name, name)) return &c->level[i];
    return NULL;
}

/* A level is never slower than the level below it: whatever fits in a small cache can be served
 * at least as fast as from a larger one. Applied to the effective figures only. */
static void finish(ft_ceilings *c) {
    for (int i = c->nlevels - 2; i >= 0; i--)
        if (c->level[i].bw < c->level[i + 1].bw) c->level[i].bw = c->level[i + 1].bw;
    c->bw = c->nlevels ? c->level[c->nlevels - 1].bw : 0;
    double roof = c->peak_flops > c->gemm_flops ? c->peak_flops : c->gemm_flops;
    if (roof > c->flops) c->flops = roof;
}

/* Keep in c, figure by figure, the best of c and of a newer round r. */
static void keep_best(ft_ceilings *c, const ft_ceilings *r) {
    for (int i = 0; i < r->nlevels; i++) {
        ft_ceil_level *l = level_named(c, r->level[i].name);
        if (!l) continue;
        if (r->level[i].bw_now > l->bw_now) l->bw_now = r->level[i].bw_now;
        if (r->level[i].bw_now > l->bw) {
            l->bw = r->level[i].bw_now;
            memcpy(l->seen, r->level[i].seen, sizeof l->seen);
        }
    }
    if (r->flops_now > c->flops_now) c->flops_now = r->flops_now;
    if (r->peak_flops > c->peak_flops) c->peak_flops = r->peak_flops;
    if (r->gemm_flops > c->gemm_flops) c->gemm_flops = r->gemm_flops;
    if (r->flops_now > c->flops) {
        c->flops = r->flops_now;
        memcpy(c->flops_seen, r->flops_seen, sizeof c->flops_seen);
    }
    c->rounds += r->rounds;
    c->measured_s += r->measured_s;
    c->measured_at = r->measured_at;
    finish(c);
}

char *ft_ceilings_cache_path(char *buf, unsigned long n) {
    const char *p = getenv("FLARETUNE_CEILINGS_CACHE");
    if (p) {
        snprintf(buf, n, "%s", strcmp(p, "off") ? p : "");
        return buf;
    }
    const char *d = getenv("FLARETUNE_CACHE_DIR"), *home = getenv("HOME");
    if (d && *d) snprintf(buf, n, "%s/ceilings.json", d);
    else if (home && *home) snprintf(buf, n, "%s/.cache/flaretune/ceilings.json", home);
    else buf[0] = '\0';
    return buf;
}

static double num_at(const json_t *o, const char *k) {
    const json_t *v = json_object_get(o, k);
    return json_is_number(v) ? json_number_value(v) : 0;
}

/* A dated figure {"value": x, "seen": when, "busy": true when measured on a busy machine} from
 * the cache, if it is sane. *busy: its mark. */
static int cached_figure(const json_t *o, double *v, char *seen, size_t n, int *busy) {
    double x = num_at(o, "value");
    const char *s = json_string_value(json_object_get(o, "seen"));
    if (!(x > 0) || !isfinite(x) || !s) return 0;
    *v = x;
    snprintf(seen, n, "%s", s);
    *busy = json_is_true(json_object_get(o, "busy"));
    return 1;
}

/* A figure as the cache keeps it; one measured on a busy machine is marked, so that the runs
 * that take it from the cache (until a quiet round beats it) say so. */
static json_t *figure_json(double v, const char *seen, int busy) {
    json_t *o = json_pack("{s:f, s:s}", "value", v, "seen", seen);
    if (busy) json_object_set_new(o, "busy", json_true());
    return o;
}

/* Make the directory of path (one level, as ~/.cache/flaretune needs at most). */
static void make_parent(const char *path) {
    char dir[512];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (!slash || slash == dir) return;
    *slash = '\0';
    if (mkdir(dir, 0777) != 0 && errno == ENOENT) {
        char *up = strrchr(dir, '/');
        if (up && up != dir) {
            *up = '\0';
            mkdir(dir, 0777);
            *up = '/';
            mkdir(dir, 0777);
        }
    }
}

ft_status ft_ceilings_cache_merge(ft_ceilings *c, const char *path, ft_err *err) {
    (void)err;
    c->cache_note[0] = '\0';
    c->cache_busy = 0;
    if (path != c->cache_path) snprintf(c->cache_path, sizeof c->cache_path, "%s", path ? path : "");
    if (!path || !*path) {
        snprintf(c->cache_note, sizeof c->cache_note, "no cache kept (FLARETUNE_CEILINGS_CACHE)");
        return FT_OK;
    }
    make_parent(path);
    ft_err lerr = {0};
    int lock = ft_file_lock(path, &lerr);
    if (lock < 0) {
        snprintf(c->cache_note, sizeof c->cache_note, "%.250s", lerr.msg);
        return FT_OK;
    }
    json_error_t je;
    json_t *root = NULL;
    if (access(path, F_OK) == 0) {
        root = json_load_file(path, 0, &je);
        if (!root || !json_is_object(root) || json_integer_value(json_object_get(root, "format")) != 1) {
            snprintf(c->cache_note, sizeof c->cache_note, "%.120s was not a ceilings cache (%.80s): rebuilt",
                     path, root ? "another format" : je.text);
            json_decref(root);
            root = NULL;
        }
    }
    if (!root) root = json_pack("{s:i, s:{}}", "format", 1, "machines");
    json_t *machines = json_object_get(root, "machines");
    if (!json_is_object(machines)) {
        machines = json_object();
        json_object_set_new(root, "machines", machines);
    }
    json_t *m = json_object_get(machines, c->key);
    if (!json_is_object(m)) {
        m = json_object();
        json_object_set_new(machines, c->key, m);
    }
    json_t *levels = json_object_get(m, "levels");
    if (!json_is_object(levels)) {
        levels = json_object();
        json_object_set_new(m, "levels", levels);
    }
    int changed = 0;
    for (int i = 0; i < c->nlevels; i++) {
        ft_ceil_level *l = &c->level[i];
        double v;
        char seen[24];
        int busy = 0;
        int have = cached_figure(json_object_get(levels, l->name), &v, seen, sizeof seen, &busy);
        if (have && v > l->bw) {
            l->bw = v;
            memcpy(l->seen, seen, sizeof l->seen);
            c->from_cache = 1;
            c->cache_busy |= busy;
        } else if (!have || l->bw > v) {
            json_object_set_new(levels, l->name, figure_json(l->bw, l->seen, c->measured_busy));
            changed = 1;
        }
    }
    static const char *const names[] = {"flops", "peak_flops", "gemm_flops"};
    double *vals[] = {&c->flops, &c->peak_flops, &c->gemm_flops};
    for (int k = 0; k < 3; k++) {
        double v;
        char seen[24];
        int busy = 0;
        int have = cached_figure(json_object_get(m, names[k]), &v, seen, sizeof seen, &busy);
        if (have && v > *vals[k]) {
            *vals[k] = v;
            if (k == 0) {
                memcpy(c->flops_seen, seen, sizeof c->flops_seen);
                c->from_cache = 1;
                c->cache_busy |= busy;
            }
        } else if (*vals[k] > 0 && (!have || *vals[k] > v)) {
            json_object_set_new(m, names[k],
                                figure_json(*vals[k], c->flops_seen, c->measured_busy));
            changed = 1;
        }
    }
    finish(c);
    if (changed) {
        char tmp[600];
        ft_err werr = {0};
        FILE *f = ft_file_create_tmp(path, tmp, sizeof tmp, &werr);
        if (f && (json_dumpf(root, f, JSON_INDENT(2) | JSON_SORT_KEYS | JSON_REAL_PRECISION(17)) ||
                  fputc('\n', f) == EOF)) {
            fclose(f);
            unlink(tmp);
            f = NULL;
            snprintf(werr.msg, sizeof werr.msg, "cannot write %.400s", tmp);
        }
        if (!f || ft_file_commit(f, tmp, path, &werr))
            snprintf(c->cache_note, sizeof c->cache_note, "cannot update %.100s: %.120s", path, werr.msg);
    }
    json_decref(root);
    ft_file_unlock(lock);
    return FT_OK;
}

/* ---- the backend's ceilings --------------------------------------------------------------- */

static ft_status one_round(const ft_backend *be, int threads, int quick, ft_ceilings *c,
                           ft_err *err) {
    if (be && be->ceilings) {
        ft_status s = be->ceilings(c, err);
        if (s) return s;
        char when[24];
        now_iso(when, sizeof when);
        for (int i = 0; i < c->nlevels; i++) {
            c->level[i].bw_now = c->level[i].bw;
            memcpy(c->level[i].seen, when, sizeof when);
        }
        if (!(c->flops > 0)) c->flops = c->gemm_flops > c->peak_flops ? c->gemm_flops : c->peak_flops;
        c->flops_now = c->flops;
        memcpy(c->flops_seen, when, sizeof when);
        c->rounds = 1;
        c->measured_at = ft_wall_time();
        finish(c);
        return FT_OK;
    }
    return cpu_round(threads, quick, c, err);
}

/* Does the cache at path hold every figure of this machine already? Then one quick round is
 * enough: the best is the cache's, the round only has to notice a faster machine. */
static int cache_knows(const char *path, const char *key) {
    if (!path || !*path) return 0;
    json_t *root = json_load_file(path, 0, NULL);
    const json_t *m = json_object_get(json_object_get(root, "machines"), key);
    int known = json_object_size(json_object_get(m, "levels")) > 0 &&
                num_at(json_object_get(m, "flops"), "value") > 0;
    json_decref(root);
    return known;
}

/* The age in days of the oldest figure the cache at path holds for key (-1: not every figure
 * is there, or a date does not read). */
static double cache_age_days(const char *path, const char *key) {
    if (!cache_knows(path, key)) return -1;
    json_t *root = json_load_file(path, 0, NULL);
    const json_t *m = json_object_get(json_object_get(root, "machines"), key);
    double oldest = -1;
    const json_t *figs[] = {json_object_get(m, "flops"), NULL};
    const char *name;
    const json_t *lv;
    time_t now = time(NULL);
    int bad = 0;
    json_object_foreach((json_t *)json_object_get(m, "levels"), name, lv) {
        (void)name;
        figs[1] = lv;
        for (int k = 0; k < 2; k++) {
            const char *seen = json_string_value(json_object_get(figs[k], "seen"));
            struct tm tm;
            memset(&tm, 0, sizeof tm);
            if (!seen || !strptime(seen, "%Y-%m-%dT%H:%M:%SZ", &tm)) {
                bad = 1;
                continue;
            }
            double age = difftime(now, timegm(&tm)) / 86400;
            if (age > oldest) oldest = age;
        }
    }
    json_decref(root);
    return bad ? -1 : oldest;
}

static void fill_key(const ft_backend *be, int threads, char *key, size_t n) {
    ft_env env;
    ft_env_probe(&env);
    char device[200];
    ft_backend_device(be, &env, device, sizeof device);
    snprintf(key, n, "%s; threads %d", device, be && be->ceilings ? 1 : threads);
}

ft_status ft_ceilings_of(const ft_backend *be, int threads, ft_ceilings *c, ft_err *err) {
    char key[256], path[512];
    fill_key(be, threads < 1 ? 1 : threads, key, sizeof key);
    ft_ceilings_cache_path(path, sizeof path);
    /* The load over the round: figures measured on a busy machine are low, and are marked so in
     * the cache (a GPU's probes are not the host's to slow). */
    ft_load_mark m0, m1;
    ft_load_mark_take(&m0);
    ft_status s = one_round(be, threads, cache_knows(path, key), c, err);
    if (s) return s;
    ft_load load;
    ft_load_mark_take(&m1);
    ft_load_between(&m0, &m1, &load);
    c->measured_busy = load.busy && !(be && be->ceilings);
    if (!(c->nlevels > 0))
        return ft_err_set(err, FT_EINTERNAL, "the %s backend measured no bandwidth ceiling",
                          be ? be->name : "cpu");
    snprintf(c->key, sizeof c->key, "%s", key);
    return ft_ceilings_cache_merge(c, path, err);
}

ft_status ft_ceilings_recall(const ft_backend *be, int threads, double max_age_days,
                             ft_ceilings *c, ft_err *err) {
    char key[256], path[512];
    fill_key(be, threads < 1 ? 1 : threads, key, sizeof key);
    ft_ceilings_cache_path(path, sizeof path);
    double age = be && be->ceilings ? -1 : cache_age_days(path, key);
    if (age < 0 || age > max_age_days) return ft_ceilings_of(be, threads, c, err);
    cpu_plan_only(threads, c);
    snprintf(c->key, sizeof c->key, "%s", key);
    ft_status s = ft_ceilings_cache_merge(c, path, err);
    if (s) return s;
    for (int i = 0; i < c->nlevels; i++)
        if (!(c->level[i].bw > 0)) return ft_ceilings_of(be, threads, c, err); /* a new level */
    return FT_OK;
}

ft_status ft_ceilings_refine(const ft_backend *be, ft_ceilings *c, ft_err *err) {
    ft_ceilings r;
    ft_status s = one_round(be, c->threads, 0, &r, err);
    if (s) return s;
    keep_best(c, &r);
    return c->cache_path[0] ? ft_ceilings_cache_merge(c, c->cache_path, err) : FT_OK;
}

/* ---- the roof over one call --------------------------------------------------------------- */

ft_roofline ft_roofline_of(const ft_ceilings *c, double bytes, double flops, double working_set,
                           int cold) {
    ft_roofline r;
    memset(&r, 0, sizeof r);
    r.working_set = working_set;
    r.level = c->nlevels > 0 ? c->nlevels - 1 : 0;
    if (!cold)
        for (int i = 0; i < c->nlevels - 1; i++)
            if (c->level[i].capacity >= working_set / 2) {
                r.level = i;
                break;
            }
    r.level_name = c->nlevels > 0 ? c->level[r.level].name : "memory";
    r.bw = c->nlevels > 0 ? c->level[r.level].bw : c->bw;
    double tb = r.bw > 0 ? bytes / r.bw : 0, tf = c->flops > 0 ? flops / c->flops : 0;
    r.compute_bound = tf > tb;
    r.floor_s = tb > tf ? tb : tf;
    return r;
}

double ft_roofline_s(const ft_ceilings *c, double bytes, double flops, double working_set,
                     int cold) {
    return ft_roofline_of(c, bytes, flops, working_set, cold).floor_s;
}

/* ---- JSON forms ------------------------------------------------------------------------ */

json_t *ft_ceilings_to_json(const ft_ceilings *c) {
    json_t *o = json_object();
    json_t *levels = json_array();
    for (int i = 0; i < c->nlevels; i++) {
        const ft_ceil_level *l = &c->level[i];
        json_array_append_new(
            levels, json_pack("{s:s, s:o, s:o, s:o, s:o, s:s}", "name", l->name, "capacity_bytes",
                              l->capacity > 0 ? ft_json_number(l->capacity) : json_null(),
                              "bytes_per_s", ft_json_number(l->bw), "measured_bytes_per_s",
                              ft_json_number(l->bw_now), "probe_bytes",
                              ft_json_number(l->probe_bytes), "seen", l->seen));
    }
    json_object_set_new(o, "levels", levels);
    json_object_set_new(o, "flops_per_s", ft_json_number(c->flops));
    json_object_set_new(o, "measured_flops_per_s", ft_json_number(c->flops_now));
    json_object_set_new(o, "flops_seen", json_string(c->flops_seen));
    json_object_set_new(o, "peak_flops_per_s", ft_json_number(c->peak_flops));
    json_object_set_new(o, "gemm_flops_per_s", ft_json_number(c->gemm_flops));
    /* The memory level and the GEMM under their first names, for readers of older logs. */
    json_object_set_new(o, "copy_bytes_per_s", ft_json_number(c->bw));
    json_object_set_new(o, "sgemm_flops_per_s", ft_json_number(c->gemm_flops));
    json_object_set_new(o, "copy_buffer_bytes", ft_json_number(c->copy_bytes));
    json_object_set_new(o, "gemm_n", json_integer(c->gemm_n));
    json_object_set_new(o, "threads", json_integer(c->threads));
    json_object_set_new(o, "gemm", json_string(c->gemm ? c->gemm : "sgemm"));
    json_object_set_new(o, "rounds", json_integer(c->rounds));
    json_object_set_new(o, "from_cache", json_boolean(c->from_cache));
    json_object_set_new(o, "cache", json_string(c->cache_path));
    if (c->cache_note[0]) json_object_set_new(o, "cache_note", json_string(c->cache_note));
    return o;
}

json_t *ft_roofline_to_json(const ft_roofline *r, double median_s) {
    double frac = r->floor_s / median_s;
    json_t *o = json_pack("{s:o, s:o, s:s, s:o, s:o, s:s, s:b}", "floor_s",
                          ft_json_number(r->floor_s), "frac", ft_json_number(frac), "level",
                          r->level_name, "bytes_per_s", ft_json_number(r->bw), "working_set_bytes",
                          ft_json_number(r->working_set), "bound",
                          r->compute_bound ? "compute" : "memory", "suspect",
                          frac > FT_ROOFLINE_MAX_FRAC);
    return o;
}
