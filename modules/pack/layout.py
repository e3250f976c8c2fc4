"""Where each document's tokens go (pure): segments of long documents, best-fit-decreasing into rows of seq_length, the row order seeded by the pair's number."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from curate.stages.pack.plan import PackPlan


def _splitmix64(x: np.ndarray) -> np.ndarray:
    x = x.astype(np.uint64) + np.uint64(0x9E3779B97F4A7C15)
    x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return x ^ (x >> np.uint64(31))


@dataclass
class Layout:
    """Where every segment goes: arrays with one entry per segment, sorted by (row, position)."""

    doc: np.ndarray  # document number in the pair
    offset: np.ndarray  # first content token (document without BOS) of the segment
    length: np.ndarray  # content tokens (the segment is length + 1 tokens with its BOS)
    row: np.ndarray
    pos: np.ndarray  # position of the segment's BOS in its row
    rows: int
    dropped: np.ndarray  # documents rejected as too long (drop mode)
    long_documents: int  # documents longer than a row (split, windowed or dropped)


def segments(content: np.ndarray, seq_length: int, long_docs: str, stride: int):
    """(document, content offset, content length) of each segment, and the documents dropped.

    ``content`` is each document's length without its BOS; a segment is ``[BOS] + content piece``.
    """
    content = np.asarray(content, dtype=np.int64)
    width = seq_length - 1
    n = len(content)
    long = content > width
    docs = np.arange(n, dtype=np.int64)
    short = ~long
    parts = [(docs[short], np.zeros(int(short.sum()), np.int64), content[short])]
    dropped = np.zeros(0, np.int64)
    if long.any():
        lc, ld = content[long], docs[long]
        if long_docs == "drop":
            dropped = ld
        elif long_docs == "split":
            pieces = -(-lc // width)
            d = np.repeat(ld, pieces)
            k = np.arange(int(pieces.sum()), dtype=np.int64) - np.repeat(np.cumsum(pieces) - pieces, pieces)
            off = k * width
            parts.append((d, off, np.minimum(width, np.repeat(lc, pieces) - off)))
        else:  # window: starts 0, stride, ... below lc - width, then one more ending at the document's end
            count = (lc - width - 1) // stride + 2
            d = np.repeat(ld, count)
            k = np.arange(int(count.sum()), dtype=np.int64) - np.repeat(np.cumsum(count) - count, count)
            off = np.minimum(k * stride, np.repeat(lc - width, count))
            parts.append((d, off, np.full(len(d), width, np.int64)))
    d = np.concatenate([p[0] for p in parts])
    o = np.concatenate([p[1] for p in parts])
    c = np.concatenate([p[2] for p in parts])
    return d, o, c, dropped, int(long.sum())


def best_fit_decreasing(sizes: np.ndarray, capacity: int, tiebreak: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(row of each item, the order items were placed in): longest first (ties by ``tiebreak``), each
    into the open row with the least room that fits it (ties: the older row), else a new row."""
    from sortedcontainers import SortedList

    order = np.lexsort((tiebreak, -np.asarray(sizes, dtype=np.int64)))
    row = np.empty(len(sizes), dtype=np.int64)
    room = SortedList()  # (room left, row) of rows that can still take something
    rows = 0
    sizes_list = np.asarray(sizes, dtype=np.int64)[order].tolist()
    for i, s in zip(order.tolist(), sizes_list):
        k = room.bisect_left((s, -1)) if s < capacity else len(room)
        if k < len(room):
            left, r = room.pop(k)
            left -= s
        else:
            r, left = rows, capacity - s
            rows += 1
        row[i] = r
        if left > 0:
            room.add((left, r))
    return row, order


def layout(content: np.ndarray, plan: PackPlan, file_no: int = 0) -> Layout:
    """The packing of one pair's documents (content lengths, without BOS) into rows."""
    d, o, c, dropped, n_long = segments(content, plan.seq_length, plan.long_docs, plan.stride)
    sizes = c + 1
    seed = _splitmix64(np.array([plan.seed], dtype=np.uint64))[0]
    tiebreak = _splitmix64((d.astype(np.uint64) << np.uint64(32)) ^ o.astype(np.uint64) ^ seed)
    row, order = best_fit_decreasing(sizes, plan.seq_length, tiebreak)
    rows = int(row.max()) + 1 if len(row) else 0
    # positions: segments in placement order, within a row one after the other
    placed_rows = row[order]
    by_row = order[np.argsort(placed_rows, kind="stable")]
    sz = sizes[by_row]
    ends = np.cumsum(sz)
    first_of_row = np.r_[True, row[by_row][1:] != row[by_row][:-1]] if len(by_row) else np.zeros(0, bool)
    row_start = np.maximum.accumulate(np.where(first_of_row, ends - sz, 0)) if len(by_row) else ends
    pos = np.empty(len(sizes), dtype=np.int64)
    pos[by_row] = ends - sz - row_start
    # rows in a seeded random order: a file is not sorted by length
    perm = np.random.default_rng([plan.seed, file_no]).permutation(rows)
    new_row = perm[row] if rows else row
    key = np.lexsort((pos, new_row))
    return Layout(d[key], o[key], c[key], new_row[key], pos[key], rows, dropped, n_long)
