"""Megatron-LM's indexed dataset: one ``.bin`` file of tokens and one ``.idx`` file that indexes it.

This is the format ``megatron.core.datasets.indexed_dataset.IndexedDatasetBuilder`` writes and
``IndexedDataset`` reads (the "mmap" format). A pair is named by its prefix: ``P.bin`` and ``P.idx``.

``.bin``: the tokens of every sequence, concatenated, each one ``dtype`` little-endian, no header,
no padding. Its size is ``sum(sequence lengths) * itemsize``.

``.idx`` (all integers little-endian), byte by byte::

    offset        size     field
    0             9        magic  b"MMIDIDX\\x00\\x00"
    9             8        version, <Q, always 1
    17            1        dtype code, <B: 1 uint8, 2 int8, 3 int16, 4 int32, 5 int64, 6 float64,
                           7 float32, 8 uint16 (we write 8 or 4)
    18            8        S = sequence count, <Q
    26            8        D = document count, <Q: the length of the document index array below,
                           so the number of documents plus one
    34            4*S      sequence lengths in tokens, int32
    34+4S         8*S      sequence pointers: byte offset of each sequence in .bin, int64, the
                           exclusive running sum of length*itemsize (the first is 0)
    34+12S        8*D      document indices, int64: document k is sequences [idx[k], idx[k+1]),
                           so idx[0] = 0, non-decreasing, idx[D-1] = S
    34+12S+8D              end of file (multimodal datasets append S int8 modes; we never do)

We write one sequence per document, so the document indices are ``[0, 1, ..., n]`` and D = S + 1.
Our readers accept the general form (several sequences per document) so they can check and merge
files that Megatron's own tools wrote.

Invariants (checked by :func:`check_pair`): magic, version and dtype code as above; the file size
is exactly the one the counts imply; lengths >= 0; pointers equal the running sum of the lengths;
document indices start at 0, never decrease and end at S; the .bin size equals the last pointer
plus the last length times the itemsize. The dtype is uint16 when the tokenizer's full size is below
65500, else int32 (Megatron's ``DType.optimal_dtype``).
"""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass

import numpy as np

from curate.stages.errors import DataError

MAGIC = b"MMIDIDX\x00\x00"
VERSION = 1
#: magic, version, dtype code, sequence count, document count: 34 bytes
HEADER = struct.Struct("<9sQBQQ")
DTYPES: dict[int, np.dtype] = {
    1: np.dtype(np.uint8), 2: np.dtype(np.int8), 3: np.dtype(np.int16), 4: np.dtype(np.int32),
    5: np.dtype(np.int64), 6: np.dtype(np.float64), 7: np.dtype(np.float32), 8: np.dtype(np.uint16),
}
CODES = {dt: code for code, dt in DTYPES.items()}
#: Megatron picks uint16 below this vocabulary size (a margin under 65536 for added tokens)
UINT16_LIMIT = 65500
#: how many elements one streaming step handles (merge, range scan): memory stays flat
CHUNK = 1 << 20


def token_dtype(vocab_size: int) -> np.dtype:
    """uint16 when the tokenizer's full size is below 65500, else int32 (Megatron's rule)."""
    return np.dtype(np.uint16) if vocab_size < UINT16_LIMIT else np.dtype(np.int32)


def dtype_code(dtype) -> int:
    return CODES[np.dtype(dtype)]


def header_bytes(dtype, sequence_count: int, document_count: int) -> bytes:
    return HEADER.pack(MAGIC, VERSION, dtype_code(dtype), sequence_count, document_count)


def index_bytes(lengths, dtype, document_indices=None) -> bytes:
    """The whole ``.idx`` for sequences of these lengths (one per document unless indices are given)."""
    dtype = np.dtype(dtype)
    lengths = np.asarray(lengths, dtype=np.int64)
    if document_indices is None:
        document_indices = np.arange(len(lengths) + 1, dtype=np.int64)
    document_indices = np.asarray(document_indices, dtype=np.int64)
    pointers = np.zeros(len(lengths), dtype=np.int64)
    if len(lengths) > 1:
        np.cumsum(lengths[:-1] * dtype.itemsize, out=pointers[1:])
    return b"".join((
        header_bytes(dtype, len(lengths), len(document_indices)),
        lengths.astype("<i4").tobytes(),
        pointers.astype("<i8").tobytes(),
        document_indices.astype("<i8").tobytes(),
    ))


class PairWriter:
    """Streams documents into a ``.bin``; :meth:`index_bytes` gives the matching ``.idx`` at the end.

    With ``sink`` (a writable binary file, e.g. from ``curate.stages.output.Output.open``) the caller
    owns the files: tokens go to the sink and the caller writes the index. Without it the writer
    writes ``prefix.bin``/``prefix.idx`` itself through ``curate.stages.output.Output`` (temporary names,
    renamed on :meth:`commit`, the ``.bin`` first), so a killed run never leaves a half file.
    """

    def __init__(self, prefix: str, dtype, sink=None):
        self.prefix = prefix
        self.dtype = np.dtype(dtype)
        if self.dtype not in CODES:
            raise ValueError(f"{prefix}: unsupported token dtype {self.dtype}")
        self._own = None
        if sink is None:  # own files: through the output abstraction, which owns temporaries too
            from curate.stages.output import Output

            self._out = Output.at(os.path.dirname(os.path.abspath(prefix)))
            self._own = self._out.open(os.path.basename(prefix) + ".bin")
            sink = self._own.__enter__()
        self._bin = sink
        self._lengths: list[np.ndarray] = []
        self.documents = 0
        self.tokens = 0

    def add(self, tokens: np.ndarray, lengths: np.ndarray) -> None:
        """Append documents: ``tokens`` concatenated (already of the pair's dtype), one length each."""
        if tokens.dtype != self.dtype:
            raise TypeError(f"{self.prefix}: tokens are {tokens.dtype}, the pair is {self.dtype}")
        if int(lengths.sum()) != len(tokens):
            raise ValueError(f"{self.prefix}: lengths add up to {int(lengths.sum())}, got {len(tokens)} tokens")
        if len(lengths) and int(lengths.max()) > np.iinfo(np.int32).max:
            raise ValueError(f"{self.prefix}: a document has more than 2**31-1 tokens")
        # the native byte order is little-endian on every platform we run on; make sure anyway
        self._bin.write(tokens.astype(self.dtype.newbyteorder("<"), copy=False).data)
        self._lengths.append(np.asarray(lengths, dtype=np.int64))
        self.documents += len(lengths)
        self.tokens += len(tokens)

    def index_bytes(self) -> bytes:
        lengths = np.concatenate(self._lengths) if self._lengths else np.zeros(0, dtype=np.int64)
        return index_bytes(lengths, self.dtype)

    def stats(self) -> dict:
        return {"name": os.path.basename(self.prefix), "documents": self.documents, "tokens": self.tokens,
                "bytes": self.tokens * self.dtype.itemsize}

    def commit(self) -> dict:
        """Own files only: put the ``.bin`` in place, write the index; return the pair's stats."""
        self._own.__exit__(None, None, None)
        self._own = None
        idx = self._out.write_bytes(os.path.basename(self.prefix) + ".idx", self.index_bytes())
        return {**self.stats(), "idx_bytes": idx["bytes"]}

    def abort(self) -> None:
        if self._own is None:
            return
        self._bin.abandon()
        self._own.__exit__(None, None, None)
        self._own = None

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        if exc_type is not None:
            self.abort()
        return None


# --------------------------------------------------------------------------- reading


@dataclass(frozen=True)
class Index:
    """A parsed ``.idx``: the three arrays (views into the file's bytes) and the dtype."""

    name: str
    dtype_code: int
    sequence_lengths: np.ndarray
    sequence_pointers: np.ndarray
    document_indices: np.ndarray

    @property
    def dtype(self) -> np.dtype:
        return DTYPES[self.dtype_code]

    @property
    def sequence_count(self) -> int:
        return len(self.sequence_lengths)

    @property
    def documents(self) -> int:
        return max(len(self.document_indices) - 1, 0)

    @property
    def tokens(self) -> int:
        return int(self.sequence_lengths.sum(dtype=np.int64))

    @property
    def bin_size(self) -> int:
        """The ``.bin`` size these lengths imply."""
        return self.tokens * self.dtype.itemsize


class IndexFormatError(DataError):
    """A ``.idx`` that cannot be parsed; the message names the file and the failed check."""


def parse_index(buf: bytes, name: str) -> Index:
    """Parse a whole ``.idx`` file's bytes; raise :class:`IndexFormatError` naming the file and the check."""
    if len(buf) == 0:
        raise IndexFormatError(f"{name}: empty file")
    if len(buf) < HEADER.size:
        raise IndexFormatError(f"{name}: header: file is {len(buf)} bytes, shorter than the {HEADER.size}-byte header")
    magic, version, code, seqs, docs = HEADER.unpack_from(buf, 0)
    if magic != MAGIC:
        raise IndexFormatError(f"{name}: header: magic is {magic!r}, expected {MAGIC!r}")
    if version != VERSION:
        raise IndexFormatError(f"{name}: version: {version}, expected {VERSION}")
    if code not in DTYPES:
        raise IndexFormatError(f"{name}: dtype code: {code} is not a Megatron dtype code ({sorted(DTYPES)})")
    expected = HEADER.size + 12 * seqs + 8 * docs
    if len(buf) != expected:
        raise IndexFormatError(
            f"{name}: index size: {len(buf)} bytes, but {seqs} sequences and {docs} document indices "
            f"need {expected}"
        )
    off = HEADER.size
    lengths = np.frombuffer(buf, dtype="<i4", count=seqs, offset=off)
    pointers = np.frombuffer(buf, dtype="<i8", count=seqs, offset=off + 4 * seqs)
    doc_idx = np.frombuffer(buf, dtype="<i8", count=docs, offset=off + 12 * seqs)
    return Index(name, code, lengths, pointers, doc_idx)


def check_index(index: Index) -> list[str]:
    """Problems with an index on its own: lengths, pointers and document indices that disagree."""
    name, problems = index.name, []
    lengths, pointers, doc_idx = index.sequence_lengths, index.sequence_pointers, index.document_indices
    if (lengths < 0).any():
        k = int(np.argmax(lengths < 0))
        problems.append(f"{name}: sequence lengths: sequence {k} has negative length {int(lengths[k])}")
    expected = np.zeros(len(lengths), dtype=np.int64)
    if len(lengths) > 1:
        np.cumsum(lengths[:-1].astype(np.int64) * index.dtype.itemsize, out=expected[1:])
    if not np.array_equal(pointers, expected):
        k = int(np.argmax(pointers != expected))
        problems.append(
            f"{name}: sequence pointers: sequence {k} starts at byte {int(pointers[k])}, "
            f"but the lengths before it put it at {int(expected[k])}"
        )
    if len(doc_idx) == 0:
        problems.append(f"{name}: document indices: empty (at least [0] is required)")
    else:
        if doc_idx[0] != 0:
            problems.append(f"{name}: document indices: first is {int(doc_idx[0])}, expected 0")
        if len(doc_idx) > 1 and (np.diff(doc_idx) < 0).any():
            k = int(np.argmax(np.diff(doc_idx) < 0))
            problems.append(f"{name}: document indices: decrease after document {k}")
        if doc_idx[-1] != len(lengths):
            problems.append(
                f"{name}: document indices: last is {int(doc_idx[-1])}, expected the sequence count {len(lengths)}"
            )
    return problems


def check_pair(index: Index, bin_size: int, bin_name: str) -> list[str]:
    """Problems with an index and the size of its ``.bin``."""
    problems = check_index(index)
    if bin_size == 0:
        problems.append(f"{bin_name}: empty file")
    elif bin_size != index.bin_size:
        problems.append(
            f"{bin_name}: bin size: {bin_size} bytes, but the index's {index.tokens} tokens of "
            f"{index.dtype} need {index.bin_size}"
        )
    return problems


def read_index(path: str, fs=None) -> Index:
    """Read and parse ``path`` (local, or on the fsspec filesystem ``fs``)."""
    if fs is None:
        with open(path, "rb") as f:
            buf = f.read()
    else:
        buf = fs.cat_file(path)
    return parse_index(buf, path)


def read_document(bin_file, index: Index, doc: int, limit: int | None = None) -> np.ndarray:
    """Tokens of document ``doc`` (at most ``limit``) from an open binary file object."""
    first, last = int(index.document_indices[doc]), int(index.document_indices[doc + 1])
    if first == last:
        return np.zeros(0, dtype=index.dtype)
    count = int(index.sequence_lengths[first:last].sum())
    if limit is not None:
        count = min(count, limit)
    bin_file.seek(int(index.sequence_pointers[first]))
    data = bin_file.read(count * index.dtype.itemsize)
    return np.frombuffer(data, dtype=index.dtype.newbyteorder("<"))


def scan_range(bin_file, dtype, vocab_size: int, chunk: int = CHUNK, hasher=None, counter=None):
    """Stream a ``.bin``: (ids >= vocab_size or < 0, position of the first one or None, largest id).

    ``hasher`` (e.g. ``xxhash.xxh3_128()``) sees every byte on the way: a checksum without a second read;
    ``counter`` (an :class:`IdCounts`) sees every chunk of ids.
    """
    dtype = np.dtype(dtype).newbyteorder("<")
    bad, first, largest, pos = 0, None, -1, 0
    while True:
        data = bin_file.read(chunk * dtype.itemsize)
        if not data:
            break
        if hasher is not None:
            hasher.update(data)
        usable = len(data) - len(data) % dtype.itemsize
        tokens = np.frombuffer(data[:usable], dtype=dtype)
        if len(tokens):
            wrong = (tokens >= vocab_size) | (tokens < 0)
            n = int(wrong.sum())
            if n and first is None:
                first = pos + int(np.argmax(wrong))
            bad += n
            largest = max(largest, int(tokens.max()))
            if counter is not None:
                counter.update(tokens)
        pos += len(tokens)
    return bad, first, largest


class IdCounts:
    """How often each id occurs in a stream of chunks, for the most common one (:meth:`top`).

    Ids are counted with ``np.bincount`` while they stay below ``limit`` (a vocabulary fits: 2^22
    counters are 32 MiB); a stream with larger ids (floats, not tokens) stops being counted."""

    def __init__(self, limit: int = 1 << 22):
        self.limit, self.total, self.counts = limit, 0, np.zeros(0, dtype=np.int64)

    def update(self, ids: np.ndarray) -> None:
        if self.counts is None or not len(ids):
            return
        if ids.dtype.kind not in "iu" or int(ids.max()) >= self.limit or int(ids.min()) < 0:
            self.counts = None
            return
        got = np.bincount(ids, minlength=len(self.counts))
        got[:len(self.counts)] += self.counts
        self.counts, self.total = got, self.total + len(ids)

    def top(self) -> tuple[int, int, int] | None:
        """(the most common id, its count, all ids counted), or None when nothing was counted."""
        if self.counts is None or not self.total:
            return None
        i = int(np.argmax(self.counts))
        return i, int(self.counts[i]), self.total
