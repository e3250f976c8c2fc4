"""Shingles and MinHash signatures, computed for a whole partition in one compiled (numba) pass.

Definitions (the contract the tests check):

- **Normalised text**: lowercased (Arrow ``utf8_lower``), every run of separators (Unicode
  punctuation P*, symbols S*, spaces Z* and controls Cc such as tab and newline) replaced by one
  space, no leading or trailing space (:func:`normalise`).
- **Shingles** (:func:`shingles`, the readable reference): word n-grams are ``n`` consecutive
  words of the normalised text joined by single spaces; character n-grams are ``n`` consecutive
  code points. A text with fewer than ``n`` words (code points) has one shingle, itself; an empty
  normalised text has none.
- **Shingle hash**: xxh32 of the shingle's UTF-8 bytes, seed 0 (= ``xxhash.xxh32_intdigest``).
- **MinHash**: datasketch's default ``affine32`` scheme. The permutations are drawn exactly as
  ``datasketch.MinHash(num_perm, seed)`` draws them (``a`` odd, ``b`` any 32-bit value); each
  shingle hash is pre-mixed with the 32-bit MurmurHash3 finalizer ``fmix32`` and permuted with
  ``a * h + b mod 2**32``; the signature is the minimum per permutation. So for the same shingles,
  ``_signatures(...)`` equals ``datasketch.MinHash(num_perm, seed,
  hashfunc=xxhash.xxh32_intdigest)`` updated with the shingles' UTF-8 bytes.

The kernel reads the partition's text straight from its Arrow buffers (offsets + UTF-8 bytes), finds
the shingles from the positions of the spaces (or code point starts), hashes each shingle once and
takes the minimum of each permutation over the document's shingles in a loop LLVM vectorises.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from curate.stages.dedup.hashing import (
    U32,
    _fmix32 as _fmix32,
    _xxh32 as _xxh32,
    xxh32 as xxh32,
)
from curate.stages.dedup.shingling import (
    CHAR as CHAR,
    WORD,
    _buffers as _buffers,
    _build_separator_table as _build_separator_table,
    _count_units as _count_units,
    _shingle_spans as _shingle_spans,
    as_large_strings as as_large_strings,
    normalise as normalise,
    normalise_text as normalise_text,
    separator_table as separator_table,
    shingles as shingles,
)

# --------------------------------------------------------------------------- permutations


def permutations(num_perm: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """(a, b) as uint32, drawn exactly as datasketch's affine32 ``MinHash._init_permutations``."""
    gen = np.random.RandomState(seed)
    a = gen.randint(0, 1 << 31, num_perm, dtype=np.uint32) * np.uint32(2) + np.uint32(1)
    b = gen.randint(0, 1 << 32, num_perm, dtype=np.uint32)
    return a, b


# --------------------------------------------------------------------------- compiled kernels
# Module-level so numba can cache the machine code next to this file (closures are not cached);
# compiling happens on the first call, not at import.

@njit(cache=True)
def _minhash_row(hv, s, e, a, b, row):
    """row[p] = min over j in [s, e) of (a[p] * hv[j] + b[p]) mod 2**32 (row starts at 0xFFFFFFFF).

    Shingle-major, 8 (then 1) shingles per pass over the permutations: the loop over ``p`` is then a
    contiguous, branch-free uint32 multiply-add-min that LLVM vectorises across the permutations, and
    each loaded ``row[p]`` serves 8 shingles. (The permutation-major loop, a min-reduction over the
    shingles per permutation, ran 15-20x slower: numba widens its uint32 products to 64 bits, which
    blocks the reduction's vectorisation.)"""
    n = len(a)
    j = s
    while j + 8 <= e:
        h0, h1, h2, h3 = hv[j], hv[j + 1], hv[j + 2], hv[j + 3]
        h4, h5, h6, h7 = hv[j + 4], hv[j + 5], hv[j + 6], hv[j + 7]
        for p in range(n):
            ap, bp = a[p], b[p]
            m0 = min(np.uint32(ap * h0 + bp), np.uint32(ap * h1 + bp))
            m1 = min(np.uint32(ap * h2 + bp), np.uint32(ap * h3 + bp))
            m2 = min(np.uint32(ap * h4 + bp), np.uint32(ap * h5 + bp))
            m3 = min(np.uint32(ap * h6 + bp), np.uint32(ap * h7 + bp))
            row[p] = min(row[p], min(min(m0, m1), min(m2, m3)))
        j += 8
    while j < e:
        h = hv[j]
        for p in range(n):
            row[p] = min(row[p], np.uint32(a[p] * h + b[p]))
        j += 1


@njit(cache=True)
def _signatures(data, offsets, ngram, word, a, b, out, counts):
    n = len(offsets) - 1
    num_perm = len(a)
    cap = 1024
    starts = np.empty(cap, dtype=np.int64)
    ends = np.empty(cap, dtype=np.int64)
    hv = np.empty(cap, dtype=np.uint32)
    row = np.empty(num_perm, dtype=np.uint32)
    for d in range(n):
        s0, e0 = offsets[d], offsets[d + 1]
        need = _count_units(data, s0, e0, word)
        if need > cap:
            cap = max(need, 2 * cap)
            starts = np.empty(cap, dtype=np.int64)
            ends = np.empty(cap, dtype=np.int64)
            hv = np.empty(cap, dtype=np.uint32)
        m = _shingle_spans(data, s0, e0, ngram, word, starts, ends)
        for j in range(m):
            hv[j] = np.uint32(_fmix32(_xxh32(data, starts[j], ends[j], 0)))
        row[:] = np.uint32(0xFFFFFFFF)
        _minhash_row(hv, 0, m, a, b, row)
        out[d, :] = row
        counts[d] = m


@njit(cache=True)
def _hash_strings(data, offsets, out):
    """out[k] = fmix32(xxh32(string k)): the pre-mixed shingle hash of each given string."""
    for k in range(len(offsets) - 1):
        out[k] = np.uint32(_fmix32(_xxh32(data, offsets[k], offsets[k + 1], 0)))


@njit(cache=True)
def _signatures_of_hashes(hv, row_offsets, a, b, out):
    """Signatures of documents given as runs of pre-mixed shingle hashes (document d: hv[o[d]:o[d+1]])."""
    row = np.empty(len(a), dtype=np.uint32)
    for d in range(len(row_offsets) - 1):
        row[:] = np.uint32(0xFFFFFFFF)
        _minhash_row(hv, row_offsets[d], row_offsets[d + 1], a, b, row)
        out[d, :] = row


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



# --------------------------------------------------------------------------- public API


def signatures(texts, num_perm: int = 128, seed: int = 42, ngram: int = 5, kind: str = WORD,
               normalised: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """(uint32 signatures of shape (n, num_perm), int64 shingle counts) for the texts.

    A text without shingles (empty after normalising) keeps the initial all-0xFFFFFFFF signature
    and a count of 0, as an empty datasketch MinHash does. ``normalised=True``: the texts are
    already the output of :func:`normalise` (the kernel relies on its single spaces)."""
    arr = as_large_strings(texts) if normalised else normalise(texts)
    data, offsets = _buffers(arr)
    a, b = permutations(num_perm, seed)
    out = np.empty((len(arr), num_perm), dtype=np.uint32)
    counts = np.zeros(len(arr), dtype=np.int64)
    _signatures(data, offsets, ngram, kind == WORD, a, b, out, counts)
    return out, counts


def signatures_of_shingles(shingle_lists, num_perm: int = 128, seed: int = 42) -> np.ndarray:
    """uint32 signatures (n, num_perm) of documents given as their shingles (a list of lists of str,
    or a pyarrow ListArray of strings): the MinHash core without normalising and shingling.

    Equal to ``datasketch.MinHash(num_perm, seed, hashfunc=xxhash.xxh32_intdigest)`` updated with
    each shingle's UTF-8 bytes; the benchmarks drive it with the same shingles as the peers."""
    import pyarrow as pa

    lists = shingle_lists if isinstance(shingle_lists, (pa.ListArray, pa.LargeListArray)) else \
        pa.array(shingle_lists, type=pa.large_list(pa.large_string()))
    row_offsets = np.asarray(lists.offsets, dtype=np.int64)
    flat = as_large_strings(lists.values)
    data, offsets = _buffers(flat)
    hv = np.empty(len(flat), dtype=np.uint32)
    _hash_strings(data, offsets, hv)
    hv = hv[row_offsets[0]:] if row_offsets[0] else hv  # a sliced ListArray: offsets start past 0
    return signatures_of_hashes(hv, row_offsets - row_offsets[0], num_perm, seed)


def signatures_of_hashes(hashes, row_offsets, num_perm: int = 128, seed: int = 42) -> np.ndarray:
    """uint32 signatures (n, num_perm) of documents given as pre-mixed 32-bit shingle hashes
    (``fmix32(xxh32(shingle))``; document d holds ``hashes[row_offsets[d]:row_offsets[d + 1]]``)."""
    a, b = permutations(num_perm, seed)
    hv = np.ascontiguousarray(hashes, dtype=np.uint32)
    row_offsets = np.ascontiguousarray(row_offsets, dtype=np.int64)
    out = np.empty((len(row_offsets) - 1, num_perm), dtype=np.uint32)
    _signatures_of_hashes(hv, row_offsets, a, b, out)
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
