/* tui.h: the live dashboard (`tune --tui`, `top LOG`, `watch`), nvtop-style.
 *
 * Data collection, reduction and drawing are kept apart:
 *
 *   sources    a queue fed by an in-process listener (tune, watch: worker threads push events),
 *              or a follower that tails an event log written by another process (top)
 *   model      pure reduction of events (docs/events.md, plus the dashboard's own kinds listed
 *              in docs/dashboard.md) into one row per run id: counts, best / last / default,
 *              the five best configs, a ring buffer of history, rolling latency windows
 *   layout     pure functions from the terminal size to the panes' rectangles and the table's
 *              columns, and from values to plot rows and glyph levels
 *   drawing    tui/dash.c: a thin ncurses layer over the above; one getch() timeout is the
 *              loop's only wait
 *
 * Everything but the drawing is unit-tested (tests/test_tui_*.c) without a terminal.
 */
#ifndef FLARETUNE_TUI_H
#define FLARETUNE_TUI_H

#include <jansson.h>
#include <pthread.h>

#include "core/status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define FT_TUI_TOP       5    /* best configs kept per row (detail pane)              */
#define FT_TUI_BINS      16   /* histogram bins (as in measured events' "hist")       */
#define FT_TUI_HISTORY   512  /* plot points kept per row (ring buffer)               */
#define FT_TUI_WINDOW    1024 /* latency samples of the rolling window (watch rows)   */
#define FT_TUI_RATE_SPAN 5.0  /* seconds over which events per second are counted     */
#define FT_TUI_MAX_RANKS 1024 /* ranks kept per row (a distributed run's processes)    */
#define FT_TUI_MAX_RUNS  4096 /* runs of one command counted apart (tune all, sweeps)  */
#define FT_TUI_SPOILED   5    /* unclean or stopped candidates kept per row (detail)  */
/* Samples thrown away as contaminated, out of all those timed, from which the status bar calls
 * the machine busy even when every candidate kept enough clean ones: one in twenty. */
#define FT_TUI_BUSY_SHARE 0.05

/* ---- ring buffers ------------------------------------------------------------------------ */

/* FT_PT_UNCLEAN: not measured cleanly (docs/events.md): v is an upper bound, never a best. */
enum { FT_PT_SCREENED = 1, FT_PT_REJECTED = 2, FT_PT_UNCLEAN = 4 };

/* One plot point: t seconds since the row started; v the trial (tune: a candidate's median;
 * watch: an interval's slowest call); b the line (tune: best so far; watch: the interval's
 * median). */
typedef struct ft_tui_point {
    double t, v, b;
    unsigned flags;
} ft_tui_point;

typedef struct ft_tui_ring {
    ft_tui_point *p;
    int cap, n, head; /* head: where the next point goes; the oldest is at head - n */
} ft_tui_ring;

typedef struct ft_tui_vring {
    double *v;
    int cap, n, head;
} ft_tui_vring;

int ft_tui_ring_init(ft_tui_ring *r, int cap); /* 0 when out of memory */
void ft_tui_ring_free(ft_tui_ring *r);
void ft_tui_ring_push(ft_tui_ring *r, ft_tui_point p);           /* drops the oldest when full */
const ft_tui_point *ft_tui_ring_at(const ft_tui_ring *r, int i); /* i = 0: the oldest */

int ft_tui_vring_init(ft_tui_vring *r, int cap);
void ft_tui_vring_free(ft_tui_vring *r);
void ft_tui_vring_push(ft_tui_vring *r, double v);
double ft_tui_vring_at(const ft_tui_vring *r, int i); /* i = 0: the oldest */

/* ---- the model --------------------------------------------------------------------------- */

typedef enum { FT_ROW_TUNE, FT_ROW_WATCH } ft_tui_row_kind;
typedef enum {
    FT_ROW_RUNNING,
    FT_ROW_DONE,        /* run_end seen                                            */
    FT_ROW_INTERRUPTED, /* run_end with interrupted, or Ctrl-C                      */
    FT_ROW_LOST,        /* a later run started in the same feed without its run_end */
    FT_ROW_FAILED,      /* the worker reported an error while it ran              */
    FT_ROW_GONE,        /* no run_end, and the log's writer is gone ("gone"): running
                         * again when an event of the run comes after all */
} ft_tui_row_state;

/* A measured configuration, for the detail pane's top five (and its candidates not ranked). */
typedef struct ft_tui_cand {
    char cfg[160]; /* "par=blas chunk=32 threads=1", in the space's order */
    char key[160]; /* the same with sorted keys: identity                 */
    double median, q1, q3, iqr;
    int samples;
    int tie;               /* within the noise of the best (IQRs overlap, or run_end's tie list) */
    int confirmed;         /* its stats come from the side-by-side confirmation round */
    int hist[FT_TUI_BINS]; /* the measured event's sample distribution */
    double hist_lo, hist_hi;
    int has_hist;
    /* Not ranked (docs/events.md): not measured cleanly (its median an upper bound), or its
     * call stopped by the watchdog after stopped_after_s. */
    int unclean, stopped;
    double stopped_after_s;
} ft_tui_cand;

/* One process of a distributed run (`mpirun ... tune`): what the candidate events that carry
 * its "rank" say (docs/events.md). */
typedef struct ft_tui_rank {
    int rank;
    char host[64], device[128]; /* as its latest event gives them */
    int measured, rejected;
    double t_first, t_last; /* its span: the earliest `started` (or `t`) to the latest `t` */
} ft_tui_rank;

typedef struct ft_tui_row {
    char run[40];
    char command[48]; /* run_start's runs.command: the command that started it, or "" */
    ft_tui_row_kind kind;
    ft_tui_row_state state;
    int seq; /* order of arrival */
    char op[48], backend[24], preset[64], shape[96], device[128], strategy[24];
    double t_start, t_last, t_end; /* event times (epoch seconds); t_end 0 while running */

    /* tune rows */
    int valid, resumed, resumed_rejected, budget;
    double time_budget_s;
    char search_end[16]; /* run_end's search_end: exhausted, converged, budget, time, ... */
    int done, measured, rejected, screened; /* in this run */
    double last, best, def, speedup;        /* seconds per call; NAN when unknown */
    int last_rejected;                      /* the latest candidate was rejected  */
    int last_spoiled; /* ... was not measured cleanly (1) or stopped by the watchdog (2) */
    char def_key[160];
    ft_tui_cand top[FT_TUI_TOP]; /* by median; top[0] is the best (the winner once ended) */
    int ntop;
    int ties_final; /* the tie flags come from run_end */
    ft_tui_ring history;
    ft_tui_rank *ranks; /* by rank; none unless the run is distributed */
    int nranks, ranks_cap;
    /* The scheduler's share (docs/measurement.md): samples thrown away as contaminated and
     * all those timed, candidates not measured cleanly and stopped by the watchdog (run_end's
     * counts once it ends), the latest of those candidates, and why run_end gave no speedup
     * or no winner ("" when it did). */
    long discarded, taken;
    int unclean, stopped;
    ft_tui_cand spoiled[FT_TUI_SPOILED];
    int nspoiled;
    char withheld[128];

    /* watch rows */
    char config[160];
    double profile_median;
    long calls;
    double p50, p95, max, jitter;
    ft_tui_vring window;
    int win_hist[FT_TUI_BINS];
    double win_lo, win_hi;
} ft_tui_row;

typedef struct ft_tui_model {
    ft_tui_row *rows;
    int nrows, cap, next_seq;
    long nevents, nbad; /* events applied; lines or events that could not be used */
    double t_first, t_last;
    double recent[1024]; /* event times, ring, for events per second */
    int nrecent, recent_head;
    int expected_runs; /* runs the source will start (tune all), 0: unknown */
    int finished;      /* the source said it has no more events ("done")   */
    char error[512];   /* the source failed ("error"); shown in the status */
    char note[160];    /* the latest notice (log reopened, ...)           */
    /* The writer of the log is gone ("gone": the log's lock is free, docs/dashboard.md) while a
     * run of it had no run_end, or before its command started all its runs: what the status
     * bar says of it. "" when not, and again once a run's event comes. */
    char gone[96];
    int changed;       /* set by every apply; the drawing layer clears it  */
    /* The runs of the command that started the latest run (run_start's "runs": `tune all`
     * writes one log per op, and `top` follows them all): its id, how many it runs, which of
     * them have started (by index) and when the latest did. */
    char runs_command[48];
    int runs_of, runs_started;
    unsigned char runs_seen[FT_TUI_MAX_RUNS / 8];
    double runs_t;
} ft_tui_model;

void ft_tui_model_init(ft_tui_model *m);
void ft_tui_model_free(ft_tui_model *m);
/* Reduce one event into the model. Returns 1 when it was used, 0 when ignored (unknown kind,
 * malformed: counted in nbad). Does not keep ev. A "reopen" drops every row and count: the
 * source reads its logs again from the start. */
int ft_tui_model_apply(ft_tui_model *m, const json_t *ev);
ft_tui_row *ft_tui_model_find(ft_tui_model *m, const char *run);

/* Candidates the rank measured per minute over its span of events; NAN when the span is
 * empty. */
double ft_tui_rank_rate(const ft_tui_rank *k);
/* Ranks the dashboard's ranks pane shows for the row: all of them when the run is distributed
 * over more than one, else 0 (no pane: a run that is not distributed has no ranks). */
int ft_tui_row_ranks_shown(const ft_tui_row *r);

/* The scheduler's share over every tune row of the model (the status bar's warning). */
typedef struct ft_tui_contention {
    long discarded, taken;
    int unclean, stopped;
} ft_tui_contention;
void ft_tui_model_contention(const ft_tui_model *m, ft_tui_contention *c);

/* Seconds left in a running tune row, from its elapsed time and the candidates remaining
 * (capped by its time budget); NAN when unknown (nothing finished yet, or not running). */
double ft_tui_row_eta(const ft_tui_row *r, double now);
/* The `done` column: candidates measured (resumed ones included) out of what the run will
 * measure (ft_tune_progress_target); rejected ones are the `rej` column. A run that ended on
 * its own (converged, out of budget or time) measures no more: its target is what it measured. */
void ft_tui_row_progress(const ft_tui_row *r, int *measured, int *target);
/* Runs the source has yet to start: expected_runs less the tune rows, or what the latest
 * command (run_start's "runs") has not started yet, whichever is more. */
int ft_tui_model_pending_runs(const ft_tui_model *m);
/* The whole source: running rows' ETAs plus, when more runs are expected, the mean duration of
 * the finished ones for each run not started yet. A running row with no candidate measured
 * yet is estimated from the seconds per candidate of the rows that have measured some. When
 * no run has finished to tell how long the others take, or a running row cannot be estimated,
 * the known part only, and *partial (may be NULL) is set. NAN when nothing is known; 0 when
 * nothing runs. */
double ft_tui_model_eta(const ft_tui_model *m, double now, int *partial);
/* Events per second over the last FT_TUI_RATE_SPAN seconds (to `now` while a row runs, else
 * to the last event). */
double ft_tui_model_rate(const ft_tui_model *m, double now);
/* Seconds from the first event to now (while a row runs) or to the last event. */
double ft_tui_model_elapsed(const ft_tui_model *m, double now);
/* A row runs, or more runs are expected (ft_tui_model_pending_runs) from a writer that is not
 * gone, and the source has neither finished nor failed. */
int ft_tui_model_running(const ft_tui_model *m);

/* Rolling statistics of latencies (watch rows): p50, p95 (linear interpolation between closest
 * ranks), max and jitter (the mean absolute difference of consecutive samples). NAN for n=0. */
void ft_tui_window_stats(const double *v, int n, double *p50, double *p95, double *max,
                         double *jitter);
/* Counts of v in FT_TUI_BINS equal bins between *lo = min and *hi = max. */
void ft_tui_histogram(const double *v, int n, int *counts, double *lo, double *hi);

typedef enum {
    FT_SORT_ARRIVAL,
    FT_SORT_OP,
    FT_SORT_BEST, /* fastest first (watch rows: p50) */
    FT_SORT_SPEEDUP,
    FT_SORT_PROGRESS,
    FT_SORT_COUNT
} ft_tui_sort;
extern const char *const ft_tui_sort_names[FT_SORT_COUNT];

/* Indices of the rows to show, in order, whose op contains `filter` (NULL or "": all).
 * Returns how many (at most cap). */
int ft_tui_model_view(const ft_tui_model *m, ft_tui_sort sort, const char *filter, int *idx,
                      int cap);

/* ---- layout ------------------------------------------------------------------------------ */

typedef struct ft_rect {
    int y, x, h, w; /* h or w 0: the pane is not shown */
} ft_rect;

typedef struct ft_tui_layout {
    ft_rect table, ranks, plot, detail, status;
    ft_rect help; /* an overlay: drawn over the others when open */
} ft_tui_layout;

/* The panes for a rows x cols terminal showing `nitems` table rows and `nranks` ranks of a
 * distributed run (0: no ranks pane). The status bar takes the last line; the table the top
 * (its header plus a line per item, at least 3 lines when there is room); below it the ranks
 * (a header and a line per rank, when it leaves the plot or the detail pane their room), then
 * the plot, and the detail pane when open (beside the plot when the terminal is wide, in its
 * place otherwise). Panes that would be too small to be useful are dropped (w = h = 0); no
 * pane reaches outside the screen and none overlap. */
void ft_tui_layout_compute(int rows, int cols, int nitems, int nranks, int detail_open,
                           int help_open, ft_tui_layout *out);

/* Table columns. */
typedef enum {
    FT_COL_OP,
    FT_COL_SHAPE,
    FT_COL_BACKEND,
    FT_COL_DONE,
    FT_COL_LAST,
    FT_COL_BEST,
    FT_COL_DEFAULT,
    FT_COL_SPEEDUP,
    FT_COL_REJECTED,
    FT_COL_CALLS,
    FT_COL_P50,
    FT_COL_P95,
    FT_COL_MAX,
    FT_COL_JITTER,
    FT_COL_VSPROF,
    FT_COL_TREND,
    FT_COL_COUNT
} ft_tui_col_id;

typedef struct ft_tui_col {
    ft_tui_col_id id;
    int x, w;  /* x from the table's left edge, after the 2-column selection marker */
    int right; /* right-aligned (numbers) */
} ft_tui_col;

#define FT_TUI_MARK 2 /* "> " before the selected row */

/* The columns that fit `width` (tune columns, or watch columns), most important first kept,
 * laid out in display order. Returns how many (at most FT_COL_COUNT). Every column lies within
 * [FT_TUI_MARK, width). */
int ft_tui_columns(int width, int watch, ft_tui_col *out);
const char *ft_tui_col_title(ft_tui_col_id id);
/* A cell's text (fits the column's width when the caller truncates it). */
void ft_tui_cell(const ft_tui_row *r, ft_tui_col_id id, int ascii, char *buf, size_t n);
/* The row's recent trials (watch: intervals) as a sparkline of `width` cells, scaled between
 * their min and max: UTF-8 blocks, or "_.:-=+*#" when ascii. */
void ft_tui_trend(const ft_tui_row *r, int width, int ascii, char *buf, size_t n);
/* '!' when the row has candidates that were not measured cleanly (the table shows it between
 * the selection marker and the op), else ' '. */
char ft_tui_row_mark(const ft_tui_row *r);
/* The status bar's word on the scheduler: "BUSY: 37% of samples discarded, 4 not measured
 * cleanly, 1 stopped" when a candidate was not measured cleanly or at least FT_TUI_BUSY_SHARE
 * of the samples were thrown away (returns 1); the same figures without "BUSY: " when fewer
 * were or candidates were only stopped (returns 0); "" when the scheduler took nothing. */
int ft_tui_busy_text(const ft_tui_contention *c, char *buf, size_t n);
/* A candidate the run did not rank, for the detail pane: "not clean  16.20 ms  CONFIG" (its
 * median, an upper bound) or "stopped   >1.000 s  CONFIG" (when the watchdog stopped it). */
void ft_tui_spoiled_line(const ft_tui_cand *c, int ascii, char *buf, size_t n);

/* A line of the detail pane's top configs: its rank, its mark ("win", "tie" or ""), 'c' when
 * its figures come from the confirmation round, its median and IQR right-aligned in 9 columns
 * each (display columns: "µs" takes one, not two), then the config:
 * "1 win c 43.40 µs  1.811 µs  k=2 rows=16". */
void ft_tui_top_line(const ft_tui_cand *c, int rank, const char *mark, int ascii, char *buf,
                     size_t n);

/* The ranks pane's columns. */
typedef enum {
    FT_RCOL_RANK,
    FT_RCOL_HOST,
    FT_RCOL_DEVICE,
    FT_RCOL_MEASURED,
    FT_RCOL_REJECTED,
    FT_RCOL_RATE,
    FT_RCOL_COUNT
} ft_tui_rcol_id;

typedef struct ft_tui_rcol {
    ft_tui_rcol_id id;
    int x, w, right; /* as in ft_tui_col */
} ft_tui_rcol;

/* The ranks pane's columns that fit `width` (rank, measured, rate, host, rejected, then the
 * device in what is left), in display order. Returns how many (at most FT_RCOL_COUNT). */
int ft_tui_rank_columns(int width, ft_tui_rcol *out);
const char *ft_tui_rcol_title(ft_tui_rcol_id id);
/* A rank's cell, at most `width` columns: the device fingerprint shortened to fit (its name
 * without the details in parentheses, else cut with ".."). */
void ft_tui_rank_cell(const ft_tui_rank *k, ft_tui_rcol_id id, int width, char *buf, size_t n);
/* s in at most `width` columns (ASCII: one byte a column): whole when it fits, else the text
 * before its first " (", else its first width - 2 characters and "..". */
void ft_tui_shorten(const char *s, int width, char *buf, size_t n);

/* ---- plot scaling ------------------------------------------------------------------------ */

typedef struct ft_plot_scale {
    double lo, hi; /* the value at the bottom and at the top row */
    int log;       /* logarithmic (the values span more than 20x) */
} ft_plot_scale;

/* Bounds for the finite positive values among v (others ignored): a small margin, never an
 * empty range; logarithmic when max/min > 20. */
ft_plot_scale ft_plot_scale_make(const double *v, int n);
/* The row (0 = top, height-1 = bottom) of value v; clamped into the plot; -1 when v is not
 * finite or height < 1. */
int ft_plot_row(const ft_plot_scale *s, double v, int height);
/* The value at the middle of a row (tick labels). */
double ft_plot_value(const ft_plot_scale *s, int row, int height);
/* Rows to label: top and bottom, and the middle when there are 5 rows or more. Returns how
 * many (at most 3). */
int ft_plot_ticks(int height, int *rows);
/* The column of time t in [t0, t1] across width; clamped; -1 when width < 1. */
int ft_plot_col(double t, double t0, double t1, int width);

/* What a plot cell holds. */
enum {
    FT_GLYPH_NONE,
    FT_GLYPH_LINE,
    FT_GLYPH_POINT,
    FT_GLYPH_SCREENED,
    FT_GLYPH_REJECTED,
    FT_GLYPH_UNCLEAN, /* a trial not measured cleanly, at its upper bound */
};
/* Render the ring's points into grid[height][width] (FT_GLYPH_*), time from the first point
 * to `t_now` across the width: the line (b) as a step drawn in every column, points (v) on
 * top, rejected candidates on the bottom row. Returns the scale used. */
ft_plot_scale ft_plot_render(const ft_tui_ring *r, double t_now, int width, int height,
                             unsigned char *grid);

/* Level 0..levels-1 of v within [lo, hi] (sparklines); -1 when v is not finite. */
int ft_spark_level(double v, double lo, double hi, int levels);
/* Bar heights of a histogram in units of 1/8 line, for `height` lines: the largest count
 * fills the height, a non-empty bin shows at least 1/8. */
void ft_hist_levels(const int *counts, int n, int height, int *eighths);

/* ---- sources ----------------------------------------------------------------------------- */

/* A queue of events between a worker thread (producer) and the dashboard (consumer). */
typedef struct ft_tui_feed {
    pthread_mutex_t mu;
    json_t **q;
    int n, cap, head;
    long dropped; /* events lost when memory ran out */
} ft_tui_feed;

int ft_tui_feed_init(ft_tui_feed *f); /* 0 on failure */
void ft_tui_feed_free(ft_tui_feed *f);
/* Append a copy of ev (safe from any thread; ev stays the caller's). */
void ft_tui_feed_push(ft_tui_feed *f, const json_t *ev);
/* Append ev itself (takes ownership). */
void ft_tui_feed_push_new(ft_tui_feed *f, json_t *ev);
/* An ft_event_listener: ctx is the feed. */
void ft_tui_feed_listener(void *ctx, const json_t *ev);
/* Move up to max events into out (the caller decrefs them). Returns how many. */
int ft_tui_feed_drain(ft_tui_feed *f, json_t **out, int max);

/* Follows an event log as `tail -f` does: survives the file growing, a torn last line that
 * is completed later, a file that does not exist yet, and a file truncated or replaced
 * (reopened and read from the start; a {"event": "reopen", "reason": ...} event says so).
 * A log whose writer is gone (its lock free, core/filelock.h ft_file_lock_held, and all of it
 * read) gets a {"event": "gone", "run": ..., "log": ...} event naming the run of its latest
 * event, once until the log gives another event.
 * Given the --log of a `tune all` or a sweep, it follows every log that run writes (LOG.OP,
 * LOG.OP.SIZE..., ft_eventlog_family), found as they appear; when one of them is reopened,
 * every one is read again from the start after the reopen event (the model drops what it
 * read before: ft_tui_model_apply). */
typedef struct ft_tui_follow ft_tui_follow;

ft_tui_follow *ft_tui_follow_new(const char *path); /* NULL when out of memory */
void ft_tui_follow_free(ft_tui_follow *f);
/* Read what is new: up to max complete events into out (the caller decrefs them). Returns how
 * many; more may be pending when it returns max. Lines that are not events are skipped and
 * counted in *bad (may be NULL). */
int ft_tui_follow_poll(ft_tui_follow *f, json_t **out, int max, long *bad);
/* 1 while no log has been opened (none exists yet). */
int ft_tui_follow_waiting(const ft_tui_follow *f);
/* How many logs are open. */
int ft_tui_follow_count(const ft_tui_follow *f);

/* ---- the dashboard ----------------------------------------------------------------------- */

typedef struct ft_tui_opts {
    const char *title;       /* "tune fusion.dflash", "top run.jsonl", ...          */
    ft_tui_feed *feed;       /* in-process events, or NULL                          */
    const char *follow_path; /* an event log to follow, or NULL                     */
    volatile int *pause;     /* the tuner's pause flag (p), or NULL: not in-process */
    volatile int *stop;      /* raised by SIGINT/SIGTERM: leave at once            */
    int expected_runs;       /* runs the source will start, 0: unknown              */
    int frame_ms;            /* the getch() timeout; at least 100                  */
} ft_tui_opts;

typedef struct ft_tui_result {
    int by_signal;   /* *stop was raised                    */
    int source_done; /* the source had finished when it quit */
    char error[512]; /* the source's error, if it failed    */
} ft_tui_result;

/* Run the dashboard on the terminal until q (or *stop). The terminal is restored before it
 * returns, whatever happens. Fails (FT_EUNSUPPORTED) when stdin/stdout is not a terminal or
 * the terminal type is unknown. */
ft_status ft_tui_run(const ft_tui_opts *o, ft_tui_result *res, ft_err *err);

/* Is the locale's character set UTF-8 (given nl_langinfo(CODESET))? */
int ft_tui_codeset_is_utf8(const char *codeset);

#ifdef __cplusplus
}
#endif
#endif
