#!/usr/bin/env python3
"""ncu-compare.py: the emulator's memory profile against Nsight Compute's, config by config.

    scripts/ncu-compare.py RESULTS [--flaretune build/flaretune] [--json]

RESULTS is a gpu-check result (its folder, or its raw.tar.gz, or profiles/runs/<run>/): for
every config gpu-check profiled with ncu (logs/ncu-*.csv beside their .json), this runs
`flaretune inspect` on the same op, sizes and config here, on the emulator, and prints the
figures both give: sectors per request of global loads and stores, wavefronts per request of
shared loads and stores, and DRAM bytes against the distinct bytes the emulator counted. A GPU
is needed only for the results, not for this comparison.
"""
import argparse
import json
import os
import shlex
import subprocess
import sys
import tarfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import importlib.util  # noqa: E402

_spec = importlib.util.spec_from_file_location(
    "gpu_summary", os.path.join(os.path.dirname(os.path.abspath(__file__)), "gpu-summary.py"))
gs = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(gs)


def logs_of(path):
    """{name: text} of the logs/ncu-* files of a result folder or archive."""
    files = {}
    raw = path if path.endswith(".tar.gz") else os.path.join(path, "raw.tar.gz")
    if os.path.isfile(raw):
        with tarfile.open(raw) as tar:
            for m in tar.getmembers():
                base = os.path.basename(m.name)
                if base.startswith("ncu-") and m.isfile():
                    files[base] = tar.extractfile(m).read().decode("utf-8", "replace")
        return files
    logs = os.path.join(path, "logs")
    for n in os.listdir(logs) if os.path.isdir(logs) else []:
        if n.startswith("ncu-"):
            files[n] = open(os.path.join(logs, n), encoding="utf-8", errors="replace").read()
    return files


def per(a, b):
    return a / b if b else None


def emulator(ft, meta):
    """The emulator's figures for one profiled config (flaretune inspect --json)."""
    args = ["inspect", meta["op"], *shlex.split(meta.get("args", "")), "--json", "--sites", "0",
            "--blocks", "0"]  # every block: figures to set beside a whole launch measured
    if meta.get("config"):
        args += ["--config", meta["config"]]
    p = subprocess.run([ft, *args], capture_output=True, text=True)
    if p.returncode != 0:
        return {"error": p.stderr.strip()[:200]}
    d = json.loads(p.stdout)
    tot = {}
    for k in d["kernels"]:
        for kind, t in k["traffic"].items():
            a = tot.setdefault(kind, {"requests": 0, "units": 0})
            a["requests"] += t["requests"]
            a["units"] += t["units"]
    return {
        "ld_sectors_per_request": per(tot["global_load"]["units"], tot["global_load"]["requests"]),
        "st_sectors_per_request": per(tot["global_store"]["units"], tot["global_store"]["requests"]),
        "shared_ld_wavefronts_per_request": per(tot["shared_load"]["units"],
                                                tot["shared_load"]["requests"]),
        "shared_st_wavefronts_per_request": per(tot["shared_store"]["units"],
                                                tot["shared_store"]["requests"]),
        "unique_bytes": d["unique_bytes"],
        "napkin_bytes": d["napkin_bytes"],
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("results")
    ap.add_argument("--flaretune", default="build/flaretune")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    files = logs_of(a.results)
    rows = []
    for n in sorted(files):
        if not n.endswith(".json"):
            continue
        meta = json.loads(files[n])
        parsed = gs.ncu_parse(files.get(n[:-5] + ".csv", ""))
        if not parsed:
            rows.append({"meta": meta, "error": "no ncu figures"})
            continue
        gpu = gs.ncu_figures(parsed["sums"])
        rows.append({"meta": meta, "ncu": gpu, "emulator": emulator(a.flaretune, meta)})
    if a.json:
        print(json.dumps(rows, indent=1))
        return 0
    if not rows:
        print(f"{a.results}: no Nsight Compute figures (gpu-check's ncu step did not run)")
        return 1
    f = lambda x: "-" if x is None else f"{x:.2f}"  # noqa: E731
    print("| run | config | ld sectors/req (ncu / emu) | st sectors/req | shared ld wavefronts/req "
          "| shared st wavefronts/req | DRAM MB (ncu / emu distinct) |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        meta = r["meta"]
        head = f"| {meta.get('name')} | {meta.get('which')} `{meta.get('config') or 'default'}` |"
        if "error" in r or "error" in r.get("emulator", {}):
            print(head + f" {r.get('error') or r['emulator']['error']} |||||")
            continue
        g, e = r["ncu"], r["emulator"]
        cells = [f"{f(g[k])} / {f(e[k])}" for k in ("ld_sectors_per_request",
                                                    "st_sectors_per_request",
                                                    "shared_ld_wavefronts_per_request",
                                                    "shared_st_wavefronts_per_request")]
        print(head + " " + " | ".join(cells) +
              f" | {g['dram_bytes'] / 1e6:.1f} / {e['unique_bytes'] / 1e6:.1f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
