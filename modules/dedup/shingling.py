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
    U0,
    U1,
    U2,
    U3,
    U4,
    U6,
    U12,
    U18,
    U32,
    _fmix32 as _fmix32,
    _xxh32 as _xxh32,
    xxh32 as xxh32,
)

WORD, CHAR = "word", "char"

#: code points that separate words: Unicode punctuation (P*), symbols (S*), separators (Z*) and
#: controls (Cc, which include tab and newline). Planes 4-13 and 15-16 hold none of them.
_SEPARATOR_CATEGORIES = ("P", "S", "Z")
_separator_table = None


def _build_separator_table() -> np.ndarray:
    import unicodedata

    table = np.zeros(0x110000, dtype=np.uint8)
    for cp in (*range(0x40000), *range(0xE0000, 0xE1000)):
        cat = unicodedata.category(chr(cp))
        if cat[0] in _SEPARATOR_CATEGORIES or cat == "Cc":
            table[cp] = 1
    return table


def separator_table() -> np.ndarray:
    """uint8[0x110000]: 1 where the code point is a separator.

    Building it takes 266k ``unicodedata`` calls (0.2-0.4 s), paid by every worker process of every
    run; so it is kept, bit-packed (139 KB), in ``__pycache__`` beside this file (where numba caches
    the kernels), keyed by the Unicode version of this Python, and rebuilt when absent or unreadable."""
    global _separator_table
    if _separator_table is None:
        import os
        import unicodedata

        cache = os.path.join(os.path.dirname(os.path.abspath(__file__)), "__pycache__",
                             f"separators-{unicodedata.unidata_version}.bin")
        try:
            with open(cache, "rb") as f:
                packed = np.frombuffer(f.read(), dtype=np.uint8)
            table = np.unpackbits(packed)[:0x110000]
            if len(table) != 0x110000:
                raise ValueError("truncated")
        except (OSError, ValueError):
            table = _build_separator_table()
            try:  # best effort (a read-only install just rebuilds): temp file, then an atomic rename
                os.makedirs(os.path.dirname(cache), exist_ok=True)
                tmp = f"{cache}.{os.getpid()}.tmp"
                with open(tmp, "wb") as f:
                    f.write(np.packbits(table).tobytes())
                os.replace(tmp, cache)
            except OSError:
                pass
        _separator_table = np.ascontiguousarray(table, dtype=np.uint8)
    return _separator_table


# --------------------------------------------------------------------------- normalisation


def as_large_strings(values):
    """A pyarrow LargeStringArray (one chunk, nulls as empty strings) from a Series/array/list."""
    import pyarrow as pa

    if isinstance(values, (pa.Array, pa.ChunkedArray)):
        arr = values
    elif hasattr(values, "array"):  # pandas Series
        arr = pa.array(values.array) if not isinstance(values.array, np.ndarray) else pa.array(values.to_numpy())
    else:
        arr = pa.array(list(values), type=pa.large_string())
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks() if arr.num_chunks else pa.array([], type=pa.large_string())
    if arr.type != pa.large_string():
        arr = arr.cast(pa.large_string())
    if arr.null_count:
        arr = arr.fill_null("")
    return arr


def normalise(values):
    """Normalised texts (see the module docstring) as a pyarrow LargeStringArray.

    Lowercasing is Arrow's ``utf8_lower``; the separator pass is one compiled loop over the bytes
    (a regex replacement in Arrow runs at ~50 MB/s and would dominate the MinHash step)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    arr = as_large_strings(pc.utf8_lower(as_large_strings(values)))
    data, offsets = _buffers(arr)
    out = np.empty(max(len(data), 1), dtype=np.uint8)
    out_offsets = np.empty(len(arr) + 1, dtype=np.int64)
    _collapse_separators(data, offsets, separator_table(), out, out_offsets)
    return pa.LargeStringArray.from_buffers(len(arr), pa.py_buffer(out_offsets),
                                            pa.py_buffer(out[: out_offsets[-1]]))


def normalise_text(text: str) -> str:
    return normalise([text])[0].as_py()


def shingles(text: str, ngram: int = 5, kind: str = WORD) -> list[str]:
    """The shingles of one text, in order, repeats included (the readable reference of the kernel)."""
    norm = normalise_text(text)
    if not norm:
        return []
    units = norm.split(" ") if kind == WORD else list(norm)
    sep = " " if kind == WORD else ""
    if len(units) < ngram:
        return [norm]
    return [sep.join(units[i:i + ngram]) for i in range(len(units) - ngram + 1)]


def _buffers(arr):
    """(UTF-8 bytes as uint8, int64 offsets) of a LargeStringArray, zero-copy."""
    offsets = np.frombuffer(arr.buffers()[1], dtype=np.int64)[arr.offset: arr.offset + len(arr) + 1]
    data_buf = arr.buffers()[2]
    data = np.frombuffer(data_buf, dtype=np.uint8) if data_buf is not None else np.zeros(1, np.uint8)
    if len(data) == 0:
        data = np.zeros(1, np.uint8)
    return data, offsets


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
def _collapse_separators(data, offsets, table, out, out_offsets):
    """Copy each text, every run of separator code points -> one space, no leading/trailing space.

    Unsigned indices: no negative-index checks in this byte loop."""
    o = U0
    for d in range(len(offsets) - 1):
        out_offsets[d] = o
        i, e = np.uint64(offsets[d]), np.uint64(offsets[d + 1])
        pending = U0  # a separator run follows a word: write one space before the next word
        seen = U0  # a word has been written (no leading space)
        while i < e:
            b0 = data[i]
            n = U1
            if b0 < 0x80:
                # branch-free: word boundaries are unpredictable and mispredictions dominated this loop
                # (stores may land one past the last kept byte; out has room, they are overwritten)
                sep = np.uint64(table[b0])
                keep = U1 - sep
                out[o] = 32
                o += keep & pending
                out[o] = b0
                o += keep
                pending = sep & seen
                seen = seen | keep
                i += U1
                continue
            if (b0 >> 5) == 6 and i + U1 < e:
                cp, n = (np.uint64(b0 & 0x1F) << U6) | np.uint64(data[i + U1] & 0x3F), U2
            elif (b0 >> 4) == 14 and i + U2 < e:
                cp = (np.uint64(b0 & 0x0F) << U12) | (np.uint64(data[i + U1] & 0x3F) << U6) \
                    | np.uint64(data[i + U2] & 0x3F)
                n = U3
            elif (b0 >> 3) == 30 and i + U3 < e:
                cp = (np.uint64(b0 & 0x07) << U18) | (np.uint64(data[i + U1] & 0x3F) << U12) \
                    | (np.uint64(data[i + U2] & 0x3F) << U6) | np.uint64(data[i + U3] & 0x3F)
                n = U4
            else:  # not reachable for valid UTF-8 (Arrow strings are validated); keep the byte
                cp = np.uint64(0x41)
            if cp < 0x110000 and table[cp]:
                pending = seen
            else:
                if pending:
                    out[o] = 32
                    o += U1
                    pending = U0
                for k in range(n):
                    out[o + k] = data[i + k]
                o += n
                seen = U1
            i += n
    out_offsets[len(offsets) - 1] = o


@njit(cache=True)
def _shingle_spans(data, s0, e0, ngram, word, out_start, out_end):
    """Byte spans of the shingles of normalised text data[s0:e0] into out_start/out_end (each with
    room for one more than the number of words or code points); returns their number.

    The positions of the spaces (words) or code point starts (characters) are collected without
    branches first (word boundaries are unpredictable), then turned into spans in place."""
    if e0 <= s0:
        return 0
    k = 0
    if word:  # normalised: words are separated by exactly one space
        for i in range(s0, e0):
            out_end[k] = i
            k += np.int64(data[i] == 32)
        out_end[k] = e0
        words = k + 1
        if words < ngram:
            out_start[0], out_end[0] = s0, e0
            return 1
        m = words - ngram + 1
        out_start[0] = s0
        for j in range(1, m):
            out_start[j] = out_end[j - 1] + 1
        for j in range(m):
            out_end[j] = out_end[j + ngram - 1]
        return m
    for i in range(s0, e0):
        out_start[k] = i
        k += np.int64((data[i] & 0xC0) != 0x80)  # a code point starts here
    if k < ngram:
        out_start[0], out_end[0] = s0, e0
        return 1
    m = k - ngram + 1
    for j in range(m - 1):
        out_end[j] = out_start[j + ngram]
    out_end[m - 1] = e0
    return m


@njit(cache=True)
def _count_units(data, s0, e0, word):
    """Upper bound of the number of shingles: words (spaces + 1) or code points."""
    n = 0
    if word:
        for i in range(s0, e0):
            if data[i] == 32:
                n += 1
        return n + 1
    for i in range(s0, e0):
        if (data[i] & 0xC0) != 0x80:
            n += 1
    return n + 1

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
