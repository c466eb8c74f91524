/* feed.c: where the dashboard's events come from: a queue filled by a worker thread in this
 * process (tune --tui, watch), or an event log followed as `tail -f` follows a file (top). */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/clock.h"
#include "core/filelock.h"
#include "traces/eventlog.h"
#include "tui/tui.h"

/* ---- the in-process queue ---------------------------------------------------------------- */

int ft_tui_feed_init(ft_tui_feed *f) {
    memset(f, 0, sizeof *f);
    if (pthread_mutex_init(&f->mu, NULL)) return 0;
    f->q = malloc(sizeof *f->q * 256);
    if (!f->q) {
        pthread_mutex_destroy(&f->mu);
        return 0;
    }
    f->cap = 256;
    return 1;
}

void ft_tui_feed_free(ft_tui_feed *f) {
    if (!f->q) return;
    for (int i = 0; i < f->n; i++)
        json_decref(f->q[(f->head + i) % f->cap]);
    free(f->q);
    pthread_mutex_destroy(&f->mu);
    memset(f, 0, sizeof *f);
}

void ft_tui_feed_push_new(ft_tui_feed *f, json_t *ev) {
    if (!ev) {
        pthread_mutex_lock(&f->mu);
        f->dropped++;
        pthread_mutex_unlock(&f->mu);
        return;
    }
    pthread_mutex_lock(&f->mu);
    if (f->n == f->cap) {
        json_t **q = malloc(sizeof *q * (size_t)f->cap * 2);
        if (!q) {
            f->dropped++;
            pthread_mutex_unlock(&f->mu);
            json_decref(ev);
            return;
        }
        for (int i = 0; i < f->n; i++)
            q[i] = f->q[(f->head + i) % f->cap];
        free(f->q);
        f->q = q;
        f->head = 0;
        f->cap *= 2;
    }
    f->q[(f->head + f->n) % f->cap] = ev;
    f->n++;
    pthread_mutex_unlock(&f->mu);
}

void ft_tui_feed_push(ft_tui_feed *f, const json_t *ev) {
    /* A deep copy: the producer frees (or reuses) its event as soon as the listener returns. */
    ft_tui_feed_push_new(f, json_deep_copy(ev));
}

void ft_tui_feed_listener(void *ctx, const json_t *ev) { ft_tui_feed_push(ctx, ev); }

int ft_tui_feed_drain(ft_tui_feed *f, json_t **out, int max) {
    pthread_mutex_lock(&f->mu);
    int k = 0;
    while (k < max && f->n > 0) {
        out[k++] = f->q[f->head];
        f->head = (f->head + 1) % f->cap;
        f->n--;
    }
    pthread_mutex_unlock(&f->mu);
    return k;
}

/* ---- following a log --------------------------------------------------------------------- */

enum { HEAD_MAX = 4096, READ_CHUNK = 1 << 20 };

typedef struct one_log {
    char path[1024];
    int fd;
    dev_t dev;
    ino_t ino;
    off_t off;           /* bytes consumed from the file                          */
    char *buf;           /* bytes read but not yet a complete line                */
    size_t len, cap, at; /* at: start of the unparsed part of buf                */
    char head[HEAD_MAX]; /* the file's first bytes: a rewrite changes them       */
    size_t headlen;
    int pending_reopen; /* a reopen event to report: 1 truncated, 2 replaced     */
    int overlong;       /* inside a line too long to be an event (counted once)  */
    int fifo;           /* a pipe: read as it comes, never seeked nor reopened   */
    char run[40];       /* the run of the latest event read from it              */
    int gone_told;      /* its writer was said to be gone, and nothing came since */
} one_log;

static one_log *log_new(const char *path) {
    one_log *f = calloc(1, sizeof *f);
    if (!f) return NULL;
    snprintf(f->path, sizeof f->path, "%.1023s", path);
    f->fd = -1;
    return f;
}

static void log_free(one_log *f) {
    if (!f) return;
    if (f->fd >= 0) close(f->fd);
    free(f->buf);
    free(f);
}

static void restart(one_log *f) {
    f->off = 0;
    f->len = f->at = 0;
    f->headlen = 0;
    f->overlong = 0;
    f->run[0] = '\0';
    f->gone_told = 0;
}

static int try_open(one_log *f) {
    /* O_NONBLOCK: a named pipe with no writer yet opens at once (and reads as empty) instead of
     * blocking the dashboard before its first frame; a regular file ignores it. */
    int fd = open(f->path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) return 0;
    struct stat st;
    if (fstat(fd, &st)) {
        close(fd);
        return 0;
    }
    f->fd = fd;
    f->dev = st.st_dev;
    f->ino = st.st_ino;
    f->fifo = S_ISFIFO(st.st_mode);
    restart(f);
    return 1;
}

/* Has the file under the same name been truncated or rewritten? */
static int rewritten(one_log *f) {
    struct stat st;
    if (fstat(f->fd, &st)) return 0;
    if (st.st_size < f->off) return 1;
    if (f->headlen) {
        char now[HEAD_MAX];
        ssize_t k = pread(f->fd, now, f->headlen, 0);
        if (k != (ssize_t)f->headlen || memcmp(now, f->head, f->headlen)) return 1;
    }
    return 0;
}

/* Another file now has the name (renamed into place, or deleted and created again). */
static int replaced(const one_log *f) {
    struct stat st;
    if (stat(f->path, &st)) return 0; /* gone: keep reading what is open */
    return st.st_dev != f->dev || st.st_ino != f->ino;
}

/* Read up to READ_CHUNK more bytes into buf. Returns the bytes read. */
static ssize_t fill(one_log *f) {
    if (f->at > 0) {
        memmove(f->buf, f->buf + f->at, f->len - f->at);
        f->len -= f->at;
        f->at = 0;
    }
    if (f->cap - f->len < 65536) {
        size_t cap = f->cap ? f->cap * 2 : 65536 * 2;
        char *b = realloc(f->buf, cap);
        if (!b) return 0;
        f->buf = b;
        f->cap = cap;
    }
    size_t want = f->cap - f->len;
    if (want > READ_CHUNK) want = READ_CHUNK;
    ssize_t k;
    do /* a pipe has no offsets: its bytes come once, in order (EAGAIN: none yet) */
        k = f->fifo ? read(f->fd, f->buf + f->len, want)
                    : pread(f->fd, f->buf + f->len, want, f->off + (off_t)f->len);
    while (k < 0 && errno == EINTR);
    if (k <= 0) return 0;
    /* Remember the first bytes of the file to notice a rewrite later. */
    if (f->headlen < HEAD_MAX && f->off == 0) {
        size_t h = f->len + (size_t)k < HEAD_MAX ? f->len + (size_t)k : HEAD_MAX;
        memcpy(f->head, f->buf, h);
        f->headlen = h;
    }
    f->len += (size_t)k;
    return k;
}

/* One line (without its newline) as an event; NULL when it is not one. A torn line followed by
 * a whole one (a writer killed mid-line, then another appending) holds a valid event after the
 * torn part: it is recovered. */
static json_t *parse_line(const char *s, size_t n, long *bad) {
    while (n && (s[n - 1] == '\r' || s[n - 1] == ' '))
        n--;
    if (!n) return NULL;
    json_t *ev = json_loadb(s, n, 0, NULL);
    if (json_is_object(ev) && json_is_string(json_object_get(ev, "event"))) return ev;
    json_decref(ev);
    if (bad) (*bad)++;
    static const char mark[] = "{\"event\"";
    for (size_t i = n; i-- > 1;) {
        if (s[i] != '{' || n - i < sizeof mark - 1 || memcmp(s + i, mark, sizeof mark - 1))
            continue;
        ev = json_loadb(s + i, n - i, 0, NULL);
        if (json_is_object(ev)) return ev;
        json_decref(ev);
        break;
    }
    return NULL;
}

static json_t *reopen_event(int why) {
    return json_pack("{s:s, s:s}", "event", "reopen", "reason",
                     why == 2 ? "replaced" : "truncated");
}

/* *reopened is set when a reopen event is among those returned. */
static int log_poll(one_log *f, json_t **out, int max, long *bad, int *reopened) {
    int k = 0;
    if (max < 1) return 0;
    if (f->fd < 0 && !try_open(f)) return 0;
    if (f->pending_reopen) {
        out[k++] = reopen_event(f->pending_reopen);
        f->pending_reopen = 0;
        *reopened = 1;
    }
    int rounds = 0;
    while (k < max) {
        /* Complete lines already read. */
        char *nl;
        while (k < max && f->buf && (nl = memchr(f->buf + f->at, '\n', f->len - f->at))) {
            size_t n = (size_t)(nl - (f->buf + f->at));
            /* The end of an overlong line was counted when its start was dropped; an event
             * whole at its end (after a torn part) is still recovered. */
            json_t *ev = parse_line(f->buf + f->at, n, f->overlong ? NULL : bad);
            f->overlong = 0;
            f->at += n + 1;
            f->off += (off_t)(n + 1);
            if (!ev) continue;
            const char *run = json_string_value(json_object_get(ev, "run"));
            if (run) snprintf(f->run, sizeof f->run, "%s", run);
            f->gone_told = 0;
            out[k++] = ev;
        }
        if (k >= max) break;
        /* Anything left in the file, or a new file under the name (a pipe is neither truncated
         * nor rewritten, and what it gave cannot be read again). */
        if (rounds++ == 0 && !f->fifo && (rewritten(f) || replaced(f))) {
            int why = replaced(f) ? 2 : 1;
            if (why == 2) {
                int fd = f->fd;
                f->fd = -1;
                if (!try_open(f)) {
                    f->fd = fd; /* it vanished again: keep what is open */
                    continue;
                }
                close(fd);
            } else {
                restart(f);
            }
            if (k < max) {
                out[k++] = reopen_event(why);
                *reopened = 1;
            } else {
                f->pending_reopen = why;
            }
            continue;
        }
        if (f->len - f->at > (size_t)FT_EVENT_LINE_MAX) {
            /* A "line" longer than an event may be is no event: drop it. */
            f->off += (off_t)(f->len - f->at);
            f->len = f->at = 0;
            if (bad && !f->overlong) (*bad)++;
            f->overlong = 1;
        }
        if (fill(f) <= 0) break;
    }
    return k;
}

/* ---- following the logs of one --log -------------------------------------------------------- */

/* `tune all --log LOG` writes LOG.fusion.dflare, LOG.loss, ...: the follower watches LOG and every
 * such sibling (ft_eventlog_family), however many, finding new ones as they appear. */
struct ft_tui_follow {
    char path[1024];
    one_log **logs;
    int n, cap;
    int next;        /* the log polled first next time, so none starves the others */
    int64_t scan_ns; /* when the directory was last looked at */
    int64_t gone_ns; /* when the writers were last looked for */
};

ft_tui_follow *ft_tui_follow_new(const char *path) {
    ft_tui_follow *f = calloc(1, sizeof *f);
    if (!f) return NULL;
    snprintf(f->path, sizeof f->path, "%.1023s", path);
    /* The name itself is followed even before it exists (a plain `tune OP --log LOG`). */
    if (!(f->logs = calloc(8, sizeof *f->logs)) || !(f->logs[0] = log_new(path))) {
        free(f->logs);
        free(f);
        return NULL;
    }
    f->cap = 8;
    f->n = 1;
    f->scan_ns = f->gone_ns = -1;
    return f;
}

void ft_tui_follow_free(ft_tui_follow *f) {
    if (!f) return;
    for (int i = 0; i < f->n; i++)
        log_free(f->logs[i]);
    free(f->logs);
    free(f);
}

int ft_tui_follow_waiting(const ft_tui_follow *f) {
    for (int i = 0; i < f->n; i++)
        if (f->logs[i]->fd >= 0) return 0;
    return 1;
}

int ft_tui_follow_count(const ft_tui_follow *f) {
    int n = 0;
    for (int i = 0; i < f->n; i++)
        n += f->logs[i]->fd >= 0;
    return n;
}

static void scan(ft_tui_follow *f) {
    int64_t now = ft_now_ns();
    if (f->scan_ns >= 0 && now - f->scan_ns < 500000000) return; /* twice a second */
    f->scan_ns = now;
    int k;
    char(*found)[FT_EVENTLOG_PATH_MAX] = ft_eventlog_family_all(f->path, &k);
    for (int i = 0; i < k; i++) {
        int have = 0;
        for (int j = 0; j < f->n && !have; j++)
            have = !strcmp(f->logs[j]->path, found[i]);
        if (have) continue;
        if (f->n == f->cap) { /* out of memory: the next scan tries again */
            one_log **more = realloc(f->logs, (size_t)f->cap * 2 * sizeof *more);
            if (!more) break;
            f->logs = more;
            f->cap *= 2;
        }
        if ((f->logs[f->n] = log_new(found[i]))) f->n++;
    }
    free(found);
}

/* A "gone" event for each log whose writer is gone: a regular file whose lock (LOG.lock, taken
 * by the tuner that writes it for as long as it does) exists and no process holds, with every
 * byte of it read (the lock is looked at first: what a writer wrote before it let the lock go
 * is then in the file). Told once, until the log gives another event; looked for at most once
 * a second. A lock that cannot be judged (none, no /proc/locks) says nothing. */
static int writers_gone(ft_tui_follow *f, json_t **out, int max) {
    int64_t now = ft_now_ns();
    if (f->gone_ns >= 0 && now - f->gone_ns < 1000000000) return 0;
    f->gone_ns = now;
    int k = 0;
    for (int i = 0; i < f->n && k < max; i++) {
        one_log *l = f->logs[i];
        struct stat st;
        if (l->fd < 0 || l->fifo || l->gone_told || !l->run[0] || ft_file_lock_held(l->path) != 0)
            continue;
        if (fstat(l->fd, &st) || st.st_size != l->off + (off_t)(l->len - l->at) || replaced(l))
            continue; /* more to read first */
        json_t *ev = json_pack("{s:s, s:s, s:s}", "event", "gone", "run", l->run, "log", l->path);
        if (!ev) continue;
        l->gone_told = 1;
        out[k++] = ev;
    }
    return k;
}

int ft_tui_follow_poll(ft_tui_follow *f, json_t **out, int max, long *bad) {
    scan(f);
    int k = 0;
    for (int r = 0; r < f->n && k < max; r++) {
        int i = (f->next + r) % f->n, reopened = 0;
        k += log_poll(f->logs[i], out + k, max - k, bad, &reopened);
        if (!reopened) continue;
        /* A reopen drops every row (the model starts over), so the other logs of the family
         * are read again from the start too: their runs come back, the truncated log's old
         * run does not. A pipe cannot be read again: it goes on where it is. */
        for (int j = 0; j < f->n; j++)
            if (j != i && f->logs[j]->fd >= 0 && !f->logs[j]->fifo) {
                restart(f->logs[j]);
                f->logs[j]->pending_reopen = 0;
            }
    }
    f->next = f->n ? (f->next + 1) % f->n : 0;
    if (k < max) k += writers_gone(f, out + k, max - k); /* once everything is read */
    return k;
}
