/* test_api: the C API (flaretune.h) against the backends it wraps, and every misuse of it.
 *
 * Results through the API must equal the backend's own run() bit for bit for the same config and
 * inputs (host float32 in place, bf16 widened and rounded back, device pointers on the
 * emulator); a profile's entry is used for an exact and a nearest shape; every bad use returns a
 * status and one line naming what is wrong, leaves the caller's outputs alone and does not
 * poison the context (a correct call afterwards works). Run under ASan + UBSan in CI.
 */
#define _GNU_SOURCE /* sched_setaffinity */
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "flaretune.h"
#include "ft_test.h"
#include "ft_test_cpus.h"
#include "kernels/registry.h"
#include "op/backend.h"
#include "op/op.h"

/* One op's call at a preset (random inputs, zeroed outputs) and its tensors bound to ctx. */
typedef struct {
    ft_call c;
    const ft_op *op;
} problem;

static void problem_make(problem *p, const char *op, const char *preset, const char *set,
                         const char *attr_name, const char *attr_value) {
    ft_err err = {0};
    p->op = ft_op_find(op, &err);
    ft_call_init(&p->c, p->op);
    if (attr_name) ft_attrs_set(&p->c.attrs, p->op, attr_name, attr_value, &err);
    ft_preset ps = *ft_preset_find(preset);
    if (set) ft_preset_set(&ps, set, &err);
    ft_status s = ft_call_from_preset(&p->c, &ps, 11, &err);
    FT_CHECK(s == FT_OK, "%s at %s: %s", op, preset, err.msg);
}

/* Every attribute of p's call as "name=value,..." (the preset's B for the loss, ...). */
static const char *attrs_of(const problem *p, char *buf, size_t n) {
    buf[0] = '\0';
    for (int k = 0; p->op->attrs[k]; k++) {
        size_t used = strlen(buf);
        snprintf(buf + used, n - used, "%s%s=", used ? "," : "", p->op->attrs[k]);
        used = strlen(buf);
        ft_attrs_format(&p->c.attrs, p->op->attrs[k], buf + used, n - used);
    }
    return buf;
}

static flaretune_dtype dtype_of(const ft_tensor *t) {
    return t->dtype == FT_I32 ? FLARETUNE_I32 : t->dtype == FT_U8 ? FLARETUNE_U8 : FLARETUNE_F32;
}

/* Bind every tensor of p except `skip` (NULL: none). */
static void bind_all(flaretune_context *ctx, problem *p, const char *skip) {
    for (int i = 0; i < p->op->ntensors; i++) {
        ft_tensor *t = p->c.t[i];
        if (!t || (skip && strcmp(skip, p->op->tensors[i].name) == 0)) continue;
        flaretune_status st = flaretune_bind(ctx, p->op->tensors[i].name, t->data, dtype_of(t),
                                             t->rank, t->shape, FLARETUNE_HOST);
        FT_CHECK(st == FLARETUNE_OK, "bind %s: %s", p->op->tensors[i].name,
                 flaretune_message(ctx));
    }
}

static int is_output(const problem *p, int i) {
    ft_role r = p->op->tensors[i].role;
    return r == FT_ROLE_OUT || r == FT_ROLE_GRAD_OUT;
}

/* A copy of every output tensor of p's call (caller frees with free_copies). */
static void copy_outputs(const problem *p, void **out) {
    for (int i = 0; i < FT_MAX_TENSORS; i++)
        out[i] = NULL;
    for (int i = 0; i < p->op->ntensors; i++) {
        out[i] = NULL;
        if (!p->c.t[i] || !is_output(p, i)) continue;
        size_t n = ft_tensor_nbytes(p->c.t[i]);
        out[i] = malloc(n);
        memcpy(out[i], p->c.t[i]->data, n);
    }
}

static void free_copies(void **out) {
    for (int i = 0; i < FT_MAX_TENSORS; i++)
        free(out[i]);
}

/* Do p's outputs equal the copies bit for bit? */
static int outputs_equal(const problem *p, void **ref) {
    for (int i = 0; i < p->op->ntensors; i++)
        if (ref[i] && memcmp(ref[i], p->c.t[i]->data, ft_tensor_nbytes(p->c.t[i])) != 0) return 0;
    return 1;
}

static void clear_outputs(problem *p) {
    for (int i = 0; i < p->op->ntensors; i++)
        if (p->c.t[i] && is_output(p, i)) memset(p->c.t[i]->data, 0, ft_tensor_nbytes(p->c.t[i]));
}

/* p's outputs from the backend's own run() with config text. */
static void backend_run(const ft_backend *be, problem *p, const char *config, void **ref) {
    ft_config cfg;
    ft_err err = {0};
    FT_CHECK(ft_config_parse(be->space(p->op), config, &cfg, &err) == FT_OK, "%s", err.msg);
    clear_outputs(p);
    FT_CHECK(be->run(&p->c, &cfg, &err) == FT_OK, "%s", err.msg);
    copy_outputs(p, ref);
    clear_outputs(p);
}

static void test_version(void) {
    FT_CHECK(flaretune_api_version() == FLARETUNE_API_VERSION, "%d", flaretune_api_version());
    FT_CHECK(strncmp(flaretune_version(), "0.", 2) == 0, "%s", flaretune_version());
    FT_CHECK(strcmp(flaretune_status_name(FLARETUNE_EUNBOUND), "EUNBOUND") == 0, "name");
    FT_CHECK(strcmp(flaretune_status_name((flaretune_status)99), "unknown status") == 0, "99");
}

static void test_create_fails_cleanly(void) {
    flaretune_context *ctx = NULL;
    FT_CHECK(flaretune_create(NULL, "cpu") == FLARETUNE_EINVAL, "NULL out");
    FT_CHECK(flaretune_create(&ctx, "tpu") == FLARETUNE_EINVAL, "unknown backend");
    /* The list is the backends flaretune_create accepts, the one the docs give. */
    FT_CHECK(ctx && !strcmp(flaretune_message(ctx), "flaretune_create: unknown backend 'tpu' "
                                                    "(cpu, cuda, cuda-emu, ref, auto)"),
             "message: %s", flaretune_message(ctx));
    FT_CHECK(flaretune_run(ctx, "linear", NULL, NULL) == FLARETUNE_EINVAL, "run on failed ctx");
    FT_CHECK(strstr(flaretune_message(ctx), "not created") != NULL, "%s", flaretune_message(ctx));
    flaretune_destroy(ctx);
    FT_CHECK(flaretune_create(&ctx, NULL) == FLARETUNE_EINVAL, "NULL backend");
    FT_CHECK(!strcmp(flaretune_message(ctx),
                     "flaretune_create: which backend? (cpu, cuda, cuda-emu, ref, auto)"),
             "%s", flaretune_message(ctx));
    flaretune_destroy(ctx);
    FT_CHECK(flaretune_create(&ctx, "replay:x.jsonl") == FLARETUNE_EINVAL &&
                 strstr(flaretune_message(ctx), "unknown backend 'replay:x.jsonl'"),
             "%s", flaretune_message(ctx));
    flaretune_destroy(ctx);
    flaretune_destroy(NULL);
    /* A NULL context: a status, never a crash. */
    FT_CHECK(flaretune_run(NULL, "linear", NULL, NULL) == FLARETUNE_EINVAL, "NULL ctx");
    FT_CHECK(flaretune_bind(NULL, "x", &ctx, FLARETUNE_F32, 0, NULL, 0) == FLARETUNE_EINVAL, "-");
    FT_CHECK(flaretune_load_profile(NULL, "p", 0) == FLARETUNE_EINVAL, "NULL ctx");
    FT_CHECK(strlen(flaretune_message(NULL)) > 0, "message of NULL");
    FT_CHECK(flaretune_backend(NULL)[0] == '\0' && flaretune_device(NULL)[0] == '\0', "NULL");
}

/* fusion.dflare and loss through the API equal the backend's run() bit for bit. */
static void test_matches_backend(void) {
    static const struct {
        const char *op, *preset, *config, *attr, *value;
    } cases[] = {
        {"fusion.dflare", "tiny.dflare.train", "strategy=per_layer,rows=16,threads=1", NULL, NULL},
        {"fusion.dflare", "tiny.dflare.train", "strategy=all_layers,rows=1,threads=2", "backward",
         "1"},
        {"loss", "tiny.dflare.train", "strategy=online,threads=1", "scheme", "dpace"},
        {"linear", "tiny.dflare.train", "threads=1", "backward", "1"},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        problem p;
        problem_make(&p, cases[k].op, cases[k].preset, NULL, cases[k].attr, cases[k].value);
        void *ref[FT_MAX_TENSORS];
        backend_run(&ft_backend_cpu, &p, cases[k].config, ref);
        flaretune_context *ctx;
        FT_CHECK(flaretune_create(&ctx, "cpu") == FLARETUNE_OK, "%s", flaretune_message(ctx));
        bind_all(ctx, &p, NULL);
        char attrs[512];
        flaretune_status st =
            flaretune_run(ctx, cases[k].op, attrs_of(&p, attrs, sizeof attrs), cases[k].config);
        FT_CHECK(st == FLARETUNE_OK, "%s: %s", cases[k].op, flaretune_message(ctx));
        FT_CHECK(outputs_equal(&p, ref), "%s %s: outputs differ from the backend's", cases[k].op,
                 attrs);
        FT_CHECK(strcmp(flaretune_last_config_source(ctx), "config") == 0, "%s",
                 flaretune_last_config_source(ctx));
        FT_CHECK(flaretune_message(ctx)[0] == '\0', "message after success: %s",
                 flaretune_message(ctx));
        free_copies(ref);
        flaretune_destroy(ctx);
        ft_call_free(&p.c);
    }
}

/* Expect status st with `needle` in the message, and the outputs left as they were. */
#define EXPECT_FAIL(ctx, p, call, st, needle)                                                      \
    do {                                                                                           \
        flaretune_status got_ = (call);                                                            \
        FT_CHECK(got_ == (st), "%s: got %s (%s)", #call, flaretune_status_name(got_),              \
                 flaretune_message(ctx));                                                          \
        FT_CHECK(strstr(flaretune_message(ctx), needle) != NULL, "%s: message '%s' lacks '%s'",    \
                 #call, flaretune_message(ctx), needle);                                           \
        FT_CHECK(!strchr(flaretune_message(ctx), '\n'), "one line: %s", flaretune_message(ctx));  \
    } while (0)

static int all_zero(const ft_tensor *t) {
    const unsigned char *b = t->data;
    for (size_t i = 0; i < ft_tensor_nbytes(t); i++)
        if (b[i]) return 0;
    return 1;
}

static void test_bad_use(void) {
    problem p;
    problem_make(&p, "loss", "tiny.dflare.train", NULL, NULL, NULL);
    flaretune_context *ctx;
    FT_CHECK(flaretune_create(&ctx, "cpu") == FLARETUNE_OK, "%s", flaretune_message(ctx));
    int dh = ft_op_tensor(p.op, "dh");
    char attrs[512];
    const char *A = attrs_of(&p, attrs, sizeof attrs);
    /* an unbound input, then an unbound output */
    bind_all(ctx, &p, "labels");
    EXPECT_FAIL(ctx, &p, flaretune_run(ctx, "loss", A, NULL), FLARETUNE_EUNBOUND, "'labels'");
    bind_all(ctx, &p, NULL);
    FT_CHECK(flaretune_unbind(ctx, "dh") == FLARETUNE_OK, "%s", flaretune_message(ctx));
    EXPECT_FAIL(ctx, &p, flaretune_run(ctx, "loss", A, NULL), FLARETUNE_EUNBOUND, "'dh'");
    EXPECT_FAIL(ctx, &p, flaretune_unbind(ctx, "dh"), FLARETUNE_EUNBOUND, "'dh'");
    /* an output of the wrong shape */
    ft_tensor *t = p.c.t[dh];
    int64_t wrong[2] = {t->shape[0], t->shape[1] - 1};
    flaretune_bind(ctx, "dh", t->data, FLARETUNE_F32, 2, wrong, FLARETUNE_HOST);
    EXPECT_FAIL(ctx, &p, flaretune_run(ctx, "loss", A, NULL), FLARETUNE_ESHAPE, "'dh'");
    /* inputs that disagree with each other */
    bind_all(ctx, &p, NULL);
    int h = ft_op_tensor(p.op, "h");
    int64_t bad_h[2] = {p.c.t[h]->shape[0] - 1, p.c.t[h]->shape[1]};
    flaretune_bind(ctx, "h", p.c.t[h]->data, FLARETUNE_F32, 2, bad_h, FLARETUNE_HOST);
    EXPECT_FAIL(ctx, &p, flaretune_run(ctx, "loss", A, NULL), FLARETUNE_ESHAPE, "'");
    /* an index tensor bound as float */
    bind_all(ctx, &p, NULL);
    int lab = ft_op_tensor(p.op, "labels");
    flaretune_bind(ctx, "labels", p.c.t[lab]->data, FLARETUNE_F32, 1, p.c.t[lab]->shape,
                   FLARETUNE_HOST);
    EXPECT_FAIL(ctx, &p, flaretune_run(ctx, "loss", A, NULL), FLARETUNE_ESHAPE, "int32");
    bind_all(ctx, &p, NULL);
    /* a name the message quotes holds a line break: the message stays one line */
    EXPECT_FAIL(
        ctx, &p,
        flaretune_bind(ctx, "dh\nname", t->data, FLARETUNE_F32, 2, t->shape, FLARETUNE_HOST),
        FLARETUNE_EINVAL, "'dh name'");
    /* unknown op, attribute, config parameter or value; a config that cannot run here */
    EXPECT_FAIL(ctx, &p, flaretune_run(ctx, "los", NULL, NULL), FLARETUNE_EINVAL, "loss");
    EXPECT_FAIL(ctx, &p, flaretune_run(ctx, NULL, NULL, NULL), FLARETUNE_EINVAL, "op");
    EXPECT_FAIL(ctx, &p, flaretune_run(ctx, "loss", "colour=red", NULL), FLARETUNE_EINVAL,
                "colour");
    EXPECT_FAIL(ctx, &p, flaretune_run(ctx, "loss", "scheme", NULL), FLARETUNE_EINVAL, "scheme");
    /* an attribute given twice: refused, as the command line refuses it (the last one won) */
    EXPECT_FAIL(ctx, &p, flaretune_run(ctx, "loss", "B=4,scheme=uniform,scheme=decay", NULL),
                FLARETUNE_EINVAL, "'scheme' is given twice");
    EXPECT_FAIL(ctx, &p, flaretune_run(ctx, "loss", "gamma=7,, gamma=2", NULL), FLARETUNE_EINVAL,
                "'gamma' is given twice");
    EXPECT_FAIL(ctx, &p, flaretune_run(ctx, "loss", A, "chunk=7"), FLARETUNE_EINVAL, "chunk");
    EXPECT_FAIL(ctx, &p, flaretune_run(ctx, "loss", A, "warp=2"), FLARETUNE_EINVAL, "warp");
    EXPECT_FAIL(ctx, &p, flaretune_run(ctx, "loss", A, "parallel=blas,threads=1"),
                FLARETUNE_EINVAL, "cannot run");
    /* a label out of range: the op's own check, before anything runs */
    int32_t *labels = p.c.t[lab]->data, saved = labels[1];
    labels[1] = 1 << 30;
    EXPECT_FAIL(ctx, &p, flaretune_run(ctx, "loss", A, NULL), FLARETUNE_EINVAL, "labels");
    labels[1] = saved;
    /* bad bindings */
    int64_t one = 1;
    float f = 1;
    /* a name longer than any tensor's: refused with the whole list of names, like a short one */
    EXPECT_FAIL(ctx, &p,
                flaretune_bind(ctx, "a_tensor_name_longer_than_any_of_the_ops", &f, FLARETUNE_F32,
                               1, &one, FLARETUNE_HOST),
                FLARETUNE_EINVAL, "(x, w, g, f,");
    FT_CHECK(strstr(flaretune_message(ctx), ", dy)") != NULL, "%s", flaretune_message(ctx));
    EXPECT_FAIL(ctx, &p, flaretune_bind(ctx, "hh", &f, FLARETUNE_F32, 1, &one, FLARETUNE_HOST),
                FLARETUNE_EINVAL, "'hh'");
    EXPECT_FAIL(ctx, &p, flaretune_bind(ctx, "h", NULL, FLARETUNE_F32, 1, &one, FLARETUNE_HOST),
                FLARETUNE_EINVAL, "NULL");
    EXPECT_FAIL(ctx, &p, flaretune_bind(ctx, "h", &f, (flaretune_dtype)9, 1, &one, 0),
                FLARETUNE_EINVAL, "dtype");
    EXPECT_FAIL(ctx, &p, flaretune_bind(ctx, "h", &f, FLARETUNE_F32, 9, &one, 0),
                FLARETUNE_EINVAL, "rank");
    EXPECT_FAIL(ctx, &p, flaretune_bind(ctx, "h", &f, FLARETUNE_F32, 2, NULL, 0),
                FLARETUNE_EINVAL, "shape");
    /* Dimensions that each fit but whose product's bytes do not fit in 64 bits. */
    int64_t huge[3] = {(int64_t)1 << 30, (int64_t)1 << 17, (int64_t)1 << 17};
    EXPECT_FAIL(ctx, &p, flaretune_bind(ctx, "x", &f, FLARETUNE_F32, 3, huge, 0), FLARETUNE_EINVAL,
                "too large");
    int64_t neg = -3;
    EXPECT_FAIL(ctx, &p, flaretune_bind(ctx, "h", &f, FLARETUNE_F32, 1, &neg, 0),
                FLARETUNE_EINVAL, "-3");
    EXPECT_FAIL(ctx, &p, flaretune_bind(ctx, "h", &f, FLARETUNE_F32, 1, &one, FLARETUNE_DEVICE),
                FLARETUNE_EUNSUPPORTED, "cpu");
    void *dp = NULL;
    EXPECT_FAIL(ctx, &p, flaretune_device_alloc(ctx, 64, &dp), FLARETUNE_EUNSUPPORTED, "cpu");
    EXPECT_FAIL(ctx, &p, flaretune_load_profile(ctx, "/nonexistent/p.json", 0), FLARETUNE_EIO,
                "no such file");
    /* Refused before a byte is read: not read until memory runs out; an empty path says so. */
    EXPECT_FAIL(ctx, &p, flaretune_load_profile(ctx, "/dev/zero", 0), FLARETUNE_EIO,
                "not a regular file");
    EXPECT_FAIL(ctx, &p, flaretune_load_profile(ctx, "/", 0), FLARETUNE_EIO, "is a directory");
    EXPECT_FAIL(ctx, &p, flaretune_load_profile(ctx, "", 0), FLARETUNE_EINVAL,
                "the profile path is empty");
    /* nothing ran: the outputs are as they were (zero), and the context still works */
    for (int i = 0; i < p.op->ntensors; i++)
        if (p.c.t[i] && is_output(&p, i))
            FT_CHECK(all_zero(p.c.t[i]), "output %s written by a failed call",
                     p.op->tensors[i].name);
    FT_CHECK(flaretune_run(ctx, "loss", A, NULL) == FLARETUNE_OK, "%s", flaretune_message(ctx));
    FT_CHECK(!all_zero(p.c.t[dh]), "dh not written");
    FT_CHECK(strcmp(flaretune_last_config_source(ctx), "default") == 0, "%s",
             flaretune_last_config_source(ctx));
    flaretune_destroy(ctx);
    ft_call_free(&p.c);
}

/* A profile with one fusion.dflare entry at N=48 T=4 H=64 D=3 for `device`. */
static void write_profile(const char *path, const char *device, const char *config) {
    FILE *f = fopen(path, "w");
    fprintf(f,
            "{\"schema_version\":1,\"generator\":\"test_api\",\"entries\":[{"
            "\"op\":\"fusion.dflare\",\"backend\":\"cpu\",\"device\":\"%s\","
            "\"shape\":{\"N\":48,\"T\":4,\"H\":64,\"D\":3},"
            "\"attrs\":{\"eps\":\"1e-06\",\"backward\":\"0\",\"dtype\":\"f32\"},"
            "\"config\":{%s},"
            "\"stats\":{\"median_s\":1e-05,\"q1_s\":null,\"q3_s\":null,\"iqr_s\":null,"
            "\"min_s\":null,\"max_s\":null,\"mean_s\":null,\"stdev_s\":null,\"ci_rel\":null,"
            "\"samples\":10,\"batch\":1,\"converged\":true,\"total_s\":null},"
            "\"default\":null,\"speedup\":null,\"roofline_frac\":null,"
            "\"verification\":{\"max_rel_err\":1e-07,\"tolerance\":1e-05,\"output\":\"f\","
            "\"shape\":{\"N\":48,\"T\":4,\"H\":64,\"D\":3},\"reduced\":false},\"tie\":[],"
            "\"environment\":{},\"tuned_at\":\"2026-12-01T00:00:00Z\",\"strategy\":\"bayes\","
            "\"evaluations\":4,\"space_valid\":96}]}\n",
            device, config);
    fclose(f);
}

static void test_profile(void) {
    char dir[] = "/tmp/ft_api_XXXXXX";
    FT_CHECK(mkdtemp(dir) != NULL, "mkdtemp");
    char mine[128], other[128], bad[128], skipped[128];
    snprintf(mine, sizeof mine, "%s/mine.json", dir);
    snprintf(skipped, sizeof skipped, "%s/skipped.json", dir);
    snprintf(other, sizeof other, "%s/other.json", dir);
    snprintf(bad, sizeof bad, "%s/bad.json", dir);
    flaretune_context *ctx;
    FT_CHECK(flaretune_create(&ctx, "cpu") == FLARETUNE_OK, "%s", flaretune_message(ctx));
    const char *cfg = "\"strategy\":\"per_layer\",\"k\":2,\"rows\":16,\"stream\":0,"
                      "\"prefetch\":8,\"threads\":1";
    write_profile(mine, flaretune_device(ctx), cfg);
    write_profile(other, "cpu: Some Other CPU x 128 (Zen4)", cfg);
    write_profile(skipped, flaretune_device(ctx),
                  "\"strategy\":\"per_layer\",\"k\":2,\"rows\":3,\"stream\":0,"
                  "\"prefetch\":8,\"threads\":1");
    FILE *f = fopen(bad, "w");
    fputs("{\"schema_version\": 1, \"entries\": [", f);
    fclose(f);
    problem p;
    problem_make(&p, "fusion.dflare", "tiny.dflare.train", NULL, NULL, NULL);
    bind_all(ctx, &p, NULL);

    FT_CHECK(flaretune_load_profile(ctx, mine, 0) == FLARETUNE_OK, "%s", flaretune_message(ctx));
    FT_CHECK(flaretune_run(ctx, "fusion.dflare", NULL, NULL) == FLARETUNE_OK, "%s",
             flaretune_message(ctx));
    FT_CHECK(strcmp(flaretune_last_config_source(ctx), "profile") == 0, "%s",
             flaretune_last_config_source(ctx));
    const char *want = "strategy=per_layer,k=2,rows=16,stream=0,prefetch=8,threads=1";
    FT_CHECK(strcmp(flaretune_last_config(ctx), want) == 0, "%s", flaretune_last_config(ctx));
    /* the same bits as the backend with that config */
    void *api[FT_MAX_TENSORS], *ref[FT_MAX_TENSORS];
    copy_outputs(&p, api);
    backend_run(&ft_backend_cpu, &p, want, ref);
    int f_index = ft_op_tensor(p.op, "f");
    FT_CHECK(memcmp(api[f_index], ref[f_index], ft_tensor_nbytes(p.c.t[f_index])) == 0,
             "the profile's config gave other bits than the backend with it");
    free_copies(api);
    free_copies(ref);

    /* another shape: the nearest entry */
    problem q;
    problem_make(&q, "fusion.dflare", "tiny.dflare.train", "N=64", NULL, NULL);
    flaretune_unbind(ctx, NULL);
    bind_all(ctx, &q, NULL);
    FT_CHECK(flaretune_run(ctx, "fusion.dflare", NULL, NULL) == FLARETUNE_OK, "%s",
             flaretune_message(ctx));
    FT_CHECK(strcmp(flaretune_last_config_source(ctx), "profile (nearest)") == 0, "%s",
             flaretune_last_config_source(ctx));

    /* a profile for another device is refused unless asked for; a broken one is refused and
     * the loaded one kept */
    EXPECT_FAIL(ctx, &q, flaretune_load_profile(ctx, other, 0), FLARETUNE_EDEVICE, "Other CPU");
    EXPECT_FAIL(ctx, &q, flaretune_load_profile(ctx, bad, 0), FLARETUNE_EFORMAT, "bad.json");
    /* one whose only entry for this device was skipped: the message says why */
    EXPECT_FAIL(ctx, &q, flaretune_load_profile(ctx, skipped, 0), FLARETUNE_EDEVICE, "rows");
    FT_CHECK(strstr(flaretune_message(ctx), "1 entry skipped") != NULL, "%s",
             flaretune_message(ctx));
    EXPECT_FAIL(ctx, &q, flaretune_load_profile(ctx, mine, 8), FLARETUNE_EINVAL, "flags");
    FT_CHECK(flaretune_run(ctx, "fusion.dflare", NULL, NULL) == FLARETUNE_OK, "%s",
             flaretune_message(ctx));
    FT_CHECK(strncmp(flaretune_last_config_source(ctx), "profile", 7) == 0, "kept: %s",
             flaretune_last_config_source(ctx));
    FT_CHECK(flaretune_load_profile(ctx, other, FLARETUNE_ANY_DEVICE) == FLARETUNE_OK, "%s",
             flaretune_message(ctx));
    FT_CHECK(flaretune_run(ctx, "fusion.dflare", NULL, NULL) == FLARETUNE_OK, "%s",
             flaretune_message(ctx));
    FT_CHECK(strcmp(flaretune_last_config(ctx), want) == 0, "%s", flaretune_last_config(ctx));
    FT_CHECK(flaretune_load_profile(ctx, NULL, 0) == FLARETUNE_OK, "unload");
    FT_CHECK(flaretune_run(ctx, "fusion.dflare", NULL, NULL) == FLARETUNE_OK, "%s",
             flaretune_message(ctx));
    FT_CHECK(strcmp(flaretune_last_config_source(ctx), "default") == 0, "%s",
             flaretune_last_config_source(ctx));
    flaretune_destroy(ctx);
    ft_call_free(&p.c);
    ft_call_free(&q.c);
    unlink(mine);
    unlink(other);
    unlink(bad);
    unlink(skipped);
    rmdir(dir);
}

/* A context on fewer CPUs than the machine has (an affinity mask) runs on another device: a
 * profile tuned on all of them is refused, saying so (FLARETUNE_ANY_DEVICE takes it); the
 * mask restored, the same profile loads. */
static void test_profile_affinity(void) {
    cpu_set_t all;
    if (sched_getaffinity(0, sizeof all, &all) != 0 || CPU_COUNT(&all) < 2 ||
        CPU_COUNT(&all) != sysconf(_SC_NPROCESSORS_ONLN)) {
        printf("    skipped: this process may use one CPU, or already fewer than the machine's\n");
        return;
    }
    char dir[] = "/tmp/ft_api_XXXXXX";
    FT_CHECK(mkdtemp(dir) != NULL, "mkdtemp");
    char path[128];
    snprintf(path, sizeof path, "%s/whole.json", dir);
    flaretune_context *whole, *pinned;
    FT_CHECK(flaretune_create(&whole, "cpu") == FLARETUNE_OK, "%s", flaretune_message(whole));
    write_profile(path, flaretune_device(whole),
                  "\"strategy\":\"per_layer\",\"k\":2,\"rows\":16,\"stream\":0,"
                  "\"prefetch\":8,\"threads\":1");
    FT_CHECK(ft_test_pin_first(&all) >= 0, "pinning to one CPU");
    FT_CHECK(flaretune_create(&pinned, "cpu") == FLARETUNE_OK, "%s", flaretune_message(pinned));
    FT_CHECK(strstr(flaretune_device(pinned), " x 1 (") &&
                 strcmp(flaretune_device(pinned), flaretune_device(whole)) != 0,
             "pinned: '%s', whole: '%s'", flaretune_device(pinned), flaretune_device(whole));
    char want[128];
    snprintf(want, sizeof want, "tuned on all %d CPUs of this machine", CPU_COUNT(&all));
    EXPECT_FAIL(pinned, NULL, flaretune_load_profile(pinned, path, 0), FLARETUNE_EDEVICE, want);
    EXPECT_FAIL(pinned, NULL, flaretune_load_profile(pinned, path, 0), FLARETUNE_EDEVICE,
                "this process may use 1 (its affinity");
    FT_CHECK(flaretune_load_profile(pinned, path, FLARETUNE_ANY_DEVICE) == FLARETUNE_OK, "%s",
             flaretune_message(pinned));
    sched_setaffinity(0, sizeof all, &all);
    FT_CHECK(flaretune_load_profile(whole, path, 0) == FLARETUNE_OK, "%s",
             flaretune_message(whole));
    flaretune_destroy(whole);
    flaretune_destroy(pinned);
    unlink(path);
    rmdir(dir);
}

/* bf16 host tensors: widened, run in float32, rounded back. */
static void test_bf16_host(void) {
    problem p;
    problem_make(&p, "fusion.dflare", "tiny.dflare.train", NULL, NULL, NULL);
    const char *cfg = "threads=1";
    /* the float32 problem on bf16-rounded inputs is the reference */
    for (int i = 0; i < p.op->ntensors; i++)
        if (p.c.t[i] && !is_output(&p, i)) ft_tensor_round_bf16(p.c.t[i]);
    void *ref[FT_MAX_TENSORS];
    backend_run(&ft_backend_cpu, &p, cfg, ref);
    flaretune_context *ctx;
    FT_CHECK(flaretune_create(&ctx, "cpu") == FLARETUNE_OK, "%s", flaretune_message(ctx));
    uint16_t *h[FT_MAX_TENSORS] = {0};
    for (int i = 0; i < p.op->ntensors; i++) {
        ft_tensor *t = p.c.t[i];
        if (!t) continue;
        int64_t n = ft_tensor_numel(t);
        h[i] = calloc((size_t)n, 2);
        if (!is_output(&p, i))
            for (int64_t k = 0; k < n; k++)
                h[i][k] = ft_bf16_from_f32(((float *)t->data)[k]);
        flaretune_bind(ctx, p.op->tensors[i].name, h[i], FLARETUNE_BF16, t->rank, t->shape,
                       FLARETUNE_HOST);
    }
    FT_CHECK(flaretune_run(ctx, "fusion.dflare", NULL, cfg) == FLARETUNE_OK, "%s",
             flaretune_message(ctx));
    int f = ft_op_tensor(p.op, "f");
    int64_t n = ft_tensor_numel(p.c.t[f]), bad = 0;
    for (int64_t k = 0; k < n; k++)
        bad += h[f][k] != ft_bf16_from_f32(((float *)ref[f])[k]);
    FT_CHECK(bad == 0, "%lld of %lld bf16 outputs differ", (long long)bad, (long long)n);
    for (int i = 0; i < FT_MAX_TENSORS; i++)
        free(h[i]);
    free_copies(ref);
    flaretune_destroy(ctx);
    ft_call_free(&p.c);
}

/* A context on the emulator, or NULL (said) where it cannot run here. */
static flaretune_context *emu_context(void) {
    flaretune_context *ctx;
    if (flaretune_create(&ctx, "cuda-emu") == FLARETUNE_OK) return ctx;
    fprintf(stderr, "  (cuda-emu cannot run here: %s)\n", flaretune_message(ctx));
    flaretune_destroy(ctx);
    return NULL;
}

/* Device pointers on the emulator: the same bits as host pointers, float32 and bf16, at the
 * tiny preset with `set` (NULL: as it is). */
static void device_emu_at(const char *set) {
    flaretune_context *ctx = emu_context();
    if (!ctx) return;
    problem p;
    problem_make(&p, "fusion.dflare", "tiny.dflare.train", set, NULL, NULL);
    bind_all(ctx, &p, NULL);
    FT_CHECK(flaretune_run(ctx, "fusion.dflare", NULL, NULL) == FLARETUNE_OK, "%s",
             flaretune_message(ctx));
    void *ref[FT_MAX_TENSORS];
    copy_outputs(&p, ref);
    for (int bf16 = 0; bf16 <= 1; bf16++) {
        void *d[FT_MAX_TENSORS] = {0};
        size_t esz = bf16 ? 2 : 4;
        for (int i = 0; i < p.op->ntensors; i++) {
            ft_tensor *t = p.c.t[i];
            if (!t) continue;
            int64_t n = ft_tensor_numel(t);
            FT_CHECK(flaretune_device_alloc(ctx, (size_t)n * esz, &d[i]) == FLARETUNE_OK, "%s",
                     flaretune_message(ctx));
            void *host = t->data;
            uint16_t *b = NULL;
            if (bf16) {
                b = malloc((size_t)n * 2);
                for (int64_t k = 0; k < n; k++)
                    b[k] = ft_bf16_from_f32(((float *)t->data)[k]);
                host = b;
            }
            flaretune_device_copy(ctx, d[i], host, (size_t)n * esz, FLARETUNE_HOST_TO_DEVICE);
            free(b);
            flaretune_bind(ctx, p.op->tensors[i].name, d[i],
                           bf16 ? FLARETUNE_BF16 : FLARETUNE_F32, t->rank, t->shape,
                           FLARETUNE_DEVICE);
        }
        FT_CHECK(flaretune_run(ctx, "fusion.dflare", NULL, NULL) == FLARETUNE_OK, "%s",
                 flaretune_message(ctx));
        int f = ft_op_tensor(p.op, "f");
        int64_t n = ft_tensor_numel(p.c.t[f]), bad = 0;
        void *out = malloc((size_t)n * esz);
        flaretune_device_copy(ctx, out, d[f], (size_t)n * esz, FLARETUNE_DEVICE_TO_HOST);
        if (!bf16) {
            bad = memcmp(out, ref[f], (size_t)n * 4) != 0;
        } else {
            /* the host path with dtype=bf16: the reference of the device's bf16 storage */
            problem r;
            problem_make(&r, "fusion.dflare", "tiny.dflare.train", set, "dtype", "bf16");
            FT_CHECK(ft_backend_cuda_emu.run(&r.c, NULL, NULL) == FT_OK, "bf16 host run");
            const float *rf = r.c.t[f]->data;
            for (int64_t k = 0; k < n; k++)
                bad += ((uint16_t *)out)[k] != ft_bf16_from_f32(rf[k]);
            ft_call_free(&r.c);
        }
        FT_CHECK(bad == 0, "device %s outputs differ from the host path's",
                 bf16 ? "bf16" : "f32");
        /* a device tensor in another dtype than the call stores */
        if (bf16) {
            int x = ft_op_tensor(p.op, "x");
            /* over the bf16 buffer, float32 runs past its end: refused as it is bound */
            EXPECT_FAIL(ctx, &p,
                        flaretune_bind(ctx, "x", d[x], FLARETUNE_F32, p.c.t[x]->rank,
                                       p.c.t[x]->shape, FLARETUNE_DEVICE),
                        FLARETUNE_EINVAL, "past its end");
            void *xf = NULL;
            FT_CHECK(flaretune_device_alloc(ctx, ft_tensor_nbytes(p.c.t[x]), &xf) == FLARETUNE_OK,
                     "%s", flaretune_message(ctx));
            flaretune_device_copy(ctx, xf, p.c.t[x]->data, ft_tensor_nbytes(p.c.t[x]),
                                  FLARETUNE_HOST_TO_DEVICE);
            d[FT_MAX_TENSORS - 1] = xf; /* freed with the others */
            flaretune_bind(ctx, "x", xf, FLARETUNE_F32, p.c.t[x]->rank, p.c.t[x]->shape,
                           FLARETUNE_DEVICE);
            EXPECT_FAIL(ctx, &p, flaretune_run(ctx, "fusion.dflare", "dtype=bf16", NULL),
                        FLARETUNE_ESHAPE, "'x'");
            /* a failed run leaves the last successful run's config and its source alone */
            char cfg_before[512], src_before[32];
            snprintf(cfg_before, sizeof cfg_before, "%s", flaretune_last_config(ctx));
            snprintf(src_before, sizeof src_before, "%s", flaretune_last_config_source(ctx));
            EXPECT_FAIL(ctx, &p,
                        flaretune_run(ctx, "fusion.dflare", "dtype=bf16", "strategy=per_layer"),
                        FLARETUNE_ESHAPE, "'x'");
            FT_CHECK(!strcmp(flaretune_last_config(ctx), cfg_before) &&
                         !strcmp(flaretune_last_config_source(ctx), src_before) &&
                         !strcmp(src_before, "default"),
                     "after a failed run: %s (%s), before: %s (%s)", flaretune_last_config(ctx),
                     flaretune_last_config_source(ctx), cfg_before, src_before);
        }
        free(out);
        for (int i = 0; i < FT_MAX_TENSORS; i++)
            if (d[i]) flaretune_device_free(ctx, d[i]);
    }
    free_copies(ref);
    flaretune_destroy(ctx);
    ft_call_free(&p.c);
}

/* Device memory misused on the emulator: a free of what is no buffer (or a second free) and a
 * copy or binding past a buffer's end are refused with a status, and the process goes on (the
 * free aborted it, the copy ended it or read past the buffer unsaid). */
static void test_device_bounds(void) {
    flaretune_context *ctx = emu_context();
    if (!ctx) return;
    problem p;
    problem_make(&p, "fusion.dflare", "tiny.dflare.train", NULL, NULL, NULL);
    float host[64];
    for (int i = 0; i < 64; i++)
        host[i] = (float)i + 0.5f;
    void *d = NULL, *big = NULL;
    FT_CHECK(flaretune_device_alloc(ctx, 64, &d) == FLARETUNE_OK &&
                 flaretune_device_alloc(ctx, 8192, &big) == FLARETUNE_OK,
             "%s", flaretune_message(ctx));
    EXPECT_FAIL(ctx, &p, flaretune_device_copy(ctx, d, host, 128, FLARETUNE_HOST_TO_DEVICE),
                FLARETUNE_EINVAL, "128 bytes from byte 0 of a 64-byte device buffer");
    EXPECT_FAIL(ctx, &p, flaretune_device_copy(ctx, host, big, 16384, FLARETUNE_DEVICE_TO_HOST),
                FLARETUNE_EINVAL, "the source");
    EXPECT_FAIL(ctx, &p,
                flaretune_device_copy(ctx, (char *)d + 48, big, 32, FLARETUNE_DEVICE_TO_DEVICE),
                FLARETUNE_EINVAL, "the destination: 32 bytes from byte 48");
    FT_CHECK(flaretune_device_copy(ctx, d, host, 64, FLARETUNE_HOST_TO_DEVICE) == FLARETUNE_OK,
             "a copy that fits: %s", flaretune_message(ctx));
    float back = 0;
    FT_CHECK(flaretune_device_copy(ctx, &back, (char *)d + 60, 4, FLARETUNE_DEVICE_TO_HOST) ==
                     FLARETUNE_OK &&
                 back == 15.5f,
             "the last float of the buffer: %g (%s)", back, flaretune_message(ctx));
    /* a device tensor larger than the buffer it points into */
    int64_t shape[1] = {17};
    EXPECT_FAIL(ctx, &p, flaretune_bind(ctx, "g", d, FLARETUNE_F32, 1, shape, FLARETUNE_DEVICE),
                FLARETUNE_EINVAL, "'g': 68 bytes from byte 0 of a 64-byte device buffer");
    shape[0] = 16;
    FT_CHECK(flaretune_bind(ctx, "g", d, FLARETUNE_F32, 1, shape, FLARETUNE_DEVICE) == FLARETUNE_OK,
             "a device tensor that fits: %s", flaretune_message(ctx));
    flaretune_unbind(ctx, NULL);
    EXPECT_FAIL(ctx, &p, flaretune_device_free(ctx, host), FLARETUNE_EINVAL,
                "no buffer flaretune_device_alloc gave");
    FT_CHECK(flaretune_device_free(ctx, d) == FLARETUNE_OK, "%s", flaretune_message(ctx));
    EXPECT_FAIL(ctx, &p, flaretune_device_free(ctx, d), FLARETUNE_EINVAL, "freed already");
    FT_CHECK(flaretune_device_free(ctx, NULL) == FLARETUNE_OK, "freeing NULL does nothing");
    FT_CHECK(flaretune_device_free(ctx, big) == FLARETUNE_OK, "%s", flaretune_message(ctx));
    /* one left allocated: flaretune_destroy frees it (a sanitizer build reports it otherwise) */
    void *left = NULL;
    FT_CHECK(flaretune_device_alloc(ctx, 4096, &left) == FLARETUNE_OK, "%s",
             flaretune_message(ctx));
    flaretune_destroy(ctx);
    ft_call_free(&p.c);
}

static void test_device_emu(void) {
    device_emu_at(NULL);
    /* The host path's bf16 crosses in pieces of 1 Mi elements (cuda_backend.c): x (N*T*H =
     * 1399040) and f (D*N*H = 1049280) take a whole piece and part of another. */
    device_emu_at("N=5465");
}

/* Threads: one context used by two threads at once (its lock serialises them), and two
 * contexts in two threads; every result equal to the serial one. */
typedef struct {
    flaretune_context *ctx;
    problem *p;
    void **ref;
    int bad;
} worker;

static void *work(void *arg) {
    worker *w = arg;
    for (int r = 0; r < 8; r++) {
        if (flaretune_run(w->ctx, "fusion.dflare", NULL, "threads=1") != FLARETUNE_OK ||
            !outputs_equal(w->p, w->ref))
            w->bad++;
    }
    return NULL;
}

static void test_threads(void) {
    problem p[2];
    void *ref[2][FT_MAX_TENSORS];
    flaretune_context *ctx[2];
    for (int k = 0; k < 2; k++) {
        problem_make(&p[k], "fusion.dflare", "tiny.dflare.train", NULL, NULL, NULL);
        backend_run(&ft_backend_cpu, &p[k], "threads=1", ref[k]);
        flaretune_create(&ctx[k], "cpu");
        bind_all(ctx[k], &p[k], NULL);
    }
    worker w[2] = {{ctx[0], &p[0], ref[0], 0}, {ctx[1], &p[1], ref[1], 0}};
    pthread_t th[2];
    for (int k = 0; k < 2; k++)
        pthread_create(&th[k], NULL, work, &w[k]);
    for (int k = 0; k < 2; k++)
        pthread_join(th[k], NULL);
    FT_CHECK(w[0].bad == 0 && w[1].bad == 0, "two contexts: %d, %d bad runs", w[0].bad, w[1].bad);
    worker same[2] = {{ctx[0], &p[0], ref[0], 0}, {ctx[0], &p[0], ref[0], 0}};
    for (int k = 0; k < 2; k++)
        pthread_create(&th[k], NULL, work, &same[k]);
    for (int k = 0; k < 2; k++)
        pthread_join(th[k], NULL);
    FT_CHECK(same[0].bad == 0 && same[1].bad == 0, "one context: %d, %d bad runs", same[0].bad,
             same[1].bad);
    for (int k = 0; k < 2; k++) {
        free_copies(ref[k]);
        flaretune_destroy(ctx[k]);
        ft_call_free(&p[k].c);
    }
}

int main(void) {
    FT_RUN(test_version);
    FT_RUN(test_create_fails_cleanly);
    FT_RUN(test_matches_backend);
    FT_RUN(test_bad_use);
    FT_RUN(test_profile);
    FT_RUN(test_profile_affinity);
    FT_RUN(test_bf16_host);
    FT_RUN(test_device_emu);
    FT_RUN(test_device_bounds);
    FT_RUN(test_threads);
    return ft_test_finish();
}
