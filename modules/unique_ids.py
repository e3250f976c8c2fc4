"""Duplicate ids of a dataset (``curate verify --unique-ids DIR``), in bounded memory.

Each input partition becomes (h, id, piece) rows, ``h`` a 64-bit hash of the id; a hash-partitioned
shuffle on ``h`` sends every copy of an id to the same partition, where a count finds the duplicates.
No worker ever holds more than one partition's ids, and the client receives only counts and the
first ``examples`` duplicates of each partition, so neither grows with the dataset.

Rows the reader rejects (``_reason`` set: bad lines, non-string ids) take no part; their count is
reported beside the result.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd


@dataclass
class UniqueIdReport:
    documents: int = 0
    rejected: int = 0
    #: ids held by two or more documents
    duplicate_ids: int = 0
    #: documents beyond the first of each duplicate id
    extra_documents: int = 0
    #: (id, documents, [input files]) of the first duplicates, by id
    examples: list = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.duplicate_ids == 0


def id_rows(df: pd.DataFrame, piece: int) -> pd.DataFrame:
    """(h, id, piece) for the rows of one input partition that were not rejected."""
    from curate.stages.dataset import REASON, STRING

    good = df if REASON not in df.columns else df[df[REASON].isna()]
    ids = good["id"].astype(STRING).reset_index(drop=True)
    return pd.DataFrame({
        "h": pd.util.hash_pandas_object(ids, index=False).to_numpy(dtype=np.uint64),
        "id": ids,
        "piece": np.full(len(ids), piece, dtype=np.int32),
    })


def partition_duplicates(df: pd.DataFrame, examples: int) -> dict:
    """Counts of one shuffled partition and its first ``examples`` duplicate ids (with the pieces
    they were read from)."""
    counts = df["id"].value_counts()
    dup = counts[counts > 1].sort_index()
    first = dup.head(examples)
    pieces = df[df["id"].isin(first.index)].groupby("id")["piece"].agg(lambda p: sorted(set(p.tolist())))
    return {
        "ids": int(len(df)),
        "duplicate_ids": int(len(dup)),
        "extra_documents": int((dup - 1).sum()),
        "examples": [(str(i), int(n), pieces[i]) for i, n in first.items()],
    }


def _rejected(df: pd.DataFrame) -> int:
    from curate.stages.dataset import REASON

    return int(df[REASON].notna().sum()) if REASON in df.columns else 0


def check(specs, io_settings, compute, examples: int = 10) -> UniqueIdReport:
    """Find the duplicate ids of the dataset(s) ``specs``; ``compute`` runs delayed objects (a client's)."""
    import dask
    import dask.dataframe as dd

    from curate.stages import dataset
    from curate.stages.settings import parse_bytes

    ddf = dataset.read_dataset(specs, io_settings)
    files = dataset.expand_named(specs, allow_incomplete=io_settings.allow_incomplete)
    pieces = dataset.plan_pieces(files, parse_bytes(io_settings.blocksize, "blocksize"))
    parts = ddf.to_delayed()
    meta = id_rows(ddf._meta, 0).iloc[:0]
    rows = dd.from_delayed([dask.delayed(id_rows)(p, i) for i, p in enumerate(parts)], meta=meta,
                           divisions=[None] * (len(parts) + 1), verify_meta=False)
    shuffled = rows.shuffle(on="h", npartitions=max(1, len(parts)))
    found = [dask.delayed(partition_duplicates)(p, examples) for p in shuffled.to_delayed()]
    rejected = [dask.delayed(_rejected)(p) for p in parts]
    results = compute(*found, *rejected)
    stats, rejects = results[:len(found)], results[len(found):]
    report = UniqueIdReport(
        documents=sum(s["ids"] for s in stats),
        rejected=sum(rejects),
        duplicate_ids=sum(s["duplicate_ids"] for s in stats),
        extra_documents=sum(s["extra_documents"] for s in stats),
    )
    names = [p.name for p in pieces]
    shown = sorted(e for s in stats for e in s["examples"])[:examples]
    report.examples = [(i, n, list(dict.fromkeys(names[k] for k in ps))) for i, n, ps in shown]
    return report
