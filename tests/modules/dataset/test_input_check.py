"""Preflight refusals read from the inputs' schemas (issue 31, point 4): before any stage runs."""

from __future__ import annotations

import pandas as pd
import pytest

from curate.app.cli import main


@pytest.fixture
def no_text(tmp_path):
    pd.DataFrame({"id": ["a", "b"], "content": ["hello world", "x y"]}).to_parquet(tmp_path / "in.parquet")
    (tmp_path / "job.yaml").write_text(f"name: nt\ninput: {tmp_path / 'in.parquet'}\nstages:\n  - clean: {{}}\n"
                                       "  - tokenize: {tokenizer: 'tiktoken:cl100k_base'}\n")
    return tmp_path


@pytest.mark.parametrize("dry", [True, False])
def test_a_parquet_input_without_the_text_column_is_refused_before_any_work(no_text, capsys, dry):
    argv = ["run", str(no_text / "job.yaml"), "--output", str(no_text / "out")] + (["--dry-run"] if dry else [])
    assert main(argv) == 1  # bad data, named before any work
    err = capsys.readouterr().err.strip()
    assert "in.parquet: missing_text: no 'text' column (columns: id, content" in err
    assert "--text-field" in err and "text_field" in err and "\n" not in err
    assert not (no_text / "out").exists()


def test_the_text_field_setting_makes_it_run(no_text, capsys):
    job = no_text / "job.yaml"
    job.write_text(job.read_text().replace("stages:", "io: {text_field: content}\nstages:"))
    assert main(["run", str(job), "--output", str(no_text / "out"), "--cluster", "threads"]) == 0


def test_a_stage_command_is_refused_too(no_text, capsys):
    assert main(["clean", "--input", str(no_text / "in.parquet"), "--output", str(no_text / "o")]) == 1
    assert "--text-field" in capsys.readouterr().err
    assert main(["clean", "--input", str(no_text / "in.parquet"), "--output", str(no_text / "o"),
                 "--on-error", "skip", "--cluster", "threads"]) == 0  # the user's choice: rows become rejects


def test_a_hub_tokenizer_not_in_the_cache_is_refused_offline_before_any_work(no_text, capsys, monkeypatch,
                                                                             tmp_path):
    from huggingface_hub import constants

    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))  # an empty cache
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    job = no_text / "job.yaml"
    job.write_text(job.read_text().replace("stages:", "io: {text_field: content}\nstages:")
                   .replace("'tiktoken:cl100k_base'", "no-such-org/no-such-tokenizer"))
    for dry in ([], ["--dry-run"]):
        assert main(["run", str(job), "--output", str(no_text / "out"), *dry]) == 2
        err = capsys.readouterr().err.strip()
        assert "tokenizer no-such-org/no-such-tokenizer: not in the local Hugging Face cache" in err
        assert "HF_HUB_OFFLINE" in err and "\n" not in err
        assert not (no_text / "out").exists()
