/* test_t1.c: FAIR T1 input files read by tuner/t1.c: a hand-written file worked out by hand
 * (its space, conditions, launches, argument sizes, defines and keys), every kind of bad file
 * (one line each, naming what), and, where the community's landscapes are beside the source
 * tree ($FT_LANDSCAPES_DIR or ../shared/landscapes), their two T1 files: the configurations
 * their conditions allow are exactly the ones Kernel Tuner measured, and the launches are
 * Kernel Tuner's. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tuner/replay.h"
#include "tuner/t1.h"
#include "ft_test.h"

#define DATA FT_SOURCE_DIR "/tests/data/t1/"

static void cfg_of(const ft_t1 *t, const char *text, ft_config *c) {
    ft_err err = {0};
    FT_CHECK(ft_config_parse(&t->space, text, c, &err) == FT_OK, "%s: %s", text, err.msg);
}

static void test_hand_checked(void) {
    ft_t1 *t = NULL;
    ft_err err = {0};
    FT_CHECK(ft_t1_load(DATA "saxpy_tiled.json", NULL, &t, &err) == FT_OK, "%s", err.msg);
    if (!t) return;
    FT_CHECK(strcmp(t->kernel_name, "saxpy_tiled") == 0, "%s", t->kernel_name);
    FT_CHECK(strstr(t->kernel_file, "/tests/data/t1/saxpy_tiled.cu") != NULL, "%s", t->kernel_file);
    FT_CHECK(t->noptions == 1 && strcmp(t->options[0], "-std=c++11") == 0, "options");
    FT_CHECK(t->space.nparams == 4, "%d params", t->space.nparams);
    /* "list(range(1, 5))" */
    FT_CHECK(t->params[1].n == 4 && t->params[1].values[3] == 4, "tile_size_x values");
    /* a float parameter is labelled, its define the number */
    FT_CHECK(t->params[3].labels && strcmp(t->params[3].labels[0], "0.5") == 0 &&
                 strcmp(t->params[3].labels[1], "2.0") == 0,
             "scale labels");
    ft_config def;
    ft_config_default(&t->space, &def);
    char buf[256];
    ft_config_format(&t->space, &def, buf, sizeof buf);
    FT_CHECK(strcmp(buf, "block_size_x=64,tile_size_x=1,use_ldg=0,scale=2.0") == 0, "default %s", buf);
    FT_CHECK(t->default_note[0] == 0, "note %s", t->default_note);
    /* 4 x 4 x 2 x 2 = 64; allowed: bs*ts <= 512 (32: 4, 64: 4, 128: 4, 256: 2 -> 14 pairs), and
     * use_ldg=1 only with ts in {2, 4}: pairs with ts in {2,4}: 32: 2, 64: 2, 128: 2, 256: 1 = 7;
     * so (14 + 7) x 2 scales = 42 */
    ft_config *cfgs = NULL;
    int64_t n = 0;
    FT_CHECK(ft_t1_enumerate(t, &cfgs, &n, &err) == FT_OK && n == 42, "%lld allowed (%s)", (long long)n,
             err.msg);
    /* Each finds its own place (the first, the last and the default among them), and one the
     * conditions refuse none. */
    int placed = 0;
    for (int64_t i = 0; i < n; i++)
        placed += ft_t1_position(t, cfgs, n, &cfgs[i]) == i;
    FT_CHECK(placed == n && n == 42, "%d of %lld found where they stand", placed, (long long)n);
    ft_config c;
    int ok = -1;
    char why[256];
    cfg_of(t, "block_size_x=256,tile_size_x=3", &c);
    FT_CHECK(ft_t1_position(t, cfgs, n, &c) == -1 && ft_t1_position(t, cfgs, 0, &cfgs[0]) == -1,
             "a configuration not listed has no place");
    free(cfgs);
    FT_CHECK(ft_t1_allowed(t, &c, &ok, why, sizeof why, &err) == FT_OK && !ok &&
                 strcmp(why, "block_size_x * tile_size_x <= 512") == 0,
             "%d %s", ok, why);
    cfg_of(t, "block_size_x=32,tile_size_x=3,use_ldg=1", &c);
    FT_CHECK(ft_t1_allowed(t, &c, &ok, why, sizeof why, &err) == FT_OK && !ok, "use_ldg with 3");
    /* GridDivX wins over GlobalSize (as Kernel Tuner): ceil(10000 / (128 * 3)) = 27, where
     * GlobalSize would say 10000 // 128 // 3 = 26 */
    cfg_of(t, "block_size_x=128,tile_size_x=3", &c);
    long long g[3], b[3];
    FT_CHECK(ft_t1_launch(t, &c, g, b, &err) == FT_OK, "%s", err.msg);
    FT_CHECK(g[0] == 27 && g[1] == 1 && g[2] == 1 && b[0] == 128 && b[1] == 1 && b[2] == 1,
             "grid %lld,%lld,%lld block %lld", g[0], g[1], g[2], b[0]);
    /* sizes: names stand for their lists (max(block_size_x) = 256) */
    FT_CHECK(t->nargs == 4 && t->args[0].elems == 10000 && t->args[1].elems == 10256 &&
                 t->args[2].elems == 4 && t->args[2].constant && t->args[0].output &&
                 !t->args[1].output && t->args[1].random && t->args[3].scalar &&
                 t->args[3].fill_value == 10000,
             "arguments");
    char defs[8][96];
    int nd = ft_t1_defines(t, &c, defs, 8);
    FT_CHECK(nd == 5 && strcmp(defs[0], "block_size_x=128") == 0 && strcmp(defs[3], "scale=2.0") == 0 &&
                 strcmp(defs[4], "kernel_tuner=1") == 0,
             "defines %d %s", nd, nd > 4 ? defs[4] : "");
    ft_t1_key(t, &c, buf, sizeof buf);
    FT_CHECK(strcmp(buf, "128,3,0,2.0") == 0, "key %s", buf);
    ft_t1_free(t);
    /* a file's KernelFile replaced */
    FT_CHECK(ft_t1_load(DATA "saxpy_tiled.json", DATA "nope.cu", &t, &err) == FT_EIO &&
                 strstr(err.msg, "nope.cu"),
             "%s", err.msg);
}

/* saxpy_tiled.json loaded with --kernel-file `override`, or else read with its KernelFile
 * replaced by the JSON string kf_json (as "k.json", beside dir): refused (FT_EIO) in one line
 * holding both fragments. */
static void expect_kernel_refused(const char *override, const char *kf_json, const char *dir,
                                  const char *fragment, const char *fragment2) {
    ft_t1 *t = NULL;
    ft_err err = {0};
    ft_status s = FT_OK;
    if (override) {
        s = ft_t1_load(DATA "saxpy_tiled.json", override, &t, &err);
    } else {
        static const char old[] = "\"saxpy_tiled.cu\"";
        char *text = ft_test_read_file(DATA "saxpy_tiled.json");
        char *at = text ? strstr(text, old) : NULL;
        FT_CHECK(at != NULL, "mutation");
        size_t n = at ? strlen(text) + strlen(kf_json) + 1 : 0;
        char *json = at ? malloc(n) : NULL;
        if (json) {
            snprintf(json, n, "%.*s%s%s", (int)(at - text), text, kf_json, at + strlen(old));
            s = ft_t1_from_buffer(json, strlen(json), "k.json", dir, NULL, &t, &err);
        }
        free(json);
        free(text);
    }
    FT_CHECK(s == FT_EIO && t == NULL && strstr(err.msg, fragment) &&
                 (!fragment2 || strstr(err.msg, fragment2)) && !strchr(err.msg, '\n'),
             "%s: status %d, %s", override ? override : kf_json, s, err.msg);
    ft_t1_free(t);
}

/* A kernel file that is there but is no file to read (a folder) is refused when the T1 file is
 * read, as one that is missing is, not when the first configuration is compiled. */
static void test_kernel_not_a_file(void) {
    expect_kernel_refused(DATA, NULL, NULL, "the kernel file is a folder", NULL);
    expect_kernel_refused(NULL, "\".\"", DATA, "k.json: KernelFile .:", "is a folder, not a file");
}

/* A kernel file whose path holds a quote (the path is written into the compiled code) is
 * refused when the T1 file is read, named or given with --kernel-file alike. */
static void test_kernel_path_quoted(void) {
    char dir[512], path[600];
    ft_test_tmpdir(dir, sizeof dir, "t1quote");
    snprintf(path, sizeof path, "%s/we\"ird.cu", dir);
    char *src = ft_test_read_file(DATA "saxpy_tiled.cu");
    FILE *f = fopen(path, "w");
    FT_CHECK(src && f && fputs(src, f) >= 0 && fclose(f) == 0, "copy the kernel to %s", path);
    free(src);
    expect_kernel_refused(path, NULL, NULL, "a quote, backslash or newline", NULL);
    expect_kernel_refused(NULL, "\"we\\\"ird.cu\"", dir, "k.json: KernelFile",
                          "a quote, backslash or newline");
    unlink(path);
}

/* A mutation of the hand-written file: the text with `from` replaced by `to`. */
static void expect_bad(const char *from, const char *to, const char *fragment) {
    char *text = ft_test_read_file(DATA "saxpy_tiled.json");
    FT_CHECK(text != NULL, "read");
    if (!text) return;
    char *at = strstr(text, from);
    FT_CHECK(at != NULL, "the mutation's text \"%s\" is not in the file", from);
    if (!at) {
        free(text);
        return;
    }
    size_t nl = strlen(text) - strlen(from) + strlen(to) + 1;
    char *m = malloc(nl);
    size_t pre = (size_t)(at - text);
    memcpy(m, text, pre);
    strcpy(m + pre, to);
    strcat(m, at + strlen(from));
    ft_t1 *t = NULL;
    ft_err err = {0};
    ft_status s = ft_t1_from_buffer(m, strlen(m), "bad.json", NULL, NULL, &t, &err);
    FT_CHECK(s != FT_OK && t == NULL && strstr(err.msg, fragment) && !strchr(err.msg, '\n'),
             "%s -> %s: status %d, \"%s\", expected \"%s\"", from, to, s, err.msg, fragment);
    ft_t1_free(t);
    free(m);
    free(text);
}

/* saxpy_tiled.json with each (from, to) replaced once; NULL (a failed check) when one is not
 * there. free() it. */
static char *saxpy_with(const char *const (*edits)[2], int n) {
    char *text = ft_test_read_file(DATA "saxpy_tiled.json");
    for (int i = 0; text && i < n; i++) {
        char *at = strstr(text, edits[i][0]);
        FT_CHECK(at != NULL, "mutation %s", edits[i][0]);
        if (!at) {
            free(text);
            return NULL;
        }
        size_t len = strlen(text) - strlen(edits[i][0]) + strlen(edits[i][1]) + 1;
        char *m = malloc(len);
        snprintf(m, len, "%.*s%s%s", (int)(at - text), text, edits[i][1], at + strlen(edits[i][0]));
        free(text);
        text = m;
    }
    return text;
}

/* What the schema leaves to the reader: with no argument marked Output, the vectors whose
 * AccessType writes are the outputs (y, ReadWrite; not x, ReadOnly), and without
 * GlobalSizeType GlobalSize counts threads; read_note says both. A file that marks one says
 * nothing of it. */
static void test_read_notes(void) {
    static const char *const edits[][2] = {
        {"\"FillValue\": 1.0, \"Output\": 1}", "\"FillValue\": 1.0}"},
        {"\"GlobalSizeType\": \"CUDA\",", ""}};
    char *m = saxpy_with(edits, 2);
    ft_t1 *t = NULL;
    ft_err err = {0};
    FT_CHECK(m && ft_t1_from_buffer(m, strlen(m), "unmarked.json", NULL, NULL, &t, &err) == FT_OK,
             "%s", err.msg);
    if (t) {
        FT_CHECK(t->args[0].output && !t->args[1].output && !t->args[2].output &&
                     !t->global_in_blocks,
                 "outputs from AccessType: y %d x %d coef %d; blocks %d", t->args[0].output,
                 t->args[1].output, t->args[2].output, t->global_in_blocks);
        FT_CHECK(strstr(t->read_note, "whose AccessType writes (y) are checked") &&
                     strstr(t->read_note, "GlobalSizeType is not given"),
                 "read_note: %s", t->read_note);
    }
    ft_t1_free(t);
    free(m);
    t = NULL;
    FT_CHECK(ft_t1_load(DATA "saxpy_tiled.json", NULL, &t, &err) == FT_OK && t && !t->read_note[0],
             "a file that marks its output and gives GlobalSizeType: no note (%s)",
             t ? t->read_note : err.msg);
    ft_t1_free(t);
}

/* String values the readers of the results hold apart are accepted: "0x10" and " 16" are labels
 * of their own beside "16" (only decimal strings are numbers to them, ft_landscape_decimal). */
static void test_labels_apart(void) {
    static const char from[] =
        "\"Name\": \"scale\", \"Type\": \"float\", \"Values\": \"[0.5, 2.0]\", \"Default\": 2.0";
    static const char to[] = "\"Name\": \"scale\", \"Type\": \"string\", \"Values\": [\"0x10\", "
                             "\"16\", \" 16\"], \"Default\": \"16\"";
    char *text = ft_test_read_file(DATA "saxpy_tiled.json");
    char *at = text ? strstr(text, from) : NULL;
    FT_CHECK(at != NULL, "mutation");
    if (!at) {
        free(text);
        return;
    }
    size_t n = strlen(text) + sizeof to;
    char *m = malloc(n);
    snprintf(m, n, "%.*s%s%s", (int)(at - text), text, to, at + strlen(from));
    ft_t1 *t = NULL;
    ft_err err = {0};
    FT_CHECK(ft_t1_from_buffer(m, strlen(m), "apart.json", NULL, NULL, &t, &err) == FT_OK && t &&
                 t->params[3].n == 3,
             "0x10, 16 and \" 16\": %s", err.msg);
    ft_t1_free(t);
    free(m);
    free(text);
}

static void test_bad_files(void) {
    /* {what to replace, its replacement, a fragment the error must hold} */
    static const struct {
        const char *from, *to, *fragment;
    } bad[] = {
        {"\"General\"", "\"General\": 1, \"General\"", "not JSON"},
        {"\"ConfigurationSpace\"", "\"Config\"", "not a T1 file"},
        {"\"Name\": \"block_size_x\"", "\"Name\": \"block size\"", "is not an identifier"},
        {"\"Name\": \"tile_size_x\"", "\"Name\": \"block_size_x\"", "named twice"},
        {"\"Type\": \"int\", \"Values\": \"[32", "\"Type\": \"complex\", \"Values\": \"[32",
         "Type \"complex\""},
        {"\"[32, 64, 128, 256]\"", "\"[32, 64, 128, 256\"", "Values: expression"},
        {"\"[32, 64, 128, 256]\"", "\"__import__('os')\"", "unknown function '__import__'"},
        {"\"[32, 64, 128, 256]\"", "\"[]\"", "has no values"},
        {"\"[32, 64, 128, 256]\"", "\"64\"", "Values: \"64\" is a number, not a list (write [64])"},
        {"\"[32, 64, 128, 256]\"", "\"2 * 32\"", "\"2 * 32\" is a number, not a list (write [64])"},
        {"\"Values\": [0, 1]", "\"Values\": [true, false]",
         "parameter use_ldg: Values[0], true, is not a number"},
        {"\"Values\": [0, 1]", "\"Values\": [0, \"1\"]",
         "parameter use_ldg: Values[1], \"1\", is not a number"},
        {"\"[32, 64, 128, 256]\"", "\"[32, 64, 32]\"",
         "parameter block_size_x lists value 32 twice"},
        {"\"[0.5, 2.0]\"", "\"[0.5, 2.0, 0.5]\"", "parameter scale lists value 0.5 twice"},
        /* what the results files (Kernel Tuner, T4) could not hold or replay read back */
        {"\"[0.5, 2.0]\"", "\"[0.5, 2, 2.0]\"", "parameter scale lists 2 and 2.0, one number"},
        {"\"[32, 64, 128, 256]\"", "\"[32, 64, 32.0]\"", "lists 32 and 32.0, one number"},
        {"\"Values\": [0, 1]", "\"Values\": [0, 9007199254740993]",
         "Values[1], 9007199254740993, is beyond 2^53"},
        {"\"Name\": \"scale\", \"Type\": \"float\", \"Values\": \"[0.5, 2.0]\"",
         "\"Name\": \"scale\", \"Type\": \"string\", \"Values\": [\"16\", \"16.0\"]",
         "parameter scale lists 16 and 16.0, one number"},
        {"\"Name\": \"scale\", \"Type\": \"float\", \"Values\": \"[0.5, 2.0]\"",
         "\"Name\": \"scale\", \"Type\": \"string\", \"Values\": [\"x,y\", \"z\"]",
         "Values[0], \"x,y\", holds a comma"},
        {"\"Name\": \"scale\", \"Type\": \"float\", \"Values\": \"[0.5, 2.0]\"",
         "\"Name\": \"scale\", \"Type\": \"string\", \"Values\": [\"a\\u009b1m\"]",
         "Values[0] holds a control character"},
        {"\"[32, 64, 128, 256]\"", "\"list(range(100))\"", "at most 64"},
        {"\"Default\": 64", "\"Default\": {}", "Default is not a number"},
        {"\"Default\": 64", "\"Default\": \"64\"", "Default is not a number"},
        {"\"Default\": 64", "\"Default\": [64, 128]", "Default is not a number"},
        {"\"Type\": \"int\", \"Values\": \"[32", "\"Type\": \"uint\", \"Values\": \"[-32",
         "parameter block_size_x: Values[0], -32, is not an integer of 0 or more (Type uint)"},
        {"\"Type\": \"float\", \"Values\": \"[0.5", "\"Type\": \"uint\", \"Values\": \"[0.5",
         "parameter scale: Values[0], 0.5, is not an integer of 0 or more (Type uint)"},
        {"[32, 64, 128, 256]", "[i for i in range(4) for j in range(2)]",
         "nested loops are not read"},
        {"[32, 64, 128, 256]", "[32 * j for i in range(1, 9)]", "unknown name 'j'"},
        {"block_size_x * tile_size_x <= 512\"", "block_size_x * tile_sise_x <= 512\"",
         "unknown name 'tile_sise_x'"},
        {"\"Parameters\": [\"use_ldg\", \"tile_size_x\"]",
         "\"Parameters\": [\"use_ldg\", \"nope\"]", "\"nope\", which is not a parameter"},
        {"\"Language\": \"CUDA\"", "\"Language\": \"OpenCL\"", "flaretune runs CUDA kernels"},
        {"\"KernelName\": \"saxpy_tiled\",", "", "KernelName is missing"},
        {"\"KernelName\": \"saxpy_tiled\",", "\"KernelName\": 7,", "KernelName must be a string"},
        {"\"Name\": \"coef\"", "\"Name\": \"x\"", "argument x named twice (Arguments[2])"},
        {"\"ProblemSize\": [10000]", "\"ProblemSize\": [0]", "sizes must be positive"},
        {"\"ProblemSize\": [10000]", "\"ProblemSize\": \"big\"", "1 to 3 integers"},
        {"\"GridDivX\": [\"block_size_x\", \"tile_size_x\"]",
         "\"GridDivX\": [\"block_size_x\", \"scale\"]", "not an integer parameter"},
        {"\"GridDivX\": [\"block_size_x\", \"tile_size_x\"]", "\"GridDivX\": [\"bsx\"]",
         "\"bsx\", which is not a parameter"},
        {"\"X\": \"block_size_x\"", "\"X\": \"block_size_x // 0\"", "division by zero"},
        {"\"X\": \"block_size_x\"", "\"X\": \"block_size_x - 64\"", "a positive integer is needed"},
        {"\"Size\": \"ProblemSize[0]\"", "\"Size\": \"ProblemSize[3]\"", "index 3 out of range"},
        {"\"Size\": \"ProblemSize[0]\"", "\"Size\": \"ProblemSize[0] / 3\"", "a positive integer"},
        {"\"Size\": \"4\"", "\"Size\": \"-4\"", "a positive integer"},
        {"\"Type\": \"int32\"", "\"Type\": \"half2\"", "Type \"half2\""},
        {"\"MemoryType\": \"Scalar\"", "\"MemoryType\": \"Texture\"", "MemoryType \"Texture\""},
        {"\"FillValue\": 10000}", "\"FillValue\": 1e20}",
         "argument n: FillValue 1e+20 is out of the range of Type int32"},
        {"\"FillValue\": 10000}", "\"FillValue\": 2.5}",
         "argument n: FillValue 2.5 is not an integer (Type int32)"},
        {"\"FillValue\": 10000}", "\"FillValue\": -2147483649}",
         "argument n: FillValue -2147483649 is out of"},
        {"\"Type\": \"int32\"", "\"Type\": \"uint8\"",
         "argument n: FillValue 10000 is out of the range of Type uint8"},
        {"\"Type\": \"int32\", \"MemoryType\": \"Scalar\", \"FillValue\": 10000",
         "\"Type\": \"float\", \"MemoryType\": \"Scalar\", \"FillValue\": 1e300",
         "FillValue 1e+300 is out of the range of Type float"},
        {"\"FillType\": \"Random\", \"Size\": \"ProblemSize[0] +",
         "\"FillType\": \"File\", \"Size\": \"ProblemSize[0] +", "FillType \"File\""},
        {"\"Expression\": \"block_size_x * tile_size_x <= 512\"",
         "\"Expression\": \"block_size_x > 1024\"", "no configuration satisfies the conditions"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        expect_bad(bad[i].from, bad[i].to, bad[i].fragment);
    /* a default that breaks a condition is moved to the nearest allowed configuration */
    char *text = ft_test_read_file(DATA "saxpy_tiled.json");
    char *at = text ? strstr(text, "\"Default\": 0") : NULL;
    FT_CHECK(at != NULL, "mutation");
    if (at) {
        memcpy(at, "\"Default\": 1", 12);
        ft_t1 *t = NULL;
        ft_err err = {0};
        FT_CHECK(ft_t1_from_buffer(text, strlen(text), "m.json", NULL, NULL, &t, &err) == FT_OK, "%s",
                 err.msg);
        if (t) {
            ft_config def;
            ft_config_default(&t->space, &def);
            char buf[256];
            ft_config_format(&t->space, &def, buf, sizeof buf);
            /* one change away: use_ldg=0, or tile_size_x=2; space order puts the first first */
            FT_CHECK(strcmp(buf, "block_size_x=64,tile_size_x=1,use_ldg=0,scale=2.0") == 0, "%s", buf);
            FT_CHECK(strstr(t->default_note, "use_ldg == 0 or tile_size_x in [2, 4]") != NULL, "%s",
                     t->default_note);
        }
        ft_t1_free(t);
    }
    free(text);
    ft_t1 *t = NULL;
    ft_err err = {0};
    FT_CHECK(ft_t1_load(DATA "does-not-exist.json", NULL, &t, &err) == FT_EIO && strstr(err.msg, "cannot open"),
             "%s", err.msg);
}

/* A T1 file of the parameters p0.. (Values each) and the conditions given, a kernel of one
 * output; NULL when refused (err says why). */
static ft_t1 *space_file(int np, const char *const *values, int nc, const char *const *conds,
                         ft_err *err) {
    char text[8192];
    size_t k =
        (size_t)snprintf(text, sizeof text, "{\"ConfigurationSpace\": {\"TuningParameters\": [");
    for (int i = 0; i < np; i++)
        k += (size_t)snprintf(text + k, sizeof text - k,
                              "%s{\"Name\": \"p%d\", \"Type\": \"int\", \"Values\": \"%s\"}",
                              i ? ", " : "", i, values[i]);
    k += (size_t)snprintf(text + k, sizeof text - k, "], \"Conditions\": [");
    for (int i = 0; i < nc; i++)
        k += (size_t)snprintf(text + k, sizeof text - k, "%s{\"Expression\": \"%s\"}",
                              i ? ", " : "", conds[i]);
    snprintf(text + k, sizeof text - k,
             "]}, \"KernelSpecification\": {\"Language\": \"CUDA\", \"KernelName\": \"k\", "
             "\"KernelFile\": \"k.cu\", \"GlobalSizeType\": \"CUDA\", \"ProblemSize\": [6], "
             "\"LocalSize\": {\"X\": \"32\"}, \"GlobalSize\": {\"X\": \"1\"}, \"Arguments\": "
             "[{\"Name\": \"y\", \"Type\": \"float\", \"MemoryType\": \"Vector\", \"Size\": 32, "
             "\"FillType\": \"Constant\", \"FillValue\": 0, \"Output\": 1}]}}");
    ft_t1 *t = NULL;
    if (ft_t1_from_buffer(text, strlen(text), "walk.json", NULL, NULL, &t, err) != FT_OK)
        return NULL;
    return t;
}

/* The walk that checks each condition as soon as its parameters are set lists exactly what
 * checking every configuration whole does, in the same order, and counts as many without a list:
 * random spaces of 1 to 4 parameters and random conditions of one to three of them (some refusing a
 * whole branch, some a division that fails where an earlier condition in the file would have
 * refused it: judged whole, in the file's order, as before). */
static void test_walk_matches_whole(void) {
    static const char *const vals[] = {"[1, 2, 3]", "[0, 1]", "list(range(1, 6))", "[2, 4, 8, 16]",
                                       "[0, 3, 5]"};
    static const char *const conds[] = {
        "p0 < p1",         "p0 * p1 <= 8",  "p1 % 2 == 0",        "p0 + p2 != 4",
        "p2 in [1, 3, 4]", "p1 >= p3",      "p3 // p0 > 0",       "p0 != 0 and p2 // p0 > 1",
        "p0 > 0",          "p2 // p1 >= 1", "ProblemSize[0] > 2", "p3 + p0 * p2 < 20",
        "p0 == p0",        "p1 != 0",       "max(p0, p3) < 5",
    };
    uint64_t r = 12345;
    int agreed = 0, tried = 0, nonempty = 0;
    for (int trial = 0; trial < 300; trial++) {
        const char *v[4], *c[4];
        r = r * 6364136223846793005ULL + 1442695040888963407ULL;
        int np = 1 + (int)((r >> 33) % 4), nc = (int)((r >> 40) % 4);
        for (int i = 0; i < np; i++)
            v[i] = vals[(r >> (8 + 3 * i)) % 5];
        int used = 0;
        for (int i = 0; i < 4; i++) {
            r = r * 6364136223846793005ULL + 1442695040888963407ULL;
            const char *cand = conds[(r >> 33) % (sizeof conds / sizeof conds[0])];
            int ok = 1; /* only conditions on the parameters there are */
            for (const char *q = cand; (q = strchr(q, 'p')); q++)
                if (q[1] >= '0' && q[1] <= '9' && q[1] - '0' >= np) ok = 0;
            if (ok && used < nc) c[used++] = cand;
        }
        ft_err err = {0};
        ft_t1 *t = space_file(np, v, used, c, &err);
        if (!t) continue; /* no configuration allowed, or its default's division fails */
        tried++;
        ft_config *cfgs = NULL;
        int64_t n = 0;
        ft_err e1 = {0};
        ft_status s1 = ft_t1_enumerate(t, &cfgs, &n, &e1);
        /* every configuration judged whole, in space order */
        int64_t total = ft_space_size(&t->space), m = 0, same = s1 == FT_OK;
        ft_status s2 = FT_OK;
        for (int64_t k = 0; k < total && s2 == FT_OK; k++) {
            ft_config cfg;
            ft_space_config_at(&t->space, k, &cfg);
            int ok = 0;
            ft_err e2 = {0};
            s2 = ft_t1_allowed(t, &cfg, &ok, NULL, 0, &e2);
            if (s2 == FT_OK && ok) {
                same = same && m < n && ft_config_equal(&cfgs[m], &cfg);
                m++;
            }
        }
        /* where a whole configuration's check fails, the walk may have pruned it first */
        if (s2 == FT_OK)
            same = same && m == n;
        else
            same = 1;
        /* counted without a list, the parameters no condition names multiplying: as many */
        int64_t counted = -1;
        ft_err e3 = {0};
        if (s1 == FT_OK && ft_t1_count(t, &counted, &e3) != FT_OK) counted = -2;
        same = same && (s1 != FT_OK || counted == n);
        agreed += same;
        nonempty += n > 0;
        FT_CHECK(same,
                 "trial %d: %d parameters, %d conditions: walk %lld (%s), counted %lld, "
                 "whole %lld",
                 trial, np, used, (long long)n, e1.msg, (long long)counted, (long long)m);
        free(cfgs);
        ft_t1_free(t);
    }
    FT_CHECK(tried > 150 && nonempty > 100 && agreed == tried,
             "%d of %d tried agree (%d non-empty)", agreed, tried, nonempty);
}

/* ft_t1_each's visitor: counts, compares with a list, stops at the stop-th. */
typedef struct {
    const ft_config *cfgs;
    int seen, same, stop;
} stop_at;

static int visit_until(void *ctx, const ft_config *c) {
    stop_at *st = ctx;
    st->same += ft_config_equal(c, &st->cfgs[st->seen]);
    return ++st->seen == st->stop;
}

/* A space of 2^40 configurations whose conditions on its first parameters leave a few is walked,
 * not refused; one whose parameters no condition names allow more than the list's 2^24 is
 * refused at once (without conditions, or beside a condition on others: 32 values of p1 to p7
 * go with each allowed p0), and one whose condition prunes only at its last parameter after
 * the walk's 2^26 steps, each in one line; so is one whose defaults break its condition and whose
 * walk meets no allowed configuration within those steps to take as the default. */
static void test_walk_large(void) {
    const char *v[8];
    for (int i = 0; i < 8; i++)
        v[i] = "list(range(1, 33))";
    static const char *const chain[] = {"p0 <= 2",  "p1 <= p0", "p2 <= p1", "p3 <= p2",
                                        "p4 <= p3", "p5 <= p4", "p6 <= p5", "p7 <= p6"};
    ft_err err = {0};
    ft_t1 *t = space_file(8, v, 8, chain, &err);
    ft_config *cfgs = NULL;
    int64_t n = 0;
    /* p0 = 1: all ones; p0 = 2: a non-increasing run of 1s and 2s after it: 8 */
    FT_CHECK(t && ft_space_size(&t->space) == (1LL << 40) &&
                 ft_t1_enumerate(t, &cfgs, &n, &err) == FT_OK && n == 9,
             "%lld allowed: %s", (long long)n, err.msg);
    if (n == 9) {
        char buf[128];
        ft_config_format(&t->space, &cfgs[8], buf, sizeof buf);
        FT_CHECK(strcmp(buf, "p0=2,p1=2,p2=2,p3=2,p4=2,p5=2,p6=2,p7=2") == 0, "last %s", buf);
        /* ft_t1_each visits the same, in the same order, and stops where told */
        stop_at st = {.cfgs = cfgs, .stop = 5};
        FT_CHECK(ft_t1_each(t, visit_until, &st, &err) == FT_OK && st.seen == 5 && st.same == 5,
                 "each: %d seen, %d as listed", st.seen, st.same);
    }
    free(cfgs);
    ft_t1_free(t);
    t = space_file(8, v, 0, NULL, &err);
    FT_CHECK(t && ft_t1_enumerate(t, &cfgs, &n, &err) == FT_EFORMAT && !cfgs &&
                 strstr(err.msg, "1099511627776 configurations before the conditions, and "
                                 "they allow 1099511627776: more than flaretune lists (2^24)"),
             "%s", err.msg);
    FT_CHECK(t && ft_t1_count(t, &n, &err) == FT_OK && n == 1LL << 40, "counted %lld: %s",
             (long long)n, err.msg);
    ft_t1_free(t);
    /* each value of p1 to p7 goes with each allowed p0: counted, not listed */
    t = space_file(8, v, 1, chain, &err);
    FT_CHECK(t && ft_t1_enumerate(t, &cfgs, &n, &err) == FT_EFORMAT && !cfgs &&
                 strstr(err.msg, "they allow 68719476736: more than flaretune lists"),
             "%s", err.msg);
    ft_t1_free(t);
    /* two of five parameters named: 2^25 allowed, past the list's limit, refused before a list */
    static const char *const two[] = {"p0 >= 1 and p4 >= 1"};
    t = space_file(5, v, 1, two, &err);
    FT_CHECK(t && ft_t1_count(t, &n, &err) == FT_OK && n == 1LL << 25 &&
                 ft_t1_enumerate(t, &cfgs, &n, &err) == FT_EFORMAT && !cfgs &&
                 strstr(err.msg, "and they allow 33554432: more than flaretune lists (2^24)"),
             "%s", err.msg);
    ft_t1_free(t);
    static const char *const late[] = {"p6 == 1 and p0 + p1 + p2 + p3 + p4 + p5 == 6"};
    t = space_file(7, v, 1, late, &err);
    FT_CHECK(t && ft_t1_enumerate(t, &cfgs, &n, &err) == FT_EFORMAT && !cfgs &&
                 strstr(err.msg, "34359738368 configurations before the conditions, which prune "
                                 "too late"),
             "%s", err.msg);
    ft_t1_free(t);
    /* defaults (the first values) that break a condition which allows only p0 = 32, at the walk's
     * far end: no nearest default within its 2^26 steps, and the file is refused saying so */
    static const char *const far[] = {"p0 == 32 and p6 >= 1"};
    t = space_file(7, v, 1, far, &err);
    FT_CHECK(!t && strstr(err.msg, "34359738368 configurations before the conditions, and none "
                                   "allowed in the first 2^26 the walk reached"),
             "%s", err.msg);
    ft_t1_free(t);
}

static int cmp_i64_test(const void *a, const void *b) {
    const int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* The i-th allowed configuration's place among the n listed (space order), -1 when none. */
static int64_t listed_at(const ft_t1 *t, const ft_config *list, int64_t n, const ft_config *c) {
    return ft_t1_position(t, list, n, c);
}

/* ft_t1_draw, which draws without a list: on random spaces (those of test_walk_matches_whole),
 * k of them are k distinct allowed configurations, the same from the same seed, the first of a
 * larger draw's, and every one (as listed) when k is all or more; a space whose list fails fails
 * alike. */
static void test_draw_random_spaces(void) {
    static const char *const vals[] = {"[1, 2, 3]", "[0, 1]", "list(range(1, 6))", "[2, 4, 8, 16]",
                                       "[0, 3, 5]"};
    static const char *const conds[] = {"p0 < p1",         "p0 * p1 <= 8", "p1 % 2 == 0",
                                        "p2 in [1, 3, 4]", "p1 >= p3",     "p3 // p0 > 0",
                                        "p0 > 0",          "p2 // p1 >= 1"};
    uint64_t r = 777;
    int tried = 0, agreed = 0;
    for (int trial = 0; trial < 200; trial++) {
        const char *v[4], *c[3];
        r = r * 6364136223846793005ULL + 1442695040888963407ULL;
        int np = 1 + (int)((r >> 33) % 4), nc = 0;
        for (int i = 0; i < np; i++)
            v[i] = vals[(r >> (8 + 3 * i)) % 5];
        for (int i = 0; i < 3; i++) {
            r = r * 6364136223846793005ULL + 1442695040888963407ULL;
            const char *cand = conds[(r >> 33) % (sizeof conds / sizeof conds[0])];
            int ok = (r >> 50) % 2; /* some parameters left to no condition */
            for (const char *q = cand; (q = strchr(q, 'p')); q++)
                if (q[1] >= '0' && q[1] <= '9' && q[1] - '0' >= np) ok = 0;
            if (ok) c[nc++] = cand;
        }
        ft_err err = {0};
        ft_t1 *t = space_file(np, v, nc, c, &err);
        if (!t) continue;
        tried++;
        ft_config *list = NULL;
        int64_t n = 0;
        ft_err e1 = {0};
        ft_status s1 = ft_t1_enumerate(t, &list, &n, &e1);
        int same = 1;
        const int64_t ks[] = {0, 1, n / 2, n - 1, n, n + 3};
        ft_config *half = NULL;
        int64_t nhalf = -1;
        for (int q = 0; q < 6; q++) {
            const int64_t k = ks[q] < 0 ? 0 : ks[q];
            ft_config *a = NULL, *b = NULL;
            int64_t na = 0, nb = 0;
            ft_err e2 = {0};
            ft_status s2 = ft_t1_draw(t, k, (uint64_t)trial, &a, &na, &e2);
            ft_status s3 = ft_t1_draw(t, k, (uint64_t)trial, &b, &nb, &e2);
            same = same && s2 == s1 && s3 == s1;
            if (s1 == FT_OK && s2 == FT_OK && s3 == FT_OK) {
                same = same && na == (k < n ? k : n) && nb == na;
                char *seen = calloc((size_t)n + 1, 1);
                for (int64_t i = 0; i < na && same; i++) {
                    int64_t at = listed_at(t, list, n, &a[i]);
                    same = at >= 0 && !seen[at] && ft_config_equal(&a[i], &b[i]);
                    if (at >= 0) seen[at] = 1;
                    if (k >= n) same = same && at == i; /* all of them, as listed */
                    if (q == 3 && i < nhalf && k < n)   /* n - 1 begins with n / 2 */
                        same = same && ft_config_equal(&a[i], &half[i]);
                }
                free(seen);
            }
            if (q == 2) {
                half = a, nhalf = na;
                a = NULL;
            }
            free(a);
            free(b);
        }
        free(half);
        agreed += same;
        FT_CHECK(same, "trial %d: %d parameters, %d conditions, %lld allowed (%s)", trial, np, nc,
                 (long long)n, e1.msg);
        free(list);
        ft_t1_free(t);
    }
    FT_CHECK(tried > 100 && agreed == tried, "%d of %d spaces drawn as listed", agreed, tried);
}

/* Each set of k is as likely as any other: over 18,000 seeds, 4 of the 18 configurations a space
 * of named and unnamed parameters allows (p1 named by no condition) come as often each (chi-square
 * over 17 degrees of freedom under 60, where 1 in 10^6 uniform runs would pass it) and each pair as
 * often as any (152 degrees of freedom, under 260): a sampler of runs of neighbours, or one that
 * favours the named parameters' first values, fails the pairs. */
static void test_draw_uniform(void) {
    static const char *const v[] = {"[1, 2, 3]", "[0, 1]", "[2, 4, 8, 16]"};
    static const char *const c[] = {"p0 * p2 <= 16"};
    ft_err err = {0};
    ft_t1 *t = space_file(3, v, 1, c, &err);
    ft_config *list = NULL;
    int64_t n = 0;
    FT_CHECK(t && ft_t1_enumerate(t, &list, &n, &err) == FT_OK && n == 18, "%lld allowed: %s",
             (long long)n, err.msg);
    if (n != 18) {
        free(list);
        ft_t1_free(t);
        return;
    }
    enum { K = 4, SEEDS = 18000 };
    static long one[18], pair[18][18];
    int bad = 0;
    for (int seed = 0; seed < SEEDS; seed++) {
        ft_config *a = NULL;
        int64_t m = 0;
        int at[K];
        if (ft_t1_draw(t, K, (uint64_t)seed * 7919 + 1, &a, &m, &err) != FT_OK || m != K) {
            bad++;
            free(a);
            continue;
        }
        for (int i = 0; i < K; i++) {
            at[i] = (int)listed_at(t, list, n, &a[i]);
            if (at[i] < 0) bad++;
        }
        for (int i = 0; i < K; i++)
            if (at[i] >= 0) {
                one[at[i]]++;
                for (int j = i + 1; j < K; j++)
                    if (at[j] >= 0)
                        pair[at[i] < at[j] ? at[i] : at[j]][at[i] < at[j] ? at[j] : at[i]]++;
            }
        free(a);
    }
    const double e1 = (double)SEEDS * K / 18, e2 = (double)SEEDS * K * (K - 1) / (18.0 * 17);
    double x1 = 0, x2 = 0;
    for (int i = 0; i < 18; i++) {
        x1 += (one[i] - e1) * (one[i] - e1) / e1;
        for (int j = i + 1; j < 18; j++)
            x2 += (pair[i][j] - e2) * (pair[i][j] - e2) / e2;
    }
    FT_CHECK(!bad && x1 < 60 && x2 < 260,
             "%d bad draws; chi-square %.1f (17 df), pairs %.1f (152 df)", bad, x1, x2);
    free(list);
    ft_t1_free(t);
}

/* Past the list's limit: 2^40 configurations without conditions, and 2^36 that `p0 <= 2` allows
 * (p1 to p7 named by no condition), give 1000 distinct allowed configurations each, spread over the
 * values; ft_t1_select's sample puts the default first; a sample past 2^24 is refused in one line
 * (a space that prunes too late is refused as ft_t1_count refuses it: test_walk_large). */
static void test_draw_large(void) {
    const char *v[8];
    for (int i = 0; i < 8; i++)
        v[i] = "list(range(1, 33))";
    static const char *const le2[] = {"p0 <= 2"};
    for (int nc = 0; nc < 2; nc++) {
        ft_err err = {0};
        ft_t1 *t = space_file(8, v, nc, le2, &err);
        ft_config *a = NULL, *first = NULL;
        int64_t m = 0, nfirst = 0;
        FT_CHECK(t && ft_t1_draw(t, 1000, 5, &a, &m, &err) == FT_OK && m == 1000, "%d: %lld: %s",
                 nc, (long long)m, err.msg);
        /* 300 from the same seed are the first 300 of the 1000, in the same order */
        int prefix = ft_t1_draw(t, 300, 5, &first, &nfirst, &err) == FT_OK && nfirst == 300;
        for (int i = 0; i < 300 && prefix; i++)
            prefix = ft_config_equal(&first[i], &a[i]);
        FT_CHECK(prefix, "%d: 300 drawn are not the 1000's first", nc);
        free(first);
        /* drawn in no order of the space: the first parameter's values do not only go up */
        int rises = 1;
        for (int64_t i = 1; i < m && rises; i++)
            rises = a[i].v[0] >= a[i - 1].v[0];
        FT_CHECK(!rises, "%d: the draw is in the space's order", nc);
        int64_t idx[1000];
        int distinct = 1, allowed = 1, hit[8][33] = {{0}};
        for (int64_t i = 0; i < m; i++) {
            idx[i] = ft_space_index_of(&t->space, &a[i]);
            int ok = 0;
            allowed = allowed && ft_t1_allowed(t, &a[i], &ok, NULL, 0, &err) == FT_OK && ok;
            for (int p = 0; p < 8; p++)
                hit[p][a[i].v[p]] = 1;
        }
        qsort(idx, (size_t)m, sizeof *idx, cmp_i64_test);
        for (int64_t i = 1; i < m; i++)
            distinct = distinct && idx[i] != idx[i - 1];
        int spread = 1; /* every value of p1..p7 drawn (1000 draws of 32: all but surely), p0's too
                           where no condition holds it */
        for (int p = 0; p < 8; p++) {
            int vals = 0;
            for (int x = 1; x <= 32; x++)
                vals += hit[p][x];
            spread = spread && vals == (p == 0 && nc ? 2 : 32);
        }
        FT_CHECK(distinct && allowed && spread, "%d conditions: distinct %d, allowed %d, spread %d",
                 nc, distinct, allowed, spread);
        free(a);
        /* the sample that commands take: the default first, then 5 others */
        ft_config *s = NULL, def;
        int64_t ns = 0;
        ft_config_default(&t->space, &def);
        FT_CHECK(ft_t1_select(t, NULL, 0, 5, 9, &s, &ns, &err) == FT_OK && ns == 6 &&
                     ft_config_equal(&s[0], &def),
                 "select: %lld: %s", (long long)ns, err.msg);
        for (int64_t i = 1; i < ns; i++)
            FT_CHECK(!ft_config_equal(&s[i], &def), "the default twice, at %lld", (long long)i);
        free(s);
        FT_CHECK(ft_t1_draw(t, (1LL << 24) + 1, 5, &a, &m, &err) == FT_EINVAL && !a &&
                     strstr(err.msg, "a sample of 16777217: more than flaretune lists (2^24)"),
                 "%s", err.msg);
        ft_t1_free(t);
    }
}

/* The hand-written file with x's fill replaced by `fill` (a Random fill, Size ProblemSize[0] +
 * max(block_size_x): 10,256 floats); NULL when it is refused, its message in err. */
static ft_t1 *with_x_fill(const char *fill, ft_err *err) {
    static const char from[] = "\"FillType\": \"Random\", \"Size\": \"ProblemSize[0] + max";
    char *text = ft_test_read_file(DATA "saxpy_tiled.json");
    char *at = text ? strstr(text, from) : NULL;
    FT_CHECK(at != NULL, "the mutation's text is in the file");
    if (!at) {
        free(text);
        return NULL;
    }
    size_t cut = strlen("\"FillType\": \"Random\", ");
    char *m = malloc(strlen(text) + strlen(fill) + 4);
    memcpy(m, text, (size_t)(at - text));
    sprintf(m + (at - text), "%s, %s", fill, at + cut);
    ft_t1 *t = NULL;
    if (ft_t1_from_buffer(m, strlen(m), "gen.json", NULL, NULL, &t, err) != FT_OK) t = NULL;
    free(m);
    free(text);
    return t;
}

/* FillType "Generator": DataSource is an expression of i, the index of each value, read when the
 * file is and checked to give values of the argument's Type; the first and last values when the
 * file is read, each one as the buffer is filled (ft_t1_generate). */
static void test_generator_fill(void) {
    ft_err err = {0};
    ft_t1 *t =
        with_x_fill("\"FillType\": \"Generator\", \"DataSource\": \"(i % 7) * 0.5 - 1\"", &err);
    FT_CHECK(t != NULL, "a Generator fill is read: %s", err.msg);
    if (t) {
        ft_t1_arg *x = &t->args[1];
        FT_CHECK(x->generator && !x->random && x->elems == 10256 &&
                     strcmp(x->data_source, "(i % 7) * 0.5 - 1") == 0,
                 "x: generator %p, random %d, %lld values", (void *)x->generator, x->random,
                 x->elems);
        static const long long at[] = {0, 1, 6, 7, 10254, 10255};
        static const double want[] = {-1, -0.5, 2, -1, 2, -1}; /* 10255 = 7 x 1465 */
        for (int k = 0; k < 6 && x->generator; k++) {
            double v = NAN;
            long long i = at[k];
            double expect = want[k];
            FT_CHECK(ft_t1_generate(x, i, &v, &err) == FT_OK && v == expect,
                     "x[%lld] = %g, expected %g (%s)", i, v, expect, err.msg);
        }
        /* the same expression for an integer type: 0.5 at i = 1 is no int32 */
        x->type = FT_T1_INT32;
        double v;
        FT_CHECK(ft_t1_generate(x, 1, &v, &err) == FT_EFORMAT &&
                     strstr(err.msg,
                            "argument x: DataSource at i=1: -0.5 is not an integer (Type int32)"),
                 "%s", err.msg);
        ft_t1_free(t);
    }
    /* a number is a DataSource too: every value that number, one past 2^53 as well */
    t = with_x_fill("\"FillType\": \"Generator\", \"DataSource\": 2.5", &err);
    double v = 0;
    FT_CHECK(t && ft_t1_generate(&t->args[1], 77, &v, &err) == FT_OK && v == 2.5, "%g: %s", v,
             err.msg);
    ft_t1_free(t);
    t = with_x_fill("\"FillType\": \"Generator\", \"DataSource\": -9223372036854775808", &err);
    FT_CHECK(t && ft_t1_generate(&t->args[1], 0, &v, &err) == FT_OK && v == -0x1p63, "%g: %s", v,
             err.msg);
    ft_t1_free(t);
    /* a scalar is passed its FillValue: a Generator there is refused, not ignored */
    expect_bad("\"Type\": \"int32\", \"MemoryType\": \"Scalar\", \"FillValue\": 10000",
               "\"Type\": \"int32\", \"MemoryType\": \"Scalar\", \"FillType\": \"Generator\", "
               "\"DataSource\": \"i\", \"FillValue\": 10000",
               "argument n: FillType Generator is for a vector; a scalar is passed its FillValue");
    static const struct {
        const char *fill, *fragment;
    } bad[] = {
        {"\"FillType\": \"Generator\"", "argument x: FillType Generator needs a DataSource"},
        {"\"FillType\": \"Generator\", \"DataSource\": \"\"", "needs a DataSource"},
        {"\"FillType\": \"Generator\", \"DataSource\": [1]",
         "argument x: DataSource must be a string (an expression of i) or a number"},
        {"\"FillType\": \"Generator\", \"DataSource\": true", "DataSource must be a string"},
        {"\"FillType\": \"Generator\", \"DataSource\": null", "needs a DataSource"},
        {"\"FillType\": \"Generator\", \"DataSource\": \"i\\n+ 1\"",
         "argument x: DataSource holds a control character (a line break?)"},
        /* the parameters are not in scope: the data is the same for every configuration */
        {"\"FillType\": \"Generator\", \"DataSource\": \"i * block_size_x\"",
         "argument x: DataSource: "},
        {"\"FillType\": \"Generator\", \"DataSource\": \"i +\"", "argument x: DataSource: "},
        {"\"FillType\": \"Generator\", \"DataSource\": \"1 / (i - 10255)\"",
         "argument x: DataSource at i=10255: "},
        {"\"FillType\": \"Generator\", \"DataSource\": \"1e300 * (i + 1)\"",
         "argument x: DataSource at i=0: 1e+300 is out of the range of Type float"},
        {"\"FillType\": \"Generator\", \"DataSource\": \"'a'\"",
         "argument x: DataSource at i=0: expression \"'a'\": a string where a number is needed"},
        {"\"FillType\": \"Generator\", \"DataSource\": \"1e308 * 10 - 1e308 * 10\"",
         "argument x: DataSource at i=0: NaN is not a number (Type float)"},
    };
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        ft_err e = {0};
        t = with_x_fill(bad[k].fill, &e);
        FT_CHECK(t == NULL && strstr(e.msg, bad[k].fragment) && !strchr(e.msg, '\n'),
                 "%s: \"%s\", expected \"%s\"", bad[k].fill, e.msg, bad[k].fragment);
        ft_t1_free(t);
    }
    /* --arg with a fill replaces the Generator; with a type and size alone it keeps it, and its
     * values must fit the new Type: a bad request (FT_EINVAL, exit 2), said as --arg's */
    t = with_x_fill("\"FillType\": \"Generator\", \"DataSource\": \"i - 3\"", &err);
    FT_CHECK(t && ft_t1_set_arg(t, "x=uint8:100", &err) == FT_EINVAL &&
                 strstr(err.msg, "--arg x=uint8:100: the file's argument x: DataSource at i=0: -3 "
                                 "is out of the range of Type uint8"),
             "%s", err.msg);
    ft_t1_free(t);
    t = with_x_fill("\"FillType\": \"Generator\", \"DataSource\": \"i\"", &err);
    if (t) {
        FT_CHECK(ft_t1_set_arg(t, "x=double:100", &err) == FT_OK && t->args[1].generator &&
                     t->args[1].elems == 100,
                 "--arg x=double:100 keeps the Generator: %s", err.msg);
        FT_CHECK(ft_t1_set_arg(t, "x=float:100:constant:3", &err) == FT_OK &&
                     !t->args[1].generator && !t->args[1].data_source && t->args[1].fill_value == 3,
                 "--arg x=float:100:constant:3 replaces it: %s", err.msg);
        ft_t1_free(t);
    }
}

/* The hand-written file's arguments y (a Constant fill) and x (a Random one) with another Type
 * and FillValue. */
#define Y_ARG(type, value)                                                                         \
    "\"Type\": \"" type "\", \"MemoryType\": \"Vector\", \"AccessType\": \"ReadWrite\",\n"         \
    "             \"FillType\": \"Constant\", \"Size\": \"ProblemSize[0]\", \"FillValue\": " value
#define X_ARG(type, value)                                                                         \
    "\"Type\": \"" type "\", \"MemoryType\": \"Vector\", \"AccessType\": \"ReadOnly\",\n"          \
    "             \"FillType\": \"Random\", \"Size\": \"ProblemSize[0] + max(block_size_x)\", "    \
    "\"FillValue\": " value

/* A vector's FillValue, as its fill uses it, must be a value of its Type, as a scalar's: a
 * Constant fill's value, a Random fill's bound (above 0; at or below 0 it is not used, the draws
 * are in [0, 1)); the edges of a type's range are taken. --arg's fill is held to the same rule. */
static void test_vector_fills(void) {
    static const struct {
        const char *from, *to, *fragment;
    } bad[] = {
        {Y_ARG("float", "1.0"), Y_ARG("int32", "1e20"),
         "argument y: FillValue 1e+20 is out of the range of Type int32"},
        {Y_ARG("float", "1.0"), Y_ARG("float", "1e300"),
         "argument y: FillValue 1e+300 is out of the range of Type float"},
        {Y_ARG("float", "1.0"), Y_ARG("uint8", "-1"),
         "argument y: FillValue -1 is out of the range of Type uint8"},
        {Y_ARG("float", "1.0"), Y_ARG("int8", "0.5"),
         "argument y: FillValue 0.5 is not an integer (Type int8)"},
        {X_ARG("float", "1.0"), X_ARG("int32", "1e20"),
         "argument x: FillValue 1e+20 is out of the range of Type int32"},
        {X_ARG("float", "1.0"), X_ARG("uint8", "300"),
         "argument x: FillValue 300 is out of the range of Type uint8"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        expect_bad(bad[i].from, bad[i].to, bad[i].fragment);
    /* What an argument says of itself is read as written or refused: a scalar is passed its
     * FillValue (none: not 0), a MemType or Output of another kind, a Name --arg could not name. */
    static const struct {
        const char *from, *to, *fragment;
    } said[] = {
        {"\"MemoryType\": \"Scalar\", \"FillValue\": 10000}", "\"MemoryType\": \"Scalar\"}",
         "argument n: a scalar needs a FillValue"},
        {"\"MemType\": \"Constant\"", "\"MemType\": \"Shared\"",
         "argument coef: MemType \"Shared\" (Global or Constant)"},
        {"\"FillValue\": 1.0, \"Output\": 1}", "\"FillValue\": 1.0, \"Output\": \"yes\"}",
         "argument y: Output must be 0, 1, true or false"},
        {"{\"Name\": \"coef\"", "{\"Name\": \"co ef\"", "Name \"co ef\" is not a C name"},
        {"\"LocalSize\": {\"X\": \"block_size_x\"",
         "\"LocalSize\": {\"X\": \"block_size_x * 1000\"",
         "the default configuration's block is 64000 x 1 x 1 threads"},
        {"\"LocalSize\": {\"X\": \"block_size_x\", \"Y\": \"1\", \"Z\": \"1\"}",
         "\"LocalSize\": \"64\"", "KernelSpecification.LocalSize must be an object of X, Y and Z"},
        {"\"GlobalSizeType\": \"CUDA\"", "\"GlobalSizeType\": 5",
         "KernelSpecification.GlobalSizeType must be \"CUDA\" (blocks) or \"OpenCL\" (threads)"},
        {"\"Type\": \"float\", \"Values\": \"[0.5, 2.0]\", \"Default\": 2.0",
         "\"Type\": \"string\", \"Values\": [\"a\\nb\", \"2.0\"], \"Default\": \"2.0\"",
         "parameter scale: Values[0] holds a control character"},
    };
    for (size_t i = 0; i < sizeof said / sizeof said[0]; i++)
        expect_bad(said[i].from, said[i].to, said[i].fragment);
    static const char *const good[][2] = {
        {Y_ARG("float", "1.0"), Y_ARG("int8", "-128")},
        {X_ARG("float", "1.0"), X_ARG("uint8", "-5")},
        {X_ARG("float", "1.0"), X_ARG("int32", "2147483647")},
    };
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        char *text = ft_test_read_file(DATA "saxpy_tiled.json");
        char *at = text ? strstr(text, good[i][0]) : NULL;
        FT_CHECK(at != NULL, "the mutation's text \"%s\" is not in the file", good[i][0]);
        if (!at) {
            free(text);
            continue;
        }
        size_t pre = (size_t)(at - text);
        char *m = malloc(strlen(text) - strlen(good[i][0]) + strlen(good[i][1]) + 1);
        memcpy(m, text, pre);
        strcpy(m + pre, good[i][1]);
        strcat(m, at + strlen(good[i][0]));
        ft_t1 *t = NULL;
        ft_err err = {0};
        FT_CHECK(ft_t1_from_buffer(m, strlen(m), "good.json", NULL, NULL, &t, &err) == FT_OK,
                 "%s: %s", good[i][1], err.msg);
        ft_t1_free(t);
        free(m);
        free(text);
    }
    static const struct {
        const char *spec, *fragment; /* fragment NULL: taken */
    } args[] = {
        {"y=int32:16:constant:1e20",
         "--arg y=int32:16:constant:1e20: FillValue 1e+20 is out of the range of Type int32"},
        {"y=int8:16:constant:2.5", "FillValue 2.5 is not an integer (Type int8)"},
        {"x=uint8:16:random:300", "FillValue 300 is out of the range of Type uint8"},
        {"x=float:16:random:1e300", "FillValue 1e+300 is out of the range of Type float"},
        {"x=uint8:16:random:0", NULL},
        {"x=int32:16:random:2147483647", NULL},
        {"y=int8:16:constant:-128", NULL},
        {"y=uint32:16:constant:-1", "FillValue -1 is out of the range of Type uint32"},
        {"y=int16:16:constant:40000", "FillValue 40000 is out of the range of Type int16"},
        {"x=uint32:16:random:4294967295", NULL},
        {"y=uint16:16:constant:65535", NULL},
        {"x=double3:16", NULL},
        {"x=int2:16", "TYPE float, double, int32, uint32"},
    };
    for (size_t i = 0; i < sizeof args / sizeof args[0]; i++) {
        ft_t1 *t = NULL;
        ft_err err = {0};
        FT_CHECK(ft_t1_load(DATA "saxpy_tiled.json", NULL, &t, &err) == FT_OK, "%s", err.msg);
        if (!t) continue;
        ft_status s = ft_t1_set_arg(t, args[i].spec, &err);
        if (args[i].fragment)
            FT_CHECK(s == FT_EINVAL && strstr(err.msg, args[i].fragment) && !strchr(err.msg, '\n'),
                     "--arg %s: status %d, \"%s\", expected \"%s\"", args[i].spec, s, err.msg,
                     args[i].fragment);
        else
            FT_CHECK(s == FT_OK, "--arg %s: %s", args[i].spec, err.msg);
        ft_t1_free(t);
    }
}

/* The schema's argument types beyond float, double, int32 and the bytes: uint32, int16, uint16
 * (the BAT suite's MD5Hash passes uint32 digests), and CUDA's float2/3/4 and double2/3/4 (its
 * builtin_vectors and FFT files), a vector of those being one of their components, Size counting
 * the vector type's values. A scalar of a vector type is refused: its FillValue is one number. */
static void test_argument_types(void) {
    static const char fmt[] =
        "{\"ConfigurationSpace\": {\"TuningParameters\": [{\"Name\": \"block_size_x\","
        " \"Type\": \"int\", \"Values\": \"[32]\", \"Default\": 32}]},"
        " \"KernelSpecification\": {\"Language\": \"CUDA\", \"KernelName\": \"k\","
        " \"KernelFile\": \"k.cu\", \"ProblemSize\": [100], \"Arguments\": [{\"Name\": \"v\","
        " \"Type\": \"%s\", \"MemoryType\": \"%s\", \"FillType\": \"Constant\","
        " \"Size\": \"ProblemSize[0]\", \"FillValue\": %s}]}}";
    static const struct {
        const char *type, *memory, *value;
        ft_t1_type want;
        size_t bytes;
        long long elems;
        const char *refusal; /* NULL: read */
    } cases[] = {
        {"uint32", "Vector", "4294967295", FT_T1_UINT32, 4, 100, NULL},
        {"uint32", "Scalar", "2745829788", FT_T1_UINT32, 4, 0, NULL},
        {"uint32", "Scalar", "-1", 0, 0, 0, "FillValue -1 is out of the range of Type uint32"},
        {"int16", "Vector", "-32768", FT_T1_INT16, 2, 100, NULL},
        {"int16", "Vector", "32768", 0, 0, 0, "FillValue 32768 is out of the range of Type int16"},
        {"uint16", "Vector", "65535", FT_T1_UINT16, 2, 100, NULL},
        {"float2", "Vector", "1.5", FT_T1_FLOAT, 4, 200, NULL},
        {"float3", "Vector", "1.5", FT_T1_FLOAT, 4, 300, NULL},
        {"float4", "Vector", "1.5", FT_T1_FLOAT, 4, 400, NULL},
        {"double3", "Vector", "1.5", FT_T1_DOUBLE, 8, 300, NULL},
        {"double3", "Scalar", "1.5", 0, 0, 0, "a scalar of Type double3 is not passed"},
        {"float5", "Vector", "1.5", 0, 0, 0, "Type \"float5\" (float, double, int32, uint32"},
        {"int2", "Vector", "1", 0, 0, 0, "Type \"int2\""},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char text[2048];
        snprintf(text, sizeof text, fmt, cases[i].type, cases[i].memory, cases[i].value);
        ft_t1 *t = NULL;
        ft_err err = {0};
        ft_status s = ft_t1_from_buffer(text, strlen(text), "a.json", NULL, NULL, &t, &err);
        if (cases[i].refusal) {
            FT_CHECK(s == FT_EFORMAT && strstr(err.msg, cases[i].refusal) && !strchr(err.msg, '\n'),
                     "%s %s: %d %s", cases[i].type, cases[i].memory, s, err.msg);
        } else {
            FT_CHECK(s == FT_OK, "%s %s: %s", cases[i].type, cases[i].memory, err.msg);
            if (t)
                FT_CHECK(t->args[0].type == cases[i].want &&
                             t->args[0].elem_bytes == cases[i].bytes &&
                             (t->args[0].scalar || t->args[0].elems == cases[i].elems),
                         "%s: type %d, %zu bytes, %lld elements", cases[i].type, t->args[0].type,
                         t->args[0].elem_bytes, t->args[0].elems);
        }
        ft_t1_free(t);
    }
}

/* A block size of 0 (an expression among the values that came out 0), with neither LocalSize
 * nor GlobalSize nor GridDiv to say otherwise: the launch of that configuration is refused in
 * one line (the grid would divide by it), the others launch. */
/* The forms the FAIR benchmark hub's own T1 files use (its hotspot and gemm files): values as
 * list comprehensions and sums of lists, a Default given as a list of one, and a Default that
 * is not among the values (the first value is then the default, and default_note says so). */
static void test_hub_forms(void) {
    char *text = ft_test_read_file(DATA "hub_forms.json");
    FT_CHECK(text != NULL, "hub_forms.json");
    if (!text) return;
    ft_t1 *t = NULL;
    ft_err err = {0};
    FT_CHECK(ft_t1_from_buffer(text, strlen(text), "hub_forms.json", NULL, NULL, &t, &err) == FT_OK,
             "%s", err.msg);
    free(text);
    if (!t) return;
    static const int want[3][5] = {{1, 2, 32, 64, 96}, {1, 2, 4}, {1, 2, 6}};
    static const int nwant[3] = {5, 3, 3};
    for (int p = 0; p < 3; p++) {
        FT_CHECK(t->params[p].n == nwant[p], "%s: %d values", t->params[p].name, t->params[p].n);
        for (int k = 0; k < nwant[p] && k < t->params[p].n; k++)
            FT_CHECK(t->params[p].values[k] == want[p][k], "%s[%d] = %d", t->params[p].name, k,
                     t->params[p].values[k]);
    }
    ft_config def;
    ft_config_default(&t->space, &def);
    char buf[256];
    ft_config_format(&t->space, &def, buf, sizeof buf);
    FT_CHECK(strcmp(buf, "block_size_x=64,block_size_y=1,tile_size_x=1,max_tfactor=10") == 0, "%s",
             buf);
    FT_CHECK(strstr(t->default_note, "max_tfactor's Default 1 is not one of its values: its "
                                     "first, 10, is the default") != NULL,
             "%s", t->default_note);
    ft_t1_free(t);
}

static void test_zero_block(void) {
    static const char text[] =
        "{\"General\": {\"BenchmarkName\": \"z\", \"OutputFormat\": \"JSON\"},"
        " \"ConfigurationSpace\": {\"TuningParameters\": [{\"Name\": \"block_size_x\","
        " \"Type\": \"int\", \"Values\": \"[32, 8 > 9]\", \"Default\": 32}]},"
        " \"KernelSpecification\": {\"Language\": \"CUDA\", \"KernelName\": \"k\","
        " \"KernelFile\": \"k.cu\", \"ProblemSize\": [1000], \"Arguments\": [{\"Name\": \"y\","
        " \"Type\": \"float\", \"MemoryType\": \"Vector\", \"FillType\": \"Constant\","
        " \"Size\": \"ProblemSize[0]\", \"FillValue\": 0.0}]}}";
    ft_t1 *t = NULL;
    ft_err err = {0};
    FT_CHECK(ft_t1_from_buffer(text, strlen(text), "z.json", NULL, NULL, &t, &err) == FT_OK, "%s",
             err.msg);
    if (!t) return;
    ft_config c;
    long long g[3], b[3];
    cfg_of(t, "block_size_x=32", &c);
    FT_CHECK(ft_t1_launch(t, &c, g, b, &err) == FT_OK && g[0] == 32 && b[0] == 32, "%s", err.msg);
    cfg_of(t, "block_size_x=0", &c);
    FT_CHECK(ft_t1_launch(t, &c, g, b, &err) == FT_EFORMAT &&
                 strstr(err.msg, "the block's x dimension is 0 threads") && !strchr(err.msg, '\n'),
             "%s", err.msg);
    ft_t1_free(t);
}

/* LocalSize and GlobalSize given as numbers ("X": 64) are those numbers, as "X": "64" is; a value
 * of another kind is refused in one line, never read as absent. */
static void test_numeric_geometry(void) {
    static const char head[] =
        "{\"General\": {\"BenchmarkName\": \"n\", \"OutputFormat\": \"JSON\"},"
        " \"ConfigurationSpace\": {\"TuningParameters\": [{\"Name\": \"tile\","
        " \"Type\": \"int\", \"Values\": \"[1, 2]\", \"Default\": 1}]},"
        " \"KernelSpecification\": {\"Language\": \"CUDA\", \"KernelName\": \"k\","
        " \"KernelFile\": \"k.cu\", \"ProblemSize\": [1000], \"GlobalSizeType\": \"CUDA\",";
    static const char tail[] =
        " \"Arguments\": [{\"Name\": \"y\", \"Type\": \"float\", \"MemoryType\": \"Vector\","
        " \"FillType\": \"Constant\", \"Size\": \"ProblemSize[0]\", \"FillValue\": 1.0}]}}";
    static const struct {
        const char *geometry;
        long long grid, block; /* -1: refused */
    } cases[] = {
        {"\"LocalSize\": {\"X\": 64, \"Y\": 1, \"Z\": 1}, \"GlobalSize\": {\"X\": 4, \"Y\": 1, "
         "\"Z\": 1},",
         4, 64},
        {"\"LocalSize\": {\"X\": \"64\", \"Y\": \"1\", \"Z\": \"1\"}, \"GlobalSize\": {\"X\": "
         "\"4\"},",
         4, 64},
        {"\"LocalSize\": {\"X\": [64]},", -1, -1},
        {"\"GlobalSize\": {\"X\": 4.5},", -1, -1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char text[2048];
        snprintf(text, sizeof text, "%s %s%s", head, cases[i].geometry, tail);
        ft_t1 *t = NULL;
        ft_err err = {0};
        ft_status s = ft_t1_from_buffer(text, strlen(text), "n.json", NULL, NULL, &t, &err);
        if (cases[i].grid < 0) {
            FT_CHECK(s == FT_EFORMAT && strstr(err.msg, "should be an expression") &&
                         !strchr(err.msg, '\n'),
                     "case %zu refused: %d %s", i, s, err.msg);
            ft_t1_free(t);
            continue;
        }
        FT_CHECK(s == FT_OK, "case %zu: %s", i, err.msg);
        if (!t) continue;
        ft_config c;
        long long g[3], b[3];
        cfg_of(t, "tile=1", &c);
        FT_CHECK(ft_t1_launch(t, &c, g, b, &err) == FT_OK && g[0] == cases[i].grid &&
                     b[0] == cases[i].block,
                 "case %zu: grid %lld block %lld: %s", i, g[0], b[0], err.msg);
        ft_t1_free(t);
    }
}

/* Type uint (the schema's; the BAT suite's nbody file writes it) is read as int: the hand-written
 * file with every int parameter a uint is the same space. */
static void test_uint_params(void) {
    char *text = ft_test_read_file(DATA "saxpy_tiled.json");
    FT_CHECK(text != NULL, "read");
    if (!text) return;
    ft_t1 *t = NULL, *u = NULL;
    ft_err err = {0};
    FT_CHECK(ft_t1_from_buffer(text, strlen(text), "i.json", NULL, NULL, &t, &err) == FT_OK, "%s",
             err.msg);
    int changed = 0;
    for (char *at = text; (at = strstr(at, "\"Type\": \"int\", \"Values\"")) != NULL; changed++)
        memcpy(at, "\"Type\":\"uint\", ", 15); /* as long as the \"Type\": \"int\", it replaces */
    FT_CHECK(changed == 3, "%d parameters made uint", changed);
    FT_CHECK(ft_t1_from_buffer(text, strlen(text), "u.json", NULL, NULL, &u, &err) == FT_OK, "%s",
             err.msg);
    if (t && u) {
        FT_CHECK(ft_space_size(&u->space) == ft_space_size(&t->space),
                 "%lld configurations, %lld as int", (long long)ft_space_size(&u->space),
                 (long long)ft_space_size(&t->space));
        for (int p = 0; p < 3; p++)
            FT_CHECK(!u->labels[p] && u->params[p].n == t->params[p].n, "parameter %d", p);
    }
    ft_t1_free(t);
    ft_t1_free(u);
    free(text);
}

/* A file without ProblemSize (the schema does not ask for one; the BAT suite's files give none):
 * read when GlobalSize sizes the grid, refused in one line where anything names ProblemSize. */
static void test_no_problem_size(void) {
    static const char fmt[] =
        "{\"ConfigurationSpace\": {\"TuningParameters\": [{\"Name\": \"tile\","
        " \"Type\": \"int\", \"Values\": \"[1, 2]\", \"Default\": 1}], \"Conditions\": [%s]},"
        " \"KernelSpecification\": {\"Language\": \"CUDA\", \"KernelName\": \"k\","
        " \"KernelFile\": \"k.cu\", \"LocalSize\": {\"X\": \"64 * tile\"}, %s"
        " \"Arguments\": [{\"Name\": \"y\", \"Type\": \"float\", \"MemoryType\": \"Vector\","
        " \"FillType\": \"Constant\", \"Size\": %s, \"FillValue\": 1.0}]}}";
    static const char cond[] = "{\"Parameters\": [\"tile\"], \"Expression\": \"%s\"}";
    static const char global[] = "\"GlobalSize\": {\"X\": \"1000\"},";
    static const struct {
        const char *condition, *geometry, *size, *refusal; /* refusal NULL: read */
    } cases[] = {
        {"tile < 3", global, "1000", NULL},
        {"tile < 3", global, "\"1000 * max(tile)\"", NULL},
        {"tile < 3", global, "\"ProblemSize[0]\"",
         "argument y: Size names ProblemSize, which KernelSpecification does not give"},
        {"tile < ProblemSize[0]", global, "1000",
         "tile < ProblemSize[0] names ProblemSize, which KernelSpecification does not give"},
        {"tile < 3", "\"GlobalSize\": {\"X\": \"ProblemSize[0]\"},", "1000",
         "GlobalSize.X names ProblemSize"},
        {"tile < 3", "\"GridDivX\": [\"tile\"],", "1000",
         "GridDivX divides ProblemSize, which KernelSpecification does not give"},
        {"tile < 3", "", "1000", "no GlobalSize.X nor ProblemSize to size the grid by"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char c[256], text[2048];
        snprintf(c, sizeof c, cond, cases[i].condition);
        snprintf(text, sizeof text, fmt, c, cases[i].geometry, cases[i].size);
        ft_t1 *t = NULL;
        ft_err err = {0};
        ft_status s = ft_t1_from_buffer(text, strlen(text), "p.json", NULL, NULL, &t, &err);
        if (cases[i].refusal) {
            FT_CHECK(s == FT_EFORMAT && strstr(err.msg, cases[i].refusal) && !strchr(err.msg, '\n'),
                     "case %zu refused: %d %s", i, s, err.msg);
            ft_t1_free(t);
            continue;
        }
        FT_CHECK(s == FT_OK && t->nproblem == 0, "case %zu: %s", i, err.msg);
        if (!t) continue;
        ft_config cfg;
        long long g[3], b[3];
        cfg_of(t, "tile=2", &cfg);
        /* 1000 threads in blocks of 128: 8 blocks, the last partial */
        FT_CHECK(ft_t1_launch(t, &cfg, g, b, &err) == FT_OK && g[0] == 8 && b[0] == 128 &&
                     g[1] == 1 && g[2] == 1,
                 "case %zu: grid %lld block %lld: %s", i, g[0], b[0], err.msg);
        FT_CHECK(t->args[0].elems == (i == 0 ? 1000 : 2000), "case %zu: %lld elements", i,
                 t->args[0].elems);
        ft_t1_free(t);
    }
}

/* String tunables as a condition sees them: strings, compared with string literals and members
 * of tuples, their Values a JSON list or a Python list expression. 2 x 3 x 2 = 12 configurations;
 * layout=col needs block_size_x=64 (3 of them out) and order 'c' is out: 6 allowed. */
static void test_string_conditions(void) {
    static const char text[] =
        "{\"General\": {\"BenchmarkName\": \"s\", \"OutputFormat\": \"JSON\"},"
        " \"ConfigurationSpace\": {\"TuningParameters\": ["
        "  {\"Name\": \"layout\", \"Type\": \"string\", \"Values\": [\"row\", \"col\"],"
        "   \"Default\": \"row\"},"
        "  {\"Name\": \"order\", \"Type\": \"string\", \"Values\": \"['a', 'b', 'c']\","
        "   \"Default\": \"a\"},"
        "  {\"Name\": \"block_size_x\", \"Type\": \"int\", \"Values\": [32, 64], \"Default\": 32}],"
        "  \"Conditions\": [{\"Expression\": \"layout != 'col' or block_size_x == 64\"},"
        "   {\"Expression\": \"order in ('a', \\\"b\\\")\"}]},"
        " \"KernelSpecification\": {\"Language\": \"CUDA\", \"KernelName\": \"k\","
        " \"KernelFile\": \"k.cu\", \"ProblemSize\": [1000], \"Arguments\": [{\"Name\": \"y\","
        " \"Type\": \"float\", \"MemoryType\": \"Vector\", \"FillType\": \"Constant\","
        " \"Size\": \"ProblemSize[0]\", \"FillValue\": 1.0}]}}";
    ft_t1 *t = NULL;
    ft_err err = {0};
    FT_CHECK(ft_t1_from_buffer(text, strlen(text), "s.json", NULL, NULL, &t, &err) == FT_OK, "%s",
             err.msg);
    if (!t) return;
    ft_config *cfgs = NULL;
    int64_t n = 0;
    FT_CHECK(ft_t1_enumerate(t, &cfgs, &n, &err) == FT_OK && n == 6, "%lld allowed (%s)",
             (long long)n, err.msg);
    free(cfgs);
    ft_config c;
    int ok = 1;
    char why[200] = "";
    cfg_of(t, "layout=col,order=a,block_size_x=32", &c);
    FT_CHECK(ft_t1_allowed(t, &c, &ok, why, sizeof why, &err) == FT_OK && !ok &&
                 strstr(why, "layout != 'col'"),
             "col with 32 is out: %s", why);
    char defs[FT_T1_MAX_DEFINES][96];
    cfg_of(t, "layout=col,order=b,block_size_x=64", &c);
    int nd = ft_t1_defines(t, &c, defs, FT_T1_MAX_DEFINES);
    FT_CHECK(nd >= 3 && !strcmp(defs[0], "layout=col") && !strcmp(defs[1], "order=b"),
             "the labels are the macros: %s %s", defs[0], defs[1]);
    ft_t1_free(t);
    /* A string tunable whose Values expression gives a number, and the other way round. */
    static const char *const bad[] = {"[\\\"a\\\", 2]", "['a'] + [1]"};
    for (int i = 0; i < 2; i++) {
        char buf[1024];
        snprintf(buf, sizeof buf,
                 "{\"ConfigurationSpace\": {\"TuningParameters\": [{\"Name\": \"o\","
                 " \"Type\": \"string\", \"Values\": \"%s\", \"Default\": \"a\"}]},"
                 " \"KernelSpecification\": {\"Language\": \"CUDA\", \"KernelName\": \"k\","
                 " \"KernelFile\": \"k.cu\", \"ProblemSize\": [8], \"Arguments\": []}}",
                 bad[i]);
        t = NULL;
        FT_CHECK(ft_t1_from_buffer(buf, strlen(buf), "b.json", NULL, NULL, &t, &err) ==
                         FT_EFORMAT &&
                     strstr(err.msg, "is not a string"),
                 "Values %s: %s", bad[i], err.msg);
        ft_t1_free(t);
    }
}

/* The community's T1 files against the landscapes Kernel Tuner measured with them. */
static void check_against(const char *ldir, const char *t1name, const char *kfile, const char *land) {
    char path[1200], kpath[1200];
    snprintf(path, sizeof path, "%s/kernels/%s", ldir, t1name);
    snprintf(kpath, sizeof kpath, "%s/kernels/%s", ldir, kfile);
    ft_t1 *t = NULL;
    ft_err err = {0};
    FT_CHECK(ft_t1_load(path, kpath, &t, &err) == FT_OK, "%s", err.msg);
    if (!t) return;
    snprintf(path, sizeof path, "%s/gpu/%s", ldir, land);
    ft_landscape l;
    FT_CHECK(ft_landscape_load(path, &l, &err) == FT_OK, "%s", err.msg);
    ft_config *cfgs = NULL;
    int64_t n = 0;
    FT_CHECK(ft_t1_enumerate(t, &cfgs, &n, &err) == FT_OK, "%s", err.msg);
    FT_CHECK(n == l.ncands, "%s: %lld allowed, %d measured", t1name, (long long)n, l.ncands);
    /* every measured configuration is allowed (parameters matched by name) */
    int missing = 0;
    for (int c = 0; c < l.ncands; c++) {
        ft_config m;
        ft_config_default(&t->space, &m);
        for (int i = 0; i < l.space.nparams; i++) {
            int ti = ft_space_param(&t->space, l.space.params[i].name);
            char v[64];
            ft_config_value_str(&l.space, i, l.cands[c].v[i], v, sizeof v);
            int found = 0;
            for (int k = 0; ti >= 0 && k < t->params[ti].n; k++) {
                char tv[64];
                ft_config_value_str(&t->space, ti, t->params[ti].values[k], tv, sizeof tv);
                if (strcmp(tv, v) == 0) {
                    m.v[ti] = t->params[ti].values[k];
                    found = 1;
                }
            }
            missing += !found;
        }
        int ok = 0;
        ft_t1_allowed(t, &m, &ok, NULL, 0, &err);
        missing += !ok;
    }
    FT_CHECK(missing == 0, "%s: %d measured configurations not allowed or not in the space", t1name, missing);
    free(cfgs);
    ft_landscape_free(&l);
    ft_t1_free(t);
}

static void test_community_files(void) {
    char ldir[1024], probe[1200];
    const char *env = getenv("FT_LANDSCAPES_DIR");
    snprintf(ldir, sizeof ldir, "%s", env && *env ? env : FT_SOURCE_DIR "/../shared/landscapes");
    snprintf(probe, sizeof probe, "%s/kernels/convolution_milo.json", ldir);
    struct stat sb;
    if (stat(probe, &sb) != 0) {
        fprintf(stderr, "  (no community T1 files beside the source tree: skipped)\n");
        return;
    }
    check_against(ldir, "convolution_milo.json", "convolution_milo.cu", "convolution-A100.json.gz");
    check_against(ldir, "dedispersion_milo.json", "dedispersion.cu", "dedispersion-A4000.json.gz");
    /* Kernel Tuner's grid for the convolution: ceil(4096 / (48 * 3)) = 29, ceil(4096 / (4 * 2)) = 512 */
    snprintf(probe, sizeof probe, "%s/kernels/convolution_milo.json", ldir);
    ft_t1 *t = NULL;
    ft_err err = {0};
    if (ft_t1_load(probe, NULL, &t, &err) == FT_OK) {
        ft_config c;
        cfg_of(t, "block_size_x=48,block_size_y=4,tile_size_x=3,tile_size_y=2", &c);
        long long g[3], b[3];
        FT_CHECK(ft_t1_launch(t, &c, g, b, &err) == FT_OK && g[0] == 29 && g[1] == 512 && b[0] == 48 &&
                     b[1] == 4,
                 "grid %lld,%lld", g[0], g[1]);
        /* input (4096 + 15 - 1)^2 floats, the filter 15 x 15 in constant memory */
        FT_CHECK(t->args[1].elems == 4110LL * 4110 && t->args[2].elems == 225 && t->args[2].constant,
                 "sizes");
    }
    ft_t1_free(t);
}

int main(void) {
    FT_RUN(test_hand_checked);
    FT_RUN(test_kernel_not_a_file);
    FT_RUN(test_kernel_path_quoted);
    FT_RUN(test_bad_files);
    FT_RUN(test_labels_apart);
    FT_RUN(test_read_notes);
    FT_RUN(test_vector_fills);
    FT_RUN(test_generator_fill);
    FT_RUN(test_walk_matches_whole);
    FT_RUN(test_walk_large);
    FT_RUN(test_draw_random_spaces);
    FT_RUN(test_draw_uniform);
    FT_RUN(test_draw_large);
    FT_RUN(test_argument_types);
    FT_RUN(test_hub_forms);
    FT_RUN(test_zero_block);
    FT_RUN(test_numeric_geometry);
    FT_RUN(test_no_problem_size);
    FT_RUN(test_uint_params);
    FT_RUN(test_string_conditions);
    FT_RUN(test_community_files);
    return ft_test_finish();
}
