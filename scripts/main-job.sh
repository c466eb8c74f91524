#!/usr/bin/env bash
# main-job.sh: what `make run` does once the build is done: a real tuning run of every op on the
# best backend this machine has, writing the tuned profile to profiles/local.json and the event
# logs to out/.
#
#   scripts/main-job.sh BUILD_DIR
#
# On a machine with an NVIDIA GPU flaretune can use: the real presets, Qwen3-8B DFLARE at the
# issues' shapes in bf16 (training shapes for the fusion, kvproj, training-attention and loss ops,
# N=8192; the decode preset, R=16 and L=4096, for attention.decode), each op searched for at most
# TIME seconds (default 45: about six minutes for the seven ops, NVRTC compiling on every core).
# Elsewhere: the CPU at a small preset (small.dflare.train), BUDGET candidates per op (default
# 24; bayes stops earlier once converged). PRESET, STRATEGY (default bayes), BUDGET and TIME
# override these; running it again
# resumes from the logs and keeps the best entry per key.
set -euo pipefail
build=${1:-build}
ft="$build/flaretune"
strategy=${STRATEGY:-bayes}
mkdir -p out profiles

"$ft" version
echo
"$ft" list backends | tee out/backends.txt
echo
if grep -q '^  cuda  *available' out/backends.txt; then
  preset=${PRESET:-qwen3-8b.dflare.train}
  secs=${TIME:-45}
  echo "GPU: tuning every op at $preset (N=8192, bf16), at most $secs s of search per op"
  jobs=$(nproc)
  [ "$jobs" -gt 64 ] && jobs=64
  args=(--preset "$preset" --set N=8192 --attr dtype=bf16 --time "$secs" --jobs "$jobs")
  [ -n "${BUDGET:-}" ] && args+=(--budget "$BUDGET")
else
  preset=${PRESET:-small.dflare.train}
  echo "CPU: tuning every op at $preset, at most ${BUDGET:-24} candidates per op"
  args=(--preset "$preset" --budget "${BUDGET:-24}")
  [ -n "${TIME:-}" ] && args+=(--time "$TIME")
fi
"$ft" tune all "${args[@]}" --strategy "$strategy" --profile profiles/local.json --log out/tune.jsonl
echo
"$ft" show profiles/local.json
echo
echo "profile: profiles/local.json (flaretune show / emit it); event logs: out/tune.jsonl.*"
echo "trace:   $ft trace out/tune.jsonl.loss -o out/loss.trace.json  (open in ui.perfetto.dev)"
