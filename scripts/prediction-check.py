#!/usr/bin/env python3
"""prediction-check.py: flaretune's GPU-free prediction against real GPU measurements.

    scripts/prediction-check.py --pair PREDICTED.jsonl:DEVICE:LANDSCAPE.json[.gz][:KERNEL.cu] ...
                                [--markdown FILE] [--json FILE]

PREDICTED.jsonl: lines of `flaretune inspect --t1 FILE --device DEVICE --sample K|--all-configs
--jsonl PREDICTED.jsonl` (one configuration each: its `config`, `predicted_s`, or an `error`, and
`unfit` when it cannot run on that GPU: it fits no SM, or ptxas refuses it, which an
`nvrtc_error` naming ptxas in a line written before inspect said so counts as too). LANDSCAPE: the same kernel's configurations measured on
that GPU, a Kernel Tuner cache file (the FAIR benchmark hub's: its `time` in ms, an error string
for a configuration that failed). Configurations are matched by their parameters' names and
values. For each pair it reports, over the configurations both have (predicted and measured):

  n                   how many (the predicted ones may be a sample of the space: it says so)
  spearman            Spearman's rank correlation of predicted and measured time
  best_rank           the measured rank of the configuration predicted fastest, among the
                      measured configurations of the whole landscape (1 = the optimum), and that
                      as a percentile (lower is better; 1% = within the measured top 1%)
  recall_1 / recall_5 of the n's measured top 1% and 5% (at least one configuration each), the
                      share that is in the predicted top 5%
  mape                the median absolute percentage error |predicted - measured| / measured
  ordered_to_5        measuring the n configurations in predicted order (fastest predicted
                      first), the evaluations until one is within 5% of the best of the n;
                      random_to_5: the expected evaluations of a uniformly random order (the
                      mean of the first success of a draw without replacement), and their ratio
  unfit_measured      configurations predicted unable to run that did run, and their best;
                      uncompiled and uncompiled_measured: those the compiler refused (a
                      measured one ran from another source than the one predicted)
  prior_to_5          with --flaretune BIN: the default strategy's median evaluations to 5% of
                      the landscape's optimum (`flaretune replay LANDSCAPE --strategy bayes`,
                      --seeds seeds) warm-started from the predictions (`--warm`: the predicted
                      configurations written as a Kernel Tuner cache of the landscape's
                      parameters, their predicted time its `time`; the three predicted fastest
                      measured first, every prediction a prior), and plain_to_5 without them

With KERNEL.cu (the kernel's source; the files it includes with #include "..." are read too):

  unnamed             the landscape's parameters (of more than one value) that the source never
                      names: configurations differing only in them are one program, so any
                      prediction made from this source gives them one time (a name anywhere in
                      the text counts, in a comment too, so the ceiling errs high)
  ceiling             the Spearman correlation over the whole measured landscape of the
                      prediction that gives each group of configurations differing only in
                      unnamed parameters its members' mean measured rank (of the scores alike
                      within each group, the one closest to the measured ranks): about the most
                      any model of this source can reach when the measurements differ within a
                      group; 1.0 when every parameter is named
  twin_ratio          the median, over those groups of two or more, of their slowest measured
                      time over their fastest

A configuration the prediction says cannot run (unfit) is left out of the correlations and
counted apart. Exit 0 when every pair was read, 1 on unreadable input, 2 on a bad command line.

    scripts/prediction-check.py --plan --flaretune BIN --kernels DIR LANDSCAPE...

says what can be checked, for prediction-check.sh: a tab-separated line for each Kernel Tuner
cache among the LANDSCAPEs whose device flaretune has a spec for (the cache's `device_name`
matched to a model `flaretune compile --list-devices` lists) and whose kernel a T1 file in DIR
describes (its KernelName the cache's `kernel_name`, its ProblemSize the cache's
`problem_size`): a short name for the kernel, the device's flaretune name, the T1 file, the
kernel's source (KernelFile, relative to the T1 file or by its name beside it; a HIP file's
CUDA twin, `x.cu` for `x.cu.hip`, where only that exists) and the landscape. Every other file gets a line on stderr saying why it
is left out. Exit 1 when none can be checked.
Python standard library only.
"""
import argparse
import gzip
import json
import math
import os
import re
import statistics
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from report_files import write_reports  # noqa: E402


def load_landscape(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt") as f:
        doc = json.load(f)
    keys = doc.get("tune_params_keys") or list(doc["tune_params"].keys())
    measured = {}
    failed = 0
    for k, v in doc["cache"].items():
        t = v.get("time")
        vals = k.split(",")
        if len(vals) != len(keys):
            continue
        cfg = tuple(sorted(zip(keys, vals)))
        if isinstance(t, (int, float)) and t > 0 and math.isfinite(t):
            measured[cfg] = float(t) * 1e-3
        else:
            failed += 1
    return doc.get("device_name", "?"), measured, failed


def cfg_of(text):
    return tuple(sorted(tuple(p.split("=", 1)) for p in text.split(",")))


def load_predicted(path, device):
    pred, unfit, uncompiled, errors = {}, {}, set(), 0
    with open(path) as f:
        for line in f:
            if not line.endswith("\n"):
                break
            o = json.loads(line)
            if o.get("device") != device:
                continue
            cfg = cfg_of(o["config"])
            if o.get("error"):
                errors += 1
            elif o.get("unfit") or "ptxas" in o.get("nvrtc_error", ""):
                unfit[cfg] = o["predicted_s"]
                if "ptxas" in o.get("nvrtc_error", ""):
                    uncompiled.add(cfg)
            else:
                pred[cfg] = o["predicted_s"]
    return pred, unfit, uncompiled, errors


def _gpu_summary():
    """scripts/gpu-summary.py, whose Spearman (Pearson's of the ranks, ties sharing their mean
    rank) gpu-check reports too: one implementation for both."""
    import importlib.util
    spec = importlib.util.spec_from_file_location(
        "gpu_summary", os.path.join(os.path.dirname(os.path.abspath(__file__)), "gpu-summary.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


spearman = _gpu_summary().spearman


def expected_first_hit(n, good):
    """Expected position of the first success drawing without replacement: (n + 1) / (good + 1)."""
    return (n + 1) / (good + 1)


def source_text(path, seen=None):
    """The kernel's source and, recursively, the files it includes with #include "name"."""
    seen = set() if seen is None else seen
    path = os.path.abspath(path)
    if path in seen:
        return ""
    seen.add(path)
    with open(path, errors="replace") as f:
        text = f.read()
    for name in re.findall(r'^\s*#\s*include\s*"([^"]+)"', text, re.M):
        inc = os.path.join(os.path.dirname(path), name)
        if os.path.exists(inc):
            text += "\n" + source_text(inc, seen)
    return text


def ceiling(measured, kernel_path):
    """Parameters the source never names, and the best Spearman a prediction blind to them can
    reach (each group of configurations alike but for them at its members' mean measured
    rank), with the median slowest-over-fastest ratio within those groups."""
    words = set(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", source_text(kernel_path)))
    values = {}
    for cfg in measured:
        for k, v in cfg:
            values.setdefault(k, set()).add(v)
    unnamed = sorted(k for k, vs in values.items() if len(vs) > 1 and k not in words)
    cfgs = list(measured)
    times = [measured[c] for c in cfgs]
    order = sorted(range(len(cfgs)), key=lambda i: times[i])
    rank = [0.0] * len(cfgs)
    for r, i in enumerate(order):
        rank[i] = r + 1.0
    groups = {}
    for i, c in enumerate(cfgs):
        groups.setdefault(tuple(kv for kv in c if kv[0] not in unnamed), []).append(i)
    best = [0.0] * len(cfgs)
    ratios = []
    for members in groups.values():
        mean = sum(rank[i] for i in members) / len(members)
        for i in members:
            best[i] = mean
        if len(members) > 1:
            ratios.append(max(times[i] for i in members) / min(times[i] for i in members))
    return {"unnamed": unnamed, "ceiling": spearman(best, times) if len(cfgs) > 2 else None,
            "twin_ratio": statistics.median(ratios) if ratios else None}


def check(pred_path, device, land_path, kernel_path=None):
    gpu, measured, failed = load_landscape(land_path)
    pred, unfit, uncompiled, errors = load_predicted(pred_path, device)
    both = [c for c in pred if c in measured]
    row = {"predicted": pred_path, "device": device, "landscape": land_path, "gpu": gpu,
           "measured": len(measured), "measured_failed": failed, "predicted_n": len(pred),
           "predict_errors": errors, "unfit": len(unfit), "n": len(both)}
    if kernel_path:
        row.update(ceiling(measured, kernel_path))
    unfit_ran = [measured[c] for c in unfit if c in measured]
    row["unfit_measured"] = len(unfit_ran)
    row["uncompiled"] = len(uncompiled)
    row["uncompiled_measured"] = sum(1 for c in uncompiled if c in measured)
    if unfit_ran:
        row["unfit_measured_best_s"] = min(unfit_ran)
    if len(both) < 3:
        return row
    p = [pred[c] for c in both]
    m = [measured[c] for c in both]
    row["spearman"] = spearman(p, m)
    best_pred = min(both, key=lambda c: pred[c])
    all_m = sorted(measured.values())
    rank = 1 + sum(1 for v in all_m if v < measured[best_pred])
    row["best_rank"] = rank
    row["best_percentile"] = 100.0 * rank / len(all_m)
    n = len(both)
    top5_pred = set(sorted(both, key=lambda c: pred[c])[:max(1, math.ceil(0.05 * n))])
    by_m = sorted(both, key=lambda c: measured[c])
    for frac, name in ((0.01, "recall_1"), (0.05, "recall_5")):
        top = by_m[:max(1, math.ceil(frac * n))]
        row[name] = sum(1 for c in top if c in top5_pred) / len(top)
    row["mape"] = statistics.median(abs(a - b) / b for a, b in zip(p, m))
    row["median_ratio"] = statistics.median(a / b for a, b in zip(p, m))
    best = min(m)
    good = [c for c in both if measured[c] <= best * 1.05]
    order = sorted(both, key=lambda c: pred[c])
    row["ordered_to_5"] = 1 + next(i for i, c in enumerate(order) if measured[c] <= best * 1.05)
    row["random_to_5"] = expected_first_hit(n, len(good))
    row["within_5_of_n"] = len(good)
    return row


def predicted_cache(pred_path, device, land_path, out_path):
    """The predictions as a Kernel Tuner cache with the landscape's parameters (a warm start
    needs the same parameters and values, in the same order)."""
    opener = gzip.open if land_path.endswith(".gz") else open
    with opener(land_path, "rt") as f:
        doc = json.load(f)
    keys = doc.get("tune_params_keys") or list(doc["tune_params"].keys())
    pred, unfit, _, _ = load_predicted(pred_path, device)
    cache = {}
    for cfg, t in list(pred.items()) + [(c, None) for c in unfit]:
        d = dict(cfg)
        if any(k not in d for k in keys):
            continue
        entry = {k: doc["tune_params"][k][[str(v) for v in doc["tune_params"][k]].index(d[k])]
                 for k in keys}
        entry["time"] = t * 1e3 if t is not None else "RuntimeFailedConfig"
        cache[",".join(d[k] for k in keys)] = entry
    with open(out_path, "w") as f:
        json.dump({"device_name": f"{device} (predicted)", "kernel_name": doc.get("kernel_name", "?"),
                   "problem_size": doc.get("problem_size", []), "tune_params_keys": keys,
                   "tune_params": doc["tune_params"], "objective": "time", "cache": cache}, f)


def replay_to_5(ft, land, seeds, warm=None):
    args = [ft, "replay", land, "--strategy", "bayes", "--seeds", str(seeds), "--target", "5%",
            "--json"] + (["--warm", warm] if warm else [])
    p = subprocess.run(args, capture_output=True, text=True)
    if p.returncode != 0:
        raise ValueError(f"replay: {p.stderr.strip()}")
    doc = json.loads(p.stdout)
    if warm:  # the warm-started runs are reported apart, beside the cold ones
        row = next(s for s in doc["warm"]["strategies"] if s["name"] == "bayes" and s.get("batch", 1) == 1)
        return row["targets"][0]["warm_median"]
    row = next(s for s in doc["strategies"] if s["name"] == "bayes" and s.get("batch", 1) == 1)
    return row["targets"][0]["median"]


def fmt(v, spec):
    return "-" if v is None else format(v, spec)


def ceiling_cell(r):
    if r.get("ceiling") is None:
        return "-"
    if not r["unnamed"]:
        return f"{r['ceiling']:.2f} (every parameter named)"
    return (f"{r['ceiling']:.2f} ({', '.join(r['unnamed'])}; twins {fmt(r.get('twin_ratio'), '.2f')}x"
            " apart, median)")


def unfit_cell(r):
    """What the configurations predicted unable to run are, where there are any."""
    if not r["unfit"]:
        return ""
    said = f" ({r['unfit']} predicted unable to run, {r['unfit_measured']} of them measured"
    if r.get("uncompiled"):
        said += (f"; {r['uncompiled']} refused by the compiler, "
                 f"{r['uncompiled_measured']} of those measured")
    return said + ")"


def markdown(rows):
    out = ["| landscape | GPU | configurations (predicted of measured) | Spearman | predicted best: measured rank (percentile) | top 1% / 5% in predicted top 5% | median error | predicted / measured (median) | in predicted order to 5% (random) | default to 5% of the optimum, with the prediction as prior / without | Spearman ceiling of the source (parameters it never names; their twins' spread) |",
           "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        name = r["landscape"].rsplit("/", 1)[-1].replace(".json.gz", "").replace(".json", "")
        out.append(
            f"| {name} | {r['gpu']} | {r['n']} of {r['measured']}"
            f"{unfit_cell(r)} | "
            f"{fmt(r.get('spearman'), '.2f')} | {r.get('best_rank', '-')} ({fmt(r.get('best_percentile'), '.1f')}%) | "
            f"{fmt(r.get('recall_1'), '.0%')} / {fmt(r.get('recall_5'), '.0%')} | {fmt(r.get('mape'), '.0%')} | "
            f"{fmt(r.get('median_ratio'), '.2f')} | {r.get('ordered_to_5', '-')} ({fmt(r.get('random_to_5'), '.1f')}) | "
            f"{fmt(r.get('prior_to_5'), '.1f')} / {fmt(r.get('plain_to_5'), '.1f')} | "
            f"{ceiling_cell(r)} |")
    return "\n".join(out) + "\n"


def device_models(ft):
    """flaretune's GPU specs: model (lower case) -> name, from `compile --list-devices`."""
    out = subprocess.run([ft, "compile", "--list-devices"], capture_output=True, text=True,
                         check=True).stdout
    models = {}
    for line in out.splitlines()[1:]:
        m = re.match(r"(\S+)\s+(.*?)\s+sm_\w+\s", line)
        if m:
            models[m.group(2).lower()] = m.group(1)
    return models


def t1_files(kernels):
    """KernelName -> (T1 path, its KernelSpecification) for the T1 files in a folder."""
    found = {}
    for name in sorted(os.listdir(kernels)):
        path = os.path.join(kernels, name)
        if not name.endswith(".json") or not os.path.isfile(path):
            continue
        try:
            with open(path) as f:
                spec = json.load(f).get("KernelSpecification")
        except (OSError, ValueError):
            continue
        if isinstance(spec, dict) and isinstance(spec.get("KernelName"), str):
            found.setdefault(spec["KernelName"], (path, spec))
    return found


def plan_one(path, models, t1s):
    """(kernel, device, T1, source) for a landscape that can be checked, or the reason why not."""
    opener = gzip.open if path.endswith(".gz") else open
    try:
        with opener(path, "rt") as f:
            doc = json.load(f)
    except (OSError, ValueError, EOFError) as e:
        return f"unreadable ({e})"
    if not isinstance(doc, dict) or not isinstance(doc.get("cache"), dict):
        return "not a Kernel Tuner cache (no \"cache\" object)"
    dev = doc.get("device_name") or ""
    if not dev:
        return "the cache names no device (device_name)"
    if dev.lower() not in models:
        return (f"no spec for device '{dev}' (flaretune predicts for "
                f"{', '.join(sorted(models.values()))})")
    kname = doc.get("kernel_name") or ""
    if kname not in t1s:
        return f"no T1 file describes kernel '{kname}'"
    t1, spec = t1s[kname]
    want = spec.get("ProblemSize")
    have = doc.get("problem_size")
    if isinstance(want, list) and isinstance(have, list) and [str(v) for v in want] != [str(v) for v in have]:
        return f"measured at problem size {have}, its T1 file {os.path.basename(t1)} describes {want}"
    named = str(spec.get("KernelFile", ""))
    here = os.path.dirname(t1)
    tries = [os.path.join(here, named), os.path.join(here, os.path.basename(named))]
    tries += [t[:-len(".hip")] for t in tries if t.endswith(".hip")]
    src = next((t for t in tries if os.path.isfile(t)), None)
    if not src:
        return f"its T1 file's KernelFile {named} is not beside it"
    short = kname[:-len("_kernel")] if kname.endswith("_kernel") else kname
    return short, models[dev.lower()], t1, src


def plan(ft, kernels, landscapes):
    models, t1s = device_models(ft), t1_files(kernels)
    n = 0
    for path in landscapes:
        p = plan_one(path, models, t1s)
        if isinstance(p, str):
            print(f"prediction-check: {path}: left out: {p}", file=sys.stderr)
            continue
        print("\t".join((*p, path)))
        n += 1
    if not n:
        print("prediction-check: no landscape to check", file=sys.stderr)
    return 0 if n else 1


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--pair", action="append",
                    help="PREDICTED.jsonl:DEVICE:LANDSCAPE[:KERNEL.cu] (repeat)")
    ap.add_argument("--markdown")
    ap.add_argument("--json")
    ap.add_argument("--flaretune", help="replay the default strategy with and without the prediction")
    ap.add_argument("--seeds", type=int, default=20)
    ap.add_argument("--plan", action="store_true", help="say what LANDSCAPEs can be checked")
    ap.add_argument("--kernels", help="with --plan: the folder of T1 files")
    ap.add_argument("landscapes", nargs="*", help="with --plan: Kernel Tuner caches")
    a = ap.parse_args()
    if a.plan:
        if not a.flaretune or not a.kernels or not a.landscapes or a.pair:
            ap.error("--plan needs --flaretune BIN, --kernels DIR and LANDSCAPE..., and no --pair")
        try:
            return plan(a.flaretune, a.kernels, a.landscapes)
        except (OSError, subprocess.CalledProcessError) as e:
            print(f"prediction-check: {e}", file=sys.stderr)
            return 1
    if not a.pair or a.landscapes:
        ap.error("give --pair PREDICTED.jsonl:DEVICE:LANDSCAPE[:KERNEL.cu] (or --plan)")
    rows = []
    for spec in a.pair:
        parts = spec.split(":")
        if len(parts) not in (3, 4):
            ap.error(f"--pair {spec}: PREDICTED.jsonl:DEVICE:LANDSCAPE[:KERNEL.cu]")
        try:
            row = check(*parts)
            if a.flaretune:
                with tempfile.TemporaryDirectory() as tmp:
                    warm = os.path.join(tmp, "predicted.json")
                    predicted_cache(*parts[:3], warm)
                    row["prior_to_5"] = replay_to_5(a.flaretune, parts[2], a.seeds, warm)
                    row["plain_to_5"] = replay_to_5(a.flaretune, parts[2], a.seeds)
                    row["replay_seeds"] = a.seeds
            rows.append(row)
        except (OSError, ValueError, KeyError, StopIteration) as e:
            print(f"prediction-check: {spec}: {e}", file=sys.stderr)
            return 1
    table = markdown(rows)
    sys.stdout.write(table)
    write_reports(a.markdown, table, a.json, rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
