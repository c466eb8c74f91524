#!/usr/bin/env python3
"""test_search_select.py: scripts/search-select.py scores each setting against random search's
expectation and chooses by leave-one-landscape-out, as it says. A stand-in for flaretune answers
each replay with figures chosen here, so every score and every fold's choice is known:

  landscape (valid V, within 5% / 1%)   setting A      setting B      setting C
  L1 (99, 9 / 4): random 10 / 20        5 / 10 -> .5   4 / 8 -> .4    12 / 24 -> 1.2
  L2 (99, 9 / 4)                        2 / 4 -> .2    4 / 8 -> .4    1 / 2 -> .1
  L3 (99, 9 / 4)                        3 / 6 -> .3    1 / 2 -> .1    10 / 20 -> 1

Over all: A (.5 .2 .3) gmean .311, B (.4 .4 .1) .252, C (1.2 .1 1) .493: B. Leaving out L1:
A .245, B .2, C .316: B; leaving out L2: A .387, B .2, C 1.095: B; leaving out L3: A .316,
B .4, C .346: A, whose score on L3 is .3.
A replay that fails stops the script with exit 1 and its command; too few landscapes is 2.

--criterion methodology: each landscape has four candidates scoring 1, 2, 3 and 4 s at 1 s each,
so random search's expected best after k evaluations is 2.5, 5/3, 1.25 and 1 (the last, the
optimum for certain, is left out of the score). A run whose best is the optimum at once scores
1; one that finds 3 s first and the optimum second (3, 1) scores (-1/3 + 1 + 1) / 3 = 5/9; one
stuck at 2 s scores (1/3 - 1/2 - 3) / 3 = -19/18. The stand-in's traces by setting:

  landscape   setting A      setting B       setting C
  L1          (3, 1): 5/9    (1): 1          (1): 1
  L2          (1): 1         (2, 2): -19/18  (3, 1): 5/9
  L3          (1): 1         (1): 1          (3, 1): 5/9

Means: A .852, B .315, C .704: A. Leaving out L1: A 1, B -.03, C .556: A (5/9 there);
leaving out L2: A .778, B 1, C .778: B (-19/18 there); leaving out L3: A .778, B -.03, C .778:
A, the first of the tie."""
import json
import math
import os
import stat
import subprocess
import sys
import tempfile

import checks
from checks import check

HERE = os.path.dirname(os.path.abspath(__file__))
SELECT = os.path.join(HERE, "..", "scripts", "search-select.py")
checks.NAME = "test_search_select"

# median evaluations to 5% and 1%, by landscape and setting
FIGURES = {"L1": {"A": (5, 10), "B": (4, 8), "C": (12, 24)},
           "L2": {"A": (2, 4), "B": (4, 8), "C": (1, 2)},
           "L3": {"A": (3, 6), "B": (1, 2), "C": (10, 20)}}

# the best score after each evaluation of the one traced run, by landscape and setting
TRACES = {"L1": {"A": [3.0, 1.0], "B": [1.0], "C": [1.0]},
          "L2": {"A": [1.0], "B": [2.0, 2.0], "C": [3.0, 1.0]},
          "L3": {"A": [1.0], "B": [1.0], "C": [3.0, 1.0]}}

STUB = r'''#!/usr/bin/env python3
import json, os, sys
args = sys.argv[1:]
land = os.path.basename(args[1])
if land == "BAD":
    print("flaretune: BAD: not a landscape", file=sys.stderr)
    sys.exit(1)
if "--export" in args:
    with open(args[args.index("--export") + 1], "w") as f:
        json.dump({"format": "flaretune-landscape/1", "params": [{"name": "x",
                   "values": [0, 1, 2, 3]}], "candidates": [{"config": {"x": i},
                   "score_s": i + 1.0, "cost_s": 1.0} for i in range(4)]}, f)
opts = [args[i + 1] for i, a in enumerate(args) if a == "--opt"]
setting = "A"
for o in opts:
    setting = o.split("=")[1]
fig = json.loads(os.environ["FIGURES"])[land][setting]
row = {"name": "bayes", "targets": [{"target": 0.05, "median": fig[0]},
                                    {"target": 0.01, "median": fig[1]}]}
if "--trace" in args:
    best = json.loads(os.environ["TRACES"])[land][setting]
    row["traces"] = [{"seed": 1, "ordering": 0, "best_s": best,
                      "cost_s": [i + 1.0 for i in range(len(best))]}]
print(json.dumps({"valid": 99, "targets": [{"target": 0.05, "within_target": 9},
                                           {"target": 0.01, "within_target": 4}],
                  "strategies": [row]}))
'''


def main():
    with tempfile.TemporaryDirectory() as tmp:
        stub = os.path.join(tmp, "flaretune")
        with open(stub, "w") as f:
            f.write(STUB)
        os.chmod(stub, os.stat(stub).st_mode | stat.S_IEXEC)
        settings = os.path.join(tmp, "settings.json")
        with open(settings, "w") as f:
            json.dump([{"name": "A", "opts": []}, {"name": "B", "opts": ["bayes.x=B"]},
                       {"name": "C", "opts": ["bayes.x=C"]}], f)
        env = dict(os.environ, FIGURES=json.dumps(FIGURES))
        out = os.path.join(tmp, "out.json")
        lands = [os.path.join(tmp, n) for n in ("L1", "L2", "L3")]
        p = subprocess.run([sys.executable, SELECT, *lands, "--settings", settings,
                            "--flaretune", stub, "--seeds", "3", "--json", out, "--jobs", "1"],
                           capture_output=True, text=True, env=env)
        check(p.returncode == 0, f"exit {p.returncode}: {p.stderr}")
        if p.returncode == 0:
            doc = json.load(open(out))
            # random search needs 100/10 = 10 and 100/5 = 20 in expectation
            want = {("L1", "A"): 0.5, ("L1", "B"): 0.4, ("L2", "C"): 0.1, ("L3", "B"): 0.1}
            for (land, s), v in want.items():
                li, si = "L1 L2 L3".split().index(land), "ABC".index(s)
                check(abs(doc["scores"][li][si] - v) < 1e-9,
                      f"{land} {s}: score {doc['scores'][li][si]}, want {v}")
            check(doc["default"] == "B", f"default {doc['default']}, want B")
            chosen = [f["chosen"] for f in doc["folds"]]
            check(chosen == ["B", "B", "A"], f"folds chose {chosen}, want B B A")
            check(abs(doc["folds"][2]["score"] - 0.3) < 1e-9,
                  f"L3 left out: score {doc['folds'][2]['score']}, want A's 0.3")
            check(abs(doc["overall"][1] - math.exp((math.log(.4) * 2 + math.log(.1)) / 3))
                  < 1e-9, f"B over all: {doc['overall'][1]}")
            check("chosen by 2 of 3 folds" in p.stdout, f"summary line: {p.stdout[-200:]}")
            meth = subprocess.run(
                [sys.executable, SELECT, *lands, "--settings", settings, "--flaretune", stub,
                 "--seeds", "3", "--json", out, "--jobs", "1", "--criterion", "methodology"],
                capture_output=True, text=True, env=dict(env, TRACES=json.dumps(TRACES)))
            check(meth.returncode == 0, f"methodology: exit {meth.returncode}: {meth.stderr}")
        if p.returncode == 0 and meth.returncode == 0:
            doc = json.load(open(out))
            want = {"L1": (5 / 9, 1, 1), "L2": (1, -19 / 18, 5 / 9), "L3": (1, 1, 5 / 9)}
            for li, land in enumerate(("L1", "L2", "L3")):
                for si in range(3):
                    check(abs(doc["scores"][li][si] - want[land][si]) < 1e-9,
                          f"methodology {land} {'ABC'[si]}: {doc['scores'][li][si]}, "
                          f"want {want[land][si]}")
            check(doc["criterion"] == "methodology" and doc["default"] == "A",
                  f"methodology: {doc['criterion']}, default {doc['default']}, want A")
            chosen = [f["chosen"] for f in doc["folds"]]
            check(chosen == ["A", "B", "A"], f"methodology folds chose {chosen}, want A B A")
            check(abs(doc["folds"][1]["score"] + 19 / 18) < 1e-9,
                  f"L2 left out: {doc['folds'][1]['score']}, want B's -19/18")
            check(doc["median_counts"]["default"] == "B",
                  f"the median counts beside it: default {doc['median_counts']['default']}")
        bad = subprocess.run([sys.executable, SELECT, lands[0], os.path.join(tmp, "BAD"),
                              "--settings", settings, "--flaretune", stub],
                             capture_output=True, text=True, env=env)
        check(bad.returncode == 1 and "BAD" in bad.stderr,
              f"a failing replay: exit {bad.returncode}, {bad.stderr}")
        one = subprocess.run([sys.executable, SELECT, lands[0], "--flaretune", stub],
                             capture_output=True, text=True, env=env)
        check(one.returncode == 2, f"one landscape: exit {one.returncode}")
    checks.finish()
    return 0


if __name__ == "__main__":
    sys.exit(main())
