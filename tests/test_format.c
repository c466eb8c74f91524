/* test_format.c: number formatting shared by the command line and the dashboard. */
#include <math.h>
#include <string.h>

#include "core/format.h"
#include "ft_test.h"

#define EXPECT_FMT(expr, want)                                                                     \
    do {                                                                                           \
        const char *got_ = (expr);                                                                 \
        FT_CHECK(strcmp(got_, want) == 0, "%s gave '%s', want '%s'", #expr, got_, want);           \
    } while (0)

static void test_time(void) {
    char b[64];
    EXPECT_FMT(ft_fmt_time(812e-9, 0, b, sizeof b), "812 ns");
    EXPECT_FMT(ft_fmt_time(12.5e-6, 0, b, sizeof b), "12.50 \xc2\xb5s");
    EXPECT_FMT(ft_fmt_time(12.5e-6, 1, b, sizeof b), "12.50 us");
    EXPECT_FMT(ft_fmt_time(250e-6, 1, b, sizeof b), "250.0 us");
    EXPECT_FMT(ft_fmt_time(1.5e-3, 0, b, sizeof b), "1.500 ms");
    EXPECT_FMT(ft_fmt_time(999.96e-6, 1, b, sizeof b), "1.000 ms"); /* rounds up a unit */
    EXPECT_FMT(ft_fmt_time(4.5, 0, b, sizeof b), "4.500 s");
    EXPECT_FMT(ft_fmt_time(1234.5, 0, b, sizeof b), "1234 s");
    EXPECT_FMT(ft_fmt_time(0, 0, b, sizeof b), "0 ns");
    EXPECT_FMT(ft_fmt_time(-1, 0, b, sizeof b), "-");
    EXPECT_FMT(ft_fmt_time(NAN, 0, b, sizeof b), "-");
    EXPECT_FMT(ft_fmt_time(INFINITY, 0, b, sizeof b), "-");
    /* the ends of the doubles: no "0 ns" for a time that is not zero, no 300 digits */
    EXPECT_FMT(ft_fmt_time(5e-324, 0, b, sizeof b), "4.94e-315 ns");
    EXPECT_FMT(ft_fmt_time(0.25e-9, 0, b, sizeof b), "0.25 ns");
    EXPECT_FMT(ft_fmt_time(0.6e-9, 0, b, sizeof b), "1 ns");
    EXPECT_FMT(ft_fmt_time(1e308, 0, b, sizeof b), "1e+308 s");
    EXPECT_FMT(ft_fmt_time(99999, 0, b, sizeof b), "99999 s");
    EXPECT_FMT(ft_fmt_time(1e5, 0, b, sizeof b), "1e+05 s");
}

static void test_ratio(void) {
    char b[64];
    EXPECT_FMT(ft_fmt_ratio(1.7214, b, sizeof b), "1.72x");
    EXPECT_FMT(ft_fmt_ratio(0, b, sizeof b), "0.00x");
    EXPECT_FMT(ft_fmt_ratio(9999.5, b, sizeof b), "9999.50x");
    EXPECT_FMT(ft_fmt_ratio(1e308, b, sizeof b), "1e+308x");
    EXPECT_FMT(ft_fmt_ratio(5e-324, b, sizeof b), "4.94e-324x");
    EXPECT_FMT(ft_fmt_ratio(-1, b, sizeof b), "-");
    EXPECT_FMT(ft_fmt_ratio(NAN, b, sizeof b), "-");
}

static void test_bytes_and_rates(void) {
    char b[64];
    EXPECT_FMT(ft_fmt_bytes(512, b, sizeof b), "512 B");
    EXPECT_FMT(ft_fmt_bytes(1536, b, sizeof b), "1.50 KiB");
    EXPECT_FMT(ft_fmt_bytes(64.0 * 1024 * 1024, b, sizeof b), "64.0 MiB");
    EXPECT_FMT(ft_fmt_bytes(2.5 * 1024 * 1024 * 1024, b, sizeof b), "2.50 GiB");
    EXPECT_FMT(ft_fmt_rate(2.45e11, "FLOP/s", b, sizeof b), "245 GFLOP/s");
    EXPECT_FMT(ft_fmt_rate(16.3e9, "B/s", b, sizeof b), "16.3 GB/s");
    EXPECT_FMT(ft_fmt_rate(5, "B/s", b, sizeof b), "5.00 B/s");
    EXPECT_FMT(ft_fmt_rate(-1, "B/s", b, sizeof b), "-");
}

static void test_durations(void) {
    char b[64];
    EXPECT_FMT(ft_fmt_duration(0, b, sizeof b), "0.0s");
    EXPECT_FMT(ft_fmt_duration(4.23, b, sizeof b), "4.2s");
    EXPECT_FMT(ft_fmt_duration(9.96, b, sizeof b), "10s"); /* no "10.0s" */
    EXPECT_FMT(ft_fmt_duration(42.4, b, sizeof b), "42s");
    EXPECT_FMT(ft_fmt_duration(59.6, b, sizeof b), "1m00s");
    EXPECT_FMT(ft_fmt_duration(185, b, sizeof b), "3m05s");
    EXPECT_FMT(ft_fmt_duration(3720, b, sizeof b), "1h02m");
    EXPECT_FMT(ft_fmt_duration(2 * 86400 + 3 * 3600 + 59, b, sizeof b), "2d03h");
    EXPECT_FMT(ft_fmt_duration(-1, b, sizeof b), "-");
    EXPECT_FMT(ft_fmt_duration(NAN, b, sizeof b), "-");
    EXPECT_FMT(ft_fmt_duration(INFINITY, b, sizeof b), "-");
}

static void test_small_buffers(void) {
    /* Truncation must keep the string terminated and never overrun. */
    char b[6];
    memset(b, 'x', sizeof b);
    ft_fmt_time(12.5e-6, 0, b, 4);
    FT_CHECK(memchr(b, '\0', 4) != NULL, "terminated within the given size");
    FT_CHECK(b[4] == 'x' && b[5] == 'x', "no write past the given size");
}

int main(void) {
    FT_RUN(test_time);
    FT_RUN(test_ratio);
    FT_RUN(test_bytes_and_rates);
    FT_RUN(test_durations);
    FT_RUN(test_small_buffers);
    return ft_test_finish();
}
