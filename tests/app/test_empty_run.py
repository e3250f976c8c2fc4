"""A job whose filters leave nothing (issue 43, point 2): the run says so, and verify agrees with it.

It used to exit 0 with "output in ..." and nothing else, and `curate verify` of its tokens then
failed with "no pairs".
"""

from __future__ import annotations

from curate.app.cli import main
from tests.conftest import write_jsonl


def test_a_job_that_keeps_nothing_says_after_which_stage_and_its_tokens_verify(tmp_path, capsys):
    write_jsonl(tmp_path / "in" / "a.jsonl", [{"id": f"d{i}", "text": "too short"} for i in range(5)])
    write_jsonl(tmp_path / "in" / "b.jsonl", [{"id": f"e{i}", "text": "also short"} for i in range(3)])
    chain = tmp_path / "chain.yaml"
    chain.write_text("filters:\n  - {filter: word_count, min: 50}\n")
    job = tmp_path / "job.yaml"
    job.write_text(f"name: e\ninput: {tmp_path / 'in'}/*.jsonl\nstages:\n  - clean: {{}}\n"
                   f"  - filter: {{config: {chain}}}\n  - exact_dedup: {{}}\n"
                   "  - tokenize: {tokenizer: 'tiktoken:cl100k_base'}\n")
    assert main(["run", str(job), "--output", str(tmp_path / "out"), "--cluster", "threads"]) == 0
    out = capsys.readouterr().out
    assert "no document is left after stage 2 (02-filter): word_count=8; the stages after it had nothing to do" in out
    assert main(["verify", str(tmp_path / "out" / "04-tokenize")]) == 0
    got = capsys.readouterr()
    assert "no documents" in got.out + got.err and "no pairs" not in got.err


def test_a_run_over_an_empty_input_says_no_documents(tmp_path, capsys):  # issue 47, point 10
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "a.jsonl").write_text("")
    job = tmp_path / "job.yaml"
    job.write_text(f"input: {tmp_path / 'in'}/*.jsonl\nstages:\n  - clean: {{}}\n  - exact_dedup: {{}}\n")
    assert main(["run", str(job), "--output", str(tmp_path / "out"), "--cluster", "threads"]) == 0
    assert "no documents: stage 1 (01-clean) read none from its input" in capsys.readouterr().out
