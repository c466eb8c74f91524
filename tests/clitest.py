"""clitest.py: what the command-line tests share: running flaretune, recording failures, the
one-line error contract of every command (exit code, one `flaretune: ...` line on stderr), and
running a list of test functions with a summary. Python standard library only."""
import json
import os
import subprocess
import sys

FT = None  # the flaretune binary, set by main()
FAILURES = []


def run(*args, env=None, timeout=600):
    """Run flaretune; env adds variables to this environment (a value of None removes one)."""
    e = dict(os.environ)
    for k, v in (env or {}).items():
        if v is None:
            e.pop(k, None)
        else:
            e[k] = v
    p = subprocess.run([FT, *args], capture_output=True, text=True, env=e, timeout=timeout)
    return p.returncode, p.stdout, p.stderr


def stats_of(median):
    return {"median_s": median, "ci_rel": 0.01, "samples": 10}


def small_run(key="k1", run_id="r1"):
    """The events of a two-candidate exhaustive run of linear on the cpu backend, written by hand
    (threads=2 the faster): run_start, two measured, run_end."""
    return [
        {"event": "run_start", "format": 1, "op": "linear", "backend": "cpu",
         "preset": "tiny.dflare.train", "dims": {"M": 40, "N": 256, "K": 64}, "attrs": {},
         "strategy": "exhaustive", "budget": 0, "space_valid": 2, "default": {"threads": 2},
         "env": {"cores": 2}, "key": key, "t": 1000.0, "run": run_id},
        {"event": "measured", "config": {"threads": 1}, "candidate": 0, "started": 1000.5,
         "stats": stats_of(2e-5), "t": 1001.0, "run": run_id},
        {"event": "measured", "config": {"threads": 2}, "candidate": 1, "started": 1001.5,
         "stats": stats_of(1e-5), "t": 1002.0, "run": run_id},
        {"event": "run_end", "t": 1005.0, "run": run_id}]


def write_log(path, events):
    """Events as tune writes them: one compact JSON object a line."""
    with open(path, "w") as f:
        f.write("".join(json.dumps(e, separators=(",", ":")) + "\n" for e in events))


def check(cond, what):
    if not cond:
        FAILURES.append(what)
        print("FAIL:", what, file=sys.stderr)


def one_line_error(args, code, needle=None):
    rc, out, err = run(*args)
    lines = [l for l in err.splitlines() if l.strip()]
    check(rc == code, f"{args}: exit {rc}, want {code} (stderr: {err.strip()!r})")
    check(len(lines) == 1 and lines[0].startswith("flaretune: "),
          f"{args}: want one 'flaretune: ...' line on stderr, got {err!r}")
    if needle:
        check(needle in err, f"{args}: stderr {err.strip()!r} lacks {needle!r}")
    return out


def main(flaretune, tests):
    """Run each test function, print one line per test and the failure count; the exit code."""
    global FT
    FT = flaretune
    for t in tests:
        n = len(FAILURES)
        t()
        print(f"{t.__name__:40s} {'ok' if len(FAILURES) == n else 'FAILED'}", file=sys.stderr)
    print(f"{len(FAILURES)} failures", file=sys.stderr)
    return 1 if FAILURES else 0


# ---- profile entries for the profile tests -------------------------------------------------

DEVICE = "cpu: Test CPU x 16 (SkylakeX)"


def stats(m):
    """A stats object of median m, as a measured event or a profile entry has it."""
    return {"median_s": m, "q1_s": m * .99, "q3_s": m * 1.01, "iqr_s": m * .02, "min_s": m * .98,
            "max_s": m * 1.1, "mean_s": m, "stdev_s": m * .01, "ci_rel": .005, "samples": 40,
            "batch": 1, "converged": True, "total_s": m * 40}


def entry(m_rows, median, scheme="dpace", backend="ref", device=DEVICE, config=None):
    """A valid loss entry of a profile (docs/profiles.md)."""
    shape = {"M": m_rows, "H": 1024, "V": 32768}
    return {"op": "loss", "backend": backend, "device": device, "shape": shape,
            "attrs": {"scheme": scheme}, "config": config or {},
            "stats": stats(median), "default": {"config": {}, "stats": stats(2 * median)},
            "speedup": 2.0, "roofline_frac": 0.25,
            "verification": {"max_rel_err": 2e-7, "tolerance": 1e-4, "output": "loss",
                             "shape": shape, "reduced": False},
            "tie": [], "environment": {"cpu": "Test CPU", "cores": 16},
            "tuned_at": "2025-01-01T00:00:00Z", "strategy": "exhaustive",
            "evaluations": 4, "space_valid": 4}
