/* op.c: the generic call machinery (see kernels/op/op.h): binding
 * sizes from tensor shapes with messages that name the tensor, allocation, presets, and the
 * float64 reference run every backend is checked against. */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "op/op.h"

int ft_op_sym(const ft_op *op, const char *sym) {
    for (int i = 0; op->syms[i]; i++)
        if (strcmp(op->syms[i], sym) == 0) return i;
    return -1;
}

int ft_op_tensor(const ft_op *op, const char *name) {
    for (int i = 0; i < op->ntensors; i++)
        if (strcmp(op->tensors[i].name, name) == 0) return i;
    return -1;
}

/* Symbol indices of a tensor's shape string ("N,T,H" -> {0,1,2}). Returns the rank. */
static int spec_syms(const ft_op *op, const ft_tensor_spec *ts, int *idx) {
    int rank = 0;
    const char *p = ts->dims;
    while (*p) {
        char sym[16];
        size_t n = strcspn(p, ",");
        if (n >= sizeof sym) n = sizeof sym - 1;
        memcpy(sym, p, n);
        sym[n] = '\0';
        idx[rank++] = ft_op_sym(op, sym);
        p += strcspn(p, ",");
        if (*p == ',') p++;
    }
    return rank;
}

/* A call twice as slow as check_after_s allows with over half its time lost is spoiled. */
#define FT_CALL_SPOILED_SHARE 0.5

static double cpu_clock_s(clockid_t id) {
    struct timespec ts;
    if (clock_gettime(id, &ts) != 0) return -1;
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

void ft_call_watch(ft_call *c, double limit_s, double check_after_s) {
    double now = ft_now_s(), zero = 0;
    c->overdue = c->spoiled = 0;
    c->deadline_s = limit_s > 0 ? now + limit_s : 0;
    c->start_s = now;
    c->others_lost = NULL;
    c->others_ctx = NULL;
    if (check_after_s > 0 && pthread_getcpuclockid(pthread_self(), &c->cpu_clock) == 0 &&
        (c->start_cpu_s = cpu_clock_s(c->cpu_clock)) >= 0) {
        double at = now + check_after_s;
        __atomic_store(&c->check_s, &at, __ATOMIC_RELAXED);
    } else {
        __atomic_store(&c->check_s, &zero, __ATOMIC_RELAXED);
    }
}

void ft_call_watch_threads(ft_call *c, double (*lost)(const void *ctx), const void *ctx) {
    c->others_lost = lost;
    c->others_ctx = ctx;
}

int ft_call_judge(ft_call *c, double now) {
    if (__atomic_exchange_n(&c->checking, 1, __ATOMIC_ACQUIRE)) return 0; /* another judges */
    double at;
    __atomic_load(&c->check_s, &at, __ATOMIC_RELAXED);
    int spoiled = 0;
    if (at > 0 && now >= at) {
        double el = now - c->start_s, cpu = cpu_clock_s(c->cpu_clock);
        spoiled = cpu >= 0 && el - (cpu - c->start_cpu_s) > FT_CALL_SPOILED_SHARE * el;
        if (!spoiled && c->others_lost)
            spoiled = c->others_lost(c->others_ctx) > FT_CALL_SPOILED_SHARE * el;
        /* Judged again at twice the time: a check costs a clock read of another thread. */
        double next = spoiled ? 0 : now + el;
        __atomic_store(&c->check_s, &next, __ATOMIC_RELAXED);
        if (spoiled) {
            __atomic_store_n(&c->spoiled, 1, __ATOMIC_RELAXED);
            __atomic_store_n(&c->overdue, 1, __ATOMIC_RELAXED);
        }
    }
    __atomic_store_n(&c->checking, 0, __ATOMIC_RELEASE);
    return spoiled;
}

void ft_call_init(ft_call *c, const ft_op *op) {
    memset(c, 0, sizeof *c);
    c->op = op;
    ft_attrs_default(&c->attrs);
    for (int i = 0; i < FT_MAX_SYMS; i++)
        c->dim[i] = -1;
}

void ft_call_resolve_backward(ft_call *c) {
    c->backward = c->op->backward == FT_BWD_ALWAYS     ? 1
                  : c->op->backward == FT_BWD_OPTIONAL ? c->attrs.backward
                                                       : 0;
}

int ft_call_uses(const ft_call *c, int i) {
    const ft_tensor_spec *ts = &c->op->tensors[i];
    if ((ts->flags & FT_TS_WANT_DW) && !c->attrs.loss.want_dw) return 0;
    if ((ts->flags & FT_TS_FINAL_NORM) && !c->attrs.loss.final_norm) return 0;
    if ((ts->flags & FT_TS_WANT_DX) && !c->attrs.want_dx) return 0;
    if ((ts->flags & FT_TS_FORWARD) && c->attrs.grad_only) return 0;
    if (ts->role == FT_ROLE_GRAD_IN || ts->role == FT_ROLE_GRAD_OUT) return c->backward;
    return 1;
}

int ft_call_shape(const ft_call *c, int i, int64_t *shape) {
    int idx[FT_MAX_RANK];
    int rank = spec_syms(c->op, &c->op->tensors[i], idx);
    for (int k = 0; k < rank; k++)
        shape[k] = c->dim[idx[k]];
    return rank;
}

/* A tensor shape whose element count (or bytes) would not fit in 64 bits: one line naming it,
 * before any kernel computes an index that wraps. */
static ft_status too_large(const ft_op *op, const char *name, const char *what, int rank,
                           const int64_t *shape, ft_err *err) {
    int64_t n;
    if (!ft_shape_numel(rank, shape, &n)) return FT_OK;
    char got[128];
    ft_shape_str(rank, shape, got, sizeof got);
    return ft_err_set(err, FT_ESHAPE,
                      "%s: %s '%s' of shape %s is too large: its byte count does not fit in 64 "
                      "bits (at most %lld elements)",
                      op->name, what, name, got, (long long)FT_MAX_NUMEL);
}

ft_status ft_call_bind(ft_call *c, ft_err *err) {
    const ft_op *op = c->op;
    int who[FT_MAX_SYMS];
    for (int s = 0; s < FT_MAX_SYMS; s++) {
        c->dim[s] = -1;
        who[s] = -1;
    }
    ft_call_resolve_backward(c);
    for (int i = 0; i < op->ntensors; i++) {
        const ft_tensor_spec *ts = &op->tensors[i];
        if (!ft_call_uses(c, i) || (ts->role != FT_ROLE_IN && ts->role != FT_ROLE_GRAD_IN))
            continue;
        const ft_tensor *t = c->t[i];
        if (!t) return ft_err_set(err, FT_EINVAL, "%s: missing input '%s'", op->name, ts->name);
        int ok_dtype = ts->dtype == FT_F32 ? ft_dtype_is_float(t->dtype) : t->dtype == ts->dtype;
        if (!ok_dtype)
            return ft_err_set(err, FT_EINVAL, "%s: input '%s' must be %s, got %s", op->name,
                              ts->name, ft_dtype_name(ts->dtype), ft_dtype_name(t->dtype));
        int idx[FT_MAX_RANK];
        int rank = spec_syms(op, ts, idx);
        char want[64], got[128];
        snprintf(want, sizeof want, "[%s]", ts->dims);
        ft_shape_str(t->rank, t->shape, got, sizeof got);
        if (t->rank != rank)
            return ft_err_set(err, FT_ESHAPE, "%s: input '%s' has shape %s, expected %d dims %s",
                              op->name, ts->name, got, rank, want);
        ft_status big = too_large(op, ts->name, "input", t->rank, t->shape, err);
        if (big) return big;
        for (int k = 0; k < rank; k++) {
            int s = idx[k];
            if (c->dim[s] < 0) {
                c->dim[s] = t->shape[k];
                who[s] = i;
            } else if (c->dim[s] != t->shape[k]) {
                return ft_err_set(err, FT_ESHAPE,
                                  "%s: input '%s' has shape %s, expected %s with %s = %lld "
                                  "(from '%s')",
                                  op->name, ts->name, got, want, op->syms[s], (long long)c->dim[s],
                                  op->tensors[who[s]].name);
            }
        }
    }
    ft_status st = op->check(c, err);
    if (st) return st;
    for (int s = 0; op->syms[s]; s++)
        if (c->dim[s] < 0)
            return ft_err_set(err, FT_EINTERNAL, "%s: size %s was not derived", op->name,
                              op->syms[s]);
    /* Every tensor's size product (the outputs' and gradients' too, whether this call uses
     * them or not: the kernels' own products are products of its sizes) fits. */
    for (int i = 0; i < op->ntensors; i++) {
        int64_t shape[FT_MAX_RANK];
        int rank = ft_call_shape(c, i, shape);
        int out = op->tensors[i].role == FT_ROLE_OUT || op->tensors[i].role == FT_ROLE_GRAD_OUT;
        if ((st = too_large(op, op->tensors[i].name, out ? "output" : "input", rank, shape, err)))
            return st;
    }
    return FT_OK;
}

ft_status ft_call_alloc(ft_call *c, int inputs, int outputs, ft_err *err) {
    for (int i = 0; i < c->op->ntensors; i++) {
        const ft_tensor_spec *ts = &c->op->tensors[i];
        int is_in = ts->role == FT_ROLE_IN || ts->role == FT_ROLE_GRAD_IN;
        if (c->t[i] || !ft_call_uses(c, i) || (is_in ? !inputs : !outputs)) continue;
        int64_t shape[FT_MAX_RANK];
        int rank = ft_call_shape(c, i, shape);
        ft_status s = ft_tensor_new(ts->dtype, rank, shape, &c->t[i], err);
        if (s) return ft_err_wrap(err, "%s: tensor '%s'", c->op->name, ts->name);
    }
    return FT_OK;
}

void ft_call_touch(ft_call *c) {
    if (c->dev_state && c->dev_state_free) c->dev_state_free(c->dev_state);
    c->dev_state = NULL;
    c->dev_state_free = NULL;
}

void ft_call_free(ft_call *c) {
    ft_call_touch(c);
    for (int i = 0; i < FT_MAX_TENSORS; i++) {
        ft_tensor_free(c->t[i]);
        c->t[i] = NULL;
    }
}

ft_status ft_call_from_preset(ft_call *c, const ft_preset *p, uint64_t seed, ft_err *err) {
    for (int s = 0; s < FT_MAX_SYMS; s++)
        c->dim[s] = -1;
    ft_status st = c->op->from_preset(c, p, err);
    if (st) return st;
    ft_call_resolve_backward(c);
    if ((st = ft_call_alloc(c, 1, 1, err))) return st;
    ft_rng rng;
    ft_rng_seed(&rng, seed);
    c->op->fill_inputs(c, p, &rng);
    /* The generated inputs must satisfy every check a user's inputs would. */
    int64_t dims[FT_MAX_SYMS];
    memcpy(dims, c->dim, sizeof dims);
    if ((st = c->op->check(c, err))) return ft_err_wrap(err, "preset %s", p->name);
    if (memcmp(dims, c->dim, sizeof dims) != 0)
        return ft_err_set(err, FT_EINTERNAL, "%s: preset sizes disagree with the op's derivation",
                          c->op->name);
    return FT_OK;
}

double ft_call_io_bytes(const ft_call *c) {
    double bytes = 0;
    for (int i = 0; i < c->op->ntensors; i++) {
        if (!ft_call_uses(c, i)) continue;
        int64_t shape[FT_MAX_RANK];
        int rank = ft_call_shape(c, i, shape);
        double n = 1;
        for (int k = 0; k < rank; k++)
            n *= (double)shape[k];
        ft_dtype dt = c->op->tensors[i].dtype;
        /* dtype=bf16: a device backend stores every float tensor in two bytes. */
        bytes += n * (c->attrs.dtype && ft_dtype_is_float(dt) ? 2.0 : (double)ft_dtype_size(dt));
    }
    return bytes;
}

ft_status ft_call_from_dims(ft_call *c, const char *const *names, const int64_t *values, int n,
                            uint64_t seed, ft_err *err) {
    for (int s = 0; s < FT_MAX_SYMS; s++) c->dim[s] = -1;
    for (int i = 0; i < n; i++) {
        int s = ft_op_sym(c->op, names[i]);
        if (s < 0)
            return ft_err_set(err, FT_EINVAL, "%s has no size '%s'", c->op->name, names[i]);
        if (values[i] < 0)
            return ft_err_set(err, FT_EINVAL, "%s: size %s = %lld is negative", c->op->name,
                              names[i], (long long)values[i]);
        c->dim[s] = values[i];
    }
    for (int s = 0; c->op->syms[s]; s++)
        if (c->dim[s] < 0)
            return ft_err_set(err, FT_EINVAL, "%s: size %s is missing", c->op->name, c->op->syms[s]);
    ft_call_resolve_backward(c);
    ft_status st = ft_call_alloc(c, 1, 1, err);
    if (st) return st;
    ft_rng rng;
    ft_rng_seed(&rng, seed);
    c->op->fill_inputs(c, NULL, &rng);
    int64_t dims[FT_MAX_SYMS];
    memcpy(dims, c->dim, sizeof dims);
    if ((st = c->op->check(c, err))) return st;
    if (memcmp(dims, c->dim, sizeof dims) != 0)
        return ft_err_set(err, FT_ESHAPE, "%s: the sizes are inconsistent with each other",
                          c->op->name);
    return FT_OK;
}

void ft_call_dims_str(const ft_call *c, char *buf, size_t n) {
    size_t k = 0;
    buf[0] = '\0';
    for (int s = 0; c->op->syms[s] && k < n; s++)
        k += (size_t)snprintf(buf + k, n - k, "%s%s=%lld", s ? " " : "", c->op->syms[s],
                              (long long)c->dim[s]);
}

ft_status ft_call_reference_f64(const ft_call *c, ft_call *ref, ft_err *err) {
    *ref = *c;
    memset(ref->t, 0, sizeof ref->t);
    for (int i = 0; i < c->op->ntensors; i++) {
        const ft_tensor_spec *ts = &c->op->tensors[i];
        if (!ft_call_uses(c, i)) continue;
        ft_dtype dt = ts->dtype == FT_F32 ? FT_F64 : ts->dtype;
        ft_status s;
        if (ts->role == FT_ROLE_IN || ts->role == FT_ROLE_GRAD_IN) {
            s = ft_tensor_convert(c->t[i], dt, &ref->t[i], err);
        } else {
            int64_t shape[FT_MAX_RANK];
            int rank = ft_call_shape(c, i, shape);
            s = ft_tensor_new(dt, rank, shape, &ref->t[i], err);
        }
        if (s) {
            ft_call_free(ref);
            return s;
        }
    }
    /* bf16 storage (SPEC.md "Tolerances"): the reference sees the inputs as the kernel does,
     * rounded to bf16, so the tolerance measures the kernel's arithmetic, not the rounding of
     * its inputs; and its outputs are rounded as the kernel's are stored. */
    if (c->attrs.dtype == 1)
        for (int i = 0; i < c->op->ntensors; i++) {
            ft_role r = c->op->tensors[i].role;
            if (ft_call_uses(c, i) && (r == FT_ROLE_IN || r == FT_ROLE_GRAD_IN))
                ft_tensor_round_bf16(ref->t[i]);
        }
    c->op->reference(ref);
    if (c->attrs.dtype == 1)
        for (int i = 0; i < c->op->ntensors; i++) {
            ft_role r = c->op->tensors[i].role;
            if (ft_call_uses(c, i) && (r == FT_ROLE_OUT || r == FT_ROLE_GRAD_OUT))
                ft_tensor_round_bf16(ref->t[i]);
        }
    return FT_OK;
}

ft_status ft_call_reference(ft_call *c, ft_err *err) {
    ft_call ref;
    ft_status s = ft_call_reference_f64(c, &ref, err);
    if (s) return s;
    s = ft_call_alloc(c, 0, 1, err);
    for (int i = 0; !s && i < c->op->ntensors; i++) {
        const ft_tensor_spec *ts = &c->op->tensors[i];
        if (ft_call_uses(c, i) && (ts->role == FT_ROLE_OUT || ts->role == FT_ROLE_GRAD_OUT))
            ft_tensor_copy_values(c->t[i], ref.t[i]);
    }
    ft_call_free(&ref);
    return s;
}

void ft_fill_normal(ft_tensor *t, ft_rng *rng, double mean, double std) {
    /* The fill is most of the time a large call takes to make: ft_rng_fill_normal draws by the
     * ziggurat, in pieces that threads share. */
    ft_rng_fill_normal(rng, t->data, ft_tensor_numel(t), mean, std);
}

double ft_attn_scale(const ft_attrs *a, int64_t dh) {
    return isnan(a->scale) ? 1.0 / sqrt((double)dh) : a->scale;
}
