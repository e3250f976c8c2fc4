"""The HTML report against hostile folders and manifests (hostile pass 3, point 10): a folder named
``x<!--<script>`` drew none of its charts (the Bokeh charts' JSON opened an HTML comment inside its
script element; the charts are inline SVG now, and the page has no script), and a string where the
audit's recall belongs failed the report with "Unknown format code '%'", naming neither the field nor
the file."""

from __future__ import annotations

import argparse
import json
import re

import pytest

from curate.app.commands import report
from tests.conftest import copy_output, run_stage, write_jsonl

FOLDER = "x<!--<script>"


@pytest.fixture(scope="module")
def output(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("hostile")
    write_jsonl(tmp / "in.jsonl", [{"id": f"d{i}", "text": f"document {i % 2}"} for i in range(4)])
    run_stage("exact_dedup", {}, tmp / "in.jsonl", tmp / FOLDER / f"01-{FOLDER}")
    return tmp


def html_of(folder, tmp_path) -> str:
    p = argparse.ArgumentParser()
    report.add_arguments(p)
    path = tmp_path / "page.html"
    assert report.main(p.parse_args([str(folder), "--html", str(path), "--png", str(tmp_path / "s.png")])) == 0
    return path.read_text(encoding="utf-8")


def test_a_folder_named_like_markup_is_text_in_every_chart(output, tmp_path):
    """The charts are inline SVG: each one well-formed XML whose texts read back as the folder's name,
    so the name opened no comment and no element; and the page has no script for it to reach."""
    import xml.etree.ElementTree as ET

    page = html_of(output / FOLDER, tmp_path)
    assert "<script" not in page and FOLDER not in page
    charts = re.findall(r"<div id='chart-\d+' class='chart'>(<svg .*?</svg>)</div>", page, re.S)
    assert len(charts) == page.count("class='chart'") == page.count("<svg") >= 2
    texts = [t for c in charts for e in ET.fromstring(c).iter() for t in (e.text, e.get("class")) if t]
    assert f"01-{FOLDER}" in texts  # the funnel's stage label, read back unchanged
    assert any(FOLDER in t for t in texts if t.startswith("stage: "))  # and its hover text


def test_a_string_where_the_audits_recall_belongs_is_shown_as_it_is(output, tmp_path):

    copy = tmp_path / "copy"
    copy_output(output / FOLDER / f"01-{FOLDER}", copy)
    manifest = json.loads((copy / "_manifest.json").read_text())
    manifest["dedup"]["audit"] = {"sample": "twelve", "pairs": 66, "true_pairs": 4, "recall": "high<b>",
                                  "recall_ci": "n/a", "precision": 1.0, "precision_ci": [0.5, "1"],
                                  "removed_in_sample": None}
    (copy / "_manifest.json").write_text(json.dumps(manifest))
    page = html_of(copy, tmp_path)
    assert re.search(r"<td>recall</td><td>high&lt;b&gt;</td><td>n/a</td>", page)
    assert "<td>precision</td><td>100.00%</td><td>50.00% – 1</td>" in page
    assert "uniform sample of twelve documents" in page


@pytest.mark.slow
def test_every_chart_of_that_folder_is_drawn_in_chromium(output, tmp_path):
    import time

    from curate.app import report_html
    from tests.browser import Browser

    reason = Browser.skip_reason()
    if reason:
        pytest.skip(reason)
    path = report_html.write_report(str(output / FOLDER), str(tmp_path / "report.html"), verify=False)
    with Browser(1000, 900) as b:
        b.open(f"file://{path}")
        charts = b.js("return document.querySelectorAll('.chart').length")
        deadline = time.time() + 30
        while b.js("return [...document.querySelectorAll('.chart')].filter(c => c.childElementCount).length") < charts:
            assert time.time() < deadline, "not every chart was drawn"
            time.sleep(0.2)
        assert charts >= 2 and b.js("return document.title") == f"curate report: {FOLDER}"
