/* cuda_backend.c: the `cuda` and `cuda-emu` backends (see cuda_backend.h).
 *
 * Both run the same host code: the op's run() from kernels/FAMILY/OP_cuda.c, the module and launch
 * helpers and the device copies of a call's tensors below. `cuda` opens the GPU, compiles with
 * NVRTC and times with CUPTI (or CUDA events); `cuda-emu` opens the SIMT emulator and times with
 * the host clock (emulation timings, labelled so: its device fingerprint never matches a GPU's,
 * so profiles never mix the two).
 */
#include "cuda_backend.h"
#include "cuda/kcache.h"

#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "traces/eventlog.h"
#include "op/space.h"

#include "cuda/analysis/kfacts.h"
#include "cuda/device_emu.h"
#include "cuda/analysis/predict.h"
#include "prefetch.h"
#include "cuda/specs.h"

#if FT_HAVE_CUDA
#include <cuda_runtime.h>
#include <cupti.h>

#include "cuda/nvrtc.h"
#include "cuda/timer.h"
#endif

#include "cuda/context.h"

/* ---- contexts ----------------------------------------------------------------------------- */

/* One table of ft_cuda_table: its bytes on the host (to find it again) and on the device. */
struct ft_cuda_table {
    struct ft_cuda_table *next;
    void *d;
    size_t bytes;
    unsigned char host[];
};

static pthread_mutex_t ctx_lock = PTHREAD_MUTEX_INITIALIZER;
static ft_cuda_ctx *ctxs[2];
static ft_err ctx_errs[2]; /* why a context could not open (asked once per process) */
static int ctx_tried[2];

static void ctx_close(ft_cuda_ctx *x) {
    if (!x) return;
    ft_cuda_pool_free(x->pool); /* its threads compile for the device: before it closes */
    if (x->dev) ft_dev_sync(x->dev, NULL);
    if (x->gemm) ft_gemm_state_close(x->gemm);
    for (int i = 0; i < FT_CUDA_SCRATCH_SLOTS; i++)
        ft_dev_free(x->dev, x->scratch[i].p);
    for (struct ft_cuda_table *t = x->tables, *next; t; t = next) {
        next = t->next;
        ft_dev_free(x->dev, t->d);
        free(t);
    }
    ft_dev_free(x->dev, x->l2_flush);
#if FT_HAVE_CUDA
    if (x->timer) ft_timer_close(x->timer);
#endif
    ft_dev_close(x->dev);
    free(x);
}

static void close_all(void) {
    pthread_mutex_lock(&ctx_lock);
    for (int i = 0; i < 2; i++) {
        ctx_close(ctxs[i]);
        ctxs[i] = NULL;
    }
    pthread_mutex_unlock(&ctx_lock);
}

#if FT_HAVE_CUDA
static ft_status open_timer(ft_cuda_ctx *x, ft_err *err) {
    const char *pref = ft_backend_timer_preference();
    ft_err terr = {0};
    ft_status s = FT_EUNSUPPORTED;
    if (strcmp(pref, "events") != 0) {
        s = ft_timer_open(x->dev, FT_TIMER_CUPTI, &x->timer, &terr);
        if (s && strcmp(pref, "cupti") == 0)
            return ft_err_set(err, s, "--timer cupti: %s", terr.msg);
        if (s)
            fprintf(stderr,
                    "flaretune: warning: CUPTI cannot time kernels here (%s); "
                    "timing with CUDA events instead\n",
                    terr.msg);
    }
    if (s) s = ft_timer_open(x->dev, FT_TIMER_EVENTS, &x->timer, err);
    if (s) return s;
    snprintf(x->clock, sizeof x->clock, "%s", ft_timer_name(ft_timer_kind_of(x->timer)));
    uint64_t ts = 0;
    if (ft_timer_kind_of(x->timer) == FT_TIMER_CUPTI && cuptiGetTimestamp(&ts) == CUPTI_SUCCESS)
        x->wall_minus_cupti_s = ft_wall_time() - (double)ts * 1e-9;
    return FT_OK;
}
#endif

static ft_status ctx_open(int emulated, ft_cuda_ctx **out, ft_err *err) {
    ft_cuda_ctx *x = calloc(1, sizeof *x);
    if (!x) return ft_err_set(err, FT_ENOMEM, "out of memory");
    x->emulated = emulated;
    const char *ord = getenv("FLARETUNE_GPU");
    ft_status s =
        ft_dev_open(emulated ? FT_DEV_EMU : FT_DEV_CUDA, ord ? atoi(ord) : 0, &x->dev, err);
    if (s) {
        free(x);
        return s;
    }
    const ft_dev_props *p = ft_dev_props_of(x->dev);
    if (emulated) {
        snprintf(x->fingerprint, sizeof x->fingerprint,
                 "cuda-emu: SIMT emulator of compute capability %d.%d on the CPU (emulation "
                 "timings)",
                 p->cc_major, p->cc_minor);
        snprintf(x->clock, sizeof x->clock, "emulated");
    } else {
#if FT_HAVE_CUDA
        snprintf(x->fingerprint, sizeof x->fingerprint,
                 "cuda: %s (%s, %d SMs, %.0f MiB L2, %.0f GiB, driver %d.%d, runtime %d.%d)",
                 p->name, p->arch, p->sm_count, (double)p->l2_bytes / 1048576.0,
                 (double)p->mem_bytes / 1073741824.0, p->driver_version / 1000,
                 p->driver_version % 1000 / 10, p->runtime_version / 1000,
                 p->runtime_version % 1000 / 10);
        snprintf(x->details, sizeof x->details,
                 "compute capability %d.%d, %d SMs at %d MHz, %.0f MiB L2, %.1f GiB at %d MHz on "
                 "a %d-bit bus, ECC %s, driver %d.%d, runtime %d.%d",
                 p->cc_major, p->cc_minor, p->sm_count, p->clock_khz / 1000,
                 (double)p->l2_bytes / 1048576.0, (double)p->mem_bytes / 1073741824.0,
                 p->mem_clock_khz / 1000, p->bus_width_bits, p->ecc ? "on" : "off",
                 p->driver_version / 1000, p->driver_version % 1000 / 10, p->runtime_version / 1000,
                 p->runtime_version % 1000 / 10);
        if ((s = open_timer(x, err))) {
            ctx_close(x);
            return s;
        }
#endif
    }
    *out = x;
    return FT_OK;
}

ft_status ft_cuda_ctx_get(int emulated, ft_cuda_ctx **out, ft_err *err) {
    int k = emulated ? 1 : 0;
    pthread_mutex_lock(&ctx_lock);
    ft_status s = FT_OK;
    if (!ctxs[k]) {
        if (ctx_tried[k]) {
            s = ctx_errs[k].status ? ctx_errs[k].status : FT_ENODEV;
            if (err) *err = ctx_errs[k];
        } else {
            static int registered;
            ctx_tried[k] = 1;
            s = ctx_open(emulated, &ctxs[k], &ctx_errs[k]);
            if (s) {
                ctx_errs[k].status = s;
                if (err) *err = ctx_errs[k];
            } else if (!registered) {
                registered = 1;
                atexit(close_all); /* after the runtime's own: runs before its teardown */
            }
        }
    }
    *out = ctxs[k];
    pthread_mutex_unlock(&ctx_lock);
    return s;
}

/* ---- modules, launches, scratch ------------------------------------------------------------ */

void ft_cuda_spec_define(ft_cuda_module_spec *s, const char *fmt, ...) {
    if (s->ndefines >= FT_CUDA_MAX_DEFINES) {
        s->overflow = 1; /* ft_cuda_module reports it */
        return;
    }
    va_list ap;
    va_start(ap, fmt);
    int w = vsnprintf(s->defines[s->ndefines++], sizeof s->defines[0], fmt, ap);
    va_end(ap);
    if (w < 0 || (size_t)w >= sizeof s->defines[0]) s->overflow = 1;
}

void ft_cuda_spec_params(ft_cuda_module_spec *s, const char *const *macros, int n,
                         const ft_config *cfg) {
    for (int i = 0; i < n; i++)
        if (macros[i]) ft_cuda_spec_define(s, "%s=%d", macros[i], cfg->v[i]);
}

int ft_cuda_rules_check(const ft_cuda_check *checks, size_t nchecks, const void *ctx, char *why,
                        size_t n) {
    int verdict = FT_CONFIG_VALID;
    for (size_t i = 0; i < nchecks; i++) {
        int r = checks[i] ? checks[i](ctx, why, n) : FT_CONFIG_VALID;
        if (r == FT_CONFIG_INVALID) return r;
        if (r == FT_CONFIG_DUPLICATE) verdict = r;
    }
    return verdict;
}

/* A kernel the config launches. The module keeps only the kernels named so (FT_KEEP in
 * ft_cuda.h): -DFT_KEEP_SOME=1 once, -DFT_KEEP_<name>=1 per kernel. */
void ft_cuda_spec_kernel(ft_cuda_module_spec *s, const char *name, int block_threads,
                         size_t dyn_smem) {
    if (s->nkernels >= FT_CUDA_MAX_KERNELS) return;
    int seen = 0;
    for (int k = 0; k < s->nkernels && !seen; k++)
        seen = strcmp(s->kernels[k].name, name) == 0;
    if (!s->nkernels) ft_cuda_spec_define(s, "FT_KEEP_SOME=1");
    if (!seen) ft_cuda_spec_define(s, "FT_KEEP_%s=1", name);
    s->kernels[s->nkernels].name = name;
    s->kernels[s->nkernels].block_threads = block_threads;
    s->kernels[s->nkernels].dyn_smem = dyn_smem;
    s->nkernels++;
}

ft_status ft_cuda_module(ft_cuda_ctx *x, const ft_cuda_module_spec *s, ft_dev_module **out,
                         ft_err *err) {
    if (s->overflow || s->ndefines > FT_CUDA_MAX_DEFINES)
        return ft_err_set(err, FT_EINTERNAL,
                          "%s: a define did not fit the module spec (at most %d, of %d characters)",
                          s->source, FT_CUDA_MAX_DEFINES, (int)sizeof s->defines[0] - 1);
    const char *defs[FT_CUDA_MAX_DEFINES];
    for (int i = 0; i < s->ndefines; i++)
        defs[i] = s->defines[i];
    return ft_dev_compile(x->dev, s->source, defs, s->ndefines, out, err);
}

ft_status ft_cuda_launch(ft_cuda_ctx *x, ft_dev_module *m, const char *kernel, ft_dim3 grid,
                         ft_dim3 block, size_t smem, void **args, ft_err *err) {
    return ft_dev_launch(x->dev, m, kernel, grid, block, smem, args, err);
}

ft_status ft_cuda_scratch(ft_cuda_ctx *x, int slot, size_t bytes, void **p, ft_err *err) {
    if (slot < 0 || slot >= FT_CUDA_SCRATCH_SLOTS)
        return ft_err_set(err, FT_EINTERNAL, "scratch slot %d out of range", slot);
    if (x->scratch[slot].bytes < bytes || !x->scratch[slot].p) {
        ft_dev_free(x->dev, x->scratch[slot].p);
        x->scratch[slot].p = NULL;
        x->scratch[slot].bytes = 0;
        size_t want = bytes + bytes / 8; /* a little room, so slowly growing calls reuse it */
        ft_status s = ft_dev_alloc(x->dev, want ? want : 256, &x->scratch[slot].p, err);
        if (s) return ft_err_wrap(err, "device scratch of %.1f MiB", (double)bytes / 1048576.0);
        x->scratch[slot].bytes = want;
    }
    *p = x->scratch[slot].p;
    return FT_OK;
}

static pthread_mutex_t table_lock = PTHREAD_MUTEX_INITIALIZER;

ft_status ft_cuda_table(ft_cuda_ctx *x, const void *host, size_t bytes, const void **p,
                        ft_err *err) {
    pthread_mutex_lock(&table_lock);
    for (struct ft_cuda_table *t = x->tables; t; t = t->next)
        if (t->bytes == bytes && memcmp(t->host, host, bytes) == 0) {
            *p = t->d;
            pthread_mutex_unlock(&table_lock);
            return FT_OK;
        }
    ft_status s = FT_OK;
    struct ft_cuda_table *t = malloc(sizeof *t + bytes);
    if (!t) s = ft_err_set(err, FT_ENOMEM, "out of memory for a device table of %zu bytes", bytes);
    if (t) t->d = NULL;
    if (!s) s = ft_dev_alloc(x->dev, bytes ? bytes : 1, &t->d, err);
    if (!s && bytes) s = ft_dev_copy(x->dev, t->d, host, bytes, FT_COPY_H2D, err);
    if (s) {
        if (t && t->d) ft_dev_free(x->dev, t->d);
        free(t);
        pthread_mutex_unlock(&table_lock);
        return s;
    }
    memcpy(t->host, host, bytes);
    t->bytes = bytes;
    t->next = x->tables;
    x->tables = t;
    *p = t->d;
    pthread_mutex_unlock(&table_lock);
    return FT_OK;
}

/* ---- a call's tensors on the device -------------------------------------------------------- */

typedef struct dev_call {
    ft_cuda_ctx *x;
    ft_dt dt;
    struct {
        const ft_tensor *t;
        const void *data;
        void *d;
        size_t bytes;
        int uploaded;
        int borrowed; /* the caller's memory (bind_device): never freed nor copied here */
    } s[FT_MAX_TENSORS];
} dev_call;

static void dev_call_free(void *p) {
    dev_call *dc = p;
    for (int i = 0; i < FT_MAX_TENSORS; i++)
        if (!dc->s[i].borrowed) ft_dev_free(dc->x->dev, dc->s[i].d);
    free(dc);
}

static int is_input(const ft_op *op, int i) {
    return op->tensors[i].role == FT_ROLE_IN || op->tensors[i].role == FT_ROLE_GRAD_IN;
}

/* bf16 tensors cross between host and device in pieces of this many elements through one
 * small buffer: no second copy of a whole tensor is made (at N=8192 fusion.dflare's inputs are
 * 600 MB in bf16), and each piece is still in cache when it is copied. */
#define BF16_PIECE ((int64_t)1 << 20)

static ft_status upload(ft_cuda_ctx *x, dev_call *dc, int i, const ft_tensor *t, ft_err *err) {
    if (t->dtype != FT_F32 || dc->dt == FT_DT_F32)
        return ft_dev_copy(x->dev, dc->s[i].d, t->data, ft_tensor_nbytes(t), FT_COPY_H2D, err);
    int64_t n = ft_tensor_numel(t);
    uint16_t *h = malloc((size_t)(n < BF16_PIECE ? n : BF16_PIECE) * 2 + 2);
    if (!h) return ft_err_set(err, FT_ENOMEM, "out of memory converting to bf16");
    const float *f = t->data;
    uint16_t *d = dc->s[i].d;
    ft_status s = FT_OK;
    for (int64_t at = 0; at < n && s == FT_OK; at += BF16_PIECE) {
        int64_t m = n - at < BF16_PIECE ? n - at : BF16_PIECE;
#pragma omp parallel for schedule(static) if (m >= BF16_PIECE)
        for (int64_t k = 0; k < m; k++)
            h[k] = ft_bf16_from_f32(f[at + k]);
        s = ft_dev_copy(x->dev, d + at, h, (size_t)m * 2, FT_COPY_H2D, err);
    }
    free(h);
    return s;
}

/* c's device state for context x, made anew when it belongs to another context or storage
 * type; NULL when out of memory. */
static dev_call *dev_call_of(ft_cuda_ctx *x, ft_call *c) {
    ft_dt dt = ft_cuda_call_dt(c);
    dev_call *dc = c->dev_state;
    if (dc && (c->dev_state_free != dev_call_free || dc->x != x || dc->dt != dt)) {
        ft_call_touch(c);
        dc = NULL;
    }
    if (!dc) {
        dc = calloc(1, sizeof *dc);
        if (!dc) return NULL;
        dc->x = x;
        dc->dt = dt;
        c->dev_state = dc;
        c->dev_state_free = dev_call_free;
    }
    return dc;
}

/* Make the device copies of c (inputs uploaded, outputs allocated) for context x. */
static ft_status prepare(ft_cuda_ctx *x, ft_call *c, ft_cuda_call *out, ft_err *err) {
    dev_call *dc = dev_call_of(x, c);
    if (!dc) return ft_err_set(err, FT_ENOMEM, "out of memory");
    ft_dt dt = dc->dt;
    memset(out, 0, sizeof *out);
    out->c = c;
    out->dt = dt;
    for (int i = 0; i < c->op->ntensors; i++) {
        const ft_tensor *t = c->t[i];
        if (!ft_call_uses(c, i) || !t) continue;
        if (dc->s[i].borrowed) {
            out->d[i] = dc->s[i].d;
            continue;
        }
        size_t bytes =
            t->dtype == FT_F32 ? (size_t)ft_tensor_numel(t) * ft_dt_size(dt) : ft_tensor_nbytes(t);
        if (t->dtype == FT_F64)
            return ft_err_set(err, FT_EINVAL,
                              "%s: tensor '%s' is float64 (device backends take "
                              "float32)",
                              c->op->name, c->op->tensors[i].name);
        if (dc->s[i].t != t || dc->s[i].data != t->data || dc->s[i].bytes != bytes) {
            ft_dev_free(x->dev, dc->s[i].d);
            memset(&dc->s[i], 0, sizeof dc->s[i]);
            ft_status s = ft_dev_alloc(x->dev, bytes, &dc->s[i].d, err);
            if (s)
                return ft_err_wrap(err, "%s: device copy of '%s'", c->op->name,
                                   c->op->tensors[i].name);
            dc->s[i].t = t;
            dc->s[i].data = t->data;
            dc->s[i].bytes = bytes;
        }
        if (is_input(c->op, i) && !dc->s[i].uploaded) {
            ft_status s = upload(x, dc, i, t, err);
            if (s)
                return ft_err_wrap(err, "%s: copying '%s' to the device", c->op->name,
                                   c->op->tensors[i].name);
            dc->s[i].uploaded = 1;
        }
        out->d[i] = dc->s[i].d;
    }
    return FT_OK;
}

static ft_status download(ft_cuda_ctx *x, ft_call *c, const ft_cuda_call *dc, ft_err *err) {
    const dev_call *state = c->dev_state;
    for (int i = 0; i < c->op->ntensors; i++) {
        ft_tensor *t = c->t[i];
        if (!dc->d[i] || is_input(c->op, i) || state->s[i].borrowed) continue;
        if (t->dtype != FT_F32 || dc->dt == FT_DT_F32) {
            ft_status s =
                ft_dev_copy(x->dev, t->data, dc->d[i], ft_tensor_nbytes(t), FT_COPY_D2H, err);
            if (s) return s;
            continue;
        }
        int64_t n = ft_tensor_numel(t);
        uint16_t *h = malloc((size_t)(n < BF16_PIECE ? n : BF16_PIECE) * 2 + 2);
        if (!h) return ft_err_set(err, FT_ENOMEM, "out of memory converting from bf16");
        const uint16_t *d = dc->d[i];
        float *f = t->data;
        ft_status s = FT_OK;
        for (int64_t at = 0; at < n && s == FT_OK; at += BF16_PIECE) {
            int64_t m = n - at < BF16_PIECE ? n - at : BF16_PIECE;
            s = ft_dev_copy(x->dev, h, d + at, (size_t)m * 2, FT_COPY_D2H, err);
            for (int64_t k = 0; s == FT_OK && k < m; k++)
                f[at + k] = ft_f32_from_bf16(h[k]);
        }
        free(h);
        if (s) return s;
    }
    return FT_OK;
}

/* ---- the caller's device memory (the C API's device tensors) ------------------------------ */

static ft_status mem_alloc_on(int emulated, size_t bytes, void **ptr, ft_err *err) {
    ft_cuda_ctx *x;
    ft_status s = ft_cuda_ctx_get(emulated, &x, err);
    return s ? s : ft_dev_alloc(x->dev, bytes, ptr, err);
}

static void mem_free_on(int emulated, void *ptr) {
    ft_cuda_ctx *x;
    if (ptr && ft_cuda_ctx_get(emulated, &x, NULL) == FT_OK) ft_dev_free(x->dev, ptr);
}

static ft_status mem_copy_on(int emulated, void *dst, const void *src, size_t bytes, int kind,
                             ft_err *err) {
    ft_cuda_ctx *x;
    ft_status s = ft_cuda_ctx_get(emulated, &x, err);
    if (s) return s;
    if (kind < FT_MEM_H2D || kind > FT_MEM_D2D)
        return ft_err_set(err, FT_EINVAL, "device copy: unknown direction %d", kind);
    static const ft_copy_kind kinds[] = {FT_COPY_H2D, FT_COPY_D2H, FT_COPY_D2D};
    if ((s = ft_dev_copy(x->dev, dst, src, bytes, kinds[kind], err))) return s;
    return ft_dev_sync(x->dev, err);
}

static ft_status bind_device_on(int emulated, ft_call *c, int i, void *dptr, ft_err *err) {
    ft_cuda_ctx *x;
    ft_status s = ft_cuda_ctx_get(emulated, &x, err);
    if (s) return s;
    if (i < 0 || i >= c->op->ntensors || !c->t[i] || c->t[i]->dtype != FT_F32 || !dptr)
        return ft_err_set(err, FT_EINVAL, "%s: tensor %d cannot be bound on the device",
                          c->op->name, i);
    dev_call *dc = dev_call_of(x, c);
    if (!dc) return ft_err_set(err, FT_ENOMEM, "out of memory");
    if (!dc->s[i].borrowed) ft_dev_free(x->dev, dc->s[i].d);
    dc->s[i].t = c->t[i];
    dc->s[i].data = c->t[i]->data;
    dc->s[i].d = dptr;
    dc->s[i].bytes = (size_t)ft_tensor_numel(c->t[i]) * ft_dt_size(dc->dt);
    dc->s[i].uploaded = 1;
    dc->s[i].borrowed = 1;
    return FT_OK;
}

/* ---- the backends -------------------------------------------------------------------------- */

/* The op, its configuration (default when cfg is NULL) and the check that it can run c. */
static ft_status resolve(const ft_call *c, const ft_config **cfg, ft_config *def,
                         const ft_cuda_op **op, const char *bname, ft_err *err) {
    *op = ft_cuda_op_of(c->op);
    if (!*op)
        return ft_err_set(err, FT_EUNSUPPORTED, "%s does not implement %s", bname, c->op->name);
    if (!*cfg) {
        ft_config_default((*op)->space, def);
        *cfg = def;
    }
    char why[256];
    if (!ft_space_runnable((*op)->space, c, *cfg, why, sizeof why))
        return ft_err_set(err, FT_EINVAL, "%s on %s: config not valid here: %s", c->op->name, bname,
                          why);
    return FT_OK;
}

#if FT_HAVE_CUDA
/* `reps` calls of op in one region of the device timer: their device time in *secs. */
static ft_status device_region(ft_cuda_ctx *x, const ft_cuda_op *op, const ft_cuda_call *dc,
                               const ft_config *cfg, int reps, double *secs, const char *bname,
                               ft_err *err) {
    ft_status s = ft_timer_begin(x->timer, err);
    if (s) return s;
    for (int r = 0; r < reps && !s; r++)
        s = op->run(x, dc, cfg, err);
    double t = 0;
    int nk = 0;
    ft_err e2 = {0};
    ft_status s2 = ft_timer_end(x->timer, &t, &nk, &e2);
    if (s) return s;
    if (s2) {
        if (err) *err = e2;
        return ft_err_wrap(err, "%s on %s", dc->c->op->name, bname);
    }
    *secs = t;
    return FT_OK;
}
#endif

static ft_status run_on(int emulated, ft_call *c, const ft_config *cfg, int reps, double *secs,
                        ft_err *err) {
    const char *bname = emulated ? "cuda-emu" : "cuda";
    ft_cuda_ctx *x;
    ft_status s = ft_cuda_ctx_get(emulated, &x, err);
    if (s) return s;
    ft_config def;
    const ft_cuda_op *op;
    if ((s = resolve(c, &cfg, &def, &op, bname, err))) return s;
    ft_cuda_call dc;
    if ((s = prepare(x, c, &dc, err))) return s;
    if (!secs) {
        if ((s = op->run(x, &dc, cfg, err))) return s;
        if ((s = ft_dev_sync(x->dev, err))) return ft_err_wrap(err, "%s on %s", c->op->name, bname);
        /* A profile on a sample leaves the outputs incomplete (emulated for what the launches
         * move, not for what they compute): they are not copied back (at N=8192 fusion.dflare's
         * are 470 MB in bf16, 940 MB of host memory they would fill). */
        if (emulated && ft_dev_emu_sampling(x->dev)) return FT_OK;
        return download(x, c, &dc, err);
    }
#if FT_HAVE_CUDA
    if (!emulated) {
        if (!x->cold) return device_region(x, op, &dc, cfg, reps, secs, bname, err);
        /* Each call alone, after a memset of twice the L2 outside its timed window. */
        size_t l2 = 2 * ft_dev_props_of(x->dev)->l2_bytes;
        if (!x->l2_flush && (s = ft_dev_alloc(x->dev, l2, &x->l2_flush, err))) return s;
        double sum = 0;
        for (int r = 0; r < reps; r++) {
            double t = 0;
            if ((s = ft_dev_memset(x->dev, x->l2_flush, r & 0xff, l2, err)) ||
                (s = device_region(x, op, &dc, cfg, 1, &t, bname, err)))
                return s;
            sum += t;
        }
        *secs = sum;
        return FT_OK;
    }
#endif
    double t0 = ft_now_s();
    for (int r = 0; r < reps && !s; r++)
        s = op->run(x, &dc, cfg, err);
    if (!s) s = ft_dev_sync(x->dev, err);
    *secs = ft_now_s() - t0;
    return s;
}

/* ---- sequences: a drafter step as one unit ------------------------------------------------- */

/* The calls of a sequence with their device copies, and on the GPU the step captured as a CUDA
 * graph (cudaStreamBeginCapture on the context's stream, relaxed mode: cuBLASLt and the
 * launches are captured; every allocation they need was made by the eager run before). */
typedef struct cuda_seq {
    ft_cuda_ctx *x;
    int n;
    const ft_cuda_op **ops;
    ft_cuda_call *dcs;
    ft_config *cfgs;
#if FT_HAVE_CUDA
    cudaGraphExec_t exec; /* NULL: launched back to back on the stream */
    cudaEvent_t e0, e1;
    int events;
#endif
} cuda_seq;

static void seq_close(void *p) {
    cuda_seq *q = p;
    if (!q) return;
#if FT_HAVE_CUDA
    if (q->exec) cudaGraphExecDestroy(q->exec);
    if (q->events) {
        cudaEventDestroy(q->e0);
        cudaEventDestroy(q->e1);
    }
#endif
    free(q->ops);
    free(q->dcs);
    free(q->cfgs);
    free(q);
}

/* Every call once, in order, on the stream. */
static ft_status seq_launch(cuda_seq *q, ft_err *err) {
    for (int i = 0; i < q->n; i++) {
        ft_status s = q->ops[i]->run(q->x, &q->dcs[i], &q->cfgs[i], err);
        if (s) return s;
    }
    return FT_OK;
}

#if FT_HAVE_CUDA
/* Capture one pass of the sequence into a graph; on any failure the stream is left as it was and
 * the sequence runs eagerly (the reason in mode). */
static void seq_capture(cuda_seq *q, char *mode, size_t mode_len) {
    cudaStream_t st = (cudaStream_t)ft_dev_cuda_stream(q->x->dev);
    cudaGraph_t g = NULL;
    ft_err e = {0};
    if (cudaStreamBeginCapture(st, cudaStreamCaptureModeRelaxed) != cudaSuccess) {
        (void)cudaGetLastError();
        snprintf(mode, mode_len, "stream (graph capture refused)");
        return;
    }
    ft_status s = seq_launch(q, &e);
    cudaError_t ce = cudaStreamEndCapture(st, &g);
    if (s || ce != cudaSuccess || !g || cudaGraphInstantiate(&q->exec, g, 0) != cudaSuccess) {
        (void)cudaGetLastError();
        q->exec = NULL;
        snprintf(mode, mode_len, "stream (graph capture failed: %s)",
                 s ? e.msg : cudaGetErrorString(ce));
    } else {
        snprintf(mode, mode_len, "cuda graph");
    }
    if (g) cudaGraphDestroy(g);
}
#endif

static ft_status seq_open_on(int emulated, ft_call *const *calls, const ft_config *const *cfgs,
                             int n, void **out, char *mode, size_t mode_len, ft_err *err) {
    const char *bname = emulated ? "cuda-emu" : "cuda";
    *out = NULL;
    ft_cuda_ctx *x;
    ft_status s = ft_cuda_ctx_get(emulated, &x, err);
    if (s) return s;
    cuda_seq *q = calloc(1, sizeof *q);
    if (!q || !(q->ops = calloc((size_t)n + 1, sizeof *q->ops)) ||
        !(q->dcs = calloc((size_t)n + 1, sizeof *q->dcs)) ||
        !(q->cfgs = calloc((size_t)n + 1, sizeof *q->cfgs))) {
        seq_close(q);
        return ft_err_set(err, FT_ENOMEM, "out of memory for a sequence of %d calls", n);
    }
    q->x = x;
    q->n = n;
    for (int i = 0; i < n && !s; i++) {
        const ft_config *cfg = cfgs ? cfgs[i] : NULL;
        ft_config def;
        if (!(s = resolve(calls[i], &cfg, &def, &q->ops[i], bname, err))) {
            q->cfgs[i] = *cfg;
            s = prepare(x, calls[i], &q->dcs[i], err);
        }
    }
    /* One eager pass: modules compiled, scratch and cuBLASLt's plans made, before any capture. */
    if (!s && !(s = seq_launch(q, err))) s = ft_dev_sync(x->dev, err);
    if (s) {
        seq_close(q);
        return s;
    }
    snprintf(mode, mode_len, "%s", emulated ? "emulated (host clock)" : "stream");
#if FT_HAVE_CUDA
    if (!emulated) {
        if (cudaEventCreate(&q->e0) != cudaSuccess || cudaEventCreate(&q->e1) != cudaSuccess) {
            (void)cudaGetLastError();
            seq_close(q);
            return ft_err_set(err, FT_EINTERNAL, "cudaEventCreate failed for a sequence");
        }
        q->events = 1;
        seq_capture(q, mode, mode_len);
    }
#endif
    *out = q;
    return FT_OK;
}

static ft_status seq_time(void *p, int reps, double *secs, ft_err *err) {
    cuda_seq *q = p;
    ft_status s = FT_OK;
#if FT_HAVE_CUDA
    if (!q->x->emulated) {
        cudaStream_t st = (cudaStream_t)ft_dev_cuda_stream(q->x->dev);
        cudaEventRecord(q->e0, st);
        for (int r = 0; r < reps && !s; r++) {
            if (q->exec) {
                cudaError_t ce = cudaGraphLaunch(q->exec, st);
                if (ce != cudaSuccess)
                    s = ft_err_set(err, ft_cuda_error_status(ce, FT_EINTERNAL),
                                   "cudaGraphLaunch: %s", cudaGetErrorString(ce));
            } else {
                s = seq_launch(q, err);
            }
        }
        cudaEventRecord(q->e1, st);
        cudaError_t ce = cudaEventSynchronize(q->e1);
        if (s) return s;
        float ms = 0;
        if (ce != cudaSuccess || cudaEventElapsedTime(&ms, q->e0, q->e1) != cudaSuccess)
            return ft_err_set(err, ft_cuda_error_status(ce, FT_EINTERNAL), "timing a sequence: %s",
                              cudaGetErrorString(ce));
        *secs = ms * 1e-3;
        return FT_OK;
    }
#endif
    double t0 = ft_now_s();
    for (int r = 0; r < reps && !s; r++)
        s = seq_launch(q, err);
    if (!s) s = ft_dev_sync(q->x->dev, err);
    *secs = ft_now_s() - t0;
    return s;
}

static int supports(const ft_op *op) { return op && ft_cuda_op_of(op) != NULL; }

static const ft_space *space_of(const ft_op *op) {
    const ft_cuda_op *o = op ? ft_cuda_op_of(op) : NULL;
    return o ? o->space : NULL;
}

/* ---- static analysis before timing (the GPU) ----------------------------------------------- */

/* A config is pruned on the GPU when one of its kernels spills, needs more shared memory than
 * the device allows, or cannot fit one block per SM: ptxas's report of the modules compiled for
 * this device (they are compiled anyway before they run) against the device's own limits. */
static int gpu_static_ok(const ft_call *c, const ft_config *cfg, char *why, size_t n) {
    ft_cuda_ctx *x;
    const ft_cuda_op *op = ft_cuda_op_of(c->op);
    if (!op || !op->modules || ft_cuda_ctx_get(0, &x, NULL) != FT_OK) return 1;
    ft_gpu_spec spec;
    if (ft_gpu_spec_from_props(ft_dev_props_of(x->dev), &spec, NULL) != FT_OK) return 1;
    ft_cuda_module_spec ms[8];
    memset(ms, 0, sizeof ms);
    int nm = op->modules(c, ft_cuda_call_dt(c), cfg, ms, 8);
    for (int i = 0; i < nm; i++) {
        ft_dev_module *m;
        ft_err err = {0};
        if (ft_cuda_module(x, &ms[i], &m, &err) != FT_OK) {
            snprintf(why, n, "does not compile: %s", err.msg);
            return 0;
        }
        ft_kernel_info info[FT_CUDA_MAX_KERNELS];
        memset(info, 0, sizeof info);
        for (int k = 0; k < ms[i].nkernels; k++)
            if (ft_dev_kernel_info(m, ms[i].kernels[k].name, &info[k], &err) != FT_OK) {
                snprintf(why, n, "%s", err.msg);
                return 0;
            }
        if (!ft_cuda_check_module(&spec, &ms[i], info, why, n)) return 0;
    }
    return 1;
}

/* The GPU's view of each op's space: the same parameters, validity that adds the device's own
 * limits. One per CUDA op, made on first use. */
static struct {
    const ft_cuda_op *op;
    ft_space space;
} gpu_spaces[16];

static int gpu_valid(const ft_call *c, const ft_config *cfg, char *why, size_t n) {
    const ft_cuda_op *op = ft_cuda_op_of(c->op);
    if (!op) return 0;
    int v = op->space->valid ? op->space->valid(c, cfg, why, n) : FT_CONFIG_VALID;
    if (v == FT_CONFIG_INVALID) return FT_CONFIG_INVALID;
    /* A duplicate keeps its verdict (and its reason) once the device can run it. */
    char local[256];
    if (!gpu_static_ok(c, cfg, v == FT_CONFIG_DUPLICATE ? local : why,
                       v == FT_CONFIG_DUPLICATE ? sizeof local : n)) {
        if (v == FT_CONFIG_DUPLICATE) snprintf(why, n, "%s", local);
        return FT_CONFIG_INVALID;
    }
    return v;
}

static const ft_space *gpu_space_of(const ft_op *op) {
    const ft_cuda_op *cop = ft_cuda_op_of(op);
    if (!cop) return NULL;
    const ft_space *out = NULL;
    pthread_mutex_lock(&ctx_lock);
    for (int i = 0; i < 16 && !out; i++) {
        if (gpu_spaces[i].op && gpu_spaces[i].op != cop) continue;
        if (!gpu_spaces[i].op) {
            gpu_spaces[i].op = cop;
            gpu_spaces[i].space = *cop->space;
            gpu_spaces[i].space.valid = gpu_valid;
        }
        out = &gpu_spaces[i].space;
    }
    pthread_mutex_unlock(&ctx_lock);
    return out;
}

/* ---- compiling ahead ------------------------------------------------------------------------ */

/* Compile (or load from the disk cache) every module cfg needs to run c, running nothing: what
 * the first run would otherwise do inside the call the tuner's watchdog times. */
static ft_status prepare_on(int emulated, const ft_call *c, const ft_config *cfg, ft_err *err) {
    const ft_cuda_op *op = ft_cuda_op_of(c->op);
    if (!op || !op->modules) return FT_OK;
    ft_cuda_ctx *x;
    ft_status s = ft_cuda_ctx_get(emulated, &x, err);
    if (s) return s;
    ft_cuda_module_spec ms[8];
    memset(ms, 0, sizeof ms);
    const int nm = op->modules(c, ft_cuda_call_dt(c), cfg, ms, 8);
    for (int i = 0; i < nm && i < 8 && !s; i++) {
        ft_dev_module *m;
        s = ft_cuda_module(x, &ms[i], &m, err);
    }
    return s;
}

/* Queue on the context's pool (made with `jobs` threads, made again when the count changes) the
 * modules of each config the op's own rules allow (cheap: nothing compiles to judge them), in
 * order. What an earlier call queued and no thread has started is dropped first: it was for
 * an earlier plan. The GPU's validity compiles the duplicates too (for the reason it gives
 * them); the emulator's tuner never runs them, so it leaves them out. */
static void prefetch_on(int emulated, const ft_call *c, const ft_config *cfgs, int n, int jobs) {
    const ft_cuda_op *op = ft_cuda_op_of(c->op);
    ft_cuda_ctx *x;
    if (!op || !op->modules || jobs < 1 || ft_cuda_ctx_get(emulated, &x, NULL) != FT_OK) return;
    if (x->pool && (n > 0 && x->pool_jobs != jobs)) {
        ft_cuda_pool_free(x->pool);
        x->pool = NULL;
    }
    if (n <= 0) {
        ft_cuda_pool_drop_queued(x->pool);
        return;
    }
    if (!x->pool) {
        if (ft_cuda_pool_for_device(x->dev, jobs, &x->pool, NULL) != FT_OK) return;
        x->pool_jobs = jobs;
    }
    ft_cuda_pool_drop_queued(x->pool);
    ft_dt dt = ft_cuda_call_dt(c);
    for (int i = 0; i < n; i++) {
        int v = ft_space_check(op->space, c, &cfgs[i], NULL, 0);
        if (v == FT_CONFIG_INVALID || (emulated && v == FT_CONFIG_DUPLICATE)) continue;
        ft_cuda_module_spec ms[8];
        memset(ms, 0, sizeof ms);
        int nm = op->modules(c, dt, &cfgs[i], ms, 8);
        for (int k = 0; k < nm && k < 8; k++)
            ft_cuda_pool_add(x->pool, &ms[k]);
    }
}

/* ---- predicted time ------------------------------------------------------------------------ */

/* The device a prediction is for: a table entry by name, or (no name) the table's entry for the
 * GPU the `cuda` backend runs on. */
static ft_status predict_device(int emulated, const char *name, const ft_gpu_spec **out,
                                ft_err *err) {
    if (name && *name) {
        if (!(*out = ft_gpu_spec_find(name)))
            return ft_err_set(err, FT_EINVAL, "unknown GPU '%s' to predict for (%s)", name,
                              ft_gpu_spec_names());
        return FT_OK;
    }
    if (emulated)
        return ft_err_set(err, FT_EINVAL,
                          "cuda-emu predicts for a named GPU (%s): the emulator is none",
                          ft_gpu_spec_names());
    ft_cuda_ctx *x;
    ft_status s = ft_cuda_ctx_get(0, &x, err);
    if (s) return s;
    const ft_dev_props *p = ft_dev_props_of(x->dev);
    for (int i = 0; i < ft_gpu_spec_count(); i++)
        if (strcmp(ft_gpu_spec_at(i)->model, p->name) == 0) {
            *out = ft_gpu_spec_at(i);
            return FT_OK;
        }
    return ft_err_set(err, FT_EUNSUPPORTED,
                      "%s is not in the device table (%s): its DRAM bandwidth and tensor "
                      "throughput are unknown; name a device to predict for",
                      p->name, ft_gpu_spec_names());
}

/* Whether cfg runs its FLOPs on the tensor cores: bf16 storage with a parameter at a value
 * labelled "mma" (the kernels' mma.sync paths: stage=mma, path=mma, core=mma), or an op whose
 * space has an `algo` (its GEMMs are cuBLASLt's, which take bf16 to the tensor cores; f32
 * GEMMs compute in fp32 on the CUDA cores, gemm.c). The ops' own tensor-core paths are named so
 * in their headers; a path named otherwise would be counted on the CUDA cores. */
static int uses_tensor_cores(const ft_call *c, const ft_space *s, const ft_config *cfg) {
    if (ft_cuda_call_dt(c) != FT_DT_BF16) return 0;
    for (int i = 0; i < s->nparams; i++) {
        const ft_param *p = &s->params[i];
        if (strcmp(p->name, "algo") == 0) return 1;
        int v = cfg->v[i];
        if (p->labels && v >= 0 && v < p->n && strcmp(p->labels[v], "mma") == 0) return 1;
    }
    return 0;
}

/* What is known of cfg's kernels on g (kfacts.h: ptxas's resources for g's architecture through
 * NVRTC's disk cache, the occupancy, the SASS mix through its cache): the least-occupied kernel's
 * occupancy (in->warps_per_sm, in->block_threads) and the SASS's instructions per global byte,
 * averaged over the kernels that have one (*ipb; 0: none). Without the toolkit nothing is known:
 * full occupancy, no SASS. FT_EUNSUPPORTED when a kernel cannot run on g (spills, too much
 * shared memory, no block per SM). */
static ft_status predict_facts(const ft_call *c, const ft_config *cfg, const ft_gpu_spec *g,
                               ft_predict_in *in, double *ipb, ft_err *err) {
    *ipb = 0;
    ft_kfacts_set *set = malloc(sizeof *set);
    if (!set) return ft_err_set(err, FT_ENOMEM, "out of memory");
    ft_status s = ft_kfacts_of(c, cfg, g, 1, set, err);
    if (s == FT_OK && set->unfit[0])
        s = ft_err_set(err, FT_EUNSUPPORTED, "cannot run on %s: %s", g->name, set->unfit);
    int nipb = 0;
    for (int i = 0; s == FT_OK && i < set->n; i++) {
        const ft_kfacts *f = &set->k[i];
        double x = ft_kfacts_instructions_per_byte(f);
        if (x > 0) *ipb += x, nipb++;
        if (f->occ.blocks_per_sm <= 0) continue;
        if (in->warps_per_sm == 0 || f->occ.warps_per_sm < in->warps_per_sm) {
            in->warps_per_sm = f->occ.warps_per_sm;
            in->block_threads = f->block_threads;
        }
    }
    if (nipb) *ipb /= nipb;
    free(set);
    return s;
}

/* What the time model is given for cfg of call c on device g: every input of the prediction is
 * gathered here, so better figures replace these where they are known (`flaretune inspect`
 * replaces them with the emulator's profile of the call). Napkin-level here:
 *   dram_bytes         the op's minimal traffic (ft_call_io_bytes: every tensor once)
 *   l2_bytes           not known (0: as dram_bytes)
 *   shared_wavefronts  not known (0)
 *   mma_flops          the op's FLOPs (op->flops) when cfg runs them on the tensor cores
 *   warp_instructions  the larger of: the SASS's instructions per byte a thread moves (the hot
 *                      loop's, kfacts.h) times the napkin bytes over 32 lanes; and, off the
 *                      tensor cores, the op's FLOPs as FP32 FMAs (FLOPs / 64: 32 lanes x 2)
 *   fp32_instructions  off the tensor cores, those FMAs
 *   blocks             not known (0: a grid that fills the device)
 * Known for the device: the occupancy of cfg's least-occupied kernel (predict_facts). */
static ft_status predict_inputs(ft_call *c, const ft_cuda_op *op, const ft_config *cfg,
                                const ft_gpu_spec *g, ft_predict_in *in, ft_err *err) {
    memset(in, 0, sizeof *in);
    double flops = c->op->flops ? c->op->flops(c) : 0, ipb = 0;
    in->dram_bytes = ft_call_io_bytes(c);
    if (uses_tensor_cores(c, op->space, cfg))
        in->mma_flops = flops;
    else
        in->warp_instructions = in->fp32_instructions = flops / 64;
    ft_status s = predict_facts(c, cfg, g, in, &ipb, err);
    if (ipb * in->dram_bytes / 32 > in->warp_instructions)
        in->warp_instructions = ipb * in->dram_bytes / 32;
    return s;
}

static ft_status predict_on(int emulated, ft_call *c, const ft_config *cfg, const char *device,
                            ft_backend_prediction *out, ft_err *err) {
    const char *bname = emulated ? "cuda-emu" : "cuda";
    memset(out, 0, sizeof *out);
    const ft_gpu_spec *g;
    ft_status s = predict_device(emulated, device, &g, err);
    if (s) return s;
    const ft_cuda_op *op = ft_cuda_op_of(c->op);
    if (!op)
        return ft_err_set(err, FT_EUNSUPPORTED, "%s does not implement %s", bname, c->op->name);
    ft_config def;
    if (!cfg) {
        ft_config_default(op->space, &def);
        cfg = &def;
    }
    ft_predict_in in;
    if ((s = predict_inputs(c, op, cfg, g, &in, err))) return s;
    ft_prediction p = ft_predict(g, &in);
    out->seconds = p.seconds;
    out->bound = ft_bound_name(p.bound);
    _Static_assert(FT_BOUND_N <= FT_PREDICTION_MAX_LIMITS, "a limit of the model has no slot");
    out->nlimits = FT_BOUND_N;
    for (int b = 0; b < FT_BOUND_N; b++) {
        out->limit_name[b] = ft_bound_name((ft_bound)b);
        out->limit_s[b] = p.limit[b];
    }
    snprintf(out->device, sizeof out->device, "%s", g->name);
    return FT_OK;
}

static int available_on(int emulated, char *why, size_t n) {
    ft_cuda_ctx *x;
    ft_err err = {0};
    if (ft_cuda_ctx_get(emulated, &x, &err) == FT_OK) return 1;
    snprintf(why, n, "%s", err.msg);
    return 0;
}

/* The two backends share every function above, told apart by `emulated`; the backend table
 * takes functions without it, one set per backend. */
#define FT_CUDA_HOOKS(prefix, emulated)                                                            \
    static int prefix##_available(char *why, size_t n) { return available_on(emulated, why, n); }  \
    static ft_status prefix##_run(ft_call *c, const ft_config *cfg, ft_err *err) {                 \
        return run_on(emulated, c, cfg, 1, NULL, err);                                             \
    }                                                                                              \
    static ft_status prefix##_timed(ft_call *c, const ft_config *cfg, int reps, double *secs,      \
                                    ft_err *err) {                                                 \
        return run_on(emulated, c, cfg, reps, secs, err);                                          \
    }                                                                                              \
    static ft_status prefix##_seq_open(ft_call *const *calls, const ft_config *const *cfgs, int n, \
                                       void **seq, char *mode, size_t mode_len, ft_err *err) {     \
        return seq_open_on(emulated, calls, cfgs, n, seq, mode, mode_len, err);                    \
    }                                                                                              \
    static void prefix##_prefetch(const ft_call *c, const ft_config *cfgs, int n, int jobs) {      \
        prefetch_on(emulated, c, cfgs, n, jobs);                                                   \
    }                                                                                              \
    static ft_status prefix##_prepare(const ft_call *c, const ft_config *cfg, ft_err *err) {       \
        return prepare_on(emulated, c, cfg, err);                                                  \
    }                                                                                              \
    static ft_status prefix##_predict(ft_call *c, const ft_config *cfg, const char *device,        \
                                      ft_backend_prediction *out, ft_err *err) {                   \
        return predict_on(emulated, c, cfg, device, out, err);                                     \
    }                                                                                              \
    static ft_status prefix##_mem_alloc(size_t bytes, void **ptr, ft_err *err) {                   \
        return mem_alloc_on(emulated, bytes, ptr, err);                                            \
    }                                                                                              \
    static void prefix##_mem_free(void *ptr) { mem_free_on(emulated, ptr); }                       \
    static ft_status prefix##_mem_copy(void *dst, const void *src, size_t bytes, int kind,         \
                                       ft_err *err) {                                              \
        return mem_copy_on(emulated, dst, src, bytes, kind, err);                                  \
    }                                                                                              \
    static ft_status prefix##_bind_device(ft_call *c, int i, void *dptr, ft_err *err) {            \
        return bind_device_on(emulated, c, i, dptr, err);                                          \
    }
FT_CUDA_HOOKS(emu, 1)
FT_CUDA_HOOKS(gpu, 0)
/* The fields of a backend's table that FT_CUDA_HOOKS fills, and those the two share. */
#define FT_CUDA_HOOK_FIELDS(prefix)                                                                \
    .dtypes = 3, .supports = supports, .kernel_modules = ft_kc_counts, .seq_time = seq_time,       \
    .seq_close = seq_close, .available = prefix##_available, .run = prefix##_run,                  \
    .timed = prefix##_timed, .seq_open = prefix##_seq_open, .prefetch = prefix##_prefetch,         \
    .prepare = prefix##_prepare, .predict = prefix##_predict, .mem_alloc = prefix##_mem_alloc,     \
    .mem_free = prefix##_mem_free, .mem_copy = prefix##_mem_copy,                                  \
    .bind_device = prefix##_bind_device

static const char *emu_clock(void) { return "emulated"; }
static const char *emu_device(void) {
    ft_cuda_ctx *x;
    return ft_cuda_ctx_get(1, &x, NULL) == FT_OK ? x->fingerprint : "cuda-emu: unavailable";
}

const ft_backend ft_backend_cuda_emu = {
    .name = "cuda-emu",
    .summary = "the CUDA backend's kernels and host code on the SIMT emulator (CPU; checks, "
               "not speed)",
    .built = 1,
    .space = space_of,
    .clock = emu_clock,
    .device = emu_device,
    FT_CUDA_HOOK_FIELDS(emu),
};

static const char *gpu_clock(void) {
    ft_cuda_ctx *x;
    return ft_cuda_ctx_get(0, &x, NULL) == FT_OK ? x->clock : "none";
}
static const char *gpu_device(void) {
    ft_cuda_ctx *x;
    return ft_cuda_ctx_get(0, &x, NULL) == FT_OK ? x->fingerprint : "cuda: unavailable";
}

/* The GPU's own ceilings, one round (ft_ceilings_of keeps the best of rounds and of the cache):
 * the L2 level, a device-to-device copy between two buffers of a quarter of the L2 each,
 * repeated back to back so they stay resident; memory (HBM), a copy of 1 GiB; a bf16 cuBLASLt
 * GEMM of 8192^3. Bytes count read + written, as STREAM does; each figure is the best of 10
 * timed with CUDA events after two warm-ups. */
#if FT_HAVE_CUDA
static ft_status gpu_copy_best(ft_cuda_ctx *x, void *dst, const void *src, size_t bytes, int reps,
                               double *bw, ft_err *err) {
    cudaStream_t st = ft_dev_cuda_stream(x->dev);
    cudaEvent_t e0, e1;
    cudaEventCreate(&e0);
    cudaEventCreate(&e1);
    ft_status s = FT_OK;
    double best = 0;
    for (int k = -2; k < 10 && !s; k++) {
        cudaEventRecord(e0, st);
        for (int r = 0; r < reps && !s; r++)
            s = ft_dev_copy(x->dev, dst, src, bytes, FT_COPY_D2D, err);
        cudaEventRecord(e1, st);
        cudaEventSynchronize(e1);
        float ms = 0;
        cudaEventElapsedTime(&ms, e0, e1);
        double r = ms > 0 ? 2.0 * (double)bytes * reps / (ms * 1e-3) : 0;
        if (k >= 0 && r > best) best = r;
    }
    cudaEventDestroy(e0);
    cudaEventDestroy(e1);
    *bw = best;
    return s;
}
#endif

static ft_status gpu_ceilings(ft_ceilings *out, ft_err *err) {
#if FT_HAVE_CUDA
    ft_cuda_ctx *x;
    ft_status s = ft_cuda_ctx_get(0, &x, err);
    if (s) return s;
    double t_start = ft_now_s();
    memset(out, 0, sizeof *out);
    const size_t bytes = (size_t)1 << 30;
    const size_t l2 = ft_dev_props_of(x->dev)->l2_bytes;
    const int n = 8192;
    void *a = NULL, *b = NULL, *cbuf = NULL;
    if ((s = ft_dev_alloc(x->dev, bytes, &a, err)) || (s = ft_dev_alloc(x->dev, bytes, &b, err)))
        goto done;
    if ((s = ft_dev_memset(x->dev, a, 0x3c, bytes, err))) goto done; /* bf16 1.0-ish, not zero */
    double bw_l2 = 0, bw_mem = 0;
    if (l2 >= ((size_t)1 << 20) && (s = gpu_copy_best(x, b, a, l2 / 4, 20, &bw_l2, err))) goto done;
    if ((s = gpu_copy_best(x, b, a, bytes, 1, &bw_mem, err))) goto done;
    if (bw_l2 > 0) {
        ft_ceil_level *lv = &out->level[out->nlevels++];
        snprintf(lv->name, sizeof lv->name, "L2");
        lv->capacity = (double)l2;
        lv->probe_bytes = (double)l2 / 2;
        lv->bw = bw_l2;
    }
    ft_ceil_level *hbm = &out->level[out->nlevels++];
    snprintf(hbm->name, sizeof hbm->name, "HBM");
    hbm->probe_bytes = 2.0 * (double)bytes;
    hbm->bw = bw_mem;
    out->copy_bytes = (double)bytes;
    /* The GEMM reuses the copy buffers: A and B bf16 8192^2 (128 MiB each), C fp32 (256 MiB). */
    ft_gemm_desc g = {0, 1, n, n, n, n, n, n, 1, 0, 0, 0, FT_DT_BF16, FT_DT_F32, 1.0f, 0.0f};
    cbuf = (char *)b + (size_t)n * n * 2;
    cudaStream_t st = ft_dev_cuda_stream(x->dev);
    cudaEvent_t e0, e1;
    cudaEventCreate(&e0);
    cudaEventCreate(&e1);
    double best = 0;
    for (int k = -2; k < 10 && !s; k++) {
        cudaEventRecord(e0, st);
        s = ft_cuda_gemm(x, &g, a, b, cbuf, 0, err);
        cudaEventRecord(e1, st);
        cudaEventSynchronize(e1);
        float ms = 0;
        cudaEventElapsedTime(&ms, e0, e1);
        double r = ms > 0 ? 2.0 * n * (double)n * n / (ms * 1e-3) : 0;
        if (k >= 0 && r > best) best = r;
    }
    cudaEventDestroy(e0);
    cudaEventDestroy(e1);
    if (!s) {
        out->gemm_flops = out->flops = best;
        out->gemm_n = n;
        out->gemm = "cuBLASLt bf16";
    }
done:
    ft_dev_free(x->dev, a);
    ft_dev_free(x->dev, b);
    out->threads = 1;
    out->measured_s = ft_now_s() - t_start;
    out->bw = out->nlevels ? out->level[out->nlevels - 1].bw : 0;
    return s ? ft_err_wrap(err, "measuring the GPU's ceilings") : FT_OK;
#else
    (void)out;
    return ft_err_set(err, FT_ENODEV, "flaretune was built without the CUDA toolkit");
#endif
}

static const char *gpu_device_details(void) {
    ft_cuda_ctx *x;
    return ft_cuda_ctx_get(0, &x, NULL) == FT_OK ? x->details : "";
}

static void gpu_set_cold(int on) {
    ft_cuda_ctx *x;
    if (ft_cuda_ctx_get(0, &x, NULL) == FT_OK) x->cold = on;
}

static int gpu_last_kernels(ft_kernel_span *out, int max) {
#if FT_HAVE_CUDA
    ft_cuda_ctx *x;
    if (ft_cuda_ctx_get(0, &x, NULL) != FT_OK || !x->timer || max <= 0) return 0;
    ft_kernel_record rec[64];
    int n = ft_timer_last_records(x->timer, rec, max < 64 ? max : 64);
    for (int i = 0; i < n; i++) {
        snprintf(out[i].name, sizeof out[i].name, "%.95s", rec[i].name);
        out[i].start_s = x->wall_minus_cupti_s + (double)rec[i].start_ns * 1e-9;
        out[i].end_s = x->wall_minus_cupti_s + (double)rec[i].end_ns * 1e-9;
    }
    return n;
#else
    (void)out;
    (void)max;
    return 0;
#endif
}

const ft_backend ft_backend_cuda = {
    .name = "cuda",
    .summary = "NVIDIA GPUs: kernels compiled at run time by NVRTC, GEMMs by cuBLASLt, timed "
               "with CUPTI",
    .built = FT_HAVE_CUDA,
    .space = gpu_space_of,
    .clock = gpu_clock,
    .device = gpu_device,
    .device_details = gpu_device_details,
    .set_cold = gpu_set_cold,
    .last_kernels = gpu_last_kernels,
    .ceilings = gpu_ceilings,
    .valid_compiles = 1,
    FT_CUDA_HOOK_FIELDS(gpu),
};
