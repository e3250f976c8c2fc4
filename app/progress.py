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
    """The progress line of a tracker state (None before a stage runs)."""
    k, stages = state.get("current"), state.get("stages") or []
    if k is None or not stages:
        return None
    p = state.get("progress") or {}
    now = time.time() if now is None else now
    elapsed = now - p["started"] if p.get("started") else 0.0
    done, total = p.get("partitions_done", 0), p.get("partitions_total", 0)
    parts = [f"stage {k + 1} of {len(stages)} ({stages[k]['name']})"]
    if total:
        parts.append(f"{done}/{total} tasks")
    docs = p.get("documents", 0)
    if docs:
        rate = docs / elapsed if elapsed > 0 else 0.0
        parts.append(f"{docs:,} docs, {rate:,.0f} docs/s")
    if total and done and done < total and elapsed > 0:
        parts.append(f"~{_duration(elapsed * (total - done) / done)} left in this step")
    parts.append(f"{_duration(elapsed)} in this stage")
    return ", ".join(parts)


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
        self.thread.start()
        return self

    def close(self) -> None:
        self.stopped.set()
        self.thread.join(timeout=5)
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
