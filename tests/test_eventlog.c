/* test_eventlog.c: the event log writes whole lines, reads them back in order, skips a torn
 * last line (what kill -9 mid-write leaves) and reports a damaged line in the middle; a line
 * rendered ahead and registered as an epitaph (core/epitaph.h) is what a process ending in a
 * signal handler leaves, and a reader takes it as any event; the trace export puts a
 * candidate's device kernels (the `kernels` field of `measured`) on a GPU track. */
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/epitaph.h"
#include "ft_test.h"
#include "traces/eventlog.h"
#include "traces/trace.h"

static char path[64];

static void listener(void *ctx, const json_t *ev) {
    int *n = ctx;
    if (json_is_string(json_object_get(ev, "run"))) (*n)++;
}

static void test_write_read(void) {
    unlink(path);
    ft_eventlog *log;
    ft_err err = {0};
    FT_CHECK(ft_eventlog_open(path, "r1", &log, &err) == FT_OK, "%s", err.msg);
    int heard = 0;
    ft_eventlog_set_listener(log, listener, &heard);
    for (int i = 0; i < 5; i++)
        FT_CHECK(ft_eventlog_write(log, json_pack("{s:s, s:i}", "event", "measured", "i", i), &err) ==
                     FT_OK,
                 "%s", err.msg);
    ft_eventlog_close(log);
    FT_CHECK(heard == 5, "the listener saw every event stamped with the run id: %d", heard);
    /* Appending: a second run in the same file. */
    FT_CHECK(ft_eventlog_open(path, "r2", &log, &err) == FT_OK, "%s", err.msg);
    ft_eventlog_write(log, json_pack("{s:s}", "event", "run_start"), &err);
    ft_eventlog_close(log);
    json_t *evs;
    int torn;
    FT_CHECK(ft_eventlog_read(path, &evs, &torn, &err) == FT_OK, "%s", err.msg);
    FT_CHECK(json_array_size(evs) == 6 && !torn, "6 events, none torn");
    for (int i = 0; i < 5; i++) {
        json_t *ev = json_array_get(evs, (size_t)i);
        FT_CHECK(json_integer_value(json_object_get(ev, "i")) == i, "order");
        FT_CHECK(!strcmp(json_string_value(json_object_get(ev, "run")), "r1"), "run id");
        FT_CHECK(json_real_value(json_object_get(ev, "t")) > 1.6e9, "wall-clock stamp");
    }
    FT_CHECK(!strcmp(json_string_value(json_object_get(json_array_get(evs, 5), "run")), "r2"),
             "second run appended");
    json_decref(evs);
}

static void test_torn_and_damaged(void) {
    FILE *f = fopen(path, "a");
    fputs("{\"event\": \"measured\", \"config\": {\"tile\"", f); /* the process died here */
    fclose(f);
    json_t *evs;
    int torn;
    ft_err err = {0};
    FT_CHECK(ft_eventlog_read(path, &evs, &torn, &err) == FT_OK, "%s", err.msg);
    FT_CHECK(torn == 1 && json_array_size(evs) == 6, "torn last line skipped");
    json_decref(evs);
    /* The same damage followed by more lines is not a crash's trace: report it. */
    f = fopen(path, "a");
    fputs("\n{\"event\": \"run_end\"}\n", f);
    fclose(f);
    FT_CHECK(ft_eventlog_read(path, &evs, &torn, &err) == FT_EFORMAT, "damaged middle line");
    FT_CHECK(strstr(err.msg, ":7:") != NULL, "message names the line: %s", err.msg);
    FT_CHECK(ft_eventlog_read("/nonexistent/log", &evs, &torn, &err) == FT_EIO, "missing file");
}

/* What is no log is refused before it is read, a line past the cap and a read error are errors
 * (not the end of the log). */
static void test_refused(void) {
    json_t *evs = NULL;
    int torn;
    ft_err err = {0};
    FT_CHECK(ft_eventlog_read("/dev/zero", &evs, &torn, &err) == FT_EIO &&
                 strstr(err.msg, "not a regular file"),
             "/dev/zero: %s", err.msg);
    FT_CHECK(ft_eventlog_read("/tmp", &evs, &torn, &err) == FT_EIO &&
                 strstr(err.msg, "is a directory"),
             "a directory: %s", err.msg);
    FT_CHECK(ft_eventlog_read("/proc/self/mem", &evs, &torn, &err) == FT_EIO &&
                 strstr(err.msg, "read failed"),
             "a read error: %s", err.msg);
    char big[80];
    snprintf(big, sizeof big, "%s.long", path);
    FILE *f = fopen(big, "w");
    FT_CHECK(f && fputs("{\"event\":\"run_start\"}\n", f) >= 0, "write");
    fclose(f);
    FT_CHECK(truncate(big, FT_EVENT_LINE_MAX + 64) == 0, "truncate");
    FT_CHECK(ft_eventlog_read(big, &evs, &torn, &err) == FT_EFORMAT && strstr(err.msg, ":2:") &&
                 strstr(err.msg, "longer than"),
             "a line past the cap: %s", err.msg);
    FT_CHECK(evs == NULL, "no events on an error");
    unlink(big);
}

/* A synthetic run with one measured candidate whose last batch ran two kernels. */
static void test_trace_kernels(void) {
    const double t0 = 1.7e9;
    json_t *evs = json_pack(
        "[{s:s, s:f, s:s, s:s, s:s, s:{s:i}, s:s, s:i, s:s},"
        " {s:s, s:f, s:f, s:{s:i}, s:i, s:{s:f, s:i}, s:b,"
        "  s:[[f, f, i]],"
        "  s:[{s:s, s:f, s:f}, {s:s, s:f, s:f}]},"
        " {s:s, s:f, s:n}]",
        "event", "run_start", "t", t0, "op", "fusion.dflash", "backend", "cuda", "preset", "tiny",
        "dims", "N", 8, "strategy", "exhaustive", "space_valid", 1, "device", "gpu0",
        "event", "measured", "t", t0 + 0.5, "started", t0 + 0.1, "config", "tile", 64,
        "candidate", 0, "stats", "median_s", 1e-4, "samples", 10, "screened", 0,
        "batches", t0 + 0.2, 0.25, 10,
        "kernels", "name", "fusion_fwd", "start", t0 + 0.4, "end", t0 + 0.4001, "name",
        "gemm_bf16", "start", t0 + 0.4002, "end", t0 + 0.4005,
        "event", "run_end", "t", t0 + 1.0, "winner");
    FT_CHECK(evs != NULL, "synthetic events");
    if (!evs) return;
    json_t *tr = ft_trace_from_events(evs);
    json_t *te = json_object_get(tr, "traceEvents");
    int nkern = 0, gpu_named = 0, host_spans = 0;
    size_t i;
    json_t *e;
    json_array_foreach(te, i, e) {
        const char *ph = json_string_value(json_object_get(e, "ph"));
        const char *name = json_string_value(json_object_get(e, "name"));
        json_int_t tid = json_integer_value(json_object_get(e, "tid"));
        json_t *args = json_object_get(e, "args");
        if (!strcmp(ph, "M") && !strcmp(name, "thread_name") && tid == 2)
            gpu_named = !strcmp(json_string_value(json_object_get(args, "name")), "GPU kernels");
        if (strcmp(ph, "X")) continue;
        const char *cat = json_string_value(json_object_get(e, "cat"));
        if (strcmp(cat, "kernel")) {
            host_spans++;
            FT_CHECK(tid == 1, "%s span on the host track, tid %lld", cat, (long long)tid);
            continue;
        }
        nkern++;
        FT_CHECK(tid == 2, "kernel on the GPU track, tid %lld", (long long)tid);
        FT_CHECK(json_integer_value(json_object_get(e, "pid")) == 1, "kernel in the run's process");
        double ts = json_number_value(json_object_get(e, "ts"));
        double dur = json_number_value(json_object_get(e, "dur"));
        if (!strcmp(name, "fusion_fwd")) {
            FT_CHECK(fabs(ts - 0.4e6) < 1, "fusion_fwd at 400000 us: %f", ts);
            FT_CHECK(fabs(dur - 100) < 1, "fusion_fwd lasts 100 us: %f", dur);
        } else {
            FT_CHECK(!strcmp(name, "gemm_bf16"), "kernel name %s", name);
            FT_CHECK(fabs(ts - 400.2e3) < 1 && fabs(dur - 300) < 1, "gemm_bf16 at %f for %f", ts,
                     dur);
        }
        json_t *cfg = json_object_get(args, "config");
        FT_CHECK(json_integer_value(json_object_get(args, "candidate")) == 0 &&
                     json_integer_value(json_object_get(cfg, "tile")) == 64,
                 "kernel args name the candidate and its config");
    }
    FT_CHECK(nkern == 2, "two kernel spans, got %d", nkern);
    FT_CHECK(gpu_named, "the GPU track is named");
    FT_CHECK(host_spans == 3, "run, candidate and batch spans stay on the host track: %d",
             host_spans);
    json_decref(tr);
    /* Without kernels the trace has no GPU track at all. */
    json_object_del(json_array_get(evs, 1), "kernels");
    tr = ft_trace_from_events(evs);
    int any_gpu = 0;
    json_array_foreach(json_object_get(tr, "traceEvents"), i, e)
        any_gpu |= json_integer_value(json_object_get(e, "tid")) == 2;
    FT_CHECK(!any_gpu, "no GPU track without kernels");
    json_decref(tr);
    json_decref(evs);
}

/* A candidate not measured cleanly is marked so (its median an upper bound), and a batch that
 * lies outside its candidate's span (logs of earlier versions) is left out, never drawn. */
static void test_trace_unclean(void) {
    const double t0 = 1.7e9;
    json_t *evs =
        json_pack("[{s:s, s:f, s:s, s:s, s:s, s:{s:i}, s:s, s:i},"
                  " {s:s, s:f, s:f, s:{s:i}, s:i, s:{s:f, s:i}, s:b, s:b,"
                  "  s:[[f, f, i], [f, f, i], [f, f, i], [f, f, i]]},"
                  " {s:s, s:f, s:f, s:{s:i}, s:i, s:{s:f, s:i}, s:b, s:[[f, f, i]]},"
                  " {s:s, s:f}]",
                  "event", "run_start", "t", t0, "op", "linear", "backend", "cpu", "preset", "tiny",
                  "dims", "N", 8, "strategy", "exhaustive", "space_valid", 2, "event", "measured",
                  "t", t0 + 0.5, "started", t0 + 0.1, "config", "threads", 1, "candidate", 0,
                  "stats", "median_s", 1e-4, "samples", 12, "screened", 0, "clean", 0, "batches",
                  t0 + 0.2, 0.1, 6, 4.65e-310, -4.65e-310, 2, t0 - 5.0, 0.01, 2, t0 + 0.3, 1e250, 2,
                  "event", "measured", "t", t0 + 0.9, "started", t0 + 0.6, "config", "threads", 2,
                  "candidate", 1, "stats", "median_s", 5e-5, "samples", 6, "screened", 0, "batches",
                  t0 + 0.7, 0.1, 6, "event", "run_end", "t", t0 + 1.0);
    FT_CHECK(evs != NULL, "synthetic events");
    if (!evs) return;
    json_t *tr = ft_trace_from_events(evs);
    int batches = 0, unclean = 0, clean = 0;
    size_t i;
    json_t *e;
    json_array_foreach(json_object_get(tr, "traceEvents"), i, e) {
        const char *cat = json_string_value(json_object_get(e, "cat"));
        if (!cat) continue;
        double ts = json_number_value(json_object_get(e, "ts"));
        double dur = json_number_value(json_object_get(e, "dur"));
        FT_CHECK(ts >= 0 && ts <= 1e6 && dur >= 0 && ts + dur <= 1e6 + 1,
                 "%s span at %g us for %g us, outside the run", cat, ts, dur);
        batches += !strcmp(cat, "samples");
        if (strcmp(cat, "candidate")) continue;
        json_t *args = json_object_get(e, "args");
        const char *cname = json_string_value(json_object_get(e, "cname"));
        if (json_is_false(json_object_get(args, "clean"))) {
            unclean++;
            FT_CHECK(cname && !strcmp(cname, "bad"),
                     "the unclean candidate has a colour of its own");
        } else {
            clean += json_is_true(json_object_get(args, "clean")) && !cname;
        }
    }
    FT_CHECK(unclean == 1 && clean == 1, "one unclean and one clean candidate: %d %d", unclean,
             clean);
    FT_CHECK(batches == 2, "the two batches within their candidates, not the three outside: %d",
             batches);
    json_decref(tr);
    json_decref(evs);
}

static void on_alarm(int sig) {
    (void)sig;
    _exit(ft_epitaph_write() == 1 ? 3 : 4); /* one record that a resumed run reads */
}

/* A child registers a rejected event for the log and a line for a second file, then never ends
 * its work: SIGALRM's handler writes both (with write(2) alone) and ends it. The log then reads
 * as one run_start and that event; a cleared registration writes nothing. */
static void test_epitaph(void) {
    char other[80];
    snprintf(other, sizeof other, "%s.other", path);
    unlink(path);
    unlink(other);
    pid_t pid = fork();
    if (pid == 0) {
        ft_eventlog *log;
        ft_err err = {0};
        if (ft_eventlog_open(path, "r9", &log, &err) != FT_OK) _exit(5);
        ft_eventlog_write(log, json_pack("{s:s}", "event", "run_start"), &err);
        /* cleared before the end: never written */
        static const char stale[] = "stale\n";
        if (ft_epitaph_add(ft_eventlog_fd(log), stale, sizeof stale - 1, 1) != 0) _exit(6);
        ft_epitaph_clear();
        json_t *ev = json_pack("{s:s, s:s}", "event", "rejected", "reason", "ended");
        size_t n = 0;
        char *line = ft_eventlog_line(log, ev, &n);
        json_decref(ev);
        FILE *f = fopen(other, "w");
        static const char entry[] = "\"1,2\": {\"time\": \"RuntimeFailedConfig\"},\n";
        /* the log is read to resume; the other file only informs */
        if (!line || !f || ft_epitaph_add(ft_eventlog_fd(log), line, n, 1) != 0 ||
            ft_epitaph_add(fileno(f), entry, sizeof entry - 1, 0) != 0)
            _exit(7);
        if (ft_epitaph_add(fileno(f), entry, 1, 1) != -1) _exit(8); /* FT_EPITAPH_MAX is 2 */
        signal(SIGALRM, on_alarm);
        alarm(1);
        for (;;)
            pause();
    }
    int st = 0;
    FT_CHECK(pid > 0 && waitpid(pid, &st, 0) == pid, "the child ran");
    FT_CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 3,
             "the handler wrote both records, one of them read to resume: status %d", st);
    json_t *evs;
    int torn = 1;
    ft_err err = {0};
    FT_CHECK(ft_eventlog_read(path, &evs, &torn, &err) == FT_OK, "%s", err.msg);
    const json_t *last = json_array_get(evs, 1);
    FT_CHECK(json_array_size(evs) == 2 && !torn &&
                 !strcmp(json_string_value(json_object_get(last, "reason")), "ended") &&
                 !strcmp(json_string_value(json_object_get(last, "run")), "r9") &&
                 json_real_value(json_object_get(last, "t")) > 1.6e9,
             "the log holds run_start and the rejected event, stamped, as whole lines");
    json_decref(evs);
    FILE *f = fopen(other, "r");
    char buf[128] = "";
    size_t got = f ? fread(buf, 1, sizeof buf - 1, f) : 0;
    if (f) fclose(f);
    FT_CHECK(got > 0 && !strcmp(buf, "\"1,2\": {\"time\": \"RuntimeFailedConfig\"},\n"),
             "the second file holds its record: '%s'", buf);
    FT_CHECK(ft_epitaph_write() == 0, "nothing registered here: nothing written");
    unlink(other);
}

int main(void) {
    snprintf(path, sizeof path, "/tmp/ft_test_eventlog.%d.jsonl", (int)getpid());
    FT_RUN(test_write_read);
    FT_RUN(test_torn_and_damaged);
    FT_RUN(test_refused);
    FT_RUN(test_epitaph);
    FT_RUN(test_trace_kernels);
    FT_RUN(test_trace_unclean);
    unlink(path);
    return ft_test_finish();
}
