#!/usr/bin/env python3
"""test_kt_compare.py: scripts/kt-compare.py, Kernel Tuner's strategies on a recorded landscape.

A synthetic landscape: three parameters (one named), 30 of the 36 points of their product as
candidates, one of them rejected, written both as an export (flaretune-landscape/1) and as the
event log of an exhaustive run. Checks that random_sample finds the optimum within the 30
evaluations for every seed; that counts are of unique configurations (no repeats in a run's
order, a to-target count is the position where the best first comes within the target, its time
the costs summed up to there, Kernel Tuner's own simulated time the sum over the run); that the
restriction keeps Kernel Tuner inside the candidates (its search space is exactly them, no
result lies outside, and the simulation runner would fail on a point missing from its cache);
that the rejected candidate never reaches a target; that the export and the log give the same
runs (the log's confirmation rescoring its best), and the same seed the same run; and that bad
input is one line and exit 1.

Needs a Python that imports kernel_tuner: this one, $KT_PYTHON, or the virtual environment
scripts/search-quality.sh makes (${VENV:-out/kt-venv} in the repository); the test runs itself
again with the first that does. Without one it exits 77 (skipped).

usage: test_kt_compare.py
"""
import importlib.util
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
SCRIPT = os.path.join(ROOT, "scripts", "kt-compare.py")
sys.path.insert(0, HERE)
import clitest  # noqa: E402
from clitest import check  # noqa: E402

A = [1, 2, 4]
B = ["row", "col", "tile"]
C = [8, 16, 32, 64]
SEEDS = 10
OUTSIDE = {(4, "row", 64), (4, "col", 64), (4, "tile", 64), (1, "tile", 8), (1, "tile", 16),
           (2, "col", 8)}
# Strategies quick on 30 candidates. Not diff_evo: Kernel Tuner 1.5's fails (IndexError) where
# its population, 16 per parameter, outnumbers the candidates.
SOME = "random_sample,simulated_annealing,genetic_algorithm,greedy_ils,mls,dual_annealing," \
       "pso,firefly_algorithm,bayes_opt,brute_force"


def synthetic():
    """(candidates, params): 30 of the 36 points, scores with one optimum, one rejected."""
    cands = []
    for a in A:
        for b in B:
            for c in C:
                if (a, b, c) in OUTSIDE:
                    continue
                score = 1e-3 * (1 + 0.3 * abs(a - 2) + 0.2 * B.index(b)
                                + 0.1 * abs(C.index(c) - 2) + 0.001 * len(cands))
                cands.append({"config": {"a": a, "b": b, "c": c}, "score_s": score,
                              "cost_s": 0.05 + 10 * score, "ci_rel": 0.01})
    assert len(cands) == 30
    # the best-scoring point fails verification: the optimum is the best of the rest
    cands[min(range(len(cands)), key=lambda i: cands[i]["score_s"])]["score_s"] = None
    params = [{"name": "a", "values": A, "named": False},
              {"name": "b", "values": B, "named": True},
              {"name": "c", "values": C, "named": False}]
    return cands, params


def write_export(path, cands, params):
    scored = [i for i, c in enumerate(cands) if c["score_s"] is not None]
    best = min(scored, key=lambda i: cands[i]["score_s"])
    doc = {"format": "flaretune-landscape/1", "op": "test.op", "backend": "cpu",
           "preset": "tiny", "dims": "N=1", "log": "synthetic", "params": params,
           "optimum_s": cands[best]["score_s"], "optimum": best,
           "noise": {"median_ci_rel": 0.01}, "candidates": cands}
    with open(path, "w") as f:
        json.dump(doc, f)


def write_log(path, cands):
    """The same landscape as an exhaustive run's event log (measured in reverse order), where
    the two best measured slower in the search and their confirmation says what the export says;
    the confirmation also names the rejected point, which stays rejected."""
    run = "r1"
    scored = sorted((c["score_s"], i) for i, c in enumerate(cands) if c["score_s"] is not None)
    confirmed = [i for _, i in scored[:2]]
    rejected = next(i for i, c in enumerate(cands) if c["score_s"] is None)
    start = {"event": "run_start", "format": 1, "op": "test.op", "backend": "cpu",
             "preset": "tiny", "dims": {"N": 1}, "strategy": "exhaustive", "space_size": 36,
             "space_valid": len(cands), "default": {"a": 2, "b": "row", "c": 16},
             "key": "k", "t": 100.0, "run": run}
    lines = [start]
    t = 100.0
    for i in reversed(range(len(cands))):
        c = cands[i]
        started, t = t, t + c["cost_s"]
        ev = {"config": c["config"], "candidate": i, "started": started, "t": t, "run": run}
        if c["score_s"] is None:
            lines.append(dict(ev, event="rejected", reason="verify", message="mismatch"))
        else:
            lines.append(dict(ev, event="verified", t=started + 0.01))
            search = c["score_s"] * (1.3 if i in confirmed else 1)
            lines.append(dict(ev, event="measured",
                              stats={"median_s": search, "ci_rel": c["ci_rel"]}))
    shown = confirmed + [rejected]
    lines.append({"event": "confirm", "configs": [cands[i]["config"] for i in shown],
                  "stats": [{"median_s": cands[i]["score_s"] or 1e-6} for i in shown],
                  "started": t, "t": t + 1, "run": run})
    with open(path, "w") as f:
        f.write("".join(json.dumps(x) + "\n" for x in lines))
        f.write('{"event": "run_end", "torn')  # a torn last line is ignored


def kt_compare(*args):
    p = subprocess.run([sys.executable, SCRIPT, *args], capture_output=True, text=True,
                       timeout=600)
    return p.returncode, p.stdout, p.stderr


def load_module():
    spec = importlib.util.spec_from_file_location("kt_compare", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


TMP = None
CANDS, PARAMS = synthetic()


def run_json(inp, name, *extra):
    out = os.path.join(TMP, name)
    rc, stdout, err = kt_compare(inp, "--json", out, *extra)
    check(rc == 0, f"kt-compare {inp} {extra}: exit {rc}: {err[-2000:]}")
    if rc != 0:
        return None
    check("target within 0% of the optimum" in stdout, f"the table: {stdout[:400]}")
    with open(out) as f:
        return json.load(f)


def first_within(order, target):
    """Recomputed here: (position, summed cost) where the best first comes within target."""
    scored = [c["score_s"] for c in CANDS if c["score_s"] is not None]
    limit, best, cost = min(scored) * (1 + target), float("inf"), 0.0
    for k, i in enumerate(order):
        cost += CANDS[i]["cost_s"]
        if CANDS[i]["score_s"] is not None:
            best = min(best, CANDS[i]["score_s"])
        if best <= limit:
            return k + 1, cost
    return None, None


def test_runs():
    exp, log = os.path.join(TMP, "land.json"), os.path.join(TMP, "land.jsonl")
    write_export(exp, CANDS, PARAMS)
    write_log(log, CANDS)
    args = ("--seeds", str(SEEDS), "--targets", "0,0.05", "--strategies", SOME)
    a = run_json(exp, "a.json", *args, "--jobs", "2")
    b = run_json(log, "b.json", *args)
    if not a or not b:
        return
    rejected = next(i for i, c in enumerate(CANDS) if c["score_s"] is None)
    check(a["valid"] == 30 and a["rejected"] == 1 and a["quarter"] == 8,
          f"30 candidates, 1 rejected, a quarter of 8: {a['valid']} {a['rejected']} {a['quarter']}")
    for row in a["strategies"]:
        name = row["name"]
        check(row["error"] is None and len(row.get("runs", [])) == SEEDS,
              f"{name}: every seed ran: {row['error']}")
        for r in row.get("runs", []):
            order = r["order"]
            check(len(order) == len(set(order)) and all(0 <= i < 30 for i in order),
                  f"{name} seed {r['seed']}: the order is unique candidates: {order}")
            check(r["outside"] == 0, f"{name} seed {r['seed']}: {r['outside']} results outside")
            check(r["fevals"] >= len(order), f"{name} seed {r['seed']}: fevals < unique")
            total = sum(CANDS[i]["cost_s"] for i in order)
            check(abs(r["simulated_s"] - total) < 1e-9,
                  f"{name} seed {r['seed']}: simulated {r['simulated_s']} s, costs {total} s")
        for t in ("0", "0.05"):
            tt = row["targets"].get(t)
            if not tt:
                continue
            for r, e, s in zip(row["runs"], tt["evaluations"], tt["time_s"]):
                want = first_within(r["order"], float(t))
                check((e, s is None) == (want[0], want[1] is None) and
                      (s is None or abs(s - want[1]) < 1e-9),
                      f"{name} seed {r['seed']} target {t}: {e} evaluations {s} s, want {want}")
                if e is not None:
                    check(r["order"][e - 1] != rejected,
                          f"{name} seed {r['seed']}: the rejected candidate reached a target")
            reached = [e for e in tt["evaluations"] if e is not None]
            check(tt["within_quarter"] == sum(e <= 8 for e in reached) / SEEDS,
                  f"{name} target {t}: within a quarter {tt['within_quarter']}")
    rs = next(r for r in a["strategies"] if r["name"] == "random_sample")
    ev = rs["targets"]["0"]["evaluations"]
    check(all(e is not None and e <= 30 for e in ev),
          f"random_sample finds the optimum within the 30 evaluations for every seed: {ev}")
    check(all(len(r["order"]) == 30 for r in rs["runs"]),
          "random_sample (max_fevals = 30) evaluates every candidate once")
    check(len({tuple(r["order"]) for r in rs["runs"]}) > 1, "the seeds draw differently")
    repeats = [r["name"] for r in a["strategies"]
               if any(x["fevals"] > len(x["order"]) for x in r.get("runs", []))]
    check(repeats, "some strategy proposes repeats, which the counts leave out")
    # The export and the log are the same landscape; the same seed makes the same run (but
    # bayes_opt, whose default method refits its model by wall-clock timings).
    for ra, rb in zip(a["strategies"], b["strategies"]):
        if ra["name"] == "bayes_opt":
            continue
        same = [x["order"] == y["order"] for x, y in zip(ra.get("runs", []), rb.get("runs", []))]
        check(same and all(same), f"{ra['name']}: export and log runs differ")


def test_restriction():
    """Kernel Tuner's search space under the restriction is the candidates, no more."""
    from kernel_tuner.searchspace import Searchspace
    mod = load_module()
    exp = os.path.join(TMP, "land.json")
    write_export(exp, CANDS, PARAMS)
    sim = mod.Simulation(mod.read_landscape(exp), os.path.join(TMP, "unused.json"))
    space = Searchspace(sim.tune_params, [sim.restriction], 1 << 30)
    got = {tuple(p) for p in space.list}
    want = {(c["config"]["a"], c["config"]["b"], c["config"]["c"]) for c in CANDS}
    check(space.size == 30 and got == want,
          f"the restricted space is the 30 candidates: {space.size}, extra {got - want}")
    check(not any(sim.restriction(dict(zip("abc", p))) for p in OUTSIDE),
          "the points outside are restricted")


def test_errors():
    bad = os.path.join(TMP, "bad.json")
    cases = [({"format": "other/1"}, "format"),
             ({"format": "flaretune-landscape/1", "params": PARAMS,
               "candidates": [dict(c, score_s=None) for c in CANDS]}, "every candidate"),
             ({"format": "flaretune-landscape/1", "params": PARAMS,
               "candidates": CANDS + [CANDS[0]]}, "repeats")]
    for doc, needle in cases:
        with open(bad, "w") as f:
            json.dump(doc, f)
        rc, out, err = kt_compare(bad, "--seeds", "1", "--strategies", "random_sample")
        lines = [l for l in err.splitlines() if l.strip()]
        check(rc == 1 and len(lines) == 1 and needle in err,
              f"{needle}: exit {rc}, want 1 and one line with {needle!r}: {err!r}")
    rc, out, err = kt_compare(bad, "--strategies", "no_such")
    check(rc == 2 and "unknown strategy" in err, f"an unknown strategy: exit {rc}: {err!r}")
    rc, out, err = kt_compare(os.path.join(TMP, "missing.json"))
    check(rc == 1 and "cannot read" in err, f"a missing file: exit {rc}: {err!r}")


def test_unclean():
    """A candidate a busy machine did not measure cleanly (clean false, no median) and one the
    watchdog stopped are failures, as flaretune replay reads them, not malformed input."""
    log = os.path.join(TMP, "busy.jsonl")
    write_log(log, CANDS)
    with open(log) as f:
        lines = f.read().split("\n")
    events = [json.loads(l) for l in lines if l.strip() and not l.startswith('{"event": "run_end", "torn')]
    marked = 0
    for ev in events:
        if ev.get("event") == "measured" and ev["candidate"] in (3, 4):
            if ev["candidate"] == 3:
                ev["clean"] = False
                ev["stats"] = {"median_s": None, "ci_rel": None, "clean": False}
            else:
                ev["stopped"] = {"after_s": 0.5, "limit_s": 0.4}
            marked += 1
    with open(log, "w") as f:
        f.write("".join(json.dumps(x) + "\n" for x in events))
    a = run_json(log, "busy.json", "--seeds", "1", "--targets", "0,0.05", "--strategies",
                 "random_sample")
    check(marked == 2 and a is not None and a["valid"] == 30 and a["rejected"] == 3,
          f"two more failures: {a and a['rejected']}")


def test_orderings():
    """scripts/ordering.py draws the permutations ft_landscape_ordering draws (the constants of
    tests/test_replay.c's test_orderings), and seed s runs on ordering (s - 1) % N: the same
    candidates, the parameters reordered in the cache Kernel Tuner reads."""
    sys.path.insert(0, os.path.join(ROOT, "scripts"))
    from ordering import ordering
    want = {(5, 1): [2, 1, 4, 3, 0], (5, 2): [1, 3, 4, 2, 0], (5, 7): [4, 1, 3, 0, 2],
            (8, 1): [4, 3, 2, 7, 5, 6, 0], (8, 3): [7, 0, 1, 4, 2, 6, 3], (3, 2): [2, 0, 1]}
    for (n, j), perm in want.items():
        got = ordering(n, j)
        check(got[:len(perm)] == perm and sorted(got) == list(range(n)),
              f"ordering {j} of {n}: {got}, want {perm}")
    check(ordering(6, 0) == list(range(6)), "ordering 0 is the identity")
    exp = os.path.join(TMP, "land.json")
    write_export(exp, CANDS, PARAMS)
    rep = run_json(exp, "ord.json", "--seeds", "4", "--targets", "0", "--strategies",
                   "random_sample,greedy_ils", "--orderings", "3")
    if rep:
        check(rep["orderings"] == 3, f"orderings {rep['orderings']}")
        for row in rep["strategies"]:
            js = [r["ordering"] for r in row["runs"]]
            check(js == [0, 1, 2, 0], f"{row['name']}: seeds on orderings {js}")
            check(all(sorted(r["order"]) == sorted(set(r["order"])) for r in row["runs"]),
                  f"{row['name']}: unique evaluations")
            m = row.get("methodology") or {}
            check(m.get("evals") is not None and m["evals"] <= 1 and m.get("time") is not None,
                  f"{row['name']}: a methodology score {m}")
    mod = load_module()
    land = mod.read_landscape(exp)
    p2 = mod.permuted(land, 2)
    check([p["name"] for p in p2["params"]] == [PARAMS[q]["name"] for q in ordering(3, 2)],
          "the landscape's parameters permuted")


def test_formats():
    """Kernel Tuner cache files and FAIR T4 results, gzip-compressed or not, detected by their
    content; each configuration's cost: compile + verification/validation + benchmark_time (KT,
    where recorded, else the sum of times), or the runtimes' sum (T4); framework time
    excluded; a time that is no number is a failed configuration that still costs its
    compilation."""
    import gzip
    mod = load_module()
    kt = {"tune_params": {"x": [1, 2], "y": [8, 4]}, "kernel_name": "k", "device_name": "d",
          "problem_size": [4],
          "cache": {
              "1,8": {"x": 1, "y": 8, "time": 2.0, "times": [2.0, 2.0], "compile_time": 100.0,
                      "verification_time": 5.0, "benchmark_time": 30.0, "framework_time": 9.0},
              "1,4": {"x": 1, "y": 4, "time": 1.0, "times": [1.0, 1.5], "compile_time": 50.0,
                      "framework_time": 9.0},
              "2,8": {"x": 2, "y": 8, "time": "RuntimeFailedConfig", "compile_time": 70.0,
                      "framework_time": 9.0},
              "2,4": {"x": 2, "y": 4, "time": 3.0, "compile_time": 10.0}}}
    path = os.path.join(TMP, "cache.json.gz")
    with gzip.open(path, "wt") as f:
        json.dump(kt, f)
    land = mod.read_landscape(path)
    got = {(c["config"]["x"], c["config"]["y"]): (c["score_s"], c["cost_s"])
           for c in land["candidates"]}
    check(got == {(1, 8): (2e-3, 0.135), (1, 4): (1e-3, 0.0525), (2, 8): (None, 0.07),
                  (2, 4): (3e-3, 0.013)}, f"Kernel Tuner cache: {got}")
    check([tuple(c["config"].values()) for c in land["candidates"]]
          == [(1, 8), (1, 4), (2, 8), (2, 4)], "in space order (the last parameter fastest)")
    check(land["optimum_s"] == 1e-3, f"optimum {land['optimum_s']}")
    t4 = {"schema_version": "1.0.0", "metadata": {}, "results": [
        {"configuration": {"x": 2, "y": 4}, "invalidity": "correct",
         "times": {"compilation": 10.0, "framework": 50.0, "validation": 2.0,
                   "runtimes": [1.0, 2.0]},
         "measurements": [{"name": "time", "value": 1.5, "unit": "ms"}]},
        {"configuration": {"x": 1, "y": 4}, "invalidity": "runtime",
         "times": {"compilation": 20.0, "framework": 1.0},
         "measurements": [{"name": "time", "value": "RuntimeFailedConfig", "unit": ""}]}]}
    path = os.path.join(TMP, "t4.json")
    with open(path, "w") as f:
        json.dump(t4, f)
    land = mod.read_landscape(path)
    got = {(c["config"]["x"], c["config"]["y"]): (c["score_s"], c["cost_s"])
           for c in land["candidates"]}
    check(got == {(2, 4): (1.5e-3, 0.015), (1, 4): (None, 0.02)}, f"T4: {got}")


def has_kt(python):
    try:
        return subprocess.run([python, "-c", "import kernel_tuner, numpy"],
                              capture_output=True, timeout=120).returncode == 0
    except OSError:
        return False


def main():
    global TMP
    try:
        import kernel_tuner  # noqa: F401
    except ImportError:
        venv = os.environ.get("VENV", "out/kt-venv")
        tried = [p for p in (os.environ.get("KT_PYTHON"),
                             os.path.join(ROOT, venv, "bin", "python")) if p]
        for py in tried:
            if os.environ.get("TEST_KT_COMPARE_AGAIN") is None and has_kt(py):
                os.environ["TEST_KT_COMPARE_AGAIN"] = py
                os.execv(py, [py, os.path.abspath(__file__)] + sys.argv[1:])
        print("test_kt_compare: skipped: no Python that imports kernel_tuner (tried "
              f"{', '.join([sys.executable] + tried)}); scripts/search-quality.sh makes "
              f"{venv}, or set KT_PYTHON", file=sys.stderr)
        return 77
    with tempfile.TemporaryDirectory(prefix="test_kt_compare.") as TMP:
        return clitest.main(None, (test_runs, test_restriction, test_errors, test_orderings,
                                        test_formats, test_unclean))


if __name__ == "__main__":
    sys.exit(main())
