/* cli_args.c: the problem options shared by exec, bench and tune (see cli.h). */
#include <errno.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

void ft_cli_problem_init(ft_cli_problem *p) {
    memset(p, 0, sizeof *p);
    p->backend = "auto";
    p->seed = 1;
}

int ft_cli_problem_opt(ft_cli_problem *p, int opt, const char *arg, const char *cmd) {
    char *end;
    switch (opt) {
    case FT_OPT_PRESET: p->preset = arg; return 1;
    case FT_OPT_SET:
        if (p->nsets == FT_CLI_MAX_LIST) break;
        p->sets[p->nsets++] = arg;
        return 1;
    case FT_OPT_ATTR:
        if (p->nattrs == FT_CLI_MAX_LIST) break;
        p->attrs[p->nattrs++] = arg;
        return 1;
    case FT_OPT_BACKEND: p->backend = arg; return 1;
    case FT_OPT_CONFIG: p->config = arg; return 1;
    case FT_OPT_TIMER: {
        ft_err err = {0};
        if (ft_backend_prefer_timer(arg, &err)) {
            ft_cli_fail(FT_EXIT_USAGE, "%s: --timer: %s", cmd, err.msg);
            return -1;
        }
        return 1;
    }
    case FT_OPT_THREADS: {
        errno = 0;
        long v = strtol(arg, &end, 10);
        if (end == arg || *end || errno || v < 1 || v > 4096) {
            ft_cli_fail(FT_EXIT_USAGE, "%s: --threads expects a positive integer, got '%s'", cmd,
                        arg);
            return -1;
        }
        p->threads = (int)v;
        return 1;
    }
    case FT_OPT_SEED:
        errno = 0;
        p->seed = strtoull(arg, &end, 10);
        if (end == arg || *end || errno || arg[0] == '-') {
            ft_cli_fail(FT_EXIT_USAGE, "%s: --seed expects a non-negative integer, got '%s'", cmd,
                        arg);
            return -1;
        }
        return 1;
    default: return 0;
    }
    ft_cli_fail(FT_EXIT_USAGE, "%s: too many repeated options", cmd);
    return -1;
}

int ft_cli_apply_attrs(const ft_cli_problem *p, ft_call *c) {
    for (int i = 0; i < p->nattrs; i++) {
        const char *a = p->attrs[i], *eq = strchr(a, '=');
        if (!eq || eq == a)
            return ft_cli_fail(FT_EXIT_USAGE, "--attr expects NAME=VALUE, got '%s'", a);
        char name[64];
        snprintf(name, sizeof name, "%.*s", (int)(eq - a), a);
        ft_err err = {0};
        if (ft_attrs_set(&c->attrs, c->op, name, eq + 1, &err)) return ft_cli_fail_err(&err);
    }
    return FT_EXIT_OK;
}

const char *ft_cli_default_preset(const ft_op *op) {
    return strcmp(op->name, "attention.decode") == 0 ? "small.dflare.decode" : "small.dflare.train";
}

int ft_cli_make_preset(const ft_cli_problem *p, const char *fallback, ft_preset *out) {
    const char *name = p->preset ? p->preset : fallback;
    const ft_preset *base = ft_preset_find(name);
    if (!base)
        return ft_cli_fail(FT_EXIT_USAGE, "unknown preset '%s' (see `flaretune list presets`)",
                           name);
    *out = *base;
    ft_err err = {0};
    for (int i = 0; i < p->nsets; i++)
        if (ft_preset_set(out, p->sets[i], &err)) return ft_cli_fail_err(&err);
    return FT_EXIT_OK;
}

int ft_cli_make_config(const ft_cli_problem *p, const ft_backend *be, const ft_op *op,
                       ft_config *cfg) {
    const ft_space *s = be->space(op);
    ft_err err = {0};
    if (ft_config_parse(s, p->config ? p->config : "", cfg, &err))
        return ft_cli_fail(FT_EXIT_USAGE, "%s on %s: %s", op->name, be->name, err.msg);
    if (p->threads) {
        int i = ft_space_param(s, "threads");
        if (i < 0)
            return ft_cli_fail(FT_EXIT_USAGE, "%s on %s has no threads parameter", op->name,
                               be->name);
        int explicit_cfg = p->config && strstr(p->config, "threads=") != NULL;
        if (explicit_cfg && cfg->v[i] != p->threads)
            return ft_cli_fail(FT_EXIT_USAGE, "--threads %d disagrees with --config threads=%d",
                               p->threads, cfg->v[i]);
        char text[32];
        snprintf(text, sizeof text, "threads=%d", p->threads);
        ft_config one;
        if (ft_config_parse(s, text, &one, &err))
            return ft_cli_fail(FT_EXIT_USAGE, "--threads: %s", err.msg);
        cfg->v[i] = p->threads;
    }
    return FT_EXIT_OK;
}
