#!/usr/bin/env python3
"""inspect-table.py: every CUDA op's kernels profiled without a GPU, as one Markdown table.

    scripts/inspect-table.py [--flaretune build/flaretune] [--device h200] [--attr dtype=bf16]
                             [OP[:ARGS]]...

Runs `flaretune inspect OP --json` (the default config at the op's small preset, or the
arguments after ':', e.g. 'loss:--attr strategy=online') for each op and prints, per kernel:
launches, global load and store sectors per request with their ideal, shared-memory wavefronts
per request with their ideal, the hot loop's SASS instructions per global byte and per memory
instruction, and the predicted
time on the device with its bound; per op, the distinct bytes against the napkin bytes. This is
the table in docs/cuda.md ("Every op, profiled without a GPU").
"""
import argparse
import json
import shlex
import subprocess
import sys

OPS = ["fusion.dflare", "fusion.dflash", "attention.kvproj", "attention.decode", "attention.train",
       "loss"]


def ratio(t):
    if not t or not t["requests"]:
        return "-"
    return f"{t['units'] / t['requests']:.2f} ({t['ideal'] / t['requests']:.2f})"


def us(s):
    return f"{s * 1e6:.1f} us" if s < 1e-3 else f"{s * 1e3:.2f} ms"


def predicted(p):
    """A prediction as "12.3 us dram", or "none" where the config cannot run on the device
    (inspect's JSON has null there)."""
    return f"{us(p['seconds'])} {p['bound']}" if p else "none"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--flaretune", default="build/flaretune")
    ap.add_argument("--device", default="h200")
    ap.add_argument("--attr", action="append", default=[])
    ap.add_argument("ops", nargs="*")
    a = ap.parse_args()
    print("| op | kernel | launches | global ld sectors/req (ideal) | global st sectors/req (ideal) "
          "| shared ld / st wavefronts/req (ideal) | SASS hot loop: ins/B, ins/mem | predicted "
          f"({a.device}) |")
    print("|---|---|---|---|---|---|---|---|")
    fail = 0
    for spec in a.ops or OPS:
        op, _, extra = spec.partition(":")
        given = shlex.split(extra)  # an option given here replaces the default (each is taken once)
        # the options it names, as getopt reads them: --name, --name=value, or a prefix of one
        names = [w.split("=", 1)[0] for w in given if w.startswith("--")]
        args = ["inspect", op, "--json"]
        for opt, default in (("--sites", "0"), ("--device", a.device), ("--blocks", "0")):
            if not any(len(n) > 2 and opt.startswith(n) for n in names):
                args += [opt, default]
        for x in a.attr:
            args += ["--attr", x]
        args += given
        p = subprocess.run([a.flaretune, *args], capture_output=True, text=True)
        if p.returncode != 0:
            print(f"| {op} | failed: {p.stderr.strip()[:120]} |||||||")
            fail = 1
            continue
        d = json.loads(p.stdout)
        share = d["unique_bytes"] / d["napkin_bytes"] if d["napkin_bytes"] else 0
        head = (f"{op} `{d['config']}`: distinct bytes {100 * share:.0f}% of napkin, "
                f"predicted {predicted(d['predicted'])}")
        if d.get("unfit"):
            head += f"; cannot run on {d['device']}: {d['unfit']}"
        print(f"| {head} |||||||")
        for k in d["kernels"]:
            pr = k["predicted"]
            if "gemm" in k:
                g = k["gemm"]
                print(f"| | {k['kernel']} (cuBLASLt, {'bf16' if g['bf16'] else 'f32'}) | "
                      f"{k['launches']} | | | | | {predicted(pr)} |")
                continue
            tr = k["traffic"]
            dev = k.get("device") or {}
            sass = dev.get("sass") or {}
            hot = sass.get("hot_loop") or sass
            ipb = hot.get("instructions_per_global_byte") if hot else None
            ipm = dev.get("instructions_per_memory_instruction")
            ins = (f"{'-' if ipb is None else f'{ipb:.2f}'}, "
                   f"{'-' if not ipm else f'{ipm:.2f}'}") if sass else "-"
            print(f"| | {k['kernel']} | {k['launches']} | {ratio(tr['global_load'])} | "
                  f"{ratio(tr['global_store'])} | {ratio(tr['shared_load'])} / "
                  f"{ratio(tr['shared_store'])} | {ins} | {predicted(pr)} |")
    return fail


if __name__ == "__main__":
    sys.exit(main())
