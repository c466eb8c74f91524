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

/* What ft_cli_t1_parse hands each option to. */
typedef struct {
    const char *cmd;
    ft_cli_t1_args *a;
    ft_cli_opt_fn *own;
    void *ctx;
} t1_parse;

static int t1_or_own(void *ctx, int o, const char *arg, char **argv) {
    t1_parse *tp = ctx;
    if (o == '?' || o == ':')
        return ft_cli_fail(FT_EXIT_USAGE,
                           "%s: unknown option '%s' with --t1 (see `flaretune %s --help`)", tp->cmd,
                           argv[optind - 1], tp->cmd);
    int shared, code;
    if ((code = t1_opt(tp->cmd, tp->a, o, arg, &shared))) return code;
    return shared ? FT_EXIT_OK : tp->own(tp->ctx, o, arg, argv);
}

int ft_cli_t1_parse(const char *cmd, int argc, char **argv, const struct option *opts,
                    ft_cli_t1_args *a, ft_cli_opt_fn *own, void *ctx) {
    t1_parse tp = {cmd, a, own, ctx};
    int code = ft_cli_parse_options(argc, argv, "", opts, t1_or_own, &tp);
    if (code) return code;
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
