/* step.c: one whole drafter step from the tuned ops (step.h, docs/step.md).
 *
 * Phases: build (the stage list of SPEC.md's draft layer at the preset's sizes, memory checked
 * before anything is allocated, configs from the profile), measure (each distinct stage alone,
 * then the whole step end to end), report (the document of docs/step.md).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/clock.h"
#include "core/env.h"
#include "core/json.h"
#include "kernels/registry.h"
#include "op/op_json.h"
#include "tuner/step.h"

void ft_step_opts_default(ft_step_opts *o) {
    memset(o, 0, sizeof *o);
    o->backend = "auto";
    o->seed = 1;
    ft_measure_defaults(&o->measure);
}

void ft_step_measure_time(double time_s, ft_measure_opts *m) {
    ft_measure_defaults(m);
    if (!(time_s > 0)) return;
    m->min_time_s = time_s;
    m->max_time_s = 10 * time_s;
    if (m->warmup_s > time_s) m->warmup_s = time_s;
}

/* ---- build --------------------------------------------------------------------------------- */

/* A stage before it is allocated: the op and its sizes, from the preset or given. */
typedef struct stage_spec {
    const char *name;
    int layer;
    const char *pass;
    const char *note;
    const ft_op *op;
    int backward, grad_only;
    int64_t window;  /* attention: the layer's sliding window (0: full attention) */
    int causal;      /* attention: the block causal (a sliding layer's, as SpecForge has it) */
    int64_t M, N, K; /* linear's sizes (op "linear"); the preset's otherwise */
} stage_spec;

#define MAX_SPECS 512

typedef struct plan {
    stage_spec s[MAX_SPECS];
    int n;
} plan;

static void add(plan *pl, stage_spec sp) {
    if (pl->n < MAX_SPECS) pl->s[pl->n++] = sp;
}

static const ft_op *op_named(const char *name) { return ft_op_find(name, NULL); }

static stage_spec lin(const char *name, int layer, int train, int64_t M, int64_t N, int64_t K,
                      const char *note) {
    return (stage_spec){.name = name,
                        .layer = layer,
                        .pass = train ? "fwd+bwd" : "forward",
                        .note = note,
                        .op = op_named("linear"),
                        .backward = train,
                        .M = M,
                        .N = N,
                        .K = K};
}

static stage_spec preset_op(const char *name, int layer, int train, const char *op,
                            const char *note) {
    const ft_op *o = op_named(op);
    int bwd = train && o->backward != FT_BWD_NONE;
    return (stage_spec){.name = name,
                        .layer = layer,
                        .pass = o->backward == FT_BWD_ALWAYS ? "fwd+bwd"
                                : bwd                        ? "fwd+bwd"
                                                             : "forward",
                        .note = note,
                        .op = o,
                        .backward = bwd};
}

/* SPEC.md's "One draft layer", at preset p. */
static void plan_step(const ft_preset *p, plan *pl) {
    const int train = strcmp(p->phase, "train") == 0;
    const int64_t X = p->blocks * p->B; /* the rows of the step's blocks */
    const int64_t qd = p->Hq * p->dh, kvd = p->Hkv * p->dh;
    const char *fusion = strcmp(p->arch, "dflare") == 0 ? "fusion.dflare" : "fusion.dflash";
    pl->n = 0;
    add(pl, preset_op("fusion", -1, train, fusion,
                      train ? "the context's target states, every context token; backward: dw "
                              "and dg (the target is frozen: no dx)"
                            : "the target states of the step's new tokens"));
    /* Training runs the projection with its backward (dc, dW_k, dW_v, dgk through the norm and
     * RoPE) in one call. */
    add(pl, preset_op("kv_proj", -1, train, "attention.kvproj",
                      train ? "context keys and values of every draft layer, norm and RoPE "
                              "fused, with the backward (dc, dW_k, dW_v, dgk)"
                            : "context keys and values of every draft layer, norm and RoPE fused"));
    const char *attn = train ? "attention.train" : "attention.decode";
    for (int i = 0; i < (int)p->D; i++) {
        add(pl, lin("q_proj", i, train, X, qd, p->H, ""));
        add(pl, lin("kv_blk_proj", i, train, X, 2 * kvd, p->H,
                    "the block's k and v projections, one GEMM"));
        /* A sliding layer's attention is a different call (its window, and its block causal as
         * SpecForge's and SGLang's DFlash sliding layers have it), timed on its own. */
        stage_spec at = preset_op("attention", i, train, attn, "");
        at.window = ft_preset_layer_window(p, i);
        at.causal = at.window > 0;
        if (at.window) at.note = "sliding-window layer (the block causal)";
        add(pl, at);
        add(pl, lin("o_proj", i, train, X, p->H, qd, ""));
        add(pl, lin("mlp_gate_up", i, train, X, 2 * p->inter, p->H,
                    "gate and up projections, one GEMM"));
        add(pl, lin("mlp_down", i, train, X, p->H, p->inter, ""));
    }
    if (train)
        add(pl, preset_op("loss", -1, 1, "loss",
                          "final RMSNorm, LM head and weighted cross entropy, fused"));
    else
        add(pl, lin("lm_head", -1, 0, X, p->V, p->H, "logits of every block position"));
}

/* Size (no allocation) the call of a spec. */
static ft_status size_call(ft_call *c, const stage_spec *sp, const ft_preset *p, const char *scheme,
                           ft_err *err) {
    ft_call_init(c, sp->op);
    c->attrs.backward = sp->backward;
    c->attrs.grad_only = sp->grad_only;
    c->attrs.window = sp->window;
    c->attrs.causal = sp->causal;
    if (sp->op == op_named("loss") && scheme) {
        ft_status s = ft_attrs_set(&c->attrs, sp->op, "scheme", scheme, err);
        if (s) return s;
    }
    /* The step's h is the last draft layer's un-normed output: the loss applies the drafter's
     * final RMSNorm itself, as the public trainers' draft models do before the LM head. */
    if (sp->op == op_named("loss")) c->attrs.loss.final_norm = 1;
    /* The fusion's x is the frozen target's states: the trainers' backward forms dw and dg, never
     * dx (SpecForge and AngelSlim run the target without gradients). */
    if (sp->backward && ft_op_accepts_attr(sp->op, "want_dx")) c->attrs.want_dx = 0;
    for (int k = 0; k < FT_MAX_SYMS; k++)
        c->dim[k] = -1;
    if (sp->op == op_named("linear")) {
        c->dim[0] = sp->M;
        c->dim[1] = sp->N;
        c->dim[2] = sp->K;
    } else {
        ft_status s = sp->op->from_preset(c, p, err);
        if (s) return s;
    }
    ft_call_resolve_backward(c);
    return FT_OK;
}

static double phys_bytes(void) {
    long pages = sysconf(_SC_PHYS_PAGES), size = sysconf(_SC_PAGESIZE);
    return pages > 0 && size > 0 ? (double)pages * (double)size : 0;
}

static int same_call(const ft_call *a, const ft_call *b) {
    return a->op == b->op && memcmp(a->dim, b->dim, sizeof a->dim) == 0 &&
           a->backward == b->backward && a->attrs.grad_only == b->attrs.grad_only &&
           a->attrs.window == b->attrs.window && a->attrs.causal == b->attrs.causal &&
           a->attrs.want_dx == b->attrs.want_dx;
}

/* The profile's config for a stage, else the backend's default. */
static void pick_config(ft_step *s, ft_step_stage *st, const ft_profile *prof) {
    const ft_space *sp = s->be->space(st->call.op);
    ft_config_default(sp, &st->cfg);
    snprintf(st->cfg_from, sizeof st->cfg_from, "default");
    st->cfg_why[0] = '\0';
    if (!prof) return;
    /* and what exec says of its profile, each stage says too */
    int exact = 0;
    if (ft_profile_config_why(prof, &st->call, s->be->name, s->device, sp, &st->cfg, &exact,
                              st->cfg_why, sizeof st->cfg_why))
        snprintf(st->cfg_from, sizeof st->cfg_from, "%s", exact ? "profile" : "profile (nearest)");
}

ft_status ft_step_build(ft_step *s, const ft_preset *p, const ft_step_opts *o, ft_err *err) {
    memset(s, 0, sizeof *s);
    s->preset = *p;
    snprintf(s->loss_scheme, sizeof s->loss_scheme, "%s", o->scheme ? o->scheme : "decay");
    ft_status st = ft_backend_resolve(o->backend ? o->backend : "auto", NULL, &s->be, err);
    if (st) return st;
    ft_env env;
    ft_env_probe(&env);
    ft_backend_device(s->be, &env, s->device, sizeof s->device);

    plan *pl = calloc(1, sizeof *pl);
    if (!pl) return ft_err_set(err, FT_ENOMEM, "out of memory");
    plan_step(p, pl);
    if (pl->n >= MAX_SPECS) {
        free(pl);
        return ft_err_set(err, FT_EINVAL, "step %s: more than %d stages (D = %lld)", p->name,
                          MAX_SPECS, (long long)p->D);
    }
    s->stages = calloc((size_t)pl->n, sizeof *s->stages);
    if (!s->stages) {
        free(pl);
        return ft_err_set(err, FT_ENOMEM, "out of memory");
    }
    /* Size everything first: the memory check comes before any allocation. */
    for (int i = 0; i < pl->n && !st; i++) {
        ft_step_stage *sg = &s->stages[i];
        const stage_spec *sp = &pl->s[i];
        if (!s->be->supports(sp->op)) {
            st = ft_err_set(err, FT_EUNSUPPORTED,
                            "backend '%s' does not implement %s, which the "
                            "step needs",
                            s->be->name, sp->op->name);
            break;
        }
        if ((st = size_call(&sg->call, sp, p, o->scheme, err))) break;
        s->n = i + 1;
        snprintf(sg->name, sizeof sg->name, "%s", sp->name);
        snprintf(sg->pass, sizeof sg->pass, "%s", sp->pass);
        snprintf(sg->note, sizeof sg->note, "%s", sp->note ? sp->note : "");
        sg->layer = sp->layer;
        sg->twin = -1;
        for (int j = 0; j < i && sg->twin < 0; j++)
            if (same_call(&s->stages[j].call, &sg->call)) sg->twin = j;
        s->bytes += ft_call_io_bytes(&sg->call);
    }
    free(pl);
    if (st) return st;
    double phys = phys_bytes();
    if (phys > 0 && s->bytes > 0.75 * phys)
        return ft_err_set(err, FT_ENOMEM,
                          "step %s needs %.1f GB of tensors (every draft layer's own), more than "
                          "three quarters of this machine's %.1f GB; try a smaller preset",
                          p->name, s->bytes / 1e9, phys / 1e9);
    for (int i = 0; i < s->n; i++) {
        ft_step_stage *sg = &s->stages[i];
        ft_call *c = &sg->call;
        if ((st = ft_call_alloc(c, 1, 1, err))) return ft_err_wrap(err, "step %s", p->name);
        c->ws = &s->ws; /* scratch is never allocated inside a timed call */
        ft_rng rng;
        /* A twin gets its twin's inputs: the layers of a real step see one set of blocks and
         * anchors, and a twin's time is its twin's measurement. */
        ft_rng_seed(&rng,
                    (o->seed ? o->seed : 1) * 1000003u + (uint64_t)(sg->twin >= 0 ? sg->twin : i));
        c->op->fill_inputs(c, c->op == op_named("linear") ? NULL : p, &rng);
        if ((st = c->op->check(c, err))) return ft_err_wrap(err, "step %s: %s", p->name, sg->name);
        pick_config(s, sg, o->profile);
    }
    return FT_OK;
}

void ft_step_free(ft_step *s) {
    for (int i = 0; i < s->n; i++)
        ft_call_free(&s->stages[i].call);
    free(s->stages);
    ft_ws_free(&s->ws);
    memset(s, 0, sizeof *s);
}

/* ---- measure ------------------------------------------------------------------------------- */

typedef struct alone_ctx {
    const ft_backend *be;
    ft_call *c;
    const ft_config *cfg;
} alone_ctx;

static ft_status alone_run(void *ctx, int reps, double *secs, ft_err *err) {
    alone_ctx *a = ctx;
    return ft_backend_time(a->be, a->c, a->cfg, reps, secs, err);
}

typedef struct whole_ctx {
    ft_step *s;
    void *seq; /* the backend's sequence, or NULL: run() of each stage on the host clock */
} whole_ctx;

static ft_status whole_run(void *ctx, int reps, double *secs, ft_err *err) {
    whole_ctx *w = ctx;
    if (w->seq) return w->s->be->seq_time(w->seq, reps, secs, err);
    double t0 = ft_now_s();
    for (int r = 0; r < reps; r++)
        for (int i = 0; i < w->s->n; i++) {
            ft_step_stage *sg = &w->s->stages[i];
            ft_status st = w->s->be->run(&sg->call, &sg->cfg, err);
            if (st) return ft_err_wrap(err, "step: %s", sg->name);
        }
    *secs = ft_now_s() - t0;
    return FT_OK;
}

static int stopped(const ft_step_opts *o) { return o->stop && *o->stop; }

static ft_status measure_all(ft_step *s, const ft_step_opts *o, ft_err *err);

ft_status ft_step_measure(ft_step *s, const ft_step_opts *o, ft_err *err) {
    ft_load_mark m0, m1;
    ft_load_mark_take(&m0);
    ft_status st = measure_all(s, o, err);
    ft_load_mark_take(&m1);
    ft_load_between(&m0, &m1, &s->load);
    return st;
}

static ft_status measure_all(ft_step *s, const ft_step_opts *o, ft_err *err) {
    int distinct = 0, done = 0;
    for (int i = 0; i < s->n; i++)
        distinct += s->stages[i].twin < 0;
    ft_measure_opts mo = o->measure;
    mo.stop = o->stop;
    s->sum_alone_s = 0;
    for (int i = 0; i < s->n; i++) {
        ft_step_stage *sg = &s->stages[i];
        if (sg->twin >= 0) {
            sg->alone = s->stages[sg->twin].alone;
        } else {
            if (stopped(o)) return ft_err_set(err, FT_EIO, "interrupted");
            char what[96];
            snprintf(what, sizeof what, "%s (%s)", sg->name, sg->call.op->name);
            if (o->progress) o->progress(o->progress_ctx, what, done, distinct + 1);
            alone_ctx a = {s->be, &sg->call, &sg->cfg};
            ft_timed_fn fn = {.run = alone_run, .ctx = &a};
            fn.host_clock = !strcmp(ft_backend_clock(s->be), "host");
            ft_status st = ft_measure(&fn, &mo, &sg->alone, err);
            if (st) return ft_err_wrap(err, "step %s: %s", s->preset.name, sg->name);
            done++;
        }
        s->sum_alone_s += sg->alone.median;
    }
    if (stopped(o)) return ft_err_set(err, FT_EIO, "interrupted");
    if (o->progress) o->progress(o->progress_ctx, "the whole step", done, distinct + 1);
    whole_ctx w = {s, NULL};
    snprintf(s->whole_mode, sizeof s->whole_mode, "back to back (host clock)");
    ft_status st = FT_OK;
    if (s->be->seq_open) {
        ft_call **calls = calloc((size_t)s->n, sizeof *calls);
        const ft_config **cfgs = calloc((size_t)s->n, sizeof *cfgs);
        if (!calls || !cfgs) st = ft_err_set(err, FT_ENOMEM, "out of memory");
        for (int i = 0; !st && i < s->n; i++) {
            calls[i] = &s->stages[i].call;
            cfgs[i] = &s->stages[i].cfg;
        }
        if (!st)
            st = s->be->seq_open(calls, cfgs, s->n, &w.seq, s->whole_mode, sizeof s->whole_mode,
                                 err);
        free(calls);
        free(cfgs);
        if (st) return ft_err_wrap(err, "step %s", s->preset.name);
    }
    /* A median of one or two samples says nothing of the spread: the whole step gets the time
     * for at least six of the step the stages add up to, past the measurement's own cap. */
    ft_measure_opts wo = mo;
    if (wo.max_time_s < 6 * s->sum_alone_s) wo.max_time_s = 6 * s->sum_alone_s;
    ft_timed_fn fn = {.run = whole_run, .ctx = &w};
    fn.host_clock = !w.seq && !strcmp(ft_backend_clock(s->be), "host");
    st = ft_measure(&fn, &wo, &s->whole, err);
    if (w.seq) s->be->seq_close(w.seq);
    if (st) return ft_err_wrap(err, "step %s: the whole step", s->preset.name);
    if (o->progress) o->progress(o->progress_ctx, "done", distinct + 1, distinct + 1);
    return FT_OK;
}

/* ---- the document -------------------------------------------------------------------------- */

static json_t *sizes_json(const ft_preset *p) {
    json_t *o = json_object();
    for (int i = 0; ft_preset_fields[i]; i++)
        json_object_set_new(o, ft_preset_fields[i],
                            json_integer(*ft_preset_field((ft_preset *)p, ft_preset_fields[i])));
    return o;
}

int ft_step_op_sum(const ft_step *s, int i, int *count, double *sum_s) {
    for (int j = 0; j < i; j++)
        if (!strcmp(s->stages[j].name, s->stages[i].name)) return 0;
    *sum_s = 0;
    *count = 0;
    for (int j = i; j < s->n; j++)
        if (!strcmp(s->stages[j].name, s->stages[i].name)) {
            *sum_s += s->stages[j].alone.median;
            (*count)++;
        }
    return 1;
}

double ft_step_layer_sum(const ft_step *s, int l) {
    double sum = 0;
    for (int j = 0; j < s->n; j++)
        if (s->stages[j].layer == l) sum += s->stages[j].alone.median;
    return sum;
}

/* Per op name, in first-seen order: the sum of the stages' medians alone. */
static json_t *by_name(const ft_step *s) {
    json_t *a = json_array();
    for (int i = 0; i < s->n; i++) {
        double sum;
        int count;
        if (!ft_step_op_sum(s, i, &count, &sum)) continue;
        json_array_append_new(a, json_pack("{s:s, s:s, s:i, s:f, s:f}", "name", s->stages[i].name,
                                           "op", s->stages[i].call.op->name, "count", count,
                                           "median_s", sum, "share",
                                           s->sum_alone_s > 0 ? sum / s->sum_alone_s : 0.0));
    }
    return a;
}

static json_t *by_layer(const ft_step *s) {
    json_t *a = json_array();
    for (int l = -1; l < (int)s->preset.D; l++) {
        double sum = ft_step_layer_sum(s, l);
        json_array_append_new(a,
                              json_pack("{s:o, s:f, s:f}", "layer",
                                        l < 0 ? json_null() : json_integer(l), "median_s", sum,
                                        "share", s->sum_alone_s > 0 ? sum / s->sum_alone_s : 0.0));
    }
    return a;
}

json_t *ft_step_to_json(const ft_step *s) {
    const ft_preset *p = &s->preset;
    json_t *stages = json_array();
    for (int i = 0; i < s->n; i++) {
        const ft_step_stage *sg = &s->stages[i];
        char dims[160], cfg[256];
        ft_call_dims_str(&sg->call, dims, sizeof dims);
        ft_config_format(s->be->space(sg->call.op), &sg->cfg, cfg, sizeof cfg);
        json_t *e = json_pack(
            "{s:s, s:s, s:o, s:s, s:s, s:o, s:s, s:s, s:o, s:f, s:f, s:f}", "name", sg->name, "op",
            sg->call.op->name, "layer", sg->layer < 0 ? json_null() : json_integer(sg->layer),
            "pass", sg->pass, "dims", dims, "attrs", ft_attrs_to_json(&sg->call), "config", cfg,
            "config_from", sg->cfg_from, "alone", ft_stats_to_json(&sg->alone), "share",
            s->sum_alone_s > 0 ? sg->alone.median / s->sum_alone_s : 0.0, "flops",
            sg->call.op->flops ? sg->call.op->flops(&sg->call) : 0.0, "bytes",
            ft_call_io_bytes(&sg->call));
        if (sg->cfg_why[0]) json_object_set_new(e, "config_why", json_string(sg->cfg_why));
        if (sg->note[0]) json_object_set_new(e, "note", json_string(sg->note));
        if (sg->twin >= 0) json_object_set_new(e, "timed_as", json_integer(sg->twin));
        json_array_append_new(stages, e);
    }
    char date[32];
    time_t now = time(NULL);
    struct tm tm;
    gmtime_r(&now, &tm);
    strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", &tm);
    json_t *doc = json_pack(
        "{s:s, s:s, s:s, s:s, s:s, s:o, s:s, s:s, s:s, s:s, s:o, s:o, s:o, s:{s:o, s:s, s:f, "
        "s:f}, s:s, s:f}",
        "format", FT_STEP_FORMAT, "preset", p->name, "model", p->model, "arch", p->arch, "phase",
        p->phase, "sizes", sizes_json(p), "backend", s->be->name, "device", s->device, "clock",
        ft_backend_clock(s->be), "loss_scheme", s->loss_scheme, "stages", stages, "ops", by_name(s),
        "layers", by_layer(s), "whole", "stats", ft_stats_to_json(&s->whole), "mode", s->whole_mode,
        "sum_alone_s", s->sum_alone_s, "ratio",
        s->sum_alone_s > 0 ? s->whole.median / s->sum_alone_s : 0.0, "not_timed",
        "the draft layers' RMSNorms, q/k norms and RoPE of the block, SiLU gating, residual adds "
        "(elementwise, O(rows x (H + I)) each; the final RMSNorm is in the loss)",
        "bytes", s->bytes);
    if (doc) json_object_set_new(doc, "date", json_string(date));
    if (doc) json_object_set_new(doc, "load", ft_load_to_json(&s->load));
    return doc;
}
