"""MinHash signatures of shingles, computed for a whole partition in one compiled (numba) pass.

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

This module keeps the signatures; the pieces they share with the true Jaccard live beside it, one
concern a module, and every name (the private kernels shingles.py uses included) stays importable
from here: ``shingling`` (normalised text and its shingles), ``hashing`` (xxh32 and fmix32, compiled)
and ``jaccard`` (shingle sets and their true Jaccard).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from curate.stages.dedup.hashing import (
    _fmix32 as _fmix32,
    _xxh32 as _xxh32,
    xxh32 as xxh32,
)
from curate.stages.dedup.jaccard import (
    jaccard as jaccard,
    jaccard_indexed as jaccard_indexed,
    jaccard_sets as jaccard_sets,
    list_buffers as list_buffers,
    sets_from_binary as sets_from_binary,
    sets_to_binary as sets_to_binary,
    shingle_sets as shingle_sets,
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
