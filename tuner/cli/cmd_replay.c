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
            "                            [--budget N] [--prune predicted=F[,F...]] [--json]\n\n"
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
            "  --prune predicted=F[,F...]\n"
            "                 when the log's candidates carry a predicted time (tune --predict):\n"
            "                 for each factor F > 1, how many candidates `tune --prune\n"
            "                 predicted=F` would measure and whether the optimum (or one within\n"
            "                 the target) is among them (default 1.5,2,4); such a log also\n"
            "                 gets the rank correlation of predicted and measured times, and\n"
            "                 when measuring in predicted order first reaches the target\n"
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

#define MAX_PRUNE 8

typedef struct {
    int json, nseeds, budget, only;
    double target;
    double prune[MAX_PRUNE]; /* --prune predicted=F factors (none given: 1.5, 2, 4) */
    int nprune;
} replay_opts;

/* --prune predicted=F[,F...] (repeatable): each factor > 1, at most MAX_PRUNE in all. Returns
 * an exit code. */
static int parse_prune(const char *arg, replay_opts *ro) {
    const char *eq = strchr(arg, '=');
    if (!eq || eq - arg != 9 || strncmp(arg, "predicted", 9) != 0)
        return ft_cli_fail(FT_EXIT_USAGE,
                           "replay: --prune expects predicted=FACTOR[,FACTOR...], got '%s'", arg);
    for (const char *p = eq + 1;;) {
        char *end;
        errno = 0;
        double v = strtod(p, &end);
        if (end == p || (*end && *end != ',') || errno || !(v > 1) || !isfinite(v))
            return ft_cli_fail(FT_EXIT_USAGE,
                               "replay: --prune predicted= expects factors > 1 (the slowest "
                               "prediction measured, as a multiple of the best), got '%s'",
                               eq + 1);
        if (ro->nprune >= MAX_PRUNE)
            return ft_cli_fail(FT_EXIT_USAGE, "replay: --prune: at most %d factors", MAX_PRUNE);
        ro->prune[ro->nprune++] = v;
        if (!*end) return FT_EXIT_OK;
        p = end + 1;
    }
}

/* What the log's predictions say: their rank correlation with the measurements, where
 * measuring in predicted order reaches the target, and what each prune factor keeps. */
typedef struct {
    double rank;
    int rank_n, first;
    ft_prune_outcome prune[MAX_PRUNE];
    int nprune;
} predicted_summary;

static void predicted_summarise(const ft_landscape *l, const replay_opts *ro,
                                predicted_summary *ps) {
    static const double defaults[] = {1.5, 2, 4};
    const double *f = ro->nprune ? ro->prune : defaults;
    ps->nprune = ro->nprune ? ro->nprune : 3;
    ps->rank = ft_landscape_rank_correlation(l, &ps->rank_n);
    ps->first = ft_landscape_first_within_predicted(l, ro->target);
    for (int i = 0; i < ps->nprune; i++)
        ft_landscape_prune(l, f[i], ro->target, &ps->prune[i]);
}

static json_t *predicted_json(const ft_landscape *l, const predicted_summary *ps) {
    json_t *prune = json_array();
    for (int i = 0; i < ps->nprune; i++) {
        const ft_prune_outcome *o = &ps->prune[i];
        json_array_append_new(
            prune, json_pack("{s:f, s:i, s:f, s:b, s:b, s:o}", "factor", o->factor, "measured",
                             o->kept, "measured_frac", (double)o->kept / l->ncands, "optimum_kept",
                             o->best_kept, "within_target_kept", o->within_kept, "best_kept_ratio",
                             ft_json_number(o->best_kept_ratio)));
    }
    return json_pack("{s:s, s:i, s:o, s:i, s:i, s:o}", "device", l->predict_device, "predicted",
                     l->npredicted, "rank_correlation", ft_json_number(ps->rank), "compared",
                     ps->rank_n, "first_within", ps->first, "prune", prune);
}

/* The prediction's lines: its order against space order and the best strategy (`best`, NULL:
 * none), and a row per prune factor. */
static void predicted_print(const ft_landscape *l, const predicted_summary *ps, int first,
                            const row *best) {
    char rank[16] = "-";
    if (!isnan(ps->rank)) snprintf(rank, sizeof rank, "%.2f", ps->rank);
    printf("\npredicted  on %s for %d of %d candidates; rank correlation with the medians %s "
           "(over %d)\n",
           l->predict_device[0] ? l->predict_device : "?", l->npredicted, l->ncands, rank,
           ps->rank_n);
    printf("           measuring in predicted order first reaches the target at evaluation %d "
           "(space order: %d",
           ps->first, first);
    if (best)
        printf("; best strategy %s: median %.1f", ft_strategy_names[best->kind], best->median);
    printf(")\n\n%-18s %8s %9s %13s %14s %10s\n", "prune", "measured", "of valid", "optimum kept",
           "within target", "best kept");
    for (int i = 0; i < ps->nprune; i++) {
        const ft_prune_outcome *o = &ps->prune[i];
        char name[32], ratio[16] = "-";
        snprintf(name, sizeof name, "predicted=%g", o->factor);
        if (isfinite(o->best_kept_ratio))
            snprintf(ratio, sizeof ratio, "%.2fx", o->best_kept_ratio);
        printf("%-18s %8d %8.1f%% %13s %14s %10s\n", name, o->kept, 100.0 * o->kept / l->ncands,
               o->best_kept ? "yes" : "no", o->within_kept ? "yes" : "no", ratio);
    }
}

typedef struct {
    row rows[FT_STRAT_COUNT];
    int nrows, bestrow; /* bestrow: the best non-exhaustive strategy by median (-1: none) */
} replay_table;

/* Each strategy (or the one asked for) replayed over the seeds. Returns an exit code. */
static int replay_strategies(const ft_landscape *l, const replay_opts *ro, replay_table *t) {
    ft_err err = {0};
    t->nrows = 0;
    for (int k = 0; k < FT_STRAT_COUNT; k++) {
        if (ro->only >= 0 && k != ro->only) continue;
        row *r = &t->rows[t->nrows++];
        r->kind = k;
        ft_replay_opts o;
        ft_replay_opts_default(&o);
        o.kind = (ft_strategy_kind)k;
        o.target = ro->target;
        o.budget = ro->budget;
        for (int s = 0; s < ro->nseeds; s++) {
            ft_replay_result res;
            o.seed = (uint64_t)s + 1;
            if (ft_replay_run(l, &o, &res, &err)) return ft_cli_fail_err(&err);
            r->evals[s] = res.to_target;
        }
        summarise(r, ro->nseeds);
    }
    /* The best non-exhaustive strategy by median (unreached medians last). */
    t->bestrow = -1;
    for (int i = 0; i < t->nrows; i++)
        if (t->rows[i].kind != FT_STRAT_EXHAUSTIVE && t->rows[i].median >= 0 &&
            (t->bestrow < 0 || t->rows[i].median < t->rows[t->bestrow].median))
            t->bestrow = i;
    return FT_EXIT_OK;
}

static json_t *replay_json(const char *path, const ft_landscape *l, const replay_opts *ro,
                           const replay_table *t, const predicted_summary *ps) {
    const int nvalid = l->ncands, nseeds = ro->nseeds;
    json_t *strategies = json_array();
    for (int i = 0; i < t->nrows; i++) {
        const row *r = &t->rows[i];
        json_t *ev = json_array();
        for (int s = 0; s < nseeds; s++)
            json_array_append_new(ev, r->evals[s] < 0 ? json_null() : json_integer(r->evals[s]));
        json_array_append_new(
            strategies,
            json_pack("{s:s, s:i, s:i, s:o, s:o, s:o, s:o, s:o}", "name",
                      ft_strategy_names[r->kind], "seeds", nseeds, "reached", r->reached, "median",
                      r->median < 0 ? json_null() : json_real(r->median), "min",
                      r->min < 0 ? json_null() : json_integer(r->min), "max",
                      r->max < 0 ? json_null() : json_integer(r->max), "median_frac",
                      r->median < 0 ? json_null() : json_real(r->median / nvalid), "evaluations",
                      ev));
    }
    char dims[256];
    ft_call_dims_str(&l->call, dims, sizeof dims);
    json_t *root = json_pack(
        "{s:s, s:s, s:s, s:s, s:s, s:i, s:i, s:i, s:f, s:o, s:f, s:i, s:i, s:i, s:o, s:o}", "log",
        path, "op", l->op->name, "backend", l->backend->name, "preset", l->preset, "dims", dims,
        "runs", l->nruns, "valid", nvalid, "rejected", l->nrejected, "optimum_s", l->score[l->best],
        "optimum_config", ft_config_to_json(&l->space, &l->cands[l->best]), "target", ro->target,
        "within_target", ft_landscape_count_within(l, ro->target), "exhaustive_first",
        ft_landscape_first_within(l, ro->target), "exhaustive_all", nvalid, "best_strategy",
        t->bestrow < 0 ? json_null() : json_string(ft_strategy_names[t->rows[t->bestrow].kind]),
        "strategies", strategies);
    json_object_set_new(root, "budget", json_integer(ro->budget));
    json_object_set_new(root, "predicted", ps ? predicted_json(l, ps) : json_null());
    return root;
}

static void replay_text(const ft_landscape *l, const replay_opts *ro, const replay_table *t,
                        const predicted_summary *ps) {
    const int nvalid = l->ncands, nseeds = ro->nseeds;
    const int within = ft_landscape_count_within(l, ro->target);
    const int first = ft_landscape_first_within(l, ro->target);
    char optcfg[512], dims[256], tm[32];
    ft_config_format(&l->space, &l->cands[l->best], optcfg, sizeof optcfg);
    ft_call_dims_str(&l->call, dims, sizeof dims);
    printf("landscape  %s on %s, preset %s (%s)%s\n", l->op->name, l->backend->name,
           l->preset[0] ? l->preset : "-", dims, l->nruns > 1 ? ", resumed runs merged" : "");
    printf("           %d valid candidates (%d rejected), optimum %s at %s\n", nvalid, l->nrejected,
           ft_fmt_time(l->score[l->best], 0, tm, sizeof tm), optcfg);
    printf("target     within %.3g%% of the optimum: %d candidate%s (%.1f%%); exhaustive search\n"
           "           in space order first reaches it at evaluation %d and needs all %d to "
           "know it has the optimum\n",
           100 * ro->target, within, within == 1 ? "" : "s", 100.0 * within / nvalid, first,
           nvalid);
    if (ro->budget) printf("budget     %d evaluations per replay\n", ro->budget);
    printf("\n%-12s %6s %8s %8s %6s %6s %9s\n", "strategy", "seeds", "reached", "median", "min",
           "max", "of valid");
    for (int i = 0; i < t->nrows; i++) {
        const row *r = &t->rows[i];
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
    const row *b = t->bestrow >= 0 ? &t->rows[t->bestrow] : NULL;
    if (b)
        printf("\nbest non-exhaustive: %s, median %.1f evaluations = %.1f%% of the %d exhaustive "
               "needs\n",
               ft_strategy_names[b->kind], b->median, 100 * b->median / nvalid, nvalid);
    if (ps) predicted_print(l, ps, first, b);
}

/* Replay the strategies on one log: its table on stdout, or its JSON object in *out. */
static int replay_one(const char *path, const replay_opts *ro, json_t **out) {
    ft_err err = {0};
    ft_landscape l;
    if (ft_landscape_load(path, &l, &err)) return ft_cli_fail_err(&err);
    replay_table t;
    int code = replay_strategies(&l, ro, &t);
    predicted_summary ps;
    if (!code && l.npredicted) predicted_summarise(&l, ro, &ps);
    if (!code && ro->json)
        *out = replay_json(path, &l, ro, &t, l.npredicted ? &ps : NULL);
    else if (!code)
        replay_text(&l, ro, &t, l.npredicted ? &ps : NULL);
    ft_landscape_free(&l);
    return code;
}

#define MAX_FAMILY 64

static int run(int argc, char **argv) {
    enum { O_STRATEGY = 1, O_SEEDS, O_TARGET, O_BUDGET, O_JSON, O_PRUNE };
    static const struct option opts[] = {{"strategy", required_argument, NULL, O_STRATEGY},
                                         {"seeds", required_argument, NULL, O_SEEDS},
                                         {"target", required_argument, NULL, O_TARGET},
                                         {"budget", required_argument, NULL, O_BUDGET},
                                         {"json", no_argument, NULL, O_JSON},
                                         {"prune", required_argument, NULL, O_PRUNE},
                                         {NULL, 0, NULL, 0}};
    int json = 0, nseeds = 10, budget = 0, only = -1, o;
    double target = FT_REPLAY_TARGET;
    replay_opts ro = {0};
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
        case O_PRUNE:
            if (parse_prune(optarg, &ro)) return FT_EXIT_USAGE;
            break;
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
    ro.json = json;
    ro.nseeds = nseeds;
    ro.budget = budget;
    ro.only = only;
    ro.target = target;
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
