/* cmd_report.c: `flaretune report`: a report document rendered as a page, Markdown and JSON. */
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "cli_profile.h"
#include "core/npy.h"
#include "tuner/report.h"
#include "tuner/report_sweep.h"

#define DEFAULT_DIR "out/report"

static void usage(FILE *f) {
    fprintf(f,
            "usage: flaretune report [--models M] [--backend B] [--profile P] [--time S]\n"
            "                        [--log LOG] [-o DIR]\n"
            "       flaretune report --from REPORT.json [-o DIR]\n\n"
            "Measure the design axes of the DFLARE and D-PACE papers as whole drafter steps on\n"
            "this machine (`flaretune step` at the presets of model M: DFlash against DFLARE,\n"
            "draft layers D 3, 5, 7, target layers T 5, 7, 9, block size B 8, 12, 16 with every\n"
            "loss scheme), answer the papers' claims in words and write the report (below).\n"
            "`--models tiny` runs the same sweep at the tiny presets in about two minutes. Every\n"
            "step is appended to LOG as it is measured (default DIR/report.jsonl, locked while\n"
            "the sweep runs): an interrupted report resumes where it stopped when run again\n"
            "with the same options.\n\n"
            "With --from, render a saved report document (format " FT_REPORT_FORMAT
            ", docs/report.md)\n"
            "without measuring anything, into three files in DIR:\n"
            "  report.html   one self-contained page (no network, no script): the answers to\n"
            "                the claims first, each chart drawn as inline SVG with its data\n"
            "                as a table under it, every table, the machine\n"
            "  report.md     the same sections in Markdown\n"
            "  report.json   the document itself, pretty-printed\n"
            "Each is written to a temporary file in DIR and the three are renamed into place\n"
            "together: a failure leaves the old files as they were. A missing or malformed\n"
            "document gives one line naming the first bad path and exit 1.\n\n"
            "options:\n"
            "  --models M          the presets' model (default small; tiny, qwen3-8b, ...)\n"
            "  --backend B         backend (default auto: the GPU where present)\n"
            "  --profile P         the tuned configs (default: each op's default config)\n"
            "  --time S            each measurement samples for S seconds (at most 10 S;\n"
            "                      default 0.25, bench's)\n"
            "  --log LOG           the sweep's event log (default DIR/report.jsonl)\n"
            "  --from FILE         the report document to render, measuring nothing\n"
            "  -o, --output DIR    where to write (default " DEFAULT_DIR "; created when\n"
            "                      missing)\n");
}

static volatile int stop_flag;
static void on_sigint(int sig) {
    (void)sig;
    stop_flag = 1;
}

static void progress(void *ctx, const char *what, int done, int total) {
    (void)ctx;
    if (done < total)
        fprintf(stderr, "report: [%d/%d] %s\n", done + 1, total, what);
    else
        fprintf(stderr, "report: %s\n", what);
}

/* Measure the sweep into *doc. */
static int sweep(ft_report_sweep_opts *so, const char *profile, const char *dir, json_t **doc) {
    ft_err err = {0};
    ft_profile *prof = NULL;
    if (profile) {
        int code = ft_cli_read_profile("report", profile, &prof);
        if (code) return code;
        so->profile = prof;
    }
    so->dir = dir;
    struct sigaction sa = {0}, old;
    sa.sa_handler = on_sigint;
    sigaction(SIGINT, &sa, &old);
    so->stop = &stop_flag;
    so->progress = progress;
    ft_status s = ft_report_sweep(so, doc, &err);
    sigaction(SIGINT, &old, NULL);
    ft_profile_free(prof);
    if (s)
        return stop_flag ? (fprintf(stderr, "flaretune: report: %s\n", err.msg), 130)
                         : ft_cli_fail(ft_cli_exit_code(s), "report: %s", err.msg);
    return FT_EXIT_OK;
}

/* The options of `report`: the codes of its own, and the table getopt_long reads. */
enum { O_FROM = 1000, O_MODELS, O_BACKEND, O_PROFILE, O_QUICK, O_LOG };
static const struct option opts[] = {
    FT_CLI_ARG("from", O_FROM),
    FT_CLI_ARG("output", 'o'),
    FT_CLI_ARG("models", O_MODELS),
    FT_CLI_ARG("backend", O_BACKEND),
    FT_CLI_ARG("profile", O_PROFILE),
    FT_CLI_ARG("time", O_QUICK),
    FT_CLI_ARG("log", O_LOG),
    FT_CLI_END,
};

/* The command line of one report. */
typedef struct {
    const char *from, *dir, *profile, *logpath;
    ft_report_sweep_opts so;
    char sweep_opt[32]; /* the first option of a sweep given, as written ("" if none) */
} report_args;

static int report_opt(void *ctx, int o, const char *arg) {
    report_args *a = ctx;
    if (o != O_FROM && o != 'o' && !a->sweep_opt[0])
        snprintf(a->sweep_opt, sizeof a->sweep_opt, "%s", ft_cli_option_written());
    if (o == O_FROM)
        a->from = arg;
    else if (o == 'o')
        a->dir = arg;
    else if (o == O_MODELS)
        a->so.model = arg;
    else if (o == O_BACKEND)
        a->so.backend = arg;
    else if (o == O_PROFILE)
        a->profile = arg;
    else if (o == O_QUICK) {
        char *end;
        a->so.time_s = strtod(arg, &end);
        if (!*arg || *end || !(a->so.time_s > 0) || a->so.time_s > 60)
            return ft_cli_fail(FT_EXIT_USAGE, "report: --time expects seconds in (0, 60], got '%s'",
                               arg);
    } else if (o == O_LOG)
        a->logpath = arg;
    else
        return ft_cli_bad_option("report", o);
    return FT_EXIT_OK;
}

static int run(int argc, char **argv) {
    report_args a = {.dir = DEFAULT_DIR};
    ft_report_sweep_opts_default(&a.so);
    int code = ft_cli_parse_options(argc, argv, ":o:", opts, report_opt, &a);
    if (code) return code;
    const char *from = a.from, *dir = a.dir, *profile = a.profile, *logpath = a.logpath;
    ft_report_sweep_opts so = a.so;
    if (optind < argc)
        return ft_cli_fail(FT_EXIT_USAGE, "report: unexpected argument '%s'", argv[optind]);
    if (!*dir) return ft_cli_fail(FT_EXIT_USAGE, "report: -o needs a directory");
    if (from && a.sweep_opt[0])
        return ft_cli_fail(FT_EXIT_USAGE,
                           "report: --from renders a saved report and measures nothing; %s is "
                           "an option of the sweep",
                           a.sweep_opt);
    ft_err err = {0};
    json_t *doc = NULL;
    if (from) {
        if (ft_report_load(from, &doc, &err))
            return ft_cli_fail(FT_EXIT_FAIL, "report: %s", err.msg);
    } else {
        char logbuf[1100], cmd[2600];
        const int own_log = logpath != NULL; /* (the default needs no --log to regenerate) */
        if (!logpath) {
            snprintf(logbuf, sizeof logbuf, "%s/report.jsonl", dir);
            logpath = logbuf;
        }
        so.log = logpath;
        snprintf(cmd, sizeof cmd, "flaretune report --models %s%s%s%s%s -o %s", so.model,
                 strcmp(so.backend, "auto") ? " --backend " : "",
                 strcmp(so.backend, "auto") ? so.backend : "", profile ? " --profile " : "",
                 profile ? profile : "", dir);
        if (so.time_s > 0)
            snprintf(cmd + strlen(cmd), sizeof cmd - strlen(cmd), " --time %g", so.time_s);
        if (own_log) snprintf(cmd + strlen(cmd), sizeof cmd - strlen(cmd), " --log %s", logpath);
        so.command = cmd;
        code = sweep(&so, profile, dir, &doc);
        if (code) return code;
    }
    ft_status s = ft_report_render(doc, dir, &err);
    json_decref(doc);
    if (s) return ft_cli_fail(FT_EXIT_FAIL, "report: %s", err.msg);
    printf("%s/report.html\n%s/report.md\n%s/report.json\n", dir, dir, dir);
    return FT_EXIT_OK;
}

const ft_cmd ft_cmd_report = {
    "report", "measure DFlash against DFLARE here and write a page, or render a saved one", run,
    usage};
