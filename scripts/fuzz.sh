#!/usr/bin/env bash
# fuzz.sh: build the libFuzzer targets of tests/fuzz with clang under ASan + UBSan, and run each.
#
#   scripts/fuzz.sh [SECONDS] [BUILD_DIR]      defaults: 60 seconds per target, build-fuzz
#
# Targets: fuzz_npy (the .npy reader), fuzz_profile (the profile loader and what reads a loaded
# profile), fuzz_eventlog (the event-log reader, replay, trace export, the dashboard's model),
# fuzz_report (the report document's reader and renderer), fuzz_landscape (the readers of
# Kernel Tuner caches and FAIR T4 files, and what replays a landscape read from one), fuzz_t1
# (the FAIR T1 reader and the expression evaluator);
# FUZZ_TARGETS="npy profile" runs some of them only. Each runs for SECONDS (-max_total_time)
# with -timeout=10 and -rss_limit_mb=2048 (also the limit of a single allocation) and the
# target's dictionary (tests/fuzz/corpus/TARGET.dict: tokens the readers compare) on a scratch
# copy of its corpus, BUILD_DIR/fuzz-work/TARGET/corpus: the committed corpus
# (tests/fuzz/corpus/TARGET/) is copied in and never changed; what a run adds stays in the
# scratch copy for the next run in the same BUILD_DIR. FUZZ_ARGS adds libFuzzer options.
#
# Fails (exit 1) on any crash, leak, timeout or out-of-memory, and prints where the reproducer
# is (BUILD_DIR/fuzz-work/TARGET/findings/) and how to replay and minimise it. The fix's
# regression test is the reproducer itself, added to tests/fuzz/corpus/TARGET/ (ctest's
# fuzz_TARGET_corpus replays it in every build). Needs clang and its runtimes:
# scripts/deps.sh fuzz.
set -euo pipefail
cd "$(dirname "$0")/.."

secs=${1:-60}
build=${2:-build-fuzz}
targets=${FUZZ_TARGETS:-npy profile eventlog report landscape t1}
if ! [[ "$secs" =~ ^[0-9]+$ ]] || [[ "$secs" -lt 1 ]]; then
    echo "usage: scripts/fuzz.sh [SECONDS] [BUILD_DIR]   (SECONDS: a positive integer)" >&2
    exit 2
fi
cc=${FUZZ_CC:-clang}
cxx=${FUZZ_CXX:-clang++}
if ! command -v "$cc" >/dev/null; then
    echo "fuzz: $cc not found: run scripts/deps.sh fuzz (or set FUZZ_CC)" >&2
    exit 1
fi
command -v "$cxx" >/dev/null || cxx=

# -O1 -g: fast enough, exact stack traces; assertions stay on. The CUDA toolkit is left out:
# nothing the targets read needs it (a profile's cuda entries are checked by their form).
echo "fuzz: configuring $build with $cc (FT_FUZZ=ON)"
cmake -S . -B "$build" -DFT_FUZZ=ON -DFT_WITH_CUDA=OFF -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_C_COMPILER="$cc" ${cxx:+-DCMAKE_CXX_COMPILER="$cxx"} \
    -DCMAKE_C_FLAGS_RELWITHDEBINFO="-O1 -g" -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g" >/dev/null
cmake --build "$build" -j "$(nproc 2>/dev/null || echo 2)" --target fuzz

# Reports with function names and lines (llvm-symbolizer where installed, else binutils'
# addr2line, which the sanitizers also drive); leaks are findings; UBSan stops at the first
# report (the build makes it non-recoverable) and prints its stack.
symbolizer=$(command -v llvm-symbolizer || ls /usr/lib/llvm-*/bin/llvm-symbolizer 2>/dev/null |
    tail -1 || command -v addr2line || true)
if [[ -n "$symbolizer" ]]; then export ASAN_SYMBOLIZER_PATH="$symbolizer"; fi
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=1:allocator_may_return_null=0"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:+$UBSAN_OPTIONS:}print_stacktrace=1:halt_on_error=1"

failed=()
for t in $targets; do
    bin=$build/tests/fuzz/fuzz_$t
    seeds=tests/fuzz/corpus/$t
    dict=tests/fuzz/corpus/$t.dict
    work=$build/fuzz-work/$t
    if [[ ! -x "$bin" || ! -d "$seeds" ]]; then
        echo "fuzz: unknown target '$t' (targets: npy profile eventlog report landscape t1)" >&2
        exit 2
    fi
    [[ -f "$dict" ]] || dict=
    rm -rf "$work/findings"
    mkdir -p "$work/corpus" "$work/findings"
    cp -p "$seeds"/* "$work/corpus/"
    echo
    echo "=== fuzz_$t: $secs s, corpus $(ls "$work/corpus" | wc -l) inputs"
    rc=0
    # shellcheck disable=SC2086 # FUZZ_ARGS is a list of options
    "$bin" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
        -artifact_prefix="$work/findings/" ${dict:+-dict="$dict"} ${FUZZ_ARGS:-} "$work/corpus" \
        >"$work/log" 2>&1 || rc=$?
    # The last status line: "#N  DONE  cov: C ft: F corp: K/SIZE exec/s: E rss: R"
    status=$(grep -E '^#[0-9]+' "$work/log" | tail -1 || true)
    runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$work/log")
    rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$work/log")
    echo "fuzz_$t: ${runs:-?} runs, ${rate:-?} exec/s; ${status:-no status line}"
    found=$(ls "$work/findings" 2>/dev/null || true)
    if [[ $rc -ne 0 || -n "$found" ]]; then
        failed+=("$t")
        echo "fuzz_$t: FINDING (libFuzzer exit $rc); the report:"
        first=$(grep -m1 -nE 'ERROR: |runtime error|^fuzz: ' "$work/log" | cut -d: -f1 || true)
        if [[ -n "$first" ]]; then sed -n "${first},$((first + 14))p" "$work/log"; fi |
            sed 's/^/    /'
        grep -E '^SUMMARY|Test unit written' "$work/log" | sed 's/^/    /' || true
        echo "    full log: $work/log"
        for f in $found; do
            echo "    reproducer: $work/findings/$f"
        done
        echo "    replay:   $bin $work/findings/<reproducer>"
        echo "    minimise: $bin -minimize_crash=1 -runs=100000 -artifact_prefix=$work/findings/min- $work/findings/<reproducer>"
        echo "    then add the minimised file to $seeds/ (named for what it found)"
    fi
done

echo
if [[ ${#failed[@]} -gt 0 ]]; then
    echo "fuzz: findings in: ${failed[*]}" >&2
    exit 1
fi
echo "fuzz: no finding ($secs s per target: $targets)"
