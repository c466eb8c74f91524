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
    int usable_cpus; /* those this process may run on (ft_env_usable_cpus)    */
    int omp_threads; /* OpenMP's default team size                            */
    int has_avx2, has_fma, has_avx512f, has_avx512bw, has_avx512vl, has_avx512dq;
    int is_amd;
    char blas[160];              /* BLAS library and build configuration                  */
    char blas_core[64];          /* the kernel family the BLAS runs (OpenBLAS core name)  */
    char blas_core_detected[64]; /* what OpenBLAS had detected, when it was replaced */
    char compiler[96];
    char version[64];     /* flaretune version and git description                */
    int cuda_built;       /* the CUDA backend is compiled in                       */
    char source_hash[24]; /* hash of the kernel sources this binary was built from */
} ft_env;

/* Fill e for this process (reads /proc/cpuinfo). */
void ft_env_probe(ft_env *e);

/* The CPUs this process may run on (its affinity mask: `taskset`, a cpuset, or the slice
 * `mpirun` gives each rank of a node), at least 1; the online CPUs where the mask cannot be
 * read. Where OpenMP binds its threads (OMP_PROC_BIND, OMP_PLACES, GOMP_CPU_AFFINITY), the
 * CPUs of its places: the runtime pins the calling thread to the first of them before main,
 * so that thread's own mask counts one. The thread counts a CPU kernel is tuned over stop here:
 * more threads than CPUs only take turns. The device fingerprint counts these (usable_cpus): a
 * kernel tuned on one CPU of two is keyed apart from one tuned on both. */
int ft_env_usable_cpus(void);
/* The same CPUs as a set: `set` is a cpu_set_t (sched.h, _GNU_SOURCE) of `size` bytes. Returns
 * 0, or -1 when the mask cannot be read (set then empty). */
int ft_env_usable_set(void *set, unsigned long size);

/* The device fingerprint a backend's results are keyed by: for CPUs
 * "cpu: MODEL x CPUS (BLAS core)", CPUS those the process may run on (the machine's online CPUs
 * unless an affinity mask narrows them). Returns buf. */
char *ft_env_device(const ft_env *e, const char *backend, char *buf, unsigned long n);

/* OpenBLAS picks its kernels when it loads, from its own CPU detection, which on some virtual
 * machines reports an AVX-512 Xeon as a generic core ("Prescott") and runs sgemm several times
 * slower. Given the detected core name and this CPU's features, return the core OpenBLAS
 * should use (its OPENBLAS_CORETYPE name), or NULL when the detected one already matches the
 * CPU's vector instructions. */
const char *ft_blas_core_upgrade(const char *detected, const ft_env *e);

/* Environment variable that records the core OpenBLAS had detected before flaretune restarted
 * itself with OPENBLAS_CORETYPE set (see tuner/cli/main.c). */
#define FT_BLAS_REEXEC_ENV "FLARETUNE_BLAS_DETECTED"

#ifdef __cplusplus
}
#endif
#endif
