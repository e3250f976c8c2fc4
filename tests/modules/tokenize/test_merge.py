"""Merging a directory's pairs: Megatron's result, by streaming."""

import json
import tracemalloc
from pathlib import Path

import numpy as np
import pytest

from curate.stages.errors import DataError, SettingsError
from curate.stages.tokenize import megatron
from curate.stages.tokenize.merge import _Source, merge, merge_sources
from tests.conftest import run_stage, write_jsonl
from tests.modules.tokenize.helpers import read_pair, write_token_set

GOLDEN = Path(__file__).resolve().parents[2] / "data" / "tokenize"
DOCS = json.loads((GOLDEN / "golden_docs.json").read_text())


def write_pairs(folder, groups, dtype):
    return write_token_set(folder, {f"part_{i:05d}": docs for i, docs in enumerate(groups)}, dtype)


def test_merge_is_megatrons_add_index(tmp_path):
    docs = DOCS["uint16"]
    folder = write_pairs(tmp_path / "d", [docs[:2], docs[2:]], np.uint16)
    stats = merge(str(folder), str(tmp_path / "m"))
    assert (tmp_path / "m.bin").read_bytes() == (GOLDEN / "u16_merged.bin").read_bytes()
    assert (tmp_path / "m.idx").read_bytes() == (GOLDEN / "u16_merged.idx").read_bytes()
    assert stats["documents"] == 4 and stats["files"] == 2


@pytest.mark.parametrize("chunk", [1, 2, 3, 1000])
def test_chunk_boundaries_do_not_matter(tmp_path, chunk):
    docs = DOCS["int32"] * 3
    folder = write_pairs(tmp_path / "d", [docs[:5], docs[5:6], docs[6:]], np.int32)
    sources = [_Source(megatron_fs(), str(folder / f"part_{i:05d}.idx"), str(folder / f"part_{i:05d}.bin"))
               for i in range(3)]
    merge_sources(sources, str(tmp_path / "m"), chunk=chunk)
    assert read_pair(tmp_path / "m") == (4, docs)


def megatron_fs():
    import fsspec

    return fsspec.filesystem("file")


def test_merge_equals_a_single_partition_write(tmp_path):
    texts = [f"text {i} " * (i % 7 + 1) for i in range(30)]
    for k in range(3):
        write_jsonl(tmp_path / "many" / f"f{k}.jsonl", [{"id": str(i), "text": t} for i, t in enumerate(texts) if i % 3 == k])
    ordered = [t for k in range(3) for i, t in enumerate(texts) if i % 3 == k]
    write_jsonl(tmp_path / "one" / "all.jsonl", [{"id": str(i), "text": t} for i, t in enumerate(ordered)])
    run_stage("tokenize", {"tokenizer": "tiktoken:cl100k_base"}, str(tmp_path / "many" / "*.jsonl"), tmp_path / "a")
    run_stage("tokenize", {"tokenizer": "tiktoken:cl100k_base"}, str(tmp_path / "one" / "all.jsonl"), tmp_path / "b")
    assert len(list((tmp_path / "a").glob("*.idx"))) == 3
    merge(str(tmp_path / "a"), str(tmp_path / "merged"))
    assert (tmp_path / "merged.bin").read_bytes() == (tmp_path / "b" / "part_00000.bin").read_bytes()
    assert (tmp_path / "merged.idx").read_bytes() == (tmp_path / "b" / "part_00000.idx").read_bytes()


def peak_merge_memory(folder, n_files, docs_per_file, out):
    rng = np.random.default_rng(0)
    pairs = {}
    for i in range(n_files):
        lengths = rng.integers(1, 4, docs_per_file)
        pairs[f"part_{i:05d}"] = {"tokens": rng.integers(0, 500, int(lengths.sum())), "lengths": lengths}
    write_token_set(folder, pairs, np.uint16)
    tracemalloc.start()
    try:
        merge(str(folder), str(out))
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_memory_does_not_grow_with_the_data(tmp_path):
    small = peak_merge_memory(tmp_path / "small", 2, 50_000, tmp_path / "s")
    large = peak_merge_memory(tmp_path / "large", 16, 50_000, tmp_path / "l")
    # 8 times the data (16 indexes of 1 MB), about the same peak: one index and a few chunks at a time
    assert large < small * 1.3, (small, large)
    index = megatron.read_index(str(tmp_path / "l.idx"))
    assert index.documents == 16 * 50_000
    assert megatron.check_pair(index, (tmp_path / "l.bin").stat().st_size, "l.bin") == []


def test_sets_need_a_prefix_and_broken_input_is_refused(tmp_path):
    write_token_set(tmp_path / "d", {"train_00000": [[1, 2]], "part_00001": [[3]]}, np.uint16)
    with pytest.raises(SettingsError, match="several sets"):
        merge(str(tmp_path / "d"), str(tmp_path / "m"))
    merge(str(tmp_path / "d"), str(tmp_path / "m"), prefix="train")
    assert read_pair(tmp_path / "m") == (8, [[1, 2]])
    (tmp_path / "d" / "part_00001.bin").unlink()
    with pytest.raises(DataError, match="missing partner"):
        merge(str(tmp_path / "d"), str(tmp_path / "m2"), prefix="part")
    (tmp_path / "d" / "_SUCCESS").unlink()
    with pytest.raises(DataError, match="_SUCCESS"):
        merge(str(tmp_path / "d"), str(tmp_path / "m3"), prefix="train")
    assert not (tmp_path / "m2.bin").exists() and not (tmp_path / "m3.bin").exists()


def test_mixed_dtypes_are_refused(tmp_path):
    write_token_set(tmp_path / "d", {"part_00000": ([[1, 2]], np.uint16), "part_00001": ([[1, 2]], np.int32)})
    with pytest.raises(DataError, match="mix"):
        merge(str(tmp_path / "d"), str(tmp_path / "m"))


def test_a_failed_merge_leaves_no_file(tmp_path):
    """Both outputs go through the output abstraction: an error while writing the index (here a .bin
    shorter than its index says, found while streaming) leaves neither a final name nor a temp file."""
    docs = DOCS["uint16"]
    folder = write_pairs(tmp_path / "d", [docs[:2], docs[2:]], np.uint16)
    sources = [_Source(megatron_fs(), str(folder / f"part_{i:05d}.idx"), str(folder / f"part_{i:05d}.bin"))
               for i in range(2)]
    sources[1].bin_size -= 2
    (tmp_path / "out").mkdir()
    with pytest.raises(DataError, match="part_00001.bin: bin size"):
        merge_sources(sources, str(tmp_path / "out" / "m"))
    assert list((tmp_path / "out").iterdir()) == []
    merge_sources(sources[:1], str(tmp_path / "out" / "m"))
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["m.bin", "m.idx"]
