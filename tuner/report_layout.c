/* report_layout.c: the pure layout math of the report (tuner/report.h): values for humans in a
 * chart's unit, axes and their ticks, and the page's palette. No I/O and no document: the SVG
 * charts (report_svg.c) and the tables (report_render.c) read numbers through these alone, so
 * test_report checks them on their own.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tuner/report.h"

static int unit_is(const char *unit, const char *name) { return unit && strcmp(unit, name) == 0; }

/* Units that take SI prefixes upward: rates ("B/s", "FLOP/s") and counts of bytes or FLOPs. */
static int unit_si_up(const char *unit) {
    size_t n = unit ? strlen(unit) : 0;
    return (n >= 2 && strcmp(unit + n - 2, "/s") == 0) || unit_is(unit, "B") ||
           unit_is(unit, "FLOP");
}

void ft_report_unit_pick(double mag, const char *unit, double *scale, const char **prefix) {
    *scale = 1;
    *prefix = "";
    mag = fabs(mag);
    if (!isfinite(mag) || mag == 0) return;
    /* A little slack below each boundary so 999.96 us prints as "1 ms", not "1e+03 us". */
    const double slack = 0.9995;
    if (unit_is(unit, "s")) {
        static const struct {
            double at, scale;
            const char *prefix;
        } down[] = {{1, 1, ""}, {1e-3, 1e3, "m"}, {1e-6, 1e6, "u"}, {0, 1e9, "n"}};
        for (int i = 0; i < 4; i++)
            if (mag >= down[i].at * slack) {
                *scale = down[i].scale;
                *prefix = down[i].prefix;
                return;
            }
    }
    if (unit_si_up(unit)) {
        static const char *const up[] = {"", "k", "M", "G", "T", "P", "E"};
        int i = 0;
        while (i < 6 && mag * *scale >= 1000 * slack) {
            *scale /= 1000;
            i++;
        }
        *prefix = up[i];
    }
}

/* Decimals a number for humans never goes beyond: a value smaller than half the last one
 * reads 0 (an overhead of -4e-05% is none), never an exponent or "-0". */
enum { PLAIN_DECIMALS = 4 };

/* x with `sig` significant digits in plain decimal form ("1.23", "-0.0012", "123457"), at most
 * PLAIN_DECIMALS decimals, trailing zeros dropped, no sign on a value that reads 0. */
static void fmt_plain(double x, int sig, char *buf, size_t n) {
    if (fabs(x) >= 1e15) { /* no one reads sixteen digits */
        snprintf(buf, n, "%.*g", sig, x);
        return;
    }
    int dec = 0;
    if (x != 0) {
        dec = sig - 1 - (int)floor(log10(fabs(x)));
        if (dec < 0) dec = 0;
        if (dec > PLAIN_DECIMALS) dec = PLAIN_DECIMALS;
    }
    char t[400];
    snprintf(t, sizeof t, "%.*f", dec, x);
    if (strchr(t, '.')) {
        size_t k = strlen(t);
        while (t[k - 1] == '0')
            t[--k] = '\0';
        if (t[k - 1] == '.') t[--k] = '\0';
    }
    snprintf(buf, n, "%s", strcmp(t, "-0") == 0 ? "0" : t);
}

/* x already scaled, with its prefix and unit: "1.23 ms", "-0.4%", "12.5", "3 tok". */
static char *put_scaled(double x, int sig, const char *prefix, const char *unit, char *buf,
                        size_t n) {
    char num[400];
    fmt_plain(x, sig, num, sizeof num);
    if (!unit || !*unit)
        snprintf(buf, n, "%s", num);
    else if (strcmp(unit, "%") == 0)
        snprintf(buf, n, "%s%%", num);
    else
        snprintf(buf, n, "%s %s%s", num, prefix, unit);
    return buf;
}

char *ft_report_fmt_value(double v, const char *unit, int sig, char *buf, size_t n) {
    if (!isfinite(v)) {
        snprintf(buf, n, "-");
        return buf;
    }
    if (sig < 1) sig = 1;
    if (sig > 17) sig = 17;
    double scale;
    const char *prefix;
    ft_report_unit_pick(v, unit, &scale, &prefix);
    return put_scaled(v * scale, sig, prefix, unit, buf, n);
}

char *ft_report_fmt_tick(double v, double axis_mag, const char *unit, char *buf, size_t n) {
    if (!isfinite(v)) {
        snprintf(buf, n, "-");
        return buf;
    }
    double scale;
    const char *prefix;
    ft_report_unit_pick(axis_mag, unit, &scale, &prefix);
    double x = v * scale;
    /* A tick computed as k * step can carry rounding noise (0.30000000000000004). */
    if (fabs(x) < fabs(axis_mag * scale) * 1e-9) x = 0;
    put_scaled(x, 4, prefix, unit, buf, n);
    /* An axis of values all below the last decimal: ticks apart, not all "0". */
    if (x != 0 && fabs(x) < 0.5e-4) {
        const char *sep = !unit || !*unit || strcmp(unit, "%") == 0 ? "" : " ";
        snprintf(buf, n, "%.3g%s%s%s", x, sep, *sep ? prefix : "", unit ? unit : "");
    }
    return buf;
}

/* The nearest of 1, 2, 5 times a power of ten to raw (> 0), as Heckbert's "nice numbers". */
static double nice_step(double raw) {
    double p = pow(10, floor(log10(raw)));
    double f = raw / p;
    double m = f < 1.5 ? 1 : f < 3 ? 2 : f < 7 ? 5 : 10;
    return m * p;
}

ft_status ft_report_axis_nice(double lo, double hi, int want, ft_report_axis *ax) {
    memset(ax, 0, sizeof *ax);
    if (!isfinite(lo) || !isfinite(hi)) return FT_EINVAL;
    if (lo > hi) {
        double t = lo;
        lo = hi;
        hi = t;
    }
    if (want < 2) want = 2;
    if (want > FT_REPORT_MAX_TICKS - 1) want = FT_REPORT_MAX_TICKS - 1;
    if (hi == lo) {
        double w = lo == 0 ? 1 : fabs(lo) * 0.1;
        if (lo == 0) {
            hi = 1;
        } else {
            lo -= w;
            hi += w;
        }
    }
    double range = hi - lo;
    if (!isfinite(range) || range <= 0) return FT_EINVAL;
    double step = nice_step(range / (want - 1));
    for (int tries = 0; tries < 64; tries++) {
        if (!isfinite(step) || step <= 0) return FT_EINVAL;
        double k0 = floor(lo / step + 1e-9), k1 = ceil(hi / step - 1e-9);
        double count = k1 - k0 + 1;
        if (isfinite(count) && count <= FT_REPORT_MAX_TICKS) {
            ax->step = step;
            ax->lo = k0 * step;
            ax->hi = k1 * step;
            ax->nticks = (int)count;
            for (int i = 0; i < ax->nticks; i++)
                ax->ticks[i] = (k0 + i) * step;
            return isfinite(ax->lo) && isfinite(ax->hi) ? FT_OK : FT_EINVAL;
        }
        step = nice_step(step * 1.5);
    }
    return FT_EINVAL;
}

double ft_report_scale(double v, double d0, double d1, double r0, double r1) {
    if (d1 == d0) return (r0 + r1) / 2;
    return r0 + (v - d0) * (r1 - r0) / (d1 - d0);
}

/* Tableau's ten, then two more that stay apart from them. */
static const char *const palette[FT_REPORT_PALETTE_SIZE] = {
    "#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948",
    "#b07aa1", "#ff9da7", "#9c755f", "#79706e", "#17becf", "#bcbd22"};

int ft_report_palette_index(ft_report_palette *p, const char *label) {
    for (int i = 0; i < p->n; i++)
        if (strcmp(p->labels[i], label) == 0) return i;
    if (p->n == p->cap) {
        int cap = p->cap ? 2 * p->cap : 16;
        const char **l = realloc(p->labels, (size_t)cap * sizeof *l);
        if (!l) return -1;
        p->labels = l;
        p->cap = cap;
    }
    p->labels[p->n] = label;
    return p->n++;
}

const char *ft_report_palette_colour(ft_report_palette *p, const char *label) {
    int i = ft_report_palette_index(p, label);
    return palette[i < 0 ? 0 : i % FT_REPORT_PALETTE_SIZE];
}

void ft_report_palette_free(ft_report_palette *p) {
    free(p->labels);
    memset(p, 0, sizeof *p);
}
