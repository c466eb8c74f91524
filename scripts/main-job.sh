#!/usr/bin/env bash
# main-job.sh: what `make run` does once the build is done: list what this machine can run,
# then run every op on a tiny preset with the float64 reference and write the outputs.
#
#   scripts/main-job.sh BUILD_DIR OUT_DIR
set -euo pipefail
build=${1:-build}
out=${2:-out/run}
ft="$build/flaretune"

"$ft" version
echo
"$ft" list backends
echo
for op in fusion.dflare fusion.dflash attention.kvproj attention.decode attention.train loss; do
    preset=tiny.dflare.train
    [[ $op == attention.decode ]] && preset=tiny.dflare.decode
    attrs=()
    [[ $op == fusion.* || $op == attention.train ]] && attrs=(--attr backward=1)
    "$ft" exec "$op" --preset "$preset" --backend ref "${attrs[@]}" \
        --save-inputs "$out/$op/inputs" --out "$out/$op/outputs"
    echo
done
echo "outputs written under $out/"
