"""Strong-scaling benchmark: the Amdahl fit, the summary, and a real (tiny) run."""

import csv
import json

import pytest

from curate.app import bench
from tests.conftest import curate, run_stage, write_jsonl


def test_amdahl_fit_recovers_the_serial_fraction():
    s = 0.1
    speedups = {n: bench.amdahl_speedup(s, n) for n in (1, 2, 4, 8)}
    assert bench.amdahl_fit(speedups) == pytest.approx(s)
    assert bench.amdahl_fit({1: 1.0, 2: 2.0, 4: 4.0}) == pytest.approx(0.0)
    assert bench.amdahl_fit({1: 1.0, 2: 0.5}) == 1.0  # slower with more workers: clipped
    assert bench.amdahl_speedup(0.0, 64) == pytest.approx(64)


def test_summarise_takes_the_best_repeat():
    rows = [
        {"workers": 1, "repeat": 0, "stage": "a", "seconds": 10.0},
        {"workers": 1, "repeat": 1, "stage": "a", "seconds": 12.0},
        {"workers": 2, "repeat": 0, "stage": "a", "seconds": 6.0},
        {"workers": 2, "repeat": 1, "stage": "a", "seconds": 5.5},
    ]
    s = bench.summarise(rows)["a"]
    assert s["seconds"] == {1: 10.0, 2: 5.5}
    assert s["speedup"][2] == pytest.approx(10 / 5.5, abs=1e-3)
    assert s["efficiency"][2] == pytest.approx(10 / 5.5 / 2, abs=1e-3)
    assert set(s["predicted_speedup"]) == {64, 256, 1024}


def test_record_appends_stage_rows(tmp_path):
    src = write_jsonl(tmp_path / "in.jsonl", [{"text": "a  b"}] * 3)
    run_stage("normalize", {}, src, tmp_path / "job" / "01-normalize")
    target = tmp_path / "scaling.csv"
    for nodes in (1, 2):
        curate("bench", "record", tmp_path / "job", "--csv", target, "--label", f"nodes={nodes}")
    rows = list(csv.DictReader(target.open()))
    assert [(r["nodes"], r["stage"]) for r in rows] == [
        ("1", "01-normalize"), ("1", "total"), ("2", "01-normalize"), ("2", "total")]


@pytest.mark.slow
def test_scaling_run_writes_csv_json_png(tmp_path):
    for f in range(4):
        write_jsonl(tmp_path / "data" / f"{f}.jsonl", [{"text": f"doc  {i}"} for i in range(200)])
    job = tmp_path / "job.yaml"
    job.write_text(f"input: {tmp_path / 'data' / '*.jsonl'}\nstages: [normalize]\n")
    out = tmp_path / "scaling"
    proc = curate("bench", "scaling", job, "--workers", "1,2", "--repeat", "1", "--output", out)
    assert "S(1024)" in proc.stdout and "Amdahl" in proc.stdout
    result = json.loads((out / "scaling.json").read_text())
    assert set(result["stages"]) == {"01-normalize", "total"}
    assert set(result["stages"]["total"]["seconds"]) == {"1", "2"}
    assert (out / "scaling.png").stat().st_size > 10_000
    rows = list(csv.DictReader((out / "scaling.csv").open()))
    assert {r["workers"] for r in rows} == {"1", "2"}
