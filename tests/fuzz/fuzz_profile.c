/* fuzz_profile.c: the profile loader (profiles/src/profile.c) on arbitrary bytes, then what the
 * commands do with a loaded profile.
 *
 * Exercises ft_profile_load on the input as a file (white space only, malformed JSON, duplicate
 * keys, schema_version, per-entry validation against this build's op registry and parameter
 * spaces, skipped entries, warnings, the kernels of T1 files), then on a profile that loaded: the
 * document it would
 * save, read back; a merge into an empty profile; an exact lookup of every entry; and both
 * emitters (profiles/src/emit.c).
 *
 * A finding, besides a sanitizer report, a leak or a timeout: a failure without its status and
 * message in ft_err; a loaded entry that ft_profile_entry_check refuses; a profile whose saved
 * document does not read back to the same valid entries, skipped entries and order; a merge
 * that loses or adds entries; an entry its own key does not find exactly; an emitter that
 * fails on a loaded profile, counts other than the profile's entries, or writes JSON that does
 * not parse.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "profiles/src/profile.h"
#include "fuzz.h"

static void check_entries(const ft_profile *p) {
    for (int i = 0; i < ft_profile_count(p); i++) {
        const ft_profile_entry *e = ft_profile_entry_at(p, i);
        FUZZ_CHECK(e && e->op && e->backend && e->device && e->json, "entry %d is incomplete", i);
        ft_err err = {0};
        ft_status s = ft_profile_entry_check(e->json, &err);
        FUZZ_CHECK(s == FT_OK, "loaded entry %d fails its own check: %s", i, err.msg);
        FUZZ_CHECK(e->median_s > 0, "entry %d: median %g", i, e->median_s);
        int exact = 0;
        const ft_profile_entry *f =
            ft_profile_lookup(p, e->op->name, e->backend, e->device, e->attrs, e->shape, &exact);
        FUZZ_CHECK(f == e && exact, "entry %d is not found exactly by its own key", i);
    }
    for (int i = 0; i < ft_profile_warning_count(p); i++)
        FUZZ_CHECK(ft_profile_warning_at(p, i) != NULL, "warning %d is NULL", i);
    for (int i = 0; i < ft_profile_kernel_count(p); i++) {
        const ft_profile_kernel *k = ft_profile_kernel_at(p, i);
        ft_err err = {0};
        FUZZ_CHECK(k && ft_profile_kernel_check(k->json, &err) == FT_OK,
                   "loaded kernel %d fails its own check: %s", i, err.msg);
        FUZZ_CHECK(k->median_s > 0, "kernel %d: median %g", i, k->median_s);
    }
}

/* q (p saved and read back, or merged) has p's valid and skipped entries, as many of each. */
static void check_same_counts(const ft_profile *p, const ft_profile *q, const char *how) {
    FUZZ_CHECK(ft_profile_count(q) == ft_profile_count(p) &&
                   ft_profile_skipped_count(q) == ft_profile_skipped_count(p),
               "%s: %d valid and %d skipped entries became %d and %d", how, ft_profile_count(p),
               ft_profile_skipped_count(p), ft_profile_count(q), ft_profile_skipped_count(q));
    FUZZ_CHECK(ft_profile_kernel_count(q) == ft_profile_kernel_count(p), "%s: %d kernels became %d",
               how, ft_profile_kernel_count(p), ft_profile_kernel_count(q));
}

/* What ft_profile_save would write, read back: the same entries in the same order. */
static void check_round_trip(const ft_profile *p) {
    json_t *doc = ft_profile_to_json(p);
    FUZZ_CHECK(doc != NULL, "ft_profile_to_json failed");
    char *text = json_dumps(doc, JSON_INDENT(2));
    FUZZ_CHECK(text != NULL, "the profile's document does not encode");
    json_decref(doc);
    json_error_t je;
    json_t *back = json_loads(text, JSON_REJECT_DUPLICATES, &je);
    FUZZ_CHECK(back != NULL, "the saved profile is not JSON: %s", je.text);
    free(text);
    ft_profile *q = NULL;
    ft_err err = {0};
    ft_status s = ft_profile_from_json(back, "saved", &q, &err);
    FUZZ_CHECK(s == FT_OK, "the saved profile does not load: %s", err.msg);
    check_same_counts(p, q, "saved and read back");
    for (int i = 0; i < ft_profile_count(p); i++)
        FUZZ_CHECK(json_equal((json_t *)ft_profile_entry_at(p, i)->json,
                              (json_t *)ft_profile_entry_at(q, i)->json),
                   "saved and read back: entry %d changed", i);
    ft_profile_free(q);
    json_decref(back);
}

static void check_merge(const ft_profile *p) {
    ft_profile *m = ft_profile_new();
    FUZZ_CHECK(m != NULL, "ft_profile_new failed");
    ft_err err = {0};
    ft_status s = ft_profile_merge(m, p, &err);
    FUZZ_CHECK(s == FT_OK, "merging a loaded profile into an empty one failed: %s", err.msg);
    check_same_counts(p, m, "merged into an empty profile");
    ft_profile_free(m);
}

static void check_emit(const ft_profile *p, ft_emit_format format) {
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    FUZZ_CHECK(f != NULL, "open_memstream failed");
    ft_emit_opts o = {.format = format, .source = "input.json"};
    int n = 0;
    ft_err err = {0};
    ft_status s = ft_profile_emit(p, &o, f, &n, &err);
    FUZZ_CHECK(fclose(f) == 0, "closing the memory stream failed");
    fuzz_check_err(s, &err, "ft_profile_emit");
    FUZZ_CHECK(s == FT_OK, "emitting a loaded profile failed: %s", err.msg);
    const int want = ft_profile_count(p) + ft_profile_kernel_count(p);
    FUZZ_CHECK(n == want, "emitted %d of %d entries and kernels", n, want);
    FUZZ_CHECK(strlen(buf) == len, "the emitted text holds a NUL byte");
    if (format == FT_EMIT_JSON) {
        json_error_t je;
        json_t *j = json_loads(buf, 0, &je);
        FUZZ_CHECK(json_is_array(j) && json_array_size(j) == (size_t)n,
                   "the emitted JSON is not an array of the %d entries: %s", n, j ? "" : je.text);
        json_decref(j);
    }
    free(buf);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    ft_profile *p = NULL;
    ft_err err = {0};
    ft_status s = ft_profile_load(fuzz_input_path(data, size), &p, &err);
    if (!fuzz_loaded(s, &err, p, "ft_profile_load")) return 0;
    FUZZ_CHECK(p != NULL, "ft_profile_load succeeded without a profile");
    check_entries(p);
    check_round_trip(p);
    check_merge(p);
    check_emit(p, FT_EMIT_JSON);
    check_emit(p, FT_EMIT_C_HEADER);
    ft_profile_free(p);
    return 0;
}
