/* test_tui_layout.c: the dashboard's geometry: panes for every terminal size (nothing outside
 * the screen, nothing overlapping, panes dropped when too small), table columns, cells, plot
 * scaling and rendering, sparkline and histogram levels, the locale check. */
#include <math.h>
#include <string.h>

#include "core/format.h"
#include "ft_test.h"
#include "tui/tui.h"

static int inside(ft_rect r, int rows, int cols) {
    if (r.h == 0 || r.w == 0) return r.h == 0 && r.w == 0;
    return r.y >= 0 && r.x >= 0 && r.h > 0 && r.w > 0 && r.y + r.h <= rows && r.x + r.w <= cols;
}

static int overlap(ft_rect a, ft_rect b) {
    if (!a.h || !b.h) return 0;
    return a.y < b.y + b.h && b.y < a.y + a.h && a.x < b.x + b.w && b.x < a.x + a.w;
}

/* One table cell of r (column id, ASCII or UTF-8) is exactly want. */
static void cell_is(const ft_tui_row *r, ft_tui_col_id id, int ascii, const char *want,
                    const char *what) {
    char b[64];
    ft_tui_cell(r, id, ascii, b, sizeof b);
    FT_CHECK(!strcmp(b, want), "%s: '%s', not '%s'", what, b, want);
}

/* One rank-table cell of k in a column width wide is exactly want. */
static void rank_cell_is(const ft_tui_rank *k, ft_tui_rcol_id id, int width, const char *want,
                         const char *what) {
    char b[160];
    ft_tui_rank_cell(k, id, width, b, sizeof b);
    FT_CHECK(!strcmp(b, want), "%s: '%s', not '%s'", what, b, want);
}

/* s shortened to width columns is exactly want. */
static void shorten_is(const char *s, int width, const char *want, const char *what) {
    char b[160];
    ft_tui_shorten(s, width, b, sizeof b);
    FT_CHECK(!strcmp(b, want), "%s: '%s', not '%s'", what, b, want);
}

/* The table's columns at width w: have[id] is the column's width, 0 where it is left out.
 * Returns how many columns there are. */
static int columns_have(int w, int watch, int have[FT_COL_COUNT]) {
    ft_tui_col c[FT_COL_COUNT];
    int n = ft_tui_columns(w, watch, c);
    memset(have, 0, sizeof(int) * FT_COL_COUNT);
    for (int i = 0; i < n; i++)
        have[c[i].id] = c[i].w;
    return n;
}

/* The same for the ranks' table. */
static int rank_columns_have(int w, int have[FT_RCOL_COUNT]) {
    ft_tui_rcol c[FT_RCOL_COUNT];
    int n = ft_tui_rank_columns(w, c);
    memset(have, 0, sizeof(int) * FT_RCOL_COUNT);
    for (int i = 0; i < n; i++)
        have[c[i].id] = c[i].w;
    return n;
}

static void test_layout_everywhere(void) {
    static const int items[] = {0, 1, 6, 40};
    static const int ranks[] = {0, 2, 40};
    int bad = 0;
    for (int rows = 0; rows <= 70; rows++)
        for (int cols = 0; cols <= 230; cols += (cols < 60 ? 1 : 7))
            for (size_t k = 0; k < sizeof items / sizeof items[0]; k++)
                for (size_t nr = 0; nr < sizeof ranks / sizeof ranks[0]; nr++)
                    for (int det = 0; det < 2; det++)
                        for (int help = 0; help < 2; help++) {
                            ft_tui_layout L;
                            ft_tui_layout_compute(rows, cols, items[k], ranks[nr], det, help, &L);
                            ft_rect p[5] = {L.table, L.ranks, L.plot, L.detail, L.status};
                            int ok = 1;
                            for (int i = 0; i < 5; i++)
                                ok &= inside(p[i], rows, cols);
                            ok &= inside(L.help, rows, cols);
                            for (int i = 0; i < 5; i++)
                                for (int j = i + 1; j < 5; j++)
                                    ok &= !overlap(p[i], p[j]);
                            if (rows >= 1 && cols >= 1)
                                ok &=
                                    L.status.y == rows - 1 && L.status.h == 1 && L.status.w == cols;
                            else
                                ok &= L.status.h == 0;
                            ok &= !L.plot.h || (L.plot.h >= 5 && L.plot.w >= 30);
                            ok &= !L.help.h || !overlap(L.help, L.status);
                            ok &= det || !L.detail.h;
                            ok &= help || !L.help.h;
                            /* Ranks: only for a distributed run, never a stub, never more lines
                             * than the ranks need, and never at the cost of the detail. */
                            ok &= ranks[nr] || !L.ranks.h;
                            ok &= !L.ranks.h || (L.ranks.h >= 3 && L.ranks.h <= 1 + ranks[nr] &&
                                                 L.ranks.w == cols && L.table.h);
                            ok &= !L.ranks.h || !det || L.detail.h >= 10;
                            /* The body is used: some pane shows whenever there is a line for
                             * it. */
                            if (rows >= 2 && cols >= 1) ok &= L.table.h || L.detail.h;
                            if (!ok && bad++ < 5)
                                FT_CHECK(0,
                                         "%dx%d items %d ranks %d detail %d help %d: table %d,%d "
                                         "%dx%d ranks %d,%d %dx%d plot %d,%d %dx%d detail %d,%d "
                                         "%dx%d",
                                         rows, cols, items[k], ranks[nr], det, help, L.table.y,
                                         L.table.x, L.table.h, L.table.w, L.ranks.y, L.ranks.x,
                                         L.ranks.h, L.ranks.w, L.plot.y, L.plot.x, L.plot.h,
                                         L.plot.w, L.detail.y, L.detail.x, L.detail.h, L.detail.w);
                        }
    FT_CHECK(bad == 0, "%d sizes broke an invariant", bad);
}

static void test_layout_cases(void) {
    ft_tui_layout L;
    ft_tui_layout_compute(24, 80, 6, 0, 0, 0, &L);
    FT_CHECK(L.table.y == 0 && L.table.h == 7, "80x24: table fits its 6 rows: %d", L.table.h);
    FT_CHECK(L.plot.y == 7 && L.plot.h == 16 && L.plot.w == 80, "80x24: the plot below");
    FT_CHECK(!L.detail.h, "detail closed");
    ft_tui_layout_compute(24, 80, 6, 0, 1, 0, &L);
    FT_CHECK(L.detail.h > 0 && !L.plot.h && L.detail.w == 80, "80x24: detail in the plot's place");
    ft_tui_layout_compute(40, 120, 6, 0, 1, 0, &L);
    FT_CHECK(L.plot.h > 0 && L.detail.h > 0 && L.plot.y == L.detail.y &&
                 L.plot.x + L.plot.w == L.detail.x,
             "120x40: plot and detail side by side");
    ft_tui_layout_compute(24, 80, 60, 0, 0, 0, &L);
    FT_CHECK(L.table.h == 11 && L.plot.h == 12, "many rows: the table takes half and scrolls");
    ft_tui_layout_compute(10, 40, 6, 0, 0, 0, &L);
    FT_CHECK(L.table.h == 4 && L.plot.h == 5, "40x10: table and a small plot (%d, %d)", L.table.h,
             L.plot.h);
    ft_tui_layout_compute(10, 40, 6, 0, 1, 0, &L);
    FT_CHECK(L.table.h == 3 && L.detail.h == 6, "40x10 with detail (%d, %d)", L.table.h,
             L.detail.h);
    ft_tui_layout_compute(6, 25, 6, 0, 0, 0, &L);
    FT_CHECK(L.table.h == 5 && !L.plot.h, "tiny: the table only");
    ft_tui_layout_compute(5, 40, 6, 0, 1, 0, &L);
    FT_CHECK(!L.table.h && L.detail.h == 4, "too small for both: the detail alone");
    ft_tui_layout_compute(1, 10, 6, 0, 1, 1, &L);
    FT_CHECK(L.status.h == 1 && !L.table.h && !L.detail.h && !L.help.h, "one line: status only");
    ft_tui_layout_compute(24, 80, 6, 0, 0, 1, &L);
    FT_CHECK(L.help.h == 18 && L.help.w == 60 && L.help.y == 2 && L.help.x == 10, "help centered");

    /* A distributed run: the ranks between the table and the plot. */
    ft_tui_layout_compute(24, 80, 1, 3, 0, 0, &L);
    FT_CHECK(L.table.h == 3 && L.ranks.y == 3 && L.ranks.h == 4 && L.ranks.w == 80 &&
                 L.plot.y == 7 && L.plot.h == 16,
             "80x24, 3 ranks: table %d, ranks %d at %d, plot %d at %d", L.table.h, L.ranks.h,
             L.ranks.y, L.plot.h, L.plot.y);
    ft_tui_layout_compute(24, 80, 1, 200, 0, 0, &L);
    FT_CHECK(L.ranks.h == 10 && L.plot.h >= 5, "many ranks: at most half below the table (%d)",
             L.ranks.h);
    ft_tui_layout_compute(10, 40, 6, 3, 0, 0, &L);
    FT_CHECK(!L.ranks.h && L.plot.h == 5, "40x10: the ranks go before the plot does");
    ft_tui_layout_compute(24, 29, 1, 3, 0, 0, &L);
    FT_CHECK(!L.ranks.h, "too narrow for the ranks");
    ft_tui_layout_compute(40, 120, 1, 3, 1, 0, &L);
    FT_CHECK(L.ranks.h == 4 && L.plot.y == L.ranks.y + 4 && L.detail.y == L.plot.y &&
                 L.detail.h == 32,
             "120x40 with the detail: ranks above plot and detail");
    ft_tui_layout_compute(24, 80, 1, 3, 1, 0, &L);
    FT_CHECK(L.ranks.h == 4 && L.detail.y == L.ranks.y + L.ranks.h && L.detail.h >= 10,
             "80x24 with the detail: ranks, then the detail (%d)", L.detail.h);
    ft_tui_layout_compute(24, 80, 1, 0, 0, 0, &L);
    FT_CHECK(!L.ranks.h && L.plot.y == 3 && L.plot.h == 20, "no ranks: as before");
}

static void test_columns(void) {
    int bad = 0;
    for (int watch = 0; watch < 2; watch++)
        for (int w = 0; w <= 250; w++) {
            ft_tui_col c[FT_COL_COUNT];
            int n = ft_tui_columns(w, watch, c);
            int ok = n >= 0 && n <= FT_COL_COUNT;
            for (int i = 0; i < n; i++) {
                ok &= c[i].x >= FT_TUI_MARK && c[i].w >= 1 && c[i].x + c[i].w <= w;
                if (i) ok &= c[i].x >= c[i - 1].x + c[i - 1].w + 1; /* a space between */
            }
            if (w > FT_TUI_MARK)
                ok &= n >= 1 && c[0].id == FT_COL_OP;
            else
                ok &= n == 0;
            if (!ok && bad++ < 3) FT_CHECK(0, "width %d watch %d: columns out of place", w, watch);
        }
    FT_CHECK(!bad, "%d widths broke an invariant", bad);
    int have[FT_COL_COUNT];
    columns_have(80, 0, have);
    FT_CHECK(have[FT_COL_OP] >= 16 && have[FT_COL_BEST] && have[FT_COL_DONE] && have[FT_COL_LAST] &&
                 have[FT_COL_DEFAULT] && have[FT_COL_SPEEDUP] && have[FT_COL_REJECTED],
             "80 columns: every figure of a tune row");
    columns_have(40, 0, have);
    FT_CHECK(have[FT_COL_OP] && have[FT_COL_BEST] && have[FT_COL_DONE],
             "40 columns: op, best, done");
    columns_have(80, 1, have);
    FT_CHECK(have[FT_COL_P50] && have[FT_COL_P95] && have[FT_COL_MAX] && have[FT_COL_JITTER],
             "80 columns: the watch figures");
    FT_CHECK(!strcmp(ft_tui_col_title(FT_COL_P95), "p95"), "titles");
    /* A wide terminal gives the shape what the other columns leave: attention.decode's shape
     * ("R=16 B=16 Hq=32 Hkv=8 dh=128 L=4096 ...") is not cut at 26 columns at 200. */
    for (int watch = 0; watch < 2; watch++) {
        columns_have(200, watch, have);
        FT_CHECK(have[FT_COL_SHAPE] >= 60 && have[FT_COL_TREND] >= 24 && have[FT_COL_BACKEND],
                 "200 columns (watch %d): shape %d wide, trend %d", watch, have[FT_COL_SHAPE],
                 have[FT_COL_TREND]);
    }
    columns_have(120, 0, have);
    FT_CHECK(have[FT_COL_TREND] >= 8 && have[FT_COL_SHAPE] >= 26,
             "120 columns: the trend stays, the shape at its natural width");
}

/* The detail pane's top configs line up by display columns: "µs" is one column in two bytes,
 * so a width counted in bytes ran the mark into the median ("1 win c43.40 µs"). */
static void test_top_line(void) {
    ft_tui_cand c;
    memset(&c, 0, sizeof c);
    snprintf(c.cfg, sizeof c.cfg, "k=2 rows=16");
    c.median = 43.4e-6;
    c.iqr = 1.811e-6;
    c.confirmed = 1;
    char line[256];
    ft_tui_top_line(&c, 1, "win", 0, line, sizeof line);
    FT_CHECK(!strcmp(line, "1 win c 43.40 \xc2\xb5s  1.811 \xc2\xb5s  k=2 rows=16"), "utf-8: '%s'",
             line);
    ft_tui_top_line(&c, 1, "win", 1, line, sizeof line);
    FT_CHECK(!strcmp(line, "1 win c 43.40 us  1.811 us  k=2 rows=16"), "ascii: '%s'", line);
    c.confirmed = 0;
    c.median = 6.72e-3;
    ft_tui_top_line(&c, 2, "", 0, line, sizeof line);
    FT_CHECK(!strcmp(line, "2       6.720 ms  1.811 \xc2\xb5s  k=2 rows=16"), "no mark: '%s'",
             line);
}

static void test_cells(void) {
    ft_tui_row r;
    memset(&r, 0, sizeof r);
    r.valid = 60;
    r.resumed = 10;
    r.done = r.measured = 5;
    r.last = 12.5e-6;
    r.best = 1.5e-3;
    r.def = NAN;
    r.speedup = 2;
    char b[64];
    cell_is(&r, FT_COL_DONE, 1, "15/60", "done counts resumed ones");
    r.budget = 20;
    cell_is(&r, FT_COL_DONE, 1, "15/20", "a budget caps the total, resumed ones counted in it");
    r.budget = 8;
    cell_is(&r, FT_COL_DONE, 1, "15/15", "never below what was resumed and measured");
    r.budget = 20;
    /* Rejected candidates are counted apart, never past the budget (it was "56/24"). */
    ft_tui_row q = {.valid = 100,
                    .budget = 24,
                    .measured = 24,
                    .rejected = 32,
                    .done = 56,
                    .resumed = 3,
                    .resumed_rejected = 3};
    cell_is(&q, FT_COL_DONE, 1, "24/24", "measured out of the budget");
    cell_is(&q, FT_COL_REJECTED, 1, "35", "rejected apart, resumed ones too");
    q.budget = 0;
    cell_is(&q, FT_COL_DONE, 1, "24/65", "no budget: every valid one not rejected");
    cell_is(&r, FT_COL_LAST, 1, "12.50 us", "ASCII micro");
    cell_is(&r, FT_COL_LAST, 0, "12.50 \xc2\xb5s", "UTF-8 micro");
    cell_is(&r, FT_COL_BEST, 1, "1.500 ms", "best");
    cell_is(&r, FT_COL_DEFAULT, 1, "-", "unknown");
    cell_is(&r, FT_COL_SPEEDUP, 1, "2.00x", "speedup");
    r.speedup = 1495;
    ft_tui_cell(&r, FT_COL_SPEEDUP, 1, b, sizeof b);
    FT_CHECK(!strcmp(b, "1495x") && strlen(b) <= 7, "large speedups fit: %s", b);
    r.last_rejected = 1;
    cell_is(&r, FT_COL_LAST, 1, "rejected", "the last candidate rejected");
    r.calls = 1234567;
    cell_is(&r, FT_COL_CALLS, 1, "1235k", "calls");
    /* Every time a cell can show fits the 8 columns it gets. */
    for (double t = 1e-9; t < 2e3; t *= 1.37) {
        ft_fmt_time(t, 1, b, sizeof b);
        FT_CHECK(strlen(b) <= 8, "%g s is '%s'", t, b);
    }
}

static void test_rank_columns_and_cells(void) {
    int bad = 0;
    for (int w = 0; w <= 250; w++) {
        ft_tui_rcol c[FT_RCOL_COUNT];
        int n = ft_tui_rank_columns(w, c);
        int ok = n >= 0 && n <= FT_RCOL_COUNT;
        for (int i = 0; i < n; i++) {
            ok &= c[i].x >= FT_TUI_MARK && c[i].w >= 1 && c[i].x + c[i].w <= w;
            if (i) ok &= c[i].x >= c[i - 1].x + c[i - 1].w + 1;
        }
        ok &= w <= FT_TUI_MARK ? n == 0 : n >= 1 && c[0].id == FT_RCOL_RANK;
        if (!ok && bad++ < 3) FT_CHECK(0, "width %d: rank columns out of place", w);
    }
    FT_CHECK(!bad, "%d widths broke an invariant", bad);
    int have[FT_RCOL_COUNT];
    rank_columns_have(30, have);
    FT_CHECK(have[FT_RCOL_RANK] && have[FT_RCOL_MEASURED] && have[FT_RCOL_RATE] &&
                 have[FT_RCOL_HOST] && !have[FT_RCOL_DEVICE],
             "30 columns: rank, host, measured, rate");
    int n = rank_columns_have(80, have);
    FT_CHECK(n == FT_RCOL_COUNT && have[FT_RCOL_DEVICE] == 80 - 2 - 4 - 16 - 8 - 4 - 8 - 5,
             "80 columns: every column, the device in the rest (%d)", have[FT_RCOL_DEVICE]);

    char b[160];
    const char *dev = "cpu: Intel(R) Xeon(R) Processor x 2 (SkylakeX)";
    shorten_is(dev, 60, dev, "fits: whole");
    shorten_is(dev, 40, "cpu: Intel(R) Xeon(R) Processor x 2", "the name without details");
    shorten_is(dev, 12, "cpu: Intel..", "cut, and said so");
    shorten_is("cuda: NVIDIA H200 (sm_90, 132 SMs)", 17, "cuda: NVIDIA H200",
               "a name without details");
    shorten_is("abc", 2, "ab", "tiny width");
    shorten_is("\xc2\xb5\xc2\xb5\xc2\xb5\xc2\xb5", 3, "\xc2\xb5..", "UTF-8 cut at a character");
    for (int w = 0; w < 50; w++) {
        ft_tui_shorten(dev, w, b, sizeof b);
        FT_CHECK((int)strlen(b) <= w, "width %d: '%s'", w, b);
    }

    ft_tui_rank k = {
        .rank = 2, .host = "node7", .measured = 30, .rejected = 1, .t_first = 100, .t_last = 160};
    snprintf(k.device, sizeof k.device, "%s", dev);
    /* Every column at a width it may get. */
    static const struct {
        ft_tui_rcol_id id;
        int width;
        const char *want, *what;
    } cells[] = {
        {FT_RCOL_RANK, 4, "2", "rank"},
        {FT_RCOL_HOST, 16, "node7", "host"},
        {FT_RCOL_DEVICE, 20, "cpu: Intel(R) Xeon..", "the device fits its column"},
        {FT_RCOL_MEASURED, 8, "30", "measured"},
        {FT_RCOL_REJECTED, 4, "1", "rejected"},
        {FT_RCOL_RATE, 8, "30.0", "30 in a minute"},
    };
    for (size_t i = 0; i < sizeof cells / sizeof cells[0]; i++)
        rank_cell_is(&k, cells[i].id, cells[i].width, cells[i].want, cells[i].what);
    k.t_last = 100.5;
    rank_cell_is(&k, FT_RCOL_RATE, 8, "3600", "fast");
    k.t_last = 100;
    rank_cell_is(&k, FT_RCOL_RATE, 8, "-", "no span, no rate");
    FT_CHECK(!strcmp(ft_tui_rcol_title(FT_RCOL_RATE), "cand/min"), "titles");
}

static void test_trend(void) {
    ft_tui_row r;
    memset(&r, 0, sizeof r);
    ft_tui_ring_init(&r.history, 64);
    char b[256];
    ft_tui_trend(&r, 10, 1, b, sizeof b);
    FT_CHECK(!strcmp(b, ""), "no history, no trend");
    for (int i = 0; i < 20; i++) {
        ft_tui_point p = {i, i % 5 == 4 ? NAN : 1e-6 * (1 + i), 0, 0};
        ft_tui_ring_push(&r.history, p);
    }
    ft_tui_trend(&r, 10, 1, b, sizeof b);
    FT_CHECK(strlen(b) == 10, "width in ASCII: '%s'", b);
    FT_CHECK(strspn(b, "_.:-=+*#") == 10, "ASCII levels only: '%s'", b);
    FT_CHECK(b[9] == '#', "the latest, the slowest, is the top level: '%s'", b);
    ft_tui_trend(&r, 10, 0, b, sizeof b);
    FT_CHECK(strlen(b) == 30, "UTF-8 blocks of 3 bytes: %zu", strlen(b));
    ft_tui_trend(&r, 10, 0, b, 8);
    FT_CHECK(strlen(b) == 6, "whole glyphs only when the buffer is short: %zu", strlen(b));
    ft_tui_ring_free(&r.history);
}

static void test_plot_scale(void) {
    double none[] = {NAN, -1, 0};
    ft_plot_scale s = ft_plot_scale_make(none, 3);
    FT_CHECK(s.lo == 0 && s.hi == 1 && !s.log, "no values: [0, 1]");
    double one[] = {2e-6};
    s = ft_plot_scale_make(one, 1);
    FT_CHECK(s.lo < 2e-6 && s.hi > 2e-6 && !s.log, "one value: a range around it");
    double lin[] = {10, 20, NAN};
    s = ft_plot_scale_make(lin, 3);
    FT_CHECK(!s.log && s.lo < 10 && s.lo > 9 && s.hi > 20 && s.hi < 21, "a 5%% margin");
    double wide[] = {1e-6, 1e-3};
    s = ft_plot_scale_make(wide, 2);
    FT_CHECK(s.log && s.lo < 1e-6 && s.hi > 1e-3, "log beyond 20x");
    for (int h = 1; h <= 30; h++) {
        FT_CHECK(ft_plot_row(&s, 1e-6, h) == h - 1, "min at the bottom (h %d)", h);
        FT_CHECK(ft_plot_row(&s, 1e-3, h) == 0, "max at the top (h %d)", h);
        FT_CHECK(ft_plot_row(&s, 1, h) == 0 && ft_plot_row(&s, 1e-12, h) == h - 1, "clamped");
        FT_CHECK(ft_plot_row(&s, NAN, h) == -1, "NAN has no row");
        int prev = h;
        for (double v = 1e-6; v <= 1e-3; v *= 1.5) {
            int row = ft_plot_row(&s, v, h);
            FT_CHECK(row <= prev && row >= 0 && row < h, "monotonic");
            prev = row;
        }
        for (int row = 0; row < h; row++)
            FT_CHECK(ft_plot_row(&s, ft_plot_value(&s, row, h), h) == row,
                     "a row's value is in it");
        int t[3], nt = ft_plot_ticks(h, t);
        FT_CHECK(nt >= 1 && t[0] == 0 && t[nt - 1] == (h >= 2 ? h - 1 : 0), "ticks at the ends");
        for (int i = 1; i < nt; i++)
            FT_CHECK(t[i] > t[i - 1], "ticks distinct");
    }
    FT_CHECK(ft_plot_row(&s, 1, 0) == -1, "no height");
    FT_CHECK(ft_plot_col(0, 0, 10, 11) == 0 && ft_plot_col(10, 0, 10, 11) == 10 &&
                 ft_plot_col(5, 0, 10, 11) == 5,
             "time to column");
    FT_CHECK(ft_plot_col(99, 0, 10, 11) == 10 && ft_plot_col(-5, 0, 10, 11) == 0, "clamped");
    FT_CHECK(ft_plot_col(3, 5, 5, 8) == 7, "an empty span: the right edge");
}

static void test_plot_render(void) {
    ft_tui_ring r;
    ft_tui_ring_init(&r, 16);
    unsigned char g[20 * 6];
    ft_plot_render(&r, 0, 20, 6, g);
    int any = 0;
    for (size_t i = 0; i < sizeof g; i++)
        any |= g[i];
    FT_CHECK(!any, "empty ring, empty plot");
    ft_tui_point pts[] = {{0, 8e-6, 8e-6, 0},
                          {1, 4e-6, 4e-6, 0},
                          {2, 9e-6, 4e-6, FT_PT_SCREENED},
                          {3, NAN, 4e-6, FT_PT_REJECTED},
                          {4, 2e-6, 2e-6, 0}};
    for (int i = 0; i < 5; i++)
        ft_tui_ring_push(&r, pts[i]);
    ft_plot_scale s = ft_plot_render(&r, 4, 20, 6, g);
    FT_CHECK(!s.log && s.lo < 2e-6 && s.hi > 9e-6, "scale over points and line");
    int points = 0, screened = 0, rejected = 0;
    for (int c = 0; c < 20; c++) {
        int col_has = 0;
        for (int y = 0; y < 6; y++) {
            unsigned char v = g[y * 20 + c];
            FT_CHECK(v <= FT_GLYPH_REJECTED, "a glyph code");
            points += v == FT_GLYPH_POINT;
            screened += v == FT_GLYPH_SCREENED;
            rejected += v == FT_GLYPH_REJECTED;
            col_has |= v != FT_GLYPH_NONE;
        }
        FT_CHECK(col_has, "the best-so-far line runs through column %d", c);
    }
    FT_CHECK(points == 3 && screened == 1 && rejected == 1, "glyphs: %d %d %d", points, screened,
             rejected);
    FT_CHECK(g[5 * 20 + ft_plot_col(3, 0, 4, 20)] == FT_GLYPH_REJECTED,
             "rejected on the bottom row");
    FT_CHECK(g[0 * 20 + ft_plot_col(2, 0, 4, 20)] == FT_GLYPH_SCREENED, "the slowest at the top");
    ft_tui_ring_free(&r);
}

/* What the scheduler spoiled: the status bar's warning, the table's mark, the detail's lines,
 * the last cell and the plot's glyph. */
static void test_busy(void) {
    char b[192];
    ft_tui_contention c = {37, 100, 4, 0};
    FT_CHECK(ft_tui_busy_text(&c, b, sizeof b) &&
                 !strcmp(b, "BUSY: 37% of samples discarded, 4 not measured cleanly"),
             "busy: %s", b);
    c = (ft_tui_contention){6, 100, 0, 2};
    FT_CHECK(ft_tui_busy_text(&c, b, sizeof b) &&
                 !strcmp(b, "BUSY: 6% of samples discarded, 2 stopped"),
             "a twentieth of the samples is busy without an unclean candidate: %s", b);
    c = (ft_tui_contention){0, 0, 1, 0};
    FT_CHECK(ft_tui_busy_text(&c, b, sizeof b) && !strcmp(b, "BUSY: 1 not measured cleanly"),
             "an unclean candidate is busy: %s", b);
    c = (ft_tui_contention){4, 1000, 0, 0};
    FT_CHECK(!ft_tui_busy_text(&c, b, sizeof b) && !strcmp(b, "0.4% of samples discarded"),
             "a few samples: said, not busy: %s", b);
    c = (ft_tui_contention){0, 5000, 0, 1};
    FT_CHECK(!ft_tui_busy_text(&c, b, sizeof b) && !strcmp(b, "1 stopped"),
             "the watchdog alone is no busy machine: %s", b);
    c = (ft_tui_contention){0, 5000, 0, 0};
    FT_CHECK(!ft_tui_busy_text(&c, b, sizeof b) && !b[0], "a clean run: nothing: '%s'", b);
    FT_CHECK(!ft_tui_busy_text(&c, b, 0), "no room: nothing written");

    ft_tui_row r;
    memset(&r, 0, sizeof r);
    FT_CHECK(ft_tui_row_mark(&r) == ' ' && ft_tui_row_mark(NULL) == ' ', "a clean row: no mark");
    r.stopped = 2;
    FT_CHECK(ft_tui_row_mark(&r) == ' ', "stopped candidates alone: no mark");
    r.unclean = 1;
    FT_CHECK(ft_tui_row_mark(&r) == '!', "a row with an unclean candidate is marked");
    r.last = 16e-3;
    r.last_spoiled = 1;
    cell_is(&r, FT_COL_LAST, 1, "unclean", "the last candidate unclean");
    r.last_spoiled = 2;
    cell_is(&r, FT_COL_LAST, 1, "stopped", "the last candidate stopped");

    ft_tui_cand k;
    memset(&k, 0, sizeof k);
    snprintf(k.cfg, sizeof k.cfg, "par=rows chunk=32");
    k.unclean = 1;
    k.median = 16.2e-3;
    ft_tui_spoiled_line(&k, 1, b, sizeof b);
    FT_CHECK(!strcmp(b, "not clean  16.20 ms  par=rows chunk=32"), "unclean: '%s'", b);
    k.median = 2e-6;
    ft_tui_spoiled_line(&k, 0, b, sizeof b);
    FT_CHECK(!strcmp(b, "not clean  2.000 \xc2\xb5s  par=rows chunk=32"),
             "aligned in columns, not bytes: '%s'", b);
    k.unclean = 0;
    k.stopped = 1;
    k.median = NAN;
    k.stopped_after_s = 1.0;
    ft_tui_spoiled_line(&k, 1, b, sizeof b);
    FT_CHECK(!strcmp(b, "stopped    >1.000 s  par=rows chunk=32"), "stopped: '%s'", b);
    k.stopped_after_s = NAN;
    ft_tui_spoiled_line(&k, 1, b, sizeof b);
    FT_CHECK(!strcmp(b, "stopped           -  par=rows chunk=32"), "stopped, time unknown: '%s'",
             b);

    ft_tui_ring ring;
    ft_tui_ring_init(&ring, 4);
    ft_tui_point pts[] = {{0, 4e-6, 4e-6, 0}, {1, 9e-6, 4e-6, FT_PT_UNCLEAN}};
    for (int i = 0; i < 2; i++)
        ft_tui_ring_push(&ring, pts[i]);
    unsigned char g[20 * 6];
    ft_plot_render(&ring, 1, 20, 6, g);
    FT_CHECK(g[0 * 20 + 19] == FT_GLYPH_UNCLEAN, "an unclean trial: its own glyph, at its bound");
    ft_tui_ring_free(&ring);
}

static void test_levels(void) {
    FT_CHECK(ft_spark_level(0, 0, 1, 8) == 0 && ft_spark_level(1, 0, 1, 8) == 7, "ends");
    FT_CHECK(ft_spark_level(0.5, 0, 1, 8) == 4, "middle");
    FT_CHECK(ft_spark_level(5, 5, 5, 8) == 4, "flat: the middle level");
    FT_CHECK(ft_spark_level(NAN, 0, 1, 8) == -1, "NAN");
    FT_CHECK(ft_spark_level(-3, 0, 1, 8) == 0 && ft_spark_level(3, 0, 1, 8) == 7, "clamped");
    int c[FT_TUI_BINS] = {0, 1, 100, 50, 0}, e[FT_TUI_BINS];
    ft_hist_levels(c, FT_TUI_BINS, 3, e);
    FT_CHECK(e[2] == 24 && e[3] == 12, "the fullest bin fills the height: %d %d", e[2], e[3]);
    FT_CHECK(e[1] == 1 && e[0] == 0 && e[4] == 0, "a non-empty bin shows; empty ones do not");
    int z[FT_TUI_BINS] = {0};
    ft_hist_levels(z, FT_TUI_BINS, 3, e);
    for (int i = 0; i < FT_TUI_BINS; i++)
        FT_CHECK(e[i] == 0, "all empty");
}

static void test_codeset(void) {
    FT_CHECK(ft_tui_codeset_is_utf8("UTF-8") && ft_tui_codeset_is_utf8("utf8"), "UTF-8");
    FT_CHECK(!ft_tui_codeset_is_utf8("ANSI_X3.4-1968") && !ft_tui_codeset_is_utf8("ISO-8859-1") &&
                 !ft_tui_codeset_is_utf8(NULL),
             "others");
}

int main(void) {
    FT_RUN(test_layout_everywhere);
    FT_RUN(test_layout_cases);
    FT_RUN(test_columns);
    FT_RUN(test_top_line);
    FT_RUN(test_cells);
    FT_RUN(test_rank_columns_and_cells);
    FT_RUN(test_trend);
    FT_RUN(test_plot_scale);
    FT_RUN(test_plot_render);
    FT_RUN(test_busy);
    FT_RUN(test_levels);
    FT_RUN(test_codeset);
    return ft_test_finish();
}
