#!/usr/bin/env bash
# main-job.sh: what `make run` does once the build is done: a real tuning run of every op on the
# best backend this machine has (the GPU where one is present, the CPU otherwise) at a small
# preset, writing the tuned profile to profiles/local.json and the event log to out/.
#
#   scripts/main-job.sh BUILD_DIR
#
# PRESET, STRATEGY and BUDGET override the defaults (small.dflare.train, anneal, 24 candidates
# per op). Running it again resumes from the logs and keeps the best entry per key.
set -euo pipefail
build=${1:-build}
ft="$build/flaretune"
preset=${PRESET:-small.dflare.train}
strategy=${STRATEGY:-anneal}
budget=${BUDGET:-24}
mkdir -p out profiles

"$ft" version
echo
"$ft" list backends
echo
"$ft" tune all --preset "$preset" --strategy "$strategy" --budget "$budget" \
    --profile profiles/local.json --log out/tune.jsonl
echo
"$ft" show profiles/local.json
echo
echo "profile: profiles/local.json (flaretune show / emit it); event logs: out/tune.jsonl.*"
echo "trace:   $ft trace out/tune.jsonl.loss -o out/loss.trace.json  (open in ui.perfetto.dev)"
