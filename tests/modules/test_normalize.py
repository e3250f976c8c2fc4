"""The normalize stage: pure pandas first, then the same through Dask with two partitions."""

import dask.dataframe as dd
import pandas as pd

from curate.stages.normalize import NormalizeSettings, NormalizeStage, normalize

FRAME = pd.DataFrame({
    "id": ["a", "b", "c", "d", "e"],
    "text": ["two  spaces\tand tab", "trailing   \nline", "many\n\n\n\n\nblank lines", "   ", ""],
}).astype("string[pyarrow]")


def test_pure_function():
    out = normalize(FRAME, NormalizeSettings())
    assert out["text"].tolist()[:3] == ["two spaces and tab", "trailing\nline", "many\n\nblank lines"]
    # whitespace only and empty text are dropped with a reason, not removed
    assert out["_reason"].tolist()[3:] == ["empty", "empty"]
    assert out["_reason"][:3].isna().all()
    assert FRAME["text"][0] == "two  spaces\tand tab"  # input not mutated


def test_keep_empty_when_asked():
    out = normalize(FRAME, NormalizeSettings(drop_empty=False))
    assert "_reason" not in out.columns or out["_reason"].isna().all()


def test_dask_equals_pandas_with_two_partitions():
    ddf = dd.from_pandas(FRAME, npartitions=2)
    got = NormalizeStage().apply(ddf, NormalizeSettings()).compute()
    expected = normalize(FRAME, NormalizeSettings())
    pd.testing.assert_frame_equal(got.sort_values("id").reset_index(drop=True),
                                  expected.sort_values("id").reset_index(drop=True), check_dtype=False)


def test_huge_document():
    big = pd.DataFrame({"id": ["h"], "text": ["word   " * 1_000_000]}).astype("string[pyarrow]")
    out = normalize(big, NormalizeSettings())
    assert len(out["text"][0]) == len("word ") * 1_000_000 - 1
