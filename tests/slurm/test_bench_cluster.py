"""jobs/bench_cluster.py end to end, tiny: a 2-node emulated run (head node + 2 worker nodes of half
a CPU each) of a small WARC job through sbatch and dask-mpi. The caps were in force (no node used
more CPU than its quota allows, the scheduler and the job ran on the head node) and the token files
are the bytes of a local in-process run. Root only, like the other SLURM tests."""

from __future__ import annotations

import csv
import json
import shutil
import subprocess
import sys
import time

import pytest
import yaml

from tests.conftest import CURATE, ROOT
from tests.slurm.cluster import why_not

CPUS = 0.5


def sweep(template, out):
    """(exit code or None when it did not end in time, its output): the driver is stopped with SIGTERM
    on a hang, so that it takes its cluster down (its finally blocks), and its output is kept."""
    proc = subprocess.Popen([sys.executable, "jobs/bench_cluster.py", "sweep", "--nodes", "2", "--node-cpus",
                             str(CPUS), "--node-memory", "2GiB", "--link", "1gbit", "--pages", "200", "--files", "4",
                             "--job", str(template), "--output", str(out), "--timeout", "150"],
                            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        return proc.wait(timeout=170), proc.stdout.read()
    except subprocess.TimeoutExpired:
        proc.terminate()
        try:
            proc.wait(timeout=90)
        except subprocess.TimeoutExpired:
            proc.kill()
        logs = "".join(p.read_text(errors="replace")[-2000:] for p in sorted(out.glob("cluster-logs/*"))[:6]
                       if p.is_file())
        return None, proc.stdout.read() + logs


@pytest.mark.timeout(600)
def test_a_two_node_emulated_run_of_a_tiny_job(tmp_path):
    reason = why_not()
    if reason:
        pytest.skip(reason)
    template = tmp_path / "tiny.yaml"
    template.write_text(yaml.safe_dump({"input": "unused", "io": {"format": "parquet"},
                                        "stages": [{"extract_warc": {"algorithm": "resiliparse"}}, "clean",
                                                   {"tokenize": {"tokenizer": "tiktoken:cl100k_base"}}]}))
    out = tmp_path / "sweep"
    namespaces = subprocess.run(["ip", "netns"], capture_output=True, text=True).stdout
    for attempt in (1, 2):  # a hang seen once in 3 full-suite runs (never alone): one more try, said
        shutil.rmtree(out, ignore_errors=True)
        started = time.time()
        code, text = sweep(template, out)
        wall = time.time() - started
        if code is not None:
            break
        print(f"attempt {attempt}: the sweep did not end in time; its output:\n{text[-3000:]}")
    assert code == 0, text[-6000:]

    # the caps: per node, CPU-seconds within its quota over the run; the ranks where they belong
    usage = list(csv.DictReader((out / "node_usage.csv").open()))
    assert sorted(u["node"] for u in usage) == ["head", "node1", "node2"], usage
    for u in usage:
        assert u["cpus"] == str(CPUS) and u["memory"] == "2GiB" and u["link"] == "1gbit", u
        assert 0 < float(u["cpu_seconds"]) <= CPUS * wall * 1.1, (u, wall)
        assert int(u["memory_peak"]) <= 2 * 2**30
    log = (out / "job.log").read_text()
    assert "scheduler tls://" in log and " on head " in log and "2 worker(s) on 2 node(s)" in log, log[-3000:]
    rows = list(csv.DictReader((out / "results" / "scaling.csv").open()))
    assert [(r["nodes"], r["tasks"], r["workers"], r["exit_code"]) for r in rows if r["stage"] == "total"] \
        == [("2", "4", "2", "0")], rows
    assert json.loads((out / "results" / "scaling.json").read_text())["strong"]["total"]["seconds"]["2"] > 0

    # the same job in this process (no cluster): the same token bytes
    local = tmp_path / "local"
    done = subprocess.run([*CURATE, "run", str(out / "job.yaml"), "--output", str(local), "--cluster", "threads"],
                          cwd=ROOT, capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr[-3000:]
    ran = out / "results" / "nodes-0002" / "03-tokenize"
    names = sorted(p.name for p in (local / "03-tokenize").iterdir() if not p.name.startswith("_"))
    assert names and names == sorted(p.name for p in ran.iterdir() if not p.name.startswith("_")), names
    for name in names:
        assert (local / "03-tokenize" / name).read_bytes() == (ran / name).read_bytes(), name
    # the driver took its cluster down
    assert subprocess.run(["ip", "netns"], capture_output=True, text=True).stdout == namespaces


def test_a_capped_node_gives_page_extraction_the_wall_time_a_whole_core_would(tmp_path):
    """At 6 quarter-core nodes a page a whole core extracts within the default 5 s was a timeout reject,
    and its partition's files differed from the 1-node run's: the sweep's job divides the default by
    the node's share of a core, and leaves a timeout the template sets alone (needs no cluster)."""
    sys.path.insert(0, str(ROOT / "jobs"))
    from bench_cluster import make_job

    template = tmp_path / "t.yaml"
    template.write_text(yaml.safe_dump({"input": "x", "output": "y", "stages": [
        {"extract_warc": {"algorithm": "resiliparse"}}, {"clean": {}}]}))
    job = yaml.safe_load(make_job(template, tmp_path / "in", tmp_path / "j.yaml", 0.25).read_text())
    assert job["stages"] == [{"extract_warc": {"algorithm": "resiliparse", "extract_timeout": 20.0}}, {"clean": {}}]
    assert job["input"] == f"{tmp_path / 'in'}/*.warc.gz" and "output" not in job
    whole = yaml.safe_load(make_job(template, tmp_path / "in", tmp_path / "w.yaml", 1.0).read_text())
    assert whole["stages"][0] == {"extract_warc": {"algorithm": "resiliparse"}}
    template.write_text(yaml.safe_dump({"input": "x", "stages": [{"extract_warc": {"extract_timeout": 7.0}}]}))
    own = yaml.safe_load(make_job(template, tmp_path / "in", tmp_path / "o.yaml", 0.25).read_text())
    assert own["stages"] == [{"extract_warc": {"extract_timeout": 7.0}}]
    # a stage written as its name alone (the sample's "- clean") is a stage without settings
    template.write_text(yaml.safe_dump({"input": "x", "stages": ["extract_warc", "clean"]}))
    bare = yaml.safe_load(make_job(template, tmp_path / "in", tmp_path / "b.yaml", 0.25).read_text())
    assert bare["stages"] == [{"extract_warc": {"extract_timeout": 20.0}}, "clean"]
