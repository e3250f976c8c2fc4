"""The documentation's runnable parts: the notebook-style example executes as a script."""

from __future__ import annotations

import subprocess
import sys

from tests.conftest import ROOT


def test_the_notebook_example_runs(tmp_path):
    proc = subprocess.run([sys.executable, str(ROOT / "docs" / "examples" / "notebook.py"), str(tmp_path)],
                          cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "done:" in proc.stdout
    assert (tmp_path / "out" / "05-tokenize" / "_SUCCESS").exists()
