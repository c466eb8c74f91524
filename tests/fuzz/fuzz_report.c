/* fuzz_report.c: the report document's reader and renderer (tuner/report_check.c,
 * tuner/report_render.c and the writers of the page it builds) on arbitrary bytes.
 *
 * Exercises ft_report_load on the input as a file (malformed JSON, duplicate keys, the schema
 * check of every claim, chart, series, bar, segment and table), then on a document that loaded:
 * the render of all three files into a temporary folder.
 *
 * A finding, besides a sanitizer report, a leak or a timeout: a failure without its status and
 * message in ft_err; a document ft_report_load accepts that ft_report_check refuses on its own;
 * a render that leaves a temporary file or misses one of the three files, or that fails and
 * leaves any file behind; an element on the page the renderer does not write itself (a string
 * of the document that reached the HTML or SVG unescaped: corpus seed-report-markup). A checked
 * document may still fail to render with its message: finite
 * values whose axis does not fit in a double (a point at -1e308 beside one at 8) are refused
 * there, not by the check (corpus: nonfinite-axis).
 */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tuner/report.h"
#include "fuzz.h"

static char dir[64];

/* The folder every render goes to, made once; emptied after each render. */
static void clean(void) {
    DIR *d = opendir(dir);
    if (!d) return;
    struct dirent *e;
    char path[512];
    while ((e = readdir(d)))
        if (e->d_name[0] != '.') {
            snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
            unlink(path);
        }
    closedir(d);
}

static int count_files(void) {
    DIR *d = opendir(dir);
    if (!d) return -1;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)))
        n += e->d_name[0] != '.';
    closedir(d);
    return n;
}

/* The elements the renderer writes (tuner/report_doc_html.c, tuner/report_svg.c); any other tag
 * on the page came from the document. */
static const char *const own_tags[] = {
    "!DOCTYPE", "html",       "head",  "meta",    "title",    "style",  "body",       "h1", "h2",
    "h3",       "p",          "code",  "section", "div",      "span",   "blockquote", "ul", "li",
    "figure",   "figcaption", "table", "thead",   "tbody",    "tr",     "th",         "td", "svg",
    "text",     "line",       "rect",  "g",       "polyline", "circle", "path",       NULL};

static void check_tags(void) {
    char path[512];
    snprintf(path, sizeof path, "%s/report.html", dir);
    FILE *f = fopen(path, "rb");
    FUZZ_CHECK(f != NULL, "report.html cannot be read back");
    int c, line = 1;
    while ((c = fgetc(f)) != EOF) {
        line += c == '\n';
        if (c != '<') continue;
        char name[16];
        size_t n = 0;
        if ((c = fgetc(f)) != '/' && c != EOF) ungetc(c, f);
        while ((c = fgetc(f)) != EOF && c != ' ' && c != '>' && c != '/' && c != '\n' &&
               n < sizeof name - 1)
            name[n++] = (char)c;
        name[n] = '\0';
        if (c == '\n') line++;
        int known = 0;
        for (int i = 0; own_tags[i] && !known; i++)
            known = strcmp(own_tags[i], name) == 0;
        if (!known) fclose(f);
        FUZZ_CHECK(known, "report.html line %d: <%s> is not an element the renderer writes", line,
                   name);
    }
    fclose(f);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (!dir[0]) {
        snprintf(dir, sizeof dir, "/tmp/ft_fuzz_report.XXXXXX");
        FUZZ_CHECK(mkdtemp(dir) != NULL, "cannot make a folder to render into");
    }
    const char *path = fuzz_input_path(data, size);
    ft_err err = {0};
    json_t *doc = NULL;
    ft_status s = ft_report_load(path, &doc, &err);
    if (!fuzz_loaded(s, &err, doc, "ft_report_load")) return 0;
    ft_err e2 = {0};
    FUZZ_CHECK(ft_report_check(doc, &e2) == FT_OK, "a loaded document fails its check: %s", e2.msg);
    s = ft_report_render(doc, dir, &err);
    if (s) {
        fuzz_check_err(s, &err, "ft_report_render");
        FUZZ_CHECK(count_files() == 0, "a failed render left %d files", count_files());
    } else {
        FUZZ_CHECK(count_files() == 3, "the render left %d files, not report.html, .md, .json",
                   count_files());
        check_tags();
    }
    clean();
    json_decref(doc);
    return 0;
}
