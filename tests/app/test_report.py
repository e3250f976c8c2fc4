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
