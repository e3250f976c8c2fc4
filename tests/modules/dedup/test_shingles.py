"""Shingle set files: sets read back by byte ranges in any order, in bounded reads; Jaccard by index."""

import io

import numpy as np
import pytest

from curate.stages.dedup import minhash, shingles
from curate.stages.errors import DataError


def _file(rng, n):
    sets = [np.unique(rng.integers(0, 1 << 40, size=int(rng.integers(0, 40)), dtype=np.uint64)) for _ in range(n)]
    counts = np.array([len(s) for s in sets], dtype=np.int64)
    starts = np.r_[0, np.cumsum(counts)[:-1]]
    raw = np.concatenate(sets).astype("<u8").tobytes() if n else b""
    return sets, starts, counts, raw


@pytest.mark.parametrize("gap,span", [(1 << 16, 1 << 20), (0, 1), (3, 50)])
def test_read_ranges_any_order_with_repeats(monkeypatch, gap, span):
    monkeypatch.setattr(shingles, "READ_GAP", gap)
    monkeypatch.setattr(shingles, "READ_SPAN", span)
    rng = np.random.default_rng(0)
    sets, starts, counts, raw = _file(rng, 200)
    reads = []

    class Counting(io.BytesIO):
        def readinto(self, b):
            reads.append(len(b) // 8)
            return super().readinto(b)

    want = rng.integers(0, 200, size=300)  # any order, repeats, empty sets among them
    values, offsets = shingles.read_ranges(Counting(raw), starts[want], counts[want])
    assert [values[offsets[k]:offsets[k + 1]].tolist() for k in range(len(want))] == [sets[i].tolist() for i in want]
    # a read is one wanted set, or several within the span: never more than the span or one set
    assert max(reads) <= max(span, counts.max())
    values, offsets = shingles.read_ranges(Counting(raw), starts[:0], counts[:0])
    assert len(values) == 0 and offsets.tolist() == [0]


def test_a_short_file_is_named():
    rng = np.random.default_rng(1)
    sets, starts, counts, raw = _file(rng, 20)
    last = int(np.flatnonzero(counts)[-1])
    with pytest.raises(DataError, match="where.u64: shorter than its table says"):
        shingles.read_ranges(io.BytesIO(raw[:-8]), starts[[last]], counts[[last]], "where.u64")


def test_jaccard_indexed_equals_the_texts():
    texts = ["a b c d e f g h", "a b c d e f g x", "", "q r s t u v w"]
    sets = minhash.shingle_sets(texts, 3)
    values, offsets = minhash.list_buffers(sets)
    ia, ib = np.array([0, 0, 2, 3, 1]), np.array([1, 3, 2, 3, 0])
    got = shingles.jaccard_indexed(values, offsets, ia, values, offsets, ib)
    want = minhash.jaccard([texts[i] for i in ia], [texts[i] for i in ib], 3)
    assert got.tolist() == want.tolist() and got[3] == 1.0 and got[2] == 0.0


@pytest.mark.parametrize("kind,ngram", [("word", 5), ("char", 4)])
def test_signatures_and_sets_in_one_pass_equal_the_two_kernels(kind, ngram):
    texts = ["The quick brown fox jumps over the lazy dog. " * 3, "", None, "short", "a b c d e f g h i j k",
             "Übergrößenträger straße — ñandú, 東京 タワー", "  ..  "]
    sig, counts, values, offsets = shingles.signatures_and_sets(texts, 32, 7, ngram, kind)
    want_sig, want_counts = minhash.signatures([t or "" for t in texts], 32, 7, ngram, kind)
    sets = minhash.shingle_sets([t or "" for t in texts], ngram, kind).to_pylist()
    assert (sig == want_sig).all() and (counts == want_counts).all()
    assert [values[offsets[k]:offsets[k + 1]].tolist() for k in range(len(texts))] == sets
