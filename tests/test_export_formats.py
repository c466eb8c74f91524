#!/usr/bin/env python3
"""test_export_formats.py: `flaretune export`, a tuning log written as a FAIR T4 results file and
as a Kernel Tuner cache (docs/events.md "Formats"), checked as those formats' readers would.

A short real run (fusion.dflare at tiny.dflare.train on the cpu backend, random search, four
evaluations) is exported both ways. The T4 file is validated with Python's jsonschema against
the requirements of the T4 1.0.0 results schema (kernel_tuner/schema/T4/1.0.0/results-schema.json:
an object with a version string and results, each with configuration, times, invalidity from
its list and correctness), and against that schema file itself where $FT_T4_SCHEMA names one.
The cache is checked for Kernel Tuner's shape: keys formed from tune_params_keys, every entry's
parameters agreeing with its key, closed as Kernel Tuner closes one. Both are read back by
`flaretune replay --json`. Bad requests get one line. Without jsonschema it skips (77).

usage: test_export_formats.py --flaretune PATH
"""
import argparse
import json
import os
import shutil
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import clitest  # noqa: E402
from clitest import check, one_line_error, run  # noqa: E402

try:
    import jsonschema
except ImportError:
    jsonschema = None

# What the T4 1.0.0 results schema requires of a file.
T4_RESULTS = {
    "type": "object",
    "properties": {
        "schema_version": {"type": "string", "pattern": "^[0-9]{1,}.[0-9]{1,}.[0-9]{1,}$"},
        "results": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "timestamp": {"type": "string"},
                    "configuration": {"type": "object"},
                    "objectives": {"type": "array"},
                    "times": {"type": "object", "properties": {
                        "runtimes": {"type": "array"}, "framework": {"type": "number"},
                        "search_algorithm": {"type": "number"},
                        "validation": {"type": "number"}}},
                    "invalidity": {"enum": ["timeout", "compile", "runtime", "correctness",
                                            "constraints", "correct"]},
                    "correctness": {"type": "number"},
                    "measurements": {"type": "array", "items": {"type": "object", "properties": {
                        "name": {"type": "string"},
                        "value": {"type": ["number", "string", "array"]},
                        "unit": {"type": "string"}}}},
                },
                "required": ["configuration", "times", "invalidity", "correctness"],
            },
        },
    },
    "required": ["schema_version", "results"],
}

STATE = {}


def make_log():
    tmp = STATE["tmp"]
    log = os.path.join(tmp, "t.jsonl")
    rc, out, err = run("tune", "fusion.dflare", "--preset", "tiny.dflare.train", "--backend",
                       "cpu", "--strategy", "random", "--budget", "4", "--max-time", "0.05",
                       "--quiet", "--log", log)
    check(rc == 0, f"tune: exit {rc}: {err}")
    STATE["log"] = log if rc == 0 else None


def test_t4():
    log = STATE.get("log")
    if not log:
        return
    path = os.path.join(STATE["tmp"], "t4.json")
    rc, out, err = run("export", log, "--format", "t4", "-o", path)
    check(rc == 0, f"export t4: exit {rc}: {err}")
    if rc:
        return
    doc = json.load(open(path))
    try:
        jsonschema.validate(doc, T4_RESULTS)
    except jsonschema.ValidationError as e:
        check(False, f"T4 output against the results schema's requirements: {e.message}")
    official = os.environ.get("FT_T4_SCHEMA")
    if official and os.path.exists(official):
        try:
            jsonschema.validate(doc, json.load(open(official)))
        except jsonschema.ValidationError as e:
            check(False, f"T4 output against {official}: {e.message}")
    check(doc["schema_version"] == "1.0.0" and doc["metadata"]["timeunit"] == "milliseconds",
          "version and time unit")
    check(len(doc["results"]) == 4, f"{len(doc['results'])} results, want the 4 evaluated")
    for r in doc["results"]:
        ok = r["invalidity"] == "correct"
        check(r["correctness"] == (1 if ok else 0), f"correctness of {r}")
        value = r["measurements"][0]["value"]
        check(isinstance(value, float) if ok else isinstance(value, str), f"time of {r}")
    rc, out, err = run("replay", path, "--json", "--seeds", "1", "--strategy", "random")
    if any(r["invalidity"] == "correct" for r in doc["results"]):
        check(rc == 0, f"replay of the T4 file: exit {rc}: {err}")
        if rc == 0:
            rep = json.loads(out)
            check(rep["source"] == "t4" and rep["op"] is None and rep["kernel"] == "fusion.dflare",
                  f"replay's source {rep.get('source')}, op {rep.get('op')}")


def test_kt_cache():
    log = STATE.get("log")
    if not log:
        return
    rc, text, err = run("export", log, "--format", "kt-cache")
    check(rc == 0, f"export kt-cache to standard output: exit {rc}: {err}")
    if rc:
        return
    check(text.rstrip().endswith("}\n}"), "closed as Kernel Tuner closes a cache")
    doc = json.loads(text)
    keys = doc["tune_params_keys"]
    check(keys == list(doc["tune_params"]), "tune_params_keys in tune_params' order")
    check(doc["kernel_name"] == "fusion.dflare" and doc["objective"] == "time", "header")
    check(len(doc["cache"]) == 4, f"{len(doc['cache'])} entries, want 4")
    for key, e in doc["cache"].items():
        check(key == ",".join(str(e[k]) for k in keys), f"key {key} of {e}")
        for k in keys:
            check(e[k] in doc["tune_params"][k], f"{key}: {k}={e[k]} not in tune_params")
        check(isinstance(e["time"], (float, str)), f"{key}: time {e['time']}")


def test_through_a_pipe():
    """A log (or a landscape) given as a pipe is read once, as it comes: export and replay of
    /dev/stdin give what the file gives."""
    log = STATE.get("log")
    if not log:
        return
    import subprocess
    want = run("export", log, "--format", "kt-cache")
    with open(log) as f:
        p = subprocess.run([clitest.FT, "export", "/dev/stdin", "--format", "kt-cache"], stdin=f,
                           capture_output=True, text=True, timeout=300)
    check(p.returncode == 0 and json.loads(p.stdout)["cache"] == json.loads(want[1])["cache"],
          f"export of the log through a pipe: exit {p.returncode}: {p.stderr.strip()}")
    land = os.path.join(HERE, "data", "landscapes", "kt-small.json")
    with open(land) as f:
        p = subprocess.run([clitest.FT, "replay", "/dev/stdin", "--seeds", "1", "--json"], stdin=f,
                           capture_output=True, text=True, timeout=300)
    rc, text, _ = run("replay", land, "--seeds", "1", "--json")
    check(p.returncode == 0 and rc == 0 and
          json.loads(p.stdout)["optimum_s"] == json.loads(text)["optimum_s"] and
          json.loads(p.stdout)["valid"] == json.loads(text)["valid"],
          f"replay of a landscape through a pipe: exit {p.returncode}: {p.stderr.strip()}")


def test_bad_requests():
    log = STATE.get("log") or "missing.jsonl"
    one_line_error(["export", log], 2, "--format")
    one_line_error(["export", log, "--format", "xml"], 2, "unknown format 'xml'")
    one_line_error(["export", os.path.join(STATE["tmp"], "none.jsonl"), "--format", "t4"], 1)
    if STATE.get("log"):
        # A command never writes over the file it reads: refused, the log as it was.
        copy = os.path.join(STATE["tmp"], "self.jsonl")
        shutil.copyfile(log, copy)
        before = open(copy, "rb").read()
        one_line_error(["export", copy, "--format", "t4", "-o", copy], 2,
                       "the output is the event log it reads")
        one_line_error(["replay", copy, "--export", copy], 2, "the output is the landscape")
        check(open(copy, "rb").read() == before, "the log is unchanged")
        warm = os.path.join(STATE["tmp"], "warm.jsonl")
        shutil.copyfile(log, warm)
        one_line_error(["replay", log, "--warm", warm, "--seeds", "1", "--export", warm], 2,
                       "the output is the --warm landscape it reads")
        check(open(warm, "rb").read() == before, "the --warm log is unchanged")
        # A clean measurement with no time either format can hold (none, 0, a string, or one
        # past a double in milliseconds) is a broken log, refused as replay refuses it, never
        # written as a failed configuration or an entry without a time.
        events = [json.loads(l) for l in open(log)]
        at = next(i for i, e in enumerate(events) if e.get("event") == "measured"
                  and e.get("clean") is not False and not e.get("stopped"))
        for bad in (None, 0, "1e-3", 1e308):
            broken = [dict(e) for e in events]
            broken[at] = dict(broken[at], stats=dict(broken[at]["stats"], median_s=bad))
            path = os.path.join(STATE["tmp"], "broken.jsonl")
            with open(path, "w") as f:
                f.write("".join(json.dumps(e, separators=(",", ":")) + "\n" for e in broken))
            for fmt in ("t4", "kt-cache"):
                out = os.path.join(STATE["tmp"], "broken.out")
                one_line_error(["export", path, "--format", fmt, "-o", out], 1,
                               f"event {at + 1}: measured")
                check(not os.path.exists(out), f"median {bad!r}: nothing written")
        # A configuration the space does not hold is a broken log too (exit 1, not a usage
        # error), for export and replay alike.
        broken = [dict(e) for e in events]
        cfg = dict(broken[at]["config"])
        name = next(iter(cfg))
        cfg[name] = 987654321
        broken[at] = dict(broken[at], config=cfg)
        path = os.path.join(STATE["tmp"], "badconfig.jsonl")
        with open(path, "w") as f:
            f.write("".join(json.dumps(e, separators=(",", ":")) + "\n" for e in broken))
        one_line_error(["export", path, "--format", "t4", "-o", out], 1,
                       f"event {at + 1} (measured): config")
        one_line_error(["replay", path, "--seeds", "1"], 1, f"event {at + 1} (measured): config")


def test_unclean_cost():
    """A candidate measured on a busy machine (clean: false) is a failed configuration whose
    sampling is still its benchmark time, never booked as compile time."""
    log = STATE.get("log")
    if not log:
        return
    events = [json.loads(l) for l in open(log)]
    at = next(i for i, e in enumerate(events) if e.get("event") == "measured"
              and e.get("clean") is not False and not e.get("stopped"))
    e = dict(events[at], clean=False, started=1000.0, t=1000.6)
    e["stats"] = dict(e["stats"], total_s=0.5, clean=False)
    events[at] = e
    path = os.path.join(STATE["tmp"], "unclean.jsonl")
    with open(path, "w") as f:
        f.write("".join(json.dumps(x, separators=(",", ":")) + "\n" for x in events))
    out = os.path.join(STATE["tmp"], "unclean.kt.json")
    rc, _, err = run("export", path, "--format", "kt-cache", "-o", out)
    check(rc == 0, f"export: exit {rc}: {err}")
    if rc:
        return
    cache = json.load(open(out))["cache"]
    failed = [c for c in cache.values() if c["time"] == "RuntimeFailedConfig"]
    check(len(failed) == 1 and abs(failed[0]["benchmark_time"] - 500) < 1e-6
          and abs(failed[0]["compile_time"] - 100) < 1e-6,
          f"its 0.5 s of sampling is benchmark time, the rest compile: {failed}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--flaretune", required=True)
    a = ap.parse_args()
    if jsonschema is None:
        print("test_export_formats: skipped: no Python jsonschema", file=sys.stderr)
        return 77
    with tempfile.TemporaryDirectory() as tmp:
        STATE["tmp"] = tmp
        return clitest.main(a.flaretune, [make_log, test_t4, test_kt_cache, test_through_a_pipe,
                                               test_bad_requests, test_unclean_cost])


if __name__ == "__main__":
    sys.exit(main())
