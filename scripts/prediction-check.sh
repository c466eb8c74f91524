#!/usr/bin/env bash
# prediction-check.sh: flaretune's GPU-free prediction of the community's two T1 kernels against
# their measured landscapes on NVIDIA GPUs (docs/t1.md, "The check").
#
#   scripts/prediction-check.sh [BUILD] [OUT]
#
# For each NVIDIA landscape of ../shared/landscapes/gpu (2-D convolution and dedispersion on an
# A100-PCIE-40GB and an RTX A4000), `flaretune inspect --t1` predicts SAMPLE configurations
# (default 200, drawn with SEED, default 1; SAMPLE=all: every one) for that GPU into
# OUT/KERNEL.jsonl (default out/predict: a rerun only adds what is missing), then
# scripts/prediction-check.py compares them with the measurements: OUT/check.md and check.json,
# with the Spearman ceiling of each kernel's source (parameters it never names).
# The dedispersion T1 file names a HIP file and declares its two inputs as one float each; the
# CUDA file beside it and the sizes the kernel reads (dedispersion.h: 1536 channels of
# 25000 + 650 samples, one byte each; 1536 shifts in [0, 15), so that no read passes the end)
# are given with --kernel-file and --arg.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
build=${1:-$root/build}
out=${2:-$root/out/predict}
land=${LANDSCAPES:-$root/../shared/landscapes}
sample=${SAMPLE:-200}
seed=${SEED:-1}
ft=$build/flaretune
[[ -x $ft ]] || { echo "prediction-check: no $ft (build first: make build)" >&2; exit 2; }
[[ -d $land/gpu && -d $land/kernels ]] || { echo "prediction-check: no landscapes at $land" >&2; exit 2; }
mkdir -p "$out"
which=(--sample "$sample" --seed "$seed")
[[ $sample == all ]] && which=(--all-configs)
K=$land/kernels
for dev in a100-pcie rtx-a4000; do
    echo "== convolution on $dev"
    "$ft" inspect --t1 "$K/convolution_milo.json" --device "$dev" "${which[@]}" \
        --jsonl "$out/convolution.jsonl"
    echo "== dedispersion on $dev"
    "$ft" inspect --t1 "$K/dedispersion_milo.json" --kernel-file "$K/dedispersion.cu" \
        --arg 'input_samples=uint8:1536*25650:random' --arg 'shifts=float:1536:random:15' \
        --device "$dev" "${which[@]}" --jsonl "$out/dedispersion.jsonl"
done
python3 "$here/prediction-check.py" \
    --pair "$out/convolution.jsonl:a100-pcie:$land/gpu/convolution-A100.json.gz:$K/convolution_milo.cu" \
    --pair "$out/convolution.jsonl:rtx-a4000:$land/gpu/convolution-A4000.json.gz:$K/convolution_milo.cu" \
    --pair "$out/dedispersion.jsonl:a100-pcie:$land/gpu/dedispersion-A100.json.gz:$K/dedispersion.cu" \
    --pair "$out/dedispersion.jsonl:rtx-a4000:$land/gpu/dedispersion-A4000.json.gz:$K/dedispersion.cu" \
    --flaretune "$ft" --seeds "${SEEDS:-20}" --markdown "$out/check.md" --json "$out/check.json"
