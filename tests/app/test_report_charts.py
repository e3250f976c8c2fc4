"""The charts of the HTML report (issue 31, point 8): score histograms over the data's range, legends
clear of the bars, every chart drawn at page load, near-duplicate pairs with their differences marked."""

from __future__ import annotations

import numpy as np
import pytest

from tests.app import test_report
from tests.conftest import run_stage, write_jsonl

#: clean, filter, exact and fuzzy dedup, tokenize: a job with every kind of chart but span dedup's
small_job = test_report.small_job

#: documents of known word counts (whitespace-separated words), far inside word_count's default max
WORDS = [150, 180, 220, 260, 300, 320, 400]


@pytest.fixture(scope="module")
def word_counts(tmp_path_factory):
    """A filter stage whose word_count thresholds (min 20, max 100,000) lie far outside the data."""
    tmp = tmp_path_factory.mktemp("words")
    write_jsonl(tmp / "in.jsonl", [{"id": f"w{n}", "text": " ".join(["word"] * n)} for n in WORDS])
    (tmp / "chain.yaml").write_text("filters:\n  - {filter: word_count, min: 20, max: 100000}\n")
    manifest = run_stage("filter", {"config": str(tmp / "chain.yaml")}, tmp / "in.jsonl", tmp / "out")
    return manifest


def test_the_sampled_histogram_bins_the_data_and_reaches_far_thresholds_with_empty_bins():
    """The manifest's bins: all ``bins`` between the data's min and max, one empty bin out to each far
    threshold (so the thresholds stay on the axis), every value in the bin that holds it."""
    from curate.stages.filters.stage import histogram

    values = np.array([150.0, 180, 220, 260, 300, 320, 400, 400])
    keep = values < 390  # any split: the counts must follow it
    h = histogram(values, keep, 20, 100000, 10)
    edges = h["edges"]
    assert (edges[0], edges[1], edges[-2], edges[-1]) == (20, 150, 400, 100000)
    assert len(edges) == 10 + 3 and h["kept"][0] == h["kept"][-1] == h["rejected"][0] == h["rejected"][-1] == 0
    # the oracle: where each value falls, by comparison with the edges alone
    kept = [sum(1 for v, k in zip(values, keep) if k and _bin(edges, v) == i) for i in range(len(edges) - 1)]
    rejected = [sum(1 for v, k in zip(values, keep) if not k and _bin(edges, v) == i) for i in range(len(edges) - 1)]
    assert (h["kept"], h["rejected"]) == (kept, rejected)
    assert h["rejected"][-2] == 2  # the largest values stay in the last data bin, not the threshold's


def _bin(edges, v):
    """Index of the data bin holding ``v``: bins are [a, b), the last data bin closed."""
    data = range(1, len(edges) - 2)
    return next(i for i in data if edges[i] <= v < edges[i + 1] or (i == data[-1] and v == edges[i + 1]))


#: SVG's namespace, as ElementTree names its elements
SVG = "{http://www.w3.org/2000/svg}"


def svg(text: str):
    """A chart's SVG parsed as XML: a chart that is not well-formed XML fails here."""
    import xml.etree.ElementTree as ET

    return ET.fromstring(text)


def of_class(root, cls: str) -> list:
    return [e for e in root.iter() if cls in (e.get("class") or "").split()]


def box(e) -> tuple[float, float, float, float]:
    x, y = float(e.get("x", 0)), float(e.get("y", 0))
    return x, y, x + float(e.get("width", 0)), y + float(e.get("height", 0))


def test_score_chart_spans_the_data_and_names_far_thresholds_at_the_edge(word_counts):
    from curate.app import report_charts

    [f] = word_counts["filters"]
    entry = word_counts["score_sample"]["filters"]["word_count"]
    view = report_charts.score_view(f, entry["histogram"])
    assert (view["lo"], view["hi"]) == (min(WORDS), max(WORDS))
    assert sum(view["kept"]) == len(WORDS) and len(view["kept"]) == 40  # all the sample's bins, on the data
    assert view["lines"] == []
    assert view["beyond"] == [("left", "\u2190 min 20 (beyond)"), ("right", "max 100,000 (beyond) \u2192")]
    start, end = report_charts.x_range(view)
    span = max(WORDS) - min(WORDS)
    assert min(WORDS) - 0.05 * span < start <= min(WORDS)
    assert max(WORDS) <= end < max(WORDS) + 0.05 * span
    root = svg(report_charts.score_chart("out", f, entry))
    assert [t.text for t in of_class(root, "beyond")] == ["\u2190 min 20 (beyond)", "max 100,000 (beyond) \u2192"]
    assert of_class(root, "threshold") == []
    # every document of the sample is in a bar, of the height its count asks for
    [frame] = of_class(root, "frame")
    heights = [float(r.get("height")) for r in of_class(root, "kept")]
    assert len(heights) == len({_bin(entry["histogram"]["edges"], w) for w in WORDS})
    assert max(heights) < box(frame)[3] - box(frame)[1]
    # the ticks read as numbers of words, on the data's range
    ticks = [float(t.text.replace(",", "")) for t in of_class(root, "tick") if "x" in t.get("class").split()]
    assert ticks and all(start <= t <= end for t in ticks)


def test_a_threshold_on_the_axis_is_a_dashed_line_at_its_value():
    from curate.app import report_charts

    h = {"edges": [0.5, 0.6, 0.7, 0.8, 0.9, 1.0], "kept": [1, 2, 3, 4, 5], "rejected": [0, 0, 1, 0, 0], "log": False}
    f = {"reason": "x", "min": 0.45, "max": 0.75}
    root = svg(report_charts.score_chart("out", f, {"histogram": h, "rejected": 1, "scored": 16}))
    lines = of_class(root, "threshold")
    assert [ln.find(f"{SVG}title").text for ln in lines] == ["threshold 0.45", "threshold 0.75"]
    [frame] = of_class(root, "frame")
    x0, _, x1, _ = box(frame)
    start, end = report_charts.x_range(report_charts.score_view(f, h))
    for ln, value in zip(lines, (0.45, 0.75)):  # drawn where the value lies on the axis
        assert float(ln.get("x1")) == pytest.approx(x0 + (value - start) / (end - start) * (x1 - x0), abs=0.01)
    assert len(of_class(root, "rejected")) == 1  # only the bin that holds a rejected document


def test_the_ticks_are_round_and_integer_where_counts_are():
    from curate.app.report_charts import linear_ticks, log_ticks, tick_text

    assert linear_ticks(0, 3, 6, integer=True) == [0, 1, 2, 3]  # documents: no tick at 2.5
    assert linear_ticks(0, 3, 6) == [0, 0.5, 1, 1.5, 2, 2.5, 3]
    assert linear_ticks(0, 1_000_000, 5, integer=True) == [0, 200_000, 400_000, 600_000, 800_000, 1_000_000]
    assert log_ticks(0.5, 2e5) == [1, 10, 100, 1_000, 10_000, 100_000]
    assert log_ticks(3, 30) == [5, 10, 20]
    assert [tick_text(t, [0, 0.0002, 0.0004]) for t in (0, 0.0002)] == ["0", "0.0002"]  # not 2.000e-4
    assert tick_text(100_000, [10, 100_000]) == "100,000" and tick_text(0.01, [0.01, 0.1, 1]) == "0.01"
    quarters = linear_ticks(4.4, 5.3, 4)
    assert [tick_text(t, quarters) for t in quarters] == ["4.5", "4.75", "5", "5.25"]


def test_the_score_png_bins_the_data_too(tmp_path):
    """``curate report``'s PNG (from --keep-scores columns) had the same sliver: its bins now span the
    scores, and the plot names the far thresholds at the edge."""
    from curate.app.commands import report

    write_jsonl(tmp_path / "in.jsonl", [{"id": f"w{n}", "text": " ".join(["word"] * n)} for n in WORDS])
    (tmp_path / "chain.yaml").write_text("filters:\n  - {filter: word_count, min: 20, max: 100000}\n")
    m = run_stage("filter", {"config": str(tmp_path / "chain.yaml"), "keep_scores": True}, tmp_path / "in.jsonl",
                  tmp_path / "out")
    s = report.summarize(str(tmp_path / "out"), m["filters"], bins=10)["score_word_count"]
    assert (s.edges[0], s.edges[-1]) == (min(WORDS), max(WORDS)) and s.kept.sum() == len(WORDS)
    report.plot([("out: word_count", s)], str(tmp_path / "scores.png"))
    assert (tmp_path / "scores.png").read_bytes()[:4] == b"\x89PNG"


def test_a_threshold_near_the_data_is_drawn_on_the_axis():
    from curate.app.report_charts import score_view

    h = {"edges": [0.5, 0.6, 0.7, 0.8, 0.9, 1.0], "kept": [1, 2, 3, 4, 5], "rejected": [0, 0, 0, 0, 0], "log": False}
    view = score_view({"min": 0.45, "max": 0.75}, h)
    assert view["lines"] == [0.45, 0.75] and view["beyond"] == [] and (view["lo"], view["hi"]) == (0.45, 1.0)


def test_an_older_manifest_histogram_is_cropped_to_the_bins_with_documents():
    """Manifests written before this change bin 0..max threshold: the chart shows the filled bins only."""
    from curate.app.report_charts import score_view

    edges = np.linspace(0, 100000, 41).tolist()
    kept = [0] * 40
    kept[1], kept[3] = 5, 2
    view = score_view({"min": 50, "max": 100000}, {"edges": edges, "kept": kept, "rejected": [0] * 40, "log": False})
    assert (view["lo"], view["hi"]) == (2500, 10000) and view["kept"] == [5, 0, 2]
    assert view["beyond"] == [("left", "\u2190 min 50 (beyond)"), ("right", "max 100,000 (beyond) \u2192")]


def test_the_token_length_histogram_spans_the_documents_lengths(small_job):
    """Its bins ran from 1 token, so this job's documents (119 tokens each) filled the last of 30 bins:
    the first and the last bin now hold a document, and every document is in one."""
    from curate.app import report_data

    out, _ = small_job
    lengths = report_data.token_lengths(str(out / "05-tokenize"))
    counts = lengths["counts"]
    assert counts[0] > 0 and counts[-1] > 0
    assert sum(counts) == 12  # the documents the tokenizer wrote (test_report's oracle for this job)


def test_legends_sit_outside_the_plot_area(word_counts):
    """Inside the plot area a legend covered the tallest bars, wherever it was anchored: every legend
    is beside or above the frame, with an entry per series."""
    from curate.app import report_charts

    stages = [{"folder": f"0{i}-s", "in": 100, "out": 100 - 10 * i, "bytes": 1000,
               "dropped": {f"reason_{k}": 2 for k in range(i * 4)}} for i in range(1, 4)]
    funnel = svg(report_charts.funnel_chart(stages))
    [f] = word_counts["filters"]
    score = svg(report_charts.score_chart("out", f, word_counts["score_sample"]["filters"]["word_count"]))
    for root, labels, outside in (
            (funnel, ["kept", *sorted(f"reason_{k}" for k in range(12))], lambda s, fr: s[0] >= fr[2]),  # right
            (score, ["kept", "rejected"], lambda s, fr: s[3] <= fr[1])):  # above
        [legend] = of_class(root, "legend")
        assert [t.text for t in legend.iter(f"{SVG}text")] == labels
        [frame] = of_class(root, "frame")
        swatches = [box(r) for r in legend.iter(f"{SVG}rect")]
        assert len(swatches) == len(labels) and all(outside(s, box(frame)) for s in swatches)
        assert max(s[2] for s in swatches) <= float(root.get("width"))  # and inside the picture
    # thresholds named at the edge sit in headroom above the tallest bar
    [frame] = of_class(score, "frame")
    top = min(box(r)[1] for r in of_class(score, "bar"))
    assert top - box(frame)[1] >= 0.2 * (box(frame)[3] - box(frame)[1])


#: recorded at the page's load event, before anything else can run: per chart div, its place on the
#: page, and the bars its SVG draws there (of the bars' colour, PALETTE[0] = #4c72b0, with an area)
AT_LOAD = r"""
window.addEventListener('load', () => {
  window.__at_load = [...document.querySelectorAll('.chart')].map((chart) => {
    const bars = [...chart.querySelectorAll('svg rect.bar')].filter((r) => {
      const b = r.getBoundingClientRect();
      return b.width > 0 && b.height > 0 && getComputedStyle(r).fill === 'rgb(76, 114, 176)';
    }).length;
    const r = chart.getBoundingClientRect();
    return {id: chart.id, svg: chart.querySelectorAll('svg').length, bars,
            box: [r.left + scrollX, r.top + scrollY, r.right + scrollX, r.bottom + scrollY]};
  });
});
"""


@pytest.mark.slow
def test_every_chart_is_drawn_when_the_page_has_loaded(small_job, tmp_path):
    """A screenshot taken as the page finishes loading shows every chart: Bokeh drew them after the load
    event (one task per chart), so such a screenshot had a few of 35 on the sample. The charts are
    inline SVG now, part of the page as it parses; checked at the load event itself, in each chart's
    SVG, and in the screenshot's pixels within each chart's box."""
    from PIL import Image

    from curate.app import report_html
    from tests.browser import Browser

    reason = Browser.skip_reason()
    if reason:
        pytest.skip(reason)
    out, _ = small_job
    page = report_html.write_report(str(out), str(tmp_path / "report.html"))
    source = open(page, encoding="utf-8").read()
    charts = source.count("class='chart'")
    assert charts == source.count("<svg") >= 7  # funnel, 2 scores, 2 dedup, token lengths, time
    assert "<script" not in source
    with Browser(1100, 6000) as b:  # taller than the page: one screenshot holds all of it
        b.on_new_document(AT_LOAD)
        b.open(f"file://{page}")  # returns once the load event has run
        b.screenshot(tmp_path / "report-at-load.png")
        at_load = b.js("return window.__at_load")
        height = b.js("return document.documentElement.scrollHeight")
        assert b.errors() == []
        assert b.js("return performance.getEntriesByType('resource').map(e => e.name)") == []
    assert height <= 6000
    assert len(at_load) == charts
    for c in at_load:
        assert c["svg"] == 1 and c["bars"] >= 1, c
    shot = Image.open(tmp_path / "report-at-load.png").convert("RGB")
    for c in at_load:  # the screenshot itself: the bars' colour inside every chart's box
        region = shot.crop(tuple(round(x) for x in c["box"]))
        bars = sum(n for n, rgb in region.getcolors(1 << 20) if all(abs(a - b) < 4 for a, b in zip(rgb, (76, 114, 176))))
        assert bars > 50, (c["id"], bars)


# --------------------------------------------------------------------------- duplicate pairs: what differs


def _marked(side):
    return [p for p, d in side["runs"] if d]


def test_word_diff_marks_the_words_each_side_lacks():
    from curate.app.report_diff import word_diff

    a, b = "alpha beta gamma delta", "alpha beta GAMMA delta epsilon zeta"
    ra, rb = word_diff(a, b)
    assert (_marked(ra), _marked(rb)) == (["gamma"], ["GAMMA", "epsilon zeta"])  # a phrase is one mark
    assert "".join(p for p, _ in ra["runs"]) == a and "".join(p for p, _ in rb["runs"]) == b
    assert not (ra["cut_start"] or ra["cut_end"] or rb["cut_start"] or rb["cut_end"])
    same, _ = word_diff(a, a)
    assert _marked(same) == [] and "".join(p for p, _ in same["runs"]) == a


def test_a_difference_past_the_first_characters_is_shown_with_its_context():
    """The page showed each text's first 300 characters: a pair differing at its end looked identical."""
    from curate.app import report_diff

    base = " ".join(f"word{i}" for i in range(400))
    ra, rb = report_diff.word_diff(base + " tail added", base)
    shown = "".join(p for p, _ in ra["runs"])
    assert _marked(ra) == ["tail added"] and shown.endswith(" tail added") and ra["cut_start"]
    assert base.endswith("".join(p for p, _ in rb["runs"])) and _marked(rb) == []  # the same place, nothing marked
    assert report_diff.to_html(ra, "del").startswith("\u2026") and len(shown) <= report_diff.WINDOW


def test_the_small_jobs_near_duplicate_pair_marks_the_added_words(small_job):
    """n1 is d01's text plus " and one more" (the fixture's construction): only those words are marked."""
    from curate.app import report_html

    out, _ = small_job
    [pair] = next(s for s in report_html.collect(str(out), verify=False)["stages"] if s["folder"] == "04-fuzzy_dedup")["pairs"]
    assert (pair["removed"], pair["kept"]) == ("n1", "d01")
    assert _marked(pair["removed_diff"]) == ["and one more"] and _marked(pair["kept_diff"]) == []


def test_identical_pairs_show_their_first_characters_unmarked(small_job):
    """Exact duplicates have nothing to mark: their cells stay the texts' first 300 characters."""
    import html

    from curate.app import report_html

    out, docs = small_job
    page = report_html.render(report_html.collect(str(out), verify=False))
    d00 = next(d["text"] for d in docs if d["id"] == "d00")
    assert page.count(f"<span class='text'>{html.escape(d00[:300])}</span>") == 4  # e1 and e2, both sides


#: two near-duplicate documents that differ in markup made to break out of the page's table cell
ATTACK_A = "<img src=x onerror=window.__pwned=1>"
ATTACK_B = "</span></td></tr></table><script>window.__pwned=2</script>"


@pytest.fixture(scope="module")
def hostile_pair(tmp_path_factory):
    import pandas as pd

    tmp = tmp_path_factory.mktemp("pair")
    words = [f"w{i}" for i in range(100)]
    words[58] = "<b>shared&amp;markup</b>"  # the same in both, just before the difference: escaped, not marked
    text_a = " ".join(words[:60] + [ATTACK_A] + words[61:])
    text_b = " ".join(words[:60] + [ATTACK_B] + words[61:])
    (tmp / "in").mkdir()
    pd.DataFrame({"id": ["a", "other"], "text": [text_a, "unrelated words " * 30]}).to_parquet(
        tmp / "in" / "part-00000.parquet")
    pd.DataFrame({"id": ["b"], "text": [text_b]}).to_parquet(tmp / "in" / "part-00001.parquet")
    (tmp / "in" / "_SUCCESS").touch()  # a finished dataset of Parquet parts, whose texts the report looks up
    run_stage("fuzzy_dedup", {"threshold": 0.7, "bands": 20, "rows": 6, "false_positive_check": True},
              tmp / "in", tmp / "job" / "01-fuzzy_dedup")
    return tmp / "job", {"a": text_a, "b": text_b}


def test_pair_texts_with_markup_are_escaped_and_their_difference_marked(hostile_pair):
    """The texts are data: the page holds them escaped (no tag of theirs in it), the only tags in the
    pair's cells are the page's own span and marks, and the cells read back as the texts themselves."""
    from html.parser import HTMLParser

    from curate.app import report_html

    out, texts = hostile_pair
    page = report_html.render(report_html.collect(str(out), verify=False))
    for raw in (ATTACK_A, ATTACK_B, "<b>shared", "<img"):
        assert raw not in page
    [pair] = report_html.collect(str(out), verify=False)["stages"][0]["pairs"]
    removed, kept = texts[pair["removed"]], texts[pair["kept"]]
    assert {pair["removed"], pair["kept"]} == {"a", "b"}

    class Cells(HTMLParser):
        """The text, tags and marked text of each cell of the pairs table (the table with 'Jaccard')."""

        def __init__(self):
            super().__init__(convert_charrefs=True)
            self.cells, self.cell, self.in_pairs, self.marks = [], None, False, 0

        def handle_starttag(self, tag, attrs):
            if tag == "td" and self.in_pairs:
                self.cell = {"text": "", "tags": [], "marked": []}
            elif self.cell is not None:
                self.cell["tags"].append(tag)
                if tag == "mark":
                    self.cell["marked"].append("")
                    self.marks += 1

        def handle_endtag(self, tag):
            if tag == "td" and self.cell is not None:
                self.cells.append(self.cell)
                self.cell = None
            elif tag == "mark" and self.cell is not None:
                self.marks -= 1
            elif tag == "table":
                self.in_pairs = False

        def handle_data(self, data):
            if data == "Jaccard":
                self.in_pairs = True
            if self.cell is not None:
                self.cell["text"] += data
                if self.marks:
                    self.cell["marked"][-1] += data

    parser = Cells()
    parser.feed(page)
    _, _, _, removed_cell, kept_cell = parser.cells
    for cell, text in ((removed_cell, removed), (kept_cell, kept)):
        assert set(cell["tags"]) == {"span", "mark"}
        assert cell["text"].strip("\u2026") in text  # exactly the text, read back from the escaped page
    assert removed_cell["marked"] == [ATTACK_A if removed == texts["a"] else ATTACK_B]
    assert kept_cell["marked"] == [ATTACK_A if kept == texts["a"] else ATTACK_B]
    assert "<b>shared&amp;markup</b>" in removed_cell["text"]  # common markup: shown as text, not marked


@pytest.mark.slow
def test_pair_texts_with_markup_stay_inert_in_chromium(hostile_pair, tmp_path):
    from curate.app import report_html
    from tests.app.test_hostile_pages import _assert_inert, _browser

    out, _ = hostile_pair
    page = report_html.write_report(str(out), str(tmp_path / "report.html"), verify=False)
    with _browser() as b:
        b.open(f"file://{page}")
        _assert_inert(b)  # neither attack ran, no image element
        marks = b.js("return [...document.querySelectorAll('td mark')].map(m => [m.className, m.textContent])")
        b.screenshot(tmp_path / "pairs.png")
    assert sorted(marks) == sorted([["del", ATTACK_A], ["ins", ATTACK_B]]) or sorted(marks) == sorted(
        [["del", ATTACK_B], ["ins", ATTACK_A]])


def test_scores_all_in_one_bin_draw_a_bar_not_the_whole_plot():  # issue 43, point 7
    from curate.app.report_charts import score_view

    h = {"edges": [i / 20 for i in range(21)], "kept": [7] + [0] * 19, "rejected": [0] * 20, "log": False}
    view = score_view({"max": 0.5}, h)
    width = view["right"][0] - view["left"][0]
    assert (view["hi"] - view["lo"]) >= 5 * width - 1e-9  # the bar is at most a fifth of the axis


def test_rates_and_counts_read_right():
    from curate.app.report_charts import bars_chart, funnel_chart, time_chart
    from curate.app.report_format import _rate

    assert [_rate(x) for x in (0.42, 3.14159, 56.78, 12345.6)] == ["0.42", "3.1", "56.8", "12,346"]
    stages = [{"folder": "01-clean", "stage": "clean", "in": 3, "out": 2, "dropped": {"empty": 1}, "bytes": 10,
               "seconds": 0.5},
              {"folder": "02-tokenize", "stage": "tokenize", "in": 2, "out": 2, "dropped": {}, "bytes": 999,
               "seconds": 0.25}]

    def ticks(root, axis):
        return [t.text for t in of_class(root, "tick") if axis in t.get("class").split()]

    funnel = svg(funnel_chart(stages))
    assert ticks(funnel, "x") == ["0", "1", "2", "3"]  # documents: no tick at 2.5
    assert ticks(funnel, "y") == ["01-clean", "02-tokenize"]
    hovers = [t.text for t in funnel.iter(f"{SVG}title")]
    assert "text bytes out: 10 B" in hovers[0] and "dropped: 1 (33.3%)" in hovers[0]
    assert "text bytes out: - (tokens)" in hovers[1]
    assert ticks(svg(bars_chart("n", ["a"], [3], "x")), "y") == ["0", "1", "2", "3"]
    time = svg(time_chart(stages))
    assert ticks(time, "y") == ["0", "0.2", "0.4"]  # seconds are fractions
    assert [t.text for t in time.iter(f"{SVG}title")] == ["stage: 01-clean\nseconds: 0.50",
                                                          "stage: 02-tokenize\nseconds: 0.25"]
