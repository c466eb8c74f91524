/* eventlog.h: the JSONL event log of tuning runs (format: docs/events.md).
 *
 * The writer appends one whole line per event and flushes it to the kernel before returning, so
 * readers following the file see complete events and a crash loses at most the line being
 * written. The reader skips a torn last line; the writer, before its first append, ends a
 * last line that lacks its newline (or cuts it away when it is torn), so the file stays valid
 * JSONL across crashes and resumes. One process appends at a time: the tuner holds LOG.lock
 * (core/filelock.h) for the run.
 */
#ifndef FLARETUNE_EVENTLOG_H
#define FLARETUNE_EVENTLOG_H

#include <jansson.h>
#include <stdint.h>
#include <stdio.h>

#include "core/status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define FT_EVENTLOG_FORMAT 1

typedef struct ft_eventlog ft_eventlog;

/* A fresh run id for ft_eventlog_open: 12 hex digits drawn from the clock and the process id,
 * so runs of one log (and of concurrent processes) differ. n >= 13. */
void ft_eventlog_run_id(char *buf, size_t n);
/* Open `path` for appending (created if missing). `run` is the run id every event will carry. */
ft_status ft_eventlog_open(const char *path, const char *run, ft_eventlog **out, ft_err *err);
/* Stamp `ev` with "t" and "run", write it as one line and flush. Takes ownership of ev. */
ft_status ft_eventlog_write(ft_eventlog *log, json_t *ev, ft_err *err);
void ft_eventlog_close(ft_eventlog *log);
/* The line ft_eventlog_write would write for ev (stamped "t" and "run", its newline included,
 * *n bytes; caller frees), and the log's file descriptor, for a record written later by a
 * handler that ends the process (core/epitaph.h). NULL, and -1, for a log with no file; NULL
 * also when out of memory. ev stays the caller's. */
char *ft_eventlog_line(ft_eventlog *log, json_t *ev, size_t *n);
int ft_eventlog_fd(const ft_eventlog *log);
/* An event log that only calls back (in-process consumers such as the dashboard); may be
 * attached to a writer with ft_eventlog_set_listener. */
typedef void (*ft_event_listener)(void *ctx, const json_t *ev);
void ft_eventlog_set_listener(ft_eventlog *log, ft_event_listener fn, void *ctx);

/* The most bytes one line (one event) of a log may have (docs/events.md): the largest events
 * (run_start, a report's step) take some KiB. A longer line is no event. */
#define FT_EVENT_LINE_MAX ((long long)16 << 20)

/* Every complete event of the log at `path`, in order, as a JSON array (*events; caller
 * decrefs). *torn is set to 1 when the last line was incomplete (and skipped). A line in the
 * middle that does not parse is an error naming the line. A directory, a device or socket (only
 * files and pipes are read), a line longer than FT_EVENT_LINE_MAX and a read error are errors. */
ft_status ft_eventlog_read(const char *path, json_t **events, int *torn, ft_err *err);

/* The logs one `--log LOG` wrote: LOG itself when it is a file, then (sorted by name) every
 * LOG.SUFFIX that `tune all` or `--sweep` writes, one per op and size (LOG.fusion.dflare,
 * LOG.loss.M512, ...): a regular file whose first line is the run_start of the run its name
 * says (its op, the size of the sweep among its dims, its device's tag), never a lock or
 * temporary file, nor another log whose name starts with LOG. (a rotated LOG.1). Fills up to
 * max paths of FT_EVENTLOG_PATH_MAX bytes; returns how many there are. */
#define FT_EVENTLOG_PATH_MAX 1024
int ft_eventlog_family(const char *path, char (*out)[FT_EVENTLOG_PATH_MAX], int max);
/* All of them, however many: an array of *n paths to free(); NULL with *n = 0 when there are
 * none, NULL with *n = -1 when out of memory. */
char (*ft_eventlog_family_all(const char *path, int *n))[FT_EVENTLOG_PATH_MAX];
/* The tag in the names of the logs of one kind of device, when ranks on several kinds split a
 * run (LOG.OP.TAG, "%08x"): a hash of its fingerprint, run_start's "device". */
uint32_t ft_eventlog_device_tag(const char *device);

/* Whether a `measured` event is one a result can be taken from: measured cleanly, and either
 * stopped by the watchdog (slow, no median) or with stats holding a positive median_s and a
 * sample count. When not, why (n bytes) says what it lacks: a resumed run measures the
 * candidate again, and replay takes it as never measured. */
int ft_event_measured_ok(const json_t *ev, char *why, size_t n);

/* Whether a candidate event's "config" names every parameter its run's default config names
 * (run_start's "default": every tunable the recording binary had). When not, why (n bytes)
 * names the one it lacks. A config read alone takes a missing parameter at its default (a log
 * older than a tunable); in a run whose default names it, it is a damaged event that would
 * pass for another config. */
int ft_event_config_whole(const json_t *run_start, const json_t *ev, char *why, size_t n);

/* Seconds since the epoch as a double (the events' "t"). */
double ft_wall_time(void);

#ifdef __cplusplus
}
#endif
#endif
