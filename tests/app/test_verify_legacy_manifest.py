"""``curate verify`` names the manifest that is really there: ``manifest.json`` in a folder an earlier
curate wrote (hostile pass 3, point 10), where it said ``_manifest.json``."""

from __future__ import annotations

import json
import os

import pytest

from curate.app.cli import main
from tests.conftest import copy_output, run_stage, write_jsonl


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("legacy")
    write_jsonl(tmp / "in.jsonl", [{"id": f"d{i}", "text": f"hello world document {i}"} for i in range(4)])
    run_stage("tokenize", {"tokenizer": "tiktoken:cl100k_base"}, tmp / "in.jsonl", tmp / "tok")
    run_stage("pack", {"seq_length": 16}, tmp / "tok", tmp / "pack")
    return tmp


def legacy_copy(written, name, tmp_path, edit=None):
    """A copy of an output with its manifest under the old name (and ``edit`` applied to it)."""

    copy = tmp_path / name
    copy_output(written / name, copy)
    manifest = json.loads((copy / "_manifest.json").read_text())
    if edit:
        edit(manifest)
    (copy / "manifest.json").write_text(json.dumps(manifest))
    os.remove(copy / "_manifest.json")
    return copy


def verify(path, capsys) -> tuple[int, str]:
    code = main(["verify", str(path)])
    out = capsys.readouterr()
    return code, out.out + out.err


@pytest.mark.parametrize("name", ["tok", "pack"])
def test_a_sound_legacy_output_names_its_manifest_as_the_vocabulary_source(written, tmp_path, capsys, name):
    code, text = verify(legacy_copy(written, name, tmp_path), capsys)
    assert code == 0, text
    assert "vocabulary size 100277 from manifest.json)" in text and "_manifest.json" not in text


def test_a_pair_missing_from_a_legacy_token_set(written, tmp_path, capsys):
    copy = legacy_copy(written, "tok", tmp_path)
    for ext in (".bin", ".idx"):
        os.remove(copy / f"part_00000{ext}")
    code, text = verify(copy, capsys)
    assert code == 1 and "part_00000.bin: missing: listed in manifest.json" in text and "_manifest.json" not in text


def test_a_dtype_code_a_legacy_manifest_contradicts(written, tmp_path, capsys):
    copy = legacy_copy(written, "tok", tmp_path, lambda m: m.update(dtype_code=8))
    code, text = verify(copy, capsys)
    assert code == 1 and "but manifest.json says 8" in text and "_manifest.json" not in text


def test_a_pack_dtype_a_legacy_manifest_contradicts(written, tmp_path, capsys):
    copy = legacy_copy(written, "pack", tmp_path, lambda m: m.update(dtype="uint16"))
    code, text = verify(copy, capsys)
    assert code == 1 and "manifest.json says uint16" in text and "_manifest.json" not in text

