#!/usr/bin/env python3
"""spec_numpy.py: every op of SPEC.md in NumPy float64, forward and backward.

An implementation written straight from SPEC.md's formulas, independent of the C kernels, so
that `flaretune exec` can be checked against something that shares none of its code
(tests/exec_vs_numpy.py). Backward passes are hand-derived; `--self-test` checks them against
central finite differences and checks the vectorised forwards against plain loops.

Every op function takes float inputs as any array (converted to float64), int inputs as int
arrays, attributes as keyword arguments with SPEC.md's defaults, and returns a dict
{output name: float64 ndarray}. `run_op(op, inputs, attrs)` dispatches by op name with
attribute values given as numbers or strings.
"""

import sys

try:
    import numpy as np
except ImportError:
    if __name__ == "__main__":
        print("spec_numpy: NumPy is not available for %s: skipped (Debian: apt-get install "
              "python3-numpy)" % sys.executable)
        sys.exit(77)
    raise

EPS = 1e-6
ROPE_THETA = 1e6
LOSS_SCHEMES = ("uniform", "decay", "progressive", "dpace", "dpace_cum", "dpace_cont",
                "progressive_epoch")
LOSS_NORMS = ("default", "weight_sum", "count", "num_seqs", "none")


def _f64(a):
    return np.asarray(a, dtype=np.float64)


# ---- shared pieces ---------------------------------------------------------------------------

def softmax(a, axis=-1):
    m = np.max(a, axis=axis, keepdims=True)
    e = np.exp(a - m)
    return e / np.sum(e, axis=axis, keepdims=True)


def logsumexp(a, axis=-1):
    m = np.max(a, axis=axis, keepdims=True)
    return (m + np.log(np.sum(np.exp(a - m), axis=axis, keepdims=True))).squeeze(axis)


def rmsnorm_fwd(s, eps):
    """y = s / sqrt(mean(s^2) + eps) over the last axis; returns y and r = 1/sqrt(...)."""
    r = 1.0 / np.sqrt(np.mean(s * s, axis=-1, keepdims=True) + eps)
    return s * r, r


def rmsnorm_bwd(s, r, dy):
    """Gradient of y = s * r(s) with respect to s, given dy = dL/dy (last axis normalised).

    dr/ds_h = -r^3 s_h / n, so ds_h = r dy_h - r^3 s_h * sum_k(dy_k s_k) / n.
    """
    n = s.shape[-1]
    return r * dy - (r ** 3) * s * np.sum(dy * s, axis=-1, keepdims=True) / n


ROPE_SCALINGS = ("none", "llama3", "yarn")


def rope_freqs(dh, theta=ROPE_THETA, scaling="none", factor=1.0, low_freq_factor=1.0,
               high_freq_factor=4.0, original_max_pos=8192.0, beta_fast=32.0, beta_slow=1.0,
               truncate=1):
    """SPEC.md "RoPE scaling": (inv_freq [dh/2], mscale) for rope_scaling none, llama3, yarn.

    llama3 by the wavelength of each base frequency (kept under L/high, divided by the factor
    over L/low, a mix in L/wavelength between); yarn by the dim, a ramp between the dims that
    turn beta_fast and beta_slow times over L, and the attention factor 0.1 ln(factor) + 1."""
    m = np.arange(dh // 2, dtype=np.float64)
    base = np.power(float(theta), -2.0 * m / dh)
    if scaling == "none":
        return base, 1.0
    L, s = float(original_max_pos), float(factor)
    if scaling == "llama3":
        wavelen = 2.0 * np.pi / base
        mix = np.clip((L / wavelen - low_freq_factor) / (high_freq_factor - low_freq_factor),
                      0.0, 1.0)
        # mix is 1 on the short wavelengths (kept) and 0 on the long ones (divided); the clip
        # makes the three bands one expression
        return base * (mix + (1.0 - mix) / s), 1.0
    if scaling == "yarn":
        def dim_turning(turns):
            return dh * np.log(L / (2.0 * np.pi * turns)) / (2.0 * np.log(theta))
        lo, hi = dim_turning(beta_fast), dim_turning(beta_slow)
        if int(truncate):
            lo, hi = np.floor(lo), np.ceil(hi)
        lo, hi = max(lo, 0.0), min(hi, dh - 1.0)
        if hi == lo:
            hi = hi + 0.001
        ramp = np.clip((m - lo) / (hi - lo), 0.0, 1.0)   # 0: kept, 1: divided by the factor
        return base * (1.0 - ramp + ramp / s), (0.1 * np.log(s) + 1.0 if s > 1 else 1.0)
    raise ValueError("rope_scaling %r: one of %s" % (scaling, ", ".join(ROPE_SCALINGS)))


def rope(x, pos, inv_freq, mscale=1.0):
    """Rotate-half RoPE over the last axis (dh), pair m turned by pos * inv_freq[m] and scaled
    by mscale; pos broadcasts against x.shape[:-1]."""
    half = x.shape[-1] // 2
    ang = np.asarray(pos, dtype=np.float64)[..., None] * np.asarray(inv_freq, dtype=np.float64)
    cos, sin = mscale * np.cos(ang), mscale * np.sin(ang)
    x1, x2 = x[..., :half], x[..., half:]
    return np.concatenate([x1 * cos - x2 * sin, x2 * cos + x1 * sin], axis=-1)


# ---- fusion.dflare ---------------------------------------------------------------------------

def fusion_dflare(x, w, g, eps=EPS, df=None):
    """x [N,T,H], w [D,T], g [H] -> f [D,N,H]; with df also dx, dw, dg."""
    x, w, g = _f64(x), _f64(w), _f64(g)
    a = softmax(w, axis=1)                                # [D,T]
    s = np.einsum("it,nth->inh", a, x)                    # [D,N,H]
    y, r = rmsnorm_fwd(s, eps)
    out = {"f": y * g}
    if df is not None:
        df = _f64(df)
        out["dg"] = np.sum(df * y, axis=(0, 1))
        ds = rmsnorm_bwd(s, r, df * g)                    # [D,N,H]
        out["dx"] = np.einsum("it,inh->nth", a, ds)
        da = np.einsum("inh,nth->it", ds, x)              # dL/da
        out["dw"] = a * (da - np.sum(a * da, axis=1, keepdims=True))
    return out


# ---- fusion.dflash ---------------------------------------------------------------------------

def fusion_dflash(x, w_fc, g, eps=EPS, df=None):
    """x [N,T,H], w_fc [H,T*H], g [H] -> f [N,H]; with df also dx, dw_fc, dg."""
    x, w_fc, g = _f64(x), _f64(w_fc), _f64(g)
    n, t, h = x.shape
    xf = x.reshape(n, t * h)
    c = xf @ w_fc.T                                       # [N,H]
    y, r = rmsnorm_fwd(c, eps)
    out = {"f": y * g}
    if df is not None:
        df = _f64(df)
        out["dg"] = np.sum(df * y, axis=0)
        dc = rmsnorm_bwd(c, r, df * g)
        out["dx"] = (dc @ w_fc).reshape(n, t, h)
        out["dw_fc"] = dc.T @ xf
    return out


# ---- attention.kvproj ------------------------------------------------------------------------

def attention_kvproj(c, w_k, w_v, gk, pos, eps=EPS, rope_theta=ROPE_THETA, rope_scaling="none",
                     rope_factor=1.0, rope_low_freq_factor=1.0, rope_high_freq_factor=4.0,
                     rope_original_max_pos=8192.0, rope_beta_fast=32.0, rope_beta_slow=1.0,
                     rope_truncate=1, dk=None, dv=None):
    """c [Dc,N,H], w_k/w_v [D,Hkv*dh,H], gk [D,dh], pos [N] -> k, v [D,N,Hkv,dh]; with dk, dv
    [D,N,Hkv,dh] also dc [Dc,N,H] (Dc = 1: summed over the layers), dw_k, dw_v, dgk."""
    c, w_k, w_v, gk = _f64(c), _f64(w_k), _f64(w_v), _f64(gk)
    dc, n, _ = c.shape
    d, kvd, _ = w_k.shape
    dh = gk.shape[1]
    hkv = kvd // dh
    if dc not in (1, d):
        raise ValueError("c has Dc = %d, expected 1 or D = %d" % (dc, d))
    cc = np.broadcast_to(c, (d,) + c.shape[1:])          # layer i reads c[i] or c[0]
    kk = np.einsum("inh,ieh->ine", cc, w_k).reshape(d, n, hkv, dh)
    vv = np.einsum("inh,ieh->ine", cc, w_v).reshape(d, n, hkv, dh)
    kn, r = rmsnorm_fwd(kk, eps)
    pos_b = np.broadcast_to(np.asarray(pos)[None, :, None], (d, n, hkv))
    inv_freq, mscale = rope_freqs(dh, rope_theta, rope_scaling, rope_factor, rope_low_freq_factor,
                                  rope_high_freq_factor, rope_original_max_pos, rope_beta_fast,
                                  rope_beta_slow, rope_truncate)
    out = {"k": rope(kn * gk[:, None, None, :], pos_b, inv_freq, mscale), "v": vv}
    if dk is None:
        return out
    dk, dv = _f64(dk), _f64(dv)
    # A rotation's transpose is the rotation by the opposite angle: rope at -pos (and mscale
    # again: the forward's factor).
    dy = rope(dk, -np.asarray(pos_b, dtype=np.float64), inv_freq, mscale)
    out["dgk"] = np.sum(dy * kn, axis=(1, 2))
    du = rmsnorm_bwd(kk, r, dy * gk[:, None, None, :]).reshape(d, n, kvd)
    dvf = dv.reshape(d, n, kvd)
    dcl = np.einsum("ine,ieh->inh", du, w_k) + np.einsum("ine,ieh->inh", dvf, w_v)
    out["dc"] = dcl.sum(axis=0, keepdims=True) if dc == 1 else dcl
    out["dw_k"] = np.einsum("ine,inh->ieh", du, cc)
    out["dw_v"] = np.einsum("ine,inh->ieh", dvf, cc)
    return out


# ---- attention.decode ------------------------------------------------------------------------

def attention_decode(q, ctx_lens, k_ctx, v_ctx, k_blk, v_blk, scale=None, window=0, causal=0):
    """q [R,B,Hq,dh], ctx_lens [R], k_ctx/v_ctx [sum L,Hkv,dh], k_blk/v_blk [R,B,Hkv,dh].

    window W > 0: query b of request r sits at position L_r + b and sees only the context
    positions p with L_r + b - W < p (SPEC.md "Sliding window"); its block's keys stay visible
    (causal = 1: only the block's keys 0..b).
    """
    q, k_ctx, v_ctx, k_blk, v_blk = map(_f64, (q, k_ctx, v_ctx, k_blk, v_blk))
    nr, b, hq, dh = q.shape
    hkv = k_blk.shape[2]
    grp = hq // hkv
    if scale is None:
        scale = dh ** -0.5
    ctx_lens = np.asarray(ctx_lens, dtype=np.int64)
    offs = np.concatenate([[0], np.cumsum(ctx_lens)])
    o = np.empty_like(q)
    lse = np.empty((nr, b, hq))
    for r in range(nr):
        kr = np.concatenate([k_ctx[offs[r]:offs[r + 1]], k_blk[r]], axis=0)   # [L+B,Hkv,dh]
        vr = np.concatenate([v_ctx[offs[r]:offs[r + 1]], v_blk[r]], axis=0)
        qg = q[r].reshape(b, hkv, grp, dh)
        sc = scale * np.einsum("bkgd,pkd->bkgp", qg, kr)
        L = int(ctx_lens[r])
        pos = np.arange(L + b)                       # key t: context position t, then the block
        qpos = L + np.arange(b)
        blk_ok = (pos[None, :] - L <= np.arange(b)[:, None]) if causal else True
        vis = np.where(pos[None, :] >= L, blk_ok,
                       (window == 0) | (pos[None, :] > qpos[:, None] - window))
        sc = np.where(vis[:, None, None, :], sc, -np.inf)
        m = np.max(sc, axis=-1, keepdims=True)
        e = np.exp(sc - m)
        l = np.sum(e, axis=-1, keepdims=True)
        o[r] = np.einsum("bkgp,pkd->bkgd", e / l, vr).reshape(b, hq, dh)
        lse[r] = (m + np.log(l))[..., 0].reshape(b, hq)
    return {"o": o, "lse": lse}


# ---- attention.train -------------------------------------------------------------------------

def attention_train(q, k_ctx, v_ctx, k_blk, v_blk, anchors, keep, scale=None, do=None, window=0,
                    causal=0):
    """Block-sparse training attention (SPEC.md attention.train); with do also the gradients.

    Scores are laid out [nseq, NB, Hkv, G, B, S + B]: the S context keys (visible when
    p < anchor) then the block's own B keys; a keep = 0 block sees nothing. window W > 0: query
    b of a block sits at position anchor + b and also needs anchor + b - W < p. causal = 1: query
    b sees only its block's keys 0..b.
    """
    q, k_ctx, v_ctx, k_blk, v_blk = map(_f64, (q, k_ctx, v_ctx, k_blk, v_blk))
    ns, nb, b, hq, dh = q.shape
    s_len, hkv = k_ctx.shape[1], k_ctx.shape[2]
    grp = hq // hkv
    if scale is None:
        scale = dh ** -0.5
    anchors = np.asarray(anchors, dtype=np.int64)
    kept = np.asarray(keep) != 0

    qg = q.reshape(ns, nb, b, hkv, grp, dh)
    sc_c = scale * np.einsum("sjbkgd,spkd->sjkgbp", qg, k_ctx)
    sc_b = scale * np.einsum("sjbkgd,sjckd->sjkgbc", qg, k_blk)
    pos = np.arange(s_len)[None, None, None, :]                       # [1,1,1,S]
    qpos = anchors[..., None, None] + np.arange(b)[None, None, :, None]  # [ns,nb,B,1]
    vis_c = (pos < anchors[..., None, None]) & kept[..., None, None]
    if window:
        vis_c = vis_c & (pos > qpos - window)
    vis_c = np.broadcast_to(vis_c, (ns, nb, b, s_len))
    vis_b = np.broadcast_to(kept[..., None, None], (ns, nb, b, b))
    if causal:
        vis_b = vis_b & (np.arange(b)[None, :] <= np.arange(b)[:, None])[None, None]
    vis = np.concatenate([vis_c, vis_b], axis=-1)[:, :, None, None, :, :]
    sc = np.where(vis, np.concatenate([sc_c, sc_b], axis=-1), -np.inf)

    m = np.max(sc, axis=-1, keepdims=True)
    m = np.where(np.isfinite(m), m, 0.0)
    e = np.where(vis, np.exp(sc - m), 0.0)
    l = np.sum(e, axis=-1, keepdims=True)
    p = np.where(l > 0, e / np.where(l > 0, l, 1.0), 0.0)
    with np.errstate(divide="ignore"):
        lse = np.where(l > 0, m + np.log(l), -np.inf)[..., 0]          # [ns,nb,hkv,g,b]
    p_c, p_b = p[..., :s_len], p[..., s_len:]
    og = (np.einsum("sjkgbp,spkd->sjbkgd", p_c, v_ctx)
          + np.einsum("sjkgbc,sjckd->sjbkgd", p_b, v_blk))
    out = {"o": og.reshape(ns, nb, b, hq, dh),
           "lse": np.transpose(lse, (0, 1, 4, 2, 3)).reshape(ns, nb, b, hq)}
    if do is not None:
        dog = _f64(do).reshape(ns, nb, b, hkv, grp, dh)
        dp_c = np.einsum("sjbkgd,spkd->sjkgbp", dog, v_ctx)
        dp_b = np.einsum("sjbkgd,sjckd->sjkgbc", dog, v_blk)
        dsum = np.einsum("sjbkgd,sjbkgd->sjkgb", dog, og)[..., None]
        ds_c = p_c * (dp_c - dsum)
        ds_b = p_b * (dp_b - dsum)
        dq = (np.einsum("sjkgbp,spkd->sjbkgd", ds_c, k_ctx)
              + np.einsum("sjkgbc,sjckd->sjbkgd", ds_b, k_blk))
        out["dq"] = scale * dq.reshape(ns, nb, b, hq, dh)
        out["dk_ctx"] = scale * np.einsum("sjkgbp,sjbkgd->spkd", ds_c, qg)
        out["dk_blk"] = scale * np.einsum("sjkgbc,sjbkgd->sjckd", ds_b, qg)
        out["dv_ctx"] = np.einsum("sjkgbp,sjbkgd->spkd", p_c, dog)
        out["dv_blk"] = np.einsum("sjkgbc,sjbkgd->sjckd", p_b, dog)
    return out


# ---- loss ------------------------------------------------------------------------------------

def linear(x, w, dy=None):
    """SPEC.md linear: y = x @ w^T; with dy, dx = dy @ w and dw = dy^T @ x."""
    x, w = _f64(x), _f64(w)
    out = {"y": x @ w.T}
    if dy is not None:
        dy = _f64(dy)
        out["dx"] = dy @ w
        out["dw"] = dy.T @ x
    return out


def progressive_gamma(gamma0, gamma_max, step, warmup_steps):
    if warmup_steps <= 0:
        return float(gamma_max)
    return gamma0 + (gamma_max - gamma0) * min(1.0, step / warmup_steps)


def epoch_gamma(gamma, gamma_inc, epoch):
    """AngelSlim's per-epoch rise: gamma + gamma_inc per whole epoch, no cap."""
    return gamma + gamma_inc * np.floor(epoch)


def loss_weights(q, scored, b, scheme="decay", gamma=7.0, gamma0=1.0, gamma_max=7.0, step=0,
                 warmup_steps=0, alpha=0.5, gamma_inc=0.5, epoch=0.0):
    """Per-row weights w [M] (before the denominator) from q [M] and scored [M] (bool)."""
    q = _f64(q).reshape(-1, b)
    sm = np.asarray(scored, dtype=bool).reshape(-1, b)
    mk = sm.astype(np.float64)
    k = np.arange(b, dtype=np.float64)[None, :]
    if scheme == "uniform":
        w = mk
    elif scheme in ("decay", "progressive", "progressive_epoch"):
        if scheme == "decay":
            gm = gamma
        elif scheme == "progressive":
            gm = progressive_gamma(gamma0, gamma_max, step, warmup_steps)
        else:
            gm = epoch_gamma(gamma, gamma_inc, epoch)
        w = mk * np.exp(-(k - 1.0) / gm)
    elif scheme in ("dpace", "dpace_cum", "dpace_cont"):
        s = np.where(sm, (1.0 - alpha) * q + alpha, 1.0)
        pk = np.cumprod(s, axis=1)          # s_0 = 1 (k = 0 never scored): P_k = prod_{1..k}
        tail = np.cumsum((pk * mk)[:, ::-1], axis=1)[:, ::-1]     # sum_{m=k..B-1} P_m mask_m
        if scheme == "dpace":
            w = mk * tail
        elif scheme == "dpace_cum":
            w = mk * pk
        else:
            w = mk * tail / pk
    else:
        raise ValueError("unknown scheme %r" % (scheme,))
    return w.reshape(-1)


def loss_denominator(w, scored, scheme, norm="default", num_seqs=1):
    if norm == "default":
        norm = "num_seqs" if scheme.startswith("dpace") else "weight_sum"
    if norm == "weight_sum":
        return float(np.sum(w))
    if norm == "count":
        return float(np.count_nonzero(scored))
    if norm == "num_seqs":
        return float(num_seqs)
    if norm == "none":
        return 1.0
    raise ValueError("unknown norm %r" % (norm,))


def loss(h, w_lm, labels, mask, B=16, scheme="decay", gamma=7.0, gamma0=1.0, gamma_max=7.0,
         step=0, warmup_steps=0, alpha=0.5, num_seqs=1, norm="default", want_dw=0,
         weights=None, gamma_inc=0.5, epoch=0.0, final_norm=0, g_norm=None, eps=EPS):
    """LM head + weighted cross entropy with its backward (SPEC.md loss).

    `weights` replaces the computed w [M] (the self-test uses it to hold the weights constant
    while differentiating numerically, as the gradient formulas do). With final_norm, h is the
    un-normed final state: hn = rmsnorm(h) * g_norm feeds the head, dh and dg come back through
    the norm (rmsnorm_bwd, the same function the fusion ops use).
    """
    if int(final_norm):
        h = _f64(h)
        g = _f64(g_norm)
        y, r = rmsnorm_fwd(h, eps)
        out = loss(y * g, w_lm, labels, mask, B, scheme, gamma, gamma0, gamma_max, step,
                   warmup_steps, alpha, num_seqs, norm, want_dw, weights, gamma_inc, epoch)
        dhn = out["dh"]
        out["dg"] = np.sum(dhn * y, axis=0)
        out["dh"] = rmsnorm_bwd(h, r, dhn * g)
        return out
    h, w_lm = _f64(h), _f64(w_lm)
    m_rows = h.shape[0]
    if m_rows % B:
        raise ValueError("M = %d is not a multiple of B = %d" % (m_rows, B))
    kpos = np.arange(m_rows) % B
    scored = (np.asarray(mask) != 0) & (kpos > 0)
    lab = np.where(scored, np.asarray(labels, dtype=np.int64), 0)   # unscored labels unread
    rows = np.arange(m_rows)
    z = h @ w_lm.T                                                 # [M,V]
    lse = logsumexp(z, axis=1)
    ce = np.where(scored, lse - z[rows, lab], 0.0)
    q = np.exp(-ce)
    if weights is None:
        w = loss_weights(q, scored, B, scheme, gamma, gamma0, gamma_max, step, warmup_steps,
                         alpha, gamma_inc, epoch)
    else:
        w = _f64(weights)
    denom = loss_denominator(w, scored, scheme, norm, num_seqs)
    inv = 0.0 if denom == 0.0 else 1.0 / denom
    dz = np.exp(z - lse[:, None])
    dz[rows, lab] -= 1.0
    dz *= (w * inv)[:, None]             # w = 0 on unscored rows, so their dz is 0
    out = {"loss": np.array(np.sum(w * ce) * inv), "ce": ce, "q": q, "w": w,
           "dh": dz @ w_lm}
    if int(want_dw):
        out["dw_lm"] = dz.T @ h
    return out


# ---- dispatch --------------------------------------------------------------------------------

# op -> (float inputs, int inputs, outputs, attributes with their types)
OPS = {
    "fusion.dflare": (("x", "w", "g"), (), ("f",), {"eps": float, "backward": int,
                                                     "want_dx": int}),
    "fusion.dflash": (("x", "w_fc", "g"), (), ("f",), {"eps": float, "backward": int,
                                                       "want_dx": int}),
    "attention.kvproj": (("c", "w_k", "w_v", "gk"), ("pos",), ("k", "v"),
                         {"eps": float, "rope_theta": float, "rope_scaling": str,
                          "rope_factor": float, "rope_low_freq_factor": float,
                          "rope_high_freq_factor": float, "rope_original_max_pos": float,
                          "rope_beta_fast": float, "rope_beta_slow": float,
                          "rope_truncate": int, "backward": int}),
    "attention.decode": (("q", "k_ctx", "v_ctx", "k_blk", "v_blk"), ("ctx_lens",),
                         ("o", "lse"), {"scale": float, "window": int, "causal": int}),
    "attention.train": (("q", "k_ctx", "v_ctx", "k_blk", "v_blk"), ("anchors", "keep"),
                        ("o", "lse"), {"scale": float, "backward": int, "window": int,
                                       "causal": int}),
    "loss": (("h", "w_lm"), ("labels", "mask"), ("loss", "ce", "q", "w", "dh"),
             {"B": int, "scheme": str, "gamma": float, "gamma0": float, "gamma_max": float,
              "step": float, "warmup_steps": float, "alpha": float, "num_seqs": float,
              "norm": str, "want_dw": int, "gamma_inc": float, "epoch": float,
              "final_norm": int, "eps": float}),
    "linear": (("x", "w"), (), ("y",), {"backward": int, "grad_only": int}),
}

BACKWARD_OUTPUTS = {
    "fusion.dflare": ("df", ("dx", "dw", "dg")),
    "fusion.dflash": ("df", ("dx", "dw_fc", "dg")),
    "attention.train": ("do", ("dq", "dk_ctx", "dv_ctx", "dk_blk", "dv_blk")),
    "attention.kvproj": (("dk", "dv"), ("dc", "dw_k", "dw_v", "dgk")),
    "linear": ("dy", ("dx", "dw")),
}


def op_io(op, attrs=None):
    """(input names, output names) of op under attrs."""
    attrs = attrs or {}
    fin, iin, outs = OPS[op][:3]
    ins, outs = list(fin) + list(iin), list(outs)
    if op in BACKWARD_OUTPUTS and int(float(attrs.get("backward", 0))):
        grad_in = BACKWARD_OUTPUTS[op][0]      # one name, or a tuple of them
        ins += [grad_in] if isinstance(grad_in, str) else list(grad_in)
        outs += BACKWARD_OUTPUTS[op][1]
    if op == "loss" and int(float(attrs.get("want_dw", 0))):
        outs.append("dw_lm")
    if op == "loss" and int(float(attrs.get("final_norm", 0))):
        ins.append("g_norm")
        outs.append("dg")
    if op == "linear" and int(float(attrs.get("grad_only", 0))):
        outs.remove("y")
    # the fusions' x is the frozen target's in training: want_dx = 0 writes no dx
    if op.startswith("fusion.") and "dx" in outs and not int(float(attrs.get("want_dx", 1))):
        outs.remove("dx")
    return ins, outs


def run_op(op, inputs, attrs=None):
    """Reference outputs of op for inputs {name: array} and attrs {name: value}."""
    attrs = dict(attrs or {})
    types = OPS[op][3]
    kw = {}
    for name, val in attrs.items():
        kw[name] = types[name](val) if types[name] is not int else int(float(val))
    kw.pop("backward", None)             # op_io adds df/do to the inputs when it is set
    kw.pop("want_dx", None)              # and leaves dx out of the outputs when it is 0
    ins, _ = op_io(op, attrs)
    args = {n: inputs[n] for n in ins}
    if op == "fusion.dflare":
        return fusion_dflare(args["x"], args["w"], args["g"], df=args.get("df"), **kw)
    if op == "fusion.dflash":
        return fusion_dflash(args["x"], args["w_fc"], args["g"], df=args.get("df"), **kw)
    if op == "attention.kvproj":
        return attention_kvproj(**args, **kw)
    if op == "attention.decode":
        return attention_decode(**args, **kw)
    if op == "attention.train":
        return attention_train(**args, **kw)
    if op == "loss":
        return loss(**args, **kw)
    if op == "linear":
        out = linear(args["x"], args["w"], dy=args.get("dy"))
        if kw.get("grad_only"):
            del out["y"]
        return out
    raise ValueError("unknown op %r" % (op,))


# ---- self-test -------------------------------------------------------------------------------

def _rel(a, b):
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    nb = np.linalg.norm(b)
    return np.linalg.norm(a - b) / (nb if nb > 0 else 1.0)


def _fd_grad(fn, x, h=1e-6):
    """Central-difference gradient of scalar fn at x (every element)."""
    g = np.zeros_like(x)
    flat, gf = x.reshape(-1), g.reshape(-1)
    for i in range(flat.size):
        old = flat[i]
        flat[i] = old + h
        fp = fn()
        flat[i] = old - h
        fm = fn()
        flat[i] = old
        gf[i] = (fp - fm) / (2 * h)
    return g


class _Checker:
    def __init__(self):
        self.failed = 0

    def check(self, what, err, tol):
        ok = np.isfinite(err) and err < tol
        print("%-4s %-60s %.2e" % ("ok" if ok else "FAIL", what, err))
        if not ok:
            self.failed += 1


def _check_grads(ck, name, fwd, inputs, grad_names, out_key_grads, rng, tol=1e-6):
    """FD-check the gradients of L = sum_k <out_k, dout_k> with respect to named inputs."""
    base = fwd(inputs)
    douts = {k: rng.standard_normal(np.shape(base[k])) for k in out_key_grads}

    def scalar():
        o = fwd(inputs)
        return sum(float(np.sum(o[k] * douts[k])) for k in douts)

    grads = fwd(inputs, douts)
    for inp, gname in grad_names:
        num = _fd_grad(scalar, inputs[inp])
        ck.check("%s %s vs finite differences" % (name, gname),
                 _rel(grads[gname], num), tol)


def _naive_weights(q, scored, b, scheme, gamma, alpha):
    """SPEC.md's weight table, element by element."""
    nblk = len(q) // b
    w = np.zeros(len(q))
    for blk in range(nblk):
        mk = [bool(scored[blk * b + k]) for k in range(b)]
        s = [((1 - alpha) * q[blk * b + k] + alpha) if mk[k] else 1.0 for k in range(b)]
        pk = [float(np.prod(s[1:k + 1])) for k in range(b)]
        for k in range(1, b):
            if not mk[k]:
                continue
            tail = sum(pk[m] for m in range(k, b) if mk[m])
            w[blk * b + k] = {"uniform": 1.0, "decay": np.exp(-(k - 1) / gamma),
                              "dpace": tail, "dpace_cum": pk[k],
                              "dpace_cont": tail / pk[k]}[scheme]
    return w


def self_test():
    rng = np.random.default_rng(1234)
    ck = _Checker()
    rn = rng.standard_normal

    # fusion.dflare
    n, t, h, d = 3, 3, 5, 4
    inp = {"x": rn((n, t, h)), "w": rn((d, t)), "g": 1 + 0.1 * rn(h)}

    def fw_dflare(i, do=None):
        return fusion_dflare(i["x"], i["w"], i["g"], eps=1e-3,
                             df=None if do is None else do["f"])
    _check_grads(ck, "fusion.dflare", fw_dflare, inp, [("x", "dx"), ("w", "dw"), ("g", "dg")],
                 ["f"], rng)
    f = fw_dflare(inp)["f"]
    naive = np.zeros((d, n, h))
    for i in range(d):
        a = np.exp(inp["w"][i]) / np.sum(np.exp(inp["w"][i]))
        for j in range(n):
            s = sum(a[tt] * inp["x"][j, tt] for tt in range(t))
            naive[i, j] = s / np.sqrt(np.mean(s * s) + 1e-3) * inp["g"]
    ck.check("fusion.dflare forward vs loops", _rel(f, naive), 1e-13)

    # linear
    inp = {"x": rn((4, 6)), "w": rn((5, 6))}

    def fw_linear(i, do=None):
        return linear(i["x"], i["w"], dy=None if do is None else do["y"])
    _check_grads(ck, "linear", fw_linear, inp, [("x", "dx"), ("w", "dw")], ["y"], rng)
    naive = np.array([[sum(inp["x"][m, k] * inp["w"][o, k] for k in range(6)) for o in range(5)]
                      for m in range(4)])
    ck.check("linear forward vs loops", _rel(fw_linear(inp)["y"], naive), 1e-13)

    # fusion.dflash
    inp = {"x": rn((n, t, h)), "w_fc": rn((h, t * h)) / np.sqrt(t * h), "g": 1 + 0.1 * rn(h)}

    def fw_dflash(i, do=None):
        return fusion_dflash(i["x"], i["w_fc"], i["g"], eps=1e-4,
                             df=None if do is None else do["f"])
    _check_grads(ck, "fusion.dflash", fw_dflash, inp,
                 [("x", "dx"), ("w_fc", "dw_fc"), ("g", "dg")], ["f"], rng)
    f = fw_dflash(inp)["f"]
    naive = np.zeros((n, h))
    for j in range(n):
        c = np.array([sum(inp["x"][j].reshape(-1)[e] * inp["w_fc"][o, e] for e in range(t * h))
                      for o in range(h)])
        naive[j] = c / np.sqrt(np.mean(c * c) + 1e-4) * inp["g"]
    ck.check("fusion.dflash forward vs loops", _rel(f, naive), 1e-13)

    # attention.kvproj, both context layouts, against per-element loops (RoPE as rotations)
    d, n, h, hkv, dh = 2, 3, 6, 2, 4
    for dc in (1, d):
        c = rn((dc, n, h))
        w_k, w_v, gk = rn((d, hkv * dh, h)), rn((d, hkv * dh, h)), 1 + 0.1 * rn((d, dh))
        pos = rng.integers(0, 5000, n)
        o = attention_kvproj(c, w_k, w_v, gk, pos, eps=1e-5, rope_theta=1e4)
        nk, nv = np.zeros((d, n, hkv, dh)), np.zeros((d, n, hkv, dh))
        for i in range(d):
            ci = c[i if dc == d else 0]
            for j in range(n):
                kr = (w_k[i] @ ci[j]).reshape(hkv, dh)
                nv[i, j] = (w_v[i] @ ci[j]).reshape(hkv, dh)
                for e in range(hkv):
                    x = kr[e] / np.sqrt(np.mean(kr[e] ** 2) + 1e-5) * gk[i]
                    for mm in range(dh // 2):
                        ang = pos[j] * 1e4 ** (-2.0 * mm / dh)
                        z = complex(x[mm], x[mm + dh // 2]) * complex(np.cos(ang), np.sin(ang))
                        nk[i, j, e, mm], nk[i, j, e, mm + dh // 2] = z.real, z.imag
        ck.check("attention.kvproj Dc=%d k vs loops" % dc, _rel(o["k"], nk), 1e-12)
        ck.check("attention.kvproj Dc=%d v vs loops" % dc, _rel(o["v"], nv), 1e-13)

        def fw_kvproj(i, do=None, pos=pos):
            return attention_kvproj(i["c"], i["w_k"], i["w_v"], i["gk"], pos, eps=1e-3,
                                    rope_theta=1e4, dk=None if do is None else do["k"],
                                    dv=None if do is None else do["v"])
        _check_grads(ck, "attention.kvproj Dc=%d" % dc, fw_kvproj,
                     {"c": c, "w_k": w_k, "w_v": w_v, "gk": gk},
                     [("c", "dc"), ("w_k", "dw_k"), ("w_v", "dw_v"), ("gk", "dgk")],
                     ["k", "v"], rng)
    # RoPE scaling: the public models' frequencies (expected numbers from transformers'
    # _compute_llama3_parameters / _compute_yarn_parameters at Llama 3.1 8B's and gpt-oss-20b's
    # config.json values, computed once in float64 and pasted here), then kvproj with each
    # scaling against loops that apply the band rules dim by dim
    f, ms = rope_freqs(128, 5e5, "llama3", 8, 1, 4, 8192)
    hf = {0: 1.0, 28: 0.0032114459947525913, 29: 0.002166570763503359,
          32: 0.0005248461609929549, 34: 0.00017850781276799638, 35: 9.556212353964683e-05,
          63: 3.068925988914511e-07}
    ck.check("rope llama3 (Llama 3.1 8B) vs transformers' numbers",
             max(abs(f[k] / v - 1) for k, v in hf.items()) + abs(ms - 1), 1e-12)
    for tr, hf in ((0, {0: 1.0, 8: 0.050813274815461475, 9: 0.03170569618466377,
                        17: 0.00012931870124506317, 18: 3.8308812373753384e-05,
                        31: 3.0235114281192144e-07}),
                   (1, {8: 0.050813274815461475, 9: 0.031620752275346484,
                        17: 0.0002279477957951252, 18: 3.8308812373753384e-05})):
        f, ms = rope_freqs(64, 1.5e5, "yarn", 32, beta_fast=32, beta_slow=1,
                           original_max_pos=4096, truncate=tr)
        ck.check("rope yarn (gpt-oss-20b, truncate %d) vs transformers' numbers" % tr,
                 max(abs(f[k] / v - 1) for k, v in hf.items()) + abs(ms - 1.3465735902799727),
                 1e-12)

    def scaled_freq(mm, dh, theta, scaling, fac, L, tr):
        """One dim's frequency by SPEC.md's rules, scalar by scalar."""
        b = theta ** (-2.0 * mm / dh)
        if scaling == "llama3":
            w = 2 * np.pi / b
            if w < L / 4.0:
                return b
            if w > L / 1.0:
                return b / fac
            t = (L / w - 1.0) / 3.0
            return (1 - t) * b / fac + t * b
        lo = dh * np.log(L / (2 * np.pi * 32)) / (2 * np.log(theta))
        hi = dh * np.log(L / (2 * np.pi * 1)) / (2 * np.log(theta))
        if tr:
            lo, hi = np.floor(lo), np.ceil(hi)
        if mm <= lo:
            return b
        if mm >= hi:
            return b / fac
        r = (mm - lo) / (hi - lo)
        return b * (1 - r) + b / fac * r

    d, n, h, hkv, dh = 2, 3, 6, 2, 16
    for scaling, theta, fac, L, tr in (("llama3", 1e6, 8.0, 8192.0, 1),
                                       ("yarn", 1.5e5, 32.0, 4096.0, 0),
                                       ("yarn", 1e4, 4.0, 2048.0, 1)):
        c = rn((1, n, h))
        w_k, w_v, gk = rn((d, hkv * dh, h)), rn((d, hkv * dh, h)), 1 + 0.1 * rn((d, dh))
        pos = rng.integers(0, 30000, n)
        o = attention_kvproj(c, w_k, w_v, gk, pos, eps=1e-5, rope_theta=theta,
                             rope_scaling=scaling, rope_factor=fac, rope_original_max_pos=L,
                             rope_truncate=tr)
        msc = 0.1 * np.log(fac) + 1 if scaling == "yarn" else 1.0
        nk = np.zeros((d, n, hkv, dh))
        for i in range(d):
            for j in range(n):
                kr = (w_k[i] @ c[0, j]).reshape(hkv, dh)
                for e in range(hkv):
                    x = kr[e] / np.sqrt(np.mean(kr[e] ** 2) + 1e-5) * gk[i]
                    for mm in range(dh // 2):
                        ang = pos[j] * scaled_freq(mm, dh, theta, scaling, fac, L, tr)
                        z = complex(x[mm], x[mm + dh // 2]) * complex(np.cos(ang), np.sin(ang))
                        nk[i, j, e, mm], nk[i, j, e, mm + dh // 2] = msc * z.real, msc * z.imag
        ck.check("attention.kvproj rope_scaling=%s theta=%g factor=%g k vs loops"
                 % (scaling, theta, fac), _rel(o["k"], nk), 1e-12)
        plain = attention_kvproj(c, w_k, w_v, gk, pos, eps=1e-5, rope_theta=theta)
        ck.check("attention.kvproj rope_scaling=%s changes k (1: it did not)" % scaling,
                 float(_rel(o["k"], plain["k"]) < 1e-3), 0.5)

    # attention.decode against per-query loops
    r, b, hq, hkv, dh = 3, 3, 4, 2, 4
    lens = np.array([0, 2, 5])
    args = {"q": rn((r, b, hq, dh)), "ctx_lens": lens, "k_ctx": rn((lens.sum(), hkv, dh)),
            "v_ctx": rn((lens.sum(), hkv, dh)), "k_blk": rn((r, b, hkv, dh)),
            "v_blk": rn((r, b, hkv, dh))}

    def decode_loops(window=0, causal=0):
        """o and lse of attention.decode on args by loops that list each query's keys: query bi
        at position L + bi sees the context positions p > L + bi - window (window 0: all of
        them), then the block's keys (causal: keys 0..bi only)."""
        no, nl = np.zeros((r, b, hq, dh)), np.zeros((r, b, hq))
        off = 0
        for ri in range(r):
            for bi in range(b):
                ctx = [p for p in range(lens[ri]) if not window or p > lens[ri] + bi - window]
                blk = range(bi + 1) if causal else range(b)
                for hi in range(hq):
                    kv = hi // (hq // hkv)
                    keys = [args["k_ctx"][off + p, kv] for p in ctx] + \
                           [args["k_blk"][ri, c, kv] for c in blk]
                    vals = [args["v_ctx"][off + p, kv] for p in ctx] + \
                           [args["v_blk"][ri, c, kv] for c in blk]
                    sc = np.array([0.7 * np.dot(args["q"][ri, bi, hi], kk) for kk in keys])
                    nl[ri, bi, hi] = np.log(np.sum(np.exp(sc)))
                    no[ri, bi, hi] = sum(np.exp(sc[p] - nl[ri, bi, hi]) * vals[p]
                                         for p in range(len(vals)))
            off += lens[ri]
        return no, nl

    o = attention_decode(**args, scale=0.7)
    no, nl = decode_loops()
    ck.check("attention.decode o vs loops", _rel(o["o"], no), 1e-13)
    ck.check("attention.decode lse vs loops", _rel(o["lse"], nl), 1e-13)

    # attention.decode with a sliding window against the loops: query bi at position L + bi
    # keeps context positions p > L + bi - W; W = 2 < B leaves the last rows no context key,
    # W = 4 cuts inside the context of 5
    for wnd in (2, 4):
        o = attention_decode(**args, scale=0.7, window=wnd)
        no, nl = decode_loops(window=wnd)
        ck.check("attention.decode window=%d o vs loops" % wnd, _rel(o["o"], no), 1e-13)
        ck.check("attention.decode window=%d lse vs loops" % wnd, _rel(o["lse"], nl), 1e-13)

    # causal = 1 with window 4: query bi sees block keys 0..bi only
    o = attention_decode(**args, scale=0.7, window=4, causal=1)
    no, nl = decode_loops(window=4, causal=1)
    ck.check("attention.decode window=4 causal=1 o vs loops", _rel(o["o"], no), 1e-13)
    ck.check("attention.decode window=4 causal=1 lse vs loops", _rel(o["lse"], nl), 1e-13)

    # attention.train: forward per block against decode, backward against finite differences
    ns, nb, b, hq, hkv, dh, s_len = 2, 3, 3, 4, 2, 4, 5
    inp = {"q": rn((ns, nb, b, hq, dh)), "k_ctx": rn((ns, s_len, hkv, dh)),
           "v_ctx": rn((ns, s_len, hkv, dh)), "k_blk": rn((ns, nb, b, hkv, dh)),
           "v_blk": rn((ns, nb, b, hkv, dh))}
    anchors = np.array([[0, 3, s_len], [2, s_len, 1]])
    keep = np.array([[1, 1, 1], [1, 0, 1]], dtype=np.uint8)

    train_grads = [("q", "dq"), ("k_ctx", "dk_ctx"), ("v_ctx", "dv_ctx"), ("k_blk", "dk_blk"),
                   ("v_blk", "dv_blk")]

    def train_fw(**kw):
        """attention.train on these anchors and keep, with kw (window, causal), as _check_grads
        calls a forward."""
        def fw(i, do=None):
            return attention_train(i["q"], i["k_ctx"], i["v_ctx"], i["k_blk"], i["v_blk"],
                                   anchors, keep, scale=0.6, do=None if do is None else do["o"],
                                   **kw)
        return fw

    def vs_decode(o, **kw):
        """train's o and lse on each kept block against decode (with kw) on the block's context
        prefix: the worst relative errors (o, lse)."""
        err_o = err_l = 0.0
        for si in range(ns):
            for j in range(nb):
                if not keep[si, j]:
                    continue
                a = anchors[si, j]
                ref = attention_decode(inp["q"][si, j][None], np.array([a]),
                                       inp["k_ctx"][si, :a], inp["v_ctx"][si, :a],
                                       inp["k_blk"][si, j][None], inp["v_blk"][si, j][None],
                                       scale=0.6, **kw)
                err_o = max(err_o, _rel(o["o"][si, j], ref["o"][0]))
                err_l = max(err_l, _rel(o["lse"][si, j], ref["lse"][0]))
        return err_o, err_l

    fw_train = train_fw()
    o = fw_train(inp)
    for si in range(ns):
        for j in range(nb):
            if not keep[si, j]:
                ok = (np.all(o["o"][si, j] == 0) and np.all(np.isneginf(o["lse"][si, j])))
                ck.check("attention.train keep=0 block gives o=0, lse=-inf", 0.0 if ok else 1.0,
                         0.5)
    err_o, err_l = vs_decode(o)
    ck.check("attention.train o vs decode per block", err_o, 1e-13)
    ck.check("attention.train lse vs decode per block", err_l, 1e-13)
    _check_grads(ck, "attention.train", fw_train, inp, train_grads, ["o"], rng)
    g = fw_train(inp, {"o": rn(o["o"].shape)})
    ck.check("attention.train keep=0 block gets no dq/dk_blk/dv_blk",
             float(np.abs(g["dq"][1, 1]).sum() + np.abs(g["dk_blk"][1, 1]).sum()
                   + np.abs(g["dv_blk"][1, 1]).sum()), 1e-300)

    # attention.train with a sliding window W = 3 (query b of a block at anchor + b): per block
    # against windowed decode on the context prefix, gradients against finite differences, and
    # context rows outside every window get no gradient
    fw_train_w = train_fw(window=3)
    o = fw_train_w(inp)
    err_o, err_l = vs_decode(o, window=3)
    ck.check("attention.train window=3 o vs windowed decode per block", err_o, 1e-13)
    ck.check("attention.train window=3 lse vs windowed decode per block", err_l, 1e-13)
    full = fw_train(inp)
    ck.check("attention.train window=3 differs from full attention",
             1.0 / max(_rel(o["o"], full["o"]), 1e-300), 1e3)
    _check_grads(ck, "attention.train window=3", fw_train_w, inp, train_grads, ["o"], rng)
    g = fw_train_w(inp, {"o": rn(o["o"].shape)})
    # sequence 0, anchors 0, 3, 5: windows reach rows 1, 2 (anchor 3) and 3, 4 (anchor 5)
    ck.check("attention.train window=3 row 0 (outside every window) gets no gradient",
             float(np.abs(g["dk_ctx"][0, 0]).sum() + np.abs(g["dv_ctx"][0, 0]).sum()), 1e-300)

    # causal = 1 (with window 3): per block against causal windowed decode, FD gradients, and
    # the last block key reaches only the last query
    fw_train_c = train_fw(window=3, causal=1)
    o = fw_train_c(inp)
    err_o, _ = vs_decode(o, window=3, causal=1)
    ck.check("attention.train window=3 causal=1 o vs windowed causal decode", err_o, 1e-13)
    _check_grads(ck, "attention.train window=3 causal=1", fw_train_c, inp, train_grads, ["o"],
                 rng)
    do_last = np.zeros_like(o["o"])
    do_last[:, :, :-1] = rn(do_last[:, :, :-1].shape)   # upstream gradient on rows 0..B-2 only
    g = fw_train_c(inp, {"o": do_last})
    ck.check("attention.train causal=1: the last block key gets no gradient from earlier rows",
             float(np.abs(g["dk_blk"][:, :, -1]).sum() + np.abs(g["dv_blk"][:, :, -1]).sum()),
             1e-300)

    # loss: weights against the table, dpace weights against the accepted-length surrogate,
    # gradients (weights held constant) against finite differences
    b, nblk, h, v = 5, 3, 4, 7
    m_rows = b * nblk
    hh, wl = rn((m_rows, h)), rn((v, h))
    labels = rng.integers(0, v, m_rows).astype(np.int32)
    mask = np.ones(m_rows, dtype=np.uint8)
    mask[[3, 7, 11, 12, 13, 14]] = 0       # last block: only k = 1 scored
    labels[mask == 0] = -100
    scored = (mask != 0) & (np.arange(m_rows) % b > 0)
    for scheme in ("uniform", "decay", "dpace", "dpace_cum", "dpace_cont"):
        out = loss(hh, wl, labels, mask, B=b, scheme=scheme, gamma=3.0, alpha=0.3,
                   want_dw=1)
        ck.check("loss %s weights vs table" % scheme,
                 _rel(out["w"], _naive_weights(out["q"], scored, b, scheme, 3.0, 0.3)), 1e-13)
    out = loss(hh, wl, labels, mask, B=b, scheme="progressive", gamma0=2.0, gamma_max=6.0,
               step=30, warmup_steps=120)
    ck.check("loss progressive = decay at the warm-up gamma",
             _rel(out["w"], loss(hh, wl, labels, mask, B=b, scheme="decay", gamma=3.0)["w"]),
             1e-15)
    out = loss(hh, wl, labels, mask, B=b, scheme="dpace", alpha=0.3)
    s_all = np.where(scored, 0.7 * out["q"] + 0.3, 1.0).reshape(nblk, b)

    def surrogate(logs):
        return float(np.sum(np.cumprod(np.exp(logs), axis=1) * scored.reshape(nblk, b)))
    logs = np.log(s_all)
    num = _fd_grad(lambda: surrogate(logs), logs).reshape(-1) * scored
    ck.check("loss dpace weights = d surrogate / d log s", _rel(out["w"], num), 1e-8)

    for scheme, norm in (("decay", "default"), ("dpace", "default"), ("dpace_cont", "count"),
                         ("uniform", "none")):
        w_fixed = loss(hh, wl, labels, mask, B=b, scheme=scheme, alpha=0.3)["w"]

        def fw_loss(i, do=None, scheme=scheme, norm=norm, w_fixed=w_fixed):
            o = loss(i["h"], i["w_lm"], labels, mask, B=b, scheme=scheme, norm=norm,
                     num_seqs=2, alpha=0.3, want_dw=1, weights=w_fixed)
            if do is None:
                return o
            o["dh"] = o["dh"] * do["loss"]
            o["dw_lm"] = o["dw_lm"] * do["loss"]
            return o
        _check_grads(ck, "loss %s norm=%s" % (scheme, norm), fw_loss, {"h": hh, "w_lm": wl},
                     [("h", "dh"), ("w_lm", "dw_lm")], ["loss"], rng)
    # progressive_epoch: closed forms of gamma (7 + 0.5 per whole epoch, no cap) and the
    # weights equal decay's at that gamma
    for ep, gm in ((0, 7.0), (0.99, 7.0), (1, 7.5), (2.5, 8.0), (6, 10.0), (40, 27.0)):
        ck.check("progressive_epoch gamma at epoch %g is %g" % (ep, gm),
                 abs(epoch_gamma(7.0, 0.5, ep) - gm), 1e-15)
        o = loss(hh, wl, labels, mask, B=b, scheme="progressive_epoch", gamma=7.0,
                 gamma_inc=0.5, epoch=ep)
        ck.check("progressive_epoch at epoch %g = decay with gamma %g" % (ep, gm),
                 _rel(o["w"], loss(hh, wl, labels, mask, B=b, scheme="decay", gamma=gm)["w"]),
                 1e-15)

    # final_norm: dh (through the RMSNorm) and dg against finite differences of the loss of
    # the un-normed h, weights held constant; dw_lm uses hn
    gn = 1 + 0.2 * rn(h)
    for scheme, norm in (("decay", "default"), ("dpace", "weight_sum")):
        w_fixed = loss(hh, wl, labels, mask, B=b, scheme=scheme, alpha=0.3, final_norm=1,
                       g_norm=gn)["w"]

        def fw_norm(i, do=None, scheme=scheme, norm=norm, w_fixed=w_fixed):
            o = loss(i["h"], i["w_lm"], labels, mask, B=b, scheme=scheme, norm=norm, alpha=0.3,
                     want_dw=1, weights=w_fixed, final_norm=1, g_norm=i["g_norm"])
            if do is None:
                return o
            for k in ("dh", "dg", "dw_lm"):
                o[k] = o[k] * do["loss"]
            return o
        _check_grads(ck, "loss final_norm %s norm=%s" % (scheme, norm), fw_norm,
                     {"h": hh.copy(), "w_lm": wl.copy(), "g_norm": gn.copy()},
                     [("h", "dh"), ("g_norm", "dg"), ("w_lm", "dw_lm")], ["loss"], rng)
    y, _ = rmsnorm_fwd(hh, EPS)
    ck.check("loss final_norm = loss of rmsnorm(h) * g",
             _rel(loss(hh, wl, labels, mask, B=b, final_norm=1, g_norm=gn)["loss"],
                  loss(y * gn, wl, labels, mask, B=b)["loss"]), 1e-15)
    none_n = loss(hh, wl, labels, np.zeros(m_rows, np.uint8), B=b, want_dw=1, final_norm=1,
                  g_norm=gn)
    ck.check("loss final_norm with nothing scored is 0 with zero dh, dg, dw_lm",
             float(abs(none_n["loss"]) + np.abs(none_n["dh"]).sum() + np.abs(none_n["dg"]).sum()
                   + np.abs(none_n["dw_lm"]).sum()), 1e-300)

    none = loss(hh, wl, labels, np.zeros(m_rows, np.uint8), B=b, want_dw=1)
    ck.check("loss with nothing scored is 0 with zero gradients",
             float(abs(none["loss"]) + np.abs(none["dh"]).sum() + np.abs(none["dw_lm"]).sum()
                   + np.abs(none["w"]).sum() + np.abs(none["ce"]).sum()
                   + np.abs(none["q"] - 1).sum()), 1e-300)

    print("self-test: %s" % ("FAILED (%d)" % ck.failed if ck.failed else "passed"))
    return 1 if ck.failed else 0


if __name__ == "__main__":
    if "--self-test" in sys.argv[1:]:
        sys.exit(self_test())
    print("usage: spec_numpy.py --self-test", file=sys.stderr)
    sys.exit(2)
