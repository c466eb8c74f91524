/* cmd_bench_t1.c: `flaretune bench --t1 FILE`: one configuration of a kernel a FAIR T1 file
 * describes, compiled, run, checked and timed as `tune --t1` evaluates each candidate
 * (ft_t1_measure), on the GPU or on the emulator. */
#include <getopt.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "core/format.h"
#include "core/json.h"
#include "op/op_json.h"
#include "tuner/t1_tune.h"

enum { O_JSON = 1 };
static const struct option opts[] = {
    FT_CLI_T1_KERNEL_OPTIONS,
    FT_CLI_T1_ARG_OPTION,
    FT_CLI_T1_RUN_OPTIONS,
    FT_CLI_ARG("config", FT_T1_OPT_CONFIG),
    FT_CLI_ARG("seed", FT_T1_OPT_SEED),
    FT_CLI_FLAG("json", O_JSON),
    FT_CLI_END,
};

void ft_cli_bench_t1_usage(FILE *f) {
    fprintf(f,
            "       flaretune bench --t1 FILE [--kernel-file F] [--arg NAME=TYPE:SIZE[:FILL[:V]]]...\n"
            "                       [--config CFG] [--backend cuda|cuda-emu] [--reps N] [--blocks N]\n"
            "                       [--reference NAME=FILE.npy]... [--seed N] [--json]\n\n"
            "Time one configuration of a kernel a FAIR T1 file describes (docs/t1.md), the\n"
            "default one unless --config names another, as `tune --t1` times each candidate:\n"
            "compiled with its values as macros, run on inputs drawn from --seed, checked\n"
            "against the default configuration's outputs (or the --reference files), and timed\n"
            "--reps times (default 20) by the device's clock, or on the emulator as a sample of\n"
            "--blocks blocks (default 8) scaled to the grid. Prints its median, IQR and count, and\n"
            "the default's for comparison. Exit 4 when its outputs disagree, 1 when it does not\n"
            "compile or run, 3 with --backend cuda and no GPU.\n");
}

static int bench_t1_opt(void *ctx, int opt, const char *arg) {
    (void)arg;
    if (opt == O_JSON) *(int *)ctx = 1;
    return FT_EXIT_OK;
}

/* A time with its spread: "1.234 ms (IQR 0.05 ms, n=20)". */
static void time_text(const ft_stats *st, char *buf, size_t n) {
    char a[32], b[32];
    snprintf(buf, n, "%s (IQR %s, n=%d)", ft_fmt_time(st->median, 0, a, sizeof a),
             ft_fmt_time(st->iqr, 0, b, sizeof b), st->samples);
}

int ft_cli_bench_t1(int argc, char **argv) {
    int json = 0;
    ft_t1_tune_opts to;
    ft_t1_tune_opts_default(&to);
    ft_cli_t1_args a = {.seed = to.seed};
    int code = ft_cli_t1_parse("bench", argc, argv, opts, &a, bench_t1_opt, &json);
    if (code) return code;
    ft_err err = {0};
    ft_t1 *t = NULL;
    if (ft_t1_load_args(a.path, a.kfile, a.argspecs, a.nargspecs, &t, &err))
        return ft_cli_t1_fail("bench", &err);
    ft_cli_t1_note("bench", t);
    ft_config *cfgs = NULL;
    int64_t n = 0;
    if ((code = ft_cli_t1_checkable("bench", t)) ||
        (code = ft_cli_t1_select("bench", t, &a, &cfgs, &n))) {
        ft_t1_free(t);
        return code;
    }
    ft_cli_t1_apply("bench", &a, &to);
    ft_t1_measure_result r;
    ft_status s = ft_t1_measure(t, &to, &cfgs[0], &r, &err);
    char cfg[512], def[512];
    ft_config_format(&t->space, &cfgs[0], cfg, sizeof cfg);
    ft_config dc;
    ft_config_default(&t->space, &dc);
    ft_config_format(&t->space, &dc, def, sizeof def);
    const int is_default = ft_config_equal(&cfgs[0], &dc);
    const char *against = to.nrefs ? "the --reference files" : "the default configuration's outputs";
    if (s != FT_OK) {
        code = s == FT_ENODEV ? (ft_cli_fail_err(&err), FT_EXIT_NODEV) : ft_cli_fail_err(&err);
    } else if (json) {
        const double sp = r.why[0] || r.ref_why[0] ? NAN : r.ref_stats.median / r.stats.median;
        json_t *doc = json_pack(
            "{s:s, s:s, s:s, s:o, s:s, s:s, s:o, s:o, s:o, s:o, s:s, s:o}", "kernel", t->kernel_name,
            "t1", t->path, "backend", to.backend, "config", ft_config_to_json(&t->space, &cfgs[0]),
            "clock", r.clock, "checked_against", against, "passed", json_boolean(!r.why[0]),
            "rejected", r.why[0] ? json_string(r.why) : json_null(), "stats",
            r.why[0] && !r.stats.samples ? json_null() : ft_stats_to_json(&r.stats),
            "default_stats", r.ref_why[0] ? json_null() : ft_stats_to_json(&r.ref_stats),
            "default", def, "speedup", ft_json_number(sp));
        if (r.note[0]) json_object_set_new(doc, "note", json_string(r.note));
        ft_cli_print_json(doc);
    } else {
        char tt[128];
        printf("%s from %s on %s: %s\n", t->kernel_name, t->path, to.backend, cfg);
        if (r.why[0]) {
            printf("  rejected: %s\n", r.why);
        } else {
            time_text(&r.stats, tt, sizeof tt);
            printf("  median %s, timed by: %s\n", tt, r.clock);
            printf("  checked against %s: passed\n", against);
        }
        if (!is_default && !r.ref_why[0]) {
            time_text(&r.ref_stats, tt, sizeof tt);
            printf("  the default configuration (%s): %s", def, tt);
            if (!r.why[0]) printf("; %.2fx", r.ref_stats.median / r.stats.median);
            printf("\n");
        } else if (!is_default) {
            printf("  the default configuration (%s) disagrees with the --reference files: %s\n",
                   def, r.ref_why);
        }
        if (r.note[0]) fprintf(stderr, "bench: note: %s\n", r.note);
    }
    if (!code && r.why[0]) code = r.disagreed ? FT_EXIT_VERIFY : FT_EXIT_FAIL;
    free(cfgs);
    ft_t1_free(t);
    return code;
}
