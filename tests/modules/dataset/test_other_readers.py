"""A stage folder is a dataset to other tools (issue 31, point 3): pandas, pyarrow, DuckDB and polars
read ``out/<stage>`` as a Parquet dataset, because every file curate keeps beside the parts starts with
``_`` or ``.`` (``_manifest.json``, ``_SUCCESS``, ``_rejects/``, ``_state/``), which they all skip. An
output written by an earlier curate (``manifest.json``) stays readable, verifiable and erasable."""

from __future__ import annotations

import json
import os

import pandas as pd
import pytest

from curate.app.cli import main
from tests.conftest import run_stage, write_jsonl


@pytest.fixture
def out(tmp_path):
    write_jsonl(tmp_path / "in" / "a.jsonl", [{"id": f"a{k}", "text": f"alpha {k} " * 20} for k in range(4)])
    write_jsonl(tmp_path / "in" / "b.jsonl", [{"id": f"b{k}", "text": f"beta {k} " * 20} for k in range(3)]
                + [{"id": "short", "text": "x"}])
    chain = tmp_path / "chain.yaml"
    chain.write_text("filters:\n  - {filter: word_count, min: 5}\n")
    folder = tmp_path / "out"
    run_stage("filter", {"config": str(chain)}, [str(tmp_path / "in" / "*.jsonl")], folder, format="parquet")
    assert (folder / "_manifest.json").exists() and not (folder / "manifest.json").exists()
    assert (folder / "_rejects").is_dir()  # a dropped document: the folder holds more than parts
    return folder


def ids(frame) -> list[str]:
    return sorted(frame["id"])


def test_pandas_pyarrow_duckdb_and_polars_read_a_stage_folder(out):
    import duckdb
    import polars as pl
    import pyarrow.dataset as ds

    want = sorted([f"a{k}" for k in range(4)] + [f"b{k}" for k in range(3)])
    assert ids(pd.read_parquet(out)) == want
    assert ids(ds.dataset(str(out), format="parquet").to_table().to_pandas()) == want
    # DuckDB and polars take a folder as a glob (their idiom): the parts, nothing else at the top
    assert ids(duckdb.sql(f"select id from read_parquet('{out}/*.parquet')").df()) == want
    assert ids(pl.read_parquet(f"{out}/*.parquet").to_pandas()) == want


def test_an_output_of_an_earlier_curate_stays_readable_verifiable_and_erasable(out, tmp_path, capsys):
    os.rename(out / "_manifest.json", out / "manifest.json")  # as curate wrote it before
    assert main(["verify", str(out), "--checksums"]) == 0
    run = run_stage("clean", {}, [str(out)], tmp_path / "next", format="parquet")
    assert run["counts"]["in"] == 7
    (tmp_path / "ids.txt").write_text("a1\n")
    assert main(["erase", str(out), "--ids", str(tmp_path / "ids.txt")]) == 0
    assert (out / "manifest.json").exists() and not (out / "_manifest.json").exists()  # erase keeps its name
    assert json.loads((out / "manifest.json").read_text())["counts"]["out"] == 6
    assert main(["verify", str(out), "--checksums"]) == 0
    # a rerun of the stage (other settings) writes the new name and drops the old one
    chain = tmp_path / "chain2.yaml"
    chain.write_text("filters:\n  - {filter: word_count, min: 6}\n")
    run_stage("filter", {"config": str(chain)}, [str(tmp_path / "in" / "*.jsonl")], out, format="parquet")
    assert (out / "_manifest.json").exists() and not (out / "manifest.json").exists()
