"""Piece planning: one partition per byte range of a JSONL file or row groups of a Parquet file; opening a Parquet source."""

from __future__ import annotations

import os
from dataclasses import dataclass

from curate.stages.dataset.discover import _kind, is_url, open_input, url_fs


@dataclass(frozen=True)
class Piece:
    """One partition's worth of input: a byte range of a JSONL file, or row groups of a Parquet file."""

    path: str
    name: str  # file name used in generated ids and messages
    kind: str  # "jsonl" | "parquet"
    start: int = 0
    end: int = -1  # -1: to the end
    row_groups: tuple[int, ...] | None = None


def plan_pieces(files: list[tuple[str, str]], blocksize: int) -> list[Piece]:
    """Pieces of the (path, name) input files (``expand_named``), in order."""
    pieces = []
    for f, name in files:
        kind = _kind(f)
        if kind == "jsonl" and f.lower().endswith((".jsonl", ".ndjson")):
            size = url_fs(f)[0].size(url_fs(f)[1]) if is_url(f) else os.path.getsize(f)
            starts = range(0, max(size, 1), blocksize)
            pieces.extend(Piece(f, name, kind, s, min(s + blocksize, size)) for s in starts)
        elif kind == "parquet":
            pieces.extend(_parquet_pieces(f, name, blocksize))
        else:
            pieces.append(Piece(f, name, kind))
    return pieces


def _parquet_pieces(path: str, name: str, blocksize: int) -> list[Piece]:
    import pyarrow.parquet as pq

    try:
        md = pq.ParquetFile(parquet_source(path)).metadata
    except Exception:  # corrupt: one piece, which read_piece refuses or rejects naming the file
        return [Piece(path, name, "parquet")]
    groups, current, size = [], [], 0
    for rg in range(md.num_row_groups):
        current.append(rg)
        size += md.row_group(rg).total_byte_size
        if size >= blocksize:
            groups.append(tuple(current))
            current, size = [], 0
    if current or not groups:
        groups.append(tuple(current))
    if len(groups) == 1:
        return [Piece(path, name, "parquet")]
    return [Piece(path, name, "parquet", row_groups=g) for g in groups]


def parquet_source(path: str):
    """What pyarrow reads a Parquet file from: the local path (memory-mapped), else a file object."""
    return open_input(path) if is_url(path) else path
