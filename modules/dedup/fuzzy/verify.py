"""The false-positive check: the true Jaccard similarity of pairs of documents, from their shingle sets.

The sets were written once, beside the signatures (:mod:`curate.stages.dedup.shingles`); no step after
that reads a text. A pair (a, b) is compared in the task of ``a``'s input partition (the pairs are
routed there: compact rows, one range shuffle): the task reads the sets of its ``a`` documents from
its own partition's file, then the sets of the ``b`` documents partition by partition, by byte ranges,
at most :data:`PAIR_SET_VALUES` values of them at a time. So a task holds its partition's sets (at
most), one batch of other sets and its pairs, whatever the size of the corpus or of a cluster; no set
ever travels through a shuffle. Against saved indexes, an index document's set comes from the
index's own shingles file the same way.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from curate.stages import dedup

#: the most set values (8 bytes each) of the second documents of pairs that one task holds at a time:
#: 4M values, 32 MiB (a 600-word page has about 600); with its own partition's sets, this bounds a
#: comparing task's memory
PAIR_SET_VALUES = 1 << 22


@dataclass(frozen=True)
class SetStore:
    """Where the shingle set of every document of a run lives (picklable): this run's input partition
    ``p`` (from ``joint.offset``) in ``sets/part-PPPPP.u64`` with (doc, start, count) in its signatures
    part; an index's partitions in the index's ``shingles`` files with its ``docs`` parts."""

    joint: object  # against.Joint
    sig_files: tuple
    sets: object  # the StepFolder of this run's sets files

    def table(self, p: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, str]:
        """(doc numbers (sorted), starts, counts, where) of partition ``p``'s documents with sets."""
        import pyarrow.parquet as pq

        if p >= self.joint.offset:
            path = self.sig_files[p - self.joint.offset]
            shift = 0
        else:
            b = self.joint.base_of(p)
            path, shift = b.path("docs", p - b.offset), b.offset << dedup.DOC_SHIFT
        t = pq.read_table(path, columns=["doc", "start", "count"])
        return (t.column("doc").to_numpy().astype(np.int64) + shift, t.column("start").to_numpy(),
                t.column("count").to_numpy(), path)

    def open(self, p: int):
        from curate.stages.dedup import index, shingles
        from curate.stages.output import Output

        if p >= self.joint.offset:
            return self.sets.out.open_read(f"{self.sets.rel}/{shingles.part_name(p)}")
        b = self.joint.base_of(p)
        return Output(b.url).open_read(b.rel(index.SHINGLES, p - b.offset))

    def read(self, p: int, docs: np.ndarray, table=None) -> tuple[np.ndarray, np.ndarray]:
        """(values, offsets) of the sets of ``docs`` (all in partition ``p``), in that order."""
        from curate.stages.dedup import shingles

        numbers, starts, counts, where = table if table is not None else self.table(p)
        start, count = shingles.locate(numbers, starts, counts, docs, where)
        with self.open(p) as f:
            return shingles.read_ranges(f, start, count, where)


def pair_jaccard(a: np.ndarray, b: np.ndarray, p: int, store: SetStore, budget: int | None = None) -> np.ndarray:
    """float64 per pair: the true Jaccard similarity of documents ``a[k]`` (all in partition ``p``) and
    ``b[k]`` (anywhere), from their shingle sets (see the module doc for what is held at once)."""
    from curate.stages.dedup import shingles

    budget = PAIR_SET_VALUES if budget is None else budget
    a = np.asarray(a, dtype=np.int64)
    b = np.asarray(b, dtype=np.int64)
    out = np.zeros(len(a), dtype=np.float64)
    if not len(a):
        return out
    own = store.table(p)
    ua, ia = np.unique(a, return_inverse=True)
    va, oa = store.read(p, ua, own)
    order = np.argsort(b, kind="stable")  # by b: its partitions in turn, each set read once per batch
    sb = b[order]
    parts = sb >> dedup.DOC_SHIFT
    bounds = np.flatnonzero(np.diff(parts)) + 1
    for rows, q in zip(np.split(order, bounds), parts[np.r_[0, bounds]]):
        q = int(q)
        ub, ib = np.unique(b[rows], return_inverse=True)
        numbers, starts, counts, where = own if q == p else store.table(q)
        start, count = shingles.locate(numbers, starts, counts, ub, where)
        batch = (np.cumsum(count) - count) // max(budget, 1)  # sets of one batch: at most budget values + one set
        cuts = np.flatnonzero(np.diff(batch)) + 1
        with store.open(q) as f:
            for lo, hi in zip(np.r_[0, cuts], np.r_[cuts, len(ub)]):
                vb, ob = shingles.read_ranges(f, start[lo:hi], count[lo:hi], where)
                s0, s1 = np.searchsorted(ib, [lo, hi])  # ib ascends: rows are sorted by b
                pick = rows[s0:s1]
                out[pick] = shingles.jaccard_indexed(va, oa, ia[pick], vb, ob, ib[s0:s1] - lo)
    return out


def close_pairs(pairs: pd.DataFrame, a: str, b: str, p: int, store: SetStore, threshold: float) -> pd.DataFrame:
    """The rows of ``pairs`` whose documents ``a`` and ``b`` are at least ``threshold`` similar."""
    jac = pair_jaccard(pairs[a].to_numpy(), pairs[b].to_numpy(), p, store)
    return pairs[jac >= threshold].reset_index(drop=True)


#: how far below the threshold a near miss may be: a document none of whose own star edges pass the
#: check still joins the component of its most similar anchor when that similarity is at least
#: threshold - NEAR_MISS (see :func:`verified_edges`)
NEAR_MISS = 0.1


def verified_edges(edges: pd.DataFrame, jaccard: np.ndarray, threshold: float) -> pd.DataFrame:
    """(u, v, loose): the edges whose similarity reaches ``threshold`` and, for each document ``u`` none
    of whose edges (u, v < u) does, one *loose* edge to its most similar ``v`` (the smallest of ties)
    when that similarity is a near miss (at least threshold - NEAR_MISS).

    Why: a star edge goes to a bucket's smallest documents, which need not be the ones a document is
    close to (in a cloud of near copies, a copy far from the few smallest copies but close to dozens
    of others would otherwise never meet them). A loose edge only puts the document in the
    component; the decision rounds still remove it only for a kept document it is close to, and a
    component of two joined by a loose edge is compared like any other. Whether ``u`` gets one
    depends only on its own edges, which an ``--against`` run and the joint run share."""
    u = edges["u"].to_numpy(dtype=np.int64)
    v = edges["v"].to_numpy(dtype=np.int64)
    ok = jaccard >= threshold
    out = pd.DataFrame({"u": u[ok], "v": v[ok], "loose": np.zeros(int(ok.sum()), dtype=bool)})
    failed = ~np.isin(u, u[ok]) & (jaccard >= threshold - NEAR_MISS)
    if failed.any():
        fu, fv, fj = u[failed], v[failed], jaccard[failed]
        order = np.lexsort((fv, -fj, fu))  # per u: the most similar, then the smallest v
        first = np.r_[True, fu[order][1:] != fu[order][:-1]]
        pick = order[first]
        out = pd.concat([out, pd.DataFrame({"u": fu[pick], "v": fv[pick], "loose": np.ones(len(pick), dtype=bool)})],
                        ignore_index=True)
    return out


def _verify_task(edges: pd.DataFrame, p: int, store: SetStore, threshold: float, folder) -> dict:
    """Part ``p`` of ``verified``: the edges of partition ``p``'s documents ``u`` (all of each one's own
    edges are here) that pass the check, and their loose edges (``edges``: a :class:`~curate.stages.dedup.Routed`
    group's rows, or the frame itself)."""
    if isinstance(edges, dedup.Routed):
        edges = edges.rows()
    jac = pair_jaccard(edges["u"].to_numpy(), edges["v"].to_numpy(), p, store)
    # in (u, v) order: the edges arrive from the shuffle in whatever order its pieces came, which differs
    # between a cluster and an in-process run, and the same input must give the same bytes
    out = verified_edges(edges, jac, threshold).sort_values(["u", "v"], kind="stable", ignore_index=True)
    stats = dedup.save_part(out, folder, p)
    stats["loose"] = int(out["loose"].sum())
    return stats
