/* cmd_bench.c: `flaretune bench`: measure one configuration of one op honestly and place it on
 * this machine's roofline (ceilings measured in the same run). */
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "tuner/ceilings.h"
#include "core/clock.h"
#include "core/env.h"
#include "core/format.h"
#include "core/json.h"
#include "core/load.h"
#include "tuner/measure.h"
#include "op/op_json.h"

static void usage(FILE *f) {
    fprintf(
        f, "usage: flaretune bench OP [--preset P] [--set NAME=VALUE]... [--attr NAME=VALUE]...\n"
           "                          [--backend B] [--config NAME=VALUE,...] [--threads N]\n"
           "                          [--cold] [--json] [--seed N] [--max-time S] [--noise X]\n"
           "                          [--timer auto|cupti|events]\n\n"
           "Time one configuration of OP (the backend's default unless --config) on fresh\n"
           "random inputs: warm-up, then samples until the median's 95%% confidence interval is\n"
           "within --noise of it (after 10 samples and 0.25 s) or --max-time passes. Prints the\n"
           "median, IQR and sample count, the bytes and FLOPs the op must move and do, the rates,\n"
           "and the fraction of this machine's cache-aware roofline: the bandwidth of the cache\n"
           "level the working set fits in (memory with --cold) and the compute peak, measured in\n"
           "the same run and never below the best this machine has shown (docs/measurement.md). A\n"
           "fraction above 100%% is measured again and, if it holds, reported as suspect. A\n"
           "machine busy with other processes is detected and said.\n\n"
           "  --preset P       problem sizes (default small.dflare.train, or .decode for\n"
           "                   attention.decode); --set NAME=VALUE changes one size\n"
           "  --attr NAME=VAL  op attribute (e.g. --attr backward=1, --attr scheme=dpace)\n"
           "  --backend B      default auto\n"
           "  --config C       NAME=VALUE,... (see `flaretune space OP`)\n"
           "  --threads N      the config's thread count\n"
           "  --timer T        the GPU clock: auto (CUPTI, else CUDA events), cupti or events\n"
           "                   (docs/cuda.md, \"Timing\")\n"
           "  --cold           every sample starts with cold caches: input sets larger than the\n"
           "                   last-level cache rotate (CPU; at most 32 sets: inputs too small\n"
           "                   for that stay cached, and bench says so), or the GPU's L2 is\n"
           "                   overwritten before each call, outside the timed window\n"
           "  --json           one JSON object on stdout\n"
           "  --max-time S     time cap for the samples (default 3)\n"
           "  --max-lost X|off a sample whose threads lost more than this share of it to other\n"
           "                   work is thrown away (default 0.05, or FLARETUNE_MAX_LOST)\n"
           "  --measure-ceilings  measure the ceilings now; by default the cache's figures of\n"
           "                   this machine are used when they are under 7 days old\n"
           "  --noise X        target relative CI half-width of the median (default 0.01)\n\n");
    ft_cli_bench_t1_usage(f);
}

#define MAX_SETS 32

typedef struct {
    const ft_backend *be;
    const ft_config *cfg;
    ft_call *c;
    ft_tensor *sets[MAX_SETS][FT_MAX_TENSORS]; /* input tensors of each rotation set */
    int nsets;
    double rotation_bytes; /* the inputs of every set together */
    int rotation_fits;     /* ... fit in twice the last-level cache: the inputs stay cached */
} bench_ctx;

static ft_status bench_prep(void *p, int sample, ft_err *err) {
    (void)err;
    bench_ctx *b = p;
    if (b->nsets <= 1) return FT_OK;
    int k = sample < 0 ? 0 : sample % b->nsets;
    for (int i = 0; i < b->c->op->ntensors; i++)
        if (b->sets[k][i]) b->c->t[i] = b->sets[k][i];
    return FT_OK;
}

static ft_status bench_run(void *p, int reps, double *secs, ft_err *err) {
    bench_ctx *b = p;
    return ft_backend_time(b->be, b->c, b->cfg, reps, secs, err);
}

static int is_input(const ft_op *op, int i) {
    return op->tensors[i].role == FT_ROLE_IN || op->tensors[i].role == FT_ROLE_GRAD_IN;
}

/* Extra input sets for cold runs: together larger than twice the last-level cache. */
static ft_status make_cold_sets(bench_ctx *b, const ft_preset *p, uint64_t seed, ft_err *err) {
    ft_call *c = b->c;
    double in_bytes = 0;
    for (int i = 0; i < c->op->ntensors; i++)
        if (ft_call_uses(c, i) && is_input(c->op, i)) in_bytes += (double)ft_tensor_nbytes(c->t[i]);
    double llc = (double)ft_llc_bytes();
    int n = (int)ceil(2.0 * (llc > 0 ? llc : 64e6) / (in_bytes > 0 ? in_bytes : 1)) + 1;
    if (n > MAX_SETS) n = MAX_SETS;
    while (n > 2 && in_bytes * n > 4e9)
        n--; /* keep the rotation under 4 GB */
    /* Small inputs: MAX_SETS of them stay in the cache, and the call is not cold after all. */
    b->rotation_bytes = in_bytes * n;
    b->rotation_fits = b->rotation_bytes < 2.0 * (llc > 0 ? llc : 64e6);
    for (int i = 0; i < c->op->ntensors; i++)
        if (ft_call_uses(c, i) && is_input(c->op, i)) b->sets[0][i] = c->t[i];
    for (int k = 1; k < n; k++) {
        ft_call extra;
        ft_call_init(&extra, c->op);
        extra.attrs = c->attrs;
        ft_status s = ft_call_from_preset(&extra, p, seed + 1000003ull * (uint64_t)k, err);
        if (s) {
            ft_call_free(&extra);
            return s;
        }
        for (int i = 0; i < c->op->ntensors; i++) {
            if (ft_call_uses(c, i) && is_input(c->op, i)) {
                b->sets[k][i] = extra.t[i];
                extra.t[i] = NULL;
            }
        }
        ft_call_free(&extra);
        b->nsets = k + 1;
    }
    return FT_OK;
}

static void free_cold_sets(bench_ctx *b) {
    /* Set 0 belongs to the call itself. */
    for (int k = 1; k < b->nsets; k++)
        for (int i = 0; i < FT_MAX_TENSORS; i++)
            ft_tensor_free(b->sets[k][i]);
    for (int i = 0; i < b->c->op->ntensors; i++)
        if (b->sets[0][i]) b->c->t[i] = b->sets[0][i];
}

/* The command line of one bench. */
typedef struct {
    ft_cli_problem prob;
    ft_measure_opts mo;
    const char *op;
    int cold, json;
    int fresh_ceilings; /* --measure-ceilings: never the cache's figures alone */
} bench_args;

/* The cache's ceilings of this machine are used without a probe when under this many days old:
 * a machine's figures move with its software (BLAS core, kernel) far more slowly, and a bench
 * whose fraction comes out above 1 measures them again anyway. */
#define FT_BENCH_CEILINGS_MAX_AGE_DAYS 7

/* The options of `bench`: the codes of its own, and the table getopt_long reads. */
enum { O_COLD = 1, O_JSON, O_FRESH };
static const struct option opts[] = {
    FT_CLI_PROBLEM_OPTIONS,
    FT_CLI_FLAG("cold", O_COLD),
    FT_CLI_FLAG("json", O_JSON),
    FT_CLI_MEASURE_OPTIONS,
    FT_CLI_FLAG("measure-ceilings", O_FRESH),
    FT_CLI_END,
};

/* One option of bench's own (not a problem option). Returns an exit code, 0 when taken. */
static int bench_opt(void *ctx, int o, const char *arg) {
    bench_args *a = ctx;
    switch (o) {
    case O_COLD: a->cold = 1; break;
    case O_JSON: a->json = 1; break;
    case FT_OPT_MAX_TIME:
    case FT_OPT_NOISE:
    case FT_OPT_MAX_LOST: return ft_cli_measure_opt(&a->mo, o, arg, "bench");
    case O_FRESH: a->fresh_ceilings = 1; break;
    }
    return FT_EXIT_OK;
}

static int bench_parse(int argc, char **argv, bench_args *a) {
    memset(a, 0, sizeof *a);
    ft_measure_defaults(&a->mo);
    return ft_cli_parse_op("bench", "see `flaretune list ops`", argc, argv, opts, &a->prob,
                           bench_opt, a, &a->op);
}

/* What one bench measured, and what it is measured against. */
typedef struct {
    ft_ceilings ceil;
    ft_workspace ws;
    ft_stats st;
    ft_load load;
    ft_roofline roof;
    double bytes, flops;
    int remeasured;
    int busy; /* the load says so, or the scheduler took over --max-lost of the sampled time */
    ft_load ceil_load; /* the machine while the ceilings were measured here (none: not known) */
    int rotation_fits; /* --cold: the rotated input sets fit in the cache (not cold)      */
    double rotation_bytes; /* ... their bytes together, nsets of them                        */
    int nsets;
    int ceil_busy;     /* ... busy, and the figures are this run's, not raised from the cache;
                          or a figure the cache gave was measured on a busy machine */
} bench_result;

/* The inputs, the configuration's validity at them, and this machine's ceilings: everything
 * that can fail before the timing. On failure nothing is held. */
static int bench_prepare(const bench_args *a, ft_cli_setup *su, bench_result *r) {
    int code;
    if ((code = ft_cli_setup_problem(&a->prob, a->op, 1, su))) return code;
    if ((code = ft_cli_setup_inputs(&a->prob, su))) return code;
    const ft_space *space = su->be->space(su->op);
    char why[256];
    int verdict = ft_space_check(space, &su->c, &su->cfg, why, sizeof why);
    if (verdict == FT_CONFIG_INVALID) {
        ft_call_free(&su->c);
        return ft_cli_fail(FT_EXIT_USAGE, "bench: config not valid for %s at %s: %s", su->op->name,
                           su->preset.name, why);
    }
    if (verdict == FT_CONFIG_DUPLICATE)
        fprintf(stderr, "bench: note: %s (a tuner skips it; timed as given)\n", why);
    int ti = ft_space_param(space, "threads");
    int threads = ti >= 0 ? su->cfg.v[ti] : 1;
    ft_err err = {0};
    /* The cache's figures when they are this machine's and recent: a bench starts at once
     * (the recall measures them when the cache has none; once is enough). The load is judged
     * over a measurement: ceilings measured on a busy machine are low, and every fraction
     * against them high. */
    ft_load_mark m0, m1;
    ft_load_mark_take(&m0);
    ft_status st;
    if (!a->fresh_ceilings) {
        st = ft_ceilings_recall(su->be, threads, FT_BENCH_CEILINGS_MAX_AGE_DAYS, &r->ceil, &err);
    } else {
        if (!a->json)
            fprintf(stderr, "bench: measuring this machine's ceilings with %d threads...\n",
                    threads);
        st = ft_ceilings_of(su->be, threads, &r->ceil, &err);
    }
    if (st) {
        ft_call_free(&su->c);
        return ft_cli_fail_err(&err);
    }
    if (r->ceil.rounds > 0) {
        ft_load_mark_take(&m1);
        ft_load_between(&m0, &m1, &r->ceil_load);
        r->ceil_busy = r->ceil_load.busy && !r->ceil.from_cache;
    }
    if (r->ceil.cache_busy) r->ceil_busy = 1;
    return FT_EXIT_OK;
}

/* Time the call. A fraction above 1 is a measurement error: measure the ceilings and the call
 * again once, and if it holds, report it as suspect rather than as a result. */
static ft_status bench_measure(const bench_args *a, ft_cli_setup *su, bench_result *r,
                               ft_err *err) {
    su->c.ws = &r->ws;
    bench_ctx b = {su->be, &su->cfg, &su->c, {{0}}, 1, 0, 0};
    ft_status s = FT_OK;
    if (a->cold && su->be->set_cold)
        su->be->set_cold(1); /* the device flushes its own caches before each call */
    else if (a->cold)
        s = make_cold_sets(&b, &su->preset, a->prob.seed, err);
    r->bytes = ft_call_io_bytes(&su->c);
    r->flops = su->op->flops(&su->c);
    ft_timed_fn fn = {.prep = bench_prep, .run = bench_run, .ctx = &b};
    fn.host_clock = !strcmp(ft_backend_clock(su->be), "host");
    r->rotation_fits = b.rotation_fits;
    r->rotation_bytes = b.rotation_bytes;
    r->nsets = b.nsets;
    for (int attempt = 0; attempt < 2 && !s; attempt++) {
        if (attempt) {
            if (!a->json)
                fprintf(stderr,
                        "bench: %.0f%% of the roofline cannot be: measuring the ceilings "
                        "and the call again\n",
                        100 * r->roof.floor_s / r->st.median);
            if ((s = ft_ceilings_refine(su->be, &r->ceil, err))) break;
            r->remeasured = 1;
        }
        ft_load_mark m0, m1;
        ft_load_mark_take(&m0);
        r->ws.peak = 0;
        s = ft_measure(&fn, &a->mo, &r->st, err);
        if (s) break;
        /* A short measurement is too short for the load to judge: the rest of the span idle
         * (this process then takes no CPU, so what the others take is still seen). */
        double left = FT_LOAD_MIN_SPAN_S - (ft_now_s() - m0.wall_s);
        if (left > 0) usleep((useconds_t)(left * 1e6) + 1000);
        ft_load_mark_take(&m1);
        ft_load_between(&m0, &m1, &r->load);
        r->busy = r->load.busy || (a->mo.max_lost > 0 && r->st.lost_frac >= a->mo.max_lost);
        /* Cold: the memory's roof, unless the rotation stays in the cache; then the level its
         * whole working set fits in, as for a warm call. */
        const int cold = a->cold && !b.rotation_fits;
        const double ws =
            r->bytes + (double)r->ws.peak + (a->cold && b.rotation_fits ? b.rotation_bytes : 0);
        r->roof = ft_roofline_of(&r->ceil, r->bytes, r->flops, ws, cold);
        if (r->roof.floor_s / r->st.median <= FT_ROOFLINE_MAX_FRAC) break;
    }
    free_cold_sets(&b);
    return s;
}

static void bench_print_json(const bench_args *a, const ft_cli_setup *su, const bench_result *r) {
    const ft_stats *st = &r->st;
    double frac = r->roof.floor_s / st->median;
    ft_env env;
    ft_env_probe(&env);
    json_t *root = json_object();
    json_object_set_new(root, "op", json_string(su->op->name));
    json_object_set_new(root, "preset", json_string(su->preset.name));
    json_object_set_new(root, "backend", json_string(su->be->name));
    json_object_set_new(root, "config", ft_config_to_json(su->be->space(su->op), &su->cfg));
    json_object_set_new(root, "dims", ft_dims_to_json(&su->c));
    json_object_set_new(root, "attrs", ft_attrs_to_json(&su->c));
    json_object_set_new(root, "cold", json_boolean(a->cold));
    if (a->cold && r->nsets > 1) /* rotated input sets: whether they left the cache */
        json_object_set_new(root, "cold_rotation",
                            json_pack("{s:i, s:f, s:b}", "sets", r->nsets, "bytes",
                                      r->rotation_bytes, "fits_in_cache", r->rotation_fits));
    json_object_set_new(root, "clock", json_string(ft_backend_clock(su->be)));
    if (su->be->kernel_modules) {
        int compiled = 0, cached = 0;
        su->be->kernel_modules(&compiled, &cached);
        json_object_set_new(root, "kernel_modules",
                            json_pack("{s:i, s:i}", "compiled", compiled, "cached", cached));
    }
    json_object_set_new(root, "median_s", ft_json_number(st->median));
    json_object_set_new(root, "iqr_s", ft_json_number(st->iqr));
    json_object_set_new(root, "samples", json_integer(st->samples));
    json_object_set_new(root, "stats", ft_stats_to_json(st));
    json_object_set_new(root, "bytes", ft_json_number(r->bytes));
    json_object_set_new(root, "flops", ft_json_number(r->flops));
    json_object_set_new(root, "gbps", ft_json_number(r->bytes / st->median / 1e9));
    json_object_set_new(root, "gflops", ft_json_number(r->flops / st->median / 1e9));
    json_object_set_new(root, "roofline_s", ft_json_number(r->roof.floor_s));
    json_object_set_new(root, "roofline_frac", ft_json_number(frac));
    json_object_set_new(root, "roofline_level", json_string(r->roof.level_name));
    json_object_set_new(root, "roofline_suspect", json_boolean(frac > FT_ROOFLINE_MAX_FRAC));
    json_object_set_new(root, "roofline", ft_roofline_to_json(&r->roof, st->median));
    json_object_set_new(root, "remeasured", json_boolean(r->remeasured));
    json_object_set_new(root, "bound", json_string(r->roof.compute_bound ? "compute" : "memory"));
    json_object_set_new(root, "load", ft_load_to_json(&r->load));
    json_object_set_new(root, "busy", json_boolean(r->busy));
    json_object_set_new(root, "ceilings_busy", json_boolean(r->ceil_busy));
    json_object_set_new(root, "peak_extra_bytes", json_integer((json_int_t)r->ws.peak));
    json_object_set_new(root, "ceilings", ft_ceilings_to_json(&r->ceil));
    json_object_set_new(root, "env", ft_env_to_json(&env));
    json_dumpf(root, stdout, JSON_INDENT(2) | JSON_REAL_PRECISION(17));
    fputc('\n', stdout);
    json_decref(root);
}

static void bench_print_text(const bench_args *a, const ft_cli_setup *su, const bench_result *r,
                             const char *loadmsg) {
    const ft_stats *st = &r->st;
    const ft_ceilings *ceil = &r->ceil;
    const ft_roofline *roof = &r->roof;
    double frac = roof->floor_s / st->median;
    char dims[256], cs[512], a1[32], b1[32], b2[32], b3[32];
    ft_call_dims_str(&su->c, dims, sizeof dims);
    ft_config_format(su->be->space(su->op), &su->cfg, cs, sizeof cs);
    printf("bench %s on %s  (%s: %s)%s\n", su->op->name, su->be->name, su->preset.name, dims,
           su->c.backward ? " forward+backward" : "");
    printf("  config     %s\n", cs[0] ? cs : "(none)");
    printf("  ceilings   ");
    for (int i = 0; i < ceil->nlevels; i++)
        printf("%s%s %s", i ? ", " : "", ceil->level[i].name,
               ft_fmt_rate(ceil->level[i].bw, "B/s", a1, sizeof a1));
    printf("; %s (%s %s)\n", ft_fmt_rate(ceil->flops, "FLOP/s", b1, sizeof b1),
           ceil->gemm ? ceil->gemm : "sgemm",
           ft_fmt_rate(ceil->gemm_flops, "FLOP/s", b2, sizeof b2));
    if (ceil->rounds == 0)
        printf("             %d thread%s, this machine's best from the cache (under %d days "
               "old; --measure-ceilings measures them now)\n",
               ceil->threads, ceil->threads > 1 ? "s" : "", FT_BENCH_CEILINGS_MAX_AGE_DAYS);
    else
        printf("             %d thread%s, %d round%s in %.1f s%s\n", ceil->threads,
               ceil->threads > 1 ? "s" : "", ceil->rounds, ceil->rounds > 1 ? "s" : "",
               ceil->measured_s,
               ceil->from_cache ? "; raised to the best this machine has shown (cache)" : "");
    if (r->ceil.cache_busy)
        printf("             BUSY when cached: the cache's figures were measured on a busy "
               "machine; the ceilings read low and the roofline fraction high "
               "(--measure-ceilings on a quiet machine)\n");
    else if (r->ceil_busy)
        printf("             BUSY while measured: other processes used %.2f of %d CPUs; the "
               "ceilings read low and the roofline fraction high (--measure-ceilings on a quiet "
               "machine)\n",
               r->ceil_load.other_cpus, r->ceil_load.ncpu);
    printf("  clock      %s\n", ft_backend_clock(su->be));
    printf("  time       median %s  IQR %s  min %s  max %s\n",
           ft_fmt_time(st->median, 0, a1, sizeof a1), ft_fmt_time(st->iqr, 0, b1, sizeof b1),
           ft_fmt_time(st->min, 0, b2, sizeof b2), ft_fmt_time(st->max, 0, b3, sizeof b3));
    char ci[96];
    if (st->unclean) /* contaminated samples: an upper bound, whose spread says nothing */
        snprintf(ci, sizeof ci, "an upper bound (no confidence interval: not measured cleanly)");
    else if (isfinite(st->ci_rel))
        snprintf(ci, sizeof ci, "median known to +-%.2g%%", 100 * st->ci_rel);
    else
        snprintf(ci, sizeof ci, "too few for a confidence interval (%d needed)", FT_STATS_MIN_CI);
    printf("  samples    %d (%d call%s each, %s), %s%s\n", st->samples, st->batch,
           st->batch > 1 ? "s" : "", a->cold ? "cold: rotating inputs" : "warm", ci,
           st->converged ? ""
                         : " (a cap on time or samples came first: not yet the noise target over "
                           "the minimum sampling time)");
    if (a->cold && r->nsets > 1 && r->rotation_fits) {
        char rb[32];
        printf("  cold?      the %d rotated input sets (%s in all) fit in the cache: the inputs "
               "stay cached, so the roofline is the level they fit in, not memory\n",
               r->nsets, ft_fmt_bytes(r->rotation_bytes, rb, sizeof rb));
    }
    if (st->discarded || st->unclean)
        printf("  scheduler  %d of %d samples thrown away: their threads lost over %.0f%% of the "
               "sample to other work (%.0f%% of all sampled time)%s\n",
               st->discarded, st->unclean ? st->samples : st->samples + st->discarded,
               100 * a->mo.max_lost, 100 * st->lost_frac,
               st->unclean ? "; NOT MEASURED CLEANLY: the median above counts them, an upper "
                             "bound on the kernel's time"
                           : "");
    printf("  work       %s moved, %.3g GFLOP\n", ft_fmt_bytes(r->bytes, a1, sizeof a1),
           r->flops / 1e9);
    printf("  rate       %s, %s\n", ft_fmt_rate(r->bytes / st->median, "B/s", a1, sizeof a1),
           ft_fmt_rate(r->flops / st->median, "FLOP/s", b1, sizeof b1));
    printf("  roofline   floor %s (%s-bound; working set %s from %s at %s): %.0f%% of "
           "roofline%s\n",
           ft_fmt_time(roof->floor_s, 0, a1, sizeof a1), roof->compute_bound ? "compute" : "memory",
           ft_fmt_bytes(roof->working_set, b1, sizeof b1), roof->level_name,
           ft_fmt_rate(roof->bw, "B/s", b2, sizeof b2), 100 * frac,
           frac > FT_ROOFLINE_MAX_FRAC ? "  SUSPECT: above the roof" : "");
    printf("  load       %s%s\n", loadmsg, r->busy ? "  BUSY" : "");
    printf("  memory     %s scratch beyond inputs and outputs\n",
           ft_fmt_bytes((double)r->ws.peak, a1, sizeof a1));
}

/* The warnings that qualify the result (stderr), then the result (stdout). */
static void bench_report(const bench_args *a, const ft_cli_setup *su, const bench_result *r) {
    double frac = r->roof.floor_s / r->st.median;
    char loadmsg[160];
    ft_load_describe(&r->load, loadmsg, sizeof loadmsg);
    if (r->busy) {
        char why[200];
        if (r->load.busy)
            snprintf(why, sizeof why, "%s", loadmsg);
        else
            snprintf(why, sizeof why,
                     "the scheduler took %.0f%% of the sampled time from its calls",
                     100 * r->st.lost_frac);
        fprintf(stderr,
                "flaretune: warning: the machine was busy while measuring (%s); the "
                "timing is not what a quiet machine gives\n",
                why);
    }
    if (frac > FT_ROOFLINE_MAX_FRAC)
        fprintf(stderr,
                "flaretune: warning: bench %s: %.0f%% of the roofline is above the roof after "
                "measuring again: the ceiling (%s at %.3g GB/s, %.3g GFLOP/s) or the op's count "
                "of bytes and FLOPs is wrong; treat this result as a measurement error\n",
                su->op->name, 100 * frac, r->roof.level_name, r->roof.bw / 1e9,
                r->ceil.flops / 1e9);
    if (a->json)
        bench_print_json(a, su, r);
    else
        bench_print_text(a, su, r, loadmsg);
}

static int run(int argc, char **argv) {
    if (ft_cli_names_t1(argc, argv)) return ft_cli_bench_t1(argc, argv);
    bench_args a;
    ft_cli_setup su;
    bench_result r;
    memset(&r, 0, sizeof r);
    int code = bench_parse(argc, argv, &a);
    if (code || (code = bench_prepare(&a, &su, &r))) return code;
    ft_err err = {0};
    if (bench_measure(&a, &su, &r, &err))
        code = ft_cli_fail_err(&err);
    else
        bench_report(&a, &su, &r);
    ft_ws_free(&r.ws);
    ft_call_free(&su.c);
    return code;
}

const ft_cmd ft_cmd_bench = {
    "bench", "time one configuration of an op against this machine's roofline", run, usage};
