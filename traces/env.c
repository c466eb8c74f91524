/* env.c: the environment fingerprint (see include/flaretune/env.h). */
#include "flaretune/env.h"

#include <cblas.h>
#include <omp.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

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
        if (!have_model && strncmp(line, "model name", 10) == 0) {
            snprintf(e->cpu_model, sizeof e->cpu_model, "%s", val);
            have_model = 1;
        } else if (!have_flags && strncmp(line, "flags", 5) == 0) {
            e->has_avx2 = has_flag(val, "avx2");
            e->has_avx512f = has_flag(val, "avx512f");
            have_flags = 1;
        }
    }
    fclose(f);
}

void ft_env_probe(ft_env *e) {
    memset(e, 0, sizeof *e);
    read_cpuinfo(e);
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    e->cpu_cores = n > 0 ? (int)n : 1;
    e->omp_threads = omp_get_max_threads();
    snprintf(e->blas, sizeof e->blas, "%s", openblas_get_config());
    snprintf(e->blas_core, sizeof e->blas_core, "%s", openblas_get_corename());
#if defined(__clang__)
    snprintf(e->compiler, sizeof e->compiler, "clang %s", __clang_version__);
#elif defined(__GNUC__)
    snprintf(e->compiler, sizeof e->compiler, "gcc %s", __VERSION__);
#else
    snprintf(e->compiler, sizeof e->compiler, "unknown compiler");
#endif
    snprintf(e->version, sizeof e->version, "%s (%s)", FT_VERSION, FT_GIT_DESCRIBE);
    e->cuda_built = FT_HAVE_CUDA;
}
