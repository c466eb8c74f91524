#!/usr/bin/env python3
"""test_tui_e2e.py: the dashboard end to end, in a real pseudo-terminal (tmux), asserting on the
screen: `top` follows a log the test appends to (rows appear as events arrive, a torn line is
completed later, a second run adds a row; truncated or replaced, the log's old run goes; a named pipe;
a tuner killed with SIGKILL shows as stopped, not running), selection, detail, help, sort and filter work, resizes
keep a valid layout, q restores the terminal (alternate screen off, the same stty modes, the shell
prompt back); 80x24 and 40x10 terminals; `tune --tui` on a tiny preset (finishes, pauses and
resumes, q and Ctrl-C stop it with 130, a failing tuner shows its error); `tune --t1 --tui` on
the hand-written T1 kernel (a row t1:saxpy_tiled that finishes with its rejections counted, q
exits 0 with the summary); `watch` on a profile made by `tune --profile` (with a long
--interval, the first step shows at once and q and Ctrl-C end it without waiting the interval
out); NO_COLOR, vt100 and a C locale; the ranks of a distributed run (a synthetic log); a run
on a busy machine (a synthetic log: the status bar's warning, the marks, nothing unclean
ranked); names with control characters (drawn as spaces); mistakes on the command line.

Every tmux server runs on a private socket (tmux -L), so a user's sessions are never touched.
Exits 77 when tmux is missing.

usage: test_tui_e2e.py --flaretune PATH
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

FT = None
FAILURES = []
FAST = ["--max-time", "0.05", "--noise", "0.2", "--confirm", "2"]
# Candidates that take a while each (a run long enough to pause and stop).
SLOW = ["--max-time", "0.3", "--noise", "0.001", "--no-screen", "--confirm", "2"]
TIMEOUT = 60  # seconds to wait for a screen: the machine may be busy


def check(cond, what, screen=None):
    if not cond:
        FAILURES.append(what)
        print("FAIL:", what, file=sys.stderr)
        if screen is not None:
            print("---- screen ----\n" + screen + "\n----------------", file=sys.stderr)
    return cond


class Pane:
    """A tmux server of its own with one shell in a pane of the given size."""

    def __init__(self, name, width, height, env=None):
        self.sock = "ft-tui-e2e-%d-%s" % (os.getpid(), name)
        self.width, self.height = width, height
        env_args = ["TERM=xterm-256color", "PS1=$ ", "LANG=C.UTF-8", "LC_ALL="]
        env_args += ["%s=%s" % kv for kv in (env or {}).items()]
        self.tmux("new-session", "-d", "-s", "main", "-x", str(width), "-y", str(height),
                  "env", *env_args, "sh")
        self.socket_path = self.tmux("display", "-p", "#{socket_path}").strip()
        self.wait_for(r"\$ ?$", "the shell prompt")

    def tmux(self, *args):
        p = subprocess.run(["tmux", "-L", self.sock, "-f", "/dev/null", *args],
                           capture_output=True, text=True, timeout=30)
        return p.stdout

    def screen(self, escapes=False, joined=False):
        opts = (["-e"] if escapes else []) + (["-J"] if joined else [])
        return self.tmux("capture-pane", "-p", *opts, "-t", "main")

    def lines(self):
        return self.screen().split("\n")[: self.height]

    def keys(self, *keys):
        self.tmux("send-keys", "-t", "main", *keys)

    def type(self, text):
        self.tmux("send-keys", "-t", "main", "-l", text)

    def run(self, cmd):
        self.type(cmd)
        self.keys("Enter")

    def alternate(self):
        return self.tmux("display", "-p", "-t", "main", "#{alternate_on}").strip() == "1"

    def resize(self, width, height):
        self.width, self.height = width, height
        self.tmux("resize-window", "-t", "main", "-x", str(width), "-y", str(height))

    def wait_for(self, pattern, what, timeout=TIMEOUT, gone=False):
        """Wait until the screen matches (or, with gone, no longer matches) a regex."""
        deadline = time.time() + timeout
        s = ""
        while time.time() < deadline:
            s = self.screen()
            found = re.search(pattern, s, re.M) is not None
            if found != gone:
                return s
            time.sleep(0.1)
        check(False, "timed out waiting for %s (%r%s)" % (what, pattern, " to go" if gone else ""), s)
        return None

    def close(self):
        subprocess.run(["tmux", "-L", self.sock, "kill-server"], capture_output=True)
        if self.socket_path.endswith(self.sock) and os.path.exists(self.socket_path):
            os.unlink(self.socket_path)  # tmux leaves it behind

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def row_line(screen, op):
    for line in screen.split("\n"):
        if re.match(r"^[> ][ !]%s\b" % re.escape(op), line):
            return line
    return None


def assert_layout(p, what):
    """Every line fits the pane; the status bar is the last line; the table header is on top."""
    s = p.screen()
    lines = s.split("\n")[: p.height]
    ok = all(len(l) <= p.width for l in lines)
    ok &= len(lines) == p.height
    ok &= re.search(r"\bop\b", lines[0]) is not None
    ok &= re.search(r"(running|ended|stopped|finished|PAUSED|waiting|error)", lines[-1]) is not None
    check(ok, "%s: a valid layout at %dx%d" % (what, p.width, p.height), s)
    return s


def quit_and_check_restored(p, want_exit, what):
    p.keys("q")
    s = p.wait_for(r"^EXIT=\d+", what + ": the program exits")
    if s is None:
        return None
    m = re.search(r"^EXIT=(\d+)", s, re.M)
    check(m and int(m.group(1)) == want_exit, "%s: exit %s, want %d" % (what, m and m.group(1), want_exit), s)
    check(not p.alternate(), what + ": the alternate screen is left")
    p.run("stty -g | cmp -s - $STTY0 && echo TTY=same || echo TTY=changed")
    s = p.wait_for(r"^TTY=\w+", what + ": stty")
    check(s is not None and "TTY=same" in s, what + ": the terminal modes are restored", s)
    return s


def launch(p, cmd, tmp):
    """Run cmd in the pane's shell, remembering the terminal's modes first."""
    p.run("STTY0=%s/stty.$$; stty -g > $STTY0; clear" % tmp)
    p.run("%s; echo EXIT=$?" % cmd)


def prepare(tmp):
    """Two real runs (their events feed `top`) and a profile of their winners (for `watch`)."""
    logs, prof = {}, os.path.join(tmp, "prof.json")
    for op, extra in (("fusion.dflash", []), ("loss", ["--budget", "4"])):
        log = os.path.join(tmp, "src.%s.jsonl" % op)
        p = subprocess.run([FT, "tune", op, "--preset", "tiny.dflare.train", "--backend", "cpu",
                            "--log", log, "--profile", prof, "--quiet", *FAST, *extra],
                           capture_output=True, text=True, timeout=600)
        if p.returncode != 0:
            print("setup: tune %s failed: %s" % (op, p.stderr), file=sys.stderr)
            sys.exit(1)
        with open(log) as f:
            logs[op] = f.readlines()
    return logs, prof


def append(path, text):
    with open(path, "a") as f:
        f.write(text)
        f.flush()


def test_top_follow(tmp, logs):
    log = os.path.join(tmp, "follow.jsonl")
    with Pane("top", 80, 24) as p:
        launch(p, "%s top %s" % (FT, log), tmp)
        p.wait_for(r"waiting for the log", "top waits for a log that does not exist yet")
        check(p.alternate(), "the dashboard uses the alternate screen")
        a = logs["fusion.dflash"]
        n = json.loads(a[0])["space_valid"]
        append(log, a[0])
        s = p.wait_for(r"^>[ !]fusion\.dflash", "a row when run_start arrives")
        line = row_line(s or "", "fusion.dflash")
        check(line is not None and " 0/%d " % n in line, "nothing done yet: %r" % line, s)
        # Candidates arrive one by one; the count follows.
        cands = [i for i, l in enumerate(a) if '"event":"measured"' in l or '"event":"rejected"' in l]
        append(log, "".join(a[1:cands[1] + 1]))
        s = p.wait_for(r"^>[ !]fusion\.dflash .* 2/%d " % n, "two candidates done")
        # A torn line: nothing moves until it is completed.
        nxt = a[cands[1] + 1:cands[2] + 1]
        text = "".join(nxt)
        half = len(text) - 40
        append(log, text[:half])
        time.sleep(1.0)
        s = p.screen()
        check(" 2/%d " % n in (row_line(s, "fusion.dflash") or ""), "a torn line is not an event yet", s)
        append(log, text[half:])
        p.wait_for(r"^>[ !]fusion\.dflash .* 3/%d " % n, "the torn line completed")
        append(log, "".join(a[cands[2] + 1:]))
        s = p.wait_for(r"^>[ !]fusion\.dflash .* %d/%d " % (n, n), "the whole run")
        s = p.wait_for(r"\bended\b", "the run ended")
        check(re.search(r"latency fusion\.dflash", s or "") is not None, "the plot of the selected kernel", s)
        check(re.search(r"[*+]", "\n".join((s or "").split("\n")[3:20])) is not None, "trials plotted", s)
        # A second run in the same file: a new row.
        append(log, "".join(logs["loss"]))
        s = p.wait_for(r"^ [ !]loss .* 4/\d+ ", "a second run, a second row")
        # Selection.
        p.keys("j")
        s = p.wait_for(r"^>[ !]loss", "j selects the next row")
        check(re.search(r"latency loss", s or "") is not None, "the plot follows the selection", s)
        p.keys("Up")
        p.wait_for(r"^>[ !]fusion\.dflash", "up arrow selects back")
        # Detail.
        p.keys("Enter")
        s = p.wait_for(r"top configs", "Enter opens the detail pane")
        check(re.search(r"fusion\.dflash \(done\)", s or "") and re.search(r"best \d", s or ""),
              "the detail names the kernel, its state and its best", s)
        check(re.search(r"^  (par|chunk|threads)=", s or "", re.M) is not None, "the best config's parameters", s)
        check(re.search(r"^1 ", s or "", re.M) is not None, "ranked configs", s)
        p.keys("Enter")
        p.wait_for(r"top configs", "Enter closes it", gone=True)
        # Help.
        p.keys("?")
        s = p.wait_for(r"cycle the sort order", "? shows the help")
        # The help box is drawn with one set of line characters: box corners, not '+'.
        check(re.search("\u250c\u2500{20,}\u2510", s or "") and
              re.search("\u2514\u2500{20,}\u2518", s or "") and
              not re.search("\\+\u2500|\u2500\\+", s or ""),
              "the help box's corners are box corners", s)
        p.keys("x")
        p.wait_for(r"cycle the sort order", "any key closes the help", gone=True)
        # Sort: fastest first puts the faster kernel on top.
        p.keys("s", "s")
        s = p.wait_for(r"sort fastest", "s cycles the sort")
        # Filter by op.
        p.keys("/")
        p.wait_for(r"filter by op:", "/ asks for a filter")
        p.type("loss")
        p.keys("Enter")
        s = p.wait_for(r"filter 'loss'", "the filter applies")
        check(s and row_line(s, "loss") and not row_line(s, "fusion.dflash"), "only matching rows", s)
        # / starts a new filter: / then Enter clears it.
        p.keys("/")
        s = p.wait_for(r"filter by op: _", "/ opens an empty prompt")
        p.keys("Enter")
        s = p.wait_for(r"^[ >][ !]fusion\.dflash", "/ Enter shows every row again")
        check(s and "filter 'loss'" not in s, "the filter is cleared", s)
        # Resizes keep a valid layout.
        assert_layout(p, "80x24")
        p.resize(40, 10)
        time.sleep(0.8)
        s = assert_layout(p, "shrunk")
        p.keys("Enter")
        time.sleep(0.5)
        assert_layout(p, "shrunk with the detail")
        p.resize(120, 40)
        s = p.wait_for(r"latency", "the detail beside the plot at 120x40")
        check(s and re.search(r"latency", s) and re.search(r"top configs", s),
              "plot and detail side by side", s)
        assert_layout(p, "grown")
        p.keys("Enter")
        p.resize(80, 24)
        time.sleep(0.5)
        assert_layout(p, "back to 80x24")
        quit_and_check_restored(p, 0, "top")
        p.run("echo alive")
        p.wait_for(r"^alive", "the shell works after the dashboard")


def test_top_follows_tune_all(tmp):
    """`top LOG` while `tune all --log LOG` writes LOG.OP, one log per op: a row for every op."""
    log = os.path.join(tmp, "all.jsonl")
    p = Pane("topall", 100, 30)
    tuner = None
    try:
        launch(p, "%s top %s" % (FT, log), tmp)
        p.wait_for(r"waiting for the log", "top waits before the first op's log exists")
        tuner = subprocess.Popen([FT, "tune", "all", "--preset", "tiny.dflare.train", "--backend",
                                  "cpu", "--log", log, "--budget", "2", "--quiet", *FAST],
                                 stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        s = p.wait_for(r"^[> ][ !]fusion\.dflare", "the first op's log is followed")
        s = p.wait_for(r"^[> ][ !]loss .* 2/2 ", "the last op's log too, as it appears", timeout=180)
        for op in ("fusion.dflash", "attention.kvproj", "attention.decode", "attention.train"):
            check(re.search(r"^[> ][ !]%s " % re.escape(op), s or "", re.M) is not None,
                  "a row for %s" % op, s)
        err = tuner.communicate(timeout=120)[1]
        check(tuner.returncode == 0, "tune all: exit %s: %s" % (tuner.returncode, err))
        tuner = None
        p.wait_for(r"\bended\b", "every run ended")
        p.keys("q")
        p.wait_for(r"EXIT=0", "top quits with 0")
    finally:
        if tuner:
            tuner.kill()
        p.close()


def status_line(s):
    lines = (s or "").rstrip("\n").split("\n")
    return lines[-1] if lines else ""


def test_top_writer_killed(tmp):
    """`top LOG` while a tuner writes LOG: the tuner killed (SIGKILL: no run_end), its lock on
    LOG.lock goes with it and the run shows as stopped, its writer gone, not running; a tuner
    resuming the log makes it run again, and its end ends it."""
    log = os.path.join(tmp, "killed.jsonl")
    tune = [FT, "tune", "fusion.dflare", "--preset", "tiny.dflare.train", "--backend", "cpu",
            "--log", log, "--quiet", *SLOW]
    with Pane("killed", 120, 30) as p:
        launch(p, "%s top %s" % (FT, log), tmp)
        # A budget it will not reach before it is killed; the resumed run's is short.
        tuner = subprocess.Popen(tune + ["--budget", "40"], stdout=subprocess.DEVNULL,
                                 stderr=subprocess.DEVNULL)
        try:
            s = p.wait_for(r"^>[ !]fusion\.dflare .* [1-5]/40 ", "the tuner under way", timeout=180)
            check(s is not None and status_line(s).lstrip().startswith("running"),
                  "running while the tuner runs", s)
        finally:
            tuner.kill()  # SIGKILL
            tuner.wait()
        with open(log) as f:
            check('"event":"run_end"' not in f.read(), "the killed tuner wrote no run_end")
        s = p.wait_for(r"^ stopped .*the writer is gone: no run_end", "the run shown stopped")
        check(s is not None and "running" not in status_line(s), "not running: %r" %
              status_line(s), s)
        check(s is not None and "ETA" not in status_line(s), "no ETA for a stopped run", s)
        p.keys("Enter")
        s = p.wait_for(r"fusion\.dflare \(stopped: writer gone\)", "the detail says so")
        p.keys("Enter")
        # A tuner resumes the log: its run runs, then ends.
        tuner = subprocess.Popen(tune + ["--budget", "12"], stdout=subprocess.DEVNULL,
                                 stderr=subprocess.PIPE, text=True)
        try:
            p.wait_for(r"^ running ", "running again when a tuner resumes the log", timeout=180)
            err = tuner.communicate(timeout=300)[1]
            check(tuner.returncode == 0, "the resumed tune: exit %s: %s" % (tuner.returncode, err))
        finally:
            if tuner.returncode is None:
                tuner.kill()
                tuner.wait()
        s = p.wait_for(r"^ ended ", "the resumed run ended")
        check(s is not None and "writer is gone" not in s, "nothing said of a gone writer", s)
        p.keys("q")
        p.wait_for(r"^EXIT=0", "top quits")


def test_small_terminals(tmp, logs):
    log = os.path.join(tmp, "finished.jsonl")
    with open(log, "w") as f:
        f.write("".join(logs["fusion.dflash"]) + "".join(logs["loss"]))
    for w, h in ((40, 10), (24, 6)):
        with Pane("small%dx%d" % (w, h), w, h) as p:
            launch(p, "%s top %s" % (FT, log), tmp)
            s = p.wait_for(r"^[> ][ !]loss", "%dx%d: the rows of a finished log" % (w, h))
            if w >= 40:
                assert_layout(p, "%dx%d" % (w, h))
                check(re.search(r"^[> ][ !]fusion\.dflash", s or "", re.M), "both runs shown", s)
            for k in ("Enter", "?", "x", "j", "Enter", "s", "/"):
                p.keys(k)
                time.sleep(0.15)
            p.keys("Escape")
            time.sleep(0.5)
            s = p.screen()
            check(all(len(l) <= w for l in s.split("\n")), "%dx%d: nothing outside the screen" % (w, h), s)
            quit_and_check_restored(p, 0, "top at %dx%d" % (w, h))


def test_top_reopened(tmp, logs):
    """A followed log truncated (`: > LOG`) and another run written into it, then replaced by
    another file (`mv`), then rotated (`mv LOG LOG.1` and a new LOG): each time the log is read
    again from the start and the old run's row goes."""
    log = os.path.join(tmp, "reopened.jsonl")
    with open(log, "w") as f:
        f.write("".join(logs["fusion.dflash"]))
    with Pane("reopen", 200, 24) as p:  # wide: the status bar keeps its notice
        launch(p, "%s top %s" % (FT, log), tmp)
        p.wait_for(r"\bended\b", "the first run shown")
        open(log, "w").close()
        time.sleep(0.5)
        append(log, "".join(logs["loss"]))
        s = p.wait_for(r"^>[ !]loss ", "the new run after the truncation") or ""
        check(row_line(s, "fusion.dflash") is None, "truncated: the old run's row is gone", s)
        check("log truncated" in s, "truncated: the status bar says so", s)
        new = log + ".new"
        with open(new, "w") as f:
            f.write("".join(logs["fusion.dflash"]))
        os.rename(new, log)
        s = p.wait_for(r"^>[ !]fusion\.dflash ", "the run of the file moved over the log") or ""
        check(row_line(s, "loss") is None, "replaced: the old run's row is gone", s)
        check("log replaced" in s, "replaced: the status bar says so", s)
        # Rotated (`mv LOG LOG.1`, a new LOG): LOG.1 is no log of a `tune all`, its run goes.
        os.rename(log, log + ".1")
        time.sleep(0.5)
        append(log, "".join(logs["loss"]))
        s = p.wait_for(r"^>[ !]loss ", "the new run after the rotation") or ""
        time.sleep(1.5)  # past the next scans of the folder
        s = p.screen()
        check(row_line(s, "loss") is not None and row_line(s, "fusion.dflash") is None,
              "rotated: the old run's row is gone", s)
        p.keys("q")
        p.wait_for(r"^EXIT=0", "top quits")


def test_top_fifo(tmp, logs):
    """`top` on a named pipe: the screen comes before anything writes into it, and the events
    written into it make the run's row."""
    fifo = os.path.join(tmp, "ff")
    os.mkfifo(fifo)
    with Pane("fifo", 80, 24) as p:
        launch(p, "%s top %s" % (FT, fifo), tmp)
        p.wait_for(r"waiting for events", "the dashboard is drawn before a writer opens the pipe")
        a = logs["fusion.dflash"]
        n = json.loads(a[0])["space_valid"]
        with open(fifo, "w") as f:  # top holds the pipe open: this does not block
            f.write("".join(a))
        s = p.wait_for(r"^>[ !]fusion\.dflash .* %d/%d " % (n, n), "the run read from the pipe")
        p.wait_for(r"\bended\b", "the run ended")
        p.keys("q")
        p.wait_for(r"^EXIT=0", "top quits")


def distributed_log(path):
    """A synthetic log of a run distributed over three ranks on two hosts (as `mpirun -np 3
    flaretune tune ...` writes it: every candidate event names its rank, host and device, the
    same device on every rank)."""
    t0 = 1700000000.0
    dev = "cuda: NVIDIA H200 (sm_90, 132 SMs, 60 MiB L2, 140 GiB, driver 12.8, runtime 12.8)"
    evs = [{"event": "run_start", "run": "dist1", "t": t0, "format": 1, "op": "fusion.dflash",
            "backend": "cuda", "preset": "tiny.dflare.train", "dims": {"N": 48, "T": 4, "H": 64},
            "strategy": "exhaustive", "space_valid": 12, "resumed": 0, "resumed_rejected": 0,
            "budget": 0, "time_budget_s": 0, "device": dev, "default": {"k": 0}}]
    hosts = ["nodeA", "nodeA", "nodeB"]
    for i in range(12):
        rank, host = i % 3, hosts[i % 3]
        started, t = t0 + 1 + i, t0 + 2 + i
        kind = "rejected" if i == 4 else "measured"
        ev = {"event": kind, "run": "dist1", "t": t, "started": started, "candidate": i,
              "config": {"k": i}, "rank": rank, "host": host, "device": dev}
        if kind == "measured":
            med = (10 + i) * 1e-6
            ev["stats"] = {"median_s": med, "q1_s": med, "q3_s": med, "iqr_s": 0, "samples": 9}
        else:
            ev.update(reason="verify", message="outputs disagree")
        evs.append(ev)
    evs.append({"event": "run_end", "run": "dist1", "t": t0 + 15, "winner": {"k": 0},
                "stats": {"median_s": 10e-6}, "tie": [], "interrupted": False})
    with open(path, "w") as f:
        f.write("".join(json.dumps(e) + "\n" for e in evs))


def top_plain_log(p, tmp, logs, name, what):
    """`top` in p on a log (name, in tmp) of a plain run of loss: no ranks, nothing busy. The
    screen once the run shows as ended (None, after a failed check, when it does not)."""
    plain = os.path.join(tmp, name)
    with open(plain, "w") as f:
        f.write("".join(logs["loss"]))
    launch(p, "%s top %s" % (FT, plain), tmp)
    return p.wait_for(r"\bended\b", what)


def test_top_ranks(tmp, logs):
    """`top` on the log of a distributed run shows its ranks; a log without ranks does not."""
    log = os.path.join(tmp, "dist.jsonl")
    distributed_log(log)
    with Pane("ranks", 80, 24) as p:
        launch(p, "%s top %s" % (FT, log), tmp)
        s = p.wait_for(r"^ +rank +host +device +measured +rej +cand/min", "the ranks pane") or ""
        # Each rank evaluates every third candidate, one a second: 4 in 10 s, 24 a minute
        # (rank 1's fourth is rejected).
        check(re.search(r"^ +0 nodeA +cuda: NVIDIA H200 +4 +0 +24\.0$", s, re.M), "rank 0", s)
        check(re.search(r"^ +1 nodeA +cuda: NVIDIA H200 +3 +1 +18\.0$", s, re.M),
              "rank 1: a rejection", s)
        check(re.search(r"^ +2 nodeB +cuda: NVIDIA H200 +4 +0 +24\.0$", s, re.M),
              "rank 2 on the other host", s)
        check(re.search(r"\b3 ranks\b", s.split("\n")[23] if s else ""), "the status bar", s)
        check(re.search(r"latency fusion\.dflash", s), "the plot still below", s)
        assert_layout(p, "ranks")
        quit_and_check_restored(p, 0, "top of a distributed run")
        s = top_plain_log(p, tmp, logs, "plain.jsonl", "a log without ranks")
        check(s and not re.search(r"rank +host|ranks\b", s), "no ranks pane without ranks", s)
        p.keys("q")
        p.wait_for(r"^EXIT=0", "top quits")


def busy_log(path):
    """A synthetic log of a run on a busy machine, as the scheduler leaves it (docs/events.md):
    the default and two other candidates not measured cleanly (one of them faster than the
    winner), one stopped by the watchdog, a confirmation the scheduler spoiled, and run_end
    withholding the speedup."""
    t0 = 1700000000.0
    evs = [{"event": "run_start", "run": "busy1", "t": t0, "format": 1, "op": "fusion.dflash",
            "backend": "cpu", "preset": "tiny.dflare.train", "dims": {"N": 48, "T": 4, "H": 64},
            "strategy": "exhaustive", "space_valid": 8, "resumed": 0, "resumed_rejected": 0,
            "budget": 0, "time_budget_s": 0, "device": "cpu: test", "default": {"k": 0}}]
    unclean, stopped = (0, 3, 5), 6
    for i in range(8):
        clean = i not in unclean
        med = (10 + i) * 1e-6 if clean else (i + 1) * 1e-3
        if i == 5:
            med = 2e-6  # an upper bound below the winner: still never the best
        disc = 2 if clean else 40
        st = {"median_s": med, "q1_s": med, "q3_s": med, "iqr_s": 0,
              "samples": 48 if clean else 50, "discarded": disc, "taken": 50, "clean": clean}
        ev = {"event": "measured", "run": "busy1", "t": t0 + 1 + i, "started": t0 + i,
              "candidate": i, "config": {"k": i}, "stats": st, "screened": False, "clean": clean}
        if i == stopped:
            ev["stopped"] = {"after_s": 0.5, "limit_s": 0.2}
        evs.append(ev)
    evs.append({"event": "confirm", "run": "busy1", "t": t0 + 10, "clean": False, "used": "search",
                "started": t0 + 9, "configs": [{"k": 1}, {"k": 0}],
                "stats": [{"median_s": 9e-6, "samples": 3, "discarded": 7, "taken": 10,
                           "clean": False},
                          {"median_s": 1e-3, "samples": 2, "discarded": 8, "taken": 10,
                           "clean": False}]})
    evs.append({"event": "run_end", "run": "busy1", "t": t0 + 11, "winner": {"k": 1},
                "stats": {"median_s": 11e-6}, "default_stats": {"median_s": 1e-3, "clean": False},
                "speedup": None,
                "speedup_withheld": "the default was not measured cleanly (busy machine)",
                "tie": [], "interrupted": False,
                "contention": {"busy": True, "busy_candidates": 5, "samples_discarded": 148,
                               "samples_taken": 400, "unclean": 3, "stopped": 1}})
    with open(path, "w") as f:
        f.write("".join(json.dumps(e) + "\n" for e in evs))


def test_top_busy(tmp, logs):
    """`top` on the log of a run the scheduler spoiled warns in the status bar, marks the run and
    its candidates, ranks none of them; a clean log shows none of it."""
    log = os.path.join(tmp, "busy.jsonl")
    busy_log(log)
    with Pane("busy", 80, 40) as p:
        launch(p, "%s top %s" % (FT, log), tmp)
        s = p.wait_for(r"\bended\b", "the busy run ended") or ""
        lines = s.split("\n")
        check(re.search(r"BUSY: 37% of samples discarded, 3 not measured cleanly, 1 stopped",
                        lines[39] if len(lines) > 39 else ""), "the status bar warns", s)
        line = next((l for l in lines if l.startswith(">!fusion.dflash")), None)
        check(line is not None, "the run is marked beside its op", s)
        # The winner's 11 us is the best; neither the unclean 2 us nor a default that was not
        # measured cleanly make a figure.
        check(line and re.search(r" 11\.00 [µu]s +- +- +0\s*$", line), "best, no default, no speedup: %r"
              % line, s)
        check(re.search(r"(?m)^.{8}[│|].*!", s), "an unclean trial plotted as '!'", s)
        p.keys("Enter")
        s = p.wait_for(r"not ranked", "the detail lists the candidates not ranked") or ""
        check("no speedup: the default was not measured cleanly (busy machine)" in s,
              "the detail says why there is no speedup", s)
        check(re.search(r"(?m)^not clean +2\.000 [µu]s  k=5$", s) and
              re.search(r"(?m)^not clean +1\.000 ms  k=0$", s), "unclean candidates listed", s)
        check(re.search(r"(?m)^stopped +>500\.0 ms  k=6$", s), "the stopped candidate listed", s)
        top = s[s.find("top configs"):s.find("not ranked")]
        check("k=5" not in top and "k=0" not in top and "k=6" not in top,
              "none of them among the top configs", s)
        assert_layout(p, "busy")
        quit_and_check_restored(p, 0, "top of a busy run")
        s = top_plain_log(p, tmp, logs, "plain-busy.jsonl", "a clean log") or ""
        check(not re.search(r"BUSY|samples discarded|not measured cleanly", s),
              "a clean log: no warning", s)
        check(not re.search(r"(?m)^[> ]!", s), "a clean log: no mark", s)
        p.keys("Enter")
        s = p.wait_for(r"top configs", "the clean run's detail") or ""
        # (The watchdog may have stopped a candidate of a real run: that is no busy machine.)
        check("not clean" not in s, "a clean log: no candidate not clean", s)
        p.keys("q")
        p.wait_for(r"^EXIT=0", "top quits")


def test_top_control_characters(tmp):
    """Names in a log with line breaks, tabs, backspaces and escapes (an op, a device, a
    strategy, a config's labels): every one drawn as a space, in the table, the plot's title,
    the detail pane's title and top configs, and the status bar; the layout stays whole."""
    log = os.path.join(tmp, "control.jsonl")
    t0 = 1700000000.0
    evs = [{"event": "run_start", "run": "ctl1", "t": t0, "format": 1, "op": "op\nA\rB\tC\bD\x1bE",
            "backend": "cpu", "preset": "tiny", "dims": {"N": 48}, "strategy": "ex\nh",
            "space_valid": 4, "resumed": 0, "resumed_rejected": 0, "budget": 0,
            "time_budget_s": 0, "device": "cpu:\nX\tY\x1b[31mZ", "default": {"k": "0"}}]
    for i in range(3):
        st = {"median_s": (10 + i) * 1e-6, "q1_s": 1e-5, "q3_s": 1e-5, "iqr_s": 0, "samples": 5}
        evs.append({"event": "measured", "run": "ctl1", "t": t0 + 1 + i, "started": t0 + i,
                    "candidate": i, "config": {"k\tey": "a\nb\rc\bd\x1b%d" % i},
                    "stats": st, "screened": False})
    with open(log, "w") as f:
        f.write("".join(json.dumps(e) + "\n" for e in evs))
    with Pane("control", 80, 24) as p:
        launch(p, "%s top %s" % (FT, log), tmp)
        s = p.wait_for(r"3/4", "the run with control characters shown") or ""
        lines = s.split("\n")
        check(len(lines) > 1 and lines[1].startswith("> op A B C D E "),
              "the op in the table, on its own row: %r" % (lines[1:3],), s)
        check(re.search(r"latency op A B C D E  N=48", s), "the plot's title", s)
        check(re.search(r"cpu: X Y \[31mZ", lines[23] if len(lines) > 23 else ""),
              "the device in the status bar", s)
        check("^" not in s, "no control character drawn as ^X", s)
        assert_layout(p, "control characters")
        p.keys("Enter")
        s = p.wait_for(r"top configs", "the detail pane") or ""
        check(re.search(r"op A B C D E \(running\)", s), "the detail pane's title", s)
        check(re.search(r"(?m)^1 +10\.00 [µu]s .* k ey=a b c d 0$", s),
              "the best config in the top configs, on one line", s)
        check(re.search(r"(?m)^3 .* k ey=a b c d 2$", s), "the third config too", s)
        check("^" not in s, "no control character drawn as ^X in the detail", s)
        assert_layout(p, "control characters, detail")
        p.keys("q")
        p.wait_for(r"^EXIT=0", "top quits")


def count_candidates(path):
    try:
        with open(path) as f:
            return sum(1 for l in f if '"event":"measured"' in l or '"event":"rejected"' in l)
    except FileNotFoundError:
        return 0


def test_tune_tui(tmp):
    log, prof = os.path.join(tmp, "tui.jsonl"), os.path.join(tmp, "tui.json")
    with Pane("tune", 80, 24) as p:
        launch(p, "%s tune fusion.dflash --preset tiny.dflare.train --backend cpu --log %s "
                  "--profile %s --tui %s" % (FT, log, prof, " ".join(FAST)), tmp)
        s = p.wait_for(r"^>[ !]fusion\.dflash", "tune --tui: the row")
        s = p.wait_for(r"\bfinished\b", "tune --tui: the run finishes", timeout=120)
        line = row_line(s or "", "fusion.dflash")
        with open(log) as f:
            n = json.loads(f.readline())["space_valid"]
        # a speedup, unless the machine was busy (the row marked '!': the default may not have
        # been measured cleanly, and then no speedup is claimed)
        check(line and " %d/%d " % (n, n) in line and
              (re.search(r"\d+(\.\d+)?x", line) or line[1] == "!"),
              "a finished row: %r" % line, s)
        s = quit_and_check_restored(p, 0, "tune --tui")
        s = p.screen(joined=True)
        check(re.search(r"^fusion\.dflash .* yes \(", s, re.M) is not None,
              "the summary table after the dashboard", s)
        check(os.path.exists(prof), "the profile written")


def test_tune_t1_tui(tmp):
    t1 = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "t1", "saxpy_tiled.json")
    with Pane("t1", 100, 24) as p:
        launch(p, "%s tune --t1 %s --backend cuda-emu --strategy exhaustive --budget 0 --reps 2 "
                  "--tui" % (FT, t1), tmp)
        p.wait_for(r"^>[ !]t1:saxpy_tiled", "tune --t1 --tui: the row")
        s = p.wait_for(r"\bfinished\b|\bended\b", "tune --t1 --tui: the run finishes",
                       timeout=120)
        line = row_line(s or "", "t1:saxpy_tiled")
        check(line and " 36/" in line and re.search(r" 6\s*$", line),
              "the finished row: 36 measured, 6 rejected: %r" % line, s)
        quit_and_check_restored(p, 0, "tune --t1 --tui")
        s = p.screen(joined=True)
        check("42 of 42 configurations evaluated (6 rejected)" in s,
              "the summary after the dashboard", s)


def launch_slow_tune(p, log, tmp, done):
    """Tune fusion.dflare slowly with the dashboard, logging to log, until its row shows at least
    done (2 to 9) candidates."""
    launch(p, "%s tune fusion.dflare --preset tiny.dflare.train --backend cpu --log %s --tui "
              "%s" % (FT, log, " ".join(SLOW)), tmp)
    p.wait_for(r"^>[ !]fusion\.dflare .* [%d-9]/\d+ " % done, "tune --tui is under way", timeout=120)


def test_tune_pause_quit(tmp):
    log = os.path.join(tmp, "pause.jsonl")
    with Pane("pause", 80, 24) as p:
        launch_slow_tune(p, log, tmp, 3)
        p.keys("p")
        p.wait_for(r"PAUSED", "p pauses")
        time.sleep(2.0)  # the candidate in flight finishes
        n1 = count_candidates(log)
        time.sleep(2.5)
        n2 = count_candidates(log)
        check(n1 == n2, "nothing runs while paused (%d then %d)" % (n1, n2))
        p.keys("p")
        p.wait_for(r"\brunning\b", "p resumes")
        deadline = time.time() + 60
        while time.time() < deadline and count_candidates(log) <= n2:
            time.sleep(0.2)
        check(count_candidates(log) > n2, "the search goes on after resuming")
        s = quit_and_check_restored(p, 130, "q before the end")
        s = p.screen(joined=True)
        check("stopping the tuner" in s and "interrupted" in s, "q stops the tuner as Ctrl-C does", s)


def test_tune_ctrl_c(tmp):
    log = os.path.join(tmp, "ctrlc.jsonl")
    with Pane("ctrlc", 80, 24) as p:
        launch_slow_tune(p, log, tmp, 2)
        p.keys("C-c")
        s = p.wait_for(r"^EXIT=\d+", "Ctrl-C ends it")
        check(s and re.search(r"^EXIT=130", s, re.M), "Ctrl-C: exit 130", s)
        check(not p.alternate(), "Ctrl-C: the alternate screen is left")
        p.run("stty -g | cmp -s - $STTY0 && echo TTY=same || echo TTY=changed")
        s = p.wait_for(r"^TTY=\w+", "stty")
        check(s and "TTY=same" in s, "Ctrl-C: the terminal modes are restored", s)
        with open(log) as f:
            last = f.readlines()[-1]
        check('"event":"run_end"' in last and '"interrupted":true' in last,
              "the run ends as interrupted in the log")


def test_tune_failure(tmp):
    with Pane("fail", 80, 24) as p:
        # A log of another run: found by the tuner once the dashboard is up (an unusable path
        # is refused before it starts).
        log = os.path.join(tmp, "other.jsonl")
        with open(log, "w") as f:
            f.write('{"event":"run_start","run":"x","t":1,"op":"loss","backend":"cpu",'
                    '"key":"another run"}\n')
        launch(p, "%s tune fusion.dflash --preset tiny.dflare.train --backend cpu --log "
                  "%s --tui %s" % (FT, log, " ".join(FAST)), tmp)
        s = p.wait_for(r"error: .*holds a run of", "the tuner's error in the status bar")
        check(p.alternate(), "the dashboard stays until q")
        s = quit_and_check_restored(p, 2, "after a tuner failure")
        s = p.screen(joined=True)
        check(re.search(r"^flaretune: .*cannot continue", s, re.M) is not None,
              "the error printed after the dashboard", s)


def calls(screen):
    """The calls column of watch's fusion row (right-aligned under its title); -1 if none."""
    lines = screen.split("\n")
    line = row_line(screen, "fusion.dflash") or ""
    if "calls" not in lines[0]:
        return -1
    end = lines[0].index("calls") + len("calls")
    cell = line[:end].split()
    if not cell:
        return -1
    v = cell[-1]
    try:
        return int(float(v[:-1]) * 1000) if v.endswith("k") else int(v)
    except ValueError:
        return -1


def test_watch(tmp, prof):
    with Pane("watch", 100, 30) as p:
        launch(p, "%s watch --profile %s --backend cpu" % (FT, prof), tmp)
        s = p.wait_for(r"^[> ][ !]loss .*\d", "watch: a row per kernel")
        check(re.search(r"^[> ][ !]fusion\.dflash", s or "", re.M), "both kernels of the profile", s)
        check(re.search(r"p50 +p95 +max +jitter", s or "") is not None, "the watch columns", s)

        c1 = calls(p.screen())
        time.sleep(1.5)
        c2 = calls(p.screen())
        check(c2 > c1 >= 0, "calls go up while it runs (%d, %d)" % (c1, c2))
        p.keys("p")
        p.wait_for(r"PAUSED", "p pauses the loop")
        time.sleep(1.0)
        c3 = calls(p.screen())
        time.sleep(1.5)
        c4 = calls(p.screen())
        check(c3 == c4, "no calls while paused (%d, %d)" % (c3, c4))
        p.keys("p")
        p.keys("Enter")
        s = p.wait_for(r"distribution of the window", "the detail: the window's histogram")
        check(re.search(r"p50 \d.*p95 \d.*max \d", s or "") and re.search(r"jitter \d", s or ""),
              "rolling p50, p95, max and jitter", s)
        check(re.search(r"config +\w+=", s or "") is not None, "the tuned config", s)
        quit_and_check_restored(p, 0, "watch")
        s = p.screen(joined=True)
        check(re.search(r"^op +shape +p50 +p95 +max +jitter +calls", s, re.M) is not None,
              "the summary after the dashboard", s)


def test_watch_interval(tmp, prof):
    """A long --interval: the first step shows at once, and q and Ctrl-C end the wait between
    steps instead of sitting it out (the bounds leave a busy machine room, far below 60 s)."""
    for key, want in (("q", 0), ("C-c", 130)):
        what = "watch --interval 60, %s" % key
        with Pane("interval", 100, 30) as p:
            launch(p, "%s watch --profile %s --backend cpu --interval 60" % (FT, prof), tmp)
            t0 = time.time()
            p.wait_for(r"^[> ][ !]fusion\.dflash", what + ": the dashboard")
            while time.time() - t0 < 30 and calls(p.screen()) < 1:
                time.sleep(0.2)
            s = p.screen()
            check(calls(s) >= 1, what + ": the first step shows before the interval ends", s)
            t1 = time.time()
            p.keys(key)
            s = p.wait_for(r"^EXIT=\d+", what + ": the program exits", timeout=20)
            check(s is not None and time.time() - t1 < 10,
                  "%s: exits within 10 s (%.1f s)" % (what, time.time() - t1), s)
            m = s and re.search(r"^EXIT=(\d+)", s, re.M)
            check(m and int(m.group(1)) == want,
                  "%s: exit %s, want %d" % (what, m and m.group(1), want), s)
            check(not p.alternate(), what + ": the alternate screen is left")


def test_colors(tmp, logs):
    log = os.path.join(tmp, "colors.jsonl")
    with open(log, "w") as f:
        f.write("".join(logs["fusion.dflash"]))
    color_sgr = re.compile(r"\x1b\[[0-9;]*(3[0-7]|4[0-7]|38;5;\d+|48;5;\d+)[;m]")
    for env, want in (({}, True), ({"NO_COLOR": "1"}, False), ({"TERM": "vt100"}, False)):
        with Pane("color%d%s" % (want, env.get("TERM", "")), 80, 24, env) as p:
            launch(p, "%s top %s" % (FT, log), tmp)
            p.wait_for(r"\bended\b", "the log shown")
            s = p.screen(escapes=True)
            has = color_sgr.search(s) is not None
            check(has == want, "colors %s with %s" % ("on" if want else "off", env or "defaults"),
                  repr(s[:400]))
            if not want:
                check("\x1b[7m" in s, "monochrome: reverse video marks the header and selection")
            quit_and_check_restored(p, 0, "colors")
    # A locale that is not UTF-8: ASCII only.
    with Pane("ascii", 80, 24, {"LANG": "C", "LC_ALL": "C"}) as p:
        launch(p, "%s top %s" % (FT, log), tmp)
        s = p.wait_for(r"\bended\b", "the log shown")
        check(s and "\u00b5" not in s and re.search(r"\d us\b", s), "us, not the micro sign", s)
        quit_and_check_restored(p, 0, "C locale")


def test_cli_errors(tmp, prof):
    """Mistakes get one clear line and the documented exit code, before any screen is drawn."""
    def run(*args):
        p = subprocess.run([FT, *args], capture_output=True, text=True, timeout=120,
                           stdin=subprocess.DEVNULL)
        return p.returncode, p.stderr

    rc, err = run("top")
    check(rc == 2 and "which event log" in err, "top without a log: %d %s" % (rc, err))
    rc, err = run("top", "a", "b")
    check(rc == 2 and "unexpected argument" in err, "top with two logs: %d %s" % (rc, err))
    rc, err = run("top", "--bogus", "land.jsonl")
    check(rc == 2 and "unknown option '--bogus'" in err, "top with an unknown option: %d %s" % (rc, err))
    rc, err = run("top", "land.jsonl", "--bogus")
    check(rc == 2 and "unknown option '--bogus'" in err, "top with an option after the log: %d %s" % (rc, err))
    rc, err = run("top", "")
    check(rc == 2 and "the event log's path is empty" in err, "top on an empty path: %d %s" % (rc, err))
    rc, err = run("top", os.path.join(tmp, "x.jsonl"))
    check(rc == 2 and "needs a terminal" in err, "top without a terminal: %d %s" % (rc, err))
    rc, err = run("tune", "fusion.dflash", "--preset", "tiny.dflare.train", "--backend", "cpu", "--tui")
    check(rc == 2 and "--tui needs a terminal" in err, "tune --tui without a terminal: %d %s" % (rc, err))
    rc, err = run("watch")
    check(rc == 2 and "which profile" in err, "watch without a profile: %d %s" % (rc, err))
    rc, err = run("watch", "--profile", os.path.join(tmp, "none.json"))
    check(rc == 1 and "no such profile" in err, "watch on a missing profile: %d %s" % (rc, err))
    rc, err = run("watch", "--profile", prof, "--op", "nosuchop")
    check(rc == 2 and "nosuchop" in err, "watch --op of an unknown op: %d %s" % (rc, err))
    rc, err = run("watch", "--profile", prof, "--op", "attention.decode")
    check(rc == 1 and "has no entry" in err and "it has:" in err,
          "watch with no entry for the op: %d %s" % (rc, err))
    rc, err = run("watch", "--profile", prof, "--interval", "-1")
    check(rc == 2 and "--interval" in err, "watch --interval -1: %d %s" % (rc, err))
    rc, err = run("watch", "--profile", prof)
    check(rc == 2 and "needs a terminal" in err, "watch without a terminal: %d %s" % (rc, err))


def main():
    global FT
    ap = argparse.ArgumentParser()
    ap.add_argument("--flaretune", required=True)
    ap.add_argument("--only", default="")
    args = ap.parse_args()
    FT = os.path.abspath(args.flaretune)
    if not shutil.which("tmux"):
        print("SKIP: tmux is not installed (apt-get install tmux)")
        return 77
    with tempfile.TemporaryDirectory(prefix="ft-tui-") as tmp:
        logs, prof = prepare(tmp)
        tests = [
            ("top_follow", lambda: test_top_follow(tmp, logs)),
            ("top_reopened", lambda: test_top_reopened(tmp, logs)),
            ("top_fifo", lambda: test_top_fifo(tmp, logs)),
            ("top_writer_killed", lambda: test_top_writer_killed(tmp)),
            ("top_follows_tune_all", lambda: test_top_follows_tune_all(tmp)),
            ("small_terminals", lambda: test_small_terminals(tmp, logs)),
            ("top_ranks", lambda: test_top_ranks(tmp, logs)),
            ("top_busy", lambda: test_top_busy(tmp, logs)),
            ("top_control_characters", lambda: test_top_control_characters(tmp)),
            ("colors", lambda: test_colors(tmp, logs)),
            ("tune_tui", lambda: test_tune_tui(tmp)),
            ("tune_t1_tui", lambda: test_tune_t1_tui(tmp)),
            ("tune_pause_quit", lambda: test_tune_pause_quit(tmp)),
            ("tune_ctrl_c", lambda: test_tune_ctrl_c(tmp)),
            ("tune_failure", lambda: test_tune_failure(tmp)),
            ("watch", lambda: test_watch(tmp, prof)),
            ("watch_interval", lambda: test_watch_interval(tmp, prof)),
            ("cli_errors", lambda: test_cli_errors(tmp, prof)),
        ]
        for name, fn in tests:
            if args.only and name not in args.only.split(","):
                continue
            before = len(FAILURES)
            t0 = time.time()
            fn()
            print("%-20s %s (%.1fs)" % (name, "ok" if len(FAILURES) == before else "FAILED",
                                       time.time() - t0), file=sys.stderr)
    print("%d failures" % len(FAILURES), file=sys.stderr)
    return 1 if FAILURES else 0


if __name__ == "__main__":
    sys.exit(main())
