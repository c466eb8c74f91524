/* eventlog.c: the JSONL event log (see include/flaretune/eventlog.h and docs/events.md). */
#include "flaretune/eventlog.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <unistd.h>

struct ft_eventlog {
    FILE *f; /* NULL: listener only */
    char path[1024];
    char run[64];
    ft_event_listener listener;
    void *listener_ctx;
};

double ft_wall_time(void) {
    struct timeval tv;
    gettimeofday(&tv, NULL);
    return (double)tv.tv_sec + 1e-6 * (double)tv.tv_usec;
}

ft_status ft_eventlog_open(const char *path, const char *run, ft_eventlog **out, ft_err *err) {
    *out = NULL;
    ft_eventlog *log = calloc(1, sizeof *log);
    if (!log) return ft_err_set(err, FT_ENOMEM, "out of memory");
    snprintf(log->run, sizeof log->run, "%s", run);
    if (path) {
        snprintf(log->path, sizeof log->path, "%s", path);
        log->f = fopen(path, "a");
        if (!log->f) {
            int e = errno;
            free(log);
            return ft_err_set(err, FT_EIO, "%s: cannot open the event log: %s", path, strerror(e));
        }
    }
    *out = log;
    return FT_OK;
}

void ft_eventlog_set_listener(ft_eventlog *log, ft_event_listener fn, void *ctx) {
    log->listener = fn;
    log->listener_ctx = ctx;
}

ft_status ft_eventlog_write(ft_eventlog *log, json_t *ev, ft_err *err) {
    json_object_set_new(ev, "t", json_real(ft_wall_time()));
    json_object_set_new(ev, "run", json_string(log->run));
    ft_status s = FT_OK;
    if (log->f) {
        char *line = json_dumps(ev, JSON_COMPACT | JSON_REAL_PRECISION(17));
        if (!line) {
            s = ft_err_set(err, FT_EINTERNAL, "an event could not be encoded as JSON");
        } else {
            /* One fputs per line: with the stream flushed right after, the line reaches the
             * file in one piece for readers following it. */
            size_t n = strlen(line);
            line[n] = '\n';
            if (fwrite(line, 1, n + 1, log->f) != n + 1 || fflush(log->f) != 0)
                s = ft_err_set(err, FT_EIO, "%s: cannot write the event log: %s", log->path,
                               strerror(errno));
            free(line);
        }
    }
    if (!s && log->listener) log->listener(log->listener_ctx, ev);
    json_decref(ev);
    return s;
}

void ft_eventlog_close(ft_eventlog *log) {
    if (!log) return;
    if (log->f) {
        fsync(fileno(log->f));
        fclose(log->f);
    }
    free(log);
}

ft_status ft_eventlog_read(const char *path, json_t **events, int *torn, ft_err *err) {
    *events = NULL;
    *torn = 0;
    FILE *f = fopen(path, "r");
    if (!f) return ft_err_set(err, FT_EIO, "%s: cannot open: %s", path, strerror(errno));
    json_t *arr = json_array();
    char *line = NULL;
    size_t cap = 0;
    ssize_t len;
    long lineno = 0;
    ft_status s = FT_OK;
    while ((len = getline(&line, &cap, f)) >= 0) {
        lineno++;
        int complete = len > 0 && line[len - 1] == '\n';
        if (len == 0 || (len == 1 && complete)) continue;
        json_error_t je;
        json_t *ev = json_loadb(line, (size_t)len, 0, &je);
        if (!ev || !json_is_object(ev) || !json_is_string(json_object_get(ev, "event"))) {
            json_decref(ev);
            /* A torn last line is what a crash mid-write leaves: skip it. */
            int c = fgetc(f);
            if (c == EOF && !complete) {
                *torn = 1;
                break;
            }
            s = ft_err_set(err, FT_EFORMAT, "%s:%ld: not an event (%s)", path, lineno,
                           ev ? "no \"event\" field" : je.text);
            break;
        }
        json_array_append_new(arr, ev);
    }
    free(line);
    fclose(f);
    if (s) {
        json_decref(arr);
        return s;
    }
    *events = arr;
    return FT_OK;
}
