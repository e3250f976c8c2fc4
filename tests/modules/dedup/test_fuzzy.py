"""fuzzy_dedup: pure per-partition functions, then the stage on several input files, then accuracy on a
labelled set whose true Jaccard similarities are computed by brute force.

tests/data/dedup/sentences.txt: 800 sentences of the Rust book pages in jobs/data/sample.jsonl.gz.
"""

import itertools
import random

import numpy as np
import pandas as pd
import pytest

from curate.stages.dataset import STRING
from curate.stages.dedup import fuzzy, minhash
from curate.stages.errors import SettingsError
from tests.conftest import DATA, read_output, run_stage, side, write_jsonl

SENTENCES = (DATA / "dedup" / "sentences.txt").read_text(encoding="utf-8").splitlines()


def test_settings():
    s = fuzzy.FuzzyDedupSettings()
    assert s.lsh_params() == (21, 6)  # P(candidate | J = 0.8) >= 0.99 with the most rows per band
    assert s.false_positive_check
    assert fuzzy.FuzzyDedupSettings(bands=16, rows=8).lsh_params() == (16, 8)
    for bad, match in [({"bands": 4}, "go together"), ({"bands": 20, "rows": 8}, "at most num_perm"),
                       ({"threshold": 1.0}, "threshold"), ({"shingle": "line"}, "shingle"),
                       ({"ngram": 0}, "ngram"), ({"num_perm": 0}, "num_perm")]:
        with pytest.raises(SettingsError, match=match):
            fuzzy.FuzzyDedupSettings(**bad)


def test_star_edges_link_every_member_to_the_smallest():
    buckets = pd.DataFrame({"bucket": np.array([7, 3, 7, 7, 3, 9], dtype=np.uint64),
                            "doc": np.array([50, 4, 20, 30, 2, 1], dtype=np.int64)})
    got = fuzzy.star_edges(buckets)
    assert sorted(zip(got["u"], got["v"])) == [(4, 2), (30, 20), (50, 20)]
    assert fuzzy.star_edges(buckets.iloc[:0]).empty


def _star_edges_of_every_row(buckets, anchors):
    """The oracle: star edges from one lexsort of every row (what the step did before it looked only
    at the rows of shared buckets)."""
    b, d = buckets["bucket"].to_numpy(dtype=np.uint64), buckets["doc"].to_numpy(dtype=np.int64)
    order = np.lexsort((d, b))
    b, d = b[order], d[order]
    first = np.r_[True, b[1:] != b[:-1]] if len(b) else np.zeros(0, bool)
    start = np.maximum.accumulate(np.where(first, np.arange(len(b)), 0)) if len(b) else np.zeros(0, np.int64)
    rank = np.arange(len(b)) - start
    u, v = [d[rank >= 1]], [d[start[rank >= 1]]]
    if anchors >= 2:
        u.append(d[rank >= 2])
        v.append(d[start[rank >= 2] + 1])
    return pd.DataFrame({"u": np.concatenate(u), "v": np.concatenate(v)})


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("anchors", [1, 2])
def test_star_edges_equal_those_of_a_sort_of_every_row(seed, anchors):
    """Edge cases: singleton buckets (most of them), a row repeated (an index's center met twice), the
    largest key, a bucket of one document twice, keys in any order."""
    rng = np.random.default_rng(seed)
    n = 2000
    keys = rng.integers(0, 2**64 - 1, size=n // 4, dtype=np.uint64, endpoint=True)
    bucket = np.concatenate([rng.choice(keys, n // 2), rng.integers(0, 2**63, n // 2, dtype=np.uint64),
                             np.array([2**64 - 1, 2**64 - 1, 5, 5], dtype=np.uint64)])
    doc = np.concatenate([rng.integers(0, 300, n), np.array([1, 0, 8, 8])]).astype(np.int64)
    buckets = pd.DataFrame({"bucket": bucket, "doc": doc}).sample(frac=1.0, random_state=seed)
    got = fuzzy.star_edges(buckets, anchors)
    pd.testing.assert_frame_equal(got, _star_edges_of_every_row(buckets, anchors))
    assert len(got) > 100
    empty = buckets.iloc[:0]
    pd.testing.assert_frame_equal(fuzzy.star_edges(empty, anchors), _star_edges_of_every_row(empty, anchors))


def test_signature_table_skips_dropped_and_empty_documents():
    df = pd.DataFrame({
        "id": pd.array(["a", "b", "c", "d"], dtype=STRING),
        "text": pd.array(["one two three four five six", "bad", "", "seven eight"], dtype=STRING),
        "_reason": pd.array([None, "invalid_json", None, None], dtype=STRING),
    })
    settings = fuzzy.FuzzyDedupSettings(num_perm=16)
    table = fuzzy.signature_table(df, 1, settings)
    assert table.column("id").to_pylist() == ["a", "d"]
    assert table.column("doc").to_pylist() == [(1 << 32) + 0, (1 << 32) + 3]
    sig, _ = minhash.signatures(["one two three four five six", "seven eight"], 16, 42)
    got = np.frombuffer(table.column("sig").combine_chunks().buffers()[1], dtype="<u4").reshape(2, 16)
    assert (got == sig).all()


def _doc(rng, k=10):
    return " ".join(rng.sample(SENTENCES, k))


def test_stage_across_partitions(tmp_path):
    rng = random.Random(1)
    base = [_doc(rng) for _ in range(6)]
    near = base[0].replace(base[0].split(". ")[3], "A different sentence stands here now.", 1)
    files = [
        write_jsonl(tmp_path / "in" / "a.jsonl", [
            {"id": "k", "text": base[0]}, {"id": "b1", "text": base[1]}, {"id": "e1", "text": ""},
        ], raw_lines=["not json"]),
        write_jsonl(tmp_path / "in" / "b.jsonl", [
            {"id": "c", "text": near},                  # near copy of k, smaller id: kept
            {"id": "b2", "text": base[2]}, {"id": "e2", "text": "  \n "},
        ]),
        write_jsonl(tmp_path / "in" / "c.jsonl", [
            {"id": "z", "text": base[0]},               # exact copy of k
            {"id": "b3", "text": base[3].upper()},      # case and punctuation are normalised away
            {"id": "b4", "text": base[3].replace(".", " ;")},
        ]),
    ]
    out = tmp_path / "out"
    manifest = run_stage("fuzzy_dedup", {"bands": 16, "rows": 8}, files, out, on_error="skip")
    assert manifest["partitions"] == 3
    assert manifest["counts"]["dropped"] == {"fuzzy_duplicate": 3, "invalid_json": 1}
    assert sorted(read_output(out)["id"]) == ["b1", "b2", "b3", "c", "e1", "e2"]  # empty docs never match
    audit = pd.read_parquet(side(out, "_duplicates"))
    assert sorted(audit.columns) == ["component", "id", "kept_id", "removed"]
    assert dict(zip(audit["id"], audit["kept_id"])) == {"c": "c", "k": "c", "z": "c", "b3": "b3", "b4": "b3"}
    assert audit.groupby("kept_id")["component"].nunique().eq(1).all()
    rejects = pd.concat([pd.read_parquet(p) for p in sorted((side(out, "_rejects")).glob("part-*"))])
    assert sorted(rejects.columns) == ["_detail", "_reason", "id"]
    assert manifest["dedup"]["signatures"] == 7  # 9 good rows minus 2 without shingles


# --------------------------------------------------------------------------- labelled accuracy

THRESHOLD = 0.8


def labelled_set(seed=0, n_base=90, n_variants=160):
    """Base documents of 10 random sentences, and variants of earlier documents (of variants too, so
    chains occur) with word substitutions, deletions, insertions or a replaced sentence."""
    rng = random.Random(seed)
    vocab = sorted({w for s in SENTENCES for w in s.split()})
    docs = [_doc(rng) for _ in range(n_base)]
    for _ in range(n_variants):
        words = rng.choice(docs).split()
        kind = rng.choice(["substitute", "delete", "insert", "sentence"])
        if kind == "sentence":
            text = " ".join(words).replace(rng.choice(SENTENCES), "", 1) + " " + rng.choice(SENTENCES)
        else:
            for _ in range(int(len(words) * rng.choice([0, 0.005, 0.01, 0.02, 0.04, 0.08]))):
                i = rng.randrange(len(words))
                if kind == "substitute":
                    words[i] = rng.choice(vocab)
                elif kind == "delete" and len(words) > 10:
                    del words[i]
                else:
                    words.insert(i, rng.choice(vocab))
            text = " ".join(words)
        docs.append(text)
    order = list(range(len(docs)))
    rng.shuffle(order)
    return [{"id": f"doc-{k:04d}", "text": docs[i]} for k, i in enumerate(order)]


def brute_force_jaccard(records):
    sets = [set(minhash.shingles(r["text"])) for r in records]
    n = len(sets)
    jac = np.eye(n)
    for i, j in itertools.combinations(range(n), 2):
        union = len(sets[i] | sets[j])
        jac[i, j] = jac[j, i] = len(sets[i] & sets[j]) / union if union else 0.0
    return jac


@pytest.fixture(scope="module")
def labelled(tmp_path_factory):
    records = labelled_set()
    folder = tmp_path_factory.mktemp("labelled")
    files = [write_jsonl(folder / f"part{k}.jsonl", records[k::3]) for k in range(3)]
    return records, files, brute_force_jaccard(records)


def _components(out, ids):
    audit = pd.read_parquet(side(out, "_duplicates"))
    comp = dict(zip(audit["id"], audit["component"]))
    return [comp.get(i, ("alone", i)) for i in ids]


def test_labelled_accuracy(labelled, tmp_path):
    records, files, jac = labelled
    ids = [r["id"] for r in records]
    pairs = np.argwhere(np.triu(jac >= THRESHOLD + 0.1, k=1))
    assert len(pairs) > 50 and ((jac > 0.3) & (jac < 0.7)).sum() > 50  # the set has both kinds of pair

    out = tmp_path / "checked"
    settings = {"threshold": THRESHOLD, "bands": 16, "rows": 8, "false_positive_check": True, "in_memory_edges": 0}
    manifest = run_stage("fuzzy_dedup", settings, files, out)
    assert manifest["dedup"]["connected_components"]["path"] == "distributed"
    assert manifest["dedup"]["verified_edges"] < manifest["dedup"]["edges"]  # the check dropped some

    comp = _components(out, ids)
    missed = [(ids[i], ids[j], jac[i, j]) for i, j in pairs if comp[i] != comp[j]]
    assert not missed, f"recall: pairs with Jaccard >= {THRESHOLD + 0.1} in different components: {missed}"

    kept = set(read_output(out)["id"])
    kept_idx = [k for k, i in enumerate(ids) if i in kept]
    for k, i in enumerate(ids):
        if i not in kept:
            best = max(jac[k, j] for j in kept_idx)
            assert best >= THRESHOLD - 0.2, f"precision: {i} removed, best Jaccard to a kept doc {best:.2f}"

    # the in-memory components path gives the same result
    same = tmp_path / "in-memory"
    manifest = run_stage("fuzzy_dedup", {**settings, "in_memory_edges": 10**6}, files, same)
    assert manifest["dedup"]["connected_components"]["path"] == "in-memory"
    cols = ["id", "component", "kept_id", "removed"]
    a = pd.read_parquet(side(out, "_duplicates")).sort_values("id", ignore_index=True)[cols]
    b = pd.read_parquet(side(same, "_duplicates")).sort_values("id", ignore_index=True)[cols]
    pd.testing.assert_frame_equal(a, b)
    for x, y in zip(sorted(out.glob("part-*")), sorted(same.glob("part-*"))):
        assert x.read_bytes() == y.read_bytes()


def test_labelled_recall_without_the_check(labelled, tmp_path):
    records, files, jac = labelled
    ids = [r["id"] for r in records]
    manifest = run_stage("fuzzy_dedup", {"threshold": THRESHOLD, "bands": 16, "rows": 8, "false_positive_check": False},
                         files, tmp_path / "o")
    comp = _components(tmp_path / "o", ids)
    pairs = np.argwhere(np.triu(jac >= THRESHOLD + 0.1, k=1))
    assert all(comp[i] == comp[j] for i, j in pairs)
    assert manifest["dedup"]["verified_edges"] is None


def test_defaults_accuracy(labelled, tmp_path):
    # the measures at the default settings (21 x 6 bands, the check on), brute force as oracle:
    # recall: every pair of Jaccard >= threshold + 0.05 ends in one component; precision: no removed
    # document whose best Jaccard to a kept one is below threshold - 0.1
    records, files, jac = labelled
    ids = [r["id"] for r in records]
    manifest = run_stage("fuzzy_dedup", {"threshold": THRESHOLD}, files, tmp_path / "o")
    assert (manifest["dedup"]["bands"], manifest["dedup"]["rows"]) == (21, 6)
    assert manifest["dedup"]["verified_edges"] is not None
    comp = _components(tmp_path / "o", ids)
    pairs = np.argwhere(np.triu(jac >= THRESHOLD + 0.05, k=1))
    assert len(pairs) > 50
    missed = [(ids[i], ids[j], round(jac[i, j], 3)) for i, j in pairs if comp[i] != comp[j]]
    assert not missed, f"recall: {missed}"
    kept = set(read_output(tmp_path / "o")["id"])
    kept_idx = [k for k, i in enumerate(ids) if i in kept]
    far = [i for k, i in enumerate(ids) if i not in kept and max(jac[k, j] for j in kept_idx) < THRESHOLD - 0.1]
    assert not far, f"precision: removed without a kept document within {THRESHOLD - 0.1}: {far}"


def test_pairs_are_decided_without_texts():
    # a component of two documents is one verified edge: the larger id goes, for the smaller;
    # a component of three is left to the rounds that fetch texts
    members = pd.DataFrame({"doc": [7, 2, 4, 5, 6], "comp": [2, 2, 4, 4, 4],
                            "id": pd.array(["b", "a", "x", "y", "z"], dtype=STRING)})
    pairs = fuzzy.split_pairs(members, True)
    assert list(pairs["doc"]) == [7, 2] and list(fuzzy.split_pairs(members, False)["doc"]) == [4, 5, 6]
    got = fuzzy.decide_pairs(pairs, 0.8).set_index("id")
    assert got.loc["b", "removed"] and got.loc["b", "kept_id"] == "a"
    assert not got.loc["a", "removed"] and got["decided"].all()


def test_decide_rounds():
    members = pd.DataFrame({"doc": [5, 3, 9, 1], "comp": [1, 1, 1, 1],
                            "id": pd.array(["e", "c", "a", "z"], dtype=STRING)})
    reps = fuzzy.pick_representatives(members)
    assert set(reps["rep_id"]) == {"a"} and set(reps["rep"]) == {9}
    checked = reps.assign(jaccard=np.where(reps["doc"] == 9, 1.0, np.where(reps["doc"] == 3, 0.9, 0.5)))
    got = fuzzy.decide(checked, 0.8, last=False).set_index("id")
    assert got.loc["a", ["removed", "decided"]].tolist() == [False, True]
    assert got.loc["c", ["kept_id", "removed", "decided"]].tolist() == ["a", True, True]
    assert got.loc["e", ["kept_id", "removed", "decided"]].tolist() == ["e", False, False]
    last = fuzzy.decide(checked, 0.8, last=True).set_index("id")
    assert last.loc["e", ["removed", "decided"]].tolist() == [False, True]  # undecided at the end: kept


def test_chain_is_not_removed_for_a_far_document(tmp_path):
    rng = random.Random(3)
    vocab = sorted({w for s in SENTENCES for w in s.split()})
    a = _doc(rng, 14).split()
    b = list(a)
    for i in (20, 90, 160):
        b[i] = rng.choice(vocab)
    c = list(b)
    for i in (55, 125, 195):
        c[i] = rng.choice(vocab)
    texts = [" ".join(x) for x in (a, b, c)]
    jac = minhash.jaccard(texts[:2] + [texts[0]], texts[1:] + [texts[2]])
    assert jac[0] >= 0.8 and jac[1] >= 0.8 and jac[2] < 0.8  # a ~ b ~ c, but a and c are not
    files = [write_jsonl(tmp_path / f"{k}.jsonl", [{"id": k, "text": t}]) for k, t in zip("abc", texts)]
    settings = {"bands": 16, "rows": 8, "false_positive_check": True}
    manifest = run_stage("fuzzy_dedup", settings, files, tmp_path / "checked")
    # b is close to both ends (--keep ranks all three equal): kept, and a and c removed for it; c is
    # never removed for a (before: a, the smallest id, was kept first and c for itself)
    assert sorted(read_output(tmp_path / "checked")["id"]) == ["b"]
    assert manifest["dedup"]["refine_rounds"] == 1 and manifest["dedup"]["components"] == 1
    audit = pd.read_parquet(side(tmp_path / "checked", "_duplicates")).set_index("id")
    assert audit["kept_id"].to_dict() == {"a": "b", "b": "b", "c": "b"}
    # with a key that prefers a, a is kept and c, far from it, is kept too: b is removed for a
    run_stage("fuzzy_dedup", {**settings, "keep": "longest"}, [write_jsonl(tmp_path / "long.jsonl", [
        {"id": k, "text": t + (" padding words here" if k == "a" else "")} for k, t in zip("abc", texts)])],
        tmp_path / "longest")
    audit = pd.read_parquet(side(tmp_path / "longest", "_duplicates")).set_index("id")
    assert audit["kept_id"].to_dict() == {"a": "a", "b": "a", "c": "c"}
    run_stage("fuzzy_dedup", {"bands": 16, "rows": 8, "false_positive_check": False}, files, tmp_path / "plain")
    assert sorted(read_output(tmp_path / "plain")["id"]) == ["a"]


def test_steps_resume(tmp_path):
    rng = random.Random(5)
    texts = [_doc(rng) for _ in range(4)]
    files = [write_jsonl(tmp_path / "in" / f"{k}.jsonl", [{"id": f"{k}-{j}", "text": texts[(k + j) % 4]}
                                                         for j in range(3)]) for k in range(2)]
    settings = {"false_positive_check": True, "in_memory_edges": 0}
    out = tmp_path / "out"
    run_stage("fuzzy_dedup", settings, files, out)
    first = [p.read_bytes() for p in sorted(out.glob("part-*"))]
    (out / "_SUCCESS").unlink()
    manifest = run_stage("fuzzy_dedup", settings, files, out)
    assert manifest["steps"] and all(s["skipped"] for s in manifest["steps"].values())
    assert [p.read_bytes() for p in sorted(out.glob("part-*"))] == first
    assert manifest["counts"]["dropped"] == {"fuzzy_duplicate": 2}


@pytest.mark.slow
def test_job_on_a_local_cluster(tmp_path):
    """Both stages as one job through the CLI on two worker processes (Dask's p2p shuffles)."""
    from tests.conftest import curate

    rng = random.Random(7)
    texts = [_doc(rng) for _ in range(5)]
    edited = texts[0].replace(texts[0].split(". ")[2], "This sentence was edited in the copy.", 1)
    write_jsonl(tmp_path / "in" / "a.jsonl", [{"id": f"a{i}", "text": t} for i, t in enumerate(texts)])
    write_jsonl(tmp_path / "in" / "b.jsonl", [{"id": "b0", "text": texts[1]}, {"id": "b1", "text": edited},
                                              {"id": "b2", "text": texts[2].lower()}])
    job = tmp_path / "job.yaml"
    job.write_text(f"""input: {tmp_path / "in" / "*.jsonl"}
stages:
  - exact_dedup: {{}}
  - fuzzy_dedup: {{bands: 16, rows: 8, false_positive_check: true, in_memory_edges: 0}}
""")
    curate("run", job, "--output", tmp_path / "out", "--workers", "2")
    assert sorted(read_output(tmp_path / "out" / "01-exact_dedup")["id"]) == ["a0", "a1", "a2", "a3", "a4", "b1", "b2"]
    assert sorted(read_output(tmp_path / "out" / "02-fuzzy_dedup")["id"]) == ["a0", "a1", "a2", "a3", "a4"]
    audit = pd.read_parquet(side(tmp_path / "out" / "02-fuzzy_dedup", "_duplicates"))
    assert dict(zip(audit["id"], audit["kept_id"])) == {"a0": "a0", "b1": "a0", "a2": "a2", "b2": "a2"}


@pytest.mark.parametrize("settings", [{}, {"in_memory_edges": 0, "false_positive_check": True}])
def test_nothing_to_compare(tmp_path, settings):
    """Only bad lines and documents without shingles (empty, whitespace only, punctuation only)."""
    files = [write_jsonl(tmp_path / "a.jsonl", [], raw_lines=["not json", b'{"id": "u", "text": "\xff"}']),
             write_jsonl(tmp_path / "b.jsonl", [{"id": "x", "text": ""}, {"id": "y", "text": " \n"},
                                                {"id": "z", "text": "..."}])]
    manifest = run_stage("fuzzy_dedup", settings, files, tmp_path / "out", on_error="skip")
    assert manifest["counts"] == {"in": 5, "out": 3, "dropped": {"invalid_json": 1, "invalid_utf8": 1}}
    assert manifest["dedup"]["signatures"] == 0 and manifest["dedup"]["removed"] == 0


def test_texts_are_read_by_the_signatures_step_and_the_output_only(tmp_path, monkeypatch):
    """After the signatures step no step reads a text: the check and the rounds compare shingle sets
    (this test replaces the one that counted how little the removed text-fetching path read)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from curate.stages import dataset

    rng = random.Random(11)
    texts = [_doc(rng) for _ in range(4)]
    chain = [texts[0], texts[0].replace(texts[0].split(". ")[2], "One sentence differs.", 1), texts[0].upper()]
    pq.write_table(pa.table({"id": ["p0", "p1", "p2"], "text": chain}), tmp_path / "a.parquet")
    write_jsonl(tmp_path / "b.jsonl", [{"id": f"j{k}", "text": t} for k, t in enumerate(texts[1:] + chain[:1])])
    import sys

    reads = []
    original = dataset.read_piece

    def counting(piece, *a, **kw):
        reads.append(piece.path)
        return original(piece, *a, **kw)

    for module in (dataset, sys.modules.get("curate.stages.dataset.read")):  # the package and its reader
        if module is not None and hasattr(module, "read_piece"):
            monkeypatch.setattr(module, "read_piece", counting)
    manifest = run_stage("fuzzy_dedup", {"false_positive_check": True, "in_memory_edges": 0},
                         [tmp_path / "a.parquet", tmp_path / "b.jsonl"], tmp_path / "out")
    assert manifest["dedup"]["removed"] == 3 and manifest["dedup"]["refine_rounds"] >= 1
    assert sorted(reads) == sorted([str(tmp_path / "a.parquet"), str(tmp_path / "b.jsonl")] * 2)
