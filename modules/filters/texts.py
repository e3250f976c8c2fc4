"""What filters measure, computed once per batch and shared by every filter of a chain.

Scoring a partition document by document would be far too slow in Python, so filters score a
:class:`Texts`: one batch of documents as an Arrow array plus the pieces filters need (words, lines,
paragraphs, repeated n-grams), each computed on first use. :class:`Pieces` are the flat pieces of a
batch with the document each belongs to, so per-document counts, sums and maxima are one
``bincount`` or ``reduceat``. :func:`ratio` never divides by zero: a document with nothing to
measure gets the filter's fixed score.
"""

from __future__ import annotations

from functools import cached_property

import numpy as np
import pandas as pd

#: odd 64-bit multipliers of the n-gram rolling hash (fixed: results must not vary between runs)
_MIX = np.array([0x9E3779B97F4A7C15, 0xC2B2AE3D27D4EB4F, 0x165667B19E3779F9], dtype=np.uint64)


def to_arrow(text):
    """A large_string Arrow array of the texts, missing values as empty strings."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if isinstance(text, pd.Series):
        arr = pa.array(text.array) if isinstance(text.dtype, pd.StringDtype) else pa.array(text, pa.large_string())
    else:
        arr = pa.array(list(text), pa.large_string())
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    if arr.type != pa.large_string():
        arr = arr.cast(pa.large_string())
    if arr.null_count:
        arr = pc.fill_null(arr, "")
    return arr


def ratio(num, den, empty: float) -> np.ndarray:
    """num / den, and ``empty`` where den is 0 (no division by zero, no warning)."""
    num = np.asarray(num, dtype=np.float64)
    den = np.asarray(den, dtype=np.float64)
    out = np.full(np.broadcast(num, den).shape, float(empty))
    np.divide(num, den, out=out, where=den > 0)
    return out


class Pieces:
    """Flat pieces (words, lines, ...) of a batch: ``values`` and the document index of each."""

    def __init__(self, values, doc: np.ndarray, n_docs: int):
        self.values = values  # pyarrow large_string array
        self.doc = doc
        self.n_docs = n_docs

    @classmethod
    def from_lists(cls, lists, n_docs: int, drop_empty: bool = False) -> Pieces:
        import pyarrow.compute as pc

        values = pc.list_flatten(lists)
        doc = pc.list_parent_indices(lists).to_numpy().astype(np.int64)
        pieces = cls(values, doc, n_docs)
        if drop_empty:
            pieces = pieces.where(pieces.length > 0)
        return pieces

    def where(self, mask: np.ndarray) -> Pieces:
        import pyarrow as pa

        return Pieces(self.values.filter(pa.array(mask)), self.doc[mask], self.n_docs)

    def __len__(self) -> int:
        return len(self.doc)

    @cached_property
    def length(self) -> np.ndarray:
        import pyarrow.compute as pc

        return pc.utf8_length(self.values).to_numpy().astype(np.int64)

    @cached_property
    def count(self) -> np.ndarray:
        """Pieces per document."""
        return np.bincount(self.doc, minlength=self.n_docs)

    def sum(self, x) -> np.ndarray:
        return np.bincount(self.doc, weights=np.asarray(x, dtype=np.float64), minlength=self.n_docs)

    def max(self, x, empty: float = 0.0) -> np.ndarray:
        """Per-document maximum of ``x`` (pieces are in document order); ``empty`` for none."""
        out = np.full(self.n_docs, float(empty))
        if len(self.doc):
            starts = np.flatnonzero(np.r_[True, self.doc[1:] != self.doc[:-1]])
            out[self.doc[starts]] = np.maximum.reduceat(np.asarray(x, dtype=np.float64), starts)
        return out

    def match(self, pattern: str) -> np.ndarray:
        """Bool per piece: the RE2 ``pattern`` matches somewhere in it."""
        import pyarrow.compute as pc

        return pc.match_substring_regex(self.values, pattern).to_numpy(zero_copy_only=False)

    @cached_property
    def stripped(self):
        import pyarrow.compute as pc

        return pc.utf8_trim_whitespace(self.values)

    @cached_property
    def codes(self) -> np.ndarray:
        """An id per piece, equal for equal strings (exact: a dictionary encoding, not a hash)."""
        import pyarrow.compute as pc

        return pc.dictionary_encode(self.values).indices.to_numpy().astype(np.int64)

    @cached_property
    def first(self) -> np.ndarray:
        """True for the first occurrence of each distinct piece within its document."""
        key = (self.doc << 32) | self.codes
        return ~pd.Series(key).duplicated().to_numpy()


class Texts:
    """One batch of documents and the features filters share, each computed once on first use."""

    def __init__(self, text):
        self.arr = to_arrow(text)
        self.n = len(self.arr)
        self._ngrams: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        self._memo: dict = {}

    def in_language(self, language: str | None) -> Texts:
        """These texts with the words of ``language`` (None: whitespace words, ``self``), computed once
        per batch and language (:mod:`curate.stages.filters.words`)."""
        if language is None:
            return self
        return self.memo(("language", language), lambda t: Segmented(t.arr, language))

    def memo(self, key, compute):
        """A feature some filters share (e.g. C4's line analysis), computed once per batch."""
        if key not in self._memo:
            self._memo[key] = compute(self)
        return self._memo[key]

    # characters ------------------------------------------------------------------------------

    @cached_property
    def nchar(self) -> np.ndarray:
        import pyarrow.compute as pc

        return pc.utf8_length(self.arr).to_numpy().astype(np.int64)

    @cached_property
    def _buffers(self) -> tuple[np.ndarray, np.ndarray]:
        """(UTF-8 bytes of the whole batch, n+1 offsets into them)."""
        offsets = np.frombuffer(self.arr.buffers()[1], dtype=np.int64)[self.arr.offset:self.arr.offset + self.n + 1]
        data = self.arr.buffers()[2]
        data = np.frombuffer(data, dtype=np.uint8) if data is not None else np.zeros(0, np.uint8)
        return data, offsets

    @cached_property
    def nbytes(self) -> np.ndarray:
        return np.diff(self._buffers[1])

    def count_ascii(self, chars: str) -> np.ndarray:
        """Occurrences per document of any of the ASCII ``chars`` (a byte lookup: no regex needed,
        and exact, since ASCII bytes never occur inside a multi-byte UTF-8 sequence)."""
        table = np.zeros(256, dtype=bool)
        table[list(chars.encode("ascii"))] = True
        return self.sum_bytes(table)

    def sum_bytes(self, table: np.ndarray) -> np.ndarray:
        """Per document, the number of bytes whose ``table`` entry is True."""
        data, offsets = self._buffers
        lo, hi = offsets[0], offsets[-1]
        hits = table[data[lo:hi]]
        out = np.zeros(self.n, dtype=np.int64)
        sizes = np.diff(offsets)
        nonempty = np.flatnonzero(sizes > 0)
        if len(nonempty):
            out[nonempty] = np.add.reduceat(hits, offsets[nonempty] - lo, dtype=np.int64)
        return out

    def count(self, pattern: str) -> np.ndarray:
        """Non-overlapping matches per document of an RE2 ``pattern``."""
        import pyarrow.compute as pc

        return pc.count_substring_regex(self.arr, pattern).to_numpy().astype(np.int64)

    def matched_chars(self, pattern: str) -> np.ndarray:
        """Characters per document inside matches of ``pattern``."""
        import pyarrow.compute as pc

        rest = pc.utf8_length(pc.replace_substring_regex(self.arr, pattern, "")).to_numpy()
        return self.nchar - rest

    def contains(self, pattern: str, lower: bool = False) -> np.ndarray:
        import pyarrow.compute as pc

        arr = self.lower if lower else self.arr
        return pc.match_substring_regex(arr, pattern).to_numpy(zero_copy_only=False)

    @cached_property
    def lower(self):
        import pyarrow.compute as pc

        return pc.utf8_lower(self.arr)

    # pieces ----------------------------------------------------------------------------------

    @cached_property
    def words(self) -> Pieces:
        """Whitespace-separated words, as ``str.split()`` gives them."""
        import pyarrow.compute as pc

        return Pieces.from_lists(pc.utf8_split_whitespace(self.arr), self.n, drop_empty=True)

    @cached_property
    def lines(self) -> Pieces:
        """Every line (split on ``\\n``), blank ones included: an empty document has one empty line."""
        import pyarrow.compute as pc

        return Pieces.from_lists(pc.split_pattern(self.arr, "\n"), self.n)

    @cached_property
    def nonblank_lines(self) -> Pieces:
        """Lines with something other than whitespace (NeMo's "sentences"), not stripped."""
        import pyarrow.compute as pc

        lines = self.lines
        return lines.where(pc.utf8_length(lines.stripped).to_numpy() > 0)

    @cached_property
    def paragraphs(self) -> Pieces:
        """Pieces between blank lines (split on ``\\n\\n``, as NeMo Curator does)."""
        import pyarrow.compute as pc

        return Pieces.from_lists(pc.split_pattern(self.arr, "\n\n"), self.n)

    def ngrams(self, n: int) -> tuple[np.ndarray, np.ndarray]:
        """(positions, keys) of the word n-grams that occur at least twice in their document:
        the word position each starts at (ascending) and a 64-bit key of (n-gram, document).
        Every other n-gram of the batch occurs once.

        An n-gram can only repeat where its first n-1 words repeat, so each level starts from
        the previous level's positions, and the work shrinks quickly as n grows. Keys are a
        polynomial rolling hash of exact word ids; two different n-grams share a key with
        probability about 2**-64 per pair, negligible next to the heuristics' own precision.
        """
        if n in self._ngrams:
            return self._ngrams[n]
        words = self.words
        doc = words.doc
        codes = self.memo("word_codes_u64", lambda t: t.words.codes.astype(np.uint64) + np.uint64(1))
        if n == 1:
            pos = np.arange(len(doc))
            keys = codes * _MIX[0] + doc.astype(np.uint64) * _MIX[1]
        else:
            prev_pos, prev_keys = self.ngrams(n - 1)
            end = prev_pos + n - 1
            fits = end < len(doc)
            fits[fits] &= doc[end[fits]] == doc[prev_pos[fits]]
            pos = prev_pos[fits]
            keys = prev_keys[fits] * _MIX[2] + codes[pos + n - 1]
        repeated = pd.Series(keys).duplicated(keep=False).to_numpy()
        self._ngrams[n] = (pos[repeated], keys[repeated])
        return self._ngrams[n]

    @cached_property
    def word_cumlen(self) -> np.ndarray:
        return np.concatenate([[0], np.cumsum(self.words.length)])


class Segmented(Texts):
    """Texts whose words come from a segmenter (Chinese, Japanese): every word-based feature (counts,
    lengths, n-grams) follows them."""

    def __init__(self, text, language: str):
        super().__init__(text)
        self.language = language

    @cached_property
    def words(self) -> Pieces:
        import pyarrow as pa

        from curate.stages.filters.words import segment

        lists = pa.array(segment(self.arr.to_pylist(), self.language), pa.large_list(pa.large_string()))
        return Pieces.from_lists(lists, self.n, drop_empty=True)
