#!/usr/bin/env bash
# trust-check.sh: are the CPU backend's numbers ones a user can trust, quiet and busy?
#
#   scripts/trust-check.sh [BUILD] [OUT]      (BUILD default build, OUT default out/trust)
#   LOAD=1 scripts/trust-check.sh ...         the same with a core kept busy by another process
#   CONTENDED=1 scripts/trust-check.sh ...    quiet, then with BURNERS (default 3) CPU-burning
#                                             processes on the machine's cores: the goal of
#                                             docs/measurement.md ("Checking it"), table in
#                                             OUT/contended.md; REPORT=0 leaves out the report
#
# For every op at the tiny and small presets it runs `tune` (anneal, a budget of 12) and an
# independent `bench` of the default config, and prints a row: the default's median from tune's
# confirmation against bench's, the winner's roofline fraction and the level that bounds it,
# bench's fraction, and whether the machine was found busy. It fails when a fraction above 1 is
# printed without being flagged suspect. Timings are this machine's: they belong in README.md
# and notes, never in a test.
set -euo pipefail
build=${1:-build}
out=${2:-out/trust}
ft=$build/flaretune
[[ -x $ft ]] || { echo "trust-check: $ft not found (make build first)" >&2; exit 2; }
mkdir -p "$out"
read -r -a ops <<<"${OPS:-fusion.dflare fusion.dflash attention.kvproj attention.decode attention.train loss}"
read -r -a sizes <<<"${SIZES:-tiny small}"

# The contended mode: the same tunes (and `report --models tiny`) quiet and busy, then the goal:
# every busy winner's median within 1.3x of the quiet one and every speedup within 1.5x, or
# withheld with the reason; the same report verdicts or "inconclusive"; no call past the
# watchdog's limit (scripts/trust-contended.py).
if [[ ${CONTENDED:-0} == 1 ]]; then
    burners=()
    stop_burners() { for p in "${burners[@]}"; do kill "$p" 2>/dev/null || true; done; burners=(); }
    trap stop_burners EXIT
    tune_pass() { # DIR
        mkdir -p "$1"
        for size in "${sizes[@]}"; do
            for op in "${ops[@]}"; do
                phase=train
                [[ $op == attention.decode ]] && phase=decode
                tag=$1/$op.$size.dflare.$phase
                rm -f "$tag.jsonl"
                local t0=$SECONDS
                "$ft" tune "$op" --preset "$size.dflare.$phase" --backend cpu --strategy anneal \
                    --budget 12 --seed 1 --log "$tag.jsonl" --quiet >"$tag.tune.txt" 2>"$tag.tune.err" ||
                    echo "trust-check: tune $op failed (see $tag.tune.err)" >&2
                echo "  $(basename "$tag"): $((SECONDS - t0)) s" >&2
            done
        done
        if [[ ${REPORT:-1} == 1 ]]; then
            local t0=$SECONDS
            "$ft" report --models tiny -o "$1/report" >"$1/report.txt" 2>"$1/report.err" ||
                echo "trust-check: report failed (see $1/report.err)" >&2
            cp "$1/report/report.json" "$1/report.json" 2>/dev/null || true
            echo "  report --models tiny: $((SECONDS - t0)) s" >&2
        fi
    }
    echo "trust-check: quiet pass" >&2
    tune_pass "$out/quiet"
    n=${BURNERS:-3}
    echo "trust-check: busy pass, $n CPU-burning processes" >&2
    for ((i = 0; i < n; i++)); do
        (while :; do :; done) &
        burners+=($!)
    done
    tune_pass "$out/busy"
    stop_burners
    exec python3 "$(dirname "$0")/trust-contended.py" "$out/quiet" "$out/busy" --md "$out/contended.md"
fi

burner=
if [[ ${LOAD:-0} == 1 ]]; then
    (while :; do :; done) &
    burner=$!
    trap 'kill $burner 2>/dev/null' EXIT
fi
printf '%-17s %-19s %12s %12s %6s %14s %14s %5s\n' op preset "tune default" "bench default" ratio \
    "winner roof" "bench roof" busy
status=0
for size in tiny small; do
    for op in "${ops[@]}"; do
        phase=train
        [[ $op == attention.decode ]] && phase=decode
        preset=$size.dflare.$phase
        tag=$out/$op.$preset
        rm -f "$tag.jsonl" "$tag.json"
        "$ft" tune "$op" --preset "$preset" --backend cpu --strategy anneal --budget 12 \
            --log "$tag.jsonl" --profile "$tag.json" --quiet >"$tag.tune.txt" 2>"$tag.tune.err"
        "$ft" bench "$op" --preset "$preset" --backend cpu --json >"$tag.bench.json" 2>"$tag.bench.err"
        python3 - "$tag" "$op" "$preset" <<'EOF' || status=1
import json, sys
tag, op, preset = sys.argv[1:]
end = [json.loads(l) for l in open(tag + ".jsonl") if '"run_end"' in l][-1]
b = json.load(open(tag + ".bench.json"))
td = end["default_stats"]["median_s"] if end.get("default_stats") else float("nan")
bd = b["median_s"]
wr, br = end["roofline"], b["roofline"]
busy = end["contention"]["busy"] or b["load"].get("busy", False)
def t(s):
    return "%.3g %s" % ((s * 1e6, "us") if s < 1e-3 else (s * 1e3, "ms"))
print("%-17s %-19s %12s %12s %6.2f %9.0f%% %-4s %9.0f%% %-4s %5s" % (
    op, preset, t(td), t(bd), td / bd, 100 * wr["frac"], wr["level"], 100 * br["frac"],
    br["level"], "yes" if busy else "no"))
bad = [(n, r) for n, r in (("tune", wr), ("bench", br)) if r["frac"] > 1 and not r["suspect"]]
if bad:
    print("  %s: a fraction above 1 not flagged: %s" % (op, bad), file=sys.stderr)
    sys.exit(1)
EOF
    done
done
exit $status
