/* trace.h: export an event log as a Chrome trace (the JSON trace-event format that Perfetto and
 * chrome://tracing load): one process per run, with the run, each candidate (verification and
 * measurement) and each sample batch as nested spans, rejected candidates marked, and the
 * confirmation round. */
#ifndef FLARETUNE_TRACE_H
#define FLARETUNE_TRACE_H

#include <jansson.h>

#include "core/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The trace of the events (an array as read by ft_eventlog_read). Returns a new object
 * {"traceEvents": [...], "displayTimeUnit": "ms", "otherData": {...}}. */
json_t *ft_trace_from_events(const json_t *events);

/* Read the log at `in` and write the trace to `out` atomically. When no file has that name,
 * the logs a `tune all` or a sweep wrote with `--log IN` (ft_eventlog_family) go into one
 * trace, a process per run. */
ft_status ft_trace_export(const char *in, const char *out, int *nspans, ft_err *err);

#ifdef __cplusplus
}
#endif
#endif
