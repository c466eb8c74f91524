#!/usr/bin/env python3
"""test_layers: the architecture, checked on the built objects and the sources.

flaretune is built in layers (docs/contributing.md). A file may call into its own folder and
into the folders of lower layers, never up; two folders of one layer never call each other in a
cycle; no two files call each other, directly or around a loop. The calls are read from the
objects themselves (`nm`: each object's undefined symbols against the symbols the others
define), so a dependency through a header that declares a function another layer defines is
seen, and one through a header of types alone is not a dependency.

Headers are checked from the #include lines, by the same rule: a file (source or header)
includes headers of its own folder or of a lower layer, never of a higher one, and no headers
include each other in a loop. Every internal header lives in the folder of the code it declares:
each function a header declares that an object defines is defined by a source of the header's
own folder (a lookup declared in kernels/op but defined by the registry above it would make the
layering invisible in the tree).
include/ holds the installed C API alone (flaretune.h): an internal header there would be filed
away from its layer, where this check could not see which layer it belongs to.

    test_layers.py BUILD_DIR
"""
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# Bottom up. Folders on one line form a layer: they may not call each other in a cycle.
LAYERS = [
    ["core"],
    ["traces"],
    ["kernels/op"],
    ["kernels/cpu", "kernels/cuda/emu"],
    ["kernels/cuda"],  # the CUDA runtime: device, NVRTC, kernel cache, timer, GEMM, specs
    ["kernels/cuda/analysis"],  # GPU-free analysis: SASS mix, kernel facts, the time model
    ["kernels/cuda/backend"],  # the cuda and cuda-emu backends: contexts, calls, compile pool
    ["kernels/fusion", "kernels/attention", "kernels/loss", "kernels/linear"],
    ["kernels"],  # the registry: every op and every backend, named once
    ["profiles/src"],
    ["tuner", "tuner/strategies"],
    ["tui"],
    ["tuner/cli"],
]
LAYER_OF = {folder: i for i, line in enumerate(LAYERS) for folder in line}


def folder_of(path):
    d = os.path.dirname(path)
    if d not in LAYER_OF:
        raise SystemExit(f"test_layers: {path}: folder {d!r} has no layer; add it to LAYERS "
                         "(and to docs/contributing.md)")
    return d


def objects(build):
    """{source path relative to ROOT: object file} for the library and the command line."""
    out = {}
    for target in ("flaretune_obj.dir", "flaretune.dir"):
        top = os.path.join(build, "CMakeFiles", target)
        for dirpath, _, files in os.walk(top):
            for f in files:
                if not f.endswith(".c.o"):
                    continue
                obj = os.path.join(dirpath, f)
                rel = os.path.relpath(obj, top)[: -len(".o")]
                # CMake mirrors the source path under the target's folder.
                if os.path.exists(os.path.join(ROOT, rel)):
                    out[rel] = obj
    return out


def symbols(obj):
    """(defined, undefined) global symbols of an object."""
    text = subprocess.run(["nm", "-P", obj], check=True, capture_output=True, text=True).stdout
    defined, undefined = set(), set()
    for line in text.splitlines():
        parts = line.split()
        if len(parts) < 2:
            continue
        name, kind = parts[0], parts[1]
        if kind == "U":
            undefined.add(name)
        elif kind in "TDBRCGSVW" and kind.isupper():
            defined.add(name)
    return defined, undefined


def sccs(nodes, edges):
    """Strongly connected components with more than one node (Tarjan, iterative)."""
    index, low, on, stack, out, counter = {}, {}, set(), [], [], [0]
    for root in nodes:
        if root in index:
            continue
        work = [(root, iter(sorted(edges.get(root, ()))))]
        index[root] = low[root] = counter[0]
        counter[0] += 1
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            advanced = False
            for w in it:
                if w not in index:
                    index[w] = low[w] = counter[0]
                    counter[0] += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(edges.get(w, ())))))
                    advanced = True
                    break
                if w in on:
                    low[v] = min(low[v], index[w])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))
    return out


def why(a, b, used):
    names = sorted(used[(a, b)])
    return f"{a} -> {b} ({', '.join(names[:3])}{', ...' if len(names) > 3 else ''})"


def check_calls(build, problems):
    objs = objects(build)
    if len(objs) < 20:
        raise SystemExit(f"test_layers: only {len(objs)} objects under {build}: build it first")
    owner, undef = {}, {}
    for src, obj in objs.items():
        defined, undefined = symbols(obj)
        for s in defined:
            owner[s] = src
        undef[src] = undefined
    edges, used = {}, {}
    for src, needs in undef.items():
        for s in needs:
            dst = owner.get(s)
            if dst and dst != src:
                edges.setdefault(src, set()).add(dst)
                used.setdefault((src, dst), set()).add(s)
    for comp in sccs(sorted(objs), edges):
        inner = [why(a, b, used) for a in comp for b in sorted(edges.get(a, ())) if b in comp]
        problems.append("files that call each other: " + "; ".join(inner))
    fedges, fused = {}, {}
    for (a, b), names in used.items():
        fa, fb = folder_of(a), folder_of(b)
        if fa == fb:
            continue
        if LAYER_OF[fb] > LAYER_OF[fa]:
            problems.append(f"{fa} (layer {LAYER_OF[fa]}) calls up into {fb} (layer "
                            f"{LAYER_OF[fb]}): {why(a, b, used)}")
        fedges.setdefault(fa, set()).add(fb)
        fused.setdefault((fa, fb), set()).update(names)
    for comp in sccs(sorted(fedges), fedges):
        problems.append("folders that call each other: " + ", ".join(comp))
    return len(objs), sum(len(v) for v in edges.values()), owner


INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def resolve(d, inc):
    """The repository path an #include "inc" of a file in folder d names: from its own folder,
    the source root or kernels/ (the build's include path), or None (a system or generated
    header)."""
    for base in (d, "", "kernels"):
        path = os.path.normpath(os.path.join(base, inc))
        if os.path.exists(os.path.join(ROOT, path)):
            return path
    return None


def include_problem(f, path):
    """Why file f may not include the header at path, or None."""
    d, hd = os.path.dirname(f), os.path.dirname(path)
    if hd in LAYER_OF and d in LAYER_OF and hd != d and LAYER_OF[hd] > LAYER_OF[d]:
        return (f"{f} (layer {LAYER_OF[d]}) includes {path} from layer {LAYER_OF[hd]} above "
                "it")
    return None


def check_includes(problems):
    """Every file of a layer includes headers of its own folder or of lower layers; include/
    holds flaretune.h alone."""
    files = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "*.c", "*.h"],
                           cwd=ROOT, check=True, capture_output=True, text=True).stdout.split()
    for f in files:
        if f.startswith("include/") and f != "include/flaretune.h":
            problems.append(f"{f}: include/ is the installed API (flaretune.h) alone; an "
                            "internal header lives beside the code it declares")
    edges, n = {}, 0
    for f in files:
        if not os.path.exists(os.path.join(ROOT, f)):
            continue
        d = os.path.dirname(f)
        if d not in LAYER_OF:
            continue
        text = open(os.path.join(ROOT, f), encoding="utf-8", errors="replace").read()
        for inc in INCLUDE.findall(text):
            path = resolve(d, inc)
            if path is None or os.path.dirname(path) not in LAYER_OF:
                continue
            n += 1
            edges.setdefault(f, set()).add(path)
            why_not = include_problem(f, path)
            if why_not:
                problems.append(why_not)
    for comp in sccs(sorted(edges), edges):
        problems.append("headers that include each other: " + ", ".join(comp))
    return n


# A function declared at the start of a line: a return type, then the name and its "(" (static
# and inline functions, typedefs, macros and the lines of a body are not declarations of another
# file's code).
DECLARATION = re.compile(r'^(?!static\b|typedef\b|#|return\b|extern\s+"C")[A-Za-z_][\w \t*]*?'
                         r'\b([A-Za-z_]\w*)\s*\(', re.M)


def declared(text):
    """The names of the functions a header's text declares, comments left out."""
    text = re.sub(r"/\*.*?\*/", lambda m: "\n" * m.group(0).count("\n"), text, flags=re.S)
    return set(DECLARATION.findall(re.sub(r"//[^\n]*", "", text)))


def declaration_problems(header, text, owner):
    """Why header may not declare what it does: each function it declares that an object
    defines must be defined in the header's own folder."""
    d = os.path.dirname(header)
    return [f"{header} declares {name}, which {owner[name]} defines: the declaration belongs "
            f"in a header of {os.path.dirname(owner[name])}/"
            for name in sorted(declared(text))
            if name in owner and os.path.dirname(owner[name]) != d]


def check_declarations(owner, problems):
    """Every internal header declares only functions of its own folder."""
    headers = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "*.h"], cwd=ROOT,
                             check=True, capture_output=True, text=True).stdout.split()
    n = 0
    for h in headers:
        path = os.path.join(ROOT, h)
        if os.path.dirname(h) not in LAYER_OF or not os.path.exists(path):
            continue
        text = open(path, encoding="utf-8", errors="replace").read()
        n += sum(1 for name in declared(text) if name in owner)
        problems.extend(declaration_problems(h, text, owner))
    return n


def self_test():
    """The checks themselves find what they look for: a planted loop, a planted upward call."""
    assert sccs(["a", "b", "c", "d"], {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [
        ["a", "b", "c"]], "a three-file loop not found"
    assert sccs(["a", "b"], {"a": {"b"}}) == [], "a one-way call taken for a loop"
    assert LAYER_OF["core"] < LAYER_OF["kernels/op"] < LAYER_OF["tuner"] < LAYER_OF["tuner/cli"]
    assert include_problem("kernels/cuda/backend/cuda_backend.c", "tuner/ceilings.h"), \
        "an upward include not found"
    assert include_problem("tuner/session.c", "core/status.h") is None, "a downward include refused"
    assert include_problem("tuner/session.c", "tuner/tune.h") is None, "an own-folder include refused"
    assert resolve("tuner", "op/op.h") == "kernels/op/op.h", "kernels/ is on the include path"
    planted = "/* a lookup */\nconst ft_op *ft_op_find(const char *name);\nstatic int here(void);\n"
    assert declared(planted) == {"ft_op_find"}, "a declaration missed or a static one taken"
    assert declaration_problems("kernels/op/op.h", planted,
                                {"ft_op_find": "kernels/registry.c"}), \
        "a header declaring a function of a higher folder not found"
    assert not declaration_problems("kernels/registry.h", planted,
                                    {"ft_op_find": "kernels/registry.c"}), \
        "a header beside its code refused"


def main():
    self_test()
    if len(sys.argv) != 2:
        raise SystemExit("usage: test_layers.py BUILD_DIR")
    problems = []
    nobj, ncalls, owner = check_calls(sys.argv[1], problems)
    ninc = check_includes(problems)
    ndecl = check_declarations(owner, problems)
    for p in problems:
        print("test_layers: " + p)
    print(f"test_layers: {nobj} objects, {ncalls} file-to-file call edges, {ninc} internal "
          f"includes, {ndecl} declarations of defined functions: {len(problems)} problem(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
