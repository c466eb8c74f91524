/* cmd_compile_t1.c: `flaretune compile --t1 FILE`: a T1 kernel's configurations compiled by NVRTC
 * for a GPU architecture without a GPU: registers, spills, static shared memory, the occupancy on
 * a device of the table, and the verdict the tuner would reach before timing. */
#include <getopt.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "cuda/specs.h"
#include "core/clock.h"
#include "tuner/t1.h"
#include "tuner/t1_run.h"

/* The options of `compile --t1`: the codes of its own, and the table getopt_long reads. */
enum { O_ARCH = 1, O_DEVICE, O_JSON };
static const struct option opts[] = {
    FT_CLI_T1_KERNEL_OPTIONS,
    FT_CLI_ARG("arch", O_ARCH),
    FT_CLI_ARG("device", O_DEVICE),
    FT_CLI_T1_SELECT_OPTIONS,
    FT_CLI_FLAG("json", O_JSON),
    FT_CLI_END,
};

void ft_cli_compile_t1_usage(FILE *f) {
    fprintf(f,
            "       flaretune compile --t1 FILE [--kernel-file F] [--arch ARCH | --device NAME]\n"
            "                         [--config CFG | --all-configs | --sample K [--seed S]] [--json]\n\n"
            "Compile a T1 kernel's configurations (the default one, one, all the file's conditions\n"
            "allow, or K drawn from S) with NVRTC, each value a macro, and print per configuration\n"
            "registers, spills, static shared memory, the occupancy on the device and the verdict\n"
            "(docs/t1.md). Exit 1 when one does not compile.\n");
}

/* The options of compile --t1 that the other T1 commands do not take. */
typedef struct {
    const char *arch, *device;
    int json;
} compile_t1_args;

static int compile_t1_opt(void *ctx, int opt, const char *arg) {
    compile_t1_args *c = ctx;
    switch (opt) {
    case O_ARCH: c->arch = arg; break;
    case O_DEVICE: c->device = arg; break;
    case O_JSON: c->json = 1; break;
    }
    return FT_EXIT_OK;
}

int ft_cli_compile_t1(int argc, char **argv) {
    ft_cli_t1_args a = {.seed = 1};
    compile_t1_args c = {0};
    int code = ft_cli_t1_parse("compile", argc, argv, opts, &a, compile_t1_opt, &c);
    if (code) return code;
    const char *arch = c.arch, *device = c.device;
    int json = c.json;
    if (arch && device) return ft_cli_fail(FT_EXIT_USAGE, "compile: --arch or --device, not both");
    if (arch && !ft_cli_arch_ok(arch))
        return ft_cli_fail(FT_EXIT_USAGE,
                           "compile: --arch '%s' is not a GPU architecture (e.g. sm_80, sm_90a)",
                           arch);
    if ((a.all || a.sample) && a.config) return ft_cli_fail(FT_EXIT_USAGE, "compile: --config is one configuration");
    const ft_gpu_spec *g = device ? ft_gpu_spec_find(device) : arch ? ft_gpu_spec_for_arch(arch) : ft_gpu_spec_find("h200");
    if (device && !g) return ft_cli_fail(FT_EXIT_USAGE, "compile: unknown device '%s' (one of %s)", device, ft_gpu_spec_names());
    if (!arch) arch = g->arch;
#if !FT_HAVE_CUDA
    (void)json;
    return ft_cli_fail(FT_EXIT_NODEV, "compile: this flaretune was built without the CUDA toolkit (no NVRTC)");
#else
    ft_err err = {0};
    ft_t1 *t = NULL;
    if (ft_t1_load(a.path, a.kfile, &t, &err)) return ft_cli_fail_err(&err);
    ft_cli_t1_note("compile", t);
    ft_config *cfgs = NULL;
    int64_t n = 0;
    if ((code = ft_cli_t1_select("compile", t, &a, &cfgs, &n))) {
        ft_t1_free(t);
        return code;
    }
    json_t *rows = json_array();
    int failed = 0, ok = 0, pruned = 0;
    double t0 = ft_now_s();
    if (!json)
        printf("%s (%s) compiled for %s; occupancy on %s (%s)\n  %-44s %5s %7s %9s %6s %5s  verdict\n",
               t->kernel_name, t->kernel_file, arch, g ? g->name : "-", g ? g->model : "no device of the table",
               "configuration (Kernel Tuner's key)", "regs", "spills", "smem", "blk/SM", "occ");
    for (int64_t i = 0; i < n; i++) {
        char key[1024];
        ft_t1_key(t, &cfgs[i], key, sizeof key);
        const char *kn = t->kernel_name;
        ft_nvrtc_result res;
        ft_err e = {0};
        json_t *row = json_pack("{s:s}", "key", key);
        if (ft_t1_nvrtc_compile(t, &cfgs[i], arch, &res, &e) != FT_OK) {
            failed++;
            json_object_set_new(row, "error", json_string(e.msg));
            if (!json) printf("  %-44s %s\n", key, e.msg);
            json_array_append_new(rows, row);
            continue;
        }
        const ft_nvrtc_kernel *kr = ft_nvrtc_kernel_of(&res, kn);
        ft_kernel_info info;
        memset(&info, 0, sizeof info);
        if (kr) info = kr->info;
        long long grid[3], block[3];
        ft_t1_launch(t, &cfgs[i], grid, block, NULL);
        ft_occupancy occ;
        memset(&occ, 0, sizeof occ);
        /* (an architecture no device of the table has: compiled, its occupancy not judged) */
        const char *verdict = g ? "ok" : "compiled";
        char why[160] = "";
        if (info.spill_stores || info.spill_loads) {
            verdict = "pruned";
            snprintf(why, sizeof why, "spills %d bytes", info.spill_stores + info.spill_loads);
        } else if (g && (ft_cuda_occupancy(g, (int)(block[0] * block[1] * block[2]), info.regs,
                                           info.smem_static + (size_t)t->shared_bytes, &occ, NULL) != FT_OK ||
                         occ.blocks_per_sm == 0)) {
            verdict = "pruned";
            snprintf(why, sizeof why, "no block fits on an SM (%s)", ft_occ_limit_name(occ.limits));
        }
        if (strcmp(verdict, "pruned") != 0)
            ok++;
        else pruned++;
        json_object_set_new(row, "regs", json_integer(info.regs));
        json_object_set_new(row, "spills", json_integer(info.spill_stores + info.spill_loads));
        json_object_set_new(row, "smem_static", json_integer((json_int_t)info.smem_static));
        json_object_set_new(row, "blocks_per_sm", json_integer(occ.blocks_per_sm));
        json_object_set_new(row, "occupancy", json_real(occ.fraction));
        json_object_set_new(row, "verdict", json_string(verdict));
        if (why[0]) json_object_set_new(row, "reason", json_string(why));
        json_array_append_new(rows, row);
        if (!json)
            printf("  %-44s %5d %7d %9zu %6d %4.0f%%  %s%s%s\n", key, info.regs,
                   info.spill_stores + info.spill_loads, info.smem_static + (size_t)t->shared_bytes,
                   occ.blocks_per_sm, 100 * occ.fraction, verdict, why[0] ? ": " : "", why);
        ft_nvrtc_result_free(&res);
    }
    double secs = ft_now_s() - t0;
    if (json) {
        json_t *doc = json_pack("{s:s, s:s, s:s, s:o, s:i, s:i, s:i, s:f}", "kernel", t->kernel_name, "arch", arch,
                                "device", g ? g->name : "", "configs", rows, "ok", ok, "pruned", pruned, "failed",
                                failed, "seconds", secs);
        ft_cli_print_json(doc);
    } else {
        json_decref(rows);
        printf("%lld configurations: %d ok, %d pruned, %d failed to compile; %.1f s\n", (long long)n, ok, pruned,
               failed, secs);
    }
    free(cfgs);
    ft_t1_free(t);
    return failed ? FT_EXIT_FAIL : FT_EXIT_OK;
#endif
}
