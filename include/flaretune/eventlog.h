/* eventlog.h: the JSONL event log of tuning runs (format: docs/events.md).
 *
 * The writer appends one whole line per event and flushes it to the kernel before returning, so
 * readers following the file see complete events and a crash loses at most the line being
 * written. The reader skips a torn last line.
 */
#ifndef FLARETUNE_EVENTLOG_H
#define FLARETUNE_EVENTLOG_H

#include <jansson.h>
#include <stdio.h>

#include "flaretune/status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define FT_EVENTLOG_FORMAT 1

typedef struct ft_eventlog ft_eventlog;

/* Open `path` for appending (created if missing). `run` is the run id every event will carry. */
ft_status ft_eventlog_open(const char *path, const char *run, ft_eventlog **out, ft_err *err);
/* Stamp `ev` with "t" and "run", write it as one line and flush. Takes ownership of ev. */
ft_status ft_eventlog_write(ft_eventlog *log, json_t *ev, ft_err *err);
void ft_eventlog_close(ft_eventlog *log);
/* An event log that only calls back (in-process consumers such as the dashboard); may be
 * attached to a writer with ft_eventlog_set_listener. */
typedef void (*ft_event_listener)(void *ctx, const json_t *ev);
void ft_eventlog_set_listener(ft_eventlog *log, ft_event_listener fn, void *ctx);

/* Every complete event of the log at `path`, in order, as a JSON array (*events; caller
 * decrefs). *torn is set to 1 when the last line was incomplete (and skipped). A line in the
 * middle that does not parse is an error naming the line. */
ft_status ft_eventlog_read(const char *path, json_t **events, int *torn, ft_err *err);

/* Seconds since the epoch as a double (the events' "t"). */
double ft_wall_time(void);

#ifdef __cplusplus
}
#endif
#endif
