/* test_env.c: the environment fingerprint and the OpenBLAS core check. */
#define _GNU_SOURCE /* sched_getaffinity, CPU_SET */
#include <sched.h>
#include <stdio.h>
#include <string.h>

#include "core/env.h"
#include "ft_test.h"
#include "ft_test_cpus.h"

static void test_core_upgrade(void) {
    ft_env avx512 = {0}, avx2 = {0}, amd = {0}, old = {0}, knl = {0};
    avx512.has_avx2 = avx512.has_fma = 1;
    avx512.has_avx512f = avx512.has_avx512bw = avx512.has_avx512vl = avx512.has_avx512dq = 1;
    avx2.has_avx2 = avx2.has_fma = 1;
    amd = avx2;
    amd.is_amd = 1;
    knl = avx2;
    knl.has_avx512f = 1; /* AVX-512F without BW/VL/DQ cannot run the SkylakeX kernels */
    const char *s;
    /* The case seen on virtual machines: an AVX-512 Xeon detected as Prescott. */
    s = ft_blas_core_upgrade("Prescott", &avx512);
    FT_CHECK(s && !strcmp(s, "SkylakeX"), "Prescott on AVX-512 -> SkylakeX, got %s",
             s ? s : "NULL");
    s = ft_blas_core_upgrade("Haswell", &avx512);
    FT_CHECK(s && !strcmp(s, "SkylakeX"), "Haswell on AVX-512 -> SkylakeX");
    FT_CHECK(ft_blas_core_upgrade("SkylakeX", &avx512) == NULL, "SkylakeX on AVX-512 is right");
    FT_CHECK(ft_blas_core_upgrade("COOPERLAKE", &avx512) == NULL, "case-insensitive names");
    s = ft_blas_core_upgrade("Nehalem", &avx2);
    FT_CHECK(s && !strcmp(s, "Haswell"), "Nehalem on AVX2 Intel -> Haswell");
    s = ft_blas_core_upgrade("Prescott", &amd);
    FT_CHECK(s && !strcmp(s, "Zen"), "Prescott on AVX2 AMD -> Zen");
    FT_CHECK(ft_blas_core_upgrade("Zen", &amd) == NULL, "Zen on Zen is right");
    FT_CHECK(ft_blas_core_upgrade("Haswell", &knl) == NULL, "no SkylakeX without AVX-512BW");
    FT_CHECK(ft_blas_core_upgrade("Prescott", &old) == NULL, "an SSE-only CPU keeps Prescott");
    FT_CHECK(ft_blas_core_upgrade("Sandybridge", &avx2) != NULL, "AVX kernels on AVX2");
}

static void test_probe(void) {
    ft_env e;
    ft_env_probe(&e);
    FT_CHECK(e.cpu_cores >= 1, "cores %d", e.cpu_cores);
    FT_CHECK(e.cpu_model[0] != '\0', "cpu model");
    FT_CHECK(strstr(e.blas, "OpenBLAS") != NULL, "blas '%s'", e.blas);
    FT_CHECK(strstr(e.blas, "USE_OPENMP") != NULL, "the OpenMP build of OpenBLAS is loaded: %s",
             e.blas);
    FT_CHECK(e.blas_core[0] != '\0', "blas core");
    FT_CHECK(e.version[0] != '\0', "version");
}

/* The device fingerprint counts the CPUs the process may use: pinned to one of them it says
 * "x 1", and the machine's count again once the mask is restored. */
static void test_device_counts_usable(void) {
    cpu_set_t all;
    ft_env e;
    ft_env_probe(&e);
    if (sched_getaffinity(0, sizeof all, &all) != 0 || CPU_COUNT(&all) < 2) {
        printf("    skipped: this process may use one CPU\n");
        return;
    }
    char key[256], want[64];
    ft_env_device(&e, "cpu", key, sizeof key);
    snprintf(want, sizeof want, " x %d (", CPU_COUNT(&all));
    FT_CHECK(e.usable_cpus == CPU_COUNT(&all) && strstr(key, want), "%d usable: %s", e.usable_cpus,
             key);
    FT_CHECK(ft_test_pin_first(&all) >= 0, "pinning to one CPU");
    ft_env_probe(&e);
    ft_env_device(&e, "cpu", key, sizeof key);
    FT_CHECK(e.usable_cpus == 1 && e.cpu_cores >= 2 && strstr(key, " x 1 ("),
             "pinned: %d usable of %d: %s", e.usable_cpus, e.cpu_cores, key);
    sched_setaffinity(0, sizeof all, &all);
    ft_env_probe(&e);
    ft_env_device(&e, "cpu", key, sizeof key);
    FT_CHECK(strstr(key, want), "restored: %s", key);
}

int main(void) {
    FT_RUN(test_core_upgrade);
    FT_RUN(test_probe);
    FT_RUN(test_device_counts_usable);
    return ft_test_finish();
}
