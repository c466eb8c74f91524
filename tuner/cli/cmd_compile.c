/* cmd_compile.c: `flaretune compile`: static analysis of an op's CUDA kernels without a GPU.
 *
 * Every configuration of the op's CUDA space (or one, or the default) names the kernel modules
 * it needs (ft_cuda_op.modules); each distinct module is compiled once by NVRTC for the target
 * architecture, on --jobs threads of the compile pool the tuner uses too (prefetch.h), through
 * the disk cache (nvrtc.h), and ptxas's report gives each kernel's registers, spills, stack and
 * static shared memory. With the launch shape from the module spec and a device from the spec
 * table (specs.h) it prints the theoretical occupancy and the verdict the tuner would reach
 * before timing: ok, or pruned and why; then how long the compiling took. The SASS of each
 * module (sass.h, read by nvdisasm on the pool's threads) gives each kernel's instruction mix:
 * the table shows the hot loop's instructions per global byte, the JSON every class, in all and
 * in the hot loop. CI runs it on every
 * config of every CUDA op (`--list-ops`) for sm_80 and sm_90a, so no config ships that does
 * not compile. `--source FILE --kernel NAME:THREADS` analyses any kernel source the same way:
 * FILE from the working directory (or absolute; else a source of the kernel tree), kernels by
 * the names the source writes (a C++ kernel's, not its mangled name).
 *
 * Exit codes: 0 everything compiled (pruned configs are answers, not failures), 1 a compile
 * failed or a module lacks a kernel its spec launches, 2 a usage error, 3 this flaretune was
 * built without the CUDA toolkit.
 */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "core/clock.h"
#include "core/env.h"
#include "core/json.h"
#include "core/paths.h"
#include "cuda/backend/cuda_backend.h"
#include "cuda/backend/prefetch.h"
#include "cuda/nvrtc.h"
#include "cuda/specs.h"
#include "kernels/registry.h"

#define MAX_MODULES     8 /* per configuration */
#define MAX_KERNEL_ARGS 16

static void usage(FILE *f) {
    fprintf(
        f,
        "usage: flaretune compile OP [--arch ARCH | --device NAME] [--all-configs | --config CFG]\n"
        "                           [--preset P] [--set NAME=VALUE]... [--attr NAME=VALUE]...\n"
        "                           [--jobs N] [--json] [--no-sass] [--verbose]\n"
        "       flaretune compile --source FILE [--define NAME[=VALUE]]...\n"
        "                           [--kernel NAME:THREADS[:DYN_SMEM]]... [--arch|--device ...]\n"
        "       flaretune compile --list-ops | --list-devices\n\n"
        "Compile OP's CUDA kernels with NVRTC for a GPU architecture (no GPU needed) and print,\n"
        "per configuration and kernel: registers, spill stores/loads, stack, static + dynamic\n"
        "shared memory, block size, the theoretical occupancy on a device, the instructions per\n"
        "byte of global memory of the hot loop (ins/B: from the SASS, the kernel's own when it "
        "has\n"
        "no loop), and the verdict the tuner reaches before timing (ok, or pruned and why).\n\n"
        "  --device NAME   occupancy on this device and compile for its architecture\n"
        "                  (default h200; see --list-devices)\n"
        "  --arch ARCH     compile for ARCH (sm_80, sm_89, sm_90a, sm_100a, ...); occupancy on\n"
        "                  the first device of the table with that architecture\n"
        "  --all-configs   every configuration the op's space allows at the preset's sizes,\n"
        "                  summed up: a line per kernel and verdict with how many\n"
        "                  configurations and the range of registers, spills, occupancy\n"
        "  --verbose       with --all-configs, every configuration's kernels\n"
        "  --config CFG    one configuration (NAME=VALUE,...); default: the space's default\n"
        "  --preset P, --set NAME=VALUE, --attr NAME=VALUE\n"
        "                  the problem the configurations are checked against (--attr\n"
        "                  dtype=bf16 compiles the bf16 kernels)\n"
        "  --jobs N        compile N modules at a time (default: the CPUs, at most 16); the\n"
        "                  report ends with the wall time, configurations/s and compiler time\n"
        "  --json          one JSON document instead of the tables (with each kernel's SASS\n"
        "                  instruction mix by class, in all and in its hot loop)\n"
        "  --no-sass       no SASS instruction mix (nvdisasm takes about 0.5 s a module the\n"
        "                  first time; then its result is cached)\n"
        "  --list-ops      the ops with CUDA kernels, one per line\n"
        "  --list-devices  the device table\n\n"
        "--source FILE is absolute or from the working directory (else a source of flaretune's\n"
        "kernel tree, e.g. fusion/fusion.cu); its folder is on the include path; C++ kernels are\n"
        "reported and named (--kernel) by the names the source writes.\n\n"
        "Compiled modules are cached under $FLARETUNE_CACHE_DIR/nvrtc, their instruction mix\n"
        "under sass/ (docs/cuda.md: where nvdisasm comes from). Exit codes: 0 compiled,\n"
        "1 a compile failed, 2 invalid request, 3 built without the CUDA toolkit.\n\n");
    ft_cli_compile_t1_usage(f);
}

/* The compiling and reporting need NVRTC: built with the toolkit only. */
#if FT_HAVE_CUDA

/* ---- configurations ----------------------------------------------------------------------------
 */

typedef struct entry {
    char text[256]; /* the configuration, NAME=VALUE,... */
    int nmods;
    ft_cuda_module_spec mods[MAX_MODULES];
    int job[MAX_MODULES];
} entry;

/* One kernel's row: resources, occupancy and verdict. */
typedef struct row {
    const char *kernel, *source;
    const char *symbol; /* the kernel's name in the CUBIN (mangled for a C++ kernel) */
    int found;          /* the module has it */
    int block;
    size_t dyn;
    ft_kernel_info info;
    int have_occ;
    ft_occupancy occ;
    int ok;
    char why[400];
    const ft_sass_kernel *sass; /* its instruction mix, or why there is none */
    const char *sass_why;
} row;

static void make_row(const ft_gpu_spec *dev, const ft_cuda_pool_job *j, const char *kernel,
                     int block, size_t dyn, row *r) {
    memset(r, 0, sizeof *r);
    r->kernel = kernel;
    r->source = j->source;
    r->block = block;
    r->dyn = dyn;
    const ft_nvrtc_kernel *k = j->status ? NULL : ft_nvrtc_kernel_of(&j->res, kernel);
    if (k) r->found = 1, r->info = k->info, r->symbol = k->name;
    if (!r->found) {
        const char *base = strrchr(j->source, '/') ? strrchr(j->source, '/') + 1 : j->source;
        int w =
            snprintf(r->why, sizeof r->why, "no kernel '%.100s' in %.100s (it has:", kernel, base);
        for (int i = 0; i < j->res.nkernels && w > 0 && (size_t)w < sizeof r->why; i++)
            w += snprintf(r->why + w, sizeof r->why - (size_t)w, "%s %s", i ? "," : "",
                          j->res.kernels[i].name);
        if (w > 0 && (size_t)w < sizeof r->why - 1)
            snprintf(r->why + w, sizeof r->why - (size_t)w, ")");
        return;
    }
    if (dev && block > 0) {
        r->ok = ft_cuda_check_kernel(dev, &r->info, block, dyn, r->why, sizeof r->why);
        r->have_occ = ft_cuda_occupancy(dev, block, r->info.regs, r->info.smem_static + dyn,
                                        &r->occ, NULL) == FT_OK;
    } else if (r->info.spill_stores || r->info.spill_loads) {
        snprintf(r->why, sizeof r->why, "spills %d bytes",
                 r->info.spill_stores > r->info.spill_loads ? r->info.spill_stores
                                                            : r->info.spill_loads);
    } else {
        r->ok = 1;
    }
}

/* The instruction mix of a row's kernel, from its module's job, or why there is none. */
static void row_sass(row *r, const ft_cuda_pool_job *j, int no_sass) {
    r->sass = NULL;
    r->sass_why = NULL;
    if (!r->found) return;
    if (no_sass)
        r->sass_why = "not read (--no-sass)";
    else if (j->sass_status)
        r->sass_why = j->sass_msg;
    else if (!(r->sass = ft_sass_find(j->sass, j->nsass, r->symbol)))
        r->sass_why = "the disassembly has no such kernel";
}

/* Instructions per byte a thread moves to or from global memory; -1 when it moves none. */
static double per_global_byte(const ft_sass_mix *m) {
    return m->global_bytes > 0 ? (double)m->total / m->global_bytes : -1;
}

static void print_header(void) {
    printf("  %-30s %4s %11s %6s %19s %5s %6s %6s %6s  %s\n", "kernel", "regs", "spill st/ld",
           "stack", "smem static+dyn", "block", "blk/SM", "occ", "ins/B", "verdict");
}

/* A kernel's row as text (no newline): the table's line. */
static void row_text(const row *r, char *buf, size_t n) {
    char st[32], dy[32], smem[72], occ[16] = "-", blk[16] = "-", bpsm[16] = "-";
    if (!r->found) {
        snprintf(buf, n, "  %-30s error: %s", r->kernel, r->why);
        return;
    }
    ft_fmt_bytes_kib(r->info.smem_static, st, sizeof st);
    ft_fmt_bytes_kib(r->dyn, dy, sizeof dy);
    snprintf(smem, sizeof smem, "%s+%s", st, dy);
    if (r->block > 0) snprintf(blk, sizeof blk, "%d", r->block);
    if (r->have_occ) {
        snprintf(bpsm, sizeof bpsm, "%d", r->occ.blocks_per_sm);
        snprintf(occ, sizeof occ, "%.0f%%", 100.0 * r->occ.fraction);
    }
    char spills[32], ipb[16] = "-";
    snprintf(spills, sizeof spills, "%d/%d", r->info.spill_stores, r->info.spill_loads);
    if (r->sass) {
        const ft_sass_loop *h = ft_sass_hot_loop(r->sass);
        double x = per_global_byte(h ? &h->mix : &r->sass->mix);
        if (x >= 0) snprintf(ipb, sizeof ipb, "%.2f", x);
    }
    char verdict[440];
    if (r->ok && r->have_occ)
        snprintf(verdict, sizeof verdict, "ok (%s-limited)", ft_occ_limit_name(r->occ.limits));
    else if (r->ok)
        snprintf(verdict, sizeof verdict, "ok");
    else
        snprintf(verdict, sizeof verdict, "pruned: %s", r->why);
    if (snprintf(buf, n, "  %-30s %4d %11s %6zu %19s %5s %6s %6s %6s  %s", r->kernel, r->info.regs,
                 spills, r->info.stack_bytes, smem, blk, bpsm, occ, ipb, verdict) >= (int)n)
        buf[n - 1] = '\0'; /* a verdict longer than the line is cut there */
}

static void print_row(const row *r) {
    char line[640];
    row_text(r, line, sizeof line);
    printf("%s\n", line);
}

/* --all-configs without --verbose: the kernels summed up, one line per kernel and verdict (ok,
 * or pruned for one reason), with how many configurations and the range of their registers,
 * spills and occupancy (391 configurations of fusion.dflare fit in a few lines). */
typedef struct kernel_group {
    char kernel[96], verdict[96];
    int configs, last_cfg; /* one count a configuration */
    int regs_lo, regs_hi, spill_hi, have_occ;
    double occ_lo, occ_hi;
} kernel_group;

typedef struct kernel_groups {
    kernel_group *g;
    int n, cap;
} kernel_groups;

/* "ok", or "pruned: " and the reason up to its details ("pruned: 0 blocks fit per SM",
 * "pruned: spills 524 bytes"). */
static void verdict_kind(const row *r, char *buf, size_t n) {
    if (!r->found) {
        snprintf(buf, n, "error");
        return;
    }
    if (r->ok) {
        snprintf(buf, n, "ok");
        return;
    }
    size_t k = strcspn(r->why, ":(");
    while (k > 0 && (r->why[k - 1] == ' ' || r->why[k - 1] == ':'))
        k--;
    snprintf(buf, n, "pruned: %.*s", (int)k, r->why);
}

static int group_add(kernel_groups *d, const row *r, int cfg) {
    char verdict[96];
    verdict_kind(r, verdict, sizeof verdict);
    kernel_group *x = NULL;
    for (int i = 0; i < d->n && !x; i++)
        if (!strcmp(d->g[i].kernel, r->kernel) && !strcmp(d->g[i].verdict, verdict)) x = &d->g[i];
    if (!x) {
        if (d->n == d->cap) {
            int cap = d->cap ? 2 * d->cap : 16;
            kernel_group *ng = realloc(d->g, sizeof *ng * (size_t)cap);
            if (!ng) return -1;
            d->g = ng, d->cap = cap;
        }
        x = &d->g[d->n++];
        memset(x, 0, sizeof *x);
        snprintf(x->kernel, sizeof x->kernel, "%s", r->kernel);
        snprintf(x->verdict, sizeof x->verdict, "%s", verdict);
        x->last_cfg = -1;
        x->regs_lo = r->info.regs;
        x->occ_lo = 1;
    }
    if (x->last_cfg != cfg) x->configs++, x->last_cfg = cfg;
    if (!r->found) return 0;
    int spill =
        r->info.spill_stores > r->info.spill_loads ? r->info.spill_stores : r->info.spill_loads;
    if (r->info.regs < x->regs_lo) x->regs_lo = r->info.regs;
    if (r->info.regs > x->regs_hi) x->regs_hi = r->info.regs;
    if (spill > x->spill_hi) x->spill_hi = spill;
    if (r->have_occ) {
        x->have_occ = 1;
        if (r->occ.fraction < x->occ_lo) x->occ_lo = r->occ.fraction;
        if (r->occ.fraction > x->occ_hi) x->occ_hi = r->occ.fraction;
    }
    return 0;
}

static void print_groups(const kernel_groups *d, int nconfigs) {
    printf("\nthe kernels of the %d configurations (--verbose: each configuration's)\n", nconfigs);
    if (!d->n) return;
    printf("  %-30s %7s %9s %11s %9s  %s\n", "kernel", "configs", "regs", "spill bytes", "occ",
           "verdict");
    for (int i = 0; i < d->n; i++) {
        const kernel_group *x = &d->g[i];
        char regs[32] = "-", occ[32] = "-", spill[32] = "-";
        if (strcmp(x->verdict, "error")) {
            snprintf(regs, sizeof regs, x->regs_lo == x->regs_hi ? "%d" : "%d-%d", x->regs_lo,
                     x->regs_hi);
            snprintf(spill, sizeof spill, x->spill_hi ? "up to %d" : "0", x->spill_hi);
        }
        if (x->have_occ && x->occ_lo == x->occ_hi)
            snprintf(occ, sizeof occ, "%.0f%%", 100 * x->occ_lo);
        else if (x->have_occ)
            snprintf(occ, sizeof occ, "%.0f-%.0f%%", 100 * x->occ_lo, 100 * x->occ_hi);
        printf("  %-30s %7d %9s %11s %9s  %s\n", x->kernel, x->configs, regs, spill, occ,
               x->verdict);
    }
}

static json_t *row_json(const row *r) {
    json_t *o =
        json_pack("{s:s, s:s, s:b}", "kernel", r->kernel, "source", r->source, "found", r->found);
    if (!r->found) {
        json_object_set_new(o, "error", json_string(r->why));
        return o;
    }
    json_object_set_new(o, "regs", json_integer(r->info.regs));
    json_object_set_new(o, "spill_stores", json_integer(r->info.spill_stores));
    json_object_set_new(o, "spill_loads", json_integer(r->info.spill_loads));
    json_object_set_new(o, "stack_bytes", json_integer((json_int_t)r->info.stack_bytes));
    json_object_set_new(o, "smem_static", json_integer((json_int_t)r->info.smem_static));
    json_object_set_new(o, "smem_dynamic", json_integer((json_int_t)r->dyn));
    json_object_set_new(o, "block_threads", r->block > 0 ? json_integer(r->block) : json_null());
    if (r->have_occ) {
        json_object_set_new(o, "blocks_per_sm", json_integer(r->occ.blocks_per_sm));
        json_object_set_new(o, "warps_per_sm", json_integer(r->occ.warps_per_sm));
        json_object_set_new(o, "occupancy", json_real(r->occ.fraction));
        json_object_set_new(o, "limited_by", json_string(ft_occ_limit_name(r->occ.limits)));
    }
    json_object_set_new(o, "verdict", json_string(r->ok ? "ok" : "pruned"));
    if (!r->ok) json_object_set_new(o, "reason", json_string(r->why));
    json_object_set_new(o, "sass", r->sass ? ft_cli_sass_json(r->sass) : json_null());
    if (!r->sass) json_object_set_new(o, "sass_unavailable", json_string(r->sass_why));
    return o;
}

/* A failure on stderr: which op and config (none for --source: the message names the file). */
static void fail_line(const ft_op *op, const char *cfg, const char *msg) {
    if (op)
        fprintf(stderr, "flaretune: compile: %s config %s: %s\n", op->name, cfg, msg);
    else
        fprintf(stderr, "flaretune: compile: %s\n", msg);
}

#endif /* FT_HAVE_CUDA */

/* ---- the listings -------------------------------------------------------------------------------
 */

static int list_ops(int json) {
    if (json) {
        json_t *a = json_array();
        for (int i = 0; i < ft_op_count(); i++)
            if (ft_op_at(i)->cuda) json_array_append_new(a, json_string(ft_op_at(i)->name));
        ft_cli_print_json(a);
        return FT_EXIT_OK;
    }
    for (int i = 0; i < ft_op_count(); i++)
        if (ft_op_at(i)->cuda) printf("%s\n", ft_op_at(i)->name);
    return FT_EXIT_OK;
}

static int list_devices(int json) {
    json_t *a = json ? json_array() : NULL;
    if (!json)
        printf("%-8s %-24s %-8s %4s %8s %9s %8s %9s %10s\n", "name", "model", "arch", "SMs",
               "smem/SM", "smem/blk", "L2", "DRAM", "bf16 dense");
    for (int i = 0; i < ft_gpu_spec_count(); i++) {
        const ft_gpu_spec *s = ft_gpu_spec_at(i);
        if (json) {
            json_t *o = json_pack(
                "{s:s, s:s, s:s, s:i, s:i, s:i, s:I, s:I, s:I, s:f, s:f}", "name", s->name, "model",
                s->model, "arch", s->arch, "sm_count", s->sm_count, "max_threads_per_sm",
                s->max_threads_per_sm, "max_blocks_per_sm", s->max_blocks_per_sm, "smem_per_sm",
                (json_int_t)s->smem_per_sm, "smem_per_block_optin",
                (json_int_t)s->smem_per_block_optin, "l2_bytes", (json_int_t)s->l2_bytes, "mem_bw",
                s->mem_bw, "bf16_flops", s->bf16_flops);
            json_array_append_new(a, o);
            continue;
        }
        char smsm[16], smb[16];
        ft_fmt_bytes_kib(s->smem_per_sm, smsm, sizeof smsm);
        ft_fmt_bytes_kib(s->smem_per_block_optin, smb, sizeof smb);
        printf("%-8s %-24s %-8s %4d %8s %9s %5.0f MiB %5.2f TB/s %6.0f TFLOP/s\n", s->name,
               s->model, s->arch, s->sm_count, smsm, smb, (double)s->l2_bytes / 1048576.0,
               s->mem_bw / 1e12, s->bf16_flops / 1e12);
    }
    if (json) {
        ft_cli_print_json(a);
    }
    return FT_EXIT_OK;
}

/* "sm_" digits, then an optional 'a' or 'f'. */
/* ---- the command --------------------------------------------------------------------------------
 */

/* The options of `compile`: the codes of its own, and the table getopt_long reads. */
enum {
    O_JSON = 1,
    O_ARCH,
    O_DEVICE,
    O_ALL,
    O_LIST_OPS,
    O_LIST_DEVICES,
    O_JOBS,
    O_SOURCE,
    O_DEFINE,
    O_KERNEL,
    O_NO_SASS,
    O_VERBOSE,
};
static const struct option opts[] = {
    FT_CLI_ARG("preset", FT_OPT_PRESET),
    FT_CLI_LIST("set", FT_OPT_SET),
    FT_CLI_LIST("attr", FT_OPT_ATTR),
    FT_CLI_ARG("config", FT_OPT_CONFIG),
    FT_CLI_FLAG("json", O_JSON),
    FT_CLI_ARG("arch", O_ARCH),
    FT_CLI_ARG("device", O_DEVICE),
    FT_CLI_FLAG("all-configs", O_ALL),
    FT_CLI_FLAG("list-ops", O_LIST_OPS),
    FT_CLI_FLAG("list-devices", O_LIST_DEVICES),
    FT_CLI_ARG("jobs", O_JOBS),
    FT_CLI_ARG("source", O_SOURCE),
    FT_CLI_LIST("define", O_DEFINE),
    FT_CLI_LIST("kernel", O_KERNEL),
    FT_CLI_FLAG("no-sass", O_NO_SASS),
    FT_CLI_FLAG("verbose", O_VERBOSE),
    FT_CLI_END,
};

/* The command line of one compile. */
typedef struct {
    ft_cli_problem prob;
    int json, all, lops, ldevs, no_sass, verbose;
    long njobs;
    const char *arch, *devname, *source;
    const char *defines[FT_CUDA_MAX_DEFINES], *kargs[MAX_KERNEL_ARGS];
    int ndefines, nkargs;
} compile_args;

/* One option of compile's own (not a problem option). Returns an exit code, 0 when taken. */
static int compile_opt(void *ctx, int o, const char *arg) {
    compile_args *a = ctx;
    switch (o) {
    case O_JSON: a->json = 1; break;
    case O_ARCH: a->arch = arg; break;
    case O_DEVICE: a->devname = arg; break;
    case O_ALL: a->all = 1; break;
    case O_NO_SASS: a->no_sass = 1; break;
    case O_VERBOSE: a->verbose = 1; break;
    case O_LIST_OPS: a->lops = 1; break;
    case O_LIST_DEVICES: a->ldevs = 1; break;
    case O_JOBS: {
        if (!ft_cli_whole(arg, 1, 16, &a->njobs))
            return ft_cli_fail(FT_EXIT_USAGE, "compile: --jobs expects 1 to 16, got '%s'", arg);
        break;
    }
    case O_SOURCE: a->source = arg; break;
    case O_DEFINE:
        if (a->ndefines == FT_CUDA_MAX_DEFINES)
            return ft_cli_fail(FT_EXIT_USAGE, "compile: at most %d --define", FT_CUDA_MAX_DEFINES);
        if (strlen(arg) >= sizeof((ft_cuda_module_spec *)0)->defines[0])
            return ft_cli_fail(FT_EXIT_USAGE, "compile: --define '%s' is too long", arg);
        a->defines[a->ndefines++] = arg;
        break;
    case O_KERNEL:
        if (a->nkargs == MAX_KERNEL_ARGS || a->nkargs == FT_CUDA_MAX_KERNELS)
            return ft_cli_fail(FT_EXIT_USAGE, "compile: at most %d --kernel", FT_CUDA_MAX_KERNELS);
        a->kargs[a->nkargs++] = arg;
        break;
    }
    return FT_EXIT_OK;
}

static int compile_parse(int argc, char **argv, compile_args *a) {
    memset(a, 0, sizeof *a);
    ft_cli_problem_init(&a->prob);
    a->njobs = ft_env_usable_cpus();
    int code = ft_cli_parse_problem("compile", argc, argv, opts, &a->prob, compile_opt, a);
    if (code) return code;
    if (a->njobs < 1) a->njobs = 1;
    if (a->njobs > 16) a->njobs = 16;
    return FT_EXIT_OK;
}

/* The operands and options that go together, then the device and the architecture. */
static int compile_check(compile_args *a, int argc, char **argv, const ft_gpu_spec **dev) {
    if (!a->source && optind >= argc)
        return ft_cli_fail(FT_EXIT_USAGE,
                           "compile: which op? (see `flaretune compile --list-ops`)");
    if (a->source && optind < argc)
        return ft_cli_fail(FT_EXIT_USAGE, "compile: --source takes no op, got '%s'", argv[optind]);
    if (optind + 1 < argc)
        return ft_cli_fail(FT_EXIT_USAGE, "compile: unexpected argument '%s'", argv[optind + 1]);
    if (!a->source && (a->ndefines || a->nkargs))
        return ft_cli_fail(FT_EXIT_USAGE, "compile: --define and --kernel go with --source");
    const ft_cli_problem *p = &a->prob;
    if (a->source && (a->all || p->config || p->preset || p->nsets || p->nattrs))
        return ft_cli_fail(FT_EXIT_USAGE,
                           "compile: --source compiles one module: no configurations or problem");
    if (a->all && p->config)
        return ft_cli_fail(FT_EXIT_USAGE, "compile: --all-configs or --config, not both");
    if (a->arch && a->devname)
        return ft_cli_fail(FT_EXIT_USAGE,
                           "compile: --arch or --device, not both (a device implies its "
                           "architecture)");
    if (a->arch) {
        if (!ft_cli_arch_ok(a->arch))
            return ft_cli_fail(FT_EXIT_USAGE,
                               "compile: --arch '%s' is not a GPU architecture (e.g. sm_80, "
                               "sm_90a)",
                               a->arch);
        *dev = ft_gpu_spec_for_arch(a->arch);
    } else {
        *dev = ft_gpu_spec_find(a->devname ? a->devname : "h200");
        if (!*dev)
            return ft_cli_fail(FT_EXIT_USAGE, "compile: unknown device '%s' (known: %s)",
                               a->devname, ft_gpu_spec_names());
        a->arch = (*dev)->arch;
    }
    return FT_EXIT_OK;
}

/* The op and the problem its configurations are checked against (none with --source). */
typedef struct {
    const ft_op *op;
    const ft_cuda_op *cop;
    ft_call c; /* initialised when op is set */
    ft_preset p;
    ft_dt dt;
} compile_problem;

static int compile_problem_make(const compile_args *a, const char *name, compile_problem *pr) {
    memset(pr, 0, sizeof *pr);
    pr->dt = FT_DT_F32;
    if (a->source) return FT_EXIT_OK;
    ft_err err = {0};
    int code;
    pr->op = ft_op_find(name, &err);
    if (!pr->op) return ft_cli_fail_err(&err);
    pr->cop = ft_cuda_op_of(pr->op);
    if (!pr->cop) {
        char known[512] = "";
        size_t k = 0;
        for (int i = 0; i < ft_op_count() && k < sizeof known; i++)
            if (ft_op_at(i)->cuda)
                k += (size_t)snprintf(known + k, sizeof known - k, "%s%s", k ? ", " : "",
                                      ft_op_at(i)->name);
        return ft_cli_fail(FT_EXIT_USAGE, "compile: %s has no CUDA kernels (CUDA ops: %s)", name,
                           k ? known : "none yet");
    }
    ft_call_init(&pr->c, pr->op);
    if ((code = ft_cli_apply_attrs(&a->prob, &pr->c))) return code;
    if ((code = ft_cli_make_preset(&a->prob, ft_cli_default_preset(pr->op), &pr->p))) return code;
    if (pr->op->from_preset(&pr->c, &pr->p, &err)) return ft_cli_fail_err(&err);
    ft_call_resolve_backward(&pr->c);
    pr->dt = ft_cuda_call_dt(&pr->c);
    return FT_EXIT_OK;
}

#if FT_HAVE_CUDA
/* The configurations to report and the distinct modules they need. */
typedef struct {
    ft_cuda_pool *pool; /* the distinct modules, compiled on --jobs threads */
    double t0, seconds; /* when the first was queued; the wall time until the last was done */
    entry *es;
    int nes, skipped;
    int status; /* the exit code so far: a failure does not stop the others */
    char source_path[256]; /* --source as found (the module spec points at it) */
} compile_work;

/* The file --source names, as a user means it: absolute, or from the working directory; a name
 * found there is made absolute, any other (flaretune's own, "fusion/fusion.cu") is left to the
 * kernel tree. Returns an exit code. */
static int resolve_source(const char *given, char *out, size_t n) {
    char real[PATH_MAX], tree[PATH_MAX], cwd[PATH_MAX], in_tree[2 * PATH_MAX];
    const char *use = given;
    if (strlen(given) >= n)
        return ft_cli_fail(FT_EXIT_USAGE, "compile: the path of --source %s is too long", given);
    if (given[0] != '/' && access(given, R_OK) == 0 && realpath(given, real)) use = real;
    if (use == given) { /* not read from the working directory: absolute, or the kernel tree's */
        const int here = errno;
        ft_kernel_dir(tree, sizeof tree);
        snprintf(in_tree, sizeof in_tree, "%s/%s", tree, given);
        if (given[0] == '/' && access(given, R_OK) != 0)
            return ft_cli_fail(FT_EXIT_FAIL, "compile: cannot read --source %s: %s", given,
                               strerror(errno));
        if (given[0] != '/' && here != ENOENT)
            return ft_cli_fail(FT_EXIT_FAIL, "compile: cannot read --source %s: %s", given,
                               strerror(here));
        if (given[0] != '/' && access(in_tree, R_OK) != 0)
            return ft_cli_fail(FT_EXIT_FAIL,
                               "compile: --source %s: no such file in the working directory "
                               "(%s) nor in flaretune's kernel tree (%s)",
                               given, getcwd(cwd, sizeof cwd) ? cwd : ".", tree);
    }
    if (strlen(use) >= n || strlen(use) >= sizeof((ft_cuda_pool_job *)0)->source)
        return ft_cli_fail(FT_EXIT_USAGE, "compile: the path of --source %s is too long", given);
    memcpy(out, use, strlen(use) + 1); /* its length checked above */
    return FT_EXIT_OK;
}

/* One module: the kernels asked for, or every kernel ptxas reports. */
static int plan_source(const compile_args *a, compile_work *W) {
    char *path = W->source_path;
    int code = resolve_source(a->source, path, sizeof W->source_path);
    if (code) return code;
    W->es = calloc(1, sizeof *W->es);
    if (!W->es) return ft_cli_fail(FT_EXIT_FAIL, "compile: out of memory");
    W->nes = 1;
    entry *es = W->es;
    ft_cuda_module_spec *m = &es->mods[0];
    es->nmods = 1;
    snprintf(es->text, sizeof es->text, "%s", a->source);
    m->source = path;
    for (int i = 0; i < a->ndefines; i++)
        snprintf(m->defines[m->ndefines++], sizeof m->defines[0], "%s", a->defines[i]);
    for (int i = 0; i < a->nkargs; i++) {
        char *k = (char *)a->kargs[i], *c1 = strchr(k, ':'), *end = NULL;
        long th = 0, dyn = 0;
        if (c1) {
            *c1 = '\0';
            th = strtol(c1 + 1, &end, 10);
            if (*end == ':') dyn = strtol(end + 1, &end, 10);
        }
        if (!c1 || !*k || *end || th < 1 || th > 4096 || dyn < 0) {
            if (c1) *c1 = ':'; /* the argument as given */
            return ft_cli_fail(FT_EXIT_USAGE,
                               "compile: --kernel expects NAME:THREADS[:DYN_SMEM], got '%s'",
                               a->kargs[i]);
        }
        m->kernels[m->nkernels].name = k;
        m->kernels[m->nkernels].block_threads = (int)th;
        m->kernels[m->nkernels].dyn_smem = (size_t)dyn;
        m->nkernels++;
    }
    if ((es->job[0] = ft_cuda_pool_add(W->pool, m)) < 0)
        return ft_cli_fail(FT_EXIT_FAIL, "compile: out of memory");
    return FT_EXIT_OK;
}

/* Every valid configuration of the op's space (--all-configs), or the one given or default. */
static int plan_space(const compile_args *a, compile_problem *pr, compile_work *W) {
    const ft_space *s = pr->cop->space;
    const ft_op *op = pr->op;
    ft_config one;
    int64_t total = 1;
    if (a->all) {
        total = ft_space_size(s);
    } else {
        ft_err err = {0};
        if (ft_config_parse(s, a->prob.config ? a->prob.config : "", &one, &err))
            return ft_cli_fail(FT_EXIT_USAGE, "compile: %s on cuda: %s", op->name, err.msg);
        char why[256] = "";
        int verdict = ft_space_check(s, &pr->c, &one, why, sizeof why);
        if (verdict == FT_CONFIG_INVALID)
            return ft_cli_fail(FT_EXIT_USAGE, "compile: %s: configuration not valid at %s: %s",
                               op->name, pr->p.name, why);
        if (verdict == FT_CONFIG_DUPLICATE)
            fprintf(stderr, "compile: note: %s (a tuner skips it; compiled as given)\n", why);
    }
    W->es = calloc((size_t)(total > 0 ? total : 1), sizeof *W->es);
    if (!W->es)
        return ft_cli_fail(FT_EXIT_FAIL, "compile: out of memory for %lld configurations",
                           (long long)total);
    for (int64_t k = 0; k < total; k++) {
        ft_config cfg = one;
        if (a->all) {
            ft_space_config_at(s, k, &cfg);
            if (!ft_space_valid(s, &pr->c, &cfg, NULL, 0)) {
                W->skipped++;
                continue;
            }
        }
        entry *e = &W->es[W->nes++];
        ft_config_format(s, &cfg, e->text, sizeof e->text);
        e->nmods = pr->cop->modules(&pr->c, pr->dt, &cfg, e->mods, MAX_MODULES);
        if (e->nmods < 0 || e->nmods > MAX_MODULES) {
            W->status = ft_cli_fail(FT_EXIT_FAIL,
                                    "compile: %s: config %s: the op names %d modules (0 to %d)",
                                    op->name, e->text, e->nmods, MAX_MODULES);
            e->nmods = 0;
        }
        for (int i = 0; i < e->nmods; i++)
            if (e->mods[i].overflow)
                return ft_cli_fail(FT_EXIT_FAIL,
                                   "compile: %s: config %s: a define did not fit the module spec",
                                   op->name, e->text);
        for (int i = 0; i < e->nmods; i++)
            if ((e->job[i] = ft_cuda_pool_add(W->pool, &e->mods[i])) < 0)
                return ft_cli_fail(FT_EXIT_FAIL, "compile: out of memory");
    }
    return FT_EXIT_OK;
}

/* The counts the report ends with. */
typedef struct {
    int nkernels, nok, npruned, nfailed, ncached, cfg_pruned;
} tallies;

/* One configuration's kernels: a table, or its JSON object appended to jcfgs, or (dr) its
 * rows added to the kernels' summary. */
static void report_entry(const compile_args *a, const ft_gpu_spec *dev, const compile_problem *pr,
                         compile_work *W, const entry *e, int ci, tallies *t, json_t *jcfgs,
                         kernel_groups *dr) {
    int json = a->json;
    json_t *jk = json ? json_array() : NULL, *jerr = json ? json_array() : NULL;
    int cfg_ok = 1;
    if (!json && !dr) {
        printf("\n%s%s\n", pr->op ? "config " : "module ", e->text);
        if (e->nmods == 0) printf("  no kernel modules (cuBLASLt only)\n");
    }
    int header = 0;
    for (int mi = 0; mi < e->nmods; mi++) {
        const ft_cuda_module_spec *m = &e->mods[mi];
        const ft_cuda_pool_job *j = ft_cuda_pool_job_at(W->pool, e->job[mi]);
        if (j->status) {
            t->nfailed++;
            cfg_ok = 0;
            W->status = FT_EXIT_FAIL;
            fail_line(pr->op, e->text, j->msg);
            if (json)
                json_array_append_new(jerr, json_string(j->msg));
            else if (dr)
                printf("config %s: %s: compile error: %s\n", e->text, m->source, j->msg);
            else
                printf("  %s: compile error: %s\n", m->source, j->msg);
            continue;
        }
        /* The kernels the spec launches; with --source and no --kernel, all of them. */
        int n = m->nkernels ? m->nkernels : j->res.nkernels;
        for (int ki = 0; ki < n; ki++) {
            row r;
            if (m->nkernels)
                make_row(dev, j, m->kernels[ki].name, m->kernels[ki].block_threads,
                         m->kernels[ki].dyn_smem, &r);
            else /* by the name the source writes, not the mangled one */
                make_row(dev, j, j->res.kernels[ki].written, 0, 0, &r);
            row_sass(&r, j, a->no_sass);
            t->nkernels++;
            if (!r.found) {
                t->nfailed++;
                W->status = FT_EXIT_FAIL;
                fail_line(pr->op, e->text, r.why);
            } else if (r.ok) {
                t->nok++;
            } else {
                t->npruned++;
                cfg_ok = 0;
            }
            if (json) {
                json_array_append_new(jk, row_json(&r));
            } else if (dr) {
                if (group_add(dr, &r, ci)) W->status = FT_EXIT_FAIL;
            } else {
                if (!header++) print_header();
                print_row(&r);
            }
        }
    }
    t->cfg_pruned += !cfg_ok;
    if (json) {
        json_t *jc = json_pack("{s:s, s:o, s:o, s:s}", "config", e->text, "kernels", jk, "errors",
                               jerr, "verdict", cfg_ok ? "ok" : "pruned");
        json_array_append_new(jcfgs, jc);
    }
}

/* What was compiled, for what, and where its occupancy is computed (text only). */
static void report_title(const compile_args *a, const ft_gpu_spec *dev, const compile_problem *pr,
                         const compile_work *W) {
    char dims[256] = "";
    const char *dt = pr->dt == FT_DT_BF16 ? "bf16" : "f32";
    if (pr->op) ft_call_dims_str(&pr->c, dims, sizeof dims);
    if (pr->op && a->all)
        printf("%s: %d valid configuration%s of %d at %s (%s, dtype %s), compiled for %s",
               pr->op->name, W->nes, W->nes == 1 ? "" : "s", W->nes + W->skipped, pr->p.name, dims,
               dt, a->arch);
    else if (pr->op)
        printf("%s: the %s configuration at %s (%s, dtype %s), compiled for %s", pr->op->name,
               a->prob.config ? "given" : "default", pr->p.name, dims, dt, a->arch);
    else
        printf("%s, compiled for %s", a->source, a->arch);
    if (dev)
        printf("; occupancy on %s (%s, %d SMs)\n", dev->name, dev->model, dev->sm_count);
    else
        printf("; no device of the table has %s: no occupancy\n", a->arch);
}

/* Each distinct module's compile: where it came from and how long it took (JSON). */
static json_t *compiles_json(compile_work *W) {
    json_t *a = json_array();
    for (int i = 0; i < ft_cuda_pool_size(W->pool); i++) {
        const ft_cuda_pool_job *j = ft_cuda_pool_job_at(W->pool, i);
        json_t *defs = json_array();
        for (int d = 0; d < j->ndefines; d++)
            json_array_append_new(defs, json_string(j->defines[d]));
        json_array_append_new(a, json_pack("{s:s, s:o, s:b, s:f, s:s?}", "source", j->source,
                                           "defines", defs, "cached", j->cached, "seconds",
                                           j->seconds, "error", j->status ? j->msg : NULL));
    }
    return a;
}

/* How the compiling went: wall time, throughput, where the modules came from (text). */
static void report_compiles(const compile_problem *pr, compile_work *W,
                            const ft_cuda_pool_stats *st, int no_sass) {
    double longest = 0;
    for (int i = 0; i < ft_cuda_pool_size(W->pool); i++) {
        const ft_cuda_pool_job *j = ft_cuda_pool_job_at(W->pool, i);
        if (j->seconds > longest) longest = j->seconds;
    }
    int th = ft_cuda_pool_threads(W->pool);
    printf("compiling took %.1f s on %d thread%s", W->seconds, th, th == 1 ? "" : "s");
    if (pr->op && W->seconds > 0) printf(" (%.1f configurations/s)", W->nes / W->seconds);
    printf(": %d compiled, %d from the cache, %d failed; %.1f s of compiler time, the longest "
           "module %.1f s",
           st->compiled, st->cached, st->failed, st->seconds, longest);
    if (!no_sass) printf("; %.1f s reading SASS", st->sass_s);
    printf("\n");
    /* The instruction mix missing: why, once (the tool, most often). */
    for (int i = 0; i < ft_cuda_pool_size(W->pool) && !no_sass; i++) {
        const ft_cuda_pool_job *j = ft_cuda_pool_job_at(W->pool, i);
        if (j->status == FT_OK && j->sass_status) {
            printf("no instruction mix (ins/B): %s\n", j->sass_msg);
            break;
        }
    }
}

static void report(const compile_args *a, const ft_gpu_spec *dev, const compile_problem *pr,
                   compile_work *W) {
    tallies t = {0, 0, 0, 0, 0, 0};
    ft_cuda_pool_stats st;
    ft_cuda_pool_stats_of(W->pool, &st);
    t.ncached = st.cached;
    json_t *jcfgs = a->json ? json_array() : NULL;
    if (!a->json) report_title(a, dev, pr, W);
    /* Every configuration's table with --verbose; else the kernels summed up. */
    kernel_groups dr = {NULL, 0, 0};
    int summary = !a->json && a->all && !a->verbose;
    for (int ci = 0; ci < W->nes; ci++)
        report_entry(a, dev, pr, W, &W->es[ci], ci, &t, jcfgs, summary ? &dr : NULL);
    if (summary) {
        print_groups(&dr, W->nes);
        free(dr.g);
    }
    int nes = W->nes, nmods = st.jobs;
    if (a->json) {
        json_t *root =
            json_pack("{s:s?, s:s?, s:s?, s:s, s:s, s:s?, s:i, s:i, s:i, s:i, s:o}", "op",
                      pr->op ? pr->op->name : NULL, "source", a->source, "preset",
                      pr->op ? pr->p.name : NULL, "dtype", pr->dt == FT_DT_BF16 ? "bf16" : "f32",
                      "arch", a->arch, "device", dev ? dev->name : NULL, "configs", nes, "skipped",
                      W->skipped, "modules", nmods, "cached", t.ncached, "results", jcfgs);
        json_object_set_new(root, "compiled", json_integer(st.compiled));
        json_object_set_new(root, "failed", json_integer(st.failed));
        json_object_set_new(root, "threads", json_integer(ft_cuda_pool_threads(W->pool)));
        json_object_set_new(root, "seconds", json_real(W->seconds));
        json_object_set_new(root, "configs_per_s",
                            pr->op && W->seconds > 0 ? json_real(nes / W->seconds) : json_null());
        json_object_set_new(root, "compile_seconds", json_real(st.seconds));
        json_object_set_new(root, "sass_seconds", a->no_sass ? json_null() : json_real(st.sass_s));
        json_object_set_new(root, "compiles", compiles_json(W));
        ft_cli_print_json(root);
    } else {
        printf("\n%d configuration%s", nes, nes == 1 ? "" : "s");
        if (W->skipped) printf(" (%d more ruled out by the space's constraints)", W->skipped);
        printf(", %d module%s (%d from the cache), %d kernel%s: %d ok, %d pruned, %d failed", nmods,
               nmods == 1 ? "" : "s", t.ncached, t.nkernels, t.nkernels == 1 ? "" : "s", t.nok,
               t.npruned, t.nfailed);
        if (pr->op) printf("; %d of %d configurations would be timed", nes - t.cfg_pruned, nes);
        printf("\n");
        report_compiles(pr, W, &st, a->no_sass);
    }
}

/* Plan the modules (the pool starts on each as it is queued), wait for them, report. Returns
 * the exit code. */
static int compile_modules(const compile_args *a, const ft_gpu_spec *dev, compile_problem *pr) {
    if (!ft_nvrtc_arch_supported(a->arch))
        return ft_cli_fail(FT_EXIT_USAGE, "compile: NVRTC %s cannot compile for %s",
                           ft_nvrtc_version(), a->arch);
    compile_work W;
    memset(&W, 0, sizeof W);
    ft_err err = {0};
    if (ft_cuda_pool_for_arch(a->arch, (int)a->njobs, &W.pool, &err)) return ft_cli_fail_err(&err);
    if (!a->no_sass) ft_cuda_pool_keep_sass(W.pool);
    W.t0 = ft_now_s();
    int code = a->source ? plan_source(a, &W) : plan_space(a, pr, &W);
    if (!code) {
        ft_cuda_pool_wait_all(W.pool);
        W.seconds = ft_now_s() - W.t0;
        report(a, dev, pr, &W);
        code = W.status;
    }
    ft_cuda_pool_free(W.pool);
    free(W.es);
    return code;
}
#endif

static int run(int argc, char **argv) {
    if (ft_cli_names_t1(argc, argv)) return ft_cli_compile_t1(argc, argv);
    compile_args a;
    compile_problem pr;
    const ft_gpu_spec *dev = NULL;
    int code = compile_parse(argc, argv, &a);
    if (code) return code;
    if (a.lops || a.ldevs) {
        if (optind < argc)
            return ft_cli_fail(FT_EXIT_USAGE, "compile: --list-ops and --list-devices take no op");
        if (a.lops && a.ldevs)
            return ft_cli_fail(FT_EXIT_USAGE, "compile: --list-ops or --list-devices, not both");
        return a.lops ? list_ops(a.json) : list_devices(a.json);
    }
    if ((code = compile_check(&a, argc, argv, &dev))) return code;
    if ((code = compile_problem_make(&a, argv[optind], &pr))) return code;
#if !FT_HAVE_CUDA
    (void)dev;
    return ft_cli_fail(FT_EXIT_NODEV,
                       "compile: this flaretune was built without the CUDA toolkit, so it cannot "
                       "compile CUDA kernels (install the toolkit and configure again)");
#else
    code = compile_modules(&a, dev, &pr);
    if (pr.op) ft_call_free(&pr.c);
    return code;
#endif
}

const ft_cmd ft_cmd_compile = {"compile",
                               "compile an op's CUDA kernels (no GPU needed): registers, spills, "
                               "occupancy",
                               run, usage};
