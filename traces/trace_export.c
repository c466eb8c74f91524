/* trace_export.c: event log -> Chrome trace events (see traces/trace.h).
 *
 * Times are microseconds since the first event of the log, so the numbers stay small and exact
 * in a double. Each run is a process (pid = 1, 2, ... in log order) named after its op, backend
 * and sizes; its spans live on thread 1 and nest by time: run > candidate > sample batch. When
 * the backend's clock recorded the device kernels of a candidate (the `kernels` field of its
 * `measured` event: CUPTI), they are spans on a second thread of the run, the GPU track (tid 2),
 * next to the sample batch that ran them.
 */
#include "traces/trace.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/json.h"
#include "core/paths.h"
#include "traces/eventlog.h"

static double num(const json_t *o, const char *k) { return json_number_value(json_object_get(o, k)); }

#define TID_HOST 1
#define TID_GPU 2

static json_t *span_on(int tid, const char *name, const char *cat, double ts, double dur, int pid,
                       json_t *args) {
    json_t *e = json_pack("{s:s, s:s, s:s, s:f, s:f, s:i, s:i}", "name", name, "cat", cat, "ph", "X",
                          "ts", ts, "dur", dur > 0 ? dur : 0, "pid", pid, "tid", tid);
    if (args) json_object_set_new(e, "args", args);
    return e;
}

static json_t *span(const char *name, const char *cat, double ts, double dur, int pid, json_t *args) {
    return span_on(TID_HOST, name, cat, ts, dur, pid, args);
}

static json_t *thread_name(int pid, int tid, const char *name) {
    return json_pack("{s:s, s:s, s:i, s:i, s:{s:s}}", "name", "thread_name", "ph", "M", "pid", pid,
                     "tid", tid, "args", "name", name);
}

static char *config_name(const json_t *cfg) {
    /* "par=blas,chunk=all,threads=2": short enough for a span label. */
    static char buf[256];
    return ft_json_pairs_text(cfg, buf, sizeof buf) ? buf : "default";
}

json_t *ft_trace_from_events(const json_t *events) {
    json_t *out = json_array();
    double t0 = 0;
    size_t i;
    json_t *ev;
    json_array_foreach(events, i, ev) {
        if (json_is_number(json_object_get(ev, "t"))) {
            t0 = num(ev, "t");
            break;
        }
    }
#define US(t) (((t) - t0) * 1e6)
    int pid = 0, gpu_named = 0;
    double run_start = 0, last_t = 0;
    char run_name[256] = "";
    json_t *run_args = NULL;
    json_array_foreach(events, i, ev) {
        const char *kind = json_string_value(json_object_get(ev, "event"));
        double t = num(ev, "t");
        last_t = t > last_t ? t : last_t;
        if (!strcmp(kind, "run_start")) {
            if (pid && run_args) /* a run without run_end (crashed): close it at its last event */
                json_array_append_new(out, span(run_name, "run", US(run_start), US(last_t) - US(run_start), pid, run_args));
            pid++;
            gpu_named = 0;
            run_start = t;
            char *dims = json_dumps(json_object_get(ev, "dims"), JSON_COMPACT);
            snprintf(run_name, sizeof run_name, "tune %s on %s %s",
                     json_string_value(json_object_get(ev, "op")),
                     json_string_value(json_object_get(ev, "backend")), dims ? dims : "");
            free(dims);
            json_array_append_new(out, json_pack("{s:s, s:s, s:i, s:i, s:{s:s}}", "name", "process_name", "ph",
                                                 "M", "pid", pid, "tid", 1, "args", "name", run_name));
            run_args = json_pack("{s:O?, s:O?, s:O?}", "strategy", json_object_get(ev, "strategy"),
                                 "space_valid", json_object_get(ev, "space_valid"), "device",
                                 json_object_get(ev, "device"));
            continue;
        }
        if (!pid) continue; /* events before any run_start carry no context */
        if (!strcmp(kind, "run_end")) {
            json_object_set(run_args, "winner", json_object_get(ev, "winner"));
            json_object_set(run_args, "speedup", json_object_get(ev, "speedup"));
            json_object_set(run_args, "interrupted", json_object_get(ev, "interrupted"));
            json_array_append_new(out, span(run_name, "run", US(run_start), US(t) - US(run_start), pid, run_args));
            run_args = NULL;
            continue;
        }
        double started = json_is_number(json_object_get(ev, "started")) ? num(ev, "started") : t;
        const json_t *cfg = json_object_get(ev, "config");
        if (!strcmp(kind, "rejected")) {
            json_t *args =
                json_pack("{s:O?, s:O?, s:O?}", "config", cfg, "reason",
                          json_object_get(ev, "reason"), "message", json_object_get(ev, "message"));
            json_t *e = span(config_name(cfg), "rejected", US(started), US(t) - US(started), pid, args);
            json_object_set_new(e, "cname", json_string("terrible"));
            json_array_append_new(out, e);
        } else if (!strcmp(kind, "measured")) {
            const json_t *st = json_object_get(ev, "stats");
            /* (O?: a field a log lacks is null, never the loss of every argument) */
            json_t *args = json_pack(
                "{s:O?, s:O?, s:O?, s:O?, s:O?, s:O?}", "config", cfg, "median_s",
                json_object_get(st, "median_s"), "iqr_s", json_object_get(st, "iqr_s"), "samples",
                json_object_get(st, "samples"), "screened", json_object_get(ev, "screened"),
                "roofline_frac", json_object_get(ev, "roofline_frac"));
            /* Not measured cleanly: its median is an upper bound (docs/measurement.md), shown in
             * a colour of its own and said in its arguments. */
            int clean = !json_is_false(json_object_get(ev, "clean"));
            json_object_set_new(args, "clean", json_boolean(clean));
            json_t *ce =
                span(config_name(cfg), "candidate", US(started), US(t) - US(started), pid, args);
            if (!clean) json_object_set_new(ce, "cname", json_string("bad"));
            json_array_append_new(out, ce);
            size_t b;
            json_t *bt;
            json_array_foreach(json_object_get(ev, "batches"), b, bt) {
                double bs = json_number_value(json_array_get(bt, 0)), bd = json_number_value(json_array_get(bt, 1));
                json_int_t n = json_integer_value(json_array_get(bt, 2));
                /* A batch outside its candidate's span (logs of earlier versions could hold
                 * them for unclean candidates) is no sample of it: left out, never drawn. */
                if (!isfinite(bs) || !isfinite(bd) || bd < 0 || bs < started - 1e-3 ||
                    bs + bd > t + 1e-3)
                    continue;
                char name[48];
                snprintf(name, sizeof name, "%lld samples", (long long)n);
                json_array_append_new(out, span(name, "samples", US(bs), bd * 1e6, pid,
                                                json_pack("{s:I}", "samples", n)));
            }
            json_t *kr;
            json_array_foreach(json_object_get(ev, "kernels"), b, kr) {
                const char *kname = json_string_value(json_object_get(kr, "name"));
                double ks = num(kr, "start"), ke = num(kr, "end");
                if (!gpu_named) {
                    json_array_append_new(out, thread_name(pid, TID_HOST, "tuner"));
                    json_array_append_new(out, thread_name(pid, TID_GPU, "GPU kernels"));
                    gpu_named = 1;
                }
                json_t *kargs = json_pack("{s:O?, s:O?}", "config", cfg, "candidate",
                                          json_object_get(ev, "candidate"));
                json_array_append_new(out, span_on(TID_GPU, kname ? kname : "?", "kernel", US(ks),
                                                   US(ke) - US(ks), pid, kargs));
            }
        } else if (!strcmp(kind, "confirm")) {
            json_array_append_new(
                out, span("confirm (interleaved)", "confirm", US(started), US(t) - US(started), pid,
                          json_pack("{s:O?}", "configs", json_object_get(ev, "configs"))));
        }
    }
    if (pid && run_args)
        json_array_append_new(out, span(run_name, "run", US(run_start), US(last_t) - US(run_start), pid, run_args));
#undef US
    return json_pack("{s:o, s:s, s:{s:f}}", "traceEvents", out, "displayTimeUnit", "ms", "otherData",
                     "epoch_start_s", t0);
}

ft_status ft_trace_export(const char *in, const char *out, int *nspans, ft_err *err) {
    *nspans = 0;
    /* A directory opens like a file and reads as no events: an empty trace would hide the
     * mistake. */
    struct stat st;
    if (stat(in, &st) == 0 && S_ISDIR(st.st_mode))
        return ft_err_set(err, FT_EIO, "%s: is a directory, not an event log", in);
    if (stat(out, &st) == 0 && S_ISDIR(st.st_mode))
        return ft_err_set(err, FT_EIO, "%s: is a directory; -o names the trace file to write", out);
    if (ft_same_file(in, out))
        return ft_err_set(err, FT_EINVAL, "%s: the output is the event log it reads", out);
    json_t *events;
    int torn;
    ft_status s;
    if (stat(in, &st) != 0) {
        /* The --log of `tune all` or a sweep: its logs (IN.OP, ...) in one trace, all of them. */
        int n;
        char(*logs)[FT_EVENTLOG_PATH_MAX] = ft_eventlog_family_all(in, &n);
        if (n < 0) return ft_err_set(err, FT_ENOMEM, "out of memory listing the logs of %s", in);
        if (n == 0)
            return ft_err_set(err, FT_EIO, "%s: no such event log, nor logs of a `tune all` or "
                                           "sweep with that --log (%s.OP)", in, in);
        events = json_array();
        for (int i = 0; i < n; i++) {
            json_t *one;
            if (ft_same_file(logs[i], out))
                s = ft_err_set(err, FT_EINVAL, "%s: the output is one of the event logs it reads",
                               out);
            else
                s = ft_eventlog_read(logs[i], &one, &torn, err);
            if (s) {
                json_decref(events);
                free(logs);
                return s;
            }
            json_array_extend(events, one);
            json_decref(one);
        }
        free(logs);
    } else if ((s = ft_eventlog_read(in, &events, &torn, err))) {
        return s;
    }
    /* A file with no run in it (a JSON document, an empty file) is no log: an empty trace would
     * hide the mistake. */
    int runs = 0;
    for (size_t i = 0; i < json_array_size(events) && !runs; i++) {
        const char *kind = json_string_value(json_object_get(json_array_get(events, i), "event"));
        runs = kind && !strcmp(kind, "run_start");
    }
    if (!runs) {
        json_decref(events);
        return ft_err_set(err, FT_EFORMAT, "%s: no run_start event: not a tuning log", in);
    }
    json_t *trace = ft_trace_from_events(events);
    json_decref(events);
    *nspans = (int)json_array_size(json_object_get(trace, "traceEvents"));
    s = ft_json_save(trace, out, JSON_COMPACT, 0, err);
    json_decref(trace);
    return s;
}
