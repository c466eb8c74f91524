/* report_render.c: a report document (docs/report.md) rendered as HTML with inline SVG, as
 * Markdown and as pretty-printed JSON (tuner/report.h).
 *
 * The page and the Markdown file are one document, built here once as data (tuner/report_doc.h):
 * the head, the banner of a busy machine, the answers, the charts (each drawn by report_svg.c on
 * the page, with the table of its data in both), the document's tables and the machine. The
 * writers of report_doc_html.c and report_doc_md.c write it and escape its text; nothing here
 * writes markup. Then the three files are written to temporary names beside their places and
 * renamed into place together.
 */
#include "tuner/report.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/format.h"
#include "core/json.h"
#include "core/npy.h"
#include "tuner/report_doc.h"
#include "tuner/report_read.h"
#include "tuner/report_svg.h"

/* ==== the tables of the charts ================================================================ */

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

/* Whether segment j of a bar is the first of its label there. */
static int first_of_label(const json_t *segs, size_t j) {
    const char *label = ft_report_str(json_array_get(segs, j), "label", "");
    for (size_t i = 0; i < j; i++)
        if (strcmp(ft_report_str(json_array_get(segs, i), "label", ""), label) == 0) return 0;
    return 1;
}

/* A stacked chart whose bars share few of their labels, as a list: bar, segment, value, one row
 * for each label of a bar and one for its total. */
static ft_status stacked_list(ft_doc_node *parent, const json_t *chart) {
    const char *unit = ft_report_str(chart, "unit", "");
    char buf[64];
    ft_doc_node *t = ft_doc_table(parent, 3);
    char **row = ft_doc_row(t);
    ft_doc_cell(t, row, 0, "bar");
    ft_doc_cell(t, row, 1, "segment");
    ft_doc_cell(t, row, 2, "value");
    const json_t *bars = json_object_get(chart, "bars");
    for (size_t i = 0; i < json_array_size(bars); i++) {
        const json_t *bar = json_array_get(bars, i), *segs = json_object_get(bar, "segments");
        const char *name = ft_report_str(bar, "label", "");
        for (size_t j = 0; j < json_array_size(segs); j++) {
            if (!first_of_label(segs, j)) continue;
            const char *label = ft_report_str(json_array_get(segs, j), "label", "");
            double v;
            bar_value(bar, label, &v);
            row = ft_doc_row(t);
            ft_doc_cell(t, row, 0, name);
            ft_doc_cell(t, row, 1, label);
            ft_doc_cell(t, row, 2, ft_report_fmt_value(v, unit, 4, buf, sizeof buf));
        }
        row = ft_doc_row(t);
        ft_doc_cell(t, row, 0, name);
        ft_doc_cell(t, row, 1, "total");
        ft_doc_cell(t, row, 2,
                    ft_report_fmt_value(ft_report_bar_total(bar), unit, 4, buf, sizeof buf));
    }
    return FT_OK;
}

/* Stacked: one row per bar, one column per segment label, then the total; as a list instead
 * when that grid would be mostly empty (more than four cells per segment the bars have): bars
 * of labels their own would otherwise grow the page as bars x labels (20,000 bars of a label
 * each: gigabytes). */
static ft_status stacked_table(ft_doc_node *parent, const json_t *chart) {
    ft_report_palette labels = {0};
    ft_report_stacked_labels(chart, &labels);
    const json_t *bars = json_object_get(chart, "bars");
    double cells = (double)json_array_size(bars) * (labels.n + 2), segments = 0;
    for (size_t i = 0; i < json_array_size(bars); i++)
        segments +=
            (double)json_array_size(json_object_get(json_array_get(bars, i), "segments")) + 1;
    if (cells > 4 * segments + 64) {
        ft_report_palette_free(&labels);
        return stacked_list(parent, chart);
    }
    const char *unit = ft_report_str(chart, "unit", "");
    char buf[64];
    ft_doc_node *t = ft_doc_table(parent, labels.n + 2);
    char **row = ft_doc_row(t);
    ft_doc_cell(t, row, 0, "bar");
    for (int k = 0; k < labels.n; k++)
        ft_doc_cell(t, row, k + 1, labels.labels[k]);
    ft_doc_cell(t, row, labels.n + 1, "total");
    for (size_t i = 0; i < json_array_size(bars); i++) {
        const json_t *bar = json_array_get(bars, i);
        row = ft_doc_row(t);
        ft_doc_cell(t, row, 0, ft_report_str(bar, "label", ""));
        for (int k = 0; k < labels.n; k++) {
            double v;
            int has = bar_value(bar, labels.labels[k], &v);
            ft_doc_cell(t, row, k + 1,
                        has ? ft_report_fmt_value(v, unit, 4, buf, sizeof buf) : "-");
        }
        ft_doc_cell(t, row, labels.n + 1,
                    ft_report_fmt_value(ft_report_bar_total(bar), unit, 4, buf, sizeof buf));
    }
    ft_report_palette_free(&labels);
    return FT_OK;
}

/* "1.2 ms" or "1.2 ms [1.1 ms, 1.3 ms]": point i of a series, with "(busy: an upper bound)"
 * where its `bound` says so. */
static void series_cell(const json_t *ser, size_t i, const char *unit, char *buf, size_t n) {
    const json_t *lo = json_object_get(ser, "lo"), *hi = json_object_get(ser, "hi");
    char y[48], l[48] = "-", h[48] = "-";
    ft_report_fmt_value(ft_report_point(json_object_get(ser, "points"), i, 1), unit, 4, y,
                        sizeof y);
    if (lo) ft_report_fmt_value(json_number_value(json_array_get(lo, i)), unit, 4, l, sizeof l);
    if (hi) ft_report_fmt_value(json_number_value(json_array_get(hi, i)), unit, 4, h, sizeof h);
    const char *mark = ft_report_point_bound(ser, i) ? " (busy: an upper bound)" : "";
    if (lo || hi)
        snprintf(buf, n, "%s [%s, %s]%s", y, l, h, mark);
    else
        snprintf(buf, n, "%s%s", y, mark);
}

/* The series' points in order of x, and how far the rows have walked each. */
typedef struct walk {
    int **order;
    size_t *npts, *at;
    int ns;
} walk;

static void walk_free(walk *w) {
    for (int s = 0; w->order && s < w->ns; s++)
        free(w->order[s]);
    free(w->order);
    free(w->npts);
    free(w->at);
}

static ft_status walk_init(walk *w, const json_t *series) {
    w->ns = (int)json_array_size(series);
    size_t n = (size_t)(w->ns ? w->ns : 1);
    w->order = calloc(n, sizeof *w->order);
    w->npts = calloc(n, sizeof *w->npts);
    w->at = calloc(n, sizeof *w->at);
    int bad = !w->order || !w->npts || !w->at;
    for (int s = 0; s < w->ns && !bad; s++)
        bad = !(w->order[s] = ft_report_points_order(
                    json_object_get(json_array_get(series, (size_t)s), "points"), &w->npts[s]));
    return bad ? FT_ENOMEM : FT_OK;
}

/* Lines: one row per distinct x, one column per series (its first point at that x, "-" when
 * it has none). Each series' sorted points are walked once alongside the sorted xs. */
static ft_status lines_table(ft_doc_node *parent, const json_t *chart) {
    const json_t *series = json_object_get(chart, "series");
    const char *unit = ft_report_str(chart, "unit", "");
    int nx, oom;
    double *xs = ft_report_lines_xs(chart, &nx, &oom);
    walk w = {0};
    ft_status s = oom ? FT_ENOMEM : walk_init(&w, series);
    ft_doc_node *t = s ? NULL : ft_doc_table(parent, w.ns + 1);
    char **row = ft_doc_row(t), buf[192]; /* three values of 48 and a mark */
    ft_doc_cell(t, row, 0, ft_report_str(chart, "x_label", "x"));
    for (int k = 0; k < w.ns; k++)
        ft_doc_cell(t, row, k + 1, ft_report_str(json_array_get(series, (size_t)k), "label", ""));
    for (int i = 0; i < nx && t; i++) {
        row = ft_doc_row(t);
        snprintf(buf, sizeof buf, "%.6g", xs[i]);
        ft_doc_cell(t, row, 0, buf);
        for (int k = 0; k < w.ns; k++) {
            const json_t *ser = json_array_get(series, (size_t)k);
            const json_t *pts = json_object_get(ser, "points");
            const int *order = w.order[k];
            size_t *at = &w.at[k];
            while (*at < w.npts[k] && ft_report_point(pts, (size_t)order[*at], 0) < xs[i])
                (*at)++;
            if (*at < w.npts[k] && ft_report_point(pts, (size_t)order[*at], 0) == xs[i])
                series_cell(ser, (size_t)order[*at], unit, buf, sizeof buf);
            else
                snprintf(buf, sizeof buf, "-");
            ft_doc_cell(t, row, k + 1, buf);
        }
    }
    walk_free(&w);
    free(xs);
    return s;
}

static ft_status chart_table(ft_doc_node *parent, const json_t *chart) {
    return strcmp(ft_report_str(chart, "kind", ""), "stacked") == 0 ? stacked_table(parent, chart)
                                                                    : lines_table(parent, chart);
}

/* A table of the document as it is. */
static void doc_table(ft_doc_node *parent, const json_t *tbl) {
    const json_t *cols = json_object_get(tbl, "columns"), *rows = json_object_get(tbl, "rows");
    int ncols = (int)json_array_size(cols);
    ft_doc_node *t = ft_doc_table(parent, ncols);
    char **row = ft_doc_row(t), buf[64];
    for (int k = 0; k < ncols; k++)
        ft_doc_cell(t, row, k, json_string_value(json_array_get(cols, (size_t)k)));
    for (size_t r = 0; r < json_array_size(rows); r++) {
        row = ft_doc_row(t);
        for (int k = 0; k < ncols; k++)
            ft_doc_cell(t, row, k,
                        ft_json_scalar_text(json_array_get(json_array_get(rows, r), (size_t)k), "-",
                                            buf, sizeof buf));
    }
}

/* ==== the machine: key/value rows, nested objects flattened as a.b, arrays of objects as their
 * own small tables ============================================================================= */

#define MAX_SUBTABLES 16

typedef struct machine_view {
    ft_doc_node *section, *kv; /* kv: key, value */
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
        n += strlen(ft_json_scalar_text(json_array_get(a, i), "-", buf, sizeof buf)) + 2;
    char *out = malloc(n);
    if (!out) return NULL;
    out[0] = '\0';
    for (size_t i = 0; i < json_array_size(a); i++) {
        if (i) strcat(out, ", ");
        strcat(out, ft_json_scalar_text(json_array_get(a, i), "-", buf, sizeof buf));
    }
    return out;
}

/* A scalar, an array of scalars joined, or a compact JSON dump of anything else, plus the
 * hint. Caller frees. */
static char *value_text(const char *key, const json_t *v) {
    char buf[64], hint[64];
    if (json_is_array(v) && all_scalars(v)) return join_scalars(v);
    if (json_is_object(v) || json_is_array(v)) return json_dumps(v, JSON_COMPACT);
    const char *s = ft_json_scalar_text(v, "-", buf, sizeof buf);
    value_hint(key, v, hint, sizeof hint);
    size_t n = strlen(s) + strlen(hint) + 1;
    char *out = malloc(n);
    if (out) snprintf(out, n, "%s%s", s, hint);
    return out;
}

/* Cell k of row: the value of key v, or "-" when v is NULL. */
static void value_cell(ft_doc_node *t, char **row, int k, const char *key, const json_t *v) {
    char *text = v ? value_text(key, v) : strdup("-");
    if (!text && t) t->doc->oom = 1;
    ft_doc_cell(t, row, k, text);
    free(text);
}

static void kv_add(ft_doc_node *t, const char *key, const json_t *v) {
    char **row = ft_doc_row(t);
    ft_doc_cell(t, row, 0, key);
    value_cell(t, row, 1, key, v);
}

static int all_objects(const json_t *a) {
    if (!json_array_size(a)) return 0;
    for (size_t i = 0; i < json_array_size(a); i++)
        if (!json_is_object(json_array_get(a, i))) return 0;
    return 1;
}

/* An array of objects as a table under its title: the union of their keys as columns. */
static void machine_subtable(machine_view *m, const char *title, const json_t *a) {
    if (m->nsub == MAX_SUBTABLES) {
        kv_add(m->kv, title, a); /* past the limit: shown as JSON */
        return;
    }
    m->nsub++;
    ft_report_palette keys = {0};
    const char *k;
    const json_t *v;
    for (size_t i = 0; i < json_array_size(a); i++)
        json_object_foreach(json_array_get(a, i), k, v) ft_report_palette_index(&keys, k);
    ft_doc_heading(m->section, 3, NULL, title);
    ft_doc_node *t = ft_doc_table(m->section, keys.n);
    char **row = ft_doc_row(t);
    for (int c = 0; c < keys.n; c++)
        ft_doc_cell(t, row, c, keys.labels[c]);
    for (size_t i = 0; i < json_array_size(a); i++) {
        row = ft_doc_row(t);
        for (int c = 0; c < keys.n; c++)
            value_cell(t, row, c, keys.labels[c],
                       json_object_get(json_array_get(a, i), keys.labels[c]));
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
            kv_add(m->kv, p.s, v);
    }
}

/* The machine's section: the document's device, backend, clock and models and its `machine`,
 * left out when they give no key/value row. */
static void add_machine(ft_doc_node *root, const json_t *doc) {
    machine_view m = {ft_doc_add(root, FT_DOC_SECTION, NULL, "machine"), NULL, 0};
    ft_doc_heading(m.section, 2, NULL, "Machine");
    m.kv = ft_doc_table(m.section, 2);
    char **row = ft_doc_row(m.kv);
    ft_doc_cell(m.kv, row, 0, "key");
    ft_doc_cell(m.kv, row, 1, "value");
    static const char *const top[] = {"device", "backend", "clock", "models"};
    for (int i = 0; i < 4; i++) {
        const json_t *v = json_object_get(doc, top[i]);
        if (v) kv_add(m.kv, top[i], v);
    }
    const json_t *machine = json_object_get(doc, "machine");
    if (machine) machine_walk(&m, "", machine);
    if (m.kv && m.kv->nrows <= 1) ft_doc_drop(root, m.section);
}

/* ==== the document ============================================================================ */

/* The page's style sheet: the classes the builder below names. */
static const char *const page_style =
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

static void add_head(ft_doc_node *root, const json_t *doc) {
    ft_doc_heading(root, 1, NULL, ft_report_str(doc, "title", ""));
    ft_doc_node *meta = ft_doc_para(root, "meta", ft_report_str(doc, "date", ""));
    static const char *const keys[] = {"backend", "device", "clock"};
    for (int i = 0; i < 3; i++)
        if (json_object_get(doc, keys[i])) {
            char key[16];
            snprintf(key, sizeof key, "%s ", keys[i]);
            ft_doc_span_add(meta, FT_DOC_SEP, FT_DOC_BOTH, NULL, NULL);
            ft_doc_text(meta, key);
            ft_doc_code(meta, ft_report_str(doc, keys[i], ""));
        }
    if (json_object_get(doc, "command"))
        ft_doc_code(ft_doc_para(root, "meta", "Regenerate: "), ft_report_str(doc, "command", ""));
}

/* The banner of a report whose steps were not all measured cleanly (report_verdict.c). */
static void add_busy(ft_doc_node *root, const json_t *doc) {
    char text[512];
    if (ft_report_busy_text(doc, text, sizeof text))
        ft_doc_text(ft_doc_add(root, FT_DOC_NOTE, "busy", "busy"), text);
}

static const char *verdict_class(const char *v) {
    return strcmp(v, "holds") == 0           ? "holds"
           : strcmp(v, "does not hold") == 0 ? "does-not-hold"
           : strcmp(v, "inconclusive") == 0  ? "inconclusive"
                                             : "measured";
}

/* A claim's verdict: the verdict in its badge on the page, with why it was withheld beneath;
 * in Markdown the whole verdict text in bold. */
static void add_verdict(ft_doc_node *card, const json_t *c) {
    const char *verdict = ft_report_str(c, "verdict", "measured");
    const char *id = json_string_value(json_object_get(c, "id"));
    const char *why = json_string_value(json_object_get(c, "withheld"));
    char text[256];
    ft_report_verdict_text(c, text, sizeof text);
    ft_doc_node *lead = ft_doc_para(card, NULL, NULL);
    ft_doc_span_add(lead, FT_DOC_BADGE, FT_DOC_HTML, verdict_class(verdict), verdict);
    ft_doc_span_add(lead, FT_DOC_BADGE, FT_DOC_MD, NULL, text);
    if (id) {
        ft_doc_text(lead, " ");
        ft_doc_code(lead, id);
    }
    if (why && *why)
        ft_doc_text(ft_doc_only(ft_doc_para(card, "withheld", "Verdict withheld: "), FT_DOC_HTML),
                    text);
}

/* A claim: its verdict, the claim quoted with its source, the answer, the figures and the
 * command that measured it. */
static void add_claim(ft_doc_node *cards, const json_t *c) {
    char cls[64], buf[64];
    snprintf(cls, sizeof cls, "claim %s", verdict_class(ft_report_str(c, "verdict", "measured")));
    ft_doc_node *card = ft_doc_add(cards, FT_DOC_CARD, cls, NULL);
    ft_doc_anchor(card, "claim-", json_string_value(json_object_get(c, "id")));
    add_verdict(card, c);
    ft_doc_node *q = ft_doc_add(card, FT_DOC_QUOTE, NULL, NULL);
    ft_doc_text(q, ft_report_str(c, "claim", ""));
    if (json_object_get(c, "source")) ft_doc_para(q, "source", ft_report_str(c, "source", ""));
    ft_doc_node *answer = ft_doc_para(card, "answer", NULL);
    ft_doc_span_add(answer, FT_DOC_TEXT, FT_DOC_MD, NULL, "Answer: ");
    ft_doc_text(answer, ft_report_str(c, "answer", ""));
    const json_t *fig = json_object_get(c, "figures"), *v;
    const char *k;
    ft_doc_node *figures =
        json_object_size(fig) ? ft_doc_add(card, FT_DOC_LIST, "figures", NULL) : NULL;
    json_object_foreach((json_t *)fig, k, v) {
        ft_doc_node *item = ft_doc_para(figures, NULL, NULL);
        ft_doc_code(item, k);
        ft_doc_text(item, ": ");
        ft_doc_text(item, ft_json_scalar_text(v, "-", buf, sizeof buf));
    }
    if (json_object_get(c, "command"))
        ft_doc_code(ft_doc_para(card, "meta", "Measured by "), ft_report_str(c, "command", ""));
}

static void add_claims(ft_doc_node *root, const json_t *doc) {
    const json_t *claims = json_object_get(doc, "claims");
    ft_doc_node *sec = ft_doc_add(root, FT_DOC_SECTION, NULL, "answers");
    ft_doc_heading(sec, 2, NULL, "Answers");
    if (!json_array_size(claims)) ft_doc_para(sec, "meta", "No claims in this report.");
    ft_doc_node *cards = ft_doc_add(sec, FT_DOC_CARDS, NULL, NULL);
    for (size_t i = 0; i < json_array_size(claims); i++)
        add_claim(cards, json_array_get(claims, i));
}

/* The chart drawn for the page alone. */
static ft_status add_drawing(ft_doc_node *fig, const json_t *chart, ft_report_palette *segs,
                             ft_report_palette *series) {
    char *svg = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&svg, &n);
    if (!f) return FT_ENOMEM;
    ft_status s = ft_report_svg(f, chart, segs, series);
    if (ferror(f) && !s) s = FT_ENOMEM;
    if (fclose(f) != 0 && !s) s = FT_ENOMEM;
    if (s) {
        free(svg);
        return s;
    }
    ft_doc_raw(fig, svg, n);
    return FT_OK;
}

/* A chart: its title, its drawing, its note and the table of its data. */
static ft_status add_chart(ft_doc_node *sec, const json_t *chart, ft_report_palette *segs,
                           ft_report_palette *series) {
    ft_doc_node *fig = ft_doc_add(sec, FT_DOC_FIGURE, NULL, NULL);
    ft_doc_anchor(fig, "chart-", json_string_value(json_object_get(chart, "id")));
    ft_doc_heading(fig, 3, NULL, ft_report_str(chart, "title", ""));
    ft_status s = add_drawing(fig, chart, segs, series);
    if (s) return s;
    if (json_object_get(chart, "note"))
        ft_doc_text(ft_doc_add(fig, FT_DOC_CAPTION, NULL, NULL), ft_report_str(chart, "note", ""));
    return chart_table(fig, chart);
}

static ft_status add_charts(ft_doc_node *root, const json_t *doc) {
    const json_t *charts = json_object_get(doc, "charts");
    if (!json_array_size(charts)) return FT_OK;
    /* One palette per kind over the whole page: a label keeps its colour from chart to chart. */
    ft_report_palette segs = {0}, series = {0};
    for (size_t i = 0; i < json_array_size(charts); i++) {
        const json_t *c = json_array_get(charts, i);
        if (strcmp(ft_report_str(c, "kind", ""), "stacked") == 0)
            ft_report_stacked_labels(c, &segs);
    }
    ft_doc_node *sec = ft_doc_add(root, FT_DOC_SECTION, NULL, "charts");
    ft_doc_heading(sec, 2, NULL, "Charts");
    ft_status s = FT_OK;
    for (size_t i = 0; i < json_array_size(charts) && !s; i++)
        s = add_chart(sec, json_array_get(charts, i), &segs, &series);
    ft_report_palette_free(&segs);
    ft_report_palette_free(&series);
    return s;
}

static void add_tables(ft_doc_node *root, const json_t *doc) {
    const json_t *tables = json_object_get(doc, "tables");
    if (!json_array_size(tables)) return;
    ft_doc_node *sec = ft_doc_add(root, FT_DOC_SECTION, NULL, "tables");
    ft_doc_heading(sec, 2, NULL, "Tables");
    for (size_t i = 0; i < json_array_size(tables); i++) {
        const json_t *t = json_array_get(tables, i);
        ft_doc_anchor(ft_doc_heading(sec, 3, NULL, ft_report_str(t, "title", "")), "table-",
                      json_string_value(json_object_get(t, "id")));
        doc_table(sec, t);
    }
}

/* The page and the Markdown file of a judged document, as one document. */
static ft_status report_doc(const json_t *doc, ft_doc **out) {
    ft_doc *d = ft_doc_new(ft_report_str(doc, "title", ""), page_style);
    if (!d) return FT_ENOMEM;
    ft_doc_node *root = &d->root;
    add_head(root, doc);
    add_busy(root, doc);
    add_claims(root, doc);
    ft_status s = add_charts(root, doc);
    if (!s) {
        add_tables(root, doc);
        add_machine(root, doc);
        ft_doc_only(ft_doc_para(root, "meta",
                                "Written by flaretune from a " FT_REPORT_FORMAT
                                " document (report.json beside this file)."),
                    FT_DOC_HTML);
    }
    if (!s && d->oom) s = FT_ENOMEM;
    if (s) {
        ft_doc_free(d);
        return s;
    }
    *out = d;
    return FT_OK;
}

/* ==== the three files, atomically ============================================================= */

/* What the writers write: the judged document, and its page built by the first that needs it. */
typedef struct page {
    const json_t *doc;
    ft_doc *built;
} page;

static ft_status page_built(page *p) { return p->built ? FT_OK : report_doc(p->doc, &p->built); }

static ft_status write_html(FILE *f, page *p) {
    ft_status s = page_built(p);
    if (!s) ft_doc_write_html(p->built, f);
    return s;
}

static ft_status write_md(FILE *f, page *p) {
    ft_status s = page_built(p);
    if (!s) ft_doc_write_md(p->built, f);
    return s;
}

static ft_status write_json(FILE *f, page *p) {
    if (json_dumpf(p->doc, f, JSON_INDENT(2)) != 0) return FT_EIO;
    fputs("\n", f);
    return FT_OK;
}

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

typedef ft_status (*writer)(FILE *, page *);

/* Write one file to a temporary name beside path; *tmp holds it on success. */
static ft_status write_tmp(const char *path, writer w, page *p, char *tmp, size_t n, ft_err *err) {
    FILE *f = ft_file_create_tmp(path, tmp, n, err);
    if (!f) return err ? err->status : FT_EIO;
    errno = 0;
    ft_status s = w(f, p);
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
static ft_status render_judged(const json_t *doc, const char *dir, ft_err *err) {
    ft_status s = ft_dir_make(dir, err);
    if (s) return s;
    static const char *const names[] = {"report.html", "report.md", "report.json"};
    static const writer writers[] = {write_html, write_md, write_json};
    char path[3][4096], tmp[3][4096 + 16];
    int made = 0;
    page p = {doc, NULL};
    for (int k = 0; k < 3 && !s; k++) {
        if (snprintf(path[k], sizeof path[k], "%s/%s", dir, names[k]) >= (int)sizeof path[k])
            s = ft_err_set(err, FT_EIO, "%s: path too long", dir);
        else if ((s = write_tmp(path[k], writers[k], &p, tmp[k], sizeof tmp[k], err)) == FT_OK)
            made++;
    }
    ft_doc_free(p.built);
    if (s) {
        for (int k = 0; k < made; k++)
            unlink(tmp[k]);
        return s;
    }
    const char *tmps[3] = {tmp[0], tmp[1], tmp[2]}, *paths[3] = {path[0], path[1], path[2]};
    return ft_file_commit_all(3, tmps, paths, err);
}

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
