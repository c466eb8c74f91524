/* t1.c: the FAIR T1 input format read into a space, its constraints, launch and arguments
 * (tuner/t1.h). Every check a file can fail is made here, when it is read. */
#define _GNU_SOURCE
#include "tuner/t1.h"

#include "core/npy.h"
#include "core/rng.h"
#include "core/status.h"
#include "tuner/replay.h"

#include <ctype.h>
#include <errno.h>
#include <float.h>
#include <jansson.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define T1_MAX_BYTES (16u << 20)

/* Slots of the expressions: the parameters, then ProblemSize. */
#define SLOT_PROBLEM(t) ((t)->space.nparams)

/* The most steps of the walk through a T1 space (configurations reached whole and branches its
 * conditions refuse). */
#define FT_T1_MAX_ENUMERATED (1LL << 26)

static ft_status bad(ft_err *err, const char *name, const char *fmt, const char *what) {
    return ft_err_set(err, FT_EFORMAT, "%s: %s%s", name, fmt, what ? what : "");
}

static char *dup_str(const char *s) { return s ? strdup(s) : NULL; }

/* The allowed configurations in space order (walk, below); visit returns 1 to stop. */
typedef int (*t1_visit)(void *ctx, const ft_config *c);
static ft_status walk(const ft_t1 *t, t1_visit visit, void *ctx, int *capped, ft_err *err);
static void count_text(const ft_t1 *t, char *buf, size_t n);
/* The count's two factors, the list and the draw from them (below): ft_t1_select counts once. */
static ft_status count_parts(const ft_t1 *t, int64_t *named, int64_t *per, ft_err *err);
static ft_status list_counted(const ft_t1 *t, int64_t m, ft_config **cfgs, int64_t *n, ft_err *err);
static ft_status draw_counted(const ft_t1 *t, int64_t named, int64_t per, int64_t k, uint64_t seed,
                              ft_config **cfgs, int64_t *n, ft_err *err);

/* The allowed configuration that changes fewest of want's values, the first in space order
 * among equals: the walk stops at one that changes a single value. */
typedef struct {
    ft_config want, best;
    int best_d;
} nearest;

static int nearest_visit(void *ctx, const ft_config *c) {
    nearest *n = ctx;
    int dist = 0;
    for (int i = 0; i < c->n; i++)
        dist += c->v[i] != n->want.v[i];
    if (dist < n->best_d) {
        n->best_d = dist;
        n->best = *c;
    }
    return n->best_d <= 1;
}

static const char *get_str(json_t *o, const char *key) {
    json_t *v = json_object_get(o, key);
    return json_is_string(v) ? json_string_value(v) : NULL;
}

void ft_t1_free(ft_t1 *t) {
    if (!t) return;
    free(t->path);
    free(t->benchmark);
    free(t->kernel_name);
    free(t->kernel_file);
    free(t->language);
    for (int i = 0; i < t->noptions; i++) free(t->options[i]);
    free(t->options);
    for (int i = 0; i < t->space.nparams; i++) {
        free((char *)t->params[i].name);
        if (t->labels[i])
            for (int k = 0; k < t->params[i].n; k++) free(t->labels[i][k]);
        free(t->labels[i]);
        free(t->values[i]);
    }
    for (int i = 0; i < t->nconditions; i++) {
        ft_expr_free(t->conditions[i]);
        free(t->constraint_text[i]);
    }
    for (int d = 0; d < 3; d++) {
        ft_expr_free(t->local[d]);
        ft_expr_free(t->global[d]);
    }
    for (int i = 0; i < t->nargs; i++) {
        free(t->args[i].name);
        free(t->args[i].size_text);
        free(t->args[i].data_source);
        ft_expr_free(t->args[i].generator);
    }
    free(t);
}

/* ---- the slots expressions see ----------------------------------------------------------------- */

typedef struct slots {
    const char *names[FT_MAX_PARAMS + 1];
    ft_expr_value v[FT_MAX_PARAMS + 1];
    ft_expr_value problem[3];
} slots;

static void slot_names(const ft_t1 *t, slots *s) {
    for (int i = 0; i < t->space.nparams; i++) s->names[i] = t->params[i].name;
    s->names[SLOT_PROBLEM(t)] = "ProblemSize";
    for (int d = 0; d < t->nproblem; d++) s->problem[d] = ft_expr_int(t->problem[d]);
    s->v[SLOT_PROBLEM(t)] = ft_expr_list(s->problem, t->nproblem);
}

/* A configuration's values (scalar) or every parameter's list of values (lists = 1). */
static void slot_values(const ft_t1 *t, const ft_config *cfg, int lists, slots *s) {
    slot_names(t, s);
    for (int i = 0; i < t->space.nparams; i++) {
        if (lists) {
            s->v[i] = ft_expr_list(t->values[i], t->params[i].n);
            continue;
        }
        const ft_param *p = &t->params[i];
        int v = cfg->v[i];
        if (t->labels[i]) s->v[i] = t->values[i][v];
        else s->v[i] = ft_expr_int(v);
        (void)p;
    }
}

static ft_status compile(const ft_t1 *t, const char *name, const char *what, const char *src,
                         ft_expr **out, ft_err *err) {
    slots s;
    slot_names(t, &s);
    ft_err e = {0};
    if (ft_expr_compile(src, s.names, t->space.nparams + 1, out, &e) != FT_OK)
        return ft_err_set(err, FT_EFORMAT, "%s: %s: %s", name, what, e.msg);
    return FT_OK;
}

/* ---- reading ----------------------------------------------------------------------------------- */

/* Add a sentence to a note, t->default_note or t->read_note ("; " between sentences; what does
 * not fit is cut). */
static void note_to(char *note, size_t n, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void note_to(char *note, size_t n, const char *fmt, ...) {
    size_t used = strlen(note);
    if (used && used + 2 < n) {
        memcpy(note + used, "; ", 3);
        used += 2;
    }
    va_list ap;
    va_start(ap, fmt);
    if (used < n) vsnprintf(note + used, n - used, fmt, ap);
    va_end(ap);
}

/* A tunable's name and values as the outputs hold them (a Kernel Tuner cache, whose keys join
 * the values with commas; a T4 file) and as replay reads them back: refused here, when the file
 * is read, rather than written into a file that then cannot be read, or read as another
 * configuration. A control character is refused for the compiler too: a value is a macro's
 * value on its command line, one line of text. items[k] is value k, text[k] its text. */
static ft_status check_writable(const char *name, const char *pn, const ft_expr_value *items,
                                char *const *text, int n, ft_err *err) {
    const char *flaw = ft_landscape_text_flaw(pn);
    if (flaw) return ft_err_set(err, FT_EFORMAT, "%s: parameter %.64s %s", name, pn, flaw);
    double num[FT_MAX_VALUES];
    for (int k = 0; k < n; k++) {
        if ((flaw = ft_landscape_text_flaw(text[k])) != NULL)
            return ft_err_set(err, FT_EFORMAT, "%s: parameter %s: Values[%d] %s", name, pn, k,
                              flaw);
        if (strchr(text[k], ','))
            return ft_err_set(err, FT_EFORMAT,
                              "%s: parameter %s: Values[%d], \"%.64s\", holds a comma, which a "
                              "Kernel Tuner cache's keys use between values",
                              name, pn, k, text[k]);
        num[k] = NAN;
        if (items[k].kind == FT_EXPR_INT) {
            if (items[k].i > (1LL << 53) || items[k].i < -(1LL << 53))
                return ft_err_set(err, FT_EFORMAT,
                                  "%s: parameter %s: Values[%d], %lld, is beyond 2^53, where the "
                                  "readers of the results (JSON numbers as doubles) cannot tell "
                                  "it from its neighbours",
                                  name, pn, k, items[k].i);
            num[k] = (double)items[k].i;
        } else if (items[k].kind == FT_EXPR_FLOAT) {
            if (!isfinite(items[k].f))
                return ft_err_set(err, FT_EFORMAT,
                                  "%s: parameter %s: Values[%d] is not a finite number (%.64s)",
                                  name, pn, k, text[k]);
            num[k] = items[k].f;
        } else {
            num[k] = ft_landscape_decimal(text[k]); /* as the readers take a string */
        }
        for (int j = 0; j < k; j++)
            if (num[j] == num[k])
                return ft_err_set(err, FT_EFORMAT,
                                  "%s: parameter %s lists %.64s and %.64s, one number to the "
                                  "readers of the results (Kernel Tuner, T4, replay)",
                                  name, pn, text[j], text[k]);
    }
    return FT_OK;
}

static ft_status read_params(ft_t1 *t, json_t *cs, const char *name, ft_err *err) {
    json_t *tp = json_object_get(cs, "TuningParameters");
    if (!json_is_array(tp) || json_array_size(tp) == 0)
        return bad(err, name, "ConfigurationSpace.TuningParameters: a non-empty list is needed", NULL);
    if (json_array_size(tp) > FT_MAX_PARAMS)
        return ft_err_set(err, FT_EFORMAT, "%s: %zu tunable parameters; at most %d are supported",
                          name, json_array_size(tp), FT_MAX_PARAMS);
    size_t i;
    json_t *p;
    json_array_foreach(tp, i, p) {
        const char *pn = get_str(p, "Name"), *type = get_str(p, "Type");
        json_t *vals = json_object_get(p, "Values");
        char where[160];
        snprintf(where, sizeof where, "TuningParameters[%zu]", i);
        if (!pn || !*pn) return ft_err_set(err, FT_EFORMAT, "%s: %s: no Name", name, where);
        for (const char *c = pn; *c; c++)
            if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || *c == '_' ||
                  (c > pn && *c >= '0' && *c <= '9')))
                return ft_err_set(err, FT_EFORMAT, "%s: %s: Name \"%.64s\" is not an identifier",
                                  name, where, pn);
        for (int k = 0; k < (int)i; k++)
            if (strcmp(t->params[k].name, pn) == 0)
                return ft_err_set(err, FT_EFORMAT, "%s: parameter %s named twice", name, pn);
        if (strcmp(pn, "ProblemSize") == 0)
            return ft_err_set(err, FT_EFORMAT, "%s: a parameter may not be named ProblemSize", name);
        int is_string = type && strcmp(type, "string") == 0;
        /* uint: the schema's unsigned integer (the BAT suite's nbody file), an int that is never
         * negative. */
        int is_uint = type && strcmp(type, "uint") == 0;
        if (!type || (!is_string && !is_uint && strcmp(type, "int") && strcmp(type, "float")))
            return ft_err_set(err, FT_EFORMAT,
                              "%s: parameter %s: Type \"%.32s\" (int, uint, float or string)", name,
                              pn, type ? type : "");
        ft_param *fp = &t->params[i];
        fp->name = strdup(pn);
        fp->doc = "a parameter of the T1 file";
        t->space.nparams = (int)i + 1;
        if (!fp->name) return ft_err_set(err, FT_ENOMEM, "%s: out of memory", name);
        /* The values: a JSON list, or a string holding a Python list expression. */
        ft_expr_value *items = NULL;
        int n = 0;
        char **labels = NULL;
        if (json_is_array(vals)) {
            n = (int)json_array_size(vals);
            items = calloc((size_t)(n ? n : 1), sizeof *items);
            labels = is_string ? calloc((size_t)(n ? n : 1), sizeof *labels) : NULL;
            if (!items || (is_string && !labels)) {
                free(items);
                free(labels);
                return ft_err_set(err, FT_ENOMEM, "%s: out of memory", name);
            }
            for (int k = 0; k < n; k++) {
                json_t *v = json_array_get(vals, (size_t)k);
                if (is_string && json_is_string(v)) {
                    labels[k] = strdup(json_string_value(v));
                    items[k] = ft_expr_str(labels[k] ? labels[k] : "");
                } else if (!is_string && json_is_integer(v)) {
                    items[k] = ft_expr_int((long long)json_integer_value(v));
                } else if (!is_string && json_is_real(v)) {
                    items[k] = ft_expr_float(json_real_value(v));
                } else {
                    for (int j = 0; labels && j < k; j++) free(labels[j]);
                    free(labels);
                    free(items);
                    char *text = json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT);
                    ft_status s = ft_err_set(
                        err, FT_EFORMAT, "%s: parameter %s: Values[%d], %.64s, is not a%s", name,
                        pn, k, text ? text : "?", is_string ? " string" : " number");
                    free(text);
                    return s;
                }
            }
        } else if (json_is_string(vals)) {
            ft_expr *e = NULL;
            ft_err ee = {0};
            ft_status s = ft_expr_compile(json_string_value(vals), NULL, 0, &e, &ee);
            /* A list, as Kernel Tuner's eval() of it must give: "64" is not one. */
            ft_expr_value one;
            ft_err scalar = {0};
            if (s == FT_OK && ft_expr_eval(e, NULL, &one, &scalar) == FT_OK) {
                char text[80];
                ft_expr_format(one, text, sizeof text);
                s = ft_err_set(&ee, FT_EFORMAT, "\"%.64s\" is %s, not a list (write [%s])",
                               json_string_value(vals),
                               one.kind == FT_EXPR_STR ? "a string" : "a number", text);
            }
            if (s == FT_OK) s = ft_expr_eval_list(e, NULL, &items, &n, &ee);
            /* Strings for a string tunable (their texts copied before the expression goes),
             * numbers for the others. */
            if (s == FT_OK && is_string && !(labels = calloc((size_t)(n ? n : 1), sizeof *labels)))
                s = ft_err_set(&ee, FT_ENOMEM, "out of memory");
            for (int k = 0; s == FT_OK && k < n; k++) {
                if ((items[k].kind == FT_EXPR_STR) != is_string) {
                    char text[80];
                    ft_expr_format(items[k], text, sizeof text);
                    s = ft_err_set(&ee, FT_EFORMAT, "Values[%d], %.64s, is not a%s", k, text,
                                   is_string ? " string" : " number");
                } else if (is_string && !(labels[k] = strdup(items[k].s))) {
                    s = ft_err_set(&ee, FT_ENOMEM, "out of memory");
                } else if (is_string) {
                    items[k] = ft_expr_str(labels[k]);
                }
            }
            ft_expr_free(e);
            if (s != FT_OK) {
                for (int k = 0; labels && k < n; k++)
                    free(labels[k]);
                free(labels);
                free(items);
                return ft_err_set(err, FT_EFORMAT, "%s: parameter %s: Values: %s", name, pn, ee.msg);
            }
        } else {
            return ft_err_set(err, FT_EFORMAT, "%s: parameter %s: Values must be a list%s", name,
                              pn, is_string ? " of strings" : " or a string holding one");
        }
        t->values[i] = items;
        t->labels[i] = labels;
        fp->n = n;
        if (n <= 0) return ft_err_set(err, FT_EFORMAT, "%s: parameter %s has no values", name, pn);
        if (n > FT_MAX_VALUES)
            return ft_err_set(err, FT_EFORMAT, "%s: parameter %s has %d values; at most %d are supported",
                              name, pn, n, FT_MAX_VALUES);
        for (int k = 0; k < n && is_uint; k++)
            if (items[k].kind != FT_EXPR_INT || items[k].i < 0) {
                char text[80];
                ft_expr_format(items[k], text, sizeof text);
                return ft_err_set(err, FT_EFORMAT,
                                  "%s: parameter %s: Values[%d], %.64s, is not an integer of 0 or "
                                  "more (Type uint)",
                                  name, pn, k, text);
            }
        /* Integers that fit are the values themselves; anything else is labelled. */
        int numeric = !is_string;
        for (int k = 0; k < n && numeric; k++)
            numeric = items[k].kind == FT_EXPR_INT && items[k].i >= INT_MIN && items[k].i <= INT_MAX;
        if (!numeric && !labels) {
            labels = calloc((size_t)n, sizeof *labels);
            if (!labels) return ft_err_set(err, FT_ENOMEM, "%s: out of memory", name);
            t->labels[i] = labels;
            for (int k = 0; k < n; k++) {
                char buf[64];
                ft_expr_format(items[k], buf, sizeof buf);
                labels[k] = strdup(buf);
            }
        }
        for (int k = 0; k < n; k++) {
            if (labels && !labels[k]) return ft_err_set(err, FT_ENOMEM, "%s: out of memory", name);
            fp->values[k] = labels ? k : (int)items[k].i;
            for (int j = 0; j < k; j++)
                if (labels ? strcmp(labels[j], labels[k]) == 0 : fp->values[j] == fp->values[k]) {
                    char v[16];
                    snprintf(v, sizeof v, "%d", fp->values[k]);
                    return ft_err_set(err, FT_EFORMAT, "%s: parameter %s lists value %.64s twice",
                                      name, pn, labels ? labels[k] : v);
                }
        }
        fp->labels = (const char *const *)labels;
        char *texts[FT_MAX_VALUES], nums[FT_MAX_VALUES][24];
        for (int k = 0; k < n; k++) {
            texts[k] = labels ? labels[k] : nums[k];
            if (!labels) snprintf(nums[k], sizeof nums[k], "%d", fp->values[k]);
        }
        ft_status ws = check_writable(name, pn, items, texts, n, err);
        if (ws) return ws;
        /* The default: "Default" where given (a value, or a list of one), else the first
         * value. A Default that is not among the values (the hub's hotspot file gives
         * max_tfactor the values [10] and the Default 1) leaves the first value the default,
         * and default_note says so. */
        json_t *dv = json_object_get(p, "Default");
        if (json_is_array(dv) && json_array_size(dv) == 1) dv = json_array_get(dv, 0);
        fp->def = fp->values[0];
        if (dv && !json_is_null(dv)) {
            int found = -1;
            for (int k = 0; k < n && found < 0; k++) {
                if (labels && json_is_string(dv) && strcmp(labels[k], json_string_value(dv)) == 0)
                    found = k;
                else if (json_is_number(dv) && items[k].kind != FT_EXPR_LIST &&
                         ft_expr_number(items[k]) == json_number_value(dv))
                    found = k;
            }
            if (found < 0 && (labels && is_string ? !json_is_string(dv) : !json_is_number(dv)))
                return ft_err_set(err, FT_EFORMAT, "%s: parameter %s: Default is not a %s", name,
                                  pn, is_string ? "string" : "number");
            if (found < 0) {
                char given[64], first[64];
                if (json_is_string(dv))
                    snprintf(given, sizeof given, "\"%.40s\"", json_string_value(dv));
                else if (json_is_integer(dv))
                    snprintf(given, sizeof given, "%lld", (long long)json_integer_value(dv));
                else
                    ft_expr_format(ft_expr_float(json_real_value(dv)), given, sizeof given);
                if (labels) snprintf(first, sizeof first, "%.60s", labels[0]);
                else snprintf(first, sizeof first, "%d", fp->values[0]);
                note_to(t->default_note, sizeof t->default_note,
                        "%.40s's Default %s is not one of its values: its first, %s, is the "
                        "default",
                        pn, given, first);
            } else {
                fp->def = fp->values[found];
            }
        }
    }
    t->space.params = t->params;
    return FT_OK;
}

static ft_status read_conditions(ft_t1 *t, json_t *cs, const char *name, ft_err *err) {
    json_t *conds = json_object_get(cs, "Conditions");
    if (!conds || json_is_null(conds)) return FT_OK;
    if (!json_is_array(conds))
        return bad(err, name, "ConfigurationSpace.Conditions: a list is needed", NULL);
    if (json_array_size(conds) > FT_T1_MAX_CONDS)
        return ft_err_set(err, FT_EFORMAT, "%s: %zu conditions; at most %d are supported", name,
                          json_array_size(conds), FT_T1_MAX_CONDS);
    size_t i;
    json_t *c;
    json_array_foreach(conds, i, c) {
        const char *ex = json_is_string(c) ? json_string_value(c) : get_str(c, "Expression");
        char what[64];
        snprintf(what, sizeof what, "Conditions[%zu]", i);
        if (!ex) return ft_err_set(err, FT_EFORMAT, "%s: %s: no Expression", name, what);
        ft_status s = compile(t, name, what, ex, &t->conditions[i], err);
        if (s != FT_OK) return s;
        t->constraint_text[i] = strdup(ex);
        t->nconditions = (int)i + 1;
        if (!t->constraint_text[i]) return ft_err_set(err, FT_ENOMEM, "%s: out of memory", name);
        /* "Parameters" says which names it reads: they must be parameters. */
        json_t *ps = json_object_get(c, "Parameters"), *pn;
        size_t k;
        json_array_foreach(ps, k, pn) {
            if (!json_is_string(pn) || ft_space_param(&t->space, json_string_value(pn)) < 0)
                return ft_err_set(err, FT_EFORMAT, "%s: %s lists \"%.64s\", which is not a parameter",
                                  name, what, json_is_string(pn) ? json_string_value(pn) : "?");
        }
    }
    t->space.constraints = (const char *const *)t->constraint_text;
    return FT_OK;
}

/* The types an argument may have, as the messages list them. */
#define T1_TYPES                                                                                   \
    "float, double, int32, uint32, int16, uint16, int8, uint8; for vectors float2/3/4 and "        \
    "double2/3/4 too"

/* A Type's element type and bytes, and how many of them one value is: *lanes 2 to 4 for CUDA's
 * float2 ... double4 (the schema's vector types; the BAT suite's builtin_vectors and FFT files),
 * whose arrays are arrays of their components in CUDA's layout, 1 else. */
static int type_of(const char *s, ft_t1_type *type, size_t *bytes, int *lanes) {
    static const struct {
        const char *name;
        ft_t1_type type;
        size_t bytes;
    } T[] = {{"float", FT_T1_FLOAT, 4},   {"float32", FT_T1_FLOAT, 4},
             {"double", FT_T1_DOUBLE, 8}, {"float64", FT_T1_DOUBLE, 8},
             {"int", FT_T1_INT32, 4},     {"int32", FT_T1_INT32, 4},
             {"uint8", FT_T1_UINT8, 1},   {"unsigned char", FT_T1_UINT8, 1},
             {"int8", FT_T1_INT8, 1},     {"char", FT_T1_INT8, 1},
             {"uint32", FT_T1_UINT32, 4}, {"int16", FT_T1_INT16, 2},
             {"uint16", FT_T1_UINT16, 2}};
    *lanes = 1;
    size_t n = strlen(s);
    char base[16];
    if (n > 1 && n < sizeof base && s[n - 1] >= '2' && s[n - 1] <= '4' &&
        (strncmp(s, "float", n - 1) == 0 || strncmp(s, "double", n - 1) == 0)) {
        *lanes = s[n - 1] - '0';
        memcpy(base, s, n - 1);
        base[n - 1] = 0;
        s = base;
    }
    for (size_t i = 0; i < sizeof T / sizeof T[0]; i++)
        if (strcmp(s, T[i].name) == 0) {
            *type = T[i].type;
            *bytes = T[i].bytes;
            return 1;
        }
    return 0;
}

/* Whether v is a value of type (an integer type's, an integer in its range; a float's, within
 * its range), as a scalar passed as its type and every element a vector's fill writes must be,
 * never what a conversion leaves undefined; when not, why into why[n] ("FillValue 2.5 is not an
 * integer (Type int32)", ty the type as written). */
static int value_ok(ft_t1_type type, double v, const char *what, const char *ty, char *why,
                    size_t n) {
    static const double LO[] = {-FLT_MAX, -DBL_MAX, INT32_MIN, 0, INT8_MIN, 0, INT16_MIN, 0},
                        HI[] = {FLT_MAX,  DBL_MAX,    INT32_MAX, UINT8_MAX,
                                INT8_MAX, UINT32_MAX, INT16_MAX, UINT16_MAX};
    int integer = type != FT_T1_FLOAT && type != FT_T1_DOUBLE;
    if (isfinite(v) && v >= LO[type] && v <= HI[type] && (!integer || v == floor(v))) return 1;
    char given[64];
    int whole = v == floor(v) && fabs(v) < 9007199254740992.0; /* 2^53: the JSON's integer */
    ft_expr_format(whole ? ft_expr_int((long long)v) : ft_expr_float(v), given, sizeof given);
    if (isnan(v))
        snprintf(why, n, "%s NaN is not a number (Type %s)", what, ty);
    else if (isfinite(v) && integer && v != floor(v))
        snprintf(why, n, "%s %s is not an integer (Type %s)", what, given, ty);
    else
        snprintf(why, n, "%s %s is out of the range of Type %s", what, given, ty);
    return 0;
}

static int fill_ok(ft_t1_type type, double v, const char *ty, char *why, size_t n) {
    return value_ok(type, v, "FillValue", ty, why, n);
}

static const char *const TYPE_NAMES[] = {"float", "double", "int32", "uint8",
                                         "int8",  "uint32", "int16", "uint16"};

ft_status ft_t1_generate(const ft_t1_arg *a, long long i, double *v, ft_err *err) {
    ft_expr_value slot = ft_expr_int(i), r;
    ft_err e = {0};
    if (ft_expr_eval(a->generator, &slot, &r, &e) != FT_OK)
        return ft_err_set(err, FT_EFORMAT, "argument %s: DataSource at i=%lld: %s", a->name, i,
                          e.msg);
    *v = ft_expr_number(r);
    char why[160];
    if (!value_ok(a->type, *v, "", TYPE_NAMES[a->type], why, sizeof why)) /* said only then */
        return ft_err_set(err, FT_EFORMAT, "argument %s: DataSource at i=%lld:%s", a->name, i, why);
    return FT_OK;
}

/* A Generator's first and last values, checked as ft_t1_generate checks each (FT_OK without
 * one). */
static ft_status generated_ends(const ft_t1_arg *a, ft_err *err) {
    double v;
    ft_status s = FT_OK;
    if (a->generator) s = ft_t1_generate(a, 0, &v, err);
    if (a->generator && s == FT_OK) s = ft_t1_generate(a, a->elems - 1, &v, err);
    return s;
}

/* An argument's FillValue, as it is used, must be a value of its Type: a scalar's and a
 * Constant fill's is the value itself, a Random fill's above 0 the bound of its draws (at or
 * below 0 it is not used: they are in [0, 1)). */
static ft_status check_fill(const ft_t1_arg *ar, const char *name, const char *ty, ft_err *err) {
    char why[128];
    if ((ar->scalar || !ar->random || ar->fill_value > 0) &&
        !fill_ok(ar->type, ar->fill_value, ty, why, sizeof why))
        return ft_err_set(err, FT_EFORMAT, "%s: argument %s: %s", name, ar->name, why);
    return FT_OK;
}

/* FillType "Generator": DataSource (a string, or a number) is an expression of i, the index of
 * each value, compiled now, so that an unknown name or a syntax error is refused when the file is
 * read. */
static ft_status read_generator(ft_t1_arg *ar, json_t *a, const char *name, ft_err *err) {
    json_t *ds = json_object_get(a, "DataSource");
    char num[64];
    const char *src = NULL;
    if (json_is_string(ds)) {
        src = json_string_value(ds);
    } else if (json_is_number(ds)) { /* as a decimal past 2^53, where "-2**63" would not read */
        double x = json_number_value(ds);
        ft_expr_format(json_is_integer(ds) && fabs(x) < 9007199254740992.0
                           ? ft_expr_int((long long)json_integer_value(ds))
                           : ft_expr_float(x),
                       num, sizeof num);
        src = num;
    } else if (ds && !json_is_null(ds)) {
        return ft_err_set(err, FT_EFORMAT,
                          "%s: argument %s: DataSource must be a string (an expression of i) or a "
                          "number",
                          name, ar->name);
    }
    if (!src || !*src)
        return ft_err_set(err, FT_EFORMAT,
                          "%s: argument %s: FillType Generator needs a DataSource, an expression "
                          "of i (the index of each value)",
                          name, ar->name);
    for (const char *c = src; *c; c++)
        if ((unsigned char)*c < 0x20 || *c == 0x7f)
            return ft_err_set(err, FT_EFORMAT,
                              "%s: argument %s: DataSource holds a control character (a line "
                              "break?): write it on one line",
                              name, ar->name);
    static const char *const names[] = {"i"};
    ft_err e = {0};
    if (ft_expr_compile(src, names, 1, &ar->generator, &e) != FT_OK)
        return ft_err_set(err, FT_EFORMAT, "%s: argument %s: DataSource: %s", name, ar->name,
                          e.msg);
    ar->data_source = strdup(src);
    if (!ar->data_source) return ft_err_set(err, FT_ENOMEM, "%s: out of memory", name);
    return FT_OK;
}

/* A file without ProblemSize: an expression that names it (what: where it is written) is
 * refused when the file is read, in one line, rather than evaluated with an empty list. */
static ft_status problem_needed(const ft_t1 *t, const ft_expr *e, const char *name,
                                const char *what, ft_err *err) {
    if (t->nproblem || !e || !ft_expr_uses(e, SLOT_PROBLEM(t))) return FT_OK;
    return ft_err_set(err, FT_EFORMAT,
                      "%s: %.64s names ProblemSize, which KernelSpecification does not give", name,
                      what);
}

/* KernelSpecification's string field key: missing, or not a string (a number where a name
 * belongs). */
static ft_status need_str(json_t *ks, const char *key, const char **out, const char *name,
                          ft_err *err) {
    json_t *v = json_object_get(ks, key);
    *out = get_str(ks, key);
    if (v && !json_is_string(v))
        return ft_err_set(err, FT_EFORMAT, "%s: KernelSpecification.%s must be a string", name,
                          key);
    if (!*out || (!**out && strcmp(key, "Language") != 0))
        return ft_err_set(err, FT_EFORMAT, "%s: KernelSpecification.%s is missing", name, key);
    return FT_OK;
}

static ft_status read_kernel(ft_t1 *t, json_t *ks, const char *name, ft_err *err) {
    const char *kn, *kf, *lang;
    if (need_str(ks, "KernelName", &kn, name, err) || need_str(ks, "KernelFile", &kf, name, err) ||
        need_str(ks, "Language", &lang, name, err))
        return err->status;
    if (strcmp(lang, "CUDA") != 0)
        return ft_err_set(err, FT_EFORMAT, "%s: Language \"%.32s\": flaretune runs CUDA kernels",
                          name, lang);
    t->kernel_name = strdup(kn);
    t->kernel_file = strdup(kf);
    t->language = strdup(lang);
    if (!t->kernel_name || !t->kernel_file || !t->language)
        return ft_err_set(err, FT_ENOMEM, "%s: out of memory", name);
    json_t *opts = json_object_get(ks, "CompilerOptions");
    if (opts && !json_is_null(opts)) {
        if (!json_is_array(opts)) return bad(err, name, "CompilerOptions: a list is needed", NULL);
        t->options = calloc(json_array_size(opts) + 1, sizeof *t->options);
        if (!t->options) return ft_err_set(err, FT_ENOMEM, "%s: out of memory", name);
        size_t i;
        json_t *o;
        json_array_foreach(opts, i, o) {
            if (!json_is_string(o)) return bad(err, name, "CompilerOptions: strings are needed", NULL);
            t->options[t->noptions++] = strdup(json_string_value(o));
        }
    }
    /* ProblemSize: up to three integers, or none. */
    json_t *ps = json_object_get(ks, "ProblemSize");
    if (json_is_integer(ps)) {
        t->problem[0] = (long long)json_integer_value(ps);
        t->nproblem = 1;
    } else if (json_is_array(ps) && json_array_size(ps) >= 1 && json_array_size(ps) <= 3) {
        for (size_t d = 0; d < json_array_size(ps); d++) {
            json_t *v = json_array_get(ps, d);
            if (!json_is_integer(v))
                return bad(err, name, "ProblemSize: integers are needed", NULL);
            t->problem[d] = (long long)json_integer_value(v);
        }
        t->nproblem = (int)json_array_size(ps);
    } else if (ps && !json_is_null(ps)) {
        return bad(err, name, "KernelSpecification.ProblemSize: 1 to 3 integers are needed", NULL);
    } /* else none: the schema does not ask for one, and a grid GlobalSize gives needs none */
    for (int c = 0; c < t->nconditions; c++) {
        ft_status s = problem_needed(t, t->conditions[c], name, t->constraint_text[c], err);
        if (s != FT_OK) return s;
    }
    for (int d = 0; d < t->nproblem; d++)
        if (t->problem[d] < 1) return bad(err, name, "ProblemSize: sizes must be positive", NULL);
    for (int d = t->nproblem; d < 3; d++) t->problem[d] = 1;
    /* Launch geometry. */
    static const char *const AX[3] = {"X", "Y", "Z"};
    json_t *local = json_object_get(ks, "LocalSize"), *global = json_object_get(ks, "GlobalSize");
    const char *gtype = get_str(ks, "GlobalSizeType");
    if ((local && !json_is_object(local)) || (global && !json_is_object(global)))
        return ft_err_set(err, FT_EFORMAT,
                          "%s: KernelSpecification.%s must be an object of X, Y and Z", name,
                          local && !json_is_object(local) ? "LocalSize" : "GlobalSize");
    if (json_object_get(ks, "GlobalSizeType") &&
        (!gtype || (strcmp(gtype, "CUDA") != 0 && strcmp(gtype, "OpenCL") != 0)))
        return ft_err_set(err, FT_EFORMAT,
                          "%s: KernelSpecification.GlobalSizeType must be \"CUDA\" (blocks) or "
                          "\"OpenCL\" (threads)",
                          name);
    t->global_in_blocks = gtype && strcmp(gtype, "CUDA") == 0;
    for (int d = 0; d < 3; d++) {
        json_t *sizes[2] = {local, global};
        ft_expr **into[2] = {&t->local[d], &t->global[d]};
        for (int g = 0; g < 2; g++) {
            /* An expression, or a number written as one ("X": 64 is "64"). */
            json_t *v = sizes[g] ? json_object_get(sizes[g], AX[d]) : NULL;
            char what[32], num[32];
            snprintf(what, sizeof what, "%s.%s", g ? "GlobalSize" : "LocalSize", AX[d]);
            const char *text = json_is_string(v) ? json_string_value(v) : NULL;
            if (json_is_integer(v)) {
                snprintf(num, sizeof num, "%lld", (long long)json_integer_value(v));
                text = num;
            } else if (v && !text && !json_is_null(v)) {
                return ft_err_set(
                    err, FT_EFORMAT,
                    "%s: KernelSpecification.%s should be an expression (a string) or "
                    "a whole number",
                    name, what);
            }
            if (!text) continue;
            ft_status s = compile(t, name, what, text, into[g], err);
            if (s == FT_OK) s = problem_needed(t, *into[g], name, what, err);
            if (s != FT_OK) return s;
        }
        char key[16];
        snprintf(key, sizeof key, "GridDiv%s", AX[d]);
        json_t *gd = json_object_get(ks, key);
        t->griddiv[d][0] = -2;
        if (json_is_array(gd) && json_array_size(gd) > 0) {
            if (!t->nproblem)
                return ft_err_set(
                    err, FT_EFORMAT,
                    "%s: %s divides ProblemSize, which KernelSpecification does not give", name,
                    key);
            if (json_array_size(gd) >= FT_MAX_PARAMS)
                return ft_err_set(err, FT_EFORMAT, "%s: %s lists too many names", name, key);
            size_t k;
            json_t *pn;
            json_array_foreach(gd, k, pn) {
                int pi = json_is_string(pn) ? ft_space_param(&t->space, json_string_value(pn)) : -1;
                if (pi < 0)
                    return ft_err_set(err, FT_EFORMAT, "%s: %s names \"%.64s\", which is not a parameter",
                                      name, key, json_is_string(pn) ? json_string_value(pn) : "?");
                if (t->labels[pi])
                    return ft_err_set(err, FT_EFORMAT, "%s: %s names %s, which is not an integer parameter",
                                      name, key, t->params[pi].name);
                t->griddiv[d][k] = pi;
            }
            t->griddiv[d][k] = -1;
        } else if (gd && !json_is_null(gd) && !json_is_array(gd)) {
            return ft_err_set(err, FT_EFORMAT, "%s: %s: a list of parameter names is needed", name, key);
        }
    }
    if (!t->nproblem && !t->global[0])
        return bad(err, name,
                   "KernelSpecification: no GlobalSize.X nor ProblemSize to size the grid by",
                   NULL);
    json_t *sm = json_object_get(ks, "SharedMemory");
    if (sm && !json_is_null(sm)) {
        if (!json_is_integer(sm) || json_integer_value(sm) < 0)
            return bad(err, name, "SharedMemory: a byte count is needed", NULL);
        t->shared_bytes = (long long)json_integer_value(sm);
    }
    /* Arguments. */
    json_t *args = json_object_get(ks, "Arguments");
    if (!json_is_array(args) || json_array_size(args) == 0)
        return bad(err, name, "KernelSpecification.Arguments: a non-empty list is needed", NULL);
    if (json_array_size(args) > FT_T1_MAX_ARGS)
        return ft_err_set(err, FT_EFORMAT, "%s: %zu arguments; at most %d are supported", name,
                          json_array_size(args), FT_T1_MAX_ARGS);
    slots lists;
    slot_values(t, NULL, 1, &lists);
    size_t i;
    json_t *a;
    int marked = 0; /* arguments with an Output key */
    json_array_foreach(args, i, a) {
        ft_t1_arg *ar = &t->args[i];
        marked += json_object_get(a, "Output") != NULL;
        t->nargs = (int)i + 1;
        const char *an = get_str(a, "Name"), *ty = get_str(a, "Type"), *mt = get_str(a, "MemoryType"),
                   *fill = get_str(a, "FillType"), *mem = get_str(a, "MemType");
        char what[64];
        snprintf(what, sizeof what, "Arguments[%zu]", i);
        if (!an || !*an) return ft_err_set(err, FT_EFORMAT, "%s: %s: no Name", name, what);
        /* --arg NAME=... and --reference NAME=FILE name it: a C name, as the kernel's. */
        int cname = !isdigit((unsigned char)an[0]) && strlen(an) <= 64;
        for (const char *c = an; *c && cname; c++)
            cname = isalnum((unsigned char)*c) || *c == '_';
        if (!cname)
            return ft_err_set(err, FT_EFORMAT,
                              "%s: %s: Name \"%.32s\" is not a C name (letters, digits, _)", name,
                              what, an);
        for (size_t j = 0; j < i; j++) /* --arg NAME and --reference NAME= name one argument */
            if (strcmp(t->args[j].name, an) == 0)
                return ft_err_set(err, FT_EFORMAT, "%s: argument %s named twice (%s)", name, an,
                                  what);
        ar->name = strdup(an);
        if (!ar->name) return ft_err_set(err, FT_ENOMEM, "%s: out of memory", name);
        int lanes = 1;
        if (!ty || !type_of(ty, &ar->type, &ar->elem_bytes, &lanes))
            return ft_err_set(err, FT_EFORMAT, "%s: argument %s: Type \"%.32s\" (" T1_TYPES ")",
                              name, an, ty ? ty : "");
        if (!mt || (strcmp(mt, "Vector") && strcmp(mt, "Scalar")))
            return ft_err_set(err, FT_EFORMAT, "%s: argument %s: MemoryType \"%.32s\" (Vector or Scalar)",
                              name, an, mt ? mt : "");
        ar->scalar = strcmp(mt, "Scalar") == 0;
        if (ar->scalar && lanes > 1)
            return ft_err_set(
                err, FT_EFORMAT,
                "%s: argument %s: a scalar of Type %s is not passed (its FillValue is "
                "one number)",
                name, an, ty);
        if (mem && strcmp(mem, "Constant") && strcmp(mem, "Global"))
            return ft_err_set(err, FT_EFORMAT,
                              "%s: argument %s: MemType \"%.32s\" (Global or Constant)", name, an,
                              mem);
        if (json_object_get(a, "MemType") && !mem)
            return ft_err_set(err, FT_EFORMAT, "%s: argument %s: MemType must be a string", name,
                              an);
        ar->constant = mem && strcmp(mem, "Constant") == 0;
        json_t *out = json_object_get(a, "Output");
        if (out && !json_is_boolean(out) &&
            !(json_is_integer(out) &&
              (json_integer_value(out) == 0 || json_integer_value(out) == 1)))
            return ft_err_set(err, FT_EFORMAT,
                              "%s: argument %s: Output must be 0, 1, true or false", name, an);
        ar->output = (json_is_integer(out) && json_integer_value(out) != 0) || json_is_true(out);
        const char *acc = get_str(a, "AccessType");
        if (acc && strcmp(acc, "ReadOnly") && strcmp(acc, "WriteOnly") && strcmp(acc, "ReadWrite"))
            return ft_err_set(err, FT_EFORMAT, "%s: argument %s: AccessType \"%.32s\" (ReadOnly, WriteOnly or ReadWrite)",
                              name, an, acc);
        ar->reads = !acc || strcmp(acc, "WriteOnly") != 0;
        ar->writes = acc ? strcmp(acc, "ReadOnly") != 0 : ar->output;
        json_t *fv = json_object_get(a, "FillValue");
        ar->fill_value = json_is_number(fv) ? json_number_value(fv) : 0.0;
        if (fv && !json_is_null(fv) && !json_is_number(fv))
            return ft_err_set(err, FT_EFORMAT, "%s: argument %s: FillValue must be a number", name, an);
        if (ar->scalar && fill && strcmp(fill, "Generator") == 0)
            return ft_err_set(err, FT_EFORMAT,
                              "%s: argument %s: FillType Generator is for a vector; a scalar is "
                              "passed its FillValue",
                              name, an);
        if (ar->scalar) {
            if (!json_is_number(fv))
                return ft_err_set(
                    err, FT_EFORMAT,
                    "%s: argument %s: a scalar needs a FillValue, the value it is passed", name,
                    an);
            if (ar->constant || ar->output)
                return ft_err_set(err, FT_EFORMAT, "%s: argument %s: a scalar is neither constant memory nor an output",
                                  name, an);
            ft_status s = check_fill(ar, name, ty, err);
            if (s != FT_OK) return s;
            continue;
        }
        if (!fill ||
            (strcmp(fill, "Constant") && strcmp(fill, "Random") && strcmp(fill, "Generator")))
            return ft_err_set(err, FT_EFORMAT,
                              "%s: argument %s: FillType \"%.32s\" (Constant, Random or Generator)",
                              name, an, fill ? fill : "");
        ar->random = strcmp(fill, "Random") == 0;
        if (strcmp(fill, "Generator") == 0) {
            ft_status gs = read_generator(ar, a, name, err);
            if (gs != FT_OK) return gs;
        } else {
            ft_status fs = check_fill(ar, name, ty, err);
            if (fs != FT_OK) return fs;
        }
        json_t *size = json_object_get(a, "Size");
        char sz[64];
        const char *stext = NULL;
        if (json_is_integer(size)) {
            snprintf(sz, sizeof sz, "%lld", (long long)json_integer_value(size));
            stext = sz;
        } else if (json_is_string(size)) {
            stext = json_string_value(size);
        } else {
            return ft_err_set(err, FT_EFORMAT, "%s: argument %s: Size must be an integer or an expression",
                              name, an);
        }
        ar->size_text = strdup(stext);
        ft_expr *e = NULL;
        snprintf(what, sizeof what, "argument %.40s: Size", an);
        ft_status s = compile(t, name, what, stext, &e, err);
        if (s == FT_OK) s = problem_needed(t, e, name, what, err);
        if (s != FT_OK) {
            ft_expr_free(e);
            return s;
        }
        ft_expr_value v;
        ft_err ee = {0};
        s = ft_expr_eval(e, lists.v, &v, &ee);
        ft_expr_free(e);
        if (s != FT_OK) return ft_err_set(err, FT_EFORMAT, "%s: %s: %s", name, what, ee.msg);
        double n = ft_expr_number(v) * lanes; /* a float2's Size counts float2s */
        if (!(n >= 1) || n != floor(n) || n > (double)(1LL << 40))
            return ft_err_set(err, FT_EFORMAT, "%s: %s is %g elements (a positive integer up to 2^40)",
                              name, what, n);
        ar->elems = (long long)n;
        /* The first and the last value now, every one when the buffer is filled. */
        ft_err ge = {0};
        if (generated_ends(ar, &ge) != FT_OK)
            return ft_err_set(err, FT_EFORMAT, "%s: %s", name, ge.msg);
    }
    /* The schema has no Output: AccessType says what the kernel writes. A file that marks no
     * argument (the BAT suite's) is checked on every vector it writes, and the note says so. */
    if (!marked) {
        char names[160] = "";
        for (int k = 0; k < t->nargs; k++) {
            ft_t1_arg *ar = &t->args[k];
            if (ar->scalar || ar->constant || !ar->writes) continue;
            ar->output = 1;
            size_t used = strlen(names);
            snprintf(names + used, sizeof names - used, "%s%s", used ? ", " : "", ar->name);
        }
        if (names[0])
            note_to(t->read_note, sizeof t->read_note,
                    "no argument is marked Output: the ones whose AccessType writes (%s) "
                    "are checked",
                    names);
    }
    if (!gtype && t->global[0])
        note_to(t->read_note, sizeof t->read_note,
                "GlobalSizeType is not given: GlobalSize is read in threads (OpenCL's "
                "form); \"GlobalSizeType\": \"CUDA\" reads it in blocks");
    return FT_OK;
}

/* Why path is not a kernel file to read: NULL when it is a regular file this process may read;
 * else "not found", or what it is instead (a folder, a device, a file it may not read). */
static const char *kernel_unreadable(const char *path) {
    struct stat st;
    if (stat(path, &st) != 0) return "not found";
    if (S_ISDIR(st.st_mode)) return "a folder, not a file";
    if (!S_ISREG(st.st_mode)) return "not a regular file";
    return access(path, R_OK) == 0 ? NULL : "not readable";
}

/* The kernel file, looked for as Kernel Tuner does: as given, beside the T1 file, then in the
 * folder above it. */
static ft_status find_kernel(ft_t1 *t, const char *name, const char *dir, ft_err *err) {
    if (!dir) return FT_OK;
    char tried[3][2048];
    int n = 0;
    snprintf(tried[n++], sizeof tried[0], "%s", t->kernel_file);
    if (t->kernel_file[0] != '/') {
        snprintf(tried[n++], sizeof tried[0], "%s/%s", dir, t->kernel_file);
        snprintf(tried[n++], sizeof tried[0], "%s/../%s", dir, t->kernel_file);
    }
    int other = -1; /* the first that is there but not a file to read (a folder) */
    for (int i = 0; i < n; i++) {
        const char *why = kernel_unreadable(tried[i]);
        if (why) {
            if (other < 0 && strcmp(why, "not found") != 0) other = i;
            continue;
        }
        char *r = realpath(tried[i], NULL);
        if (!r) continue;
        free(t->kernel_file);
        t->kernel_file = r;
        return FT_OK;
    }
    if (other >= 0)
        return ft_err_set(err, FT_EIO, "%s: KernelFile %s: %s is %s", name, t->kernel_file,
                          tried[other], kernel_unreadable(tried[other]));
    return ft_err_set(err, FT_EIO, "%s: KernelFile %s not found (looked in the working directory, %s and its parent; "
                      "--kernel-file FILE names it)",
                      name, t->kernel_file, dir);
}

ft_status ft_t1_from_buffer(const char *buf, size_t len, const char *name, const char *dir,
                            const char *kernel_file, ft_t1 **out, ft_err *err) {
    *out = NULL;
    json_error_t je;
    json_t *root = json_loadb(buf, len, JSON_REJECT_DUPLICATES, &je);
    if (!root)
        return ft_err_set(err, FT_EFORMAT, "%s: not JSON (line %d: %s)", name, je.line, je.text);
    ft_t1 *t = calloc(1, sizeof *t);
    ft_status s = FT_OK;
    if (!t) {
        json_decref(root);
        return ft_err_set(err, FT_ENOMEM, "%s: out of memory", name);
    }
    t->path = strdup(name);
    json_t *cs = json_object_get(root, "ConfigurationSpace"),
           *ks = json_object_get(root, "KernelSpecification"), *gen = json_object_get(root, "General");
    if (!json_is_object(root) || !json_is_object(cs) || !json_is_object(ks))
        s = bad(err, name, "not a T1 file (it needs ConfigurationSpace and KernelSpecification)", NULL);
    if (s == FT_OK) {
        const char *bn = json_is_object(gen) ? get_str(gen, "BenchmarkName") : NULL;
        t->benchmark = dup_str(bn ? bn : get_str(ks, "BenchmarkName"));
        s = read_params(t, cs, name, err);
    }
    if (s == FT_OK) s = read_conditions(t, cs, name, err);
    if (s == FT_OK) s = read_kernel(t, ks, name, err);
    if (s == FT_OK && kernel_file) {
        free(t->kernel_file);
        t->kernel_file = strdup(kernel_file);
        if (!t->kernel_file) s = ft_err_set(err, FT_ENOMEM, "%s: out of memory", name);
        else if (dir && access(kernel_file, R_OK) != 0)
            s = ft_err_set(err, FT_EIO, "%s: cannot read the kernel file (%s)", kernel_file, strerror(errno));
        else if (dir && kernel_unreadable(kernel_file))
            s = ft_err_set(err, FT_EIO, "%s: the kernel file is %s", kernel_file,
                           kernel_unreadable(kernel_file));
        if (s == FT_OK && dir) {
            char *r = realpath(kernel_file, NULL);
            if (r) {
                free(t->kernel_file);
                t->kernel_file = r;
            }
        }
    } else if (s == FT_OK) {
        s = find_kernel(t, name, dir, err);
    }
    /* The path is written into the compiled code (NVRTC's file name, the emulator's #include),
     * where these characters would end its string. */
    if (s == FT_OK && dir && t->kernel_file && strpbrk(t->kernel_file, "\"\\\n"))
        s = ft_err_set(err, FT_EIO,
                       "%s: KernelFile %s: a quote, backslash or newline in its path cannot be "
                       "compiled; rename or copy it",
                       name, t->kernel_file);
    json_decref(root);
    /* The default configuration: the file's when the conditions allow it, else the first one
     * they allow; it must launch. */
    if (s == FT_OK) {
        ft_config def;
        ft_config_default(&t->space, &def);
        int ok = 0;
        char why[256] = "";
        long long g[3], b[3];
        s = ft_t1_allowed(t, &def, &ok, why, sizeof why, err);
        if (s == FT_OK && !ok) {
            /* The allowed configuration that changes fewest of the file's defaults (the first
             * in space order among equals). */
            nearest near = {.want = def, .best_d = INT_MAX};
            int capped = 0;
            s = walk(t, nearest_visit, &near, &capped, err);
            if (s == FT_OK && near.best_d == INT_MAX) {
                char count[32];
                count_text(t, count, sizeof count);
                s = capped ? ft_err_set(err, FT_EFORMAT,
                                        "%s: %s configurations before the conditions, and none "
                                        "allowed in the first 2^26 the walk reached",
                                        name, count)
                           : ft_err_set(err, FT_EFORMAT,
                                        "%s: no configuration satisfies the conditions", name);
            }
            if (s == FT_OK) def = near.best;
            if (s == FT_OK) {
                for (int i = 0; i < t->space.nparams; i++) t->params[i].def = def.v[i];
                note_to(t->default_note, sizeof t->default_note,
                        "the file's defaults break the condition %.200s; the nearest allowed "
                        "configuration is the default",
                        why);
            }
        }
        if (s == FT_OK) s = ft_t1_launch(t, &def, g, b, err);
        /* Every configuration is checked against its launch, and the default one runs first: a
         * block no CUDA device runs there is the file's mistake, said now. */
        if (s == FT_OK && (b[0] > 1024 || b[1] > 1024 || b[2] > 64 || b[0] * b[1] * b[2] > 1024))
            s = ft_err_set(err, FT_EFORMAT,
                           "%s: the default configuration's block is %lld x %lld x %lld threads: a "
                           "CUDA block holds at most 1024 (x and y at most 1024, z at most 64)",
                           name, b[0], b[1], b[2]);
    }
    if (s != FT_OK) {
        ft_t1_free(t);
        return s;
    }
    *out = t;
    return FT_OK;
}

ft_status ft_t1_load(const char *path, const char *kernel_file, ft_t1 **out, ft_err *err) {
    *out = NULL;
    FILE *f = fopen(path, "rb");
    if (!f) return ft_err_set(err, FT_EIO, "%s: cannot open (%s)", path, strerror(errno));
    char *buf;
    size_t len;
    int got = ft_file_read_all(f, T1_MAX_BYTES, &buf, &len);
    if (got) {
        fclose(f);
        return got < 0 ? ft_err_set(err, FT_ENOMEM, "%s: out of memory", path)
                       : ft_err_set(err, FT_EFORMAT, "%s: larger than %u MiB: not a T1 file", path,
                                    T1_MAX_BYTES >> 20);
    }
    int rerr = ferror(f);
    fclose(f);
    if (rerr) {
        free(buf);
        return ft_err_set(err, FT_EIO, "%s: read error", path);
    }
    char *dir = strdup(path);
    if (!dir) {
        free(buf);
        return ft_err_set(err, FT_ENOMEM, "%s: out of memory", path);
    }
    char *slash = strrchr(dir, '/');
    if (slash) *slash = 0;
    else strcpy(dir, ".");
    ft_status s = ft_t1_from_buffer(buf, len, path, dir, kernel_file, out, err);
    free(dir);
    free(buf);
    return s;
}

ft_status ft_t1_set_arg(ft_t1 *t, const char *spec, ft_err *err) {
    char buf[512];
    snprintf(buf, sizeof buf, "%s", spec);
    char *eq = strchr(buf, '=');
    if (!eq) return ft_err_set(err, FT_EINVAL, "--arg %s: NAME=TYPE:SIZE[:random|constant[:VALUE]]", spec);
    *eq = 0;
    ft_t1_arg *a = NULL;
    for (int i = 0; i < t->nargs; i++)
        if (strcmp(t->args[i].name, buf) == 0) a = &t->args[i];
    if (!a) return ft_err_set(err, FT_EINVAL, "--arg %s: %s has no argument %s", spec, t->path, buf);
    if (a->scalar) return ft_err_set(err, FT_EINVAL, "--arg %s: %s is a scalar", spec, buf);
    char *parts[4] = {eq + 1, NULL, NULL, NULL};
    int np = 1;
    for (char *p = eq + 1; *p && np < 4; p++)
        if (*p == ':') {
            *p = 0;
            parts[np++] = p + 1;
        }
    ft_t1_type type;
    size_t bytes;
    int lanes;
    if (np < 2 || !type_of(parts[0], &type, &bytes, &lanes))
        return ft_err_set(err, FT_EINVAL, "--arg %s: TYPE:SIZE with TYPE " T1_TYPES, spec);
    int random = a->random;
    double value = a->fill_value;
    if (np >= 3) {
        if (strcmp(parts[2], "random") && strcmp(parts[2], "constant"))
            return ft_err_set(err, FT_EINVAL, "--arg %s: the fill is random or constant", spec);
        random = strcmp(parts[2], "random") == 0;
    }
    if (np >= 4) {
        char *end;
        value = strtod(parts[3], &end);
        if (end == parts[3] || *end || !isfinite(value))
            return ft_err_set(err, FT_EINVAL, "--arg %s: the fill value is not a number", spec);
    }
    char why[128];
    if ((!random || value > 0) && !fill_ok(type, value, parts[0], why, sizeof why))
        return ft_err_set(err, FT_EINVAL, "--arg %s: %s", spec, why);
    ft_expr *e = NULL;
    ft_status s = compile(t, t->path, "--arg", parts[1], &e, err);
    if (s != FT_OK) return s;
    slots lists;
    slot_values(t, NULL, 1, &lists);
    ft_expr_value v;
    ft_err ee = {0};
    s = ft_expr_eval(e, lists.v, &v, &ee);
    ft_expr_free(e);
    if (s != FT_OK) return ft_err_set(err, FT_EINVAL, "--arg %s: %s", spec, ee.msg);
    double n = ft_expr_number(v) * lanes;
    if (!(n >= 1) || n != floor(n) || n > (double)(1LL << 40))
        return ft_err_set(err, FT_EINVAL, "--arg %s: %g elements (a positive integer up to 2^40)", spec, n);
    char *st = strdup(parts[1]);
    if (!st) return ft_err_set(err, FT_ENOMEM, "--arg: out of memory");
    free(a->size_text);
    a->size_text = st;
    a->type = type;
    a->elem_bytes = bytes;
    a->elems = (long long)n;
    a->random = random;
    a->fill_value = value;
    if (np >= 3) { /* a fill given replaces the file's Generator */
        ft_expr_free(a->generator);
        free(a->data_source);
        a->generator = NULL;
        a->data_source = NULL;
    }
    /* The file's Generator kept, its first and last values of the new Type now, as the file's
     * were checked when it was read (the others when the buffer is filled). */
    ft_err ge = {0};
    if (generated_ends(a, &ge) != FT_OK)
        return ft_err_set(err, FT_EINVAL, "--arg %s: the file's %s", spec, ge.msg);
    return FT_OK;
}

ft_status ft_t1_load_args(const char *path, const char *kernel_file, const char *const *args, int n,
                          ft_t1 **out, ft_err *err) {
    ft_status s = ft_t1_load(path, kernel_file, out, err);
    for (int i = 0; s == FT_OK && i < n; i++) s = ft_t1_set_arg(*out, args[i], err);
    if (s != FT_OK) {
        ft_t1_free(*out);
        *out = NULL;
    }
    return s;
}

/* K configurations drawn without a list, and the default first: where it was drawn it takes the
 * first place, whose configuration takes its place; where not, it comes before the K. */
static ft_status drawn_sample(const ft_t1 *t, const ft_config *def, int64_t named, int64_t per,
                              long k, uint64_t seed, ft_config **cfgs, int64_t *n, ft_err *err) {
    ft_config *c = NULL;
    int64_t m = 0;
    int ok = 0;
    ft_status s = draw_counted(t, named, per, k, seed, &c, &m, err);
    if (s == FT_OK) s = ft_t1_allowed(t, def, &ok, NULL, 0, err);
    if (s != FT_OK) {
        free(c);
        return s;
    }
    int64_t at = -1;
    for (int64_t i = 0; i < m && at < 0; i++)
        if (ft_config_equal(&c[i], def)) at = i;
    if (at > 0) {
        c[at] = c[0];
        c[0] = *def;
    } else if (at < 0 && ok) {
        ft_config *more = realloc(c, (size_t)(m + 1) * sizeof *c);
        if (!more) {
            free(c);
            return ft_err_set(err, FT_ENOMEM, "%s: out of memory", t->path);
        }
        c = more;
        memmove(c + 1, c, (size_t)m * sizeof *c);
        c[0] = *def;
        m++;
    }
    *cfgs = c;
    *n = m;
    return FT_OK;
}

ft_status ft_t1_select(const ft_t1 *t, const char *config, int all, long sample,
                       unsigned long long seed, ft_config **cfgs, int64_t *n, ft_err *err) {
    *cfgs = NULL;
    *n = 0;
    ft_config def;
    ft_config_default(&t->space, &def);
    if (all || sample > 0) {
        /* Counted once. Past the list's limit a sample is drawn without a list (a sample's
         * configurations from the same seed, where a list holds them all, stay those a list
         * gives). */
        int64_t named = 0, per = 1;
        ft_status s = count_parts(t, &named, &per, err);
        if (s != FT_OK) return s;
        if (!all && named * per > FT_T1_MAX_ALLOWED)
            return drawn_sample(t, &def, named, per, sample, seed, cfgs, n, err);
        ft_config *c = NULL;
        int64_t m = 0;
        s = list_counted(t, named * per, &c, &m, err);
        if (s != FT_OK) return s;
        if (sample > 0 && sample < m) { /* a shuffle from the seed; the default first */
            ft_rng r;
            ft_rng_seed(&r, seed);
            for (int64_t i = m - 1; i > 0; i--) {
                int64_t j = (int64_t)ft_rng_below(&r, (uint64_t)i + 1);
                ft_config tmp = c[i];
                c[i] = c[j];
                c[j] = tmp;
            }
            int64_t at = -1;
            for (int64_t i = 0; i < m && at < 0; i++)
                if (ft_config_equal(&c[i], &def)) at = i;
            if (at >= sample) /* drawn past the sample: it takes the first place, whose config
                                 moves to the end of the sample */
                c[sample] = c[0], c[0] = def;
            else if (at > 0)
                c[at] = c[0], c[0] = def;
            m = sample + (at >= sample ? 1 : 0);
        }
        *cfgs = c;
        *n = m;
        return FT_OK;
    }
    ft_config *c = malloc(sizeof *c);
    if (!c) return ft_err_set(err, FT_ENOMEM, "%s: out of memory", t->path);
    *c = def;
    if (config) {
        ft_status s = ft_config_parse(&t->space, config, c, err);
        int ok = 0;
        char why[256] = "";
        if (s == FT_OK) s = ft_t1_allowed(t, c, &ok, why, sizeof why, err);
        if (s == FT_OK && !ok)
            s = ft_err_set(err, FT_EINVAL, "%s: --config breaks the condition %s", t->path, why);
        if (s != FT_OK) {
            free(c);
            return s;
        }
    }
    *cfgs = c;
    *n = 1;
    return FT_OK;
}

/* ---- using it ---------------------------------------------------------------------------------- */

ft_status ft_t1_allowed(const ft_t1 *t, const ft_config *cfg, int *ok, char *why, size_t n,
                        ft_err *err) {
    slots s;
    slot_values(t, cfg, 0, &s);
    *ok = 1;
    for (int i = 0; i < t->nconditions; i++) {
        int r = 0;
        ft_err e = {0};
        if (ft_expr_truth(t->conditions[i], s.v, &r, &e) != FT_OK) {
            char c[512];
            ft_config_format(&t->space, cfg, c, sizeof c);
            return ft_err_set(err, FT_EFORMAT, "%s: Conditions[%d] at %s: %s", t->path, i, c, e.msg);
        }
        if (!r) {
            *ok = 0;
            if (why && n) snprintf(why, n, "%s", t->constraint_text[i]);
            return FT_OK;
        }
    }
    return FT_OK;
}

int64_t ft_t1_position(const ft_t1 *t, const ft_config *cfgs, int64_t n, const ft_config *c) {
    const int64_t k = ft_space_index_of(&t->space, c);
    int64_t lo = 0, hi = n; /* the first whose index is k or above lies in [lo, hi] */
    while (k >= 0 && lo < hi) {
        const int64_t mid = lo + (hi - lo) / 2;
        if (ft_space_index_of(&t->space, &cfgs[mid]) < k)
            lo = mid + 1;
        else
            hi = mid;
    }
    return k >= 0 && lo < n && ft_config_equal(&cfgs[lo], c) ? lo : -1;
}

/* The walk through t's space in its order (the last parameter fastest) that checks each
 * condition as soon as every parameter it names has its value, as a constraint solver does (Kernel
 * Tuner's python-constraint): a condition on the first parameters prunes every configuration
 * below a value it refuses, so a space of 2^40 configurations whose conditions leave a few
 * thousand is walked in as many steps as it has allowed configurations and refused branches.
 * Each configuration reached whole is allowed as ft_t1_allowed says: where a condition could not
 * be evaluated on the way (a division by zero), ft_t1_allowed judges it whole, in the file's
 * order, and its error is the walk's. With named_only, the parameters no condition names keep
 * their first value (each of their values goes with every allowed one of the others: counting
 * needs them not). visit(ctx, c) returns 1 to stop. *capped: the walk stopped after
 * FT_T1_MAX_ENUMERATED steps (configurations reached whole and branches refused). */
/* named[p]: some condition names parameter p; level[i] (when given): the last parameter
 * condition i names, -1 for none. */
static void named_params(const ft_t1 *t, int named[FT_MAX_PARAMS], int *level) {
    for (int p = 0; p < t->space.nparams; p++)
        named[p] = 0;
    for (int i = 0; i < t->nconditions; i++) {
        if (level) level[i] = -1;
        for (int p = 0; p < t->space.nparams; p++)
            if (ft_expr_uses(t->conditions[i], p)) {
                named[p] = 1;
                if (level) level[i] = p;
            }
    }
}

static ft_status walk_over(const ft_t1 *t, int named_only, t1_visit visit, void *ctx, int *capped,
                           ft_err *err) {
    const int np = t->space.nparams;
    *capped = 0;
    int level[FT_T1_MAX_CONDS], named[FT_MAX_PARAMS];
    named_params(t, named, level);
    int ord[FT_MAX_PARAMS], nw = 0; /* the parameters walked through, in order */
    for (int p = 0; p < np; p++)
        if (named[p] || !named_only) ord[nw++] = p;
    ft_config c;
    ft_config_default(&t->space, &c);
    for (int p = 0; p < np; p++)
        c.v[p] = t->params[p].values[0];
    slots s;
    slot_values(t, &c, 0, &s);
    /* unsure[j + 1]: a condition of the parameters up to ord[j] could not be evaluated */
    int idx[FT_MAX_PARAMS], unsure[FT_MAX_PARAMS + 1] = {0};
    for (int i = 0; i < t->nconditions; i++) {
        int r = 1;
        ft_err e = {0};
        if (level[i] >= 0) continue;
        if (ft_expr_truth(t->conditions[i], s.v, &r, &e) != FT_OK)
            unsure[0] = 1;
        else if (!r)
            return FT_OK; /* ProblemSize alone refuses every configuration */
    }
    if (nw == 0) { /* one configuration: the first values */
        int ok = 1;
        if (unsure[0]) {
            ft_status st = ft_t1_allowed(t, &c, &ok, NULL, 0, err);
            if (st != FT_OK) return st;
        }
        if (ok) visit(ctx, &c);
        return FT_OK;
    }
    int64_t steps = 0;
    int j = 0;
    idx[0] = 0;
    for (;;) {
        const int d = ord[j];
        c.v[d] = t->params[d].values[idx[j]];
        s.v[d] = t->labels[d] ? t->values[d][c.v[d]] : ft_expr_int(c.v[d]);
        int ok = 1;
        unsure[j + 1] = unsure[j];
        for (int i = 0; i < t->nconditions && ok; i++) {
            if (level[i] != d) continue;
            int r = 1;
            ft_err e = {0};
            if (ft_expr_truth(t->conditions[i], s.v, &r, &e) != FT_OK)
                unsure[j + 1] = 1;
            else
                ok = r;
        }
        if (ok && j < nw - 1) { /* down to the next parameter */
            idx[++j] = 0;
            continue;
        }
        if (++steps > FT_T1_MAX_ENUMERATED) {
            *capped = 1;
            return FT_OK;
        }
        if (ok && unsure[j + 1]) {
            ft_status st = ft_t1_allowed(t, &c, &ok, NULL, 0, err);
            if (st != FT_OK) return st;
        }
        if (ok && visit(ctx, &c)) return FT_OK;
        while (++idx[j] == t->params[ord[j]].n) { /* the next value, up where this one is spent */
            if (j == 0) return FT_OK;
            j--;
        }
    }
}

static ft_status walk(const ft_t1 *t, t1_visit visit, void *ctx, int *capped, ft_err *err) {
    return walk_over(t, 0, visit, ctx, capped, err);
}

/* "%lld", or "more than 2^63": the configurations before the conditions */
static void count_text(const ft_t1 *t, char *buf, size_t n) {
    int64_t total = ft_space_size(&t->space);
    if (total == INT64_MAX)
        snprintf(buf, n, "more than 2^63");
    else
        snprintf(buf, n, "%lld", (long long)total);
}

static ft_status too_late(const ft_t1 *t, ft_err *err) {
    char count[32];
    count_text(t, count, sizeof count);
    return ft_err_set(err, FT_EFORMAT,
                      "%s: %s configurations before the conditions, which prune too late: "
                      "walking them takes more than flaretune enumerates (2^26 steps)",
                      t->path, count);
}

static int count_one(void *ctx, const ft_config *c) {
    (void)c;
    (*(int64_t *)ctx)++;
    return 0;
}

/* The count in two factors: *named, the allowed configurations of the parameters some condition
 * names (walked), and *per, the configurations of the others (each goes with every one of those);
 * an error past 2^63 in all. */
static ft_status count_parts(const ft_t1 *t, int64_t *named, int64_t *per, ft_err *err) {
    *named = 0;
    *per = 1;
    int capped = 0;
    ft_status s = walk_over(t, 1, count_one, named, &capped, err);
    if (s != FT_OK) return s;
    if (capped) return too_late(t, err);
    int named_p[FT_MAX_PARAMS];
    named_params(t, named_p, NULL);
    for (int p = 0; p < t->space.nparams && *named; p++) {
        if (named_p[p]) continue;
        if (*named * *per > INT64_MAX / t->params[p].n)
            return ft_err_set(err, FT_EFORMAT,
                              "%s: its conditions allow more than 2^63 configurations: more "
                              "than flaretune counts",
                              t->path);
        *per *= t->params[p].n;
    }
    return FT_OK;
}

ft_status ft_t1_count(const ft_t1 *t, int64_t *n, ft_err *err) {
    int64_t named = 0, per = 1;
    ft_status s = count_parts(t, &named, &per, err);
    *n = s == FT_OK ? named * per : 0;
    return s;
}

ft_status ft_t1_each(const ft_t1 *t, int (*visit)(void *ctx, const ft_config *c), void *ctx,
                     ft_err *err) {
    int capped = 0;
    ft_status s = walk(t, visit, ctx, &capped, err);
    return s == FT_OK && capped ? too_late(t, err) : s;
}

typedef struct {
    ft_config *out;
    int64_t n, cap;
} t1_list;

static int list_add(void *ctx, const ft_config *c) {
    t1_list *l = ctx;
    if (l->n < l->cap) l->out[l->n++] = *c;
    return l->n == l->cap;
}

ft_status ft_t1_enumerate(const ft_t1 *t, ft_config **cfgs, int64_t *n, ft_err *err) {
    *cfgs = NULL;
    *n = 0;
    /* Counted first, without a list (the parameters no condition names multiply it), so a space
     * past the list's limit is refused before any memory is taken. */
    int64_t m = 0;
    ft_status s = ft_t1_count(t, &m, err);
    return s == FT_OK ? list_counted(t, m, cfgs, n, err) : s;
}

/* The list of the m allowed configurations t was counted to allow. */
static ft_status list_counted(const ft_t1 *t, int64_t m, ft_config **cfgs, int64_t *n,
                              ft_err *err) {
    *cfgs = NULL;
    *n = 0;
    if (m > FT_T1_MAX_ALLOWED) {
        char count[32];
        count_text(t, count, sizeof count);
        return ft_err_set(err, FT_EFORMAT,
                          "%s: %s configurations before the conditions, and they allow %lld: "
                          "more than flaretune lists (2^24)",
                          t->path, count, (long long)m);
    }
    t1_list l = {.out = malloc((size_t)(m ? m : 1) * sizeof *l.out), .cap = m};
    if (!l.out) return ft_err_set(err, FT_ENOMEM, "%s: out of memory", t->path);
    int capped = 0;
    ft_status s = m ? walk(t, list_add, &l, &capped, err) : FT_OK;
    if (s == FT_OK && capped) s = too_late(t, err);
    if (s == FT_OK && l.n != m) /* the two walks judge alike: a fault if not */
        s = ft_err_set(err, FT_EFORMAT, "%s: %lld configurations listed of %lld counted", t->path,
                       (long long)l.n, (long long)m);
    if (s != FT_OK) {
        free(l.out);
        return s;
    }
    *cfgs = l.out;
    *n = m;
    return FT_OK;
}

/* ---- drawing without a list ---------------------------------------------------------------- */

/* A set of positions (open addressing; a slot holds its position + 1, 0 when empty). */
typedef struct {
    uint64_t *slot;
    uint64_t mask;
} pos_set;

/* Adds v; 1 when it was there already. */
static int pos_set_add(pos_set *s, int64_t v) {
    uint64_t key = (uint64_t)v + 1, i = (key * 0x9E3779B97F4A7C15ULL) & s->mask;
    for (; s->slot[i]; i = (i + 1) & s->mask)
        if (s->slot[i] == key) return 1;
    s->slot[i] = key;
    return 0;
}

/* A drawn position and its place in the draw. */
typedef struct {
    int64_t pos, at;
} drawn;

static int cmp_drawn(const void *a, const void *b) {
    const int64_t x = ((const drawn *)a)->pos, y = ((const drawn *)b)->pos;
    return (x > y) - (x < y);
}

/* k distinct positions of [0, n) (k < n), drawn one at a time from the seed, a position drawn
 * before drawn anew: every ordered k of them as likely as any other, and the first k of a larger
 * draw from the same seed are these (a sample that grows keeps what it had). About
 * n ln(n / (n - k)) draws: about k where k is far below n; where k is nearly n, more (k = 2^24
 * of 2^24 + 64 allowed: 2.1 x 10^8 draws, 15 s here with the walk, 2 GB for the
 * configurations). Returned ascending in pos, each with its place. */
static ft_status draw_positions(const ft_t1 *t, int64_t n, int64_t k, uint64_t seed, drawn *d,
                                ft_err *err) {
    uint64_t cap = 2;
    while (cap < 2 * (uint64_t)k)
        cap <<= 1;
    pos_set set = {.slot = calloc(cap, sizeof *set.slot), .mask = cap - 1};
    if (!set.slot) return ft_err_set(err, FT_ENOMEM, "%s: out of memory", t->path);
    ft_rng r;
    ft_rng_seed(&r, seed);
    for (int64_t got = 0; got < k;) {
        const int64_t v = (int64_t)ft_rng_below(&r, (uint64_t)n);
        if (!pos_set_add(&set, v)) d[got] = (drawn){v, got}, got++;
    }
    free(set.slot);
    qsort(d, (size_t)k, sizeof *d, cmp_drawn);
    return FT_OK;
}

/* The walk's visitor that turns positions into configurations: position q is the (q / per)-th
 * allowed configuration of the named parameters, with the others' values at q % per (the last
 * of them fastest). */
typedef struct {
    const ft_t1 *t;
    int others[FT_MAX_PARAMS], nothers;
    int64_t per, named; /* this configuration of the named parameters is the named-th */
    const drawn *pos;   /* ascending */
    int64_t k, at;
    ft_config *out; /* in the draw's order */
} t1_draw;

static int draw_visit(void *ctx, const ft_config *c) {
    t1_draw *d = ctx;
    for (; d->at < d->k && d->pos[d->at].pos / d->per == d->named; d->at++) {
        ft_config x = *c;
        int64_t q = d->pos[d->at].pos % d->per;
        for (int i = d->nothers - 1; i >= 0; i--) {
            const int p = d->others[i], m = d->t->params[p].n;
            x.v[p] = d->t->params[p].values[q % m];
            q /= m;
        }
        d->out[d->pos[d->at].at] = x;
    }
    d->named++;
    return d->at == d->k;
}

ft_status ft_t1_draw(const ft_t1 *t, int64_t k, uint64_t seed, ft_config **cfgs, int64_t *n,
                     ft_err *err) {
    int64_t named = 0, per = 1;
    ft_status s = count_parts(t, &named, &per, err);
    if (s == FT_OK) s = draw_counted(t, named, per, k, seed, cfgs, n, err);
    return s;
}

/* ft_t1_draw from t's count, named x per. */
static ft_status draw_counted(const ft_t1 *t, int64_t named, int64_t per, int64_t k, uint64_t seed,
                              ft_config **cfgs, int64_t *n, ft_err *err) {
    *cfgs = NULL;
    *n = 0;
    if (k > FT_T1_MAX_ALLOWED)
        return ft_err_set(err, FT_EINVAL, "%s: a sample of %lld: more than flaretune lists (2^24)",
                          t->path, (long long)k);
    if (k >= named * per) return list_counted(t, named * per, cfgs, n, err);
    t1_draw d = {.t = t, .per = per, .k = k};
    drawn *pos = malloc((size_t)(k ? k : 1) * sizeof *pos);
    d.out = malloc((size_t)(k ? k : 1) * sizeof *d.out);
    if (!pos || !d.out) {
        free(pos);
        free(d.out);
        return ft_err_set(err, FT_ENOMEM, "%s: out of memory", t->path);
    }
    d.pos = pos;
    int named_p[FT_MAX_PARAMS];
    named_params(t, named_p, NULL);
    for (int p = 0; p < t->space.nparams; p++)
        if (!named_p[p]) d.others[d.nothers++] = p;
    int capped = 0;
    ft_status s = draw_positions(t, named * per, k, seed, pos, err);
    if (s == FT_OK && k) s = walk_over(t, 1, draw_visit, &d, &capped, err);
    if (s == FT_OK && (capped || d.at != k)) /* the two walks judge alike: a fault if not */
        s = ft_err_set(err, FT_EFORMAT, "%s: %lld configurations drawn of %lld", t->path,
                       (long long)d.at, (long long)k);
    free(pos);
    if (s != FT_OK) {
        free(d.out);
        return s;
    }
    *cfgs = d.out;
    *n = k;
    return FT_OK;
}

static ft_status eval_dim(const ft_t1 *t, const ft_expr *e, const slots *s, const char *what,
                          long long *out, ft_err *err) {
    ft_expr_value v;
    ft_err ee = {0};
    if (ft_expr_eval(e, s->v, &v, &ee) != FT_OK)
        return ft_err_set(err, FT_EFORMAT, "%s: %s: %s", t->path, what, ee.msg);
    double x = ft_expr_number(v);
    if (!(x >= 1) || x != floor(x) || x > 2147483647.0)
        return ft_err_set(err, FT_EFORMAT, "%s: %s is %g (a positive integer is needed)", t->path,
                          what, x);
    *out = (long long)x;
    return FT_OK;
}

ft_status ft_t1_launch(const ft_t1 *t, const ft_config *cfg, long long grid[3], long long block[3],
                       ft_err *err) {
    slots s;
    slot_values(t, cfg, 0, &s);
    static const char *const AX[3] = {"x", "y", "z"};
    for (int d = 0; d < 3; d++) {
        char what[48];
        block[d] = 1;
        if (t->local[d]) {
            snprintf(what, sizeof what, "LocalSize.%c", "XYZ"[d]);
            ft_status st = eval_dim(t, t->local[d], &s, what, &block[d], err);
            if (st != FT_OK) return st;
        } else {
            char pn[32];
            snprintf(pn, sizeof pn, "block_size_%s", AX[d]);
            int pi = ft_space_param(&t->space, pn);
            if (pi >= 0 && !t->labels[pi]) block[d] = cfg->v[pi];
        }
        if (block[d] < 1 || block[d] > 2147483647LL)
            return ft_err_set(err, FT_EFORMAT, "%s: the block's %s dimension is %lld threads",
                              t->path, AX[d], block[d]);
        if (t->griddiv[d][0] != -2) {
            long long div = 1;
            for (int k = 0; t->griddiv[d][k] >= 0; k++) {
                long long v = cfg->v[t->griddiv[d][k]];
                if (v < 1 || __builtin_mul_overflow(div, v, &div))
                    return ft_err_set(err, FT_EFORMAT,
                                      "%s: GridDiv%c: a divisor below 1 or too large", t->path,
                                      "XYZ"[d]);
            }
            grid[d] = (t->problem[d] + div - 1) / div;
        } else if (t->global[d]) {
            snprintf(what, sizeof what, "GlobalSize.%c", "XYZ"[d]);
            long long g;
            ft_status st = eval_dim(t, t->global[d], &s, what, &g, err);
            if (st != FT_OK) return st;
            grid[d] = t->global_in_blocks ? g : (g + block[d] - 1) / block[d];
        } else {
            grid[d] = d < t->nproblem ? (t->problem[d] + block[d] - 1) / block[d] : 1;
        }
        if (grid[d] < 1 || grid[d] > 2147483647LL)
            return ft_err_set(err, FT_EFORMAT, "%s: the grid's %s dimension is %lld blocks",
                              t->path, AX[d], grid[d]);
    }
    return FT_OK;
}

int ft_t1_defines(const ft_t1 *t, const ft_config *cfg, char (*buf)[96], int cap) {
    int n = 0;
    for (int i = 0; i < t->space.nparams && n < cap; i++) {
        char v[64];
        ft_config_value_str(&t->space, i, cfg->v[i], v, sizeof v);
        snprintf(buf[n++], 96, "%s=%s", t->params[i].name, v);
    }
    if (n < cap) snprintf(buf[n++], 96, "kernel_tuner=1");
    return n;
}

void ft_t1_key(const ft_t1 *t, const ft_config *cfg, char *buf, size_t n) {
    size_t k = 0;
    if (n) buf[0] = 0;
    for (int i = 0; i < t->space.nparams && k < n; i++) {
        char v[64];
        ft_config_value_str(&t->space, i, cfg->v[i], v, sizeof v);
        k += (size_t)snprintf(buf + k, n - k, "%s%s", i ? "," : "", v);
    }
}
