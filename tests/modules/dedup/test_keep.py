"""--keep and dup_cluster_size: the policies on tiny frames, then both stages on two partitions, then
the refusals through the CLI (exit 2, one line, nothing written)."""

import random

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from curate.stages.dataset import STRING
from curate.stages.dedup import keep
from curate.stages.errors import DataError, SettingsError
from tests.conftest import DATA, curate, curate_here, read_output, run_stage, write_jsonl

SENTENCES = (DATA / "dedup" / "sentences.txt").read_text(encoding="utf-8").splitlines()


def test_parse():
    assert keep.parse("smallest-id") == keep.Policy("smallest-id")
    assert keep.parse("newest") == keep.Policy("newest", "warc_date")
    assert keep.parse("oldest:crawl") == keep.Policy("oldest", "crawl")
    assert str(keep.parse("priority:p")) == "priority:p"
    for bad, words in [("largest", "must be one of"), ("priority", "needs a column"), ("longest:x", "no column"),
                       ("newest:_reason", "not a metadata column"), ("priority:text", "not a metadata column")]:
        with pytest.raises(SettingsError, match=words):
            keep.parse(bad)


def frame(**columns):
    n = len(next(iter(columns.values())))
    return pd.DataFrame({"id": pd.array([f"d{i}" for i in range(n)], dtype=STRING), **columns})


def test_keys_smaller_is_preferred():
    pos = np.arange(3)
    df = frame(text=pd.array(["ab", "abcd", "a"], dtype=STRING),
               date=pd.array(["2024-01-02", "2023-12-31T23:00:00Z", "2024-01-02T00:00:01+01:00"], dtype=STRING),
               stamp=pd.to_datetime(["2020-01-01", "2021-01-01", "2019-01-01"]),
               p=[3, 1, 2], snap=[202401, 202312, 202402])
    assert keep.keys(df, pos, keep.parse("smallest-id"), "f").tolist() == [0, 0, 0]
    assert keep.keys(df, pos, keep.parse("longest"), "f").tolist() == [-2, -4, -1]
    assert keep.keys(df, pos, keep.parse("priority:p"), "f").tolist() == [-3, -1, -2]
    newest = keep.keys(df, pos, keep.parse("newest:date"), "f")
    assert np.argsort(newest).tolist() == [0, 2, 1]  # 00:00:01+01:00 is 23:00:01 the day before, UTC
    assert newest[0] == -pd.Timestamp("2024-01-02", tz="UTC").timestamp()
    assert np.argsort(keep.keys(df, pos, keep.parse("oldest:stamp"), "f")).tolist() == [2, 0, 1]
    assert np.argsort(keep.keys(df, pos, keep.parse("newest:snap"), "f")).tolist() == [2, 0, 1]


def test_keys_refuse_nulls_and_non_dates_naming_the_document():
    df = frame(text=pd.array(["a", "b"], dtype=STRING), p=pd.array([1, None], dtype="Int64"),
               date=pd.array(["2024-01-01", "yesterday"], dtype=STRING))
    with pytest.raises(DataError, match=r"in.jsonl: --keep priority:p: column 'p' is null for document 'd1'"):
        keep.keys(df, np.arange(2), keep.parse("priority:p"), "in.jsonl")
    with pytest.raises(DataError, match="'yesterday' of document 'd1' in column 'date' is not an ISO 8601 date"):
        keep.keys(df, np.arange(2), keep.parse("newest:date"), "in.jsonl")
    assert keep.keys(df, np.arange(1), keep.parse("priority:p"), "in.jsonl").tolist() == [-1]  # only the rows asked


def _records(texts, **columns):
    return [{"id": f"{k}", "text": t, **{c: v[k] for c, v in columns.items()}} for k, t in enumerate(texts)]


def test_exact_keep_policies_and_cluster_sizes(tmp_path):
    a = write_jsonl(tmp_path / "in" / "a.jsonl", [
        {"id": "a", "text": "same", "date": "2024-03-01", "p": 1},
        {"id": "b", "text": "other", "date": "2024-03-01", "p": 5},
        {"id": "c", "text": "alone", "date": "2020-01-01", "p": 0},
    ])
    b = write_jsonl(tmp_path / "in" / "b.jsonl", [
        {"id": "d", "text": "same", "date": "2025-01-01", "p": 1},
        {"id": "e", "text": "other", "date": "2024-03-01", "p": 5},   # tie on date and p: smallest id, b
        {"id": "f", "text": "same", "date": "2019-01-01", "p": 9},
    ])
    expected = {"smallest-id": {"a": 3, "b": 2, "c": 1}, "newest:date": {"d": 3, "b": 2, "c": 1},
                "oldest:date": {"f": 3, "b": 2, "c": 1}, "priority:p": {"f": 3, "b": 2, "c": 1}}
    for policy, sizes in expected.items():
        out = tmp_path / policy.replace(":", "-")
        manifest = run_stage("exact_dedup", {"keep": policy}, [a, b], out)
        kept = read_output(out)
        assert dict(zip(kept["id"], kept["dup_cluster_size"])) == sizes, policy
        assert str(kept["dup_cluster_size"].dtype) == "Int64"
        assert manifest["schema"]["dup_cluster_size"] == "Int64"


def _doc(rng, k=10):
    return " ".join(rng.sample(SENTENCES, k))


def test_fuzzy_keep_longest_and_sizes_add_up_after_exact(tmp_path):
    rng = random.Random(11)
    base = _doc(rng, 12)
    longer = base + " " + rng.choice(SENTENCES)  # near copy, longer
    other = _doc(rng, 12)
    files = [write_jsonl(tmp_path / "in" / "a.jsonl", [{"id": "a", "text": base}, {"id": "x", "text": other}]),
             write_jsonl(tmp_path / "in" / "b.jsonl", [{"id": "b", "text": longer}, {"id": "c", "text": base},
                                                       {"id": "y", "text": other}])]
    run_stage("fuzzy_dedup", {"keep": "longest"}, files, tmp_path / "fuzzy")
    kept = read_output(tmp_path / "fuzzy")
    assert dict(zip(kept["id"], kept["dup_cluster_size"])) == {"x": 2, "b": 3}
    # exact first (a and c are one text), then fuzzy: the sizes count every original document
    run_stage("exact_dedup", {}, files, tmp_path / "exact")
    kept = read_output(tmp_path / "exact")
    assert dict(zip(kept["id"], kept["dup_cluster_size"])) == {"a": 2, "x": 2, "b": 1}
    run_stage("fuzzy_dedup", {}, tmp_path / "exact", tmp_path / "both")
    kept = read_output(tmp_path / "both")
    assert dict(zip(kept["id"], kept["dup_cluster_size"])) == {"a": 3, "x": 2}
    assert kept["dup_cluster_size"].sum() == 5  # every input document, once


# --------------------------------------------------------------------------- refusals through the CLI


def _one_line_refusal(proc, words, out):
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.strip().count("\n") == 0, proc.stderr
    assert words in proc.stderr, proc.stderr
    assert not out.exists()


@pytest.mark.parametrize("stage", ["exact", "fuzzy"])
def test_cli_refuses_a_missing_or_null_keep_column(tmp_path, stage):
    write_jsonl(tmp_path / "j" / "a.jsonl", [{"id": "a", "text": "x", "p": 1}, {"id": "b", "text": "y"}])
    pq.write_table(pa.table({"id": ["a", "b", "c"], "text": ["x", "y", "z"], "p": [1.0, None, 2.0],
                             "d": ["2024-01-01"] * 3}), tmp_path / "p.parquet", row_group_size=2)
    out = tmp_path / "out"
    cases = [
        (tmp_path / "j" / "a.jsonl", "priority:q", "a.jsonl line 1 has no column 'q'"),
        (tmp_path / "j" / "a.jsonl", "priority:p", "a.jsonl line 2 has no column 'p'"),
        (tmp_path / "p.parquet", "priority:p", f"column 'p' is null in {tmp_path / 'p.parquet'} row 1"),
        (tmp_path / "p.parquet", "newest", "has no column 'warc_date'"),
        (tmp_path / "p.parquet", "priority:d", "column 'd' of input"),
    ]
    for i, (data, policy, words) in enumerate(cases):  # the first in a real process, the others through cli.main here
        args = ("dedup", stage, "--input", data, "--output", out, "--keep", policy)
        proc = curate_here(*args) if i else curate(*args, check=False)
        _one_line_refusal(proc, words, out)


def test_a_null_past_the_sample_fails_the_first_step_naming_it(tmp_path):
    from curate.stages.dataset import SCHEMA_SAMPLE

    records = [{"id": f"d{i}", "text": f"text {i}", "p": i} for i in range(SCHEMA_SAMPLE + 5)]
    records[-1].pop("p")
    write_jsonl(tmp_path / "a.jsonl", records)
    proc = curate("dedup", "exact", "--input", tmp_path / "a.jsonl", "--output", tmp_path / "out",
                  "--keep", "priority:p", check=False)
    assert proc.returncode == 1, proc.stderr
    assert f"--keep priority:p: column 'p' is null for document 'd{SCHEMA_SAMPLE + 4}'" in proc.stderr
    assert str(tmp_path / "a.jsonl") in proc.stderr
