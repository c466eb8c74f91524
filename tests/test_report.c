/* test_report.c: the report renderer's pure parts (values for humans, axes and ticks, colours,
 * escaping) and the schema check on bad documents (tuner/report.h). The page itself
 * is checked end to end by test_report_render.py. */
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tuner/report.h"
#include "ft_test.h"

static void check_fmt(double v, const char *unit, int sig, const char *want) {
    char buf[64];
    ft_report_fmt_value(v, unit, sig, buf, sizeof buf);
    FT_CHECK(strcmp(buf, want) == 0, "%.17g %s (%d digits): \"%s\", expected \"%s\"", v, unit, sig,
             buf, want);
}

static void test_human_units(void) {
    check_fmt(1.234e-3, "s", 3, "1.23 ms");
    check_fmt(4.56e-5, "s", 3, "45.6 us");
    check_fmt(2.5, "s", 3, "2.5 s");
    check_fmt(7e-9, "s", 3, "7 ns");
    check_fmt(0, "s", 3, "0 s");
    check_fmt(9.9996e-4, "s", 3, "1 ms"); /* not "1e+03 us" */
    check_fmt(999.4e-6, "s", 4, "999.4 us");
    check_fmt(1.2034e-3, "s", 4, "1.203 ms");
    check_fmt(2.1, "%", 3, "2.1%");
    check_fmt(-0.31, "%", 3, "-0.31%");
    check_fmt(-0.0, "%", 3, "0%");
    check_fmt(7.3e11, "B/s", 3, "730 GB/s");
    check_fmt(2.11e11, "FLOP/s", 3, "211 GFLOP/s");
    check_fmt(512, "B/s", 3, "512 B/s");
    check_fmt(12.5, "tok", 3, "12.5 tok");
    check_fmt(12.5, "", 3, "12.5");
    /* Plain decimals: no exponent, no negative zero. */
    check_fmt(-5.331e-05, "%", 4, "-0.0001%");
    check_fmt(-4e-05, "%", 4, "0%");
    check_fmt(-0.004, "%", 3, "-0.004%");
    check_fmt(-0.0012, "%", 3, "-0.0012%");
    check_fmt(0.00041, "", 3, "0.0004");
    check_fmt(12345.6, "s", 4, "12346 s");
    check_fmt(123456, "tok", 3, "123456 tok");
    check_fmt(2e16, "", 3, "2e+16");
    check_fmt(NAN, "s", 3, "-");
    check_fmt(INFINITY, "%", 3, "-");
    /* Ticks of one axis share its unit. */
    char buf[64];
    ft_report_fmt_tick(5e-4, 2e-3, "s", buf, sizeof buf);
    FT_CHECK(strcmp(buf, "0.5 ms") == 0, "tick 5e-4 on a 2 ms axis: \"%s\"", buf);
    ft_report_fmt_tick(0, 2e-3, "s", buf, sizeof buf);
    FT_CHECK(strcmp(buf, "0 ms") == 0, "tick 0 on a 2 ms axis: \"%s\"", buf);
    ft_report_fmt_tick(0.1 + 0.2 - 0.3, 2, "%", buf, sizeof buf);
    FT_CHECK(strcmp(buf, "0%") == 0, "rounding noise at 0: \"%s\"", buf);
    ft_report_fmt_tick(-1, 3, "%", buf, sizeof buf);
    FT_CHECK(strcmp(buf, "-1%") == 0, "negative percent tick: \"%s\"", buf);
    ft_report_fmt_tick(-0.25, 0.5, "%", buf, sizeof buf);
    FT_CHECK(strcmp(buf, "-0.25%") == 0, "a small percent tick: \"%s\"", buf);
    ft_report_fmt_tick(2e-5, 4e-5, "%", buf, sizeof buf);
    FT_CHECK(strcmp(buf, "2e-05%") == 0, "a tick below the last decimal: \"%s\"", buf);
}

/* step is 1, 2 or 5 times a power of ten. */
static int is_nice_step(double step) {
    double m = step / pow(10, floor(log10(step)));
    return fabs(m - 1) < 1e-9 || fabs(m - 2) < 1e-9 || fabs(m - 5) < 1e-9;
}

static void check_axis(double lo, double hi, int want) {
    ft_report_axis ax;
    ft_status s = ft_report_axis_nice(lo, hi, want, &ax);
    FT_CHECK(s == FT_OK, "axis over [%g, %g]: status %d", lo, hi, (int)s);
    if (s) return;
    FT_CHECK(ax.lo <= fmin(lo, hi) && ax.hi >= fmax(lo, hi), "[%g, %g] does not cover [%g, %g]",
             ax.lo, ax.hi, lo, hi);
    FT_CHECK(is_nice_step(ax.step), "step %g over [%g, %g] is not 1, 2 or 5 x 10^k", ax.step, lo,
             hi);
    FT_CHECK(ax.nticks >= 2 && ax.nticks <= FT_REPORT_MAX_TICKS, "%d ticks over [%g, %g]",
             ax.nticks, lo, hi);
    FT_CHECK(ax.nticks <= 2 * want, "%d ticks, asked about %d", ax.nticks, want);
    FT_CHECK_NEAR(ax.ticks[0], ax.lo, 1e-12);
    FT_CHECK_NEAR(ax.ticks[ax.nticks - 1] / ax.step, ax.hi / ax.step, 1e-9);
    for (int i = 1; i < ax.nticks; i++)
        FT_CHECK_NEAR((ax.ticks[i] - ax.ticks[i - 1]) / ax.step, 1.0, 1e-9);
    /* The range is not padded by more than a step on either side. */
    FT_CHECK(ax.lo > fmin(lo, hi) - ax.step * (1 + 1e-9) || lo == hi, "lo %g too far below %g",
             ax.lo, lo);
}

static void test_ticks(void) {
    ft_report_axis ax;
    FT_CHECK(ft_report_axis_nice(0, 2.9e-3, 6, &ax) == FT_OK, "0..2.9 ms");
    FT_CHECK_NEAR(ax.lo, 0, 1e-15);
    FT_CHECK_NEAR(ax.hi * 1e3, 3, 1e-9);
    FT_CHECK_NEAR(ax.step * 1e4, 5, 1e-9);
    FT_CHECK(ax.nticks == 7, "0..2.9 ms: %d ticks, expected 7 (0, 0.5, ..., 3 ms)", ax.nticks);
    FT_CHECK(ft_report_axis_nice(-0.72, 2.55, 6, &ax) == FT_OK, "-0.72..2.55");
    FT_CHECK_NEAR(ax.lo, -1, 1e-12);
    FT_CHECK_NEAR(ax.hi, 3, 1e-12);
    FT_CHECK(ft_report_axis_nice(0, 0, 6, &ax) == FT_OK && ax.lo == 0 && ax.hi >= 1,
             "an empty range at 0 becomes 0..1, got %g..%g", ax.lo, ax.hi);
    FT_CHECK(ft_report_axis_nice(5, 5, 6, &ax) == FT_OK && ax.lo < 5 && ax.hi > 5,
             "an empty range at 5 is widened, got %g..%g", ax.lo, ax.hi);
    check_axis(0, 1, 6);
    check_axis(0, 1.553e-3, 6);
    check_axis(3, 9, 8);
    check_axis(-3.7, -0.2, 5);
    check_axis(1e9, 1e9 + 3, 6);
    check_axis(0, 7.3e11, 6);
    check_axis(2, 1, 6); /* reversed */
    check_axis(0, 123456, 15);
    check_axis(0, 1e-300, 6);
    FT_CHECK(ft_report_axis_nice(NAN, 1, 6, &ax) == FT_EINVAL, "NaN refused");
    FT_CHECK(ft_report_axis_nice(0, INFINITY, 6, &ax) == FT_EINVAL, "Inf refused");
    FT_CHECK(ft_report_axis_nice(-1e308, 1e308, 6, &ax) == FT_EINVAL, "overflowing range refused");
    FT_CHECK_NEAR(ft_report_scale(5, 0, 10, 100, 200), 150, 1e-12);
    FT_CHECK_NEAR(ft_report_scale(0, 0, 10, 300, 100), 300, 1e-12); /* y grows upward */
    FT_CHECK_NEAR(ft_report_scale(3, 3, 3, 0, 10), 5, 1e-12);
}

static void test_colours(void) {
    ft_report_palette p = {0};
    char names[FT_REPORT_PALETTE_SIZE + 1][16];
    const char *colours[FT_REPORT_PALETTE_SIZE + 1];
    for (int i = 0; i <= FT_REPORT_PALETTE_SIZE; i++) {
        snprintf(names[i], sizeof names[i], "seg%d", i);
        colours[i] = ft_report_palette_colour(&p, names[i]);
        FT_CHECK(strlen(colours[i]) == 7 && colours[i][0] == '#', "colour \"%s\"", colours[i]);
    }
    for (int i = 0; i < FT_REPORT_PALETTE_SIZE; i++)
        for (int j = 0; j < i; j++)
            FT_CHECK(strcmp(colours[i], colours[j]) != 0, "labels %d and %d share %s", i, j,
                     colours[i]);
    FT_CHECK(strcmp(colours[FT_REPORT_PALETTE_SIZE], colours[0]) == 0,
             "the palette cycles after %d colours", FT_REPORT_PALETTE_SIZE);
    /* The same label keeps its colour, asked again later or from another chart's order. */
    for (int i = FT_REPORT_PALETTE_SIZE; i >= 0; i--)
        FT_CHECK(strcmp(ft_report_palette_colour(&p, names[i]), colours[i]) == 0,
                 "label %s changed colour", names[i]);
    char again[16] = "seg3";
    FT_CHECK(ft_report_palette_index(&p, again) == 3, "a label is found by its text");
    FT_CHECK(p.n == FT_REPORT_PALETTE_SIZE + 1, "%d labels", p.n);
    ft_report_palette_free(&p);
}

static void test_escaping(void) {
    char *x = ft_report_xml_escape("a<b>&\"c\" 'd'\x01");
    FT_CHECK(x && strcmp(x, "a&lt;b&gt;&amp;&quot;c&quot; &#39;d&#39; ") == 0, "xml: \"%s\"", x);
    free(x);
    /* U+FFFE and U+FFFF are not XML characters; U+FFFD is (octal: a hex escape runs on). */
    x = ft_report_xml_escape("a\357\277\276b\357\277\277c\357\277\275d");
    FT_CHECK(x && strcmp(x, "a b c\357\277\275d") == 0, "xml: \"%s\"", x);
    free(x);
    x = ft_report_xml_escape("plain, µs");
    FT_CHECK(x && strcmp(x, "plain, µs") == 0, "xml leaves text alone: \"%s\"", x);
    free(x);
    x = ft_report_xml_escape("");
    FT_CHECK(x && !*x, "empty string");
    free(x);
    x = ft_report_md_escape("a|b<&>`c`\\d\ne");
    FT_CHECK(x && strcmp(x, "a\\|b\\<\\&\\>\\`c\\`\\\\d e") == 0, "md: \"%s\"", x);
    free(x);
}

/* ---- the schema check ---------------------------------------------------------------------- */

static const char *const valid_doc =
    "{\"format\": \"flaretune-report/1\", \"title\": \"t\", \"date\": \"2026-12-02\","
    " \"command\": \"flaretune report\", \"backend\": \"cpu\", \"models\": [\"tiny\"],"
    " \"machine\": {\"cores\": 2},"
    " \"claims\": [{\"id\": \"c\", \"claim\": \"x\", \"answer\": \"y\", \"verdict\": \"holds\","
    "   \"figures\": {\"share\": 0.004, \"what\": \"w\"}}],"
    " \"charts\": ["
    "  {\"id\": \"b\", \"kind\": \"stacked\", \"title\": \"b\", \"unit\": \"s\", \"bars\": ["
    "    {\"label\": \"A\", \"segments\": [{\"label\": \"f\", \"value\": 1e-4},"
    "                                   {\"label\": \"g\", \"value\": 2e-4}]}]},"
    "  {\"id\": \"l\", \"kind\": \"lines\", \"title\": \"l\", \"unit\": \"%\", \"series\": ["
    "    {\"label\": \"S\", \"points\": [[3, 1.5], [5, -0.5], [7, 2.5]],"
    "     \"lo\": [1, -1, 2], \"hi\": [2, 0, 3]}]}],"
    " \"tables\": [{\"id\": \"t\", \"title\": \"t\", \"columns\": [\"a\", \"b\"],"
    "   \"rows\": [[\"x\", 1], [\"y\", 2.5]]}],"
    " \"steps\": [{\"anything\": [1, {\"goes\": null}]}], \"unknown\": true}";

static json_t *doc_new(void) {
    json_error_t je;
    json_t *d = json_loads(valid_doc, 0, &je);
    if (!d) {
        fprintf(stderr, "test document: %s at %d:%d\n", je.text, je.line, je.column);
        exit(2);
    }
    return d;
}

/* The value at a path of object keys and array indexes: "charts", 1, "series", 0 ... */
static json_t *at(json_t *d, const char *path) {
    char buf[256];
    snprintf(buf, sizeof buf, "%s", path);
    json_t *v = d;
    for (char *tok = strtok(buf, "/"); tok && v; tok = strtok(NULL, "/"))
        v = json_is_array(v) ? json_array_get(v, (size_t)atoi(tok)) : json_object_get(v, tok);
    if (!v) {
        fprintf(stderr, "test document has no %s\n", path);
        exit(2);
    }
    return v;
}

/* The check fails with FT_EFORMAT and a message that starts with `want`. */
static void expect_bad(json_t *d, const char *what, const char *want) {
    ft_err err = {0};
    ft_status s = ft_report_check(d, &err);
    FT_CHECK(s == FT_EFORMAT, "%s: status %d, expected FT_EFORMAT", what, (int)s);
    FT_CHECK(strncmp(err.msg, want, strlen(want)) == 0, "%s: message \"%s\", expected \"%s...\"",
             what, err.msg, want);
    FT_CHECK(!strchr(err.msg, '\n'), "%s: message on one line", what);
    json_decref(d);
}

/* A fresh copy d of the valid document, spoilt by edit (a statement on d), is refused as
 * expect_bad says. */
#define EXPECT_BAD(edit, what, want)                                                               \
    do {                                                                                           \
        json_t *d = doc_new();                                                                     \
        edit;                                                                                      \
        expect_bad(d, what, want);                                                                 \
    } while (0)

static void test_check_valid(void) {
    json_t *d = doc_new();
    ft_err err = {0};
    FT_CHECK(ft_report_check(d, &err) == FT_OK, "the valid document: %s", err.msg);
    /* Empty lists are fine; optional keys may go. */
    json_array_clear(json_object_get(d, "claims"));
    json_array_clear(json_object_get(d, "charts"));
    json_array_clear(json_object_get(d, "tables"));
    json_object_del(d, "machine");
    json_object_del(d, "command");
    FT_CHECK(ft_report_check(d, &err) == FT_OK, "a document with no claims, charts, tables: %s",
             err.msg);
    json_decref(d);
}

static void test_check_required(void) {
    static const char *const keys[] = {"format", "title", "date", "claims", "charts", "tables"};
    for (int i = 0; i < 6; i++) {
        json_t *d = doc_new();
        json_object_del(d, keys[i]);
        char want[64];
        snprintf(want, sizeof want, "%s: missing", keys[i]);
        expect_bad(d, keys[i], want);
    }
    json_t *d = json_array();
    expect_bad(d, "an array", "the document: expected a JSON object");
    ft_err err = {0};
    FT_CHECK(ft_report_check(NULL, &err) == FT_EFORMAT, "NULL document");
}

static void test_check_types(void) {
    EXPECT_BAD(json_object_set_new(d, "format", json_string("flaretune-report/2")), "format",
               "format: expected \"flaretune-report/1\", got \"flaretune-report/2\"");
    EXPECT_BAD(json_object_set_new(d, "title", json_integer(3)), "title",
               "title: expected a string, got a number");
    EXPECT_BAD(json_object_set_new(d, "claims", json_object()), "claims",
               "claims: expected an array, got an object");
    EXPECT_BAD(json_object_set_new(d, "machine", json_string("x")), "machine",
               "machine: expected an object, got a string");
    EXPECT_BAD(json_array_append_new(json_object_get(d, "models"), json_integer(1)), "models",
               "models[1]: expected a string");
    EXPECT_BAD(json_object_set_new(at(d, "claims/0"), "verdict", json_string("maybe")), "verdict",
               "claims[0].verdict: expected \"holds\", \"does not hold\", \"measured\" or "
               "\"inconclusive\", got \"maybe\"");
    EXPECT_BAD(json_object_del(at(d, "claims/0"), "answer"), "answer", "claims[0].answer: missing");
    EXPECT_BAD(json_object_set_new(at(d, "claims/0/figures"), "nested", json_array()), "figures",
               "claims[0].figures.nested: expected a number or a string");
    EXPECT_BAD(json_object_set_new(at(d, "charts/0"), "kind", json_string("pie")), "kind",
               "charts[0].kind: expected \"stacked\" or \"lines\", got \"pie\"");
    EXPECT_BAD(
        json_object_set_new(at(d, "charts/0/bars/0/segments/1"), "value", json_string("2e-4")),
        "segment value", "charts[0].bars[0].segments[1].value: expected a number");
    EXPECT_BAD(json_object_set_new(at(d, "charts/0/bars/0/segments/1"), "value", json_real(-1e-6)),
               "negative segment", "charts[0].bars[0].segments[1].value: expected a number >= 0");
    EXPECT_BAD(json_object_del(at(d, "charts/1"), "series"), "series", "charts[1].series: missing");
    EXPECT_BAD(json_array_set_new(at(d, "charts/1/series/0/points"), 2, json_pack("[i]", 7)),
               "point", "charts[1].series[0].points[2]: expected [x, y]");
    EXPECT_BAD(
        json_array_set_new(at(d, "charts/1/series/0/points"), 1, json_pack("[s,f]", "5", 1.0)),
        "point x", "charts[1].series[0].points[1]: expected [x, y]");
    EXPECT_BAD(json_array_remove(at(d, "charts/1/series/0/lo"), 0), "lo length",
               "charts[1].series[0].lo: expected 3 numbers (one per point), got 2");
    EXPECT_BAD(json_array_append_new(at(d, "charts/1/series/0/hi"), json_real(4)), "hi length",
               "charts[1].series[0].hi: expected 3 numbers (one per point), got 4");
    EXPECT_BAD(json_array_set_new(at(d, "charts/1/series/0/hi"), 1, json_null()), "hi element",
               "charts[1].series[0].hi[1]: expected a number, got null");
    EXPECT_BAD(json_array_append_new(at(d, "tables/0/rows/1"), json_integer(3)), "row length",
               "tables[0].rows[1]: expected an array of 2 cells");
    EXPECT_BAD(json_array_set_new(at(d, "tables/0/rows/0"), 0, json_object()), "cell",
               "tables[0].rows[0][0]: expected a string or a number, got an object");
    EXPECT_BAD(json_array_set_new(at(d, "tables/0/columns"), 1, json_true()), "column",
               "tables[0].columns[1]: expected a string, got a boolean");
}

/* JSON cannot hold NaN or Inf (Jansson refuses them), but finite numbers can add up to one:
 * a bar whose total overflows, a chart whose range does. */
static void test_check_not_finite(void) {
    json_t *d = doc_new();
    json_object_set_new(at(d, "charts/0/bars/0/segments/0"), "value", json_real(1.5e308));
    json_object_set_new(at(d, "charts/0/bars/0/segments/1"), "value", json_real(1.5e308));
    expect_bad(d, "bar total", "charts[0].bars[0]: the total of the segments is not finite");
    /* a finite total whose pixels would not be: refused, named, before anything is drawn */
    d = doc_new();
    json_object_set_new(at(d, "charts/0/bars/0/segments/0"), "value", json_real(1e308));
    expect_bad(d, "bar too large", "charts[0].bars[0]: the total of the segments, 1e+308, is more");
    d = doc_new();
    json_array_set_new(at(d, "charts/1/series/0/points"), 0, json_pack("[f,f]", 3.0, -1.7e308));
    json_array_set_new(at(d, "charts/1/series/0/points"), 2, json_pack("[f,f]", 7.0, 1.7e308));
    expect_bad(d, "y range", "charts[1]: its values span a range too wide to draw");
    d = doc_new();
    json_array_set_new(at(d, "charts/1/series/0/points"), 0, json_pack("[f,f]", -1.7e308, 1.0));
    json_array_set_new(at(d, "charts/1/series/0/points"), 2, json_pack("[f,f]", 1.7e308, 1.0));
    expect_bad(d, "x range", "charts[1]: its values span a range too wide to draw");
    /* finite values an axis cannot divide (subnormals): refused by the check, named */
    d = doc_new();
    json_array_set_new(
        at(d, "charts/1/series"), 0,
        json_pack("{s:s, s:[[f,f],[f,f]]}", "label", "S", "points", 3.0, 5e-324, 7.0, 1e-320));
    expect_bad(d, "subnormal", "charts[1]: its values are too close together or to 0 to draw");
    /* Nothing non-finite can get in by parsing either. */
    json_error_t je;
    FT_CHECK(json_loads("[NaN]", 0, &je) == NULL, "Jansson refuses NaN");
    FT_CHECK(json_loads("[1e999]", 0, &je) == NULL, "Jansson refuses 1e999");
    FT_CHECK(json_real(NAN) == NULL, "Jansson has no NaN real");
}

/* render refuses a bad document before writing anything. */
static void test_render_checks_first(void) {
    char dir[] = "/tmp/ft_test_report_XXXXXX";
    FT_CHECK(mkdtemp(dir) != NULL, "mkdtemp");
    json_t *d = doc_new();
    json_object_del(d, "title");
    ft_err err = {0};
    FT_CHECK(ft_report_render(d, dir, &err) == FT_EFORMAT, "a bad document is refused");
    char path[512];
    snprintf(path, sizeof path, "%s/report.json", dir);
    FT_CHECK(access(path, F_OK) != 0, "nothing written for a bad document");
    json_decref(d);
    d = doc_new();
    FT_CHECK(ft_report_render(d, dir, &err) == FT_OK, "render: %s", err.msg);
    static const char *const names[] = {"report.html", "report.md", "report.json"};
    for (int i = 0; i < 3; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        FT_CHECK(access(path, F_OK) == 0, "%s written", names[i]);
        unlink(path);
    }
    json_decref(d);
    rmdir(dir);
}

static long file_size(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 ? (long)st.st_size : -1;
}

/* A stacked chart's table is one row per bar and one column per label, unless the bars share
 * few labels: then a list (bar, segment, value), so the page grows with the segments, not with
 * bars x labels (20,000 bars of a label each made a 4 GB page). */
static void test_stacked_table_size(void) {
    char dir[] = "/tmp/ft_test_report_XXXXXX", path[512];
    FT_CHECK(mkdtemp(dir) != NULL, "mkdtemp");
    ft_err err = {0};
    json_t *d = doc_new();
    FT_CHECK(ft_report_render(d, dir, &err) == FT_OK, "render: %s", err.msg);
    snprintf(path, sizeof path, "%s/report.md", dir);
    char *md = ft_test_read_file(path);
    FT_CHECK(md && strstr(md, "| bar | f | g | total |"), "two labels on one bar: a grid");
    free(md);
    json_decref(d);
    enum { NBARS = 600 };
    d = doc_new();
    json_t *bars = json_array();
    for (int i = 0; i < NBARS; i++) {
        char bl[32], sl[32];
        snprintf(bl, sizeof bl, "bar %d", i);
        snprintf(sl, sizeof sl, "only %d", i);
        json_array_append_new(bars, json_pack("{s:s, s:[{s:s, s:f}, {s:s, s:f}]}", "label", bl,
                                              "segments", "label", sl, "value", 1e-3, "label",
                                              "shared", "value", 2e-3));
    }
    json_object_set_new(at(d, "charts/0"), "bars", bars);
    FT_CHECK(ft_report_render(d, dir, &err) == FT_OK, "render: %s", err.msg);
    md = ft_test_read_file(path);
    FT_CHECK(md && strstr(md, "| bar | segment | value |") && strstr(md, "| bar 599 | only 599 |"),
             "%d bars of a label each: a list", NBARS);
    free(md);
    long html = file_size((snprintf(path, sizeof path, "%s/report.html", dir), path));
    long mdn = file_size((snprintf(path, sizeof path, "%s/report.md", dir), path));
    /* a grid would be 600 x 603 cells: over 720 kB of "- | " alone */
    FT_CHECK(mdn > 0 && mdn < 400L * NBARS && html > 0 && html < 2000L * NBARS,
             "%d bars: report.md %ld bytes, report.html %ld", NBARS, mdn, html);
    static const char *const names[] = {"report.html", "report.md", "report.json"};
    for (int i = 0; i < 3; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        unlink(path);
    }
    json_decref(d);
    rmdir(dir);
}

/* A busy machine (report_verdict.c): a verdict on evidence that is not clean, or was measured
 * while the machine was busy, is withheld, once; the banner and the shares. */
static json_t *judged(const char *text) {
    json_error_t je;
    json_t *doc = json_loads(text, 0, &je);
    FT_CHECK(doc != NULL, "the test document: %s", je.text);
    if (doc) ft_report_judge(doc);
    return doc;
}

static void test_judge(void) {
    json_t *doc = judged(
        "{\"claims\": ["
        "{\"verdict\": \"holds\", \"evidence\": ["
        "{\"step\": \"a\", \"clean\": false, \"samples_discarded\": 60, \"samples_taken\": 100},"
        "{\"step\": \"b\", \"clean\": true, \"samples_discarded\": 14, \"samples_taken\": 100}]},"
        "{\"verdict\": \"does not hold\", \"evidence\": ["
        "{\"step\": \"b\", \"clean\": true, \"samples_discarded\": 14, \"samples_taken\": 100}]},"
        "{\"verdict\": \"measured\"}]}");
    if (!doc) return;
    json_t *c0 = json_array_get(json_object_get(doc, "claims"), 0);
    json_t *c1 = json_array_get(json_object_get(doc, "claims"), 1);
    json_t *c2 = json_array_get(json_object_get(doc, "claims"), 2);
    char buf[512];
    FT_CHECK(!strcmp(ft_report_verdict_text(c0, buf, sizeof buf),
                     "inconclusive: the machine was busy; 37% of samples discarded"),
             "withheld: %s", buf);
    FT_CHECK(!strcmp(ft_report_verdict_text(c1, buf, sizeof buf), "does not hold") &&
                 !json_object_get(c1, "withheld"),
             "clean evidence: the verdict stands: %s", buf);
    FT_CHECK(!strcmp(ft_report_verdict_text(c2, buf, sizeof buf), "measured"),
             "no evidence: the verdict stands: %s", buf);
    const json_t *ct = json_object_get(doc, "contention");
    FT_CHECK(json_integer_value(json_object_get(ct, "steps")) == 2 &&
                 json_integer_value(json_object_get(ct, "unclean_steps")) == 1 &&
                 json_integer_value(json_object_get(ct, "samples_discarded")) == 74 &&
                 json_integer_value(json_object_get(ct, "samples_taken")) == 200,
             "contention from the claims' evidence, each step once");
    FT_CHECK(ft_report_busy_text(doc, buf, sizeof buf) &&
                 strstr(buf, "1 of 2 steps was not measured cleanly, and 37% of the samples"),
             "the banner: %s", buf);
    json_t *again = json_deep_copy(doc);
    ft_report_judge(again);
    FT_CHECK(json_equal(again, doc), "judging a judged document changes nothing");
    json_decref(again);
    json_object_set_new(doc, "contention", json_pack("{s:i, s:i}", "steps", 4, "unclean_steps", 0));
    FT_CHECK(!ft_report_busy_text(doc, buf, sizeof buf) && !buf[0],
             "no banner when every step was clean");
    json_decref(doc);
    /* Clean, but measured while the machine was busy: withheld all the same, saying so. */
    doc = judged("{\"claims\": [{\"verdict\": \"holds\", \"evidence\": ["
                 "{\"step\": \"a\", \"clean\": true, \"loaded\": true},"
                 "{\"step\": \"b\", \"clean\": true, \"loaded\": false},"
                 "{\"step\": \"c\", \"clean\": true}]}]}");
    if (!doc) return;
    FT_CHECK(!strcmp(ft_report_verdict_text(json_array_get(json_object_get(doc, "claims"), 0), buf,
                                            sizeof buf),
                     "inconclusive: the machine was busy while 1 of its 3 steps was measured"),
             "loaded evidence withheld: %s", buf);
    FT_CHECK(ft_report_busy_text(doc, buf, sizeof buf) &&
                 strstr(buf, "busy: 1 of 3 steps was measured while other processes kept"),
             "the loaded banner: %s", buf);
    json_decref(doc);
    /* A step document: unclean (a sample rule), loaded (its load), or neither. */
    const char *steps[] = {
        "{\"whole\": {\"stats\": {\"clean\": true}}, \"load\": {\"busy\": false}}",
        "{\"whole\": {\"stats\": {\"clean\": true}}, \"load\": {\"busy\": true}}",
        "{\"whole\": {\"stats\": {\"clean\": false}}, \"load\": {\"busy\": true}}",
        "{\"stages\": [{\"alone\": {\"clean\": false}}], \"whole\": {\"stats\": {}}}"};
    const int bound[] = {0, 1, 1, 1}, loaded[] = {0, 1, 0, 0};
    for (int i = 0; i < 4; i++) {
        json_t *st = json_loads(steps[i], 0, NULL);
        ft_report_busy b = {0};
        ft_report_step_busy(st, &b);
        FT_CHECK(st && ft_report_step_bound(st) == bound[i] && b.loaded_steps == loaded[i] &&
                     b.unclean_steps + b.loaded_steps == bound[i],
                 "step %d: bound %d, loaded %d", i, ft_report_step_bound(st), b.loaded_steps);
        json_decref(st);
    }
    FT_CHECK(!strcmp(ft_report_share_text(4, 1000, buf, sizeof buf), "0.4%") &&
                 !strcmp(ft_report_share_text(1, 100000, buf, sizeof buf), "<0.1%") &&
                 !strcmp(ft_report_share_text(0, 0, buf, sizeof buf), "0%"),
             "shares for humans");
}

int main(void) {
    FT_RUN(test_human_units);
    FT_RUN(test_ticks);
    FT_RUN(test_colours);
    FT_RUN(test_escaping);
    FT_RUN(test_check_valid);
    FT_RUN(test_check_required);
    FT_RUN(test_check_types);
    FT_RUN(test_check_not_finite);
    FT_RUN(test_render_checks_first);
    FT_RUN(test_stacked_table_size);
    FT_RUN(test_judge);
    return ft_test_finish();
}
