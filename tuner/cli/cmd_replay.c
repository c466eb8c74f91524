/* cmd_replay.c: `flaretune replay`: run the search strategies against a recorded exhaustive
 * landscape (no kernel runs) and count the evaluations each needs to come within a target of
 * the optimum, over several seeds. */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"
#include "flaretune/format.h"
#include "flaretune/eventlog.h"
#include "flaretune/json.h"
#include "flaretune/op_json.h"
#include "flaretune/replay.h"

#define MAX_SEEDS 1000

static void usage(FILE *f) {
    fprintf(f,
            "usage: flaretune replay LOG [--strategy S|all] [--seeds N] [--target F]\n"
            "                            [--budget N] [--json]\n\n"
            "Replay search strategies against the landscape recorded in LOG, the event log of an\n"
            "exhaustive run (`flaretune tune OP --strategy exhaustive --log LOG`; its last run,\n"
            "with the earlier runs it resumed). Each proposal is one evaluation, scored from the\n"
            "log: nothing runs. For each strategy, prints the median, min and max over N seeds\n"
            "of the evaluations needed until the best found is within F of the optimum, also\n"
            "as a fraction of the valid candidates (exhaustive search needs all of them to\n"
            "know it has the optimum; its row shows when space order first reaches the target).\n\n"
            "  --strategy S   exhaustive, random, anneal, evolve or all (default all)\n"
            "  --seeds N      seeds 1..N (default 10)\n"
            "  --target F     relative distance to the optimum, 0.05 or 5%% (default 5%%)\n"
            "  --budget N     stop a replay after N evaluations (default: none)\n"
            "  --json         one JSON object on stdout\n");
}

typedef struct {
    int kind;
    int evals[MAX_SEEDS]; /* -1: not reached */
    int reached, min, max;
    double median; /* -1 when the median seed did not reach the target */
} row;

static int cmp_evals(const void *a, const void *b) {
    int x = *(const int *)a, y = *(const int *)b;
    if (x < 0) x = 1 << 30;
    if (y < 0) y = 1 << 30;
    return (x > y) - (x < y);
}

static void summarise(row *r, int nseeds) {
    int sorted[MAX_SEEDS];
    memcpy(sorted, r->evals, (size_t)nseeds * sizeof *sorted);
    qsort(sorted, (size_t)nseeds, sizeof *sorted, cmp_evals);
    r->reached = 0;
    r->min = r->max = -1;
    for (int i = 0; i < nseeds; i++)
        if (sorted[i] >= 0) {
            r->reached++;
            if (r->min < 0) r->min = sorted[i];
            r->max = sorted[i];
        }
    int lo = sorted[(nseeds - 1) / 2], hi = sorted[nseeds / 2];
    r->median = lo < 0 || hi < 0 ? -1 : 0.5 * (lo + hi);
}

static int parse_int(const char *arg, const char *opt, int lo, int hi, int *out) {
    char *end;
    errno = 0;
    long v = strtol(arg, &end, 10);
    if (end == arg || *end || errno || v < lo || v > hi)
        return ft_cli_fail(FT_EXIT_USAGE, "replay: %s wants an integer in [%d, %d], got '%s'", opt,
                           lo, hi, arg);
    *out = (int)v;
    return 0;
}

static int parse_target(const char *arg, double *out) {
    char *end;
    errno = 0;
    double v = strtod(arg, &end);
    if (end != arg && *end == '%' && !end[1]) {
        v /= 100;
        end++;
    }
    if (end == arg || *end || errno || !(v >= 0) || !(v < 10))
        return ft_cli_fail(FT_EXIT_USAGE,
                           "replay: --target wants a fraction such as 0.05 or 5%%, got '%s'", arg);
    *out = v;
    return 0;
}

typedef struct {
    int json, nseeds, budget, only;
    double target;
} replay_opts;

/* Replay the strategies on one log: its table on stdout, or its JSON object in *out. */
static int replay_one(const char *path, const replay_opts *ro, json_t **out) {
    const int json = ro->json, nseeds = ro->nseeds, budget = ro->budget, only = ro->only;
    const double target = ro->target;
    ft_err err = {0};
    ft_landscape l;
    if (ft_landscape_load(path, &l, &err)) return ft_cli_fail_err(&err);

    row rows[FT_STRAT_COUNT];
    int nrows = 0;
    for (int k = 0; k < FT_STRAT_COUNT; k++) {
        if (only >= 0 && k != only) continue;
        row *r = &rows[nrows++];
        r->kind = k;
        for (int s = 0; s < nseeds; s++) {
            ft_replay_result res;
            if (ft_replay_run(&l, (ft_strategy_kind)k, (uint64_t)s + 1, target, budget, &res,
                              &err)) {
                ft_landscape_free(&l);
                return ft_cli_fail_err(&err);
            }
            r->evals[s] = res.to_target;
        }
        summarise(r, nseeds);
    }

    const int nvalid = l.ncands, within = ft_landscape_count_within(&l, target);
    const int first = ft_landscape_first_within(&l, target);
    const double opt = l.score[l.best];
    char optcfg[512], dims[256], t[32];
    ft_config_format(&l.space, &l.cands[l.best], optcfg, sizeof optcfg);
    ft_call_dims_str(&l.call, dims, sizeof dims);
    /* The best non-exhaustive strategy by median (unreached medians last). */
    int bestrow = -1;
    for (int i = 0; i < nrows; i++)
        if (rows[i].kind != FT_STRAT_EXHAUSTIVE && rows[i].median >= 0 &&
            (bestrow < 0 || rows[i].median < rows[bestrow].median))
            bestrow = i;

    if (json) {
        json_t *strategies = json_array();
        for (int i = 0; i < nrows; i++) {
            const row *r = &rows[i];
            json_t *ev = json_array();
            for (int s = 0; s < nseeds; s++)
                json_array_append_new(ev,
                                      r->evals[s] < 0 ? json_null() : json_integer(r->evals[s]));
            json_array_append_new(
                strategies,
                json_pack("{s:s, s:i, s:i, s:o, s:o, s:o, s:o, s:o}", "name",
                          ft_strategy_names[r->kind], "seeds", nseeds, "reached", r->reached,
                          "median", r->median < 0 ? json_null() : json_real(r->median), "min",
                          r->min < 0 ? json_null() : json_integer(r->min), "max",
                          r->max < 0 ? json_null() : json_integer(r->max), "median_frac",
                          r->median < 0 ? json_null() : json_real(r->median / nvalid),
                          "evaluations", ev));
        }
        json_t *root = json_pack(
            "{s:s, s:s, s:s, s:s, s:s, s:i, s:i, s:i, s:f, s:o, s:f, s:i, s:i, s:i, s:o, s:o}",
            "log", path, "op", l.op->name, "backend", l.backend->name, "preset", l.preset, "dims",
            dims, "runs", l.nruns, "valid", nvalid, "rejected", l.nrejected, "optimum_s", opt,
            "optimum_config", ft_config_to_json(&l.space, &l.cands[l.best]), "target", target,
            "within_target", within, "exhaustive_first", first, "exhaustive_all", nvalid,
            "best_strategy",
            bestrow < 0 ? json_null() : json_string(ft_strategy_names[rows[bestrow].kind]),
            "strategies", strategies);
        json_object_set_new(root, "budget", json_integer(budget));
        *out = root;
        ft_landscape_free(&l);
        return FT_EXIT_OK;
    }

    printf("landscape  %s on %s, preset %s (%s)%s\n", l.op->name, l.backend->name,
           l.preset[0] ? l.preset : "-", dims, l.nruns > 1 ? ", resumed runs merged" : "");
    printf("           %d valid candidates (%d rejected), optimum %s at %s\n", nvalid, l.nrejected,
           ft_fmt_time(opt, 0, t, sizeof t), optcfg);
    printf("target     within %.3g%% of the optimum: %d candidate%s (%.1f%%); exhaustive search\n"
           "           in space order first reaches it at evaluation %d and needs all %d to "
           "know it has the optimum\n",
           100 * target, within, within == 1 ? "" : "s", 100.0 * within / nvalid, first, nvalid);
    if (budget) printf("budget     %d evaluations per replay\n", budget);
    printf("\n%-12s %6s %8s %8s %6s %6s %9s\n", "strategy", "seeds", "reached", "median", "min",
           "max", "of valid");
    for (int i = 0; i < nrows; i++) {
        const row *r = &rows[i];
        char med[16] = "-", mn[16] = "-", mx[16] = "-", frac[16] = "-", reach[24];
        if (r->median >= 0) {
            snprintf(med, sizeof med, "%.1f", r->median);
            snprintf(frac, sizeof frac, "%.1f%%", 100 * r->median / nvalid);
        }
        if (r->min >= 0) snprintf(mn, sizeof mn, "%d", r->min);
        if (r->max >= 0) snprintf(mx, sizeof mx, "%d", r->max);
        snprintf(reach, sizeof reach, "%d/%d", r->reached, nseeds);
        printf("%-12s %6d %8s %8s %6s %6s %9s\n", ft_strategy_names[r->kind], nseeds, reach, med,
               mn, mx, frac);
    }
    if (bestrow >= 0)
        printf("\nbest non-exhaustive: %s, median %.1f evaluations = %.1f%% of the %d exhaustive "
               "needs\n",
               ft_strategy_names[rows[bestrow].kind], rows[bestrow].median,
               100 * rows[bestrow].median / nvalid, nvalid);
    ft_landscape_free(&l);
    return FT_EXIT_OK;
}

#define MAX_FAMILY 64

static int run(int argc, char **argv) {
    enum { O_STRATEGY = 1, O_SEEDS, O_TARGET, O_BUDGET, O_JSON };
    static const struct option opts[] = {{"strategy", required_argument, NULL, O_STRATEGY},
                                         {"seeds", required_argument, NULL, O_SEEDS},
                                         {"target", required_argument, NULL, O_TARGET},
                                         {"budget", required_argument, NULL, O_BUDGET},
                                         {"json", no_argument, NULL, O_JSON},
                                         {NULL, 0, NULL, 0}};
    int json = 0, nseeds = 10, budget = 0, only = -1, o;
    double target = FT_REPLAY_TARGET;
    optind = 0;
    opterr = 0;
    while ((o = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (o) {
        case O_STRATEGY:
            if (strcmp(optarg, "all") == 0) {
                only = -1;
            } else if ((only = ft_strategy_parse(optarg)) < 0) {
                return ft_cli_fail(FT_EXIT_USAGE,
                                   "replay: unknown strategy '%s' (exhaustive, random, anneal, "
                                   "evolve or all)",
                                   optarg);
            }
            break;
        case O_SEEDS:
            if (parse_int(optarg, "--seeds", 1, MAX_SEEDS, &nseeds)) return FT_EXIT_USAGE;
            break;
        case O_TARGET:
            if (parse_target(optarg, &target)) return FT_EXIT_USAGE;
            break;
        case O_BUDGET:
            if (parse_int(optarg, "--budget", 0, 1 << 30, &budget)) return FT_EXIT_USAGE;
            break;
        case O_JSON: json = 1; break;
        default:
            return ft_cli_fail(FT_EXIT_USAGE,
                               "replay: unknown option '%s' (see `flaretune replay --help`)",
                               argv[optind - 1]);
        }
    }
    if (optind >= argc)
        return ft_cli_fail(FT_EXIT_USAGE,
                           "replay: which event log? (see `flaretune replay --help`)");
    if (optind + 1 < argc)
        return ft_cli_fail(FT_EXIT_USAGE, "replay: unexpected argument '%s'", argv[optind + 1]);
    const char *path = argv[optind];
    replay_opts ro = {json, nseeds, budget, only, target};
    /* The --log of `tune all` or a sweep names a family of logs (LOG.OP, ...): each is replayed. */
    static char logs[MAX_FAMILY][FT_EVENTLOG_PATH_MAX];
    int nlogs = ft_eventlog_family(path, logs, MAX_FAMILY);
    struct stat sb;
    if (stat(path, &sb) == 0 && S_ISREG(sb.st_mode)) nlogs = 1; /* the file itself, as named */
    if (nlogs > MAX_FAMILY) nlogs = MAX_FAMILY;
    if (nlogs == 0) {
        if (stat(path, &sb) == 0)
            return ft_cli_fail(FT_EXIT_FAIL, "replay: %s is not an event log (a directory?)", path);
        return ft_cli_fail(FT_EXIT_FAIL, "replay: %s: no such event log, nor logs of a `tune all` "
                                         "or sweep with that --log (%s.OP)", path, path);
    }
    json_t *many = nlogs > 1 ? json_array() : NULL;
    for (int i = 0; i < nlogs; i++) {
        json_t *one = NULL;
        if (!json && nlogs > 1) printf("%s== %s\n", i ? "\n" : "", logs[i]);
        int code = replay_one(logs[i], &ro, &one);
        if (code) {
            json_decref(many);
            return code;
        }
        if (one && many) json_array_append_new(many, one);
        else if (one) {
            json_dumpf(one, stdout, JSON_INDENT(2));
            fputc('\n', stdout);
            json_decref(one);
        }
    }
    if (many) {
        json_t *root = json_pack("{s:s, s:o}", "log", path, "logs", many);
        json_dumpf(root, stdout, JSON_INDENT(2));
        fputc('\n', stdout);
        json_decref(root);
    }
    return FT_EXIT_OK;
}

const ft_cmd ft_cmd_replay = {
    "replay", "replay search strategies against a recorded exhaustive landscape", run, usage};
