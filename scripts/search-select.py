#!/usr/bin/env python3
"""search-select.py: choose the default strategy's settings by leave-one-landscape-out.

    scripts/search-select.py LANDSCAPE... [--settings FILE] [--seeds N] [--large-seeds M]
                             [--flaretune BIN] [--jobs J] [--criterion median|methodology]
                             [--orderings N] [--json FILE] [--markdown FILE]

LANDSCAPE: anything `flaretune replay` reads (an exhaustive event log, a Kernel Tuner cache or a
FAIR T4 results file, .gz too). SETTINGS: a JSON list of candidate settings, each a name and
the `--opt` assignments that differ from the strategy's defaults:

    [{"name": "shipped", "opts": []},
     {"name": "local 3", "opts": ["bayes.local=3"]}, ...]

(default: SETTINGS below). Each setting is replayed with bayes on every landscape (`flaretune
replay L --strategy bayes --seeds N --target 5%,1% --json --opt ...`; M seeds on a landscape of
more than 2000 candidates, where one replay costs seconds). --orderings N replays seed s on
ordering (s - 1) % N of the parameters (`flaretune replay --orderings`), as the README's table
does: the order alone moves some searches. A setting's score on a landscape is
the geometric mean, over the two targets, of its median evaluations to the target divided by
what uniform random search needs in expectation there ((V + 1) / (W + 1) for W of the V
candidates within the target): 1 is random search, lower is better, and landscapes of every
size weigh alike.

--criterion methodology scores each setting instead by the methodology score of Willemsen et
al. (FGCS 2024; scripts/methodology.py): the mean, over the seeds, of its best-so-far against
random search's expectation at every evaluation up to the landscape's budget, 0 random search,
1 the optimum at once, higher better, averaged (arithmetic) over landscapes. The median counts
say how soon half the seeds get there; the score also sees the seeds that stay stuck, and what
a search has found before it gets there. The baseline is computed from the landscape as
`flaretune replay --export` writes it, the one kt-compare.py measures Kernel Tuner's against.

Leave-one-landscape-out: for each landscape, the setting with the best geometric-mean score on
the OTHER landscapes is chosen, and its score on the one left out is reported beside the best
any setting reached there (what a choice made with that landscape in view could have had). The
default is the setting with the best score over all landscapes; the folds say whether that
choice depends on any one landscape (when every fold chooses it, none does). Nothing is chosen
per landscape.

Exit 0, 1 when a replay fails, 2 on a bad command line.
"""
import argparse
import concurrent.futures
import importlib.util
import json
import math
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import methodology  # noqa: E402
from report_files import write_reports  # noqa: E402

LARGE = 2000  # candidates: a landscape with more is replayed over --large-seeds

SETTINGS = [
    {"name": "shipped", "opts": []},
    {"name": "step neighbours", "opts": ["bayes.hamming=0"]},
    {"name": "recent 16", "opts": ["bayes.recent=16"]},
    {"name": "recent 48", "opts": ["bayes.recent=48"]},
    {"name": "local 3", "opts": ["bayes.local=3"]},
    {"name": "cost 0.5", "opts": ["bayes.cost_weight=0.5"]},
]


def replay(ft, land, setting, seeds, trace=False, orderings=1):
    cmd = [ft, "replay", land, "--strategy", "bayes", "--seeds", str(seeds), "--target",
           "5%,1%", "--json"] + (["--trace"] if trace else [])
    if orderings > 1:
        cmd += ["--orderings", str(orderings)]
    for o in setting["opts"]:
        cmd += ["--opt", o]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)}: exit {p.returncode}: {p.stderr.strip()}")
    return json.loads(p.stdout)


def random_expected(valid, within):
    return (valid + 1) / (within + 1)


def score(doc, valid):
    """Geometric mean over the targets of median evaluations / random search's expectation;
    a median seed that never got there counts as the whole space."""
    s = doc["strategies"][0]
    within = {round(t["target"], 6): t["within_target"] for t in doc["targets"]}
    logs = []
    for t in s["targets"]:
        med = t["median"] if t["median"] is not None and t["median"] >= 0 else valid
        logs.append(math.log(med / random_expected(valid, within[round(t["target"], 6)])))
    return math.exp(sum(logs) / len(logs))


def kt_compare():
    """scripts/kt-compare.py as a module (its name is not an identifier)."""
    spec = importlib.util.spec_from_file_location(
        "kt_compare", os.path.join(os.path.dirname(os.path.abspath(__file__)), "kt-compare.py"))
    kt = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(kt)
    return kt


def baseline(kt, ft, path):
    """The methodology baseline of the landscape at path: its candidates as `flaretune replay
    --export` scores them (confirmed optimum and all), read as kt-compare.py (the module kt)
    reads an export, the baseline its Kernel Tuner scores are measured against."""
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "landscape.json")
        cmd = [ft, "replay", path, "--strategy", "random", "--seeds", "1", "--export", out]
        p = subprocess.run(cmd, capture_output=True, text=True)
        if p.returncode != 0:
            raise RuntimeError(f"{' '.join(cmd)}: exit {p.returncode}: {p.stderr.strip()}")
        land = kt.read_landscape(out)
    return methodology.Landscape([c["score_s"] for c in land["candidates"]],
                                 [c["cost_s"] for c in land["candidates"]])


def method_score(doc, base):
    """The mean methodology score in evaluations of the replay's traces; higher is better."""
    traces = doc["strategies"][0]["traces"]
    return methodology.score_runs(base, [(t["best_s"], t["cost_s"]) for t in traces])["evals"]


def gmean(xs):
    return math.exp(sum(math.log(x) for x in xs) / len(xs))


def choose(names, settings, table, combine, pick):
    """Leave-one-landscape-out over table[(landscape, setting)]: the report and its lines."""
    overall = [combine([table[(li, si)] for li in range(len(names))])
               for si in range(len(settings))]
    default = pick(range(len(settings)), key=lambda si: overall[si])
    folds = []
    for out in range(len(names)):
        rest = [li for li in range(len(names)) if li != out]
        chosen = pick(range(len(settings)),
                      key=lambda si: combine([table[(li, si)] for li in rest]))
        best = pick(range(len(settings)), key=lambda si: table[(out, si)])
        folds.append({"left_out": names[out], "chosen": settings[chosen]["name"],
                      "score": table[(out, chosen)], "best": settings[best]["name"],
                      "best_score": table[(out, best)]})
    doc = {"settings": settings, "landscapes": names,
           "scores": [[table[(li, si)] for si in range(len(settings))] for li in range(len(names))],
           "overall": overall, "default": settings[default]["name"], "folds": folds}
    lines = ["| setting | " + " | ".join(names) + " | all |",
             "|---" * (len(names) + 2) + "|"]
    for si, s in enumerate(settings):
        lines.append(f"| {s['name']} | " +
                     " | ".join(f"{table[(li, si)]:.3f}" for li in range(len(names))) +
                     f" | {overall[si]:.3f} |")
    lines += ["", "| left out | chosen on the others | its score there | best there |",
              "|---|---|---|---|"]
    for f in folds:
        lines.append(f"| {f['left_out']} | {f['chosen']} | {f['score']:.3f} | "
                     f"{f['best']}: {f['best_score']:.3f} |")
    lines += ["", f"default (best over all): {settings[default]['name']}; chosen by "
              f"{sum(f['chosen'] == settings[default]['name'] for f in folds)} of "
              f"{len(folds)} folds"]
    return doc, lines


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("landscapes", nargs="+")
    ap.add_argument("--settings")
    ap.add_argument("--seeds", type=int, default=100)
    ap.add_argument("--large-seeds", type=int, default=30)
    ap.add_argument("--flaretune", default=os.environ.get("FT", "build/flaretune"))
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--criterion", choices=("median", "methodology"), default="median")
    ap.add_argument("--orderings", type=int, default=1)
    ap.add_argument("--json")
    ap.add_argument("--markdown")
    a = ap.parse_args()
    method = a.criterion == "methodology"
    settings = SETTINGS
    if a.settings:
        with open(a.settings) as f:
            settings = json.load(f)
    if len(a.landscapes) < 2 or len(settings) < 1:
        print("search-select: needs two landscapes or more and a setting", file=sys.stderr)
        return 2
    jobs = {}
    with concurrent.futures.ThreadPoolExecutor(a.jobs) as ex:
        for li, land in enumerate(a.landscapes):
            try:
                valid = replay(a.flaretune, land, {"opts": []}, 1)["valid"]
            except RuntimeError as e:
                print(f"search-select: {e}", file=sys.stderr)
                return 1
            seeds = a.large_seeds if valid > LARGE else a.seeds
            for si, s in enumerate(settings):
                jobs[(li, si)] = ex.submit(replay, a.flaretune, land, s, seeds, method,
                                           a.orderings)
        res = {}
        for k, f in jobs.items():
            try:
                res[k] = f.result()
            except RuntimeError as e:
                print(f"search-select: {e}", file=sys.stderr)
                return 1
    names = [os.path.basename(x) for x in a.landscapes]
    med = {k: score(doc, doc["valid"]) for k, doc in res.items()}
    doc, lines = choose(names, settings, med, gmean, min)
    if method:  # chosen by the score; the median counts shown below for the same replays
        kt = kt_compare()
        bases = [baseline(kt, a.flaretune, land) for land in a.landscapes]
        meth = {(li, si): method_score(d, bases[li]) for (li, si), d in res.items()}
        med_doc = doc
        doc, mlines = choose(names, settings, meth, lambda xs: sum(xs) / len(xs), max)
        doc["median_counts"] = med_doc
        lines = (["methodology score (higher is better):", ""] + mlines +
                 ["", "median evaluations / random search's (lower is better):", ""] + lines)
    doc["criterion"] = a.criterion
    print("\n".join(lines))
    write_reports(a.markdown, "\n".join(lines) + "\n", a.json, doc)
    return 0


if __name__ == "__main__":
    sys.exit(main())
