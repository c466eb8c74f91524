/* cmd_emit.c: `flaretune emit`: a profile's tuned configurations as a self-contained C header,
 * a flat JSON array, or a standalone source package of the tuned kernels, for builds that do
 * not link flaretune (docs/emit.md). */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "cli_profile.h"
#include "core/npy.h"
#include "core/paths.h"

static void usage(FILE *f) {
    fprintf(f, "usage: flaretune emit PROFILE... [-o FILE] [--format c-header|json]\n"
               "                      [--backend B] [--device D] [--prefix NAME]\n"
               "       flaretune emit PROFILE... --format package -o DIR [--backend B]\n"
               "                      [--device D] [--prefix NAME]\n\n"
               "Write the tuned configurations of the profiles (merged, best per key) for other\n"
               "builds: a self-contained C/C++ header with one row per entry and a nearest-shape\n"
               "lookup, a flat JSON array of {op, backend, device, shape, attrs, params,\n"
               "median_s}, or a standalone source package of the tuned kernels. See\n"
               "docs/emit.md.\n\n"
               "  -o FILE          write FILE atomically (default: stdout)\n"
               "  --format F       c-header (default), json, or package\n"
               "  --backend B      only the entries of backend B\n"
               "  --device D       only the entries whose device contains D\n"
               "  --prefix NAME    the identifier prefix (default ft_tuned)\n\n"
               "--format package writes the new directory DIR (it must not exist, or be empty;\n"
               "built beside it and renamed into place, nothing left on an error) for ONE backend\n"
               "and device (entries spanning several are refused: choose with --backend and\n"
               "--device): the kernel sources specialised per entry (bucket), a dispatch function\n"
               "per op that runs the entry of the caller's attributes at its shape or the nearest\n"
               "one, a header, a CMakeLists.txt and a README.md. cpu: a static library needing a\n"
               "C compiler, OpenMP and OpenBLAS (OpenMP build), not flaretune; outputs bit for\n"
               "bit those of `flaretune exec --config` with the same compiler, flags and OpenBLAS\n"
               "core. cuda: a copy of the CUDA backend (host code, device layer, kernel cache,\n"
               "cuBLASLt GEMM, SIMT emulator) and the kernel sources, cubins precompiled by NVRTC\n"
               "for the architecture the device names; it runs an entry on the GPU (\"cuda\": the\n"
               "cubins seed the kernel cache) or the emulator (\"cuda-emu\", outputs bit for bit\n"
               "those of `exec --backend cuda-emu --config`); see docs/emit.md.\n");
}

static const char *base_name(const char *path) {
    const char *s = strrchr(path, '/');
    return s ? s + 1 : path;
}

/* The options of `emit`: the codes of its own, and the table getopt_long reads. */
enum { O_FORMAT = 1, O_BACKEND, O_DEVICE, O_PREFIX };
static const struct option opts[] = {
    FT_CLI_ARG("output", 'o'),
    FT_CLI_ARG("format", O_FORMAT),
    FT_CLI_ARG("backend", O_BACKEND),
    FT_CLI_ARG("device", O_DEVICE),
    FT_CLI_ARG("prefix", O_PREFIX),
    FT_CLI_END,
};

/* The command line of one emit. */
typedef struct {
    ft_emit_opts eo;
    const char *out, *format;
} emit_args;

static int emit_opt(void *ctx, int o, const char *arg) {
    emit_args *a = ctx;
    switch (o) {
    case 'o': a->out = arg; break;
    case O_FORMAT: a->format = arg; break;
    case O_BACKEND: a->eo.backend = arg; break;
    case O_DEVICE: a->eo.device = arg; break;
    case O_PREFIX: a->eo.prefix = arg; break;
    default: return ft_cli_bad_option("emit", o);
    }
    return FT_EXIT_OK;
}

static int run(int argc, char **argv) {
    emit_args a = {{FT_EMIT_C_HEADER, NULL, NULL, NULL, NULL}, NULL, "c-header"};
    int code = ft_cli_parse_options(argc, argv, "o:", opts, emit_opt, &a);
    if (code) return code;
    ft_emit_opts eo = a.eo;
    const char *out = a.out, *format = a.format;
    ft_err err = {0};
    if (ft_emit_format_parse(format, &eo.format, &err))
        return ft_cli_fail(FT_EXIT_USAGE, "emit: %s", err.msg);
    if (optind >= argc)
        return ft_cli_fail(FT_EXIT_USAGE, "emit: which profile? (see `flaretune emit --help`)");
    for (int i = optind; out && i < argc; i++)
        if (ft_same_file(argv[i], out))
            return ft_cli_fail(FT_EXIT_USAGE,
                               "emit: -o %s: the output is the profile it reads; nothing written",
                               out);
    ft_profile *p;
    code = ft_cli_load_profiles("emit", argv + optind, argc - optind, &p);
    if (code) return code;
    eo.source = base_name(argv[optind]);
    int n = 0;
    if (eo.format == FT_EMIT_PACKAGE) {
        ft_status s = out ? ft_profile_emit_package(p, &eo, out, &n, &err) : FT_EINVAL;
        int nk = 0; /* the kernels --backend and --device select */
        for (int i = 0; i < ft_profile_kernel_count(p); i++)
            nk += ft_emit_selects(&eo, ft_profile_kernel_at(p, i)->backend,
                                  ft_profile_kernel_at(p, i)->device);
        ft_profile_free(p);
        if (out && !s && nk)
            fprintf(stderr,
                    "flaretune: note: emit: a package holds flaretune's ops; the %d kernel%s of T1 "
                    "files go to --format c-header or json\n",
                    nk, nk == 1 ? "" : "s");
        if (!out) return ft_cli_fail(FT_EXIT_USAGE, "emit: --format package needs -o DIR");
        if (s) return ft_cli_fail(ft_cli_exit_code(err.status), "emit: %s", err.msg);
        fprintf(stderr, "wrote %s: a source package of %d entr%s (docs/emit.md)\n", out, n,
                n == 1 ? "y" : "ies");
        return FT_EXIT_OK;
    }
    if (out) {
        char tmp[4096];
        FILE *f = ft_file_create_tmp(out, tmp, sizeof tmp, &err);
        if (!f) {
            ft_profile_free(p);
            return ft_cli_fail(FT_EXIT_FAIL, "emit: %s", err.msg);
        }
        if (ft_profile_emit(p, &eo, f, &n, &err)) {
            fclose(f);
            unlink(tmp);
            ft_profile_free(p);
            return ft_cli_fail(ft_cli_exit_code(err.status), "emit: %s: %s", out, err.msg);
        }
        if (ft_file_commit(f, tmp, out, &err)) {
            ft_profile_free(p);
            return ft_cli_fail(FT_EXIT_FAIL, "emit: %s", err.msg);
        }
        /* Written to a file: one line says what, on stderr, so that `-o /dev/stdout` is the
         * output alone (as export's line). */
        fprintf(stderr, "wrote %s: %d entr%s as %s\n", out, n, n == 1 ? "y" : "ies",
                eo.format == FT_EMIT_JSON ? "JSON records" : "a C header");
    } else {
        if (ft_profile_emit(p, &eo, stdout, &n, &err)) {
            ft_profile_free(p);
            return ft_cli_fail(ft_cli_exit_code(err.status), "emit: %s", err.msg);
        }
        if (fflush(stdout) != 0 || ferror(stdout)) {
            int e = errno;
            ft_profile_free(p);
            return ft_cli_fail(FT_EXIT_FAIL, "emit: write failed: %s", strerror(e ? e : EIO));
        }
    }
    if (!n)
        fprintf(stderr, "flaretune: warning: emit: no entries%s%s%s%s%s (the output has none)\n",
                eo.backend ? " of backend " : "", eo.backend ? eo.backend : "",
                eo.device ? " on a device containing '" : "", eo.device ? eo.device : "",
                eo.device ? "'" : "");
    ft_profile_free(p);
    return FT_EXIT_OK;
}

const ft_cmd ft_cmd_emit = {"emit", "write tuned configs as a C header, JSON, or a source package",
                            run, usage};
