"""Hostile names and texts on the two pages a browser opens: the HTML report and the live page.

Edge cases: an output folder and a job file whose names are markup with an ``onerror`` handler, a
document whose text holds the report's old chart placeholders (``{{funnel}}``, ``{{time}}``) and the new
one, each checked in headless Chromium (``document.title`` unchanged, no injected element live, the
handler never ran) as well as in the page's source.
"""

from __future__ import annotations

import subprocess
import sys
import time
import urllib.request

import pytest

from tests.app.test_dashboard import free_port
from tests.conftest import ROOT, run_stage, write_jsonl

HOSTILE = "x<img src=x onerror=window.__pwned=1;document.title=1>"
PLACEHOLDERS = "{{funnel}} {{time}} <!--curate-chart:funnel--> {{word_count}}"
WORDS = ("the quick brown fox jumps over the lazy dog while a curious cat watches from the old wooden "
         "fence and birds sing in the tall green trees near a quiet river ").split()


def _browser():
    from tests.browser import Browser

    reason = Browser.skip_reason()
    if reason:
        pytest.skip(reason)
    return Browser(1000, 900)


def _assert_inert(b) -> None:
    assert b.js("return window.__pwned === undefined")
    assert b.js("return document.querySelectorAll('img').length") == 0


@pytest.fixture(scope="module")
def hostile_output(tmp_path_factory):
    import dask

    tmp = tmp_path_factory.mktemp("hostile")
    docs = [{"id": f"d{i}", "text": " ".join(WORDS[i:] + WORDS[:i]) + f" {i}"} for i in range(6)]
    docs += [{"id": "p1", "text": PLACEHOLDERS}, {"id": HOSTILE, "text": HOSTILE + " " + PLACEHOLDERS}]
    write_jsonl(tmp / "in" / "a.jsonl", docs[:4])
    write_jsonl(tmp / "in" / "b.jsonl", docs[4:])
    (tmp / "chain.yaml").write_text("filters:\n  - {filter: word_count, min: 10}\n")
    out = tmp / HOSTILE
    with dask.config.set(scheduler="synchronous"):
        run_stage("filter", {"config": str(tmp / "chain.yaml")}, str(tmp / "in" / "*.jsonl"), out / "01-filter")
        run_stage("exact_dedup", {}, out / "01-filter", out / "02-exact_dedup")
    return out


def test_report_placeholders_are_unreachable_from_content(hostile_output):
    from curate.app import report_html

    page = report_html.render(report_html.collect(str(hostile_output), verify=False))
    charts = page.count("class='chart'")
    assert charts >= 2
    # every chart slot became a chart once; the texts kept their braces and comments as text
    assert "<!--curate-chart:" not in page
    assert page.count("{{funnel}}") >= 1 and "&lt;!--curate-chart:funnel--&gt;" in page
    assert HOSTILE not in page


@pytest.mark.slow
def test_report_with_hostile_names_in_chromium(hostile_output, tmp_path):
    from curate.app import report_html

    path = report_html.write_report(str(hostile_output), str(tmp_path / "report.html"), verify=False)
    title = f"curate report: {HOSTILE}"
    with _browser() as b:
        b.open(f"file://{path}")
        time.sleep(1)
        assert b.js("return document.title") == title
        _assert_inert(b)
        # no chart spliced into a table cell: charts sit in sections, not in the examples' cells
        assert b.js("return document.querySelectorAll('td .chart').length") == 0
        assert "{{funnel}}" in b.text()


@pytest.mark.slow
def test_live_page_with_hostile_job_and_output_names_in_chromium(tmp_path):
    from distributed import Client

    from curate.app import live

    port = free_port()
    sched_file = tmp_path / "scheduler.json"
    scheduler = subprocess.Popen([sys.executable, "-m", "distributed.cli.dask_scheduler", "--scheduler-file",
                                  str(sched_file), "--host", "127.0.0.1", "--dashboard-address", f"127.0.0.1:{port}"],
                                 cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.time() + 60
        while not sched_file.exists():
            assert time.time() < deadline, "scheduler did not start"
            time.sleep(0.1)
        with Client(scheduler_file=str(sched_file), timeout="30s") as client, _browser() as b:
            tracker = live.Tracker(client, publish_every=0).start()
            tracker.job(f"{HOSTILE}.yaml", f"/data/{HOSTILE}", [("clean", f"01-{HOSTILE}")])
            tracker.stage_started(0)
            tracker._publish()
            with urllib.request.urlopen(tracker.url, timeout=30) as r:
                assert r.status == 200
            b.open(tracker.url)
            deadline = time.time() + 30
            while f"{HOSTILE}.yaml" not in b.text():
                assert time.time() < deadline, b.text()[:500]
                time.sleep(0.2)
            assert b.js("return document.title") == "curate"
            _assert_inert(b)
            tracker.close()
    finally:
        scheduler.terminate()
        scheduler.wait(timeout=30)
