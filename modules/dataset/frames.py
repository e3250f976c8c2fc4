"""Frames as every reader hands them on: the dataset's column types, reject rows, and marking a document dropped (with a reason) instead of removing it."""

from __future__ import annotations

import logging

import numpy as np
import pandas as pd

from curate.stages.dataset.contract import DETAIL, INTERNAL, OFFSET, REASON, STRING
from curate.stages.dataset.pieces import Piece
from curate.stages.errors import DataError
from curate.stages.settings import IOSettings

log = logging.getLogger('curate.stages.dataset')


def _reject_row(ident, text, reason: str, detail: str) -> dict:
    return {"id": ident, "text": text, REASON: reason, DETAIL: detail}


def _with_rejects(df: pd.DataFrame, bad: list[dict]) -> pd.DataFrame:
    if not bad:
        return df
    rejects = pd.DataFrame(bad).reindex(columns=df.columns)
    df = pd.concat([df, rejects.astype(df.dtypes.to_dict(), errors="ignore")], ignore_index=True)
    return df.astype({"id": STRING, "text": STRING, REASON: STRING, DETAIL: STRING})


def _records_frame(records: list[dict]) -> pd.DataFrame:
    if not records:
        return pd.DataFrame({OFFSET: pd.Series([], dtype="int64")})
    return pd.DataFrame.from_records(records)


def _infer_dtype(values: pd.Series):
    sample = values.dropna()
    if sample.empty:
        # the empty frame of a typed schema (Parquet's) keeps its types: a float column read from
        # Parquet must not become a column of strings; a column of nulls only is a string column
        if len(values) == 0 and values.dtype != object and not pd.api.types.is_string_dtype(values.dtype):
            return values.dtype
        return STRING
    types_ = {type(v) for v in sample}
    if types_ <= {str}:
        return STRING
    if types_ <= {bool}:
        return "boolean"
    if types_ <= {int}:
        return "Int64"
    if types_ <= {int, float}:
        return "float64"
    return object


def _standardise(df: pd.DataFrame, piece: Piece, io_settings: IOSettings, meta: pd.DataFrame | None):
    """Rename the text/id fields, generate missing ids, add the internal columns, conform to ``meta``."""
    tf, idf = io_settings.text_field, io_settings.id_field
    if tf not in df.columns:
        if len(df):  # the readers reject such rows before they get here
            raise DataError(f"{piece.path}: no {tf!r} column (columns: {', '.join(map(str, df.columns))})")
        df = df.assign(**{tf: pd.Series([], dtype=STRING)})
    rename = {}
    if tf != "text":
        if "text" in df.columns:
            df = df.drop(columns=["text"])
        rename[tf] = "text"
    if idf != "id" and idf in df.columns:
        if "id" in df.columns:
            df = df.drop(columns=["id"])
        rename[idf] = "id"
    df = df.rename(columns=rename)
    offsets = df.pop(OFFSET) if OFFSET in df.columns else None
    if offsets is None:
        offsets = pd.Series(np.arange(len(df)), index=df.index)
    generated = piece.name + ":" + offsets.astype("int64").astype(STRING)
    if "id" in df.columns:
        ids = df["id"].astype(STRING).where(df["id"].notna(), generated)
    else:
        ids = generated
    df = df.assign(id=ids.astype(STRING), text=df["text"].astype(STRING) if len(df) else pd.Series([], dtype=STRING))
    for col in INTERNAL:
        if col not in df.columns:
            df[col] = pd.Series(pd.NA, index=df.index, dtype=STRING)
    rest = [c for c in df.columns if c not in ("id", "text", *INTERNAL)]
    df = df[["id", "text", *rest, *INTERNAL]]
    if meta is None:
        dtypes = {c: _infer_dtype(df[c]) for c in rest}
        return df.astype(dtypes) if dtypes else df
    extra = [c for c in df.columns if c not in meta.columns]
    if extra:
        log.warning("%s: columns %s are not in the dataset schema (from the first file) and are dropped",
                    piece.path, ", ".join(map(str, extra)))
    df = df.reindex(columns=meta.columns)
    try:
        return df.astype(meta.dtypes.to_dict())
    except (TypeError, ValueError) as e:
        raise DataError(f"{piece.path}: a column's type differs from the first file's: {e}") from e


def mark_dropped(df: pd.DataFrame, mask, reason: str) -> pd.DataFrame:
    """A copy of ``df`` where rows in ``mask`` (not already dropped) get ``_reason = reason``."""
    current = df[REASON] if REASON in df.columns else pd.Series(pd.NA, index=df.index, dtype=STRING)
    mask = pd.Series(mask, index=df.index).fillna(False).astype(bool) & current.isna()
    return df.assign(**{REASON: current.mask(mask, reason).astype(STRING)})


def split_rejects(df: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(kept rows without the internal columns, rejected rows)."""
    if REASON not in df.columns:
        return df.drop(columns=[c for c in INTERNAL if c in df.columns]), df.iloc[:0]
    bad = df[REASON].notna()
    kept = df[~bad].drop(columns=[c for c in INTERNAL if c in df.columns])
    return kept, df[bad]
