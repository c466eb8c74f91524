/* report_svg.c: a report's chart drawn as inline SVG for the page (tuner/report_svg.h): a
 * stacked chart's bars on a value axis, a lines chart's series with error bars on a linear or a
 * log axis, each with its legend, a tooltip on every shape.
 *
 * Every coordinate goes through one writer that refuses a non-finite number, so "nan" never
 * reaches the SVG; the check before rendering (report_check.c) refuses documents whose values
 * would make one. The document's text is escaped by the page's writer (report_doc_html.c).
 */
#include "tuner/report_svg.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tuner/report_doc.h"
#include "tuner/report_read.h"

typedef struct out {
    FILE *f;
    ft_status status; /* the first failure: a non-finite coordinate, out of memory */
} out;

/* Markup: the renderer's own constant text, never a string of the document. */
static void put(out *o, const char *s) { fputs(s, o->f); }

/* Markup with numbers or the renderer's own names (classes, colours): never a string of the
 * document, which goes through put_xml (or put_value) alone. */
static void putf(out *o, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
static void putf(out *o, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vfprintf(o->f, fmt, ap);
    va_end(ap);
}

/* Text of the document, escaped for XML (by the page's writer). */
static void put_xml(out *o, const char *s) {
    if (s) ft_doc_html_text(o->f, s, strlen(s));
}

/* At most max_bytes of s (cut at a character boundary, then "..."), escaped for XML. */
static void put_xml_cut(out *o, const char *s, size_t max_bytes) {
    size_t n = strlen(s);
    if (n <= max_bytes) {
        put_xml(o, s);
        return;
    }
    while (max_bytes > 0 && ((unsigned char)s[max_bytes] & 0xC0) == 0x80)
        max_bytes--;
    ft_doc_html_text(o->f, s, max_bytes);
    put(o, "...");
}

/* A value for humans in a chart's unit (the document's string), escaped for XML. */
static void put_value(out *o, double v, const char *unit, int sig) {
    char buf[160];
    put_xml(o, ft_report_fmt_value(v, unit, sig, buf, sizeof buf));
}

/* A coordinate or length: %.6g, never nan or inf (the first one fails the render). */
static void put_num(out *o, double v) {
    if (!isfinite(v)) {
        if (!o->status) o->status = FT_EINTERNAL;
        fputs("0", o->f);
        return;
    }
    if (v == 0) v = 0;
    fprintf(o->f, "%.6g", v);
}

enum {
    SEG_MIN_PX = 3, /* the least width of a bar segment above 0 */
    SVG_W = 720,
    CHAR_W = 7, /* a 12 px sans-serif character, about */
    LEGEND_ROW = 18,
};

/* <text> at (x, y) with an anchor, escaped. */
static void svg_text(out *o, double x, double y, const char *anchor, const char *cls,
                     const char *s) {
    put(o, "<text x=\"");
    put_num(o, x);
    put(o, "\" y=\"");
    put_num(o, y);
    putf(o, "\" text-anchor=\"%s\"", anchor);
    if (cls) putf(o, " class=\"%s\"", cls);
    put(o, ">");
    put_xml(o, s);
    put(o, "</text>\n");
}

static void svg_line(out *o, double x1, double y1, double x2, double y2, const char *cls) {
    put(o, "<line x1=\"");
    put_num(o, x1);
    put(o, "\" y1=\"");
    put_num(o, y1);
    put(o, "\" x2=\"");
    put_num(o, x2);
    put(o, "\" y2=\"");
    put_num(o, y2);
    putf(o, "\" class=\"%s\"/>\n", cls);
}

static void svg_rect(out *o, double x, double y, double w, double h, const char *fill) {
    put(o, "<rect x=\"");
    put_num(o, x);
    put(o, "\" y=\"");
    put_num(o, y);
    put(o, "\" width=\"");
    put_num(o, w < 0 ? 0 : w);
    put(o, "\" height=\"");
    put_num(o, h < 0 ? 0 : h);
    putf(o, "\" fill=\"%s\"", fill);
}

/* The height a legend of these labels takes when wrapped at the chart's width. */
static int legend_rows(const ft_report_palette *labels) {
    int rows = labels->n ? 1 : 0;
    double x = 10;
    for (int i = 0; i < labels->n; i++) {
        double w = 22 + CHAR_W * (double)strlen(labels->labels[i]) + 14;
        if (x + w > SVG_W - 10 && x > 10) {
            rows++;
            x = 10;
        }
        x += w;
    }
    return rows;
}

/* How series k of a chart is drawn apart from the others, so that one lying on another (two
 * loss schemes that cost the same) stays visible: its own dash (the first solid; a dashed
 * line over a solid one shows both colours), its own marker shape, and the lines and markers
 * of later series narrower and smaller, drawn over the wider ones of earlier series (every
 * marker after every line). */
static const char *const series_dash[] = {NULL, "8 4", "2 3", "10 3 2 3", "5 2"};
enum { NDASH = 5, NSHAPES = 5 };

static double marker_size(int k, int ns) {
    double r = 3.5 + 1.0 * (ns - 1 - k);
    return r < 3.5 ? 3.5 : r > 7.5 ? 7.5 : r;
}

/* Earlier lines wider: under a later one that covers it, a line still shows along its edges. */
static double line_width(int k, int ns) {
    double w = 2 + 1.5 * (ns - 1 - k);
    return w < 2 ? 2 : w > 8 ? 8 : w;
}

/* A marker of shape k % NSHAPES (circle, square, triangle, diamond, triangle down) of half-size
 * r at (cx, cy): the opening of a <path> of class cls, closed by the caller; hollow (white,
 * outlined in its colour) for a point that is only an upper bound. */
static void svg_marker(out *o, const char *cls, int k, double cx, double cy, double r,
                       const char *colour, int hollow) {
    if (hollow)
        putf(o, "<path class=\"%s\" fill=\"#fff\" stroke=\"%s\" stroke-width=\"2\" d=\"", cls,
             colour);
    else
        putf(o, "<path class=\"%s\" fill=\"%s\" stroke=\"#fff\" stroke-width=\"1\" d=\"", cls,
             colour);
    static const double square[] = {-1, -1, 1, -1, 1, 1, -1, 1};
    static const double tri[] = {0, -1.2, 1.1, 0.8, -1.1, 0.8};
    static const double diamond[] = {0, -1.3, 1.3, 0, 0, 1.3, -1.3, 0};
    static const double tri_down[] = {0, 1.2, 1.1, -0.8, -1.1, -0.8};
    const double *v = NULL;
    int nv = 0;
    switch (k % NSHAPES) {
    case 1: v = square, nv = 4; break;
    case 2: v = tri, nv = 3; break;
    case 3: v = diamond, nv = 4; break;
    case 4: v = tri_down, nv = 3; break;
    default: break;
    }
    if (!v) { /* a circle: two arcs */
        put(o, "M");
        put_num(o, cx - r);
        put(o, ",");
        put_num(o, cy);
        put(o, " a");
        put_num(o, r);
        put(o, ",");
        put_num(o, r);
        put(o, " 0 1,0 ");
        put_num(o, 2 * r);
        put(o, ",0 a");
        put_num(o, r);
        put(o, ",");
        put_num(o, r);
        put(o, " 0 1,0 ");
        put_num(o, -2 * r);
        put(o, ",0 Z\">");
        return;
    }
    for (int i = 0; i < nv; i++) {
        put(o, i ? " L" : "M");
        put_num(o, cx + r * v[2 * i]);
        put(o, ",");
        put_num(o, cy + r * v[2 * i + 1]);
    }
    put(o, " Z\">");
}

/* Swatches and labels from y0 down, each label in its colour of the page's palette; for a
 * lines chart (lines set) each series' dash and marker instead of a swatch. */
static void svg_legend(out *o, const ft_report_palette *labels, ft_report_palette *colours,
                       double y0, int lines) {
    double x = 10, y = y0;
    for (int i = 0; i < labels->n; i++) {
        const char *l = labels->labels[i];
        double w = 22 + CHAR_W * (double)strlen(l) + 14;
        if (x + w > SVG_W - 10 && x > 10) {
            x = 10;
            y += LEGEND_ROW;
        }
        const char *colour = ft_report_palette_colour(colours, l);
        if (lines) {
            put(o, "<line x1=\"");
            put_num(o, x - 2);
            put(o, "\" y1=\"");
            put_num(o, y - 4);
            put(o, "\" x2=\"");
            put_num(o, x + 16);
            put(o, "\" y2=\"");
            put_num(o, y - 4);
            putf(o, "\" stroke=\"%s\" stroke-width=\"2\"", colour);
            if (series_dash[i % NDASH]) putf(o, " stroke-dasharray=\"%s\"", series_dash[i % NDASH]);
            put(o, "/>\n");
            svg_marker(o, "key", i, x + 7, y - 4, marker_size(i, labels->n), colour, 0);
            put(o, "</path>\n");
        } else {
            svg_rect(o, x, y - 10, 14, 12, colour);
            put(o, "/>\n");
        }
        svg_text(o, x + 20, y, "start", NULL, l);
        x += w;
    }
}

static void svg_open(out *o, const json_t *chart, double h) {
    put(o, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"");
    put_num(o, SVG_W);
    put(o, "\" height=\"");
    put_num(o, h);
    put(o, "\" viewBox=\"0 0 ");
    put_num(o, SVG_W);
    put(o, " ");
    put_num(o, h);
    put(o, "\" role=\"img\" aria-label=\"");
    put_xml(o, ft_report_str(chart, "title", ""));
    put(o, "\">\n<title>");
    put_xml(o, ft_report_str(chart, "title", ""));
    put(o, "</title>\n");
}

/* The horizontal value axis of a stacked chart: grid lines, ticks and their labels. */
static void svg_value_axis(out *o, const ft_report_axis *ax, const char *unit, double x0, double x1,
                           double y_top, double y_axis) {
    double mag = fmax(fabs(ax->lo), fabs(ax->hi));
    char buf[48];
    for (int i = 0; i < ax->nticks; i++) {
        double x = ft_report_scale(ax->ticks[i], ax->lo, ax->hi, x0, x1);
        svg_line(o, x, y_top, x, y_axis, "grid");
        svg_line(o, x, y_axis, x, y_axis + 4, "axis");
        svg_text(o, x, y_axis + 16, "middle", "tick",
                 ft_report_fmt_tick(ax->ticks[i], mag, unit, buf, sizeof buf));
    }
    svg_line(o, x0, y_axis, x1, y_axis, "axis");
}

/* The width of the bar labels' column: the longest label, within bounds. */
static double stacked_label_width(const json_t *bars) {
    size_t longest = 0;
    for (size_t i = 0; i < json_array_size(bars); i++) {
        size_t n = strlen(ft_report_str(json_array_get(bars, i), "label", ""));
        if (n > longest) longest = n;
    }
    double w = CHAR_W * (double)longest + 16;
    return w < 90 ? 90 : w > 260 ? 260 : w;
}

/* One bar: its segments left to right, a tooltip each, and its total at the end. */
static void svg_bar(out *o, const json_t *bar, const char *unit, const ft_report_axis *ax,
                    double x0, double x1, double y, double h, double label_w,
                    ft_report_palette *colours) {
    const char *label = ft_report_str(bar, "label", "");
    put(o, "<text x=\"");
    put_num(o, label_w - 8);
    put(o, "\" y=\"");
    put_num(o, y + h / 2 + 4);
    put(o, "\" text-anchor=\"end\">");
    put_xml_cut(o, label, (size_t)((label_w - 16) / CHAR_W));
    put(o, "</text>\n");
    /* Every segment above 0 is at least SEG_MIN_PX wide (206 us beside 180 ms would be a
     * hundredth of a pixel); the widest segment gives up what they take, so the bar still ends
     * at its total on the axis. Its tooltip and the table keep the exact values. */
    const json_t *segs = json_object_get(bar, "segments");
    size_t nseg = json_array_size(segs), widest = 0;
    double px_per = (x1 - x0) / (ax->hi - ax->lo), extra = 0, total = 0;
    for (size_t j = 0; j < nseg; j++) {
        double v = json_number_value(json_object_get(json_array_get(segs, j), "value"));
        if (v > 0 && v * px_per < SEG_MIN_PX) extra += SEG_MIN_PX - v * px_per;
        if (v > json_number_value(json_object_get(json_array_get(segs, widest), "value")))
            widest = j;
        total += v;
    }
    double xa = ft_report_scale(0, ax->lo, ax->hi, x0, x1);
    char buf[48];
    for (size_t j = 0; j < nseg; j++) {
        const json_t *g = json_array_get(segs, j);
        double v = json_number_value(json_object_get(g, "value")), w = v * px_per;
        if (v > 0 && w < SEG_MIN_PX) w = SEG_MIN_PX;
        if (j == widest && w - extra >= SEG_MIN_PX) w -= extra;
        const char *sl = ft_report_str(g, "label", "");
        svg_rect(o, xa, y, w, h, ft_report_palette_colour(colours, sl));
        put(o, "><title>");
        put_xml(o, label);
        put(o, ": ");
        put_xml(o, sl);
        put(o, " ");
        put_value(o, v, unit, 4);
        put(o, "</title></rect>\n");
        xa += w;
    }
    svg_text(o, xa + 6, y + h / 2 + 4, "start", "total",
             ft_report_fmt_value(total, unit, 3, buf, sizeof buf));
}

static ft_status svg_stacked(out *o, const json_t *chart, ft_report_palette *colours) {
    const json_t *bars = json_object_get(chart, "bars");
    const char *unit = ft_report_str(chart, "unit", "");
    double max_total = 0;
    for (size_t i = 0; i < json_array_size(bars); i++)
        max_total = fmax(max_total, ft_report_bar_total(json_array_get(bars, i)));
    ft_report_axis ax;
    if (ft_report_axis_nice(0, max_total, 6, &ax)) return FT_EINTERNAL;
    ft_report_palette labels = {0};
    ft_report_stacked_labels(chart, &labels);
    const double bar_h = 22, gap = 10, top = 12;
    double label_w = stacked_label_width(bars), x0 = label_w, x1 = SVG_W - 90;
    size_t nb = json_array_size(bars);
    double plot_h = nb ? (double)nb * (bar_h + gap) - gap : bar_h;
    double y_axis = top + plot_h + 6;
    double legend_y = y_axis + (json_object_get(chart, "x_label") ? 52 : 38);
    double h = legend_y + LEGEND_ROW * legend_rows(&labels) + 4;
    svg_open(o, chart, h);
    svg_value_axis(o, &ax, unit, x0, x1, top - 4, y_axis);
    for (size_t i = 0; i < nb; i++)
        svg_bar(o, json_array_get(bars, i), unit, &ax, x0, x1, top + (double)i * (bar_h + gap),
                bar_h, label_w, colours);
    if (json_object_get(chart, "x_label"))
        svg_text(o, (x0 + x1) / 2, y_axis + 34, "middle", "axis-label",
                 ft_report_str(chart, "x_label", ""));
    svg_legend(o, &labels, colours, legend_y, 0);
    put(o, "</svg>\n");
    ft_report_palette_free(&labels);
    return FT_OK;
}

/* The x axis of a lines chart: at the data's x values when there are few, else nice ticks. */
typedef struct {
    double lo, hi;
    int nticks;
    double ticks[FT_REPORT_MAX_TICKS];
} x_axis;

static ft_status lines_x_axis(const json_t *chart, x_axis *xa) {
    int nx, oom;
    double *xs = ft_report_lines_xs(chart, &nx, &oom);
    if (oom) return FT_ENOMEM;
    memset(xa, 0, sizeof *xa);
    if (nx > 0 && nx <= 10) {
        xa->nticks = nx;
        memcpy(xa->ticks, xs, (size_t)nx * sizeof *xs);
        double lo = xs[0], hi = xs[nx - 1];
        double pad = hi > lo ? (hi - lo) * 0.05 : fmax(fabs(lo) * 0.1, 1);
        xa->lo = lo - pad;
        xa->hi = hi + pad;
    } else {
        ft_report_axis ax;
        if (ft_report_axis_nice(nx ? xs[0] : 0, nx ? xs[nx - 1] : 1, 8, &ax)) {
            free(xs);
            return FT_EINTERNAL;
        }
        xa->lo = ax.lo;
        xa->hi = ax.hi;
        xa->nticks = ax.nticks;
        memcpy(xa->ticks, ax.ticks, (size_t)ax.nticks * sizeof ax.ticks[0]);
    }
    free(xs);
    return isfinite(xa->hi - xa->lo) ? FT_OK : FT_EINTERNAL;
}

/* The plot area of a lines chart. */
typedef struct {
    double x0, x1, y0, y1; /* pixels: left, right, top, bottom */
    x_axis xa;
    ft_report_axis ya;
    int ylog; /* ya's ticks and range are values; positions go by their log10 */
    const char *unit;
} plot;

static double plot_x(const plot *p, double x) {
    return ft_report_scale(x, p->xa.lo, p->xa.hi, p->x0, p->x1);
}
static double plot_y(const plot *p, double y) {
    if (p->ylog) return ft_report_scale(log10(y), log10(p->ya.lo), log10(p->ya.hi), p->y1, p->y0);
    return ft_report_scale(y, p->ya.lo, p->ya.hi, p->y1, p->y0);
}

/* Values above 0 spanning more than this factor go on a log axis: on one from 0, a 0.2 ms point
 * beside 180 ms would sit on the zero line. */
#define LOG_AXIS_SPAN 20.0

/* A log axis over [lo, hi] (0 < lo <= hi): whole decades, a tick at each (every few when there
 * are many), and at 2 and 5 times each when there are at most two. */
static ft_status axis_log(double lo, double hi, ft_report_axis *ax) {
    memset(ax, 0, sizeof *ax);
    double k0 = floor(log10(lo) + 1e-9), k1 = ceil(log10(hi) - 1e-9);
    if (!isfinite(k0) || !isfinite(k1)) return FT_EINVAL;
    if (k1 <= k0) k1 = k0 + 1;
    double decades = k1 - k0;
    int every = (int)ceil(decades / (FT_REPORT_MAX_TICKS - 1));
    for (double k = k0; k <= k1 && ax->nticks < FT_REPORT_MAX_TICKS; k += every) {
        static const double mult[] = {1, 2, 5};
        for (int m = 0; m < (decades <= 2 ? 3 : 1) && ax->nticks < FT_REPORT_MAX_TICKS; m++) {
            double t = mult[m] * pow(10, k);
            if (k < k1 || m == 0) ax->ticks[ax->nticks++] = t;
        }
    }
    ax->lo = pow(10, k0);
    ax->hi = pow(10, k1);
    ax->step = every;
    return ax->lo > 0 && isfinite(ax->hi) ? FT_OK : FT_EINVAL;
}

static void svg_lines_axes(out *o, const plot *p, const json_t *chart) {
    char buf[48];
    double mag = fmax(fabs(p->ya.lo), fabs(p->ya.hi));
    for (int i = 0; i < p->ya.nticks; i++) {
        double y = plot_y(p, p->ya.ticks[i]);
        svg_line(o, p->x0, y, p->x1, y, p->ya.ticks[i] == 0 && p->ya.lo < 0 ? "zero" : "grid");
        /* A log axis spans decades: each tick in its own unit ("100 us", "1 ms"). */
        svg_text(o, p->x0 - 6, y + 4, "end", "tick",
                 p->ylog ? ft_report_fmt_value(p->ya.ticks[i], p->unit, 3, buf, sizeof buf)
                         : ft_report_fmt_tick(p->ya.ticks[i], mag, p->unit, buf, sizeof buf));
    }
    if (p->ylog) svg_text(o, p->x1, p->y0 - 3, "end", "tick", "log scale");
    for (int i = 0; i < p->xa.nticks; i++) {
        double x = plot_x(p, p->xa.ticks[i]);
        svg_line(o, x, p->y1, x, p->y1 + 4, "axis");
        snprintf(buf, sizeof buf, "%.4g", p->xa.ticks[i]);
        svg_text(o, x, p->y1 + 16, "middle", "tick", buf);
    }
    svg_line(o, p->x0, p->y1, p->x1, p->y1, "axis");
    svg_line(o, p->x0, p->y0, p->x0, p->y1, "axis");
    if (json_object_get(chart, "x_label"))
        svg_text(o, (p->x0 + p->x1) / 2, p->y1 + 34, "middle", "axis-label",
                 ft_report_str(chart, "x_label", ""));
    if (json_object_get(chart, "y_label")) {
        double cy = (p->y0 + p->y1) / 2;
        put(o, "<text x=\"14\" y=\"");
        put_num(o, cy);
        put(o, "\" text-anchor=\"middle\" class=\"axis-label\" transform=\"rotate(-90 14 ");
        put_num(o, cy);
        put(o, ")\">");
        put_xml(o, ft_report_str(chart, "y_label", ""));
        put(o, "</text>\n");
    }
}

/* Error bar of point i: a vertical line from lo to hi with caps. */
static void svg_error_bar(out *o, const plot *p, double x, double lo, double hi,
                          const char *colour) {
    double px = plot_x(p, x), ylo = plot_y(p, lo), yhi = plot_y(p, hi);
    putf(o, "<g stroke=\"%s\" stroke-width=\"1.5\">", colour);
    svg_line(o, px, ylo, px, yhi, "err");
    svg_line(o, px - 4, ylo, px + 4, ylo, "err");
    svg_line(o, px - 4, yhi, px + 4, yhi, "err");
    put(o, "</g>\n");
}

/* Series k's error bars and its line through its points in x order. */
static ft_status svg_series_line(out *o, const plot *p, const json_t *ser, int k, int ns,
                                 ft_report_palette *colours) {
    const json_t *pts = json_object_get(ser, "points");
    const json_t *lo = json_object_get(ser, "lo"), *hi = json_object_get(ser, "hi");
    const char *label = ft_report_str(ser, "label", ""),
               *colour = ft_report_palette_colour(colours, label);
    size_t n;
    int *order = ft_report_points_order(pts, &n);
    if (!order) return FT_ENOMEM;
    for (size_t j = 0; j < n && (lo || hi); j++) {
        size_t i = (size_t)order[j];
        double x = ft_report_point(pts, i, 0), y = ft_report_point(pts, i, 1);
        svg_error_bar(o, p, x, lo ? json_number_value(json_array_get(lo, i)) : y,
                      hi ? json_number_value(json_array_get(hi, i)) : y, colour);
    }
    putf(o, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"%g\"", colour, line_width(k, ns));
    if (series_dash[k % NDASH]) putf(o, " stroke-dasharray=\"%s\"", series_dash[k % NDASH]);
    put(o, " points=\"");
    for (size_t j = 0; j < n; j++) {
        if (j) put(o, " ");
        put_num(o, plot_x(p, ft_report_point(pts, (size_t)order[j], 0)));
        put(o, ",");
        put_num(o, plot_y(p, ft_report_point(pts, (size_t)order[j], 1)));
    }
    put(o, "\"><title>");
    put_xml(o, label);
    put(o, "</title></polyline>\n");
    free(order);
    return FT_OK;
}

/* Series k's markers, one per point, each with its value as a tooltip. */
static void svg_series_markers(out *o, const plot *p, const json_t *ser, int k, int ns,
                               ft_report_palette *colours) {
    const json_t *pts = json_object_get(ser, "points");
    const char *label = ft_report_str(ser, "label", ""),
               *colour = ft_report_palette_colour(colours, label);
    double r = marker_size(k, ns);
    for (size_t i = 0; i < json_array_size(pts); i++) {
        const json_t *pt = json_array_get(pts, i);
        double x = json_number_value(json_array_get(pt, 0));
        double y = json_number_value(json_array_get(pt, 1));
        const int bound = ft_report_point_bound(ser, i);
        svg_marker(o, bound ? "marker bound" : "marker", k, plot_x(p, x), plot_y(p, y), r, colour,
                   bound);
        put(o, "<title>");
        put_xml(o, label);
        putf(o, ": %.6g, ", x);
        put_value(o, y, p->unit, 4);
        if (bound) put(o, " (busy: an upper bound)");
        put(o, "</title></path>\n");
    }
}

/* The axes of a lines chart: x as lines_x_axis; y from 0, or from the data's minimum when
 * values are negative, on a log axis when they are all above 0 and span more than
 * LOG_AXIS_SPAN. FT_EINTERNAL when they cannot be divided (values a subnormal apart). */
static ft_status lines_axes(const json_t *chart, plot *p) {
    ft_status s = lines_x_axis(chart, &p->xa);
    if (s) return s;
    ft_report_extent e = ft_report_lines_extent(chart);
    p->ylog = e.n && e.y0 > 0 && e.y1 / e.y0 > LOG_AXIS_SPAN;
    if (p->ylog ? axis_log(e.y0, e.y1, &p->ya)
                : ft_report_axis_nice(fmin(0, e.y0), fmax(0, e.y1), 6, &p->ya))
        return FT_EINTERNAL;
    return FT_OK;
}

ft_status ft_report_lines_drawable(const json_t *chart) {
    plot p = {0};
    return lines_axes(chart, &p);
}

static ft_status svg_lines(out *o, const json_t *chart, ft_report_palette *colours) {
    const json_t *series = json_object_get(chart, "series");
    plot p = {.x0 = 80, .x1 = SVG_W - 20, .y0 = 14, .y1 = 14 + 260};
    p.unit = ft_report_str(chart, "unit", "");
    ft_status s = lines_axes(chart, &p);
    if (s) return s;
    ft_report_palette labels = {0};
    for (size_t i = 0; i < json_array_size(series); i++)
        ft_report_palette_index(&labels, ft_report_str(json_array_get(series, i), "label", ""));
    double legend_y = p.y1 + (json_object_get(chart, "x_label") ? 54 : 40);
    svg_open(o, chart, legend_y + LEGEND_ROW * legend_rows(&labels) + 4);
    svg_lines_axes(o, &p, chart);
    int ns = (int)json_array_size(series);
    for (int i = 0; i < ns && !s; i++)
        s = svg_series_line(o, &p, json_array_get(series, (size_t)i), i, ns, colours);
    for (int i = 0; i < ns && !s; i++)
        svg_series_markers(o, &p, json_array_get(series, (size_t)i), i, ns, colours);
    svg_legend(o, &labels, colours, legend_y, 1);
    put(o, "</svg>\n");
    ft_report_palette_free(&labels);
    return s;
}

ft_status ft_report_svg(FILE *f, const json_t *chart, ft_report_palette *segs,
                        ft_report_palette *series) {
    out o = {f, FT_OK};
    ft_status s = strcmp(ft_report_str(chart, "kind", ""), "stacked") == 0
                      ? svg_stacked(&o, chart, segs)
                      : svg_lines(&o, chart, series);
    return s ? s : o.status;
}
