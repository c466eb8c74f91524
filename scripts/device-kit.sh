#!/usr/bin/env bash
# device-kit.sh: everything a GPU run of scripts/gpu-check.sh needs that a GPU machine without
# package access cannot get for itself, built ahead on a machine without a GPU.
#
#   scripts/device-kit.sh [DIR]           (default .device-kit, git-ignored)
#
#   DIR/debs/           the .deb files of the build's Debian dependencies (apt-get download);
#                       gpu-check unpacks them into a private prefix when the machine lacks them
#   DIR/kernel-cache.tar.xz
#                       the NVRTC cache (kernel-cache/, the layout FLARETUNE_CACHE_DIR reads:
#                       CUBINs and their SASS mix) holding every kernel module gpu-check loads:
#                       each config of every run of scripts/gpu-runs.txt at its GPU shapes, and
#                       each config the variant test runs, for sm_90a (H100, H200), and for sm_80
#                       (A100) when the kit stays under its limit; packed with xz (CUBINs shrink
#                       about 12x); gpu-check unpacks it and points FLARETUNE_CACHE_DIR at it
#   DIR/kit.json        what is in it: date, NVRTC version, architectures, packages, sizes
#
# The cache key is the content of the kernel sources and NVRTC's version (docs/cuda.md), so the
# kit serves any checkout of the same sources on a machine with the same NVRTC major.minor; a
# changed kernel is compiled there again. The kit must stay under KIT_LIMIT_MIB (default 40): the
# whole working tree sent to a remote GPU machine is kept under 64 MiB. Needs apt-get (for
# the download), the CUDA toolkit (NVRTC) and a build of flaretune (BUILD, default build; made
# when missing). Running it again keeps what is already there and adds what is missing.
# Compiling every module takes minutes: it says what it is compiling, with the seconds so far,
# as it goes.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/gpu-runs.sh
root=$PWD
kit=${1:-.device-kit}
build=${BUILD:-build}
limit_mib=${KIT_LIMIT_MIB:-40}
jobs=$(nproc 2>/dev/null || echo 2)
die() {
  echo "device-kit: $*" >&2
  exit 1
}
# The build's packages and the libraries they need that a CUDA image does not have (the C
# library, the compiler's runtimes and OpenMP come with the toolkit's compiler and stay the
# machine's own: newer ones must not be shadowed by these).
packages=(libjansson-dev libjansson4 zlib1g-dev libncurses-dev libncurses6 libncursesw6 libtinfo6
  libopenblas-openmp-dev libopenblas0-openmp libgfortran5 libquadmath0 pkgconf pkgconf-bin
  libpkgconf3)

command -v apt-get >/dev/null || die "apt-get is needed to download the packages"
mkdir -p "$kit/debs"
kit=$(cd "$kit" && pwd)
# A kit built before keeps its modules: unpack them to add what is missing.
if [ -f "$kit/kernel-cache.tar.xz" ] && [ ! -d "$kit/kernel-cache" ]; then
  tar -C "$kit" -xJf "$kit/kernel-cache.tar.xz"
fi
mkdir -p "$kit/kernel-cache"

# ---- 1. the packages ----------------------------------------------------------------------
echo "== packages: ${#packages[@]} into $kit/debs"
(
  cd "$kit/debs"
  missing=()
  for p in "${packages[@]}"; do
    ls "${p}"_*.deb >/dev/null 2>&1 || missing+=("$p")
  done
  if [ ${#missing[@]} -gt 0 ]; then
    apt-get download "${missing[@]}" >/dev/null 2>"$kit/apt.log" ||
      { apt-get update -qq >/dev/null 2>&1 || true; apt-get download "${missing[@]}" >/dev/null 2>"$kit/apt.log"; } ||
      die "apt-get download failed: $(tail -n 1 "$kit/apt.log")"
  fi
) || exit 1
rm -f "$kit/apt.log"

# ---- 2. flaretune, with the toolkit -----------------------------------------------------------
if [ ! -x "$build/flaretune" ] || [ ! -x "$build/tests/test_cuda_variants" ]; then
  echo "== building flaretune in $build"
  cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release >/dev/null
  cmake --build "$build" -j"$jobs" --target flaretune test_cuda_variants >/dev/null
fi
case $build in
/*) ft=$build/flaretune ;;
*) ft=$root/$build/flaretune ;;
esac
"$ft" version | grep -q 'cuda  *built' || die "$build/flaretune was built without the CUDA toolkit: NVRTC is needed"

# ---- 3. the kernel modules ------------------------------------------------------------------
# compile_into CACHE ARCH: every module gpu-check loads, for ARCH, into CACHE.
compile_into() {
  local cache=$1 arch=$2 op args n=0 total
  total=$(gpu_runs | wc -l)
  echo "  [$((SECONDS - t0)) s] variants: every configuration the variant test runs, for $arch"
  FLARETUNE_CACHE_DIR=$cache FT_TEST_COMPILE_ARCH=$arch "$build/tests/test_cuda_variants" \
    >"$cache.log" 2>&1 || { tail -n 5 "$cache.log"; die "compiling the variant test's modules for $arch failed"; }
  grep "kernel modules compiled" "$cache.log" | sed 's/^/  variants: /'
  while IFS=$'\t' read -r _ op args _; do
    n=$((n + 1))
    echo "  [$((SECONDS - t0)) s] run $n/$total: compile $op ${args:-(its GPU sizes)} --all-configs for $arch"
    # shellcheck disable=SC2086
    FLARETUNE_CACHE_DIR=$cache "$ft" compile "$op" --arch "$arch" --all-configs $args \
      --jobs "$jobs" >"$cache.log" 2>&1 || { tail -n 3 "$cache.log"; die "compile $op $args for $arch failed"; }
  done < <(gpu_runs)
  echo "  runs: $n of scripts/gpu-runs.txt, every configuration"
  rm -f "$cache.log"
}
mib() { du -sm "$1" | cut -f1; }
# packed_mib DIR: the MiB of DIR as the kit carries it (tar.xz).
packed_mib() { tar -C "$(dirname "$1")" -cJf - "$(basename "$1")" | wc -c | awk '{print int(($1 + 1048575) / 1048576)}'; }

archs=(sm_90a)
t0=$SECONDS
echo "== kernel modules for sm_90a into $kit/kernel-cache (minutes: a line per step)"
compile_into "$kit/kernel-cache" sm_90a
# sm_80 into a staging cache first: kept only if the kit stays under its limit with it.
stage=$(mktemp -d "${TMPDIR:-/tmp}/device-kit.XXXXXX")
trap 'rm -rf "$stage"' EXIT
echo "== kernel modules for sm_80 (kept if the kit stays under $limit_mib MiB)"
cp -r "$kit/kernel-cache/." "$stage/"
compile_into "$stage" sm_80
with=$(($(mib "$kit/debs") + $(packed_mib "$stage")))
if [ "$with" -le "$limit_mib" ]; then
  cp -r "$stage/." "$kit/kernel-cache/"
  archs+=(sm_80)
else
  echo "  sm_80 left out: with it the kit would be $with MiB"
fi

# ---- 4. the check: with the kit's cache, gpu-check's runs compile nothing -----------------------
missing=0
while IFS=$'\t' read -r _ op args _; do
  # shellcheck disable=SC2086
  n=$(FLARETUNE_CACHE_DIR=$kit/kernel-cache "$ft" compile "$op" --arch sm_90a --all-configs $args \
    --json | python3 -c 'import json, sys; print(json.load(sys.stdin)["compiled"])')
  missing=$((missing + n))
done < <(gpu_runs)
echo "== [$((SECONDS - t0)) s] check: every run of gpu-runs.txt with the kit's cache: $missing modules to compile"
[ "$missing" = 0 ] || die "$missing modules of gpu-check's runs are not in the kit"

# ---- 5. what it holds, and its size -----------------------------------------------------------
# The cache travels packed (the next run of this script unpacks it again), so the kit folder is
# what a remote machine is sent.
echo "== [$((SECONDS - t0)) s] packing the kernel cache (xz)"
tar -C "$kit" -cJf "$kit/kernel-cache.tar.xz.tmp" kernel-cache
mv "$kit/kernel-cache.tar.xz.tmp" "$kit/kernel-cache.tar.xz"
unpacked=$(mib "$kit/kernel-cache")
nmods=$(ls "$kit/kernel-cache/nvrtc" | grep -c '\.cubin$')
size=$(($(mib "$kit/debs") + $(mib "$kit/kernel-cache.tar.xz")))
python3 - "$kit" "$size" "${archs[*]}" <<'PY'
import datetime, json, os, subprocess, sys
kit, size, archs = sys.argv[1], int(sys.argv[2]), sys.argv[3].split()
debs = sorted(os.listdir(os.path.join(kit, "debs")))
mods = [n for n in os.listdir(os.path.join(kit, "kernel-cache", "nvrtc")) if n.endswith(".cubin")]
try:
    nvcc = subprocess.run(["nvcc", "--version"], capture_output=True, text=True).stdout.split("release ")[1].split(",")[0]
except Exception:
    nvcc = "unknown"
doc = {"date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
       "cuda": nvcc, "archs": archs, "debs": debs, "kernel_modules": len(mods), "size_mib": size}
tmp = os.path.join(kit, "kit.json.tmp")
with open(tmp, "w") as f:
    json.dump(doc, f, indent=1)
    f.write("\n")
os.replace(tmp, os.path.join(kit, "kit.json"))
PY
rm -rf "$kit/kernel-cache"
echo "== kit: $kit: $(ls "$kit/debs" | wc -l) packages ($(mib "$kit/debs") MiB)," \
  "$nmods kernel modules for ${archs[*]} ($unpacked MiB, $(mib "$kit/kernel-cache.tar.xz") MiB" \
  "packed); $size MiB in all (limit $limit_mib MiB)"
[ "$size" -le "$limit_mib" ] || die "the kit is $size MiB, over its $limit_mib MiB limit"
