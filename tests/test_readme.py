#!/usr/bin/env python3
"""test_readme.py: README's instructions as a newcomer follows them, checked without running
the long ones.

  - the tour says where the binary is (`export PATH=$PWD/build:$PATH`) before its first
    `flaretune` command, and `make build` prints that line;
  - every option a tour command uses is one its command's --help lists, and every tuning
    command of the tour is bounded (a tiny preset and a --budget or --time), so the tour
    finishes in minutes, not hours;
  - the GPU `make run`'s minutes agree between README and scripts/main-job.sh;
  - the gpu-check block does not say there is no GPU run right above the H200 run.

usage: test_readme.py --flaretune PATH
"""
import argparse
import os
import re
import shlex
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import clitest  # noqa: E402
from clitest import check, run  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PATH_LINE = "export PATH=$PWD/build:$PATH"


def readme():
    with open(os.path.join(ROOT, "README.md")) as f:
        return f.read()


def tour():
    """The tour's indented lines, from its heading to the next heading."""
    text = readme()
    start = text.index("## A tour")
    end = text.index("\n## ", start + 1)
    return [l.strip() for l in text[start:end].splitlines() if l.startswith("    ")]


def test_path_before_the_tour():
    lines = tour()
    first = next(i for i, l in enumerate(lines) if l.startswith("flaretune "))
    check(PATH_LINE in lines[:first], f"the tour puts build/ on PATH first: {lines[:first + 1]}")
    p = subprocess.run(["make", "-n", "build", "BUILD=build"], cwd=ROOT, capture_output=True,
                       text=True)
    check(f"export PATH={ROOT}/build:\\$PATH" in p.stdout,
          f"make build prints where the binary is: {p.stdout[-300:]!r}")


def test_tour_commands():
    for line in tour():
        if not line.startswith("flaretune "):
            continue
        words = shlex.split(line.split("#")[0])
        cmd = words[1]
        rc, helptext, _ = run(cmd, "--help")
        check(rc == 0, f"{cmd} --help")
        for w in words[2:]:
            if w.startswith("--"):
                check(w.split("=")[0] in helptext, f"`{line}`: {w} is in `flaretune {cmd} --help`")
        if cmd == "tune":
            bounded = "--budget" in words or "--time" in words
            preset = words[words.index("--preset") + 1] if "--preset" in words else ""
            check(bounded and (preset.startswith("tiny.") or "--t1" in words),
                  f"`{line}`: a tour's tuning run is bounded (a tiny preset or a T1 file, "
                  "--budget or --time)")


def test_minutes_agree():
    text = " ".join(readme().split())
    m = re.search(r"NVRTC compiling on every core: about (\w+) minutes", text)
    with open(os.path.join(ROOT, "scripts", "main-job.sh")) as f:
        script = " ".join(f.read().split())
    n = re.search(r"default 45: about (\w+) minutes", script)
    check(m and n and m.group(1) == n.group(1),
          f"README and main-job.sh agree on the GPU run's minutes: {m and m.group(1)}, "
          f"{n and n.group(1)}")


def test_gpu_sections_agree():
    text = readme()
    block = text[text.index("<!-- gpu-check:begin -->"):text.index("<!-- gpu-check:end -->")]
    if "### GPU: the first H200 run" in text:
        check("No run of" not in block and "H200" in block,
              f"the gpu-check block does not deny the H200 run below it: {block!r}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--flaretune", required=True)
    return clitest.main(ap.parse_args().flaretune,
                        (test_path_before_the_tour, test_tour_commands, test_minutes_agree,
                         test_gpu_sections_agree))


if __name__ == "__main__":
    sys.exit(main())
