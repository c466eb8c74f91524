/* cmd_space.c: `flaretune space`: the tunable parameters of an op on a backend, its
 * constraints, and the size of the space before and after them at a problem size. */
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "flaretune/json.h"
#include "flaretune/op_json.h"

static void usage(FILE *f) {
    fprintf(f, "usage: flaretune space OP [--backend B] [--preset P] [--set NAME=VALUE]...\n"
               "                          [--attr NAME=VALUE]... [--json]\n\n"
               "Print the parameters OP has on backend B (candidate values, default, why it\n"
               "matters), its constraints, and the number of configurations before and after\n"
               "the constraints at the preset's sizes (default: the op's small preset).\n");
}

static int run(int argc, char **argv) {
    enum { O_JSON = 1 };
    static const struct option opts[] = {
        FT_CLI_PROBLEM_OPTIONS, {"json", no_argument, NULL, O_JSON}, {NULL, 0, NULL, 0}};
    ft_cli_problem prob;
    ft_cli_problem_init(&prob);
    int json = 0, o;
    optind = 0;
    opterr = 0;
    while ((o = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        int h = ft_cli_problem_opt(&prob, o, optarg, "space");
        if (h < 0) return FT_EXIT_USAGE;
        if (h) continue;
        if (o == O_JSON)
            json = 1;
        else
            return ft_cli_fail(FT_EXIT_USAGE,
                               "space: unknown option '%s' (see `flaretune space --help`)",
                               argv[optind - 1]);
    }
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
    int code;
    if ((code = ft_cli_apply_attrs(&prob, &c))) return code;
    ft_preset p;
    if ((code = ft_cli_make_preset(&prob, ft_cli_default_preset(op), &p))) return code;
    /* Sizes only: constraints read sizes and attributes, never tensor data. */
    if (op->from_preset(&c, &p, &err)) return ft_cli_fail_err(&err);
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
        json_dumpf(root, stdout, JSON_INDENT(2));
        fputc('\n', stdout);
        json_decref(root);
        return FT_EXIT_OK;
    }
    printf("%s on %s\n", op->name, be->name);
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
