/* test_cpu_variants.c: every configuration of every op's space on the cpu backend, at small
 * shapes (the tiny presets, and odd sizes that leave remainders in every tile), against the
 * float64 reference with SPEC.md's tolerances: the valid ones, and the duplicates too (a tile or
 * chunk covering a whole dimension, which the tuner runs when it verifies at a shape smaller
 * than the one it times). Also: a fixed config and thread count gives bit-identical results run
 * to run.
 *
 *   FT_TEST_OP=loss test_cpu_variants     limit to one op
 */
#include <stdlib.h>
#include <string.h>

#include "ft_test.h"
#include "kernels/registry.h"
#include "op/backend.h"
#include "tuner/verify.h"

/* Shapes: each tiny preset as is, and with sizes chosen so tiles do not divide them. */
static const char *const shapes[][4] = {
    {"tiny.dflare.train", NULL},
    {"tiny.dflash.train", NULL},
    {"tiny.dflare.decode", NULL},
    {"tiny.dflash.decode", NULL},
    {"tiny.dflare.train", "N=37", "V=1031", "S=70"},
    {"tiny.dflare.decode", "L=150", "H=72", NULL},
};

static int64_t configs_run, duplicates_run;

static void check_op_at(const ft_backend *be, const ft_op *op, const ft_preset *p, int backward,
                        ft_attrs *attrs) {
    ft_call c;
    ft_call_init(&c, op);
    if (attrs) c.attrs = *attrs;
    c.attrs.backward = backward;
    ft_err err = {0};
    if (ft_call_from_preset(&c, p, 11, &err)) {
        FT_CHECK(0, "%s at %s: %s", op->name, p->name, err.msg);
        return;
    }
    ft_call ref;
    FT_CHECK(ft_call_reference_f64(&c, &ref, &err) == FT_OK, "%s", err.msg);
    const ft_space *s = be->space(op);
    ft_workspace ws = {0};
    c.ws = &ws;
    int64_t total = ft_space_size(s), valid = 0;
    for (int64_t k = 0; k < total; k++) {
        ft_config cfg;
        ft_space_config_at(s, k, &cfg);
        int verdict = ft_space_check(s, &c, &cfg, NULL, 0);
        if (verdict == FT_CONFIG_INVALID) continue;
        if (verdict == FT_CONFIG_VALID) valid++;
        else duplicates_run++;
        char cs[256];
        ft_config_format(s, &cfg, cs, sizeof cs);
        /* Poison the outputs so an entry a kernel forgets to write shows up. */
        for (int i = 0; i < op->ntensors; i++) {
            ft_role r = op->tensors[i].role;
            if (ft_call_uses(&c, i) && (r == FT_ROLE_OUT || r == FT_ROLE_GRAD_OUT)) {
                float *d = c.t[i]->data;
                for (int64_t e = 0; e < ft_tensor_numel(c.t[i]); e++) d[e] = NAN;
            }
        }
        ft_status st = be->run(&c, &cfg, &err);
        FT_CHECK(st == FT_OK, "%s %s bwd=%d [%s]: %s", op->name, p->name, backward, cs, err.msg);
        if (st) continue;
        ft_verify_result vr;
        ft_verify_outputs(&c, &ref, &vr);
        FT_CHECK(vr.ok, "%s %s bwd=%d [%s]: %s", op->name, p->name, backward, cs, vr.msg);
        configs_run++;
    }
    FT_CHECK(valid > 0, "%s at %s: no valid config", op->name, p->name);
    /* Determinism: the default config twice gives identical bits. */
    ft_config def;
    ft_config_default(s, &def);
    if (ft_space_valid(s, &c, &def, NULL, 0)) {
        ft_call again;
        FT_CHECK(be->run(&c, &def, &err) == FT_OK, "%s", err.msg);
        ft_call_init(&again, op);
        again = c;
        for (int i = 0; i < op->ntensors; i++) {
            ft_role r = op->tensors[i].role;
            again.t[i] = NULL;
            if (ft_call_uses(&c, i) && (r == FT_ROLE_OUT || r == FT_ROLE_GRAD_OUT)) {
                FT_CHECK(ft_tensor_convert(c.t[i], FT_F32, &again.t[i], &err) == FT_OK, "copy");
            }
        }
        FT_CHECK(be->run(&c, &def, &err) == FT_OK, "%s", err.msg);
        for (int i = 0; i < op->ntensors; i++)
            if (again.t[i])
                FT_CHECK(memcmp(again.t[i]->data, c.t[i]->data, ft_tensor_nbytes(c.t[i])) == 0,
                         "%s %s: output %s differs between two runs of the default config",
                         op->name, p->name, op->tensors[i].name);
        ft_call_free(&again);
    }
    ft_ws_free(&ws);
    ft_call_free(&ref);
    ft_call_free(&c);
}

static void test_every_config(void) {
    ft_err err = {0};
    const ft_backend *be;
    FT_CHECK(ft_backend_resolve("cpu", NULL, &be, &err) == FT_OK, "%s", err.msg);
    const char *only = getenv("FT_TEST_OP");
    for (int i = 0; i < ft_op_count(); i++) {
        const ft_op *op = ft_op_at(i);
        if (only && strcmp(only, op->name) != 0) continue;
        FT_CHECK(be->supports(op), "cpu backend lacks %s", op->name);
        if (!be->supports(op)) continue;
        for (size_t k = 0; k < sizeof shapes / sizeof shapes[0]; k++) {
            ft_preset p = *ft_preset_find(shapes[k][0]);
            for (int j = 1; j < 4 && shapes[k][j]; j++)
                FT_CHECK(ft_preset_set(&p, shapes[k][j], &err) == FT_OK, "%s", err.msg);
            for (int bwd = 0; bwd <= (op->backward == FT_BWD_OPTIONAL); bwd++)
                check_op_at(be, op, &p, bwd, NULL);
        }
    }
}

/* The cpu backend and op `name`, unless FT_TEST_OP names another op: then 0 (nothing to test). */
static int cpu_op(const char *name, const ft_backend **be, const ft_op **op) {
    const char *only = getenv("FT_TEST_OP");
    if (only && strcmp(only, name) != 0) return 0;
    ft_err err = {0};
    FT_CHECK(ft_backend_resolve("cpu", NULL, be, &err) == FT_OK, "%s", err.msg);
    *op = ft_op_find(name, &err);
    return 1;
}

/* The loss space again under every scheme and norm, and with dw_lm, at one shape. */
static void test_loss_schemes(void) {
    const ft_backend *be;
    const ft_op *op;
    if (!cpu_op("loss", &be, &op)) return;
    ft_preset p = *ft_preset_find("tiny.dflare.train");
    for (int scheme = 0; scheme < FT_SCHEME_COUNT; scheme++) {
        for (int norm = 0; norm < FT_NORM_COUNT_; norm++) {
            ft_attrs a;
            ft_attrs_default(&a);
            a.loss.scheme = (ft_loss_scheme)scheme;
            a.loss.norm = (ft_loss_norm)norm;
            a.loss.want_dw = scheme % 2;
            a.loss.step = 3;
            a.loss.warmup_steps = 10;
            check_op_at(be, op, &p, 0, &a);
        }
    }
}

/* The loss with the drafter's final RMSNorm fused (final_norm = 1): every config (both
 * norm_pass values) under the schemes whose denominators are known early and late, with and
 * without dw_lm. */
static void test_loss_final_norm(void) {
    const ft_backend *be;
    const ft_op *op;
    if (!cpu_op("loss", &be, &op)) return;
    ft_preset p = *ft_preset_find("tiny.dflare.train");
    static const struct {
        ft_loss_scheme scheme;
        ft_loss_norm norm;
    } cases[] = {{FT_SCHEME_DECAY, FT_NORM_DEFAULT},
                 {FT_SCHEME_DPACE, FT_NORM_WEIGHT_SUM}, /* the late denominator */
                 {FT_SCHEME_PROGRESSIVE_EPOCH, FT_NORM_COUNT}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        ft_attrs a;
        ft_attrs_default(&a);
        a.loss.final_norm = 1;
        a.loss.scheme = cases[i].scheme;
        a.loss.norm = cases[i].norm;
        a.loss.epoch = 3.5;
        a.loss.want_dw = (int)(i % 2);
        check_op_at(be, op, &p, 0, &a);
    }
}

/* The fusion ops' backward without dx (want_dx = 0, the training step's call: the target's
 * states are frozen): every config against the reference, which forms no dx either; no dx
 * tensor at all (a kernel that wrote one would write through NULL); and dw and dg bit for bit
 * those of the same config with dx formed. */
static void test_fusion_without_dx(void) {
    static const char *const ops[] = {"fusion.dflare", "fusion.dflash"};
    for (size_t o = 0; o < sizeof ops / sizeof ops[0]; o++) {
        const ft_backend *be;
        const ft_op *op;
        if (!cpu_op(ops[o], &be, &op)) continue;
        ft_err err = {0};
        for (size_t k = 0; k < sizeof shapes / sizeof shapes[0]; k += 4) {
            ft_preset p = *ft_preset_find(shapes[k][0]);
            for (int j = 1; j < 4 && shapes[k][j]; j++)
                FT_CHECK(ft_preset_set(&p, shapes[k][j], &err) == FT_OK, "%s", err.msg);
            ft_attrs a;
            ft_attrs_default(&a);
            FT_CHECK(a.want_dx == 1, "want_dx defaults to %d, not 1", a.want_dx);
            a.want_dx = 0;
            check_op_at(be, op, &p, 1, &a);

            /* The default config with and without dx: the other gradients agree bit for bit. */
            ft_call c[2];
            for (int want = 0; want <= 1; want++) {
                ft_call_init(&c[want], op);
                c[want].attrs.backward = 1;
                c[want].attrs.want_dx = want;
                FT_CHECK(ft_call_from_preset(&c[want], &p, 5, &err) == FT_OK, "%s", err.msg);
            }
            const ft_space *s = be->space(op);
            ft_config def;
            ft_config_default(s, &def);
            ft_workspace ws = {0};
            int dx = -1, checked = 0;
            for (int want = 0; want <= 1; want++) {
                c[want].ws = &ws;
                FT_CHECK(be->run(&c[want], &def, &err) == FT_OK, "%s: %s", op->name, err.msg);
            }
            for (int i = 0; i < op->ntensors; i++) {
                if (op->tensors[i].role != FT_ROLE_GRAD_OUT) continue;
                if (op->tensors[i].flags & FT_TS_WANT_DX) {
                    dx = i;
                    continue;
                }
                FT_CHECK(memcmp(c[0].t[i]->data, c[1].t[i]->data, ft_tensor_nbytes(c[0].t[i])) == 0,
                         "%s %s: %s differs with want_dx=0", op->name, p.name, op->tensors[i].name);
                checked++;
            }
            FT_CHECK(dx >= 0 && checked == 2, "%s: dx not flagged, or %d other gradients", op->name,
                     checked);
            FT_CHECK(dx >= 0 && !ft_call_uses(&c[0], dx) && !c[0].t[dx] && ft_call_uses(&c[1], dx),
                     "%s: want_dx=0 still has a dx tensor", op->name);
            ft_ws_free(&ws);
            ft_call_free(&c[0]);
            ft_call_free(&c[1]);
        }
    }
}

/* The attention ops again with sliding windows smaller than the context (SPEC.md "Sliding
 * window"): W = 3 < B + 1 (later rows of a block see no context at all), W = 9 (the window cuts
 * inside the tiny contexts), W = 40 on a longer context (the window starts inside a strip of the
 * packed context and spans tile boundaries); and the causal block, with a window and alone with
 * blocks longer than the smallest tiles (B = 20, 40: block tiles a row sees none of). */
static void test_attention_windows(void) {
    const char *only = getenv("FT_TEST_OP");
    ft_err err = {0};
    const ft_backend *be;
    FT_CHECK(ft_backend_resolve("cpu", NULL, &be, &err) == FT_OK, "%s", err.msg);
    static const struct {
        const char *op, *preset, *set;
        int64_t window;
        int causal; /* the block causal too (SpecForge's sliding layers) */
    } cases[] = {
        {"attention.train", "tiny.dflare.train", NULL, 3, 0},
        {"attention.train", "tiny.dflash.train", NULL, 9, 1},
        {"attention.train", "tiny.dflare.train", "S=150", 40, 0},
        {"attention.train", "tiny.dflare.train", "B=20", 0, 1},
        {"attention.decode", "tiny.dflare.decode", NULL, 3, 1},
        {"attention.decode", "tiny.dflash.decode", NULL, 9, 0},
        {"attention.decode", "tiny.dflare.decode", "L=150", 40, 0},
        {"attention.decode", "tiny.dflare.decode", "B=40", 0, 1},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        if (only && strcmp(only, cases[k].op) != 0) continue;
        const ft_op *op = ft_op_find(cases[k].op, &err);
        ft_preset p = *ft_preset_find(cases[k].preset);
        if (cases[k].set) FT_CHECK(ft_preset_set(&p, cases[k].set, &err) == FT_OK, "%s", err.msg);
        ft_attrs a;
        ft_attrs_default(&a);
        a.window = cases[k].window;
        a.causal = cases[k].causal;
        for (int bwd = 0; bwd <= (op->backward == FT_BWD_OPTIONAL); bwd++)
            check_op_at(be, op, &p, bwd, &a);
    }
}

/* attention.kvproj's space again with RoPE scaled: at the llama3.1-8b and gpt-oss-20b presets
 * (their targets' RoPE, taken from the preset) shrunk to test sizes, where dh 16 still spans all
 * of Llama 3's bands (dims 0-3 kept, 4 in between, 5-7 divided) and YaRN's ramp (dims 2-4); and
 * at a tiny preset with the scalings named by attribute (truncate on, other factors). */
static void test_kvproj_rope_scaling(void) {
    const ft_backend *be;
    const ft_op *op;
    if (!cpu_op("attention.kvproj", &be, &op)) return;
    ft_err err = {0};
    static const char *const presets[] = {"llama3.1-8b.dflare.train", "gpt-oss-20b.dflash.decode"};
    static const char *const shrink[] = {"H=40", "Hq=4", "Hkv=2", "dh=16", "D=2", "N=29"};
    for (int k = 0; k < 2; k++) {
        ft_preset p = *ft_preset_find(presets[k]);
        for (int j = 0; j < 6; j++)
            FT_CHECK(ft_preset_set(&p, shrink[j], &err) == FT_OK, "%s", err.msg);
        FT_CHECK(p.rope.scaling == (k ? FT_ROPE_YARN : FT_ROPE_LLAMA3), "%s: scaling %d", p.name,
                 p.rope.scaling);
        for (int bwd = 0; bwd <= 1; bwd++) /* the backward rotates back by the same angles */
            check_op_at(be, op, &p, bwd, NULL);
    }
    static const char *const named[][2][2] = {
        {{"rope_scaling", "llama3"}, {"rope_factor", "4"}},
        {{"rope_scaling", "yarn"}, {"rope_factor", "16"}},
    };
    for (int k = 0; k < 2; k++) {
        ft_attrs a;
        ft_attrs_default(&a);
        for (int j = 0; j < 2; j++)
            FT_CHECK(ft_attrs_set(&a, op, named[k][j][0], named[k][j][1], &err) == FT_OK, "%s",
                     err.msg);
        check_op_at(be, op, ft_preset_find("tiny.dflash.train"), k, &a);
    }
}

int main(void) {
    FT_RUN(test_every_config);
    FT_RUN(test_loss_schemes);
    FT_RUN(test_loss_final_norm);
    FT_RUN(test_fusion_without_dx);
    FT_RUN(test_attention_windows);
    FT_RUN(test_kvproj_rope_scaling);
    fprintf(stderr, "%lld configurations verified, %lld of them duplicates at their shape\n",
            (long long)configs_run, (long long)duplicates_run);
    FT_CHECK(duplicates_run > 0, "no duplicate config ran: the shapes cover no covering tile");
    return ft_test_finish();
}
