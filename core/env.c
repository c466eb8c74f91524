/* env.c: the environment fingerprint (see core/env.h). */
#define _GNU_SOURCE /* sched_getaffinity, CPU_COUNT */
#include "core/env.h"

#include <cblas.h>
#include <omp.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "flaretune/source_hash.h"
#include "flaretune/version.h"

/* Is `flag` one of the space-separated words of `flags`? */
static int has_flag(const char *flags, const char *flag) {
    size_t n = strlen(flag);
    for (const char *p = flags; (p = strstr(p, flag)) != NULL; p += n)
        if ((p == flags || p[-1] == ' ') && (p[n] == ' ' || p[n] == '\0')) return 1;
    return 0;
}

static void read_cpuinfo(ft_env *e) {
    FILE *f = fopen("/proc/cpuinfo", "r");
    snprintf(e->cpu_model, sizeof e->cpu_model, "unknown CPU");
    if (!f) return;
    char line[4096];
    int have_model = 0, have_flags = 0;
    while (fgets(line, sizeof line, f) && !(have_model && have_flags)) {
        char *colon = strchr(line, ':');
        if (!colon) continue;
        char *val = colon + 1;
        while (*val == ' ')
            val++;
        val[strcspn(val, "\n")] = '\0';
        if (strncmp(line, "vendor_id", 9) == 0) e->is_amd = strstr(val, "AMD") != NULL;
        if (!have_model && strncmp(line, "model name", 10) == 0) {
            snprintf(e->cpu_model, sizeof e->cpu_model, "%s", val);
            have_model = 1;
        } else if (!have_flags && strncmp(line, "flags", 5) == 0) {
            e->has_avx2 = has_flag(val, "avx2");
            e->has_fma = has_flag(val, "fma");
            e->has_avx512f = has_flag(val, "avx512f");
            e->has_avx512bw = has_flag(val, "avx512bw");
            e->has_avx512vl = has_flag(val, "avx512vl");
            e->has_avx512dq = has_flag(val, "avx512dq");
            have_flags = 1;
        }
    }
    fclose(f);
}

int ft_env_usable_set(void *set, unsigned long size) {
    cpu_set_t *s = set;
    CPU_ZERO_S(size, s);
    const int places = omp_get_num_places();
    for (int p = 0; p < places; p++) {
        int ids[CPU_SETSIZE];
        const int n = omp_get_place_num_procs(p);
        if (n <= 0 || n > CPU_SETSIZE) continue;
        omp_get_place_proc_ids(p, ids);
        for (int i = 0; i < n; i++)
            if (ids[i] >= 0 && (unsigned long)ids[i] < 8 * size) CPU_SET_S(ids[i], size, s);
    }
    if (CPU_COUNT_S(size, s) > 0) return 0;
    if (sched_getaffinity(0, size, s) == 0) return 0;
    CPU_ZERO_S(size, s);
    return -1;
}

int ft_env_usable_cpus(void) {
    cpu_set_t set;
    if (ft_env_usable_set(&set, sizeof set) == 0 && CPU_COUNT(&set) > 0) return CPU_COUNT(&set);
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

void ft_env_probe(ft_env *e) {
    memset(e, 0, sizeof *e);
    read_cpuinfo(e);
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    e->cpu_cores = n > 0 ? (int)n : 1;
    e->usable_cpus = ft_env_usable_cpus();
    e->omp_threads = omp_get_max_threads();
    snprintf(e->blas, sizeof e->blas, "%s", openblas_get_config());
    snprintf(e->blas_core, sizeof e->blas_core, "%s", openblas_get_corename());
    const char *detected = getenv(FT_BLAS_REEXEC_ENV);
    if (detected) snprintf(e->blas_core_detected, sizeof e->blas_core_detected, "%s", detected);
#if defined(__clang__)
    snprintf(e->compiler, sizeof e->compiler, "clang %s", __clang_version__);
#elif defined(__GNUC__)
    snprintf(e->compiler, sizeof e->compiler, "gcc %s", __VERSION__);
#else
    snprintf(e->compiler, sizeof e->compiler, "unknown compiler");
#endif
    snprintf(e->version, sizeof e->version, "%s (%s)", FT_VERSION, FT_GIT_DESCRIBE);
    e->cuda_built = FT_HAVE_CUDA;
    snprintf(e->source_hash, sizeof e->source_hash, "%s", FT_SOURCE_HASH);
}

char *ft_env_device(const ft_env *e, const char *backend, char *buf, unsigned long n) {
    /* The reference backend is single-threaded and BLAS-free, but keying it like the CPU keeps
     * one rule for every host backend. */
    (void)backend;
    snprintf(buf, n, "cpu: %s x %d (%s)", e->cpu_model, e->usable_cpus, e->blas_core);
    return buf;
}

/* Vector ISA level of an OpenBLAS core: 0 SSE, 1 AVX, 2 AVX2 + FMA, 3 AVX-512. */
static int core_level(const char *core) {
    static const char *const avx512[] = {"skylakex", "cooperlake", "sapphirerapids"};
    static const char *const avx2[] = {"haswell", "zen", "excavator"};
    static const char *const avx[] = {"sandybridge", "bulldozer", "piledriver", "steamroller"};
    for (size_t i = 0; i < sizeof avx512 / sizeof *avx512; i++)
        if (!strcasecmp(core, avx512[i])) return 3;
    for (size_t i = 0; i < sizeof avx2 / sizeof *avx2; i++)
        if (!strcasecmp(core, avx2[i])) return 2;
    for (size_t i = 0; i < sizeof avx / sizeof *avx; i++)
        if (!strcasecmp(core, avx[i])) return 1;
    return 0;
}

const char *ft_blas_core_upgrade(const char *detected, const ft_env *e) {
    int cpu = e->has_avx512f && e->has_avx512bw && e->has_avx512vl && e->has_avx512dq ? 3
              : e->has_avx2 && e->has_fma                                             ? 2
                                                                                      : 0;
    if (core_level(detected) >= cpu) return NULL;
    if (cpu == 3) return "SkylakeX";
    return e->is_amd ? "Zen" : "Haswell";
}
