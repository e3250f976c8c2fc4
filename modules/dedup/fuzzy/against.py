"""``--against`` saved indexes: where a run's documents live (:class:`Joint`) and the steps that bring an
index's bucket anchors, components and members into the run (the contract: the package doc)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from curate.stages import dedup


@dataclass(frozen=True)
class Joint:
    """Where the documents of a run live. A run without indexes: its input partitions. An ``--against``
    run numbers the indexes' documents first (``bases``, each from its ``offset``) and its own after
    them, from input partition ``offset``, with ``tier`` after the indexes' tiers: the numbering and
    the ranks of ``dedup(A + B)`` with A's documents preferred (see the module doc)."""

    bases: tuple = ()
    offset: int = 0
    tier: int = 0

    def base_of(self, p: int):
        for b in self.bases:
            if b.offset <= p < b.offset + b.partitions:
                return b
        raise IndexError(f"input partition {p} is in no index")

    def mine(self, docs: np.ndarray) -> np.ndarray:
        return docs >= (self.offset << dedup.DOC_SHIFT)

    def tiers_of(self, docs: np.ndarray) -> np.ndarray:
        """The tier of each document: its index's run (``tiers`` of the index), else this run's."""
        part = docs >> dedup.DOC_SHIFT
        tier = np.full(len(docs), self.tier, dtype=np.int64)
        for b in self.bases:
            inside = (part >= b.offset) & (part < b.offset + b.partitions)
            ends = np.asarray(b.tiers, dtype=np.int64) + b.offset
            tier[inside] = b.tier0 + np.searchsorted(ends, part[inside], side="right")
        return tier

    def labels_of(self, docs: np.ndarray):
        """The name of the index holding each document (None for this run's)."""
        from curate.stages.dataset import STRING

        names = np.full(len(docs), None, dtype=object)
        part = docs >> dedup.DOC_SHIFT
        for b in self.bases:
            names[(part >= b.offset) & (part < b.offset + b.partitions)] = b.label
        return pd.array(names, dtype=STRING)


def index_docs(ix, i: int, columns) -> pd.DataFrame:
    """Part ``i`` (the index's numbering) of an index's ``docs`` table, in this run's numbering."""
    return ix.shifted(ix.read("docs", i, columns))


def matched_centers(rows: pd.DataFrame, ix, i: int) -> pd.DataFrame:
    """(bucket, doc): for each bucket key of ``rows`` (this run's, routed to part ``i`` of index ``ix``)
    that the index holds, its anchors (the index's two smallest documents there, ``center`` and
    ``second``), in this run's numbering. The part is sorted by key: a binary search per key, no hash
    table of the index's side."""
    import pyarrow.parquet as pq

    table = pq.read_table(ix.path("buckets", i), columns=["bucket", "center", "second"])
    keys = table.column("bucket").to_numpy()
    wanted = np.unique(rows["bucket"].to_numpy(dtype=np.uint64))
    where = np.searchsorted(keys, wanted)
    hit = where < len(keys)
    hit[hit] = keys[where[hit]] == wanted[hit]
    centers = table.column("center").to_numpy()[where[hit]]
    seconds = table.column("second").to_numpy()[where[hit]]
    has = seconds >= 0  # -1: the index has one document in that bucket
    bucket = np.concatenate([wanted[hit], wanted[hit][has]])
    doc = np.concatenate([centers, seconds[has]]).astype(np.int64)
    return ix.shifted(pd.DataFrame({"bucket": bucket, "doc": doc}))


def anchor_edges(docs: pd.DataFrame, ix, p: int) -> pd.DataFrame:
    """(u, v) edges linking each index document of ``docs`` (all in input partition ``p`` of this run's
    numbering, in index ``ix``) to its component in the index; a document alone there has none."""
    from curate.stages.dedup.components import canonical

    table = ix.shifted(ix.read("labels", p - ix.offset, ["doc", "comp"]), ("doc", "comp"))
    hit = table[table["doc"].isin(docs["v"].to_numpy(dtype=np.int64))]
    hit = hit[hit["doc"].to_numpy() != hit["comp"].to_numpy()]
    return canonical(hit["doc"], hit["comp"])


def expanded_members(nodes: pd.DataFrame, ix, i: int) -> pd.DataFrame:
    """(doc, comp, label): every member of each index component whose label (its smallest document)
    is a node of ``nodes`` (label, comp: routed to part ``i`` of index ``ix``), with the joint component."""
    table = ix.shifted(ix.read("components", i, ["comp", "doc"]), ("comp", "doc"))
    hit = table.merge(nodes.rename(columns={"comp": "joint"}), left_on="comp", right_on="label", how="inner")
    return pd.DataFrame({"doc": hit["doc"].to_numpy(dtype=np.int64), "comp": hit["joint"].to_numpy(dtype=np.int64),
                         "label": hit["label"].to_numpy(dtype=np.int64)})


def attach_members(comps: pd.DataFrame, p: int, joint, sig_files, verified_path=None) -> pd.DataFrame:
    """(doc, comp, id, key, weight, tier[, loose]) of the members in input partition ``p``: an index's
    document (weight 1: only this run's documents are counted) or this run's (``loose``: see
    :func:`.decide.attach_ids`; an index's documents are never the loose end of a pair that holds one
    of this run's)."""
    comps = comps[["doc", "comp"]].drop_duplicates("doc")
    if p >= joint.offset:
        table = dedup.load_part(sig_files[p - joint.offset], ["doc", "id", "key", "weight"])
    else:
        b = joint.base_of(p)
        table = index_docs(b, p - b.offset, ["doc", "id", "key"]).assign(weight=np.int64(1))
    from curate.stages.dataset import STRING

    out = comps.merge(table, on="doc", how="left", validate="one_to_one")
    out = out.assign(id=out["id"].astype(STRING), tier=joint.tiers_of(out["doc"].to_numpy(dtype=np.int64)))
    if verified_path is None:
        return out
    from curate.stages.dedup.fuzzy.decide import with_loose

    return with_loose(out, verified_path)


def _matched_task(rows, ix, i, folder, j):
    return dedup.save_part(matched_centers(rows, ix, i), folder, j)


def _anchors_task(edges, joint, p, folder):
    return dedup.save_part(anchor_edges(edges, joint.base_of(p), p), folder, p)


def _index_part_column(nodes: pd.DataFrame, ix) -> pd.DataFrame:
    """``nodes`` with ``_part``: the index part of each label in the index's own numbering."""
    from curate.stages.dedup import index

    own = nodes["label"].to_numpy(dtype=np.int64) - (ix.offset << dedup.DOC_SHIFT)
    return nodes.assign(_part=index.part_of(own, ix.parts))


def _expanded_task(nodes, ix, i, folder, j):
    return dedup.save_part(expanded_members(nodes, ix, i), folder, j)
