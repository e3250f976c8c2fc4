"""app/scaling.py: the summary of a node sweep, checked against a computation by hand."""

from __future__ import annotations

import json
import subprocess

import pytest
import yaml

from curate.app import scaling
from tests.conftest import CURATE, ROOT

# as slurm/strong_scaling.sbatch writes them (via curate bench record), plus a column of the future
HEADER = "nodes,tasks,workers,repeat,scaling,exit_code,stage,seconds,docs_in,docs_out,extra"


def row(nodes, seconds, stage="total", mode="strong", rc=0, repeat=0):
    return f"{nodes},{2 + nodes},{nodes},{repeat},{mode},{rc},{stage},{seconds},100,90,x"


def sweep_csv(tmp_path):
    lines = [HEADER,
             # strong: medians 10 (1 node), 6 (2 nodes: 5, 6, 9), 4.5 (4 nodes: 4.4, 4.5, 30)
             row(1, 10), row(2, 5), row(2, 6, repeat=1), row(2, 9, repeat=2),
             row(4, 4.4), row(4, 4.5, repeat=1), row(4, 30, repeat=2),
             row(4, 1, rc=1, repeat=3),  # a failed run does not count
             row(1, 3, stage="01-clean"), row(2, 1.5, stage="01-clean"),
             # weak: 10, 10.5, 12 -> 1.0, 1.05, 1.2
             row(1, 10, mode="weak"), row(2, 10.5, mode="weak"), row(4, 12, mode="weak")]
    (tmp_path / "scaling.csv").write_text("\n".join(lines) + "\n")
    return tmp_path / "scaling.csv"


def test_strong_scaling_by_hand(tmp_path):
    summary = scaling.summarise(scaling.read_csv(str(sweep_csv(tmp_path))))
    total = summary["strong"]["total"]
    assert total["seconds"] == {1: 10, 2: 6, 4: 4.5}
    # speedup 1, 10/6, 10/4.5; y = 1/S - 1/n: 0.1 (n=2), 0.2 (n=4); x = 1 - 1/n: 0.5, 0.75
    # s = (0.1*0.5 + 0.2*0.75) / (0.5^2 + 0.75^2) = 0.2 / 0.8125 = 0.246154
    assert total["speedup"] == {1: 1.0, 2: pytest.approx(1.667), 4: pytest.approx(2.222)}
    assert total["efficiency"] == {1: 1.0, 2: pytest.approx(0.833), 4: pytest.approx(0.556)}
    assert total["serial_fraction"] == pytest.approx(0.2 / 0.8125, abs=1e-4)
    # predicted 10 (s + (1-s)/n): 6.2308 at 2 nodes, 4.3462 at 4; residual predicted/measured - 1
    assert total["predicted_seconds"] == {1: 10.0, 2: pytest.approx(6.231), 4: pytest.approx(4.346)}
    assert total["residual"] == {1: 0.0, 2: pytest.approx(0.0385, abs=1e-4), 4: pytest.approx(-0.0342, abs=1e-4)}
    # a perfectly parallel stage: s = 0, no residual
    clean = summary["strong"]["01-clean"]
    assert clean["serial_fraction"] == 0.0 and clean["residual"] == {1: 0.0, 2: 0.0}
    assert summary["runs"] == {"strong": 8, "weak": 3}


def test_weak_scaling_by_hand(tmp_path):
    weak = scaling.summarise(scaling.read_csv(str(sweep_csv(tmp_path))))["weak"]["total"]
    assert weak["relative"] == {1: 1.0, 2: 1.05, 4: 1.2}
    assert weak["within_target"] == {1: True, 2: True, 4: False}


def test_speedup_from_a_smallest_count_above_one():
    # n0 = 2: one node's time is taken as 2 x 8 = 16
    s = scaling.strong({2: 8.0, 4: 4.0})
    assert s["speedup"] == {2: 2.0, 4: 4.0} and s["serial_fraction"] == 0.0


def test_summarise_command_and_weak_job(tmp_path):
    sweep_csv(tmp_path)
    proc = subprocess.run([*CURATE, "bench", "summarise", str(tmp_path)], cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert "serial 0.246" in proc.stdout and "1.20!" in proc.stdout, proc.stdout
    summary = json.loads((tmp_path / "scaling.json").read_text())
    assert summary["strong"]["total"]["residual"]["4"] == pytest.approx(-0.0342, abs=1e-4)
    assert (tmp_path / "scaling.png").stat().st_size > 0

    for i in range(5):
        (tmp_path / f"in-{i}.jsonl").write_text('{"text": "x"}\n')
    job = tmp_path / "job.yaml"
    job.write_text(f"input: {tmp_path}/in-*.jsonl\nstages: [normalize, {{clean: {{}}}}]\n")
    proc = subprocess.run([*CURATE, "bench", "weak-job", str(job), "--files", "3", "--output", str(tmp_path / "w.yaml")],
                          cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    doc = yaml.safe_load((tmp_path / "w.yaml").read_text())
    assert doc["input"] == [str(tmp_path / f"in-{i}.jsonl") for i in range(3)]
    assert doc["stages"] == ["normalize", {"clean": {}}]
    proc = subprocess.run([*CURATE, "bench", "weak-job", str(job), "--files", "9", "--output", str(tmp_path / "x.yaml")],
                          cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode == 2 and "needs 9 input files" in proc.stderr, proc.stderr
