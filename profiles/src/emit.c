/* emit.c: a profile's tuned configurations for other builds (see docs/emit.md).
 *
 * c-header: a self-contained C/C++ header. Everything in it is `static` (tables) or
 * `static inline` (functions), so any number of translation units may include it and nothing
 * clashes at link time; unused tables and functions raise no warning. It needs only <stddef.h>,
 * <stdlib.h> (strtod, for attribute values that are numbers) and <string.h>: the lookup
 * minimises the product of max(a, b) / min(a, b) over the sizes, which orders entries exactly
 * as the sum of |log(a / b)| does, without libm.
 *
 * json: a flat array of records {op, backend, device, shape, attrs, params, median_s}, then one
 * {kernel, backend, device, problem_size, params, median_s} per kernel of a T1 file.
 *
 * Both list every attribute of an entry's op (ft_profile_attrs_all), those the profile leaves
 * out at their defaults too, so that a lookup can name an attribute at its default; one that
 * changes nothing in the entry's call (the loss's eps without final_norm) has the value "*".
 *
 * Both write the kernels of T1 files (tune --t1 --profile) after the ops' entries: in the header
 * as entries of op "t1:KERNEL" whose sizes are the problem size's x, y and z.
 */
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "flaretune/version.h"
#include "kernels/registry.h"
#include "op/backend.h"
#include "profiles/src/profile.h"

ft_status ft_emit_format_parse(const char *name, ft_emit_format *out, ft_err *err) {
    if (strcmp(name, "c-header") == 0)
        *out = FT_EMIT_C_HEADER;
    else if (strcmp(name, "json") == 0)
        *out = FT_EMIT_JSON;
    else if (strcmp(name, "package") == 0)
        *out = FT_EMIT_PACKAGE;
    else
        return ft_err_set(err, FT_EINVAL, "unknown format '%s' (formats: c-header, json, package)",
                          name);
    return FT_OK;
}

int ft_emit_selects(const ft_emit_opts *o, const char *backend, const char *device) {
    return (!o->backend || strcmp(backend, o->backend) == 0) &&
           (!o->device || strstr(device, o->device) != NULL);
}

static int selected(const ft_profile_entry *e, const ft_emit_opts *o) {
    return ft_emit_selects(o, e->backend, e->device);
}

/* One entry of the header's tables: an op's entry, or a kernel of a T1 file. */
typedef struct {
    const char *op; /* the op's name, or "t1:KERNEL" (then owned: op_owned) */
    char *op_owned;
    const char *backend, *device;
    const char *size_name[FT_MAX_SYMS];
    long long size[FT_MAX_SYMS];
    int nsizes;
    json_t *attrs; /* every attribute of the op (ft_profile_attrs_all; owned), or NULL */
    const json_t *params;
    double median_s;
    const ft_profile_entry *e; /* NULL for a kernel */
} row;

static void rows_free(row *rows, int n) {
    for (int i = 0; i < n; i++) {
        free(rows[i].op_owned);
        json_decref(rows[i].attrs);
    }
    free(rows);
}

/* The selected entries, then the selected kernels, as rows (*out: free with rows_free); -1 when
 * out of memory. */
static int collect(const ft_profile *p, const ft_emit_opts *o, row **out) {
    static const char *const axis[] = {"x", "y", "z"};
    int n = ft_profile_count(p), nk = ft_profile_kernel_count(p), m = 0;
    row *rows = calloc((size_t)(n + nk + 1), sizeof *rows);
    if (!rows) return -1;
    for (int i = 0; i < n; i++) {
        const ft_profile_entry *e = ft_profile_entry_at(p, i);
        if (!selected(e, o)) continue;
        row *r = &rows[m++];
        *r = (row){.op = e->op->name,
                   .backend = e->backend,
                   .device = e->device,
                   .attrs = ft_profile_attrs_all(e),
                   .params = e->config,
                   .median_s = e->median_s,
                   .e = e};
        if (!r->attrs) {
            rows_free(rows, m);
            return -1;
        }
        for (; e->op->syms[r->nsizes]; r->nsizes++) {
            r->size_name[r->nsizes] = e->op->syms[r->nsizes];
            r->size[r->nsizes] = (long long)json_integer_value(
                json_object_get(e->shape, e->op->syms[r->nsizes]));
        }
    }
    for (int i = 0; i < nk; i++) {
        const ft_profile_kernel *k = ft_profile_kernel_at(p, i);
        if (!ft_emit_selects(o, k->backend, k->device)) continue;
        row *r = &rows[m++];
        *r = (row){.backend = k->backend, .device = k->device, .params = k->config,
                   .median_s = k->median_s};
        r->op = r->op_owned = malloc(strlen(k->kernel) + 4);
        if (!r->op_owned) {
            rows_free(rows, m);
            return -1;
        }
        memcpy(r->op_owned, "t1:", 3);
        memcpy(r->op_owned + 3, k->kernel, strlen(k->kernel) + 1);
        for (; r->nsizes < (int)json_array_size(k->problem_size) && r->nsizes < 3; r->nsizes++) {
            r->size_name[r->nsizes] = axis[r->nsizes];
            r->size[r->nsizes] = (long long)json_integer_value(json_array_get(k->problem_size,
                                                                              (size_t)r->nsizes));
        }
    }
    *out = rows;
    return m;
}

/* ---- json ----------------------------------------------------------------------------------- */

static ft_status emit_json(const ft_profile *p, const ft_emit_opts *o, FILE *f, int *count,
                           ft_err *err) {
    json_t *arr = json_array();
    if (!arr) return ft_err_set(err, FT_ENOMEM, "out of memory emitting JSON");
    for (int i = 0; i < ft_profile_count(p); i++) {
        const ft_profile_entry *e = ft_profile_entry_at(p, i);
        if (!selected(e, o)) continue;
        json_t *rec =
            json_pack("{s:s, s:s, s:s, s:O, s:o, s:O, s:f}", "op", e->op->name, "backend",
                      e->backend, "device", e->device, "shape", e->shape, "attrs",
                      ft_profile_attrs_all(e), "params", e->config, "median_s", e->median_s);
        if (!rec || json_array_append_new(arr, rec)) {
            json_decref(arr);
            return ft_err_set(err, FT_ENOMEM, "out of memory emitting JSON");
        }
        (*count)++;
    }
    for (int i = 0; i < ft_profile_kernel_count(p); i++) {
        const ft_profile_kernel *k = ft_profile_kernel_at(p, i);
        if (!ft_emit_selects(o, k->backend, k->device)) continue;
        json_t *rec = json_pack("{s:s, s:s, s:s, s:O, s:O, s:f}", "kernel", k->kernel, "backend",
                                k->backend, "device", k->device, "problem_size", k->problem_size,
                                "params", k->config, "median_s", k->median_s);
        if (!rec || json_array_append_new(arr, rec)) {
            json_decref(arr);
            return ft_err_set(err, FT_ENOMEM, "out of memory emitting JSON");
        }
        (*count)++;
    }
    int bad = json_dumpf(arr, f, JSON_INDENT(2)) != 0 || fputc('\n', f) == EOF;
    json_decref(arr);
    return bad ? ft_err_set(err, FT_EIO, "write failed: %s", strerror(errno)) : FT_OK;
}

/* ---- c-header ------------------------------------------------------------------------------- */

/* A C string literal of s that means the same bytes in C99, C11 and C++: quotes and
 * backslashes escaped, '?' escaped (no trigraphs), anything else outside printable ASCII as a
 * three-digit octal escape (which, unlike \x, cannot swallow the next character). */
static void put_cstr(FILE *f, const char *s) {
    fputc('"', f);
    for (const unsigned char *c = (const unsigned char *)s; *c; c++) {
        if (*c == '"' || *c == '\\' || *c == '?')
            fprintf(f, "\\%c", *c);
        else if (*c >= 0x20 && *c < 0x7f)
            fputc(*c, f);
        else
            fprintf(f, "\\%03o", *c);
    }
    fputc('"', f);
}

/* Text safe inside a C comment: no '*', no '?' (trigraphs), printable ASCII only. */
static int comment_char(unsigned char c) { return isalnum(c) || (c && strchr(" ._/+-:,()@=", c)); }

static void put_comment_text(FILE *f, const char *s) {
    for (const unsigned char *c = (const unsigned char *)s; *c; c++)
        fputc(comment_char(*c) ? *c : '_', f);
}

/* Whether put_comment_text writes s as it is. */
static int comment_safe(const char *s) {
    for (const unsigned char *c = (const unsigned char *)s; *c; c++)
        if (!comment_char(*c)) return 0;
    return 1;
}

static int is_identifier(const char *s) {
    if (!s[0] || strlen(s) > 64 || !(isalpha((unsigned char)s[0]) || s[0] == '_')) return 0;
    for (const char *c = s; *c; c++)
        if (!isalnum((unsigned char)*c) && *c != '_') return 0;
    return 1;
}

/* The index of a named parameter's label in the backend's space, or -1 when this build cannot
 * tell (the backend is not built here, the label is unknown, or e is a kernel's). */
static long long label_index(const ft_profile_entry *e, const char *param, const char *label) {
    for (int b = 0; e && b < ft_backend_count(); b++) {
        const ft_backend *be = ft_backend_at(b);
        if (strcmp(be->name, e->backend) != 0) continue;
        if (!be->built || !be->supports(e->op)) return -1;
        const ft_space *s = be->space(e->op);
        int i = s ? ft_space_param(s, param) : -1;
        if (i < 0 || !s->params[i].labels) return -1;
        for (int k = 0; k < s->params[i].n; k++)
            if (strcmp(s->params[i].labels[k], label) == 0) return k;
        return -1;
    }
    return -1;
}

/* The header's fixed part: types and functions, with P standing for the prefix. */
static void put_types(FILE *f, const char *P) {
    fprintf(f,
            "typedef struct %1$s_size {\n"
            "    const char *name;\n"
            "    long long value;\n"
            "} %1$s_size;\n\n"
            "typedef struct %1$s_attr {\n"
            "    const char *name;\n"
            "    const char *value;\n"
            "} %1$s_attr;\n\n"
            "/* One tuned parameter: its label as flaretune writes it (the number as text for a\n"
            " * numeric parameter), and its value: the number itself, or for a named parameter\n"
            " * (is_label = 1) the label's index in the backend's space (-1 when the emitting\n"
            " * flaretune could not resolve it). */\n"
            "typedef struct %1$s_param {\n"
            "    const char *name;\n"
            "    const char *label;\n"
            "    long long value;\n"
            "    int is_label;\n"
            "} %1$s_param;\n\n"
            "typedef struct %1$s_entry {\n"
            "    const char *op;\n"
            "    const char *backend;\n"
            "    const char *device;\n"
            "    const %1$s_size *sizes; /* in the op's size order */\n"
            "    int nsizes;\n"
            "    const %1$s_attr *attrs;\n"
            "    int nattrs;\n"
            "    const %1$s_param *params;\n"
            "    int nparams;\n"
            "    double median_s; /* the tuned configuration's median time per call */\n"
            "} %1$s_entry;\n\n",
            P);
}

/* The header's helpers that tell whether an entry answers a query. */
static void put_match_functions(FILE *f, const char *P) {
    fprintf(
        f,
        "/* Does an entry's attribute value v answer the query's (q, n bytes)? \"*\" answers\n"
        " * any; numbers compare by value (\"1e-6\" is \"0.000001\"), other text as it is. */\n"
        "static inline int %1$s_value_match_(const char *v, const char *q, size_t n) {\n"
        "    char a[64], b[64];\n"
        "    char *ea, *eb;\n"
        "    double x, y;\n"
        "    size_t vn = strlen(v);\n"
        "    if ((vn == 1 && v[0] == '*') || (vn == n && strncmp(v, q, n) == 0)) return 1;\n"
        "    if (vn >= sizeof a || n >= sizeof b || !vn || !n) return 0;\n"
        "    memcpy(a, v, vn + 1);\n"
        "    memcpy(b, q, n);\n"
        "    b[n] = '\\0';\n"
        "    x = strtod(a, &ea);\n"
        "    y = strtod(b, &eb);\n"
        "    return !*ea && !*eb && x <= y && x >= y; /* x == y without -Wfloat-equal; NaN: no */\n"
        "}\n\n"
        "/* Every \"name=value\" of q (comma-separated; NULL or \"\" for any) is an attribute"
        " of e. */\n"
        "static inline int %1$s_attrs_match_(const %1$s_entry *e, const char *q) {\n"
        "    while (q && *q) {\n"
        "        const char *end = strchr(q, ',');\n"
        "        size_t len = end ? (size_t)(end - q) : strlen(q);\n"
        "        if (len) {\n"
        "            const char *eq = (const char *)memchr(q, '=', len);\n"
        "            size_t nlen, vlen;\n"
        "            int i, found = 0;\n"
        "            if (!eq) return 0;\n"
        "            nlen = (size_t)(eq - q);\n"
        "            vlen = len - nlen - 1;\n"
        "            for (i = 0; i < e->nattrs && !found; i++)\n"
        "                found = strlen(e->attrs[i].name) == nlen &&\n"
        "                        strncmp(e->attrs[i].name, q, nlen) == 0 &&\n"
        "                        %1$s_value_match_(e->attrs[i].value, eq + 1, vlen);\n"
        "            if (!found) return 0;\n"
        "        }\n"
        "        q += len + (end ? 1 : 0);\n"
        "    }\n"
        "    return 1;\n"
        "}\n\n"
        "/* max(a, b) / min(a, b), sizes below 1 counted as 1. */\n"
        "static inline double %1$s_ratio_(long long a, long long b) {\n"
        "    double x = a < 1 ? 1.0 : (double)a, y = b < 1 ? 1.0 : (double)b;\n"
        "    return x > y ? x / y : y / x;\n"
        "}\n\n"
        "static inline int %1$s_candidate_(const %1$s_entry *e, const char *op,\n"
        "        const char *backend, const char *device, const char *attrs) {\n"
        "    return e->op && strcmp(e->op, op) == 0 &&\n"
        "           (!backend || strcmp(e->backend, backend) == 0) &&\n"
        "           (!device || strcmp(e->device, device) == 0) &&\n"
        "           %1$s_attrs_match_(e, attrs);\n"
        "}\n\n",
        P);
}

/* The lookups by sizes (U is the prefix in upper case, for the entry count): one search for the
 * nearest entry, and the two ways of giving it the sizes. */
static void put_lookup_functions(FILE *f, const char *P, const char *U) {
    fprintf(
        f,
        "/* The entry of op nearest to the sizes, given by name (named, nnamed) or, when values\n"
        " * is not NULL, in the op's size order (values, nvalues): see the two lookups below. */\n"
        "static inline const %1$s_entry *%1$s_nearest_(\n"
        "        const char *op, const char *backend, const char *device, const char *attrs,\n"
        "        const %1$s_size *named, int nnamed, const long long *values, int nvalues,\n"
        "        int *exact) {\n"
        "    const %1$s_entry *best = NULL;\n"
        "    double best_d = 0.0;\n"
        "    int best_exact = 0, i, k, j;\n"
        "    for (i = 0; op && i < %2$s_COUNT; i++) {\n"
        "        const %1$s_entry *e = &%1$s_entries[i];\n"
        "        double d = 1.0;\n"
        "        int ex = 1;\n"
        "        if (!%1$s_candidate_(e, op, backend, device, attrs)) continue;\n"
        "        for (k = 0; k < e->nsizes; k++) {\n"
        "            const long long *v = NULL;\n"
        "            if (values)\n"
        "                v = k < nvalues ? &values[k] : NULL;\n"
        "            else\n"
        "                for (j = 0; named && j < nnamed && !v; j++)\n"
        "                    if (named[j].name && strcmp(named[j].name, e->sizes[k].name) == 0)\n"
        "                        v = &named[j].value;\n"
        "            if (!v) {\n"
        "                ex = 0;\n"
        "                continue;\n"
        "            }\n"
        "            if (*v != e->sizes[k].value) ex = 0;\n"
        "            d *= %1$s_ratio_(*v, e->sizes[k].value);\n"
        "        }\n"
        "        /* nearer by more than rounding, or the first of the equally near */\n"
        "        if (!best || (ex && !best_exact) || (ex == best_exact && d < best_d * (1 - "
        "1e-9))) {\n"
        "            best = e;\n"
        "            best_d = d;\n"
        "            best_exact = ex;\n"
        "        }\n"
        "    }\n"
        "    if (exact) *exact = best ? best_exact : 0;\n"
        "    return best;\n"
        "}\n\n"
        "/* The entry of op nearest to the sizes given as name/value pairs, among those of\n"
        " * backend and device (NULL: any) whose attributes include every \"name=value\" of\n"
        " * attrs (NULL: any). Exact (*exact = 1) when every size of the entry is given with\n"
        " * the same value; otherwise the smallest sum over the sizes of |log(size / entry\n"
        " * size)| (sizes not given are left out). NULL when the op has no entry. exact may be\n"
        " * NULL. */\n"
        "static inline const %1$s_entry *%1$s_lookup(\n"
        "        const char *op, const char *backend, const char *device, const char *attrs,\n"
        "        const %1$s_size *sizes, int nsizes, int *exact) {\n"
        "    return %1$s_nearest_(op, backend, device, attrs, sizes, nsizes, NULL, 0, exact);\n"
        "}\n\n"
        "/* The same with the sizes as an array in the op's size order (listed at the top of\n"
        " * this file); a shorter array leaves the last sizes out. */\n"
        "static inline const %1$s_entry *%1$s_lookup_v(\n"
        "        const char *op, const char *backend, const char *device, const char *attrs,\n"
        "        const long long *sizes, int nsizes, int *exact) {\n"
        "    static const long long none = 0;\n"
        "    return %1$s_nearest_(op, backend, device, attrs, NULL, 0, sizes ? sizes : &none,\n"
        "                         sizes ? nsizes : 0, exact);\n"
        "}\n\n",
        P, U);
}

/* The accessors of a found entry's parameters. */
static void put_param_functions(FILE *f, const char *P) {
    fprintf(
        f,
        "/* The value of parameter name in e, or fallback when e is NULL, has no such\n"
        " * parameter, or holds a label whose index was not resolved. */\n"
        "static inline long long %1$s_param_int(const %1$s_entry *e, const char *name,\n"
        "        long long fallback) {\n"
        "    int i;\n"
        "    for (i = 0; e && name && i < e->nparams; i++)\n"
        "        if (strcmp(e->params[i].name, name) == 0)\n"
        "            return e->params[i].is_label && e->params[i].value < 0 ? fallback\n"
        "                                                                   : e->params[i].value;\n"
        "    return fallback;\n"
        "}\n\n"
        "/* The label of parameter name in e (\"chunked\", or \"64\" for a numeric one), or\n"
        " * fallback when e is NULL or has no such parameter. */\n"
        "static inline const char *%1$s_param_label(const %1$s_entry *e, const char *name,\n"
        "        const char *fallback) {\n"
        "    int i;\n"
        "    for (i = 0; e && name && i < e->nparams; i++)\n"
        "        if (strcmp(e->params[i].name, name) == 0) return e->params[i].label;\n"
        "    return fallback;\n"
        "}\n\n",
        P);
}

/* The header's functions, after the tables they search. */
static void put_functions(FILE *f, const char *P, const char *U) {
    put_match_functions(f, P);
    put_lookup_functions(f, P, U);
    put_param_functions(f, P);
}

/* Writes what follows an item's name in a table row, up to and including the item's end. */
typedef void put_value_fn(FILE *f, const ft_profile_entry *e, const char *key, json_t *v);

static void put_attr_value(FILE *f, const ft_profile_entry *e, const char *key, json_t *v) {
    (void)e;
    (void)key;
    put_cstr(f, json_string_value(v));
    fprintf(f, "},");
}

/* A named parameter carries its label's index too (is_label = 1); a numeric one its number as
 * the label. */
static void put_param_value(FILE *f, const ft_profile_entry *e, const char *key, json_t *v) {
    if (json_is_string(v)) {
        put_cstr(f, json_string_value(v));
        fprintf(f, ", %lldLL, 1},", label_index(e, key, json_string_value(v)));
    } else {
        long long x = (long long)json_integer_value(v);
        fprintf(f, "\"%lld\", ", x);
        /* -9223372036854775808LL is the negation of a constant too large for long long. */
        if (x == LLONG_MIN)
            fprintf(f, "(-%lldLL - 1), 0},", LLONG_MAX);
        else
            fprintf(f, "%lldLL, 0},", x);
    }
}

static void put_item(FILE *f, const ft_profile_entry *e, const char *key, json_t *v,
                     put_value_fn *put_value) {
    fprintf(f, " {");
    put_cstr(f, key);
    fprintf(f, ", ");
    put_value(f, e, key, v);
}

enum { TABLE_SIZES, TABLE_ATTRS, TABLE_PARAMS };

/* One flat table, P_sizes_, P_attrs_ or P_params_: a row per entry with its items (sizes in the
 * op's order; an entry without attributes or parameters has no row there), then the terminating
 * element. */
static void put_table(FILE *f, const row *rows, int n, const char *P, int table) {
    static const struct {
        const char *type, *last;
        put_value_fn *put_value;
    } tables[] = {[TABLE_SIZES] = {"size", "{NULL, 0LL}", NULL},
                  [TABLE_ATTRS] = {"attr", "{NULL, NULL}", put_attr_value},
                  [TABLE_PARAMS] = {"param", "{NULL, NULL, 0LL, 0}", put_param_value}};
    fprintf(f, "static const %s_%s %s_%ss_[] = {\n", P, tables[table].type, P, tables[table].type);
    for (int i = 0; i < n; i++) {
        const row *r = &rows[i];
        const json_t *items = table == TABLE_ATTRS ? r->attrs : r->params;
        if (table != TABLE_SIZES && !json_object_size(items)) continue;
        fprintf(f, "   ");
        if (table == TABLE_SIZES) {
            for (int s = 0; s < r->nsizes; s++) {
                fprintf(f, " {");
                put_cstr(f, r->size_name[s]);
                fprintf(f, ", %lldLL},", r->size[s]);
            }
        } else {
            const char *key;
            json_t *v;
            json_object_foreach((json_t *)items, key, v)
                put_item(f, r->e, key, v, tables[table].put_value);
        }
        fprintf(f, "\n");
    }
    fprintf(f, "    %s};\n\n", tables[table].last);
}

/* Whether the opening comment can show a lookup of r that finds it: every name the example
 * writes (op, backend, sizes, first parameter) is one put_comment_text leaves as it is. */
static int example_works(const row *r) {
    int ok = comment_safe(r->op) && comment_safe(r->backend);
    for (int k = 0; ok && k < r->nsizes; k++)
        ok = comment_safe(r->size_name[k]);
    if (ok && json_object_size(r->params))
        ok = comment_safe(json_object_iter_key(json_object_iter((json_t *)r->params)));
    return ok;
}

/* The opening comment's example: a lookup of the header's first entry whose names a comment
 * holds as they are (r; NULL: none, then one of the loss) and of its first parameter. */
static void put_example(FILE *f, const char *P, const row *r) {
    fprintf(f, " *\n *   static const %s_size want[] = {", P);
    if (!r) fprintf(f, "{\"M\", 512}, {\"H\", 1024}, {\"V\", 32768}");
    for (int k = 0; r && k < r->nsizes; k++) {
        fprintf(f, "%s{\"", k ? ", " : "");
        put_comment_text(f, r->size_name[k]);
        fprintf(f, "\", %lld}", r->size[k]);
    }
    fprintf(f, "};\n *   int exact;\n *   const %s_entry *e = %s_lookup(\"", P, P);
    put_comment_text(f, r ? r->op : "loss");
    fprintf(f, "\", \"");
    put_comment_text(f, r ? r->backend : "cpu");
    fprintf(f, "\", NULL, NULL, want, %d, &exact);\n", r ? r->nsizes : 3);
    const char *param = "threads";
    if (r && json_object_size(r->params)) param = json_object_iter_key(json_object_iter((json_t *)r->params));
    fprintf(f, " *   long long v = %s_param_int(e, \"", P);
    put_comment_text(f, param);
    fprintf(f, "\", 1);\n");
}

/* ISO C guarantees string literals of 4095 characters (C99 5.2.4.1, C11 too); a longer one
 * makes the header fail `-pedantic -Werror` in the build that includes it. */
#define C_STRING_MAX 4095

/* A string of the rows too long for a C string literal, said in err; FT_OK when none is. */
static ft_status check_string_lengths(const row *rows, int n, ft_err *err) {
    for (int i = 0; i < n; i++) {
        const row *r = &rows[i];
        const char *what = NULL, *s = NULL;
        if (strlen(r->op) > C_STRING_MAX) what = r->e ? "an op name" : "a kernel name", s = r->op;
        if (strlen(r->backend) > C_STRING_MAX) what = "a backend", s = r->backend;
        if (strlen(r->device) > C_STRING_MAX) what = "a device", s = r->device;
        const json_t *objs[] = {r->attrs, r->params};
        for (int k = 0; k < 2 && !what; k++) {
            const char *key;
            json_t *v;
            json_object_foreach((json_t *)objs[k], key, v) {
                if (strlen(key) > C_STRING_MAX) what = "a name", s = key;
                if (json_is_string(v) && strlen(json_string_value(v)) > C_STRING_MAX)
                    what = "a value", s = json_string_value(v);
            }
        }
        /* The profile's data, not the command line, is what cannot be emitted: FT_EFORMAT
         * (exit 1), as for any input a command cannot use. */
        if (what)
            return ft_err_set(err, FT_EFORMAT,
                              "an entry of %.60s on %.40s: %s of %zu bytes is longer than the %d "
                              "a C string literal may hold; emit it as json instead",
                              r->op, r->backend, what, strlen(s), C_STRING_MAX);
    }
    return FT_OK;
}

static ft_status emit_header(const ft_profile *p, const ft_emit_opts *o, FILE *f, int *count,
                             ft_err *err) {
    const char *P = o->prefix ? o->prefix : "ft_tuned";
    if (!is_identifier(P))
        return ft_err_set(err, FT_EINVAL,
                          "prefix '%s' is not a C identifier (letters, digits, '_'; at most 64)",
                          P);
    char U[80];
    size_t k = 0;
    for (; P[k]; k++)
        U[k] = (char)toupper((unsigned char)P[k]);
    U[k] = '\0';
    row *rows;
    int n = collect(p, o, &rows);
    if (n < 0) return ft_err_set(err, FT_ENOMEM, "out of memory emitting a header");
    ft_status too_long = check_string_lengths(rows, n, err);
    if (too_long) {
        rows_free(rows, n);
        return too_long;
    }

    fprintf(f, "/* %s.h: tuned kernel configurations emitted by `flaretune emit`", P);
    if (o->source) {
        fprintf(f, " from ");
        put_comment_text(f, o->source);
    }
    fprintf(f, ".\n * Generated by flaretune %s (", FT_VERSION);
    put_comment_text(f, FT_GIT_DESCRIBE);
    fprintf(f,
            "); do not edit.\n *\n"
            " * Self-contained: C99, C11 or C++, no flaretune header or library needed. Every\n"
            " * table is static and every function static inline, so any number of translation\n"
            " * units may include it. See docs/emit.md.\n"
            " *\n * %d entr%s. Ops and their size order (for %s_lookup_v):\n",
            n, n == 1 ? "y" : "ies", P);
    for (int i = 0; i < n; i++) { /* each op once, where it first stands */
        int first = 1;
        for (int j = 0; j < i && first; j++)
            first = strcmp(rows[j].op, rows[i].op) != 0;
        if (!first) continue;
        fprintf(f, " *   ");
        put_comment_text(f, rows[i].op);
        fprintf(f, ":");
        for (int s = 0; s < rows[i].nsizes; s++)
            fprintf(f, "%s %s", s ? "," : "", rows[i].size_name[s]);
        fprintf(f, "\n");
    }
    int ex = 0;
    while (ex < n && !example_works(&rows[ex]))
        ex++;
    put_example(f, P, ex < n ? &rows[ex] : NULL);
    fprintf(f,
            " */\n"
            "#ifndef %2$s_H\n#define %2$s_H\n\n#include <stddef.h>\n#include <stdlib.h>\n#include "
            "<string.h>\n\n"
            "#define %2$s_COUNT %3$d /* entries in %1$s_entries */\n\n",
            P, U, n);
    put_types(f, P);

    /* Flat tables of sizes, attributes and parameters; each entry points at its run. Without
     * entries nothing would point at them, and a table nothing uses fails -Werror (a header
     * compiled on its own warns of an unused static const). */
    if (n) {
        put_table(f, rows, n, P, TABLE_SIZES);
        put_table(f, rows, n, P, TABLE_ATTRS);
        put_table(f, rows, n, P, TABLE_PARAMS);
    }

    fprintf(f, "static const %s_entry %s_entries[] = {\n", P, P);
    size_t si = 0, ai = 0, pi = 0;
    for (int i = 0; i < n; i++) {
        const row *r = &rows[i];
        size_t ns = (size_t)r->nsizes, na = json_object_size(r->attrs),
               np = json_object_size(r->params);
        fprintf(f, "    {");
        put_cstr(f, r->op);
        fprintf(f, ", ");
        put_cstr(f, r->backend);
        fprintf(f, ", ");
        put_cstr(f, r->device);
        fprintf(
            f,
            ",\n     &%s_sizes_[%zu], %zu, &%s_attrs_[%zu], %zu, &%s_params_[%zu], %zu, %.9g},\n",
            P, si, ns, P, ai, na, P, pi, np, r->median_s);
        si += ns;
        ai += na;
        pi += np;
        (*count)++;
    }
    if (!n) fprintf(f, "    {NULL, NULL, NULL, NULL, 0, NULL, 0, NULL, 0, 0.0}\n");
    fprintf(f, "};\n\n");
    rows_free(rows, n);
    put_functions(f, P, U);
    fprintf(f, "#endif /* %s_H */\n", U);
    return ferror(f) ? ft_err_set(err, FT_EIO, "write failed: %s", strerror(errno)) : FT_OK;
}

ft_status ft_profile_emit(const ft_profile *p, const ft_emit_opts *opts, FILE *f, int *nemitted,
                          ft_err *err) {
    int count = 0;
    ft_emit_opts def = {FT_EMIT_C_HEADER, NULL, NULL, NULL, NULL};
    const ft_emit_opts *o = opts ? opts : &def;
    if (o->format == FT_EMIT_PACKAGE)
        return ft_err_set(err, FT_EINVAL, "format package writes a directory: give -o DIR");
    ft_status s = o->format == FT_EMIT_JSON ? emit_json(p, o, f, &count, err)
                                            : emit_header(p, o, f, &count, err);
    if (nemitted) *nemitted = count;
    return s;
}
