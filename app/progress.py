"""One progress line for a whole job: stage k of n, partitions, documents done, a rate and time left.

It reads the state the live page's :class:`~curate.app.live.Tracker` keeps (the runner reports the
stages; the tracker counts finished partitions and the documents the dataset writer's tasks report),
so the terminal, the log and the dashboard page agree. On a terminal the line is redrawn in place
about once a second; in a pipe or a log file (SLURM's output) it is a log record every
:data:`LOG_EVERY` seconds, as datatrove's and NeMo Curator's users read their jobs' progress.
"""

from __future__ import annotations

import logging
import sys
import threading
import time

log = logging.getLogger("curate.progress")

#: seconds between two progress records when the output is not a terminal
LOG_EVERY = 30.0
#: seconds between two redraws on a terminal
DRAW_EVERY = 1.0


def _duration(seconds: float) -> str:
    seconds = int(round(seconds))
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"


def line(state: dict, now: float | None = None) -> str | None:
    """The progress line of a tracker state (None before a stage runs): stage k of n, tasks, documents
    (of those the stage before wrote, when this run knows it), their rate (over the time documents came
    in: a dedup stage counts them only as it writes, so the rate does not decay in between), and the
    time left for the stage and for the job (the stages to come at the pace of those done so far)."""
    k, stages = state.get("current"), state.get("stages") or []
    if k is None or not stages:
        return None
    p = state.get("progress") or {}
    now = time.time() if now is None else now
    elapsed = now - p["started"] if p.get("started") else 0.0
    done, total = p.get("partitions_done", 0), p.get("partitions_total", 0)
    done = min(done, total)  # a step's tasks are counted as it starts: never more done than started
    parts = [f"stage {k + 1} of {len(stages)} ({stages[k]['name']})"]
    if total:
        parts.append(f"{done}/{total} tasks")
    expected = ((stages[k - 1].get("counts") or {}).get("out") if k else None)
    docs = p.get("documents", 0)
    rate = None
    if docs:
        span = (p.get("docs_at") or now) - p["started"] if p.get("started") else 0.0
        rate = docs / span if span > 0 else None
        of = f" of {expected:,}" if expected and expected >= docs else ""
        parts.append(f"{docs:,}{of} docs" + (f", {rate:,.0f} docs/s" if rate else ""))
    left = None
    if expected and docs and rate and docs < expected:
        left = (expected - docs) / rate
    elif total and done and done < total and elapsed > 0:
        left = elapsed * (total - done) / done
    if left is not None:
        parts.append(f"~{_duration(left)} left in this stage")
    ahead = _job_left(stages, k, expected)
    if ahead is not None and (left is not None or k + 1 < len(stages)):
        parts.append(f"~{_duration((left or 0.0) + ahead)} left in the job")
    parts.append(f"{_duration(elapsed)} in this stage")
    return ", ".join(parts)


def _job_left(stages: list[dict], k: int, docs: int | None) -> float | None:
    """Seconds the stages after ``k`` would take at the pace (seconds per input document) of the
    stages this run has done; None before any."""
    paces = [s["seconds"] / s["counts"]["in"] for s in stages[:k]
             if s.get("status") == "done" and s.get("seconds") and (s.get("counts") or {}).get("in")]
    if not paces or docs is None:
        return None if k + 1 < len(stages) else 0.0
    return sum(paces) / len(paces) * docs * (len(stages) - k - 1)


class ProgressLine:
    """Prints :func:`line` of ``tracker``'s state from a background thread until :meth:`close`."""

    def __init__(self, tracker, stream=None, tty: bool | None = None):
        self.tracker = tracker
        self.stream = stream or sys.stderr
        self.tty = self.stream.isatty() if tty is None else tty
        self.stopped = threading.Event()
        self.shown = ""
        self.thread = threading.Thread(target=self._loop, name="curate-progress", daemon=True)

    def start(self) -> ProgressLine:
        if self.tty:  # a log record is written on a line of its own, not glued onto the progress line
            self.handlers = [h for h in logging.getLogger().handlers if getattr(h, "stream", None) is self.stream]
            for h in self.handlers:
                h.addFilter(self._clear)
        self.thread.start()
        return self

    def _clear(self, record) -> bool:
        if self.shown:
            self.stream.write("\r\x1b[2K")
            self.shown = ""  # drawn again at the next tick, below the record
        return True

    def close(self) -> None:
        self.stopped.set()
        self.thread.join(timeout=5)
        for h in getattr(self, "handlers", []):
            h.removeFilter(self._clear)
        if self.tty and self.shown:
            self.stream.write("\r\x1b[2K")  # the run's summary table follows on a clean line
            self.stream.flush()

    def _loop(self) -> None:
        every = DRAW_EVERY if self.tty else LOG_EVERY
        while not self.stopped.wait(every):
            with self.tracker.lock:
                text = line(self.tracker.state)
            if not text:
                continue
            if self.tty:
                self.stream.write("\r\x1b[2K" + text[:200])
                self.stream.flush()
                self.shown = text
            else:
                log.info("progress: %s", text)
