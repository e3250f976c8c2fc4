"""``fuzzy_dedup``: remove near duplicates with MinHash-LSH, on CPU workers, every step distributed.

``curate dedup fuzzy --input D --output OUT [--threshold 0.8] [--num-perm 128] [--bands B --rows R]
[--ngram 5] [--shingle word|char] [--seed 42] [--false-positive-check] [--keep POLICY]
[--save-index IDX] [--against IDX [IDX ...]]``

The package, one concern per module: :mod:`.settings`, :mod:`.signatures` (steps 1-2),
:mod:`.candidates` (3), :mod:`.verify` (4 and every later similarity), :mod:`.decide` (the rule, 6 and
8), :mod:`.rounds` (7), :mod:`.against` (``--against``), :mod:`.saved_index` (``--save-index``) and
:mod:`.stage`, which runs the steps in order. Shingle set files: :mod:`curate.stages.dedup.shingles`.

Steps, each writing Parquet under ``OUT/_work/<step>/`` (resumable, see :mod:`curate.stages.dedup`):

1. ``signatures``: per input partition, (doc, id, sig, key, weight, start, count) where ``sig`` is the
   MinHash signature (``num_perm`` little-endian uint32 as one fixed-size binary value) of the
   document's shingles (:mod:`curate.stages.dedup.minhash`: datasketch's definition, computed by a numba
   kernel), ``key`` its keep rank and ``weight`` what it stands for (:mod:`curate.stages.dedup.keep`);
   beside it, ``_work/shingles/part-P.u64``: the documents' shingle sets (sorted distinct 64-bit
   hashes), the set of a row at values [start, start + count). The only step that reads texts: every
   similarity after it is computed from these sets. Documents already dropped upstream and documents
   without shingles (empty after normalising) are left out.
2. ``buckets``: per signatures part, one (bucket, doc) row per band (:mod:`curate.stages.dedup.lsh`).
3. ``edges``: shuffle on ``bucket``; in every bucket of two or more documents each member is linked
   to the bucket's smallest document and to its second smallest (star edges to two anchors: about 2k
   edges per bucket of k, not k(k-1)/2 pairs); shuffle on the edge's larger end to drop repeats.
   Rows (u, v), u > v.
4. ``verified`` (``--false-positive-check`` only): edges go to the input partition of their larger
   end (compact rows), where the true Jaccard similarity of the two shingle sets is computed
   (:mod:`.verify`: the partition's sets, and the other ends' by byte ranges, a bounded batch at a
   time); edges below the threshold are dropped. A document none of whose own edges passes keeps one
   *loose* edge to its most similar anchor when that is a near miss (within ``NEAR_MISS`` of the
   threshold): it joins the component, where the rounds compare it like any member, so a copy far
   from a bucket's two smallest documents but close to others still meets them.
5. ``components``: connected components (:mod:`curate.stages.dedup.components`), distributed large-star /
   small-star, or union-find in one task when there are at most ``in_memory_edges`` edges.
6. ``members``: components go back to their input partitions to pick up ids and keep keys, then a
   shuffle on the component: (doc, comp, id, key, weight[, loose]), every component in one partition;
   beside it ``_work/pool``: the ``POOL_SIZE`` members of each component of three or more with the
   smallest hash of their document number (the documents later rounds may keep again).
7. ``refine/round-NN`` (``--false-positive-check`` only, :mod:`.rounds`): the decision rule below;
   rounds 2 and later in three steps each (``-pairs``, ``-close``, the round), on the members still
   undecided.
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
check, a document is removed only for a kept document it is itself similar to (its true Jaccard
reaches the threshold); a component (the transitive closure of similar pairs: along a chain A ~ B ~ C,
A and C can be far apart) therefore keeps one document or several. In rounds:

- Round 1: each component keeps its first document by rank (so ``--keep`` keeps its meaning) and
  removes every member close to it. A component of two joined by a verified edge is decided without
  sets (the edge is the check).
- Round k >= 2, on the members still undecided: up to ``candidates_in_round(k)`` of them (8, doubling
  each round up to 64; in a component of n undecided members at least min(n, ``PAIR_BUDGET`` / n),
  so every member of one of up to 1,024 is a candidate) and the pool documents not undecided are
  candidates, picked by a hash of the
  document number (so an ``--against`` run, whose documents keep the joint run's numbers, picks the
  same). Every undecided member is compared with every candidate. In turn, those close to the most
  undecided members first (then by rank): an undecided candidate is kept unless it is close to a
  candidate kept before it; a pool document (removed earlier, for a document it is close to) is kept
  again when it is close to at least ``PROMOTE_MIN`` undecided members that nothing kept covers yet.
  Then every undecided member close to a kept candidate is removed for the first of them by rank; the
  others stay undecided.

Why several documents can be kept: one is kept for each group of members that no kept document is
close to (the far end of a chain, a copy far from the first), and a hub of a cloud of near copies,
although close to the first document, is kept again when it covers the copies the first does not (a
cloud of 2,000 copies with 1% of words changed keeps a handful instead of hundreds). Why few rounds:
each round decides every one of its candidates and everything close to the kept ones. A component
with at most 1,024 undecided members has them all as candidates, so the round after round 1 decides
it whole: a chain of up to 1,024 documents takes 2 rounds, and a cloud of 100,000 near copies 3 or 4
(round 2 covers all but the few hundred copies far from everything, round 3 decides those). Longer
chains of near copies of near copies, which the web does not seem to make, take more: a round
decides about three links per candidate, PAIR_BUDGET / n candidates. A round compares at most
max(64, PAIR_BUDGET / n) + POOL_SIZE pairs per undecided member and reads only those members' sets,
so its cost follows the documents it decides. ``MAX_REFINE_ROUNDS`` (32) is a
safety net: members still undecided then are kept, never removed unverified. Without the check, a
component keeps its first document and removes the others.

**Memory.** A task holds at most one input partition's documents (the signatures step: its texts and
their sets; a comparing task: the sets of its own partition's documents it needs, plus
``PAIR_SET_VALUES`` values of other sets at a time), and shuffles move compact rows (document numbers,
ids, keys, bucket keys), never texts or sets. A giant component's members travel as such rows to one
partition of the ``members`` and round steps (tens of bytes each), never with their sets.

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
- *Edges.* A star edge goes to the two smallest documents of its bucket; every A document is smaller
  than every B document, so the anchors of a bucket holding A documents are its A anchors first, and
  the joint run's edges are A's own edges plus the edges from each B document to the two smallest of
  (the index's anchors of that bucket key: ``buckets`` keeps both, ``center`` and ``second``) and the
  B documents there. Edges between A documents are A's own run's. Verification is per edge, from
  shingle sets, which the index keeps as the run computed them; a loose edge depends only on its
  document's own edges (all to smaller documents), so A's are A's own run's and B's are the
  against-run's. So the joint verified graph is A's verified graph plus the against-run's verified
  edges.
- *Components.* A's verified graph survives in the index as its components (``labels``,
  ``components``). The components of the joint graph that hold a B document are therefore those of:
  the against-run's verified edges, plus an edge from every A document they reach to its component's
  label (``anchors``); each A component met is then expanded to all its members (``expanded``),
  kept or removed by A's own run. Components without a B document are A's and decide nothing in B.
- *Decisions.* The rule above depends only on a component's members, their ranks, the hashes of
  their document numbers (candidates and pool) and the similarity of pairs of them; the against-run
  runs the same rounds on the same members with the same ranks, numbers and similarities (an A
  member's shingle set from the index), so every member of a joint component that holds a B document
  is decided as in the joint run, A's members included, round limit included.

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
    FIRST_CANDIDATES, MAX_CANDIDATES, MAX_REFINE_ROUNDS, MEMBER_COLUMNS, PAIR_BUDGET, attach_ids, candidate_pairs,
    candidates_in_round, candidates_per_member, component_duplicates, decide, decide_pairs, decide_round, doc_hash, group_sizes,
    pick_candidates, pick_representatives, split_pairs,
)
from curate.stages.dedup.fuzzy.rounds import first_round, refine_removals
from curate.stages.dedup.fuzzy.stage import FuzzyDedupStage

__all__ = [
    "ANCHORS", "FIRST_CANDIDATES", "MAX_CANDIDATES", "MAX_REFINE_ROUNDS", "MEMBER_COLUMNS", "PAIR_BUDGET", "PAIR_SET_VALUES",
    "REASON", "FuzzyDedupSettings", "FuzzyDedupStage", "Joint", "SetStore", "anchor_edges", "attach_ids",
    "attach_members", "bucket_centers", "bucket_frame", "candidate_pairs", "candidates_in_round", "candidates_per_member",
    "close_pairs",
    "component_duplicates", "decide", "decide_pairs", "decide_round", "doc_hash", "expanded_members", "first_round",
    "group_sizes", "index_docs", "matched_centers", "pair_jaccard", "pick_candidates", "pick_representatives",
    "read_signatures", "refine_removals", "signature_table", "signatures_and_sets", "split_pairs", "star_edges",
]
