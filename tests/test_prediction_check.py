#!/usr/bin/env python3
"""test_prediction_check.py: scripts/prediction-check.py on hand-made files whose figures are
worked out here: a Kernel Tuner cache of 40 configurations (one failed) and predictions of 30 of
them, each twice the measured time but for two swapped in rank; one predicted unable to run.
Checks n, Spearman, the predicted best's measured rank, recall, the median error and ratio, the
evaluations in predicted order, and bad input (exit 1); with --flaretune BIN, that the default
strategy warm-started from predictions in the measured order reaches the optimum at once.
Python standard library only."""
import gzip
import json
import os
import subprocess
import sys
import tempfile

import checks
from checks import check

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(os.path.dirname(HERE), "scripts", "prediction-check.py")
checks.NAME = "test_prediction_check"


def main():
    with tempfile.TemporaryDirectory() as tmp:
        cache = {}
        for a in range(8):
            for b in range(5):
                t = 1.0 + a + 0.1 * b  # ms; the optimum a=0,b=0
                cache[f"{a},{b}"] = {"a": a, "b": b, "time": t}
        cache["7,4"]["time"] = "RuntimeFailedConfig"
        land = os.path.join(tmp, "land.json.gz")
        with gzip.open(land, "wt") as f:
            json.dump({"device_name": "GPU X", "tune_params_keys": ["a", "b"],
                       "tune_params": {"a": list(range(8)), "b": list(range(5))},
                       "cache": cache}, f)
        pred = os.path.join(tmp, "p.jsonl")
        lines = []
        for a in range(6):
            for b in range(5):
                t = 2e-3 * (1.0 + a + 0.1 * b)
                if (a, b) == (0, 0):
                    t = 2e-3 * (1.0 + 0 + 0.25)  # ranked third instead of first
                if (a, b) in ((0, 2), (0, 3)):
                    t = 2e-3 * (1.0 + 0.2 - 0.19) if (a, b) == (0, 2) else t
                lines.append({"key": f"{a},{b}", "config": f"a={a},b={b}", "device": "gx",
                              "predicted_s": t})
        lines.append({"key": "7,3", "config": "a=7,b=3", "device": "gx", "predicted_s": 1e-3,
                      "unfit": "no block fits"})
        lines.append({"key": "7,2", "config": "a=7,b=2", "device": "other", "predicted_s": 1e-3})
        with open(pred, "w") as f:
            f.write("".join(json.dumps(l) + "\n" for l in lines) + '{"torn')
        out = os.path.join(tmp, "r.json")
        p = subprocess.run([sys.executable, SCRIPT, "--pair", f"{pred}:gx:{land}", "--json", out],
                           capture_output=True, text=True)
        check(p.returncode == 0 and "GPU X" in p.stdout, f"exit {p.returncode}: {p.stderr}")
        r = json.load(open(out))[0]
        check(r["n"] == 30 and r["measured"] == 39 and r["unfit"] == 1 and r["unfit_measured"] == 1,
              f"counts {r}")
        # the predicted best is (0,2): measured 1.2 ms, third of the 39 measured
        check(r["best_rank"] == 3, f"best rank {r['best_rank']}")
        check(abs(r["best_percentile"] - 100 * 3 / 39) < 1e-9, "percentile")
        # one swap of two adjacent-ish ranks: Spearman just under 1
        check(0.98 < r["spearman"] < 1.0, f"spearman {r['spearman']}")
        # top 1% of 30 = 1 config (0,0): predicted rank 3, within the predicted top 5% (2)? no
        check(r["recall_1"] == 0.0 and r["recall_5"] == 0.5, f"recall {r['recall_1']} {r['recall_5']}")
        check(abs(r["median_ratio"] - 2.0) < 1e-9 and abs(r["mape"] - 1.0) < 1e-9,
              f"ratio {r['median_ratio']} mape {r['mape']}")
        # within 5% of 1.0 ms: (0,0) only; in predicted order it comes third
        check(r["ordered_to_5"] == 3 and r["within_5_of_n"] == 1 and r["random_to_5"] == 15.5,
              f"ordered {r['ordered_to_5']} random {r['random_to_5']}")
        # With flaretune: the default strategy warm-started from predictions of every
        # configuration in the right order measures the optimum first.
        ft = sys.argv[sys.argv.index("--flaretune") + 1] if "--flaretune" in sys.argv else None
        if ft:
            exact = os.path.join(tmp, "exact.jsonl")
            with open(exact, "w") as f:
                for k, v in cache.items():
                    if isinstance(v["time"], float):
                        f.write(json.dumps({"key": k, "config": f"a={v['a']},b={v['b']}", "device": "gx",
                                            "predicted_s": 3e-3 * v["time"]}) + "\n")
            p = subprocess.run([sys.executable, SCRIPT, "--pair", f"{exact}:gx:{land}", "--json", out,
                                "--flaretune", ft, "--seeds", "5"], capture_output=True, text=True)
            r = json.load(open(out))[0] if p.returncode == 0 else {}
            check(p.returncode == 0 and r.get("spearman") == 1.0 and r.get("prior_to_5") == 1.0 and
                  r.get("plain_to_5", 0) >= 1.0, f"warm start from exact predictions: {p.stderr} {r}")
        p = subprocess.run([sys.executable, SCRIPT, "--pair", f"{pred}:gx:{tmp}/none.json.gz"],
                           capture_output=True, text=True)
        check(p.returncode == 1 and len(p.stderr.strip().splitlines()) == 1, f"missing file: {p.stderr}")
        p = subprocess.run([sys.executable, SCRIPT, "--pair", "x:y"], capture_output=True, text=True)
        check(p.returncode == 2, "bad --pair")
    checks.finish()
    return 0


if __name__ == "__main__":
    sys.exit(main())
