/* cmd_show.c: `flaretune show`: the entries of one or more profiles (merged, best per key) as a
 * table or as JSON. */
#include <getopt.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "cli_profile.h"
#include "core/format.h"
#include "core/json.h"
#include "kernels/registry.h"

static void usage(FILE *f) {
    fprintf(f, "usage: flaretune show PROFILE... [--op OP] [--json]\n\n"
               "Print the tuned entries of the profiles, merged (per key the fastest entry):\n"
               "op, backend, device, shape, the winning config, its median time with the IQR,\n"
               "the default config's median, the speedup over it, the fraction of this machine's\n"
               "roofline and the cache level that bounds it (! when above 1: suspect), the worst\n"
               "relative error against the float64 reference, and notes: other configs tie with\n"
               "the winner (tie), the machine was busy while it was tuned (busy), a confirmation\n"
               "disagreed with the search (unstable), Ctrl-C stopped the run before its winner\n"
               "was confirmed (stopped: such an entry never replaces a finished run's). Then the "
               "kernels of T1 files the profiles\n"
               "hold (`tune --t1 --profile`): kernel, backend, device, problem size, the winning\n"
               "config, its median, the default's, the speedup and the evaluations it took.\n"
               "Skipped (invalid or stale) entries are named on stderr.\n\n"
               "  --op OP   only the entries of op OP (t1:KERNEL: only that kernel of a T1 file)\n"
               "  --json    the merged profile as JSON (the format of docs/profiles.md)\n");
}

enum { NCOLS = 12 };
/* A table: its headings (ncols of them) and its columns of numbers, right-aligned. */
typedef struct {
    const char *const *headings;
    int ncols, first_number, last_number;
} table;
static const char *const entry_headings[] = {"op",      "backend",  "device",  "shape",
                                             "attrs",   "config",   "median",  "default",
                                             "speedup", "roofline", "max err", "notes"};
static const table entry_table = {entry_headings, NCOLS, 6, 10};
static const char *const kernel_headings[] = {"kernel",      "backend", "device",  "problem size",
                                              "config",      "median",  "default", "speedup",
                                              "evaluations", "notes"};
static const table kernel_table = {kernel_headings, 10, 5, 8};

/* Characters on screen (UTF-8 continuation bytes take no column). */
static int columns(const char *s) {
    int n = 0;
    for (const unsigned char *c = (const unsigned char *)s; *c; c++)
        n += (*c & 0xC0) != 0x80;
    return n;
}

static void config_str(const json_t *cfg, char *buf, size_t n) {
    if (!ft_json_pairs_text(cfg, buf, n)) snprintf(buf, n, "(none)");
}

static void shape_str(const ft_profile_entry *e, char *buf, size_t n) {
    size_t k = 0;
    buf[0] = '\0';
    for (int s = 0; e->op->syms[s] && k < n; s++)
        k += (size_t)snprintf(
            buf + k, n - k, "%s%s=%lld", s ? " " : "", e->op->syms[s],
            (long long)json_integer_value(json_object_get(e->shape, e->op->syms[s])));
}

/* The attributes that differ from their defaults ("-" when none do): the ones that tell entries of
 * one shape apart. */
static void attrs_str(const json_t *attrs, char *buf, size_t n) {
    ft_attrs def;
    ft_attrs_default(&def);
    size_t k = 0;
    const char *key;
    json_t *v;
    buf[0] = '\0';
    json_object_foreach((json_t *)attrs, key, v) {
        char d[64];
        ft_attrs_format(&def, key, d, sizeof d);
        if (strcmp(d, json_string_value(v)) != 0 && k < n)
            k += (size_t)snprintf(buf + k, n - k, "%s%s=%s", k ? " " : "", key,
                                  json_string_value(v));
    }
    if (!buf[0]) snprintf(buf, n, "-");
}

static double num(const json_t *v) { return json_is_number(v) ? json_number_value(v) : -1; }

/* The median with its IQR where known, the default's median and the speedup, from an entry's
 * or a kernel's JSON, into three cells. */
static void time_cells(const json_t *j, double median, char cell[3][512]) {
    char a[32], b[32];
    double iqr = num(json_object_get(json_object_get(j, "stats"), "iqr_s"));
    if (iqr >= 0)
        snprintf(cell[0], 512, "%s (IQR %s)", ft_fmt_time(median, 0, a, sizeof a),
                 ft_fmt_time(iqr, 0, b, sizeof b));
    else
        snprintf(cell[0], 512, "%s", ft_fmt_time(median, 0, a, sizeof a));
    double def =
        num(json_object_get(json_object_get(json_object_get(j, "default"), "stats"), "median_s"));
    snprintf(cell[1], 512, "%s", ft_fmt_time(def, 0, a, sizeof a));
    ft_fmt_ratio(num(json_object_get(j, "speedup")), cell[2], 512);
}

static void row(const ft_profile_entry *e, char cell[NCOLS][512]) {
    const json_t *j = e->json;
    snprintf(cell[0], 512, "%s", e->op->name);
    snprintf(cell[1], 512, "%s", e->backend);
    snprintf(cell[2], 512, "%s", e->device);
    shape_str(e, cell[3], 512);
    attrs_str(e->attrs, cell[4], 512);
    config_str(e->config, cell[5], 512);
    time_cells(j, e->median_s, &cell[6]);
    double rf = num(json_object_get(j, "roofline_frac"));
    const json_t *roof = json_object_get(j, "roofline");
    const char *level = json_string_value(json_object_get(roof, "level"));
    if (rf >= 0)
        snprintf(cell[9], 512, "%.1f%%%s%s%s", 100 * rf, level ? " " : "", level ? level : "",
                 json_is_true(json_object_get(roof, "suspect")) ? "!" : "");
    else
        snprintf(cell[9], 512, "-");
    double err = num(json_object_get(json_object_get(j, "verification"), "max_rel_err"));
    if (err >= 0)
        snprintf(cell[10], 512, "%.2g", err);
    else
        snprintf(cell[10], 512, "-");
    /* The last column: what to know before trusting the row. */
    size_t ties = json_array_size(json_object_get(j, "tie"));
    int busy = json_is_true(json_object_get(json_object_get(j, "contention"), "busy"));
    int unstable = json_array_size(json_object_get(j, "unstable")) > 0;
    snprintf(cell[11], 512, "-");
    size_t k = 0;
    if (ties) k += (size_t)snprintf(cell[11] + k, 512 - k, "tie(%zu)", ties);
    if (busy) k += (size_t)snprintf(cell[11] + k, 512 - k, "%sbusy", k ? " " : "");
    if (unstable) k += (size_t)snprintf(cell[11] + k, 512 - k, "%sunstable", k ? " " : "");
    if (json_is_true(json_object_get(j, "interrupted")))
        k += (size_t)snprintf(cell[11] + k, 512 - k, "%sstopped", k ? " " : "");
}

static void kernel_row(const ft_profile_kernel *k, char cell[NCOLS][512]) {
    snprintf(cell[0], 512, "%s", k->kernel);
    snprintf(cell[1], 512, "%s", k->backend);
    snprintf(cell[2], 512, "%s", k->device);
    size_t n = 0, d;
    json_t *v;
    cell[3][0] = '\0';
    json_array_foreach(k->problem_size, d, v)
        n += (size_t)snprintf(cell[3] + n, 512 - n, "%s%lld", d ? "x" : "",
                              (long long)json_integer_value(v));
    config_str(k->config, cell[4], 512);
    time_cells(k->json, k->median_s, &cell[5]);
    snprintf(cell[8], 512, "%lld",
             (long long)json_integer_value(json_object_get(k->json, "evaluations")));
    snprintf(cell[9], 512, "%s",
             json_is_true(json_object_get(k->json, "interrupted")) ? "stopped" : "-");
}

/* Print n rows of cells under t's headings, each column as wide as its widest cell. A cell is
 * printed on one line of a terminal: a control character of a hand-edited profile (a line
 * break, a tab, an escape) is printed as '?', as the landscape readers do. */
static void print_cells(const table *t, char (*cells)[NCOLS][512], int n) {
    int width[NCOLS];
    for (int r = 0; r < n; r++)
        for (int c = 0; c < t->ncols; c++)
            ft_text_printable(cells[r][c], '?');
    for (int c = 0; c < t->ncols; c++) {
        width[c] = columns(t->headings[c]);
        for (int r = 0; r < n; r++)
            if (columns(cells[r][c]) > width[c]) width[c] = columns(cells[r][c]);
    }
    for (int r = -1; r < n; r++) {
        for (int c = 0; c < t->ncols; c++) {
            /* Numbers right-aligned, text left-aligned; padding by columns on screen. */
            const char *text = r < 0 ? t->headings[c] : cells[r][c];
            int pad = width[c] - columns(text),
                right = c >= t->first_number && c <= t->last_number;
            printf("%s", c ? "  " : "");
            if (right) printf("%*s", pad, "");
            printf("%s", text);
            if (!right && c != t->ncols - 1) printf("%*s", pad, "");
        }
        printf("\n");
    }
}

/* Is kernel k shown? Every kernel without --op, only KERNEL with --op t1:KERNEL. */
static int kernel_shown(const ft_profile_kernel *k, const char *kernel) {
    return !kernel || strcmp(k->kernel, kernel) == 0;
}

/* only: the op of --op; kernel: the KERNEL of --op t1:KERNEL (neither: everything). */
static int print_table(const ft_profile *p, const ft_op *only, const char *kernel) {
    int n = kernel ? 0 : ft_profile_count(p), nk = only ? 0 : ft_profile_kernel_count(p);
    int shown = 0, kshown = 0;
    char(*cells)[NCOLS][512] = calloc((size_t)(n > nk ? n : nk ? nk : 1), sizeof *cells);
    if (!cells) return ft_cli_fail(FT_EXIT_FAIL, "show: out of memory");
    for (int i = 0; i < n; i++) {
        const ft_profile_entry *e = ft_profile_entry_at(p, i);
        if (only && e->op != only) continue;
        row(e, cells[shown++]);
    }
    if (shown) print_cells(&entry_table, cells, shown);
    for (int i = 0; i < nk; i++)
        if (kernel_shown(ft_profile_kernel_at(p, i), kernel))
            kernel_row(ft_profile_kernel_at(p, i), cells[kshown++]);
    if (kshown) {
        printf("%skernels of T1 files:\n", shown ? "\n" : "");
        print_cells(&kernel_table, cells, kshown);
    }
    if (!shown && !kshown)
        printf("no entries%s%s%s\n", only || kernel ? " of " : "", kernel ? "t1:" : "",
               only ? only->name : kernel ? kernel : "");
    free(cells);
    return FT_EXIT_OK;
}

static int print_json(const ft_profile *p, const ft_op *only, const char *kernel) {
    json_t *root = ft_profile_to_json(p);
    if (!root) return ft_cli_fail(FT_EXIT_FAIL, "show: out of memory");
    if (kernel) { /* a filtered copy of the kernels, and no op entry */
        json_t *kept = json_array();
        for (int i = 0; i < ft_profile_kernel_count(p); i++)
            if (kernel_shown(ft_profile_kernel_at(p, i), kernel))
                json_array_append(kept, (json_t *)ft_profile_kernel_at(p, i)->json);
        json_object_set_new(root, "kernels", kept);
        json_object_set_new(root, "entries", json_array());
    }
    if (only) {
        /* A filtered copy; the document shares its entries with the profile. */
        json_t *kept = json_array();
        size_t i;
        json_t *e;
        json_array_foreach(json_object_get(root, "entries"), i, e) {
            const char *op = json_string_value(json_object_get(e, "op"));
            if (op && strcmp(op, only->name) == 0) json_array_append(kept, e);
        }
        json_object_set_new(root, "entries", kept);
        json_object_del(root, "kernels"); /* a kernel is no op's */
    }
    int bad = json_dumpf(root, stdout, JSON_INDENT(2)) != 0;
    json_decref(root);
    fputc('\n', stdout);
    if (bad || fflush(stdout) != 0) return ft_cli_fail(FT_EXIT_FAIL, "show: write failed");
    return FT_EXIT_OK;
}

static int run(int argc, char **argv) {
    enum { O_OP = 1, O_JSON };
    static const struct option opts[] = {
        FT_CLI_ARG("op", O_OP),
        FT_CLI_FLAG("json", O_JSON),
        FT_CLI_END,
    };
    const char *op_name = NULL;
    int json = 0, o;
    optind = 0;
    while ((o = ft_cli_getopt(argc, argv, "", opts)) != -1) {
        if (o == O_OP)
            op_name = optarg;
        else if (o == O_JSON)
            json = 1;
        else
            return ft_cli_bad_option("show", o);
    }
    if (optind >= argc)
        return ft_cli_fail(FT_EXIT_USAGE, "show: which profile? (see `flaretune show --help`)");
    ft_err err = {0};
    const ft_op *only = NULL;
    const char *kernel = op_name && strncmp(op_name, "t1:", 3) == 0 ? op_name + 3 : NULL;
    if (op_name && !kernel && !(only = ft_op_find(op_name, &err)))
        return ft_cli_fail(FT_EXIT_USAGE, "show: %s", err.msg);
    ft_profile *p;
    int code = ft_cli_load_profiles("show", argv + optind, argc - optind, &p);
    if (code) return code;
    if (json)
        code = print_json(p, only, kernel);
    else
        code = print_table(p, only, kernel);
    ft_profile_free(p);
    if (!code && fflush(stdout) != 0) code = ft_cli_fail(FT_EXIT_FAIL, "show: write failed");
    return code;
}

const ft_cmd ft_cmd_show = {"show", "print tuned profiles as a table (merged, best per key)", run,
                            usage};
