"""Step 5, ``duplicates``: within each cluster, in blocks, which members are removed and for whom.

A cluster's members go in their ``--keep`` order (the ``clusters`` step's key, then id, then document
number). With ``t`` = float32(1 - eps) and ``cos`` the float32 dot product of unit vectors:

* ``nemo`` (NeMo Curator's rule, the default): member i is removed when max_{j<i} cos(i, j) >= t, over
  every earlier member, removed or not. Its ``nearest`` is that j (the first of equal maxima) and its
  ``kept_id`` the kept member reached by following nearest members back (each step goes to an earlier
  member and the first member is always kept); ``cosine`` is the max. No two kept members are that
  close, and removing a member never depends on whether an earlier one was kept.
* ``greedy``: members are decided in order; member i is removed when cos(i, j) >= t for some earlier
  *kept* member j (the first such j in order is its ``kept_id``, ``cosine`` their cosine), else kept.
  It removes a subset of what ``nemo`` removes (a member whose only close earlier members were removed
  stays), and it too keeps no two close members.

With ``--probes`` > 1 (``nemo`` only) a cluster's rows are its members and its *witnesses*: documents
whose home is another cluster but for which this one is among the ``probes`` nearest. Rows of both kinds
take their place in the cluster's order by their home key; a member is removed when an earlier row of
either kind is that close, a witness is decided only at home (here it only ends the chains that reach
it). So a document is removed when an earlier document of its home cluster, or an earlier one that
probes it, is within eps: a pair that a cluster boundary splits is still found when the earlier of the
two probes the later one's home. A member removed for a witness is a ``via`` row; its final kept id and
the weight it brings to the kept document are resolved by the next steps (:mod:`.resolve`).

Either way a block of at most ``block_size`` members is compared with earlier blocks (every member, or
the kept ones) ``block_size`` columns at a time and with itself: no matrix is larger than block_size^2,
whatever the cluster's size. Block boundaries are counted from the cluster's first member, so the
result is the same for any partitioning of the work; a float32 product of the same two vectors can
differ in its last bit between matrix shapes, which matters only for a pair within that of t.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from curate.stages import dedup
from curate.stages.dedup.semantic.embed import VECTOR, vectors_of

#: bins of the manifest's histogram of removed documents' cosines (from 1 - eps up to 1)
COSINE_BINS = 10


def decide_nemo(x: np.ndarray, t: np.float32, block: int):
    """(removed, nearest, cosine) of members ``x`` (unit rows in order) under NeMo's rule."""
    n = len(x)
    best = np.full(n, -np.inf, dtype=np.float32)
    nearest = np.arange(n)
    for s in range(0, n, block):
        xb = x[s:s + block]
        for c in range(0, s, block):  # earlier blocks: every member
            sims = xb @ x[c:c + block].T
            j = sims.argmax(1)
            m = sims[np.arange(len(xb)), j]
            better = m > best[s:s + len(xb)]
            best[s:s + len(xb)][better] = m[better]
            nearest[s:s + len(xb)][better] = c + j[better]
        sims = xb @ xb.T
        sims[np.triu_indices(len(xb))] = -np.inf  # only j < i
        if len(xb) > 1:
            j = sims[1:].argmax(1)
            m = sims[np.arange(1, len(xb)), j]
            rows = np.arange(s + 1, s + len(xb))
            better = m > best[rows]
            best[rows[better]] = m[better]
            nearest[rows[better]] = s + j[better]
    removed = best >= t
    return removed, nearest, np.where(removed, best, 0).astype(np.float32)


def decide_greedy(x: np.ndarray, t: np.float32, block: int):
    """(removed, kept_index, cosine) of members ``x`` under the greedy rule."""
    n = len(x)
    removed = np.zeros(n, dtype=bool)
    ref = np.arange(n)
    cosine = np.zeros(n, dtype=np.float32)
    kept_blocks: list[np.ndarray] = []  # indices of kept members, per block, in order
    for s in range(0, n, block):
        xb = x[s:s + block]
        m = len(xb)
        found = np.full(m, -1)
        for kept in kept_blocks:  # earlier kept members, in order: the first close one wins
            for c in range(0, len(kept), block):
                idx = kept[c:c + block]
                open_rows = np.flatnonzero(found < 0)
                if not len(open_rows):
                    break
                sims = xb[open_rows] @ x[idx].T
                hit = sims >= t
                rows = open_rows[hit.any(1)]
                if len(rows):
                    j = hit[hit.any(1)].argmax(1)
                    found[rows] = idx[j]
                    cosine[s + rows] = sims[hit.any(1)][np.arange(len(rows)), j]
        sims = xb @ xb.T
        close = np.tril(sims >= t, -1)  # j < i
        open_rows = found < 0
        has_close = close.any(1)
        kept_here = open_rows & ~has_close  # close to no earlier member of the block: kept
        for i in np.flatnonzero(open_rows & has_close):  # in order: decided by the earlier ones' fate
            earlier = np.flatnonzero(close[i, :i] & kept_here[:i])
            if len(earlier):
                found[i] = s + earlier[0]
                cosine[s + i] = sims[i, earlier[0]]
            else:
                kept_here[i] = True
        removed[s:s + m] = found >= 0
        ref[s:s + m] = np.where(found >= 0, found, np.arange(s, s + m))
        kept_blocks.append(np.flatnonzero(kept_here) + s)
    return removed, ref, cosine


def decide(x: np.ndarray, t, block: int, rule: str):
    """(removed, kept index, nearest index, cosine) of one cluster's members in order."""
    t = np.float32(t)
    if rule == "greedy":
        removed, ref, cosine = decide_greedy(x, t, block)
        return removed, ref, ref, cosine
    removed, nearest, cosine = decide_nemo(x, t, block)
    kept = np.arange(len(x))
    for i in np.flatnonzero(removed):  # nearest[i] < i: its kept member is already known
        kept[i] = kept[nearest[i]]
    return removed, kept, nearest, cosine


def plan_ranges(sizes: np.ndarray, budget: int) -> list[tuple[int, int]]:
    """Consecutive cluster ranges [a, b) of about ``budget`` rows each (a larger cluster alone)."""
    ranges, start, used = [], 0, 0
    for c, n in enumerate(sizes.tolist()):
        if c > start and used + n > budget:
            ranges.append((start, c))
            start, used = c, 0
        used += n
    return ranges + [(start, len(sizes))] if len(sizes) else [(0, 0)]


def read_range(paths, a: int, b: int) -> pa.Table:
    """The rows of clusters [a, b) of every cluster-sorted part (only the row groups that hold them)."""
    filters = [("cluster", ">=", a), ("cluster", "<", b)]
    tables = [pq.read_table(p, filters=filters) for p in paths]
    tables = [t for t in tables if t.num_rows] or tables[:1]
    return pa.concat_tables(tables) if len(tables) > 1 else tables[0]


def compare_range(table: pa.Table, t, block: int, rule: str):
    """The decisions of every cluster of ``table`` (member and witness rows, see the module doc):
    (duplicates frame, audit frame, links frame, cosines of removed members)."""
    import pandas as pd

    from curate.stages.dataset import STRING

    table = table.sort_by([("cluster", "ascending"), ("key", "ascending"), ("id", "ascending"),
                           ("doc", "ascending")])
    n = table.num_rows
    cluster = table.column("cluster").to_numpy()
    ids = np.array(table.column("id").to_pylist(), dtype=object)
    docs = table.column("doc").to_numpy()
    weight = table.column("weight").to_numpy()
    witness = (table.column("witness").to_numpy(zero_copy_only=False) if "witness" in table.column_names
               else np.zeros(n, dtype=bool))
    x = vectors_of(table, VECTOR)
    bounds = np.flatnonzero(np.diff(cluster)) + 1
    starts, ends = np.concatenate([[0], bounds]), np.concatenate([bounds, [n]])
    removed = np.zeros(n, dtype=bool)
    kept = np.arange(n)
    nearest = np.arange(n)
    cosine = np.zeros(n, dtype=np.float32)
    for a, b in zip(starts.tolist(), ends.tolist()):
        if b - a < 2:
            continue
        r, k, nr, cs = decide(x[a:b], t, block, rule)
        removed[a:b], kept[a:b], nearest[a:b], cosine[a:b] = r, k + a, nr + a, cs
    if witness.any():  # a witness is decided at its home: here it only ends the chains that reach it
        removed &= ~witness
        cosine[witness] = 0
        kept = np.arange(n)
        for i in np.flatnonzero(removed):  # nearest[i] < i, in i's cluster: its chain end is known
            kept[i] = kept[nearest[i]]
    member = ~witness
    size = np.zeros(n, dtype=np.int64)
    np.add.at(size, kept[member], weight[member])  # a kept member stands for itself and what chains to it
    via = removed & witness[kept]  # removed for a document decided elsewhere: resolved by the next step
    listed = member & (removed | (size > weight))
    rows = np.flatnonzero(listed)
    dups = pd.DataFrame({
        "doc": docs[rows], "id": pd.array(ids[rows], dtype=STRING),
        "kept_id": pd.array(ids[kept[rows]], dtype=STRING), "removed": removed[rows],
        "size": np.where(removed[rows], 0, size[rows]), "cosine": cosine[rows],
        "cluster": cluster[rows].astype(np.int32), "kept_doc": docs[kept[rows]], "via": via[rows],
        "rank": np.zeros(len(rows), dtype=np.int8)})
    gone = np.flatnonzero(removed)
    audit = pd.DataFrame({
        "id": pd.array(ids[gone], dtype=STRING), "kept_id": pd.array(ids[kept[gone]], dtype=STRING),
        "cosine": cosine[gone], "cluster": cluster[gone].astype(np.int32),
        "nearest_id": pd.array(ids[nearest[gone]], dtype=STRING), "doc": docs[gone], "via": via[gone]})
    # what the next step needs: each removed member whose chain ends at a witness, and each witness
    # that members chain to (the weight they bring to whatever keeps it)
    carriers = np.flatnonzero(witness & (size > 0))
    link_rows = np.concatenate([np.flatnonzero(via), carriers])
    links = pd.DataFrame({
        "doc": docs[link_rows], "id": pd.array(ids[link_rows], dtype=STRING),
        "end_doc": docs[kept[link_rows]], "end_id": pd.array(ids[kept[link_rows]], dtype=STRING),
        "carry": np.where(witness[link_rows], size[link_rows], 0).astype(np.int64)})
    return dups, audit, links, cosine[gone]


def compare_task(paths, a: int, b: int, t, block: int, rule: str, eps: float, folder, candidates, links,
                 j: int) -> dict:
    dups, trail, linked, cos = compare_range(read_range(paths, a, b), t, block, rule)
    stats = dedup.save_part(dups, folder, j)
    stats["outputs"] = (stats.get("outputs", []) + dedup.save_part(trail, candidates, j).get("outputs", [])
                        + dedup.save_part(linked, links, j).get("outputs", []))
    stats["removed"] = int(len(trail))
    edges = np.linspace(1.0 - eps, 1.0, COSINE_BINS + 1)
    stats["cosines"] = np.histogram(np.clip(cos, edges[0], 1.0), bins=edges)[0].tolist()
    return stats
