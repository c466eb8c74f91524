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
#include "flaretune/backend.h"
#include "flaretune/clock.h"
#include "flaretune/format.h"
#include "flaretune/npy.h"
#include "flaretune/op.h"

static void usage(FILE *f) {
    fprintf(f,
            "usage: flaretune exec OP --in DIR --out DIR [--attr NAME=VALUE]... [--backend B]\n"
            "       flaretune exec OP --preset P [--set NAME=VALUE]... [--seed N]\n"
            "                         [--save-inputs DIR] [--out DIR] [--attr NAME=VALUE]...\n\n"
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
            "  --quiet             print nothing on success\n");
}

/* Create dir (and its parents) if missing. */
static ft_status make_dirs(const char *dir, ft_err *err) {
    char path[4096];
    if (snprintf(path, sizeof path, "%s", dir) >= (int)sizeof path)
        return ft_err_set(err, FT_EINVAL, "%s: path too long", dir);
    for (char *p = path + 1;; p++) {
        if (*p == '/' || *p == '\0') {
            char saved = *p;
            *p = '\0';
            if (mkdir(path, 0777) != 0 && errno != EEXIST)
                return ft_err_set(err, FT_EIO, "%s: cannot create directory: %s", path,
                                  strerror(errno));
            *p = saved;
            if (!saved) break;
        }
    }
    struct stat st;
    if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode))
        return ft_err_set(err, FT_EIO, "%s: not a directory", dir);
    return FT_OK;
}

/* Write the tensors of c with the given roles into dir, all or nothing. */
static ft_status write_tensors(const ft_call *c, int inputs, const char *dir, ft_err *err) {
    ft_status s = make_dirs(dir, err);
    if (s) return s;
    char tmp[FT_MAX_TENSORS][4096], path[FT_MAX_TENSORS][4096];
    int n = 0;
    for (int i = 0; i < c->op->ntensors && !s; i++) {
        const ft_tensor_spec *ts = &c->op->tensors[i];
        int is_in = ts->role == FT_ROLE_IN || ts->role == FT_ROLE_GRAD_IN;
        if (!ft_call_uses(c, i) || is_in != inputs) continue;
        snprintf(path[n], sizeof path[n], "%s/%s.npy", dir, ts->name);
        s = ft_npy_save_tmp(path[n], c->t[i], tmp[n], sizeof tmp[n], err);
        if (!s) n++;
    }
    for (int k = 0; k < n && !s; k++)
        if (rename(tmp[k], path[k]) != 0)
            s = ft_err_set(err, FT_EIO, "%s: cannot rename into place: %s", path[k],
                           strerror(errno));
    if (s)
        for (int k = 0; k < n; k++)
            unlink(tmp[k]);
    return s;
}

static ft_status load_inputs(ft_call *c, const char *dir, ft_err *err) {
    for (int i = 0; i < c->op->ntensors; i++) {
        const ft_tensor_spec *ts = &c->op->tensors[i];
        if (!ft_call_uses(c, i) || (ts->role != FT_ROLE_IN && ts->role != FT_ROLE_GRAD_IN))
            continue;
        char path[4096];
        snprintf(path, sizeof path, "%s/%s.npy", dir, ts->name);
        if (access(path, F_OK) != 0)
            return ft_err_set(err, FT_EINVAL, "%s: missing input %s%s", c->op->name, path,
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

static void print_summary(const ft_call *c, const char *backend, double seconds) {
    char dims[256], t[32];
    ft_call_dims_str(c, dims, sizeof dims);
    printf("%s on %s: %s  (%s)\n", c->op->name, backend, dims,
           ft_fmt_time(seconds, 0, t, sizeof t));
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
        printf("  %-8s %-22s %12.5g %12.5g %12.5g", ts->name, shape,
               n > bad ? sqrt(ss / (double)(n - bad)) : 0.0, lo, hi);
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

static int run(int argc, char **argv) {
    enum { O_IN = 256, O_OUT, O_PRESET, O_SET, O_SEED, O_SAVE, O_ATTR, O_BACKEND, O_QUIET };
    static const struct option opts[] = {
        {"in", required_argument, NULL, O_IN},
        {"out", required_argument, NULL, O_OUT},
        {"preset", required_argument, NULL, O_PRESET},
        {"set", required_argument, NULL, O_SET},
        {"seed", required_argument, NULL, O_SEED},
        {"save-inputs", required_argument, NULL, O_SAVE},
        {"attr", required_argument, NULL, O_ATTR},
        {"backend", required_argument, NULL, O_BACKEND},
        {"quiet", no_argument, NULL, O_QUIET},
        {NULL, 0, NULL, 0},
    };
    const char *in = NULL, *out = NULL, *preset_name = NULL, *save = NULL, *backend_name = "auto";
    const char *attrs[64], *sets[32];
    int nattrs = 0, nsets = 0, quiet = 0;
    unsigned long long seed = 1;
    int o;
    optind = 0;
    opterr = 0;
    while ((o = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (o) {
        case O_IN: in = optarg; break;
        case O_OUT: out = optarg; break;
        case O_PRESET: preset_name = optarg; break;
        case O_SET:
            if (nsets == 32) return ft_cli_fail(FT_EXIT_USAGE, "exec: too many --set");
            sets[nsets++] = optarg;
            break;
        case O_SEED: {
            char *end;
            errno = 0;
            seed = strtoull(optarg, &end, 10);
            if (end == optarg || *end || errno)
                return ft_cli_fail(FT_EXIT_USAGE, "exec: --seed expects a non-negative integer");
            break;
        }
        case O_SAVE: save = optarg; break;
        case O_ATTR:
            if (nattrs == 64) return ft_cli_fail(FT_EXIT_USAGE, "exec: too many --attr");
            attrs[nattrs++] = optarg;
            break;
        case O_BACKEND: backend_name = optarg; break;
        case O_QUIET: quiet = 1; break;
        case ':':
            return ft_cli_fail(FT_EXIT_USAGE, "exec: option '%s' needs a value", argv[optind - 1]);
        default:
            return ft_cli_fail(FT_EXIT_USAGE,
                               "exec: unknown option '%s' (see `flaretune exec --help`)",
                               argv[optind - 1]);
        }
    }
    if (optind >= argc)
        return ft_cli_fail(FT_EXIT_USAGE, "exec: which op? (see `flaretune list ops`)");
    if (optind + 1 < argc)
        return ft_cli_fail(FT_EXIT_USAGE, "exec: unexpected argument '%s'", argv[optind + 1]);
    if (!!in == !!preset_name)
        return ft_cli_fail(FT_EXIT_USAGE, "exec: give exactly one of --in DIR or --preset P");
    if (in && !out) return ft_cli_fail(FT_EXIT_USAGE, "exec: --out DIR is required with --in");
    if (in && (nsets || save))
        return ft_cli_fail(FT_EXIT_USAGE, "exec: --set and --save-inputs go with --preset");

    ft_err err = {0};
    const ft_op *op = ft_op_find(argv[optind], &err);
    if (!op) return ft_cli_fail_err(&err);
    ft_call c;
    ft_call_init(&c, op);
    for (int i = 0; i < nattrs; i++) {
        const char *eq = strchr(attrs[i], '=');
        if (!eq || eq == attrs[i])
            return ft_cli_fail(FT_EXIT_USAGE, "exec: --attr expects NAME=VALUE, got '%s'",
                               attrs[i]);
        char name[64];
        snprintf(name, sizeof name, "%.*s", (int)(eq - attrs[i]), attrs[i]);
        if (ft_attrs_set(&c.attrs, op, name, eq + 1, &err)) return ft_cli_fail_err(&err);
    }
    const ft_backend *be;
    if (ft_backend_resolve(backend_name, op, &be, &err)) return ft_cli_fail_err(&err);

    int code = FT_EXIT_OK;
    ft_status s;
    if (in) {
        ft_call_resolve_backward(&c);
        s = load_inputs(&c, in, &err);
        if (!s) s = ft_call_bind(&c, &err);
        if (!s) s = ft_call_alloc(&c, 0, 1, &err);
    } else {
        const ft_preset *base = ft_preset_find(preset_name);
        if (!base) {
            ft_call_free(&c);
            return ft_cli_fail(FT_EXIT_USAGE,
                               "exec: unknown preset '%s' (see `flaretune list presets`)",
                               preset_name);
        }
        ft_preset p = *base;
        s = FT_OK;
        for (int i = 0; i < nsets && !s; i++)
            s = ft_preset_set(&p, sets[i], &err);
        if (!s) s = ft_call_from_preset(&c, &p, seed, &err);
    }
    double t0 = 0, t1 = 0;
    if (!s) {
        t0 = ft_now_s();
        s = be->run(&c, NULL, &err);
        t1 = ft_now_s();
    }
    if (!s && save) s = write_tensors(&c, 1, save, &err);
    if (!s && out) s = write_tensors(&c, 0, out, &err);
    if (s)
        code = ft_cli_fail_err(&err);
    else if (!quiet) {
        print_summary(&c, be->name, t1 - t0);
        if (save) print_replay(&c, save);
    }
    ft_call_free(&c);
    return code;
}

const ft_cmd ft_cmd_exec = {"exec", "run one op on .npy inputs and write its outputs", run, usage};
