"""Duplicate ids of a dataset (``curate verify --unique-ids``), checked against a brute-force count."""

from collections import Counter

import dask
import pandas as pd

from curate.stages import unique_ids
from curate.stages.settings import IOSettings
from tests.conftest import run_stage, write_jsonl


def brute_force(ids):
    counts = Counter(ids)
    return {i: n for i, n in counts.items() if n > 1}


def test_duplicates_across_files_and_partitions(tmp_path):
    a = [f"a{i}" for i in range(60)] + ["both", "twice", "twice", "three"]
    b = [f"b{i}" for i in range(60)] + ["both", "three", "three"]
    write_jsonl(tmp_path / "d" / "a.jsonl", [{"id": i, "text": f"t {i}"} for i in a])
    write_jsonl(tmp_path / "d" / "b.jsonl", [{"id": i, "text": f"u {i}"} for i in b],
                raw_lines=['{"id": 5, "text": "an integer id: rejected, not compared"}', "{not json"])
    io = IOSettings(on_error="skip", blocksize="512B")  # several partitions per file
    report = unique_ids.check([str(tmp_path / "d" / "*.jsonl")], io, dask.compute, examples=2)
    expected = brute_force(a + b)
    assert report.documents == len(a) + len(b) and report.rejected == 2
    assert report.duplicate_ids == len(expected) == 3
    assert report.extra_documents == sum(n - 1 for n in expected.values()) == 4
    assert report.examples == [("both", 2, ["a.jsonl", "b.jsonl"]), ("three", 3, ["a.jsonl", "b.jsonl"])]
    assert not report.ok


def test_a_stage_output_with_unique_ids(tmp_path):
    src = write_jsonl(tmp_path / "in.jsonl", [{"id": f"d{i}", "text": f"doc {i}"} for i in range(30)])
    run_stage("normalize", {}, src, tmp_path / "out")
    report = unique_ids.check([str(tmp_path / "out")], IOSettings(on_error="skip"), dask.compute)
    assert report.ok and report.documents == 30 and report.examples == []


def test_partition_duplicates_is_the_brute_force_count():
    df = pd.DataFrame({"h": [0] * 6, "id": ["x", "y", "x", "z", "x", "y"], "piece": [0, 1, 2, 0, 0, 1]})
    got = unique_ids.partition_duplicates(df, examples=1)
    assert got == {"ids": 6, "duplicate_ids": 2, "extra_documents": 3, "examples": [("x", 3, [0, 2])]}
