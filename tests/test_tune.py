#!/usr/bin/env python3
"""test_tune.py: the tuner end to end on tiny presets: a run writes a log and a profile; a run
killed with SIGKILL resumes losing at most the candidate in flight; one past --candidate-timeout
is recorded as rejected and resumed past; Ctrl-C saves the best so far;
an incompatible or damaged log is refused without being touched; sweeps, `all`, trace export.

usage: test_tune.py --flaretune PATH
"""
import argparse
import glob
import importlib.util
import json
import os
import shutil
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


def run(*args, timeout=600, env=None):
    """flaretune ARGS; env adds variables to this environment (None removes one)."""
    e = {**os.environ, **{k: v for k, v in (env or {}).items() if v is not None}}
    for k in [k for k, v in (env or {}).items() if v is None]:
        e.pop(k, None)
    p = subprocess.run([FT, *args], capture_output=True, text=True, timeout=timeout, env=e)
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
    # A speedup, or on a busy machine the reason it is withheld (the default not measured
    # cleanly: docs/measurement.md); never a number from contaminated samples.
    check(end["winner"] is not None and ((end["speedup"] or 0) > 0
                                         or "cleanly" in end.get("speedup_withheld", "")),
          f"a winner with a speedup or its withholding: {end.get('speedup')} "
          f"{end.get('speedup_withheld')}")
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
    # Running the same command again resumes: nothing left to measure but what a busy machine
    # kept from being measured cleanly (docs/measurement.md), which gets another chance.
    unclean = {key(e["config"]) for e in ev if e["event"] == "measured" and e.get("clean") is False}
    rc, out, err = run("tune", "fusion.dflash", "--preset", "tiny.dflare.train", "--backend", "cpu",
                       "--log", log, *FAST)
    ev2 = events(log)[len(ev):]
    check(rc == 0 and ev2[0]["resumed"] == valid - len(unclean),
          f"second run resumes all {valid} but the {len(unclean)} unclean: {err}")
    again = {key(e["config"]) for e in ev2 if e["event"] == "measured"}
    check(again == unclean, f"only the unclean measured again: {len(again)} vs {len(unclean)}")


def test_winner_roof_counts_scratch(tmp):
    """The winner's roofline in run_end is over the working set its measured event used: the
    call's bytes and the winner's scratch (the loss's logits tile), so the two name the same
    cache level and fraction; also when the winner comes from a resumed log."""
    log = os.path.join(tmp, "roof.jsonl")
    for attempt in range(2):  # the second run resumes every candidate from the log
        rc, _, err = run("tune", "loss", "--preset", "tiny.dflare.train", "--backend", "cpu",
                         "--budget", "4", "--strategy", "random", "--log", log, *FAST)
        check(rc == 0, f"tune loss: exit {rc}: {err}")
        ev = events(log)
        end = [e for e in ev if e["event"] == "run_end"][-1]
        if end.get("winner") is None:
            continue  # a busy machine measured nothing cleanly: nothing to compare
        mine = [e for e in ev if e["event"] == "measured" and e["config"] == end["winner"] and
                "roofline" in e]
        check(mine and mine[-1]["peak_extra_bytes"] > 0 and
              end["roofline"]["working_set_bytes"] == mine[-1]["roofline"]["working_set_bytes"],
              f"run {attempt}: run_end's working set {end['roofline']['working_set_bytes']} is "
              f"the winner's measured one, scratch included "
              f"({[(e['roofline']['working_set_bytes'], e['peak_extra_bytes']) for e in mine]})")


def wait_measured(log, n, timeout=120):
    """Until the log at log holds n measured events (or timeout seconds pass)."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        time.sleep(0.2)
        if os.path.exists(log) and sum(1 for e in events(log) if e["event"] == "measured") >= n:
            return


def test_kill_and_resume(tmp):
    op, preset = "fusion.dflare", "tiny.dflare.train"
    log = os.path.join(tmp, "k.jsonl")
    cmd = [FT, "tune", op, "--preset", preset, "--backend", "cpu", "--strategy", "exhaustive",
           "--log", log, "--no-screen", "--max-time", "0.2", "--noise", "0.001", "--quiet"]
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_measured(log, 3)
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


def test_budget_counts_resumed(tmp):
    """--budget counts the candidates a resumed run takes from its log, so a run killed part way
    and run again measures what the uninterrupted run measured, no more; run again once more, it
    measures nothing. On the replay backend (a recorded landscape: no timing noise), random
    search, one seed. A --sweep run again measures again only what its first run did not
    measure cleanly (a busy machine's samples), never a fresh budget per size."""
    op, preset = "fusion.dflare", "tiny.dflare.train"
    rec = os.path.join(tmp, "budget-rec.jsonl")
    rc, out, err = run("tune", op, "--preset", preset, "--backend", "cpu", "--strategy",
                       "exhaustive", "--log", rec, "--quiet", *FAST)
    check(rc == 0, f"recording: {err[-300:]}")
    cmd = ["tune", op, "--preset", preset, "--backend", f"replay:{rec}", "--strategy", "random",
           "--seed", "3", "--budget", "4", "--quiet"]

    def measured(path, start=0):
        return [key(e["config"]) for e in events(path)[start:] if e["event"] == "measured"]
    whole = os.path.join(tmp, "budget-whole.jsonl")
    rc, out, err = run(*cmd, "--log", whole)
    want = measured(whole)
    check(rc == 0 and len(want) == 4, f"uninterrupted: {rc} {want} {err[-300:]}")
    cut = os.path.join(tmp, "budget-cut.jsonl")
    rc, out, err = run(*cmd, "--log", cut)
    ev = events(cut)
    at = [i for i, e in enumerate(ev) if e["event"] == "measured"][1]
    with open(cut, "w") as f:  # as if killed right after the second measurement
        f.write("".join(json.dumps(e) + "\n" for e in ev[:at + 1]))
    rc, out, err = run(*cmd, "--log", cut)
    got = measured(cut)
    check(rc == 0 and sorted(got) == sorted(want) and len(got) == 4,
          f"resumed after a crash: {rc} measured {got}, uninterrupted {want}: {err[-300:]}")
    n = len(events(cut))
    rc, out, err = run(*cmd, "--log", cut)
    check(rc == 0 and measured(cut, n) == [], f"run again once done: {rc} {measured(cut, n)}")
    # A replay's log measured nothing itself: replay, export and replay:LOG refuse it in one
    # line naming it (exit 1: the file, not the command line), not "unknown backend 'replay'".
    for argv in (["replay", whole], ["export", whole, "--format", "t4", "-o",
                                     os.path.join(tmp, "budget-whole.t4.json")],
                 ["tune", op, "--preset", preset, "--backend", f"replay:{whole}", "--quiet"]):
        rc, out, err = run(*argv)
        check(rc == 1 and "the log of a replay" in err and len(err.strip().splitlines()) == 1,
              f"{argv[0]} of a replay's log: {rc} {err!r}")
    sw = os.path.join(tmp, "budget-sweep.jsonl")
    sweep = ["tune", "attention.decode", "--preset", "tiny.dflare.decode", "--backend", "cpu",
             "--sweep", "L=5,40", "--budget", "2", "--strategy", "random", "--log", sw, "--quiet",
             *FAST]
    rc, out, err = run(*sweep)
    logs = sorted(p for p in glob.glob(sw + ".*") if not p.endswith(".lock"))
    check(rc == 0 and len(logs) == 2, f"sweep: {rc} {logs} {err[-300:]}")
    before = {path: events(path) for path in logs}
    rc, out, err = run(*sweep)
    for path, ev in before.items():
        unclean = {key(e["config"]) for e in ev
                   if e["event"] == "measured" and e.get("clean") is False}
        again = measured(path, len(ev))
        check(rc == 0 and set(again) <= unclean,
              f"{path} run again: measured {again}, of which only {unclean} were unclean")


def test_candidate_timeout(tmp):
    """--candidate-timeout: a candidate that takes longer ends the run in one line, recorded in
    the log as rejected (reason `ended`) before the process ends, so the same command resumes
    past it: the next run's first candidate is another one, and the first is never run again."""
    log = os.path.join(tmp, "timeout.jsonl")
    # Each candidate measures for up to 4 s (noise that no median meets), past the limit of 1.
    cmd = ["tune", "fusion.dflare", "--preset", "small.dflare.train", "--backend", "cpu",
           "--strategy", "exhaustive", "--no-screen", "--max-time", "4", "--noise", "0.000001",
           "--candidate-timeout", "1", "--log", log, "--quiet"]
    ended = []
    for k in range(2):
        rc, _, err = run(*cmd, timeout=300)
        lines = [l for l in err.splitlines() if l.startswith("flaretune:")]
        check(rc == -signal.SIGALRM and len(lines) == 1 and
              "longer than --candidate-timeout" in lines[0] and "recorded as failed" in lines[0],
              f"run {k + 1} ends on the candidate past the limit: exit {rc}: {err[-300:]!r}")
        ev = events(log)
        ended = [e for e in ev if e["event"] == "rejected" and e.get("reason") == "ended"]
        check(len(ended) == k + 1 and "--candidate-timeout 1 s" in ended[-1]["message"],
              f"run {k + 1}: the log holds {len(ended)} candidates ended by the limit")
    check(len({key(e["config"]) for e in ended}) == 2,
          "the resumed run went on past the first candidate instead of running it again")
    starts = [e for e in events(log) if e["event"] == "run_start"]
    check(starts[-1]["resumed"] == 1 and starts[-1]["resumed_rejected"] == 1,
          f"the second run resumed the first's rejection: {starts[-1].get('resumed')}")
    # Without a log nothing a rerun reads holds it, and the line says so.
    rc, _, err = run(*[a for a in cmd if a not in ("--log", log)], timeout=300)
    check(rc == -signal.SIGALRM and "nothing a resumed run reads records it" in err,
          f"without a log the line says the candidate is not recorded: {err[-300:]!r}")
    # Under the dashboard the terminal is given back (the full screen left) before the line.
    if shutil.which("script"):
        typescript = os.path.join(tmp, "timeout.typescript")
        line = " ".join([FT, *cmd, "--tui"]).replace(log, log + ".tui")
        subprocess.run(["script", "-qfec", line, typescript], env={**os.environ, "TERM": "xterm"},
                       stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL, timeout=300)
        with open(typescript, "rb") as f:
            screen = f.read()
        enter, leave = screen.find(b"\x1b[?1049h"), screen.rfind(b"\x1b[?1049l")
        said = screen.find(b"took longer than --candidate-timeout")
        check(0 <= enter < leave < said,
              f"the dashboard's full screen is left before the line ({enter}, {leave}, {said})")


def test_ctrl_c(tmp):
    log, prof = os.path.join(tmp, "c.jsonl"), os.path.join(tmp, "c.json")
    p = subprocess.Popen([FT, "tune", "fusion.dflare", "--preset", "tiny.dflare.train", "--backend", "cpu",
                          "--log", log, "--profile", prof, "--no-screen", "--max-time", "0.2",
                          "--noise", "0.001", "--quiet"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    wait_measured(log, 2)
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
    # the same command on fewer CPUs (another device): both devices named
    mine = sorted(os.sched_getaffinity(0))
    if len(mine) >= 2 and shutil.which("taskset"):
        start = next(json.loads(l) for l in before.splitlines() if '"run_start"' in l)
        p = subprocess.run(["taskset", "-c", str(mine[0]), FT, "tune", start["op"], "--preset",
                            "tiny.dflare.train", "--backend", "cpu", "--log", log, *FAST],
                           capture_output=True, text=True)
        check(p.returncode == 2 and f"measured on '{start['device']}'" in p.stderr and
              " x 1 (" in p.stderr and len(p.stderr.strip().splitlines()) == 1,
              f"a log of the whole machine, resumed on one CPU: {p.returncode} {p.stderr!r}")
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
    # A profile of a newer schema is unusable input, exit 1 as for show and merge.
    with open(prof, "w") as f:
        f.write("{\"schema_version\": 99, \"entries\": []}\n")
    rc, out, err = run("tune", "fusion.dflash", "--preset", "tiny.dflare.train", "--backend", "cpu",
                       "--profile", prof, *FAST)
    check(rc == 1 and "schema_version 99 is newer" in err and len(err.strip().splitlines()) == 1,
          f"a too-new profile is refused with exit 1 in one line: {rc} {err!r}")
    rc, out, err = run("tune", "loss", "--strategy", "bogus")
    check(rc == 2 and "unknown strategy" in err, "unknown strategy")
    # The log and the profile in one file: the profile saved at the end would replace the log.
    for target in (log, os.path.join(tmp, "new.json")):
        rc, out, err = run("tune", "fusion.dflash", "--preset", "tiny.dflare.train", "--backend",
                           "cpu", "--log", target, "--profile", os.path.join(tmp, ".", os.path.basename(target)),
                           *FAST)
        check(rc == 2 and "--log and --profile both name" in err and
              len(err.strip().splitlines()) == 1, f"--log and --profile {target}: {rc} {err!r}")
    check(open(log).read() == before and not os.path.exists(os.path.join(tmp, "new.json")),
          "the log untouched, nothing made")


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
    for op in ["fusion.dflare", "fusion.dflash", "attention.kvproj", "attention.decode", "attention.train", "loss", "linear"]:
        check(op in out, f"summary lists {op}")
    doc = json.load(open(prof))
    check(len({e["op"] for e in doc["entries"]}) == 7, "profile has every op")


def lines_parse(path):
    """Every line of the file is one JSON object and the file ends with a newline."""
    text = open(path).read()
    if text and not text.endswith("\n"):
        return False
    try:
        return all(isinstance(json.loads(l), dict) for l in text.splitlines() if l.strip())
    except ValueError:
        return False


def test_torn_log(tmp):
    """A log cut mid-line (kill -9, a full disk) stays valid JSONL across resumes."""
    base = ["tune", "fusion.dflash", "--preset", "tiny.dflare.train", "--backend", "cpu", *FAST]
    log = os.path.join(tmp, "torn.jsonl")
    rc, out, err = run(*base, "--log", log, "--budget", "2")
    check(rc == 0, f"first run: {err}")
    with open(log, "a") as f:
        f.write('{"event":"measured","run":"x","config":{"par":')  # torn: no end, no newline
    for attempt in range(2):
        rc, out, err = run(*base, "--log", log, "--budget", "2")
        check(rc == 0, f"resume {attempt} of a torn log: {rc} {err}")
        check(lines_parse(log), f"after resume {attempt} every line of the log parses")
    rc, out, err = run("trace", log, "-o", os.path.join(tmp, "torn.trace.json"))
    check(rc == 0, f"trace of the resumed log: {err}")
    rc, out, err = run("replay", log, "--seeds", "2")
    check(rc != 0 or "landscape" in out, f"replay reads the resumed log: {err}")
    check("not an event" not in err, f"replay finds no broken line: {err}")
    # A whole event that only lacks its newline is kept, not cut.
    ev = events(log)
    with open(log, "rb+") as f:
        f.seek(-1, os.SEEK_END)
        f.truncate()  # the last run_end loses its newline
    rc, out, err = run(*base, "--log", log, "--budget", "2")
    check(rc == 0 and lines_parse(log), f"a last event without its newline: {rc} {err}")
    check(events(log)[:len(ev)] == ev, "the event that lacked its newline is kept whole")


def test_log_lock(tmp):
    """Two tuners on one --log: the second fails at once with one line, however the path reaches
    the log (a symbolic link to it or to its folder); nothing is measured twice. A device or a
    folder as the log is refused without a lock file beside it."""
    log = os.path.join(tmp, "lock.jsonl")
    slow = [FT, "tune", "fusion.dflare", "--preset", "tiny.dflare.train", "--backend", "cpu",
            "--log", log, "--no-screen", "--max-time", "0.3", "--noise", "0.0001", "--quiet"]
    a = subprocess.Popen(slow, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.time() + 60
        while time.time() < deadline and not (os.path.exists(log) and os.path.getsize(log) > 0):
            time.sleep(0.1)
        # the same log through a symbolic link, and through a link to its folder: one lock
        os.symlink(log, os.path.join(tmp, "lock-link.jsonl"))
        os.symlink(tmp, os.path.join(tmp, "dirlink"))
        for other, path in ((["fusion.dflare"], log), (["loss"], log),
                            (["fusion.dflare"], os.path.join(tmp, "lock-link.jsonl")),
                            (["fusion.dflare"], os.path.join(tmp, "dirlink", "lock.jsonl"))):
            t0 = time.time()
            rc, out, err = run("tune", *other, "--preset", "tiny.dflare.train", "--backend", "cpu",
                               "--log", path, *FAST)
            lines = err.strip().splitlines()
            check(rc == 1 and len(lines) == 1 and "in use by another process" in err,
                  f"a second tuner ({other[0]}) on the same log ({path}): {rc} {err!r}")
        # a device or a folder as the log: refused, and no lock file left beside it
        for path, why in (("/dev/null", "not a regular file"), (tmp, "is a directory")):
            rc, out, err = run("tune", "loss", "--preset", "tiny.dflare.train", "--backend", "cpu",
                               "--log", path, *FAST)
            check(rc == 1 and why in err and len(err.strip().splitlines()) == 1
                  and not os.path.exists(path + ".lock"),
                  f"--log {path}: {rc} {err!r}, lock left: {os.path.exists(path + '.lock')}")
        # tune all takes every op's log before it starts: one held one refuses the whole run.
        fam = os.path.join(tmp, "famlock.jsonl")
        b = subprocess.Popen([*slow[:8], fam + ".loss", *slow[9:]], stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL)
        try:
            deadline = time.time() + 60
            while time.time() < deadline and not os.path.exists(fam + ".loss.lock"):
                time.sleep(0.1)
            time.sleep(0.5)
            rc, out, err = run("tune", "all", "--preset", "tiny.dflare.train", "--backend", "cpu",
                               "--log", fam, "--budget", "1", *FAST)
            check(rc == 1 and "in use" in err and not os.path.exists(fam + ".fusion.dflare"),
                  f"tune all refused before its first op: {rc} {err!r}")
        finally:
            b.kill()
            b.wait()
    finally:
        a.kill()
        a.wait()
    measured = [key(e["config"]) for e in events(log) if e["event"] == "measured"]
    check(len(measured) == len(set(measured)), "no config measured twice in the shared log")


def test_resume_untrusted(tmp):
    """A measured event without stats is not a result: resume measures that candidate again."""
    log = os.path.join(tmp, "untrusted.jsonl")
    base = ["tune", "fusion.dflash", "--preset", "tiny.dflare.train", "--backend", "cpu", *FAST]
    rc, out, err = run(*base, "--log", log, "--budget", "1", "--strategy", "exhaustive")
    check(rc == 0, f"first run: {err}")
    ev = events(log)
    start = [e for e in ev if e["event"] == "run_start"][-1]
    done = {key(e["config"]) for e in ev if e["event"] == "measured"}
    # A valid config this log has not measured (from an exhaustive run in another log), claimed
    # measured with no stats: trusted, its median would count as 0 and win.
    probe = os.path.join(tmp, "probe.jsonl")
    rc, out, err = run(*base, "--log", probe, "--strategy", "exhaustive", "--budget", "3")
    fake = next((e["config"] for e in events(probe)
                 if e["event"] == "measured" and key(e["config"]) not in done), None)
    check(fake is not None, "a second candidate to fake")
    with open(log, "a") as f:
        f.write(json.dumps({"event": "measured", "run": start["run"], "t": 1, "config": fake,
                            "candidate": 1}) + "\n")
    rc, out, err = run(*base, "--log", log, "--budget", "3", "--strategy", "exhaustive")
    check(rc == 0, f"resume: {err}")
    check("not trusted" in err, f"resume says it ignored the event: {err!r}")
    second = events(log)[len(ev) + 1:]
    again = [e for e in second if e["event"] == "measured" and key(e["config"]) == key(fake)]
    check(len(again) == 1 and again[0]["stats"]["median_s"] > 0,
          "the untrusted candidate is measured again")
    end = [e for e in second if e["event"] == "run_end"][-1]
    check(end["stats"]["median_s"] > 0, "the winner has a real median")
    # The faked event (line len(ev) + 1) was listed as not trusted; run again, its candidate
    # measured since, it is no longer listed as one that runs again.
    starts = [e for e in second if e["event"] == "run_start"]
    was = [x["event"] for x in (starts[0].get("resume_ignored", []) if starts else [])]
    check(was == [len(ev) + 1], f"the resumed run lists the faked event: {was}")
    n = len(events(log))
    rc, out, err = run(*base, "--log", log, "--budget", "3", "--strategy", "exhaustive")
    third = [e for e in events(log)[n:] if e["event"] == "run_start"]
    listed = [x["event"] for x in (third[0].get("resume_ignored", []) if third else [])]
    check(rc == 0 and third and len(ev) + 1 not in listed,
          f"a later run does not list the event whose candidate was measured since: {listed}")
    # An event whose config lacks a parameter its run's default names would pass for another
    # candidate (the missing one at its default): not trusted, said so.
    damaged = dict(fake)
    damaged.pop(sorted(damaged)[0])
    with open(log, "a") as f:
        f.write(json.dumps({"event": "measured", "run": start["run"], "t": 1, "config": damaged,
                            "candidate": 1, "stats": {"median_s": 1e-9, "samples": 5}}) + "\n")
    rc, out, err = run(*base, "--log", log, "--budget", "3", "--strategy", "exhaustive")
    check(rc == 0 and f"its config lacks '{sorted(fake)[0]}'" in err,
          f"a damaged event is not trusted: {rc} {err[-400:]!r}")
    end = [e for e in events(log) if e["event"] == "run_end"][-1]
    check(end["stats"]["median_s"] > 1e-9, "the damaged event's 1 ns median is not the winner's")


def test_fail_fast(tmp):
    """What cannot work is found before the search, in one line, with nothing measured."""
    log = os.path.join(tmp, "ff.jsonl")
    base = ["tune", "fusion.dflash", "--preset", "tiny.dflare.train", "--backend", "cpu", *FAST]
    for prof, code in (("/nonexistent-dir/p.json", 1), ("", 2), (tmp, 1), ("x" * 5000, 2)):
        rc, out, err = run(*base, "--profile", prof, "--log", log)
        lines = err.strip().splitlines()
        check(rc == code and len(lines) == 1 and lines[0].startswith("flaretune: "),
              f"--profile {prof[:30]!r}: exit {rc} (want {code}), {err!r}")
        check(not os.path.exists(log) or not any(e["event"] == "measured" for e in events(log)),
              f"--profile {prof[:30]!r}: nothing measured")
        check(": cannot rename into place" not in err, f"a true message for {prof[:30]!r}: {err!r}")
    rc, out, err = run(*base, "--log", "")
    check(rc == 2 and "--log" in err and len(err.strip().splitlines()) == 1,
          f"--log '' is refused: {rc} {err!r}")
    # Ctrl-C before the first candidate is measured: nothing is saved, and it says so.
    prof = os.path.join(tmp, "ff.json")
    p = subprocess.Popen([FT, *base, "--profile", prof], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    # Its first line says what it tunes, once its Ctrl-C handler is in place, before the ceilings
    # are measured; a fixed delay instead can end a process still starting on a busy machine.
    first = p.stderr.readline()
    p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=120)
    err = first + err
    check(p.returncode == 130, f"Ctrl-C: exit {p.returncode}: {err}")
    if not os.path.exists(prof):
        check("nothing was saved" in err and "saved" not in err.replace("nothing was saved", ""),
              f"says nothing was saved: {err!r}")
    else:
        check("are saved" in err, f"a profile written means it says so: {err!r}")


def test_save_fails_at_end(tmp):
    """A profile that cannot be written when the search ends (here it was damaged during the
    run) loses no result: the summary with the winner is printed, then one error line that says
    where the result is kept, and the same command resumes from the log and saves."""
    log, prof = os.path.join(tmp, "sf.jsonl"), os.path.join(tmp, "sf.json")
    cmd = [FT, "tune", "fusion.dflare", "--preset", "tiny.dflare.train", "--backend", "cpu",
           "--strategy", "exhaustive", "--budget", "4", "--log", log, "--profile", prof,
           "--no-screen", "--max-time", "0.2", "--noise", "0.2", "--confirm", "2", "--quiet"]
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    wait_measured(log, 1)
    with open(prof, "w") as f:
        f.write("{not json")
    out, err = p.communicate(timeout=300)
    lines = [l for l in err.splitlines() if l.startswith("flaretune: ")]
    check(p.returncode == 1, f"a save failed at the end: exit {p.returncode}: {err!r}")
    check("not saved: the winner of fusion.dflare at N=" in out and "yes (" in out and
          "profile:" not in out, f"the summary shows the winner, not saved: {out!r}")
    check(lines and "malformed" in lines[-1] and "summary above" in lines[-1] and log in lines[-1],
          f"the error line says where the result is kept: {err!r}")
    os.unlink(prof)
    rc, out, err = run(*cmd[1:])
    again = [e for e in events(log) if e["event"] == "run_start"]
    check(rc == 0 and "profile: " + prof in out and again[-1]["resumed"] >= 1,
          f"the same command resumes and saves: {rc} {again[-1].get('resumed')} {err!r}")


def test_progress_counts(tmp):
    """Progress counts measured candidates out of the budget (rejected ones apart), never past
    it (tests/test_session.c checks that the verification shape rejects none of them)."""
    log = os.path.join(tmp, "progress.jsonl")
    cmd = ["tune", "fusion.dflare", "--preset", "tiny.dflare.train", "--backend", "cpu",
           "--strategy", "random", "--log", log, *FAST]
    rc, out, err = run(*cmd, "--budget", "4")
    check(rc == 0, f"tune: {err}")
    counts = [l.split()[0] for l in err.splitlines() if l.startswith("  ") and "/" in l.split()[0]]
    check(len(counts) == 4 and all(c == f"{k + 1}/4" for k, c in enumerate(counts)),
          f"progress: measured out of the budget: {counts}")
    # Resumed, progress starts from the best and the default the log holds (it showed
    # "best -" until a new candidate beat nothing), and knows the default by its config.
    first = events(log)
    ranked = [e for e in first if e["event"] == "measured" and e.get("clean", True)
              and not e.get("stopped") and not e.get("screened")]
    default = [e["stats"]["median_s"] for e in first if e["event"] == "measured"
               and e["config"] == first[0]["default"] and e.get("clean", True)
               and not e.get("stopped")]
    rc, out, err = run(*cmd, "--budget", "6")  # (the 4 resumed count)
    check(rc == 0, f"resumed tune: {err}")
    start = [e for e in events(log) if e["event"] == "run_start"][-1]
    best = min((e["stats"]["median_s"] for e in ranked), default=None)
    check(start.get("resumed_best_s") == best and start.get("resumed_default_s") ==
          (default[0] if default else None),
          f"run_start says what it resumed from: {start.get('resumed_best_s')} "
          f"{start.get('resumed_default_s')} against {best} {default}")
    lines = [l for l in err.splitlines() if l.startswith("  ") and "/" in l.split()[0]]
    check(len(lines) == 2, f"two more measured: {lines}")
    if best is not None:
        check(all(not l.endswith("best -") for l in lines),
              f"a resumed run's progress shows the log's best: {lines}")


def test_replay_family(tmp):
    """The --log of `tune all` or a sweep names one log per op and size: replay takes it too."""
    fam = os.path.join(tmp, "fam.jsonl")
    rc, out, err = run("tune", "fusion.dflash", "--preset", "tiny.dflare.train", "--backend", "cpu",
                       "--strategy", "exhaustive", "--sweep", "N=24,48", "--log", fam, *FAST)
    check(rc == 0, f"tune --sweep: {err}")
    logs = [f"{fam}.fusion.dflash.N24", f"{fam}.fusion.dflash.N48"]
    rc, out, err = run("replay", fam, "--seeds", "2", "--strategy", "random")
    check(rc == 0 and all(f"== {l}" in out for l in logs), f"replay of the family: {rc} {err}")
    rc, out, err = run("replay", fam, "--seeds", "2", "--strategy", "random", "--json")
    doc = json.loads(out) if rc == 0 else {}
    check([d["log"] for d in doc.get("logs", [])] == logs, f"replay --json of the family: {rc} {err}")
    rc, out, err = run("replay", logs[0], "--seeds", "2", "--json")
    check(rc == 0 and json.loads(out)["log"] == logs[0], "one log by its own name, as before")
    rc, out, err = run("trace", fam, "-o", os.path.join(tmp, "fam.trace.json"))
    tr = json.load(open(os.path.join(tmp, "fam.trace.json")))["traceEvents"] if rc == 0 else []
    check(len([t for t in tr if t.get("cat") == "run"]) == 2, f"trace of the family: two runs: {err}")
    rc, out, err = run("replay", os.path.join(tmp, "nothing.jsonl"))
    check(rc == 1 and len(err.strip().splitlines()) == 1 and "no such event log" in err,
          f"replay of a name with no log: {rc} {err!r}")


def test_replay_options(tmp):
    """replay's targets, batches, budget, warm start and export on the exhaustive logs of
    test_replay_family (fusion.dflash at N=48, warm-started from N=24), each figure checked
    against the log itself: the optimum the run confirmed, exhaustive search's evaluations and
    wall time to each target, the success rates, the exported landscape; bad values are one line
    and exit 2."""
    fam = os.path.join(tmp, "fam.jsonl")
    log, other = f"{fam}.fusion.dflash.N48", f"{fam}.fusion.dflash.N24"
    if not (os.path.exists(log) and os.path.exists(other)):
        check(False, "test_replay_family's logs are missing")
        return
    ev = events(log)
    counted = []
    score = landscape_scores(ev, counted)
    cost = {e["candidate"]: e["t"] - e["started"] for e in ev
            if e["event"] in ("measured", "rejected")}
    valid, best = len(score), min(score.values())
    byc = {e["candidate"]: key(e["config"]) for e in ev if e["event"] in ("measured", "rejected")}
    confirmed = {byc[c] for c in counted}
    exp = os.path.join(tmp, "landscape.json")
    rc, out, err = run("replay", log, "--seeds", "3", "--target", "5%,1%", "--batch", "1,4",
                       "--budget", "50%", "--warm", other, "--export", exp, "--json")
    doc = json.loads(out) if rc == 0 else {}
    check(rc == 0, f"replay with every option: {rc} {err}")
    if doc:
        opt_cfg = key(doc["optimum_config"])
        check(doc["optimum_s"] == best and doc["optimum_confirmed"] == (opt_cfg in confirmed) and
              doc["confirmed"] == len(confirmed), f"the confirmed optimum: {doc['optimum_s']}")
        rows = [(s["name"], s["batch"]) for s in doc["strategies"]]
        check(rows == [(n, b) for n in ("exhaustive", "random", "anneal", "evolve", "bayes")
                       for b in (1, 4)], f"a row per strategy and batch size: {rows}")
        check([s["name"] for s in doc["strategies"] if s["default"]] == ["bayes", "bayes"],
              "the default strategy marked")
        budget, quarter = -(-valid // 2), -(-valid // 4)
        check(doc["budget"] == budget and doc["quarter"] == quarter,
              f"budget {doc['budget']}, quarter {doc['quarter']} of {valid}")
        for i, t in enumerate((0.05, 0.01)):
            first = next(c + 1 for c in range(valid) if score[c] <= best * (1 + t))
            tt = doc["targets"][i]
            check(tt["target"] == t and tt["exhaustive_first"] == first and
                  abs(tt["exhaustive_first_s"] - sum(cost[c] for c in range(first))) < 1e-9,
                  f"target {t}: {tt}, want first {first}")
            for s in doc["strategies"]:
                c = s["targets"][i]
                ev_ = c["evaluations"]
                check(len(ev_) == 3 and all(e is None or 1 <= e <= budget for e in ev_) and
                      c["success"] == sum(e is not None for e in ev_) / 3 and
                      c["success_quarter"] == sum(e is not None and e <= quarter for e in ev_) / 3,
                      f"{s['name']} batch {s['batch']} target {t}: {c}")
                if s["name"] == "exhaustive" and s["batch"] == 1 and first <= budget:
                    check(ev_ == [first] * 3 and abs(c["median_time_s"] - tt["exhaustive_first_s"])
                          < 1e-9, f"exhaustive: {c}")
        w = doc.get("warm") or {}
        check(w.get("log") == other and len(w.get("strategies", [])) == 10 and
              1 <= w.get("first_count", 0) <= 3 and w.get("prior", 0) >= 1,
              f"the warm start: {str(w)[:300]}")
    land = json.load(open(exp)) if os.path.exists(exp) else {}
    check(land.get("format") == "flaretune-landscape/1" and land.get("op") == "fusion.dflash" and
          land.get("log") == log and len(land.get("candidates", [])) == valid,
          f"the export: {str(land)[:300]}")
    for c, e in enumerate(land.get("candidates", [])):
        s = score[c]
        check((e["score_s"] is None if s == float("inf") else e["score_s"] == s) and
              abs(e["cost_s"] - cost[c]) < 1e-12, f"exported candidate {c}: {e}")
    if land:
        check(land["optimum_s"] == best and land["confirmed"] == len(confirmed) and
              [p["name"] for p in land["params"]] == list(land["candidates"][0]["config"]),
              f"exported optimum and params: {land['optimum_s']} {land['params']}")
    rc, out, err = run("replay", log, "--seeds", "2", "--target", "5%,1%", "--batch", "1,4")
    check(rc == 0 and "bayes*" in out and "target 1%" in out and "optimum    " in out,
          f"replay's table: {out}")
    kv = os.path.join(tmp, "kv.jsonl")
    rc, out, err = run("tune", "attention.kvproj", "--preset", "tiny.dflare.train", "--backend",
                       "cpu", "--strategy", "exhaustive", "--log", kv, *FAST)
    check(rc == 0, f"tune attention.kvproj: {err}")
    for args, what in ((["--batch", "0"], "--batch"), (["--batch", "1,,4"], "--batch"),
                       (["--target", "5%,x"], "--target"), (["--budget", "0%"], "--budget"),
                       (["--warm", kv], "--warm")):
        rc, out, err = run("replay", log, *args)
        check(rc == 2 and len(err.strip().splitlines()) == 1 and what in err,
              f"replay {' '.join(args)}: {rc} {err!r}")
    rc, out, err = run("replay", fam, "--export", exp)
    check(rc == 2 and len(err.strip().splitlines()) == 1 and "--export" in err,
          f"replay --export of a family: {rc} {err!r}")


def spearman(x, y):
    """Spearman's rank correlation as scripts/gpu-summary.py computes it for a GPU run (Python,
    apart from the C of replay)."""
    path = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "scripts",
                        "gpu-summary.py")
    spec = importlib.util.spec_from_file_location("gpu_summary", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.spearman(x, y)


def landscape_scores(ev, counted=None):
    """Each candidate's score as replay reads a one-run exhaustive log: its median, inf when
    rejected; the configs of the last confirm event take their confirmed medians scaled by the
    round's median ratio of search to confirmed medians (the default, when named only as the
    baseline, slower in the search than every other named config, neither scaled nor counted),
    unless the round is refused (replay's rule, docs/search.md).
    `counted` (a list) gets the candidates confirmed."""
    score, index = {}, {}
    start = next(e for e in ev if e["event"] == "run_start")
    for e in ev:
        if e["event"] == "measured" and e.get("clean", True) and "stopped" not in e:
            score[e["candidate"]] = e["stats"]["median_s"]
        elif e["event"] in ("rejected", "measured"):
            score[e["candidate"]] = float("inf")
        if e["event"] in ("measured", "rejected"):
            index[key(e["config"])] = e["candidate"]
    confirm = [e for e in ev if e["event"] == "confirm" and e.get("clean", True)]
    named = []
    for cfg, st in zip(*(confirm[-1]["configs"], confirm[-1]["stats"]) if confirm else ([], [])):
        c = index.get(key(cfg))
        if c is not None and score[c] != float("inf"):
            named.append((c, st["median_s"]))
    dflt = index.get(key(start["default"]))
    skip = None
    if len(named) > 1 and dflt in [c for c, _ in named]:
        if all(score[c] < score[dflt] for c, _ in named if c != dflt):
            skip = dflt
    ratios = sorted(score[c] / m for c, m in named if c != skip)
    if ratios:
        f = 0.5 * (ratios[(len(ratios) - 1) // 2] + ratios[len(ratios) // 2])
        # refused (replay's read_confirm): ratios spread beyond the gap the round decides, or a
        # rescaled score outside the search's range (give or take the best's confirmed ci_rel)
        meds = sorted((m, i) for i, (c, m) in enumerate(named) if c != skip)
        gap = meds[1][0] / meds[0][0] - 1 if len(meds) > 1 else float("inf")
        sts = confirm[-1]["stats"] if confirm else []
        cis = [st.get("ci_rel", 0) for cfg, st in zip(confirm[-1]["configs"], sts)
               if index.get(key(cfg)) is not None and score[index[key(cfg)]] != float("inf")]
        ci = cis[meds[0][1]] if meds and 0 < cis[meds[0][1]] < 1 else 0
        lo = min(v for v in score.values())
        hi = max(score[c] for c, _ in named if c != skip)
        scaled = [m * f for c, m in named if c != skip]
        if (ratios[-1] / ratios[0] - 1 > gap or min(scaled) < lo * (1 - ci)
                or max(scaled) > hi * (1 + ci)):
            return score
        for c, m in named:
            if c != skip:
                score[c] = m * f
                if counted is not None:
                    counted.append(c)
    return score


def test_replay_predicted(tmp):
    """replay on a log whose candidates carry predicted_s (the exhaustive log of
    test_run_log_profile, each candidate given a made-up prediction): the rank correlation,
    where measuring in predicted order reaches the target, and what each prune factor keeps,
    each as computed here from the same log; a log without predictions has none."""
    src, log = os.path.join(tmp, "a.jsonl"), os.path.join(tmp, "pred.jsonl")
    if not os.path.exists(src):
        check(False, "test_run_log_profile's log is missing")
        return
    pred = lambda c: 1e-6 * (1 + (c * 7) % 13)
    ev = events(src)
    with open(log, "w") as f:
        for e in ev:
            if e["event"] == "run_start":
                e["predict"] = {"device": "h200"}
            if e["event"] in ("verified", "measured", "rejected"):
                e["predicted_s"] = pred(e["candidate"])
            f.write(json.dumps(e) + "\n")
    score = landscape_scores(ev)
    cands = sorted(score)
    default = next(e["candidate"] for e in ev if e["event"] in ("verified", "measured")
                   and e["config"] == ev[0]["default"])
    best = min(score.values())
    target = 0.05
    order = sorted(cands, key=lambda c: (pred(c), c))
    first = next(k + 1 for k, c in enumerate(order) if score[c] <= best * (1 + target))
    finite = [c for c in cands if score[c] != float("inf")]
    rho = spearman([pred(c) for c in finite], [score[c] for c in finite])
    rc, out, err = run("replay", log, "--seeds", "2", "--json", "--prune", "predicted=1.5,4",
                       "--prune", "predicted=100")
    doc = json.loads(out).get("predicted") if rc == 0 else None
    check(doc is not None, f"replay --json of a predicted log: {rc} {err}")
    if doc:
        check(doc["device"] == "h200" and doc["predicted"] == len(cands), f"predicted: {doc}")
        check(abs(doc["rank_correlation"] - rho) < 1e-9 and doc["compared"] == len(finite),
              f"rank correlation {doc['rank_correlation']}, want {rho}")
        check(doc["first_within"] == first, f"predicted order reaches at {doc['first_within']}, want {first}")
        low = min(pred(c) for c in cands)
        for p, f in zip(doc["prune"], (1.5, 4, 100)):
            kept = [c for c in cands if pred(c) <= f * low or c == default]
            kbest = min(score[c] for c in kept)
            check(p["factor"] == f and p["measured"] == len(kept), f"prune {f}: {p}, want {len(kept)}")
            check(p["optimum_kept"] == (kbest == best) and
                  p["within_target_kept"] == (kbest <= best * (1 + target)), f"prune {f}: {p}")
    rc, out, err = run("replay", log, "--seeds", "2")
    check(rc == 0 and "rank correlation with the medians" in out and "predicted=2 " in out,
          f"replay's table: {out}")
    rc, out, err = run("replay", src, "--seeds", "2", "--json")
    check(rc == 0 and json.loads(out)["predicted"] is None, "no prediction in a log without one")
    for bad in ("predicted=1", "predicted=x", "speed=2", "predicted=2,,3"):
        rc, out, err = run("replay", log, "--prune", bad)
        check(rc == 2 and len(err.strip().splitlines()) == 1 and "--prune" in err,
              f"replay --prune {bad}: {rc} {err!r}")


def test_busy_machine(tmp):
    """Other processes keeping the CPUs busy are seen and said: in the output, run_start, run_end
    and the profile entry. (Two spinning processes, whatever else the machine is doing; the
    default threshold, which the suite turns off elsewhere with FLARETUNE_MAX_LOAD.)"""
    log, prof = os.path.join(tmp, "busy.jsonl"), os.path.join(tmp, "busy.json")
    spin = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(2)]
    try:
        time.sleep(0.3)
        rc, out, err = run("tune", "fusion.dflash", "--preset", "tiny.dflare.train", "--backend", "cpu",
                           "--log", log, "--profile", prof, "--budget", "3", *FAST,
                           env={"FLARETUNE_MAX_LOAD": None})
    finally:
        for p in spin:
            p.kill()
            p.wait()
    check(rc == 0, f"tune while busy: {err}")
    ev = events(log)
    start, end = ev[0], ev[-1]
    check(start["load"]["known"] and start["load"]["busy"] and start["load"]["other_cpus"] >= 0.5,
          f"run_start: the load while the ceilings were measured: {start['load']}")
    check(end["contention"]["busy"], f"run_end: contention: {end['contention']}")
    check(all("load" in e for e in ev if e["event"] == "measured"), "every measured event has its load")
    entry = json.load(open(prof))["entries"][0]
    check(entry["contention"]["busy"], "the profile entry says the machine was busy")
    check("machine is busy" in err and "was busy during" in err, f"said in the output: {err!r}")
    check("(busy machine)" in out, f"marked in the summary: {out!r}")


def test_converge_and_warm(tmp):
    """The default strategy (bayes) stops once converged: run_end says why, the summary says
    it, and fewer candidates than the space were measured, the best standing for the patience.
    The profile's winner is measured first (after the default) by the next run at another
    shape, with its threads cut to the cores here if it has more; --cold does not; --warm-log takes another run's medians as the prior and a log that
    gives nothing is one clear line before anything is measured."""
    op, preset = "fusion.dflare", "tiny.dflare.train"
    log, prof = os.path.join(tmp, "cw.jsonl"), os.path.join(tmp, "cw.json")
    rc, out, err = run("tune", op, "--preset", preset, "--backend", "cpu", "--log", log,
                       "--profile", prof, "--patience", "5", *FAST)
    check(rc == 0, f"tune exit {rc}: {err}")
    ev = events(log)
    start, end = ev[0], ev[-1]
    check(start["strategy"] == "bayes", f"the default strategy is bayes: {start['strategy']}")
    measured = [e for e in ev if e["event"] in ("measured", "rejected")]
    check(end.get("search_end") in ("converged", "exhausted"), f"search_end: {end.get('search_end')}")
    if end.get("search_end") == "converged":
        check("search converged after" in err, f"the summary says it converged: {err[-400:]}")
        check(len(measured) < start["space_valid"], "converged before the space was spent")
        # a candidate without a median (stopped by the watchdog on a busy machine) is no best
        meds = [e["stats"]["median_s"] if e["event"] == "measured" and
                e["stats"].get("median_s") is not None else float("inf") for e in measured]
        at = meds.index(min(meds)) + 1
        check(len(meds) - at >= max(5, at), f"the best (at {at}) stood its patience: {len(meds)}")
    rc, out, err = run("tune", op, "--preset", preset, "--backend", "cpu", "--log", log,
                       "--converge", "bogus", *FAST)
    check(rc == 2 and "--converge expects" in err and len(err.strip().splitlines()) == 1,
          f"bad --converge: {rc} {err}")
    # the profile's winner, made a measured candidate other than the default (the test needs
    # one the warm start measures before anything else)
    pj = json.load(open(prof))
    dflt = key(start["default"])
    other = [e["config"] for e in measured if e["event"] == "measured" and key(e["config"]) != dflt]
    pj["entries"][0]["config"] = other[0]
    with open(prof, "w") as f:
        json.dump(pj, f)
    winner = key(other[0])

    # another shape, the same profile: its winner right after the default
    log2 = os.path.join(tmp, "cw2.jsonl")
    rc, out, err = run("tune", op, "--preset", preset, "--set", "N=40", "--backend", "cpu",
                       "--log", log2, "--profile", prof, "--budget", "3", *FAST)
    check(rc == 0, f"warm tune exit {rc}: {err}")
    ev2 = events(log2)
    warm = [e for e in ev2 if e["event"] == "warm"]
    check(len(warm) == 1 and key(warm[0]["first"][0]["config"]) == winner
          and warm[0]["first"][0]["exact_shape"] is False,
          f"the warm event names the profile's winner at the nearest shape: {warm}")
    order = [key(e["config"]) for e in ev2 if e["event"] in ("measured", "rejected")]
    first = [c for c in order if c != dflt][:1]
    check(first == [winner], f"the profile's winner is measured first: {order[:3]} vs {winner}")
    check("warm start: measuring first" in err, f"progress says the warm start: {err[:600]}")

    # a winner tuned on a machine with more cores than this one: taken as exec runs it, with
    # the cores there are (the space's most threads), and still measured first
    sp = json.loads(run("space", op, "--backend", "cpu", "--preset", preset, "--json")[1])
    most = max(next(p["values"] for p in sp["params"] if p["name"] == "threads"))
    pj["entries"][0]["config"] = dict(other[0], threads=most + 62)
    with open(prof, "w") as f:
        json.dump(pj, f)
    log5 = os.path.join(tmp, "cw5.jsonl")
    rc, out, err = run("tune", op, "--preset", preset, "--set", "N=40", "--backend", "cpu",
                       "--log", log5, "--profile", prof, "--budget", "3", *FAST)
    warm = [e for e in events(log5) if e["event"] == "warm"]
    clamped = key(dict(other[0], threads=most))
    check(rc == 0 and len(warm) == 1 and key(warm[0]["first"][0]["config"]) == clamped,
          f"a winner with threads={most + 62} is warm-started on {most}: {rc} {warm} {err[-300:]}")

    log3 = os.path.join(tmp, "cw3.jsonl")
    rc, out, err = run("tune", op, "--preset", preset, "--set", "N=40", "--backend", "cpu",
                       "--log", log3, "--profile", prof, "--budget", "2", "--cold", *FAST)
    check(rc == 0 and not any(e["event"] == "warm" for e in events(log3)),
          f"--cold: no warm start ({rc})")

    log4 = os.path.join(tmp, "cw4.jsonl")
    rc, out, err = run("tune", op, "--preset", preset, "--set", "N=40", "--backend", "cpu",
                       "--log", log4, "--warm-log", log, "--budget", "3", "--cold", *FAST)
    w = [e for e in events(log4) if e["event"] == "warm"]
    # fully measured: a median, not screened (one the watchdog stopped on a busy machine has none)
    full = {key(e["config"]) for e in measured if e["event"] == "measured"
            and not e.get("screened") and ((e.get("stats") or {}).get("median_s") or 0) > 0}
    check(rc == 0 and len(w) == 1 and w[0]["prior"] == len(full),
          f"--warm-log: the prior holds the log's {len(full)} fully measured candidates: {w} {rc} {err}")
    rc, out, err = run("tune", op, "--preset", preset, "--backend", "cpu", "--warm-log",
                       os.path.join(tmp, "nope.jsonl"), *FAST)
    check(rc != 0 and "warm start:" in err and len(err.strip().splitlines()) == 1
          and not os.path.exists(os.path.join(tmp, "nope.jsonl")),
          f"--warm-log of a missing file: one line: {rc} {err}")


def main():
    global FT
    ap = argparse.ArgumentParser()
    ap.add_argument("--flaretune", required=True)
    FT = ap.parse_args().flaretune
    with tempfile.TemporaryDirectory() as tmp:
        for t in (test_run_log_profile, test_kill_and_resume, test_budget_counts_resumed,
                  test_candidate_timeout, test_ctrl_c,
                  test_refusals,
                  test_sweep_and_all, test_torn_log, test_log_lock, test_resume_untrusted,
                  test_fail_fast, test_save_fails_at_end, test_progress_counts, test_replay_family,
                  test_replay_options, test_replay_predicted, test_busy_machine,
                  test_converge_and_warm, test_winner_roof_counts_scratch):
            n = len(FAILURES)
            t0 = time.time()
            t(tmp)
            print(f"{t.__name__:32s} {'ok' if len(FAILURES) == n else 'FAILED'} "
                  f"({time.time() - t0:.1f}s)", file=sys.stderr)
    print(f"{len(FAILURES)} failures", file=sys.stderr)
    return 1 if FAILURES else 0


if __name__ == "__main__":
    sys.exit(main())
