"""Paths in manifests and journals are data: no command reads, writes or deletes through one that
leaves its unit (``..``, an absolute path) or through a link (issue 29, point 1).

Each case plants, in a finished output, a record naming a victim file outside the output with the
victim's true size and checksum (so nothing else gives the trick away), runs a command, and checks
that it exits 2 naming the path and that the victim is unchanged byte for byte.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pandas as pd
import pytest

from curate.app import cli
from tests.conftest import run_stage, side, write_jsonl


def checksum(path: Path) -> dict:
    from curate.stages.output import file_checksum

    with open(path, "rb") as f:
        size, digest = file_checksum(f)
    return {"bytes": size, "xxh3_128": digest}


@pytest.fixture
def victim(tmp_path) -> Path:
    """A user's own Parquet file beside the output, with documents an erase would match."""
    path = tmp_path / "victim" / "data.parquet"
    path.parent.mkdir()
    pd.DataFrame({"id": ["a1", "a2"], "text": ["the user's own data", "not curate's"]}).to_parquet(path)
    return path


@pytest.fixture
def dataset(tmp_path) -> Path:
    write_jsonl(tmp_path / "in" / "a.jsonl", [{"id": f"a{k}", "text": f"alpha {k} " * 20} for k in range(4)])
    write_jsonl(tmp_path / "in" / "b.jsonl", [{"id": f"b{k}", "text": f"beta {k} " * 20} for k in range(4)])
    out = tmp_path / "out"
    run_stage("clean", {}, [str(tmp_path / "in" / "*.jsonl")], out, format="parquet")
    return out


def plant(out: Path, rel: str, victim: Path, manifest: str = "_manifest.json") -> None:
    m = json.loads((out / manifest).read_text())
    m["outputs"].append({"path": rel, **checksum(victim), "rows": 2})
    (out / manifest).write_text(json.dumps(m, indent=2))


def hostile_paths(victim: Path) -> list[str]:
    return ["../victim/data.parquet", str(victim), "./../victim/data.parquet", "_rejects/../../victim/data.parquet"]


def run(args, capsys) -> tuple[int, str]:
    code = cli.main([str(a) for a in args])
    return code, capsys.readouterr().err


@pytest.mark.parametrize("which", range(4))
def test_erase_refuses_a_manifest_path_that_leaves_the_output(dataset, victim, tmp_path, capsys, which):
    rel = hostile_paths(victim)[which]
    plant(dataset, rel, victim)
    before = victim.read_bytes()
    (tmp_path / "ids.txt").write_text("a1\n")
    code, err = run(["erase", dataset, "--ids", tmp_path / "ids.txt"], capsys)
    assert code == 2, err
    assert repr(rel) in err and "leads out of its output" in err
    assert victim.read_bytes() == before


@pytest.mark.parametrize("command", ["verify", "report", "reproduce"])
def test_readers_refuse_a_manifest_path_that_leaves_the_output(dataset, victim, tmp_path, capsys, command):
    plant(dataset, "../victim/data.parquet", victim)
    before = victim.read_bytes()
    args = {"verify": ["verify", dataset, "--checksums"], "report": ["report", dataset],
            "reproduce": ["reproduce", dataset, "--scratch", tmp_path / "scratch"]}[command]
    code, err = run(args, capsys)
    assert code == 2, err
    assert "'../victim/data.parquet'" in err
    assert victim.read_bytes() == before


def test_a_job_manifest_stage_folder_outside_the_root_is_refused(dataset, victim, tmp_path, capsys):
    job = tmp_path / "job"
    job.mkdir()
    shutil.move(str(dataset), str(job / "01-clean"))
    shutil.move(str(side(dataset)), str(side(job / "01-clean")))
    (job / "_manifest.json").write_text(json.dumps({
        "owner": {"kind": "job", "job": "j"}, "job": "j", "curate_output": 1, "status": "complete", "unit": "",
        "stages": [{"name": "clean", "output": "../victim", "counts": {}}], "outputs": []}))
    (job / "_SUCCESS").write_text("")
    before = victim.read_bytes()
    (tmp_path / "ids.txt").write_text("a1\n")
    for args in (["erase", job, "--ids", tmp_path / "ids.txt"], ["reproduce", job, "--scratch", tmp_path / "s"]):
        code, err = run(args, capsys)
        assert code == 2, (args, err)
        assert "'../victim'" in err
    assert victim.read_bytes() == before


def test_a_journal_record_that_names_a_path_outside_is_refused(dataset, victim, tmp_path, capsys):
    """A killed erase's journal lists the files it will rewrite; a hostile one lists the victim."""
    state = side(dataset, "_state") / "erase-0000000000000000.json"
    state.write_text(json.dumps({"key": "erase-0000000000000000", "status": "writing",
                                 "paths": ["../victim/data.parquet"], "files": [{"path": "../victim/data.parquet"}]}))
    before = victim.read_bytes()
    (tmp_path / "ids.txt").write_text("a1\n")
    code, err = run(["erase", dataset, "--ids", tmp_path / "ids.txt"], capsys)
    assert code == 2, err
    assert "'../victim/data.parquet'" in err
    assert victim.read_bytes() == before


def test_a_part_that_is_a_link_is_neither_read_nor_written(dataset, victim, tmp_path, capsys):
    part = sorted(dataset.glob("part-*.parquet"))[0]
    part.unlink()
    os.symlink(victim, part)
    before = victim.read_bytes()
    (tmp_path / "ids.txt").write_text("a1\n")
    code, err = run(["erase", dataset, "--ids", tmp_path / "ids.txt"], capsys)
    assert code == 2, err
    assert "symbolic link" in err and part.name in err
    code, err = run(["verify", dataset, "--checksums"], capsys)  # a problem of the output, not a refusal
    assert code == 1, err
    assert f"{part.name}: link: a symbolic link" in err
    assert victim.read_bytes() == before


def test_token_manifests_name_no_pair_outside(tmp_path, victim, capsys):
    write_jsonl(tmp_path / "in" / "a.jsonl", [{"id": f"a{k}", "text": f"alpha {k} " * 20} for k in range(4)])
    out = tmp_path / "tokens"
    run_stage("tokenize", {"tokenizer": "tiktoken:cl100k_base"}, [str(tmp_path / "in" / "a.jsonl")], out,
              format="parquet")
    m = json.loads((out / "_manifest.json").read_text())
    m["files"][0]["name"] = "../victim/data"
    (out / "_manifest.json").write_text(json.dumps(m))
    before = victim.read_bytes()
    for args in (["verify", out], ["merge", out, "--output", tmp_path / "merged"],
                 ["pack", "--input", out, "--output", tmp_path / "packed", "--seq-length", "16"],
                 ["blend", "--input", out, "--weights", "1", "--output", tmp_path / "blend.txt"]):
        code, err = run(args, capsys)
        assert code == 2, (args, err)
        assert "'../victim/data'" in err, (args, err)
    assert victim.read_bytes() == before


def test_check_rel_accepts_what_curate_writes():
    from curate.stages.output import OwnershipError, check_rel

    for rel in ("part-00000.parquet", "_rejects/part-00000.parquet", "_work/refine/round-01/part-00000.parquet",
                "_state/part-00000.json", "_work/"):
        assert check_rel(rel, "x") == rel
    for rel in ("", "/etc/passwd", "..", "a/../b", "a//b", "./a", "a\\b", "s3://bucket/x", "a\x00b", None, 3):
        with pytest.raises(OwnershipError):
            check_rel(rel, "x")
