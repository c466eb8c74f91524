/* report.h: the report document of `flaretune report` and its renderer.
 *
 * A report document (format "flaretune-report/1", docs/report.md) holds what a measuring run
 * found: answers to claims, charts (stacked bars, lines with error bars), tables and the machine.
 * The renderer turns one into DIR/report.html (one self-contained page, inline SVG, well-formed
 * XML), DIR/report.md and DIR/report.json (the document, pretty-printed), each written to a
 * temporary file in DIR and renamed into place, the three together or none.
 *
 * The layout math (value formatting, axes and ticks, colours; report_layout.c) and the escaping
 * (report_doc_html.c, report_doc_md.c: the writers') are pure and declared below so they can be
 * tested on their own. The check is report_check.c's, the rendering report_render.c's.
 */
#ifndef FLARETUNE_REPORT_H
#define FLARETUNE_REPORT_H

#include <stddef.h>

#include <jansson.h>

#include "core/status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define FT_REPORT_FORMAT "flaretune-report/1"

/* Check doc against the schema: the format string, the required keys and their types, every
 * number finite and every chart drawable. On failure (FT_EFORMAT) the message names the first
 * bad path, e.g. "charts[2].series[0].points[3]: expected [x, y]". */
ft_status ft_report_check(const json_t *doc, ft_err *err);

/* Check doc, then write DIR/report.html, DIR/report.md and DIR/report.json (DIR is created when
 * missing). All three appear or none changes; a failure names the file and the reason. */
ft_status ft_report_render(const json_t *doc, const char *dir, ft_err *err);

/* Read a report document from path and check it. A missing file is FT_EIO, malformed JSON or a
 * document that fails ft_report_check FT_EFORMAT; the message names the file. */
ft_status ft_report_load(const char *path, json_t **out, ft_err *err);

/* ---- a busy machine (tuner/report_verdict.c; docs/report.md, "A busy machine") ------------- */

/* Steps, and what the scheduler took from their measurements. */
typedef struct ft_report_busy {
    long discarded, taken; /* samples thrown away as contaminated, of all those timed */
    int steps, unclean_steps;
    int loaded_steps; /* clean steps measured while the machine was busy (their `load`) */
} ft_report_busy;

/* Add a step document (docs/step.md): its distinct measurements (each stage alone that is not
 * `timed_as` another, and the whole step); it is unclean when one of them is, and loaded when
 * it is clean but its `load` says the machine was busy while it was measured. */
void ft_report_step_busy(const json_t *step, ft_report_busy *b);
/* Whether a step's medians are upper bounds: unclean or loaded (ft_report_step_busy). */
int ft_report_step_bound(const json_t *step);
/* {"steps", "unclean_steps", "loaded_steps", "samples_discarded", "samples_taken"}: a document's
 * `contention`. */
json_t *ft_report_busy_to_json(const ft_report_busy *b);
/* A claim's evidence entry for the step document `step` logged as `key`: {"step": key, "clean",
 * "loaded", "samples_discarded", "samples_taken"}. */
json_t *ft_report_evidence(const char *key, const json_t *step);
/* The one place a verdict is withheld: a claim whose `evidence` has a step that was not measured
 * cleanly, or was measured while the machine was busy, gets the verdict "inconclusive" and
 * `withheld`, why ("the machine was busy; 37% of samples discarded": the share over its
 * evidence; or "the machine was busy while 2 of its 8 steps were measured"); a document without
 * `contention` gets one from its claims' evidence (each step once). Judging a judged document
 * changes nothing. */
void ft_report_judge(json_t *doc);
/* A claim's verdict as the page says it: "holds", or "inconclusive: the machine was busy; 37% of
 * samples discarded". Returns buf. */
const char *ft_report_verdict_text(const json_t *claim, char *buf, size_t n);
/* A share of the samples for humans: "37%", "0.4%", "<0.1%", "0%". Returns buf. */
const char *ft_report_share_text(long part, long whole, char *buf, size_t n);
/* The banner of a document whose `contention` has steps not measured cleanly (returns 1), or ""
 * (returns 0). */
int ft_report_busy_text(const json_t *doc, char *buf, size_t n);

/* ---- the pure parts of the layout ----------------------------------------------------------- */

/* A value for humans in the unit of a chart, with `sig` significant digits: "s" picks ns, us,
 * ms or s ("1.23 ms", "45.6 us"), "%" appends a percent sign to a value already in percent
 * ("-0.4%"), any unit ending in "/s" or "B" takes an SI prefix ("730 GB/s"), another unit
 * follows the number ("12.5 tok"), "" none. "-" for a non-finite value. Numbers are plain
 * decimals with at most 4 decimals (no exponent below 1e15, "12346 s"): a value under half the
 * last one reads "0", never "-0" ("-5.3e-05%" is "-0.0001%", "-4e-05%" is "0%"). Returns buf. */
char *ft_report_fmt_value(double v, const char *unit, int sig, char *buf, size_t n);

/* The SI prefix ("n", "u", "m", "", "k", "M", "G", ...) and scale that ft_report_fmt_value
 * uses for a value of magnitude `mag` in `unit`, so that the ticks of one axis share a unit:
 * the number printed is value * *scale, followed by the prefix and the unit. */
void ft_report_unit_pick(double mag, const char *unit, double *scale, const char **prefix);

/* One tick label: v in the unit chosen for the axis (ft_report_unit_pick of the axis's largest
 * magnitude), e.g. "0 ms", "0.5 ms", "1 ms". Returns buf. */
char *ft_report_fmt_tick(double v, double axis_mag, const char *unit, char *buf, size_t n);

#define FT_REPORT_MAX_TICKS 16

/* A numeric axis: [lo, hi] covers the data and is rounded out to whole steps of 1, 2 or 5
 * times a power of ten, ticks every step from lo to hi. */
typedef struct ft_report_axis {
    double lo, hi, step;
    int nticks;
    double ticks[FT_REPORT_MAX_TICKS];
} ft_report_axis;

/* The axis over [lo, hi] with about `want` ticks (2..FT_REPORT_MAX_TICKS - 1). An empty range
 * is widened (0..1 when both are 0). Returns FT_EINVAL when lo or hi is not finite or the range
 * overflows. */
ft_status ft_report_axis_nice(double lo, double hi, int want, ft_report_axis *ax);
/* The largest magnitude a chart draws: its pixels (a value times a width over the axis' span)
 * stay finite. A document with more is refused by ft_report_check, naming the value. */
#define FT_REPORT_MAX_VALUE 1e300

/* v mapped linearly from [d0, d1] to [r0, r1] (d0 == d1 maps to the middle). */
double ft_report_scale(double v, double d0, double d1, double r0, double r1);

/* Labels in order of first appearance; a label's colour is its index in a fixed palette of
 * FT_REPORT_PALETTE_SIZE colours, cycling after that. One palette over every chart of a kind
 * gives one label one colour on the whole page. */
#define FT_REPORT_PALETTE_SIZE 12
typedef struct ft_report_palette {
    const char **labels; /* borrowed: the strings must outlive the palette */
    int n, cap;
} ft_report_palette;

/* The label's index (added when new), or -1 when out of memory. */
int ft_report_palette_index(ft_report_palette *p, const char *label);
/* "#rrggbb" of the label (added when new; the first colour when out of memory). */
const char *ft_report_palette_colour(ft_report_palette *p, const char *label);
void ft_report_palette_free(ft_report_palette *p);

/* s escaped for XML text and attributes (& < > " '), or NULL when out of memory; free() it. */
char *ft_report_xml_escape(const char *s);
/* s made safe inside a Markdown table cell or line: \ | < > & ` escaped with a backslash,
 * newlines become spaces. NULL when out of memory; free() it. */
char *ft_report_md_escape(const char *s);

#ifdef __cplusplus
}
#endif
#endif
