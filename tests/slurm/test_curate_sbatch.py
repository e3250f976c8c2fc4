"""slurm/curate.sbatch on a real one-node SLURM cluster (slurmctld + slurmd on localhost)."""

import os
import subprocess
import sys

import pytest

from tests.conftest import ROOT
from tests.slurm.cluster import LocalSlurm


@pytest.fixture(scope="module")
def slurm(tmp_path_factory):
    if os.geteuid() != 0:
        pytest.skip("the local SLURM cluster needs root (slurmd starts jobs as their user); not root here")
    cluster = LocalSlurm(tmp_path_factory.mktemp("slurm")).start()
    yield cluster
    cluster.stop()


def last_stage(out):
    return sorted(p for p in out.iterdir() if p.is_dir() and p.name[:2].isdigit())[-1]


@pytest.mark.slow
def test_sample_job_through_sbatch_passes_verify(slurm, tmp_path):
    out, log = tmp_path / "out", tmp_path / "job.log"
    submitted = subprocess.run(
        ["sbatch", "--parsable", "-n", "4", "--overcommit", f"--output={log}", "slurm/curate.sbatch",
         "jobs/sample.yaml", str(out)],
        cwd=ROOT, env=slurm.env, capture_output=True, text=True, check=True)
    job_id = submitted.stdout.strip().split(";")[0]
    state = slurm.wait(job_id, timeout=900)
    text = log.read_text()
    assert state["JobState"] == "COMPLETED" and state["ExitCode"] == "0:0", f"{state}\n{text[-4000:]}"
    assert "ssh -N -L 8787:" in text and "dashboard" in text
    assert "Traceback" not in text
    final = last_stage(out)
    assert (final / "_SUCCESS").exists()
    if final.name.endswith("tokenize"):
        verify = subprocess.run([sys.executable, "-m", "app.cli", "verify", str(final)], cwd=ROOT,
                                capture_output=True, text=True)
        assert verify.returncode == 0, verify.stdout + verify.stderr


@pytest.mark.slow
def test_failing_job_gives_the_pipeline_exit_code(slurm, tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"text": "fine"}\nnot json\n')
    job = tmp_path / "job.yaml"
    job.write_text(f"input: {bad}\nstages: [normalize]\n")
    log = tmp_path / "job.log"
    submitted = subprocess.run(
        ["sbatch", "--parsable", "-n", "3", "--overcommit", f"--output={log}", "slurm/curate.sbatch",
         str(job), str(tmp_path / "out")],
        cwd=ROOT, env=slurm.env, capture_output=True, text=True, check=True)
    state = slurm.wait(submitted.stdout.strip().split(";")[0], timeout=600)
    text = log.read_text()
    assert state["JobState"] == "FAILED" and state["ExitCode"] == "1:0", f"{state}\n{text[-3000:]}"
    assert "bad.jsonl line 2: invalid_json" in text


@pytest.mark.slow
def test_strong_scaling_script_appends_to_one_csv(slurm, tmp_path):
    out, log = tmp_path / "scaling", tmp_path / "scaling.log"
    submitted = subprocess.run(
        ["sbatch", "--parsable", "-n", "3", "--overcommit", f"--output={log}", "slurm/strong_scaling.sbatch",
         "jobs/sample.yaml", str(out)],
        cwd=ROOT, env=slurm.env, capture_output=True, text=True, check=True)
    state = slurm.wait(submitted.stdout.strip().split(";")[0], timeout=900)
    text = log.read_text()
    assert state["ExitCode"] == "0:0", f"{state}\n{text[-4000:]}"
    rows = (out / "scaling.csv").read_text().splitlines()
    assert rows[0] == "nodes,tasks,workers,exit_code,stage,seconds,docs_in,docs_out"
    assert rows[-1].startswith("1,3,1,0,total,")
