"""methodology.py: the performance score of Willemsen, van Nieuwpoort and van Werkhoven.

F.-J. Willemsen, R. van Nieuwpoort, B. van Werkhoven, "A methodology for comparing optimization
algorithms for auto-tuning", Future Generation Computer Systems, 2024 (Kernel Tuner's
autotuning_methodology package). A strategy's best-so-far is compared, at every point of a
budget, with what random search is expected to have found by then:

  - the cutoff: the score at cutoff percentile p (0.95) of the way from the landscape's median
    to its optimum, optimum + (median - optimum) * (1 - p);
  - the budget: the evaluations random search (uniform, without replacement, over the valid
    configurations) needs in expectation to reach the cutoff, the smallest k with
    E[best of k] <= cutoff; in time, those evaluations at the median cost of a configuration;
  - at each point x of the budget (in evaluations, 1..budget; in time, 100 points spread over
    (0, budget]) the standardised score (R(x) - S(x)) / (R(x) - optimum), where R(x) is random
    search's expected best at x and S(x) the strategy's best found by then: 0 is random search,
    1 the optimum from the start, below 0 worse than random (a point where random search is
    certain to hold the optimum, 0 / 0, is left out);
  - the score: the mean over the points, then over the runs (seeds).

Random search's expectation is computed exactly from the landscape: with the N configurations
ranked by score, v_1 <= ... <= v_V the valid ones and the failed ones after them, the best of k
draws without replacement is v_i with probability C(N - i, k - 1) / C(N, k), and when all k
draws failed it counts as the mean valid score. In time, x seconds are floor(x / mean cost) evaluations (at least
one); the package rounds instead, which credits random search with an evaluation it has not
finished and scored random search itself at -0.2 on a test landscape. Where a strategy has no
valid result yet, S(x) is the mean valid score, as for random search. Failed configurations are
part of random search's draws (the package leaves them out by default, include_nan=False,
which on a recorded landscape with 11 failed of 29 scored Kernel Tuner's random_sample at -2.9:
a strategy pays for every failed configuration it tries, so its baseline must too). The
package approximates E[best of k] by an order statistic; this module takes the expectation
itself.

Used by scripts/kt-compare.py (Kernel Tuner's runs) and scripts/search-table.py (flaretune's,
from `flaretune replay --json --trace`).
"""
import math
import statistics

CUTOFF = 0.95
TIME_POINTS = 100


class Landscape:
    """What the score needs of a landscape: its valid scores and every configuration's cost."""

    def __init__(self, scores, costs, cutoff=CUTOFF):
        valid = sorted(s for s in scores if s is not None and math.isfinite(s))
        if not valid:
            raise ValueError("no valid score")
        self.sorted = valid
        self.n = len(scores)  # every configuration, failed ones too: random search draws them
        self.optimum = valid[0]
        self.median = statistics.median(valid)
        self.mean = sum(valid) / len(valid)
        known = [c for c in costs if c is not None and math.isfinite(c)]
        self.cost_mean = sum(known) / len(known) if known else float("nan")
        self.cost_median = statistics.median(known) if known else float("nan")
        self.cutoff_value = self.optimum + (self.median - self.optimum) * (1 - cutoff)
        self._expected = {}
        k = 1
        while self.expected_best(k) > self.cutoff_value and k < self.n:
            k += 1
        self.budget_evals = k
        self.budget_time = k * self.cost_median

    def expected_best(self, k):
        """E[best of k uniform draws without replacement from every configuration], a failed one
        ranked after every valid one; when all k draws fail, the mean valid score."""
        k = max(1, min(int(k), self.n))
        if k not in self._expected and self.sorted is None:  # from_json: past what it holds
            k = max(self._expected)
        if k not in self._expected:
            n, p, e, total = self.n, k / self.n, 0.0, 0.0  # p: P(the best is v_1)
            for i in range(1, min(len(self.sorted), n - k + 1) + 1):
                e += self.sorted[i - 1] * p
                total += p
                # P(best is v_{i+1}) / P(best is v_i) = C(n-i-1, k-1) / C(n-i, k-1)
                p = p * (n - i - k + 1) / (n - i) if n - i > 0 else 0.0
            self._expected[k] = e + max(0.0, 1.0 - total) * self.mean
        return self._expected[k]

    def to_json(self):
        """What scoring a run needs, without the landscape: kt-compare.py writes it beside its
        results so that search-table.py scores flaretune's traces against the same baseline."""
        need = self.budget_evals
        if self.budget_time > 0 and self.cost_mean > 0:
            need = max(need, math.floor(self.budget_time / self.cost_mean + 1e-9))
        return {"cutoff_value": self.cutoff_value, "optimum": self.optimum, "mean": self.mean,
                "median": self.median, "n": self.n, "cost_mean": self.cost_mean,
                "cost_median": self.cost_median, "budget_evals": self.budget_evals,
                "budget_time_s": self.budget_time,
                "expected_best": [self.expected_best(k) for k in range(1, min(need, self.n) + 1)]}

    @classmethod
    def from_json(cls, d):
        land = cls.__new__(cls)
        land.sorted = None
        for k in ("cutoff_value", "optimum", "mean", "median", "n", "cost_mean", "cost_median",
                  "budget_evals"):
            setattr(land, k, d[k])
        land.budget_time = d["budget_time_s"]
        land._expected = {k + 1: v for k, v in enumerate(d["expected_best"])}
        return land

    def standardised(self, x_evals, best):
        """(R - S) / (R - optimum) at x_evals random evaluations; None where random search is
        certain to have the optimum (0 / 0: the point is left out)."""
        r = self.expected_best(x_evals)
        s = self.mean if best is None else best
        return None if r <= self.optimum else (r - s) / (r - self.optimum)


def score_run(land, best, cost):
    """(score in evaluations, score in time) of one run: best[e] the best score after
    evaluation e (None: none valid yet), cost[e] the costs of evaluations 0..e summed."""
    def best_at(e):  # after e evaluations
        if e <= 0 or not best:
            return None
        return best[min(e, len(best)) - 1]

    def mean(values):
        values = [v for v in values if v is not None]
        return sum(values) / len(values) if values else None

    s_evals = mean(land.standardised(k, best_at(k)) for k in range(1, land.budget_evals + 1))
    s_time = None
    if cost and all(c is not None for c in cost) and land.budget_time > 0:
        values, j = [], 0
        for i in range(1, TIME_POINTS + 1):
            t = land.budget_time * i / TIME_POINTS
            while j < len(cost) and cost[j] <= t:
                j += 1
            k = max(1, math.floor(t / land.cost_mean + 1e-9))
            values.append(land.standardised(k, best_at(j)))
        s_time = mean(values)
    return s_evals, s_time


def score_runs(land, runs):
    """The mean of score_run over runs [(best, cost), ...]: {"evals", "time", "runs"}."""
    scores = [score_run(land, b, c) for b, c in runs]
    evals = [e for e, _ in scores if e is not None]
    times = [t for _, t in scores if t is not None]
    return {"evals": sum(evals) / len(evals) if evals else None,
            "time": sum(times) / len(times) if times and len(times) == len(scores) else None,
            "runs": len(scores), "budget_evals": land.budget_evals,
            "budget_time_s": land.budget_time}


def trace_of(scores, costs, order):
    """(best, cost) of a run that evaluated the candidates `order` (indices), in turn."""
    best, cost, b, c = [], [], None, 0.0
    for i in order:
        s = scores[i]
        if s is not None and math.isfinite(s) and (b is None or s < b):
            b = s
        c += costs[i]
        best.append(b)
        cost.append(c)
    return best, cost
