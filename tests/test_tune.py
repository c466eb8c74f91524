#!/usr/bin/env python3
"""test_tune.py: the tuner end to end on tiny presets: a run writes a log and a profile; a run
killed with SIGKILL resumes losing at most the candidate in flight; Ctrl-C saves the best so far;
an incompatible or damaged log is refused without being touched; sweeps, `all`, trace export.

usage: test_tune.py --flaretune PATH
"""
import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time

FT = None
FAILURES = []
FAST = ["--max-time", "0.05", "--noise", "0.2", "--confirm", "2"]


def check(cond, what):
    if not cond:
        FAILURES.append(what)
        print("FAIL:", what, file=sys.stderr)


def run(*args, timeout=600):
    p = subprocess.run([FT, *args], capture_output=True, text=True, timeout=timeout)
    return p.returncode, p.stdout, p.stderr


def events(path):
    out = []
    with open(path) as f:
        for line in f:
            if line.endswith("\n") and line.strip():
                out.append(json.loads(line))
    return out


def key(cfg):
    return json.dumps(cfg, sort_keys=True)


def space_valid(op, preset):
    rc, out, err = run("space", op, "--backend", "cpu", "--preset", preset, "--json")
    return json.loads(out)["valid"]


def test_run_log_profile(tmp):
    log, prof = os.path.join(tmp, "a.jsonl"), os.path.join(tmp, "a.json")
    rc, out, err = run("tune", "fusion.dflash", "--preset", "tiny.dflare.train", "--backend", "cpu",
                       "--log", log, "--profile", prof, *FAST)
    check(rc == 0, f"tune exit {rc}: {err}")
    ev = events(log)
    kinds = [e["event"] for e in ev]
    check(kinds[0] == "run_start" and kinds[-1] == "run_end", f"log starts and ends a run: {kinds}")
    check(all(e["run"] == ev[0]["run"] for e in ev), "one run id")
    valid = ev[0]["space_valid"]
    done = [key(e["config"]) for e in ev if e["event"] in ("measured", "rejected")]
    check(len(done) == valid == len(set(done)), f"every valid candidate once: {len(done)}/{valid}")
    check("confirm" in kinds, "a confirmation round")
    end = ev[-1]
    check(end["winner"] is not None and end["speedup"] > 0, "a winner with a speedup")
    doc = json.load(open(prof))
    check(doc["schema_version"] == 1 and len(doc["entries"]) == 1, "profile with one entry")
    e = doc["entries"][0]
    check(e["op"] == "fusion.dflash" and e["config"] == end["winner"], "profile holds the winner")
    check(e["verification"]["max_rel_err"] < 1e-5, "verified within tolerance")
    rc, out, err = run("show", prof)
    check(rc == 0 and "fusion.dflash" in out, f"show: {err}")
    rc, out, err = run("trace", log, "-o", os.path.join(tmp, "a.trace.json"))
    check(rc == 0, f"trace: {err}")
    tr = json.load(open(os.path.join(tmp, "a.trace.json")))["traceEvents"]
    cats = {t.get("cat") for t in tr}
    check({"run", "candidate", "samples", "confirm"} <= cats, f"trace span kinds: {cats}")
    runs = [t for t in tr if t.get("cat") == "run"]
    cands = [t for t in tr if t.get("cat") == "candidate"]
    check(len(runs) == 1 and len(cands) == sum(1 for x in ev if x["event"] == "measured"),
          "one run span, one span per measured candidate")
    r0, r1 = runs[0]["ts"], runs[0]["ts"] + runs[0]["dur"]
    check(all(r0 <= c["ts"] and c["ts"] + c["dur"] <= r1 + 1 for c in cands), "candidates nest in the run")
    # Running the same command again resumes: nothing left to measure.
    rc, out, err = run("tune", "fusion.dflash", "--preset", "tiny.dflare.train", "--backend", "cpu",
                       "--log", log, *FAST)
    ev2 = events(log)[len(ev):]
    check(rc == 0 and ev2[0]["resumed"] == valid, f"second run resumes all {valid}: {err}")
    check(not any(e["event"] == "measured" for e in ev2), "nothing measured again")


def test_kill_and_resume(tmp):
    op, preset = "fusion.dflare", "tiny.dflare.train"
    log = os.path.join(tmp, "k.jsonl")
    cmd = [FT, "tune", op, "--preset", preset, "--backend", "cpu", "--log", log, "--no-screen",
           "--max-time", "0.2", "--noise", "0.001", "--quiet"]
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 120
    while time.time() < deadline:
        time.sleep(0.2)
        if os.path.exists(log) and sum(1 for e in events(log) if e["event"] == "measured") >= 3:
            break
    p.send_signal(signal.SIGKILL)
    p.wait()
    first = events(log)
    done1 = {key(e["config"]) for e in first if e["event"] in ("measured", "rejected")}
    check(len(done1) >= 3, f"the killed run measured some candidates ({len(done1)})")
    check(not any(e["event"] == "run_end" for e in first), "the killed run never ended")
    rc, out, err = run(*cmd[1:5], *cmd[5:-5], "--max-time", "0.05", "--noise", "0.2", "--quiet")
    check(rc == 0, f"resume exit {rc}: {err}")
    allev = events(log)
    second = allev[len(first):]
    check(second[0]["event"] == "run_start" and second[0]["resumed"] == len(done1),
          f"resumed {second[0].get('resumed')} of {len(done1)}")
    done2 = [key(e["config"]) for e in second if e["event"] in ("measured", "rejected")]
    check(not (set(done2) & done1), "no candidate measured twice")
    valid = space_valid(op, preset)
    check(len(done1 | set(done2)) == valid, f"together they cover every candidate: {len(done1 | set(done2))}/{valid}")


def test_ctrl_c(tmp):
    log, prof = os.path.join(tmp, "c.jsonl"), os.path.join(tmp, "c.json")
    p = subprocess.Popen([FT, "tune", "fusion.dflare", "--preset", "tiny.dflare.train", "--backend", "cpu",
                          "--log", log, "--profile", prof, "--no-screen", "--max-time", "0.2",
                          "--noise", "0.001", "--quiet"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 120
    while time.time() < deadline:
        time.sleep(0.2)
        if os.path.exists(log) and sum(1 for e in events(log) if e["event"] == "measured") >= 2:
            break
    p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=120)
    check(p.returncode == 130, f"Ctrl-C exits 130, got {p.returncode}: {err}")
    ev = events(log)
    check(ev[-1]["event"] == "run_end" and ev[-1]["interrupted"], "run_end marks the interruption")
    check("interrupted" in err, "says it was interrupted")
    doc = json.load(open(prof))
    check(len(doc["entries"]) == 1 and doc["entries"][0].get("interrupted"), "best so far saved, marked")


def test_refusals(tmp):
    log = os.path.join(tmp, "a.jsonl")
    before = open(log).read()
    rc, out, err = run("tune", "fusion.dflash", "--preset", "tiny.dflare.train", "--set", "N=7",
                       "--backend", "cpu", "--log", log, *FAST)
    check(rc == 2 and "cannot continue" in err and len(err.strip().splitlines()) == 1,
          f"an incompatible log is refused in one line: {rc} {err!r}")
    check(open(log).read() == before, "the refused log is untouched")
    bad = os.path.join(tmp, "bad.jsonl")
    with open(bad, "w") as f:
        f.write(before.splitlines()[0] + "\n{not json\n" + before.splitlines()[1] + "\n")
    before_bad = open(bad).read()
    rc, out, err = run("tune", "fusion.dflash", "--preset", "tiny.dflare.train", "--backend", "cpu",
                       "--log", bad, *FAST)
    check(rc == 1 and "bad.jsonl:2" in err, f"a damaged log is refused naming the line: {rc} {err!r}")
    check(open(bad).read() == before_bad, "the damaged log is untouched")
    prof = os.path.join(tmp, "broken.json")
    with open(prof, "w") as f:
        f.write("{\"schema_version\": 1, \"entries\": [")
    rc, out, err = run("tune", "fusion.dflash", "--preset", "tiny.dflare.train", "--backend", "cpu",
                       "--profile", prof, *FAST)
    check(rc != 0 and "broken.json" in err, f"a malformed profile is an error: {rc} {err!r}")
    check(open(prof).read() == "{\"schema_version\": 1, \"entries\": [", "the malformed profile is untouched")
    rc, out, err = run("tune", "loss", "--strategy", "bogus")
    check(rc == 2 and "unknown strategy" in err, "unknown strategy")


def test_sweep_and_all(tmp):
    prof = os.path.join(tmp, "s.json")
    rc, out, err = run("tune", "attention.decode", "--preset", "tiny.dflare.decode", "--backend", "cpu",
                       "--sweep", "L=5,40", "--profile", prof, "--budget", "3", "--strategy", "random",
                       *FAST)
    check(rc == 0, f"sweep: {err}")
    doc = json.load(open(prof))
    lsums = sorted(e["shape"]["Lsum"] for e in doc["entries"])
    check(len(lsums) == 2 and lsums[0] < lsums[1], f"one entry per swept size: {lsums}")
    rc, out, err = run("tune", "all", "--preset", "tiny.dflare.train", "--backend", "cpu", "--budget", "2",
                       "--strategy", "random", "--profile", prof, *FAST)
    check(rc == 0, f"tune all: {err}")
    for op in ["fusion.dflare", "fusion.dflash", "attention.kvproj", "attention.decode", "attention.train", "loss"]:
        check(op in out, f"summary lists {op}")
    doc = json.load(open(prof))
    check(len({e["op"] for e in doc["entries"]}) == 6, "profile has every op")


def main():
    global FT
    ap = argparse.ArgumentParser()
    ap.add_argument("--flaretune", required=True)
    FT = ap.parse_args().flaretune
    with tempfile.TemporaryDirectory() as tmp:
        for t in (test_run_log_profile, test_kill_and_resume, test_ctrl_c, test_refusals, test_sweep_and_all):
            n = len(FAILURES)
            t(tmp)
            print(f"{t.__name__:32s} {'ok' if len(FAILURES) == n else 'FAILED'}", file=sys.stderr)
    print(f"{len(FAILURES)} failures", file=sys.stderr)
    return 1 if FAILURES else 0


if __name__ == "__main__":
    sys.exit(main())
