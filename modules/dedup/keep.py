"""``--keep``: which document of a duplicate group survives; ``dup_cluster_size``: how many it stands for.

Policies (``--keep``, the same in ``exact_dedup`` and ``fuzzy_dedup``):

- ``hub`` (fuzzy dedup's default): the document similar to the most others of its group, then the
  smallest id (:mod:`curate.stages.dedup.fuzzy`); copies in an exact or URL group are not compared
  with each other, so there it keeps the smallest id;
- ``smallest-id`` (exact dedup's default, curate's behaviour before the option existed): the smallest
  id, in fuzzy dedup too, however many others the document is similar to;
- ``newest[:COLUMN]`` / ``oldest[:COLUMN]``: the largest / smallest value of a date-like column,
  ``warc_date`` when none is named (the WARC-Date that curate's Common Crawl extraction writes; Dolma 3
  keeps the most recent crawl). Timestamps, ISO 8601 strings (``2024-05-01``, ``2024-05-01T12:00:00Z``;
  without a zone they are UTC) or numbers (a snapshot number, ``20240501``: larger is newer);
- ``longest``: the longest text, in Unicode characters;
- ``priority:COLUMN``: the largest value of a numeric column (datatrove's document priority; larger
  wins, so a column "snapshot" of 1 for old data and 2 for new data with ``--keep priority:snapshot``
  prefers the new data).

Ties always fall back to the smallest id, then to the document read first (in fuzzy dedup, under
every policy but ``smallest-id``, the document similar to the most others comes before the smallest
id). Each policy becomes one float64 *key* per document, smaller is preferred, and every step ranks by
``(tier, key, id, doc)`` (``tier`` orders saved indexes before the new data in ``--against`` runs, see
:mod:`curate.stages.dedup.index`; it is 0 otherwise). Dates become seconds since 1970 (exact to a
microsecond for today's dates), numbers their float64 value (integers beyond 2**53 lose their last
digits).

A keep column must exist and hold a value for every document: before any work (exit 2) curate reads
each input's schema (a curate output's manifest, Parquet footers, the first JSONL file's first
records) and, for Parquet, the null counts of the footers (a row group without statistics has its
column read); a null there is refused naming the column, the file and the row. JSONL has no footer:
a null past the sampled records fails the run's first step (exit 1) naming the column, the file and
the document.

``dup_cluster_size`` (Int64, every kept document): the number of input documents the document stands
for, itself plus the documents removed for it (exact: its hash group; fuzzy: the documents the refine
rule removed for it, see :mod:`curate.stages.dedup.fuzzy`); 1 without duplicates. When the input already
has the column (an earlier dedup stage), its values are added instead of ones, so after
``exact_dedup`` then ``fuzzy_dedup`` it counts every original copy (a null there counts as 1).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from curate.stages.errors import DataError, SettingsError

SIZE = "dup_cluster_size"
DEFAULT = "smallest-id"
#: the date column of ``newest`` / ``oldest`` without one: what curate's WARC extraction writes
DATE_COLUMN = "warc_date"
POLICIES = ("hub", "smallest-id", "newest", "oldest", "longest", "priority")
#: the ranking columns of every step, most significant first
RANK = ("tier", "key", "id", "doc")


@dataclass(frozen=True)
class Policy:
    kind: str
    column: str | None = None

    def __str__(self) -> str:
        return self.kind + (f":{self.column}" if self.column else "")


def parse(spec: str) -> Policy:
    """A ``--keep`` value as a Policy (SettingsError naming the value when it is not one)."""
    kind, _, column = str(spec).partition(":")
    usage = "hub, smallest-id, newest[:COLUMN], oldest[:COLUMN], longest or priority:COLUMN"
    if kind not in POLICIES:
        raise SettingsError(f"keep must be one of {usage}; got {spec!r}")
    if kind in ("hub", "smallest-id", "longest") and column:
        raise SettingsError(f"keep {kind} takes no column; got {spec!r}")
    if kind == "priority" and not column:
        raise SettingsError(f"keep priority needs a column: priority:COLUMN; got {spec!r}")
    if kind in ("newest", "oldest"):
        column = column or DATE_COLUMN
    if column is not None and (column in ("id", "text") or column.startswith("_")):
        raise SettingsError(f"keep {spec!r}: {column!r} is not a metadata column")
    return Policy(kind, column or None)


# --------------------------------------------------------------------------- keys, per partition


def keys(df: pd.DataFrame, pos: np.ndarray, policy: Policy, where: str) -> np.ndarray:
    """float64 keys (smaller is preferred) of the rows ``pos`` of one input partition; DataError naming
    the column, ``where`` (the input file) and the document when a value is null or not a date."""
    if policy.kind in ("hub", "smallest-id"):
        return np.zeros(len(pos), dtype=np.float64)
    if policy.kind == "longest":
        return -df["text"].iloc[pos].fillna("").str.len().to_numpy(dtype=np.float64)
    if policy.column not in df.columns:
        raise DataError(f"{where}: --keep {policy}: no column {policy.column!r}")
    values = df[policy.column].iloc[pos]
    null = values.isna().to_numpy()
    if null.any():
        raise _null(policy, where, df, pos, int(np.flatnonzero(null)[0]))
    if policy.kind == "priority":
        if not pd.api.types.is_numeric_dtype(values) or pd.api.types.is_bool_dtype(values):
            raise DataError(f"{where}: --keep {policy}: column {policy.column!r} is {values.dtype}, not a number")
        return -values.to_numpy(dtype=np.float64)
    number = date_numbers(values, policy, where, df, pos)
    return -number if policy.kind == "newest" else number


def date_numbers(values: pd.Series, policy: Policy, where: str, df=None, pos=None) -> np.ndarray:
    """Larger is newer: numbers as they are, timestamps and ISO 8601 strings as seconds since 1970."""
    if pd.api.types.is_numeric_dtype(values) and not pd.api.types.is_bool_dtype(values):
        return values.to_numpy(dtype=np.float64)
    if pd.api.types.is_datetime64_any_dtype(values):
        stamps = values if getattr(values.dt, "tz", None) is not None else values.dt.tz_localize("UTC")
    else:
        if not (pd.api.types.is_string_dtype(values) or values.dtype == object):
            raise DataError(f"{where}: --keep {policy}: column {policy.column!r} is {values.dtype}, not a date")
        stamps = pd.to_datetime(values.astype(object), utc=True, format="ISO8601", errors="coerce")
        bad = stamps.isna().to_numpy()
        if bad.any():
            k = int(np.flatnonzero(bad)[0])
            ident = f" of document {df['id'].iloc[pos[k]]!r}" if df is not None else ""
            raise DataError(f"{where}: --keep {policy}: {values.iloc[k]!r}{ident} in column {policy.column!r} "
                            "is not an ISO 8601 date")
    seconds = (stamps - pd.Timestamp(0, tz="UTC")) / pd.Timedelta(seconds=1)
    return seconds.to_numpy(dtype=np.float64)


def _null(policy: Policy, where: str, df: pd.DataFrame, pos: np.ndarray, k: int) -> DataError:
    return DataError(f"{where}: --keep {policy}: column {policy.column!r} is null for document "
                     f"{df['id'].iloc[pos[k]]!r} (row {int(pos[k])} of this input partition); every document "
                     "needs a value")


def weights(df: pd.DataFrame, pos: np.ndarray) -> np.ndarray:
    """int64: what each document already stands for (an earlier stage's ``dup_cluster_size``, else 1)."""
    if SIZE not in df.columns:
        return np.ones(len(pos), dtype=np.int64)
    values = pd.to_numeric(df[SIZE].iloc[pos], errors="coerce")
    return values.fillna(1).to_numpy(dtype=np.int64)


def rank_order(df: pd.DataFrame, first: tuple[str, ...] = ()) -> pd.DataFrame:
    """``df`` sorted by ``first`` columns, then the rank (columns of RANK it has)."""
    return df.sort_values([*first, *(c for c in RANK if c in df.columns)], kind="stable")


# --------------------------------------------------------------------------- before any work


def check_inputs(policy: Policy, inputs) -> None:
    """Refuse (SettingsError naming the column, the file and, for a null, the row) a keep column
    missing from an input or null in a Parquet input, or a column of the wrong type; JSONL: the
    first file's sampled records (the rest is checked while the first step reads it)."""
    if policy.column is None:
        return
    from curate.stages import dataset

    try:
        files = dataset.expand_named(inputs, allow_incomplete=True)
    except (SettingsError, DataError):
        return  # the input checks name the problem
    jsonl_seen = False
    for path, _name in files:
        if dataset._kind(path) == "parquet":
            _check_parquet(policy, path)
        elif not jsonl_seen:
            jsonl_seen = True
            _check_jsonl(policy, path)


def _kind_error(policy: Policy, what: str, where: str) -> SettingsError:
    need = "a number" if policy.kind == "priority" else "a date (timestamp, ISO 8601 string or number)"
    return SettingsError(f"--keep {policy}: column {policy.column!r} of {where} is {what}, not {need}")


def _check_parquet(policy: Policy, path: str) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    from curate.stages.dataset import parquet_source

    try:
        pf = pq.ParquetFile(parquet_source(path))
    except Exception:
        return  # a corrupt file: the reader names it
    schema = pf.schema_arrow
    if policy.column not in schema.names:
        raise SettingsError(f"--keep {policy}: input {path} has no column {policy.column!r} "
                            f"(columns: {', '.join(schema.names)})")
    t = schema.field(policy.column).type
    numeric = pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_decimal(t)
    datelike = numeric or pa.types.is_timestamp(t) or pa.types.is_date(t) or pa.types.is_string(t) \
        or pa.types.is_large_string(t)
    if not (numeric if policy.kind == "priority" else datelike):
        raise _kind_error(policy, str(t), f"input {path}")
    md = pf.metadata
    col = schema.get_field_index(policy.column)
    leaf = [i for i in range(md.num_columns) if md.schema.column(i).path.split(".")[0] == policy.column]
    first_row = 0
    for g in range(md.num_row_groups):
        rg = md.row_group(g)
        stats = rg.column(leaf[0]).statistics if leaf else None
        nulls = stats.null_count if stats is not None and stats.has_null_count else None
        if nulls is None or nulls > 0 or (pa.types.is_floating(t) and rg.num_rows):
            values = pf.read_row_group(g, columns=[schema.names[col]]).column(0)
            missing = values.is_null(nan_is_null=True) if pa.types.is_floating(t) else values.is_null()
            hits = np.flatnonzero(missing.to_numpy(zero_copy_only=False))
            if len(hits):
                raise SettingsError(f"--keep {policy}: column {policy.column!r} is null in {path} row "
                                    f"{first_row + int(hits[0])}; every document needs a value")
        first_row += rg.num_rows


def _check_jsonl(policy: Policy, path: str) -> None:
    from curate.stages import dataset

    seen = 0
    piece = dataset.plan_pieces([(path, path)], 1 << 62)[0]
    for _offset, index, _line, rec in dataset._iter_jsonl(piece, dataset.SCHEMA_LINE_LIMIT):
        if not isinstance(rec, dict):
            continue  # a broken line: the reader names it
        seen += 1
        value = rec.get(policy.column)
        if value is None:
            what = "has no" if policy.column not in rec else "a null in"
            raise SettingsError(f"--keep {policy}: {path} line {index + 1} {what} column {policy.column!r}; "
                                "every document needs a value")
        if policy.kind == "priority" and (isinstance(value, bool) or not isinstance(value, (int, float))):
            raise _kind_error(policy, type(value).__name__, f"{path} line {index + 1}")
        if seen >= dataset.SCHEMA_SAMPLE:
            break
