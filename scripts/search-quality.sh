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
#
# Then Kernel Tuner's strategies replay the same landscape in its simulation mode (kt_compare
# below, scripts/kt-compare.py): KT=0 leaves that out; VENV (out/kt-venv) is the virtual
# environment it is installed in, KT_SEEDS (SEEDS), KT_TARGETS (0.05,0.01), KT_JOBS (1). Its
# table goes to stdout and its JSON beside the landscape's name under OUT; it never changes the
# exit code.
set -euo pipefail
build=${BUILD:-build}
ft="$build/flaretune"
seeds=${SEEDS:-10}
target=${TARGET:-0.05}
out=${OUT:-out/landscapes}
# ---- Kernel Tuner's strategies on the same landscapes -----------------------------------
# kt_compare LANDSCAPE...: each an export of `flaretune replay LOG --export FILE` or an exhaustive
# event log, which is exported first when this flaretune can (kt-compare.py reads a log too).
# Makes $VENV with python3 -m venv and Kernel Tuner $KT_VERSION when it lacks it.
KT_VERSION=1.5.0
kt_compare() {
    [[ ${KT:-1} != 0 ]] || return 0
    local venv=${VENV:-out/kt-venv} f name
    local py="$venv/bin/python" here
    here=$(dirname "${BASH_SOURCE[0]}")
    if ! "$py" -c "import kernel_tuner, numpy, sys
from importlib.metadata import version
sys.exit(version('kernel_tuner') != '$KT_VERSION')" 2>/dev/null; then
        echo "kt-compare: installing kernel_tuner==$KT_VERSION and numpy into $venv"
        if ! { python3 -m venv "$venv" &&
            "$py" -m pip install -q "kernel_tuner==$KT_VERSION" numpy; }; then
            echo "search-quality: could not install Kernel Tuner into $venv (python3 -m" \
                "venv needs python3-venv on Debian): no comparison" >&2
            return 0
        fi
    fi
    mkdir -p "$out"
    for f in "$@"; do
        name=$(basename "$f")
        name=${name%.json}
        name=${name%.jsonl}
        if [[ $f == *.jsonl && $("$ft" replay --help 2>&1) == *--export* ]] &&
            "$ft" replay "$f" --seeds 1 --export "$out/$name.landscape.json" >/dev/null; then
            f="$out/$name.landscape.json"
        fi
        local kcmd=("$py" "$here/kt-compare.py" "$f" --seeds "${KT_SEEDS:-$seeds}"
            --targets "${KT_TARGETS:-0.05,0.01}" --jobs "${KT_JOBS:-1}"
            --json "$out/$name.kt.json")
        echo
        echo "\$ ${kcmd[*]}"
        "${kcmd[@]}" || echo "search-quality: kt-compare failed on $f (exit $?)" >&2
    done
}
# ---- end of Kernel Tuner's strategies ---------------------------------------------------

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
kt_compare "$log"
json=$("${cmd[@]}" --json)
jq -r '
  . as $r
  | ([.strategies[] | select(.name != "exhaustive" and .median != null)] | sort_by(.median) | first) as $b
  | if $b == null then "target: no non-exhaustive strategy reached the target in most seeds: NOT MET"
    else "target: best non-exhaustive (\($b.name)) needs a median of \($b.median) of \($r.valid) evaluations = \(($b.median_frac * 1000 | round) / 10)% of exhaustive (<= 25%): \(if $b.median_frac <= 0.25 then "met" else "NOT MET" end)"
    end' <<<"$json"
jq -e '[.strategies[] | select(.name != "exhaustive" and .median != null) | .median_frac] | min // 1 | . <= 0.25' \
    <<<"$json" >/dev/null
