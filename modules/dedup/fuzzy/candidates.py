"""Step 3 of fuzzy dedup: candidate pairs as star edges within LSH buckets (about 2k edges per bucket of k
documents, to its two smallest, never k(k-1)/2 pairs), and the bucket anchors a saved index keeps."""

from __future__ import annotations

import numpy as np
import pandas as pd

from curate.stages import dedup
from curate.stages.dedup.shared import rows_sharing

#: every bucket member is linked to this many of the bucket's smallest documents: a near-threshold copy
#: whose check against the first fails still joins its component through the second (issue 35)
ANCHORS = 2


def star_edges(buckets: pd.DataFrame, anchors: int = 1) -> pd.DataFrame:
    """Within each bucket, an edge from every member to the bucket's smallest document and, with
    ``anchors=2``, from every other member to its second smallest too (repeats are dropped later)."""
    b = buckets["bucket"].to_numpy(dtype=np.uint64)
    d = buckets["doc"].to_numpy(dtype=np.int64)
    rows = rows_sharing(b)  # most buckets are one document's: only the others' rows are sorted
    b, d = b[rows], d[rows]
    order = np.lexsort((d, b))
    b, d = b[order], d[order]
    first = np.ones(len(b), dtype=bool)
    first[1:] = b[1:] != b[:-1]
    start = np.maximum.accumulate(np.where(first, np.arange(len(b)), 0)) if len(b) else np.zeros(0, np.int64)
    rank = np.arange(len(b)) - start
    u, v = [d[rank >= 1]], [d[start[rank >= 1]]]
    if anchors >= 2:
        second = rank >= 2
        u.append(d[second])
        v.append(d[start[second] + 1])
    return pd.DataFrame({"u": np.concatenate(u), "v": np.concatenate(v)})


def _dedupe_edges(df):
    from curate.stages.dedup.components import canonical

    return canonical(df["u"], df["v"])


def bucket_centers(buckets: pd.DataFrame, joint) -> pd.DataFrame:
    """(bucket, center) rows of this shuffled partition: each bucket's anchors (its ``ANCHORS`` smallest
    documents) that are this run's (the others are the indexes'): the rows a saved index adds."""
    if buckets.empty:
        return pd.DataFrame({"bucket": pd.Series([], dtype="uint64"), "center": pd.Series([], dtype="int64")})
    rows = buckets[["bucket", "doc"]].drop_duplicates().sort_values(["bucket", "doc"])
    rows = rows[rows.groupby("bucket", sort=False).cumcount().to_numpy() < ANCHORS]
    rows = rows[joint.mine(rows["doc"].to_numpy(dtype=np.int64))]
    return pd.DataFrame({"bucket": rows["bucket"].to_numpy(dtype=np.uint64),
                         "center": rows["doc"].to_numpy(dtype=np.int64)})


def _centers_task(buckets, joint, folder, i):
    stats = dedup.save_part(bucket_centers(buckets, joint), folder, i)
    return {"partition": i, "rows": 0, "centers": stats["rows"], "outputs": stats.get("outputs", [])}


def _star_edges_of_run(buckets, joint, anchors=ANCHORS):
    """Star edges to the ``anchors`` smallest documents of each bucket (without the check one is enough:
    a second anchor adds no connection, only retries a failed check); against indexes, only those
    that reach this run's documents (index documents were compared with each other by the runs that
    made the indexes)."""
    edges = star_edges(buckets, anchors)
    if joint.bases:
        edges = edges[joint.mine(edges["u"].to_numpy(dtype=np.int64))]
    return edges
