"""Reading one Parquet piece into a frame of the dataset's schema; a file that cannot be read becomes one reject record (--on-error skip)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from curate.stages.dataset.budget import document_budget, format_size
from curate.stages.dataset.checks import _column_problem, _is_string_type, _one_line, reserved_problem
from curate.stages.dataset.contract import OFFSET, STRING
from curate.stages.dataset.frames import _records_frame, _reject_row, _standardise, _with_rejects
from curate.stages.dataset.pieces import Piece, parquet_source
from curate.stages.errors import DataError
from curate.stages.settings import IOSettings


def _schema_sample(schema, io_settings: IOSettings) -> pd.DataFrame:
    """An empty frame of a Parquet schema with the types its columns are read as: strings as
    ``STRING``, integers and booleans as pandas' nullable types (a null in a later row group must
    not fail the cast), floats as float64; the id and text columns as strings whatever they hold (a
    file whose columns do not fit is rejected or refused when it is read, not here)."""
    import pyarrow as pa

    df = schema.empty_table().to_pandas()
    for name, t in zip(schema.names, schema.types):
        if name not in df.columns:  # pandas' index columns
            continue
        if _is_string_type(t):
            df[name] = pd.Series([], dtype=STRING)
        elif pa.types.is_integer(t):
            df[name] = pd.Series([], dtype="UInt64" if t == pa.uint64() else "Int64")
        elif pa.types.is_boolean(t):
            df[name] = pd.Series([], dtype="boolean")
        elif pa.types.is_floating(t):
            df[name] = pd.Series([], dtype="float64")
    for col in (io_settings.text_field, io_settings.id_field):
        if col in df.columns:
            df[col] = pd.Series([], dtype=STRING)
    return df


def _read_parquet_piece(piece: Piece, io_settings: IOSettings, meta) -> pd.DataFrame:
    """A Parquet piece, its columns checked first: a text column that is not a string, or an id
    column that is not one (and not an integer with ``convert_ids``), fails naming the file and the
    type, or with ``on_error="skip"`` makes every row a reject. A file that cannot be read fails or
    becomes one reject record naming it. A single-row row group larger than the document budget is
    refused (or rejected) before it is read."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    skip = io_settings.on_error == "skip"
    idf = io_settings.id_field
    try:
        pf = pq.ParquetFile(parquet_source(piece.path))
        md, schema = pf.metadata, pf.schema_arrow
    except Exception as e:
        return _unreadable(piece, io_settings, meta, f"cannot read Parquet: {_one_line(e)}")
    groups = list(piece.row_groups) if piece.row_groups is not None else list(range(md.num_row_groups))
    first_row = sum(md.row_group(g).num_rows for g in range(groups[0])) if groups else 0
    starts, row = {}, first_row
    for g in groups:
        starts[g] = row
        row += md.row_group(g).num_rows
    bad = []
    budget, source = document_budget(io_settings)
    keep = list(groups)
    if budget is not None:
        for g in groups:
            rg = md.row_group(g)
            if rg.num_rows == 1 and rg.total_byte_size > budget:
                msg = (f"a {format_size(rg.total_byte_size)} document is larger than the "
                       f"{format_size(budget)} per document ({source})")
                where = f"{piece.path} row {starts[g]} (row group {g})"
                if not skip:
                    raise DataError(f"{where}: too_large: {msg}")
                keep.remove(g)
                bad.append(_reject_row(f"{piece.name}:{starts[g]}", pd.NA, "too_large", f"{where}: {msg}"))
    reserved = reserved_problem(schema.names, io_settings)
    if reserved is not None:  # never a reject: every row would lose or misread a column
        raise DataError(f"{piece.path}: reserved_column: {reserved}")
    problem = _column_problem(schema, io_settings)
    if problem is not None and not skip:
        raise DataError(f"{piece.path}: {problem[0]}: {problem[1]} "
                        "(use --on-error skip to write its rows to _rejects/)")
    columns = None
    if problem is not None:
        columns = [idf] if idf in schema.names and problem[0] != "bad_id" else []
    try:
        table = pf.read_row_groups(keep, columns=columns) if keep else schema.empty_table()
    except Exception as e:
        return _unreadable(piece, io_settings, meta, f"cannot read Parquet: {_one_line(e)}")
    rows = np.concatenate([np.arange(starts[g], starts[g] + md.row_group(g).num_rows) for g in keep]
                          ) if keep else np.zeros(0, dtype=np.int64)
    if problem is not None:
        reason, msg = problem
        ids = (table[idf].cast(pa.string()).to_pylist() if columns else [None] * table.num_rows)
        bad.extend(_reject_row(i if i is not None else f"{piece.name}:{r}", pd.NA, reason,
                               f"{piece.path} row {r}: {msg}") for i, r in zip(ids, rows.tolist()))
        return _with_rejects(_standardise(_records_frame([]), piece, io_settings, meta), bad)
    if idf in schema.names and not _is_string_type(schema.field(idf).type):  # integers, convert_ids
        table = table.set_column(schema.get_field_index(idf), idf, table[idf].cast(pa.string()))
    df = table.to_pandas()
    df[OFFSET] = rows
    # a null text stays NA, as a Parquet writer meant it (stages that need text mark it missing_text)
    return _with_rejects(_standardise(df, piece, io_settings, meta), bad)


def _unreadable(piece: Piece, io_settings: IOSettings, meta, msg: str) -> pd.DataFrame:
    """A file that cannot be read: the run fails naming it, or with ``on_error="skip"`` it becomes
    one reject record (id: its name) so that it is counted and listed in _rejects/."""
    if io_settings.on_error != "skip":
        raise DataError(f"{piece.path}: corrupt_file: {msg} (use --on-error skip to make it a reject record)")
    where = piece.path if piece.row_groups is None else f"{piece.path} row groups {piece.row_groups[0]}-{piece.row_groups[-1]}"
    empty = _standardise(_records_frame([]), piece, io_settings, meta)
    return _with_rejects(empty, [_reject_row(piece.name, pd.NA, "corrupt_file", f"{where}: {msg}")])
