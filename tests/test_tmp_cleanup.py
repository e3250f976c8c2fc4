"""The suite cleans up after itself (issue 43, point 11): a run leaves nothing in the temporary folder
but pytest's own folders, and in those nothing of a passing test."""

import os
import subprocess
import sys

from tests.conftest import ROOT

LEAKY = '''
import subprocess, sys, tempfile

def test_leaves_files_behind(tmp_path):
    (tmp_path / "big").write_bytes(b"x" * 1000)
    tempfile.mkdtemp(prefix="leak-")  # what Dask's scratch space or a browser does
    subprocess.run([sys.executable, "-c", "import tempfile; tempfile.mkdtemp(prefix='child-leak-')"], check=True)
'''


def test_a_passing_run_leaves_nothing_behind(tmp_path):
    outer = tmp_path / "tmp"
    outer.mkdir()
    test_file = ROOT / "tests" / "_leaky_probe_test.py"  # under tests/: the suite's conftest applies
    test_file.write_text(LEAKY)
    try:
        env = {k: v for k, v in os.environ.items() if k not in ("CURATE_TEST_TMPDIR", "PYTEST_DEBUG_TEMPROOT")}
        env["TMPDIR"] = str(outer)
        proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(test_file)],
                              cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    finally:
        test_file.unlink()
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    left = [os.path.relpath(os.path.join(d, n), outer) for d, dirs, files in os.walk(outer) for n in files]
    assert left == [], left
    assert all(n.startswith("pytest-of-") for n in os.listdir(outer)), os.listdir(outer)
