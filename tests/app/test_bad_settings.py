"""Settings that must not get through: each exits 2 with one short line naming the file, key or option,
before any cluster starts and before anything is written.

Edge cases: NaN where a number belongs, a key given twice at the top and deep in a job or chain, YAML
anchors and aliases (a "billion laughs" bomb), job and chain files that are binary, not UTF-8 or a
directory, an ``--output`` that is a regular file, a shuffle into a billion partitions, a pack pad id
beyond the token set's vocabulary and a blend with one weight too few.
"""

from __future__ import annotations

import time

import pytest

from curate.app import cluster
from curate.app.cli import main
from tests.conftest import curate, run_stage, write_jsonl

BOMB = "a: &a [x, x, x, x, x, x, x, x, x]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a]\n" + "".join(
    f"{c}: &{c} [{', '.join(['*' + p] * 9)}]\n" for p, c in zip("bcdefgh", "cdefghi"))


@pytest.fixture
def no_cluster(monkeypatch):
    def refuse(*a, **k):
        raise AssertionError("a cluster was started")
    monkeypatch.setattr(cluster, "connect", refuse)


@pytest.fixture
def data(tmp_path):
    write_jsonl(tmp_path / "in" / "a.jsonl", [{"id": f"a{i}", "text": f"document number {i}"} for i in range(3)])
    write_jsonl(tmp_path / "in" / "b.jsonl", [{"id": f"b{i}", "text": f"document number {i} b"} for i in range(3)])
    return tmp_path


def refused(capsys, tmp_path, *argv, message):
    before = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*"))
    started = time.perf_counter()
    code = main(list(map(str, argv)))
    seconds = time.perf_counter() - started
    err = capsys.readouterr().err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert code == 2, err
    assert len(lines) == 1 and message in lines[0], err
    assert len(lines[0]) <= 400 and "Traceback" not in err
    assert seconds < 10
    assert sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*")) == before  # nothing written
    return lines[0]


def chain(tmp_path, text, name="chain.yaml"):
    path = tmp_path / name
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    return path


@pytest.mark.parametrize("text, message", [
    ("filters:\n  - {filter: word_count, min: .nan}\n", "filter 1 (word_count).min must be a number, not NaN"),
    ("filters:\n  - {filter: word_count, min: 5, min: 50}\n", "line 2: duplicate key 'min' (first on line 2)"),
    ("filters:\n  - filter: word_count\n    min: 5\n  - filter: numbers\n    max: 0.1\n    max: 0.2\n",
     "line 6: duplicate key 'max' (first on line 5)"),
    ("filters: []\nfilters:\n  - {filter: word_count, min: 5}\n", "line 2: duplicate key 'filters' (first on line 1)"),
    ("common: &c {min: 5}\nfilters:\n  - {filter: word_count, <<: *c}\n", "line 1: YAML anchors are not allowed"),
    (b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR", "a binary file (NUL byte at offset 8)"),
    (b"filters:\n  - {filter: word_count, name: caf\xe9}\n", "line 2: not UTF-8 text (byte 43)"),
])
def test_bad_chains(capsys, no_cluster, data, text, message):
    path = chain(data, text)
    line = refused(capsys, data, "filter", "--config", path, "--input", data / "in", "--output", data / "out",
                   message=message)
    assert str(path) in line


def test_a_chain_that_is_a_directory(capsys, no_cluster, data):
    (data / "chain.yaml").mkdir()
    refused(capsys, data, "filter", "--config", data / "chain.yaml", "--input", data / "in", "--output",
            data / "out", message="chain.yaml: is a directory, not a YAML file")


@pytest.mark.parametrize("text, message", [
    ("input: IN\nstages: [normalize]\nstages: [clean]\n", "line 3: duplicate key 'stages' (first on line 2)"),
    ("input: IN\nio: {blocksize: 1MiB, blocksize: 2MiB}\nstages: [normalize]\n", "line 2: duplicate key 'blocksize'"),
    (BOMB + "name: *i\ninput: IN\nstages: [normalize]\n", "line 1: YAML anchors are not allowed in settings (&a)"),
    ("input: IN\nname: *nothing\nstages: [normalize]\n", "line 2: YAML aliases are not allowed"),
    (b"input: IN\nstages: [normalize]\n\xff\xfe\n", "line 3: not UTF-8 text"),
    (b"\0\0\0\0", "a binary file"),
])
def test_bad_job_files(capsys, no_cluster, data, text, message):
    raw = text if isinstance(text, bytes) else text.replace("IN", str(data / "in")).encode()
    (data / "job.yaml").write_bytes(raw)
    line = refused(capsys, data, "run", data / "job.yaml", "--output", data / "out", message=message)
    assert f"job file {data / 'job.yaml'}" in line


def test_a_job_file_that_is_a_directory(capsys, no_cluster, data):
    (data / "job.yaml").mkdir()
    refused(capsys, data, "run", data / "job.yaml", "--output", data / "out",
            message="job.yaml: is a directory, not a YAML file")


def test_an_output_that_is_a_regular_file(capsys, no_cluster, data):
    (data / "out").write_text("mine\n")
    refused(capsys, data, "normalize", "--input", data / "in", "--output", data / "out",
            message=f"--output {data / 'out'}: exists and is not a directory")
    (data / "job.yaml").write_text(f"input: {data / 'in'}\nstages: [normalize]\n")
    refused(capsys, data, "run", data / "job.yaml", "--output", data / "out", message="exists and is not a directory")
    assert (data / "out").read_text() == "mine\n"


def test_a_billion_shuffle_partitions(capsys, no_cluster, data):
    refused(capsys, data, "shuffle", "--input", data / "in", "--output", data / "out", "--partitions", 10**9,
            message="partitions must be in 1..100000; got 1000000000")


def test_a_blend_weight_count_that_does_not_match(capsys, no_cluster, data):
    refused(capsys, data, "blend", "--input", data / "in" / "a.jsonl", data / "in" / "b.jsonl", "--output",
            data / "out", "--weights", "1", "--target-size", "4", message="weights: 1 weights for 2 inputs")


def test_a_pack_pad_id_beyond_the_vocabulary(data):
    # a real process: the token set is made in this one first (and in-process CLI calls before this
    # test leave logging handlers on pytest's closed captures)
    import dask

    with dask.config.set(scheduler="synchronous"):
        run_stage("tokenize", {"tokenizer": "tiktoken:cl100k_base"}, str(data / "in" / "*.jsonl"), data / "tok")
    started = time.perf_counter()
    proc = curate("pack", "--input", data / "tok", "--output", data / "out", "--seq-length", 8,
                  "--pad-id", 10**7, check=False)
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert proc.returncode == 2 and len(lines) == 1, proc.stderr
    assert "pad_id 10000000 is outside the vocabulary (size 100,277)" in lines[0]
    assert time.perf_counter() - started < 20
    assert not (data / "out").exists()


def test_a_syntax_error_in_a_users_module_exits_2_naming_the_line(capsys, no_cluster, data, monkeypatch):
    """Issue 29, point 10: it exited 1 with a traceback."""
    (data / "broken_stage.py").write_text("from curate import MapStage\n\nclass Mine(MapStage)\n    name = 'mine'\n")
    monkeypatch.syspath_prepend(str(data))
    (data / "job.yaml").write_text(f"name: j\ninput: {data / 'in' / '*.jsonl'}\nstages:\n  - 'broken_stage:Mine': {{}}\n")
    line = refused(capsys, data, "run", data / "job.yaml", "--output", data / "out",
                   message="broken_stage.py, line 3: expected ':'")
    assert "'broken_stage:Mine'" in line
