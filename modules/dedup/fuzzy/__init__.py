"""``fuzzy_dedup``: remove near duplicates with MinHash-LSH, on CPU workers, every step distributed.

``curate dedup fuzzy --input D --output OUT [--threshold 0.8] [--num-perm 128] [--bands B --rows R]
[--ngram 5] [--shingle word|char] [--seed 42] [--false-positive-check] [--keep POLICY]
[--save-index IDX] [--against IDX [IDX ...]]``

The package, one concern per module: :mod:`.settings`, :mod:`.signatures` (steps 1-2),
:mod:`.candidates` (3), :mod:`.verify` (4), :mod:`.decide` (6-8), :mod:`.against` (``--against``),
:mod:`.saved_index` (``--save-index``) and :mod:`.stage`, which runs the steps in order.

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

from curate.stages.dedup.fuzzy.settings import REASON, FuzzyDedupSettings  # noqa: I001 (dependency order)
from curate.stages.dedup.fuzzy.signatures import bucket_frame, read_signatures, signature_table, signatures_and_sets
from curate.stages.dedup.fuzzy.candidates import ANCHORS, bucket_centers, star_edges
from curate.stages.dedup.fuzzy.verify import PAIR_SET_VALUES, SetStore, close_pairs, pair_jaccard
from curate.stages.dedup.fuzzy.against import (
    Joint, anchor_edges, attach_members, expanded_members, index_docs, matched_centers,
)
from curate.stages.dedup.fuzzy.decide import (
    FIRST_CANDIDATES, MAX_CANDIDATES, MAX_REFINE_ROUNDS, MEMBER_COLUMNS, attach_ids, candidate_pairs,
    candidates_in_round, component_duplicates, decide, decide_pairs, decide_round, doc_hash, group_sizes,
    pick_candidates, pick_representatives, split_pairs,
)
from curate.stages.dedup.fuzzy.rounds import first_round, refine_removals
from curate.stages.dedup.fuzzy.stage import FuzzyDedupStage

__all__ = [
    "ANCHORS", "FIRST_CANDIDATES", "MAX_CANDIDATES", "MAX_REFINE_ROUNDS", "MEMBER_COLUMNS", "PAIR_SET_VALUES",
    "REASON", "FuzzyDedupSettings", "FuzzyDedupStage", "Joint", "SetStore", "anchor_edges", "attach_ids",
    "attach_members", "bucket_centers", "bucket_frame", "candidate_pairs", "candidates_in_round", "close_pairs",
    "component_duplicates", "decide", "decide_pairs", "decide_round", "doc_hash", "expanded_members", "first_round",
    "group_sizes", "index_docs", "matched_centers", "pair_jaccard", "pick_candidates", "pick_representatives",
    "read_signatures", "refine_removals", "signature_table", "signatures_and_sets", "split_pairs", "star_edges",
]
