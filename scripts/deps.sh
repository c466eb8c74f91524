#!/usr/bin/env bash
# deps.sh: make sure the Debian packages flaretune needs are installed.
#
#   scripts/deps.sh [build|test|fuzz]
#
# As root it installs what is missing with apt-get; otherwise it prints the one apt-get line to
# run and fails. The CUDA toolkit is optional and never installed here: when CMake finds it
# (nvcc on PATH or in /usr/local/cuda), the CUDA backend is built too. g++ compiles the CUDA
# kernels for the SIMT emulator (the cuda-emu backend), which needs no toolkit. `fuzz` adds what
# scripts/fuzz.sh builds with: clang, its sanitizer and libFuzzer runtimes (libclang-rt-dev:
# libclang-rt-14-dev on Debian 12, which holds libclang_rt.fuzzer-x86_64.a) and clang's OpenMP
# (libomp-dev).
set -euo pipefail

want=(cmake make gcc g++ pkg-config libjansson-dev libncurses-dev libopenblas-openmp-dev)
if [[ "${1:-build}" == test ]]; then
    want+=(python3 python3-numpy tmux)
fi
if [[ "${1:-build}" == fuzz ]]; then
    want+=(clang libclang-rt-dev libomp-dev)
fi

missing=()
for p in "${want[@]}"; do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
        missing+=("$p")
    fi
done
[[ ${#missing[@]} -eq 0 ]] && exit 0

if [[ $(id -u) -eq 0 ]]; then
    echo "deps: installing ${missing[*]}" >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
else
    echo "deps: missing Debian packages; run:" >&2
    echo "  sudo apt-get install -y ${missing[*]}" >&2
    exit 1
fi
