"""The dry run refuses whatever the real run would refuse after earlier stages ran (hostile pass 3,
point 9; issue 43): one line, exit 2, and the real run says the same before any work, writing nothing."""

from __future__ import annotations

import json

import pytest

from curate.app.cli import main
from curate.stages.stage import Stage


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


@pytest.fixture
def not_json(tmp_path):
    (tmp_path / "tok").mkdir()
    (tmp_path / "tok" / "tokenizer.json").write_text("not json")
    (tmp_path / "filters.yaml").write_text(f"filters:\n  - {{filter: token_count, tokenizer: {tmp_path / 'tok'}, min: 1}}\n")
    return tmp_path


@pytest.mark.parametrize("dry", [True, False])
@pytest.mark.parametrize("stage", ["tokenize: {{tokenizer: {tok}}}", "filter: {{config: {filters}}}"])
def test_a_tokenizer_json_that_is_not_json_is_named_wherever_a_stage_takes_a_tokenizer(not_json, capsys, dry, stage):
    stage = stage.format(tok=not_json / "tok", filters=not_json / "filters.yaml")
    job = write_job(not_json, f"  - normalize: {{}}\n  - {stage}\n")
    err = refused(job, not_json / "out", capsys, dry)
    assert f"{not_json / 'tok' / 'tokenizer.json'} is not a JSON tokenizer file" in err and "stage 2" in err


@pytest.mark.parametrize("dry", [True, False])
@pytest.mark.parametrize("stage", ["filter", "tag"])
def test_a_token_count_filter_whose_hub_tokenizer_is_not_cached_is_refused_offline(tmp_path, capsys, monkeypatch, dry,
                                                                                  stage):
    from huggingface_hub import constants

    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))  # an empty cache
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    (tmp_path / "filters.yaml").write_text("filters:\n  - {filter: token_count, tokenizer: no-such-org/no-such-tok, min: 1}\n")
    job = write_job(tmp_path, f"  - normalize: {{}}\n  - {stage}: {{config: {tmp_path / 'filters.yaml'}}}\n")
    err = refused(job, tmp_path / "out", capsys, dry)
    assert "tokenizer no-such-org/no-such-tok: not in the local Hugging Face cache, and HF_HUB_OFFLINE is set" in err


TOKENIZE = "  - tokenize: {tokenizer: 'tiktoken:cl100k_base'}\n"


@pytest.mark.parametrize("dry", [True, False])
def test_pack_before_tokenize(tmp_path, capsys, dry):
    err = refused(write_job(tmp_path, "  - normalize: {}\n  - pack: {seq_length: 64}\n" + TOKENIZE), tmp_path / "out",
                  capsys, dry)
    assert "stage 2 (pack) reads a token set" in err and "stage 1 (normalize) writes documents" in err
    assert "after tokenize" in err


@pytest.mark.parametrize("dry", [True, False])
def test_extract_warc_in_the_middle_of_a_job(tmp_path, capsys, dry):
    err = refused(write_job(tmp_path, "  - normalize: {}\n  - extract_warc: {}\n"), tmp_path / "out", capsys, dry)
    assert "stage 2 (extract_warc) reads raw files" in err and "stage 1 (normalize) writes documents" in err
    assert "first stage" in err and "input of its own" in err


@pytest.mark.parametrize("dry", [True, False])
def test_a_document_stage_after_tokenize(tmp_path, capsys, dry):
    """Issue 43: it passed the dry run, and the real run failed with missing_text ... --text-field."""
    err = refused(write_job(tmp_path, TOKENIZE + "  - normalize: {}\n"), tmp_path / "out", capsys, dry)
    assert "stage 2 (normalize) reads documents" in err and "stage 1 (tokenize) writes a token set" in err
    assert "before tokenize" in err and "missing_text" not in err and "--text-field" not in err


def test_an_extraction_with_an_input_of_its_own_may_follow_another_stage(tmp_path, capsys):
    from tests.conftest import ROOT

    warc = ROOT / "jobs" / "data" / "mirrors.warc.gz"
    job = write_job(tmp_path, f"  - normalize: {{}}\n  - extract_warc: {{input: {warc}}}\n")
    assert main(["run", job, "--output", str(tmp_path / "out"), "--dry-run"]) == 0


def test_tokenize_then_pack_passes(tmp_path, capsys):
    job = write_job(tmp_path, "  - normalize: {}\n" + TOKENIZE + "  - pack: {seq_length: 64}\n")
    assert main(["run", job, "--output", str(tmp_path / "out"), "--dry-run"]) == 0


@pytest.mark.parametrize("dry", [True, False])
@pytest.mark.parametrize("setting, words", [
    ("bos_id: 999999999", "bos_id 999999999 is outside the vocabulary (size 100,277)"),
    ("pad_id: 100277", "pad_id 100277 is outside the vocabulary"),
    ("dtype: uint16", "dtype uint16 cannot hold the ids of a 100,277-id vocabulary"),
])
def test_pack_ids_outside_the_vocabulary_of_the_tokenize_before_it(tmp_path, capsys, dry, setting, words):
    job = write_job(tmp_path, "  - normalize: {}\n" + TOKENIZE + f"  - pack: {{seq_length: 64, {setting}}}\n")
    err = refused(job, tmp_path / "out", capsys, dry)
    assert "stage 3 (pack)" in err and words in err


@pytest.mark.parametrize("dry", [True, False])
def test_an_output_below_a_regular_file(tmp_path, capsys, dry):
    (tmp_path / "afile").write_text("mine")
    err = refused(write_job(tmp_path, "  - normalize: {}\n"), tmp_path / "afile" / "out", capsys, dry)
    assert f"--output {tmp_path / 'afile' / 'out'}: {tmp_path / 'afile'} is a file, not a directory" in err
    assert (tmp_path / "afile").read_text() == "mine"


def test_a_stage_command_with_an_output_below_a_regular_file(tmp_path, capsys):
    (tmp_path / "afile").write_text("mine")
    write_job(tmp_path, "  - normalize: {}\n")  # for its input
    assert main(["normalize", "--input", str(tmp_path / "in.jsonl"), "--output", str(tmp_path / "afile" / "o"),
                 "--cluster", "threads"]) == 2
    assert "is a file, not a directory" in capsys.readouterr().err


def _sysfs() -> bool:
    try:
        with open("/proc/self/mounts") as f:
            return any(line.split()[1:3] == ["/sys", "sysfs"] for line in f)
    except OSError:
        return False


@pytest.mark.skipif(not _sysfs(), reason="needs /sys mounted as sysfs (Linux)")
@pytest.mark.parametrize("dry", [True, False])
def test_an_output_under_sys(tmp_path, capsys, dry):
    err = refused(write_job(tmp_path, "  - normalize: {}\n"), "/sys/curate-test-out", capsys, dry)
    assert "--output /sys/curate-test-out: nothing can be created in /sys (a sysfs filesystem" in err


class OwnTokenReader(Stage):
    """A user's stage written before stages said what they read: it reads raw files of its own."""

    name = "own_token_reader"
    needs = ()
    reads_raw_files = True


def test_a_users_raw_file_stage_that_says_not_what_it_reads_is_not_checked(tmp_path, capsys):
    job = write_job(tmp_path, TOKENIZE + f"  - {__name__}:OwnTokenReader: {{}}\n")
    assert main(["run", job, "--output", str(tmp_path / "out"), "--dry-run"]) == 0, capsys.readouterr().err
