"""``fuzzy_dedup``: remove near duplicates with MinHash-LSH, on CPU workers, every step distributed.

``curate dedup fuzzy --input D --output OUT [--threshold 0.8] [--num-perm 128] [--bands B --rows R]
[--ngram 5] [--shingle word|char] [--seed 42] [--false-positive-check] [--keep POLICY]
[--save-index IDX] [--against IDX [IDX ...]]``

The package, one concern per module: :mod:`.settings`, :mod:`.signatures` (steps 1-2),
:mod:`.candidates` (3), :mod:`.verify` (4 and every later similarity), :mod:`.decide` (the rule, 6 and
8), :mod:`.rounds` (7), :mod:`.against` (``--against``), :mod:`.saved_index` (``--save-index``) and
:mod:`.stage`, which runs the steps in order. Shingle set files: :mod:`curate.stages.dedup.shingles`.

Steps, each writing Parquet under ``OUT.side/_work/<step>/`` (resumable, see :mod:`curate.stages.dedup`):

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
   shuffle on the component: (doc, comp, id, key, weight[, loose]), every component in one partition.
7. ``refine/round-NN`` (``--false-positive-check`` only, :mod:`.rounds`): the decision rule below,
   each round in three steps (``-pairs``, ``-close``, the round) on the members still undecided.
8. ``duplicates``: without the check, each component keeps its first member by ``--keep`` and the rest
   are removed. Writes (doc, id, component, kept_id, removed, size) and, for audit,
   ``OUT.side/_duplicates/`` with (id, component, kept_id, removed) for every document of every component
   of two or more (``component`` is the smallest document number in it, ``kept_id`` the document it
   was removed for, ``size`` a kept document's ``dup_cluster_size``: its weight and those of the
   documents removed for it).
9. The dataset, with the removed documents dropped as ``fuzzy_duplicate`` (``_rejects/`` holds their
   ids, ``_detail`` names the kept id) and ``dup_cluster_size`` on every kept one. Output partition i
   is input partition i.

**The decision rule.** Documents are ranked by ``(tier, key, id, doc)``: the keep policy's key, then
the smallest id, then the document read first (``tier`` is 0 except against indexes, below). With the
check, each component (the transitive closure of similar pairs: along a chain A ~ B ~ C, A and C can
be far apart) is decided so that

- (a) no two kept members are close (true Jaccard at or above the threshold);
- (b) a member is removed only for a kept member it is close to and that ``--keep`` ranks no worse
  (``(tier, key)`` no larger: ``--keep longest``, one at least as long; against an index, an indexed
  document or one of the same tier);
- and among members ``--keep`` ranks equal (all of them under ``hub``, the default), those close to
  the most others go first (a cloud's hub before its far copies), then the smallest id; except under
  ``smallest-id``, where the id alone decides: each group keeps its smallest id.

A component of two joined by a verified edge is decided without sets (the edge is the check): the
first by rank is kept, the other removed. The others in rounds, each on the members still undecided:
the *candidates* are the first of them by ``(tier, key)`` and, among equal ones, by a hash of the
document number (so an ``--against`` run, whose documents keep the joint run's numbers, picks the
same; under ``smallest-id`` by rank, so the smallest ids): ``CANDIDATES`` (64), or every member of a
component of n undecided members when n <= 1,024 (at least min(n, ``PAIR_BUDGET`` / n)). Every
undecided member is compared with every candidate. The candidates take turns by ``(tier, key)``,
then (not under ``smallest-id``) the most undecided members of equal ``(tier, key)`` close to them,
then rank: a candidate is kept unless it is close to one kept before it. Then every member close to
a kept candidate is removed for the first of them in turn; the others stay undecided. A decision is
final. Under ``smallest-id`` the candidates of every round are the first undecided members by rank
and go in rank order, so whatever the number of rounds the result is the members in rank order, each
kept unless close to one kept before it (until ``MAX_REFINE_ROUNDS``).

Why (a) and (b) hold: a member still undecided after a round is close to no document kept in it (it
was compared with every candidate and would have been removed), so a later round never keeps one
close to an earlier kept one; within a round, two candidates are compared and the later one is not
kept if close to the earlier. A candidate's turn comes after every candidate of better ``(tier, key)``,
and the candidates are the first members by ``(tier, key)``, so a kept candidate ranks no worse than
what it removes. Before this rule a round could keep again a document removed earlier (the hub of a
cloud, found after round 1 had kept the component's first document): it then stood beside the
document it had been removed for, which it is close to, and under ``--keep longest`` removed longer
documents for a shorter one (hostile pass 3, point 5).

Why several documents can be kept: one for each group of members no kept document is close to (the
far end of a chain, a copy far from the hub). What (a) costs: a cloud of near copies keeps every
copy far from the hub kept first, and under a key that orders every document (``longest``,
``newest``, ``smallest-id``) the first kept is the one the key prefers, not a hub, so more copies stay (a test of 2,000 copies of
a page with 1% of the words changed: 7 kept by default, 342 under ``--keep longest``; the rule
before kept hubs side by side). Why few rounds: each round decides every one of its candidates and
everything close to the kept ones; a component with at most 1,024 undecided members has them all as
candidates and is decided whole in one round (a chain, a star, a small cloud: one round). A giant
cloud's first round keeps a hub among 64 candidates and removes all but the copies far from it; the
next rounds have those few as candidates. Components whose order forces thousands of mutually far
documents to be kept take more rounds: a round keeps at most PAIR_BUDGET / n of them. A round
compares at most max(CANDIDATES, PAIR_BUDGET / n) pairs per undecided member and reads only those
members' sets, so its cost follows the documents it decides. ``MAX_REFINE_ROUNDS`` (32) is a safety
net: members still undecided then are kept, never removed unverified (the only case (a) can fail).
Without the check, a component keeps its first document and removes the others.

**Memory.** A task holds at most one input partition's documents (the signatures step: its texts and
their sets; a comparing task: the sets of its own partition's documents it needs, plus
``PAIR_SET_VALUES`` values of other sets at a time), and shuffles move compact rows (document numbers,
ids, keys, bucket keys), never texts or sets. A giant component's members travel as such rows to one
partition of the ``members`` and round steps (tens of bytes each), never with their sets.

**Against saved indexes** (``--against IDX``, :mod:`curate.stages.dedup.index`). The contract: the
run removes from B exactly what ``dedup(A + B)`` removes from B when A's documents are preferred (A's
files first, every A document ranked before every B document and among themselves as A's own run
ranked them), with the same kept ids and cluster sizes. Under ``--keep smallest-id`` that is the joint
run with the same policy when A's ids are smaller than B's. Under ``hub`` the joint run must rank A
first by its key (``--keep oldest:COLUMN`` with A older): the turns count, among members ranked
equal, how many others each is close to, and the joint run under ``hub`` would count B's documents
where the run against the index (where B's tier ranks after A's) does not. Why the run below
achieves it:

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
  their document numbers (candidates) and the similarity of pairs of them; the against-run
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
from curate.stages.dedup.fuzzy.signatures import buckets_of, read_signatures, signature_table, signatures_and_sets
from curate.stages.dedup.fuzzy.candidates import ANCHORS, bucket_centers, star_edges
from curate.stages.dedup.fuzzy.verify import PAIR_SET_VALUES, SetStore, close_pairs, pair_jaccard
from curate.stages.dedup.fuzzy.against import (
    Joint, anchor_edges, attach_members, expanded_members, index_docs, matched_centers,
)
from curate.stages.dedup.fuzzy.decide import (
    CANDIDATES, MAX_REFINE_ROUNDS, MEMBER_COLUMNS, PAIR_BUDGET, attach_ids, candidate_pairs, candidate_ranks,
    candidates_per_member, component_duplicates, decide, decide_pairs, decide_round, doc_hash, group_sizes,
    pick_candidates, pick_representatives, split_pairs,
)
from curate.stages.dedup.fuzzy.rounds import refine_removals
from curate.stages.dedup.fuzzy.stage import FuzzyDedupStage

__all__ = [
    "ANCHORS", "CANDIDATES", "MAX_REFINE_ROUNDS", "MEMBER_COLUMNS", "PAIR_BUDGET", "PAIR_SET_VALUES",
    "REASON", "FuzzyDedupSettings", "FuzzyDedupStage", "Joint", "SetStore", "anchor_edges", "attach_ids",
    "attach_members", "bucket_centers", "buckets_of", "candidate_pairs", "candidate_ranks", "candidates_per_member",
    "close_pairs",
    "component_duplicates", "decide", "decide_pairs", "decide_round", "doc_hash", "expanded_members",
    "group_sizes", "index_docs", "matched_centers", "pair_jaccard", "pick_candidates", "pick_representatives",
    "read_signatures", "refine_removals", "signature_table", "signatures_and_sets", "split_pairs", "star_edges",
]
