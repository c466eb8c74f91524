#!/usr/bin/env python3
"""test_report_render.py: `flaretune report --from`, end to end on tests/data/report-fixture.json.

The page parses as XML (xml.etree) with one <svg> per chart, each with a viewBox and at least a
shape per datum; every claim's answer is on it; a label with <&> in it is escaped; report.json
is the document; report.md holds every table; code points XML forbids (U+FFFE, U+FFFF,
control characters) in every string become spaces and the page still parses; a claim whose
evidence has a step not measured cleanly is "inconclusive" under a banner with the share of
samples thrown away, and one on clean evidence keeps its verdict; a missing, a malformed and an
invalid document, an output folder that cannot be made and a file in the way each give exit 1
and one line, and leave nothing behind. Then Chromium, when it is here, draws the page headless
and the PNG must not be blank: pixels off the background, several colours, the verdicts' green
and red. Without Chromium that part is skipped, unless FT_REQUIRE_CHROMIUM=1 (CI), which makes
it a failure.

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
            markers = len(svg.findall(f".//{SVG}path[@class='marker']"))
            check(markers == points, f"chart {chart['id']}: {markers} markers for {points} points")
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


# ---- markup in the document's strings ---------------------------------------------------------

MARKUP = "<script>alert('x')</script>&amp;\"<b>"
# The elements the renderer writes itself; anything else on the page came from the document.
OWN_TAGS = {"html", "head", "meta", "title", "style", "body", "h1", "h2", "h3", "p", "code",
            "section", "div", "span", "blockquote", "ul", "li", "figure", "figcaption", "table",
            "thead", "tbody", "tr", "th", "td", "svg", "text", "line", "rect", "g", "polyline",
            "circle", "path"}


def with_markup(node, key=None, markup=MARKUP):
    """The document with markup in every string a person could have written (keys too, where
    a key is shown), leaving the schema's fixed words (format, kind, verdict) alone."""
    if isinstance(node, dict):
        out = {}
        for k, v in node.items():
            if k in ("format", "kind", "verdict"):
                out[k] = v
                continue
            shown = k + markup if key in ("figures", "machine", "os") else k
            out[shown] = with_markup(v, k, markup)
        return out
    if isinstance(node, list):
        return [with_markup(v, key, markup) for v in node]
    if isinstance(node, str):
        return node + markup
    return node


def test_markup_everywhere():
    """Every string field of a document holds markup (the chart's unit too): the page stays
    well-formed XML, holds no element the renderer does not write, and every string reads back
    as itself."""
    doc = with_markup(fixture())
    src = os.path.join(TMP, "markup.json")
    with open(src, "w") as f:
        json.dump(doc, f)
    out = os.path.join(TMP, "markup-out")
    rc, _, err = render(src, out)
    check(rc == 0, f"a document with markup renders ({err.strip()!r})")
    if rc != 0:
        return
    html = os.path.join(out, "report.html")
    text = read(html)
    check("<script" not in text and "<b>" not in text, "no markup of the document on the page")
    try:
        root = ET.parse(html).getroot()
    except ET.ParseError as e:
        check(False, f"the page with markup is not well-formed XML: {e}")
        return
    tags = {el.tag.split("}")[-1] for el in root.iter()}
    check(tags <= OWN_TAGS, f"only the renderer's elements, found {sorted(tags - OWN_TAGS)}")
    page = "".join(root.itertext())
    check(MARKUP in page, "the markup reads back as text")
    # Each chart's unit reaches the SVG (ticks, tooltips) as text.
    for chart in doc["charts"]:
        if "unit" in chart:
            check(chart["unit"] in page, f"chart {chart['id']!r}: its unit as text")
    for claim in doc["claims"]:
        for k in ("claim", "answer", "source", "command"):
            check(claim[k] in page, f"claim {k} {claim[k]!r} as text")
    # In Markdown, text in code spans is literal; everywhere else markup is escaped.
    md = re.sub(r"(`+).*?\1", "", read(os.path.join(out, "report.md")))
    check(re.search(r"(?<!\\)<script", md) is None,
          "report.md escapes the markup outside code spans")


# Code points XML 1.0 forbids (U+FFFE, U+FFFF, C0 controls but tab, line feed and carriage
# return) that a JSON string may hold.
FORBIDDEN = "a\ufffeb\uffffc\x01d\x1fe"


def test_forbidden_characters():
    """Every string of a document holds code points XML forbids: each becomes a space and the
    page stays well-formed XML."""
    doc = with_markup(fixture(), markup=FORBIDDEN)
    out = render_to(doc, "forbidden")
    if out is None:
        return
    html = os.path.join(out, "report.html")
    try:
        root = ET.parse(html).getroot()
    except ET.ParseError as e:
        check(False, f"the page with U+FFFE, U+FFFF and controls is not well-formed XML: {e}")
        return
    page = "".join(root.itertext())
    check("a b c d e" in page and not re.search("[\ufffe\uffff\x01\x1f]", read(html)),
          "each forbidden code point a space")


# ---- every value visible ------------------------------------------------------------------------

def render_to(doc, name):
    """doc written to TMP/name.json and rendered into TMP/name: that folder, or None after a
    failed check."""
    src = os.path.join(TMP, name + ".json")
    with open(src, "w") as f:
        json.dump(doc, f)
    out = os.path.join(TMP, name)
    rc, _, err = render(src, out)
    check(rc == 0, f"{name}: render exits 0, got {rc} ({err.strip()!r})")
    return out if rc == 0 else None


def render_one(doc, name):
    """The <svg> elements of doc's page (one chart each), or None after a failed check."""
    out = render_to(doc, name)
    if out is None:
        return None
    return ET.parse(os.path.join(out, "report.html")).getroot().findall(f".//{SVG}svg")


def one_chart(chart):
    return {"format": "flaretune-report/1", "title": "t", "date": "d", "claims": [],
            "tables": [], "charts": [chart]}


def test_small_segments_visible():
    """A 206 us step beside a 180 ms one, and a 1 us segment inside the 180 ms bar: every
    segment above 0 is drawn at least 2 px wide, and the long bar still ends at its total."""
    bars = [{"label": "decode", "segments": [{"label": "fusion", "value": 206e-6}]},
            {"label": "train", "segments": [{"label": "fusion", "value": 170e-3},
                                            {"label": "norms", "value": 1e-6},
                                            {"label": "loss", "value": 10e-3}]}]
    svgs = render_one(one_chart({"id": "s", "kind": "stacked", "title": "by op", "unit": "s",
                                 "bars": bars}), "segments")
    if not svgs:
        return
    rects = [r for r in svgs[0].iter(f"{SVG}rect") if r.find(f"{SVG}title") is not None]
    check(len(rects) == 4, f"a rect per segment: {len(rects)}")
    widths = [float(r.get("width")) for r in rects]
    check(all(w >= 2 for w in widths), f"every segment visible: widths {widths}")
    # The train bar ends where 180 ms is on the axis: its rects add up to it.
    x0 = float(rects[1].get("x"))
    end = float(rects[3].get("x")) + widths[3]
    ticks = {t.text: float(t.get("x")) for t in svgs[0].iter(f"{SVG}text")
             if t.get("class") == "tick"}
    zero = ticks.get("0 ms")
    per_ms = (ticks["100 ms"] - zero) / 100 if zero is not None and "100 ms" in ticks else None
    check(per_ms and abs((end - x0) - 180.001 * per_ms) < 0.5,
          f"the train bar ends at its total ({x0}..{end}, ticks {ticks})")


def marker_ys(svg, label):
    return [float(re.findall(r"[-\d.]+", m.get("d"))[1])
            for m in svg.iter(f"{SVG}path")
            if m.get("class") == "marker" and m.find(f"{SVG}title").text.startswith(label + ":")]


def test_small_values_visible():
    """Sub-millisecond points beside 150-180 ms ones: on an axis from 0 they sat on the zero
    line; they are drawn clearly above the bottom of the plot and apart from each other (a log
    axis, said on the chart)."""
    series = [{"label": "fast", "points": [[1, 5e-4], [2, 6e-4]]},
              {"label": "slow", "points": [[1, 0.15], [2, 0.18]]}]
    svgs = render_one(one_chart({"id": "l", "kind": "lines", "title": "steps", "unit": "s",
                                 "series": series}), "small-values")
    if not svgs:
        return
    svg = svgs[0]
    ticks = [float(t.get("y")) for t in svg.iter(f"{SVG}text")
             if t.get("class") == "tick" and t.get("text-anchor") == "end" and t.text != "log scale"]
    top, bottom = min(ticks), max(ticks)
    fast = marker_ys(svg, "fast")
    check(len(fast) == 2 and all(bottom - y > 0.1 * (bottom - top) for y in fast),
          f"the sub-millisecond points stand off the bottom: {fast} in {top}..{bottom}")
    check(len(fast) == 2 and abs(fast[0] - fast[1]) > 3, f"0.5 ms and 0.6 ms apart: {fast}")
    check("log scale" in "".join(svg.itertext()), "the chart says its axis is logarithmic")


def test_overlapping_series_visible():
    """Three series with the same values (loss schemes that cost the same): each line has its
    own dash, each marker its own shape and size, later ones smaller and drawn over the
    earlier, and every marker after every line."""
    pts = [[8, 0.5], [12, 1.0], [16, 1.5]]
    series = [{"label": name, "points": pts} for name in ("dpace", "dpace_cum", "dpace_cont")]
    svgs = render_one(one_chart({"id": "o", "kind": "lines", "title": "overhead", "unit": "%",
                                 "series": series}), "overlap")
    if not svgs:
        return
    svg = svgs[0]
    lines = [e for e in svg.iter(f"{SVG}polyline")]
    dashes = [e.get("stroke-dasharray") for e in lines]
    check(len(lines) == 3 and len(set(dashes)) == 3, f"a dash per series: {dashes}")
    widths = [float(e.get("stroke-width")) for e in lines]
    check(widths == sorted(widths, reverse=True) and len(set(widths)) == 3,
          f"earlier lines wider, under the later: {widths}")
    order = [e.tag.split("}")[1] for e in svg.iter()
             if e.tag in (f"{SVG}polyline", f"{SVG}path") and e.get("class") != "key"]
    check(order == ["polyline"] * 3 + ["path"] * 9, f"the lines, then the markers: {order}")
    first = {}
    for m in svg.iter(f"{SVG}path"):
        if m.get("class") == "marker":
            first.setdefault(m.find(f"{SVG}title").text.split(":")[0], m.get("d"))
    shapes = [re.sub(r"[-\d.]+", "", first[n]) for n in ("dpace", "dpace_cum", "dpace_cont")]
    check(len(set(shapes)) == 3, f"a marker shape per series: {shapes}")
    spans = []
    for n in ("dpace", "dpace_cum", "dpace_cont"):
        nums = [float(v) for v in re.findall(r"-?\d+\.?\d*", first[n])]
        # a polygon's x coordinates, or a circle's "M x,y a r,r ...": 2r
        spans.append(2 * nums[2] if " a" in first[n] else max(nums[0::2]) - min(nums[0::2]))
    check(spans[0] > spans[1] > spans[2], f"later markers smaller: widths {spans}")


# ---- a large series ----------------------------------------------------------------------------

def test_large_series():
    """200,000 points in two series, in shuffled order: the render walks each series' points
    once in order of x (n log n). Drawn by comparing every point with every x it took minutes
    (40,000 points: two); the bound here is far above the seconds it takes, so only an
    algorithm that grows as n^2 can miss it."""
    import random
    rnd = random.Random(30)
    xs = list(range(100000))
    rnd.shuffle(xs)
    doc = {"format": "flaretune-report/1", "title": "a large series", "date": "2026-12-02",
           "claims": [], "tables": [],
           "charts": [{"id": "large", "kind": "lines", "title": "200k points", "unit": "s",
                       "series": [{"label": "a", "points": [[x, 1e-3 + x * 1e-9] for x in xs]},
                                  {"label": "b",
                                   "points": [[x + 0.5, 2e-3] for x in reversed(xs)]}]}]}
    src = os.path.join(TMP, "large.json")
    with open(src, "w") as f:
        json.dump(doc, f)
    out = os.path.join(TMP, "large-out")
    try:
        rc, _, err = run("report", "--from", src, "-o", out, timeout=300)
    except subprocess.TimeoutExpired:
        check(False, "200,000 points did not render within 300 s")
        return
    check(rc == 0, f"200,000 points render ({err.strip()!r})")
    md = read(os.path.join(out, "report.md"))
    check(md.count("\n| ") >= 200000, "a table row per distinct x")
    check("| 99999.5 | - | 2 ms |" in md and "| 99999 | 1.1 ms | - |" in md,
          "each row holds its series' value at that x")


# ---- a busy machine ----------------------------------------------------------------------------

def busy_fixture(clean, loaded=False):
    """The fixture with its claims' evidence (docs/report.md, "A busy machine"): the first claim
    rests on a step that was not measured cleanly (unless clean; clean but measured while the
    machine was busy if loaded), the second on a clean one."""
    doc = fixture()
    doc["claims"][0]["evidence"] = [
        {"step": "dflare.decode.decay", "clean": clean, "samples_discarded": 0 if clean else 60,
         "samples_taken": 100, **({"loaded": True} if loaded else {})},
        {"step": "dflash.decode.decay", "clean": True, "samples_discarded": 14,
         "samples_taken": 100}]
    doc["claims"][1]["evidence"] = [
        {"step": "dflare.train.B16.decay", "clean": True, "samples_discarded": 2,
         "samples_taken": 100}]
    return doc


def render_doc(doc, name):
    """The page's text, report.md, report.json and the folder of doc rendered, or None after a
    failed check."""
    out = render_to(doc, name)
    if out is None:
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
        check(doc["contention"] == {"steps": 3, "unclean_steps": 1, "loaded_steps": 0,
                                    "samples_discarded": 76, "samples_taken": 300},
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
    # Every sample clean, but measured while other processes kept the CPUs busy (the step's
    # `load`): cache, memory and SMT contention slow every sample without losing time, so the
    # verdict is withheld all the same, saying why.
    got = render_doc(busy_fixture(True, loaded=True), "loaded")
    if got:
        page, md, doc, _ = got
        why = "the machine was busy while 1 of its 2 steps was measured"
        check(doc["claims"][0]["verdict"] == "inconclusive" and doc["claims"][0]["withheld"] == why
              and doc["claims"][1]["verdict"] == "does not hold",
              f"loaded evidence: the verdict withheld: {doc['claims']}")
        banner = ("The machine was busy: 1 of 3 steps was measured while other processes kept "
                  "the CPUs busy")
        check(doc["contention"]["loaded_steps"] == 1 and doc["contention"]["unclean_steps"] == 0
              and banner in page and banner in md, f"loaded evidence: the banner: {md[:600]}")


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
        return clitest.main(ARGS.flaretune, [test_help, test_render, test_busy,
                                             test_markup_everywhere,
                                             test_forbidden_characters,
                                             test_small_segments_visible,
                                             test_small_values_visible,
                                             test_overlapping_series_visible,
                                             test_large_series, test_bad_documents,
                                             test_unwritable, test_chromium])


if __name__ == "__main__":
    sys.exit(main())
