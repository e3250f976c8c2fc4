"""A live curate page on the Dask dashboard: ``http://<dashboard>/curate``.

Two halves that only share a small dict of plain values:

- the client (:class:`Tracker`, made by ``runner.make_compute``) knows the job: its stages, which one
  runs, and the futures of the current computation. As futures finish it counts partitions, and for
  the dataset writer's tasks (keys ``write-<stage>-<i>``, whose result is the partition's counts)
  documents and drops by reason. A background thread publishes the dict to the scheduler with
  ``Client.set_metadata("curate", ...)`` at most a few times a second.
- the scheduler (:class:`DashboardPlugin`, registered with ``Client.register_plugin``, so it works the
  same for a local cluster, dask-mpi's rank 0 and a scheduler you started yourself) adds a Bokeh
  application at ``/curate`` beside the dashboard's own pages, on the same HTTP server, the way
  ``distributed.dashboard.scheduler.connect`` adds the dashboard. The page reads the dict from the
  scheduler's metadata twice a second, so it is reachable exactly as the dashboard is.

The dict (``Tracker.state``): ``job``, ``stages`` (name, folder, status, counts, seconds), ``current``
(the running stage's index or None), ``progress`` (partitions done/total, documents, drops by reason,
docs/s, elapsed), ``updated`` (unix time).
"""

from __future__ import annotations

import logging
import threading
import time

log = logging.getLogger("curate.live")

PATH = "/curate"
METADATA_KEY = "curate"
#: seconds between two publications of the state (and between two refreshes of the page)
PUBLISH_EVERY = 0.5
REFRESH_MS = 500


# --------------------------------------------------------------------------- scheduler side


def dashboard_plugin() -> type:
    """The ``DashboardPlugin`` class. It subclasses distributed's SchedulerPlugin, so it is made on first
    use: a run without a cluster (--cluster threads, what a small input gets) then never imports
    distributed (0.1-0.2 CPU-s). Pickle finds it as ``curate.app.live.DashboardPlugin`` (the module's
    ``__getattr__``), on the client and on the scheduler alike."""
    made = globals().get("DashboardPlugin")
    if made is not None:
        return made
    from distributed.diagnostics.plugin import SchedulerPlugin

    class DashboardPlugin(SchedulerPlugin):
        """Adds the ``/curate`` Bokeh page to the scheduler's dashboard server (once per scheduler)."""

        name = "curate-dashboard"
        idempotent = True

        async def start(self, scheduler) -> None:
            add_page(scheduler)

    DashboardPlugin.__qualname__ = "DashboardPlugin"
    globals()["DashboardPlugin"] = DashboardPlugin
    return DashboardPlugin


def __getattr__(name: str):
    if name == "DashboardPlugin":
        return dashboard_plugin()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def dashboard_prefix(scheduler) -> str:
    """The prefix of the dashboard's own Bokeh server (``/`` unless the scheduler was started with one)."""
    for app in getattr(scheduler.http_application, "applications", []):
        apps = getattr(app, "_applications", None)
        if apps and any(k.rstrip("/").endswith("/status") for k in apps):
            return getattr(app, "_prefix", "/") or "/"
    return "/"


def add_page(scheduler) -> bool:
    """Serve ``/curate`` from the scheduler's HTTP server; False when it has no dashboard."""
    if getattr(scheduler, "_curate_page", False):
        return True
    if getattr(scheduler, "http_application", None) is None or "dashboard" not in scheduler.services:
        log.warning("curate live page: the scheduler has no dashboard")
        return False
    from distributed.dashboard.core import BokehApplication
    from tornado.ioloop import IOLoop

    app = BokehApplication({PATH: page}, scheduler, prefix=dashboard_prefix(scheduler))
    scheduler.http_application.add_application(app)
    app.initialize(IOLoop.current())
    app.start()
    scheduler._curate_page = True
    return True


def _n(value) -> str:
    return "" if value is None else f"{value:,}"


def _table_html(state: dict) -> str:
    import html

    rows = []
    for i, s in enumerate(state.get("stages") or []):
        counts = s.get("counts") or {}
        dropped = counts.get("dropped") or {}
        status = s.get("status", "")
        style = {"running": "background:#fff3cd", "done": "", "skipped": "color:#777"}.get(status, "color:#999")
        rows.append(
            f"<tr style='{style}'><td>{i + 1}</td><td>{html.escape(s.get('folder', s.get('name', '')))}</td>"
            f"<td>{html.escape(status)}</td><td>{_n(counts.get('in'))}</td><td>{_n(counts.get('out'))}</td>"
            f"<td>{html.escape(', '.join(f'{k} {v:,}' for k, v in dropped.items()))}</td>"
            f"<td>{'' if s.get('seconds') is None else format(s['seconds'], '.1f')}</td></tr>")
    head = "".join(f"<th style='text-align:left;padding:2px 10px'>{h}</th>" for h in
                   ("#", "stage", "status", "docs in", "docs out", "dropped", "seconds"))
    return (f"<table style='border-collapse:collapse;font-size:13px'><tr>{head}</tr>{''.join(rows)}</table>")


def dropped_so_far(state: dict) -> dict[str, int]:
    """Documents dropped per reason by the finished stages and the running one."""
    totals: dict[str, int] = {}
    counts = [(s.get("counts") or {}).get("dropped") or {} for s in state.get("stages") or []]
    for d in [*counts, (state.get("progress") or {}).get("dropped") or {}]:
        for k, v in d.items():
            totals[k] = totals.get(k, 0) + v
    return totals


def _progress_html(state: dict) -> str:
    import html

    p = state.get("progress") or {}
    cur = state.get("current")
    stages = state.get("stages") or []
    name = stages[cur]["folder"] if cur is not None and cur < len(stages) else p.get("label") or "-"
    done, total = p.get("partitions_done", 0), p.get("partitions_total", 0)
    pct = 100.0 * done / total if total else 0.0
    rate = p.get("docs_per_s")
    dropped = dropped_so_far(state)
    drops = ", ".join(f"{html.escape(k)} {v:,}" for k, v in sorted(dropped.items())) or "none"
    return (f"<div style='font-size:14px'><b>current stage:</b> <span class='curate-stage'>{html.escape(name)}</span>"
            f" &nbsp; <b>partitions</b> <span class='curate-partitions'>{done} / {total}</span>"
            f" &nbsp; <b>documents</b> <span class='curate-docs'>{p.get('documents', 0):,}</span>"
            f" &nbsp; <b>docs/s</b> {'-' if not rate else f'{rate:,.0f}'}"
            f" &nbsp; <b>elapsed</b> {p.get('elapsed', 0):.1f} s</div>"
            f"<div style='font-size:14px'><b>dropped so far:</b> <span class='curate-dropped'>{drops}</span></div>"
            f"<div style='width:600px;height:14px;background:#eee;margin-top:4px'>"
            f"<div style='width:{pct:.1f}%;height:14px;background:#4c72b0'></div></div>")


def page(scheduler, extra, doc) -> None:
    """The Bokeh document of ``/curate``: a title, the stage table, the current stage's progress and
    a bar chart of the documents dropped so far per reason; refreshed from the scheduler's metadata."""
    import html

    from bokeh.layouts import column
    from bokeh.models import ColumnDataSource, Div
    from bokeh.plotting import figure

    title = Div(text="<h2>curate</h2>")
    progress = Div(text="")
    table = Div(text="")
    drops = ColumnDataSource({"reason": [], "n": []})
    fig = figure(y_range=[], height=260, width=600, title="documents dropped so far, by reason",
                 toolbar_location=None)
    fig.hbar(y="reason", right="n", height=0.7, source=drops, color="#dd8452")
    fig.x_range.start = 0
    waiting = "<p>waiting for a curate job on this cluster…</p>"

    def refresh():
        state = scheduler.get_metadata([METADATA_KEY], default=None)
        if not state:
            table.text = waiting
            return
        # the job file and the output are a user's names: escaped like everything else on this page
        title.text = (f"<h2>curate: {html.escape(str(state.get('job', '')))}</h2>"
                      f"<p style='color:#777'>{html.escape(str(state.get('output', '')))}</p>")
        progress.text = _progress_html(state)
        table.text = _table_html(state)
        totals = dropped_so_far(state)
        reasons = sorted(totals, key=lambda k: totals[k])
        if list(fig.y_range.factors) != reasons:
            fig.y_range.factors = reasons
        drops.data = {"reason": reasons, "n": [totals[k] for k in reasons]}

    refresh()
    doc.title = "curate"
    doc.add_root(column(title, progress, table, fig))
    doc.add_periodic_callback(refresh, REFRESH_MS)


# --------------------------------------------------------------------------- client side


class Tracker:
    """What the client publishes for the live page; every method is cheap and never raises into the job."""

    def __init__(self, client, publish_every: float = PUBLISH_EVERY):
        self.client = client
        self.publish_every = publish_every
        self.lock = threading.Lock()
        self.state: dict = {"job": "", "output": "", "stages": [], "current": None, "progress": {}, "updated": 0}
        self.dirty = threading.Event()
        self.stopped = threading.Event()
        self.thread: threading.Thread | None = None
        self.url: str | None = None
        self.pending: list = []  # finished write futures whose counts are not fetched yet

    # setup ---------------------------------------------------------------------------------------

    def start(self) -> Tracker:
        """Register the page on the scheduler and start publishing; a failure only loses the page.
        Without a client (threads in this process) the state only feeds the progress line."""
        if self.client is None:
            return self
        try:
            self.client.register_plugin(dashboard_plugin()())
            link = self.client.dashboard_link
            if link:
                self.url = link.rsplit("/", 1)[0] + PATH
                log.info("curate live page at %s", self.url)
        except Exception as e:  # e.g. a scheduler that cannot import curate: the job still runs
            log.warning("curate live page not available: %s: %s", type(e).__name__, e)
        self.thread = threading.Thread(target=self._loop, name="curate-live", daemon=True)
        self.thread.start()
        return self

    def close(self) -> None:
        self.stopped.set()
        self.dirty.set()
        if self.thread is not None:
            self.thread.join(timeout=5)
        self._publish()

    # what the runner reports -----------------------------------------------------------------------

    def job(self, name: str, output: str, folders: list[tuple[str, str]]) -> None:
        with self.lock:
            self.state.update(job=name, output=output, current=None, progress={},
                              stages=[{"name": n, "folder": f, "status": "pending"} for n, f in folders])
        self.dirty.set()

    def stage_started(self, k: int) -> None:
        with self.lock:
            self.state["current"] = k
            self.state["stages"][k]["status"] = "running"
            self.state["progress"] = self._fresh_progress()
        self.dirty.set()

    def stage_finished(self, k: int, manifest: dict, skipped: bool, seconds: float) -> None:
        with self.lock:
            s = self.state["stages"][k]
            s["status"] = "skipped" if skipped else "done"
            c = manifest.get("counts") or {}
            s["counts"] = {"in": c.get("in"), "out": c.get("out"), "dropped": dict(c.get("dropped") or {})}
            s["seconds"] = round(seconds if not skipped else (manifest.get("timings") or {}).get("seconds", 0.0), 3)
            self.state["current"] = None
            self.state["progress"] = {}
            self.pending = []  # the stage's counts are the manifest's now
        self.dirty.set()

    def watch(self, futures) -> None:
        """Count the futures of one computation of the current stage as they finish."""
        with self.lock:
            p = self.state["progress"] or self._fresh_progress()
            p["partitions_total"] = p.get("partitions_total", 0) + len(futures)
            self.state["progress"] = p
        self.dirty.set()
        for f in futures:
            f.add_done_callback(self._done)

    def _fresh_progress(self) -> dict:
        return {"started": time.time(), "partitions_done": 0, "partitions_total": 0, "documents": 0,
                "dropped": {}, "docs_per_s": None, "elapsed": 0.0}

    def _done(self, future) -> None:
        """A task finished: counted now; a write's counts are fetched with the others that finished
        since the last publish, in one gather (one per finished task cost the client a round trip each)."""
        from curate.stages.dataset.write import is_write_key

        if future.status == "finished" and is_write_key(future.key):
            with self.lock:
                self.pending.append(future)
        self.finished(None)

    def _fetch_pending(self) -> None:
        with self.lock:
            pending, self.pending = self.pending, []
        if not pending or self.client is None:
            return
        try:
            results = self.client.gather(pending, errors="skip")
        except Exception:  # the job reports the failure itself; the page only misses a count
            return
        for counts in results:
            self._count(counts)

    def expect(self, n: int) -> None:
        """``n`` more tasks in the current step (threads in this process: no futures to watch)."""
        with self.lock:
            p = self.state["progress"] or self._fresh_progress()
            p["partitions_total"] = p.get("partitions_total", 0) + n
            self.state["progress"] = p

    def finished(self, counts) -> None:
        """One task of the current step finished; ``counts`` is a dataset writer task's result."""
        with self.lock:
            p = self.state["progress"]
            if not p:
                return
            p["partitions_done"] = p.get("partitions_done", 0) + 1
        self._count(counts)

    def _count(self, counts) -> None:
        """``counts``: a write task's result, one partition's counts or (several partitions a task,
        :mod:`curate.stages.dataset.groups`) their list."""
        with self.lock:
            p = self.state["progress"]
            for c in counts if isinstance(counts, list) else [counts]:
                if p and isinstance(c, dict):
                    p["documents"] += int(c.get("in", 0))
                    p["docs_at"] = time.time()  # the rate is of the time documents came in, not since
                    for k, v in (c.get("dropped") or {}).items():
                        p["dropped"][k] = p["dropped"].get(k, 0) + int(v)
        self.dirty.set()

    # publishing ----------------------------------------------------------------------------------

    def _loop(self) -> None:
        while not self.stopped.is_set():
            self.dirty.wait()
            self.dirty.clear()
            self._fetch_pending()
            self._publish()
            self.stopped.wait(self.publish_every)

    def _publish(self) -> None:
        import copy

        with self.lock:
            p = self.state.get("progress") or {}
            if p.get("started"):
                p["elapsed"] = round(time.time() - p["started"], 2)
                p["docs_per_s"] = p["documents"] / p["elapsed"] if p["elapsed"] and p["documents"] else None
            self.state["updated"] = time.time()
            state = copy.deepcopy(self.state)
        if self.client is None:
            return
        try:
            self.client.set_metadata(METADATA_KEY, state)
        except Exception as e:  # a closing client: nothing left to show
            log.debug("curate live page: cannot publish: %s", e)
