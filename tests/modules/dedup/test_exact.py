"""exact_dedup: pure functions on tiny frames, then the stage on two input files (two partitions)."""

import hashlib
import json

import pandas as pd
import pytest

from curate.stages.dataset import STRING
from curate.stages.dedup import exact
from curate.stages.errors import SettingsError
from tests.conftest import read_output, run_stage, side, write_jsonl


def frame(ids, texts, reasons=None):
    return pd.DataFrame({
        "id": pd.array(ids, dtype=STRING),
        "text": pd.array(texts, dtype=STRING),
        "_reason": pd.array(reasons or [None] * len(ids), dtype=STRING),
        "_detail": pd.array([None] * len(ids), dtype=STRING),
    })


def test_hash_texts_is_md5_of_the_utf8_bytes():
    h = exact.hash_texts(["héllo", ""], "md5")
    assert exact.hex_hash(h[:, 0], h[:, 1]) == [hashlib.md5("héllo".encode()).hexdigest(),
                                                hashlib.md5(b"").hexdigest()]
    assert exact.hash_texts([], "xxh3").shape == (0, 2)
    a, b = exact.hash_texts(["same", "same"], "xxh3")
    assert (a == b).all()


def test_hashes_skip_dropped_rows_and_number_documents():
    df = frame(["a", "b", "c"], ["x", "bad line", "x"], [None, "invalid_json", None])
    got = exact.hashes(df, partition=2, method="md5")
    assert got["id"].tolist() == ["a", "c"]
    assert got["doc"].tolist() == [(2 << 32) + 0, (2 << 32) + 2]


def test_duplicate_groups_keep_the_smallest_id():
    df = exact.hashes(frame(["b", "a", "c", "d", "e"], ["x", "x", "y", "x", "z"]), 0, "md5")
    got = exact.duplicate_groups(df)
    assert sorted(got["id"]) == ["a", "b", "d"]  # the singletons y and z are not listed
    assert set(got["kept_id"]) == {"a"}
    assert dict(zip(got["id"], got["removed"])) == {"a": False, "b": True, "d": True}
    assert exact.duplicate_groups(df.iloc[:0]).empty


@pytest.mark.parametrize("seed", range(3))
def test_duplicate_groups_equal_a_brute_force_grouping(seed):
    """Every group of two or more rows of equal (h1, h2), in hash order and then rank order: kept the
    first by (key, id, doc), its size the group's weights. Edge cases: rows of equal h1 and another h2
    (no group), equal keys (the id decides), a group of three."""
    import numpy as np

    rng = np.random.default_rng(seed)
    n = 300
    h1 = rng.integers(0, 40, n).astype(np.uint64) * np.uint64(2**58)  # about 40 values: h1 shared often
    h2 = rng.integers(0, 3, n).astype(np.uint64)
    df = pd.DataFrame({"doc": np.arange(n, dtype=np.int64) * 7, "id": pd.array([f"d{(i * 37) % n:03d}" for i in range(n)],
                                                                            dtype=STRING),
                       "h1": h1, "h2": h2, "key": rng.integers(0, 3, n).astype(float),
                       "weight": rng.integers(1, 4, n).astype(np.int64)})
    got = exact.duplicate_groups(df)
    groups = {}
    for row in df.itertuples(index=False):
        groups.setdefault((row.h1, row.h2), []).append(row)
    expect = []
    for (a, b), rows in sorted(groups.items()):
        if len(rows) < 2:
            continue
        rows = sorted(rows, key=lambda r: (r.key, r.id, r.doc))
        for r in rows:
            removed = r is not rows[0]
            expect.append((r.doc, r.id, f"{a:016x}{b:016x}", rows[0].id, removed,
                           0 if removed else sum(x.weight for x in rows)))
    assert list(got.itertuples(index=False, name=None)) == expect
    assert len(expect) > 50


def test_settings():
    with pytest.raises(SettingsError, match="hash"):
        exact.ExactDedupSettings(hash="sha1")


@pytest.fixture
def two_files(tmp_path):
    a = write_jsonl(tmp_path / "in" / "a.jsonl", [
        {"id": "d3", "text": "the same text"},
        {"id": "d1", "text": "unique one"},
        {"id": "d9", "text": ""},
        {"id": "d5", "text": "spaces  only differ"},
    ], raw_lines=["{broken json", b'{"id": "bad", "text": "\xff\xfe"}'])
    b = write_jsonl(tmp_path / "in" / "b.jsonl", [
        {"id": "d2", "text": "the same text"},      # duplicate across partitions, smaller id: kept
        {"id": "d4", "text": "the same text"},
        {"id": "d8", "text": ""},                   # empty texts are identical too
        {"id": "d6", "text": "spaces only differ"}, # not byte-identical: kept
        {"id": "d7", "text": "The same text"},      # case differs: kept
    ])
    return [a, b]


def test_stage_across_partitions(two_files, tmp_path):
    out = tmp_path / "out"
    manifest = run_stage("exact_dedup", {}, two_files, out, on_error="skip")
    assert manifest["partitions"] == 2
    assert manifest["counts"] == {"in": 11, "out": 6, "dropped": {
        "exact_duplicate": 3, "invalid_json": 1, "invalid_utf8": 1}}
    kept = read_output(out)
    assert sorted(kept["id"]) == ["d1", "d2", "d5", "d6", "d7", "d8"]
    audit = pd.read_parquet(side(out, "_duplicates"))
    assert sorted(audit.columns) == ["hash", "id", "kept_id", "removed"]
    assert dict(zip(audit["id"], audit["kept_id"])) == {"d2": "d2", "d3": "d2", "d4": "d2", "d8": "d8", "d9": "d8"}
    assert audit.loc[audit["id"] == "d3", "hash"].item() == hashlib.md5(b"the same text").hexdigest()
    rejects = pd.concat([pd.read_parquet(p) for p in sorted((side(out, "_rejects")).glob("part-*"))])
    assert sorted(rejects.columns) == ["_detail", "_reason", "id"]  # ids only, no text
    dup = rejects[rejects["_reason"] == "exact_duplicate"].set_index("id")["_detail"].to_dict()
    assert dup == {"d3": "duplicate of d2", "d4": "duplicate of d2", "d9": "duplicate of d8"}
    assert manifest["dedup"] == {"hash": "md5", "documents_in_groups": 5, "groups": 2, "removed": 3,
                                 "duplicate_ids": {"count": 0, "examples": []}}


def test_steps_resume_and_output_is_deterministic(two_files, tmp_path):
    out = tmp_path / "out"
    run_stage("exact_dedup", {"hash": "xxh3"}, two_files, out, on_error="skip")
    first = [p.read_bytes() for p in sorted(out.glob("part-*"))]
    (out / "_SUCCESS").unlink()  # as if killed while writing the dataset
    manifest = run_stage("exact_dedup", {"hash": "xxh3"}, two_files, out, on_error="skip")
    assert all(s["skipped"] for s in manifest["steps"].values())
    assert [p.read_bytes() for p in sorted(out.glob("part-*"))] == first
    # other settings: the intermediates are stale and every step runs again
    (out / "_SUCCESS").unlink()
    manifest = run_stage("exact_dedup", {"hash": "md5"}, two_files, out, on_error="skip")
    assert not any(s["skipped"] for s in manifest["steps"].values())
    assert json.loads((side(out, "_state") / "step-_work-hashes.json").read_text())["run"] == manifest["fingerprint"]
    listed = {r["path"] for r in manifest["outputs"]}
    assert {"_work/hashes/part-00000.parquet", "_duplicates/part-00000.parquet", "part-00000.parquet"} <= listed


def test_force_recomputes_every_step(two_files, tmp_path):
    from curate.app.runner import run_stage as runner_stage
    from curate.stages.stage import IOSettings

    out = tmp_path / "out"
    run_stage("exact_dedup", {}, two_files, out, on_error="skip")
    outcome = runner_stage("exact_dedup", exact.ExactDedupSettings(), tuple(map(str, two_files)), str(out),
                           IOSettings(on_error="skip"), force=True)
    assert not outcome.skipped
    assert not any(s["skipped"] for s in outcome.manifest["steps"].values())
    assert outcome.manifest["counts"]["dropped"]["exact_duplicate"] == 3
