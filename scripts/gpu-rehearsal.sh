#!/usr/bin/env bash
# gpu-rehearsal.sh: scripts/gpu-check.sh end to end on the SIMT emulator (no GPU), as CI runs it.
#
#   scripts/gpu-rehearsal.sh [BUILD]      (default build: an existing build with the toolkit)
#
# 0. Every run of scripts/gpu-runs.txt, at its GPU sizes and at its emulator sizes, is a problem
#    flaretune accepts with at least one valid configuration (flaretune space).
# 1. A whole run (GPU_CHECK_BACKEND=cuda-emu, the runs QUICK=1 keeps, BUDGET=${BUDGET:-200}): it
#    must exit 0, verify the variants, tune and benchmark a verified winner of every op family,
#    keep every step within the budget, and leave an output folder a lent GPU machine can send
#    back (gpu-summary.py --check). QUICK=0 rehearses every run (it needs a larger BUDGET).
# 2. The same run killed with SIGKILL once its first tuning step has started: the summary it
#    leaves must be readable, name the steps done so far, and respect the same limits.
# 3. scripts/gpu-import.sh of the first run into a throwaway clone (--rehearsal): the profile,
#    the dated run folder and the README's section appear, and nothing else changes.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/gpu-runs.sh
root=$PWD
build=${1:-build}
budget=${BUDGET:-200}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/gpu-rehearsal.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
export FLARETUNE_CACHE_DIR=${FLARETUNE_CACHE_DIR:-$root/$build/emu-cache}
fail() {
  echo "gpu-rehearsal: $*" >&2
  exit 1
}

echo "== 0. every run's sizes, on the GPU and on the emulator"
n=0
while IFS=$'\t' read -r _ op gpu emu _; do
  for args in "$gpu" "$emu"; do
    # shellcheck disable=SC2086
    valid=$("$build/flaretune" space "$op" --backend cuda-emu $args --json 2>"$tmp/space.err" |
      python3 -c 'import json, sys; print(json.load(sys.stdin)["valid"])' 2>/dev/null) ||
      fail "gpu-runs.txt: $op $args: $(cat "$tmp/space.err")"
    [ "$valid" -ge 1 ] || fail "gpu-runs.txt: $op $args: no valid configuration"
    n=$((n + 1))
  done
done < <(gpu_runs)
echo "  $n problems, each with valid configurations"

quick=${QUICK:-1}
echo "== 1. a whole rehearsal (budget $budget s, QUICK=$quick)"
start=$(date +%s)
QUICK=$quick GPU_CHECK_BACKEND=cuda-emu BUDGET=$budget BUILD=$build GPU_CHECK_WORK=$tmp/work1 \
  scripts/gpu-check.sh "$tmp/out1" >"$tmp/run1.log" 2>&1 || { tail -n 40 "$tmp/run1.log"; fail "the rehearsal failed"; }
took=$(($(date +%s) - start))
python3 scripts/gpu-summary.py --check "$tmp/out1" || fail "the output folder breaks the return limits"
files=$(cd "$tmp/out1" && ls | tr '\n' ' ')
[ "$files" = "gpu-check.log profile.json raw.tar.gz summary.json summary.md " ] ||
  fail "the output folder holds: $files"
python3 - "$tmp/out1/summary.json" "$budget" "$took" <<'PY' || fail "the summary is wrong (above)"
import json, sys
d = json.load(open(sys.argv[1]))
budget, took = int(sys.argv[2]), int(sys.argv[3])
bad = []
st = {s["step"]: s for s in d["steps"]}
if not d.get("finished"):
    bad.append("not marked finished")
if st.get("verify every CUDA variant", {}).get("status") != "ok":
    bad.append(f"verify: {st.get('verify every CUDA variant')}")
families = {r["op"].split(".")[0] for r in d["runs"]
            if r.get("emulated", {}).get("median_s") and r.get("verified", "").startswith("yes")}
if families != {"fusion", "attention", "loss"}:
    bad.append(f"benchmarked families: {sorted(families)}")
for s in d["steps"]:
    if s["status"] not in ("ok", "skipped", "cut"):
        bad.append(f"step {s['step']}: {s['status']}")
if took > budget + 30:
    bad.append(f"took {took} s for a budget of {budget} s")
for r in d["runs"]:
    if r.get("emulated") and not r.get("verified", "").startswith(("yes", "no winner")):
        bad.append(f"run {r['name']}: a benchmarked winner without its verification")
for b in bad:
    print("gpu-rehearsal:", b, file=sys.stderr)
print(f"  {len(d['steps'])} steps, {sum(1 for r in d['runs'] if r.get('emulated'))} runs benchmarked, "
      f"{took} s of {budget}")
sys.exit(1 if bad else 0)
PY

echo "== 2. killed (SIGKILL) during its first tuning step"
QUICK=$quick GPU_CHECK_BACKEND=cuda-emu BUDGET=$budget BUILD=$build GPU_CHECK_WORK=$tmp/work2 \
  setsid scripts/gpu-check.sh "$tmp/out2" >"$tmp/run2.log" 2>&1 &
pid=$!
for _ in $(seq 1 600); do
  grep -q '^== tune ' "$tmp/run2.log" 2>/dev/null && break
  kill -0 $pid 2>/dev/null || break
  sleep 0.2
done
sleep 2
kill -9 -- -"$pid" 2>/dev/null || kill -9 "$pid" 2>/dev/null || true
wait $pid 2>/dev/null || true
python3 scripts/gpu-summary.py --check "$tmp/out2" || fail "a killed run's folder breaks the return limits"
python3 - "$tmp/out2" <<'PY' || fail "a killed run left no usable summary"
import json, os, sys
d = json.load(open(os.path.join(sys.argv[1], "summary.json")))
steps = [s["step"] for s in d["steps"]]
md = open(os.path.join(sys.argv[1], "summary.md")).read()
ok = not d["finished"] and "verify every CUDA variant" in steps and "| step | status |" in md
print(f"  left {len(steps)} steps in its summary: {', '.join(steps)}")
sys.exit(0 if ok else 1)
PY

echo "== 3. imported into a throwaway clone"
git clone -q "$root" "$tmp/clone"
# The scripts and README as they are here (a working tree may be ahead of its last commit).
cp scripts/gpu-import.sh "$tmp/clone/scripts/"
cp README.md .gitignore "$tmp/clone/"
(cd "$tmp/clone" && git add -A && git -c user.name=r -c user.email=r@r commit -qm base --allow-empty)
FT=$root/$build/flaretune "$tmp/clone/scripts/gpu-import.sh" "$tmp/out1" >"$tmp/import.log" 2>&1 &&
  fail "the import took a rehearsal without --rehearsal"
FT=$root/$build/flaretune "$tmp/clone/scripts/gpu-import.sh" "$tmp/out1" --rehearsal >"$tmp/import.log" 2>&1 ||
  { cat "$tmp/import.log"; fail "the import failed"; }
changed=$(cd "$tmp/clone" && git status --porcelain | awk '{print $2}' | sort | tr '\n' ' ')
case $changed in
  "README.md profiles/runs/simt-emulator-"*"/ profiles/simt-emulator.json ") ;;
  *) fail "the import changed: $changed" ;;
esac
grep -q 'every file in \[profiles/runs/simt-emulator-' "$tmp/clone/README.md" || fail "README's section not written"
(cd "$tmp/clone" && "$root/$build/flaretune" show profiles/simt-emulator.json >/dev/null) ||
  fail "the merged profile does not load"
echo "  imported: $changed"
echo "gpu-rehearsal: ok"
