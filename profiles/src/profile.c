/* profile.c: the profile store (see profiles/src/profile.h and docs/profiles.md).
 *
 * Valid entries live in a sorted array and point into their own JSON objects, which the profile
 * never changes once added (merging shares them by reference). Skipped entries stay as JSON in
 * a second list and are written back after the valid ones.
 */
#include "profiles/src/profile.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/filelock.h"
#include "core/json.h"
#include "core/npy.h"
#include "core/paths.h"
#include "flaretune/version.h"
#include "kernels/registry.h"
#include "op/backend.h"
#include "op/op_json.h"

typedef struct ft_profile_lines {
    char **v;
    int n, cap;
} ft_profile_lines;

struct ft_profile {
    ft_profile_entry *entries; /* sorted; each .json holds one reference */
    int n, cap;
    json_t *skipped;           /* array of entries that did not validate, kept as they were */
    ft_profile_kernel *kernels; /* the same for the kernels of T1 files */
    int nk, capk;
    json_t *skipped_kernels;
    ft_profile_lines warnings; /* what was skipped or dropped, and why */
    ft_profile_lines notes;    /* what was read differently from how it is written */
    json_t *extra; /* top-level keys this build does not know, kept to be written back */
};

/* The top-level keys a profile's writer makes itself. */
static int own_key(const char *key) {
    return !strcmp(key, "schema_version") || !strcmp(key, "generator") || !strcmp(key, "entries") ||
           !strcmp(key, "kernels");
}

/* Keep root's keys that are not our own in p->extra, a key already there staying as it is (a
 * merge keeps the first profile's). */
static ft_status keep_extra(ft_profile *p, const json_t *root, ft_err *err) {
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)root, key, v) {
        if (own_key(key) || json_object_get(p->extra, key)) continue;
        if (json_object_set(p->extra, key, v)) return ft_err_set(err, FT_ENOMEM, "out of memory");
    }
    return FT_OK;
}

/* ---- small helpers -------------------------------------------------------------------------- */

/* Append printf-style text to buf (size n) at *k, never past the end. */
static void appendf(char *buf, size_t n, size_t *k, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 4, 5)))
#endif
    ;
static void appendf(char *buf, size_t n, size_t *k, const char *fmt, ...) {
    if (*k >= n) return;
    va_list ap;
    va_start(ap, fmt);
    int w = vsnprintf(buf + *k, n - *k, fmt, ap);
    va_end(ap);
    if (w > 0) *k += (size_t)w;
    if (*k >= n) *k = n - 1;
}

static const char *type_name(const json_t *v) {
    switch (json_typeof(v)) {
    case JSON_OBJECT: return "an object";
    case JSON_ARRAY: return "an array";
    case JSON_STRING: return "a string";
    case JSON_INTEGER: return "an integer";
    case JSON_REAL: return "a number";
    case JSON_TRUE:
    case JSON_FALSE: return "a boolean";
    case JSON_NULL: return "null";
    }
    return "?";
}

static int op_index(const ft_op *op) {
    for (int i = 0; i < ft_op_count(); i++)
        if (ft_op_at(i) == op) return i;
    return ft_op_count();
}

/* "M=512 H=1024 V=32768": the sizes in the op's order when op is known, else the object's. */
static void shape_str(const ft_op *op, const json_t *shape, char *buf, size_t n) {
    size_t k = 0;
    buf[0] = '\0';
    if (!json_is_object(shape)) return;
    if (op) {
        for (int s = 0; op->syms[s]; s++) {
            json_t *v = json_object_get(shape, op->syms[s]);
            if (json_is_integer(v))
                appendf(buf, n, &k, "%s%s=%lld", k ? " " : "", op->syms[s],
                        (long long)json_integer_value(v));
        }
        return;
    }
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)shape, key, v) {
        if (json_is_integer(v))
            appendf(buf, n, &k, "%s%s=%lld", k ? " " : "", key, (long long)json_integer_value(v));
    }
}

static const ft_backend *backend_named(const char *name) {
    for (int i = 0; i < ft_backend_count(); i++)
        if (strcmp(ft_backend_at(i)->name, name) == 0) return ft_backend_at(i);
    return NULL;
}

/* ---- validation ----------------------------------------------------------------------------- */

typedef enum {
    NEED_STRING,
    NEED_OBJECT,
    NEED_OBJECT_OR_NULL,
    NEED_ARRAY,
    NEED_NUMBER,
    NEED_NUMBER_OR_NULL,
    NEED_INTEGER,
    NEED_BOOL
} need_kind;

static const char *need_name(need_kind k) {
    switch (k) {
    case NEED_STRING: return "a string";
    case NEED_OBJECT: return "an object";
    case NEED_OBJECT_OR_NULL: return "an object or null";
    case NEED_ARRAY: return "an array";
    case NEED_NUMBER: return "a number";
    case NEED_NUMBER_OR_NULL: return "a number or null";
    case NEED_INTEGER: return "an integer";
    case NEED_BOOL: return "a boolean";
    }
    return "?";
}

static int has_kind(const json_t *v, need_kind k) {
    switch (k) {
    case NEED_STRING: return json_is_string(v);
    case NEED_OBJECT: return json_is_object(v);
    case NEED_OBJECT_OR_NULL: return json_is_object(v) || json_is_null(v);
    case NEED_ARRAY: return json_is_array(v);
    case NEED_NUMBER: return json_is_number(v);
    case NEED_NUMBER_OR_NULL: return json_is_number(v) || json_is_null(v);
    case NEED_INTEGER: return json_is_integer(v);
    case NEED_BOOL: return json_is_boolean(v);
    }
    return 0;
}

/* The field `name` of obj, of kind k; prefix names the enclosing object in messages. */
static ft_status need(const json_t *obj, const char *prefix, const char *name, need_kind k,
                      json_t **out, ft_err *err) {
    json_t *v = json_object_get(obj, name);
    if (out) *out = v;
    if (!v) return ft_err_set(err, FT_EINVAL, "field '%s%s' is missing", prefix, name);
    if (!has_kind(v, k))
        return ft_err_set(err, FT_EINVAL, "field '%s%s' should be %s, not %s", prefix, name,
                          need_name(k), type_name(v));
    return FT_OK;
}

/* A field of a list that need_fields checks. */
typedef struct {
    const char *name; /* NULL ends the list */
    need_kind kind;
} need_field;

/* Each field of the list in obj, of its kind. */
static ft_status need_fields(const json_t *obj, const need_field *f, ft_err *err) {
    for (ft_status s; f->name; f++)
        if ((s = need(obj, "", f->name, f->kind, NULL, err))) return s;
    return FT_OK;
}

/* A stats object as ft_stats_to_json writes it. The winner's median must be a positive time;
 * the default's may be null (not measured). */
static ft_status check_stats(const json_t *st, const char *prefix, int median_required,
                             ft_err *err) {
    static const char *const times[] = {"q1_s",   "q3_s",    "iqr_s",  "min_s",   "max_s",
                                        "mean_s", "stdev_s", "ci_rel", "total_s", NULL};
    json_t *m;
    ft_status s =
        need(st, prefix, "median_s", median_required ? NEED_NUMBER : NEED_NUMBER_OR_NULL, &m, err);
    if (s) return s;
    if (json_is_number(m) && !(json_number_value(m) > 0 && isfinite(json_number_value(m))))
        return ft_err_set(err, FT_EINVAL, "field '%smedian_s' should be a positive time, not %g",
                          prefix, json_number_value(m));
    for (int i = 0; times[i]; i++)
        if ((s = need(st, prefix, times[i], NEED_NUMBER_OR_NULL, NULL, err))) return s;
    if ((s = need(st, prefix, "samples", NEED_INTEGER, NULL, err)) ||
        (s = need(st, prefix, "batch", NEED_INTEGER, NULL, err)) ||
        (s = need(st, prefix, "converged", NEED_BOOL, NULL, err)))
        return s;
    return FT_OK;
}

/* A configuration against the backend's space, when this build has the backend and it
 * implements the op; otherwise (a backend built elsewhere) only its form is checked. Thread
 * counts are machine-dependent candidates, so any positive count is accepted: a profile tuned
 * on a larger machine stays readable here. */
/* Every value of a configuration is a label or an integer. */
static ft_status check_config_values(const json_t *cfg, const char *field, ft_err *err) {
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)cfg, key, v) {
        if (!json_is_string(v) && !json_is_integer(v))
            return ft_err_set(err, FT_EINVAL, "%s: value of '%s' should be a label or an integer",
                              field, key);
    }
    return FT_OK;
}

/* cfg read against s with its thread counts relaxed: any positive count is accepted (the
 * candidates are this machine's). */
static ft_status config_relaxed(const ft_space *s, const json_t *cfg, ft_config *out, ft_err *err) {
    if (s->nparams > FT_MAX_PARAMS)
        return ft_err_set(err, FT_EINTERNAL, "space has too many parameters");
    ft_param params[FT_MAX_PARAMS];
    if (s->nparams) memcpy(params, s->params, (size_t)s->nparams * sizeof params[0]);
    ft_space relaxed = *s;
    relaxed.params = params;
    for (int i = 0; i < s->nparams; i++) {
        ft_param *p = &params[i];
        json_t *t = json_object_get(cfg, p->name);
        if (!(p->flags & FT_PARAM_THREADS) || !json_is_integer(t)) continue;
        json_int_t want = json_integer_value(t);
        if (want > INT_MAX)
            return ft_err_set(err, FT_EINVAL,
                              "config: %s=%lld is past any thread count (at most %d)", p->name,
                              (long long)want, INT_MAX);
        if (want < 1) continue;
        int found = 0;
        for (int k = 0; k < p->n; k++)
            found |= p->values[k] == (int)want;
        if (!found) p->values[p->n < FT_MAX_VALUES ? p->n++ : p->n - 1] = (int)want;
    }
    return ft_config_from_json(&relaxed, cfg, out, err);
}

ft_status ft_profile_config(const ft_space *s, const json_t *config, ft_config *cfg, char *note,
                            size_t n, ft_err *err) {
    if (n) note[0] = '\0';
    ft_status st = config_relaxed(s, config, cfg, err);
    if (st) return st;
    size_t k = 0;
    for (int i = 0; i < s->nparams; i++) {
        const ft_param *p = &s->params[i];
        if (!(p->flags & FT_PARAM_THREADS) || p->n < 1) continue;
        int most = p->values[p->n - 1]; /* the CPUs this process may use (ft_space_resolve) */
        if (cfg->v[i] <= most) continue;
        if (k < n)
            k += (size_t)snprintf(
                note + k, n - k, "%sthe profile's %s=%d is more than the %d CPUs here: run with %d",
                k ? "; " : "", p->name, cfg->v[i], most, most);
        cfg->v[i] = most;
    }
    return FT_OK;
}

static ft_status check_config(const ft_op *op, const char *backend, const json_t *cfg,
                              const char *field, ft_err *err) {
    if (check_config_values(cfg, field, err)) return FT_EINVAL;
    const ft_backend *be = backend_named(backend);
    if (!be || !be->built || !be->supports(op)) return FT_OK;
    const ft_space *s = be->space(op);
    if (!s) return FT_OK;
    if (s->nparams > FT_MAX_PARAMS)
        return ft_err_set(err, FT_EINTERNAL, "%s on %s: space has too many parameters", op->name,
                          backend);
    ft_config c;
    ft_err e2 = {0};
    if (config_relaxed(s, cfg, &c, &e2)) {
        const char *msg = e2.msg;
        if (strncmp(msg, "config: ", 8) == 0) msg += 8;
        return ft_err_set(err, FT_EINVAL, "%s: %s", field, msg);
    }
    return FT_OK;
}

/* Check entry j and fill out (pointers into j). */
static ft_status check_entry(const json_t *j, ft_profile_entry *out, ft_err *err) {
    memset(out, 0, sizeof *out);
    if (!json_is_object(j))
        return ft_err_set(err, FT_EINVAL, "it is %s, not an object", type_name(j));
    json_t *op_j, *be_j, *dev_j, *shape, *attrs, *config, *stats, *def, *ver, *v;
    ft_status s;
    if ((s = need(j, "", "op", NEED_STRING, &op_j, err))) return s;
    ft_err e2 = {0};
    const ft_op *op = ft_op_find(json_string_value(op_j), &e2);
    if (!op) return ft_err_set(err, FT_EINVAL, "%s", e2.msg);
    if ((s = need(j, "", "backend", NEED_STRING, &be_j, err)) ||
        (s = need(j, "", "device", NEED_STRING, &dev_j, err)) ||
        (s = need(j, "", "shape", NEED_OBJECT, &shape, err)) ||
        (s = need(j, "", "attrs", NEED_OBJECT, &attrs, err)))
        return s;
    if (!json_string_value(be_j)[0]) return ft_err_set(err, FT_EINVAL, "field 'backend' is empty");
    if (!json_string_value(dev_j)[0]) return ft_err_set(err, FT_EINVAL, "field 'device' is empty");
    /* The shape names every size of the op, and nothing else. */
    for (int k = 0; op->syms[k]; k++) {
        json_t *d = json_object_get(shape, op->syms[k]);
        if (!d)
            return ft_err_set(err, FT_EINVAL, "shape lacks size '%s' of %s", op->syms[k], op->name);
        if (!json_is_integer(d) || json_integer_value(d) < 0)
            return ft_err_set(err, FT_EINVAL, "shape: size '%s' should be an integer >= 0",
                              op->syms[k]);
    }
    const char *key;
    json_object_foreach(shape, key, v) {
        if (ft_op_sym(op, key) < 0)
            return ft_err_set(err, FT_EINVAL, "shape: %s has no size '%s'", op->name, key);
    }
    ft_attrs av;
    ft_attrs_default(&av);
    json_object_foreach(attrs, key, v) {
        if (!ft_op_accepts_attr(op, key))
            return ft_err_set(err, FT_EINVAL, "attrs: %s has no attribute '%s'", op->name, key);
        if (!json_is_string(v))
            return ft_err_set(err, FT_EINVAL, "attrs: '%s' should be a string, not %s", key,
                              type_name(v));
        /* The value as `--attr` would take it: an entry no call can have is no entry. */
        if (ft_attrs_set(&av, op, key, json_string_value(v), &e2))
            return ft_err_set(err, FT_EINVAL, "attrs: %s", e2.msg);
    }
    const char *backend = json_string_value(be_j);
    if ((s = need(j, "", "config", NEED_OBJECT, &config, err)) ||
        (s = check_config(op, backend, config, "config", err)))
        return s;
    if ((s = need(j, "", "stats", NEED_OBJECT, &stats, err)) ||
        (s = check_stats(stats, "stats.", 1, err)))
        return s;
    /* default is null when the backend's default configuration cannot run this shape. */
    if ((s = need(j, "", "default", NEED_OBJECT_OR_NULL, &def, err))) return s;
    if (json_is_object(def) && ((s = need(def, "default.", "config", NEED_OBJECT, &v, err)) ||
                                (s = check_config(op, backend, v, "default.config", err)) ||
                                (s = need(def, "default.", "stats", NEED_OBJECT, &v, err)) ||
                                (s = check_stats(v, "default.stats.", 0, err))))
        return s;
    if ((s = need(j, "", "speedup", NEED_NUMBER_OR_NULL, NULL, err)) ||
        (s = need(j, "", "roofline_frac", NEED_NUMBER_OR_NULL, NULL, err)) ||
        (s = need(j, "", "verification", NEED_OBJECT, &ver, err)) ||
        (s = need(ver, "verification.", "max_rel_err", NEED_NUMBER_OR_NULL, NULL, err)) ||
        (s = need(ver, "verification.", "tolerance", NEED_NUMBER, NULL, err)) ||
        (s = need(ver, "verification.", "output", NEED_STRING, NULL, err)) ||
        (s = need(ver, "verification.", "shape", NEED_OBJECT, NULL, err)) ||
        (s = need(ver, "verification.", "reduced", NEED_BOOL, NULL, err)) ||
        (s = need(j, "", "tie", NEED_ARRAY, &v, err)))
        return s;
    size_t i;
    json_t *t;
    json_array_foreach(v, i, t) {
        if (!json_is_object(t))
            return ft_err_set(err, FT_EINVAL, "tie[%zu] should be a configuration object", i);
    }
    static const need_field last[] = {{"environment", NEED_OBJECT}, {"tuned_at", NEED_STRING},
                                 {"strategy", NEED_STRING},    {"evaluations", NEED_NUMBER},
                                 {"space_valid", NEED_NUMBER}, {NULL, NEED_STRING}};
    if ((s = need_fields(j, last, err))) return s;
    out->op = op;
    out->backend = backend;
    out->device = json_string_value(dev_j);
    out->shape = shape;
    out->shape_hash = 0xcbf29ce484222325ull; /* FNV-1a over the sizes */
    for (int k = 0; op->syms[k]; k++) {
        uint64_t x = (uint64_t)json_integer_value(json_object_get(shape, op->syms[k]));
        for (int b = 0; b < 8; b++, x >>= 8)
            out->shape_hash = (out->shape_hash ^ (x & 0xff)) * 0x100000001b3ull;
    }
    out->attrs = attrs;
    out->config = config;
    out->median_s = json_number_value(json_object_get(stats, "median_s"));
    out->json = j;
    return FT_OK;
}

ft_status ft_profile_entry_check(const json_t *entry, ft_err *err) {
    ft_profile_entry e;
    return check_entry(entry, &e, err);
}

/* ---- keys and order ------------------------------------------------------------------------- */

/* One key: the same op, backend, device and shape, and attributes of the same values however
 * written (ft_profile_attrs_match). */
static int same_key(const ft_profile_entry *a, const ft_profile_entry *b) {
    return a->op == b->op && a->shape_hash == b->shape_hash &&
           strcmp(a->backend, b->backend) == 0 && strcmp(a->device, b->device) == 0 &&
           json_equal(a->shape, b->shape) && ft_profile_attrs_match(a->attrs, b->attrs);
}

/* Does a skipped entry carry the key of e (its key fields are readable and equal)? */
static int skipped_has_key(const json_t *raw, const ft_profile_entry *e) {
    const char *op = json_string_value(json_object_get(raw, "op"));
    const char *be = json_string_value(json_object_get(raw, "backend"));
    const char *dev = json_string_value(json_object_get(raw, "device"));
    json_t *shape = json_object_get(raw, "shape"), *attrs = json_object_get(raw, "attrs");
    return op && be && dev && shape && attrs && strcmp(op, e->op->name) == 0 &&
           strcmp(be, e->backend) == 0 && strcmp(dev, e->device) == 0 &&
           json_equal(shape, (json_t *)e->shape) && json_equal(attrs, (json_t *)e->attrs);
}

static int cmp_attrs(const json_t *a, const json_t *b) {
    char *sa = json_dumps(a, JSON_COMPACT | JSON_SORT_KEYS);
    char *sb = json_dumps(b, JSON_COMPACT | JSON_SORT_KEYS);
    int r = sa && sb ? strcmp(sa, sb) : 0;
    free(sa);
    free(sb);
    return r;
}

/* The profile's order: op (registry order), backend, device, attrs, then the sizes in the op's
 * order, numerically. */
static int cmp_entries(const ft_profile_entry *a, const ft_profile_entry *b) {
    int r = op_index(a->op) - op_index(b->op);
    if (r) return r;
    if ((r = strcmp(a->backend, b->backend))) return r;
    if ((r = strcmp(a->device, b->device))) return r;
    if ((r = cmp_attrs(a->attrs, b->attrs))) return r;
    for (int s = 0; a->op->syms[s]; s++) {
        json_int_t x = json_integer_value(json_object_get(a->shape, a->op->syms[s]));
        json_int_t y = json_integer_value(json_object_get(b->shape, a->op->syms[s]));
        if (x != y) return x < y ? -1 : 1;
    }
    return 0;
}

/* ---- the profile ---------------------------------------------------------------------------- */

ft_profile *ft_profile_new(void) {
    ft_profile *p = calloc(1, sizeof *p);
    if (!p) return NULL;
    p->skipped = json_array();
    p->skipped_kernels = json_array();
    p->extra = json_object();
    if (!p->skipped || !p->skipped_kernels || !p->extra) {
        json_decref(p->skipped);
        json_decref(p->skipped_kernels);
        json_decref(p->extra);
        free(p);
        return NULL;
    }
    return p;
}

void ft_profile_free(ft_profile *p) {
    if (!p) return;
    for (int i = 0; i < p->n; i++)
        json_decref((json_t *)p->entries[i].json);
    free(p->entries);
    json_decref(p->skipped);
    for (int i = 0; i < p->nk; i++)
        json_decref((json_t *)p->kernels[i].json);
    free(p->kernels);
    json_decref(p->skipped_kernels);
    json_decref(p->extra);
    for (int i = 0; i < p->warnings.n; i++)
        free(p->warnings.v[i]);
    free(p->warnings.v);
    for (int i = 0; i < p->notes.n; i++)
        free(p->notes.v[i]);
    free(p->notes.v);
    free(p);
}

int ft_profile_count(const ft_profile *p) { return p ? p->n : 0; }
const ft_profile_entry *ft_profile_entry_at(const ft_profile *p, int i) {
    return p && i >= 0 && i < p->n ? &p->entries[i] : NULL;
}
int ft_profile_skipped_count(const ft_profile *p) {
    return p ? (int)json_array_size(p->skipped) : 0;
}
int ft_profile_warning_count(const ft_profile *p) { return p ? p->warnings.n : 0; }
const char *ft_profile_warning_at(const ft_profile *p, int i) {
    return p && i >= 0 && i < p->warnings.n ? p->warnings.v[i] : NULL;
}
int ft_profile_note_count(const ft_profile *p) { return p ? p->notes.n : 0; }
const char *ft_profile_note_at(const ft_profile *p, int i) {
    return p && i >= 0 && i < p->notes.n ? p->notes.v[i] : NULL;
}

static ft_status add_line(ft_profile_lines *l, const char *text, ft_err *err) {
    if (l->n == l->cap) {
        int cap = l->cap ? 2 * l->cap : 8;
        char **w = realloc(l->v, (size_t)cap * sizeof *w);
        if (!w) return ft_err_set(err, FT_ENOMEM, "out of memory recording a profile warning");
        l->v = w;
        l->cap = cap;
    }
    char *copy = strdup(text);
    if (!copy) return ft_err_set(err, FT_ENOMEM, "out of memory recording a profile warning");
    /* A warning quotes the profile (an entry's op, backend, a kernel's name): a control
     * character there is not printed raw on a terminal, as in an error line. */
    ft_err_one_line(copy);
    l->v[l->n++] = copy;
    return FT_OK;
}

static ft_status add_warning(ft_profile *p, const char *text, ft_err *err) {
    return add_line(&p->warnings, text, err);
}

/* Append raw (a reference) to list, unless an equal element is there already. */
static ft_status append_once(json_t *list, json_t *raw, ft_err *err) {
    size_t k;
    json_t *o;
    json_array_foreach(list, k, o) {
        if (json_equal(o, raw)) return FT_OK;
    }
    if (json_array_append(list, raw))
        return ft_err_set(err, FT_ENOMEM, "out of memory keeping a skipped profile entry");
    return FT_OK;
}

/* Room for one more element in the array *v of n used and *cap allocated, each size bytes: the
 * capacity doubles (from 8). 0, or -1 when out of memory (*v unchanged). */
static int make_room(void **v, int n, int *cap, size_t size) {
    if (n < *cap) return 0;
    int c = *cap ? 2 * *cap : 8;
    void *w = realloc(*v, (size_t)c * size);
    if (!w) return -1;
    *v = w;
    *cap = c;
    return 0;
}

/* ---- kernels of T1 files -------------------------------------------------------------------- */

/* Check kernel entry j and fill out (pointers into j). */
static ft_status check_kernel(const json_t *j, ft_profile_kernel *out, ft_err *err) {
    memset(out, 0, sizeof *out);
    if (!json_is_object(j))
        return ft_err_set(err, FT_EINVAL, "it is %s, not an object", type_name(j));
    static const char *const names[] = {"kernel", "backend", "device"};
    const char *text[3];
    json_t *ps, *config, *stats, *median, *def, *v;
    ft_status s;
    for (int k = 0; k < 3; k++) {
        if ((s = need(j, "", names[k], NEED_STRING, &v, err))) return s;
        text[k] = json_string_value(v);
        if (!text[k][0]) return ft_err_set(err, FT_EINVAL, "field '%s' is empty", names[k]);
    }
    if ((s = need(j, "", "problem_size", NEED_ARRAY, &ps, err))) return s;
    size_t i, nps = json_array_size(ps);
    if (nps < 1 || nps > 3)
        return ft_err_set(err, FT_EINVAL, "problem_size should hold 1 to 3 sizes, not %zu", nps);
    json_array_foreach(ps, i, v) {
        if (!json_is_integer(v) || json_integer_value(v) < 0)
            return ft_err_set(err, FT_EINVAL, "problem_size[%zu] should be an integer >= 0", i);
    }
    if ((s = need(j, "", "config", NEED_OBJECT, &config, err)) ||
        (s = check_config_values(config, "config", err)) ||
        (s = need(j, "", "stats", NEED_OBJECT, &stats, err)) ||
        (s = need(stats, "stats.", "median_s", NEED_NUMBER, &median, err)))
        return s;
    if (!(json_number_value(median) > 0 && isfinite(json_number_value(median))))
        return ft_err_set(err, FT_EINVAL, "field 'stats.median_s' should be a positive time, not %g",
                          json_number_value(median));
    if ((s = need(j, "", "default", NEED_OBJECT_OR_NULL, &def, err))) return s;
    if (json_is_object(def) && ((s = need(def, "default.", "config", NEED_OBJECT, &v, err)) ||
                                (s = check_config_values(v, "default.config", err)) ||
                                (s = need(def, "default.", "stats", NEED_OBJECT, &v, err)) ||
                                (s = need(v, "default.stats.", "median_s", NEED_NUMBER_OR_NULL,
                                          NULL, err))))
        return s;
    static const need_field last[] = {{"speedup", NEED_NUMBER_OR_NULL}, {"evaluations", NEED_INTEGER},
                                 {"space_valid", NEED_INTEGER},     {"strategy", NEED_STRING},
                                 {"tuned_at", NEED_STRING},         {NULL, NEED_STRING}};
    if ((s = need_fields(j, last, err))) return s;
    if (json_integer_value(json_object_get(j, "evaluations")) < 0 ||
        json_integer_value(json_object_get(j, "space_valid")) < 0)
        return ft_err_set(err, FT_EINVAL, "evaluations and space_valid should be counts (>= 0)");
    *out = (ft_profile_kernel){.kernel = text[0], .backend = text[1], .device = text[2],
                               .problem_size = ps, .config = config,
                               .median_s = json_number_value(median), .json = j};
    return FT_OK;
}

ft_status ft_profile_kernel_check(const json_t *entry, ft_err *err) {
    ft_profile_kernel k;
    return check_kernel(entry, &k, err);
}

/* The kernels' order, and their key where it is 0: kernel, backend, device, then the problem
 * sizes (fewer dimensions first). */
static int cmp_kernels(const ft_profile_kernel *a, const ft_profile_kernel *b) {
    int r;
    if ((r = strcmp(a->kernel, b->kernel)) || (r = strcmp(a->backend, b->backend)) ||
        (r = strcmp(a->device, b->device)))
        return r;
    size_t na = json_array_size(a->problem_size), nb = json_array_size(b->problem_size);
    if (na != nb) return na < nb ? -1 : 1;
    for (size_t d = 0; d < na; d++) {
        json_int_t x = json_integer_value(json_array_get(a->problem_size, d));
        json_int_t y = json_integer_value(json_array_get(b->problem_size, d));
        if (x != y) return x < y ? -1 : 1;
    }
    return 0;
}

/* The key of a kernel that did not validate, where its key fields can be read: 1, else 0. */
static int raw_kernel_key(const json_t *raw, ft_profile_kernel *k) {
    *k = (ft_profile_kernel){.kernel = json_string_value(json_object_get(raw, "kernel")),
                             .backend = json_string_value(json_object_get(raw, "backend")),
                             .device = json_string_value(json_object_get(raw, "device")),
                             .problem_size = json_object_get(raw, "problem_size")};
    if (!k->kernel || !k->backend || !k->device || !json_is_array(k->problem_size)) return 0;
    size_t d;
    json_t *v;
    json_array_foreach(k->problem_size, d, v) {
        if (!json_is_integer(v)) return 0;
    }
    return 1;
}

/* Keep a kernel that did not validate, to write back: unless a valid one has its key (which
 * replaced it) or it is kept already. */
static ft_status keep_skipped_kernel(ft_profile *p, json_t *raw, ft_err *err) {
    ft_profile_kernel rk;
    int keyed = raw_kernel_key(raw, &rk);
    for (int i = 0; keyed && i < p->nk; i++)
        if (cmp_kernels(&p->kernels[i], &rk) == 0) return FT_OK;
    return append_once(p->skipped_kernels, raw, err);
}

/* Whether a result of one key (its JSON) takes the place of the one there: a run that finished
 * (its winner confirmed) over one Ctrl-C stopped (its figures the search's, unconfirmed), one
 * measured on a quiet machine over one measured on a busy one (whose medians move either way,
 * by a third and more: a busy run's lower median is no faster kernel), and between two of the
 * same kind the faster. */
static int better(const json_t *new_j, double new_median, const json_t *old_j, double old_median) {
    int new_stopped = json_is_true(json_object_get(new_j, "interrupted"));
    int old_stopped = json_is_true(json_object_get(old_j, "interrupted"));
    if (new_stopped != old_stopped) return old_stopped;
    int new_busy = json_is_true(json_object_get(json_object_get(new_j, "contention"), "busy"));
    int old_busy = json_is_true(json_object_get(json_object_get(old_j, "contention"), "busy"));
    if (new_busy != old_busy) return old_busy;
    return new_median < old_median;
}

/* Insert a checked kernel (j is a reference the profile takes over, k points into it): the
 * better of two with one key stays (better()); a skipped kernel of its key is dropped. */
static ft_status insert_kernel(ft_profile *p, json_t *j, const ft_profile_kernel *k,
                               ft_profile_outcome *outcome, ft_err *err) {
    int at = 0, c = 1;
    while (at < p->nk && (c = cmp_kernels(&p->kernels[at], k)) < 0)
        at++;
    ft_profile_outcome did = FT_PROFILE_ADDED;
    if (at < p->nk && c == 0) {
        int faster = better(j, k->median_s, p->kernels[at].json, p->kernels[at].median_s);
        json_decref(faster ? (json_t *)p->kernels[at].json : j);
        if (faster) p->kernels[at] = *k;
        did = faster ? FT_PROFILE_REPLACED : FT_PROFILE_KEPT;
    } else {
        void *v = p->kernels;
        if (make_room(&v, p->nk, &p->capk, sizeof *k)) {
            json_decref(j);
            return ft_err_set(err, FT_ENOMEM, "out of memory adding a profile kernel");
        }
        p->kernels = v;
        memmove(&p->kernels[at + 1], &p->kernels[at], (size_t)(p->nk - at) * sizeof *k);
        p->kernels[at] = *k;
        p->nk++;
    }
    for (size_t i = json_array_size(p->skipped_kernels); i-- > 0;) {
        ft_profile_kernel rk;
        if (raw_kernel_key(json_array_get(p->skipped_kernels, i), &rk) && cmp_kernels(&rk, k) == 0) {
            json_array_remove(p->skipped_kernels, i);
            if (did == FT_PROFILE_ADDED) did = FT_PROFILE_REPLACED;
        }
    }
    if (outcome) *outcome = did;
    return FT_OK;
}

static ft_status add_kernel(ft_profile *p, const json_t *entry, ft_profile_outcome *outcome,
                            ft_err *err) {
    ft_profile_kernel k;
    ft_err e2 = {0};
    if (check_kernel(entry, &k, &e2)) {
        const char *name = json_string_value(json_object_get(entry, "kernel"));
        return ft_err_set(err, FT_EINVAL, "profile kernel (%s) is invalid: %s",
                          name ? name : "no name", e2.msg);
    }
    json_t *copy = json_deep_copy(entry);
    if (!copy) return ft_err_set(err, FT_ENOMEM, "out of memory copying a profile kernel");
    check_kernel(copy, &k, NULL);
    return insert_kernel(p, copy, &k, outcome, err);
}

/* The kernels of a document (its "kernels" array): the valid ones added, the rest kept to be
 * written back, each with a warning. */
static ft_status read_kernels(ft_profile *p, const json_t *list, const char *name, ft_err *err) {
    for (size_t i = 0; i < json_array_size(list); i++) {
        json_t *j = json_array_get(list, i);
        ft_profile_kernel k;
        ft_err why = {0};
        ft_status s;
        if (check_kernel(j, &k, &why) == FT_OK) {
            if ((s = insert_kernel(p, json_incref(j), &k, NULL, err))) return s;
            continue;
        }
        const char *kn = json_string_value(json_object_get(j, "kernel"));
        char warn[FT_ERR_MSG_LEN + 512];
        snprintf(warn, sizeof warn, "%s: kernels[%zu]%s%s%s %s: %s", name, i, kn ? " (" : "",
                 kn ? kn : "", kn ? ")" : "", json_is_object(j) ? "skipped" : "dropped", why.msg);
        if ((s = add_warning(p, warn, err))) return s;
        if (json_is_object(j) && (s = keep_skipped_kernel(p, j, err))) return s;
    }
    return FT_OK;
}

int ft_profile_kernel_count(const ft_profile *p) { return p ? p->nk : 0; }
const ft_profile_kernel *ft_profile_kernel_at(const ft_profile *p, int i) {
    return p && i >= 0 && i < p->nk ? &p->kernels[i] : NULL;
}

/* Insert a checked entry (j is a reference the profile takes over, e points into it). */
static ft_status insert(ft_profile *p, json_t *j, ft_profile_entry *e, ft_profile_outcome *outcome,
                        ft_err *err) {
    for (int i = 0; i < p->n; i++) {
        if (!same_key(&p->entries[i], e)) continue;
        if (better(j, e->median_s, p->entries[i].json, p->entries[i].median_s)) {
            json_decref((json_t *)p->entries[i].json);
            p->entries[i] = *e;
            if (outcome) *outcome = FT_PROFILE_REPLACED;
        } else {
            json_decref(j);
            if (outcome) *outcome = FT_PROFILE_KEPT;
        }
        return FT_OK;
    }
    void *v = p->entries;
    if (make_room(&v, p->n, &p->cap, sizeof *e)) {
        json_decref(j);
        return ft_err_set(err, FT_ENOMEM, "out of memory adding a profile entry");
    }
    p->entries = v;
    /* After every entry that sorts at or before e (a binary search: a comparison dumps two
     * attribute objects, and a scan from the end made reading a shuffled profile quadratic). */
    int lo = 0, hi = p->n;
    while (lo < hi) {
        int mid = lo + (hi - lo) / 2;
        if (cmp_entries(&p->entries[mid], e) > 0)
            hi = mid;
        else
            lo = mid + 1;
    }
    int at = lo;
    memmove(&p->entries[at + 1], &p->entries[at], (size_t)(p->n - at) * sizeof *e);
    p->entries[at] = *e;
    p->n++;
    /* A valid result for a key replaces the skipped (stale) entries of that key. */
    int replaced = 0;
    for (size_t k = json_array_size(p->skipped); k-- > 0;) {
        if (skipped_has_key(json_array_get(p->skipped, k), e)) {
            json_array_remove(p->skipped, k);
            replaced = 1;
        }
    }
    if (outcome) *outcome = replaced ? FT_PROFILE_REPLACED : FT_PROFILE_ADDED;
    return FT_OK;
}

/* Keep a skipped entry to write back, unless a valid entry has its key or it is there already. */
static ft_status keep_skipped(ft_profile *p, json_t *raw, ft_err *err) {
    for (int i = 0; i < p->n; i++)
        if (skipped_has_key(raw, &p->entries[i])) return FT_OK;
    return append_once(p->skipped, raw, err);
}

ft_status ft_profile_add(ft_profile *p, const json_t *entry, ft_profile_outcome *outcome,
                         ft_err *err) {
    if (json_object_get(entry, "kernel") && !json_object_get(entry, "op"))
        return add_kernel(p, entry, outcome, err);
    ft_profile_entry e;
    ft_err e2 = {0};
    if (check_entry(entry, &e, &e2)) {
        char shape[256];
        const char *op = json_string_value(json_object_get(entry, "op"));
        shape_str(NULL, json_object_get(entry, "shape"), shape, sizeof shape);
        return ft_err_set(err, FT_EINVAL, "profile entry (%s%s%s) is invalid: %s",
                          op ? op : "no op", shape[0] ? ", " : "", shape, e2.msg);
    }
    /* A private copy: the caller may change or free its object afterwards. */
    json_t *copy = json_deep_copy(entry);
    if (!copy) return ft_err_set(err, FT_ENOMEM, "out of memory copying a profile entry");
    if (check_entry(copy, &e, err)) {
        json_decref(copy);
        return FT_EINTERNAL;
    }
    return insert(p, copy, &e, outcome, err);
}

ft_status ft_profile_merge(ft_profile *dst, const ft_profile *src, ft_err *err) {
    ft_status s;
    for (int i = 0; i < src->n; i++) {
        ft_profile_entry e = src->entries[i];
        json_incref((json_t *)e.json); /* shared: neither profile changes an entry */
        if ((s = insert(dst, (json_t *)e.json, &e, NULL, err))) return s;
    }
    size_t k;
    json_t *raw;
    json_array_foreach(src->skipped, k, raw) {
        if ((s = keep_skipped(dst, raw, err))) return s;
    }
    for (int i = 0; i < src->nk; i++) {
        ft_profile_kernel kn = src->kernels[i];
        if ((s = insert_kernel(dst, json_incref((json_t *)kn.json), &kn, NULL, err))) return s;
    }
    json_array_foreach(src->skipped_kernels, k, raw) {
        if ((s = keep_skipped_kernel(dst, raw, err))) return s;
    }
    for (int i = 0; i < src->warnings.n; i++)
        if ((s = add_warning(dst, src->warnings.v[i], err))) return s;
    for (int i = 0; i < src->notes.n; i++)
        if ((s = add_line(&dst->notes, src->notes.v[i], err))) return s;
    return keep_extra(dst, src->extra, err);
}

/* ---- reading -------------------------------------------------------------------------------- */

/* Rename the former names of every configuration entry j holds: its config, the default's, and
 * those of `tie` and `unstable`. Returns how many keys; `note` describes the winner's. */
static int rename_configs(const ft_space *sp, json_t *j, char *note, size_t n) {
    char other[256];
    int count = ft_config_json_rename(sp, json_object_get(j, "config"), note, n), more;
    json_t *def = json_object_get(j, "default");
    if (json_is_object(json_object_get(def, "config"))) {
        more = ft_config_json_rename(sp, json_object_get(def, "config"), other, sizeof other);
        if (more && !count) snprintf(note, n, "%s", other);
        count += more;
    }
    const char *lists[] = {"tie", "unstable"};
    for (int l = 0; l < 2; l++) {
        size_t k;
        json_t *c;
        json_array_foreach(json_object_get(j, lists[l]), k, c) {
            more = json_is_object(c) ? ft_config_json_rename(sp, c, other, sizeof other) : 0;
            if (more && !count) snprintf(note, n, "%s", other);
            count += more;
        }
    }
    return count;
}

/* The entry to keep for j (checked into e): j itself, or a copy with the former names of its
 * configurations' tunables renamed (ft_space_renamed), with a note saying so. *keep is a
 * reference. */
static ft_status renamed_entry(ft_profile *p, const char *name, size_t i, json_t *j,
                               ft_profile_entry *e, json_t **keep, ft_err *err) {
    /* The names are the space's declaration, the same in a build that cannot run the backend
     * (the CUDA spaces are there in a CPU-only build). */
    const ft_backend *be = backend_named(e->backend);
    const ft_space *sp = be && be->supports(e->op) ? be->space(e->op) : NULL;
    if (!sp) {
        *keep = json_incref(j);
        return FT_OK;
    }
    char renames[256];
    json_t *copy = json_deep_copy(j);
    if (!copy) return ft_err_set(err, FT_ENOMEM, "%s: out of memory", name);
    if (rename_configs(sp, copy, renames, sizeof renames) == 0) {
        json_decref(copy);
        *keep = json_incref(j);
        return FT_OK;
    }
    ft_err e2 = {0};
    if (check_entry(copy, e, &e2) != FT_OK) {
        json_decref(copy);
        return ft_err_set(err, FT_EINTERNAL, "%s: entries[%zu] renamed: %s", name, i, e2.msg);
    }
    char note[512];
    snprintf(note, sizeof note,
             "%s: entries[%zu] (%s on %s) names tunables by their former names: read as %s "
             "(saved under the new names)",
             name, i, e->op->name, e->backend, renames);
    ft_status s = add_line(&p->notes, note, err);
    if (s) {
        json_decref(copy);
        return s;
    }
    *keep = copy;
    return FT_OK;
}

ft_status ft_profile_from_json(const json_t *root, const char *name, ft_profile **out,
                               ft_err *err) {
    *out = NULL;
    if (!json_is_object(root))
        return ft_err_set(err, FT_EFORMAT,
                          "%s: not a flaretune profile (expected an object with schema_version "
                          "and entries, found %s)",
                          name, type_name(root));
    json_t *ver = json_object_get(root, "schema_version");
    if (!json_is_integer(ver))
        return ft_err_set(err, FT_EFORMAT, "%s: not a flaretune profile (%s)", name,
                          ver ? "schema_version is not an integer" : "no schema_version");
    json_int_t v = json_integer_value(ver);
    if (v > FT_PROFILE_SCHEMA_VERSION)
        return ft_err_set(err, FT_EUNSUPPORTED,
                          "%s: schema_version %lld is newer than this flaretune reads (%d): "
                          "update flaretune to read it",
                          name, (long long)v, FT_PROFILE_SCHEMA_VERSION);
    if (v < 1)
        return ft_err_set(err, FT_EFORMAT, "%s: schema_version %lld is not valid", name,
                          (long long)v);
    json_t *entries = json_object_get(root, "entries"), *kernels = json_object_get(root, "kernels");
    if (!json_is_array(entries))
        return ft_err_set(err, FT_EFORMAT, "%s: 'entries' %s", name,
                          entries ? "is not an array" : "is missing");
    if (kernels && !json_is_array(kernels))
        return ft_err_set(err, FT_EFORMAT, "%s: 'kernels' is not an array", name);
    ft_profile *p = ft_profile_new();
    if (!p) return ft_err_set(err, FT_ENOMEM, "%s: out of memory", name);
    size_t i;
    json_t *j;
    ft_status s = keep_extra(p, root, err);
    json_array_foreach(entries, i, j) {
        if (s) break;
        ft_profile_entry e;
        ft_err why = {0};
        if (!json_is_object(j)) {
            /* Not an entry of any build (1, "x", null): dropped, not kept to be written back. */
            char warn[FT_ERR_MSG_LEN];
            snprintf(warn, sizeof warn, "%s: entries[%zu] dropped: it is %s, not an object", name,
                     i, type_name(j));
            if ((s = add_warning(p, warn, err))) break;
            continue;
        }
        if (check_entry(j, &e, &why) == FT_OK) {
            json_t *keep = NULL;
            if ((s = renamed_entry(p, name, i, j, &e, &keep, err))) break;
            if ((s = insert(p, keep, &e, NULL, err))) break;
            continue;
        }
        char warn[FT_ERR_MSG_LEN + 512], shape[200];
        const char *op = json_string_value(json_object_get(j, "op"));
        const char *be = json_string_value(json_object_get(j, "backend"));
        const ft_op *known = op ? ft_op_find(op, NULL) : NULL;
        shape_str(known, json_object_get(j, "shape"), shape, sizeof shape);
        size_t k = 0;
        appendf(warn, sizeof warn, &k, "%s: entries[%zu]", name, i);
        if (op) {
            appendf(warn, sizeof warn, &k, " (%s", op);
            if (be) appendf(warn, sizeof warn, &k, " on %s", be);
            if (shape[0]) appendf(warn, sizeof warn, &k, ", %s", shape);
            appendf(warn, sizeof warn, &k, ")");
        }
        appendf(warn, sizeof warn, &k, " skipped: %s", why.msg);
        if ((s = add_warning(p, warn, err)) || (s = keep_skipped(p, j, err))) break;
    }
    if (!s) s = read_kernels(p, kernels, name, err);
    if (s) {
        ft_profile_free(p);
        return s;
    }
    *out = p;
    return FT_OK;
}

static int only_space(const char *s, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (s[i] != ' ' && s[i] != '\t' && s[i] != '\n' && s[i] != '\r') return 0;
    return 1;
}

ft_status ft_profile_load(const char *path, ft_profile **out, ft_err *err) {
    *out = NULL;
    if (!path || !path[0]) return ft_err_set(err, FT_EINVAL, "the profile path is empty");
    /* A file or a pipe, of at most FT_PROFILE_MAX_BYTES: not a directory, not /dev/zero. */
    struct stat sb;
    if (stat(path, &sb) == 0) {
        if (S_ISDIR(sb.st_mode))
            return ft_err_set(err, FT_EIO, "%s is a directory, not a profile", path);
        if (!S_ISREG(sb.st_mode) && !S_ISFIFO(sb.st_mode))
            return ft_err_set(err, FT_EIO,
                              "%s is not a regular file (a device or socket): not a profile", path);
        if (S_ISREG(sb.st_mode) && (long long)sb.st_size > FT_PROFILE_MAX_BYTES)
            return ft_err_set(err, FT_EIO,
                              "%s has %lld bytes, more than a profile may have (%lld MiB): not a "
                              "profile",
                              path, (long long)sb.st_size, FT_PROFILE_MAX_BYTES >> 20);
    }
    FILE *f = fopen(path, "rb");
    if (!f) {
        if (errno == ENOENT) {
            *out = ft_profile_new();
            return *out ? FT_OK : ft_err_set(err, FT_ENOMEM, "%s: out of memory", path);
        }
        return ft_err_set(err, FT_EIO, "%s: cannot read: %s", path, strerror(errno));
    }
    char *buf;
    size_t len;
    int got = ft_file_read_all(f, (size_t)FT_PROFILE_MAX_BYTES, &buf, &len);
    if (got < 0) {
        fclose(f);
        return ft_err_set(err, FT_ENOMEM, "%s: out of memory reading it", path);
    }
    if (got > 0) { /* a pipe, or a file that grew */
        fclose(f);
        return ft_err_set(err, FT_EIO,
                          "%s: more than %lld MiB, more than a profile may have: not a "
                          "profile",
                          path, FT_PROFILE_MAX_BYTES >> 20);
    }
    int bad = ferror(f);
    int saved = errno;
    fclose(f);
    if (bad) {
        free(buf);
        return ft_err_set(err, FT_EIO, "%s: read failed: %s", path, strerror(saved));
    }
    if (only_space(buf, len)) {
        free(buf);
        *out = ft_profile_new();
        return *out ? FT_OK : ft_err_set(err, FT_ENOMEM, "%s: out of memory", path);
    }
    json_error_t je;
    json_t *root = json_loadb(buf, len, JSON_REJECT_DUPLICATES, &je);
    free(buf);
    if (!root)
        return ft_err_set(err, FT_EFORMAT, "%s:%d:%d: malformed JSON: %s", path, je.line, je.column,
                          je.text);
    ft_status s = ft_profile_from_json(root, path, out, err);
    json_decref(root);
    return s;
}

/* ---- writing -------------------------------------------------------------------------------- */

json_t *ft_profile_to_json(const ft_profile *p) {
    json_t *entries = json_array();
    if (!entries) return NULL;
    for (int i = 0; i < p->n; i++)
        if (json_array_append(entries, (json_t *)p->entries[i].json)) goto fail;
    if (json_array_extend(entries, p->skipped)) goto fail;
    json_t *kernels = json_array();
    if (!kernels) goto fail;
    for (int i = 0; i < p->nk; i++)
        if (json_array_append(kernels, (json_t *)p->kernels[i].json)) goto fail_kernels;
    if (json_array_extend(kernels, p->skipped_kernels)) goto fail_kernels;
    const int with_kernels = json_array_size(kernels) > 0;
    json_t *root = json_object();
    if (!root) goto fail_kernels;
    if (json_object_set_new(root, "schema_version", json_integer(with_kernels ? 2 : 1)) ||
        json_object_set_new(root, "generator",
                            json_string("flaretune " FT_VERSION " (" FT_GIT_DESCRIBE ")")) ||
        json_object_set_new(root, "entries", entries) ||
        (with_kernels && json_object_set_new(root, "kernels", json_incref(kernels))) ||
        json_object_update_missing(root, p->extra)) {
        json_decref(kernels);
        json_decref(root);
        return NULL;
    }
    json_decref(kernels);
    return root;
fail_kernels:
    json_decref(kernels);
fail:
    json_decref(entries);
    return NULL;
}

/* ---- where a profile is written ------------------------------------------------------------ */

/* The path for a message: a very long one cut to its start and its length. */
static const char *short_path(const char *path, char *buf, size_t n) {
    size_t len = strlen(path);
    if (len <= 200) return path;
    snprintf(buf, n, "%.60s... (%zu characters)", path, len);
    return buf;
}

/* The room a profile's name needs beside it: its temporary file (".tmp.XXXXXX") and its lock. */
#define NAME_ROOM 11

/* ENAMETOOLONG, saying whether a name in the path or the whole path is too long. */
static ft_status name_too_long(const char *path, ft_err *err) {
    char sp[128];
    size_t longest = 0;
    for (const char *p = path; *p;) {
        size_t k = strcspn(p, "/");
        longest = k > longest ? k : longest;
        p += k;
        p += *p == '/';
    }
    if (longest > NAME_MAX - NAME_ROOM)
        return ft_err_set(err, FT_EINVAL, "%s: %s (a name may have %d characters at most)",
                          short_path(path, sp, sizeof sp), strerror(ENAMETOOLONG),
                          NAME_MAX - NAME_ROOM);
    return ft_err_set(err, FT_EINVAL, "%s: %s (a path may have %d characters at most)",
                      short_path(path, sp, sizeof sp), strerror(ENAMETOOLONG),
                      PATH_MAX - NAME_ROOM - 1);
}

/* The file a profile path names, where its temporary file and its lock go: symbolic links are
 * followed to their target (realpath), and for a file that does not exist yet (a dangling
 * link's target included) the real path of its directory and its name. So a link stays a link,
 * and two paths to one profile take one lock. */
static ft_status resolve_target(const char *path, char *real, size_t n, ft_err *err) {
    char sp[128];
    if (!path || !path[0]) return ft_err_set(err, FT_EINVAL, "the profile path is empty");
    if (strlen(path) >= PATH_MAX - NAME_ROOM) return name_too_long(path, err);
    char cur[PATH_MAX], buf[PATH_MAX];
    int found = 0, fe = ft_path_follow(path, buf, sizeof cur - NAME_ROOM, &found);
    if (fe == ENAMETOOLONG) return name_too_long(path, err);
    if (fe == ENOTDIR)
        return ft_err_set(err, FT_EIO, "%s: a component of the path is not a directory",
                          short_path(path, sp, sizeof sp));
    if (fe) return ft_err_set(err, FT_EIO, "%s: %s", short_path(path, sp, sizeof sp), strerror(fe));
    if (!found) memcpy(cur, buf, strlen(buf) + 1);
    if (!found) {
        /* Not there yet: the real path of its directory, then its name. */
        const char *slash = strrchr(cur, '/');
        const char *base = slash ? slash + 1 : cur;
        char dir[PATH_MAX];
        ft_path_dir(cur, dir, sizeof dir);
        if (!base[0])
            return ft_err_set(err, FT_EIO, "%s: names a directory, not a profile file",
                              short_path(path, sp, sizeof sp));
        char rdir[PATH_MAX];
        if (!realpath(dir, rdir)) {
            int e = errno;
            if (e == ENOENT)
                return ft_err_set(err, FT_EIO, "%s: directory %s does not exist",
                                  short_path(path, sp, sizeof sp), dir);
            if (e == ENOTDIR)
                return ft_err_set(err, FT_EIO, "%s: %s is not a directory",
                                  short_path(path, sp, sizeof sp), dir);
            if (e == ENAMETOOLONG) return name_too_long(path, err);
            return ft_err_set(err, FT_EIO, "%s: directory %s: %s", short_path(path, sp, sizeof sp),
                              dir, strerror(e));
        }
        int w = snprintf(buf, sizeof buf, "%s/%s", strcmp(rdir, "/") ? rdir : "", base);
        if (w < 0 || (size_t)w >= sizeof buf) return name_too_long(path, err);
    }
    const char *slash = strrchr(buf, '/');
    if (strlen(slash ? slash + 1 : buf) > NAME_MAX - NAME_ROOM ||
        strlen(buf) >= PATH_MAX - NAME_ROOM || strlen(buf) >= n)
        return name_too_long(path, err);
    memcpy(real, buf, strlen(buf) + 1);
    return FT_OK;
}

/* Why this process may not replace the profile st describes: it has no write permission bit
 * (e 0), or access(W_OK) failed with errno e. chmod u+w is advice only for whoever may chmod it
 * (its owner, or root) when a write bit is what it lacks. */
static void why_not_writable(const struct stat *st, int e, char *buf, size_t n) {
    unsigned mode = (unsigned)(st->st_mode & 07777), me = (unsigned)geteuid();
    if (e == EROFS)
        snprintf(buf, n, "the profile is on a read-only file system: not replacing it");
    else if (me != 0 && (unsigned)st->st_uid != me)
        snprintf(buf, n,
                 "this user (uid %u) cannot write the profile (owned by uid %u, mode %04o): not "
                 "replacing it",
                 me, (unsigned)st->st_uid, mode);
    else if (e && (st->st_mode & (me == 0 ? 0222 : S_IWUSR)))
        snprintf(buf, n, "this user cannot write the profile (mode %04o): %s: not replacing it",
                 mode, strerror(e));
    else
        snprintf(buf, n,
                 "the profile is read-only (mode %04o): not replacing it (chmod u+w to let "
                 "flaretune update it)",
                 mode);
}

/* Whether the directory of real lets this user rename over the profile st describes. In a
 * sticky directory (mode +t, as /tmp) only the owner of a file, the owner of the directory or
 * root may replace or remove it, whatever the file's own mode: rename would fail after the
 * search (EPERM), so a profile there that another user owns is refused now. */
static ft_status check_sticky(const char *path, const char *real, const struct stat *st,
                              ft_err *err) {
    uid_t me = geteuid();
    if (me == 0 || st->st_uid == me) return FT_OK;
    char dir[PATH_MAX];
    ft_path_dir(real, dir, sizeof dir);
    struct stat ds;
    if (stat(dir, &ds) != 0 || !(ds.st_mode & S_ISVTX) || ds.st_uid == me) return FT_OK;
    char sp[128];
    return ft_err_set(err, FT_EIO,
                      "%s: this user (uid %u) cannot replace the profile: it is owned by uid %u "
                      "in the sticky directory %s (mode %04o, owned by uid %u), where only its "
                      "owner may rename over it: not replacing it",
                      short_path(path, sp, sizeof sp), (unsigned)me, (unsigned)st->st_uid, dir,
                      (unsigned)(ds.st_mode & 07777), (unsigned)ds.st_uid);
}

/* The target as it is now: absent, or a regular file flaretune may replace. A profile its
 * owner made read-only is refused rather than replaced (rename would replace it whatever its
 * mode; docs/profiles.md). */
static ft_status check_target(const char *path, const char *real, int *exists, ft_err *err) {
    char sp[128];
    struct stat st;
    *exists = 0;
    if (stat(real, &st) != 0) {
        if (errno == ENOENT) return FT_OK;
        return ft_err_set(err, FT_EIO, "%s: %s", short_path(path, sp, sizeof sp), strerror(errno));
    }
    *exists = 1;
    if (S_ISDIR(st.st_mode))
        return ft_err_set(err, FT_EIO, "%s: is a directory, not a profile",
                          short_path(path, sp, sizeof sp));
    if (!S_ISREG(st.st_mode))
        return ft_err_set(err, FT_EIO, "%s: is not a regular file",
                          short_path(path, sp, sizeof sp));
    if ((st.st_mode & 0222) == 0 || access(real, W_OK) != 0) {
        char why[192];
        why_not_writable(&st, (st.st_mode & 0222) ? errno : 0, why, sizeof why);
        return ft_err_set(err, FT_EIO, "%s: %s", short_path(path, sp, sizeof sp), why);
    }
    return check_sticky(path, real, &st, err);
}

ft_status ft_profile_save(const ft_profile *p, const char *path, ft_err *err) {
    char real[PATH_MAX];
    int exists;
    ft_status s = resolve_target(path, real, sizeof real, err);
    if (!s) s = check_target(path, real, &exists, err);
    if (s) return s;
    json_t *root = ft_profile_to_json(p);
    if (!root) return ft_err_set(err, FT_ENOMEM, "%s: out of memory writing the profile", path);
    /* The temporary file takes the mode of the file it replaces (ft_file_create_tmp). */
    char tmp[PATH_MAX + 16];
    FILE *f = ft_file_create_tmp(real, tmp, sizeof tmp, err);
    if (!f) {
        json_decref(root);
        return err ? err->status : FT_EIO;
    }
    int bad = json_dumpf(root, f, JSON_INDENT(2)) != 0 || fputc('\n', f) == EOF;
    json_decref(root);
    if (bad) {
        int saved = errno;
        fclose(f);
        unlink(tmp);
        return ft_err_set(err, FT_EIO, "%s: write failed: %s", path, strerror(saved));
    }
    return ft_file_commit(f, tmp, real, err);
}

/* Under the lock of the target: load it, apply one entry or a whole profile, save. */
static ft_status update(const char *path, const json_t *entry, const ft_profile *src, ft_err *err) {
    char real[PATH_MAX];
    ft_status s = resolve_target(path, real, sizeof real, err);
    if (s) return s;
    int fd = ft_file_lock(real, err);
    if (fd < 0) return err ? err->status : FT_EIO;
    ft_profile *p = NULL;
    int exists;
    s = check_target(path, real, &exists, err);
    if (!s) s = ft_profile_load(real, &p, err);
    if (!s) s = entry ? ft_profile_add(p, entry, NULL, err) : ft_profile_merge(p, src, err);
    if (!s) s = ft_profile_save(p, real, err);
    ft_profile_free(p);
    ft_file_unlock(fd);
    return s;
}

ft_status ft_profile_update(const char *path, const json_t *entry, ft_err *err) {
    return update(path, entry, NULL, err);
}

ft_status ft_profile_update_merge(const char *path, const ft_profile *src, ft_err *err) {
    return update(path, NULL, src, err);
}

ft_status ft_profile_check_writable(const char *path, ft_err *err) {
    char real[PATH_MAX], sp[128];
    int exists;
    ft_status s = resolve_target(path, real, sizeof real, err);
    if (!s) s = check_target(path, real, &exists, err);
    if (s) return s;
    if (exists) {
        /* A file that does not load would be refused after the search, losing it. */
        ft_profile *p = NULL;
        s = ft_profile_load(real, &p, err);
        ft_profile_free(p);
        if (s) return s;
    }
    /* The lock: an existing one must open; a new one is created beside the profile, which the
     * temporary file below proves possible (the lock file is never removed, so it is not
     * created here). */
    char lock[PATH_MAX + 16];
    snprintf(lock, sizeof lock, "%s.lock", real);
    if (access(lock, F_OK) == 0) {
        int fd = open(lock, O_RDWR | O_CLOEXEC);
        if (fd < 0 && errno == EACCES) fd = open(lock, O_RDONLY | O_CLOEXEC); /* ft_file_lock */
        if (fd < 0)
            return ft_err_set(err, FT_EIO, "%s: cannot open its lock file %s: %s",
                              short_path(path, sp, sizeof sp), lock, strerror(errno));
        close(fd);
    }
    char tmp[PATH_MAX + 16];
    FILE *f = ft_file_create_tmp(real, tmp, sizeof tmp, err);
    if (!f) return err ? err->status : FT_EIO;
    fclose(f);
    unlink(tmp);
    return FT_OK;
}

/* ---- lookup --------------------------------------------------------------------------------- */

double ft_profile_shape_distance(const json_t *query, const json_t *entry) {
    double d = 0;
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)entry, key, v) {
        json_t *q = json_object_get(query, key);
        if (!json_is_integer(q) || !json_is_integer(v)) continue;
        double a = (double)json_integer_value(q), b = (double)json_integer_value(v);
        d += fabs(log((a < 1 ? 1 : a) / (b < 1 ? 1 : b)));
    }
    return d;
}

static int shape_exact(const json_t *query, const json_t *entry) {
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)entry, key, v) {
        json_t *q = json_object_get(query, key);
        if (!json_is_integer(q) || json_integer_value(q) != json_integer_value(v)) return 0;
    }
    return 1;
}

/* The value of attribute `name` in a (a string), or its default when a leaves it out, written
 * as a call writes it: read as `--attr` reads it, so "1e-6", "0.000001" and the default eps are
 * one value. A value no call can have is its own text. */
static const char *attr_text(const json_t *a, const char *name, char *buf, size_t n) {
    const json_t *v = json_object_get(a, name);
    if (v && !json_is_string(v)) return "";
    ft_attrs d;
    ft_attrs_default(&d);
    if (v && ft_attrs_set(&d, NULL, name, json_string_value(v), NULL)) return json_string_value(v);
    ft_attrs_format(&d, name, buf, n);
    return buf;
}

int ft_profile_attrs_match(const json_t *a, const json_t *b) {
    const json_t *both[2] = {a, b};
    for (int side = 0; side < 2; side++) {
        const char *key;
        json_t *v;
        json_object_foreach((json_t *)both[side], key, v) {
            char da[64], db[64];
            if (strcmp(attr_text(a, key, da, sizeof da), attr_text(b, key, db, sizeof db)) != 0)
                return 0;
        }
    }
    return 1;
}

json_t *ft_profile_attrs_all(const ft_profile_entry *e) {
    ft_attrs av;
    ft_attrs_default(&av);
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)e->attrs, key, v) {
        if (json_is_string(v)) (void)ft_attrs_set(&av, e->op, key, json_string_value(v), NULL);
    }
    json_t *o = json_object();
    for (int a = 0; o && e->op->attrs[a]; a++) {
        const char *name = e->op->attrs[a];
        char buf[64];
        /* The value as ft_profile_attrs_match reads it (attr_text): the entry's, parsed, or the
         * default, written by ft_attrs_format. */
        if (ft_attr_matters(e->op, &av, name))
            ft_attrs_format(&av, name, buf, sizeof buf);
        else
            snprintf(buf, sizeof buf, "*");
        if (json_object_set_new(o, name, json_string(buf))) {
            json_decref(o);
            return NULL;
        }
    }
    return o;
}

const ft_profile_entry *ft_profile_lookup(const ft_profile *p, const char *op, const char *backend,
                                          const char *device, const json_t *attrs,
                                          const json_t *shape, int *exact) {
    const ft_profile_entry *best = NULL;
    double best_d = INFINITY;
    int best_exact = 0;
    for (int i = 0; p && op && i < p->n; i++) {
        const ft_profile_entry *e = &p->entries[i];
        if (strcmp(e->op->name, op) != 0 || (backend && strcmp(e->backend, backend) != 0) ||
            (device && strcmp(e->device, device) != 0) ||
            (attrs && !ft_profile_attrs_match(attrs, e->attrs)))
            continue;
        int ex = shape ? shape_exact(shape, e->shape) : 0;
        double d = shape ? ft_profile_shape_distance(shape, e->shape) : 0;
        /* Nearer by more than rounding (1e-9 of a log: the emitted lookups' products of ratios
         * tie where these sums of logs differ in the last bit), or the first wins, as there. */
        if (!best || (ex && !best_exact) || (ex == best_exact && d < best_d - 1e-9)) {
            best = e;
            best_d = d;
            best_exact = ex;
        }
    }
    if (exact) *exact = best ? best_exact : 0;
    return best;
}

const ft_profile_entry *ft_profile_lookup_call(const ft_profile *p, const ft_call *c,
                                               const char *backend, const char *device,
                                               int *exact) {
    json_t *shape = ft_dims_to_json(c), *attrs = ft_attrs_to_json(c);
    const ft_profile_entry *e =
        shape && attrs ? ft_profile_lookup(p, c->op->name, backend, device, attrs, shape, exact)
                       : NULL;
    if (!e && exact) *exact = 0;
    json_decref(shape);
    json_decref(attrs);
    return e;
}
