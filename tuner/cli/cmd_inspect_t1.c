/* cmd_inspect_t1.c: `flaretune inspect --t1 FILE`: the predicted time of a T1 kernel's
 * configurations on a named GPU, without one (tuner/t1_run.h).
 *
 * One configuration prints its prediction (or --json); --all-configs or --sample K predicts
 * many and appends one JSON line per configuration to --jsonl OUT, skipping the ones OUT already
 * holds for that device (a predicted landscape is data: a rerun only adds what is missing, and a
 * line cut short by a crash is ignored and predicted again). Progress goes to stderr.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "core/clock.h"
#include "core/rng.h"
#include "cuda/analysis/predict.h"
#include "cuda/device.h"
#include "cuda/specs.h"
#include "tuner/t1.h"
#include "tuner/t1_run.h"

/* The options of `inspect --t1`: the codes of its own, and the table getopt_long reads. */
enum { O_DEVICE = 1, O_BLOCKS, O_JSON, O_JSONL };
static const struct option opts[] = {
    FT_CLI_T1_KERNEL_OPTIONS,
    FT_CLI_T1_ARG_OPTION,
    FT_CLI_ARG("device", O_DEVICE),
    FT_CLI_T1_SELECT_OPTIONS,
    FT_CLI_ARG("blocks", O_BLOCKS),
    FT_CLI_FLAG("json", O_JSON),
    FT_CLI_ARG("jsonl", O_JSONL),
    FT_CLI_END,
};

void ft_cli_inspect_t1_usage(FILE *f) {
    fprintf(f,
            "       flaretune inspect --t1 FILE [--kernel-file F] [--arg "
            "NAME=TYPE:SIZE[:FILL[:V]]]...\n"
            "                         [--device D] [--config CFG | --all-configs | --sample K]\n"
            "                         [--seed S] [--blocks N] [--json] [--jsonl OUT]\n\n"
            "Predict a T1 kernel's time on GPU D (default a100-pcie) without one: NVRTC's\n"
            "resources and SASS for D's architecture, and a sample of N blocks (default 8: half\n"
            "on the grid's edge, half inside) emulated with the profile on, scaled to the grid\n"
            "(docs/t1.md). A configuration the compiler refuses, or that fits no SM, cannot run.\n"
            "--all-configs predicts every configuration the file's conditions allow, --sample K\n"
            "K of them drawn from --seed S (default 1) and the default; each is a JSON line of\n"
            "--jsonl OUT (appended; configurations OUT holds for D at N blocks from this source\n"
            "are not predicted again; an OUT of another kernel, problem size or source is\n"
            "refused).\n"
            "--arg replaces an argument's type, size and fill where the file's do not say what\n"
            "the kernel reads.\n");
}

/* The file's ProblemSize as a JSON array. */
static json_t *problem_of(const ft_t1 *t) {
    json_t *a = json_array();
    for (int d = 0; d < t->nproblem; d++)
        json_array_append_new(a, json_integer(t->problem[d]));
    return a;
}

static json_t *line_of(const ft_t1 *t, const char *source, const ft_config *c, const ft_gpu_spec *g,
                       long blocks, const ft_t1_prediction *p, const char *error) {
    char key[1024], cfg[1024];
    ft_t1_key(t, c, key, sizeof key);
    ft_config_format(&t->space, c, cfg, sizeof cfg);
    json_t *o =
        json_pack("{s:s, s:s, s:s, s:s, s:o, s:i, s:i, s:s}", "key", key, "config", cfg, "device",
                  g->name, "kernel", t->kernel_name, "problem_size", problem_of(t), "blocks",
                  (int)blocks, "model", FT_PREDICT_MODEL, "source", source);
    if (error) {
        json_object_set_new(o, "error", json_string(error));
        return o;
    }
    json_t *lim = json_object();
    for (int b = 0; b < FT_BOUND_N; b++)
        json_object_set_new(lim, ft_bound_name((ft_bound)b), json_real(p->pred.limit[b]));
    json_object_set_new(o, "predicted_s", json_real(p->pred.seconds));
    json_object_set_new(o, "bound", json_string(ft_bound_name(p->pred.bound)));
    json_object_set_new(o, "limits_s", lim);
    json_object_set_new(o, "grid", json_pack("[I,I,I]", (json_int_t)p->grid[0], (json_int_t)p->grid[1],
                                             (json_int_t)p->grid[2]));
    json_object_set_new(o, "block", json_pack("[I,I,I]", (json_int_t)p->block[0], (json_int_t)p->block[1],
                                              (json_int_t)p->block[2]));
    json_object_set_new(o, "sampled", json_pack("{s:i, s:i, s:I}", "boundary", p->sampled_boundary,
                                                "interior", p->sampled_interior, "of",
                                                (json_int_t)p->blocks));
    json_object_set_new(
        o, "inputs",
        json_pack("{s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:i}", "dram_bytes", p->in.dram_bytes,
                  "l2_bytes", p->in.l2_bytes, "shared_wavefronts", p->in.shared_wavefronts,
                  "global_wavefronts", p->in.global_wavefronts, "warp_instructions",
                  p->in.warp_instructions, "fp32_instructions", p->in.fp32_instructions,
                  "convert_instructions", p->in.convert_instructions, "lsu_instructions",
                  p->in.lsu_instructions, "warps_per_sm", p->in.warps_per_sm));
    json_object_set_new(o, "regs", json_integer(p->regs));
    json_object_set_new(o, "spills", json_integer(p->spills));
    json_object_set_new(o, "sass", json_boolean(p->has_sass));
    if (p->unfit[0]) json_object_set_new(o, "unfit", json_string(p->unfit));
    if (p->nvrtc_error[0]) json_object_set_new(o, "nvrtc_error", json_string(p->nvrtc_error));
    json_object_set_new(o, "emulate_s", json_real(p->emulate_s));
    json_object_set_new(o, "compile_s", json_real(p->compile_s));
    return o;
}

/* Keys OUT already holds for device g at this sample size, predicted from this source
 * (ft_t1_source_digest) by this model (complete lines only; a line that failed, or that does not
 * say its source, is predicted again). *other is set when OUT holds a line of another kernel,
 * problem size or source (lines written before kernel and problem were recorded count as this
 * problem's): 1; or 2 where a line (a last one cut short too) is no prediction at all: OUT is
 * then someone else's file, which a torn tail's cut would damage. */
static char **done_keys(const char *path, const ft_t1 *t, const char *source, const char *device,
                        long blocks, int *n, int *other) {
    *n = 0;
    *other = 0;
    FILE *f = fopen(path, "r");
    if (!f) return NULL;
    json_t *problem = problem_of(t);
    char **keys = NULL;
    int cap = 0;
    char *line = NULL;
    size_t lcap = 0;
    ssize_t len;
    while ((len = getline(&line, &lcap, f)) > 0) {
        if (line[len - 1] != '\n') { /* cut short: predicted again, if it was a prediction */
            if (strncmp(line, "{\"key\":", 7) != 0) *other = 2;
            break;
        }
        json_t *o = json_loads(line, 0, NULL);
        if (!json_is_object(o) || !json_is_string(json_object_get(o, "key"))) *other = 2;
        const char *k = json_string_value(json_object_get(o, "key"));
        const char *d = json_string_value(json_object_get(o, "device"));
        const char *kn = json_string_value(json_object_get(o, "kernel"));
        const json_t *ps = json_object_get(o, "problem_size"), *bl = json_object_get(o, "blocks");
        const char *src = json_string_value(json_object_get(o, "source"));
        if (((kn && strcmp(kn, t->kernel_name) != 0) || (ps && !json_equal(ps, problem)) ||
             (src && strcmp(src, source) != 0)) &&
            !*other)
            *other = 1;
        const json_t *pred = json_object_get(o, "predicted_s");
        const int predicted = json_is_number(pred) && json_number_value(pred) > 0 &&
                              isfinite(json_number_value(pred));
        if (k && d && src && predicted && strcmp(d, device) == 0 && !json_object_get(o, "error") &&
            (!bl || json_integer_value(bl) == blocks) &&
            json_integer_value(json_object_get(o, "model")) == FT_PREDICT_MODEL) {
            if (*n == cap) {
                cap = cap ? cap * 2 : 256;
                char **nk = realloc(keys, (size_t)cap * sizeof *nk);
                if (!nk) break;
                keys = nk;
            }
            keys[(*n)++] = strdup(k);
        }
        json_decref(o);
    }
    free(line);
    fclose(f);
    json_decref(problem);
    return keys;
}

/* A line cut short by a crash is cut off, so what is appended starts on a line of its own. */
static void drop_torn_tail(const char *path) {
    FILE *f = fopen(path, "r+");
    if (!f) return;
    long keep = 0, pos = 0;
    int c;
    while ((c = fgetc(f)) != EOF) {
        pos++;
        if (c == '\n') keep = pos;
    }
    if (keep < pos && ftruncate(fileno(f), keep) != 0) { /* the next read skips it anyway */
    }
    fclose(f);
}

static int cmp_str(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The options of inspect --t1 that the other T1 commands do not take. */
typedef struct {
    const char *device, *jsonl;
    int json;
    long blocks;
} inspect_t1_args;

static int inspect_t1_opt(void *ctx, int opt, const char *arg) {
    inspect_t1_args *c = ctx;
    switch (opt) {
    case O_DEVICE: c->device = arg; break;
    case O_JSON: c->json = 1; break;
    case O_JSONL: c->jsonl = arg; break;
    case O_BLOCKS:
        if (!ft_cli_whole(arg, 2, 64, &c->blocks))
            return ft_cli_fail(FT_EXIT_USAGE, "inspect: --blocks takes 2 to 64, not '%s'", arg);
        break;
    }
    return FT_EXIT_OK;
}

int ft_cli_inspect_t1(int argc, char **argv) {
    ft_cli_t1_args a = {.seed = 1};
    inspect_t1_args c = {.device = "a100-pcie", .blocks = 8};
    int code = ft_cli_t1_parse("inspect", argc, argv, opts, &a, inspect_t1_opt, &c);
    if (code) return code;
    const char *device = c.device, *jsonl = c.jsonl;
    int json = c.json, all = a.all;
    long sample = a.sample, blocks = c.blocks;
    unsigned long long seed = a.seed;
    if ((all || sample) && !jsonl)
        return ft_cli_fail(FT_EXIT_USAGE, "inspect: --all-configs and --sample write to --jsonl OUT");
    if ((all || sample) && a.config)
        return ft_cli_fail(FT_EXIT_USAGE, "inspect: --config is one configuration; --all-configs and --sample are many");
    const ft_gpu_spec *g = ft_gpu_spec_find(device);
    if (!g) return ft_cli_fail(FT_EXIT_USAGE, "inspect: unknown device '%s' (one of %s)", device, ft_gpu_spec_names());
    ft_err err = {0};
    ft_t1 *t = NULL;
    if (ft_t1_load_args(a.path, a.kfile, a.argspecs, a.nargspecs, &t, &err)) return ft_cli_t1_fail("inspect", &err);
    ft_cli_t1_note("inspect", t);
    ft_config *cfgs = NULL;
    int64_t n = 0;
    if ((code = ft_cli_t1_select("inspect", t, &a, &cfgs, &n))) {
        ft_t1_free(t);
        return code;
    }
    int ndone = 0, other = 0;
    char source[33] = "";
    if (ft_t1_source_digest(t, source, &err) != FT_OK) {
        free(cfgs);
        ft_t1_free(t);
        return ft_cli_fail_err(&err);
    }
    struct stat sb;
    if (jsonl && stat(jsonl, &sb) == 0 && !S_ISREG(sb.st_mode)) {
        free(cfgs);
        ft_t1_free(t);
        return ft_cli_fail(FT_EXIT_FAIL,
                           "inspect: --jsonl %s is %s, not a file it can append to and read back",
                           jsonl, S_ISDIR(sb.st_mode) ? "a directory" : "a device, pipe or socket");
    }
    char **done = jsonl ? done_keys(jsonl, t, source, g->name, blocks, &ndone, &other) : NULL;
    if (done) qsort(done, (size_t)ndone, sizeof *done, cmp_str);
    if (other) {
        for (int i = 0; i < ndone; i++)
            free(done[i]);
        free(done);
        free(cfgs);
        ft_t1_free(t);
        return other == 2 ? ft_cli_fail(FT_EXIT_USAGE,
                                        "inspect: %s holds lines that are no predictions: give "
                                        "another --jsonl",
                                        jsonl)
                          : ft_cli_fail(FT_EXIT_USAGE,
                                        "inspect: %s holds predictions of another kernel or "
                                        "problem size, or of another source, than %s's: give "
                                        "another --jsonl",
                                        jsonl, a.path);
    }
    FILE *out = NULL;
    if (jsonl) {
        drop_torn_tail(jsonl);
        if (!(out = fopen(jsonl, "a"))) {
            code = ft_cli_fail(FT_EXIT_FAIL, "inspect: cannot append to %s: %s", jsonl,
                               strerror(errno));
            n = -1;
        }
    }
    ft_dev *d = NULL;
    ft_t1_bench *b = NULL;
    if (n >= 0 && (ft_dev_open(FT_DEV_EMU, 0, &d, &err) || ft_t1_bench_open(t, d, seed, &b, &err)))
        code = ft_cli_fail_err(&err);
    double t0 = ft_now_s();
    int64_t made = 0, failed = 0, skipped = 0;
    for (int64_t i = 0; code == FT_EXIT_OK && i < n; i++) {
        char key[1024];
        ft_t1_key(t, &cfgs[i], key, sizeof key);
        const char *kp = key;
        if (done && bsearch(&kp, done, (size_t)ndone, sizeof *done, cmp_str)) {
            skipped++;
            continue;
        }
        ft_t1_prediction p;
        ft_err e = {0};
        ft_status s = ft_t1_predict(b, &cfgs[i], g, (int)blocks, &p, &e);
        if (s == FT_ENOMEM || s == FT_EIO) {
            code = ft_cli_fail_err(&e);
            break;
        }
        json_t *line = line_of(t, source, &cfgs[i], g, blocks, &p, s ? e.msg : NULL);
        failed += s != FT_OK;
        made++;
        if (out) {
            char *text = json_dumps(line, JSON_COMPACT);
            if (!text || fprintf(out, "%s\n", text) < 0 || fflush(out) != 0) {
                free(text);
                json_decref(line);
                code = ft_cli_fail(FT_EXIT_FAIL, "inspect: writing %s failed (disk full?)", jsonl);
                break;
            }
            free(text);
        }
        if (!out && json) {
            /* One config's document: no time where it cannot run (as `inspect OP --json`); the
             * --jsonl lines keep the figures beside `unfit` for the prediction check. */
            if (!s && p.unfit[0]) {
                json_object_set_new(line, "predicted_s", json_null());
                json_object_set_new(line, "bound", json_null());
            }
            json_dumpf(line, stdout, JSON_INDENT(2));
            fputc('\n', stdout);
            if (s) code = FT_EXIT_FAIL; /* the document says why */
        } else if (!out) {
            if (s) {
                code = ft_cli_fail(FT_EXIT_FAIL, "%s", e.msg); /* the kernel's failure, not usage */
            } else {
                printf("%s on %s (%s): %s\n", t->kernel_name, g->name, g->model, key);
                printf("  grid %lld x %lld x %lld, block %lld x %lld x %lld; %d boundary + %d interior blocks "
                       "emulated of %lld\n",
                       p.grid[0], p.grid[1], p.grid[2], p.block[0], p.block[1], p.block[2],
                       p.sampled_boundary, p.sampled_interior, p.blocks);
                printf("  registers %d, spills %d, SASS %s%s%s\n", p.regs, p.spills, p.has_sass ? "read" : "not read",
                       p.unfit[0] ? "; cannot run: " : "", p.unfit);
                if (p.nvrtc_error[0])
                    printf("  NVRTC refused it%s: %s\n", p.unfit[0] ? ", as nvcc does" : "",
                           p.nvrtc_error);
                if (p.unfit[0]) { /* the figures would assume an occupancy it cannot have */
                    printf("  predicted none: it cannot run on %s", g->name);
                } else {
                    printf("  predicted %.4g us, %s-bound:", 1e6 * p.pred.seconds,
                           ft_bound_name(p.pred.bound));
                    for (int k = 0; k < FT_BOUND_N; k++)
                        printf(" %s %.4g us", ft_bound_name((ft_bound)k), 1e6 * p.pred.limit[k]);
                }
                printf("\n  (emulating took %.2f s, compiling %.2f s)\n", p.emulate_s, p.compile_s);
            }
        }
        json_decref(line);
        if (out && (made % 10 == 0 || i == n - 1))
            fprintf(stderr, "inspect: %lld/%lld predicted (%lld failed, %lld already in %s), %.0f s\n",
                    (long long)(made + skipped), (long long)n, (long long)failed, (long long)skipped, jsonl,
                    ft_now_s() - t0);
    }
    if (out && code == FT_EXIT_OK && made == 0 && skipped > 0)
        fprintf(stderr, "inspect: all %lld configurations already in %s: nothing to predict\n",
                (long long)skipped, jsonl);
    if (out && fclose(out) != 0 && code == FT_EXIT_OK)
        code = ft_cli_fail(FT_EXIT_FAIL, "inspect: closing %s failed (disk full?)", jsonl);
    if (out && code == FT_EXIT_OK && made > 0 && failed == made)
        code = ft_cli_fail(FT_EXIT_FAIL,
                           "inspect: none of the %lld configurations could be "
                           "predicted (their errors are in %s)",
                           (long long)made, jsonl);
    /* (what the compiles found: a constant argument without its symbol) */
    if (b && ft_t1_bench_note(b)[0]) fprintf(stderr, "inspect: note: %s\n", ft_t1_bench_note(b));
    for (int i = 0; i < ndone; i++) free(done[i]);
    free(done);
    ft_t1_bench_close(b);
    if (d) ft_dev_close(d);
    free(cfgs);
    ft_t1_free(t);
    return code;
}
