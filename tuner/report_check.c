/* report_check.c: a report document (docs/report.md) checked against its schema before anything
 * is drawn, and read from a file (tuner/report.h). Every message names the first bad path
 * ("charts[2].series[0].points[3]: expected [x, y]"); a document that passes has every value the
 * renderer reads, of the type it reads, every number finite and every chart drawable.
 */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "tuner/report.h"
#include "tuner/report_read.h"
#include "tuner/report_svg.h"

static ft_status bad(ft_err *err, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
static ft_status bad(ft_err *err, const char *fmt, ...) {
    char msg[FT_ERR_MSG_LEN];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return ft_err_set(err, FT_EFORMAT, "%s", msg);
}

static const char *json_kind(const json_t *v) {
    switch (json_typeof(v)) {
    case JSON_OBJECT: return "an object";
    case JSON_ARRAY: return "an array";
    case JSON_STRING: return "a string";
    case JSON_INTEGER:
    case JSON_REAL: return "a number";
    case JSON_TRUE:
    case JSON_FALSE: return "a boolean";
    default: return "null";
    }
}

/* obj[key] of the JSON type `type` (JSON_INTEGER stands for any number); absent is fine unless
 * required. *out gets the value (NULL when absent). */
static ft_status want(const json_t *obj, const char *key, json_type type, int required,
                      const char *at, const json_t **out, ft_err *err) {
    const json_t *v = json_object_get(obj, key);
    if (out) *out = v;
    ft_report_path p = ft_report_path_key(at, key);
    static const char *const names[] = {[JSON_OBJECT] = "an object",
                                        [JSON_ARRAY] = "an array",
                                        [JSON_STRING] = "a string",
                                        [JSON_INTEGER] = "a number"};
    if (!v) return required ? bad(err, "%s: missing (%s is required)", p.s, names[type]) : FT_OK;
    int ok = type == JSON_INTEGER ? json_is_number(v) : json_typeof(v) == type;
    if (!ok) return bad(err, "%s: expected %s, got %s", p.s, names[type], json_kind(v));
    if (type == JSON_INTEGER && !isfinite(json_number_value(v)))
        return bad(err, "%s: not a finite number", p.s);
    return FT_OK;
}

static ft_status want_number(const json_t *v, const char *at, ft_err *err) {
    if (!json_is_number(v)) return bad(err, "%s: expected a number, got %s", at, json_kind(v));
    if (!isfinite(json_number_value(v))) return bad(err, "%s: not a finite number", at);
    return FT_OK;
}

static ft_status want_strings(const json_t *obj, const char *const *keys, int required,
                              const char *at, ft_err *err) {
    ft_status s = FT_OK;
    for (int i = 0; keys[i] && !s; i++)
        s = want(obj, keys[i], JSON_STRING, required, at, NULL, err);
    return s;
}

/* A claim's optional evidence: the steps its verdict rests on, each {"step": string, "clean":
 * boolean, "loaded": optional boolean, "samples_discarded": number, "samples_taken": number}
 * (report_verdict.c). */
static ft_status check_evidence(const json_t *c, const char *at, ft_err *err) {
    const json_t *ev;
    ft_status s = want(c, "evidence", JSON_ARRAY, 0, at, &ev, err);
    ft_report_path base = ft_report_path_key(at, "evidence");
    for (size_t i = 0; !s && i < json_array_size(ev); i++) {
        const json_t *e = json_array_get(ev, i);
        ft_report_path p = ft_report_path_index(base.s, i);
        if (!json_is_object(e))
            return bad(err, "%s: expected an object, got %s", p.s, json_kind(e));
        const json_t *clean = json_object_get(e, "clean");
        if (!json_is_boolean(clean))
            return bad(err, "%s.clean: expected a boolean, got %s", p.s,
                       clean ? json_kind(clean) : "nothing");
        const json_t *loaded = json_object_get(e, "loaded");
        if (loaded && !json_is_boolean(loaded))
            return bad(err, "%s.loaded: expected a boolean, got %s", p.s, json_kind(loaded));
        if (!(s = want(e, "step", JSON_STRING, 1, p.s, NULL, err)) &&
            !(s = want(e, "samples_discarded", JSON_INTEGER, 0, p.s, NULL, err)))
            s = want(e, "samples_taken", JSON_INTEGER, 0, p.s, NULL, err);
    }
    return s;
}

static ft_status check_claim(const json_t *c, const char *at, ft_err *err) {
    if (!json_is_object(c)) return bad(err, "%s: expected an object, got %s", at, json_kind(c));
    static const char *const required[] = {"claim", "answer", "verdict", NULL};
    static const char *const optional[] = {"id", "source", "command", "withheld", NULL};
    ft_status s = want_strings(c, required, 1, at, err);
    if (!s) s = want_strings(c, optional, 0, at, err);
    if (!s) s = check_evidence(c, at, err);
    if (s) return s;
    const char *v = json_string_value(json_object_get(c, "verdict"));
    if (strcmp(v, "holds") && strcmp(v, "does not hold") && strcmp(v, "measured") &&
        strcmp(v, "inconclusive"))
        return bad(err,
                   "%s.verdict: expected \"holds\", \"does not hold\", \"measured\" or "
                   "\"inconclusive\", got \"%s\"",
                   at, v);
    const json_t *fig;
    if ((s = want(c, "figures", JSON_OBJECT, 0, at, &fig, err)) || !fig) return s;
    const char *k;
    const json_t *x;
    json_object_foreach((json_t *)fig, k, x) {
        ft_report_path p = ft_report_path_key(ft_report_path_key(at, "figures").s, k);
        if (json_is_object(x) || json_is_array(x))
            return bad(err, "%s: expected a number or a string, got %s", p.s, json_kind(x));
        if (json_is_number(x) && (s = want_number(x, p.s, err))) return s;
    }
    return FT_OK;
}

/* An object with a string `label` and the array `key` (*items): a bar or a series. */
static ft_status want_labelled(const json_t *o, const char *key, const char *at,
                               const json_t **items, ft_err *err) {
    if (!json_is_object(o)) return bad(err, "%s: expected an object, got %s", at, json_kind(o));
    ft_status s = want(o, "label", JSON_STRING, 1, at, NULL, err);
    return s ? s : want(o, key, JSON_ARRAY, 1, at, items, err);
}

/* One bar of a stacked chart: a label and segments of values >= 0 whose total is finite. */
static ft_status check_bar(const json_t *b, const char *at, ft_err *err) {
    const json_t *segs;
    ft_status s = want_labelled(b, "segments", at, &segs, err);
    if (s) return s;
    double total = 0;
    for (size_t j = 0; j < json_array_size(segs); j++) {
        const json_t *g = json_array_get(segs, j), *v;
        ft_report_path p = ft_report_path_index(ft_report_path_key(at, "segments").s, j);
        if (!json_is_object(g))
            return bad(err, "%s: expected an object, got %s", p.s, json_kind(g));
        if ((s = want(g, "label", JSON_STRING, 1, p.s, NULL, err))) return s;
        if ((s = want(g, "value", JSON_INTEGER, 1, p.s, &v, err))) return s;
        if (json_number_value(v) < 0)
            return bad(err, "%s.value: expected a number >= 0 (a stacked bar adds its segments)",
                       p.s);
        total += json_number_value(v);
    }
    if (!isfinite(total)) return bad(err, "%s: the total of the segments is not finite", at);
    /* Drawable: its axis and its width in pixels (the total times a chart's width over the
     * axis) stay finite. */
    if (!(total <= FT_REPORT_MAX_VALUE))
        return bad(err, "%s: the total of the segments, %g, is more than a chart draws (%g)", at,
                   total, FT_REPORT_MAX_VALUE);
    return FT_OK;
}

/* lo or hi of a series: as many numbers as points. */
static ft_status check_band(const json_t *ser, const char *key, size_t npoints, const char *at,
                            ft_err *err) {
    const json_t *a;
    ft_status s = want(ser, key, JSON_ARRAY, 0, at, &a, err);
    if (s || !a) return s;
    ft_report_path p = ft_report_path_key(at, key);
    if (json_array_size(a) != npoints)
        return bad(err, "%s: expected %zu numbers (one per point), got %zu", p.s, npoints,
                   json_array_size(a));
    for (size_t i = 0; i < npoints; i++)
        if ((s = want_number(json_array_get(a, i), ft_report_path_index(p.s, i).s, err))) return s;
    return FT_OK;
}

static ft_status check_series(const json_t *ser, const char *at, ft_err *err) {
    const json_t *pts;
    ft_status s = want_labelled(ser, "points", at, &pts, err);
    if (s) return s;
    for (size_t i = 0; i < json_array_size(pts); i++) {
        const json_t *pt = json_array_get(pts, i);
        ft_report_path p = ft_report_path_index(ft_report_path_key(at, "points").s, i);
        if (!json_is_array(pt) || json_array_size(pt) != 2 ||
            !json_is_number(json_array_get(pt, 0)) || !json_is_number(json_array_get(pt, 1)))
            return bad(err, "%s: expected [x, y]", p.s);
        for (size_t k = 0; k < 2; k++)
            if ((s = want_number(json_array_get(pt, k), p.s, err))) return s;
    }
    size_t n = json_array_size(pts);
    if ((s = check_band(ser, "lo", n, at, err))) return s;
    if ((s = check_band(ser, "hi", n, at, err))) return s;
    /* bound: which points are upper bounds (steps measured on a busy machine), one a point */
    const json_t *bound;
    if ((s = want(ser, "bound", JSON_ARRAY, 0, at, &bound, err)) || !bound) return s;
    ft_report_path p = ft_report_path_key(at, "bound");
    if (json_array_size(bound) != n)
        return bad(err, "%s: expected %zu booleans (one per point), got %zu", p.s, n,
                   json_array_size(bound));
    for (size_t i = 0; i < n; i++)
        if (!json_is_boolean(json_array_get(bound, i)))
            return bad(err, "%s: expected a boolean, got %s", ft_report_path_index(p.s, i).s,
                       json_kind(json_array_get(bound, i)));
    return FT_OK;
}

static ft_status check_chart(const json_t *c, const char *at, ft_err *err) {
    if (!json_is_object(c)) return bad(err, "%s: expected an object, got %s", at, json_kind(c));
    static const char *const required[] = {"kind", "title", NULL};
    static const char *const optional[] = {"id", "unit", "note", "x_label", "y_label", NULL};
    ft_status s = want_strings(c, required, 1, at, err);
    if (!s) s = want_strings(c, optional, 0, at, err);
    if (s) return s;
    const char *kind = json_string_value(json_object_get(c, "kind"));
    const json_t *items;
    if (strcmp(kind, "stacked") == 0) {
        if ((s = want(c, "bars", JSON_ARRAY, 1, at, &items, err))) return s;
        for (size_t i = 0; i < json_array_size(items); i++)
            if ((s = check_bar(json_array_get(items, i),
                               ft_report_path_index(ft_report_path_key(at, "bars").s, i).s, err)))
                return s;
        return FT_OK;
    }
    if (strcmp(kind, "lines") != 0)
        return bad(err, "%s.kind: expected \"stacked\" or \"lines\", got \"%s\"", at, kind);
    if ((s = want(c, "series", JSON_ARRAY, 1, at, &items, err))) return s;
    for (size_t i = 0; i < json_array_size(items); i++)
        if ((s = check_series(json_array_get(items, i),
                              ft_report_path_index(ft_report_path_key(at, "series").s, i).s, err)))
            return s;
    ft_report_extent e = ft_report_lines_extent(c);
    if (e.n && (!isfinite(e.x1 - e.x0) || !isfinite(e.y1 - e.y0) ||
                !isfinite(fmax(e.y1, 0) - fmin(e.y0, 0))))
        return bad(err, "%s: its values span a range too wide to draw (not finite)", at);
    s = ft_report_lines_drawable(c);
    if (s == FT_ENOMEM) return ft_err_set(err, s, "%s: out of memory", at);
    if (s) return bad(err, "%s: its values are too close together or to 0 to draw", at);
    return FT_OK;
}

static ft_status check_table(const json_t *t, const char *at, ft_err *err) {
    if (!json_is_object(t)) return bad(err, "%s: expected an object, got %s", at, json_kind(t));
    const json_t *cols, *rows;
    ft_status s = want(t, "title", JSON_STRING, 1, at, NULL, err);
    if (!s) s = want(t, "id", JSON_STRING, 0, at, NULL, err);
    if (!s) s = want(t, "columns", JSON_ARRAY, 1, at, &cols, err);
    if (!s) s = want(t, "rows", JSON_ARRAY, 1, at, &rows, err);
    if (s) return s;
    for (size_t i = 0; i < json_array_size(cols); i++)
        if (!json_is_string(json_array_get(cols, i)))
            return bad(err, "%s: expected a string, got %s",
                       ft_report_path_index(ft_report_path_key(at, "columns").s, i).s,
                       json_kind(json_array_get(cols, i)));
    for (size_t r = 0; r < json_array_size(rows); r++) {
        const json_t *row = json_array_get(rows, r);
        ft_report_path p = ft_report_path_index(ft_report_path_key(at, "rows").s, r);
        if (!json_is_array(row) || json_array_size(row) != json_array_size(cols))
            return bad(err, "%s: expected an array of %zu cells (one per column)", p.s,
                       json_array_size(cols));
        for (size_t k = 0; k < json_array_size(row); k++) {
            const json_t *cell = json_array_get(row, k);
            ft_report_path pc = ft_report_path_index(p.s, k);
            if (!json_is_string(cell) && !json_is_number(cell) && !json_is_null(cell))
                return bad(err, "%s: expected a string or a number, got %s", pc.s, json_kind(cell));
            if (json_is_number(cell) && (s = want_number(cell, pc.s, err))) return s;
        }
    }
    return FT_OK;
}

/* Every element of doc[key] (an array) through one check. */
static ft_status check_each(const json_t *doc, const char *key,
                            ft_status (*one)(const json_t *, const char *, ft_err *), ft_err *err) {
    const json_t *a = json_object_get(doc, key);
    for (size_t i = 0; i < json_array_size(a); i++) {
        ft_status s = one(json_array_get(a, i), ft_report_path_index(key, i).s, err);
        if (s) return s;
    }
    return FT_OK;
}

/* The optional `contention`: numbers of steps and samples (report_verdict.c). */
static ft_status check_contention(const json_t *doc, ft_err *err) {
    const json_t *ct;
    ft_status s = want(doc, "contention", JSON_OBJECT, 0, "", &ct, err);
    static const char *const keys[] = {"steps", "unclean_steps", "loaded_steps",
                                       "samples_discarded", "samples_taken"};
    for (size_t i = 0; !s && ct && i < sizeof keys / sizeof keys[0]; i++)
        s = want(ct, keys[i], JSON_INTEGER, 0, "contention", NULL, err);
    return s;
}

static ft_status check_top(const json_t *doc, ft_err *err) {
    if (!json_is_object(doc))
        return bad(err, "the document: expected a JSON object, got %s", json_kind(doc));
    const json_t *fmt;
    ft_status s = want(doc, "format", JSON_STRING, 1, "", &fmt, err);
    if (s) return s;
    if (strcmp(json_string_value(fmt), FT_REPORT_FORMAT) != 0)
        return bad(err, "format: expected \"%s\", got \"%s\"", FT_REPORT_FORMAT,
                   json_string_value(fmt));
    static const char *const required[] = {"title", "date", NULL};
    static const char *const optional[] = {"command", "backend", "device", "clock", NULL};
    if ((s = want_strings(doc, required, 1, "", err))) return s;
    static const char *const arrays[] = {"claims", "charts", "tables"};
    for (int i = 0; i < 3; i++)
        if ((s = want(doc, arrays[i], JSON_ARRAY, 1, "", NULL, err))) return s;
    if ((s = want_strings(doc, optional, 0, "", err))) return s;
    if ((s = want(doc, "machine", JSON_OBJECT, 0, "", NULL, err))) return s;
    if ((s = check_contention(doc, err))) return s;
    const json_t *models;
    if ((s = want(doc, "models", JSON_ARRAY, 0, "", &models, err))) return s;
    for (size_t i = 0; i < json_array_size(models); i++)
        if (!json_is_string(json_array_get(models, i)))
            return bad(err, "models[%zu]: expected a string, got %s", i,
                       json_kind(json_array_get(models, i)));
    return FT_OK;
}

ft_status ft_report_check(const json_t *doc, ft_err *err) {
    if (!doc) return bad(err, "the document: missing");
    ft_status s = check_top(doc, err);
    if (!s) s = check_each(doc, "claims", check_claim, err);
    if (!s) s = check_each(doc, "charts", check_chart, err);
    if (!s) s = check_each(doc, "tables", check_table, err);
    return s;
}

ft_status ft_report_load(const char *path, json_t **out, ft_err *err) {
    *out = NULL;
    struct stat st;
    if (stat(path, &st) != 0)
        return ft_err_set(err, FT_EIO, "%s: cannot read: %s", path, strerror(errno));
    if (S_ISDIR(st.st_mode))
        return ft_err_set(err, FT_EIO, "%s: is a directory, not a report document", path);
    json_error_t je;
    json_t *doc = json_load_file(path, JSON_REJECT_DUPLICATES, &je);
    if (!doc)
        return ft_err_set(err, FT_EFORMAT, "%s:%d:%d: not a report document: %s", path, je.line,
                          je.column, je.text);
    ft_status s = ft_report_check(doc, err);
    if (s) {
        json_decref(doc);
        return ft_err_wrap(err, "%s", path);
    }
    *out = doc;
    return FT_OK;
}
