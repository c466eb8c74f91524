#!/usr/bin/env python3
"""make_corpus.py: write the seed corpus of the fuzz targets (tests/fuzz/corpus/TARGET/).

    python3 tests/fuzz/make_corpus.py [--out DIR]

Python standard library only; the same files every time. The seeds are small on purpose (a
fuzzer mutates small inputs faster): valid inputs of every form each reader accepts, and the
malformed ones its checks name, one each. Files written here are named seed-*; reproducers of
findings (crash-*, oom-*, timeout-*, leak-*, named by what they found) are added by hand beside
them and are never touched by this script. Seeds no longer generated are removed.
"""
import argparse
import gzip
import json
import os
import struct

HERE = os.path.dirname(os.path.abspath(__file__))


# ---- .npy ------------------------------------------------------------------------------------


def npy(descr, shape, data=b"", version=(1, 0), fortran=False, header=None, pad=True):
    """A .npy file as NumPy writes it: magic, version, header length, dict padded with spaces
    and a newline to a multiple of 64 bytes, then the data."""
    if header is None:
        dims = "".join("%d," % d for d in shape) if len(shape) == 1 else ", ".join(map(str, shape))
        header = "{'descr': '%s', 'fortran_order': %s, 'shape': (%s), }" % (
            descr, "True" if fortran else "False", dims)
    h = header.encode("utf-8" if version[0] >= 3 else "latin-1")
    pre = 10 if version[0] == 1 else 12
    if pad:
        total = pre + len(h) + 1
        h += b" " * ((64 - total % 64) % 64) + b"\n"
    length = struct.pack("<H", len(h)) if version[0] == 1 else struct.pack("<I", len(h))
    return b"\x93NUMPY" + bytes(version) + length + h + data


def pack(fmt, values):
    return struct.pack("<%d%s" % (len(values), fmt), *values)


def npy_seeds():
    s = {}
    # Every accepted dtype, at ranks 0, 1 and 2.
    s["f32-1d"] = npy("<f4", (3,), pack("f", [1.5, -2.0, 3.25]))
    s["f32-0d"] = npy("<f4", (), pack("f", [0.5]))
    s["f64-2d"] = npy("<f8", (2, 2), pack("d", [1.0, -0.0, 1e-300, 2.5]))
    s["i32-0d"] = npy("<i4", (), pack("i", [-7]))
    s["i32-2d"] = npy("<i4", (2, 3), pack("i", [0, 1, -1, 2**31 - 1, -2**31, 5]))
    s["i64-1d"] = npy("<i8", (3,), pack("q", [0, -2**31, 2**31 - 1]))
    s["u8-2d"] = npy("|u1", (2, 2), bytes([0, 1, 254, 255]))
    s["u8-little"] = npy("<u1", (2,), bytes([3, 4]))
    s["bool-1d"] = npy("|b1", (4,), bytes([0, 1, 1, 0]))
    s["bool-0d"] = npy("|b1", (), bytes([1]))
    s["empty"] = npy("<f4", (0, 3))
    s["rank6"] = npy("|u1", (1, 1, 2, 1, 1, 1), bytes([1, 2]))
    # Versions 2.0 and 3.0 (4-byte header length; 3.0 headers are UTF-8).
    s["v2-f32-2d"] = npy("<f4", (1, 2), pack("f", [1.0, 2.0]), version=(2, 0))
    s["v3-i32-1d"] = npy("<i4", (2,), pack("i", [1, 2]), version=(3, 0))
    # Header spellings NumPy or Python 2 wrote: double quotes, long suffix, no trailing comma,
    # keys in another order, no padding.
    s["dquote"] = npy(None, None, pack("f", [1.0]),
                      header='{"descr": "<f4", "fortran_order": False, "shape": (1,)}')
    s["py2-long"] = npy(None, None, pack("i", [1, 2]),
                        header="{'descr': '<i4', 'fortran_order': False, 'shape': (2L,), }")
    s["key-order"] = npy(None, None, bytes([9]),
                         header="{'shape': (1,), 'fortran_order': False, 'descr': '|u1'}")
    s["unpadded"] = npy("<f4", (1,), pack("f", [2.0]), pad=False)
    # Refused: each check of the reader once.
    s["bad-magic"] = b"\x93NUMPZ\x01\x00\x00\x00"
    s["bad-version"] = npy("<f4", (1,), pack("f", [1.0]), version=(4, 0))
    s["short-prefix"] = b"\x93NUMPY\x02\x00\x10"
    s["truncated-header"] = npy("<f4", (1,), pack("f", [1.0]))[:40]
    s["truncated-data"] = npy("<f4", (4,), pack("f", [1.0, 2.0]))
    s["extra-byte"] = npy("|u1", (1,), bytes([1, 2]))
    s["fortran"] = npy("<f4", (2, 2), pack("f", [1, 2, 3, 4]), fortran=True)
    s["big-endian"] = npy(">f4", (1,), struct.pack(">f", 1.0))
    s["f16"] = npy("<f2", (1,), b"\x00\x3c")
    s["i64-overflow"] = npy("<i8", (1,), pack("q", [2**31]))
    s["rank7"] = npy("|u1", (1,) * 7, bytes([1]))
    s["no-shape"] = npy(None, None, header="{'descr': '<f4', 'fortran_order': False}")
    s["extra-key"] = npy(None, None, header="{'descr': '<f4', 'fortran_order': False, "
                         "'shape': (), 'x': 1}")
    s["bad-dict"] = npy(None, None, header="{'descr': '<f4', 'fortran_order': Maybe}")
    return {"seed-" + k + ".npy": v for k, v in s.items()}


# ---- profiles --------------------------------------------------------------------------------

STATS = {"median_s": 2e-5, "q1_s": 1e-5, "q3_s": 3e-5, "iqr_s": 2e-6, "min_s": 1e-5,
         "max_s": 4e-5, "mean_s": 2e-5, "stdev_s": None, "ci_rel": 0.01, "samples": 40,
         "batch": 7, "converged": True, "total_s": 0.2}


def entry(**over):
    """A valid entry of fusion.dflash on cpu at the tiny preset, with fields replaced (no
    default: the seed "valid" has one)."""
    e = {
        "op": "fusion.dflash", "backend": "cpu", "device": "cpu: EPYC x 2",
        "shape": {"N": 48, "T": 3, "H": 64, "TH": 192},
        "attrs": {"dtype": "f32"}, "config": {"par": "rows", "chunk": "32", "threads": 2},
        "stats": STATS,
        "default": None, "speedup": None, "roofline_frac": 0.69,
        "verification": {"max_rel_err": 2e-7, "tolerance": 1e-5, "output": "f", "shape": {},
                         "reduced": False},
        "tie": [], "environment": {}, "tuned_at": "2026-12-01T21:43Z",
        "strategy": "exhaustive", "evaluations": 6, "space_valid": 6,
    }
    e.update(over)
    return e


# One valid shape and configuration of every op on cpu (tiny.dflare.train).
EVERY_OP = [
    ("fusion.dflare", {"N": 48, "T": 4, "H": 64, "D": 3},
     {"strategy": "k_layers", "k": 2, "rows": 4, "stream": 1, "prefetch": 0, "threads": 2}),
    ("fusion.dflash", {"N": 48, "T": 4, "H": 64, "TH": 256}, {"par": "blas", "chunk": "all"}),
    ("attention.kvproj", {"Dc": 3, "D": 3, "N": 48, "H": 64, "KVD": 32, "Hkv": 2, "dh": 16},
     {"gemm": "per_layer", "epilogue": "fused", "chunk": 1024, "par": "blas"}),
    ("attention.decode", {"R": 3, "B": 4, "Hq": 4, "Hkv": 2, "dh": 16, "Lsum": 39},
     {"tile": 128, "pack": "group", "mm": "loops", "span": 8, "parts": 2}),
    ("attention.train", {"nseq": 2, "S": 24, "NB": 5, "B": 4, "Hq": 4, "Hkv": 2, "dh": 16},
     {"kv_tile": 0, "gqa": "pack", "gemm": "loops", "balance": "lpt", "dkv": "owner"}),
    ("loss", {"M": 40, "H": 64, "V": 320},
     {"strategy": "online", "chunk": 16, "vtile": 256, "parallel": "vocab", "threads": 1}),
]


def profile(entries, version=1, kernels=None):
    doc = {"schema_version": version, "generator": "make_corpus", "entries": entries}
    if kernels is not None:
        doc["kernels"] = kernels
    return doc


def t1_kernel(**kw):
    """A kernel of a T1 file as `tune --t1 --profile` writes it (docs/profiles.md)."""
    k = {"kernel": "convolution_kernel", "backend": "cuda", "device": "cuda: NVIDIA A100",
         "problem_size": [4096, 4096], "config": {"block_size_x": 32, "use_padding": 1,
                                                   "scale": "2.0"},
         "stats": {"median_s": 0.0021}, "default": None, "speedup": None, "evaluations": 20,
         "space_valid": 4201, "strategy": "bayes", "tuned_at": "2026-12-05T07:00:00Z"}
    k.update(kw)
    return k


def dumps(doc, indent=None):
    return (json.dumps(doc, indent=indent, separators=None if indent else (",", ":")) +
            "\n").encode()


def profile_seeds():
    cuda = entry(op="fusion.dflare", backend="cuda", device="cuda: NVIDIA H200 (sm_90a)",
                 shape={"N": 8192, "T": 9, "H": 4096, "D": 7},
                 attrs={"eps": "1e-06", "backward": "0", "dtype": "bf16"},
                 config={"strategy": "all_layers", "k": 2, "vec": 16, "stage": "smem",
                         "reduce": "partials"},
                 roofline_frac=None, tie=[{"vec": 8}])
    default = {"config": {"par": "blas", "chunk": "all", "threads": 2},
               "stats": dict(STATS, median_s=3e-05, q1_s=None)}
    s = {
        "valid": dumps(profile([entry(default=default, speedup=1.89)]), indent=1),
        "valid-cuda-nodefault": dumps(profile([cuda])),
        # Tunables under their former names (read renamed, with a note), and an entry with both
        # a former and its current name (skipped).
        "renamed-tunables": dumps(profile([
            dict(cuda, config={"strategy": "all_layers", "vec": 16, "cpt": 1, "rpc": 1,
                               "ctas": 2}),
            dict(cuda, attrs={"eps": "1e-06", "backward": "1", "dtype": "bf16"},
                 config={"cpt": 1, "vecs_per_thread": 2})])),
        "valid-two-keys": dumps(profile([entry(), entry(shape={"N": 8, "T": 3, "H": 64,
                                                                "TH": 192})])),
        "every-op": dumps(profile(
            [entry(op=op, shape=shape, config=cfg, attrs={}) for op, shape, cfg in EVERY_OP] +
            [entry(op=op, backend="cuda-emu", shape=shape, config={}, attrs={}, device="emu")
             for op, shape, _ in EVERY_OP[::2]])),
        "same-key-twice": dumps(profile([entry(), entry(stats=dict(STATS, median_s=1e-05))])),
        "threads-elsewhere": dumps(profile([entry(config={"par": "rows", "chunk": "32",
                                                          "threads": 64})])),
        "empty-entries": dumps(profile([])),
        "whitespace": b" \n\t\r\n",
        "empty-file": b"",
        # Skipped entries (the rest of the file is used) and refused files.
        "skipped-unknown-op": dumps(profile([entry(op="fusion.nope"), entry()])),
        "skipped-bad-label": dumps(profile([entry(config={"par": "diagonal"})])),
        "skipped-extra-size": dumps(profile([entry(shape={"N": 1, "T": 1, "H": 1, "TH": 1,
                                                          "Q": 1})])),
        "skipped-bad-attr": dumps(profile([entry(attrs={"colour": "red"})])),
        "skipped-zero-median": dumps(profile([entry(stats=dict(STATS, median_s=0))])),
        "skipped-not-object": dumps(profile([42, None, "x", []])),
        "newer-schema": dumps(profile([entry()], version=3)),
        # Kernels of T1 files beside the entries: valid ones of two keys and the same key twice,
        # a skipped one, a dropped one, and a file whose kernels is not an array.
        "kernels": dumps(profile([entry()], version=2, kernels=[
            t1_kernel(), t1_kernel(problem_size=[1024]),
            t1_kernel(stats={"median_s": 0.001}, default={"config": {"block_size_x": 16},
                                                         "stats": {"median_s": 0.003}},
                      speedup=3.0)])),
        "kernels-skipped": dumps(profile([], version=2, kernels=[
            t1_kernel(problem_size=[1, 2, 3, 4]), t1_kernel(config={"x": 0.5}), 7,
            t1_kernel(device="")])),
        "kernels-object": b'{"schema_version":2,"entries":[],"kernels":{}}\n',
        "schema-zero": dumps(profile([], version=0)),
        "schema-string": b'{"schema_version":"1","entries":[]}\n',
        "no-entries": b'{"schema_version":1}\n',
        "entries-object": b'{"schema_version":1,"entries":{}}\n',
        "top-array": b"[1,2,3]\n",
        "duplicate-key": b'{"schema_version":1,"schema_version":1,"entries":[]}\n',
        "truncated": dumps(profile([entry()]))[:300],
        "bad-utf8": b'{"schema_version":1,"entries":[],"generator":"\xff\xfe"}\n',
    }
    return {"seed-" + k + ".json": v for k, v in s.items()}


# ---- event logs ------------------------------------------------------------------------------

DFLASH_DIMS = {"N": 48, "T": 3, "H": 64, "TH": 192}
# The 6 valid candidates of fusion.dflash on cpu at DFLASH_DIMS on 2 cores, in space order, and
# a median each (seconds).
DFLASH_CANDS = [
    ({"par": "blas", "chunk": "32", "threads": 1}, 1.77e-05),
    ({"par": "blas", "chunk": "32", "threads": 2}, 3.12e-05),
    ({"par": "blas", "chunk": "all", "threads": 1}, 1.73e-05),
    ({"par": "blas", "chunk": "all", "threads": 2}, 1.57e-05),
    ({"par": "rows", "chunk": "32", "threads": 2}, 1.56e-05),
    ({"par": "rows", "chunk": "all", "threads": 2}, 1.60e-05),
]
KEY = "k1"
# attention.kvproj on cpu at tiny.dflare.train on 2 cores: 18 valid candidates in space order
# (gemm, epilogue, chunk, then par and threads), a median each.
KVPROJ_DIMS = {"Dc": 3, "D": 3, "N": 48, "H": 64, "KVD": 32, "Hkv": 2, "dh": 16}
KVPROJ_CANDS = [
    ({"gemm": g, "epilogue": e, "chunk": c, "par": p, "threads": t}, None)
    for g, e in (("per_layer", "fused"), ("per_layer", "separate"), ("kv_packed", "fused"))
    for c in (16, 1024) for p, t in (("blas", 1), ("blas", 2), ("chunks", 2))]
KVPROJ_MEDIANS = [3.68, 3.32, 3.16, 3.39, 2.89, 3.5, 2.49, 2.62, 2.69, 2.83, 2.52, 3.24, 3.89,
                  4.23, 3.76, 3.7, 3.65, 3.88]
KVPROJ_CANDS = [(c, m * 1e-5) for (c, _), m in zip(KVPROJ_CANDS, KVPROJ_MEDIANS)]


def ev(kind, run, t, **fields):
    d = {"event": kind}
    d.update(fields)
    d["t"] = t
    d["run"] = run
    return d


def run_start(run, t, key=KEY, **over):
    d = dict(format=1, op="fusion.dflash", backend="cpu", preset="tiny.dflash.train",
             dims=DFLASH_DIMS, attrs={"eps": "1e-06", "dtype": "f32"},
             strategy="exhaustive", budget=0, space_valid=6,
             default={"par": "blas", "chunk": "all", "threads": 2}, env={"cores": 2}, key=key)
    d.update(over)
    return ev("run_start", run, t, **d)


def measured(run, t, i, cfg, median, **over):
    d = dict(config=cfg, candidate=i, started=t - 0.5,
             stats={"median_s": median})
    d.update(over)
    return ev("measured", run, t, **d)


def run_end(run, t, winner, median):
    return ev("run_end", run, t, winner=winner, stats={"median_s": median},
              default_stats={"median_s": 1.57e-05}, speedup=1.006, tie=[], evaluations=6,
              rejected=0, resumed=0, interrupted=False)


def lines(events):
    return b"".join(json.dumps(e, separators=(",", ":")).encode() + b"\n" for e in events)


def eventlog_seeds():
    t = 1000.0
    full = [run_start("r1", t)]
    for i, (cfg, med) in enumerate(DFLASH_CANDS):
        full.append(measured("r1", t + i + 1, i, cfg, med))
    full.append(ev("confirm", "r1", t + 8, started=t + 7, configs=[DFLASH_CANDS[4][0]],
                   stats=[{"median_s": 1.56e-05}]))
    full.append(run_end("r1", t + 9, DFLASH_CANDS[4][0], 1.56e-05))

    # The same landscape over a run that was interrupted and one that resumed it (same key).
    resumed = [run_start("r1", t)]
    resumed += [measured("r1", t + i + 1, i, c, m) for i, (c, m) in enumerate(DFLASH_CANDS[:3])]
    resumed.append(run_start("r2", t + 10, resumed=3))
    resumed += [measured("r2", t + 11 + i, i + 3, c, m)
                for i, (c, m) in enumerate(DFLASH_CANDS[3:])]

    # Some candidates rejected, and a verified event before each measured one.
    mixed = [run_start("r3", t)]
    for i, (cfg, med) in enumerate(DFLASH_CANDS):
        if i % 2:
            mixed.append(ev("rejected", "r3", t + i, config=cfg, candidate=i, reason="verify",
                            message="max rel err 1 > 1e-05", max_rel_err=1.0, tolerance=1e-05,
                            output="f"))
        else:
            mixed.append(ev("verified", "r3", t + i, config=cfg, candidate=i,
                            max_rel_err=2e-07, tolerance=1e-05, output="f", reduced=False))
            mixed.append(measured(
                "r3", t + i + 0.5, i, cfg, med, screened=i == 2,
                stats={"median_s": med, "iqr_s": med / 50, "samples": 20, "batch": 1},
                batches=[[t + i, 0.2, 10], [t + i + 0.2, 0.2, 10]],
                hist={"lo": med * 0.9, "hi": med * 1.2, "counts": [4, 8, 4, 2, 1, 1]},
                kernels=[{"name": "k", "start": t + i, "end": t + i + 1e-5}]))

    # The dashboard's own kinds (tuner/cli/cmd_watch.c, docs/dashboard.md).
    watch = [ev("watch_start", "w1", t, op="loss", backend="cpu", device="cpu", profile="p.json",
                dims={"M": 40, "H": 64, "V": 320}, attrs={}, config={"chunk": 2},
                profile_median_s=1e-4),
             ev("sample", "w1", t + 1, values=[1e-4, 2e-4, 1.5e-4], calls=3, max_s=2e-4),
             {"event": "done", "message": "finished", "t": t + 2}]

    # A larger landscape, for the strategies' neighbourhoods and populations.
    kv = [run_start("k", t, op="attention.kvproj", preset="tiny.dflare.train", dims=KVPROJ_DIMS,
                    space_valid=18, attrs={"rope_theta": "1000000"},
                    default={"gemm": "per_layer", "epilogue": "fused", "chunk": 1024,
                             "par": "blas", "threads": 2})]
    kv += [measured("k", t + i + 1, i, c, m) for i, (c, m) in enumerate(KVPROJ_CANDS)]

    s = {
        "full": lines(full),
        "kvproj": lines(kv),
        "resumed": lines(resumed),
        "mixed": lines(mixed),
        "watch": lines(watch),
        "torn-last": lines(full[:3]) + lines(full[3:4])[:40],
        "complete-no-newline": lines(full[:2]) + lines(full[2:3])[:-1],
        "blank-lines": b"\n" + lines(full[:2]) + b"\n\n" + lines(full[2:3]),
        "damaged-middle": lines(full[:2]) + b'{"event": "measured", "config": \n' +
                          lines(full[2:3]),
        "not-an-event": lines(full[:1]) + b"[1, 2]\n" + lines(full[1:2]),
        "no-event-field": b'{"t": 1, "run": "r"}\n',
        "start-only": lines(full[:1]),
        "incomplete-landscape": lines(full[:4]),
        "unknown-op": lines([run_start("r", t, op="fusion.nope")]),
        "bad-dims": lines([run_start("r", t, dims={"N": "48"})] + full[1:3]),
        "bad-config": lines(full[:1] + [measured("r1", t + 1, 0, {"par": "diagonal"}, 1e-5)]),
        "zero-median": lines(full[:1] + [measured("r1", t + 1, 0, DFLASH_CANDS[0][0], 0)]),
        # The confirmation replay reads: arrays of two lengths; a median that is no time.
        "confirm-mismatch": lines(full[:-2] + [ev("confirm", "r1", t + 8, configs=[
            DFLASH_CANDS[4][0], DFLASH_CANDS[1][0]], stats=[{"median_s": 1.5e-05}])]),
        "confirm-zero": lines(full[:-2] + [ev("confirm", "r1", t + 8, configs=[
            DFLASH_CANDS[1][0]], stats=[{"median_s": 0, "samples": 30}])]),
        "empty": b"",
        "nul-byte": b'{"event":"run_start"}\n\x00\n',
    }
    return {"seed-" + k + ".jsonl": v for k, v in s.items()}


# ---- dictionaries (libFuzzer -dict) ----------------------------------------------------------
# Tokens the readers compare whole: a JSON key is found by its hash, so the fuzzer's comparison
# tracing cannot discover it byte by byte the way it discovers a strcmp.

OPS = ["fusion.dflare", "fusion.dflash", "attention.kvproj", "attention.decode",
       "attention.train", "loss"]
BACKENDS = ["cpu", "ref", "cuda", "cuda-emu"]
# Parameter names and labels of the backends' spaces (flaretune space OP --backend B).
PARAMS = ["strategy", "k", "rows", "stream", "prefetch", "threads", "par", "chunk", "gemm",
          "epilogue", "tile", "pack", "mm", "span", "parts", "kv_tile", "gqa", "balance", "dkv",
          "vtile", "parallel", "vec", "cpt", "rpc", "stage", "group", "ctas", "reduce", "path",
          "kt", "splits", "warps", "tpw", "stages", "algo", "bm", "bn"]
LABELS = ["per_layer", "k_layers", "all_layers", "blas", "rows", "all", "kv_packed", "wide",
          "wide_packed", "fused", "separate", "chunks", "group", "head", "loops", "pack",
          "static", "dynamic", "lpt", "owner", "private", "materialize", "online",
          "materialize_all", "vocab", "reg", "smem", "mma", "partials", "atomic", "simt", "auto"]
SIZES = ["N", "T", "H", "D", "TH", "Dc", "KVD", "Hkv", "dh", "R", "B", "Hq", "L", "nseq", "S",
         "NB", "M", "V"]
ATTRS = ["eps", "backward", "dtype", "rope_theta", "scheme", "scale", "f32", "bf16", "dpace"]
JSON_TOKENS = ["null", "true", "false", "{}", "[]", "-1", "0.0", "1e-300", "1e308",
               "9223372036854775807", "-9223372036854775808", "2147483648", "\\u0000"]


# ---- report documents -------------------------------------------------------------------------

def report_doc(**over):
    doc = {
        "format": "flaretune-report/1", "title": "Drafter steps", "date": "2026-12-02T17:00:00Z",
        "command": "flaretune report --models tiny", "models": ["tiny"], "backend": "cpu",
        "device": "cpu: x", "clock": "host",
        "machine": {"cores": 2, "ceilings": {"levels": [{"name": "L1", "bytes_per_s": 7.3e11}]}},
        "claims": [{"id": "c", "claim": "no latency", "source": "s", "answer": "0.1% <&>",
                    "verdict": "holds", "figures": {"share": 0.001}, "command": "flaretune step"}],
        "charts": [
            {"id": "b", "kind": "stacked", "title": "by op", "unit": "s",
             "bars": [{"label": "DFLARE", "segments": [{"label": "fusion", "value": 1.5e-4},
                                                       {"label": "loss", "value": 2e-3}]}]},
            {"id": "l", "kind": "lines", "title": "against D", "unit": "%", "x_label": "D",
             "y_label": "t", "series": [{"label": "a", "points": [[3, -1.5], [5, 2.0]],
                                         "lo": [-2, 1], "hi": [-1, 3]}]}],
        "tables": [{"id": "t", "title": "steps", "columns": ["a", "b"],
                    "rows": [["x", 1.5], ["y", None]]}],
    }
    doc.update(over)
    return doc


MARKUP = "<script>x</script>&amp;\"'<b>"


def with_markup(node, key=None):
    """A report document with markup in every string a person writes (the chart's unit too);
    the schema's fixed words stay."""
    if isinstance(node, dict):
        return {k + (MARKUP if key in ("figures", "machine") else ""):
                v if k in ("format", "kind", "verdict") else with_markup(v, k)
                for k, v in node.items()}
    if isinstance(node, list):
        return [with_markup(v, key) for v in node]
    return node + MARKUP if isinstance(node, str) else node


def report_seeds():
    good = report_doc()
    seeds = {
        "seed-report": dumps(good, 1),
        "seed-report-min": dumps(report_doc(claims=[], charts=[], tables=[])),
        "seed-report-no-format": dumps({k: v for k, v in good.items() if k != "format"}),
        "seed-report-bad-point": dumps(report_doc(charts=[
            {"id": "l", "kind": "lines", "title": "t", "series": [{"label": "a",
                                                                   "points": [[1]]}]}])),
        "seed-report-bad-lo": dumps(report_doc(charts=[
            {"id": "l", "kind": "lines", "title": "t", "series": [{"label": "a",
                                                                   "points": [[1, 2]],
                                                                   "lo": [1, 2]}]}])),
        "seed-report-negative-segment": dumps(report_doc(charts=[
            {"id": "b", "kind": "stacked", "title": "t",
             "bars": [{"label": "x", "segments": [{"label": "s", "value": -1}]}]}])),
        "seed-report-truncated": dumps(good)[:200],
        "seed-report-markup": dumps(with_markup(good)),
    }
    return seeds


def json_keys(doc, out):
    if isinstance(doc, dict):
        for k, v in doc.items():
            out.add(k)
            json_keys(v, out)
    elif isinstance(doc, list):
        for v in doc:
            json_keys(v, out)
    return out


def dict_line(token):
    if isinstance(token, str):
        token = token.encode()
    text = "".join(chr(c) if 0x20 <= c < 0x7f and c not in b'"\\' else "\\x%02x" % c
                   for c in token)
    return '"%s"\n' % text


def dictionaries():
    words = OPS + BACKENDS + PARAMS + LABELS + SIZES + ATTRS
    prof = json_keys(entry(default={"config": {}, "stats": STATS}), set())
    prof |= json_keys(profile([]), set())
    logk = set()
    for e in (run_start("r", 1.0), measured("r", 1.0, 0, {}, 1.0), run_end("r", 1.0, {}, 1.0)):
        json_keys(e, logk)
    logk |= {"event", "run_start", "verified", "rejected", "measured", "confirm", "run_end",
             "watch_start", "sample", "done", "error", "reopen", "candidate", "started",
             "reason", "message", "max_rel_err", "tolerance", "output", "reduced", "screened",
             "batches", "hist", "lo", "hi", "counts", "kernels", "name", "start", "end",
             "configs", "values", "calls", "max_s", "profile_median_s", "resumed", "cores",
             "verify", "invalid", "iqr_s", "samples", "batch", "ci_rel"}
    npy = ["\x93NUMPY", "\x01\x00", "\x02\x00", "\x03\x00", "'descr'", "'fortran_order'",
           "'shape'", "True", "False", "<f4", "<f8", "<i4", "<i8", "|u1", "<u1", "|b1", ">f4",
           "<f2", "L,", ", }", "(1, 2)"]
    quoted = lambda ws: ['"%s"' % w for w in sorted(ws)]
    return {
        "npy.dict": [t.encode("latin-1") for t in npy],
        "profile.dict": quoted(prof | set(words)) + JSON_TOKENS,
        "eventlog.dict": quoted(logk | set(words)) + JSON_TOKENS + ["\n", "\n\n"],
        "landscape.dict": quoted({"device_name", "kernel_name", "problem_size",
                                  "tune_params_keys", "tune_params", "objective", "cache", "time",
                                  "times", "compile_time", "verification_time", "benchmark_time",
                                  "framework_time", "schema_version", "metadata", "timeunit",
                                  "results", "configuration", "runtimes", "compilation",
                                  "validation", "invalidity", "correct", "compile", "runtime",
                                  "correctness", "measurements", "name", "value", "unit",
                                  "objectives", "milliseconds", "miliseconds", "seconds",
                                  "InvalidConfig", "RuntimeFailedConfig",
                                  "CompilationFailedConfig", "GFLOP/s"}) + JSON_TOKENS +
                          ["}\n}", ",\n", "NaN", "Infinity", "-Infinity"],
        "t1.dict": quoted({"General", "BenchmarkName", "ConfigurationSpace", "TuningParameters",
                           "Name", "Type", "Values", "Default", "Conditions", "Expression",
                           "Parameters", "KernelSpecification", "Language", "CUDA",
                           "CompilerOptions", "KernelName", "KernelFile", "GlobalSizeType",
                           "LocalSize", "GlobalSize", "GridDivX", "GridDivY", "GridDivZ", "X",
                           "Y", "Z", "ProblemSize", "SharedMemory", "Arguments", "MemoryType",
                           "Vector", "Scalar", "MemType", "Constant", "FillType", "Random",
                           "Size", "FillValue", "Output", "int", "float", "string", "int32",
                           "uint8", "double", "Generator", "DataSource"}) + JSON_TOKENS + [
            "//", "**", "<=", ">=", "==", "!=", " and ", " or ", "not ", " in ", " if ",
            " else ", " for ", "[x for x in ", "min(", "max(", "range(", "list(", "len(", "abs(", "round(", "int(",
            "float(", "True", "False", "ProblemSize[0]"],
        "report.dict": quoted(json_keys(report_doc(), set()) |
                              {"stacked", "lines", "holds", "does not hold", "measured", "s",
                               "%", "flaretune-report/1"}) + JSON_TOKENS,
    }


# ---- landscape files: Kernel Tuner caches and FAIR T4 results ------------------------------------


def kt_cache(entries, params=None, closed=True, **over):
    """A Kernel Tuner cache as Kernel Tuner writes it: header fields a line each, an entry a
    line; unfinished (closed=False) as it is while tuning runs: the last entry ends with ','."""
    params = params or {"block_size_x": [16, 32, 64], "layout": ["row", "col"]}
    head = {"device_name": "Test GPU", "kernel_name": "k", "problem_size": [1024, 2],
            "tune_params_keys": list(params), "tune_params": params, "objective": "time"}
    head.update(over)
    text = "{\n" + "".join('"%s": %s,\n' % (k, json.dumps(v)) for k, v in head.items())
    text += '"cache": {\n' + ",\n".join('"%s": %s' % (k, json.dumps(v)) for k, v in entries)
    return (text + ("}\n}\n" if closed else ",\n")).encode()


def kt_entry(bx, layout, time, **more):
    e = {"block_size_x": bx, "layout": layout, "time": time}
    e.update(more)
    return ("%s,%s" % (bx, layout), e)


def t4_result(cfg, value, invalidity="correct", times=None):
    return {"timestamp": "2024-01-01 00:00:00+00:00", "configuration": cfg,
            "times": times if times is not None else {"compilation": 1.0, "runtimes": [value]
                                                      if not isinstance(value, str) else []},
            "invalidity": invalidity, "correctness": int(invalidity == "correct"),
            "measurements": [{"name": "time", "value": value, "unit": ""}],
            "objectives": ["time"]}


def t4(results, unit="milliseconds"):
    return dumps({"schema_version": "1.0.0", "metadata": {"timeunit": unit}, "results": results})


def landscape_seeds():
    good = [kt_entry(32, "row", 2.0, times=[2.0, 2.1], compile_time=100, verification_time=5,
                     benchmark_time=10),
            kt_entry(16, "row", 3.0, times=[3.0, 3.0], compile_time=50),
            kt_entry(16, "col", "CompilationFailedConfig", compile_time=20),
            kt_entry(64, "col", 1.5, benchmark_time=4),
            kt_entry(32, "col", 2.5)]
    seeds = {
        "seed-kt.json": kt_cache(good),
        "seed-kt-unfinished.json": kt_cache(good[:2], closed=False),
        "seed-kt-unfinished-nocomma.json": kt_cache(good[:2], closed=False)[:-2],
        # a crash in the middle of appending an entry: its line cut short
        "seed-kt-torn.json": kt_cache(good[:2], closed=False) + b'\n"32,row": {"block_si',
        "seed-kt-bool-float.json": kt_cache(
            [("True,0.5", {"flag": True, "frac": 0.5, "time": 1.0}),
             ("False,0.25", {"flag": False, "frac": 0.25, "time": 2.0})],
            params={"flag": [True, False], "frac": [0.25, 0.5]}),
        "seed-kt-old-failure.json": kt_cache([kt_entry(16, "row", 1e20), kt_entry(32, "row", 1.0)]),
        "seed-kt.json.gz": gzip.compress(kt_cache(good), mtime=0),
        "seed-kt-bad-count.json": kt_cache([("16", {"time": 1.0})]),
        "seed-kt-bad-value.json": kt_cache([("16,diag", {"time": 1.0})]),
        "seed-kt-duplicate.json": kt_cache([kt_entry(16, "row", 1.0),
                                            ("16.0,row", {"time": 2.0})]),
        "seed-kt-empty.json": kt_cache([]),
        "seed-kt-all-failed.json": kt_cache([kt_entry(16, "row", "InvalidConfig")]),
        "seed-t4.json": t4([t4_result({"block_size_x": 16, "layout": "row"}, 3.0),
                            t4_result({"block_size_x": 16, "layout": "col"},
                                      "CompilationFailedConfig", "compile"),
                            t4_result({"block_size_x": 32, "layout": "row"}, 2.0)],
                           unit="miliseconds"),
        "seed-t4-seconds.json": t4([t4_result({"x": 1.5}, 0.001), t4_result({"x": 2.5}, 0.002)],
                                   unit="seconds"),
        "seed-t4-bad-unit.json": t4([t4_result({"x": 1}, 1.0)], unit="fortnights"),
        "seed-t4-duplicate.json": t4([t4_result({"x": 1}, 1.0), t4_result({"x": 1}, 2.0)]),
        "seed-t4-missing-param.json": t4([t4_result({"x": 1, "y": 2}, 1.0),
                                          t4_result({"x": 2}, 1.0)]),
        # Python's json module writes NaN and infinities as bare tokens; a NaN time is a failure
        "seed-kt-nan.json": kt_cache([kt_entry(16, "row", float("nan")),
                                      kt_entry(32, "row", 1.0, benchmark_time=float("inf"))]),
        "seed-kt-nan-unfinished.json": kt_cache([kt_entry(16, "row", float("-inf")),
                                                 kt_entry(32, "row", 1.0)], closed=False),
        "seed-not-a-landscape.json": b'{"hello": 1}\n',
    }
    return seeds


# ---- FAIR T1 input files ------------------------------------------------------------------------


def t1_doc(**over):
    """A small T1 file of every part the reader knows (tests/data/t1/saxpy_tiled.json's shape)."""
    doc = {
        "General": {"BenchmarkName": "fuzz", "OutputFormat": "JSON"},
        "ConfigurationSpace": {
            "TuningParameters": [
                {"Name": "block_size_x", "Type": "int", "Values": "[32, 64, 128]", "Default": 64},
                {"Name": "tile_size_x", "Type": "int", "Values": "list(range(1, 4))", "Default": 1},
                {"Name": "mode", "Type": "string", "Values": ["a", "b"], "Default": "a"},
                {"Name": "alpha", "Type": "float", "Values": [0.5, 2.0]},
            ],
            "Conditions": [
                {"Expression": "32 <= block_size_x * tile_size_x <= 256",
                 "Parameters": ["block_size_x", "tile_size_x"]},
                {"Expression": "tile_size_x in [1, 2] or block_size_x != 128 if 1 else 0",
                 "Parameters": ["tile_size_x", "block_size_x"]},
            ],
        },
        "KernelSpecification": {
            "Language": "CUDA", "CompilerOptions": ["-std=c++11"], "KernelName": "k",
            "KernelFile": "k.cu", "GlobalSizeType": "CUDA",
            "LocalSize": {"X": "block_size_x", "Y": "1", "Z": "1"},
            "GlobalSize": {"X": "(ProblemSize[0] // block_size_x) // tile_size_x", "Y": "1", "Z": "1"},
            "GridDivX": ["block_size_x", "tile_size_x"], "ProblemSize": [1000, 3],
            "SharedMemory": 0,
            "Arguments": [
                {"Name": "y", "Type": "float", "MemoryType": "Vector", "FillType": "Constant",
                 "Size": "ProblemSize[0]", "FillValue": 0.0, "Output": 1},
                {"Name": "x", "Type": "uint8", "MemoryType": "Vector", "FillType": "Random",
                 "Size": "ProblemSize[0] * max(tile_size_x)", "FillValue": 1.0},
                {"Name": "c", "Type": "double", "MemoryType": "Vector", "MemType": "Constant",
                 "FillType": "Random", "Size": 4},
                {"Name": "n", "Type": "int32", "MemoryType": "Scalar", "FillValue": 1000},
            ],
        },
    }
    for path, value in over.items():
        node = doc
        keys = path.split("/")
        for k in keys[:-1]:
            node = node[int(k)] if isinstance(node, list) else node[k]
        last = keys[-1]
        if value is None:
            if isinstance(node, list):
                del node[int(last)]
            else:
                node.pop(last, None)
        elif isinstance(node, list):
            node[int(last)] = value
        else:
            node[last] = value
    return doc


def t1_seeds():
    cs = "ConfigurationSpace/TuningParameters"
    ks = "KernelSpecification"
    seeds = {
        "seed-good.json": t1_doc(),
        "seed-no-griddiv.json": t1_doc(**{ks + "/GridDivX": None}),
        "seed-opencl-global.json": t1_doc(**{ks + "/GridDivX": None, ks + "/GlobalSizeType": "OpenCL"}),
        "seed-bad-default.json": t1_doc(**{cs + "/0/Default": 128, cs + "/1/Default": 3}),
        "seed-unknown-name.json": t1_doc(**{"ConfigurationSpace/Conditions/0/Expression": "bsx > 1"}),
        "seed-division.json": t1_doc(**{ks + "/LocalSize/X": "block_size_x // (tile_size_x - 1)"}),
        "seed-bad-size.json": t1_doc(**{ks + "/Arguments/0/Size": "ProblemSize[0] / 7"}),
        "seed-no-args.json": t1_doc(**{ks + "/Arguments": []}),
        "seed-bad-type.json": t1_doc(**{ks + "/Arguments/1/Type": "half"}),
        "seed-values-expr.json": t1_doc(**{cs + "/0/Values": "[2 ** k for k in range(5)]"}),
        "seed-values-joined.json": t1_doc(**{
            cs + "/0/Values": "[16] + [32 * i for i in range(1, 9) if i % 2 == 0 if i != 6] * 1",
            cs + "/0/Default": [16]}),
        "seed-hip.json": t1_doc(**{ks + "/Language": "HIP"}),
        "seed-generator.json": t1_doc(**{ks + "/Arguments/1/FillType": "Generator",
                                          ks + "/Arguments/1/FillValue": None,
                                          ks + "/Arguments/1/DataSource": "(i * 7) % 200"}),
        "seed-pruned.json": t1_doc(**{cs + "/0/Values": "list(range(1, 65))",
                                      cs + "/1/Values": "list(range(1, 65))",
                                      cs + "/0/Default": 1,
                                      "ConfigurationSpace/Conditions/0/Expression":
                                          "block_size_x <= 2 and tile_size_x <= block_size_x"}),
    }
    out = {k: (json.dumps(v, indent=1) + "\n").encode() for k, v in seeds.items()}
    out["seed-expression.txt"] = b"32 <= a * 2 <= 1024 and L[-1] % 3 == 2 or max(L) // b\n"
    out["seed-expression-calls.txt"] = b"min(range(3)) + len(ProblemSize) ** 2 if not b else abs(a)\n"
    return out


# ---- writing ---------------------------------------------------------------------------------


def write(outdir, seeds):
    os.makedirs(outdir, exist_ok=True)
    for name in os.listdir(outdir):
        if name.startswith("seed-") and name not in seeds:
            os.unlink(os.path.join(outdir, name))
    for name, data in sorted(seeds.items()):
        with open(os.path.join(outdir, name), "wb") as f:
            f.write(data)
    return sum(len(d) for d in seeds.values())


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=os.path.join(HERE, "corpus"),
                    help="the corpus directory (default: tests/fuzz/corpus)")
    a = ap.parse_args()
    for target, seeds in (("npy", npy_seeds()), ("profile", profile_seeds()),
                          ("eventlog", eventlog_seeds()), ("report", report_seeds()),
                          ("landscape", landscape_seeds()), ("t1", t1_seeds())):
        n = write(os.path.join(a.out, target), seeds)
        print("%s: %d seeds, %d bytes" % (target, len(seeds), n))
    for name, tokens in dictionaries().items():
        with open(os.path.join(a.out, name), "w") as f:
            f.write("# %s: libFuzzer tokens, written by tests/fuzz/make_corpus.py\n" % name)
            f.writelines(dict_line(t) for t in tokens)


if __name__ == "__main__":
    main()
