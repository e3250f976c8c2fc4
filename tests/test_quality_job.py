"""jobs/quality_buckets.yaml end to end, as the README runs it: two classifiers trained on the sample,
then extract -> clean -> tag -> bucket -> select -> blend by bucket, in a scratch folder (the models and
the output never land in the checkout)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.conftest import ROOT


@pytest.mark.slow
def test_the_quality_buckets_job(tmp_path):
    (tmp_path / "jobs").mkdir()
    for name in ("data", "filters", "quality_buckets.yaml"):
        os.symlink(ROOT / "jobs" / name, tmp_path / "jobs" / name)
    subprocess.run([sys.executable, str(ROOT / "jobs" / "data" / "make_quality_models.py"), "--output",
                    str(tmp_path / "jobs" / "models")], check=True, capture_output=True, timeout=600)
    proc = subprocess.run([sys.executable, "-m", "curate", "run", "jobs/quality_buckets.yaml", "--output", "out"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=600,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = tmp_path / "out"

    def manifest(folder):
        return json.loads((out / folder / "_manifest.json").read_text())

    tag = manifest("03-tag")
    assert tag["counts"]["dropped"] == {} and tag["counts"]["out"] == manifest("02-clean")["counts"]["out"]
    buckets = manifest("04-bucket")["bucket"]
    assert sorted(buckets["cuts"]) == ["score_prose", "score_tutorial"] and set(buckets["counts"]) <= set("01234")
    assert sum(buckets["counts"].values()) == tag["counts"]["out"]
    select = manifest("05-select")["counts"]
    assert select["in"] - select["out"] == select["dropped"].get("select", 0)
    assert sum(select["details"]["select"].values()) == select["dropped"]["select"]
    values = manifest("06-blend")["blend"]["values"]
    assert values["4"]["documents"] == 2 * values["4"]["available"]
    assert "0" not in values  # bucket 0 was selected out
    verify = subprocess.run([sys.executable, "-m", "curate", "verify", "out"], cwd=tmp_path, capture_output=True,
                            text=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert verify.returncode == 0, verify.stdout + verify.stderr
