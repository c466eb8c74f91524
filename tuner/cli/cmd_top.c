/* cmd_top.c: `flaretune top LOG`: the dashboard over an event log that another process writes
 * (or wrote): followed as `tail -f` follows a file. */
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"
#include "tui/tui.h"

static void usage(FILE *f) {
    fprintf(f,
            "usage: flaretune top LOG\n\n"
            "Show the tuning runs of an event log (written by `flaretune tune ... --log LOG`)\n"
            "live in the terminal: one row per run, the latency of every candidate over time,\n"
            "the best configurations and their spread. The log is followed as `tail -f`\n"
            "follows a file: it may not exist yet, grow, gain new runs, or be truncated or\n"
            "replaced (it is then read again from the start). A finished log is shown as it\n"
            "ends. LOG may be the --log of `tune all` or of a sweep: every log such a run\n"
            "writes (LOG.OP, LOG.OP.SIZE...) is followed, each as it appears. LOG may be a\n"
            "named pipe (mkfifo): its events are read as they are written into it.\n"
            "A run whose tuner was killed (no run_end, and the log's lock LOG.lock held by\n"
            "no process on this machine) is shown stopped, not running.\n\n"
            "On a busy machine the status bar says BUSY and the share of samples thrown away;\n"
            "a run with candidates not measured cleanly is marked '!', and those candidates\n"
            "(and those the watchdog stopped) are listed apart in its detail, never ranked.\n\n"
            "Keys: up/down or j/k select, Enter detail, s sort, / filter by op, ? help, q quit.\n"
            "NO_COLOR=1 turns colors off. See docs/dashboard.md.\n");
}

static volatile int stop_flag;

static void on_signal(int sig) {
    (void)sig;
    stop_flag = 1;
}

static int run(int argc, char **argv) {
    if (argc < 2) return ft_cli_fail(FT_EXIT_USAGE, "top: which event log? (flaretune top LOG)");
    /* An option anywhere is named before the count of arguments is judged: `top --bogus LOG`
     * is a mistyped option, not a second log. */
    for (int i = 1; i < argc; i++)
        if (argv[i][0] == '-' && argv[i][1])
            return ft_cli_fail(FT_EXIT_USAGE,
                               "top: unknown option '%s' (see `flaretune top --help`)", argv[i]);
    if (argc > 2) return ft_cli_fail(FT_EXIT_USAGE, "top: unexpected argument '%s'", argv[2]);
    /* No file has an empty name: it would be waited on forever. */
    if (!argv[1][0]) return ft_cli_fail(FT_EXIT_USAGE, "top: the event log's path is empty");
    /* LOG may not exist yet (it is followed until it appears), but a directory or a device is
     * no log: it would be waited on forever. */
    struct stat st;
    if (stat(argv[1], &st) == 0 && S_ISDIR(st.st_mode))
        return ft_cli_fail(FT_EXIT_FAIL,
                           "top: %s is a directory: give the event log (the file tune --log "
                           "wrote; for tune all or a sweep, that --log: its LOG.OP files are "
                           "followed)",
                           argv[1]);
    if (stat(argv[1], &st) == 0 && !S_ISREG(st.st_mode) && !S_ISFIFO(st.st_mode))
        return ft_cli_fail(FT_EXIT_FAIL,
                           "top: %s is not a regular file (a device or socket): "
                           "not an event log",
                           argv[1]);
    ft_cli_catch_stop(on_signal, 0);

    char title[1100];
    snprintf(title, sizeof title, "top %s", argv[1]);
    ft_tui_opts o;
    memset(&o, 0, sizeof o);
    o.title = title;
    o.follow_path = argv[1];
    o.stop = &stop_flag;
    ft_tui_result res;
    ft_err err = {0};
    if (ft_tui_run(&o, &res, &err)) return ft_cli_fail_err(&err);
    if (res.by_signal) return 130;
    return FT_EXIT_OK;
}

const ft_cmd ft_cmd_top = {"top", "follow an event log live in a terminal dashboard", run, usage};
