/* test_profile.c: the profile store: round trip, merge, per-entry validation, malformed and
 * too-new files, atomic saves, concurrent updates, nearest-shape lookup (docs/profiles.md). */
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/filelock.h"
#include "core/json.h"
#include "ft_test.h"
#include "kernels/registry.h"
#include "op/op_json.h"
#include "profiles/src/profile.h"

static char dir[256];

static void write_text(const char *path, const char *text) {
    FILE *f = fopen(path, "wb");
    if (!f) {
        perror(path);
        exit(2);
    }
    fputs(text, f);
    fclose(f);
}

/* Files in dir whose name contains ".tmp." (left-over temporary files). */
static int temp_files(void) {
    DIR *d = opendir(dir);
    int n = 0;
    struct dirent *e;
    while (d && (e = readdir(d)))
        n += strstr(e->d_name, ".tmp.") != NULL;
    if (d) closedir(d);
    return n;
}

static const char *DEVICE = "cpu: Test CPU x 16 (SkylakeX)";

static json_t *stats(double median) {
    return json_pack("{s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:i, s:i, s:b, s:f}",
                     "median_s", median, "q1_s", median * 0.99, "q3_s", median * 1.01, "iqr_s",
                     median * 0.02, "min_s", median * 0.98, "max_s", median * 1.1, "mean_s", median,
                     "stdev_s", median * 0.01, "ci_rel", 0.005, "samples", 40, "batch", 1,
                     "converged", 1, "total_s", median * 40);
}

/* A complete entry as the tuner writes it (docs/profiles.md). */
static json_t *entry(const char *op, const char *backend, const char *device, json_t *shape,
                     json_t *attrs, json_t *config, double median) {
    json_t *e = json_pack(
        "{s:s, s:s, s:s, s:o, s:o, s:o, s:o, s:{s:o, s:o}, s:f, s:f, "
        "s:{s:f, s:f, s:s, s:O, s:b}, s:[], s:{s:s, s:i, s:s, s:s, s:s, s:s, s:s}, s:s, s:s, "
        "s:i, s:i}",
        "op", op, "backend", backend, "device", device, "shape", shape, "attrs", attrs, "config",
        json_deep_copy(config), "stats", stats(median), "default", "config", config, "stats",
        stats(median * 2), "speedup", 2.0, "roofline_frac", 0.4, "verification", "max_rel_err",
        3e-7, "tolerance", 1e-4, "output", "out", "shape", shape, "reduced", 0, "tie",
        "environment", "cpu", "Test CPU", "cores", 16, "blas", "OpenBLAS", "blas_core", "SkylakeX",
        "compiler", "cc", "flaretune", "0.1.0", "source_hash", "abc", "tuned_at",
        "2025-01-01T00:00:00Z", "strategy", "exhaustive", "evaluations", 10, "space_valid", 10);
    if (!e) {
        fprintf(stderr, "json_pack failed building a test entry\n");
        exit(2);
    }
    return e;
}

static json_t *loss_entry(const char *backend, long m, const char *scheme, double median) {
    return entry("loss", backend, DEVICE,
                 json_pack("{s:i, s:i, s:i}", "M", (int)m, "H", 1024, "V", 32768),
                 json_pack("{s:s}", "scheme", scheme), json_object(), median);
}

static json_t *dflare_entry(long n, double median) {
    return entry("fusion.dflare", "ref", DEVICE,
                 json_pack("{s:i, s:i, s:i, s:i}", "N", (int)n, "T", 4, "H", 1024, "D", 3),
                 json_object(), json_object(), median);
}

static json_t *doc_of(json_t *entries) {
    return json_pack("{s:i, s:s, s:o}", "schema_version", 1, "generator", "test", "entries",
                     entries);
}

static void save_doc(const char *path, json_t *doc) {
    if (json_dump_file(doc, path, JSON_INDENT(2))) {
        fprintf(stderr, "cannot write %s\n", path);
        exit(2);
    }
    json_decref(doc);
}

/* ---- tests ---------------------------------------------------------------------------------- */

static void test_round_trip(void) {
    ft_err err = {0};
    ft_profile *p = ft_profile_new();
    json_t *a = loss_entry("ref", 512, "dpace", 1e-3), *b = loss_entry("ref", 4096, "dpace", 5e-3),
           *c = dflare_entry(2048, 2e-3);
    ft_profile_outcome out = FT_PROFILE_KEPT;
    FT_CHECK(ft_profile_add(p, b, &out, &err) == FT_OK, "add: %s", err.msg);
    FT_CHECK(out == FT_PROFILE_ADDED, "outcome %d", out);
    FT_CHECK(ft_profile_add(p, c, NULL, &err) == FT_OK, "add: %s", err.msg);
    FT_CHECK(ft_profile_add(p, a, NULL, &err) == FT_OK, "add: %s", err.msg);
    FT_CHECK(ft_profile_count(p) == 3, "count %d", ft_profile_count(p));
    const char *path = ft_test_path(dir, "round.json");
    FT_CHECK(ft_profile_save(p, path, &err) == FT_OK, "save: %s", err.msg);
    ft_profile *q = NULL;
    FT_CHECK(ft_profile_load(path, &q, &err) == FT_OK, "load: %s", err.msg);
    FT_CHECK(q && ft_profile_count(q) == 3 && ft_profile_warning_count(q) == 0,
             "loaded %d entries, %d warnings", ft_profile_count(q), ft_profile_warning_count(q));
    /* Every entry comes back unchanged, in the profile's order (registry order of ops: the
     * fusion op before loss; then sizes ascending). */
    json_t *want[3] = {c, a, b};
    for (int i = 0; q && i < 3 && i < ft_profile_count(q); i++) {
        const ft_profile_entry *e = ft_profile_entry_at(q, i);
        FT_CHECK(json_equal((json_t *)e->json, want[i]), "entry %d differs after the round trip",
                 i);
    }
    json_error_t je;
    json_t *doc = json_load_file(path, 0, &je);
    FT_CHECK(doc && json_integer_value(json_object_get(doc, "schema_version")) == 1,
             "schema_version 1 written");
    FT_CHECK(doc && json_is_string(json_object_get(doc, "generator")), "generator written");
    json_decref(doc);
    /* The same entries added in another order give the same bytes. */
    ft_profile *r = ft_profile_new();
    ft_profile_add(r, a, NULL, &err);
    ft_profile_add(r, b, NULL, &err);
    ft_profile_add(r, c, NULL, &err);
    const char *path2 = ft_test_path(dir, "round2.json");
    FT_CHECK(ft_profile_save(r, path2, &err) == FT_OK, "save: %s", err.msg);
    char *t1 = ft_test_read_file(path), *t2 = ft_test_read_file(path2);
    FT_CHECK(t1 && t2 && strcmp(t1, t2) == 0, "order of adding changes the file");
    free(t1);
    free(t2);
    FT_CHECK(temp_files() == 0, "temporary files left behind: %d", temp_files());
    /* The profile keeps its own copy: changing the caller's object changes nothing. */
    json_object_set_new(a, "op", json_string("changed"));
    FT_CHECK(strcmp(ft_profile_entry_at(r, 1)->op->name, "loss") == 0 &&
                 strcmp(json_string_value(json_object_get(ft_profile_entry_at(r, 1)->json, "op")),
                        "loss") == 0,
             "the profile shares the caller's object");
    json_decref(a);
    json_decref(b);
    json_decref(c);
    ft_profile_free(p);
    ft_profile_free(q);
    ft_profile_free(r);
}

static double median_of(const ft_profile *p, const char *op, long m) {
    for (int i = 0; i < ft_profile_count(p); i++) {
        const ft_profile_entry *e = ft_profile_entry_at(p, i);
        json_t *v = json_object_get(e->shape, strcmp(op, "loss") == 0 ? "M" : "N");
        if (strcmp(e->op->name, op) == 0 && json_integer_value(v) == m) return e->median_s;
    }
    return -1;
}

/* An entry of a lower kind (a stopped run's, a busy one's: low, and low_faster, faster still)
 * never takes the place of high, however much faster; high takes its place, slower or not;
 * between two of the lower kind, the faster. */
static void check_lower_kind(json_t *low, json_t *low_faster, json_t *high, const char *kind) {
    ft_err err = {0};
    ft_profile_outcome out;
    ft_profile *p = ft_profile_new(), *q = ft_profile_new(), *r = ft_profile_new();
    ft_profile_add(p, high, &out, &err);
    ft_profile_add(p, low, &out, &err);
    FT_CHECK(out == FT_PROFILE_KEPT, "%s faster entry: outcome %d", kind, out);
    ft_profile_add(q, low, &out, &err);
    ft_profile_add(q, high, &out, &err);
    FT_CHECK(out == FT_PROFILE_REPLACED, "replacing %s entry: outcome %d", kind, out);
    ft_profile_add(r, low, &out, &err);
    ft_profile_add(r, low_faster, &out, &err);
    FT_CHECK(out == FT_PROFILE_REPLACED, "between two of %s entries the faster: outcome %d", kind,
             out);
    ft_profile_free(p);
    ft_profile_free(q);
    ft_profile_free(r);
}

static void test_merge_keeps_best(void) {
    ft_err err = {0};
    ft_profile *a = ft_profile_new(), *b = ft_profile_new();
    json_t *slow = loss_entry("ref", 512, "dpace", 2e-3),
           *fast = loss_entry("ref", 512, "dpace", 1e-3),
           *other = loss_entry("ref", 512, "uniform", 3e-3),
           *big = loss_entry("ref", 8192, "dpace", 9e-3);
    ft_profile_outcome out;
    ft_profile_add(a, slow, &out, &err);
    ft_profile_add(a, big, &out, &err);
    ft_profile_add(b, fast, &out, &err);
    ft_profile_add(b, other, &out, &err);
    FT_CHECK(ft_profile_merge(a, b, &err) == FT_OK, "merge: %s", err.msg);
    FT_CHECK(ft_profile_count(a) == 3, "3 keys after merging, got %d", ft_profile_count(a));
    const ft_profile_entry *e =
        ft_profile_lookup(a, "loss", "ref", DEVICE, json_object_get(fast, "attrs"),
                          json_object_get(fast, "shape"), NULL);
    FT_CHECK(e && e->median_s == 1e-3, "the faster entry wins the key");
    /* Merging the slower one back changes nothing. */
    ft_profile *c = ft_profile_new();
    ft_profile_add(c, slow, NULL, &err);
    FT_CHECK(ft_profile_merge(b, c, &err) == FT_OK, "merge: %s", err.msg);
    e = ft_profile_lookup(b, "loss", "ref", DEVICE, json_object_get(fast, "attrs"),
                          json_object_get(fast, "shape"), NULL);
    FT_CHECK(e && e->median_s == 1e-3, "slower entry replaced the faster one");
    /* Outcomes of ft_profile_add. */
    ft_profile_add(c, fast, &out, &err);
    FT_CHECK(out == FT_PROFILE_REPLACED, "faster entry: outcome %d", out);
    ft_profile_add(c, slow, &out, &err);
    FT_CHECK(out == FT_PROFILE_KEPT, "slower entry: outcome %d", out);
    ft_profile_add(c, fast, &out, &err);
    FT_CHECK(out == FT_PROFILE_KEPT, "equal median keeps the entry there: outcome %d", out);
    /* A run Ctrl-C stopped (its figures unconfirmed) never takes the place of one that
     * finished, however fast its search median, and a finished one takes its place even when
     * slower, in either order and through a merge. */
    json_t *stopped = loss_entry("ref", 512, "dpace", 0.5e-3);
    json_object_set_new(stopped, "interrupted", json_true());
    json_t *stopped2 = json_deep_copy(stopped);
    json_object_set_new(stopped2, "stats", stats(0.4e-3));
    check_lower_kind(stopped, stopped2, slow, "a stopped run's");
    ft_profile *s2 = ft_profile_new();
    ft_profile_add(s2, stopped, &out, &err);
    FT_CHECK(ft_profile_merge(s2, c, &err) == FT_OK && ft_profile_count(s2) == 1 &&
                 ft_profile_entry_at(s2, 0)->median_s == 1e-3,
             "merged, the finished run's entry stays");
    /* Next, a run on a busy machine never takes the place of one on a quiet machine however
     * low its median (the scheduler moves medians either way), and a quiet one takes its place
     * even when slower; between two busy ones the faster. */
    json_t *busy = loss_entry("ref", 512, "dpace", 0.3e-3);
    json_object_set_new(busy, "contention", json_pack("{s:b}", "busy", 1));
    json_t *busy2 = json_deep_copy(busy);
    json_object_set_new(busy2, "stats", stats(0.2e-3));
    check_lower_kind(busy, busy2, slow, "a busy run's");
    /* ... and a stopped run stays below a finished one, busy or not */
    check_lower_kind(stopped, stopped2, busy, "a stopped quiet run's");
    json_decref(busy);
    json_decref(busy2);
    json_decref(stopped);
    json_decref(stopped2);
    ft_profile_free(s2);
    /* Devices are part of the key. */
    json_t *dev2 = json_deep_copy(fast);
    json_object_set_new(dev2, "device", json_string("cpu: Other CPU x 8 (Haswell)"));
    ft_profile_add(c, dev2, &out, &err);
    FT_CHECK(out == FT_PROFILE_ADDED && ft_profile_count(c) == 2, "another device is another key");
    /* Two entries of one key in one file: the file loads as its best. */
    save_doc(ft_test_path(dir, "dup.json"), doc_of(json_pack("[O, O]", slow, fast)));
    ft_profile *d = NULL;
    FT_CHECK(ft_profile_load(ft_test_path(dir, "dup.json"), &d, &err) == FT_OK, "load: %s",
             err.msg);
    FT_CHECK(d && ft_profile_count(d) == 1 && ft_profile_entry_at(d, 0)->median_s == 1e-3,
             "duplicate key in one file");
    json_decref(slow);
    json_decref(fast);
    json_decref(other);
    json_decref(big);
    json_decref(dev2);
    ft_profile_free(a);
    ft_profile_free(b);
    ft_profile_free(c);
    ft_profile_free(d);
}

static int warning_has(const ft_profile *p, const char *a, const char *b) {
    for (int i = 0; i < ft_profile_warning_count(p); i++) {
        const char *w = ft_profile_warning_at(p, i);
        if (strstr(w, a) && strstr(w, b)) return 1;
    }
    return 0;
}

static void test_per_entry_validation(void) {
    ft_err err = {0};
    json_t *good1 = loss_entry("ref", 512, "dpace", 1e-3), *good2 = dflare_entry(2048, 2e-3);
    json_t *no_stats = loss_entry("ref", 1024, "dpace", 1e-3);
    json_object_del(no_stats, "stats");
    json_t *bad_type = loss_entry("ref", 2048, "dpace", 1e-3);
    json_object_set_new(bad_type, "speedup", json_string("fast"));
    json_t *bad_op = loss_entry("ref", 4096, "dpace", 1e-3);
    json_object_set_new(bad_op, "op", json_string("loss.v2"));
    json_t *bad_param = loss_entry("ref", 8192, "dpace", 1e-3);
    json_object_set_new(bad_param, "config", json_pack("{s:i}", "tile", 64));
    json_t *bad_shape = loss_entry("ref", 16384, "dpace", 1e-3);
    json_object_del(json_object_get(bad_shape, "shape"), "V");
    json_t *bad_median = loss_entry("ref", 32768, "dpace", 1e-3);
    json_object_set_new(json_object_get(bad_median, "stats"), "median_s", json_real(-1));
    /* A thread count this machine does not offer is still a valid result of another. */
    json_t *threads = loss_entry("cpu", 512, "dpace", 1e-3);
    json_object_set_new(threads, "config", json_pack("{s:i}", "threads", 4096));
    json_t *entries = json_pack("[O, O, O, O, O, O, i, O, O, O]", good1, no_stats, bad_type, bad_op,
                                bad_param, bad_shape, 42, good2, bad_median, threads);
    save_doc(ft_test_path(dir, "mixed.json"), doc_of(entries));
    ft_profile *p = NULL;
    FT_CHECK(ft_profile_load(ft_test_path(dir, "mixed.json"), &p, &err) == FT_OK, "load: %s",
             err.msg);
    if (!p) return;
    FT_CHECK(ft_profile_count(p) == 3, "3 good entries, got %d", ft_profile_count(p));
    FT_CHECK(ft_profile_warning_count(p) == 7, "7 warnings, got %d", ft_profile_warning_count(p));
    /* The 42 is not an entry of any build: it is dropped, not kept aside. */
    FT_CHECK(ft_profile_skipped_count(p) == 6, "6 kept aside, got %d", ft_profile_skipped_count(p));
    for (int i = 0; i < ft_profile_warning_count(p); i++)
        fprintf(stderr, "    warning: %s\n", ft_profile_warning_at(p, i));
    FT_CHECK(warning_has(p, "entries[1] (loss on ref, M=1024", "'stats' is missing"), "no stats");
    FT_CHECK(warning_has(p, "entries[2]", "'speedup' should be a number or null, not a string"),
             "wrong type");
    FT_CHECK(warning_has(p, "entries[3] (loss.v2", "unknown op"), "unknown op");
    FT_CHECK(warning_has(p, "entries[4]", "unknown parameter 'tile'"), "unknown parameter");
    FT_CHECK(warning_has(p, "entries[5]", "lacks size 'V'"), "missing size");
    FT_CHECK(warning_has(p, "entries[6]", "not an object") &&
                 warning_has(p, "entries[6]", "dropped"),
             "not an object: dropped");
    FT_CHECK(warning_has(p, "entries[8]", "positive time"), "negative median");
    FT_CHECK(warning_has(p, "mixed.json", "skipped"), "warnings name the file");
    /* Saving keeps the skipped entries, so no result is lost to this build's view of them. */
    const char *out = ft_test_path(dir, "mixed_out.json");
    FT_CHECK(ft_profile_save(p, out, &err) == FT_OK, "save: %s", err.msg);
    json_error_t je;
    json_t *doc = json_load_file(out, 0, &je);
    FT_CHECK(doc && json_array_size(json_object_get(doc, "entries")) == 9,
             "9 entries written back, got %zu",
             doc ? json_array_size(json_object_get(doc, "entries")) : 0);
    json_decref(doc);
    /* A valid result for the key of a stale entry replaces it. */
    json_t *fixed = loss_entry("ref", 8192, "dpace", 5e-3);
    ft_profile_outcome how;
    FT_CHECK(ft_profile_add(p, fixed, &how, &err) == FT_OK, "add: %s", err.msg);
    FT_CHECK(how == FT_PROFILE_REPLACED && ft_profile_skipped_count(p) == 5,
             "stale entry replaced: outcome %d, %d skipped", how, ft_profile_skipped_count(p));
    /* Adding an invalid entry is refused with the reason. */
    FT_CHECK(ft_profile_add(p, bad_param, NULL, &err) == FT_EINVAL &&
                 strstr(err.msg, "unknown parameter 'tile'"),
             "invalid entry refused: %s", err.msg);
    FT_CHECK(ft_profile_entry_check(good1, &err) == FT_OK, "check: %s", err.msg);
    /* No default configuration that runs this shape: default and speedup are null. */
    json_t *no_default = loss_entry("ref", 512, "dpace", 1e-3);
    json_object_set_new(no_default, "default", json_null());
    json_object_set_new(no_default, "speedup", json_null());
    FT_CHECK(ft_profile_entry_check(no_default, &err) == FT_OK, "default null: %s", err.msg);
    json_object_set_new(no_default, "default", json_integer(1));
    FT_CHECK(ft_profile_entry_check(no_default, &err) == FT_EINVAL &&
                 strstr(err.msg, "'default' should be an object or null"),
             "default 1: %s", err.msg);
    json_decref(no_default);
    FT_CHECK(ft_profile_entry_check(bad_op, &err) == FT_EINVAL, "check refuses an unknown op");
    /* A thread count past an int is refused, not wrapped to 2 (2^32 + 2) nor left a mystery. */
    json_t *wide = loss_entry("cpu", 512, "dpace", 1e-3);
    json_object_set_new(wide, "config", json_pack("{s:I}", "threads", (json_int_t)4294967298LL));
    FT_CHECK(ft_profile_entry_check(wide, &err) == FT_EINVAL &&
                 strstr(err.msg, "threads=4294967298 is past any thread count"),
             "threads 2^32 + 2: %s", err.msg);
    json_decref(wide);
    json_t *list[] = {good1,     good2,     no_stats,   bad_type, bad_op,
                      bad_param, bad_shape, bad_median, threads,  fixed};
    for (size_t i = 0; i < sizeof list / sizeof list[0]; i++)
        json_decref(list[i]);
    ft_profile_free(p);
}

/* Attribute values are checked as `--attr` checks them: an entry whose value no call can have
 * (eps "abc", a scheme that does not exist, B = 0) is skipped with one line naming the entry
 * and the attribute, and kept aside to be written back. */
/* Attributes that say one thing however written are one key: an entry with eps "1e-6" (the
 * default) and one that leaves eps out are the same result, so adding the faster replaces the
 * slower (one entry, not two), and a call's lookup ("1e-06", as calls write it) finds it. */
static void test_attrs_one_key(void) {
    ft_err err = {0};
    ft_profile *p = ft_profile_new();
    json_t *plain = dflare_entry(2048, 7e-6), *spelt = dflare_entry(2048, 0.7e-6);
    json_object_set_new(json_object_get(spelt, "attrs"), "eps", json_string("0.000001"));
    ft_profile_outcome how = FT_PROFILE_KEPT;
    FT_CHECK(p && ft_profile_add(p, plain, &how, &err) == FT_OK && how == FT_PROFILE_ADDED,
             "first: %s", err.msg);
    FT_CHECK(ft_profile_add(p, spelt, &how, &err) == FT_OK && how == FT_PROFILE_REPLACED,
             "the faster, eps spelt out, replaces it: outcome %d %s", how, err.msg);
    FT_CHECK(ft_profile_count(p) == 1, "one entry for one key, got %d", ft_profile_count(p));
    json_t *shape = json_pack("{s:i, s:i, s:i, s:i}", "N", 2048, "T", 4, "H", 1024, "D", 3);
    const char *asked[] = {"1e-06", "1e-6", NULL};
    for (int i = 0; asked[i]; i++) {
        json_t *attrs = json_pack("{s:s}", "eps", asked[i]);
        const ft_profile_entry *e =
            ft_profile_lookup(p, "fusion.dflare", "ref", DEVICE, attrs, shape, NULL);
        FT_CHECK(e && fabs(e->median_s - 0.7e-6) < 1e-12, "eps=%s finds the entry", asked[i]);
        json_decref(attrs);
    }
    json_t *other = json_pack("{s:s}", "eps", "1e-5");
    FT_CHECK(!ft_profile_lookup(p, "fusion.dflare", "ref", DEVICE, other, shape, NULL),
             "eps=1e-5 is another key");
    json_decref(other);
    json_decref(shape);
    json_decref(plain);
    json_decref(spelt);
    ft_profile_free(p);
}

static void test_attr_values(void) {
    ft_err err = {0};
    json_t *eps = dflare_entry(2048, 2e-3), *scheme = loss_entry("ref", 512, "bogus", 1e-3),
           *block = loss_entry("ref", 1024, "dpace", 1e-3),
           *good = loss_entry("ref", 4096, "dpace", 1e-3);
    json_object_set_new(json_object_get(eps, "attrs"), "eps", json_string("abc"));
    json_object_set_new(json_object_get(block, "attrs"), "B", json_string("0"));
    save_doc(ft_test_path(dir, "attrs.json"),
             doc_of(json_pack("[o, o, o, o]", eps, scheme, block, good)));
    ft_profile *p = NULL;
    FT_CHECK(ft_profile_load(ft_test_path(dir, "attrs.json"), &p, &err) == FT_OK, "load: %s",
             err.msg);
    if (!p) return;
    FT_CHECK(ft_profile_count(p) == 1 && ft_profile_skipped_count(p) == 3,
             "1 entry, 3 skipped: %d, %d", ft_profile_count(p), ft_profile_skipped_count(p));
    FT_CHECK(warning_has(p, "entries[0] (fusion.dflare on ref, N=2048", "attribute eps: 'abc'"),
             "eps abc");
    FT_CHECK(
        warning_has(p, "entries[1] (loss on ref, M=512", "attribute scheme: unknown value 'bogus'"),
        "scheme bogus");
    FT_CHECK(warning_has(p, "entries[2] (loss on ref, M=1024", "attribute B: 0 is out of range"),
             "B 0");
    for (int i = 0; i < ft_profile_warning_count(p); i++)
        FT_CHECK(!strchr(ft_profile_warning_at(p, i), '\n'), "one line: %s",
                 ft_profile_warning_at(p, i));
    ft_profile_free(p);
    json_t *e = dflare_entry(512, 1e-3);
    json_object_set_new(json_object_get(e, "attrs"), "eps", json_string("abc"));
    FT_CHECK(ft_profile_entry_check(e, &err) == FT_EINVAL && strstr(err.msg, "eps"),
             "ft_profile_entry_check: %s", err.msg);
    json_decref(e);
}

/* A profile file holding text, which does not load: ft_profile_load fails with want, gives no
 * profile and says each of the NULL-terminated needles (its message stays in err); an update of
 * the file fails the same way and leaves it alone. */
static void check_refused(const char *path, const char *text, ft_status want, const char *what,
                          const char *const *needles, ft_err *err) {
    write_text(path, text);
    ft_profile *p = NULL;
    ft_status s = ft_profile_load(path, &p, err);
    FT_CHECK(s == want && !p, "%s: status %s", what, ft_status_name(s));
    int says = 1;
    for (int i = 0; needles[i]; i++)
        says &= strstr(err->msg, needles[i]) != NULL;
    FT_CHECK(says, "%s: message: %s", what, err->msg);
    ft_err e2 = {0};
    json_t *e = loss_entry("ref", 512, "dpace", 1e-3);
    s = ft_profile_update(path, e, &e2);
    FT_CHECK(s == want, "%s: update: %s", what, ft_status_name(s));
    char *now = ft_test_read_file(path);
    FT_CHECK(now && strcmp(now, text) == 0, "%s: the file was overwritten", what);
    free(now);
    json_decref(e);
}

/* Malformed JSON (the message names the file, line and column), JSON that is no profile, and
 * missing and blank files (empty profiles). */
static void test_malformed(void) {
    ft_err err = {0};
    const char *path = ft_test_path(dir, "broken.json");
    const char *says[] = {path, ":3:", "malformed JSON", NULL};
    check_refused(path,
                  "{\n  \"schema_version\": 1,\n  \"entries\": [ {\"op\": \"loss\",, } ]\n}\n",
                  FT_EFORMAT, "malformed JSON", says, &err);
    FT_CHECK(!strchr(err.msg, '\n'), "one line");
    /* Not a profile at all. */
    ft_profile *p = NULL;
    write_text(ft_test_path(dir, "array.json"), "[1, 2]\n");
    FT_CHECK(ft_profile_load(ft_test_path(dir, "array.json"), &p, &err) == FT_EFORMAT &&
                 strstr(err.msg, "not a flaretune profile"),
             "root not an object: %s", err.msg);
    write_text(ft_test_path(dir, "noentries.json"), "{\"schema_version\": 1}\n");
    FT_CHECK(ft_profile_load(ft_test_path(dir, "noentries.json"), &p, &err) == FT_EFORMAT &&
                 strstr(err.msg, "entries"),
             "no entries: %s", err.msg);
    /* Missing and empty files are empty profiles. */
    FT_CHECK(ft_profile_load(ft_test_path(dir, "absent.json"), &p, &err) == FT_OK && p &&
                 ft_profile_count(p) == 0,
             "missing file: %s", err.msg);
    ft_profile_free(p);
    write_text(ft_test_path(dir, "blank.json"), " \n\n");
    FT_CHECK(ft_profile_load(ft_test_path(dir, "blank.json"), &p, &err) == FT_OK && p &&
                 ft_profile_count(p) == 0,
             "blank file: %s", err.msg);
    ft_profile_free(p);
    FT_CHECK(temp_files() == 0, "temporary files left behind");
}

/* A save that fails part-way (the file size limit stops the write) leaves the old file. */
static void test_failed_save_keeps_file(void) {
    ft_err err = {0};
    const char *path = ft_test_path(dir, "keep.json");
    ft_profile *p = ft_profile_new();
    json_t *e = loss_entry("ref", 512, "dpace", 1e-3);
    ft_profile_add(p, e, NULL, &err);
    FT_CHECK(ft_profile_save(p, path, &err) == FT_OK, "save: %s", err.msg);
    char *before = ft_test_read_file(path);
    for (int m = 1024; m < 1024 + 64; m++) {
        json_t *x = loss_entry("ref", m, "dpace", 1e-3);
        ft_profile_add(p, x, NULL, &err);
        json_decref(x);
    }
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        struct rlimit rl = {4096, 4096};
        signal(SIGXFSZ, SIG_IGN);
        setrlimit(RLIMIT_FSIZE, &rl);
        ft_err e2 = {0};
        ft_status s = ft_profile_save(p, path, &e2);
        int ok = s == FT_EIO && strstr(e2.msg, "keep.json") != NULL;
        if (!ok) fprintf(stderr, "save past the size limit: %s\n", e2.msg);
        ft_profile_free(p);
        json_decref(e);
        _exit(ok ? 0 : 1);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    FT_CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "save past the size limit: FT_EIO");
    char *after = ft_test_read_file(path);
    FT_CHECK(before && after && strcmp(before, after) == 0, "a failed save changed the file");
    FT_CHECK(temp_files() == 0, "a failed save left its temporary file");
    /* A save into a missing directory fails with one line naming the path. */
    FT_CHECK(ft_profile_save(p, ft_test_path(dir, "nodir/p.json"), &err) == FT_EIO &&
                 strstr(err.msg, "nodir/p.json"),
             "save into a missing directory: %s", err.msg);
    free(before);
    free(after);
    json_decref(e);
    ft_profile_free(p);
}

static void test_schema_too_new(void) {
    ft_err err = {0};
    const char *path = ft_test_path(dir, "future.json");
    const char *says[] = {"schema_version 3 is newer", path, NULL};
    check_refused(path, "{\"schema_version\": 3, \"entries\": []}\n", FT_EUNSUPPORTED, "too new",
                  says, &err);
}

static void test_concurrent_update(void) {
    const char *path = ft_test_path(dir, "shared.json");
    enum { NPROC = 2, NADD = 20 };
    pid_t pids[NPROC];
    fflush(NULL);
    for (int c = 0; c < NPROC; c++) {
        pids[c] = fork();
        if (pids[c] == 0) {
            int bad = 0;
            for (int i = 0; i < NADD; i++) {
                ft_err err = {0};
                json_t *e = loss_entry("ref", 1000 * (c + 1) + i, "dpace", 1e-3 + i * 1e-6);
                if (ft_profile_update(path, e, &err)) {
                    fprintf(stderr, "child %d: %s\n", c, err.msg);
                    bad = 1;
                }
                json_decref(e);
            }
            _exit(bad);
        }
    }
    for (int c = 0; c < NPROC; c++) {
        int status = 0;
        waitpid(pids[c], &status, 0);
        FT_CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "writer %d failed", c);
    }
    ft_err err = {0};
    ft_profile *p = NULL;
    FT_CHECK(ft_profile_load(path, &p, &err) == FT_OK, "load: %s", err.msg);
    FT_CHECK(p && ft_profile_count(p) == NPROC * NADD && ft_profile_warning_count(p) == 0,
             "%d entries (want %d), %d warnings", ft_profile_count(p), NPROC * NADD,
             ft_profile_warning_count(p));
    for (int c = 0; p && c < NPROC; c++)
        for (int i = 0; i < NADD; i++)
            FT_CHECK(median_of(p, "loss", 1000 * (c + 1) + i) > 0, "key of writer %d, add %d lost",
                     c, i);
    FT_CHECK(temp_files() == 0, "temporary files left behind");
    struct stat st;
    FT_CHECK(stat(ft_test_path(dir, "shared.json.lock"), &st) == 0, "lock file beside the profile");
    ft_profile_free(p);
}

static void test_lookup(void) {
    ft_err err = {0};
    ft_profile *p = ft_profile_new();
    json_t *e[] = {loss_entry("ref", 512, "dpace", 1e-3), loss_entry("ref", 4096, "dpace", 8e-3),
                   loss_entry("ref", 512, "uniform", 2e-3), dflare_entry(2048, 3e-3)};
    for (int i = 0; i < 4; i++)
        ft_profile_add(p, e[i], NULL, &err);
    json_t *dpace = json_pack("{s:s}", "scheme", "dpace");
    json_t *q = json_pack("{s:i, s:i, s:i}", "M", 512, "H", 1024, "V", 32768);
    int exact = -1;
    const ft_profile_entry *r = ft_profile_lookup(p, "loss", "ref", DEVICE, dpace, q, &exact);
    FT_CHECK(r && exact == 1 && r->median_s == 1e-3, "exact match");
    json_object_set_new(q, "M", json_integer(600));
    r = ft_profile_lookup(p, "loss", "ref", DEVICE, dpace, q, &exact);
    FT_CHECK(r && exact == 0 && r->median_s == 1e-3, "M=600 falls back to M=512");
    json_object_set_new(q, "M", json_integer(3000));
    r = ft_profile_lookup(p, "loss", NULL, NULL, dpace, q, &exact);
    FT_CHECK(r && exact == 0 && r->median_s == 8e-3, "M=3000 falls back to M=4096");
    json_t *uniform = json_pack("{s:s}", "scheme", "uniform");
    r = ft_profile_lookup(p, "loss", "ref", DEVICE, uniform, q, &exact);
    FT_CHECK(r && r->median_s == 2e-3, "attrs select the entry");
    FT_CHECK(!ft_profile_lookup(p, "loss", "cuda", NULL, NULL, q, &exact) && exact == 0,
             "no entry of another backend");
    FT_CHECK(!ft_profile_lookup(p, "loss", NULL, "cpu: elsewhere", NULL, q, NULL),
             "no entry on another device");
    FT_CHECK(!ft_profile_lookup(p, "attention.decode", NULL, NULL, NULL, q, NULL), "no entry");
    /* Equally near by arithmetic (ratios 8, 8, 4 against 8, 4, 8), though the sums of logs
     * differ in their last bit: the first in the profile's order, as the emitted lookups'
     * products of ratios (both exactly 256) choose. */
    ft_profile *t = ft_profile_new();
    json_t *te[] = {
        entry("loss", "ref", DEVICE, json_pack("{s:i, s:i, s:i}", "M", 5, "H", 64, "V", 8),
              json_pack("{s:s}", "scheme", "dpace"), json_object(), 2e-3),
        entry("loss", "ref", DEVICE, json_pack("{s:i, s:i, s:i}", "M", 5, "H", 32, "V", 16),
              json_pack("{s:s}", "scheme", "dpace"), json_object(), 1e-3)};
    for (int i = 0; i < 2; i++)
        ft_profile_add(t, te[i], NULL, &err);
    json_t *tq = json_pack("{s:i, s:i, s:i}", "M", 40, "H", 256, "V", 64);
    r = ft_profile_lookup(t, "loss", "ref", DEVICE, dpace, tq, &exact);
    FT_CHECK(r && exact == 0 && r == ft_profile_entry_at(t, 0) && r->median_s == 1e-3,
             "a tie goes to the first entry (H=32), got %g", r ? r->median_s : -1.0);
    for (int i = 0; i < 2; i++)
        json_decref(te[i]);
    json_decref(tq);
    ft_profile_free(t);
    json_t *a = json_pack("{s:i}", "M", 1024), *b = json_pack("{s:i}", "M", 512);
    FT_CHECK_NEAR(ft_profile_shape_distance(a, b), log(2.0), 1e-12);
    json_decref(a);
    json_decref(b);
    /* A call: its sizes and attributes. */
    const ft_op *op = ft_op_find("fusion.dflare", &err);
    ft_call c;
    ft_call_init(&c, op);
    c.dim[ft_op_sym(op, "N")] = 2048;
    c.dim[ft_op_sym(op, "T")] = 4;
    c.dim[ft_op_sym(op, "H")] = 1024;
    c.dim[ft_op_sym(op, "D")] = 3;
    json_t *attrs = ft_attrs_to_json(&c), *shape = ft_dims_to_json(&c);
    json_t *x = entry("fusion.dflare", "ref", "cpu: call", shape, attrs, json_object(), 4e-3);
    ft_profile_add(p, x, NULL, &err);
    r = ft_profile_lookup_call(p, &c, "ref", "cpu: call", &exact);
    FT_CHECK(r && exact == 1 && r->median_s == 4e-3, "lookup by call, exact");
    c.dim[ft_op_sym(op, "N")] = 1000;
    r = ft_profile_lookup_call(p, &c, "ref", "cpu: call", &exact);
    FT_CHECK(r && exact == 0 && r->median_s == 4e-3, "lookup by call, nearest");
    json_decref(x);
    for (int i = 0; i < 4; i++)
        json_decref(e[i]);
    json_decref(dpace);
    json_decref(uniform);
    json_decref(q);
    ft_profile_free(p);
}

/* Files in dir (besides . and ..). */
static int files_in_dir(const char *d) {
    DIR *dd = opendir(d);
    int n = 0;
    struct dirent *e;
    while (dd && (e = readdir(dd)))
        n += !(e->d_name[0] == '.' && (!e->d_name[1] || (e->d_name[1] == '.' && !e->d_name[2])));
    if (dd) closedir(dd);
    return n;
}

static mode_t mode_of(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 ? st.st_mode & 07777 : 0;
}

/* A profile reached through a symbolic link is written through it, and locked as the target. */
static void test_links(void) {
    ft_err err = {0};
    const char *target = ft_test_path(dir, "target.json"), *link = ft_test_path(dir, "link.json");
    json_t *a = loss_entry("ref", 512, "dpace", 1e-3), *b = loss_entry("ref", 1024, "dpace", 1e-3);
    FT_CHECK(ft_profile_update(target, a, &err) == FT_OK, "update: %s", err.msg);
    FT_CHECK(symlink("target.json", link) == 0, "symlink");
    FT_CHECK(ft_profile_update(link, b, &err) == FT_OK, "update through the link: %s", err.msg);
    struct stat st;
    FT_CHECK(lstat(link, &st) == 0 && S_ISLNK(st.st_mode), "the link was replaced by a file");
    ft_profile *p = NULL;
    FT_CHECK(ft_profile_load(target, &p, &err) == FT_OK && ft_profile_count(p) == 2,
             "the target holds both entries: %d", ft_profile_count(p));
    ft_profile_free(p);
    FT_CHECK(access(ft_test_path(dir, "target.json.lock"), F_OK) == 0 &&
                 access(ft_test_path(dir, "link.json.lock"), F_OK) != 0,
             "the lock is taken on the target, not on the link");
    /* ft_profile_save follows the link too. */
    p = ft_profile_new();
    ft_profile_add(p, a, NULL, &err);
    FT_CHECK(ft_profile_save(p, link, &err) == FT_OK, "save through the link: %s", err.msg);
    FT_CHECK(lstat(link, &st) == 0 && S_ISLNK(st.st_mode), "save replaced the link by a file");
    ft_profile_free(p);
    /* A dangling link: the target is created where the link points. */
    const char *dangling = ft_test_path(dir, "dangling.json");
    FT_CHECK(symlink("created.json", dangling) == 0, "symlink");
    FT_CHECK(ft_profile_update(dangling, a, &err) == FT_OK, "update a dangling link: %s", err.msg);
    FT_CHECK(lstat(dangling, &st) == 0 && S_ISLNK(st.st_mode) &&
                 access(ft_test_path(dir, "created.json"), F_OK) == 0,
             "the dangling link's target was created");
    FT_CHECK(temp_files() == 0, "temporary files left behind");
    const char *names[] = {"link.json",         "dangling.json", "created.json",
                           "created.json.lock", "target.json",   "target.json.lock"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        unlink(ft_test_path(dir, names[i]));
    json_decref(a);
    json_decref(b);
}

/* Saving keeps the file's permissions; a read-only profile is refused, not replaced. */
static void test_modes(void) {
    ft_err err = {0};
    const char *path = ft_test_path(dir, "mode.json");
    json_t *a = loss_entry("ref", 512, "dpace", 1e-3), *b = loss_entry("ref", 1024, "dpace", 1e-3);
    FT_CHECK(ft_profile_update(path, a, &err) == FT_OK, "update: %s", err.msg);
    static const mode_t modes[] = {0640, 0600, 0664};
    for (size_t i = 0; i < sizeof modes / sizeof modes[0]; i++) {
        chmod(path, modes[i]);
        FT_CHECK(ft_profile_update(path, b, &err) == FT_OK, "update: %s", err.msg);
        FT_CHECK(mode_of(path) == modes[i], "mode %o became %o", (unsigned)modes[i],
                 (unsigned)mode_of(path));
    }
    chmod(path, 0440);
    char *before = ft_test_read_file(path);
    json_t *c = loss_entry("ref", 2048, "dpace", 1e-3);
    ft_status s = ft_profile_update(path, c, &err);
    FT_CHECK(s == FT_EIO && strstr(err.msg, "read-only") && strstr(err.msg, "mode.json"),
             "a read-only profile: %s %s", ft_status_name(s), err.msg);
    ft_profile *p = ft_profile_new();
    ft_profile_add(p, c, NULL, &err);
    FT_CHECK(ft_profile_save(p, path, &err) == FT_EIO && strstr(err.msg, "read-only"),
             "saving over a read-only profile: %s", err.msg);
    ft_profile_free(p);
    char *after = ft_test_read_file(path);
    FT_CHECK(before && after && strcmp(before, after) == 0, "a read-only profile was replaced");
    FT_CHECK(mode_of(path) == 0440, "mode %o", (unsigned)mode_of(path));
    free(before);
    free(after);
    chmod(path, 0644);
    unlink(path);
    unlink(ft_test_path(dir, "mode.json.lock"));
    json_decref(a);
    json_decref(b);
    json_decref(c);
}

static void expect_not_writable(const char *path, const char *needle, const char *what) {
    ft_err err = {0};
    ft_status s = ft_profile_check_writable(path, &err);
    fprintf(stderr, "    %s: %s\n", what, err.msg);
    FT_CHECK(s != FT_OK, "%s: accepted", what);
    FT_CHECK(strstr(err.msg, needle) != NULL, "%s: message '%s' lacks '%s'", what, err.msg, needle);
    FT_CHECK(!strchr(err.msg, '\n') && strlen(err.msg) < 300, "%s: one short line: %s", what,
             err.msg);
}

static void test_check_writable(void) {
    ft_err err = {0};
    int before = files_in_dir(dir);
    /* A new profile in a directory that exists, and an existing valid one, are fine; checking
     * leaves no file behind (no profile, no temporary file, no lock). */
    FT_CHECK(ft_profile_check_writable(ft_test_path(dir, "fresh.json"), &err) == FT_OK, "fresh: %s",
             err.msg);
    FT_CHECK(access(ft_test_path(dir, "fresh.json"), F_OK) != 0, "the check created the profile");
    const char *good = ft_test_path(dir, "good.json");
    save_doc(good, doc_of(json_pack("[o]", loss_entry("ref", 512, "dpace", 1e-3))));
    char *text = ft_test_read_file(good);
    FT_CHECK(ft_profile_check_writable(good, &err) == FT_OK, "good: %s", err.msg);
    char *again = ft_test_read_file(good);
    FT_CHECK(text && again && strcmp(text, again) == 0, "the check changed the profile");
    free(text);
    free(again);
    FT_CHECK(files_in_dir(dir) == before + 1, "the check left files: %d, want %d",
             files_in_dir(dir), before + 1);
    /* Each reason to refuse, one line. */
    expect_not_writable("", "empty", "empty path");
    ft_profile_check_writable("", &err);
    FT_CHECK(strstr(err.msg, "rename") == NULL, "empty path: %s", err.msg);
    expect_not_writable("/nonexistent/p.json", "/nonexistent", "missing directory");
    expect_not_writable("/nonexistent/p.json", "does not exist", "missing directory");
    expect_not_writable(dir, "is a directory", "a directory");
    char *longname = ft_test_alloc(5001 + strlen(dir) + 1);
    snprintf(longname, 5001 + strlen(dir) + 1, "%s/", dir);
    size_t k = strlen(longname);
    while (k < 5000)
        longname[k++] = 'p';
    longname[k] = '\0';
    expect_not_writable(longname, "too long", "5000 characters");
    ft_profile_check_writable(longname, &err);
    FT_CHECK(err.status == FT_EINVAL, "too long: %s", ft_status_name(err.status));
    free(longname);
    char *longpart = ft_test_alloc(strlen(dir) + 400);
    snprintf(longpart, strlen(dir) + 400, "%s/%0300d.json", dir, 0);
    expect_not_writable(longpart, "too long", "a 305-character file name");
    free(longpart);
    write_text(ft_test_path(dir, "garbage.json"), "{not json");
    expect_not_writable(ft_test_path(dir, "garbage.json"), "malformed JSON", "malformed");
    write_text(ft_test_path(dir, "notprofile.json"), "[1, 2]\n");
    expect_not_writable(ft_test_path(dir, "notprofile.json"), "not a flaretune profile",
                        "not a profile");
    write_text(ft_test_path(dir, "future2.json"), "{\"schema_version\": 9, \"entries\": []}\n");
    expect_not_writable(ft_test_path(dir, "future2.json"), "newer", "too new");
    save_doc(ft_test_path(dir, "ro.json"), doc_of(json_array()));
    chmod(ft_test_path(dir, "ro.json"), 0440);
    expect_not_writable(ft_test_path(dir, "ro.json"), "read-only", "read-only");
    expect_not_writable(ft_test_path(dir, "ro.json"), "chmod u+w",
                        "read-only: its owner may chmod it");
    chmod(ft_test_path(dir, "ro.json"), 0644);
    /* A directory where no file can be created: a read-only one (root ignores permission bits,
     * so there a directory of sysfs, which refuses new files to everyone). */
    if (geteuid() != 0) {
        const char *ro = ft_test_path(dir, "rodir");
        mkdir(ro, 0555);
        char in[600];
        snprintf(in, sizeof in, "%s/p.json", ro);
        expect_not_writable(in, "cannot create", "read-only directory");
        rmdir(ro);
    } else if (access("/sys/kernel", F_OK) == 0) {
        expect_not_writable("/sys/kernel/p.json", "cannot create", "sysfs directory");
    }
    /* A path that is a loop of symbolic links: refused, and no lock file left beside it. */
    {
        char a[600], b[600], la[620];
        snprintf(a, sizeof a, "%s", ft_test_path(dir, "loop_a"));
        snprintf(b, sizeof b, "%s", ft_test_path(dir, "loop_b"));
        snprintf(la, sizeof la, "%s.lock", a);
        FT_CHECK(symlink(b, a) == 0 && symlink(a, b) == 0, "symlinks %s %s", a, b);
        ft_err lerr = {0};
        FT_CHECK(ft_file_lock(a, &lerr) < 0 && strstr(lerr.msg, strerror(ELOOP)),
                 "locking a symlink loop: %s", lerr.msg);
        FT_CHECK(access(la, F_OK) != 0, "no lock file left beside a symlink loop");
        unlink(la);
        unlink(a);
        unlink(b);
    }
    /* The lock of a file in such a directory names the cause (the lock file is not there to
     * be opened for reading instead; that is not the reason). */
    {
        const char *ro = geteuid() != 0 ? ft_test_path(dir, "rodir") : "/sys/kernel";
        if (geteuid() != 0) mkdir(ro, 0555);
        char in[600];
        snprintf(in, sizeof in, "%s/p.json", ro);
        ft_err lerr = {0};
        if (access(ro, F_OK) == 0) {
            FT_CHECK(
                ft_file_lock(in, &lerr) < 0 &&
                    (strstr(lerr.msg, strerror(EACCES)) || strstr(lerr.msg, strerror(EROFS))) &&
                    !strstr(lerr.msg, strerror(ENOENT)),
                "locking %s: %s", in, lerr.msg);
        }
        if (geteuid() != 0) rmdir(ro);
    }
    const char *names[] = {"good.json", "garbage.json", "notprofile.json", "future2.json",
                           "ro.json"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        unlink(ft_test_path(dir, names[i]));
    FT_CHECK(temp_files() == 0, "temporary files left behind");
}

/* Runs check(path) in a child that became nobody (uid and gid 65534), the test's directory open
 * to it meanwhile, and expects 0 from it; a child that cannot become nobody skips. */
static void as_nobody(int (*check)(const char *path), const char *path, const char *what) {
    chmod(dir, 0755);
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        if (setgid(65534) != 0 || setuid(65534) != 0) _exit(77);
        _exit(check(path));
    }
    int status = -1;
    FT_CHECK(pid > 0 && waitpid(pid, &status, 0) == pid, "fork or wait failed");
    chmod(dir, 0700);
    FT_CHECK(WIFEXITED(status) && (WEXITSTATUS(status) == 0 || WEXITSTATUS(status) == 77),
             "%s: status %d", what, status);
    if (WIFEXITED(status) && WEXITSTATUS(status) == 77) printf("    skipped: setuid failed\n");
}

/* As another user: refused, saying whose the profile is, without chmod advice. */
static int refused_as_other_user(const char *path) {
    ft_err err = {0};
    ft_status s = ft_profile_check_writable(path, &err);
    fprintf(stderr, "    as uid 65534: %s\n", err.msg);
    return !(s != FT_OK && !strstr(err.msg, "chmod") &&
             strstr(err.msg, "this user (uid 65534) cannot write the profile (owned by uid 0, "
                             "mode 0644)"));
}

/* As another user: refused, for the sticky directory. */
static int refused_in_sticky_directory(const char *path) {
    ft_err err = {0};
    ft_status s = ft_profile_check_writable(path, &err);
    fprintf(stderr, "    as uid 65534: %s\n", err.msg);
    return !(s != FT_OK &&
             strstr(err.msg, "cannot replace the profile: it is owned by uid 0 in the sticky "
                             "directory"));
}

/* As another user: checked and updated. */
static int updated_as_other_user(const char *path) {
    ft_err err = {0};
    json_t *e = loss_entry("ref", 4242, "dpace", 1e-3);
    ft_status s = ft_profile_check_writable(path, &err);
    if (!s) s = ft_profile_update(path, e, &err);
    if (s) fprintf(stderr, "    as uid 65534: %s\n", err.msg);
    return s != FT_OK;
}

/* A profile with the owner's write bit that this user cannot write (another user owns it): the
 * message says so and whose it is, without chmod advice that only its owner could follow. As
 * root, a child that becomes nobody checks a root-owned 0644 profile; otherwise a root-owned
 * 0644 file of the system (refused before it is read). */
static void test_other_owner(void) {
    ft_err err = {0};
    if (geteuid() != 0) {
        struct stat st;
        const char *f = "/etc/passwd";
        if (stat(f, &st) != 0 || st.st_uid != 0 || !(st.st_mode & S_IWUSR) ||
            access(f, W_OK) == 0) {
            printf("    skipped: no root-owned 0644 file to try\n");
            return;
        }
        expect_not_writable(f, "cannot write the profile (owned by uid 0, mode 0644)",
                            "another user's profile");
        ft_profile_check_writable(f, &err);
        FT_CHECK(!strstr(err.msg, "chmod"), "another user's profile: %s", err.msg);
        return;
    }
    const char *path = ft_test_path(dir, "theirs.json");
    save_doc(path, doc_of(json_array()));
    chmod(path, 0644);
    as_nobody(refused_as_other_user, path, "a root-owned 0644 profile checked as another user");
    unlink(path);
}

/* A profile in a sticky directory (mode 1777, as /tmp) that another user owns cannot be renamed
 * over, whatever its own mode (0666 here): it is refused before the search, in one line that
 * says why, rather than after it ("cannot rename into place"). As root, a child that becomes
 * nobody checks a root-owned profile in a root-owned sticky directory. */
static void test_sticky_directory(void) {
    if (geteuid() != 0) {
        printf("    skipped: needs root to make a profile another user owns\n");
        return;
    }
    char sticky[600], path[700];
    snprintf(sticky, sizeof sticky, "%s/sticky", dir);
    snprintf(path, sizeof path, "%s/shared.json", sticky);
    FT_CHECK(mkdir(sticky, 0700) == 0 && chmod(sticky, 01777) == 0, "mkdir %s", sticky);
    save_doc(path, doc_of(json_array()));
    chmod(path, 0666);
    as_nobody(refused_in_sticky_directory, path, "another user's profile in a sticky directory");
    unlink(path);
    rmdir(sticky);
}

/* A shared profile (mode 0666, in a directory every user may write) whose lock file another
 * user created under the usual umask (0644): this user cannot write the lock, but flock needs
 * only a descriptor open for reading, so the check and the update both succeed. As root, a
 * child that becomes nobody updates a root-owned profile. */
static void test_shared_lock(void) {
    if (geteuid() != 0) {
        printf("    skipped: needs root to make a lock file another user owns\n");
        return;
    }
    char shared[600], path[700], lock[720];
    snprintf(shared, sizeof shared, "%s/open", dir);
    snprintf(path, sizeof path, "%s/shared.json", shared);
    snprintf(lock, sizeof lock, "%s.lock", path);
    FT_CHECK(mkdir(shared, 0700) == 0 && chmod(shared, 0777) == 0, "mkdir %s", shared);
    save_doc(path, doc_of(json_array()));
    chmod(path, 0666);
    ft_err err = {0};
    ft_file_unlock(ft_file_lock(path, &err));
    FT_CHECK(chmod(lock, 0644) == 0, "the lock file %s: %s", lock, err.msg);
    as_nobody(updated_as_other_user, path, "a shared profile with another user's 0644 lock");
    ft_profile *p = NULL;
    FT_CHECK(ft_profile_load(path, &p, &err) == FT_OK && median_of(p, "loss", 4242) > 0,
             "the other user's entry is in the profile: %s", err.msg);
    ft_profile_free(p);
    unlink(path);
    unlink(lock);
    rmdir(shared);
}

/* Renamed tunables: a former name is read from records (and renamed there), refused with the
 * new name when typed, and never taken for a name the space still has. */
static void test_renamed_tunables(void) {
    static ft_param params[] = {
        {"vecs_per_thread", "", 3, {1, 2, 4}, NULL, 1, 0},
        {"rows_per_block", "", 2, {1, 2}, NULL, 1, 0},
        {"vec", "", 2, {8, 16}, NULL, 16, 0}, /* still its own name here: not vec_bytes */
    };
    ft_space s = {params, 3, NULL, NULL};
    FT_CHECK(ft_space_renamed(&s, "cpt") && !strcmp(ft_space_renamed(&s, "cpt"), "vecs_per_thread"),
             "cpt not read as vecs_per_thread");
    FT_CHECK(!ft_space_renamed(&s, "vecs_per_thread"), "a current name taken for a former one");
    FT_CHECK(!ft_space_renamed(&s, "vec"), "vec renamed in a space that still has it");
    FT_CHECK(!ft_space_renamed(&s, "kt"), "kt renamed in a space without keys_per_tile");
    FT_CHECK(!ft_space_renamed(&s, "nonsense"), "an unknown name renamed");

    ft_config cfg;
    ft_err err = {0};
    FT_CHECK(ft_config_parse(&s, "cpt=2", &cfg, &err) == FT_EINVAL &&
                 strstr(err.msg, "'cpt' is now called 'vecs_per_thread'"),
             "typed former name: %s", err.msg);
    FT_CHECK(ft_config_parse(&s, "vecs_per_thread=4,rows_per_block=2", &cfg, &err) == FT_OK &&
                 cfg.v[0] == 4 && cfg.v[1] == 2,
             "current names not parsed");

    json_t *rec = json_pack("{s:i, s:i, s:i}", "cpt", 2, "rpc", 2, "vec", 8);
    FT_CHECK(ft_config_from_json(&s, rec, &cfg, &err) == FT_OK && cfg.v[0] == 2 &&
                 cfg.v[1] == 2 && cfg.v[2] == 8,
             "a record with former names not read: %s", err.msg);
    char note[128];
    FT_CHECK(ft_config_json_rename(&s, rec, note, sizeof note) == 2, "two renames expected");
    FT_CHECK(!strcmp(note, "cpt -> vecs_per_thread, rpc -> rows_per_block"), "note: %s", note);
    FT_CHECK(json_integer_value(json_object_get(rec, "vecs_per_thread")) == 2 &&
                 json_integer_value(json_object_get(rec, "rows_per_block")) == 2 &&
                 !json_object_get(rec, "cpt") && !json_object_get(rec, "rpc") &&
                 json_integer_value(json_object_get(rec, "vec")) == 8 && json_object_size(rec) == 3,
             "record after the rename: %s", json_dumps(rec, JSON_COMPACT));
    FT_CHECK(ft_config_json_rename(&s, rec, note, sizeof note) == 0 && !note[0],
             "renaming twice changed something");
    json_decref(rec);
    /* Both names present: the current one is kept, the former left for the check to refuse. */
    rec = json_pack("{s:i, s:i}", "cpt", 2, "vecs_per_thread", 4);
    FT_CHECK(ft_config_json_rename(&s, rec, note, sizeof note) == 0, "renamed over a current key");
    FT_CHECK(ft_config_from_json(&s, rec, &cfg, &err) == FT_EINVAL, "both names read");
    json_decref(rec);
}

static void remove_dir(void) {
    DIR *d = opendir(dir);
    struct dirent *e;
    while (d && (e = readdir(d))) {
        if (e->d_name[0] == '.' && (!e->d_name[1] || (e->d_name[1] == '.' && !e->d_name[2])))
            continue;
        unlink(ft_test_path(dir, e->d_name));
    }
    if (d) closedir(d);
    rmdir(dir);
}

/* A kernel of a T1 file as `tune --t1 --profile` writes it. */
static json_t *kernel_entry(const char *name, const char *device, long x, long y, int block,
                            double median) {
    json_t *k = json_pack("{s:s, s:s, s:s, s:[i, i], s:{s:i, s:s}, s:{s:f}, s:{s:{s:i, s:s}, "
                          "s:{s:f}}, s:f, s:i, s:i, s:s, s:s}",
                          "kernel", name, "backend", "cuda", "device", device, "problem_size",
                          (int)x, (int)y, "config", "block_size_x", block, "scale", "2.0",
                          "stats", "median_s", median, "default", "config", "block_size_x", 64,
                          "scale", "1.0", "stats", "median_s", median * 1.5, "speedup", 1.5,
                          "evaluations", 20, "space_valid", 42, "strategy", "bayes", "tuned_at",
                          "2026-01-01T00:00:00Z");
    if (!k) {
        fprintf(stderr, "json_pack failed building a test kernel\n");
        exit(2);
    }
    return k;
}

/* Kernels of T1 files: one per (kernel, backend, device, problem size), the faster kept, in
 * their order; schema_version 2 only where there are kernels; invalid ones skipped with a
 * warning and written back; merged; carried through a save and a load. */
static void test_kernels(void) {
    ft_err err = {0};
    ft_profile *p = ft_profile_new();
    ft_profile_outcome out;
    json_t *k;
    k = kernel_entry("conv", "cuda: A100", 4096, 4096, 128, 2e-3);
    FT_CHECK(ft_profile_add(p, k, &out, &err) == FT_OK && out == FT_PROFILE_ADDED, "%s", err.msg);
    json_decref(k);
    k = kernel_entry("conv", "cuda: A100", 4096, 4096, 256, 1e-3); /* faster: replaces */
    FT_CHECK(ft_profile_add(p, k, &out, &err) == FT_OK && out == FT_PROFILE_REPLACED, "%s", err.msg);
    json_decref(k);
    k = kernel_entry("conv", "cuda: A100", 4096, 4096, 32, 5e-3); /* slower: kept out */
    FT_CHECK(ft_profile_add(p, k, &out, &err) == FT_OK && out == FT_PROFILE_KEPT, "%s", err.msg);
    json_decref(k);
    k = kernel_entry("conv", "cuda: A100", 4096, 4096, 64, 0.5e-3); /* faster, but stopped */
    json_object_set_new(k, "interrupted", json_true());
    FT_CHECK(ft_profile_add(p, k, &out, &err) == FT_OK && out == FT_PROFILE_KEPT,
             "a stopped run's kernel never replaces a finished one's: %d", out);
    json_decref(k);
    k = kernel_entry("conv", "cuda: A100", 1024, 4096, 64, 9e-3); /* another size: added first */
    FT_CHECK(ft_profile_add(p, k, &out, &err) == FT_OK && out == FT_PROFILE_ADDED, "%s", err.msg);
    json_decref(k);
    k = kernel_entry("apsp", "cuda: A100", 4096, 4096, 64, 9e-3);
    FT_CHECK(ft_profile_add(p, k, &out, &err) == FT_OK, "%s", err.msg);
    json_decref(k);
    FT_CHECK(ft_profile_kernel_count(p) == 3 && ft_profile_count(p) == 0, "%d kernels",
             ft_profile_kernel_count(p));
    const ft_profile_kernel *k0 = ft_profile_kernel_at(p, 0), *k1 = ft_profile_kernel_at(p, 1),
                            *k2 = ft_profile_kernel_at(p, 2);
    FT_CHECK(strcmp(k0->kernel, "apsp") == 0 && strcmp(k1->kernel, "conv") == 0 &&
                 json_integer_value(json_array_get(k1->problem_size, 0)) == 1024,
             "order: %s, %s", k0->kernel, k1->kernel);
    FT_CHECK(k2->median_s == 1e-3 &&
                 json_integer_value(json_object_get(k2->config, "block_size_x")) == 256,
             "the faster kept: %g", k2->median_s);
    /* Refused with one line: no problem size, a size of four dimensions, a bad config value. */
    const char *bad[][2] = {{"problem_size", "should hold 1 to 3 sizes"},
                            {"device", "field 'device' is empty"},
                            {"median", "positive time"},
                            {"config", "should be a label or an integer"}};
    for (int b = 0; b < 4; b++) {
        k = kernel_entry("conv", "cuda: A100", 4096, 4096, 128, 2e-3);
        json_t *more = json_pack("[i, i]", 1, 2);
        if (b == 0) json_array_extend(json_object_get(k, "problem_size"), more);
        json_decref(more);
        if (b == 1) json_object_set_new(k, "device", json_string(""));
        if (b == 2) json_object_set_new(json_object_get(k, "stats"), "median_s", json_real(-1));
        if (b == 3) json_object_set_new(json_object_get(k, "config"), "x", json_real(0.5));
        FT_CHECK(ft_profile_add(p, k, NULL, &err) == FT_EINVAL && strstr(err.msg, bad[b][1]) &&
                     strstr(err.msg, "profile kernel (conv)"),
                 "%s: %s", bad[b][0], err.msg);
        json_decref(k);
    }
    /* Saved: schema_version 2 with the kernels; read back the same. */
    const char *path = ft_test_path(dir, "kernels.json");
    FT_CHECK(ft_profile_save(p, path, &err) == FT_OK, "%s", err.msg);
    json_t *doc = json_load_file(path, 0, NULL);
    FT_CHECK(json_integer_value(json_object_get(doc, "schema_version")) == 2 &&
                 json_array_size(json_object_get(doc, "kernels")) == 3,
             "saved with its kernels");
    /* An invalid kernel in the file: skipped with a warning, written back; a valid one of the
     * key of a skipped one replaces it. */
    json_t *torn = kernel_entry("gemm", "cuda: A100", 8, 8, 16, 1e-3);
    json_object_del(torn, "stats");
    json_array_append_new(json_object_get(doc, "kernels"), torn);
    save_doc(path, doc);
    ft_profile *q = NULL;
    FT_CHECK(ft_profile_load(path, &q, &err) == FT_OK, "%s", err.msg);
    FT_CHECK(ft_profile_kernel_count(q) == 3 && ft_profile_warning_count(q) == 1 &&
                 strstr(ft_profile_warning_at(q, 0), "kernels[3] (gemm) skipped") &&
                 strstr(ft_profile_warning_at(q, 0), "'stats' is missing"),
             "%d kernels, warning: %s", ft_profile_kernel_count(q), ft_profile_warning_at(q, 0));
    FT_CHECK(ft_profile_save(q, path, &err) == FT_OK, "%s", err.msg);
    doc = json_load_file(path, 0, NULL);
    FT_CHECK(json_array_size(json_object_get(doc, "kernels")) == 4, "the skipped kernel kept");
    json_decref(doc);
    k = kernel_entry("gemm", "cuda: A100", 8, 8, 16, 1e-3);
    FT_CHECK(ft_profile_add(q, k, &out, &err) == FT_OK && out == FT_PROFILE_REPLACED, "%s", err.msg);
    json_decref(k);
    json_t *root = ft_profile_to_json(q);
    FT_CHECK(json_array_size(json_object_get(root, "kernels")) == 4, "the skipped one replaced");
    json_decref(root);
    /* A valid kernel and an invalid one of its key, in either order, in one file or merged from
     * two: the valid one alone, nothing skipped written back. */
    for (int order = 0; order < 2; order++) {
        json_t *good = kernel_entry("fft", "cuda: A100", 64, 64, 32, 1e-3);
        json_t *wrong = kernel_entry("fft", "cuda: A100", 64, 64, 32, 1e-3);
        json_object_set_new(wrong, "evaluations", json_integer(-3));
        json_t *list = order ? json_pack("[O, O]", wrong, good) : json_pack("[O, O]", good, wrong);
        ft_profile *o = NULL, *a = NULL, *b = NULL, *m2 = ft_profile_new();
        json_t *d = json_pack("{s:i, s:[], s:o}", "schema_version", 2, "entries", "kernels", list);
        FT_CHECK(ft_profile_from_json(d, "one", &o, &err) == FT_OK, "%s", err.msg);
        json_t *r1 = ft_profile_to_json(o);
        FT_CHECK(ft_profile_kernel_count(o) == 1 &&
                     json_array_size(json_object_get(r1, "kernels")) == 1 &&
                     ft_profile_warning_count(o) == 1 &&
                     strstr(ft_profile_warning_at(o, 0), "should be counts"),
                 "order %d in one file: %d kernels, %zu written", order, ft_profile_kernel_count(o),
                 json_array_size(json_object_get(r1, "kernels")));
        json_decref(r1);
        json_decref(d);
        d = json_pack("{s:i, s:[], s:[O]}", "schema_version", 2, "entries", "kernels", good);
        FT_CHECK(ft_profile_from_json(d, "a", &a, &err) == FT_OK, "%s", err.msg);
        json_decref(d);
        d = json_pack("{s:i, s:[], s:[O]}", "schema_version", 2, "entries", "kernels", wrong);
        FT_CHECK(ft_profile_from_json(d, "b", &b, &err) == FT_OK, "%s", err.msg);
        json_decref(d);
        FT_CHECK(ft_profile_merge(m2, order ? b : a, &err) == FT_OK &&
                     ft_profile_merge(m2, order ? a : b, &err) == FT_OK,
                 "%s", err.msg);
        r1 = ft_profile_to_json(m2);
        FT_CHECK(json_array_size(json_object_get(r1, "kernels")) == 1,
                 "order %d merged: %zu kernels written", order,
                 json_array_size(json_object_get(r1, "kernels")));
        json_decref(r1);
        json_decref(good);
        json_decref(wrong);
        ft_profile_free(o);
        ft_profile_free(a);
        ft_profile_free(b);
        ft_profile_free(m2);
    }
    /* Merged into a profile of op entries; without kernels a profile stays schema_version 1. */
    ft_profile *m = ft_profile_new();
    json_t *e = loss_entry("cpu", 512, "dpace", 1e-3);
    FT_CHECK(ft_profile_add(m, e, NULL, &err) == FT_OK, "%s", err.msg);
    json_decref(e);
    root = ft_profile_to_json(m);
    FT_CHECK(json_integer_value(json_object_get(root, "schema_version")) == 1 &&
                 !json_object_get(root, "kernels"),
             "no kernels: schema_version 1, no kernels field");
    json_decref(root);
    FT_CHECK(ft_profile_merge(m, q, &err) == FT_OK && ft_profile_kernel_count(m) == 4 &&
                 ft_profile_count(m) == 1,
             "merged: %d kernels", ft_profile_kernel_count(m));
    /* kernels of the wrong type: the file is refused in one line */
    write_text(path, "{\"schema_version\": 2, \"entries\": [], \"kernels\": {}}\n");
    ft_profile *r = NULL;
    FT_CHECK(ft_profile_load(path, &r, &err) == FT_EFORMAT && strstr(err.msg, "'kernels'"),
             "%s", err.msg);
    ft_profile_free(r);
    ft_profile_free(m);
    ft_profile_free(q);
    ft_profile_free(p);
}

int main(void) {
    ft_test_tmpdir(dir, sizeof dir, "profile");
    FT_RUN(test_round_trip);
    FT_RUN(test_merge_keeps_best);
    FT_RUN(test_per_entry_validation);
    FT_RUN(test_attr_values);
    FT_RUN(test_attrs_one_key);
    FT_RUN(test_malformed);
    FT_RUN(test_failed_save_keeps_file);
    FT_RUN(test_schema_too_new);
    FT_RUN(test_concurrent_update);
    FT_RUN(test_lookup);
    FT_RUN(test_links);
    FT_RUN(test_modes);
    FT_RUN(test_check_writable);
    FT_RUN(test_other_owner);
    FT_RUN(test_sticky_directory);
    FT_RUN(test_shared_lock);
    FT_RUN(test_renamed_tunables);
    FT_RUN(test_kernels);
    remove_dir();
    return ft_test_finish();
}
