#!/usr/bin/env python3
"""trust-contended.py QUIET_DIR BUSY_DIR [--md OUT.md]: the goal of a contended trust-check.

Each directory holds, per op and preset, the event log of one `tune` (OP.PRESET.jsonl), the
first taken on a quiet machine, the second with CPU-burning processes on every core. For each
pair it prints the winner's median and the speedup quiet and busy and holds the busy run to:

  - the tuned (winner's) median within 1.3x of the quiet one, or withheld with its reason
    (no candidate measured cleanly);
  - the printed speedup within 1.5x of the quiet one, or withheld with its reason;
  - no call longer than the watchdog allowed: every measured candidate's slowest sample within
    its limit (20x the best so far, 50 ms at least), or stopped.

A `report` pair (QUIET_DIR/report.json, BUSY_DIR/report.json) when present: every busy
verdict the quiet one's, or "inconclusive". Exit 0 when every row holds, 1 otherwise.
"""
import argparse
import glob
import json
import os
import sys

MEDIAN_X, SPEEDUP_X, STOP_FACTOR, STOP_FLOOR = 1.3, 1.5, 20.0, 0.05


def events(path):
    out = []
    with open(path) as f:
        for line in f:
            try:
                out.append(json.loads(line))
            except ValueError:
                pass
    return out


def clean_medians(ev):
    """config key -> the clean search median of every candidate measured cleanly."""
    out = {}
    for e in ev:
        if (e.get("event") == "measured" and e.get("clean", True) and "stopped" not in e
                and not e.get("screened") and (e.get("stats") or {}).get("median_s")):
            out[json.dumps(e["config"], sort_keys=True)] = e["stats"]["median_s"]
    return out


def run_summary(path):
    ev = events(path)
    end = [e for e in ev if e.get("event") == "run_end"]
    end = end[-1] if end else {}
    cont = end.get("contention", {})
    # the watchdog: each measured call against the limit the run had when it was measured
    best, worst = float("inf"), 0.0
    for e in ev:
        if e.get("event") != "measured":
            continue
        st = e.get("stats") or {}
        if "stopped" in e:
            continue
        mx = st.get("max_s")
        if mx and best < float("inf"):
            worst = max(worst, mx / max(STOP_FACTOR * best, STOP_FLOOR))
        med = st.get("median_s")
        if e.get("clean", True) and med and not e.get("screened"):
            best = min(best, med)
    stats = end.get("stats") or {}
    return {
        "winner_cfg": json.dumps(end["winner"], sort_keys=True) if end.get("winner") else None,
        "medians": clean_medians(ev),
        "winner": stats.get("median_s") if end.get("winner") else None,
        "no_winner": end.get("no_winner", "no winner"),
        "speedup": end.get("speedup"),
        "withheld": end.get("speedup_withheld", ""),
        "taken": cont.get("samples_taken", 0),
        "discarded": cont.get("samples_discarded", 0),
        "unclean": cont.get("unclean", 0),
        "stopped": cont.get("stopped", 0),
        "worst": worst,  # the slowest call as a share of the watchdog's limit then
    }


def t(s):
    if s is None:
        return "-"
    return "%.3g us" % (s * 1e6) if s < 1e-3 else "%.3g ms" % (s * 1e3)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("quiet")
    ap.add_argument("busy")
    ap.add_argument("--md")
    a = ap.parse_args()
    rows, ok = [], True
    for qpath in sorted(glob.glob(os.path.join(a.quiet, "*.jsonl"))):
        name = os.path.basename(qpath)[:-len(".jsonl")]
        bpath = os.path.join(a.busy, name + ".jsonl")
        if not os.path.exists(bpath):
            continue
        q, b = run_summary(qpath), run_summary(bpath)
        if b["winner"] is None:
            med = "withheld (%s)" % b["no_winner"]
            med_ok = "cleanly" in b["no_winner"]
        else:
            # Against the quiet machine's median of the same config when the quiet search
            # measured it (two searches that score differently visit different configs, so
            # their winners need not be one config), else against the quiet winner.
            same = q["medians"].get(b["winner_cfg"])
            base = same if same else q["winner"]
            r = b["winner"] / base if base else float("nan")
            med = "%s (%.2fx%s)" % (t(b["winner"]), r, " same config" if same else " vs its winner")
            med_ok = 1 / MEDIAN_X <= r <= MEDIAN_X
        if b["speedup"] is None:
            sp = "withheld (%s)" % (b["withheld"] or b["no_winner"])
            sp_ok = bool(b["withheld"]) or "cleanly" in b["no_winner"]
        elif q["speedup"]:
            r = b["speedup"] / q["speedup"]
            sp = "%.2fx (%.2fx)" % (b["speedup"], r)
            sp_ok = 1 / SPEEDUP_X <= r <= SPEEDUP_X
        else:
            sp, sp_ok = "%.2fx" % b["speedup"], True
        wd_ok = b["worst"] <= 1.05
        row_ok = med_ok and sp_ok and wd_ok
        ok &= row_ok
        share = 100.0 * b["discarded"] / b["taken"] if b["taken"] else 0.0
        both = sorted(b["medians"][k] / q["medians"][k] for k in b["medians"] if k in q["medians"])
        pairs = ("%d: %.2f-%.2fx" % (len(both), both[0], both[-1])) if both else "0"
        rows.append((name, t(q["winner"]), med, "%.2fx" % q["speedup"] if q["speedup"] else "-",
                     sp, pairs, "%.0f%%" % share, str(b["unclean"]), str(b["stopped"]),
                     "%.2f" % b["worst"], "met" if row_ok else "NOT MET"))
    head = ("op.preset", "quiet winner", "busy winner", "quiet speedup", "busy speedup",
            "clean in both (busy/quiet)", "discarded", "unclean", "stopped", "slowest call / limit", "goal")
    verdicts = []
    qr, br = os.path.join(a.quiet, "report.json"), os.path.join(a.busy, "report.json")
    if os.path.exists(qr) and os.path.exists(br):
        qv = {c.get("id", i): c.get("verdict") for i, c in enumerate(json.load(open(qr)).get("claims", []))}
        for i, c in enumerate(json.load(open(br)).get("claims", [])):
            k = c.get("id", i)
            v = c.get("verdict", "")
            good = v == qv.get(k) or str(v).startswith("inconclusive")
            ok &= good
            verdicts.append((str(k), str(qv.get(k)), str(v), "met" if good else "NOT MET"))
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    if verdicts:
        lines += ["", "| claim | quiet verdict | busy verdict | goal |", "|---|---|---|---|"]
        lines += ["| " + " | ".join(v) + " |" for v in verdicts]
    text = "\n".join(lines)
    print(text)
    if a.md:
        with open(a.md, "w") as f:
            f.write(text + "\n")
    print("contended goal: %s" % ("met" if ok else "NOT MET"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
