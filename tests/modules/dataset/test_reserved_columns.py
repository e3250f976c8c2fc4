"""Input columns named like curate's own (issue 40, point 1): refused, never taken for curate's.

A user's ``_reason`` (metadata from another tool) once sent its documents to ``_rejects/`` with the
user's value as the reason, and a ``_detail`` vanished, exit 0. Now the run and the dry run refuse
such an input before any work (exit 2, one line naming the file, the column and the rename), and
the reader refuses a reserved key that first appears past the records the check samples.
"""

from __future__ import annotations

import json

import pandas as pd
import pytest

from curate.app.cli import main
from curate.stages.dataset import read_dataset
from curate.stages.errors import DataError
from curate.stages.settings import IOSettings

ROWS = [{"id": f"d{i}", "text": f"document number {i} has a few words", "_reason": "tagged" if i % 2 else None}
        for i in range(6)]


def _write(tmp_path, kind, rows=ROWS):
    if kind == "parquet":
        path = tmp_path / "in.parquet"
        pd.DataFrame(rows).to_parquet(path)
    else:
        path = tmp_path / "in.jsonl"
        path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


@pytest.mark.parametrize("kind", ["parquet", "jsonl"])
@pytest.mark.parametrize("dry", [False, True])
def test_a_job_whose_input_has_a_reason_column_is_refused_before_any_work(tmp_path, capsys, kind, dry):
    path = _write(tmp_path, kind)
    job = tmp_path / "job.yaml"
    job.write_text(f"name: r\ninput: {path}\nstages:\n  - clean: {{}}\n  - exact_dedup: {{}}\n")
    argv = ["run", str(job), "--output", str(tmp_path / "out"), "--cluster", "threads"] + (["--dry-run"] if dry else [])
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and str(path) in err and "reserved_column" in err
    assert "'_reason'" in err and "rename" in err
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("column", ["_detail", "__offset"])
def test_every_reserved_name_is_refused_by_a_stage_command(tmp_path, capsys, column):
    rows = [{"id": f"d{i}", "text": "some words here", column: "x"} for i in range(3)]
    path = _write(tmp_path, "jsonl", rows)
    assert main(["clean", "--input", str(path), "--output", str(tmp_path / "o"), "--cluster", "threads"]) == 2
    err = capsys.readouterr().err
    assert f"'{column}'" in err and "reserved_column" in err
    assert not (tmp_path / "o").exists()


def test_a_reserved_key_past_the_schema_sample_fails_the_read_naming_the_file(tmp_path):
    # the first 1,000 records decide the schema; record 1,500 brings a _reason of its own
    rows = [{"id": f"d{i}", "text": "words"} for i in range(2000)]
    rows[1500]["_reason"] = "from another tool"
    path = _write(tmp_path, "jsonl", rows)
    ddf = read_dataset([str(path)], IOSettings())
    with pytest.raises(DataError, match=r"in\.jsonl: reserved_column: column '_reason' is curate's own"):
        ddf.compute()


def test_a_user_offset_key_is_never_taken_for_the_readers_own(tmp_path):
    rows = [{"text": "words", "__offset": 7}]
    path = _write(tmp_path, "jsonl", rows)
    with pytest.raises(DataError, match=r"line 1: reserved_column: column '__offset'"):
        read_dataset([str(path)], IOSettings()).compute()


@pytest.mark.parametrize("kind", ["parquet", "jsonl"])
def test_the_text_field_may_be_named_like_a_reserved_column(tmp_path, kind):
    # the reader renames the text field to ``text`` before anything else sees it
    rows = [{"id": "a", "_detail": "hello there"}, {"id": "b", "_detail": "general kenobi"}]
    path = _write(tmp_path, kind, rows)
    df = read_dataset([str(path)], IOSettings(text_field="_detail")).compute()
    assert df["text"].tolist() == ["hello there", "general kenobi"]
    assert df["_reason"].isna().all()


def test_without_reserved_names_nothing_changes(tmp_path):
    rows = [{"id": f"d{i}", "text": "words", "reason": "kept as data"} for i in range(3)]
    path = _write(tmp_path, "parquet", rows)
    df = read_dataset([str(path)], IOSettings()).compute()
    assert df["reason"].tolist() == ["kept as data"] * 3 and df["_reason"].isna().all()
