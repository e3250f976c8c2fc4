"""Fuzzy dedup never keeps two similar documents of one component, and removes a document only for one
that ranks before it by --keep (hostile pass 3, point 5), on a hand-checkable star.

The star: a center C of 300 words, two exact copies of it, and leaves that are C plus 50 words of their
own at the end (so longer than C): true Jaccard 296/346 = 0.855 from C to a leaf, 296/396 = 0.747
between two leaves. The oracle is the readable reference ``minhash.shingles`` as Python sets.
"""

import random

import pandas as pd

from tests.conftest import read_output, run_stage
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
    audit = pd.read_parquet(tmp_path / "out" / "_duplicates")
    removed = audit[audit["removed"]]
    longer = [(i, k) for i, k in zip(removed["id"], removed["kept_id"]) if len(texts[i]) > len(texts[k])]
    assert not longer, f"removed for a shorter document: {longer}"
    longest = max(texts, key=lambda i: (len(texts[i]), [-ord(ch) for ch in i]))
    assert kept == {i for i in texts if i.startswith("leaf")}
    assert dict(zip(removed["id"], removed["kept_id"])) == {"c": longest, "c-copy1": longest, "c-copy2": longest}


def test_a_document_is_never_kept_beside_one_it_was_removed_for(tmp_path):
    """The default --keep (smallest id) ranks every document equal, so the center ranked last by id but
    close to every leaf is kept and every other document removed for it. Before: round 1 kept leaf0
    (the smallest id) and removed the center for it; round 2 kept the center again (it covers the
    other leaves) beside leaf0, 0.85 similar."""
    records = star_of_longer_leaves(center_id="z")
    run_stage("fuzzy_dedup", {"audit_sample": 100}, files_of(tmp_path, records), tmp_path / "out")
    out = read_output(tmp_path / "out")
    assert set(out["id"]) == {"z"} and int(out["dup_cluster_size"].iloc[0]) == 9
