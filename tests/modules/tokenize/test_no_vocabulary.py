"""Tokenizer folders without a vocabulary (issue 40, point 2).

A folder with only config.json, or only tokenizer_config.json (with or without
special_tokens_map.json), used to load as a tokenizer of 5 special tokens: every word became [UNK],
`verify` said OK, exit 0; a gpt2 config.json alone dropped every document as `empty`. Now the run
and the dry run refuse such a folder before any work (exit 2, naming it and the files a tokenizer
needs), and `verify` flags a pair whose tokens are mostly one id.
"""

from __future__ import annotations

import json

import pytest

from curate.app.cli import main
from curate.stages.tokenize.verify import verify
from tests.conftest import run_stage, write_jsonl

FOLDERS = {
    "config_only": {"config.json": {"model_type": "bert"}},
    "gpt2_config_only": {"config.json": {"model_type": "gpt2"}},
    "tokenizer_config_only": {"tokenizer_config.json": {"tokenizer_class": "BertTokenizer"}},
    "tokenizer_config_and_special_tokens": {
        "tokenizer_config.json": {"tokenizer_class": "BertTokenizer"},
        "special_tokens_map.json": {"unk_token": "[UNK]", "sep_token": "[SEP]"}},
}


def _folder(tmp_path, files):
    d = tmp_path / "tok"
    d.mkdir()
    for name, content in files.items():
        (d / name).write_text(json.dumps(content))
    return d


@pytest.fixture
def docs(tmp_path):
    return write_jsonl(tmp_path / "in" / "a.jsonl", [{"id": f"d{i}", "text": f"hello world number {i}"} for i in range(4)])


@pytest.mark.parametrize("kind", sorted(FOLDERS))
@pytest.mark.parametrize("dry", [False, True])
def test_a_folder_without_a_vocabulary_is_refused_before_any_work(tmp_path, capsys, docs, kind, dry):
    tok = _folder(tmp_path, FOLDERS[kind])
    job = tmp_path / "job.yaml"
    job.write_text(f"name: t\ninput: {docs}\nstages:\n  - clean: {{}}\n  - tokenize: {{tokenizer: {tok}}}\n")
    argv = ["run", str(job), "--output", str(tmp_path / "out"), "--cluster", "threads"] + (["--dry-run"] if dry else [])
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and f"tokenizer {tok}: no vocabulary" in err
    assert "tokenizer.json" in err and "vocab.txt" in err
    assert not (tmp_path / "out").exists()


def test_a_stage_command_is_refused_too(tmp_path, capsys, docs):
    tok = _folder(tmp_path, FOLDERS["tokenizer_config_only"])
    assert main(["tokenize", "--input", str(docs), "--output", str(tmp_path / "o"), "--tokenizer", str(tok)]) == 2
    assert "no vocabulary" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()


def test_a_tokenizer_json_that_is_not_json_is_named(tmp_path, capsys, docs):
    tok = tmp_path / "tok"
    tok.mkdir()
    (tok / "tokenizer.json").write_text("{not json")
    for dry in ([], ["--dry-run"]):
        job = tmp_path / "job.yaml"
        job.write_text(f"name: t\ninput: {docs}\nstages:\n  - clean: {{}}\n  - tokenize: {{tokenizer: {tok}}}\n")
        assert main(["run", str(job), "--output", str(tmp_path / "out"), *dry]) == 2
        err = capsys.readouterr().err.strip()
        assert f"{tok / 'tokenizer.json'} is not a JSON tokenizer file" in err and "\n" not in err


def test_json_that_the_tokenizers_library_refuses_is_named_before_any_work(tmp_path):
    # the settings check parses tokenizer.json with tokenizers itself (the load reuses that parse):
    # valid JSON that is no tokenizer fails there too, naming the file, not later in the run
    from curate.stages.errors import SettingsError
    from curate.stages.tokenize.load import check_spec

    tok = tmp_path / "tok"
    tok.mkdir()
    (tok / "tokenizer.json").write_text('{"model": 1}')
    with pytest.raises(SettingsError, match="tokenizer.json cannot be read by the tokenizers library"):
        check_spec(str(tok))


def test_a_class_that_brings_its_own_vocabulary_needs_no_file(tmp_path):
    from curate.stages.tokenize.load import check_spec, load_tokenizer

    tok = _folder(tmp_path, {"tokenizer_config.json": {"tokenizer_class": "ByT5Tokenizer"}})
    check_spec(str(tok))  # ByT5's vocabulary is the 256 bytes
    assert load_tokenizer(str(tok)).encode_batch(["hi"]) == [[107, 108]]


def _word_level(path):
    """A real tokenizer whose vocabulary knows one word: everything else is [UNK]."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    backend = Tokenizer(models.WordLevel({"[UNK]": 0, "the": 1, "<eod>": 2}, unk_token="[UNK]"))
    backend.pre_tokenizer = pre_tokenizers.Whitespace()
    PreTrainedTokenizerFast(tokenizer_object=backend, unk_token="[UNK]", eos_token="<eod>").save_pretrained(str(path))
    return str(path)


def test_verify_flags_a_pair_that_is_mostly_one_id(tmp_path):
    docs = [{"id": f"d{k}", "text": " ".join(f"word{k}x{j}" for j in range(40))} for k in range(20)]
    write_jsonl(tmp_path / "in" / "a.jsonl", docs)
    tok = _word_level(tmp_path / "tok")
    run_stage("tokenize", {"tokenizer": tok}, str(tmp_path / "in" / "a.jsonl"), tmp_path / "out")
    report = verify(str(tmp_path / "out"))
    assert len(report.problems) == 1, report.problems
    assert "part_00000.bin: one id: id 0 is 97.6% of its 820 tokens" in report.problems[0]
    assert main(["verify", str(tmp_path / "out")]) == 1


def test_verify_passes_real_text_and_a_pair_of_one_word_documents(tmp_path):
    # one-token documents: the end-of-document id is half the tokens, never more
    write_jsonl(tmp_path / "in" / "a.jsonl", [{"id": f"d{k}", "text": "the"} for k in range(300)])
    run_stage("tokenize", {"tokenizer": _word_level(tmp_path / "tok")}, str(tmp_path / "in" / "a.jsonl"), tmp_path / "out")
    assert verify(str(tmp_path / "out")).ok
