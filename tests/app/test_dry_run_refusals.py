"""The dry run refuses whatever the real run would refuse after earlier stages ran (hostile pass 3,
point 9; issue 43): one line, exit 2, and the real run says the same before any work, writing nothing."""

from __future__ import annotations

import json

import pytest

from curate.app.cli import main


def write_job(tmp_path, stages: str, extra: str = "") -> str:
    data = tmp_path / "in.jsonl"
    data.write_text("".join(json.dumps({"id": str(i), "text": f"hello world document {i}"}) + "\n" for i in range(3)))
    job = tmp_path / "job.yaml"
    job.write_text(f"name: j\ninput: {data}\n{extra}stages:\n{stages}")
    return str(job)


def refused(job: str, output, capsys, dry: bool) -> str:
    """The one line both runs refuse ``job`` with; nothing written."""
    argv = ["run", job, "--output", str(output)] + (["--dry-run"] if dry else ["--cluster", "threads"])
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "Traceback" not in err, err
    assert not output.exists() if hasattr(output, "exists") else True
    return err


@pytest.mark.parametrize("dry", [True, False])
def test_an_unknown_encoding_of_substring_dedup_after_another_stage(tmp_path, capsys, dry):
    job = write_job(tmp_path, "  - normalize: {}\n  - substring_dedup: {tokenizer: 'tiktoken:nope'}\n")
    err = refused(job, tmp_path / "out", capsys, dry)
    assert "stage 2 (substring_dedup)" in err and "unknown tiktoken encoding 'nope'" in err
