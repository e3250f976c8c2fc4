"""The .bin/.idx format: byte identity with Megatron-Core's own files, and the checks on broken ones."""

import json
import struct
from pathlib import Path

import numpy as np
import pytest

from curate.stages.tokenize import megatron
from tests.modules.tokenize.helpers import read_pair

GOLDEN = Path(__file__).resolve().parents[2] / "data" / "tokenize"
DOCS = json.loads((GOLDEN / "golden_docs.json").read_text())


def write(prefix, docs, dtype, batches=1):
    with megatron.PairWriter(str(prefix), dtype) as w:
        for part in np.array_split(np.arange(len(docs)), batches):
            chunk = [docs[i] for i in part]
            tokens = np.array([t for d in chunk for t in d], dtype=dtype)
            w.add(tokens, np.array([len(d) for d in chunk], dtype=np.int64))
        return w.commit()


@pytest.mark.parametrize("name,key,dtype", [("u16", "uint16", np.uint16), ("i32", "int32", np.int32)])
@pytest.mark.parametrize("batches", [1, 2])
def test_pair_is_byte_identical_to_megatron_core(tmp_path, name, key, dtype, batches):
    stats = write(tmp_path / "p", DOCS[key], dtype, batches)
    assert (tmp_path / "p.bin").read_bytes() == (GOLDEN / f"{name}.bin").read_bytes()
    assert (tmp_path / "p.idx").read_bytes() == (GOLDEN / f"{name}.idx").read_bytes()
    assert stats["documents"] == len(DOCS[key])
    assert stats["tokens"] == sum(map(len, DOCS[key]))
    assert stats["bytes"] == (tmp_path / "p.bin").stat().st_size


@pytest.mark.parametrize("name,key", [("u16", "uint16"), ("i32", "int32"), ("u16_merged", "uint16")])
def test_independent_reader_reads_the_golden_files(name, key):
    code, docs = read_pair(GOLDEN / name)
    assert code == {"uint16": 8, "int32": 4}[key]
    assert docs == DOCS[key]


def test_index_bytes_layout_by_hand():
    idx = megatron.index_bytes([3, 1], np.uint16)
    assert idx == (b"MMIDIDX\x00\x00" + struct.pack("<Q", 1) + bytes([8]) + struct.pack("<QQ", 2, 3)
                   + struct.pack("<2i", 3, 1) + struct.pack("<2q", 0, 6) + struct.pack("<3q", 0, 1, 2))


def test_dtype_rule_is_megatrons():
    assert megatron.token_dtype(500) == np.uint16
    assert megatron.token_dtype(65499) == np.uint16
    assert megatron.token_dtype(65500) == np.int32
    assert megatron.token_dtype(100277) == np.int32


def test_parse_and_check_a_good_pair():
    index = megatron.parse_index((GOLDEN / "u16.idx").read_bytes(), "u16.idx")
    assert index.documents == 4 and index.tokens == 13 and index.dtype == np.uint16
    assert megatron.check_pair(index, (GOLDEN / "u16.bin").stat().st_size, "u16.bin") == []


@pytest.mark.parametrize("mutate,check", [
    (lambda b: b"", "empty file"),
    (lambda b: b[:20], "header"),
    (lambda b: b"XXIDIDX\x00\x00" + b[9:], "header"),
    (lambda b: b[:9] + struct.pack("<Q", 2) + b[17:], "version"),
    (lambda b: b[:17] + bytes([9]) + b[18:], "dtype code"),
    (lambda b: b[:-8], "index size"),
])
def test_broken_index_names_the_check(mutate, check):
    with pytest.raises(megatron.IndexFormatError, match=f"^x.idx: {check}"):
        megatron.parse_index(mutate((GOLDEN / "u16.idx").read_bytes()), "x.idx")


def test_inconsistent_arrays_are_reported():
    good = megatron.index_bytes([3, 1], np.uint16)
    # second pointer says 4 bytes, the lengths say 6
    bad = good[:34 + 8] + struct.pack("<2q", 0, 4) + good[34 + 8 + 16:]
    problems = megatron.check_pair(megatron.parse_index(bad, "x.idx"), 8, "x.bin")
    assert any("x.idx: sequence pointers" in p for p in problems)
    # document indices that do not end at the sequence count
    bad = good[:-8] + struct.pack("<q", 5)
    assert any("document indices" in p for p in megatron.check_index(megatron.parse_index(bad, "x.idx")))
    # .bin shorter than the lengths say, and an empty .bin
    index = megatron.parse_index(good, "x.idx")
    assert megatron.check_pair(index, 6, "x.bin") == ["x.bin: bin size: 6 bytes, but the index's 4 tokens of uint16 need 8"]
    assert megatron.check_pair(index, 0, "x.bin") == ["x.bin: empty file"]


def test_writer_refuses_wrong_dtype_and_cleans_up(tmp_path):
    with pytest.raises(TypeError):
        with megatron.PairWriter(str(tmp_path / "p"), np.uint16) as w:
            w.add(np.array([1, 2], dtype=np.int32), np.array([2]))
    assert list(tmp_path.iterdir()) == []


def test_scan_range_streams_in_chunks(tmp_path):
    import io

    data = np.array([1, 2, 500, 3, 700, 4], dtype=np.uint16).tobytes()
    bad, first, largest = megatron.scan_range(io.BytesIO(data), np.uint16, 400, chunk=2)
    assert (bad, first, largest) == (2, 2, 700)


def test_read_document(tmp_path):
    write(tmp_path / "p", DOCS["int32"], np.int32)
    index = megatron.read_index(str(tmp_path / "p.idx"))
    with open(tmp_path / "p.bin", "rb") as f:
        assert megatron.read_document(f, index, 2).tolist() == DOCS["int32"][2]
        assert megatron.read_document(f, index, 2, limit=3).tolist() == DOCS["int32"][2][:3]
