#!/usr/bin/env python3
"""test_report_render.py: `flaretune report --from`, end to end on tests/data/report-fixture.json.

The page parses as XML (xml.etree) with one <svg> per chart, each with a viewBox and at least a
shape per datum; every claim's answer is on it; a label with <&> in it is escaped; report.json
is the document; report.md holds every table; a claim whose evidence has a step not measured
cleanly is "inconclusive" under a banner with the share of samples thrown away, and one on clean
evidence keeps its verdict; a missing, a malformed and an invalid document,
an output folder that cannot be made and a file in the way each give exit 1 and one line, and
leave nothing behind. Then Chromium, when it is here, draws the page headless and the PNG must
not be blank: pixels off the background, several colours, the verdicts' green and red. Without
Chromium that part is skipped, unless FT_REQUIRE_CHROMIUM=1 (CI), which makes it a failure.

usage: test_report_render.py --flaretune PATH [--fixture FILE]
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
import xml.etree.ElementTree as ET
import zlib

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import clitest  # noqa: E402
from clitest import check, one_line_error, run  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURE = os.path.join(HERE, "data", "report-fixture.json")
XHTML = "{http://www.w3.org/1999/xhtml}"
SVG = "{http://www.w3.org/2000/svg}"
NAMES = ("report.html", "report.md", "report.json")
# The verdict badges' colours on the page (report_render.c's style).
GREEN, RED = (0x1a, 0x7f, 0x37), (0xcf, 0x22, 0x2e)

ARGS = None
TMP = None


def fixture():
    with open(ARGS.fixture) as f:
        return json.load(f)


def render(doc_path, out_dir):
    return run("report", "--from", doc_path, "-o", out_dir)


def read(path):
    with open(path, encoding="utf-8") as f:
        return f.read()


def leftovers(d):
    """Files of a render in d: the three outputs and any temporary file beside them."""
    if not os.path.isdir(d):
        return []
    return sorted(n for n in os.listdir(d) if n.startswith("report."))


# ---- the rendered files ------------------------------------------------------------------------

def test_help():
    rc, out, _ = run("help")
    check(rc == 0 and "  report " in out, "help lists report")
    for form in (["report", "--help"], ["help", "report"]):
        rc, out, _ = run(*form)
        check(rc == 0 and out.startswith("usage: flaretune report ") and "--from REPORT.json" in out,
              f"{form} prints usage")


def test_render():
    out = os.path.join(TMP, "out", "nested")  # made when missing, parents too
    rc, stdout, err = render(ARGS.fixture, out)
    check(rc == 0, f"render exits 0, got {rc} ({err.strip()!r})")
    check(leftovers(out) == sorted(NAMES), f"exactly the three files, got {leftovers(out)}")
    if rc == 0:
        check_html(os.path.join(out, "report.html"))
        check_json(os.path.join(out, "report.json"))
        check_md(os.path.join(out, "report.md"))
    # Rendering again replaces the files in place.
    rc, _, err = render(ARGS.fixture, out)
    check(rc == 0 and leftovers(out) == sorted(NAMES), f"a second render replaces ({err!r})")


def data_count(chart):
    """Shapes a chart must draw at least: a rect per segment, or a polyline per series."""
    if chart["kind"] == "stacked":
        return sum(len(b["segments"]) for b in chart["bars"]), ("rect",)
    return len(chart["series"]), ("polyline",)


def check_html(path):
    doc = fixture()
    text = read(path)
    check(text.startswith("<!DOCTYPE html>"), "the page starts with <!DOCTYPE html>")
    try:
        root = ET.parse(path).getroot()
    except ET.ParseError as e:
        check(False, f"report.html is not well-formed XML: {e}")
        return
    check(root.tag == XHTML + "html", f"root element {root.tag}")
    for bad in ("nan", "inf", "NaN", "Infinity"):
        check(f'="{bad}' not in text and f",{bad}" not in text, f"no {bad} in the SVG")
    for forbidden in ("<script", "http://", "https://"):
        # The only URLs allowed are the XML namespaces.
        rest = text.replace("http://www.w3.org/1999/xhtml", "").replace(
            "http://www.w3.org/2000/svg", "")
        check(forbidden not in rest, f"self-contained: no {forbidden!r} on the page")
    svgs = root.findall(f".//{SVG}svg")
    check(len(svgs) == len(doc["charts"]),
          f"{len(svgs)} <svg>, one per chart expected ({len(doc['charts'])})")
    for chart, svg in zip(doc["charts"], svgs):
        vb = svg.get("viewBox", "").split()
        check(len(vb) == 4 and all(float(v) >= 0 for v in vb) and float(vb[2]) > 0,
              f"chart {chart['id']}: viewBox {svg.get('viewBox')!r}")
        want, tags = data_count(chart)
        have = sum(len(svg.findall(f".//{SVG}{t}")) for t in tags)
        check(have >= want, f"chart {chart['id']}: {have} {tags}, at least {want} expected")
        if chart["kind"] == "lines":
            points = sum(len(s["points"]) for s in chart["series"])
            circles = len(svg.findall(f".//{SVG}circle"))
            check(circles == points, f"chart {chart['id']}: {circles} markers for {points} points")
            bars = sum(len(s["points"]) for s in chart["series"] if "lo" in s or "hi" in s)
            lines = len(svg.findall(f".//{SVG}line[@class='err']"))
            check(lines == 3 * bars, f"chart {chart['id']}: {lines} error-bar lines, {3 * bars} expected")
        labels = "".join(svg.itertext())
        check(chart["title"] in labels, f"chart {chart['id']}: title in the SVG")
    # The same data as HTML tables: the stacked bars' totals and every series value.
    page = "".join(root.itertext())
    for claim in doc["claims"]:
        check(claim["answer"] in page, f"claim {claim['id']}: answer on the page")
        check(claim["claim"] in page, f"claim {claim['id']}: claim on the page")
    verdicts = [e.text for e in root.iter(XHTML + "span") if "badge" in (e.get("class") or "")]
    check(verdicts == [c["verdict"] for c in doc["claims"]], f"verdict badges {verdicts}")
    headings = [e.text for e in root.iter(XHTML + "h2")]
    check(headings and headings[0] == "Answers", f"the Answers section comes first: {headings}")
    check("Machine" in headings, "a Machine section")
    for t in doc["tables"]:
        for row in t["rows"]:
            for cell in row:
                check(str(cell) in page, f"table {t['id']}: cell {cell!r} on the page")
    # The label with <&> in it: escaped in the file, itself once parsed.
    label = "glue <&> copies"
    check(label in page, "the <&> label reads back as itself")
    check(label not in text and "glue &lt;&amp;&gt; copies" in text, "the <&> label is escaped")
    check(doc["device"] in page, "the device fingerprint is on the page")
    check("730 GB/s" in page, "the L1 ceiling for humans")


def check_json(path):
    got = json.loads(json.dumps(json.load(open(path))))
    want = json.loads(json.dumps(fixture()))
    check(got == want, "report.json round-trips to the fixture")
    check(read(path).count("\n") > 50, "report.json is pretty-printed")


def check_md(path):
    doc = fixture()
    md = read(path)
    for section in ("## Answers", "## Charts", "## Tables", "## Machine"):
        check(section in md, f"report.md has {section}")
    check(md.index("## Answers") < md.index("## Charts"), "report.md: answers first")
    for claim in doc["claims"]:
        check(f"**{claim['verdict']}**" in md, f"report.md: verdict of {claim['id']}")
    for t in doc["tables"]:
        header = "| " + " | ".join(t["columns"]) + " |"
        check(header in md, f"report.md: table {t['id']} header {header!r}")
        for row in t["rows"]:
            line = "| " + " | ".join(str(c) for c in row) + " |"
            check(line in md, f"report.md: table {t['id']} row {line!r}")
    for chart in doc["charts"]:
        check(f"### {chart['title']}" in md, f"report.md: chart {chart['id']}")
        if chart["kind"] == "stacked":
            for bar in chart["bars"]:
                check(f"| {bar['label']} |" in md, f"report.md: bar {bar['label']}")
        else:
            for s in chart["series"]:
                check(s["label"] in md, f"report.md: series {s['label']}")
    check("glue \\<\\&\\> copies" in md, "report.md escapes <&>")


# ---- a busy machine ----------------------------------------------------------------------------

def busy_fixture(clean):
    """The fixture with its claims' evidence (docs/report.md, "A busy machine"): the first claim
    rests on a step that was not measured cleanly (unless clean), the second on a clean one."""
    doc = fixture()
    doc["claims"][0]["evidence"] = [
        {"step": "dflare.decode.decay", "clean": clean, "samples_discarded": 0 if clean else 60,
         "samples_taken": 100},
        {"step": "dflash.decode.decay", "clean": True, "samples_discarded": 14,
         "samples_taken": 100}]
    doc["claims"][1]["evidence"] = [
        {"step": "dflare.train.B16.decay", "clean": True, "samples_discarded": 2,
         "samples_taken": 100}]
    return doc


def render_doc(doc, name):
    path = os.path.join(TMP, name + ".json")
    with open(path, "w") as f:
        json.dump(doc, f)
    out = os.path.join(TMP, name)
    rc, _, err = render(path, out)
    check(rc == 0, f"{name}: render exits 0, got {rc} ({err.strip()!r})")
    if rc:
        return None
    page = "".join(ET.parse(os.path.join(out, "report.html")).getroot().itertext())
    return (page, read(os.path.join(out, "report.md")),
            json.load(open(os.path.join(out, "report.json"))), out)


def test_busy():
    """A verdict whose evidence has a step not measured cleanly is withheld, "inconclusive", on
    the page, in the Markdown and in the JSON, under a banner with the share of samples thrown
    away; with clean evidence the verdicts stand and there is no banner."""
    got = render_doc(busy_fixture(False), "busy")
    if got:
        page, md, doc, out = got
        verdict = "inconclusive: the machine was busy; 37% of samples discarded"
        banner = "The machine was busy: 1 of 3 steps was not measured cleanly, and 25% of the samples"
        check(doc["claims"][0]["verdict"] == "inconclusive" and
              doc["claims"][0]["withheld"] == "the machine was busy; 37% of samples discarded",
              f"report.json: the verdict withheld: {doc['claims'][0]}")
        check(doc["claims"][1]["verdict"] == "does not hold" and "withheld" not in doc["claims"][1],
              "report.json: a claim on clean evidence keeps its verdict")
        check(doc["contention"] == {"steps": 3, "unclean_steps": 1, "samples_discarded": 76,
                                    "samples_taken": 300},
              f"report.json: the contention of its evidence: {doc.get('contention')}")
        check(verdict in page and banner in page, "report.html: the banner and the withheld verdict")
        check(f"**{verdict}**" in md and banner in md, "report.md: the banner and the verdict")
        check("**does not hold**" in md, "report.md: the clean claim's verdict")
        check(md.index(banner) < md.index("## Answers"), "report.md: the banner before the answers")
        html = read(os.path.join(out, "report.html"))
        check('class="claim inconclusive"' in html and 'id="busy"' in html,
              "report.html: the claim's block and the banner are styled")
        # The judged document renders to itself.
        again = render_doc(doc, "busy-again")
        check(again and again[2] == doc, "a judged report.json re-renders to itself")
    got = render_doc(busy_fixture(True), "quiet")
    if got:
        page, md, doc, _ = got
        check([c["verdict"] for c in doc["claims"]] == ["holds", "does not hold"],
              "clean evidence: the verdicts stand")
        # (The page's style names the classes; the text must not use them.)
        check(not re.search(r"inconclusive:|machine was busy|Verdict withheld", page + md) and
              "**inconclusive" not in md, "clean evidence: no banner, nothing withheld")
        check(doc["contention"]["unclean_steps"] == 0, "clean evidence: no unclean step")


# ---- failures ----------------------------------------------------------------------------------

def test_bad_documents():
    out = os.path.join(TMP, "bad-out")
    missing = os.path.join(TMP, "no-such-report.json")
    one_line_error(["report", "--from", missing, "-o", out], 1, "no-such-report.json")
    malformed = os.path.join(TMP, "malformed.json")
    with open(malformed, "w") as f:
        f.write('{"format": "flaretune-report/1", "title": ')
    one_line_error(["report", "--from", malformed, "-o", out], 1, "malformed.json")
    nan = os.path.join(TMP, "nan.json")
    with open(nan, "w") as f:
        f.write(open(ARGS.fixture).read().replace("2.41e-5", "NaN"))
    one_line_error(["report", "--from", nan, "-o", out], 1, "nan.json")
    invalid = os.path.join(TMP, "invalid.json")
    doc = fixture()
    doc["charts"][2]["series"][0]["points"][3] = [9]
    with open(invalid, "w") as f:
        json.dump(doc, f)
    one_line_error(["report", "--from", invalid, "-o", out], 1,
                   "charts[2].series[0].points[3]: expected [x, y]")
    doc = fixture()
    doc["claims"][0]["evidence"] = [{"step": "dflare.decode.decay", "clean": "no"}]
    with open(invalid, "w") as f:
        json.dump(doc, f)
    one_line_error(["report", "--from", invalid, "-o", out], 1,
                   "claims[0].evidence[0].clean: expected a boolean")
    check(not os.path.exists(out), "nothing written for a bad document")
    one_line_error(["report", "--models", "nope", "-o", out], 2, "nope")
    one_line_error(["report", "--from"], 2)
    one_line_error(["report", "--from", ARGS.fixture, "extra"], 2, "extra")
    one_line_error(["report", "--frobnicate"], 2, "--frobnicate")


def test_unwritable():
    # A file where the folder would be: no root privilege gets past that.
    blocker = os.path.join(TMP, "blocker")
    open(blocker, "w").close()
    one_line_error(["report", "--from", ARGS.fixture, "-o", os.path.join(blocker, "out")], 1,
                   "blocker")
    one_line_error(["report", "--from", ARGS.fixture, "-o", blocker], 1, "not a directory")
    # A folder in the way of one file: nothing is written, nothing is left behind, and the files
    # of an earlier render stay as they were.
    out = os.path.join(TMP, "in-the-way")
    os.makedirs(os.path.join(out, "report.md"))
    one_line_error(["report", "--from", ARGS.fixture, "-o", out], 1, "report.md")
    check(leftovers(out) == ["report.md"], f"all or nothing: {leftovers(out)} left")
    if os.geteuid() != 0:
        ro = os.path.join(TMP, "read-only")
        os.makedirs(ro)
        os.chmod(ro, 0o555)
        try:
            one_line_error(["report", "--from", ARGS.fixture, "-o", ro], 1, "report.html")
            check(leftovers(ro) == [], f"a read-only folder stays empty: {leftovers(ro)}")
        finally:
            os.chmod(ro, 0o755)


# ---- the page drawn by Chromium ----------------------------------------------------------------

def png_pixels(path):
    """(width, height, rows of (r, g, b) tuples) of an 8-bit RGB or RGBA PNG, without PIL."""
    data = open(path, "rb").read()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        raise ValueError("not a PNG")
    pos, idat, ihdr = 8, b"", None
    while pos < len(data):
        n, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + n]
        if kind == b"IHDR":
            ihdr = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat += body
        elif kind == b"IEND":
            break
        pos += 12 + n
    w, h, depth, ctype, _, _, interlace = ihdr
    if depth != 8 or ctype not in (2, 6) or interlace:
        raise ValueError(f"unsupported PNG: depth {depth}, colour type {ctype}, interlace {interlace}")
    bpp = 3 if ctype == 2 else 4
    raw = zlib.decompress(idat)
    stride = w * bpp
    prev = bytearray(stride)
    rows = []
    i = 0
    for _ in range(h):
        ftype = raw[i]
        line = bytearray(raw[i + 1:i + 1 + stride])
        i += 1 + stride
        for x in range(stride):
            a = line[x - bpp] if x >= bpp else 0
            b = prev[x]
            c = prev[x - bpp] if x >= bpp else 0
            if ftype == 1:
                line[x] = (line[x] + a) & 255
            elif ftype == 2:
                line[x] = (line[x] + b) & 255
            elif ftype == 3:
                line[x] = (line[x] + (a + b) // 2) & 255
            elif ftype == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                pred = a if pa <= pb and pa <= pc else b if pb <= pc else c
                line[x] = (line[x] + pred) & 255
        rows.append([tuple(line[x:x + 3]) for x in range(0, stride, bpp)])
        prev = line
    return w, h, rows


def near(c, want, tol=40):
    return all(abs(a - b) <= tol for a, b in zip(c, want))


def screenshot(browser, page, tmp, width, height):
    """Headless Chromium's PNG of page (in tmp), or None after a failed check."""
    png = os.path.join(tmp, "page.png")
    cmd = [browser, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
           "--hide-scrollbars", f"--user-data-dir={os.path.join(tmp, 'chromium-profile')}",
           f"--screenshot={png}", f"--window-size={width},{height}",
           "file://" + os.path.abspath(page)]
    try:
        # stderr carries dbus and GPU warnings in containers: judged by the PNG alone.
        subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=60)
    except subprocess.TimeoutExpired:
        check(False, "chromium took more than 60 s")
        return None
    if not os.path.exists(png):
        check(False, "chromium wrote no screenshot")
        return None
    return png


def test_chromium():
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    if not browser:
        why = "no chromium or chromium-browser on PATH (apt-get install chromium)"
        if os.environ.get("FT_REQUIRE_CHROMIUM") == "1":
            check(False, f"FT_REQUIRE_CHROMIUM=1 but {why}")
        else:
            print(f"test_chromium: skipped: {why}", file=sys.stderr)
        return
    out = os.path.join(TMP, "chromium")
    rc, _, err = render(ARGS.fixture, out)
    check(rc == 0, f"render for Chromium ({err!r})")
    png = screenshot(browser, os.path.join(out, "report.html"), TMP, 1200, 2400)
    if not png:
        return
    w, h, rows = png_pixels(png)
    check((w, h) == (1200, 2400), f"screenshot {w}x{h}")
    counts = {}
    for row in rows:
        for px in row:
            counts[px] = counts.get(px, 0) + 1
    background, bg_n = max(counts.items(), key=lambda kv: kv[1])
    off = w * h - bg_n
    check(off > 0.05 * w * h, f"only {off} of {w * h} pixels differ from the background")
    # Colours quantised to 32 levels per channel, counted where at least 50 pixels have them.
    buckets = {}
    for px, n in counts.items():
        q = tuple(v // 32 for v in px)
        buckets[q] = buckets.get(q, 0) + n
    distinct = sum(1 for n in buckets.values() if n >= 50)
    check(distinct >= 8, f"only {distinct} distinct colours on the page")
    green = sum(n for px, n in counts.items() if near(px, GREEN))
    red = sum(n for px, n in counts.items() if near(px, RED))
    check(green >= 200, f"the 'holds' badge's green: {green} pixels")
    check(red >= 200, f"the 'does not hold' badge's red: {red} pixels")


def main():
    global ARGS, TMP
    ap = argparse.ArgumentParser()
    ap.add_argument("--flaretune", required=True)
    ap.add_argument("--fixture", default=FIXTURE)
    ARGS = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="ft_report_") as TMP:
        return clitest.main(ARGS.flaretune, [test_help, test_render, test_busy, test_bad_documents,
                                             test_unwritable, test_chromium])


if __name__ == "__main__":
    sys.exit(main())
