"""Step 3 of fuzzy dedup: candidate pairs as star edges within LSH buckets (k - 1 edges per bucket of k
documents, never k(k-1)/2 pairs), and the bucket centers a saved index keeps."""

from __future__ import annotations

import numpy as np
import pandas as pd

from curate.stages import dedup


def star_edges(buckets: pd.DataFrame) -> pd.DataFrame:
    """Within each bucket, an edge from every member to the bucket's smallest document."""
    b = buckets["bucket"].to_numpy(dtype=np.uint64)
    d = buckets["doc"].to_numpy(dtype=np.int64)
    order = np.lexsort((d, b))
    b, d = b[order], d[order]
    first = np.ones(len(b), dtype=bool)
    first[1:] = b[1:] != b[:-1]
    anchor = d[np.maximum.accumulate(np.where(first, np.arange(len(b)), 0))] if len(b) else d
    return pd.DataFrame({"u": d[~first], "v": anchor[~first]})


def _dedupe_edges(df):
    from curate.stages.dedup.components import canonical

    return canonical(df["u"], df["v"])


def bucket_centers(buckets: pd.DataFrame, joint) -> pd.DataFrame:
    """(bucket, center) of the buckets of this shuffled partition whose smallest document is this run's
    (the rest are the indexes'): the rows a saved index adds."""
    if buckets.empty:
        return pd.DataFrame({"bucket": pd.Series([], dtype="uint64"), "center": pd.Series([], dtype="int64")})
    first = buckets.groupby("bucket", sort=False)["doc"].min()
    first = first[joint.mine(first.to_numpy(dtype=np.int64))]
    return pd.DataFrame({"bucket": first.index.to_numpy(dtype=np.uint64), "center": first.to_numpy(dtype=np.int64)})


def _centers_task(buckets, joint, folder, i):
    stats = dedup.save_part(bucket_centers(buckets, joint), folder, i)
    return {"partition": i, "rows": 0, "centers": stats["rows"], "outputs": stats.get("outputs", [])}


def _star_edges_of_run(buckets, joint):
    """Star edges; against indexes, only those that reach this run's documents (index documents were
    compared with each other by the runs that made the indexes)."""
    edges = star_edges(buckets)
    if joint.bases:
        edges = edges[joint.mine(edges["u"].to_numpy(dtype=np.int64))]
    return edges
