#!/usr/bin/env bash
# gpu-check.sh: everything flaretune checks on an NVIDIA GPU machine, in one command.
#
#   scripts/gpu-check.sh [OUT_DIR]        (default: $OUT when set, else ./gpu-check-out)
#
# In order, each step timed: build (Release, all cores); the device (flaretune list, nvidia-smi);
# every CUDA variant of every op verified on the GPU against the float64 reference (the same
# matrix of configs, shapes and dtypes CI runs on the emulator); the CUPTI timer's own test; a
# short tuning session per CUDA op at a real preset (CUPTI timing, profiles and event logs
# written to OUT_DIR); the winners benchmarked with CUPTI and with CUDA events, side by side,
# against the ceilings (device-to-device copy bandwidth, cuBLASLt bf16 GEMM rate) measured in the
# same run; PyTorch's versions of the attention and loss ops on the same shapes
# (scripts/torch-baseline.py, where PyTorch sees the GPU); and last, a short table: op, best
# config, time, % of the ceiling, verified, then PyTorch's times and peak memory.
#
# QUICK=1 shortens every step: shorter tuning and benchmarks, one run per op (the full run
# covers the issue's benchmark shapes: decode at R=16 and R=1 with L=4096 and 32768, training
# attention at S=3072, NB=512, the loss at H=4096, V=151936, 512 blocks with dpace and decay).
#
# Machines without package access: put the Debian .deb files of the build dependencies in a
# folder (FT_DEPS_DEBS, default .deps; see scripts/deps.sh for the list) and they are unpacked
# into a private prefix when the system lacks them (FT_DEPS_FORCE=1: even when it has them).
# Without a GPU the script says so and exits 3.
set -uo pipefail
cd "$(dirname "$0")/.."
out=${1:-${OUT:-gpu-check-out}}
mkdir -p "$out"
t0=$(date +%s)
step() { printf '\n== %s  (%ss)\n' "$*" "$(($(date +%s) - t0))"; }
fail=0

if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L 2>/dev/null | grep -q 'GPU '; then
  echo "gpu-check: no NVIDIA GPU on this machine (nvidia-smi lists none); nothing to check" >&2
  exit 3
fi

# ---- build ------------------------------------------------------------------------------------
step "build"
arch=$(gcc -print-multiarch 2>/dev/null || echo x86_64-linux-gnu)
cmake_args=(-DCMAKE_BUILD_TYPE=Release)
have_deps() {
  pkg-config --exists jansson 2>/dev/null &&
    [ -e "/usr/include/$arch/openblas-openmp/cblas.h" ] &&
    { [ -e /usr/include/ncursesw/curses.h ] || [ -e /usr/include/curses.h ]; }
}
if [ -n "${FT_DEPS_FORCE:-}" ] || ! have_deps; then
  debs=${FT_DEPS_DEBS:-.deps}
  if ! ls "$debs"/*.deb >/dev/null 2>&1; then
    echo "gpu-check: the build needs jansson, OpenBLAS (OpenMP) and ncurses: install them" \
      "(scripts/deps.sh) or put their .deb files in $debs" >&2
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
  cmake_args+=(-DPKG_CONFIG_EXECUTABLE="$pc" -DCMAKE_PREFIX_PATH="$pfx/usr"
    -DCMAKE_LIBRARY_PATH="$lib;$pfx/lib/$arch"
    -DFT_OPENBLAS_LIB="$lib/openblas-openmp/libopenblas.so"
    -DFT_OPENBLAS_INCLUDE="$pfx/usr/include/$arch/openblas-openmp"
    -DCURSES_INCLUDE_PATH="$pfx/usr/include")
fi
build=build-gpu
if ! cmake -S . -B "$build" "${cmake_args[@]}" >"$out/configure.log" 2>&1 ||
  ! cmake --build "$build" -j"$(nproc)" --target flaretune test_cuda_variants test_cuda_timer \
    >"$out/build.log" 2>&1; then
  tail -n 25 "$out/configure.log" "$out/build.log"
  echo "gpu-check: the build failed (logs in $out)" >&2
  exit 1
fi
ft=$build/flaretune
export FLARETUNE_CACHE_DIR=$PWD/$build/kernel-cache

# ---- the device -------------------------------------------------------------------------------
step "device"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,clocks.max.mem,ecc.mode.current \
  --format=csv 2>&1 | tee "$out/nvidia-smi.csv"
"$ft" list backends 2>&1 | tee "$out/list.txt"
if ! grep -q '^  cuda  *available' "$out/list.txt"; then
  echo "gpu-check: flaretune cannot use the GPU (see above)" >&2
  exit 1
fi

# ---- every CUDA variant against the reference ------------------------------------------------
step "verify every CUDA variant on the GPU"
quick=${QUICK:-0}
if FLARETUNE_TEST_BACKEND=cuda timeout $((quick ? 45 : 240)) "$build/tests/test_cuda_variants" >"$out/verify.log" 2>&1; then
  verified=yes
  tail -3 "$out/verify.log"
else
  verified=NO
  fail=1
  tail -30 "$out/verify.log"
fi
if [ -x "$build/tests/test_cuda_timer" ]; then
  timeout 60 "$build/tests/test_cuda_timer" >"$out/timer.log" 2>&1 || { fail=1; tail -20 "$out/timer.log"; }
  tail -2 "$out/timer.log"
fi

# ---- tune, then bench the winners with both clocks -------------------------------------------
# name | op | preset and sizes | tune time (s) | in QUICK mode
runs=(
  "fusion.dflare fwd bf16|fusion.dflare|--preset qwen3-8b.dflare.train --set N=8192 --attr dtype=bf16|25|q"
  "fusion.dflare fwd+bwd bf16|fusion.dflare|--preset qwen3-8b.dflare.train --set N=8192 --attr dtype=bf16 --attr backward=1|20|q"
  "fusion.dflash fwd bf16|fusion.dflash|--preset qwen3-8b.dflash.train --set N=8192 --attr dtype=bf16|15|q"
  "fusion.dflash fwd+bwd bf16|fusion.dflash|--preset qwen3-8b.dflash.train --set N=8192 --attr dtype=bf16 --attr backward=1|15|"
  "attention.kvproj dflare bf16|attention.kvproj|--preset qwen3-8b.dflare.train --attr dtype=bf16|15|"
  "attention.decode R=16 L=4096 bf16|attention.decode|--preset qwen3-8b.dflare.decode --attr dtype=bf16|20|q"
  "attention.decode R=16 L=32768 bf16|attention.decode|--preset qwen3-8b.dflare.decode --set L=32768 --attr dtype=bf16|15|"
  "attention.decode R=1 L=32768 bf16|attention.decode|--preset qwen3-8b.dflare.decode --set R=1 --set L=32768 --attr dtype=bf16|15|"
  "attention.decode R=1 L=4096 bf16|attention.decode|--preset qwen3-8b.dflare.decode --set R=1 --attr dtype=bf16|10|"
  "attention.train fwd+bwd S=3072 NB=512 bf16|attention.train|--preset qwen3-8b.dflare.train --attr dtype=bf16 --attr backward=1|20|q"
  "loss dpace bf16, 512 blocks|loss|--preset qwen3-8b.dflare.train --set blocks=512 --attr scheme=dpace --attr dtype=bf16|20|q"
  "loss decay bf16, 512 blocks|loss|--preset qwen3-8b.dflare.train --set blocks=512 --attr scheme=decay --attr dtype=bf16|15|"
)
if [ "$quick" = 1 ]; then
  q=()
  for r in "${runs[@]}"; do [ "${r##*|}" = q ] && q+=("$r"); done
  runs=("${q[@]}")
fi
i=0
for r in "${runs[@]}"; do
  IFS='|' read -r name op args secs _ <<<"$r"
  [ "$quick" = 1 ] && secs=6
  step "tune $name"
  # shellcheck disable=SC2086
  timeout $((secs + 90)) "$ft" tune "$op" $args --backend cuda --timer cupti --time "$secs" \
    --max-time 0.5 --profile "$out/profile.json" --log "$out/tune-$i.jsonl" --quiet \
    >"$out/tune-$i.txt" 2>&1 || { fail=1; tail -5 "$out/tune-$i.txt"; }
  tail -4 "$out/tune-$i.txt"
  best=$(python3 - "$out/tune-$i.jsonl" <<'PY'
import json, sys
best = None
for line in open(sys.argv[1]):
    e = json.loads(line)
    if e.get("event") == "run_end" and e.get("winner"):
        best = e["winner"]
if best:
    print(",".join(f"{k}={v}" for k, v in best.items()))
PY
)
  for timer in cupti events; do
    # shellcheck disable=SC2086
    timeout 120 "$ft" bench "$op" $args --backend cuda --timer "$timer" ${best:+--config "$best"} \
      --json --max-time $((quick ? 1 : 2)) >"$out/bench-$i-$timer.json" 2>"$out/bench-$i-$timer.err" ||
      { fail=1; tail -3 "$out/bench-$i-$timer.err"; }
  done
  printf '%s\n%s\n' "$name" "$verified" >"$out/bench-$i.meta"
  i=$((i + 1))
done

# ---- PyTorch on the same shapes (issues' comparisons) -----------------------------------------
if python3 -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
  step "PyTorch on the same shapes"
  tb=(
    "decode --R 16 --L 4096"
    "decode --R 16 --L 32768"
    "decode --R 1 --L 32768"
    "train --S 3072 --NB 512 --backward"
    "loss --M 8192 --scheme dpace"
    "loss --M 8192 --scheme decay"
  )
  [ "$quick" = 1 ] && tb=("${tb[0]}" "${tb[3]}" "${tb[4]}")
  k=0
  for t in "${tb[@]}"; do
    # shellcheck disable=SC2086
    timeout 240 python3 scripts/torch-baseline.py $t --reps $((quick ? 5 : 20)) \
      --json "$out/torch-$k.json" 2>"$out/torch-$k.err" || { tail -3 "$out/torch-$k.err"; }
    k=$((k + 1))
  done
else
  echo "(no PyTorch with CUDA here: the PyTorch comparison is left out)"
fi

# ---- the table --------------------------------------------------------------------------------
step "summary"
python3 - "$out" "$i" <<'PY' | tee "$out/table.md"
import json, os, sys
d, n = sys.argv[1], int(sys.argv[2])
def t(s):
    return f"{s*1e6:.1f} µs" if s < 1e-3 else f"{s*1e3:.3g} ms"
def load(p):
    try:
        return json.load(open(p))
    except Exception:
        return None
c = None
for k in range(n):
    c = c or (load(f"{d}/bench-{k}-cupti.json") or {}).get("ceilings")
if c:
    print(f"ceilings: copy {c['copy_bytes_per_s']/1e12:.2f} TB/s, {c.get('gemm','gemm')} "
          f"{c['sgemm_flops_per_s']/1e12:.0f} TFLOP/s (measured in this run)\n")
print("| op | best config | CUPTI median (IQR, n) | events median | % of ceiling | verified |")
print("|---|---|---|---|---|---|")
for k in range(n):
    name, ver = open(f"{d}/bench-{k}.meta").read().splitlines()
    a, b = load(f"{d}/bench-{k}-cupti.json"), load(f"{d}/bench-{k}-events.json")
    if not a:
        print(f"| {name} | (failed) | | | | {ver} |")
        continue
    cfg = ",".join(f"{x}={y}" for x, y in a["config"].items())
    ev = t(b["median_s"]) if b else "(failed)"
    frac = f'{100*a["roofline_frac"]:.0f}% ({a["bound"]})'
    print(f'| {name} | `{cfg}` | {t(a["median_s"])} ({t(a["iqr_s"])}, {a["samples"]}) | {ev} | {frac} | {ver} |')
tor = [load(os.path.join(d, f)) for f in sorted(os.listdir(d)) if f.startswith("torch-") and f.endswith(".json")]
tor = [x for x in tor if x]
if tor:
    print("\n| PyTorch | shape | variant | median (IQR, n) | peak extra memory |")
    print("|---|---|---|---|---|")
    for x in tor:
        a = x["args"]
        shape = {"decode": f'R={a["R"]} L={a["L"]}', "train": f'S={a["S"]} NB={a["NB"]}' +
                 (" fwd+bwd" if a["backward"] else ""), "loss": f'M={a["M"]} V={a["V"]} {a["scheme"]}'}[x["op"]]
        for r in x["variants"]:
            if "error" in r:
                print(f'| {x["op"]} | {shape} | {r["variant"]} | failed: {r["error"][:60]} | |')
            else:
                pk = f'{r["peak_extra_bytes"]/2**20:.0f} MiB' if "peak_extra_bytes" in r else ""
                print(f'| {x["op"]} | {shape} | {r["variant"]} | {t(r["median_s"])} ({t(r["iqr_s"])}, {r["samples"]}) | {pk} |')
PY
step "done"
echo "results in $out"
exit $fail
