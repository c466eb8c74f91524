#!/usr/bin/env python3
"""test_t1_cli.py: a kernel described by a FAIR T1 file, through the command line.

    tests/test_t1_cli.py --flaretune BINARY [--sanitized 0|1]

On the hand-written tests/data/t1/saxpy_tiled.json (42 allowed configurations; its kernel forgets
an element with tile_size_x == 3, and its float tunable `scale` must not change the result):
`space --t1` (counts, JSON, --list); `tune --t1` on the emulator with every configuration: the
six wrong ones rejected by the check against the default configuration and no other, the
measurements written as a T4 results file (valid against the T4 1.0.0 results schema's
requirements when jsonschema is present) and a Kernel Tuner cache that `replay` reads back;
`compile --t1` of every configuration for sm_80 and sm_86 (NVRTC, no GPU needed); `bench --t1`
of the default, of another configuration (JSON, with the default's time) and of a wrong one
(exit 4);
`tune --t1 --backend cuda` without a GPU (exit 3, one line); `inspect --t1` (one configuration,
JSON; --sample into a JSON-lines file twice: the second run adds nothing; a torn last line is
cut off and predicted again); the Kernel Tuner cache written as the run goes: a run killed
with SIGKILL keeps every evaluation it finished, a torn last line is cut away, `replay` reads the
unclosed file, the same command again resumes from it and runs only the rest, and a cache of
another problem is refused before anything runs; `--reference NAME=FILE.npy` with every input
a constant (so the expected output is known: y = 3 * 2 + 1): the six wrong configurations
rejected against the file and no other, a wrong file rejecting the default configuration itself
and every other, and files that do not fit the output refused; `--log LOG`: run_start, a measured or rejected
event per evaluation and run_end in the event-log format, a second writer refused while the log
is locked, and `replay LOG` pointing at the cache; Ctrl-C (SIGINT) part way: exit 130 after the
configuration in flight, the cache closed with every evaluation, run_end saying interrupted, and
sent to the whole process group as a terminal sends it, no configuration recorded as failing
for the compiler it stopped;
`--profile`: the faster of two runs kept among a profile's kernels beside its op entries, listed by
`show`, emitted as JSON and as a C header that compiles and finds it, an unusable profile refused
before the run; bad requests one line each; a kernel that writes far past its output, and one
that never ends under `--candidate-timeout`: the run ends on it in one line with it recorded as
failed, and the same command goes on past it.
"""
import fcntl
import json
import os
import re
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import clitest  # noqa: E402
from clitest import check, one_line_error, run  # noqa: E402

T1 = os.path.join(HERE, "data", "t1", "saxpy_tiled.json")
STATE = {}


def dump(path, doc):
    """Write doc as JSON to path."""
    with open(path, "w") as f:
        json.dump(doc, f)


def test_space():
    rc, out, err = run("space", "--t1", T1)
    check(rc == 0 and "42 allowed by the conditions" in out and "64 configurations" in out,
          f"space: exit {rc}: {out}{err}")
    rc, out, err = run("space", "--t1", T1, "--json", "--list")
    doc = json.loads(out) if rc == 0 else {}
    check(doc.get("valid") == 42 and len(doc.get("configs", [])) == 42,
          f"space --json --list: {doc.get('valid')}")
    first = (doc.get("configs") or [{}])[0]
    check(first.get("key") == "32,1,0,0.5" and first.get("grid") == [313, 1, 1],
          f"the first allowed configuration and its grid: {first}")
    check(doc.get("default", {}).get("config") == "block_size_x=64,tile_size_x=1,use_ldg=0,scale=2.0",
          f"default: {doc.get('default')}")


def test_tune():
    tmp = STATE["tmp"]
    t4, kt = os.path.join(tmp, "s.t4.json"), os.path.join(tmp, "s.kt.json")
    rc, out, err = run("tune", "--t1", T1, "--backend", "cuda-emu", "--strategy", "exhaustive",
                       "--budget", "0", "--reps", "2", "--t4", t4, "--kt-cache", kt)
    check(rc == 0 and "42 of 42 configurations evaluated (6 rejected)" in out,
          f"tune: exit {rc}: {out}{err[-2000:]}")
    rejected = [l for l in err.splitlines() if "rejected:" in l]
    check(len(rejected) == 6 and all("tile_size_x=3" in l and "not written" in l for l in rejected),
          f"the six wrong configurations and no other: {rejected}")
    check(all(os.path.exists(p) for p in (t4, kt)), "both files written")
    if not os.path.exists(t4):
        return
    with open(t4) as f:
        doc = json.load(f)
    res = doc.get("results", [])
    check(len(res) == 42 and sum(r["invalidity"] != "correct" for r in res) == 6,
          f"T4: {len(res)} results")
    check(all(r["measurements"][0]["value"] > 0 for r in res if r["invalidity"] == "correct"),
          "T4: positive times")
    try:
        import jsonschema
        from test_export_formats import T4_RESULTS
        jsonschema.validate(doc, T4_RESULTS)
    except ImportError:
        pass
    except Exception as e:  # noqa: BLE001 - jsonschema's ValidationError
        check(False, f"T4 against the schema: {e}")
    # The cache reads back: replay finds the same optimum and failures.
    rc, out, err = run("replay", kt, "--seeds", "3", "--json")
    rep = json.loads(out) if rc == 0 else {}
    check(rc == 0 and rep.get("valid") == 42 and rep.get("rejected") == 6,
          f"replay of the cache: exit {rc}: {err} {rep.get('valid')} {rep.get('rejected')}")


def test_compile():
    for arch in ("sm_80", "sm_86"):
        rc, out, err = run("compile", "--t1", T1, "--all-configs", "--arch", arch, "--json")
        if rc == 3:
            check("without the CUDA toolkit" in err, f"compile without the toolkit: {err}")
            return
        doc = json.loads(out) if rc == 0 else {}
        rows = doc.get("configs", [])
        check(rc == 0 and len(rows) == 42 and doc.get("failed") == 0 and
              all(r.get("regs", 0) > 0 for r in rows), f"compile --t1 for {arch}: exit {rc}: {err}")
        check(doc.get("device") == ("a100" if arch == "sm_80" else "rtx-a4000"),
              f"{arch}: occupancy on {doc.get('device')}")


def test_tune_gpu_absent():
    rc, _, err = run("list", "backends")
    if "cuda " in err + _ and "unavailable" not in (err + _):
        return  # a GPU is here: nothing to check
    one_line_error(["tune", "--t1", T1, "--backend", "cuda", "--budget", "2"], 3)


def test_bench():
    """bench --t1: one configuration, checked and timed as tune --t1 evaluates it."""
    base = ["bench", "--t1", T1, "--backend", "cuda-emu", "--reps", "2"]
    rc, out, err = run(*base)
    check(rc == 0 and "block_size_x=64,tile_size_x=1,use_ldg=0,scale=2.0" in out and
          "passed" in out and "the default configuration (" not in out,
          f"bench --t1 (the default): exit {rc}: {out}{err}")
    rc, out, err = run(*base, "--config", "block_size_x=128,tile_size_x=4", "--json")
    doc = json.loads(out) if rc == 0 else {}
    check(doc.get("passed") is True and doc.get("config", {}).get("tile_size_x") == 4 and
          doc.get("stats", {}).get("samples") == 2 and doc.get("stats", {}).get("median_s", 0) > 0
          and doc.get("default_stats", {}).get("median_s", 0) > 0 and doc.get("speedup", 0) > 0,
          f"bench --t1 --config --json: exit {rc}: {out[:400]}{err}")
    # A wrong configuration (it skips an element): exit 4, why.
    rc, out, err = run(*base, "--config", "block_size_x=32,tile_size_x=3")
    check(rc == 4 and "rejected:" in out and "not written" in out,
          f"bench --t1 of a wrong configuration: exit {rc}: {out}{err}")
    one_line_error(base + ["--config", "block_size_x=48"], 2, "block_size_x")
    one_line_error(["bench", "--t1", T1, "--backend", "cpu"], 2, "cuda or cuda-emu")
    one_line_error(["bench", "--t1", T1, "--all-configs"], 2, "--all-configs")
    rc, _, err = run("list", "backends")
    if "unavailable" in err + _ or "cuda " not in err + _:
        one_line_error(["bench", "--t1", T1, "--backend", "cuda"], 3)


def test_inspect():
    tmp = STATE["tmp"]
    rc, out, err = run("inspect", "--t1", T1, "--device", "rtx-a4000", "--json")
    doc = json.loads(out) if rc == 0 else {}
    check(rc == 0 and doc.get("predicted_s", 0) > 0 and doc.get("device") == "rtx-a4000" and
          doc.get("grid") == [157, 1, 1], f"inspect --json: exit {rc}: {err} {doc}")
    jl = os.path.join(tmp, "p.jsonl")
    rc, _, err = run("inspect", "--t1", T1, "--sample", "5", "--jsonl", jl)
    with open(jl) as f:
        lines = f.read().splitlines()
    check(rc == 0 and len(lines) == 6, f"--sample 5 and the default: {len(lines)} lines: {err}")
    rc, _, err = run("inspect", "--t1", T1, "--sample", "5", "--jsonl", jl)
    with open(jl) as f:
        again = f.read().splitlines()
    check(rc == 0 and again == lines and "all 6 configurations already in" in err,
          f"a second run adds nothing, and says so: {err[-300:]}")
    # A line whose prediction is no positive time is no prediction: made again.
    bad = json.loads(lines[-1])
    bad["predicted_s"] = -1
    with open(jl, "w") as f:
        f.write("\n".join(lines[:-1] + [json.dumps(bad)]) + "\n")
    rc, _, err = run("inspect", "--t1", T1, "--sample", "5", "--jsonl", jl)
    with open(jl) as f:
        redone = f.read().splitlines()
    check(rc == 0 and len(redone) == 7 and json.loads(redone[-1])["predicted_s"] > 0,
          f"a line predicting -1 s predicted again: {len(redone)} lines: {err[-300:]}")
    with open(jl, "w") as f:
        f.write("\n".join(lines) + "\n")
    with open(jl, "w") as f:
        f.write("\n".join(lines[:-1]) + "\n" + lines[-1][:20])  # the last line torn
    rc, _, err = run("inspect", "--t1", T1, "--sample", "5", "--jsonl", jl)
    with open(jl) as f:
        healed = f.read().splitlines()
    check(rc == 0 and len(healed) == 6 and all(json.loads(l) for l in healed),
          f"the torn line predicted again: {healed[-2:]}")
    # A __constant__ argument's reads are the constant cache's, not global traffic: the L2 and
    # DRAM bytes of y = x * coef[0] are x's and y's, 8 bytes an element, as without coef.
    with open(os.path.join(tmp, "cst.cu"), "w") as f:
        f.write("__constant__ float coef[4];\n"
                "__global__ void scale(float *y, const float *x, const float *c, int n) {\n"
                "    int i = blockIdx.x * block_size_x + threadIdx.x;\n"
                "    if (i < n) y[i] = x[i] * coef[0];\n}\n")
    vec = {"MemoryType": "Vector", "FillType": "Random", "Size": "ProblemSize[0]",
           "FillValue": 1.0}
    cdoc = {"General": {"BenchmarkName": "cst", "OutputFormat": "JSON"},
            "ConfigurationSpace": {"TuningParameters": [
                {"Name": "block_size_x", "Type": "int", "Values": [64], "Default": 64}],
                "Conditions": []},
            "KernelSpecification": {
                "Language": "CUDA", "CompilerOptions": [], "BenchmarkName": "cst",
                "KernelName": "scale", "KernelFile": "cst.cu", "GlobalSizeType": "CUDA",
                "LocalSize": {"X": "block_size_x", "Y": "1", "Z": "1"},
                "GridDivX": ["block_size_x"], "ProblemSize": [4096], "SharedMemory": 0,
                "Arguments": [dict(vec, Name="y", Type="float", AccessType="WriteOnly", Output=1),
                              dict(vec, Name="x", Type="float", AccessType="ReadOnly"),
                              dict(vec, Name="coef", Type="float", AccessType="ReadOnly",
                                   MemType="Constant", Size="4"),
                              {"Name": "n", "Type": "int32", "MemoryType": "Scalar",
                               "FillValue": 4096}]}}
    cst = os.path.join(tmp, "cst.json")
    dump(cst, cdoc)
    rc, out, err = run("inspect", "--t1", cst, "--device", "h200", "--blocks", "64", "--json")
    ins = json.loads(out).get("inputs", {}) if rc == 0 else {}
    check(rc == 0 and ins.get("l2_bytes") == 4096 * 8 and ins.get("dram_bytes") == 4096 * 8,
          f"constant reads are no global traffic: exit {rc}: {ins} {err[-300:]}")
    # A block needing 150,000 bytes of shared memory cannot run on an RTX A4000 (99 KiB): no time
    # is predicted for it in words (the JSON line keeps its figures beside `unfit`, for the
    # prediction check to count).
    cdoc["KernelSpecification"]["SharedMemory"] = 150000
    dump(cst, cdoc)
    rc, out, err = run("inspect", "--t1", cst, "--device", "rtx-a4000", "--blocks", "8")
    check(rc == 0 and "cannot run:" in out and
          "predicted none: it cannot run on rtx-a4000" in out and " us, " not in out,
          f"an unfit config has no predicted time: exit {rc}: {out} {err[-300:]}")
    rc, out, err = run("inspect", "--t1", cst, "--device", "rtx-a4000", "--blocks", "8", "--json")
    one = json.loads(out) if rc == 0 else {}
    check(one.get("unfit") and one.get("predicted_s", 0) is None and one.get("bound", 0) is None,
          f"--json: predicted_s null where unfit: exit {rc}: {one} {err[-300:]}")
    rc, _, err = run("inspect", "--t1", cst, "--device", "rtx-a4000", "--blocks", "8", "--jsonl",
                     os.path.join(tmp, "unfit.jsonl"))
    with open(os.path.join(tmp, "unfit.jsonl")) as f:
        kept = [json.loads(l) for l in f]
    check(rc == 0 and len(kept) == 1 and kept[0]["unfit"] and kept[0]["predicted_s"] > 0,
          f"--jsonl keeps the figures beside unfit: exit {rc}: {kept} {err[-300:]}")
    # A static shared array of 64 KiB: NVRTC refuses it for sm_80 (ptxas: over 48 KiB static), as
    # nvcc does, on every architecture: it cannot run, and the words say why.
    with open(os.path.join(tmp, "cst.cu"), "w") as f:
        f.write("__global__ void scale(float *y, const float *x, const float *c, int n) {\n"
                "    __shared__ float buf[block_size_x * 256];\n"
                "    int i = blockIdx.x * block_size_x + threadIdx.x;\n"
                "    buf[threadIdx.x] = i < n ? x[i] : 0.0f;\n    __syncthreads();\n"
                "    if (i < n) y[i] = 2.0f * buf[threadIdx.x];\n}\n")
    cdoc["KernelSpecification"]["SharedMemory"] = 0
    dump(cst, cdoc)
    rc, out, err = run("inspect", "--t1", cst, "--device", "a100-pcie", "--blocks", "8")
    check(rc == 0 and (not has_nvrtc() or ("NVRTC refused it" in out and
                                           "too much shared data" in out and
                                           "cannot run: does not compile for sm_80" in out and
                                           "predicted none" in out)),
          f"NVRTC's refusal is said, and no time predicted: exit {rc}: {out} {err[-300:]}")
    # Another sample size predicts again; another problem size is refused, never mixed in.
    rc, _, err = run("inspect", "--t1", T1, "--sample", "5", "--blocks", "16", "--jsonl", jl)
    with open(jl) as f:
        more = f.read().splitlines()
    check(rc == 0 and len(more) == 12 and all(json.loads(l)["blocks"] == 16 for l in more[6:]),
          f"--blocks 16 predicted the six again: {len(more)} lines: {err}")
    with open(T1) as f:
        doc = json.load(f)
    doc["KernelSpecification"]["ProblemSize"] = [20000]
    doc["KernelSpecification"]["KernelFile"] = os.path.join(os.path.dirname(T1),
                                                            "saxpy_tiled.cu")
    big = os.path.join(tmp, "saxpy_20000.json")
    dump(big, doc)
    one_line_error(["inspect", "--t1", big, "--sample", "5", "--jsonl", jl], 2,
                   "another kernel or problem size")
    # Predictions of another source are never taken for this one's: the same T1 file over an
    # edited kernel is refused; a line that does not say its source is predicted again.
    edited = os.path.join(tmp, "saxpy_edited.cu")
    with open(doc["KernelSpecification"]["KernelFile"]) as f, open(edited, "w") as g:
        g.write(f.read() + "\n// edited: another program, perhaps\n")
    doc["KernelSpecification"]["ProblemSize"] = json.load(open(T1))["KernelSpecification"][
        "ProblemSize"]
    doc["KernelSpecification"]["KernelFile"] = edited
    other_src = os.path.join(tmp, "saxpy_edited.json")
    dump(other_src, doc)
    one_line_error(["inspect", "--t1", other_src, "--sample", "5", "--jsonl", jl], 2,
                   "of another source")
    with open(jl) as f:
        check(f.read().splitlines() == more, "the refused run left OUT as it was")
    # OUT that is someone else's file (the T1 file itself, notes whose last line has no newline)
    # or a folder is refused before anything is written, and left as it was.
    notes = os.path.join(tmp, "notes.txt")
    with open(notes, "w") as f:
        f.write("line one\nlast line without newline")
    t1_copy = os.path.join(tmp, "saxpy_copy.json")
    dump(t1_copy, doc)
    for target, rc, says in ((notes, 2, "no predictions"), (t1_copy, 2, "no predictions"),
                             (tmp, 1, "is a directory")):
        before = open(target).read() if os.path.isfile(target) else None
        one_line_error(["inspect", "--t1", t1_copy if target == t1_copy else other_src,
                        "--sample", "2", "--jsonl", target], rc, says)
        if before is not None:
            check(open(target).read() == before, f"{target} left as it was")
    # The T1 file is part of the source too: another SharedMemory changes the occupancy.
    same = json.load(open(T1))
    same["KernelSpecification"]["KernelFile"] = os.path.join(os.path.dirname(T1),
                                                             same["KernelSpecification"]["KernelFile"])
    same["KernelSpecification"]["SharedMemory"] = 100000
    dump(os.path.join(tmp, "saxpy_smem.json"), same)
    one_line_error(["inspect", "--t1", os.path.join(tmp, "saxpy_smem.json"), "--sample", "5",
                    "--jsonl", jl], 2, "of another source")
    # An option NVRTC does not know says nothing of a configuration: it is no reason it cannot
    # run (ptxas's refusals are).
    same["KernelSpecification"]["SharedMemory"] = 0
    same["KernelSpecification"]["CompilerOptions"] = ["-O3"]
    dump(os.path.join(tmp, "saxpy_o3.json"), same)
    rc, out, err = run("inspect", "--t1", os.path.join(tmp, "saxpy_o3.json"), "--device",
                       "rtx-a4000")
    check(rc == 0 and "cannot run" not in out and " us, " in out and
          (not has_nvrtc() or "NVRTC refused it: " in out),
          f"a refused option is no unfit configuration: exit {rc}: {out} {err[-300:]}")
    unsaid = os.path.join(tmp, "unsaid.jsonl")
    old = json.loads(more[0])
    del old["source"]
    with open(unsaid, "w") as f:
        f.write(json.dumps(old) + "\n")
    rc, _, err = run("inspect", "--t1", T1, "--config", old["config"], "--jsonl", unsaid)
    with open(unsaid) as f:
        both = [json.loads(l) for l in f]
    check(rc == 0 and len(both) == 2 and both[1].get("source") == json.loads(more[0])["source"],
          f"a line without its source predicted again: exit {rc}: {both} {err[-300:]}")
    # A line that failed is tried again, not taken as done.
    with open(jl) as f:
        lines = f.read().splitlines()
    first = json.loads(lines[0])
    failed = {k: first[k] for k in ("key", "config", "device", "kernel", "problem_size",
                                    "blocks")}
    failed["error"] = "a failure of an earlier run"
    only = os.path.join(tmp, "retry.jsonl")
    with open(only, "w") as f:
        f.write(json.dumps(failed) + "\n")
    rc, _, err = run("inspect", "--t1", T1, "--config", first["config"], "--jsonl", only)
    with open(only) as f:
        retried = f.read().splitlines()
    check(rc == 0 and len(retried) == 2 and "predicted_s" in json.loads(retried[1]),
          f"the failed line predicted again: {retried} {err}")


def test_sample_past_list():
    """--sample on a space that allows more than a list holds (42 x 32^5 = 1,409,286,144, five
    parameters named by no condition) draws the sample without a list: the default first, then
    K others, distinct and allowed."""
    tmp = STATE["tmp"]
    with open(T1) as f:
        doc = json.load(f)
    doc["KernelSpecification"]["KernelFile"] = os.path.join(os.path.dirname(T1), "saxpy_tiled.cu")
    for i in range(5):
        doc["ConfigurationSpace"]["TuningParameters"].append(
            {"Name": f"pad{i}", "Type": "int", "Values": "list(range(1, 33))", "Default": 1})
    big = os.path.join(tmp, "saxpy_pad.json")
    dump(big, doc)
    rc, out, err = run("space", "--t1", big)
    check(rc == 0 and "1409286144 allowed by the conditions" in out, f"space: {out}{err}")
    jl = os.path.join(tmp, "pad.jsonl")
    rc, _, err = run("inspect", "--t1", big, "--sample", "3", "--seed", "4", "--jsonl", jl)
    lines = open(jl).read().splitlines() if os.path.exists(jl) else []
    configs = [json.loads(l).get("config") for l in lines]
    check(rc == 0 and len(configs) == 4 and len(set(configs)) == 4 and
          configs[0] == "block_size_x=64,tile_size_x=1,use_ldg=0,scale=2.0,pad0=1,pad1=1,pad2=1,"
          "pad3=1,pad4=1", f"the default and 3 drawn: exit {rc}: {configs} {err[-300:]}")
    for c in configs[1:]:
        v = dict(kv.split("=") for kv in c.split(","))
        check(int(v["block_size_x"]) * int(v["tile_size_x"]) <= 512 and
              (v["use_ldg"] == "0" or v["tile_size_x"] in ("2", "4")), f"{c} is allowed")
    # a larger sample from the same seed holds the smaller one's: only the rest is predicted
    rc, _, err = run("inspect", "--t1", big, "--sample", "5", "--seed", "4", "--jsonl", jl)
    lines = open(jl).read().splitlines()
    check(rc == 0 and len(lines) == 6 and "4 already in" in err and
          [json.loads(l)["config"] for l in lines[:4]] == configs,
          f"--sample 5 after --sample 3: {len(lines)} lines: {err[-300:]}")
    one_line_error(["inspect", "--t1", big, "--sample", str(2**24 + 1), "--jsonl", jl], 2,
                   "more than flaretune lists (2^24)")


def cache_entries(path):
    """Entries in a Kernel Tuner cache as flaretune writes it: a line each."""
    try:
        with open(path) as f:
            return sum(1 for line in f if line.startswith('"') and '"time":' in line)
    except FileNotFoundError:
        return 0


def test_kt_cache_resume():
    tmp = STATE["tmp"]
    kt = os.path.join(tmp, "r.kt.json")
    args = ["tune", "--t1", T1, "--backend", "cuda-emu", "--strategy", "exhaustive", "--budget",
            "0", "--reps", "2", "--kt-cache", kt]
    # A kernel cache of its own: compiled afresh, each evaluation takes long enough to be killed
    # in the middle of the run (from the warm cache they take a millisecond).
    env = dict(os.environ, FLARETUNE_CACHE_DIR=os.path.join(tmp, "cold-cache"))
    p = subprocess.Popen([clitest.FT] + args, stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL, env=env)
    deadline = time.time() + 300
    while time.time() < deadline and p.poll() is None and cache_entries(kt) < 6:
        time.sleep(0.02)
    p.kill()
    p.wait()
    n = cache_entries(kt)
    check(p.returncode == -9 and 6 <= n < 42, f"killed after {n} entries (exit {p.returncode})")
    with open(kt) as f:
        text = f.read()
    check(not text.rstrip().endswith("}\n}"), "the killed run's cache is left open")
    with open(kt, "a") as f:  # what a crash in the middle of a write leaves
        f.write(',\n"64,2,0,0.5": {"block_size_x": 64, "ti')
    rc, out, err = run("replay", kt, "--seeds", "1", "--json")
    rep = json.loads(out) if rc == 0 else {}
    check(rc == 0 and rep.get("valid", 0) + rep.get("rejected", 0) == n,
          f"replay of the open cache: exit {rc}: {err} {rep.get('valid')} {rep.get('rejected')}")
    t4 = os.path.join(tmp, "r.t4.json")
    prof, log = os.path.join(tmp, "r.profile.json"), os.path.join(tmp, "r.log.jsonl")
    rc, out, err = run(*args, "--t4", t4, "--profile", prof, "--log", log)
    ran = [line for line in err.splitlines() if line.startswith("tune: [")]
    check(rc == 0 and f"resumed: {n} of them" in out and
          "42 of 42 configurations evaluated (6 rejected)" in out,
          f"the same command again: exit {rc}: {out}{err[-1500:]}")
    # the rest only, and the reference again (its outputs are the check's)
    check(len(ran) == 42 - n + 1, f"{len(ran)} evaluations printed for {42 - n} left")
    with open(kt) as f:
        doc = json.load(f)  # closed now: plain JSON
    check(len(doc.get("cache", {})) == 42, f"{len(doc.get('cache', {}))} entries at the end")
    # the default's time, resumed from the cache, is its median there: never 0 nor missing
    with open(prof) as f:
        kernels = json.load(f).get("kernels", [])
    dmed = kernels[0].get("default", {}).get("stats", {}).get("median_s", 0) if kernels else 0
    check(dmed > 0, f"the profile's default median after a resume: {dmed}")
    with open(log) as f:
        ends = [json.loads(l) for l in f if '"run_end"' in l]
    check(ends and (ends[-1].get("default_stats") or {}).get("median_s", 0) > 0,
          f"run_end's default_stats after a resume: {ends[-1:] and ends[-1].get('default_stats')}")
    with open(t4) as f:  # the resumed results keep the time they were measured at
        stamps = [r.get("timestamp", "") for r in json.load(f).get("results", [])]
    check(len(stamps) == 42 and all(re.match(r"20\d\d-\d\d-\d\d \d\d:\d\d:\d\d", t)
                                    for t in stamps),
          f"the T4 file's timestamps, resumed ones too: {sorted(set(stamps))[:3]}")
    doc["tune_params"]["block_size_x"] = [32, 64]
    other = os.path.join(tmp, "other.kt.json")
    dump(other, doc)
    one_line_error(["tune", "--t1", T1, "--backend", "cuda-emu", "--kt-cache", other], 2,
                   "another tuning problem (its tune_params differs")
    with open(other) as f:
        check(json.load(f) == doc, "the refused cache is left as it was")
    # An entry with no time nor error name (a negative time, a missing one) is a broken cache,
    # refused as replay refuses it, never resumed as a failed configuration.
    with open(kt) as f:
        doc = json.load(f)
    for bad in (-5, None, 0):
        broken = json.loads(json.dumps(doc))
        key = next(k for k, e in broken["cache"].items() if isinstance(e.get("time"), float))
        if bad is None:
            del broken["cache"][key]["time"]
        else:
            broken["cache"][key]["time"] = bad
        path = os.path.join(tmp, "broken.kt.json")
        dump(path, broken)
        before = open(path).read()
        one_line_error(["tune", "--t1", T1, "--backend", "cuda-emu", "--kt-cache", path], 1,
                       f'cache entry "{key}" has no positive "time"')
        one_line_error(["replay", path, "--seeds", "1"], 1, "has no positive")
        check(open(path).read() == before, f"time {bad!r}: the refused cache is left as it was")
    # A cache another run holds (its lock taken) is refused, left as it was: two runs on one
    # cache lost the first one's later entries.
    before = open(kt).read()
    with open(kt + ".lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        one_line_error(["tune", "--t1", T1, "--backend", "cuda-emu", "--kt-cache", kt], 1,
                       "--kt-cache")
    check(open(kt).read() == before, "the cache another run holds is left as it was")


def write_npy(path, descr, values):
    """A 1-D .npy file (format 1.0) of values, packed as descr ('<f4' or '<i4') says."""
    header = f"{{'descr': '{descr}', 'fortran_order': False, 'shape': ({len(values)},), }}"
    header += " " * (63 - (10 + len(header)) % 64) + "\n"
    with open(path, "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode())
        f.write(struct.pack(f"<{len(values)}{descr[-2]}", *values))


def test_reference_file():
    tmp = STATE["tmp"]
    with open(T1) as f:
        doc = json.load(f)
    for a in doc["KernelSpecification"]["Arguments"]:
        if a["Name"] in ("x", "coef"):
            a["FillType"], a["FillValue"] = "Constant", 2.0 if a["Name"] == "x" else 3.0
    t1 = os.path.join(tmp, "saxpy_constant.json")
    dump(t1, doc)
    kfile = os.path.join(HERE, "data", "t1", "saxpy_tiled.cu")
    good, bad = os.path.join(tmp, "y.npy"), os.path.join(tmp, "y_bad.npy")
    write_npy(good, "<f4", [7.0] * 10000)
    write_npy(bad, "<f4", [7.0] * 5 + [8.0] + [7.0] * 9994)
    args = ["tune", "--t1", t1, "--kernel-file", kfile, "--backend", "cuda-emu", "--strategy",
            "exhaustive", "--budget", "0", "--reps", "1"]
    t4 = os.path.join(tmp, "ref.t4.json")
    rc, out, err = run(*args, "--reference", "y=" + good, "--t4", t4)
    rejected = [l for l in err.splitlines() if "rejected:" in l]
    with open(t4) as f:
        invalid = [r["invalidity"] for r in json.load(f)["results"] if r["invalidity"] != "correct"]
    check(invalid == ["correctness"] * 6, f"a disagreement with the file is T4's correctness: {invalid}")
    check(rc == 0 and "42 of 42 configurations evaluated (6 rejected)" in out,
          f"against the file: exit {rc}: {out}{err[-1500:]}")
    check(len(rejected) == 6 and all("tile_size_x=3" in l and "the reference file's 7" in l
                                     for l in rejected),
          f"the six wrong configurations, against the file: {rejected[:2]}")
    rc, out, err = run(*args, "--reference", "y=" + bad)
    rejected = [l for l in err.splitlines() if "rejected:" in l]
    check(rc == 0 and "(42 rejected)" in out and "best:" not in out and
          "y[5] = 7, the reference file's 8" in err,
          f"a wrong file rejects the default configuration and every other: exit {rc}: {out}"
          f"{err[-800:]}")
    short, ints = os.path.join(tmp, "y_short.npy"), os.path.join(tmp, "y_int.npy")
    write_npy(short, "<f4", [7.0] * 9999)
    write_npy(ints, "<i4", [7] * 10000)
    one_line_error(args + ["--reference", "y=" + short], 2,
                   "9999 float32 values, where output y holds 10000 float")
    one_line_error(args + ["--reference", "y=" + ints], 2, "10000 int32 values")
    one_line_error(args + ["--reference", "x=" + good], 2, "not an output of")
    one_line_error(args + ["--reference", good], 2, "NAME=FILE.npy is needed")
    one_line_error(args + ["--reference", "y=" + os.path.join(tmp, "none.npy")], 1, "none.npy")


FLAGS_CU = r"""
__global__ void flags(int *idx, unsigned char *sat, const float *x, int n) {
    int i = blockIdx.x * block_size_x + threadIdx.x;
    if (i >= n) return;
    float v = x[i] * 400.0f;
#if bug == 1
    idx[i] = v < 200.0f ? 7 : i;        /* 7 where -1 is right */
#elif bug == 2
    idx[i] = v < 200.0f ? -1 : i + 1;   /* every other index off by one */
#elif bug == 4
    if (!(v < 200.0f)) idx[i] = i;      /* never writes the -1s */
#else
    idx[i] = v < 200.0f ? -1 : i;
#endif
#if bug == 3
    sat[i] = v >= 255.0f ? 0 : (unsigned char)v;   /* wraps where it should saturate at 255 */
#elif bug == 5
    if (!(v >= 255.0f)) sat[i] = (unsigned char)v; /* never writes the 255s */
#else
    sat[i] = v >= 255.0f ? 255 : (unsigned char)v;
#endif
}
"""


def test_integer_outputs():
    """Integer outputs compare exactly, and an int32 -1 or a uint8 255 the reference writes (the
    bytes of the reset pattern) is checked like any value: each wrong configuration is
    rejected, and the right one at another block size passes."""
    tmp = STATE["tmp"]
    with open(os.path.join(tmp, "flags.cu"), "w") as f:
        f.write(FLAGS_CU)
    vec = {"MemoryType": "Vector", "FillType": "Constant", "Size": "ProblemSize[0]",
           "FillValue": 0}
    doc = {"General": {"BenchmarkName": "flags", "OutputFormat": "JSON"},
           "ConfigurationSpace": {"TuningParameters": [
               {"Name": "block_size_x", "Type": "int", "Values": "[32, 64]", "Default": 32},
               {"Name": "bug", "Type": "int", "Values": "[0, 1, 2, 3, 4, 5]", "Default": 0}],
               "Conditions": []},
           "KernelSpecification": {
               "Language": "CUDA", "CompilerOptions": ["-std=c++11"], "BenchmarkName": "flags",
               "KernelName": "flags", "KernelFile": "flags.cu", "GlobalSizeType": "CUDA",
               "LocalSize": {"X": "block_size_x", "Y": "1", "Z": "1"},
               "GridDivX": ["block_size_x"], "ProblemSize": [512], "SharedMemory": 0,
               "Arguments": [
                   dict(vec, Name="idx", Type="int32", AccessType="WriteOnly", Output=1),
                   dict(vec, Name="sat", Type="uint8", AccessType="WriteOnly", Output=1),
                   dict(vec, Name="x", Type="float", AccessType="ReadOnly", FillType="Random",
                        FillValue=1.0),
                   {"Name": "n", "Type": "int32", "MemoryType": "Scalar", "FillValue": 512}]}}
    t1 = os.path.join(tmp, "flags.json")
    dump(t1, doc)
    rc, out, err = run("tune", "--t1", t1, "--backend", "cuda-emu", "--strategy", "exhaustive",
                       "--budget", "0", "--reps", "1")
    rejected = sorted(re.search(r"bug=(\d)", l).group(1) + ("idx" if "idx[" in l else "sat")
                      for l in err.splitlines() if "rejected:" in l)
    check(rc == 0 and "12 of 12 configurations evaluated (10 rejected)" in out,
          f"ten wrong configurations of twelve: exit {rc}: {out}{err[-1500:]}")
    check(rejected == ["1idx", "1idx", "2idx", "2idx", "3sat", "3sat", "4idx", "4idx", "5sat",
                       "5sat"], f"each rejected for its own wrong output: {rejected}")
    check("integers compare exactly" in err and "the reference configuration's -1" in err
          and "the reference configuration's 255" in err,
          f"the messages name the values the reset pattern hid: {err[-1200:]}")
    check(err.count("not written, where the reference configuration wrote -1") == 2
          and err.count("not written, where the reference configuration wrote 255") == 2,
          f"an element left as the reset's bytes is not written: {err[-1200:]}")
    # A kernel that reads an output declared WriteOnly: its results depend on the reset, and
    # nothing can be checked against them: refused in one line, naming the fix.
    with open(os.path.join(tmp, "acc.cu"), "w") as f:
        f.write("__global__ void acc(float *y, const float *x, int n) {\n"
                "    int i = blockIdx.x * block_size_x + threadIdx.x;\n"
                "    if (i < n) y[i] += x[i];\n}\n")
    doc["General"]["BenchmarkName"] = doc["KernelSpecification"]["BenchmarkName"] = "acc"
    spec = doc["KernelSpecification"]
    spec["KernelName"], spec["KernelFile"] = "acc", "acc.cu"
    spec["Arguments"] = [dict(vec, Name="y", Type="float", AccessType="WriteOnly", Output=1),
                         dict(vec, Name="x", Type="float", AccessType="ReadOnly",
                              FillType="Random", FillValue=1.0),
                         {"Name": "n", "Type": "int32", "MemoryType": "Scalar", "FillValue": 512}]
    doc["ConfigurationSpace"]["TuningParameters"] = doc["ConfigurationSpace"]["TuningParameters"][:1]
    acc = os.path.join(tmp, "acc.json")
    dump(acc, doc)
    one_line_error(["tune", "--t1", acc, "--backend", "cuda-emu", "--strategy", "exhaustive",
                    "--budget", "0", "--reps", "1"], 1, "declare it ReadWrite")
    # A default configuration that writes none of an output: every right configuration would be
    # rejected for having nothing to compare, and the broken default would win. Refused.
    with open(os.path.join(tmp, "lazy.cu"), "w") as f:
        f.write("__global__ void lazy(float *y, const float *x, int n) {\n"
                "    int i = blockIdx.x * block_size_x + threadIdx.x;\n"
                "    if (mode == 1 && i < n) y[i] = 2.0f * x[i];\n}\n")
    doc["General"]["BenchmarkName"] = spec["BenchmarkName"] = "lazy"
    spec["KernelName"], spec["KernelFile"] = "lazy", "lazy.cu"
    doc["ConfigurationSpace"]["TuningParameters"].append(
        {"Name": "mode", "Type": "int", "Values": "[0, 1]", "Default": 0})
    lazy = os.path.join(tmp, "lazy.json")
    dump(lazy, doc)
    for cmd in ("tune", "bench"):
        one_line_error([cmd, "--t1", lazy, "--backend", "cuda-emu", "--reps", "1"], 1,
                       "wrote no element of its output y")


MIX_CU = """extern "C" __global__ void mix(float2 *out, const float2 *in, unsigned key,
                                    const unsigned short *h, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = make_float2(in[i].x + (float)(key % 7u), in[i].y * (float)h[i]);
}
"""


def test_schema_forms():
    """What the schema allows and the BAT suite's files write, run end to end: no ProblemSize
    (GlobalSize in threads sizes the grid), a tunable of Type uint, a float2 vector (Size counts
    float2s), a uint32 scalar past 2^31 and a uint16 vector, checked against the known output."""
    tmp = STATE["tmp"]
    with open(os.path.join(tmp, "mix.cu"), "w") as f:
        f.write(MIX_CU)
    n, key = 300, 4000000001
    doc = {"ConfigurationSpace": {"TuningParameters": [
               {"Name": "block_size_x", "Type": "uint", "Values": "[32, 64]", "Default": 32}]},
           "KernelSpecification": {
               "Language": "CUDA", "KernelName": "mix", "KernelFile": "mix.cu",
               "LocalSize": {"X": "block_size_x"}, "GlobalSize": {"X": str(n)},
               "Arguments": [
                   {"Name": "out", "Type": "float2", "MemoryType": "Vector", "Size": n,
                    "AccessType": "WriteOnly", "FillType": "Constant", "FillValue": 0, "Output": 1},
                   {"Name": "in", "Type": "float2", "MemoryType": "Vector", "Size": n,
                    "AccessType": "ReadOnly", "FillType": "Constant", "FillValue": 1.5},
                   {"Name": "key", "Type": "uint32", "MemoryType": "Scalar", "FillValue": key},
                   {"Name": "h", "Type": "uint16", "MemoryType": "Vector", "Size": n,
                    "AccessType": "ReadOnly", "FillType": "Constant", "FillValue": 3},
                   {"Name": "n", "Type": "int32", "MemoryType": "Scalar", "FillValue": n}]}}
    t1 = os.path.join(tmp, "mix.json")
    dump(t1, doc)
    want = os.path.join(tmp, "mix_out.npy")
    write_npy(want, "<f4", [1.5 + key % 7, 4.5] * n)
    rc, out, err = run("tune", "--t1", t1, "--backend", "cuda-emu", "--strategy", "exhaustive",
                       "--budget", "0", "--reps", "1", "--reference", f"out={want}")
    check(rc == 0 and "2 of 2 configurations evaluated (0 rejected)" in out,
          f"both configurations match the known output: exit {rc}: {out}{err[-1500:]}")


GEN_CU = """extern "C" __global__ void gen(float *out, const double *a, const int *k,
                                    const float2 *v, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = (float)(a[i] * k[i]) + v[i].x - v[i].y;
}
"""


def test_generator_fill():
    """FillType "Generator" (the BAT suite's TRIAD file): each value is DataSource evaluated at its
    index i, a vector type's components counted one by one, checked end to end against the
    output those inputs give; a value outside the Type's range anywhere in the buffer (here only
    in its middle, which reading the file does not look at) is refused in one line before any
    configuration runs."""
    tmp = STATE["tmp"]
    with open(os.path.join(tmp, "gen.cu"), "w") as f:
        f.write(GEN_CU)
    n = 1000

    def doc(k_type, k_source):
        return {"ConfigurationSpace": {"TuningParameters": [
                    {"Name": "block_size_x", "Type": "int", "Values": "[32, 64]", "Default": 32}]},
                "KernelSpecification": {
                    "Language": "CUDA", "KernelName": "gen", "KernelFile": "gen.cu",
                    "LocalSize": {"X": "block_size_x"}, "GlobalSize": {"X": str(n)},
                    "GlobalSizeType": "OpenCL",
                    "Arguments": [
                        {"Name": "out", "Type": "float", "MemoryType": "Vector", "Size": n,
                         "AccessType": "WriteOnly", "FillType": "Constant", "FillValue": 0,
                         "Output": 1},
                        {"Name": "a", "Type": "double", "MemoryType": "Vector", "Size": n,
                         "AccessType": "ReadOnly", "FillType": "Generator",
                         "DataSource": "(i % 7) * 0.5"},
                        {"Name": "k", "Type": k_type, "MemoryType": "Vector", "Size": n,
                         "AccessType": "ReadOnly", "FillType": "Generator", "DataSource": k_source},
                        {"Name": "v", "Type": "float2", "MemoryType": "Vector", "Size": n,
                         "AccessType": "ReadOnly", "FillType": "Generator", "DataSource": "i"},
                        {"Name": "n", "Type": "int32", "MemoryType": "Scalar", "FillValue": n}]}}
    t1 = os.path.join(tmp, "gen.json")
    dump(t1, doc("int32", "i // 3 - 100"))
    rc, out, err = run("space", "--t1", t1)
    check(rc == 0 and "generator (i % 7) * 0.5" in out and "generator i // 3 - 100" in out,
          f"space names each Generator: exit {rc}: {out}{err}")
    # v[i] = (2i, 2i + 1): x - y is -1 for every i
    want = os.path.join(tmp, "gen_out.npy")
    write_npy(want, "<f4", [(i % 7) * 0.5 * (i // 3 - 100) - 1 for i in range(n)])
    rc, out, err = run("tune", "--t1", t1, "--backend", "cuda-emu", "--strategy", "exhaustive",
                       "--budget", "0", "--reps", "1", "--reference", f"out={want}")
    check(rc == 0 and "2 of 2 configurations evaluated (0 rejected)" in out,
          f"the generated inputs give the known output: exit {rc}: {out}{err[-1500:]}")
    # uint8 values i % 300: 0 first, 999 % 300 = 99 last, 256 at i = 256
    dump(t1, doc("uint8", "i % 300"))
    one_line_error(["bench", "--t1", t1, "--backend", "cuda-emu"], 1,
                   "argument k: DataSource at i=256: 256 is out of the range of Type uint8")


def test_profile():
    """--profile: the best configuration merged into a profile's kernels, the faster of two runs
    kept, beside op entries already there; `show` lists it; `emit` writes it as JSON and as a C
    header a C compiler builds and looks it up in; an unusable profile refused before any run."""
    tmp = STATE["tmp"]
    prof = os.path.join(tmp, "t1.profile.json")
    shutil.copy(os.path.join(HERE, "..", "profiles", "h200.json"), prof)
    with open(prof) as f:
        nops = len(json.load(f)["entries"])
    medians = []
    for seed in ("1", "2"):
        rc, out, err = run("tune", "--t1", T1, "--backend", "cuda-emu", "--budget", "4", "--reps",
                           "2", "--seed", seed, "--profile", prof)
        check(rc == 0 and f"profile: {prof}" in out, f"tune --profile: exit {rc}: {out}{err[-1500:]}")
        best = re.search(r"best: (\S+): ([0-9.e+-]+) ms", out)
        if best:
            medians.append((float(best.group(2)) * 1e-3, best.group(1)))
    with open(prof) as f:
        doc = json.load(f)
    ks = doc.get("kernels", [])
    check(doc.get("schema_version") == 2 and len(doc.get("entries", [])) == nops and len(ks) == 1,
          f"one kernel beside the {nops} op entries: {doc.get('schema_version')}, {len(ks)} kernels")
    if len(ks) != 1 or len(medians) != 2:
        return
    k = ks[0]
    want = min(medians)
    cfg = ",".join(f"{n}={v}" for n, v in k["config"].items())
    check(k["kernel"] == "saxpy_tiled" and k["backend"] == "cuda-emu" and
          k["problem_size"] == [10000] and k["evaluations"] == 4 and k["space_valid"] == 42,
          f"the kernel's key and counts: {k}")
    check(abs(k["stats"]["median_s"] - want[0]) <= 1e-3 * want[0] and cfg == want[1],
          f"the faster run kept: {k['stats']['median_s']} {cfg}, runs {medians}")
    check(k["default"]["config"] == {"block_size_x": 64, "tile_size_x": 1, "use_ldg": 0,
                                     "scale": "2.0"}, f"default: {k['default']}")
    rc, out, err = run("show", prof)
    check(rc == 0 and "kernels of T1 files:" in out and "saxpy_tiled" in out and cfg in out,
          f"show: exit {rc}: {out}{err}")
    rc, out, err = run("show", prof, "--op", "t1:saxpy_tiled")
    check(rc == 0 and "saxpy_tiled" in out and "fusion.dflare" not in out
          and "stopped" not in out, f"show --op t1:saxpy_tiled: the kernel alone: exit {rc}: {out}{err}")
    # A kernel of a run Ctrl-C stopped is marked so.
    stopped = os.path.join(STATE["tmp"], "stopped-kernel.json")
    with open(prof) as f:
        sdoc = json.load(f)
    for kk in sdoc["kernels"]:
        kk["interrupted"] = True
    dump(stopped, sdoc)
    rc, out, err = run("show", stopped, "--op", "t1:saxpy_tiled")
    check(rc == 0 and "stopped" in out.splitlines()[-1], f"show marks a stopped kernel: {out}{err}")
    rc, out, err = run("emit", prof, "--format", "json")
    recs = json.loads(out) if rc == 0 else []
    krec = [r for r in recs if r.get("kernel") == "saxpy_tiled"]
    check(len(recs) == nops + 1 and len(krec) == 1 and krec[0]["params"] == k["config"],
          f"emit json: exit {rc}: {len(recs)} records")
    # Two more kernels, as a hand-edited profile may hold them: a name of 200 characters and
    # UTF-8, a value at the end of the integers. The header keeps them whole and compiles.
    long_name = "k" * 199 + "\u00e9"
    extra = dict(k, kernel=long_name, config={"block_size_x": -2**63, "scale": "0.5"})
    with open(prof) as f:
        doc = json.load(f)
    doc["kernels"].append(extra)
    dump(prof, doc)
    header = os.path.join(tmp, "tuned_t1.h")
    rc, out, err = run("emit", prof, "-o", header)
    check(rc == 0 and f"{nops + 2} entries" in err, f"emit c-header: exit {rc}: {out}{err}")
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc and rc == 0:
        src, exe = os.path.join(tmp, "use_t1.c"), os.path.join(tmp, "use_t1")
        with open(src, "w", encoding="utf-8") as f:
            f.write('#include <stdio.h>\n#include "tuned_t1.h"\n'
                    "int main(void) {\n"
                    "    long long ps[] = {10000};\n"
                    "    int exact = 0;\n"
                    '    const ft_tuned_entry *e = ft_tuned_lookup_v("t1:saxpy_tiled", NULL, NULL,'
                    " NULL, ps, 1, &exact);\n"
                    '    printf("%d %lld %s\\n", exact, ft_tuned_param_int(e, "block_size_x", -1),'
                    ' ft_tuned_param_label(e, "scale", "?"));\n'
                    '    e = ft_tuned_lookup_v("t1:' + long_name + '", NULL, NULL, NULL, ps, 1, &exact);\n'
                    '    printf("%d %lld\\n", exact, ft_tuned_param_int(e, "block_size_x", -1));\n'
                    "    return 0;\n}\n")
        p = subprocess.run([cc, "-std=c99", "-Wall", "-Wextra", "-Wconversion", "-pedantic",
                            "-Werror", "-I", tmp, src, "-o", exe], capture_output=True, text=True)
        check(p.returncode == 0, f"the header compiles: {p.stderr}")
        if p.returncode == 0:
            got = subprocess.run([exe], capture_output=True, text=True).stdout.split()
            check(got == ["1", str(k["config"]["block_size_x"]), k["config"]["scale"], "1",
                          str(-2**63)],
                  f"the header's lookups: {got}, profile {k['config']}")
    # A name longer than the 4095 characters ISO C promises a string literal: the header would
    # fail -pedantic where it is included, so emit refuses it in one line and the header written
    # before stays as it was; json takes it.
    with open(header, "rb") as f:
        before = f.read()
    doc["kernels"].append(dict(k, kernel="k" * 4096))
    dump(prof, doc)
    rc, out, err = run("emit", prof, "-o", header)
    with open(header, "rb") as f:
        after = f.read()
    check(rc == 1 and "C string literal" in err and len(err.strip().splitlines()) == 1 and
          after == before, f"emit c-header of a 4096-character name: exit {rc}: {err[:300]}")
    rc, out, err = run("emit", prof, "--format", "json")
    check(rc == 0 and any(len(r.get("kernel", "")) == 4096 for r in json.loads(out or "[]")),
          f"emit json of a 4096-character name: exit {rc}: {err[:300]}")
    # Checked before the search: a profile in a folder that does not exist.
    one_line_error(["tune", "--t1", T1, "--backend", "cuda-emu", "--profile",
                    os.path.join(tmp, "nope", "p.json")], 1, "nope")


def test_event_log():
    tmp = STATE["tmp"]
    log = os.path.join(tmp, "t1.jsonl")
    args = ["tune", "--t1", T1, "--backend", "cuda-emu", "--strategy", "exhaustive", "--budget",
            "0", "--reps", "2", "--log", log]
    rc, out, err = run(*args)
    with open(log) as f:
        events = [json.loads(line) for line in f]
    kinds = [e["event"] for e in events]
    check(rc == 0 and kinds[0] == "run_start" and kinds[-1] == "run_end" and
          kinds.count("measured") == 36 and kinds.count("rejected") == 6,
          f"the run's events: exit {rc}: {kinds[:3]}...{kinds[-2:]} {err[-500:]}")
    start, end = events[0], events[-1]
    check(start.get("op") == "t1:saxpy_tiled" and start.get("space_valid") == 42 and
          start.get("default") == {"block_size_x": 64, "tile_size_x": 1, "use_ldg": 0,
                                   "scale": "2.0"} and
          len({e.get("run") for e in events}) == 1, f"run_start: {start}")
    rej = [e for e in events if e["event"] == "rejected"]
    check(all(e["config"]["tile_size_x"] == 3 and e["reason"] == "verify" and
              "not written" in e["message"] for e in rej), f"rejected: {rej[:1]}")
    meas = [e for e in events if e["event"] == "measured"]
    fastest = min(meas, key=lambda e: e["stats"]["median_s"])
    check(all(e["stats"]["median_s"] > 0 and e["stats"]["samples"] == 2 for e in meas) and
          end.get("winner") == fastest["config"] and
          end.get("stats", {}).get("median_s") == fastest["stats"]["median_s"] and
          end.get("evaluations") == 42 and end.get("rejected") == 6 and
          end.get("search_end") == "exhausted", f"run_end: {end}")
    best = ",".join(f"{k}={v}" for k, v in fastest["config"].items())
    check(f"best: {best}:" in out, f"the printed best is the log's winner: {best} {out}")
    with open(log + ".lock", "a") as lock:  # another process holds the log
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        one_line_error(args, 1, "t1.jsonl")
    with open(log) as f:
        check(len(f.read().splitlines()) == len(events), "the refused run wrote nothing")
    one_line_error(["replay", log], 1, "replay the Kernel Tuner cache")
    # export writes the log's measurements as the community's formats: every configuration the
    # run evaluated, with the median the log recorded, the rejected ones as failures.
    t4 = os.path.join(tmp, "t1_log.t4.json")
    rc, _, err = run("export", log, "--format", "t4", "-o", t4)
    check(rc == 0, f"export --format t4 of a T1 log: exit {rc}: {err}")
    with open(t4) as f:
        res = json.load(f)["results"]
    got = {tuple(r["configuration"].values()): r for r in res}
    want = {tuple(e["config"].values()): e for e in events if e["event"] in ("measured", "rejected")}
    check(set(got) == set(want) and len(res) == 42, f"export: {len(res)} results, want 42")
    for k, e in want.items():
        r = got.get(k)
        if e["event"] == "measured":
            ok = r and r["invalidity"] == "correct" and \
                abs(r["measurements"][0]["value"] - e["stats"]["median_s"] * 1e3) < 1e-9
        else:
            ok = r and r["invalidity"] == "correctness"
        check(ok, f"export of {k}: {r} against the log's {e['event']} {e.get('stats', {}).get('median_s')}")
    kt = os.path.join(tmp, "t1_log.kt.json")
    rc, _, err = run("export", log, "--format", "kt-cache", "-o", kt)
    rc2, out2, err2 = run("replay", kt, "--seeds", "2", "--json")
    rep = json.loads(out2) if rc2 == 0 else {}
    check(rc == 0 and rep.get("valid") == 42 and rep.get("rejected") == 6,
          f"the exported cache replays: {rc} {err} {rc2} {err2} {rep.get('valid')}")
    with open(t4) as f:
        costs = [r["times"]["compilation"] for r in json.load(f)["results"]]
    check(all(c > 0 for c in costs), f"every evaluation's cost is the log's cost_s: {costs[:5]}")
    # The space comes from the T1 file the log names: without it, one line.
    with open(log) as f:
        text = f.read()
    moved = os.path.join(tmp, "t1_moved.jsonl")
    with open(moved, "w") as f:
        f.write(text.replace(json.dumps(T1)[1:-1], os.path.join(tmp, "gone.json")))
    one_line_error(["export", moved, "--format", "t4"], 1, "gone.json")
    # A file edited since (another problem size) is refused rather than written for the log's
    # measurements; so is an output that would overwrite the T1 file.
    with open(T1) as f:
        edited = json.load(f)
    edited["KernelSpecification"]["ProblemSize"] = [20000]
    for a in edited["KernelSpecification"]["Arguments"]:
        if a["Name"] == "n":
            a["FillValue"] = 20000
    other_t1 = os.path.join(tmp, "saxpy_edited.json")
    dump(other_t1, edited)
    with open(os.path.join(tmp, "t1_edited.jsonl"), "w") as f:
        f.write(text.replace(json.dumps(T1)[1:-1], other_t1))
    one_line_error(["export", os.path.join(tmp, "t1_edited.jsonl"), "--format", "t4"], 1,
                   "has changed since the log's run")
    one_line_error(["export", log, "--format", "t4", "-o", T1], 2, "T1 file or kernel it reads")
    # A run given its T1 file relative to where it ran: exported from elsewhere, the file is
    # found beside the log.
    sub = os.path.join(tmp, "sub")
    os.makedirs(sub, exist_ok=True)
    for name in ("saxpy_tiled.json", "saxpy_tiled.cu"):
        shutil.copy(os.path.join(os.path.dirname(T1), name), sub)
    p = subprocess.run([clitest.FT, "tune", "--t1", "saxpy_tiled.json", "--backend", "cuda-emu",
                        "--budget", "3", "--log", "run.jsonl"], cwd=sub, capture_output=True,
                       text=True)
    rc, out, err = run("export", os.path.join(sub, "run.jsonl"), "--format", "t4")
    check(p.returncode == 0 and rc == 0 and len(json.loads(out or "{}").get("results", [])) == 3,
          f"export of a run given a relative path: {p.returncode} {rc} {err}")


def test_interrupt():
    tmp = STATE["tmp"]
    kt, log = os.path.join(tmp, "int.kt.json"), os.path.join(tmp, "int.jsonl")
    env = dict(os.environ, FLARETUNE_CACHE_DIR=os.path.join(tmp, "cold-cache-2"))
    p = subprocess.Popen([clitest.FT, "tune", "--t1", T1, "--backend", "cuda-emu", "--strategy",
                          "exhaustive", "--budget", "0", "--reps", "2", "--kt-cache", kt,
                          "--log", log], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True, env=env)
    deadline = time.time() + 300
    while time.time() < deadline and p.poll() is None and cache_entries(kt) < 3:
        time.sleep(0.02)
    p.send_signal(2)  # SIGINT
    out, err = p.communicate(timeout=120)
    with open(kt) as f:
        doc = json.load(f)  # closed: plain JSON
    n = len(doc.get("cache", {}))
    check(p.returncode == 130 and "stopped after" in err and 3 <= n < 42 and
          f"{n} of 42 configurations evaluated" in out,
          f"Ctrl-C part way: exit {p.returncode}, {n} entries: {out} {err[-600:]}")
    with open(log) as f:
        end = json.loads(f.read().splitlines()[-1])
    check(end.get("event") == "run_end" and end.get("interrupted") is True and
          end.get("search_end") == "interrupted" and end.get("evaluations") == n,
          f"run_end of the interrupted run: {end}")


def test_interrupt_group():
    """Ctrl-C at a terminal signals the whole foreground process group, the emulator's compiler
    of the configuration in flight included: that compiler runs in a group of its own and
    finishes, so no configuration is recorded as failing to compile for it (a false entry the
    resumed run would never evaluate again)."""
    tmp = STATE["tmp"]
    for k in range(3):
        kt = os.path.join(tmp, f"grp{k}.kt.json")
        env = dict(os.environ, FLARETUNE_CACHE_DIR=os.path.join(tmp, f"cold-cache-grp{k}"))
        p = subprocess.Popen([clitest.FT, "tune", "--t1", T1, "--backend", "cuda-emu", "--strategy",
                              "exhaustive", "--budget", "0", "--reps", "2", "--kt-cache", kt],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                             start_new_session=True)
        deadline = time.time() + 300
        while time.time() < deadline and p.poll() is None and cache_entries(kt) < 2 + k:
            time.sleep(0.02)
        os.killpg(p.pid, 2)  # SIGINT to the group, as a terminal sends it
        out, err = p.communicate(timeout=120)
        with open(kt) as f:
            entries = json.load(f).get("cache", {})
        failed = [key for key, e in entries.items() if not isinstance(e.get("time"), (int, float))]
        check(p.returncode == 130 and all(key.split(",")[1] == "3" for key in failed),
              f"Ctrl-C to the group ({k}): exit {p.returncode}, failures only of tile_size_x=3: "
              f"{failed} {err[-400:]}")


def test_bad():
    one_line_error(["space", "--t1", os.path.join(STATE["tmp"], "nope.json")], 1, "cannot open")
    one_line_error(["space", "--t1", T1, "--kernel-file", "/nonexistent.cu"], 1, "/nonexistent.cu")
    one_line_error(["space", "--list"], 2, "--list goes with --t1")
    one_line_error(["space", "fusion.dflare", "--kernel-file", "/x.cu"], 2,
                   "--kernel-file goes with --t1")
    # An op's options are unknown with --t1, not taken and ignored; one selection of many.
    for extra in (["--preset", "tiny.dflare.train"], ["--set", "N=5"], ["--backend", "cpu"]):
        one_line_error(["space", "--t1", T1, *extra], 2, f"space --t1: unknown option '{extra[0]}'")
    for cmd in ("compile", "inspect"):
        one_line_error([cmd, "--t1", T1, "--sample", "2", "--all-configs"], 2,
                       "--all-configs or --sample K, not both")
    one_line_error(["tune", "--t1", T1, "--backend", "cpu"], 2, "cuda or cuda-emu")
    one_line_error(["tune", "--t1", T1, "--strategy", "nope"], 2, "unknown strategy")
    one_line_error(["tune", "--t1", T1, "--arg", "x=half:4"], 2, "TYPE")
    one_line_error(["tune", "--t1", T1, "--jobs", "1"], 2, "tune --t1: unknown option '--jobs'")
    one_line_error(["inspect", "--t1", T1, "--sample", "3"], 2, "--jsonl")
    # An output that is the T1 file or its kernel, or a --t4 that could not be written at the
    # end, is refused before the search, the files left as they were.
    copy = os.path.join(STATE["tmp"], "saxpy_outputs.json")
    with open(T1) as f:
        doc = json.load(f)
    kfile = os.path.join(os.path.dirname(T1), doc["KernelSpecification"]["KernelFile"])
    doc["KernelSpecification"]["KernelFile"] = kfile
    dump(copy, doc)
    before = open(copy).read()
    for opt, target, rc, needle in (("--log", copy, 2, "is the T1 file or the kernel it tunes"),
                                    ("--t4", copy, 2, "is the T1 file or the kernel it tunes"),
                                    ("--kt-cache", kfile, 2, "is the T1 file or the kernel"),
                                    ("--profile", copy, 1, "not a flaretune profile"),
                                    ("--t4", STATE["tmp"], 1, "is a directory"),
                                    ("--t4", "/nonexistent/x.json", 1, "/nonexistent/x.json")):
        one_line_error(["tune", "--t1", copy, "--backend", "cuda-emu", "--budget", "2", opt,
                        target], rc, needle)
    check(open(copy).read() == before, "the T1 file left as it was")
    # A T4 file that cannot be written at the end (a full disk): exit 1, and the summary does
    # not name it as written.
    rc, out, err = run("tune", "--t1", copy, "--backend", "cuda-emu", "--budget", "2", "--t4",
                       "/dev/full")
    check(rc == 1 and "No space left" in err and "T4 results" not in out,
          f"--t4 /dev/full: exit {rc}: {out[-300:]} {err[-300:]}")
    # A file that declares no output has nothing to check configurations against: refused
    # before the search, not every configuration but the default rejected (below).
    with open(T1) as f:
        doc = json.load(f)
    for arg in doc["KernelSpecification"]["Arguments"]:
        arg.pop("Output", None)
    doc["KernelSpecification"]["KernelFile"] = kfile
    # No argument marked Output (the schema has no such field): what AccessType says the kernel
    # writes (y, ReadWrite) is checked, and a note says so.
    unmarked = os.path.join(STATE["tmp"], "unmarked.json")
    dump(unmarked, doc)
    rc, out, err = run("tune", "--t1", unmarked, "--backend", "cuda-emu", "--budget", "2")
    check(rc == 0 and "(0 rejected)" in out and
          "no argument is marked Output: the ones whose AccessType writes (y) are checked" in err,
          f"outputs from AccessType: {rc} {out[-300:]} {err[-300:]}")
    # ... and with nothing written either, nothing to check: refused.
    for arg in doc["KernelSpecification"]["Arguments"]:
        arg["AccessType"] = "ReadOnly"
    nout = os.path.join(STATE["tmp"], "no_outputs.json")
    dump(nout, doc)
    for cmd in (["tune", "--t1", nout, "--backend", "cuda-emu", "--budget", "2"],
                ["bench", "--t1", nout, "--backend", "cuda-emu"]):
        rc, out, err = run(*cmd)
        said = [l for l in err.splitlines() if not l.startswith(f"{cmd[0]}: note:")]
        check(rc == 1 and len(said) == 1 and "declares no output" in said[0],
              f"{cmd[0]} of a file that writes nothing: {rc} {err!r}")
    # A space whose size overflows 64 bits (16 parameters of 64 values): said so and refused,
    # not a size of 0 or a negative one.
    with open(T1) as f:
        doc = json.load(f)
    doc["KernelSpecification"]["KernelFile"] = kfile
    doc["ConfigurationSpace"]["TuningParameters"] += [
        {"Name": f"unused_{i}", "Type": "int", "Values": str(list(range(64))), "Default": 0}
        for i in range(16)]
    huge = os.path.join(STATE["tmp"], "huge.json")
    dump(huge, doc)
    one_line_error(["space", "--t1", huge], 1, "more than 2^63 configurations")
    # Two outputs that name one file (the last written would replace the other), an existing
    # cache or a new one, spelled alike or not, are refused before the search.
    cache = os.path.join(STATE["tmp"], "shared_out.kt.json")
    shutil.copyfile(copy, cache)
    same = os.path.join(STATE["tmp"], ".", "shared_out.kt.json")
    for a, b, target in (("--kt-cache", "--t4", cache), ("--log", "--t4", same),
                         ("--log", "--kt-cache", os.path.join(STATE["tmp"], "new_out"))):
        one_line_error(["tune", "--t1", copy, "--backend", "cuda-emu", "--budget", "2", a, target,
                        b, cache if target == same else target], 2, "both name")
    check(open(cache).read() == before, "the file named twice left as it was")
    check(not os.path.exists(os.path.join(STATE["tmp"], "new_out")), "nothing made")
    # A kernel that does not compile is the kernel's failure (exit 1), in text and in JSON.
    with open(os.path.join(STATE["tmp"], "broken.cu"), "w") as f:
        f.write("__global__ void saxpy_tiled(float *y) { this is not C; }\n")
    with open(T1) as f:
        doc = json.load(f)
    doc["KernelSpecification"]["KernelFile"] = "broken.cu"
    broken = os.path.join(STATE["tmp"], "broken.json")
    dump(broken, doc)
    one_line_error(["inspect", "--t1", broken], 1)
    # ... and so is it for bench and tune: the default configuration's failure to compile is
    # the kernel's, not the command line's.
    one_line_error(["bench", "--t1", broken, "--backend", "cuda-emu"], 1, "reference (default)")
    one_line_error(["tune", "--t1", broken, "--backend", "cuda-emu"], 1, "reference (default)")
    rc, out, _ = run("inspect", "--t1", broken, "--json")
    check(rc == 1 and "error" in json.loads(out), f"inspect --json of a broken kernel: {rc} {out}")
    jl = os.path.join(STATE["tmp"], "broken.jsonl")
    rc, _, err = run("inspect", "--t1", broken, "--sample", "2", "--jsonl", jl)
    check(rc == 1 and "none of the 3 configurations" in err,
          f"every configuration failed: exit {rc}: {err[-300:]}")
    one_line_error(["inspect", "--t1", T1, "--device", "nope"], 2, "unknown device")
    one_line_error(["compile", "--t1", T1, "--arch", "SM_80"], 2, "not a GPU architecture")
    one_line_error(["inspect", "--t1", T1, "--config", "tile_size_x=3,block_size_x=256"], 2,
                   "breaks the condition")
    bad = os.path.join(STATE["tmp"], "bad.json")
    with open(bad, "w") as f:
        f.write('{"ConfigurationSpace": {"TuningParameters": []}, "KernelSpecification": {}}')
    one_line_error(["space", "--t1", bad], 1, "TuningParameters")
    # Whatever is wrong in the file's content, a syntax error or an expression that cannot be
    # evaluated, a language or a launch out of range, is malformed input: exit 1, not 2.
    with open(T1) as f:
        good = json.load(f)
    ks = good["KernelSpecification"]
    for what, field, value, needle in (
            ("div", "Conditions", "block_size_x // (tile_size_x - tile_size_x)",
             "Conditions[2] at block_size_x="),
            ("overflow", "Conditions", "block_size_x ** 100 > 0", "overflow"),
            ("syntax", "Conditions", "block_size_x //", "Conditions[2]"),
            ("hip", "Language", "HIP", "Language \"HIP\""),
            ("local", "LocalSize", dict(ks["LocalSize"], X="0"), "LocalSize.X is 0"),
            ("grid", "ProblemSize", [2 ** 39], "the grid's x dimension"),
            ("missing", "KernelName", None, "KernelName is missing"),
            ("number", "KernelName", 7, "KernelName must be a string"),
            ("filenumber", "KernelFile", 5, "KernelFile must be a string")):
        doc = json.loads(json.dumps(good))
        if field == "Conditions":
            doc["ConfigurationSpace"]["Conditions"].append({"Expression": value})
        elif value is None:
            del doc["KernelSpecification"][field]
        else:
            doc["KernelSpecification"][field] = value
        path = os.path.join(STATE["tmp"], f"bad_{what}.json")
        dump(path, doc)
        kfile = os.path.join(os.path.dirname(T1), "saxpy_tiled.cu")
        for cmd in ("space", "tune", "bench", "compile"):
            if cmd == "compile" and not has_nvrtc():
                # a CPU-only build refuses compile (exit 3) before it evaluates the space
                one_line_error([cmd, "--t1", path, "--kernel-file", kfile], 3,
                               "without the CUDA toolkit")
                continue
            one_line_error([cmd, "--t1", path, "--kernel-file", kfile], 1, needle)


def test_bad_arguments():
    """What the file says of its arguments, checked before or at the reference run: an Output
    that is neither 0, 1, true nor false, and a value that evaluates to infinity, refused in one
    line; a read-write output the default configuration leaves as its fill (coef filled with 0:
    y = 0 * x + y) refused in one line, not every other configuration rejected with the default
    reported best; a constant-memory argument the kernel has no __constant__ symbol for (x)
    passed as an argument only, said so naming it, while coef is still written to its symbol, so
    the run verifies and measures every candidate; an --jsonl that is a device refused at once,
    not read without end."""
    with open(T1) as f:
        good = json.load(f)
    kfile = os.path.join(os.path.dirname(T1), good["KernelSpecification"]["KernelFile"])
    good["KernelSpecification"]["KernelFile"] = kfile

    def variant(name, edit):
        doc = json.loads(json.dumps(good))
        edit(doc)
        path = os.path.join(STATE["tmp"], name + ".json")
        dump(path, doc)
        return path

    args = lambda d: d["KernelSpecification"]["Arguments"]  # noqa: E731
    out7 = variant("output7", lambda d: args(d)[0].update(Output=7))
    one_line_error(["space", "--t1", out7], 1, "Output must be 0, 1, true or false")
    inf = variant("inf", lambda d: d["ConfigurationSpace"]["TuningParameters"][-1].update(
        Values="[1e308 * 10, 2.0]"))
    one_line_error(["space", "--t1", inf], 1, "not a finite number")
    coef0 = variant("coef0", lambda d: args(d)[2].update(FillType="Constant", FillValue=0.0))
    one_line_error(["tune", "--t1", coef0, "--backend", "cuda-emu", "--budget", "2"], 1,
                   "changed no element")
    one_line_error(["bench", "--t1", coef0, "--backend", "cuda-emu"], 1, "changed no element")
    xconst = variant("xconst", lambda d: args(d)[1].update(MemType="Constant"))
    rc, out, err = run("tune", "--t1", xconst, "--backend", "cuda-emu", "--strategy", "random",
                       "--budget", "4", "--seed", "1", timeout=900)
    check(rc == 0 and "(0 rejected)" in out and
          "note: x: the kernel has no __constant__ symbol" in err and "coef" not in err,
          f"a constant argument without its symbol: exit {rc}: {out[-400:]} {err[-400:]}")
    one_line_error(["inspect", "--t1", T1, "--jsonl", "/dev/zero"], 1, "a device, pipe or socket")
    # The first configuration tried fails to compile on its own (#error at block_size_x = 32):
    # that is no sign of which symbols the kernel lacks, and the next configuration still finds
    # x without one and runs.
    with open(kfile) as f:
        src = f.read()
    with open(os.path.join(STATE["tmp"], "err32.cu"), "w") as f:
        f.write("#if block_size_x == 32\n#error this configuration does not compile\n#endif\n" +
                src)

    def err32(d):
        args(d)[1].update(MemType="Constant")
        d["KernelSpecification"]["KernelFile"] = os.path.join(STATE["tmp"], "err32.cu")
        tp = d["ConfigurationSpace"]["TuningParameters"]
        tp[0]["Values"], tp[1]["Values"], tp[2]["Values"], tp[3]["Values"] = \
            "[32, 64]", "[1]", [0], "[2.0]"
    e32 = variant("err32", err32)
    jl = os.path.join(STATE["tmp"], "err32.jsonl")
    rc, out, err = run("inspect", "--t1", e32, "--all-configs", "--jsonl", jl, timeout=900)
    lines = [json.loads(l) for l in open(jl)] if os.path.exists(jl) else []
    ok = [l for l in lines if "error" not in l]
    check(rc == 0 and len(lines) == 2 and len(ok) == 1 and ok[0]["config"].startswith(
          "block_size_x=64") and "note: x: the kernel has no __constant__ symbol" in err,
          f"a config failing on its own, then one without x's symbol: exit {rc}: {lines} "
          f"{err[-400:]}")
    # A read-write output that rightly stays as its fill (a flag no element sets) beside one the
    # kernel writes: tuned as before, the flag compared where it changed (nowhere).
    flag = variant("flag", lambda d: args(d).insert(3, {
        "Name": "flag", "Type": "int32", "MemoryType": "Vector", "AccessType": "ReadWrite",
        "FillType": "Constant", "Size": "4", "FillValue": 0, "Output": 1}))
    with open(os.path.join(STATE["tmp"], "flag.cu"), "w") as f:
        f.write(src.replace("const float *coef_arg, int n)", "const float *coef_arg, int *flag, "
                                                               "int n)"))
    rc, out, err = run("tune", "--t1", flag, "--kernel-file", os.path.join(STATE["tmp"], "flag.cu"),
                       "--backend", "cuda-emu", "--budget", "3", "--seed", "1", timeout=900)
    check(rc == 0 and "(0 rejected)" in out,
          f"a read-write flag left as its fill beside a written output: exit {rc}: {out[-300:]} "
          f"{err[-300:]}")


def test_small_buffers():
    """An argument declared smaller than the kernel reads or writes: on the emulator the run
    ends with one line saying which buffer was overrun and by how much (it used to corrupt the
    heap, or read another allocation in silence), for every command that launches it."""
    with open(T1) as f:
        good = json.load(f)
    kfile = os.path.join(os.path.dirname(T1), "saxpy_tiled.cu")
    needle = "past the end of a 64-byte device buffer"
    if STATE.get("sanitized"):  # heap buffers there, and AddressSanitizer's report (emu_guard.h)
        needle = "AddressSanitizer"
    for name in ("y", "x"):
        doc = json.loads(json.dumps(good))
        for a in doc["KernelSpecification"]["Arguments"]:
            if a["Name"] == name:
                a["Size"] = "16"
        path = os.path.join(STATE["tmp"], f"small_{name}.json")
        dump(path, doc)
        # (inspect's profiling modules are not instrumented: in a sanitizer build, unseen)
        cmds = [["bench"], ["tune", "--budget", "2"]] + \
            ([["inspect"]] if has_nvrtc() and not STATE.get("sanitized") else [])
        for cmd in cmds:
            args = cmd[:1] + ["--t1", path, "--kernel-file", kfile] + cmd[1:]
            if cmd[0] != "inspect":
                args += ["--backend", "cuda-emu"]
            rc, _, err = run(*args)
            lines = [l for l in err.splitlines() if l.strip()]
            if STATE.get("sanitized"):
                check(rc != 0 and needle in err and "saxpy_tiled" in err,
                      f"{args}: exit {rc}, stderr {err[-300:]!r}")
                continue
            check(rc == 1 and len(lines) == 1 and needle in lines[0] and "saxpy_tiled" in lines[0],
                  f"{args}: exit {rc} (want 1), stderr {err.strip()!r} (want one line with "
                  f"{needle!r})")


def one_bad_config(name, then):
    """saxpy_tiled.cu with one more line: in configuration (128, 1, any, 2.0), `if (... && THEN`;
    the file's path."""
    with open(os.path.join(os.path.dirname(T1), "saxpy_tiled.cu")) as f:
        src = f.read()
    marker = "    int i0 = blockIdx.x * block_size_x * tile_size_x + threadIdx.x;\n"
    check(marker in src, "saxpy_tiled.cu has the line the test extends")
    path = os.path.join(STATE["tmp"], name)
    with open(path, "w") as f:
        f.write(src.replace(marker, marker + "    if (block_size_x == 128 && tile_size_x == 1 && "
                            f"(float)scale > 1.0f && {then}\n"))
    return path


def test_overrun_resume():
    """One configuration whose kernel writes far past its output: the run ends on it with one
    line, its failure is in the Kernel Tuner cache all the same, and the same command again goes
    on past it to the end of the space."""
    tmp = STATE["tmp"]
    bad = one_bad_config("overrun.cu", "i0 == 0) y[n + 100000] = 1.0f;")
    kt = os.path.join(tmp, "overrun.kt.json")
    args = ["tune", "--t1", T1, "--kernel-file", bad, "--backend", "cuda-emu", "--strategy",
            "exhaustive", "--budget", "0", "--reps", "2", "--kt-cache", kt]
    rc, _, err = run(*args)
    if STATE.get("sanitized"):  # AddressSanitizer ends the run, before any handler of ours
        check(rc != 0 and "AddressSanitizer" in err, f"sanitized: exit {rc}: {err[-300:]!r}")
        return
    lines = [l for l in err.splitlines() if l.startswith("flaretune: ")]
    check(rc == 1 and len(lines) == 1 and "past the end of a 40000-byte device buffer" in lines[0],
          f"the run ends on the overrun: exit {rc}: {err[-400:]!r}")
    with open(kt) as f:
        text = f.read()
    check('"128,1,0,2.0": {' in text and "RuntimeFailedConfig" in text,
          f"the configuration that ended the run is in the cache as failed: {text[-300:]!r}")
    rc, out, err = run(*args)
    check(rc == 0 and "42 of 42 configurations evaluated" in out,
          f"the same command again goes on past it: exit {rc}: {out[-300:]} {err[-300:]}")


def test_timeout_resume():
    """One configuration whose kernel never ends: with --candidate-timeout the run ends on it
    with one line, having recorded it as failed in the Kernel Tuner cache and as rejected
    (reason `ended`) in the log, and the same command again goes on past it to the end of the
    space, never running it again."""
    tmp = STATE["tmp"]
    bad = one_bad_config("spin.cu", "true) { volatile int spin = 1; while (spin) {} }")
    kt, log = os.path.join(tmp, "spin.kt.json"), os.path.join(tmp, "spin.jsonl")
    # (10 s: far more than any other configuration takes on the emulator, on a busy machine)
    args = ["tune", "--t1", T1, "--kernel-file", bad, "--backend", "cuda-emu", "--strategy",
            "exhaustive", "--budget", "0", "--reps", "2", "--kt-cache", kt, "--log", log,
            "--candidate-timeout", "10"]
    rc, _, err = run(*args)
    lines = [l for l in err.splitlines() if l.startswith("flaretune: ")]
    check(rc == -signal.SIGALRM and len(lines) == 1 and
          "took longer than --candidate-timeout" in lines[0] and "recorded as failed" in lines[0],
          f"the run ends on the configuration that never ends: exit {rc}: {err[-400:]!r}")
    with open(kt) as f:
        text = f.read()
    check('"128,1,0,2.0": {' in text and "RuntimeFailedConfig" in text,
          f"it is in the cache as failed: {text[-300:]!r}")
    with open(log) as f:
        events = [json.loads(l) for l in f]
    ended = [e for e in events if e["event"] == "rejected" and e.get("reason") == "ended"]
    # (the float tunable's values are the file's words, as in every event of a T1 run)
    check(len(ended) == 1 and ended[0]["config"] == {"block_size_x": 128, "tile_size_x": 1,
                                                     "use_ldg": 0, "scale": "2.0"}
          and "candidate-timeout" in ended[0]["message"],
          f"it is in the log as rejected, reason ended: {ended}")
    rc, out, err = run(*args)
    check(rc == 0 and "42 of 42 configurations evaluated" in out,
          f"the same command again goes on past it: exit {rc}: {out[-300:]} {err[-300:]}")
    # A log alone is no resume source for --t1: the line says the rerun would try it again.
    alone = [a for a in args if a not in ("--kt-cache", kt)]
    alone[alone.index(log)] = log + ".alone"
    rc, _, err = run(*alone)
    check(rc == -signal.SIGALRM and "nothing a resumed run reads records it" in err,
          f"with --log alone the line says a rerun would try it again: {err[-300:]!r}")
    rc, _, err = run("tune", "--t1", T1, "--candidate-timeout", "0.5")
    check(rc == 2 and "--candidate-timeout expects seconds" in err,
          f"a timeout under a second is refused: exit {rc}: {err!r}")


def children(pid):
    """The processes whose parent is pid (from /proc)."""
    kids = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        if int(stat[stat.rindex(")") + 2:].split()[1]) == pid:
            kids.append(int(d))
    return kids


def test_stop_twice():
    """Ctrl-C waits for the configuration that runs; one that never ends would hold it forever:
    a second Ctrl-C ends the process, the configuration recorded as failed first, and the same
    command then goes on past it to the end of the space."""
    tmp = STATE["tmp"]
    bad = one_bad_config("spin2.cu", "true) { volatile int spin = 1; while (spin) {} }")
    kt = os.path.join(tmp, "spin2.kt.json")
    args = [clitest.FT, "tune", "--t1", T1, "--kernel-file", bad, "--backend", "cuda-emu",
            "--strategy", "exhaustive", "--budget", "0", "--reps", "2", "--kt-cache", kt]
    p = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    # Its configurations come in space order: the spinning one is 128,1,0,2.0, after the others
    # of block size 32 and 64 (28 of the 42).
    deadline = time.time() + 300
    while time.time() < deadline and p.poll() is None and cache_entries(kt) < 28:
        time.sleep(0.05)
    # Then its compiler is done (a stop before the kernel runs would end the run cleanly):
    # no child process for two seconds, the kernel spinning since.
    quiet_since = time.time()
    while time.time() < deadline and p.poll() is None and time.time() - quiet_since < 2:
        if children(p.pid):
            quiet_since = time.time()
        time.sleep(0.05)
    p.send_signal(2)
    time.sleep(1)
    p.send_signal(2)
    try:
        _, err = p.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        p.kill()
        _, err = p.communicate()
        err += "\n(hung: killed)"
    check(p.returncode == -2 and "stopped again while a configuration ran" in err and
          "recorded as failed" in err, f"a second Ctrl-C ends it: exit {p.returncode}: {err[-400:]!r}")
    with open(kt) as f:
        text = f.read()
    check('"128,1,0,2.0": {' in text and "RuntimeFailedConfig" in text,
          f"the configuration in flight is in the cache as failed: {text[-300:]!r}")
    rc, out, err = run(*args[1:])
    check(rc == 0 and "42 of 42 configurations evaluated" in out,
          f"the same command again goes on past it: exit {rc}: {out[-300:]} {err[-300:]}")


def has_nvrtc():
    """Whether this flaretune was built with the CUDA toolkit (compile --t1 then runs)."""
    if "nvrtc" not in STATE:
        rc, _, err = run("compile", "--t1", T1, "--json")
        STATE["nvrtc"] = not (rc == 3 and "without the CUDA toolkit" in err)
    return STATE["nvrtc"]


def main():
    ft = sys.argv[sys.argv.index("--flaretune") + 1]
    # --sanitized 1: a sanitizer build, whose emulator keeps heap buffers for AddressSanitizer
    STATE["sanitized"] = "--sanitized" in sys.argv and \
        sys.argv[sys.argv.index("--sanitized") + 1] == "1"
    with tempfile.TemporaryDirectory(prefix="test_t1_cli.") as tmp:
        STATE["tmp"] = tmp
        return clitest.main(ft, (test_space, test_tune, test_compile, test_tune_gpu_absent, test_bench, test_inspect,
                                 test_sample_past_list,
                                 test_kt_cache_resume, test_reference_file,
                                 test_integer_outputs, test_schema_forms, test_generator_fill, test_profile, test_event_log,
                                 test_interrupt, test_interrupt_group, test_bad, test_bad_arguments,
                                 test_small_buffers, test_overrun_resume, test_timeout_resume,
                                 test_stop_twice))


if __name__ == "__main__":
    sys.exit(main())
