"""The audit's exact similarity join (issue 42, point 2) against the brute force it replaced: the same
close pairs, the same similarities, the same manifest entry."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest

from curate.stages.dedup import minhash
from curate.stages.dedup.fuzzy import audit, audit_pairs
from curate.stages.dedup.shingles import jaccard_indexed

THRESHOLDS = (0.5, 0.8, 0.9, 1.0, 2 / 3, 0.7, 0.95)


def brute_pairs(values, offsets, threshold):
    """The oracle: every pair compared (the audit before issue 42)."""
    n = len(offsets) - 1
    ia, ib = np.triu_indices(n, 1)
    jac = jaccard_indexed(values, offsets, ia, values, offsets, ib) if len(ia) else np.zeros(0)
    close = jac >= threshold
    return ia[close], ib[close], jac[close]


def packed(sets):
    sets = [np.unique(np.asarray(list(s), dtype=np.uint64)) for s in sets]
    offsets = np.r_[0, np.cumsum([len(s) for s in sets])].astype(np.int64)
    return (np.concatenate(sets) if sets else np.zeros(0, np.uint64)), offsets


def assert_same(sets, threshold, chunk=audit_pairs.CHUNK):
    values, offsets = packed(sets)
    got = audit_pairs.close_pairs(values, offsets, threshold, chunk=chunk)
    want = brute_pairs(values, offsets, threshold)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and np.array_equal(g, w), (threshold, chunk)
    return len(got[0])


def adversarial(rng: random.Random) -> list[set]:
    """A sample of the shapes prefix filtering could get wrong: near-copy clouds, exact copies, empty and
    one-element sets, subsets at exactly the threshold ratios, sets sharing only frequent elements."""
    sets: list[set] = [set(), set(), {7}, {7}, {8}, {7, 8}]
    for _ in range(3):  # clouds of near copies of a base (a few elements changed)
        base = set(rng.sample(range(10_000), rng.randint(5, 60)))
        for _ in range(rng.randint(2, 12)):
            s = {x for x in base if rng.random() > rng.choice((0.02, 0.1, 0.2))}
            sets.append(s | set(rng.sample(range(10_000, 20_000), rng.randint(0, 3))))
    for _ in range(3):  # exact copies
        sets.extend([set(rng.sample(range(20_000, 30_000), rng.randint(1, 20)))] * rng.randint(2, 4))
    for num, den in ((1, 2), (3, 6), (2, 3), (4, 6), (7, 10), (4, 5), (8, 10), (40, 50), (9, 10), (18, 20),
                     (19, 20), (1, 1), (3, 3)):
        # x inside y, |x| / |y| exactly num / den (Jaccard exactly that), and y with one element swapped
        y = rng.sample(range(30_000, 40_000), den)
        sets += [set(y[:num]), set(y), set(y[1:]) | {40_000 + rng.randrange(1000)}]
    common = set(range(50_000, 50_030))  # elements every set below holds: last in a rarest-first order
    for _ in range(8):
        sets.append(common | set(rng.sample(range(60_000, 60_100), rng.randint(0, 10))))
    for _ in range(10):  # random sets over a small universe (many partial overlaps)
        sets.append(set(rng.sample(range(70_000, 70_040), rng.randint(0, 40))))
    rng.shuffle(sets)
    return sets


@pytest.mark.parametrize("seed", range(6))
def test_the_join_finds_exactly_the_brute_force_pairs(seed):
    rng = random.Random(seed)
    sets = adversarial(rng)
    found = 0
    for t in THRESHOLDS:
        found += assert_same(sets, t)
        assert_same(sets, t, chunk=rng.randint(1, 40))  # many small chunks: the same pairs
    assert found > 0


def test_pairs_at_exactly_the_threshold_count_and_just_below_do_not():
    """Jaccard exactly t (as the float division rounds it) is close; one element less is not."""
    for t, (num, den) in ((0.8, (4, 5)), (0.8, (80, 100)), (0.9, (9, 10)), (2 / 3, (2, 3)), (0.7, (7, 10)),
                          (0.5, (1, 2)), (1.0, (6, 6))):
        y = list(range(den))
        values, offsets = packed([y[:num], y, y[:num - 1]])
        ia, ib, jac = audit_pairs.close_pairs(values, offsets, t)
        assert (0, 1) in set(zip(ia.tolist(), ib.tolist())) and jac[0] >= t, (t, num, den)
        assert (1, 2) not in set(zip(ia.tolist(), ib.tolist()))
        assert_same([y[:num], y, y[:num - 1]], t)


def test_degenerate_thresholds_are_the_brute_force_too():
    sets = adversarial(random.Random(9))
    n = len(sets)
    assert assert_same(sets, 0.0, chunk=50) == n * (n - 1) // 2  # every pair, empty ones too (0.0 >= 0)
    assert assert_same(sets, -1.0) == n * (n - 1) // 2
    assert assert_same(sets, math.nan) == 0
    assert assert_same(sets, 1.5) == 0
    assert assert_same(sets, 5e-324) > 0
    for few in ([], [{1}], [set()]):
        assert assert_same(few, 0.8) == 0


def test_a_cloud_of_copies_is_made_in_chunks():
    """300 near copies of one set: every pair a candidate, made and compared a chunk at a time."""
    rng = random.Random(4)
    base = list(range(100))
    sets = [{x for x in base if rng.random() > 0.03} for _ in range(300)]
    assert assert_same(sets, 0.8, chunk=2000) > 40_000


class _Sets:
    """A stand-in for the run's SetStore: documents 0..n-1 of partition 0 and their sets in memory."""

    def __init__(self, sets):
        self.sets = [np.unique(np.asarray(list(s), dtype=np.uint64)) for s in sets]

    def table(self, p):
        counts = np.array([len(s) for s in self.sets], dtype=np.int64)
        return np.arange(len(self.sets), dtype=np.int64), np.cumsum(counts) - counts, counts, "memory"

    def read(self, p, docs, table=None):
        chosen = [self.sets[int(d)] for d in docs]
        offsets = np.r_[0, np.cumsum([len(s) for s in chosen])].astype(np.int64)
        return (np.concatenate(chosen) if chosen else np.zeros(0, np.uint64)), offsets


def brute_audit(store, partitions, decisions, threshold, k):
    """The audit as it was before issue 42 (every sampled pair compared), without its timing."""
    docs = audit.sample_docs(store, partitions, k)
    n = len(docs)
    values, offsets = audit.sets_of(store, docs)
    ia, ib = np.triu_indices(n, 1)
    jac = jaccard_indexed(values, offsets, ia, values, offsets, ib) if len(ia) else np.zeros(0)
    doc, comp, kept, removed = decisions
    order = np.argsort(doc)
    pos = np.searchsorted(doc[order], docs)
    found = pos < len(doc)
    found[found] = doc[order][pos[found]] == docs[found]
    comp_of = np.full(n, -1, dtype=np.int64)
    comp_of[found] = comp[order][pos[found]]
    close = jac >= threshold
    same = (comp_of[ia] >= 0) & (comp_of[ia] == comp_of[ib])
    was_removed = np.zeros(n, dtype=bool)
    was_removed[found] = removed[order][pos[found]]
    found_pairs = close & same & (was_removed[ia] | was_removed[ib])
    true_pairs, hits = int(close.sum()), int(found_pairs.sum())
    kept_of = np.zeros(n, dtype=np.int64)
    kept_of[found] = kept[order][pos[found]]
    rem = np.flatnonzero(was_removed)
    good = 0
    if len(rem):
        kv, ko = audit.sets_of(store, kept_of[rem])
        sims = jaccard_indexed(values, offsets, rem, kv, ko, np.arange(len(rem)))
        good = int((sims >= threshold).sum())
    return {
        "sample": n, "pairs": int(len(ia)), "true_pairs": true_pairs,
        "recall": round(hits / true_pairs, 4) if true_pairs else None, "recall_ci": audit.wilson(hits, true_pairs),
        "removed_in_sample": int(len(rem)),
        "precision": round(good / len(rem), 4) if len(rem) else None, "precision_ci": audit.wilson(good, len(rem)),
    }


def random_decisions(rng: random.Random, n: int):
    """Components of random documents, some members removed for a random member (a run good or bad)."""
    docs = rng.sample(range(n), n // 2)
    doc, comp, kept, removed = [], [], [], []
    c = 0
    while docs:
        members = [docs.pop() for _ in range(min(len(docs), rng.randint(2, 6)))]
        keeper = members[0]
        for m in members:
            doc.append(m)
            comp.append(c)
            removed.append(m != keeper and rng.random() < 0.8)
            kept.append(keeper if removed[-1] else m)
        c += 1
    return (np.array(doc, np.int64), np.array(comp, np.int64), np.array(kept, np.int64), np.array(removed, bool))


@pytest.mark.parametrize("seed", range(3))
def test_the_audit_entry_equals_the_brute_force_audit(seed):
    rng = random.Random(seed)
    words = [f"w{i}" for i in range(300)]
    pages = []
    for _ in range(220):  # pages of 60-120 words, a third edited copies of earlier ones
        if pages and rng.random() < 0.35:
            w = rng.choice(pages).split()
            pages.append(" ".join(rng.choice(words) if rng.random() < rng.choice((0.01, 0.03, 0.08)) else x for x in w))
        else:
            pages.append(" ".join(rng.choice(words) for _ in range(rng.randint(60, 120))))
    sets = minhash.shingle_sets(pages)
    store = _Sets([np.asarray(s, dtype=np.uint64) for s in sets.to_numpy(zero_copy_only=False)]
                  + adversarial(rng))
    n = len(store.sets)
    decisions = random_decisions(rng, n)
    for t in (0.5, 0.8, 0.9):
        for k in (n, 150):
            got = audit.audit(store, range(1), decisions, t, k)
            assert got.pop("seconds") >= 0
            want = brute_audit(store, range(1), decisions, t, k)
            assert got == want, (t, k)
            assert repr(got) == repr(want)  # the same values as the manifest writes them
    assert brute_audit(store, range(1), decisions, 0.8, n)["true_pairs"] > 10
