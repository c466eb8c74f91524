/* cmd_list.c: `flaretune list`: the ops (tensors, sizes, attributes), the presets and the
 * backends, with whether each backend can run on this machine. */
#include <getopt.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "kernels/registry.h"
#include "op/backend.h"
#include "op/op.h"

static void usage(FILE *f) {
    fprintf(f, "usage: flaretune list [ops|presets|backends] [--json]\n\n"
               "List the ops with their inputs, outputs and attributes, the problem presets\n"
               "(MODEL.ARCH.PHASE), and the backends with whether each can run here.\n\n"
               "  --json   one JSON object on stdout instead of tables\n");
}

static const char *role_name(ft_role r) {
    switch (r) {
    case FT_ROLE_IN: return "input";
    case FT_ROLE_OUT: return "output";
    case FT_ROLE_GRAD_IN: return "grad_input";
    case FT_ROLE_GRAD_OUT: return "grad_output";
    }
    return "?";
}

static void print_ops(void) {
    printf("OPS\n");
    for (int i = 0; i < ft_op_count(); i++) {
        const ft_op *op = ft_op_at(i);
        printf("\n  %s\n    %s\n", op->name, op->summary);
        static const char *const headings[] = {"inputs", "outputs", "backward reads",
                                               "backward writes"};
        for (int role = FT_ROLE_IN; role <= FT_ROLE_GRAD_OUT; role++) {
            int first = 1;
            for (int t = 0; t < op->ntensors; t++) {
                const ft_tensor_spec *ts = &op->tensors[t];
                if ((int)ts->role != role) continue;
                char shape[64];
                snprintf(shape, sizeof shape, "%s [%s]", ts->name, ts->dims);
                printf("    %-16s %-24s %-8s %s\n", first ? headings[role] : "", shape,
                       ft_dtype_name(ts->dtype), ts->doc);
                first = 0;
            }
        }
        printf("    %-16s ", "attributes");
        for (int a = 0; op->attrs[a]; a++) {
            const ft_attr_desc *d = ft_attr_find(op->attrs[a]);
            printf("%s%s=%s", a ? " " : "", d->name, d->def);
        }
        printf("%s\n", op->attrs[0] ? "" : "none");
        if (op->backward == FT_BWD_OPTIONAL)
            printf("    %-16s with --attr backward=1\n", "backward");
        else if (op->backward == FT_BWD_ALWAYS)
            printf("    %-16s always, in the same call\n", "backward");
    }
    printf("\nATTRIBUTES\n");
    for (const ft_attr_desc *d = ft_attr_table; d->name; d++) {
        char choices[160] = "";
        if (d->choices) {
            size_t k = 0;
            for (int c = 0; d->choices[c]; c++)
                k += (size_t)snprintf(choices + k, sizeof choices - k, "%s%s", c ? "|" : " (",
                                      d->choices[c]);
            snprintf(choices + k, sizeof choices - k, ")");
        }
        printf("  %-13s %-9s %s%s\n", d->name, d->def, d->doc, choices);
    }
}

static void print_presets(void) {
    printf("PRESETS (MODEL.ARCH.PHASE; change a size with --set NAME=VALUE)\n");
    printf("  %-26s %5s %9s %6s %5s %2s %2s %2s %5s %3s %5s %4s %4s %3s %5s\n", "name", "H",
           "Hq/Hkv/dh", "V", "I", "D", "T", "B", "N", "R", "L", "nseq", "S", "NB", "M");
    for (int i = 0; i < ft_preset_count(); i++) {
        const ft_preset *p = ft_preset_at(i);
        char heads[16];
        snprintf(heads, sizeof heads, "%lld/%lld/%lld", (long long)p->Hq, (long long)p->Hkv,
                 (long long)p->dh);
        printf("  %-26s %5lld %9s %6lld %5lld %2lld %2lld %2lld %5lld %3lld %5lld%s %4lld %4lld "
               "%3lld %5lld\n",
               p->name, (long long)p->H, heads, (long long)p->V, (long long)p->inter,
               (long long)p->D, (long long)p->T, (long long)p->B, (long long)p->N, (long long)p->R,
               (long long)p->L, p->ragged ? "~" : " ", (long long)p->nseq, (long long)p->S,
               (long long)p->NB, (long long)(p->blocks * p->B));
    }
    printf("  I: a draft layer's MLP intermediate size; N: rows fused and projected per call;\n"
           "  R, L: decode requests and context length (~: spread over [0, 2L]); nseq, S, NB:\n"
           "  train sequences, context, blocks; M: loss rows (--set blocks=M/B). Sizes are named\n"
           "  as --set and `flaretune list ops` name them.\n");
    /* RoPE is the target's, the same for every preset of a model: one line per model. */
    printf("  RoPE of each target (attention.kvproj at its presets; any --attr rope_* replaces "
           "it):\n");
    const char *model = NULL;
    for (int i = 0; i < ft_preset_count(); i++) {
        const ft_preset *p = ft_preset_at(i);
        if (model && !strcmp(model, p->model)) continue;
        model = p->model;
        char rope[256];
        ft_rope_format(p->rope_theta, &p->rope, rope, sizeof rope);
        printf("    %-12s %s\n", p->model, rope);
    }
}

static void print_backends(void) {
    printf("BACKENDS\n");
    for (int i = 0; i < ft_backend_count(); i++) {
        const ft_backend *b = ft_backend_at(i);
        char why[256] = "";
        const char *state = !b->built                       ? "not built"
                            : b->available(why, sizeof why) ? "available"
                                                            : "unavailable";
        printf("  %-9s %-12s %s\n", b->name, state, b->summary);
        if (why[0]) printf("  %-9s %-12s (%s)\n", "", "", why);
        if (b->built && !why[0] && b->device) {
            printf("  %-9s %-12s device: %s\n", "", "", b->device());
            if (b->device_details && b->device_details()[0])
                printf("  %-9s %-12s %s\n", "", "", b->device_details());
        }
    }
}

static json_t *ops_json(void) {
    json_t *ops = json_array();
    for (int i = 0; i < ft_op_count(); i++) {
        const ft_op *op = ft_op_at(i);
        json_t *tensors = json_array(), *attrs = json_object(), *syms = json_array();
        for (int s = 0; op->syms[s]; s++)
            json_array_append_new(syms, json_string(op->syms[s]));
        for (int t = 0; t < op->ntensors; t++) {
            const ft_tensor_spec *ts = &op->tensors[t];
            json_array_append_new(tensors,
                                  json_pack("{s:s, s:s, s:s, s:s, s:b, s:b, s:s}", "name", ts->name,
                                            "dtype", ft_dtype_name(ts->dtype), "dims", ts->dims,
                                            "role", role_name(ts->role), "want_dw_only",
                                            (ts->flags & FT_TS_WANT_DW) != 0, "want_dx_only",
                                            (ts->flags & FT_TS_WANT_DX) != 0, "doc", ts->doc));
        }
        for (int a = 0; op->attrs[a]; a++)
            json_object_set_new(attrs, op->attrs[a], json_string(ft_attr_find(op->attrs[a])->def));
        static const char *const bwd[] = {"none", "optional", "always"};
        json_array_append_new(ops,
                              json_pack("{s:s, s:s, s:o, s:o, s:o, s:s}", "name", op->name,
                                        "summary", op->summary, "sizes", syms, "tensors", tensors,
                                        "attributes", attrs, "backward", bwd[op->backward]));
    }
    return ops;
}

static json_t *presets_json(void) {
    json_t *arr = json_array();
    for (int i = 0; i < ft_preset_count(); i++) {
        ft_preset p = *ft_preset_at(i);
        json_t *o = json_pack("{s:s, s:s, s:s, s:s}", "name", p.name, "model", p.model, "arch",
                              p.arch, "phase", p.phase);
        for (int f = 0; ft_preset_fields[f]; f++)
            json_object_set_new(o, ft_preset_fields[f],
                                json_integer(*ft_preset_field(&p, ft_preset_fields[f])));
        json_object_set_new(
            o, "rope",
            json_pack("{s:f, s:s, s:f, s:f, s:f, s:f, s:f, s:f, s:b}", "rope_theta", p.rope_theta,
                      "rope_scaling", ft_rope_scaling_names[p.rope.scaling], "rope_factor",
                      p.rope.factor, "rope_low_freq_factor", p.rope.low_freq_factor,
                      "rope_high_freq_factor", p.rope.high_freq_factor, "rope_original_max_pos",
                      p.rope.original_max_pos, "rope_beta_fast", p.rope.beta_fast, "rope_beta_slow",
                      p.rope.beta_slow, "rope_truncate", p.rope.truncate));
        json_array_append_new(arr, o);
    }
    return arr;
}

static json_t *backends_json(void) {
    json_t *arr = json_array();
    for (int i = 0; i < ft_backend_count(); i++) {
        const ft_backend *b = ft_backend_at(i);
        char why[256] = "";
        int avail = b->built && b->available(why, sizeof why);
        json_t *ops = json_array();
        for (int k = 0; k < ft_op_count(); k++)
            if (b->built && b->supports(ft_op_at(k)))
                json_array_append_new(ops, json_string(ft_op_at(k)->name));
        json_t *o = json_pack("{s:s, s:s, s:b, s:b, s:s, s:o}", "name", b->name, "summary",
                              b->summary, "built", b->built, "available", avail, "why", why, "ops",
                              ops);
        if (avail && b->device) json_object_set_new(o, "device", json_string(b->device()));
        if (avail && b->device_details)
            json_object_set_new(o, "device_details", json_string(b->device_details()));
        json_array_append_new(arr, o);
    }
    return arr;
}

static int run(int argc, char **argv) {
    static const struct option opts[] = {FT_CLI_FLAG("json", 'j'), FT_CLI_END};
    int json = 0, c;
    optind = 0;
    while ((c = ft_cli_getopt(argc, argv, "", opts)) != -1) {
        if (c == 'j')
            json = 1;
        else
            return ft_cli_bad_option("list", c);
    }
    const char *what = optind < argc ? argv[optind] : "all";
    int all = !strcmp(what, "all");
    if (!all && strcmp(what, "ops") && strcmp(what, "presets") && strcmp(what, "backends"))
        return ft_cli_fail(FT_EXIT_USAGE, "list: unknown section '%s' (ops, presets, backends)",
                           what);
    if (optind + 1 < argc) return ft_cli_fail(FT_EXIT_USAGE, "list: too many arguments");
    if (json) {
        json_t *root = json_object();
        if (all || !strcmp(what, "ops")) json_object_set_new(root, "ops", ops_json());
        if (all || !strcmp(what, "presets")) json_object_set_new(root, "presets", presets_json());
        if (all || !strcmp(what, "backends"))
            json_object_set_new(root, "backends", backends_json());
        ft_cli_print_json(root);
        return FT_EXIT_OK;
    }
    if (all || !strcmp(what, "ops")) print_ops();
    if (all) printf("\n");
    if (all || !strcmp(what, "presets")) print_presets();
    if (all) printf("\n");
    if (all || !strcmp(what, "backends")) print_backends();
    return FT_EXIT_OK;
}

const ft_cmd ft_cmd_list = {"list", "list ops, presets and backends (and which run here)", run,
                            usage};
