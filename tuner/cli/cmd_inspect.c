/* cmd_inspect.c: `flaretune inspect`: what Nsight Compute would say of an op's CUDA kernels,
 * without a GPU.
 *
 * The op runs once on the SIMT emulator (cuda-emu) with its profile on (kernels/cuda/emu/prof.h):
 * every launch's warp-level requests, 32-byte sectors and shared-memory wavefronts, with the
 * ideal beside each, the distinct bytes it reads and writes against the op's napkin bytes,
 * barriers and warp collectives, and its busiest source lines. Launches of one kernel are added
 * up. `--json` prints the same as one document for tools.
 *
 * Exit codes: 0 done, 1 the run failed, 2 a usage error.
 */
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "cuda/backend/cuda_backend.h"
#include "cuda/device_emu.h"
#include "cuda/analysis/kfacts.h"
#include "cuda/analysis/predict.h"
#include "core/format.h"
#include "core/json.h"

#define MAX_KERNELS 32
/* The blocks a launch is profiled on by default (--blocks): a grid of more runs a sample. */
#define FT_INSPECT_BLOCKS 16

static void usage(FILE *f) {
    fprintf(
        f, "usage: flaretune inspect OP [--preset P] [--set NAME=VALUE]... [--attr NAME=VALUE]...\n"
           "                 [--config CFG] [--seed N] [--device D] [--sites N] [--json]\n"
           "                 [--blocks N] [--no-sass]\n\n"
           "Run OP's CUDA kernels once on the emulator (cuda-emu) with the memory profile on\n"
           "and print, per kernel: warp-level requests and 32-byte sectors per request of its\n"
           "global loads and stores (coalescing), shared-memory wavefronts per request (bank\n"
           "conflicts), active lanes per request (divergence), the distinct bytes it reads and\n"
           "writes against the op's napkin bytes (re-reads, redundant traffic), barriers and\n"
           "warp collectives (mma, ldmatrix, shuffles), each with its ideal, and the source\n"
           "lines that move the most. Then, from NVRTC's CUBIN for the device's architecture,\n"
           "each kernel's registers, occupancy and SASS instruction mix (nvdisasm), and the\n"
           "time it would take on that device: the largest of DRAM bytes / bandwidth, L2\n"
           "sectors / bandwidth, shared wavefronts / rate, warp instructions / issue rate at\n"
           "its occupancy, tensor FLOPs / peak, with the bound named (docs/cuda.md). The\n"
           "GEMMs an op asks of cuBLASLt are listed with their FLOPs and operands. No GPU is\n"
           "needed.\n\n"
           "  --preset P, --set NAME=VALUE, --attr NAME=VALUE, --seed N\n"
           "                  the problem (default: the op's small preset)\n"
           "  --config CFG    the configuration (NAME=VALUE,...; default: the space's default)\n"
           "  --device D      the GPU to predict for, by name or model (default h200; see\n"
           "                  `flaretune compile --list-devices`)\n"
           "  --sites N       source lines shown per kernel (default 4; 0: none)\n"
           "  --blocks N      profile a launch of more than N blocks (default 16) on a sample of\n"
           "                  N: boundary and interior blocks, each stratum scaled to the grid\n"
           "                  (docs/cuda.md); 0: emulate every block\n"
           "  --json          one JSON document instead of the tables\n"
           "  --no-sass       no SASS instruction mix (nvdisasm takes about 0.5 s a module the\n"
           "                  first time); the issue-bound prediction then counts one\n"
           "                  instruction a memory request (a floor)\n\n");
    ft_cli_inspect_t1_usage(f);
}

typedef struct kernel_sum {
    char name[96];
    char source[64];
    int launches, incomplete;
    int sampled; /* blocks emulated a launch when a launch was sampled (the most); 0: all */
    ft_emu_uint3 grid, block; /* of its first launch */
    ft_emu_launch_prof p;     /* added up; sites merged by address */
    int capsites;
    double gemm_flops, gemm_bytes; /* a GEMM of cuBLASLt's (no kernel of ours): 0 for a kernel */
    int gemm_bf16;
    const ft_kfacts *facts; /* registers, occupancy, SASS on the device (NULL: none) */
    ft_prediction pred;     /* its launches' predicted times, added up */
} kernel_sum;

typedef struct inspect_args {
    ft_cli_problem prob;
    const char *op;
    int json, sites, no_sass, blocks;
    const ft_gpu_spec *gpu;
} inspect_args;

/* The options of `inspect`: the codes of its own, and the table getopt_long reads. */
enum { O_JSON = 1, O_SITES, O_DEVICE, O_NO_SASS, O_BLOCKS };
static const struct option opts[] = {
    FT_CLI_PROBLEM_OPTIONS,
    FT_CLI_ARG("blocks", O_BLOCKS),
    FT_CLI_FLAG("json", O_JSON),
    FT_CLI_FLAG("no-sass", O_NO_SASS),
    FT_CLI_ARG("device", O_DEVICE),
    FT_CLI_ARG("sites", O_SITES),
    FT_CLI_END,
};

/* One option of inspect's own (not a problem option). Returns an exit code, 0 when taken. */
static int inspect_opt(void *ctx, int o, const char *arg) {
    inspect_args *a = ctx;
    if (o == O_JSON) {
        a->json = 1;
    } else if (o == O_NO_SASS) {
        a->no_sass = 1;
    } else if (o == O_DEVICE) {
        if (!(a->gpu = ft_gpu_spec_find(arg)))
            return ft_cli_fail(FT_EXIT_USAGE, "inspect: --device %s: unknown GPU (%s)", arg,
                               ft_gpu_spec_names());
    } else if (o == O_BLOCKS) {
        long v;
        if (!ft_cli_whole(arg, 0, 64, &v) || v == 1)
            return ft_cli_fail(FT_EXIT_USAGE, "inspect: --blocks %s: expected 0 (all) or 2 to 64",
                               arg);
        a->blocks = (int)v;
    } else if (o == O_SITES) {
        long v;
        if (!ft_cli_whole(arg, 0, 1000, &v))
            return ft_cli_fail(FT_EXIT_USAGE, "inspect: --sites %s: expected 0 to 1000", arg);
        a->sites = (int)v;
    }
    return FT_EXIT_OK;
}

static int parse(int argc, char **argv, inspect_args *a) {
    memset(a, 0, sizeof *a);
    ft_cli_problem_init(&a->prob);
    a->prob.backend = "cuda-emu";
    a->sites = 4;
    a->blocks = FT_INSPECT_BLOCKS;
    a->gpu = ft_gpu_spec_find("h200");
    int code = ft_cli_parse_problem("inspect", argc, argv, opts, &a->prob, inspect_opt, a);
    if (code) return code;
    if (strcmp(a->prob.backend, "cuda-emu") != 0)
        return ft_cli_fail(FT_EXIT_USAGE,
                           "inspect: --backend %s: the profile runs the kernels on the emulator; "
                           "leave --backend out (or say cuda-emu)",
                           a->prob.backend);
    code = ft_cli_one_operand("inspect", "see `flaretune compile --list-ops`", argc, argv);
    if (code) return code;
    a->op = argv[optind];
    return 0;
}

/* ---- adding launches up ------------------------------------------------------------------- */

static void add_traffic(ft_emu_traffic *to, const ft_emu_traffic *t) {
    to->requests += t->requests, to->lanes += t->lanes, to->partial += t->partial;
    to->units += t->units, to->ideal += t->ideal, to->bytes += t->bytes, to->lines += t->lines;
}

static int add_site(kernel_sum *k, const ft_emu_site *s) {
    for (int i = 0; i < k->p.nsites; i++) {
        ft_emu_site *t = &k->p.sites[i];
        /* One source line may be several instructions (unrolled, inlined twice): one row. */
        int same_line = s->where[0] && s->where[0] != '?' && strcmp(t->where, s->where) == 0;
        if ((t->pc == s->pc || same_line) && t->kind == s->kind) {
            add_traffic(&t->t, &s->t);
            t->flags |= s->flags;
            if (s->size > t->size) t->size = s->size;
            return 0;
        }
    }
    if (k->p.nsites == k->capsites) {
        int cap = k->capsites ? 2 * k->capsites : 16;
        ft_emu_site *v = realloc(k->p.sites, (size_t)cap * sizeof *v);
        if (!v) return -1;
        k->p.sites = v, k->capsites = cap;
    }
    k->p.sites[k->p.nsites++] = *s;
    return 0;
}

/* Add one launch's predicted time to its kernel's (the bound: that of its slowest launch). */
static void add_prediction(kernel_sum *k, const ft_prediction *p, double *slowest) {
    k->pred.seconds += p->seconds;
    for (int b = 0; b < FT_BOUND_N; b++)
        k->pred.limit[b] += p->limit[b];
    if (p->seconds > *slowest) *slowest = p->seconds, k->pred.bound = p->bound;
}

static int add_launch(kernel_sum *ks, int *nk, const ft_dev_emu_launch_record *r) {
    kernel_sum *k = NULL;
    for (int i = 0; i < *nk && !k; i++)
        if (strcmp(ks[i].name, r->p.kernel) == 0) k = &ks[i];
    if (!k) {
        if (*nk == MAX_KERNELS) return -1;
        k = &ks[(*nk)++];
        memset(k, 0, sizeof *k);
        snprintf(k->name, sizeof k->name, "%s", r->p.kernel);
        snprintf(k->source, sizeof k->source, "%s", r->source);
        k->grid = r->p.grid, k->block = r->p.block;
    }
    k->launches++;
    k->incomplete |= r->incomplete;
    if (r->sampled > k->sampled) k->sampled = r->sampled;
    k->gemm_flops += r->gemm_flops, k->gemm_bytes += r->gemm_bytes;
    k->gemm_bf16 = r->gemm_bf16;
    for (int i = 0; i < FT_EMU_NACC; i++)
        add_traffic(&k->p.t[i], &r->p.t[i]);
    k->p.blocks += r->p.blocks, k->p.warps += r->p.warps;
    k->p.unique_read_bytes += r->p.unique_read_bytes;
    k->p.unique_write_bytes += r->p.unique_write_bytes;
    k->p.cp_async += r->p.cp_async, k->p.barriers += r->p.barriers;
    for (int i = 0; i < FT_EMU_NCOLL; i++)
        k->p.coll[i] += r->p.coll[i];
    for (int i = 0; i < r->p.nsites; i++)
        if (add_site(k, &r->p.sites[i]) != 0) return -1;
    return (int)(k - ks);
}

static int cmp_units(const void *a, const void *b) {
    const ft_emu_site *x = a, *y = b;
    return x->t.units < y->t.units ? 1 : x->t.units > y->t.units ? -1 : 0;
}

/* ---- figures --------------------------------------------------------------------------------- */

static double per(uint64_t a, uint64_t b) { return b ? (double)a / (double)b : 0.0; }

static uint64_t global_sectors(const ft_emu_launch_prof *p) {
    return p->t[FT_EMU_GLD].units + p->t[FT_EMU_GST].units + p->t[FT_EMU_GATOM].units;
}

static uint64_t unique_bytes(const ft_emu_launch_prof *p) {
    return p->unique_read_bytes + p->unique_write_bytes;
}

/* ---- the tables ------------------------------------------------------------------------------ */

static void print_traffic(const char *what, const ft_emu_traffic *t, const char *unit) {
    if (!t->requests) return;
    char bytes[32];
    ft_fmt_bytes((double)t->bytes, bytes, sizeof bytes);
    printf("    %-14s %10llu req  %6.2f %s/req (ideal %5.2f)  %5.1f lanes/req  %5.1f%% partial"
           "  %9s\n",
           what, (unsigned long long)t->requests, per(t->units, t->requests), unit,
           per(t->ideal, t->requests), per(t->lanes, t->requests),
           100.0 * per(t->partial, t->requests), bytes);
}

/* ---- the device: SASS, occupancy, predicted time ------------------------------------------- */

static const char *time_str(double s, char *buf, size_t n) {
    if (s >= 1e-3)
        snprintf(buf, n, "%.3g ms", s * 1e3);
    else
        snprintf(buf, n, "%.3g us", s * 1e6);
    return buf;
}

/* A prediction whose seconds are NaN is none: the config cannot run on the device. */
static void print_prediction(const char *what, const ft_prediction *p, const ft_gpu_spec *g) {
    char t[32], l[32];
    if (isnan(p->seconds)) {
        printf("    %s none: the config cannot run on %s\n", what, g->name);
        return;
    }
    printf("    %s %s on %s, %s-bound (", what, time_str(p->seconds, t, sizeof t), g->name,
           ft_bound_name(p->bound));
    for (int b = 0; b < FT_BOUND_N; b++)
        printf("%s%s %s", b ? ", " : "", ft_bound_name((ft_bound)b),
               time_str(p->limit[b], l, sizeof l));
    printf(")\n");
}

/* "ldg 2, stg 1, fp32 12, int 10, ..." of a mix's non-zero classes, most first. */
static void mix_line(const ft_sass_mix *m, char *buf, size_t n) {
    int order[FT_SASS_NCLASS], k = 0;
    for (int c = 0; c < FT_SASS_NCLASS; c++)
        if (m->count[c]) order[k++] = c;
    for (int i = 1; i < k; i++)
        for (int j = i; j > 0 && m->count[order[j]] > m->count[order[j - 1]]; j--) {
            int t = order[j];
            order[j] = order[j - 1], order[j - 1] = t;
        }
    size_t len = 0;
    buf[0] = '\0';
    for (int i = 0; i < k && len + 1 < n; i++) {
        int w = snprintf(buf + len, n - len, "%s%s %d", i ? ", " : "",
                         ft_sass_class_name((ft_sass_class)order[i]), m->count[order[i]]);
        if (w < 0) break;
        len += (size_t)w;
    }
}

static void print_facts(const kernel_sum *k, const ft_gpu_spec *g) {
    const ft_kfacts *f = k->facts;
    if (!f) return;
    if (f->occ.blocks_per_sm > 0)
        printf("    on %s (%s): %d registers, %d blocks/SM (%.0f%% occupancy, %s-limited)\n",
               g->name, g->arch, f->info.regs, f->occ.blocks_per_sm, 100.0 * f->occ.fraction,
               ft_occ_limit_name(f->occ.limits));
    if (!f->has_sass) return;
    const ft_sass_loop *h = ft_sass_hot_loop(&f->sass);
    const ft_sass_mix *m = h ? &h->mix : &f->sass.mix;
    char mix[256];
    mix_line(m, mix, sizeof mix);
    printf("    SASS %d instructions, %d loop%s; %s %d: %s\n", f->sass.mix.total,
           f->sass.loops_found, f->sass.loops_found == 1 ? "" : "s", h ? "hot loop" : "body",
           m->total, mix);
    printf("    %.2f instructions per global byte a thread moves, %.2f per memory instruction\n",
           ft_kfacts_instructions_per_byte(f), ft_kfacts_instructions_per_request(f));
}

static void print_gemm(const kernel_sum *k) {
    char b[32];
    ft_fmt_bytes(k->gemm_bytes, b, sizeof b);
    printf("\n  %s  (cuBLASLt on a GPU; the host computes it here)  %d call%s, %.3g GFLOP, %s "
           "of operands, %s\n",
           k->name, k->launches, k->launches == 1 ? "" : "s", k->gemm_flops / 1e9, b,
           k->gemm_bf16 ? "bf16: tensor cores" : "f32 with fp32 compute: CUDA cores");
}

static void print_kernel(const kernel_sum *k, double napkin, int nsites, const ft_gpu_spec *g) {
    const ft_emu_launch_prof *p = &k->p;
    if (k->gemm_flops > 0) {
        print_gemm(k);
        print_prediction("predicted", &k->pred, g);
        return;
    }
    printf("\n  %s  (%s)  %d launch%s, grid (%u,%u,%u) x block (%u,%u,%u)%s\n", k->name, k->source,
           k->launches, k->launches == 1 ? "" : "es", k->grid.x, k->grid.y, k->grid.z, k->block.x,
           k->block.y, k->block.z,
           k->incomplete ? "  [incomplete: memory ran out while profiling]" : "");
    if (k->sampled)
        printf("  profiled on %d blocks a launch (boundary and interior, scaled to the grid; the "
               "source lines below are the sample's)\n",
               k->sampled);
    print_traffic("global load", &p->t[FT_EMU_GLD], "sectors");
    print_traffic("global store", &p->t[FT_EMU_GST], "sectors");
    print_traffic("global atomic", &p->t[FT_EMU_GATOM], "sectors");
    print_traffic("shared load", &p->t[FT_EMU_SLD], "wavefr.");
    print_traffic("shared store", &p->t[FT_EMU_SST], "wavefr.");
    char u[32], l2[32], nb[32];
    ft_fmt_bytes((double)unique_bytes(p), u, sizeof u);
    ft_fmt_bytes((double)global_sectors(p) * 32, l2, sizeof l2);
    ft_fmt_bytes(napkin, nb, sizeof nb);
    printf("    distinct bytes %s (read %.3g MB, written %.3g MB); sectors requested %s: "
           "%.2fx the distinct\n",
           u, p->unique_read_bytes / 1e6, p->unique_write_bytes / 1e6, l2,
           per(global_sectors(p) * 32, unique_bytes(p)));
    printf("    barriers %.1f per block; warp collectives per warp: mma %.1f, ldmatrix %.1f, "
           "shuffle %.1f, vote %.1f; cp.async requests %llu\n",
           per(p->barriers, p->blocks), per(p->coll[FT_EMU_COLL_MMA], p->warps),
           per(p->coll[FT_EMU_COLL_LDMATRIX], p->warps),
           per(p->coll[FT_EMU_COLL_SHUFFLE], p->warps), per(p->coll[FT_EMU_COLL_VOTE], p->warps),
           (unsigned long long)p->cp_async);
    (void)napkin, (void)nb;
    for (int i = 0; i < nsites && i < p->nsites; i++) {
        const ft_emu_site *s = &p->sites[i];
        printf("      %-40.40s %-13s %2u B  %6.2f %s/req (ideal %.2f)  %5.1f lanes\n",
               s->where[0] ? s->where : "?", ft_emu_acc_name(s->kind), s->size,
               per(s->t.units, s->t.requests),
               s->kind == FT_EMU_SLD || s->kind == FT_EMU_SST ? "wavefr." : "sectors",
               per(s->t.ideal, s->t.requests), per(s->t.lanes, s->t.requests));
    }
    print_facts(k, g);
    print_prediction("predicted", &k->pred, g);
}

/* ---- JSON ------------------------------------------------------------------------------------ */

static json_t *traffic_json(const ft_emu_traffic *t) {
    json_t *o = json_object();
    json_object_set_new(o, "requests", json_integer((json_int_t)t->requests));
    json_object_set_new(o, "lanes", json_integer((json_int_t)t->lanes));
    json_object_set_new(o, "partial", json_integer((json_int_t)t->partial));
    json_object_set_new(o, "units", json_integer((json_int_t)t->units));
    json_object_set_new(o, "ideal", json_integer((json_int_t)t->ideal));
    json_object_set_new(o, "bytes", json_integer((json_int_t)t->bytes));
    return o;
}

static const char *const acc_keys[FT_EMU_NACC] = {"global_load", "global_store", "global_atomic",
                                                  "shared_load", "shared_store"};

static json_t *prediction_json(const ft_prediction *p) {
    if (isnan(p->seconds)) return json_null(); /* it cannot run there */
    json_t *lim = json_object();
    for (int b = 0; b < FT_BOUND_N; b++)
        json_object_set_new(lim, ft_bound_name((ft_bound)b), json_real(p->limit[b]));
    return json_pack("{s:f, s:s, s:o}", "seconds", p->seconds, "bound", ft_bound_name(p->bound),
                     "limits_s", lim);
}

static json_t *facts_json(const ft_kfacts *f) {
    if (!f) return json_null();
    json_t *o = json_object();
    json_object_set_new(o, "regs", json_integer(f->info.regs));
    json_object_set_new(o, "blocks_per_sm", json_integer(f->occ.blocks_per_sm));
    json_object_set_new(o, "occupancy", json_real(f->occ.fraction));
    json_object_set_new(o, "sass", f->has_sass ? ft_cli_sass_json(&f->sass) : json_null());
    json_object_set_new(o, "instructions_per_memory_instruction",
                        json_real(ft_kfacts_instructions_per_request(f)));
    return o;
}

static json_t *kernel_json(const kernel_sum *k, int nsites) {
    const ft_emu_launch_prof *p = &k->p;
    json_t *o = json_object(), *tr = json_object(), *co = json_object(), *si = json_array();
    json_object_set_new(o, "kernel", json_string(k->name));
    json_object_set_new(o, "source", json_string(k->source));
    json_object_set_new(o, "launches", json_integer(k->launches));
    json_object_set_new(o, "incomplete", json_boolean(k->incomplete));
    json_object_set_new(o, "sampled_blocks", json_integer(k->sampled));
    if (k->gemm_flops > 0) {
        json_object_set_new(o, "gemm",
                            json_pack("{s:f,s:f,s:b}", "flops", k->gemm_flops, "bytes",
                                      k->gemm_bytes, "bf16", k->gemm_bf16));
        json_object_set_new(o, "predicted", prediction_json(&k->pred));
        return o;
    }
    json_object_set_new(
        o, "grid",
        json_pack("[III]", (json_int_t)k->grid.x, (json_int_t)k->grid.y, (json_int_t)k->grid.z));
    json_object_set_new(
        o, "block",
        json_pack("[III]", (json_int_t)k->block.x, (json_int_t)k->block.y, (json_int_t)k->block.z));
    json_object_set_new(o, "blocks", json_integer((json_int_t)p->blocks));
    json_object_set_new(o, "warps", json_integer((json_int_t)p->warps));
    for (int i = 0; i < FT_EMU_NACC; i++)
        json_object_set_new(tr, acc_keys[i], traffic_json(&p->t[i]));
    json_object_set_new(o, "traffic", tr);
    json_object_set_new(o, "unique_read_bytes", json_integer((json_int_t)p->unique_read_bytes));
    json_object_set_new(o, "unique_write_bytes", json_integer((json_int_t)p->unique_write_bytes));
    json_object_set_new(o, "sector_bytes", json_integer((json_int_t)global_sectors(p) * 32));
    json_object_set_new(o, "barriers", json_integer((json_int_t)p->barriers));
    json_object_set_new(o, "cp_async", json_integer((json_int_t)p->cp_async));
    for (int i = 0; i < FT_EMU_NCOLL; i++)
        json_object_set_new(co, ft_emu_coll_class_name(i), json_integer((json_int_t)p->coll[i]));
    json_object_set_new(o, "collectives", co);
    for (int i = 0; i < nsites && i < p->nsites; i++) {
        const ft_emu_site *s = &p->sites[i];
        json_t *j = traffic_json(&s->t);
        json_object_set_new(j, "where", json_string(s->where));
        json_object_set_new(j, "kind", json_string(acc_keys[s->kind]));
        json_object_set_new(j, "bytes_per_lane", json_integer(s->size));
        json_array_append_new(si, j);
    }
    json_object_set_new(o, "sites", si);
    json_object_set_new(o, "device", facts_json(k->facts));
    json_object_set_new(o, "predicted", prediction_json(&k->pred));
    return o;
}

/* ---- the command ----------------------------------------------------------------------------- */

static ft_status profile_run(ft_cli_setup *su, int blocks, ft_dev_emu_launch_record **recs, int *n,
                             ft_err *err) {
    ft_cuda_ctx *x = NULL;
    ft_status s = ft_cuda_ctx_get(1, &x, err);
    if (s == FT_OK) s = ft_dev_emu_set_sample(ft_cuda_dev(x), blocks, err);
    if (s == FT_OK) s = ft_dev_emu_set_profile(ft_cuda_dev(x), 1, err);
    if (s == FT_OK) s = su->be->run(&su->c, &su->cfg, err);
    ft_dev_emu_launch_record *r = NULL;
    int nr = 0;
    if (x) {
        ft_err e2 = {0};
        ft_dev_emu_set_profile(ft_cuda_dev(x), 0, &e2);
        ft_dev_emu_set_sample(ft_cuda_dev(x), 0, &e2);
        ft_dev_emu_profile_take(ft_cuda_dev(x), &r, &nr, &e2);
    }
    if (s != FT_OK) {
        ft_dev_emu_records_free(r, nr);
        return s;
    }
    *recs = r, *n = nr;
    return FT_OK;
}

static int report(const inspect_args *a, const ft_cli_setup *su, kernel_sum *ks, int nk,
                  const ft_kfacts_set *facts, const ft_prediction *total) {
    double napkin = ft_call_io_bytes(&su->c);
    char cfg[512];
    ft_config_format(su->be->space(su->op), &su->cfg, cfg, sizeof cfg);
    uint64_t uniq = 0, sect = 0;
    for (int i = 0; i < nk; i++) {
        uniq += unique_bytes(&ks[i].p) + (uint64_t)ks[i].gemm_bytes;
        sect += global_sectors(&ks[i].p) * 32 + (uint64_t)ks[i].gemm_bytes;
        qsort(ks[i].p.sites, (size_t)ks[i].p.nsites, sizeof *ks[i].p.sites, cmp_units);
    }
    if (a->json) {
        json_t *root = json_object(), *arr = json_array();
        json_object_set_new(root, "op", json_string(su->op->name));
        json_object_set_new(root, "backend", json_string("cuda-emu"));
        json_object_set_new(root, "config", json_string(cfg));
        json_object_set_new(root, "napkin_bytes", json_real(napkin));
        json_object_set_new(root, "unique_bytes", json_integer((json_int_t)uniq));
        json_object_set_new(root, "sector_bytes", json_integer((json_int_t)sect));
        json_object_set_new(root, "device", json_string(a->gpu->name));
        json_object_set_new(root, "arch", json_string(a->gpu->arch));
        json_object_set_new(root, "predicted", prediction_json(total));
        if (facts->sass_why[0])
            json_object_set_new(root, "sass_unavailable", json_string(facts->sass_why));
        if (facts->unfit[0]) json_object_set_new(root, "unfit", json_string(facts->unfit));
        for (int i = 0; i < nk; i++)
            json_array_append_new(arr, kernel_json(&ks[i], a->sites));
        json_object_set_new(root, "kernels", arr);
        char *text = json_dumps(root, JSON_INDENT(2));
        json_decref(root);
        if (!text) return ft_cli_fail(FT_EXIT_FAIL, "inspect: out of memory");
        printf("%s\n", text);
        free(text);
        return 0;
    }
    char nb[32], ub[32], sb[32];
    ft_fmt_bytes(napkin, nb, sizeof nb);
    ft_fmt_bytes((double)uniq, ub, sizeof ub);
    ft_fmt_bytes((double)sect, sb, sizeof sb);
    printf("%s on cuda-emu (memory profile), config %s\n", su->op->name, cfg);
    printf("  napkin bytes %s; distinct bytes the kernels read and write (a GEMM: its operands) %s "
           "(%.1f%% of napkin); sectors requested %s (%.2fx)\n",
           nb, ub, 100.0 * (napkin > 0 ? (double)uniq / napkin : 0), sb, per(sect, uniq));
    print_prediction("all kernels:", total, a->gpu);
    if (facts->sass_why[0]) printf("  no SASS instruction mix: %s\n", facts->sass_why);
    if (facts->unfit[0]) printf("  cannot run on %s: %s\n", a->gpu->name, facts->unfit);
    for (int i = 0; i < nk; i++)
        print_kernel(&ks[i], napkin, a->sites, a->gpu);
    return 0;
}

static int run(int argc, char **argv) {
    if (ft_cli_wants_help(argc, argv)) {
        usage(stdout);
        return 0;
    }
    if (ft_cli_names_t1(argc, argv)) return ft_cli_inspect_t1(argc, argv);
    inspect_args a;
    int code = parse(argc, argv, &a);
    if (code) return code;
    ft_cli_setup su;
    if ((code = ft_cli_setup_problem(&a.prob, a.op, 1, &su))) return code;
    if (!su.op->cuda) {
        ft_call_free(&su.c);
        return ft_cli_fail(FT_EXIT_USAGE, "inspect: %s has no CUDA kernels", su.op->name);
    }
    if ((code = ft_cli_setup_inputs(&a.prob, &su))) return code;
    ft_err err = {0};
    ft_dev_emu_launch_record *recs = NULL;
    int nrec = 0;
    ft_status s = profile_run(&su, a.blocks, &recs, &nrec, &err);
    if (s != FT_OK) {
        ft_call_free(&su.c);
        return ft_cli_fail_err(&err);
    }
    kernel_sum *ks = calloc(MAX_KERNELS, sizeof *ks);
    ft_kfacts_set *facts = calloc(1, sizeof *facts);
    ft_prediction *preds = calloc((size_t)(nrec ? nrec : 1), sizeof *preds);
    double slowest[MAX_KERNELS] = {0};
    int nk = 0;
    if (!ks || !facts || !preds)
        code = ft_cli_fail(FT_EXIT_FAIL, "inspect: out of memory");
    else if (ft_kfacts_of(&su.c, &su.cfg, a.gpu, !a.no_sass, facts, &err) != FT_OK)
        code = ft_cli_fail_err(&err);
    else if (a.no_sass)
        snprintf(facts->sass_why, sizeof facts->sass_why, "not read (--no-sass)");
    for (int i = 0; !code && i < nrec; i++) {
        int k = add_launch(ks, &nk, &recs[i]);
        if (k < 0) {
            code = ft_cli_fail(FT_EXIT_FAIL, "inspect: too many kernels, or out of memory");
            break;
        }
        ks[k].facts = ft_kfacts_find(facts, ks[k].name);
        ft_predict_in in = ft_predict_in_of_record(&recs[i], ks[k].facts);
        preds[i] = ft_predict(a.gpu, &in);
        add_prediction(&ks[k], &preds[i], &slowest[k]);
    }
    if (!code) {
        ft_prediction total = ft_predict_sum(preds, nrec);
        /* A config that cannot run on the device has no time there: the figures above assumed
         * the occupancy it cannot have. */
        if (facts->unfit[0]) {
            total.seconds = NAN;
            for (int k = 0; k < nk; k++)
                ks[k].pred.seconds = NAN;
        }
        code = report(&a, &su, ks, nk, facts, &total);
    }
    free(facts);
    free(preds);
    for (int i = 0; ks && i < nk; i++)
        free(ks[i].p.sites);
    free(ks);
    ft_dev_emu_records_free(recs, nrec);
    ft_call_free(&su.c);
    return code;
}

const ft_cmd ft_cmd_inspect = {"inspect",
                               "what the GPU profiler would say of an op's CUDA kernels, on the "
                               "emulator",
                               run, usage};
