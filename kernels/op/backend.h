/* backend.h: the backends that run ops (reference, CPU, CUDA, ...).
 *
 * A backend is a small table of function pointers, as nvtop keeps one per GPU vendor: whether it
 * can run here, whether it implements an op, and how to run one call of it. The front ends never
 * know which backend they talk to.
 */
#ifndef FLARETUNE_BACKEND_H
#define FLARETUNE_BACKEND_H

#include <stddef.h>

#include "op/op.h"
#include "op/space.h"
#include "core/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A machine's ceilings (tuner/ceilings.h measures and keeps them; a device backend's `ceilings`
 * hook measures its own): the bandwidth of each cache level and the compute roof. */
#define FT_CEIL_MAX_LEVELS 5

typedef struct ft_ceil_level {
    char name[8];       /* "L1", "L2", "L3", "DRAM" on a CPU; "L2", "HBM" on a GPU        */
    double capacity;    /* bytes of working set the level holds for the threads measured
                           (private caches add up over the cores used); 0: the last level */
    double bw;          /* bytes per second: the best of this process and of the cache     */
    double bw_now;      /* the best this process measured                                 */
    double probe_bytes; /* the working set the probe streamed                             */
    char seen[24];      /* when bw was measured (UTC, ISO 8601)                           */
} ft_ceil_level;

typedef struct ft_ceilings {
    int nlevels;
    ft_ceil_level level[FT_CEIL_MAX_LEVELS]; /* smallest (fastest) first; the last is memory */
    double bw;         /* the memory level's bandwidth, level[nlevels - 1].bw              */
    double copy_bytes; /* the memory probe's working set                                   */
    double flops;      /* the compute roof: max(peak_flops, gemm_flops)                    */
    double flops_now;  /* the same from this process's measurements alone                 */
    char flops_seen[24];
    double peak_flops;    /* register-only FMA probe (0 where there is none: a GPU)          */
    double gemm_flops;    /* the GEMM's rate, best seen                                       */
    int gemm_n;           /* the GEMM was gemm_n^3                                            */
    const char *gemm;     /* what the GEMM ran ("sgemm", "cuBLASLt bf16")                     */
    int threads;          /* threads every probe ran with                                     */
    int rounds;           /* measurement rounds taken by this process                         */
    double measured_s;    /* time they took, all rounds                                       */
    double measured_at;   /* wall time of the last round (seconds since the epoch)            */
    int from_cache;       /* some figure is the cache's, higher than this process measured    */
    int measured_busy;    /* this process's rounds ran on a busy machine (its load judged)    */
    int cache_busy;       /* some figure taken from the cache was measured on a busy one      */
    char key[256];        /* the machine fingerprint the cache keys these figures by          */
    char cache_path[512]; /* the cache file ("" when none is kept)                          */
    char cache_note[256]; /* why the cache was not read or written ("" when it was)         */
} ft_ceilings;

/* One device kernel a timed call ran (from the backend's profiler), for traces. */
typedef struct ft_kernel_span {
    char name[96];
    double start_s, end_s; /* seconds since the epoch (the device clock mapped to wall time) */
} ft_kernel_span;

/* A call's time on a GPU as a backend predicts it before anything runs (the time model of
 * kernels/cuda/analysis/predict.h): the largest of its limits, each named. */
#define FT_PREDICTION_MAX_LIMITS 12
typedef struct ft_backend_prediction {
    double seconds;    /* the predicted time of one call                                 */
    const char *bound; /* the name of the limit that gave it ("dram", "tensor", ...)     */
    int nlimits;
    const char *limit_name[FT_PREDICTION_MAX_LIMITS];
    double limit_s[FT_PREDICTION_MAX_LIMITS]; /* each limit, seconds                     */
    char device[32];                          /* the device predicted for ("h200")       */
} ft_backend_prediction;

typedef struct ft_backend {
    const char *name;
    const char *summary;
    /* Built into this binary (a CUDA backend without the toolkit is not). */
    int built;
    /* Storage types it runs (the `dtype` attribute): bit 0 float32, bit 1 bfloat16; 0 means
     * float32 only. */
    unsigned dtypes;
    /* 1 when it can run on this machine; otherwise 0 and one line saying why. */
    int (*available)(char *why, size_t n);
    /* 1 when the backend implements op. */
    int (*supports)(const ft_op *op);
    /* The tunable parameters of op on this backend (resolved for this machine); never NULL for
     * a supported op (a space with no parameters has one configuration). */
    const ft_space *(*space)(const ft_op *op);
    /* Run one call. cfg NULL means the backend's default configuration. Outputs that take part
     * are allocated by the caller; scratch comes from c->ws (a temporary one when NULL). */
    ft_status (*run)(ft_call *c, const ft_config *cfg, ft_err *err);
    /* Optional: run `reps` calls back to back and return in *secs the time they took on the
     * backend's own clock (a GPU backend: the device time of the kernels, without the copies
     * of run()); outputs may be left on the device. NULL: the host clock around run(). */
    ft_status (*timed)(ft_call *c, const ft_config *cfg, int reps, double *secs, ft_err *err);
    /* Optional: the clock that timed() reads ("cupti", "events", "emulated"); NULL: "host". */
    const char *(*clock)(void);
    /* Optional: the device fingerprint its results are keyed by (profiles, events); NULL: the
     * CPU's (ft_env_device). */
    const char *(*device)(void);
    /* Optional: everything else known about that device, one line (compute capability, clocks,
     * memory bus, ECC, driver and runtime versions), for `list` and the profile's environment. */
    const char *(*device_details)(void);
    /* Optional: the device kernels the last timed() call ran; fills up to max, returns how
     * many (0 when the clock records none). */
    int (*last_kernels)(ft_kernel_span *out, int max);
    /* Optional: cold timing: when on, every timed call starts with the device's caches
     * flushed (outside the timed window); NULL: cold runs rotate input sets on the host. */
    void (*set_cold)(int on);
    /* Optional: measure the ceilings of the device it runs on (ft_ceilings above;
     * tuner/ceilings.h); NULL: the CPU's. */
    ft_status (*ceilings)(struct ft_ceilings *c, ft_err *err);
    /* Optional, for a backend that compiles kernels: start compiling, on `jobs` background
     * threads, what these configs need to run c, in this order, so that running them later
     * waits for the compiler as little as it must. A later call replaces what an earlier one
     * queued and no thread has started yet (n = 0: nothing more is needed). */
    void (*prefetch)(const ft_call *c, const ft_config *cfgs, int n, int jobs);
    /* Optional, for a backend that compiles kernels: compile (or find in the disk cache) what
     * cfg needs to run c, now, running nothing; the error a run would give when one does not
     * compile. The tuner calls it before the watchdog's clock starts on a candidate, so that a
     * compile is never counted as the candidate's time. */
    ft_status (*prepare)(const ft_call *c, const ft_config *cfg, ft_err *err);
    /* 1 when its space's validity check compiles every config anyway (the GPU's static check
     * before timing): the tuner then compiles ahead without being asked. */
    int valid_compiles;
    /* Optional, for a backend that compiles kernels: the distinct kernel modules this process
     * has needed so far, compiled here or found in the disk cache (each counted once). */
    void (*kernel_modules)(int *compiled, int *cached);
    /* Optional, for a GPU backend: predict one call of c with cfg (NULL: the default) on the
     * GPU named `device` ("h200"; NULL: the one the backend runs on) from what is known without
     * running it. FT_EINVAL for a device it does not know, FT_EUNSUPPORTED when cfg cannot run
     * there or the device's figures are unknown, each with one line. */
    ft_status (*predict)(ft_call *c, const ft_config *cfg, const char *device,
                         ft_backend_prediction *out, ft_err *err);
    /* Optional: a sequence of calls run as one unit, in order, as a serving engine runs a
     * drafter step (`flaretune step`). seq_open prepares n calls with their configs (NULL: the
     * default), runs them once and says in mode how they will be timed ("cuda graph": captured
     * once and replayed; "stream": launched back to back); seq_time runs the sequence `reps`
     * times and returns in *secs the span they took on the device (gaps between kernels
     * included, unlike timed()); seq_close frees it. The calls must outlive the sequence.
     * NULL: the host clock around run() of each call. */
    ft_status (*seq_open)(ft_call *const *calls, const ft_config *const *cfgs, int n, void **seq,
                          char *mode, size_t mode_len, ft_err *err);
    ft_status (*seq_time)(void *seq, int reps, double *secs, ft_err *err);
    void (*seq_close)(void *seq);
    /* Optional, device backends: memory on the device for callers to fill and bind (the C
     * API's device tensors, flaretune.h). mem_copy's kind: FT_MEM_H2D, _D2H or _D2D. */
    ft_status (*mem_alloc)(size_t bytes, void **ptr, ft_err *err);
    void (*mem_free)(void *ptr);
    ft_status (*mem_copy)(void *dst, const void *src, size_t bytes, int kind, ft_err *err);
    /* Optional, device backends: run float tensor i of c from the caller's device memory at
     * dptr (in the call's storage type, at the tensor's shape) instead of a copy of c->t[i],
     * which then only describes it (its data may be NULL): an input is never uploaded, an
     * output is left there. Call once the call is bound and its attributes set; it lasts
     * while c's device state does (ft_call_touch and ft_call_free end it). */
    ft_status (*bind_device)(ft_call *c, int i, void *dptr, ft_err *err);
} ft_backend;

/* The hooks every backend has, named after its prefix: FT_BACKEND_HOOKS(cpu) sets available,
 * supports, space and run to cpu_available, cpu_supports, cpu_space and cpu_run. */
#define FT_BACKEND_HOOKS(P)                                                                        \
    .available = P##_available, .supports = P##_supports, .space = P##_space, .run = P##_run

enum { FT_MEM_H2D = 0, FT_MEM_D2H = 1, FT_MEM_D2D = 2 };

/* Time `reps` calls with the backend's clock (timed() when it has one, else the host clock
 * around run()). */
ft_status ft_backend_time(const ft_backend *b, ft_call *c, const ft_config *cfg, int reps,
                          double *secs, ft_err *err);
/* The device clock a GPU backend times with: "auto" (CUPTI, falling back to CUDA events with a
 * warning when CUPTI cannot start), "cupti" (no fallback) or "events". Set before the backend's
 * first use (`--timer`, or FLARETUNE_TIMER); FT_EINVAL for another name. */
ft_status ft_backend_prefer_timer(const char *name, ft_err *err);
const char *ft_backend_timer_preference(void);

/* FT_EUNSUPPORTED with one line when backend b cannot run a call with attributes a (a dtype
 * it does not store). */
ft_status ft_backend_check_attrs(const ft_backend *b, const ft_attrs *a, ft_err *err);

/* The device fingerprint results of backend b are keyed by: its own (a GPU's) when it has one,
 * else the CPU's (ft_env_device). Returns buf. */
struct ft_env;
char *ft_backend_device(const ft_backend *b, const struct ft_env *env, char *buf, size_t n);

/* The clock ft_backend_time reads: "host" unless the backend says otherwise. */
const char *ft_backend_clock(const ft_backend *b);

/* The backends (kernels/op/backend.c: ref; kernels/cpu: cpu; kernels/cuda: cuda, cuda-emu). */
extern const ft_backend ft_backend_ref, ft_backend_cpu, ft_backend_cuda, ft_backend_cuda_emu;

#ifdef __cplusplus
}
#endif
#endif
