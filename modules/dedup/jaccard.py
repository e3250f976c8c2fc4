"""Shingle sets and their true Jaccard similarity: what fuzzy dedup checks a MinHash candidate pair
with, and what a saved index keeps instead of the texts.

A set is a document's sorted distinct 64-bit shingle hashes (xxh32 seed 0 in the high half, seed 1
in the low half); the shingles are :mod:`curate.stages.dedup.shingling`'s. The kernels read the
texts from their Arrow buffers as the signature kernel does; the sets travel as ``list<uint64>``
Arrow arrays, or as binary where Dask shuffles do not move Arrow lists.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from curate.stages.dedup.hashing import U32, _xxh32
from curate.stages.dedup.shingling import (
    WORD,
    _buffers,
    _count_units,
    _shingle_spans,
    as_large_strings,
    normalise,
)

# Module-level so numba can cache the machine code next to this file (closures are not cached);
# compiling happens on the first call, not at import.


@njit(cache=True)
def _shingle_set(data, s0, e0, ngram, word, starts, ends):
    """Sorted distinct 64-bit shingle hashes (two xxh32 seeds) of data[s0:e0]."""
    m = _shingle_spans(data, s0, e0, ngram, word, starts, ends)
    h = np.empty(m, dtype=np.uint64)
    for j in range(m):
        h[j] = (_xxh32(data, starts[j], ends[j], 0) << U32) | _xxh32(data, starts[j], ends[j], 1)
    h.sort()
    u = 0
    for j in range(m):
        if j == 0 or h[j] != h[j - 1]:
            h[u] = h[j]
            u += 1
    return h[:u]

@njit(cache=True)
def _jaccard_pairs(data_a, off_a, data_b, off_b, ngram, word, out):
    for d in range(len(off_a) - 1):
        sa, ea, sb, eb = off_a[d], off_a[d + 1], off_b[d], off_b[d + 1]
        cap = max(_count_units(data_a, sa, ea, word), _count_units(data_b, sb, eb, word))
        starts = np.empty(cap, dtype=np.int64)
        ends = np.empty(cap, dtype=np.int64)
        x = _shingle_set(data_a, sa, ea, ngram, word, starts, ends)
        y = _shingle_set(data_b, sb, eb, ngram, word, starts, ends)
        i = j = inter = 0
        while i < len(x) and j < len(y):
            if x[i] == y[j]:
                inter += 1
                i += 1
                j += 1
            elif x[i] < y[j]:
                i += 1
            else:
                j += 1
        union = len(x) + len(y) - inter
        out[d] = inter / union if union else 0.0

@njit(cache=True)
def _shingle_sets(data, offsets, ngram, word, out, sizes):
    """The shingle set of each text (as :func:`_shingle_set`) into ``out``, one after the other;
    ``sizes[d]`` is the number of document d's distinct shingles. Returns the total."""
    o = 0
    cap = 1024
    starts = np.empty(cap, dtype=np.int64)
    ends = np.empty(cap, dtype=np.int64)
    for d in range(len(offsets) - 1):
        s0, e0 = offsets[d], offsets[d + 1]
        need = _count_units(data, s0, e0, word)
        if need > cap:
            cap = max(need, 2 * cap)
            starts = np.empty(cap, dtype=np.int64)
            ends = np.empty(cap, dtype=np.int64)
        h = _shingle_set(data, s0, e0, ngram, word, starts, ends)
        out[o:o + len(h)] = h
        o += len(h)
        sizes[d] = len(h)
    return o


@njit(cache=True)
def _jaccard_indexed(va, oa, ia, vb, ob, ib, out):
    for k in range(len(ia)):
        i, ea = oa[ia[k]], oa[ia[k] + 1]
        j, eb = ob[ib[k]], ob[ib[k] + 1]
        na, nb = ea - i, eb - j
        inter = 0
        while i < ea and j < eb:
            if va[i] == vb[j]:
                inter += 1
                i += 1
                j += 1
            elif va[i] < vb[j]:
                i += 1
            else:
                j += 1
        union = na + nb - inter
        out[k] = inter / union if union else 0.0


def jaccard_indexed(va, oa, ia, vb, ob, ib) -> np.ndarray:
    """out[k] = Jaccard of set ``ia[k]`` of (va, oa) and set ``ib[k]`` of (vb, ob): pairs by index, so
    a set compared with many others is held once."""
    out = np.zeros(len(ia), dtype=np.float64)
    _jaccard_indexed(va, np.asarray(oa, np.int64), np.asarray(ia, np.int64), vb, np.asarray(ob, np.int64),
                     np.asarray(ib, np.int64), out)
    return out


def jaccard(texts_a, texts_b, ngram: int = 5, kind: str = WORD, normalised: bool = False) -> np.ndarray:
    """True Jaccard similarity of the shingle sets of texts_a[i] and texts_b[i] (64-bit hashed)."""
    arr_a = as_large_strings(texts_a) if normalised else normalise(texts_a)
    arr_b = as_large_strings(texts_b) if normalised else normalise(texts_b)
    if len(arr_a) != len(arr_b):
        raise ValueError("jaccard: texts_a and texts_b differ in length")
    da, oa = _buffers(arr_a)
    db, ob = _buffers(arr_b)
    out = np.zeros(len(arr_a), dtype=np.float64)
    _jaccard_pairs(da, oa, db, ob, ngram, kind == WORD, out)
    return out


def shingle_sets(texts, ngram: int = 5, kind: str = WORD, normalised: bool = False):
    """The shingle set of each text, as the true-Jaccard check sees it (sorted distinct 64-bit hashes:
    xxh32 seed 0 in the high half, seed 1 in the low half), as a pyarrow ``list<uint64>`` array.

    ``jaccard_sets(shingle_sets(a), shingle_sets(b))`` equals ``jaccard(a, b)`` exactly: a saved index
    keeps these instead of the texts."""
    import pyarrow as pa

    arr = as_large_strings(texts) if normalised else normalise(texts)
    data, offsets = _buffers(arr)
    n = len(arr)
    total = max(int(offsets[-1] - offsets[0]) + n, 1)  # a document has at most one shingle per byte, plus one
    out = np.empty(total, dtype=np.uint64)
    sizes = np.zeros(n, dtype=np.int64)
    used = _shingle_sets(data, offsets, ngram, kind == WORD, out, sizes)
    list_offsets = np.zeros(n + 1, dtype=np.int32)
    np.cumsum(sizes, out=list_offsets[1:])
    return pa.ListArray.from_arrays(pa.array(list_offsets, type=pa.int32()), pa.array(out[:used], type=pa.uint64()))


def list_buffers(sets) -> tuple[np.ndarray, np.ndarray]:
    """(uint64 values, int64 offsets) of a pyarrow list<uint64> array (or chunked array, or a pandas
    Series of that Arrow type), zero-copy where Arrow allows it."""
    import pyarrow as pa

    if hasattr(sets, "array") and not isinstance(sets, (pa.Array, pa.ChunkedArray)):  # a pandas Series
        sets = pa.array(sets.array) if hasattr(sets.array, "__arrow_array__") else pa.array(list(sets))
    if isinstance(sets, pa.ChunkedArray):
        sets = sets.combine_chunks() if sets.num_chunks else pa.array([], type=pa.list_(pa.uint64()))
    if sets.null_count:
        raise ValueError("shingle sets: a null set")
    offsets = np.asarray(sets.offsets, dtype=np.int64)
    values = sets.values.to_numpy(zero_copy_only=False).astype(np.uint64, copy=False)
    return values, offsets


def jaccard_sets(sets_a, sets_b) -> np.ndarray:
    """True Jaccard similarity of sets_a[i] and sets_b[i], two list<uint64> arrays of shingle sets."""
    va, oa = list_buffers(sets_a)
    vb, ob = list_buffers(sets_b)
    if len(oa) != len(ob):
        raise ValueError("jaccard_sets: sets_a and sets_b differ in length")
    pairs = np.arange(len(oa) - 1)  # set i with set i: the one merge kernel serves both callers
    return jaccard_indexed(va, oa, pairs, vb, ob, pairs)


def sets_to_binary(sets):
    """A list<uint64> array of shingle sets as a large_binary array, each set the little-endian bytes of
    its hashes (how sets travel through Dask shuffles, which do not move Arrow list columns)."""
    import pyarrow as pa

    values, offsets = list_buffers(sets)
    data = np.ascontiguousarray(values[offsets[0]:offsets[-1]], dtype="<u8")
    starts = ((offsets - offsets[0]) * 8).astype(np.int64)
    return pa.LargeBinaryArray.from_buffers(pa.large_binary(), len(starts) - 1,
                                            [None, pa.py_buffer(starts), pa.py_buffer(data)])


def sets_from_binary(column):
    """The list<uint64> array of sets a binary column holds (:func:`sets_to_binary`; a pandas Series or
    a pyarrow array)."""
    import pyarrow as pa

    arr = pa.array(column.array) if hasattr(column, "array") else column
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks() if arr.num_chunks else pa.array([], type=pa.large_binary())
    arr = arr.cast(pa.large_binary())
    n = len(arr)
    starts = np.frombuffer(arr.buffers()[1], dtype=np.int64)[arr.offset:arr.offset + n + 1] if n else np.zeros(1, np.int64)
    raw = np.frombuffer(arr.buffers()[2], dtype=np.uint8) if n and arr.buffers()[2] is not None else np.zeros(0, np.uint8)
    values = np.array(raw[starts[0]:starts[-1]].view("<u8"), dtype=np.uint64)  # a copy: aligned for the kernel
    offsets = ((starts - starts[0]) // 8).astype(np.int64)
    return pa.LargeListArray.from_arrays(pa.array(offsets), pa.array(values, type=pa.uint64()))
