#!/usr/bin/env bash
# search-quality.sh: how many evaluations the search strategies need on a real landscape.
#
#   scripts/search-quality.sh [LANDSCAPE.jsonl]
#
# Without an argument: finds the largest CPU space (the op with the most valid configurations
# at its default preset, from `flaretune space OP --backend cpu --json`), records its exhaustive
# landscape on this machine with `flaretune tune OP --strategy exhaustive --no-screen --log FILE`
# (every candidate measured fully, under /tmp/ft-bench.lock so concurrent benchmarks do not
# disturb it), then replays it. With an argument: replays that recorded landscape (an event log
# of an exhaustive run) without measuring anything.
#
# Prints the replay table (`flaretune replay`) and checks the target: the best non-exhaustive
# strategy reaches within TARGET of the optimum in at most 25% of the evaluations exhaustive
# search needs (the median over SEEDS seeds). Exit 0 when met, 1 when not.
#
# Environment: BUILD (build directory, default build), SEEDS (10), TARGET (0.05), OUT (where a
# new landscape is written, default out/landscapes), SEED (the recording's seed, 1).
set -euo pipefail
build=${BUILD:-build}
ft="$build/flaretune"
seeds=${SEEDS:-10}
target=${TARGET:-0.05}
out=${OUT:-out/landscapes}
[[ -x $ft ]] || { echo "search-quality: $ft not found: build first (or set BUILD)" >&2; exit 2; }
command -v jq >/dev/null || { echo "search-quality: needs jq (apt-get install jq)" >&2; exit 2; }

if [[ $# -ge 1 ]]; then
    log=$1
    [[ -r $log ]] || { echo "search-quality: cannot read $log" >&2; exit 2; }
else
    best_op="" best_n=0 best_preset=""
    for op in $("$ft" list ops --json | jq -r '.ops[].name'); do
        json=$("$ft" space "$op" --backend cpu --json 2>/dev/null) || continue
        n=$(jq -r '.valid' <<<"$json")
        printf '  %-18s %4d valid configurations at %s\n' "$op" "$n" "$(jq -r '.preset' <<<"$json")"
        if ((n > best_n)); then
            best_op=$op best_n=$n best_preset=$(jq -r '.preset' <<<"$json")
        fi
    done
    [[ -n $best_op ]] || { echo "search-quality: the cpu backend has no op" >&2; exit 1; }
    mkdir -p "$out"
    log="$out/$best_op.$best_preset.cpu.$(date +%Y%m%d-%H%M%S).jsonl"
    echo "recording $best_op at $best_preset: $best_n candidates, exhaustively -> $log"
    flock /tmp/ft-bench.lock "$ft" tune "$best_op" --backend cpu --preset "$best_preset" \
        --strategy exhaustive --no-screen --seed "${SEED:-1}" --log "$log"
    echo
fi

cmd=("$ft" replay "$log" --seeds "$seeds" --target "$target")
echo "\$ ${cmd[*]}"
"${cmd[@]}"
json=$("${cmd[@]}" --json)
jq -r '
  . as $r
  | ([.strategies[] | select(.name != "exhaustive" and .median != null)] | sort_by(.median) | first) as $b
  | if $b == null then "target: no non-exhaustive strategy reached the target in most seeds: NOT MET"
    else "target: best non-exhaustive (\($b.name)) needs a median of \($b.median) of \($r.valid) evaluations = \(($b.median_frac * 1000 | round) / 10)% of exhaustive (<= 25%): \(if $b.median_frac <= 0.25 then "met" else "NOT MET" end)"
    end' <<<"$json"
jq -e '[.strategies[] | select(.name != "exhaustive" and .median != null) | .median_frac] | min // 1 | . <= 0.25' \
    <<<"$json" >/dev/null
