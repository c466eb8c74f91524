/* cli_t1.c: the command line a T1 kernel is named by, shared by every --t1 command (`space`,
 * `compile`, `inspect`, `bench`, `tune`; see cli.h), so each reads, checks and reports the shared
 * options alike: a command's table lists the ones it takes, and any other is unknown there. */
#include <getopt.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "cuda/device.h"

/* One shared option into the ft_cli_t1_args at shared (ft_cli_shared_fn): an unknown option or a
 * missing value is a failure here too. */
static int t1_take(const char *cmd, void *shared, int opt, const char *arg, int *taken) {
    ft_cli_t1_args *a = shared;
    *taken = 1;
    switch (opt) {
    case ':':
    case '?': return ft_cli_bad_option(cmd, opt);
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
        if (!ft_cli_whole(arg, 1, LONG_MAX, &a->sample))
            return ft_cli_fail(FT_EXIT_USAGE, "%s: --sample takes a positive count, not '%s'", cmd,
                               arg);
        break;
    case FT_T1_OPT_SEED:
        if (!ft_cli_seed(arg, &a->seed))
            return ft_cli_fail(FT_EXIT_USAGE,
                               "%s: --seed takes a non-negative whole number, not '%s'", cmd, arg);
        break;
    case FT_T1_OPT_BACKEND:
        if (strcmp(arg, "cuda") && strcmp(arg, "cuda-emu"))
            return ft_cli_fail(FT_EXIT_USAGE, "%s: --t1 runs on cuda or cuda-emu, not '%s'", cmd, arg);
        a->backend = arg;
        break;
    case FT_T1_OPT_BLOCKS:
    case FT_T1_OPT_REPS: {
        long v;
        if (!ft_cli_whole(arg, 1, 1000000, &v))
            return ft_cli_fail(FT_EXIT_USAGE, "%s: %s takes a positive count, not '%s'", cmd,
                               ft_cli_option_written(), arg);
        if (opt == FT_T1_OPT_REPS) a->reps = (int)v;
        else a->blocks = (int)(v > 64 ? 64 : v < 2 ? 2 : v);
        break;
    }
    case FT_T1_OPT_REF:
        if (a->nrefs == FT_CLI_T1_MAX_ARGS) return ft_cli_fail(FT_EXIT_USAGE, "%s: too many --reference", cmd);
        a->refs[a->nrefs++] = arg;
        break;
    default: *taken = 0;
    }
    return FT_EXIT_OK;
}

void ft_cli_t1_apply(const char *cmd, const ft_cli_t1_args *a, ft_t1_tune_opts *to) {
    to->seed = a->seed;
    if (a->blocks) to->blocks = a->blocks;
    if (a->reps) to->reps = a->reps;
    for (int k = 0; k < a->nrefs && k < FT_T1_MAX_ARGS; k++) to->refs[k] = a->refs[k];
    to->nrefs = a->nrefs < FT_T1_MAX_ARGS ? a->nrefs : FT_T1_MAX_ARGS;
    to->backend = a->backend;
    if (!to->backend) { /* the GPU where there is one */
        ft_dev *d = NULL;
        ft_err e = {0};
        if (ft_dev_open(FT_DEV_CUDA, 0, &d, &e) == FT_OK) {
            ft_dev_close(d);
            to->backend = "cuda";
        } else {
            to->backend = "cuda-emu";
            fprintf(stderr, "%s: no GPU (%s): on the emulator (cuda-emu)\n", cmd, e.msg);
        }
    }
    to->emulate = strcmp(to->backend, "cuda-emu") == 0;
}

int ft_cli_names_t1(int argc, char **argv) {
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], "--t1") == 0 || strncmp(argv[i], "--t1=", 5) == 0) return 1;
    return 0;
}

int ft_cli_t1_parse(const char *cmd, int argc, char **argv, const struct option *opts,
                    ft_cli_t1_args *a, ft_cli_opt_fn *own, void *ctx) {
    ft_cli_option_form(" --t1");
    int code = ft_cli_parse_shared(cmd, argc, argv, opts, t1_take, a, own, ctx);
    ft_cli_option_form(NULL);
    if (code) return code;
    if (optind < argc)
        return ft_cli_fail(FT_EXIT_USAGE, "%s: unexpected argument '%s' with --t1", cmd,
                           argv[optind]);
    if (a->all && a->sample)
        return ft_cli_fail(FT_EXIT_USAGE, "%s: --all-configs or --sample K, not both", cmd);
    return FT_EXIT_OK;
}

void ft_cli_t1_note(const char *cmd, const ft_t1 *t) {
    if (t->read_note[0]) fprintf(stderr, "%s: note: %s: %s\n", cmd, t->path, t->read_note);
}

int ft_cli_t1_checkable(const char *cmd, const ft_t1 *t) {
    for (int i = 0; i < t->nargs; i++)
        if (t->args[i].output) return FT_EXIT_OK;
    return ft_cli_fail(FT_EXIT_FAIL,
                       "%s: %s declares no output (\"Output\": 1 on an argument): there is nothing "
                       "to check a configuration's results against; mark what the kernel writes",
                       cmd, t->path);
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
