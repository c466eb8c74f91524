/* dash.c: the dashboard's drawing and its loop: a thin ncurses layer over the model (model.c),
 * the geometry (layout.c) and the sources (feed.c).
 *
 * One getch() timeout is the loop's only wait; a frame is drawn when something changed (at
 * most ten a second) or once a second for the clocks; every pane is drawn into its own window,
 * copied with wnoutrefresh, and the terminal is updated once per frame with doupdate, so
 * nothing flickers. Nothing here runs on a worker thread.
 */
#include <curses.h>
#include <langinfo.h>
#include <locale.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <termios.h>
#include <unistd.h>

#include "core/clock.h"
#include "core/epitaph.h"
#include "core/format.h"
#include "core/status.h"
#include "traces/eventlog.h"
#include "tui/tui.h"

int ft_tui_codeset_is_utf8(const char *cs) {
    if (!cs) return 0;
    char lower[16];
    size_t k = 0;
    for (; cs[k] && k < sizeof lower - 1; k++)
        lower[k] = (char)(cs[k] >= 'A' && cs[k] <= 'Z' ? cs[k] - 'A' + 'a' : cs[k]);
    lower[k] = '\0';
    return !strcmp(lower, "utf-8") || !strcmp(lower, "utf8");
}

/* ---- colors and attributes --------------------------------------------------------------- */

enum { C_HEADER = 1, C_GOOD, C_BAD, C_STATUS, C_POINT, C_LINE, C_WARN, C_ERRBAR, C_COUNT };

/* Line-drawing characters: UTF-8 when the terminal takes it, ASCII otherwise (the alternate
 * character set is avoided: it does not survive every terminal, multiplexer or capture). */
typedef struct glyphs {
    const char *h, *v, *corner, *tee;
    const char *tl, *tr, *bl, *br; /* a box's corners (the help) */
} glyphs;
static const glyphs glyphs_ascii = {"-", "|", "+", "+", "+", "+", "+", "+"};
static const glyphs glyphs_utf8 = {"\xe2\x94\x80", "\xe2\x94\x82", "\xe2\x94\x94", "\xe2\x94\x8c",
                                   "\xe2\x94\x8c", "\xe2\x94\x90", "\xe2\x94\x94", "\xe2\x94\x98"};

typedef struct dash {
    /* What gives the terminal back should the process end under the dashboard (a candidate
     * past --candidate-timeout, a kernel's fault): registered with core/epitaph.h. */
    char restore[128];
    const glyphs *g;
    const ft_tui_opts *o;
    ft_tui_model m;
    ft_tui_follow *follow;
    int ascii, color;
    int rows, cols;
    ft_tui_layout L;
    ft_tui_layout made; /* the rectangles the windows were made for */
    WINDOW *w_table, *w_ranks, *w_plot, *w_detail, *w_status, *w_help;
    int view[4096], nview;
    int sel, scroll;
    char sel_run[40];
    ft_tui_sort sort;
    char filter[64];
    int editing;
    char edit[64];
    int detail_open, help_open;
    char flash[160]; /* a one-off message in the status bar */
    double flash_until;
    SCREEN *scr;
    char *old_ctype; /* LC_CTYPE before the dashboard, put back at the end */
} dash;

static attr_t role(const dash *d, int r) {
    if (!d->color) {
        switch (r) {
        case C_HEADER:
        case C_STATUS:
        case C_ERRBAR: return A_REVERSE;
        case C_GOOD:
        case C_BAD: return A_BOLD;
        case C_WARN:
        case C_POINT: return A_NORMAL;
        default: return A_NORMAL;
        }
    }
    attr_t a = COLOR_PAIR(r);
    if (r == C_ERRBAR || r == C_BAD) a |= A_BOLD;
    return a;
}

static void colors_start(dash *d) {
    const char *nc = getenv("NO_COLOR");
    d->color = has_colors() && !(nc && *nc);
    if (!d->color) return;
    if (start_color() == ERR) {
        d->color = 0;
        return;
    }
    short bg = COLOR_BLACK;
#ifdef NCURSES_VERSION
    if (use_default_colors() == OK) bg = -1;
#endif
    init_pair(C_HEADER, COLOR_BLACK, COLOR_CYAN);
    init_pair(C_GOOD, COLOR_GREEN, bg);
    init_pair(C_BAD, COLOR_RED, bg);
    init_pair(C_STATUS, COLOR_BLACK, COLOR_WHITE);
    init_pair(C_POINT, COLOR_CYAN, bg);
    init_pair(C_LINE, COLOR_GREEN, bg);
    init_pair(C_WARN, COLOR_YELLOW, bg);
    init_pair(C_ERRBAR, COLOR_WHITE, COLOR_RED);
}

/* ---- clipped text ------------------------------------------------------------------------ */

/* Write s at (y, x) of w, cut at the window's right edge (or at maxw columns when > 0). Names
 * from a log or a profile may hold control characters: each is drawn as a space, as in an error
 * line (ft_text_printable), since curses would move the cursor on a line break, a tab or a
 * backspace and draw others as two cells (^[), where the layout counted one. */
static void put(WINDOW *w, int y, int x, const char *s, int maxw, attr_t a) {
    if (!w) return;
    int h, ww;
    getmaxyx(w, h, ww);
    if (y < 0 || y >= h || x < 0 || x >= ww) return;
    int room = ww - x;
    if (maxw > 0 && maxw < room) room = maxw;
    char text[1024]; /* longer than any line the dashboard draws */
    snprintf(text, sizeof text, "%s", s);
    ft_text_printable(text, ' ');
    /* Count columns, not bytes: UTF-8 continuation bytes take none. */
    int cols = 0;
    size_t bytes = 0;
    for (const unsigned char *c = (const unsigned char *)text; *c; c++) {
        if ((*c & 0xC0) != 0x80) {
            if (cols == room) break;
            cols++;
        }
        bytes++;
    }
    if (a) wattron(w, a);
    mvwaddnstr(w, y, x, text, (int)bytes);
    if (a) wattroff(w, a);
}

static int text_cols(const char *s) {
    int n = 0;
    for (const unsigned char *c = (const unsigned char *)s; *c; c++)
        n += (*c & 0xC0) != 0x80;
    return n;
}

static void put_right(WINDOW *w, int y, int x, int width, const char *s, attr_t a) {
    int n = text_cols(s);
    if (n > width) n = width;
    put(w, y, x + width - n, s, width, a);
}

/* A table's cell of width at x: numbers right-aligned, text from the left. */
static void put_col(WINDOW *w, int y, int x, int width, int right, const char *s, attr_t a) {
    if (right)
        put_right(w, y, x, width, s, a);
    else
        put(w, y, x, s, width, a);
}

static void fill_line(WINDOW *w, int y, attr_t a) {
    int h, ww;
    getmaxyx(w, h, ww);
    if (y < 0 || y >= h) return;
    wattron(w, a);
    mvwhline(w, y, 0, ' ', ww);
    wattroff(w, a);
}

/* n copies of glyph g from (y, x) across (down when vertical). */
static void rule(WINDOW *w, int y, int x, int n, const char *g, int vertical, attr_t a) {
    for (int i = 0; i < n; i++)
        put(w, y + (vertical ? i : 0), x + (vertical ? 0 : i), g, 1, a);
}

/* A pane title over a rule: "-- title ------". */
static void pane_title(dash *d, WINDOW *w, int x0, const char *title) {
    int h, ww;
    getmaxyx(w, h, ww);
    (void)h;
    rule(w, 0, x0, ww - x0, d->g->h, 0, A_DIM);
    put(w, 0, x0 + 1, " ", 0, 0);
    put(w, 0, x0 + 2, title, ww - x0 - 4, A_BOLD);
    int n = text_cols(title);
    if (x0 + 2 + n < ww) put(w, 0, x0 + 2 + n, " ", 0, 0);
}

/* ---- windows ----------------------------------------------------------------------------- */

static void win_set(WINDOW **w, ft_rect r, ft_rect *cur) {
    if (*w && !memcmp(&r, cur, sizeof r)) return;
    if (*w) delwin(*w);
    *w = NULL;
    *cur = r;
    if (r.h > 0 && r.w > 0) *w = newwin(r.h, r.w, r.y, r.x);
}

static const ft_tui_row *selected(const dash *d);

static void windows_update(dash *d) {
    getmaxyx(stdscr, d->rows, d->cols);
    ft_tui_layout_compute(d->rows, d->cols, d->nview, ft_tui_row_ranks_shown(selected(d)),
                          d->detail_open, d->help_open, &d->L);
    win_set(&d->w_table, d->L.table, &d->made.table);
    win_set(&d->w_ranks, d->L.ranks, &d->made.ranks);
    win_set(&d->w_plot, d->L.plot, &d->made.plot);
    win_set(&d->w_detail, d->L.detail, &d->made.detail);
    win_set(&d->w_status, d->L.status, &d->made.status);
    win_set(&d->w_help, d->L.help, &d->made.help);
}

static void windows_free(dash *d) {
    WINDOW **ws[] = {&d->w_table, &d->w_ranks, &d->w_plot, &d->w_detail, &d->w_status, &d->w_help};
    for (size_t i = 0; i < sizeof ws / sizeof ws[0]; i++) {
        if (*ws[i]) delwin(*ws[i]);
        *ws[i] = NULL;
    }
    memset(&d->made, 0, sizeof d->made);
}

/* ---- the view and the selection ---------------------------------------------------------- */

static int watch_mode(const dash *d) {
    int watch = 0, tune = 0;
    for (int i = 0; i < d->m.nrows; i++) {
        watch += d->m.rows[i].kind == FT_ROW_WATCH;
        tune += d->m.rows[i].kind == FT_ROW_TUNE;
    }
    return watch > 0 && tune == 0;
}

static void view_update(dash *d) {
    d->nview = ft_tui_model_view(&d->m, d->sort, d->filter[0] ? d->filter : NULL, d->view,
                                 (int)(sizeof d->view / sizeof d->view[0]));
    int found = -1;
    for (int i = 0; i < d->nview && d->sel_run[0]; i++)
        if (!strcmp(d->m.rows[d->view[i]].run, d->sel_run)) found = i;
    if (found >= 0) d->sel = found;
    if (d->sel >= d->nview) d->sel = d->nview - 1;
    if (d->sel < 0) d->sel = 0;
    if (d->nview) snprintf(d->sel_run, sizeof d->sel_run, "%s", d->m.rows[d->view[d->sel]].run);
}

static const ft_tui_row *selected(const dash *d) {
    return d->nview ? &d->m.rows[d->view[d->sel]] : NULL;
}

static void select_at(dash *d, int i) {
    if (!d->nview) return;
    d->sel = i < 0 ? 0 : i >= d->nview ? d->nview - 1 : i;
    snprintf(d->sel_run, sizeof d->sel_run, "%s", d->m.rows[d->view[d->sel]].run);
}

/* ---- panes ------------------------------------------------------------------------------- */

static const char *state_word(ft_tui_row_state s) {
    switch (s) {
    case FT_ROW_RUNNING: return "running";
    case FT_ROW_DONE: return "done";
    case FT_ROW_INTERRUPTED: return "interrupted";
    case FT_ROW_LOST: return "ended without run_end";
    case FT_ROW_FAILED: return "failed";
    case FT_ROW_GONE: return "stopped: writer gone";
    }
    return "";
}

/* The window of a pane cleared, with its size in *h and *ww, for a draw_ function to fill;
 * NULL (nothing done) when the pane is not shown. */
static WINDOW *pane(WINDOW *w, int *h, int *ww) {
    if (!w) return NULL;
    werase(w);
    getmaxyx(w, *h, *ww);
    return w;
}

/* '!' beside the op of a run with candidates not measured cleanly. */
static void draw_row_mark(dash *d, WINDOW *w, int y, const ft_tui_row *r, attr_t base) {
    char mark[2] = {ft_tui_row_mark(r), '\0'};
    if (mark[0] != ' ') put(w, y, 1, mark, 1, base | A_BOLD | role(d, C_WARN));
}

static void draw_table(dash *d) {
    int h, ww;
    WINDOW *w = pane(d->w_table, &h, &ww);
    if (!w) return;
    ft_tui_col cols[FT_COL_COUNT];
    int watch = watch_mode(d);
    int nc = ft_tui_columns(ww, watch, cols);
    fill_line(w, 0, role(d, C_HEADER));
    for (int c = 0; c < nc; c++) {
        const char *t = ft_tui_col_title(cols[c].id);
        put_col(w, 0, cols[c].x, cols[c].w, cols[c].right, t, role(d, C_HEADER));
    }
    int lines = h - 1;
    if (lines <= 0) return;
    if (!d->nview) {
        const char *msg = d->m.nrows ? "no op matches the filter (/ to change it)"
                          : d->follow && ft_tui_follow_waiting(d->follow)
                              ? "waiting for the log to appear..."
                              : "waiting for events...";
        put(w, 1, FT_TUI_MARK, msg, 0, A_DIM);
        return;
    }
    if (d->sel < d->scroll) d->scroll = d->sel;
    if (d->sel >= d->scroll + lines) d->scroll = d->sel - lines + 1;
    if (d->scroll > d->nview - lines) d->scroll = d->nview - lines;
    if (d->scroll < 0) d->scroll = 0;
    for (int i = 0; i < lines && d->scroll + i < d->nview; i++) {
        int vi = d->scroll + i;
        const ft_tui_row *r = &d->m.rows[d->view[vi]];
        int y = 1 + i, is_sel = vi == d->sel;
        attr_t base = is_sel ? A_REVERSE : A_NORMAL;
        if (r->state == FT_ROW_RUNNING && !is_sel) base |= A_BOLD;
        if (is_sel) fill_line(w, y, A_REVERSE);
        put(w, y, 0, is_sel ? ">" : " ", 0, base);
        draw_row_mark(d, w, y, r, base);
        for (int c = 0; c < nc; c++) {
            char buf[256];
            if (cols[c].id == FT_COL_TREND)
                ft_tui_trend(r, cols[c].w, d->ascii, buf, sizeof buf);
            else
                ft_tui_cell(r, cols[c].id, d->ascii, buf, sizeof buf);
            attr_t a = base;
            if (!is_sel) {
                if (cols[c].id == FT_COL_BEST || cols[c].id == FT_COL_P50) a |= role(d, C_GOOD);
                if (cols[c].id == FT_COL_LAST && r->last_rejected) a |= role(d, C_BAD);
                if (cols[c].id == FT_COL_REJECTED && r->rejected) a |= role(d, C_WARN);
                if (cols[c].id == FT_COL_SPEEDUP && r->speedup >= 1.05) a |= role(d, C_GOOD);
                if (cols[c].id == FT_COL_VSPROF && r->speedup > 1.25) a |= role(d, C_WARN);
                if (cols[c].id == FT_COL_TREND) a |= role(d, C_POINT);
                if (cols[c].id == FT_COL_OP && (r->state == FT_ROW_FAILED ||
                                                r->state == FT_ROW_LOST || r->state == FT_ROW_GONE))
                    a |= role(d, C_BAD);
            }
            put_col(w, y, cols[c].x, cols[c].w, cols[c].right, buf, a);
        }
    }
}

/* The ranks of the selected distributed run: a header and a line per rank (the last line
 * says how many more when they do not all fit). */
static void draw_ranks(dash *d) {
    int h, ww;
    WINDOW *w = pane(d->w_ranks, &h, &ww);
    if (!w) return;
    const ft_tui_row *r = selected(d);
    ft_tui_rcol cols[FT_RCOL_COUNT];
    int nc = ft_tui_rank_columns(ww, cols);
    fill_line(w, 0, role(d, C_HEADER));
    for (int c = 0; c < nc; c++) {
        const char *t = ft_tui_rcol_title(cols[c].id);
        put_col(w, 0, cols[c].x, cols[c].w, cols[c].right, t, role(d, C_HEADER));
    }
    if (!r) return;
    int lines = h - 1;
    for (int i = 0; i < lines && i < r->nranks; i++) {
        if (i == lines - 1 && r->nranks > lines) {
            char more[64];
            snprintf(more, sizeof more, "+%d more ranks", r->nranks - i);
            put(w, 1 + i, FT_TUI_MARK, more, 0, A_DIM);
            break;
        }
        const ft_tui_rank *k = &r->ranks[i];
        for (int c = 0; c < nc; c++) {
            char buf[160];
            ft_tui_rank_cell(k, cols[c].id, cols[c].w, buf, sizeof buf);
            attr_t a = cols[c].id == FT_RCOL_RATE                      ? role(d, C_GOOD)
                       : cols[c].id == FT_RCOL_REJECTED && k->rejected ? role(d, C_WARN)
                                                                       : A_NORMAL;
            put_col(w, 1 + i, cols[c].x, cols[c].w, cols[c].right, buf, a);
        }
    }
}

static void draw_plot(dash *d, double now) {
    int h, ww;
    WINDOW *w = pane(d->w_plot, &h, &ww);
    if (!w) return;
    const ft_tui_row *r = selected(d);
    char title[256];
    int watch = r && r->kind == FT_ROW_WATCH;
    snprintf(title, sizeof title, "latency %s%s%s", r ? r->op : "", r ? "  " : "",
             r ? r->shape : "");
    pane_title(d, w, 0, title);
    char legend[96];
    snprintf(legend, sizeof legend,
             watch ? "* slowest  %s median (per 0.1 s)" : "* trial  + screened  %s best", d->g->h);
    int lx = ww - text_cols(legend) - 2;
    if (lx > 2 + text_cols(title) + 2) put(w, 0, lx, legend, 0, role(d, C_POINT));
    const int LW = 9; /* tick labels */
    int gh = h - 2, gw = ww - LW;
    if (!r || gh < 1 || gw < 4) return;
    if (!r->history.n) {
        put(w, 1 + gh / 2, LW, watch ? "no samples yet" : "no candidate measured yet", 0, A_DIM);
        return;
    }
    unsigned char *grid = malloc((size_t)gh * (size_t)gw);
    if (!grid) return;
    double t_now =
        (r->state == FT_ROW_RUNNING && ft_tui_model_running(&d->m) ? now : r->t_last) - r->t_start;
    ft_plot_scale s = ft_plot_render(&r->history, t_now, gw, gh, grid);
    for (int y = 0; y < gh; y++) {
        put(w, 1 + y, LW - 1, d->g->v, 1, A_DIM);
        for (int x = 0; x < gw; x++) {
            unsigned char g = grid[y * gw + x];
            if (g == FT_GLYPH_NONE) continue;
            const char *ch = g == FT_GLYPH_LINE       ? d->g->h
                             : g == FT_GLYPH_POINT    ? "*"
                             : g == FT_GLYPH_SCREENED ? "+"
                             : g == FT_GLYPH_UNCLEAN  ? "!"
                                                      : "x";
            attr_t a = g == FT_GLYPH_LINE       ? role(d, C_LINE)
                       : g == FT_GLYPH_REJECTED ? role(d, C_BAD)
                       : g == FT_GLYPH_SCREENED ? role(d, C_WARN)
                       : g == FT_GLYPH_UNCLEAN  ? role(d, C_WARN)
                                                : role(d, C_POINT);
            put(w, 1 + y, LW + x, ch, 1, a);
        }
    }
    free(grid);
    int ticks[3];
    int nt = ft_plot_ticks(gh, ticks);
    for (int i = 0; i < nt; i++) {
        char lab[32];
        ft_fmt_time(ft_plot_value(&s, ticks[i], gh), d->ascii, lab, sizeof lab);
        put_right(w, 1 + ticks[i], 0, LW - 1, lab, A_DIM);
    }
    /* The time axis. */
    int ay = h - 1;
    put(w, ay, LW - 1, d->g->corner, 1, A_DIM);
    rule(w, ay, LW, gw, d->g->h, 0, A_DIM);
    double t0 = ft_tui_ring_at(&r->history, 0)->t;
    char a[32], b[48];
    ft_fmt_duration(t0 > 0 ? t0 : 0, a, sizeof a);
    ft_fmt_duration(t_now > t0 ? t_now : t0, b, sizeof b);
    put(w, ay, LW, a, 0, A_DIM);
    put_right(w, ay, LW, gw, b, A_DIM);
    if (s.log && gw > 30) put(w, ay, LW + gw / 2 - 5, " log scale ", 0, A_DIM);
}

/* A histogram of FT_TUI_BINS bins, `height` lines tall, from (y, x). */
static void draw_hist(dash *d, WINDOW *w, int y, int x, int height, int binw, const int *counts) {
    int lv[FT_TUI_BINS];
    ft_hist_levels(counts, FT_TUI_BINS, height, lv);
    static const char *const parts[8] = {"",
                                         "\xe2\x96\x81",
                                         "\xe2\x96\x82",
                                         "\xe2\x96\x83",
                                         "\xe2\x96\x84",
                                         "\xe2\x96\x85",
                                         "\xe2\x96\x86",
                                         "\xe2\x96\x87"};
    for (int b = 0; b < FT_TUI_BINS; b++)
        for (int row = 0; row < height; row++) {
            int fill = lv[b] - (height - 1 - row) * 8; /* eighths of this cell */
            if (fill <= 0) continue;
            for (int k = 0; k < binw; k++) {
                int cx = x + b * binw + k;
                if (fill >= 8) {
                    put(w, y + row, cx, d->ascii ? "#" : "\xe2\x96\x88", 1, role(d, C_POINT));
                } else if (!d->ascii) {
                    put(w, y + row, cx, parts[fill], 1, role(d, C_POINT));
                } else {
                    put(w, y + row, cx, fill >= 4 ? "o" : "_", 1, role(d, C_POINT));
                }
            }
        }
}

/* The row's scheduler figures, and why run_end gave no speedup or no winner: a line each. */
static int draw_row_busy(dash *d, WINDOW *w, int y, int x0, int cw, const ft_tui_row *r) {
    ft_tui_contention c = {r->discarded, r->taken, r->unclean, r->stopped};
    char buf[192];
    ft_tui_busy_text(&c, buf, sizeof buf);
    if (buf[0]) put(w, y++, x0, buf, cw, role(d, C_WARN));
    if (r->withheld[0]) put(w, y++, x0, r->withheld, cw, role(d, C_WARN));
    return y;
}

static int spoiled_lines(const ft_tui_row *r) { return r->nspoiled ? r->nspoiled + 1 : 0; }

/* The latest candidates the run did not rank, latest first, under a heading. */
static void draw_spoiled(dash *d, WINDOW *w, int y, int x0, int cw, int h, const ft_tui_row *r) {
    if (!r->nspoiled || y >= h) return;
    put(w, y++, x0, "not ranked       median (an upper bound)", cw, A_BOLD);
    for (int i = r->nspoiled - 1; i >= 0 && y < h; i--) {
        char buf[256];
        ft_tui_spoiled_line(&r->spoiled[i], d->ascii, buf, sizeof buf);
        put(w, y++, x0, buf, cw, role(d, C_WARN));
    }
}

static void draw_detail(dash *d) {
    int h, ww;
    WINDOW *w = pane(d->w_detail, &h, &ww);
    if (!w) return;
    const ft_tui_row *r = selected(d);
    int x0 = 0;
    if (d->L.detail.x > 0) { /* beside the plot: a rule on the left */
        rule(w, 0, 0, h, d->g->v, 1, A_DIM);
        x0 = 2;
    }
    if (!r) {
        pane_title(d, w, x0 ? 1 : 0, "detail");
        put(w, 2, x0, "nothing selected", 0, A_DIM);
        return;
    }
    char buf[512], a[32], b[32], c[32];
    if (r->state == FT_ROW_DONE && r->search_end[0] && strcmp(r->search_end, "exhausted")) {
        int measured, target;
        ft_tui_row_progress(r, &measured, &target);
        snprintf(buf, sizeof buf, "%s (done: %s after %d of %d valid)", r->op, r->search_end,
                 measured, r->valid);
    } else {
        snprintf(buf, sizeof buf, "%s (%s)", r->op, state_word(r->state));
    }
    pane_title(d, w, x0 ? 1 : 0, buf);
    if (x0) put(w, 0, 0, d->g->tee, 1, A_DIM);
    int y = 1, cw = ww - x0;
    if (r->kind == FT_ROW_WATCH) {
        snprintf(buf, sizeof buf, "%s on %s  %s", r->shape, r->backend, r->device);
        put(w, y++, x0, buf, cw, 0);
        snprintf(buf, sizeof buf, "config   %s", r->config[0] ? r->config : "(default)");
        put(w, y++, x0, buf, cw, 0);
        snprintf(
            buf, sizeof buf, "p50 %s  p95 %s  max %s", ft_fmt_time(r->p50, d->ascii, a, sizeof a),
            ft_fmt_time(r->p95, d->ascii, b, sizeof b), ft_fmt_time(r->max, d->ascii, c, sizeof c));
        put(w, y++, x0, buf, cw, role(d, C_GOOD));
        snprintf(buf, sizeof buf, "jitter %s  calls %ld  window %d",
                 ft_fmt_time(r->jitter, d->ascii, a, sizeof a), r->calls, r->window.n);
        put(w, y++, x0, buf, cw, 0);
        if (isfinite(r->profile_median)) {
            snprintf(buf, sizeof buf, "tuned median %s (profile)  now %.2fx of it",
                     ft_fmt_time(r->profile_median, d->ascii, a, sizeof a), r->speedup);
            put(w, y++, x0, buf, cw, 0);
        }
        if (y + 3 <= h && isfinite(r->win_lo)) {
            int hh = h - y - 1 > 4 ? 4 : h - y - 1, binw = cw >= 40 ? 2 : 1;
            put(w, y++, x0, "distribution of the window", cw, A_BOLD);
            draw_hist(d, w, y, x0, hh - 1 > 0 ? hh - 1 : 1, binw, r->win_hist);
            y += hh - 1 > 0 ? hh - 1 : 1;
            put(w, y, x0, ft_fmt_time(r->win_lo, d->ascii, a, sizeof a), 0, A_DIM);
            put_right(w, y, x0, FT_TUI_BINS * binw > cw ? cw : FT_TUI_BINS * binw,
                      ft_fmt_time(r->win_hi, d->ascii, b, sizeof b), A_DIM);
        }
        return;
    }
    snprintf(buf, sizeof buf, "%s on %s  %s  strategy %s", r->shape, r->backend, r->preset,
             r->strategy);
    put(w, y++, x0, buf, cw, 0);
    y = draw_row_busy(d, w, y, x0, cw, r);
    if (!r->ntop) {
        put(w, y++, x0,
            r->unclean ? "no candidate measured cleanly yet"
            : r->done  ? "no candidate fully measured yet"
                       : "no candidate measured yet",
            cw, A_DIM);
        draw_spoiled(d, w, y, x0, cw, h, r);
        return;
    }
    const ft_tui_cand *best = &r->top[0];
    snprintf(buf, sizeof buf, "best %s  iqr %s  n=%d  speedup %s",
             ft_fmt_time(best->median, d->ascii, a, sizeof a),
             ft_fmt_time(best->iqr, d->ascii, b, sizeof b), best->samples,
             isfinite(r->speedup) ? "" : "-");
    if (isfinite(r->speedup)) {
        size_t k = strlen(buf);
        snprintf(buf + k, sizeof buf - k, "%.2fx", r->speedup);
    }
    put(w, y++, x0, buf, cw, role(d, C_GOOD));
    /* The best config, one parameter a line when there is room. */
    int room = h - y - 9 - spoiled_lines(r); /* keep room for the histogram and the lists */
    if (room >= 3) {
        put(w, y++, x0, "config", cw, A_BOLD);
        const char *p = best->cfg;
        while (*p && y < h) {
            const char *sp = strchr(p, ' ');
            int len = sp ? (int)(sp - p) : (int)strlen(p);
            snprintf(buf, sizeof buf, "  %.*s", len, p);
            put(w, y++, x0, buf, cw, 0);
            p = sp ? sp + 1 : p + len;
        }
    } else {
        snprintf(buf, sizeof buf, "config %s", best->cfg);
        put(w, y++, x0, buf, cw, 0);
    }
    if (best->has_hist && y + 4 <= h - (r->ntop + 1) - spoiled_lines(r)) {
        int binw = cw >= 40 ? 2 : 1;
        put(w, y++, x0, "samples of the best", cw, A_BOLD);
        draw_hist(d, w, y, x0, 2, binw, best->hist);
        y += 2;
        put(w, y, x0, ft_fmt_time(best->hist_lo, d->ascii, a, sizeof a), 0, A_DIM);
        put_right(w, y, x0, FT_TUI_BINS * binw > cw ? cw : FT_TUI_BINS * binw,
                  ft_fmt_time(best->hist_hi, d->ascii, b, sizeof b), A_DIM);
        y++;
    }
    if (y < h)
        put(w, y++, x0, "top configs     median       iqr  (c: measured again side by side)", cw,
            A_BOLD);
    int ended = r->state != FT_ROW_RUNNING && r->ties_final;
    for (int i = 0; i < r->ntop && y < h; i++) {
        const ft_tui_cand *t = &r->top[i];
        const char *mark = ended && i == 0 ? "win" : t->tie ? "tie" : "";
        ft_tui_top_line(t, i + 1, mark, d->ascii, buf, sizeof buf);
        put(w, y++, x0, buf, cw, t->tie ? role(d, C_WARN) : 0);
    }
    draw_spoiled(d, w, y, x0, cw, h, r);
}

static void draw_help(dash *d) {
    int h, ww;
    WINDOW *w = pane(d->w_help, &h, &ww);
    if (!w) return;
    if (h >= 3 && ww >= 4) {
        rule(w, 0, 0, ww, d->g->h, 0, 0);
        rule(w, h - 1, 0, ww, d->g->h, 0, 0);
        rule(w, 0, 0, h, d->g->v, 1, 0);
        rule(w, 0, ww - 1, h, d->g->v, 1, 0);
        put(w, 0, 0, d->g->tl, 1, 0);
        put(w, 0, ww - 1, d->g->tr, 1, 0);
        put(w, h - 1, 0, d->g->bl, 1, 0);
        put(w, h - 1, ww - 1, d->g->br, 1, 0);
    }
    static const char *const lines[] = {
        "keys",
        "up/down, j/k   select a kernel",
        "PgUp/PgDn      a page up or down",
        "Enter          open or close the detail pane",
        "s              cycle the sort order",
        "p              pause or resume the tuner",
        "/              filter by op (Enter applies, empty: all)",
        "?              this help (any key closes it)",
        "q              quit",
        "",
        "plot: * trial  + screened  x rejected",
        "      line: the best so far (watch: median)",
    };
    int x = h >= 3 && ww >= 4 ? 2 : 0, y0 = h >= 3 ? 1 : 0;
    for (size_t i = 0; i < sizeof lines / sizeof lines[0] && y0 + (int)i < h - (y0 ? 1 : 0); i++)
        put(w, y0 + (int)i, x, lines[i], ww - 2 * x, i == 0 ? A_BOLD : 0);
}

/* The scheduler's share over every run, for the status bar; its rank there (1 when the machine
 * was busy: it stays when the line is short). */
static int busy_segment(const dash *d, char *buf, size_t n) {
    ft_tui_contention c;
    ft_tui_model_contention(&d->m, &c);
    return ft_tui_busy_text(&c, buf, n) ? 1 : 6;
}

static void draw_status(dash *d, double now) {
    int h, ww;
    WINDOW *w = pane(d->w_status, &h, &ww);
    if (!w) return;
    (void)h;
    int err = d->m.error[0] != 0;
    attr_t bar = role(d, err ? C_ERRBAR : C_STATUS);
    fill_line(w, 0, bar);
    /* Segments in display order, each with a rank: the lowest ranked go first when the line is
     * too short. */
    struct {
        char text[640];
        int rank;
    } seg[16];
    int ns = 0;
#define SEG(rank_, ...)                                                                            \
    do {                                                                                           \
        snprintf(seg[ns].text, sizeof seg[ns].text, __VA_ARGS__);                                  \
        seg[ns++].rank = (rank_);                                                                  \
    } while (0)
    const ft_tui_row *r = selected(d);
    char a[32], b[32];
    if (d->editing) {
        SEG(0, "filter by op: %s_", d->edit);
        SEG(5, "Enter applies, Esc cancels");
    } else if (err) {
        SEG(0, "error: %s", d->m.error);
        SEG(5, "q quits");
    } else {
        int running = ft_tui_model_running(&d->m);
        const char *state = d->o->pause && *d->o->pause ? "PAUSED"
                            : running                   ? "running"
                            : d->m.finished             ? "finished"
                            : d->m.gone[0]              ? "stopped"
                            : d->m.nrows                ? "ended"
                                                        : "waiting";
        SEG(0, "%s", state);
        if (!running && d->m.gone[0]) SEG(1, "%s", d->m.gone);
        char busy[160];
        int busy_rank = busy_segment(d, busy, sizeof busy);
        if (busy[0]) SEG(busy_rank, "%s", busy);
        if (r && r->device[0]) SEG(2, "%.32s", r->device);
        SEG(1, "elapsed %s", ft_fmt_duration(ft_tui_model_elapsed(&d->m, now), a, sizeof a));
        if (!watch_mode(d) && running) {
            int partial;
            double eta = ft_tui_model_eta(&d->m, now, &partial);
            SEG(2, "ETA %s%s", ft_fmt_duration(eta, b, sizeof b),
                partial && isfinite(eta) ? "+" : "");
        }
        int ntune = 0;
        for (int i = 0; i < d->m.nrows; i++)
            ntune += d->m.rows[i].kind == FT_ROW_TUNE;
        if (d->m.expected_runs > 1)
            SEG(4, "run %d/%d", ntune, d->m.expected_runs);
        else if (d->m.runs_of > 1)
            SEG(4, "run %d/%d", d->m.runs_started, d->m.runs_of);
        if (r && r->strategy[0]) SEG(3, "%s", r->strategy);
        if (ft_tui_row_ranks_shown(r)) SEG(3, "%d ranks", r->nranks);
        double rate = ft_tui_model_rate(&d->m, now);
        if (isfinite(rate)) SEG(3, "%.1f ev/s", rate);
        if (d->flash[0] && now < d->flash_until)
            SEG(1, "%s", d->flash);
        else if (d->m.note[0])
            SEG(6, "%s", d->m.note);
        if (running && isfinite(d->m.t_last) && now - d->m.t_last > 30)
            SEG(2, "last event %s ago", ft_fmt_duration(now - d->m.t_last, a, sizeof a));
        if (d->filter[0]) SEG(1, "filter '%s'", d->filter);
        if (d->sort != FT_SORT_ARRIVAL) SEG(2, "sort %s", ft_tui_sort_names[d->sort]);
        if (d->m.nbad) SEG(7, "%ld bad lines", d->m.nbad);
        if (d->o->title) SEG(7, "%s", d->o->title);
        SEG(8, "? help  q quit");
    }
#undef SEG
    int keep[16], total = 0;
    for (int i = 0; i < ns; i++) {
        keep[i] = 1;
        total += text_cols(seg[i].text) + 2;
    }
    for (int rank = 8; rank > 0 && total > ww; rank--)
        for (int i = ns - 1; i >= 0 && total > ww; i--)
            if (keep[i] && seg[i].rank == rank) {
                keep[i] = 0;
                total -= text_cols(seg[i].text) + 2;
            }
    int x = 1;
    for (int i = 0; i < ns; i++) {
        if (!keep[i]) continue;
        put(w, 0, x, seg[i].text, ww - x, bar | (i == 0 ? A_BOLD : 0));
        x += text_cols(seg[i].text) + 2;
    }
}

static void frame(dash *d, double now) {
    windows_update(d);
    draw_table(d);
    draw_ranks(d);
    draw_plot(d, now);
    draw_detail(d);
    draw_status(d, now);
    draw_help(d);
    wnoutrefresh(stdscr);
    WINDOW *ws[] = {d->w_table, d->w_ranks, d->w_plot, d->w_detail, d->w_status, d->w_help};
    for (size_t i = 0; i < sizeof ws / sizeof ws[0]; i++)
        if (ws[i]) wnoutrefresh(ws[i]);
    doupdate();
}

/* ---- input ------------------------------------------------------------------------------- */

/* Returns 1 to quit. */
static int key(dash *d, int ch, double now) {
    if (d->editing) {
        size_t n = strlen(d->edit);
        if (ch == 27)
            d->editing = 0;
        else if (ch == '\n' || ch == '\r' || ch == KEY_ENTER) {
            snprintf(d->filter, sizeof d->filter, "%s", d->edit);
            d->editing = 0;
            d->sel = 0;
            d->scroll = 0;
            d->sel_run[0] = '\0';
        } else if (ch == KEY_BACKSPACE || ch == 127 || ch == 8) {
            if (n) d->edit[n - 1] = '\0';
        } else if (ch >= 32 && ch < 127 && n + 1 < sizeof d->edit) {
            d->edit[n] = (char)ch;
            d->edit[n + 1] = '\0';
        }
        return 0;
    }
    if (d->help_open && ch != KEY_RESIZE && ch != 'q' && ch != 'Q') {
        d->help_open = 0;
        return 0;
    }
    switch (ch) {
    case 'q':
    case 'Q': return 1;
    case KEY_UP:
    case 'k': select_at(d, d->sel - 1); break;
    case KEY_DOWN:
    case 'j': select_at(d, d->sel + 1); break;
    case KEY_PPAGE: select_at(d, d->sel - (d->L.table.h > 2 ? d->L.table.h - 2 : 1)); break;
    case KEY_NPAGE: select_at(d, d->sel + (d->L.table.h > 2 ? d->L.table.h - 2 : 1)); break;
    case KEY_HOME:
    case 'g': select_at(d, 0); break;
    case KEY_END:
    case 'G': select_at(d, d->nview - 1); break;
    case '\n':
    case '\r':
    case KEY_ENTER: d->detail_open = !d->detail_open; break;
    case 27: d->detail_open = 0; break;
    case 's': d->sort = (ft_tui_sort)((d->sort + 1) % FT_SORT_COUNT); break;
    case '/': /* a new filter: / then Enter shows every row again */
        d->editing = 1;
        d->edit[0] = '\0';
        break;
    case '?':
    case 'h': d->help_open = 1; break;
    case 'p':
        if (d->o->pause) {
            *d->o->pause = !*d->o->pause;
            snprintf(d->flash, sizeof d->flash, "%s",
                     *d->o->pause ? "paused (after the candidate in flight)" : "resumed");
        } else {
            snprintf(d->flash, sizeof d->flash, "p pauses only a tuner in this process");
        }
        d->flash_until = now + 3;
        break;
    default: break;
    }
    return 0;
}

/* ---- the loop ---------------------------------------------------------------------------- */

enum { EVENTS_PER_PASS = 2048 };

/* Apply what the sources have; returns 1 when more is pending. */
static int pull(dash *d) {
    json_t *evs[EVENTS_PER_PASS];
    int n = 0, more = 0;
    if (d->o->feed) {
        n = ft_tui_feed_drain(d->o->feed, evs, EVENTS_PER_PASS);
        more |= n == EVENTS_PER_PASS;
        for (int i = 0; i < n; i++) {
            ft_tui_model_apply(&d->m, evs[i]);
            json_decref(evs[i]);
        }
    }
    if (d->follow) {
        long bad = 0;
        n = ft_tui_follow_poll(d->follow, evs, EVENTS_PER_PASS, &bad);
        more |= n == EVENTS_PER_PASS;
        for (int i = 0; i < n; i++) {
            ft_tui_model_apply(&d->m, evs[i]);
            json_decref(evs[i]);
        }
        /* After the events: a reopen among them starts the count over, and the bad lines of
         * the log read again are most of those this pass found. */
        d->m.nbad += bad;
        if (bad) d->m.changed = 1;
    }
    return more;
}

/* Put back the character set the process had before the dashboard. */
static void ctype_restore(dash *d) {
    if (d->old_ctype) setlocale(LC_CTYPE, d->old_ctype);
    free(d->old_ctype);
    d->old_ctype = NULL;
}

/* The terminal in curses mode, cleared once, with the character set from the environment
 * (LC_CTYPE only: numbers keep their '.'). A terminal that cannot show a dashboard is an error,
 * with the locale put back. */
static ft_status screen_open(dash *d, ft_err *err) {
    char *old_ctype = setlocale(LC_CTYPE, NULL);
    d->old_ctype = old_ctype ? strdup(old_ctype) : NULL;
    setlocale(LC_CTYPE, "");
    int utf8 = ft_tui_codeset_is_utf8(nl_langinfo(CODESET));

    struct termios before;
    const int have_tty = tcgetattr(fileno(stdout), &before) == 0;
    d->scr = newterm(NULL, stdout, stdin);
    if (!d->scr) {
        const char *term = getenv("TERM");
        ctype_restore(d);
        return ft_err_set(err, FT_EUNSUPPORTED, "cannot drive the terminal (TERM=%s)",
                          term ? term : "unset");
    }
    set_term(d->scr);
    /* A terminal that cannot move the cursor (TERM=dumb) cannot show a dashboard. */
    char *cup = tigetstr("cup");
    if (!cup || cup == (char *)-1) {
        const char *term = getenv("TERM");
        endwin();
        delscreen(d->scr);
        ctype_restore(d);
        return ft_err_set(err, FT_EUNSUPPORTED, "the terminal (TERM=%s) cannot move the cursor",
                          term ? term : "unset");
    }
    /* The terminal as it was, should the process end without endwin(): the full screen left,
     * the cursor shown, the attributes reset, the settings put back. */
    size_t n = 0;
    const char *caps[] = {"rmcup", "cnorm", "sgr0"};
    for (int k = 0; k < 3; k++) {
        const char *s = tigetstr(caps[k]);
        if (s && s != (char *)-1 && n + strlen(s) < sizeof d->restore) {
            memcpy(d->restore + n, s, strlen(s));
            n += strlen(s);
        }
    }
    if (have_tty) ft_epitaph_terminal(fileno(stdout), d->restore, n, &before);
    cbreak();
    noecho();
    nonl();
    intrflush(stdscr, FALSE);
    keypad(stdscr, TRUE);
    curs_set(0);
#ifdef NCURSES_VERSION
    set_escdelay(25);
#endif
    colors_start(d);
    /* UTF-8 text needs a UTF-8 locale and a curses library that draws it as one cell. */
    if (utf8) {
        WINDOW *pad = newpad(1, 8);
        if (pad) {
            waddstr(pad, "\xc2\xb5");
            utf8 = getcurx(pad) == 1;
            delwin(pad);
        } else {
            utf8 = 0;
        }
    }
    d->ascii = !utf8;
    d->g = utf8 ? &glyphs_utf8 : &glyphs_ascii;
    refresh(); /* clears the screen once; stdscr is not drawn on after this */
    return FT_OK;
}

static void screen_close(dash *d) {
    ft_epitaph_terminal(-1, NULL, 0, NULL);
    windows_free(d);
    endwin();
    delscreen(d->scr);
    ctype_restore(d);
}

/* Keys, sources and frames until a quit key or the stop flag. */
static void dash_loop(dash *d, ft_tui_result *res) {
    const ft_tui_opts *o = d->o;
    int frame_ms = o->frame_ms >= 100 ? o->frame_ms : 100;
    double last_frame = -1;
    int dirty = 1, quit = 0, fast = 0;
    while (!quit) {
        if (o->stop && *o->stop) {
            res->by_signal = 1;
            break;
        }
        timeout(fast ? 0 : frame_ms);
        int ch = getch();
        double now = ft_wall_time(), mono = ft_now_s();
        for (int k = 0; ch != ERR && k < 64 && !quit; k++) { /* every key already typed */
            if (ch == KEY_RESIZE)
                dirty = 1;
            else {
                quit = key(d, ch, now);
                dirty = 1;
            }
            if (quit) break;
            timeout(0);
            ch = getch();
        }
        if (quit || (o->stop && *o->stop)) {
            res->by_signal = o->stop && *o->stop && !quit;
            break;
        }
        fast = pull(d);
        if (d->m.changed) {
            dirty = 1;
            d->m.changed = 0;
        }
        view_update(d);
        if ((dirty && mono - last_frame >= 0.1) || mono - last_frame >= 1.0 || last_frame < 0) {
            frame(d, now);
            last_frame = mono;
            dirty = 0;
        }
    }
}

ft_status ft_tui_run(const ft_tui_opts *o, ft_tui_result *res, ft_err *err) {
    memset(res, 0, sizeof *res);
    if (!isatty(STDIN_FILENO) || !isatty(STDOUT_FILENO))
        return ft_err_set(err, FT_EUNSUPPORTED,
                          "the dashboard needs a terminal (stdin and stdout are not both one)");
    dash *d = calloc(1, sizeof *d);
    if (!d) return ft_err_set(err, FT_ENOMEM, "out of memory");
    d->o = o;
    ft_tui_model_init(&d->m);
    d->m.expected_runs = o->expected_runs;
    if (o->follow_path && !(d->follow = ft_tui_follow_new(o->follow_path))) {
        free(d);
        return ft_err_set(err, FT_ENOMEM, "out of memory");
    }
    ft_status s = screen_open(d, err);
    if (s) {
        ft_tui_follow_free(d->follow);
        free(d);
        return s;
    }

    dash_loop(d, res);

    screen_close(d);
    res->source_done = d->m.finished;
    snprintf(res->error, sizeof res->error, "%s", d->m.error);
    ft_tui_follow_free(d->follow);
    ft_tui_model_free(&d->m);
    free(d);
    return FT_OK;
}
