"""The verify gate: every check fails with a line naming the file and the check."""

import json
import struct

import numpy as np
import pytest

from curate.stages.errors import SettingsError
from curate.stages.tokenize.verify import verify
from tests.conftest import copy_output, run_stage, write_jsonl


@pytest.fixture(scope="module")
def good(tmp_path_factory):
    """A tokenized output with 3 pairs (cl100k_base, int32); copied by each test before damage."""
    base = tmp_path_factory.mktemp("verify")
    for k in range(3):
        write_jsonl(base / "in" / f"f{k}.jsonl", [{"id": f"{k}-{j}", "text": f"document {k}.{j} text"} for j in range(5)])
    run_stage("tokenize", {"tokenizer": "tiktoken:cl100k_base"}, str(base / "in" / "*.jsonl"), base / "out")
    return base / "out"


@pytest.fixture
def out(good, tmp_path):
    return copy_output(good, tmp_path / "out")


def test_good_output(out):
    r = verify(str(out))
    assert r.ok, r.problems
    assert r.vocab_size == 100277 and r.vocab_source == "_manifest.json"
    assert r.sets == {"part": {"files": 3, "documents": 15, "tokens": r.sets["part"]["tokens"], "bytes":
                               r.sets["part"]["tokens"] * 4, "dtype": "int32"}}
    name, length, tokens = r.first
    assert name == "part_00000" and tokens[-1] == 100257 and len(tokens) == length


def only(problems, text):
    assert len(problems) == 1, problems
    assert text in problems[0], problems
    return problems[0]


def test_missing_success(out):
    (out / "_SUCCESS").unlink()
    line = only(verify(str(out)).problems, "missing _SUCCESS")
    assert line.startswith(str(out / "_SUCCESS"))
    from curate.stages import dataset
    from curate.stages.output import unit_files

    # the names verify checks are the writer's own, not a copy that could drift
    assert (unit_files("")["success"], unit_files("")["manifest"]) == (dataset.SUCCESS, dataset.MANIFEST)


def test_missing_partner(out):
    (out / "part_00001.bin").unlink()
    only(verify(str(out)).problems, f"{out}/part_00001.bin: missing partner")
    (out / "part_00002.idx").unlink()
    assert any(f"{out}/part_00002.idx: missing partner" in p for p in verify(str(out)).problems)


def test_pair_listed_in_manifest_but_gone(out):
    (out / "part_00001.bin").unlink()
    (out / "part_00001.idx").unlink()
    only(verify(str(out)).problems, "part_00001.bin: missing: listed in _manifest.json")


def test_truncated_idx(out):
    data = (out / "part_00001.idx").read_bytes()
    (out / "part_00001.idx").write_bytes(data[:-5])
    only(verify(str(out)).problems, f"{out}/part_00001.idx: index size")


def test_empty_files(out):
    (out / "part_00000.idx").write_bytes(b"")
    (out / "part_00002.bin").write_bytes(b"")
    problems = verify(str(out)).problems
    assert f"{out}/part_00000.idx: empty file" in problems
    assert f"{out}/part_00002.bin: empty file" in problems


@pytest.mark.parametrize("offset,value,check", [(0, b"N", "header"), (9, struct.pack("<Q", 7), "version"),
                                                (17, bytes([99]), "dtype code")])
def test_bad_header(out, offset, value, check):
    p = out / "part_00000.idx"
    data = bytearray(p.read_bytes())
    data[offset:offset + len(value)] = value
    p.write_bytes(bytes(data))
    only(verify(str(out)).problems, f"part_00000.idx: {check}")


def test_dtype_differs_from_manifest(out):
    p = out / "part_00000.idx"
    data = bytearray(p.read_bytes())
    data[17] = 5  # int64: a valid code, but the sizes no longer agree either
    p.write_bytes(bytes(data))
    problems = verify(str(out)).problems
    assert any("part_00000.bin: bin size" in x for x in problems), problems


def test_lengths_disagree_with_bin(out):
    with open(out / "part_00001.bin", "ab") as f:
        f.write(b"\0\0\0\0")
    only(verify(str(out)).problems, f"{out}/part_00001.bin: bin size")


def test_out_of_range_token(out):
    p = out / "part_00002.bin"
    data = bytearray(p.read_bytes())
    data[8:12] = struct.pack("<i", 100277)  # the third token of the partition's first document
    p.write_bytes(bytes(data))
    line = only(verify(str(out)).problems, f"{out}/part_00002.bin: token id range")
    assert "first at token 2, document 0" in line
    # a smaller vocabulary from the command line catches ordinary ids too
    assert len(verify(str(out), vocab_size=1000).problems) == 3


def test_negative_token_without_vocabulary(out):
    manifest = json.loads((out / "_manifest.json").read_text())
    del manifest["vocab_size"]
    (out / "_manifest.json").write_text(json.dumps(manifest))
    p = out / "part_00000.bin"
    data = bytearray(p.read_bytes())
    data[0:4] = struct.pack("<i", -3)
    p.write_bytes(bytes(data))
    r = verify(str(out))
    assert r.vocab_size is None
    only(r.problems, "token ids negative")


def test_single_pair_and_errors(out, tmp_path):
    r = verify(str(out / "part_00001"))
    assert r.ok and r.sets["part_00001"]["documents"] == 5
    with pytest.raises(SettingsError, match="no such directory"):
        verify(str(tmp_path / "nothing"))
    with pytest.raises(SettingsError, match="no pairs with prefix 'train'"):
        verify(str(out), prefix="train")


def test_directory_without_pairs(tmp_path):
    (tmp_path / "_SUCCESS").write_bytes(b"")
    problems = verify(str(tmp_path)).problems
    assert any("no pairs" in p for p in problems), problems
    assert any("missing manifest" in p for p in problems), problems


def test_mixed_dtypes(tmp_path):
    from curate.stages.tokenize import megatron

    for name, dt in (("part_00000", np.uint16), ("part_00001", np.int32)):
        with megatron.PairWriter(str(tmp_path / name), dt) as w:
            w.add(np.array([1, 2], dtype=dt), np.array([2]))
            w.commit()
    (tmp_path / "_SUCCESS").write_bytes(b"")
    problems = verify(str(tmp_path)).problems
    # hand-made pairs: no manifest says they belong together, and they mix dtypes
    assert len(problems) == 2 and "missing manifest" in problems[0] and "mix dtypes" in problems[1], problems


# --------------------------------------------------------------------------- the manifest's own fields


@pytest.fixture(scope="module")
def small_vocab(tmp_path_factory):
    """A uint16 output (a 451-id byte-level BPE), 2 pairs of 4 documents."""
    from tests.modules.tokenize.helpers import make_bpe_dir

    base = tmp_path_factory.mktemp("verify-u16")
    for k in range(2):
        write_jsonl(base / "in" / f"f{k}.jsonl", [{"id": f"{k}-{j}", "text": f"The quick brown fox {k}.{j}"}
                                                   for j in range(4)])
    run_stage("tokenize", {"tokenizer": make_bpe_dir(base / "bpe")}, str(base / "in" / "*.jsonl"), base / "out")
    return base / "out"


def edited(small_vocab, tmp_path, edit):
    out = copy_output(small_vocab, tmp_path / "out")
    manifest = json.loads((out / "_manifest.json").read_text())
    edit(manifest)
    (out / "_manifest.json").write_text(json.dumps(manifest))
    return out


@pytest.mark.parametrize("edit,field", [
    (lambda m: m["totals"].update(documents=m["totals"]["documents"] + 1), "totals.documents: 9"),
    (lambda m: m.update(dtype="uint32"), "dtype: 'uint32', but part_00000.idx says uint16"),
    (lambda m: m["tokenizer"].update(vocab_size=100000), "tokenizer.vocab_size: 100000 means int32 tokens"),
    (lambda m: m.update(vocab_size=60000), "vocab_size: 60000, but tokenizer.vocab_size says 451"),
    (lambda m: m["tokenizer"].update(vocab_size=m["tokenizer"]["vocab_size"] // 4), "tokenizer.vocab_size: 112, but"),
    (lambda m: m["sets"]["train"].update(tokens=3), "sets.train.tokens: 3"),
    (lambda m: m["counts"].update(out=7), "counts.out: 7"),
], ids=["documents", "dtype", "vocabulary", "vocab_size", "below-an-id", "sets", "counts"])
def test_an_edited_manifest_field_is_one_line_naming_it(small_vocab, tmp_path, edit, field):
    assert verify(str(small_vocab)).ok
    out = edited(small_vocab, tmp_path, edit)
    line = only(verify(str(out)).problems, field)
    assert line.startswith(f"{out}/_manifest.json: ")


def test_an_edited_dtype_fails_curate_verify(small_vocab, tmp_path, capsys):
    from curate.app.cli import main

    out = edited(small_vocab, tmp_path, lambda m: m.update(dtype="uint32"))
    assert main(["verify", str(out)]) == 1
    err = capsys.readouterr().err.splitlines()
    assert err[0].startswith(f"{out}/_manifest.json: dtype: 'uint32'") and err[1].endswith("1 problem(s)"), err


def test_an_edited_index_size_names_the_idx(small_vocab, tmp_path):
    out = edited(small_vocab, tmp_path, lambda m: m["files"][1].update(idx_bytes=3))
    only(verify(str(out)).problems, f"{out}/part_00001.idx: idx_bytes: 122, but the manifest says 3")
