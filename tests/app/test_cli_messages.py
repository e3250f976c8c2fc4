"""One-line messages a newcomer meets (issue 43, point 9)."""

from __future__ import annotations

import subprocess

from curate.app.cli import main
from tests.conftest import CURATE, ROOT


def test_dry_run_on_a_stage_command_is_one_prefix_and_a_hint(tmp_path, capsys):
    assert main(["clean", "--input", str(tmp_path), "--output", str(tmp_path / "o"), "--dry-run"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == "curate: error: unrecognized arguments: --dry-run (--dry-run checks a job: curate run JOB --dry-run)"


def test_curate_filters_shows_each_description_whole():
    out = subprocess.run([*CURATE, "filters"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    line = next(x for x in out.splitlines() if x.startswith("boilerplate_strings"))
    assert line.rstrip().endswith("a document without any text scores 1.0.")


def test_a_setting_typo_says_did_you_mean(tmp_path, capsys):  # issue 43, point 4
    (tmp_path / "a.jsonl").write_text('{"text": "x"}\n')
    job = tmp_path / "job.yaml"
    job.write_text(f"input: {tmp_path}/a.jsonl\nstages:\n  - fuzzy_dedup: {{treshold: 0.8}}\n")
    assert main(["run", str(job), "--output", str(tmp_path / "out"), "--dry-run"]) == 2
    err = capsys.readouterr().err.strip()
    assert "unknown setting 'treshold'" in err and err.endswith("; did you mean 'threshold'?"), err


def test_a_filter_name_typo_says_did_you_mean(tmp_path, capsys):
    (tmp_path / "a.jsonl").write_text('{"text": "x"}\n')
    chain = tmp_path / "chain.yaml"
    chain.write_text("filters:\n  - {filter: word_cont, min: 3}\n  - {filter: urls, max: 0.2, url_patern: nemo}\n")
    job = tmp_path / "job.yaml"
    job.write_text(f"input: {tmp_path}/a.jsonl\nstages:\n  - filter: {{config: {chain}}}\n")
    assert main(["run", str(job), "--output", str(tmp_path / "out"), "--dry-run"]) == 2
    err = capsys.readouterr().err.strip()
    assert "unknown filter 'word_cont'" in err and err.endswith("; did you mean 'word_count'?"), err
    chain.write_text("filters:\n  - {filter: urls, max: 0.2, url_patern: nemo}\n")
    assert main(["run", str(job), "--output", str(tmp_path / "out"), "--dry-run"]) == 2
    assert capsys.readouterr().err.strip().endswith("; did you mean 'url_pattern'?")


def test_a_bare_tiktoken_name_says_how_to_name_it(tmp_path, monkeypatch, capsys):  # issue 43, point 4
    import huggingface_hub.constants

    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    (tmp_path / "a.jsonl").write_text('{"text": "x"}\n')
    assert main(["tokenize", "--input", str(tmp_path / "a.jsonl"), "--output", str(tmp_path / "o"),
                 "--tokenizer", "cl100k_base"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.endswith("for tiktoken's encoding write 'tiktoken:cl100k_base'"), err


def test_a_runaway_regex_ends_the_run_naming_pattern_and_document(tmp_path, capsys):  # issue 47, point 1
    import json

    (tmp_path / "a.jsonl").write_text(json.dumps({"id": "ok", "text": "plain words"}) + "\n"
                                      + json.dumps({"id": "evil", "text": "a" * 40 + "b"}) + "\n")
    (tmp_path / "f.yaml").write_text("filters:\n  - {filter: regex, pattern: '(a|aa)+$', timeout: 0.05}\n")
    code = main(["filter", "--input", str(tmp_path / "a.jsonl"), "--output", str(tmp_path / "out"),
                 "--config", str(tmp_path / "f.yaml"), "--cluster", "threads"])
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert code == 1, err
    assert "pattern '(a|aa)+$' ran past its time limit" in err and "document 'evil'" in err, err
