/* cmd_trace.c: `flaretune trace`: an event log as a Chrome trace for Perfetto. */
#include <getopt.h>
#include <stdio.h>

#include "cli.h"
#include "traces/trace.h"

static void usage(FILE *f) {
    fprintf(f, "usage: flaretune trace LOG -o TRACE.json\n\n"
               "Write the tuning runs of an event log as a Chrome trace-event file (open it in\n"
               "https://ui.perfetto.dev or chrome://tracing): one process per run, with the run,\n"
               "each candidate and each batch of samples as nested spans; rejected candidates are\n"
               "marked red, candidates not measured cleanly (a busy machine: their median is an\n"
               "upper bound) in a colour of their own with clean=false, and the final interleaved\n"
               "confirmation is its own span.\n");
}

static int run(int argc, char **argv) {
    static const struct option opts[] = {FT_CLI_ARG("output", 'o'), FT_CLI_END};
    const char *out = NULL;
    int o;
    optind = 0;
    while ((o = ft_cli_getopt(argc, argv, "o:", opts)) != -1) {
        if (o == 'o') out = optarg;
        else
            return ft_cli_bad_option("trace", o);
    }
    if (optind >= argc) return ft_cli_fail(FT_EXIT_USAGE, "trace: which event log?");
    if (optind + 1 < argc) return ft_cli_fail(FT_EXIT_USAGE, "trace: unexpected argument '%s'", argv[optind + 1]);
    if (!out) return ft_cli_fail(FT_EXIT_USAGE, "trace: -o TRACE.json is required");
    ft_err err = {0};
    int n = 0;
    if (ft_trace_export(argv[optind], out, &n, &err)) return ft_cli_fail_err(&err);
    ft_cli_note_family("trace", argv[optind]);
    /* On stderr, so that `-o /dev/stdout` is the trace alone. */
    fprintf(stderr, "%s: %d trace events\n", out, n);
    return FT_EXIT_OK;
}

const ft_cmd ft_cmd_trace = {"trace", "export an event log as a Chrome/Perfetto trace", run, usage};
