#!/usr/bin/env python3
"""exec_vs_numpy.py: `flaretune exec` against the NumPy float64 implementation of SPEC.md.

    exec_vs_numpy.py --flaretune PATH [--backend ref] [--cases all|quick] [--keep]

For every op and a set of cases it writes seeded random float32 inputs (int32 for ctx_lens,
anchors, labels, pos; uint8 for keep, mask) as DIR/NAME.npy, runs

    PATH exec OP --in DIR --out OUTDIR [--attr NAME=VALUE]... --backend BACKEND

and requires ||out - ref|| / ||ref|| < 1e-5 for every output, ref computed in float64 from the
same float32 inputs by tests/spec_numpy.py (-inf entries of lse must sit where the reference has
them; an all-zero reference must be matched exactly). Then it runs the error cases: each must
exit non-zero with one non-empty line on stderr and leave OUTDIR empty. Last, the loss's
normalisation across an optimiser step (SPEC.md "One optimiser step over several calls"): a
batch split into calls with norm=none, numerators and denominators summed, then divided, must
give what one call over every row gives.

One line per case; exit 0 when all pass, 1 on any failure, 77 when NumPy is missing.
"""

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time

try:
    import numpy as np
except ImportError:
    print("exec_vs_numpy: NumPy is not available for %s: skipped (Debian: apt-get install "
          "python3-numpy)" % sys.executable)
    sys.exit(77)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import spec_numpy as spec  # noqa: E402

TOL = 1e-5
INT32_INPUTS = ("ctx_lens", "anchors", "labels", "pos")
UINT8_INPUTS = ("keep", "mask")
RUN_TIMEOUT_S = 120


# ---- input generation ------------------------------------------------------------------------

def f32(a):
    return np.asarray(a, dtype=np.float32)


def gen_fusion_dflare(rng, n=24, t=4, h=64, d=3, backward=False):
    # Reference initialisation (w[i, min(T-1, floor(i*T/D))] = 2) plus noise so that every
    # entry of the softmax Jacobian matters.
    w = 0.3 * rng.standard_normal((d, t))
    for i in range(d):
        w[i, min(t - 1, (i * t) // d)] += 2.0
    inp = {"x": f32(rng.standard_normal((n, t, h))), "w": f32(w),
           "g": f32(1.0 + 0.1 * rng.standard_normal(h))}
    if backward:
        inp["df"] = f32(rng.standard_normal((d, n, h)))
    return inp


def gen_fusion_dflash(rng, n=24, t=4, h=64, backward=False):
    inp = {"x": f32(rng.standard_normal((n, t, h))),
           "w_fc": f32(rng.standard_normal((h, t * h)) / np.sqrt(t * h)),
           "g": f32(1.0 + 0.1 * rng.standard_normal(h))}
    if backward:
        inp["df"] = f32(rng.standard_normal((n, h)))
    return inp


def gen_linear(rng, m=24, n=40, k=64, backward=False):
    inp = {"x": f32(rng.standard_normal((m, k))),
           "w": f32(rng.standard_normal((n, k)) / np.sqrt(k))}
    if backward:
        inp["dy"] = f32(rng.standard_normal((m, n)))
    return inp


def gen_kvproj(rng, dc=3, d=3, n=24, h=64, hkv=2, dh=16, max_pos=4096, backward=False):
    inp = {"c": f32(rng.standard_normal((dc, n, h))),
           "w_k": f32(rng.standard_normal((d, hkv * dh, h)) / np.sqrt(h)),
           "w_v": f32(rng.standard_normal((d, hkv * dh, h)) / np.sqrt(h)),
           "gk": f32(1.0 + 0.1 * rng.standard_normal((d, dh))),
           "pos": rng.integers(0, max_pos, n).astype(np.int32)}
    if backward:
        inp["dk"] = f32(rng.standard_normal((d, n, hkv, dh)))
        inp["dv"] = f32(rng.standard_normal((d, n, hkv, dh)))
    return inp


def gen_decode(rng, ctx_lens=(0, 7, 33, 1), b=4, hq=4, hkv=2, dh=16):
    lens = np.asarray(ctx_lens, dtype=np.int32)
    r, tot = len(lens), int(lens.sum())
    return {"q": f32(rng.standard_normal((r, b, hq, dh))), "ctx_lens": lens,
            "k_ctx": f32(rng.standard_normal((tot, hkv, dh))),
            "v_ctx": f32(rng.standard_normal((tot, hkv, dh))),
            "k_blk": f32(rng.standard_normal((r, b, hkv, dh))),
            "v_blk": f32(rng.standard_normal((r, b, hkv, dh)))}


def gen_train(rng, nseq=2, nb=3, b=4, hq=4, hkv=2, dh=16, s=40, anchors=None, keep=None,
              backward=False):
    if anchors is None:
        anchors = rng.integers(1, s, (nseq, nb))
    if keep is None:
        keep = np.ones((nseq, nb))
    inp = {"q": f32(rng.standard_normal((nseq, nb, b, hq, dh))),
           "k_ctx": f32(rng.standard_normal((nseq, s, hkv, dh))),
           "v_ctx": f32(rng.standard_normal((nseq, s, hkv, dh))),
           "k_blk": f32(rng.standard_normal((nseq, nb, b, hkv, dh))),
           "v_blk": f32(rng.standard_normal((nseq, nb, b, hkv, dh))),
           "anchors": np.asarray(anchors, dtype=np.int32),
           "keep": np.asarray(keep, dtype=np.uint8)}
    if backward:
        inp["do"] = f32(rng.standard_normal((nseq, nb, b, hq, dh)))
    return inp


def gen_loss(rng, b=4, nblk=8, h=64, v=300, mask_mode="mixed"):
    """mask_mode: 'mixed' (some rows masked, one block with nothing scored, anchors mask 1 and
    label -100 on every unscored row), 'all' (mask 1 everywhere, valid labels everywhere),
    'none' (nothing scored)."""
    m = b * nblk
    hh = f32(rng.standard_normal((m, h)))
    w_lm = f32(3.0 * rng.standard_normal((v, h)) / np.sqrt(h))
    z = hh.astype(np.float64) @ w_lm.astype(np.float64).T
    # Half the labels are the draft's argmax, so q spans near 0 to near 1 and the D-PACE
    # products are not all negligible.
    labels = np.where(rng.random(m) < 0.5, np.argmax(z, axis=1), rng.integers(0, v, m))
    kpos = np.arange(m) % b
    if mask_mode == "all":
        mask = np.ones(m)
    elif mask_mode == "none":
        mask = np.zeros(m)
        mask[kpos == 0] = 1                      # anchors say 1 and are still not scored
    else:
        mask = (rng.random(m) < 0.8).astype(np.float64)
        mask[kpos == 0] = 1
        blk = 1 if nblk > 1 else 0
        mask[blk * b + 1:(blk + 1) * b] = 0      # a block with nothing scored
    if mask_mode != "all":
        labels = np.where((mask != 0) & (kpos > 0), labels, -100)
    return {"h": hh, "w_lm": w_lm, "labels": labels.astype(np.int32),
            "mask": mask.astype(np.uint8)}


def with_norm_gain(rng, inp):
    """A loss case's inputs for final_norm = 1: h un-normed (a scale far from 1, so the norm
    matters) and the final RMSNorm's gain g_norm near 1."""
    h = inp["h"].shape[1]
    return dict(inp, h=f32(2.5 * inp["h"]), g_norm=f32(1 + 0.2 * rng.standard_normal(h)))


# ---- cases -----------------------------------------------------------------------------------

def build_cases(rng):
    """[(op, attrs, inputs, quick, note)]; attrs in the order they are passed, note says what
    the inputs have that the attributes do not show."""
    c = []

    def add(op, attrs, inputs, quick=False, note=""):
        c.append((op, attrs, inputs, quick, note))

    add("fusion.dflare", {}, gen_fusion_dflare(rng), True)
    add("fusion.dflare", {"eps": 1e-2}, gen_fusion_dflare(rng))
    add("fusion.dflare", {"backward": 1}, gen_fusion_dflare(rng, backward=True), True)
    add("fusion.dflare", {"backward": 1, "eps": 1e-2},
        gen_fusion_dflare(rng, d=5, t=3, backward=True), note="D 5 > T 3")
    add("fusion.dflare", {"backward": 1, "want_dx": 0}, gen_fusion_dflare(rng, backward=True),
        True, "no dx.npy")

    add("fusion.dflash", {}, gen_fusion_dflash(rng), True)
    add("fusion.dflash", {"eps": 1e-2}, gen_fusion_dflash(rng))
    add("fusion.dflash", {"backward": 1}, gen_fusion_dflash(rng, backward=True), True)
    add("fusion.dflash", {"backward": 1, "eps": 1e-2}, gen_fusion_dflash(rng, t=3, backward=True),
        note="T 3")
    add("fusion.dflash", {"backward": 1, "want_dx": 0}, gen_fusion_dflash(rng, backward=True),
        True, "no dx.npy")

    add("linear", {}, gen_linear(rng), True)
    add("linear", {"backward": 1}, gen_linear(rng, backward=True), True)
    add("linear", {"backward": 1}, gen_linear(rng, m=1, n=3, k=5, backward=True), note="M 1")
    add("linear", {"backward": 1, "grad_only": 1}, gen_linear(rng, backward=True), True)

    add("attention.kvproj", {}, gen_kvproj(rng, dc=3), True, "Dc = D = 3")
    add("attention.kvproj", {}, gen_kvproj(rng, dc=1), True, "Dc = 1")
    add("attention.kvproj", {"rope_theta": 1e4, "eps": 1e-3}, gen_kvproj(rng, dc=3), note="Dc = D")
    add("attention.kvproj", {}, gen_kvproj(rng, dc=1, d=2, hkv=4, dh=8, max_pos=32768),
        note="Dc = 1, Hkv 4, dh 8, pos < 32768")
    add("attention.kvproj", {"backward": 1}, gen_kvproj(rng, dc=3, backward=True), True,
        "Dc = D = 3")
    add("attention.kvproj", {"backward": 1}, gen_kvproj(rng, dc=1, backward=True), True,
        "Dc = 1: dc sums the layers")
    add("attention.kvproj", {"backward": 1, "rope_theta": 1e4, "eps": 1e-3},
        gen_kvproj(rng, dc=1, d=2, hkv=4, dh=8, max_pos=32768, backward=True),
        note="Dc = 1, Hkv 4, dh 8, pos < 32768")
    # RoPE scaled as the public targets do (Llama 3.1: llama3; gpt-oss: yarn with its attention
    # factor, truncate off), at dh 16 where every band and YaRN's ramp have dims, and long
    # positions (the scalings are for contexts past the pretrained length)
    llama31 = {"rope_theta": 500000.0, "rope_scaling": "llama3", "rope_factor": 8.0,
               "rope_low_freq_factor": 1.0, "rope_high_freq_factor": 4.0,
               "rope_original_max_pos": 8192.0}
    gpt_oss = {"rope_theta": 150000.0, "rope_scaling": "yarn", "rope_factor": 32.0,
               "rope_beta_fast": 32.0, "rope_beta_slow": 1.0, "rope_original_max_pos": 4096.0,
               "rope_truncate": 0}
    add("attention.kvproj", llama31, gen_kvproj(rng, dc=3, max_pos=65536), True,
        "Llama 3.1's RoPE, pos < 65536")
    add("attention.kvproj", gpt_oss, gen_kvproj(rng, dc=1, max_pos=65536), True,
        "gpt-oss's RoPE, pos < 65536")
    add("attention.kvproj", {"rope_scaling": "yarn", "rope_factor": 4.0, "rope_truncate": 1},
        gen_kvproj(rng, dc=1, d=2, hkv=4, dh=8), note="yarn at theta 1e6, truncate on, dh 8")
    add("attention.kvproj", dict(gpt_oss, backward=1),
        gen_kvproj(rng, dc=1, max_pos=65536, backward=True), True,
        "gpt-oss's RoPE, the backward")

    add("attention.decode", {}, gen_decode(rng), True, "ctx_lens 0,7,33,1")
    add("attention.decode", {"scale": 0.1}, gen_decode(rng, ctx_lens=(12, 0, 5)),
        note="ctx_lens 12,0,5")
    add("attention.decode", {}, gen_decode(rng, ctx_lens=(0,)), note="ctx_lens 0 (block alone)")
    add("attention.decode", {}, gen_decode(rng, ctx_lens=(9, 20), hq=8, hkv=2),
        note="Hq 8 / Hkv 2")
    add("attention.decode", {}, gen_decode(rng, ctx_lens=(3, 17, 0), hq=2, hkv=2),
        note="Hq = Hkv")
    # sliding windows (SPEC.md "Sliding window"): one that cuts the longer contexts, one below B
    add("attention.decode", {"window": 9}, gen_decode(rng), True, "ctx_lens 0,7,33,1")
    add("attention.decode", {"window": 2}, gen_decode(rng, ctx_lens=(12, 0, 5)),
        note="ctx_lens 12,0,5: the last rows see no context")
    add("attention.decode", {"window": 9, "causal": 1}, gen_decode(rng), True,
        "ctx_lens 0,7,33,1, the block causal")

    edge_anchors = [[0, 17, 40], [40, 5, 0]]
    edge_keep = [[1, 1, 1], [1, 0, 1]]
    edge = "anchors 0 and S, a keep = 0 block"
    add("attention.train", {}, gen_train(rng), True, "nseq 2, NB 3, S 40")
    add("attention.train", {}, gen_train(rng, anchors=edge_anchors, keep=edge_keep), note=edge)
    add("attention.train", {"backward": 1}, gen_train(rng, backward=True), True)
    add("attention.train", {"backward": 1},
        gen_train(rng, anchors=edge_anchors, keep=edge_keep, backward=True), True, edge)
    add("attention.train", {"backward": 1, "scale": 0.35},
        gen_train(rng, anchors=edge_anchors, keep=edge_keep, backward=True), note=edge)
    add("attention.train", {"backward": 1},
        gen_train(rng, nseq=1, nb=4, hq=6, hkv=3, dh=8, s=24, backward=True,
                  anchors=[[24, 0, 11, 3]], keep=[[1, 1, 0, 1]]),
        note="Hq 6 / Hkv 3, dh 8, " + edge)
    add("attention.train", {"window": 9}, gen_train(rng, anchors=edge_anchors, keep=edge_keep),
        True, edge)
    add("attention.train", {"backward": 1, "window": 9},
        gen_train(rng, anchors=edge_anchors, keep=edge_keep, backward=True), True, edge)
    add("attention.train", {"backward": 1, "window": 3},
        gen_train(rng, nseq=1, nb=4, hq=6, hkv=3, dh=8, s=24, backward=True,
                  anchors=[[24, 0, 11, 3]], keep=[[1, 1, 0, 1]]),
        note="window 3 < B, Hq 6 / Hkv 3, " + edge)
    add("attention.train", {"backward": 1, "window": 9, "causal": 1},
        gen_train(rng, anchors=edge_anchors, keep=edge_keep, backward=True), True,
        "the block causal, " + edge)
    add("attention.train", {"backward": 1, "causal": 1}, gen_train(rng, backward=True),
        note="the block causal, no window")

    # loss: every scheme with its default denominator
    for scheme, extra, dw, quick in (
            ("uniform", {}, 0, False),
            ("decay", {}, 1, True),
            ("progressive", {"gamma0": 1, "gamma_max": 7, "step": 50, "warmup_steps": 200}, 0,
             False),
            ("dpace", {}, 1, True),
            ("dpace_cum", {}, 0, False),
            ("dpace_cont", {}, 1, False)):
        attrs = {"B": 4, "scheme": scheme}
        attrs.update(extra)
        attrs["want_dw"] = dw
        add("loss", attrs, gen_loss(rng), quick, "masked rows, an unscored block")
    # every norm override, on a fixed-denominator and a weight-sum scheme
    for scheme in ("decay", "dpace"):
        for norm in ("weight_sum", "count", "num_seqs", "none", "default"):
            attrs = {"B": 4, "scheme": scheme, "norm": norm, "want_dw": 1}
            if norm == "num_seqs":
                attrs["num_seqs"] = 3
            add("loss", attrs, gen_loss(rng))
    # attribute variants
    add("loss", {"B": 4, "scheme": "progressive", "gamma0": 2, "gamma_max": 5, "step": 500,
                 "warmup_steps": 200}, gen_loss(rng))
    add("loss", {"B": 4, "scheme": "progressive", "gamma0": 1, "gamma_max": 4, "step": 10,
                 "warmup_steps": 0}, gen_loss(rng))
    add("loss", {"B": 4, "scheme": "progressive", "gamma0": 1.5, "gamma_max": 9, "step": 3,
                 "warmup_steps": 7}, gen_loss(rng))
    add("loss", {"B": 4, "gamma": 3}, gen_loss(rng))
    add("loss", {"B": 4, "scheme": "dpace", "alpha": 0.2, "num_seqs": 4, "want_dw": 1},
        gen_loss(rng))
    add("loss", {"B": 4, "scheme": "dpace_cont", "alpha": 0.8}, gen_loss(rng, mask_mode="all"),
        note="mask all 1")
    add("loss", {"want_dw": 1}, gen_loss(rng, b=16, nblk=3), note="B 16 by default, M 48")
    add("loss", {"B": 8, "scheme": "dpace", "want_dw": 1}, gen_loss(rng, b=8, nblk=4, v=257),
        note="V 257")
    # nothing scored anywhere: loss 0 and zero gradients, whatever the denominator
    for attrs in ({"B": 4, "want_dw": 1}, {"B": 4, "scheme": "uniform", "norm": "count"},
                  {"B": 4, "scheme": "dpace", "want_dw": 1},
                  {"B": 4, "scheme": "dpace_cont", "norm": "weight_sum", "want_dw": 1}):
        add("loss", attrs, gen_loss(rng, mask_mode="none"), attrs.get("scheme") == "dpace",
            "nothing scored")
    # progressive_epoch (AngelSlim's gamma + 0.5 per whole epoch) at a few epochs
    for ep in (0, 1.5, 9):
        add("loss", {"B": 4, "scheme": "progressive_epoch", "epoch": ep, "want_dw": 1},
            gen_loss(rng), ep == 9)
    add("loss", {"B": 4, "scheme": "progressive_epoch", "gamma": 3, "gamma_inc": 2, "epoch": 2},
        gen_loss(rng))
    # the drafter's final RMSNorm fused: dh through the norm, dg, dw_lm of the normed h
    for attrs, quick in (({"B": 4, "final_norm": 1, "want_dw": 1}, True),
                         ({"B": 4, "final_norm": 1, "scheme": "dpace", "norm": "weight_sum"},
                          False),
                         ({"B": 4, "final_norm": 1, "scheme": "progressive_epoch", "epoch": 3,
                           "eps": 1e-5}, False)):
        add("loss", attrs, with_norm_gain(rng, gen_loss(rng)), quick, "final norm")
    add("loss", {"B": 4, "final_norm": 1, "want_dw": 1},
        with_norm_gain(rng, gen_loss(rng, mask_mode="none")), True, "final norm, nothing scored")
    return c


# ---- running and comparing -------------------------------------------------------------------

def fmt_val(v):
    if isinstance(v, float):
        return repr(v)
    return str(v)


def attr_args(attrs):
    a = []
    for k, v in attrs.items():
        a += ["--attr", "%s=%s" % (k, fmt_val(v))]
    return a


def write_inputs(d, inputs):
    for name, arr in inputs.items():
        np.save(os.path.join(d, name + ".npy"), arr)


def run_exec(flaretune, op, indir, outdir, attrs, backend, extra=()):
    cmd = [flaretune, "exec", op, "--in", indir, "--out", outdir] + attr_args(attrs) + \
          list(extra) + ["--backend", backend]
    try:
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           timeout=RUN_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return cmd, None, "", "timed out after %d s" % RUN_TIMEOUT_S
    return (cmd, p.returncode, p.stdout.decode("utf-8", "replace"),
            p.stderr.decode("utf-8", "replace"))


def compare(name, out, ref):
    """(relative error, problem or None) of one output against its reference."""
    ref = np.asarray(ref, dtype=np.float64)
    if out.dtype != np.float32:
        return np.inf, "%s has dtype %s, expected float32" % (name, out.dtype)
    if out.shape != ref.shape:
        return np.inf, "%s has shape %s, expected %s" % (name, out.shape, ref.shape)
    o = out.astype(np.float64)
    if np.any(np.isnan(o)):
        return np.inf, "%s has NaN" % name
    ninf_ref = np.isneginf(ref)
    if np.any(ninf_ref != np.isneginf(o)):
        return np.inf, "%s: -inf at %d places, reference at %d (or elsewhere)" % (
            name, int(np.isneginf(o).sum()), int(ninf_ref.sum()))
    fin = ~ninf_ref
    o, r = o[fin], ref[fin]
    if not np.all(np.isfinite(o)):
        return np.inf, "%s has Inf where the reference is finite" % name
    nr = np.linalg.norm(r)
    err = np.linalg.norm(o - r)
    if nr == 0:
        # An all-zero reference (nothing scored) is a contract value, matched exactly.
        return err, (None if err == 0 else "%s should be exactly 0, |out| = %.3e" % (name, err))
    rel = err / nr
    return rel, (None if rel < TOL else "%s relative error %.3e >= %.0e" % (name, rel, TOL))


def exact_checks(op, inputs, outs):
    """Contract values that must hold exactly, beyond the norm-wise comparison."""
    probs = []
    if op == "loss" and all(k in outs for k in ("ce", "q", "w")):
        b = int(inputs["_B"])
        m = len(inputs["mask"])
        uns = ~((inputs["mask"] != 0) & (np.arange(m) % b > 0))
        if np.any(outs["ce"][uns] != 0) or np.any(outs["w"][uns] != 0) or \
                np.any(outs["q"][uns] != 1):
            probs.append("unscored rows need ce = 0, w = 0, q = 1 exactly")
    if op == "attention.train":
        dead = np.asarray(inputs["keep"]) == 0
        if np.any(dead):
            if "o" in outs and np.any(outs["o"][dead] != 0):
                probs.append("keep = 0 block has o != 0")
            for g in ("dq", "dk_blk", "dv_blk"):
                if g in outs and np.any(outs[g][dead] != 0):
                    probs.append("keep = 0 block has %s != 0" % g)
    return probs


def case_dirs(tmp, name, inputs):
    """tmp/name/in holding the inputs and an empty tmp/name/out: (in, out)."""
    indir, outdir = os.path.join(tmp, name, "in"), os.path.join(tmp, name, "out")
    os.makedirs(indir)
    os.makedirs(outdir)
    write_inputs(indir, inputs)
    return indir, outdir


def run_case(args, tmp, idx, op, attrs, inputs, note):
    indir, outdir = case_dirs(tmp, "case%03d" % idx, inputs)
    ref = spec.run_op(op, inputs, attrs)
    _, out_names = spec.op_io(op, attrs)
    cmd, rc, _, err = run_exec(args.flaretune, op, indir, outdir, attrs, args.backend)
    label = "%-16s %s" % (op, " ".join("%s=%s" % (k, fmt_val(v)) for k, v in attrs.items())
                          or "(defaults)")
    if note:
        label += " [%s]" % note
    probs, errs = [], []
    if rc != 0:
        probs.append("exit %s: %s" % (rc, err.strip().replace("\n", " | ")[:300]))
    else:
        outs = {}
        for name in out_names:
            path = os.path.join(outdir, name + ".npy")
            if not os.path.exists(path):
                probs.append("%s.npy not written" % name)
                continue
            try:
                outs[name] = np.load(path, allow_pickle=False)
            except Exception as e:  # noqa: BLE001 -- any unreadable file is a failure
                probs.append("%s.npy unreadable: %s" % (name, e))
                continue
            e, prob = compare(name, outs[name], ref[name])
            errs.append((name, e))
            if prob:
                probs.append(prob)
        extra = sorted(set(os.listdir(outdir)) - {n + ".npy" for n in out_names})
        if extra:
            probs.append("unexpected files in OUTDIR: %s" % " ".join(extra))
        probs += exact_checks(op, dict(inputs, _B=attrs.get("B", 16)), outs)
    ok = not probs
    line = "%-4s %s  | %s" % ("ok" if ok else "FAIL", label,
                              " ".join("%s %.1e" % (n, e) for n, e in errs))
    print(line)
    if not ok:
        for p in probs:
            print("       %s" % p)
        print("       command: %s" % " ".join(cmd))
    return ok, errs


def error_cases(rng):
    """[(what, op, attrs, inputs)]: each must fail cleanly."""
    base = gen_fusion_dflare(rng, n=6, h=16)
    cases = []
    missing = dict(base)
    del missing["g"]
    cases.append(("missing input file g.npy", "fusion.dflare", {}, missing))
    bad = dict(base, g=f32(np.ones(17)))
    cases.append(("g of length H+1", "fusion.dflare", {}, bad))
    lo = gen_loss(rng, nblk=2, v=50)
    cases.append(("labels as float32", "loss", {"B": 4},
                  dict(lo, labels=lo["labels"].astype(np.float32))))
    cases.append(("unknown op", "fusion.bogus", {}, base))
    cases.append(("unknown attribute", "fusion.dflare", {"bogus_attr": 1}, base))
    cases.append(("bad attribute value scheme=bogus", "loss", {"B": 4, "scheme": "bogus"}, lo))
    cases.append(("backward=1 without df.npy", "fusion.dflare", {"backward": 1}, base))
    cases.append(("want_dx=0 without backward=1", "fusion.dflare", {"want_dx": 0}, base))
    cases.append(("M not a multiple of B", "loss", {"B": 3}, lo))
    # Inputs that would read out of bounds if taken at their word.
    dec = gen_decode(rng, ctx_lens=(3, 5))
    cases.append(("ctx_lens sum != k_ctx rows", "attention.decode", {},
                  dict(dec, ctx_lens=np.array([3, 6], dtype=np.int32))))
    tr = gen_train(rng, nseq=1, nb=2, s=8)
    cases.append(("anchor S+1", "attention.train", {},
                  dict(tr, anchors=np.array([[3, 9]], dtype=np.int32))))
    kv = gen_kvproj(rng, dc=1, d=1, n=4, h=8)
    cases.append(("rope_scaling=llama3 with high_freq_factor <= low_freq_factor",
                  "attention.kvproj", {"rope_scaling": "llama3", "rope_high_freq_factor": 1.0},
                  kv))
    cases.append(("rope_factor below 1", "attention.kvproj", {"rope_factor": 0.5}, kv))
    cases.append(("bad attribute value window=-1", "attention.train", {"window": -1}, tr))
    cases.append(("bad attribute value causal=2", "attention.decode", {"causal": 2}, dec))
    # Row 1 scored whatever the draw (the random mask may leave the two blocks unscored).
    lab, msk = lo["labels"].copy(), lo["mask"].copy()
    lab[1], msk[1] = 50, 1
    cases.append(("label V on a scored row", "loss", {"B": 4}, dict(lo, labels=lab, mask=msk)))
    cases.append(("final_norm=1 without g_norm.npy", "loss", {"B": 4, "final_norm": 1}, lo))
    cases.append(("g_norm of length H+1", "loss", {"B": 4, "final_norm": 1},
                  dict(lo, g_norm=f32(np.ones(lo["h"].shape[1] + 1)))))
    cases.append(("negative epoch", "loss", {"B": 4, "scheme": "progressive_epoch", "epoch": -1},
                  lo))
    return cases


def run_error_case(args, tmp, idx, what, op, attrs, inputs):
    indir, outdir = case_dirs(tmp, "err%03d" % idx, inputs)
    cmd, rc, _, err = run_exec(args.flaretune, op, indir, outdir, attrs, args.backend)
    probs = []
    if rc is None:
        probs.append(err)
    elif rc == 0:
        probs.append("exit status 0")
    elif rc < 0:
        probs.append("killed by signal %d" % -rc)
    lines = [ln for ln in err.splitlines() if ln.strip()]
    if rc is not None and len(lines) != 1:
        probs.append("stderr has %d non-empty lines, expected 1: %r" % (len(lines), err[:300]))
    left = os.listdir(outdir)
    if left:
        probs.append("OUTDIR not empty: %s" % " ".join(sorted(left)))
    ok = not probs
    print("%-4s error: %-34s (%s) rc=%s  %s" % ("ok" if ok else "FAIL", what, op, rc,
                                               lines[0][:120] if lines else ""))
    if not ok:
        for p in probs:
            print("       %s" % p)
        print("       command: %s" % " ".join(cmd))
    return ok


# ---- one optimiser step over several calls ----------------------------------------------------

def split_check(args, tmp, idx, attrs, inputs, denom_of, parts, note):
    """One call over every row against `parts` calls (whole blocks each) with norm=none, their
    loss numerators and denominators summed and the gradients divided by the total: SPEC.md's
    recipe. denom_of(outs, part_inputs) is a call's share of the denominator, read off its
    outputs and inputs as a caller would."""
    b = attrs["B"]
    full_dir = os.path.join(tmp, "split%03d" % idx)
    indir, outdir = os.path.join(full_dir, "in"), os.path.join(full_dir, "out")
    os.makedirs(indir)
    os.makedirs(outdir)
    write_inputs(indir, inputs)
    _, names = spec.op_io("loss", attrs)
    probs = []
    cmd, rc, _, err = run_exec(args.flaretune, "loss", indir, outdir, attrs, args.backend)
    if rc != 0:
        probs.append("one call: exit %s: %s" % (rc, err.strip()[:200]))
    one = {n: np.load(os.path.join(outdir, n + ".npy")) for n in names} if rc == 0 else {}
    m = len(inputs["mask"])
    cuts = [round(i * (m // b) / parts) * b for i in range(parts + 1)]
    num, den = 0.0, 0.0
    acc = {"dh": [], "dg": 0.0, "dw_lm": 0.0}
    part_attrs = dict(attrs, norm="none")
    for k in range(parts):
        lo, hi = cuts[k], cuts[k + 1]
        pin = dict(inputs, h=inputs["h"][lo:hi], labels=inputs["labels"][lo:hi],
                   mask=inputs["mask"][lo:hi])
        pdir = os.path.join(full_dir, "p%d" % k)
        pin_dir, pout_dir = os.path.join(pdir, "in"), os.path.join(pdir, "out")
        os.makedirs(pin_dir)
        os.makedirs(pout_dir)
        write_inputs(pin_dir, pin)
        cmd, rc, _, err = run_exec(args.flaretune, "loss", pin_dir, pout_dir, part_attrs,
                                   args.backend)
        if rc != 0:
            probs.append("call %d: exit %s: %s" % (k, rc, err.strip()[:200]))
            break
        o = {n: np.load(os.path.join(pout_dir, n + ".npy")).astype(np.float64) for n in names}
        num += float(o["loss"])              # norm=none: sum_m w[m] ce[m]
        den += denom_of(o, pin)
        acc["dh"].append(o["dh"])
        for g in ("dg", "dw_lm"):
            if g in o:
                acc[g] = acc[g] + o[g]
    errs = []
    if not probs:
        got = {"loss": np.array(num / den), "dh": np.concatenate(acc["dh"]) / den}
        for g in ("dg", "dw_lm"):
            if g in names:
                got[g] = acc[g] / den
        for n, v in got.items():
            e, prob = compare(n, f32(v), one[n])
            errs.append((n, e))
            if prob:
                probs.append(prob)
    ok = not probs
    label = "loss split in %d calls %s [%s]" % (
        parts, " ".join("%s=%s" % (k, fmt_val(v)) for k, v in attrs.items()), note)
    print("%-4s %s  | %s" % ("ok" if ok else "FAIL", label,
                             " ".join("%s %.1e" % (n, e) for n, e in errs)))
    for p in probs:
        print("       %s" % p)
    return ok


def split_cases(rng):
    """[(attrs, inputs, denom_of, parts, note)] for split_check: the weight_sum denominator
    (sum of each call's w), num_seqs (each call's own sequences) and count (each call's scored
    rows), with and without the final norm."""
    def w_sum(o, _):
        return float(np.sum(o["w"]))

    def scored(_, pin):
        b = 4
        return float(np.count_nonzero((pin["mask"] != 0) & (np.arange(len(pin["mask"])) % b > 0)))
    cases = []
    inp = gen_loss(rng, nblk=9)
    cases.append(({"B": 4, "scheme": "decay", "want_dw": 1}, inp, w_sum, 3,
                  "weight_sum: sum of w"))
    cases.append(({"B": 4, "scheme": "dpace", "norm": "weight_sum"}, inp, w_sum, 2,
                  "weight_sum of the D-PACE weights"))
    cases.append(({"B": 4, "scheme": "uniform", "norm": "count"}, inp, scored, 3,
                  "count: scored rows"))
    # D-PACE's num_seqs: 9 blocks as 3 sequences of 3 blocks, one sequence per call
    cases.append(({"B": 4, "scheme": "dpace", "num_seqs": 3, "want_dw": 1}, inp,
                  lambda o, pin: 1.0, 3, "num_seqs: one sequence per call"))
    cases.append(({"B": 4, "scheme": "decay", "final_norm": 1, "want_dw": 1},
                  with_norm_gain(rng, inp), w_sum, 3, "final norm, weight_sum"))
    return cases


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--flaretune", required=True, help="path of the flaretune executable")
    ap.add_argument("--backend", default="ref")
    ap.add_argument("--cases", choices=("all", "quick"), default="all")
    ap.add_argument("--keep", action="store_true", help="keep the case folders")
    args = ap.parse_args()
    args.flaretune = os.path.abspath(args.flaretune)
    if not os.access(args.flaretune, os.X_OK):
        print("exec_vs_numpy: %s is not an executable" % args.flaretune)
        return 1

    t0 = time.monotonic()
    rng = np.random.default_rng(20240607)
    cases = build_cases(rng)
    errs = error_cases(rng)
    if args.cases == "quick":
        cases = [c for c in cases if c[3]]
    tmp = tempfile.mkdtemp(prefix="exec_vs_numpy.")
    failed = 0
    worst = {}
    try:
        for i, (op, attrs, inputs, _, note) in enumerate(cases):
            ok, e = run_case(args, tmp, i, op, attrs, inputs, note)
            failed += not ok
            for name, v in e:
                worst[(op, name)] = max(worst.get((op, name), 0.0), v)
        for i, (what, op, attrs, inputs) in enumerate(errs):
            failed += not run_error_case(args, tmp, i, what, op, attrs, inputs)
        splits = split_cases(rng) if args.cases == "all" else split_cases(rng)[:1]
        for i, (attrs, inputs, denom_of, parts, note) in enumerate(splits):
            failed += not split_check(args, tmp, i, attrs, inputs, denom_of, parts, note)
    finally:
        if args.keep:
            print("case folders kept in %s" % tmp)
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    ops = []
    for op, _ in worst:
        if op not in ops:
            ops.append(op)
    print("worst relative error per output:")
    for op in ops:
        print("  %-16s %s" % (op, " ".join("%s %.1e" % (n, v) for (o, n), v in worst.items()
                                           if o == op)))
    total = len(cases) + len(errs) + len(splits)
    print("exec_vs_numpy: %d of %d cases passed (backend %s, %.1f s)" % (
        total - failed, total, args.backend, time.monotonic() - t0))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
