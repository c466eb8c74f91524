/* timer.h: device time of a measured region on the GPU: CUPTI activity records, or CUDA events.
 *
 * CUPTI (the default): the activity API records every kernel with its start and end on the GPU;
 * each measured region pushes one external correlation id, so the time of a region is the sum
 * of the kernels it launched (cuBLASLt may launch several), free of launch gaps and host noise.
 * CUDA events (the fallback when CUPTI cannot start, e.g. another profiler holds it, or when
 * asked with --timer events): the elapsed time between two events on the device's stream.
 * Built only with the CUDA toolkit (FT_HAVE_CUDA).
 */
#ifndef FT_TIMER_H
#define FT_TIMER_H

#include <stdint.h>

#include "cuda/device.h"
#include "core/status.h"

typedef enum { FT_TIMER_CUPTI = 0, FT_TIMER_EVENTS = 1 } ft_timer_kind;

typedef struct ft_timer ft_timer;

/* Open a timer for a FT_DEV_CUDA device. FT_TIMER_CUPTI fails with FT_EUNSUPPORTED and one
 * line saying why when CUPTI cannot start; the caller then falls back to events, warning. */
ft_status ft_timer_open(ft_dev *d, ft_timer_kind kind, ft_timer **out, ft_err *err);
void ft_timer_close(ft_timer *t);
ft_timer_kind ft_timer_kind_of(const ft_timer *t);
const char *ft_timer_name(ft_timer_kind k); /* "cupti", "events" */

/* A measured region: begin, enqueue work on the device's stream, end. end waits for the
 * device and returns the region's device time in seconds, and in *nkernels the number of
 * kernels counted (CUPTI; -1 for events). */
ft_status ft_timer_begin(ft_timer *t, ft_err *err);
ft_status ft_timer_end(ft_timer *t, double *secs, int *nkernels, ft_err *err);

/* Activity records CUPTI dropped so far (its buffers were full); reported with results. */
uint64_t ft_timer_dropped(const ft_timer *t);

/* The kernel records of the last region (CUPTI only): name, start and end in ns on CUPTI's
 * clock; returns how many were copied (<= max). */
typedef struct ft_kernel_record {
    char name[96];
    uint64_t start_ns, end_ns;
    uint64_t correlation; /* the region's external correlation id */
} ft_kernel_record;
int ft_timer_last_records(const ft_timer *t, ft_kernel_record *out, int max);

#endif
