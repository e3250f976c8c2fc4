"""``fuzzy_dedup``: remove near duplicates with MinHash-LSH, on CPU workers, every step distributed.

``curate dedup fuzzy --input D --output OUT [--threshold 0.8] [--num-perm 128] [--bands B --rows R]
[--ngram 5] [--shingle word|char] [--seed 42] [--false-positive-check] [--keep POLICY]
[--save-index IDX] [--against IDX [IDX ...]]``

Steps, each writing Parquet under ``OUT/_work/<step>/`` (resumable, see :mod:`curate.stages.dedup`):

1. ``signatures``: per input partition, (doc, id, sig, key, weight) where ``sig`` is the MinHash
   signature (``num_perm`` little-endian uint32 as one fixed-size binary value) of the document's
   shingles (:mod:`curate.stages.dedup.minhash`: datasketch's definition, computed by a numba kernel),
   ``key`` its keep rank and ``weight`` what it stands for (:mod:`curate.stages.dedup.keep`). Documents
   already dropped upstream and documents without shingles (empty after normalising) are left out.
2. ``buckets``: per signatures part, one (bucket, doc) row per band (:mod:`curate.stages.dedup.lsh`).
3. ``edges``: shuffle on ``bucket``; in every bucket of two or more documents each member is linked
   to the bucket's smallest document (star edges: k - 1 edges per bucket, not k(k-1)/2 pairs);
   shuffle on the edge's larger end to drop repeats. Rows (u, v), u > v.
4. ``verified`` (``--false-positive-check`` only): the true Jaccard similarity of each edge's two
   shingle sets; edges below the threshold are dropped. The texts come from the input partitions:
   edges are range-partitioned by ``u`` next to their input partition, then by ``v``.
5. ``components``: connected components (:mod:`curate.stages.dedup.components`), distributed large-star /
   small-star, or union-find in one task when there are at most ``in_memory_edges`` edges.
6. ``members``: components go back to their input partitions to pick up ids and keep keys, then a
   shuffle on the component: (doc, comp, id, key, weight), every component in one partition.
7. ``refine/round-NN`` (``--false-positive-check`` only): a document is removed only if its own true
   Jaccard similarity to the document it is removed for reaches the threshold (see below), so a
   chain A ~ B ~ C never removes C for a far-away A; a component can then keep more than one document.
8. ``duplicates``: without the check, each component keeps its first member by ``--keep`` and the rest
   are removed. Writes (doc, id, component, kept_id, removed, size) and, for audit,
   ``OUT/_duplicates/`` with (id, component, kept_id, removed) for every document of every component
   of two or more (``component`` is the smallest document number in it, ``kept_id`` the document it
   was removed for, ``size`` a kept document's ``dup_cluster_size``: its weight and those of the
   documents removed for it).
9. The dataset, with the removed documents dropped as ``fuzzy_duplicate`` (``_rejects/`` holds their
   ids, ``_detail`` names the kept id) and ``dup_cluster_size`` on every kept one. Output partition i
   is input partition i.

**The decision rule.** Documents are ranked by ``(tier, key, id, doc)``: the keep policy's key, then
the smallest id, then the document read first (``tier`` is 0 except against indexes, below). With the
check, within each connected component, in rank order, a document is kept unless its true Jaccard
similarity to an earlier *kept* document of its component reaches the threshold; it is then removed
for the first such. (The refine rounds compute exactly this: round k keeps the first undecided member
of each component and removes the undecided members close to it, so the kept documents are taken in
rank order and each member meets them in that order; a component of two is one verified edge, so its
second document goes in round 1 without texts. After ``MAX_REFINE_ROUNDS`` rounds the undecided are
kept.) Without the check, a component keeps its first document and removes the others.

**Against saved indexes** (``--against IDX``, :mod:`curate.stages.dedup.index`). The contract: the
run removes from B exactly what ``dedup(A + B)`` removes from B when A's documents are preferred (A's
files first, every A document ranked before every B document and among themselves as A's own run
ranked them: ``--keep oldest:COLUMN`` with A older, when A's run kept the smallest ids), with the same
kept ids and cluster sizes. Why the run below achieves it:

- *Numbering.* The joint run numbers A's documents first, in A's own order, then B's; the
  against-run gives B's documents the same numbers (its partitions start after the index's
  ``partitions``), and the index keeps A's numbers. Ranks agree too: A's documents come first
  (``tier``: an index's documents rank before this run's; within the index by its own keys, ids and
  numbers, as in the joint run given unique ids).
- *Edges.* A star edge goes to the smallest document of its bucket; every A document is smaller than
  every B document, so a bucket holding any A document has its center in A, and the joint run's edges
  are A's own edges plus one edge from each B document to the center of each of its buckets: the
  index's center (``buckets`` table) where A has that bucket key, else the smallest B document there.
  Edges between A documents are A's own run's. Verification is per edge, and the Jaccard of a B text
  and an A shingle set equals the Jaccard of the two texts (the index keeps exactly the sets the check
  builds from texts). So the joint verified graph is A's verified graph plus the against-run's
  verified edges.
- *Components.* A's verified graph survives in the index as its components (``labels``,
  ``components``). The components of the joint graph that hold a B document are therefore those of:
  the against-run's verified edges, plus an edge from every A document they reach to its component's
  label (``anchors``); each A component met is then expanded to all its members (``expanded``),
  kept or removed by A's own run. Components without a B document are A's and decide nothing in B.
- *Decisions.* The rule above depends only on a component's members, their ranks and the similarity
  of pairs of them; the against-run runs the same rounds on the same members with the same ranks and
  similarities (an A member's shingle set from the index), so every member of a joint component that
  holds a B document is decided as in the joint run, A's members included, round limit included.

This covers (a) a B document close to a kept A document: removed for it; (b) a chain A1 ~ A2 ~ B1
where A's run removed A2 for A1: B1 meets A1 through A2's component and is removed only when it is
itself close to A1 (as in the joint run; an index of A's kept documents alone would miss the link,
one of the removed ones alone would remove B1 for A2); (c) two A components that B joins: decided
together, as in the joint run. Against several indexes, each one's documents are numbered after the
previous ones'; documents of different indexes are compared only through this run's (indexes saved
with ``--save-index`` on an ``--against`` run hold their bases, so a chain of snapshots is exact).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd
import pyarrow as pa

from curate.stages import dedup
from curate.stages.dedup import keep as keeping
from curate.stages.errors import SettingsError
from curate.stages.stage import Stage, check_choice, check_range

REASON = "fuzzy_duplicate"
#: a column of shingle sets while they travel with edges: each the little-endian bytes of its sorted
#: distinct 64-bit hashes (minhash.sets_to_binary; Dask's P2P shuffle cannot move Arrow list columns)
SETS = pd.ArrowDtype(pa.large_binary())


@dataclass(frozen=True)
class FuzzyDedupSettings:
    threshold: float = field(default=0.8, metadata={
        "help": "Jaccard similarity of near duplicates; chooses bands x rows unless both are given "
                "(the most rows per band that make a pair at the threshold a candidate with p >= 0.99)",
        "metavar": "T"})
    num_perm: int = field(default=128, metadata={"help": "MinHash permutations (signature length)",
                                                    "metavar": "N"})
    bands: int | None = field(default=None, metadata={"help": "LSH bands (with --rows)", "metavar": "B"})
    rows: int | None = field(default=None, metadata={"help": "LSH rows per band (with --bands)", "metavar": "R"})
    ngram: int = field(default=5, metadata={"help": "shingle size in words (or characters)", "metavar": "N"})
    shingle: str = field(default="word", metadata={"help": "shingles of words or of characters",
                                                   "choices": ("word", "char")})
    seed: int = field(default=42, metadata={"help": "seed of the MinHash permutations", "metavar": "S"})
    false_positive_check: bool = field(default=True, metadata={
        "help": "compute the true Jaccard of candidate pairs and drop those below the threshold; remove a "
                "document only for one it is itself similar to (--no-false-positive-check: trust the bands)"})
    in_memory_edges: int = field(default=1_000_000, metadata={
        "help": "connected components in one task when there are at most this many edges (0: always distributed)",
        "metavar": "N"})
    keep: str = field(default=keeping.DEFAULT, metadata={
        "help": "the survivor of each group: smallest-id, newest[:COLUMN] / oldest[:COLUMN] (a date column, "
                "default warc_date), longest (text), priority:COLUMN (largest value); ties: smallest id",
        "metavar": "POLICY"})
    save_index: str | None = field(default=None, metadata={
        "help": "also write the dedup index (LSH bucket keys, ids, signatures, shingle sets, components) to this "
                "directory, a curate output of its own (manifest, checksums, _SUCCESS, curate verify); with "
                "--against: the index of the union", "metavar": "IDX"})
    against: tuple[str, ...] = field(default=(), metadata={
        "help": "saved indexes (--save-index) to deduplicate against, as if their documents came first in this "
                "run and were preferred; they are not read whole and the data they came from not at all",
        "metavar": "IDX", "nargs": "+", "input_file": True})

    def __post_init__(self):
        keeping.parse(self.keep)
        if not 0.0 < self.threshold < 1.0:
            raise SettingsError(f"threshold must be between 0 and 1 (exclusive); got {self.threshold!r}")
        check_range(self, "num_perm", 1, 8192)
        check_range(self, "ngram", 1, 1000)
        check_range(self, "seed", 0, 2**32 - 1)
        check_range(self, "in_memory_edges", 0)
        check_choice(self, "shingle")
        if (self.bands is None) != (self.rows is None):
            raise SettingsError(f"bands and rows go together; got bands={self.bands!r} rows={self.rows!r}")
        if self.bands is not None:
            check_range(self, "bands", 1)
            check_range(self, "rows", 1)
            if self.bands * self.rows > self.num_perm:
                raise SettingsError(
                    f"bands x rows must be at most num_perm ({self.num_perm}); got {self.bands} x {self.rows}")

    def lsh_params(self) -> tuple[int, int]:
        """(bands, rows): given, or derived from the threshold (call once, on the client)."""
        if self.bands is not None:
            return self.bands, self.rows
        from curate.stages.dedup.lsh import recall_params

        return recall_params(self.threshold, self.num_perm)


# --------------------------------------------------------------------------- per-partition work


def signature_table(df: pd.DataFrame, partition: int, settings: FuzzyDedupSettings, where: str = ""):
    """(doc, id, sig, key, weight) of the documents of one input partition that have shingles, as an
    Arrow table (``key``: the keep policy's, smaller is kept; ``weight``: what the document stands for)."""
    import pyarrow as pa

    from curate.stages.dataset import STRING
    from curate.stages.dedup import minhash

    pos = dedup.good_rows(df)
    sig, counts = minhash.signatures(df["text"].iloc[pos], settings.num_perm, settings.seed, settings.ngram,
                                     settings.shingle)
    keep = counts > 0
    sig = np.ascontiguousarray(sig[keep])
    width = 4 * settings.num_perm
    arr = pa.FixedSizeBinaryArray.from_buffers(pa.binary(width), len(sig), [None, pa.py_buffer(sig.astype("<u4"))])
    ids = pa.array(df["id"].iloc[pos[keep]].astype(STRING).array)
    rows = pos[keep]
    key = keeping.keys(df, rows, keeping.parse(settings.keep), where or f"input partition {partition}")
    return pa.table({"doc": pa.array(dedup.doc_numbers(partition, rows)), "id": ids, "sig": arr,
                     "key": pa.array(key, type=pa.float64()), "weight": pa.array(keeping.weights(df, rows))})


def read_signatures(path: str, num_perm: int) -> tuple[np.ndarray, np.ndarray]:
    """(doc numbers, uint32 signatures (n, num_perm)) of one signatures part."""
    import pyarrow.parquet as pq

    table = pq.read_table(path, columns=["doc", "sig"])
    doc = table.column("doc").to_numpy()
    col = table.column("sig").combine_chunks()
    if len(col) == 0:
        return doc, np.zeros((0, num_perm), dtype=np.uint32)
    flat = np.frombuffer(col.buffers()[1], dtype="<u4")
    return doc, flat[col.offset * num_perm:(col.offset + len(col)) * num_perm].reshape(-1, num_perm)


def bucket_frame(path: str, settings: FuzzyDedupSettings, bands: int, rows: int) -> pd.DataFrame:
    """(bucket, doc): one row per document and band (``bands`` x ``rows`` resolved on the client)."""
    from curate.stages.dedup.lsh import band_keys

    doc, sig = read_signatures(path, settings.num_perm)
    keys = band_keys(sig, bands, rows)
    return pd.DataFrame({"bucket": keys.ravel(), "doc": np.repeat(doc.astype(np.int64), bands)})


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


def attach_text(edges: pd.DataFrame, part: pd.DataFrame, key: str, name: str) -> pd.DataFrame:
    """``edges`` with the text of the document numbered ``edges[key]`` (all in this input partition)."""
    from curate.stages.dataset import STRING

    rows = edges[key].to_numpy(dtype=np.int64) & dedup.ROW_MASK
    return edges.assign(**{name: part["text"].iloc[rows].astype(STRING).to_numpy()})


#: what a member of a component carries: its rank (key, id, doc) and what it stands for (weight)
MEMBER_COLUMNS = ["doc", "comp", "id", "key", "weight"]


def attach_ids(comps: pd.DataFrame, sig_path: str) -> pd.DataFrame:
    """(doc, comp, id, key, weight): the components of one input partition's documents, with their
    ids, keep keys and weights."""
    comps = comps.drop_duplicates("doc")
    ids = dedup.load_part(sig_path, ["doc", "id", "key", "weight"])
    return comps.merge(ids, on="doc", how="left", validate="one_to_one")


def component_duplicates(df: pd.DataFrame) -> pd.DataFrame:
    """Per component: the kept id (the first by the keep rank: key, smallest id, document number) and
    who is removed (without the false-positive check: all the others)."""
    from curate.stages.dataset import STRING

    df = keeping.rank_order(df, ("comp",))
    first = df.groupby("comp", sort=False)
    kept_doc = first["doc"].transform("first").to_numpy()
    return pd.DataFrame({
        "doc": df["doc"].to_numpy(dtype=np.int64),
        "id": df["id"].to_numpy(),
        "component": df["comp"].to_numpy(dtype=np.int64),
        "kept_id": first["id"].transform("first").to_numpy(),
        "kept_doc": kept_doc.astype(np.int64),
        "removed": df["doc"].to_numpy() != kept_doc,
        "weight": df["weight"].to_numpy(dtype=np.int64),
    }).astype({"id": STRING, "kept_id": STRING})


def group_sizes(df: pd.DataFrame) -> np.ndarray:
    """int64 per row: on a kept document, its weight plus the weights of the documents removed for it
    (every member of its component must be in ``df``); 0 on a removed one."""
    total = df.groupby("kept_doc", sort=False)["weight"].transform("sum").to_numpy(dtype=np.int64)
    return np.where(df["removed"].to_numpy(dtype=bool), 0, total)


# --------------------------------------------------------------------------- false-positive check of removals
# Edges that pass the check are similar pairs, but a component is their transitive closure: along a
# chain A ~ B ~ C, A and C can be far apart. With the check on, a document is removed only when its
# own similarity to the kept document reaches the threshold. Each round, the undecided members of
# every component take the smallest of them as representative; members close enough to it are
# removed (kept_id = the representative), the representative is kept, the others stay undecided.
# Most components are decided in one round; a chain needs about one round per threshold-sized step.

#: after this many rounds the still undecided documents are kept (never removed unverified)
MAX_REFINE_ROUNDS = 16


def pick_representatives(df: pd.DataFrame) -> pd.DataFrame:
    """(doc, comp, id, key, weight, rep, rep_id): each undecided member with its component's first
    member by the keep rank (key, smallest id, document number)."""
    df = keeping.rank_order(df, ("comp",))
    first = df.groupby("comp", sort=False)
    columns = [c for c in (*MEMBER_COLUMNS, "tier") if c in df.columns]
    return df[columns].assign(rep=first["doc"].transform("first").to_numpy(dtype=np.int64),
                              rep_id=first["id"].transform("first").to_numpy())


def split_pairs(df: pd.DataFrame, pairs: bool) -> pd.DataFrame:
    """The members of components of exactly two documents (``pairs``) or of the larger ones."""
    size = df.groupby("comp", sort=False)["doc"].transform("size").to_numpy()
    return df[(size == 2) == pairs]


def decide_pairs(df: pd.DataFrame, threshold: float) -> pd.DataFrame:
    """Decisions for components of two documents, without their texts: such a component is one edge
    that passed the true-Jaccard check, so the larger id is removed for the smaller. (About nine in
    ten components are pairs; they no longer fetch two texts per member.)"""
    return decide(pick_representatives(df).assign(jaccard=1.0), threshold, last=True)


def decide(df: pd.DataFrame, threshold: float, last: bool) -> pd.DataFrame:
    """(doc, id, component, kept_id, kept_doc, removed, decided, key, weight) after one round."""
    from curate.stages.dataset import STRING

    df = keeping.rank_order(df, ("comp",))
    close = df["jaccard"].to_numpy() >= threshold
    is_rep = df["doc"].to_numpy() == df["rep"].to_numpy()
    doc = df["doc"].to_numpy(dtype=np.int64)
    out = pd.DataFrame({
        "doc": doc,
        "id": df["id"].to_numpy(),
        "component": df["comp"].to_numpy(dtype=np.int64),
        "kept_id": np.where(close, df["rep_id"].to_numpy(), df["id"].to_numpy()),
        "kept_doc": np.where(close, df["rep"].to_numpy(dtype=np.int64), doc),
        "removed": close & ~is_rep,
        "decided": close | last,
        "key": df["key"].to_numpy(dtype=np.float64) if "key" in df.columns else np.zeros(len(df)),
        "weight": df["weight"].to_numpy(dtype=np.int64) if "weight" in df.columns else np.ones(len(df), np.int64),
    })
    if "tier" in df.columns:
        out["tier"] = df["tier"].to_numpy()
    return out.astype({"id": STRING, "kept_id": STRING})


# --------------------------------------------------------------------------- tasks (one per partition)


def _signatures_task(df, i, folder, settings, where=""):
    return dedup.save_table(signature_table(df, i, settings, where), folder, i)


def _buckets_task(path, i, folder, settings, bands, rows):
    return dedup.save_part(bucket_frame(path, settings, bands, rows), folder, i)


def _dedupe_edges(df):
    from curate.stages.dedup.components import canonical

    return canonical(df["u"], df["v"])


def _members_task(df, folder, i):
    stats = dedup.save_part(keeping.rank_order(df, ("comp",)), folder, i)
    stats["components"] = int(df["comp"].nunique())
    return stats


def _decide_task(df, folder, i, threshold, last):
    out = decide(df, threshold, last)
    stats = dedup.save_part(out, folder, i)
    stats["undecided"] = int((~out["decided"]).sum())
    return stats


def _decide_pairs_task(df, folder, i, threshold):
    out = decide_pairs(df, threshold)
    stats = dedup.save_part(out, folder, i)
    stats["undecided"] = 0
    return stats


def _duplicates_task(df, folder, audit, i, joint=None):
    out = df if "component" in df.columns else component_duplicates(df)
    out = out.assign(size=group_sizes(out))
    columns = ["doc", "id", "component", "kept_id", "removed", "size"]
    mine = out
    if joint is not None and joint.bases:  # an --against run: the indexes' members are decided too
        out = out.assign(kept_in=joint.labels_of(out["kept_doc"].to_numpy(dtype=np.int64)))
        columns.append("kept_in")
        mine = out[joint.mine(out["doc"].to_numpy(dtype=np.int64))]
    audit_stats = dedup.save_part(mine[columns].drop(columns=["doc", "size"]), audit, i)
    stats = dedup.save_part(out[columns], folder, i)
    stats["outputs"] = stats.get("outputs", []) + audit_stats.get("outputs", [])
    stats["mine"] = len(mine)
    stats["removed"] = int(mine["removed"].sum())
    stats["kept"] = int((~mine["removed"]).sum())
    if "kept_in" in mine.columns:
        stats["removed_for_index"] = int((mine["removed"] & mine["kept_in"].notna()).sum())
    return stats


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


# --------------------------------------------------------------------------- against saved indexes


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


def sets_of_texts(texts: pd.Series, settings):
    from curate.stages.dedup import minhash

    return minhash.sets_to_binary(minhash.shingle_sets(texts, settings.ngram, settings.shingle))


def index_docs(ix, i: int, columns) -> pd.DataFrame:
    """Part ``i`` (the index's numbering) of an index's ``docs`` table, in this run's numbering."""
    return ix.shifted(ix.read("docs", i, columns))


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


def _with_self_similarity(df: pd.DataFrame) -> pd.DataFrame:
    jac = df["jaccard"].to_numpy().copy()
    jac[df["doc"].to_numpy() == df["rep"].to_numpy()] = 1.0
    return df.assign(jaccard=jac)


def matched_centers(rows: pd.DataFrame, ix, i: int) -> pd.DataFrame:
    """(bucket, doc): for each bucket key of ``rows`` (this run's, routed to part ``i`` of index ``ix``)
    that the index holds, its center (the index's smallest document there), in this run's numbering.
    The part is sorted by key: a binary search per key, no hash table of the index's side."""
    import pyarrow.parquet as pq

    table = pq.read_table(ix.path("buckets", i), columns=["bucket", "center"])
    keys = table.column("bucket").to_numpy()
    wanted = np.unique(rows["bucket"].to_numpy(dtype=np.uint64))
    where = np.searchsorted(keys, wanted)
    hit = where < len(keys)
    hit[hit] = keys[where[hit]] == wanted[hit]
    centers = table.column("center").to_numpy()[where[hit]]
    return ix.shifted(pd.DataFrame({"bucket": wanted[hit], "doc": centers.astype(np.int64)}))


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


def attach_members(comps: pd.DataFrame, p: int, joint, sig_files) -> pd.DataFrame:
    """(doc, comp, id, key, weight, tier) of the members in input partition ``p``: an index's document
    (weight 1: only this run's documents are counted) or this run's."""
    comps = comps[["doc", "comp"]].drop_duplicates("doc")
    if p >= joint.offset:
        table = dedup.load_part(sig_files[p - joint.offset], ["doc", "id", "key", "weight"])
    else:
        b = joint.base_of(p)
        table = index_docs(b, p - b.offset, ["doc", "id", "key"]).assign(weight=np.int64(1))
    from curate.stages.dataset import STRING

    out = comps.merge(table, on="doc", how="left", validate="one_to_one")
    return out.assign(id=out["id"].astype(STRING), tier=joint.tiers_of(out["doc"].to_numpy(dtype=np.int64)))


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


def refine_removals(steps, inputs, settings: FuzzyDedupSettings, joint: Joint | None = None):
    """Rounds of representatives (``refine/round-NN`` steps) over the members of every component;
    returns (a Dask DataFrame of every member's decision, the number of rounds)."""
    import dask
    import dask.dataframe as dd

    from curate.stages.dataset import STRING
    from curate.stages.dedup.components import EDGE_META

    joint = joint or Joint()
    columns = MEMBER_COLUMNS + (["tier"] if joint.bases else [])
    reps_meta = pd.DataFrame({"doc": EDGE_META["u"], "comp": EDGE_META["u"], "id": pd.Series([], dtype=STRING),
                              "key": pd.Series([], dtype="float64"), "weight": EDGE_META["u"],
                              **({"tier": EDGE_META["u"]} if joint.bases else {}),
                              "rep": EDGE_META["u"], "rep_id": pd.Series([], dtype=STRING)})
    source, rounds = steps.path("members"), []
    for k in range(1, MAX_REFINE_ROUNDS + 1):
        def refine(folder, source=source, last=(k == MAX_REFINE_ROUNDS)):
            undecided = dedup.read_parts(source)
            pairs = []
            if "decided" in undecided.columns:
                undecided = undecided[~undecided["decided"]].rename(columns={"component": "comp"})
                undecided = undecided[columns]
            else:  # round 1, on the members (every component within one partition): pairs need no text
                pair = dask.delayed(_decide_pairs_task, pure=False)
                pairs = [pair(part, folder, i, settings.threshold) for i, part in enumerate(
                    undecided.map_partitions(split_pairs, True, meta=undecided._meta).to_delayed())]
                undecided = undecided.map_partitions(split_pairs, False, meta=undecided._meta)
            reps = undecided.map_partitions(pick_representatives, meta=reps_meta)
            parts, meta = similarities(reps, "doc", "rep", inputs, joint, settings)
            mark = dask.delayed(_with_self_similarity, pure=True)
            checked = dd.from_delayed([mark(p) for p in parts], meta=meta,
                                      divisions=[None] * (len(parts) + 1), verify_meta=False)
            task = dask.delayed(_decide_task, pure=False)
            return pairs + [task(part, folder, len(pairs) + i, settings.threshold, last)
                            for i, part in enumerate(checked.shuffle(on="comp").to_delayed())]

        name = f"refine/round-{k:02d}"
        info = steps.run(name, refine)
        source = steps.path(name)
        rounds.append(source)
        if sum(p["undecided"] for p in info["parts"]) == 0:
            break
    files = [f for d in rounds for f in dedup.list_parts(d)]
    decisions = dd.from_map(dedup.load_part, files, meta=dedup.load_part(files[0]).iloc[:0],
                            enforce_metadata=False, divisions=[None] * (len(files) + 1))
    return decisions[decisions["decided"]], len(rounds)


class FuzzyDedupStage(Stage):
    """Remove near duplicates (MinHash-LSH), keeping one document (``--keep``) of each connected component
    (with --false-positive-check: of each group of documents verified similar to the kept one)."""

    name = "fuzzy_dedup"
    Settings = FuzzyDedupSettings
    cli = ("dedup", "fuzzy")
    help = "remove near duplicates (MinHash-LSH + connected components), keep one per group (--keep; default the smallest id)"

    def check(self, settings, inputs) -> None:
        keeping.check_inputs(keeping.parse(settings.keep), inputs)

    def check_output(self, settings, inputs, output) -> None:
        # here, not in check: a job calls this for every stage, also one whose input is not written yet
        from curate.stages.dedup import index

        if settings.against:
            index.check_against(settings.against, "fuzzy", index.settings_record("fuzzy", settings,
                                                                                  *settings.lsh_params()), inputs)
        index.check_save(settings.save_index, inputs, settings.against, output)

    def run(self, settings, ctx) -> dict:
        import contextlib

        from curate.stages.dedup import index

        with index.lock(settings.save_index) if settings.save_index else contextlib.nullcontext():
            return self._run(settings, ctx)

    def _run(self, settings, ctx) -> dict:
        import dask
        import dask.dataframe as dd

        from curate.stages import dataset
        from curate.stages.dedup import components, index
        from curate.stages.dedup.components import EDGE_META

        bands, rows = settings.lsh_params()
        record = index.settings_record("fuzzy", settings, bands, rows)
        bases = tuple(index.check_against(settings.against, "fuzzy", record, ctx.input, verify=False))
        offset = sum(b.partitions for b in bases)
        joint = Joint(tuple(b.slim() for b in bases), offset, (bases[-1].tier0 + len(bases[-1].tiers)) if bases else 0)
        ddf = dataset.read_dataset(ctx.input, ctx.io, rejects_dir=ctx.output)
        nparts = ddf.npartitions
        inputs = dedup.Inputs(ctx, ddf)
        steps = dedup.Steps(ctx, self.name)
        save = dask.delayed(dedup.save_part, pure=False)

        # this run's documents are numbered after the indexes': partition offset + i
        sig_task = dask.delayed(_signatures_task, pure=False)
        steps.run("signatures", lambda folder: [sig_task(part, offset + i, folder, settings, inputs.pieces[i].path)
                                                for i, part in enumerate(ddf.to_delayed())])
        sig_files = dedup.list_parts(steps.path("signatures"))

        bucket_task = dask.delayed(_buckets_task, pure=False)
        steps.run("buckets", lambda folder: [bucket_task(path, i, folder, settings, bands, rows)
                                             for i, path in enumerate(sig_files)])
        buckets = dedup.read_parts(steps.path("buckets"))
        if bases:  # the indexes' centers of this run's bucket keys join the buckets as members
            def centers(folder):
                task, tasks = dask.delayed(_matched_task, pure=False), []
                for b in joint.bases:
                    routed = index.routed_rows([buckets[["bucket"]]], "bucket", b.parts)
                    tasks += [task(r, b, i, folder, len(tasks) + i) for i, r in enumerate(routed)]
                return tasks

            steps.run("index-centers", centers)
            buckets = dd.concat([buckets, dedup.read_parts(steps.path("index-centers"))], ignore_unknown_divisions=True)
        new_centers = steps.side("centers", "edges") if settings.save_index else None

        def edges(folder):
            shuffled = buckets.shuffle(on="bucket")
            star = shuffled.map_partitions(_star_edges_of_run, joint, meta=EDGE_META)
            tasks = dedup.save_tasks(star.shuffle(on="u"), folder, _dedupe_edges)
            if new_centers is not None:
                task = dask.delayed(_centers_task, pure=False)
                tasks += [task(part, joint, new_centers, i) for i, part in enumerate(shuffled.to_delayed())]
            return tasks

        steps.run("edges", edges, extra_dirs=(new_centers,) if new_centers is not None else ())
        graph = ["edges"]

        if settings.false_positive_check:
            def verified(folder):
                parts, _ = similarities(dedup.read_parts(steps.path("edges")), "u", "v", inputs, joint, settings)
                close = dask.delayed(_close, pure=True)
                return [save(close(e, settings.threshold), folder, i) for i, e in enumerate(parts)]

            steps.run("verified", verified)
            graph = ["verified"]

        if bases:  # an index document reached by an edge brings its component in the index along
            def anchors(folder):
                ends = dedup.read_parts(steps.path(graph[0]), columns=["v"])
                routed = dedup.route_to_input(ends, "v", offset + nparts)
                task = dask.delayed(_anchors_task, pure=False)
                return [task(r, joint, p, folder) for p, r in enumerate(routed) if p < offset]

            steps.run("anchors", anchors)
            graph.append("anchors")

        cc = components.run(steps, graph, "components", settings.in_memory_edges)

        if bases:  # every member of those index components, with the joint component
            def expanded(folder):
                comps = dedup.read_parts(steps.path("components"), columns=["doc", "comp"])
                nodes = comps.rename(columns={"doc": "label"})
                task, tasks = dask.delayed(_expanded_task, pure=False), []
                for b in joint.bases:
                    lo, hi = b.offset << dedup.DOC_SHIFT, (b.offset + b.partitions) << dedup.DOC_SHIFT
                    mine = nodes[(nodes["label"] >= lo) & (nodes["label"] < hi)]
                    mine = mine.map_partitions(_index_part_column, b, meta=mine._meta.assign(
                        _part=pd.Series([], dtype="int64")))
                    tasks += [task(r, b, i, folder, len(tasks) + i)
                              for i, r in enumerate(dedup.route_to_parts(mine, "_part", b.parts))]
                return tasks

            steps.run("expanded", expanded)

        def members(folder):
            comps = dedup.read_parts(steps.path("components"), columns=["doc", "comp"])
            meta = pd.DataFrame({"doc": pd.Series([], dtype="int64"), "comp": pd.Series([], dtype="int64"),
                                 "id": pd.Series([], dtype=dataset.STRING), "key": pd.Series([], dtype="float64"),
                                 "weight": pd.Series([], dtype="int64")})
            if bases:
                more = dedup.read_parts(steps.path("expanded"), columns=["doc", "comp"])
                comps = dd.concat([comps, more], ignore_unknown_divisions=True)
                attach = dask.delayed(attach_members, pure=True)
                with_ids = [attach(c, p, joint, sig_files)
                            for p, c in enumerate(dedup.route_to_input(comps, "doc", offset + nparts))]
                meta = meta.assign(tier=pd.Series([], dtype="int64"))
            else:
                attach = dask.delayed(attach_ids, pure=True)
                with_ids = [attach(c, path) for c, path in zip(dedup.route_to_input(comps, "doc", nparts), sig_files)]
            by_comp = dd.from_delayed(with_ids, meta=meta, divisions=[None] * (len(with_ids) + 1),
                                      verify_meta=False).shuffle(on="comp")
            task = dask.delayed(_members_task, pure=False)
            return [task(part, folder, i) for i, part in enumerate(by_comp.to_delayed())]

        steps.run("members", members)

        if settings.false_positive_check:
            decisions, refine_rounds = refine_removals(steps, inputs, settings, joint)
            decisions = decisions.shuffle(on="component")  # a group's size needs all its members
        else:
            decisions, refine_rounds = dedup.read_parts(steps.path("members")), 0

        audit = steps.folder(dedup.DUPLICATES)
        info = steps.run("duplicates", lambda folder: [
            dask.delayed(_duplicates_task, pure=False)(part, folder, audit, i, joint)
            for i, part in enumerate(decisions.to_delayed())], extra_dirs=(audit,))
        mine = sum(p.get("mine", p["rows"]) for p in info["parts"])
        removed = sum(p.get("removed", 0) for p in info["parts"])
        extra = {
            "dedup": {
                "bands": bands, "rows": rows, "threshold": settings.threshold,
                "signatures": steps.done("signatures")["rows"],
                "edges": steps.done("edges")["rows"],
                "verified_edges": steps.done("verified")["rows"] if settings.false_positive_check else None,
                "components": sum(p["components"] for p in steps.done("members")["parts"]),
                "documents_in_components": mine,
                "kept_in_components": mine - removed,
                "removed": removed,
                "refine_rounds": refine_rounds,
                "connected_components": cc,
            },
            "steps": steps.timings,
        }
        if bases:
            extra["dedup"]["against"] = {
                "indexes": [b.label for b in bases], "index_members": info["rows"] - mine,
                "removed_for_index": sum(p.get("removed_for_index", 0) for p in info["parts"])}
        if settings.save_index:
            extra["dedup"]["saved_index"] = self._save_index(settings, ctx, steps, joint, bases, inputs, sig_files,
                                                             record)
        marked = dedup.removal_frame(inputs, steps, "duplicates", REASON, offset)
        return dataset.write_dataset(marked, ctx, stage=self.name, settings=settings,
                                     reject_columns=("id",), extra=extra, records=steps.records())

    def _save_index(self, settings, ctx, steps, joint, bases, inputs, sig_files, record) -> dict:
        """Write ``--save-index``: the union of the bases and this run (see the index module)."""
        import dask

        from curate.stages.dedup import index
        from curate.stages.output import Output

        offset, nparts = joint.offset, len(inputs)
        parts = bases[0].parts if bases else nparts
        first = joint.bases[0] if bases else None
        isteps = dedup.Steps(ctx, out=Output.at(settings.save_index), root="", owner=index.OWNER)
        decided = dedup.read_parts(steps.path("duplicates"), columns=["doc", "component", "removed"])
        decided = decided.rename(columns={"component": "comp"})

        shingles = isteps.path(index.SHINGLES)

        def docs(folder):
            records = [index.listed_files(b) for b in bases]

            def listed(p):  # the manifest records of the base parts part p copies
                if p >= offset:
                    return {}
                k, b = next((k, b) for k, b in enumerate(joint.bases) if b.offset <= p < b.offset + b.partitions)
                return {t: records[k].get(b.rel(t, p - b.offset)) for t in ("docs", index.SHINGLES)}

            task = dask.delayed(_index_docs_task, pure=False)
            return [task(p, joint, inputs, sig_files, settings, folder, shingles, listed(p))
                    for p in range(offset + nparts)]

        def labels(folder):
            task = dask.delayed(_index_labels_task, pure=False)
            routed = dedup.route_to_input(decided, "doc", offset + nparts)
            return [task(r, p, joint, folder) for p, r in enumerate(routed)]

        def comps(folder):
            frames = [decided[["comp", "doc"]].assign(origin=np.int64(NEW))]
            frames += [f.assign(origin=np.int64(OLD))
                       for f in index.base_frames(list(joint.bases), "components", ["comp", "doc"], ("comp", "doc"))]
            if bases:
                retired = dedup.read_parts(steps.path("expanded"), columns=["label"])
                frames.append(retired.rename(columns={"label": "comp"}).assign(doc=np.int64(-1), origin=np.int64(RETIRED)))
            task = dask.delayed(_index_components_task, pure=False)
            return [task(first, i, r, folder) for i, r in enumerate(index.routed_rows(frames, "comp", parts))]

        def centers(folder):
            frames = [dedup.read_parts(steps.side("centers", "edges")),
                      *index.base_frames(list(joint.bases), "buckets", ["bucket", "center"], ("center",))]
            task = dask.delayed(_index_buckets_task, pure=False)
            return [task(first, i, r, folder) for i, r in enumerate(index.routed_rows(frames, "bucket", parts))]

        info = isteps.run("docs", docs, extra_dirs=(shingles,))
        isteps.run("labels", labels)
        isteps.run("components", comps)
        isteps.run("buckets", centers)
        tiers = [t + b.offset for b in bases for t in b.tiers] + [offset + nparts]
        entry = index.info_entry("fuzzy", record, parts=parts, partitions=offset + nparts, tiers=tiers,
                                 documents=info["rows"], ctx=ctx, bases=bases, keep=settings.keep)
        index.finish(isteps, entry)
        return {"path": settings.save_index, "documents": info["rows"], "parts": parts, "partitions": offset + nparts}


# --------------------------------------------------------------------------- against-run and index tasks


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


def _index_docs_task(p, joint, inputs, sig_files, settings, folder, shingles, listed):
    """Part ``p`` of a saved index's ``docs`` and ``shingles``: a base's, copied (the first base's, byte
    for byte; ``listed``: their records in its manifest) or renumbered; or this run's documents, with
    their shingle sets computed from their texts."""
    import pyarrow.parquet as pq

    from curate.stages.dedup import index, minhash

    if p < joint.offset:
        b = joint.base_of(p)
        sets = index.copy_part(b, index.SHINGLES, p - b.offset, shingles, p, listed.get(index.SHINGLES))
        if b.offset == 0:
            docs = index.copy_part(b, "docs", p, folder, p, listed.get("docs"))
            return {**docs, "outputs": docs["outputs"] + sets["outputs"]}
        table = pq.read_table(b.path("docs", p - b.offset))
        doc = pa.array(table.column("doc").to_numpy() + (b.offset << dedup.DOC_SHIFT))
        table = table.set_column(table.schema.get_field_index("doc"), "doc", doc)
        outputs = sets["outputs"]
    else:
        table = pq.read_table(sig_files[p - joint.offset], columns=["doc", "id", "key", "sig"])
        values, offsets = minhash.list_buffers(_shingles_of(table, inputs, p - joint.offset, settings))
        with shingles.out.open(index.part_name(index.SHINGLES, p)) as f:
            f.write(np.ascontiguousarray(values[offsets[0]:offsets[-1]], dtype="<u8").tobytes())
        outputs = [f.record]
        table = table.append_column("start", pa.array(offsets[:-1] - offsets[0]))
        table = table.append_column("count", pa.array(np.diff(offsets)))
    stats = dedup.save_table(table, folder, p)
    for r in stats.get("outputs", []):
        r["rows"] = table.num_rows
    stats["outputs"] = stats.get("outputs", []) + outputs
    return stats


def _shingles_of(table, inputs, i: int, settings):
    """The shingle sets of the documents of a signatures part, from input partition ``i``'s texts."""
    from curate.stages.dedup import minhash

    texts = input_texts(inputs, i)["text"]
    rows = table.column("doc").to_numpy() & dedup.ROW_MASK
    return minhash.shingle_sets(texts.iloc[rows].fillna(""), settings.ngram, settings.shingle)


def _index_labels_task(decided, p, joint, folder):
    """Part ``p`` of a saved index's ``labels``: the base's, where this run did not decide its documents
    again, and this run's decisions (every member of every component it touched)."""
    from curate.stages.dedup import index

    frames = []
    if p < joint.offset:
        b = joint.base_of(p)
        old = b.shifted(b.read("labels", p - b.offset, ["doc", "comp", "removed"]), ("doc", "comp"))
        frames.append(old[~old["doc"].isin(decided["doc"].to_numpy())])
    frames.append(decided[["doc", "comp", "removed"]])
    rows = pd.concat(frames, ignore_index=True).astype({"doc": "int64", "comp": "int64", "removed": "bool"})
    return index.write_table(rows, folder, p, sort=("doc",))


#: ``origin`` of the rows of a saved index's ``components`` while it is merged
RETIRED, OLD, NEW = 0, 1, 2


def _index_components_task(first, i, routed, folder):
    """Part ``i`` of a saved index's ``components``: the first base's part and the rows routed here
    (``origin``: this run's components, other bases' rows, or the labels of the bases' components this
    run merged into bigger ones, whose old rows go)."""
    from curate.stages.dedup import index

    frames = [first.read("components", i, ["comp", "doc"]).assign(origin=np.int64(OLD))] if first is not None else []
    rows = pd.concat([*frames, routed], ignore_index=True)
    origin = rows["origin"].to_numpy(dtype=np.int64)
    retired = rows["comp"].to_numpy()[origin == RETIRED]
    keep = (origin == NEW) | ((origin == OLD) & ~np.isin(rows["comp"].to_numpy(), retired))
    out = rows[keep][["comp", "doc"]].astype({"comp": "int64", "doc": "int64"})
    return index.write_table(out, folder, i, sort=("comp", "doc"))


def _index_buckets_task(first, i, routed, folder):
    """Part ``i`` of a saved index's ``buckets``: per bucket key the smallest center of the first base's
    part and the rows routed here."""
    from curate.stages.dedup import index

    frames = [first.read("buckets", i, ["bucket", "center"])] if first is not None else []
    rows = pd.concat([*frames, routed], ignore_index=True)
    out = rows.groupby("bucket", sort=True, as_index=False)["center"].min()
    return index.write_table(out.astype({"bucket": "uint64", "center": "int64"}), folder, i, sort=("bucket",))
