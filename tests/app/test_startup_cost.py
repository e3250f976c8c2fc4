"""What a small run does not import (issue 42): a tokenize that runs in threads (no cluster) must not pay
for distributed, Bokeh or dask.dataframe (with dask.array and scipy.fft), nor for transformers when the
tokenizer directory's tokenizer.json is read by ``tokenizers`` alone. Each of these was a tenth to a
third of a 1,000-document run's CPU time. Checked in a fresh process, from ``sys.modules`` after the
command returned."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.conftest import ROOT
from tests.modules.tokenize.helpers import make_bpe_dir

#: imported by a run that needs a cluster, a shuffle or a transformers tokenizer; a threads tokenize needs none
HEAVY = ("distributed", "bokeh", "dask.dataframe", "dask.array", "scipy", "transformers", "matplotlib")

PROGRAM = """
import json, sys
from curate.app.cli import _main
code = _main(json.loads(sys.argv[1]))
print(json.dumps({"code": code, "heavy": [m for m in json.loads(sys.argv[2]) if m in sys.modules]}))
"""


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    folder = tmp_path_factory.mktemp("startup")
    docs = folder / "docs.jsonl"
    docs.write_text("".join(json.dumps({"id": f"d{i}", "text": f"document {i} of a small run"}) + "\n"
                            for i in range(20)))
    return folder, str(docs), make_bpe_dir(folder / "tok")


def _imports(argv) -> list[str]:
    proc = subprocess.run([sys.executable, "-c", PROGRAM, json.dumps(argv), json.dumps(HEAVY)], cwd=ROOT,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["code"] == 0, proc.stderr[-2000:]
    return result["heavy"]


@pytest.mark.parametrize("cluster", [[], ["--cluster", "threads"]], ids=["auto", "threads"])
def test_a_small_tokenize_imports_no_cluster_nor_dataframe(small, cluster):
    folder, docs, tok = small
    out = folder / f"out-{len(cluster)}"
    assert _imports(["--log-level", "WARNING", "tokenize", "--input", docs, "--output", str(out),
                     "--tokenizer", tok, *cluster]) == []
    assert (out / "part_00000.bin").stat().st_size > 0


def test_a_one_stage_tokenize_job_imports_none_either(small):
    folder, docs, tok = small
    job = folder / "job.yaml"
    job.write_text(f"name: t\ninput: {docs}\nstages:\n  - tokenize: {{tokenizer: {tok}}}\n")
    # but Bokeh: a job's _reports/report.html draws its charts with it
    assert _imports(["--log-level", "WARNING", "run", str(job), "--output", str(folder / "job-out")]) == ["bokeh"]
    assert (folder / "job-out" / "_reports" / "report.html").exists()
