/* timer.c: device time of a measured region on the GPU (kernels/cuda/timer.h): CUPTI activity
 * records, or CUDA events.
 *
 * CUPTI: the activity API can be set up once per process, so its state is a process-wide
 * singleton behind a mutex, shared by every open timer (the first open enables the activity
 * kinds, the last close disables them). A region pushes a fresh external correlation id
 * (CUSTOM0) on the calling thread; CUPTI then precedes every driver or runtime API record made
 * inside the region with an EXTERNAL_CORRELATION record mapping that call's correlation id to
 * the region's id, and every kernel (memset, memcpy) the call started carries the same
 * correlation id. At the end the region waits for the device's stream, forces CUPTI to deliver
 * its buffers, and sums the durations of the device records whose correlation id maps to the
 * region: the time of every kernel the call launched (cuBLASLt may launch several), without
 * launch gaps or host noise.
 *
 * Both runtime and driver API records are enabled: only a call that makes an API record gets an
 * external correlation, and while the device layer launches through the runtime
 * (cudaLaunchKernel), a library may call the driver API directly (cuLaunchKernel). Memsets and
 * memcpys inside a region are device work of the call too: they are counted with the kernels,
 * as CUDA events would count them.
 *
 * CUPTI calls the buffer callbacks from its own thread (or from a flush on any thread): they
 * only take the data mutex, never the setup one, and keep what they read in the singleton until
 * a region claims it. Records that arrive while no region is open are dropped at once, so the
 * kept records stay bounded by what the open regions launched.
 *
 * CUDA events: one pair per timer, recorded on the device's stream around the region.
 * Built only with the CUDA toolkit (FT_HAVE_CUDA).
 */
#include "timer.h"

#include <cuda_runtime_api.h>
#include <cupti.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime.h"

#define BUF_BYTES ((size_t)4 << 20) /* one CUPTI activity buffer                        */
#define BUF_ALIGN 8                 /* CUPTI's record alignment                         */
#define POOL_MAX  8                 /* free buffers kept for reuse                      */
#define LAST_MAX  4096              /* kernel records kept for ft_timer_last_records   */

struct ft_timer {
    ft_dev *dev;
    ft_timer_kind kind;
    cudaStream_t stream;
    int in_region;
    uint64_t ext;           /* the open (or last) region's external correlation id     */
    cudaEvent_t ev0, ev1;   /* events                                                  */
    ft_kernel_record *last; /* CUPTI: the last region's records                        */
    int nlast;
};

/* ---- the process-wide CUPTI state ------------------------------------------------------------ */

typedef struct {
    uint32_t corr;
    uint64_t start, end;
    char name[96];
} dev_rec;

typedef struct {
    uint32_t corr;
    uint64_t ext;
} ext_rec;

static struct {
    /* setup: open/close of CUPTI timers (enable, disable); never taken by the callbacks */
    pthread_mutex_t setup;
    int registered; /* buffer callbacks registered (once per process)    */
    int users;      /* open CUPTI timers; > 0: the activity kinds are on */
    /* data: everything below, shared with CUPTI's buffer callbacks */
    pthread_mutex_t mu;
    int open_regions;
    uint64_t next_ext;
    dev_rec *dev;
    size_t ndev, capdev;
    ext_rec *ext;
    size_t next, capext;
    uint64_t dropped; /* CUPTI's count, plus records we could not keep */
} G = {.setup = PTHREAD_MUTEX_INITIALIZER, .mu = PTHREAD_MUTEX_INITIALIZER, .next_ext = 1};

static const char *cupti_str(CUptiResult r) {
    const char *s = NULL;
    if (cuptiGetResultString(r, &s) != CUPTI_SUCCESS || !s) return "unknown CUPTI error";
    return s;
}

/* Room for element n of p (an array of *cap elements of size sz): p itself while n < *cap, else
 * p reallocated to twice the size; NULL (p untouched, the record counted as dropped) when memory
 * is short. Called with G.mu held. */
static void *room(void *p, size_t n, size_t *cap, size_t sz) {
    if (n < *cap) return p;
    size_t nc = *cap ? *cap * 2 : 1024;
    void *q = realloc(p, nc * sz);
    if (q)
        *cap = nc;
    else
        G.dropped++;
    return q;
}

/* Buffers CUPTI gave back, kept for its next request rather than allocated anew for every
 * region (each region ends with a flush that returns them all). */
static struct {
    pthread_mutex_t mu;
    void *free[POOL_MAX];
    int n;
} pool = {.mu = PTHREAD_MUTEX_INITIALIZER};

static void CUPTIAPI buffer_requested(uint8_t **buffer, size_t *size, size_t *max_records) {
    void *p = NULL;
    pthread_mutex_lock(&pool.mu);
    if (pool.n > 0) p = pool.free[--pool.n];
    pthread_mutex_unlock(&pool.mu);
    if (!p && posix_memalign(&p, BUF_ALIGN, BUF_BYTES) != 0) p = NULL; /* CUPTI counts the drop */
    *buffer = p;
    *size = p ? BUF_BYTES : 0;
    *max_records = 0;
}

static void buffer_release(uint8_t *buffer) {
    pthread_mutex_lock(&pool.mu);
    if (pool.n < POOL_MAX) {
        pool.free[pool.n++] = buffer;
        buffer = NULL;
    }
    pthread_mutex_unlock(&pool.mu);
    free(buffer);
}

static void keep_dev(uint32_t corr, uint64_t start, uint64_t end, const char *name) {
    dev_rec *q = room(G.dev, G.ndev, &G.capdev, sizeof *q);
    if (!q) return;
    G.dev = q;
    dev_rec *r = &G.dev[G.ndev++];
    r->corr = corr;
    r->start = start;
    r->end = end;
    snprintf(r->name, sizeof r->name, "%s", name && *name ? name : "?");
}

/* A memset or memcpy record, named by what it is and how many bytes it moved. */
static void keep_transfer(const char *what, uint32_t corr, uint64_t start, uint64_t end,
                          uint64_t bytes) {
    char name[64];
    snprintf(name, sizeof name, "[%s %llu bytes]", what, (unsigned long long)bytes);
    keep_dev(corr, start, end, name);
}

static void CUPTIAPI buffer_completed(CUcontext ctx, uint32_t stream, uint8_t *buffer, size_t size,
                                      size_t valid) {
    (void)ctx;
    (void)stream;
    (void)size;
    pthread_mutex_lock(&G.mu);
    CUpti_Activity *rec = NULL;
    while (G.open_regions > 0 && valid > 0 &&
           cuptiActivityGetNextRecord(buffer, valid, &rec) == CUPTI_SUCCESS) {
        switch (rec->kind) {
        case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL:
        case CUPTI_ACTIVITY_KIND_KERNEL: {
            const CUpti_ActivityKernel10 *k = (const CUpti_ActivityKernel10 *)rec;
            keep_dev(k->correlationId, k->start, k->end, k->name);
            break;
        }
        case CUPTI_ACTIVITY_KIND_MEMSET: {
            const CUpti_ActivityMemset4 *m = (const CUpti_ActivityMemset4 *)rec;
            keep_transfer("memset", m->correlationId, m->start, m->end, m->bytes);
            break;
        }
        case CUPTI_ACTIVITY_KIND_MEMCPY: {
            const CUpti_ActivityMemcpy6 *m = (const CUpti_ActivityMemcpy6 *)rec;
            keep_transfer("memcpy", m->correlationId, m->start, m->end, m->bytes);
            break;
        }
        case CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION: {
            const CUpti_ActivityExternalCorrelation *x =
                (const CUpti_ActivityExternalCorrelation *)rec;
            if (x->externalKind != CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0) break;
            ext_rec *q = room(G.ext, G.next, &G.capext, sizeof *q);
            if (!q) break;
            G.ext = q;
            G.ext[G.next].corr = x->correlationId;
            G.ext[G.next].ext = x->externalId;
            G.next++;
            break;
        }
        default: break; /* API records: only their external correlations matter */
        }
    }
    size_t dropped = 0;
    if (cuptiActivityGetNumDroppedRecords(NULL, 0, &dropped) == CUPTI_SUCCESS) G.dropped += dropped;
    pthread_mutex_unlock(&G.mu);
    buffer_release(buffer);
}

static const struct {
    CUpti_ActivityKind kind;
    const char *name;
} kinds[] = {
    {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, "CONCURRENT_KERNEL"},
    {CUPTI_ACTIVITY_KIND_MEMSET, "MEMSET"},
    {CUPTI_ACTIVITY_KIND_MEMCPY, "MEMCPY"},
    {CUPTI_ACTIVITY_KIND_RUNTIME, "RUNTIME"},
    {CUPTI_ACTIVITY_KIND_DRIVER, "DRIVER"},
    {CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION, "EXTERNAL_CORRELATION"},
};
#define NKINDS ((int)(sizeof kinds / sizeof kinds[0]))

/* Why CUPTI failed, as a status and one line: no device (FT_ENODEV) when the CUDA runtime sees
 * none, else FT_EUNSUPPORTED (another profiler holding CUPTI is the common case). */
static ft_status cupti_fail(ft_err *err, const char *call, CUptiResult r) {
    int n = 0;
    cudaError_t ce = cudaGetDeviceCount(&n);
    if (ce != cudaSuccess || n <= 0)
        return ft_err_set(
            err, FT_ENODEV, "CUPTI cannot start: %s: %s; no CUDA device (cudaGetDeviceCount: %s)",
            call, cupti_str(r), ce != cudaSuccess ? cudaGetErrorString(ce) : "0 devices");
    if (r == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED)
        return ft_err_set(err, FT_EUNSUPPORTED,
                          "CUPTI cannot start: %s: %s (another profiler holds CUPTI)", call,
                          cupti_str(r));
    return ft_err_set(err, FT_EUNSUPPORTED,
                      "CUPTI cannot start: %s: %s (another profiler may hold it)", call,
                      cupti_str(r));
}

static void disable_kinds(int upto) {
    for (int i = 0; i < upto; i++)
        cuptiActivityDisable(kinds[i].kind);
}

static void clear_records_locked(void) {
    G.ndev = 0;
    G.next = 0;
}

/* Take a user of the CUPTI singleton, setting it up on first use. */
static ft_status cupti_acquire(ft_err *err) {
    pthread_mutex_lock(&G.setup);
    ft_status s = FT_OK;
    if (G.users > 0) {
        G.users++;
        goto out;
    }
    if (!G.registered) {
        CUptiResult r = cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed);
        if (r != CUPTI_SUCCESS) {
            s = cupti_fail(err, "cuptiActivityRegisterCallbacks", r);
            goto out;
        }
        G.registered = 1;
    }
    for (int i = 0; i < NKINDS; i++) {
        CUptiResult r = cuptiActivityEnable(kinds[i].kind);
        if (r != CUPTI_SUCCESS) {
            char call[64];
            snprintf(call, sizeof call, "cuptiActivityEnable(%s)", kinds[i].name);
            disable_kinds(i);
            s = cupti_fail(err, call, r);
            goto out;
        }
    }
    G.users = 1;
out:
    pthread_mutex_unlock(&G.setup);
    return s;
}

static void cupti_release(void) {
    pthread_mutex_lock(&G.setup);
    if (G.users > 0 && --G.users == 0) {
        disable_kinds(NKINDS);
        cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED); /* every buffer back */
        pthread_mutex_lock(&G.mu);
        clear_records_locked();
        pthread_mutex_unlock(&G.mu);
    }
    pthread_mutex_unlock(&G.setup);
}

/* The region of t is over (measured or failed): forget its correlations; with no region left
 * open, nothing kept can be claimed any more. Called with G.mu held. */
static void region_done_locked(ft_timer *t) {
    size_t w = 0;
    for (size_t i = 0; i < G.next; i++)
        if (G.ext[i].ext != t->ext) G.ext[w++] = G.ext[i];
    G.next = w;
    if (--G.open_regions == 0) clear_records_locked();
    t->in_region = 0;
}

static int cmp_u32(const void *a, const void *b) {
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

/* ---- the timer ------------------------------------------------------------------------------- */

const char *ft_timer_name(ft_timer_kind k) { return k == FT_TIMER_EVENTS ? "events" : "cupti"; }

ft_timer_kind ft_timer_kind_of(const ft_timer *t) { return t->kind; }

static ft_status cuda_fail(ft_err *err, const char *call, cudaError_t e) {
    ft_status s = e == cudaErrorNoDevice || e == cudaErrorInsufficientDriver ||
                          e == cudaErrorInitializationError
                      ? FT_ENODEV
                      : ft_cuda_error_status(e, FT_EINVAL);
    return ft_err_set(err, s, "%s: %s", call, cudaGetErrorString(e));
}

ft_status ft_timer_open(ft_dev *d, ft_timer_kind kind, ft_timer **out, ft_err *err) {
    if (!out) return ft_err_set(err, FT_EINVAL, "ft_timer_open: no place for the timer");
    *out = NULL;
    if (!d) return ft_err_set(err, FT_EINVAL, "ft_timer_open: no device");
    if (ft_dev_kind_of(d) != FT_DEV_CUDA)
        return ft_err_set(err, FT_EINVAL,
                          "the %s timer needs a GPU device (FT_DEV_CUDA); the emulator is timed "
                          "with the host clock",
                          ft_timer_name(kind));
    if (kind != FT_TIMER_CUPTI && kind != FT_TIMER_EVENTS)
        return ft_err_set(err, FT_EINVAL, "ft_timer_open: unknown timer kind %d", (int)kind);
    ft_timer *t = calloc(1, sizeof *t);
    if (!t) return ft_err_set(err, FT_ENOMEM, "out of memory");
    t->dev = d;
    t->kind = kind;
    ft_status s;
    if (kind == FT_TIMER_CUPTI) {
        if ((s = cupti_acquire(err))) {
            free(t);
            return s;
        }
        int n = 0;
        cudaError_t e = cudaGetDeviceCount(&n);
        if (e != cudaSuccess || n <= 0) {
            cupti_release();
            free(t);
            return e != cudaSuccess ? cuda_fail(err, "CUPTI timer: cudaGetDeviceCount", e)
                                    : ft_err_set(err, FT_ENODEV, "CUPTI timer: no CUDA device");
        }
        t->last = calloc(LAST_MAX, sizeof *t->last);
        if (!t->last) {
            cupti_release();
            free(t);
            return ft_err_set(err, FT_ENOMEM, "out of memory");
        }
    } else {
        cudaError_t e = cudaEventCreate(&t->ev0);
        if (e != cudaSuccess) {
            free(t);
            return cuda_fail(err, "events timer: cudaEventCreate", e);
        }
        if ((e = cudaEventCreate(&t->ev1)) != cudaSuccess) {
            cudaEventDestroy(t->ev0);
            free(t);
            return cuda_fail(err, "events timer: cudaEventCreate", e);
        }
    }
    /* Only now, with a GPU known to be there, is the device asked for its stream. */
    t->stream = (cudaStream_t)ft_dev_cuda_stream(d);
    *out = t;
    return FT_OK;
}

void ft_timer_close(ft_timer *t) {
    if (!t) return;
    if (t->kind == FT_TIMER_CUPTI) {
        if (t->in_region) {
            cuptiActivityPopExternalCorrelationId(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, NULL);
            pthread_mutex_lock(&G.mu);
            region_done_locked(t);
            pthread_mutex_unlock(&G.mu);
        }
        cupti_release();
        free(t->last);
    } else {
        cudaEventDestroy(t->ev0);
        cudaEventDestroy(t->ev1);
    }
    free(t);
}

ft_status ft_timer_begin(ft_timer *t, ft_err *err) {
    if (!t) return ft_err_set(err, FT_EINVAL, "ft_timer_begin: no timer");
    if (t->in_region)
        return ft_err_set(err, FT_EINVAL, "ft_timer_begin: the %s timer's region is already open",
                          ft_timer_name(t->kind));
    if (t->kind == FT_TIMER_EVENTS) {
        cudaError_t e = cudaEventRecord(t->ev0, t->stream);
        if (e != cudaSuccess) return cuda_fail(err, "events timer: cudaEventRecord", e);
        t->in_region = 1;
        return FT_OK;
    }
    pthread_mutex_lock(&G.mu);
    t->ext = G.next_ext++;
    G.open_regions++;
    t->in_region = 1;
    pthread_mutex_unlock(&G.mu);
    CUptiResult r =
        cuptiActivityPushExternalCorrelationId(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, t->ext);
    if (r != CUPTI_SUCCESS) {
        pthread_mutex_lock(&G.mu);
        region_done_locked(t);
        pthread_mutex_unlock(&G.mu);
        return ft_err_set(err, FT_EUNSUPPORTED,
                          "CUPTI timer: cuptiActivityPushExternalCorrelationId: %s", cupti_str(r));
    }
    return FT_OK;
}

static ft_status end_events(ft_timer *t, double *secs, ft_err *err) {
    t->in_region = 0;
    cudaError_t e = cudaEventRecord(t->ev1, t->stream);
    if (e != cudaSuccess) return cuda_fail(err, "events timer: cudaEventRecord", e);
    if ((e = cudaEventSynchronize(t->ev1)) != cudaSuccess)
        return cuda_fail(err, "events timer: cudaEventSynchronize", e);
    float ms = 0;
    if ((e = cudaEventElapsedTime(&ms, t->ev0, t->ev1)) != cudaSuccess)
        return cuda_fail(err, "events timer: cudaEventElapsedTime", e);
    *secs = 1e-3 * (double)ms;
    return FT_OK;
}

/* Claim the records of t's region (G.mu held): sum, count, keep the first LAST_MAX. */
static ft_status claim_locked(ft_timer *t, double *secs, int *nkernels, ft_err *err) {
    size_t ncorr = 0;
    for (size_t i = 0; i < G.next; i++)
        ncorr += G.ext[i].ext == t->ext;
    uint32_t *corr = malloc((ncorr ? ncorr : 1) * sizeof *corr);
    if (!corr) return ft_err_set(err, FT_ENOMEM, "out of memory");
    ncorr = 0;
    for (size_t i = 0; i < G.next; i++)
        if (G.ext[i].ext == t->ext) corr[ncorr++] = G.ext[i].corr;
    qsort(corr, ncorr, sizeof *corr, cmp_u32);
    uint64_t total = 0;
    int n = 0;
    const char *untimed = NULL;
    size_t w = 0;
    t->nlast = 0;
    for (size_t i = 0; i < G.ndev; i++) {
        dev_rec *r = &G.dev[i];
        if (!ncorr || !bsearch(&r->corr, corr, ncorr, sizeof *corr, cmp_u32)) {
            G.dev[w++] = *r; /* another open region's, or unclaimed yet */
            continue;
        }
        n++;
        if (r->end < r->start || (r->start == 0 && r->end == 0))
            untimed = r->name;
        else
            total += r->end - r->start;
        if (t->nlast < LAST_MAX) {
            ft_kernel_record *k = &t->last[t->nlast++];
            memcpy(k->name, r->name, sizeof k->name);
            k->start_ns = r->start;
            k->end_ns = r->end;
            k->correlation = t->ext;
        }
    }
    G.ndev = w;
    free(corr);
    if (untimed)
        return ft_err_set(
            err, FT_EUNSUPPORTED,
            "CUPTI timer: no timestamps for '%s' (CUPTI lacked device memory for them)", untimed);
    *secs = 1e-9 * (double)total;
    *nkernels = n;
    return FT_OK;
}

ft_status ft_timer_end(ft_timer *t, double *secs, int *nkernels, ft_err *err) {
    if (!t) return ft_err_set(err, FT_EINVAL, "ft_timer_end: no timer");
    if (!t->in_region)
        return ft_err_set(err, FT_EINVAL, "ft_timer_end: the %s timer has no open region",
                          ft_timer_name(t->kind));
    double s_ = 0;
    int n_ = -1;
    if (!secs) secs = &s_;
    if (!nkernels) nkernels = &n_;
    *secs = 0;
    *nkernels = -1;
    if (t->kind == FT_TIMER_EVENTS) return end_events(t, secs, err);

    uint64_t popped = 0;
    CUptiResult r =
        cuptiActivityPopExternalCorrelationId(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, &popped);
    ft_status s = FT_OK;
    cudaError_t e;
    if (r != CUPTI_SUCCESS)
        s = ft_err_set(err, FT_EINTERNAL,
                       "CUPTI timer: cuptiActivityPopExternalCorrelationId: %s (a region must end "
                       "on the thread that began it)",
                       cupti_str(r));
    else if (popped != t->ext)
        s = ft_err_set(err, FT_EINTERNAL,
                       "CUPTI timer: popped correlation id %llu, expected %llu (regions nest "
                       "wrongly or end on another thread)",
                       (unsigned long long)popped, (unsigned long long)t->ext);
    else if ((e = cudaStreamSynchronize(t->stream)) != cudaSuccess)
        s = cuda_fail(err, "CUPTI timer: cudaStreamSynchronize", e);
    else if ((r = cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED)) != CUPTI_SUCCESS)
        s = ft_err_set(err, FT_EUNSUPPORTED, "CUPTI timer: cuptiActivityFlushAll: %s",
                       cupti_str(r));
    pthread_mutex_lock(&G.mu);
    if (!s) s = claim_locked(t, secs, nkernels, err);
    region_done_locked(t);
    pthread_mutex_unlock(&G.mu);
    return s;
}

uint64_t ft_timer_dropped(const ft_timer *t) {
    (void)t;
    pthread_mutex_lock(&G.mu);
    uint64_t n = G.dropped;
    pthread_mutex_unlock(&G.mu);
    return n;
}

int ft_timer_last_records(const ft_timer *t, ft_kernel_record *out, int max) {
    if (!t || t->kind != FT_TIMER_CUPTI || !out || max <= 0) return 0;
    int n = t->nlast < max ? t->nlast : max;
    memcpy(out, t->last, (size_t)n * sizeof *out);
    return n;
}
