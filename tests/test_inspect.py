#!/usr/bin/env python3
"""test_inspect.py: `flaretune inspect`, the emulator's memory profile of an op's CUDA kernels.

fusion.dflare's default configuration moves, by the emulator's count of distinct sectors,
within 5% of the op's napkin bytes (it reads its inputs and writes its outputs once); its
stores are whole sectors (sectors per request at the ideal); every busy site is named by a line
of fusion.cu; the JSON carries the documented keys and the tables the same figures; a sample of
a launch's blocks predicts what every block does (fusion.dflare's, and attention.decode's over
requests of different lengths, with a kernel reading what the sampled one wrote); bad requests
are one-line usage errors.

usage: test_inspect.py --flaretune PATH
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import clitest  # noqa: E402
from clitest import check, one_line_error, run  # noqa: E402

KERNEL_KEYS = {"kernel", "source", "launches", "incomplete", "grid", "block", "blocks", "warps",
               "traffic", "unique_read_bytes", "unique_write_bytes", "sector_bytes", "barriers",
               "cp_async", "collectives", "sites", "device", "predicted"}
BOUNDS = {"dram", "l2", "shared", "l1", "issue", "fp32", "convert", "tensor", "launch"}
H200_BW = 4.8e12  # bytes/s, kernels/cuda/specs.c
TRAFFIC_KEYS = {"global_load", "global_store", "global_atomic", "shared_load", "shared_store"}


ENV = {}


def inspect(*args):
    rc, out, err = run("inspect", "fusion.dflare", *args, env=ENV)
    check(rc == 0, f"inspect {args}: exit {rc}: {err}")
    return out if rc == 0 else None


def test_dflare_default():
    """At the op's default (small) preset: distinct bytes within 5% of napkin bytes."""
    out = inspect("--json")
    if out is None:
        return
    d = json.loads(out)
    check(d["op"] == "fusion.dflare" and d["backend"] == "cuda-emu", f"header {d['op']}")
    napkin, uniq = d["napkin_bytes"], d["unique_bytes"]
    check(napkin > 0 and abs(uniq - napkin) <= 0.05 * napkin,
          f"distinct bytes {uniq} within 5% of napkin {napkin}")
    check(d["sector_bytes"] >= uniq, f"requested sectors {d['sector_bytes']} >= distinct {uniq}")
    # The prediction: the largest limit, the dram limit the distinct bytes over H200's bandwidth.
    p = d["predicted"]
    check(d["device"] == "h200" and set(p["limits_s"]) == BOUNDS and p["bound"] in BOUNDS,
          f"prediction for h200 with every limit: {p}")
    check(abs(p["seconds"] - max(p["limits_s"].values())) <= 1e-12 * p["seconds"] + 1e-15,
          f"the time is the largest limit: {p}")
    check(abs(p["limits_s"]["dram"] - uniq / H200_BW) <= 1e-6 * p["limits_s"]["dram"],
          f"dram limit {p['limits_s']['dram']} = {uniq} B / 4.8 TB/s")
    for k in d["kernels"]:
        check(KERNEL_KEYS <= set(k), f"kernel keys: {sorted(KERNEL_KEYS - set(k))} missing")
        check(set(k["traffic"]) == TRAFFIC_KEYS, f"traffic keys {sorted(k['traffic'])}")
        st = k["traffic"]["global_store"]
        check(st["requests"] > 0 and st["units"] == st["ideal"],
              f"{k['kernel']}: stores at the ideal sectors: {st}")
        for kind, t in k["traffic"].items():
            check(t["units"] >= t["ideal"] and t["lanes"] <= 32 * t["requests"],
                  f"{k['kernel']} {kind}: units >= ideal, lanes <= 32 per request: {t}")
        check(k["sites"] and all("fusion/fusion.cu:" in s["where"] for s in k["sites"]),
              f"{k['kernel']}: sites named by fusion.cu lines: {[s['where'] for s in k['sites']]}")
        dev = k["device"]
        if "sass_unavailable" in d:  # no nvdisasm or no toolkit: said, and nothing invented
            check(dev is None or dev["sass"] is None, f"no SASS when unavailable: {dev}")
        else:
            h = dev["sass"]["hot_loop"]
            check(dev["regs"] > 0 and dev["blocks_per_sm"] > 0 and h and
                  h["classes"]["lds"] > 0 and dev["instructions_per_memory_instruction"] > 1,
                  f"{k['kernel']}: registers, occupancy and a hot loop reading shared memory: {dev}")


def test_sampled_against_whole():
    """A launch profiled on a sample of its blocks (boundary and interior, each stratum scaled to
    the grid) predicts what every block emulated does: at the default preset (512 blocks), a
    sample of 4 and of 16 against all, the predicted time and requested sectors within 5%."""
    runs = {}
    for b in ("0", "4", "16"):
        out = inspect("--json", "--blocks", b)
        if out is None:
            return
        runs[b] = json.loads(out)
    whole = runs["0"]
    check(all(k["sampled_blocks"] == 0 for k in whole["kernels"]), "--blocks 0 emulates every block")
    for b in ("4", "16"):
        d = runs[b]
        check(all(k["sampled_blocks"] == int(b) for k in d["kernels"] if k["blocks"] > int(b)),
              f"--blocks {b}: the sample's size said")
        for key in ("sector_bytes", "unique_bytes"):
            check(abs(d[key] - whole[key]) <= 0.05 * whole[key], f"--blocks {b}: {key} {d[key]} vs {whole[key]}")
        p, q = d["predicted"]["seconds"], whole["predicted"]["seconds"]
        check(abs(p - q) <= 0.05 * q and d["predicted"]["bound"] == whole["predicted"]["bound"],
              f"--blocks {b}: predicted {p} {d['predicted']['bound']} vs {q} {whole['predicted']['bound']}")
    one_line_error(["inspect", "fusion.dflare", "--blocks", "1"], 2, "--blocks")


def decode_json(*args):
    rc, out, err = run("inspect", "attention.decode", "--preset", "small.dflash.decode", "--config",
                       "splits=8", "--json", *args, env=ENV)
    check(rc == 0, f"inspect attention.decode {args}: exit {rc}: {err}")
    return json.loads(out) if rc == 0 else None


def test_sampled_decode():
    """attention.decode's grid is splits x kv heads x requests, and its second kernel reads what
    the first wrote. A sample spreads over the z planes: with ragged contexts (request 0 empty,
    the last twice the mean) the first plane alone predicted the launch floor, 5 us against 43.
    And what the sampled first kernel leaves unwritten reads as ordinary data: as NaN, it made
    decode_merge skip every split (w > 0 false), 32x fewer bytes read than every block emulated."""
    for extra, name in (((), "even"), (("--set", "ragged=1"), "ragged")):
        runs = {b: decode_json("--blocks", b, *extra) for b in ("0", "16")}
        if None in runs.values():
            return
        whole, part = runs["0"], runs["16"]
        p, q = part["predicted"]["seconds"], whole["predicted"]["seconds"]
        check(abs(p - q) <= 0.15 * q, f"{name} contexts: predicted {p} (16 blocks) vs {q} (all)")
        merge = [{k["kernel"]: k for k in r["kernels"]}.get("decode_merge") for r in (part, whole)]
        check(None not in merge, f"{name} contexts: decode_merge runs: {merge}")
        if name == "even" and None not in merge:
            a, b = merge[0]["unique_read_bytes"], merge[1]["unique_read_bytes"]
            check(abs(a - b) <= 0.05 * b, f"decode_merge reads {a} B sampled vs {b} B whole")


def test_sampled_shared_reads():
    """Every query tile of attention.train reads the same K and V: a sample's distinct bytes
    scaled to the grid counted them once per tile (3x the whole launch's at the small preset).
    They are capped by the allocations the sample touched: within 10% of every block's.
    Its query tiles' work differs (each attends to its anchor's prefix): 16 of the 64 blocks
    taken at even steps along the edges and across the interior predict the whole launch within
    5% (without the SASS mix, within 1.3% at seeds 1 to 6; the corners and edges' middles and 8
    interior draws erred by 12% on average and 33% at most, 13% under at the default seed and 33%
    over at seed 6; with it, as here, 12% under and 31% over)."""
    for seed in ("1", "6"):
        runs = {}
        for b in ("0", "16"):
            rc, out, err = run("inspect", "attention.train", "--preset", "small.dflare.train",
                               "--set", "S=128", "--set", "NB=16", "--seed", seed, "--blocks", b,
                               "--json", env=ENV)
            check(rc == 0, f"inspect attention.train --seed {seed} --blocks {b}: exit {rc}: {err}")
            if rc != 0:
                return
            runs[b] = json.loads(out)
        part, whole = runs["16"], runs["0"]
        check(all(k["sampled_blocks"] == 16 for k in part["kernels"]), "the launch was sampled")
        a, b = part["unique_bytes"], whole["unique_bytes"]
        check(abs(a - b) <= 0.10 * b, f"seed {seed}: distinct bytes {a} sampled vs {b} whole")
        p, q = part["predicted"]["seconds"], whole["predicted"]["seconds"]
        check(abs(p - q) <= 0.05 * q, f"seed {seed}: predicted {p} s sampled vs {q} s whole")


def test_cannot_run_has_no_prediction():
    """A config the named GPU cannot run (129 KiB of shared memory a block on an RTX A4000, which
    allows 99) has no predicted time: the figures would assume an occupancy it cannot have.
    Whether it fits is read from the kernels compiled for that GPU (NVRTC): a build without the
    CUDA toolkit cannot tell, and this check is left out there."""
    rc, out, _ = run("version")
    if rc == 0 and "cuda       built" not in out:
        print("test_cannot_run_has_no_prediction: built without the CUDA toolkit: not checked",
              file=sys.stderr)
        return
    args = ("--preset", "tiny.dflare.train", "--set", "H=2048", "--set", "T=8", "--config",
            "stage=smem,rows_per_block=2,vec_bytes=16,vecs_per_thread=1", "--device", "rtx-a4000",
            "--no-sass", "--sites", "0")
    out = inspect(*args)
    if out is not None:
        check("cannot run on rtx-a4000: dflare_fwd_smem: needs 129.1 KiB of shared memory" in out,
              f"the reason: {out}")
        preds = [l for l in out.splitlines() if "predicted" in l or "all kernels:" in l]
        check(preds and all("none: the config cannot run on rtx-a4000" in l for l in preds) and
              " us on " not in out, f"no time predicted: {preds}")
    out = inspect(*args, "--json")
    if out is not None:
        doc = json.loads(out)
        check(doc["unfit"].startswith("dflare_fwd_smem") and doc["predicted"] is None and
              all(k["predicted"] is None for k in doc["kernels"]),
              f"JSON: predicted null where unfit: {doc['predicted']}")
    # scripts/inspect-table.py (docs/cuda.md's table) reads that JSON: "none", and why
    script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "scripts",
                          "inspect-table.py")
    p = subprocess.run([sys.executable, script, "--flaretune", clitest.FT, "--device",
                        "rtx-a4000", "fusion.dflare:" + " ".join(args[:-5] + args[-3:])],
                       capture_output=True, text=True, env=dict(os.environ, **ENV), timeout=300)
    check(p.returncode == 0 and "predicted none; cannot run on rtx-a4000" in p.stdout,
          f"inspect-table.py of an unfit config: exit {p.returncode}: {p.stdout[-400:]} "
          f"{p.stderr[-300:]}")
    # the same config on the H200 (227 KiB a block) runs, and is predicted
    out = inspect(*args[:-5], "--device", "h200", "--no-sass", "--sites", "0", "--json")
    if out is not None:
        doc = json.loads(out)
        check("unfit" not in doc and doc["predicted"]["seconds"] > 0, "the H200 runs it")


def test_tables_and_errors():
    out = inspect("--preset", "tiny.dflare.train", "--sites", "1")
    if out is not None:
        check(out.startswith("fusion.dflare on cuda-emu (memory profile), config "),
              f"the tables' header: {out.splitlines()[:1]}")
        check("napkin bytes" in out and "sectors/req (ideal" in out, "tables show the ideal")
    # --no-sass, as README lists it: accepted, and said.
    out = inspect("--preset", "tiny.dflare.train", "--sites", "0", "--no-sass")
    if out is not None:
        check("no SASS instruction mix: not read (--no-sass)" in out, "--no-sass is said")
    rc, out, _ = run("inspect", "--help")
    check(rc == 0 and "--no-sass" in out, "inspect --help lists --no-sass")
    one_line_error(["inspect", "fusion.dflare", "--backend", "cpu"], 2, "on the emulator")
    one_line_error(["inspect", "fusion.dflare", "--sites", "-1"], 2, "--sites")
    one_line_error(["inspect", "no.such.op"], 2)
    one_line_error(["inspect"], 2, "which op?")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--flaretune", required=True)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        ENV["FLARETUNE_CACHE_DIR"] = os.environ.get("FLARETUNE_CACHE_DIR") or tmp
        return clitest.main(args.flaretune, (test_dflare_default, test_sampled_against_whole,
                                             test_sampled_decode, test_sampled_shared_reads,
                                             test_cannot_run_has_no_prediction,
                                             test_tables_and_errors))


if __name__ == "__main__":
    sys.exit(main())
