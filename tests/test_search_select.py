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
A replay that fails stops the script with exit 1 and its command; too few landscapes is 2."""
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

STUB = r'''#!/usr/bin/env python3
import json, os, sys
args = sys.argv[1:]
land = os.path.basename(args[1])
if land == "BAD":
    print("flaretune: BAD: not a landscape", file=sys.stderr)
    sys.exit(1)
opts = [args[i + 1] for i, a in enumerate(args) if a == "--opt"]
setting = "A"
for o in opts:
    setting = o.split("=")[1]
fig = json.loads(os.environ["FIGURES"])[land][setting]
print(json.dumps({"valid": 99, "targets": [{"target": 0.05, "within_target": 9},
                                           {"target": 0.01, "within_target": 4}],
                  "strategies": [{"name": "bayes", "targets": [
                      {"target": 0.05, "median": fig[0]}, {"target": 0.01, "median": fig[1]}]}]}))
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
