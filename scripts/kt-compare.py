#!/usr/bin/env python3
"""kt-compare.py: Kernel Tuner's search strategies on a landscape flaretune recorded.

    scripts/kt-compare.py LANDSCAPE [--seeds N] [--targets 0.05,0.01] [--strategies a,b,...]
                          [--jobs J] [--orderings N] [--json FILE]

LANDSCAPE (gzip-compressed or not; the format is told by the content) is a Kernel Tuner cache
file, a FAIR T4 results file, the export of `flaretune replay LOG --export FILE` (format
flaretune-landscape/1), or the event log of an exhaustive run itself. From a Kernel Tuner cache
every entry is a candidate, scored by its `time` (ms) when that is a number and failed
otherwise (an error string), costing compile_time + verification_time (where present) +
benchmark_time where recorded, else the sum of `times`, else `time`; from a T4 file every
result, scored by its measurement named time when its invalidity is "correct", costing
times.compilation + times.validation + the sum of times.runtimes. Framework and strategy time
are left out of both (flaretune's readers count the same). Their candidates are put in space
order (the parameters' values in the file's order, the last parameter varying fastest; a T4
file's values sorted). Or LANDSCAPE is the event log of an exhaustive run itself (`flaretune tune OP --strategy exhaustive --log
LOG`), read here the way `flaretune replay` reads it: the last run and the earlier runs it
resumed; each measured candidate scores its stats.median_s, or the median its run's last
`confirm` event measured again side by side, each rejected one fails, as does one not
measured cleanly or stopped by the watchdog (flaretune replay reads them so); a candidate costs the
wall time from its `started` to its event's `t`. From a log the parameters' values are the ones
its candidates use, in the order they first appear in candidate order.

The landscape becomes a Kernel Tuner cache file (in a temporary folder): `time` is the score in
ms, `benchmark_time` the candidate's cost in ms (what the simulation runner adds up as simulated
time), a rejected candidate is a "RuntimeFailedConfig" (Kernel Tuner's mark for a configuration
that compiled but failed at run time; Kernel Tuner itself stops on a failed verification rather
than caching it). The restriction given to Kernel Tuner admits exactly the candidates, rejected
ones included, so it never proposes a point outside them. Each strategy then runs in Kernel
Tuner's simulation mode (`tune_kernel(..., simulation_mode=True, cache=...)`), by default every
strategy of Kernel Tuner 1.5 but the two whose packages it does not install (LEFT_OUT), with
max_fevals as high as each takes it (strategy_options) and its other options at their defaults:
some stop on their own limits first (genetic_algorithm, pso, firefly_algorithm, basinhopping,
minimize: generations, iterations, a local search's end); diff_evo fails where its population,
16 per parameter, outnumbers the candidates, and evaluates that population (a Latin hypercube
sample Kernel Tuner dedupes through a set) in the search space's internal order, so where it is
most of the space its counts say more about that order than about its search.

--orderings N: seed s runs on ordering (s - 1) % N of the parameters (scripts/ordering.py, the
permutations `flaretune replay --orderings` draws: 0 the file's order, j > 0 a splitmix64-driven
Fisher-Yates shuffle seeded with j), one cache per ordering, since the order of the parameters
alone changes what some strategies do (diff_evo's first population follows the space's internal
order: on one landscape it moved from 25 to 73 evaluations). The summaries are over all seeds.

Each strategy also gets the methodology score of scripts/methodology.py (Willemsen et al.,
FGCS 2024), in evaluations and in time, from each run's best-so-far, averaged over the seeds;
the report carries the landscape's random-search baseline (`methodology`) so that
scripts/search-table.py scores flaretune's traces against the same one.

Run time of one strategy, one seed, on the GPU landscapes of ../shared/landscapes/gpu (this
2-core machine, busy): see docs/search.md.

Each strategy runs once per seed s = 1..N, after `random.seed(s)` and `np.random.seed(s)`:
Kernel Tuner 1.5's strategies draw from those two global streams (its searchspace's samples and
neighbours, the strategies' own draws, scipy's basinhopping and dual_annealing, scikit-learn's
Gaussian process in bayes_opt; no strategy takes a seed option), with three exceptions handled
here: nsga2 and nsga3 (pymoo) take tune_kernel's `seed`, which is passed too; scipy's
LatinHypercube (the initial samples of diff_evo and bayes_opt) seeds itself from the OS, so it is
given a seed drawn from np.random; and some strategies walk sets of configurations whose order
follows string hashes, so the script runs with PYTHONHASHSEED=0. The same seed then makes the
same run, except for bayes_opt: its default method ("multi-ultrafast") decides when to refit its
model from wall-clock timings, so its runs vary a little between invocations. Strategies whose
first evaluation is a uniform draw share it for a seed (seeds 8 and 11 both start at index 164
of a 216-point space, for example).

From the results Kernel Tuner returns, in order and with repeats dropped, for each target T
(the best found <= optimum * (1 + T)): the unique configurations evaluated until then, the sum of
their costs (the wall time of those evaluations, the one that reached it included), and whether
it was within a quarter of the candidates, ceil(valid / 4). Summaries follow `flaretune replay`:
the median over all seeds with a seed that never reached the target counted last (null when the
median seed did not reach it), min and max over the seeds that did.

Run time, 20 seeds of every strategy, one job, on this repository's 2-core CI machine while it
was also building (2026-12-02): 766 s on attention.decode's 216 candidates (489 s of them
hybrid_vndx, 93 s basinhopping), 153 s on fusion.dflare's 160, 135 s on attention.train's 96.

Needs Python 3 with kernel_tuner (1.5.0 was used) and numpy; scripts/search-quality.sh makes such
a virtual environment. Progress goes to stderr. Exit 0 on success, 1 when the input is malformed
or a run fails, 2 on a bad command line.
"""
import argparse
import contextlib
import gzip
import io
import json
import math
import os
import random
import statistics
import sys
import tempfile
import time
import warnings

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import methodology  # noqa: E402
from ordering import ordering  # noqa: E402

FORMAT = "flaretune-landscape/1"
STRATEGIES = ("random_sample", "simulated_annealing", "genetic_algorithm", "pso",
              "firefly_algorithm", "diff_evo", "basinhopping", "greedy_ils", "mls",
              "dual_annealing", "bayes_opt", "greedy_mls", "ordered_greedy_mls", "minimize",
              "hybrid_vndx", "adaptive_tabu_greywolf", "nsga2", "nsga3", "brute_force")
# Kernel Tuner strategies that cannot run here, and why.
LEFT_OUT = {
    "skopt": "needs scikit-optimize, which Kernel Tuner does not install",
    "pyatf_strategies": "needs pyATF, which Kernel Tuner does not install",
}


def strategy_options(strategy, n):
    """max_fevals for a landscape of n candidates: as high as each strategy takes it.

    Kernel Tuner's budget stops every run after n unique evaluations whatever is asked; most
    strategies read max_fevals as that budget, capped at n. dual_annealing passes it on as
    scipy's maxfun, which counts repeated proposals too: it gets 100 n, so that only the budget
    stops it. nsga2 and nsga3 take max_fevals as "never stop but on the budget" and then propose
    repeats forever once the unvisited rest is out of their reach: without it they stop where
    pymoo's own termination says. brute_force takes no option (its order is fixed).
    """
    if strategy in ("brute_force", "nsga2", "nsga3"):
        return {}
    if strategy == "dual_annealing":
        return {"max_fevals": 100 * n}
    return {"max_fevals": n}


COST_KEYS = ("time", "times", "compile_time", "verification_time", "benchmark_time",
             "strategy_time", "framework_time", "timestamp", "__error__")


class InputError(Exception):
    """The landscape is missing or malformed."""


# ---- the landscape ---------------------------------------------------------------------------

def read_events(path):
    """The events of a JSONL log; a torn last line is ignored, as flaretune does."""
    with open(path, encoding="utf-8") as f:
        return read_events_text(f.read(), path)


def read_events_text(text, path):
    events = []
    lines = text.split("\n")
    for i, line in enumerate(lines):
        if not line.strip():
            continue
        try:
            events.append(json.loads(line))
        except json.JSONDecodeError as e:
            if i >= len(lines) - 2:
                break
            raise InputError(f"{path}:{i + 1}: not JSON: {e}") from None
    return events


def read_confirm(ev, candidates, path):
    """The run's confirmation measured its best few again side by side: those score that."""
    cfgs, stats = ev.get("configs"), ev.get("stats")
    if not isinstance(cfgs, list) or not isinstance(stats, list) or len(cfgs) != len(stats):
        raise InputError(f"{path}: a confirm event without configs and stats of one length")
    for cfg, st in zip(cfgs, stats):
        med = (st or {}).get("median_s")
        for c in candidates:
            if c["score_s"] is None or any(c["config"].get(k) != v for k, v in cfg.items()):
                continue
            if not isinstance(med, (int, float)) or not med > 0:
                raise InputError(f"{path}: a confirm event's median_s {med!r} is not > 0")
            c["score_s"], c["confirmed"] = float(med), True


def landscape_from_events(events, path):
    """The landscape of the last run of an exhaustive log (and the earlier runs it resumed)."""
    starts = [i for i, ev in enumerate(events) if ev.get("event") == "run_start"]
    if not starts:
        raise InputError(f"{path}: no run_start event: not a tuning log")
    start = events[starts[-1]]
    runs = {start.get("run")}
    for i in reversed(starts[:-1]):
        if start.get("key") is None or events[i].get("key") != start.get("key"):
            break
        runs.add(events[i].get("run"))
    first = min(i for i in starts if events[i].get("run") in runs)
    names = list((start.get("default") or {}).keys())
    cands, confirm = {}, None
    for ev in events[first:]:
        kind = ev.get("event")
        if ev.get("run") not in runs:
            continue
        if kind == "confirm":
            confirm = ev
        if kind not in ("measured", "rejected"):
            continue
        cfg, idx = ev.get("config"), ev.get("candidate")
        if not isinstance(cfg, dict) or not isinstance(idx, int):
            raise InputError(f"{path}: a {kind} event without config or candidate")
        cost = float(ev["t"]) - float(ev.get("started", ev["t"]))
        # Rejected, stopped by the watchdog, or not measured cleanly (a busy machine's upper
        # bound, never ranked): failed, as flaretune replay reads it.
        if kind == "rejected" or ev.get("clean") is False or isinstance(ev.get("stopped"), dict):
            cands[idx] = {"config": cfg, "score_s": None, "cost_s": cost, "ci_rel": None}
            continue
        stats = ev.get("stats") or {}
        med = stats.get("median_s")
        if not isinstance(med, (int, float)) or not med > 0:
            raise InputError(f"{path}: candidate {idx}: measured without a positive median_s")
        cands[idx] = {"config": cfg, "score_s": float(med), "cost_s": cost,
                      "ci_rel": stats.get("ci_rel")}
    if not cands:
        raise InputError(f"{path}: no measured or rejected candidate")
    order = sorted(cands)
    if order != list(range(len(order))) or len(order) != start.get("space_valid", len(order)):
        raise InputError(f"{path}: {len(order)} of {start.get('space_valid')} candidates "
                         "measured or rejected: a comparison needs an exhaustive landscape")
    candidates = [cands[i] for i in order]
    if confirm:
        read_confirm(confirm, candidates, path)
    for c in candidates:
        for name in c["config"]:
            if name not in names:
                names.append(name)
    params = []
    for name in names:
        values = []
        for c in candidates:
            v = c["config"].get(name)
            if v is None:
                raise InputError(f"{path}: a candidate lacks parameter {name}")
            if v not in values:
                values.append(v)
        params.append({"name": name, "values": values,
                       "named": any(isinstance(v, str) for v in values)})
    cis = [c["ci_rel"] for c in candidates if isinstance(c["ci_rel"], (int, float))]
    dims = start.get("dims") or {}
    land = {"format": FORMAT, "op": start.get("op"), "backend": start.get("backend"),
            "preset": start.get("preset"), "dims": " ".join(f"{k}={v}" for k, v in dims.items()),
            "log": path, "params": params, "candidates": candidates,
            "noise": {"median_ci_rel": statistics.median(cis) if cis else None}}
    return finish_landscape(land, path)


def finish_landscape(land, path):
    """Checks an export (or a converted log) and sets its optimum."""
    if land.get("format") != FORMAT:
        raise InputError(f"{path}: format {land.get('format')!r}, expected {FORMAT!r}")
    params, cands = land.get("params"), land.get("candidates")
    if not isinstance(params, list) or not params or not isinstance(cands, list) or not cands:
        raise InputError(f"{path}: no params or no candidates")
    names = [p.get("name") for p in params]
    clash = [n for n in names if n in COST_KEYS or n in ("grid_size_x", "grid_size_y",
                                                          "grid_size_z")]
    if clash:
        raise InputError(f"{path}: parameter {clash[0]!r} clashes with a Kernel Tuner name")
    seen = set()
    allowed = [set(p["values"]) for p in params]
    for i, c in enumerate(cands):
        cfg = c.get("config") or {}
        key = tuple(cfg.get(n) for n in names)
        for n, v, ok in zip(names, key, allowed):
            if v not in ok:
                raise InputError(f"{path}: candidate {i}: {n}={v!r} is not among its values")
        if key in seen:
            raise InputError(f"{path}: candidate {i} repeats an earlier one")
        seen.add(key)
        s = c.get("score_s")
        if s is not None and not (isinstance(s, (int, float)) and s > 0):
            raise InputError(f"{path}: candidate {i}: score_s {s!r} is neither null nor > 0")
        cost = c.get("cost_s")
        if not isinstance(cost, (int, float)) or cost < 0:
            raise InputError(f"{path}: candidate {i}: cost_s {cost!r} is not a time")
    scored = [i for i, c in enumerate(cands) if c.get("score_s") is not None]
    if not scored:
        raise InputError(f"{path}: every candidate was rejected: nothing to find")
    best = min(scored, key=lambda i: cands[i]["score_s"])
    said = land.get("optimum_s")
    if said is not None and said != cands[best]["score_s"]:
        raise InputError(f"{path}: optimum_s {said} is not the best score_s "
                         f"({cands[best]['score_s']})")
    land["optimum"], land["optimum_s"] = best, cands[best]["score_s"]
    return land


def _num(v):
    """v when it is a finite number, else None."""
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) and \
        math.isfinite(v) else None


def kt_cost_ms(e):
    """What evaluating a Kernel Tuner cache entry cost, ms: compile_time + verification_time
    (where present) + benchmark_time where recorded, else the sum of `times`, else `time`
    (framework_time and strategy_time excluded). The same rule as flaretune's reader."""
    cost = (_num(e.get("compile_time")) or 0.0) + (_num(e.get("verification_time")) or 0.0)
    times = e.get("times")
    if _num(e.get("benchmark_time")) is not None:
        cost += _num(e["benchmark_time"])
    elif isinstance(times, list):
        cost += sum(_num(t) or 0.0 for t in times)
    elif _num(e.get("time")) is not None:
        cost += _num(e["time"])
    return cost


def t4_cost_ms(r):
    """What evaluating a FAIR T4 result cost, ms: times.compilation + times.validation + the sum
    of times.runtimes (framework and search_algorithm excluded)."""
    t = r.get("times") or {}
    return ((_num(t.get("compilation")) or 0.0) + (_num(t.get("validation")) or 0.0)
            + sum(_num(x) or 0.0 for x in (t.get("runtimes") or [])))


def space_sorted(cands, params):
    """The candidates in space order: the parameters' values in their order, the last
    parameter varying fastest (flaretune's order)."""
    pos = [{v: i for i, v in enumerate(p["values"])} for p in params]
    names = [p["name"] for p in params]
    return sorted(cands, key=lambda c: tuple(pos[q][c["config"][n]]
                                             for q, n in enumerate(names)))


def landscape_from_kt_cache(doc, path):
    """A Kernel Tuner cache file: every entry a candidate; `time` (ms) its score when it is a
    number, else (an error string) a failed configuration that still cost its compile time."""
    tp = doc.get("tune_params")
    if not isinstance(tp, dict) or not isinstance(doc.get("cache"), dict):
        raise InputError(f"{path}: a Kernel Tuner cache without tune_params and cache")
    params = [{"name": n, "values": list(v), "named": any(isinstance(x, str) for x in v)}
              for n, v in tp.items()]
    cands = []
    for key, e in doc["cache"].items():
        t = _num(e.get("time"))
        cands.append({"config": {n: e.get(n) for n in tp}, "cost_s": kt_cost_ms(e) / 1e3,
                      "score_s": t / 1e3 if t is not None and t > 0 else None,
                      "ci_rel": None})
    land = {"format": FORMAT, "op": doc.get("kernel_name"), "backend": doc.get("device_name"),
            "preset": os.path.basename(path).split(".")[0],
            "dims": str(doc.get("problem_size")), "log": path, "source": "kernel_tuner_cache",
            "params": params, "candidates": space_sorted(cands, params),
            "noise": {"median_ci_rel": None}}
    return finish_landscape(land, path)


def landscape_from_t4(doc, path):
    """A FAIR T4 results file: each result a candidate; the measurement named time (ms) its
    score when the result is correct and the value a number, else a failed configuration."""
    results = doc.get("results")
    if not isinstance(results, list) or not results:
        raise InputError(f"{path}: a T4 file without results")
    names, values, cands = [], {}, []
    for r in results:
        cfg = r.get("configuration")
        if not isinstance(cfg, dict):
            raise InputError(f"{path}: a T4 result without a configuration")
        for n, v in cfg.items():
            if n not in values:
                names.append(n)
                values[n] = set()
            values[n].add(v)
        m = next((_num(x.get("value")) for x in r.get("measurements") or []
                  if x.get("name") == "time"), None)
        ok = r.get("invalidity", "correct") == "correct" and m is not None and m > 0
        cands.append({"config": dict(cfg), "cost_s": t4_cost_ms(r) / 1e3,
                      "score_s": m / 1e3 if ok else None, "ci_rel": None})
    params = [{"name": n, "values": sorted(values[n], key=lambda v: (isinstance(v, str), v)),
               "named": any(isinstance(v, str) for v in values[n])} for n in names]
    meta = doc.get("metadata") or {}
    land = {"format": FORMAT, "op": meta.get("kernel_name") or os.path.basename(path).split(".")[0],
            "backend": meta.get("device_name") or meta.get("device"),
            "preset": os.path.basename(path).split(".")[0], "dims": "", "log": path,
            "source": "fair_t4", "params": params, "candidates": space_sorted(cands, params),
            "noise": {"median_ci_rel": None}}
    return finish_landscape(land, path)


def read_landscape(path):
    try:
        with open(path, "rb") as f:
            raw = f.read()
        if raw[:2] == b"\x1f\x8b":
            raw = gzip.decompress(raw)
        text = raw.decode("utf-8")
    except OSError as e:
        raise InputError(f"cannot read {path}: {e.strerror or e}") from None
    except (UnicodeDecodeError, EOFError) as e:
        raise InputError(f"cannot read {path}: {e}") from None
    try:
        doc = json.loads(text)
    except json.JSONDecodeError:
        doc = None
    try:
        if isinstance(doc, dict) and "cache" in doc and "tune_params" in doc:
            return landscape_from_kt_cache(doc, path)
        if isinstance(doc, dict) and isinstance(doc.get("results"), list):
            return landscape_from_t4(doc, path)
        if isinstance(doc, dict) and doc.get("event") is None:
            return finish_landscape(doc, path)
        return landscape_from_events(read_events_text(text, path), path)
    except (AttributeError, KeyError, TypeError, ValueError) as e:
        raise InputError(f"{path}: malformed ({type(e).__name__}: {e})") from None


# ---- Kernel Tuner ----------------------------------------------------------------------------

def kt_params(land):
    """tune_params for Kernel Tuner: each parameter's values, in the landscape's order."""
    return {p["name"]: list(p["values"]) for p in land["params"]}


def kernel_name(land):
    return str(land.get("op") or "kernel")


def write_cache(land, path):
    """The landscape as a Kernel Tuner cache file (the JSON tune_kernel writes when it caches)."""
    tune_params = kt_params(land)
    names = list(tune_params)
    cache = {}
    for c in land["candidates"]:
        values = [c["config"][n] for n in names]
        entry = dict(zip(names, values))
        failed = c["score_s"] is None
        ms = None if failed else c["score_s"] * 1e3
        entry.update({
            "time": "RuntimeFailedConfig" if failed else ms,
            "times": [] if failed else [ms],
            "compile_time": 0.0,
            "verification_time": 0.0,
            "benchmark_time": c["cost_s"] * 1e3,
            "strategy_time": 0.0,
            "framework_time": 0.0,
            "timestamp": "1970-01-01 00:00:00+00:00",
        })
        if failed:
            entry["__error__"] = "RuntimeFailedConfig"
        cache[",".join(str(v) for v in values)] = entry
    doc = {"device_name": f"{land.get('backend')}: {land.get('preset')}",
           "kernel_name": kernel_name(land), "problem_size": [1], "tune_params_keys": names,
           "tune_params": tune_params, "objective": "time", "cache": cache}
    with open(path, "w", encoding="utf-8") as f:
        json.dump(doc, f, indent="")


def seed_latin_hypercube():
    """Makes scipy's LatinHypercube draw from numpy's global stream.

    Unless given a seed, it seeds itself from fresh OS entropy, so the initial samples of
    diff_evo and bayes_opt (and Kernel Tuner's get_LHS_sample) would differ from run to run
    whatever the seed. Without one it now gets a seed drawn from np.random.
    """
    import numpy as np
    import scipy.stats.qmc as qmc
    import kernel_tuner.strategies.bayes_opt as bayes_opt
    base = qmc.LatinHypercube
    if getattr(base, "seeded_from_numpy", False):
        return

    class SeededLatinHypercube(base):
        seeded_from_numpy = True

        def __init__(self, d, **kwargs):
            if kwargs.get("rng") is None and kwargs.get("seed") is None:
                kwargs["rng"] = int(np.random.randint(2**31))
            super().__init__(d, **kwargs)

    qmc.LatinHypercube = SeededLatinHypercube
    bayes_opt.LatinHypercube = SeededLatinHypercube


class Simulation:
    """One landscape as Kernel Tuner sees it: the cache, the restriction, the candidates."""

    def __init__(self, land, cachefile):
        self.land = land
        self.cachefile = cachefile
        self.tune_params = kt_params(land)
        self.names = list(self.tune_params)
        self.index = {tuple(c["config"][n] for n in self.names): i
                      for i, c in enumerate(land["candidates"])}
        seed_latin_hypercube()

    def restriction(self, p):
        """Kernel Tuner's monolithic restriction: p maps every parameter to its value."""
        return tuple(p[n] for n in self.names) in self.index

    def run(self, strategy, seed):
        """One simulated run: the candidates evaluated, unique and in order."""
        from kernel_tuner import tune_kernel
        import numpy as np
        random.seed(seed)
        np.random.seed(seed)
        n = len(self.land["candidates"])
        t0 = time.perf_counter()
        with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
            warnings.simplefilter("ignore")
            results, env = tune_kernel(
                kernel_name(self.land), "", (1,), [], self.tune_params,
                restrictions=[self.restriction], cache=self.cachefile, simulation_mode=True,
                strategy=strategy, strategy_options=strategy_options(strategy, n), quiet=True,
                seed=seed)
        wall_s = time.perf_counter() - t0
        order, seen, outside = [], set(), []
        for r in results:
            key = tuple(r[name] for name in self.names)
            i = self.index.get(key)
            if i is None:
                outside.append(key)
            else:
                self.check(i, r)
                if i not in seen:
                    seen.add(i)
                    order.append(i)
        return {"order": order, "fevals": len(results), "outside": len(outside),
                "simulated_s": env.get("simulated_time", 0.0) / 1e3, "wall_s": wall_s}

    def check(self, i, r):
        """Kernel Tuner's result for candidate i says what the landscape says."""
        s = self.land["candidates"][i]["score_s"]
        failed = "__error__" in r
        if failed != (s is None) or (s is not None and abs(r["time"] - s * 1e3) > 1e-9 * s * 1e3):
            raise RuntimeError(f"Kernel Tuner's result for candidate {i} ({r.get('time')!r}) "
                               f"differs from the landscape's score ({s!r} s)")


def to_target(land, order, target):
    """(unique evaluations, their summed cost in s) until the best is within target; None."""
    cands, limit = land["candidates"], land["optimum_s"] * (1 + target)
    cost = 0.0
    for k, i in enumerate(order):
        cost += cands[i]["cost_s"]
        s = cands[i]["score_s"]
        if s is not None and s <= limit:
            return k + 1, cost
    return None, None


def tkey(target):
    """A target as the JSON names it: 0.05, 0.01, 0."""
    return f"{target:g}"


def summarise(values):
    """median (unreached last; None when the median seed did not reach), min, max, reached."""
    done = sorted(v for v in values if v is not None)
    ranked = done + [None] * (len(values) - len(done))
    lo, hi = ranked[(len(ranked) - 1) // 2], ranked[len(ranked) // 2]
    return {"median": None if lo is None or hi is None else 0.5 * (lo + hi),
            "min": done[0] if done else None, "max": done[-1] if done else None,
            "reached": len(done)}


# ---- orderings -------------------------------------------------------------------------------

def permuted(land, j):
    """The landscape with its parameters in ordering j (scripts/ordering.py: the one
    `flaretune replay --orderings` uses): the same candidates, the parameters (and so Kernel
    Tuner's tune_params and its internal space order) reordered."""
    perm = ordering(len(land["params"]), j)
    return dict(land, params=[land["params"][q] for q in perm])


def write_caches(land, tmp, orderings):
    """[(landscape in ordering j, its cache file)] for j = 0..orderings-1."""
    out = []
    for j in range(orderings):
        lj = permuted(land, j)
        path = os.path.join(tmp, f"cache{j}.json")
        write_cache(lj, path)
        out.append((lj, path))
    return out


# ---- the workers -----------------------------------------------------------------------------

_SIMS = None


def _init(caches):
    global _SIMS
    _SIMS = [Simulation(lj, path) for lj, path in caches]


def _job(job):
    """Seed s runs on ordering (s - 1) % N."""
    strategy, seed = job
    try:
        j = (seed - 1) % len(_SIMS)
        return strategy, seed, dict(_SIMS[j].run(strategy, seed), ordering=j), None
    except Exception as e:  # a strategy that cannot run: reported, the others go on
        return strategy, seed, None, f"{type(e).__name__}: {e}"


def run_all(caches, strategies, seeds, jobs, progress):
    """{strategy: {seed: run}} and {strategy: error} over every strategy and seed."""
    work = [(s, seed) for s in strategies for seed in range(1, seeds + 1)]
    runs, errors = {s: {} for s in strategies}, {}
    left, spent = {s: seeds for s in strategies}, {s: 0.0 for s in strategies}
    if jobs <= 1:
        _init(caches)
        results, pool = (_job(w) for w in work), None
    else:
        import multiprocessing
        pool = multiprocessing.get_context("fork").Pool(jobs, _init, (caches,))
        results = pool.imap_unordered(_job, work)
    try:
        for strategy, seed, run, err in results:
            left[strategy] -= 1
            if err:
                errors.setdefault(strategy, f"seed {seed}: {err}")
            else:
                runs[strategy][seed] = run
                spent[strategy] += run["wall_s"]
            if left[strategy] == 0:
                done = sum(v == 0 for v in left.values())
                progress(f"[{done}/{len(strategies)}] {strategy}: "
                         + (f"failed: {errors[strategy]}" if strategy in errors else
                            f"{seeds} seeds in {spent[strategy]:.1f} s"))
    finally:
        if pool:
            pool.close()
            pool.join()
    return runs, errors


# ---- the report ------------------------------------------------------------------------------

def report(path, land, runs, errors, seeds, targets, wall_s, orderings=1):
    n = len(land["candidates"])
    quarter = math.ceil(n / 4)
    scores = [c["score_s"] for c in land["candidates"]]
    costs = [c["cost_s"] for c in land["candidates"]]
    mland = methodology.Landscape(scores, costs)
    rows = []
    for strategy, by_seed in runs.items():
        row = {"name": strategy, "options": strategy_options(strategy, n),
               "error": errors.get(strategy), "seeds": seeds, "targets": {}}
        if len(by_seed) == seeds:
            row["runs"] = [dict(by_seed[s], seed=s) for s in range(1, seeds + 1)]
            row["wall_s"] = sum(r["wall_s"] for r in row["runs"])
            row["methodology"] = methodology.score_runs(
                mland, [methodology.trace_of(scores, costs, r["order"]) for r in row["runs"]])
            for t in targets:
                hits = [to_target(land, r["order"], t) for r in row["runs"]]
                evals, secs = [h[0] for h in hits], [h[1] for h in hits]
                row["targets"][tkey(t)] = {
                    "evaluations": evals, "time_s": secs,
                    "evals": summarise(evals), "time": summarise(secs),
                    "within_quarter": sum(e is not None and e <= quarter for e in evals) / seeds}
        rows.append(row)
    cands = land["candidates"]
    return {"format": "kt-compare/1", "input": path, "log": land.get("log"),
            "op": land.get("op"), "backend": land.get("backend"), "preset": land.get("preset"),
            "dims": land.get("dims"), "kernel": land.get("kernel"), "device": land.get("device"),
            "valid": n,
            "rejected": sum(c["score_s"] is None for c in cands),
            "optimum": land["optimum"], "optimum_s": land["optimum_s"],
            "optimum_config": cands[land["optimum"]]["config"],
            "exhaustive_cost_s": sum(c["cost_s"] for c in cands), "quarter": quarter,
            "within": {tkey(t): sum(c["score_s"] is not None
                                   and c["score_s"] <= land["optimum_s"] * (1 + t)
                                   for c in cands) for t in targets},
            "seeds": seeds, "targets": targets, "orderings": orderings,
            "source": land.get("source") or "flaretune",
            "methodology": dict(mland.to_json(), cutoff=methodology.CUTOFF),
            "kernel_tuner": kt_version(),
            "wall_s": wall_s, "left_out": LEFT_OUT, "strategies": rows}


def kt_version():
    try:
        from importlib.metadata import version
        return version("kernel_tuner")
    except Exception:
        return None


def fmt(v, digits=1):
    return "-" if v is None else f"{v:.{digits}f}"


def print_table(rep, out=sys.stdout):
    n, q = rep["valid"], rep["quarter"]
    w = max(len("strategy"), *(len(r["name"]) for r in rep["strategies"]))
    if rep.get("op"):
        print(f"landscape  {rep['op']} on {rep['backend']}, preset {rep['preset']} "
              f"({rep['dims']})", file=out)
    else:
        print(f"landscape  {rep.get('kernel') or rep.get('log')} on {rep.get('device') or '?'} "
              f"({rep.get('source')} file {rep.get('log')})", file=out)
    cfg = ",".join(f"{k}={v}" for k, v in rep["optimum_config"].items())
    print(f"           {n} candidates ({rep['rejected']} rejected), optimum "
          f"{rep['optimum_s'] * 1e3:.3f} ms at {cfg}", file=out)
    print(f"           all of them cost {rep['exhaustive_cost_s']:.1f} s; Kernel Tuner "
          f"{rep['kernel_tuner']} in simulation mode, {rep['seeds']} seeds", file=out)
    for t in rep["targets"]:
        print(f"\ntarget within {t * 100:g}% of the optimum ({rep['within'][tkey(t)]} candidates):"
              f" unique evaluations until then, their time (s), and how often within {q} (a "
              "quarter)", file=out)
        print(f"{'strategy':<{w}} {'reached':>7} {'median':>7} {'min':>5} {'max':>5} "
              f"{'of valid':>8} {'time':>7} {'min':>7} {'max':>7} {'<=' + str(q):>6}",
              file=out)
        for row in rep["strategies"]:
            if tkey(t) not in row["targets"]:
                print(f"{row['name']:<{w}} failed: {row['error']}", file=out)
                continue
            r = row["targets"][tkey(t)]
            e, s = r["evals"], r["time"]
            frac = None if e["median"] is None else 100 * e["median"] / n
            print(f"{row['name']:<{w}} {str(e['reached']) + '/' + str(row['seeds']):>7} "
                  f"{fmt(e['median']):>7} {fmt(e['min'], 0):>5} {fmt(e['max'], 0):>5} "
                  f"{fmt(frac):>7}% {fmt(s['median'], 2):>7} {fmt(s['min'], 2):>7} "
                  f"{fmt(s['max'], 2):>7} {r['within_quarter'] * 100:>5.0f}%", file=out)
    m = rep["methodology"]
    print(f"\nmethodology score (Willemsen et al. 2024; 0: random search, 1: the optimum at "
          f"once) over a budget of {m['budget_evals']} evaluations, {m['budget_time_s']:.1f} s:",
          file=out)
    for row in rep["strategies"]:
        if row.get("methodology"):
            s = row["methodology"]
            print(f"{row['name']:<{w}} {fmt(s['evals'], 3):>7} in evaluations "
                  f"{fmt(s['time'], 3):>7} in time", file=out)
    spent = ", ".join(f"{r['name']} {r['wall_s']:.1f}" for r in rep["strategies"]
                      if "wall_s" in r)
    print(f"\nrun time {rep['wall_s']:.1f} s (per strategy, all seeds: {spent})", file=out)
    print("left out: " + "; ".join(f"{k} ({v})" for k, v in rep["left_out"].items()), file=out)


# ---- the command line ------------------------------------------------------------------------

def parse_args(argv):
    ap = argparse.ArgumentParser(
        prog="kt-compare.py",
        description="Kernel Tuner's search strategies, in its simulation mode, on a landscape "
                    "flaretune recorded (an export of `flaretune replay LOG --export FILE`, or "
                    "the exhaustive event log itself).",
        epilog="Left out by default: " + "; ".join(f"{k}: {v}" for k, v in LEFT_OUT.items()))
    ap.add_argument("landscape")
    ap.add_argument("--seeds", type=int, default=20, help="seeds 1..N (default 20)")
    ap.add_argument("--targets", default="0.05,0.01",
                    help="relative distances to the optimum (default 0.05,0.01)")
    ap.add_argument("--strategies", default=",".join(STRATEGIES),
                    help="Kernel Tuner strategy names (default: %(default)s)")
    ap.add_argument("--jobs", type=int, default=1, help="worker processes (default 1)")
    ap.add_argument("--json", metavar="FILE", help="write everything as JSON to FILE")
    ap.add_argument("--orderings", type=int, default=1,
                    help="seed s runs on ordering (s-1) %% N of the parameters: 0 the file's "
                         "order, j > 0 the shuffle scripts/ordering.py draws from j, the same as "
                         "`flaretune replay --orderings N` (default 1)")
    args = ap.parse_args(argv)
    if args.seeds < 1 or args.jobs < 1 or args.orderings < 1:
        ap.error("--seeds, --jobs and --orderings want a positive integer")
    try:
        args.targets = [float(t) for t in args.targets.split(",")]
    except ValueError:
        ap.error(f"--targets wants fractions such as 0.05,0.01, got {args.targets!r}")
    if any(not 0 <= t < 10 for t in args.targets):
        ap.error("--targets wants fractions in [0, 10)")
    args.strategies = [s for s in args.strategies.split(",") if s]
    if not args.strategies:
        ap.error("--strategies names none")
    return args


def main(argv=None):
    args = parse_args(argv)
    try:
        import kernel_tuner.interface as kti
    except ImportError as e:
        print(f"kt-compare: cannot import kernel_tuner ({e}): run it with the Python of a "
              "virtual environment that has it (scripts/search-quality.sh makes one)",
              file=sys.stderr)
        return 1
    unknown = [s for s in args.strategies if s not in kti.strategy_map]
    if unknown:
        print(f"kt-compare: unknown strategy {unknown[0]!r} (Kernel Tuner has: "
              f"{', '.join(kti.strategy_map)})", file=sys.stderr)
        return 2
    try:
        land = read_landscape(args.landscape)
    except InputError as e:
        print(f"kt-compare: {e}", file=sys.stderr)
        return 1
    progress = lambda msg: print(f"kt-compare: {msg}", file=sys.stderr, flush=True)
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="kt-compare.") as tmp:
        caches = write_caches(land, tmp, args.orderings)
        runs, errors = run_all(caches, args.strategies, args.seeds, args.jobs, progress)
    rep = report(args.landscape, land, runs, errors, args.seeds, args.targets,
                 time.perf_counter() - t0, args.orderings)
    print_table(rep)
    if args.json:
        tmpname = args.json + ".tmp"
        with open(tmpname, "w", encoding="utf-8") as f:
            json.dump(rep, f, indent=1)
            f.write("\n")
        os.replace(tmpname, args.json)
    return 1 if errors else 0


if __name__ == "__main__":
    # Some strategies walk sets of configurations, whose order follows the hashes of the
    # parameters' labels: with Python's per-process hash seed the same seed would not make the
    # same run. Fix it (for the workers too, which fork from here).
    if os.environ.get("PYTHONHASHSEED") != "0":
        os.environ["PYTHONHASHSEED"] = "0"
        os.execv(sys.executable, [sys.executable, os.path.abspath(__file__)] + sys.argv[1:])
    sys.exit(main())
