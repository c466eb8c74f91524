/* cmd_report.c: `flaretune report`: a report document rendered as a page, Markdown and JSON. */
#include <getopt.h>
#include <stdio.h>

#include "cli.h"
#include "flaretune/report.h"

#define DEFAULT_DIR "out/report"

static void usage(FILE *f) {
    fprintf(f, "usage: flaretune report --from REPORT.json [-o DIR]\n\n"
               "Render a saved report document (format " FT_REPORT_FORMAT ", docs/report.md)\n"
               "without measuring anything, into three files in DIR:\n"
               "  report.html   one self-contained page (no network, no script): the answers to\n"
               "                the claims first, each chart drawn as inline SVG with its data\n"
               "                as a table under it, every table, the machine\n"
               "  report.md     the same sections in Markdown\n"
               "  report.json   the document itself, pretty-printed\n"
               "Each is written to a temporary file in DIR and the three are renamed into place\n"
               "together: a failure leaves the old files as they were. A missing or malformed\n"
               "document gives one line naming the first bad path and exit 1.\n\n"
               "options:\n"
               "  --from FILE         the report document to render\n"
               "  -o, --output DIR    where to write (default " DEFAULT_DIR "; created when\n"
               "                      missing)\n");
}

static int run(int argc, char **argv) {
    enum { O_FROM = 1000 };
    static const struct option opts[] = {{"from", required_argument, NULL, O_FROM},
                                         {"output", required_argument, NULL, 'o'},
                                         {NULL, 0, NULL, 0}};
    const char *from = NULL, *dir = DEFAULT_DIR;
    int o;
    optind = 0;
    opterr = 0;
    while ((o = getopt_long(argc, argv, ":o:", opts, NULL)) != -1) {
        if (o == O_FROM)
            from = optarg;
        else if (o == 'o')
            dir = optarg;
        else
            return ft_cli_bad_option("report", o, argv);
    }
    if (optind < argc)
        return ft_cli_fail(FT_EXIT_USAGE, "report: unexpected argument '%s'", argv[optind]);
    if (!from)
        return ft_cli_fail(FT_EXIT_USAGE, "report: which report? --from REPORT.json (see "
                                          "`flaretune report --help`)");
    if (!*dir) return ft_cli_fail(FT_EXIT_USAGE, "report: -o needs a directory");
    ft_err err = {0};
    json_t *doc = NULL;
    if (ft_report_load(from, &doc, &err)) return ft_cli_fail(FT_EXIT_FAIL, "report: %s", err.msg);
    ft_status s = ft_report_render(doc, dir, &err);
    json_decref(doc);
    if (s) return ft_cli_fail(FT_EXIT_FAIL, "report: %s", err.msg);
    printf("%s/report.html\n%s/report.md\n%s/report.json\n", dir, dir, dir);
    return FT_EXIT_OK;
}

const ft_cmd ft_cmd_report = {"report", "render a report document as HTML, Markdown and JSON", run,
                              usage};
