"""shards: fixed-size np.save token shards, EOT between documents, held-out first shards, resume, verify.

Oracle: ``np.load`` of the files against the documents concatenated by hand.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from curate.stages.errors import SettingsError
from curate.stages.shards import plan_shards, verify
from tests.conftest import curate, curate_here, run_stage
from tests.modules.tokensets import make_token_set

EOT = 99


def load(folder):
    return {p.name: np.load(p) for p in sorted(folder.glob("*.npy"))}


def test_shards_by_hand_eot_added_between_documents(tmp_path):
    ts = make_token_set(tmp_path / "tok", [[[1, 2, 3], [4, 5]], [[6]]], vocab_size=100, eod_id=EOT)
    m = run_stage("shards", {"shard_tokens": 4}, ts, tmp_path / "s")
    shards = load(tmp_path / "s")
    assert list(shards) == ["shard_train_000001.npy", "shard_train_000002.npy", "shard_val_000000.npy"]
    assert shards["shard_val_000000.npy"].tolist() == [1, 2, 3, EOT]
    assert shards["shard_train_000001.npy"].tolist() == [4, 5, EOT, 6]  # a document spans two shards: fine
    assert shards["shard_train_000002.npy"].tolist() == [EOT]
    assert all(a.dtype == np.uint16 for a in shards.values())
    assert m["eot_added"] and m["totals"] == {"shards": 3, "tokens": 9, "documents": 3, "input_tokens": 6}
    assert m["splits"] == {"val": {"shards": 1, "tokens": 4}, "train": {"shards": 2, "tokens": 5}}
    assert m["shards"][1]["first"] == {"pair": "part_00000", "document": 1, "offset": 4}


def test_eod_from_tokenize_is_not_doubled_and_files_equal_np_save(tmp_path):
    rng = np.random.default_rng(0)
    pairs = [[list(rng.integers(0, 90, size=n)) + [EOT] for n in rng.integers(1, 50, size=30)] for _ in range(3)]
    ts = make_token_set(tmp_path / "tok", pairs, vocab_size=100, eod_id=EOT, append_eod=True)
    m = run_stage("shards", {"shard_tokens": 97, "holdout_shards": 2}, ts, tmp_path / "s")
    assert not m["eot_added"]
    stream = np.concatenate([np.asarray(d) for p in pairs for d in p])
    shards = load(tmp_path / "s")
    names = sorted(shards, key=lambda n: n[-10:])
    assert [n.split("_")[1] for n in names[:3]] == ["val", "val", "train"]
    assert np.array_equal(np.concatenate([shards[n] for n in names]), stream)
    assert all(len(shards[n]) == 97 for n in names[:-1]) and 0 < len(shards[names[-1]]) <= 97
    ref = tmp_path / "ref.npy"
    np.save(ref, shards[names[0]])
    assert ref.read_bytes() == (tmp_path / "s" / names[0]).read_bytes()  # byte for byte what np.save writes
    assert verify(str(tmp_path / "s")).ok


def test_plan_crosses_pairs_and_skips_empty_ones():
    shards = plan_shards(np.array([5, 0, 3, 4]), 4, 1, "x")
    assert [(s.name, s.tokens) for s in shards] == [("x_val_000000.npy", 4), ("x_train_000001.npy", 4),
                                                    ("x_train_000002.npy", 4)]
    assert [(p.pair, p.start, p.stop) for p in shards[1].pieces] == [(0, 4, 5), (2, 0, 3)]
    assert [(p.pair, p.start, p.stop) for p in shards[2].pieces] == [(3, 0, 4)]


def test_dtype_and_holdout_refusals(tmp_path):
    ts = make_token_set(tmp_path / "tok", [[[70000, 5]]], vocab_size=70001, eod_id=0)
    with pytest.raises(SettingsError, match="uint16 cannot hold"):
        run_stage("shards", {"shard_tokens": 2, "dtype": "uint16"}, ts, tmp_path / "a")
    m = run_stage("shards", {"shard_tokens": 2}, ts, tmp_path / "b")
    assert m["dtype"] == "uint32" and load(tmp_path / "b")["shard_train_000001.npy"].tolist() == [0]
    with pytest.raises(SettingsError, match="leaving none to train on"):
        run_stage("shards", {"shard_tokens": 2, "holdout_shards": 2}, ts, tmp_path / "c")
    ts = make_token_set(tmp_path / "noeod", [[[5, 6]]], vocab_size=100)
    with pytest.raises(SettingsError, match="--eot-id"):
        run_stage("shards", {"shard_tokens": 2}, ts, tmp_path / "d")


def test_split_token_set_needs_a_set(tmp_path):
    ts = make_token_set(tmp_path / "tok", [[[5, 6]], [[7]]], vocab_size=100, eod_id=EOT,
                        sets=["train", "validation"])
    with pytest.raises(SettingsError, match="--input-set"):
        run_stage("shards", {"shard_tokens": 2, "holdout_shards": 0}, ts, tmp_path / "a")
    run_stage("shards", {"shard_tokens": 2, "holdout_shards": 0, "input_set": "validation"}, ts, tmp_path / "b")
    assert [a.tolist() for a in load(tmp_path / "b").values()] == [[7, EOT]]


def test_resume_rewrites_only_missing_shards_and_is_deterministic(tmp_path):
    import dask

    rng = np.random.default_rng(2)
    pairs = [[list(rng.integers(0, 90, size=n)) for n in rng.integers(1, 30, size=40)] for _ in range(3)]
    ts = make_token_set(tmp_path / "tok", pairs, vocab_size=100, eod_id=EOT)
    out = tmp_path / "s"
    m1 = run_stage("shards", {"shard_tokens": 50}, ts, out)
    before = {p.name: p.stat().st_mtime_ns for p in out.glob("*.npy")}
    (out / "_SUCCESS").unlink()  # a killed run: two shards lost
    lost = sorted(before)[:2]
    for name in lost:
        (out / name).unlink()
    m2 = run_stage("shards", {"shard_tokens": 50}, ts, out)
    assert m2["resumed_partitions"] == len(before) - 2
    after = {p.name: p.stat().st_mtime_ns for p in out.glob("*.npy")}
    assert {n for n in before if before[n] != after[n]} == set(lost)
    assert m1["outputs"] == m2["outputs"]  # same bytes
    with dask.config.set(scheduler="threads", num_workers=3):
        m3 = run_stage("shards", {"shard_tokens": 50}, ts, tmp_path / "threads")
    assert [r["xxh3_128"] for r in m3["outputs"]] == [r["xxh3_128"] for r in m1["outputs"]]


def test_verify_fails_one_line_per_problem(tmp_path):
    ts = make_token_set(tmp_path / "tok", [[[1, 2, 3], [4, 5]], [[6, 7, 8]]], vocab_size=100, eod_id=EOT)
    out = tmp_path / "s"
    run_stage("shards", {"shard_tokens": 4}, ts, out)
    proc = curate_here("verify", out, "--vocab-size", "100")  # the failing verify below is a real process
    assert proc.returncode == 0 and "shards: 3 files" in proc.stdout and "first 4: [1, 2, 3, 99]" in proc.stdout
    # an id above the vocabulary in one shard, another shard gone
    path = out / "shard_train_000001.npy"
    data = bytearray(path.read_bytes())
    data[-2:] = np.array([150], dtype="<u2").tobytes()
    path.write_bytes(bytes(data))
    (out / "shard_train_000002.npy").unlink()
    report = verify(str(out))
    assert report.problems == [
        f"{out / 'shard_train_000002.npy'}: missing: listed in _manifest.json",
        f"{path}: token id range: 1 ids >= the vocabulary size 100 (first at token 3, id 150)",
    ]
    proc = curate("verify", out, check=False)
    assert proc.returncode == 1 and proc.stderr.strip().splitlines()[:2] == report.problems
    manifest = json.loads((out / "_manifest.json").read_text())
    assert manifest["stage"] == "shards"


def test_verify_refuses_uint16_for_a_large_vocabulary(tmp_path):
    ts = make_token_set(tmp_path / "tok", [[[1, 2, 3]]], vocab_size=100, eod_id=EOT)
    out = tmp_path / "s"
    run_stage("shards", {"shard_tokens": 2}, ts, out)
    problems = verify(str(out), vocab_size=65536).problems
    assert len(problems) == 2 and all("uint16 cannot hold a 65,536-id vocabulary" in p for p in problems)


def test_stream_documents_by_hand():
    from curate.stages.shards import stream_documents

    starts, lengths = np.array([0, 3, 5]), np.array([3, 2, 4])  # stream with EOT: [0..3] [4..6] [7..11]
    doc, begin, length, offset = stream_documents(starts, lengths, 2, 9, add_eot=True)
    assert doc.tolist() == [0, 1, 2] and begin.tolist() == [0, 2, 5]
    assert length.tolist() == [2, 3, 2] and offset.tolist() == [2, 0, 0]
    doc, begin, length, offset = stream_documents(starts, lengths, 4, 5, add_eot=False)  # the tokens alone
    assert (doc.tolist(), begin.tolist(), length.tolist(), offset.tolist()) == ([1], [0], [1], [1])
