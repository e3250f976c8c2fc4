"""add_id: sequential ids across partitions, in dataset order, without a global sort."""

import pandas as pd
import pytest

from curate.stages.add_id import AddIdSettings, add_ids
from curate.stages.errors import SettingsError
from tests.conftest import read_output, run_stage, write_jsonl


def test_pure_numbering_skips_rejected_rows():
    df = pd.DataFrame({"id": ["a", "b", "c"], "text": ["x", "y", "z"],
                       "_reason": pd.Series([None, "bad", None], dtype="string")})
    out = add_ids(df, AddIdSettings(prefix="p", start=5, width=3), first=10)
    assert out["id"].tolist() == ["p-015", "b", "p-016"]  # the rejected row keeps its id, gets no number
    assert df["id"].tolist() == ["a", "b", "c"]  # input untouched


def test_numbers_follow_partition_order(tmp_path):
    # three files of different sizes, one of them empty: three partitions (an empty one in the middle)
    sizes = [3, 0, 4]
    for k, n in enumerate(sizes):
        write_jsonl(tmp_path / "in" / f"f{k}.jsonl", [{"id": f"f{k}-{j}", "text": f"t{k}{j}"} for j in range(n)])
    m = run_stage("add_id", {"prefix": "doc", "start": 1, "width": 4, "keep_original_as": "old_id"},
                  str(tmp_path / "in" / "*.jsonl"), tmp_path / "o")
    out = read_output(tmp_path / "o")
    # oracle: a plain enumeration over the files in order
    expected = [f"doc-{i:04d}" for i in range(1, 8)]
    assert out["id"].tolist() == expected
    assert out["old_id"].tolist() == ["f0-0", "f0-1", "f0-2", "f2-0", "f2-1", "f2-2", "f2-3"]
    assert m["add_id"] == {"first": "doc-0001", "last": "doc-0007", "documents": 7}


def test_width_grows_and_validation():
    out = add_ids(pd.DataFrame({"id": ["a"], "text": ["x"]}), AddIdSettings(prefix="x", start=123, width=2))
    assert out["id"].tolist() == ["x-123"]
    with pytest.raises(SettingsError):
        AddIdSettings(start=-1)
    with pytest.raises(SettingsError):
        AddIdSettings(keep_original_as="text")
