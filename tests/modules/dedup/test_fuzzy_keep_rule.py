"""Fuzzy dedup never keeps two similar documents of one component, and removes a document only for one
that ranks before it by --keep (hostile pass 3, point 5), on a hand-checkable star; --keep hub (the
default) keeps the star's center, --keep smallest-id the smallest id (issue 47, point 7).

The star: a center C of 300 words, two exact copies of it, and leaves that are C plus 50 words of their
own at the end (so longer than C): true Jaccard 296/346 = 0.855 from C to a leaf, 296/396 = 0.747
between two leaves. The oracle is the readable reference ``minhash.shingles`` as Python sets.
"""

import importlib
import random

import numpy as np
import pandas as pd
import pytest

from curate.stages.dedup import keep
from curate.stages.dedup.fuzzy import FuzzyDedupSettings
from curate.stages.dedup.fuzzy.decide import hub_first
from curate.stages.errors import SettingsError
from tests.conftest import read_output, run_stage, side
from tests.modules.dedup.test_fuzzy_oracle import check_invariants, corpus, the_rule
from tests.modules.dedup.test_fuzzy_rounds import VOCAB, T, files_of, jaccard, words


def star_of_longer_leaves(seed=11, leaves=6, center_id="c"):
    rng = random.Random(seed)
    center = " ".join(words(rng, 300))
    out = [{"id": center_id, "text": center}, {"id": center_id + "-copy1", "text": center},
           {"id": center_id + "-copy2", "text": center}]
    out += [{"id": f"leaf{k}", "text": center + " " + " ".join(rng.choice(VOCAB) for _ in range(50))}
            for k in range(leaves)]
    return out


def test_the_star_is_as_described():
    records = star_of_longer_leaves()
    texts = {r["id"]: r["text"] for r in records}
    leaves = [i for i in texts if i.startswith("leaf")]
    assert all(0.84 < jaccard(texts["c"], texts[i]) < 0.87 for i in leaves)
    assert all(jaccard(texts[a], texts[b]) < T for a in leaves for b in leaves if a < b)
    assert all(len(texts[i]) > len(texts["c"]) for i in leaves)


def test_keep_longest_keeps_every_leaf_and_removes_the_center_for_the_longest(tmp_path):
    """Round 1 keeps the longest leaf and removes C and its copies for it; the other leaves are not
    similar to it nor to each other, so all are kept. Before: round 2 kept C again (it covers the
    leaves) beside the leaf it had been removed for (0.855), and removed the longer leaves for C."""
    records = star_of_longer_leaves()
    texts = {r["id"]: r["text"] for r in records}
    run_stage("fuzzy_dedup", {"keep": "longest", "audit_sample": 100}, files_of(tmp_path, records), tmp_path / "out")
    kept = set(read_output(tmp_path / "out")["id"])
    close_kept = [(a, b, round(jaccard(texts[a], texts[b]), 3)) for a in sorted(kept) for b in sorted(kept)
                  if a < b and jaccard(texts[a], texts[b]) >= T]
    assert not close_kept, f"kept side by side: {close_kept}"
    audit = pd.read_parquet(side(tmp_path / "out", "_duplicates"))
    removed = audit[audit["removed"]]
    longer = [(i, k) for i, k in zip(removed["id"], removed["kept_id"]) if len(texts[i]) > len(texts[k])]
    assert not longer, f"removed for a shorter document: {longer}"
    longest = max(texts, key=lambda i: (len(texts[i]), [-ord(ch) for ch in i]))
    assert kept == {i for i in texts if i.startswith("leaf")}
    assert dict(zip(removed["id"], removed["kept_id"])) == {"c": longest, "c-copy1": longest, "c-copy2": longest}


@pytest.mark.parametrize("settings", [{}, {"keep": "hub"}], ids=["default", "hub"])
def test_a_document_is_never_kept_beside_one_it_was_removed_for(tmp_path, settings):
    """--keep hub (the default) ranks every document equal, so the center ranked last by id but close
    to every leaf is kept and every other document removed for it. Before: round 1 kept leaf0 (the
    smallest id) and removed the center for it; round 2 kept the center again (it covers the other
    leaves) beside leaf0, 0.85 similar."""
    records = star_of_longer_leaves(center_id="z")
    run_stage("fuzzy_dedup", {**settings, "audit_sample": 100}, files_of(tmp_path, records), tmp_path / "out")
    out = read_output(tmp_path / "out")
    assert set(out["id"]) == {"z"} and int(out["dup_cluster_size"].iloc[0]) == 9


@pytest.mark.parametrize("rounds", ["one", "many"])
def test_keep_smallest_id_keeps_the_smallest_id(tmp_path, monkeypatch, rounds):
    """The hub of the star is z, the largest id; --keep smallest-id keeps leaf0, the smallest, and
    removes z and its copies for it; the other leaves are not similar to leaf0 nor to each other, so
    they stay. Before (smallest-id then meant hub first), z was kept and every leaf removed for it.
    With two candidates a round the members still take turns by id: the same decisions."""
    if rounds == "many":
        rule = importlib.import_module("curate.stages.dedup.fuzzy.decide")
        monkeypatch.setattr(rule, "CANDIDATES", 2)
        monkeypatch.setattr(rule, "PAIR_BUDGET", 0)
    records = star_of_longer_leaves(center_id="z")
    manifest = run_stage("fuzzy_dedup", {"keep": "smallest-id", "audit_sample": 100}, files_of(tmp_path, records),
                         tmp_path / "out")
    assert (manifest["dedup"]["refine_rounds"] > 1) == (rounds == "many")
    out = read_output(tmp_path / "out")
    leaves = {f"leaf{k}" for k in range(6)}
    assert set(out["id"]) == leaves
    sizes = dict(zip(out["id"], out["dup_cluster_size"].astype(int)))
    assert sizes == {i: 4 if i == "leaf0" else 1 for i in leaves}
    audit = pd.read_parquet(side(tmp_path / "out", "_duplicates"))
    removed = audit[audit["removed"]]
    assert dict(zip(removed["id"], removed["kept_id"])) == {"z": "leaf0", "z-copy1": "leaf0", "z-copy2": "leaf0"}


@pytest.mark.parametrize("seed", [1, 4])
def test_keep_smallest_id_is_the_same_rule_over_many_rounds(tmp_path, monkeypatch, seed):
    """On the adversarial corpora of the oracle test, with two candidates a round: the decisions are
    the rule's (members in turn by id, kept unless close to one kept before), recomputed by brute
    force, however many rounds it takes, since the candidates are always the smallest ids left."""
    rule = importlib.import_module("curate.stages.dedup.fuzzy.decide")
    monkeypatch.setattr(rule, "CANDIDATES", 2)
    monkeypatch.setattr(rule, "PAIR_BUDGET", 0)
    records = corpus(seed)
    by_id = {r["id"]: r for r in records}
    manifest = run_stage("fuzzy_dedup", {"keep": "smallest-id"}, files_of(tmp_path, records), tmp_path / "out")
    assert 3 <= manifest["dedup"]["refine_rounds"] < rule.MAX_REFINE_ROUNDS
    audit, _ = check_invariants(tmp_path / "out", by_id, "smallest-id")
    members = audit.groupby("component")["id"].apply(sorted)
    assert dict(zip(audit["id"], audit["kept_id"])) == {
        i: k for ids in members for i, k in the_rule(ids, by_id, "smallest-id").items()}


def test_the_policies_by_name():
    """hub is fuzzy's default, a policy without a column and without a key (as smallest-id, which
    stays exact dedup's default); only smallest-id turns the hub rule off."""
    assert FuzzyDedupSettings().keep == "hub" and keep.DEFAULT == "smallest-id"
    assert keep.parse("hub") == keep.Policy("hub")
    assert keep.keys(pd.DataFrame({"id": ["a", "b"]}), np.arange(2), keep.parse("hub"), "f").tolist() == [0, 0]
    with pytest.raises(SettingsError, match="keep hub takes no column; got 'hub:x'"):
        FuzzyDedupSettings(keep="hub:x")
    assert [hub_first(p) for p in ("hub", "smallest-id", "longest", "oldest:snap")] == [True, False, True, True]
