#!/usr/bin/env bash
# prediction-check.sh: flaretune's GPU-free prediction of T1 kernels against their measured
# landscapes on NVIDIA GPUs (docs/t1.md, "The check").
#
#   scripts/prediction-check.sh [BUILD] [OUT] [LANDSCAPE...]
#
# LANDSCAPE: Kernel Tuner caches (default: every file of ../shared/landscapes/gpu, or of
# LANDSCAPES/gpu). Each one measured on a GPU flaretune has a spec for (its device_name, the
# model `flaretune compile --list-devices` lists) of a kernel a T1 file of
# ../shared/landscapes/kernels describes (KERNELS=DIR for another folder) is checked; every other
# file gets a line saying why it is left out (scripts/prediction-check.py --plan). For each,
# `flaretune inspect --t1` predicts SAMPLE configurations (default 200, drawn with SEED, default
# 1; SAMPLE=all: every one) for that GPU into OUT/KERNEL.jsonl (default out/predict: a rerun only
# adds what is missing), then scripts/prediction-check.py compares them with the measurements:
# OUT/check.md and check.json, with the Spearman ceiling of each kernel's source (parameters it
# never names).
# The dedispersion T1 file names a HIP file and declares its two inputs as one float each; the
# CUDA file beside it is used, and the sizes the kernel reads (dedispersion.h: 1536 channels of
# 25000 + 650 samples, one byte each; 1536 shifts in [0, 15), so that no read passes the end)
# are given with --arg.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
build=${1:-$root/build}
out=${2:-$root/out/predict}
land=${LANDSCAPES:-$root/../shared/landscapes}
kernels=${KERNELS:-$land/kernels}
sample=${SAMPLE:-200}
seed=${SEED:-1}
ft=$build/flaretune
[[ -x $ft ]] || { echo "prediction-check: no $ft (build first: make build)" >&2; exit 2; }
shift $(($# < 2 ? $# : 2))
files=("$@")
if ((${#files[@]} == 0)); then
    [[ -d $land/gpu ]] || { echo "prediction-check: no landscapes at $land/gpu" >&2; exit 2; }
    files=("$land"/gpu/*)
fi
[[ -d $kernels ]] || { echo "prediction-check: no T1 files at $kernels" >&2; exit 2; }
plan=$(python3 "$here/prediction-check.py" --plan --flaretune "$ft" --kernels "$kernels" "${files[@]}")
mkdir -p "$out"
which=(--sample "$sample" --seed "$seed")
[[ $sample == all ]] && which=(--all-configs)
pairs=()
while IFS=$'\t' read -r kernel dev t1 src landscape; do
    extra=()
    case $(basename "$t1") in
    dedispersion_milo.json)
        extra=(--arg 'input_samples=uint8:1536*25650:random' --arg 'shifts=float:1536:random:15') ;;
    esac
    echo "== $kernel on $dev ($(basename "$landscape"))"
    "$ft" inspect --t1 "$t1" --kernel-file "$src" "${extra[@]}" --device "$dev" "${which[@]}" \
        --jsonl "$out/$kernel.jsonl"
    pairs+=(--pair "$out/$kernel.jsonl:$dev:$landscape:$src")
done <<<"$plan"
python3 "$here/prediction-check.py" "${pairs[@]}" \
    --flaretune "$ft" --seeds "${SEEDS:-20}" --markdown "$out/check.md" --json "$out/check.json"
