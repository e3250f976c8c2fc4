"""How ``curate`` ends: without the interpreter's teardown, but with everything a normal exit does
(non-daemon threads joined, exit handlers run, output flushed), and a local cluster stopped with no
worker killed."""

import json
import subprocess
import sys

from tests.conftest import CURATE, ROOT

PROGRAM = """
import atexit, sys, threading, time
out = sys.argv[1]
atexit.register(lambda: open(out + ".atexit", "w").write("ran"))
def late():
    time.sleep(0.3)
    open(out + ".thread", "w").write("ran")
threading.Thread(target=late).start()  # non-daemon: a normal exit waits for it
sys.argv = ["curate", "stages"]
from curate.app.cli import main
main()
raise SystemExit("main() returned: the process should have ended in it")
"""


def test_the_command_ends_as_a_normal_exit_would(tmp_path):
    out = tmp_path / "marker"
    proc = subprocess.run([sys.executable, "-c", PROGRAM, str(out)], cwd=ROOT, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "fuzzy_dedup" in proc.stdout  # a pipe's buffered output is flushed before the process ends
    assert (tmp_path / "marker.atexit").read_text() == "ran"
    assert (tmp_path / "marker.thread").read_text() == "ran"


def test_error_exit_code_is_kept():
    proc = subprocess.run([*CURATE, "verify", "/nonexistent/tokens"], cwd=ROOT, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode not in (0, None) and proc.stderr.startswith("curate: error:"), proc.stderr


def test_a_local_cluster_stops_with_no_worker_killed(tmp_path):
    data = tmp_path / "in.jsonl"
    data.write_text("".join(json.dumps({"id": str(i), "text": f"document {i} of a few words"}) + "\n"
                            for i in range(40)))
    job = tmp_path / "job.yaml"
    job.write_text(f"input: {data}\noutput: {tmp_path / 'out'}\nstages:\n  - clean: {{}}\n")
    proc = subprocess.run([*CURATE, "run", str(job), "--cluster", "local", "--workers", "2"], cwd=ROOT,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    for sign in ("still alive", "killing", "Traceback", "did not stop in time"):
        assert sign not in proc.stderr, proc.stderr[-3000:]
    assert "curate: output in" in proc.stderr + proc.stdout
