"""Relative paths in a job file (issue 43, point 3): taken from the folder curate runs in; a path missing
there but present beside the job file is named in the error, with both places."""

import os
import subprocess

from tests.conftest import CURATE, ROOT


def test_a_chain_beside_the_job_file_is_named_with_where_curate_looked(tmp_path):
    jobs = tmp_path / "jobs"
    jobs.mkdir()
    (jobs / "chain.yaml").write_text("filters:\n  - {filter: word_count, min: 1}\n")
    (tmp_path / "in.jsonl").write_text('{"text": "a few words here"}\n')
    (jobs / "job.yaml").write_text(f"input: {tmp_path / 'in.jsonl'}\noutput: {tmp_path / 'out'}\n"
                                   "stages:\n  - filter: {config: chain.yaml}\n")
    proc = subprocess.run([*CURATE, "run", str(jobs / "job.yaml"), "--dry-run"], cwd=tmp_path, capture_output=True,
                          text=True, timeout=120, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert proc.returncode == 2
    err = proc.stderr.strip()
    assert err.startswith("curate: error:") and "\n" not in err, err
    assert "filter config chain.yaml: no such file" in err
    assert f"taken from the folder curate runs in, {tmp_path}" in err
    assert f"write '{jobs / 'chain.yaml'}', or run curate from {jobs}" in err
    # from the job's folder the same job runs
    proc = subprocess.run([*CURATE, "run", "job.yaml", "--dry-run"], cwd=jobs, capture_output=True, text=True,
                          timeout=120, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert proc.returncode == 0, proc.stderr


def test_an_input_glob_beside_the_job_file_is_named(tmp_path):
    jobs = tmp_path / "jobs"
    (jobs / "data").mkdir(parents=True)
    (jobs / "data" / "a.jsonl").write_text('{"text": "x"}\n')
    (jobs / "job.yaml").write_text(f"input: data/*.jsonl\noutput: {tmp_path / 'out'}\nstages:\n  - clean: {{}}\n")
    proc = subprocess.run([*CURATE, "run", str(jobs / "job.yaml"), "--dry-run"], cwd=tmp_path, capture_output=True,
                          text=True, timeout=120, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert proc.returncode == 2
    assert "'data/*.jsonl' is beside the job file" in proc.stderr, proc.stderr
