"""A stage folder is a dataset to other tools (issue 31, point 3; issue 47, point 9): pandas, pyarrow and
DuckDB given ``out/<stage>`` count exactly the stage's documents, and polars counts them or fails. The
side outputs that hold Parquet (``_rejects/``, ``_duplicates/``, ``_work/``) and the journal
(``_state/``) live in the sibling ``out/<stage>.side/``: DuckDB recurses into every folder, ``_`` or
``.`` alike, and counted a fuzzy stage's intermediates as documents. An output written by an earlier
curate (``manifest.json``; side folders inside the stage folder) stays readable, verifiable, erasable
and resumable, and a run moves its side folders out."""

from __future__ import annotations

import json
import os
import shutil

import pandas as pd
import pytest

from curate.app.cli import main
from tests.conftest import run_stage, side, write_jsonl

TEXTS = ["the river runs past the old mill and the stone bridge into the valley below the town",
         "bread from the oven on the corner smells of flour and salt every morning before dawn",
         "the library keeps its quiet reading room open late on thursdays for students and others"]


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
    assert side(folder, "_rejects").is_dir()  # a dropped document: the stage has more than its parts
    return folder


@pytest.fixture
def fuzzy(tmp_path):
    """A fuzzy dedup stage: two copies removed, with ``_work/``, ``_duplicates/`` and ``_rejects/``."""
    write_jsonl(tmp_path / "fin" / "a.jsonl", [{"id": f"a{k}", "text": t} for k, t in enumerate(TEXTS)])
    write_jsonl(tmp_path / "fin" / "b.jsonl", [{"id": "b0", "text": TEXTS[0]}, {"id": "b1", "text": TEXTS[1]}])
    folder = tmp_path / "fuzzy"
    run_stage("fuzzy_dedup", {}, [str(tmp_path / "fin" / "*.jsonl")], folder, format="parquet")
    for name in ("_work", "_duplicates", "_rejects", "_state"):
        assert side(folder, name).is_dir() and not (folder / name).exists()
    return folder


def ids(frame) -> list[str]:
    return sorted(frame["id"])


def counts(folder) -> dict[str, int]:
    """Rows each reader finds given the folder itself, as a user would first try."""
    import duckdb
    import polars as pl
    import pyarrow.dataset as ds

    found = {"duckdb": duckdb.sql(f"select count(*) from read_parquet('{folder}')").fetchall()[0][0],
             "pandas": len(pd.read_parquet(folder)), "pyarrow": ds.dataset(str(folder), format="parquet").count_rows()}
    try:
        found["polars"] = pl.read_parquet(str(folder)).height
    except Exception:  # a loud refusal (the manifest is not Parquet) is fine; a wrong count is not
        pass
    return found


def test_every_reader_given_a_stage_folder_counts_its_documents(out, fuzzy):
    assert json.loads((out / "_manifest.json").read_text())["counts"]["out"] == 7
    assert set(counts(out).values()) == {7}
    kept = json.loads((fuzzy / "_manifest.json").read_text())["counts"]["out"]
    assert kept == 3 and set(counts(fuzzy).values()) == {kept}
    assert sorted(os.listdir(fuzzy)) == ["_SUCCESS", "_manifest.json", *sorted(p.name for p in fuzzy.glob("part-*"))]


def test_pandas_pyarrow_duckdb_and_polars_read_a_stage_folder(out):
    import duckdb
    import polars as pl
    import pyarrow.dataset as ds

    want = sorted([f"a{k}" for k in range(4)] + [f"b{k}" for k in range(3)])
    assert ids(pd.read_parquet(out)) == want
    assert ids(ds.dataset(str(out), format="parquet").to_table().to_pandas()) == want
    assert ids(duckdb.sql(f"select id from read_parquet('{out}')").df()) == want
    assert ids(duckdb.sql(f"select id from read_parquet('{out}/*.parquet')").df()) == want
    assert ids(pl.read_parquet(f"{out}/*.parquet").to_pandas()) == want
    assert ids(pd.read_parquet(side(out, "_rejects"))) == ["short"]


def to_old_layout(folder) -> None:
    """The side folders back inside the stage folder, where curate before issue 47 wrote them."""
    for entry in side(folder).iterdir():
        shutil.move(str(entry), str(folder / entry.name))
    side(folder).rmdir()


def test_an_output_of_an_earlier_curate_stays_readable_verifiable_and_erasable(out, tmp_path, capsys):
    os.rename(out / "_manifest.json", out / "manifest.json")  # as curate wrote it before
    to_old_layout(out)
    assert main(["verify", str(out), "--checksums"]) == 0
    run = run_stage("clean", {}, [str(out)], tmp_path / "next", format="parquet")
    assert run["counts"]["in"] == 7
    (tmp_path / "ids.txt").write_text("a1\nshort\n")
    assert main(["erase", str(out), "--ids", str(tmp_path / "ids.txt")]) == 0
    assert (out / "manifest.json").exists() and not (out / "_manifest.json").exists()  # erase keeps its name
    assert json.loads((out / "manifest.json").read_text())["counts"]["out"] == 6
    assert side(out, "_state").is_dir() and not (out / "_state").exists()  # erase moved the side folders out
    assert main(["verify", str(out), "--checksums"]) == 0
    # a rerun of the stage (other settings) writes the new name, drops the old one, moves the side folders
    chain = tmp_path / "chain2.yaml"
    chain.write_text("filters:\n  - {filter: word_count, min: 6}\n")
    run_stage("filter", {"config": str(chain)}, [str(tmp_path / "in" / "*.jsonl")], out, format="parquet")
    assert (out / "_manifest.json").exists() and not (out / "manifest.json").exists()
    assert not (out / "_state").exists() and side(out, "_state").is_dir()
    assert main(["verify", str(out), "--checksums"]) == 0


def test_an_old_layout_fuzzy_stage_is_resumed_from_its_journal_read_verified_and_erased(fuzzy, tmp_path):
    manifest = json.loads((fuzzy / "_manifest.json").read_text())
    to_old_layout(fuzzy)
    assert main(["verify", str(fuzzy), "--checksums"]) == 0
    assert run_stage("clean", {}, [str(fuzzy)], tmp_path / "next", format="parquet")["counts"]["in"] == 3
    # a lost _SUCCESS: the rerun takes every step from the journal an earlier curate wrote inside the
    # folder, then moves the side folders out
    (fuzzy / "_SUCCESS").unlink()
    again = run_stage("fuzzy_dedup", {}, [str(tmp_path / "fin" / "*.jsonl")], fuzzy, format="parquet")
    assert again["steps"] and all(s["skipped"] for s in again["steps"].values()), again["steps"]
    assert again["counts"] == manifest["counts"]
    for name in ("_work", "_duplicates", "_rejects", "_state"):
        assert side(fuzzy, name).is_dir() and not (fuzzy / name).exists()
    assert main(["verify", str(fuzzy), "--checksums"]) == 0
    assert set(counts(fuzzy).values()) == {3}
    # erase, a writer too, moves them out as well
    to_old_layout(fuzzy)
    (tmp_path / "ids.txt").write_text("a2\n")
    assert main(["erase", str(fuzzy), "--ids", str(tmp_path / "ids.txt")]) == 0
    for name in ("_work", "_duplicates", "_rejects", "_state"):
        assert side(fuzzy, name).is_dir() and not (fuzzy / name).exists()
    assert main(["verify", str(fuzzy), "--checksums"]) == 0
    assert set(counts(fuzzy).values()) == {2}


def test_a_jobs_stage_folders_and_their_side_folders_rerun_and_verify(tmp_path, capsys):
    """The job root holds each stage's folder and its side folder: a rerun claims both (they are the
    job's), verify checks the stages with their side files, and each stage folder counts right."""
    from curate.app import runner

    write_jsonl(tmp_path / "fin" / "a.jsonl", [{"id": f"a{k}", "text": t} for k, t in enumerate(TEXTS)]
                + [{"id": "short", "text": "x"}])
    write_jsonl(tmp_path / "fin" / "b.jsonl", [{"id": "b0", "text": TEXTS[0]}, {"id": "b1", "text": TEXTS[1]}])
    chain = tmp_path / "chain.yaml"
    chain.write_text("filters:\n  - {filter: word_count, min: 5}\n")
    job = tmp_path / "job.yaml"
    job.write_text(f"name: j\ninput: {tmp_path / 'fin' / '*.jsonl'}\nstages:\n  - filter: {{config: {chain}}}\n"
                   "  - fuzzy_dedup: {}\n")
    root = tmp_path / "root"
    runner.run_job(runner.load_job(str(job)), str(root))
    assert sorted(p.name for p in root.iterdir() if p.name[:2].isdigit()) == [
        "01-filter", "01-filter.side", "02-fuzzy_dedup", "02-fuzzy_dedup.side"]
    assert set(counts(root / "01-filter").values()) == {5} and set(counts(root / "02-fuzzy_dedup").values()) == {3}
    runner.run_job(runner.load_job(str(job)), str(root), force=True)
    assert main(["verify", str(root), "--checksums"]) == 0
    (root / "02-fuzzy_dedup.side" / "notes.txt").write_text("mine")
    with pytest.raises(Exception, match="notes.txt: not a side file of curate's"):
        runner.run_job(runner.load_job(str(job)), str(root), force=True)
