#!/usr/bin/env python3
"""test_step_report.py: `flaretune step` and the measuring `flaretune report`, end to end.

step: the stages of SPEC.md's draft layer at tiny presets (their count per phase and D), the
parts add up (every share and sum from the same run: stages, ops, layers, the whole), repeated
layers are timed once and share the result, every linear stage's FLOPs are 2*M*N*K (3x with its
backward), the K/V projection runs its own backward in training, a profile's configs are used (an
exact shape and the nearest), and bad input (a missing or malformed profile, an unknown preset,
bad options) gives one line and no measurement; on a busy machine (FLARETUNE_MAX_LOST set so that
any lost time spoils a sample) a median not measured cleanly is marked with a footnote and a line
gives the share of samples thrown away, none of which a quiet run shows.

report: the tiny sweep is killed with SIGKILL midway and run again: it resumes from its log
without measuring a step twice, answers the three claims, draws one SVG per chart in a page
that parses as XML, and its report.json re-renders to the same document; a log of another sweep
is refused; Chromium, when here (FT_REQUIRE_CHROMIUM=1 in CI), draws a page that is not blank.

usage: test_step_report.py --flaretune PATH
"""
import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import clitest  # noqa: E402
from clitest import check, run  # noqa: E402
from test_report_render import png_pixels, screenshot  # noqa: E402

SVG = "{http://www.w3.org/2000/svg}"
T = "0.005"  # seconds per measurement: the figures do not matter here, their arithmetic does
ARGS = None
TMP = None


def one_line_error(err, what):
    lines = [l for l in err.splitlines() if l.strip()]
    check(len(lines) == 1 and lines[0].startswith("flaretune: "),
          f"{what}: want one 'flaretune: ...' line on stderr, got {err!r}")


def step_json(*args):
    rc, out, err = run("step", *args, "--time", T, "--json", timeout=600)
    check(rc == 0, f"step {' '.join(args)}: exit {rc} ({err.strip()[-300:]})")
    return json.loads(out) if rc == 0 else None


def close(a, b, rel=1e-7):
    return abs(a - b) <= rel * max(abs(a), abs(b), 1e-30)


def check_adds_up(doc, what):
    stages = doc["stages"]
    total = sum(s["alone"]["median_s"] for s in stages)
    check(close(total, doc["whole"]["sum_alone_s"]), f"{what}: the stages add up to sum_alone_s")
    check(close(sum(s["share"] for s in stages), 1.0, 1e-6), f"{what}: stage shares sum to 1")
    check(close(sum(o["median_s"] for o in doc["ops"]), total), f"{what}: ops add up")
    check(close(sum(o["share"] for o in doc["ops"]), 1.0, 1e-6), f"{what}: op shares sum to 1")
    check(sum(o["count"] for o in doc["ops"]) == len(stages), f"{what}: every stage in one op")
    check(close(sum(l["median_s"] for l in doc["layers"]), total), f"{what}: layers add up")
    check(len(doc["layers"]) == doc["sizes"]["D"] + 1, f"{what}: D layers and the context")
    w = doc["whole"]
    check(w["stats"]["samples"] >= 1 and w["stats"]["median_s"] > 0,
          f"{what}: the whole step has samples")
    check(close(w["ratio"], w["stats"]["median_s"] / total), f"{what}: ratio = whole / sum")
    # the machine over the measurement (its span is the step's): busy or not, where the span was
    # long enough to judge
    ld = doc.get("load", {})
    check(isinstance(ld.get("known"), bool) and ld.get("span_s", 0) > 0 and
          (not ld["known"] or isinstance(ld.get("busy"), bool)),
          f"{what}: the step says how busy the machine was: {ld}")
    for i, s in enumerate(stages):
        if "timed_as" in s:
            t = stages[s["timed_as"]]
            check(t["op"] == s["op"] and t["dims"] == s["dims"] and t["alone"] == s["alone"],
                  f"{what}: stage {i} ({s['name']}) shares its twin's measurement")
            # and its twin's inputs (a step's layers see one set of anchors): its workload
            check(t["flops"] == s["flops"],
                  f"{what}: stage {i} ({s['name']}) {s['flops']} FLOPs, its twin {t['flops']}")
        if s["op"] == "linear":
            d = dict(kv.split("=") for kv in s["dims"].split())
            gemm = 2 * int(d["M"]) * int(d["N"]) * int(d["K"])
            want = gemm * ((0 if s["attrs"].get("grad_only") == "1" else 1) +
                           (2 if s["attrs"].get("backward") == "1" else 0))
            check(close(s["flops"], want), f"{what}: {s['name']} FLOPs {s['flops']} = {want}")
        check(s["alone"]["median_s"] > 0, f"{what}: {s['name']} was timed")


def test_step_decode():
    doc = step_json("tiny.dflare.decode")
    if not doc:
        return
    check(doc["format"] == "flaretune-step/1", "format")
    D = doc["sizes"]["D"]
    names = [s["name"] for s in doc["stages"]]
    check(names[:2] == ["fusion", "kv_proj"] and names[-1] == "lm_head",
          f"decode: context first, LM head last: {names}")
    check(len(names) == 2 + 6 * D + 1, f"decode: {len(names)} stages for D={D}")
    check(doc["stages"][0]["op"] == "fusion.dflare", "DFLARE fuses with fusion.dflare")
    attn = [s for s in doc["stages"] if s["name"] == "attention"]
    check([s["layer"] for s in attn] == list(range(D)), "an attention per layer, in order")
    check(all(s["op"] == "attention.decode" and s["pass"] == "forward" for s in attn),
          "decode attention, forward only")
    check(all(s["config_from"] == "default" for s in doc["stages"]), "no profile: defaults")
    check_adds_up(doc, "tiny.dflare.decode")
    check(doc["whole"]["mode"] == "back to back (host clock)", "the CPU runs the step back to back")
    doc = step_json("tiny.dflash.decode", "--set", "D=5")
    if doc:
        check(len(doc["stages"]) == 2 + 6 * 5 + 1, "--set D=5: five layers")
        check(doc["stages"][0]["op"] == "fusion.dflash", "DFlash fuses with fusion.dflash")
    # The CUDA backend's sequence (a CUDA graph on a GPU) on the emulator.
    doc = step_json("tiny.dflare.train", "--backend", "cuda-emu")
    if doc:
        check(doc["whole"]["mode"].startswith("emulated"), f"cuda-emu: {doc['whole']['mode']}")
        check(doc["clock"] == "emulated", "cuda-emu's clock")
        check_adds_up(doc, "tiny.dflare.train on cuda-emu")


def test_step_train():
    doc = step_json("tiny.dflash.train", "--scheme", "dpace")
    if not doc:
        return
    D = doc["sizes"]["D"]
    names = [s["name"] for s in doc["stages"]]
    check(len(names) == 2 + 6 * D + 1, f"train: {len(names)} stages for D={D}")
    check(names[-1] == "loss" and doc["stages"][-1]["pass"] == "fwd+bwd", "the loss last, fused")
    check(doc["loss_scheme"] == "dpace" and doc["stages"][-1]["attrs"]["scheme"] == "dpace",
          "--scheme reaches the loss")
    kv = [s for s in doc["stages"] if s["op"] == "attention.kvproj"]
    check(len(kv) == 1 and kv[0]["name"] == "kv_proj" and kv[0]["pass"] == "fwd+bwd" and
          kv[0]["attrs"]["backward"] == "1" and "backward" in kv[0]["note"],
          "the K/V projection: one stage, the op with its backward")
    check("kv_proj_bwd" not in names, "no stand-in GEMMs for the K/V projection's backward")
    # The fusion's x is the frozen target's states: its backward forms dw_fc and dg, never dx
    # (SpecForge's trainer runs the target without gradients): two GEMMs, not three.
    fu = doc["stages"][0]
    fd = dict(kv_.split("=") for kv_ in fu["dims"].split())
    fwd = 2 * int(fd["N"]) * int(fd["H"]) * int(fd["TH"])
    check(fu["op"] == "fusion.dflash" and fu["pass"] == "fwd+bwd" and
          fu["attrs"].get("want_dx") == "0" and "no dx" in fu["note"] and
          close(fu["flops"], 2 * fwd),
          f"the fusion's backward without dx: {fu['attrs']}, {fu['flops']} FLOPs")
    d = dict(kv_.split("=") for kv_ in kv[0]["dims"].split()) if kv else {}
    if d:
        fwd = 4 * int(d["D"]) * int(d["N"]) * int(d["H"]) * int(d["KVD"])
        check(close(kv[0]["flops"], 3 * fwd), f"kv_proj FLOPs {kv[0]['flops']} = 3x forward {fwd}")
    lin = [s for s in doc["stages"] if s["op"] == "linear"]
    check(all(s["pass"] == "fwd+bwd" and s["attrs"]["backward"] == "1" for s in lin),
          "training projections run their backward")
    check_adds_up(doc, "tiny.dflash.train")


def test_step_profile():
    prof = os.path.join(TMP, "p.json")
    rc, _, err = run("tune", "linear", "--preset", "tiny.dflare.decode", "--backend", "cpu",
                     "--strategy", "exhaustive", "--profile", prof, "--quiet", timeout=600)
    check(rc == 0, f"tune linear ({err.strip()[-200:]})")
    entry = json.load(open(prof))["entries"][0]
    cfg = ",".join(f"{k}={v}" for k, v in entry["config"].items())
    doc = step_json("tiny.dflare.decode", "--profile", prof, "--backend", "cpu")
    if not doc:
        return
    by = {}
    for s in doc["stages"]:
        by.setdefault(s["name"], s)
    check(by["mlp_gate_up"]["config_from"] == "profile" and by["mlp_gate_up"]["config"] == cfg,
          f"the tuned shape takes the profile's config: {by['mlp_gate_up']}")
    check(by["q_proj"]["config_from"] == "profile (nearest)", "other GEMMs: the nearest entry")
    check(by["attention"]["config_from"] == "default", "ops the profile lacks: defaults")
    # each stage says why it runs the default, as exec does; every documented key is there
    check("no attention.decode entry" in by["attention"].get("config_why", ""),
          f"why the default: {by['attention'].get('config_why')}")
    check("config_why" not in by["mlp_gate_up"], "nothing to say of an exact entry's config")
    # an entry the space refuses is skipped with a warning, and its stages say why
    bad = os.path.join(TMP, "bad.json")
    p = json.load(open(prof))
    for e in p["entries"]:
        e["config"]["threads"] = "many"
    json.dump(p, open(bad, "w"))
    rc, out, err = run("step", "tiny.dflare.decode", "--profile", bad, "--backend", "cpu",
                       "--time", T, "--json", timeout=600)
    check(rc == 0 and "warning:" in err and "skipped" in err, f"the skipped entry is said: {err!r}")
    if rc == 0:
        st = {s["name"]: s for s in json.loads(out)["stages"]}
        check(st["mlp_gate_up"]["config_from"] == "default" and
              "no linear entry" in st["mlp_gate_up"].get("config_why", ""),
              f"a stage of the skipped entry says why: {st['mlp_gate_up']}")


FOOTNOTE = re.compile(r"^ +! not measured cleanly: (\d+) of (\d+) samples discarded; the median is "
                      r"an upper bound$")
SHARE = re.compile(r"^samples discarded: (\d+) of (\d+) \(([\d.]+)%\) over the step")


def step_human(max_lost, preset):
    rc, out, err = run("step", preset, "--time", T, env={"FLARETUNE_MAX_LOST": max_lost},
                       timeout=600)
    check(rc == 0, f"step {preset} (FLARETUNE_MAX_LOST={max_lost}): exit {rc} ({err[-300:]})")
    return out if rc == 0 else ""


def check_marks(out, what):
    """Every median marked '!' has its footnote right under it (its note line between), and
    every footnote a marked line above it; the counts are sane. Returns how many were marked."""
    lines = out.splitlines()
    marked = 0
    for i, line in enumerate(lines):
        m = FOOTNOTE.match(line)
        if m:
            check(int(m.group(1)) <= int(m.group(2)) and int(m.group(2)) > 0,
                  f"{what}: a footnote's counts: {line!r}")
            above = [l for l in lines[max(0, i - 2):i] if re.search(r"\d(?: [mun]?s|s)!", l)]
            check(above, f"{what}: a footnote under no '!': {lines[max(0, i - 2):i + 1]}")
        elif re.search(r"\d(?: [mun]?s|s)!", line) and not line.startswith("sum of the ops"):
            # (The sum's '!' rests on the stages' footnotes, checked below.)
            marked += 1
            below = lines[i + 1:i + 3]
            check(any(FOOTNOTE.match(l) for l in below), f"{what}: '!' without a footnote: {line!r}")
    return marked


def test_step_busy():
    """The human output on a busy machine: a median not measured cleanly is marked '!' with a
    footnote, and a line gives the share of samples thrown away; a quiet run shows none of it."""
    out = step_human("off", "tiny.dflare.decode")
    check(out and not re.search(r"not measured cleanly|samples discarded|upper bound", out),
          f"every sample kept: no busy lines:\n{out}")
    check(check_marks(out, "quiet") == 0, "every sample kept: nothing marked")
    # Every sample whose threads lost any time is thrown away: on a machine with anything else
    # running, most are, and some stage is left without enough clean ones (tried a few times).
    for attempt in range(6):
        out = step_human("0.000001", "tiny.dflare.decode")
        if FOOTNOTE.search(out) or re.search(r"(?m)^ +! not measured", out):
            break
    share = [SHARE.match(l) for l in out.splitlines() if SHARE.match(l)]
    check(len(share) == 1, f"one line of samples discarded:\n{out}")
    if share:
        d, t, pct = int(share[0].group(1)), int(share[0].group(2)), float(share[0].group(3))
        check(0 < d <= t and abs(100.0 * d / t - pct) < 0.06, f"the share adds up: {share[0].group(0)}")
    marked = check_marks(out, "busy")
    check(marked >= 1, f"a median not measured cleanly is marked (6 tries):\n{out}")
    sums = [l for l in out.splitlines() if l.startswith("sum of the ops alone")]
    stage_notes = [l for l in out.splitlines() if l.startswith(" " * 15 + "! not measured")]
    check(sums and sums[0].endswith("! (an upper bound)") == bool(stage_notes),
          f"the sum is an upper bound exactly when a stage is: {sums}")


def test_step_window():
    """Sliding-window layers (docs/step.md): --set window=W --set sliding=MASK gives the attention
    of each masked layer the window; a windowed layer is a different call (timed on its own,
    fewer FLOPs), two windowed layers one call (timed once)."""
    doc = step_json("tiny.dflash.train", "--set", "D=3", "--set", "window=3", "--set", "sliding=5")
    if not doc:
        return
    attn = [(i, s) for i, s in enumerate(doc["stages"]) if s["name"] == "attention"]
    # a full layer's attrs leave window out (0), as every call from before the attribute did
    wins = [s["attrs"].get("window", "0") for _, s in attn]
    check(wins == ["3", "0", "3"] and "window" not in attn[1][1]["attrs"],
          f"sliding=5: layers 0 and 2 slide: {wins}")
    check([s["attrs"].get("causal", "0") for _, s in attn] == ["1", "0", "1"],
          "a sliding layer's block is causal, a full layer's is not")
    (i0, a0), (i1, a1), (i2, a2) = attn
    check(a2.get("timed_as") == i0, "the two sliding layers share one measurement")
    check("timed_as" not in a1 or "window" not in doc["stages"][a1["timed_as"]]["attrs"],
          "the full layer is not timed as a sliding one")
    check(a0["flops"] < a1["flops"], f"a window sees fewer keys: {a0['flops']} < {a1['flops']}")
    check(doc["sizes"]["window"] == 3 and doc["sizes"]["sliding"] == 5, "sizes carry the layout")
    check_adds_up(doc, "tiny.dflash.train window=3 sliding=5")
    doc = step_json("tiny.dflare.decode", "--set", "window=3")
    if doc:
        attn = [s for s in doc["stages"] if s["name"] == "attention"]
        check(all(s["attrs"]["window"] == "3" for s in attn), "sliding=0: every layer slides")
    doc = step_json("tiny.dflare.decode")
    if doc:
        attn = [s for s in doc["stages"] if s["name"] == "attention"]
        check(all("window" not in s["attrs"] for s in attn), "presets: full attention")


def test_step_errors():
    bad = os.path.join(TMP, "bad.json")
    with open(bad, "w") as f:
        f.write('{"schema_version": 1, "entries": [')
    for args, code, what in (
            (["tiny.dflare.decode", "--profile", os.path.join(TMP, "missing.json")], 1,
             "a missing profile"),
            (["tiny.dflare.decode", "--profile", bad], 1, "a malformed profile"),
            (["nope.dflare.decode"], 2, "an unknown preset"),
            (["tiny.dflare.decode", "--time", "0"], 2, "--time 0"),
            (["tiny.dflare.decode", "--seed", "-1"], 2, "a negative seed"),
            (["tiny.dflare.decode", "--seed", "99999999999999999999999"], 2, "a seed over 64 bits"),
            (["tiny.dflare.train", "--scheme", "nope"], 2, "an unknown scheme"),
            (["tiny.dflare.decode", "--set", "Q=3"], 2, "an unknown size"),
            (["tiny.dflare.decode", "--set", "window=-1"], 2, "a negative window"),
            (["tiny.dflare.train", "--set", "N=5"], 2, "an N the stages would not share"),
            (["tiny.dflare.train", "--set", "blocks=7"], 2, "blocks the stages would not share"),
            (["tiny.dflare.decode", "--set", "N=5"], 2, "a decode N the stages would not share"),
            ([], 2, "no preset")):
        t0 = time.time()
        rc, out, err = run("step", *args)
        check(rc == code, f"step with {what}: exit {rc}, {code} expected")
        one_line_error(err, f"step with {what}")
        check(out == "", f"step with {what}: nothing on stdout")
        check(time.time() - t0 < 20, f"step with {what}: refused before measuring")
    for args, code, what in (
            (["--profile", os.path.join(TMP, "missing.json")], 1, "a missing profile"),
            (["--profile", bad], 1, "a malformed profile"),
            (["--models", "nope"], 2, "an unknown model"),
            (["--time", "x"], 2, "a bad --time"),
            (["--backend", "nope"], 2, "an unknown backend"),
            (["--log", os.path.join(TMP, "no-such-dir", "r.jsonl")], 1, "a log in no folder")):
        out = os.path.join(TMP, "rep-bad")
        rc, _, err = run("report", "--models", "tiny", "-o", out, *args)
        check(rc == code, f"report with {what}: exit {rc}, {code} expected")
        one_line_error(err, f"report with {what}")
        check(not os.path.exists(out), f"report with {what}: refused without leaving {out}")
    # --from renders a saved document and measures nothing: an option of the sweep beside it
    # would be ignored, so it is refused, named, before anything is read or written.
    for opt in (["--time", T], ["--models", "tiny"], ["--log", os.path.join(TMP, "l.jsonl")],
                ["--backend", "cpu"], ["--profile", bad]):
        out = os.path.join(TMP, "rep-from")
        rc, _, err = run("report", "--from", os.path.join(TMP, "none.json"), "-o", out, *opt)
        check(rc == 2 and f"{opt[0]} is an option of the sweep" in err,
              f"report --from with {opt[0]}: exit {rc}, {err!r}")
        one_line_error(err, f"report --from with {opt[0]}")
        check(not os.path.exists(out), f"report --from with {opt[0]}: nothing written")
    # A log of the other kind (docs/report.md, README "resumes"): a tuning run's log given to
    # report, a report's log given to tune, each refused in one line with the log untouched.
    tune_log, rep_log = os.path.join(TMP, "a-tune.jsonl"), os.path.join(TMP, "a-report.jsonl")
    with open(tune_log, "w") as f:
        f.write(json.dumps({"event": "run_start", "t": 1.0, "run": "r", "op": "loss",
                            "key": "k"}) + "\n")
    with open(rep_log, "w") as f:
        f.write(json.dumps({"event": "report_start", "t": 1.0, "run": "r",
                            "sweep": {"models": ["tiny"]}}) + "\n")
    kept = {p: open(p).read() for p in (tune_log, rep_log)}
    rc, _, err = run("report", "--models", "tiny", "--time", T, "-o",
                     os.path.join(TMP, "rep-kind", "a", "b"), "--log", tune_log)
    check(rc == 2 and "not a report's log" in err, f"report --log a tune log: exit {rc}, {err!r}")
    one_line_error(err, "report --log a tune log")
    check(not os.path.exists(os.path.join(TMP, "rep-kind")),
          "the refused sweep took away the folders it made (rep-kind/a/b)")
    # A folder that cannot take the report is found out before the sweep, not after it (a
    # folder of a read-only file system; as root, permissions would not stop the write).
    ro = "/proc/self"
    rc, _, err = run("report", "--models", "tiny", "--time", T, "-o", ro, "--log",
                     os.path.join(TMP, "ro.jsonl"))
    check(rc != 0 and "report.html" in err and not os.path.exists(os.path.join(TMP, "ro.jsonl")),
          f"report -o a folder it cannot write: refused before the sweep: exit {rc}, {err!r}")
    one_line_error(err, "report -o a folder it cannot write")
    rc, _, err = run("tune", "loss", "--preset", "tiny.dflare.train", "--backend", "cpu",
                     "--budget", "1", "--log", rep_log, "--quiet")
    check(rc == 2 and "not a tuning run's log" in err, f"tune --log a report log: exit {rc}, {err!r}")
    one_line_error(err, "tune --log a report log")
    check(all(open(p).read() == kept[p] for p in kept), "the refused runs left the logs alone")


def sweep_cmd(out_dir, *extra):
    return [ARGS.flaretune, "report", "--models", "tiny", "--time", T, "-o", out_dir, *extra]


def log_steps(path):
    keys = []
    with open(path) as f:
        for line in f:
            try:
                ev = json.loads(line)
            except ValueError:
                continue  # a line torn by the kill
            if ev.get("event") == "report_step":
                keys.append(ev["key"])
    return keys


def test_report_resume():
    out = os.path.join(TMP, "rep")
    # Killed without warning once a few steps are logged.
    p = subprocess.Popen(sweep_cmd(out), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                         text=True)
    seen = 0
    for line in p.stderr:
        if re.match(r"report: \[\d+/\d+\]", line):
            seen += 1
            if seen == 6:
                break
    p.send_signal(signal.SIGKILL)
    p.wait()
    log = os.path.join(out, "report.jsonl")
    before = log_steps(log)
    check(4 <= len(before) < 43, f"the killed sweep logged {len(before)} steps")
    check(not os.path.exists(os.path.join(out, "report.html")), "no page from a killed sweep")
    rc, so, err = run(*sweep_cmd(out)[1:], timeout=900)
    check(rc == 0, f"the rerun finishes ({err.strip()[-300:]})")
    after = log_steps(log)
    check(len(after) == len(set(after)), "no step measured twice across the kill")
    check(after[:len(before)] == before and len(set(after)) == 43,
          f"the rerun measured only the rest: {len(before)} + {len(after) - len(before)} = 43")
    doc = json.load(open(os.path.join(out, "report.json")))
    check(doc["machine"]["resumed_steps"] == len(before), "the document says what it resumed")
    check([c["id"] for c in doc["claims"]] == ["fusion-overhead", "depth-scaling",
                                              "dpace-overhead"], "the three claims, in order")
    for c in doc["claims"]:
        # dpace-overhead rests on losses timed side by side, whose samples are not judged: a
        # spread of their quartiles wider than the 2.3% the claim is about decides nothing, and
        # the verdict is withheld, saying so; a verdict given rests on a narrower one.
        fig = c.get("figures", {})
        wide = c["id"] == "dpace-overhead" and fig.get("high_pct", 0) - fig.get("low_pct", 0) > 2.3
        check((c["verdict"] == "inconclusive" and "quartiles span" in c.get("withheld", "")) if wide
              else c["verdict"] in ("holds", "does not hold", "measured") and "%" in c["answer"],
              f"claim {c['id']}: a verdict and a figure: {c['verdict']} {c['answer']} {fig} "
              f"{c.get('withheld')}")
        # Attributed to the paper by name and section, not to a folder of this repository.
        check("seeds/" not in c["source"] and "(technical summary), " in c["source"] and
              c["source"].split(":")[0] in ("DFLARE", "D-PACE"), f"claim {c['id']}: source "
              f"{c['source']!r}")
        # Figures read as people write them: no negative zero, no exponent.
        check(not re.search(r"-0\.0+%|\de[-+]\d", c["answer"]),
              f"claim {c['id']}: plain figures in {c['answer']!r}")
    # Every sample kept (FLARETUNE_MAX_LOST=off): the evidence is clean and nothing withheld.
    check([len(c.get("evidence", [])) for c in doc["claims"]] == [2, 8, 3] and
          all(e["clean"] and e["samples_taken"] > 0 for c in doc["claims"] for e in c["evidence"]),
          f"each claim names the steps its verdict rests on: {[c.get('evidence') for c in doc['claims']]}")
    check(doc.get("contention", {}).get("steps") == 41 and doc["contention"]["unclean_steps"] == 0
          and doc["contention"]["samples_discarded"] == 0, f"contention: {doc.get('contention')}")
    check(all(r[-1] == "yes" for r in doc["tables"][0]["rows"]), "every step measured cleanly")
    # tiny DFLARE's own depth is D 3: its D=3 points (decode, train) are its own steps.
    check(len(doc["steps"]) == 41 and len(doc["tables"][0]["rows"]) == 41,
          f"41 distinct steps tabled: {len(doc['steps'])}, {len(doc['tables'][0]['rows'])}")
    steps = {}
    for line in open(log):
        try:
            ev = json.loads(line)
        except ValueError:
            continue
        if ev.get("event") == "report_step":
            steps[ev["key"]] = ev["step"]
    check(steps["dflare.decode.D3.decay"] == steps["dflare.decode.decay"],
          "a point at the drafter's own sizes is its step, measured once")
    paired = [json.loads(l) for l in open(log) if '"report_paired"' in l]
    check(sorted(e["key"] for e in paired) == ["B12", "B16", "B8"],
          "the losses side by side, once per block size")
    for e in paired:
        sch = e["paired"]["schemes"]
        check(set(sch) == {"decay", "progressive", "dpace", "dpace_cum", "dpace_cont"} and
              sch["decay"]["diff_median_s"] == 0 and
              all(v["diff_q1_s"] <= v["diff_median_s"] <= v["diff_q3_s"] and v["median_s"] > 0
                  for v in sch.values()), f"paired B={e['paired']['B']}: every scheme, ordered")
    chart = [c for c in doc["charts"] if c["id"] == "scheme-overhead"][0]
    check([len(s["points"]) for s in chart["series"]] == [3, 3, 3, 3],
          "the overhead chart: four schemes at three block sizes")
    root = ET.parse(os.path.join(out, "report.html")).getroot()
    svgs = root.findall(f".//{SVG}svg")
    check(len(svgs) == len(doc["charts"]) == 7, f"{len(svgs)} charts drawn")
    page = "".join(root.itertext())
    for c in doc["claims"]:
        check(c["answer"] in page, f"claim {c['id']} answered on the page")
    # The saved document renders again to itself.
    again = os.path.join(TMP, "again")
    rc, _, err = run("report", "--from", os.path.join(out, "report.json"), "-o", again)
    check(rc == 0 and json.load(open(os.path.join(again, "report.json"))) == doc,
          f"report.json round-trips ({err.strip()})")
    # A step measured while the machine was busy (its `load`), every sample clean: its medians
    # are upper bounds all the same. Rebuilt from the log with one step's load marked busy, the
    # claims resting on it are withheld, its points in the charts are marked, its row says so.
    loaded = os.path.join(TMP, "rep-loaded")
    os.makedirs(loaded)
    target = doc["claims"][1]["evidence"][0]["step"]
    with open(log) as src, open(os.path.join(loaded, "report.jsonl"), "w") as dst:
        for line in src:
            try:
                ev = json.loads(line)
            except ValueError:
                dst.write(line)
                continue
            if ev.get("event") == "report_step" and ev["key"] == target:
                ev["step"]["load"] = {"known": True, "busy": True, "other_cpus": 1.5,
                                      "steal_frac": 0, "loadavg1": 3.5, "cpus": 2, "span_s": 2.0}
                line = json.dumps(ev) + "\n"
            dst.write(line)
    rc, _, err = run(*sweep_cmd(loaded)[1:])
    check(rc == 0 and log_steps(os.path.join(loaded, "report.jsonl")) == after,
          f"rebuilt from the log, nothing measured again: {rc} {err[-300:]}")
    ld = json.load(open(os.path.join(loaded, "report.json"))) if rc == 0 else {"claims": []}
    for c in ld["claims"]:
        rests = any(e["step"] == target for e in c.get("evidence", []))
        check(not rests or (c["verdict"] == "inconclusive" and
                            "was busy while" in c.get("withheld", "")),
              f"claim {c['id']} on {target} (busy): {c['verdict']} {c.get('withheld')}")
    check(ld.get("contention", {}).get("loaded_steps") == 1, f"contention: {ld.get('contention')}")
    bound = [b for ch in ld.get("charts", []) for ser in ch.get("series", [])
             for b in ser.get("bound", [])]
    check(bound.count(True) >= 1 and bound.count(True) < len(bound),
          f"the busy step's points marked in the charts, and only those: {bound}")
    check(sum(r[-1].startswith("no: the machine was busy (others used 1.50 of 2 CPUs)")
              for r in ld.get("tables", [{"rows": []}])[0]["rows"]) == 1,
          "its row in the table of steps says so")
    # The same folder with another sweep's options: refused, the log kept.
    rc, _, err = run(*sweep_cmd(out, "--backend", "ref")[1:])
    check(rc != 0, "another sweep on the same log is refused")
    one_line_error(err, "another sweep on the same log")
    check(log_steps(log) == after, "the refused sweep leaves the log alone")
    # The configs come from --profile: the same log resumed with a profile it was not made with
    # would mix two sweeps' configs, so it is refused too (a profile is part of the sweep).
    prof = os.path.join(TMP, "rep-prof.json")
    rc, _, err = run("tune", "loss", "--preset", "tiny.dflare.train", "--backend", "cpu",
                     "--budget", "1", "--max-time", "0.05", "--quiet", "--profile", prof)
    check(rc == 0, f"a profile for the sweep: {rc} {err}")
    rc, _, err = run(*sweep_cmd(out, "--profile", prof)[1:])
    check(rc == 2 and "holds another sweep" in err, f"resumed with another --profile: {rc} {err!r}")
    check(log_steps(log) == after, "the refused sweep leaves the log alone")
    chromium(os.path.join(out, "report.html"))


def chromium(page):
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    if not browser:
        if os.environ.get("FT_REQUIRE_CHROMIUM") == "1":
            check(False, "FT_REQUIRE_CHROMIUM=1 but no chromium on PATH")
        else:
            print("chromium: skipped: not on PATH", file=sys.stderr)
        return
    png = screenshot(browser, page, TMP, 1000, 1600)
    if not png:
        return
    w, h, rows = png_pixels(png)
    counts = {}
    for row in rows:
        for px in row:
            counts[px] = counts.get(px, 0) + 1
    bg = max(counts.values())
    check(w * h - bg > 0.05 * w * h, f"the sweep's page is not blank ({w * h - bg} pixels drawn)")
    check(sum(1 for n in counts.values() if n >= 50) >= 6, "the sweep's page has colours")


def main():
    global ARGS, TMP
    ap = argparse.ArgumentParser()
    ap.add_argument("--flaretune", required=True)
    ARGS = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="ft_step_") as TMP:
        return clitest.main(ARGS.flaretune, [test_step_decode, test_step_train, test_step_window,
                                             test_step_profile,
                                             test_step_busy, test_step_errors, test_report_resume])


if __name__ == "__main__":
    sys.exit(main())
