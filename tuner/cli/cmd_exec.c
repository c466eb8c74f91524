/* cmd_exec.c: `flaretune exec`: run one op on .npy inputs (or a preset's random inputs) and
 * write its outputs as .npy files. This is how users check flaretune against their own
 * framework, so it is strict: every input is checked against the op before anything runs, and
 * the outputs are written all together or not at all. */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "core/clock.h"
#include "core/format.h"
#include "core/npy.h"
#include "core/paths.h"
#include "flaretune.h"
#include "op/backend.h"
#include "op/op.h"
#include "op/op_json.h"
#include "op/space.h"
#include "profiles/src/profile.h"

static void usage(FILE *f) {
    fprintf(f,
            "usage: flaretune exec OP --in DIR --out DIR [--attr NAME=VALUE]... [--backend B]\n"
            "       flaretune exec OP --preset P [--set NAME=VALUE]... [--seed N]\n"
            "                         [--save-inputs DIR] [--out DIR] [--attr NAME=VALUE]...\n"
            "       (both forms also take --config NAME=VALUE,..., --threads N, --profile P,\n"
            "       --timer T)\n\n"
            "Run one op and write every output as OUTDIR/NAME.npy (float32; `loss` as a 0-d\n"
            "array). Inputs are read from DIR/NAME.npy with the tensor names of `flaretune list\n"
            "ops` (float32; int32 for ctx_lens, anchors, labels, pos; uint8 for keep, mask), or\n"
            "generated at random for a preset. Shapes are inferred from the inputs and checked\n"
            "against each other. The backward runs with --attr backward=1 (reading df.npy or\n"
            "do.npy); `loss` always runs both. On any error nothing is written.\n\n"
            "  --in DIR            read the inputs from DIR\n"
            "  --out DIR           write the outputs to DIR (created if missing)\n"
            "  --preset P          random inputs at preset P (see `flaretune list presets`)\n"
            "  --set NAME=VALUE    change one size of the preset (e.g. --set L=8192)\n"
            "  --seed N            seed of the random inputs (default 1)\n"
            "  --save-inputs DIR   also write the generated inputs to DIR\n"
            "  --attr NAME=VALUE   set an attribute (see `flaretune list ops`)\n"
            "  --backend B         backend to run on (default auto; see `flaretune list "
            "backends`)\n"
            "  --config C          the backend's parameters, NAME=VALUE,... (default config\n"
            "                      otherwise; see `flaretune space OP`)\n"
            "  --threads N         the config's thread count\n"
            "  --timer T           the GPU clock: auto (CUPTI, else CUDA events), cupti or\n"
            "                      events (docs/cuda.md, \"Timing\")\n"
            "  --profile P         without --config: the profile's entry for the nearest shape\n"
            "                      on this device (as the C API runs it, docs/api.md)\n"
            "  --any-device        with --profile: entries of any device count (another\n"
            "                      machine, or this one with other CPUs), as the C API's\n"
            "                      FLARETUNE_ANY_DEVICE\n"
            "  --quiet             print nothing on success\n");
}

/* The files of one exec: the generated inputs (--save-inputs) and the outputs, written to
 * temporary files first and committed together, so they all appear or none change. */
typedef struct {
    char tmp[FT_MAX_TENSORS * 2][4096], path[FT_MAX_TENSORS * 2][4096];
    int n;
    int made[2][64], nmade[2]; /* the folders made for them (inputs, outputs): ft_dir_unmake */
} pending_files;

/* Write the tensors of c with the given roles (inputs or outputs) into dir as temporary files. */
static ft_status stage_tensors(const ft_call *c, int inputs, const char *dir, pending_files *pf,
                               ft_err *err) {
    ft_status s = ft_dir_make_noting(dir, pf->made[!inputs], 64, &pf->nmade[!inputs], err);
    for (int i = 0; i < c->op->ntensors && !s; i++) {
        const ft_tensor_spec *ts = &c->op->tensors[i];
        int is_in = ts->role == FT_ROLE_IN || ts->role == FT_ROLE_GRAD_IN;
        if (!ft_call_uses(c, i) || is_in != inputs) continue;
        if (snprintf(pf->path[pf->n], sizeof pf->path[pf->n], "%s/%s.npy", dir, ts->name) >=
            (int)sizeof pf->path[pf->n])
            return ft_err_set(err, FT_EINVAL, "%s: path too long", dir);
        s = ft_npy_save_tmp(pf->path[pf->n], c->t[i], pf->tmp[pf->n], sizeof pf->tmp[pf->n], err);
        if (!s) pf->n++;
    }
    return s;
}

static ft_status write_files(const ft_call *c, const char *save, const char *out, ft_err *err) {
    pending_files *pf = calloc(1, sizeof *pf);
    if (!pf) return ft_err_set(err, FT_ENOMEM, "out of memory");
    ft_status s = FT_OK;
    if (save) s = stage_tensors(c, 1, save, pf, err);
    if (!s && out) s = stage_tensors(c, 0, out, pf, err);
    const char *tmp[FT_MAX_TENSORS * 2], *path[FT_MAX_TENSORS * 2];
    for (int k = 0; k < pf->n; k++) {
        tmp[k] = pf->tmp[k];
        path[k] = pf->path[k];
    }
    if (!s)
        s = ft_file_commit_all(pf->n, tmp, path, err);
    else
        for (int k = 0; k < pf->n; k++)
            unlink(pf->tmp[k]);
    if (s) { /* nothing written: no folder made for it is left either */
        if (out) ft_dir_unmake(out, pf->made[1], pf->nmade[1]);
        if (save) ft_dir_unmake(save, pf->made[0], pf->nmade[0]);
    }
    free(pf);
    return s;
}

static ft_status load_inputs(ft_call *c, const char *dir, ft_err *err) {
    struct stat st;
    if (stat(dir, &st) != 0)
        return ft_err_set(err, FT_EIO, "%s: input directory %s: %s", c->op->name, dir,
                          strerror(errno));
    if (!S_ISDIR(st.st_mode))
        return ft_err_set(err, FT_EIO, "%s: input directory %s is not a directory", c->op->name,
                          dir);
    for (int i = 0; i < c->op->ntensors; i++) {
        const ft_tensor_spec *ts = &c->op->tensors[i];
        if (!ft_call_uses(c, i) || (ts->role != FT_ROLE_IN && ts->role != FT_ROLE_GRAD_IN))
            continue;
        char path[4096];
        if (snprintf(path, sizeof path, "%s/%s.npy", dir, ts->name) >= (int)sizeof path)
            return ft_err_set(err, FT_EINVAL, "%s: path too long", dir);
        if (access(path, F_OK) != 0)
            return ft_err_set(err, FT_EIO, "%s: missing input %s%s", c->op->name, path,
                              ts->role == FT_ROLE_GRAD_IN ? " (read because backward=1)" : "");
        ft_status s = ft_npy_load(path, &c->t[i], err);
        if (s) return s;
        /* Backends take float32; float64 files are narrowed here once. */
        if (c->t[i]->dtype == FT_F64 && ts->dtype == FT_F32) {
            ft_tensor *f32;
            if ((s = ft_tensor_convert(c->t[i], FT_F32, &f32, err))) return s;
            ft_tensor_free(c->t[i]);
            c->t[i] = f32;
        }
    }
    return FT_OK;
}

/* Why --profile gave this call the default config, or what running its entry changed (""
 * when nothing; profiles/src/profile.h). "" when the profile cannot be read again. */
static void profile_why(const char *profile, const ft_call *c, const ft_backend *be,
                        const char *device, char *buf, size_t n) {
    ft_profile *p = NULL;
    buf[0] = '\0';
    if (ft_profile_load(profile, &p, NULL)) return;
    ft_profile_config_why(p, c, be->name, device, be->space(c->op), NULL, NULL, buf, n);
    ft_profile_free(p);
}

static void print_summary(const ft_call *c, const char *backend, const char *cfg,
                          const char *cfg_from, const char *why, double seconds) {
    char dims[256], t[32];
    ft_call_dims_str(c, dims, sizeof dims);
    printf("%s on %s: %s  (%s, one cold call)\n", c->op->name, backend, dims,
           ft_fmt_time(seconds, 0, t, sizeof t));
    if (cfg[0])
        printf("  config %s%s%s%s%s%s\n", cfg, strcmp(cfg_from, "config") ? "  from " : "",
               strcmp(cfg_from, "config") ? cfg_from : "", why[0] ? " (" : "", why,
               why[0] ? ")" : "");
    printf("  %-8s %-22s %12s %12s %12s\n", "output", "shape", "rms", "min", "max");
    for (int i = 0; i < c->op->ntensors; i++) {
        const ft_tensor_spec *ts = &c->op->tensors[i];
        if (!ft_call_uses(c, i) || (ts->role != FT_ROLE_OUT && ts->role != FT_ROLE_GRAD_OUT))
            continue;
        const ft_tensor *x = c->t[i];
        int64_t n = ft_tensor_numel(x), bad = 0;
        double ss = 0, lo = INFINITY, hi = -INFINITY;
        for (int64_t k = 0; k < n; k++) {
            double v = ft_tensor_get(x, k);
            if (!isfinite(v)) {
                bad++;
                continue;
            }
            ss += v * v;
            lo = v < lo ? v : lo;
            hi = v > hi ? v : hi;
        }
        char shape[64];
        ft_shape_str(x->rank, x->shape, shape, sizeof shape);
        if (n > bad)
            printf("  %-8s %-22s %12.5g %12.5g %12.5g", ts->name, shape,
                   sqrt(ss / (double)(n - bad)), lo, hi);
        else /* no finite element (an empty output): nothing to summarise */
            printf("  %-8s %-22s %12s %12s %12s", ts->name, shape, "-", "-", "-");
        if (bad) printf("  (%lld non-finite)", (long long)bad);
        printf("\n");
    }
}

/* The command that runs the saved inputs again: the attributes a preset fixed (such as the
 * loss block size) are not in the .npy files, so spell out every non-default one. */
static void print_replay(const ft_call *c, const char *dir) {
    ft_attrs def;
    ft_attrs_default(&def);
    printf("replay: flaretune exec %s --in %s --out OUTDIR", c->op->name, dir);
    for (int a = 0; c->op->attrs[a]; a++) {
        char v[64], d[64];
        ft_attrs_format(&c->attrs, c->op->attrs[a], v, sizeof v);
        ft_attrs_format(&def, c->op->attrs[a], d, sizeof d);
        if (strcmp(v, d) != 0) printf(" --attr %s=%s", c->op->attrs[a], v);
    }
    printf("\n");
}

/* The command line of one exec. */
typedef struct {
    ft_cli_problem prob;
    const char *op, *in, *out, *save, *profile;
    int quiet, any_device;
} exec_args;

/* The options of `exec`: the codes of its own, and the table getopt_long reads. */
enum { O_IN = 1, O_OUT, O_SAVE, O_QUIET, O_PROFILE, O_ANY_DEVICE };
static const struct option opts[] = {
    FT_CLI_PROBLEM_OPTIONS,
    FT_CLI_ARG("in", O_IN),
    FT_CLI_ARG("out", O_OUT),
    FT_CLI_ARG("save-inputs", O_SAVE),
    FT_CLI_FLAG("quiet", O_QUIET),
    FT_CLI_ARG("profile", O_PROFILE),
    FT_CLI_FLAG("any-device", O_ANY_DEVICE),
    FT_CLI_END,
};

/* One option of exec's own (not a problem option). Returns an exit code, 0 when taken. */
static int exec_opt(void *ctx, int o, const char *arg) {
    exec_args *a = ctx;
    switch (o) {
    case O_IN:
    case O_OUT:
    case O_SAVE: {
        const char *name = o == O_IN ? "--in" : o == O_OUT ? "--out" : "--save-inputs";
        /* An empty DIR would put the files at the root ("/q.npy"). */
        if (!arg[0])
            return ft_cli_fail(FT_EXIT_USAGE, "exec: %s expects a directory, got ''", name);
        if (strlen(arg) > 3000)
            return ft_cli_fail(FT_EXIT_USAGE, "exec: %s: the directory's path is too long", name);
        *(o == O_IN ? &a->in : o == O_OUT ? &a->out : &a->save) = arg;
        break;
    }
    case O_QUIET: a->quiet = 1; break;
    case O_PROFILE: a->profile = arg; break;
    case O_ANY_DEVICE: a->any_device = 1; break;
    }
    return FT_EXIT_OK;
}

static int exec_parse(int argc, char **argv, exec_args *a) {
    memset(a, 0, sizeof *a);
    int code = ft_cli_parse_op("exec", "see `flaretune list ops`", argc, argv, opts, &a->prob,
                               exec_opt, a, &a->op);
    if (code) return code;
    if (!!a->in == !!a->prob.preset)
        return ft_cli_fail(FT_EXIT_USAGE, "exec: give exactly one of --in DIR or --preset P");
    if (a->in && !a->out)
        return ft_cli_fail(FT_EXIT_USAGE, "exec: --out DIR is required with --in");
    if (a->in && (a->prob.nsets || a->save || a->prob.seed_given))
        return ft_cli_fail(FT_EXIT_USAGE,
                           "exec: --set, --seed and --save-inputs go with --preset (the inputs "
                           "are read from --in)");
    if (a->any_device && !a->profile)
        return ft_cli_fail(FT_EXIT_USAGE, "exec: --any-device goes with --profile P");
    if (a->profile && (a->prob.config || a->prob.threads))
        return ft_cli_fail(FT_EXIT_USAGE,
                           "exec: --%s and --profile both choose the config (the profile's "
                           "would be left unused): give one",
                           a->prob.config ? "config" : "threads");
    return FT_EXIT_OK;
}

/* An output file of c in out that is one of its input files in in (a link to it, or the same
 * folder): refused before the op runs, as it would be replaced. Returns an exit code. */
static int check_outputs_not_inputs(const ft_call *c, const char *in, const char *out) {
    for (int o = 0; o < c->op->ntensors; o++) {
        const ft_tensor_spec *os = &c->op->tensors[o];
        if (!ft_call_uses(c, o) || os->role == FT_ROLE_IN || os->role == FT_ROLE_GRAD_IN) continue;
        char op[4096], ip[4096];
        snprintf(op, sizeof op, "%s/%s.npy", out, os->name);
        for (int i = 0; i < c->op->ntensors; i++) {
            const ft_tensor_spec *is = &c->op->tensors[i];
            if (!ft_call_uses(c, i) || (is->role != FT_ROLE_IN && is->role != FT_ROLE_GRAD_IN))
                continue;
            snprintf(ip, sizeof ip, "%s/%s.npy", in, is->name);
            if (ft_same_file(op, ip))
                return ft_cli_fail(FT_EXIT_USAGE,
                                   "exec: the output %s is the input %s: it would be replaced "
                                   "(nothing run)",
                                   op, ip);
        }
    }
    return FT_EXIT_OK;
}

/* The inputs from --in. Everything that goes wrong reading them (missing, malformed, of the
 * wrong dtype or shape, values out of range, sizes that disagree) is about the input files, not
 * the command line, whatever status the library gives it: exit 1 (docs/usage.md). On failure the call
 * is freed. */
static int exec_read_inputs(ft_call *c, const char *dir) {
    ft_err err = {0};
    ft_call_resolve_backward(c);
    ft_status s = load_inputs(c, dir, &err);
    if (!s) s = ft_call_bind(c, &err);
    int code = FT_EXIT_OK;
    if (s)
        code = ft_cli_fail(FT_EXIT_FAIL, "%s", err.msg);
    else if (ft_call_alloc(c, 0, 1, &err))
        code = ft_cli_fail_err(&err);
    if (code) ft_call_free(c);
    return code;
}

/* The exit code of an API status (docs/usage.md's exit codes). */
static int api_exit_code(flaretune_status st) {
    switch (st) {
    case FLARETUNE_OK: return FT_EXIT_OK;
    case FLARETUNE_EINVAL:
    case FLARETUNE_EUNSUPPORTED: return FT_EXIT_USAGE;
    case FLARETUNE_ENODEV: return FT_EXIT_NODEV;
    default: return FT_EXIT_FAIL;
    }
}

static flaretune_dtype api_dtype(ft_dtype dt) {
    return dt == FT_I32 ? FLARETUNE_I32 : dt == FT_U8 ? FLARETUNE_U8 : FLARETUNE_F32;
}

/* Run the call through the C API (flaretune.h), as another program would: a context on the
 * backend, the profile, every tensor of the call bound in place, the op by name with its
 * attributes and (when given) the config. */
static flaretune_status api_run(const exec_args *a, ft_cli_setup *su, flaretune_context *ctx) {
    flaretune_status st = FLARETUNE_OK;
    if (a->profile)
        st = flaretune_load_profile(ctx, a->profile, a->any_device ? FLARETUNE_ANY_DEVICE : 0);
    const ft_call *c = &su->c;
    for (int i = 0; i < c->op->ntensors && !st; i++) {
        const ft_tensor *t = c->t[i];
        if (!ft_call_uses(c, i) || !t) continue;
        st = flaretune_bind(ctx, c->op->tensors[i].name, t->data, api_dtype(t->dtype), t->rank,
                            t->shape, FLARETUNE_HOST);
    }
    char attrs[1024], cfg[512] = "";
    ft_attrs_format_all(&c->attrs, c->op, attrs, sizeof attrs);
    int explicit_cfg = a->prob.config || a->prob.threads || !a->profile;
    if (explicit_cfg) ft_config_format(su->be->space(c->op), &su->cfg, cfg, sizeof cfg);
    if (!st) st = flaretune_run(ctx, c->op->name, attrs, explicit_cfg ? cfg : NULL);
    return st;
}

static int run(int argc, char **argv) {
    exec_args a;
    ft_cli_setup su;
    int code = exec_parse(argc, argv, &a);
    if (code) return code;
    if ((code = ft_cli_setup_problem(&a.prob, a.op, 0, &su))) return code;
    flaretune_context *ctx;
    flaretune_status st = flaretune_create(&ctx, su.be->name);
    if (st) {
        code = ft_cli_fail(api_exit_code(st), "%s", ctx ? flaretune_message(ctx) : "out of memory");
        flaretune_destroy(ctx);
        return code;
    }
    if (a.in) {
        code = exec_read_inputs(&su.c, a.in);
        if (!code && (code = check_outputs_not_inputs(&su.c, a.in, a.out))) ft_call_free(&su.c);
    } else {
        code = ft_cli_setup_inputs(&a.prob, &su);
    }
    if (code) {
        flaretune_destroy(ctx);
        return code;
    }

    double t0 = ft_now_s();
    st = api_run(&a, &su, ctx);
    double t1 = ft_now_s();
    ft_err err = {0};
    if (st)
        code = ft_cli_fail(api_exit_code(st), "%s", flaretune_message(ctx));
    else if ((a.save || a.out) && write_files(&su.c, a.save, a.out, &err))
        code = ft_cli_fail_err(&err);
    else if (!a.quiet) {
        char why[768] = "";
        if (a.profile && strcmp(flaretune_last_config_source(ctx), "config") != 0)
            profile_why(a.profile, &su.c, su.be, a.any_device ? NULL : flaretune_device(ctx), why,
                        sizeof why);
        print_summary(&su.c, su.be->name, flaretune_last_config(ctx),
                      flaretune_last_config_source(ctx), why, t1 - t0);
        if (a.save) print_replay(&su.c, a.save);
    }
    flaretune_destroy(ctx);
    ft_call_free(&su.c);
    return code;
}

const ft_cmd ft_cmd_exec = {"exec", "run one op on .npy inputs and write its outputs", run, usage};
