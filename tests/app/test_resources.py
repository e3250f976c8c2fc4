"""Per-stage resources (app/resources.py): the arithmetic on snapshots, the /proc readings, and a tiny
job measured in-process and on a local cluster of 2 workers, as `curate bench record` reads it."""

import csv
import json
import os
import subprocess
import sys
import time

import pytest

from curate.app import bench, resources, runner
from tests.conftest import side, write_jsonl


def _snap(pid, cpu, peak, shuffle, host="h"):
    return {"pid": pid, "host": host, "cpu": cpu, "peak": peak, "shuffle": shuffle}


def test_measured_differences_by_hand():
    before = {"workers": {"w1": _snap(1, 10.0, 5, 100), "w2": _snap(2, 20.0, 5, 0), "w3": _snap(3, 1.0, 9, 7)},
              "threads": 3, "scheduler": {"tasks": 40, "cpu": 2.0}}
    after = {"workers": {"w1": _snap(1, 12.5, 300, 400),     # 2.5 s, 300 B sent
                         "w2": _snap(22, 4.0, 700, 50),       # restarted: its counters start at 0
                         "w4": _snap(4, 1.5, 200, 10),        # joined during the stage
                         "w5": _snap(4, 1.5, 200, 10)},       # the same process as w4: once
             "threads": 3, "scheduler": {"tasks": 100, "cpu": 3.25}}
    got = resources.measured(before, after, 7.0)
    # w3 left: not counted. cpu 2.5 + 4.0 + 1.5; shuffle 300 + 50 + 10; peak max(300, 700, 200)
    assert got == {"seconds": 7.0, "workers": 3, "cores": 3, "cpu_seconds": 8.0, "peak_worker_bytes": 700,
                   "shuffle_bytes": 360, "dask_tasks": 60, "scheduler_cpu_seconds": 1.25}


def test_peak_resets_and_children_count():
    block = bytearray(200 * 2**20)
    block[::4096] = b"x" * len(block[::4096])  # touch every page: resident
    high = resources.peak_rss()
    del block
    resources.reset_peak_rss()
    assert resources.peak_rss() < high - 100 * 2**20
    # a child that burns ~0.5 s of CPU and is still running when measured (an extraction sandbox)
    start = resources.process_cpu()
    child = subprocess.Popen([sys.executable, "-c", "import time\nt=time.process_time()\n"
                              "while time.process_time()-t<0.5: pass\nprint(1, flush=True)\ntime.sleep(30)"],
                             stdout=subprocess.PIPE)
    try:
        child.stdout.readline()
        assert resources.process_cpu() - start >= 0.45
    finally:
        child.kill()
        child.wait()
    # reaped now: counted through os.times() instead, not lost
    assert resources.process_cpu() - start >= 0.45


def test_a_snapshot_that_resets_runs_no_full_garbage_collection(monkeypatch):
    """A full collection walked every imported object at each stage boundary, 0.04-0.15 CPU-s of a
    worker each, and freed nothing measurable: the reset hands back the allocators' free memory only."""
    import gc

    calls = []
    monkeypatch.setattr(gc, "collect", lambda *a: calls.append(a) or 0)
    snap = resources.snapshot(reset=True)
    assert calls == [] and snap["pid"] == os.getpid() and snap["cpu"] > 0


def _job(tmp_path):
    for f in range(2):
        write_jsonl(tmp_path / "in" / f"{f}.jsonl", [{"text": f"document {i % 40} of the test, words " * 5}
                                                      for i in range(200)])
    job = tmp_path / "job.yaml"
    job.write_text(f"input: {tmp_path / 'in'}\nstages:\n  - normalize: {{}}\n  - exact_dedup: {{}}\n")
    return runner.load_job(str(job))


def _disk(folder):
    """(data bytes, _work bytes) of a stage folder and its side folder from the files on disk."""
    data = work = 0
    for top in (folder, side(folder)):
        for d, _, names in os.walk(top):
            rel = os.path.relpath(d, top)
            for n in names:
                size = os.path.getsize(os.path.join(d, n))
                if rel.split(os.sep)[0] == "_work":
                    work += size
                elif rel.split(os.sep)[0] in (".", "_duplicates", "_rejects") and n.endswith(".parquet"):
                    data += size
    return data, work


def _check_record(out, job_bytes):
    rows = bench.record_rows(str(out), {"workers": "2"})
    assert list(rows[0])[:6] == ["workers", "stage", "seconds", "docs_in", "docs_out", "cpu_seconds"]
    assert list(rows[0])[6:10] == ["peak_worker_bytes", "shuffle_bytes", "output_bytes", "work_bytes"]
    for r in rows[:-1]:
        assert (r["output_bytes"], r["work_bytes"]) == _disk(out / r["stage"])
        assert r["cpu_seconds"] > 0 and r["peak_worker_bytes"] > 50 * 2**20
        assert r["input_bytes"] == job_bytes
    total = rows[-1]
    assert total["stage"] == "total"
    assert total["cpu_seconds"] == pytest.approx(sum(r["cpu_seconds"] for r in rows[:-1]))
    assert total["peak_worker_bytes"] == max(r["peak_worker_bytes"] for r in rows[:-1])
    assert total["work_bytes"] == rows[1]["work_bytes"] > 0  # exact_dedup's hashes; normalize has none
    return rows


def _outputs(out):
    """Every stage's file list with checksums: what measuring must not change."""
    return {d: [(r["path"], r["bytes"], r["xxh3_128"]) for r in json.loads((out / d / "_manifest.json").read_text())
                ["outputs"] if not r["path"].startswith("_work/")] for d in ("01-normalize", "02-exact_dedup")}


def test_in_process_run_is_measured(tmp_path, monkeypatch):
    from curate.app.cluster import ClusterSettings

    job = _job(tmp_path)
    job_bytes = sum(os.path.getsize(tmp_path / "in" / f"{f}.jsonl") for f in range(2))
    started = time.time()
    runner.execute_job(job, str(tmp_path / "out"), ClusterSettings(mode="threads", workers=2))
    rows = _check_record(tmp_path / "out", job_bytes)
    assert [(r["workers"], r["cores"], r["shuffle_bytes"]) for r in rows[:-1]] == [("2", 2, 0)] * 2
    assert "dask_tasks" not in resources.load(str(tmp_path / "out"))["stages"]["01-normalize"]
    assert rows[0]["cpu_seconds"] <= (time.time() - started) * os.cpu_count() + 1
    # the same job without measuring writes the same data, byte for byte
    monkeypatch.setattr(runner, "resource_meter", lambda *a: None)
    runner.execute_job(job, str(tmp_path / "plain"), ClusterSettings(mode="threads", workers=2))
    assert not (tmp_path / "plain" / "_reports" / "resources.json").exists()
    assert _outputs(tmp_path / "plain") == _outputs(tmp_path / "out")
    # a rerun that skips every stage keeps what the computing run measured
    before = resources.load(str(tmp_path / "out"))
    runner.execute_job(job, str(tmp_path / "out"), ClusterSettings(mode="threads", workers=2))
    assert resources.load(str(tmp_path / "out")) == before


def test_local_cluster_of_two_workers_is_measured(tmp_path, monkeypatch):
    from curate.app.cluster import ClusterSettings

    job = _job(tmp_path)
    job_bytes = sum(os.path.getsize(tmp_path / "in" / f"{f}.jsonl") for f in range(2))
    taken = []
    take = resources.Meter._take
    monkeypatch.setattr(resources.Meter, "_take", lambda self, reset: taken.append(reset) or take(self, reset))
    runner.execute_job(job, str(tmp_path / "out"), ClusterSettings(mode="local", workers=2, memory_limit="1GiB"))
    # one snapshot between two stages ends the first and begins the second: 3 for 2 stages, not 4
    assert taken == [True, True, False]
    rows = _check_record(tmp_path / "out", job_bytes)
    stages = resources.load(str(tmp_path / "out"))["stages"]
    assert [(s["workers"], s["cores"]) for s in stages.values()] == [(2, 2), (2, 2)]
    assert all(s["dask_tasks"] >= 2 and s["scheduler_cpu_seconds"] > 0 for s in stages.values())
    assert stages["02-exact_dedup"]["shuffle_bytes"] > 0  # its hashes move between the two workers
    with open(tmp_path / "scaling.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    assert [r["stage"] for r in csv.DictReader(open(tmp_path / "scaling.csv"))] == [
        "01-normalize", "02-exact_dedup", "total"]
