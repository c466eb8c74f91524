/* layout.c: the dashboard's geometry, as pure functions: panes from the terminal size, table
 * columns from the width, cells' text, plot scaling and glyph levels. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "core/format.h"
#include "tui/tui.h"

/* ---- panes ------------------------------------------------------------------------------- */

static int clampi(int v, int lo, int hi) { return v < lo ? lo : v > hi ? hi : v; }

static ft_rect rect(int y, int x, int h, int w) {
    ft_rect r = {y, x, h, w};
    if (h <= 0 || w <= 0) r.h = r.w = 0;
    return r;
}

enum {
    PLOT_MIN_H = 5,   /* title, 3 lines of plot, the time axis */
    PLOT_MIN_W = 30,  /* tick labels and 20 columns            */
    DETAIL_MIN_H = 4, /* title and a few lines                 */
    DETAIL_ROOM = 10, /* what the detail keeps beside the ranks */
    RANKS_MIN_H = 3,  /* header and two ranks                   */
    RANKS_MIN_W = 30, /* rank, measured, rate and a short host  */
    WIDE = 100,       /* plot and detail side by side           */
    TABLE_MIN_H = 3,  /* header and two rows                    */
};

/* The ranks pane's height out of the `lower` lines below the table, leaving `keep` of them to
 * the panes below it and taking at most half: a header and a line per rank; 0 (no pane) when
 * that leaves it less than RANKS_MIN_H. */
static int ranks_height(int nranks, int lower, int keep, int cols) {
    if (nranks <= 0 || cols < RANKS_MIN_W) return 0;
    int rh = 1 + nranks;
    if (rh > lower - keep) rh = lower - keep;
    if (rh > lower / 2) rh = lower / 2;
    return rh >= RANKS_MIN_H ? rh : 0;
}

void ft_tui_layout_compute(int rows, int cols, int nitems, int nranks, int detail_open,
                           int help_open, ft_tui_layout *L) {
    memset(L, 0, sizeof *L);
    if (rows < 1 || cols < 1) return;
    L->status = rect(rows - 1, 0, 1, cols);
    int body = rows - 1;
    if (body < 1) return;
    int need = 1 + (nitems > 1 ? nitems : 1); /* header + rows ("waiting" when none) */
    int th = body;
    if (detail_open && body >= DETAIL_MIN_H) {
        if (cols >= WIDE && body >= 12) {
            th = clampi(need, TABLE_MIN_H, body * 2 / 5);
            int rh = ranks_height(nranks, body - th, DETAIL_ROOM, cols);
            L->ranks = rect(th, 0, rh, cols);
            int y = th + rh, lower = body - y, pw = cols * 11 / 20;
            if (pw >= PLOT_MIN_W && lower >= PLOT_MIN_H) {
                L->plot = rect(y, 0, lower, pw);
                L->detail = rect(y, pw, lower, cols - pw);
            } else {
                L->detail = rect(y, 0, lower, cols);
            }
        } else if (body >= 8) {
            th = clampi(need, TABLE_MIN_H, body / 3);
            int rh = ranks_height(nranks, body - th, DETAIL_ROOM, cols);
            L->ranks = rect(th, 0, rh, cols);
            L->detail = rect(th + rh, 0, body - th - rh, cols);
        } else {
            th = 0; /* too small for both: the detail replaces the table */
            L->detail = rect(0, 0, body, cols);
        }
    } else if (body >= TABLE_MIN_H + PLOT_MIN_H + 1 && cols >= PLOT_MIN_W) {
        /* The table takes what it needs, up to half the screen (it scrolls beyond). */
        int cap = body / 2 > TABLE_MIN_H ? body / 2 : TABLE_MIN_H;
        if (cap > body - PLOT_MIN_H) cap = body - PLOT_MIN_H;
        th = clampi(need, TABLE_MIN_H, cap);
        int rh = ranks_height(nranks, body - th, PLOT_MIN_H, cols);
        L->ranks = rect(th, 0, rh, cols);
        L->plot = rect(th + rh, 0, body - th - rh, cols);
    }
    L->table = rect(0, 0, th, cols);
    if (help_open) {
        int hh = body < 18 ? body : 18, hw = cols < 60 ? cols : 60;
        L->help = rect((body - hh) / 2, (cols - hw) / 2, hh, hw);
    }
}

/* ---- table columns ----------------------------------------------------------------------- */

typedef struct {
    const char *title;
    int min, natural, right;
    int wide; /* what it grows to last, when every column has its natural width (0: natural) */
} col_spec;

/* A shape names every size of the op (`attention.decode`: R B Hq Hkv dh L, ...): on a wide
 * terminal it gets what the other columns leave, up to the model's whole shape text. */
static const col_spec specs[FT_COL_COUNT] = {
    [FT_COL_OP] = {"op", 16, 17, 0, 0},         [FT_COL_SHAPE] = {"shape", 10, 26, 0, 95},
    [FT_COL_BACKEND] = {"backend", 7, 7, 0, 0}, [FT_COL_DONE] = {"done", 7, 7, 1, 0},
    [FT_COL_LAST] = {"last", 8, 8, 1, 0},       [FT_COL_BEST] = {"best", 8, 8, 1, 0},
    [FT_COL_DEFAULT] = {"default", 8, 8, 1, 0}, [FT_COL_SPEEDUP] = {"speedup", 7, 7, 1, 0},
    [FT_COL_REJECTED] = {"rej", 3, 3, 1, 0},    [FT_COL_CALLS] = {"calls", 6, 6, 1, 0},
    [FT_COL_P50] = {"p50", 8, 8, 1, 0},         [FT_COL_P95] = {"p95", 8, 8, 1, 0},
    [FT_COL_MAX] = {"max", 8, 8, 1, 0},         [FT_COL_JITTER] = {"jitter", 8, 8, 1, 0},
    [FT_COL_VSPROF] = {"vs prof", 7, 7, 1, 0},  [FT_COL_TREND] = {"trend", 8, 24, 0, 0},
};

/* Most important first: a column at its least width, or (grow 1) a column already in taken to
 * its natural width, or (grow 2) to its wide one. Then the order they are shown in. */
typedef struct {
    int id; /* an ft_tui_col_id or an ft_tui_rcol_id */
    int grow;
} col_step;

static const col_step tune_prio[] = {
    {FT_COL_OP, 0},    {FT_COL_BEST, 0},    {FT_COL_DONE, 0},     {FT_COL_SPEEDUP, 0},
    {FT_COL_LAST, 0},  {FT_COL_DEFAULT, 0}, {FT_COL_REJECTED, 0}, {FT_COL_OP, 1},
    {FT_COL_SHAPE, 0}, {FT_COL_SHAPE, 1},   {FT_COL_TREND, 0},    {FT_COL_BACKEND, 0},
    {FT_COL_TREND, 1}, {FT_COL_SHAPE, 2},
};
static const col_step watch_prio[] = {
    {FT_COL_OP, 0},     {FT_COL_P50, 0},   {FT_COL_P95, 0},    {FT_COL_MAX, 0},
    {FT_COL_JITTER, 0}, {FT_COL_CALLS, 0}, {FT_COL_VSPROF, 0}, {FT_COL_OP, 1},
    {FT_COL_SHAPE, 0},  {FT_COL_SHAPE, 1}, {FT_COL_TREND, 0},  {FT_COL_BACKEND, 0},
    {FT_COL_TREND, 1},  {FT_COL_SHAPE, 2},
};
enum { NSTEPS = sizeof tune_prio / sizeof tune_prio[0] };
static const int tune_show[] = {FT_COL_OP,       FT_COL_SHAPE, FT_COL_BACKEND, FT_COL_DONE,
                                FT_COL_LAST,     FT_COL_BEST,  FT_COL_DEFAULT, FT_COL_SPEEDUP,
                                FT_COL_REJECTED, FT_COL_TREND};
static const int watch_show[] = {FT_COL_OP,     FT_COL_SHAPE, FT_COL_BACKEND, FT_COL_CALLS,
                                 FT_COL_P50,    FT_COL_P95,   FT_COL_MAX,     FT_COL_JITTER,
                                 FT_COL_VSPROF, FT_COL_TREND};
enum { NSHOW = sizeof tune_show / sizeof tune_show[0] };

const char *ft_tui_col_title(ft_tui_col_id id) {
    return id >= 0 && id < FT_COL_COUNT ? specs[id].title : "";
}

/* Widths w[id] of the columns that fit `avail`, taken in the order of prio (the first, cut to
 * what there is when even its least width does not fit). */
static void fit_columns(int avail, const col_spec *sp, const col_step *prio, int nprio, int *w) {
    int used = 0;
    for (int i = 0; i < nprio; i++) {
        int id = prio[i].id;
        if (prio[i].grow) {
            if (!w[id]) continue;
            int to = prio[i].grow == 2 && sp[id].wide ? sp[id].wide : sp[id].natural;
            int more = to - w[id];
            if (more > avail - used) more = avail - used;
            if (more > 0) {
                w[id] += more;
                used += more;
            }
            continue;
        }
        int sep = used ? 1 : 0;
        if (i == 0 && avail < sp[id].min) { /* only the first, cut to what there is */
            w[id] = avail;
            break;
        }
        if (used + sep + sp[id].min > avail) continue;
        w[id] = sp[id].min;
        used += sep + sp[id].min;
    }
}

/* The columns of nonzero width in display order from FT_TUI_MARK, a space apart. */
typedef struct {
    int id, x, w, right;
} placed_col;

static int place_columns(const int *show, int nshow, const int *w, const col_spec *sp,
                         placed_col *out) {
    int n = 0, x = FT_TUI_MARK;
    for (int i = 0; i < nshow; i++) {
        int id = show[i];
        if (!w[id]) continue;
        if (n) x++;
        out[n] = (placed_col){id, x, w[id], sp[id].right};
        x += w[id];
        n++;
    }
    return n;
}

int ft_tui_columns(int width, int watch, ft_tui_col *out) {
    int avail = width - FT_TUI_MARK;
    if (avail < 1) return 0;
    int w[FT_COL_COUNT] = {0};
    fit_columns(avail, specs, watch ? watch_prio : tune_prio, NSTEPS, w);
    placed_col p[FT_COL_COUNT];
    int n = place_columns(watch ? watch_show : tune_show, NSHOW, w, specs, p);
    for (int i = 0; i < n; i++)
        out[i] = (ft_tui_col){(ft_tui_col_id)p[i].id, p[i].x, p[i].w, p[i].right};
    return n;
}

/* ---- the ranks pane's columns -------------------------------------------------------------- */

static const col_spec rspecs[FT_RCOL_COUNT] = {
    [FT_RCOL_RANK] = {"rank", 4, 4, 1, 0},        [FT_RCOL_HOST] = {"host", 5, 16, 0, 0},
    [FT_RCOL_DEVICE] = {"device", 10, 120, 0, 0}, [FT_RCOL_MEASURED] = {"measured", 8, 8, 1, 0},
    [FT_RCOL_REJECTED] = {"rej", 4, 4, 1, 0},     [FT_RCOL_RATE] = {"cand/min", 8, 8, 1, 0},
};
static const col_step rank_prio[] = {
    {FT_RCOL_RANK, 0},     {FT_RCOL_MEASURED, 0}, {FT_RCOL_RATE, 0},   {FT_RCOL_HOST, 0},
    {FT_RCOL_REJECTED, 0}, {FT_RCOL_HOST, 1},     {FT_RCOL_DEVICE, 0}, {FT_RCOL_DEVICE, 1},
};
static const int rank_show[] = {FT_RCOL_RANK,     FT_RCOL_HOST,     FT_RCOL_DEVICE,
                                FT_RCOL_MEASURED, FT_RCOL_REJECTED, FT_RCOL_RATE};

const char *ft_tui_rcol_title(ft_tui_rcol_id id) {
    return id >= 0 && id < FT_RCOL_COUNT ? rspecs[id].title : "";
}

int ft_tui_rank_columns(int width, ft_tui_rcol *out) {
    int avail = width - FT_TUI_MARK;
    if (avail < 1) return 0;
    int w[FT_RCOL_COUNT] = {0};
    fit_columns(avail, rspecs, rank_prio, (int)(sizeof rank_prio / sizeof rank_prio[0]), w);
    placed_col p[FT_RCOL_COUNT];
    int n = place_columns(rank_show, FT_RCOL_COUNT, w, rspecs, p);
    for (int i = 0; i < n; i++)
        out[i] = (ft_tui_rcol){(ft_tui_rcol_id)p[i].id, p[i].x, p[i].w, p[i].right};
    return n;
}

/* ---- cells ------------------------------------------------------------------------------- */

static void count_str(long v, char *buf, size_t n) {
    if (v < 100000)
        snprintf(buf, n, "%ld", v);
    else if (v < 10000000)
        snprintf(buf, n, "%.0fk", v / 1e3);
    else
        snprintf(buf, n, "%.1fM", v / 1e6);
}

/* v and its unit in a narrow column: `digits` decimals below 100, none below max, and beyond
 * ">" with max - 1 (">9999x"); "-" when it is not finite. */
static void bounded_str(double v, int digits, double max, const char *unit, char *buf, size_t n) {
    if (!isfinite(v))
        snprintf(buf, n, "-");
    else if (v < 100)
        snprintf(buf, n, "%.*f%s", digits, v, unit);
    else if (v < max)
        snprintf(buf, n, "%.0f%s", v, unit);
    else
        snprintf(buf, n, ">%.0f%s", max - 1, unit);
}

static void ratio_str(double v, char *buf, size_t n) { bounded_str(v, 2, 1e4, "x", buf, n); }

void ft_tui_cell(const ft_tui_row *r, ft_tui_col_id id, int ascii, char *buf, size_t n) {
    if (!n) return;
    buf[0] = '\0';
    switch (id) {
    case FT_COL_OP: snprintf(buf, n, "%s", r->op); break;
    case FT_COL_SHAPE: snprintf(buf, n, "%s", r->shape); break;
    case FT_COL_BACKEND: snprintf(buf, n, "%s", r->backend); break;
    case FT_COL_DONE: {
        int measured, target;
        ft_tui_row_progress(r, &measured, &target);
        snprintf(buf, n, "%d/%d", measured, target);
        break;
    }
    case FT_COL_LAST:
        if (r->last_rejected)
            snprintf(buf, n, "rejected");
        else if (r->last_spoiled)
            snprintf(buf, n, "%s", r->last_spoiled == 1 ? "unclean" : "stopped");
        else
            ft_fmt_time(r->last, ascii, buf, n);
        break;
    case FT_COL_BEST: ft_fmt_time(r->best, ascii, buf, n); break;
    case FT_COL_DEFAULT: ft_fmt_time(r->def, ascii, buf, n); break;
    case FT_COL_SPEEDUP: ratio_str(r->speedup, buf, n); break;
    case FT_COL_REJECTED: snprintf(buf, n, "%d", r->resumed_rejected + r->rejected); break;
    case FT_COL_CALLS: count_str(r->calls, buf, n); break;
    case FT_COL_P50: ft_fmt_time(r->p50, ascii, buf, n); break;
    case FT_COL_P95: ft_fmt_time(r->p95, ascii, buf, n); break;
    case FT_COL_MAX: ft_fmt_time(r->max, ascii, buf, n); break;
    case FT_COL_JITTER: ft_fmt_time(r->jitter, ascii, buf, n); break;
    case FT_COL_VSPROF: ratio_str(r->speedup, buf, n); break;
    case FT_COL_TREND: ft_tui_trend(r, 16, ascii, buf, n); break;
    default: break;
    }
}

/* Bytes of the first `cols` characters of s (UTF-8 continuation bytes take no column). */
static size_t prefix_bytes(const char *s, int cols) {
    size_t b = 0;
    int c = 0;
    for (; s[b]; b++) {
        if (((unsigned char)s[b] & 0xC0) != 0x80) {
            if (c == cols) break;
            c++;
        }
    }
    return b;
}

static int text_cols(const char *s, size_t bytes) {
    int c = 0;
    for (size_t i = 0; i < bytes && s[i]; i++)
        c += ((unsigned char)s[i] & 0xC0) != 0x80;
    return c;
}

void ft_tui_shorten(const char *s, int width, char *buf, size_t n) {
    if (!n) return;
    buf[0] = '\0';
    if (width < 1) return;
    size_t len = strlen(s);
    if (text_cols(s, len) <= width) {
        snprintf(buf, n, "%s", s);
        return;
    }
    const char *paren = strstr(s, " (");
    if (paren && paren > s && text_cols(s, (size_t)(paren - s)) <= width) {
        snprintf(buf, n, "%.*s", (int)(paren - s), s);
        return;
    }
    if (width <= 2) {
        snprintf(buf, n, "%.*s", (int)prefix_bytes(s, width), s);
        return;
    }
    snprintf(buf, n, "%.*s..", (int)prefix_bytes(s, width - 2), s);
}

void ft_tui_rank_cell(const ft_tui_rank *k, ft_tui_rcol_id id, int width, char *buf, size_t n) {
    if (!n) return;
    buf[0] = '\0';
    switch (id) {
    case FT_RCOL_RANK: snprintf(buf, n, "%d", k->rank); break;
    case FT_RCOL_HOST: ft_tui_shorten(k->host[0] ? k->host : "?", width, buf, n); break;
    case FT_RCOL_DEVICE: ft_tui_shorten(k->device[0] ? k->device : "?", width, buf, n); break;
    case FT_RCOL_MEASURED: count_str(k->measured, buf, n); break;
    case FT_RCOL_REJECTED: count_str(k->rejected, buf, n); break;
    case FT_RCOL_RATE: bounded_str(ft_tui_rank_rate(k), 1, 1e7, "", buf, n); break;
    default: break;
    }
}

/* s right-aligned in `width` display columns (UTF-8 continuation bytes take none). */
static void pad_left(const char *s, int width, char *buf, size_t n) {
    int pad = width - text_cols(s, strlen(s));
    snprintf(buf, n, "%*s%s", pad > 0 ? pad : 0, "", s);
}

void ft_tui_top_line(const ft_tui_cand *c, int rank, const char *mark, int ascii, char *buf,
                     size_t n) {
    char med[32], iqr[32], a[48], b[48];
    pad_left(ft_fmt_time(c->median, ascii, med, sizeof med), 9, a, sizeof a);
    pad_left(ft_fmt_time(c->iqr, ascii, iqr, sizeof iqr), 9, b, sizeof b);
    snprintf(buf, n, "%d %-3s %c%s %s  %s", rank, mark ? mark : "", c->confirmed ? 'c' : ' ', a, b,
             c->cfg);
}

/* ---- the scheduler's share -------------------------------------------------------------- */

char ft_tui_row_mark(const ft_tui_row *r) { return r && r->unclean > 0 ? '!' : ' '; }

/* A share in percent for humans: "37%", "0.4%", "<0.1%". */
static void share_str(double f, char *buf, size_t n) {
    if (f >= 0.01)
        snprintf(buf, n, "%.0f%%", 100 * f);
    else if (f >= 0.001)
        snprintf(buf, n, "%.1f%%", 100 * f);
    else
        snprintf(buf, n, "<0.1%%");
}

int ft_tui_busy_text(const ft_tui_contention *c, char *buf, size_t n) {
    if (!n) return 0;
    buf[0] = '\0';
    double share = c->taken > 0 ? (double)c->discarded / (double)c->taken : 0;
    int busy = c->unclean > 0 || share >= FT_TUI_BUSY_SHARE;
    char parts[3][64], pct[16];
    int np = 0;
    if (c->discarded > 0) {
        share_str(share, pct, sizeof pct);
        snprintf(parts[np++], sizeof parts[0], "%s of samples discarded", pct);
    }
    if (c->unclean > 0)
        snprintf(parts[np++], sizeof parts[0], "%d not measured cleanly", c->unclean);
    if (c->stopped > 0) snprintf(parts[np++], sizeof parts[0], "%d stopped", c->stopped);
    size_t len = 0;
    if (np && busy) len += (size_t)snprintf(buf, n, "BUSY: ");
    for (int i = 0; i < np && len < n; i++)
        len += (size_t)snprintf(buf + len, n - len, "%s%s", i ? ", " : "", parts[i]);
    return busy;
}

void ft_tui_spoiled_line(const ft_tui_cand *c, int ascii, char *buf, size_t n) {
    if (!n) return;
    char t[32] = ">";
    if (c->unclean)
        ft_fmt_time(c->median, ascii, t, sizeof t);
    else if (isfinite(c->stopped_after_s))
        ft_fmt_time(c->stopped_after_s, ascii, t + 1, sizeof t - 1);
    else
        snprintf(t, sizeof t, "-");
    /* Right-aligned in 9 columns, counted as characters: "µs" is one column of two bytes. */
    int pad = 9 - text_cols(t, strlen(t));
    snprintf(buf, n, "%-9s %*s%s  %s", c->unclean ? "not clean" : "stopped", pad > 0 ? pad : 0, "",
             t, c->cfg);
}

static const char *const spark_utf8[8] = {"\xe2\x96\x81", "\xe2\x96\x82", "\xe2\x96\x83",
                                          "\xe2\x96\x84", "\xe2\x96\x85", "\xe2\x96\x86",
                                          "\xe2\x96\x87", "\xe2\x96\x88"};
static const char spark_ascii[] = "_.:-=+*#";

void ft_tui_trend(const ft_tui_row *r, int width, int ascii, char *buf, size_t n) {
    if (!n) return;
    buf[0] = '\0';
    /* The last `width` finite trial values. */
    double v[256];
    int k = 0;
    if (width > 256) width = 256;
    for (int i = r->history.n - 1; i >= 0 && k < width; i--) {
        const ft_tui_point *p = ft_tui_ring_at(&r->history, i);
        if (isfinite(p->v) && p->v > 0) v[k++] = p->v;
    }
    double lo = INFINITY, hi = -INFINITY;
    for (int i = 0; i < k; i++) {
        if (v[i] < lo) lo = v[i];
        if (v[i] > hi) hi = v[i];
    }
    /* Log scale: trials of one run often span orders of magnitude. */
    size_t len = 0;
    for (int i = k - 1; i >= 0; i--) {
        int lv = ft_spark_level(log(v[i]), log(lo), log(hi), 8);
        if (lv < 0) lv = 0;
        char one[2] = {spark_ascii[lv], '\0'};
        const char *g = ascii ? one : spark_utf8[lv];
        size_t gl = strlen(g);
        if (len + gl + 1 > n) break;
        memcpy(buf + len, g, gl);
        len += gl;
    }
    buf[len] = '\0';
}

/* ---- plots ------------------------------------------------------------------------------- */

ft_plot_scale ft_plot_scale_make(const double *v, int n) {
    ft_plot_scale s = {0, 1, 0};
    double lo = INFINITY, hi = -INFINITY;
    for (int i = 0; i < n; i++)
        if (isfinite(v[i]) && v[i] > 0) {
            if (v[i] < lo) lo = v[i];
            if (v[i] > hi) hi = v[i];
        }
    if (!isfinite(lo)) return s;
    if (hi / lo > 20) {
        s.log = 1;
        s.lo = lo / 1.1;
        s.hi = hi * 1.1;
        return s;
    }
    if (hi == lo) {
        s.lo = lo * 0.9;
        s.hi = hi * 1.1;
        return s;
    }
    double pad = (hi - lo) * 0.05;
    s.lo = lo - pad > 0 ? lo - pad : lo / 2;
    s.hi = hi + pad;
    return s;
}

static double frac(const ft_plot_scale *s, double v) {
    if (s->log) return (log(v) - log(s->lo)) / (log(s->hi) - log(s->lo));
    return (v - s->lo) / (s->hi - s->lo);
}

int ft_plot_row(const ft_plot_scale *s, double v, int height) {
    if (height < 1 || !isfinite(v) || (s->log && v <= 0)) return -1;
    double f = frac(s, v);
    if (!isfinite(f)) f = 0.5;
    int row = height - 1 - (int)floor(f * height);
    return clampi(row, 0, height - 1);
}

double ft_plot_value(const ft_plot_scale *s, int row, int height) {
    if (height < 1) return NAN;
    double f = (height - 1 - row + 0.5) / height;
    if (s->log) return exp(log(s->lo) + f * (log(s->hi) - log(s->lo)));
    return s->lo + f * (s->hi - s->lo);
}

int ft_plot_ticks(int height, int *rows) {
    if (height < 1) return 0;
    int n = 0;
    rows[n++] = 0;
    if (height >= 5) rows[n++] = height / 2;
    if (height >= 2) rows[n++] = height - 1;
    return n;
}

int ft_plot_col(double t, double t0, double t1, int width) {
    if (width < 1) return -1;
    if (!(t1 > t0) || !isfinite(t)) return width - 1;
    int c = (int)floor((t - t0) / (t1 - t0) * (width - 1) + 0.5);
    return clampi(c, 0, width - 1);
}

ft_plot_scale ft_plot_render(const ft_tui_ring *r, double t_now, int width, int height,
                             unsigned char *grid) {
    ft_plot_scale s = {0, 1, 0};
    if (width < 1 || height < 1) return s;
    memset(grid, FT_GLYPH_NONE, (size_t)width * (size_t)height);
    if (!r->n) return s;
    double vals[2 * FT_TUI_HISTORY];
    int nv = 0;
    for (int i = 0; i < r->n && nv + 2 <= 2 * FT_TUI_HISTORY; i++) {
        const ft_tui_point *p = ft_tui_ring_at(r, i);
        vals[nv++] = p->v;
        vals[nv++] = p->b;
    }
    s = ft_plot_scale_make(vals, nv);
    double t0 = ft_tui_ring_at(r, 0)->t, t1 = ft_tui_ring_at(r, r->n - 1)->t;
    if (t_now > t1) t1 = t_now;
    /* The line: a step through each point's b, carried forward to the right edge. */
    int carry = -1, next = 0;
    for (int c = 0; c < width; c++) {
        while (next < r->n && ft_plot_col(ft_tui_ring_at(r, next)->t, t0, t1, width) <= c) {
            int row = ft_plot_row(&s, ft_tui_ring_at(r, next)->b, height);
            if (row >= 0) carry = row;
            next++;
        }
        if (carry >= 0) grid[carry * width + c] = FT_GLYPH_LINE;
    }
    for (int i = 0; i < r->n; i++) {
        const ft_tui_point *p = ft_tui_ring_at(r, i);
        int c = ft_plot_col(p->t, t0, t1, width);
        if (p->flags & FT_PT_REJECTED) {
            unsigned char *g = &grid[(height - 1) * width + c];
            if (*g == FT_GLYPH_NONE || *g == FT_GLYPH_LINE) *g = FT_GLYPH_REJECTED;
            continue;
        }
        int row = ft_plot_row(&s, p->v, height);
        if (row < 0) continue;
        unsigned char *g = &grid[row * width + c];
        unsigned char want = (p->flags & FT_PT_UNCLEAN)    ? FT_GLYPH_UNCLEAN
                             : (p->flags & FT_PT_SCREENED) ? FT_GLYPH_SCREENED
                                                           : FT_GLYPH_POINT;
        if (*g != FT_GLYPH_POINT) *g = want; /* a full trial wins over a screened one */
    }
    return s;
}

int ft_spark_level(double v, double lo, double hi, int levels) {
    if (!isfinite(v) || levels < 1) return -1;
    if (!(hi > lo)) return levels / 2;
    int l = (int)floor((v - lo) / (hi - lo) * levels);
    return clampi(l, 0, levels - 1);
}

void ft_hist_levels(const int *counts, int n, int height, int *eighths) {
    int mx = 0;
    for (int i = 0; i < n; i++)
        if (counts[i] > mx) mx = counts[i];
    for (int i = 0; i < n; i++) {
        if (!mx || counts[i] <= 0 || height < 1) {
            eighths[i] = 0;
            continue;
        }
        int e = (int)floor((double)counts[i] / mx * height * 8 + 0.5);
        eighths[i] = clampi(e, 1, height * 8);
    }
}
