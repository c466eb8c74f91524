#!/usr/bin/env bash
# gpu-check.sh: everything flaretune checks on an NVIDIA GPU machine, in one command, within a
# time budget, always leaving a summary.
#
#   scripts/gpu-check.sh [OUT_DIR]        (default: $OUT when set, else ./gpu-check-out)
#
# Steps, in order: build (Release, all cores); the device (nvidia-smi, flaretune list); every
# CUDA variant of every op verified against the float64 reference (tests/test_cuda_variants);
# the CUPTI timer's self-test; a kernel of a FAIR T1 file (tests/data/t1/saxpy_tiled.json) tuned
# exhaustively on the device as any user's kernel is (tune --t1: its 42 configurations, the six
# wrong ones rejected by the check and no other); per run of scripts/gpu-runs.txt a tuning session (CUPTI clock,
# profile and event log) and its winner benchmarked with CUPTI and with CUDA events, against the
# ceilings measured in the same run; PyTorch's versions of the attention and loss ops on the same
# shapes (scripts/torch-baseline.py) where PyTorch sees the GPU.
#
# BUDGET=SECONDS (default 480) bounds the whole run, the build included: each step gets a share
# of what is left, in proportion to its weight; a step that no longer fits its minimum is skipped
# and said so; a step that overruns its share is stopped (a tuning session keeps its best so far).
# After every step OUT/summary.md and OUT/summary.json are rewritten and the raw logs packed again
# into OUT/raw.tar.gz, so a run stopped at any moment leaves a table. OUT holds at most five files
# (summary.md, summary.json, profile.json, raw.tar.gz, gpu-check.log), none over 16 MiB, no
# folders: small enough to copy back whole from a remote machine. The raw logs are written under a work folder
# outside OUT (GPU_CHECK_WORK, default a fresh one under $TMPDIR).
#
# GPU_CHECK_BACKEND=cuda-emu rehearses the same steps on the SIMT emulator at tiny shapes (no GPU
# needed; CI runs it), so the script is tested end to end; only the backend and the shapes differ.
# QUICK=1 keeps the runs marked `q` in gpu-runs.txt. BUILD=DIR builds there (default build-gpu).
#
# The device kit (scripts/device-kit.sh, default folder .device-kit, or FT_KIT): its debs/ are
# unpacked into a private prefix when the machine lacks the build's packages (FT_DEPS_FORCE=1:
# even when it has them), and its kernel-cache.tar.xz, unpacked into kernel-cache/, is the NVRTC
# cache, so nothing it covers is compiled here; the summary counts the kernel modules compiled
# and found in the cache.
#
# OUT must not hold an earlier result (GPU_CHECK_OVERWRITE=1 replaces it).
#
# Exit: 0 every step passed or was skipped for time, 1 a step failed, 2 a usage error (or OUT
# holds a result), 3 no GPU (with GPU_CHECK_BACKEND=cuda).
set -uo pipefail
cd "$(dirname "$0")/.."
. scripts/gpu-runs.sh
root=$PWD
backend=${GPU_CHECK_BACKEND:-cuda}
budget=${BUDGET:-480}
quick=${QUICK:-0}
kit=${FT_KIT:-.device-kit}
build=${BUILD:-build-gpu}
case $backend in cuda | cuda-emu) ;; *)
  echo "gpu-check: GPU_CHECK_BACKEND must be cuda or cuda-emu, not '$backend'" >&2
  exit 2
  ;;
esac
if ! [[ $budget =~ ^[0-9]+$ ]] || [ "$budget" -lt 60 ]; then
  echo "gpu-check: BUDGET must be a whole number of seconds, at least 60 (got '$budget')" >&2
  exit 2
fi
if [ "$backend" = cuda ] && { ! command -v nvidia-smi >/dev/null 2>&1 ||
  ! nvidia-smi -L 2>/dev/null | grep -q 'GPU '; }; then
  echo "gpu-check: no NVIDIA GPU on this machine (nvidia-smi lists none); nothing to check" \
    "(GPU_CHECK_BACKEND=cuda-emu rehearses the run on the emulator)" >&2
  exit 3
fi

out=${1:-${OUT:-gpu-check-out}}
mkdir -p "$out" || exit 2
out=$(cd "$out" && pwd)
for f in summary.md summary.json profile.json raw.tar.gz gpu-check.log; do
  if [ -e "$out/$f" ] && [ -z "${GPU_CHECK_OVERWRITE:-}" ]; then
    echo "gpu-check: $out already holds a result ($f): name another folder, or set" \
      "GPU_CHECK_OVERWRITE=1 to replace it" >&2
    exit 2
  fi
  rm -f "$out/$f"
done
work=${GPU_CHECK_WORK:-$(mktemp -d "${TMPDIR:-/tmp}/gpu-check.XXXXXX")}
mkdir -p "$work/logs" || exit 2
exec > >(tee "$out/gpu-check.log") 2>&1

t0=$(date +%s)
reserve=15 # seconds kept for the last summary and packing
elapsed() { echo $(($(date +%s) - t0)); }
emu=0
[ "$backend" = cuda-emu ] && emu=1
jobs=$(nproc)
[ "$jobs" -gt 64 ] && jobs=64 # NVRTC threads of a tuning run (tune --jobs: 1 to 64)

# ---- the steps and their weights --------------------------------------------------------------
# A step: "kind|index|name|weight|minimum seconds". Runs come from gpu-runs.txt.
steps=("verify||verify every CUDA variant|40|20" "timer||timer self-test|5|5"
  "t1||tune --t1 saxpy_tiled (a T1 file's kernel)|4|10")
runs=() # the runs of gpu-runs.txt (QUICK=1: those marked q), tab-separated (gpu-runs.sh)
while IFS= read -r line; do
  IFS=$'\t' read -r name _ _ _ weight q <<<"$line"
  [ "$quick" = 1 ] && [ "$q" != q ] && continue
  steps+=("tune|${#runs[@]}|tune $name|$weight|12")
  runs+=("$line")
done < <(gpu_runs)
# Whole drafter steps with the profile the runs above wrote (flaretune step: every op alone and
# the step captured as a CUDA graph), then on a GPU a short report of the papers' design axes
# (flaretune report at the small presets; the emulator's timings would say nothing, and the
# report's sweep is tested on the CPU). Their JSON and the report's files go into the raw logs.
step_presets=("qwen3-8b.dflare.decode" "qwen3-8b.dflare.train")
report_model=small
[ "$emu" = 1 ] && step_presets=("tiny.dflare.decode" "tiny.dflare.train")
steps+=("step|0|step ${step_presets[0]}|8|15" "step|1|step ${step_presets[1]}|10|25")
[ "$emu" = 0 ] && steps+=("report||report --models $report_model|15|40")
# Nsight Compute on each quick run's default and best configs: the memory and instruction figures
# `flaretune inspect` derives on the emulator, measured (scripts/ncu-compare.py sets them side by
# side). A GPU run's step, where ncu is installed; one step, a minute or two.
ncu_bin=$(command -v ncu || ls /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
if [ "$emu" = 0 ] && [ -n "$ncu_bin" ]; then
  steps+=("ncu||Nsight Compute on the default and best configs|12|30")
fi
torch_cases=("decode --R 16 --L 4096" "decode --R 16 --L 32768" "decode --R 1 --L 32768"
  "train --S 3072 --NB 512 --backward" "loss --M 8192 --scheme dpace" "loss --M 8192 --scheme decay")
[ "$quick" = 1 ] && torch_cases=("${torch_cases[0]}" "${torch_cases[3]}" "${torch_cases[4]}")
# PyTorch's baselines take part in the budget only where PyTorch sees a GPU.
have_torch=0
[ "$emu" = 0 ] && python3 -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' \
  2>/dev/null && have_torch=1
if [ "$have_torch" = 1 ]; then
  for i in "${!torch_cases[@]}"; do
    steps+=("torch|$i|PyTorch ${torch_cases[$i]}|8|15")
  done
fi

weight_left=0
for s in "${steps[@]}"; do
  IFS='|' read -r _ _ _ w _ <<<"$s"
  weight_left=$((weight_left + w))
done

# ---- recording --------------------------------------------------------------------------------
cache_count() {
  local d=${FLARETUNE_CACHE_DIR:-}
  [ -n "$d" ] || { echo 0; return; }
  if [ "$emu" = 1 ]; then ls "$d"/emu/*.so 2>/dev/null | wc -l; else ls "$d"/nvrtc/*.cubin 2>/dev/null | wc -l; fi
}
# record NAME STATUS SECONDS SHARE NOTE [KIND INDEX]: one line of steps.jsonl
record() {
  python3 - "$work/steps.jsonl" "$@" <<'PY'
import json, sys
path, name, status, secs, share, note = sys.argv[1:7]
rec = {"step": name, "status": status, "seconds": int(secs), "share_s": int(share), "note": note}
if len(sys.argv) > 8:
    rec["kind"], rec["index"] = sys.argv[7], int(sys.argv[8])
with open(path, "a") as f:
    f.write(json.dumps(rec) + "\n")
PY
}
summarize() {
  python3 scripts/gpu-summary.py "$work" "$out" --backend "$backend" --budget "$budget" \
    --elapsed "$(elapsed)" ${1:+--final} || echo "gpu-check: the summary failed (see above)"
}

summarize # a table from the first second on

# ---- build ------------------------------------------------------------------------------------
printf '== build (%s, %s s budget)\n' "$backend" "$budget"
arch=$(gcc -print-multiarch 2>/dev/null || echo x86_64-linux-gnu)
cmake_args=(-DCMAKE_BUILD_TYPE=Release)
have_deps() {
  pkg-config --exists jansson 2>/dev/null &&
    [ -e "/usr/include/$arch/openblas-openmp/cblas.h" ] &&
    { [ -e /usr/include/ncursesw/curses.h ] || [ -e /usr/include/curses.h ]; }
}
debs=${FT_DEPS_DEBS:-}
[ -z "$debs" ] && { if [ -d "$kit/debs" ]; then debs=$kit/debs; else debs=.deps; fi; }
if [ -n "${FT_DEPS_FORCE:-}" ] || ! have_deps; then
  if ! ls "$debs"/*.deb >/dev/null 2>&1; then
    echo "gpu-check: the build needs jansson, OpenBLAS (OpenMP) and ncurses: install them" \
      "(scripts/deps.sh) or build the device kit (scripts/device-kit.sh) on a machine with apt" >&2
    exit 2
  fi
  pfx=/tmp/flaretune-deps
  echo "unpacking $(ls "$debs"/*.deb | wc -l) packages from $debs into $pfx"
  for f in "$debs"/*.deb; do dpkg-deb -x "$f" "$pfx"; done
  lib=$pfx/usr/lib/$arch
  # Absolute symlinks in -dev packages point into /usr: point them into the prefix instead.
  find "$pfx" -type l | while read -r l; do
    t=$(readlink "$l")
    case $t in /*) ln -sfn "$pfx$t" "$l" ;; esac
  done
  # The system's own ncurses runtime, when it has one, must win over the unpacked one (the two
  # libraries of a pair must come from the same build): link and run against the system's.
  sysw=$(ls /lib/"$arch"/libncursesw.so.6 /usr/lib/"$arch"/libncursesw.so.6 2>/dev/null | head -1)
  syst=$(ls /lib/"$arch"/libtinfo.so.6 /usr/lib/"$arch"/libtinfo.so.6 2>/dev/null | head -1)
  if [ -n "$sysw" ] && [ -n "$syst" ]; then
    rm -f "$lib"/libncursesw.so.6* "$lib"/libncurses.so.6* "$lib"/libtinfo.so.6* \
      "$pfx"/lib/"$arch"/libncursesw.so.6* "$pfx"/lib/"$arch"/libncurses.so.6* "$pfx"/lib/"$arch"/libtinfo.so.6*
    echo "INPUT($sysw $syst)" >"$lib/libncursesw.so"
  fi
  export LD_LIBRARY_PATH=$lib:$lib/openblas-openmp:$pfx/lib/$arch${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  export PKG_CONFIG_PATH=$lib/pkgconfig:$pfx/usr/share/pkgconfig
  export PKG_CONFIG_SYSROOT_DIR=$pfx
  pc=$(command -v pkg-config || echo "$pfx/usr/bin/pkgconf")
  # The sysroot would prefix a system MPI's .pc paths too (a folder that does not exist): one
  # GPU needs no MPI. The prefix's folders go into the binary's RUNPATH, so that it starts
  # outside this script too (OpenBLAS's libgfortran is not in the RUNPATH the linker records).
  cmake_args+=(-DFT_WITH_MPI=OFF -DCMAKE_BUILD_RPATH="$lib;$lib/openblas-openmp;$pfx/lib/$arch")
  cmake_args+=(-DPKG_CONFIG_EXECUTABLE="$pc" -DCMAKE_PREFIX_PATH="$pfx/usr"
    -DCMAKE_LIBRARY_PATH="$lib;$pfx/lib/$arch"
    -DFT_OPENBLAS_LIB="$lib/openblas-openmp/libopenblas.so"
    -DFT_OPENBLAS_INCLUDE="$pfx/usr/include/$arch/openblas-openmp"
    -DCURSES_INCLUDE_PATH="$pfx/usr/include")
fi
bs=$(date +%s)
if ! cmake -S . -B "$build" "${cmake_args[@]}" >"$work/logs/configure.log" 2>&1 ||
  ! cmake --build "$build" -j"$(nproc)" --target flaretune test_cuda_variants test_cuda_timer \
    >"$work/logs/build.log" 2>&1; then
  tail -n 25 "$work/logs/configure.log" "$work/logs/build.log"
  record build failed $(($(date +%s) - bs)) 0 "the build failed (raw.tar.gz: logs/build.log)"
  summarize final
  exit 1
fi
record build ok $(($(date +%s) - bs)) 0 "$build"
ft=$root/$build/flaretune
if [ -z "${FLARETUNE_CACHE_DIR:-}" ]; then
  # The kit carries its cache packed (device-kit.sh): unpacked once, beside the archive.
  if [ "$emu" = 0 ] && [ -f "$kit/kernel-cache.tar.xz" ] && [ ! -d "$kit/kernel-cache" ]; then
    tar -C "$kit" -xJf "$kit/kernel-cache.tar.xz" || echo "gpu-check: cannot unpack $kit/kernel-cache.tar.xz: compiling what is needed"
  fi
  if [ "$emu" = 0 ] && [ -d "$kit/kernel-cache" ]; then
    export FLARETUNE_CACHE_DIR=$(cd "$kit/kernel-cache" && pwd) # FT_KIT relative or absolute
  else
    export FLARETUNE_CACHE_DIR=$root/$build/kernel-cache
  fi
fi
echo "kernel cache: $FLARETUNE_CACHE_DIR ($(cache_count) modules)"
# The cache is keyed by NVRTC's version: a kit made with another CUDA release matches nothing
# here, and every module compiles again inside the budget. Said at once, not found at the end.
if [ "$emu" = 0 ] && [ -f "$kit/kit.json" ]; then
  kit_cuda=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1])).get("cuda", ""))'     "$kit/kit.json" 2>/dev/null || true)
  here_cuda=$(nvcc --version 2>/dev/null | sed -n 's/.*release \([0-9.]*\),.*/\1/p' || true)
  if [ -n "$kit_cuda" ] && [ -n "$here_cuda" ] && [ "$kit_cuda" != "$here_cuda" ]; then
    echo "gpu-check: the kit's kernels were compiled by CUDA $kit_cuda, this machine has" \
      "$here_cuda: NVRTC compiles every module again, within the budget" >&2
  fi
fi
cache_count >"$work/cache-before"

# ---- the device -------------------------------------------------------------------------------
echo "== device"
if [ "$emu" = 0 ]; then
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,clocks.max.mem,ecc.mode.current \
    --format=csv 2>&1 | tee "$work/logs/nvidia-smi.csv"
fi
"$ft" list backends 2>&1 | tee "$work/logs/list.txt"
if ! grep -q "^  $backend  *available" "$work/logs/list.txt"; then
  echo "gpu-check: flaretune cannot use the $backend backend (see above)" >&2
  record device failed 0 0 "the $backend backend is not available"
  summarize final
  exit 1
fi
record device ok 0 0 "$(grep "^  $backend " "$work/logs/list.txt" | head -1 | tr -s ' ' | cut -c2-200)"
[ "$have_torch" = 1 ] || record "PyTorch baselines" skipped 0 0 \
  "$([ "$emu" = 1 ] && echo "a GPU run's step" || echo "no PyTorch with CUDA here")" torch 0
# FlashInfer's kernels are the field's reference for these attention shapes, where a package of
# the machine provides them; the device image has none today, and the summary says so.
if [ "$emu" = 0 ]; then
  if python3 -c 'import flashinfer' 2>/dev/null; then
    record "FlashInfer baselines" skipped 0 0 "flashinfer is here, but torch-baseline.py has no FlashInfer variant yet" torch 0
  else
    record "FlashInfer baselines" skipped 0 0 "no flashinfer package on this machine" torch 0
  fi
  [ -n "$ncu_bin" ] || record "Nsight Compute" skipped 0 0 "no ncu on this machine" ncu 0
fi
summarize

# ---- one step ---------------------------------------------------------------------------------
fail=0
# step_verify SHARE, step_timer SHARE, step_tune I SHARE, step_torch I SHARE: 0 ok, 77 skipped,
# 124 stopped at the share, else failed. Each writes its note to $work/note.
step_verify() {
  local env=(FLARETUNE_TEST_BACKEND="$backend")
  # The emulator runs every config at tiny shapes in the test suite already: a sample here.
  [ "$emu" = 1 ] && env+=(FT_TEST_SAMPLE="${FT_TEST_SAMPLE:-400}")
  env "${env[@]}" timeout -k 10 "$1" "$build/tests/test_cuda_variants" >"$work/logs/verify.log" 2>&1
  local rc=$?
  tail -n 3 "$work/logs/verify.log"
  echo "$(tail -n 1 "$work/logs/verify.log" | cut -c1-160)" >"$work/note"
  return $rc
}
step_timer() {
  timeout -k 10 "$1" "$build/tests/test_cuda_timer" >"$work/logs/timer.log" 2>&1
  local rc=$?
  tail -n 2 "$work/logs/timer.log"
  if [ $rc = 77 ]; then echo "no GPU: the CUPTI timer is not testable here" >"$work/note"
  else tail -n 1 "$work/logs/timer.log" | cut -c1-160 >"$work/note"; fi
  case $rc in 0 | 77 | 124 | 137) ;; *) : >"$work/cupti-failed" ;; esac # failed, not cut
  return $rc
}
# A kernel of a T1 file, every configuration: the check rejects the six that skip an element
# (tile_size_x=3) and no other, on the GPU as on the emulator. Its Kernel Tuner cache, T4 file,
# event log and profile go into the raw logs.
step_t1() {
  local share=$1 reps=20
  [ "$emu" = 1 ] && reps=2
  timeout -k 10 -s INT "$share" "$ft" tune --t1 tests/data/t1/saxpy_tiled.json --backend "$backend" \
    --strategy exhaustive --budget 0 --reps "$reps" --kt-cache "$work/logs/t1.kt.json" \
    --t4 "$work/logs/t1.t4.json" --log "$work/logs/t1.jsonl" --profile "$work/logs/t1.profile.json" \
    >"$work/logs/t1.txt" 2>"$work/logs/t1.err"
  local rc=$?
  tail -n 4 "$work/logs/t1.txt"
  tail -n 2 "$work/logs/t1.err"
  { grep -m1 "configurations evaluated" "$work/logs/t1.txt" || tail -n 1 "$work/logs/t1.err"; } |
    cut -c1-200 >"$work/note"
  [ $rc = 130 ] && return 124
  [ $rc = 0 ] && ! grep -q "42 of 42 configurations evaluated (6 rejected)" "$work/logs/t1.txt" && rc=1
  return $rc
}
step_tune() {
  local i=$1 share=$2 name op gpu_sizes emu_sizes args
  IFS=$'\t' read -r name op gpu_sizes emu_sizes _ <<<"${runs[$i]}"
  args=$gpu_sizes
  [ "$emu" = 1 ] && args=$emu_sizes
  # Of the share: 60% searching (the tuner stops itself), the rest for its plan and the two
  # benchmarks; every command is also stopped hard at its part.
  local search=$((share * 60 / 100)) bench=$((share * 15 / 100)) timers=(cupti events)
  [ "$emu" = 1 ] && timers=(emulated)
  [ $search -lt 4 ] && search=4
  # CUPTI's clock, unless its self-test failed (a container that denies profiling): then CUDA
  # events, said in the step's note, so the run still measures something.
  local clock=(--timer cupti)
  if [ -f "$work/cupti-failed" ]; then
    clock=(--timer events) timers=(events)
  fi
  [ "$emu" = 1 ] && clock=()
  # shellcheck disable=SC2086
  timeout -k 20 $((share * 70 / 100)) "$ft" tune "$op" $args --backend "$backend" "${clock[@]}" \
    --time "$search" --max-time 0.5 --jobs "$jobs" --profile "$work/profile.json" \
    --log "$work/logs/tune-$i.jsonl" --quiet >"$work/logs/tune-$i.txt" 2>&1
  local rc=$?
  tail -n 4 "$work/logs/tune-$i.txt"
  local best
  best=$(python3 - "$work/logs/tune-$i.jsonl" <<'PY'
import json, sys
best = None
try:
    for line in open(sys.argv[1]):
        e = json.loads(line)
        if e.get("event") == "run_end" and e.get("winner"):
            best = e["winner"]
except (OSError, ValueError):
    pass
if best:
    print(",".join(f"{k}={v}" for k, v in best.items()))
PY
)
  echo "${best:-no winner: the default configuration benchmarked}" >"$work/note"
  [ -f "$work/cupti-failed" ] && [ "$emu" = 0 ] &&
    echo "(CUPTI failed its self-test: timed with CUDA events)" >>"$work/note"
  echo "$best" >"$work/logs/best-$i.txt"
  [ -n "$best" ] || { [ $rc = 0 ] && rc=1; }
  local t brc=0
  for t in "${timers[@]}"; do
    local tflag=(--timer "$t")
    [ "$t" = emulated ] && tflag=()
    # shellcheck disable=SC2086
    timeout -k 5 $((bench + 10)) "$ft" bench "$op" $args --backend "$backend" "${tflag[@]}" \
      ${best:+--config "$best"} --json --max-time "$bench" \
      >"$work/logs/bench-$i-$t.json" 2>"$work/logs/bench-$i-$t.err" || {
      brc=1
      tail -n 3 "$work/logs/bench-$i-$t.err"
    }
  done
  printf '{"name": "%s", "op": "%s", "args": "%s"}\n' "$name" "$op" "$args" >"$work/logs/run-$i.json"
  [ $rc = 0 ] && rc=$brc
  # A tuning session stopped at its share keeps its best: the benchmarks still ran.
  [ $rc = 130 ] || [ $rc = 143 ] && rc=124
  return $rc
}
# The metrics of `flaretune inspect`'s figures (docs/cuda.md, "Checking the emulator with Nsight
# Compute"): time, DRAM bytes, global requests and sectors, shared wavefronts and bank
# conflicts, instructions (warp and thread: active lanes), achieved occupancy.
ncu_metrics=gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,\
l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum,l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum,\
l1tex__t_requests_pipe_lsu_mem_global_op_st.sum,l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum,\
smsp__inst_executed_op_shared_ld.sum,smsp__inst_executed_op_shared_st.sum,\
l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum,l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st.sum,\
l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum,l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum,\
smsp__inst_executed.sum,smsp__thread_inst_executed.sum,sm__warps_active.avg.pct_of_peak_sustained_active,\
launch__grid_size,launch__block_size,launch__registers_per_thread
step_ncu() {
  local share=$1 i name op gpu_sizes cases=() c
  for i in "${!runs[@]}"; do
    IFS=$'\t' read -r name op gpu_sizes _ _ q <<<"${runs[$i]}"
    [ "$q" = q ] || continue
    cases+=("$i|default|")
    [ -s "$work/logs/best-$i.txt" ] && cases+=("$i|best|$(cat "$work/logs/best-$i.txt")")
  done
  [ ${#cases[@]} -gt 0 ] || { echo "no tuning run to profile" >"$work/note"; return 77; }
  local each=$((share / ${#cases[@]})) done=0 failed=0
  for c in "${cases[@]}"; do
    IFS='|' read -r i which cfg <<<"$c"
    IFS=$'\t' read -r name op gpu_sizes _ <<<"${runs[$i]}"
    # One call of the op (exec), its first 12 kernel launches profiled.
    # shellcheck disable=SC2086
    timeout -k 5 "$each" "$ncu_bin" --csv --page raw --launch-count 12 --metrics "$ncu_metrics" \
      "$ft" exec "$op" $gpu_sizes --backend cuda ${cfg:+--config "$cfg"} --quiet \
      >"$work/logs/ncu-$i-$which.csv" 2>"$work/logs/ncu-$i-$which.err"
    if [ $? = 0 ]; then done=$((done + 1)); else failed=$((failed + 1)); tail -n 2 "$work/logs/ncu-$i-$which.err"; fi
    printf '{"name": "%s", "op": "%s", "args": "%s", "which": "%s", "config": "%s"}\n' \
      "$name" "$op" "$gpu_sizes" "$which" "$cfg" >"$work/logs/ncu-$i-$which.json"
  done
  local why=""
  [ "$failed" -gt 0 ] && why=", $failed failed (raw.tar.gz: logs/ncu-*.err)"
  echo "$done of ${#cases[@]} configs profiled by $(basename "$ncu_bin")$why" >"$work/note"
  [ "$done" -gt 0 ] || return 1
  return 0
}
step_step() {
  local i=$1 share=$2 prof=()
  [ -s "$work/profile.json" ] && prof=(--profile "$work/profile.json")
  timeout -k 10 "$share" "$ft" step "${step_presets[$i]}" --backend "$backend" "${prof[@]}" \
    --time "$([ "$emu" = 1 ] && echo 0.005 || echo 0.05)" --json \
    >"$work/logs/step-$i.json" 2>"$work/logs/step-$i.err"
  local rc=$?
  tail -n 3 "$work/logs/step-$i.err"
  python3 - "$work/logs/step-$i.json" >"$work/note" <<'PY'
import json, sys
try:
    d = json.load(open(sys.argv[1]))
    w = d["whole"]
    print("whole step %.4g ms (%s), ops alone %.4g ms, ratio %.2f" % (
        w["stats"]["median_s"] * 1e3, w["mode"], w["sum_alone_s"] * 1e3, w["ratio"]))
except (OSError, ValueError, KeyError):
    print("no result")
PY
  return $rc
}

step_report() {
  local share=$1 prof=()
  [ -s "$work/profile.json" ] && prof=(--profile "$work/profile.json")
  timeout -k 10 -s INT "$share" "$ft" report --models "$report_model" --backend "$backend" \
    "${prof[@]}" --time "$([ "$emu" = 1 ] && echo 0.002 || echo 0.02)" -o "$work/logs/report" \
    >"$work/logs/report.txt" 2>&1
  local rc=$?
  tail -n 2 "$work/logs/report.txt"
  grep -c '"report_step"' "$work/logs/report/report.jsonl" 2>/dev/null |
    sed 's/$/ of 43 steps measured/' >"$work/note"
  return $rc
}

step_torch() {
  local i=$1 share=$2
  # shellcheck disable=SC2086
  timeout -k 10 "$share" python3 scripts/torch-baseline.py ${torch_cases[$i]} \
    --reps $((quick ? 5 : 20)) --json "$work/logs/torch-$i.json" 2>"$work/logs/torch-$i.err"
  local rc=$?
  tail -n 3 "$work/logs/torch-$i.err"
  echo "${torch_cases[$i]}" >"$work/note"
  return $rc
}

# The kernel modules a step needed, as flaretune reports them (the variant test's last line, the
# tuning run's run_end event, each benchmark's JSON): " [kernel modules: N compiled, M from the
# cache]", or nothing when it needed none.
step_modules() {
  python3 - "$work/logs" "$1" "$2" <<'PY'
import json, os, re, sys
logs, kind, i = sys.argv[1], sys.argv[2], sys.argv[3]
c = h = 0
def add(km):
    global c, h
    if isinstance(km, dict):
        c += km.get("compiled", 0)
        h += km.get("cached", 0)
try:
    if kind == "verify":
        m = re.findall(r"kernel modules: (\d+) compiled, (\d+) from the disk cache",
                       open(os.path.join(logs, "verify.log")).read())
        if m:
            c, h = int(m[-1][0]), int(m[-1][1])
    elif kind == "tune":
        for line in open(os.path.join(logs, f"tune-{i}.jsonl")):
            e = json.loads(line)
            if e.get("event") == "run_end":
                add(e.get("kernel_modules"))
        for n in os.listdir(logs):
            if n.startswith(f"bench-{i}-") and n.endswith(".json"):
                try:
                    add(json.load(open(os.path.join(logs, n))).get("kernel_modules"))
                except ValueError:
                    pass
except OSError:
    pass
if c or h:
    print(f" [kernel modules: {c} compiled, {h} from the cache]")
PY
}

# ---- the steps, each within its share of what is left ------------------------------------------
for s in "${steps[@]}"; do
  IFS='|' read -r kind idx name w min <<<"$s"
  left=$((budget - $(elapsed) - reserve))
  share=$((left * w / weight_left))
  weight_left=$((weight_left - w))
  if [ "$share" -lt "$min" ]; then
    echo "== $name: skipped (${left} s of the budget left, this step's share ${share} s < ${min} s)"
    record "$name" skipped 0 "$share" "no time left: share ${share} s of ${left} s, needs ${min} s" "$kind" "${idx:-0}"
    summarize
    continue
  fi
  printf '== %s  (share %s s, %s s elapsed)\n' "$name" "$share" "$(elapsed)"
  : >"$work/note"
  ss=$(date +%s)
  case $kind in
    verify) step_verify "$share" ;;
    timer) step_timer "$share" ;;
    t1) step_t1 "$share" ;;
    tune) step_tune "$idx" "$share" ;;
    torch) step_torch "$idx" "$share" ;;
    ncu) step_ncu "$share" ;;
    step) step_step "$idx" "$share" ;;
    report) step_report "$share" ;;
  esac
  rc=$?
  took=$(($(date +%s) - ss))
  note="$(head -c 300 "$work/note" | tr '\n' ' ')$(step_modules "$kind" "${idx:-0}")"
  case $rc in
    0) status=ok ;;
    77) status=skipped ;;
    124 | 137) status=cut; note="stopped at its share of ${share} s; $note" ;;
    *) status=failed; fail=1 ;;
  esac
  [ "$kind" = verify ] && [ $rc = 124 ] && fail=1 # verification cut short is not a pass
  record "$name" "$status" "$took" "$share" "$note" "$kind" "${idx:-0}"
  summarize
done

echo "== summary ($(elapsed) s of $budget)"
summarize final || fail=1
cat "$out/summary.md"
echo "results in $out"
exit $fail
