/* t1_run.c: a T1 kernel's arguments on a device and its predicted time on a GPU (t1_run.h). */
#define _GNU_SOURCE
#include "tuner/t1_run.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda/device_emu.h"
#include "core/clock.h"
#include "core/rng.h"

#include "core/paths.h"
#include "cuda/kcache.h"
#if FT_HAVE_CUDA
#include "cuda/analysis/sass.h"
#endif

struct ft_t1_bench {
    const ft_t1 *t;
    ft_dev *d;
    void *dptr[FT_T1_MAX_ARGS];  /* device copies of the vectors                         */
    void *host[FT_T1_MAX_ARGS];  /* host copies (the constant-memory ones are written from) */
    union {
        float f;
        double d;
        int32_t i;
        uint8_t u8;
        int8_t i8;
        uint32_t u32;
        int16_t i16;
        uint16_t u16;
    } scalar[FT_T1_MAX_ARGS];
    void *argv[FT_T1_MAX_ARGS];  /* what a launch passes: pointers to the values          */
    unsigned char no_symbol[FT_T1_MAX_ARGS]; /* 1: a constant argument the kernel has no
                                                __constant__ symbol for (passed only) */
    int probed;                     /* which symbols the kernel lacks has been found out      */
    size_t read_bytes, write_bytes; /* the vectors' bytes it may read, and write: the most a
                                       launch can bring from DRAM and send back */
    char note[256];
};

/* A vector's values: its Random draws, its Constant, or its Generator's value at each index (an
 * error names the first one that is not a value of its Type). */
static ft_status fill(const ft_t1_arg *a, void *buf, ft_rng *r, ft_err *err) {
    double hi = a->fill_value > 0 ? a->fill_value : 1.0;
    for (long long i = 0; i < a->elems; i++) {
        double v = a->random ? ft_rng_uniform(r) * hi : a->fill_value;
        if (a->generator) {
            ft_status s = ft_t1_generate(a, i, &v, err);
            if (s != FT_OK) return s;
        }
        switch (a->type) {
        case FT_T1_FLOAT: ((float *)buf)[i] = (float)v; break;
        case FT_T1_DOUBLE: ((double *)buf)[i] = v; break;
        case FT_T1_INT32: ((int32_t *)buf)[i] = (int32_t)v; break;
        case FT_T1_UINT8:
            ((uint8_t *)buf)[i] = a->random ? (uint8_t)ft_rng_below(r, hi > 1 ? (uint64_t)hi : 256)
                                            : (uint8_t)v;
            break;
        case FT_T1_INT8: ((int8_t *)buf)[i] = (int8_t)v; break;
        case FT_T1_UINT32: ((uint32_t *)buf)[i] = (uint32_t)v; break;
        case FT_T1_INT16: ((int16_t *)buf)[i] = (int16_t)v; break;
        case FT_T1_UINT16: ((uint16_t *)buf)[i] = (uint16_t)v; break;
        }
    }
    return FT_OK;
}

void ft_t1_bench_close(ft_t1_bench *b) {
    if (!b) return;
    for (int i = 0; i < b->t->nargs; i++) {
        if (b->dptr[i]) ft_dev_free(b->d, b->dptr[i]);
        free(b->host[i]);
    }
    free(b);
}

const char *ft_t1_bench_note(const ft_t1_bench *b) { return b->note; }

ft_status ft_t1_bench_open(const ft_t1 *t, ft_dev *d, uint64_t seed, ft_t1_bench **out,
                           ft_err *err) {
    *out = NULL;
    ft_t1_bench *b = calloc(1, sizeof *b);
    if (!b) return ft_err_set(err, FT_ENOMEM, "%s: out of memory", t->path);
    b->t = t;
    b->d = d;
    ft_rng r;
    ft_rng_seed(&r, seed);
    for (int i = 0; i < t->nargs; i++) {
        const ft_t1_arg *a = &t->args[i];
        if (a->scalar) {
            switch (a->type) {
            case FT_T1_FLOAT: b->scalar[i].f = (float)a->fill_value; break;
            case FT_T1_DOUBLE: b->scalar[i].d = a->fill_value; break;
            case FT_T1_INT32: b->scalar[i].i = (int32_t)a->fill_value; break;
            case FT_T1_UINT8: b->scalar[i].u8 = (uint8_t)a->fill_value; break;
            case FT_T1_INT8: b->scalar[i].i8 = (int8_t)a->fill_value; break;
            case FT_T1_UINT32: b->scalar[i].u32 = (uint32_t)a->fill_value; break;
            case FT_T1_INT16: b->scalar[i].i16 = (int16_t)a->fill_value; break;
            case FT_T1_UINT16: b->scalar[i].u16 = (uint16_t)a->fill_value; break;
            }
            b->argv[i] = &b->scalar[i];
            continue;
        }
        size_t bytes = (size_t)a->elems * a->elem_bytes;
        b->host[i] = malloc(bytes);
        if (!b->host[i]) {
            ft_t1_bench_close(b);
            return ft_err_set(err, FT_ENOMEM, "%s: argument %s: %zu bytes: out of memory", t->path,
                              a->name, bytes);
        }
        ft_status s = fill(a, b->host[i], &r, err);
        if (s != FT_OK) {
            ft_t1_bench_close(b);
            return ft_err_wrap(err, "%s", t->path);
        }
        s = ft_dev_alloc(d, bytes, &b->dptr[i], err);
        if (s == FT_OK) s = ft_dev_copy(d, b->dptr[i], b->host[i], bytes, FT_COPY_H2D, err);
        if (s != FT_OK) {
            ft_t1_bench_close(b);
            return ft_err_wrap(err, "%s: argument %s", t->path, a->name);
        }
        b->argv[i] = &b->dptr[i];
        if (a->reads) b->read_bytes += bytes;
        if (a->writes) b->write_bytes += bytes;
    }
    *out = b;
    return FT_OK;
}

void *ft_t1_bench_arg(const ft_t1_bench *b, int i) { return b->dptr[i]; }

void **ft_t1_bench_argv(ft_t1_bench *b) { return b->argv; }

const void *ft_t1_bench_host(const ft_t1_bench *b, int i) { return b->host[i]; }

/* The names of the constant-memory arguments whose symbols are written (all but those found
 * missing), into syms. Returns how many. */
static int written_symbols(const ft_t1_bench *b, const char **syms) {
    int ns = 0;
    for (int i = 0; i < b->t->nargs; i++)
        if (b->t->args[i].constant && !b->no_symbol[i]) syms[ns++] = b->t->args[i].name;
    return ns;
}

/* After a compile with symbols failed: find which constant arguments the kernel has no
 * __constant__ symbol for, each compiled alone (a compiler names only its first error, and
 * NVRTC's differs from the emulator's). Only when the kernel compiles without any symbol, so an
 * error of the kernel's own is never taken for a missing symbol. Notes the names. */
static void find_missing_symbols(ft_t1_bench *b, ft_dev_source *src) {
    ft_dev_module *m;
    src->nsymbols = 0;
    if (ft_dev_compile_file(b->d, src, &m, NULL) != FT_OK) return; /* a later config will tell */
    b->probed = 1;
    size_t k = 0;
    for (int i = 0; i < b->t->nargs; i++) {
        if (!b->t->args[i].constant) continue;
        const char *one = b->t->args[i].name;
        src->symbols = &one;
        src->nsymbols = 1;
        if (ft_dev_compile_file(b->d, src, &m, NULL) == FT_OK) continue;
        b->no_symbol[i] = 1;
        if (k < sizeof b->note)
            k += (size_t)snprintf(b->note + k, sizeof b->note - k, "%s%s", k ? ", " : "", one);
    }
    if (k && k < sizeof b->note)
        snprintf(b->note + k, sizeof b->note - k,
                 ": the kernel has no __constant__ symbol of that name; passed as an argument "
                 "only");
}

ft_status ft_t1_bench_compile(ft_t1_bench *b, const ft_config *cfg, ft_dev_module **m, ft_err *err) {
    const ft_t1 *t = b->t;
    char defs[FT_T1_MAX_DEFINES][96];
    const char *dp[FT_T1_MAX_DEFINES], *syms[FT_T1_MAX_ARGS];
    int nd = ft_t1_defines(t, cfg, defs, FT_T1_MAX_DEFINES);
    for (int i = 0; i < nd; i++) dp[i] = defs[i];
    int ns = written_symbols(b, syms);
    const char *kn = t->kernel_name;
    ft_dev_source src = {.path = t->kernel_file,
                         .defines = dp,
                         .ndefines = nd,
                         .options = (const char *const *)t->options,
                         .noptions = t->noptions,
                         .kernels = &kn,
                         .nkernels = 1,
                         .symbols = syms,
                         .nsymbols = ns};
    ft_status s = ft_dev_compile_file(b->d, &src, m, err);
    if (s != FT_OK && ns && !b->probed) {
        /* As Kernel Tuner: an argument without its symbol is passed; there is nothing else. */
        find_missing_symbols(b, &src);
        src.symbols = syms;
        src.nsymbols = written_symbols(b, syms);
        if (src.nsymbols < ns) s = ft_dev_compile_file(b->d, &src, m, err);
    }
    if (s != FT_OK) return s;
    for (int i = 0; i < t->nargs; i++) {
        const ft_t1_arg *a = &t->args[i];
        if (!a->constant || b->no_symbol[i]) continue;
        s = ft_dev_symbol_write(b->d, *m, a->name, b->host[i], (size_t)a->elems * a->elem_bytes, err);
        if (s != FT_OK) return s;
    }
    return FT_OK;
}

/* The strata of emu/prof.h's sample. */
static void pick_blocks(const long long g[3], int want, uint64_t seed, ft_dim3 *bnd, int *nb,
                        ft_dim3 *inner, int *ni) {
    _Static_assert(sizeof(ft_dim3) == sizeof(ft_emu_uint3), "ft_dim3 is CUDA's uint3");
    ft_emu_uint3 grid = {(unsigned)g[0], (unsigned)g[1], (unsigned)g[2]};
    ft_emu_sample_pick(grid, want, seed, (ft_emu_uint3 *)bnd, nb, (ft_emu_uint3 *)inner, ni);
}

int ft_t1_sample_blocks(const long long g[3], int want, ft_dim3 *out, int max) {
    if (want > max) want = max;
    if (want > 64) want = 64;
    if (g[0] * g[1] * g[2] <= want) {
        int n = 0;
        for (long long z = 0; z < g[2]; z++)
            for (long long y = 0; y < g[1]; y++)
                for (long long x = 0; x < g[0]; x++)
                    out[n++] = (ft_dim3){(unsigned)x, (unsigned)y, (unsigned)z};
        return n;
    }
    ft_dim3 bnd[64], inner[64];
    int nb = 0, ni = 0;
    pick_blocks(g, want, 0x9e3779b97f4a7c15ull, bnd, &nb, inner, &ni);
    memcpy(out, bnd, (size_t)nb * sizeof *out);
    memcpy(out + nb, inner, (size_t)ni * sizeof *out);
    return nb + ni;
}

/* One launch on the emulator with its profile on, the device sampling its grid (`nsample`
 * blocks in two strata, scaled to the grid: ft_dev_emu_set_sample); *rec is its record. */
static ft_status emulate(ft_t1_bench *b, ft_dev_module *m, const long long g[3], const long long bl[3],
                         int nsample, ft_dev_emu_launch_record *rec, ft_err *err) {
    ft_dim3 grid = {(unsigned)g[0], (unsigned)g[1], (unsigned)g[2]};
    ft_dim3 block = {(unsigned)bl[0], (unsigned)bl[1], (unsigned)bl[2]};
    ft_status s = ft_dev_emu_set_sample(b->d, nsample, err);
    if (s == FT_OK)
        s = ft_dev_launch(b->d, m, b->t->kernel_name, grid, block, (size_t)b->t->shared_bytes,
                          b->argv, err);
    ft_err e2 = {0};
    ft_dev_emu_set_sample(b->d, 0, &e2);
    ft_dev_emu_launch_record *recs = NULL;
    int nrec = 0;
    ft_status s2 = ft_dev_emu_profile_take(b->d, &recs, &nrec, &e2);
    if (s == FT_OK && s2 != FT_OK) {
        if (err) *err = e2;
        s = s2;
    }
    if (s == FT_OK && nrec < 1)
        s = ft_err_set(err, FT_EINVAL, "%s: the emulator recorded no launch", b->t->path);
    if (s == FT_OK) {
        *rec = recs[nrec - 1];
        rec->p.sites = NULL; /* the record outlives recs: keep no pointer into it */
        rec->p.nsites = 0;
    }
    ft_dev_emu_records_free(recs, nrec);
    return s;
}

#if FT_HAVE_CUDA
ft_status ft_t1_nvrtc_compile(const ft_t1 *t, const ft_config *cfg, const char *arch,
                              ft_nvrtc_result *res, ft_err *err) {
    char defs[FT_T1_MAX_DEFINES][96];
    const char *dp[FT_T1_MAX_DEFINES];
    int nd = ft_t1_defines(t, cfg, defs, FT_T1_MAX_DEFINES);
    for (int i = 0; i < nd; i++) dp[i] = defs[i];
    const char *kn = t->kernel_name;
    ft_nvrtc_file f = {.path = t->kernel_file, .defines = dp, .ndefines = nd,
                       .options = (const char *const *)t->options, .noptions = t->noptions,
                       .names = &kn, .nnames = 1};
    return ft_nvrtc_compile_file(&f, arch, res, err);
}
#endif

ft_status ft_t1_predict(ft_t1_bench *b, const ft_config *cfg, const ft_gpu_spec *g, int nsample,
                        ft_t1_prediction *out, ft_err *err) {
    memset(out, 0, sizeof *out);
    const ft_t1 *t = b->t;
    if (ft_dev_kind_of(b->d) != FT_DEV_EMU)
        return ft_err_set(err, FT_EINVAL, "%s: predicting needs the emulator's profile", t->path);
    if (nsample < 2) nsample = 2;
    if (nsample > 64) nsample = 64;
    ft_status s = ft_t1_launch(t, cfg, out->grid, out->block, err);
    if (s != FT_OK) return s;
    out->blocks = out->grid[0] * out->grid[1] * out->grid[2];
    long long threads = out->block[0] * out->block[1] * out->block[2];
    if (threads > 1024)
        return ft_err_set(err, FT_EINVAL, "%s: a block of %lld threads (1024 at most)", t->path, threads);
    /* What the GPU's compiler makes of it. */
    ft_kfacts kf;
    memset(&kf, 0, sizeof kf);
    snprintf(kf.name, sizeof kf.name, "%s", t->kernel_name);
    kf.block_threads = (int)threads;
    kf.dyn_smem = (size_t)t->shared_bytes;
    double t0 = ft_now_s();
    int refused = 0; /* ptxas refused this configuration: it cannot run on that GPU */
#if FT_HAVE_CUDA
    {
        const char *kn = t->kernel_name;
        ft_nvrtc_result res;
        ft_err ne = {0};
        s = ft_t1_nvrtc_compile(t, cfg, g->arch, &res, &ne);
        if (s == FT_ENOMEM) {
            if (err) *err = ne;
            return s;
        }
        const ft_nvrtc_kernel *kr = ft_nvrtc_kernel_of(&res, kn);
        if (kr) kf.info = kr->info;
        if (s != FT_OK) {
            /* A configuration ptxas refuses is no program for that GPU: nvcc refuses it as
             * NVRTC does (a static shared array over 48 KiB is refused on every architecture;
             * more takes dynamic shared memory), so it cannot run there, whatever the emulator,
             * which has no such limit, makes of it. (A refusal that is not ptxas's, such as an
             * option NVRTC does not know, says nothing of the configuration.) Its figures are
             * still predicted: the registers and shared memory ptxas reported before the
             * refusal give the occupancy, or, when it did not run, the emulator's static shared
             * memory alone (below). */
            snprintf(out->nvrtc_error, sizeof out->nvrtc_error, "%.250s", ne.msg);
            refused = strstr(ne.msg, "ptxas") != NULL;
            if (!kf.info.regs) goto emulate_it;
        } else {
            const char *lowered = ft_nvrtc_lowered(&res, kn);
            ft_sass_kernel *sass = calloc(FT_NVRTC_MAX_KERNELS, sizeof *sass);
            int nsass = 0;
            ft_err e2 = {0};
            if (sass && ft_sass_of_cubin(res.cubin, res.cubin_size, sass, FT_NVRTC_MAX_KERNELS,
                                         &nsass, &e2) == FT_OK) {
                const ft_sass_kernel *sk = ft_sass_find(sass, nsass, lowered ? lowered : kn);
                if (sk) kf.has_sass = 1, kf.sass = *sk;
            }
            free(sass);
            ft_nvrtc_result_free(&res);
        }
        ft_err e3 = {0};
        if (ft_cuda_occupancy(g, kf.block_threads, kf.info.regs, kf.info.smem_static + kf.dyn_smem,
                              &kf.occ, &e3) != FT_OK) {
            memset(&kf.occ, 0, sizeof kf.occ);
            snprintf(out->unfit, sizeof out->unfit, "%.200s", e3.msg);
        } else if (kf.occ.blocks_per_sm == 0) {
            snprintf(out->unfit, sizeof out->unfit, "no block fits on an SM of the %s (%s)", g->name,
                     ft_occ_limit_name(kf.occ.limits));
        }
        if (kf.info.spill_stores || kf.info.spill_loads)
            snprintf(out->unfit, sizeof out->unfit, "spills %d bytes", kf.info.spill_stores + kf.info.spill_loads);
    }
emulate_it:
#endif
    out->compile_s = ft_now_s() - t0;
    out->regs = kf.info.regs;
    out->spills = kf.info.spill_stores + kf.info.spill_loads;
    out->has_sass = kf.has_sass;
    /* A sample of the grid on the emulator, profiled. */
    t0 = ft_now_s();
    s = ft_dev_emu_set_profile(b->d, 1, err);
    if (s != FT_OK) return s;
    ft_dev_module *m = NULL;
    s = ft_t1_bench_compile(b, cfg, &m, err);
    if (s != FT_OK) return s;
    if (!kf.info.regs) { /* occupancy from the static shared memory */
        ft_kernel_info ki;
        ft_err e4 = {0};
        if (ft_dev_kernel_info(m, t->kernel_name, &ki, &e4) == FT_OK) {
            kf.info.smem_static = ki.smem_static;
            if (ft_cuda_occupancy(g, kf.block_threads, 0, ki.smem_static + kf.dyn_smem, &kf.occ, &e4) != FT_OK ||
                kf.occ.blocks_per_sm == 0) {
                memset(&kf.occ, 0, sizeof kf.occ);
                snprintf(out->unfit, sizeof out->unfit, "no block fits on an SM of the %s (%zu bytes of shared memory)",
                         g->name, ki.smem_static + kf.dyn_smem);
            }
        }
    }
    ft_dev_emu_launch_record acc;
    s = emulate(b, m, out->grid, out->block, nsample, &acc, err);
    if (s != FT_OK) return s;
    out->emulate_s = ft_now_s() - t0;
    out->sampled_boundary = acc.sampled ? acc.sampled_edge : (int)out->blocks;
    out->sampled_interior = acc.sampled ? acc.sampled - acc.sampled_edge : 0;
    /* Distinct bytes are at most the arguments' bytes: what the whole grid can read from DRAM
     * and write back. */
    if (acc.p.unique_read_bytes > b->read_bytes) acc.p.unique_read_bytes = b->read_bytes;
    if (acc.p.unique_write_bytes > b->write_bytes) acc.p.unique_write_bytes = b->write_bytes;
    if (refused) /* the first reason it cannot run, whatever else it has */
        snprintf(out->unfit, sizeof out->unfit, "does not compile for %s", g->arch);
    out->in = ft_predict_in_of_record(&acc, kf.info.regs || kf.has_sass || kf.occ.blocks_per_sm ? &kf : NULL);
    out->in.blocks = (double)out->blocks;
    out->in.block_threads = (int)threads;
    out->pred = ft_predict(g, &out->in);
    return FT_OK;
}

ft_status ft_t1_source_digest(const ft_t1 *t, char *out, ft_err *err) {
    char *text = NULL;
    size_t len = 0;
    if (ft_kc_read_file(t->kernel_file, &text, &len) != 0)
        return ft_err_set(err, FT_EIO, "%s: cannot read the kernel source %s", t->path,
                          t->kernel_file);
    ft_kc_seen *seen = calloc(1, sizeof *seen);
    if (!seen) {
        free(text);
        return ft_err_set(err, FT_ENOMEM, "%s: out of memory", t->path);
    }
    ft_kc_hash h;
    ft_kc_hash_init(&h);
    /* The build: with NVRTC (and which) the SASS is read, without it not. */
#if FT_HAVE_CUDA
    ft_kc_hash_str(&h, ft_nvrtc_version());
#else
    ft_kc_hash_str(&h, "no NVRTC");
#endif
    ft_kc_hash_bytes(&h, text, len);
    /* The files it includes with quotes, found where NVRTC finds them: beside it, in the
     * dialect's folder, in the -I folders of its options. */
    char dir[FT_KC_PATH_CAP], kdir[FT_KC_PATH_CAP], dialect[FT_KC_PATH_CAP + 8];
    ft_kc_dir_of(t->kernel_file, dir, sizeof dir);
    snprintf(dialect, sizeof dialect, "%s/cuda", ft_kernel_dir(kdir, sizeof kdir));
    const char **incs = malloc((size_t)(2 + t->noptions) * sizeof *incs);
    if (!incs) {
        free(seen);
        free(text);
        return ft_err_set(err, FT_ENOMEM, "%s: out of memory", t->path);
    }
    int nincs = 0;
    incs[nincs++] = dir;
    incs[nincs++] = dialect;
    for (int i = 0; i < t->noptions; i++)
        if (strncmp(t->options[i], "-I", 2) == 0 && t->options[i][2])
            incs[nincs++] = t->options[i] + 2;
    ft_kc_hash_includes(&h, text, dir, incs, nincs, seen, 0);
    free(incs);
    free(seen);
    free(text);
    /* The T1 file itself: the kernel's name, its options, launch geometry, shared memory,
     * conditions and the rest. */
    if (ft_kc_read_file(t->path, &text, &len) != 0)
        return ft_err_set(err, FT_EIO, "%s: cannot read it again", t->path);
    ft_kc_hash_bytes(&h, text, len);
    free(text);
    /* The arguments as used: --arg replaces the file's. */
    for (int i = 0; i < t->nargs; i++) {
        const ft_t1_arg *a = &t->args[i];
        char line[160];
        snprintf(line, sizeof line, "%d %zu %d %d %d %d %d %d %.17g %lld", (int)a->type,
                 a->elem_bytes, a->scalar, a->constant, a->output, a->random, a->reads, a->writes,
                 a->fill_value, a->elems);
        ft_kc_hash_str(&h, a->name);
        ft_kc_hash_str(&h, line);
        if (a->data_source) ft_kc_hash_str(&h, a->data_source);
    }
    ft_kc_hash_hex(&h, out);
    return FT_OK;
}
