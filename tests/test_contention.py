#!/usr/bin/env python3
"""test_contention.py: the scheduler rule through the command line (docs/measurement.md, "A busy
machine"). flaretune and two CPU-burning processes are pinned to one CPU (taskset), so the
scheduler takes the call's threads away for certain; the test checks what is done with that,
never a timing: contaminated samples are counted and thrown away, an unclean candidate is never
the winner or a speedup's baseline, the log, run_end, the profile and the summary agree, and a
bench whose every sample is contaminated says so. Runs with FLARETUNE_MAX_LOST and
FLARETUNE_MAX_LOAD removed (the suite sets them off for every other test)."""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile

import clitest
from clitest import check

ENV = {"FLARETUNE_MAX_LOST": None, "FLARETUNE_MAX_LOAD": None}


def burners(n):
    cpu = str(min(os.sched_getaffinity(0)))
    return [subprocess.Popen(["taskset", "-c", cpu, "sh", "-c", "while :; do :; done"])
            for _ in range(n)]


def stop(ps):
    for p in ps:
        p.kill()
        p.wait()


def events(path):
    return [json.loads(l) for l in open(path) if l.strip()]


def key(c):
    return json.dumps(c, sort_keys=True)


def test_pinned_tune(tmp):
    log, prof = os.path.join(tmp, "t.jsonl"), os.path.join(tmp, "t.json")
    mask = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {min(mask)})  # flaretune inherits it: one CPU with the two hogs
    hogs = burners(2)
    try:
        rc, out, err = clitest.run("tune", "fusion.dflare", "--preset", "tiny.dflare.train",
                                   "--backend", "cpu", "--strategy", "random", "--budget", "8",
                                   "--max-time", "0.15", "--log", log, "--profile", prof,
                                   env=ENV, timeout=600)
    finally:
        stop(hogs)
        os.sched_setaffinity(0, mask)
    check(rc == 0, f"tune under contention: {rc} {err}")
    ev = events(log)
    measured = [e for e in ev if e["event"] == "measured"]
    check(measured and all("clean" in e and "discarded" in e["stats"] for e in measured),
          "every measured event says whether it is clean and what it discarded")
    end = ev[-1]
    cont = end.get("contention", {})
    unclean = {key(e["config"]) for e in measured if e["clean"] is False}
    check(cont.get("samples_discarded", 0) > 0, f"the scheduler was seen: {cont}")
    check(0 < cont["samples_discarded"] <= cont["samples_taken"], f"discarded of taken: {cont}")
    check(cont.get("unclean") == len(unclean), f"unclean counted: {cont.get('unclean')} vs {len(unclean)}")
    # Each candidate's span is too short for the load to judge alone; added up they are not,
    # and the candidates the scheduler took from are counted busy.
    check(cont.get("busy") is True and (cont.get("during") or {}).get("known") is True
          and cont.get("busy_candidates", 0) > 0,
          f"the run says the machine was busy: {cont}")
    if end.get("winner") is not None:
        check(key(end["winner"]) not in unclean, "an unclean candidate never wins")
        check(end["stats"].get("clean", True), "the winner's stats are clean")
        if end.get("speedup") is None:
            check("cleanly" in end.get("speedup_withheld", ""), f"withheld with a reason: {end}")
        else:
            check(end["default_stats"]["clean"], "a speedup's default was measured cleanly")
    else:
        check("cleanly" in end.get("no_winner", ""), f"no winner says why: {end}")
    for c in (e for e in ev if e["event"] == "confirm" and e.get("clean", True)):
        for cfg, st in zip(c["configs"], c["stats"]):
            check(st.get("clean", True), "a clean confirmation holds clean stats only")
    if os.path.exists(prof):
        entry = json.load(open(prof))["entries"][0]
        check({key(c) for c in entry.get("not_measured_cleanly", [])} == unclean,
              "the profile lists the unclean configs")
    check("the scheduler took" in err, f"the summary says what the scheduler took: {err[-400:]}")


def test_bench_contaminated(tmp):
    """bench pinned with two hogs, a share of a millionth: samples are thrown away and it says
    so in its JSON and its text; ceilings measured then are said to be busy, and marked so in
    the cache, whose later readers say it; a bad --max-lost is refused."""
    mask = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {min(mask)})
    hogs = burners(2)
    env = {**ENV, "FLARETUNE_MAX_LOST": "0.000001"}
    try:
        rc, out, err = clitest.run("bench", "fusion.dflare", "--preset", "tiny.dflare.train",
                                   "--backend", "cpu", "--max-time", "0.2", "--json", env=env)
        rc2, text, err2 = clitest.run("bench", "fusion.dflare", "--preset", "tiny.dflare.train",
                                      "--backend", "cpu", "--max-time", "0.2", env=env)
        # ceilings measured now, with nothing cached to raise them: said to be busy
        rc3, out3, err3 = clitest.run("bench", "fusion.dflare", "--preset", "tiny.dflare.train",
                                      "--backend", "cpu", "--max-time", "0.2", "--json",
                                      env={**env, "FLARETUNE_CEILINGS_CACHE": "off"})
        rc4, text4, err4 = clitest.run("bench", "fusion.dflare", "--preset", "tiny.dflare.train",
                                       "--backend", "cpu", "--max-time", "0.2",
                                       env={**env, "FLARETUNE_CEILINGS_CACHE": "off"})
        # ceilings measured busy into an empty cache: marked there
        cache = os.path.join(tmp, "busy-ceilings.json")
        rc5, _, err5 = clitest.run("bench", "fusion.dflare", "--preset", "tiny.dflare.train",
                                   "--backend", "cpu", "--max-time", "0.2", "--measure-ceilings",
                                   "--json", env={**env, "FLARETUNE_CEILINGS_CACHE": cache})
        # FLARETUNE_MAX_LOAD=off: the load is still measured and shown, but judges nothing
        rc8, out8, err8 = clitest.run("bench", "fusion.dflare", "--preset", "tiny.dflare.train",
                                      "--backend", "cpu", "--max-time", "0.2", "--json",
                                      env={"FLARETUNE_MAX_LOST": "off",
                                           "FLARETUNE_MAX_LOAD": "off"})
    finally:
        stop(hogs)
        os.sched_setaffinity(0, mask)
    check(rc == 0 and rc2 == 0, f"bench: {rc} {err} {rc2} {err2}")
    st = json.loads(out)["stats"] if rc == 0 else {}
    check(st.get("discarded", 0) > 0 and st.get("lost_frac", 0) > 0,
          f"samples thrown away and the share lost: {st}")
    check("scheduler" in text and "thrown away" in text, f"the text says it: {text}")
    # an unclean median is an upper bound: no confidence interval is claimed for it
    if "NOT MEASURED CLEANLY" in text:
        check("median known to" not in text and "an upper bound" in text,
              f"an unclean median claims no confidence interval: {text}")
    # However short the measurement, the load is judged and the result said to be busy.
    doc = json.loads(out) if rc == 0 else {}
    check(doc.get("busy") is True and doc.get("load", {}).get("known") is True,
          f"bench --json says busy: {doc.get('busy')} {doc.get('load')}")
    check("BUSY" in text and "the machine was busy" in err2, f"the text says busy: {text} {err2}")
    # pinned to one CPU, the load is judged on that CPU (other processes on CPUs it never runs
    # on are no contention of its own)
    check(doc.get("load", {}).get("cpus") == 1,
          f"the load of a process pinned to one CPU counts that CPU: {doc.get('load')}")
    doc3 = json.loads(out3) if rc3 == 0 else {}
    check(doc3.get("ceilings_busy") is True and doc3.get("ceilings", {}).get("rounds", 0) >= 1,
          f"ceilings measured busy are said to be: {rc3} {err3[-300:]} {doc3.get('ceilings_busy')}")
    check(rc4 == 0 and "BUSY while measured" in text4, f"the text says it: {text4} {err4}")
    # ... and a later bench that takes them from the cache, the hogs gone, says so too (they
    # stay low until a quiet round beats them), in JSON and in text.
    marked = json.load(open(cache)) if rc5 == 0 and os.path.exists(cache) else {}
    figures = [f for m in marked.get("machines", {}).values()
               for f in list(m.get("levels", {}).values()) + [m.get("flops", {})]]
    check(figures and all(f.get("busy") is True for f in figures),
          f"the cache marks figures measured busy: {rc5} {err5[-300:]} {figures}")
    doc8 = json.loads(out8) if rc8 == 0 else {}
    check(doc8.get("busy") is False and doc8.get("load", {}).get("known") is True and
          doc8["load"].get("busy") is False and doc8["load"].get("other_cpus", 0) > 0.25,
          f"FLARETUNE_MAX_LOAD=off: the load shown, not judged: {rc8} {err8[-200:]} "
          f"{doc8.get('busy')} {doc8.get('load')}")
    rc6, out6, err6 = clitest.run("bench", "fusion.dflare", "--preset", "tiny.dflare.train",
                                  "--backend", "cpu", "--max-time", "0.05", "--json",
                                  env={**ENV, "FLARETUNE_CEILINGS_CACHE": cache})
    rc7, text7, _ = clitest.run("bench", "fusion.dflare", "--preset", "tiny.dflare.train",
                                "--backend", "cpu", "--max-time", "0.05",
                                env={**ENV, "FLARETUNE_CEILINGS_CACHE": cache})
    doc6 = json.loads(out6) if rc6 == 0 else {}
    check(doc6.get("ceilings_busy") is True and rc7 == 0 and "BUSY when cached" in text7,
          f"busy figures from the cache are said to be: {rc6} {doc6.get('ceilings_busy')} "
          f"{err6[-200:]} {text7[-600:]}")
    rc, out, err = clitest.run("bench", "fusion.dflare", "--max-lost", "2")
    check(rc == 2 and "--max-lost expects" in err, f"a bad --max-lost: {rc} {err}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--flaretune", required=True)
    a = ap.parse_args()
    if not shutil.which("taskset"):
        print("taskset not found: skipped", file=sys.stderr)
        return 77
    tmp = tempfile.mkdtemp(prefix="ft_contention_")

    def pinned_tune():
        test_pinned_tune(tmp)

    def bench_contaminated():
        test_bench_contaminated(tmp)

    try:
        return clitest.main(a.flaretune, [pinned_tune, bench_contaminated])
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
