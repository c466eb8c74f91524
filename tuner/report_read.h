/* report_read.h: reading a report document (docs/report.md), what the schema check
 * (report_check.c), the SVG charts (report_svg.c) and the page's tables (report_render.c) share:
 * paths for messages and keys, strings with a default, and a chart's data (a lines chart's extent,
 * x values and points in order of x; a stacked chart's labels and totals). Read-only: the
 * document is never changed. */
#ifndef FLARETUNE_REPORT_READ_H
#define FLARETUNE_REPORT_READ_H

#include <stddef.h>

#include <jansson.h>

#include "tuner/report.h"

/* A path into the document: "charts[2].series[0]", "ceilings.levels"; one too long for the
 * buffer (a key of hundreds of bytes) ends in "...". */
typedef struct ft_report_path {
    char s[256];
} ft_report_path;

ft_report_path ft_report_path_key(const char *at, const char *key);
ft_report_path ft_report_path_index(const char *at, size_t i);

/* obj[key] when it is a string, else dflt. */
const char *ft_report_str(const json_t *obj, const char *key, const char *dflt);

/* The extent of a lines chart's values, x and y (lo and hi with y), over its n points. */
typedef struct ft_report_extent {
    double x0, x1, y0, y1;
    int n;
} ft_report_extent;

ft_report_extent ft_report_lines_extent(const json_t *chart);

/* The distinct x values of a lines chart, sorted; *n of them. NULL (and *n = 0) when none or out
 * of memory (*oom set). free() it. */
double *ft_report_lines_xs(const json_t *chart, int *n, int *oom);

/* Coordinate k (0: x, 1: y) of point i of a series' points. */
double ft_report_point(const json_t *pts, size_t i, int k);
/* Whether point i of a series is only an upper bound (its `bound`: a step measured on a busy
 * machine). */
int ft_report_point_bound(const json_t *ser, size_t i);

/* The indices of a series' points in order of x, equal x in the document's order: what the
 * tables and the polylines walk, so a chart of n points costs n log n, not n^2. *n gets the
 * number of points; NULL when out of memory; free() it. */
int *ft_report_points_order(const json_t *pts, size_t *n);

/* The segment labels of a stacked chart, in order of first appearance, added to labels. */
void ft_report_stacked_labels(const json_t *chart, ft_report_palette *labels);

/* The sum of a bar's segments. */
double ft_report_bar_total(const json_t *bar);

#endif
