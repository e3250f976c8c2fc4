"""Loop-safe ``**`` globs (``curate.stages.paths``), against Python's glob as the oracle on trees
without loops, and on trees with one and two symlink loops.

Edge cases: ``**`` matching zero folders, hidden files and folders (skipped unless the segment starts
with ``.``), a character class, a link to a file, a link to a folder outside the tree (followed, as
glob does), ``loop -> .`` and two loops that point at each other's parents.
"""

from __future__ import annotations

import glob
import logging
import os
import time

import pytest

from curate.stages.paths import glob_files, glob_paths
from tests.conftest import read_output, run_stage, write_jsonl


@pytest.fixture
def tree(tmp_path):
    for rel in ("a.jsonl", "x/b.jsonl", "x/y/c.jsonl", "x/y/c.parquet", "x/.hidden/d.jsonl", ".e.jsonl",
                "x/y/z/f1.jsonl", "x/y/z/f2.txt"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text("{}\n")
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "o.jsonl").write_text("{}\n")
    os.symlink(tmp_path / "outside", tmp_path / "x" / "linked")
    os.symlink(tmp_path / "a.jsonl", tmp_path / "x" / "a-link.jsonl")
    return tmp_path


@pytest.mark.parametrize("pattern", ["**/*.jsonl", "**", "x/**/*.jsonl", "x/**/c.*", "**/y/**/f[12].*",
                                     "x/**/.hidden/*.jsonl", "**/.e.jsonl", "x/*/c.jsonl", "nothing/**/*"])
def test_same_as_glob_without_loops(tree, pattern):
    spec = str(tree / pattern)
    # the oracle lists "dir/" for a trailing "**"; compare without it
    expected = sorted(p.rstrip(os.sep) for p in glob.glob(spec, recursive=True))
    assert glob_paths(spec) == expected
    assert glob_files(spec) == [p for p in expected if os.path.isfile(p)]


def test_one_loop_lists_what_the_tree_without_it_lists_and_warns(tree, caplog):
    pattern = str(tree / "**" / "*.jsonl")
    before = glob_files(pattern)
    os.symlink(".", tree / "x" / "loop")
    with caplog.at_level(logging.WARNING, logger="curate"):
        assert glob_files(pattern) == before
    assert any("symlink loop" in r.message and str(tree / "x" / "loop") in r.message for r in caplog.records)


def test_two_loops_end_quickly(tree):
    pattern = str(tree / "**" / "*.jsonl")
    before = glob_files(pattern)
    os.symlink("..", tree / "x" / "y" / "up")
    os.symlink("../..", tree / "x" / "y" / "z" / "up2")
    started = time.perf_counter()
    assert glob_files(pattern) == before
    assert time.perf_counter() - started < 5


def test_a_stage_reads_each_file_once_through_a_loop(tmp_path):
    write_jsonl(tmp_path / "data" / "a.jsonl", [{"id": f"a{i}", "text": f"doc a {i}"} for i in range(5)])
    write_jsonl(tmp_path / "data" / "sub" / "b.jsonl", [{"id": f"b{i}", "text": f"doc b {i}"} for i in range(5)])
    os.symlink(".", tmp_path / "data" / "loop")
    os.symlink("..", tmp_path / "data" / "sub" / "up")
    started = time.perf_counter()
    manifest = run_stage("normalize", {}, str(tmp_path / "data" / "**" / "*.jsonl"), tmp_path / "out")
    assert time.perf_counter() - started < 60
    assert manifest["counts"]["in"] == 10
    assert sorted(read_output(tmp_path / "out")["id"]) == [f"a{i}" for i in range(5)] + [f"b{i}" for i in range(5)]
