/* report_svg.h: a report's chart (docs/report.md) drawn as inline SVG for the page
 * (tuner/report_svg.c). */
#ifndef FLARETUNE_REPORT_SVG_H
#define FLARETUNE_REPORT_SVG_H

#include <stdio.h>

#include <jansson.h>

#include "core/status.h"
#include "tuner/report.h"

/* Draw a checked chart to f: a stacked chart's segments coloured from segs, a lines chart's
 * series from series (one palette per kind over the page, so a label keeps its colour from chart
 * to chart). FT_EINTERNAL when a value could not be drawn (not finite), FT_ENOMEM. */
ft_status ft_report_svg(FILE *f, const json_t *chart, ft_report_palette *segs,
                        ft_report_palette *series);

/* Whether a lines chart's axes can be laid out: FT_OK, FT_EINTERNAL when its values are too
 * close together or to 0 to divide an axis (a subnormal apart), FT_ENOMEM. The check
 * (report_check.c) asks it, so that such a document is refused before anything is drawn. */
ft_status ft_report_lines_drawable(const json_t *chart);

#endif
