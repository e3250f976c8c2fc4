"""Reading and rewriting one file of an output (Parquet or JSONL) without the erased rows, through Output."""

from __future__ import annotations

import io
import json

import numpy as np

from curate.stages.erase.match import DETAIL, DUPLICATE_OF, ERASED_DETAIL, KEPT_ID, Matcher
from curate.stages.output import (
    CHECKSUM,
    Output,
    file_checksum,
)


def read_table(out: Output, rel: str, columns=None):
    """A Parquet or JSONL file of ``out`` as an Arrow table (only ``columns`` that it has, when given;
    JSONL values as strings: the id columns are strings by the dataset contract)."""
    import pyarrow.parquet as pq

    if rel.endswith(".parquet"):
        with out.open_read(rel) as f:
            pf = pq.ParquetFile(f)
            names = pf.schema_arrow.names
            wanted = None if columns is None else [c for c in columns if c in names]
            return pf.read(columns=wanted)
    return _jsonl_table(_jsonl_lines(out.read_bytes(rel)), columns)


def _jsonl_lines(data: bytes) -> list[bytes]:
    return [line for line in data.split(b"\n") if line.strip()]


def _jsonl_table(lines: list[bytes], columns=None):
    import pyarrow as pa

    records = [json.loads(line) for line in lines]
    names = list(dict.fromkeys(k for r in records for k in r))
    wanted = names if columns is None else [c for c in columns if c in names]

    def text(v):
        return None if v is None else v if isinstance(v, str) else json.dumps(v)

    return pa.table({c: pa.array([text(r.get(c)) for r in records], pa.large_string()) for c in wanted})


def rewrite_table(out: Output, rel: str, mask_fn, drop_empty: bool, matcher: Matcher | None = None,
                  adjust=None) -> dict | str | None:
    """Write ``rel`` again without the rows ``mask_fn(table)`` marks, and the rest's references to
    erased documents replaced (``matcher.scrub``); its new record (with rows), the string "removed"
    when nothing is left and ``drop_empty``, or None when nothing changes."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    if rel.endswith(".parquet"):
        pf = pq.ParquetFile(io.BytesIO(out.read_bytes(rel)))
        compression = "snappy"
        if pf.metadata.num_row_groups and pf.metadata.num_columns:
            compression = pf.metadata.row_group(0).column(0).compression.lower()
            compression = "none" if compression == "uncompressed" else compression
        table = pf.read()
        erase = mask_fn(table)
        kept = table.filter(pa.array(~erase)).combine_chunks()
        kept, scrubbed = matcher.scrub(kept) if matcher is not None else (kept, 0)
        adjusted = adjust(kept) if adjust is not None else kept
        if not erase.any() and not scrubbed and adjusted is kept:
            return None
        kept = adjusted
        if drop_empty and kept.num_rows == 0:
            out.remove(rel)
            return "removed"
        with out.open(rel) as f:
            pq.write_table(kept, f, compression=compression)
        return {**f.record, "rows": kept.num_rows}
    lines = _jsonl_lines(out.read_bytes(rel))
    table = _jsonl_table(lines)
    erase = mask_fn(table)
    scrubbed = np.zeros(len(lines), dtype=bool)
    if matcher is not None and table.num_rows:
        scrubbed = matcher.references(table) & ~erase
    if not erase.any() and not scrubbed.any():
        return None
    kept = [_scrubbed_line(line) if s else line for line, e, s in zip(lines, erase, scrubbed) if not e]
    if drop_empty and not kept:
        out.remove(rel)
        return "removed"
    # what pandas' to_json(lines=True) writes: each record and a newline; for no record, one newline
    with out.open(rel) as f:
        f.write(b"".join(line + b"\n" for line in kept) if kept else b"\n")
    return {**f.record, "rows": len(kept)}


def _scrubbed_line(line: bytes) -> bytes:
    """A JSONL record with its reference to an erased document replaced, encoded as pandas encodes it."""
    import pandas as pd

    record = json.loads(line)
    if KEPT_ID in record:
        record[KEPT_ID] = None
    if str(record.get(DETAIL, "")).startswith(DUPLICATE_OF):
        record[DETAIL] = ERASED_DETAIL
    text = pd.DataFrame([record]).to_json(orient="records", lines=True, force_ascii=False, double_precision=15)
    return text.strip("\n").encode("utf-8")


def disk_record(out: Output, rel: str) -> dict:
    """A file's record read back (a file an earlier, killed erase wrote)."""
    with out.open_read(rel) as f:
        size, digest = file_checksum(f)
    return {"path": rel, "bytes": size, CHECKSUM: digest}
