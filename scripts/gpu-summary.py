#!/usr/bin/env python3
"""gpu-summary.py: gpu-check's summary, rewritten after every step, and its output's limits.

    gpu-summary.py WORK OUT [--backend B] [--budget S] [--elapsed S] [--final]
    gpu-summary.py --check OUT

From gpu-check's work folder (steps.jsonl, logs/, profile.json) it copies the profile to
OUT/profile.json and writes OUT/summary.json (every step, every
run's benchmark, PyTorch's times: what scripts/gpu-import.sh reads) and OUT/summary.md (the same
as tables), each to a temporary name renamed into place, and packs WORK into OUT/raw.tar.gz. The
archive is kept under 16 MiB: when the logs do not fit, the event logs are left out first, and
the summary says so.

--check OUT verifies what a lent GPU machine can send back: at most 8 files, each at most
16 MiB, no deeper than two folders, names of letters, digits, '.', '_' and '-'. With --final the
same check ends the summary; a violation is an error (exit 1).
"""
import argparse
import datetime
import json
import os
import re
import sys
import tarfile

MAX_FILES = 8
MAX_BYTES = 16 << 20
MAX_DEPTH = 2  # OUT/a/b/file comes back, OUT/a/b/c/file does not
NAME_RE = re.compile(r"^[A-Za-z0-9._-]+$")
RAW_LIMIT = 15 << 20  # the archive's own limit, a margin under MAX_BYTES


def check_out(out):
    """Problems with OUT as a lent machine's return folder (empty list: none)."""
    problems, files = [], []
    for d, dirs, names in os.walk(out):
        rel = os.path.relpath(d, out)
        depth = 0 if rel == "." else rel.count(os.sep) + 1
        for n in dirs + names:
            if not NAME_RE.match(n):
                problems.append(f"{os.path.join(rel, n)}: a name with other characters")
        for n in names:
            p = os.path.join(d, n)
            if os.path.islink(p) or not os.path.isfile(p):
                problems.append(f"{os.path.join(rel, n)}: not a plain file")
                continue
            if depth > MAX_DEPTH:
                problems.append(f"{os.path.join(rel, n)}: deeper than {MAX_DEPTH} folders")
            size = os.path.getsize(p)
            if size > MAX_BYTES:
                problems.append(f"{os.path.join(rel, n)}: {size / 2**20:.1f} MiB, over 16 MiB")
            files.append(p)
    if len(files) > MAX_FILES:
        problems.append(f"{len(files)} files, at most {MAX_FILES}")
    return problems


def load(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def write_atomic(path, text):
    tmp = f"{path}.tmp.{os.getpid()}"
    with open(tmp, "w") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def pack(work, out):
    """WORK's logs into OUT/raw.tar.gz; the event logs left out when they do not fit."""
    left_out = []
    for attempt in range(2):
        tmp = os.path.join(out, f"raw.tar.gz.tmp.{os.getpid()}")
        with tarfile.open(tmp, "w:gz") as tar:
            for d, _, names in os.walk(work):
                for n in sorted(names):
                    p = os.path.join(d, n)
                    if attempt and n.endswith(".jsonl") and n != "steps.jsonl":
                        left_out.append(n)
                        continue
                    tar.add(p, arcname=os.path.relpath(p, work))
        if os.path.getsize(tmp) <= RAW_LIMIT or attempt:
            os.replace(tmp, os.path.join(out, "raw.tar.gz"))
            return left_out
        os.unlink(tmp)
    return left_out


def t(s):
    if s is None:
        return ""
    return f"{s * 1e6:.1f} µs" if s < 1e-3 else f"{s * 1e3:.3g} ms"


def device_of(work, backend):
    smi = os.path.join(work, "logs", "nvidia-smi.csv")
    try:
        lines = [ln for ln in open(smi).read().splitlines() if ln.strip()]
        if len(lines) >= 2:
            return lines[1].split(",")[0].strip()
    except OSError:
        pass
    return "SIMT emulator" if backend == "cuda-emu" else "unknown GPU"


def runs_of(work, steps):
    """One record per tuning step: its status and its winner's benchmarks with each clock."""
    runs = []
    logs = os.path.join(work, "logs")
    for s in steps:
        if s.get("kind") != "tune":
            continue
        i = s["index"]
        meta = load(os.path.join(logs, f"run-{i}.json")) or {}
        rec = {"name": meta.get("name") or s["step"][len("tune "):], "op": meta.get("op"),
               "args": meta.get("args"), "status": s["status"]}
        for clock in ("cupti", "events", "emulated"):
            b = load(os.path.join(logs, f"bench-{i}-{clock}.json"))
            if not b:
                continue
            rec[clock] = {k: b.get(k) for k in ("median_s", "iqr_s", "samples", "roofline_frac",
                                                "bound", "roofline_level", "peak_extra_bytes",
                                                "clock")}
            rec.setdefault("config", b.get("config"))
            rec.setdefault("ceilings", b.get("ceilings"))
            rec.setdefault("dims", b.get("dims"))
            rec.setdefault("attrs", b.get("attrs"))
        runs.append(rec)
    return runs


def ranks(xs):
    """1-based ranks, ties sharing their mean rank."""
    order = sorted(range(len(xs)), key=lambda i: xs[i])
    r = [0.0] * len(xs)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and xs[order[j + 1]] == xs[order[i]]:
            j += 1
        for k in range(i, j + 1):
            r[order[k]] = (i + j) / 2 + 1
        i = j + 1
    return r


def spearman(xs, ys):
    """Spearman's rank correlation (Pearson's of the ranks); None under 3 pairs or no spread."""
    if len(xs) < 3:
        return None
    rx, ry = ranks(xs), ranks(ys)
    mx, my = sum(rx) / len(rx), sum(ry) / len(ry)
    sxy = sum((a - mx) * (b - my) for a, b in zip(rx, ry))
    sxx = sum((a - mx) ** 2 for a in rx)
    syy = sum((b - my) ** 2 for b in ry)
    return sxy / (sxx * syy) ** 0.5 if sxx > 0 and syy > 0 else None


def prediction_of(work, i):
    """The model against the tuning run: each measured candidate's median beside the time it
    was predicted (predicted_s on its events), and their rank correlation."""
    pred, meas = {}, {}
    try:
        for line in open(os.path.join(work, "logs", f"tune-{i}.jsonl")):
            e = json.loads(line)
            key = json.dumps(e.get("config"), sort_keys=True)
            if isinstance(e.get("predicted_s"), (int, float)) and e["predicted_s"] > 0:
                pred[key] = e["predicted_s"]
            st = e.get("stats") or {}
            if e.get("event") == "measured" and not e.get("screened") and st.get("median_s"):
                meas[key] = st["median_s"]
    except (OSError, ValueError):
        return None
    both = [k for k in meas if k in pred]
    if not both:
        return None
    rho = spearman([pred[k] for k in both], [meas[k] for k in both])
    return {"n": len(both), "rank_corr": rho,
            "pairs": [[json.loads(k), pred[k], meas[k]] for k in both]}


# Nsight Compute's raw CSV (--csv --page raw): a header of metric names, a row of units, then a
# row per profiled launch. The figures are summed over the launches of one call.
NCU_SUMS = ("gpu__time_duration.sum", "dram__bytes_read.sum", "dram__bytes_write.sum",
            "l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum",
            "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum",
            "l1tex__t_requests_pipe_lsu_mem_global_op_st.sum",
            "l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum",
            "smsp__inst_executed_op_shared_ld.sum", "smsp__inst_executed_op_shared_st.sum",
            "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum",
            "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st.sum",
            "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum",
            "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum",
            "smsp__inst_executed.sum", "smsp__thread_inst_executed.sum")
NCU_SCALE = {"byte": 1, "kbyte": 1e3, "mbyte": 1e6, "gbyte": 1e9, "nsecond": 1e-9,
             "usecond": 1e-6, "msecond": 1e-3, "second": 1}


def ncu_parse(text):
    """{kernels: [name...], sums: {metric: value}} of one ncu CSV; None when it holds no row."""
    import csv
    import io
    rows = [r for r in csv.reader(io.StringIO(text)) if r]
    head = next((k for k, r in enumerate(rows) if "Kernel Name" in r), None)
    if head is None or len(rows) < head + 3:
        return None
    names, units = rows[head], rows[head + 1]
    sums, kernels = {}, []
    for r in rows[head + 2:]:
        if len(r) != len(names):
            continue
        kernels.append(r[names.index("Kernel Name")])
        for m in NCU_SUMS:
            if m in names:
                k = names.index(m)
                try:
                    v = float(r[k].replace(",", ""))
                except ValueError:
                    continue
                sums[m] = sums.get(m, 0.0) + v * NCU_SCALE.get(units[k].strip().lower(), 1)
    return {"kernels": kernels, "sums": sums} if kernels else None


def ncu_figures(m):
    """The figures `flaretune inspect` shows, from one config's ncu sums."""
    def div(a, b):
        return m.get(a, 0) / m[b] if m.get(b) else None
    return {
        "dram_bytes": m.get("dram__bytes_read.sum", 0) + m.get("dram__bytes_write.sum", 0),
        "ld_sectors_per_request": div("l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum",
                                      "l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum"),
        "st_sectors_per_request": div("l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum",
                                      "l1tex__t_requests_pipe_lsu_mem_global_op_st.sum"),
        "shared_ld_wavefronts_per_request": div(
            "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum",
            "smsp__inst_executed_op_shared_ld.sum"),
        "shared_st_wavefronts_per_request": div(
            "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st.sum",
            "smsp__inst_executed_op_shared_st.sum"),
        "bank_conflicts": m.get("l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum", 0)
        + m.get("l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum", 0),
        "warp_instructions": m.get("smsp__inst_executed.sum"),
        "lanes_per_instruction": div("smsp__thread_inst_executed.sum", "smsp__inst_executed.sum"),
    }


def ncu_of(work):
    """Each profiled config: its ncu sums and the figures `flaretune inspect` shows."""
    out = []
    logs = os.path.join(work, "logs")
    for n in sorted(os.listdir(logs)) if os.path.isdir(logs) else []:
        if not (n.startswith("ncu-") and n.endswith(".json")):
            continue
        meta = load(os.path.join(logs, n)) or {}
        try:
            parsed = ncu_parse(open(os.path.join(logs, n[:-5] + ".csv")).read())
        except OSError:
            parsed = None
        rec = dict(meta)
        if not parsed:
            rec["error"] = "no profiled launch (see logs/" + n[:-5] + ".err)"
            out.append(rec)
            continue
        m = parsed["sums"]
        rec.update({"launches": len(parsed["kernels"]), "kernels": sorted(set(parsed["kernels"])),
                    "time_s": m.get("gpu__time_duration.sum")})
        rec.update(ncu_figures(m))
        rec["metrics"] = m
        out.append(rec)
    return out


def torch_of(work):
    out = []
    logs = os.path.join(work, "logs")
    for n in sorted(os.listdir(logs)) if os.path.isdir(logs) else []:
        if n.startswith("torch-") and n.endswith(".json"):
            x = load(os.path.join(logs, n))
            if x:
                out.append(x)
    return out


def steps_of(work):
    steps = []
    try:
        for line in open(os.path.join(work, "steps.jsonl")):
            if line.strip():
                steps.append(json.loads(line))
    except (OSError, ValueError):
        pass
    return steps


def markdown(doc):
    L = []
    fin = "finished" if doc["finished"] else "in progress (or stopped before its end)"
    L.append(f"# gpu-check on {doc['device']} ({doc['backend']})\n")
    L.append(f"{doc['date']}; budget {doc['budget_s']} s, {doc['elapsed_s']} s elapsed, {fin}.")
    k = doc["kernel_cache"]
    L.append(f"Kernel modules: {k['compiled']} compiled in this run, {k['hits']} found in the "
             f"cache ({k['at_start']} there at the start), summed over the steps.")
    c = next((r.get("ceilings") for r in doc["runs"] if r.get("ceilings")), None)
    if c and c.get("copy_bytes_per_s"):
        L.append(f"Ceilings measured in this run: copy {c['copy_bytes_per_s'] / 1e12:.2f} TB/s, "
                 f"{c.get('gemm', 'gemm')} {c.get('gemm_flops_per_s', c.get('sgemm_flops_per_s', 0)) / 1e12:.1f} "
                 f"TFLOP/s.")
    if doc.get("raw_left_out"):
        L.append(f"Left out of raw.tar.gz to stay under 16 MiB: {', '.join(doc['raw_left_out'])}.")
    L.append("")
    L.append("| step | status | seconds (share) | note |")
    L.append("|---|---|---|---|")
    for s in doc["steps"]:
        note = s.get("note", "").replace("|", "/")
        L.append(f"| {s['step']} | {s['status']} | {s['seconds']} ({s['share_s']}) | {note} |")
    if doc["runs"]:
        emu = doc["backend"] == "cuda-emu"
        L.append("")
        if emu:
            L.append("| run | best config | emulated median (IQR, n) | % of ceiling | verified |")
            L.append("|---|---|---|---|---|")
        else:
            L.append("| run | best config | CUPTI median (IQR, n) | events median | % of ceiling | verified |")
            L.append("|---|---|---|---|---|---|")
        for r in doc["runs"]:
            a = r.get("emulated" if emu else "cupti")
            cfg = ",".join(f"{x}={y}" for x, y in (r.get("config") or {}).items())
            ver = r.get("verified", "")
            if not a or a.get("median_s") is None:
                why = "skipped" if r.get("status") == "skipped" else "no benchmark"
                L.append(f"| {r['name']} | ({why}) |" + (" |" * (2 if emu else 3)) + f" {ver} |")
                continue
            frac = f"{100 * a['roofline_frac']:.0f}% ({a['bound']})" if a.get("roofline_frac") is not None else ""
            med = f"{t(a['median_s'])} ({t(a['iqr_s'])}, {a['samples']})"
            if emu:
                L.append(f"| {r['name']} | `{cfg}` | {med} | {frac} | {ver} |")
            else:
                ev = r.get("events") or {}
                L.append(f"| {r['name']} | `{cfg}` | {med} | {t(ev.get('median_s'))} | {frac} | {ver} |")
    preds = [r for r in doc["runs"] if r.get("prediction")]
    if preds:
        L.append("")
        L.append("| run | predicted vs measured: rank correlation | candidates |")
        L.append("|---|---|---|")
        for r in preds:
            p = r["prediction"]
            rho = f"{p['rank_corr']:.2f}" if p.get("rank_corr") is not None else "(no spread)"
            L.append(f"| {r['name']} | {rho} | {p['n']} |")
    if doc.get("ncu"):
        f = lambda x, d=2: "" if x is None else f"{x:.{d}f}"  # noqa: E731
        L.append("")
        L.append("| Nsight Compute | config | time | DRAM bytes | ld / st sectors per request | "
                 "shared ld / st wavefronts per request | bank conflicts | warp instructions | "
                 "lanes per instruction |")
        L.append("|---|---|---|---|---|---|---|---|---|")
        for x in doc["ncu"]:
            if "error" in x:
                L.append(f"| {x.get('name')} | {x.get('which')} | {x['error']} |||||||")
                continue
            L.append(f"| {x.get('name')} | {x.get('which')} `{x.get('config') or 'default'}` | "
                     f"{t(x.get('time_s'))} | {x['dram_bytes'] / 1e6:.1f} MB | "
                     f"{f(x['ld_sectors_per_request'])} / {f(x['st_sectors_per_request'])} | "
                     f"{f(x['shared_ld_wavefronts_per_request'])} / "
                     f"{f(x['shared_st_wavefronts_per_request'])} | {x['bank_conflicts']:.0f} | "
                     f"{x['warp_instructions'] or 0:.3g} | {f(x['lanes_per_instruction'], 1)} |")
    if doc["torch"]:
        L.append("")
        L.append("| PyTorch | shape | variant | median (IQR, n) | peak extra memory |")
        L.append("|---|---|---|---|---|")
        for x in doc["torch"]:
            a = x.get("args", {})
            shape = {"decode": f"R={a.get('R')} L={a.get('L')}",
                     "train": f"S={a.get('S')} NB={a.get('NB')}" + (" fwd+bwd" if a.get("backward") else ""),
                     "loss": f"M={a.get('M')} V={a.get('V')} {a.get('scheme')}"}.get(x.get("op"), "")
            for r in x.get("variants", []):
                if "error" in r:
                    L.append(f"| {x['op']} | {shape} | {r['variant']} | failed: {r['error'][:60]} | |")
                else:
                    pk = f"{r['peak_extra_bytes'] / 2**20:.0f} MiB" if "peak_extra_bytes" in r else ""
                    L.append(f"| {x['op']} | {shape} | {r['variant']} | {t(r['median_s'])} "
                             f"({t(r['iqr_s'])}, {r['samples']}) | {pk} |")
    return "\n".join(L) + "\n"


def verified_of(work, i):
    """The tuner verifies every candidate against the float64 reference before timing it: the
    winner's verification, from the run's event log."""
    winner, errs = None, {}
    try:
        for line in open(os.path.join(work, "logs", f"tune-{i}.jsonl")):
            e = json.loads(line)
            if e.get("event") == "verified":
                errs[json.dumps(e.get("config"), sort_keys=True)] = e.get("max_rel_err")
            if e.get("event") == "run_end" and e.get("winner"):
                winner = json.dumps(e["winner"], sort_keys=True)
    except (OSError, ValueError):
        return ""
    if winner is None:
        return "no winner (default benchmarked)"
    err = errs.get(winner)
    return f"yes (max rel err {err:.1e})" if isinstance(err, (int, float)) else "yes"


def summarize(a):
    os.makedirs(a.out, exist_ok=True)
    steps = steps_of(a.work)
    runs = runs_of(a.work, steps)
    for s, r in zip([s for s in steps if s.get("kind") == "tune"], runs):
        r["verified"] = verified_of(a.work, s["index"])
        pred = prediction_of(a.work, s["index"])
        if pred:
            r["prediction"] = pred
    try:
        at_start = int(open(os.path.join(a.work, "cache-before")).read().strip() or 0)
    except (OSError, ValueError):
        at_start = 0
    compiled = hits = 0
    for s in steps:
        m = re.search(r"\[kernel modules: (\d+) compiled, (\d+) from the cache\]", s.get("note", ""))
        compiled += int(m.group(1)) if m else 0
        hits += int(m.group(2)) if m else 0
    doc = {
        "backend": a.backend,
        "device": device_of(a.work, a.backend),
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "budget_s": a.budget,
        "elapsed_s": a.elapsed,
        "finished": bool(a.final),
        "kernel_cache": {"at_start": at_start, "compiled": compiled, "hits": hits},
        "steps": steps,
        "runs": runs,
        "torch": torch_of(a.work),
        "ncu": ncu_of(a.work),
    }
    doc["raw_left_out"] = pack(a.work, a.out)
    # The profile the tuning runs merge into (in WORK, beside its lock), copied whole.
    prof = os.path.join(a.work, "profile.json")
    if os.path.exists(prof):
        with open(prof) as f:
            write_atomic(os.path.join(a.out, "profile.json"), f.read())
    write_atomic(os.path.join(a.out, "summary.json"), json.dumps(doc, indent=1) + "\n")
    write_atomic(os.path.join(a.out, "summary.md"), markdown(doc))
    if a.final:
        problems = check_out(a.out)
        for p in problems:
            print(f"gpu-check: the output folder breaks the return limits: {p}", file=sys.stderr)
        return 1 if problems else 0
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("work", nargs="?")
    ap.add_argument("out", nargs="?")
    ap.add_argument("--check", metavar="OUT")
    ap.add_argument("--backend", default="cuda")
    ap.add_argument("--budget", type=int, default=0)
    ap.add_argument("--elapsed", type=int, default=0)
    ap.add_argument("--final", action="store_true")
    a = ap.parse_args()
    if a.check:
        problems = check_out(a.check)
        for p in problems:
            print(f"{a.check}: {p}", file=sys.stderr)
        return 1 if problems else 0
    if not a.work or not a.out:
        ap.error("WORK and OUT are needed (or --check OUT)")
    return summarize(a)


if __name__ == "__main__":
    sys.exit(main())
