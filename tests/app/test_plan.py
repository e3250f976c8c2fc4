"""`curate plan`: predictions from a hand-made calibration, checked against a hand computation."""

import csv
import json
import os

import pytest

from curate.app import plan as model
from tests.conftest import curate, curate_here, write_jsonl

GiB = 2**30
COLUMNS = ["nodes", "tasks", "workers", "exit_code", "stage", "seconds", "docs_in", "docs_out", "cpu_seconds",
           "peak_worker_bytes", "shuffle_bytes", "output_bytes", "work_bytes", "dask_tasks", "input_bytes"]


def _calibration(folder):
    """Two stages at 2 and 4 workers (1 thread each); a repeat without resources, a total and a failed
    run, which the plan must not use."""
    rows = [
        # workers, exit, stage, seconds, cpu, peak, shuffle, output, work, tasks
        (2, 0, "01-clean", 6.0, 30, 1 * GiB, 0.8e9, 1000, 0, 100),
        (2, 0, "01-clean", 6.5, "", "", "", "", "", ""),
        (4, 0, "01-clean", 4.0, 34, 1.5 * GiB, 1.2e9, 1000, 0, 100),
        (2, 0, "02-exact_dedup", 3.0, 10, 3 * GiB, 4e9, 500, 2000, 500),
        (4, 0, "02-exact_dedup", 2.5, 10, 3 * GiB, 4e9, 500, 2000, 500),
        (2, 0, "total", 9.0, 40, 3 * GiB, 4.8e9, 1500, 2000, 600),
        (4, 1, "01-clean", 0.1, 1, 1, 1, 1, 1, 1),
    ]
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, "scaling.csv"), "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(COLUMNS)
        for workers, rc, stage, secs, cpu, peak, shuffle, out, work, tasks in rows:
            w.writerow([1, workers + 2, workers, rc, stage, secs, 100, 90, cpu, peak, shuffle, out, work, tasks,
                        1_000_000])
    return folder


def _job(tmp_path, stages="  - clean: {}\n  - exact_dedup: {}\n"):
    job = tmp_path / "job.yaml"
    job.write_text(f"input: {tmp_path / 'absent' / '*.jsonl'}\nstages:\n{stages}")
    return job


def _hand(memory_per_node):
    """The plan on 2 nodes x 4 cores (8 workers), 8 Gbit = 1e9 B/s per node, 10x the input, 1 ms a task."""
    per_worker = memory_per_node / 4
    # 01-clean: points (2 cores, 6 s), (4, 4): t = a + b/c through both: b = (6-4)/(1/2-1/4) = 8, a = 6 - 8/2 = 2
    # scheduler's share 100 tasks x 1 ms = 0.1 s of a scales x10, the other 1.9 s do not: serial 1.9 + 1.0
    clean = {"serial_seconds": 2.9, "parallel_seconds": 8 * 10 / 8, "network_seconds": (1e9 * 10) / (2 * 1e9),
             "wall_seconds": 2.9 + 10.0, "cpu_hours": (30 + 34) / 2 * 10 / 3600, "core_hours": 12.9 * 8 / 3600,
             "dask_tasks": 1000, "peak_worker_bytes": 1.5 * GiB, "shuffle_bytes": 1e10, "output_bytes": 10000,
             "work_bytes": 0, "max_workers_per_node": int(memory_per_node // (1.5 * GiB)),
             "binding": "CPU"}  # 10 s of CPU > 5 s of network > 2.9 s serial; 1.5 GiB fits
    # 02-exact_dedup: (2, 3 s), (4, 2.5 s): b = 0.5/0.25 = 2, a = 3 - 2/2 = 2; 500 tasks x 1 ms = 0.5 s of it
    dedup = {"serial_seconds": 1.5 + 5.0, "parallel_seconds": 2 * 10 / 8, "network_seconds": 4e10 / 2e9,
             "wall_seconds": 6.5 + 20.0, "cpu_hours": 10 * 10 / 3600, "core_hours": 26.5 * 8 / 3600,
             "dask_tasks": 5000, "peak_worker_bytes": 3 * GiB, "shuffle_bytes": 4e10, "output_bytes": 5000,
             "work_bytes": 20000, "max_workers_per_node": int(memory_per_node // (3 * GiB)),
             "binding": "memory" if 3 * GiB > per_worker else "network"}
    total = {"serial_seconds": 9.4, "parallel_seconds": 12.5, "network_seconds": 25.0, "wall_seconds": 39.4,
             "cpu_hours": 420 / 3600, "core_hours": 39.4 * 8 / 3600, "dask_tasks": 6000,
             "peak_worker_bytes": 3 * GiB, "shuffle_bytes": 5e10, "output_bytes": 15000, "work_bytes": 20000,
             "max_workers_per_node": min(clean["max_workers_per_node"], dedup["max_workers_per_node"]),
             "binding": "memory" if dedup["binding"] == "memory" else "network"}  # 25 s network > 12.5 > 9.4
    return clean, dedup, total


@pytest.mark.parametrize("memory", ["8GiB", "16GiB"])
def test_plan_matches_the_hand_computation(tmp_path, memory):
    folder = _calibration(str(tmp_path / "cal"))
    out = tmp_path / "plan.json"
    proc = curate("plan", _job(tmp_path), "--calibration", folder, "--nodes", "2", "--cores-per-node", "4",
                  "--memory-per-node", memory, "--link", "8gbit", "--input-size", "10MB", "--json", out)
    result = json.loads(out.read_text())
    assert result["ratio"] == 10.0
    (p,) = result["plans"]
    assert (p["nodes"], p["total"]["cores"]) == (2, 8)
    for got, want in zip([*p["stages"], p["total"]], _hand(int(memory[:-3]) * GiB)):
        for key, value in want.items():
            assert got[key] == pytest.approx(value), (got["stage"], key)
        assert got["memory_per_worker"] == int(memory[:-3]) * GiB / 4
    assert [q["stage"] for q in p["stages"]] == ["01-clean", "02-exact_dedup"]
    assert "02-exact_dedup" in proc.stdout and "assumptions:" in proc.stdout
    if memory == "8GiB":
        assert "at most 2 worker(s) per node" in proc.stdout


def test_two_points_predict_a_synthetic_amdahl_curve_exactly(tmp_path):
    serial, parallel, cores_per_node = 5.0, 640.0, 16  # t(c) = 5 + 640 / c

    def t(nodes):
        return serial + parallel / (nodes * cores_per_node)

    folder = tmp_path / "cal"
    folder.mkdir()
    (folder / "scaling.csv").write_text("nodes,stage,seconds\n" + "".join(
        f"{n},01-clean,{t(n)!r}\n" for n in (1, 2)))
    cal = model.load_calibration(str(folder), cores_per_node)
    s = model.PlanSettings(nodes=(1, 2, 4, 64), cores_per_node=cores_per_node, memory_per_node=64 * GiB)
    result = model.plan(cal, ["01-clean"], s, None, [])
    assert [p["total"]["wall_seconds"] for p in result["plans"]] == pytest.approx([45.0, 25.0, 15.0, t(64)])
    assert model.fit(cal.stages["01-clean"].points) == pytest.approx((serial, parallel))
    assert result["plans"][2]["stages"][0]["binding"] == "CPU"  # 10 s parallel > 5 s serial
    assert result["plans"][3]["stages"][0]["binding"] == "scheduler"  # 0.625 s parallel < 5 s serial


def test_one_point_is_the_scheduler_share_and_perfectly_parallel_rest():
    # 12 s on 4 cores with 2000 tasks: 2 s on the scheduler (1 ms each), 10 s x 4 cores parallel
    assert model.fit([(4.0, 12.0)], tasks=2000) == pytest.approx((2.0, 40.0))
    assert model.fit([(4.0, 12.0)]) == pytest.approx((0.0, 48.0))
    # slower with more cores: all serial; faster than linear: all parallel
    assert model.fit([(1.0, 10.0), (2.0, 12.0)]) == pytest.approx((11.0, 0.0))
    assert model.fit([(1.0, 10.0), (2.0, 4.0)]) == pytest.approx((0.0, (10 + 4 / 2) / (1 + 1 / 4)))


@pytest.mark.parametrize("args, message", [
    (["--nodes", "0"], "--nodes must list positive integers"),
    (["--memory-per-node", "12parsecs"], "--memory-per-node must be a size"),
    (["--link", "fast"], "--link must be a bandwidth"),
    (["--cores-per-node", "0"], "--cores-per-node must be at least 1"),
    (["--calibration", "EMPTY"], "no scaling.csv there"),
    (["--input-size", "0TB"], "--input-size must be positive"),
])
def test_bad_options_are_one_line_naming_the_option(tmp_path, args, message):
    (tmp_path / "EMPTY").mkdir()
    base = {"--calibration": _calibration(str(tmp_path / "cal")), "--nodes": "8", "--cores-per-node": "32",
            "--memory-per-node": "256GiB"}
    base.update({args[0]: args[1].replace("EMPTY", str(tmp_path / "EMPTY"))})
    proc = curate("plan", _job(tmp_path), *[x for kv in base.items() for x in kv], check=False)
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1 and message in proc.stderr, proc.stderr


def test_a_stage_missing_from_the_calibration_is_named(tmp_path):
    job = _job(tmp_path, "  - clean: {}\n  - exact_dedup: {}\n  - shuffle: {}\n")
    proc = curate("plan", job, "--calibration", _calibration(str(tmp_path / "cal")), "--nodes", "8",
                  "--cores-per-node", "32", "--memory-per-node", "256GiB", check=False)
    assert proc.returncode == 2
    assert "--calibration" in proc.stderr and "stage 03-shuffle is not in scaling.csv" in proc.stderr


def test_sample_run_calibrates_from_one_point(tmp_path):
    for f in range(2):
        write_jsonl(tmp_path / "in" / f"{f}.jsonl", [{"text": f"doc {i} of file {f} " * 10} for i in range(100)])
    sizes = [os.path.getsize(tmp_path / "in" / f"{f}.jsonl") for f in range(2)]
    job = tmp_path / "job.yaml"
    job.write_text(f"input: {tmp_path / 'in'}\nstages: [normalize]\n")
    out = tmp_path / "plan.json"
    proc = curate("plan", job, "--sample", "50%", "--sample-output", tmp_path / "sample", "--cluster", "threads",
                  "--nodes", "2", "--cores-per-node", "4", "--memory-per-node", "8GiB", "--json", out)
    assert "1 of the job's 2 input files" in proc.stdout and "no serial fraction" in proc.stdout
    result = json.loads(out.read_text())
    assert result["ratio"] == pytest.approx(sum(sizes) / sizes[0])  # the sample: the first file
    rows = list(csv.DictReader(open(tmp_path / "sample" / "scaling.csv")))
    assert [r["stage"] for r in rows] == ["01-normalize", "total"] and rows[0]["cpu_seconds"]


def test_the_docs_example_is_what_the_command_prints():
    from tests.conftest import ROOT

    proc = curate("plan", "tests/data/plan/common_crawl.yaml", "--calibration", "tests/data/plan", "--nodes",
                  "8,64,512", "--cores-per-node", "32", "--memory-per-node", "256GiB", "--link", "25gbit",
                  "--input-size", "10TB")
    assert f"```\n{proc.stdout.rstrip()}\n```" in (ROOT / "docs" / "plan.md").read_text()


# --------------------------------------------------------------------------- hostile pass 4, point 3


def _plan_args(tmp_path, cal, *more):
    return ["plan", _job(tmp_path), "--calibration", cal, "--nodes", "8", "--cores-per-node", "32",
            "--memory-per-node", "256GiB", "--input-size", "10TB", *more]


@pytest.mark.parametrize("column, value", [("seconds", "nan"), ("cpu_seconds", "inf"), ("peak_worker_bytes", "-5"),
                                           ("workers", "-2"), ("shuffle_bytes", "1e400"), ("dask_tasks", "NaN")])
def test_a_calibration_value_that_is_no_finite_count_is_refused_naming_column_and_line(tmp_path, column, value):
    from curate.app.cli import main

    cal = _calibration(str(tmp_path / "cal"))
    path = os.path.join(cal, "scaling.csv")
    rows = list(csv.reader(open(path)))
    rows[3][rows[0].index(column)] = value  # line 4 of the file
    with open(path, "w", newline="") as f:
        csv.writer(f).writerows(rows)
    assert main([str(a) for a in _plan_args(tmp_path, cal)]) == 2


def test_every_refusal_of_point_3_is_one_line_with_exit_2(tmp_path):
    cal = _calibration(str(tmp_path / "cal"))
    path = os.path.join(cal, "scaling.csv")
    rows = list(csv.reader(open(path)))
    rows[3][rows[0].index("seconds")] = "-966059"
    bad = tmp_path / "bad"
    bad.mkdir()
    with open(bad / "scaling.csv", "w", newline="") as f:
        csv.writer(f).writerows(rows)
    binary = tmp_path / "binary"
    binary.mkdir()
    (binary / "scaling.csv").write_bytes(bytes(range(256)) * 4)
    (tmp_path / "in").mkdir()
    empty_glob = tmp_path / "empty.yaml"
    empty_glob.write_text(f"input: {tmp_path / 'in' / '*.jsonl'}\nstages:\n  - clean: {{}}\n  - exact_dedup: {{}}\n")
    cases = [
        (_plan_args(tmp_path, str(bad)), "scaling.csv line 4 column 'seconds' has '-966059', not a finite number"),
        (_plan_args(tmp_path, cal, "--task-overhead", "nans"), "--task-overhead must be a time"),
        (_plan_args(tmp_path, cal, "--task-overhead", "infs"), "--task-overhead must be a time"),
        (_plan_args(tmp_path, str(binary)), "scaling.csv: not a CSV file of text"),
        (["plan", empty_glob, "--calibration", cal, "--nodes", "8", "--cores-per-node", "32",
          "--memory-per-node", "256GiB"], "holds no bytes here (no file matches): give --input-size"),
        ([*_plan_args(tmp_path, cal)[:-2], "--input-size", "inf"], "--input-size must be a size"),
        ([*_plan_args(tmp_path, cal)[:-2], "--input-size", "1e400"], "--input-size must be a size"),
        (_plan_args(tmp_path, cal, "--memory-per-node", "infGiB"), "--memory-per-node must be a size"),
        (_plan_args(tmp_path, cal, "--link", "1e400/s"), "--link must be"),
    ]
    for i, (args, message) in enumerate(cases):  # the first in a real process, the others through cli.main here
        proc = curate_here(*args) if i else curate(*args, check=False)
        assert proc.returncode == 2, (args, proc.stderr[-2000:])
        assert proc.stderr.count("\n") == 1 and message in proc.stderr, (args, proc.stderr)
