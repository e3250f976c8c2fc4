"""A dataset as a Dask DataFrame: one partition per piece, the schema inferred from the first records of the inputs."""

from __future__ import annotations

import pandas as pd

from curate.stages.dataset.budget import SCHEMA_LINE_LIMIT, _explicit_budget
from curate.stages.dataset.checks import _converted, _one_line, _record_problem
from curate.stages.dataset.contract import SCHEMA_PEEK, SCHEMA_SAMPLE
from curate.stages.dataset.discover import expand_named
from curate.stages.dataset.frames import _records_frame, _standardise
from curate.stages.dataset.pieces import Piece, parquet_source, plan_pieces
from curate.stages.dataset.read_jsonl import _iter_jsonl, _read_jsonl_piece
from curate.stages.dataset.read_parquet import _read_parquet_piece, _schema_sample
from curate.stages.errors import DataError
from curate.stages.settings import IOSettings, parse_bytes


def read_dataset(specs, io_settings: IOSettings | None = None, rejects_dir: str | None = None):
    """A Dask DataFrame over the inputs, one partition per piece (``dd.from_map``)."""
    import dask.dataframe as dd

    io_settings = io_settings or IOSettings()
    pieces, schema = _pieces_and_schema(specs, io_settings)
    # every partition is conformed to the schema (``schema=``); ``meta=`` only tells Dask what to expect
    return dd.from_map(
        read_piece, pieces, io_settings=io_settings, schema=schema, meta=schema, enforce_metadata=False,
        label="read", divisions=[None] * (len(pieces) + 1),
    )


def read_made(specs, io_settings: IOSettings | None = None):
    """The dataset as :class:`~curate.stages.dataset.write.Made` partitions, one per piece, each read in
    the task that transforms and writes it (small pieces several a task: :mod:`.groups`), without
    dask.dataframe."""
    from curate.stages.dataset.groups import piece_bytes
    from curate.stages.dataset.write import made_from

    io_settings = io_settings or IOSettings()
    pieces, schema = _pieces_and_schema(specs, io_settings)
    return made_from(read_piece, pieces, schema, sizes=piece_bytes(pieces), io_settings=io_settings, schema=schema)


def read_pieces(specs, io_settings: IOSettings | None = None) -> tuple[pd.DataFrame, list[Piece]]:
    """(schema, pieces) of the inputs, for a stage that maps whole partitions without
    dask.dataframe (tokenize: its import, which brings dask.array and scipy.fft, was a third of a
    small run's CPU): each task reads its piece itself (``read_piece(piece, io_settings, schema)``),
    one task per partition."""
    pieces, schema = _pieces_and_schema(specs, io_settings or IOSettings())
    return schema, pieces


def _pieces_and_schema(specs, io_settings: IOSettings) -> tuple[list[Piece], pd.DataFrame]:
    files = expand_named(specs, allow_incomplete=io_settings.allow_incomplete)
    pieces = plan_pieces(files, parse_bytes(io_settings.blocksize, "blocksize"))
    return pieces, infer_meta(pieces, io_settings)


def infer_meta(pieces: list[Piece], io_settings: IOSettings, max_pieces: int = 16) -> pd.DataFrame:
    """The dataset's schema: from the first readable Parquet file, or from up to ``SCHEMA_SAMPLE``
    records of the first JSONL pieces that have any (an empty first file does not decide the schema).

    A Parquet file whose footer cannot be read fails here naming it, or with ``on_error="skip"`` is
    passed over (``read_piece`` makes it one reject record)."""
    first = pieces[0]
    if first.kind == "parquet":
        import pyarrow.parquet as pq

        paths = list(dict.fromkeys(p.path for p in pieces if p.kind == "parquet"))[:max_pieces]
        for path in paths:
            try:
                schema = pq.ParquetFile(parquet_source(path)).schema_arrow
            except Exception as e:
                if io_settings.on_error != "skip":
                    raise DataError(f"{path}: corrupt_file: cannot read Parquet: {_one_line(e)} "
                                    "(use --on-error skip to make it a reject record)") from None
                continue
            return _standardise(_schema_sample(schema, io_settings), first, io_settings, meta=None).iloc[:0]
        return _standardise(_records_frame([]), first, io_settings, meta=None).iloc[:0]
    records = []
    limit = _explicit_budget(io_settings) or SCHEMA_LINE_LIMIT
    files = list(dict.fromkeys(p.path for p in pieces))[:max_pieces]
    starts = {}
    for p in pieces:
        starts.setdefault(p.path, p)
    known: set | None = None
    for path in files:
        # the first file with records decides the schema; every other file's first records add only the
        # columns that file alone has (a key that first appears in the third file must not vanish
        # silently), while a known column keeps its type (a later file that changes it is named)
        budget = SCHEMA_SAMPLE if known is None else SCHEMA_PEEK
        taken = 0
        for _, _, _, rec in _iter_jsonl(starts[path], limit):
            if isinstance(rec, dict) and _record_problem(rec, io_settings) is None:
                rec = _converted(rec, io_settings)
                if known is not None:
                    rec = {k: v for k, v in rec.items() if k not in known}
                if rec:
                    records.append(rec)
                taken += 1
                if taken >= budget:
                    break
        if records and known is None:
            known = {k for r in records for k in r}
    return _standardise(_records_frame(records), first, io_settings, meta=None).iloc[:0]


def read_piece(piece: Piece, io_settings: IOSettings, schema: pd.DataFrame | None = None) -> pd.DataFrame:
    """Read one piece into a pandas frame with the dataset's schema (pure apart from reading the file)."""
    if piece.kind == "parquet":
        return _read_parquet_piece(piece, io_settings, schema)
    return _read_jsonl_piece(piece, io_settings, schema)
