/* ceilings.h: this machine's own ceilings, cache-aware, measured in the same run as the kernels
 * they judge, and never lowered by a busy moment.
 *
 * A roofline fraction is only honest against what this machine can do, not a datasheet, and
 * against the right roof: a working set that fits in a cache is served at that cache's
 * bandwidth, not at the memory's (Intel Advisor's cache-aware roofline, Nsight Compute's
 * hierarchical one). So the ceilings are a hierarchy of levels, each with the bandwidth a
 * working set of its size streams at (the best of reads, writes and copies, bytes read + bytes
 * written per second as STREAM counts them), and a compute roof (the best of a register-only
 * FMA peak probe and a large GEMM from the BLAS the kernels use; on a GPU, cuBLASLt's GEMM).
 *
 * A busy moment can only lower a measurement, so every figure is the best of several rounds,
 * a long run measures again (ft_ceilings_refine), and the best figure ever seen on this machine
 * (keyed by its fingerprint, with the date) is kept in a small cache file and used when it is
 * higher: a loaded run cannot depress the roof and inflate its fractions. A fraction above 1 is
 * then a measurement error, which the callers re-measure and report, never print silently.
 */
#ifndef FLARETUNE_CEILINGS_H
#define FLARETUNE_CEILINGS_H

#include "core/status.h"
#include "op/backend.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ft_ceil_level and ft_ceilings are declared with the backend interface (op/backend.h),
 * whose `ceilings` hook fills them on a device. */

struct ft_backend;
/* The ceilings of the machine a backend runs on: its own measurement when it has one (a GPU:
 * its L2 and HBM, and a cuBLASLt GEMM), else the CPU's with `threads` threads; raised to the
 * best the cache has seen for the same fingerprint, and the cache raised to these. */
ft_status ft_ceilings_of(const struct ft_backend *be, int threads, ft_ceilings *c, ft_err *err);
/* As ft_ceilings_of, but when the cache holds every figure of this machine (CPU) seen within
 * max_age_days, those figures with no probe at all (rounds 0): the start of `bench`. A GPU
 * backend, a missing, partial or older cache measures as ft_ceilings_of does. */
ft_status ft_ceilings_recall(const struct ft_backend *be, int threads, double max_age_days,
                             ft_ceilings *c, ft_err *err);
/* Measure again (after a long run, or when a fraction came out above 1) and keep, figure by
 * figure, the best of all rounds and the cache. */
ft_status ft_ceilings_refine(const struct ft_backend *be, ft_ceilings *c, ft_err *err);

/* One round of the CPU probes with `threads` threads (about a second), no cache. */
ft_status ft_ceilings_cpu(int threads, ft_ceilings *c, ft_err *err);

/* Where a call sits under the roof. */
typedef struct ft_roofline {
    double floor_s; /* max(bytes / bw of the level, flops / compute roof)                */
    int level;      /* the level whose bandwidth bounds it                               */
    const char *level_name;
    double bw;          /* that level's bandwidth                                            */
    double working_set; /* bytes the call touches                                            */
    int compute_bound;  /* the FLOP term is the larger                                       */
} ft_roofline;

/* The roof over a call that moves `bytes`, does `flops` and touches `working_set` bytes
 * (inputs, outputs and scratch). Warm calls are judged against the fastest level that can hold
 * at least half the working set (a set up to twice a level's size is still partly served from
 * it, so its bandwidth is the honest upper bound); cold calls (caches flushed or inputs rotated)
 * against memory. */
ft_roofline ft_roofline_of(const ft_ceilings *c, double bytes, double flops, double working_set,
                           int cold);
/* Shorthand: the floor in seconds. */
double ft_roofline_s(const ft_ceilings *c, double bytes, double flops, double working_set,
                     int cold);

/* A fraction of the roofline above this is a measurement error: the floor cannot be beaten
 * (the margin absorbs the rounding of ticks and counters). */
#define FT_ROOFLINE_MAX_FRAC 1.0

/* JSON forms: the ceilings ({"levels": [...], "flops_per_s", ...}, docs/events.md), and where a
 * call of median `median_s` sits under the roof ({"floor_s", "frac", "level", "bytes_per_s",
 * "working_set_bytes", "bound", "suspect"}: suspect when above it, a measurement error). */
struct json_t;
struct json_t *ft_ceilings_to_json(const ft_ceilings *c);
struct json_t *ft_roofline_to_json(const ft_roofline *r, double median_s);

/* Merge c with the cache file at path (created if missing) under its lock: each figure becomes
 * the best of both, dated; the file is rewritten atomically when c improved on it. A missing,
 * torn or foreign file is not an error: c is kept and the file rebuilt, with a note in
 * c->cache_note. Returns FT_OK unless c itself is malformed. */
ft_status ft_ceilings_cache_merge(ft_ceilings *c, const char *path, ft_err *err);
/* The cache file to use: $FLARETUNE_CEILINGS_CACHE, else $FLARETUNE_CACHE_DIR/ceilings.json,
 * else ~/.cache/flaretune/ceilings.json; "off" (or empty) keeps none. Returns buf, "" for none. */
char *ft_ceilings_cache_path(char *buf, unsigned long n);

/* Last-level cache size in bytes (0 if unknown). */
long ft_llc_bytes(void);

#ifdef __cplusplus
}
#endif
#endif
