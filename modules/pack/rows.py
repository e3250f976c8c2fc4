"""Rows from a layout (pure): input ids, loss mask, document starts and offsets, pack ids; the rows' invariants asserted."""

from __future__ import annotations

import numpy as np
import pandas as pd

from curate.stages.errors import DataError
from curate.stages.pack.layout import Layout, layout
from curate.stages.pack.plan import COLUMNS, ROW_GROUP_TOKENS, PackPlan


def loss_mask_for(valid: np.ndarray, starts_flat: np.ndarray, seq_length: int) -> np.ndarray:
    """The documented loss mask of rows: 1 at i when i + 1 < valid and i + 1 starts no segment.
    ``starts_flat`` are flat positions (row * seq_length + start)."""
    col = np.arange(seq_length)
    mask = (col[None, :] < (np.asarray(valid)[:, None] - 1)).astype(np.uint8)
    inner = starts_flat[starts_flat % seq_length > 0]
    mask.reshape(-1)[inner - 1] = 0
    return mask


def check_rows(ids: np.ndarray, valid: np.ndarray, starts: np.ndarray, counts: np.ndarray,
               bos_id: int, pad_id: int, vocab_size: int | None, loss_mask: np.ndarray | None = None) -> list:
    """(row, problem) for every row that breaks the invariant (see the module doc); [] when all hold.

    ``ids`` is (rows, seq_length); ``starts`` the segment starts of all rows concatenated and
    ``counts`` how many each row has.
    """
    n, seq = ids.shape
    valid = np.asarray(valid, dtype=np.int64)
    counts = np.asarray(counts, dtype=np.int64)
    starts = np.asarray(starts, dtype=np.int64)
    problems: dict[int, str] = {}

    def flag(bad, text):
        for r in np.flatnonzero(bad).tolist():
            problems.setdefault(r, text(r))

    flag((valid < 1) | (valid > seq), lambda r: f"valid_token_count {int(valid[r])} is outside 1..{seq}")
    v = np.clip(valid, 0, seq)
    row_of = np.repeat(np.arange(n), counts)
    first = np.cumsum(counts) - counts
    flag(counts == 0, lambda r: "no document (doc_starts is empty)")
    has = counts > 0
    bad_first = np.zeros(n, bool)
    bad_first[has] = starts[first[has]] != 0
    flag(bad_first, lambda r: "the first document does not start at position 0")
    order_bad = np.zeros(n, bool)
    if len(starts) > 1:
        same = row_of[1:] == row_of[:-1]
        np.logical_or.at(order_bad, row_of[1:][same & (starts[1:] <= starts[:-1])], True)
    flag(order_bad, lambda r: "doc_starts are not strictly increasing")
    outside = (starts < 0) | (starts >= v[row_of])
    bad_out = np.zeros(n, bool)
    np.logical_or.at(bad_out, row_of[outside], True)
    flag(bad_out, lambda r: f"a document starts at or after valid_token_count {int(valid[r])}")
    ok_starts = ~outside
    not_bos = np.zeros(n, bool)
    np.logical_or.at(not_bos, row_of[ok_starts][ids[row_of[ok_starts], starts[ok_starts]] != bos_id], True)
    flag(not_bos, lambda r: f"a document does not start with the BOS id {bos_id}")
    col = np.arange(seq)[None, :]
    inside = col < v[:, None]
    bos_count = ((ids == bos_id) & inside).sum(axis=1)
    flag(bos_count != counts, lambda r: f"{int(bos_count[r])} BOS ids but {int(counts[r])} documents")
    pads = ((ids != pad_id) & ~inside).any(axis=1)
    flag(pads, lambda r: f"a token after valid_token_count {int(valid[r])} is not the pad id {pad_id}")
    if vocab_size is not None:
        big = (ids.astype(np.int64) >= vocab_size).any(axis=1)
        flag(big, lambda r: f"token id {int(ids[r].max())} >= the vocabulary size {vocab_size}")
    if loss_mask is not None and not problems:
        expected = loss_mask_for(v, row_of * seq + starts, seq)
        flag((loss_mask != expected).any(axis=1), lambda r: "loss_mask is not 1 exactly where the next token "
                                                            "is of the same document")
    return sorted(problems.items())


def assemble(lay: Layout, r0: int, r1: int, content_start: np.ndarray, tokens, plan: PackPlan):
    """Rows ``r0 .. r1-1`` of a layout: (ids (rows, seq_length), valid, doc starts in the row, documents
    per row, loss mask). ``tokens`` is the pair's token array, ``content_start`` each document's first
    content token in it."""
    seq = plan.seq_length
    dtype = np.dtype(plan.dtype)
    a, b = np.searchsorted(lay.row, [r0, r1])
    row, pos = lay.row[a:b] - r0, lay.pos[a:b]
    length, doc, off = lay.length[a:b], lay.doc[a:b], lay.offset[a:b]
    n = r1 - r0
    ids = np.full(n * seq, plan.pad_id, dtype=dtype)
    dest = row * seq + pos
    ids[dest] = plan.bos_id
    total = int(length.sum())
    within = np.arange(total, dtype=np.int64) - np.repeat(np.cumsum(length) - length, length)
    values = np.asarray(tokens[np.repeat(content_start[doc] + off, length) + within])
    if len(values) and (int(values.min()) < 0 or int(values.max()) > np.iinfo(dtype).max):
        bad = int(values.min()) if int(values.min()) < 0 else int(values.max())
        raise DataError(f"token id {bad} does not fit {dtype}")
    ids[np.repeat(dest + 1, length) + within] = values
    counts = np.bincount(row, minlength=n)
    valid = np.bincount(row, weights=length + 1, minlength=n).astype(np.int64)
    return ids.reshape(n, seq), valid, pos, counts, loss_mask_for(valid, dest, seq)


def rows_frame(arrays, doc, off, row_ids) -> pd.DataFrame:
    """The output columns of assembled rows as a pandas frame (one object per row: small inputs only)."""
    ids, valid, pos, counts, mask = arrays
    cuts = np.cumsum(counts)[:-1]
    return pd.DataFrame({
        "input_ids": list(ids),
        "loss_mask": list(mask),
        "doc_starts": np.split(pos.astype(np.uint32), cuts),
        "doc_index": np.split(np.asarray(doc, np.int64), cuts),
        "doc_offset": np.split(np.asarray(off, np.int64), cuts),
        "valid_token_count": valid.astype(np.int32),
        "pack_id": row_ids,
    })


def pack_ids(file_no: int, r0: int, r1: int) -> np.ndarray:
    return (np.int64(file_no) << np.int64(32)) + np.arange(r0, r1, dtype=np.int64)


def content_of(starts: np.ndarray, lengths: np.ndarray, plan: PackPlan) -> tuple[np.ndarray, np.ndarray]:
    """(first content token, content length) of each document: without its BOS and its stripped EOD."""
    head = int(plan.has_bos)
    cut = head + int(plan.strip_eod)
    return starts + np.minimum(lengths, head), np.maximum(lengths - cut, 0)


def pack_frame(df: pd.DataFrame, plan: PackPlan, file_no: int = 0) -> pd.DataFrame:
    """Pure form for small inputs and tests: documents (column ``tokens``, lists of ids as the token set
    stores them) -> packed rows, invariant checked. Dropped documents are not in the output."""
    lists = [np.asarray(t, dtype=np.int64) for t in df["tokens"]]
    lengths = np.array([len(t) for t in lists], dtype=np.int64)
    flat = np.concatenate(lists) if lists else np.zeros(0, np.int64)
    starts = np.cumsum(lengths) - lengths
    cstart, clen = content_of(starts, lengths, plan)
    lay = layout(clen, plan, file_no)
    frames = []
    step = max(1, ROW_GROUP_TOKENS // plan.seq_length)
    for r0 in range(0, lay.rows, step):
        r1 = min(r0 + step, lay.rows)
        arrays = assemble(lay, r0, r1, cstart, flat, plan)
        _assert_rows(arrays, plan, "pack_frame", file_no, r0)
        a, b = np.searchsorted(lay.row, [r0, r1])
        frames.append(rows_frame(arrays, lay.doc[a:b], lay.offset[a:b], pack_ids(file_no, r0, r1)))
    if not frames:
        return pd.DataFrame({c: pd.Series(dtype=object) for c in COLUMNS})
    return pd.concat(frames, ignore_index=True)


def _assert_rows(arrays, plan: PackPlan, where: str, file_no: int, r0: int) -> None:
    ids, valid, pos, counts, mask = arrays
    problems = check_rows(ids, valid, pos, counts, plan.bos_id, plan.pad_id, plan.vocab_size, mask)
    if problems:
        r, text = problems[0]
        more = f" (and {len(problems) - 1} more rows)" if len(problems) > 1 else ""
        hint = "; a document holds the BOS id inside its tokens" if "BOS ids but" in text else ""
        raise DataError(f"{where}: row {r0 + r} (pack_id {(file_no << 32) + r0 + r}): invariant: {text}{more}{hint}")
