#!/usr/bin/env bash
# search-quality.sh: flaretune's search strategies against Kernel Tuner's, on real GPU
# landscapes and on CPU landscapes recorded on this machine.
#
#   scripts/search-quality.sh [LANDSCAPE...]
#
# Without arguments: the GPU landscapes of $LANDSCAPES (default ../shared/landscapes/gpu beside
# this repository, when it is there: Kernel Tuner cache files of 2-D convolution and
# dedispersion brute-forced on an A100, an RTX A4000 and an MI250X, from the FAIR benchmark hub;
# the `_T4` copies of the same data are left out), and three CPU landscapes recorded here
# exhaustively (attention.decode at small.dflare.decode, fusion.dflare and attention.train at
# small.dflare.train: every candidate measured fully, --no-screen, under /tmp/ft-bench.lock so
# concurrent benchmarks do not disturb them; CPU=0 leaves them out). With arguments: those
# landscapes (exhaustive event logs, Kernel Tuner caches or T4 files) instead.
#
# For each landscape: `flaretune replay L --seeds SEEDS --target 5%,1% --batch 1,4,16`
# (every flaretune strategy; LARGE_SEEDS seeds on a landscape of more than 2000 candidates,
# where a guided replay costs seconds), then Kernel Tuner's strategies on the same landscape in
# its simulation mode (kt_compare below, scripts/kt-compare.py), then one table
# (scripts/search-table.py) with the goal: the default strategy reaches 5% of the optimum in no
# more evaluations than Kernel Tuner's best strategy on that landscape, and 1% in at most 1.2x,
# in evaluations and in recorded time. Exit 0 when the goal holds on every landscape, 1 when
# not (each shortfall said), 2 on a setup error.
#
# Environment: BUILD (build directory, default build), SEEDS (1000), LARGE_SEEDS (100), OUT
# (default out/landscapes: the recordings, replays, exports and the table, search-quality.md),
# SEED (the recordings' seed, 1), LANDSCAPES, CPU (1). KT=0 leaves Kernel Tuner out; VENV
# (out/kt-venv) is the virtual environment it is installed in (python3-venv on Debian),
# KT_SEEDS (20: Kernel Tuner's strategies take minutes each for all seeds), KT_STRATEGIES (all),
# KT_TARGETS (0.05,0.01), KT_JOBS (1), ORDERINGS (20: both
# sides replay seed s on ordering (s-1) % ORDERINGS of the parameters, so each of Kernel Tuner's
# 20 seeds has an ordering of its own: over 4, diff_evo's median on attention.train was 12
# evaluations, two orderings near 11 and two near 42; over 40 it is 23); KT_EXCLUDE (none by
# default: over several orderings diff_evo's counts no longer follow one space order) names
# Kernel Tuner strategies shown but not compared against (scripts/kt-compare.py says why). BATCHES (1,4,16). GOAL=0 exits 0 when the table was made
# but the goal does not hold (CI's reduced run, whose few seeds check the pipeline, not the
# goal).
set -euo pipefail
build=${BUILD:-build}
ft="$build/flaretune"
seeds=${SEEDS:-1000}
large_seeds=${LARGE_SEEDS:-100}
batches=${BATCHES:-1,4,16}
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
out=${OUT:-out/landscapes}
[[ -x $ft ]] || { echo "search-quality: $ft not found: build first (or set BUILD)" >&2; exit 2; }
mkdir -p "$out"

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
        local kcmd=("$py" "$here/kt-compare.py" "$f" --seeds "${KT_SEEDS:-20}"
            ${KT_STRATEGIES:+--strategies "$KT_STRATEGIES"}
            --targets "${KT_TARGETS:-0.05,0.01}" --jobs "${KT_JOBS:-1}"
            --orderings "${ORDERINGS:-20}"
            --json "$out/$name.kt.json")
        echo
        echo "\$ ${kcmd[*]}"
        "${kcmd[@]}" || echo "search-quality: kt-compare failed on $f (exit $?)" >&2
    done
}

logs=()
if [[ $# -ge 1 ]]; then
    for log in "$@"; do
        [[ -r $log ]] || { echo "search-quality: cannot read $log" >&2; exit 2; }
        logs+=("$log")
    done
else
    gpu=${LANDSCAPES:-$here/../../shared/landscapes/gpu}
    if [[ -d $gpu ]]; then
        for f in "$gpu"/*.json.gz "$gpu"/*.json; do
            [[ -r $f && $f != *_T4.json* ]] && logs+=("$f")
        done
    else
        echo "search-quality: no GPU landscapes at $gpu (set LANDSCAPES): CPU ones only"
    fi
    if [[ ${CPU:-1} != 0 ]]; then
        for spec in "attention.decode small.dflare.decode" "fusion.dflare small.dflare.train" \
                    "attention.train small.dflare.train"; do
            read -r op preset <<<"$spec"
            log="$out/$op.$preset.cpu.$(date +%Y%m%d-%H%M%S).jsonl"
            echo "recording $op at $preset exhaustively, quietly -> $log"
            flock /tmp/ft-bench.lock "$ft" tune "$op" --backend cpu --preset "$preset" \
                --strategy exhaustive --no-screen --seed "${SEED:-1}" --log "$log" --quiet
            logs+=("$log")
        done
    fi
    echo
fi
[[ ${#logs[@]} -gt 0 ]] || { echo "search-quality: no landscape to replay" >&2; exit 2; }

replays=() exports=() traces=()
for log in "${logs[@]}"; do
    name=$(basename "$log")
    name=${name%.gz}
    name=${name%.json}
    name=${name%.jsonl}
    n=$seeds
    valid=$("$ft" replay "$log" --strategy exhaustive --seeds 1 --json |
        python3 -c 'import json, sys; print(json.load(sys.stdin)["valid"])')
    [[ $valid -gt 2000 ]] && n=$large_seeds
    cmd=("$ft" replay "$log" --seeds "$n" --target 5%,1% --batch "$batches"
        --orderings "${ORDERINGS:-20}")
    echo "\$ ${cmd[*]}"
    "${cmd[@]}" --json --export "$out/$name.landscape.json" >"$out/$name.replay.json"
    replays+=("$out/$name.replay.json")
    # the default's course, seed by seed, for the methodology score
    "$ft" replay "$log" --seeds "$n" --target 5%,1% --orderings "${ORDERINGS:-20}" \
        --strategy bayes --json --trace >"$out/$name.trace.json"
    traces+=("$out/$name.trace.json")
    exports+=("$out/$name.landscape.json")
    echo
done

kts=()
if [[ ${KT:-1} != 0 ]]; then
    kt_compare "${exports[@]}"
    for e in "${exports[@]}"; do
        k="${e%.landscape.json}.landscape.kt.json"
        [[ -r $k ]] && kts+=("$k")
    done
fi

echo "\$ scripts/search-table.py ... (the table: $out/search-quality.md)"
python3 "$(dirname "${BASH_SOURCE[0]}")/search-table.py" "${replays[@]}" \
    ${kts[@]+--kt "${kts[@]}"} ${traces[@]+--traces "${traces[@]}"} \
    --exclude "${KT_EXCLUDE-}" \
    --markdown "$out/search-quality.md" --json "$out/search-quality.json" || code=$?
if [[ ${code:-0} == 1 && ${GOAL:-1} == 0 ]]; then
    echo "search-quality: the goal's shortfalls are reported, not enforced (GOAL=0)"
    exit 0
fi
exit "${code:-0}"
