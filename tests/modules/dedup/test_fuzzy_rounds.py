"""The decision rounds of fuzzy dedup (issue 35) on hand-checkable clusters, with a brute-force oracle.

A chain, a star, a cloud of near-threshold copies and an --against run over such a cloud, each over at
least two partitions; the oracle is the readable reference ``minhash.shingles`` as Python sets. Then
that a comparing task holds at most a partition's sets plus one bounded batch (issue 30).
"""

import functools
import importlib
import random

import numpy as np
import pandas as pd
import pytest

from curate.stages.dataset import STRING
from curate.stages.dedup import fuzzy, minhash, shingles
from tests.conftest import DATA, read_output, run_stage, side, write_jsonl

SENTENCES = (DATA / "dedup" / "sentences.txt").read_text(encoding="utf-8").splitlines()
VOCAB = sorted({w for s in SENTENCES for w in s.split()})
T = 0.8


@functools.cache
def _set(text):
    return frozenset(minhash.shingles(text))


def jaccard(a, b):
    x, y = _set(a), _set(b)
    return len(x & y) / len(x | y) if x | y else 0.0


def words(rng, n):
    out = []
    while len(out) < n:
        out += rng.choice(SENTENCES).split()
    return out[:n]


def changed(rng, ws, positions):
    ws = list(ws)
    for p in positions:
        ws[p] = next(w for w in iter(lambda: rng.choice(VOCAB), None) if w != ws[p])
    return ws


def files_of(tmp_path, records, parts=2, name="in"):
    records = list(records)
    random.Random(len(records)).shuffle(records)
    return [write_jsonl(tmp_path / name / f"part-{k}.jsonl", records[k::parts]) for k in range(parts)]


def check_removals(out, texts):
    """Every removed document reaches the threshold against its kept_id, and no two kept documents of a
    component reach it (brute force); returns the audit."""
    audit = pd.read_parquet(side(out, "_duplicates"))
    removed = audit[audit["removed"]]
    low = [(i, k, round(jaccard(texts[i], texts[k]), 3)) for i, k in zip(removed["id"], removed["kept_id"])
           if jaccard(texts[i], texts[k]) < T]
    assert not low, f"removed below the threshold against kept_id: {low}"
    kept = set(read_output(out)["id"])
    assert set(removed["id"]).isdisjoint(kept) and set(removed["kept_id"]) <= kept
    survivors = audit[~audit["removed"]]
    for _c, ids in survivors.groupby("component")["id"]:
        ids = sorted(ids)
        close = [(a, b) for k, a in enumerate(ids) for b in ids[k + 1:] if jaccard(texts[a], texts[b]) >= T]
        assert not close, f"kept side by side: {close}"
    return audit


# --------------------------------------------------------------------------- the rule by hand


def test_a_round_by_hand():
    """Component 1: b, c, d, a; a is close to all three, b ~ c: a covers the most and is kept, the
    others are removed for it. Component 2: e ~ f, g alone: e and f cover as much, e has the smaller id
    and is kept, f removed for it, g kept. Component 3 under a keep key: y (key 0) ranks before x
    (key 1) whatever it covers, so x ~ y removes x; z, close to x only, is kept (x, removed, covers
    nothing)."""
    members = pd.DataFrame({"doc": [10, 11, 12, 5, 20, 21, 22, 30, 31, 32], "comp": [1, 1, 1, 1, 2, 2, 2, 3, 3, 3],
                            "id": pd.array(list("bcdaefgxyz"), dtype=STRING), "key": [0.0] * 7 + [1.0, 0.0, 1.0],
                            "weight": 1})
    close = pd.DataFrame({"doc": [10, 11, 12, 11, 21, 30, 32], "cand": [5, 5, 5, 10, 20, 31, 30]})
    got = fuzzy.decide_round(members, close, 1, last=False).set_index("id")
    assert got.loc["a", ["removed", "decided", "kept_id", "round"]].tolist() == [False, True, "a", 1]
    for i in "bcd":
        assert got.loc[i, ["removed", "decided", "kept_id"]].tolist() == [True, True, "a"]
    assert got.loc["e", ["removed", "kept_id"]].tolist() == [False, "e"]
    assert got.loc["f", ["removed", "kept_id"]].tolist() == [True, "e"]
    assert got.loc["g", ["removed", "decided"]].tolist() == [False, True]
    assert got.loc["x", ["removed", "kept_id"]].tolist() == [True, "y"]
    assert got.loc["z", ["removed", "decided"]].tolist() == [False, True] and not got.loc["y", "removed"]
    assert len(got) == 10
    # a member that is not a candidate and close to no kept one stays undecided (kept when last)
    with_more = members.assign(key=0.0)
    few = fuzzy.decide_round(with_more[with_more["comp"] == 2], close.iloc[:0], 2, last=False)
    assert few["decided"].all()  # every member of a small component is a candidate: all kept
    assert fuzzy.candidate_pairs(with_more[with_more["comp"] == 2]).shape[0] == 3  # each pair once


def test_candidates_are_the_best_ranked_then_a_hash_sample(monkeypatch):
    """Candidates: the members --keep prefers first, then, among equal keys, the smallest hashes of the
    document numbers; the same whatever the order of the rows."""
    rule = importlib.import_module("curate.stages.dedup.fuzzy.decide")  # (fuzzy.decide is the function)
    monkeypatch.setattr(rule, "CANDIDATES", 8)
    monkeypatch.setattr(rule, "PAIR_BUDGET", 0)
    df = pd.DataFrame({"doc": np.arange(100, 160), "comp": np.repeat([1, 2, 3], 20), "key": 0.0})
    df.loc[df["doc"] >= 150, "key"] = -1.0  # comp 3's last ten: preferred by --keep
    picked = fuzzy.pick_candidates(df)
    again = fuzzy.pick_candidates(df.iloc[::-1].reset_index(drop=True))[::-1]
    assert (picked == again).all() and picked.sum() == 24
    h = fuzzy.doc_hash(df["doc"].to_numpy())
    for c in (1, 2):
        mine = df["comp"].to_numpy() == c
        assert h[mine & picked].max() < h[mine & ~picked].min()
    assert set(df["doc"][picked & (df["comp"] == 3).to_numpy()]) <= set(range(150, 160))
    # each member with every candidate, two candidates once: 8 x 7 / 2 + 12 x 8 per component
    pairs = fuzzy.candidate_pairs(df)
    assert len(pairs) == 3 * (28 + 96) and (pairs["doc"] != pairs["cand"]).all()
    assert not pairs[["doc", "cand"]].duplicated().any()
    assert set(pairs["cand"]) == set(df["doc"][picked])
    assert frozenset(map(frozenset, pairs[["doc", "cand"]].to_numpy().tolist())) >= {
        frozenset((a, b)) for a in df["doc"][picked & (df["comp"] == 1).to_numpy()]
        for b in df["doc"][(df["comp"] == 1).to_numpy()] if a != b}
    assert fuzzy.candidate_pairs(df.iloc[:0]).empty


def test_a_small_component_has_every_member_a_candidate():
    """PAIR_BUDGET: up to 1,024 undecided members all are candidates; past it, budget / n of them, never
    fewer than CANDIDATES."""
    sizes = [3, 1024, 1025, 4096, 100_000]
    df = pd.DataFrame({"doc": np.arange(sum(sizes)), "comp": np.repeat(np.arange(len(sizes)), sizes)})
    r = fuzzy.candidates_per_member(df)
    first = np.r_[0, np.cumsum(sizes)[:-1]]
    assert r[first].tolist() == [64, 1024, 1023, 256, 64]  # 64: CANDIDATES
    picked = fuzzy.pick_candidates(df)
    assert np.bincount(df["comp"], weights=picked).astype(int).tolist() == [3, 1024, 1023, 256, 64]


# --------------------------------------------------------------------------- a chain


def chain(rng, length, n=300):
    """``length`` documents, each changing 5 words of the previous one at positions that cycle through
    four disjoint sets: Jaccard ~0.84 to its neighbours, ~0.71 two apart, less further."""
    grid = list(range(10, n - 5, 14))[:20]
    sets = [grid[i::4] for i in range(4)]
    docs = [words(rng, n)]
    for i in range(1, length):
        docs.append(changed(rng, docs[-1], sets[i % 4]))
    return [" ".join(d) for d in docs]


@pytest.mark.parametrize("length", [40, 150])
def test_a_chain_is_decided_in_one_round(tmp_path, length):
    """Every member of a component of up to 1,024 is a candidate of round 1 (PAIR_BUDGET), so a chain is
    decided at once. (One representative a round needed a round per two links; the first by --keep
    and then the others, two rounds.) The links close to two others go first: c01 is kept and removes
    the end c00 and c02, and so on: about every other link stays."""
    rng = random.Random(3)
    texts = chain(rng, length)
    assert all(jaccard(texts[i], texts[i + 1]) >= T > jaccard(texts[i], texts[i + 2]) for i in range(length - 2))
    others = [" ".join(rng.sample(SENTENCES, 15)) for _ in range(10)]
    records = [{"id": f"c{k:02d}", "text": t} for k, t in enumerate(texts)]
    records += [{"id": f"o{k:02d}", "text": t} for k, t in enumerate(others)]
    manifest = run_stage("fuzzy_dedup", {}, files_of(tmp_path, records), tmp_path / "out")
    by_id = {r["id"]: r["text"] for r in records}
    audit = check_removals(tmp_path / "out", by_id)
    kept = set(read_output(tmp_path / "out")["id"])
    assert {f"o{k:02d}" for k in range(10)} <= kept and "c01" in kept and "c00" not in kept
    assert manifest["dedup"]["components"] == 1 and len(audit) == length
    assert manifest["dedup"]["refine_rounds"] == 1
    chain_kept = sorted(int(i[1:]) for i in kept if i.startswith("c"))
    assert length / 3 <= len(chain_kept) <= length / 2 + 1  # a path keeps about every other or third link
    assert all(b - a >= 2 for a, b in zip(chain_kept, chain_kept[1:]))  # no two neighbours kept


# --------------------------------------------------------------------------- a star


def star(rng, copies=30, n=300):
    center = words(rng, n)
    return " ".join(center), [" ".join(changed(rng, center, rng.sample(range(n), 5))) for _ in range(copies)]


@pytest.mark.parametrize("center_id", ["a-center", "z-center"])
def test_a_star(tmp_path, center_id):
    """The center is close to every copy, the copies mostly not to each other: the center covers the
    most and is kept whatever its id, and removes every copy in one round. (Before, the center ranked
    last was removed for the first copy in round 1 and kept again in round 2 beside it: two kept
    documents 0.8 or more similar.)"""
    rng = random.Random(5)
    center, copies = star(rng)
    assert all(jaccard(center, c) >= T for c in copies)
    far = np.mean([jaccard(a, b) < T for k, a in enumerate(copies) for b in copies[k + 1:]])
    assert far > 0.5
    records = [{"id": center_id, "text": center}] + [{"id": f"c{k:02d}", "text": t} for k, t in enumerate(copies)]
    manifest = run_stage("fuzzy_dedup", {}, files_of(tmp_path, records), tmp_path / "out")
    check_removals(tmp_path / "out", {r["id"]: r["text"] for r in records})
    assert set(read_output(tmp_path / "out")["id"]) == {center_id}
    assert manifest["dedup"]["refine_rounds"] == 1
    sizes = dict(zip(*read_output(tmp_path / "out")[["id", "dup_cluster_size"]].to_numpy().T))
    assert sizes == {center_id: 31}  # every copy counted once, by the document it was removed for


# --------------------------------------------------------------------------- a cloud of near-threshold copies


def cloud(seed, copies, unrelated, n=620, frac=0.01):
    """Copies of one page with each word changed with probability ``frac`` (pairwise Jaccard ~0.7-0.95:
    a quarter below 0.8), among unrelated documents: issue 35's giant cluster, smaller."""
    rng = random.Random(seed)
    page = words(rng, n)
    out = []
    for k in range(copies):
        positions = [i for i in range(n) if rng.random() < frac]
        out.append({"id": f"copy{k:04d}", "text": " ".join(changed(rng, page, positions))})
    out += [{"id": f"other{k:04d}", "text": " ".join(rng.sample(SENTENCES, 30))} for k in range(unrelated)]
    return out


def test_a_cloud_of_near_threshold_copies(tmp_path):
    records = cloud(0, 1000, 100)
    texts = {r["id"]: r["text"] for r in records}
    copies = [r["text"] for r in records if r["id"].startswith("copy")][:80]
    pairs = [jaccard(a, b) for k, a in enumerate(copies) for b in copies[k + 1:]]
    assert 0.15 < np.mean(np.array(pairs) < T) < 0.5  # near the threshold: many pairs below it
    manifest = run_stage("fuzzy_dedup", {}, files_of(tmp_path, records), tmp_path / "out")
    check_removals(tmp_path / "out", texts)
    kept = set(read_output(tmp_path / "out")["id"])
    assert sum(i.startswith("other") for i in kept) == 100  # no unrelated document removed
    assert sum(i.startswith("copy") for i in kept) <= 10  # at most 1% of the copies survive
    assert manifest["dedup"]["refine_rounds"] <= 4


def test_against_an_index_over_a_cloud_equals_the_joint_run(tmp_path):
    """Loose edges and hubs across the index boundary decide B as the joint run."""
    records = cloud(1, 60, 10)
    a = [{**r, "snap": "2023"} for r in records[::2]]
    b = [{**r, "id": "b" + r["id"], "snap": "2024"} for r in records[1::2]]
    fa, fb = files_of(tmp_path, a, name="inA"), files_of(tmp_path, b, name="inB")
    run_stage("fuzzy_dedup", {"save_index": str(tmp_path / "idx")}, fa, tmp_path / "A")
    run_stage("fuzzy_dedup", {"against": [str(tmp_path / "idx")]}, fb, tmp_path / "B")
    run_stage("fuzzy_dedup", {"keep": "oldest:snap"}, fa + fb, tmp_path / "AB")

    def decided(out):
        audit = pd.read_parquet(side(out, "_duplicates"))
        audit = audit[audit["id"].str.startswith("b")]
        sizes = read_output(out)
        sizes = sizes[sizes["id"].str.startswith("b")]
        return (sorted(zip(audit["id"], audit["kept_id"], audit["removed"])),
                sorted(zip(sizes["id"], sizes["dup_cluster_size"].astype(int))))

    got = decided(tmp_path / "B")
    assert got == decided(tmp_path / "AB")
    assert sum(not r for _, _, r in got[0]) <= 3 and len(got[0]) >= 30


# --------------------------------------------------------------------------- memory bound


def test_a_comparing_task_holds_a_partition_and_one_batch(tmp_path, monkeypatch):
    """With a tiny batch (PAIR_SET_VALUES) every read of sets is at most one partition's sets (the
    task's own documents) or one batch plus one set (the others'), and the result is the same."""
    rng = random.Random(9)
    center, copies = star(rng, 40)
    records = [{"id": "center", "text": center}] + [{"id": f"c{k:02d}", "text": t} for k, t in enumerate(copies)]
    records += [{"id": f"o{k}", "text": " ".join(rng.sample(SENTENCES, 12))} for k in range(20)]
    files = files_of(tmp_path, records, parts=3)
    run_stage("fuzzy_dedup", {}, files, tmp_path / "plain")

    budget, reads, own = 2000, [], []
    original, read = shingles.read_ranges, fuzzy.verify.SetStore.read

    def counting(f, start, count, where=""):
        values, offsets = original(f, start, count, where)
        reads.append(("own" if own else "other", len(values)))
        return values, offsets

    def own_read(self, *args, **kw):  # the sets of the task's own documents
        own.append(1)
        try:
            return read(self, *args, **kw)
        finally:
            own.pop()

    monkeypatch.setattr(fuzzy.verify, "PAIR_SET_VALUES", budget)
    monkeypatch.setattr(fuzzy.verify.SetStore, "read", own_read)
    monkeypatch.setattr(shingles, "read_ranges", counting)
    run_stage("fuzzy_dedup", {}, files, tmp_path / "small")
    sig = sorted((side(tmp_path / "small", "_work") / "signatures").glob("part-*.parquet"))
    per_part = [int(pd.read_parquet(p, columns=["count"])["count"].sum()) for p in sig]
    largest = max(int(pd.read_parquet(p, columns=["count"])["count"].max()) for p in sig)
    others = [n for side, n in reads if side == "other"]
    assert max(n for side, n in reads if side == "own") <= max(per_part)
    assert max(others) <= budget + largest and len(others) > 3 * len(sig)  # many small batches
    cols = ["id", "component", "kept_id", "removed"]
    a = pd.read_parquet(side(tmp_path / "plain", "_duplicates")).sort_values("id", ignore_index=True)[cols]
    b = pd.read_parquet(side(tmp_path / "small", "_duplicates")).sort_values("id", ignore_index=True)[cols]
    pd.testing.assert_frame_equal(a, b)
