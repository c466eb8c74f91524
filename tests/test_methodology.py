#!/usr/bin/env python3
"""test_methodology.py: scripts/methodology.py, the methodology score of Willemsen et al.

A hand-checked landscape: scores 1..10 (ms), every configuration costing 1 s. Random search's
expected best of k draws without replacement is (N + 1) / (k + 1) = 11 / (k + 1); the median is
5.5, the cutoff 1 + 4.5 * 0.05 = 1.225, reached in expectation at k = 8 (11/9 = 1.222): the
budget is 8 evaluations, 8 s. The oracle (the optimum first) scores 1 in evaluations; in time
0.88 (before its first second it has no result, scored as random's one-draw expectation). A run
finding the optimum second scores (3.5/4.5 + 7) / 8. Random search itself, averaged over many
shuffles, scores about 0, failed configurations among the draws or not."""
import os
import random
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "scripts"))
import methodology  # noqa: E402

import checks  # noqa: E402
from checks import check  # noqa: E402

checks.NAME = "test_methodology"


def random_search(land, scores, costs, rng, n=8000):
    """methodology.score_runs of n random orders of every configuration of land."""
    runs = []
    for _ in range(n):
        order = list(range(len(scores)))
        rng.shuffle(order)
        runs.append(methodology.trace_of(scores, costs, order))
    return methodology.score_runs(land, runs)


def near(a, b, tol=1e-12):
    return a is not None and abs(a - b) <= tol


def main():
    scores = [float(v) for v in range(1, 11)]
    random.Random(3).shuffle(scores)
    costs = [1.0] * 10
    land = methodology.Landscape(scores, costs)
    check(all(near(land.expected_best(k), 11 / (k + 1)) for k in range(1, 11)),
          f"E[best of k] = 11/(k+1): {[land.expected_best(k) for k in range(1, 11)]}")
    check(near(land.cutoff_value, 1.225) and land.budget_evals == 8 and land.budget_time == 8,
          f"cutoff {land.cutoff_value}, budget {land.budget_evals} / {land.budget_time} s")
    opt = scores.index(1.0)
    rest = [i for i in range(10) if i != opt]
    oracle = methodology.trace_of(scores, costs, [opt] + rest)
    e, t = methodology.score_run(land, *oracle)
    check(near(e, 1.0) and near(t, 0.88), f"the oracle: {e} in evaluations, {t} in time")
    two = scores.index(2.0)
    second = methodology.trace_of(scores, costs, [two, opt] + [i for i in rest if i != two])
    e, _ = methodology.score_run(land, *second)
    check(near(e, (3.5 / 4.5 + 7) / 8), f"the optimum second: {e}")
    worst = methodology.trace_of(scores, costs, sorted(range(10), key=lambda i: -scores[i]))
    e, _ = methodology.score_run(land, *worst)
    check(e is not None and e < 0, f"worst first scores below random: {e}")
    rng = random.Random(1)
    r = random_search(land, scores, costs, rng)
    check(abs(r["evals"]) < 0.04 and abs(r["time"]) < 0.05,
          f"random search scores about 0: {r}")
    # the baseline as kt-compare.py writes it scores a run the same
    import json
    back = methodology.Landscape.from_json(json.loads(json.dumps(land.to_json())))
    check(methodology.score_run(back, *second) == methodology.score_run(land, *second),
          "the baseline through JSON scores the same")
    # failed configurations are draws of random search that find nothing: with two among 12,
    # one draw expects (55 + 2 x 5.5) / 12 = 5.5, twelve the optimum; random search over all
    # twelve still scores about 0
    fs, fc = scores + [None, None], costs + [1.0, 1.0]
    land2 = methodology.Landscape(fs, fc)
    check(land2.n == 12 and near(land2.expected_best(1), 5.5) and near(land2.expected_best(12), 1),
          f"failed configurations drawn: {land2.expected_best(1)} {land2.expected_best(12)}")
    r = random_search(land2, fs, fc, rng)
    check(abs(r["evals"]) < 0.04 and abs(r["time"]) < 0.05,
          f"random search among failed configurations scores about 0: {r}")
    checks.finish()
    return 0


if __name__ == "__main__":
    sys.exit(main())
