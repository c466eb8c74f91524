#!/bin/sh
# tui-overhead.sh: what the dashboard costs the tuner.
#
# Runs the same tuning job (one op, one preset, exhaustive search over a fixed number of
# candidates) REPS times with --quiet and REPS times with --tui, alternating, each in an 80x24
# tmux pane on a private socket, and reports two things:
#
# 1. Accounting (the check). Between run_start and run_end of every --tui run: the CPU time of
#    the dashboard's thread (the process's main thread, from schedstat, in ns), the CPU time of
#    the terminal (the tmux server that parses what the dashboard draws), and the CPU time of the
#    tuner (the rest of the process). The dashboard can take from the tuner at most what it and
#    its terminal use: their sum over the tuner's is the bound on the slowdown, and the check
#    passes when it is under LIMIT (2%). Also the dashboard thread's wake-ups per second
#    (voluntary context switches): the loop waits in getch() (100 ms) and draws at most ten
#    frames a second, so it never busy-waits.
#
# 2. Throughput, A/B. Per candidate, the medians over the repetitions of its median latency and
#    of the kernel calls its measurement completed per second, with and without the dashboard;
#    the wall time of the budget; and the spread of the --quiet runs among themselves. On a small
#    machine shared with other work that spread is far above 2%, so this part informs and the
#    accounting decides.
#
# usage: scripts/tui-overhead.sh [FLARETUNE]   (default build/flaretune)
#   REPS=8 OP=fusion.dflash PRESET=tiny.dflare.train BUDGET=6 LIMIT=0.02 scripts/tui-overhead.sh
# Each run holds /tmp/ft-bench.lock (flock) so other benchmarks on the machine do not overlap.
set -eu

FT=$(realpath "${1:-build/flaretune}")
REPS=${REPS:-8}
OP=${OP:-fusion.dflash}
PRESET=${PRESET:-tiny.dflare.train}
BUDGET=${BUDGET:-6}
LIMIT=${LIMIT:-0.02}
ARGS=${ARGS:---max-time 0.5 --noise 0.01 --confirm 2 --no-screen}
LOCK=/tmp/ft-bench.lock

command -v tmux >/dev/null || { echo "tui-overhead: tmux is not installed" >&2; exit 77; }
[ -x "$FT" ] || { echo "tui-overhead: no flaretune at $FT" >&2; exit 2; }
[ -r /proc/self/schedstat ] || { echo "tui-overhead: needs /proc/PID/schedstat" >&2; exit 77; }

TMP=$(mktemp -d /tmp/ft-tui-overhead.XXXXXX)
SOCK=ft-tui-overhead-$$
cleanup() {
    tmux -L "$SOCK" kill-server 2>/dev/null || true
    rm -f "${TMUX_TMPDIR:-/tmp}/tmux-$(id -u)/$SOCK" # tmux leaves its socket behind
    rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
HZ=$(getconf CLK_TCK)

has() { [ -f "$1" ] && grep -q "\"event\":\"$2\"" "$1"; }

# sample PID TMUXPID: "process-CPU-s main-thread-CPU-s main-thread-wakeups tmux-CPU-s wall-s"
sample() {
    p=$(awk -v hz="$HZ" '{ sub(/^.*\) /, ""); printf "%.3f", ($12 + $13) / hz }' "/proc/$1/stat")
    m=$(awk '{ printf "%.6f", $1 / 1e9 }' "/proc/$1/task/$1/schedstat")
    v=$(awk '/^voluntary_ctxt_switches/ { print $2 }' "/proc/$1/task/$1/status")
    t=$(awk '{ printf "%.6f", $1 / 1e9 }' "/proc/$2/schedstat") # tmux has one thread
    w=$(awk '{ print $1 }' /proc/uptime)
    echo "$p $m $v $t $w"
}

# one MODE REP: a run in a fresh 80x24 pane; MODE is plain (--quiet) or tui (--tui).
one() {
    mode=$1
    rep=$2
    log=$TMP/$mode.$rep.jsonl
    extra=--quiet
    [ "$mode" = tui ] && extra=--tui
    exec 9>"$LOCK"
    flock 9
    tmux -L "$SOCK" -f /dev/null new-session -d -s "r$mode$rep" -x 80 -y 24 \
        "echo \$\$ > $TMP/pid.$mode.$rep; exec env TERM=xterm-256color $FT tune $OP --preset \
         $PRESET --backend cpu --strategy exhaustive --budget $BUDGET $ARGS --log $log $extra"
    server=$(tmux -L "$SOCK" display -p '#{pid}')
    i=0
    while ! has "$log" run_start; do
        sleep 0.05
        i=$((i + 1))
        [ $i -lt 6000 ] || { echo "tui-overhead: the $mode run $rep did not start" >&2; exit 1; }
    done
    pid=$(cat "$TMP/pid.$mode.$rep")
    s0=$(sample "$pid" "$server")
    while ! has "$log" run_end; do
        sleep 0.05
        i=$((i + 1))
        [ $i -lt 12000 ] || { echo "tui-overhead: the $mode run $rep did not end" >&2; exit 1; }
    done
    s1=$(sample "$pid" "$server")
    echo "$s0 $s1" > "$TMP/acct.$mode.$rep"
    [ "$mode" = tui ] && tmux -L "$SOCK" send-keys -t "r$mode$rep" q
    while tmux -L "$SOCK" has-session -t "r$mode$rep" 2>/dev/null; do sleep 0.05; done
    tmux -L "$SOCK" kill-server 2>/dev/null || true
    flock -u 9
    exec 9>&-
}

echo "tui-overhead: $OP at $PRESET, budget $BUDGET, $REPS repetitions each ($ARGS)"
r=1
while [ $r -le "$REPS" ]; do
    if [ $((r % 2)) -eq 1 ]; then
        one plain $r
        one tui $r
    else
        one tui $r
        one plain $r
    fi
    r=$((r + 1))
done

python3 - "$TMP" "$REPS" "$LIMIT" <<'PY'
import json, math, os, statistics, sys

tmp, reps, limit = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])


def run_figures(path):
    ev = [json.loads(l) for l in open(path) if l.endswith("\n")]
    start = next(e for e in ev if e["event"] == "run_start")
    end = next(e for e in ev if e["event"] == "run_end")
    meas = [e for e in ev if e["event"] == "measured"]
    calls = sum(e["stats"]["samples"] * e["stats"]["batch"] for e in meas)
    busy = sum(e["stats"]["total_s"] for e in meas)
    per = {}
    for e in meas:
        st = e["stats"]
        per[json.dumps(e["config"], sort_keys=True)] = (
            st["median_s"], st["samples"] * st["batch"] / st["total_s"])
    return {"calls/s": calls / busy, "wall": end["t"] - start["t"], "per": per}


def acct(mode, r):
    v = [float(x) for x in open(os.path.join(tmp, "acct.%s.%d" % (mode, r))).read().split()]
    a, b = v[:5], v[5:]
    proc, main, wake, term, wall = (b[i] - a[i] for i in range(5))
    return {"proc": proc, "main": main, "wake": wake, "term": term, "wall": wall}


def spread(xs):
    q = statistics.quantiles(xs, n=4) if len(xs) >= 2 else [xs[0]] * 3
    return (q[2] - q[0]) / statistics.median(xs)


runs = {m: [run_figures(os.path.join(tmp, "%s.%d.jsonl" % (m, r))) for r in range(1, reps + 1)]
        for m in ("plain", "tui")}
accts = {m: [acct(m, r) for r in range(1, reps + 1)] for m in ("plain", "tui")}

print("1. accounting, run_start to run_end (CPU seconds)\n")
print("%-6s %4s %8s %10s %10s %10s %9s" % ("mode", "rep", "wall", "tuner", "dashboard", "terminal",
                                          "wakeups/s"))
for m in ("plain", "tui"):
    for i, a in enumerate(accts[m]):
        tuner = a["proc"] - a["main"] if m == "tui" else a["proc"]
        dash = a["main"] if m == "tui" else 0.0
        print("%-6s %4d %8.3f %10.3f %10.4f %10.4f %9s" % (
            m, i + 1, a["wall"], tuner, dash, a["term"],
            "%.1f" % (a["wake"] / a["wall"]) if m == "tui" else "-"))
t = accts["tui"]
tuner = sum(a["proc"] - a["main"] for a in t)
dash = sum(a["main"] for a in t)
term = sum(a["term"] for a in t)
term_plain = sum(a["term"] for a in accts["plain"])
wall = sum(a["wall"] for a in t)
bound = (dash + term) / tuner
print("\ndashboard thread: %.4f s CPU in %.1f s of tuning (%.3f%% of one core), %.1f wake-ups/s"
      % (dash, wall, 100 * dash / wall, sum(a["wake"] for a in t) / wall))
print("terminal (tmux):  %.4f s CPU with the dashboard, %.4f s without" % (term, term_plain))
print("tuner:            %.3f s CPU" % tuner)
ok = bound < limit
print("bound on the slowdown: (dashboard + terminal) / tuner = %.3f%%  %s" % (
    100 * bound, "< %.0f%%" % (100 * limit) if ok else ">= %.0f%%" % (100 * limit)))

print("\n2. throughput, A/B (medians over the repetitions)\n")
print("%-6s %4s %12s %9s" % ("mode", "rep", "calls/s", "wall s"))
for m in ("plain", "tui"):
    for i, f in enumerate(runs[m]):
        print("%-6s %4d %12.0f %9.3f" % (m, i + 1, f["calls/s"], f["wall"]))
configs = sorted(set.intersection(*(set(f["per"]) for m in runs for f in runs[m])))
print("\n%-46s %11s %11s %7s %9s %9s %7s" % ("config", "median", "(tui)", "ratio", "calls/s",
                                             "(tui)", "ratio"))
lat, thr = [], []
for c in configs:
    med = {m: statistics.median(f["per"][c][0] for f in runs[m]) for m in runs}
    cps = {m: statistics.median(f["per"][c][1] for f in runs[m]) for m in runs}
    lat.append(med["tui"] / med["plain"])
    thr.append(cps["tui"] / cps["plain"])
    print("%-46.46s %9.2fus %9.2fus %7.3f %9.0f %9.0f %7.3f" % (
        c, med["plain"] * 1e6, med["tui"] * 1e6, lat[-1], cps["plain"], cps["tui"], thr[-1]))


def geo(v):
    return math.exp(sum(math.log(x) for x in v) / len(v))


wp = statistics.median(f["wall"] for f in runs["plain"])
wt = statistics.median(f["wall"] for f in runs["tui"])
print()
print("%-44s %+7.2f%%" % ("kernel medians, tui vs plain (geomean)", 100 * (geo(lat) - 1)))
print("%-44s %+7.2f%%" % ("calls per second, tui vs plain (geomean)", 100 * (geo(thr) - 1)))
print("%-44s %+7.2f%%" % ("wall time of the budget, tui vs plain", 100 * (wt / wp - 1)))
print("%-44s %7.1f%% (calls/s), %.1f%% (wall)" % (
    "spread of the plain runs (IQR / median)", 100 * spread([f["calls/s"] for f in runs["plain"]]),
    100 * spread([f["wall"] for f in runs["plain"]])))
if ok:
    print("\nPASS: the dashboard can slow the tuner by at most %.3f%% (< %.0f%%)" % (
        100 * bound, 100 * limit))
else:
    print("\nFAIL: the dashboard and its terminal use %.2f%% of the tuner's CPU (>= %.0f%%)" % (
        100 * bound, 100 * limit))
sys.exit(0 if ok else 1)
PY
