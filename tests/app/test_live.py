"""The live curate page on the Dask dashboard (``/curate``): what the client publishes, the page on a
scheduler you started yourself, and the page in headless Chromium while ``curate run`` works."""

import json
import subprocess
import sys
import time
import urllib.request

import pytest

from curate.app import live
from tests.app.test_dashboard import free_port
from tests.conftest import CURATE, ROOT, write_jsonl


class FakeFuture:
    def __init__(self, key, result=None, status="finished"):
        self.key, self._result, self.status = key, result, status

    def add_done_callback(self, fn):
        self.callback = fn

    def result(self, timeout=None):
        return self._result


class FakeClient:
    dashboard_link = "http://127.0.0.1:1/status"

    def __init__(self):
        self.published = []

    def register_plugin(self, plugin):
        self.plugin = plugin

    def set_metadata(self, key, value):
        self.published.append((key, value))

    def gather(self, futures, errors="raise"):
        self.gathers = getattr(self, "gathers", 0) + 1
        return [f.result() for f in futures if f.status == "finished"]


def test_tracker_counts_partitions_documents_and_drops():
    """Edge cases: a future that is not the writer's (counted as a partition only), an erred one."""
    client = FakeClient()
    t = live.Tracker(client, publish_every=0)
    t.job("job.yaml", "/out", [("clean", "01-clean"), ("filter", "02-filter")])
    t.stage_finished(0, {"counts": {"in": 10, "out": 9, "dropped": {"empty_after_clean": 1}}}, False, 1.5)
    t.stage_started(1)
    futures = [FakeFuture(("read_parquet-filter-write-" + "0" * 32, 0), {"in": 5, "out": 3, "dropped": {"word_count": 2}}),
               FakeFuture(("read_parquet-filter-write-" + "0" * 32, 1), {"in": 4, "out": 4, "dropped": {}}),
               FakeFuture("merge_samples-abc", {"in": 1000}),  # not a partition's counts
               FakeFuture(("read_parquet-filter-write-" + "0" * 32, 2), None, status="error")]
    t.watch(futures)
    for f in futures[:3]:
        f.callback(f)
    assert t.state["progress"]["partitions_done"] == 3 and t.state["progress"]["documents"] == 0
    t._fetch_pending()  # the writes' counts: fetched together, in one gather
    assert client.gathers == 1
    p = t.state["progress"]
    assert (p["partitions_done"], p["partitions_total"], p["documents"]) == (3, 4, 9)
    assert live.dropped_so_far(t.state) == {"empty_after_clean": 1, "word_count": 2}
    t._publish()
    key, state = client.published[-1]
    assert key == live.METADATA_KEY and state["current"] == 1 and state["stages"][1]["status"] == "running"
    json.dumps(state)  # plain values only: the scheduler stores it as metadata
    html = live._progress_html(state) + live._table_html(state)
    assert "02-filter" in html and "3 / 4" in html and "word_count 2" in html and "empty_after_clean 1" in html


@pytest.mark.slow
def test_page_on_an_attached_scheduler(tmp_path):
    """A scheduler started with ``dask scheduler``: the page is added by the plugin the client registers."""
    from distributed import Client

    port = free_port()
    sched_file = tmp_path / "scheduler.json"
    scheduler = subprocess.Popen([sys.executable, "-m", "distributed.cli.dask_scheduler", "--scheduler-file",
                                  str(sched_file), "--host", "127.0.0.1", "--dashboard-address", f"127.0.0.1:{port}"],
                                 cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.time() + 60
        while not sched_file.exists():
            assert time.time() < deadline, "scheduler did not start"
            time.sleep(0.1)
        with Client(scheduler_file=str(sched_file), timeout="30s") as client:
            tracker = live.Tracker(client).start()
            tracker.job("attached.yaml", "/out", [("clean", "01-clean")])
            tracker.stage_started(0)
            tracker.close()
            assert tracker.url == f"http://127.0.0.1:{port}/curate"
            with urllib.request.urlopen(tracker.url, timeout=30) as r:
                body = r.read().decode()
            assert r.status == 200 and "Bokeh" in body and "<title>curate</title>" in body
            assert client.get_metadata(live.METADATA_KEY)["stages"][0]["status"] == "running"
            live.Tracker(client).start().close()  # registering twice keeps one page
            with urllib.request.urlopen(tracker.url, timeout=30) as r:
                assert r.status == 200
    finally:
        scheduler.terminate()
        scheduler.wait(timeout=30)


@pytest.mark.slow
def test_live_page_in_chromium_during_a_run(tmp_path):
    """``curate run`` on a local cluster: the page shows the stages, the running stage's partitions and
    documents, and the drops so far; no JavaScript errors; the run ends with its HTML report."""
    from tests.browser import Browser

    reason = Browser.skip_reason()
    if reason:
        pytest.skip(reason)
    for f in range(4):  # one in seven documents has 49 words, below the filter's minimum of 50
        write_jsonl(tmp_path / "data" / f"{f}.jsonl",
                    [{"text": "word " * (47 if i % 7 == 0 else 60) + f"{f} {i}"} for i in range(6000)])
    (tmp_path / "chain.yaml").write_text("filters:\n  - {filter: word_count, min: 50}\n")
    job = tmp_path / "job.yaml"
    # stages long enough for the page to be read during each, on a fast machine too (at 3,000 documents a
    # file the drops once came and went between two reads in the whole suite)
    job.write_text(f"input: {tmp_path / 'data' / '*.jsonl'}\nio: {{blocksize: 256KiB}}\n"
                   f"stages: [normalize, {{filter: {{config: {tmp_path / 'chain.yaml'}}}}}, normalize]\n")
    port = free_port()
    out = tmp_path / "out"
    with Browser(1000, 800) as b:
        proc = subprocess.Popen([*CURATE, "run", str(job), "--output", str(out), "--workers", "2",
                                 "--dashboard-address", f"127.0.0.1:{port}"],
                                cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        seen, shots, errors = set(), 0, []
        try:
            deadline = time.time() + 180
            opened = False
            while proc.poll() is None and time.time() < deadline:
                if not opened:
                    try:
                        urllib.request.urlopen(f"http://127.0.0.1:{port}/curate", timeout=5).close()
                    except OSError:
                        time.sleep(0.2)
                        continue
                    b.open(f"http://127.0.0.1:{port}/curate")
                    opened = True
                text = b.text()
                if "running" in text and "02-filter" in text:
                    seen.add("filter running")
                if "word_count" in text:
                    seen.add("drops")
                if "partitions" in text and "documents" in text:
                    seen.add("progress")
                if shots < 3 and "running" in text:
                    b.screenshot(tmp_path / f"live-{shots}.png")
                    shots += 1
                batch = b.errors()
                try:  # errors count while the server is up: at the end the page loses its websocket
                    urllib.request.urlopen(f"http://127.0.0.1:{port}/curate", timeout=5).close()
                    errors += batch
                except OSError:
                    pass
                time.sleep(0.3)
            stdout, stderr = proc.communicate(timeout=180)
        finally:
            if proc.poll() is None:
                proc.kill()
    assert proc.returncode == 0, stderr[-3000:]
    assert f"curate live page at http://127.0.0.1:{port}/curate" in stderr
    assert seen == {"filter running", "drops", "progress"}, seen
    assert errors == []
    assert shots and (tmp_path / "live-0.png").stat().st_size > 5_000
    run = json.loads((out / "_reports" / "run.json").read_text())
    assert run["workers"] == 2 and run["performance_report"].endswith("-run.html")
    page = (out / "_reports" / "report.html").read_text()
    assert "02-filter" in page and "word_count" in page
