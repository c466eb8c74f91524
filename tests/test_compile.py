#!/usr/bin/env python3
"""test_compile.py: the contract of `flaretune compile` (static analysis of CUDA kernels).

Usage errors and listings in every build. With the CUDA toolkit (--cuda 1), a probe source
written here (a small kernel, one that spills under its launch bounds, one whose shared memory
is beyond a block's limit, one that does not compile under a macro) goes through NVRTC, ptxas's
report, the occupancy calculator and the pruning verdicts, as text and JSON; and every CUDA op's
default configuration compiles. Where nvdisasm is found, the SASS instruction mix of the probe
and of every op's default configuration is checked (exact figures for the probe's one-line
kernel); without it, the mix is null and says why. The tests of the NVRTC cache itself skip the
mix (--no-sass: nvdisasm costs about 0.5 s a CUBIN). Without the toolkit (--cuda 0) the command says so in one line
and exits 3. Kernel files not written for flaretune (tests/data/foreign/) are found from the
working directory and reported by the names their source writes. Python standard library only;
needs no GPU.

usage: test_compile.py --flaretune PATH --cuda 0|1
"""
import argparse
import json
import os
import re
import shutil
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import clitest  # noqa: E402
from clitest import FAILURES, check, one_line_error, run  # noqa: E402


PROBE = r"""
extern "C" __global__ void small(float *y, const float *x) { y[threadIdx.x] = 2.0f * x[threadIdx.x]; }

/* 2 blocks of 1024 threads: at most 32 registers, far fewer than 96 live values. */
extern "C" __global__ void __launch_bounds__(1024, 2) spilly(float *y, const float *x, int n) {
    float acc[96];
#pragma unroll
    for (int i = 0; i < 96; i++) acc[i] = x[threadIdx.x + i * n];
#pragma unroll
    for (int k = 0; k < 8; k++)
#pragma unroll
        for (int i = 0; i < 96; i++) acc[i] = acc[i] * acc[(i * 7 + k) % 96] + 1.0f;
    float s = 0.0f;
#pragma unroll
    for (int i = 0; i < 96; i++) s += acc[i] * (float)i;
    y[threadIdx.x] = s;
}

extern "C" __global__ void bigsmem(float *y) {
    __shared__ float buf[12 * 1024]; /* 48 KiB static */
    buf[threadIdx.x] = (float)threadIdx.x;
    __syncthreads();
    y[threadIdx.x] = buf[(threadIdx.x + 1) % 128];
}
#ifdef BREAK
this is not C++;
#endif
"""


def cuda_ops():
    rc, out, err = run("compile", "--list-ops")
    check(rc == 0 and not err, f"--list-ops: exit {rc}, stderr {err!r}")
    ops = [l for l in out.splitlines() if l.strip()]
    rc, out, _ = run("compile", "--list-ops", "--json")
    check(rc == 0 and json.loads(out) == ops, "--list-ops --json lists the same ops")
    return ops


def test_usage(ops):
    rc, out, _ = run("compile", "--help")
    check(rc == 0 and out.startswith("usage: flaretune compile"), "compile --help")
    rc, out, _ = run("help")
    check(rc == 0 and "compile" in out, "help lists compile")
    one_line_error(["compile"], 2, "which op?")
    one_line_error(["compile", "no.such.op"], 2)
    one_line_error(["compile", "loss", "extra"], 2, "unexpected argument")
    one_line_error(["compile", "loss", "--bogus"], 2, "unknown option")
    one_line_error(["compile", "loss", "--device", "nosuch"], 2, "unknown device 'nosuch'")
    one_line_error(["compile", "loss", "--device", "h100", "--arch", "sm_80"], 2, "not both")
    one_line_error(["compile", "loss", "--arch", "sm80"], 2, "not a GPU architecture")
    one_line_error(["compile", "loss", "--arch", "compute_90"], 2, "not a GPU architecture")
    one_line_error(["compile", "loss", "--all-configs", "--config", "x=1"], 2, "not both")
    one_line_error(["compile", "loss", "--jobs", "0"], 2, "--jobs")
    one_line_error(["compile", "loss", "--backend", "cpu"], 2, "unknown option '--backend'")
    one_line_error(["compile", "--source", "x.cu", "loss"], 2, "takes no op")
    one_line_error(["compile", "loss", "--kernel", "k:32"], 2, "--source")
    one_line_error(["compile", "--source", "x.cu", "--all-configs"], 2, "--source")
    one_line_error(["compile", "--list-ops", "loss"], 2)
    one_line_error(["compile", "--list-ops", "--list-devices"], 2, "not both")
    # An op without CUDA kernels is a usage error that lists the CUDA ops.
    rc, out, _ = run("list", "ops", "--json")
    if rc == 0:
        names = [o["name"] for o in json.loads(out).get("ops", [])]
        others = [n for n in names if n not in ops]
        if others:
            one_line_error(["compile", others[0]], 2, "has no CUDA kernels")


def test_kernel_arg():
    """A --kernel that does not parse is quoted whole, as given (a build with the toolkit: one
    without says so first)."""
    for bad in ("x:0", "x:32:-5", "x:99999999999"):
        one_line_error(["compile", "--source", "fusion/fusion.cu", "--kernel", bad], 2,
                       f"got '{bad}'")


def test_devices():
    rc, out, err = run("compile", "--list-devices")
    check(rc == 0 and not err, f"--list-devices: exit {rc}")
    for name in ("a100", "h100", "h200", "l40s", "rtx4090", "b200", "a100-pcie", "rtx-a4000",
                 "rtx-a6000"):
        check(name in out, f"--list-devices lists {name}")
    rc, out, _ = run("compile", "--list-devices", "--json")
    devs = json.loads(out) if rc == 0 else []
    check(len(devs) == 9, f"--list-devices --json: {len(devs)} devices")
    by = {d["name"]: d for d in devs}
    check(by.get("h200", {}).get("arch") == "sm_90a", "h200 is sm_90a")
    check(by.get("a100", {}).get("arch") == "sm_80", "a100 is sm_80")
    check(by.get("h100", {}).get("smem_per_block_optin") == 227 * 1024, "h100 smem per block")


def test_no_toolkit(ops):
    args = ["compile", "--source", "probe.cu", "--kernel", "small:32"]
    one_line_error(args, 3, "without the CUDA toolkit")
    for op in ops:
        one_line_error(["compile", op], 3, "without the CUDA toolkit")


def kernels_of(doc):
    return {k["kernel"]: k for r in doc["results"] for k in r["kernels"]}


SASS_CLASSES = ["ldg", "stg", "lds", "sts", "ldsm", "ldgsts", "atom", "local", "const", "fp32",
                "fp16", "mma", "mufu", "convert", "int", "move", "branch", "barrier", "other",
                "fp64"]


def check_mix(m, where):
    """A mix's figures agree with each other: every class, their sum, bytes per instruction."""
    cls = m.get("classes", {})
    check(list(cls) == SASS_CLASSES, f"{where}: classes {list(cls)}")
    check(m.get("total") == sum(cls.values()) and m.get("global_bytes", -1) >= 0
          and m.get("shared_bytes", -1) >= 0, f"{where}: total {m.get('total')}, sum "
          f"{sum(cls.values())}, bytes {m.get('global_bytes')}/{m.get('shared_bytes')}")
    ipb = m.get("instructions_per_global_byte")
    want = m["total"] / m["global_bytes"] if m.get("global_bytes") else None
    check(ipb == want or (ipb and want and abs(ipb - want) < 1e-9 * want),
          f"{where}: {ipb} instructions per global byte, expected {want}")


def check_sass(k, where):
    """A kernel's instruction mix (True), or null with one line saying why (False)."""
    sass = k.get("sass")
    if sass is None:
        why = k.get("sass_unavailable", "")
        check(isinstance(why, str) and why and "\n" not in why, f"{where}: no mix and no why")
        return False
    check_mix(sass, where)
    hot = sass.get("hot_loop")
    check(sass.get("loops", -1) >= (1 if hot else 0), f"{where}: {sass.get('loops')} loops")
    if hot is not None:
        check_mix(hot, f"{where} hot loop")
        check(0 <= hot.get("first", -1) <= hot.get("last", -1) and hot.get("depth", 0) >= 1
              and hot["total"] <= sass["total"] and hot["global_bytes"] <= sass["global_bytes"]
              and all(hot["classes"][c] <= sass["classes"][c] for c in SASS_CLASSES),
              f"{where}: the hot loop is not a part of the kernel: {hot}")
    return True


def test_probe(tmp):
    src = os.path.join(tmp, "probe.cu")
    with open(src, "w") as f:
        f.write(PROBE)
    env = {"FLARETUNE_CACHE_DIR": os.path.join(tmp, "cache")}
    base = ["compile", "--source", src, "--kernel", "small:256", "--kernel", "spilly:1024",
            "--kernel", "bigsmem:128:200000"]

    rc, out, err = run(*base, "--json", env=env)
    check(rc == 0, f"probe: exit {rc} ({err.strip()})")
    doc = json.loads(out) if rc == 0 else {"results": []}
    check(doc.get("arch") == "sm_90a" and doc.get("device") == "h200", "default device h200")
    check(doc.get("cached") == 0, "first compile is not from the cache")
    check(doc.get("compiled") == 1 and doc.get("failed") == 0 and doc.get("seconds", 0) > 0
          and doc.get("configs_per_s", 0) is None and doc.get("compile_seconds", 0) > 0,
          f"the compile's tallies and seconds: {doc.get('compiled')} {doc.get('seconds')}")
    comp = doc.get("compiles", [{}])
    check(len(comp) == 1 and comp[0].get("source") == src and not comp[0].get("cached")
          and comp[0].get("seconds", 0) > 0 and comp[0].get("error") is None,
          f"one module compiled: {comp}")
    ks = kernels_of(doc)
    small = ks.get("small", {})
    check(small.get("verdict") == "ok" and small.get("blocks_per_sm") == 8
          and small.get("occupancy") == 1.0, f"small: {small}")
    check(0 < small.get("regs", 0) <= 32, f"small registers {small.get('regs')}")
    spilly = ks.get("spilly", {})
    check(spilly.get("verdict") == "pruned" and spilly.get("reason", "").startswith("spills ")
          and spilly.get("spill_stores", 0) > 0 and spilly.get("regs", 99) <= 32,
          f"spilly: {spilly}")
    big = ks.get("bigsmem", {})
    check(big.get("smem_static") == 48 * 1024 and big.get("smem_dynamic") == 200000, f"{big}")
    check(big.get("verdict") == "pruned" and "227 KiB per block" in big.get("reason", ""),
          f"bigsmem: {big}")
    test_probe_sass(base, doc, env, tmp)

    # Text: a table with the verdicts, from the cache this time.
    rc, out, err = run(*base, env=env)
    check(rc == 0 and "pruned: spills" in out and "ok (warps-limited)" in out
          and "(1 from the cache)" in out and " ins/B " in out, f"probe text:\n{out}{err}")
    check("compiling took " in out and ": 0 compiled, 1 from the cache, 0 failed;" in out
          and "configurations/s" not in out, f"probe text, the compiling:\n{out}")
    # Another device: its own limits and architecture.
    rc, out, _ = run("compile", "--source", src, "--device", "l40s", "--kernel",
                     "bigsmem:128:60000", "--json", env=env)
    doc = json.loads(out) if rc == 0 else {"results": []}
    check(doc.get("arch") == "sm_89", "l40s compiles for sm_89")
    big = kernels_of(doc).get("bigsmem", {})
    check(big.get("verdict") == "pruned" and "99 KiB per block" in big.get("reason", ""),
          f"bigsmem on l40s: {big}")
    # sm_80 picks the A100; an architecture outside the table has no occupancy.
    rc, out, _ = run("compile", "--source", src, "--arch", "sm_80", "--kernel", "small:128",
                     "--json", env=env)
    check(rc == 0 and json.loads(out)["device"] == "a100", "sm_80: occupancy on the A100")
    rc, out, _ = run("compile", "--source", src, "--arch", "sm_86", "--kernel", "small:128",
                     "--json", env=env)
    check(rc == 0 and json.loads(out)["device"] == "rtx-a4000", "sm_86: occupancy on the RTX A4000")
    rc, out, _ = run("compile", "--source", src, "--arch", "sm_87", env=env)
    check(rc == 0 and "no occupancy" in out and "spilly" in out, f"sm_87:\n{out}")
    # A kernel the module lacks, and a compile error: exit 1, one line each, named.
    out = one_line_error(["compile", "--source", src, "--kernel", "missing:32"], 1,
                         "no kernel 'missing' in probe.cu")
    rc, out, err = run("compile", "--source", src, "--define", "BREAK", "--kernel", "small:32",
                       env=env)
    check(rc == 1 and "error" in err and "probe.cu" in err and "-DBREAK" in err,
          f"compile error: exit {rc}, stderr {err!r}")
    # A file that is nowhere: one line naming where it was looked for, before any table.
    one_line_error(["compile", "--source", "no_such_kernel.cu", "--arch", "sm_80"], 1,
                   "no such file in the working directory")
    one_line_error(["compile", "--source", "/no/such/kernel.cu", "--arch", "sm_80"], 1,
                   "cannot read --source /no/such/kernel.cu")


def test_damaged_cache(tmp):
    """A cache entry that is no longer whole (a CUBIN or its log truncated, the emulator's module
    cut short or garbled) is no hit: compiled again, never loaded into the process (a cut-short
    module would end it with SIGBUS) nor trusted, and sealed anew."""
    cache = os.path.join(tmp, "cache-damaged")
    env = {"FLARETUNE_CACHE_DIR": cache}
    comp = ["compile", "fusion.dflare", "--device", "h200", "--preset", "tiny.dflare.train",
            "--no-sass"]
    rc, out, err = run(*comp, env=env)
    check(rc == 0 and ": 1 compiled, 0 from the cache" in out, f"first compile: {rc} {out}{err}")
    nv = os.path.join(cache, "nvrtc")
    for suffix, keep in ((".cubin", 100), (".log", 50)):
        for name in os.listdir(nv):
            if name.endswith(suffix):
                with open(os.path.join(nv, name), "r+b") as f:
                    f.truncate(keep)
        rc, out, err = run(*comp, env=env)
        check(rc == 0 and ": 1 compiled, 0 from the cache" in out,
              f"a truncated {suffix} is compiled again: {rc} {out}{err}")
    rc, out, err = run(*comp, env=env)
    check(rc == 0 and ": 0 compiled, 1 from the cache" in out, f"sealed anew: {rc} {out}{err}")
    ex = ["exec", "fusion.dflare", "--preset", "tiny.dflare.train", "--backend", "cuda-emu",
          "--out", os.path.join(tmp, "emu-out")]
    rc, out, err = run(*ex, env=env)
    check(rc == 0, f"exec on the emulator: {rc} {err}")
    emu = os.path.join(cache, "emu")
    mods = [os.path.join(emu, n) for n in os.listdir(emu) if n.endswith(".so")]
    check(mods and all(os.path.exists(m + ".sum") for m in mods), f"modules sealed: {mods}")
    for damage in ("truncate", "garble"):
        for m in mods:
            with open(m, "r+b") as f:
                if damage == "truncate":
                    f.truncate(5000)
                else:
                    f.seek(os.path.getsize(m) // 2)
                    f.write(b"\xff" * 4096)
        rc, out, err = run(*ex, env=env)
        check(rc == 0, f"a {damage}d module is built again, not loaded: exit {rc} {err!r}")


def test_source_as_written(tmp):
    """--source FILE from the working directory (a file not written for flaretune, beside a
    header of the same name as nothing in the kernel tree), C++ kernels by their written names
    in the table, the JSON and --kernel."""
    here = os.path.dirname(os.path.abspath(__file__))
    work = os.path.join(tmp, "foreign")
    os.makedirs(work, exist_ok=True)
    for name in ("stencil.cu", "rows.cu", "rows.h"):
        shutil.copy(os.path.join(here, "data", "foreign", name), work)
    env = {"FLARETUNE_CACHE_DIR": os.path.join(tmp, "cache")}
    cwd = os.getcwd()
    os.chdir(work)
    try:
        rc, out, err = run("compile", "--source", "stencil.cu", "--arch", "sm_80", "--json",
                           "--no-sass", env=env)
        check(rc == 0, f"stencil.cu from the working directory: exit {rc} ({err.strip()})")
        names = sorted(kernels_of(json.loads(out))) if rc == 0 else []
        check(names == ["dot4", "stencil"], f"written names, not mangled ones: {names}")
        rc, out, err = run("compile", "--source", "stencil.cu", "--arch", "sm_80", "--kernel",
                           "stencil:128", "--define", "block_size_x=32", env=env)
        check(rc == 0 and re.search(r"^  stencil +\d+ ", out, re.M) and "_Z" not in out,
              f"--kernel stencil by its written name:\n{out}{err}")
        rc, out, err = run("compile", "--source", "rows.cu", "--arch", "sm_86", "--define",
                           "tile=2", "--json", "--no-sass", env=env)
        check(rc == 0 and list(kernels_of(json.loads(out))) == ["scale_rows"],
              f"rows.cu with its header beside it: exit {rc} ({err.strip()})")
    finally:
        os.chdir(cwd)
    # An absolute path too.
    rc, out, err = run("compile", "--source", os.path.join(work, "stencil.cu"), "--arch",
                       "sm_80", "--kernel", "dot4:64", "--no-sass", env=env)
    check(rc == 0 and re.search(r"^  dot4 +\d+ ", out, re.M), f"absolute path:\n{out}{err}")


def test_probe_sass(base, doc, env, tmp):
    """The probe's instruction mix: `small` (y = 2x, one element a thread) loads and stores 4
    bytes once, with no loop. Without a disassembler, or with --no-sass: null and why."""
    small = kernels_of(doc).get("small", {})
    if check_sass(small, "small"):
        m = small["sass"]
        c = m["classes"]
        check(c["ldg"] == 1 and c["stg"] == 1 and c["fp32"] == 1 and m["global_bytes"] == 8
              and m["shared_bytes"] == 0 and m["loops"] == 0 and m["hot_loop"] is None
              and m["total"] >= 5, f"small's mix: {m}")
        check(isinstance(doc.get("sass_seconds"), float), "sass_seconds")
    else:
        print(f"test_compile: no SASS mix here ({small.get('sass_unavailable')}): its figures "
              "are not checked", file=sys.stderr)
    for k in kernels_of(doc).values():
        check_sass(k, k["kernel"])
    # No disassembler (and a cache that has not seen this CUBIN): null, why, exit 0.
    bare = dict(env, FLARETUNE_NVDISASM="/nonexistent/nvdisasm",
                FLARETUNE_CACHE_DIR=os.path.join(tmp, "cache-no-tool"))
    rc, out, err = run(*base, "--json", env=bare)
    small = kernels_of(json.loads(out)).get("small", {}) if rc == 0 else {}
    check(rc == 0 and small.get("sass", 0) is None
          and "FLARETUNE_NVDISASM" in small.get("sass_unavailable", ""),
          f"no disassembler: exit {rc}, {small.get('sass_unavailable')!r} ({err.strip()})")
    rc, out, err = run(*base, env=bare)
    check(rc == 0 and "no instruction mix (ins/B): SASS: FLARETUNE_NVDISASM=" in out,
          f"no disassembler, text:\n{out}")
    rc, out, err = run(*base, "--json", "--no-sass", env=env)
    d = json.loads(out) if rc == 0 else {"results": []}
    small = kernels_of(d).get("small", {})
    check(rc == 0 and small.get("sass", 0) is None and "--no-sass" in small.get(
        "sass_unavailable", "") and d.get("sass_seconds", 0) is None, f"--no-sass: {small}")


def test_ops(ops, tmp):
    """Each CUDA op's default configuration compiles (CI's compile_all runs every one)."""
    env = {"FLARETUNE_CACHE_DIR": os.path.join(tmp, "cache")}
    for op in ops:
        rc, out, err = run("compile", op, "--json", env=env)
        check(rc == 0, f"compile {op}: exit {rc}: {err.strip()}")
        if rc == 0:
            doc = json.loads(out)
            check(doc["op"] == op and doc["configs"] == 1, f"compile {op}: one configuration")
            check(doc["compiled"] + doc["cached"] == doc["modules"] == len(doc["compiles"])
                  and doc["configs_per_s"] > 0 and doc["seconds"] > 0,
                  f"compile {op}: {doc['modules']} modules, {doc['compiled']} compiled, "
                  f"{doc['cached']} cached, {doc['configs_per_s']} configurations/s")
            ks = kernels_of(doc)
            mixes = [check_sass(k, f"{op} {name}") for name, k in ks.items()]
            check(all(mixes) or not any(mixes), f"{op}: a mix for some kernels, not all")
            if op == "fusion.dflare" and all(mixes) and "dflare_fwd_smem" in ks:
                # The default stages x in shared memory with cp.async; its hot loop, the row
                # loop, re-reads it from there and stores f.
                m = ks["dflare_fwd_smem"]["sass"]
                hot = m["hot_loop"] or {"classes": {}, "global_bytes": 0, "shared_bytes": 0}
                check(m["classes"]["ldgsts"] > 0 and m["classes"]["barrier"] > 0
                      and m["shared_bytes"] > 0 and hot["classes"].get("lds", 0) > 0
                      and hot["classes"].get("stg", 0) > 0 and hot["global_bytes"] > 0,
                      f"fusion.dflare's default (stage=smem): {m}")
        one_line_error(["compile", op, "--config", "no_such_param=1"], 2)


def copy_kernels(dst):
    """The kernel sources and headers of kernels/ (the layout FLARETUNE_KERNEL_DIR names)."""
    for d, _, files in os.walk(os.path.join(ROOT, "kernels")):
        for n in files:
            if n.endswith((".cu", ".h", ".cuh")):
                rel = os.path.relpath(os.path.join(d, n), os.path.join(ROOT, "kernels"))
                os.makedirs(os.path.join(dst, os.path.dirname(rel)), exist_ok=True)
                shutil.copyfile(os.path.join(d, n), os.path.join(dst, rel))


def test_relocated_cache(tmp):
    """The NVRTC cache key does not depend on where the sources or the toolkit's headers are: a
    cache built from one checkout serves another (a device kit's cache on a GPU machine), and
    the content of an included header still counts."""
    cache = os.path.join(tmp, "moved-cache")
    a, b = os.path.join(tmp, "a", "kernels"), os.path.join(tmp, "b", "kernels")
    copy_kernels(a)
    copy_kernels(b)
    inc = os.path.join(tmp, "cuda-include")
    homes = [os.environ.get("CUDA_HOME", ""), "/usr/local/cuda"]
    real_inc = next((os.path.join(h, "include") for h in homes
                     if h and os.path.exists(os.path.join(h, "include", "cuda_bf16.h"))), None)
    args = ["compile", "fusion.dflare", "--all-configs", "--preset", "small.dflare.train",
            "--json", "--no-sass"]

    def compile_from(kdir, inc_dir):
        env = {"FLARETUNE_CACHE_DIR": cache, "FLARETUNE_KERNEL_DIR": kdir}
        if inc_dir:
            env["FLARETUNE_CUDA_INCLUDE"] = inc_dir
        rc, out, err = run(*args, env=env)
        check(rc == 0, f"compile from {kdir}: exit {rc}: {err.strip()}")
        return json.loads(out) if rc == 0 else {"modules": -1, "cached": -2}

    first = compile_from(a, None)
    check(first["modules"] > 1 and first["cached"] == 0, f"first compile: {first['modules']} "
          f"modules, {first['cached']} cached")
    if real_inc:
        os.symlink(real_inc, inc)
    second = compile_from(b, inc if real_inc else None)
    check(second["modules"] == first["modules"] and second["cached"] == second["modules"],
          f"another checkout: {second['cached']} of {second['modules']} modules from the cache")
    with open(os.path.join(b, "cuda", "ft_cuda.h"), "a") as f:
        f.write("\n/* changed */\n")
    third = compile_from(b, None)
    check(third["cached"] == 0, f"a changed header: {third['cached']} modules from the cache")


def test_all_configs_summary(tmp):
    """--all-configs prints the kernels summed up (a line per kernel and verdict, with how many
    configurations): a screenful, where every configuration's table was over a thousand lines
    for fusion.dflare; --verbose keeps every configuration's."""
    env = {"FLARETUNE_CACHE_DIR": os.path.join(tmp, "summary-cache")}
    args = ["compile", "fusion.dflare", "--all-configs", "--preset", "small.dflare.train",
            "--no-sass"]
    rc, out, err = run(*args, env=env)
    check(rc == 0, f"compile --all-configs: exit {rc}: {err.strip()}")
    lines = out.splitlines()
    n = int(re.match(r"fusion\.dflare: (\d+) valid configurations", lines[0]).group(1))
    check(len(lines) < 20, f"a summary: {len(lines)} lines for {n} configurations")
    rows = [l for l in lines if re.match(r"  dflare_fwd(_smem)? +\d+ ", l)]
    total = sum(int(l.split()[1]) for l in rows)
    check(rows and total == n, f"every configuration counted once per kernel: {total} of {n}")
    check(any(l.rstrip().endswith("ok") for l in rows) and
          any("pruned: " in l for l in rows), "ok and pruned kernels apart")
    check("--verbose" in out, "the summary says how to see every configuration")
    rc, out, err = run(*args, "--verbose", env=env)
    configs = [l for l in out.splitlines() if l.startswith("config ")]
    check(rc == 0 and len(configs) == n, f"--verbose: a table per configuration ({len(configs)})")
    rc, out, _ = run("compile", "--help")
    check("--verbose" in out, "compile --help lists --verbose")


def test_keep(tmp):
    """A module keeps only the kernels its configuration launches (FT_KEEP in ft_cuda.h): the
    spec's kernels are the only ones ptxas reports; without FT_KEEP_SOME, every kernel."""
    env = {"FLARETUNE_CACHE_DIR": os.path.join(tmp, "cache")}
    src = os.path.join(ROOT, "kernels", "fusion", "fusion.cu")
    base = ["compile", "--source", src, "--define", "FT_FUSION=1", "--define", "FT_T=5",
            "--json", "--no-sass"]
    rc, out, err = run(*base, env=env)
    check(rc == 0, f"fusion.cu, every kernel: exit {rc}: {err.strip()}")
    every = set(kernels_of(json.loads(out))) if rc == 0 else set()
    check({"dflare_fwd", "dflare_fwd_smem", "dflare_bwd", "dflare_bwd_reduce"} <= every,
          f"every kernel: {sorted(every)}")
    rc, out, err = run(*base, "--define", "FT_KEEP_SOME=1", "--define", "FT_KEEP_dflare_bwd=1",
                       "--define", "FT_KEEP_dflare_bwd_reduce=1", env=env)
    kept = set(kernels_of(json.loads(out))) if rc == 0 else set()
    check(kept == {"dflare_bwd", "dflare_bwd_reduce"}, f"kept: {sorted(kept)} ({err.strip()})")


# ---- the kernels' launchers against their signatures (source text only) ----------------------

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
KERNEL_RE = re.compile(r'extern\s+"C"\s+__global__\s+(?:void\s+)?(?:__launch_bounds__\([^)]*\)\s*)?'
                       r'(?:void\s+)?(\w+)\s*\(([^)]*)\)')
LAUNCHER_RE = re.compile(r'FT_CUDA_KERNEL\(\s*(\w+)\s*,\s*(\([^)]*\)|\w+)\s*,\s*(\([^)]*\)|\w+)\s*\)')
DEFINE_RE = re.compile(r'^[ \t]*#[ \t]*define[ \t]+(\w+)\b(?!\()((?:[^\n]*\\\n)*[^\n]*)', re.M)


def object_macros(text):
    """{name: body} of the object-like macros a source defines (#define NAME body, with its
    continued lines): variants of a kernel that take the same arguments share one parameter list
    written as such a macro, in the .cu file and beside the launchers."""
    return {name: " ".join(body.replace("\\\n", " ").split())
            for name, body in DEFINE_RE.findall(text)}


def expand(text, macros):
    """text with the object-like macros of its file substituted, as the preprocessor would."""
    for _ in range(8):
        done = re.sub(r"\b\w+\b", lambda m: macros.get(m.group(0), m.group(0)), text)
        if done == text:
            break
        text = done
    return text


def unparen(text):
    """A launcher's list without its parentheses (the C macro takes it parenthesized)."""
    text = text.strip()
    return text[1:-1] if text.startswith("(") and text.endswith(")") else text


def split_params(text):
    """[(type, name)] of a C parameter list, types with white space folded and __restrict__
    dropped, a storage-type pointer (st_t *) written as the host writes it (void *)."""
    out = []
    for p in text.replace("__restrict__", " ").split(","):
        p = " ".join(p.replace("*", " * ").split())
        if not p:
            continue
        typ, name = p.rsplit(" ", 1)
        out.append((typ.replace("st_t", "void").replace("* ", "*"), name))
    return out


def sources(ext):
    for d, _, files in os.walk(os.path.join(ROOT, "kernels")):
        if os.path.basename(d) == "cuda":
            continue  # the platform, not an op family
        for f in sorted(files):
            if f.endswith(ext):
                path = os.path.join(d, f)
                with open(path) as fh:
                    yield os.path.relpath(path, ROOT), fh.read()


def test_launchers():
    """Every kernel of kernels/**/*.cu has one launcher (FT_CUDA_KERNEL) whose parameters are the
    kernel's, in number, order and type, and whose argument list takes each of them in turn; the
    op code names kernels through the launchers only."""
    kernels = {}
    for path, text in sources(".cu"):
        macros = object_macros(text)
        for name, params in KERNEL_RE.findall(text):
            check(name not in kernels, f"{path}: kernel {name} defined twice")
            kernels[name] = (path, split_params(expand(params, macros)))
    check(len(kernels) > 10, f"found {len(kernels)} kernels in kernels/**/*.cu")
    launchers = {}
    for path, text in sources("_cuda.c"):
        check("ft_cuda_launch(" not in text, f"{path}: launches a kernel by name, not by launcher")
        check(not re.search(r'ft_cuda_spec_kernel\(\s*\w+\s*,\s*"', text),
              f"{path}: names a kernel by a string, not FT_CUDA_KERNEL_NAME")
        macros = object_macros(text)
        for name, params, addrs in LAUNCHER_RE.findall(text):
            params, addrs = (unparen(expand(s, macros)) for s in (params, addrs))
            check(name not in launchers, f"{path}: two launchers of {name}")
            launchers[name] = path
            if name not in kernels:
                check(False, f"{path}: launcher of {name}, which no .cu file defines")
                continue
            host = split_params(params)
            kpath, kparams = kernels[name]
            check(len(host) == len(kparams),
                  f"{path}: {name} takes {len(host)} parameters, {kpath} has {len(kparams)}")
            for i, ((ht, hn), (kt, kn)) in enumerate(zip(host, kparams)):
                check(ht == kt, f"{path}: {name} parameter {i} ({hn}) is {ht!r}, {kpath} has "
                                f"{kt!r} ({kn})")
            want = ["&" + n for _, n in host]
            got = [a.strip() for a in addrs.split(",") if a.strip()]
            check(got == want, f"{path}: {name} passes {got}, want {want}")
    for name, (kpath, _) in kernels.items():
        check(name in launchers, f"{kpath}: kernel {name} has no launcher (FT_CUDA_KERNEL)")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--flaretune", required=True)
    ap.add_argument("--cuda", type=int, required=True)
    a = ap.parse_args()
    clitest.FT = a.flaretune
    test_launchers()
    ops = cuda_ops()
    test_usage(ops)
    test_devices()
    if a.cuda:
        test_kernel_arg()
        with tempfile.TemporaryDirectory() as tmp:
            test_probe(tmp)
            test_damaged_cache(tmp)
            test_source_as_written(tmp)
            test_ops(ops, tmp)
            test_keep(tmp)
            test_all_configs_summary(tmp)
            test_relocated_cache(tmp)
    else:
        test_no_toolkit(ops)
    if FAILURES:
        print(f"{len(FAILURES)} failures", file=sys.stderr)
        return 1
    print("test_compile: ok", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
