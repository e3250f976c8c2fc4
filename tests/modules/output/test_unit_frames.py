"""Output.write_frame writes the same bytes for the same data in every execution mode (issue 43, point 5)."""

from __future__ import annotations

import pandas as pd

from curate.stages.output import Output


def test_pandas_str_and_dask_string_columns_write_the_same_bytes(tmp_path):
    out = Output.at(str(tmp_path / "o"))
    for name, dtype in (("a.parquet", "str"), ("b.parquet", pd.StringDtype("pyarrow"))):
        df = pd.DataFrame({"id": pd.Series(["x", None, "z"], dtype=dtype), "n": [1, 2, 3]})
        out.write_frame(name, df, "parquet")
    assert (tmp_path / "o" / "a.parquet").read_bytes() == (tmp_path / "o" / "b.parquet").read_bytes()
