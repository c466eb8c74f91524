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

static void usage(FILE *f) {
    fprintf(f,
            "usage: flaretune show PROFILE... [--op OP] [--json]\n\n"
            "Print the tuned entries of the profiles, merged (per key the fastest entry):\n"
            "op, backend, device, shape, the winning config, its median time with the IQR,\n"
            "the default config's median, the speedup over it, the fraction of this machine's\n"
            "roofline and the cache level that bounds it (! when above 1: suspect), the worst\n"
            "relative error against the float64 reference, and notes: other configs tie with\n"
            "the winner (tie), the machine was busy while it was tuned (busy), a confirmation\n"
            "disagreed with the search (unstable). Skipped (invalid or stale) entries are named\n"
            "on stderr.\n\n"
            "  --op OP   only the entries of op OP\n"
            "  --json    the merged profile as JSON (the format of docs/profiles.md)\n");
}

enum { NCOLS = 12 };
static const char *const headings[NCOLS] = {"op",      "backend",  "device",  "shape",
                                            "attrs",   "config",   "median",  "default",
                                            "speedup", "roofline", "max err", "notes"};
/* Columns of numbers, right-aligned. */
enum { FIRST_NUMBER = 6, LAST_NUMBER = 10 };

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

static void row(const ft_profile_entry *e, char cell[NCOLS][512]) {
    const json_t *j = e->json, *st = json_object_get(j, "stats");
    char a[32], b[32];
    snprintf(cell[0], 512, "%s", e->op->name);
    snprintf(cell[1], 512, "%s", e->backend);
    snprintf(cell[2], 512, "%s", e->device);
    shape_str(e, cell[3], 512);
    attrs_str(e->attrs, cell[4], 512);
    config_str(e->config, cell[5], 512);
    double iqr = num(json_object_get(st, "iqr_s"));
    if (iqr >= 0)
        snprintf(cell[6], 512, "%s ±%s", ft_fmt_time(e->median_s, 0, a, sizeof a),
                 ft_fmt_time(iqr, 0, b, sizeof b));
    else
        snprintf(cell[6], 512, "%s", ft_fmt_time(e->median_s, 0, a, sizeof a));
    double def =
        num(json_object_get(json_object_get(json_object_get(j, "default"), "stats"), "median_s"));
    snprintf(cell[7], 512, "%s", ft_fmt_time(def, 0, a, sizeof a));
    double sp = num(json_object_get(j, "speedup"));
    if (sp >= 0)
        snprintf(cell[8], 512, "%.2fx", sp);
    else
        snprintf(cell[8], 512, "-");
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
}

static int print_table(const ft_profile *p, const ft_op *only) {
    int n = ft_profile_count(p), shown = 0;
    int width[NCOLS];
    for (int c = 0; c < NCOLS; c++)
        width[c] = columns(headings[c]);
    char(*cells)[NCOLS][512] = calloc((size_t)(n ? n : 1), sizeof *cells);
    if (!cells) return ft_cli_fail(FT_EXIT_FAIL, "show: out of memory");
    for (int i = 0; i < n; i++) {
        const ft_profile_entry *e = ft_profile_entry_at(p, i);
        if (only && e->op != only) continue;
        row(e, cells[shown]);
        for (int c = 0; c < NCOLS; c++)
            if (columns(cells[shown][c]) > width[c]) width[c] = columns(cells[shown][c]);
        shown++;
    }
    if (!shown) {
        printf("no entries%s%s\n", only ? " of " : "", only ? only->name : "");
        free(cells);
        return FT_EXIT_OK;
    }
    for (int c = 0; c < NCOLS; c++)
        printf("%s%*s", c ? "  " : "",
               c >= FIRST_NUMBER && c <= LAST_NUMBER ? width[c]
               : c == NCOLS - 1                      ? 0
                                                     : -width[c],
               headings[c]);
    printf("\n");
    for (int r = 0; r < shown; r++) {
        for (int c = 0; c < NCOLS; c++) {
            /* Numbers right-aligned, text left-aligned; padding by columns on screen. */
            int pad = width[c] - columns(cells[r][c]),
                right = c >= FIRST_NUMBER && c <= LAST_NUMBER;
            printf("%s", c ? "  " : "");
            if (right) printf("%*s", pad, "");
            printf("%s", cells[r][c]);
            if (!right && c != NCOLS - 1) printf("%*s", pad, "");
        }
        printf("\n");
    }
    free(cells);
    return FT_EXIT_OK;
}

static int print_json(const ft_profile *p, const ft_op *only) {
    json_t *root = ft_profile_to_json(p);
    if (!root) return ft_cli_fail(FT_EXIT_FAIL, "show: out of memory");
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
    opterr = 0;
    while ((o = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        if (o == O_OP)
            op_name = optarg;
        else if (o == O_JSON)
            json = 1;
        else if (o == ':' || (o == '?' && optopt == O_OP))
            return ft_cli_fail(FT_EXIT_USAGE, "show: --op needs a value");
        else
            return ft_cli_bad_option("show", o, argv);
    }
    if (optind >= argc)
        return ft_cli_fail(FT_EXIT_USAGE, "show: which profile? (see `flaretune show --help`)");
    ft_err err = {0};
    const ft_op *only = NULL;
    if (op_name && !(only = ft_op_find(op_name, &err)))
        return ft_cli_fail(FT_EXIT_USAGE, "show: %s", err.msg);
    ft_profile *p;
    int code = ft_cli_load_profiles("show", argv + optind, argc - optind, &p);
    if (code) return code;
    if (json)
        code = print_json(p, only);
    else
        code = print_table(p, only);
    ft_profile_free(p);
    if (!code && fflush(stdout) != 0) code = ft_cli_fail(FT_EXIT_FAIL, "show: write failed");
    return code;
}

const ft_cmd ft_cmd_show = {"show", "print tuned profiles as a table (merged, best per key)", run,
                            usage};
