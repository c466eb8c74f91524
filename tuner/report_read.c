/* report_read.c: reading a report document's paths, strings and chart data (see
 * tuner/report_read.h). */
#include "tuner/report_read.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/stats.h"

static void path_cut(ft_report_path *p, int w) {
    if (w >= (int)sizeof p->s) memcpy(p->s + sizeof p->s - 4, "...", 4);
}

ft_report_path ft_report_path_key(const char *at, const char *key) {
    ft_report_path p;
    path_cut(&p, snprintf(p.s, sizeof p.s, "%s%s%s", at, *at ? "." : "", key));
    return p;
}

ft_report_path ft_report_path_index(const char *at, size_t i) {
    ft_report_path p;
    path_cut(&p, snprintf(p.s, sizeof p.s, "%s[%zu]", at, i));
    return p;
}

const char *ft_report_str(const json_t *obj, const char *key, const char *dflt) {
    const char *s = json_string_value(json_object_get(obj, key));
    return s ? s : dflt;
}

static void extent_add(double *lo, double *hi, double v, int first) {
    if (first || v < *lo) *lo = v;
    if (first || v > *hi) *hi = v;
}

ft_report_extent ft_report_lines_extent(const json_t *chart) {
    ft_report_extent e = {0, 0, 0, 0, 0};
    const json_t *series = json_object_get(chart, "series");
    for (size_t s = 0; s < json_array_size(series); s++) {
        const json_t *ser = json_array_get(series, s), *pts = json_object_get(ser, "points");
        const json_t *lo = json_object_get(ser, "lo"), *hi = json_object_get(ser, "hi");
        for (size_t i = 0; i < json_array_size(pts); i++) {
            extent_add(&e.x0, &e.x1, ft_report_point(pts, i, 0), e.n == 0);
            extent_add(&e.y0, &e.y1, ft_report_point(pts, i, 1), e.n == 0);
            if (lo) extent_add(&e.y0, &e.y1, json_number_value(json_array_get(lo, i)), 0);
            if (hi) extent_add(&e.y0, &e.y1, json_number_value(json_array_get(hi, i)), 0);
            e.n++;
        }
    }
    return e;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double *ft_report_lines_xs(const json_t *chart, int *n, int *oom) {
    const json_t *series = json_object_get(chart, "series");
    size_t total = 0;
    for (size_t s = 0; s < json_array_size(series); s++)
        total += json_array_size(json_object_get(json_array_get(series, s), "points"));
    *n = 0;
    *oom = 0;
    if (!total) return NULL;
    double *xs = malloc(total * sizeof *xs);
    if (!xs) {
        *oom = 1;
        return NULL;
    }
    size_t k = 0;
    for (size_t s = 0; s < json_array_size(series); s++) {
        const json_t *pts = json_object_get(json_array_get(series, s), "points");
        for (size_t i = 0; i < json_array_size(pts); i++)
            xs[k++] = ft_report_point(pts, i, 0);
    }
    qsort(xs, total, sizeof *xs, cmp_double);
    size_t d = 0;
    for (size_t i = 0; i < total; i++)
        if (d == 0 || xs[i] != xs[d - 1]) xs[d++] = xs[i];
    *n = (int)d;
    return xs;
}

double ft_report_point(const json_t *pts, size_t i, int k) {
    return json_number_value(json_array_get(json_array_get(pts, i), (size_t)k));
}

int ft_report_point_bound(const json_t *ser, size_t i) {
    return json_is_true(json_array_get(json_object_get(ser, "bound"), i));
}

int *ft_report_points_order(const json_t *pts, size_t *n) {
    *n = json_array_size(pts);
    double *xs = malloc((*n ? *n : 1) * sizeof *xs);
    int *order = malloc((*n ? *n : 1) * sizeof *order);
    for (size_t i = 0; xs && i < *n; i++)
        xs[i] = ft_report_point(pts, i, 0);
    if (!xs || !order || !ft_argsort(xs, (int)*n, order)) {
        free(order);
        order = NULL;
    }
    free(xs);
    return order;
}

void ft_report_stacked_labels(const json_t *chart, ft_report_palette *labels) {
    const json_t *bars = json_object_get(chart, "bars");
    for (size_t i = 0; i < json_array_size(bars); i++) {
        const json_t *segs = json_object_get(json_array_get(bars, i), "segments");
        for (size_t j = 0; j < json_array_size(segs); j++)
            ft_report_palette_index(labels, ft_report_str(json_array_get(segs, j), "label", ""));
    }
}

double ft_report_bar_total(const json_t *bar) {
    double t = 0;
    const json_t *segs = json_object_get(bar, "segments");
    for (size_t j = 0; j < json_array_size(segs); j++)
        t += json_number_value(json_object_get(json_array_get(segs, j), "value"));
    return t;
}
