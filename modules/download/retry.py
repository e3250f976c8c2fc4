"""How a download waits, retries and gives up: the policy ``http.download`` and ``stream`` share.

:class:`DownloadOptions` holds the knobs (retries, backoff, timeouts, the deadline and minimum rate,
slots per process, S3 flags). A failure that may pass (``_Transient``; ``_Slow`` for an attempt over
the deadline or under the minimum rate, measured by :class:`Pace`) is retried after an exponential
backoff or the server's Retry-After (:func:`_wait`), until ``retries`` failures in a row raise
:class:`TransientDownloadError`; a permanent failure is a :class:`DownloadError`. At most
``max_inflight`` downloads or streams run at once in one process: the slots are a per-process
semaphore, the only state this module keeps. Messages carry URLs through
:func:`curate.stages.secrets.redact_url`.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from dataclasses import dataclass

from curate.stages.errors import DataError
from curate.stages.secrets import redact_url

log = logging.getLogger("curate.download")

#: answers worth retrying: the server or something in between is overloaded or broken for now
RETRY_STATUS = frozenset({408, 425, 429, 500, 502, 503, 504, 509, 520, 521, 522, 523, 524})


@dataclass(frozen=True)
class DownloadOptions:
    retries: int = 5
    #: seconds before the first retry; doubled at each further failure, capped by max_backoff
    backoff: float = 1.0
    max_backoff: float = 60.0
    #: seconds to connect, and between two reads
    timeout: float = 60.0
    chunk_bytes: int = 1 << 20
    #: one ranged GET when streaming from S3 (each is a request; the block is held in memory)
    s3_block_bytes: int = 8 << 20
    #: downloads or streams at once per process (per Dask worker)
    max_inflight: int = 4
    #: seconds one attempt at a file may last (0: no limit); then it fails and is resumed
    deadline: float = 3600.0
    #: bytes per second below which an attempt fails (0: no limit), averaged over rate_window seconds
    min_rate: int = 1024
    rate_window: float = 30.0
    requester_pays: bool = False
    s3_endpoint_url: str = ""


class DownloadError(DataError):
    """A URL that could not be downloaded (a permanent error, or retries exhausted)."""


class TransientDownloadError(DownloadError):
    """A download that failed for reasons that may pass (the retries ran out on connection errors,
    timeouts, 408/429/5xx, transfers cut short; the file changed while it streamed): a rerun tries
    it again, where a permanent failure (another 4xx, a bad listing) stays final."""


class _Transient(Exception):
    def __init__(self, message: str, retry_after: float | None = None):
        super().__init__(message)
        self.retry_after = retry_after


class _Slow(_Transient):
    """An attempt over the deadline or under the minimum rate: counts as a failure even after progress."""


class Pace:
    """Enforces ``deadline`` and ``min_rate`` on one attempt; call :meth:`add` after every read."""

    def __init__(self, options: DownloadOptions):
        self.options = options
        self.started = self.window_start = time.monotonic()
        self.window_bytes = 0

    def add(self, n: int) -> None:
        o = self.options
        now = time.monotonic()
        if o.deadline and now - self.started > o.deadline:
            raise _Slow(f"attempt exceeded the deadline of {o.deadline:g}s")
        self.window_bytes += n
        elapsed = now - self.window_start
        if o.min_rate and elapsed >= o.rate_window:
            rate = self.window_bytes / elapsed
            if rate < o.min_rate:
                raise _Slow(f"transfer rate {rate:.0f} B/s below the minimum of {o.min_rate} B/s")
            self.window_start, self.window_bytes = now, 0


def read_some(raw, amt: int, decode: bool = False) -> bytes:
    """Up to ``amt`` bytes as soon as any arrived (urllib3's read1), so a trickle cannot block a
    read for long and the pace checks run between reads. ``decode``: undo a Content-Encoding
    (small documents only; raw files are kept as served)."""
    read1 = getattr(raw, "read1", None)
    return read1(amt, decode_content=decode) if read1 is not None else raw.read(amt, decode_content=decode)


# --------------------------------------------------------------------------- concurrency slots

_SLOTS: dict[int, threading.BoundedSemaphore] = {}
_SLOTS_LOCK = threading.Lock()


def _slot(limit: int) -> threading.BoundedSemaphore:
    with _SLOTS_LOCK:
        if limit not in _SLOTS:
            _SLOTS[limit] = threading.BoundedSemaphore(limit)
        return _SLOTS[limit]


_ERRNO = re.compile(r"\[Errno -?\d+\][^'\")]*")


def describe(error: Exception) -> str:
    """A short account of a network error (requests nests urllib3's long messages in its own)."""
    text = redact_url(str(error))
    m = _ERRNO.search(text)
    if m:
        return f"connection failed: {m.group(0).strip()}"
    if "timed out" in text.lower():
        return "timed out"
    return text


def _wait(url: str, failures: int, error: Exception, options: DownloadOptions) -> None:
    url = redact_url(url)
    if failures > options.retries:
        raise TransientDownloadError(f"{url}: {describe(error)} (gave up after {failures} failed attempts)") from error
    delay = min(options.max_backoff, options.backoff * 2 ** (failures - 1))
    retry_after = getattr(error, "retry_after", None)
    if retry_after is not None:
        delay = min(options.max_backoff, max(delay, retry_after))
    log.warning("%s: %s; retry %d/%d in %.1fs", url, describe(error), failures, options.retries, delay)
    time.sleep(delay)
