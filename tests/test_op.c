/* test_op.c: the op registry: presets size every op consistently, binding recovers the sizes
 * from the tensors, and every inconsistent input gets one clear message naming the tensor. */
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ft_test.h"
#include "kernels/registry.h"
#include "op/op.h"
#include "op/op_json.h"

static const ft_op *op_named(const char *name) {
    ft_err err = {0};
    const ft_op *op = ft_op_find(name, &err);
    FT_CHECK(op != NULL, "%s", err.msg);
    return op;
}

/* A tiny-preset call with its inputs filled, backward on where the op has one. */
static void make_call(ft_call *c, const char *op, const char *preset, int backward) {
    ft_call_init(c, op_named(op));
    c->attrs.backward = backward;
    ft_err err = {0};
    FT_CHECK(ft_call_from_preset(c, ft_preset_find(preset), 7, &err) == FT_OK, "%s at %s: %s", op,
             preset, err.msg);
}

/* Rebind the inputs of c in a fresh call; returns the status and fills err. */
static ft_status rebind(const ft_call *c, ft_call *fresh, ft_err *err) {
    ft_call_init(fresh, c->op);
    fresh->attrs = c->attrs;
    for (int i = 0; i < c->op->ntensors; i++) {
        ft_role r = c->op->tensors[i].role;
        if (r == FT_ROLE_IN || r == FT_ROLE_GRAD_IN) fresh->t[i] = c->t[i];
    }
    return ft_call_bind(fresh, err);
}

static void expect_bind_error(const ft_call *c, const char *needle, const char *what) {
    ft_call fresh;
    ft_err err = {0};
    FT_CHECK(rebind(c, &fresh, &err) != FT_OK, "%s: binding should fail", what);
    FT_CHECK(strstr(err.msg, needle) != NULL, "%s: message '%s' lacks '%s'", what, err.msg, needle);
}

/* expect_bind_error with tensor `slot` of c seen as shape (rank dims) on the same data; the
 * tensor is put back after. */
static void expect_shape_error(ft_call *c, int slot, int rank, const int64_t *shape,
                               const char *needle, const char *what) {
    ft_tensor *t = c->t[slot];
    ft_tensor other = ft_tensor_wrap(FT_F32, rank, shape, t->data);
    c->t[slot] = &other;
    expect_bind_error(c, needle, what);
    c->t[slot] = t;
}

static void test_registry(void) {
    FT_CHECK(ft_op_count() == 7, "seven ops");
    ft_err err = {0};
    FT_CHECK(ft_op_find("fusion.nope", &err) == NULL, "unknown op");
    FT_CHECK(strstr(err.msg, "fusion.dflare") && strstr(err.msg, "loss"),
             "message lists the ops: %s", err.msg);
    for (int i = 0; i < ft_op_count(); i++) {
        const ft_op *op = ft_op_at(i);
        FT_CHECK(op->ntensors <= FT_MAX_TENSORS, "%s tensor count", op->name);
        for (int t = 0; t < op->ntensors; t++) {
            /* Every symbol in a shape is declared, and no name repeats. */
            const char *p = op->tensors[t].dims;
            while (*p) {
                char sym[16];
                size_t n = strcspn(p, ",");
                snprintf(sym, sizeof sym, "%.*s", (int)n, p);
                FT_CHECK(ft_op_sym(op, sym) >= 0, "%s.%s uses undeclared size %s", op->name,
                         op->tensors[t].name, sym);
                p += n + (p[n] == ',');
            }
            FT_CHECK(ft_op_tensor(op, op->tensors[t].name) == t, "%s: duplicate tensor %s",
                     op->name, op->tensors[t].name);
        }
        for (int a = 0; op->attrs[a]; a++)
            FT_CHECK(ft_attr_find(op->attrs[a]) != NULL, "%s: undeclared attribute %s", op->name,
                     op->attrs[a]);
    }
}

/* Property: for every op, tiny preset and backward setting, the sizes bound back from the
 * generated tensors equal the preset's. */
static void test_bind_recovers_preset_sizes(void) {
    for (int i = 0; i < ft_op_count(); i++) {
        for (int k = 0; k < ft_preset_count(); k++) {
            const ft_preset *p = ft_preset_at(k);
            if (strcmp(p->model, "tiny") != 0) continue;
            for (int bwd = 0; bwd < 2; bwd++) {
                ft_call c, fresh;
                make_call(&c, ft_op_at(i)->name, p->name, bwd);
                ft_err err = {0};
                FT_CHECK(rebind(&c, &fresh, &err) == FT_OK, "%s: %s", p->name, err.msg);
                for (int s = 0; c.op->syms[s]; s++)
                    FT_CHECK(fresh.dim[s] == c.dim[s] && c.dim[s] >= 0, "%s %s: %s = %lld vs %lld",
                             c.op->name, p->name, c.op->syms[s], (long long)fresh.dim[s],
                             (long long)c.dim[s]);
                ft_call_free(&c);
            }
        }
    }
}

static void test_real_preset_sizes(void) {
    /* Sizes only: no allocation at real scale. */
    ft_preset p = *ft_preset_find("qwen3-8b.dflare.train");
    ft_call c;
    ft_err err = {0};
    ft_call_init(&c, op_named("fusion.dflare"));
    FT_CHECK(c.op->from_preset(&c, &p, &err) == FT_OK, "%s", err.msg);
    FT_CHECK(c.dim[0] == 3072 && c.dim[1] == 9 && c.dim[2] == 4096 && c.dim[3] == 7,
             "dflare train N T H D");
    /* Bytes it must move: x [N,T,H] and w [D,T], g [H] in, f [D,N,H] out; half with bf16. */
    ft_call_resolve_backward(&c);
    double want = 4.0 * (3072.0 * 9 * 4096 + 7 * 9 + 4096 + 7 * 3072.0 * 4096);
    FT_CHECK(ft_call_io_bytes(&c) == want, "dflare bytes %g, want %g", ft_call_io_bytes(&c), want);
    c.attrs.dtype = 1;
    FT_CHECK(ft_call_io_bytes(&c) == want / 2, "bf16 bytes %g, want %g", ft_call_io_bytes(&c),
             want / 2);
    ft_call_init(&c, op_named("attention.kvproj"));
    FT_CHECK(c.op->from_preset(&c, &p, &err) == FT_OK, "%s", err.msg);
    FT_CHECK(c.dim[0] == 7, "dflare projects per layer: Dc = D");
    ft_call_init(&c, op_named("loss"));
    FT_CHECK(c.op->from_preset(&c, &p, &err) == FT_OK, "%s", err.msg);
    FT_CHECK(c.dim[0] == 8192 && c.dim[2] == 151936 && c.attrs.loss.B == 16, "loss M V B");
    p = *ft_preset_find("qwen3-4b.dflash.decode");
    ft_call_init(&c, op_named("attention.kvproj"));
    FT_CHECK(c.op->from_preset(&c, &p, &err) == FT_OK, "%s", err.msg);
    FT_CHECK(c.dim[0] == 1, "dflash shares its context: Dc = 1");
    ft_call_init(&c, op_named("attention.decode"));
    FT_CHECK(c.op->from_preset(&c, &p, &err) == FT_OK, "%s", err.msg);
    FT_CHECK(c.dim[5] == 16 * 4096, "decode Lsum = R * L, got %lld", (long long)c.dim[5]);
    p = *ft_preset_find("gpt-oss-20b.dflare.decode");
    FT_CHECK(p.B == 8 && p.D == 8 && p.T == 5 && p.Hq == 64 && p.dh == 64, "gpt-oss drafter");
    /* Ragged tiny decode: one empty context, mean L. */
    p = *ft_preset_find("tiny.dflare.decode");
    int64_t sum = 0;
    for (int64_t r = 0; r < p.R; r++)
        sum += ft_preset_ctx_len(&p, r);
    FT_CHECK(ft_preset_ctx_len(&p, 0) == 0 && sum == p.R * p.L, "ragged lengths, sum %lld",
             (long long)sum);
}

static void test_preset_set(void) {
    ft_preset p = *ft_preset_find("qwen3-8b.dflare.decode");
    ft_err err = {0};
    FT_CHECK(ft_preset_set(&p, "R=1", &err) == FT_OK, "%s", err.msg);
    FT_CHECK(p.R == 1 && p.N == 16 && p.blocks == 1, "decode rows follow R");
    FT_CHECK(ft_preset_set(&p, "N=2048", &err) == FT_OK && ft_preset_set(&p, "R=4", &err) == FT_OK,
             "%s", err.msg);
    FT_CHECK(p.N == 2048, "an explicit N stays fixed, got %lld", (long long)p.N);
    FT_CHECK(ft_preset_set(&p, "Q=3", &err) == FT_EINVAL && strstr(err.msg, "unknown size 'Q'"),
             "unknown size: %s", err.msg);
    FT_CHECK(ft_preset_set(&p, "L=0", &err) == FT_EINVAL, "zero size refused");
    FT_CHECK(ft_preset_set(&p, "L", &err) == FT_EINVAL, "missing value refused");
    FT_CHECK(ft_preset_set(&p, "ragged=2", &err) == FT_EINVAL, "ragged is 0 or 1");
}

static void test_shape_errors(void) {
    ft_call c;
    make_call(&c, "fusion.dflare", "tiny.dflare.train", 1);
    ft_tensor *g = c.t[2];
    int64_t bad_shape[1] = {g->shape[0] + 1};
    ft_tensor *g2;
    FT_CHECK(ft_tensor_new(FT_F32, 1, bad_shape, &g2, NULL) == FT_OK, "alloc");
    c.t[2] = g2;
    expect_bind_error(&c, "input 'g' has shape [65], expected [H] with H = 64 (from 'x')",
                      "g of length H+1");
    c.t[2] = g;
    ft_tensor_free(g2);
    ft_tensor *df = c.t[4];
    c.t[4] = NULL;
    expect_bind_error(&c, "missing input 'df'", "backward without df");
    c.t[4] = df;
    ft_tensor *x = c.t[0];
    int64_t flat[2] = {x->shape[0], x->shape[1] * x->shape[2]};
    expect_shape_error(&c, 0, 2, flat, "expected 3 dims [N,T,H]", "x of rank 2");
    /* Sizes whose products do not fit in 64 bits are refused before a kernel indexes with
     * them: an input's ([2^30, 2^17, 2^17]: 2^64 elements), and an output's (f = [D, N, H] of
     * inputs that each fit: D = 2^30, N = H = 2^20). Nothing is read from these shapes. */
    int64_t huge[3] = {(int64_t)1 << 30, (int64_t)1 << 17, (int64_t)1 << 17};
    ft_tensor huge_x = ft_tensor_wrap(FT_F32, 3, huge, x->data);
    c.t[0] = &huge_x;
    c.attrs.backward = 0;
    expect_bind_error(&c, "input 'x' of shape [1073741824, 131072, 131072] is too large",
                      "x of 2^64 elements");
    FT_CHECK(ft_tensor_numel(&huge_x) == -1 && ft_tensor_nbytes(&huge_x) == 0,
             "ft_tensor_numel of 2^64 elements: %lld", (long long)ft_tensor_numel(&huge_x));
    int64_t nh[3] = {(int64_t)1 << 20, 1, (int64_t)1 << 20}, dt[2] = {(int64_t)1 << 30, 1},
            hh[1] = {(int64_t)1 << 20};
    ft_tensor big_x = ft_tensor_wrap(FT_F32, 3, nh, x->data),
              big_w = ft_tensor_wrap(FT_F32, 2, dt, x->data),
              big_g = ft_tensor_wrap(FT_F32, 1, hh, x->data), *keep_w = c.t[1], *keep_g = c.t[2];
    c.t[0] = &big_x;
    c.t[1] = &big_w;
    c.t[2] = &big_g;
    expect_bind_error(&c, "output 'f' of shape [1073741824, 1048576, 1048576] is too large",
                      "f of 2^70 elements");
    c.t[0] = x;
    c.t[1] = keep_w;
    c.t[2] = keep_g;
    ft_call_free(&c);

    make_call(&c, "fusion.dflash", "tiny.dflash.train", 0);
    int64_t wshape[2] = {c.t[1]->shape[0], c.t[1]->shape[1] - 1};
    expect_shape_error(&c, 1, 2, wshape, "w_fc must be [H, T*H]", "w_fc columns");
    ft_call_free(&c);

    make_call(&c, "attention.kvproj", "tiny.dflare.decode", 0);
    int64_t two[3] = {2, c.t[0]->shape[1], c.t[0]->shape[2]};
    expect_shape_error(&c, 0, 3, two, "must have 1 (shared) or D = 3", "kvproj Dc");
    ft_call_free(&c);

    /* kvproj's backward reads two upstream gradients (tensors 7 and 8), each of k's shape. */
    make_call(&c, "attention.kvproj", "tiny.dflare.train", 1);
    ft_tensor *dv = c.t[8];
    c.t[8] = NULL;
    expect_bind_error(&c, "missing input 'dv'", "kvproj backward without dv");
    const ft_tensor *dk = c.t[7];
    int64_t dks[4] = {dk->shape[0], dk->shape[1], dk->shape[2], dk->shape[3] + 2};
    c.t[8] = dv;
    expect_shape_error(&c, 7, 4, dks, "input 'dk' has shape", "kvproj dk with dh + 2");
    ft_call_free(&c);
}

static void test_index_errors(void) {
    ft_call c;
    make_call(&c, "attention.decode", "tiny.dflare.decode", 0);
    int32_t *lens = c.t[1]->data;
    lens[1] += 1;
    expect_bind_error(&c, "ctx_lens sums to", "ctx_lens sum");
    lens[1] -= 1;
    int32_t saved = lens[0];
    lens[0] = -1;
    lens[1] += 1 + saved;
    expect_bind_error(&c, "ctx_lens[0] = -1 is negative", "negative length");
    ft_call_free(&c);

    make_call(&c, "attention.train", "tiny.dflare.train", 0);
    int32_t *anchors = c.t[5]->data;
    anchors[3] = (int32_t)c.dim[1] + 1;
    expect_bind_error(&c, "anchors[0][3] = 25 is outside [0, S = 24]", "anchor past S");
    anchors[3] = (int32_t)c.dim[1]; /* S itself is valid: the whole context */
    ft_call fresh;
    ft_err err = {0};
    FT_CHECK(rebind(&c, &fresh, &err) == FT_OK, "anchor = S is valid: %s", err.msg);
    ((uint8_t *)c.t[6]->data)[2] = 2;
    expect_bind_error(&c, "keep[0][2] = 2", "keep not boolean");
    ft_call_free(&c);

    make_call(&c, "loss", "tiny.dflare.train", 0);
    int32_t *labels = c.t[2]->data;
    uint8_t *mask = c.t[3]->data;
    mask[5] = 1;
    labels[5] = 320;
    expect_bind_error(&c, "labels[5] = 320 is outside [0, V) with V = 320", "label = V");
    mask[5] = 0;
    labels[5] = -100; /* unscored rows may hold an ignore index */
    labels[4] = 99999;
    mask[4] = 1; /* row 4 is an anchor (B = 4): never scored, label never read */
    FT_CHECK(rebind(&c, &fresh, &err) == FT_OK, "unscored labels are not read: %s", err.msg);
    c.attrs.loss.B = 3;
    expect_bind_error(&c, "not a whole number of blocks of B = 3", "M % B");
    c.attrs.loss.B = 4;
    ft_tensor *lab = c.t[2];
    ft_tensor *flab;
    FT_CHECK(ft_tensor_convert(lab, FT_F32, &flab, NULL) == FT_OK, "convert");
    c.t[2] = flab;
    expect_bind_error(&c, "input 'labels' must be int32, got float32", "float labels");
    c.t[2] = lab;
    ft_tensor_free(flab);
    ft_call_free(&c);
}

static void test_attrs(void) {
    ft_attrs a;
    ft_attrs_default(&a);
    ft_err err = {0};
    const ft_op *loss = op_named("loss"), *dflare = op_named("fusion.dflare");
    FT_CHECK(a.eps == 1e-6 && a.rope_theta == 1e6 && isnan(a.scale) && a.loss.B == 16 &&
                 a.loss.scheme == FT_SCHEME_DECAY && a.loss.gamma == 7 && a.loss.alpha == 0.5 &&
                 a.loss.num_seqs == 1 && a.loss.want_dw == 0 && a.loss.norm == FT_NORM_DEFAULT,
             "SPEC.md defaults");
    FT_CHECK(ft_attrs_set(&a, loss, "scheme", "dpace_cont", &err) == FT_OK &&
                 a.loss.scheme == FT_SCHEME_DPACE_CONT,
             "scheme");
    FT_CHECK(ft_attrs_set(&a, loss, "norm", "count", &err) == FT_OK && a.loss.norm == FT_NORM_COUNT,
             "norm");
    FT_CHECK(ft_attrs_set(&a, loss, "want_dw", "1", &err) == FT_OK && a.loss.want_dw == 1, "dw");
    FT_CHECK(ft_attrs_set(&a, loss, "alpha", "0.25", &err) == FT_OK && a.loss.alpha == 0.25, "a");
    FT_CHECK(ft_attrs_set(&a, dflare, "eps", "1e-5", &err) == FT_OK && a.eps == 1e-5, "eps");
    FT_CHECK(ft_attrs_set(&a, dflare, "gamma", "3", &err) == FT_EINVAL &&
                 strstr(err.msg, "fusion.dflare has no attribute 'gamma' (attributes: eps, "
                                 "backward, want_dx, dtype)"),
             "attribute of another op: %s", err.msg);
    FT_CHECK(ft_attrs_set(&a, dflare, "dtype", "bf16", &err) == FT_OK && a.dtype == 1, "bf16");
    char txt[16];
    ft_attrs_format(&a, "dtype", txt, sizeof txt);
    FT_CHECK(strcmp(txt, "bf16") == 0, "dtype formats as %s", txt);
    FT_CHECK(ft_attrs_set(&a, dflare, "dtype", "fp8", &err) == FT_EINVAL &&
                 strstr(err.msg, "one of: f32, bf16"),
             "bad dtype: %s", err.msg);
    FT_CHECK(ft_attrs_set(&a, loss, "dtype", "bf16", &err) == FT_OK, "every op takes dtype");
    FT_CHECK(ft_attrs_set(&a, loss, "scheme", "bogus", &err) == FT_EINVAL &&
                 strstr(err.msg, "one of: uniform, decay"),
             "bad enum: %s", err.msg);
    FT_CHECK(ft_attrs_set(&a, loss, "alpha", "1.5", &err) == FT_EINVAL, "alpha out of range");
    FT_CHECK(ft_attrs_set(&a, loss, "gamma", "abc", &err) == FT_EINVAL, "not a number");
    FT_CHECK(ft_attrs_set(&a, loss, "gamma", "inf", &err) == FT_EINVAL, "not finite");
    /* progressive's gamma = gamma0 + (gamma_max - gamma0) * min(1, step / warmup_steps) stays
     * above 0: a step or warm-up below 0 would make it 0 (w = exp(-0/0)) or negative */
    FT_CHECK(ft_attrs_set(&a, loss, "step", "-10", &err) == FT_EINVAL &&
                 strstr(err.msg, "out of range"),
             "negative step: %s", err.msg);
    FT_CHECK(ft_attrs_set(&a, loss, "warmup_steps", "-1", &err) == FT_EINVAL, "negative warm-up");
    FT_CHECK(ft_attrs_set(&a, loss, "step", "0", &err) == FT_OK && a.loss.step == 0, "step 0");
    /* a subnormal is a finite number (strtod says ERANGE of it) */
    FT_CHECK(ft_attrs_set(&a, loss, "gamma", "1e-320", &err) == FT_OK && a.loss.gamma > 0,
             "a subnormal gamma: %s", err.msg);
    FT_CHECK(ft_attrs_set(&a, loss, "gamma", "1e400", &err) == FT_EINVAL, "an overflow");
    FT_CHECK(ft_attrs_set(&a, loss, "want_dw", "2", &err) == FT_EINVAL, "bool");
    /* want_dx: the fusions' only (1 by default: dx formed; 0 is the training step's call) */
    FT_CHECK(a.want_dx == 1, "want_dx defaults to 1");
    FT_CHECK(ft_attrs_set(&a, dflare, "want_dx", "0", &err) == FT_OK && a.want_dx == 0, "dx");
    ft_attrs_format(&a, "want_dx", txt, sizeof txt);
    FT_CHECK(strcmp(txt, "0") == 0, "want_dx formats as %s", txt);
    FT_CHECK(ft_attrs_set(&a, dflare, "want_dx", "2", &err) == FT_EINVAL, "want_dx is a bool");
    FT_CHECK(ft_attrs_set(&a, loss, "want_dx", "0", &err) == FT_EINVAL &&
                 strstr(err.msg, "loss has no attribute 'want_dx'"),
             "want_dx on the loss: %s", err.msg);
    FT_CHECK(ft_attrs_set(&a, loss, "B", "0", &err) == FT_EINVAL, "B >= 1");
    /* window: 0 = full attention, a count of positions; only the attention ops take it */
    const ft_op *train = op_named("attention.train");
    FT_CHECK(a.window == 0, "window defaults to 0 (full attention)");
    FT_CHECK(ft_attrs_set(&a, train, "window", "512", &err) == FT_OK && a.window == 512, "window");
    ft_attrs_format(&a, "window", txt, sizeof txt);
    FT_CHECK(strcmp(txt, "512") == 0, "window formats as %s", txt);
    FT_CHECK(ft_attrs_set(&a, train, "window", "-1", &err) == FT_EINVAL &&
                 strstr(err.msg, "out of range"),
             "negative window: %s", err.msg);
    FT_CHECK(ft_attrs_set(&a, train, "window", "2147483648", &err) == FT_EINVAL,
             "window beyond int32");
    FT_CHECK(ft_attrs_set(&a, loss, "window", "8", &err) == FT_EINVAL, "loss has no window");
    FT_CHECK(ft_attrs_set(&a, train, "window", "0", &err) == FT_OK && a.window == 0, "window 0");
    /* format then parse gives the same value for every attribute */
    for (const ft_attr_desc *d = ft_attr_table; d->name; d++) {
        ft_attrs x, y;
        ft_attrs_default(&x);
        ft_attrs_default(&y);
        char buf[64];
        ft_attrs_format(&x, d->name, buf, sizeof buf);
        if (!strcmp(buf, "auto")) continue;
        FT_CHECK(ft_attrs_set(&y, NULL, d->name, buf, &err) == FT_OK, "%s=%s: %s", d->name, buf,
                 err.msg);
        /* rope.named is not a value: it records that a rope attribute was set by name (so a
         * preset keeps the call's RoPE), and only they set it. */
        FT_CHECK(y.rope.named == !strncmp(d->name, "rope_", 5), "%s: rope.named = %d", d->name,
                 y.rope.named);
        y.rope.named = x.rope.named;
        FT_CHECK(memcmp(&x, &y, sizeof x) == 0, "%s round trip", d->name);
    }
}

/* A full-attention call's attribute JSON (the key of profiles and logs) has no window, as before
 * the attribute existed; a windowed one names it. */
static void test_window_attrs_json(void) {
    ft_call c;
    make_call(&c, "attention.train", "tiny.dflare.train", 1);
    json_t *j = ft_attrs_to_json(&c);
    FT_CHECK(j && !json_object_get(j, "window") && json_object_get(j, "backward"),
             "full attention: no window in the attrs");
    json_decref(j);
    c.attrs.window = 9;
    j = ft_attrs_to_json(&c);
    json_t *w = j ? json_object_get(j, "window") : NULL;
    FT_CHECK(w && !strcmp(json_string_value(w), "9"), "window 9 in the attrs");
    json_decref(j);
    ft_call_free(&c);
}

/* The fusions' want_dx is in the attribute JSON only where it changes the call (0 with the
 * backward), so profiles and logs of the calls that form dx keep their keys; without it the call
 * has no dx tensor, fewer bytes and fewer FLOPs. */
static void test_want_dx(void) {
    static const char *const ops[] = {"fusion.dflare", "fusion.dflash"};
    for (int o = 0; o < 2; o++) {
        ft_call c;
        make_call(&c, ops[o], "tiny.dflare.train", 1);
        json_t *j = ft_attrs_to_json(&c);
        FT_CHECK(j && !json_object_get(j, "want_dx"), "%s: want_dx=1 left out", ops[o]);
        json_decref(j);
        const double flops = c.op->flops(&c), bytes = ft_call_io_bytes(&c);
        int dx = -1;
        for (int i = 0; i < c.op->ntensors; i++)
            if (!strcmp(c.op->tensors[i].name, "dx")) dx = i;
        FT_CHECK(dx >= 0 && ft_call_uses(&c, dx), "%s: dx used by default", ops[o]);
        c.attrs.want_dx = 0;
        j = ft_attrs_to_json(&c);
        json_t *v = j ? json_object_get(j, "want_dx") : NULL;
        FT_CHECK(v && !strcmp(json_string_value(v), "0"), "%s: want_dx=0 in the attrs", ops[o]);
        json_decref(j);
        FT_CHECK(dx >= 0 && !ft_call_uses(&c, dx), "%s: want_dx=0 still uses dx", ops[o]);
        /* dx is x's size: N*T*H floats fewer; one GEMM (dflash) or one mix (dflare) fewer */
        const int64_t *d = c.dim;
        FT_CHECK(bytes - ft_call_io_bytes(&c) == 4.0 * (double)(d[0] * d[1] * d[2]),
                 "%s: %g bytes fewer without dx", ops[o], bytes - ft_call_io_bytes(&c));
        const double ratio = c.op->flops(&c) / flops;
        FT_CHECK(fabs(ratio - (o == 0 ? 3.0 / 4.0 : 2.0 / 3.0)) < 1e-12, "%s: FLOPs x%g", ops[o],
                 ratio);
        c.attrs.backward = 0;
        j = ft_attrs_to_json(&c);
        FT_CHECK(j && !json_object_get(j, "want_dx"), "%s: no backward, no want_dx", ops[o]);
        json_decref(j);
        ft_call_free(&c);
    }
}

/* flops counts only the keys a query sees: 4*dh per (row, head, visible key) forward, 3x with
 * the backward; under a window a query at position i sees context p > i - W, counted here key by
 * key from the call's own anchors, keep and context lengths. */
static void test_window_flops(void) {
    for (int64_t k = 0; k < 8; k++) {
        const int64_t W = k % 4 * 3;
        const int causal = (int)(k / 4); /* query b sees block keys 0..b */
        ft_call c;
        make_call(&c, "attention.train", "tiny.dflare.train", 1);
        c.attrs.window = W;
        c.attrs.causal = causal;
        const int32_t *anch = c.t[5]->data; /* anchors, keep: the op's tensors 5 and 6 */
        const uint8_t *keep = c.t[6]->data;
        const int64_t nseq = c.dim[0], NB = c.dim[2], B = c.dim[3], Hq = c.dim[4], dh = c.dim[6];
        double keys = 0;
        for (int64_t i = 0; i < nseq * NB; i++)
            for (int64_t b = 0; keep[i] && b < B; b++) {
                for (int64_t p = 0; p < anch[i]; p++)
                    keys += W == 0 || p > anch[i] + b - W;
                keys += causal ? (double)(b + 1) : (double)B;
            }
        double want = 3 * 4 * (double)dh * (double)Hq * keys, got = c.op->flops(&c);
        FT_CHECK(fabs(got - want) <= 1e-9 * want, "train W=%lld causal=%d: flops %.17g, want %.17g",
                 (long long)W, causal, got, want);
        ft_call_free(&c);

        make_call(&c, "attention.decode", "tiny.dflare.decode", 0);
        c.attrs.window = W;
        c.attrs.causal = causal;
        const int32_t *lens = c.t[1]->data; /* ctx_lens */
        const int64_t R = c.dim[0], Bd = c.dim[1], Hqd = c.dim[2], dhd = c.dim[4];
        keys = 0;
        for (int64_t r = 0; r < R; r++)
            for (int64_t b = 0; b < Bd; b++) {
                for (int64_t p = 0; p < lens[r]; p++)
                    keys += W == 0 || p > lens[r] + b - W;
                keys += causal ? (double)(b + 1) : (double)Bd;
            }
        want = 4 * (double)dhd * (double)Hqd * keys;
        got = c.op->flops(&c);
        FT_CHECK(fabs(got - want) <= 1e-9 * want,
                 "decode W=%lld causal=%d: flops %.17g, want %.17g", (long long)W, causal, got,
                 want);
        ft_call_free(&c);
    }
}

static void test_fill_normal(void) {
    /* ft_fill_normal draws by the ziggurat, in pieces of its own generator each: over an odd
     * count of a million the values are N(mean, std^2) in mean, variance, fourth moment and
     * tails (beyond 2 sd, and beyond the ziggurat's base layer at 3.654 sd, where its tail code
     * draws them), neighbours uncorrelated, the last one filled too, and one seed gives the same
     * values. Tolerances are 5 standard errors of each estimate. */
    const int64_t n = 1000001;
    ft_tensor *t = NULL, *u = NULL;
    ft_err err = {0};
    FT_CHECK(ft_tensor_new(FT_F32, 1, &n, &t, &err) == FT_OK, "%s", err.msg);
    FT_CHECK(ft_tensor_new(FT_F32, 1, &n, &u, &err) == FT_OK, "%s", err.msg);
    ft_rng r;
    ft_rng_seed(&r, 11);
    ft_fill_normal(t, &r, 1.0, 0.5);
    ft_rng_seed(&r, 11);
    ft_fill_normal(u, &r, 1.0, 0.5);
    FT_CHECK(memcmp(t->data, u->data, (size_t)n * 4) == 0, "one seed, one fill");
    const float *x = t->data;
    double sum = 0, sq = 0, fourth = 0, cross = 0, tail = 0, far = 0;
    for (int64_t i = 0; i < n; i++) {
        double z = (x[i] - 1.0) / 0.5;
        sum += z, sq += z * z, fourth += z * z * z * z, tail += fabs(z) > 2.0;
        far += fabs(z) > 3.6541528853610088;
        if (i + 1 < n) cross += z * (x[i + 1] - 1.0) / 0.5;
    }
    double mean = sum / (double)n, var = sq / (double)n - mean * mean;
    FT_CHECK(fabs(mean) < 5e-3, "mean %g, want 0", mean);
    FT_CHECK(fabs(var - 1.0) < 7.5e-3, "variance %g, want 1", var);
    FT_CHECK(fabs(tail / (double)n - 0.0455) < 1.1e-3, "beyond 2 sd: %g, want 0.0455",
             tail / (double)n);
    /* E z^4 = 3, its variance 96; P(|z| > 3.6542) = 2.58e-4, 258 of a million (sd 16). */
    FT_CHECK(fabs(fourth / (double)n - 3.0) < 5 * sqrt(96.0 / (double)n),
             "fourth moment %g, want 3", fourth / (double)n);
    FT_CHECK(fabs(far - 258.0) < 80.0, "beyond 3.654 sd: %g of a million, want 258", far);
    FT_CHECK(fabs(cross / (double)(n - 1)) < 5e-3, "neighbours correlate: %g",
             cross / (double)(n - 1));
    FT_CHECK(x[n - 1] != 0.0f && isfinite(x[n - 1]), "the last value is filled: %g", x[n - 1]);
    ft_tensor_free(t);
    ft_tensor_free(u);
}

static void test_fill_normal_threads(void) {
    /* The values depend on the seed and the count alone: one thread or two fill the same, the
     * generator given advances by one draw whatever the count, and two pieces do not repeat
     * each other's values. */
    const int64_t n = 3 * FT_RNG_FILL_PIECE + 17;
    float *a = malloc((size_t)n * sizeof *a), *b = malloc((size_t)n * sizeof *b);
    FT_CHECK(a && b, "out of memory");
    const int threads = omp_get_max_threads();
    ft_rng r, s;
    omp_set_num_threads(1);
    ft_rng_seed(&r, 5);
    ft_rng_fill_normal(&r, a, n, 0.0, 1.0);
    omp_set_num_threads(2);
    ft_rng_seed(&r, 5);
    ft_rng_fill_normal(&r, b, n, 0.0, 1.0);
    omp_set_num_threads(threads);
    FT_CHECK(memcmp(a, b, (size_t)n * sizeof *a) == 0, "one thread and two fill alike");
    ft_rng_seed(&s, 5);
    (void)ft_rng_next(&s);
    FT_CHECK(ft_rng_next(&r) == ft_rng_next(&s), "the generator advances by one draw");
    int same = 0;
    for (int i = 0; i < 64; i++)
        same += a[i] == a[FT_RNG_FILL_PIECE + i];
    FT_CHECK(same == 0, "%d of the first 64 values repeat in the next piece", same);
    free(a);
    free(b);
}

static void test_fill_states_scales(void) {
    /* fusion.dflare's states: target layer t's values have standard deviation 0.5 + 0.25 t, also
     * where a draw's two values fall in two layers (H odd). 2% is 7 standard errors. */
    ft_call c;
    ft_call_init(&c, op_named("fusion.dflare"));
    const char *names[] = {"N", "T", "H", "D"};
    const int64_t dims[] = {64, 3, 1001, 2};
    ft_err err = {0};
    FT_CHECK(ft_call_from_dims(&c, names, dims, 4, 5, &err) == FT_OK, "%s", err.msg);
    const float *x = c.t[0]->data;
    for (int64_t t = 0; t < 3; t++) {
        double sq = 0;
        for (int64_t row = 0; row < 64; row++)
            for (int64_t h = 0; h < 1001; h++) {
                double v = x[(row * 3 + t) * 1001 + h];
                sq += v * v;
            }
        double sd = sqrt(sq / (64.0 * 1001.0)), want = 0.5 + 0.25 * (double)t;
        FT_CHECK(fabs(sd / want - 1.0) < 0.02, "layer %lld: sd %g, want %g", (long long)t, sd,
                 want);
    }
    ft_call_free(&c);
}

static void test_reference_float32_outputs(void) {
    /* The float32 outputs of ft_call_reference are the rounded float64 ones. */
    ft_call c, ref;
    make_call(&c, "loss", "tiny.dflash.decode", 0);
    ft_err err = {0};
    FT_CHECK(ft_call_reference(&c, &err) == FT_OK, "%s", err.msg);
    FT_CHECK(ft_call_reference_f64(&c, &ref, &err) == FT_OK, "%s", err.msg);
    for (int i = 0; i < c.op->ntensors; i++) {
        if (!ft_call_uses(&c, i) || c.op->tensors[i].role != FT_ROLE_OUT) continue;
        for (int64_t k = 0; k < ft_tensor_numel(c.t[i]); k++)
            FT_CHECK(ft_tensor_get(c.t[i], k) == (float)ft_tensor_get(ref.t[i], k), "%s[%lld]",
                     c.op->tensors[i].name, (long long)k);
    }
    double loss = ft_tensor_get(ref.t[4], 0);
    FT_CHECK(isfinite(loss) && loss > 0, "realistic inputs give a positive loss: %g", loss);
    ft_call_free(&ref);
    ft_call_free(&c);
}

/* Every value of every parameter of every backend's space reads back as itself, from its text
 * (ft_config_value_str, then ft_config_parse) and from its JSON form: a named parameter's
 * values are 0..n-1, the indices of its labels (attention.decode's splits on cuda once had
 * values 0, 1, 2, 4, 8 under five labels, so a tuned splits=8 could not be read back). */
static void test_spaces_round_trip(void) {
    int spaces = 0, values = 0;
    for (int b = 0; b < ft_backend_count(); b++) {
        const ft_backend *be = ft_backend_at(b);
        for (int o = 0; be->space && o < ft_op_count(); o++) {
            const ft_space *s = be->space(ft_op_at(o));
            if (!s) continue;
            spaces++;
            for (int i = 0; i < s->nparams; i++) {
                const ft_param *p = &s->params[i];
                for (int k = 0; k < p->n; k++) {
                    FT_CHECK(!p->labels || p->values[k] == k,
                             "%s on %s: %s is named, yet its value %d is not its index %d",
                             ft_op_at(o)->name, be->name, p->name, p->values[k], k);
                    ft_config cfg, back, from_json;
                    ft_config_default(s, &cfg);
                    cfg.v[i] = p->values[k];
                    char val[48], text[128];
                    ft_config_value_str(s, i, cfg.v[i], val, sizeof val);
                    snprintf(text, sizeof text, "%s=%s", p->name, val);
                    ft_err err = {0};
                    FT_CHECK(ft_config_parse(s, text, &back, &err) == FT_OK, "%s on %s: %s: %s",
                             ft_op_at(o)->name, be->name, text, err.msg);
                    FT_CHECK(back.v[i] == cfg.v[i], "%s on %s: %s read back as %d, not %d",
                             ft_op_at(o)->name, be->name, text, back.v[i], cfg.v[i]);
                    json_t *j = ft_config_to_json(s, &cfg);
                    FT_CHECK(ft_config_from_json(s, j, &from_json, &err) == FT_OK &&
                                 ft_config_equal(&from_json, &cfg),
                             "%s on %s: %s does not survive its JSON form (%s)", ft_op_at(o)->name,
                             be->name, text, err.msg);
                    json_decref(j);
                    values++;
                }
            }
        }
    }
    FT_CHECK(spaces >= 12 && values > 100, "only %d spaces, %d values seen", spaces, values);
}

/* A parameter given twice in one config is refused rather than the last one kept silently. */
static void test_config_twice(void) {
    const ft_space *s = ft_backend_cpu.space(op_named("fusion.dflare"));
    FT_CHECK(s && s->nparams > 0, "fusion.dflare has a CPU space");
    const char *name = s->params[0].name;
    char val[48], text[160];
    ft_config_value_str(s, 0, s->params[0].values[0], val, sizeof val);
    snprintf(text, sizeof text, "%s=%s,%s=%s", name, val, name, val);
    ft_config cfg;
    ft_err err = {0};
    FT_CHECK(ft_config_parse(s, text, &cfg, &err) == FT_EINVAL && strstr(err.msg, "given twice"),
             "%s: %s", text, err.msg);
    snprintf(text, sizeof text, "%s=%s", name, val);
    FT_CHECK(ft_config_parse(s, text, &cfg, &err) == FT_OK, "%s once: %s", text, err.msg);
}

/* A value past an int is no candidate, however its low 32 bits read: 2^32 + 64 is not rows=64,
 * in the text form or the JSON one. */
static void test_config_wide_values(void) {
    const ft_space *s = ft_backend_cpu.space(op_named("fusion.dflare"));
    int i = s ? ft_space_param(s, "rows") : -1;
    FT_CHECK(i >= 0, "fusion.dflare has rows");
    if (i < 0) return;
    char text[64];
    long long wide = (1LL << 32) + s->params[i].values[0];
    snprintf(text, sizeof text, "rows=%lld", wide);
    ft_config cfg;
    ft_err err = {0};
    FT_CHECK(ft_config_parse(s, text, &cfg, &err) == FT_EINVAL &&
                 strstr(err.msg, "not a candidate"),
             "%s: %s", text, err.msg);
    json_t *o = json_pack("{s:I}", "rows", (json_int_t)wide);
    FT_CHECK(ft_config_from_json(s, o, &cfg, &err) != FT_OK, "JSON rows=%lld taken", wide);
    json_decref(o);
    snprintf(text, sizeof text, "rows=%d", s->params[i].values[0]);
    FT_CHECK(ft_config_parse(s, text, &cfg, &err) == FT_OK, "%s: %s", text, err.msg);
}

int main(void) {
    FT_RUN(test_registry);
    FT_RUN(test_bind_recovers_preset_sizes);
    FT_RUN(test_real_preset_sizes);
    FT_RUN(test_preset_set);
    FT_RUN(test_shape_errors);
    FT_RUN(test_index_errors);
    FT_RUN(test_attrs);
    FT_RUN(test_window_attrs_json);
    FT_RUN(test_want_dx);
    FT_RUN(test_window_flops);
    FT_RUN(test_reference_float32_outputs);
    FT_RUN(test_fill_normal);
    FT_RUN(test_fill_normal_threads);
    FT_RUN(test_fill_states_scales);
    FT_RUN(test_spaces_round_trip);
    FT_RUN(test_config_twice);
    FT_RUN(test_config_wide_values);
    return ft_test_finish();
}
