/* format.h: number formatting shared by the command line and the dashboard.
 *
 * Pure functions, unit-tested: a time picks its unit (ns, µs, ms, s) so that three or four
 * significant digits show; sizes use binary units.
 */
#ifndef FLARETUNE_FORMAT_H
#define FLARETUNE_FORMAT_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* "812 ns", "12.3 µs", "1.234 ms", "4.56 s"; "-" for a negative or non-finite time. With
 * ascii set, "us" replaces "µs" (for terminals and files that are not UTF-8). Returns buf. */
char *ft_fmt_time(double seconds, int ascii, char *buf, size_t n);
/* "512 B", "1.5 KiB", "64.0 MiB", "2.50 GiB". Returns buf. */
char *ft_fmt_bytes(double bytes, char *buf, size_t n);
/* A duration for clocks and ETAs: "4.2s", "42s", "3m05s", "1h02m", "2d03h"; "-" for a negative
 * or non-finite one. Returns buf. */
char *ft_fmt_duration(double seconds, char *buf, size_t n);
/* A rate with an SI prefix: "245 GFLOP/s", "16.3 GB/s" (unit is "FLOP/s" or "B/s"). */
char *ft_fmt_rate(double per_second, const char *unit, char *buf, size_t n);

/* A ratio such as a speedup, "1.72x"; one too large or too small for two decimals in exponent
 * form ("1e+308x", "4.9e-324x"); "-" when negative or not finite. */
char *ft_fmt_ratio(double r, char *buf, size_t n);

#ifdef __cplusplus
}
#endif
#endif
