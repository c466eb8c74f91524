/* test_rope.c: RoPE's frequencies (kernels/attention/rope.c, SPEC.md attention.kvproj "RoPE
 * scaling"): the one function every kvproj implementation rotates with.
 *
 * Checked against numbers that do not come from it: the expected frequencies below were
 * computed with NumPy in float64 by a transcription of Hugging Face transformers'
 * modeling_rope_utils.py (`_compute_llama3_parameters`, `_compute_yarn_parameters`, with each
 * model's public config.json values), printed with repr() and pasted here; and by the closed
 * forms of each band (kept, divided by the factor, in between), the attention factor
 * 0.1 ln(factor) + 1, the identity at factor 1, and the bad inputs each attribute refuses.
 */
#include "ft_test.h"

#include "attention/attention.h"
#include "op/op.h"
#include "op/op_json.h"
#include "profiles/src/profile.h"

#include <math.h>
#include <string.h>

/* |a - b| <= tol |b|: the frequencies span six decades, so every comparison is relative. */
#define CHECK_REL1(a, b, tol)                                                                      \
    do {                                                                                           \
        double a_ = (a), b_ = (b);                                                                 \
        FT_CHECK(fabs(a_ - b_) <= (tol)*fabs(b_), "%s = %.17g, expected %.17g", #a, a_, b_);       \
    } while (0)

static double plain(double theta, int64_t dh, int64_t m) {
    return exp(-2.0 * (double)m / (double)dh * log(theta));
}

static ft_attrs attrs_of(const char *const *kv) {
    ft_attrs a;
    ft_attrs_default(&a);
    for (int i = 0; kv[i]; i += 2) {
        ft_err err = {0};
        ft_status s = ft_attrs_set(&a, &ft_op_attention_kvproj, kv[i], kv[i + 1], &err);
        FT_CHECK(s == FT_OK, "setting %s=%s: %s", kv[i], kv[i + 1], err.msg);
    }
    return a;
}

/* No scaling: theta^(-2m/dh) and no scale, as before the scalings existed. */
static void test_plain(void) {
    ft_attrs a = attrs_of((const char *const[]){"rope_theta", "10000", NULL});
    double f[32], ms = 0;
    ft_rope_freqs(&a, 64, f, &ms);
    FT_CHECK(ms == 1.0, "mscale %.17g without scaling", ms);
    for (int m = 0; m < 32; m++)
        CHECK_REL1(f[m], plain(1e4, 64, m), 1e-14);
    FT_CHECK(f[0] == 1.0, "inv_freq[0] = %.17g, theta^0 is 1", f[0]);
}

/* Llama 3.1 8B (config.json: rope_theta 500000; rope_scaling llama3, factor 8, low_freq_factor
 * 1, high_freq_factor 4, original_max_position_embeddings 8192), dh 128. Wavelengths under
 * 8192/4 = 2048 positions (m <= 28) are kept; over 8192 (m >= 35) divided by 8; m = 29..34 mix.
 * Expected: transformers' formula in NumPy float64 (see the file's opening). */
static void test_llama3_bands(void) {
    ft_attrs a = attrs_of((const char *const[]){"rope_theta", "500000", "rope_scaling", "llama3",
                                                "rope_factor", "8", "rope_low_freq_factor", "1",
                                                "rope_high_freq_factor", "4",
                                                "rope_original_max_pos", "8192", NULL});
    double f[64], ms = 0;
    ft_rope_freqs(&a, 128, f, &ms);
    FT_CHECK(ms == 1.0, "llama3 has no attention factor, got %.17g", ms);
    static const struct {
        int m;
        double want;
    } hf[] = {
        {0, 1.0},
        {1, 0.8146172338565447},
        {28, 0.0032114459947525913},
        {29, 0.002166570763503359},
        {30, 0.0013718935677611381},
        {31, 0.0008567514129196321},
        {32, 0.0005248461609929549},
        {33, 0.00031269375038406517},
        {34, 0.00017850781276799638},
        {35, 9.556212353964683e-05},
        {50, 4.411534674558404e-06},
        {63, 3.068925988914511e-07},
    };
    for (size_t i = 0; i < sizeof hf / sizeof hf[0]; i++)
        CHECK_REL1(f[hf[i].m], hf[i].want, 1e-12);
    /* The bands in closed form: high kept, low divided by the factor, the middle strictly
     * between the two and falling with m (the smooth factor falls as the wavelength grows). */
    for (int m = 0; m < 64; m++) {
        const double b = plain(5e5, 128, m), w = 2 * M_PI / b;
        if (w < 2048)
            CHECK_REL1(f[m], b, 1e-14);
        else if (w > 8192)
            CHECK_REL1(f[m], b / 8, 1e-14);
        else {
            const double t = (8192 / w - 1) / (4 - 1);
            CHECK_REL1(f[m], (1 - t) * b / 8 + t * b, 1e-14);
            FT_CHECK(f[m] > b / 8 && f[m] < b,
                     "m = %d in the middle band: %.17g outside "
                     "(base/8, base) = (%.17g, %.17g)",
                     m, f[m], b / 8, b);
        }
    }
    int mid = 0;
    for (int m = 0; m < 64; m++)
        mid += 2 * M_PI / plain(5e5, 128, m) >= 2048 && 2 * M_PI / plain(5e5, 128, m) <= 8192;
    FT_CHECK(mid == 6, "%d dims in the middle band at Llama 3.1's values, HF's formula has 6", mid);
}

/* gpt-oss-20b (config.json: rope_theta 150000; rope_scaling yarn, factor 32, beta_fast 32,
 * beta_slow 1, original_max_position_embeddings 4096, truncate false), dh 64. The ramp runs
 * from d(32) = 8.0928 to d(1) = 17.398 (not rounded with truncate false); mscale is
 * 0.1 ln 32 + 1. With truncate (transformers' default) the ends round to 8 and 18.
 * Expected: transformers' formula in NumPy float64 (see the file's opening). */
static void test_yarn_gpt_oss(void) {
    const char *const kv[] = {"rope_theta",
                              "150000",
                              "rope_scaling",
                              "yarn",
                              "rope_factor",
                              "32",
                              "rope_original_max_pos",
                              "4096",
                              "rope_beta_fast",
                              "32",
                              "rope_beta_slow",
                              "1",
                              "rope_truncate",
                              "0",
                              NULL};
    ft_attrs a = attrs_of(kv);
    double f[32], ms = 0;
    ft_rope_freqs(&a, 64, f, &ms);
    CHECK_REL1(ms, 1.3465735902799727, 1e-15);
    CHECK_REL1(ms, 0.1 * log(32.0) + 1, 1e-15);
    static const double hf[32] = {1.0,
                                  0.6890443058881632,
                                  0.4747820554769007,
                                  0.3271458718642365,
                                  0.2254180002028708,
                                  0.15532298948448497,
                                  0.10702442147781144,
                                  0.07374456821026082,
                                  0.050813274815461475,
                                  0.03170569618466377,
                                  0.019335001126540362,
                                  0.011592049256286924,
                                  0.00679495948973222,
                                  0.0038603593171920685,
                                  0.0020937923789696887,
                                  0.0010526021013863359,
                                  0.00045648391922324086,
                                  0.00012931870124506317,
                                  3.8308812373753384e-05,
                                  2.6396469031472782e-05,
                                  1.818833668168956e-05,
                                  1.2532569824095001e-05,
                                  8.63549587543848e-06,
                                  5.950239261491605e-06,
                                  4.09997848180298e-06,
                                  2.8250668271503398e-06,
                                  1.9465962110014815e-06,
                                  1.3412910350540445e-06,
                                  9.242089502428301e-07,
                                  6.36820914615699e-07,
                                  4.387978250864396e-07,
                                  3.0235114281192144e-07};
    for (int m = 0; m < 32; m++)
        CHECK_REL1(f[m], hf[m], 1e-12);
    /* Closed form of the ramp: lo, hi are the dims turning 32 and 1 times over 4096. */
    const double lo = 64 * log(4096 / (32 * 2 * M_PI)) / (2 * log(150000.0)),
                 hi = 64 * log(4096 / (1 * 2 * M_PI)) / (2 * log(150000.0));
    for (int m = 0; m < 32; m++) {
        const double b = plain(1.5e5, 64, m), r = fmin(1, fmax(0, (m - lo) / (hi - lo)));
        CHECK_REL1(f[m], b * (1 - r) + b / 32 * r, 1e-14);
        if (m <= lo) CHECK_REL1(f[m], b, 1e-14);
        if (m >= hi) CHECK_REL1(f[m], b / 32, 1e-14);
    }

    /* truncate = 1: the ramp's ends are whole dims, 8 and 18; dims 9..17 differ, the rest not. */
    ft_attrs t = attrs_of(kv);
    FT_CHECK(ft_attrs_set(&t, NULL, "rope_truncate", "1", NULL) == FT_OK, "rope_truncate=1");
    double g[32], ms2 = 0;
    ft_rope_freqs(&t, 64, g, &ms2);
    FT_CHECK(ms2 == ms, "truncate changed mscale");
    static const struct {
        int m;
        double want;
    } tr[] = {{8, 0.050813274815461475},
              {9, 0.031620752275346484},
              {13, 0.004069554714758243},
              {17, 0.0002279477957951252},
              {18, 3.8308812373753384e-05}};
    for (size_t i = 0; i < sizeof tr / sizeof tr[0]; i++)
        CHECK_REL1(g[tr[i].m], tr[i].want, 1e-12);
    for (int m = 0; m < 32; m++)
        if (m <= 8 || m >= 18)
            FT_CHECK(g[m] == f[m], "truncate changed dim %d outside the ramp", m);
        else
            FT_CHECK(g[m] != f[m], "truncate left dim %d of the ramp unchanged", m);
}

/* factor 1 stretches nothing: both scalings give plain RoPE, and YaRN's scale is 1. */
static void test_factor_one_is_plain(void) {
    const char *const kinds[] = {"llama3", "yarn"};
    for (int k = 0; k < 2; k++) {
        ft_attrs a = attrs_of((const char *const[]){"rope_theta", "150000", "rope_scaling",
                                                    kinds[k], "rope_factor", "1", NULL});
        double f[64], ms = 0;
        ft_rope_freqs(&a, 128, f, &ms);
        FT_CHECK(ms == 1.0, "%s at factor 1: mscale %.17g", kinds[k], ms);
        for (int m = 0; m < 64; m++)
            CHECK_REL1(f[m], plain(1.5e5, 128, m), 1e-14);
    }
}

/* Each refused value is one line naming the attribute; relations between two attributes are
 * refused by ft_rope_check (and so by attention.kvproj's check). */
static void test_bad_values(void) {
    static const char *const bad[][2] = {
        {"rope_scaling", "ntk"},
        {"rope_factor", "0.5"},
        {"rope_factor", "nan"},
        {"rope_low_freq_factor", "0"},
        {"rope_high_freq_factor", "-4"},
        {"rope_original_max_pos", "0"},
        {"rope_original_max_pos", "4096.5"},
        {"rope_beta_fast", "0"},
        {"rope_beta_slow", "-1"},
        {"rope_truncate", "2"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ft_attrs a;
        ft_attrs_default(&a);
        ft_err err = {0};
        ft_status s = ft_attrs_set(&a, &ft_op_attention_kvproj, bad[i][0], bad[i][1], &err);
        FT_CHECK(s == FT_EINVAL, "%s=%s accepted", bad[i][0], bad[i][1]);
        FT_CHECK(strstr(err.msg, bad[i][0]) && !strchr(err.msg, '\n'),
                 "%s=%s: message not one line naming it: %s", bad[i][0], bad[i][1], err.msg);
    }
    /* Other ops do not take rope attributes. */
    ft_attrs a;
    ft_attrs_default(&a);
    FT_CHECK(ft_attrs_set(&a, &ft_op_attention_decode, "rope_scaling", "yarn", NULL) == FT_EINVAL,
             "attention.decode took rope_scaling");

    const char *const *rel[] = {
        (const char *const[]){"rope_scaling", "llama3", "rope_low_freq_factor", "4",
                              "rope_high_freq_factor", "4", NULL},
        (const char *const[]){"rope_scaling", "yarn", "rope_factor", "4", "rope_beta_fast", "1",
                              "rope_beta_slow", "2", NULL},
        (const char *const[]){"rope_scaling", "yarn", "rope_factor", "4", "rope_theta", "1", NULL},
    };
    for (size_t i = 0; i < sizeof rel / sizeof rel[0]; i++) {
        ft_attrs r = attrs_of(rel[i]);
        ft_err err = {0};
        FT_CHECK(ft_rope_check("attention.kvproj", &r, &err) == FT_EINVAL,
                 "relation %zu not refused", i);
        FT_CHECK(strstr(err.msg, "attention.kvproj: rope_scaling=") && !strchr(err.msg, '\n'),
                 "relation %zu: %s", i, err.msg);
    }
    ft_attrs ok = attrs_of((const char *const[]){"rope_scaling", "llama3", NULL});
    FT_CHECK(ft_rope_check("attention.kvproj", &ok, NULL) == FT_OK,
             "llama3 at its default parameters refused");
}

/* The presets carry their targets' RoPE, and attention.kvproj takes it from the preset unless
 * the call named its own rope attributes. */
static void test_presets(void) {
    const ft_preset *l = ft_preset_find("llama3.1-8b.dflare.decode");
    const ft_preset *g = ft_preset_find("gpt-oss-20b.dflash.train");
    const ft_preset *q = ft_preset_find("qwen3-8b.dflare.train");
    FT_CHECK(l && g && q, "presets missing");
    if (!l || !g || !q) return;
    FT_CHECK(l->rope_theta == 500000 && l->rope.scaling == FT_ROPE_LLAMA3 && l->rope.factor == 8 &&
                 l->rope.low_freq_factor == 1 && l->rope.high_freq_factor == 4 &&
                 l->rope.original_max_pos == 8192,
             "llama3.1-8b: theta %g scaling %d factor %g", l->rope_theta, l->rope.scaling,
             l->rope.factor);
    FT_CHECK(g->rope_theta == 150000 && g->rope.scaling == FT_ROPE_YARN && g->rope.factor == 32 &&
                 g->rope.beta_fast == 32 && g->rope.beta_slow == 1 &&
                 g->rope.original_max_pos == 4096 && g->rope.truncate == 0,
             "gpt-oss-20b: theta %g scaling %d factor %g truncate %d", g->rope_theta,
             g->rope.scaling, g->rope.factor, g->rope.truncate);
    FT_CHECK(q->rope_theta == 1e6 && q->rope.scaling == FT_ROPE_NONE, "qwen3-8b: theta %g",
             q->rope_theta);

    ft_call c;
    ft_call_init(&c, &ft_op_attention_kvproj);
    ft_err err = {0};
    FT_CHECK(ft_op_attention_kvproj.from_preset(&c, g, &err) == FT_OK, "%s", err.msg);
    FT_CHECK(c.attrs.rope_theta == 150000 && c.attrs.rope.scaling == FT_ROPE_YARN &&
                 c.attrs.rope.factor == 32 && c.attrs.rope.truncate == 0,
             "kvproj at gpt-oss did not take its RoPE");
    char v[32];
    ft_attrs_format(&c.attrs, "rope_scaling", v, sizeof v);
    FT_CHECK(!strcmp(v, "yarn"), "rope_scaling formats as %s", v);

    ft_call_init(&c, &ft_op_attention_kvproj);
    FT_CHECK(ft_attrs_set(&c.attrs, &ft_op_attention_kvproj, "rope_theta", "10000", NULL) == FT_OK,
             "rope_theta=10000");
    FT_CHECK(ft_op_attention_kvproj.from_preset(&c, l, &err) == FT_OK, "%s", err.msg);
    FT_CHECK(c.attrs.rope_theta == 10000 && c.attrs.rope.scaling == FT_ROPE_NONE,
             "a named rope_theta was replaced by the preset's (theta %g, scaling %d)",
             c.attrs.rope_theta, c.attrs.rope.scaling);
}

/* A profile entry tuned before kvproj took the rope scaling attributes names only eps,
 * rope_theta and dtype: it still matches a call at the default (no scaling), and not one with a
 * scaling on. */
static void test_profile_entries_before_scaling(void) {
    json_t *old =
        json_pack("{s:s, s:s, s:s}", "eps", "1e-06", "rope_theta", "1000000", "dtype", "f32");
    ft_call c;
    ft_call_init(&c, &ft_op_attention_kvproj);
    json_t *now = ft_attrs_to_json(&c);
    FT_CHECK(json_object_get(now, "rope_scaling") != NULL, "the call names rope_scaling");
    FT_CHECK(ft_profile_attrs_match(old, now) && ft_profile_attrs_match(now, old),
             "an entry without the rope scaling attributes misses a call at their defaults");
    FT_CHECK(ft_attrs_set(&c.attrs, c.op, "rope_scaling", "yarn", NULL) == FT_OK, "yarn");
    json_t *yarn = ft_attrs_to_json(&c);
    FT_CHECK(!ft_profile_attrs_match(old, yarn) && !ft_profile_attrs_match(yarn, old),
             "an entry without rope scaling matches a call with yarn");
    json_decref(old);
    json_decref(now);
    json_decref(yarn);
}

int main(void) {
    FT_RUN(test_plain);
    FT_RUN(test_llama3_bands);
    FT_RUN(test_yarn_gpt_oss);
    FT_RUN(test_factor_one_is_plain);
    FT_RUN(test_bad_values);
    FT_RUN(test_presets);
    FT_RUN(test_profile_entries_before_scaling);
    return ft_test_finish();
}
