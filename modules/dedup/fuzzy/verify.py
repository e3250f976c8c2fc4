"""The false-positive check: the true Jaccard similarity of pairs of documents, from their texts (fetched
from the input partitions) or, against saved indexes, from shingle sets."""

from __future__ import annotations

import numpy as np
import pandas as pd

from curate.stages import dedup
from curate.stages.dedup.fuzzy.settings import SETS


def attach_text(edges: pd.DataFrame, part: pd.DataFrame, key: str, name: str) -> pd.DataFrame:
    """``edges`` with the text of the document numbered ``edges[key]`` (all in this input partition)."""
    from curate.stages.dataset import STRING

    rows = edges[key].to_numpy(dtype=np.int64) & dedup.ROW_MASK
    return edges.assign(**{name: part["text"].iloc[rows].astype(STRING).to_numpy()})


def input_texts(inputs, i: int) -> pd.DataFrame:
    """The ``text`` column of input partition ``i``, rows at the positions ``read_dataset`` gives them.

    A Parquet piece is read for its text column alone (its row order does not depend on the other
    columns); JSONL has to be parsed whole anyway."""
    from curate.stages.dataset import parquet_source
    from curate.stages.errors import DataError

    piece = inputs.pieces[i]
    if piece.kind != "parquet":
        return inputs.read(i)[["text"]]
    import pyarrow.parquet as pq

    field = inputs.io.text_field
    try:
        pf = pq.ParquetFile(parquet_source(piece.path))
        table = (pf.read_row_groups(list(piece.row_groups), columns=[field]) if piece.row_groups is not None
                 else pf.read(columns=[field]))
    except Exception as e:
        raise DataError(f"{piece.path}: cannot read column {field!r} from Parquet: {e}") from e
    return pd.DataFrame({"text": table.column(field).to_pandas()})


def _attach_text_task(edges, inputs, i, key, name):
    from curate.stages.dataset import STRING

    if edges.empty:  # no edge ends in this partition: nothing to read
        return edges.assign(**{name: pd.Series([], dtype=STRING, index=edges.index)})
    return attach_text(edges, input_texts(inputs, i), key, name)


def with_texts(frame, inputs, keys):
    """Delayed frames: ``frame`` with, for each (column, name) of ``keys``, the text of the document
    numbered by that column, fetched from its input partition (one range shuffle per key)."""
    import dask
    import dask.dataframe as dd

    from curate.stages.dataset import STRING

    attach = dask.delayed(_attach_text_task, pure=True)
    parts, meta = None, frame._meta
    for column, name in keys:
        if parts is not None:
            frame = dd.from_delayed(parts, meta=meta, divisions=[None] * (len(parts) + 1), verify_meta=False)
        parts = [attach(e, inputs, i, column, name)
                 for i, e in enumerate(dedup.route_to_input(frame, column, len(inputs)))]
        meta = meta.assign(**{name: pd.Series([], dtype=STRING)})
    return parts, meta


def sets_of_texts(texts: pd.Series, settings):
    from curate.stages.dedup import minhash

    return minhash.sets_to_binary(minhash.shingle_sets(texts, settings.ngram, settings.shingle))


def _attach_set_task(frame, inputs, joint, p, key, name, settings):
    """``frame`` (every document numbered by ``key`` in partition ``p``) with their shingle sets: an
    index's (its docs part) or computed from this run's texts."""
    if frame.empty:
        return frame.assign(**{name: pd.Series([], dtype=SETS, index=frame.index)})
    docs = frame[key].to_numpy(dtype=np.int64)
    if p >= joint.offset:
        texts = input_texts(inputs, p - joint.offset)["text"]
        picked = texts.iloc[docs & dedup.ROW_MASK].reset_index(drop=True).fillna("")
        sets = sets_of_texts(picked, settings)
    else:
        from curate.stages.dedup import index, minhash

        b = joint.base_of(p)
        sets = minhash.sets_to_binary(index.read_sets(b, p - b.offset, docs - (b.offset << dedup.DOC_SHIFT)))
    return frame.assign(**{name: pd.Series(pd.arrays.ArrowExtensionArray(sets), index=frame.index)})


def with_sets(frame, inputs, joint, settings, keys):
    """As :func:`with_texts`, with the shingle sets of the documents (index or input) instead."""
    import dask
    import dask.dataframe as dd

    attach = dask.delayed(_attach_set_task, pure=True)
    parts, meta = None, frame._meta
    total = joint.offset + len(inputs)
    for column, name in keys:
        if parts is not None:
            frame = dd.from_delayed(parts, meta=meta, divisions=[None] * (len(parts) + 1), verify_meta=False)
        parts = [attach(e, inputs, joint, i, column, name, settings)
                 for i, e in enumerate(dedup.route_to_input(frame, column, total))]
        meta = meta.assign(**{name: pd.Series([], dtype=SETS)})
    return parts, meta


def _jaccard_of_texts(df: pd.DataFrame, settings) -> pd.DataFrame:
    from curate.stages.dedup import minhash

    jac = minhash.jaccard(df["value_a"], df["value_b"], settings.ngram, settings.shingle)
    return df.drop(columns=["value_a", "value_b"]).assign(jaccard=jac)


def _jaccard_of_sets(df: pd.DataFrame, settings) -> pd.DataFrame:
    from curate.stages.dedup import minhash

    jac = minhash.jaccard_sets(minhash.sets_from_binary(df["value_a"]), minhash.sets_from_binary(df["value_b"]))
    return df.drop(columns=["value_a", "value_b"]).assign(jaccard=jac)


def similarities(frame, a: str, b: str, inputs, joint, settings):
    """Delayed frames: ``frame`` with ``jaccard``, the true Jaccard similarity of the documents numbered
    by columns ``a`` and ``b``: from their texts, or, against indexes, from shingle sets (the same
    sets the texts give, so the same value)."""
    import dask

    keys = [(a, "value_a"), (b, "value_b")]
    if joint.bases:
        parts, _ = with_sets(frame, inputs, joint, settings, keys)
        check = dask.delayed(_jaccard_of_sets, pure=True)
    else:
        parts, _ = with_texts(frame, inputs, keys)
        check = dask.delayed(_jaccard_of_texts, pure=True)
    return [check(p, settings) for p in parts], frame._meta.assign(jaccard=pd.Series([], dtype="float64"))


def _close(df: pd.DataFrame, threshold: float) -> pd.DataFrame:
    keep = df["jaccard"].to_numpy() >= threshold
    return df[keep].reset_index(drop=True)
