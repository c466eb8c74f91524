#!/usr/bin/env python3
"""test_gpu_scripts.py: the pieces of the GPU run's scripts that a rehearsal does not reach.

  - gpu-summary.py's return-limit check refuses each way a folder can break what a lent GPU
    machine sends back (too many files, a file over 16 MiB, a file three folders down, a name
    with other characters, a link) and passes a folder within them;
  - its packing leaves the event logs out when the logs would not fit, and says so;
  - its tables show a skipped run, a run without a winner and a cut step as such;
  - its model check: Spearman's rank correlation of predicted and measured times (ties, no
    spread), and Nsight Compute's raw CSV summed over launches into the figures of `inspect`;
  - gpu-import.sh refuses a folder that is no result, a rehearsal without --rehearsal, and a
    README without its markers, each before writing anything;
  - device-kit.sh says what it compiles as it goes (with stand-ins for apt-get and flaretune).

    test_gpu_scripts.py FLARETUNE
"""
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import clitest  # noqa: E402
from clitest import check  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def load_summary():
    spec = importlib.util.spec_from_file_location("gpu_summary",
                                                  os.path.join(ROOT, "scripts", "gpu-summary.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


gs = load_summary()


def write(path, data=b"x"):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(data)


def test_limits():
    with tempfile.TemporaryDirectory() as tmp:
        limits(tmp)


def limits(tmp):
    good = os.path.join(tmp, "good")
    for n in ("summary.md", "summary.json", "profile.json", "raw.tar.gz", "gpu-check.log"):
        write(os.path.join(good, n))
    write(os.path.join(good, "a", "b", "ok.txt"))  # two folders down comes back
    check(gs.check_out(good) == [], f"a good folder: {gs.check_out(good)}")

    many = os.path.join(tmp, "many")
    for i in range(9):
        write(os.path.join(many, f"f{i}"))
    check(any("9 files" in p for p in gs.check_out(many)), "nine files are refused")

    big = os.path.join(tmp, "big")
    os.makedirs(big)
    with open(os.path.join(big, "raw.tar.gz"), "wb") as f:
        f.truncate(16 * 2**20 + 1)
    check(any("over 16 MiB" in p for p in gs.check_out(big)), "a file over 16 MiB is refused")
    with open(os.path.join(big, "raw.tar.gz"), "wb") as f:
        f.truncate(16 * 2**20)
    check(gs.check_out(big) == [], "a file of exactly 16 MiB comes back")

    deep = os.path.join(tmp, "deep")
    write(os.path.join(deep, "a", "b", "c", "f"))
    check(any("deeper than 2" in p for p in gs.check_out(deep)), "three folders down is refused")

    odd = os.path.join(tmp, "odd")
    write(os.path.join(odd, "a file"))
    check(any("other characters" in p for p in gs.check_out(odd)), "a name with a space is refused")

    link = os.path.join(tmp, "link")
    write(os.path.join(link, "f"))
    os.symlink("f", os.path.join(link, "g"))
    check(any("not a plain file" in p for p in gs.check_out(link)), "a link is refused")

    # The command line: exit 1 with the problem named, 0 when within.
    r = subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "gpu-summary.py"), "--check",
                        deep], capture_output=True, text=True)
    check(r.returncode == 1 and "deeper" in r.stderr, f"--check on a bad folder: {r.returncode}")
    r = subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "gpu-summary.py"), "--check",
                        good], capture_output=True, text=True)
    check(r.returncode == 0, f"--check on a good folder: {r.returncode} {r.stderr}")


def test_pack():
    with tempfile.TemporaryDirectory() as tmp:
        pack(tmp)


def pack(tmp):
    work, out = os.path.join(tmp, "pwork"), os.path.join(tmp, "pout")
    os.makedirs(out)
    write(os.path.join(work, "steps.jsonl"), b"{}\n")
    write(os.path.join(work, "logs", "build.log"), b"built\n")
    write(os.path.join(work, "logs", "tune-0.jsonl"), os.urandom(300_000))  # does not compress
    left = gs.pack(work, out)
    check(left == [], f"logs that fit: nothing left out ({left})")
    limit, gs.RAW_LIMIT = gs.RAW_LIMIT, 100_000
    left = gs.pack(work, out)
    gs.RAW_LIMIT = limit
    check(left == ["tune-0.jsonl"], f"the event log left out when it does not fit: {left}")
    with tarfile.open(os.path.join(out, "raw.tar.gz")) as t:
        names = sorted(t.getnames())
    check(names == ["logs/build.log", "steps.jsonl"], f"what the archive kept: {names}")
    check([n for n in os.listdir(out) if ".tmp." in n] == [], "no temporary file left behind")


def test_tables():
    doc = {"backend": "cuda", "device": "NVIDIA H200", "date": "2026-12-02T00:00:00Z",
           "budget_s": 480, "elapsed_s": 100, "finished": False,
           "kernel_cache": {"at_start": 182, "compiled": 0, "hits": 40},
           "raw_left_out": ["tune-3.jsonl"],
           "steps": [{"step": "tune a", "status": "cut", "seconds": 30, "share_s": 29,
                      "note": "stopped at its share of 29 s; x=1"},
                     {"step": "tune b", "status": "skipped", "seconds": 0, "share_s": 5,
                      "note": "no time left"}],
           "runs": [{"name": "a", "status": "cut", "config": {"x": 1}, "verified": "yes",
                     "cupti": {"median_s": 418.3e-6, "iqr_s": 1e-6, "samples": 197,
                               "roofline_frac": 0.62, "bound": "memory"},
                     "events": {"median_s": 679e-6}},
                    {"name": "b", "status": "skipped"},
                    {"name": "c", "status": "ok", "verified": "no winner (default benchmarked)"}],
           "torch": []}
    md = gs.markdown(doc)
    check("in progress (or stopped before its end)" in md, "an unfinished run says so")
    check("| a | `x=1` | 418.3 µs (1.0 µs, 197) | 679.0 µs | 62% (memory) | yes |" in md,
          f"a benchmarked run's row:\n{md}")
    check("| b | (skipped) |" in md, "a skipped run's row")
    check("| c | (no benchmark) |" in md and "no winner" in md, "a run without a benchmark")
    check("0 compiled in this run, 40 found in the cache (182 there at the start)" in md,
          "the kernel modules' line")
    check("tune-3.jsonl" in md, "what the archive left out is said")


NCU_CSV = """==PROF== Connected to process 123
"ID","Process ID","Kernel Name","gpu__time_duration.sum","dram__bytes_read.sum",\
"l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum","l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum",\
"smsp__inst_executed.sum","smsp__thread_inst_executed.sum"
"","","","usecond","Mbyte","","","inst","inst"
"0","123","dflare_fwd_smem","10.5","2.0","1,000","4,000","500","16000"
"1","123","dflare_fwd_smem","9.5","1.0","1000","12000","500","0"
"""


def test_model_and_ncu():
    check(gs.spearman([1, 2, 3, 4], [10, 20, 30, 40]) == 1.0, "same order: 1")
    check(gs.spearman([1, 2, 3, 4], [4, 3, 2, 1]) == -1.0, "reversed: -1")
    check(gs.spearman([1, 2], [1, 2]) is None, "under 3 pairs: none")
    check(gs.spearman([5, 5, 5], [1, 2, 3]) is None, "no spread: none")
    check(gs.ranks([3, 1, 3, 2]) == [3.5, 1.0, 3.5, 2.0], "ties share their mean rank")
    n = gs.ncu_parse(NCU_CSV.replace("\\\n", ""))
    check(n is not None and n["kernels"] == ["dflare_fwd_smem"] * 2, f"two launches: {n}")
    if n:
        m = n["sums"]
        check(abs(m["gpu__time_duration.sum"] - 20e-6) < 1e-12, f"time summed in seconds: {m}")
        check(m["dram__bytes_read.sum"] == 3e6, "Mbyte scaled to bytes")
        check(m["l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum"] == 16000 and
              m["l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum"] == 2000,
              "thousands separators read")
    check(gs.ncu_parse("==PROF== no kernels were profiled\n") is None, "no launch: none")
    with tempfile.TemporaryDirectory() as tmp:
        write(os.path.join(tmp, "logs", "ncu-0-best.csv"), NCU_CSV.replace("\\\n", "").encode())
        write(os.path.join(tmp, "logs", "ncu-0-best.json"),
              json.dumps({"name": "a", "which": "best", "config": "x=1"}).encode())
        write(os.path.join(tmp, "logs", "ncu-1-default.json"),
              json.dumps({"name": "b", "which": "default", "config": ""}).encode())
        ev = [{"event": "verified", "config": {"x": i}, "predicted_s": p}
              for i, p in enumerate((1e-5, 2e-5, 3e-5))]
        ev += [{"event": "measured", "config": {"x": i}, "stats": {"median_s": m}}
               for i, m in enumerate((3e-5, 1e-5, 2e-5))]
        write(os.path.join(tmp, "logs", "tune-0.jsonl"),
              "".join(json.dumps(e) + "\n" for e in ev).encode())
        pred = gs.prediction_of(tmp, 0)
        check(pred is not None and pred["n"] == 3 and abs(pred["rank_corr"] + 0.5) < 1e-12,
              f"predicted 1,2,3 against measured 3,1,2: rho -0.5: {pred}")
        x = gs.ncu_of(tmp)
        check(len(x) == 2 and x[0]["ld_sectors_per_request"] == 8.0 and
              x[0]["lanes_per_instruction"] == 16.0 and x[0]["launches"] == 2,
              f"sectors per request 16000 / 2000, lanes 16000 / 1000: {x[:1]}")
        check("error" in x[1], f"a config without its CSV is an error row: {x[1:]}")
        # ncu-compare.py sets the figures beside the emulator's for the same op, sizes, config.
        os.remove(os.path.join(tmp, "logs", "ncu-1-default.json"))
        write(os.path.join(tmp, "logs", "ncu-0-best.json"),
              json.dumps({"name": "a", "which": "default", "op": "fusion.dflare",
                          "args": "--preset tiny.dflare.train", "config": ""}).encode())
        r = subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "ncu-compare.py"), tmp,
                            "--flaretune", clitest.FT, "--json"], capture_output=True, text=True)
        rows = json.loads(r.stdout) if r.returncode == 0 else []
        emu = rows[0]["emulator"] if len(rows) == 1 else {}
        check(len(rows) == 1 and rows[0]["ncu"]["ld_sectors_per_request"] == 8.0 and
              emu.get("st_sectors_per_request", 0) > 0 and
              abs(emu["unique_bytes"] - emu["napkin_bytes"]) <= 0.05 * emu["napkin_bytes"],
              f"ncu-compare: ncu's 8 sectors per load request beside the emulator's figures "
              f"for the same config: {rows} {r.stderr}")


def test_import():
    with tempfile.TemporaryDirectory() as tmp:
        import_into(tmp)


def import_into(tmp):
    repo = os.path.join(tmp, "repo")
    os.makedirs(os.path.join(repo, "scripts"))
    shutil.copy(os.path.join(ROOT, "scripts", "gpu-import.sh"), os.path.join(repo, "scripts"))
    readme = "# x\n<!-- gpu-check:begin -->\nold\n<!-- gpu-check:end -->\n"
    write(os.path.join(repo, "README.md"), readme.encode())
    imp = os.path.join(repo, "scripts", "gpu-import.sh")
    env = dict(os.environ, FT=os.path.abspath(clitest.FT))

    def run(*args):
        return subprocess.run(["bash", imp, *args], capture_output=True, text=True, env=env)

    def untouched(what):
        with open(os.path.join(repo, "README.md")) as f:
            check(f.read() == readme, f"{what}: README changed")
        check(not os.path.exists(os.path.join(repo, "profiles")), f"{what}: profiles written")

    r = run(os.path.join(tmp, "no-such"))
    check(r.returncode == 1 and "not a folder" in r.stderr, f"a missing folder: {r.stderr}")
    empty = os.path.join(tmp, "empty")
    os.makedirs(empty)
    r = run(empty)
    check(r.returncode == 1 and "no summary.json" in r.stderr, f"not a result: {r.stderr}")
    untouched("not a result")

    res = os.path.join(tmp, "res")
    write(os.path.join(res, "summary.json"),
          json.dumps({"backend": "cuda-emu", "device": "SIMT emulator",
                      "date": "2026-12-02T00:00:00Z"}).encode())
    write(os.path.join(res, "summary.md"), b"# gpu-check on SIMT emulator (cuda-emu)\n\n| t |\n")
    for f in ("summary.json", "summary.md"):  # as files come back from the device
        os.chmod(os.path.join(res, f), 0o444)
    r = run(res)
    check(r.returncode == 1 and "rehearsal" in r.stderr, f"a rehearsal refused: {r.stderr}")
    untouched("a rehearsal")

    write(os.path.join(repo, "README.md"), b"# no markers\n")
    r = run(res, "--rehearsal")
    check(r.returncode == 1 and "markers" in r.stderr, f"no markers: {r.stderr}")
    check(not os.path.exists(os.path.join(repo, "profiles")), "no markers: profiles written")

    write(os.path.join(repo, "README.md"), readme.encode())
    r = run(res, "--rehearsal")
    check(r.returncode == 0, f"an import without a profile: {r.returncode} {r.stderr}")
    with open(os.path.join(repo, "README.md")) as f:
        text = f.read()
    check("old" not in text and "| t |" in text and
          "profiles/runs/simt-emulator-2026-12-02" in text and "it wrote no profile" in text,
          f"README's section:\n{text}")
    # The commit it prints names only what it wrote (no profile: none), and what it copied
    # (read-only, as it comes back from the device) is writable.
    add = [l for l in r.stdout.splitlines() if "git add" in l]
    check(len(add) == 1 and "profiles/simt-emulator" not in add[0] and "README.md" in add[0],
          f"the commit line names what was written: {r.stdout}")
    run_dir = os.path.join(repo, "profiles", "runs", "simt-emulator-2026-12-02")
    check(all(os.access(os.path.join(run_dir, f), os.W_OK) for f in os.listdir(run_dir)),
          f"the copies are writable: {os.listdir(run_dir)}")
    r = run(res, "--rehearsal")
    check(r.returncode == 0 and os.path.isdir(os.path.join(repo, "profiles", "runs",
                                                           "simt-emulator-2026-12-02-2")),
          "a second import the same day gets its own folder")


STUB_FLARETUNE = r"""#!/bin/sh
# A stand-in for flaretune built with the toolkit: version says so, compile puts a module in
# the cache (or, with --json, says nothing is left to compile).
case $1 in
version) echo "cuda       built (stand-in)" ;;
compile)
  case " $* " in *" --json "*) echo '{"compiled": 0}'; exit 0 ;; esac
  mkdir -p "$FLARETUNE_CACHE_DIR/nvrtc"
  echo "$*" > "$FLARETUNE_CACHE_DIR/nvrtc/$(echo "$*" | cksum | cut -d' ' -f1).cubin" ;;
esac
"""
STUB_VARIANTS = r"""#!/bin/sh
mkdir -p "$FLARETUNE_CACHE_DIR/nvrtc"
echo "$FT_TEST_COMPILE_ARCH" > "$FLARETUNE_CACHE_DIR/nvrtc/variants-$FT_TEST_COMPILE_ARCH.cubin"
echo "3 kernel modules compiled"
"""
STUB_APT = r"""#!/bin/sh
# apt-get download P...: an empty .deb each, in the current folder.
[ "$1" = download ] || exit 0
shift
for p in "$@"; do : > "${p}_1.0_amd64.deb"; done
"""


def test_device_kit_progress():
    """scripts/device-kit.sh compiles every module of every run for minutes: it says what it is
    at, a line per step with the seconds so far (run k/n), not nothing until the end. Run with
    stand-ins for apt-get, flaretune and the variant test."""
    with tempfile.TemporaryDirectory() as tmp:
        stubs, build = os.path.join(tmp, "bin"), os.path.join(tmp, "build")
        os.makedirs(stubs)
        os.makedirs(os.path.join(build, "tests"))
        for path, text in ((os.path.join(stubs, "apt-get"), STUB_APT),
                           (os.path.join(build, "flaretune"), STUB_FLARETUNE),
                           (os.path.join(build, "tests", "test_cuda_variants"), STUB_VARIANTS)):
            with open(path, "w") as f:
                f.write(text)
            os.chmod(path, 0o755)
        env = dict(os.environ, BUILD=build, PATH=stubs + os.pathsep + os.environ["PATH"])
        p = subprocess.run(["bash", os.path.join(ROOT, "scripts", "device-kit.sh"),
                            os.path.join(tmp, "kit")], capture_output=True, text=True, env=env,
                           timeout=300)
        check(p.returncode == 0, f"device-kit with stand-ins: exit {p.returncode}: "
              f"{p.stderr.strip()[-400:]}")
        runs = subprocess.run(["bash", "-c", ". scripts/gpu-runs.sh; gpu_runs | wc -l"],
                              capture_output=True, text=True, cwd=ROOT).stdout.strip()
        for arch in ("sm_90a", "sm_80"):
            steps = re.findall(r"^  \[\d+ s\] run (\d+)/(\d+): compile .* for %s$" % arch,
                               p.stdout, re.M)
            check(len(steps) == int(runs) and steps[-1] == (runs, runs),
                  f"{arch}: a line per run of gpu-runs.txt ({len(steps)} of {runs})")
            check(re.search(r"^  \[\d+ s\] variants: .* for %s$" % arch, p.stdout, re.M),
                  f"{arch}: the variant test's modules said before they compile")
        check(re.search(r"^== \[\d+ s\] packing", p.stdout, re.M), f"packing said: {p.stdout}")


def main():
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    return clitest.main(sys.argv[1], (test_limits, test_pack, test_tables, test_model_and_ncu,
                                         test_import, test_device_kit_progress))


if __name__ == "__main__":
    sys.exit(main())
