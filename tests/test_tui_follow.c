/* test_tui_follow.c: the dashboard's sources: the queue between a worker thread and the
 * dashboard (every event arrives once, in order, as a copy), and the follower of an event log
 * (tail -f: a file that appears later, grows, ends in a torn line completed later, holds a torn
 * line followed by a whole one or a line too long to be an event, is truncated, rewritten or
 * replaced, rotated away; a named pipe; a writer that holds the log's lock, then is killed). */
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/clock.h"
#include "core/filelock.h"
#include "ft_test.h"
#include "ft_test_lock.h"
#include "traces/eventlog.h"
#include "tui/tui.h"

/* ---- the queue --------------------------------------------------------------------------- */

enum { PRODUCERS = 4, PER_PRODUCER = 3000 };

typedef struct {
    ft_tui_feed *f;
    int id;
} producer_arg;

static void *producer(void *p) {
    producer_arg *a = p;
    for (int i = 0; i < PER_PRODUCER; i++) {
        json_t *ev = json_pack("{s:s, s:i, s:i}", "event", "measured", "who", a->id, "i", i);
        ft_tui_feed_listener(a->f, ev);                 /* the listener copies */
        json_object_set_new(ev, "i", json_integer(-1)); /* the producer reuses its event */
        json_decref(ev);
    }
    return NULL;
}

static void test_feed(void) {
    ft_tui_feed f;
    FT_CHECK(ft_tui_feed_init(&f), "feed made");
    pthread_t th[PRODUCERS];
    producer_arg args[PRODUCERS];
    for (int i = 0; i < PRODUCERS; i++) {
        args[i].f = &f;
        args[i].id = i;
        pthread_create(&th[i], NULL, producer, &args[i]);
    }
    int next[PRODUCERS] = {0}, total = 0, in_order = 1;
    json_t *out[64];
    while (total < PRODUCERS * PER_PRODUCER) {
        int n = ft_tui_feed_drain(&f, out, 64);
        for (int k = 0; k < n; k++) {
            int who = (int)json_integer_value(json_object_get(out[k], "who"));
            int i = (int)json_integer_value(json_object_get(out[k], "i"));
            if (who < 0 || who >= PRODUCERS || i != next[who])
                in_order = 0;
            else
                next[who]++;
            json_decref(out[k]);
        }
        total += n;
        if (!n) usleep(100);
    }
    for (int i = 0; i < PRODUCERS; i++)
        pthread_join(th[i], NULL);
    FT_CHECK(in_order, "every event once, in each producer's order, unchanged by its reuse");
    FT_CHECK(ft_tui_feed_drain(&f, out, 64) == 0 && f.dropped == 0, "nothing left, none dropped");
    /* Events left in the queue are freed with it. */
    ft_tui_feed_push_new(&f, json_pack("{s:s}", "event", "done"));
    ft_tui_feed_free(&f);
}

/* ---- the follower ------------------------------------------------------------------------ */

static char path[256];

static void append(const char *text) {
    FILE *f = fopen(path, "a");
    fputs(text, f);
    fclose(f);
}

static void overwrite(const char *text) {
    FILE *f = fopen(path, "w");
    fputs(text, f);
    fclose(f);
}

static const char *kind(json_t *ev) { return json_string_value(json_object_get(ev, "event")); }

/* Poll once; the events' kinds joined with spaces into out. Returns the count. */
static int poll_kinds(ft_tui_follow *fw, char *out, size_t n, long *bad) {
    json_t *evs[16];
    int k = ft_tui_follow_poll(fw, evs, 16, bad);
    out[0] = '\0';
    for (int i = 0; i < k; i++) {
        size_t len = strlen(out);
        const char *run = json_string_value(json_object_get(evs[i], "run"));
        snprintf(out + len, n - len, "%s%s%s%s", i ? " " : "", kind(evs[i]), run ? ":" : "",
                 run ? run : "");
        json_decref(evs[i]);
    }
    return k;
}

#define LINE(kind, run) "{\"event\":\"" kind "\",\"run\":\"" run "\",\"t\":1}\n"
/* A run_start as tune writes it, with what a log's name is checked against. */
#define START(run, op, dims, device)                                                               \
    "{\"event\":\"run_start\",\"run\":\"" run "\",\"t\":1,\"op\":\"" op "\",\"dims\":{" dims       \
    "},\"device\":\"" device "\"}\n"

static void test_follow(void) {
    snprintf(path, sizeof path, "/tmp/ft_test_follow_%d.jsonl", (int)getpid());
    unlink(path);
    ft_tui_follow *fw = ft_tui_follow_new(path);
    char got[1024];
    long bad = 0;
    FT_CHECK(poll_kinds(fw, got, sizeof got, &bad) == 0 && ft_tui_follow_waiting(fw),
             "no file yet: waiting");
    append(LINE("run_start", "a") LINE("measured", "a"));
    poll_kinds(fw, got, sizeof got, &bad);
    FT_CHECK(!strcmp(got, "run_start:a measured:a") && !ft_tui_follow_waiting(fw),
             "the file appears: %s", got);
    FT_CHECK(poll_kinds(fw, got, sizeof got, &bad) == 0, "nothing new");
    append("{\"event\":\"measured\",\"run\":");
    FT_CHECK(poll_kinds(fw, got, sizeof got, &bad) == 0 && bad == 0, "a torn last line waits");
    append("\"a\",\"t\":2}\n");
    poll_kinds(fw, got, sizeof got, &bad);
    FT_CHECK(!strcmp(got, "measured:a") && bad == 0, "completed later: %s", got);
    append("not json at all\n" LINE("rejected", "a"));
    poll_kinds(fw, got, sizeof got, &bad);
    FT_CHECK(!strcmp(got, "rejected:a") && bad == 1, "a bad line skipped and counted: %s", got);
    /* A writer killed mid-line, then another run appended to the same file. */
    append("{\"event\":\"measured\",\"run\":\"a\",\"stats\":{\"med" LINE("run_start", "b"));
    poll_kinds(fw, got, sizeof got, &bad);
    FT_CHECK(!strcmp(got, "run_start:b") && bad == 2, "the whole line after a torn one: %s", got);
    /* Truncated, then a new run written. */
    overwrite(LINE("run_start", "c"));
    poll_kinds(fw, got, sizeof got, &bad);
    FT_CHECK(!strcmp(got, "reopen run_start:c"), "truncated: read again: %s", got);
    /* Rewritten in place with more than was read: the first bytes differ. */
    overwrite(LINE("run_start", "d") LINE("measured", "d") LINE("measured", "d"));
    poll_kinds(fw, got, sizeof got, &bad);
    FT_CHECK(!strcmp(got, "reopen run_start:d measured:d measured:d"), "rewritten: %s", got);
    /* Replaced: another file renamed over the name. */
    char tmp[300];
    snprintf(tmp, sizeof tmp, "%s.new", path);
    FILE *f = fopen(tmp, "w");
    fputs(LINE("run_start", "e"), f);
    fclose(f);
    rename(tmp, path);
    poll_kinds(fw, got, sizeof got, &bad);
    FT_CHECK(!strcmp(got, "reopen run_start:e"), "replaced: %s", got);
    append(LINE("run_end", "e"));
    poll_kinds(fw, got, sizeof got, &bad);
    FT_CHECK(!strcmp(got, "run_end:e"), "the new file is followed: %s", got);
    /* Deleted: what was read stays, nothing breaks; created again: read from the start. */
    unlink(path);
    FT_CHECK(poll_kinds(fw, got, sizeof got, &bad) == 0, "deleted: nothing");
    append(LINE("run_start", "f"));
    poll_kinds(fw, got, sizeof got, &bad);
    FT_CHECK(!strcmp(got, "reopen run_start:f"), "created again: %s", got);
    ft_tui_follow_free(fw);

    /* More than one poll takes: the rest comes with the next ones, none lost. */
    overwrite("");
    for (int i = 0; i < 40; i++)
        append(LINE("measured", "g"));
    fw = ft_tui_follow_new(path);
    int total = 0, k;
    while ((k = poll_kinds(fw, got, sizeof got, &bad)) > 0) {
        FT_CHECK(k <= 16, "at most max per poll");
        total += k;
    }
    FT_CHECK(total == 40, "every event: %d", total);
    ft_tui_follow_free(fw);
    unlink(path);
}

static void write_file(const char *name, const char *text) {
    FILE *f = fopen(name, "w");
    fputs(text, f);
    fclose(f);
}

/* A line longer than an event may be is one bad line however many reads it spans (17.5 MiB: two
 * chunks dropped; 40 MiB: three), and an event whole at its end, after the junk, is recovered. */
static void test_follow_overlong(void) {
    snprintf(path, sizeof path, "/tmp/ft_test_overlong_%d.jsonl", (int)getpid());
    overwrite(LINE("run_start", "a"));
    ft_tui_follow *fw = ft_tui_follow_new(path);
    char got[1024], all[1024] = "";
    long bad = 0;
    poll_kinds(fw, got, sizeof got, &bad);
    const size_t mib = (size_t)1 << 20, sizes[] = {17 * mib + mib / 2, 40 * mib};
    char *junk = malloc(40 * mib + 1);
    FT_CHECK(junk != NULL, "memory for the junk");
    if (!junk) return;
    for (int i = 0; i < 2; i++) {
        memset(junk, 'x', sizes[i]);
        junk[sizes[i]] = '\0';
        append(junk);
        append(i ? LINE("measured", "c") : "\n" LINE("measured", "b"));
        all[0] = '\0';
        for (int k = 0; k < 200 && !strstr(all, i ? "measured:c" : "measured:b"); k++) {
            poll_kinds(fw, got, sizeof got, &bad);
            snprintf(all + strlen(all), sizeof all - strlen(all), "%s", got);
        }
        FT_CHECK(!strcmp(all, i ? "measured:c" : "measured:b") && bad == i + 1,
                 "%.1f MiB in one line: one bad line (%ld in all), then the event: %s",
                 (double)sizes[i] / (double)mib, bad, all);
    }
    free(junk);
    ft_tui_follow_free(fw);
    unlink(path);
}

/* A named pipe (mkfifo, or a shell's <(...)): opened at once with no writer yet (not blocking
 * the dashboard), read as it comes (it has no offsets), a torn line completed by the next
 * write, and followed on when a writer goes and another comes. */
static void test_follow_fifo(void) {
    char fifo[256];
    snprintf(fifo, sizeof fifo, "/tmp/ft_test_fifo_%d", (int)getpid());
    unlink(fifo);
    FT_CHECK(mkfifo(fifo, 0600) == 0, "mkfifo");
    alarm(20); /* a follower blocked in open() ends the test instead of hanging it */
    ft_tui_follow *fw = ft_tui_follow_new(fifo);
    char got[1024];
    long bad = 0;
    FT_CHECK(poll_kinds(fw, got, sizeof got, &bad) == 0 && !ft_tui_follow_waiting(fw),
             "no writer yet: open, nothing read");
    int w = open(fifo, O_WRONLY | O_NONBLOCK);
    FT_CHECK(w >= 0, "a writer opens the pipe the follower reads");
    static const char first[] = LINE("run_start", "a") "{\"event\":\"measured\",";
    FT_CHECK(write(w, first, sizeof first - 1) == (ssize_t)sizeof first - 1, "written");
    poll_kinds(fw, got, sizeof got, &bad);
    FT_CHECK(!strcmp(got, "run_start:a") && bad == 0, "read from the pipe: %s", got);
    static const char rest[] = "\"run\":\"a\",\"t\":2}\n";
    FT_CHECK(write(w, rest, sizeof rest - 1) == (ssize_t)sizeof rest - 1, "written");
    poll_kinds(fw, got, sizeof got, &bad);
    FT_CHECK(!strcmp(got, "measured:a") && bad == 0, "the torn line completed: %s", got);
    close(w);
    FT_CHECK(poll_kinds(fw, got, sizeof got, &bad) == 0, "the writer gone: nothing, no reopen");
    w = open(fifo, O_WRONLY | O_NONBLOCK);
    static const char end[] = LINE("run_end", "a");
    FT_CHECK(w >= 0 && write(w, end, sizeof end - 1) == (ssize_t)sizeof end - 1, "written");
    poll_kinds(fw, got, sizeof got, &bad);
    FT_CHECK(!strcmp(got, "run_end:a") && bad == 0, "another writer: %s", got);
    alarm(0);
    close(w);
    ft_tui_follow_free(fw);
    unlink(fifo);
}

/* `tune all --log L` writes L.OP (and L.OP.SIZEv with --sweep): `top L` follows all of them,
 * each as it appears, and nothing else (locks, temporary files, other logs). */
static void test_follow_family(void) {
    char base[256], a[300], b[300], c[300], lock[300], tmp[300], other[300];
    snprintf(base, sizeof base, "/tmp/ft_test_family_%d.jsonl", (int)getpid());
    snprintf(a, sizeof a, "%s.fusion.dflare", base);
    snprintf(b, sizeof b, "%s.loss.M512", base);
    snprintf(c, sizeof c, "%s.loss", base);
    snprintf(lock, sizeof lock, "%s.fusion.dflare.lock", base);
    snprintf(tmp, sizeof tmp, "%s.loss.tmp.Ab12Cd", base);
    snprintf(other, sizeof other, "/tmp/ft_test_family_%d.jsonlx.loss", (int)getpid());
    write_file(a, START("a", "fusion.dflare", "\"N\":48", "cpu") LINE("measured", "a"));
    write_file(b, START("b", "loss", "\"N\":48,\"M\":512", "cpu"));
    write_file(lock, "");
    write_file(tmp, START("t", "loss", "", "cpu"));
    write_file(other, START("o", "loss", "", "cpu"));
    char found[8][FT_EVENTLOG_PATH_MAX];
    int n = ft_eventlog_family(base, found, 8);
    FT_CHECK(n == 2 && !strcmp(found[0], a) && !strcmp(found[1], b),
             "the family: %d logs (%s, ...)", n, n ? found[0] : "");
    ft_tui_follow *fw = ft_tui_follow_new(base);
    char got[1024] = "", all[4096] = "";
    long bad = 0;
    for (int k = 0; k < 4; k++) {
        poll_kinds(fw, got, sizeof got, &bad);
        if (*got) snprintf(all + strlen(all), sizeof all - strlen(all), "%s ", got);
    }
    FT_CHECK(strstr(all, "run_start:a") && strstr(all, "measured:a") && strstr(all, "run_start:b") &&
                 !strstr(all, ":t") && !strstr(all, ":o"),
             "both ops' logs followed, not the lock, temp or other file: %s", all);
    FT_CHECK(ft_tui_follow_count(fw) == 2 && !ft_tui_follow_waiting(fw), "two logs open");
    /* The next op's log appears while top runs (found at the next scan, twice a second). */
    write_file(c, START("c", "loss", "", "cpu") LINE("run_end", "c"));
    all[0] = '\0';
    for (int k = 0; k < 40 && !strstr(all, "run_end:c"); k++) {
        poll_kinds(fw, got, sizeof got, &bad);
        if (*got) snprintf(all + strlen(all), sizeof all - strlen(all), "%s ", got);
        usleep(50000);
    }
    FT_CHECK(strstr(all, "run_start:c run_end:c") != NULL, "a log that appears later: %s", all);
    FT_CHECK(ft_tui_follow_count(fw) == 3, "three logs open");
    /* One log truncated and another run written into it: after the reopen, every log of the
     * family is read again from the start (the dashboard drops what it read before), the
     * truncated one holding only its new run. */
    write_file(a, START("z", "fusion.dflare", "", "cpu"));
    all[0] = '\0';
    for (int k = 0; k < 8; k++) {
        poll_kinds(fw, got, sizeof got, &bad);
        if (*got) snprintf(all + strlen(all), sizeof all - strlen(all), "%s ", got);
    }
    FT_CHECK(!strncmp(all, "reopen ", 7) && strstr(all, "run_start:z") &&
                 strstr(all, "run_start:b") && strstr(all, "run_start:c run_end:c") &&
                 !strstr(all, ":a") && !strstr(all + 7, "reopen"),
             "one reopen, then every log from the start: %s", all);
    ft_tui_follow_free(fw);
    /* With no LOG itself and none of its family yet, top waits. */
    char none[300];
    snprintf(none, sizeof none, "%s.none", base);
    fw = ft_tui_follow_new(none);
    FT_CHECK(poll_kinds(fw, got, sizeof got, &bad) == 0 && ft_tui_follow_waiting(fw), "waiting");
    ft_tui_follow_free(fw);
    unlink(a), unlink(b), unlink(c), unlink(lock), unlink(tmp), unlink(other);
}

/* A log rotated (`mv LOG LOG.1`, a new LOG) is not of LOG's family: `top LOG` drops its run for
 * the new file's. The family is the logs named as `tune all` and sweeps name them after their
 * run_start (its op, a size of the sweep at its value, its device's tag), not every LOG.*. */
static void test_follow_rotated(void) {
    char base[256], old[300];
    snprintf(base, sizeof base, "/tmp/ft_test_rotate_%d.jsonl", (int)getpid());
    snprintf(old, sizeof old, "%s.1", base);
    write_file(base, START("a", "fusion.dflare", "", "cpu") LINE("measured", "a"));
    ft_tui_follow *fw = ft_tui_follow_new(base);
    char got[1024], all[4096] = "";
    long bad = 0;
    poll_kinds(fw, got, sizeof got, &bad);
    FT_CHECK(!strcmp(got, "run_start:a measured:a"), "the first log: %s", got);
    rename(base, old);
    write_file(base, START("b", "fusion.dflare", "", "cpu"));
    for (int k = 0; k < 14; k++) { /* past two scans of the folder */
        poll_kinds(fw, got, sizeof got, &bad);
        if (*got) snprintf(all + strlen(all), sizeof all - strlen(all), "%s ", got);
        usleep(100000);
    }
    FT_CHECK(!strcmp(all, "reopen run_start:b ") && ft_tui_follow_count(fw) == 1,
             "rotated: the new log alone (%d open): %s", ft_tui_follow_count(fw), all);
    ft_tui_follow_free(fw);
    /* Names: what `tune all`, a sweep and a run split by device kind write, and lookalikes. */
    char tag[16], name[8][400];
    snprintf(tag, sizeof tag, "%08x", (unsigned)ft_eventlog_device_tag("gpu: X"));
    static const char *const suffix[8] = {
        "old",        "loss.1",    "fusion.dflare.N4",  "loss.12345678",
        "loss.M512.", "loss.M512", "attention.decode.", "loss.M"};
    static const char *const start[8] = {
        START("o", "fusion.dflare", "", "cpu"),        START("r", "loss", "", "cpu"),
        START("n", "fusion.dflare", "\"N\":8", "cpu"), START("h", "loss", "", "gpu: X"),
        START("s", "loss", "\"M\":512", "gpu: X"),     START("m", "loss", "\"M\":512", "cpu"),
        START("d", "attention.decode", "", "gpu: X"),  START("e", "loss", "\"M\":512", "cpu")};
    for (int i = 0; i < 8; i++) {
        snprintf(name[i], sizeof name[i], "%s.%s%s", base, suffix[i],
                 suffix[i][strlen(suffix[i]) - 1] == '.' ? tag : "");
        write_file(name[i], start[i]);
    }
    char found[8][FT_EVENTLOG_PATH_MAX];
    int n = ft_eventlog_family(base, found, 8);
    FT_CHECK(n == 4 && !strcmp(found[0], base) && !strcmp(found[1], name[6]) &&
                 !strcmp(found[2], name[5]) && !strcmp(found[3], name[4]),
             "LOG, LOG.attention.decode.TAG, LOG.loss.M512, LOG.loss.M512.TAG: %d (%s, %s, ...)", n,
             n > 1 ? found[1] : "", n > 2 ? found[2] : "");
    for (int i = 0; i < 8; i++)
        unlink(name[i]);
    unlink(base), unlink(old);
}

/* A family of more logs than any fixed table would hold (a sweep of many sizes over several
 * ops): every one is listed and followed. */
static void test_follow_large_family(void) {
    enum { N = 150 };
    char base[256], logp[N][320], start[256];
    snprintf(base, sizeof base, "/tmp/ft_test_bigfam_%d.jsonl", (int)getpid());
    for (int i = 0; i < N; i++) {
        snprintf(logp[i], sizeof logp[i], "%s.loss.M%d", base, 100 + i);
        snprintf(start, sizeof start, START("x", "loss", "\"M\":%d", "cpu"), 100 + i);
        write_file(logp[i], start);
    }
    int n = 0;
    char(*all)[FT_EVENTLOG_PATH_MAX] = ft_eventlog_family_all(base, &n);
    FT_CHECK(n == N && all && !strcmp(all[0], logp[0]) && !strcmp(all[N - 1], logp[N - 1]),
             "every log listed, in order: %d of %d", n, N);
    free(all);
    ft_tui_follow *fw = ft_tui_follow_new(base);
    char got[1024];
    long bad = 0;
    for (int k = 0; k < 4 * N && ft_tui_follow_count(fw) < N; k++) /* a poll reads a few */
        poll_kinds(fw, got, sizeof got, &bad);
    FT_CHECK(ft_tui_follow_count(fw) == N, "every log followed: %d of %d", ft_tui_follow_count(fw),
             N);
    ft_tui_follow_free(fw);
    for (int i = 0; i < N; i++)
        unlink(logp[i]);
    all = ft_eventlog_family_all(base, &n);
    FT_CHECK(!all && n == 0, "none left: %d", n);
}

/* Poll for up to `seconds` (the follower looks for gone writers once a second; a busy machine
 * may take much longer) until `want` is among the events; everything polled joined in all. */
static int poll_until(ft_tui_follow *fw, const char *want, double seconds, char *all, size_t n) {
    char got[1024];
    all[0] = '\0';
    int64_t end = ft_now_ns() + (int64_t)(seconds * 1e9);
    while (ft_now_ns() < end) {
        if (poll_kinds(fw, got, sizeof got, NULL) > 0)
            snprintf(all + strlen(all), n - strlen(all), "%s%s", all[0] ? " " : "", got);
        if (want && strstr(all, want)) return 1;
        usleep(20000);
    }
    return 0;
}

/* While a process holds the log's lock its run is not said to be gone; once it is killed (the
 * kernel lets the lock go), a "gone" event names the run of the log's latest event, once; an
 * event written after that arms it again. A log without a lock file says nothing, and gets no
 * lock file. */
static void test_follow_writer_gone(void) {
    if (access("/proc/locks", R_OK) != 0) {
        printf("    skipped: /proc/locks cannot be read here\n");
        return;
    }
    char lock[300], all[4096];
    snprintf(path, sizeof path, "/tmp/ft_test_gone_%d.jsonl", (int)getpid());
    snprintf(lock, sizeof lock, "%s.lock", path);
    overwrite(LINE("run_start", "a") LINE("measured", "a"));
    ft_tui_follow *fw = ft_tui_follow_new(path);
    poll_until(fw, NULL, 2.5, all, sizeof all);
    FT_CHECK(!strcmp(all, "run_start:a measured:a"), "no lock file: nothing said: %s", all);
    FT_CHECK(access(lock, F_OK) != 0, "no lock file made");
    pid_t pid = ft_test_hold_lock(path);
    FT_CHECK(pid > 0, "the writer took the lock");
    if (pid <= 0) return;
    append(LINE("measured", "a"));
    poll_until(fw, NULL, 2.5, all, sizeof all);
    FT_CHECK(!strcmp(all, "measured:a"), "the writer holds the lock: not gone: %s", all);
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    FT_CHECK(poll_until(fw, "gone:a", 60, all, sizeof all) && !strcmp(all, "gone:a"),
             "the writer killed: gone: %s", all);
    poll_until(fw, NULL, 2.5, all, sizeof all);
    FT_CHECK(!all[0], "said once: %s", all);
    /* Another writer appends (a resumed run) and ends without its lock: said again. */
    append(LINE("run_start", "b"));
    FT_CHECK(poll_until(fw, "gone:b", 60, all, sizeof all) && !strcmp(all, "run_start:b gone:b"),
             "a new event, then gone again: %s", all);
    ft_tui_follow_free(fw);
    unlink(lock);
    unlink(path);
}

int main(void) {
    FT_RUN(test_feed);
    FT_RUN(test_follow);
    FT_RUN(test_follow_overlong);
    FT_RUN(test_follow_fifo);
    FT_RUN(test_follow_family);
    FT_RUN(test_follow_rotated);
    FT_RUN(test_follow_large_family);
    FT_RUN(test_follow_writer_gone);
    return ft_test_finish();
}
