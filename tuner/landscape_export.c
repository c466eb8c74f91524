/* landscape_export.c: an event log's measurements in the community's formats (replay.h,
 * docs/events.md "Formats"): a Kernel Tuner cache file or a FAIR T4 results file, so Kernel
 * Tuner's tools (its simulation mode, its dashboard) and the FAIR benchmark hub read what
 * flaretune measured.
 *
 * What is written is every candidate the last run (and the runs it resumed) measured or
 * rejected, whatever its strategy, in space order; a candidate measured twice (resumed, then
 * measured again because it was not measured cleanly) keeps its last event. The problem is
 * rebuilt as replay rebuilds it (ft_landscape_problem), so tune_params are the space's
 * candidate values for the recording machine, labels written as strings.
 *
 * Per candidate: time = stats.median_s in ms; the event records no samples, so times = [time];
 * its cost (t less started) splits into benchmark_time (the sampling, stats.total_s) and
 * compile_time (the rest: compilation where there is one, verification, set-up), which read
 * back by landscape_formats.c's cost rule to the recorded cost. A rejected candidate, or one
 * not measured cleanly or stopped by the watchdog, is a failure: CompilationFailedConfig when
 * its message says it did not compile, InvalidConfig when it could not run at the verification
 * shape (`unverifiable`), else RuntimeFailedConfig; T4's invalidity "compile", "constraints",
 * "correctness" (verification mismatch), "timeout" (the watchdog) or "runtime".
 */
#define _GNU_SOURCE
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/json.h"
#include "core/npy.h"
#include "core/paths.h"
#include "op/op_json.h"
#include "traces/eventlog.h"
#include "tuner/replay.h"

static const char *str_field(const json_t *o, const char *k) {
    return json_string_value(json_object_get(o, k));
}

static int is_event(const json_t *ev, const char *name) {
    const char *e = str_field(ev, "event");
    return e && strcmp(e, name) == 0;
}

int ft_export_format_parse(const char *name) {
    if (strcmp(name, "kt-cache") == 0 || strcmp(name, "kt") == 0) return FT_EXPORT_KT_CACHE;
    if (strcmp(name, "t4") == 0) return FT_EXPORT_T4;
    return -1;
}

typedef struct {
    int64_t key;
    size_t ev;
} rec;

static int cmp_rec(const void *a, const void *b) {
    const rec *x = a, *y = b;
    if (x->key != y->key) return (x->key > y->key) - (x->key < y->key);
    return (x->ev > y->ev) - (x->ev < y->ev);
}

typedef ft_export_result outcome;

static double num(const json_t *o, const char *k) {
    const json_t *v = json_object_get(o, k);
    return json_is_number(v) ? json_number_value(v) : NAN;
}

/* ev read into o. Returns 0, or -1 for a measured event that was measured cleanly yet has no
 * time either format can hold (no positive median, or one past a double in milliseconds), a log
 * replay refuses too. */
static int read_outcome(const json_t *ev, outcome *o) {
    memset(o, 0, sizeof *o);
    o->time_ms = NAN;
    o->t = num(ev, "t");
    double started = num(ev, "started");
    o->cost_ms = o->t - started >= 0 ? (o->t - started) * 1e3 : NAN;
    const json_t *stats = json_object_get(ev, "stats");
    if (is_event(ev, "rejected")) {
        const char *reason = str_field(ev, "reason"), *msg = str_field(ev, "message");
        o->failed = 1;
        if (msg && (strstr(msg, "compil") || strstr(msg, "NVRTC") || strstr(msg, "nvrtc"))) {
            o->kt_error = "CompilationFailedConfig";
            o->t4_invalidity = "compile";
        } else if (reason && (strcmp(reason, "unverifiable") == 0 || strcmp(reason, "invalid") == 0)) {
            o->kt_error = "InvalidConfig";
            o->t4_invalidity = "constraints";
        } else if (reason && strcmp(reason, "verify") == 0) {
            o->kt_error = "RuntimeFailedConfig";
            o->t4_invalidity = "correctness";
        } else {
            o->kt_error = "RuntimeFailedConfig";
            o->t4_invalidity = "runtime";
        }
    } else if (json_is_object(json_object_get(ev, "stopped"))) {
        o->failed = 1;
        o->kt_error = "RuntimeFailedConfig";
        o->t4_invalidity = "timeout";
    } else if (json_is_false(json_object_get(ev, "clean"))) {
        o->failed = 1;
        o->kt_error = "RuntimeFailedConfig";
        o->t4_invalidity = "runtime";
    } else {
        o->time_ms = num(stats, "median_s") * 1e3;
        if (!(o->time_ms > 0) || !isfinite(o->time_ms)) return -1;
    }
    double total = num(stats, "total_s") * 1e3;
    /* (a candidate measured but not cleanly, or stopped, sampled for its total_s too) */
    o->bench_ms = !(total >= 0) || !isfinite(total) ? 0 : total;
    if (!isnan(o->cost_ms) && o->bench_ms > o->cost_ms) o->bench_ms = o->cost_ms;
    return 0;
}

/* "2023-12-22 09:54:05.502007+00:00", as Kernel Tuner writes a timestamp; "" without one. */
static void timestamp(double t, char *buf, size_t n) {
    buf[0] = '\0';
    if (!(t > 0) || !isfinite(t) || t > 1e11) return;
    time_t s = (time_t)t;
    struct tm tm;
    if (!gmtime_r(&s, &tm)) return;
    char day[32];
    strftime(day, sizeof day, "%Y-%m-%d %H:%M:%S", &tm);
    long us = lround((t - (double)s) * 1e6);
    if (us > 999999) us = 999999;
    snprintf(buf, n, "%s.%06ld+00:00", day, us);
}

/* A value of parameter p as JSON: its label for a named one, else the number. */
static json_t *value_json(const ft_space *s, int p, int v) {
    const ft_param *pa = &s->params[p];
    if (pa->labels && v >= 0 && v < pa->n) return json_string(pa->labels[v]);
    return json_integer(v);
}

static json_t *cost_part(double ms) { return json_real(isnan(ms) ? 0 : ms); }

static json_t *kt_entry(const ft_space *sp, const ft_config *cfg, const outcome *o) {
    json_t *e = json_object();
    for (int p = 0; p < sp->nparams; p++)
        json_object_set_new(e, sp->params[p].name, value_json(sp, p, cfg->v[p]));
    if (o->failed) {
        json_object_set_new(e, "time", json_string(o->kt_error));
    } else {
        json_object_set_new(e, "time", json_real(o->time_ms));
        json_object_set_new(e, "times", json_pack("[f]", o->time_ms));
    }
    if (!isnan(o->cost_ms)) {
        json_object_set_new(e, "compile_time", cost_part(o->cost_ms - o->bench_ms));
        json_object_set_new(e, "verification_time", json_integer(0));
        json_object_set_new(e, "benchmark_time", cost_part(o->bench_ms));
    }
    json_object_set_new(e, "strategy_time", json_integer(0));
    json_object_set_new(e, "framework_time", json_integer(0));
    char ts[64];
    timestamp(o->t, ts, sizeof ts);
    if (ts[0]) json_object_set_new(e, "timestamp", json_string(ts));
    return e;
}

static json_t *t4_result(const ft_space *sp, const ft_config *cfg, const outcome *o) {
    char ts[64];
    timestamp(o->t, ts, sizeof ts);
    json_t *times = json_pack("{s:o, s:i, s:i, s:i}", "compilation",
                              cost_part(o->cost_ms - o->bench_ms), "framework", 0,
                              "search_algorithm", 0, "validation", 0);
    if (!o->failed) json_object_set_new(times, "runtimes", json_pack("[f]", o->time_ms));
    return json_pack("{s:s, s:o, s:o, s:s, s:i, s:[{s:s, s:o, s:s}], s:[s]}", "timestamp", ts,
                     "configuration", ft_config_to_json(sp, cfg), "times", times, "invalidity",
                     o->failed ? o->t4_invalidity : "correct", "correctness", !o->failed,
                     "measurements", "name", "time", "value",
                     o->failed ? json_string(o->kt_error) : json_real(o->time_ms), "unit", "ms",
                     "objectives", "time");
}

/* The Kernel Tuner cache key of cfg: its values joined by commas, as Python's str() writes
 * them. */
static void kt_key(const ft_space *sp, const ft_config *cfg, char *buf, size_t n) {
    size_t at = 0;
    buf[0] = '\0';
    for (int p = 0; p < sp->nparams && at < n; p++) {
        char v[64];
        ft_config_value_str(sp, p, cfg->v[p], v, sizeof v);
        int w = snprintf(buf + at, n - at, "%s%s", p ? "," : "", v);
        if (w < 0) break;
        at += (size_t)w;
    }
}

json_t *ft_eventlog_export_json(const json_t *events, const char *name, ft_export_format f,
                                ft_err *err) {
    ft_landscape l;
    size_t first;
    if (ft_landscape_problem(events, name, &l, &first, err)) {
        ft_landscape_free(&l);
        return NULL;
    }
    const ft_space *sp = &l.space;
    size_t nev = json_array_size(events), last = first;
    for (size_t i = first; i < nev; i++)
        if (is_event(json_array_get(events, i), "run_start")) last = i;
    const json_t *start = json_array_get(events, last);
    rec *recs = malloc((nev ? nev : 1) * sizeof *recs);
    if (!recs) {
        ft_landscape_free(&l);
        ft_err_set(err, FT_ENOMEM, "out of memory");
        return NULL;
    }
    /* The candidate events of the chain, each counted for the run it follows (as replay reads
     * them). */
    size_t n = 0;
    const char *run = NULL;
    const json_t *its_start = NULL; /* the run_start of the run the events follow */
    for (size_t i = first; i < nev; i++) {
        const json_t *ev = json_array_get(events, i);
        if (is_event(ev, "run_start")) {
            run = str_field(ev, "run") ? str_field(ev, "run") : "";
            its_start = ev;
            continue;
        }
        const char *evrun = str_field(ev, "run");
        if (!run || (run[0] && evrun && strcmp(evrun, run) != 0)) continue;
        if (!is_event(ev, "measured") && !is_event(ev, "rejected")) continue;
        ft_config cfg;
        char why[128];
        ft_status bad = FT_OK;
        if (!ft_event_config_whole(its_start, ev, why, sizeof why))
            bad = ft_err_set(err, FT_EFORMAT, "%s: event %zu (%s): %s", name, i + 1,
                             str_field(ev, "event"), why);
        else if ((bad = ft_config_from_json(sp, json_object_get(ev, "config"), &cfg, err)))
            ft_err_wrap(err, "%s: event %zu (%s)", name, i + 1, str_field(ev, "event"));
        if (bad) {
            ft_err_in_file(err);
            free(recs);
            ft_landscape_free(&l);
            return NULL;
        }
        int64_t k = ft_space_index_of(sp, &cfg);
        if (k >= 0) recs[n++] = (rec){k, i};
    }
    qsort(recs, n, sizeof *recs, cmp_rec);
    json_t *entries = f == FT_EXPORT_KT_CACHE ? json_object() : json_array();
    size_t kept = 0;
    for (size_t j = 0; j < n; j++) {
        if (j + 1 < n && recs[j + 1].key == recs[j].key) continue; /* a later event of it */
        ft_config cfg;
        ft_space_config_at(sp, recs[j].key, &cfg);
        outcome o;
        if (read_outcome(json_array_get(events, recs[j].ev), &o)) {
            char text[512];
            ft_config_format(sp, &cfg, text, sizeof text);
            ft_err_set(
                err, FT_EFORMAT,
                "%s: event %zu: measured %s has no positive stats.median_s a Kernel Tuner or "
                "T4 file can hold",
                name, recs[j].ev + 1, text);
            json_decref(entries);
            free(recs);
            ft_landscape_free(&l);
            return NULL;
        }
        if (f == FT_EXPORT_KT_CACHE) {
            char key[1024];
            kt_key(sp, &cfg, key, sizeof key);
            json_object_set_new(entries, key, kt_entry(sp, &cfg, &o));
        } else {
            json_array_append_new(entries, t4_result(sp, &cfg, &o));
        }
        kept++;
    }
    free(recs);
    if (kept == 0) {
        json_decref(entries);
        ft_landscape_free(&l);
        ft_err_set(err, FT_EFORMAT, "%s: its last run measured and rejected nothing", name);
        return NULL;
    }
    const json_t *dev = json_object_get(start, "device");
    char device[256] = "";
    if (json_is_string(dev)) {
        snprintf(device, sizeof device, "%s", json_string_value(dev));
    } else if (dev) {
        char *d = json_dumps(dev, JSON_COMPACT | JSON_ENCODE_ANY);
        snprintf(device, sizeof device, "%s", d ? d : "");
        free(d);
    }
    json_t *dims = json_object_get(start, "dims");
    dims = dims ? json_deep_copy(dims) : json_object();
    json_t *doc = ft_export_wrap(sp, entries, f, device, l.op->name, dims, l.backend->name);
    ft_landscape_free(&l);
    if (!doc) ft_err_set(err, FT_ENOMEM, "%s: out of memory", name);
    return doc;
}

json_t *ft_export_entry(const ft_space *sp, const ft_config *cfg, const ft_export_result *r,
                        ft_export_format f, char *key, size_t keylen) {
    if (f == FT_EXPORT_KT_CACHE) {
        kt_key(sp, cfg, key, keylen);
        return kt_entry(sp, cfg, r);
    }
    if (keylen) key[0] = 0;
    return t4_result(sp, cfg, r);
}

json_t *ft_export_wrap(const ft_space *sp, json_t *entries, ft_export_format f, const char *device,
                       const char *kernel, json_t *problem_size, const char *backend) {
    if (f == FT_EXPORT_KT_CACHE) {
        json_t *keys = json_array(), *tp = json_object();
        for (int p = 0; p < sp->nparams; p++) {
            json_t *vals = json_array();
            for (int i = 0; i < sp->params[p].n; i++)
                json_array_append_new(vals, value_json(sp, p, sp->params[p].values[i]));
            json_array_append_new(keys, json_string(sp->params[p].name));
            json_object_set_new(tp, sp->params[p].name, vals);
        }
        return json_pack("{s:s, s:s, s:o, s:o, s:o, s:s, s:o}", "device_name", device,
                         "kernel_name", kernel, "problem_size", problem_size, "tune_params_keys",
                         keys, "tune_params", tp, "objective", "time", "cache", entries);
    }
    return json_pack("{s:s, s:{s:s, s:s, s:s, s:o, s:s}, s:o}", "schema_version", "1.0.0",
                     "metadata", "timeunit", "milliseconds", "device_name", device, "kernel_name",
                     kernel, "problem_size", problem_size, "backend", backend, "results", entries);
}

/* A Kernel Tuner cache as Kernel Tuner writes one: the header's fields a line each, then an
 * entry a line, closed by "}\n}" unless `open` (its reader takes a file without that ending for
 * one still being written). */
static int write_kt_doc(FILE *f, const json_t *doc, int open) {
    const char *k;
    json_t *v;
    int bad = fputs("{\n", f) == EOF;
    json_object_foreach((json_t *)doc, k, v) {
        if (strcmp(k, "cache") == 0) continue;
        char *s = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
        bad |= !s || fprintf(f, "\"%s\": %s,\n", k, s) < 0;
        free(s);
    }
    bad |= fputs("\"cache\": {", f) == EOF;
    const json_t *cache = json_object_get(doc, "cache");
    size_t i = 0;
    json_object_foreach((json_t *)cache, k, v) {
        char *s = json_dumps(v, JSON_COMPACT);
        json_t *key = json_string(k);
        char *ks = json_dumps(key, JSON_ENCODE_ANY);
        bad |= !s || !ks || fprintf(f, "%s\n%s: %s", i++ ? "," : "", ks, s) < 0;
        free(s);
        free(ks);
        json_decref(key);
    }
    if (!open) bad |= fputs("}\n}\n", f) == EOF;
    return bad;
}

static int write_kt(FILE *f, const void *ctx) { return write_kt_doc(f, ctx, 0); }
static int write_kt_open(FILE *f, const void *ctx) { return write_kt_doc(f, ctx, 1); }

/* ---- a Kernel Tuner cache written as a run goes ------------------------------------------- */

struct ft_kt_cache {
    FILE *f;
    char *path;
    size_t n; /* entries written */
};

ft_status ft_kt_cache_begin(const char *path, json_t *doc, ft_kt_cache **out, ft_err *err) {
    *out = NULL;
    const size_t n = json_object_size(json_object_get(doc, "cache"));
    ft_status s = ft_file_write(path, write_kt_open, doc, err);
    json_decref(doc);
    if (s != FT_OK) return s;
    ft_kt_cache *c = calloc(1, sizeof *c);
    if (c) c->path = strdup(path);
    if (!c || !c->path) {
        free(c);
        return ft_err_set(err, FT_ENOMEM, "out of memory");
    }
    c->f = fopen(path, "a");
    if (!c->f) {
        free(c->path);
        free(c);
        return ft_err_set(err, FT_EIO, "%s: cannot append: %s", path, strerror(errno));
    }
    c->n = n;
    *out = c;
    return FT_OK;
}

char *ft_kt_cache_line(const ft_kt_cache *c, const char *key, json_t *entry, size_t *n) {
    json_t *k = json_string(key);
    char *ks = k ? json_dumps(k, JSON_ENCODE_ANY) : NULL, *es = json_dumps(entry, JSON_COMPACT);
    json_decref(k);
    json_decref(entry);
    char *line = NULL;
    const int w = ks && es ? asprintf(&line, "%s\n%s: %s", c->n ? "," : "", ks, es) : -1;
    free(ks);
    free(es);
    if (w < 0) return NULL;
    *n = (size_t)w;
    return line;
}

int ft_kt_cache_fd(const ft_kt_cache *c) { return c ? fileno(c->f) : -1; }

ft_status ft_kt_cache_add(ft_kt_cache *c, const char *key, json_t *entry, ft_err *err) {
    size_t n = 0;
    char *line = ft_kt_cache_line(c, key, entry, &n);
    if (!line) return ft_err_set(err, FT_ENOMEM, "out of memory");
    int bad = fwrite(line, 1, n, c->f) != n || fflush(c->f) != 0 || fsync(fileno(c->f)) != 0;
    free(line);
    if (bad) return ft_err_set(err, FT_EIO, "%s: write failed: %s", c->path, strerror(errno));
    c->n++;
    return FT_OK;
}

ft_status ft_kt_cache_end(ft_kt_cache *c, ft_err *err) {
    if (!c) return FT_OK;
    int bad = fputs("}\n}\n", c->f) == EOF || fflush(c->f) != 0 || fsync(fileno(c->f)) != 0;
    bad |= fclose(c->f) != 0;
    ft_status s = bad ? ft_err_set(err, FT_EIO, "%s: write failed: %s", c->path, strerror(errno))
                      : FT_OK;
    free(c->path);
    free(c);
    return s;
}

ft_status ft_export_write(json_t *doc, ft_export_format fmt, const char *path, ft_err *err) {
    if (strcmp(path, "-") == 0) {
        int bad = fmt == FT_EXPORT_KT_CACHE
                      ? write_kt(stdout, doc)
                      : json_dumpf(doc, stdout, JSON_INDENT(2)) != 0 || fputc('\n', stdout) == EOF;
        json_decref(doc);
        return bad || fflush(stdout) ? ft_err_set(err, FT_EIO, "standard output: write failed")
                                     : FT_OK;
    }
    ft_status s = fmt == FT_EXPORT_KT_CACHE ? ft_file_write(path, write_kt, doc, err)
                                            : ft_json_save(doc, path, JSON_INDENT(2), 1, err);
    json_decref(doc);
    return s;
}

ft_status ft_eventlog_export_events(const json_t *events, const char *name, ft_export_format fmt,
                                    const char *path, ft_err *err) {
    json_t *doc = ft_eventlog_export_json(events, name, fmt, err);
    if (!doc) return err ? err->status : FT_EFORMAT;
    return ft_export_write(doc, fmt, path, err);
}

ft_status ft_eventlog_export(const char *log, ft_export_format fmt, const char *path,
                             ft_err *err) {
    if (path && ft_same_file(log, path))
        return ft_err_set(err, FT_EINVAL, "%s: the output is the event log it reads", path);
    json_t *events;
    int torn;
    ft_status s = ft_eventlog_read(log, &events, &torn, err);
    if (s) return s;
    s = ft_eventlog_export_events(events, log, fmt, path, err);
    json_decref(events);
    return s;
}
