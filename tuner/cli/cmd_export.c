/* cmd_export.c: `flaretune export`: an event log's measurements as a Kernel Tuner cache file or
 * a FAIR T4 results file (tuner/landscape_export.c, docs/events.md "Formats"). */
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "core/paths.h"
#include "traces/eventlog.h"
#include "tuner/replay.h"
#include "tuner/t1_tune.h"

static void usage(FILE *f) {
    fprintf(f, "usage: flaretune export LOG --format t4|kt-cache [-o FILE]\n\n"
               "Write what the last run of event log LOG (with the earlier runs it resumed; any\n"
               "strategy) measured and rejected in a format of the autotuning community:\n"
               "  kt-cache  a Kernel Tuner cache file (tune_params, entries keyed \"v1,v2,...\",\n"
               "            time in ms, a rejected candidate as RuntimeFailedConfig,\n"
               "            CompilationFailedConfig or InvalidConfig), which Kernel Tuner's\n"
               "            simulation mode and dashboard read\n"
               "  t4        a FAIR T4 results file (schema 1.0.0, milliseconds)\n"
               "The log of a T1 kernel's run (tune --t1 --log) is read with the T1 file it\n"
               "names, for the space. `flaretune replay FILE` reads either back. The file is\n"
               "written atomically (a temporary file beside it, renamed into place); without\n"
               "-o, to standard output.\n\n"
               "  --format F     t4 or kt-cache (required)\n"
               "  -o, --output FILE\n"
               "                 where to write it (default: standard output)\n");
}

static int run(int argc, char **argv) {
    static const struct option opts[] = {
        FT_CLI_ARG("output", 'o'),
        FT_CLI_ARG("format", 'f'),
        FT_CLI_END,
    };
    const char *out = "-";
    int fmt = -1, o;
    optind = 0;
    while ((o = ft_cli_getopt(argc, argv, "o:", opts)) != -1) {
        if (o == 'o') {
            out = optarg;
        } else if (o == 'f') {
            if ((fmt = ft_export_format_parse(optarg)) < 0)
                return ft_cli_fail(FT_EXIT_USAGE, "export: unknown format '%s' (t4 or kt-cache)",
                                   optarg);
        } else {
            return ft_cli_bad_option("export", o);
        }
    }
    if (optind >= argc) return ft_cli_fail(FT_EXIT_USAGE, "export: which event log?");
    if (optind + 1 < argc)
        return ft_cli_fail(FT_EXIT_USAGE, "export: unexpected argument '%s'", argv[optind + 1]);
    if (fmt < 0) return ft_cli_fail(FT_EXIT_USAGE, "export: --format t4 or kt-cache is required");
    const char *log = argv[optind];
    ft_err err = {0};
    if (ft_same_file(log, out)) {
        ft_err_set(&err, FT_EINVAL, "%s: the output is the event log it reads", out);
        return ft_cli_fail_err(&err);
    }
    json_t *events;
    int torn;
    if (ft_eventlog_read(log, &events, &torn, &err)) /* once: it may be a pipe */
        return ft_cli_fail_err(&err);
    /* The log of tune --t1: its T1 file gives the space. */
    ft_status s = ft_t1_log_of(events)
                      ? ft_t1_log_export(events, log, (ft_export_format)fmt, out, &err)
                      : ft_eventlog_export_events(events, log, (ft_export_format)fmt, out, &err);
    json_decref(events);
    if (s) return ft_cli_fail_err(&err);
    if (strcmp(out, "-") != 0)
        fprintf(stderr, "%s: %s\n", out, fmt == FT_EXPORT_T4 ? "FAIR T4 results" : "Kernel Tuner cache");
    return FT_EXIT_OK;
}

const ft_cmd ft_cmd_export = {"export", "write an event log's measurements as a Kernel Tuner cache "
                                        "or FAIR T4 file",
                              run, usage};
