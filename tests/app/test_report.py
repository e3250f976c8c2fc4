"""``curate report``: the counts table for a job folder or one stage folder, and the score PNG."""

import argparse

import pytest

from curate.app.commands import report
from curate.stages.errors import SettingsError
from tests.conftest import curate, run_stage, side, write_jsonl
from tests.modules.filters.test_heuristic import GOOD

DOCS = [{"id": "good", "text": GOOD}, {"id": "short", "text": "Too short."}, {"id": "empty", "text": "  "},
        {"id": "mail", "text": GOOD + " Write to ann@example.org."}, {"id": "digits", "text": "1 2 3 4 5 6 7 8 9 " * 9}]


@pytest.fixture
def job(tmp_path):
    write_jsonl(tmp_path / "in.jsonl", DOCS)
    chain = tmp_path / "chain.yaml"
    chain.write_text("filters:\n  - {filter: word_count, min: 10}\n  - {filter: numbers, max: 0.15}\n"
                     "  - {filter: whitespace, max: 0.3}\n")
    out = tmp_path / "job"
    run_stage("clean", {}, tmp_path / "in.jsonl", out / "01-clean")
    run_stage("redact", {}, out / "01-clean", out / "02-redact")
    run_stage("filter", {"config": str(chain), "keep_scores": True}, out / "02-redact", out / "03-filter")
    return out


def run(capsys, *argv):
    p = argparse.ArgumentParser()
    report.add_arguments(p)
    assert report.main(p.parse_args([str(a) for a in argv])) == 0
    return capsys.readouterr().out


def test_job_folder_table_and_png(job, capsys):
    out = run(capsys, job)
    lines = out.splitlines()
    assert lines[0].split()[:5] == ["folder", "stage", "docs", "in", "docs"]
    row = next(line for line in lines if line.startswith("01-clean"))
    assert row.split()[:5] == ["01-clean", "clean", "5", "4", "1"]
    assert any("dropped: empty_after_clean" in line and line.split()[-1] == "1" for line in lines)
    assert any("redacted: email" in line and line.split()[-1] == "1" for line in lines)
    assert next(line for line in lines if line.startswith("03-filter  filter")).split()[2:5] == ["4", "2", "2"]
    numbers = next(line for line in lines if line.startswith("03-filter  numbers"))
    assert numbers.split()[-4:] == ["4", "1", "1", "0"]  # scored, would reject, dropped first, only it rejects
    png = job / "_reports" / "scores.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert f"score distributions in {png}" in out


def test_one_stage_folder_and_png_path(job, capsys, tmp_path):
    out = run(capsys, job / "03-filter", "--png", tmp_path / "x" / "s.png")
    assert "01-clean" not in out and "03-filter" in out
    assert (tmp_path / "x" / "s.png").exists()


def test_without_scores(tmp_path, capsys):
    write_jsonl(tmp_path / "in.jsonl", DOCS)
    chain = tmp_path / "c.yaml"
    chain.write_text("filters:\n  - {filter: word_count, min: 10}\n")
    run_stage("filter", {"config": str(chain)}, tmp_path / "in.jsonl", tmp_path / "f")
    out = run(capsys, tmp_path / "f", "--html", tmp_path / "page.html")
    assert "--keep-scores" in out and not (tmp_path / "f" / "_reports").exists()  # no PNG without scores
    assert f"page in {tmp_path / 'page.html'}" in out  # the page draws the manifest's score sample instead
    # the text table shows the manifest's counts, as the page does, not "-" (issue 47, point 10)
    import json

    counts = json.loads((tmp_path / "f" / "_manifest.json").read_text())["score_sample"]["filters"]["word_count"]
    line = next(x for x in out.splitlines() if x.startswith("f ") and "word_count" in x)
    assert line.split()[-4:-2] == [str(counts["scored"]), str(counts["rejected"])], line


def test_errors(tmp_path):
    with pytest.raises(SettingsError, match="no such folder"):
        report.stage_dirs(str(tmp_path / "nope"))
    with pytest.raises(SettingsError, match="no _manifest.json, and no NN-stage folders"):
        report.stage_dirs(str(tmp_path))
    proc = curate("report", tmp_path, check=False)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1


@pytest.fixture(params=["parquet", "jsonl"])
def scored(request, tmp_path):
    """A filter output with score columns (kept rows and _rejects/) in either format, two partitions."""
    import json

    write_jsonl(tmp_path / "in" / "a.jsonl", DOCS[:3])
    write_jsonl(tmp_path / "in" / "b.jsonl", [*DOCS[3:], {"id": "huge", "text": "word " * 600_000}])
    chain = tmp_path / "chain.yaml"
    chain.write_text("filters:\n  - {filter: word_count, min: 10, max: 100000}\n  - {filter: numbers, max: 0.15}\n")
    out = tmp_path / "f"
    run_stage("filter", {"config": str(chain), "keep_scores": True}, str(tmp_path / "in" / "*.jsonl"), out,
              format=request.param)
    filters = json.loads((out / "_manifest.json").read_text())["filters"]
    return out, filters, request.param


def _all_scores(out, fmt, columns):
    import glob

    import pandas as pd

    paths = sorted(glob.glob(str(out / "part-*")) + glob.glob(str(side(out, "_rejects") / "part-*")))
    read = pd.read_parquet if fmt == "parquet" else (lambda p: pd.read_json(p, lines=True, dtype=False))
    return pd.concat([read(p) for p in paths], ignore_index=True)[columns]


def test_scores_stream_in_small_batches_of_score_columns_only(scored, monkeypatch):
    out, filters, _ = scored
    monkeypatch.setattr(report, "BATCH_ROWS", 2)
    columns = [f["column"] for f in filters]
    batches = list(report.score_batches(str(out), columns))
    assert len(batches) >= 3
    for b in batches:
        assert list(b) == columns and all(len(v) <= 2 and v.dtype.kind == "f" for v in b.values())


def test_streamed_histograms_equal_the_whole_data(scored, monkeypatch):
    import numpy as np

    out, filters, fmt = scored
    monkeypatch.setattr(report, "BATCH_ROWS", 2)
    summaries = report.summarize(str(out), filters, bins=7)
    frame = _all_scores(out, fmt, [f["column"] for f in filters])
    for f in filters:
        s, v = summaries[f["column"]], frame[f["column"]].dropna().to_numpy(dtype=float)
        bad = report.rejects(v, f)
        assert (s.scored, s.rejected) == (len(v), int(bad.sum())) and s.scored == 6
        assert (s.lo, s.hi) == (v.min(), v.max())
        assert s.kept.tolist() == np.histogram(v[~bad], bins=s.edges)[0].tolist()
        assert s.bad.tolist() == np.histogram(v[bad], bins=s.edges)[0].tolist()
        assert s.kept.sum() + s.bad.sum() == len(v)  # nothing falls off the edges
    assert summaries["score_word_count"].log  # the huge document: 600000 words


def test_jsonl_scores_that_are_not_numbers(tmp_path):
    from curate.stages.errors import DataError

    write_jsonl(tmp_path / "part-00000.jsonl", [{"id": "a", "score_x": 1.5}, {"id": "b"}, {"id": "c", "score_x": "hi"}])
    with pytest.raises(DataError, match="part-00000.jsonl: line 3"):
        list(report.score_batches(str(tmp_path), ["score_x"]))


# --------------------------------------------------------------------------- the HTML page of a run


def _shuffled(words, seed):
    import random

    w = list(words)
    random.Random(seed).shuffle(w)
    return " ".join(w)


@pytest.fixture(scope="module")
def small_job(tmp_path_factory):
    """clean -> filter -> exact_dedup -> fuzzy_dedup -> tokenize over two input files (two partitions).

    18 documents: 12 distinct pages (shuffled words), two exact copies of d00 (a group of 3), one near
    copy of d01 (a component of 2), two too short for the filter, one blank (dropped by clean)."""
    import dask

    tmp = tmp_path_factory.mktemp("job")
    words = GOOD.split()
    docs = [{"id": f"d{i:02d}", "text": _shuffled(words, i) + f" page {i}"} for i in range(12)]
    docs += [{"id": "e1", "text": docs[0]["text"]}, {"id": "e2", "text": docs[0]["text"]},
             {"id": "n1", "text": docs[1]["text"] + " and one more"},
             {"id": "short1", "text": "Too short."}, {"id": "short2", "text": "Also too short here."},
             {"id": "blank", "text": "   "}]
    write_jsonl(tmp / "in" / "a.jsonl", docs[:9])
    write_jsonl(tmp / "in" / "b.jsonl", docs[9:])
    chain = tmp / "chain.yaml"
    chain.write_text("filters:\n  - {filter: word_count, min: 10}\n  - {filter: numbers, max: 0.15}\n")
    out = tmp / "job"
    with dask.config.set(scheduler="synchronous"):
        run_stage("clean", {}, str(tmp / "in" / "*.jsonl"), out / "01-clean")
        run_stage("filter", {"config": str(chain)}, out / "01-clean", out / "02-filter")
        run_stage("exact_dedup", {}, out / "02-filter", out / "03-exact_dedup")
        run_stage("fuzzy_dedup", {"threshold": 0.8, "bands": 20, "rows": 6, "false_positive_check": True},
                  out / "03-exact_dedup", out / "04-fuzzy_dedup")
        run_stage("tokenize", {"tokenizer": "tiktoken:cl100k_base"}, out / "04-fuzzy_dedup", out / "05-tokenize")
    return out, docs


def test_page_data_against_the_files(small_job):
    """Every figure on the page, checked against an independent reading of the outputs."""
    import pandas as pd

    from curate.app import report_html
    from tests.conftest import read_output

    out, docs = small_job
    data = report_html.collect(str(out))
    stages = {s["folder"]: s for s in data["stages"]}
    assert [(s["folder"], s["in"], s["out"], s["dropped"]) for s in data["stages"]] == [
        ("01-clean", 18, 17, {"empty_after_clean": 1}),
        ("02-filter", 17, 15, {"word_count": 2}),
        ("03-exact_dedup", 15, 13, {"exact_duplicate": 2}),
        ("04-fuzzy_dedup", 13, 12, {"fuzzy_duplicate": 1}),
        ("05-tokenize", 12, 12, {}),
    ]
    for name in ("01-clean", "02-filter", "04-fuzzy_dedup"):  # bytes: UTF-8 length of the kept texts
        kept = read_output(out / name)
        assert stages[name]["bytes"] == sum(len(t.encode()) for t in kept["text"])
        assert not stages[name]["bytes_estimated"]
    # examples: the rejected documents themselves, text cut at 300 characters
    assert sorted(i for i, _, _ in stages["02-filter"]["examples"]["word_count"]) == ["short1", "short2"]
    assert [t for i, t, _ in stages["02-filter"]["examples"]["word_count"] if i == "short1"] == ["Too short."]
    assert [i for i, _, _ in stages["01-clean"]["examples"]["empty_after_clean"]] == ["blank"]
    # dedup: one exact group of 3, one fuzzy component of 2 (brute force: the texts themselves)
    texts = pd.Series({d["id"]: d["text"] for d in docs})
    survivors = texts[[i for i in texts.index if i not in ("short1", "short2", "blank")]]
    assert stages["03-exact_dedup"]["groups"] == {3: 1} == {
        int(k): int(v) for k, v in survivors.value_counts().value_counts().items() if k > 1}
    assert stages["04-fuzzy_dedup"]["groups"] == {2: 1}
    [pair] = stages["04-fuzzy_dedup"]["pairs"]
    assert (pair["removed"], pair["kept"]) == ("n1", "d01")

    def grams(t):  # word 5-gram shingles of the lowercased text, as the spec of fuzzy dedup says
        w = t.lower().split()
        return {tuple(w[i:i + 5]) for i in range(len(w) - 4)}

    a, b = grams(texts["n1"]), grams(texts["d01"])
    assert pair["jaccard"] == pytest.approx(len(a & b) / len(a | b))
    exact = stages["03-exact_dedup"]["pairs"]
    assert {p["removed"] for p in exact} == {"e1", "e2"} and all(p["jaccard"] == 1.0 for p in exact)
    # tokens: lengths from the .idx files, against the manifest's per-file counts
    tok = stages["05-tokenize"]
    assert sum(tok["token_lengths"]["counts"]) == 12 == tok["manifest"]["totals"]["documents"]
    assert tok["tokens"] == sum(f["tokens"] for f in tok["manifest"]["files"])
    assert tok["verify"]["ok"] and tok["manifest"]["dtype"] == "uint32" or tok["manifest"]["dtype"]
    # the filter's score sample, kept without --keep-scores: every scored document in a histogram
    sample = stages["02-filter"]["manifest"]["score_sample"]["filters"]["word_count"]
    assert (sample["scored"], sample["rejected"]) == (17, 2)
    assert sum(sample["histogram"]["kept"]) + sum(sample["histogram"]["rejected"]) == 17


def test_page_is_one_file_without_network(small_job, tmp_path, capsys):
    import re

    out, _ = small_job
    text = run(capsys, out, "--html", tmp_path / "r.html", "--no-verify")
    page = (tmp_path / "r.html").read_text()
    assert f"page in {tmp_path / 'r.html'}" in text
    assert re.findall(r"""<(?:script|link|img)[^>]+(?:src|href)=""", page) == []  # everything inlined
    assert "<script" not in page  # the charts are inline SVG: no JavaScript at all
    assert page.count("class='chart'") == page.count("<svg") >= 6
    assert len(page) < 200_000  # Bokeh's inlined JavaScript alone was about 1.5 MB
    for name in ("01-clean", "02-filter", "03-exact_dedup", "04-fuzzy_dedup", "05-tokenize"):
        assert name in page
    assert "Too short." in page and "word_count" in page
    assert not (out / "_reports" / "report.html").exists()  # --html puts it elsewhere


@pytest.mark.slow
def test_page_renders_in_chromium(small_job, tmp_path):
    """The page in headless Chromium: charts drawn, stage names and counts in the DOM, no errors,
    nothing fetched from the network; screenshots stay in the test's folder."""
    import time

    from curate.app import report_html
    from tests.browser import Browser

    reason = Browser.skip_reason()
    if reason:
        pytest.skip(reason)
    out, _ = small_job
    page = report_html.write_report(str(out), str(tmp_path / "report.html"))
    with Browser(1100, 1400) as b:
        b.open(f"file://{page}")
        charts = b.js("return document.querySelectorAll('.chart').length")
        deadline = time.time() + 30
        drawn = "return [...document.querySelectorAll('.chart svg')].filter(s => s.getBBox().width > 0).length"
        while b.js(drawn) < charts:  # each chart is one SVG with something in it
            assert time.time() < deadline, f"{b.js(drawn)} of {charts} charts drawn after 30 s"
            time.sleep(0.2)
        text = b.text()
        b.screenshot(tmp_path / "report.png")
        assert b.errors() == []
        assert b.js("return performance.getEntriesByType('resource').map(e => e.name)") == []
    for name in ("01-clean", "02-filter", "03-exact_dedup", "04-fuzzy_dedup", "05-tokenize"):
        assert name in text
    assert "word_count" in text
    lines = text.splitlines()
    first = lines.index("01-clean")  # the funnel table's first row: folder, stage, docs in, docs out, dropped
    assert lines[first:first + 5] == ["01-clean", "clean", "18", "17", "1"]
    assert "OK" in lines  # verify's result
    assert (tmp_path / "report.png").stat().st_size > 10_000


def test_end_of_run_page_skips_verify_beyond_a_size(small_job, monkeypatch):
    """Edge case: verify reads every token; the automatic page runs it only for small outputs."""
    from curate.app import report_data, report_html

    out, _ = small_job
    monkeypatch.setattr(report_data, "AUTO_VERIFY_BYTES", 0)  # collect reads it where it lives
    tok = report_html.collect(str(out), verify="auto")["stages"][-1]
    assert tok["verify"] is None and tok["verify_skipped"].startswith("not run for this page")
    assert "curate verify" in report_html.render({**report_html.collect(str(out), verify="auto")})


def test_a_job_root_with_its_own_manifest_lists_its_stages(tmp_path):
    """Edge case: a job's root holds the job's _manifest.json; its stages are still the NN-stage folders."""
    import json

    for name in ("01-clean", "02-filter"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "_manifest.json").write_text(json.dumps({"stage": name[3:]}))
    (tmp_path / "_manifest.json").write_text(json.dumps({"owner": {"kind": "job", "job": "j"}}))
    assert report.stage_dirs(str(tmp_path)) == [str(tmp_path / "01-clean"), str(tmp_path / "02-filter")]
    assert report.stage_dirs(str(tmp_path / "02-filter")) == [str(tmp_path / "02-filter")]


def test_report_waits_for_no_one_and_writes_nothing_while_another_command_holds_the_output(tmp_path, capsys):
    """Issue 29, point 10: ``curate report`` wrote into a job root while erase held its lock."""
    from curate.app.cli import main as cli_main
    from curate.stages.output import Lock, Output
    from tests.conftest import run_stage as run, write_jsonl as write

    write(tmp_path / "in" / "a.jsonl", [{"id": f"a{k}", "text": f"alpha {k} " * 20} for k in range(4)])
    out = tmp_path / "out"
    run("clean", {}, [str(tmp_path / "in" / "a.jsonl")], out)
    before = sorted(p.name for p in out.rglob("*"))
    with Lock(Output.at(out), "curate erase ids.txt"):
        assert cli_main(["report", str(out)]) == 2
    assert "curate erase ids.txt" in capsys.readouterr().err
    assert sorted(p.name for p in out.rglob("*")) == before
    assert cli_main(["report", str(out)]) == 0


def test_each_filter_shows_the_documents_only_it_rejects(tmp_path, capsys):
    """Issue 36.3: per filter, the documents no other filter of the chain rejects (its rejects that
    would be kept without it), in the manifest, in ``curate report``'s table and on the HTML page."""
    import json
    import re

    docs = [{"id": "good", "text": GOOD},
            {"id": "short", "text": "Too short."},
            {"id": "digits", "text": "1 2 3 4 5 6 7 8 9 " * 9},
            {"id": "nums", "text": GOOD + " " + "1234567890" * 12},
            {"id": "spaced", "text": "a  b  c  d  e  f  g  h  i  j  k"},
            {"id": "short_digits", "text": "12 34"},
            {"id": "tiny", "text": "Just a few words here."}]
    write_jsonl(tmp_path / "in" / "a.jsonl", docs[:4])
    write_jsonl(tmp_path / "in" / "b.jsonl", docs[4:])  # two partitions
    chain = tmp_path / "chain.yaml"
    chain.write_text("filters:\n  - {filter: word_count, min: 10}\n  - {filter: numbers, max: 0.15}\n"
                     "  - {filter: whitespace, max: 0.3}\n")
    out = tmp_path / "f"
    manifest = run_stage("filter", {"config": str(chain), "keep_scores": True}, str(tmp_path / "in" / "*.jsonl"), out)

    # the oracle: each filter's rule in plain Python, then the documents exactly one filter rejects
    def rejecting(text):
        return {name for name, bad in (
            ("word_count", len(text.split()) < 10),
            ("numbers", sum(c in "0123456789" for c in text) / len(text) > 0.15),
            ("whitespace", sum(c in " \t\n\r\b" for c in text) / len(text) > 0.3)) if bad}

    by_doc = {d["id"]: rejecting(d["text"]) for d in docs}
    assert by_doc == {"good": set(), "short": {"word_count"}, "digits": {"numbers", "whitespace"},
                      "nums": {"numbers"}, "spaced": {"whitespace"}, "short_digits": {"word_count", "numbers"},
                      "tiny": {"word_count"}}
    only = {f: sum(s == {f} for s in by_doc.values()) for f in ("word_count", "numbers", "whitespace")}
    would = {f: sum(f in s for s in by_doc.values()) for f in only}
    assert only == {"word_count": 2, "numbers": 1, "whitespace": 1}

    sample = manifest["score_sample"]["filters"]
    assert {f: (sample[f]["rejected"], sample[f]["only"]) for f in only} == {f: (would[f], only[f]) for f in only}
    text = run(capsys, out, "--html", tmp_path / "page.html", "--no-verify")
    lines = text.splitlines()
    header = next(line for line in lines if line.startswith("folder  filter"))
    assert header.split("  ")[-3:] == ["would reject", "dropped first", "only it rejects"]
    for f in only:
        row = next(line for line in lines if line.split()[:2] == ["f", f])
        assert row.split()[-4:] == [str(len(docs)), str(would[f]), str(manifest["counts"]["dropped"].get(f, 0)),
                                    str(only[f])], row
    page = (tmp_path / "page.html").read_text()
    assert "<th>only it rejects</th>" in page
    for f in only:
        [cells] = re.findall(rf"<tr><td>{f}</td>((?:<td>[^<]*</td>)+)</tr>", page)
        assert re.findall(r"<td>([^<]*)</td>", cells)[-1] == str(only[f])
    assert json.loads((out / "_manifest.json").read_text())["score_sample"]["filters"]["numbers"]["only"] == 1
