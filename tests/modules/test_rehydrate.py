"""``rehydrate``: documents repeated by their duplicate cluster size's factor.

Edge cases: each kind of range (one size, closed, open), a factor of 0 (dropped, reason named), a null
size (counts as 1), overlaps, gaps and a last range that is not open (refused), a dataset without the
column (one line naming it), two partitions with the counts per factor in the manifest, and ids kept
unique (copy k is ``ID#k``).
"""

from __future__ import annotations

import pandas as pd
import pytest

from curate.stages.errors import DataError, SettingsError
from curate.stages.rehydrate import RehydrateSettings, parse_factors, rehydrate
from tests.conftest import read_output, run_stage, write_jsonl


def test_parse_factors_and_refusals():
    assert parse_factors("1:1,2:2,3-4:3,5-100:5,101-:1") == ((1, 1, 1), (2, 2, 2), (3, 4, 3), (5, 100, 5), (101, None, 1))
    assert parse_factors(" 2-:0 , 1:1 ") == ((1, 1, 1), (2, None, 0))
    for text, message in [("1:1,1-3:2,4-:1", "overlap"), ("1:1,3-:2", "no factor for sizes 2-2"),
                          ("1:1,2-5:2", "the last range must be open, e.g. 6-:1"), ("1=2", "expected SIZE:FACTOR"),
                          ("0-:1", "not a range of sizes from 1 up"), ("", "at least one")]:
        with pytest.raises(SettingsError, match=message):
            parse_factors(text)


def test_rows_repeated_in_order_with_unique_ids():
    df = pd.DataFrame({"id": pd.Series(list("abcdef"), dtype="string"),
                       "text": pd.Series([f"text {c}" for c in "abcdef"], dtype="string"),
                       "dup_cluster_size": pd.Series([1, 2, 3, 5, 150, None], dtype="Int64")})
    out = rehydrate(df, RehydrateSettings())
    # by hand: sizes 1, 2, 3, 5, 150, null(=1) -> factors 1, 2, 3, 5, 1, 1
    assert out["id"].tolist() == ["a", "b", "b#2", "c", "c#2", "c#3", "d", "d#2", "d#3", "d#4", "d#5", "e", "f"]
    assert out["text"].tolist() == [f"text {i.split('#')[0]}" for i in out["id"]]
    assert "_reason" not in out.columns
    dropped = rehydrate(df, RehydrateSettings(factors="1:1,2-:0"))
    assert dropped["_reason"].fillna("").tolist() == ["", "rehydrate", "rehydrate", "rehydrate", "rehydrate", ""]
    assert dropped["_detail"].tolist()[1] == "dup_cluster_size 2"
    with pytest.raises(DataError, match="no 'dup_cluster_size' column"):
        rehydrate(df.drop(columns=["dup_cluster_size"]), RehydrateSettings())


def test_stage_on_two_partitions_counts_per_factor(tmp_path):
    rows = [{"id": f"d{i}", "text": f"document {i}", "dup_cluster_size": size}
            for i, size in enumerate([1, 1, 2, 4, 7, 200])]
    write_jsonl(tmp_path / "in" / "a.jsonl", rows[:3])
    write_jsonl(tmp_path / "in" / "b.jsonl", rows[3:])
    manifest = run_stage("rehydrate", {"factors": "1:1,2:2,3-4:3,5-100:5,101-:0"},
                         str(tmp_path / "in" / "*.jsonl"), tmp_path / "out")
    assert manifest["rehydrate"]["factors"] == {"0": {"documents": 1, "rows": 0}, "1": {"documents": 2, "rows": 2},
                                                "2": {"documents": 1, "rows": 2}, "3": {"documents": 1, "rows": 3},
                                                "5": {"documents": 1, "rows": 5}}
    assert manifest["counts"]["dropped"] == {"rehydrate": 1}
    out = read_output(tmp_path / "out")
    assert len(out) == 12 and out["id"].is_unique
    again = run_stage("rehydrate", {"factors": "1:1,2:2,3-4:3,5-100:5,101-:0"},
                      str(tmp_path / "in" / "*.jsonl"), tmp_path / "out2")
    assert [r["xxh3_128"] for r in again["outputs"] if r["path"].startswith("part")] == \
        [r["xxh3_128"] for r in manifest["outputs"] if r["path"].startswith("part")]
