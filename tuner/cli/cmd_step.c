/* cmd_step.c: `flaretune step`: one whole drafter step with a profile's tuned configs, each op
 * timed alone and the step end to end (tuner/step.c, docs/step.md). */
#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "cli_profile.h"
#include "core/format.h"
#include "kernels/registry.h"
#include "tuner/step.h"

static void usage(FILE *f) {
    fprintf(f,
            "usage: flaretune step PRESET [--profile P] [--backend B] [--set NAME=VALUE]...\n"
            "                      [--scheme S] [--seed N] [--time S] [--json]\n\n"
            "Run one whole drafter step at PRESET (see `flaretune list presets`; its phase\n"
            "decides inference or training) with the tuned configs of profile P (the\n"
            "backend's defaults where P has no entry, or without --profile; each stage says\n"
            "which), and time it: every op alone, and the whole step end to end.\n\n"
            "Inference (decode): the fusion of the new tokens' target states, the context K/V\n"
            "projection, then per draft layer the block's q and k/v projections, its attention\n"
            "over the context cache, the output projection and the MLP's gate/up and down\n"
            "projections (the `linear` op: OpenBLAS or cuBLASLt), and the LM head over the\n"
            "block. Training (train): the same at training shapes, each op with its backward\n"
            "(the context K/V projection's through its k_norm and RoPE), and the loss (with the\n"
            "drafter's final RMSNorm). The layers' norms, RoPE on the block, SiLU gating and\n"
            "residual adds are elementwise and not timed. Each draft layer has its own\n"
            "tensors. On the CPU the whole step runs back to back; on a GPU it is captured once\n"
            "as a CUDA graph and replayed, as serving engines run it.\n\n"
            "Prints per op (summed over the layers) and per layer the median alone, its share of\n"
            "the sum, and the sum against the whole step's median (ratio > 1: the step pays\n"
            "for something the ops alone do not, such as every layer's weights streaming from\n"
            "memory instead of staying in cache). A median marked '!' was not measured\n"
            "cleanly: on a busy machine too few samples kept their threads' time (the others are\n"
            "thrown away, FLARETUNE_MAX_LOST), so it counts every sample, an upper bound; a last\n"
            "line gives the share of samples thrown away over the step.\n\n"
            "  --profile P      the tuned configs (a missing or malformed P is an error)\n"
            "  --backend B      backend (default auto: the GPU where present, else the CPU)\n"
            "  --set NAME=VALUE change a size of the preset (D, T, B, L, ...)\n"
            "  --scheme S       train: the loss's weighting scheme (default decay)\n"
            "  --seed N         seed of the random inputs (default 1)\n"
            "  --time S         each measurement samples for S seconds (at most 10 S; default\n"
            "                   0.25, bench's)\n"
            "  --json           the result as JSON (format flaretune-step/1, docs/step.md)\n");
}

static volatile sig_atomic_t interrupted;
static volatile int stop_flag;
static void on_sigint(int sig) {
    (void)sig;
    interrupted = 1;
    stop_flag = 1;
}

static void progress(void *ctx, const char *what, int done, int total) {
    (void)ctx;
    if (!isatty(STDERR_FILENO)) return;
    fprintf(stderr, "\r\033[Kstep: timing %s [%d/%d]", what, done + (done < total), total);
    if (done >= total) fprintf(stderr, "\r\033[K");
    fflush(stderr);
}

static void fmt_s(double s, char *buf, size_t n) { ft_fmt_time(s, 1, buf, n); }

/* ---- what the scheduler took (docs/measurement.md) ----------------------------------------- */

typedef struct busy {
    long discarded, taken;
    int unclean;
} busy;

static void busy_add(busy *b, const ft_stats *st) {
    b->discarded += st->discarded;
    b->taken += st->taken;
    b->unclean |= st->unclean;
}

/* The measurement stage j's median comes from: its own, or its twin's. */
static int measured_at(const ft_step *s, int j) {
    return s->stages[j].twin >= 0 ? s->stages[j].twin : j;
}

/* The distinct measurements of the stages called `name` (a twin's is its stage's, perhaps of
 * another name), or of every stage (name NULL). */
static busy busy_of(const ft_step *s, const char *name) {
    busy b = {0, 0, 0};
    for (int j = 0; j < s->n; j++) {
        if (name && strcmp(s->stages[j].name, name)) continue;
        int m = measured_at(s, j), seen = 0;
        for (int k = 0; k < j && !seen; k++)
            seen = (!name || !strcmp(s->stages[k].name, name)) && measured_at(s, k) == m;
        if (!seen) busy_add(&b, &s->stages[m].alone);
    }
    return b;
}

static char busy_mark(const busy *b) { return b->unclean ? '!' : ' '; }

/* The footnote under a line marked '!', indented by `indent` columns. */
static void busy_note(const busy *b, int indent) {
    if (b->unclean)
        printf("%*s! not measured cleanly: %ld of %ld samples discarded; the median is an upper "
               "bound\n",
               indent, "", b->discarded, b->taken);
}

static void print_human(const ft_step *s, const char *profile) {
    const ft_preset *p = &s->preset;
    char a[32], b[32];
    printf("step %s on %s (%s), %s clock; D=%lld T=%lld B=%lld, %lld rows per layer%s%s\n", p->name,
           s->be->name, s->device, ft_backend_clock(s->be), (long long)p->D, (long long)p->T,
           (long long)p->B, (long long)(p->blocks * p->B),
           strcmp(p->phase, "train") ? "" : ", loss ",
           strcmp(p->phase, "train") ? "" : s->loss_scheme);
    int from_profile = 0;
    for (int i = 0; i < s->n; i++)
        from_profile += strncmp(s->stages[i].cfg_from, "profile", 7) == 0;
    if (profile)
        printf("configs: %d of %d stages from %s, the rest the backend's defaults\n\n",
               from_profile, s->n, profile);
    else
        printf("configs: the backend's defaults (no profile)\n\n");
    printf("%-12s %-17s %5s %-8s %10s  %10s %7s  %s\n", "op", "kernel", "count", "pass", "median",
           "spread", "share", "config");
    for (int i = 0; i < s->n; i++) {
        const ft_step_stage *sg = &s->stages[i];
        double sum;
        int count;
        if (!ft_step_op_sum(s, i, &count, &sum)) continue;
        char cfg[200];
        ft_config_format(s->be->space(sg->call.op), &sg->cfg, cfg, sizeof cfg);
        fmt_s(sum, a, sizeof a);
        fmt_s((sg->alone.q3 - sg->alone.q1) * count, b, sizeof b);
        busy bz = busy_of(s, sg->name);
        printf("%-12s %-17s %5d %-8s %10s%c %10s %6.1f%%  %s (%s)\n", sg->name, sg->call.op->name,
               count, sg->pass, a, busy_mark(&bz), b,
               s->sum_alone_s > 0 ? 100 * sum / s->sum_alone_s : 0.0, cfg, sg->cfg_from);
        if (sg->note[0]) printf("%-12s   %s\n", "", sg->note);
        busy_note(&bz, 15);
        if (sg->cfg_why[0]) printf("%-12s   %s: %s\n", "", sg->cfg_from, sg->cfg_why);
    }
    printf("\nper layer:");
    for (int l = -1; l < (int)p->D; l++) {
        double sum = ft_step_layer_sum(s, l);
        fmt_s(sum, a, sizeof a);
        if (l < 0)
            printf(" context and head %s (%.1f%%);", a, 100 * sum / s->sum_alone_s);
        else
            printf(" %d: %s", l, a);
    }
    printf("\n\n");
    busy all = busy_of(s, NULL), whole = {0, 0, 0};
    busy_add(&whole, &s->whole);
    fmt_s(s->sum_alone_s, a, sizeof a);
    printf("sum of the ops alone   %s%s\n", a, all.unclean ? "! (an upper bound)" : "");
    fmt_s(s->whole.median, a, sizeof a);
    fmt_s(s->whole.q3 - s->whole.q1, b, sizeof b);
    printf("whole step             %s%s (IQR %s, %d samples, %s)  = %.2fx the sum\n", a,
           whole.unclean ? "!" : "", b, s->whole.samples, s->whole_mode,
           s->sum_alone_s > 0 ? s->whole.median / s->sum_alone_s : 0.0);
    busy_note(&whole, 23);
    printf("not timed: the draft layers' norms, RoPE on the block, SiLU gating, residual adds "
           "(elementwise; the final norm is in the loss)\n");
    busy_add(&all, &s->whole);
    if (s->load.busy)
        printf("BUSY while measured: other processes used %.2f of %d CPUs; the medians may read "
               "slow even where no sample was thrown away (caches, memory and SMT siblings are "
               "shared: docs/measurement.md)\n",
               s->load.other_cpus, s->load.ncpu);
    if (all.discarded > 0)
        printf("samples discarded: %ld of %ld (%.1f%%) over the step, their threads having lost "
               "time to other work (a busy machine: docs/measurement.md)\n",
               all.discarded, all.taken, all.taken > 0 ? 100.0 * all.discarded / all.taken : 0.0);
}

/* The command line of one step. */
typedef struct {
    const char *profile, *sets[64];
    int nsets, json;
    ft_step_opts so;
} step_args;

static int step_opt(void *ctx, int o, const char *arg) {
    step_args *a = ctx;
    char *end;
    switch (o) {
    case 'p': a->profile = arg; break;
    case 'b': a->so.backend = arg; break;
    case 's': {
        if (a->nsets == 64) return ft_cli_fail(FT_EXIT_USAGE, "step: too many --set");
        const char *before = ft_cli_named_before(a->sets, a->nsets, arg);
        if (before)
            return ft_cli_fail(FT_EXIT_USAGE,
                               "step: --set %s and --set %s name one size: give it once", before,
                               arg);
        a->sets[a->nsets++] = arg;
        break;
    }
    case 'S': a->so.scheme = arg; break;
    case 'r': {
        unsigned long long seed;
        if (!ft_cli_seed(arg, &seed) || !seed)
            return ft_cli_fail(FT_EXIT_USAGE, "step: --seed expects a positive integer, got '%s'",
                               arg);
        a->so.seed = seed;
        break;
    }
    case 'q': {
        double t = strtod(arg, &end);
        if (!*arg || *end || !(t > 0) || t > 60)
            return ft_cli_fail(FT_EXIT_USAGE, "step: --time expects seconds in (0, 60], got '%s'",
                               arg);
        ft_step_measure_time(t, &a->so.measure);
        break;
    }
    case 'j': a->json = 1; break;
    default: return ft_cli_bad_option("step", o);
    }
    return FT_EXIT_OK;
}

static int run(int argc, char **argv) {
    static const struct option opts[] = {
        FT_CLI_ARG("profile", 'p'),
        FT_CLI_ARG("backend", 'b'),
        FT_CLI_LIST("set", 's'),
        FT_CLI_ARG("scheme", 'S'),
        FT_CLI_ARG("seed", 'r'),
        FT_CLI_ARG("time", 'q'),
        FT_CLI_FLAG("json", 'j'),
        FT_CLI_END,
    };
    step_args args = {0};
    ft_step_opts_default(&args.so);
    int code = ft_cli_parse_options(argc, argv, ":", opts, step_opt, &args);
    if (code) return code;
    const char *profile = args.profile;
    ft_step_opts so = args.so;
    if (optind >= argc)
        return ft_cli_fail(FT_EXIT_USAGE, "step: which preset? (see `flaretune list presets`)");
    if (optind + 1 < argc)
        return ft_cli_fail(FT_EXIT_USAGE, "step: one preset, got '%s' too", argv[optind + 1]);
    const ft_preset *base = ft_preset_find(argv[optind]);
    if (!base)
        return ft_cli_fail(FT_EXIT_USAGE,
                           "step: unknown preset '%s' (see `flaretune list "
                           "presets`)",
                           argv[optind]);
    ft_preset p = *base;
    ft_err err = {0};
    for (int i = 0; i < args.nsets; i++)
        if (ft_preset_set(&p, args.sets[i], &err))
            return ft_cli_fail(FT_EXIT_USAGE, "step: %s", err.msg);
    if (ft_preset_check(&p, &err)) return ft_cli_fail(FT_EXIT_USAGE, "step: %s", err.msg);
    /* One op alone may take N or blocks of its own; a whole step derives them from the other
     * sizes, so that every stage sees the same tokens and rows (docs/step.md). */
    int decode = !strcmp(p.phase, "decode");
    const struct {
        const char *name, *formula, *instead;
        int flag;
        long long set, derived;
    } derived[] = {
        {"N", decode ? "R * B" : "nseq * S", decode ? "R or B" : "nseq or S", FT_PRESET_SET_N,
         (long long)p.N, (long long)(decode ? p.R * p.B : p.nseq * p.S)},
        {"blocks", decode ? "R" : "nseq * NB", decode ? "R" : "nseq or NB", FT_PRESET_SET_BLOCKS,
         (long long)p.blocks, (long long)(decode ? p.R : p.nseq * p.NB)},
    };
    for (size_t i = 0; i < sizeof derived / sizeof derived[0]; i++)
        if ((p.user_set & derived[i].flag) && derived[i].set != derived[i].derived)
            return ft_cli_fail(FT_EXIT_USAGE,
                               "step: size %s is derived in a whole step: %s = %s = %lld here "
                               "(%s=%lld would give its stages different sizes); set %s instead",
                               derived[i].name, derived[i].name, derived[i].formula,
                               derived[i].derived, derived[i].name, derived[i].set,
                               derived[i].instead);
    if (so.scheme) {
        ft_attrs a;
        ft_attrs_default(&a);
        if (ft_attrs_set(&a, ft_op_find("loss", NULL), "scheme", so.scheme, &err))
            return ft_cli_fail(FT_EXIT_USAGE, "step: --scheme: %s", err.msg);
    }
    /* Everything the step reads is checked before anything is allocated or timed. */
    ft_profile *prof = NULL;
    if (profile) {
        code = ft_cli_read_profile("step", profile, &prof);
        if (code) return code;
        so.profile = prof;
    }
    ft_step s;
    ft_status st = ft_step_build(&s, &p, &so, &err);
    if (st) {
        ft_step_free(&s);
        ft_profile_free(prof);
        /* sizes that disagree where --set gave sizes: a bad value on the command line */
        return ft_cli_fail(st == FT_ESHAPE && args.nsets ? FT_EXIT_USAGE : ft_cli_exit_code(st),
                           "step: %s", err.msg);
    }
    struct sigaction sa = {0}, old;
    sa.sa_handler = on_sigint;
    sigaction(SIGINT, &sa, &old);
    so.stop = &stop_flag;
    so.progress = progress;
    st = ft_step_measure(&s, &so, &err);
    sigaction(SIGINT, &old, NULL);
    if (st) {
        code = interrupted ? 130 : ft_cli_fail(ft_cli_exit_code(st), "step: %s", err.msg);
        if (interrupted) fprintf(stderr, "flaretune: step: interrupted\n");
    } else if (args.json) {
        json_t *doc = ft_step_to_json(&s);
        if (doc) json_object_set_new(doc, "profile", profile ? json_string(profile) : json_null());
        if (!doc || json_dumpf(doc, stdout, JSON_INDENT(2) | JSON_REAL_PRECISION(17)) != 0)
            code = ft_cli_fail(FT_EXIT_FAIL, "step: could not write the JSON");
        else
            printf("\n");
        json_decref(doc);
    } else {
        print_human(&s, profile);
    }
    ft_step_free(&s);
    ft_profile_free(prof);
    return code;
}

const ft_cmd ft_cmd_step = {"step", "time one whole drafter step with a profile's tuned configs",
                            run, usage};
