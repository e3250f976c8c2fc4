"""One-line messages a newcomer meets (issue 43, point 9)."""

from __future__ import annotations

import subprocess

from curate.app.cli import main
from tests.conftest import CURATE, ROOT


def test_dry_run_on_a_stage_command_is_one_prefix_and_a_hint(tmp_path, capsys):
    assert main(["clean", "--input", str(tmp_path), "--output", str(tmp_path / "o"), "--dry-run"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == "curate: error: unrecognized arguments: --dry-run (--dry-run checks a job: curate run JOB --dry-run)"


def test_curate_filters_shows_each_description_whole():
    out = subprocess.run([*CURATE, "filters"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    line = next(x for x in out.splitlines() if x.startswith("boilerplate_strings"))
    assert line.rstrip().endswith("a document without any text scores 1.0.")
