"""Shingle sets on disk: one raw file per partition, read back by byte ranges, compared by index.

A document's shingle set is what the true-Jaccard check compares: its sorted distinct 64-bit shingle
hashes (:func:`curate.stages.dedup.minhash.shingle_sets`). Fuzzy dedup computes them once, beside the
signatures, from the only step that reads texts; every later step (edge verification, the decision
rounds, ``--save-index``) reads them from these files, and a saved index keeps the same files.

Layout of one partition: ``part-NNNNN.u64``, raw little-endian uint64, the documents' sets one after
the other in document order; a Parquet table beside it (the signatures part, an index's ``docs``
part) holds ``(doc, start, count)``: document ``doc``'s set is values ``[start, start + count)``.

Reading is by byte ranges (:func:`read_ranges`): only the wanted sets, nearby ones in one read, so a
task that needs a few documents of a partition reads little of it, and its memory is the sets it
asked for plus one read of at most :data:`READ_SPAN` values, never the file.
"""

from __future__ import annotations

import numpy as np
from numba import njit

# the kernel's pieces: the set computed with the signature shares its shingles and their first hash
from curate.stages.dedup.minhash import (  # noqa: F401 (jaccard_indexed: callers find it here)
    _count_units,
    _fmix32,
    _minhash_row,
    _shingle_spans,
    _xxh32,
    jaccard_indexed,
)

#: two wanted sets less than this many values apart are read in one go (the gap is read and dropped)
READ_GAP = 1 << 16
#: the most values one read brings in (8 MiB), however densely the wanted sets lie: bounds a read's buffer
READ_SPAN = 1 << 20


def part_name(i: int) -> str:
    return f"part-{i:05d}.u64"


def write_sets(out, rel: str, values: np.ndarray) -> dict:
    """Write ``values`` (the concatenated sets of a partition) as ``rel`` of Output ``out``; its record."""
    data = np.ascontiguousarray(values, dtype="<u8")
    with out.open(rel) as f:
        f.write(memoryview(data).cast("B"))
    return f.record


def copy_file(src, src_rel: str, dst, dst_rel: str) -> dict:
    """Copy a sets file between outputs byte for byte (a saved index takes the run's files as they are)."""
    with src.open_read(src_rel) as f, dst.open(dst_rel) as sink:
        for chunk in iter(lambda: f.read(8 << 20), b""):
            sink.write(chunk)
    return sink.record


@njit(cache=True)
def _groups(lo, hi, gap, span):
    """Cut points of the wanted ranges [lo[k], hi[k]) (sorted by lo) into reads: a range joins the
    current read when it starts less than ``gap`` after the read's end and the read stays within
    ``span`` values."""
    cuts = np.empty(len(lo) + 1, dtype=np.int64)
    n = 0
    cuts[n] = 0
    n += 1
    if len(lo) == 0:
        return cuts[:n]
    start, end = lo[0], hi[0]
    for k in range(1, len(lo)):
        new_end = max(end, hi[k])
        if lo[k] > end + gap or new_end - start > span:
            cuts[n] = k
            n += 1
            start, end = lo[k], hi[k]
        else:
            end = new_end
    cuts[n] = len(lo)
    n += 1
    return cuts[:n]


def read_ranges(f, start, count, where: str = "") -> tuple[np.ndarray, np.ndarray]:
    """(uint64 values, int64 offsets): the sets at values ``[start[k], start[k] + count[k])`` of the open
    binary file ``f``, set k at ``values[offsets[k]:offsets[k + 1]]`` (any order, repeats allowed).

    Reads only those ranges (see the module doc); ``where`` names the file in errors."""
    from curate.stages.errors import DataError

    start = np.asarray(start, dtype=np.int64)
    count = np.asarray(count, dtype=np.int64)
    size = f.seek(0, 2) // 8
    bad = (start < 0) | (count < 0) | (start > size - count)
    if bad.any():  # a damaged or edited table: never allocate or seek by what it says
        k = int(np.flatnonzero(bad)[0])
        raise DataError(f"{where}: shorter than its table says: a set at values [{int(start[k])}, "
                        f"{int(start[k]) + int(count[k])}) lies outside the file's {size} values (damaged: rebuild it)")
    offsets = np.zeros(len(start) + 1, dtype=np.int64)
    np.cumsum(count, out=offsets[1:])
    values = np.empty(int(offsets[-1]), dtype=np.uint64)
    order = np.argsort(start, kind="stable")
    lo, hi = start[order], start[order] + count[order]
    cuts = _groups(lo, hi, READ_GAP, READ_SPAN)
    for g in range(len(cuts) - 1):
        idx = order[cuts[g]:cuts[g + 1]]
        a, b = int(lo[cuts[g]]), int(hi[cuts[g]:cuts[g + 1]].max())
        if b == a:
            continue
        buf = np.empty(b - a, dtype="<u8")
        f.seek(a * 8)
        got = f.readinto(memoryview(buf).cast("B"))
        if got != (b - a) * 8:
            raise DataError(f"{where}: shorter than its table says (the file is damaged)")
        n = count[idx]
        inner = np.arange(int(n.sum()), dtype=np.int64) - np.repeat(np.cumsum(n) - n, n)
        values[np.repeat(offsets[idx], n) + inner] = buf[np.repeat(start[idx] - a, n) + inner]
    return values, offsets


def locate(numbers: np.ndarray, starts: np.ndarray, counts: np.ndarray, docs, where: str = ""):
    """(start, count) of documents ``docs`` in a partition whose table lists ``numbers`` (sorted) with
    their ``starts`` and ``counts``; DataError naming ``where`` when one is missing."""
    from curate.stages.errors import DataError

    docs = np.asarray(docs, dtype=np.int64)
    at = np.searchsorted(numbers, docs)
    found = at < len(numbers)
    found[found] = numbers[at[found]] == docs[found]
    if not found.all():
        raise DataError(f"{where}: no document {int(docs[~found][0])} (damaged: rebuild it)")
    return starts[at], counts[at].astype(np.int64)


# --------------------------------------------------------------------------- computed with the signatures


@njit(cache=True)
def _signatures_and_sets(data, offsets, ngram, word, a, b, out, counts, values, sizes):
    """minhash._signatures, and each document's shingle set (minhash._shingle_set) into ``values`` one
    after the other (``sizes[d]``: its length), from one pass over the shingles: their spans and the
    seed-0 hash (the signature's, and the high half of the set's) are computed once."""
    n = len(offsets) - 1
    cap = 1024
    starts = np.empty(cap, dtype=np.int64)
    ends = np.empty(cap, dtype=np.int64)
    hv = np.empty(cap, dtype=np.uint32)
    row = np.empty(len(a), dtype=np.uint32)
    o = 0
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
            x0 = _xxh32(data, starts[j], ends[j], 0)
            hv[j] = np.uint32(_fmix32(x0))
            values[o + j] = (x0 << np.uint64(32)) | _xxh32(data, starts[j], ends[j], 1)
        row[:] = np.uint32(0xFFFFFFFF)
        _minhash_row(hv, 0, m, a, b, row)
        out[d, :] = row
        counts[d] = m
        h = values[o:o + m]
        h.sort()
        u = 0
        for j in range(m):
            if j == 0 or h[j] != h[j - 1]:
                h[u] = h[j]
                u += 1
        sizes[d] = u
        o += u


def signatures_and_sets(texts, num_perm: int, seed: int, ngram: int, kind: str, normalised: bool = False):
    """(signatures (n, num_perm), shingle counts, set values, set offsets (n + 1)): what
    ``minhash.signatures`` and ``minhash.shingle_sets`` give, in one pass (the signatures step's)."""
    from curate.stages.dedup import minhash

    arr = minhash.as_large_strings(texts) if normalised else minhash.normalise(texts)
    data, offsets = minhash._buffers(arr)
    a, b = minhash.permutations(num_perm, seed)
    n = len(arr)
    out = np.empty((n, num_perm), dtype=np.uint32)
    counts = np.zeros(n, dtype=np.int64)
    values = np.empty(max(int(offsets[-1] - offsets[0]) + n, 1), dtype=np.uint64)  # <= one shingle a byte, + 1
    sizes = np.zeros(n, dtype=np.int64)
    _signatures_and_sets(data, offsets, ngram, kind == minhash.WORD, a, b, out, counts, values, sizes)
    set_offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(sizes, out=set_offsets[1:])
    return out, counts, values[:set_offsets[-1]], set_offsets


# --------------------------------------------------------------------------- curate erase


def locator_of(rel: str) -> str | None:
    """The table that says where each set of a fuzzy dedup run's sets file lies (``.../shingles/part-P.u64``
    -> ``.../signatures/part-P.parquet``); None for any other file."""
    folder, _, name = rel.rpartition("/")
    parent, _, last = folder.rpartition("/")
    if last != "shingles" or not name.endswith(".u64"):
        return None
    return f"{parent}/signatures/{name[:-len('.u64')]}.parquet"


def erase_sets(out, rel: str, locator: str, numbers) -> dict | None:
    """``curate erase`` on a sets file of Output ``out``: every value that is not part of the set of a
    document its ``locator`` table lists and ``numbers`` does not hold becomes 0 (the file keeps its
    size, so the other documents' starts stay true). Whether the table still lists the erased
    documents or not (a resumed erase rewrote it first), the result is the same. The new record, or
    None when nothing changes."""
    import pyarrow.parquet as pq

    with out.open_read(locator) as f:
        table = pq.read_table(f, columns=["doc", "start", "count"])
    data = np.frombuffer(out.read_bytes(rel), dtype="<u8")
    stay = ~np.isin(table.column("doc").to_numpy(), np.asarray(sorted(numbers), dtype=np.int64))
    start, count = table.column("start").to_numpy()[stay], table.column("count").to_numpy()[stay].astype(np.int64)
    keep = np.zeros(len(data), dtype=bool)
    keep[np.repeat(start - (np.cumsum(count) - count), count) + np.arange(int(count.sum()))] = True
    if not (data[~keep] != 0).any():
        return None
    return write_sets(out, rel, np.where(keep, data, 0).astype("<u8"))
