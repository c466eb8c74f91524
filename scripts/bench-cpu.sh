#!/usr/bin/env bash
# bench-cpu.sh: the CPU backend's benchmark targets, measured with `flaretune bench` (median,
# IQR, samples, and the fraction of this machine's cache-aware roofline: the bandwidth of the
# level the working set fits in, or the compute peak, docs/measurement.md), printed as the
# Markdown table README.md shows, each fraction in bold where it meets its target.
#
#   scripts/bench-cpu.sh [BUILD_DIR] [--config-from PROFILE]
#
# Each row is one `flaretune bench ... --json` command, printed above the table so any row can
# be reproduced alone. Run it on a quiet machine: other processes share the cores being timed.
set -euo pipefail
build=${1:-build}
ft="$build/flaretune"
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

# name | target | bench arguments
rows=(
  "fusion.dflare fwd, qwen3-4b dflare, N=2048|70%|fusion.dflare --preset qwen3-4b.dflare.train --set N=2048"
  "fusion.dflash fwd, qwen3-4b, N=2048|60%|fusion.dflash --preset qwen3-4b.dflash.train --set N=2048"
  "attention.kvproj, qwen3-4b dflare, N=2048|60%|attention.kvproj --preset qwen3-4b.dflare.train --set N=2048"
  "attention.kvproj, qwen3-4b dflash, N=2048|60%|attention.kvproj --preset qwen3-4b.dflash.train --set N=2048"
  "attention.decode, qwen3-8b, R=1, L=4096, B=16|40%|attention.decode --preset qwen3-8b.dflare.decode --set R=1"
  "attention.train fwd, qwen3-4b heads, S=1024, NB=64|30%|attention.train --preset qwen3-4b.dflare.train --set S=1024 --set NB=64"
  "loss fwd+bwd dpace, H=2560, V=32768, 32 blocks|50%|loss --preset qwen3-4b.dflare.train --set V=32768 --set blocks=32 --attr scheme=dpace"
  "attention.kvproj fwd+bwd, qwen3-4b dflare, N=2048|the forward's|attention.kvproj --preset qwen3-4b.dflare.train --set N=2048 --attr backward=1"
  "attention.kvproj fwd+bwd, qwen3-4b dflash, N=2048|the forward's|attention.kvproj --preset qwen3-4b.dflash.train --set N=2048 --attr backward=1"
  "attention.train fwd+bwd, qwen3-4b heads, S=1024, NB=64|the forward's|attention.train --preset qwen3-4b.dflare.train --set S=1024 --set NB=64 --attr backward=1"
  "attention.train fwd, window 256, causal block, same|30%|attention.train --preset qwen3-4b.dflare.train --set S=1024 --set NB=64 --attr window=256 --attr causal=1"
  "attention.train fwd+bwd, window 256, causal block, same|the windowed forward's|attention.train --preset qwen3-4b.dflare.train --set S=1024 --set NB=64 --attr backward=1 --attr window=256 --attr causal=1"
  "loss fwd+bwd dpace with the final norm, same|the loss's|loss --preset qwen3-4b.dflare.train --set V=32768 --set blocks=32 --attr scheme=dpace --attr final_norm=1"
)
i=0
for r in "${rows[@]}"; do
  IFS='|' read -r name target args <<<"$r"
  echo "$ft bench $args --backend cpu --json" >&2
  # shellcheck disable=SC2086
  "$ft" bench $args --backend cpu --json --max-time 5 >"$out/$i.json"
  printf '%s\n%s\n' "$name" "$target" >"$out/$i.meta"
  i=$((i + 1))
done
python3 - "$out" "$i" <<'PY'
import json, sys
d, n = sys.argv[1], int(sys.argv[2])
print("| benchmark | config | median (IQR, n) | moved / work | rate | roofline floor | fraction | target | scratch |")
print("|---|---|---|---|---|---|---|---|---|")
def t(s):
    return f"{s*1e3:.3g} ms" if s < 1 else f"{s:.3g} s"
for k in range(n):
    b = json.load(open(f"{d}/{k}.json"))
    name, target = open(f"{d}/{k}.meta").read().splitlines()
    cfg = ",".join(f"{a}={v}" for a, v in b["config"].items())
    bound = b["bound"]
    rate = f'{b["gbps"]:.1f} GB/s' if bound == "memory" else f'{b["gflops"]:.0f} GFLOP/s'
    c, r = b["ceilings"], b["roofline"]
    if bound == "memory":
        ceil = f'{r["level"]} {r["bytes_per_s"]/1e9:.1f} GB/s'
    else:
        ceil = f'peak {c["flops_per_s"]/1e9:.0f} GFLOP/s, sgemm {c["gemm_flops_per_s"]/1e9:.0f}'
    if r["suspect"]:
        ceil += ", SUSPECT"
    frac = f'{100*b["roofline_frac"]:.0f}%'
    met = target.endswith("%") and round(100 * b["roofline_frac"]) >= float(target[:-1])
    print(f'| {name} | `{cfg}` | {t(b["median_s"])} ({t(b["iqr_s"])}, {b["samples"]}) | '
          f'{b["bytes"]/1e6:.0f} MB / {b["flops"]/1e9:.2f} GFLOP | {rate} | {t(b["roofline_s"])} ({bound}, {ceil}) | '
          f'{"**" + frac + "**" if met else frac} | {target} | {b["peak_extra_bytes"]/2**20:.1f} MiB |')
PY
