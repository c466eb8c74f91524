#!/usr/bin/env python3
"""test_faults.py: the command line under hostile input: the exit-code rule (2: an invalid request
on the command line; 1: input data that is missing, malformed or inconsistent) for every fault of
`exec`'s input files, outputs written all together or not at all, .npy files that lie about their
size, one true line for each error, `--set` sizes and their bound, and profiles reached through
symbolic links or kept read-only (docs/profiles.md).

usage: test_faults.py --flaretune PATH [--sanitized 0|1]
"""
import argparse
import ast
import gzip
import json
import os
import resource
import shutil
import stat
import struct
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import clitest  # noqa: E402
from clitest import check, entry, one_line_error, run, stats  # noqa: E402

SANITIZED = False
TMP = None

# ---- .npy files without NumPy -------------------------------------------------------------------

SIZES = {"<f4": 4, "<f8": 8, "<i4": 4, "<i8": 8, "|u1": 1, "|b1": 1}
FORMATS = {"<f4": "f", "<f8": "d", "<i4": "i", "<i8": "q", "|u1": "B", "|b1": "B"}


def write_npy(path, descr, shape, data=None, raw=None):
    """A version 1.0 file; data: a flat list of values (raw: the data bytes as they are)."""
    dims = ", ".join(str(d) for d in shape) + ("," if len(shape) == 1 else "")
    head = "{'descr': '%s', 'fortran_order': False, 'shape': (%s), }" % (descr, dims)
    total = (10 + len(head) + 1 + 63) // 64 * 64
    head = head + " " * (total - 10 - len(head) - 1) + "\n"
    if raw is None:
        raw = struct.pack("<%d%s" % (len(data), FORMATS[descr]), *data)
    with open(path, "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(head)) + head.encode() + raw)


def read_npy(path):
    """(descr, shape, values) of a version 1.0 file as flaretune writes it."""
    with open(path, "rb") as f:
        b = f.read()
    hlen = struct.unpack("<H", b[8:10])[0]
    d = ast.literal_eval(b[10:10 + hlen].decode())
    n = 1
    for s in d["shape"]:
        n *= s
    vals = list(struct.unpack("<%d%s" % (n, FORMATS[d["descr"]]), b[10 + hlen:]))
    return d["descr"], tuple(d["shape"]), vals


def saved_inputs(op, preset, name):
    """The inputs of op at preset, saved once by `exec --save-inputs`; a fresh copy each call."""
    base = os.path.join(TMP, "inputs." + name)
    if not os.path.isdir(base):
        rc, _, err = run("exec", op, "--preset", preset, "--backend", "cpu", "--save-inputs",
                         base, "--out", os.path.join(TMP, "unused." + name), "--quiet")
        check(rc == 0, f"exec {op} --save-inputs: {err}")
    copy = tempfile.mkdtemp(dir=TMP, prefix=name + ".")
    for f in os.listdir(base):
        shutil.copy(os.path.join(base, f), copy)
    return copy


def exec_fault(op, indir, code, needle, attrs=()):
    """exec on indir: exit `code` with one line containing `needle`, and nothing written."""
    out = os.path.join(TMP, "never")
    args = ["exec", op, "--backend", "cpu", "--in", indir, "--out", out]
    for a in attrs:
        args += ["--attr", a]
    one_line_error(args, code, needle)
    check(not os.path.exists(out), f"{args}: wrote {out} on an error")


def no_temp_files(d):
    left = [n for n in os.listdir(d) if ".tmp." in n]
    check(not left, f"{d}: temporary files left behind: {left}")


# ---- the exit-code rule --------------------------------------------------------------------------


def test_exit_code_rule():
    """Exit 1 for every fault of the input data, exit 2 for every invalid request."""
    # loss at tiny.dflare.train: h [40,64], w_lm [320,64], labels [40], mask [40], B = 4.
    d = saved_inputs("loss", "tiny.dflare.train", "loss")
    rc, _, err = run("exec", "loss", "--backend", "cpu", "--in", d, "--out",
                     os.path.join(TMP, "loss.ok"), "--attr", "B=4", "--quiet")
    check(rc == 0, f"the saved loss inputs run: {err}")

    def variant(name, mutate, code, needle, op="loss", src=d, attrs=("B=4",)):
        v = tempfile.mkdtemp(dir=TMP, prefix="fault.")
        for f in os.listdir(src):
            shutil.copy(os.path.join(src, f), v)
        mutate(v)
        n = len(clitest.FAILURES)
        exec_fault(op, v, code, needle, attrs)
        if len(clitest.FAILURES) != n:
            print(f"  (case: {name})", file=sys.stderr)

    def rm(f):
        return lambda v: os.remove(os.path.join(v, f))

    def as_dtype(f, descr):
        def m(v):
            _, shape, vals = read_npy(os.path.join(v, f))
            write_npy(os.path.join(v, f), descr, shape, [float(x) for x in vals]
                      if descr.startswith("<f") else vals)
        return m

    def set_value(f, i, value, also=None):
        def m(v):
            descr, shape, vals = read_npy(os.path.join(v, f))
            vals[i] = value
            write_npy(os.path.join(v, f), descr, shape, vals)
            if also:
                also(v)
        return m

    def truncate(f, nbytes):
        def m(v):
            p = os.path.join(v, f)
            with open(p, "rb") as fh:
                b = fh.read()
            with open(p, "wb") as fh:
                fh.write(b[:-nbytes])
        return m

    def reshape(f, extra):
        def m(v):
            descr, shape, vals = read_npy(os.path.join(v, f))
            write_npy(os.path.join(v, f), descr, (shape[0] + extra,) + shape[1:],
                      vals + vals[:extra * (len(vals) // shape[0])])
        return m

    # Input data: exit 1.
    variant("missing input", rm("labels.npy"), 1, "missing input")
    variant("wrong dtype", as_dtype("labels.npy", "<f4"), 1, "'labels' must be int32")
    variant("wrong mask dtype", as_dtype("mask.npy", "<f4"), 1, "'mask' must be uint8")
    variant("wrong shape", reshape("labels.npy", 1), 1, "input 'labels' has shape [41]")
    # (the row is scored: labels of unscored rows are never read)
    variant("label out of range", set_value("labels.npy", 1, 320, set_value("mask.npy", 1, 1)),
            1, "labels[1] = 320")
    variant("negative label", set_value("labels.npy", 2, -7, set_value("mask.npy", 2, 1)), 1,
            "labels[2] = -7")
    variant("mask out of range", set_value("mask.npy", 1, 2), 1, "mask[1] = 2")
    variant("truncated file", truncate("h.npy", 4), 1, "truncated data")
    variant("rows not whole blocks", lambda v: None, 1, "whole number of blocks",
            attrs=("B=16",))

    t = saved_inputs("attention.train", "tiny.dflare.train", "train")
    variant("anchor out of range", set_value("anchors.npy", 0, 25), 1, "anchors[0][0] = 25",
            op="attention.train", src=t, attrs=())
    variant("negative anchor", set_value("anchors.npy", 3, -1), 1, "anchors[0][3] = -1",
            op="attention.train", src=t, attrs=())
    variant("keep out of range", set_value("keep.npy", 0, 3), 1, "keep[0][0] = 3",
            op="attention.train", src=t, attrs=())
    variant("missing backward input", lambda v: None, 1, "do.npy",
            op="attention.train", src=t, attrs=("backward=1",))

    dc = saved_inputs("attention.decode", "tiny.dflare.decode", "decode")
    _, _, lens = read_npy(os.path.join(dc, "ctx_lens.npy"))
    variant("negative ctx_lens", set_value("ctx_lens.npy", 0, -1), 1, "ctx_lens[0] = -1",
            op="attention.decode", src=dc, attrs=())
    variant("ctx_lens sum mismatch", set_value("ctx_lens.npy", 1, lens[1] + 1), 1, "sums to",
            op="attention.decode", src=dc, attrs=())
    variant("ctx_lens wrong dtype", as_dtype("ctx_lens.npy", "<f8"), 1,
            "'ctx_lens' must be int32", op="attention.decode", src=dc, attrs=())
    exec_fault("loss", os.path.join(TMP, "no-such-dir"), 1, "no-such-dir")

    # The command line: exit 2, and no input is read.
    out = os.path.join(TMP, "never")
    base = ["exec", "loss", "--backend", "cpu", "--in", d, "--out", out, "--attr", "B=4"]
    one_line_error(["exec", "loss.v2", "--in", d, "--out", out], 2, "unknown op 'loss.v2'")
    one_line_error(base + ["--attr", "nope=1"], 2, "nope")
    one_line_error(base + ["--attr", "scheme=bogus"], 2, "bogus")
    one_line_error(base + ["--attr", "B"], 2, "NAME=VALUE")
    one_line_error(base + ["--bogus"], 2, "unknown option")
    one_line_error(["exec", "loss", "--preset", "tiny.nope.train", "--out", out], 2,
                   "unknown preset")
    one_line_error(["exec", "loss", "--preset", "tiny.dflare.train", "--set", "V=zero",
                    "--out", out], 2, "size V")
    one_line_error(["exec", "loss", "--backend", "cpu", "--in", "", "--out", out], 2, "--in")
    one_line_error(["exec", "loss", "--backend", "cpu", "--in", d, "--out", "", "--attr", "B=4"],
                   2, "--out")
    one_line_error(["exec", "loss", "--preset", "tiny.dflare.train", "--save-inputs", "",
                    "--out", out], 2, "--save-inputs")
    check(not os.path.exists(out), "a refused request wrote its output")


# ---- outputs: all or nothing ---------------------------------------------------------------------


def test_exec_all_or_nothing():
    d = saved_inputs("attention.decode", "tiny.dflare.decode", "decode")
    out = os.path.join(TMP, "aon")
    os.makedirs(out)
    with open(os.path.join(out, "o.npy"), "wb") as f:
        f.write(b"old o")
    os.makedirs(os.path.join(out, "lse.npy", "inside"))
    one_line_error(["exec", "attention.decode", "--backend", "cpu", "--in", d, "--out", out], 1,
                   "lse.npy")
    with open(os.path.join(out, "o.npy"), "rb") as f:
        check(f.read() == b"old o", "exec replaced o.npy although lse.npy could not be written")
    check(sorted(os.listdir(out)) == ["lse.npy", "o.npy"], f"exec left {os.listdir(out)}")
    rc, _, err = run("exec", "attention.decode", "--backend", "cpu", "--in", d, "--out", out)
    check(rc == 1 and "is a directory" in err, f"the message says why: {err!r}")
    # Once the way is clear, both appear.
    shutil.rmtree(os.path.join(out, "lse.npy"))
    rc, _, err = run("exec", "attention.decode", "--backend", "cpu", "--in", d, "--out", out,
                     "--quiet")
    check(rc == 0, f"exec after clearing the way: {err}")
    check(read_npy(os.path.join(out, "o.npy"))[1] == (3, 4, 4, 16)
          and read_npy(os.path.join(out, "lse.npy"))[1] == (3, 4, 4), "both outputs written")
    no_temp_files(out)
    # --save-inputs and --out commit together too.
    save, out2 = os.path.join(TMP, "aon-save"), os.path.join(TMP, "aon-out")
    os.makedirs(os.path.join(out2, "loss.npy", "inside"))
    one_line_error(["exec", "loss", "--preset", "tiny.dflare.train", "--backend", "cpu",
                    "--save-inputs", save, "--out", out2], 1, "loss.npy")
    check(not os.path.exists(save),  # nor the folder made for them
          f"inputs saved although the outputs failed: "
          f"{os.listdir(save) if os.path.exists(save) else None}")
    # An output that is a link to one of the inputs would replace the input: refused first.
    linked = os.path.join(TMP, "aon-link")
    os.makedirs(linked)
    q = sorted(os.listdir(d))[0]
    os.symlink(os.path.join(d, q), os.path.join(linked, "o.npy"))
    before = open(os.path.join(d, q), "rb").read()
    one_line_error(["exec", "attention.decode", "--backend", "cpu", "--in", d, "--out", linked], 2,
                   f"is the input {os.path.join(d, q)}")
    check(open(os.path.join(d, q), "rb").read() == before, "the input is left as it was")
    # An output that is a dangling link: its target is written, the link kept.
    dl = os.path.join(TMP, "aon-dangling")
    os.makedirs(dl)
    os.symlink("../aon-dangling-ce.npy", os.path.join(dl, "ce.npy"))
    rc, _, err = run("exec", "loss", "--preset", "tiny.dflare.train", "--backend", "cpu",
                     "--out", dl)
    check(rc == 0 and os.path.islink(os.path.join(dl, "ce.npy")) and
          os.path.getsize(os.path.join(TMP, "aon-dangling-ce.npy")) > 128,
          f"exec --out through a dangling link: the link kept, its target written: {rc} {err}")


# ---- .npy files that lie ------------------------------------------------------------------------


def limited_address_space():
    # 3 GiB is plenty for flaretune at the tiny preset and less than the 4 GiB the header claims.
    resource.setrlimit(resource.RLIMIT_AS, (3 << 30, 3 << 30))


def test_npy_lies():
    d = saved_inputs("loss", "tiny.dflare.train", "loss")
    h = os.path.join(d, "h.npy")
    # 128 bytes claiming 4 GiB of float32: refused from the file size, before any allocation
    # (under a 3 GiB address-space limit it still says "truncated", not "out of memory").
    write_npy(h, "<f4", (1073741824, 1), raw=b"")
    check(os.path.getsize(h) == 128, "the lying file is 128 bytes")
    args = ["exec", "loss", "--backend", "cpu", "--in", d, "--out", os.path.join(TMP, "never"),
            "--attr", "B=4"]
    one_line_error(args, 1, "truncated data")
    one_line_error(args, 1, h)
    if not SANITIZED:  # the sanitizers' shadow memory does not fit under an RLIMIT_AS
        p = subprocess.run([clitest.FT, *args], capture_output=True, text=True,
                           preexec_fn=limited_address_space, timeout=300)
        check(p.returncode == 1 and "truncated data" in p.stderr and h in p.stderr
              and "out of memory" not in p.stderr,
              f"under a 3 GiB limit: exit {p.returncode}, {p.stderr.strip()!r}")
    # A shape whose element count does not fit in memory's address range: names the file.
    write_npy(h, "<f4", (1 << 40, 1 << 40), raw=b"")
    one_line_error(args, 1, h)
    # A directory where a .npy should be.
    os.remove(h)
    os.mkdir(h)
    rc, _, err = run(*args)
    check(rc == 1 and "is a directory" in err and "magic" not in err and h in err,
          f"a directory as input: exit {rc}, {err.strip()!r}")
    one_line_error(args, 1, "is a directory")


# ---- one true line -------------------------------------------------------------------------------


def test_trace_of_a_directory():
    d = tempfile.mkdtemp(dir=TMP, prefix="logdir.")
    out = os.path.join(TMP, "dir.trace.json")
    one_line_error(["trace", d, "-o", out], 1, "is a directory")
    check(not os.path.exists(out), "trace of a directory wrote a trace")
    one_line_error(["trace", os.path.join(TMP, "no-such.jsonl"), "-o", out], 1, "no-such.jsonl")
    check(not os.path.exists(out), "trace of a missing log wrote a trace")
    # top of a directory: refused at once, not followed forever.
    try:
        rc, _, err = run("top", d, timeout=20)
        check(rc == 1 and "is a directory" in err and len(err.strip().splitlines()) == 1,
              f"top of a directory: exit {rc}, {err.strip()!r}")
    except subprocess.TimeoutExpired:
        check(False, "top of a directory waited instead of refusing it")
    # The replay backend: a directory is named as one, an empty path as missing.
    tune = ["tune", "fusion.dflare", "--preset", "tiny.dflare.train", "--quiet", "--backend"]
    one_line_error(tune + [f"replay:{d}"], 1, "is a directory")
    one_line_error(tune + ["replay:"], 2, "the log's path after 'replay:' is missing")


def small_log(path, key="k1", run="r1"):
    clitest.write_log(path, clitest.small_run(key, run))


def sweep_log(fam, m):
    """The log a sweep of M writes for its size m (FAM.linear.Mm, its run_start at M=m)."""
    events = clitest.small_run(f"k{m}", f"r{m}")
    events[0]["dims"]["M"] = m
    clitest.write_log(f"{fam}.linear.M{m}", events)
    return f"{fam}.linear.M{m}"


def test_replay_untrusted_event():
    """A measured event a resumed run does not trust (no positive median) is left out by replay
    as by resume: alone, the landscape lacks that candidate and says so; once the resumed run
    has measured it again, the log replays (it used to be refused for good)."""
    events = clitest.small_run()
    del events[1]["stats"]["median_s"]
    log = os.path.join(TMP, "untrusted.jsonl")
    clitest.write_log(log, events)
    one_line_error(["replay", log, "--seeds", "1"], 1, "threads=1")
    again = clitest.small_run(run_id="r2")
    clitest.write_log(log, events + [again[0], again[1], again[3]])
    rc, out, err = run("replay", log, "--seeds", "1")
    check(rc == 0 and "landscape " in out, f"the resumed log replays: {rc} {out[-200:]} {err!r}")


def test_replay_damaged_config():
    """An event whose config lacks a parameter its run's default names would be read as the
    default's value there, and pass for another candidate (in export, overwriting that one's
    time): replay and export refuse it in one line naming the event and the parameter. A log
    of another shape behind `tune --backend replay:LOG` is refused before the search, not every
    candidate rejected alike."""
    events = clitest.small_run()
    del events[1]["config"]["threads"]
    log = os.path.join(TMP, "damaged.jsonl")
    clitest.write_log(log, events)
    one_line_error(["replay", log, "--seeds", "1"], 1, "event 2 (measured): its config lacks "
                   "'threads'")
    for fmt in ("t4", "kt-cache"):
        one_line_error(["export", log, "--format", fmt], 1, "lacks 'threads'")
    small = os.path.join(TMP, "replay-shape.jsonl")
    small_log(small)
    one_line_error(["tune", "linear", "--preset", "tiny.dflare.decode", "--quiet", "--backend",
                    f"replay:{small}"], 2, "the landscape was recorded at")
    rc, out, err = run("tune", "linear", "--preset", "tiny.dflare.train", "--quiet", "--backend",
                       f"replay:{small}", "--strategy", "exhaustive")
    check(rc == 0, f"the recorded shape replays: {rc} {err[-300:]!r}")


def test_trace_keeps_its_log():
    """trace never writes over the log it reads (named as such, through a link too, or as one
    of a family's logs), refuses a file that holds no run rather than write an empty trace, and
    reads every log of a family however many there are (replay too)."""
    log = os.path.join(TMP, "keep.jsonl")
    small_log(log)
    before = open(log).read()
    link = os.path.join(TMP, "keep-link.json")
    os.symlink(log, link)
    for out in (log, link):
        one_line_error(["trace", log, "-o", out], 2, "the output is the event log it reads")
        check(open(log).read() == before, f"trace -o {out} changed the log")
    for name, text in (("doc.json", '{"a": 1}'), ("empty.jsonl", "")):
        path = os.path.join(TMP, name)
        with open(path, "w") as f:
            f.write(text)
        out = os.path.join(TMP, "never.trace.json")
        one_line_error(["trace", path, "-o", out], 1, "no run_start event")
        check(not os.path.exists(out), f"trace of {name} wrote a trace")
    # A compressed log is named as one by the commands that do not read it as it is.
    gz = os.path.join(TMP, "keep.jsonl.gz")
    with gzip.open(gz, "wt") as f:
        f.write(before)
    for args in (["trace", gz, "-o", os.path.join(TMP, "gz.trace.json")],
                 ["export", gz, "--format", "t4", "-o", os.path.join(TMP, "gz.t4.json")]):
        one_line_error(args, 1, "is gzip-compressed")
    rc, _, err = run("replay", gz, "--seeds", "1", "--strategy", "random")
    check(rc == 0, f"replay reads a gzip log as it is: {rc} {err!r}")
    fam = os.path.join(TMP, "fam", "all.jsonl")
    os.makedirs(os.path.dirname(fam))
    n = 70
    for i in range(n):
        sweep_log(fam, 100 + i)
    one_line_error(["trace", fam, "-o", f"{fam}.linear.M105"], 2, "one of the event logs it reads")
    out = os.path.join(TMP, "fam.trace.json")
    rc, _, err = run("trace", fam, "-o", out)
    runs = [e for e in json.load(open(out))["traceEvents"] if e.get("cat") == "run"] if rc == 0 else []
    check(rc == 0 and len(runs) == n, f"trace of {n} logs: {rc} {len(runs)} runs {err!r}")
    rc, stdout, err = run("replay", fam, "--seeds", "1", "--strategy", "random")
    check(rc == 0 and stdout.count("landscape ") == n,
          f"replay of {n} logs: {rc} {stdout.count('landscape ')} landscapes {err[-200:]!r}")
    # A file named as it is is read alone, and the family's other logs are said to be left out.
    small_log(fam, key="kf", run="rf")
    rc, _, err = run("trace", fam, "-o", out)
    runs = [e for e in json.load(open(out))["traceEvents"] if e.get("cat") == "run"] if rc == 0 else []
    check(rc == 0 and len(runs) == 1, f"trace of the file itself: {rc} {len(runs)} runs {err!r}")
    check(f"{n} more logs" in err and "not read" in err, f"trace names the logs it leaves: {err!r}")
    rc, stdout, err = run("replay", fam, "--seeds", "1", "--strategy", "random")
    check(rc == 0 and stdout.count("landscape ") == 1 and f"{n} more logs" in err,
          f"replay of the file itself: {rc} {stdout.count('landscape ')} landscapes {err[-300:]!r}")
    rc, _, err = run("trace", log, "-o", os.path.join(TMP, "alone.trace.json"))
    check(rc == 0 and "note" not in err, f"a log with no family has no note: {rc} {err!r}")
    rc, stdout, err = run("trace", log, "-o", "/dev/stdout")  # the trace alone on stdout
    check(rc == 0 and "traceEvents" in json.loads(stdout) and "trace events" in err,
          f"trace -o /dev/stdout: {rc} {stdout[-200:]!r} {err!r}")


def rel_l2(a, b):
    num = sum((x - y) ** 2 for x, y in zip(a, b))
    den = sum(y * y for y in b)
    return (num / den) ** 0.5 if den > 0 else num ** 0.5


def test_large_magnitudes():
    """The fusions' RMSNorm backward at states of 1e15 (r^3 alone underflows float32 there):
    every backend's outputs within 1e-4 of the float64 reference's."""
    for op in ("fusion.dflare", "fusion.dflash"):
        base = os.path.join(TMP, "big." + op)
        rc, _, err = run("exec", op, "--preset", "tiny.dflare.train", "--set", "N=5", "--attr",
                         "backward=1", "--backend", "ref", "--save-inputs", base, "--out",
                         os.path.join(TMP, "unused.big"), "--quiet")
        check(rc == 0, f"exec {op} --save-inputs: {err}")
        if rc:
            continue
        descr, shape, x = read_npy(os.path.join(base, "x.npy"))
        write_npy(os.path.join(base, "x.npy"), descr, shape, [v * 1e15 for v in x])
        outs = {}
        for be in ("ref", "cpu", "cuda-emu"):
            outs[be] = os.path.join(TMP, f"big.{op}.{be}")
            rc, _, err = run("exec", op, "--in", base, "--attr", "backward=1", "--backend", be,
                             "--out", outs[be], "--quiet")
            check(rc == 0, f"exec {op} on {be} at 1e15: {err}")
        for be in ("cpu", "cuda-emu"):
            for name in sorted(os.listdir(outs["ref"])):
                got = os.path.join(outs[be], name)
                if not os.path.exists(got):
                    continue
                e = rel_l2(read_npy(got)[2], read_npy(os.path.join(outs["ref"], name))[2])
                check(e < 1e-4, f"{op} on {be} at 1e15: {name} relative error {e:.3g}")


def test_file_size_limit():
    """A write past the file size limit (ulimit -f) is a write error like a full disk's: one
    line naming the file and the cause, exit 1, no temporary file and no output left, the process never
    killed by SIGXFSZ half way."""
    d = os.path.join(TMP, "fsize")
    os.makedirs(d)
    fam = os.path.join(d, "f.jsonl")
    for i in range(30):
        sweep_log(fam, 100 + i)
    out = os.path.join(d, "out.trace.json")
    for limit in (2048, 0):
        p = subprocess.run([clitest.FT, "trace", fam, "-o", out], capture_output=True, text=True,
                           timeout=120,
                           preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_FSIZE,
                                                                 (limit, limit)))
        left = [n for n in os.listdir(d) if ".tmp." in n or n.startswith("out.")]
        check(p.returncode == 1 and len(p.stderr.strip().splitlines()) == 1 and
              "out.trace.json: write failed: File too large" in p.stderr and not left,
              f"trace past a {limit}-byte file limit: exit {p.returncode}, {p.stderr.strip()!r},"
              f" left {left}")
    # exec: nothing written, so neither are the folders it made for it (usage.md: "nothing
    # written"); a folder that was there before stays.
    new = os.path.join(d, "new", "deeper")
    existing = os.path.join(d, "existing")
    os.makedirs(existing)
    for out_dir, gone in ((new, os.path.join(d, "new")), (d, None),
                          (os.path.join(d, "missing", "..", "existing"), os.path.join(d, "missing"))):
        p = subprocess.run([clitest.FT, "exec", "fusion.dflare", "--preset", "tiny.dflare.train",
                            "--backend", "cpu", "--out", out_dir], capture_output=True, text=True,
                           timeout=120,
                           preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_FSIZE,
                                                                 (1024, 1024)))
        check(p.returncode == 1 and "f.npy" in p.stderr and
              (gone is None or not os.path.exists(gone)) and os.path.isdir(d) and
              not os.path.exists(os.path.join(d, "f.npy")),
              f"exec past a 1024-byte file limit into {out_dir}: exit {p.returncode}, "
              f"{p.stderr.strip()!r}, {os.listdir(d)}")
        check(os.path.isdir(existing), f"a folder that was there stays ({out_dir})")


def test_unbounded_reads():
    """A profile or event log is stat'ed before it is read (a device is refused in one line, not
    read until memory runs out), read with a cap (docs/profiles.md, docs/events.md), and a read
    error is an error, not the end of the file."""
    out = os.path.join(TMP, "zero.trace.json")
    for args in (["show", "/dev/zero"], ["emit", "/dev/zero"], ["trace", "/dev/zero", "-o", out]):
        one_line_error(args, 1, "not a regular file")
        if not SANITIZED:  # under a memory limit too: refused, never an empty result
            p = subprocess.run([clitest.FT, *args], capture_output=True, text=True,
                               preexec_fn=limited_address_space, timeout=120)
            check(p.returncode == 1 and "not a regular file" in p.stderr,
                  f"{args} under a 3 GiB limit: exit {p.returncode}, {p.stderr.strip()!r}")
    check(not os.path.exists(out), "trace of /dev/zero wrote a trace")
    d = tempfile.mkdtemp(dir=TMP, prefix="profdir.")
    one_line_error(["show", d], 1, "is a directory")
    # Past the caps: a profile of 65 MiB, a log line of 17 MiB (sparse files: no disk).
    big = os.path.join(TMP, "big.json")
    with open(big, "wb") as f:
        f.truncate(65 << 20)
    one_line_error(["show", big], 1, "more than a profile may have")
    long_line = os.path.join(TMP, "long.jsonl")
    with open(long_line, "wb") as f:
        f.truncate(17 << 20)
    one_line_error(["trace", long_line, "-o", out], 1, "longer than 16 MiB")
    # A read error (reading this process's memory at address 0: EIO) is not an empty log.
    one_line_error(["trace", "/proc/self/mem", "-o", out], 1, "read failed")
    check(not os.path.exists(out), "a log that failed to read gave a trace")


def test_set_sizes():
    space = ["space", "fusion.dflare", "--backend", "cpu", "--preset", "tiny.dflare.train"]
    # M is the loss's rows, derived as blocks * B: the message says what to set instead.
    one_line_error(["space", "loss", "--backend", "cpu", "--preset", "tiny.dflare.train",
                    "--set", "M=64"], 2, "M = blocks * B")
    _, _, err = run("space", "loss", "--backend", "cpu", "--preset", "tiny.dflare.train",
                    "--set", "M=64")
    check("blocks=16" in err, f"--set M=64 at B = 4 suggests blocks=16: {err.strip()!r}")
    check("unknown size" not in err, f"M is not unknown: {err.strip()!r}")
    # Sizes are below 2^31: 2^31 - 1 is a size, 2^31 is refused.
    rc, out, err = run(*space, "--set", "N=2147483647")
    check(rc == 0 and "N=2147483647" in out, f"--set N=2^31-1: exit {rc}, {err.strip()!r}")
    one_line_error(space + ["--set", "N=2147483648"], 2, "below 2^31")
    one_line_error(space + ["--set", "N=99999999999999999999"], 2, "below 2^31")
    one_line_error(space + ["--set", "N=0"], 2, "size N")
    # digits only: a sign or a blank would name another preset ("+N=+48") of the same sizes
    for v in ("+48", " 48", "48 ", "0x30"):
        one_line_error(space + ["--set", f"N={v}"], 2, "size N")
    # Sizes that each fit but whose products do not are refused from the sizes, at once (not
    # after a loop over 2^31 requests).
    t0 = time.time()
    rc, _, err = run("step", "small.dflare.decode", "--backend", "cpu", "--set", "R=2147483647",
                     "--set", "L=2147483647", timeout=60)
    took = time.time() - t0
    check(rc != 0 and "too many" in err and len(err.strip().splitlines()) == 1,
          f"step at R = L = 2^31-1: exit {rc}, {err.strip()!r}")
    check(took < 10, f"step at R = L = 2^31-1 took {took:.1f} s to refuse")
    # Sizes that each are sizes but disagree with the op (Hq not a multiple of Hkv) are a bad
    # value on the command line too, for one op and for a step.
    one_line_error(["exec", "attention.decode", "--backend", "cpu", "--preset",
                    "tiny.dflare.decode", "--set", "Hq=3", "--quiet"], 2, "multiple of kv heads")
    one_line_error(["step", "tiny.dflare.decode", "--backend", "cpu", "--set", "Hq=3"], 2,
                   "multiple of kv heads")
    # A size or an attribute given twice is refused, not the last one silently taken.
    one_line_error(space + ["--set", "N=5", "--set", "N=7"], 2, "name one size: give it once")
    one_line_error(["exec", "fusion.dflare", "--preset", "tiny.dflare.train", "--attr", "eps=1e-6",
                    "--attr", "eps=1e-5", "--quiet"], 2, "name one attribute: give it once")
    one_line_error(["step", "tiny.dflare.decode", "--set", "L=5", "--set", "L=6"], 2,
                   "name one size: give it once")
    # A sliding layout no layer would get: without a window, or past the preset's layers.
    one_line_error(["step", "tiny.dflare.decode", "--backend", "cpu", "--set", "sliding=3"], 2,
                   "set window=W")
    one_line_error(["step", "tiny.dflare.decode", "--backend", "cpu", "--set", "sliding=8",
                    "--set", "window=5"], 2, "past the preset's D=3")


# ---- profiles through links, and their modes ---------------------------------------------------


def write_profile(path, entries):
    with open(path, "w") as f:
        json.dump({"schema_version": 1, "generator": "test", "entries": entries}, f)


def rows(path):
    with open(path) as f:
        return sorted(e["shape"]["M"] for e in json.load(f)["entries"])


def test_profile_links():
    d = tempfile.mkdtemp(dir=TMP, prefix="links.")
    src = os.path.join(d, "in.json")
    write_profile(src, [entry(512, 1e-3)])
    target, link = os.path.join(d, "real.json"), os.path.join(d, "link.json")
    write_profile(target, [entry(4096, 2e-3)])
    os.symlink("real.json", link)
    rc, _, err = run("merge", link, src)
    check(rc == 0, f"merge into a link: {err}")
    check(os.path.islink(link) and os.readlink(link) == "real.json",
          "merge replaced the link by a file")
    check(rows(target) == [512, 4096], f"merge wrote through to the target: {rows(target)}")
    check(os.path.exists(target + ".lock") and not os.path.exists(link + ".lock"),
          f"the lock is the target's: {sorted(os.listdir(d))}")
    # A link in another directory, relative, to a profile that does not exist yet.
    sub = os.path.join(d, "sub")
    os.mkdir(sub)
    dangling = os.path.join(sub, "p.json")
    os.symlink("../new.json", dangling)
    rc, _, err = run("merge", dangling, src)
    check(rc == 0 and os.path.islink(dangling) and rows(os.path.join(d, "new.json")) == [512],
          f"merge through a dangling link creates its target: {err}")
    check(os.path.exists(os.path.join(d, "new.json.lock")),
          "the lock of a new target is beside the target")
    check(sorted(os.listdir(sub)) == ["p.json"], f"nothing beside the link: {os.listdir(sub)}")
    no_temp_files(d)


def test_profile_modes():
    d = tempfile.mkdtemp(dir=TMP, prefix="modes.")
    src = os.path.join(d, "in.json")
    write_profile(src, [entry(512, 1e-3)])
    for mode in (0o640, 0o600, 0o664):
        p = os.path.join(d, "p%o.json" % mode)
        write_profile(p, [entry(4096, 2e-3)])
        os.chmod(p, mode)
        rc, _, err = run("merge", p, src)
        got = stat.S_IMODE(os.stat(p).st_mode)
        check(rc == 0 and got == mode and rows(p) == [512, 4096],
              f"merge kept mode {mode:o}: exit {rc}, mode {got:o}, {err.strip()!r}")
    # A read-only profile is not replaced behind its owner's back.
    ro = os.path.join(d, "ro.json")
    write_profile(ro, [entry(4096, 2e-3)])
    os.chmod(ro, 0o440)
    with open(ro) as f:
        before = f.read()
    one_line_error(["merge", ro, src], 1, "read-only")
    with open(ro) as f:
        check(f.read() == before, "merge changed a read-only profile")
    check(stat.S_IMODE(os.stat(ro).st_mode) == 0o440, "merge changed a read-only profile's mode")
    # tune writes through the same store: mode and link are kept.
    real, link = os.path.join(d, "tuned.json"), os.path.join(d, "tuned-link.json")
    write_profile(real, [entry(4096, 2e-3)])
    os.chmod(real, 0o640)
    os.symlink(real, link)
    rc, _, err = run("tune", "fusion.dflare", "--preset", "tiny.dflare.train", "--backend", "cpu",
                     "--budget", "2", "--max-time", "0.05", "--confirm", "2", "--quiet",
                     "--profile", link)
    check(rc == 0, f"tune --profile LINK: {err}")
    check(os.path.islink(link) and stat.S_IMODE(os.stat(real).st_mode) == 0o640,
          f"tune kept the link and the mode: {oct(stat.S_IMODE(os.stat(real).st_mode))}")
    with open(real) as f:
        ops = sorted(e["op"] for e in json.load(f)["entries"])
    check(ops == ["fusion.dflare", "loss"], f"tune wrote through the link: {ops}")
    no_temp_files(d)


def main():
    global SANITIZED, TMP
    ap = argparse.ArgumentParser()
    ap.add_argument("--flaretune", required=True)
    ap.add_argument("--sanitized", type=int, default=0)
    a = ap.parse_args()
    SANITIZED = bool(a.sanitized)
    with tempfile.TemporaryDirectory() as tmp:
        TMP = tmp
        code = clitest.main(a.flaretune,
                            (test_exit_code_rule, test_exec_all_or_nothing, test_npy_lies,
                             test_trace_of_a_directory, test_trace_keeps_its_log,
                             test_replay_untrusted_event, test_replay_damaged_config,
                             test_file_size_limit, test_large_magnitudes,
                             test_unbounded_reads, test_set_sizes,
                             test_profile_links,
                             test_profile_modes))
        # Modes are restored so the directory can be removed whoever runs the test.
        for root, dirs, files in os.walk(tmp):
            for n in files:
                p = os.path.join(root, n)
                if not os.path.islink(p):
                    os.chmod(p, 0o644)
    return code


if __name__ == "__main__":
    sys.exit(main())
