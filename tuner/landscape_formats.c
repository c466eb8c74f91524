/* landscape_formats.c: landscapes read from whatever file holds one (replay.h, docs/events.md
 * "Formats"): a flaretune event log, a Kernel Tuner cache file or a FAIR T4 results file, plain
 * or gzip-compressed.
 *
 * The content decides, not the name: a file whose first JSON value is an object with a string
 * "event" is an event log (JSON lines); otherwise the whole file is one JSON object, with
 * "tune_params" and "cache" (Kernel Tuner) or "results" and "schema_version" (T4). Kernel Tuner
 * writes its cache an entry at a time and closes it only at the end, so a cache that does not
 * parse is read as Kernel Tuner's own reader reads it: a trailing comma dropped and the closing
 * "}\n}" added.
 *
 * Such a file names no flaretune op: its space is the file's own parameters (Kernel Tuner's
 * tune_params in tune_params_keys order; T4's from the configurations, numbers ascending), an
 * integer parameter numeric and any other (a non-integer number, a string, a boolean) named by
 * its values' text, and its candidates are the configurations the file holds, in space order.
 * A failed one (an error string for its time, a T4 invalidity other than "correct") scores
 * INFINITY and still cost its evaluation:
 *
 *   Kernel Tuner: cost_ms = compile_time + verification_time
 *                           + (benchmark_time, else sum(times), else time)
 *   T4:           cost_ms = times.compilation + times.validation + sum(times.runtimes)
 *
 * framework time left out of both; a missing piece counts 0, none at all gives NaN, and so
 * does a piece recorded as NaN or an infinity (a time spent but not known).
 */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <zlib.h>

#include "traces/eventlog.h"
#include "tuner/replay.h"

/* 256 MiB of JSON: twenty times the largest landscape of the FAIR hub (19 MB, 11,130
 * configurations), and a bound on what a small gzip may unpack to. */
#define MAX_FILE_BYTES ((size_t)1 << 28)

/* The whole file, decompressed when gzip-compressed (zlib reads a plain file as it is). */
static ft_status read_all(const char *path, char **out, size_t *len, int *gz, ft_err *err) {
    *out = NULL;
    *len = 0;
    struct stat sb;
    if (stat(path, &sb) == 0 && S_ISDIR(sb.st_mode))
        return ft_err_set(err, FT_EIO,
                          "%s is a directory, not an event log, Kernel Tuner cache or T4 file",
                          path);
    gzFile f = gzopen(path, "rb");
    if (!f) return ft_err_set(err, FT_EIO, "%s: %s", path, strerror(errno ? errno : ENOENT));
    gzbuffer(f, 1 << 17);
    size_t cap = 1 << 20, n = 0;
    char *buf = malloc(cap + 1);
    for (;;) {
        if (!buf) {
            gzclose(f);
            return ft_err_set(err, FT_ENOMEM, "%s: out of memory", path);
        }
        if (n == cap) {
            if (cap >= MAX_FILE_BYTES) {
                free(buf);
                gzclose(f);
                return ft_err_set(err, FT_EFORMAT, "%s: larger than %zu bytes", path, cap);
            }
            cap *= 2;
            char *b = realloc(buf, cap + 1);
            if (!b) free(buf);
            buf = b;
            continue;
        }
        unsigned want = cap - n > (1u << 30) ? 1u << 30 : (unsigned)(cap - n);
        int got = gzread(f, buf + n, want);
        if (got < 0) {
            int zerr;
            const char *msg = gzerror(f, &zerr);
            size_t pl = strlen(path); /* zlib's message may begin with the path */
            if (strncmp(msg, path, pl) == 0 && strncmp(msg + pl, ": ", 2) == 0) msg += pl + 2;
            ft_status s =
                zerr == Z_ERRNO
                    ? ft_err_set(err, FT_EIO, "%s: %s", path, strerror(errno))
                    : ft_err_set(err, FT_EFORMAT, "%s: not a valid gzip stream (%s)", path, msg);
            free(buf);
            gzclose(f);
            return s;
        }
        if (got == 0) break;
        n += (size_t)got;
    }
    int zerr = Z_OK;
    gzerror(f, &zerr);
    if (zerr == Z_BUF_ERROR) {
        free(buf);
        gzclose(f);
        return ft_err_set(err, FT_EFORMAT,
                          "%s: its gzip stream ends early (a truncated or damaged file)", path);
    }
    *gz = !gzdirect(f);
    gzclose(f);
    buf[n] = '\0';
    *out = buf;
    *len = n;
    return FT_OK;
}

/* ---- the file's parameters ------------------------------------------------------------------ */

/* Memory the landscape owns from now on (freed by ft_landscape_free); 0 when out of memory (p
 * is then freed). */
static int own_ptr(ft_landscape *l, void *p) {
    if (p && l->nowned % 64 == 0) {
        char **o = realloc(l->owned, (size_t)(l->nowned + 64) * sizeof *o);
        if (!o) {
            free(p);
            return 0;
        }
        l->owned = o;
    }
    if (p) l->owned[l->nowned++] = p;
    return p != NULL;
}

/* A copy of text the landscape owns; NULL when out of memory. */
static char *own(ft_landscape *l, const char *text) {
    char *s = strdup(text);
    return own_ptr(l, s) ? s : NULL;
}

/* A value's text as Kernel Tuner's cache keys write it (Python's str()). */
static void value_text(const json_t *v, char *buf, size_t n) {
    if (json_is_integer(v)) {
        snprintf(buf, n, "%lld", (long long)json_integer_value(v));
    } else if (json_is_real(v)) {
        double x = json_real_value(v);
        snprintf(buf, n, "%.15g", x);
        if (strtod(buf, NULL) != x) snprintf(buf, n, "%.17g", x);
        if (!strpbrk(buf, ".eEn")) snprintf(buf + strlen(buf), n - strlen(buf), ".0");
    } else if (json_is_boolean(v)) {
        snprintf(buf, n, "%s", json_is_true(v) ? "True" : "False");
    } else if (json_is_string(v)) {
        snprintf(buf, n, "%s", json_string_value(v));
    } else {
        snprintf(buf, n, "?");
    }
}

double ft_landscape_decimal(const char *s) {
    char *end;
    if (!s || !*s || strspn(s, "0123456789+-.eE") != strlen(s)) return NAN;
    double x = strtod(s, &end);
    return *end ? NAN : x;
}

/* The longest parameter name or string value read: a value is written into cache keys, labels
 * and messages whole, and two that differ past this would read as one. */
#define TEXT_MAX 120

const char *ft_landscape_text_flaw(const char *s) {
    size_t chars = 0;
    for (const char *c = s; *c; c++) {
        if (ft_text_control_len(c)) return "holds a control character";
        chars += ((unsigned char)*c & 0xc0) != 0x80; /* a UTF-8 character's first byte */
    }
    return chars > TEXT_MAX ? "is longer than 120 characters" : NULL;
}

/* One line saying that a parameter name or a string value (what: "parameter", "value") in
 * `where` cannot be read (its first characters shown, control characters as '?'), or FT_OK. */
static ft_status check_text(const char *file, const char *where, const char *what, const char *s,
                            ft_err *err) {
    const char *flaw = ft_landscape_text_flaw(s);
    if (!flaw) return FT_OK;
    char shown[41];
    snprintf(shown, sizeof shown, "%s", s);
    ft_text_printable(shown, '?'); /* one line of a terminal */
    return ft_err_set(err, FT_EFORMAT, "%s: %s: %s \"%s%s\" %s", file, where, what, shown,
                      strlen(s) >= sizeof shown ? "..." : "", flaw);
}

/* v as a number: a JSON number, or a string of one in decimal; NAN for anything else. */
static double number_of(const json_t *v) {
    return json_is_number(v) ? json_number_value(v) : ft_landscape_decimal(json_string_value(v));
}

/* Whether a and b are one value of a parameter. A number and the strings of that number are one
 * (16, "16", "16.0"): a results file may write a value either way, as Kernel Tuner's string keys
 * do. */
static int same_value(const json_t *a, const json_t *b) {
    const double x = number_of(a), y = number_of(b);
    if (!isnan(x) || !isnan(y)) return x == y;
    if (json_is_string(a) && json_is_string(b))
        return strcmp(json_string_value(a), json_string_value(b)) == 0;
    if (json_is_boolean(a) && json_is_boolean(b)) return json_is_true(a) == json_is_true(b);
    return 0;
}

/* An integer (in range), written as one or as its decimal string ("16", "16.0"). A JSON real
 * (16.0) is a named value unless an integer of it was read first. */
static int is_int_value(const json_t *v) {
    const double x = json_is_real(v) ? NAN : number_of(v);
    return x == floor(x) && x >= -(double)(1LL << 30) && x <= (double)(1LL << 30);
}

/* A parameter as the file lists it: its values (borrowed JSON), numeric or named. */
typedef struct {
    const char *name;
    const json_t *vals[FT_MAX_VALUES];
    int n;
} file_param;

typedef struct {
    const char *name; /* the file, in messages */
    file_param p[FT_MAX_PARAMS];
    int np;
} file_space;

/* The space of the landscape from the file's parameters. */
static ft_status make_space(const file_space *fs, ft_landscape *l, ft_err *err) {
    l->params = calloc((size_t)(fs->np ? fs->np : 1), sizeof *l->params);
    if (!l->params) return ft_err_set(err, FT_ENOMEM, "out of memory");
    l->space.params = l->params;
    l->space.nparams = fs->np;
    double size = 1;
    for (int i = 0; i < fs->np; i++) {
        const file_param *fp = &fs->p[i];
        ft_param *p = &l->params[i];
        size *= fp->n;
        if (!(p->name = own(l, fp->name))) return ft_err_set(err, FT_ENOMEM, "out of memory");
        p->doc = "";
        p->n = fp->n;
        int numeric = 1;
        for (int k = 0; k < fp->n; k++)
            numeric &= is_int_value(fp->vals[k]);
        if (numeric) {
            for (int k = 0; k < fp->n; k++)
                p->values[k] = (int)number_of(fp->vals[k]);
        } else {
            char **labels = calloc((size_t)fp->n, sizeof *labels);
            if (!own_ptr(l, labels)) return ft_err_set(err, FT_ENOMEM, "out of memory");
            for (int k = 0; k < fp->n; k++) {
                char text[128];
                value_text(fp->vals[k], text, sizeof text);
                if (!(labels[k] = own(l, text)))
                    return ft_err_set(err, FT_ENOMEM, "out of memory");
                p->values[k] = k;
            }
            p->labels = (const char *const *)labels;
        }
        p->def = p->values[0];
        for (int k = 0; k < fp->n; k++)
            for (int j = 0; j < k; j++)
                if (same_value(fp->vals[j], fp->vals[k])) {
                    char text[128];
                    value_text(fp->vals[k], text, sizeof text);
                    return ft_err_set(err, FT_EFORMAT, "%s: parameter %s lists the value %s twice",
                                      fs->name, fp->name, text);
                }
    }
    if (size > 4e18)
        return ft_err_set(err, FT_EFORMAT, "%s: %.3g configurations: too many to index", fs->name,
                          size);
    return FT_OK;
}

/* The index among param i's values of v; -1 when it is none of them. */
static int value_index(const file_space *fs, int i, const json_t *v) {
    for (int k = 0; k < fs->p[i].n; k++)
        if (same_value(fs->p[i].vals[k], v)) return k;
    return -1;
}

/* Parameter pname's listed values into fs (`where` names the list in messages: "tune_params",
 * "params"): 1 to FT_MAX_VALUES numbers or strings, and booleans where a file may hold them. */
static ft_status add_param(file_space *fs, const char *where, const char *pname, const json_t *vals,
                           int booleans, ft_err *err) {
    if (!json_is_array(vals) || json_array_size(vals) == 0 || json_array_size(vals) > FT_MAX_VALUES)
        return ft_err_set(err, FT_EFORMAT, "%s: %s %s is not a list of 1 to %d values", fs->name,
                          where, pname, FT_MAX_VALUES);
    ft_status ts = check_text(fs->name, where, "parameter", pname, err);
    if (ts) return ts;
    file_param *fp = &fs->p[fs->np++];
    fp->name = pname;
    for (size_t j = 0; j < json_array_size(vals); j++) {
        const json_t *v = json_array_get(vals, j);
        if (!json_is_number(v) && !json_is_string(v) && !(booleans && json_is_boolean(v)))
            return ft_err_set(err, FT_EFORMAT, "%s: %s %s holds a value that is not a number%s",
                              fs->name, where, pname,
                              booleans ? ", string or boolean" : " or string");
        if (json_is_string(v) &&
            (ts = check_text(fs->name, where, "value", json_string_value(v), err)))
            return ts;
        fp->vals[fp->n++] = v;
    }
    return FT_OK;
}

/* ---- candidates ---------------------------------------------------------------------------- */

typedef struct {
    int64_t key; /* space index */
    int entry;   /* the file's entry (cache key order, result index) */
    ft_config cfg;
    double score, cost;
    double ci_rel; /* NaN: unknown (every file but an export) */
} file_cand;

static int cmp_cand(const void *a, const void *b) {
    int64_t x = ((const file_cand *)a)->key, y = ((const file_cand *)b)->key;
    return (x > y) - (x < y);
}

/* Candidates into the landscape, in space order; fails on a configuration held twice (`what`
 * names entry i), none at all, or every one failed. */
static ft_status take_cands(file_cand *fc, int n, const char *name,
                            void (*what)(const void *, int, char *, size_t), const void *ctx,
                            ft_landscape *l, ft_err *err) {
    if (n == 0) return ft_err_set(err, FT_EFORMAT, "%s: holds no configuration", name);
    qsort(fc, (size_t)n, sizeof *fc, cmp_cand);
    for (int i = 1; i < n; i++)
        if (fc[i].key == fc[i - 1].key) {
            char a[256], b[256];
            int e0 = fc[i - 1].entry < fc[i].entry ? fc[i - 1].entry : fc[i].entry;
            int e1 = fc[i - 1].entry < fc[i].entry ? fc[i].entry : fc[i - 1].entry;
            what(ctx, e0, a, sizeof a);
            what(ctx, e1, b, sizeof b);
            return ft_err_set(err, FT_EFORMAT, "%s: entries %s and %s are the same configuration",
                              name, a, b);
        }
    ft_status as = ft_landscape_alloc(l, n, err);
    if (as) return as;
    l->ncands = n;
    for (int c = 0; c < n; c++) {
        l->cands[c] = fc[c].cfg;
        l->score[c] = fc[c].score;
        l->cost[c] = fc[c].cost;
        l->predicted[c] = NAN;
        l->ci_rel[c] = fc[c].ci_rel;
        l->ncost += !isnan(fc[c].cost);
        if (!(fc[c].score < INFINITY))
            l->nrejected++;
        else if (l->best < 0 || fc[c].score < l->score[l->best])
            l->best = c;
    }
    if (l->best < 0)
        return ft_err_set(err, FT_EFORMAT,
                          "%s: every one of its %d configurations failed: nothing to find", name, n);
    return FT_OK;
}

/* Sum of the numbers of an array; *any: whether it held one. */
static double sum_numbers(const json_t *a, int *any) {
    double t = 0;
    size_t i;
    const json_t *v;
    json_array_foreach(a, i, v) if (json_is_number(v)) {
        t += json_number_value(v);
        *any = 1;
    }
    return t;
}

/* A cost piece: adds o[k] (milliseconds) when it is a number. A piece recorded as NaN or an
 * infinity (Python's bare words, quoted on reading) was spent but not known: the whole cost is
 * unknown (NaN), never counted as 0. */
static void add_piece(const json_t *o, const char *k, double *t, int *any) {
    const json_t *v = json_object_get(o, k);
    const char *word = json_string_value(v);
    if (json_is_number(v) && isfinite(json_number_value(v))) {
        *t += json_number_value(v);
        *any = 1;
    } else if (word &&
               (!strcmp(word, "NaN") || !strcmp(word, "Infinity") || !strcmp(word, "-Infinity"))) {
        *t = NAN;
        *any = 1;
    }
}

static void init_file_landscape(ft_landscape *l, const char *format) {
    memset(l, 0, sizeof *l);
    l->best = l->def = -1;
    l->confirm_ratio = NAN;
    l->noise_ci_rel = NAN;
    l->nruns = 1;
    snprintf(l->format, sizeof l->format, "%s", format);
}

static void copy_text(char *dst, size_t n, const json_t *v) {
    if (json_is_string(v)) {
        snprintf(dst, n, "%s", json_string_value(v));
    } else if (v && !json_is_null(v)) {
        char *s = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
        snprintf(dst, n, "%s", s ? s : "");
        free(s);
    }
    if (n > 0) ft_text_printable(dst, '?');
}

/* ---- Kernel Tuner cache -------------------------------------------------------------------- */

typedef struct {
    const json_t *cache;
    const char **keys; /* entry i's key */
} kt_ctx;

static void kt_what(const void *ctx, int i, char *buf, size_t n) {
    snprintf(buf, n, "\"%s\"", ((const kt_ctx *)ctx)->keys[i]);
}

/* Entry `key`'s configuration: the key's comma-separated values, each one of its parameter's
 * values in tune_params, and agreeing with the entry's own fields where it has them. */
static ft_status kt_config(const file_space *fs, const ft_space *sp, const char *key,
                           const json_t *e, ft_config *cfg, ft_err *err) {
    int nv = 1;
    for (const char *p = key; *p; p++)
        nv += *p == ',';
    if (nv != fs->np)
        return ft_err_set(err, FT_EFORMAT, "%s: cache entry \"%s\" has %d values for %d parameters",
                          fs->name, key, nv, fs->np);
    cfg->n = fs->np;
    const char *p = key;
    for (int i = 0; i < fs->np; i++) {
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        char part[128];
        snprintf(part, sizeof part, "%.*s", (int)(len < sizeof part ? len : sizeof part - 1), p);
        const double part_number = ft_landscape_decimal(part); /* "0x1" and " 1" are not 1 */
        int k = -1;
        for (int j = 0; j < fs->p[i].n && k < 0; j++) {
            const json_t *v = fs->p[i].vals[j];
            char text[128];
            value_text(v, text, sizeof text);
            if (strcmp(text, part) == 0) k = j;
            if (k < 0 && !isnan(part_number) && number_of(v) == part_number) k = j;
        }
        if (k < 0)
            return ft_err_set(err, FT_EFORMAT,
                              "%s: cache entry \"%s\": %s is not one of the values tune_params "
                              "lists for %s",
                              fs->name, key, part, fs->p[i].name);
        const json_t *own_v = json_object_get(e, fs->p[i].name);
        if (own_v && !same_value(own_v, fs->p[i].vals[k])) {
            char text[128];
            value_text(own_v, text, sizeof text);
            return ft_err_set(err, FT_EFORMAT, "%s: cache entry \"%s\" says %s=%s, its key %s",
                              fs->name, key, fs->p[i].name, text, part);
        }
        cfg->v[i] = sp->params[i].values[k];
        p = end ? end + 1 : p + len;
    }
    return FT_OK;
}

static ft_status read_kt(const json_t *doc, const char *name, ft_landscape *l, ft_err *err) {
    init_file_landscape(l, "kt-cache");
    const json_t *tp = json_object_get(doc, "tune_params"), *cache = json_object_get(doc, "cache");
    const json_t *keys = json_object_get(doc, "tune_params_keys");
    if (!json_is_object(tp) || !json_is_object(cache))
        return ft_err_set(err, FT_EFORMAT,
                          "%s: a Kernel Tuner cache needs \"tune_params\" and \"cache\" objects",
                          name);
    if (keys && (!json_is_array(keys) || json_array_size(keys) != json_object_size(tp)))
        return ft_err_set(err, FT_EFORMAT,
                          "%s: \"tune_params_keys\" does not list the %zu parameters of "
                          "\"tune_params\"",
                          name, json_object_size(tp));
    /* Replay minimises time. A cache tuned for another objective (GFLOP/s, energy) still times
     * every entry, under "time"; its objective's values are not times and are not read. */
    const char *obj = "time";
    file_space fs = {.name = name};
    if (json_object_size(tp) > FT_MAX_PARAMS || json_object_size(tp) == 0)
        return ft_err_set(err, FT_EFORMAT, "%s: %zu tunable parameters (1 to %d can be read)", name,
                          json_object_size(tp), FT_MAX_PARAMS);
    const char *pname;
    json_t *pv;
    size_t i = 0;
    json_object_foreach((json_t *)tp, pname, pv) {
        /* tune_params_keys gives the order (Kernel Tuner's keys are formed in it) */
        const char *k = keys ? json_string_value(json_array_get(keys, i)) : pname;
        const json_t *vals = keys ? json_object_get(tp, k ? k : "") : pv;
        if (!k || !vals)
            return ft_err_set(err, FT_EFORMAT,
                              "%s: tune_params_keys[%zu] is not a parameter of tune_params", name,
                              i);
        for (int j = 0; j < fs.np; j++)
            if (strcmp(fs.p[j].name, k) == 0)
                return ft_err_set(err, FT_EFORMAT, "%s: tune_params_keys lists %s twice", name, k);
        ft_status ps = add_param(&fs, "tune_params", k, vals, 1, err);
        if (ps) return ps;
        i++;
    }
    ft_status s = make_space(&fs, l, err);
    if (s) return s;
    copy_text(l->device, sizeof l->device, json_object_get(doc, "device_name"));
    copy_text(l->kernel, sizeof l->kernel, json_object_get(doc, "kernel_name"));
    copy_text(l->problem_size, sizeof l->problem_size, json_object_get(doc, "problem_size"));

    size_t n = json_object_size(cache);
    file_cand *fc = malloc((n ? n : 1) * sizeof *fc);
    const char **ekeys = malloc((n ? n : 1) * sizeof *ekeys);
    if (!fc || !ekeys) {
        free(fc);
        free(ekeys);
        return ft_err_set(err, FT_ENOMEM, "out of memory");
    }
    int m = 0;
    const char *key;
    json_t *e;
    json_object_foreach((json_t *)cache, key, e) {
        file_cand *c = &fc[m];
        ekeys[m] = key;
        c->entry = m;
        c->ci_rel = NAN;
        if (!json_is_object(e)) {
            s = ft_err_set(err, FT_EFORMAT, "%s: cache entry \"%s\" is not an object", name, key);
            break;
        }
        if ((s = kt_config(&fs, &l->space, key, e, &c->cfg, err))) break;
        c->key = ft_space_index_of(&l->space, &c->cfg);
        const json_t *t = json_object_get(e, obj);
        if (isfinite(ft_landscape_decimal(
                json_string_value(t)))) { /* "1.5": neither a time nor an error name */
            s = ft_err_set(err, FT_EFORMAT,
                           "%s: cache entry \"%s\": \"%s\" is the string \"%s\", neither a "
                           "number (ms) nor an error name",
                           name, key, obj, json_string_value(t));
            break;
        } else if (json_is_string(t) || (json_is_number(t) && json_number_value(t) >= 1e20)) {
            /* an error name (older caches: 1e20; "NaN" or "Infinity", quote_nonfinite) */
            c->score = INFINITY;
        } else if (json_is_number(t) && json_number_value(t) > 0 &&
                   isfinite(json_number_value(t))) {
            c->score = json_number_value(t) * 1e-3;
        } else {
            s = ft_err_set(err, FT_EFORMAT,
                           "%s: cache entry \"%s\" has no positive \"%s\" (ms) nor an error "
                           "name",
                           name, key, obj);
            break;
        }
        double ms = 0;
        int any = 0, run = 0;
        add_piece(e, "compile_time", &ms, &any);
        add_piece(e, "verification_time", &ms, &any);
        add_piece(e, "benchmark_time", &ms, &run);
        if (!run) {
            const json_t *times = json_object_get(e, "times");
            if (json_is_array(times)) ms += sum_numbers(times, &run);
        }
        if (!run && json_is_number(t) && c->score < INFINITY) {
            ms += json_number_value(t);
            run = 1;
        }
        c->cost = any || run ? ms * 1e-3 : NAN;
        if (c->cost < 0) {
            s = ft_err_set(err, FT_EFORMAT,
                           "%s: cache entry \"%s\" costs a negative time (%g ms compiling, "
                           "verifying and running)",
                           name, key, ms);
            break;
        }
        m++;
    }
    kt_ctx ctx = {cache, ekeys};
    if (!s) s = take_cands(fc, m, name, kt_what, &ctx, l, err);
    free(fc);
    free(ekeys);
    return s;
}

/* ---- FAIR T4 results ----------------------------------------------------------------------- */

static void t4_what(const void *ctx, int i, char *buf, size_t n) {
    (void)ctx;
    snprintf(buf, n, "results[%d]", i);
}

/* Seconds per unit of a T4 time unit; 0: unknown. */
static double t4_unit(const char *u) {
    static const struct {
        const char *name;
        double s;
    } units[] = {{"milliseconds", 1e-3}, {"miliseconds", 1e-3}, {"ms", 1e-3},
                 {"seconds", 1},         {"s", 1},              {"microseconds", 1e-6},
                 {"us", 1e-6},           {"nanoseconds", 1e-9}, {"ns", 1e-9}};
    for (size_t i = 0; i < sizeof units / sizeof units[0]; i++)
        if (strcmp(u, units[i].name) == 0) return units[i].s;
    return 0;
}

/* The measurement of res named obj, as a time: its value into *val and seconds a unit into *u;
 * 0, or 1 with why it is not a time in why (its unit is not one, or it has none and obj is not
 * "time", the one measurement that metadata.timeunit covers). */
static int t4_time(const json_t *res, const char *obj, double unit, const json_t **val, double *u,
                   char *why, size_t n) {
    size_t j;
    const json_t *m;
    *val = NULL;
    *u = unit;
    json_array_foreach(json_object_get(res, "measurements"), j, m) {
        const char *mn = json_string_value(json_object_get(m, "name"));
        if (!mn || strcmp(mn, obj) != 0) continue;
        const char *mu = json_string_value(json_object_get(m, "unit"));
        double mul = mu && mu[0] ? t4_unit(mu) : strcmp(obj, "time") == 0 ? unit : 0;
        if (mul > 0) {
            *val = json_object_get(m, "value");
            *u = mul;
            return 0;
        }
        if (mu && mu[0])
            snprintf(why, n, "is measured in \"%s\", which is not a time unit", mu);
        else
            snprintf(why, n, "has no unit, so is not a time");
        return 1;
    }
    snprintf(why, n, "has no measurement");
    return strcmp(obj, "time") != 0;
}

static int cmp_json_number(const void *a, const void *b) {
    double x = number_of(*(const json_t *const *)a), y = number_of(*(const json_t *const *)b);
    return (x > y) - (x < y);
}

static ft_status read_t4(const json_t *doc, const char *name, ft_landscape *l, ft_err *err) {
    init_file_landscape(l, "t4");
    const json_t *results = json_object_get(doc, "results"), *meta = json_object_get(doc, "metadata");
    if (!json_is_array(results))
        return ft_err_set(err, FT_EFORMAT, "%s: a T4 results file needs a \"results\" array", name);
    const json_t *sv = json_object_get(doc, "schema_version");
    if (sv && (!json_is_string(sv) || strncmp(json_string_value(sv), "1.", 2) != 0))
        return ft_err_set(err, FT_EFORMAT,
                          "%s: schema_version %s: flaretune reads T4 results of schema 1.x", name,
                          json_is_string(sv) ? json_string_value(sv) : "that is no string");
    size_t n = json_array_size(results);
    if (n == 0) return ft_err_set(err, FT_EFORMAT, "%s: holds no configuration", name);
    const json_t *tu = json_object_get(meta, "timeunit");
    double unit = 1e-3; /* Kernel Tuner's */
    if (tu && (!json_is_string(tu) || !(unit = t4_unit(json_string_value(tu)))))
        return ft_err_set(err, FT_EFORMAT,
                          "%s: metadata.timeunit is not a time unit (milliseconds, seconds, "
                          "microseconds or nanoseconds)",
                          name);
    copy_text(l->device, sizeof l->device, json_object_get(meta, "device_name"));
    copy_text(l->kernel, sizeof l->kernel, json_object_get(meta, "kernel_name"));
    copy_text(l->problem_size, sizeof l->problem_size, json_object_get(meta, "problem_size"));

    /* The parameters: the first configuration's names; every value any result gives. */
    file_space fs = {.name = name};
    const json_t *c0 = json_object_get(json_array_get(results, 0), "configuration");
    if (!json_is_object(c0) || json_object_size(c0) == 0 || json_object_size(c0) > FT_MAX_PARAMS)
        return ft_err_set(err, FT_EFORMAT,
                          "%s: results[0] has no \"configuration\" of 1 to %d parameters", name,
                          FT_MAX_PARAMS);
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)c0, k, v) {
        ft_status ts = check_text(name, "results[0].configuration", "parameter", k, err);
        if (ts) return ts;
        fs.p[fs.np++].name = k;
    }
    for (size_t r = 0; r < n; r++) {
        const json_t *res = json_array_get(results, r), *cfg = json_object_get(res, "configuration");
        if (!json_is_object(cfg) || json_object_size(cfg) != (size_t)fs.np)
            return ft_err_set(err, FT_EFORMAT,
                              "%s: results[%zu] has no \"configuration\" of the %d parameters of "
                              "results[0]",
                              name, r, fs.np);
        for (int i = 0; i < fs.np; i++) {
            const json_t *x = json_object_get(cfg, fs.p[i].name);
            if (!x || !(json_is_number(x) || json_is_string(x) || json_is_boolean(x)))
                return ft_err_set(err, FT_EFORMAT,
                                  "%s: results[%zu].configuration has no number, string or "
                                  "boolean %s",
                                  name, r, fs.p[i].name);
            int at = value_index(&fs, i, x);
            if (at >= 0) {
                /* "16" and 16: the number stands for both, so the parameter stays numeric
                 * (16 and 16.0 keep the first: an integer stays one) */
                if (json_is_number(x) && json_is_string(fs.p[i].vals[at])) fs.p[i].vals[at] = x;
                continue;
            }
            if (fs.p[i].n == FT_MAX_VALUES)
                return ft_err_set(err, FT_EFORMAT, "%s: parameter %s has more than %d values", name,
                                  fs.p[i].name, FT_MAX_VALUES);
            char where[48];
            snprintf(where, sizeof where, "results[%zu].configuration", r);
            ft_status ts = json_is_string(x)
                               ? check_text(name, where, "value", json_string_value(x), err)
                               : FT_OK;
            if (ts) return ts;
            fs.p[i].vals[fs.p[i].n++] = x;
        }
    }
    for (int i = 0; i < fs.np; i++) {
        int numbers = 1;
        for (int j = 0; j < fs.p[i].n; j++)
            numbers &= !isnan(number_of(fs.p[i].vals[j]));
        if (numbers) qsort(fs.p[i].vals, (size_t)fs.p[i].n, sizeof fs.p[i].vals[0], cmp_json_number);
    }
    ft_status s = make_space(&fs, l, err);
    if (s) return s;

    file_cand *fc = malloc(n * sizeof *fc);
    if (!fc) return ft_err_set(err, FT_ENOMEM, "out of memory");
    for (size_t r = 0; r < n && !s; r++) {
        const json_t *res = json_array_get(results, r), *cfg = json_object_get(res, "configuration");
        file_cand *c = &fc[r];
        c->entry = (int)r;
        c->ci_rel = NAN;
        c->cfg.n = fs.np;
        for (int i = 0; i < fs.np; i++) {
            int j = value_index(&fs, i, json_object_get(cfg, fs.p[i].name));
            c->cfg.v[i] = l->params[i].values[j];
        }
        c->key = ft_space_index_of(&l->space, &c->cfg);
        const json_t *objs = json_object_get(res, "objectives");
        const char *obj = json_string_value(json_array_get(objs, 0));
        if (!obj) obj = "time";
        const json_t *inv = json_object_get(res, "invalidity"), *val = NULL;
        double u = unit;
        char why[160], why_time[160];
        int bad = t4_time(res, obj, unit, &val, &u, why, sizeof why);
        /* Replay minimises time: an objective that is not one (GFLOP/s) is read by the result's
         * "time" measurement instead. */
        const char *read_as = obj;
        if (bad && strcmp(obj, "time") != 0) {
            bad = t4_time(res, "time", unit, &val, &u, why_time, sizeof why_time) || !val;
            read_as = "time";
        }
        if (bad && json_is_string(inv) && strcmp(json_string_value(inv), "correct") == 0) {
            s = ft_err_set(
                err, FT_EFORMAT, "%s: results[%zu]: objective \"%s\" %s%s", name, r, obj, why,
                strcmp(obj, "time") ? ", and no \"time\" measurement to read instead" : "");
            break;
        }
        const json_t *ok = json_object_get(res, "correctness");
        if (!json_is_string(inv)) {
            s = ft_err_set(err, FT_EFORMAT, "%s: results[%zu] has no \"invalidity\"", name, r);
        } else if (!strcmp(json_string_value(inv), "correct") && json_is_number(ok) &&
                   json_number_value(ok) != 1) {
            s = ft_err_set(err, FT_EFORMAT,
                           "%s: results[%zu] is \"correct\" but its correctness is %g, not 1", name,
                           r, json_number_value(ok));
        } else if (strcmp(json_string_value(inv), "correct") != 0) {
            c->score = INFINITY;
        } else if (json_is_number(val) && json_number_value(val) > 0 &&
                   isfinite(json_number_value(val))) {
            c->score = json_number_value(val) * u;
        } else {
            s = ft_err_set(err, FT_EFORMAT,
                           "%s: results[%zu] is \"correct\" but has no positive measurement "
                           "\"%s\"",
                           name, r, read_as);
        }
        const json_t *times = json_object_get(res, "times");
        double t = 0;
        int any = 0;
        add_piece(times, json_object_get(times, "compilation") ? "compilation" : "compilation_time",
                  &t, &any);
        add_piece(times, "validation", &t, &any);
        const json_t *rt = json_object_get(times, "runtimes");
        if (json_is_array(rt)) t += sum_numbers(rt, &any);
        c->cost = any ? t * unit : NAN;
        if (!s && c->cost < 0)
            s = ft_err_set(err, FT_EFORMAT,
                           "%s: results[%zu] costs a negative time (its times sum to %g)", name, r,
                           t);
    }
    if (!s) s = take_cands(fc, (int)n, name, t4_what, NULL, l, err);
    free(fc);
    return s;
}

/* ---- flaretune's own export ---------------------------------------------------------------- */

static void export_what(const void *ctx, int i, char *buf, size_t n) {
    (void)ctx;
    snprintf(buf, n, "candidates[%d]", i);
}

/* A landscape as `replay --export` writes it (docs/events.md "Landscape export"): its
 * parameters, and each candidate's score and cost as exported (a log's confirmation already
 * applied). It names its op, but is read as a file: the op's name is its kernel, the backend
 * its device, its dims its problem size. */
static ft_status read_export(const json_t *doc, const char *name, ft_landscape *l, ft_err *err) {
    init_file_landscape(l, "export");
    const char *fmt = json_string_value(json_object_get(doc, "format"));
    if (strcmp(fmt, "flaretune-landscape/1") != 0)
        return ft_err_set(err, FT_EFORMAT,
                          "%s: format %s: this flaretune reads flaretune-landscape/1", name, fmt);
    const json_t *params = json_object_get(doc, "params"),
                 *cands = json_object_get(doc, "candidates");
    if (!json_is_array(params) || json_array_size(params) == 0 ||
        json_array_size(params) > FT_MAX_PARAMS || !json_is_array(cands))
        return ft_err_set(err, FT_EFORMAT,
                          "%s: a landscape export needs \"params\" (1 to %d) and \"candidates\" "
                          "arrays",
                          name, FT_MAX_PARAMS);
    const json_t *op = json_object_get(doc, "op"), *backend = json_object_get(doc, "backend");
    copy_text(l->kernel, sizeof l->kernel,
              json_is_string(op) ? op : json_object_get(doc, "kernel"));
    copy_text(l->device, sizeof l->device,
              json_is_string(backend) ? backend : json_object_get(doc, "device"));
    const json_t *dims = json_object_get(doc, "dims");
    copy_text(l->problem_size, sizeof l->problem_size,
              json_is_string(dims) && json_string_length(dims)
                  ? dims
                  : json_object_get(doc, "problem_size"));
    file_space fs = {.name = name};
    size_t i;
    const json_t *p;
    json_array_foreach(params, i, p) {
        const char *pn = json_string_value(json_object_get(p, "name"));
        if (!pn) return ft_err_set(err, FT_EFORMAT, "%s: params[%zu] has no \"name\"", name, i);
        ft_status ps = add_param(&fs, "params", pn, json_object_get(p, "values"), 0, err);
        if (ps) return ps;
    }
    ft_status s = make_space(&fs, l, err);
    if (s) return s;
    size_t n = json_array_size(cands);
    file_cand *fc = malloc((n ? n : 1) * sizeof *fc);
    if (!fc) return ft_err_set(err, FT_ENOMEM, "out of memory");
    for (size_t r = 0; r < n && !s; r++) {
        const json_t *e = json_array_get(cands, r), *cfg = json_object_get(e, "config");
        file_cand *c = &fc[r];
        c->entry = (int)r;
        c->cfg.n = fs.np;
        if (!json_is_object(cfg)) {
            s = ft_err_set(err, FT_EFORMAT, "%s: candidates[%zu] has no \"config\" object", name,
                           r);
            break;
        }
        const char *pk;
        const json_t *pv;
        json_object_foreach((json_t *)cfg, pk, pv) {
            int known = 0;
            for (int k = 0; k < fs.np; k++)
                known |= strcmp(fs.p[k].name, pk) == 0;
            if (!known) {
                s = ft_err_set(err, FT_EFORMAT,
                               "%s: candidates[%zu].config names %s, which params does not list",
                               name, r, pk);
                break;
            }
        }
        if (s) break;
        for (int k = 0; k < fs.np && !s; k++) {
            int j = value_index(&fs, k, json_object_get(cfg, fs.p[k].name));
            if (j < 0)
                s = ft_err_set(err, FT_EFORMAT,
                               "%s: candidates[%zu].config has no %s of the values params lists",
                               name, r, fs.p[k].name);
            else
                c->cfg.v[k] = l->params[k].values[j];
        }
        if (s) break;
        c->key = ft_space_index_of(&l->space, &c->cfg);
        const json_t *sc = json_object_get(e, "score_s"), *co = json_object_get(e, "cost_s");
        if (json_is_null(sc)) {
            c->score = INFINITY;
        } else if (json_is_number(sc) && json_number_value(sc) > 0 &&
                   isfinite(json_number_value(sc))) {
            c->score = json_number_value(sc);
        } else {
            s = ft_err_set(err, FT_EFORMAT,
                           "%s: candidates[%zu] has no positive \"score_s\" (null: rejected)", name,
                           r);
        }
        const json_t *ci = json_object_get(e, "ci_rel");
        c->cost = json_is_number(co) ? json_number_value(co) : NAN;
        c->ci_rel = json_is_number(ci) ? json_number_value(ci) : NAN;
        if (!s && (c->cost < 0 || (co && !json_is_null(co) && !json_is_number(co))))
            s = ft_err_set(
                err, FT_EFORMAT,
                "%s: candidates[%zu] has a \"cost_s\" that is not a time (null: unknown)", name, r);
        if (!s && (c->ci_rel < 0 || (ci && !json_is_null(ci) && !json_is_number(ci))))
            s = ft_err_set(err, FT_EFORMAT,
                           "%s: candidates[%zu] has a \"ci_rel\" that is not a relative width of "
                           "at least 0 (null: unknown)",
                           name, r);
    }
    if (!s) s = take_cands(fc, (int)n, name, export_what, NULL, l, err);
    if (!s) s = ft_landscape_summarise_noise(l, err);
    free(fc);
    return s;
}

/* ---- detection ----------------------------------------------------------------------------- */

/* The event log in data: one JSON object a line; blank lines skipped, a damaged last line (a
 * run still writing) ignored, as ft_eventlog_read does. */
static ft_status log_from_lines(const char *data, size_t n, const char *name, ft_landscape *l,
                                ft_err *err) {
    json_t *events = json_array();
    if (!events) return ft_err_set(err, FT_ENOMEM, "out of memory");
    size_t at = 0, line = 0;
    while (at < n) {
        const char *nl = memchr(data + at, '\n', n - at);
        size_t end = nl ? (size_t)(nl - data) : n;
        line++;
        size_t b = at;
        while (b < end && isspace((unsigned char)data[b]))
            b++;
        if (b < end) {
            json_error_t je;
            json_t *ev = json_loadb(data + b, end - b, 0, &je);
            if (!json_is_object(ev)) {
                json_decref(ev);
                if (nl) {
                    json_decref(events);
                    return ft_err_set(err, FT_EFORMAT, "%s: line %zu is not a JSON object", name,
                                      line);
                }
            } else {
                json_array_append_new(events, ev);
            }
        }
        at = end + 1;
    }
    ft_status s = ft_landscape_from_events(events, name, l, err);
    json_decref(events);
    return s;
}

/* Does data[0..n) hold `what`? */
static int holds(const char *data, size_t n, const char *what) {
    size_t k = strlen(what);
    for (size_t i = 0; i + k <= n; i++)
        if (data[i] == what[0] && memcmp(data + i, what, k) == 0) return 1;
    return 0;
}

/* Is the first non-blank line a JSON object with a string "event"? (Only that line is parsed:
 * the first line of a cache or T4 file does not parse alone.) */
static int is_log(const char *data, size_t n) {
    size_t b = 0;
    while (b < n && isspace((unsigned char)data[b]))
        b++;
    const char *nl = memchr(data + b, '\n', n - b);
    size_t end = nl ? (size_t)(nl - data) : n;
    json_error_t je;
    json_t *first = json_loadb(data + b, end - b, 0, &je);
    int yes = json_is_string(json_object_get(first, "event"));
    json_decref(first);
    return yes;
}

/* Python's json module writes a NaN or an infinity as a bare NaN, Infinity or -Infinity, which
 * JSON has not: a Kernel Tuner cache with such an observed value (or time) would not parse. A
 * copy of data (*out, m bytes; the caller frees it) with each one outside strings quoted, so that
 * a time of NaN reads as an error name (a failed configuration); 0 when data holds none. */
static int quote_nonfinite(const char *data, size_t n, char **out, size_t *m) {
    static const char *const words[] = {"-Infinity", "Infinity", "NaN"};
    char *b = NULL;
    size_t k = 0, cap = 0;
    int in_string = 0, found = 0;
    for (size_t i = 0; i < n; i++) {
        size_t len = 0;
        if (!in_string)
            for (int w = 0; w < 3 && !len; w++) {
                size_t wl = strlen(words[w]);
                if (i + wl <= n && memcmp(data + i, words[w], wl) == 0 &&
                    (i + wl == n || !isalnum((unsigned char)data[i + wl])) &&
                    (i == 0 || !isalnum((unsigned char)data[i - 1])))
                    len = wl;
            }
        if (k + len + 3 > cap) {
            cap = cap ? 2 * cap + len + 3 : n + 64;
            char *nb = realloc(b, cap);
            if (!nb) {
                free(b);
                return 0;
            }
            b = nb;
        }
        if (len) {
            b[k++] = '"';
            memcpy(b + k, data + i, len);
            k += len;
            b[k++] = '"';
            i += len - 1;
            found = 1;
            continue;
        }
        if (in_string && data[i] == '\\' && i + 1 < n) {
            b[k++] = data[i++];
        } else if (data[i] == '"') {
            in_string = !in_string;
        }
        b[k++] = data[i];
    }
    if (!found) {
        free(b);
        return 0;
    }
    *out = b;
    *m = k;
    return 1;
}

/* Kernel Tuner's reading of a cache it has not closed yet: strip, drop a trailing comma, close.
 * A writer appends an entry a line and closes the cache and the document ("}\n}") at the end, so
 * a file cut before the end lacks one closing brace or both: each is tried. With cut, the last
 * line is dropped first, which a crash may have cut short, but only where it is: a line that
 * ends an entry ("}", "},") is whole, and dropping it would lose a measurement. *doc is NULL when
 * nothing parses. */
static ft_status kt_reopen(const char *data, size_t n, int cut, json_t **doc, ft_err *err) {
    static const char *const closers[] = {"}\n}", "}"};
    *doc = NULL;
    size_t m = n;
    while (m > 0 && isspace((unsigned char)data[m - 1]))
        m--;
    if (cut) {
        size_t e = m;
        if (e > 0 && data[e - 1] == ',') e--;
        if (e > 0 && data[e - 1] == '}') return FT_OK; /* whole: nothing to drop */
        while (m > 0 && data[m - 1] != '\n')
            m--;
        while (m > 0 && isspace((unsigned char)data[m - 1]))
            m--;
    }
    if (m == 0 || !holds(data, m, "\"cache\"")) return FT_OK;
    if (data[m - 1] == ',') m--;
    char *fixed = malloc(m + 4);
    if (!fixed) return ft_err_set(err, FT_ENOMEM, "out of memory");
    memcpy(fixed, data, m);
    for (int c = 0; c < 2 && !*doc; c++) {
        const size_t k = strlen(closers[c]);
        memcpy(fixed + m, closers[c], k);
        json_error_t je;
        *doc = json_loadb(fixed, m + k, JSON_REJECT_DUPLICATES, &je);
    }
    free(fixed);
    return FT_OK;
}

/* data as one JSON document: as it is, else as an unclosed Kernel Tuner cache (kt_reopen), else
 * either with its bare NaNs and infinities quoted (quote_nonfinite), and only then without a
 * last line cut short. *doc is NULL when none parses; je then says why the text as it is does
 * not. */
static ft_status parse_doc(const char *data, size_t n, json_t **doc, json_error_t *je,
                           ft_err *err) {
    *doc = json_loadb(data, n, JSON_REJECT_DUPLICATES, je);
    if (*doc) return FT_OK;
    ft_status s = kt_reopen(data, n, 0, doc, err);
    if (s != FT_OK || *doc) return s;
    char *fixed = NULL;
    size_t m = 0;
    const int quoted = quote_nonfinite(data, n, &fixed, &m);
    if (quoted) {
        json_error_t again;
        *doc = json_loadb(fixed, m, JSON_REJECT_DUPLICATES, &again);
        if (!*doc) s = kt_reopen(fixed, m, 0, doc, err);
    }
    if (s == FT_OK && !*doc) s = kt_reopen(quoted ? fixed : data, quoted ? m : n, 1, doc, err);
    free(fixed);
    return s;
}

ft_status ft_kt_cache_read(const char *path, json_t **doc, ft_err *err) {
    *doc = NULL;
    char *data;
    size_t n;
    int gz;
    ft_status s = read_all(path, &data, &n, &gz, err);
    if (s != FT_OK) return s;
    json_error_t je = {.line = 0};
    s = parse_doc(data, n, doc, &je, err);
    free(data);
    if (s == FT_OK && !*doc)
        return ft_err_set(err, FT_EFORMAT, "%s: not a Kernel Tuner cache: line %d: %s", path,
                          je.line, je.text);
    if (s == FT_OK && !json_is_object(json_object_get(*doc, "cache"))) {
        json_decref(*doc);
        *doc = NULL;
        s = ft_err_set(err, FT_EFORMAT, "%s: JSON without a \"cache\" object: not a Kernel "
                       "Tuner cache", path);
    }
    return s;
}

ft_status ft_landscape_from_buffer(const char *data, size_t n, const char *name, ft_landscape *l,
                                   ft_err *err) {
    memset(l, 0, sizeof *l);
    l->best = l->def = -1;
    if (is_log(data, n)) return log_from_lines(data, n, name, l, err);
    json_error_t je;
    json_t *doc;
    ft_status s = parse_doc(data, n, &doc, &je, err);
    if (s != FT_OK) return s;
    if (!doc)
        return ft_err_set(err, FT_EFORMAT,
                          "%s: not a flaretune event log, Kernel Tuner cache or T4 results file: "
                          "line %d: %s",
                          name, je.line, je.text);
    const char *format = json_string_value(json_object_get(doc, "format"));
    if (format && strncmp(format, "flaretune-landscape/", 20) == 0)
        s = read_export(doc, name, l, err);
    else if (json_is_object(json_object_get(doc, "cache")) || json_object_get(doc, "tune_params"))
        s = read_kt(doc, name, l, err);
    else if (json_object_get(doc, "results") || json_object_get(doc, "schema_version"))
        s = read_t4(doc, name, l, err);
    else
        s = ft_err_set(err, FT_EFORMAT,
                       "%s: a JSON object with neither \"tune_params\" and \"cache\" (Kernel "
                       "Tuner) nor \"results\" (T4): not a landscape",
                       name);
    json_decref(doc);
    if (s) ft_landscape_free(l);
    return s;
}

ft_status ft_landscape_load(const char *path, ft_landscape *l, ft_err *err) {
    char *data;
    size_t n;
    int gz = 0;
    memset(l, 0, sizeof *l);
    l->best = l->def = -1;
    ft_status s = read_all(path, &data, &n, &gz, err);
    if (s) return s;
    struct stat sb;
    if (!gz && is_log(data, n) && stat(path, &sb) == 0 && S_ISREG(sb.st_mode)) {
        /* A plain log file: its own reader (torn lines, sizes, its messages). A pipe cannot be
         * read twice: its text is read as it came, below. */
        free(data);
        json_t *events;
        int torn;
        if ((s = ft_eventlog_read(path, &events, &torn, err))) return s;
        s = ft_landscape_from_events(events, path, l, err);
        json_decref(events);
        return s;
    }
    s = ft_landscape_from_buffer(data, n, path, l, err);
    free(data);
    return s;
}

/* ---- what other code asks of a landscape ---------------------------------------------------- */

const char *ft_landscape_format_name(const ft_landscape *l) {
    return strcmp(l->format, "t4") == 0       ? "FAIR T4 results"
           : strcmp(l->format, "export") == 0 ? "flaretune landscape export"
           : strcmp(l->format, "log") == 0    ? "flaretune event log"
                                              : "Kernel Tuner cache";
}

void ft_landscape_describe(const ft_landscape *l, char *buf, size_t n) {
    if (l->op) {
        char dims[256];
        ft_call_dims_str(&l->call, dims, sizeof dims);
        snprintf(buf, n, "%s on %s, preset %s (%s)", l->op->name,
                 l->backend ? l->backend->name : "-", l->preset[0] ? l->preset : "-", dims);
        return;
    }
    snprintf(buf, n, "%s on %s (%s%s%s)", l->kernel[0] ? l->kernel : "a kernel",
             l->device[0] ? l->device : "an unnamed device", ft_landscape_format_name(l),
             l->problem_size[0] ? ", problem size " : "", l->problem_size);
}
