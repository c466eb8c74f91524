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
#include "core/format.h"
#include "core/json.h"
#include "core/paths.h"
#include "op/op_json.h"
#include "traces/eventlog.h"
#include "tuner/replay.h"

#define MAX_SEEDS   1000
#define MAX_TARGETS 8
#define MAX_BATCHES 8
#define MAX_BATCH   4096
#define WARM_FIRST  3 /* --warm: the other landscape's best few, measured first */

static void usage(FILE *f) {
    fprintf(
        f,
        "usage: flaretune replay LOG [--strategy S|all] [--seeds N] [--target F[,F...]]\n"
        "                            [--budget N|P%%] [--batch K[,K...]] [--warm LOG2]\n"
        "                            [--orderings N] [--export FILE]\n"
        "                            [--prune predicted=F[,F...]] [--opt S.O=V]...\n"
        "                            [--json [--trace]]\n\n"
        "Replay search strategies against the landscape recorded in LOG, the event log of an\n"
        "exhaustive run (`flaretune tune OP --strategy exhaustive --log LOG`; its last run,\n"
        "with the earlier runs it resumed), a Kernel Tuner cache file, a FAIR T4 results\n"
        "file or a landscape --export wrote (told apart by content; .json.gz read as it\n"
        "is): every configuration such a\n"
        "file holds is a candidate, its failed ones too (docs/events.md \"Formats\"). Each\n"
        "proposal is one evaluation, scored from the recording: nothing runs. The candidates the "
        "run confirmed at its end (the best few measured\n"
        "again, interleaved) score their confirmed medians scaled to the search's footing, so\n"
        "the optimum is judged by them rather than by a lucky sample; a round whose\n"
        "re-measurement spreads across its configs by more than the gap it decides, or that\n"
        "would put a score outside the range the search measured, is refused (the search's\n"
        "medians stand) and the output says why. For each strategy and batch size, and each\n"
        "target, prints the median, min and max over N seeds of the evaluations needed until\n"
        "the best found is within F of the optimum, also as a fraction of the valid candidates\n"
        "(exhaustive search needs all of them to know it has the optimum; its row shows when\n"
        "space order first reaches the target), how many seeds got there within a quarter of\n"
        "the candidates, and the median wall time those evaluations took when the log was\n"
        "recorded, against the time exhaustive search in space order needs (vs exh.).\n"
        "The default strategy (tune's) is marked *.\n\n"
        "  --strategy S   exhaustive, random, anneal, evolve, bayes or all (default all)\n"
        "  --seeds N      seeds 1..N, at most %d (default 10)\n"
        "  --target F,... relative distances to the optimum, 0.05 or 5%%, at most %d\n"
        "                 (default 5%%): a column block each\n"
        "  --budget N|P%%  stop a replay after N evaluations, or P%% of the valid candidates\n"
        "                 (default: none); `in budget` is then the seeds that got there\n"
        "  --batch K,...  ask the strategy for K candidates at a time and report their\n"
        "                 results before asking again, 1 to %d, at most %d sizes (default 1):\n"
        "                 a row each; the evaluations to the target count the whole batch\n"
        "                 that got there, `rounds` the batches, `time` their costs summed\n"
        "                 (one device) and `wall` the slowest member's cost a batch (K\n"
        "                 devices in parallel)\n"
        "  --orderings N  replay seed s on ordering (s-1) %% N of the parameters (which one\n"
        "                 varies fastest in space order): 0 the log's own, j > 0 a shuffle\n"
        "                 drawn from j (splitmix64 and Fisher-Yates, as kt-compare.py),\n"
        "                 1 to %d (default 1)\n"
        "  --warm LOG2    also replay every strategy warm-started from LOG2, an exhaustive\n"
        "                 log of the same op and backend at another shape or on another\n"
        "                 machine (for a file: a file of the same parameters, such as the\n"
        "                 same kernel on another GPU): its score of each candidate as a\n"
        "                 prior, its %d best configs measured first; prints cold against warm\n"
        "  --export FILE  write the landscape as JSON (format flaretune-landscape/1,\n"
        "                 docs/events.md) to FILE, atomically\n"
        "  --prune predicted=F[,F...]\n"
        "                 when the log's candidates carry a predicted time (tune --predict):\n"
        "                 for each factor F > 1, how many candidates `tune --prune\n"
        "                 predicted=F` would measure and whether the optimum (or one within\n"
        "                 the first target) is among them (default 1.5,2,4); such a log also\n"
        "                 gets the rank correlation of predicted and measured times, and\n"
        "                 when measuring in predicted order first reaches the target\n"
        "  --opt S.O=V    set option O of strategy S (bayes.local=3, anneal.t0=0.2; an\n"
        "                 unknown name lists them; docs/search.md): replays it with other\n"
        "                 settings than tune's defaults, to choose them\n"
        "  --json         one JSON object on stdout\n"
        "  --trace        with --json: each strategy's `traces`, per seed the best score\n"
        "                 found after each evaluation and the recorded costs summed, run\n"
        "                 on to the optimum (scripts/methodology.py scores them)\n",
        MAX_SEEDS, MAX_TARGETS, MAX_BATCH, MAX_BATCHES, MAX_SEEDS, WARM_FIRST);
}

/* One strategy, batch size and target, cold or warm, over the seeds. */
typedef struct {
    int *evals;   /* per seed: evaluations paid to the target (to the end of the batch that
                   * reached it), -1: not reached                                        */
    int *rounds;  /* per seed: batches to the target, -1: not reached                    */
    double *time; /* per seed: seconds to the target as recorded, summed (NaN: unknown)  */
    double *wall; /* per seed: the same with each batch measured in parallel             */
    int reached, min, max;
    int quarter;          /* seeds that reached the target within a quarter of the candidates */
    double median;        /* -1 when the median seed did not reach the target                 */
    double median_rounds; /* -1 likewise                                                      */
    double median_time;   /* NaN when unknown or the median seed did not reach it             */
    double median_wall;   /* NaN likewise                                                     */
} cell;

typedef struct {
    int kind, batch;
    cell cold[MAX_TARGETS], warm[MAX_TARGETS];
    json_t *traces; /* --trace: per seed, the cold replay's course (NULL: not asked) */
    double propose_s; /* CPU seconds of the cold replays' proposals, over every seed ... */
    long proposals;   /* ... and the evaluations they proposed                          */
} row;

static int cmp_evals(const void *a, const void *b) {
    int x = *(const int *)a, y = *(const int *)b;
    if (x < 0) x = 1 << 30;
    if (y < 0) y = 1 << 30;
    return (x > y) - (x < y);
}

static int cmp_time(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    if (isnan(x)) x = INFINITY;
    if (isnan(y)) y = INFINITY;
    return (x > y) - (x < y);
}

/* The median of v[0..n) with unreached (negative, NaN) values last; -1 (ints) or NaN when the
 * median seed did not reach it. */
static double median_of_times(const double *v, int n, int reached_median) {
    static double times[MAX_SEEDS];
    memcpy(times, v, (size_t)n * sizeof *times);
    qsort(times, (size_t)n, sizeof *times, cmp_time);
    double lo = times[(n - 1) / 2], hi = times[n / 2];
    return reached_median && isfinite(lo) && isfinite(hi) ? 0.5 * (lo + hi) : NAN;
}

static void summarise(cell *c, int nseeds, int quarter) {
    static int sorted[MAX_SEEDS];
    static double times[MAX_SEEDS];
    memcpy(sorted, c->rounds, (size_t)nseeds * sizeof *sorted);
    qsort(sorted, (size_t)nseeds, sizeof *sorted, cmp_evals);
    c->median_rounds = sorted[(nseeds - 1) / 2] < 0 || sorted[nseeds / 2] < 0
                           ? -1
                           : 0.5 * (sorted[(nseeds - 1) / 2] + sorted[nseeds / 2]);
    memcpy(sorted, c->evals, (size_t)nseeds * sizeof *sorted);
    memcpy(times, c->time, (size_t)nseeds * sizeof *times);
    qsort(sorted, (size_t)nseeds, sizeof *sorted, cmp_evals);
    qsort(times, (size_t)nseeds, sizeof *times, cmp_time);
    c->reached = c->quarter = 0;
    c->min = c->max = -1;
    for (int i = 0; i < nseeds; i++)
        if (sorted[i] >= 0) {
            c->reached++;
            c->quarter += sorted[i] <= quarter;
            if (c->min < 0) c->min = sorted[i];
            c->max = sorted[i];
        }
    int lo = sorted[(nseeds - 1) / 2], hi = sorted[nseeds / 2];
    c->median = lo < 0 || hi < 0 ? -1 : 0.5 * (lo + hi);
    double tlo = times[(nseeds - 1) / 2], thi = times[nseeds / 2];
    c->median_time = c->median >= 0 && isfinite(tlo) && isfinite(thi) ? 0.5 * (tlo + thi) : NAN;
    c->median_wall = median_of_times(c->wall, nseeds, c->median >= 0);
}

static int parse_int(const char *arg, const char *opt, int lo, int hi, int *out) {
    long v;
    if (!ft_cli_whole(arg, lo, hi, &v))
        return ft_cli_fail(FT_EXIT_USAGE, "replay: %s wants an integer in [%d, %d], got '%s'", opt,
                           lo, hi, arg);
    *out = (int)v;
    return 0;
}

/* A fraction, "0.05" or "5%", from p to *end (stopping at ',' or the end); 0 when it is none. */
static int parse_fraction(const char *p, char **end, double *out) {
    errno = 0;
    double v = strtod(p, end);
    if (*end == p || errno) return 0;
    if (**end == '%') {
        v /= 100;
        ++*end;
    }
    if (**end && **end != ',') return 0;
    *out = v;
    return 1;
}

/* --target F[,F...]: each in [0, 10). */
static int parse_targets(const char *arg, double *out, int *n) {
    *n = 0;
    for (const char *p = arg;;) {
        char *end;
        double v;
        if (!parse_fraction(p, &end, &v) || !(v >= 0) || !(v < 10) || *n >= MAX_TARGETS)
            return ft_cli_fail(FT_EXIT_USAGE,
                               "replay: --target wants at most %d fractions such as 0.05 or 5%%, "
                               "comma-separated, got '%s'",
                               MAX_TARGETS, arg);
        out[(*n)++] = v;
        if (!*end) return FT_EXIT_OK;
        p = end + 1;
    }
}

/* --batch K[,K...]: each in [1, MAX_BATCH]. */
static int parse_batches(const char *arg, int *out, int *n) {
    *n = 0;
    for (const char *p = arg;;) {
        char *end;
        errno = 0;
        long v = strtol(p, &end, 10);
        if (end == p || (*end && *end != ',') || errno || v < 1 || v > MAX_BATCH ||
            *n >= MAX_BATCHES)
            return ft_cli_fail(FT_EXIT_USAGE,
                               "replay: --batch wants at most %d batch sizes in [1, %d], "
                               "comma-separated, got '%s'",
                               MAX_BATCHES, MAX_BATCH, arg);
        out[(*n)++] = (int)v;
        if (!*end) return FT_EXIT_OK;
        p = end + 1;
    }
}

/* --budget N or P% (of the valid candidates, P in (0, 100]). */
static int parse_budget(const char *arg, int *budget, double *frac) {
    *budget = 0;
    *frac = 0;
    size_t n = strlen(arg);
    if (n && arg[n - 1] == '%') {
        char *end;
        double v;
        if (!parse_fraction(arg, &end, &v) || *end || !(v > 0) || v > 1)
            return ft_cli_fail(FT_EXIT_USAGE,
                               "replay: --budget wants evaluations (an integer) or a percentage "
                               "of the valid candidates in (0%%, 100%%], got '%s'",
                               arg);
        *frac = v;
        return FT_EXIT_OK;
    }
    return parse_int(arg, "--budget", 0, 1 << 30, budget) ? FT_EXIT_USAGE : FT_EXIT_OK;
}

#define MAX_PRUNE 8

typedef struct {
    int json, nseeds, only;
    double targets[MAX_TARGETS]; /* --target (default FT_REPLAY_TARGET) */
    int ntargets;
    int budget;               /* --budget N (0: none) ...                                */
    double budget_frac;       /* ... or a fraction of the valid candidates (0: not that) */
    int batches[MAX_BATCHES]; /* --batch (default 1) */
    int nbatches;
    const char *warm, *export_path;
    int orderings; /* --orderings N: seed s replays on ordering (s - 1) % N (1: the file's) */
    int trace;     /* --trace: each seed's best-so-far per evaluation in the JSON */
    double prune[MAX_PRUNE]; /* --prune predicted=F factors (none given: 1.5, 2, 4) */
    int nprune;
    ft_strategy_opts strategy; /* --opt: the strategies' options (their defaults otherwise) */
    const char *opt_of[FT_STRAT_COUNT]; /* --opt: the first naming each strategy (NULL: none) */
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
    ps->first = ft_landscape_first_within_predicted(l, ro->targets[0]);
    for (int i = 0; i < ps->nprune; i++)
        ft_landscape_prune(l, f[i], ro->targets[0], &ps->prune[i]);
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
        printf("; best strategy %s: median %.1f", ft_strategy_names[best->kind],
               best->cold[0].median);
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

/* What --warm gives one landscape: the other landscape's score of each of its candidates, and
 * that landscape's best few that are candidates here, measured first. */
typedef struct {
    const ft_landscape *from; /* NULL: no warm start */
    const char *path;
    double *prior;
    int nprior; /* candidates with a prior */
    int first[WARM_FIRST], nfirst;
} warm_start;

typedef struct {
    row *rows;
    int nrows;
    int bestrow; /* the best non-exhaustive strategy by median at the first batch size and
                  * target, cold (-1: none) */
    int budget;  /* evaluations per replay, resolved for this landscape (0: none) */
    int quarter; /* a quarter of the valid candidates, rounded up */
    warm_start warm;
    ft_landscape *ord; /* --orderings: ord[j] the landscape in ordering j, j >= 1 (ord[0]
                        * unused: the landscape itself) */
    int nord;
} replay_table;

static void table_free(replay_table *t) {
    for (int i = 0; i < t->nrows; i++)
        for (int k = 0; k < MAX_TARGETS; k++) {
            free(t->rows[i].cold[k].evals);
            free(t->rows[i].cold[k].rounds);
            free(t->rows[i].cold[k].time);
            free(t->rows[i].cold[k].wall);
            free(t->rows[i].warm[k].evals);
            free(t->rows[i].warm[k].rounds);
            free(t->rows[i].warm[k].time);
            free(t->rows[i].warm[k].wall);
        }
    for (int i = 0; i < t->nrows; i++)
        json_decref(t->rows[i].traces);
    for (int j = 1; j < t->nord; j++)
        ft_landscape_free(&t->ord[j]);
    free(t->ord);
    free(t->rows);
    free(t->warm.prior);
    memset(t, 0, sizeof *t);
}

static int cell_alloc(cell *c, int nseeds) {
    c->evals = malloc((size_t)nseeds * sizeof *c->evals);
    c->rounds = malloc((size_t)nseeds * sizeof *c->rounds);
    c->time = malloc((size_t)nseeds * sizeof *c->time);
    c->wall = malloc((size_t)nseeds * sizeof *c->wall);
    return c->evals && c->rounds && c->time && c->wall;
}

/* The course of one replay as JSON: {"seed", "ordering", "best_s": [...], "cost_s": [...]},
 * the best score found after each evaluation (null before a valid one) and the recorded costs
 * summed. */
static json_t *trace_json(const ft_replay_trace *tr, int seed, int ordering) {
    json_t *best = json_array(), *cost = json_array();
    for (int e = 0; e < tr->n; e++) {
        json_array_append_new(best, ft_json_number(isfinite(tr->best[e]) ? tr->best[e] : NAN));
        json_array_append_new(cost, ft_json_number(tr->cost[e]));
    }
    return json_pack("{s:i, s:i, s:o, s:o}", "seed", seed, "ordering", ordering, "best_s", best,
                     "cost_s", cost);
}

/* One strategy at one batch size over the seeds, cold or warm: a cell per target, from one
 * replay per seed (seed s on ordering (s - 1) % t->nord). With --trace, the cold replays also
 * run to the optimum (a target 0 added: the other targets' counts do not change) and leave
 * their course in r->traces. Returns an exit code. */
static int replay_cells(const ft_landscape *l, const replay_opts *ro, const replay_table *t, row *r,
                        int warm, cell *cells) {
    ft_replay_opts o;
    ft_replay_opts_default(&o);
    o.kind = (ft_strategy_kind)r->kind;
    o.budget = t->budget;
    o.batch = r->batch;
    o.strategy = &ro->strategy;
    if (warm) {
        o.first = t->warm.first;
        o.nfirst = t->warm.nfirst;
        o.prior = t->warm.prior;
    }
    for (int i = 0; i < ro->ntargets; i++)
        if (!cell_alloc(&cells[i], ro->nseeds))
            return ft_cli_fail(FT_EXIT_FAIL, "replay: out of memory");
    double targets[MAX_TARGETS + 1];
    int ntargets = ro->ntargets;
    memcpy(targets, ro->targets, (size_t)ntargets * sizeof *targets);
    ft_replay_trace tr = {0};
    if (ro->trace && !warm) {
        targets[ntargets++] = 0;
        tr.cap = l->ncands;
        tr.best = malloc((size_t)l->ncands * sizeof *tr.best);
        tr.cost = malloc((size_t)l->ncands * sizeof *tr.cost);
        r->traces = json_array();
        if (!tr.best || !tr.cost || !r->traces) {
            free(tr.best);
            free(tr.cost);
            return ft_cli_fail(FT_EXIT_FAIL, "replay: out of memory");
        }
        o.trace = &tr;
    }
    int code = FT_EXIT_OK;
    for (int s = 0; s < ro->nseeds && !code; s++) {
        ft_err err = {0};
        ft_replay_result res[MAX_TARGETS + 1];
        int j = t->nord > 1 ? s % t->nord : 0;
        o.seed = (uint64_t)s + 1;
        if (ft_replay_run_targets(j ? &t->ord[j] : l, &o, targets, ntargets, res, &err)) {
            code = ft_cli_fail_err(&err);
            break;
        }
        if (!warm) {
            r->propose_s += res[ntargets - 1].propose_s;
            r->proposals += res[ntargets - 1].evaluations;
        }
        for (int i = 0; i < ro->ntargets; i++) {
            cells[i].evals[s] = res[i].to_target;
            cells[i].rounds[s] = res[i].rounds_to_target;
            cells[i].time[s] = res[i].time_to_target;
            cells[i].wall[s] = res[i].wall_to_target;
        }
        if (o.trace) json_array_append_new(r->traces, trace_json(&tr, s + 1, j));
    }
    free(tr.best);
    free(tr.cost);
    if (code) return code;
    for (int i = 0; i < ro->ntargets; i++)
        summarise(&cells[i], ro->nseeds, t->quarter);
    return FT_EXIT_OK;
}

/* Each strategy (or the one asked for) at each batch size and target, replayed over the seeds,
 * cold and, with a warm start, warm. Returns an exit code. */
static int replay_strategies(const ft_landscape *l, const replay_opts *ro, replay_table *t) {
    t->quarter = (l->ncands + 3) / 4;
    t->budget = ro->budget_frac > 0 ? (int)ceil(ro->budget_frac * l->ncands - 1e-9) : ro->budget;
    if (ro->budget_frac > 0 && t->budget < 1) t->budget = 1;
    t->rows = calloc((size_t)FT_STRAT_COUNT * (size_t)ro->nbatches, sizeof *t->rows);
    if (!t->rows) return ft_cli_fail(FT_EXIT_FAIL, "replay: out of memory");
    t->nord = ro->orderings > 1 ? ro->orderings : 1;
    if (t->nord > 1) {
        if (!(t->ord = calloc((size_t)t->nord, sizeof *t->ord))) {
            t->nord = 0;
            return ft_cli_fail(FT_EXIT_FAIL, "replay: out of memory");
        }
        for (int j = 1; j < t->nord; j++) {
            ft_err err = {0};
            int perm[FT_MAX_PARAMS];
            ft_landscape_ordering(l->space.nparams, j, perm);
            if (ft_landscape_permute(l, perm, &t->ord[j], &err)) {
                t->nord = j; /* the ones made so far are freed */
                return ft_cli_fail_err(&err);
            }
        }
    }
    for (int k = 0; k < FT_STRAT_COUNT; k++) {
        if (ro->only >= 0 && k != ro->only) continue;
        for (int b = 0; b < ro->nbatches; b++) {
            row *r = &t->rows[t->nrows++];
            r->kind = k;
            r->batch = ro->batches[b];
            int code = replay_cells(l, ro, t, r, 0, r->cold);
            if (!code && t->warm.from) code = replay_cells(l, ro, t, r, 1, r->warm);
            if (code) return code;
        }
    }
    /* The best non-exhaustive strategy by median (unreached medians last). */
    t->bestrow = -1;
    for (int i = 0; i < t->nrows; i++) {
        const row *r = &t->rows[i];
        if (r->kind != FT_STRAT_EXHAUSTIVE && r->batch == ro->batches[0] &&
            r->cold[0].median >= 0 &&
            (t->bestrow < 0 || r->cold[0].median < t->rows[t->bestrow].cold[0].median))
            t->bestrow = i;
    }
    return FT_EXIT_OK;
}

/* The warm start --warm gives l. Returns an exit code. */
static int warm_setup(const ft_landscape *l, const ft_landscape *from, const char *path,
                      warm_start *w) {
    ft_err err = {0};
    w->from = from;
    w->path = path;
    if (!(w->prior = malloc((size_t)l->ncands * sizeof *w->prior)))
        return ft_cli_fail(FT_EXIT_FAIL, "replay: out of memory");
    ft_status s = ft_landscape_warm(l, from, WARM_FIRST, w->first, &w->nfirst, w->prior, &err);
    if (s == FT_EINVAL) return ft_cli_fail(FT_EXIT_USAGE, "replay: --warm %s: %s", path, err.msg);
    if (s) return ft_cli_fail_err(&err);
    w->nprior = 0;
    for (int c = 0; c < l->ncands; c++)
        w->nprior += !isnan(w->prior[c]);
    return FT_EXIT_OK;
}

/* ---- JSON ------------------------------------------------------------------------------------ */

static json_t *median_json(double m) { return m < 0 ? json_null() : json_real(m); }

static json_t *cell_json(const cell *c, double target, int nseeds, int nvalid) {
    json_t *ev = json_array(), *tm = json_array(), *rd = json_array(), *wl = json_array();
    for (int s = 0; s < nseeds; s++) {
        json_array_append_new(ev, c->evals[s] < 0 ? json_null() : json_integer(c->evals[s]));
        json_array_append_new(rd, c->rounds[s] < 0 ? json_null() : json_integer(c->rounds[s]));
        json_array_append_new(tm, ft_json_number(c->time[s]));
        json_array_append_new(wl, ft_json_number(c->wall[s]));
    }
    json_t *o =
        json_pack("{s:f, s:i, s:f, s:f, s:o, s:o, s:o, s:o, s:o, s:o, s:o}", "target", target,
                  "reached", c->reached, "success", (double)c->reached / nseeds, "success_quarter",
                  (double)c->quarter / nseeds, "median", median_json(c->median), "min",
                  c->min < 0 ? json_null() : json_integer(c->min), "max",
                  c->max < 0 ? json_null() : json_integer(c->max), "median_frac",
                  c->median < 0 ? json_null() : json_real(c->median / nvalid), "median_time_s",
                  ft_json_number(c->median_time), "evaluations", ev, "times_s", tm);
    /* Batches: the rounds to the target, and the wall time with each round's members measured
     * in parallel (median_time_s and times_s: one device measuring them in turn). */
    json_object_set_new(o, "median_rounds", median_json(c->median_rounds));
    json_object_set_new(o, "median_wall_s", ft_json_number(c->median_wall));
    json_object_set_new(o, "rounds", rd);
    json_object_set_new(o, "walls_s", wl);
    return o;
}

/* A strategy's row: its name, batch size, the first target's figures at the top (as before
 * batches and several targets), and every target's. */
static json_t *row_json(const ft_landscape *l, const replay_opts *ro, const row *r) {
    const cell *c = &r->cold[0];
    json_t *ev = json_array(), *targets = json_array();
    for (int s = 0; s < ro->nseeds; s++)
        json_array_append_new(ev, c->evals[s] < 0 ? json_null() : json_integer(c->evals[s]));
    for (int i = 0; i < ro->ntargets; i++)
        json_array_append_new(targets,
                              cell_json(&r->cold[i], ro->targets[i], ro->nseeds, l->ncands));
    json_t *o =
        json_pack("{s:s, s:b, s:i, s:i, s:i, s:o, s:o, s:o, s:o, s:o, s:o}", "name",
                  ft_strategy_names[r->kind], "default", r->kind == FT_STRAT_DEFAULT, "batch",
                  r->batch, "seeds", ro->nseeds, "reached", c->reached, "median",
                  median_json(c->median), "min", c->min < 0 ? json_null() : json_integer(c->min),
                  "max", c->max < 0 ? json_null() : json_integer(c->max), "median_frac",
                  c->median < 0 ? json_null() : json_real(c->median / l->ncands), "evaluations", ev,
                  "targets", targets);
    json_object_set_new(o, "median_rounds", median_json(c->median_rounds));
    /* What one proposal costs the strategy (CPU time, milliseconds): a model's price per step. */
    json_object_set_new(o, "propose_ms",
                        ft_json_number(r->proposals ? 1e3 * r->propose_s / r->proposals : NAN));
    if (r->traces) json_object_set_new(o, "traces", json_incref(r->traces));
    return o;
}

/* 1 - after/before; NaN when either is unknown. */
static double saving(double before, double after) {
    return before > 0 && after >= 0 && isfinite(before) && isfinite(after) ? 1 - after / before
                                                                           : NAN;
}

static json_t *warm_json(const ft_landscape *l, const replay_opts *ro, const replay_table *t) {
    const warm_start *w = &t->warm;
    char dims[256] = "";
    if (w->from->op) ft_call_dims_str(&w->from->call, dims, sizeof dims);
    json_t *first = json_array(), *rows = json_array();
    for (int j = 0; j < w->nfirst; j++)
        json_array_append_new(first, ft_config_to_json(&l->space, &l->cands[w->first[j]]));
    for (int i = 0; i < t->nrows; i++) {
        const row *r = &t->rows[i];
        json_t *targets = json_array();
        for (int k = 0; k < ro->ntargets; k++) {
            const cell *c = &r->cold[k], *h = &r->warm[k];
            json_array_append_new(
                targets,
                json_pack("{s:f, s:o, s:o, s:o, s:o, s:o, s:o, s:o}", "target", ro->targets[k],
                          "cold_median", median_json(c->median), "warm_median",
                          median_json(h->median), "saving",
                          ft_json_number(
                              c->median < 0 || h->median < 0 ? NAN : saving(c->median, h->median)),
                          "cold_median_time_s", ft_json_number(c->median_time),
                          "warm_median_time_s", ft_json_number(h->median_time), "time_saving",
                          ft_json_number(saving(c->median_time, h->median_time)), "warm",
                          cell_json(h, ro->targets[k], ro->nseeds, l->ncands)));
        }
        json_array_append_new(
            rows, json_pack("{s:s, s:b, s:i, s:o}", "name", ft_strategy_names[r->kind], "default",
                            r->kind == FT_STRAT_DEFAULT, "batch", r->batch, "targets", targets));
    }
    return json_pack("{s:s, s:s, s:i, s:i, s:o, s:o}", "log", w->path, "dims", dims, "prior",
                     w->nprior, "first_count", w->nfirst, "first", first, "strategies", rows);
}

/* The median of the known costs; NaN when none is. */
static double median_cost(const ft_landscape *l) {
    double *v = malloc(sizeof *v * (size_t)(l->ncands + 1));
    int n = 0;
    if (!v) return NAN;
    for (int c = 0; c < l->ncands; c++)
        if (!isnan(l->cost[c])) v[n++] = l->cost[c];
    qsort(v, (size_t)n, sizeof *v, cmp_time);
    double m = n ? 0.5 * (v[(n - 1) / 2] + v[n / 2]) : NAN;
    free(v);
    return m;
}

static json_t *targets_json(const ft_landscape *l, const replay_opts *ro) {
    json_t *a = json_array();
    for (int i = 0; i < ro->ntargets; i++) {
        int first = ft_landscape_first_within(l, ro->targets[i]);
        json_array_append_new(a, json_pack("{s:f, s:i, s:i, s:o}", "target", ro->targets[i],
                                           "within_target",
                                           ft_landscape_count_within(l, ro->targets[i]),
                                           "exhaustive_first", first, "exhaustive_first_s",
                                           ft_json_number(ft_landscape_cost_through(l, first))));
    }
    return a;
}

static json_t *replay_json(const char *path, const ft_landscape *l, const replay_opts *ro,
                           const replay_table *t, const predicted_summary *ps) {
    const int nvalid = l->ncands;
    const double target = ro->targets[0];
    json_t *strategies = json_array(), *batches = json_array();
    for (int i = 0; i < t->nrows; i++)
        json_array_append_new(strategies, row_json(l, ro, &t->rows[i]));
    for (int b = 0; b < ro->nbatches; b++)
        json_array_append_new(batches, json_integer(ro->batches[b]));
    char dims[256] = "";
    if (l->op) ft_call_dims_str(&l->call, dims, sizeof dims);
    json_t *root = json_pack(
        "{s:s, s:o, s:o, s:s, s:s, s:i, s:i, s:i, s:f, s:o, s:f, s:i, s:i, s:i, s:o, s:o}", "log",
        path, "op", l->op ? json_string(l->op->name) : json_null(), "backend",
        l->backend ? json_string(l->backend->name) : json_null(), "preset", l->preset, "dims", dims,
        "runs", l->nruns, "valid", nvalid, "rejected", l->nrejected, "optimum_s", l->score[l->best],
        "optimum_config", ft_config_to_json(&l->space, &l->cands[l->best]), "target", target,
        "within_target", ft_landscape_count_within(l, target), "exhaustive_first",
        ft_landscape_first_within(l, target), "exhaustive_all", nvalid, "best_strategy",
        t->bestrow < 0 ? json_null() : json_string(ft_strategy_names[t->rows[t->bestrow].kind]),
        "strategies", strategies);
    json_object_set_new(root, "optimum_confirmed", json_boolean(l->confirm_samples[l->best] != 0));
    json_object_set_new(root, "optimum_samples",
                        l->confirm_samples[l->best] > 0 ? json_integer(l->confirm_samples[l->best])
                                                        : json_null());
    json_object_update_new(root, json_pack("{s:s, s:s, s:s, s:s}", "source", l->format, "kernel",
                                           l->kernel, "device", l->device, "problem_size",
                                           l->problem_size));
    json_object_set_new(root, "confirmed", json_integer(l->nconfirmed));
    json_object_set_new(root, "confirm_ratio", ft_json_number(l->confirm_ratio));
    json_object_set_new(root, "confirm_refused",
                        l->confirm_refused[0] ? json_string(l->confirm_refused) : json_null());
    json_object_set_new(root, "confirm_unclean", json_boolean(l->op && l->confirm_unclean));
    json_object_set_new(root, "orderings", json_integer(t->nord > 1 ? t->nord : 1));
    json_object_set_new(root, "noise",
                        json_pack("{s:o}", "median_ci_rel", ft_json_number(l->noise_ci_rel)));
    json_object_set_new(root, "cost",
                        json_pack("{s:i, s:o, s:o}", "known", l->ncost, "median_s",
                                  ft_json_number(median_cost(l)), "all_s",
                                  ft_json_number(ft_landscape_cost_through(l, nvalid))));
    json_object_set_new(root, "targets", targets_json(l, ro));
    json_object_set_new(root, "batches", batches);
    json_object_set_new(root, "quarter", json_integer(t->quarter));
    json_object_set_new(root, "default_strategy", json_string(ft_strategy_names[FT_STRAT_DEFAULT]));
    json_object_set_new(root, "budget", json_integer(t->budget));
    json_object_set_new(root, "warm", t->warm.from ? warm_json(l, ro, t) : json_null());
    json_object_set_new(root, "export",
                        ro->export_path ? json_string(ro->export_path) : json_null());
    json_object_set_new(root, "predicted", ps ? predicted_json(l, ps) : json_null());
    return root;
}

/* ---- text ------------------------------------------------------------------------------------ */

/* text right-aligned in `width` terminal columns (UTF-8: a multi-byte character is one). */
static void put_col(const char *text, int width) {
    int n = 0;
    for (const char *p = text; *p; p++)
        n += ((unsigned char)*p & 0xC0) != 0x80;
    printf(" %*s%s", width > n ? width - n : 0, "", text);
}

/* A blank line, then text wrapped at 100 columns. */
static void put_wrapped(const char *text) {
    printf("\n");
    while (*text) {
        int n = (int)strlen(text);
        if (n > 100) {
            n = 100;
            while (n > 0 && text[n] != ' ')
                n--;
            if (n == 0) n = 100;
        }
        printf("%.*s\n", n, text);
        text += n;
        while (*text == ' ')
            text++;
    }
}

static void fmt_time(double s, char *buf, size_t n) {
    if (isnan(s))
        snprintf(buf, n, "-");
    else
        ft_fmt_time(s, 0, buf, n);
}

static void fmt_pct(double frac, char *buf, size_t n) {
    if (isnan(frac))
        snprintf(buf, n, "-");
    else
        snprintf(buf, n, "%.1f%%", 100 * frac);
}

/* The landscape: the problem, its optimum (confirmed or not), its noise and costs, each target,
 * the budget. */
static void landscape_text(const ft_landscape *l, const replay_opts *ro, const replay_table *t) {
    const int nvalid = l->ncands;
    char optcfg[512], what[512], tm[32], tm2[32];
    ft_config_format(&l->space, &l->cands[l->best], optcfg, sizeof optcfg);
    ft_landscape_describe(l, what, sizeof what);
    printf("landscape  %s%s\n", what, l->nruns > 1 ? ", resumed runs merged" : "");
    printf("           %d %s candidates (%d %s), optimum %s at %s\n", nvalid,
           l->op ? "valid" : "measured", l->nrejected,
           l->op ? "with no time to rank: rejected, stopped or not measured cleanly" : "failed",
           ft_fmt_time(l->score[l->best], 0, tm, sizeof tm), optcfg);
    char times[64] = "interleaved re-measurements";
    if (l->confirm_samples[l->best] > 0)
        snprintf(times, sizeof times, "%d interleaved re-measurement%s",
                 l->confirm_samples[l->best], l->confirm_samples[l->best] == 1 ? "" : "s");
    if (l->confirm_refused[0]) {
        char note[512];
        snprintf(note, sizeof note,
                 "optimum    the run's confirmation round was refused (its configs keep their "
                 "search medians): %s",
                 l->confirm_refused);
        put_wrapped(note);
    } else if (l->confirm_samples[l->best])
        printf("optimum    confirmed: its median over %s at the end of the run (%d candidate%s "
               "confirmed; that round ran %.2fx the search's medians and is scaled back)\n",
               times, l->nconfirmed, l->nconfirmed == 1 ? "" : "s", l->confirm_ratio);
    else if (l->nconfirmed)
        printf("optimum    not among the %d candidate%s the run confirmed (their confirmed medians "
               "are slower): its search median\n",
               l->nconfirmed, l->nconfirmed == 1 ? "" : "s");
    else if (l->op && l->confirm_unclean)
        printf("optimum    not confirmed: the run's confirmation round was not measured cleanly "
               "(a busy machine), so the search's medians stand\n");
    else if (l->op)
        printf("optimum    not confirmed (the log has no confirm event): its search median\n");
    else
        printf("optimum    as the file records it (a %s: no confirmation round to apply)\n",
               ft_landscape_format_name(l));
    char noise[16] = "-";
    if (!isnan(l->noise_ci_rel)) snprintf(noise, sizeof noise, "%.1f%%", 100 * l->noise_ci_rel);
    fmt_time(median_cost(l), tm, sizeof tm);
    fmt_time(ft_landscape_cost_through(l, nvalid), tm2, sizeof tm2);
    printf("noise      median ci_rel %s over the measured candidates; an evaluation took %s "
           "(median), all %d together %s\n",
           noise, tm, nvalid, tm2);
    for (int i = 0; i < ro->ntargets; i++) {
        double tg = ro->targets[i];
        int within = ft_landscape_count_within(l, tg), first = ft_landscape_first_within(l, tg);
        char name[32];
        snprintf(name, sizeof name, "target %g%%", 100 * tg);
        fmt_time(ft_landscape_cost_through(l, first), tm, sizeof tm);
        printf("%-10s %d candidate%s within (%.1f%%); exhaustive search in space order reaches "
               "one at evaluation %d (%s)\n",
               name, within, within == 1 ? "" : "s", 100.0 * within / nvalid, first, tm);
    }
    printf("           exhaustive search needs all %d (%s) to know it has the optimum\n", nvalid,
           tm2);
    if (t->budget)
        printf("budget     %d evaluations per replay (%.1f%% of the valid candidates)\n", t->budget,
               100.0 * t->budget / nvalid);
    if (t->nord > 1)
        printf("orderings  %d orders of the parameters: seed s replays on ordering (s-1) %% %d "
               "(0: the log's order)\n",
               t->nord, t->nord);
}

/* A column block per target, over the given width of row label. */
static void blocks_header(const replay_opts *ro, const char *const *cols, const int *widths,
                          int ncols) {
    int block = 0;
    for (int j = 0; j < ncols; j++)
        block += widths[j] + 1;
    printf("\n%-18s", "");
    for (int i = 0; i < ro->ntargets; i++) {
        char name[32];
        snprintf(name, sizeof name, "target %g%%", 100 * ro->targets[i]);
        printf("  %-*s", i + 1 < ro->ntargets ? block - 1 : 0, name);
    }
    printf("\n%-12s %5s", "strategy", "batch");
    for (int i = 0; i < ro->ntargets; i++) {
        printf(" ");
        for (int j = 0; j < ncols; j++)
            put_col(cols[j], widths[j]);
    }
    printf("\n");
}

static void row_label(const row *r) {
    char name[24];
    snprintf(name, sizeof name, "%s%s", ft_strategy_names[r->kind],
             r->kind == FT_STRAT_DEFAULT ? "*" : "");
    printf("%-12s %5d", name, r->batch);
}

/* The table: a row per strategy and batch size, a column block per target. */
static void table_text(const ft_landscape *l, const replay_opts *ro, const replay_table *t) {
    const int nvalid = l->ncands, nseeds = ro->nseeds;
    static const char *const cols[] = {"median",    "min",  "max",     "of valid", "in 25%",
                                       "in budget", "time", "vs exh.", "rounds",   "wall"};
    static const int widths[] = {7, 5, 5, 8, 6, 9, 8, 7, 6, 8};
    int batched = 0;
    for (int b = 0; b < ro->nbatches; b++)
        batched |= ro->batches[b] > 1;
    const char *c[10];
    int w[10], nc = 0;
    for (int j = 0; j < 10; j++)
        if ((j != 5 || t->budget) && (j < 8 || batched)) {
            c[nc] = cols[j];
            w[nc++] = widths[j];
        }
    blocks_header(ro, c, w, nc);
    for (int i = 0; i < t->nrows; i++) {
        const row *r = &t->rows[i];
        row_label(r);
        for (int k = 0; k < ro->ntargets; k++) {
            const cell *e = &r->cold[k];
            char med[16] = "-", mn[16] = "-", mx[16] = "-", frac[16] = "-", q[16], ok[16], tm[32],
                 vs[16] = "-";
            if (e->median >= 0) {
                snprintf(med, sizeof med, "%.1f", e->median);
                snprintf(frac, sizeof frac, "%.1f%%", 100 * e->median / nvalid);
            }
            if (e->min >= 0) snprintf(mn, sizeof mn, "%d", e->min);
            if (e->max >= 0) snprintf(mx, sizeof mx, "%d", e->max);
            fmt_pct((double)e->quarter / nseeds, q, sizeof q);
            fmt_pct((double)e->reached / nseeds, ok, sizeof ok);
            fmt_time(e->median_time, tm, sizeof tm);
            double exh = ft_landscape_cost_through(l, ft_landscape_first_within(l, ro->targets[k]));
            if (e->median_time > 0 && isfinite(exh))
                snprintf(vs, sizeof vs, "%.1fx", exh / e->median_time);
            printf(" ");
            put_col(med, 7);
            put_col(mn, 5);
            put_col(mx, 5);
            put_col(frac, 8);
            put_col(q, 6);
            if (t->budget) put_col(ok, 9);
            put_col(tm, 8);
            put_col(vs, 7);
            if (batched) {
                char rd[16] = "-", wl[32];
                if (e->median_rounds >= 0) snprintf(rd, sizeof rd, "%.1f", e->median_rounds);
                fmt_time(e->median_wall, wl, sizeof wl);
                put_col(rd, 6);
                put_col(wl, 8);
            }
        }
        printf("\n");
    }
    char note[2048];
    snprintf(note, sizeof note,
             "%d seeds a row. median, min, max: evaluations paid until the best found is within "
             "the target (in batches, every member of the batch that got there). in 25%%: the "
             "seeds that reached the target within %d evaluations (a quarter of the valid "
             "candidates)%s. time: the median wall time of the evaluations up to the target, as "
             "recorded, one after another; vs exh.: exhaustive search's in space order over "
             "it.%s * the default strategy.",
             nseeds, t->quarter, t->budget ? "; in budget: within the budget" : "",
             batched ? " rounds: batches to the target; wall: their time with each batch's "
                       "members measured in parallel on as many devices (the slowest member's "
                       "cost a round)."
                     : "");
    put_wrapped(note);
}

/* Cold against warm: a row per strategy and batch size, a column block per target. */
static void warm_text(const ft_landscape *l, const replay_opts *ro, const replay_table *t) {
    const warm_start *w = &t->warm;
    char what[512], tm[32];
    ft_landscape_describe(w->from, what, sizeof what);
    printf("\nwarm start from %s (%s; optimum %s): a prior for %d of the %d candidates; "
           "measured first:\n",
           w->path, what, ft_fmt_time(w->from->score[w->from->best], 0, tm, sizeof tm), w->nprior,
           l->ncands);
    for (int j = 0; j < w->nfirst; j++) {
        char cfg[512];
        ft_config_format(&l->space, &l->cands[w->first[j]], cfg, sizeof cfg);
        printf("           %s (here %s)\n", cfg,
               ft_fmt_time(l->score[w->first[j]], 0, tm, sizeof tm));
    }
    static const char *const cols[] = {"cold", "warm", "saved", "cold time", "warm time", "saved"};
    static const int widths[] = {6, 6, 6, 9, 9, 6};
    blocks_header(ro, cols, widths, 6);
    for (int i = 0; i < t->nrows; i++) {
        const row *r = &t->rows[i];
        row_label(r);
        for (int k = 0; k < ro->ntargets; k++) {
            const cell *c = &r->cold[k], *h = &r->warm[k];
            char cm[16] = "-", hm[16] = "-", sv[16] = "-", ct[32], ht[32], st[16] = "-";
            if (c->median >= 0) snprintf(cm, sizeof cm, "%.1f", c->median);
            if (h->median >= 0) snprintf(hm, sizeof hm, "%.1f", h->median);
            if (c->median > 0 && h->median >= 0)
                snprintf(sv, sizeof sv, "%ld%%", lround(100 * saving(c->median, h->median)));
            fmt_time(c->median_time, ct, sizeof ct);
            fmt_time(h->median_time, ht, sizeof ht);
            double ts = saving(c->median_time, h->median_time);
            if (!isnan(ts)) snprintf(st, sizeof st, "%ld%%", lround(100 * ts));
            printf(" ");
            put_col(cm, 6);
            put_col(hm, 6);
            put_col(sv, 6);
            put_col(ct, 9);
            put_col(ht, 9);
            put_col(st, 6);
        }
        printf("\n");
    }
    put_wrapped("The median evaluations (and wall time) to the target over the seeds, cold and "
                "warm-started; saved: the share of the cold figure the warm start saves.");
}

static void replay_text(const ft_landscape *l, const replay_opts *ro, const replay_table *t,
                        const predicted_summary *ps) {
    landscape_text(l, ro, t);
    if (ro->export_path) printf("export     %s (flaretune-landscape/1)\n", ro->export_path);
    table_text(l, ro, t);
    const row *b = t->bestrow >= 0 ? &t->rows[t->bestrow] : NULL;
    if (b)
        printf("\nbest non-exhaustive: %s, median %.1f evaluations = %.1f%% of the %d exhaustive "
               "needs (target %g%%, batch %d)\n",
               ft_strategy_names[b->kind], b->cold[0].median, 100 * b->cold[0].median / l->ncands,
               l->ncands, 100 * ro->targets[0], b->batch);
    int said = 0;
    for (int i = 0; i < t->nrows; i++) {
        const row *r = &t->rows[i];
        if (r->batch != ro->batches[0] || !r->proposals || r->kind == FT_STRAT_EXHAUSTIVE ||
            r->kind == FT_STRAT_RANDOM)
            continue;
        printf("%s %s %.3f ms", said++ ? "," : "\nCPU time per proposal:", ft_strategy_names[r->kind],
               1e3 * r->propose_s / (double)r->proposals);
    }
    if (said) printf("\n");
    if (t->warm.from) warm_text(l, ro, t);
    if (ps) predicted_print(l, ps, ft_landscape_first_within(l, ro->targets[0]), b);
}

/* Replay the strategies on one log: its table on stdout, or its JSON object in *out. */
static int replay_one(const char *path, const replay_opts *ro, const ft_landscape *warm,
                      json_t **out) {
    ft_err err = {0};
    ft_landscape l;
    if (ft_landscape_load(path, &l, &err)) return ft_cli_fail_err(&err);
    replay_table t;
    memset(&t, 0, sizeof t);
    int code = FT_EXIT_OK;
    if (warm) code = warm_setup(&l, warm, ro->warm, &t.warm);
    if (!code && ro->export_path && ft_landscape_export(&l, path, ro->export_path, &err))
        code = ft_cli_fail(FT_EXIT_FAIL, "replay: --export: %s", err.msg);
    if (!code) code = replay_strategies(&l, ro, &t);
    predicted_summary ps;
    if (!code && l.npredicted) predicted_summarise(&l, ro, &ps);
    if (!code && ro->json)
        *out = replay_json(path, &l, ro, &t, l.npredicted ? &ps : NULL);
    else if (!code)
        replay_text(&l, ro, &t, l.npredicted ? &ps : NULL);
    table_free(&t);
    ft_landscape_free(&l);
    return code;
}

/* The options of `replay`: the codes of its own, and the table getopt_long reads. */
enum {
    O_STRATEGY = 1,
    O_SEEDS,
    O_TARGET,
    O_BUDGET,
    O_JSON,
    O_PRUNE,
    O_BATCH,
    O_WARM,
    O_EXPORT,
    O_ORDERINGS,
    O_TRACE,
    O_OPT
};
static const struct option opts[] = {
    FT_CLI_ARG("strategy", O_STRATEGY),
    FT_CLI_ARG("seeds", O_SEEDS),
    FT_CLI_ARG("target", O_TARGET),
    FT_CLI_ARG("budget", O_BUDGET),
    FT_CLI_FLAG("json", O_JSON),
    FT_CLI_LIST("prune", O_PRUNE),
    FT_CLI_ARG("batch", O_BATCH),
    FT_CLI_ARG("warm", O_WARM),
    FT_CLI_ARG("export", O_EXPORT),
    FT_CLI_ARG("orderings", O_ORDERINGS),
    FT_CLI_FLAG("trace", O_TRACE),
    FT_CLI_LIST("opt", O_OPT),
    FT_CLI_END,
};

/* One option into ro. Returns an exit code. */
static int replay_opt(void *ctx, int o, const char *arg) {
    replay_opts *ro = ctx;
    switch (o) {
    case O_STRATEGY:
        if (strcmp(arg, "all") == 0) {
            ro->only = -1;
        } else if ((ro->only = ft_strategy_parse(arg)) < 0) {
            return ft_cli_fail(FT_EXIT_USAGE,
                               "replay: unknown strategy '%s' (exhaustive, random, anneal, "
                               "evolve, bayes or all)",
                               arg);
        }
        break;
    case O_SEEDS:
        if (parse_int(arg, "--seeds", 1, MAX_SEEDS, &ro->nseeds)) return FT_EXIT_USAGE;
        break;
    case O_TARGET:
        if (parse_targets(arg, ro->targets, &ro->ntargets)) return FT_EXIT_USAGE;
        break;
    case O_BUDGET:
        if (parse_budget(arg, &ro->budget, &ro->budget_frac)) return FT_EXIT_USAGE;
        break;
    case O_BATCH:
        if (parse_batches(arg, ro->batches, &ro->nbatches)) return FT_EXIT_USAGE;
        break;
    case O_WARM: ro->warm = arg; break;
    case O_EXPORT: ro->export_path = arg; break;
    case O_ORDERINGS:
        if (parse_int(arg, "--orderings", 1, MAX_SEEDS, &ro->orderings)) return FT_EXIT_USAGE;
        break;
    case O_TRACE: ro->trace = 1; break;
    case O_OPT: {
        ft_err err = {0};
        if (ft_strategy_opts_set(&ro->strategy, arg, &err))
            return ft_cli_fail(FT_EXIT_USAGE, "replay: --opt: %s", err.msg);
        char name[16]; /* the strategy, before the first '.' of a name it took */
        snprintf(name, sizeof name, "%.*s", (int)strcspn(arg, "."), arg);
        int k = ft_strategy_parse(name);
        if (k >= 0 && !ro->opt_of[k]) ro->opt_of[k] = arg;
        break;
    }
    case O_JSON: ro->json = 1; break;
    case O_PRUNE:
        if (parse_prune(arg, ro)) return FT_EXIT_USAGE;
        break;
    default: return ft_cli_bad_option("replay", o);
    }
    return FT_EXIT_OK;
}

/* The options; an exit code. */
static int parse_args(int argc, char **argv, replay_opts *ro) {
    memset(ro, 0, sizeof *ro);
    ro->nseeds = 10;
    ro->only = -1;
    ro->targets[0] = FT_REPLAY_TARGET;
    ro->ntargets = 1;
    ro->batches[0] = 1;
    ro->nbatches = 1;
    ro->orderings = 1;
    ft_strategy_opts_default(&ro->strategy);
    int code = ft_cli_parse_options(argc, argv, "", opts, replay_opt, ro);
    if (code) return code;
    for (int k = 0; k < FT_STRAT_COUNT && ro->only >= 0; k++)
        if (ro->opt_of[k] && k != ro->only)
            return ft_cli_fail(FT_EXIT_USAGE,
                               "replay: --opt %s: %s is not replayed (--strategy %s replays "
                               "%s only; --strategy all replays every one)",
                               ro->opt_of[k], ft_strategy_names[k], ft_strategy_names[ro->only],
                               ft_strategy_names[ro->only]);
    ft_err err = {0};
    if (ft_strategy_opts_check(&ro->strategy, &err))
        return ft_cli_fail(FT_EXIT_USAGE, "replay: --opt: %s", err.msg);
    if (ro->trace && !ro->json)
        return ft_cli_fail(FT_EXIT_USAGE,
                           "replay: --trace needs --json (the traces are written in its JSON)");
    if (ro->warm && ro->orderings > 1)
        return ft_cli_fail(FT_EXIT_USAGE,
                           "replay: --warm replays the log's order only: give it without "
                           "--orderings");
    if (optind >= argc)
        return ft_cli_fail(FT_EXIT_USAGE,
                           "replay: which event log? (see `flaretune replay --help`)");
    if (optind + 1 < argc)
        return ft_cli_fail(FT_EXIT_USAGE, "replay: unexpected argument '%s'", argv[optind + 1]);
    return FT_EXIT_OK;
}

/* Each log in turn; one JSON document for all of them with --json. */
static int replay_logs(const char *path, char (*logs)[FT_EVENTLOG_PATH_MAX], int nlogs,
                       const replay_opts *ro, const ft_landscape *warm) {
    json_t *many = nlogs > 1 ? json_array() : NULL;
    for (int i = 0; i < nlogs; i++) {
        json_t *one = NULL;
        if (!ro->json && nlogs > 1) printf("%s== %s\n", i ? "\n" : "", logs[i]);
        int code = replay_one(logs[i], ro, warm, &one);
        if (code) {
            json_decref(many);
            return code;
        }
        if (one && many) {
            json_array_append_new(many, one);
        } else if (one) {
            ft_cli_print_json(one);
        }
    }
    if (many) {
        json_t *root = json_pack("{s:s, s:o}", "log", path, "logs", many);
        ft_cli_print_json(root);
    }
    return FT_EXIT_OK;
}

/* The logs path names (nlogs of them: the file itself, or its family), replayed in turn. */
static int replay_family(const char *path, char (*logs)[FT_EVENTLOG_PATH_MAX], int nlogs,
                         const replay_opts *ro_in) {
    replay_opts ro = *ro_in;
    struct stat sb;
    if (nlogs == 0) {
        if (stat(path, &sb) == 0)
            return ft_cli_fail(FT_EXIT_FAIL, "replay: %s is not an event log (a directory?)", path);
        return ft_cli_fail(FT_EXIT_FAIL,
                           "replay: %s: no such event log, nor logs of a `tune all` "
                           "or sweep with that --log (%s.OP)",
                           path, path);
    }
    if (ro.export_path && nlogs > 1)
        return ft_cli_fail(FT_EXIT_USAGE,
                           "replay: --export writes one landscape, and %s names %d logs: name one",
                           path, nlogs);
    if (ro.export_path && ft_same_file(path, ro.export_path))
        return ft_cli_fail(FT_EXIT_USAGE,
                           "replay: --export %s: the output is the landscape it reads",
                           ro.export_path);
    if (ro.export_path && ro.warm && ft_same_file(ro.warm, ro.export_path))
        return ft_cli_fail(FT_EXIT_USAGE,
                           "replay: --export %s: the output is the --warm landscape it reads",
                           ro.export_path);
    ft_landscape warm;
    if (ro.warm) {
        ft_err err = {0};
        if (ft_landscape_load(ro.warm, &warm, &err))
            return ft_cli_fail(ft_cli_exit_code(err.status), "replay: --warm: %s", err.msg);
    }
    int code = replay_logs(path, logs, nlogs, &ro, ro.warm ? &warm : NULL);
    if (ro.warm) ft_landscape_free(&warm);
    return code;
}

static int run(int argc, char **argv) {
    replay_opts ro;
    int code = parse_args(argc, argv, &ro);
    if (code) return code;
    const char *path = argv[optind];
    /* The --log of `tune all` or a sweep names a family of logs (LOG.OP, ...): each is replayed. */
    int nlogs;
    char(*logs)[FT_EVENTLOG_PATH_MAX] = ft_eventlog_family_all(path, &nlogs);
    if (nlogs < 0) return ft_cli_fail(FT_EXIT_FAIL, "replay: out of memory listing the logs");
    struct stat sb;
    if (stat(path, &sb) == 0 && S_ISREG(sb.st_mode)) {
        nlogs = 1; /* the file itself, as named */
        ft_cli_note_family("replay", path);
    } else if (stat(path, &sb) == 0 && !S_ISDIR(sb.st_mode)) {
        /* A pipe (cmd | flaretune replay /dev/stdin, or <(cmd)): read once, as it is. */
        free(logs);
        if (!(logs = malloc(sizeof *logs)))
            return ft_cli_fail(FT_EXIT_FAIL, "replay: out of memory listing the logs");
        snprintf(logs[0], sizeof logs[0], "%s", path);
        nlogs = 1;
    }
    code = replay_family(path, logs, nlogs, &ro);
    free(logs);
    return code;
}

const ft_cmd ft_cmd_replay = {
    "replay", "replay search strategies against a recorded exhaustive landscape", run, usage};
