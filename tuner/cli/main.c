/* main.c: the `flaretune` command: dispatch to a subcommand. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "cli.h"
#include "cli_mpi.h"
#include "core/env.h"

static const ft_cmd *const commands[] = {
    &ft_cmd_list, &ft_cmd_space,  &ft_cmd_compile, &ft_cmd_inspect, &ft_cmd_exec,   &ft_cmd_bench,
    &ft_cmd_tune, &ft_cmd_replay, &ft_cmd_export, &ft_cmd_show,    &ft_cmd_merge,   &ft_cmd_emit,   &ft_cmd_trace,
    &ft_cmd_step, &ft_cmd_report, &ft_cmd_top,     &ft_cmd_watch,   &ft_cmd_version};
enum { NCOMMANDS = sizeof commands / sizeof commands[0] };

static void usage(FILE *f) {
    fprintf(f, "usage: flaretune COMMAND [ARGS...]\n\n"
               "Autotune and profile the kernels of block-diffusion drafters (DFlash, DFLARE,\n"
               "and D-PACE's loss weighting): fusion, attention, linear and loss.\n\ncommands:\n");
    for (int i = 0; i < NCOMMANDS; i++)
        fprintf(f, "  %-10s %s\n", commands[i]->name, commands[i]->summary);
    fprintf(f, "  %-10s %s\n", "help", "show this text, or `help COMMAND` for one command");
    fprintf(f, "\nEvery command takes --help. Exit codes: 0 ok, 1 failure, 2 invalid request,\n"
               "3 backend device not present, 4 verification failed, 130 interrupted, 142 a\n"
               "candidate past --candidate-timeout (docs/usage.md).\n");
}

static const ft_cmd *find(const char *name) {
    for (int i = 0; i < NCOMMANDS; i++)
        if (strcmp(commands[i]->name, name) == 0) return commands[i];
    return NULL;
}

/* Restart once with OPENBLAS_CORETYPE set when OpenBLAS picked kernels older than this CPU
 * (it reads the variable when it loads, before main). An explicit OPENBLAS_CORETYPE, or
 * FLARETUNE_BLAS_CORE=keep, leaves the choice alone; FLARETUNE_BLAS_CORE=NAME forces a core. */
static void fix_blas_core(char **argv) {
    if (getenv("OPENBLAS_CORETYPE") || getenv(FT_BLAS_REEXEC_ENV)) return;
    const char *policy = getenv("FLARETUNE_BLAS_CORE");
    if (policy && strcmp(policy, "keep") == 0) return;
    ft_env e;
    ft_env_probe(&e);
    const char *want = policy && *policy ? policy : ft_blas_core_upgrade(e.blas_core, &e);
    if (!want || strcasecmp(want, e.blas_core) == 0) return;
    setenv("OPENBLAS_CORETYPE", want, 1);
    setenv(FT_BLAS_REEXEC_ENV, e.blas_core, 1);
    execv("/proc/self/exe", argv);
    /* Still here: the restart failed; run with what OpenBLAS picked and say so. */
    fprintf(stderr,
            "flaretune: warning: OpenBLAS runs %s kernels on a CPU that supports %s; set "
            "OPENBLAS_CORETYPE=%s for full speed\n",
            e.blas_core, want, want);
    unsetenv("OPENBLAS_CORETYPE");
}

/* What a command (or its help) printed is its result: one that could not be written (a full
 * disk, a closed pipe) is a failure, never exit 0 with nothing there. */
static int stdout_written(const char *name) {
    if (fflush(stdout) == 0 && !ferror(stdout)) return FT_EXIT_OK;
    const int e = errno;
    return ft_cli_fail(FT_EXIT_FAIL, "%s: standard output: write failed: %s", name,
                       strerror(e ? e : EIO));
}

int main(int argc, char **argv) {
    /* A file past the size limit (ulimit -f) is a write error (EFBIG), handled as a full disk
     * is: one line, the temporary file removed, the old file kept; never a signal that kills
     * the process half way through a write. */
    signal(SIGXFSZ, SIG_IGN);
    fix_blas_core(argv);
    if (argc < 2) {
        usage(stderr);
        return FT_EXIT_USAGE;
    }
    const char *name = argv[1];
    if (!strcmp(name, "help") || !strcmp(name, "--help") || !strcmp(name, "-h")) {
        if (argc > 3)
            return ft_cli_fail(FT_EXIT_USAGE, "help takes one command, not '%s' too", argv[3]);
        const char *topic = argc > 2 ? argv[2] : NULL;
        if (topic && (!strcmp(topic, "help") || !strcmp(topic, "--help") || !strcmp(topic, "-h")))
            topic = NULL; /* help about help: the overview, which says how help works */
        if (topic) {
            const ft_cmd *c = find(topic);
            if (!c)
                return ft_cli_fail(FT_EXIT_USAGE, "unknown command '%s' (see `flaretune help`)",
                                   topic);
            c->usage(stdout);
            return stdout_written(topic);
        }
        usage(stdout);
        return stdout_written("help");
    }
    if (!strcmp(name, "--version")) name = "version";
    const ft_cmd *c = find(name);
    if (!c) return ft_cli_fail(FT_EXIT_USAGE, "unknown command '%s' (see `flaretune help`)", name);
    if (ft_cli_wants_help(argc - 1, argv + 1)) {
        c->usage(stdout);
        return stdout_written(name);
    }
    /* Only tune spreads over a launcher's ranks. Any other command started as several ranks
     * would measure side by side on one machine (mpirun -np 4 flaretune bench), or, beside a
     * tune in mpirun's A : B form, leave the tune's rank 0 waiting for a rank that never joins. */
    const int ranks = ft_cli_launched_ranks();
    if (c != &ft_cmd_tune && ranks > 1)
        return ft_cli_fail(FT_EXIT_USAGE,
                           "%s: started as one of %d ranks (mpirun, srun): only tune runs over "
                           "several ranks; run %s alone (docs/distributed.md)",
                           c->name, ranks, c->name);
    int code = c->run(argc - 1, argv + 1);
    /* What a command printed is its result: one that could not be written is a failure. */
    return code == FT_EXIT_OK ? stdout_written(name) : code;
}
