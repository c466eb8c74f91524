#!/usr/bin/env python3
"""test_expr_python.py: the expression evaluator (core/expr.c) against Python itself.

    tests/test_expr_python.py TEST_EXPR_BINARY [--count N] [--seed S]

Draws N random expressions of the subset expr.h reads (numbers, the names a, b, c, d, L,
arithmetic, chained comparisons, `in`, and/or/not, conditionals, min/max/abs/int/round, indexing,
and lists: literals, range, comprehensions with `if`s, nested ones, + and * of lists),
evaluates each with Python's eval (no builtins but those, the same bindings) and with
`test_expr --lines`, and checks they agree: the same kind (integer, float, list) and value, or
both fail. Python's integers never overflow; where its result leaves the 64-bit range the C
evaluator must fail. Exit 0 when all agree, 1 otherwise (each disagreement printed).
"""
import argparse
import math
import random
import subprocess
import sys

BINDINGS = {"a": 7, "b": -3, "c": 2.5, "d": 0, "L": [4, 1, 9]}
SAFE = {"__builtins__": {}, "min": min, "max": max, "abs": abs, "int": int, "round": round,
        "float": float, "len": len, "range": range, "list": list}
LOOP_VARS = ["x", "y", "z"]
I64 = (-(2 ** 63), 2 ** 63 - 1)


def gen_list(rng, depth, names):
    """A list expression: L, a literal, range, a comprehension, or + and * of lists."""
    d = depth - 1
    k = rng.randrange(7) if depth > 0 else rng.randrange(2)
    if k == 0:
        return "L"
    if k == 1:
        return f"list(range({rng.randint(-2, 3)}, {rng.randint(0, 8)}))"
    if k == 2:
        return f"[{', '.join(gen(rng, d, names) for _ in range(rng.randint(0, 3)))}]"
    if k in (3, 4):
        free = [v for v in LOOP_VARS if v not in names]
        if not free:
            return "L"
        v = rng.choice(free)
        inner = names + [v]
        s = f"[{gen(rng, d, inner)} for {v} in {gen_list(rng, d, names)}"
        for _ in range(rng.choice([0, 0, 1, 2])):
            s += f" if {gen(rng, d, inner)}"
        return s + "]"
    if k == 5:
        return f"({gen_list(rng, d, names)} + {gen_list(rng, d, names)})"
    return f"({gen_list(rng, d, names)} * {rng.randint(-1, 3)})"


def gen(rng, depth, names=("a", "b", "c", "d")):
    names = list(names)
    if depth <= 0 or rng.random() < 0.25:
        k = rng.random()
        if k < 0.35:
            return str(rng.randint(0, 40))
        if k < 0.5:
            return rng.choice(["0.5", "2.0", "1.25", "3e2", "0.1"])
        if k < 0.9:
            return rng.choice(names)
        return f"L[{rng.randint(-3, 2)}]"
    d = depth - 1
    k = rng.randrange(14)
    if k == 12:  # a number made of a list
        lst = gen_list(rng, d, names)
        return rng.choice([f"len({lst})", f"max({lst})", f"min({lst})", f"{lst}[{rng.randint(-2, 1)}]"])
    if k == 13:
        return f"({gen(rng, d, names)} {rng.choice(['in', 'not in'])} {gen_list(rng, d, names)})"
    g = lambda dd: gen(rng, dd, names)  # noqa: E731
    if k < 4:
        op = rng.choice(["+", "-", "*", "/", "//", "%", "+", "*"])
        return f"({g(d)} {op} {g(d)})"
    if k == 4:
        return f"({g(d)} ** {rng.randint(0, 3)})"
    if k == 5:
        ops = [rng.choice(["<", "<=", ">", ">=", "==", "!="]) for _ in range(rng.randint(1, 2))]
        s = g(d)
        for o in ops:
            s += f" {o} {g(d)}"
        return f"({s})"
    if k == 6:
        return f"({g(d)} {rng.choice(['and', 'or'])} {g(d)})"
    if k == 7:
        return f"(not {g(d)})"
    if k == 8:
        return f"({g(d)} if {g(d)} else {g(d)})"
    if k == 9:
        f = rng.choice(["min", "max"])
        if rng.random() < 0.3:
            return f"{f}(L)"
        return f"{f}({', '.join(g(d) for _ in range(rng.randint(1, 3)))})"
    if k == 10:
        return f"{rng.choice(['abs', 'int', 'round'])}({g(d)})"
    return f"({g(d)} {rng.choice(['in', 'not in'])} L)"


def classify(v):
    """(kind, value) of a Python result, as the C evaluator would give it."""
    if isinstance(v, bool):
        v = int(v)
    if isinstance(v, int):
        return ("int", v) if I64[0] <= v <= I64[1] else ("error",)
    if isinstance(v, float):
        return ("float", v)
    if isinstance(v, list):
        items = [("error",) if isinstance(x, list) else classify(x) for x in v]
        if any(i[0] == "error" for i in items):
            return ("error",)  # a list of lists, or an item out of range
        return ("list", items)
    return ("error",)  # complex and the like: not in the subset


def python_value(src):
    try:
        # The bindings as globals: a comprehension's own scope sees those, not eval's locals.
        v = eval(src, {**SAFE, **BINDINGS})  # noqa: S307 - the test's own generated text
    except (ZeroDivisionError, OverflowError, ValueError, TypeError, IndexError, MemoryError):
        return ("error",)
    return classify(v)


def c_value(text):
    if text == "error":
        return ("error",)
    if text.startswith("["):
        return ("list", [c_value(x.strip()) for x in text[1:-1].split(",") if x.strip()])
    if any(ch in text for ch in ".en") or text in ("inf", "-inf"):
        return ("float", float(text))
    return ("int", int(text))


def same(p, c):
    if p[0] != c[0]:
        return False
    if p[0] == "float":
        a, b = p[1], c[1]
        return (math.isnan(a) and math.isnan(b)) or (a == b and math.copysign(1, a) == math.copysign(1, b))
    if p[0] == "list":
        return len(p[1]) == len(c[1]) and all(same(x, y) for x, y in zip(p[1], c[1]))
    return p[1:] == c[1:]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("binary")
    ap.add_argument("--count", type=int, default=20000)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    rng = random.Random(args.seed)
    exprs = [gen_list(rng, rng.randint(1, 4), ["a", "b", "c", "d"]) if rng.random() < 0.15
             else gen(rng, rng.randint(1, 5)) for _ in range(args.count)]
    out = subprocess.run([args.binary, "--lines"], input="\n".join(exprs) + "\n", text=True,
                         capture_output=True, check=True).stdout.splitlines()
    if len(out) != len(exprs):
        print(f"test_expr_python: {len(out)} results for {len(exprs)} expressions")
        return 1
    bad = 0
    kinds = {}
    for src, text in zip(exprs, out):
        p, c = python_value(src), c_value(text)
        kinds[p[0]] = kinds.get(p[0], 0) + 1
        if not same(p, c):
            bad += 1
            if bad <= 20:
                print(f"DIFFER: {src}\n  python: {p}\n  C:      {c}")
    print(f"test_expr_python: {len(exprs)} expressions ({', '.join(f'{k} {v}' for k, v in sorted(kinds.items()))}), "
          f"{bad} disagree")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
