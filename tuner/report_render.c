/* report_render.c: a report document (docs/report.md) rendered as HTML with inline SVG, as
 * Markdown and as pretty-printed JSON (tuner/report.h).
 *
 * Sections in order: escaping, the tables every format shares (a chart's data, the machine), the
 * SVG charts, the HTML page, the Markdown file, and the atomic writing of the three files. The
 * layout math is report_layout.c's, the schema check report_check.c's.
 *
 * The page is one file that is also well-formed XML (only the five XML entities and numeric
 * references, every tag closed), needs no network and no script: the charts are drawn here.
 * Every coordinate goes through one writer that refuses a non-finite number, so "nan" never
 * reaches the SVG; the check before rendering refuses documents whose values would make one.
 */
#include "tuner/report.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include "core/format.h"
#include "core/npy.h"
#include "tuner/report_read.h"

/* The replacement of one byte in XML text, or NULL when it stays. Control characters XML 1.0
 * does not allow become a space. */
static const char *xml_entity(unsigned char c) {
    switch (c) {
    case '&': return "&amp;";
    case '<': return "&lt;";
    case '>': return "&gt;";
    case '"': return "&quot;";
    case '\'': return "&#39;";
    case '\t':
    case '\n':
    case '\r': return NULL;
    default: return c < 0x20 ? " " : NULL;
    }
}

static const char *md_entity(unsigned char c) {
    switch (c) {
    case '\\': return "\\\\";
    case '|': return "\\|";
    case '<': return "\\<";
    case '>': return "\\>";
    case '&': return "\\&";
    case '`': return "\\`";
    default: return c < 0x20 ? " " : NULL;
    }
}

static char *escape_with(const char *s, const char *(*entity)(unsigned char)) {
    size_t n = 1;
    for (const char *p = s; *p; p++) {
        const char *e = entity((unsigned char)*p);
        n += e ? strlen(e) : 1;
    }
    char *out = malloc(n), *q = out;
    if (!out) return NULL;
    for (const char *p = s; *p; p++) {
        const char *e = entity((unsigned char)*p);
        if (e) {
            size_t k = strlen(e);
            memcpy(q, e, k);
            q += k;
        } else {
            *q++ = *p;
        }
    }
    *q = '\0';
    return out;
}

char *ft_report_xml_escape(const char *s) { return escape_with(s, xml_entity); }
char *ft_report_md_escape(const char *s) { return escape_with(s, md_entity); }

/* ==== tables every format shares ============================================================== */

/* A table of owned strings: a header row then the data rows. */
typedef struct grid {
    int ncols, nrows, cap; /* nrows counts the header */
    char **cells;          /* row-major */
    int oom;
} grid;

static void grid_init(grid *g, int ncols) {
    memset(g, 0, sizeof *g);
    g->ncols = ncols;
}

static void grid_free(grid *g) {
    for (int i = 0; i < g->nrows * g->ncols; i++)
        free(g->cells[i]);
    free(g->cells);
    memset(g, 0, sizeof *g);
}

/* A new empty row; returns its first cell, or NULL when out of memory. */
static char **grid_row(grid *g) {
    if (g->oom) return NULL;
    if (g->nrows == g->cap) {
        int cap = g->cap ? 2 * g->cap : 8;
        char **c = realloc(g->cells, (size_t)cap * (size_t)(g->ncols ? g->ncols : 1) * sizeof *c);
        if (!c) {
            g->oom = 1;
            return NULL;
        }
        g->cells = c;
        g->cap = cap;
    }
    char **row = g->cells + (size_t)g->nrows * (size_t)g->ncols;
    for (int k = 0; k < g->ncols; k++)
        row[k] = NULL;
    g->nrows++;
    return row;
}

static void grid_set(grid *g, char **row, int k, const char *s) {
    if (!row) return;
    row[k] = strdup(s ? s : "");
    if (!row[k]) g->oom = 1;
}

static const char *grid_at(const grid *g, int r, int k) {
    const char *s = g->cells[(size_t)r * (size_t)g->ncols + (size_t)k];
    return s ? s : "";
}

/* A scalar of the document for humans: strings as they are, numbers %.6g. */
static const char *scalar_text(const json_t *v, char *buf, size_t n) {
    if (json_is_string(v)) return json_string_value(v);
    if (json_is_integer(v))
        snprintf(buf, n, "%lld", (long long)json_integer_value(v));
    else if (json_is_real(v))
        snprintf(buf, n, "%.6g", json_real_value(v));
    else if (json_is_true(v))
        snprintf(buf, n, "true");
    else if (json_is_false(v))
        snprintf(buf, n, "false");
    else
        snprintf(buf, n, "-");
    return buf;
}

/* The sum of a bar's segments with this label, and whether it has any. */
static int bar_value(const json_t *bar, const char *label, double *v) {
    int found = 0;
    *v = 0;
    const json_t *segs = json_object_get(bar, "segments");
    for (size_t j = 0; j < json_array_size(segs); j++) {
        const json_t *g = json_array_get(segs, j);
        if (strcmp(ft_report_str(g, "label", ""), label) == 0) {
            *v += json_number_value(json_object_get(g, "value"));
            found = 1;
        }
    }
    return found;
}

/* Stacked: one row per bar, one column per segment label, then the total. */
static ft_status grid_stacked(const json_t *chart, grid *g) {
    ft_report_palette labels = {0};
    ft_report_stacked_labels(chart, &labels);
    const char *unit = ft_report_str(chart, "unit", "");
    char buf[64];
    grid_init(g, labels.n + 2);
    char **row = grid_row(g);
    grid_set(g, row, 0, "bar");
    for (int k = 0; k < labels.n; k++)
        grid_set(g, row, k + 1, labels.labels[k]);
    grid_set(g, row, labels.n + 1, "total");
    const json_t *bars = json_object_get(chart, "bars");
    for (size_t i = 0; i < json_array_size(bars); i++) {
        const json_t *bar = json_array_get(bars, i);
        row = grid_row(g);
        grid_set(g, row, 0, ft_report_str(bar, "label", ""));
        for (int k = 0; k < labels.n; k++) {
            double v;
            int has = bar_value(bar, labels.labels[k], &v);
            grid_set(g, row, k + 1, has ? ft_report_fmt_value(v, unit, 4, buf, sizeof buf) : "-");
        }
        grid_set(g, row, labels.n + 1,
                 ft_report_fmt_value(ft_report_bar_total(bar), unit, 4, buf, sizeof buf));
    }
    ft_report_palette_free(&labels);
    return g->oom ? FT_ENOMEM : FT_OK;
}

/* "1.2 ms" or "1.2 ms [1.1 ms, 1.3 ms]": point i of a series. */
static void series_cell(const json_t *ser, size_t i, const char *unit, char *buf, size_t n) {
    const json_t *pt = json_array_get(json_object_get(ser, "points"), i);
    const json_t *lo = json_object_get(ser, "lo"), *hi = json_object_get(ser, "hi");
    char y[48], l[48] = "-", h[48] = "-";
    ft_report_fmt_value(json_number_value(json_array_get(pt, 1)), unit, 4, y, sizeof y);
    if (lo) ft_report_fmt_value(json_number_value(json_array_get(lo, i)), unit, 4, l, sizeof l);
    if (hi) ft_report_fmt_value(json_number_value(json_array_get(hi, i)), unit, 4, h, sizeof h);
    if (lo || hi)
        snprintf(buf, n, "%s [%s, %s]", y, l, h);
    else
        snprintf(buf, n, "%s", y);
}

/* Lines: one row per distinct x, one column per series (its first point at that x, "-" when
 * it has none). Each series' sorted points are walked once alongside the sorted xs. */
static ft_status grid_lines(const json_t *chart, grid *g) {
    const json_t *series = json_object_get(chart, "series");
    const char *unit = ft_report_str(chart, "unit", "");
    int nx, oom;
    double *xs = ft_report_lines_xs(chart, &nx, &oom);
    if (oom) return FT_ENOMEM;
    int ns = (int)json_array_size(series);
    int **sorted = calloc((size_t)(ns ? ns : 1), sizeof *sorted);
    size_t *npts = calloc((size_t)(ns ? ns : 1), sizeof *npts), *at = NULL;
    at = calloc((size_t)(ns ? ns : 1), sizeof *at);
    int bad = !sorted || !npts || !at;
    for (int s = 0; s < ns && !bad; s++)
        bad = !(sorted[s] = ft_report_points_order(
                    json_object_get(json_array_get(series, (size_t)s), "points"), &npts[s]));
    grid_init(g, ns + 1);
    char **row = bad ? NULL : grid_row(g);
    grid_set(g, row, 0, ft_report_str(chart, "x_label", "x"));
    for (int s = 0; s < ns && row; s++)
        grid_set(g, row, s + 1, ft_report_str(json_array_get(series, (size_t)s), "label", ""));
    char buf[160];
    for (int i = 0; i < nx && !bad; i++) {
        row = grid_row(g);
        snprintf(buf, sizeof buf, "%.6g", xs[i]);
        grid_set(g, row, 0, buf);
        for (int s = 0; s < ns; s++) {
            const json_t *pts = json_object_get(json_array_get(series, (size_t)s), "points");
            while (at[s] < npts[s] && ft_report_point(pts, (size_t)sorted[s][at[s]], 0) < xs[i])
                at[s]++;
            if (at[s] < npts[s] && ft_report_point(pts, (size_t)sorted[s][at[s]], 0) == xs[i])
                series_cell(json_array_get(series, (size_t)s), (size_t)sorted[s][at[s]], unit, buf,
                            sizeof buf);
            else
                snprintf(buf, sizeof buf, "-");
            grid_set(g, row, s + 1, buf);
        }
    }
    for (int s = 0; sorted && s < ns; s++)
        free(sorted[s]);
    free(sorted);
    free(npts);
    free(at);
    free(xs);
    return bad || g->oom ? FT_ENOMEM : FT_OK;
}

static ft_status grid_chart(const json_t *chart, grid *g) {
    return strcmp(ft_report_str(chart, "kind", ""), "stacked") == 0 ? grid_stacked(chart, g)
                                                                    : grid_lines(chart, g);
}

/* A table of the document as it is. */
static ft_status grid_table(const json_t *t, grid *g) {
    const json_t *cols = json_object_get(t, "columns"), *rows = json_object_get(t, "rows");
    grid_init(g, (int)json_array_size(cols));
    char **row = grid_row(g);
    for (int k = 0; k < g->ncols; k++)
        grid_set(g, row, k, json_string_value(json_array_get(cols, (size_t)k)));
    char buf[64];
    for (size_t r = 0; r < json_array_size(rows); r++) {
        row = grid_row(g);
        for (int k = 0; k < g->ncols; k++)
            grid_set(
                g, row, k,
                scalar_text(json_array_get(json_array_get(rows, r), (size_t)k), buf, sizeof buf));
    }
    return g->oom ? FT_ENOMEM : FT_OK;
}

/* ---- the machine: key/value rows, nested objects flattened as a.b, arrays of objects as their
 * own small tables ---- */

#define MAX_SUBTABLES 16

typedef struct machine_view {
    grid kv; /* key, value */
    grid sub[MAX_SUBTABLES];
    char sub_title[MAX_SUBTABLES][256];
    int nsub;
} machine_view;

/* A hint for humans after a large number whose key says what it is. */
static void value_hint(const char *key, const json_t *v, char *buf, size_t n) {
    char rate[48];
    double x = json_number_value(v);
    buf[0] = '\0';
    if (!json_is_number(v) || x < 1000) return;
    size_t kn = strlen(key);
    if (strcmp(key, "bytes") == 0 || (kn > 6 && strcmp(key + kn - 6, "_bytes") == 0))
        snprintf(buf, n, " (%s)", ft_fmt_bytes(x, rate, sizeof rate));
    else if (strstr(key, "bytes_per_s") || strstr(key, "bandwidth"))
        snprintf(buf, n, " (%s)", ft_fmt_rate(x, "B/s", rate, sizeof rate));
    else if (strstr(key, "flops"))
        snprintf(buf, n, " (%s)", ft_fmt_rate(x, "FLOP/s", rate, sizeof rate));
}

static int all_scalars(const json_t *a) {
    for (size_t i = 0; i < json_array_size(a); i++)
        if (json_is_object(json_array_get(a, i)) || json_is_array(json_array_get(a, i))) return 0;
    return 1;
}

/* An array of scalars as "a, b, c". Caller frees. */
static char *join_scalars(const json_t *a) {
    char buf[64];
    size_t n = 1;
    for (size_t i = 0; i < json_array_size(a); i++)
        n += strlen(scalar_text(json_array_get(a, i), buf, sizeof buf)) + 2;
    char *out = malloc(n);
    if (!out) return NULL;
    out[0] = '\0';
    for (size_t i = 0; i < json_array_size(a); i++) {
        if (i) strcat(out, ", ");
        strcat(out, scalar_text(json_array_get(a, i), buf, sizeof buf));
    }
    return out;
}

/* A scalar, an array of scalars joined, or a compact JSON dump of anything else, plus the
 * hint. Caller frees. */
static char *value_text(const char *key, const json_t *v) {
    char buf[64], hint[64];
    if (json_is_array(v) && all_scalars(v)) return join_scalars(v);
    if (json_is_object(v) || json_is_array(v)) return json_dumps(v, JSON_COMPACT);
    const char *s = scalar_text(v, buf, sizeof buf);
    value_hint(key, v, hint, sizeof hint);
    size_t n = strlen(s) + strlen(hint) + 1;
    char *out = malloc(n);
    if (out) snprintf(out, n, "%s%s", s, hint);
    return out;
}

static void kv_add(grid *g, const char *key, const json_t *v) {
    char **row = grid_row(g);
    grid_set(g, row, 0, key);
    char *text = value_text(key, v);
    if (!text) g->oom = 1;
    grid_set(g, row, 1, text);
    free(text);
}

static int all_objects(const json_t *a) {
    if (!json_array_size(a)) return 0;
    for (size_t i = 0; i < json_array_size(a); i++)
        if (!json_is_object(json_array_get(a, i))) return 0;
    return 1;
}

/* An array of objects as a table: the union of their keys as columns. */
static void machine_subtable(machine_view *m, const char *title, const json_t *a) {
    if (m->nsub == MAX_SUBTABLES) {
        kv_add(&m->kv, title, a); /* past the limit: shown as JSON */
        return;
    }
    ft_report_palette keys = {0};
    const char *k;
    const json_t *v;
    for (size_t i = 0; i < json_array_size(a); i++)
        json_object_foreach(json_array_get(a, i), k, v) ft_report_palette_index(&keys, k);
    grid *g = &m->sub[m->nsub];
    snprintf(m->sub_title[m->nsub++], sizeof m->sub_title[0], "%s", title);
    grid_init(g, keys.n);
    char **row = grid_row(g);
    for (int c = 0; c < keys.n; c++)
        grid_set(g, row, c, keys.labels[c]);
    for (size_t i = 0; i < json_array_size(a); i++) {
        row = grid_row(g);
        for (int c = 0; c < keys.n; c++) {
            const json_t *x = json_object_get(json_array_get(a, i), keys.labels[c]);
            char *text = x ? value_text(keys.labels[c], x) : strdup("-");
            if (!text) g->oom = 1;
            grid_set(g, row, c, text);
            free(text);
        }
    }
    ft_report_palette_free(&keys);
}

static void machine_walk(machine_view *m, const char *prefix, const json_t *obj) {
    const char *k;
    const json_t *v;
    json_object_foreach((json_t *)obj, k, v) {
        ft_report_path p = ft_report_path_key(prefix, k);
        if (json_is_object(v) && json_object_size(v))
            machine_walk(m, p.s, v);
        else if (all_objects(v))
            machine_subtable(m, p.s, v);
        else
            kv_add(&m->kv, p.s, v);
    }
}

static ft_status machine_build(const json_t *doc, machine_view *m) {
    memset(m, 0, sizeof *m);
    grid_init(&m->kv, 2);
    char **row = grid_row(&m->kv);
    grid_set(&m->kv, row, 0, "key");
    grid_set(&m->kv, row, 1, "value");
    static const char *const top[] = {"device", "backend", "clock", "models"};
    for (int i = 0; i < 4; i++) {
        const json_t *v = json_object_get(doc, top[i]);
        if (v) kv_add(&m->kv, top[i], v);
    }
    const json_t *machine = json_object_get(doc, "machine");
    if (machine) machine_walk(m, "", machine);
    int oom = m->kv.oom;
    for (int i = 0; i < m->nsub; i++)
        oom |= m->sub[i].oom;
    return oom ? FT_ENOMEM : FT_OK;
}

static void machine_free(machine_view *m) {
    grid_free(&m->kv);
    for (int i = 0; i < m->nsub; i++)
        grid_free(&m->sub[i]);
}

/* ==== writing: one output with a sticky failure ================================================
 */

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

/* Text of the document, escaped for XML. */
static void put_xml(out *o, const char *s) {
    for (; s && *s; s++) {
        const char *e = xml_entity((unsigned char)*s);
        if (e)
            fputs(e, o->f);
        else
            fputc(*s, o->f);
    }
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
    for (size_t i = 0; i < max_bytes; i++) {
        const char *e = xml_entity((unsigned char)s[i]);
        if (e)
            fputs(e, o->f);
        else
            fputc(s[i], o->f);
    }
    put(o, "...");
}

/* A value for humans in a chart's unit (the document's string), escaped for XML. */
static void put_value(out *o, double v, const char *unit, int sig) {
    char buf[160];
    put_xml(o, ft_report_fmt_value(v, unit, sig, buf, sizeof buf));
}

static void put_md(out *o, const char *s) {
    for (; s && *s; s++) {
        const char *e = md_entity((unsigned char)*s);
        if (e)
            fputs(e, o->f);
        else
            fputc(*s, o->f);
    }
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

/* An id attribute made of the document's string: letters, digits, - _ . kept, others '-'. */
static void put_id(out *o, const char *prefix, const char *s) {
    put(o, prefix);
    for (; s && *s; s++) {
        unsigned char c = (unsigned char)*s;
        int keep = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                   c == '-' || c == '_' || c == '.';
        fputc(keep ? c : '-', o->f);
    }
}

/* ==== the SVG charts ===========================================================================
 */

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
 * r at (cx, cy): the opening of a <path> of class cls, closed by the caller. */
static void svg_marker(out *o, const char *cls, int k, double cx, double cy, double r,
                       const char *colour) {
    putf(o, "<path class=\"%s\" fill=\"%s\" stroke=\"#fff\" stroke-width=\"1\" d=\"", cls, colour);
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
            svg_marker(o, "key", i, x + 7, y - 4, marker_size(i, labels->n), colour);
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
        svg_marker(o, "marker", k, plot_x(p, x), plot_y(p, y), r, colour);
        put(o, "<title>");
        put_xml(o, label);
        putf(o, ": %.6g, ", x);
        put_value(o, y, p->unit, 4);
        put(o, "</title></path>\n");
    }
}

static ft_status svg_lines(out *o, const json_t *chart, ft_report_palette *colours) {
    const json_t *series = json_object_get(chart, "series");
    plot p = {.x0 = 80, .x1 = SVG_W - 20, .y0 = 14, .y1 = 14 + 260};
    p.unit = ft_report_str(chart, "unit", "");
    ft_status s = lines_x_axis(chart, &p.xa);
    if (s) return s;
    ft_report_extent e = ft_report_lines_extent(chart);
    /* From 0, or from the data's minimum when values are negative; on a log axis when the
     * values are all above 0 and span more than LOG_AXIS_SPAN. */
    p.ylog = e.n && e.y0 > 0 && e.y1 / e.y0 > LOG_AXIS_SPAN;
    if (p.ylog ? axis_log(e.y0, e.y1, &p.ya)
               : ft_report_axis_nice(fmin(0, e.y0), fmax(0, e.y1), 6, &p.ya))
        return FT_EINTERNAL;
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

/* ==== the HTML page ============================================================================
 */

static const char *const html_style =
    "body{font:14px/1.45 system-ui,-apple-system,'Segoe UI',Helvetica,Arial,sans-serif;"
    "color:#1f2328;max-width:1000px;margin:24px auto;padding:0 16px;background:#fff}\n"
    "h1{font-size:26px;margin:0 0 4px}h2{border-bottom:1px solid #d0d7de;padding-bottom:4px;"
    "margin-top:32px}h3{margin:20px 0 6px}\n"
    ".meta{color:#59636e;margin:2px 0}code{font:12.5px ui-monospace,Menlo,Consolas,monospace;"
    "background:#f6f8fa;padding:1px 4px;border-radius:4px}\n"
    ".claim{border:1px solid #d0d7de;border-left:8px solid #6e7781;border-radius:6px;"
    "padding:10px 14px;margin:12px 0}\n"
    ".claim.holds{border-left-color:#1a7f37}.claim.does-not-hold{border-left-color:#cf222e}\n"
    ".badge{display:inline-block;padding:2px 12px;border-radius:12px;color:#fff;font-weight:600;"
    "background:#6e7781}\n"
    ".badge.holds{background:#1a7f37}.badge.does-not-hold{background:#cf222e}\n"
    ".claim.inconclusive{border-left-color:#9a6700}.badge.inconclusive{background:#9a6700}\n"
    ".withheld{color:#9a6700;font-weight:600}.busy{border:1px solid #d4a72c;background:#fff8c5;"
    "border-radius:6px;padding:10px 14px;margin:12px 0}\n"
    "blockquote{margin:8px 0;padding:0 12px;color:#3d444d;border-left:3px solid #d0d7de;"
    "font-style:italic}.source{color:#59636e;font-size:12.5px}\n"
    ".answer{font-weight:600}.figures{margin:4px 0;padding-left:20px}\n"
    "table{border-collapse:collapse;margin:8px 0 16px;font-size:13px}"
    "th,td{border:1px solid #d0d7de;padding:3px 8px;text-align:left}th{background:#f6f8fa}\n"
    "figure{margin:16px 0}figcaption{color:#59636e;font-size:12.5px}\n"
    "svg{display:block;max-width:100%;height:auto}\n"
    "svg text{font:12px sans-serif;fill:#1f2328}svg text.total{font-weight:600}\n"
    "svg .grid{stroke:#e6e9ed;stroke-width:1}svg .axis{stroke:#59636e;stroke-width:1}\n"
    "svg .zero{stroke:#59636e;stroke-width:1;stroke-dasharray:4 3}\n";

static void html_table(out *o, const grid *g) {
    if (!g->nrows) return;
    put(o, "<table>\n<thead><tr>");
    for (int k = 0; k < g->ncols; k++) {
        put(o, "<th>");
        put_xml(o, grid_at(g, 0, k));
        put(o, "</th>");
    }
    put(o, "</tr></thead>\n<tbody>\n");
    for (int r = 1; r < g->nrows; r++) {
        put(o, "<tr>");
        for (int k = 0; k < g->ncols; k++) {
            put(o, "<td>");
            put_xml(o, grid_at(g, r, k));
            put(o, "</td>");
        }
        put(o, "</tr>\n");
    }
    put(o, "</tbody>\n</table>\n");
}

static void html_head(out *o, const json_t *doc) {
    put(o, "<!DOCTYPE html>\n<html xmlns=\"http://www.w3.org/1999/xhtml\" lang=\"en\">\n<head>\n"
           "<meta charset=\"utf-8\"/>\n"
           "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\"/>\n<title>");
    put_xml(o, ft_report_str(doc, "title", ""));
    putf(o, "</title>\n<style>\n%s</style>\n</head>\n<body>\n<h1>", html_style);
    put_xml(o, ft_report_str(doc, "title", ""));
    put(o, "</h1>\n<p class=\"meta\">");
    put_xml(o, ft_report_str(doc, "date", ""));
    static const char *const keys[] = {"backend", "device", "clock"};
    for (int i = 0; i < 3; i++)
        if (json_object_get(doc, keys[i])) {
            putf(o, " &#183; %s <code>", keys[i]);
            put_xml(o, ft_report_str(doc, keys[i], ""));
            put(o, "</code>");
        }
    put(o, "</p>\n");
    if (json_object_get(doc, "command")) {
        put(o, "<p class=\"meta\">Regenerate: <code>");
        put_xml(o, ft_report_str(doc, "command", ""));
        put(o, "</code></p>\n");
    }
}

static const char *verdict_class(const char *v) {
    return strcmp(v, "holds") == 0           ? "holds"
           : strcmp(v, "does not hold") == 0 ? "does-not-hold"
           : strcmp(v, "inconclusive") == 0  ? "inconclusive"
                                             : "measured";
}

/* The banner of a report whose steps were not all measured cleanly (report_verdict.c). */
static void html_busy(out *o, const json_t *doc) {
    char text[512];
    if (!ft_report_busy_text(doc, text, sizeof text)) return;
    put(o, "<div class=\"busy\" id=\"busy\"><p>");
    put_xml(o, text);
    put(o, "</p></div>\n");
}

/* Why a claim's verdict was withheld, under its badge. */
static void html_withheld(out *o, const json_t *c) {
    const char *why = json_string_value(json_object_get(c, "withheld"));
    char text[256];
    if (!why || !*why) return;
    put(o, "<p class=\"withheld\">Verdict withheld: ");
    put_xml(o, ft_report_verdict_text(c, text, sizeof text));
    put(o, "</p>\n");
}

static void html_figures(out *o, const json_t *fig) {
    if (!json_object_size(fig)) return;
    put(o, "<ul class=\"figures\">\n");
    const char *k;
    const json_t *v;
    char buf[64];
    json_object_foreach((json_t *)fig, k, v) {
        put(o, "<li><code>");
        put_xml(o, k);
        put(o, "</code>: ");
        put_xml(o, scalar_text(v, buf, sizeof buf));
        put(o, "</li>\n");
    }
    put(o, "</ul>\n");
}

static void html_claim(out *o, const json_t *c) {
    const char *verdict = ft_report_str(c, "verdict", "measured"), *cls = verdict_class(verdict);
    putf(o, "<div class=\"claim %s\"", cls);
    if (json_object_get(c, "id")) {
        put_id(o, " id=\"claim-", ft_report_str(c, "id", ""));
        put(o, "\"");
    }
    putf(o, ">\n<p><span class=\"badge %s\">", cls);
    put_xml(o, verdict);
    put(o, "</span>");
    if (json_object_get(c, "id")) {
        put(o, " <code>");
        put_xml(o, ft_report_str(c, "id", ""));
        put(o, "</code>");
    }
    put(o, "</p>\n");
    html_withheld(o, c);
    put(o, "<blockquote><p>&#8220;");
    put_xml(o, ft_report_str(c, "claim", ""));
    put(o, "&#8221;</p>");
    if (json_object_get(c, "source")) {
        put(o, "<p class=\"source\">&#8212; ");
        put_xml(o, ft_report_str(c, "source", ""));
        put(o, "</p>");
    }
    put(o, "</blockquote>\n<p class=\"answer\">");
    put_xml(o, ft_report_str(c, "answer", ""));
    put(o, "</p>\n");
    html_figures(o, json_object_get(c, "figures"));
    if (json_object_get(c, "command")) {
        put(o, "<p class=\"meta\">Measured by <code>");
        put_xml(o, ft_report_str(c, "command", ""));
        put(o, "</code></p>\n");
    }
    put(o, "</div>\n");
}

static void html_claims(out *o, const json_t *doc) {
    const json_t *claims = json_object_get(doc, "claims");
    put(o, "<section id=\"answers\">\n<h2>Answers</h2>\n");
    if (!json_array_size(claims)) put(o, "<p class=\"meta\">No claims in this report.</p>\n");
    for (size_t i = 0; i < json_array_size(claims); i++)
        html_claim(o, json_array_get(claims, i));
    put(o, "</section>\n");
}

static ft_status html_chart(out *o, const json_t *chart, ft_report_palette *segs,
                            ft_report_palette *series) {
    put(o, "<figure");
    if (json_object_get(chart, "id")) {
        put_id(o, " id=\"chart-", ft_report_str(chart, "id", ""));
        put(o, "\"");
    }
    put(o, ">\n<h3>");
    put_xml(o, ft_report_str(chart, "title", ""));
    put(o, "</h3>\n");
    int stacked = strcmp(ft_report_str(chart, "kind", ""), "stacked") == 0;
    ft_status s = stacked ? svg_stacked(o, chart, segs) : svg_lines(o, chart, series);
    if (s) return s;
    if (json_object_get(chart, "note")) {
        put(o, "<figcaption>");
        put_xml(o, ft_report_str(chart, "note", ""));
        put(o, "</figcaption>\n");
    }
    grid g;
    if ((s = grid_chart(chart, &g)) == FT_OK) html_table(o, &g);
    grid_free(&g);
    put(o, "</figure>\n");
    return s;
}

static ft_status html_charts(out *o, const json_t *doc) {
    const json_t *charts = json_object_get(doc, "charts");
    if (!json_array_size(charts)) return FT_OK;
    /* One palette per kind over the whole page: a label keeps its colour from chart to chart. */
    ft_report_palette segs = {0}, series = {0};
    for (size_t i = 0; i < json_array_size(charts); i++) {
        const json_t *c = json_array_get(charts, i);
        if (strcmp(ft_report_str(c, "kind", ""), "stacked") == 0)
            ft_report_stacked_labels(c, &segs);
    }
    put(o, "<section id=\"charts\">\n<h2>Charts</h2>\n");
    ft_status s = FT_OK;
    for (size_t i = 0; i < json_array_size(charts) && !s; i++)
        s = html_chart(o, json_array_get(charts, i), &segs, &series);
    put(o, "</section>\n");
    ft_report_palette_free(&segs);
    ft_report_palette_free(&series);
    return s;
}

static ft_status html_tables(out *o, const json_t *doc) {
    const json_t *tables = json_object_get(doc, "tables");
    if (!json_array_size(tables)) return FT_OK;
    put(o, "<section id=\"tables\">\n<h2>Tables</h2>\n");
    ft_status s = FT_OK;
    for (size_t i = 0; i < json_array_size(tables) && !s; i++) {
        const json_t *t = json_array_get(tables, i);
        put(o, "<h3");
        if (json_object_get(t, "id")) {
            put_id(o, " id=\"table-", ft_report_str(t, "id", ""));
            put(o, "\"");
        }
        put(o, ">");
        put_xml(o, ft_report_str(t, "title", ""));
        put(o, "</h3>\n");
        grid g;
        if ((s = grid_table(t, &g)) == FT_OK) html_table(o, &g);
        grid_free(&g);
    }
    put(o, "</section>\n");
    return s;
}

static ft_status html_machine(out *o, const json_t *doc) {
    machine_view m;
    ft_status s = machine_build(doc, &m);
    if (!s && m.kv.nrows > 1) {
        put(o, "<section id=\"machine\">\n<h2>Machine</h2>\n");
        html_table(o, &m.kv);
        for (int i = 0; i < m.nsub; i++) {
            put(o, "<h3>");
            put_xml(o, m.sub_title[i]);
            put(o, "</h3>\n");
            html_table(o, &m.sub[i]);
        }
        put(o, "</section>\n");
    }
    machine_free(&m);
    return s;
}

static ft_status write_html(out *o, const json_t *doc) {
    html_head(o, doc);
    html_busy(o, doc);
    html_claims(o, doc);
    ft_status s = html_charts(o, doc);
    if (!s) s = html_tables(o, doc);
    if (!s) s = html_machine(o, doc);
    put(o, "<p class=\"meta\">Written by flaretune from a ");
    put(o, FT_REPORT_FORMAT);
    put(o, " document (report.json beside this file).</p>\n</body>\n</html>\n");
    return s ? s : o->status;
}

/* ==== the Markdown file =========================================================================
 */

static void md_table(out *o, const grid *g) {
    if (!g->nrows || !g->ncols) return;
    for (int r = 0; r < g->nrows; r++) {
        put(o, "|");
        for (int k = 0; k < g->ncols; k++) {
            put(o, " ");
            put_md(o, grid_at(g, r, k));
            put(o, " |");
        }
        put(o, "\n");
        if (r == 0) {
            put(o, "|");
            for (int k = 0; k < g->ncols; k++)
                put(o, "---|");
            put(o, "\n");
        }
    }
    put(o, "\n");
}

/* A code span that holds any text: as many backticks around it as it never contains. */
static void md_code(out *o, const char *s) {
    int run = 0, longest = 0;
    for (const char *p = s; *p; p++) {
        run = *p == '`' ? run + 1 : 0;
        if (run > longest) longest = run;
    }
    for (int i = 0; i <= longest; i++)
        put(o, "`");
    if (longest) put(o, " ");
    for (const char *p = s; *p; p++)
        fputc(*p == '\n' || *p == '\r' ? ' ' : *p, o->f);
    if (longest) put(o, " ");
    for (int i = 0; i <= longest; i++)
        put(o, "`");
}

static void md_head(out *o, const json_t *doc) {
    put(o, "# ");
    put_md(o, ft_report_str(doc, "title", ""));
    put(o, "\n\n");
    put_md(o, ft_report_str(doc, "date", ""));
    static const char *const keys[] = {"backend", "device", "clock"};
    for (int i = 0; i < 3; i++)
        if (json_object_get(doc, keys[i])) {
            putf(o, " · %s ", keys[i]);
            md_code(o, ft_report_str(doc, keys[i], ""));
        }
    put(o, "\n\n");
    if (json_object_get(doc, "command")) {
        put(o, "Regenerate: ");
        md_code(o, ft_report_str(doc, "command", ""));
        put(o, "\n\n");
    }
}

static void md_claims(out *o, const json_t *doc) {
    const json_t *claims = json_object_get(doc, "claims");
    put(o, "## Answers\n\n");
    if (!json_array_size(claims)) put(o, "No claims in this report.\n\n");
    char buf[64], verdict[256];
    for (size_t i = 0; i < json_array_size(claims); i++) {
        const json_t *c = json_array_get(claims, i);
        put(o, "- **");
        put_md(o, ft_report_verdict_text(c, verdict, sizeof verdict));
        put(o, "**");
        if (json_object_get(c, "id")) {
            put(o, " ");
            md_code(o, ft_report_str(c, "id", ""));
        }
        put(o, ": \"");
        put_md(o, ft_report_str(c, "claim", ""));
        put(o, "\"");
        if (json_object_get(c, "source")) {
            put(o, " (");
            put_md(o, ft_report_str(c, "source", ""));
            put(o, ")");
        }
        put(o, "\n  - Answer: ");
        put_md(o, ft_report_str(c, "answer", ""));
        put(o, "\n");
        const json_t *fig = json_object_get(c, "figures");
        const char *k;
        const json_t *v;
        json_object_foreach((json_t *)fig, k, v) {
            put(o, "  - ");
            md_code(o, k);
            put(o, ": ");
            put_md(o, scalar_text(v, buf, sizeof buf));
            put(o, "\n");
        }
        if (json_object_get(c, "command")) {
            put(o, "  - Measured by ");
            md_code(o, ft_report_str(c, "command", ""));
            put(o, "\n");
        }
    }
    put(o, "\n");
}

static ft_status md_charts(out *o, const json_t *doc) {
    const json_t *charts = json_object_get(doc, "charts");
    if (!json_array_size(charts)) return FT_OK;
    put(o, "## Charts\n\n");
    for (size_t i = 0; i < json_array_size(charts); i++) {
        const json_t *c = json_array_get(charts, i);
        put(o, "### ");
        put_md(o, ft_report_str(c, "title", ""));
        put(o, "\n\n");
        if (json_object_get(c, "note")) {
            put_md(o, ft_report_str(c, "note", ""));
            put(o, "\n\n");
        }
        grid g;
        ft_status s = grid_chart(c, &g);
        if (!s) md_table(o, &g);
        grid_free(&g);
        if (s) return s;
    }
    return FT_OK;
}

static ft_status md_tables(out *o, const json_t *doc) {
    const json_t *tables = json_object_get(doc, "tables");
    if (!json_array_size(tables)) return FT_OK;
    put(o, "## Tables\n\n");
    for (size_t i = 0; i < json_array_size(tables); i++) {
        const json_t *t = json_array_get(tables, i);
        put(o, "### ");
        put_md(o, ft_report_str(t, "title", ""));
        put(o, "\n\n");
        grid g;
        ft_status s = grid_table(t, &g);
        if (!s) md_table(o, &g);
        grid_free(&g);
        if (s) return s;
    }
    return FT_OK;
}

static ft_status md_machine(out *o, const json_t *doc) {
    machine_view m;
    ft_status s = machine_build(doc, &m);
    if (!s && m.kv.nrows > 1) {
        put(o, "## Machine\n\n");
        md_table(o, &m.kv);
        for (int i = 0; i < m.nsub; i++) {
            put(o, "### ");
            put_md(o, m.sub_title[i]);
            put(o, "\n\n");
            md_table(o, &m.sub[i]);
        }
    }
    machine_free(&m);
    return s;
}

/* The banner of a report whose steps were not all measured cleanly (report_verdict.c). */
static void md_busy(out *o, const json_t *doc) {
    char text[512];
    if (!ft_report_busy_text(doc, text, sizeof text)) return;
    put(o, "> ");
    put_md(o, text);
    put(o, "\n\n");
}

static ft_status write_md(out *o, const json_t *doc) {
    md_head(o, doc);
    md_busy(o, doc);
    md_claims(o, doc);
    ft_status s = md_charts(o, doc);
    if (!s) s = md_tables(o, doc);
    if (!s) s = md_machine(o, doc);
    return s ? s : o->status;
}

static ft_status write_json(out *o, const json_t *doc) {
    if (json_dumpf(doc, o->f, JSON_INDENT(2)) != 0) return FT_EIO;
    put(o, "\n");
    return FT_OK;
}

/* ==== the three files, atomically ==============================================================
 */

/* Flush, sync and close a temporary file; on failure it is removed. */
static ft_status close_tmp(FILE *f, const char *tmp, const char *path, ft_err *err) {
    int failed = ferror(f) || fflush(f) != 0 || fsync(fileno(f)) != 0;
    int saved = errno;
    if (fclose(f) != 0 && !failed) {
        failed = 1;
        saved = errno;
    }
    if (!failed) return FT_OK;
    unlink(tmp);
    return ft_err_set(err, FT_EIO, "%s: write failed: %s", path, strerror(saved ? saved : EIO));
}

typedef ft_status (*writer)(out *, const json_t *);

/* Write one file to a temporary name beside path; *tmp holds it on success. */
static ft_status write_tmp(const char *path, writer w, const json_t *doc, char *tmp, size_t n,
                           ft_err *err) {
    FILE *f = ft_file_create_tmp(path, tmp, n, err);
    if (!f) return err ? err->status : FT_EIO;
    out o = {f, FT_OK};
    errno = 0;
    ft_status s = w(&o, doc);
    if (s) {
        int saved = errno;
        fclose(f);
        unlink(tmp);
        if (s == FT_EIO)
            return ft_err_set(err, FT_EIO, "%s: write failed: %s", path,
                              strerror(saved ? saved : EIO));
        if (s == FT_ENOMEM) return ft_err_set(err, s, "%s: out of memory", path);
        return ft_err_set(err, s, "%s: a value could not be drawn (not finite)", path);
    }
    return close_tmp(f, tmp, path, err);
}

/* The three files of the judged document (the verdicts its evidence allows). */
static ft_status render_judged(const json_t *doc, const char *dir, ft_err *err);

ft_status ft_report_render(const json_t *doc, const char *dir, ft_err *err) {
    ft_status s = ft_report_check(doc, err);
    if (s) return s;
    json_t *judged = json_deep_copy(doc);
    if (!judged) return ft_err_set(err, FT_ENOMEM, "out of memory");
    ft_report_judge(judged);
    s = render_judged(judged, dir, err);
    json_decref(judged);
    return s;
}

static ft_status render_judged(const json_t *doc, const char *dir, ft_err *err) {
    ft_status s = ft_dir_make(dir, err);
    if (s) return s;
    static const char *const names[] = {"report.html", "report.md", "report.json"};
    static const writer writers[] = {write_html, write_md, write_json};
    char path[3][4096], tmp[3][4096 + 16];
    int made = 0;
    for (int k = 0; k < 3 && !s; k++) {
        if (snprintf(path[k], sizeof path[k], "%s/%s", dir, names[k]) >= (int)sizeof path[k])
            s = ft_err_set(err, FT_EIO, "%s: path too long", dir);
        else if ((s = write_tmp(path[k], writers[k], doc, tmp[k], sizeof tmp[k], err)) == FT_OK)
            made++;
    }
    if (s) {
        for (int k = 0; k < made; k++)
            unlink(tmp[k]);
        return s;
    }
    const char *tmps[3] = {tmp[0], tmp[1], tmp[2]}, *paths[3] = {path[0], path[1], path[2]};
    return ft_file_commit_all(3, tmps, paths, err);
}
