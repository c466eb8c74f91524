#!/bin/sh
# test_emit.sh: `flaretune emit --format c-header` gives a header that compiles on its own as
# C99, C11 and C++ with warnings as errors, in two translation units of one program and as the
# main file (an empty selection's too), and whose lookups find the right entries (exact and
# nearest).
#
# usage: test_emit.sh FLARETUNE CC [CXX]
set -eu

FT=$1
CC=$2
CXX=${3:-}
if [ -z "$CXX" ] && command -v c++ >/dev/null 2>&1; then CXX=c++; fi

dir=$(mktemp -d "${TMPDIR:-/tmp}/ft_test_emit.XXXXXX")
trap 'rm -rf "$dir"' EXIT INT TERM

fail() {
    echo "test_emit: FAIL: $*" >&2
    exit 1
}

# A profile written by hand with the fields of docs/profiles.md. The device string carries the
# characters a C string literal must escape: quotes, a backslash, '??=' (a trigraph), UTF-8.
# Backend "other" is built into no flaretune, so its configs are not checked against a space
# and its named parameter cannot be resolved to an index.
stats() {
    printf '{"median_s": %s, "q1_s": %s, "q3_s": %s, "iqr_s": 1e-6, "min_s": %s, "max_s": %s,
      "mean_s": %s, "stdev_s": 1e-6, "ci_rel": 0.01, "samples": 30, "batch": 1,
      "converged": true, "total_s": 0.5}' "$1" "$1" "$1" "$1" "$1" "$1"
}
entry() { # op backend device shape attrs config median
    cat <<EOF
    {"op": "$1", "backend": "$2", "device": "$3", "shape": $4, "attrs": $5, "config": $6,
     "stats": $(stats "$7"), "default": {"config": {}, "stats": $(stats 0.5)},
     "speedup": 2.0, "roofline_frac": 0.4,
     "verification": {"max_rel_err": 1e-7, "tolerance": 1e-4, "output": "loss", "shape": $4,
                      "reduced": false},
     "tie": [], "environment": {"cpu": "Test CPU", "cores": 16}, "tuned_at": "2025-01-01T00:00:00Z",
     "strategy": "exhaustive", "evaluations": 8, "space_valid": 8}
EOF
}
DEV='cpu: Test \"Gold\" ??= x 16 (SkylakeX) \u00b5\\'
{
    echo '{"schema_version": 1, "generator": "test", "entries": ['
    entry loss ref "$DEV" '{"M": 512, "H": 1024, "V": 32768}' '{"scheme": "dpace"}' '{}' 0.001
    echo ','
    entry loss ref "$DEV" '{"M": 4096, "H": 1024, "V": 32768}' '{"scheme": "dpace"}' '{}' 0.008
    echo ','
    entry loss ref "$DEV" '{"M": 512, "H": 1024, "V": 32768}' '{"scheme": "uniform"}' '{}' 0.002
    echo ','
    entry loss other 'other: X1' '{"M": 512, "H": 1024, "V": 32768}' '{"scheme": "dpace"}' \
        '{"BM": 64, "layout": "row"}' 0.0001
    echo ','
    entry fusion.dflare other 'other: X1' '{"N": 2048, "T": 4, "H": 1024, "D": 3}' '{}' \
        '{"BM": 128}' 0.0003
    echo ','
    # The backward with and without dx: the profile leaves want_dx out at its default (1).
    entry fusion.dflare ref "$DEV" '{"N": 2048, "T": 4, "H": 1024, "D": 3}' '{"backward": "1"}' \
        '{}' 0.004
    echo ','
    entry fusion.dflare ref "$DEV" '{"N": 2048, "T": 4, "H": 1024, "D": 3}' \
        '{"backward": "1", "want_dx": "0"}' '{}' 0.003
    echo ']}'
} >"$dir/profile.json"

"$FT" emit "$dir/profile.json" -o "$dir/tuned.h" || fail "emit failed"
[ -s "$dir/tuned.h" ] || fail "emit wrote nothing"
ls "$dir" | grep -q '\.tmp\.' && fail "emit left a temporary file"
"$FT" emit "$dir/profile.json" --backend other --prefix other_tuned -o "$dir/other.h" ||
    fail "emit --backend --prefix failed"

cat >"$dir/main.c" <<'EOF'
#include <stdio.h>
#include <string.h>

#include "tuned.h"
#include "tuned.h" /* twice: the include guard holds */
#include "other.h" /* another prefix: no clash */

#define CHECK(c)                                                                                   \
    do {                                                                                           \
        if (!(c)) {                                                                                \
            printf("check failed, line %d: %s\n", __LINE__, #c);                                   \
            failures++;                                                                            \
        }                                                                                          \
    } while (0)

const ft_tuned_entry *second_unit(long long m);

int main(void) {
    int failures = 0, exact = -1;
    const ft_tuned_entry *e;
    const other_tuned_entry *o;
    const ft_tuned_size at512[] = {{"M", 512}, {"H", 1024}, {"V", 32768}};
    const ft_tuned_size at600[] = {{"V", 32768}, {"M", 600}, {"H", 1024}};
    const ft_tuned_size at3000[] = {{"M", 3000}, {"H", 1024}, {"V", 32768}};
    const long long v512[] = {512, 1024, 32768}, v3000[] = {3000, 1024, 32768};

    CHECK(FT_TUNED_COUNT == 7);
    CHECK(OTHER_TUNED_COUNT == 2);
    e = ft_tuned_lookup("loss", "ref", NULL, "scheme=dpace", at512, 3, &exact);
    CHECK(e && exact == 1 && e->median_s == 0.001);
    CHECK(e && e->nsizes == 3 && strcmp(e->sizes[0].name, "M") == 0 && e->sizes[0].value == 512);
    CHECK(e && strcmp(e->device, "cpu: Test \"Gold\" \?\?= x 16 (SkylakeX) \302\265\\") == 0);
    e = ft_tuned_lookup("loss", "ref", NULL, "scheme=dpace", at600, 3, &exact);
    CHECK(e && exact == 0 && e->median_s == 0.001);
    e = ft_tuned_lookup("loss", "ref", NULL, "scheme=dpace", at3000, 3, &exact);
    CHECK(e && exact == 0 && e->median_s == 0.008);
    e = ft_tuned_lookup_v("loss", "ref", NULL, "scheme=dpace", v512, 3, &exact);
    CHECK(e && exact == 1 && e->median_s == 0.001);
    e = ft_tuned_lookup_v("loss", "ref", NULL, "scheme=dpace", v3000, 3, &exact);
    CHECK(e && exact == 0 && e->median_s == 0.008);
    e = ft_tuned_lookup_v("loss", "ref", NULL, "scheme=dpace", v512, 1, &exact);
    CHECK(e && exact == 0 && e->median_s == 0.001); /* sizes left out: never exact */
    e = ft_tuned_lookup("loss", "ref", NULL, "scheme=uniform", at512, 3, &exact);
    CHECK(e && exact == 1 && e->median_s == 0.002);
    e = ft_tuned_lookup("loss", NULL, "other: X1", NULL, at512, 3, &exact);
    CHECK(e && exact == 1 && strcmp(e->backend, "other") == 0);
    CHECK(ft_tuned_param_int(e, "BM", 1) == 64);
    CHECK(strcmp(ft_tuned_param_label(e, "BM", "?"), "64") == 0);
    CHECK(strcmp(ft_tuned_param_label(e, "layout", "?"), "row") == 0);
    CHECK(ft_tuned_param_int(e, "layout", 7) == 7); /* a label not resolved: the fallback */
    CHECK(ft_tuned_param_int(e, "nope", 5) == 5);
    CHECK(strcmp(ft_tuned_param_label(e, "nope", "dflt"), "dflt") == 0);
    CHECK(ft_tuned_lookup("attention.decode", NULL, NULL, NULL, at512, 3, &exact) == NULL &&
          exact == 0);
    CHECK(ft_tuned_lookup("loss", "cuda", NULL, NULL, at512, 3, NULL) == NULL);
    CHECK(ft_tuned_lookup("loss", NULL, NULL, "scheme=nope", at512, 3, NULL) == NULL);
    CHECK(ft_tuned_param_int(NULL, "BM", 3) == 3);
    o = other_tuned_lookup("fusion.dflare", NULL, NULL, NULL, NULL, 0, &exact);
    CHECK(o && exact == 0 && o->median_s == 0.0003);
    CHECK(other_tuned_param_int(o, "BM", 0) == 128);
    /* Every attribute is listed, those the profile leaves out at their defaults too, so a query
     * can name one at its default; an attribute the query leaves out matches any value. */
    e = ft_tuned_lookup("fusion.dflare", "ref", NULL, "backward=1,want_dx=1", NULL, 0, &exact);
    CHECK(e && e->median_s == 0.004);
    e = ft_tuned_lookup("fusion.dflare", "ref", NULL, "want_dx=0", NULL, 0, &exact);
    CHECK(e && e->median_s == 0.003);
    e = ft_tuned_lookup("fusion.dflare", "ref", NULL, "backward=0", NULL, 0, &exact);
    CHECK(e == NULL);
    e = ft_tuned_lookup("loss", "ref", NULL, "scheme=dpace,final_norm=0,alpha=0.5", at512, 3,
                        &exact);
    CHECK(e && exact == 1 && e->median_s == 0.001);
    /* Numbers compare by value; an attribute that changes nothing in the entry's call (eps
     * without final_norm, epoch without progressive_epoch) is "*", which answers any value. */
    e = ft_tuned_lookup("loss", "ref", NULL, "scheme=dpace,alpha=5e-1,gamma=7.0,final_norm=00",
                        at512, 3, &exact);
    CHECK(e && exact == 1 && e->median_s == 0.001);
    e = ft_tuned_lookup("loss", "ref", NULL, "scheme=dpace,eps=1e-5,epoch=1.5", at512, 3, &exact);
    CHECK(e && exact == 1 && e->median_s == 0.001);
    CHECK(ft_tuned_lookup("loss", "ref", NULL, "scheme=dpace,alpha=0.55", at512, 3, NULL) == NULL);
    CHECK(ft_tuned_lookup("loss", "ref", NULL, "scheme=dpace,alpha=0.5x", at512, 3, NULL) == NULL);
    /* not a number is equal to none, as the package's lookup says */
    CHECK(ft_tuned_lookup("loss", "ref", NULL, "scheme=dpace,alpha=nan", at512, 3, NULL) == NULL);
    CHECK(ft_tuned_lookup("loss", "ref", NULL, "scheme=dpace,gamma=-nan", at512, 3, NULL) == NULL);
    CHECK(ft_tuned_lookup("loss", "ref", NULL, "scheme=dpace,final_norm=1", at512, 3, NULL) ==
          NULL);
    e = second_unit(4000);
    CHECK(e && e->median_s == 0.008);
    printf("%s\n", failures ? "FAILED" : "ok");
    return failures ? 1 : 0;
}
EOF
cat >"$dir/second.c" <<'EOF'
#include "tuned.h"

const ft_tuned_entry *second_unit(long long m);
const ft_tuned_entry *second_unit(long long m) {
    const long long sizes[] = {m, 1024, 32768};
    return ft_tuned_lookup_v("loss", "ref", NULL, "scheme=dpace", sizes, 3, NULL);
}
EOF

WARN="-Wall -Wextra -Werror -pedantic -Wshadow -Wstrict-prototypes -Wmissing-prototypes -Wconversion -Wsign-conversion -Wundef"
for std in c11 c99; do
    # shellcheck disable=SC2086
    "$CC" -std=$std $WARN -I"$dir" "$dir/main.c" "$dir/second.c" -o "$dir/main_$std" ||
        fail "the header does not compile as $std"
    "$dir/main_$std" || fail "lookups through the header ($std)"
done
if [ -n "$CXX" ] && command -v "$CXX" >/dev/null 2>&1; then
    cp "$dir/main.c" "$dir/main.cc"
    cp "$dir/second.c" "$dir/second.cc"
    "$CXX" -Wall -Wextra -Werror -pedantic -Wshadow -Wconversion -Wsign-conversion \
        -I"$dir" "$dir/main.cc" "$dir/second.cc" -o "$dir/main_cxx" ||
        fail "the header does not compile as C++"
    "$dir/main_cxx" || fail "lookups through the header (C++)"
else
    echo "test_emit: no C++ compiler, C++ check skipped"
fi

# An empty selection still gives a header that compiles, included and on its own (as the
# main file, where an unused static table is warned of), as C and as C++.
"$FT" emit "$dir/profile.json" --backend none -o "$dir/empty.h" 2>"$dir/err" ||
    fail "emit of an empty selection failed"
grep -q "warning" "$dir/err" || fail "no warning for an empty selection"
printf '{"schema_version": 1, "entries": []}\n' >"$dir/none.json"
"$FT" emit "$dir/none.json" -o "$dir/none.h" 2>"$dir/err" || fail "emit of an empty profile failed"
for h in tuned other empty none; do
    # shellcheck disable=SC2086
    "$CC" -std=c11 $WARN -Wfloat-equal -c -x c "$dir/$h.h" -o "$dir/$h.o" ||
        fail "$h.h does not compile on its own as C"
    if [ -n "$CXX" ] && command -v "$CXX" >/dev/null 2>&1; then
        "$CXX" -Wall -Wextra -Werror -pedantic -Wshadow -Wconversion -Wsign-conversion -c \
            -x c++ "$dir/$h.h" -o "$dir/$h.o" || fail "$h.h does not compile on its own as C++"
    fi
done
printf '#include "empty.h"\nint main(void) { return FT_TUNED_COUNT + (ft_tuned_lookup("loss", NULL, NULL, NULL, NULL, 0, NULL) != NULL); }\n' >"$dir/empty.c"
# shellcheck disable=SC2086
"$CC" -std=c11 $WARN -I"$dir" "$dir/empty.c" -o "$dir/empty" || fail "an empty header does not compile"
"$dir/empty" || fail "an empty header finds something"

# The opening comment's example, compiled as written: it finds the entry it names. A kernel
# whose name a comment cannot hold as it is (quotes, '*/', a backslash) is passed over for one
# whose name it can; with none, the example is the generic one, never a mangled name.
kernel() {
    printf '{"kernel": "%s", "backend": "cuda-emu", "device": "emu", "problem_size": [%s],
      "config": {"block": 32}, "stats": %s, "default": null, "speedup": null,
      "evaluations": 1, "space_valid": 1, "strategy": "exhaustive",
      "tuned_at": "2026-12-05T00:00:00Z"}' "$1" "$2" "$(stats 2e-6)"
}
example_of() { # the example's lines, comment marks removed, as a C function body
    sed -n '/_size want\[\] = /,/_param_int(/p' "$1" | sed 's/^ \*   //'
}
for case in odd-then-plain odd-only; do
    ks="$(kernel 'odd\"k */ ??/' 8)"
    [ $case = odd-then-plain ] && ks="$ks, $(kernel plain_k 16)"
    printf '{"schema_version": 2, "entries": [], "kernels": [%s]}\n' "$ks" >"$dir/k.json"
    "$FT" emit "$dir/k.json" -o "$dir/k.h" 2>"$dir/err" || fail "emit of kernels: $(cat "$dir/err")"
    grep -q 'odd_' "$dir/k.h" && example_of "$dir/k.h" | grep -q 'odd_' &&
        fail "$case: the example names a kernel by a mangled name"
    { printf '#include "k.h"\nint main(void) {\n'; example_of "$dir/k.h"
      if [ $case = odd-then-plain ]; then printf 'return !(e && exact && v == 32);\n}\n'
      else printf '(void)v; return e != NULL;\n}\n'; fi; } >"$dir/k.c"
    # shellcheck disable=SC2086
    "$CC" -std=c11 $WARN -I"$dir" "$dir/k.c" -o "$dir/k" || fail "$case: the example does not compile"
    "$dir/k" || fail "$case: the example does not find what it names"
done
echo "test_emit: ok"
