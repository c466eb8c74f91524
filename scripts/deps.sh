#!/usr/bin/env bash
# deps.sh: make sure the Debian packages flaretune needs are installed.
#
#   scripts/deps.sh [build|test|fuzz]
#
# As root it installs what is missing with apt-get; otherwise it prints the one apt-get line to
# run and fails. The CUDA toolkit is optional and never installed here: when CMake finds it
# (nvcc on PATH or in /usr/local/cuda), the CUDA backend is built too. g++ compiles the CUDA
# kernels for the SIMT emulator (the cuda-emu backend), which needs no toolkit; help2man writes
# the manual page `cmake --install` installs (docs/api.md); Open MPI is what `mpirun flaretune
# tune` distributes over (docs/distributed.md). `test` adds Python with NumPy, venv
# (scripts/search-quality.sh installs Kernel Tuner into one) and jsonschema
# (test_export_formats validates a T4 file), tmux (the dashboard's tests) and Chromium
# (test_report_render draws the report page headless and checks the picture). `fuzz` adds what
# scripts/fuzz.sh builds with: clang, its sanitizer and libFuzzer runtimes (libclang-rt-dev:
# libclang-rt-14-dev on Debian 12, which holds libclang_rt.fuzzer-x86_64.a) and clang's OpenMP
# (libomp-dev).
#
# `build` and `test` also fetch the disassembler of `flaretune compile`'s instruction mix
# (docs/cuda.md, kernels/cuda/analysis/sass.c) when the CUDA toolkit is here without one: NVIDIA's
# nvdisasm wheel from PyPI, installed with pip into ${XDG_DATA_HOME:-~/.local/share}/flaretune/
# tools (pip's --target: no Python environment is changed). Without pip or a network it says so
# in one line and goes on; the mix is then reported as unavailable.
set -euo pipefail

want=(cmake make gcc g++ pkg-config libjansson-dev zlib1g-dev libncurses-dev libopenblas-openmp-dev
      help2man libopenmpi-dev openmpi-bin)
if [[ "${1:-build}" == test ]]; then
    want+=(python3 python3-numpy python3-venv python3-jsonschema tmux chromium)
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

if [[ ${#missing[@]} -gt 0 && $(id -u) -eq 0 ]]; then
    echo "deps: installing ${missing[*]}" >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
elif [[ ${#missing[@]} -gt 0 ]]; then
    echo "deps: missing Debian packages; run:" >&2
    echo "  sudo apt-get install -y ${missing[*]}" >&2
    exit 1
fi

# The disassembler, where the toolkit has none. The places looked in are those of
# ft_sass_tool (kernels/cuda/analysis/sass.c): FLARETUNE_NVDISASM, PATH, the toolkit's bin/, the tools
# folder and the Python site folders holding NVIDIA's wheels. Never fails the script.
nvdisasm_wheel() {
    local nvcc tools major found
    nvcc=$(command -v nvcc || true)
    [[ -z $nvcc && -x /usr/local/cuda/bin/nvcc ]] && nvcc=/usr/local/cuda/bin/nvcc
    [[ -z $nvcc ]] && return 0 # no toolkit: no CUBINs to disassemble
    tools=${XDG_DATA_HOME:-${HOME:-}/.local/share}/flaretune/tools
    for found in "${FLARETUNE_NVDISASM:-}" "$(command -v nvdisasm || true)" \
        "${CUDA_HOME:+$CUDA_HOME/bin/nvdisasm}" "$(dirname "$nvcc")/nvdisasm" \
        /usr/local/cuda/bin/nvdisasm "$tools"/nvidia/*/bin/nvdisasm \
        "${HOME:-}"/.local/lib/python3*/site-packages/nvidia/*/bin/nvdisasm \
        /usr/local/lib/python3*/dist-packages/nvidia/*/bin/nvdisasm \
        /usr/lib/python3/dist-packages/nvidia/*/bin/nvdisasm; do
        [[ -n $found && -x $found ]] && return 0
    done
    major=$("$nvcc" --version 2>/dev/null | sed -n 's/.*release \([0-9][0-9]*\)\..*/\1/p' | head -n 1)
    if [[ -z $major ]] || ! python3 -m pip --version >/dev/null 2>&1; then
        echo "deps: no nvdisasm and no pip to fetch it (pip install nvidia-cuda-nvdisasm): the" \
            "SASS instruction mix will be unavailable" >&2
        return 0
    fi
    echo "deps: fetching nvdisasm (nvidia-cuda-nvdisasm ${major}.x) into $tools" >&2
    if ! python3 -m pip install --quiet --disable-pip-version-check --no-deps --retries 1 \
        --timeout 20 --target "$tools" "nvidia-cuda-nvdisasm>=${major},<$((major + 1))" \
        >/dev/null 2>&1; then
        echo "deps: pip could not install nvidia-cuda-nvdisasm (offline?): the SASS" \
            "instruction mix will be unavailable" >&2
    fi
    return 0
}
[[ "${1:-build}" == fuzz ]] || nvdisasm_wheel
