"""Turning failures that are not curate's own errors into the one line a user reads.

``curate`` reports :class:`curate.stages.errors.CurateError` as its message. Other failures reach the CLI
as library exceptions that name nothing a user can act on: a worker killed for memory
(``KilledWorker: ('read-_to_string_dtype-…', 0)``), a full disk (``[Errno 28]`` without a path). This
module says which stage, which input, which limit and what to change. It is presentation only:
the runner raises :class:`WorkerKilled` with what it knows, ``app/cli.py`` prints ``describe``'s line.
"""

from __future__ import annotations

import errno
import logging
import os
import re

from curate.stages.errors import CurateError


class WorkerKilled(CurateError):
    """A task's worker died (most often: it went over its memory limit) as many times as Dask
    allows. Raised by the runner's compute instead of ``distributed.KilledWorker``."""

    exit_code = 1

    def __init__(self, key, memory_limit: int | None, attempts: int | None):
        self.key = key
        self.memory_limit = memory_limit
        self.attempts = attempts
        self.stage = None
        self.source = None
        self.blocksize = None
        self.capped = False  # the stage reads partitions smaller than --blocksize (its partition_cap)
        super().__init__(self._message())

    @classmethod
    def from_killed(cls, e: Exception) -> WorkerKilled:
        worker = getattr(e, "last_worker", None)
        allowed = getattr(e, "allowed_failures", None)
        return cls(getattr(e, "task", e.args[0] if e.args else "?"), getattr(worker, "memory_limit", None),
                   allowed + 1 if isinstance(allowed, int) else None)

    @property
    def task(self) -> str:
        """The task's name without Dask's token: 'read-_to_string_dtype', 'write-normalize'."""
        name = self.key[0] if isinstance(self.key, tuple) else str(self.key)
        return re.sub(r"-[0-9a-f]{32}$", "", re.sub(r"-\d{5}(-\d{5})?$", "", str(name)))

    @property
    def partition(self) -> int | None:
        """The (first) input partition of the task."""
        if isinstance(self.key, tuple) and len(self.key) > 1 and isinstance(self.key[-1], int):
            return self.key[-1]
        m = re.search(r"-(\d{5})(-\d{5})?$", str(self.key))
        return int(m.group(1)) if m else None

    @property
    def last_partition(self) -> int | None:
        """The last input partition of a task that makes several (``write-STAGE-00012-00023``), else None."""
        m = re.search(r"-\d{5}-(\d{5})$", str(self.key)) if not isinstance(self.key, tuple) else None
        return int(m.group(1)) if m else None

    def in_stage(self, stage: str, inputs, io) -> WorkerKilled:
        """Add the stage and the input file(s) the partition was read from (when it maps to one)."""
        from curate.stages import dataset, registry
        from curate.stages.settings import parse_bytes

        cls = registry.get(stage)
        cap = cls.partition_cap() if hasattr(cls, "partition_cap") else None
        size = parse_bytes(io.blocksize, "blocksize")
        self.stage, self.blocksize = stage, io.blocksize
        if cap is not None and cap < size:  # the stage reads smaller partitions than --blocksize says
            size, self.blocksize, self.capped = cap, dataset.format_size(cap), True
        i = self.partition
        if i is not None and not cls.reads_raw_files:
            try:
                files = dataset.expand_named(inputs, allow_incomplete=io.allow_incomplete)
                pieces = dataset.plan_pieces(files, size)
            except Exception:  # presentation only: the partition number is still said
                pieces = []
            last = self.last_partition
            if last is not None and last < len(pieces):  # a task of several small partitions
                first, end = pieces[i], pieces[last]
                self.source = first.path if first.path == end.path else f"{first.path} to {end.path}"
            elif i < len(pieces):
                p = pieces[i]
                span = f" bytes {p.start}-{p.end}" if p.end >= 0 else (
                    f" row groups {p.row_groups[0]}-{p.row_groups[-1]}" if p.row_groups else "")
                self.source = f"{p.path}{span}"
        self.args = (self._message(),)
        return self

    def _message(self) -> str:
        from curate.stages.dataset import format_size

        where = f"stage {self.stage}: " if self.stage else ""
        last = self.last_partition
        part = (f" on partitions {self.partition}-{last}" if last is not None else
                f" on partition {self.partition}" if self.partition is not None else "")
        src = f" (input: {self.source})" if self.source else ""
        limit = f"its memory limit of {format_size(self.memory_limit)}" if self.memory_limit else "its memory limit"
        times = {None: "", 1: " once"}.get(self.attempts, f" {self.attempts} times")
        if self.capped:
            return (f"{where}a worker died{times} running task {self.task}{part}{src}, most likely over {limit}; "
                    f"this stage reads partitions of at most {self.blocksize} whatever --blocksize says: use a "
                    "larger --memory-limit (or fewer --workers)")
        bs = f" (now {self.blocksize})" if self.blocksize else ""
        return (f"{where}a worker died{times} running task {self.task}{part}{src}, most likely over {limit}; "
                f"use a smaller --blocksize{bs} or a larger --memory-limit (or fewer --workers)")


def masked_failure(e: BaseException) -> CurateError | None:
    """The CurateError that ``e`` was raised while handling, if any.

    Tearing a cluster down after a failure can fail in turn (a nanny still restarting a killed
    worker times out); the user should read the first failure, not the clean-up's."""
    seen = set()
    e = e.__context__
    while e is not None and id(e) not in seen:
        if isinstance(e, CurateError):
            return e
        seen.add(id(e))
        e = e.__context__
    return None


def describe(e: BaseException, output: str | None = None) -> str | None:
    """One line for a known failure that is not a CurateError, else None."""
    if _is_disk_full(e):
        path = getattr(e, "filename", None) or output
        where = f" writing {os.path.abspath(path) if '://' not in str(path) else path}" if path else ""
        return (f"no space left on device{where}; free space there, or write elsewhere "
                "(--output; --local-directory for the workers' scratch space)")
    if isinstance(e, MemoryError):
        return "out of memory (MemoryError); use a smaller --blocksize or a larger --memory-limit"
    return None


def _is_disk_full(e: BaseException) -> bool:
    seen = set()
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        if isinstance(e, OSError) and (e.errno == errno.ENOSPC or "No space left on device" in str(e)):
            return True
        e = e.__cause__ or e.__context__
    return False


class NoDaskTracebacks(logging.Filter):
    """Keep Dask's log lines but drop their tracebacks (unless --debug: ``CURATE_DEBUG``).

    A worker that dies (killed for memory) leaves its heartbeat, the nanny and the scheduler logging
    connection errors with full tracebacks; what failed reaches the user as curate's one line."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.name.startswith("distributed") and not os.environ.get("CURATE_DEBUG"):
            record.exc_info = record.exc_text = record.stack_info = None
        return True


def hide_dask_tracebacks() -> None:
    """Install :class:`NoDaskTracebacks` on the handlers of this process (client, scheduler, nannies,
    or a worker: app.cluster's worker plugin calls it there)."""
    for logger in (logging.getLogger(), logging.getLogger("distributed")):
        for handler in logger.handlers:
            if not any(isinstance(f, NoDaskTracebacks) for f in handler.filters):
                handler.addFilter(NoDaskTracebacks())
