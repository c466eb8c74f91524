/* cli_args.c: the option loop every command runs, the problem options shared by exec, bench and
 * tune, and the set-up of one op from them, so every command reads, checks and reports them alike
 * (see cli.h). */
#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "kernels/registry.h"

void ft_cli_problem_init(ft_cli_problem *p) {
    memset(p, 0, sizeof *p);
    p->backend = "auto";
    p->seed = 1;
}

int ft_cli_whole(const char *arg, long lo, long hi, long *out) {
    const char *digits = arg[0] == '-' ? arg + 1 : arg;
    if (!isdigit((unsigned char)*digits)) return 0;
    char *end;
    errno = 0;
    long v = strtol(arg, &end, 10);
    if (*end || errno || v < lo || v > hi) return 0;
    *out = v;
    return 1;
}

int ft_cli_seed(const char *arg, unsigned long long *out) {
    if (!isdigit((unsigned char)*arg)) return 0;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(arg, &end, 10);
    if (*end || errno) return 0;
    *out = v;
    return 1;
}

const char *ft_cli_named_before(const char *const *list, int n, const char *arg) {
    size_t k = strcspn(arg, "=");
    if (!arg[k]) return NULL; /* no NAME=VALUE: said as such where it is read */
    for (int i = 0; i < n; i++)
        if (strcspn(list[i], "=") == k && strncmp(list[i], arg, k) == 0) return list[i];
    return NULL;
}

/* NAME=VALUE of --OPT into list, unless an earlier one names NAME (one line, -1). */
static int add_named(const char **list, int *n, const char *opt, const char *arg, const char *cmd) {
    const char *before = ft_cli_named_before(list, *n, arg);
    if (before) {
        ft_cli_fail(FT_EXIT_USAGE, "%s: --%s %s and --%s %s name one %s: give it once", cmd, opt,
                    before, opt, arg, strcmp(opt, "set") ? "attribute" : "size");
        return -1;
    }
    list[(*n)++] = arg;
    return 1;
}

int ft_cli_problem_opt(ft_cli_problem *p, int opt, const char *arg, const char *cmd) {
    switch (opt) {
    case FT_OPT_PRESET: p->preset = arg; return 1;
    case FT_OPT_SET:
        if (p->nsets == FT_CLI_MAX_LIST) break;
        return add_named(p->sets, &p->nsets, "set", arg, cmd);
    case FT_OPT_ATTR:
        if (p->nattrs == FT_CLI_MAX_LIST) break;
        return add_named(p->attrs, &p->nattrs, "attr", arg, cmd);
    case FT_OPT_BACKEND: p->backend = arg; return 1;
    case FT_OPT_CONFIG: p->config = arg; return 1;
    case FT_OPT_TIMER: {
        ft_err err = {0};
        if (ft_backend_prefer_timer(arg, &err)) {
            ft_cli_fail(FT_EXIT_USAGE, "%s: --timer: %s", cmd, err.msg);
            return -1;
        }
        return 1;
    }
    case FT_OPT_THREADS: {
        long v;
        if (!ft_cli_whole(arg, 1, 4096, &v)) {
            ft_cli_fail(FT_EXIT_USAGE, "%s: --threads expects a positive integer, got '%s'", cmd,
                        arg);
            return -1;
        }
        p->threads = (int)v;
        return 1;
    }
    case FT_OPT_SEED: {
        unsigned long long seed;
        if (!ft_cli_seed(arg, &seed)) {
            ft_cli_fail(FT_EXIT_USAGE, "%s: --seed expects a non-negative integer, got '%s'", cmd,
                        arg);
            return -1;
        }
        p->seed = seed;
        p->seed_given = 1;
        return 1;
    }
    default: return 0;
    }
    ft_cli_fail(FT_EXIT_USAGE, "%s: too many repeated options", cmd);
    return -1;
}

int ft_cli_apply_attrs(const ft_cli_problem *p, ft_call *c) {
    for (int i = 0; i < p->nattrs; i++) {
        const char *a = p->attrs[i], *eq = strchr(a, '=');
        if (!eq || eq == a)
            return ft_cli_fail(FT_EXIT_USAGE, "--attr expects NAME=VALUE, got '%s'", a);
        char name[64];
        snprintf(name, sizeof name, "%.*s", (int)(eq - a), a);
        ft_err err = {0};
        if (ft_attrs_set(&c->attrs, c->op, name, eq + 1, &err)) return ft_cli_fail_err(&err);
    }
    return FT_EXIT_OK;
}

/* arg read as a number into *v: whether all of it is one, and above 0. */
static int positive(const char *arg, double *v) {
    char *end;
    *v = strtod(arg, &end);
    return !*end && *v > 0;
}

int ft_cli_measure_opt(ft_measure_opts *mo, int opt, const char *arg, const char *cmd) {
    switch (opt) {
    case FT_OPT_MAX_TIME:
        if (!positive(arg, &mo->max_time_s))
            return ft_cli_fail(FT_EXIT_USAGE, "%s: --max-time expects seconds > 0", cmd);
        if (mo->min_time_s > mo->max_time_s) mo->min_time_s = mo->max_time_s;
        break;
    case FT_OPT_NOISE:
        if (!positive(arg, &mo->max_noise))
            return ft_cli_fail(FT_EXIT_USAGE, "%s: --noise expects a fraction > 0", cmd);
        break;
    case FT_OPT_MAX_LOST:
        if (!ft_measure_parse_max_lost(arg, &mo->max_lost))
            return ft_cli_fail(
                FT_EXIT_USAGE,
                "%s: --max-lost expects a share of a sample in (0, 1] or 'off', got '%s'", cmd,
                arg);
        break;
    }
    return FT_EXIT_OK;
}

const char *ft_cli_default_preset(const ft_op *op) {
    return strcmp(op->name, "attention.decode") == 0 ? "small.dflare.decode" : "small.dflare.train";
}

int ft_cli_make_preset(const ft_cli_problem *p, const char *fallback, ft_preset *out) {
    const char *name = p->preset ? p->preset : fallback;
    const ft_preset *base = ft_preset_find(name);
    if (!base)
        return ft_cli_fail(FT_EXIT_USAGE, "unknown preset '%s' (see `flaretune list presets`)",
                           name);
    *out = *base;
    ft_err err = {0};
    for (int i = 0; i < p->nsets; i++)
        if (ft_preset_set(out, p->sets[i], &err)) return ft_cli_fail_err(&err);
    if (ft_preset_check(out, &err)) return ft_cli_fail_err(&err);
    return FT_EXIT_OK;
}

int ft_cli_make_config(const ft_cli_problem *p, const ft_backend *be, const ft_op *op,
                       ft_config *cfg) {
    const ft_space *s = be->space(op);
    ft_err err = {0};
    if (ft_config_parse(s, p->config ? p->config : "", cfg, &err))
        return ft_cli_fail(FT_EXIT_USAGE, "%s on %s: %s", op->name, be->name, err.msg);
    if (p->threads) {
        int i = ft_space_param(s, "threads");
        if (i < 0)
            return ft_cli_fail(FT_EXIT_USAGE, "%s on %s has no threads parameter", op->name,
                               be->name);
        int explicit_cfg = p->config && strstr(p->config, "threads=") != NULL;
        if (explicit_cfg && cfg->v[i] != p->threads)
            return ft_cli_fail(FT_EXIT_USAGE, "--threads %d disagrees with --config threads=%d",
                               p->threads, cfg->v[i]);
        char text[32];
        snprintf(text, sizeof text, "threads=%d", p->threads);
        ft_config one;
        if (ft_config_parse(s, text, &one, &err))
            return ft_cli_fail(FT_EXIT_USAGE, "--threads: %s", err.msg);
        cfg->v[i] = p->threads;
    }
    return FT_EXIT_OK;
}

/* The option of ft_cli_getopt's last result (getopt_long's own state is global too). */
static struct {
    char name[128];
    int takes_none;   /* '?': a known long option written with =VALUE, which it does not take */
    int repeated;     /* '?': an option of one value given again */
    const char *form; /* the command's form being parsed, said after its name ("" none) */
    int seen[64], nseen; /* the options of one value given so far in this parse */
} last = {"?", 0, 0, "", {0}, 0};

/* Whether option o (with a value) was given before in this parse; else notes it. An option of
 * one value is refused the second time: the last one silently taken would run something else
 * than the command line says. repeats: a list option (FT_CLI_LIST), which may come again. */
static int given_before(int o, int repeats) {
    if (repeats) return 0;
    for (int i = 0; i < last.nseen; i++)
        if (last.seen[i] == o) return 1;
    if (last.nseen < 64) last.seen[last.nseen++] = o;
    return 0;
}

/* Whether the short option c is a list option: the table has a list row of the same code. */
static int short_repeats(int c, const struct option *opts) {
    for (int i = 0; opts && opts[i].name; i++)
        if (opts[i].val == (c | FT_CLI_REPEATS)) return 1;
    return 0;
}

void ft_cli_option_form(const char *form) { last.form = form ? form : ""; }

/* Whether word is a cluster of short options (-xy) holding c. */
static int in_cluster(const char *word, int c) {
    return word && word[0] == '-' && word[1] && word[1] != '-' && strchr(word + 1, c);
}

/* Names the option result o came from. getopt_long leaves optind past the words it used, but
 * inside a cluster (-xy) on the cluster itself: the word before optind is then an earlier one. */
static void note_option(int argc, char **argv, const struct option *opts, int o, int longindex) {
    const char *prev = optind > 0 && optind <= argc ? argv[optind - 1] : "";
    const char *cur = optind < argc ? argv[optind] : NULL;
    const int bad = o == '?' || o == ':', c = bad ? optopt : o;
    const int shortc = c > 0 && c < 128 && isgraph(c);
    last.takes_none = last.repeated = 0;
    if (longindex >= 0 && !bad) {
        snprintf(last.name, sizeof last.name, "--%s", opts[longindex].name);
    } else if (bad && shortc && in_cluster(cur, c)) {
        snprintf(last.name, sizeof last.name, "-%c", c);
    } else if (strncmp(prev, "--", 2) == 0) {
        const size_t n = strcspn(prev, "=");
        snprintf(last.name, sizeof last.name, "%.*s", (int)(n < 100 ? n : 100), prev);
        last.takes_none = o == '?' && optopt != 0 && prev[n] == '=';
    } else if (shortc) {
        snprintf(last.name, sizeof last.name, "-%c", c);
    } else {
        snprintf(last.name, sizeof last.name, "%.100s", prev);
    }
}

int ft_cli_getopt(int argc, char **argv, const char *shortopts, const struct option *opts) {
    char spec[64];
    snprintf(spec, sizeof spec, "%s%s", shortopts[0] == ':' ? "" : ":", shortopts);
    int longindex = -1;
    opterr = 0;
    if (optind == 0) last.nseen = 0; /* a parse begins */
    int o = getopt_long(argc, argv, spec, opts, &longindex);
    if (o == -1) return o;
    note_option(argc, argv, opts, o, longindex);
    const int repeats = (o & FT_CLI_REPEATS) || (longindex < 0 && short_repeats(o, opts));
    o &= ~FT_CLI_REPEATS;
    if (o != '?' && o != ':' && optarg && !*optarg) return ':';
    if (o != '?' && o != ':' && optarg && given_before(o, repeats)) {
        last.repeated = 1;
        return '?';
    }
    return o;
}

const char *ft_cli_option_written(void) { return last.name; }

int ft_cli_bad_option(const char *cmd, int opt) {
    if (opt == ':')
        return ft_cli_fail(FT_EXIT_USAGE, "%s: option '%s' needs a value", cmd, last.name);
    if (last.takes_none)
        return ft_cli_fail(FT_EXIT_USAGE, "%s: option '%s' takes no value", cmd, last.name);
    if (last.repeated)
        return ft_cli_fail(FT_EXIT_USAGE, "%s: option '%s' is given twice: give it once", cmd,
                           last.name);
    return ft_cli_fail(FT_EXIT_USAGE, "%s%s: unknown option '%s' (see `flaretune %s --help`)", cmd,
                       last.form, last.name, cmd);
}

int ft_cli_parse_options(int argc, char **argv, const char *shortopts, const struct option *opts,
                         ft_cli_opt_fn *own, void *ctx) {
    int o, code = FT_EXIT_OK;
    optind = 0;
    while (!code && (o = ft_cli_getopt(argc, argv, shortopts, opts)) != -1)
        code = own(ctx, o, optarg);
    return code;
}

/* What ft_cli_parse_shared hands each option to. */
typedef struct {
    const char *cmd;
    ft_cli_shared_fn *take;
    void *shared;
    ft_cli_opt_fn *own;
    void *ctx;
} shared_parse;

static int shared_or_own(void *ctx, int opt, const char *arg) {
    shared_parse *sp = ctx;
    int taken = 0, code = sp->take(sp->cmd, sp->shared, opt, arg, &taken);
    return code || taken ? code : sp->own(sp->ctx, opt, arg);
}

int ft_cli_parse_shared(const char *cmd, int argc, char **argv, const struct option *opts,
                        ft_cli_shared_fn *take, void *shared, ft_cli_opt_fn *own, void *ctx) {
    shared_parse sp = {cmd, take, shared, own, ctx};
    return ft_cli_parse_options(argc, argv, "", opts, shared_or_own, &sp);
}

static int problem_take(const char *cmd, void *shared, int opt, const char *arg, int *taken) {
    if (opt == '?' || opt == ':') {
        *taken = 1;
        return ft_cli_bad_option(cmd, opt);
    }
    *taken = ft_cli_problem_opt(shared, opt, arg, cmd);
    return *taken < 0 ? FT_EXIT_USAGE : FT_EXIT_OK;
}

int ft_cli_parse_problem(const char *cmd, int argc, char **argv, const struct option *opts,
                         ft_cli_problem *p, ft_cli_opt_fn *own, void *ctx) {
    return ft_cli_parse_shared(cmd, argc, argv, opts, problem_take, p, own, ctx);
}

int ft_cli_one_operand(const char *cmd, const char *hint, int argc, char **argv) {
    if (optind >= argc) return ft_cli_fail(FT_EXIT_USAGE, "%s: which op? (%s)", cmd, hint);
    if (optind + 1 < argc)
        return ft_cli_fail(FT_EXIT_USAGE, "%s: unexpected argument '%s'", cmd, argv[optind + 1]);
    return FT_EXIT_OK;
}

int ft_cli_parse_op(const char *cmd, const char *hint, int argc, char **argv,
                    const struct option *opts, ft_cli_problem *p, ft_cli_opt_fn *own, void *ctx,
                    const char **op) {
    ft_cli_problem_init(p);
    int code = ft_cli_parse_problem(cmd, argc, argv, opts, p, own, ctx);
    if (!code) code = ft_cli_one_operand(cmd, hint, argc, argv);
    if (!code) *op = argv[optind];
    return code;
}

int ft_cli_setup_problem(const ft_cli_problem *p, const char *op_name, int with_preset,
                         ft_cli_setup *s) {
    memset(s, 0, sizeof *s);
    ft_err err = {0};
    s->op = ft_op_find(op_name, &err);
    if (!s->op) return ft_cli_fail_err(&err);
    ft_call_init(&s->c, s->op);
    int code;
    if ((code = ft_cli_apply_attrs(p, &s->c))) return code;
    if (ft_backend_resolve(p->backend, s->op, &s->be, &err)) return ft_cli_fail_err(&err);
    if (ft_backend_check_attrs(s->be, &s->c.attrs, &err)) return ft_cli_fail_err(&err);
    if (with_preset) {
        if ((code = ft_cli_make_preset(p, ft_cli_default_preset(s->op), &s->preset))) return code;
        s->has_preset = 1;
    }
    return ft_cli_make_config(p, s->be, s->op, &s->cfg);
}

/* Whether the op's sizes at the preset (with every --set) move when the i-th --set takes another
 * value (twice it, or one more): a size the op does not read moves none of them. */
static int set_is_read(const ft_cli_problem *p, int i, const ft_call *c) {
    const char *a = p->sets[i], *eq = strchr(a, '=');
    const ft_preset *base = ft_preset_find(p->preset ? p->preset : ft_cli_default_preset(c->op));
    char *end;
    const long long v = eq ? strtoll(eq + 1, &end, 10) : 0;
    /* ragged shapes the data (the context lengths), not the sizes: taken as read, as is
     * anything there is nothing to judge by */
    if (!eq || !base || *end || !strncmp(a, "ragged=", 7)) return 1;
    char attrs[1024], other_attrs[1024];
    ft_attrs_format_all(&c->attrs, c->op, attrs, sizeof attrs);
    const long long others[] = {2 * v, v + 1, v - 1};
    int judged = 0; /* alternatives the preset takes: none (2^31 - 1 has no larger one that is a
                       size, 1 no smaller) is nothing to judge by */
    for (int k = 0; k < 3; k++) {
        char other[96];
        snprintf(other, sizeof other, "%.*s=%lld", (int)(eq - a), a, others[k]);
        ft_preset pre = *base;
        int ok = 1;
        for (int j = 0; j < p->nsets && ok; j++)
            ok = ft_preset_set(&pre, j == i ? other : p->sets[j], NULL) == FT_OK;
        if (!ok || ft_preset_check(&pre, NULL)) continue;
        judged++;
        ft_call tmp;
        ft_call_init(&tmp, c->op);
        tmp.attrs = c->attrs;
        int moved = c->op->from_preset(&tmp, &pre, NULL) != FT_OK ||
                    memcmp(tmp.dim, c->dim, sizeof tmp.dim) != 0;
        ft_attrs_format_all(&tmp.attrs, c->op, other_attrs, sizeof other_attrs);
        moved |= strcmp(attrs, other_attrs) != 0; /* a size an attribute follows (window) */
        ft_call_free(&tmp);
        if (moved) return 1;
    }
    return judged == 0;
}

int ft_cli_setup_inputs(const ft_cli_problem *p, ft_cli_setup *s) {
    int code;
    if (!s->has_preset) {
        if ((code = ft_cli_make_preset(p, ft_cli_default_preset(s->op), &s->preset))) {
            ft_call_free(&s->c);
            return code;
        }
        s->has_preset = 1;
    }
    ft_err err = {0};
    ft_status st = ft_call_from_preset(&s->c, &s->preset, p->seed, &err);
    if (st) {
        ft_call_free(&s->c);
        /* sizes that disagree (Hq not a multiple of Hkv, an odd dh) where --set gave sizes are
         * a bad value on the command line */
        return st == FT_ESHAPE && p->nsets > 0 ? ft_cli_fail(FT_EXIT_USAGE, "%s", err.msg)
                                               : ft_cli_fail_err(&err);
    }
    if ((code = ft_cli_check_preset_attrs(p, s->op, &s->preset))) {
        ft_call_free(&s->c);
        return code;
    }
    if ((code = ft_cli_check_sets_read(p, &s->c))) ft_call_free(&s->c);
    return code;
}

int ft_cli_check_sets_read(const ft_cli_problem *p, const ft_call *c) {
    for (int i = 0; i < p->nsets; i++)
        if (!set_is_read(p, i, c)) {
            char dims[160];
            ft_call_dims_str(c, dims, sizeof dims);
            return ft_cli_fail(FT_EXIT_USAGE,
                               "--set %s: %s does not read that size of the preset (its sizes "
                               "here: %s)",
                               p->sets[i], c->op->name, dims);
        }
    return FT_EXIT_OK;
}

int ft_cli_check_preset_attrs(const ft_cli_problem *p, const ft_op *op, const ft_preset *preset) {
    ft_call c;
    ft_call_init(&c, op);
    for (int i = 0; i < p->nattrs; i++) { /* checked already: a bad one is no concern here */
        const char *a = p->attrs[i], *eq = strchr(a, '=');
        char name[64];
        snprintf(name, sizeof name, "%.*s", eq ? (int)(eq - a) : 0, a);
        if (eq) (void)ft_attrs_set(&c.attrs, op, name, eq + 1, NULL);
    }
    if (op->from_preset(&c, preset, NULL)) return FT_EXIT_OK; /* said when the call is made */
    for (int i = 0; i < p->nattrs; i++) {
        const char *a = p->attrs[i], *eq = strchr(a, '=');
        if (!eq) continue;
        char name[64], want[64], got[64];
        snprintf(name, sizeof name, "%.*s", (int)(eq - a), a);
        ft_attrs given;
        ft_attrs_default(&given);
        if (ft_attrs_set(&given, op, name, eq + 1, NULL)) continue;
        ft_attrs_format(&given, name, want, sizeof want);
        ft_attrs_format(&c.attrs, name, got, sizeof got);
        if (strcmp(want, got) != 0)
            return ft_cli_fail(FT_EXIT_USAGE,
                               "--attr %s: the preset %s sets %s=%s as one of its sizes: give "
                               "--set %s=%s",
                               a, preset->name, name, got, name, eq + 1);
    }
    return FT_EXIT_OK;
}

int ft_cli_arch_ok(const char *a) {
    if (strncmp(a, "sm_", 3) != 0) return 0;
    const char *p = a + 3;
    int digits = 0;
    while (*p >= '0' && *p <= '9')
        p++, digits++;
    if (*p == 'a' || *p == 'f') p++;
    return digits >= 2 && digits <= 3 && *p == '\0';
}
