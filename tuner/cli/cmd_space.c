/* cmd_space.c: `flaretune space`: the tunable parameters of an op on a backend, its
 * constraints, and the size of the space before and after them at a problem size. */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "core/json.h"
#include "kernels/registry.h"
#include "op/op_json.h"
#include "tuner/t1.h"

static void usage(FILE *f) {
    fprintf(f, "usage: flaretune space OP [--backend B] [--preset P] [--set NAME=VALUE]...\n"
               "                          [--attr NAME=VALUE]... [--json]\n"
               "       flaretune space --t1 FILE [--kernel-file F] [--json] [--list]\n\n"
               "Print the parameters OP has on backend B (candidate values, default, why it\n"
               "matters), its constraints, and the number of configurations before and after\n"
               "the constraints at the preset's sizes (default: the op's small preset).\n\n"
               "With --t1, the same for a kernel described by a FAIR T1 input file (docs/t1.md):\n"
               "its parameters, conditions, kernel, launch of the default configuration and\n"
               "arguments; --list adds every allowed configuration (Kernel Tuner's cache key,\n"
               "grid and block), in space order. The file's KernelFile is looked for in the\n"
               "working directory, beside the T1 file, then above it; --kernel-file F names the\n"
               "kernel's source instead, as given (absolute, or from the working directory).\n");
}

static json_t *t1_config_json(const ft_t1 *t, const ft_config *cfg, ft_err *err) {
    long long g[3], b[3];
    if (ft_t1_launch(t, cfg, g, b, err)) return NULL;
    char key[1024];
    ft_t1_key(t, cfg, key, sizeof key);
    return json_pack("{s:s, s:[I,I,I], s:[I,I,I]}", "key", key, "grid", (json_int_t)g[0],
                     (json_int_t)g[1], (json_int_t)g[2], "block", (json_int_t)b[0],
                     (json_int_t)b[1], (json_int_t)b[2]);
}

/* A dimension triple of t1_config_json's ("grid", "block") as "x SEP y SEP z". */
static void dims3(const json_t *c, const char *which, const char *sep, char *buf, size_t n) {
    const json_t *a = json_object_get(c, which);
    snprintf(buf, n, "%lld%s%lld%s%lld", (long long)json_integer_value(json_array_get(a, 0)), sep,
             (long long)json_integer_value(json_array_get(a, 1)), sep,
             (long long)json_integer_value(json_array_get(a, 2)));
}

/* --list: each allowed configuration as it is walked to (ft_t1_each), a line of text or an item
 * of the JSON array; the first error (a launch that cannot be evaluated, out of memory) stops
 * the walk and is said once. */
typedef struct {
    const ft_t1 *t;
    int json, first;
    ft_err err;
    int failed;
} listing;

static int list_one(void *ctx, const ft_config *cfg) {
    listing *ls = ctx;
    json_t *c = t1_config_json(ls->t, cfg, &ls->err);
    if (!c) {
        if (ls->err.status == FT_OK) ft_err_set(&ls->err, FT_ENOMEM, "space: out of memory");
        return ls->failed = 1;
    }
    if (ls->json) {
        char *text = json_dumps(c, JSON_COMPACT);
        if (text)
            printf("%s\n    %s", ls->first ? "" : ",", text);
        else
            ls->failed = 1, ft_err_set(&ls->err, FT_ENOMEM, "space: out of memory");
        free(text);
    } else {
        char gd[96], bd[96];
        dims3(c, "grid", ",", gd, sizeof gd);
        dims3(c, "block", ",", bd, sizeof bd);
        printf("%s  grid %s  block %s\n", json_string_value(json_object_get(c, "key")), gd, bd);
    }
    ls->first = 0;
    json_decref(c);
    return ls->failed || ferror(stdout);
}

static int list_configs(listing *ls) {
    ft_err err = {0};
    if (ft_t1_each(ls->t, list_one, ls, &err) != FT_OK) return ft_cli_fail_err(&err);
    if (ls->failed) return ft_cli_fail_err(&ls->err);
    return FT_EXIT_OK;
}

/* `space --t1 FILE`: a T1 file's space, read and checked (t1.h). */
static int t1_space(const char *path, const char *kfile, int json, int list) {
    ft_err err = {0};
    ft_t1 *t = NULL;
    if (ft_t1_load(path, kfile, &t, &err)) return ft_cli_fail_err(&err);
    ft_cli_t1_note("space", t);
    const ft_space *s = &t->space;
    int64_t n = 0, total = ft_space_size(s);
    if (ft_t1_count(t, &n, &err)) {
        ft_t1_free(t);
        return ft_cli_fail_err(&err);
    }
    if (list && n > FT_T1_MAX_ALLOWED) {
        ft_t1_free(t);
        return ft_cli_fail(FT_EXIT_FAIL,
                           "space: %s: its conditions allow %lld configurations: more than "
                           "--list lists (2^24)",
                           path, (long long)n);
    }
    ft_config def;
    ft_config_default(s, &def);
    json_t *root = json_object(), *params = json_array(), *cons = json_array(), *args = json_array();
    for (int i = 0; i < s->nparams; i++) {
        json_t *vals = json_array();
        for (int k = 0; k < s->params[i].n; k++) {
            char v[64];
            ft_config_value_str(s, i, s->params[i].values[k], v, sizeof v);
            json_array_append_new(vals, s->params[i].labels ? json_string(v)
                                                            : json_integer(s->params[i].values[k]));
        }
        json_array_append_new(params, json_pack("{s:s, s:o}", "name", s->params[i].name, "values", vals));
    }
    for (int i = 0; i < t->nconditions; i++) json_array_append_new(cons, json_string(t->constraint_text[i]));
    for (int i = 0; i < t->nargs; i++) {
        const ft_t1_arg *a = &t->args[i];
        json_t *o = json_pack("{s:s, s:I, s:b, s:b, s:b, s:s}", "name", a->name, "elem_bytes",
                              (json_int_t)a->elem_bytes, "scalar", a->scalar, "constant",
                              a->constant, "output", a->output, "fill",
                              a->generator ? "generator"
                              : a->random  ? "random"
                                           : "constant");
        if (!a->scalar) json_object_set_new(o, "elements", json_integer(a->elems));
        if (a->generator) json_object_set_new(o, "data_source", json_string(a->data_source));
        json_array_append_new(args, o);
    }
    char dcfg[1024];
    ft_config_format(s, &def, dcfg, sizeof dcfg);
    json_t *dj = t1_config_json(t, &def, &err);
    json_object_set_new(dj, "config", json_string(dcfg));
    json_object_set_new(root, "t1", json_string(path));
    json_object_set_new(root, "benchmark", json_string(t->benchmark ? t->benchmark : ""));
    json_object_set_new(root, "kernel", json_string(t->kernel_name));
    json_object_set_new(root, "kernel_file", json_string(t->kernel_file));
    json_object_set_new(root, "params", params);
    json_object_set_new(root, "constraints", cons);
    /* past 2^63 (its parameters' values multiplied), a decimal */
    double total_d = 1;
    for (int i = 0; i < s->nparams; i++)
        total_d *= s->params[i].n;
    json_object_set_new(root, "size",
                        total == INT64_MAX ? json_real(total_d) : json_integer(total));
    json_object_set_new(root, "valid", json_integer(n));
    json_object_set_new(root, "default", dj);
    if (t->default_note[0]) json_object_set_new(root, "default_note", json_string(t->default_note));
    json_object_set_new(root, "arguments", args);
    int code = FT_EXIT_OK;
    listing ls = {.t = t, .json = json, .first = 1};
    if (json && !list) {
        json_dumpf(root, stdout, JSON_INDENT(2));
        fputc('\n', stdout);
    } else if (json) {
        /* The document with "configs" last, each written as it is walked to, none kept. */
        char *head = json_dumps(root, JSON_INDENT(2));
        size_t hl = head ? strlen(head) : 0;
        if (hl < 2 || head[hl - 1] != '}') {
            free(head);
            json_decref(root);
            ft_t1_free(t);
            return ft_cli_fail(FT_EXIT_FAIL, "space: out of memory");
        }
        head[hl - 1] = 0;
        while (hl > 1 && (head[hl - 2] == '\n' || head[hl - 2] == ' '))
            head[--hl - 1] = 0;
        printf("%s,\n  \"configs\": [", head);
        free(head);
        code = list_configs(&ls);
        if (code == FT_EXIT_OK) printf("%s]\n}\n", ls.first ? "" : "\n  ");
    } else {
        printf("%s: %s in %s\n", path, t->kernel_name, t->kernel_file);
        for (int i = 0; i < s->nparams; i++) {
            char vals[512] = "", dv[64];
            size_t k = 0;
            for (int j = 0; j < s->params[i].n && k < sizeof vals; j++) {
                char v[64];
                ft_config_value_str(s, i, s->params[i].values[j], v, sizeof v);
                k += (size_t)snprintf(vals + k, sizeof vals - k, "%s%s", j ? " " : "", v);
            }
            ft_config_value_str(s, i, s->params[i].def, dv, sizeof dv);
            printf("  %-28s {%s}  default %s\n", s->params[i].name, vals, dv);
        }
        if (t->nconditions) printf("conditions\n");
        for (int i = 0; i < t->nconditions; i++) printf("  - %s\n", t->constraint_text[i]);
        char gd[96], bd[96];
        dims3(dj, "grid", " x ", gd, sizeof gd);
        dims3(dj, "block", " x ", bd, sizeof bd);
        printf("default: %s\n  grid %s, block %s\n", dcfg, gd, bd);
        if (t->default_note[0]) printf("  (%s)\n", t->default_note);
        printf("arguments\n");
        for (int i = 0; i < t->nargs; i++) {
            const ft_t1_arg *a = &t->args[i];
            if (a->scalar)
                printf("  %-16s scalar = %.15g\n", a->name, a->fill_value); /* a uint32 whole */
            else
                printf("  %-16s %lld x %zu bytes, %s%s%s%s\n", a->name, a->elems, a->elem_bytes,
                       a->generator ? "generator "
                       : a->random  ? "random"
                                    : "constant",
                       a->generator ? a->data_source : "", a->constant ? ", constant memory" : "",
                       a->output ? ", output" : "");
        }
        char size[32];
        if (total == INT64_MAX)
            snprintf(size, sizeof size, "%.3g", total_d);
        else
            snprintf(size, sizeof size, "%lld", (long long)total);
        printf("size: %s configurations, %lld allowed by the conditions\n", size, (long long)n);
        if (list) code = list_configs(&ls);
    }
    json_decref(root);
    ft_t1_free(t);
    if (code == FT_EXIT_OK && (fflush(stdout) != 0 || ferror(stdout)))
        code = ft_cli_fail(FT_EXIT_FAIL, "space: writing the output: %s", strerror(errno));
    return code;
}

/* The options of `space`: the codes of its own, and the table getopt_long reads. */
enum { O_JSON = 1, O_T1, O_LIST, O_KFILE };
static const struct option opts[] = {
    FT_CLI_PROBLEM_OPTIONS,
    FT_CLI_FLAG("json", O_JSON),
    FT_CLI_ARG("t1", O_T1),
    FT_CLI_FLAG("list", O_LIST),
    FT_CLI_ARG("kernel-file", O_KFILE),
    FT_CLI_END,
};

/* The options of space that are not problem options (--t1 and --kernel-file: those an op's
 * space refuses; with --t1 ft_cli_t1_parse takes them). */
typedef struct {
    const char *kfile;
    int list, json;
} space_args;

static int space_opt(void *ctx, int o, const char *arg) {
    space_args *a = ctx;
    if (o == O_JSON)
        a->json = 1;
    else if (o == O_LIST)
        a->list = 1;
    else if (o == O_KFILE)
        a->kfile = arg;
    return FT_EXIT_OK;
}

/* With --t1 the file is the problem: the kernel's options alone (ft_cli_t1_parse), so an op's
 * (--preset, --set, --backend ...) are unknown there, as in compile, inspect and tune --t1,
 * rather than taken and ignored. */
static const struct option t1_opts[] = {
    FT_CLI_T1_KERNEL_OPTIONS,
    FT_CLI_FLAG("json", O_JSON),
    FT_CLI_FLAG("list", O_LIST),
    FT_CLI_END,
};

static int run(int argc, char **argv) {
    space_args sa = {0};
    if (ft_cli_names_t1(argc, argv)) {
        ft_cli_t1_args ta = {0};
        int code = ft_cli_t1_parse("space", argc, argv, t1_opts, &ta, space_opt, &sa);
        return code ? code : t1_space(ta.path, ta.kfile, sa.json, sa.list);
    }
    ft_cli_problem prob;
    ft_cli_problem_init(&prob);
    int code = ft_cli_parse_problem("space", argc, argv, opts, &prob, space_opt, &sa);
    if (code) return code;
    int json = sa.json;
    if (sa.list) return ft_cli_fail(FT_EXIT_USAGE, "space: --list goes with --t1");
    if (sa.kfile) return ft_cli_fail(FT_EXIT_USAGE, "space: --kernel-file goes with --t1");
    if (optind >= argc)
        return ft_cli_fail(FT_EXIT_USAGE, "space: which op? (see `flaretune list ops`)");
    if (optind + 1 < argc)
        return ft_cli_fail(FT_EXIT_USAGE, "space: unexpected argument '%s'", argv[optind + 1]);
    ft_err err = {0};
    const ft_op *op = ft_op_find(argv[optind], &err);
    if (!op) return ft_cli_fail_err(&err);
    const ft_backend *be;
    if (ft_backend_resolve(prob.backend, op, &be, &err)) return ft_cli_fail_err(&err);
    ft_call c;
    ft_call_init(&c, op);
    if ((code = ft_cli_apply_attrs(&prob, &c))) return code;
    ft_preset p;
    if ((code = ft_cli_make_preset(&prob, ft_cli_default_preset(op), &p))) return code;
    /* Sizes only: constraints read sizes and attributes, never tensor data. */
    if (op->from_preset(&c, &p, &err)) return ft_cli_fail_err(&err);
    if ((code = ft_cli_check_sets_read(&prob, &c))) return code;
    ft_call_resolve_backward(&c);
    const ft_space *s = be->space(op);
    int64_t total = ft_space_size(s), valid = 0;
    for (int64_t k = 0; k < total; k++) {
        ft_config cfg;
        ft_space_config_at(s, k, &cfg);
        valid += ft_space_valid(s, &c, &cfg, NULL, 0);
    }
    ft_config def;
    ft_config_default(s, &def);
    if (json) {
        json_t *params = json_array(), *cons = json_array();
        for (int i = 0; i < s->nparams; i++) {
            const ft_param *pp = &s->params[i];
            json_t *vals = json_array();
            for (int k = 0; k < pp->n; k++) {
                char v[48];
                ft_config_value_str(s, i, pp->values[k], v, sizeof v);
                json_array_append_new(vals,
                                      pp->labels ? json_string(v) : json_integer(pp->values[k]));
            }
            char dv[48];
            ft_config_value_str(s, i, pp->def, dv, sizeof dv);
            json_array_append_new(params, json_pack("{s:s, s:o, s:s, s:s}", "name", pp->name,
                                                    "values", vals, "default", dv, "doc", pp->doc));
        }
        for (int i = 0; s->constraints && s->constraints[i]; i++)
            json_array_append_new(cons, json_string(s->constraints[i]));
        json_t *root = json_pack("{s:s, s:s, s:s, s:o, s:o, s:I, s:I, s:o}", "op", op->name,
                                 "backend", be->name, "preset", p.name, "params", params,
                                 "constraints", cons, "size", (json_int_t)total, "valid",
                                 (json_int_t)valid, "default", ft_config_to_json(s, &def));
        json_object_set_new(root, "attrs", ft_attrs_to_json(&c));
        ft_cli_print_json(root);
        return FT_EXIT_OK;
    }
    printf("%s on %s\n", op->name, be->name);
    if (ft_op_accepts_attr(op, "rope_scaling")) {
        /* The preset's RoPE (the target's) or the one named by --attr: what the kernels rotate
         * with at this preset. */
        char rope[256];
        ft_rope_format(c.attrs.rope_theta, &c.attrs.rope, rope, sizeof rope);
        printf("  at %s: %s\n", p.name, rope);
    }
    if (!s->nparams) printf("  no tunable parameters\n");
    for (int i = 0; i < s->nparams; i++) {
        const ft_param *pp = &s->params[i];
        char vals[256] = "", dv[48];
        size_t k = 0;
        for (int j = 0; j < pp->n && k < sizeof vals; j++) {
            char v[48];
            ft_config_value_str(s, i, pp->values[j], v, sizeof v);
            k += (size_t)snprintf(vals + k, sizeof vals - k, "%s%s", j ? " " : "", v);
        }
        ft_config_value_str(s, i, pp->def, dv, sizeof dv);
        printf("  %-16s {%s}  default %s\n  %-16s %s\n", pp->name, vals, dv, "", pp->doc);
    }
    if (s->constraints && s->constraints[0]) {
        printf("constraints\n");
        for (int i = 0; s->constraints[i]; i++)
            printf("  - %s\n", s->constraints[i]);
    }
    char dims[256];
    ft_call_dims_str(&c, dims, sizeof dims);
    printf("size: %lld configurations, %lld valid at %s (%s)\n", (long long)total, (long long)valid,
           p.name, dims);
    return FT_EXIT_OK;
}

const ft_cmd ft_cmd_space = {"space", "show an op's tunable parameters, constraints and space size",
                             run, usage};
