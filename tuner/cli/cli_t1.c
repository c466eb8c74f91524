/* cli_t1.c: the command line a T1 kernel is named by, shared by `inspect --t1`, `compile --t1` and
 * `tune --t1` (see cli.h), so each reads, checks and reports the shared options alike. */
#include <getopt.h>
#include <stdlib.h>

#include "cli.h"

/* One shared option into a: *handled says whether opt is one. Returns an exit code. */
static int t1_opt(const char *cmd, ft_cli_t1_args *a, int opt, const char *arg, int *handled) {
    char *end = NULL;
    *handled = 1;
    switch (opt) {
    case FT_T1_OPT_T1: a->path = arg; break;
    case FT_T1_OPT_KFILE: a->kfile = arg; break;
    case FT_T1_OPT_CONFIG: a->config = arg; break;
    case FT_T1_OPT_ALL: a->all = 1; break;
    case FT_T1_OPT_ARG:
        if (a->nargspecs == FT_CLI_T1_MAX_ARGS)
            return ft_cli_fail(FT_EXIT_USAGE, "%s: too many --arg", cmd);
        a->argspecs[a->nargspecs++] = arg;
        break;
    case FT_T1_OPT_SAMPLE:
        a->sample = strtol(arg, &end, 10);
        if (!*arg || *end || a->sample < 1)
            return ft_cli_fail(FT_EXIT_USAGE, "%s: --sample takes a positive count, not '%s'", cmd,
                               arg);
        break;
    case FT_T1_OPT_SEED:
        a->seed = strtoull(arg, &end, 10);
        if (!*arg || *end) return ft_cli_fail(FT_EXIT_USAGE, "%s: --seed takes a number", cmd);
        break;
    default: *handled = 0;
    }
    return FT_EXIT_OK;
}

int ft_cli_t1_parse(const char *cmd, int argc, char **argv, const struct option *opts,
                    ft_cli_t1_args *a, int (*own)(void *ctx, int opt, const char *arg, char **argv),
                    void *ctx) {
    int o, code;
    optind = 0;
    opterr = 0;
    while ((o = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        if (o == '?' || o == ':')
            return ft_cli_fail(FT_EXIT_USAGE,
                               "%s: unknown option '%s' with --t1 (see `flaretune %s --help`)",
                               cmd, argv[optind - 1], cmd);
        int shared;
        if ((code = t1_opt(cmd, a, o, optarg, &shared))) return code;
        if (!shared && (code = own(ctx, o, optarg, argv))) return code;
    }
    if (optind < argc)
        return ft_cli_fail(FT_EXIT_USAGE, "%s: unexpected argument '%s' with --t1", cmd,
                           argv[optind]);
    return FT_EXIT_OK;
}

int ft_cli_t1_fail(const char *cmd, const ft_err *err) {
    return ft_cli_fail(err->status == FT_EINVAL ? FT_EXIT_USAGE : FT_EXIT_FAIL, "%s: %s", cmd,
                       err->msg);
}

int ft_cli_t1_select(const char *cmd, const ft_t1 *t, const ft_cli_t1_args *a, ft_config **cfgs,
                     int64_t *n) {
    ft_err err = {0};
    if (ft_t1_select(t, a->config, a->all, a->sample, a->seed, cfgs, n, &err))
        return ft_cli_t1_fail(cmd, &err);
    return FT_EXIT_OK;
}
