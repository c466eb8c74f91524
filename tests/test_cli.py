#!/usr/bin/env python3
"""test_cli.py: the command line's contract: help on every command, exit codes, one-line
errors, JSON outputs that parse and carry the documented keys, bench on every op.

usage: test_cli.py --flaretune PATH
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import clitest  # noqa: E402
from clitest import check, one_line_error, run  # noqa: E402

COMMANDS = ["list", "space", "exec", "bench", "version"]
OPS = ["fusion.dflare", "fusion.dflash", "attention.kvproj", "attention.decode",
       "attention.train", "loss", "linear"]


def test_help():
    rc, out, err = run()
    check(rc == 2 and "usage: flaretune" in err, "no arguments: usage on stderr, exit 2")
    rc, out, _ = run("help")
    check(rc == 0 and all(c in out for c in COMMANDS), "help lists every command")
    for c in COMMANDS:
        for form in ([c, "--help"], ["help", c]):
            rc, out, _ = run(*form)
            check(rc == 0 and out.startswith(f"usage: flaretune {c}"), f"{form} prints usage")
    one_line_error(["bogus"], 2, "unknown command 'bogus'")
    one_line_error(["help", "bogus"], 2, "unknown command 'bogus'")
    one_line_error(["help", "tune", "extra"], 2, "help takes one command")
    # help about help is the overview; help written into a full disk is a failure, exit 1
    for form in (["help", "help"], ["help", "--help"], ["--help", "-h"]):
        rc, out, _ = run(*form)
        check(rc == 0 and all(c in out for c in COMMANDS), f"{form}: the overview")
    for form in (["help"], ["help", "tune"], ["exec", "--help"]):
        with open("/dev/full", "w") as full:
            p = subprocess.run([clitest.FT, *form], stdout=full, stderr=subprocess.PIPE, text=True)
        check(p.returncode == 1 and "write failed" in p.stderr,
              f"{form} > /dev/full: exit {p.returncode}: {p.stderr!r}")
    one_line_error(["version", "extra"], 2)


def test_help_says_what_commands_take():
    """--timer is in the help of every command that takes it; `help` says report measures (not
    only renders); `list presets` names sizes as ops and --set do (nseq, not nq) and shows I."""
    for c in ("bench", "tune", "exec"):
        rc, out, _ = run(c, "--help")
        check(rc == 0 and "--timer" in out, f"{c} --help lists --timer")
    rc, out, _ = run("help")
    line = [l for l in out.splitlines() if l.startswith("  report ")]
    check(line and "measure" in line[0] and "render" in line[0],
          f"help: report measures and renders: {line}")
    rc, out, _ = run("list", "presets")
    header = out.splitlines()[1].split()
    check(rc == 0 and "nseq" in header and "nq" not in header and "I" in header,
          f"list presets: nseq and I in the header: {header}")
    tiny = [l.split() for l in out.splitlines() if l.startswith("  tiny.dflare.train ")]
    check(tiny and tiny[0][header.index("I")] == "128" and tiny[0][header.index("nseq")] == "2",
          f"tiny.dflare.train: I 128, nseq 2: {tiny}")


def test_ctypes_example_without_numpy():
    """docs/examples/api_ctypes.py under a Python without NumPy (one is shadowed here): one line
    saying what it needs and exit 1, not a traceback."""
    example = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "docs",
                           "examples", "api_ctypes.py")
    lib = os.path.join(os.path.dirname(os.path.abspath(clitest.FT)), "libflaretune.so.0")
    with tempfile.TemporaryDirectory() as tmp:
        os.makedirs(os.path.join(tmp, "numpy"))
        with open(os.path.join(tmp, "numpy", "__init__.py"), "w") as f:
            f.write("raise ImportError('No module named numpy')\n")
        env = dict(os.environ, PYTHONPATH=tmp)
        p = subprocess.run([sys.executable, example, lib, "cpu"], capture_output=True, text=True,
                           env=env, timeout=60)
    lines = [l for l in p.stderr.splitlines() if l.strip()]
    check(p.returncode == 1 and len(lines) == 1 and "needs NumPy" in lines[0] and
          "Traceback" not in p.stderr, f"the example without NumPy: {p.returncode} {p.stderr!r}")


def blas_core(out):
    line = [l for l in out.splitlines() if l.strip().startswith("blas core")][0]
    return line.split()[2], line


def test_version_and_blas_core():
    """The documented rule, whatever this machine's environment sets (some machines of this kind
    set OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE for every process): without OPENBLAS_CORETYPE,
    FLARETUNE_BLAS_CORE=NAME restarts with that core; an explicit OPENBLAS_CORETYPE is respected
    (no restart, whatever FLARETUNE_BLAS_CORE says); FLARETUNE_BLAS_CORE=keep keeps what OpenBLAS
    detected."""
    rc, out, _ = run("version")
    check(rc == 0 and out.startswith("flaretune ") and "blas core" in out, "version")
    bare = {"OPENBLAS_CORETYPE": None, "FLARETUNE_BLAS_DETECTED": None}
    rc, out, _ = run("version", env={**bare, "FLARETUNE_BLAS_CORE": "keep"})
    detected, line = blas_core(out)
    check(rc == 0 and "detected" not in line, f"keep: OpenBLAS's own choice ({line!r})")
    forced = "Haswell" if detected.lower() != "haswell" else "Prescott"
    rc, out, _ = run("version", env={**bare, "FLARETUNE_BLAS_CORE": forced})
    check(rc == 0 and f"blas core  {forced} (OpenBLAS detected {detected}" in out,
          f"without OPENBLAS_CORETYPE, FLARETUNE_BLAS_CORE={forced} restarts with that core: {out!r}")
    for explicit in (detected, forced):
        rc, out, _ = run("version", env={**bare, "OPENBLAS_CORETYPE": explicit,
                                         "FLARETUNE_BLAS_CORE": "Prescott" if explicit != "Prescott" else "Haswell"})
        core, line = blas_core(out)
        check(rc == 0 and "detected" not in line and core.lower() == explicit.lower(),
              f"an explicit OPENBLAS_CORETYPE={explicit} is respected: {line!r}")


def test_version_cpus():
    """version says how many CPUs the process may use and the device key its profiles get: all
    of them when OpenMP binds its threads (OMP_PROC_BIND pins the main thread to one CPU before
    main: its own mask is not the process's), one under `taskset -c` to one CPU, with or
    without binding."""
    mine = sorted(os.sched_getaffinity(0))
    if len(mine) < 2 or not shutil.which("taskset"):
        return
    n = len(mine)
    for env in ({}, {"OMP_PROC_BIND": "true"}, {"OMP_PLACES": "cores"}):
        rc, out, err = run("version", env=env)
        check(rc == 0 and re.search(rf"cpus +{n} of \d+ online usable \(the profile's device: "
                                    rf"cpu: .* x {n} \(", out), f"{env}: {out!r} {err!r}")
    for env in ({}, {"OMP_PROC_BIND": "true"}):
        p = subprocess.run(["taskset", "-c", str(mine[-1]), clitest.FT, "version"],
                           capture_output=True, text=True, env={**os.environ, **env})
        check(p.returncode == 0 and re.search(r"cpus +1 of \d+ online usable \(the profile's "
                                              r"device: cpu: .* x 1 \(", p.stdout),
              f"taskset -c {mine[-1]} {env}: {p.stdout!r} {p.stderr!r}")

def test_version_is_the_tree():
    """The version names the commit the binary was built from (written at every build, not when
    the build was configured): in a git checkout, the HEAD's abbreviated hash."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    p = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=root, capture_output=True,
                       text=True)
    if p.returncode != 0:
        return  # not a checkout: "unknown"
    rc, out, _ = run("version")
    first = out.splitlines()[0] if out else ""
    check(rc == 0 and p.stdout.strip()[:7] in first,
          f"version names HEAD {p.stdout.strip()}: {first!r} (a binary of another commit: rebuild)")


def test_list():
    rc, out, _ = run("list", "--json")
    check(rc == 0, "list --json exit 0")
    doc = json.loads(out)
    check([o["name"] for o in doc["ops"]] == OPS, "list --json: the seven ops in order")
    check(len(doc["presets"]) == 24, f"24 presets, got {len(doc['presets'])}")
    names = {b["name"]: b for b in doc["backends"]}
    check("ref" in names and "cpu" in names, "ref and cpu backends listed")
    check(names["cpu"]["available"] and set(names["cpu"]["ops"]) == set(OPS),
          "cpu backend available with every op")
    loss = [o for o in doc["ops"] if o["name"] == "loss"][0]
    check({t["name"] for t in loss["tensors"]} >= {"h", "w_lm", "labels", "mask", "loss", "dh"},
          "loss tensors")
    for section in ("ops", "presets", "backends"):
        rc, out, _ = run("list", section)
        check(rc == 0 and out.startswith(section.upper()), f"list {section}")
    one_line_error(["list", "bogus"], 2, "unknown section")


def test_space():
    for op in OPS:
        rc, out, err = run("space", op, "--backend", "cpu", "--json")
        check(rc == 0, f"space {op}: {err}")
        if rc:
            continue
        d = json.loads(out)
        check(d["valid"] >= 1 and d["size"] >= d["valid"], f"space {op}: sizes {d['size']}/{d['valid']}")
        check(any(p["name"] == "threads" for p in d["params"]), f"space {op}: has threads")
    one_line_error(["space", "nope"], 2, "unknown op")


def test_rope_at_presets():
    """The targets' RoPE reaches attention.kvproj: `list presets` names each target's, `space`
    says which one a preset's kvproj rotates with (an --attr rope_* replaces it), and `step`
    records it in the kv_proj stage's attributes."""
    rc, out, _ = run("list", "presets")
    rope = {l.split()[0]: l for l in out.splitlines() if "rope_theta=" in l}
    check(rc == 0 and "rope_theta=500000 rope_scaling=llama3 rope_factor=8" in
          rope.get("llama3.1-8b", ""), f"list presets: Llama 3.1's RoPE: {rope.get('llama3.1-8b')}")
    check("rope_theta=150000 rope_scaling=yarn rope_factor=32" in rope.get("gpt-oss-20b", "") and
          "rope_truncate=0" in rope.get("gpt-oss-20b", ""),
          f"list presets: gpt-oss's RoPE: {rope.get('gpt-oss-20b')}")
    check("rope_scaling=none" in rope.get("qwen3-8b", ""), "list presets: Qwen3 unscaled")
    rc, out, _ = run("list", "presets", "--json")
    doc = {p["name"]: p for p in json.loads(out)["presets"]}
    g = doc["gpt-oss-20b.dflare.train"]["rope"]
    check(g["rope_scaling"] == "yarn" and g["rope_factor"] == 32 and g["rope_truncate"] is False,
          f"list presets --json: gpt-oss rope {g}")
    rc, out, err = run("space", "attention.kvproj", "--backend", "cpu", "--preset",
                       "llama3.1-8b.dflare.train", "--json")
    check(rc == 0 and json.loads(out)["attrs"]["rope_scaling"] == "llama3", f"space: {err}")
    rc, out, err = run("space", "attention.kvproj", "--backend", "cpu", "--preset",
                       "llama3.1-8b.dflare.train", "--attr", "rope_theta=10000")
    check(rc == 0 and "rope_theta=10000 rope_scaling=none" in out,
          f"space with --attr rope_theta: the call's RoPE stands: {out[:300]}")
    shrink = ["--set", "H=64", "--set", "Hq=4", "--set", "Hkv=2", "--set", "dh=16", "--set",
              "V=320", "--set", "I=128", "--set", "D=2", "--set", "T=3", "--set", "R=2", "--set",
              "L=13"]
    rc, out, err = run("step", "gpt-oss-20b.dflash.decode", *shrink, "--backend", "cpu",
                       "--time", "0.02", "--json")
    kv = [st for st in json.loads(out)["stages"] if st["name"] == "kv_proj"] if rc == 0 else []
    check(kv and kv[0]["attrs"]["rope_scaling"] == "yarn" and
          kv[0]["attrs"]["rope_theta"] == "150000", f"step: kv_proj at gpt-oss: {err[-300:]}")
    one_line_error(["space", "attention.kvproj", "--attr", "rope_scaling=ntk"], 2, "rope_scaling")


def test_exec_config_errors():
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "out")
        base = ["exec", "loss", "--preset", "tiny.dflare.train", "--backend", "cpu", "--out", out]
        one_line_error(base + ["--config", "bogus=1"], 2, "unknown parameter 'bogus'")
        one_line_error(base + ["--threads", "0"], 2, "--threads")
        one_line_error(base + ["--config", "threads=1", "--threads", "2"], 2, "disagrees")
        one_line_error(["exec", "loss", "--preset", "nope", "--out", out], 2, "unknown preset")
        one_line_error(["exec", "loss", "--preset", "tiny.dflare.train", "--set", "Q=1",
                        "--out", out], 2, "unknown size 'Q'")
        one_line_error(["exec", "loss", "--preset", "tiny.dflare.train", "--backend", "nope",
                        "--out", out], 2, "unknown backend")
        check(not os.path.exists(out), "nothing written on errors")
        rc, o, err = run(*base, "--threads", "1")
        check(rc == 0 and "threads=1" in o, f"exec --threads 1 runs: {err}")
        check(os.path.exists(os.path.join(out, "loss.npy")), "exec wrote loss.npy")


def test_duplicate_configs_run():
    """A config the tuner skips as the twin of another (k_layers with k >= D is all_layers;
    vecs_per_thread=4 has vecs_per_thread=2's threads per row) still runs when asked for: exec,
    bench, watch and compile agree, and bench and compile say it is a twin."""
    rc, out, _ = run("list", "--json")
    cuda_built = {b["name"]: b for b in json.loads(out)["backends"]}["cuda"]["built"]
    pre = ["fusion.dflare", "--preset", "tiny.dflare.train"]
    env = {"FLARETUNE_CACHE_DIR": os.environ.get("FLARETUNE_CACHE_DIR", "")}
    with tempfile.TemporaryDirectory() as tmp:
        outs = {}
        for cfg in ("strategy=all_layers", "strategy=k_layers,k=4", "vecs_per_thread=2",
                    "vecs_per_thread=4"):
            outs[cfg] = os.path.join(tmp, cfg.replace(",", "_"))
            rc, _, err = run("exec", *pre, "--backend", "cuda-emu", "--config", cfg, "--out",
                             outs[cfg], env=env)
            check(rc == 0, f"exec --config {cfg} runs: {err.strip()!r}")
        for a, b in (("strategy=all_layers", "strategy=k_layers,k=4"),
                     ("vecs_per_thread=2", "vecs_per_thread=4")):
            fa, fb = (os.path.join(outs[x], "f.npy") for x in (a, b))
            check(os.path.exists(fa) and os.path.exists(fb)
                  and open(fa, "rb").read() == open(fb, "rb").read(),
                  f"{b} computes what {a} does")
        for cfg, needle in (("strategy=k_layers,k=4", "is all_layers"),
                            ("vecs_per_thread=4", "same 32 threads per row")):
            rc, out, err = run("bench", *pre, "--backend", "cuda-emu", "--config", cfg, "--json",
                               "--max-time", "0.1", env=env)
            check(rc == 0 and needle in err and "a tuner skips it" in err,
                  f"bench --config {cfg}: {rc} {err.strip()!r}")
            if rc == 0:
                check(json.loads(out)["median_s"] > 0, f"bench --config {cfg} timed it")
            if cuda_built:
                rc, _, err = run("compile", *pre, "--config", cfg, env=env)
                check(rc == 0 and needle in err, f"compile --config {cfg}: {rc} {err.strip()!r}")
        one_line_error(["bench", *pre, "--backend", "cuda-emu", "--config", "vec_bytes=2",
                        "--max-time", "0.1"], 2, "config not valid")


BENCH_KEYS = ["op", "preset", "backend", "config", "median_s", "iqr_s", "samples", "bytes",
              "flops", "gbps", "gflops", "roofline_s", "roofline_frac", "peak_extra_bytes", "load", "busy"]


def test_exec_profile_why():
    """exec --profile says where its config came from (README), and when the profile gave none,
    why: no entry of the op here, or entries with other attributes (which)."""
    with tempfile.TemporaryDirectory() as d:
        prof = os.path.join(d, "p.json")
        rc, _, err = run("tune", "loss", "--preset", "tiny.dflare.train", "--backend", "cpu",
                         "--budget", "1", "--confirm", "1", "--max-time", "0.003", "--profile",
                         prof, "--quiet")
        check(rc == 0, f"a one-candidate tune writes a profile: {err.strip()}")
        base = ["exec", "loss", "--preset", "tiny.dflare.train", "--backend", "cpu", "--profile",
                prof]
        rc, out, err = run(*base)
        check(rc == 0 and "  from profile\n" in out, f"the entry's attributes: from profile: {out!r}")
        rc, out, err = run(*base, "--attr", "scheme=dpace")
        check(rc == 0 and "from default (the profile's loss entries for cpu on this device have "
              "other attributes: scheme=decay (this call: dpace))" in out,
              f"other attributes: the default, and why: {out!r}")
        rc, out, err = run("exec", "linear", "--preset", "tiny.dflare.train", "--backend", "cpu",
                           "--profile", prof)
        check(rc == 0 and "from default (the profile has no linear entry for cpu on this device)"
              in out, f"no entry of the op: the default, and why: {out!r}")
        # an entry of the op on another device only: both devices named
        rc, _, err = run("tune", "linear", "--preset", "tiny.dflare.train", "--backend", "cpu",
                         "--budget", "1", "--confirm", "1", "--max-time", "0.003", "--profile",
                         prof, "--quiet")
        with open(prof) as f:
            doc = json.load(f)
        here = next(e["device"] for e in doc["entries"] if e["op"] == "loss")
        for e in doc["entries"]:
            if e["op"] == "linear":
                e["device"] = "cpu: Elsewhere x 1 (Haswell)"
        with open(prof, "w") as f:
            json.dump(doc, f)
        rc, out, err = run("exec", "linear", "--preset", "tiny.dflare.train", "--backend", "cpu",
                           "--profile", prof)
        check(rc == 0 and f"from default (the profile has no linear entry for cpu on this device, "
              f"'{here}': it has one for 'cpu: Elsewhere x 1 (Haswell)')" in out,
              f"the op's entry on another device: both named: {out!r} {err[-200:]}")
        rc, out, err = run("exec", "linear", "--preset", "tiny.dflare.train", "--backend", "cpu",
                           "--profile", prof, "--any-device")
        check(rc == 0 and "  from profile\n" in out,
              f"--any-device takes the other device's entry: {out!r} {err[-200:]}")
        one_line_error(["exec", "linear", "--preset", "tiny.dflare.train", "--any-device"], 2,
                       "--any-device goes with --profile")


def test_exec_profile_threads():
    """A profile entry asking for more threads than this machine has cores runs with as many
    threads as there are cores, and exec says so on its config line (docs/profiles.md)."""
    loss_attrs = {"B": "4", "scheme": "decay", "gamma": "7", "gamma0": "1", "gamma_max": "7",
                  "step": "0", "warmup_steps": "0", "alpha": "0.5", "num_seqs": "1",
                  "norm": "default", "want_dw": "0", "dtype": "f32"}
    base = ["exec", "loss", "--preset", "tiny.dflare.train", "--backend", "cpu", "--profile"]
    with tempfile.TemporaryDirectory() as d:
        prof = os.path.join(d, "p.json")

        def write(threads, device):
            e = clitest.entry(40, 1e-5, backend="cpu", device=device,
                              config={"strategy": "online", "chunk": 16, "vtile": 256,
                                      "parallel": "vocab", "threads": threads})
            e["shape"].update({"H": 64, "V": 320})
            e["verification"]["shape"] = e["shape"]
            e["attrs"] = loss_attrs
            with open(prof, "w") as f:
                json.dump({"schema_version": 1, "entries": [e]}, f)

        # This machine's device, as the refusal of another device's profile names it.
        write(1, "cpu: Elsewhere x 1 (Haswell)")
        _, _, err = run(*base, prof)
        marker = "this context runs on '"
        check(marker in err, f"a profile of another device is refused naming this one: {err!r}")
        if marker not in err:
            return
        device = err.split(marker, 1)[1].split("'", 1)[0]
        write(4096, device)
        rc, out, err = run(*base, prof)
        line = next((l for l in out.splitlines() if l.startswith("  config ")), "")
        check(rc == 0 and "vtile=256" in line and "from profile (the profile's threads=4096 is "
              "more than the " in line and "CPUs here: run with " in line,
              f"too many threads: the entry runs, with the machine's cores, and says so: {out!r}")


def test_bench_counts_exact():
    """bench --json counts to the byte and the FLOP (they were rounded to six digits:
    27000800 bytes for 27000832), and so are the cache levels' capacities."""
    rc, out, err = run("bench", "linear", "--preset", "small.dflare.decode", "--backend", "cpu",
                       "--json", "--max-time", "0.2")
    check(rc == 0, f"bench linear small: {err}")
    if rc:
        return
    d = json.loads(out)
    m, n, k = (d["dims"][x] for x in "MNK")
    check(d["bytes"] == 4 * (m * k + n * k + m * n) and d["flops"] == 2 * m * n * k,
          f"bench linear: bytes {d['bytes']} and flops {d['flops']} exact at {d['dims']}")
    caps = [l["capacity_bytes"] for l in d["ceilings"]["levels"] if l["capacity_bytes"]]
    check(all(c == int(c) and int(c) % 1024 == 0 for c in caps), f"cache capacities: {caps}")


def test_bench():
    for op in OPS:
        preset = "tiny.dflare.decode" if op == "attention.decode" else "tiny.dflare.train"
        for extra in ([], ["--cold"]):
            args = ["bench", op, "--preset", preset, "--backend", "cpu", "--json",
                    "--max-time", "0.2", *extra]
            rc, out, err = run(*args)
            check(rc == 0, f"{args}: {err}")
            if rc:
                continue
            d = json.loads(out)
            missing = [k for k in BENCH_KEYS if k not in d]
            check(not missing, f"bench {op}: missing keys {missing}")
            check(d["op"] == op and d["backend"] == "cpu" and d["samples"] >= 1, f"bench {op} basics")
            check(d["median_s"] > 0 and d["iqr_s"] >= 0 and d["bytes"] > 0 and d["flops"] > 0,
                  f"bench {op}: positive numbers")
            # A fraction above 1 cannot be a result: bench measures again and, if it holds,
            # says so; it never prints one silently. (Its size is a timing: not asserted here.)
            check(d["roofline_frac"] > 0, f"bench {op}: roofline fraction {d['roofline_frac']}")
            check(d["roofline_frac"] <= 1 or (d["roofline_suspect"] and d["remeasured"]
                                              and "above the roof" in err),
                  f"bench {op}: a fraction of {d['roofline_frac']} is flagged")
            r = d["roofline"]
            level = r["level"]
            names = [l["name"] for l in d["ceilings"]["levels"]]
            check(level in names and r["bytes_per_s"] > 0 and r["working_set_bytes"] >= d["bytes"],
                  f"bench {op}: judged against a measured level ({level} of {names})")
            # --cold: judged against memory, unless its rotated input sets stay in the cache
            # (small inputs: at most 32 sets); then against the level all of them fit in.
            rot = d.get("cold_rotation", {})
            check(not extra or ("fits_in_cache" in rot and (
                level == names[-1] if not rot["fits_in_cache"]
                else r["working_set_bytes"] >= rot["bytes"])),
                  f"bench {op} --cold: judged against memory or, its rotation cached, the level it "
                  f"fits in: {level} of {names}, rotation {rot}, working set "
                  f"{r['working_set_bytes']}")
            check("known" in d["load"], f"bench {op}: the machine's load is reported")
            check(abs(d["gbps"] * 1e9 * d["median_s"] - d["bytes"]) < 1e-6 * d["bytes"] + 1,
                  f"bench {op}: gbps consistent with bytes / median")
            check(d["cold"] == bool(extra), f"bench {op}: cold flag")
            check(d["clock"] == "host", f"bench {op}: the CPU is timed by the host clock")
    rc, out, err = run("bench", "loss", "--preset", "tiny.dflare.train", "--backend", "cpu",
                       "--max-time", "0.2", "--attr", "scheme=dpace")
    check(rc == 0 and "roofline" in out and "median" in out, f"bench human output: {err}")
    one_line_error(["bench", "loss", "--backend", "cpu", "--max-time", "-1"], 2, "--max-time")
    one_line_error(["bench", "loss", "--backend", "cpu", "--config", "threads=999"], 2, "threads=999")


def gpu_present():
    rc, out, _ = run("list", "--json")
    return any(b["name"] == "cuda" and b["available"] for b in json.loads(out)["backends"])


def test_device_backends():
    """cuda without a GPU: one line, exit 3; cuda-emu runs the CUDA code and keys its results
    by the emulator, never a GPU; --timer and dtype are checked."""
    gpu = gpu_present()
    rc, out, err = run("list", "--json")
    be = {b["name"]: b for b in json.loads(out)["backends"]}
    check("cuda-emu" in be and be["cuda-emu"]["available"], "cuda-emu is listed as available")
    check("fusion.dflare" in be["cuda-emu"]["ops"], "cuda-emu implements fusion.dflare")
    check(be["cuda-emu"]["device"].startswith("cuda-emu: "), f"emu device {be['cuda-emu']}")
    if not gpu:
        # Built with the toolkit: no device is exit 3 with the reason; without it, exit 2.
        built = be["cuda"]["built"]
        check(not be["cuda"]["available"] and (be["cuda"]["why"] or not built),
              "cuda unavailable, with a why")
        code, needle = (3, "cannot run here") if built else (2, "not built into this binary")
        for cmd in ("exec", "bench"):
            one_line_error([cmd, "fusion.dflare", "--preset", "tiny.dflare.train", "--backend",
                            "cuda"], code, needle)
    one_line_error(["bench", "fusion.dflare", "--backend", "cpu", "--timer", "sundial"], 2,
                   "unknown timer")
    one_line_error(["bench", "fusion.dflare", "--preset", "tiny.dflare.train", "--backend", "cpu",
                    "--attr", "dtype=bf16", "--max-time", "0.1"], 2, "does not store dtype=bf16")
    one_line_error(["tune", "fusion.dflare", "--preset", "tiny.dflare.train", "--backend", "cpu",
                    "--attr", "dtype=bf16"], 2, "does not store dtype=bf16")
    env = {"FLARETUNE_CACHE_DIR": os.environ.get("FLARETUNE_CACHE_DIR", "")}
    rc, out, err = run("bench", "fusion.dflare", "--preset", "tiny.dflare.train", "--backend",
                       "cuda-emu", "--json", "--max-time", "0.2", env=env)
    check(rc == 0, f"bench on cuda-emu: {err}")
    if rc == 0:
        d = json.loads(out)
        check(d["clock"] == "emulated" and d["backend"] == "cuda-emu",
              f"emulation timings are labelled: {d['clock']}")
    with tempfile.TemporaryDirectory() as tmp:
        prof = os.path.join(tmp, "p.json")
        for dt in ("f32", "bf16"):
            rc, out, err = run("tune", "fusion.dflare", "--preset", "tiny.dflare.train",
                               "--backend", "cuda-emu", "--attr", f"dtype={dt}", "--budget", "3",
                               "--max-time", "0.1", "--quiet", "--profile", prof, env=env)
            check(rc == 0, f"tune on cuda-emu ({dt}): {err}")
        if os.path.exists(prof):
            entries = json.load(open(prof))["entries"]
            check(len(entries) == 2, f"one entry per dtype, got {len(entries)}")
            for e in entries:
                check(e["backend"] == "cuda-emu" and e["device"].startswith("cuda-emu: "),
                      f"emulated entry keyed by the emulator: {e['backend']} {e['device']}")
                tol = 1e-2 if e["attrs"]["dtype"] == "bf16" else 1e-5
                check(e["verification"]["tolerance"] == tol, f"tolerance {e['verification']}")
        # On an empty kernel cache each candidate's modules compile before the watchdog's clock
        # starts: a compile (a second or so) is not the candidate's time. Counted as its own, it
        # stopped most of them (past 50 ms), and the run ranked almost nothing.
        log = os.path.join(tmp, "fresh.jsonl")
        rc, out, err = run("tune", "fusion.dflare", "--preset", "tiny.dflare.train", "--backend",
                           "cuda-emu", "--strategy", "random", "--budget", "6", "--max-time",
                           "0.1", "--quiet", "--log", log,
                           env={"FLARETUNE_CACHE_DIR": os.path.join(tmp, "fresh-cache")})
        check(rc == 0, f"tune on cuda-emu with an empty kernel cache: {err}")
        if rc == 0:
            ev = [json.loads(l) for l in open(log)]
            stopped = [e["stopped"] for e in ev if e["event"] == "measured" and "stopped" in e]
            check(len(stopped) <= 1, f"an empty kernel cache stopped candidates: {stopped}")


def test_tune_jobs():
    """tune --jobs N compiles the candidates' kernels ahead on N threads (on cuda-emu only when
    asked): a run with --jobs 2 on an empty module cache (the pool compiles every module while
    the search waits for the ones it needs) verifies the same candidates with the same errors
    as a run without it, and each run's winner is one of the candidates it verified (which one
    is a matter of timing, not asserted). The second run, on the cache the first filled,
    compiles no module. --jobs outside 1..64 is a usage error. The watchdog is off: on a busy
    machine it may stop an emulated candidate, which is not what this test is about."""
    for bad in ("0", "x", "65"):
        one_line_error(["tune", "fusion.dflare", "--preset", "tiny.dflare.train", "--backend",
                        "cuda-emu", "--jobs", bad], 2, "--jobs expects 1 to 64")
    one_line_error(["tune", "fusion.dflare", "--preset", "tiny.dflare.train", "--backend",
                    "cuda-emu", "--jobs", ""], 2, "option '--jobs' needs a value")
    runs = []
    with tempfile.TemporaryDirectory() as tmp:
        env = {"FLARETUNE_CACHE_DIR": os.path.join(tmp, "cache")}
        for jobs in (["--jobs", "2"], []):
            log = os.path.join(tmp, f"t{len(runs)}.jsonl")
            rc, out, err = run("tune", "fusion.dflare", "--preset", "tiny.dflare.train",
                               "--backend", "cuda-emu", "--budget", "2", "--max-time", "0.1",
                               "--watchdog", "off", "--quiet", "--log", log, *jobs, env=env)
            check(rc == 0, f"tune on cuda-emu {jobs}: exit {rc}: {err}")
            if rc != 0:
                return
            ev = [json.loads(line) for line in open(log)]
            verdicts = [(e["event"], json.dumps(e["config"], sort_keys=True), e.get("max_rel_err"))
                        for e in ev if e["event"] in ("verified", "rejected")]
            runs.append((verdicts, ev[-1]["winner"], ev[-1].get("kernel_modules", {})))
    (v_jobs, w_jobs, _), (v_plain, w_plain, m_plain) = runs
    check(len(v_plain) == 2 and v_jobs == v_plain,
          f"the same candidates verified with the same errors: {v_jobs} vs {v_plain}")
    for verdicts, winner, _ in runs:
        ok = {c for kind, c, _ in verdicts if kind == "verified"}
        check(winner is not None and json.dumps(winner, sort_keys=True) in ok,
              f"the winner {winner} is one of the verified candidates")
    check(m_plain.get("compiled") == 0 and m_plain.get("cached", 0) >= 1,
          f"the second run compiles nothing: {m_plain}")


def test_tune_predict():
    """tune --predict h200 on cuda-emu: every candidate event carries its predicted time and
    bound, run_start says the device and what was pruned, the summary says it; the exhaustive
    strategy measures the fastest predicted first (after the default). --prune predicted=1000
    prunes nothing; predicted=1.0001 keeps only the candidates tied with the best prediction
    (and the default). Bad factors, criteria, devices, and a prune without a prediction are
    one-line usage errors. (No timing is asserted; the smallest op space and budgets.)"""
    tiny = ["tune", "fusion.dflash", "--preset", "tiny.dflare.train", "--strategy", "exhaustive"]
    one_line_error(tiny + ["--backend", "cuda-emu", "--predict", "h200", "--prune",
                           "predicted=0.5"], 2, "expects a number > 1")
    one_line_error(tiny + ["--backend", "cuda-emu", "--predict", "h200", "--prune", "foo=2"], 2,
                   "unknown criterion 'foo'")
    one_line_error(tiny + ["--backend", "cuda-emu", "--prune", "predicted=2"], 2,
                   "needs a prediction")
    one_line_error(tiny + ["--backend", "cuda-emu", "--predict", "h300"], 2, "unknown GPU 'h300'")
    one_line_error(tiny + ["--backend", "cpu", "--predict", "h200"], 2, "predicts no GPU time")
    env = {"FLARETUNE_CACHE_DIR": os.environ.get("FLARETUNE_CACHE_DIR", "")}
    with tempfile.TemporaryDirectory() as tmp:
        for factor, budget in (("1000", "3"), ("1.0001", "2")):
            log = os.path.join(tmp, f"p{factor}.jsonl")
            rc, out, err = run(*tiny, "--backend", "cuda-emu", "--predict", "h200", "--prune",
                               f"predicted={factor}", "--budget", budget, "--max-time", "0.05",
                               "--confirm", "1", "--log", log, env=env)
            check(rc == 0, f"tune --predict h200 --prune predicted={factor}: {rc} {err}")
            if rc != 0:
                continue
            ev = [json.loads(line) for line in open(log)]
            start, cand = ev[0], [e for e in ev if e["event"] in ("verified", "measured", "rejected")]
            pr = start.get("predict", {})
            check(pr.get("device") == "h200" and pr.get("predicted") == start["space_valid"] and
                  pr.get("order") == "predicted" and pr.get("prune_factor") == float(factor),
                  f"run_start.predict: {pr}")
            check(all(e.get("predicted_s", 0) > 0 and e.get("predicted_bound") in
                      ("dram", "l2", "shared", "l1", "issue", "fp32", "convert", "tensor", "launch") for e in cand),
                  f"every candidate event carries its prediction: {cand}")
            check(f"pruned {pr.get('pruned')} of {start['space_valid']} candidates" in err and
                  f"{pr.get('pruned')} pruned" in out and "predicted fusion.dflash on h200" in out,
                  f"the prune said with its count: {err!r} {out!r}")
            measured = [e for e in ev if e["event"] == "measured"]
            after_default = [e["predicted_s"] for e in measured[1:]]
            check(after_default == sorted(after_default), f"fastest predicted first: {after_default}")
            best = pr.get("best_s", 0)
            if factor == "1000":
                check(pr.get("pruned") == 0, f"nothing pruned at 1000: {pr}")
            else:
                check(all(e["predicted_s"] <= best * 1.0001 or e["config"] == start["default"]
                          for e in cand), "only the best prediction's ties (and the default) run")
            check("predict" in ev[-1] and ev[-1]["predict"]["compared"] == len(measured),
                  f"run_end.predict: {ev[-1].get('predict')}")


def test_tune_counts_in_range():
    """tune's whole-number options are read whole and checked against their range: a value past
    2^32 is refused in one line naming the option and the value (it once wrapped, --budget
    4294967297 running a budget of 1), as are 0 and a value past the range."""
    tiny = ["tune", "fusion.dflash", "--preset", "tiny.dflare.train", "--backend", "cpu"]
    for opt, bad, needle in (("--budget", "4294967297", "--budget expects 1 to 1000000"),
                             ("--budget", "1000001", "--budget expects 1 to 1000000"),
                             ("--budget", "0", "--budget expects 1 to 1000000"),
                             ("--confirm", "4294967299", "--confirm expects 1 to 8"),
                             ("--patience", "4294967297", "--patience expects 1 to 1000000"),
                             ("--jobs", "4294967297", "--jobs expects 1 to 64"),
                             ("--budget", "99999999999999999999", "--budget expects")):
        one_line_error(tiny + [opt, bad], 2, f"{needle}")
        one_line_error(tiny + [opt, bad], 2, f"got '{bad}'")


def test_counts_and_seeds_everywhere():
    """Every command reads its counts and seeds the same way (ft_cli_whole, ft_cli_seed): a seed
    of -1, which strtoull takes as 2^64 - 1, is refused by each command that takes one, and so
    are a count past the range of long, a sign or a space before the digits, and a count outside
    its range, each in one line naming the option or the value, exit 2."""
    t1 = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "t1", "saxpy_tiled.json")
    small = ["--preset", "tiny.dflare.train", "--backend", "cpu"]
    for args, needle in ((["bench", "fusion.dflash", *small, "--seed", "-1"], "--seed expects"),
                         (["tune", "fusion.dflash", *small, "--seed", "+1"], "--seed expects"),
                         (["inspect", "--t1", t1, "--seed", "-1"], "--seed takes"),
                         (["space", "--t1", t1, "--seed", "-1"], "--seed"),
                         (["watch", "--profile", "none.json", "--seed", "-1"], "--seed expects"),
                         (["step", "--seed", "18446744073709551616"], "--seed expects"),
                         (["inspect", "--t1", t1, "--sample", "99999999999999999999"], "--sample"),
                         (["inspect", "--t1", t1, "--blocks", "4294967298"], "--blocks"),
                         (["inspect", "fusion.dflare", "--sites", " 3"], "--sites"),
                         (["inspect", "fusion.dflare", "--blocks", "1"], "--blocks"),
                         (["compile", "fusion.dflare", "--jobs", "4294967297"], "--jobs expects 1 to 16"),
                         (["tune", "--t1", t1, "--budget", "-0x1"], "--budget"),
                         (["bench", "fusion.dflash", *small, "--threads", "+2"], "--threads")):
        one_line_error(args, 2, needle)


def test_attr_a_preset_sets():
    """An --attr that a preset sets as one of its sizes (the loss's block size B) was overwritten
    without a word: exec, bench and tune refuse it, pointing at --set, and take it as --set or
    when it agrees with the preset."""
    base = ["--preset", "tiny.dflare.train", "--backend", "cpu"]
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "o")
        for cmd in (["exec", "loss", *base, "--out", out], ["bench", "loss", *base],
                    ["tune", "loss", *base, "--budget", "1"]):
            one_line_error(cmd + ["--attr", "B=1"], 2, "--attr B=1: the preset tiny.dflare.train "
                           "sets B=4 as one of its sizes: give --set B=1")
        rc, _, err = run("exec", "loss", *base, "--out", out, "--attr", "B=4", "--quiet")
        check(rc == 0, f"--attr B=4 agrees with the preset: {rc} {err}")
        rc, _, err = run("exec", "loss", *base, "--out", out, "--set", "B=1", "--quiet")
        check(rc == 0, f"--set B=1: {rc} {err}")


def test_replay_refusals():
    """replay refuses, in one line and exit 2, an option it would otherwise ignore: --trace
    without --json (the traces are part of the JSON), an --opt of a strategy the run does not
    replay (named with the one it does, whichever of --opt and --strategy comes first); an
    --opt out of its range, or past another option, is named with the range."""
    kt = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "landscapes",
                      "kt-small.json")
    one_line_error(["replay", kt, "--seeds", "2", "--trace"], 2, "--trace needs --json")
    for args, opt, st in ((["--strategy", "bayes", "--opt", "anneal.t0=1"],
                           "anneal.t0=1", "bayes"),
                          (["--opt", "bayes.init=3", "--opt", "anneal.t0=1", "--strategy", "bayes"],
                           "anneal.t0=1", "bayes"),
                          (["--strategy", "random", "--opt", "evolve.model.ridge=2"],
                           "evolve.model.ridge=2", "random")):
        one_line_error(["replay", kt, "--seeds", "2", *args], 2,
                       f"--opt {opt}: {opt.split('.')[0]} is not replayed (--strategy {st} "
                       f"replays {st} only")
    for args in (["--strategy", "anneal", "--opt", "anneal.t0=1"], ["--opt", "anneal.t0=1"],
                 ["--strategy", "all", "--opt", "evolve.model.ridge=2"]):
        rc, out, err = run("replay", kt, "--seeds", "2", *args)
        check(rc == 0, f"replay {args}: {rc} {err}")
    for opt, why in (("bayes.init=0", "out of range (1 to 1000000000)"),
                     ("bayes.init=-3", "out of range (1 to 1000000000)"),
                     ("anneal.t0=0", "out of range (above 0)")):
        one_line_error(["replay", kt, "--seeds", "2", "--opt", opt], 2,
                       f"flaretune: replay: --opt: {opt}: {why}")
    one_line_error(["replay", kt, "--seeds", "2", "--opt", "bayes.init=3"], 2,
                   "flaretune: replay: --opt: bayes.stratified=5 is above bayes.init=3")
    rc, out, err = run("replay", kt, "--seeds", "2", "--opt", "bayes.init=3", "--opt",
                       "bayes.stratified=3")
    check(rc == 0, f"replay --opt bayes.init=3 --opt bayes.stratified=3: {rc} {err}")
    rc, out, err = run("replay", kt, "--seeds", "2", "--json", "--trace")
    check(rc == 0 and all("traces" in s for s in json.loads(out)["strategies"]),
          f"replay --json --trace: {rc} {err}")


def test_replay_unclean_confirm():
    """replay of a log whose confirm event was not measured cleanly ("clean": false, "used":
    "search") says so, and that the search's medians stand (docs/search.md), rather than that
    the log has no confirm event; its --json says the same (confirm_unclean)."""
    events = clitest.small_run()
    events.insert(3, {"event": "confirm", "configs": [{"threads": 2}, {"threads": 1}],
                      "stats": [clitest.stats_of(1.1e-5), clitest.stats_of(2.1e-5)],
                      "clean": False, "used": "search", "started": 1003.0, "t": 1004.0,
                      "run": "r1"})
    with tempfile.TemporaryDirectory() as d:
        log = os.path.join(d, "tune.jsonl")
        clitest.write_log(log, events)
        rc, out, err = run("replay", log, "--seeds", "1", "--strategy", "random")
        line = next((l for l in out.splitlines() if l.startswith("optimum ")), "")
        check(rc == 0 and "not measured cleanly" in line and "search's medians stand" in line
              and "no confirm event" not in line,
              f"replay: an unclean confirmation is named as such: {rc} {line!r} {err!r}")
        rc, out, err = run("replay", log, "--seeds", "1", "--strategy", "random", "--json")
        doc = json.loads(out) if rc == 0 else {}
        check(doc.get("confirm_unclean") is True and doc.get("optimum_confirmed") is False and
              doc.get("confirm_refused") is None, f"replay --json: confirm_unclean: {rc} {err!r}")
        events[3]["clean"], events[3]["used"] = True, "confirm"
        clitest.write_log(log, events)
        rc, out, err = run("replay", log, "--seeds", "1", "--strategy", "random", "--json")
        doc = json.loads(out) if rc == 0 else {}
        check(doc.get("confirm_unclean") is False and doc.get("optimum_confirmed") is True,
              f"replay --json: a clean round is applied: {rc} {err!r} {doc.get('confirm_unclean')}")


def test_option_errors_name_the_option():
    """A bad option is named as the user wrote it, without its value, in one line with exit 2:
    a missing value at the end of the line or an empty one (--x= or --x ''), a value given to an
    option that takes none, an unknown option inside a cluster of short ones, and a bad value
    given as the next word (the option is named, not the value)."""
    t1 = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "t1", "saxpy_tiled.json")
    cases = [
        (["tune", "fusion.dflare", "--preset"], "option '--preset' needs a value"),
        (["exec", "fusion.dflare", "--out"], "option '--out' needs a value"),
        (["trace", "L", "-o"], "option '-o' needs a value"),
        (["emit", "p.json", "-o"], "option '-o' needs a value"),
        (["tune", "--t1", t1, "--budget"], "option '--budget' needs a value"),
        (["tune", "--t1="], "option '--t1' needs a value"),
        (["watch", "--profile="], "option '--profile' needs a value"),
        (["emit", "p.json", "--backend="], "option '--backend' needs a value"),
        (["exec", "loss", "--backend", "cpu", "--in", "", "--out", "o"],
         "option '--in' needs a value"),
        (["bench", "fusion.dflare", "--json=1"], "option '--json' takes no value"),
        (["tune", "fusion.dflare", "--no-screen=yes"], "option '--no-screen' takes no value"),
        (["watch", "-xy"], "unknown option '-x'"),
        (["tune", "fusion.dflare", "-qz"], "unknown option '-q'"),
        (["list", "--bogus"], "unknown option '--bogus'"),
        (["tune", "--t1", t1, "--reps", "0"], "--reps takes a positive count, not '0'"),
        (["bench", "--t1", t1, "--blocks", "abc"], "--blocks takes a positive count, not 'abc'"),
        # an option of one value given twice: refused, never the last one silently taken
        (["trace", "L", "-o", "a", "-o", "b"], "option '-o' is given twice"),
        (["trace", "L", "-o", "a", "--output", "b"], "option '--output' is given twice"),
        (["bench", "linear", "--backend", "cpu", "--backend", "cpu"],
         "option '--backend' is given twice"),
        (["exec", "linear", "--preset", "tiny.dflare.train", "--config", "threads=1",
          "--config", "threads=2"], "option '--config' is given twice"),
        (["tune", "--t1", t1, "--budget", "2", "--budget", "3"], "option '--budget' is given twice"),
        (["show", "p.json", "--op", "loss", "--op", "linear"], "option '--op' is given twice"),
        (["tune", "linear", "--prune", "predicted=2", "--prune", "predicted=3"],
         "option '--prune' is given twice"),
        (["tune", "linear", "--preset", "tiny.dflare.train", "--set", "N=1000000"],
         "linear does not read that size"),
        (["space", "linear", "--preset", "tiny.dflare.train", "--set", "N=1000000"],
         "linear does not read that size"),
        (["exec", "loss", "--preset", "tiny.dflare.train", "--profile", "p.json", "--config",
          "threads=1"], "--config and --profile both choose the config"),
        (["exec", "loss", "--in", "d", "--out", "o", "--seed", "3"],
         "--set, --seed and --save-inputs go with --preset"),
        # a size the op does not read: the run would be labelled with it and be the preset's
        (["bench", "linear", "--preset", "tiny.dflare.decode", "--set", "N=1000000"],
         "--set N=1000000: linear does not read that size of the preset"),
        (["exec", "fusion.dflare", "--preset", "tiny.dflare.train", "--set", "V=5"],
         "fusion.dflare does not read that size"),
    ]
    for args, needle in cases:
        one_line_error(args, 2, needle)


def test_list_options_repeat():
    """The options that build a list (FT_CLI_LIST rows: --set, --attr, --arg, --reference,
    --define, --kernel, watch's --op, replay's --opt and --prune) may be given again, each adding
    an item, while the same names in a command where they take one value are refused twice
    (test_option_errors_name_the_option). A second item is taken: both --set changes label the
    preset; elsewhere the error is about the values, never 'given twice'."""
    rc, out, err = run("space", "fusion.dflare", "--backend", "cpu", "--set", "N=8", "--set", "T=2",
                       "--attr", "eps=1e-5", "--attr", "dtype=f32", "--json")
    doc = json.loads(out) if rc == 0 else {}
    check(doc.get("preset", "").endswith("+N=8+T=2"),
          f"space with two --set: {rc} {err!r} preset {doc.get('preset')!r}")
    here = os.path.dirname(os.path.abspath(__file__))
    land = os.path.join(here, "data", "landscapes", "kt-small.json")
    t1 = os.path.join(here, "data", "t1", "saxpy_tiled.json")
    for args in (["replay", land, "--seeds", "1", "--opt", "bogus=1", "--opt", "x=2"],
                 ["replay", land, "--seeds", "1", "--prune", "predicted=2", "--prune",
                  "predicted=3"],
                 ["step", "--set", "N=1", "--set", "N=2"],
                 ["bench", "--t1", t1, "--reference", "a", "--reference", "b"],
                 ["bench", "--t1", t1, "--arg", "x", "--arg", "y"],
                 ["compile", "fusion.dflare", "--define", "A=1", "--define", "B=2"],
                 ["compile", "fusion.dflare", "--kernel", "a", "--kernel", "b"],
                 ["watch", "--op", "nosuch", "--op", "nosuch2"]):
        rc, out, err = run(*args, timeout=300)
        check("given twice" not in err, f"{args}: a list option refused twice: {rc} {err!r}")


def test_full_stdout_fails():
    """A result that cannot be written is a failure: standard output on a full disk (/dev/full)
    gives exit 1 and one line naming the command, never exit 0 with nothing written."""
    land = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "landscapes",
                        "kt-small.json")
    for args in (["list"], ["space", "loss", "--backend", "cpu"], ["version"],
                 ["replay", land, "--seeds", "1", "--json"], ["replay", land, "--seeds", "1"]):
        with open("/dev/full", "w") as full:
            p = subprocess.run([clitest.FT, *args], stdout=full, stderr=subprocess.PIPE, text=True,
                               timeout=300)
        err = p.stderr.strip()
        check(p.returncode == 1 and err.count("\n") == 0 and
              f"{args[0]}: standard output: write failed" in err,
              f"{args} > /dev/full: exit {p.returncode}, {err!r}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--flaretune", required=True)
    return clitest.main(ap.parse_args().flaretune,
                        (test_help, test_help_says_what_commands_take,
                         test_ctypes_example_without_numpy,
                         test_version_and_blas_core, test_version_cpus, test_version_is_the_tree, test_list, test_space,
                         test_rope_at_presets,
                         test_exec_config_errors, test_duplicate_configs_run,
                         test_exec_profile_why, test_exec_profile_threads,
                         test_bench, test_bench_counts_exact,
                         test_device_backends,
                         test_tune_jobs, test_tune_predict, test_tune_counts_in_range,
                         test_counts_and_seeds_everywhere, test_attr_a_preset_sets,
                         test_replay_refusals, test_replay_unclean_confirm, test_full_stdout_fails,
                         test_list_options_repeat,
                         test_option_errors_name_the_option))


if __name__ == "__main__":
    sys.exit(main())
