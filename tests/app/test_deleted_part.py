"""A part file deleted by hand from a finished stage (issue 43, point 4): the dry run says the stage runs
again, naming the file, and the real run computes it again, byte for byte, instead of failing later."""

import json
import re

from curate.app.cli import main


def test_a_deleted_part_is_computed_again(tmp_path, capsys):
    src = tmp_path / "in.jsonl"
    src.write_text("".join(json.dumps({"id": str(i), "text": f"document number {i}"}) + "\n" for i in range(30)))
    job = tmp_path / "job.yaml"
    job.write_text(f"input: {src}\noutput: {tmp_path / 'out'}\nio: {{blocksize: 200B}}\n"
                   "stages:\n  - clean: {}\n  - exact_dedup: {}\n")
    assert main(["run", str(job), "--cluster", "threads"]) == 0
    parts = sorted((tmp_path / "out" / "01-clean").glob("part-*"))
    assert len(parts) >= 2
    before = parts[1].read_bytes()
    parts[1].unlink()
    capsys.readouterr()
    assert main(["run", str(job), "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert f"run again (1 listed file(s) missing: {parts[1].name})" in out, out
    assert re.search(r"exact_dedup +02-exact_dedup +01-clean +skip \(up to date\)", out), out
    assert main(["run", str(job), "--cluster", "threads"]) == 0
    capsys.readouterr()
    assert parts[1].read_bytes() == before
    summary = (tmp_path / "out" / "02-exact_dedup" / "_manifest.json").read_text()
    assert json.loads(summary)["counts"]["out"] == 30
