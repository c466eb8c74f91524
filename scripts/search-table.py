#!/usr/bin/env python3
"""search-table.py: flaretune's strategies against Kernel Tuner's, one table, and the goal.

    scripts/search-table.py REPLAY.json... [--kt KT.json...] [--traces TRACE.json...]
                            [--markdown FILE] [--json FILE]

REPLAY.json: `flaretune replay LOG --target 5%,1% --batch 1,4,16 --json` for one landscape (an
object, or the `logs` array of a family). KT.json: `scripts/kt-compare.py --json` for the same
landscapes (matched by op, preset and dims); given several for one landscape (its contenders
run again over more seeds), each strategy counts from the run with the most seeds. Prints, per landscape, the default strategy's
median evaluations and wall time to 5% and 1% of the confirmed optimum, its success within a
quarter of the space, the other flaretune strategies, and Kernel Tuner's best strategy at each
target on that landscape; then whether the goal holds:

  - at 5%: the default needs no more evaluations than Kernel Tuner's best there (median): 'met'
    when the ratio is at most 1, and never more than 1.25 times as many (above: NOT met); the
    ratio is shown;
  - at 1%: at most 1.2 times as many;
  - the same two in wall time (the recorded cost of the evaluations up to the target), against
    Kernel Tuner's fastest strategy there (which may not be the one with the fewest evaluations);
  - success within a quarter of the space at 5%: at least 90% of the seeds;
  - the methodology score (scripts/methodology.py: Willemsen, van Nieuwpoort, van Werkhoven,
    FGCS 2024), in evaluations and in time, averaged over the landscapes: the default's beats
    every Kernel Tuner strategy's (over the landscapes where both have one). The default's is
    scored from `flaretune replay --json --trace` against the baseline kt-compare.py writes for
    the landscape (its `methodology`).

The table also gives the default's median rounds to each target with batches of 4.

Exit 0 when every check holds on every landscape, 1 when some does not (each said), 2 on bad
input.
"""
import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import methodology  # noqa: E402
from report_files import write_reports  # noqa: E402

GOAL_5, GOAL_5_MAX, GOAL_1, GOAL_SUCCESS = 1.0, 1.25, 1.2, 0.90


def ft_methodology(rep, kt, dflt):
    """The default's methodology score on this landscape ({"evals", "time"}), from its traces
    against kt-compare's baseline; None without either."""
    base = kt and kt.get("methodology")
    row = next((s for s in rep["strategies"] if s["name"] == dflt and s.get("batch", 1) == 1),
               None)
    if not base or "expected_best" not in base or not row or not row.get("traces"):
        return None
    land = methodology.Landscape.from_json(base)
    return methodology.score_runs(land, [(t["best_s"], t["cost_s"]) for t in row["traces"]])


def ratio_txt(r):
    return "-" if r is None else f"{r:.2f}x"


def load(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError) as e:
        print(f"search-table: {path}: {e}", file=sys.stderr)
        sys.exit(2)


def landscapes(doc):
    return doc["logs"] if "logs" in doc else [doc]


def key(d):
    """A landscape's identity in both tools' JSON: a recorded log's op, preset and sizes; a
    community file (no flaretune op) by its file name without the extensions."""
    if d.get("op") and d.get("source") in (None, "log", "flaretune"):
        return (d["op"], d.get("preset", ""), d.get("dims", ""))
    base = os.path.basename(d.get("log") or "")
    for ext in (".gz", ".json", ".jsonl"):
        base = base[:-len(ext)] if base.endswith(ext) else base
    return ("file", base, "")


def title(rep):
    """How the table names a landscape: op @ preset, or a file's kernel on its device; its
    valid candidates and the recording's noise where known."""
    noise = (rep.get("noise") or {}).get("median_ci_rel")
    tail = f"{rep['valid']}" + (f", ci_rel {100 * noise:.1f}%" if noise is not None else "")
    if key(rep)[0] != "file":
        return f"{rep['op']} @ {rep['preset']} ({tail})"
    return f"{key(rep)[1]}: {rep.get('kernel') or '?'} on {rep.get('device') or '?'} ({tail})"


def fmt(v, digits=1):
    return "-" if v is None else f"{v:.{digits}f}"


def ft_rows(rep):
    """{(name, batch): {target: {...}}} from a replay JSON."""
    out = {}
    for s in rep["strategies"]:
        out[(s["name"], s.get("batch", 1))] = {round(t["target"], 6): t for t in s["targets"]}
    return out


def kt_best(kt, target, exclude=(), by="evals"):
    """Kernel Tuner's strategy with the lowest median evaluations at target (a median over
    seeds that did not reach it is None and ranks last), and its row; brute_force and the
    excluded ones are not candidates."""
    best = None
    for s in kt["strategies"]:
        if s.get("error") or s["name"] == "brute_force" or s["name"] in exclude:
            continue
        t = s["targets"].get(f"{target:g}") or s["targets"].get(str(target))
        if not t or t[by]["median"] is None:
            continue
        if best is None or t[by]["median"] < best[1][by]["median"]:
            best = (s["name"], t)
    return best


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("replay", nargs="+")
    ap.add_argument("--kt", nargs="*", default=[])
    ap.add_argument("--exclude", default="",
                    help="Kernel Tuner strategies shown but not compared against (comma list)")
    ap.add_argument("--traces", nargs="*", default=[],
                    help="`flaretune replay --json --trace` of the default strategy (matched by "
                         "landscape), for the methodology score when REPLAY.json has no traces")
    ap.add_argument("--markdown")
    ap.add_argument("--json")
    a = ap.parse_args()
    exclude = [x for x in a.exclude.split(",") if x]
    try:
        reps = [r for p in a.replay for r in landscapes(load(p))]
    except (KeyError, TypeError) as e:
        print(f"search-table: a replay JSON lacks {e}: not `flaretune replay --json`",
              file=sys.stderr)
        return 2
    # Several Kernel Tuner runs of one landscape (a run of the contenders over more seeds):
    # each strategy from the run with the most seeds.
    kts = {}
    for path in a.kt:
        k = load(path)
        have = kts.setdefault(key(k), k)
        if have is k:
            continue
        by = {s["name"]: s for s in have["strategies"]}
        for s in k["strategies"]:
            if s["name"] not in by or s["seeds"] > by[s["name"]]["seeds"]:
                by[s["name"]] = s
        have["strategies"] = list(by.values())
    traced = {}
    for path in a.traces:
        for r in landscapes(load(path)):
            traced[key(r)] = r
    lines, checks, out = [], [], []
    lines.append("| landscape (valid, noise) | target | flaretune `bayes` (default): evaluations, time, in 25% | "
                 "anneal | evolve | bayes, batch 4: evaluations, rounds | Kernel Tuner's best there | goal |")
    lines.append("|---|---|---|---|---|---|---|---|")
    msum = {}  # {name: {"evals": [...], "time": [...]}} per landscape, "flaretune" the default
    for rep in reps:
        rows = ft_rows(rep)
        dflt = rep.get("default_strategy", "bayes")
        kt = kts.get(key(rep))
        name = title(rep)
        rec = {"landscape": name, "targets": []}
        for target, factor in ((0.05, GOAL_5), (0.01, GOAL_1)):
            d = rows.get((dflt, 1), {}).get(round(target, 6))
            if d is None:
                continue
            an = rows.get(("anneal", 1), {}).get(round(target, 6))
            ev = rows.get(("evolve", 1), {}).get(round(target, 6))
            b4 = rows.get((dflt, 4), {}).get(round(target, 6))
            best = kt_best(kt, target, exclude) if kt else None
            raw = kt_best(kt, target) if kt and exclude else None
            goal, notes = [], {}
            if best:
                kname, kt_t = best
                limit = GOAL_5_MAX if target == 0.05 else factor
                fast = kt_best(kt, target, exclude, by="time")
                re = (d["median"] / kt_t["evals"]["median"]
                      if d["median"] is not None and kt_t["evals"]["median"] else None)
                rt = (d["median_time_s"] / fast[1]["time"]["median"]
                      if d.get("median_time_s") is not None and fast is not None
                      and fast[1]["time"]["median"] else None)
                if d["median"] is not None and kt_t["evals"]["median"] == 0:
                    re = 1.0 if d["median"] == 0 else float("inf")
                goal.append(("evaluations", re is not None and re <= limit))
                goal.append(("time", rt is not None and rt <= limit))
                notes = {"evaluations": re, "time": rt}
                kseed = next(x["seeds"] for x in kt["strategies"] if x["name"] == kname)
                ktxt = (f"{kname}: {fmt(kt_t['evals']['median'])}, "
                        f"{fmt(kt_t['time']['median'], 2)} s, {100 * kt_t['within_quarter']:.0f}% "
                        f"({kseed} seeds)")
            else:
                ktxt = "-"
            fast = kt_best(kt, target, exclude, by="time") if kt else None
            if fast and best and fast[0] != best[0]:
                ktxt += (f"; fastest: {fast[0]}, {fmt(fast[1]['time']['median'], 2)} s at "
                         f"{fmt(fast[1]['evals']['median'])}")
            if raw and best and raw[0] != best[0]:
                ktxt += (f" ({raw[0]}: {fmt(raw[1]['evals']['median'])}, "
                         f"{fmt(raw[1]['time']['median'], 2)} s)")
            if target == 0.05:
                goal.append(("success", d["success_quarter"] >= GOAL_SUCCESS))
            for what, ok in goal:
                checks.append((name, target, what, ok))
            def verdict(w, ok):
                r = notes.get(w)
                if not ok:
                    return f"{w} NOT met" + (f" ({ratio_txt(r)})" if w in notes else "")
                if r is not None and target == 0.05 and r > GOAL_5:
                    return f"{w} within {GOAL_5_MAX}x ({ratio_txt(r)})"
                return f"{w} met" + (f" ({ratio_txt(r)})" if r is not None else "")
            gtxt = ", ".join(verdict(w, ok) for w, ok in goal) or "-"
            rounds = b4 and b4.get("median_rounds")
            lines.append(
                f"| {name if target == 0.05 else ''} | {100 * target:g}% | "
                f"**{fmt(d['median'])}**, {fmt(d.get('median_time_s'), 2)} s, "
                f"{100 * d['success_quarter']:.1f}% | "
                f"{fmt(an and an['median'])} | {fmt(ev and ev['median'])} | "
                f"{fmt(b4 and b4['median'])}, {fmt(rounds)} | {ktxt} | {gtxt} |")
            rec["targets"].append({"target": target, "default": d, "kt_best": best and {
                "name": best[0], "evaluations": best[1]["evals"]["median"],
                "time_s": best[1]["time"]["median"]}, "goal": dict(goal),
                "ratio": notes, "rounds_batch4": rounds})
        fm = ft_methodology(rep, kt, dflt) or (
            ft_methodology(traced[key(rep)], kt, dflt) if key(rep) in traced else None)
        rec["methodology"] = {"flaretune": fm}
        if fm:
            for what in ("evals", "time"):
                msum.setdefault("flaretune", {}).setdefault(what, {})[name] = fm[what]
        for sk in (kt or {}).get("strategies", []):
            m = sk.get("methodology")
            if m and not sk.get("error") and sk["name"] != "brute_force":
                rec["methodology"][sk["name"]] = m
                for what in ("evals", "time"):
                    msum.setdefault(sk["name"], {}).setdefault(what, {})[name] = m[what]
        out.append(rec)
    # The methodology score over the landscapes: the default's mean against each Kernel Tuner
    # strategy's, over the landscapes where both have one.
    mlines, mrows = [], {}
    ft = msum.get("flaretune", {})
    if ft:
        mlines.append("")
        mlines.append("| methodology score (mean over landscapes) | in evaluations | in time | "
                      "flaretune's default there |")
        mlines.append("|---|---|---|---|")
        for sname, by in sorted(msum.items(), key=lambda kv: kv[0] != "flaretune"):
            cells = []
            for what in ("evals", "time"):
                common = [k for k, v in by.get(what, {}).items()
                          if v is not None and ft.get(what, {}).get(k) is not None]
                mine = (sum(by[what][k] for k in common) / len(common)) if common else None
                theirs = (sum(ft[what][k] for k in common) / len(common)) if common else None
                cells.append((mine, theirs))
                if sname != "flaretune" and mine is not None:
                    checks.append(("all landscapes", None, f"methodology ({what}) vs {sname}",
                                   theirs > mine))
            mrows[sname] = cells
            mlines.append(f"| {sname if sname != 'flaretune' else '**flaretune default**'} | "
                          f"{fmt(cells[0][0], 3)} | {fmt(cells[1][0], 3)} | "
                          f"{fmt(cells[0][1], 3)}, {fmt(cells[1][1], 3)} |")
    seeds = {s["seeds"] for r in reps for s in r["strategies"]}
    kseeds = {s["seeds"] for k in kts.values() for s in k["strategies"]}
    lines.append("")
    lines.append(f"flaretune: median over {', '.join(map(str, sorted(seeds)))} seeds; Kernel Tuner "
                 f"{next(iter(kts.values()))['kernel_tuner'] if kts else '-'}: median over "
                 f"{', '.join(map(str, sorted(kseeds))) or '-'} seeds. Evaluations: unique "
                 "configurations measured until the best is within the target of the confirmed "
                 "optimum; time: their recorded cost; in 25%: seeds that got there within a "
                 "quarter of the space."
                 + (f" In parentheses: {', '.join(exclude)}, shown but not compared against "
                    "(it measures its first population in Kernel Tuner's space order, so its "
                    "count is where the optimum lies in that order: scripts/kt-compare.py)."
                    if exclude else ""))
    lines += mlines
    text = "\n".join(lines)
    print(text)
    bad = [c for c in checks if not c[3]]
    for name, target, what, _ in bad:
        at = f" at {100 * target:g}%" if target is not None else ""
        print(f"goal not met: {name}{at}: {what}", file=sys.stderr)
    write_reports(a.markdown, text + "\n", a.json, {
        "landscapes": out, "methodology": mrows, "checks": [
            {"landscape": n, "target": t, "what": w, "met": ok} for n, t, w, ok in checks]})
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
