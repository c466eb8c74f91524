#!/usr/bin/env python3
"""test_prediction_check.py: scripts/prediction-check.py on hand-made files whose figures are
worked out here: a Kernel Tuner cache of 40 configurations (one failed) and predictions of 30 of
them, each twice the measured time but for two swapped in rank; one predicted unable to run.
Checks n, Spearman, the predicted best's measured rank, recall, the median error and ratio, the
evaluations in predicted order, the Spearman ceiling of a kernel source that never names one
parameter (worked out by hand: 0.956, twins 1.25x apart; the parameter it names only in an
included file counts as named), and bad input (exit 1); with --flaretune BIN, that the default
strategy warm-started from predictions in the measured order reaches the optimum at once, and
--plan: which caches can be checked (device by the model it reports, kernel by its T1 file, a HIP
file's CUDA twin as source) and why each other one is left out.
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


def plan_cases(ft, tmp):
    """--plan: which landscapes can be checked, each matched to flaretune's device by the model
    it reports and to a T1 file by its kernel; every other one left out with its reason."""
    kdir = os.path.join(tmp, "kernels")
    os.makedirs(kdir)
    with open(os.path.join(kdir, "k.json"), "w") as f:
        json.dump({"KernelSpecification": {"KernelName": "k_kernel", "KernelFile": "sub/k.cu.hip",
                                           "ProblemSize": [64, 32]}}, f)
    with open(os.path.join(kdir, "k.cu"), "w") as f:
        f.write("__global__ void k_kernel(float *x) {}\n")
    with open(os.path.join(kdir, "notes.json"), "w") as f:
        f.write("[1, 2")
    def cache(name, device, kernel="k_kernel", size=(64, 32), doc=None):
        path = os.path.join(tmp, name)
        with gzip.open(path, "wt") as f:
            json.dump(doc if doc is not None else
                      {"device_name": device, "kernel_name": kernel, "problem_size": list(size),
                       "tune_params_keys": ["a"], "tune_params": {"a": [1]},
                       "cache": {"1": {"a": 1, "time": 1.0}}}, f)
        return path
    good = cache("good.json.gz", "NVIDIA RTX A4000")
    sxm = cache("sxm.json.gz", "nvidia a100-sxm4-80gb")
    files = [good, cache("amd.json.gz", "AMD Instinct MI250X"), cache("nodev.json.gz", ""),
             cache("other.json.gz", "NVIDIA RTX A4000", kernel="gemm"),
             cache("size.json.gz", "NVIDIA RTX A4000", size=(64, 64)),
             cache("t4.json.gz", "", doc={"metadata": {}, "results": []}), sxm,
             os.path.join(tmp, "missing.json.gz")]
    p = subprocess.run([sys.executable, SCRIPT, "--plan", "--flaretune", ft, "--kernels", kdir] + files,
                       capture_output=True, text=True)
    rows = [l.split("\t") for l in p.stdout.splitlines()]
    src = os.path.join(kdir, "k.cu")
    t1 = os.path.join(kdir, "k.json")
    check(p.returncode == 0 and rows == [["k", "rtx-a4000", t1, src, good], ["k", "a100", t1, src, sxm]],
          f"plan: exit {p.returncode}, {rows}")
    why = p.stderr
    for name, reason in (("amd", "no spec for device 'AMD Instinct MI250X'"),
                         ("nodev", "the cache names no device"), ("other", "no T1 file describes kernel 'gemm'"),
                         ("size", "measured at problem size [64, 64], its T1 file k.json describes [64, 32]"), ("t4", "not a Kernel Tuner cache"),
                         ("missing", "unreadable")):
        check(f"{name}.json.gz: left out: {reason}" in why, f"{name} left out: {why}")
    check(len(why.strip().splitlines()) == 6, f"one line each: {why}")
    p = subprocess.run([sys.executable, SCRIPT, "--plan", "--flaretune", ft, "--kernels", kdir, files[1]],
                       capture_output=True, text=True)
    check(p.returncode == 1 and p.stdout == "" and "no landscape to check" in p.stderr,
          f"nothing to check: exit {p.returncode}, {p.stderr}")
    p = subprocess.run([sys.executable, SCRIPT, "--plan", "--kernels", kdir, good],
                       capture_output=True, text=True)
    check(p.returncode == 2, "--plan without --flaretune")


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
        # A line of before inspect said a refused configuration cannot run: its nvrtc_error
        # alone makes it one, left out of the correlations like the unfit one.
        lines.append({"key": "7,1", "config": "a=7,b=1", "device": "gx", "predicted_s": 1e-4,
                      "nvrtc_error": "ptxas error: uses too much shared data"})
        # An option NVRTC does not know says nothing of the configuration: still a prediction.
        lines.append({"key": "7,0", "config": "a=7,b=0", "device": "gx", "predicted_s": 2e-3 * 8,
                      "nvrtc_error": "compiling k.cu for sm_86: unrecognized option -O3"})
        lines.append({"key": "7,2", "config": "a=7,b=2", "device": "other", "predicted_s": 1e-3})
        with open(pred, "w") as f:
            f.write("".join(json.dumps(l) + "\n" for l in lines) + '{"torn')
        out = os.path.join(tmp, "r.json")
        md = os.path.join(tmp, "r.md")
        p = subprocess.run([sys.executable, SCRIPT, "--pair", f"{pred}:gx:{land}", "--json", out,
                            "--markdown", md], capture_output=True, text=True)
        check(p.returncode == 0 and "GPU X" in p.stdout, f"exit {p.returncode}: {p.stderr}")
        with open(md) as f:
            table = f.read()
        check("31 of 39 (2 predicted unable to run, 2 of them measured; 1 refused by the "
              "compiler, 1 of those measured)" in table, f"the unfit said: {table}")
        r = json.load(open(out))[0]
        check(r["n"] == 31 and r["measured"] == 39 and r["unfit"] == 2 and r["unfit_measured"] == 2
              and r["uncompiled"] == 1 and r["uncompiled_measured"] == 1, f"counts {r}")
        # the predicted best is (0,2): measured 1.2 ms, third of the 39 measured
        check(r["best_rank"] == 3, f"best rank {r['best_rank']}")
        check(abs(r["best_percentile"] - 100 * 3 / 39) < 1e-9, "percentile")
        # one swap of two adjacent-ish ranks: Spearman just under 1
        check(0.98 < r["spearman"] < 1.0, f"spearman {r['spearman']}")
        # top 1% of 30 = 1 config (0,0): predicted rank 3, within the predicted top 5% (2)? no
        check(r["recall_1"] == 0.0 and r["recall_5"] == 0.5, f"recall {r['recall_1']} {r['recall_5']}")
        check(abs(r["median_ratio"] - 2.0) < 1e-9 and abs(r["mape"] - 1.0) < 1e-9,
              f"ratio {r['median_ratio']} mape {r['mape']}")
        # within 5% of 1.0 ms: (0,0) only; in predicted order it comes third; at random, the
        # 31 predicted ones take (31 + 1) / (1 + 1) draws
        check(r["ordered_to_5"] == 3 and r["within_5_of_n"] == 1 and r["random_to_5"] == 16.0,
              f"ordered {r['ordered_to_5']} random {r['random_to_5']}")
        check("ceiling" not in r, "no ceiling without the kernel's source")
        # A kernel that names a (in the file it includes) but never c, while the measured time
        # is 1 + a + 0.5 c ms: the groups {(a,0), (a,1)} get one prediction each. Their mean
        # measured ranks 1.5, 3.5, 5.5 against the ranks 1..6: covariance 16, deviations 4 and
        # sqrt(17.5), so 16 / (4 sqrt(17.5)) = 0.9562; within the groups 1.5/1, 2.5/2, 3.5/3 ms.
        twin = {f"{a},{c}": {"a": a, "c": c, "time": 1.0 + a + 0.5 * c} for a in range(3) for c in range(2)}
        land2 = os.path.join(tmp, "twins.json")
        with open(land2, "w") as f:
            json.dump({"device_name": "GPU Y", "tune_params_keys": ["a", "c"],
                       "tune_params": {"a": [0, 1, 2], "c": [0, 1]}, "cache": twin}, f)
        with open(os.path.join(tmp, "k.cu"), "w") as f:
            f.write('#include "k.h"\n// c is a comment here, not code: the word still counts\n'
                    "__global__ void k(float *x) { x[0] = A_VALUE; }\n")
        with open(os.path.join(tmp, "k.h"), "w") as f:
            f.write("#define A_VALUE a\n")
        with open(os.path.join(tmp, "k2.cu"), "w") as f:
            f.write('#include "k.h"\n__global__ void k(float *x) { x[0] = A_VALUE; }\n')
        pred2 = os.path.join(tmp, "p2.jsonl")
        with open(pred2, "w") as f:
            for k, v in twin.items():
                f.write(json.dumps({"key": k, "config": f"a={v['a']},c={v['c']}", "device": "gy",
                                    "predicted_s": 1e-3 * (1 + v["a"])}) + "\n")
        p = subprocess.run([sys.executable, SCRIPT, "--pair", f"{pred2}:gy:{land2}:{tmp}/k.cu",
                            "--pair", f"{pred2}:gy:{land2}:{tmp}/k2.cu", "--json", out],
                           capture_output=True, text=True)
        rows = json.load(open(out)) if p.returncode == 0 else [{}, {}]
        named, blind = rows
        check(named.get("unnamed") == [] and abs(named.get("ceiling", 0) - 1.0) < 1e-9 and
              named.get("twin_ratio") is None, f"every parameter named: {p.stderr} {named}")
        check(blind.get("unnamed") == ["c"] and abs(blind.get("ceiling", 0) - 16 / (4 * 17.5 ** 0.5)) < 1e-9
              and abs(blind.get("twin_ratio", 0) - 1.25) < 1e-9, f"c never named: {blind}")
        check("0.96 (c; twins 1.25x apart" in p.stdout, f"table cell: {p.stdout}")
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
        if ft:
            plan_cases(ft, tmp)
        p = subprocess.run([sys.executable, SCRIPT, "--pair", f"{pred}:gx:{tmp}/none.json.gz"],
                           capture_output=True, text=True)
        check(p.returncode == 1 and len(p.stderr.strip().splitlines()) == 1, f"missing file: {p.stderr}")
        p = subprocess.run([sys.executable, SCRIPT, "--pair", "x:y"], capture_output=True, text=True)
        check(p.returncode == 2, "bad --pair")
    checks.finish()
    return 0


if __name__ == "__main__":
    sys.exit(main())
