/* prefetch.c: the compile pool of prefetch.h.
 *
 * Jobs are kept by pointer (a job never moves, so a thread compiles it without the lock); the
 * queue is an array of job indices, the next to run first. One mutex guards the jobs' states,
 * the queue and the counters; `work` wakes the threads when a job is queued or the pool stops,
 * `done` wakes the callers waiting for a job. Threads start as jobs arrive, up to the pool's
 * count. If none could start, a caller that needs a queued job compiles it itself (settle,
 * wait_all), so nobody waits on a thread that does not exist.
 */
#include "prefetch.h"

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda/device_impl.h"
#include "core/clock.h"

struct ft_cuda_pool {
    ft_dev *dev;   /* a device's pool: compiles with ft_dev_prepare, or */
    char arch[16]; /* an architecture's: with NVRTC for arch */
    int nthreads, started, running;
    pthread_t threads[FT_CUDA_POOL_MAX_THREADS];
    pthread_mutex_t lock;
    pthread_cond_t work, done;
    ft_cuda_pool_job **jobs;
    uint64_t *hash; /* of each job's source and defines, to find a job without comparing all */
    int *queue;     /* job indices, queue[0] runs next; jobs, hash and queue hold cap each */
    int njobs, nqueue, cap;
    int nstarted_jobs; /* jobs taken so far (their `order`) */
    int stopping;
    int sass; /* ft_cuda_pool_keep_sass */
    ft_cuda_pool_stats st;
};

/* ---- finding a module ------------------------------------------------------------------------ */

/* FNV-1a over the source and the defines, each ended by a NUL so ("ab","c") != ("a","bc"). */
static uint64_t key_hash(const char *source, const char *const *defines, int n) {
    uint64_t h = 0xcbf29ce484222325ull;
    for (int k = -1; k < n; k++) {
        const unsigned char *s = (const unsigned char *)(k < 0 ? source : defines[k]);
        do
            h = (h ^ *s) * 0x100000001b3ull;
        while (*s++);
    }
    return h;
}

static int same_module(const ft_cuda_pool_job *j, const char *source, const char *const *defines,
                       int n) {
    if (j->ndefines != n || strcmp(j->source, source) != 0) return 0;
    for (int i = 0; i < n; i++)
        if (strcmp(j->defines[i], defines[i]) != 0) return 0;
    return 1;
}

/* The job of a module, or -1 (the caller holds the lock). */
static int find(const ft_cuda_pool *p, uint64_t h, const char *source, const char *const *defines,
                int n) {
    for (int i = 0; i < p->njobs; i++)
        if (p->hash[i] == h && same_module(p->jobs[i], source, defines, n)) return i;
    return -1;
}

/* ---- running jobs ---------------------------------------------------------------------------- */

/* Take the job at the front of the queue (the caller holds the lock and there is one). */
static ft_cuda_pool_job *take(ft_cuda_pool *p) {
    ft_cuda_pool_job *j = p->jobs[p->queue[0]];
    p->nqueue--;
    memmove(p->queue, p->queue + 1, (size_t)p->nqueue * sizeof *p->queue);
    j->state = FT_POOL_RUNNING;
    j->order = ++p->nstarted_jobs;
    p->running++;
    return j;
}

#if FT_HAVE_CUDA
/* The instruction mix of a compiled job's kernels, from its CUBIN (no lock needed: the job is
 * the thread's until it is marked done). */
static void read_sass(ft_cuda_pool_job *j) {
    ft_err err = {0};
    j->sass = calloc(FT_NVRTC_MAX_KERNELS, sizeof *j->sass);
    j->sass_status = j->sass ? ft_sass_of_cubin(j->res.cubin, j->res.cubin_size, j->sass,
                                                FT_NVRTC_MAX_KERNELS, &j->nsass, &err)
                             : ft_err_set(&err, FT_ENOMEM, "SASS: out of memory");
    if (j->sass_status) {
        snprintf(j->sass_msg, sizeof j->sass_msg, "%s", err.msg);
        free(j->sass);
        j->sass = NULL;
        j->nsass = 0;
    }
}
#endif

/* Compile a taken job with the lock released, then record what it gave (the caller holds the
 * lock on entry and on return). */
static void run_job(ft_cuda_pool *p, ft_cuda_pool_job *j) {
    pthread_mutex_unlock(&p->lock);
    const char *defs[FT_CUDA_MAX_DEFINES];
    for (int i = 0; i < j->ndefines; i++)
        defs[i] = j->defines[i];
    ft_err err = {0};
    int cached = 0;
    ft_status s;
    double t0 = ft_now_s(), sass_secs = 0;
    if (p->dev) {
        s = ft_dev_prepare(p->dev, j->source, defs, j->ndefines, &cached, &err);
    } else {
#if FT_HAVE_CUDA
        s = ft_nvrtc_compile(j->source, defs, j->ndefines, p->arch, &j->res, &err);
        cached = j->res.cached;
        if (s == FT_OK && p->sass) {
            double t1 = ft_now_s();
            read_sass(j);
            sass_secs = ft_now_s() - t1;
        }
        free(j->res.cubin); /* the report is what an architecture's pool is for */
        j->res.cubin = NULL;
#else
        s = ft_err_set(&err, FT_EUNSUPPORTED, "built without the CUDA toolkit: no NVRTC");
#endif
    }
    double secs = ft_now_s() - t0 - sass_secs;
    pthread_mutex_lock(&p->lock);
    j->status = s;
    if (s) snprintf(j->msg, sizeof j->msg, "%s", err.msg);
    j->cached = s == FT_OK && cached;
    j->seconds = secs;
    j->state = FT_POOL_DONE;
    p->running--;
    p->st.seconds += secs;
    p->st.sass_s += sass_secs;
    if (s)
        p->st.failed++;
    else if (cached)
        p->st.cached++;
    else
        p->st.compiled++;
    pthread_cond_broadcast(&p->done);
}

static void *worker(void *arg) {
    ft_cuda_pool *p = arg;
    pthread_mutex_lock(&p->lock);
    for (;;) {
        while (!p->stopping && p->nqueue == 0)
            pthread_cond_wait(&p->work, &p->lock);
        if (p->stopping) break;
        run_job(p, take(p));
    }
    pthread_mutex_unlock(&p->lock);
    return NULL;
}

/* One more thread while there is work for it (the caller holds the lock). A thread that cannot
 * start ends the trying: the ones running (or the callers) do the work. */
static void grow_threads(ft_cuda_pool *p) {
    while (p->started < p->nthreads && p->started < p->running + p->nqueue) {
        if (pthread_create(&p->threads[p->started], NULL, worker, p) != 0) {
            p->nthreads = p->started;
            return;
        }
        p->started++;
    }
}

static void drop_locked(ft_cuda_pool *p) {
    for (int i = 0; i < p->nqueue; i++)
        p->jobs[p->queue[i]]->state = FT_POOL_DROPPED;
    p->st.dropped += p->nqueue;
    p->nqueue = 0;
    pthread_cond_broadcast(&p->done); /* a caller waiting on one goes on */
}

/* ---- the pool -------------------------------------------------------------------------------- */

static ft_status pool_new(int threads, ft_cuda_pool **out, ft_err *err) {
    *out = NULL;
    if (threads < 1 || threads > FT_CUDA_POOL_MAX_THREADS)
        return ft_err_set(err, FT_EINVAL, "compile pool: %d threads, expected 1 to %d", threads,
                          FT_CUDA_POOL_MAX_THREADS);
    ft_cuda_pool *p = calloc(1, sizeof *p);
    if (!p) return ft_err_set(err, FT_ENOMEM, "compile pool: out of memory");
    p->nthreads = threads;
    pthread_mutex_init(&p->lock, NULL);
    pthread_cond_init(&p->work, NULL);
    pthread_cond_init(&p->done, NULL);
    *out = p;
    return FT_OK;
}

/* ft_dev_compile's first step on a device the pool is attached to. */
static ft_status settle_hook(void *pool, const char *source, const char *const *defines,
                             int ndefines, ft_err *err) {
    return ft_cuda_pool_settle(pool, source, defines, ndefines, err);
}

ft_status ft_cuda_pool_for_device(ft_dev *d, int threads, ft_cuda_pool **out, ft_err *err) {
    if (!out) return ft_err_set(err, FT_EINVAL, "compile pool: no place for the pool");
    *out = NULL;
    if (!d) return ft_err_set(err, FT_EINVAL, "compile pool: no device");
    if (d->settle) return ft_err_set(err, FT_EINVAL, "compile pool: the device has one already");
    ft_status s = pool_new(threads, out, err);
    if (s) return s;
    (*out)->dev = d;
    ft_dev_attach_pool(d, settle_hook, *out);
    return FT_OK;
}

ft_status ft_cuda_pool_for_arch(const char *arch, int threads, ft_cuda_pool **out, ft_err *err) {
    if (!out) return ft_err_set(err, FT_EINVAL, "compile pool: no place for the pool");
    *out = NULL;
#if FT_HAVE_CUDA
    if (!arch || !*arch || strlen(arch) >= sizeof(*out)->arch)
        return ft_err_set(err, FT_EINVAL, "compile pool: no architecture, or '%s' is too long",
                          arch ? arch : "");
    ft_status s = pool_new(threads, out, err);
    if (s) return s;
    snprintf((*out)->arch, sizeof(*out)->arch, "%s", arch);
    return FT_OK;
#else
    (void)arch, (void)threads;
    return ft_err_set(err, FT_EUNSUPPORTED,
                      "flaretune was built without the CUDA toolkit: no NVRTC to compile with");
#endif
}

int ft_cuda_pool_threads(const ft_cuda_pool *p) { return p ? p->nthreads : 0; }

void ft_cuda_pool_keep_sass(ft_cuda_pool *p) {
    if (p) p->sass = 1;
}

/* Room for one more job (the caller holds the lock); 0 when out of memory. */
static int reserve(ft_cuda_pool *p) {
    if (p->njobs < p->cap) return 1;
    int cap = p->cap ? 2 * p->cap : 64;
    ft_cuda_pool_job **jobs = realloc(p->jobs, (size_t)cap * sizeof *jobs);
    if (!jobs) return 0;
    p->jobs = jobs;
    uint64_t *hash = realloc(p->hash, (size_t)cap * sizeof *hash);
    if (!hash) return 0;
    p->hash = hash;
    int *queue = realloc(p->queue, (size_t)cap * sizeof *queue);
    if (!queue) return 0;
    p->queue = queue;
    p->cap = cap;
    return 1;
}

int ft_cuda_pool_add(ft_cuda_pool *p, const ft_cuda_module_spec *s) {
    if (!p || !s || !s->source || s->overflow || s->ndefines < 0 ||
        s->ndefines > FT_CUDA_MAX_DEFINES || strlen(s->source) >= sizeof p->jobs[0]->source)
        return -1; /* not a module the pool can hold: whoever needs it gets its error */
    const char *defs[FT_CUDA_MAX_DEFINES];
    for (int i = 0; i < s->ndefines; i++)
        defs[i] = s->defines[i];
    uint64_t h = key_hash(s->source, defs, s->ndefines);
    pthread_mutex_lock(&p->lock);
    int i = find(p, h, s->source, defs, s->ndefines);
    if (i < 0) {
        ft_cuda_pool_job *j = reserve(p) ? calloc(1, sizeof *j) : NULL;
        if (!j) {
            pthread_mutex_unlock(&p->lock);
            return -1;
        }
        snprintf(j->source, sizeof j->source, "%s", s->source);
        j->ndefines = s->ndefines;
        for (int d = 0; d < s->ndefines; d++)
            memcpy(j->defines[d], s->defines[d], sizeof j->defines[d]);
        j->state = FT_POOL_DROPPED; /* not queued yet: queued below */
        i = p->njobs++;
        p->jobs[i] = j;
        p->hash[i] = h;
        p->st.jobs++;
    }
    ft_cuda_pool_job *j = p->jobs[i];
    if (j->state == FT_POOL_DROPPED && !p->stopping) {
        j->state = FT_POOL_QUEUED;
        p->queue[p->nqueue++] = i;
        grow_threads(p);
        pthread_cond_signal(&p->work);
    }
    pthread_mutex_unlock(&p->lock);
    return i;
}

ft_status ft_cuda_pool_settle(ft_cuda_pool *p, const char *source, const char *const *defines,
                              int ndefines, ft_err *err) {
    if (!p || !source || ndefines < 0 || ndefines > FT_CUDA_MAX_DEFINES) return FT_OK;
    for (int i = 0; i < ndefines; i++)
        if (!defines[i]) return FT_OK;
    uint64_t h = key_hash(source, defines, ndefines);
    pthread_mutex_lock(&p->lock);
    int i = find(p, h, source, defines, ndefines);
    if (i < 0) {
        pthread_mutex_unlock(&p->lock);
        return FT_OK; /* not the pool's: the caller compiles it */
    }
    ft_cuda_pool_job *j = p->jobs[i];
    if (j->state == FT_POOL_QUEUED) {
        /* Needed now: to the front, so the next free thread takes it. */
        int q = 0;
        while (p->queue[q] != i)
            q++;
        memmove(p->queue + 1, p->queue, (size_t)q * sizeof *p->queue);
        p->queue[0] = i;
        p->st.promoted++;
        if (p->started == 0) run_job(p, take(p)); /* no thread: compile it here */
    }
    while (j->state == FT_POOL_QUEUED || j->state == FT_POOL_RUNNING)
        pthread_cond_wait(&p->done, &p->lock);
    ft_status s = FT_OK;
    if (j->state == FT_POOL_DONE && j->status) s = ft_err_set(err, j->status, "%s", j->msg);
    pthread_mutex_unlock(&p->lock);
    return s;
}

void ft_cuda_pool_drop_queued(ft_cuda_pool *p) {
    if (!p) return;
    pthread_mutex_lock(&p->lock);
    drop_locked(p);
    pthread_mutex_unlock(&p->lock);
}

void ft_cuda_pool_wait_all(ft_cuda_pool *p) {
    if (!p) return;
    pthread_mutex_lock(&p->lock);
    while (p->nqueue > 0 || p->running > 0) {
        if (p->started == 0 && p->nqueue > 0)
            run_job(p, take(p)); /* no thread: compile them here */
        else
            pthread_cond_wait(&p->done, &p->lock);
    }
    pthread_mutex_unlock(&p->lock);
}

int ft_cuda_pool_size(ft_cuda_pool *p) {
    if (!p) return 0;
    pthread_mutex_lock(&p->lock);
    int n = p->njobs;
    pthread_mutex_unlock(&p->lock);
    return n;
}

const ft_cuda_pool_job *ft_cuda_pool_job_at(ft_cuda_pool *p, int i) {
    if (!p) return NULL;
    pthread_mutex_lock(&p->lock);
    const ft_cuda_pool_job *j = i >= 0 && i < p->njobs ? p->jobs[i] : NULL;
    pthread_mutex_unlock(&p->lock);
    return j;
}

void ft_cuda_pool_stats_of(ft_cuda_pool *p, ft_cuda_pool_stats *out) {
    memset(out, 0, sizeof *out);
    if (!p) return;
    pthread_mutex_lock(&p->lock);
    *out = p->st;
    pthread_mutex_unlock(&p->lock);
}

void ft_cuda_pool_free(ft_cuda_pool *p) {
    if (!p) return;
    if (p->dev) ft_dev_attach_pool(p->dev, NULL, NULL);
    pthread_mutex_lock(&p->lock);
    p->stopping = 1;
    drop_locked(p);
    pthread_cond_broadcast(&p->work);
    pthread_mutex_unlock(&p->lock);
    for (int i = 0; i < p->started; i++)
        pthread_join(p->threads[i], NULL); /* each finishes the job it runs */
    for (int i = 0; i < p->njobs; i++) {
#if FT_HAVE_CUDA
        ft_nvrtc_result_free(&p->jobs[i]->res);
#endif
        free(p->jobs[i]->sass);
        free(p->jobs[i]);
    }
    free(p->jobs);
    free(p->hash);
    free(p->queue);
    pthread_cond_destroy(&p->work);
    pthread_cond_destroy(&p->done);
    pthread_mutex_destroy(&p->lock);
    free(p);
}
