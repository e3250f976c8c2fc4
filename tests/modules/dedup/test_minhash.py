"""The MinHash kernel against its definition: xxh32, datasketch's permutations and signatures."""

import unicodedata

import numpy as np
import pytest
import xxhash
from datasketch import MinHash

from curate.stages.dedup import minhash

TEXTS = [
    "Hello, World! This is a test of the emergency broadcast system, nothing more.",
    "",                                     # empty
    " \t\n  ",                              # whitespace only
    "...!!!",                               # punctuation only
    "two words",                            # fewer words than the n-gram
    "Ünïcödé — “quotes” ça va? 日本語のテキスト and ÉCOLE",
    "tabs\tand\nnew lines\r\nand\u00a0non-breaking\u2003spaces",
    "emoji 😀 between words 🎉 at the end 🎉",
    "repeat " * 40,                          # repeated shingles
]


def reference_signature(text, num_perm, seed, ngram, kind):
    m = MinHash(num_perm=num_perm, seed=seed, hashfunc=xxhash.xxh32_intdigest)
    m.update_batch([s.encode("utf-8") for s in minhash.shingles(text, ngram, kind)])
    return m.hashvalues


def test_xxh32_matches_xxhash():
    rng = np.random.default_rng(0)
    for n in [*range(0, 40), 63, 64, 65, 1000]:
        data = rng.integers(0, 256, n, dtype=np.uint8).tobytes()
        for seed in (0, 1, 2**32 - 1):
            assert minhash.xxh32(data, seed) == xxhash.xxh32_intdigest(data, seed), (n, seed)


def test_permutations_are_datasketchs():
    for num_perm, seed in ((128, 42), (16, 1), (256, 0)):
        a, b = minhash.permutations(num_perm, seed)
        ref = MinHash(num_perm=num_perm, seed=seed).permutations
        assert (a == ref[0]).all() and (b == ref[1]).all()
        assert a.dtype == np.uint32 and (a & 1).all()


@pytest.mark.parametrize("kind,ngram", [("word", 5), ("word", 1), ("word", 3), ("char", 5), ("char", 1)])
def test_signatures_equal_datasketch(kind, ngram):
    sig, counts = minhash.signatures(TEXTS, num_perm=64, seed=7, ngram=ngram, kind=kind)
    assert sig.shape == (len(TEXTS), 64) and sig.dtype == np.uint32
    for text, row, count in zip(TEXTS, sig, counts):
        assert (row == reference_signature(text, 64, 7, ngram, kind)).all(), text
        assert count == len(minhash.shingles(text, ngram, kind))


def test_huge_document_and_empty_partition():
    words = [f"w{i % 5000}" for i in range(300_000)]  # ~2 MB, one document
    huge = " ".join(words)
    sig, counts = minhash.signatures([huge, "small doc here"], num_perm=32, seed=1)
    assert counts[0] == len(words) - 4
    assert (sig[0] == reference_signature(huge, 32, 1, 5, "word")).all()
    sig, counts = minhash.signatures([], num_perm=32)
    assert sig.shape == (0, 32) and counts.shape == (0,)


def test_no_shingles_is_the_empty_minhash():
    sig, counts = minhash.signatures(["", "  ", "?!"], num_perm=16)
    assert (counts == 0).all()
    assert (sig == np.uint32(0xFFFFFFFF)).all()


def _independent_normalise(text):
    out, pending = [], False
    for ch in text.lower():
        cat = unicodedata.category(ch)
        if cat[0] in "PSZ" or cat == "Cc":
            pending = bool(out)
        else:
            if pending:
                out.append(" ")
                pending = False
            out.append(ch)
    return "".join(out)


def test_normalise():
    for text in TEXTS:
        assert minhash.normalise_text(text) == _independent_normalise(text), text
    assert minhash.normalise_text("Don't STOP, ok?") == "don t stop ok"
    assert minhash.normalise_text("A+B=C") == "a b c"


def test_shingles_reference():
    assert minhash.shingles("One, two. Three four five six!", 5) == ["one two three four five", "two three four five six"]
    assert minhash.shingles("two words", 5) == ["two words"]
    assert minhash.shingles("", 5) == []
    assert minhash.shingles("Abcd", 3, "char") == ["abc", "bcd"]
    assert minhash.shingles("ça", 3, "char") == ["ça"]


def test_jaccard_is_the_set_jaccard():
    a = ["the quick brown fox jumps over the lazy dog again and again", "", "same text here ok fine"]
    b = ["the quick brown fox jumps over the lazy cat again and again", "x", "same text here ok fine"]
    got = minhash.jaccard(a, b, ngram=3)
    for x, y, j in zip(a, b, got):
        sx, sy = set(minhash.shingles(x, 3)), set(minhash.shingles(y, 3))
        expected = len(sx & sy) / len(sx | sy) if sx | sy else 0.0
        assert j == pytest.approx(expected)


def test_signatures_of_shingles_equal_datasketch():
    # edge cases: shingles of different lengths around the 8-shingle blocks of the kernel (0, 1, 7, 8,
    # 9, 17), repeats, non-ASCII, an empty document, and a sliced ListArray (offsets not from 0)
    import pyarrow as pa

    rng = np.random.default_rng(3)
    docs = [[f"s{rng.integers(0, 40)} ü {k}" * int(rng.integers(1, 4)) for k in range(n)] for n in (0, 1, 7, 8, 9, 17)]
    docs.append(["same"] * 5)
    got = minhash.signatures_of_shingles(docs, num_perm=40, seed=3)
    for doc, row in zip(docs, got):
        m = MinHash(num_perm=40, seed=3, hashfunc=xxhash.xxh32_intdigest)
        m.update_batch([s.encode("utf-8") for s in doc])
        assert (row == m.hashvalues).all(), doc
    sliced = pa.array(docs, type=pa.large_list(pa.large_string()))[2:5]
    assert (minhash.signatures_of_shingles(sliced, num_perm=40, seed=3) == got[2:5]).all()


def test_signatures_of_text_equal_signatures_of_its_shingles():
    sig, _ = minhash.signatures(TEXTS, num_perm=64, seed=7)
    assert (minhash.signatures_of_shingles([minhash.shingles(t) for t in TEXTS], 64, 7) == sig).all()


def test_separator_table_cache_equals_a_fresh_build():
    # the table read back from its on-disk cache (written by an earlier call) is the one unicodedata gives
    assert (minhash.separator_table() == minhash._build_separator_table()).all()


def test_shingle_sets_give_the_true_jaccard_of_the_texts():
    """What a saved index keeps instead of texts: the same sets, so the same Jaccard, bit for bit."""
    import random

    from tests.conftest import DATA

    sentences = (DATA / "dedup" / "sentences.txt").read_text(encoding="utf-8").splitlines()
    rng = random.Random(2)
    a = [" ".join(rng.sample(sentences, rng.randint(0, 6))) for _ in range(60)] + ["", "A b", "x " * 3]
    b = [t.replace("the", "a", 2) if k % 3 else t for k, t in enumerate(a[::-1])]
    for ngram, kind in ((5, "word"), (3, "char")):
        sa, sb = minhash.shingle_sets(a, ngram, kind), minhash.shingle_sets(b, ngram, kind)
        assert (minhash.jaccard_sets(sa, sb) == minhash.jaccard(a, b, ngram, kind)).all()
        back = minhash.sets_from_binary(minhash.sets_to_binary(sa.slice(5, 20)))
        assert back.to_pylist() == sa.slice(5, 20).to_pylist()
    assert minhash.shingle_sets(["one two three"], 2).to_pylist() == [sorted(set(
        (minhash.xxh32(s.encode()) << 32) | minhash.xxh32(s.encode(), 1) for s in ["one two", "two three"]))]
