/* env.h: the environment fingerprint of this machine and build.
 *
 * Every profile entry and every event log records where its numbers come from: CPU model and
 * cores, the BLAS library and the core type it runs, the compiler, flaretune's version (and,
 * from the CUDA backend, the device). Results are only comparable within one fingerprint.
 */
#ifndef FLARETUNE_ENV_H
#define FLARETUNE_ENV_H

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ft_env {
    char cpu_model[128];
    int cpu_cores;   /* online logical CPUs                                   */
    int omp_threads; /* OpenMP's default team size                            */
    int has_avx2, has_avx512f;
    char blas[160];     /* BLAS library and build configuration                  */
    char blas_core[64]; /* the kernel family the BLAS runs (OpenBLAS core name)  */
    char compiler[96];
    char version[64]; /* flaretune version and git description                */
    int cuda_built;   /* the CUDA backend is compiled in                       */
} ft_env;

/* Fill e for this process (reads /proc/cpuinfo once; cheap afterwards). */
void ft_env_probe(ft_env *e);

#ifdef __cplusplus
}
#endif
#endif
