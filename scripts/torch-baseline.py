#!/usr/bin/env python3
"""torch-baseline.py: the PyTorch versions of flaretune's attention and loss ops, timed on the same
shapes, for gpu-check's comparison (SPEC.md is the math; this is what a trainer would write).

    torch-baseline.py decode --R 16 --L 4096 [--dtype bf16] [--json OUT]
    torch-baseline.py train  --S 3072 --NB 512 [--backward] ...
    torch-baseline.py loss   --M 8192 --V 151936 --scheme dpace ...

Each variant is timed with CUDA events (median of --reps after a warm-up) and its peak extra
memory read from torch.cuda.max_memory_allocated; the JSON has one record per variant:
{"variant", "median_s", "iqr_s", "samples", "peak_extra_bytes"} or {"variant", "error"}.

  decode: F.scaled_dot_product_attention over [context ; block] keys (concatenated, as a
          framework must), GQA by enable_gqa.
  train:  F.scaled_dot_product_attention with the dense boolean block mask, and flex_attention
          with the same mask as a BlockMask when this PyTorch has it; --backward adds the
          backward (dq, dk, dv from a random do).
  loss:   F.linear + F.cross_entropy(reduction="none") weighted per block position like SPEC.md
          (weights computed without gradient), backward for dh only (the LM head frozen), eager
          and torch.compile'd when compiling works.

Runs on the CPU too (--device cpu, host clock) so the math can be checked without a GPU.
"""
import argparse
import json
import math
import sys
import time

import torch
import torch.nn.functional as F


def timeit(fn, reps, device):
    """Median and IQR of `reps` calls after two warm-ups (CUDA events on a GPU)."""
    for _ in range(2):
        fn()
    if device == "cuda":
        torch.cuda.synchronize()
    xs = []
    for _ in range(reps):
        if device == "cuda":
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            fn()
            b.record()
            b.synchronize()
            xs.append(a.elapsed_time(b) * 1e-3)
        else:
            t0 = time.perf_counter()
            fn()
            xs.append(time.perf_counter() - t0)
    xs.sort()
    q = lambda f: xs[min(len(xs) - 1, int(f * (len(xs) - 1) + 0.5))]
    return q(0.5), q(0.75) - q(0.25), len(xs)


def measure(name, fn, reps, device, base_bytes):
    rec = {"variant": name}
    try:
        if device == "cuda":
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
        med, iqr, n = timeit(fn, reps, device)
        rec.update(median_s=med, iqr_s=iqr, samples=n)
        if device == "cuda":
            rec["peak_extra_bytes"] = torch.cuda.max_memory_allocated() - base_bytes
    except Exception as e:  # a variant this PyTorch or device cannot run: say why, go on
        rec["error"] = f"{type(e).__name__}: {e}"[:300]
    return rec


def decode(a, dt, dev):
    R, B, Hq, Hkv, dh, L = a.R, a.B, a.Hq, a.Hkv, a.dh, a.L
    g = torch.Generator(device=dev).manual_seed(1)
    rn = lambda *s: torch.randn(*s, device=dev, dtype=dt, generator=g)
    q, kc, vc = rn(R, Hq, B, dh), rn(R, Hkv, L, dh), rn(R, Hkv, L, dh)
    kb, vb = rn(R, Hkv, B, dh), rn(R, Hkv, B, dh)
    base = torch.cuda.memory_allocated() if dev == "cuda" else 0

    def run():
        k = torch.cat([kc, kb], dim=2)
        v = torch.cat([vc, vb], dim=2)
        return F.scaled_dot_product_attention(q, k, v, enable_gqa=True)

    return [measure("sdpa (concatenated K/V)", run, a.reps, dev, base)]


def train_mask(S, NB, B, dev, g):
    """[NB*B, S + NB*B] booleans: block j sees context < anchor_j and its own B keys."""
    anchors = torch.sort(torch.randint(0, S + 1, (NB,), device=dev, generator=g)).values
    qb = torch.arange(NB * B, device=dev) // B
    kpos = torch.arange(S + NB * B, device=dev)
    ctx = (kpos[None, :] < S) & (kpos[None, :] < anchors[qb][:, None])
    own = (kpos[None, :] >= S) & ((kpos[None, :] - S) // B == qb[:, None])
    return ctx | own, anchors


def train(a, dt, dev):
    S, NB, B, Hq, Hkv, dh = a.S, a.NB, a.B, a.Hq, a.Hkv, a.dh
    g = torch.Generator(device=dev).manual_seed(1)
    mask, anchors = train_mask(S, NB, B, dev, g)
    Q, K = NB * B, S + NB * B
    rn = lambda *s: torch.randn(*s, device=dev, dtype=dt, generator=g).requires_grad_(a.backward)
    q, k, v = rn(1, Hq, Q, dh), rn(1, Hkv, K, dh), rn(1, Hkv, K, dh)
    do = torch.randn(1, Hq, Q, dh, device=dev, dtype=dt, generator=g)
    base = torch.cuda.memory_allocated() if dev == "cuda" else 0

    def step(fwd):
        def run():
            o = fwd()
            if a.backward:
                torch.autograd.backward(o, do)
                q.grad = k.grad = v.grad = None
            return o
        return run

    out = [measure("sdpa (dense block mask)", step(lambda: F.scaled_dot_product_attention(
        q, k, v, attn_mask=mask[None, None], enable_gqa=True)), a.reps, dev, base)]
    try:
        from torch.nn.attention.flex_attention import create_block_mask, flex_attention
    except ImportError:
        out.append({"variant": "flex_attention", "error": "not in this PyTorch"})
        return out
    qb = torch.arange(Q, device=dev) // B

    def mod(b, h, qi, ki):
        return ((ki < S) & (ki < anchors[qb[qi]])) | ((ki >= S) & ((ki - S) // B == qb[qi]))

    try:
        bm = create_block_mask(mod, 1, None, Q, K, device=dev)
        flex = torch.compile(flex_attention) if dev == "cuda" else flex_attention
        out.append(measure("flex_attention (block mask)", step(
            lambda: flex(q, k, v, block_mask=bm, enable_gqa=True)), a.reps, dev, base))
    except Exception as e:
        out.append({"variant": "flex_attention (block mask)", "error": f"{type(e).__name__}: {e}"[:300]})
    return out


def loss_weights(q, mask, B, scheme, gamma, alpha):
    """Per-row weights [M] of SPEC.md's table (no gradient); q, mask are [M]."""
    m = mask.view(-1, B).clone()
    m[:, 0] = False
    mf = m.float()
    k = torch.arange(B, device=q.device, dtype=torch.float32)
    if scheme in ("uniform",):
        return mf.view(-1)
    if scheme == "decay":
        return (mf * torch.exp(-(k - 1) / gamma)).view(-1)
    s = torch.where(m, (1 - alpha) * q.view(-1, B) + alpha, torch.ones_like(mf))
    P = torch.cumprod(torch.cat([torch.ones_like(s[:, :1]), s[:, 1:]], dim=1), dim=1)
    tail = torch.flip(torch.cumsum(torch.flip(P * mf, [1]), 1), [1])
    if scheme == "dpace":
        return (mf * tail).view(-1)
    if scheme == "dpace_cum":
        return (mf * P).view(-1)
    return (mf * tail / P).view(-1)  # dpace_cont


def loss(a, dt, dev):
    M, H, V, B = a.M, a.H, a.V, a.B
    g = torch.Generator(device=dev).manual_seed(1)
    h = (torch.randn(M, H, device=dev, dtype=dt, generator=g) * 0.5).requires_grad_(True)
    w = torch.randn(V, H, device=dev, dtype=dt, generator=g) / math.sqrt(H)
    labels = torch.randint(0, V, (M,), device=dev, generator=g)
    mask = torch.ones(M, dtype=torch.bool, device=dev)
    denom_dpace = 1.0  # num_seqs
    base = torch.cuda.memory_allocated() if dev == "cuda" else 0

    def fwd_bwd():
        z = F.linear(h, w).float()
        ce = F.cross_entropy(z, labels, reduction="none")
        with torch.no_grad():
            wt = loss_weights(torch.exp(-ce), mask, B, a.scheme, 7.0, 0.5)
            denom = denom_dpace if a.scheme.startswith("dpace") else wt.sum().clamp_min(1e-30)
        lo = (wt * ce).sum() / denom
        lo.backward()
        h.grad = None
        return lo

    out = [measure("eager F.linear + F.cross_entropy", fwd_bwd, a.reps, dev, base)]
    if dev == "cuda":
        try:
            comp = torch.compile(fwd_bwd)
            out.append(measure("torch.compile", comp, a.reps, dev, base))
        except Exception as e:
            out.append({"variant": "torch.compile", "error": f"{type(e).__name__}: {e}"[:300]})
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("op", choices=["decode", "train", "loss"])
    ap.add_argument("--dtype", default="bf16", choices=["bf16", "f32"])
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--json")
    for n, d in (("R", 16), ("L", 4096), ("B", 16), ("Hq", 32), ("Hkv", 8), ("dh", 128),
                 ("S", 3072), ("NB", 512), ("M", 8192), ("H", 4096), ("V", 151936)):
        ap.add_argument(f"--{n}", type=int, default=d)
    ap.add_argument("--backward", action="store_true")
    ap.add_argument("--scheme", default="dpace",
                    choices=["uniform", "decay", "dpace", "dpace_cum", "dpace_cont"])
    a = ap.parse_args()
    dt = torch.bfloat16 if a.dtype == "bf16" else torch.float32
    recs = {"decode": decode, "train": train, "loss": loss}[a.op](a, dt, a.device)
    doc = {"op": a.op, "device": a.device, "torch": torch.__version__,
           "args": {k: v for k, v in vars(a).items() if k not in ("json",)}, "variants": recs}
    text = json.dumps(doc, indent=1)
    if a.json:
        with open(a.json, "w") as f:
            f.write(text)
    for r in recs:
        if "error" in r:
            print(f"{a.op:7s} {r['variant']:36s} failed: {r['error']}")
        else:
            print(f"{a.op:7s} {r['variant']:36s} {r['median_s']*1e3:9.3f} ms (IQR "
                  f"{r['iqr_s']*1e3:.3f}, n={r['samples']})"
                  + (f", {r['peak_extra_bytes']/2**20:.0f} MiB extra" if "peak_extra_bytes" in r else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
