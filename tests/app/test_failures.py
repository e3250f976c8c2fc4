"""One clear line for every failure (issue 11), on a real local cluster: a document beyond the worker's
memory budget, a worker killed for memory, a full file system, a failed download, a taken dashboard
port, duplicate ids. Each ends in one ``curate: error:`` line naming the file, limit or option, a
non-zero exit, and no traceback (those are for --debug)."""

import json
import os
import random
import shutil
import socket
import subprocess
import sys

import pytest

from tests.conftest import curate, write_jsonl

pytestmark = pytest.mark.slow  # each starts a local cluster

ONE_WORKER = ("--workers", "1")


def last_line(proc) -> str:
    return proc.stderr.strip().splitlines()[-1]


def no_tracebacks(proc) -> None:
    for noise in ("Traceback", "Compute Failed", "Perhaps you already have a cluster running", "KilledWorker"):
        assert noise not in proc.stderr, proc.stderr[-3000:]


def test_a_document_beyond_the_worker_memory_budget_is_named(tmp_path):
    # 400 MiB per worker -> 50 MiB per document; the 60 MB line is read past in chunks, never held
    src = tmp_path / "in.jsonl"
    with open(src, "w") as f:
        f.write(json.dumps({"id": "a", "text": "small"}) + "\n")
        f.write(json.dumps({"id": "huge", "text": "x" * 60_000_000}) + "\n")
        f.write(json.dumps({"id": "c", "text": "small too"}) + "\n")
    proc = curate("normalize", "--input", src, "--output", tmp_path / "out", *ONE_WORKER,
                  "--memory-limit", "400MiB", check=False)
    assert proc.returncode == 1, proc.stderr[-3000:]
    assert last_line(proc) == (
        f"curate: error: {src} line 2: too_large: a 57.2 MiB line is larger than the 50 MiB per document "
        "(1/8 of the worker memory limit 400 MiB; raise --memory-limit, or set --max-document-bytes) "
        "(use --on-error skip to write such lines to _rejects/)")
    no_tracebacks(proc)


def test_a_worker_killed_for_memory_names_stage_input_and_limits(tmp_path):
    # one 150 MB partition (--blocksize 1GiB) cannot be read within 300 MiB; no single document is large
    src = tmp_path / "many.jsonl"
    line = json.dumps({"text": "w " * 5000}) + "\n"
    with open(src, "w") as f:
        f.writelines([line] * 15_000)
    env = {"DASK_DISTRIBUTED__SCHEDULER__ALLOWED_FAILURES": "0"}  # give up at the first death: a faster test
    proc = curate("normalize", "--input", src, "--output", tmp_path / "out", *ONE_WORKER, "--memory-limit", "300MiB",
                  "--blocksize", "1GiB", check=False, env=env)
    assert proc.returncode == 1, proc.stderr[-3000:]
    line = last_line(proc)
    # the partition is made and written in one task (modules/dataset/groups.py: one partition this size)
    assert line.startswith("curate: error: stage normalize: a worker died once running task write-normalize "), line
    assert f"on partition 0 (input: {src} bytes 0-{src.stat().st_size})" in line
    assert "over its memory limit of 300 MiB; use a smaller --blocksize (now 1GiB) or a larger --memory-limit" in line
    no_tracebacks(proc)


@pytest.fixture
def full_fs(tmp_path):
    """A 1 MiB tmpfs mounted for the test (root only), unmounted afterwards."""
    if os.geteuid() != 0 or not shutil.which("mount"):
        reason = "a full file system needs root to mount a small tmpfs"
        print(f"skipped: {reason}", file=sys.stderr)
        pytest.skip(reason)
    mnt = tmp_path / "full"
    mnt.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(mnt)], capture_output=True, text=True)
    if done.returncode != 0:
        reason = f"cannot mount a tmpfs: {done.stderr.strip()}"
        print(f"skipped: {reason}", file=sys.stderr)
        pytest.skip(reason)
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)


def test_a_full_disk_is_one_line_with_the_path(tmp_path, full_fs):
    rng = random.Random(0)
    words = ["".join(rng.choice("abcdefghij") for _ in range(8)) for _ in range(5000)]
    src = write_jsonl(tmp_path / "in.jsonl", [{"id": str(i), "text": " ".join(rng.choices(words, k=300))}
                                              for i in range(1000)])  # ~2.7 MB of text: more than fits
    out = full_fs / "out"
    proc = curate("normalize", "--input", src, "--output", out, *ONE_WORKER, "--format", "jsonl", check=False)
    assert proc.returncode == 1, proc.stderr[-3000:]
    assert last_line(proc).startswith(f"curate: error: no space left on device writing {out}"), proc.stderr[-3000:]
    no_tracebacks(proc)


def test_a_failed_download_with_on_error_raise_is_one_line(tmp_path):
    with socket.socket() as s:  # a port nobody listens on: connection refused
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    url = f"http://127.0.0.1:{port}/data/x.warc.gz"
    (tmp_path / "urls.txt").write_text(url + "\n")
    proc = curate("download", "urls", "--list", tmp_path / "urls.txt", "--output", tmp_path / "out", *ONE_WORKER,
                  "--retries", "1", "--backoff", "0.01", "--timeout", "2", check=False)
    assert proc.returncode == 1, proc.stderr[-3000:]
    assert last_line(proc).startswith(f"curate: error: {url}: connection failed"), proc.stderr[-3000:]
    no_tracebacks(proc)


def test_a_taken_dashboard_port_is_not_a_warning(tmp_path):
    src = write_jsonl(tmp_path / "in.jsonl", [{"id": "a", "text": "one"}])
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        proc = curate("normalize", "--input", src, "--output", tmp_path / "out", *ONE_WORKER,
                      "--dashboard-address", f"127.0.0.1:{port}")
    assert "curate: dashboard at http://127.0.0.1:" in proc.stderr
    assert f"127.0.0.1:{port}/status" not in proc.stderr  # it moved to a free port, and says where
    no_tracebacks(proc)


def test_verify_unique_ids_lists_duplicates_and_exits_1(tmp_path):
    write_jsonl(tmp_path / "d" / "a.jsonl", [{"id": f"a{i}", "text": "x"} for i in range(50)] + [{"id": "dup", "text": "1"}])
    write_jsonl(tmp_path / "d" / "b.jsonl", [{"id": f"b{i}", "text": "y"} for i in range(50)] + [{"id": "dup", "text": "2"}])
    proc = curate("verify", "--unique-ids", tmp_path / "d" / "*.jsonl", *ONE_WORKER, check=False)
    assert proc.returncode == 1, proc.stderr[-3000:]
    assert "  'dup': 2 documents (a.jsonl, b.jsonl)" in proc.stderr
    assert last_line(proc).endswith("1 duplicate id(s) among 102 documents (1 documents beyond the first of each)")
    no_tracebacks(proc)


def test_a_worker_killed_in_a_stage_with_capped_partitions_names_its_partition(tmp_path):
    """substring_dedup reads partitions of at most 8 MiB whatever --blocksize says: the message names
    that partition's input and does not advise a smaller --blocksize, which would change nothing."""
    from curate.app.errors import WorkerKilled
    from curate.stages.dedup import substrings
    from curate.stages.stage import IOSettings

    src = tmp_path / "big.jsonl"
    with open(src, "w") as f:
        f.writelines([json.dumps({"id": str(i), "text": "w " * 5000}) + "\n" for i in range(2000)])  # 20 MB
    cap = substrings.MAX_PARTITION_BYTES
    e = WorkerKilled(("windows-task", 1), 2 << 30, 4).in_stage("substring_dedup", (str(src),), IOSettings())
    line = str(e)
    assert f"on partition 1 (input: {src} bytes {cap}-{2 * cap})" in line, line
    assert line.endswith("this stage reads partitions of at most 8 MiB whatever --blocksize says: use a larger "
                         "--memory-limit (or fewer --workers)"), line
    plain = WorkerKilled(("read", 0), 2 << 30, 4).in_stage("normalize", (str(src),), IOSettings())
    assert "use a smaller --blocksize (now 128MiB)" in str(plain)
