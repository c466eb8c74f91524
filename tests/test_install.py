#!/usr/bin/env python3
"""test_install: flaretune as other builds consume it, from an installed prefix.

Installs the build into a temporary prefix, checks the layout (soname, only the C API exported
from the .so and the .a, the pkg-config files: flaretune-static links the archive and names no
library by its file, CMake package, kernel sources, docs), runs docs/usage.md's pkg-config lines as
written there (a shared program that runs from the prefix, a static one without
libflaretune.so), then builds the
consumer project of tests/consumer three times against it (pkg-config; find_package with the
shared library; find_package with the static one) and checks that each, running fusion.dflare
and the loss through the C API with a config taken from a profile, writes the same bits as
`flaretune exec` with that config on the same inputs; on cuda-emu too, through device memory.
The prefix is then moved, and the installed binary and the ctypes example (docs/api.md, run
verbatim from docs/examples/api_ctypes.py) still work from there; the moved binary emits a
source package (its files written from the installed templates) equal to the build's.

    test_install.py BUILD_DIR FLARETUNE PYTHON_WITH_NUMPY
"""
import json
import os
import re
import shutil
import sys
import tempfile

import checks
from checks import check

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUILD, FLARETUNE, NUMPY_PY = sys.argv[1], sys.argv[2], sys.argv[3]
checks.NAME = "test_install"


def sh(*cmd, env=None, cwd=None, ok=True):
    return checks.run(list(cmd), ok=ok, env=env, cwd=cwd)


def libdir_of(prefix):
    for d in ("lib", "lib64", "lib/x86_64-linux-gnu", "lib/aarch64-linux-gnu"):
        if os.path.exists(os.path.join(prefix, d, "libflaretune.a")):
            return os.path.join(prefix, d)
    sys.exit(f"test_install: no libflaretune.a under {prefix}")


def check_layout(prefix):
    lib = libdir_of(prefix)
    for rel in ("bin/flaretune", "include/flaretune.h", "share/flaretune/kernels/cuda/ft_cuda.h",
                "share/flaretune/kernels/fusion/fusion.cu", "share/doc/flaretune/api.md",
                "share/flaretune/profiles/templates/package/lookup.inc.in"):
        check(os.path.exists(os.path.join(prefix, rel)), f"installed {rel}")
    for rel in ("libflaretune.so", "libflaretune.so.0", "pkgconfig/flaretune.pc",
                "pkgconfig/flaretune-static.pc",
                "cmake/flaretune/flaretune-config.cmake",
                "cmake/flaretune/flaretune-config-version.cmake"):
        check(os.path.exists(os.path.join(lib, rel)), f"installed LIBDIR/{rel}")
    if shutil.which("help2man"):
        check(os.path.exists(os.path.join(prefix, "share/man/man1/flaretune.1")), "manual page")
    so = os.path.realpath(os.path.join(lib, "libflaretune.so"))
    dyn = sh("readelf", "-d", so).stdout
    check("Library soname: [libflaretune.so.0]" in dyn, "soname libflaretune.so.0")
    # The folders of what they link outside the loader's own (OpenBLAS's OpenMP build, the CUDA
    # toolkit) stay in the installed binary's and library's RUNPATH, as in the build's.
    def runpath(f):
        m = re.search(r"Library (?:runpath|rpath): \[([^\]]*)\]", sh("readelf", "-d", f).stdout)
        return set(m.group(1).split(":")) if m else set()
    build_root = os.path.realpath(BUILD)
    for built, f in ((os.path.join(BUILD, os.path.basename(so)), so),
                     (os.path.join(BUILD, "flaretune"), os.path.join(prefix, "bin", "flaretune"))):
        wanted = {d for d in runpath(built)
                  if d and not os.path.realpath(d).startswith(build_root)}
        check(os.path.exists(built) and wanted <= runpath(f),
              f"{os.path.basename(f)} keeps the build's library folders {sorted(wanted)} in its "
              f"RUNPATH: {sorted(runpath(f))}")
    exported = [l.split()[-1] for l in sh("nm", "-D", "--defined-only", so).stdout.splitlines()
                if l.strip()]
    others = [s for s in exported if not s.startswith("flaretune_")]
    check("flaretune_run" in exported and not others,
          f"the .so exports the C API alone ({len(exported)} symbols; others: {others[:5]})")
    static = [l.split()[-1] for l in
              sh("nm", "-g", "--defined-only", os.path.join(lib, "libflaretune.a")).stdout
              .splitlines() if l.strip() and not l.endswith(":")]
    others = [s for s in static if not s.startswith("flaretune_")]
    check("flaretune_run" in static and not others,
          f"the .a defines the C API alone as global ({len(static)}; others: {others[:5]})")
    pc_env = dict(os.environ, PKG_CONFIG_PATH=os.path.join(lib, "pkgconfig"))
    for pc in ("flaretune", "flaretune-static"):
        r = sh("pkg-config", "--validate", pc, env=pc_env, ok=False)
        check(r.returncode == 0, f"{pc}.pc validates {r.stderr.strip()}")
    # The static module links the archive and what it needs, with or without --static, and
    # writes no library's file path in (folders are variables found at configure).
    for extra in ([], ["--static"]):
        libs = sh("pkg-config", "--libs", *extra, "flaretune-static", env=pc_env).stdout.split()
        check("-l:libflaretune.a" in libs and "-lflaretune" not in libs and "-lopenblas" in libs,
              f"flaretune-static {extra}: the archive and OpenBLAS: {libs}")
        check(not [w for w in libs if w.endswith(".so") or ".so." in w],
              f"flaretune-static {extra}: no library named by its file: {libs}")
    text = open(os.path.join(lib, "pkgconfig", "flaretune-static.pc")).read()
    libs_line = next(l for l in text.splitlines() if l.startswith("Libs:"))
    check("/" not in re.sub(r"\$\{\w+\}", "", libs_line),
          f"flaretune-static.pc's Libs name folders by variables alone: {libs_line}")
    return lib


def test_readme_pkg_config(prefix, lib, work):
    """docs/usage.md's pkg-config lines (where README sends a newcomer), as written there (the
    prefix and app.c put in): the shared program links and runs from a prefix outside the
    library path, the static one holds no libflaretune.so and runs too."""
    with open(os.path.join(ROOT, "docs", "usage.md")) as f:
        readme = f.read()
    start = readme.index("    cmake --install build --prefix /opt/flaretune\n")
    block = readme[start:readme.index("\n\n", start)].splitlines()[1:]
    check(len(block) == 3 and "./app" in block[1] and "./app-static" in block[2],
          f"docs/usage.md's pkg-config lines: {block}")
    app = os.path.join(work, "readme-app")
    os.makedirs(app)
    with open(os.path.join(app, "app.c"), "w") as f:
        f.write("#include <flaretune.h>\n#include <stdio.h>\n"
                "int main(void) {\n"
                "    flaretune_context *ctx;\n"
                "    if (flaretune_create(&ctx, \"cpu\") != FLARETUNE_OK) {\n"
                "        fprintf(stderr, \"%s\\n\", flaretune_message(ctx));\n"
                "        flaretune_destroy(ctx);\n"
                "        return 1;\n"
                "    }\n"
                "    printf(\"api %d on %s\\n\", flaretune_api_version(), flaretune_backend(ctx));\n"
                "    flaretune_destroy(ctx);\n"
                "    return 0;\n"
                "}\n")
    # The installed header is C99 and C++98 alike: no trailing enumerator comma, nothing newer.
    cxx = shutil.which(os.environ.get("CXX", "c++"))
    for lang, std in (("c", "c99"), ("c", "c11"), ("c++", "c++98"), ("c++", "c++11")):
        comp = cxx if lang == "c++" else os.environ.get("CC", "cc")
        if not comp:
            continue
        r = sh(comp, f"-std={std}", "-pedantic", "-Wall", "-Wextra", "-Werror", "-fsyntax-only",
               "-x", lang, "-I", os.path.join(prefix, "include"), os.path.join(app, "app.c"),
               ok=False)
        check(r.returncode == 0, f"the installed header as {std}: {r.stderr.strip()[-400:]}")
    script = "set -e\n" + "\n".join(block).replace("/opt/flaretune/lib", lib).replace(
        "/opt/flaretune", prefix) + "\n"
    env = {k: v for k, v in blas_env().items() if k != "LD_LIBRARY_PATH"}
    r = sh("sh", "-c", script, env=env, cwd=app, ok=False)
    check(r.returncode == 0 and r.stdout.count("api 1 on cpu") == 2,
          f"docs/usage.md's lines build and run both programs ({r.returncode}: {r.stdout.strip()} "
          f"{r.stderr.strip()[-400:]})")
    if os.path.exists(os.path.join(app, "app-static")):
        dyn = sh("readelf", "-d", os.path.join(app, "app-static")).stdout
        check("libflaretune" not in dyn, "the static program needs no libflaretune.so")
        dyn = sh("readelf", "-d", os.path.join(app, "app")).stdout
        check("libflaretune.so.0" in dyn, "the shared program uses libflaretune.so.0")


def build_consumer(prefix, lib, link, work):
    b = os.path.join(work, f"consumer-{link}")
    env = dict(os.environ, PKG_CONFIG_PATH=os.path.join(lib, "pkgconfig"))
    sh("cmake", "-S", os.path.join(ROOT, "tests/consumer"), "-B", b, f"-DLINK={link}",
       f"-DCMAKE_PREFIX_PATH={prefix}", "-DCMAKE_BUILD_TYPE=Release", env=env)
    sh("cmake", "--build", b, env=env)
    return os.path.join(b, "consumer")


def manifest_from(np, indir, outdir, dest):
    """Raw inputs and the manifest of exec's .npy inputs and outputs, in dest."""
    lines = []
    for role, d in (("in", indir), ("out", outdir)):
        for f in sorted(os.listdir(d)):
            a = np.load(os.path.join(d, f))
            name = f[:-4]
            dt = {"float32": "f32", "int32": "i32", "uint8": "u8"}[str(a.dtype)]
            lines.append(f"{role} {name} {dt} {a.ndim} {' '.join(map(str, a.shape))}")
            if role == "in":
                a.tofile(os.path.join(dest, name + ".in"))
    with open(os.path.join(dest, "manifest"), "w") as m:
        m.write("\n".join(lines) + "\n")


# op, the exec/tune arguments, a non-default CPU config the test writes into the tuned entry
CASES = [
    ("fusion.dflare", ["--preset", "tiny.dflare.train", "--attr", "backward=1"],
     {"strategy": "per_layer", "k": 2, "rows": 16, "stream": 0, "prefetch": 8, "threads": 1}),
    ("loss", ["--preset", "tiny.dflare.train", "--attr", "scheme=dpace"],
     {"strategy": "online", "chunk": 1, "vtile": 4096, "parallel": "vocab", "threads": 1,
      "norm_pass": "chunk"}),
]


def make_profile(work):
    """A real profile of both ops (a short tune here), whose winners are then replaced by the
    configs above, so what the consumer runs can only have come from the profile."""
    profile = os.path.join(work, "profile.json")
    for op, args, _ in CASES:
        sh(FLARETUNE, "tune", op, *args, "--backend", "cpu", "--budget", "3", "--max-time",
           "0.02", "--confirm", "1", "--profile", profile, "--quiet")
    with open(profile) as f:
        doc = json.load(f)
    for e in doc["entries"]:
        e["config"] = next(c for op, _, c in CASES if op == e["op"])
    with open(profile, "w") as f:
        json.dump(doc, f)
    return profile, {e["op"]: e for e in doc["entries"]}


def blas_env():
    """The environment a program needs for OpenBLAS to run the kernels flaretune runs: the
    command line restarts itself with OPENBLAS_CORETYPE where OpenBLAS misdetects the CPU
    (`flaretune version`), a library cannot (docs/api.md)."""
    v = sh(FLARETUNE, "version").stdout
    core = next(l.split()[2] for l in v.splitlines() if l.strip().startswith("blas core"))
    return dict(os.environ, OPENBLAS_CORETYPE=core)


def run_cases(np, consumers, work):
    profile, entries = make_profile(work)
    env = blas_env()
    inputs = {}
    for op, args, config in CASES:
        d = os.path.join(work, op)
        ind, ref, raw = (os.path.join(d, x) for x in ("in", "ref", "raw"))
        os.makedirs(raw)
        attrs = ",".join(f"{k}={v}" for k, v in entries[op]["attrs"].items())
        attr_args = [a for kv in attrs.split(",") for a in ("--attr", kv)]
        cfg_text = ",".join(f"{k}={v}" for k, v in config.items())
        sh(FLARETUNE, "exec", op, *args, "--backend", "cpu", "--save-inputs", ind, "--out", ref,
           "--config", cfg_text, "--quiet")
        manifest_from(np, ind, ref, raw)
        inputs[op] = (d, ind, attrs)
        for consumer in consumers:
            how = os.path.basename(os.path.dirname(consumer))
            r = sh(consumer, "cpu", profile, op, attrs, os.path.join(raw, "manifest"), raw,
                   env=env, ok=False)
            check(r.returncode == 0, f"{how}: {op} runs ({r.stderr.strip()})")
            check(f"config {cfg_text}\nfrom profile\n" == r.stdout,
                  f"{how}: {op} used the profile's config ({r.stdout.strip()!r})")
            same = all(np.array_equal(np.fromfile(os.path.join(raw, f[:-4] + ".out"),
                                                  dtype=np.uint8),
                                      np.load(os.path.join(ref, f)).reshape(-1).view(np.uint8))
                       for f in os.listdir(ref))
            check(same, f"{how}: {op} on cpu: the same bits as `flaretune exec --config`")
        # exec with the profile picks the same config, by the API's rule
        r = sh(FLARETUNE, "exec", op, "--in", ind, "--out", os.path.join(d, "p"), "--backend",
               "cpu", "--profile", profile, *attr_args)
        check(f"config {cfg_text}  from profile" in r.stdout,
              f"exec --profile uses the profile's config for {op}")
    # without that environment (where OpenBLAS misdetects): refused in one line saying so
    r = sh(consumers[0], "cpu", profile, "loss", attrs, os.path.join(raw, "manifest"), raw,
           env={k: v for k, v in env.items() if k != "OPENBLAS_CORETYPE"}, ok=False)
    if "restarted with OPENBLAS_CORETYPE" in sh(FLARETUNE, "version").stdout:
        check(r.returncode == 1 and "set OPENBLAS_CORETYPE=" in r.stderr,
              f"a misdetected OpenBLAS is named ({r.stderr.strip()})")
    return inputs


def run_emu(np, consumer, inputs, work):
    """fusion.dflare on cuda-emu: host and device memory, against exec with the default."""
    d, ind, attrs = inputs["fusion.dflare"]
    attr_args = [a for kv in attrs.split(",") for a in ("--attr", kv)]
    ref = os.path.join(d, "ref-emu")
    r = sh(FLARETUNE, "exec", "fusion.dflare", "--in", ind, "--out", ref, "--backend",
           "cuda-emu", *attr_args, ok=False)
    if r.returncode != 0:
        print(f"skip cuda-emu: {r.stderr.strip()}")
        return
    raw = os.path.join(work, "emu")
    os.makedirs(raw)
    manifest_from(np, ind, ref, raw)
    for mode in ("host", "device"):
        r = sh(consumer, "cuda-emu", "-", "fusion.dflare", attrs, os.path.join(raw, "manifest"),
               raw, mode, ok=False)
        check(r.returncode == 0 and "from default" in r.stdout,
              f"cuda-emu {mode} memory runs ({r.stderr.strip()})")
        same = all(np.array_equal(np.fromfile(os.path.join(raw, f[:-4] + ".out"), np.float32),
                                  np.load(os.path.join(ref, f)).reshape(-1))
                   for f in os.listdir(ref))
        check(same, f"cuda-emu, {mode} memory: the same bits as `flaretune exec`")


def check_emit(ft, work):
    """A package emitted by the installed binary: written from the templates under
    share/flaretune, file for file the package the build's binary writes."""
    profile = os.path.join(work, "profile.json")
    trees = []
    for name, binary in (("installed", ft), ("build", FLARETUNE)):
        out = os.path.join(work, f"package-{name}")
        r = sh(binary, "emit", profile, "--backend", "cpu", "--format", "package", "--prefix",
               "tk", "-o", out, ok=False)
        check(r.returncode == 0 and os.path.isfile(os.path.join(out, "src", "tk_runtime.c")),
              f"the {name} binary emits a package ({r.stderr.strip()})")
        trees.append(out)
    r = sh("diff", "-r", *trees, ok=False)
    check(r.returncode == 0, f"the installed binary's package is the build's ({r.stdout[:400]})")


def main():
    import numpy as np  # noqa: the Python that runs this test has it (CMake checked)
    work = tempfile.mkdtemp(prefix="ft_install_")
    try:
        prefix = os.path.join(work, "prefix")
        sh("cmake", "--install", BUILD, "--prefix", prefix)
        lib = check_layout(prefix)
        test_readme_pkg_config(prefix, lib, work)
        consumers = [build_consumer(prefix, lib, link, work)
                     for link in ("pkg-config", "shared", "static")]
        inputs = run_cases(np, consumers, work)
        run_emu(np, consumers[1], inputs, work)
        # the prefix moves: the binary finds its kernel sources beside it, the example runs
        moved = os.path.join(work, "moved")
        os.rename(prefix, moved)
        ft = os.path.join(moved, "bin", "flaretune")
        v = sh(ft, "version").stdout
        check(f"sources    {os.path.realpath(moved)}/share/flaretune" in v,
              "the moved binary finds share/flaretune beside it")
        check_emit(ft, work)
        mlib = lib.replace(prefix, moved)
        for be in ("cpu", "cuda-emu"):
            r = sh(NUMPY_PY, os.path.join(ROOT, "docs/examples/api_ctypes.py"),
                   os.path.join(mlib, "libflaretune.so.0"), be, ok=False)
            check(r.returncode == 0 and "max relative error" in r.stdout,
                  f"the ctypes example on {be} ({r.stdout.strip()} {r.stderr.strip()[-300:]})")
        with open(os.path.join(ROOT, "docs/api.md")) as f:
            doc = f.read()
        with open(os.path.join(ROOT, "docs/examples/api_ctypes.py")) as f:
            example = f.read()
        check(example in doc, "docs/api.md shows docs/examples/api_ctypes.py verbatim")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    checks.finish()


if __name__ == "__main__":
    main()
