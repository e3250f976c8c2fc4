"""Strong-scaling benchmark: the Amdahl fit, the summary, and a real (tiny) run."""

import csv
import json
import os

import pytest

from curate.app import bench
from tests.conftest import curate, curate_here, run_stage, write_jsonl


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
    for nodes in (1, 2):  # the first in a real process, the appending one through cli.main here
        args = ("bench", "record", tmp_path / "job", "--csv", target, "--label", f"nodes={nodes}")
        if nodes == 1:
            curate(*args)
        else:
            assert curate_here(*args).returncode == 0
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


# --------------------------------------------------------------------------- record's refusals (issue 47, point 5)


@pytest.fixture
def finished(tmp_path):
    src = write_jsonl(tmp_path / "in.jsonl", [{"text": "a  b"}] * 3)
    run_stage("normalize", {}, src, tmp_path / "job" / "01-normalize")
    return tmp_path / "job"


def record(job, target, label, capsys) -> tuple[int, str]:
    from curate.app.cli import main

    code = main(["bench", "record", str(job), "--csv", str(target), "--label", label])
    return code, capsys.readouterr().err.strip()


def test_record_refuses_a_csv_with_another_header(finished, tmp_path, capsys):
    target = tmp_path / "scaling.csv"
    target.write_text("nodes,tasks,stage,seconds\r\n1,4,01-normalize,1.5\r\n")
    before = target.read_bytes()
    code, err = record(finished, target, "nodes=2", capsys)
    assert code == 2 and err.startswith(f"curate: error: --csv {target}: its header is nodes,tasks,stage,seconds, "
                                        "but these rows are nodes,stage,seconds,") and "\n" not in err, err
    assert target.read_bytes() == before
    # the labels it was started with append as before
    assert record(finished, tmp_path / "new.csv", "nodes=1", capsys)[0] == 0
    assert record(finished, tmp_path / "new.csv", "nodes=2", capsys)[0] == 0


@pytest.mark.parametrize("missing", [("partition_bytes",), ("client_cpu_seconds", "partition_bytes")],
                         ids=["before partition_bytes", "before client_cpu_seconds"])
def test_record_refuses_a_csv_from_before_a_column(finished, tmp_path, capsys, missing):
    target = tmp_path / "scaling.csv"
    assert record(finished, target, "nodes=1", capsys)[0] == 0
    rows = list(csv.reader(target.open(newline="")))
    assert rows[0][-2:] == ["client_cpu_seconds", "partition_bytes"]
    with target.open("w", newline="") as f:  # what an older curate wrote: every row short of the last column(s)
        csv.writer(f).writerows(r[:-len(missing)] for r in rows)
    before = target.read_bytes()
    code, err = record(finished, target, "nodes=2", capsys)
    assert code == 2 and "\n" not in err, err
    assert err == (f"curate: error: --csv {target}: written before curate bench record had the column(s) "
                   f"{', '.join(missing)}; start a new CSV (its rows and these cannot share one header)")
    assert target.read_bytes() == before


def test_record_writes_the_mean_input_partition_size(finished, tmp_path, capsys):
    """partition_bytes = the job's input bytes / the first stage's manifest partitions, on every row."""
    from curate.app.run_folders import manifest_file

    path = manifest_file(str(finished / "01-normalize"))
    manifest = json.loads(open(path).read())
    assert manifest["partitions"] >= 1
    # a second stage with another partition count: not the one the input's partitions are read from
    second = finished / "02-clean"
    os.makedirs(os.path.dirname(manifest_file(str(second))), exist_ok=True)
    with open(manifest_file(str(second)), "w") as f:
        json.dump({**manifest, "partitions": 7}, f)
    with open(path, "w") as f:
        json.dump({**manifest, "partitions": 3}, f)
    os.makedirs(finished / "_reports")
    (finished / "_reports" / "resources.json").write_text(json.dumps({"input_bytes": 1000, "stages": {}}))
    assert record(finished, tmp_path / "scaling.csv", "nodes=1", capsys)[0] == 0
    rows = list(csv.DictReader((tmp_path / "scaling.csv").open()))
    assert list(rows[0])[-1] == "partition_bytes"
    assert [(r["stage"], r["input_bytes"], r["partition_bytes"]) for r in rows] == [
        ("01-normalize", "1000", "333"), ("02-clean", "1000", "333"), ("total", "1000", "333")]
    # unknown input bytes, or a manifest without partitions: empty
    (finished / "_reports" / "resources.json").write_text(json.dumps({"stages": {}}))
    assert {r["partition_bytes"] for r in bench.record_rows(str(finished), {})} == {""}
    (finished / "_reports" / "resources.json").write_text(json.dumps({"input_bytes": 1000, "stages": {}}))
    with open(path, "w") as f:
        json.dump({k: v for k, v in manifest.items() if k != "partitions"}, f)
    assert {r["partition_bytes"] for r in bench.record_rows(str(finished), {})} == {""}


@pytest.mark.parametrize("label,says", [
    ("nodes=1,seconds=3", "--label seconds=3: 'seconds' is a column curate bench record measures"),
    ("stage=x", "--label stage=x: 'stage' is a column"),
    ("nodes=1,nodes=2", "--label nodes: given twice (nodes=1, nodes=2)"),
], ids=["seconds", "stage", "twice"])
def test_record_refuses_labels_it_would_drop(finished, tmp_path, capsys, label, says):
    code, err = record(finished, tmp_path / "scaling.csv", label, capsys)
    assert code == 2 and err.startswith(f"curate: error: {says}") and "\n" not in err, err
    assert not (tmp_path / "scaling.csv").exists()


@pytest.mark.parametrize("column,value", [("cpu_seconds", float("nan")), ("peak_worker_bytes", -5),
                                          ("client_cpu_seconds", float("inf")), ("input_bytes", -1)])
def test_record_refuses_a_measurement_that_is_not_one(finished, tmp_path, capsys, column, value):
    from curate.app import resources

    doc = {"input_bytes": 100, "stages": {"01-normalize": {"cpu_seconds": 1.5}}}
    if column == "input_bytes":
        doc[column] = value
    else:
        doc["stages"]["01-normalize"][column] = value
    os.makedirs(finished / "_reports")
    (finished / "_reports" / "resources.json").write_text(json.dumps(doc))  # NaN and Infinity as json writes them
    code, err = record(finished, tmp_path / "scaling.csv", "nodes=1", capsys)
    where = column if column == "input_bytes" else f"stages.01-normalize.{column}"
    assert code == 1 and err.startswith(f"curate: error: {resources.path_of(str(finished))}: {where}: "), err
    assert "not a measurement" in err and "\n" not in err
    assert not (tmp_path / "scaling.csv").exists()
