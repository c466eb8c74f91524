/* format.c: number formatting shared by the command line and the dashboard (see
 * core/format.h). */
#include "core/format.h"

#include <math.h>
#include <stdio.h>

/* Print v with `sig` significant digits but never in exponent form. */
static void fixed_sig(double v, int sig, const char *unit, char *buf, size_t n) {
    int digits_before = v >= 1 ? (int)floor(log10(v)) + 1 : 1;
    int decimals = sig - digits_before;
    if (decimals < 0) decimals = 0;
    snprintf(buf, n, "%.*f %s", decimals, v, unit);
}

char *ft_fmt_time(double s, int ascii, char *buf, size_t n) {
    if (!isfinite(s) || s < 0) {
        snprintf(buf, n, "-");
        return buf;
    }
    /* Round first so 999.96 µs becomes "1.000 ms", not "1000.0 µs". */
    static const struct {
        double scale;
        const char *unit, *ascii_unit;
    } units[] = {{1e9, "ns", "ns"}, {1e6, "\xc2\xb5s", "us"}, {1e3, "ms", "ms"}, {1, "s", "s"}};
    for (int i = 0; i < 4; i++) {
        double v = s * units[i].scale;
        double rounded = v >= 100 ? round(v * 10) / 10 : round(v * 1000) / 1000;
        if (rounded < 1000 || i == 3) {
            /* under a nanosecond, and past a day, in exponent form: never "0 ns" for a time
             * that is not zero, nor a number of 300 digits */
            if ((i == 0 && v > 0 && v < 0.5) || (i == 3 && v >= 1e5))
                snprintf(buf, n, "%.3g %s", v, units[i].unit);
            else if (i == 0)
                snprintf(buf, n, "%.0f %s", v, units[i].unit);
            else
                fixed_sig(v, 4, ascii ? units[i].ascii_unit : units[i].unit, buf, n);
            return buf;
        }
    }
    return buf;
}

char *ft_fmt_bytes(double b, char *buf, size_t n) {
    static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    int i = 0;
    while (b >= 1024 && i < 4) {
        b /= 1024;
        i++;
    }
    if (i == 0)
        snprintf(buf, n, "%.0f B", b);
    else
        fixed_sig(b, 3, units[i], buf, n);
    return buf;
}

char *ft_fmt_rate(double r, const char *unit, char *buf, size_t n) {
    static const char *const prefixes[] = {"", "K", "M", "G", "T", "P"};
    if (!isfinite(r) || r < 0) {
        snprintf(buf, n, "-");
        return buf;
    }
    int i = 0;
    while (r >= 1000 && i < 5) {
        r /= 1000;
        i++;
    }
    char u[32];
    snprintf(u, sizeof u, "%s%s", prefixes[i], unit);
    fixed_sig(r, 3, u, buf, n);
    return buf;
}

char *ft_fmt_duration(double s, char *buf, size_t n) {
    if (!isfinite(s) || s < 0) {
        snprintf(buf, n, "-");
        return buf;
    }
    if (s < 9.95) {
        snprintf(buf, n, "%.1fs", s);
        return buf;
    }
    long t = (long)floor(s + 0.5);
    if (t < 60)
        snprintf(buf, n, "%lds", t);
    else if (t < 3600)
        snprintf(buf, n, "%ldm%02lds", t / 60, t % 60);
    else if (t < 86400)
        snprintf(buf, n, "%ldh%02ldm", t / 3600, t % 3600 / 60);
    else
        snprintf(buf, n, "%ldd%02ldh", t / 86400, t % 86400 / 3600);
    return buf;
}

char *ft_fmt_ratio(double r, char *buf, size_t n) {
    if (!isfinite(r) || r < 0)
        snprintf(buf, n, "-");
    else if (r >= 1e4 || (r > 0 && r < 0.005))
        snprintf(buf, n, "%.3gx", r);
    else
        snprintf(buf, n, "%.2fx", r);
    return buf;
}
