#!/usr/bin/env python3
"""test_mpi: distributed tuning under `mpirun --oversubscribe -np 3` (docs/distributed.md).

- On the cpu backend at a tiny preset, exhaustively: every valid config is measured (or
  rejected) exactly once across the ranks, every rank measured some, every candidate event says
  its rank, host and device, and the profile is valid.
- With the replay backend (a recorded landscape): the distributed run evaluates the same
  candidates in the same order and picks the same winner as one process with the same seed and
  batch size.
- A rank killed with SIGKILL ends the job; the same command again resumes from rank 0's log
  without measuring any config twice.
- Ranks on two kinds of device tune one run per kind: a log each, a profile entry each.
- SIGINT to rank 0 stops the run as Ctrl-C does alone: the summary, the profile and the log
  written, every rank ended, exit 130.
- A candidate past --candidate-timeout ends the job with one line.
- Ranks started with another command line (other sizes, another op) are refused before any
  work, in one line naming the first difference.
- A stopped rank (SIGSTOP) ends the job with one line once rank 0 has waited 2 x
  --candidate-timeout + 5 s for its result.
- A kernel of a T1 file (`tune --t1`, on the emulator), exhaustively: every allowed
  configuration evaluated exactly once across the ranks, every rank measured some, the six
  wrong ones rejected and no other (each rank checks against its own run of the reference),
  every event says its rank, host and device, the Kernel Tuner cache and the profile written by
  rank 0 alone; ranks started with another seed or sample of blocks are refused in one line
  before any work, and --tui (no rank has a terminal) in one line.

    test_mpi.py FLARETUNE
Exits 77 when flaretune was built without MPI or mpirun is missing.
"""
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

import checks
from checks import check

FT = sys.argv[1]
checks.NAME = "test_mpi"


def mpirun(n, *args, **kw):
    root = ["--allow-run-as-root"] if os.getuid() == 0 else []
    return ["mpirun", *root, "--oversubscribe", "-np", str(n), FT, *args]


TUNE = ["tune", "fusion.dflare", "--preset", "tiny.dflare.train", "--confirm", "1", "--quiet"]


def events(path):
    with open(path) as f:
        return [json.loads(l) for l in f if l.strip()]


def evaluated(evs):
    return [json.dumps(e["config"], sort_keys=True) for e in evs
            if e["event"] in ("measured", "rejected")]


def run(cmd, timeout=240):
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)


def test_exhaustive(work):
    log, prof = os.path.join(work, "cpu.jsonl"), os.path.join(work, "cpu.json")
    r = run(mpirun(3, *TUNE, "--backend", "cpu", "--strategy", "exhaustive", "--max-time",
                   "0.003", "--log", log, "--profile", prof))
    check(r.returncode == 0, f"mpirun -np 3 tune (exhaustive, cpu) exits 0 ({r.stderr[-400:]})")
    if r.returncode:
        return log
    evs = events(log)
    start = next(e for e in evs if e["event"] == "run_start")
    ev = evaluated(evs)
    check(len(ev) == len(set(ev)), f"no config evaluated twice ({len(ev)} events)")
    valid = start.get("valid", start.get("space_valid"))
    if isinstance(valid, int):
        check(len(set(ev)) == valid, f"every valid config evaluated ({len(set(ev))} of {valid})")
    ranks = {e.get("rank") for e in evs if e["event"] == "measured"}
    check(ranks == {0, 1, 2}, f"every rank measured some ({sorted(map(str, ranks))})")
    cand = [e for e in evs if "candidate" in e and e["event"] != "confirm"]
    check(all("rank" in e and "host" in e and "device" in e for e in cand),
          "every candidate event says rank, host and device")
    r = run([FT, "show", prof])
    check(r.returncode == 0 and "fusion.dflare" in r.stdout, "the profile is valid (show)")
    return log


def test_rank_cpus(work):
    """Ranks that split a node's CPUs tune the thread counts their slice can run: more threads
    than CPUs only take turns (and were all thrown out as unclean, the winner blamed on a busy
    machine)."""
    n = len(os.sched_getaffinity(0))
    if n < 2:
        return
    log = os.path.join(work, "slice.jsonl")
    r = run(mpirun(2, *TUNE, "--backend", "cpu", "--strategy", "exhaustive", "--max-time",
                   "0.003", "--log", log))
    check(r.returncode == 0, f"mpirun -np 2 tune on {n} CPUs exits 0 ({r.stderr[-400:]})")
    if r.returncode:
        return
    each = n // 2  # slices of one size (an odd CPU left idle): one kind of device
    evs = [e for e in events(log) if e["event"] in ("measured", "rejected")]
    threads = {e["config"]["threads"] for e in evs}
    check(threads and max(threads) <= each,
          f"two ranks on {n} CPUs tuned threads {sorted(threads)} (at most {each})")
    # and say so in their device: results measured on a slice are keyed as the slice's
    devices = {e.get("device", "") for e in evs}
    check(len(devices) == 1 and f" x {each} (" in next(iter(devices)),
          f"two ranks on {n} CPUs measured on {sorted(devices)} (x {each})")


def test_replay(work, landscape):
    common = [*TUNE, "--backend", f"replay:{landscape}", "--seed", "5"]
    one, dist = os.path.join(work, "one.jsonl"), os.path.join(work, "dist.jsonl")
    p1, p3 = os.path.join(work, "one.json"), os.path.join(work, "dist.json")
    r1 = run([FT, *common, "--batch", "3", "--log", one, "--profile", p1])
    r3 = run(mpirun(3, *common, "--log", dist, "--profile", p3))
    check(r1.returncode == 0 and r3.returncode == 0,
          f"replay runs exit 0 ({r1.stderr[-200:]} {r3.stderr[-200:]})")
    if r1.returncode or r3.returncode:
        return
    a, b = evaluated(events(one)), evaluated(events(dist))
    check(a == b, f"the same candidates in the same order ({len(a)} and {len(b)})")
    with open(p1) as f1, open(p3) as f3:
        w1, w3 = json.load(f1)["entries"][0]["config"], json.load(f3)["entries"][0]["config"]
    check(w1 == w3, f"the same winner ({w1} / {w3})")
    # FLARETUNE_MAX_LOST judges host-clock samples only: ranks whose environments differ in it
    # measure a replay (or a GPU) alike, and the run goes on (test_other_command_line: with the
    # host's clock it ends the job).
    root = ["--allow-run-as-root"] if os.getuid() == 0 else []
    env_log = os.path.join(work, "env.jsonl")
    r = run(["mpirun", *root, "--oversubscribe", "-np", "1", FT, *common, "--log", env_log, ":",
             "-np", "1", "env", "FLARETUNE_MAX_LOST=0.5", FT, *common, "--log", env_log])
    check(r.returncode == 0 and "another run" not in r.stderr and
          len(evaluated(events(env_log))) > 0,
          f"replay with another FLARETUNE_MAX_LOST on rank 1: exit {r.returncode} "
          f"({r.stderr[-300:]})")


def our_processes():
    """(pid, argv, environment) of each process whose command line names this test's
    flaretune: its ranks, and the mpirun that started them."""
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmd = f.read().split(b"\0")
            if FT.encode() not in cmd:
                continue
            with open(f"/proc/{pid}/environ", "rb") as f:
                env = f.read().split(b"\0")
        except OSError:
            continue
        yield int(pid), cmd, env


def processes():
    """This test's flaretune and mpirun processes: pid, state (T: stopped), rank and what each
    waits in, for a failure's message."""
    out = []
    for pid, cmd, env in our_processes():
        try:
            with open(f"/proc/{pid}/stat") as f:
                state = f.read().rsplit(")", 1)[1].split()[0]
            with open(f"/proc/{pid}/wchan") as f:
                wchan = f.read()
        except OSError:
            continue
        ranks = [v.split(b"=")[1].decode() for v in env if v.startswith(b"OMPI_COMM_WORLD_RANK=")]
        out.append(f"{pid} {os.path.basename(cmd[0]).decode()} rank {ranks[0] if ranks else '-'} "
                   f"{state} {wchan}")
    return out


def rank_pids(rank):
    """Processes of this test's flaretune with OMPI_COMM_WORLD_RANK=rank."""
    return [pid for pid, _, env in our_processes()
            if f"OMPI_COMM_WORLD_RANK={rank}".encode() in env]


def start_until_measured(cmd, log, n):
    """The job cmd started, once its log holds n measured candidates (or it ended, or 120 s)."""
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 120
    while time.time() < deadline and p.poll() is None:
        if os.path.exists(log) and sum(1 for e in events(log) if e["event"] == "measured") >= n:
            break
        time.sleep(0.2)
    return p


def test_kill(work):
    log = os.path.join(work, "kill.jsonl")
    cmd = mpirun(3, *TUNE, "--backend", "cpu", "--strategy", "random", "--budget", "40",
                 "--max-time", "0.01", "--log", log)
    p = start_until_measured(cmd, log, 12)
    victims = rank_pids(2)
    for pid in victims:
        os.kill(pid, signal.SIGKILL)
    try:
        p.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        p.kill()
        p.communicate()
    check(victims and p.returncode != 0, f"killing rank 2 ends the job (rc {p.returncode})")
    before = evaluated(events(log))
    r = run(cmd)
    check(r.returncode == 0, f"the same command again finishes ({r.stderr[-300:]})")
    after = evaluated(events(log))
    check(len(after) == len(set(after)),
          f"nothing measured twice across the kill ({len(before)} before, {len(after)} in all)")
    check(any(e["event"] == "run_end" for e in events(log)), "the resumed run ends")


def test_interrupt(work):
    """SIGINT to rank 0 stops the run as Ctrl-C does alone: the summary, the profile saved, the
    log's run ended as interrupted, the workers told to stop, and the job's exit 130 (not
    MPI_Abort's 1)."""
    log, prof = os.path.join(work, "int.jsonl"), os.path.join(work, "int.json")
    # Every candidate takes its whole --max-time: the 96 of the preset outlast the wait below.
    cmd = mpirun(2, *TUNE, "--backend", "cpu", "--strategy", "exhaustive", "--max-time", "0.1",
                 "--noise", "0.000001", "--log", log, "--profile", prof)
    p = start_until_measured(cmd, log, 4)
    ranks0 = rank_pids(0)
    for pid in ranks0:
        os.kill(pid, signal.SIGINT)
    try:
        out, err = p.communicate(timeout=120)
    except subprocess.TimeoutExpired:
        left = processes()
        p.kill()
        out, err = p.communicate()
        err += f"\nflaretune-test: hung, killed after 120 s; still running: {left}"
    # (a busy machine adds its warnings: only the line of the interruption is counted)
    said = [l for l in err.splitlines() if l.startswith(("flaretune:", "flaretune-test:")) and
            "busy" not in l and "scheduler" not in l]
    check(ranks0 and p.returncode == 130 and "MPI_ABORT" not in out + err,
          f"SIGINT to rank 0: the job exits 130, no MPI_Abort (rc {p.returncode}, {said})")
    check("fusion.dflare" in out and len(said) == 1 and "interrupted" in said[0],
          f"the summary, and one line saying it was interrupted ({said})")
    evs = events(log)
    check(evs and evs[-1]["event"] == "run_end" and evs[-1].get("interrupted") is True,
          "the log's run ends as interrupted")
    with open(prof) as f:
        entries = json.load(f)["entries"]
    check(len(entries) == 1 and entries[0]["op"] == "fusion.dflare",
          f"the profile holds the best so far ({len(entries)} entries)")


def test_timeout(work):
    """--candidate-timeout: a candidate that takes longer ends the job in one line; the log
    keeps what was measured before it."""
    log = os.path.join(work, "timeout.jsonl")
    r = run(mpirun(2, "tune", "fusion.dflare", "--preset", "small.dflare.train", "--backend",
                   "cpu", "--max-time", "4", "--noise", "0.000001", "--candidate-timeout", "1",
                   "--log", log, "--quiet"), timeout=120)
    check(r.returncode != 0 and "longer than --candidate-timeout" in r.stderr,
          f"a candidate past --candidate-timeout ends the job (rc {r.returncode})")
    check(os.path.exists(log) and any(e["event"] == "run_start" for e in events(log)),
          "the log keeps the run")


def test_other_command_line(work):
    """Ranks started with other command lines (mpirun's MPMD form: A : B) would measure another
    problem under rank 0's key: every rank's run key (ops, sizes, attributes, kernel sources,
    what a measurement is, FLARETUNE_MAX_LOST included) is compared with rank 0's before any
    work, and the job ends with one line naming the first difference, nothing run or written."""
    root = ["--allow-run-as-root"] if os.getuid() == 0 else []
    common = ["--preset", "tiny.dflare.train", "--confirm", "1", "--quiet", "--backend", "cpu",
              "--budget", "4", "--max-time", "0.003"]
    for name, other, words in (
            ("sizes", ["tune", "fusion.dflare", *common, "--set", "N=4800"],
             ["rank 1 was started with another run than rank 0", "sizes: N=4800",
              "rank 0 has N=48 "]),
            ("op", ["tune", "loss", *common], ["rank 1 was started with another run",
                                              "op: loss", "rank 0 has fusion.dflare"]),
            ("noise", ["tune", "fusion.dflare", *common, "--noise", "0.5"],
             ["rank 1 was started with another run", "measurement: ", "noise 0.5,",
              "noise 0.02,"]),
            ("max_lost", ["env", "FLARETUNE_MAX_LOST=0.5", FT, "tune", "fusion.dflare", *common],
             ["rank 1 was started with another run", "max_lost 0.5 ", "max_lost "])):
        log = os.path.join(work, f"other-{name}.jsonl")
        app = other if other[0] == "env" else [FT, *other]
        cmd = ["mpirun", *root, "--oversubscribe", "-np", "1", FT, "tune", "fusion.dflare",
               *common, "--log", log, ":", "-np", "2", *app, "--log", log]
        r = run(cmd, timeout=120)
        ours = [l for l in r.stderr.splitlines() if l.startswith("flaretune:")]
        check(r.returncode != 0 and len(ours) == 1 and all(w in ours[0] for w in words),
              f"workers with another {name}: exit {r.returncode}, one line naming it ({ours})")
        check(not os.path.exists(log), f"workers with another {name}: nothing was logged")


def test_other_command(work):
    """Only tune runs over several ranks: another command beside it (mpirun's A : B form) used
    to leave rank 0 waiting for a rank that never joined; alone on several ranks, it would
    measure side by side. Refused in one line, the job ends."""
    root = ["--allow-run-as-root"] if os.getuid() == 0 else []
    log = os.path.join(work, "beside.jsonl")
    for cmd in (["mpirun", *root, "--oversubscribe", "-np", "1", FT, *TUNE, "--backend", "cpu",
                 "--budget", "4", "--log", log, ":", "-np", "1", FT, "show", log],
                mpirun(2, "bench", "loss", "--preset", "tiny.dflare.train", "--backend", "cpu")):
        r = run(cmd, timeout=120)
        ours = [l for l in r.stderr.splitlines() if l.startswith("flaretune:")]
        # (each refusing rank writes its line; mpirun's own report may cut into one of them)
        check(r.returncode != 0 and any("only tune runs over several ranks" in l for l in ours),
              f"{cmd[-4:]}: exit {r.returncode}, refused in one line ({ours})")


def test_stopped_rank(work):
    """A rank stopped (SIGSTOP) mid-run sends no result: with --candidate-timeout 3, rank 0
    gives up waiting (2 x 3 + 5 s) and ends the job with one line rather than hang."""
    log = os.path.join(work, "stopped.jsonl")
    cmd = mpirun(3, *TUNE, "--backend", "cpu", "--strategy", "random", "--budget", "60",
                 "--max-time", "0.01", "--candidate-timeout", "3", "--log", log)
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 120
    # Once rank 2 has sent a result (its start is behind it), stop it.
    while time.time() < deadline and p.poll() is None:
        if os.path.exists(log) and any(e["event"] == "measured" and e.get("rank") == 2
                                       for e in events(log)):
            break
        time.sleep(0.1)
    victims = rank_pids(2)
    for pid in victims:
        os.kill(pid, signal.SIGSTOP)
    t0 = time.time()
    try:
        _, err = p.communicate(timeout=90)
    except subprocess.TimeoutExpired:
        left = processes()  # who outlived the abort, for the failure's message
        p.kill()
        _, err = p.communicate()
        err += f"\nflaretune-test: hung, killed after 90 s; still running: {left}"
    took = time.time() - t0
    for pid in victims:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    # Rank 0's one line; the stopped rank, woken by mpirun to be ended, may add its own alarm's
    # line when it was stopped mid-candidate (true: that candidate took too long).
    ours = [l for l in err.splitlines() if l.startswith(("flaretune:", "flaretune-test:"))]
    rank0 = [l for l in ours if "sent no result" in l]
    others = [l for l in ours if "sent no result" not in l and
              "a candidate took longer than --candidate-timeout" not in l]
    check(victims and p.returncode != 0 and took < 60 and len(rank0) == 1 and
          "rank 2 sent no result" in rank0[0] and not others,
          f"a stopped rank ends the job (rc {p.returncode}, {took:.0f} s, {ours})")


def test_two_devices(work):
    """Two kinds of device in one job (here: the same CPU with OpenBLAS on two cores, which
    the fingerprint tells apart): one run per kind, one log each, one profile entry each."""
    log, prof = os.path.join(work, "het.jsonl"), os.path.join(work, "het.json")
    args = [*TUNE[:2], "--preset", "tiny.dflare.train", "--confirm", "1", "--quiet", "--backend",
            "cpu", "--budget", "3", "--max-time", "0.003", "--log", log, "--profile", prof]
    root = ["--allow-run-as-root"] if os.getuid() == 0 else []
    cmd = ["mpirun", *root, "--oversubscribe", "-np", "2", "-x", "OPENBLAS_CORETYPE=Sandybridge",
           FT, *args, ":", "-np", "2", "-x", "OPENBLAS_CORETYPE=Haswell", FT, *args]
    r = run(cmd)
    check(r.returncode == 0, f"two device kinds: the job exits 0 ({r.stderr[-300:]})")
    if r.returncode:
        return
    with open(prof) as f:
        devices = sorted(e["device"] for e in json.load(f)["entries"])
    check(len(devices) == 2 and "Haswell" in devices[0] and "Sandybridge" in devices[1],
          f"one profile entry per device ({devices})")
    logs = [f for f in os.listdir(work) if f.startswith("het.jsonl.") and "lock" not in f]
    per_log = [{(e.get("rank"), e.get("device")) for e in events(os.path.join(work, f))
                if e["event"] == "measured"} for f in logs]
    check(len(logs) == 2 and all(len({d for _, d in s}) == 1 for s in per_log),
          f"one log per device kind, each measured on its kind ({logs})")


T1 = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "t1", "saxpy_tiled.json")


def test_t1(work):
    log, kt, prof = (os.path.join(work, n) for n in ("t1.jsonl", "t1.kt.json", "t1.profile.json"))
    args = ["tune", "--t1", T1, "--backend", "cuda-emu", "--strategy", "exhaustive", "--budget",
            "0", "--reps", "2"]
    r = run(mpirun(3, *args, "--log", log, "--kt-cache", kt, "--profile", prof))
    check(r.returncode == 0 and "42 of 42 configurations evaluated (6 rejected)" in r.stdout,
          f"mpirun -np 3 tune --t1 exits 0, all 42 evaluated ({r.stdout[-300:]} {r.stderr[-400:]})")
    if r.returncode:
        return
    evs = events(log)
    ev = evaluated(evs)
    check(len(ev) == 42 and len(set(ev)) == 42, f"every configuration once ({len(ev)} events)")
    rejected = [e["config"] for e in evs if e["event"] == "rejected"]
    check(len(rejected) == 6 and all(c["tile_size_x"] == 3 for c in rejected),
          f"the six wrong configurations rejected and no other: {rejected}")
    ranks = {e.get("rank") for e in evs if e["event"] == "measured"}
    check(ranks == {0, 1, 2}, f"every rank measured some ({sorted(map(str, ranks))})")
    cand = [e for e in evs if e["event"] in ("measured", "rejected")]
    check(all("rank" in e and "host" in e and e.get("device", "").startswith("cuda-emu")
              for e in cand), "every evaluation says rank, host and device")
    with open(kt) as f:
        cache = json.load(f)
    check(len(cache.get("cache", {})) == 42, f"the cache holds all 42 ({len(cache.get('cache', {}))})")
    with open(prof) as f:
        ks = json.load(f).get("kernels", [])
    check(len(ks) == 1 and ks[0]["evaluations"] == 42, f"one profile kernel: {ks}")
    # Workers with another seed would check against other inputs: refused, nothing run.
    root = ["--allow-run-as-root"] if os.getuid() == 0 else []
    other = os.path.join(work, "t1-other.jsonl")
    r = run(["mpirun", *root, "--oversubscribe", "-np", "1", FT, *args, "--log", other, ":",
             "-np", "2", FT, *args, "--seed", "7", "--log", other], timeout=120)
    ours = [l for l in r.stderr.splitlines() if l.startswith("flaretune:")]
    check(r.returncode != 0 and len(ours) == 1 and "seed: 7" in ours[0] and
          "rank 0 has 1" in ours[0], f"workers with another seed: one line ({ours})")
    check(not os.path.exists(other), "workers with another seed: nothing was logged")
    # ... or another sample of blocks, which changes what is checked and timed.
    r = run(["mpirun", *root, "--oversubscribe", "-np", "1", FT, *args, "--blocks", "64", ":",
             "-np", "2", FT, *args, "--blocks", "2"], timeout=120)
    ours = [l for l in r.stderr.splitlines() if l.startswith("flaretune:")]
    check(r.returncode != 0 and len(ours) == 1 and "blocks sampled: 2" in ours[0],
          f"workers with another --blocks: one line ({ours})")
    # The dashboard needs a terminal, which no rank has: refused in one line, the job ends.
    r = run(mpirun(3, *args, "--tui"), timeout=120)
    ours = [l for l in r.stderr.splitlines() if l.startswith("flaretune:")]
    check(r.returncode == 2 and len(ours) == 1 and "flaretune top LOG" in ours[0],
          f"--tui under mpirun: exit 2, one line ({r.returncode}, {ours})")


def main():
    if not shutil.which("mpirun"):
        print("SKIP: no mpirun (apt-get install openmpi-bin libopenmpi-dev)")
        sys.exit(77)
    if "mpi        built" not in subprocess.run([FT, "version"], capture_output=True,
                                                 text=True).stdout:
        print("SKIP: flaretune was built without MPI")
        sys.exit(77)
    os.environ.setdefault("OMPI_MCA_rmaps_base_oversubscribe", "1")
    # Containers often forbid the cross-memory attach of Open MPI's shared-memory transport.
    os.environ.setdefault("OMPI_MCA_btl_vader_single_copy_mechanism", "none")
    work = tempfile.mkdtemp(prefix="ft_mpi_")
    try:
        landscape = test_exhaustive(work)
        test_replay(work, landscape)
        test_rank_cpus(work)
        test_kill(work)
        test_two_devices(work)
        test_interrupt(work)
        test_timeout(work)
        test_other_command_line(work)
        test_other_command(work)
        test_stopped_rank(work)
        test_t1(work)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    checks.finish()


if __name__ == "__main__":
    main()
