/* api.c: the C API of libflaretune (include/flaretune.h, docs/api.md).
 *
 * A context is a backend, an optional profile, the caller's bindings and a workspace, behind
 * one lock. flaretune_run builds an ft_call from the bindings exactly as `flaretune exec` does
 * from .npy files (the same binding, checks and backend entry point; the command line runs its
 * ops through this file), so the two give the same bits for the same config and inputs.
 *
 * Host float32 and integer tensors are used in place (no copy). bfloat16 host tensors are
 * widened to float32 on the way in and rounded back on the way out: the backends compute in
 * float32, and a device backend stores bfloat16 (attribute dtype=bf16) when every float tensor
 * of the call is bf16. Device float tensors are handed to the backend as they are (in the
 * call's storage type); device index tensors are small and read on the host first, since the
 * ops check them (lengths, labels) before anything runs.
 *
 * Apart from the lock below (the device backends' one device context per process), the API
 * keeps no state outside its contexts.
 */
#include "flaretune.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/env.h"
#include "flaretune/version.h"
#include "kernels/registry.h"
#include "op/backend.h"
#include "op/op.h"
#include "op/op_json.h"
#include "op/space.h"
#include "profiles/src/profile.h"

/* A device backend keeps one device context per process (kernel scratch, streams, the timer):
 * runs on it from different contexts take turns. CPU runs are not serialised. */
static pthread_mutex_t device_runs = PTHREAD_MUTEX_INITIALIZER;

#define MAX_BINDINGS 48
#define NAME_LEN 32

typedef struct binding {
    char name[NAME_LEN];
    void *data;
    flaretune_dtype dtype;
    int rank;
    int64_t shape[FT_MAX_RANK];
    flaretune_memory memory;
} binding;

struct flaretune_context {
    pthread_mutex_t lock;
    const ft_backend *be;
    char device[256];
    ft_profile *profile;
    unsigned profile_flags;
    binding b[MAX_BINDINGS];
    int nb;
    ft_workspace ws;
    char msg[FT_ERR_MSG_LEN + 64];
    char last_config[512], last_source[32];
    /* The buffers flaretune_device_alloc gave (freed ones removed): what device_free accepts
     * and device_copy and bind check their sizes against. */
    struct dev_buf {
        uintptr_t p;
        size_t bytes;
    } * bufs;
    int nbufs, capbufs;
};

/* ---- status and messages ------------------------------------------------------------------- */

static flaretune_status api_status(ft_status s) {
    switch (s) {
    case FT_OK: return FLARETUNE_OK;
    case FT_EINVAL: return FLARETUNE_EINVAL;
    case FT_ESHAPE: return FLARETUNE_ESHAPE;
    case FT_EFORMAT: return FLARETUNE_EFORMAT;
    case FT_EIO: return FLARETUNE_EIO;
    case FT_ENOMEM: return FLARETUNE_ENOMEM;
    case FT_EUNSUPPORTED: return FLARETUNE_EUNSUPPORTED;
    case FT_ENODEV: return FLARETUNE_ENODEV;
    default: return FLARETUNE_EINTERNAL;
    }
}

/* Record a message on ctx and return st: one line, as the header promises, whatever the strings
 * it quotes hold (a tensor's name, a hand-edited profile's device). */
static flaretune_status fail(flaretune_context *ctx, flaretune_status st, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static flaretune_status fail(flaretune_context *ctx, flaretune_status st, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(ctx->msg, sizeof ctx->msg, fmt, ap);
    va_end(ap);
    ft_err_one_line(ctx->msg);
    return st;
}

static flaretune_status fail_err(flaretune_context *ctx, const ft_err *err) {
    return fail(ctx, api_status(err->status), "%s", err->msg);
}

/* Every entry point takes the lock and clears the message; these bracket them. */
static int enter(flaretune_context *ctx) {
    if (!ctx) return 0;
    pthread_mutex_lock(&ctx->lock);
    ctx->msg[0] = '\0';
    return 1;
}

static flaretune_status leave(flaretune_context *ctx, flaretune_status st) {
    pthread_mutex_unlock(&ctx->lock);
    return st;
}

const char *flaretune_version(void) { return FT_VERSION " (" FT_GIT_DESCRIBE ")"; }

int flaretune_api_version(void) { return FLARETUNE_API_VERSION; }

const char *flaretune_status_name(flaretune_status s) {
    switch (s) {
    case FLARETUNE_OK: return "OK";
    case FLARETUNE_EINVAL: return "EINVAL";
    case FLARETUNE_ESHAPE: return "ESHAPE";
    case FLARETUNE_EFORMAT: return "EFORMAT";
    case FLARETUNE_EIO: return "EIO";
    case FLARETUNE_ENOMEM: return "ENOMEM";
    case FLARETUNE_EUNSUPPORTED: return "EUNSUPPORTED";
    case FLARETUNE_ENODEV: return "ENODEV";
    case FLARETUNE_EINTERNAL: return "EINTERNAL";
    case FLARETUNE_EUNBOUND: return "EUNBOUND";
    case FLARETUNE_EDEVICE: return "EDEVICE";
    }
    return "unknown status";
}

static const char *dtype_name(flaretune_dtype d) {
    switch (d) {
    case FLARETUNE_F32: return "float32";
    case FLARETUNE_BF16: return "bfloat16";
    case FLARETUNE_I32: return "int32";
    case FLARETUNE_U8: return "uint8";
    }
    return "?";
}

/* ---- contexts ------------------------------------------------------------------------------ */

/* The backends a context may be created on (docs/api.md), in the order messages list them. */
static const char *const api_backends[] = {"cpu", "cuda", "cuda-emu", "ref", "auto", NULL};

static void api_backend_list(char *buf, size_t n) {
    size_t k = 0;
    buf[0] = '\0';
    for (int i = 0; api_backends[i] && k < n; i++)
        k += (size_t)snprintf(buf + k, n - k, "%s%s", i ? ", " : "", api_backends[i]);
}

flaretune_status flaretune_create(flaretune_context **out, const char *backend) {
    if (!out) return FLARETUNE_EINVAL;
    flaretune_context *ctx = calloc(1, sizeof *ctx);
    *out = ctx;
    if (!ctx) return FLARETUNE_ENOMEM;
    pthread_mutex_init(&ctx->lock, NULL);
    snprintf(ctx->last_source, sizeof ctx->last_source, "none");
    char list[128];
    api_backend_list(list, sizeof list);
    if (!backend || !backend[0])
        return fail(ctx, FLARETUNE_EINVAL, "flaretune_create: which backend? (%s)", list);
    int known = 0;
    for (int i = 0; api_backends[i]; i++)
        known |= !strcmp(api_backends[i], backend);
    if (!known)
        return fail(ctx, FLARETUNE_EINVAL, "flaretune_create: unknown backend '%.40s' (%s)",
                    backend, list);
    ft_err err = {0};
    if (ft_backend_resolve(backend, NULL, &ctx->be, &err)) {
        ctx->be = NULL;
        return fail_err(ctx, &err);
    }
    ft_env env;
    ft_env_probe(&env);
    ft_backend_device(ctx->be, &env, ctx->device, sizeof ctx->device);
    return FLARETUNE_OK;
}

void flaretune_destroy(flaretune_context *ctx) {
    if (!ctx) return;
    ft_profile_free(ctx->profile);
    ft_ws_free(&ctx->ws);
    for (int i = 0; i < ctx->nbufs; i++) /* what flaretune_device_alloc gave and was not freed */
        ctx->be->mem_free((void *)ctx->bufs[i].p);
    free(ctx->bufs);
    pthread_mutex_destroy(&ctx->lock);
    free(ctx);
}

const char *flaretune_message(const flaretune_context *ctx) {
    return ctx ? ctx->msg : "no context (NULL)";
}

const char *flaretune_backend(const flaretune_context *ctx) {
    return ctx && ctx->be ? ctx->be->name : "";
}

const char *flaretune_device(const flaretune_context *ctx) { return ctx ? ctx->device : ""; }

const char *flaretune_last_config(const flaretune_context *ctx) {
    return ctx ? ctx->last_config : "";
}

const char *flaretune_last_config_source(const flaretune_context *ctx) {
    return ctx ? ctx->last_source : "";
}

/* A context that could not be created is good for its message and destroy only. */
static flaretune_status check_usable(flaretune_context *ctx, const char *fn) {
    if (!ctx->be)
        return fail(ctx, FLARETUNE_EINVAL, "%s: this context was not created (%s)", fn,
                    "flaretune_create failed; destroy it");
    return FLARETUNE_OK;
}

/* ---- profiles ------------------------------------------------------------------------------ */

/* Does p have an entry of backend be on device (NULL: any)? Lists the devices it has in buf. */
static int has_entries(const ft_profile *p, const char *be, const char *device, char *buf,
                       size_t n) {
    int found = 0;
    buf[0] = '\0';
    for (int i = 0; i < ft_profile_count(p); i++) {
        const ft_profile_entry *e = ft_profile_entry_at(p, i);
        if (strcmp(e->backend, be) != 0) continue;
        if (!device || strcmp(e->device, device) == 0) found = 1;
        if (!strstr(buf, e->device) && strlen(buf) + strlen(e->device) + 8 < n)
            snprintf(buf + strlen(buf), n - strlen(buf), "%s'%s'", buf[0] ? ", " : "", e->device);
    }
    return found;
}

static flaretune_status load_profile(flaretune_context *ctx, const char *path, unsigned flags) {
    if (!path) {
        ft_profile_free(ctx->profile);
        ctx->profile = NULL;
        return FLARETUNE_OK;
    }
    if (flags & ~(unsigned)FLARETUNE_ANY_DEVICE)
        return fail(ctx, FLARETUNE_EINVAL, "flaretune_load_profile: unknown flags 0x%x", flags);
    if (!path[0])
        return fail(ctx, FLARETUNE_EINVAL,
                    "flaretune_load_profile: the profile path is empty (NULL unloads the profile)");
    if (access(path, R_OK) != 0)
        return fail(ctx, FLARETUNE_EIO, "profile %s: cannot be read (%s)", path,
                    access(path, F_OK) == 0 ? "permission denied" : "no such file");
    ft_err err = {0};
    ft_profile *p;
    if (ft_profile_load(path, &p, &err)) return fail_err(ctx, &err);
    char devices[512];
    const char *be = ctx->be->name;
    if (!has_entries(p, be, (flags & FLARETUNE_ANY_DEVICE) ? NULL : ctx->device, devices,
                     sizeof devices)) {
        /* Entries skipped at load (a config outside the space, a missing field) count as none:
         * say why, as the command line's warnings would. */
        char why[FT_ERR_MSG_LEN / 2] = "";
        int nskip = ft_profile_skipped_count(p);
        if (nskip > 0 && ft_profile_warning_count(p) > 0)
            snprintf(why, sizeof why, " (%d %s skipped; the first: %s)", nskip,
                     nskip == 1 ? "entry" : "entries", ft_profile_warning_at(p, 0));
        if (!devices[0]) {
            ft_profile_free(p);
            return fail(ctx, FLARETUNE_EDEVICE, "profile %s has no entry for backend %s%s", path,
                        be, why);
        }
        /* The same CPU with OpenBLAS on a lesser core than flaretune runs it with (the command
         * line restarts itself with OPENBLAS_CORETYPE set; a library cannot). */
        ft_env env;
        ft_env_probe(&env);
        /* This machine, tuned with all its CPUs, where this process may use fewer. */
        ft_env whole = env;
        whole.usable_cpus = env.cpu_cores;
        char all[256], other[512];
        ft_backend_device(ctx->be, &whole, all, sizeof all);
        const int narrowed =
            env.usable_cpus != env.cpu_cores && has_entries(p, be, all, other, sizeof other);
        ft_profile_free(p);
        const char *core = ft_blas_core_upgrade(env.blas_core, &env);
        if (core && strcmp(be, "cpu") == 0)
            return fail(ctx, FLARETUNE_EDEVICE,
                        "profile %s has cpu entries for %s, but OpenBLAS in this process runs "
                        "its %s kernels where this CPU has %s ones: set OPENBLAS_CORETYPE=%s "
                        "in the environment (docs/api.md)",
                        path, devices, env.blas_core, core, core);
        if (narrowed)
            return fail(ctx, FLARETUNE_EDEVICE,
                        "profile %s was tuned on all %d CPUs of this machine ('%s'), and this "
                        "process may use %d (its affinity: taskset, a cpuset, an MPI rank's "
                        "slice): tune under the same mask, or FLARETUNE_ANY_DEVICE (exec "
                        "--any-device) uses them anyway",
                        path, env.cpu_cores, all, env.usable_cpus);
        return fail(ctx, FLARETUNE_EDEVICE,
                    "profile %s was tuned on another device: it has %s entries for %s, this "
                    "context runs on '%s' (FLARETUNE_ANY_DEVICE, exec --any-device, uses them "
                    "anyway)%s",
                    path, be, devices, ctx->device, why);
    }
    ft_profile_free(ctx->profile);
    ctx->profile = p;
    ctx->profile_flags = flags;
    return FLARETUNE_OK;
}

flaretune_status flaretune_load_profile(flaretune_context *ctx, const char *path,
                                        unsigned flags) {
    if (!enter(ctx)) return FLARETUNE_EINVAL;
    flaretune_status st = check_usable(ctx, "flaretune_load_profile");
    if (!st) st = load_profile(ctx, path, flags);
    return leave(ctx, st);
}

/* ---- bindings ------------------------------------------------------------------------------ */

/* Is `name` a tensor of some op? Lists every tensor name in known when not. */
static int is_tensor_name(const char *name, char *known, size_t n) {
    known[0] = '\0';
    for (int o = 0; o < ft_op_count(); o++) {
        const ft_op *op = ft_op_at(o);
        for (int i = 0; i < op->ntensors; i++) {
            const char *t = op->tensors[i].name;
            if (strcmp(t, name) == 0) return 1;
            char word[NAME_LEN + 4];
            snprintf(word, sizeof word, " %s,", t);
            char padded[1024];
            if (snprintf(padded, sizeof padded, " %s,", known) >= (int)sizeof padded) continue;
            if (!strstr(padded, word) && strlen(known) + strlen(t) + 3 < n)
                snprintf(known + strlen(known), n - strlen(known), "%s%s", known[0] ? ", " : "",
                         t);
        }
    }
    return 0;
}

static binding *find_binding(flaretune_context *ctx, const char *name) {
    for (int i = 0; i < ctx->nb; i++)
        if (strcmp(ctx->b[i].name, name) == 0) return &ctx->b[i];
    return NULL;
}

/* The buffer of flaretune_device_alloc's that holds p (NULL: none of this context's). */
static const struct dev_buf *buf_holding(const flaretune_context *ctx, const void *p) {
    for (int i = 0; i < ctx->nbufs; i++)
        if ((uintptr_t)p >= ctx->bufs[i].p && (uintptr_t)p - ctx->bufs[i].p < ctx->bufs[i].bytes)
            return &ctx->bufs[i];
    return NULL;
}

/* Whether bytes from p stay inside the buffer that holds p, where p is in one of this context's
 * (memory from elsewhere, cudaMalloc's, is the caller's to size); else the message. */
static flaretune_status check_extent(flaretune_context *ctx, const char *fn, const char *what,
                                     const void *p, size_t bytes) {
    const struct dev_buf *b = buf_holding(ctx, p);
    const size_t at = b ? (uintptr_t)p - b->p : 0;
    if (b && bytes > b->bytes - at)
        return fail(ctx, FLARETUNE_EINVAL,
                    "flaretune_%s: %s: %zu bytes from byte %zu of a %zu-byte device buffer run "
                    "past its end",
                    fn, what, bytes, at, b->bytes);
    return FLARETUNE_OK;
}

static flaretune_status bind(flaretune_context *ctx, const char *name, void *data,
                             flaretune_dtype dtype, int rank, const int64_t *shape,
                             flaretune_memory memory) {
    char known[1024];
    if (!name || !name[0]) return fail(ctx, FLARETUNE_EINVAL, "flaretune_bind: no tensor name");
    if (!is_tensor_name(name, known, sizeof known) || strlen(name) >= NAME_LEN)
        return fail(ctx, FLARETUNE_EINVAL, "flaretune_bind: no op has a tensor named '%.40s' (%s)",
                    name, known);
    if ((unsigned)dtype > FLARETUNE_U8)
        return fail(ctx, FLARETUNE_EINVAL, "flaretune_bind: '%s': unknown dtype %d", name,
                    (int)dtype);
    if ((unsigned)memory > FLARETUNE_DEVICE)
        return fail(ctx, FLARETUNE_EINVAL, "flaretune_bind: '%s': unknown memory kind %d", name,
                    (int)memory);
    if (memory == FLARETUNE_DEVICE && !ctx->be->bind_device)
        return fail(ctx, FLARETUNE_EUNSUPPORTED,
                    "flaretune_bind: '%s': the %s backend has no device memory (bind host memory)",
                    name, ctx->be->name);
    if (rank < 0 || rank > FT_MAX_RANK)
        return fail(ctx, FLARETUNE_EINVAL, "flaretune_bind: '%s': rank %d (0 to %d)", name, rank,
                    FT_MAX_RANK);
    if (rank > 0 && !shape)
        return fail(ctx, FLARETUNE_EINVAL, "flaretune_bind: '%s': rank %d with no shape", name,
                    rank);
    for (int d = 0; d < rank; d++)
        if (shape[d] < 0 || shape[d] > ((int64_t)1 << 40))
            return fail(ctx, FLARETUNE_EINVAL, "flaretune_bind: '%s': dimension %d is %lld", name,
                        d, (long long)shape[d]);
    int64_t numel;
    if (ft_shape_numel(rank, shape, &numel)) {
        char text[128];
        return fail(ctx, FLARETUNE_EINVAL,
                    "flaretune_bind: '%s': shape %s is too large: its byte count does not fit in "
                    "64 bits",
                    name, ft_shape_str(rank, shape, text, sizeof text));
    }
    if (!data)
        return fail(ctx, FLARETUNE_EINVAL, "flaretune_bind: '%s': data is NULL", name);
    static const size_t esize[] = {
        [FLARETUNE_F32] = 4, [FLARETUNE_BF16] = 2, [FLARETUNE_I32] = 4, [FLARETUNE_U8] = 1};
    if (memory == FLARETUNE_DEVICE) {
        char what[64];
        snprintf(what, sizeof what, "'%s'", name);
        flaretune_status st = check_extent(ctx, "bind", what, data, (size_t)numel * esize[dtype]);
        if (st) return st;
    }
    binding *b = find_binding(ctx, name);
    if (!b) {
        if (ctx->nb == MAX_BINDINGS)
            return fail(ctx, FLARETUNE_EINVAL, "flaretune_bind: more than %d tensors bound",
                        MAX_BINDINGS);
        b = &ctx->b[ctx->nb++];
    }
    memset(b, 0, sizeof *b);
    snprintf(b->name, sizeof b->name, "%s", name);
    b->data = data;
    b->dtype = dtype;
    b->rank = rank;
    for (int d = 0; d < rank; d++)
        b->shape[d] = shape[d];
    b->memory = memory;
    return FLARETUNE_OK;
}

flaretune_status flaretune_bind(flaretune_context *ctx, const char *name, void *data,
                                flaretune_dtype dtype, int rank, const int64_t *shape,
                                flaretune_memory memory) {
    if (!enter(ctx)) return FLARETUNE_EINVAL;
    flaretune_status st = check_usable(ctx, "flaretune_bind");
    if (!st) st = bind(ctx, name, data, dtype, rank, shape, memory);
    return leave(ctx, st);
}

flaretune_status flaretune_unbind(flaretune_context *ctx, const char *name) {
    if (!enter(ctx)) return FLARETUNE_EINVAL;
    flaretune_status st = FLARETUNE_OK;
    if (!name) {
        ctx->nb = 0;
    } else {
        binding *b = find_binding(ctx, name);
        if (!b)
            st = fail(ctx, FLARETUNE_EUNBOUND, "flaretune_unbind: '%.40s' is not bound", name);
        else
            *b = ctx->b[--ctx->nb];
    }
    return leave(ctx, st);
}

/* ---- running an op ------------------------------------------------------------------------- */

/* Apply "name=value,..." to c's attributes. */
static ft_status parse_attrs(ft_call *c, const char *text, ft_err *err) {
    if (!text) return FT_OK;
    char buf[1024];
    if (strlen(text) >= sizeof buf) return ft_err_set(err, FT_EINVAL, "attributes too long");
    snprintf(buf, sizeof buf, "%s", text);
    char *save = NULL;
    const char *seen[64];
    int nseen = 0;
    for (char *kv = strtok_r(buf, ",", &save); kv; kv = strtok_r(NULL, ",", &save)) {
        while (*kv == ' ')
            kv++;
        char *eq = strchr(kv, '=');
        if (!eq)
            return ft_err_set(err, FT_EINVAL, "%s: attribute '%s' has no value (NAME=VALUE)",
                              c->op->name, kv);
        *eq = '\0';
        for (int k = 0; k < nseen; k++)
            if (!strcmp(seen[k], kv))
                return ft_err_set(err, FT_EINVAL, "%s: attribute '%s' is given twice", c->op->name,
                                  kv);
        if (nseen < 64) seen[nseen++] = kv;
        ft_status s = ft_attrs_set(&c->attrs, c->op, kv, eq + 1, err);
        if (s) return s;
    }
    return FT_OK;
}

static int is_input_role(ft_role r) { return r == FT_ROLE_IN || r == FT_ROLE_GRAD_IN; }

static int dtype_fits(ft_dtype want, flaretune_dtype got) {
    return want == FT_F32   ? got == FLARETUNE_F32 || got == FLARETUNE_BF16
           : want == FT_I32 ? got == FLARETUNE_I32
                            : got == FLARETUNE_U8;
}

/* The storage type of the call on a device backend: bf16 when every float tensor it uses is
 * bound as bf16 and the attributes do not say otherwise. */
static void pick_storage(flaretune_context *ctx, ft_call *c, const char *attrs) {
    if (!(ctx->be->dtypes & 2u) || (attrs && strstr(attrs, "dtype="))) return;
    int all_bf16 = 1, any = 0;
    for (int i = 0; i < c->op->ntensors; i++) {
        if (c->op->tensors[i].dtype != FT_F32 || !ft_call_uses(c, i)) continue;
        const binding *b = find_binding(ctx, c->op->tensors[i].name);
        if (!b) continue;
        any = 1;
        if (b->dtype != FLARETUNE_BF16) all_bf16 = 0;
    }
    if (any && all_bf16) c->attrs.dtype = 1;
}

/* The host tensor c->t[i] for binding b (an input, or an output when out is set). */
static flaretune_status stage(flaretune_context *ctx, ft_call *c, int i, const binding *b,
                              int out) {
    const ft_tensor_spec *ts = &c->op->tensors[i];
    ft_err err = {0};
    int is_float = ts->dtype == FT_F32;
    ft_dtype dt = is_float ? FT_F32 : ts->dtype;
    int wrap = b->memory == FLARETUNE_HOST && b->dtype != FLARETUNE_BF16;
    if (wrap || (b->memory == FLARETUNE_DEVICE && is_float)) {
        /* in place; a device float tensor's host tensor only carries its shape */
        ft_tensor *t = malloc(sizeof *t);
        if (!t) return fail(ctx, FLARETUNE_ENOMEM, "out of memory");
        *t = ft_tensor_wrap(dt, b->rank, b->shape, wrap ? b->data : NULL);
        c->t[i] = t;
        return FLARETUNE_OK;
    }
    if (ft_tensor_new(dt, b->rank, b->shape, &c->t[i], &err)) return fail_err(ctx, &err);
    if (out) return FLARETUNE_OK;
    ft_tensor *t = c->t[i];
    if (b->memory == FLARETUNE_DEVICE) { /* an index tensor: read on the host */
        if (ctx->be->mem_copy(t->data, b->data, ft_tensor_nbytes(t), FT_MEM_D2H, &err))
            return fail(ctx, api_status(err.status), "%s: reading '%s' from the device: %s",
                        c->op->name, ts->name, err.msg);
        return FLARETUNE_OK;
    }
    const uint16_t *h = b->data; /* host bf16 */
    float *f = t->data;
    for (int64_t k = 0, n = ft_tensor_numel(t); k < n; k++)
        f[k] = ft_f32_from_bf16(h[k]);
    return FLARETUNE_OK;
}

/* Bind the inputs the call reads and derive its sizes. */
static flaretune_status bind_inputs(flaretune_context *ctx, ft_call *c) {
    for (int i = 0; i < c->op->ntensors; i++) {
        const ft_tensor_spec *ts = &c->op->tensors[i];
        if (!is_input_role(ts->role) || !ft_call_uses(c, i)) continue;
        const binding *b = find_binding(ctx, ts->name);
        if (!b)
            return fail(ctx, FLARETUNE_EUNBOUND, "%s: input '%s' is not bound (flaretune_bind)%s",
                        c->op->name, ts->name,
                        ts->role == FT_ROLE_GRAD_IN ? " (read because backward=1)" : "");
        if (!dtype_fits(ts->dtype, b->dtype))
            return fail(ctx, FLARETUNE_ESHAPE, "%s: '%s' is %s, bound as %s", c->op->name,
                        ts->name, ft_dtype_name(ts->dtype), dtype_name(b->dtype));
        flaretune_status st = stage(ctx, c, i, b, 0);
        if (st) return st;
    }
    ft_err err = {0};
    if (ft_call_bind(c, &err)) return fail_err(ctx, &err);
    return FLARETUNE_OK;
}

/* Check and stage the outputs the call writes at its sizes. */
static flaretune_status bind_outputs(flaretune_context *ctx, ft_call *c) {
    for (int i = 0; i < c->op->ntensors; i++) {
        const ft_tensor_spec *ts = &c->op->tensors[i];
        if (is_input_role(ts->role) || !ft_call_uses(c, i)) continue;
        const binding *b = find_binding(ctx, ts->name);
        if (!b)
            return fail(ctx, FLARETUNE_EUNBOUND,
                        "%s: output '%s' is not bound (flaretune_bind)%s", c->op->name, ts->name,
                        ts->role == FT_ROLE_GRAD_OUT ? " (written because backward=1)" : "");
        int64_t want[FT_MAX_RANK];
        int rank = ft_call_shape(c, i, want);
        int same = rank == b->rank;
        for (int d = 0; same && d < rank; d++)
            same = want[d] == b->shape[d];
        if (!same) {
            char w[96], g[96];
            return fail(ctx, FLARETUNE_ESHAPE, "%s: output '%s' is %s at these sizes, bound as %s",
                        c->op->name, ts->name, ft_shape_str(rank, want, w, sizeof w),
                        ft_shape_str(b->rank, b->shape, g, sizeof g));
        }
        if (!dtype_fits(ts->dtype, b->dtype))
            return fail(ctx, FLARETUNE_ESHAPE, "%s: '%s' is %s, bound as %s", c->op->name,
                        ts->name, ft_dtype_name(ts->dtype), dtype_name(b->dtype));
        flaretune_status st = stage(ctx, c, i, b, 1);
        if (st) return st;
    }
    return FLARETUNE_OK;
}

/* Hand the device float tensors to the backend; they must be in the call's storage type. */
static flaretune_status bind_device(flaretune_context *ctx, ft_call *c) {
    for (int i = 0; i < c->op->ntensors; i++) {
        const ft_tensor_spec *ts = &c->op->tensors[i];
        if (ts->dtype != FT_F32 || !ft_call_uses(c, i)) continue;
        const binding *b = find_binding(ctx, ts->name);
        if (!b || b->memory != FLARETUNE_DEVICE) continue;
        flaretune_dtype want = c->attrs.dtype ? FLARETUNE_BF16 : FLARETUNE_F32;
        if (b->dtype != want)
            return fail(ctx, FLARETUNE_ESHAPE,
                        "%s: device tensor '%s' is %s, but this call stores %s (device tensors "
                        "are used in place: bind every float tensor as one dtype, or set "
                        "dtype=)",
                        c->op->name, ts->name, dtype_name(b->dtype), dtype_name(want));
        ft_err err = {0};
        if (ctx->be->bind_device(c, i, b->data, &err)) return fail_err(ctx, &err);
    }
    return FLARETUNE_OK;
}

/* The config: the caller's, else the profile's for the nearest shape, else the default; source
 * (32 bytes) says which, kept by the caller only when the run succeeds. */
static flaretune_status pick_config(flaretune_context *ctx, const ft_call *c, const char *text,
                                    ft_config *cfg, char *source) {
    const ft_space *sp = ctx->be->space(c->op);
    ft_err err = {0};
    char why[256];
    if (text) {
        if (ft_config_parse(sp, text, cfg, &err))
            return fail(ctx, FLARETUNE_EINVAL, "%s on %s: %s", c->op->name, ctx->be->name,
                        err.msg);
        if (!ft_space_runnable(sp, c, cfg, why, sizeof why))
            return fail(ctx, FLARETUNE_EINVAL, "%s on %s: config %s cannot run at these sizes: %s",
                        c->op->name, ctx->be->name, text, why);
        snprintf(source, 32, "config");
        return FLARETUNE_OK;
    }
    ft_config_default(sp, cfg);
    snprintf(source, 32, "default");
    if (!ctx->profile) return FLARETUNE_OK;
    int exact = 0;
    const char *device = (ctx->profile_flags & FLARETUNE_ANY_DEVICE) ? NULL : ctx->device;
    const ft_profile_entry *e =
        ft_profile_lookup_call(ctx->profile, c, ctx->be->name, device, &exact);
    ft_config pc;
    if (!e || ft_profile_config(sp, e->config, &pc, NULL, 0, NULL) != FT_OK ||
        !ft_space_runnable(sp, c, &pc, why, sizeof why))
        return FLARETUNE_OK;
    *cfg = pc;
    snprintf(source, 32, "%s", exact ? "profile" : "profile (nearest)");
    return FLARETUNE_OK;
}

/* Round the float32 results of bf16 host outputs into the caller's memory. */
static void unstage_outputs(flaretune_context *ctx, const ft_call *c) {
    for (int i = 0; i < c->op->ntensors; i++) {
        const ft_tensor_spec *ts = &c->op->tensors[i];
        if (is_input_role(ts->role) || !ft_call_uses(c, i)) continue;
        const binding *b = find_binding(ctx, ts->name);
        if (b->memory != FLARETUNE_HOST || b->dtype != FLARETUNE_BF16) continue;
        const float *f = c->t[i]->data;
        uint16_t *h = b->data;
        for (int64_t k = 0, n = ft_tensor_numel(c->t[i]); k < n; k++)
            h[k] = ft_bf16_from_f32(f[k]);
    }
}

static flaretune_status run(flaretune_context *ctx, const char *opname, const char *attrs,
                            const char *config) {
    ft_err err = {0};
    if (!opname) return fail(ctx, FLARETUNE_EINVAL, "flaretune_run: which op? (op is NULL)");
    const ft_op *op = ft_op_find(opname, &err);
    if (!op) return fail_err(ctx, &err);
    if (!ctx->be->supports(op))
        return fail(ctx, FLARETUNE_EUNSUPPORTED, "backend %s does not implement %s",
                    ctx->be->name, op->name);
    ft_call c;
    ft_call_init(&c, op);
    flaretune_status st = FLARETUNE_OK;
    if (parse_attrs(&c, attrs, &err)) return fail_err(ctx, &err);
    ft_call_resolve_backward(&c);
    pick_storage(ctx, &c, attrs);
    if (ft_backend_check_attrs(ctx->be, &c.attrs, &err)) return fail_err(ctx, &err);
    ft_config cfg;
    char source[32];
    if (!(st = bind_inputs(ctx, &c)) && !(st = bind_outputs(ctx, &c)) &&
        !(st = pick_config(ctx, &c, config, &cfg, source)) && !(st = bind_device(ctx, &c))) {
        c.ws = &ctx->ws;
        int shared_device = ctx->be->bind_device != NULL;
        if (shared_device) pthread_mutex_lock(&device_runs);
        ft_status rs = ctx->be->run(&c, &cfg, &err);
        if (shared_device) pthread_mutex_unlock(&device_runs);
        if (rs) {
            st = fail_err(ctx, &err);
        } else {
            unstage_outputs(ctx, &c);
            ft_config_format(ctx->be->space(op), &cfg, ctx->last_config,
                             sizeof ctx->last_config);
            snprintf(ctx->last_source, sizeof ctx->last_source, "%s", source);
        }
    }
    ft_call_free(&c);
    return st;
}

flaretune_status flaretune_run(flaretune_context *ctx, const char *op, const char *attrs,
                               const char *config) {
    if (!enter(ctx)) return FLARETUNE_EINVAL;
    flaretune_status st = check_usable(ctx, "flaretune_run");
    if (!st) st = run(ctx, op, attrs, config);
    return leave(ctx, st);
}

/* ---- device memory ------------------------------------------------------------------------- */

static flaretune_status check_device(flaretune_context *ctx, const char *fn) {
    flaretune_status st = check_usable(ctx, fn);
    if (!st && !ctx->be->mem_alloc)
        st = fail(ctx, FLARETUNE_EUNSUPPORTED, "%s: the %s backend has no device memory", fn,
                  ctx->be->name);
    return st;
}

flaretune_status flaretune_device_alloc(flaretune_context *ctx, size_t bytes, void **ptr) {
    if (!enter(ctx)) return FLARETUNE_EINVAL;
    flaretune_status st = check_device(ctx, "flaretune_device_alloc");
    ft_err err = {0};
    if (!st && !ptr) st = fail(ctx, FLARETUNE_EINVAL, "flaretune_device_alloc: ptr is NULL");
    if (!st && ctx->nbufs == ctx->capbufs) {
        int cap = ctx->capbufs ? 2 * ctx->capbufs : 16;
        struct dev_buf *b = realloc(ctx->bufs, (size_t)cap * sizeof *b);
        if (!b)
            st = fail(ctx, FLARETUNE_ENOMEM, "flaretune_device_alloc: out of host memory");
        else
            ctx->bufs = b, ctx->capbufs = cap;
    }
    if (!st && ctx->be->mem_alloc(bytes ? bytes : 1, ptr, &err)) st = fail_err(ctx, &err);
    if (!st) ctx->bufs[ctx->nbufs++] = (struct dev_buf){(uintptr_t)*ptr, bytes ? bytes : 1};
    return leave(ctx, st);
}

flaretune_status flaretune_device_free(flaretune_context *ctx, void *ptr) {
    if (!enter(ctx)) return FLARETUNE_EINVAL;
    flaretune_status st = check_device(ctx, "flaretune_device_free");
    int i = 0;
    while (!st && ptr && i < ctx->nbufs && ctx->bufs[i].p != (uintptr_t)ptr)
        i++;
    if (!st && ptr && i == ctx->nbufs)
        st = fail(ctx, FLARETUNE_EINVAL,
                  "flaretune_device_free: %p is no buffer flaretune_device_alloc gave this "
                  "context (freed already, or another pointer)",
                  ptr);
    if (!st && ptr) {
        ctx->be->mem_free(ptr);
        ctx->bufs[i] = ctx->bufs[--ctx->nbufs];
    }
    return leave(ctx, st);
}

flaretune_status flaretune_device_copy(flaretune_context *ctx, void *dst, const void *src,
                                       size_t bytes, flaretune_copy_kind kind) {
    if (!enter(ctx)) return FLARETUNE_EINVAL;
    flaretune_status st = check_device(ctx, "flaretune_device_copy");
    ft_err err = {0};
    if (!st && (!dst || !src))
        st = fail(ctx, FLARETUNE_EINVAL, "flaretune_device_copy: NULL %s",
                  !dst ? "destination" : "source");
    if (!st && (unsigned)kind > FLARETUNE_DEVICE_TO_DEVICE)
        st = fail(ctx, FLARETUNE_EINVAL, "flaretune_device_copy: unknown kind %d", (int)kind);
    if (!st && kind != FLARETUNE_HOST_TO_DEVICE)
        st = check_extent(ctx, "device_copy", "the source", src, bytes);
    if (!st && kind != FLARETUNE_DEVICE_TO_HOST)
        st = check_extent(ctx, "device_copy", "the destination", dst, bytes);
    if (!st && ctx->be->mem_copy(dst, src, bytes, (int)kind, &err)) st = fail_err(ctx, &err);
    return leave(ctx, st);
}
