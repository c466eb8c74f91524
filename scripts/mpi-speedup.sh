#!/usr/bin/env bash
# mpi-speedup.sh: the speedup of distributed tuning on this machine (docs/distributed.md).
#
#   scripts/mpi-speedup.sh [BUILD] [RANKS...]        (default: build, 1 2 3)
#
# Tunes one op exhaustively on the cpu backend under `mpirun --oversubscribe -np N` for each N
# (the same command, a fresh log each), and prints the wall time, the candidates evaluated per
# rank and the speedup over one rank as a Markdown table. OP, PRESET and MAXTIME (seconds of
# measurement per candidate) may be set in the environment. Needs Open MPI's mpirun.
set -euo pipefail
BUILD=${1:-build}
shift || true
RANKS=("${@:-1 2 3}")
[[ ${#RANKS[@]} -eq 1 ]] && read -r -a RANKS <<< "${RANKS[0]}"
OP=${OP:-fusion.dflare}
PRESET=${PRESET:-tiny.dflare.train}
MAXTIME=${MAXTIME:-0.05}
FT=$(realpath "$BUILD/flaretune")
command -v mpirun >/dev/null || { echo "mpi-speedup: no mpirun (apt-get install openmpi-bin)" >&2; exit 1; }
"$FT" version | grep -q "mpi        built" || { echo "mpi-speedup: $FT was built without MPI" >&2; exit 1; }
root=(); [[ $(id -u) -eq 0 ]] && root=(--allow-run-as-root)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
echo "| ranks | wall time | candidates | per rank (0, 1, ...) | speedup |"
echo "|---|---|---|---|---|"
base=""
for n in "${RANKS[@]}"; do
    t0=$(date +%s.%N)
    OMPI_MCA_btl_vader_single_copy_mechanism=none mpirun "${root[@]}" --oversubscribe -np "$n" \
        "$FT" tune "$OP" --preset "$PRESET" --backend cpu --strategy exhaustive \
        --max-time "$MAXTIME" --confirm 1 --log "$work/$n.jsonl" --quiet >/dev/null 2>&1
    t1=$(date +%s.%N)
    python3 - "$work/$n.jsonl" "$n" "$t0" "$t1" "${base:-0}" <<'PY'
import json, sys
log, n, t0, t1, base = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4]), float(sys.argv[5])
ev = [json.loads(l) for l in open(log) if l.strip()]
done = [e for e in ev if e["event"] in ("measured", "rejected")]
per = [sum(1 for e in done if e.get("rank", 0) == r) for r in range(n)]
wall = t1 - t0
print(f"| {n} | {wall:.1f} s | {len(done)} | {', '.join(map(str, per))} | "
      f"{(base / wall if base else 1.0):.2f}x |")
PY
    [[ -z $base ]] && base=$(python3 -c "print($t1 - $t0)")
done
