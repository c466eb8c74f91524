/* cli_dash.c: a tuner on a worker thread under the dashboard on this one, as `tune --tui` and
 * `tune --t1 --tui` run it (cli.h). */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "traces/eventlog.h"

void ft_cli_dash_end(ft_tui_feed *feed, const ft_err *failed, const char *done) {
    json_t *ev = failed ? json_pack("{s:s, s:f, s:s}", "event", "error", "t", ft_wall_time(),
                                    "message", failed->msg)
                        : json_pack("{s:s, s:f, s:s}", "event", "done", "t", ft_wall_time(),
                                    "message", done);
    ft_tui_feed_push_new(feed, ev);
}

ft_status ft_cli_dashboard(const ft_cli_dash *d, int *source_done, ft_err *err) {
    *source_done = 0;
    /* While the dashboard runs, every Ctrl-C only raises the flag: the terminal must be
     * restored before the process ends. */
    ft_cli_catch_stop(d->on_signal, 0);
    pthread_t th;
    if (pthread_create(&th, NULL, d->worker, d->arg))
        return ft_err_set(err, FT_EINTERNAL, "tune: cannot start the tuner thread");
    ft_tui_opts o;
    memset(&o, 0, sizeof o);
    o.title = d->title;
    o.feed = d->feed;
    o.pause = d->pause;
    o.stop = d->stop;
    o.expected_runs = d->expected_runs;
    ft_tui_result res;
    ft_status s = ft_tui_run(&o, &res, err);
    if (!res.source_done || s) *d->stop = 1; /* quit before the end: stop as Ctrl-C does */
    *d->pause = 0;
    /* The terminal is restored: a second Ctrl-C may end the process at once again. */
    ft_cli_catch_stop(*d->stop ? SIG_DFL : d->on_signal, SA_RESETHAND);
    *source_done = res.source_done;
    if (!res.source_done && !s && d->stopping) fprintf(stderr, "%s\n", d->stopping);
    pthread_join(th, NULL);
    return s;
}
