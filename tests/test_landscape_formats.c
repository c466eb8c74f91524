/* test_landscape_formats.c: landscapes read from Kernel Tuner caches and FAIR T4 files
 * (tuner/landscape_formats.c), and event logs written in those formats and read back
 * (tuner/landscape_export.c). The hand-checked files are in tests/data/landscapes/. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "core/json.h"
#include "op/op_json.h"
#include "tuner/replay.h"
#include "ft_problem.h"
#include "ft_test.h"

#define DATA FT_SOURCE_DIR "/tests/data/landscapes/"

static void temp_path(char *buf, size_t n, const char *suffix) {
    temp_file(buf, n, "formats", suffix);
}

static int load(const char *path, ft_landscape *l) {
    ft_err err = {0};
    ft_status s = ft_landscape_load(path, l, &err);
    FT_CHECK(s == FT_OK, "%s", err.msg);
    return s == FT_OK;
}

static void cand_text(const ft_landscape *l, int c, char *buf, size_t n) {
    ft_config_format(&l->space, &l->cands[c], buf, n);
}

/* The five configurations of kt-small.json / t4-small.json, in space order. */
static const char *const small_cands[] = {"block_size_x=16,layout=row", "block_size_x=16,layout=col",
                                          "block_size_x=32,layout=row", "block_size_x=32,layout=col",
                                          "block_size_x=64,layout=col"};
static const double small_score[] = {3e-3, INFINITY, 2e-3, 2.5e-3, 1.5e-3};

/* format: the format the file must be read as (NULL: not checked). */
static void check_small(const ft_landscape *l, const double *cost, const char *format) {
    FT_CHECK(l->op == NULL && l->backend == NULL, "a file names no op");
    FT_CHECK(l->ncands == 5, "%d candidates", l->ncands);
    FT_CHECK(l->nrejected == 1, "%d failed", l->nrejected);
    FT_CHECK(l->best == 4, "best %d", l->best);
    FT_CHECK(l->def == -1, "default %d", l->def);
    FT_CHECK(l->space.nparams == 2 && l->params[0].labels == NULL && l->params[1].labels,
             "block_size_x numeric, layout named");
    FT_CHECK(l->ncost == 5 && l->npredicted == 0 && isnan(l->noise_ci_rel) &&
                 isnan(l->confirm_ratio),
             "costs %d, predicted %d", l->ncost, l->npredicted);
    for (int c = 0; c < l->ncands && c < 5; c++) {
        char text[256];
        cand_text(l, c, text, sizeof text);
        FT_CHECK(strcmp(text, small_cands[c]) == 0, "candidate %d is %s", c, text);
        if (isinf(small_score[c]))
            FT_CHECK(isinf(l->score[c]), "candidate %d scores %g", c, l->score[c]);
        else
            FT_CHECK_NEAR(l->score[c], small_score[c], 1e-12);
        FT_CHECK_NEAR(l->cost[c], cost[c], 1e-12);
        FT_CHECK(isnan(l->ci_rel[c]), "ci_rel");
    }
    if (format) FT_CHECK(strcmp(l->format, format) == 0, "format %s", l->format);
}

/* Replay minimises time. A file tuned for another objective (GFLOP/s, higher is better) is read
 * by its entries' times: the optimum is the 1 ms configuration, not the 3 ms one the GFLOP/s
 * would make it as times. Python's bare NaN and infinities parse; a NaN time is a failure, a NaN
 * compile time an unknown cost. A name's control characters are not printed. */
static int load_data(const char *file, ft_landscape *l) {
    char path[512];
    snprintf(path, sizeof path, DATA "%s", file);
    return load(path, l);
}

static void test_objectives_and_nonfinite(void) {
    static const char *const files[] = {"kt-gflops.json", "t4-gflops.json"};
    for (int i = 0; i < 2; i++) {
        ft_landscape l;
        if (!load_data(files[i], &l)) continue;
        char text[256] = "";
        if (l.best >= 0) cand_text(&l, l.best, text, sizeof text);
        FT_CHECK(l.ncands == 3 && strcmp(text, "block_size_x=32") == 0 && l.score[l.best] == 1e-3,
                 "%s: best %s", files[i], text);
        ft_landscape_free(&l);
    }
    ft_landscape l;
    if (!load(DATA "kt-nan.json", &l)) return;
    char text[256] = "";
    if (l.best >= 0) cand_text(&l, l.best, text, sizeof text);
    FT_CHECK(l.ncands == 3 && l.nrejected == 1 && strcmp(text, "block_size_x=64") == 0,
             "NaN: %d candidates, %d failed, best %s", l.ncands, l.nrejected, text);
    FT_CHECK(!strpbrk(l.kernel, "\n\x1b") && strstr(l.kernel, "NaN"), "kernel name %s", l.kernel);
    /* A compile time recorded as NaN was spent but is not known: the cost is unknown, not the
     * run alone; a known one adds to the run (5 ms compiling + the 2 ms time). */
    FT_CHECK(l.ncands == 3 && isnan(l.cost[0]) && fabs(l.cost[2] - 0.007) < 1e-12,
             "costs: %g (a NaN compile time), %g", l.ncands ? l.cost[0] : 0,
             l.ncands == 3 ? l.cost[2] : 0);
    ft_landscape_free(&l);
}

static void test_kt_small(void) {
    ft_landscape l;
    if (!load(DATA "kt-small.json", &l)) return;
    /* compile + verification + (benchmark_time, else sum(times), else time), in ms */
    const double cost[] = {0.056, 0.020, 0.115, 0.0025, 0.004};
    check_small(&l, cost, "kt-cache");
    FT_CHECK(strcmp(l.device, "Test GPU") == 0 && strcmp(l.kernel, "small_kernel") == 0 &&
                 strcmp(l.problem_size, "[1024,2]") == 0,
             "%s / %s / %s", l.device, l.kernel, l.problem_size);
    char what[256];
    ft_landscape_describe(&l, what, sizeof what);
    FT_CHECK(strstr(what, "small_kernel on Test GPU") != NULL, "%s", what);
    /* The export names no op, and says where the landscape came from. */
    json_t *doc = ft_landscape_to_json(&l, "kt-small.json");
    FT_CHECK(doc && json_is_null(json_object_get(doc, "op")) &&
                 json_is_null(json_object_get(doc, "backend")),
             "op and backend null");
    FT_CHECK(doc && strcmp(json_string_value(json_object_get(doc, "source")), "kt-cache") == 0 &&
                 strcmp(json_string_value(json_object_get(doc, "kernel")), "small_kernel") == 0,
             "source and kernel");
    json_decref(doc);
    /* Prune and predicted order: nothing predicted. */
    ft_prune_outcome po;
    ft_landscape_prune(&l, 2, 0.05, &po);
    FT_CHECK(po.kept == 5 && po.best_kept, "prune kept %d", po.kept);
    FT_CHECK(ft_landscape_first_within_predicted(&l, 0.05) == -1, "no predicted order");
    /* Exhaustive replay in space order: the optimum is the last candidate. */
    ft_replay_opts o;
    ft_replay_opts_default(&o);
    ft_replay_result r;
    ft_err err = {0};
    FT_CHECK(ft_replay_run(&l, &o, &r, &err) == FT_OK, "%s", err.msg);
    FT_CHECK(r.to_target == 5 && fabs(r.time_to_target - 0.1975) < 1e-12, "%d evaluations, %g s",
             r.to_target, r.time_to_target);
    ft_landscape_free(&l);
}

static void test_kt_unfinished(void) {
    ft_landscape l;
    if (!load(DATA "kt-unfinished.json", &l)) return;
    FT_CHECK(l.ncands == 2 && l.nrejected == 1 && l.best == 1, "%d candidates, %d failed, best %d",
             l.ncands, l.nrejected, l.best);
    FT_CHECK(l.ncands == 2 && l.score[1] == 2e-3 && isinf(l.score[0]), "scores");
    ft_landscape_free(&l);
}

/* A cache a writer did not finish, as text: Kernel Tuner appends an entry a line and closes the
 * cache and the document at the end. Every whole entry is read, however many closing braces are
 * missing and whether its last line holds a bare NaN; a last line cut short is dropped; a whole
 * last line is never dropped to make a broken file parse. */
static void test_kt_cut_short(void) {
#define KT_HEAD                                                                                    \
    "{\n\"tune_params_keys\": [\"a\"],\n\"tune_params\": {\"a\": [1, 2, 3]},\n\"cache\": {\n"
#define KT_1_2 "\"1\": {\"a\": 1, \"time\": 5.0},\n\"2\": {\"a\": 2, \"time\": 4.0},\n"
    static const struct {
        const char *text;
        int ncands, nrejected, best; /* best: the value of a; 0: refused */
    } cases[] = {
        {KT_HEAD KT_1_2 "\"3\": {\"a\": 3, \"time\": 1.0}}\n}", 3, 0, 3},          /* whole */
        {KT_HEAD KT_1_2 "\"3\": {\"a\": 3, \"time\": 1.0}}", 3, 0, 3},             /* no last } */
        {KT_HEAD KT_1_2 "\"3\": {\"a\": 3, \"time\": 1.0},", 3, 0, 3},             /* unclosed */
        {KT_HEAD KT_1_2 "\"3\": {\"a\": 3, \"time\": 1.0, \"x\": NaN},", 3, 0, 3}, /* and a NaN */
        {KT_HEAD KT_1_2 "\"3\": {\"a\": 3, \"time\": NaN},", 3, 1, 2},             /* failed */
        {KT_HEAD KT_1_2 "\"3\": {\"a\": 3, \"ti", 2, 0, 2},                        /* cut short */
        {KT_HEAD "\"1\": {\"a\": 1, \"time\": 5.0}}},\n\"2\": {\"a\": 2, \"time\": 4.0},", 0, 0,
         0}, /* broken before a whole last line */
    };
#undef KT_HEAD
#undef KT_1_2
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        ft_landscape l;
        ft_err err = {0};
        ft_status s =
            ft_landscape_from_buffer(cases[i].text, strlen(cases[i].text), "cut.json", &l, &err);
        if (!cases[i].best) {
            FT_CHECK(s == FT_EFORMAT && strstr(err.msg, "cut.json") == err.msg,
                     "case %zu: refused, not cut to parse: status %d, %s", i, s, err.msg);
            if (s == FT_OK) ft_landscape_free(&l);
            continue;
        }
        FT_CHECK(s == FT_OK, "case %zu: %s", i, err.msg);
        if (s != FT_OK) continue;
        char text[64] = "", want[16];
        if (l.best >= 0) cand_text(&l, l.best, text, sizeof text);
        snprintf(want, sizeof want, "a=%d", cases[i].best);
        FT_CHECK(l.ncands == cases[i].ncands && l.nrejected == cases[i].nrejected &&
                     strcmp(text, want) == 0,
                 "case %zu: %d candidates (%d failed), best %s; want %d (%d), %s", i, l.ncands,
                 l.nrejected, text, cases[i].ncands, cases[i].nrejected, want);
        ft_landscape_free(&l);
    }
}

/* What a file says that flaretune must not read as something else: each refused in one line
 * naming the file (a parameter named twice would drop another; two long values that differ past
 * what is compared would read as one; a control character would reach the terminal; "0x1" is no
 * number here), and a number written as a decimal string is that number. */
static void test_file_text(void) {
    char longv[600];
    snprintf(
        longv, sizeof longv,
        "{\"tune_params\":{\"o\":[\"%0130d\",\"%0130dB\"]},\"cache\":{\"%0130dB\":{\"time\":1}}}",
        0, 0, 0);
    const struct {
        const char *text, *says;
    } bad[] = {
        {"{\"tune_params_keys\":[\"a\",\"a\"],\"tune_params\":{\"a\":[1,2],\"b\":[3,4]},"
         "\"cache\":{\"1,1\":{\"time\":1}}}",
         "tune_params_keys lists a twice"},
        {longv, "is longer than 120 characters"},
        {"{\"tune_params\":{\"a\\u001b[31m\":[1,2]},\"cache\":{\"1\":{\"time\":1}}}",
         "parameter \"a?[31m\" holds a control character"},
        {"{\"tune_params\":{\"a\":[\"x\\ny\",\"z\"]},\"cache\":{\"z\":{\"time\":1}}}",
         "value \"x?y\" holds a control character"},
        /* U+009B, CSI in the C1 controls: a terminal may take it as ESC [ */
        {"{\"tune_params\":{\"a\":[\"x\\u009b31my\",\"z\"]},\"cache\":{\"z\":{\"time\":1}}}",
         "value \"x?31my\" holds a control character"},
        {"{\"tune_params\":{\"a\":[1,2]},\"cache\":{\"0x1\":{\"time\":1}}}",
         "0x1 is not one of the values"},
        {"{\"tune_params\":{\"a\":[\"16\",\"16.0\"]},\"cache\":{\"16\":{\"time\":1}}}",
         "parameter a lists the value 16.0 twice"},
        {"{\"schema_version\":\"1.0.0\",\"results\":[{\"configuration\":{\"a\":\"2\"},"
         "\"invalidity\":\"correct\",\"measurements\":[{\"name\":\"time\",\"value\":2}]},"
         "{\"configuration\":{\"a\":\"2.0\"},\"invalidity\":\"correct\",\"measurements\":[{"
         "\"name\":\"time\",\"value\":5}]}]}",
         "entries results[0] and results[1] are the same configuration"},
        {"{\"tune_params\":{},\"cache\":{\"1\":{\"time\":1}}}", "0 tunable parameters"},
        {"{\"schema_version\":\"2.0.0\",\"results\":[{\"configuration\":{\"a\":1},"
         "\"invalidity\":\"correct\",\"measurements\":[{\"name\":\"time\",\"value\":2}]}]}",
         "schema_version 2.0.0: flaretune reads T4 results of schema 1.x"},
        {"{\"schema_version\":\"1.0.0\",\"results\":[{\"configuration\":{\"a\":1},"
         "\"invalidity\":\"correct\",\"correctness\":0,\"measurements\":[{\"name\":\"time\","
         "\"value\":2}]}]}",
         "results[0] is \"correct\" but its correctness is 0, not 1"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ft_landscape l;
        ft_err err = {0};
        ft_status s =
            ft_landscape_from_buffer(bad[i].text, strlen(bad[i].text), "f.json", &l, &err);
        FT_CHECK(s == FT_EFORMAT && strstr(err.msg, "f.json: ") == err.msg &&
                     strstr(err.msg, bad[i].says) && !strpbrk(err.msg, "\n\x1b"),
                 "case %zu: status %d: %s", i, s, err.msg);
        if (s == FT_OK) ft_landscape_free(&l);
    }
    /* 120 characters of two bytes each are 120 characters, not 240 */
    char wide[2048] = "{\"tune_params\":{\"a\":[\"", *w = wide + strlen(wide);
    for (int i = 0; i < 120; i++)
        w += sprintf(w, "\xc3\xa9");
    snprintf(w, sizeof wide - (size_t)(w - wide), "\",\"z\"]},\"cache\":{\"z\":{\"time\":1}}}");
    {
        ft_landscape lw;
        ft_err ew = {0};
        FT_CHECK(ft_landscape_from_buffer(wide, strlen(wide), "f.json", &lw, &ew) == FT_OK,
                 "120 two-byte characters: %s", ew.msg);
        if (!ew.status) ft_landscape_free(&lw);
    }
    /* "16.0" in an entry is its key's 16; "8" among 2 and 4 is the number 8, in order. */
    const char *agree = "{\"tune_params\":{\"a\":[\"16\",\"32\"]},\"cache\":{\"16\":{\"a\":"
                        "\"16.0\",\"time\":1}}}";
    ft_landscape l;
    ft_err err = {0};
    FT_CHECK(ft_landscape_from_buffer(agree, strlen(agree), "f.json", &l, &err) == FT_OK &&
                 l.params[0].labels == NULL && l.params[0].values[0] == 16,
             "16 and \"16.0\": %s", err.msg);
    if (!err.msg[0]) ft_landscape_free(&l);
    const char *t4 = "{\"schema_version\":\"1.0.0\",\"results\":["
                     "{\"configuration\":{\"a\":\"8\"},\"invalidity\":\"correct\",\"measurements\":"
                     "[{\"name\":\"time\",\"value\":1}]},"
                     "{\"configuration\":{\"a\":2},\"invalidity\":\"correct\",\"measurements\":"
                     "[{\"name\":\"time\",\"value\":5}]},"
                     "{\"configuration\":{\"a\":4},\"invalidity\":\"correct\",\"measurements\":"
                     "[{\"name\":\"time\",\"value\":6}]}]}";
    err.msg[0] = '\0';
    FT_CHECK(ft_landscape_from_buffer(t4, strlen(t4), "f.json", &l, &err) == FT_OK &&
                 l.params[0].labels == NULL && l.params[0].n == 3 && l.params[0].values[0] == 2 &&
                 l.params[0].values[1] == 4 && l.params[0].values[2] == 8,
             "\"8\", 2, 4: numeric and ascending (%s)", err.msg);
    if (!err.msg[0]) ft_landscape_free(&l);
}

static void test_t4_small(void) {
    ft_landscape l;
    if (!load(DATA "t4-small.json", &l)) return;
    /* compilation + validation + sum(runtimes), in ms ("miliseconds", as Kernel Tuner spells it) */
    const double cost[] = {0.056, 0.020, 0.111, 0.0025, 0.0015};
    check_small(&l, cost, "t4");
    ft_landscape_free(&l);
}

/* A value written as a number in one result and as its string in another ("2" and 2, "1.0"
 * and 1) is one value: x stays numeric, and the four results are four configurations. */
static void test_t4_mixed_types(void) {
    ft_landscape l;
    if (!load(DATA "t4-mixed-types.json", &l)) return;
    FT_CHECK(l.space.nparams == 2 && l.params[0].labels == NULL && l.params[0].n == 2 &&
                 l.params[0].values[0] == 1 && l.params[0].values[1] == 2,
             "x: %d values, %s", l.params[0].n, l.params[0].labels ? "named" : "numeric");
    FT_CHECK(l.ncands == 4 && l.nrejected == 0, "%d candidates", l.ncands);
    char text[256] = "";
    if (l.best >= 0) cand_text(&l, l.best, text, sizeof text);
    FT_CHECK(strcmp(text, "x=1,y=a") == 0 && l.score[l.best] == 1e-3, "best %s", text);
    ft_landscape_free(&l);
    /* 16 and 16.0, both numbers, are one value that stays the integer first read: x numeric. */
    if (!load(DATA "t4-int-real.json", &l)) return;
    FT_CHECK(l.ncands == 2 && l.params[0].labels == NULL && l.params[0].n == 1 &&
                 l.params[0].values[0] == 16,
             "16 and 16.0: %d candidates, x %s", l.ncands,
             l.params[0].labels ? "named" : "numeric");
    ft_landscape_free(&l);
    /* Only decimal text is a number: "0x10" is a label of its own beside 16. */
    if (!load(DATA "t4-hex-string.json", &l)) return;
    FT_CHECK(l.ncands == 2 && l.params[0].labels && l.params[0].n == 2 &&
                 strcmp(l.params[0].labels[1], "0x10") == 0,
             "16 and \"0x10\": %d candidates, %d values", l.ncands, l.params[0].n);
    ft_landscape_free(&l);
}

/* The same file gzip-compressed, under a name that says nothing. */
static void test_gzip(void) {
    char path[512];
    temp_path(path, sizeof path, ".data");
    FILE *in = fopen(DATA "kt-small.json", "rb");
    gzFile out = gzopen(path, "wb");
    FT_CHECK(in && out, "open");
    if (!in || !out) return;
    char buf[4096];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, in)) > 0)
        gzwrite(out, buf, (unsigned)n);
    fclose(in);
    gzclose(out);
    ft_landscape l;
    if (load(path, &l)) {
        const double cost[] = {0.056, 0.020, 0.115, 0.0025, 0.004};
        check_small(&l, cost, NULL);
        ft_landscape_free(&l);
    }
    /* Cut short inside its gzip stream: refused, not read as the entries before the cut (a
     * Kernel Tuner cache may lack its closing braces, so the JSON alone would pass). */
    struct stat st;
    FT_CHECK(stat(path, &st) == 0 && st.st_size > 40, "the gzip file is there");
    FT_CHECK(truncate(path, st.st_size / 2) == 0, "truncate %s", path);
    ft_err err = {0};
    FT_CHECK(ft_landscape_load(path, &l, &err) != FT_OK && strstr(err.msg, "ends early"),
             "a truncated gzip file: %s", err.msg);
    /* A gzip header over what is not a deflate stream: said so, the path named once. */
    FILE *g = fopen(path, "wb");
    FT_CHECK(g != NULL, "rewrite %s", path);
    if (g) {
        static const char bad[] = "\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\x03garbage garbage garbage";
        fwrite(bad, 1, sizeof bad - 1, g);
        fclose(g);
    }
    FT_CHECK(ft_landscape_load(path, &l, &err) == FT_EFORMAT &&
                 strstr(err.msg, "not a valid gzip stream") &&
                 strstr(err.msg + strlen(path), path) == NULL,
             "a damaged gzip file: %s", err.msg);
    remove(path);
}

/* Each malformed file: one line naming the file and what is wrong. */
static void test_malformed(void) {
    static const struct {
        const char *file, *says;
    } bad[] = {
        {"kt-bad-count.json", "cache entry \"16\" has 1 values for 2 parameters"},
        {"kt-bad-value.json", "cache entry \"16,diag\": diag is not one of the values tune_params "
                              "lists for layout"},
        {"kt-duplicate.json", "entries \"16,row\" and \"16.0,row\" are the same configuration"},
        {"kt-empty.json", "holds no configuration"},
        {"kt-all-failed.json", "every one of its 2 configurations failed"},
        {"kt-field-mismatch.json", "cache entry \"16,row\" says block_size_x=32, its key 16"},
        {"kt-no-time.json", "cache entry \"16,row\" has no positive \"time\""},
        {"kt-string-time.json", "cache entry \"32\": \"time\" is the string \"1.5\""},
        {"t4-gflops-only.json", "objective \"GFLOP/s\" has no unit, so is not a time, and no "
                                "\"time\" measurement"},
        {"t4-bad-unit.json", "metadata.timeunit is not a time unit"},
        {"t4-bad-measurement-unit.json",
         "objective \"time\" is measured in \"furlongs\", which is not a time unit"},
        {"t4-negative-cost.json", "results[0] costs a negative time"},
        {"kt-negative-cost.json", "cache entry \"32,row\" costs a negative time"},
        {"t4-duplicate.json", "entries results[0] and results[2] are the same configuration"},
        {"t4-mixed-duplicate.json", "entries results[0] and results[1] are the same configuration"},
        {"t4-missing-param.json", "results[1] has no \"configuration\" of the 2 parameters"},
        {"not-a-landscape.json", "neither \"tune_params\" and \"cache\""},
        {"export-bad-value.json", "candidates[1].config has no block_size_x of the values params "
                                  "lists"},
        {"export-extra-key.json", "candidates[1].config names bogus, which params does not list"},
        {"export-negative-cost.json", "candidates[1] has a \"cost_s\" that is not a time"},
        {"export-version.json", "format flaretune-landscape/2: this flaretune reads "
                                "flaretune-landscape/1"},
        {"log-ref-backend.jsonl", "backend ref has no tunable parameters for fusion.dflash"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char path[512];
        snprintf(path, sizeof path, DATA "%s", bad[i].file);
        ft_landscape l;
        ft_err err = {0};
        ft_status s = ft_landscape_load(path, &l, &err);
        FT_CHECK(s == FT_EFORMAT, "%s: status %d (%s)", bad[i].file, s, err.msg);
        FT_CHECK(strstr(err.msg, path) == err.msg && strstr(err.msg, bad[i].says) &&
                     !strchr(err.msg, '\n'),
                 "%s: %s", bad[i].file, err.msg);
        if (s == FT_OK) ft_landscape_free(&l);
    }
    ft_landscape l;
    ft_err err = {0};
    FT_CHECK(ft_landscape_load(DATA "no-such-file.json", &l, &err) == FT_EIO, "%s", err.msg);
}

/* Two files of the same parameters warm-start each other; a file and a log, or files of other
 * parameters, do not. */
static void test_warm_files(void) {
    ft_landscape kt, t4, other;
    if (!load(DATA "kt-small.json", &kt)) return;
    if (!load(DATA "t4-small.json", &t4)) {
        ft_landscape_free(&kt);
        return;
    }
    int first[3], nfirst = 0;
    double prior[5];
    ft_err err = {0};
    FT_CHECK(ft_landscape_warm(&kt, &t4, 3, first, &nfirst, prior, &err) == FT_OK, "%s", err.msg);
    FT_CHECK(nfirst == 3 && first[0] == 4 && first[1] == 2 && first[2] == 3, "first %d: %d %d",
             nfirst, first[0], first[1]);
    FT_CHECK(prior[0] == 3e-3 && isnan(prior[1]), "prior");
    if (load(DATA "kt-unfinished.json", &other)) {
        FT_CHECK(ft_landscape_warm(&kt, &other, 3, first, &nfirst, prior, &err) == FT_OK, "%s",
                 err.msg);
        ft_landscape_free(&other);
    }
    /* Other parameters: T4's own (x) */
    ft_landscape one;
    const char *t4x = "{\"schema_version\": \"1.0.0\", \"results\": [{\"configuration\": {\"x\": "
                      "1}, \"times\": {}, \"invalidity\": \"correct\", \"correctness\": 1, "
                      "\"measurements\": [{\"name\": \"time\", \"value\": 1.0}]}]}";
    FT_CHECK(ft_landscape_from_buffer(t4x, strlen(t4x), "x.json", &one, &err) == FT_OK, "%s",
             err.msg);
    if (err.status == FT_OK) {
        FT_CHECK(ft_landscape_warm(&kt, &one, 3, first, &nfirst, prior, &err) == FT_EINVAL &&
                     strstr(err.msg, "same tunable parameters"),
                 "%s", err.msg);
        ft_landscape_free(&one);
    }
    ft_landscape_free(&kt);
    ft_landscape_free(&t4);
}

/* ---- export ---------------------------------------------------------------------------------- */

static double score_of(int i) { return 1e-3 * (1.0 + ((i * 37) % 101) / 50.0); }

/* An exhaustive log of p: every candidate measured (at started 100 i, cost (1 + i % 7) / 8 s,
 * the sampling half of it), candidate 3 rejected by verification, candidate 5 by an error
 * saying it did not compile; `half`: only the first half (a budgeted run). */
static void write_log(const char *path, const problem *p, int half) {
    FILE *f = fopen(path, "w");
    FT_CHECK(f != NULL, "%s", path);
    if (!f) return;
    json_t *start = problem_run_start(p, "k1");
    json_object_set_new(start, "t", json_real(1.7e9));
    json_object_set_new(start, "run", json_string("r1"));
    json_object_set_new(start, "device", json_string("cpu:test"));
    put_event(f, start);
    for (int i = 0; i < (half ? p->n / 2 : p->n); i++) {
        json_t *cfg = ft_config_to_json(&p->space, &p->cands[i]), *ev;
        double cost = (1 + i % 7) / 8.0;
        if (i == 3)
            ev = json_pack("{s:s, s:o, s:i, s:s, s:s}", "event", "rejected", "config", cfg,
                           "candidate", i, "reason", "verify", "message", "mismatch");
        else if (i == 5)
            ev = json_pack("{s:s, s:o, s:i, s:s, s:s}", "event", "rejected", "config", cfg,
                           "candidate", i, "reason", "error", "message", "failed to compile");
        else
            ev = json_pack("{s:s, s:o, s:i, s:{s:f, s:f, s:i, s:f}}", "event", "measured",
                           "config", cfg, "candidate", i, "stats", "median_s", score_of(i),
                           "ci_rel", 0.01, "samples", 10, "total_s", cost / 2);
        json_object_set_new(ev, "started", json_real(1.7e9 + 100.0 * i));
        json_object_set_new(ev, "t", json_real(1.7e9 + 100.0 * i + cost));
        json_object_set_new(ev, "run", json_string("r1"));
        put_event(f, ev);
    }
    put_event(f, json_pack("{s:s, s:f, s:s}", "event", "run_end", "t", 1.8e9, "run", "r1"));
    fclose(f);
}

/* b holds a's candidates (by their text) with the same scores and failures; costs equal when
 * `costs`. */
static void check_same(const ft_landscape *a, const ft_landscape *b, int costs, const char *what) {
    FT_CHECK(a->ncands == b->ncands && a->nrejected == b->nrejected, "%s: %d/%d vs %d/%d", what,
             a->ncands, a->nrejected, b->ncands, b->nrejected);
    int matched = 0;
    for (int c = 0; c < a->ncands; c++) {
        char ta[512];
        cand_text(a, c, ta, sizeof ta);
        for (int d = 0; d < b->ncands; d++) {
            char tb[512];
            cand_text(b, d, tb, sizeof tb);
            if (strcmp(ta, tb) != 0) continue;
            matched++;
            if (isinf(a->score[c]))
                FT_CHECK(isinf(b->score[d]), "%s: %s failed there, not here", what, ta);
            else
                FT_CHECK(fabs(b->score[d] - a->score[c]) <= 1e-9 * a->score[c],
                         "%s: %s scores %.17g, not %.17g", what, ta, b->score[d], a->score[c]);
            if (costs)
                FT_CHECK(fabs(b->cost[d] - a->cost[c]) <= 1e-9 * a->cost[c],
                         "%s: %s costs %.17g, not %.17g", what, ta, b->cost[d], a->cost[c]);
        }
    }
    FT_CHECK(matched == a->ncands, "%s: %d of %d candidates matched", what, matched, a->ncands);
    if (a->best >= 0 && b->best >= 0) {
        char ta[512], tb[512];
        cand_text(a, a->best, ta, sizeof ta);
        cand_text(b, b->best, tb, sizeof tb);
        FT_CHECK(strcmp(ta, tb) == 0, "%s: optimum %s, not %s", what, tb, ta);
    }
}

static void test_export_roundtrip(void) {
    problem p;
    if (!make_problem_min(&p, "attention.kvproj", "small.dflare.train", 8)) return;
    char log[512], kt[512], t4[512];
    temp_path(log, sizeof log, ".jsonl");
    temp_path(kt, sizeof kt, ".json");
    temp_path(t4, sizeof t4, ".json");
    write_log(log, &p, 0);
    ft_landscape ref, a, b;
    if (!load(log, &ref)) return;
    ft_err err = {0};
    FT_CHECK(ft_eventlog_export(log, FT_EXPORT_KT_CACHE, kt, &err) == FT_OK, "%s", err.msg);
    FT_CHECK(ft_eventlog_export(log, FT_EXPORT_T4, t4, &err) == FT_OK, "%s", err.msg);
    if (load(kt, &a)) {
        /* Kernel Tuner's cache: the same space, index for index, and the recorded costs */
        check_same(&ref, &a, 1, "kt-cache");
        FT_CHECK(a.best == ref.best && ft_landscape_same_params(&a, &a), "best %d vs %d", a.best,
                 ref.best);
        FT_CHECK(strcmp(a.kernel, "attention.kvproj") == 0 && strcmp(a.device, "cpu:test") == 0,
                 "%s on %s", a.kernel, a.device);
        int first[3], nfirst;
        FT_CHECK(ft_landscape_warm(&ref, &a, 3, first, &nfirst, NULL, &err) == FT_EINVAL &&
                     strstr(err.msg, "one kind"),
                 "a log warm-started from a file: %s", err.msg);
        ft_landscape_free(&a);
    }
    if (load(t4, &b)) {
        check_same(&ref, &b, 0, "t4");
        ft_landscape_free(&b);
    }
    /* replay --export's own format reads back: the same candidates, scores, costs and optimum;
     * and a second export of it says the same of every candidate. */
    char ex[512], ex2[512];
    temp_path(ex, sizeof ex, ".json");
    temp_path(ex2, sizeof ex2, ".json");
    FT_CHECK(ft_landscape_export(&ref, log, ex, &err) == FT_OK, "%s", err.msg);
    if (load(ex, &b)) {
        check_same(&ref, &b, 1, "export");
        FT_CHECK(strcmp(b.format, "export") == 0 && strcmp(b.kernel, "attention.kvproj") == 0 &&
                     strcmp(b.device, "cpu") == 0 && b.op == NULL,
                 "export: %s, %s on %s", b.format, b.kernel, b.device);
        FT_CHECK(ft_landscape_export(&b, ex, ex2, &err) == FT_OK, "%s", err.msg);
        json_t *d1 = json_load_file(ex, 0, NULL), *d2 = json_load_file(ex2, 0, NULL);
        FT_CHECK(
            d1 && d2 &&
                json_equal(json_object_get(d1, "candidates"), json_object_get(d2, "candidates")) &&
                json_equal(json_object_get(d1, "params"), json_object_get(d2, "params")),
            "export of the export differs");
        json_decref(d1);
        json_decref(d2);
        ft_landscape_free(&b);
    }
    remove(ex);
    remove(ex2);
    /* The Kernel Tuner cache is closed as Kernel Tuner closes one; the T4 file has its keys. */
    json_error_t je;
    json_t *doc = json_load_file(kt, 0, &je);
    FILE *f = fopen(kt, "rb");
    char tail[8] = "";
    if (f && fseek(f, -4, SEEK_END) == 0) tail[fread(tail, 1, 4, f)] = '\0';
    if (f) fclose(f);
    FT_CHECK(strcmp(tail, "}\n}\n") == 0, "the cache ends with '%s'", tail);
    const json_t *cache = json_object_get(doc, "cache");
    FT_CHECK(json_is_object(cache) && json_object_size(cache) == (size_t)ref.ncands, "cache");
    char key[64];
    char v0[32], v1[32];
    ft_config_value_str(&ref.space, 0, ref.cands[5].v[0], v0, sizeof v0);
    snprintf(key, sizeof key, "%s", v0);
    for (int i = 1; i < ref.space.nparams; i++) {
        ft_config_value_str(&ref.space, i, ref.cands[5].v[i], v1, sizeof v1);
        snprintf(key + strlen(key), sizeof key - strlen(key), ",%s", v1);
    }
    FT_CHECK(json_is_string(json_object_get(json_object_get(cache, key), "time")) &&
                 strcmp(json_string_value(json_object_get(json_object_get(cache, key), "time")),
                        "CompilationFailedConfig") == 0,
             "candidate 5 (%s) as CompilationFailedConfig", key);
    json_decref(doc);
    doc = json_load_file(t4, 0, &je);
    FT_CHECK(doc && strcmp(json_string_value(json_object_get(doc, "schema_version")), "1.0.0") == 0,
             "schema_version");
    size_t i;
    json_t *r;
    int bad = 0, correctness = 0;
    json_array_foreach(json_object_get(doc, "results"), i, r) {
        bad += !json_is_object(json_object_get(r, "configuration")) ||
               !json_is_object(json_object_get(r, "times")) ||
               !json_is_string(json_object_get(r, "invalidity")) ||
               !json_is_number(json_object_get(r, "correctness")) ||
               !json_is_array(json_object_get(r, "measurements")) ||
               !json_is_string(json_object_get(r, "timestamp"));
        const char *inv = json_string_value(json_object_get(r, "invalidity"));
        correctness += inv && strcmp(inv, "correctness") == 0;
    }
    FT_CHECK(bad == 0 && correctness == 1, "%d results lack a required key; %d correctness", bad,
             correctness);
    FT_CHECK(doc && strcmp(json_string_value(json_object_get(json_object_get(doc, "metadata"),
                                                             "timeunit")),
                           "milliseconds") == 0,
             "timeunit");
    json_decref(doc);
    ft_landscape_free(&ref);
    /* A budgeted run: what it measured, no more. */
    write_log(log, &p, 1);
    FT_CHECK(ft_eventlog_export(log, FT_EXPORT_KT_CACHE, kt, &err) == FT_OK, "%s", err.msg);
    if (load(kt, &a)) {
        FT_CHECK(a.ncands == p.n / 2 && a.nrejected == 2, "%d candidates, %d failed", a.ncands,
                 a.nrejected);
        ft_landscape_free(&a);
    }
    remove(log);
    remove(kt);
    remove(t4);
}

/* `--backend replay:FILE` with a community file: one clear line. */
static void test_backend_refuses_files(void) {
    const ft_backend *b;
    ft_err err = {0};
    FT_CHECK(ft_replay_backend_open(DATA "kt-small.json", &b, &err) == FT_EINVAL &&
                 strstr(err.msg, "names no flaretune op") &&
                 strstr(err.msg, "flaretune replay " DATA "kt-small.json"),
             "%s", err.msg);
}

int main(void) {
    FT_RUN(test_objectives_and_nonfinite);
    FT_RUN(test_kt_small);
    FT_RUN(test_kt_unfinished);
    FT_RUN(test_kt_cut_short);
    FT_RUN(test_file_text);
    FT_RUN(test_t4_small);
    FT_RUN(test_t4_mixed_types);
    FT_RUN(test_gzip);
    FT_RUN(test_malformed);
    FT_RUN(test_warm_files);
    FT_RUN(test_export_roundtrip);
    FT_RUN(test_backend_refuses_files);
    return ft_test_finish();
}
