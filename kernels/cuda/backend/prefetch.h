/* prefetch.h: kernel modules compiled ahead, on a pool of threads.
 *
 * On a GPU the tuner checks every configuration of a space before it times one, and the check
 * compiles each configuration's modules (cuda_backend.c, the static check); `flaretune compile`
 * reports on every module of a space. Either would wait on NVRTC (or, under the emulator, the
 * host C++ compiler) one module after another. A pool takes module specs in the order they will
 * be needed and compiles each distinct one (same source, same defines) once, on N threads. A
 * thread that needs a module settles with the pool first:
 *
 *   queued    the module moves to the front of the queue and the caller waits for it (so still
 *             at most N compile at a time)
 *   running   the caller waits for it
 *   done      the caller goes on (the module is in the disk cache); a failed one: its error
 *   absent    never queued, or dropped: the caller goes on and compiles it itself
 *
 * Two kinds. A device's pool compiles into the device's disk cache (ft_dev_prepare) and is
 * attached to the device, so ft_dev_compile settles with it by itself. An architecture's pool
 * compiles with NVRTC for that architecture and keeps each module's ptxas report (`flaretune
 * compile`, which has no device). Freeing a pool drops the jobs still queued and waits for the
 * ones running. An architecture's pool can also read each module's SASS instruction mix (sass.h)
 * on the thread that compiled it, while the CUBIN is at hand.
 */
#ifndef FT_CUDA_PREFETCH_H
#define FT_CUDA_PREFETCH_H

#include "cuda_backend.h"
#include "cuda/nvrtc.h"
#include "cuda/analysis/sass.h"

#define FT_CUDA_POOL_MAX_THREADS 64

typedef struct ft_cuda_pool ft_cuda_pool;

typedef enum {
    FT_POOL_QUEUED = 0,
    FT_POOL_RUNNING,
    FT_POOL_DONE,
    FT_POOL_DROPPED, /* taken off the queue before it ran (ft_cuda_pool_drop_queued, free) */
} ft_cuda_pool_state;

/* One distinct module and what compiling it gave. The outcome (status to res) is final once
 * the job is done: after ft_cuda_pool_wait_all, or a settle that waited for it. */
typedef struct ft_cuda_pool_job {
    char source[256];
    int ndefines;
    char defines[FT_CUDA_MAX_DEFINES][48];
    ft_cuda_pool_state state;
    int order; /* 1 for the first job a thread took, 2 for the next, ...; 0 never started */
    ft_status status;
    char msg[FT_ERR_MSG_LEN]; /* the compile error when status is not FT_OK */
    int cached;               /* it was in the disk cache */
    double seconds;           /* the compile's wall time on its thread */
    ft_nvrtc_result res;      /* an architecture's pool: ptxas's report (the CUBIN dropped) */
    /* With ft_cuda_pool_keep_sass, once compiled: the instruction mix of its kernels (nsass of
     * them, malloc'd), or sass_status and sass_msg say why there is none. */
    ft_sass_kernel *sass;
    int nsass;
    ft_status sass_status;
    char sass_msg[FT_ERR_MSG_LEN];
} ft_cuda_pool_job;

typedef struct ft_cuda_pool_stats {
    int jobs;       /* distinct modules added */
    int compiled;   /* compiled by this pool (not from the cache) */
    int cached;     /* found in the disk cache */
    int failed;     /* compiles that failed */
    int dropped;    /* taken off the queue before they ran */
    int promoted;   /* moved to the front because a caller needed them */
    double seconds; /* spent compiling, summed over the jobs (threads at once add up) */
    double sass_s;  /* spent reading SASS (ft_cuda_pool_keep_sass), summed the same way */
} ft_cuda_pool_stats;

/* A pool of `threads` (1..FT_CUDA_POOL_MAX_THREADS) compiling into device d's disk cache,
 * attached to d until freed. The owner attaches and frees it while no other thread compiles on
 * d; d must outlive it. */
ft_status ft_cuda_pool_for_device(ft_dev *d, int threads, ft_cuda_pool **out, ft_err *err);
/* A pool of `threads` compiling with NVRTC for `arch`, keeping each module's ptxas report.
 * FT_EUNSUPPORTED in a build without the CUDA toolkit. */
ft_status ft_cuda_pool_for_arch(const char *arch, int threads, ft_cuda_pool **out, ft_err *err);

int ft_cuda_pool_threads(const ft_cuda_pool *p);
/* An architecture's pool also reads each module's SASS instruction mix (ft_sass_of_cubin) after
 * compiling it, on the same thread. Call before adding jobs; a device's pool ignores it. */
void ft_cuda_pool_keep_sass(ft_cuda_pool *p);

/* Queue the module of a spec behind those already queued; a module the pool already holds is
 * not queued again (one dropped earlier is). Returns its job's index; -1 when out of memory or
 * for a spec that overflowed (left to the caller that compiles it, which reports it). */
int ft_cuda_pool_add(ft_cuda_pool *p, const ft_cuda_module_spec *s);

/* Before compiling a module: wait for it in the pool as said above. FT_OK, or the error its
 * compile failed with (in err). */
ft_status ft_cuda_pool_settle(ft_cuda_pool *p, const char *source, const char *const *defines,
                              int ndefines, ft_err *err);

/* Drop every job still queued (what an earlier plan asked for and nobody needs now). */
void ft_cuda_pool_drop_queued(ft_cuda_pool *p);

/* Wait until no job is queued or running. */
void ft_cuda_pool_wait_all(ft_cuda_pool *p);

/* The jobs, in the order they were first added (the pointer stays valid until the pool is
 * freed; read the outcome once the job is done). */
int ft_cuda_pool_size(ft_cuda_pool *p);
const ft_cuda_pool_job *ft_cuda_pool_job_at(ft_cuda_pool *p, int i);

void ft_cuda_pool_stats_of(ft_cuda_pool *p, ft_cuda_pool_stats *out);

/* Drop what is queued, wait for what runs, detach from the device, free. NULL is fine. */
void ft_cuda_pool_free(ft_cuda_pool *p);

#endif
