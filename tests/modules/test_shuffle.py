"""The seeded global shuffle: Dask equals pandas, deterministic, about equal partitions."""

import pandas as pd
import pytest

from curate.stages.errors import SettingsError
from curate.stages.shuffle import ShuffleSettings, divisions, hash_ids, shuffle_frame
from tests.conftest import read_output, run_stage, write_jsonl


def make_input(tmp_path, n=300, files=3, sorted_by_length=True):
    rows = [{"id": f"doc-{i:04d}", "text": "x" * (i + 1), "n": i} for i in range(n)]
    if not sorted_by_length:
        rows = rows[::-1]
    per = n // files
    for k in range(files):
        write_jsonl(tmp_path / "in" / f"f{k}.jsonl", rows[k * per:(k + 1) * per])
    return str(tmp_path / "in" / "*.jsonl")


def test_pure_pandas_shuffle():
    df = pd.DataFrame({"id": pd.Series(["a", "b", "c", "d"], dtype="string[pyarrow]"), "text": ["1", "2", "3", "4"]})
    out = shuffle_frame(df, ShuffleSettings(seed=1))
    assert sorted(out["id"]) == ["a", "b", "c", "d"]
    assert df["id"].tolist() == ["a", "b", "c", "d"]  # input untouched
    assert out["id"].tolist() == shuffle_frame(df.iloc[::-1], ShuffleSettings(seed=1))["id"].tolist()
    assert list(out.columns) == ["id", "text"]


def test_hash_is_xxh64_of_the_utf8_id():
    import xxhash

    ids = pd.Series(["a", "é", "日本"], dtype="string[pyarrow]")
    assert hash_ids(ids, 7).tolist() == [xxhash.xxh64_intdigest(s.encode(), 7) for s in ["a", "é", "日本"]]


def test_dask_equals_pandas_and_reshards(tmp_path):
    m = run_stage("shuffle", {"partitions": 4, "seed": 3}, make_input(tmp_path), tmp_path / "o")
    out = read_output(tmp_path / "o")
    parts = sorted((tmp_path / "o").glob("part-*.parquet"))
    assert len(parts) == 4 and m["shuffle"]["partitions"] == 4
    src = pd.concat([pd.read_json(p, lines=True) for p in sorted((tmp_path / "in").glob("*.jsonl"))])
    src = src.astype({"id": "string[pyarrow]"})
    expected = shuffle_frame(src.reset_index(drop=True), ShuffleSettings(partitions=4, seed=3))
    assert out["id"].tolist() == expected["id"].tolist()
    assert out["n"].tolist() == expected["n"].tolist()
    # about equal: 75 each expected
    sizes = [len(pd.read_parquet(p)) for p in parts]
    assert sum(sizes) == 300 and min(sizes) >= 50 and max(sizes) <= 100, sizes
    # the length-sorted input is no longer sorted
    assert out["n"].tolist() != sorted(out["n"])
    assert abs(pd.Series(out["n"]).corr(pd.Series(range(300)))) < 0.2


def test_order_depends_only_on_ids_and_seed(tmp_path):
    run_stage("shuffle", {"partitions": 2, "seed": 5}, make_input(tmp_path / "a", files=3), tmp_path / "o1")
    run_stage("shuffle", {"partitions": 2, "seed": 5}, make_input(tmp_path / "b", files=5, sorted_by_length=False),
              tmp_path / "o2")
    run_stage("shuffle", {"partitions": 2, "seed": 6}, make_input(tmp_path / "c", files=3), tmp_path / "o3")
    a, b, c = (read_output(tmp_path / o)["id"].tolist() for o in ("o1", "o2", "o3"))
    assert a == b
    assert a != c and sorted(a) == sorted(c)


def test_default_keeps_the_partition_count_and_rejects_travel(tmp_path):
    inputs = make_input(tmp_path, n=30, files=3)
    with open(tmp_path / "in" / "f1.jsonl", "a") as f:
        f.write("{broken\n")
    m = run_stage("shuffle", {}, inputs, tmp_path / "o", on_error="skip")
    assert m["shuffle"]["partitions"] == 3
    assert m["counts"]["in"] == 31 and m["counts"]["out"] == 30 and m["counts"]["dropped"] == {"invalid_json": 1}
    assert len(read_output(tmp_path / "o")) == 30


def test_settings_and_divisions():
    assert divisions(1) == [0, 2**53 - 1]
    assert divisions(4)[1] == 2**51
    with pytest.raises(SettingsError, match="partitions"):
        ShuffleSettings(partitions=0)
    with pytest.raises(SettingsError, match="seed"):
        ShuffleSettings(seed=-1)


def test_cli(tmp_path):
    from tests.conftest import curate

    text = curate("shuffle", "--help").stdout
    assert "--partitions N" in text and "--seed S" in text
