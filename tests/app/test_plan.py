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


def plan_here(*args, check=True):
    """``curate plan ARGS`` through ``cli.main`` in this process (``curate_here``), failing like
    ``curate``'s check when it exits non-zero. Real processes of the command stay checked in
    test_sample_run_calibrates_from_one_point, test_the_docs_example_is_what_the_command_prints and the
    first case of test_every_refusal_of_point_3_is_one_line_with_exit_2."""
    proc = curate_here("plan", *args)
    if check and proc.returncode != 0:
        raise AssertionError(f"curate plan {' '.join(map(str, args))} exited {proc.returncode}\n{proc.stderr[-4000:]}")
    return proc


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
    proc = plan_here(_job(tmp_path), "--calibration", folder, "--nodes", "2", "--cores-per-node", "4",
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
    proc = plan_here(_job(tmp_path), *[x for kv in base.items() for x in kv], check=False)
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1 and message in proc.stderr, proc.stderr


def test_a_stage_missing_from_the_calibration_is_named(tmp_path):
    job = _job(tmp_path, "  - clean: {}\n  - exact_dedup: {}\n  - shuffle: {}\n")
    proc = plan_here(job, "--calibration", _calibration(str(tmp_path / "cal")), "--nodes", "8",
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

    proc = curate("plan", "tests/data/plan/common_crawl.yaml", "--calibration", "tests/data/plan/sweep", "--nodes",
                  "8,64,512", "--cores-per-node", "32", "--memory-per-node", "256GiB", "--link", "25gbit",
                  "--input-size", "10TB", "--partition-size", "128MiB")
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


# --------------------------------------------------------------------------- partition size (app/plan_partitions.py)

MiB = 2**20


def _csv(folder, header, rows):
    """A calibration folder with scaling.csv of ``header`` (comma-separated) and ``rows`` (tuples)."""
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, "scaling.csv"), "w", newline="") as f:
        csv.writer(f).writerows([header.split(","), *rows])
    return str(folder)


@pytest.mark.parametrize("measured", [False, True], ids=["tasks x overhead", "scheduler + client CPU"])
def test_tasks_and_the_head_share_scale_with_the_partition_size(tmp_path, measured):
    # 01-clean: (2 cores, 6 s), (4, 4 s): a = 2, b = 8. The head's share at the calibration's 1 MB
    # partitions: 100 tasks x 1 ms = 0.1 s, or the measured 0.3 + 0.1 = 0.4 s
    header = "workers,stage,seconds,dask_tasks,scheduler_cpu_seconds,client_cpu_seconds,partition_bytes,input_bytes"
    head_cpu = (0.3, 0.1) if measured else ("", "")
    folder = _csv(tmp_path / "cal", header, [(2, "01-clean", 6, 100, *head_cpu, 1e6, 1e8),
                                             (4, "01-clean", 4, 100, *head_cpu, 1e6, 1e8)])
    cal = model.load_calibration(folder, 4)
    assert cal.partition_bytes == 1e6
    head = 0.4 if measured else 0.1
    for size, per_partition in [(None, 1.0), (4e6, 1 / 4), (0.5e6, 2.0)]:
        s = model.PlanSettings(nodes=(2,), cores_per_node=4, memory_per_node=8 * GiB, partition_size=size)
        (p,) = model.plan(cal, ["01-clean"], s, int(1e9), [])["plans"]  # 10x the input, 8 cores
        (q,) = p["stages"]
        assert q["head_seconds"] == pytest.approx(head * 10 * per_partition), size
        assert q["serial_seconds"] == pytest.approx(2 - head + head * 10 * per_partition), size
        assert q["dask_tasks"] == pytest.approx(100 * 10 * per_partition), size
        assert q["parallel_seconds"] == pytest.approx(8 * 10 / 8), size  # the parallel work does not change
        assert q["partition_bytes"] == (size or 1e6)


def test_rows_at_two_partition_sizes_count_their_tasks_at_the_mean_size(tmp_path):
    # 100 tasks at 1 MB partitions and 50 at 2 MB are both 200/3 tasks at the mean 1.5 MB
    folder = _csv(tmp_path / "cal", "workers,stage,seconds,dask_tasks,partition_bytes",
                  [(2, "01-clean", 6, 100, 1e6), (4, "01-clean", 4, 50, 2e6)])
    cal = model.load_calibration(folder, 4)
    assert cal.partition_bytes == 1.5e6
    assert cal.stages["01-clean"].values["dask_tasks"] == pytest.approx(200 / 3)
    assert cal.stages["01-clean"].values["partition_bytes"] == 1.5e6


def test_the_peak_fit_is_the_least_squares_line_of_three_sizes():
    from curate.app.plan_partitions import fit_peak

    points = [(1.0, 10.0), (2.0, 13.0), (4.0, 22.0)]  # by hand: k = Sxy / Sxx = 19 / (42/9) = 57/14, p0 = 15 - k 7/3
    p0, k = fit_peak(points)
    assert (p0, k) == pytest.approx((5.5, 57 / 14))

    def sse(a, b):
        return sum((y - a - b * x) ** 2 for x, y in points)

    grid = [(i * 0.05, j * 0.05) for i in range(0, 221) for j in range(0, 161)]  # p0 0..11, k 0..8
    best = min(grid, key=lambda g: sse(*g))
    assert sse(p0, k) <= sse(*best) + 1e-12
    assert best == pytest.approx((p0, k), abs=0.2)  # the grid's best is the fit's neighbour
    # clamped as fit() clamps: a peak that falls with the size is the mean; a line below 0 goes through 0
    assert fit_peak([(1.0, 9.0), (2.0, 5.0), (4.0, 4.0)]) == pytest.approx((6.0, 0.0))
    assert fit_peak([(1.0, 1.0), (2.0, 5.0)]) == pytest.approx((0.0, 11 / 5))


def test_the_peak_at_another_partition_size_is_read_off_the_fit(tmp_path):
    # the largest peak at each size counts (a repeat at 2 MB peaked lower)
    folder = _csv(tmp_path / "cal", "workers,stage,seconds,peak_worker_bytes,partition_bytes",
                  [(2, "01-clean", 6, 10e6, 1e6), (4, "01-clean", 4, 13e6, 2e6), (4, "01-clean", 4.5, 12e6, 2e6),
                   (4, "01-clean", 4, 22e6, 4e6)])
    cal = model.load_calibration(folder, 4)
    assert cal.stages["01-clean"].peaks == ((1e6, 10e6), (2e6, 13e6), (4e6, 22e6))
    s = model.PlanSettings(nodes=(1,), cores_per_node=4, memory_per_node=8 * GiB, partition_size=8_000_000)
    result = model.plan(cal, ["01-clean"], s, None, [])
    (q,) = result["plans"][0]["stages"]
    assert q["peak_worker_bytes"] == pytest.approx(5.5e6 + 57 / 14 * 8e6)
    assert q["peak_measured_at"] is None and q["peak_fit"]["sizes"] == 3
    assert any("fitted as p0 + k x partition size" in n for n in result["assumptions"])


def test_a_peak_measured_at_one_size_is_kept_and_said_so(tmp_path):
    folder = _csv(tmp_path / "cal", "workers,stage,seconds,dask_tasks,peak_worker_bytes,partition_bytes,input_bytes",
                  [(2, "01-clean", 6, 100, GiB, 64 * MiB, 10**9), (4, "01-clean", 4, 100, GiB, 64 * MiB, 10**9),
                   (2, "02-exact_dedup", 3, 10, 2 * GiB, 64 * MiB, 10**9),
                   (4, "02-exact_dedup", 2, 10, 2 * GiB, 64 * MiB, 10**9)])
    out = tmp_path / "plan.json"
    args = [_job(tmp_path), "--calibration", folder, "--nodes", "2", "--cores-per-node", "4",
            "--memory-per-node", "16GiB", "--input-size", "10GB", "--json", out]
    proc = plan_here(*args, "--partition-size", "256MiB")
    says = ("peak memory per worker of 01-clean, 02-exact_dedup: measured at one partition size only, so its "
            "growth with partition size was not measured and the peak at another size is unknown")
    assert says in proc.stdout
    (p,) = json.loads(out.read_text())["plans"]
    assert [(q["peak_worker_bytes"], q["peak_measured_at"]) for q in p["stages"]] == [(GiB, 64 * MiB),
                                                                                     (2 * GiB, 64 * MiB)]
    assert "1 GiB*" in proc.stdout and "2 GiB*" in proc.stdout
    assert "* a peak measured at partitions of 64 MiB, not at the 256 MiB planned" in proc.stdout
    proc = plan_here(*args)  # at the calibration's own size the peak is the measured one: no mark
    assert says in proc.stdout and "GiB*" not in proc.stdout


def test_without_partition_bytes_the_plan_is_as_before_and_says_the_size_is_unknown(tmp_path):
    out = tmp_path / "plan.json"
    proc = plan_here(_job(tmp_path), "--calibration", _calibration(str(tmp_path / "cal")), "--nodes", "2",
                     "--cores-per-node", "4", "--memory-per-node", "16GiB", "--link", "8gbit", "--input-size", "10MB",
                     "--partition-size", "1GiB", "--json", out)
    assert "partition size: unknown (no calibration row has partition_bytes)" in proc.stdout
    assert "--partition-size is not applied" in proc.stdout
    (p,) = json.loads(out.read_text())["plans"]
    assert p["partition_size"] is None
    for got, want in zip([*p["stages"], p["total"]], _hand(16 * GiB)):  # the hand computation, unchanged
        for key, value in want.items():
            assert got[key] == pytest.approx(value), (got["stage"], key)


def test_the_named_partition_size_matches_the_hand_computation(tmp_path):
    # 01-clean at the calibration's 40 MiB (the mean of 20, 60 and 40, 40 MiB): (2 cores, 6 s), (4, 4 s), so
    # a = 2, b = 8, and 1000 tasks x 1 ms = 1 s of head share. On c cores at partition size S:
    # head = 1 s x r x 40 MiB / S <= parallel = 8 r / c  <=>  S >= 5 MiB x c.
    # 02-exact_dedup has no tasks (never scheduler-bound) and a peak of 1 GiB at 20 MiB, 2 GiB at 60 MiB:
    # peak(S) = 0.5 GiB + 25.6 x S.
    header = "workers,stage,seconds,dask_tasks,peak_worker_bytes,partition_bytes,input_bytes"
    folder = _csv(tmp_path / "cal", header, [
        (2, "01-clean", 6, 1000, "", 40 * MiB, 10**9), (4, "01-clean", 4, 1000, "", 40 * MiB, 10**9),
        (2, "02-exact_dedup", 3, "", GiB, 20 * MiB, 10**9), (4, "02-exact_dedup", 2, "", 2 * GiB, 60 * MiB, 10**9)])
    out = tmp_path / "plan.json"
    # 7 cores a node, 7 workers of 4 GiB each
    proc = plan_here(_job(tmp_path), "--calibration", folder, "--nodes", "1,2,200,1000", "--cores-per-node", "7",
                     "--memory-per-node", "28GiB", "--input-size", "100GB", "--json", out)
    plans = json.loads(out.read_text())["plans"]
    named = [(p["nodes"], p["partition_size"]["bytes"]) for p in plans]
    # 7 cores: 35 MiB -> 40 MiB (the calibration's own size, a candidate); 14: 70 -> 128 MiB; 1,400: 7,000 MiB ->
    # 8 GiB; 7,000 cores: 35,000 MiB, above 16 GiB: none
    assert named == [(1, 40 * MiB), (2, 128 * MiB), (200, 8 * GiB), (1000, None)]
    peaks = [(p["partition_size"]["peak_worker_bytes"], p["partition_size"]["fits"]) for p in plans]
    assert peaks[0] == (pytest.approx(1.5 * GiB), True)
    assert peaks[1] == (pytest.approx(0.5 * GiB + 25.6 * 128 * MiB), True)  # 3.7 GiB of 4
    assert peaks[2] == (pytest.approx(0.5 * GiB + 25.6 * 8 * GiB), False)
    assert peaks[3] == (None, None)
    assert plans[0]["partition_size"]["partitions"] == -(-10**11 // (40 * MiB))
    lines = [line for line in proc.stdout.splitlines() if line.startswith("partition size:")]
    assert lines[0] == ("partition size: 40 MiB is the smallest at which no stage is scheduler-bound (head share <= "
                        "parallel part); a worker's peak there 1.5 GiB, within the 4 GiB per worker")
    assert lines[2].startswith("partition size: 8 GiB is the smallest") and "205.3 GiB, above the 4 GiB" in lines[2]
    assert lines[3] == ("partition size: none from 16 MiB to 16 GiB keeps every stage off the scheduler (a stage's "
                        "head share exceeds its parallel part at each)")


@pytest.mark.parametrize("value, says", [("0", "must be positive"), ("-1MiB", "must be positive"),
                                         ("nan", "must be a size"), ("inf", "must be a size"),
                                         ("1e400", "must be a size"), ("big", "must be a size")])
def test_a_partition_size_that_is_no_size_is_refused(tmp_path, capsys, value, says):
    from curate.app.cli import main

    cal = _calibration(str(tmp_path / "cal"))
    assert main([str(a) for a in _plan_args(tmp_path, cal, f"--partition-size={value}")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"--partition-size {says}" in err, err
    for bad in (0, -1, float("nan"), float("inf")):
        with pytest.raises(model.SettingsError, match="--partition-size must be a positive size"):
            model.PlanSettings(nodes=(1,), cores_per_node=4, memory_per_node=GiB, partition_size=bad)
