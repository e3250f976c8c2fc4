"""``curate report``: the counts table for a job folder or one stage folder, and the score PNG."""

import argparse

import pytest

from app.commands import report
from modules.errors import SettingsError
from tests.conftest import curate, run_stage, write_jsonl
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
    assert numbers.split()[-3:] == ["4", "1", "1"]  # scored, rejects alone, dropped first
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
    out = run(capsys, tmp_path / "f")
    assert "--keep-scores" in out and not (tmp_path / "f" / "_reports").exists()


def test_errors(tmp_path):
    with pytest.raises(SettingsError, match="no such folder"):
        report.stage_dirs(str(tmp_path / "nope"))
    with pytest.raises(SettingsError, match="no manifest.json, and no NN-stage folders"):
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
    filters = json.loads((out / "manifest.json").read_text())["filters"]
    return out, filters, request.param


def _all_scores(out, fmt, columns):
    import glob

    import pandas as pd

    paths = sorted(glob.glob(str(out / "part-*")) + glob.glob(str(out / "_rejects" / "part-*")))
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
    from modules.errors import DataError

    write_jsonl(tmp_path / "part-00000.jsonl", [{"id": "a", "score_x": 1.5}, {"id": "b"}, {"id": "c", "score_x": "hi"}])
    with pytest.raises(DataError, match="part-00000.jsonl: line 3"):
        list(report.score_batches(str(tmp_path), ["score_x"]))
