/* eventlog.c: the JSONL event log (see traces/eventlog.h and docs/events.md). */
#include "traces/eventlog.h"

#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <unistd.h>

#include "core/clock.h"
#include "core/rng.h"

struct ft_eventlog {
    FILE *f; /* NULL: listener only */
    char path[1024];
    char run[64];
    ft_event_listener listener;
    void *listener_ctx;
    int tail_checked; /* the file's end was made a line boundary before the first append */
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
        log->f = fopen(path, "a+"); /* "+": the torn-line check reads its end */
        if (!log->f) {
            int e = errno;
            free(log);
            return ft_err_set(err, FT_EIO, "%s: cannot open the event log: %s", path, strerror(e));
        }
    }
    *out = log;
    return FT_OK;
}

/* A crash mid-write (kill -9, a full disk) leaves the last line without its newline. Appending
 * after it would glue the next event onto the fragment and make a line that does not parse in
 * the middle of the log, which every later reader refuses. So before the first append: a last
 * line that is a whole event only lacking its newline gets it; a torn one is cut away (it is the
 * event that was in flight, and readers skip it anyway). */
static ft_status end_last_line(ft_eventlog *log, ft_err *err) {
    int fd = fileno(log->f);
    struct stat sb;
    if (fstat(fd, &sb) != 0 || sb.st_size == 0) return FT_OK;
    char c;
    if (pread(fd, &c, 1, sb.st_size - 1) != 1) return FT_OK;
    if (c == '\n') return FT_OK;
    /* Find the start of the last line, reading back in blocks. */
    off_t start = 0;
    char buf[4096];
    for (off_t end = sb.st_size; end > 0 && !start;) {
        off_t from = end > (off_t)sizeof buf ? end - (off_t)sizeof buf : 0;
        ssize_t got = pread(fd, buf, (size_t)(end - from), from);
        if (got <= 0) break;
        for (ssize_t i = got - 1; i >= 0; i--)
            if (buf[i] == '\n') {
                start = from + i + 1;
                break;
            }
        end = from;
    }
    size_t len = (size_t)(sb.st_size - start);
    char *tail = malloc(len + 1);
    int whole = 0;
    if (tail && pread(fd, tail, len, start) == (ssize_t)len) {
        json_t *ev = json_loadb(tail, len, 0, NULL);
        whole = ev && json_is_object(ev) && json_is_string(json_object_get(ev, "event"));
        json_decref(ev);
    }
    free(tail);
    if (whole ? fputc('\n', log->f) == EOF || fflush(log->f) != 0 : ftruncate(fd, start) != 0)
        return ft_err_set(err, FT_EIO, "%s: cannot end its torn last line: %s", log->path,
                          strerror(errno));
    return FT_OK;
}

void ft_eventlog_set_listener(ft_eventlog *log, ft_event_listener fn, void *ctx) {
    log->listener = fn;
    log->listener_ctx = ctx;
}

static void stamp(const ft_eventlog *log, json_t *ev) {
    json_object_set_new(ev, "t", json_real(ft_wall_time()));
    json_object_set_new(ev, "run", json_string(log->run));
}

/* ev as one line, its newline in place of the encoding's NUL (*n bytes); NULL out of memory. */
static char *encode(const json_t *ev, size_t *n) {
    char *line = json_dumps(ev, JSON_COMPACT | JSON_REAL_PRECISION(17));
    if (!line) return NULL;
    *n = strlen(line) + 1;
    line[*n - 1] = '\n';
    return line;
}

char *ft_eventlog_line(ft_eventlog *log, json_t *ev, size_t *n) {
    if (!log || !log->f) return NULL;
    stamp(log, ev);
    return encode(ev, n);
}

int ft_eventlog_fd(const ft_eventlog *log) { return log && log->f ? fileno(log->f) : -1; }

ft_status ft_eventlog_write(ft_eventlog *log, json_t *ev, ft_err *err) {
    stamp(log, ev);
    ft_status s = FT_OK;
    if (log->f && !log->tail_checked) {
        s = end_last_line(log, err);
        log->tail_checked = 1;
    }
    if (log->f && !s) {
        size_t n = 0;
        char *line = encode(ev, &n);
        if (!line) {
            s = ft_err_set(err, FT_EINTERNAL, "an event could not be encoded as JSON");
        } else {
            /* One fwrite per line: with the stream flushed right after, the line reaches the
             * file in one piece for readers following it. */
            if (fwrite(line, 1, n, log->f) != n || fflush(log->f) != 0)
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

/* One line of f into *buf (its newline kept, NUL-terminated): its length; -1 at the end of
 * the file or on a read error (ferror tells them apart), -2 when it is longer than max bytes,
 * -3 out of memory. */
static ssize_t read_line(FILE *f, char **buf, size_t *cap, size_t max) {
    size_t len = 0;
    int c;
    while ((c = getc_unlocked(f)) != EOF) {
        if (len + 2 > *cap) {
            if (len >= max) return -2;
            size_t ncap = *cap ? 2 * *cap : 4096;
            if (ncap > max + 2) ncap = max + 2;
            char *nb = realloc(*buf, ncap);
            if (!nb) return -3;
            *buf = nb;
            *cap = ncap;
        }
        (*buf)[len++] = (char)c;
        if (c == '\n') break;
    }
    if (!len) return -1;
    (*buf)[len] = '\0';
    return (ssize_t)len;
}

/* A log to read: a file or a pipe (what `tune --log` writes, or a shell's <(...)), not a
 * directory or a device. */
static ft_status check_readable(const char *path, ft_err *err) {
    struct stat sb;
    if (!path[0]) return ft_err_set(err, FT_EINVAL, "the event log's path is empty");
    if (stat(path, &sb) != 0)
        return ft_err_set(err, FT_EIO, "%s: cannot open: %s", path, strerror(errno));
    if (S_ISDIR(sb.st_mode))
        return ft_err_set(err, FT_EIO, "%s is a directory, not an event log", path);
    if (!S_ISREG(sb.st_mode) && !S_ISFIFO(sb.st_mode))
        return ft_err_set(err, FT_EIO,
                          "%s is not a regular file (a device or socket): not an "
                          "event log",
                          path);
    return FT_OK;
}

ft_status ft_eventlog_read(const char *path, json_t **events, int *torn, ft_err *err) {
    *events = NULL;
    *torn = 0;
    ft_status s = check_readable(path, err);
    if (s) return s;
    FILE *f = fopen(path, "r");
    if (!f) return ft_err_set(err, FT_EIO, "%s: cannot open: %s", path, strerror(errno));
    json_t *arr = json_array();
    char *line = NULL;
    size_t cap = 0;
    ssize_t len;
    long lineno = 0;
    while ((len = read_line(f, &line, &cap, (size_t)FT_EVENT_LINE_MAX)) >= 0) {
        lineno++;
        /* A compressed log is named as one, not reported as a line that does not parse. */
        if (lineno == 1 && len >= 2 && (unsigned char)line[0] == 0x1f &&
            (unsigned char)line[1] == 0x8b) {
            s = ft_err_set(err, FT_EFORMAT,
                           "%s: is gzip-compressed: `replay` reads it as it is; for this, "
                           "decompress it first (gunzip -k)",
                           path);
            break;
        }
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
    if (!s && len == -2)
        s = ft_err_set(err, FT_EFORMAT,
                       "%s:%ld: a line longer than %lld MiB, the most an event may have (not an "
                       "event log?)",
                       path, lineno + 1, FT_EVENT_LINE_MAX >> 20);
    else if (!s && len == -3)
        s = ft_err_set(err, FT_ENOMEM, "%s:%ld: out of memory reading a line", path, lineno + 1);
    else if (!s && ferror(f))
        s = ft_err_set(err, FT_EIO, "%s: read failed at line %ld: %s", path, lineno + 1,
                       strerror(errno));
    free(line);
    fclose(f);
    if (s) {
        json_decref(arr);
        return s;
    }
    *events = arr;
    return FT_OK;
}

uint32_t ft_eventlog_device_tag(const char *device) {
    uint32_t h = 2166136261u; /* FNV-1a: short, and the same on every host */
    for (const char *c = device; *c; c++)
        h = (h ^ (unsigned char)*c) * 16777619u;
    return h;
}

/* The file's first line when it is a run_start event (the caller decrefs), else NULL. A file
 * that does not open with run_start's first bytes is not read further. */
static json_t *first_run_start(const char *path) {
    FILE *f = fopen(path, "r");
    if (!f) return NULL;
    static const char mark[] = "{\"event\":\"run_start\"";
    char head[sizeof mark] = "";
    json_t *ev = NULL;
    if (fread(head, 1, sizeof mark - 1, f) == sizeof mark - 1 &&
        !memcmp(head, mark, sizeof head - 1) && !fseek(f, 0, SEEK_SET)) {
        char *line = NULL;
        size_t cap = 0;
        ssize_t len = read_line(f, &line, &cap, (size_t)FT_EVENT_LINE_MAX);
        if (len > 0) ev = json_loadb(line, (size_t)len, 0, NULL);
        free(line);
    }
    fclose(f);
    if (json_is_object(ev)) return ev;
    json_decref(ev);
    return NULL;
}

/* Whether suffix (what follows "LOG." in a file's name) is the name `tune all` or a sweep gives
 * the log of the run start opens (tuner/cli/cmd_tune.c): its op; then, for a size of a sweep,
 * ".SIZEv", one of its dims at its value; then, when ranks on several kinds of device split the
 * run, ".TAG" of its device. A name that merely starts with LOG. (a rotated LOG.1, LOG.old)
 * names no run of its own. */
static int names_its_run(const char *suffix, const json_t *start) {
    const char *op = json_string_value(json_object_get(start, "op"));
    size_t n = op ? strlen(op) : 0;
    if (!n || strncmp(suffix, op, n) != 0) return 0;
    suffix += n;
    const char *size;
    json_t *v;
    char part[160];
    json_object_foreach(json_object_get(start, "dims"), size, v) {
        int w = snprintf(part, sizeof part, ".%s%lld", size, (long long)json_integer_value(v));
        if (json_is_integer(v) && w > 0 && (size_t)w < sizeof part &&
            !strncmp(suffix, part, (size_t)w) && (!suffix[w] || suffix[w] == '.')) {
            suffix += w;
            break;
        }
    }
    const char *device = json_string_value(json_object_get(start, "device"));
    if (*suffix && device)
        snprintf(part, sizeof part, ".%08x", (unsigned)ft_eventlog_device_tag(device));
    return !*suffix || (device && !strcmp(suffix, part));
}

/* Does the file hold a run of the family: its first line the run_start of the run its name
 * says? */
static int starts_its_run(const char *path, const char *suffix) {
    json_t *start = first_run_start(path);
    int ok = start && names_its_run(suffix, start);
    json_decref(start);
    return ok;
}

static int is_file(const char *path) {
    struct stat sb;
    return stat(path, &sb) == 0 && S_ISREG(sb.st_mode);
}

static int cmp_names(const void *a, const void *b) { return strcmp(a, b); }

int ft_eventlog_family(const char *path, char (*out)[FT_EVENTLOG_PATH_MAX], int max) {
    int n = 0;
    if (is_file(path)) {
        if (n < max) snprintf(out[n], FT_EVENTLOG_PATH_MAX, "%s", path);
        n++;
    }
    char dir[FT_EVENTLOG_PATH_MAX];
    const char *slash = strrchr(path, '/');
    const char *base = slash ? slash + 1 : path;
    if (!*base) return n;
    if (slash) snprintf(dir, sizeof dir, "%.*s", (int)(slash - path) ? (int)(slash - path) : 1, path);
    else snprintf(dir, sizeof dir, ".");
    DIR *d = opendir(dir);
    if (!d) return n;
    size_t blen = strlen(base);
    int first = n < max ? n : max;
    struct dirent *de;
    while ((de = readdir(d))) {
        const char *name = de->d_name;
        size_t len = strlen(name);
        if (len <= blen + 1 || strncmp(name, base, blen) != 0 || name[blen] != '.') continue;
        if ((len > 5 && !strcmp(name + len - 5, ".lock")) || strstr(name + blen, ".tmp.")) continue;
        char full[FT_EVENTLOG_PATH_MAX];
        int w = slash ? snprintf(full, sizeof full, "%.*s/%s", (int)(slash - path), path, name)
                      : snprintf(full, sizeof full, "%s", name);
        if (w < 0 || (size_t)w >= sizeof full || !is_file(full) ||
            !starts_its_run(full, name + blen + 1))
            continue;
        if (n < max) memcpy(out[n], full, (size_t)w + 1);
        n++;
    }
    closedir(d);
    int stored = n < max ? n : max;
    if (stored > first) qsort(out[first], (size_t)(stored - first), sizeof out[0], cmp_names);
    return n;
}

char (*ft_eventlog_family_all(const char *path, int *n))[FT_EVENTLOG_PATH_MAX] {
    char(*out)[FT_EVENTLOG_PATH_MAX] = NULL;
    int have = 0, want = ft_eventlog_family(path, NULL, 0);
    /* A log may appear between the count and the listing: list again (a few times at most). */
    for (int tries = 0; want > have && tries < 4; tries++) {
        char(*more)[FT_EVENTLOG_PATH_MAX] = realloc(out, (size_t)want * sizeof *out);
        if (!more) {
            free(out);
            *n = -1;
            return NULL;
        }
        out = more;
        have = want;
        want = ft_eventlog_family(path, out, have);
    }
    *n = want < have ? want : have; /* the listed ones (fewer when some went meanwhile) */
    if (*n <= 0) {
        free(out);
        out = NULL;
        *n = 0;
    }
    return out;
}

void ft_eventlog_run_id(char *buf, size_t n) {
    ft_rng r;
    ft_rng_seed(&r, (uint64_t)ft_now_ns() ^ ((uint64_t)getpid() << 32));
    snprintf(buf, n, "%012llx", (unsigned long long)(ft_rng_next(&r) & 0xffffffffffffull));
}

int ft_event_config_whole(const json_t *run_start, const json_t *ev, char *why, size_t n) {
    const json_t *def = json_object_get(run_start, "default"), *cfg = json_object_get(ev, "config");
    const char *name;
    const json_t *v;
    if (!json_is_object(def) || !json_is_object(cfg)) return 1;
    json_object_foreach((json_t *)def, name, v) {
        (void)v;
        if (!json_object_get(cfg, name))
            return snprintf(why, n, "its config lacks '%.64s', which its run's default names",
                            name),
                   0;
    }
    return 1;
}

int ft_event_measured_ok(const json_t *ev, char *why, size_t n) {
    const json_t *st = json_object_get(ev, "stats");
    if (json_is_false(json_object_get(ev, "clean")))
        return snprintf(why, n, "not measured cleanly (the machine was busy)"), 0;
    if (json_is_object(json_object_get(ev, "stopped"))) return 1; /* stopped: slow, no median */
    const json_t *med = json_object_get(st, "median_s");
    if (!json_is_object(st)) return snprintf(why, n, "a measured event without stats"), 0;
    if (!json_is_number(med) || !(json_number_value(med) > 0) || !isfinite(json_number_value(med)))
        return snprintf(why, n, "a measured event without a positive stats.median_s"), 0;
    const json_t *ns = json_object_get(st, "samples");
    if (!json_is_integer(ns) || json_integer_value(ns) < 1)
        return snprintf(why, n, "a measured event without a sample count"), 0;
    return 1;
}
