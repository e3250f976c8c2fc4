"""Inputs one step off the README's path (issue 43, point 3).

A broken symbolic link matched by the input glob was skipped in silence (exit 0, nothing in the
manifest), a folder named like a data file too; a plain folder of JSONL was refused as "an
unfinished stage output". Now the first two are refused before any work, naming the path, and a
folder curate did not write is read as it is (an unfinished curate output still is refused).
"""

from __future__ import annotations

import os

import pytest

from curate.app.cli import main
from curate.stages.dataset import expand_named
from curate.stages.errors import SettingsError
from tests.conftest import read_output, write_jsonl


@pytest.fixture
def folder(tmp_path):
    write_jsonl(tmp_path / "my-data" / "a.jsonl", [{"id": "a", "text": "hello there"}])
    write_jsonl(tmp_path / "my-data" / "sub" / "b.jsonl", [{"id": "b", "text": "general kenobi"}])
    return tmp_path / "my-data"


def test_a_plain_folder_of_jsonl_is_read(folder, tmp_path):
    assert main(["clean", "--input", str(folder), "--output", str(tmp_path / "out"), "--cluster", "threads"]) == 0
    assert sorted(read_output(tmp_path / "out")["id"]) == ["a", "b"]


def test_an_unfinished_curate_output_is_still_refused(folder, tmp_path, capsys):
    (folder / "_manifest.json").write_text("{}")
    assert main(["clean", "--input", str(folder), "--output", str(tmp_path / "out")]) == 2
    assert "no _SUCCESS in this directory" in capsys.readouterr().err


@pytest.mark.parametrize("how", ["glob", "folder"])
def test_a_broken_link_is_refused_naming_it(folder, tmp_path, capsys, how):
    os.symlink(tmp_path / "gone.jsonl", folder / "c.jsonl")
    spec = str(folder / "*.jsonl") if how == "glob" else str(folder)
    job = tmp_path / "job.yaml"
    job.write_text(f"name: l\ninput: '{spec}'\nstages:\n  - clean: {{}}\n")
    for argv in (["clean", "--input", spec], ["run", str(job), "--dry-run"], ["run", str(job)]):
        assert main([*argv, "--output", str(tmp_path / "out")]) == 2
        err = capsys.readouterr().err.strip()
        assert f"input {folder / 'c.jsonl'}: a broken symbolic link" in err and "\n" not in err
    assert not (tmp_path / "out").exists()


def test_a_folder_named_like_a_data_file_is_refused(folder):
    (folder / "d.jsonl").mkdir()
    with pytest.raises(SettingsError, match=r"d\.jsonl: a directory, not a data file"):
        expand_named([str(folder / "*.jsonl")])
