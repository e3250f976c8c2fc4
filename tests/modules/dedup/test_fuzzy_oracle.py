"""Fuzzy dedup's decisions against a brute-force oracle on adversarial shapes (hostile pass 3, point 5).

Each input mixes chains, stars (exact copies of a center and longer leaves), bridges (two clusters
joined through one document), clouds of near-threshold copies, exact copies of near copies and
unrelated documents, with random ids, lengths and priorities, over two and three partitions. The
oracle is the readable reference ``minhash.shingles`` as Python sets; on the run's own components it
checks the invariants:

(a) no two kept documents of one component, nor two that shared an LSH bucket, reach the threshold;
(b) a removed document reaches the threshold against its kept_id, which --keep ranks no worse
    (``longest``: at least as long; ``priority``: at least as high);
(c) the audit, its sample the whole input, equals brute force: recall counts a pair at or above the
    threshold found only when one of its documents was removed for a document of their component;

and that the decisions are exactly the rule's (the package doc), recomputed from the true Jaccard of
every pair of each component: candidates in turn by --keep's key, then the most close members of
equal key (not under smallest-id), then id; kept unless close to one kept before; removed for the first
kept one it is close to.
"""

from __future__ import annotations

import importlib
import itertools
import random

import numpy as np
import pandas as pd
import pytest

from tests.conftest import read_output, run_stage, side
from tests.modules.dedup.test_fuzzy_rounds import (
    SENTENCES,
    VOCAB,
    T,
    chain,
    changed,
    files_of,
    jaccard,
    words,
)

N = 300  # words of a page


def _chain(rng):
    return chain(rng, rng.randint(4, 9))


def _star(rng):
    center = words(rng, N)
    text = " ".join(center)
    out = [text] * rng.randint(1, 3)  # the center and exact copies of it
    for _ in range(rng.randint(3, 6)):  # leaves: the center and 40-60 words of their own (longer)
        out.append(text + " " + " ".join(rng.choice(VOCAB) for _ in range(rng.randint(40, 60))))
    for _ in range(rng.randint(0, 3)):  # and a few with words changed (as long)
        out.append(" ".join(changed(rng, center, rng.sample(range(N), rng.randint(2, 6)))))
    return out


def _bridge(rng):
    """P and Q differ from a base page in 4 words each (Jaccard ~0.87 to it, ~0.76 to each other): the
    base bridges two clusters of near copies of P and of Q."""
    base = words(rng, N)
    spots = rng.sample(range(N), 8)
    p, q = changed(rng, base, spots[:4]), changed(rng, base, spots[4:])
    out = [" ".join(base), " ".join(p), " ".join(q)]
    for copy in (p, q):
        for _ in range(rng.randint(1, 3)):
            out.append(" ".join(changed(rng, copy, rng.sample(range(N), rng.randint(1, 2)))))
    return out


def _cloud(rng):
    page = words(rng, N)
    return [" ".join(changed(rng, page, [i for i in range(N) if rng.random() < 0.012]))
            for _ in range(rng.randint(12, 25))]


def corpus(seed):
    rng = random.Random(seed)
    texts = []
    for make in (_chain, _star, _bridge, _cloud, _star, _bridge):
        texts += make(rng)
    texts += [rng.choice(texts) for _ in range(4)]  # exact copies of near copies
    texts += [" ".join(rng.sample(SENTENCES, 15)) for _ in range(8)]
    ids = rng.sample(range(10**6), len(texts))
    return [{"id": f"d{i:06d}", "text": t, "prio": rng.randint(0, 2)} for i, t in zip(ids, texts)]


def keep_key(policy, record):
    """--keep's key, smaller preferred (modules/dedup/keep.py)."""
    return {"hub": 0.0, "smallest-id": 0.0, "longest": -float(len(record["text"])),
            "priority:prio": -float(record["prio"])}[policy]


def the_rule(ids, by_id, policy):
    """{id: kept_id} of one component by the rule, from the true Jaccard of every pair of it."""
    close = {i: {j for j in ids if j != i and jaccard(by_id[i]["text"], by_id[j]["text"]) >= T} for i in ids}
    key = {i: keep_key(policy, by_id[i]) for i in ids}
    hub = policy != "smallest-id"
    turn = sorted(ids, key=lambda i: (key[i], -sum(key[j] == key[i] for j in close[i]) if hub else 0, i))
    kept = []
    for i in turn:
        if not close[i] & set(kept):
            kept.append(i)
    return {i: i if i in kept else next(k for k in kept if k in close[i]) for i in ids}


def lsh_pairs(out):
    """The pairs of ids that shared an LSH bucket in the run."""
    work = side(out, "_work")
    ids = pd.read_parquet(work / "signatures", columns=["doc", "id"]).set_index("doc")["id"]
    buckets = pd.read_parquet(work / "buckets")
    pairs = set()
    for docs in buckets.groupby("bucket")["doc"]:
        members = sorted(set(ids.loc[docs[1].to_numpy()]))
        pairs.update(itertools.combinations(members, 2))
    return pairs


CASES = [(seed, policy) for seed, policy in zip(range(6), itertools.cycle(["hub", "longest", "priority:prio"]))]
CASES += [(0, "smallest-id"), (3, "smallest-id")]


def check_invariants(out, by_id, policy):
    """(a) and (b) of the module doc and the cluster sizes; returns (audit frame, kept ids)."""
    audit = pd.read_parquet(side(out, "_duplicates"))
    kept = set(read_output(out)["id"])
    comp = dict(zip(audit["id"], audit["component"]))
    kept_id = dict(zip(audit["id"], audit["kept_id"]))
    removed = set(audit["id"][audit["removed"]])
    assert kept == set(by_id) - removed and not audit["id"].duplicated().any()  # one final decision each

    def sim(a, b):
        return jaccard(by_id[a]["text"], by_id[b]["text"])

    # (a) no two kept documents of one component or of one LSH bucket are similar
    same = [(a, b) for a, b in itertools.combinations(sorted(kept & set(comp)), 2) if comp[a] == comp[b]]
    close_kept = [(a, b, round(sim(a, b), 3)) for a, b in set(same) | lsh_pairs(out)
                  if a in kept and b in kept and sim(a, b) >= T]
    assert not close_kept, f"kept side by side: {close_kept}"
    # (b) removed only for a similar document --keep ranks no worse
    for i in removed:
        k = kept_id[i]
        assert k in kept and sim(i, k) >= T, (i, k, sim(i, k))
        assert keep_key(policy, by_id[k]) <= keep_key(policy, by_id[i]), (policy, i, k)
    sizes = dict(zip(*read_output(out)[["id", "dup_cluster_size"]].to_numpy().T))
    assert sum(int(v) for v in sizes.values()) == len(by_id)
    assert all(int(sizes[k]) == 1 + sum(kept_id.get(i) == k and i != k for i in kept_id) for k in kept)
    return audit, kept


@pytest.mark.parametrize("seed,policy", CASES)
def test_decisions_against_brute_force(tmp_path, seed, policy):
    records = corpus(seed)
    by_id = {r["id"]: r for r in records}
    decided = {}
    for parts in (2, 3):
        out = tmp_path / f"out{parts}"
        manifest = run_stage("fuzzy_dedup", {"keep": policy, "audit_sample": 1000},
                             files_of(tmp_path, records, parts=parts, name=f"in{parts}"), out)
        audit, kept = check_invariants(out, by_id, policy)
        comp = dict(zip(audit["id"], audit["component"]))
        kept_id = dict(zip(audit["id"], audit["kept_id"]))
        removed = set(audit["id"][audit["removed"]])
        # the rule, recomputed component by component (every member of a component this small is a
        # candidate of round 1)
        assert manifest["dedup"]["refine_rounds"] == 1
        members = audit.groupby("component")["id"].apply(sorted)
        want = {i: k for ids in members for i, k in the_rule(ids, by_id, policy).items()}
        assert kept_id == want
        # (c) the audit over every document
        a = manifest["dedup"]["audit"]
        true = [(x, y) for x, y in itertools.combinations(sorted(by_id), 2)
                if jaccard(by_id[x]["text"], by_id[y]["text"]) >= T]
        found = [(x, y) for x, y in true if x in comp and comp.get(x) == comp.get(y) and (x in removed or y in removed)]
        assert (a["sample"], a["true_pairs"]) == (len(records), len(true))
        assert a["recall"] == round(len(found) / len(true), 4) and a["precision"] == 1.0
        assert a["removed_in_sample"] == len(removed)
        decided[parts] = ({frozenset(ids) for ids in members}, kept_id)
    # the same components over two or three partitions: the same decisions
    if decided[2][0] == decided[3][0]:
        assert decided[2][1] == decided[3][1]


@pytest.mark.parametrize("seed,policy", CASES[:3])
def test_many_rounds_keep_the_invariants(tmp_path, monkeypatch, seed, policy):
    """Two candidates a round and no budget: a component is decided over several rounds, each keeping
    some candidates and removing what they cover; (a) and (b) hold however the work is split."""
    rule = importlib.import_module("curate.stages.dedup.fuzzy.decide")
    monkeypatch.setattr(rule, "CANDIDATES", 2)
    monkeypatch.setattr(rule, "PAIR_BUDGET", 0)
    records = corpus(seed)
    manifest = run_stage("fuzzy_dedup", {"keep": policy}, files_of(tmp_path, records), tmp_path / "out")
    assert 3 <= manifest["dedup"]["refine_rounds"] < rule.MAX_REFINE_ROUNDS
    check_invariants(tmp_path / "out", {r["id"]: r for r in records}, policy)


def test_the_shapes_are_adversarial():
    """Every corpus has components where keeping the first by --keep and its neighbours is not enough:
    pairs below the threshold inside a cluster, exact copies, and leaves longer than their center."""
    records = corpus(0)
    texts = [r["text"] for r in records]
    assert len(texts) != len(set(texts))  # exact copies
    sims = np.array([jaccard(a, b) for a, b in itertools.combinations(texts, 2)])
    assert (sims >= T).sum() > 100 and ((sims >= 0.6) & (sims < T)).sum() > 50  # near the threshold, both sides
