"""The Dask dashboard answers while a job runs; the performance report lands under _reports/."""

import socket
import subprocess
import time
import urllib.request

import pytest

from tests.conftest import CURATE, ROOT, write_jsonl


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow
def test_dashboard_status_page_while_a_job_runs(tmp_path):
    for f in range(6):
        write_jsonl(tmp_path / "data" / f"{f}.jsonl", [{"text": f"doc  {f} {i} " * 20} for i in range(30000)])
    job = tmp_path / "job.yaml"
    job.write_text(f"input: {tmp_path / 'data' / '*.jsonl'}\nstages: [normalize, normalize]\n")
    port = free_port()
    proc = subprocess.Popen([*CURATE, "run", str(job), "--output", str(tmp_path / "out"), "--workers", "2",
                             "--dashboard-address", f"127.0.0.1:{port}"],
                            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    status = None
    deadline = time.time() + 120
    while proc.poll() is None and time.time() < deadline and status != 200:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/status", timeout=5) as r:
                status = r.status
        except OSError:
            time.sleep(0.1)
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err[-3000:]
    assert status == 200, "the dashboard never answered while the job ran"
    assert f"dashboard at http://127.0.0.1:{port}/status" in err
    reports = {p.name: p for p in (tmp_path / "out" / "_reports").glob("*.html")}
    performance = [p for name, p in reports.items() if name.endswith("-run.html")]
    assert performance and performance[0].stat().st_size > 10_000  # Dask's performance report
    assert "<svg" in reports["report.html"].read_text()  # curate's page of the run, its charts inline SVG
