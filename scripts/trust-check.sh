#!/usr/bin/env bash
# trust-check.sh: are the CPU backend's numbers ones a user can trust, quiet and busy?
#
#   scripts/trust-check.sh [BUILD] [OUT]      (BUILD default build, OUT default out/trust)
#   LOAD=1 scripts/trust-check.sh ...         the same with a core kept busy by another process
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
burner=
if [[ ${LOAD:-0} == 1 ]]; then
    (while :; do :; done) &
    burner=$!
    trap 'kill $burner 2>/dev/null' EXIT
fi
ops=(fusion.dflare fusion.dflash attention.kvproj attention.decode attention.train loss)
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
