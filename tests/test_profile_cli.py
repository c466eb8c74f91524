#!/usr/bin/env python3
"""test_profile_cli.py: the command line of the profile store: `show`, `merge` and `emit`:
help, exit codes, one-line errors (missing file, malformed file, too new, unknown format), the
merged view, what merge writes, the JSON emitter's records (docs/profiles.md, docs/emit.md);
the entries `watch` lists when none runs here.

usage: test_profile_cli.py --flaretune PATH
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import clitest  # noqa: E402
from clitest import DEVICE, FAILURES, check, entry, one_line_error, run, stats  # noqa: E402

COMMANDS = ["show", "merge", "emit"]
def write_profile(path, entries, version=1):
    with open(path, "w") as f:
        json.dump({"schema_version": version, "generator": "test", "entries": entries}, f)


def read(path):
    with open(path) as f:
        return f.read()


def medians(doc):
    return {(e["shape"]["M"], e["attrs"]["scheme"]): e["stats"]["median_s"]
            for e in doc["entries"]}


def test_help():
    rc, out, _ = run("help")
    check(rc == 0 and all(f"  {c} " in out for c in COMMANDS), "help lists show, merge, emit")
    for c in COMMANDS:
        for form in ([c, "--help"], ["help", c]):
            rc, out, _ = run(*form)
            check(rc == 0 and out.startswith(f"usage: flaretune {c}"), f"{form} prints usage")


def test_show(tmp):
    a, b = os.path.join(tmp, "a.json"), os.path.join(tmp, "b.json")
    write_profile(a, [entry(512, 2e-3), entry(4096, 8e-3)])
    bad = entry(1024, 1e-3)
    del bad["stats"]
    write_profile(b, [entry(512, 1e-3), entry(512, 3e-3, scheme="uniform"), bad])
    rc, out, err = run("show", a)
    check(rc == 0 and err == "", f"show: exit {rc}, stderr {err!r}")
    rows = [l for l in out.splitlines() if l.startswith("loss")]
    check(len(rows) == 2 and out.splitlines()[0].split()[:4] == ["op", "backend", "device", "shape"],
          f"show: a header and 2 rows: {out!r}")
    check("M=512 H=1024 V=32768" in out and "2.00x" in out and "25.0%" in out,
          f"show: shape, speedup and roofline in the table: {out!r}")
    # Several profiles: merged, best per key; skipped entries named on stderr, not fatal.
    rc, out, err = run("show", a, b, "--json")
    check(rc == 0, f"show --json: exit {rc} {err!r}")
    doc = json.loads(out)
    check(doc["schema_version"] == 1, "show --json: schema_version")
    m = medians({"entries": [e for e in doc["entries"] if "stats" in e]})
    check(m == {(512, "dpace"): 1e-3, (4096, "dpace"): 8e-3, (512, "uniform"): 3e-3},
          f"show A B: best per key, got {m}")
    warn = [l for l in err.splitlines() if l.strip()]
    check(len(warn) == 1 and warn[0].startswith("flaretune: warning: ") and "entries[2]" in warn[0]
          and "'stats' is missing" in warn[0], f"show: one warning naming the entry: {err!r}")
    # A hand-edited device with control characters: printed as '?', each entry one row.
    c = os.path.join(tmp, "ctl.json")
    write_profile(c, [entry(512, 1e-3, device="cpu: A\nB\tC\x01\x1b[31m x 16\u009b2J")])
    rc, out, err = run("show", c)
    lines = out.splitlines()
    check(rc == 0 and len(lines) == 2 and "cpu: A?B?C??[31m x 16?2J" in lines[1]
          and not any(ord(ch) < 0x20 or 0x80 <= ord(ch) <= 0x9f for ch in out.replace("\n", "")),
          f"show: control characters printed as '?': {out!r}")
    # A skipped entry's op and backend, and a skipped kernel's name, with a line break, a
    # carriage return and escape sequences: the warning's label is one line of plain text, as
    # the quoted copy after it (control characters become spaces).
    hostile = entry(512, 1e-3)
    hostile["op"], hostile["backend"] = "x\x1b[31mRED\x1b[0m\rOVERWRITE", "cp\nu"
    with open(c, "w") as f:
        json.dump({"schema_version": 1, "entries": [hostile],
                   "kernels": [{"kernel": "k\x1b[31mK\nZ", "backend": "b\x1bX"}]}, f)
    rc, out, err = run("show", c)
    warn = err.splitlines()
    check(rc == 0 and len(warn) == 2 and all(l.startswith("flaretune: warning: ") for l in warn)
          and not any(ord(ch) < 0x20 for ch in err.replace("\n", ""))
          and "(x [31mRED [0m OVERWRITE on cp u" in warn[0] and "(k [31mK Z)" in warn[1],
          f"show: control characters of skipped entries' labels printed as spaces: {err!r}")
    # A run Ctrl-C stopped: marked, and never over a finished run's entry however fast.
    d = os.path.join(tmp, "stopped.json")
    stopped = entry(512, 1e-4)
    stopped["interrupted"] = True
    write_profile(d, [stopped, entry(4096, 8e-3)])
    rc, out, _ = run("show", d)
    rows = [l for l in out.splitlines()[1:] if "loss" in l]
    check(rc == 0 and len(rows) == 2 and "stopped" in rows[0] and "stopped" not in rows[1],
          f"show marks the stopped run's entry: {out!r}")
    rc, out, _ = run("show", d, a, "--json")
    m = {e["shape"]["M"]: e for e in json.loads(out)["entries"]} if rc == 0 else {}
    check(512 in m and m[512]["stats"]["median_s"] == 2e-3 and "interrupted" not in m[512],
          f"show: the finished run's slower entry over the stopped one's: {out[:300]!r}")
    rc, out, _ = run("show", a, "--op", "fusion.dflare")
    check(rc == 0 and "no entries" in out, f"show --op with no entries: {out!r}")
    rc, out, _ = run("show", a, b, "--op", "loss", "--json")
    check(rc == 0 and len(json.loads(out)["entries"]) == 4, "show --op loss --json")
    # Errors: one line each.
    one_line_error(["show"], 2, "which profile")
    one_line_error(["show", os.path.join(tmp, "missing.json")], 1, "no such profile")
    one_line_error(["show", a, "--op", "nope"], 2, "unknown op 'nope'")
    one_line_error(["show", a, "--bogus"], 2, "unknown option")
    broken = os.path.join(tmp, "broken.json")
    with open(broken, "w") as f:
        f.write('{"schema_version": 1,\n "entries": [}\n')
    one_line_error(["show", broken], 1, f"{broken}:2:")
    one_line_error(["show", broken], 1, "malformed JSON")
    future = os.path.join(tmp, "future.json")
    write_profile(future, [], version=7)
    one_line_error(["show", future], 1, "schema_version 7 is newer")
    one_line_error(["show", tmp], 1, "directory")


def test_merge(tmp):
    a, b, out = (os.path.join(tmp, n) for n in ("ma.json", "mb.json", "mout.json"))
    write_profile(a, [entry(512, 2e-3), entry(4096, 8e-3)])
    write_profile(b, [entry(512, 1e-3), entry(512, 3e-3, scheme="uniform")])
    rc, o, err = run("merge", out, a, b)
    check(rc == 0 and "3 entries" in o, f"merge: exit {rc}, {o!r} {err!r}")
    doc = json.load(open(out))
    check(medians(doc) == {(512, "dpace"): 1e-3, (4096, "dpace"): 8e-3, (512, "uniform"): 3e-3},
          f"merge: best per key, got {medians(doc)}")
    check(not [n for n in os.listdir(tmp) if ".tmp." in n], "merge left a temporary file")
    # OUT's own entries take part: merging a slower result does not replace a faster one.
    c = os.path.join(tmp, "mc.json")
    write_profile(c, [entry(512, 5e-3), entry(8192, 9e-3)])
    rc, o, err = run("merge", out, c)
    doc = json.load(open(out))
    check(rc == 0 and medians(doc)[(512, "dpace")] == 1e-3 and (8192, "dpace") in medians(doc),
          f"merge into an existing OUT keeps its best: {medians(doc)}")
    # Top-level keys this build does not know (a newer writer's, a user's) are kept: OUT's as
    # they are, an input's where OUT lacks them.
    d, e = os.path.join(tmp, "md.json"), os.path.join(tmp, "me.json")
    for path, extra in ((d, {"note": "mine", "vendor": {"x": [1, 2]}}),
                        (e, {"note": "theirs", "site": "lab"})):
        write_profile(path, [entry(512, 4e-3)])
        doc = json.load(open(path))
        doc.update(extra)
        json.dump(doc, open(path, "w"))
    rc, o, err = run("merge", d, e)
    doc = json.load(open(d))
    check(rc == 0 and doc.get("note") == "mine" and doc.get("vendor") == {"x": [1, 2]} and
          doc.get("site") == "lab", f"merge keeps unknown top-level keys: {rc} {sorted(doc)}")
    # An OUT that is not a regular file (a named pipe) is refused before anything is read: not
    # even the pipe is opened, so a writer's data stays in it (the old order opened it to read
    # OUT's entries, which waits for a writer, and refused it only after reading).
    fifo = os.path.join(tmp, "mfifo")
    os.mkfifo(fifo)
    try:
        rc, o, err = run("merge", fifo, a, timeout=30)
        check(rc == 1 and "not a regular file" in err and len(err.strip().splitlines()) == 1,
              f"merge into a named pipe: refused at once in one line: {rc} {err!r}")
    except subprocess.TimeoutExpired:
        check(False, "merge into a named pipe: it waited for a writer to read OUT")
    os.unlink(fifo)
    # Failures leave OUT as it was.
    before = read(out)
    broken = os.path.join(tmp, "mbroken.json")
    with open(broken, "w") as f:
        f.write("{not json")
    one_line_error(["merge", out, a, broken], 1, "malformed JSON")
    one_line_error(["merge", out, os.path.join(tmp, "missing.json")], 1, "no such profile")
    check(read(out) == before, "a failed merge changed OUT")
    one_line_error(["merge", broken, a], 1, "malformed JSON")
    check(read(broken) == "{not json", "merge into a malformed OUT overwrote it")
    future = os.path.join(tmp, "mfuture.json")
    write_profile(future, [], version=3)
    one_line_error(["merge", future, a], 1, "newer")
    one_line_error(["merge"], 2, "which output")
    one_line_error(["merge", out], 2, "which profiles")
    one_line_error(["merge", "--bogus", out, a], 2, "unknown option")


def test_merge_non_objects(tmp):
    """Entries that are not objects (1, "x", null) are dropped with one warning each, naming the
    file and the index; the valid entries are kept and nothing else is carried over."""
    src, out = os.path.join(tmp, "junk.json"), os.path.join(tmp, "junk-out.json")
    write_profile(src, [1, entry(512, 1e-3), "x", None, entry(4096, 2e-3)])
    rc, o, err = run("merge", out, src)
    check(rc == 0 and "2 entries" in o, f"merge with junk entries: exit {rc}, {o!r} {err!r}")
    warn = [l for l in err.splitlines() if l.strip()]
    check(len(warn) == 3 and all(l.startswith("flaretune: warning: ") and src in l and
                                 "dropped" in l for l in warn),
          f"one warning per non-object entry, naming the file: {err!r}")
    for i, what in ((0, "an integer"), (2, "a string"), (3, "null")):
        check(any(f"entries[{i}]" in l and what in l for l in warn),
              f"warning for entries[{i}] ({what}): {err!r}")
    doc = json.load(open(out))
    kinds = [type(e).__name__ for e in doc["entries"]]
    check(kinds == ["dict", "dict"], f"merge carried non-object entries into OUT: {kinds}")
    # An OUT that already holds such entries (an older flaretune kept them) sheds them, saying so.
    write_profile(out, [entry(8192, 3e-3), 7, [1, 2]])
    src2 = os.path.join(tmp, "clean.json")
    write_profile(src2, [entry(512, 1e-3)])
    rc, o, err = run("merge", out, src2)
    doc = json.load(open(out))
    kinds = [type(e).__name__ for e in doc["entries"]]
    check(rc == 0 and kinds == ["dict", "dict"], f"merge into an OUT with junk: {kinds}")
    warn = [l for l in err.splitlines() if l.strip()]
    check(len(warn) == 2 and all(out in l and "dropped" in l for l in warn)
          and "entries[1]" in warn[0] and "entries[2]" in warn[1],
          f"OUT's dropped entries named: {err!r}")


def test_emit(tmp):
    p = os.path.join(tmp, "e.json")
    write_profile(p, [entry(512, 1e-3), entry(4096, 8e-3),
                      entry(512, 2e-4, backend="other", device="other: X1",
                            config={"BM": 64, "layout": "row"})])
    # A kernel name of 5000 bytes cannot be a C string literal: the profile's data, exit 1, and
    # the line names what is too long; json carries it.
    longk = os.path.join(tmp, "longk.json")
    with open(longk, "w") as f:
        json.dump({"schema_version": 1, "entries": [], "kernels": [{
            "kernel": "k" * 5000, "backend": "cuda", "device": "cuda: X sm_80",
            "problem_size": [4], "config": {"b": 1}, "stats": {"median_s": 1e-3},
            "default": None, "speedup": None, "evaluations": 1, "space_valid": 1,
            "strategy": "random", "tuned_at": "2026-01-01T00:00:00Z"}]}, f)
    one_line_error(["emit", longk, "-o", os.path.join(tmp, "longk.h")], 1,
                   "a kernel name of 5003 bytes is longer than the 4095")
    check(not os.path.exists(os.path.join(tmp, "longk.h")), "emit of a too long name wrote nothing")
    rc, out, err = run("emit", p, "--format", "json")
    check(rc == 0, f"emit --format json: exit {rc} {err!r}")
    recs = json.loads(out)
    check(isinstance(recs, list) and len(recs) == 3, f"emit json: 3 records, got {out!r}")
    for r in recs:
        check(set(r) == {"op", "backend", "device", "shape", "attrs", "params", "median_s"},
              f"emit json: record keys {sorted(r)}")
    # attrs lists every attribute of the op: the profile's {"scheme": ...}, the defaults of
    # those it leaves out (alpha 0.5, final_norm 0), and "*" for those that change nothing here
    # (eps without final_norm, epoch without progressive_epoch: docs/emit.md).
    for r in recs:
        check(r["attrs"].get("scheme") == "dpace" and r["attrs"].get("alpha") == "0.5"
              and r["attrs"].get("final_norm") == "0" and "gamma" in r["attrs"]
              and r["attrs"].get("eps") == "*" and r["attrs"].get("epoch") == "*",
              f"emit json: every attribute of loss, got {r['attrs']}")
    other = [r for r in recs if r["backend"] == "other"]
    check(other and other[0]["params"] == {"BM": 64, "layout": "row"}
          and other[0]["shape"] == {"M": 512, "H": 1024, "V": 32768}, f"emit json: {other}")
    rc, out, _ = run("emit", p, "--format", "json", "--backend", "ref")
    check(rc == 0 and len(json.loads(out)) == 2, "emit --backend ref: 2 records")
    rc, out, _ = run("emit", p, "--format", "json", "--device", "X1")
    check(rc == 0 and len(json.loads(out)) == 1, "emit --device X1: 1 record")
    rc, out, err = run("emit", p, "--format", "json", "--device", "nowhere")
    check(rc == 0 and json.loads(out) == [] and "warning" in err, "emit with no match: warning")
    rc, out, _ = run("emit", p)
    check(rc == 0 and "#ifndef FT_TUNED_H" in out and "ft_tuned_lookup(" in out,
          "emit: a C header on stdout by default")
    h = os.path.join(tmp, "tuned.h")
    rc, out, err = run("emit", p, "-o", h, "--prefix", "my_cfg")
    check(rc == 0 and "#ifndef MY_CFG_H" in read(h) and "my_cfg_lookup_v(" in read(h),
          f"emit -o --prefix: {err!r}")
    check(out == "" and err == f"wrote {h}: 3 entries as a C header\n",
          f"emit -o says what it wrote on stderr: {out!r} {err!r}")
    j = os.path.join(tmp, "tuned.json")
    rc, out, err = run("emit", p, "--format", "json", "--backend", "other", "-o", j)
    check(rc == 0 and err == f"wrote {j}: 1 entry as JSON records\n" and
          len(json.loads(read(j))) == 1, f"emit --format json -o: {out!r} {err!r}")
    # -o /dev/stdout into a pipe: the output alone, what it wrote said on stderr
    rc, out, err = run("emit", p, "--format", "json", "-o", "/dev/stdout")
    check(rc == 0 and len(json.loads(out)) == 3 and "wrote /dev/stdout" in err,
          f"emit -o /dev/stdout: {rc} {out!r} {err!r}")
    check(not [n for n in os.listdir(tmp) if ".tmp." in n], "emit left a temporary file")
    before = read(h)
    one_line_error(["emit", p, "--format", "yaml", "-o", h], 2, "unknown format 'yaml'")
    one_line_error(["emit", p, "--prefix", "1bad-name", "-o", h], 2, "not a C identifier")
    check(read(h) == before, "a failed emit changed its output file")
    check(not [n for n in os.listdir(tmp) if ".tmp." in n], "a failed emit left a temporary file")
    one_line_error(["emit"], 2, "which profile")
    one_line_error(["emit", p, "--format"], 2, "needs a value")
    one_line_error(["emit", os.path.join(tmp, "missing.json")], 1, "no such profile")
    broken = os.path.join(tmp, "ebroken.json")
    with open(broken, "w") as f:
        f.write('{"schema_version": 1, "entries": [1, 2,]}')
    one_line_error(["emit", broken], 1, "malformed JSON")
    one_line_error(["emit", p, "-o", os.path.join(tmp, "no", "dir", "t.h")], 1, "t.h")
    # The profile it reads is never its output, however the path is spelt.
    before = read(p)
    link = os.path.join(tmp, "e-link.json")
    os.symlink(p, link)
    for o in (p, os.path.join(tmp, ".", "e.json"), link):
        one_line_error(["emit", p, "-o", o], 2, "the output is the profile it reads")
        one_line_error(["emit", p, "--format", "json", "-o", o], 2, "the output is the profile")
    check(read(p) == before and os.path.islink(link), "emit wrote over the profile it reads")
    # A link to a file stays a link: the file it points at is written.
    target, hlink = os.path.join(tmp, "target.h"), os.path.join(tmp, "h-link.h")
    with open(target, "w") as f:
        f.write("old\n")
    os.symlink(target, hlink)
    rc, out, err = run("emit", p, "-o", hlink)
    check(rc == 0 and os.path.islink(hlink) and "#ifndef FT_TUNED_H" in read(target),
          f"emit -o a link: the link kept, its file written: {rc} {err!r}")
    # A name with no room for the temporary file's suffix is refused as such (NAME_MAX 255).
    one_line_error(["emit", p, "-o", os.path.join(tmp, "a" * 248 + ".h")], 1,
                   "leaves no room for its temporary file's suffix")
    # A dangling link, relative, from another folder: its target is made, the link kept.
    os.makedirs(os.path.join(tmp, "dl"), exist_ok=True)
    dangling = os.path.join(tmp, "dl", "t.h")
    os.symlink("../dl-target.h", dangling)
    rc, out, err = run("emit", p, "-o", dangling)
    check(rc == 0 and os.path.islink(dangling) and
          "#ifndef FT_TUNED_H" in read(os.path.join(tmp, "dl-target.h")) and
          os.listdir(os.path.join(tmp, "dl")) == ["t.h"],
          f"emit -o a dangling link: its target made, the link kept: {rc} {err!r}")


def test_renamed_tunables(tmp):
    """profiles/h200.json was measured before fusion.dflare's CUDA tunables were renamed: it is
    read under the new names, with a note, and written back under them; typed, a former name is
    refused with the new one."""
    shipped = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                           "profiles", "h200.json")
    old = json.load(open(shipped))["entries"][0]["config"]
    check("cpt" in old and "vecs_per_thread" not in old, f"the shipped profile has the old names: {old}")
    rc, out, err = run("show", shipped)
    notes = [l for l in err.splitlines() if l.startswith("flaretune: note: ")]
    check(rc == 0 and len(notes) == 2 and len(err.splitlines()) == 2, f"show: a note per entry: {err!r}")
    check(all("cpt -> vecs_per_thread" in n and "ctas -> blocks_per_sm" in n for n in notes),
          f"the notes name the renames: {notes}")
    check("vecs_per_thread=1" in out and "blocks_per_sm=2" in out and "cpt=" not in out,
          f"show: the new names in the table: {out!r}")
    rc, out, err = run("show", shipped, "--json")
    new = json.loads(out)["entries"][0]["config"]
    want = ["vec_bytes" if k == "vec" else {"cpt": "vecs_per_thread", "rpc": "rows_per_block",
                                            "ctas": "blocks_per_sm"}.get(k, k) for k in old]
    check(list(new) == want and [new[k] for k in want] == list(old.values()),
          f"show --json: same values, new names, same order: {new}")
    out_path = os.path.join(tmp, "renamed.json")
    rc, o, err = run("merge", out_path, shipped)
    doc = json.load(open(out_path))
    check(rc == 0 and all("vecs_per_thread" in e["config"] and "cpt" not in e["config"]
                          for e in doc["entries"]), f"merge writes the new names: {rc} {err!r}")
    rc, o, err = run("show", out_path)
    check(rc == 0 and err == "", f"a profile written under the new names has no note: {err!r}")
    # Every configuration an entry holds is renamed: the default's and the ties' too.
    doc = json.load(open(shipped))
    e = doc["entries"][0]
    e["config"] = {k: v for k, v in json.load(open(out_path))["entries"][0]["config"].items()}
    e["default"] = {"config": dict(old), "stats": e["stats"]}
    e["tie"] = [dict(old, cpt=2)]
    mixed = os.path.join(tmp, "mixed.json")
    write_profile(mixed, [e])
    rc, out, err = run("show", mixed, "--json")
    got = json.loads(out)["entries"][0] if rc == 0 else {}
    check(rc == 0 and "read as vec -> vec_bytes" in err and
          got.get("default", {}).get("config", {}).get("vecs_per_thread") == 1 and
          got.get("tie", [{}])[0].get("vecs_per_thread") == 2 and "cpt" not in json.dumps(got),
          f"default and ties renamed too: {rc} {err!r} {got.get('tie')}")
    one_line_error(["exec", "fusion.dflare", "--backend", "cuda-emu", "--preset", "tiny.dflare.train",
                    "--config", "cpt=2"], 2, "'cpt' is now called 'vecs_per_thread'")


def test_watch_lists_entries(tmp):
    """`watch` on a profile with no entry for this device lists the entries it has: a hand-edited
    device's control characters are printed as spaces, each entry one line."""
    c = os.path.join(tmp, "watch-ctl.json")
    write_profile(c, [entry(512, 1e-3, backend="cpu", device="cpu: A\nB\tC\x01D\x1b[31m E\u009b2J")])
    rc, out, err = run("watch", "--profile", c, "--backend", "cpu")
    has = [l for l in err.splitlines() if "it has:" in l]
    check(rc == 1 and len(has) == 1 and has[0] == "  it has: loss on cpu, cpu: A B C D [31m E 2J"
          and not any(ord(ch) < 0x20 or 0x80 <= ord(ch) <= 0x9f for ch in err.replace("\n", "")),
          f"watch: the entries it has, control characters printed as spaces: {rc} {err!r}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--flaretune", required=True)
    clitest.FT = ap.parse_args().flaretune
    with tempfile.TemporaryDirectory() as tmp:
        for t in (test_help, test_show, test_merge, test_merge_non_objects, test_emit,
                  test_renamed_tunables, test_watch_lists_entries):
            n = len(FAILURES)
            t() if t is test_help else t(tmp)
            print(f"{t.__name__:40s} {'ok' if len(FAILURES) == n else 'FAILED'}", file=sys.stderr)
    print(f"{len(FAILURES)} failures", file=sys.stderr)
    return 1 if FAILURES else 0


if __name__ == "__main__":
    sys.exit(main())
