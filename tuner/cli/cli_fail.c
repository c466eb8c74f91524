/* cli_fail.c: how the command line fails: one line on stderr and the exit code for the status
 * (the codes are in cli.h and docs/usage.md), and how Ctrl-C reaches a command that stops its
 * work cleanly. Every command's file calls these; main.c only dispatches to the commands. */
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "core/epitaph.h"
#include "traces/eventlog.h"

int ft_cli_fail(int code, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fputs("flaretune: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    return code;
}

int ft_cli_exit_code(ft_status s) {
    switch (s) {
    case FT_OK: return FT_EXIT_OK;
    case FT_EINVAL:
    case FT_EUNSUPPORTED: return FT_EXIT_USAGE;
    case FT_ENODEV: return FT_EXIT_NODEV;
    case FT_EVERIFY: return FT_EXIT_VERIFY;
    default: return FT_EXIT_FAIL;
    }
}

int ft_cli_fail_err(const ft_err *err) {
    return ft_cli_fail(ft_cli_exit_code(err->status), "%s", err->msg);
}

int ft_cli_fail_profile(const ft_err *err) {
    int code = err->status == FT_EUNSUPPORTED ? FT_EXIT_FAIL : ft_cli_exit_code(err->status);
    return ft_cli_fail(code, "%s", err->msg);
}

void ft_cli_note_family(const char *cmd, const char *log) {
    struct stat sb;
    if (stat(log, &sb) != 0 || !S_ISREG(sb.st_mode)) return;
    int more = ft_eventlog_family(log, NULL, 0) - 1;
    if (more > 0)
        fprintf(stderr,
                "%s: note: %s is read alone; %d more log%s of a `tune all` or sweep beside it "
                "(%s.*) %s not read: name %s to read %s\n",
                cmd, log, more, more == 1 ? "" : "s", log, more == 1 ? "is" : "are",
                more == 1 ? "it" : "each", more == 1 ? "it" : "them");
}

void ft_cli_catch_stop(void (*handler)(int), int flags) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = handler;
    sa.sa_flags = flags;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
}

int ft_cli_candidate_timeout(const char *cmd, const char *arg, double *out) {
    char *rest;
    const double v = strtod(arg, &rest);
    if (rest == arg || *rest || !(v >= 1) || v > 1e6)
        return ft_cli_fail(FT_EXIT_USAGE,
                           "%s: --candidate-timeout expects seconds from 1 to 1e6, got '%s'", cmd,
                           arg);
    *out = v;
    return FT_EXIT_OK;
}

void ft_cli_end_in_flight(int sig, const char *recorded, const char *unrecorded) {
    const int n = ft_epitaph_write();
    const char *m = n > 0 ? recorded : unrecorded;
    ssize_t w = write(STDERR_FILENO, m, strlen(m));
    (void)w;
    signal(sig, SIG_DFL);
    raise(sig);
}

/* SIGALRM: the candidate in flight took too long. */
static void on_candidate_timeout(int sig) {
    ft_cli_end_in_flight(sig,
                         "flaretune: a candidate took longer than --candidate-timeout: ending; it "
                         "is recorded as failed, and the same command resumes past it\n",
                         /* (no --log, no --kt-cache for --t1, a worker's candidate, or the
                          * default configuration, which every run measures first) */
                         "flaretune: a candidate took longer than --candidate-timeout: ending; "
                         "nothing a resumed run reads records it, so the same command would try "
                         "it again\n");
}

void ft_cli_catch_candidate_timeout(void) { signal(SIGALRM, on_candidate_timeout); }

int ft_cli_wants_help(int argc, char **argv) {
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--") == 0) break;
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) return 1;
    }
    return 0;
}
