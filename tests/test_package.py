#!/usr/bin/env python3
"""test_package.py: `flaretune emit --format package` (docs/emit.md).

CPU: a profile written here (non-default winning configs that exist in the CPU space) is
emitted as a package, built in a fresh folder with CMake alone (no flaretune include or library
path), and a small C driver runs fusion.dflare and loss through it on inputs `flaretune exec
--save-inputs` wrote; the outputs must equal exec's with the same config bit for bit. Also: a
shape not in the profile runs the nearest entry (again bit for bit), bad input returns a status
and one line, a profile spanning two backends is refused, and an existing non-empty DIR is
refused and left intact, with nothing left beside it.

CUDA: profiles/h200.json's entries give a package whose cubins are for sm_90a and hold the
kernels (cuobjdump). A profile written here (fusion.dflare at tiny shapes, non-default valid
CUDA configs) gives a package that a small CMake program builds (add_subdirectory, with the
CUDA toolkit: its GPU device layer is compiled) and whose driver runs on "cuda-emu" with
outputs equal to `flaretune exec --backend cuda-emu --config <same>` bit for bit (the exact
entry and a nearest one); its lookup, bad input, and "cuda": without a GPU a one-line status,
with one (a device check) the outputs against `exec --backend cuda` bit for bit.

usage: test_package.py --flaretune PATH [--source DIR]; exits 77 when a prerequisite is missing.
"""
import argparse
import json
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile
import time

import checks
from checks import fail, run

SKIP = 77
checks.NAME = "test_package"
BUILD = {"type": "Release", "native": "ON"}  # flaretune's (--build-type, --native)

# What both drivers share: the package's header (PFX is its prefix), reading SIZES and TENSORS
# from the command line, and writing the outputs.
DRIVER_IO = r"""
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "PFX.h"

static void *slurp(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    *n = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    void *p = aligned_alloc(64, (*n + 63) / 64 * 64 + 64);
    if (fread(p, 1, *n, f) != *n) return NULL;
    fclose(f);
    return p;
}

/* SIZES (comma) into sizes; returns how many. */
static int parse_sizes(char *arg, long long *sizes) {
    int ns = 0;
    for (char *t = strtok(arg, ","); t; t = strtok(NULL, ","))
        sizes[ns++] = atoll(t);
    return ns;
}

/* TENSORS (comma: in:FILE, out:FILE:BYTES or -): each input read whole, each output zeroed,
 * its file in outs; returns how many tensors, -1 where an input cannot be read. */
static int load_tensors(char *arg, void **ptr, char **outs, size_t *bytes) {
    int nt = 0;
    for (char *t = strtok(arg, ","); t; t = strtok(NULL, ","), nt++) {
        ptr[nt] = NULL;
        outs[nt] = NULL;
        if (!strncmp(t, "in:", 3)) {
            ptr[nt] = slurp(t + 3, &bytes[nt]);
            if (!ptr[nt]) return -1;
        } else if (!strncmp(t, "out:", 4)) {
            char *colon = strchr(t + 4, ':');
            *colon = '\0';
            outs[nt] = t + 4;
            bytes[nt] = (size_t)atoll(colon + 1);
            ptr[nt] = aligned_alloc(64, (bytes[nt] + 63) / 64 * 64 + 64);
            memset(ptr[nt], 0, bytes[nt]);
        }
    }
    return nt;
}

/* One run's sizes, tensors (each output's file in outs), message and entry. */
typedef struct {
    long long sizes[16];
    int ns;
    void *ptr[16];
    char *outs[16];
    size_t bytes[16];
    int nt;
    char msg[512];
    PFX_info info;
} driver_call;

/* SIZES and TENSORS into d; 0, or 3 where an input cannot be read. */
static int driver_load(driver_call *d, char *sizes, char *tensors) {
    d->ns = parse_sizes(sizes, d->sizes);
    d->nt = load_tensors(tensors, d->ptr, d->outs, d->bytes);
    return d->nt < 0 ? 3 : 0;
}

/* A status and its message. */
static int print_status(int s, const char *msg) {
    printf("status %d: %s\n", s, msg);
    return 0;
}

/* After a run that returned s: its status, or each output to its file and the entry that ran. */
static int driver_finish(const driver_call *d, int s) {
    if (s) return print_status(s, d->msg);
    for (int i = 0; i < d->nt; i++)
        if (d->outs[i]) {
            FILE *f = fopen(d->outs[i], "wb");
            fwrite(d->ptr[i], 1, d->bytes[i], f);
            fclose(f);
        }
    printf("entry %d exact %d\n", d->info.entry, d->info.exact);
    return 0;
}
"""

DRIVER = DRIVER_IO + r"""
/* usage: driver OP ATTRS|- SIZES(comma) TENSORS(comma: in:FILE, out:FILE:BYTES or -)
 * Reads each input file whole, runs PFX_run, writes each output; prints "entry E exact X" or
 * "status S: MSG". driver null: the per-op function with NULL args. */
int main(int argc, char **argv) {
    static driver_call d; /* zeroed: no message yet */
    if ((argc == 4 || argc == 5) && !strcmp(argv[1], "lookup")) { /* lookup OP SIZES [ATTRS] */
        long long sz[16];
        int n = 0, exact = -1;
        for (char *t = strtok(argv[3], ","); t && n < 16; t = strtok(NULL, ","))
            sz[n++] = atoll(t);
        int e = PFX_lookup(argv[2], argc == 5 ? argv[4] : NULL, sz, n, &exact);
        printf("lookup %d exact %d\n", e, exact);
        return 0;
    }
    if (argc == 2 && !strcmp(argv[1], "null"))
        return print_status(PFX_fusion_dflare(NULL, &d.info, d.msg, sizeof d.msg), d.msg);
    if (argc == 2 && !strcmp(argv[1], "null-op"))
        return print_status(PFX_run(NULL, NULL, NULL, 0, NULL, 0, NULL, d.msg, sizeof d.msg), d.msg);
    if (argc != 5) return 2;
    if (driver_load(&d, argv[3], argv[4])) return 3;
    return driver_finish(&d, PFX_run(argv[1], strcmp(argv[2], "-") ? argv[2] : NULL, d.sizes, d.ns,
                                     d.ptr, d.nt, &d.info, d.msg, sizeof d.msg));
}
"""


def skip(msg):
    print(f"test_package: skipped: {msg}")
    sys.exit(SKIP)


def stats(median):
    return {"median_s": median, "q1_s": median, "q3_s": median, "iqr_s": 1e-7, "min_s": median,
            "max_s": median, "mean_s": median, "stdev_s": 1e-7, "ci_rel": 0.01, "samples": 30,
            "batch": 1, "converged": True, "total_s": 0.1}


def entry(op, backend, device, shape, attrs, config, median):
    return {"op": op, "backend": backend, "device": device, "shape": shape, "attrs": attrs,
            "config": config, "stats": stats(median), "default": {"config": {}, "stats": stats(2 * median)},
            "speedup": 2.0, "roofline_frac": 0.1,
            "verification": {"max_rel_err": 1e-7, "tolerance": 1e-4, "output": "f", "shape": shape,
                             "reduced": False},
            "tie": [], "environment": {"cpu": "Test CPU", "cores": 2},
            "tuned_at": "2026-12-01T00:00:00Z", "strategy": "exhaustive", "evaluations": 8,
            "space_valid": 8}


FUSION_ATTRS = {"eps": "1e-06", "backward": "0", "dtype": "f32"}
LOSS_ATTRS = {"B": "4", "scheme": "decay", "gamma": "7", "gamma0": "1", "gamma_max": "7",
              "step": "0", "warmup_steps": "0", "alpha": "0.5", "num_seqs": "1", "norm": "default",
              "want_dw": "0", "dtype": "f32"}


def cpu_profile(threads, core):
    """fusion.dflare at tiny.dflare.train (N=48 T=4 H=64 D=3) and at N=480, loss at tiny's
    M=40 H=64 V=320: none of them the default config. The device names the OpenBLAS core
    flaretune runs, as a tuned profile's does."""
    dev = f"cpu: Test CPU x 2 ({core})"
    t2 = min(2, threads)
    fd = [
        entry("fusion.dflare", "cpu", dev, {"N": 48, "T": 4, "H": 64, "D": 3}, FUSION_ATTRS,
              {"strategy": "k_layers", "k": 2, "rows": 1, "stream": 0, "prefetch": 8,
               "threads": t2}, 8e-6),
        entry("fusion.dflare", "cpu", dev, {"N": 480, "T": 4, "H": 64, "D": 3}, FUSION_ATTRS,
              {"strategy": "per_layer", "k": 2, "rows": 16, "stream": 1, "prefetch": 0,
               "threads": 1}, 5e-5),
    ]
    ls = entry("loss", "cpu", dev, {"M": 40, "H": 64, "V": 320}, LOSS_ATTRS,
               {"strategy": "online", "chunk": 16, "vtile": 256, "parallel": "vocab",
                "threads": t2}, 3e-5)
    return {"schema_version": 1, "generator": "test_package", "entries": fd + [ls]}


def config_text(e):
    return ",".join(f"{k}={v}" for k, v in e["config"].items())


def exec_op(ft, op, cfg, tmp, name, sets=()):
    ins, outs = os.path.join(tmp, name + "_in"), os.path.join(tmp, name + "_out")
    cmd = [ft, "exec", op, "--preset", "tiny.dflare.train", "--backend", "cpu", "--config", cfg,
           "--save-inputs", ins, "--out", outs, "--quiet"]
    for s in sets:
        cmd += ["--set", s]
    run(cmd)
    return ins, outs


class Package:
    def __init__(self, root, build):
        self.root, self.build = root, build
        self.driver = os.path.join(build, "driver")
        self.env = None


def build_package(pkg, tmp, prefix):
    """CMake alone for the library, then the driver against its header and archive."""
    build = os.path.join(tmp, "pkg-build")
    # Built as flaretune was (bit for bit needs the same optimisation and instruction set).
    run(["cmake", "-S", pkg, "-B", build, f"-DCMAKE_BUILD_TYPE={BUILD['type']}",
         f"-D{prefix.upper()}_NATIVE={BUILD['native']}"])
    run(["cmake", "--build", build, "-j2"])
    src = os.path.join(tmp, "driver.c")
    with open(src, "w") as f:
        f.write(DRIVER.replace("PFX", prefix))
    cache = open(os.path.join(build, "CMakeCache.txt")).read()
    blas = [l.split("=", 1)[1] for l in cache.splitlines() if l.startswith(f"{prefix.upper()}_OPENBLAS_LIB:")][0]
    cc = os.environ.get("CC", "cc")
    run([cc, "-O2", "-std=c11", "-Wall", "-Wextra", "-Werror", "-I", os.path.join(pkg, "include"),
         src, os.path.join(build, f"lib{prefix}.a"), blas, "-fopenmp", "-lm", "-o",
         os.path.join(build, "driver")])
    return Package(pkg, build)


def run_driver(p, op, attrs, sizes, tensors):
    args = [p.driver, op, attrs or "-", ",".join(str(s) for s in sizes), ",".join(tensors)]
    return run(args, env=p.env).stdout.strip()


def blas_core(ft):
    """The OpenBLAS core flaretune runs its GEMMs on (`flaretune version`)."""
    for line in run([ft, "version"]).stdout.splitlines():
        words = line.split()
        if words[:2] == ["blas", "core"] and len(words) > 2:
            return words[2]
    fail("`flaretune version` names no blas core")


def driver_tensors(np, spec, ins, outs, tmp, in_stem, out_stem):
    """The driver's TENSORS for spec ([(name, role)] in the op's tensor order; role in/out/none):
    each input of exec's (ins) written to tmp/IN_STEM.NAME.bin, each output to go to
    tmp/OUT_STEM.NAME.got at the size of exec's (outs)."""
    tensors = []
    for name, role in spec:
        if role == "in":
            path = os.path.join(tmp, f"{in_stem}.{name}.bin")
            np.load(os.path.join(ins, name + ".npy")).tofile(path)
            tensors.append("in:" + path)
        elif role == "out":
            a = np.load(os.path.join(outs, name + ".npy"))
            tensors.append(f"out:{os.path.join(tmp, out_stem + '.' + name + '.got')}:{a.nbytes}")
        else:
            tensors.append("-")
    return tensors


def output_diff(np, outs, name, got):
    """None where the driver's output in the file got equals exec's (outs) bit for bit, else the
    largest |difference|."""
    want = np.load(os.path.join(outs, name + ".npy"))
    have = np.fromfile(got, dtype=want.dtype).reshape(want.shape)
    if want.tobytes() == have.tobytes():
        return None
    return np.max(np.abs(want.astype(np.float64) - have.astype(np.float64)))


def check_op(np, p, op, attrs, sizes, ins, outs, spec, tmp, want_entry, want_exact):
    """spec: [(name, role)] in the op's tensor order; role in/out/none."""
    tensors = driver_tensors(np, spec, ins, outs, tmp, op, op)
    got = run_driver(p, op, attrs, sizes, tensors)
    if got != f"entry {want_entry} exact {want_exact}":
        fail(f"{op} at {sizes}: driver said '{got}', expected entry {want_entry} exact {want_exact}")
    for name, role in spec:
        if role != "out":
            continue
        diff = output_diff(np, outs, name, os.path.join(tmp, f"{op}.{name}.got"))
        if diff is not None:
            fail(f"{op} at {sizes}: output {name} differs from flaretune exec's (max |diff| {diff})")


def expect_error(p, op, attrs, sizes, tensors, words, what):
    got = run_driver(p, op, attrs, sizes, tensors)
    if not got.startswith("status ") or got.startswith("status 0"):
        fail(f"{what}: expected an error, driver said '{got}'")
    for w in words:
        if w not in got:
            fail(f"{what}: message '{got}' lacks '{w}'")
    if "\n" in got:
        fail(f"{what}: message is not one line: {got!r}")


FUSION_SPEC = [("x", "in"), ("w", "in"), ("g", "in"), ("f", "out"), ("df", "none"),
               ("dx", "none"), ("dw", "none"), ("dg", "none")]
LOSS_SPEC = [("h", "in"), ("w_lm", "in"), ("labels", "in"), ("mask", "in"), ("loss", "out"),
             ("ce", "out"), ("q", "out"), ("w", "out"), ("dh", "out"), ("dw_lm", "none"),
             ("g_norm", "none"), ("dg", "none")]


def test_cpu(np, ft, tmp):
    threads = os.cpu_count() or 1
    core = blas_core(ft)
    prof = cpu_profile(threads, core)
    ppath = os.path.join(tmp, "cpu.json")
    json.dump(prof, open(ppath, "w"))
    pkg = os.path.join(tmp, "out", "cpu-pkg")
    r = run([ft, "emit", ppath, "--format", "package", "-o", pkg, "--prefix", "tk"])
    if not re.fullmatch(r"wrote %s: a source package of \d+ entr(y|ies) \(docs/emit\.md\)\n"
                        % re.escape(pkg), r.stderr) or r.stdout:
        fail(f"emit --format package says what it wrote in one line on stderr: {r.stdout!r} "
             f"{r.stderr!r}")
    for f in ["README.md", "CMakeLists.txt", "include/tk.h", "src/tk_entries.c",
              "src/kernels/fusion/fusion_cpu.c", "src/kernels/loss/loss_cpu.c"]:
        if not os.path.isfile(os.path.join(pkg, f)):
            fail(f"package lacks {f}")
    if [n for n in os.listdir(os.path.dirname(pkg)) if n != "cpu-pkg"]:
        fail(f"emit left something beside the package: {os.listdir(os.path.dirname(pkg))}")
    readme = open(os.path.join(pkg, "README.md")).read()
    if "strategy=k_layers" not in readme or "N=480" not in readme:
        fail("README's entries table lacks an entry")
    if f'#define TK_BLAS_CORE "{core}"' not in open(os.path.join(pkg, "include", "tk.h")).read():
        fail(f"the header does not name the OpenBLAS core {core}")
    p = build_package(pkg, tmp, "tk")
    # The package's README: run on the core the entries were tuned with.
    p.env = dict(os.environ, OPENBLAS_CORETYPE=core)

    fd0, fd1, ls = prof["entries"]
    ins, outs = exec_op(ft, "fusion.dflare", config_text(fd0), tmp, "fd")
    check_op(np, p, "fusion.dflare", None, [48, 4, 64, 3], ins, outs, FUSION_SPEC, tmp, 0, 1)
    ins, outs = exec_op(ft, "loss", config_text(ls), tmp, "ls")
    check_op(np, p, "loss", "B=4", [40, 64, 320], ins, outs, LOSS_SPEC, tmp, 2, 1)
    # N=300 is not in the profile: nearer 480 than 48 (|log 300/480| < |log 300/48|).
    ins, outs = exec_op(ft, "fusion.dflare", config_text(fd1), tmp, "fdn", ["N=300"])
    check_op(np, p, "fusion.dflare", "eps=1e-6", [300, 4, 64, 3], ins, outs, FUSION_SPEC, tmp, 1, 0)
    return p, ins


# Every op's args struct, field by field, as C and as C++: attention.train's tensor "do" (a
# keyword of both) is the field do_ (docs/emit.md, "field names").
EVERY_OP_USE = r"""
#include "PFX.h"

int main(void) {
    static float t[4];
    static PFX_attention_train_args a;
    a.q = t;
    a.do_ = t;
    a.dq = t;
    a.attrs = "backward=1";
    static PFX_fusion_dflare_args f;
    f.x = t;
    static PFX_loss_args l;
    l.h = t;
    static PFX_linear_args n;
    n.x = t;
    return (a.do_ == t && f.x == t && l.h == t && n.x == t) ? 0 : 1;
}
"""
TRAIN_SPEC = [("q", "in"), ("k_ctx", "in"), ("v_ctx", "in"), ("k_blk", "in"), ("v_blk", "in"),
              ("anchors", "in"), ("keep", "in"), ("o", "out"), ("lse", "out"), ("do", "none"),
              ("dq", "none"), ("dk_ctx", "none"), ("dv_ctx", "none"), ("dk_blk", "none"),
              ("dv_blk", "none")]


def test_every_op(np, ft, tmp):
    """A profile of every op (a short real tune of each at the tiny preset, as `make run`
    writes one) gives a package that CMake builds, whose header compiles as C and C++ with every
    op's fields, and whose attention.train equals exec's bit for bit."""
    prof, log = os.path.join(tmp, "every.json"), os.path.join(tmp, "every.jsonl")
    run([ft, "tune", "all", "--preset", "tiny.dflare.train", "--backend", "cpu", "--budget", "2",
         "--confirm", "1", "--max-time", "0.003", "--profile", prof, "--log", log, "--quiet"])
    entries = json.load(open(prof))["entries"]
    ops = {e["op"] for e in entries}
    if len(ops) != 7 or "attention.train" not in ops:
        fail(f"tune all wrote entries of {sorted(ops)}, expected every op")
    pkg = os.path.join(tmp, "every-pkg")
    run([ft, "emit", prof, "--backend", "cpu", "--format", "package", "-o", pkg, "--prefix", "te"])
    header = open(os.path.join(pkg, "include", "te.h")).read()
    if "*do_;" not in header or "(tensor 'do')" not in header:
        fail("the header does not name attention.train's tensor 'do' as the field do_")
    os.mkdir(os.path.join(tmp, "every"))
    p = build_package(pkg, os.path.join(tmp, "every"), "te")
    src = os.path.join(tmp, "every", "use.c")
    with open(src, "w") as f:
        f.write(EVERY_OP_USE.replace("PFX", "te"))
    inc = os.path.join(pkg, "include")
    run([os.environ.get("CC", "cc"), "-std=c11", "-Wall", "-Wextra", "-Werror", "-pedantic",
         "-fsyntax-only", "-I", inc, src])
    cxx = shutil.which(os.environ.get("CXX", "c++"))
    if cxx:
        run([cxx, "-std=c++20", "-Wall", "-Wextra", "-Werror", "-fsyntax-only", "-x", "c++",
             "-I", inc, src])
    core = blas_core(ft)
    p.env = dict(os.environ, OPENBLAS_CORETYPE=core)
    train = [i for i, e in enumerate(entries) if e["op"] == "attention.train"][0]
    ins, outs = exec_op(ft, "attention.train", config_text(entries[train]), tmp, "every_tr")
    sizes = [entries[train]["shape"][s] for s in ("nseq", "S", "NB", "B", "Hq", "Hkv", "dh")]
    check_op(np, p, "attention.train", None, sizes, ins, outs, TRAIN_SPEC,
             os.path.join(tmp, "every"), train, 1)


def test_bad_input(p, ins, tmp):
    x, w, g = (f"in:{os.path.join(tmp, 'fusion.dflare.' + n + '.bin')}" for n in ("x", "w", "g"))
    out = "out:" + os.path.join(tmp, "bad.got") + ":" + str(3 * 300 * 64 * 4)
    ok = [x, w, g, out, "-", "-", "-", "-"]
    expect_error(p, "fusion.dflare", None, [300, 4, 64, 3], [x, w, g, "-", "-", "-", "-", "-"],
                 ["tensor 'f' is NULL"], "a NULL output")
    expect_error(p, "fusion.dflare", None, [300, 0, 64, 3], ok, ["size T = 0"], "a zero size")
    expect_error(p, "fusion.dflare", None, [300, 4, 64], ok, ["expected 4 sizes"], "three sizes")
    # Sizes whose byte counts overflow 64 bits: refused before a kernel runs (nothing is read).
    expect_error(p, "fusion.dflare", None, [2 ** 62, 4, 64, 3], ok, ["too large", "64 bits"],
                 "N = 2^62")
    expect_error(p, "fusion.dflare", None, [2 ** 30, 2 ** 17, 2 ** 17, 3], ok, ["too large"],
                 "x of 2^64 elements")
    expect_error(p, "fusion.dflare", "bogus=1", [300, 4, 64, 3], ok, ["bogus"], "an unknown attribute")
    expect_error(p, "fusion.dflare", "eps=1e-6,eps=1e-5", [300, 4, 64, 3], ok,
                 ["'eps' given twice"], "a repeated attribute")
    expect_error(p, "fusion.dflare", "backward=1", [300, 4, 64, 3],
                 [x, w, g, out, x, x, w, g],
                 ["no entry has these attributes (backward: the call's 1, entry 0's 0)"],
                 "other attributes")
    expect_error(p, "fusion.dflash", None, [300, 4, 64, 256], ok, ["not in this package"],
                 "an op not in the package")
    got = run([p.driver, "null"], env=p.env).stdout.strip()
    if got != "status 1: fusion.dflare: args is NULL":
        fail(f"NULL args: driver said '{got}'")
    got = run([p.driver, "null-op"], env=p.env).stdout.strip()
    if got != "status 1: which op? (op is NULL)":
        fail(f"a NULL op (the header: EINVAL for a NULL pointer): driver said '{got}'")
    # The lookup refuses what a run refuses (the header: -1 when the arguments are bad).
    for sizes, want in (("48,4,64,3", "lookup 0 exact 1"), ("0,4,64,3", "lookup -1 exact 0"),
                        ("48,4,-5,3", "lookup -1 exact 0")):
        got = run([p.driver, "lookup", "fusion.dflare", sizes], env=p.env).stdout.strip()
        if got != want:
            fail(f"lookup at {sizes}: driver said '{got}', expected '{want}'")
    # Attributes that change nothing without others (the loss's eps without final_norm, epoch
    # and gamma_inc without progressive_epoch) do not keep a call from its entry, as in the
    # profile; one that changes the call does.
    for attrs, want in (("B=4", "lookup 2 exact 1"), ("B=4,eps=1e-5,epoch=1.5,gamma_inc=2", "lookup 2 exact 1"),
                        ("B=4,final_norm=1", "lookup -1 exact 0")):
        got = run([p.driver, "lookup", "loss", "40,64,320", attrs], env=p.env).stdout.strip()
        if got != want:
            fail(f"lookup of loss with {attrs}: driver said '{got}', expected '{want}'")
    # A message of the op's own checks says what to set in a call (its attrs), not a flag.
    lt = [f"in:{os.path.join(tmp, 'loss.' + n + '.bin')}" for n in ("h", "w_lm", "labels", "mask")]
    outs = [f"out:{os.path.join(tmp, 'bad.' + n)}:4096" for n in ("loss", "ce", "q", "w", "dh")]
    expect_error(p, "loss", "B=16", [40, 64, 320], lt + outs + ["-", "-", "-"],
                 ["whole number of blocks", "\"B=...\" in the call's attrs"], "M not whole blocks")


def test_refusals(ft, tmp, source):
    cpu = json.load(open(os.path.join(tmp, "cpu.json")))
    h200 = json.load(open(os.path.join(source, "profiles", "h200.json")))
    both = {"schema_version": 1, "generator": "test_package",
            "entries": cpu["entries"] + h200["entries"]}
    path = os.path.join(tmp, "both.json")
    json.dump(both, open(path, "w"))
    parent = os.path.join(tmp, "refused")
    os.mkdir(parent)
    target = os.path.join(parent, "pkg")
    r = run([ft, "emit", path, "--format", "package", "-o", target], ok=False)
    # (Notes about the h200 entries' former parameter names come first.)
    msg = "\n".join(l for l in r.stderr.strip().splitlines() if "note:" not in l)
    if r.returncode == 0 or "'cpu'" not in msg or "'cuda'" not in msg or "--backend" not in msg:
        fail(f"two backends: exit {r.returncode}, message '{msg}'")
    if len(msg.splitlines()) != 1:
        fail(f"two backends: the refusal is not one line: {msg!r}")
    if os.listdir(parent):
        fail(f"two backends: something was written: {os.listdir(parent)}")
    os.mkdir(target)
    with open(os.path.join(target, "keep.txt"), "w") as f:
        f.write("mine\n")
    r = run([ft, "emit", path, "--backend", "cpu", "--format", "package", "-o", target], ok=False)
    if r.returncode == 0 or "not empty" not in r.stderr:
        fail(f"non-empty DIR: exit {r.returncode}, message '{r.stderr.strip()}'")
    if os.listdir(target) != ["keep.txt"] or open(os.path.join(target, "keep.txt")).read() != "mine\n":
        fail("non-empty DIR: its contents changed")
    if sorted(os.listdir(parent)) != ["pkg"]:
        fail(f"non-empty DIR: something was left beside it: {os.listdir(parent)}")
    # A source tree that lacks the loss family: the copy fails halfway, and nothing is left.
    partial = os.path.join(tmp, "partial-src")
    os.makedirs(os.path.join(partial, "kernels"))
    for d in ("core", "include", "profiles"):
        os.symlink(os.path.join(source, d), os.path.join(partial, d))
    for d in ("cpu", "op", "fusion", "cuda"):
        os.symlink(os.path.join(source, "kernels", d), os.path.join(partial, "kernels", d))
    other = os.path.join(parent, "other")
    r = run([ft, "emit", path, "--backend", "cpu", "--format", "package", "-o", other], ok=False,
            env=dict(os.environ, FLARETUNE_SOURCE_DIR=partial))
    if r.returncode == 0 or "loss" not in r.stderr:
        fail(f"a missing source: exit {r.returncode}, message '{r.stderr.strip()}'")
    if sorted(os.listdir(parent)) != ["pkg"]:
        fail(f"a missing source: something was left behind: {os.listdir(parent)}")
    # Any thread count the profile reader takes is packaged (run with the cores there are).
    for threads in (65536, 2147483647):
        odd = json.loads(json.dumps(cpu))
        odd["entries"][0]["config"]["threads"] = threads
        odd_path = os.path.join(tmp, "odd.json")
        json.dump(odd, open(odd_path, "w"))
        odd_pkg = os.path.join(tmp, f"odd-{threads}")
        r = run([ft, "emit", odd_path, "--format", "package", "-o", odd_pkg], ok=False)
        if r.returncode != 0 or "3 entries" not in r.stderr:
            fail(f"threads={threads}: exit {r.returncode}, {r.stderr.strip()!r}")
    r = run([ft, "emit", path, "--backend", "cpu", "--format", "package"], ok=False)
    if r.returncode == 0 or "-o DIR" not in r.stderr:
        fail(f"no -o: exit {r.returncode}, message '{r.stderr.strip()}'")
    # A prefix whose names the copied sources already use (ft: FT_OK, ft_status) is refused in
    # one line before anything is written, rather than giving a package that does not compile.
    for prefix in ("ft", "ft_op", "FT"):
        r = run([ft, "emit", path, "--backend", "cpu", "--format", "package", "-o", other,
                 "--prefix", prefix], ok=False)
        msg = "\n".join(l for l in r.stderr.strip().splitlines() if "note:" not in l)
        if r.returncode == 0 or f"prefix '{prefix}'" not in msg or "\n" in msg:
            fail(f"--prefix {prefix}: exit {r.returncode}, message '{msg}'")
        if sorted(os.listdir(parent)) != ["pkg"]:
            fail(f"--prefix {prefix}: something was written: {os.listdir(parent)}")


def test_target(ft, tmp):
    """Where the package goes: the umask's permissions for a new DIR, an existing empty DIR's
    kept; a link to an empty directory followed; temporary trees that killed emits left beside
    DIR removed by the next emit (one an emit still writes is kept); a write that fails says
    why and leaves nothing behind."""
    import fcntl
    import resource
    import signal
    import stat
    prof = os.path.join(tmp, "cpu.json")
    base = os.path.join(tmp, "targets")
    os.mkdir(base)

    def emit(target, ok=True, pre=None):
        return run([ft, "emit", prof, "--backend", "cpu", "--format", "package", "-o", target,
                    "--prefix", "tk"], ok=ok, preexec_fn=pre)

    def mode(path):
        return stat.S_IMODE(os.stat(path).st_mode)

    new = os.path.join(base, "new")
    emit(new, pre=lambda: os.umask(0o022))
    if mode(new) != 0o755 or mode(os.path.join(new, "src")) != 0o755:
        fail(f"umask 022: the package is {mode(new):o}, src/ {mode(os.path.join(new, 'src')):o}")
    kept = os.path.join(base, "kept")
    os.mkdir(kept)
    os.chmod(kept, 0o750)
    emit(kept, pre=lambda: os.umask(0o022))
    if mode(kept) != 0o750 or not os.path.isfile(os.path.join(kept, "include", "tk.h")):
        fail(f"an existing empty DIR: mode {mode(kept):o} (expected 750), or no package in it")
    real, link = os.path.join(base, "real"), os.path.join(base, "link")
    os.mkdir(real)
    os.symlink(real, link)
    r = emit(link, ok=False)
    if r.returncode != 0 or not os.path.islink(link) or \
            not os.path.isfile(os.path.join(real, "include", "tk.h")):
        fail(f"-o a link to an empty directory: exit {r.returncode}, '{r.stderr.strip()}'")
    # Killed emits leave their temporary trees; the next emit to that DIR removes them, but not
    # one another emit still holds.
    stale = os.path.join(base, ".again.tmp-abc123")
    os.makedirs(os.path.join(stale, "src"))
    busy = os.path.join(base, ".again.tmp-xyz789")
    os.mkdir(busy)
    fd = os.open(busy, os.O_RDONLY)
    fcntl.flock(fd, fcntl.LOCK_EX)
    emit(os.path.join(base, "again"))
    os.close(fd)
    left = sorted(n for n in os.listdir(base) if n.startswith(".again"))
    if left != [".again.tmp-xyz789"]:
        fail(f"stale temporary trees beside DIR after a new emit: {left}")
    # An emit killed mid-write: its sources are a tree whose loss kernel is a FIFO nobody writes,
    # so it waits there with its temporary tree half written.
    source = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    slow = os.path.join(tmp, "slow-src")
    os.makedirs(os.path.join(slow, "kernels", "loss"))
    for d in ("core", "include", "profiles"):
        os.symlink(os.path.join(source, d), os.path.join(slow, d))
    for d in os.listdir(os.path.join(source, "kernels")):
        if d != "loss":
            os.symlink(os.path.join(source, "kernels", d), os.path.join(slow, "kernels", d))
    for f in os.listdir(os.path.join(source, "kernels", "loss")):
        if f != "loss_cpu.c":
            os.symlink(os.path.join(source, "kernels", "loss", f),
                       os.path.join(slow, "kernels", "loss", f))
    os.mkfifo(os.path.join(slow, "kernels", "loss", "loss_cpu.c"))
    p = subprocess.Popen([ft, "emit", prof, "--backend", "cpu", "--format", "package", "-o",
                          os.path.join(base, "killed"), "--prefix", "tk"],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                         env=dict(os.environ, FLARETUNE_SOURCE_DIR=slow))
    deadline = time.time() + 60
    while time.time() < deadline and p.poll() is None and \
            not os.path.isdir(os.path.join(base, "killed")) and \
            not [n for n in os.listdir(base) if n.startswith(".killed.tmp-")]:
        time.sleep(0.01)
    time.sleep(0.2)
    p.kill()
    p.wait()
    if not [n for n in os.listdir(base) if n.startswith(".killed.tmp-")]:
        fail(f"the emit to kill did not reach its temporary tree: {os.listdir(base)}")
    emit(os.path.join(base, "killed"))
    left = [n for n in os.listdir(base) if n.startswith(".killed")]
    if left:
        fail(f"a killed emit's temporary tree outlived the next emit: {left}")

    def small_files():
        resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096))
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    full = os.path.join(base, "full")
    r = emit(full, ok=False, pre=small_files)
    msg = r.stderr.strip()
    if r.returncode == 0 or "write failed: File too large" not in msg or "\n" in msg:
        fail(f"a write that fails: exit {r.returncode}, message '{msg}'")
    # ... naming the file as the package would have it, not the removed temporary tree.
    if not re.search(r"^flaretune: emit: %s/src/\S+: write failed" % re.escape(full), msg) or \
            ".tmp-" in msg:
        fail(f"a write that fails names the output given: '{msg}'")
    if [n for n in os.listdir(base) if n.startswith(".full") or n == "full"]:
        fail(f"a write that fails left something: {os.listdir(base)}")
    with open("/dev/full", "w") as devfull:
        r = subprocess.run([ft, "emit", prof, "--format", "c-header"], stdout=devfull,
                           stderr=subprocess.PIPE, text=True)
    if r.returncode == 0 or "No space left on device" not in r.stderr:
        fail(f"emit to a full stdout: exit {r.returncode}, '{r.stderr.strip()}'")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--flaretune", required=True)
    ap.add_argument("--source", default=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    ap.add_argument("--build-type", default="Release", help="flaretune's CMAKE_BUILD_TYPE")
    ap.add_argument("--native", default="ON", help="flaretune's FT_NATIVE")
    a = ap.parse_args()
    BUILD.update(type=a.build_type or "Release", native=a.native)
    try:
        import numpy as np
    except ImportError:
        skip("no numpy (apt-get install python3-numpy)")
    for tool in ("cmake", os.environ.get("CC", "cc")):
        if not shutil.which(tool):
            skip(f"no {tool} to build the package with")
    t0 = time.time()
    keep = os.environ.get("FT_TEST_KEEP")
    with tempfile.TemporaryDirectory(prefix="ft_test_package.") as tmp:
        if keep:
            tmp = keep
            os.makedirs(tmp)
        p, ins = test_cpu(np, a.flaretune, tmp)
        test_bad_input(p, ins, tmp)
        test_refusals(a.flaretune, tmp, a.source)
        test_target(a.flaretune, tmp)
        test_every_op(np, a.flaretune, tmp)
        t_cpu = time.time() - t0
        test_cuda(np, a.flaretune, tmp, a.source)
    print(f"test_package: ok (cpu {t_cpu:.1f} s, all {time.time() - t0:.1f} s)")


CUDA_DRIVER = DRIVER_IO.replace("PFX", "tg") + r"""
/* usage: driver DEVICE OP ATTRS|- SIZES(comma) TENSORS(comma: in:FILE, out:FILE:BYTES or -):
 * runs tg_run on DEVICE, writes each output, prints "entry E exact X" or "status S: MSG".
 * driver DEVICE null: the per-op function with NULL args. driver lookup: the lookup alone. */

static int lookup(void) {
    tg_info info;
    char msg[256];
    const long long exact[] = {48, 4, 64, 3}, near[] = {6000, 4, 64, 3};
    /* want_dx is not in the profile (it leaves it out at its default): the entries list it. */
    int s = tg_select("fusion.dflare", "backward=0,want_dx=1", exact, 4, &info, msg, sizeof msg);
    printf("exact %d %d %d\n", s, info.entry, info.exact);
    /* Numbers compare by value: the entries write eps as 1e-06. */
    s = tg_select("fusion.dflare", "dtype=f32,eps=0.000001", near, 4, &info, msg, sizeof msg);
    printf("near %d %d %d\n", s, info.entry, info.exact);
    const tg_module *m = &tg_entries[info.entry].modules[0];
    printf("module %s %s %zu %s %d %s\n", m->source, m->cubin_file, m->cubin_size,
           m->kernels[0].name, m->kernels[0].block_threads, m->cache_key);
    s = tg_select("fusion.dflare", NULL, near, 3, &info, msg, sizeof msg);
    printf("bad %d %s\n", s, msg);
    s = tg_select("loss", NULL, near, 3, &info, msg, sizeof msg);
    printf("bad %d %s\n", s, msg);
    s = tg_select("fusion.dflare", "backward=2", near, 4, &info, msg, sizeof msg);
    printf("bad %d %s\n", s, msg);
    const long long zero[] = {0, 4, 64, 3}, neg[] = {48, 4, -5, 3};
    int ex = -1, z = tg_lookup("fusion.dflare", NULL, zero, 4, &ex);
    printf("sizes below 1: %d %d", z, ex);
    printf(" %d\n", tg_lookup("fusion.dflare", NULL, neg, 4, NULL));
    return 0;
}

int main(int argc, char **argv) {
    static driver_call d; /* zeroed: no message yet */
    if (argc == 2 && !strcmp(argv[1], "lookup")) return lookup();
    if (argc == 3 && !strcmp(argv[2], "null"))
        return print_status(tg_fusion_dflare(NULL, &d.info, d.msg, sizeof d.msg), d.msg);
    if (argc != 6) return 2;
    if (driver_load(&d, argv[4], argv[5])) return 3;
    return driver_finish(&d, tg_run(argv[1], argv[2], strcmp(argv[3], "-") ? argv[3] : NULL, d.sizes,
                                    d.ns, d.ptr, d.nt, &d.info, d.msg, sizeof d.msg));
}
"""

# A program that builds the package as its README says (add_subdirectory) and links the driver.
CUDA_APP = """cmake_minimum_required(VERSION 3.18)
project(tg_app LANGUAGES C)
add_subdirectory({pkg} tg)
add_executable(driver driver.c)
target_link_libraries(driver PRIVATE tg)
"""

CUDA_DEVICE = "cuda: NVIDIA H200 (sm_90a, 132 SMs, 60 MiB L2, 140 GiB, driver 13.0, runtime 13.0)"


def cuda_profile():
    """fusion.dflare on cuda at tiny.dflare.train (N=48 T=4 H=64 D=3) and at N=480, forward f32:
    non-default valid configs of the CUDA space (registers, k_layers; shared memory,
    per_layer), tuned (so the device string says) on an H200."""
    attrs = {"eps": "1e-06", "backward": "0", "dtype": "f32"}
    return {"schema_version": 1, "generator": "test_package", "entries": [
        entry("fusion.dflare", "cuda", CUDA_DEVICE, {"N": 48, "T": 4, "H": 64, "D": 3}, attrs,
              {"strategy": "k_layers", "k": 2, "vec_bytes": 8, "vecs_per_thread": 1,
               "rows_per_block": 2, "stage": "reg"}, 5e-6),
        entry("fusion.dflare", "cuda", CUDA_DEVICE, {"N": 480, "T": 4, "H": 64, "D": 3}, attrs,
              {"strategy": "per_layer", "vec_bytes": 4, "rows_per_block": 4, "stage": "smem"},
              6e-6),
    ]}


def cubin_info(path):
    """(e_machine, e_flags, kernel names) of a cubin (an ELF file: .text.NAME per kernel)."""
    d = open(path, "rb").read()
    if d[:4] != b"\x7fELF" or d[4] != 2:
        fail(f"{path} is not a 64-bit ELF file")
    machine, flags = struct.unpack_from("<H", d, 18)[0], struct.unpack_from("<I", d, 48)[0]
    shoff = struct.unpack_from("<Q", d, 40)[0]
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", d, 58)
    secs = [struct.unpack_from("<IIQQQQ", d, shoff + i * shentsize) for i in range(shnum)]
    strtab = secs[shstrndx][4]
    names = [d[strtab + sec[0]:d.index(b"\0", strtab + sec[0])].decode() for sec in secs]
    return machine, flags, {n[len(".text."):] for n in names if n.startswith(".text.")}


def check_cubin(path, kernels, what):
    machine, flags, found = cubin_info(path)
    # EM_CUDA; the SM version in bits 8-15 of e_flags (0x5a: 90).
    if machine != 190 or (flags >> 8) & 0xff != 90:
        fail(f"{what}: {path} is not a cubin for sm_90 (machine {machine}, flags {flags:#x})")
    if not kernels or not set(kernels) <= found:
        fail(f"{what}: {path} holds {sorted(found)}, expected {kernels}")
    tool = shutil.which("cuobjdump") or shutil.which("cuobjdump", path="/usr/local/cuda/bin")
    if tool:
        out = run([tool, "--dump-resource-usage", path]).stdout
        for k in kernels:
            if k not in out:
                fail(f"{what}: cuobjdump does not list {k} in {path}")
    return flags


def test_cuda_h200(ft, tmp, source, env):
    """profiles/h200.json's entries: a package whose cubins are for sm_90a and hold the kernels
    its README names. False when this flaretune has no CUDA toolkit."""
    h200 = os.path.join(source, "profiles", "h200.json")
    pkg = os.path.join(tmp, "cuda-pkg")
    r = run([ft, "emit", h200, "--format", "package", "-o", pkg, "--backend", "cuda",
             "--prefix", "tg"], ok=False, env=env)
    if r.returncode != 0 and "without the CUDA toolkit" in r.stderr:
        print("test_package: cuda: this flaretune has no CUDA toolkit: the CUDA package is not "
              "checked")
        return False
    if r.returncode != 0:
        fail(f"emit of the CUDA package exited {r.returncode}: {r.stderr.strip()}")
    readme = open(os.path.join(pkg, "README.md")).read()
    for i in range(len(json.load(open(h200))["entries"])):
        m = re.search(rf"\| b{i}_m0 \(([^)]*)\)", readme)
        if not m:
            fail(f"the CUDA package's README names no kernels for entry {i}")
        kernels = [k.strip() for k in m.group(1).split(",")]
        path = os.path.join(pkg, "cubin", f"b{i}_m0.sm_90a.cubin")
        if not os.path.isfile(path) or not os.path.isfile(os.path.join(pkg, "cuda", f"b{i}_m0.cu")):
            fail(f"the CUDA package lacks entry {i}'s source or cubin")
        check_cubin(path, kernels, "NVRTC's cubin")
    return True


def exec_cuda(ft, cfg, tmp, name, backend, env, sets=()):
    ins, outs = os.path.join(tmp, name + "_in"), os.path.join(tmp, name + "_out")
    cmd = [ft, "exec", "fusion.dflare", "--preset", "tiny.dflare.train", "--backend", backend,
           "--config", cfg, "--save-inputs", ins, "--out", outs, "--quiet"]
    for s in sets:
        cmd += ["--set", s]
    return run(cmd, ok=False, env=env), ins, outs


def test_cuda(np, ft, tmp, source):
    """A CUDA profile of tiny shapes: the package built with CMake (as a program using it
    would: add_subdirectory), its runs on cuda-emu bit for bit against exec --backend cuda-emu
    (exact and nearest), the lookup, bad input, and "cuda": where there is no GPU a one-line
    status, where there is one (a device check) outputs bit for bit against exec --backend cuda."""
    exec_env = dict(os.environ, FLARETUNE_CACHE_DIR=os.path.join(tmp, "cache-exec"))
    if not test_cuda_h200(ft, tmp, source, exec_env):
        return
    prof = cuda_profile()
    ppath = os.path.join(tmp, "cuda.json")
    json.dump(prof, open(ppath, "w"))
    pkg = os.path.join(tmp, "tiny-pkg")
    run([ft, "emit", ppath, "--format", "package", "-o", pkg, "--prefix", "tg"], env=exec_env)
    app, build = os.path.join(tmp, "tg-app"), os.path.join(tmp, "tg-build")
    os.mkdir(app)
    with open(os.path.join(app, "driver.c"), "w") as f:
        f.write(CUDA_DRIVER)
    with open(os.path.join(app, "CMakeLists.txt"), "w") as f:
        f.write(CUDA_APP.format(pkg=pkg))
    run(["cmake", "-S", app, "-B", build, f"-DCMAKE_BUILD_TYPE={BUILD['type']}",
         f"-DTG_NATIVE={BUILD['native']}"])
    run(["cmake", "--build", build, "-j2"])
    gpu = os.path.join(build, "tg", "CMakeFiles", "tg.dir", "src", "kernels", "cuda", "device_cuda.c.o")
    if not os.path.isfile(gpu):
        fail("the CUDA package's build did not compile its GPU device layer (device_cuda.c)")
    p = Package(pkg, build)
    p.driver = os.path.join(build, "driver")
    # The package's own kernel cache (it compiles its copies); exec's OpenBLAS core.
    p.env = dict(os.environ, FLARETUNE_CACHE_DIR=os.path.join(tmp, "cache-pkg"),
                 OPENBLAS_CORETYPE=blas_core(ft))
    out = run([p.driver, "lookup"], env=p.env).stdout.splitlines()
    if out[0] != "exact 0 0 1" or out[1] != "near 0 1 0":
        fail(f"the CUDA package's lookup: {out[:2]}")
    if not re.match(r"module cuda/b1_m0\.cu cubin/b1_m0\.sm_90a\.cubin \d+ dflare_fwd_smem \d+ [0-9a-f]{32}$",
                    out[2]):
        fail(f"the CUDA package's module: {out[2]}")
    for line, words in zip(out[3:], (["expected 4 sizes"], ["not in this package"],
                                     ["no entry has the attributes"])):
        if not line.startswith("bad ") or line.startswith("bad 0") or not all(w in line for w in words):
            fail(f"the CUDA package's bad input: '{line}'")
    if out[6] != "sizes below 1: -1 0 -1":
        fail(f"the CUDA package's lookup at sizes below 1: '{out[6]}' (its header: -1)")

    e0, e1 = prof["entries"]
    runs = [(config_text(e0), (), [48, 4, 64, 3], 0, 1, "ce"),
            (config_text(e1), ("N=300",), [300, 4, 64, 3], 1, 0, "cn")]
    for cfg, sets, sizes, want_entry, want_exact, name in runs:
        r, ins, outs = exec_cuda(ft, cfg, tmp, name, "cuda-emu", exec_env, sets)
        if r.returncode != 0:
            fail(f"exec --backend cuda-emu --config {cfg}: {r.stderr.strip()}")
        check_cuda(np, p, "cuda-emu", sizes, ins, outs, tmp, want_entry, want_exact)
    x, w, g = (f"in:{os.path.join(tmp, 'fusion.dflare.' + n + '.bin')}" for n in ("x", "w", "g"))
    ok = [x, w, g, "out:" + os.path.join(tmp, "bad.got") + ":" + str(3 * 300 * 64 * 4)] + ["-"] * 4
    for device, sizes, tensors, words in (
            ("tpu", [300, 4, 64, 3], ok, ["device 'tpu'", "cuda-emu"]),
            ("cuda-emu", [300, 0, 64, 3], ok, ["size T = 0"]),
            ("cuda-emu", [300, 4, 64, 3], ok[:3] + ["-"] * 5, ["tensor 'f' is NULL"])):
        got = run([p.driver, device, "fusion.dflare", "-", ",".join(map(str, sizes)),
                   ",".join(tensors)], env=p.env).stdout.strip()
        if not got.startswith("status ") or got.startswith("status 0") or "\n" in got \
                or not all(wd in got for wd in words):
            fail(f"the CUDA package on {device}, bad input: '{got}' (expected {words})")
    got = run([p.driver, "cuda-emu", "null"], env=p.env).stdout.strip()
    if got != "status 1: fusion.dflare: args is NULL":
        fail(f"the CUDA package, NULL args: '{got}'")

    # "cuda": a GPU's outputs against exec's; without one a status and one line.
    r, ins, outs = exec_cuda(ft, config_text(e0), tmp, "cg", "cuda", exec_env)
    if r.returncode == 0:
        check_cuda(np, p, "cuda", [48, 4, 64, 3], ins, outs, tmp, 0, 1)
        print("test_package: cuda: the CUDA package ran on the GPU, bit for bit with exec")
    else:
        got = run([p.driver, "cuda", "fusion.dflare", "-", "48,4,64,3", ",".join(ok)],
                  env=p.env)
        line = got.stdout.strip()
        if got.returncode != 0 or not line.startswith("status 7: fusion.dflare on cuda: ") \
                or "\n" in line:
            fail(f"the CUDA package on cuda without a GPU: exit {got.returncode}, '{line}'")
    nvcc = shutil.which("nvcc") or shutil.which("nvcc", path="/usr/local/cuda/bin")
    if nvcc:
        for i, e in enumerate(prof["entries"]):
            path = os.path.join(build, "tg", "cubin", f"b{i}_m0.sm_90a.cubin")
            if not os.path.isfile(path):
                fail(f"the CUDA package's CMake build made no {path}")


def check_cuda(np, p, device, sizes, ins, outs, tmp, want_entry, want_exact):
    """The package's run of fusion.dflare on device against exec's outputs, bit for bit."""
    tensors = driver_tensors(np, FUSION_SPEC, ins, outs, tmp, "fusion.dflare", "cuda")
    got = run([p.driver, device, "fusion.dflare", "-", ",".join(map(str, sizes)),
               ",".join(tensors)], env=p.env).stdout.strip()
    if got != f"entry {want_entry} exact {want_exact}":
        fail(f"the CUDA package on {device} at {sizes}: driver said '{got}', expected entry "
             f"{want_entry} exact {want_exact}")
    diff = output_diff(np, outs, "f", os.path.join(tmp, "cuda.f.got"))
    if diff is not None:
        fail(f"the CUDA package on {device} at {sizes}: f differs from exec's (max |diff| {diff})")


if __name__ == "__main__":
    main()
