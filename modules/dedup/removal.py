"""The removal step every dedup stage ends with: the input's partitions, each with its removed
documents marked (reason, ``_detail`` naming the kept document) and every document's
``dup_cluster_size``, from the rows (``doc``, ``kept_id``, ``removed``, ``size``) of a duplicates step
routed back to the input partitions."""

from __future__ import annotations

import numpy as np
import pandas as pd

from curate.stages.dedup import (
    DOC_SHIFT,
    ROW_MASK,
    Inputs,
    Routed,
    Steps,
    compact_partitions,
    list_parts,
    load_part,
    read_compact,
    route_to_groups,
)


def mark_removed(df: pd.DataFrame, removed: pd.DataFrame, reason: str) -> pd.DataFrame:
    """``df`` (input partition) with the rows listed in ``removed`` (doc, kept_id) marked as dropped.

    ``_detail`` names the kept document, so ``_rejects/`` says what each removed document duplicated
    (and the index that holds it when ``removed`` has ``kept_in``). Only rows not already dropped take
    part in dedup, so every listed row is still undropped here.
    """
    from curate.stages.dataset import DETAIL, STRING, mark_dropped

    rows = removed["doc"].to_numpy(dtype=np.int64) & ROW_MASK
    mask = np.zeros(len(df), dtype=bool)
    mask[rows] = True
    out = mark_dropped(df, mask, reason)
    detail = np.full(len(df), None, dtype=object)
    text = "duplicate of " + removed["kept_id"].astype(str)
    if "kept_in" in removed.columns:
        where = removed["kept_in"]
        text = text.where(where.isna(), text + " in index " + where.astype(str))
    detail[rows] = text.to_numpy()
    current = out[DETAIL] if DETAIL in out.columns else pd.Series(pd.NA, index=out.index, dtype=STRING)
    return out.assign(**{DETAIL: current.mask(mask, pd.Series(detail, index=out.index)).astype(STRING)})


def with_cluster_sizes(df: pd.DataFrame, kept: pd.DataFrame) -> pd.DataFrame:
    """``df`` (input partition) with ``dup_cluster_size``: the size of each kept group (``kept``: doc,
    size) where it has one, else what the document already stood for (see :mod:`.keep`)."""
    from curate.stages.dedup.keep import SIZE, weights

    size = weights(df, np.arange(len(df)))
    size[kept["doc"].to_numpy(dtype=np.int64) & ROW_MASK] = kept["size"].to_numpy(dtype=np.int64)
    return df.assign(**{SIZE: pd.array(size, dtype="Int64")})


def _mark_task(inputs: Inputs, i: int, routed: Routed, reason: str, offset: int = 0) -> pd.DataFrame:
    rows = routed.rows()
    if offset:
        rows = rows.assign(doc=rows["doc"] - (offset << DOC_SHIFT))
    if "rank" in rows.columns:
        return _mark_ranked(inputs.read(i), rows, reason)
    removed = rows["removed"].to_numpy(dtype=bool)
    df = mark_removed(inputs.read(i), rows[removed], reason)
    return with_cluster_sizes(df, rows[~removed])


def _mark_ranked(df: pd.DataFrame, rows: pd.DataFrame, reason: str) -> pd.DataFrame:
    """As :func:`_mark_task` for rows of two ranks (semantic dedup's resolve step): a removed document's
    kept_id is its highest-rank row's; a kept document's size is its rank-0 row's (else what it stood for
    already) plus the sizes of its rank-1 rows, the weight that chains resolved elsewhere bring."""
    from curate.stages.dedup.keep import SIZE, weights

    rows = rows.sort_values(["doc", "rank"], kind="stable")
    removed = rows["removed"].to_numpy(dtype=bool)
    gone = rows[removed].drop_duplicates("doc", keep="last")
    out = mark_removed(df, gone, reason)
    stay = rows[~removed]
    base = stay[stay["rank"].to_numpy() == 0]
    size = weights(df, np.arange(len(df)))
    size[base["doc"].to_numpy(dtype=np.int64) & ROW_MASK] = base["size"].to_numpy(dtype=np.int64)
    gains = stay[stay["rank"].to_numpy() > 0]
    np.add.at(size, gains["doc"].to_numpy(dtype=np.int64) & ROW_MASK, gains["size"].to_numpy(dtype=np.int64))
    return out.assign(**{SIZE: pd.array(size, dtype="Int64")})


def removal_frame(inputs: Inputs, steps: Steps, duplicates_step: str, reason: str, offset: int = 0):
    """The input dataset (same partitions, as :class:`curate.stages.dataset.Made` ones) with the removed documents of ``duplicates_step`` (a step, or steps whose rows carry a ``rank``) marked and
    every document's ``dup_cluster_size``. Rows of documents numbered below input partition ``offset``
    (a saved index's, in an ``--against`` run) are not this dataset's and are left out."""
    from curate.stages import dataset
    from curate.stages.dedup.keep import SIZE

    columns = ["doc", "kept_id", "removed", "size"]
    names = (duplicates_step,) if isinstance(duplicates_step, str) else tuple(duplicates_step)
    folders = [steps.path(n) for n in names]
    folder = folders[0]
    head = load_part(list_parts(folder)[0]).columns
    columns += [c for c in ("kept_in", "rank") if c in head]
    if len(folders) > 1:  # later steps' rows (rank 1) amend the first's
        import dask.dataframe as dd

        rows = dd.concat([read_compact(f, columns=columns) for f in folders])
    else:
        rows = read_compact(folder, columns=columns)
    # the index's documents (numbered below offset) are routed to partitions no task reads
    routed = route_to_groups(rows, "doc", offset + len(inputs), compact_partitions(folder))[offset:]
    meta = inputs.meta.assign(**{SIZE: pd.Series([], dtype="Int64")})
    return dataset.Made(_mark_task, [(inputs.only(i), i, r, reason, offset) for i, r in enumerate(routed)], meta,
                        inputs.sizes())
