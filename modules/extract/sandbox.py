"""A page that makes an extractor hang or eat memory costs a reject, not the run.

Extraction libraries (resiliparse, jusText and trafilatura on lxml, mwparserfromhell, our LaTeX
cleaner) run on untrusted pages; pathological markup can make them loop for minutes, take gigabytes
or crash the process. A Python thread cannot be stopped and a Dask worker's thread is not the main
thread (no ``SIGALRM``), so the pages of one task are extracted in a child process of its own:

- :class:`Sandbox` starts ``python -c "...serve()"`` (a plain subprocess: Dask worker processes are
  daemons and may not use multiprocessing) with ``RLIMIT_AS`` set to ``memory`` bytes and one thread
  per native library, and talks to it over its stdin/stdout in length-prefixed pickle frames: the
  function (``module:name``), the arguments, then the result or the exception.
- :meth:`Sandbox.call` waits ``timeout`` seconds for the answer. On timeout the child is killed
  (``SIGKILL``) and :class:`PageTimeout` raised; a ``MemoryError`` in the child, or a child that dies
  (the kernel's OOM killer, a segfault in a C library), raises :class:`PageTooLarge` /
  :class:`PageCrashed`. The next call starts a fresh child; the task goes on with its next page.
- Any other exception of the function comes back as itself (re-raised in the parent), so the
  callers' reject logic is unchanged.

A thread's child serves every task of that thread (:func:`sandbox_for`), so its start (~0.4 s) is
paid once per worker thread, not per file. Pages go to it in batches, one frame each way per batch of
64 pages, and come back one by one, each within the timeout (:meth:`Sandbox.map`).
"""

from __future__ import annotations

import atexit
import functools
import importlib
import os
import pickle
import select
import signal
import struct
import subprocess
import sys
import threading
import time

_HEADER = struct.Struct("<Q")
#: pipe buffers to and from the child: a batch of pages crosses in a few writes instead of dozens
PIPE_BYTES = 1 << 20
#: the child sends its answers in groups at most this far apart (and at a batch's end)
FLUSH_SECONDS = 0.05


def timeout_field(what: str = "page"):
    """The ``extract_timeout`` setting every extract stage has (the same help, default and bounds)."""
    from dataclasses import field

    return field(default=5.0, metadata={
        "help": f"seconds one {what} may take to extract before it is a timeout reject ({what}s are extracted "
                f"in a child process of the task); 0: no sandbox, extract in the task's own process",
        "metavar": "SECONDS"})


def memory_field(what: str = "page"):
    from dataclasses import field

    return field(default="2GiB", metadata={
        "help": f"address space of the extraction process; a {what} that needs more is a too_large reject",
        "metavar": "SIZE"})


def check_limits(settings) -> None:
    """Validate ``extract_timeout`` and ``extract_memory`` (in a Settings' ``__post_init__``)."""
    from curate.stages.settings import check_range, parse_bytes

    check_range(settings, "extract_timeout", 0.0, 3600.0)
    parse_bytes(settings.extract_memory, "extract_memory")


_LOCAL = threading.local()
_ALL: list[Sandbox] = []  # every shared child this process started, stopped at exit


def sandbox_for(settings) -> Sandbox:
    """This thread's Sandbox for the settings' timeout and memory bound (in-process when
    ``extract_timeout`` is 0). Shared by every task the thread runs, so a worker starts its child once,
    not once per file; the caller must not close it (it stops when the process exits, or when its
    parent goes: EOF on its stdin)."""
    from curate.stages.settings import parse_bytes

    key = (settings.extract_timeout, parse_bytes(settings.extract_memory, "extract_memory"))
    boxes = getattr(_LOCAL, "boxes", None)
    if boxes is None:
        boxes = _LOCAL.boxes = {}
    box = boxes.get(key)
    if box is None:
        box = boxes[key] = Sandbox(*key)
        if not _ALL:
            atexit.register(_stop_all)
        _ALL.append(box)
    return box


def _stop_all() -> None:
    for box in _ALL:
        box.close()


@functools.lru_cache(maxsize=32)
def _function(target: str):
    module, _, name = target.partition(":")
    return getattr(importlib.import_module(module), name)


class PageTimeout(Exception):
    """The extractor did not finish within the timeout (the child was killed)."""


class PageTooLarge(Exception):
    """The extractor ran out of the memory bound."""


class PageCrashed(Exception):
    """The child died while extracting (a signal: a crash, the kernel's OOM killer)."""


def _write(stream, obj, flush: bool = True) -> None:
    data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    stream.write(_HEADER.pack(len(data)))
    stream.write(data)
    if flush:
        stream.flush()


def _read_exact(stream, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = stream.read(n - len(buf))
        if not chunk:
            raise EOFError
        buf += chunk
    return bytes(buf)


def serve() -> None:
    """The child's loop: read (function, args) frames from stdin, answer on stdout, until EOF."""
    memory = int(os.environ.get("CURATE_SANDBOX_MEMORY") or 0)
    if memory:  # set here, not in a preexec_fn: those are unsafe in a threaded parent (a Dask worker)
        import resource

        resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    sys.stdout = sys.stderr  # a library that prints must not corrupt the frames
    while True:
        try:
            (n,) = _HEADER.unpack(_read_exact(stdin, _HEADER.size))
        except EOFError:
            return
        target, calls = pickle.loads(_read_exact(stdin, n))
        fn = _function(target)
        flushed = time.monotonic()
        for k, args in enumerate(calls):
            try:
                answer = ("ok", fn(*args))
            except MemoryError:
                answer = ("memory", None)
            except Exception as e:  # the caller's to judge: sent back as itself when it pickles
                try:
                    pickle.loads(pickle.dumps(e))  # both ways: an exception whose __init__ takes other args fails
                    answer = ("error", e)
                except Exception:
                    answer = ("error", RuntimeError(f"{type(e).__name__}: {e}"))
            _write(stdout, answer, flush=False)
            # answers go out every FLUSH_SECONDS, and at the batch's end: the parent wakes once per group,
            # not once per page (a page that hangs can hold back the answers of the last few; see map)
            now = time.monotonic()
            if k == len(calls) - 1 or answer[0] != "ok" or now - flushed >= FLUSH_SECONDS:
                stdout.flush()
                flushed = now


class Sandbox:
    """A child process that runs ``module:function`` calls with a timeout and a memory bound;
    with ``timeout`` 0 the calls run in this process, unguarded (no child is started)."""

    def __init__(self, timeout: float, memory: int | None):
        self.timeout = timeout
        self.memory = memory
        self._proc: subprocess.Popen | None = None
        self._buf = bytearray()
        self.started = 0  # children started, for tests and the manifest

    def _start(self) -> subprocess.Popen:
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p),
               # one thread per native library: thread pools reserve address space the bound counts
               "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
               "CURATE_SANDBOX_MEMORY": str(self.memory or 0)}
        self._proc = subprocess.Popen(
            [sys.executable, "-c", "from curate.stages.extract.sandbox import serve; serve()"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env)
        for stream in (self._proc.stdin, self._proc.stdout):  # fewer switches per batch (Linux; else as is)
            try:
                import fcntl

                fcntl.fcntl(stream.fileno(), getattr(fcntl, "F_SETPIPE_SZ", 1031), PIPE_BYTES)
            except OSError:
                pass
        self._buf = bytearray()  # answer bytes read from this child and not yet taken
        self.started += 1
        return self._proc

    def _kill(self) -> None:
        proc, self._proc = self._proc, None
        if proc is None:
            return
        if proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
        proc.wait()
        for stream in (proc.stdin, proc.stdout):
            try:
                stream.close()
            except OSError:
                pass

    def call(self, target: str, *args):
        """``target(*args)`` in the child; PageTimeout / PageTooLarge / PageCrashed when it fails so."""
        result = self.map(target, [args])[0]
        if isinstance(result, BaseException):
            raise result
        return result

    def map(self, target: str, calls: list[tuple]) -> list:
        """``target(*args)`` for each ``args`` of ``calls``, each within the timeout: the results, an
        exception instance in place of a call that failed (PageTimeout, PageTooLarge, PageCrashed, or
        the function's own). The calls go to the child in one frame and come back one by one, so a
        batch costs one round trip, not one per page; after a call that kills the child the rest go
        to a fresh one."""
        if not self.timeout:
            fn = _function(target)
            out = []
            for args in calls:
                try:
                    out.append(fn(*args))
                except Exception as e:
                    out.append(e)
            return out
        results: list = []
        todo = list(calls)
        while todo:
            proc = self._proc if self._proc is not None and self._proc.poll() is None else self._start()
            try:
                _write(proc.stdin, (target, todo))
            except (BrokenPipeError, OSError):  # it died before reading (e.g. the bound is too small to start)
                code = proc.wait()
                self._kill()
                results.append(PageCrashed(f"the extraction process ended before the page (exit {code})"))
                todo = todo[1:]
                continue
            for k in range(len(todo)):
                try:
                    kind, value = self._answer()
                except (PageTimeout, PageCrashed) as e:  # the child is gone: the rest go to a new one
                    # with others after it, this call's answer may only have been held back (the child
                    # sends answers in groups): it is judged again alone, where nothing is held back
                    results.append(e if len(todo) == 1 else self._alone(target, todo[k]))
                    todo = todo[k + 1:]
                    break
                if kind == "memory":
                    self._kill()  # a child that hit the bound may be left fragmented: start afresh
                    results.append(PageTooLarge(f"more than the {self.memory / 2**20:,.0f} MiB bound"))
                    todo = todo[k + 1:]
                    break
                results.append(value)
            else:
                todo = []
        return results

    def _alone(self, target: str, args: tuple):
        """``target(*args)`` as the only call of a batch: its result or the exception it ends in."""
        return self.map(target, [args])[0]

    def _answer(self):
        """The next answer frame of the child, within the timeout."""
        proc = self._proc
        fd = proc.stdout.fileno()
        deadline = time.monotonic() + self.timeout
        buf = self._buf
        need = _HEADER.size
        header = True
        while True:
            if len(buf) >= need:
                if header:
                    (n,) = _HEADER.unpack(bytes(buf[:_HEADER.size]))
                    del buf[:_HEADER.size]
                    need, header = n, False
                    continue
                with memoryview(buf) as view:
                    answer = pickle.loads(view[:need])
                del buf[:need]
                return answer
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                self._kill()
                raise PageTimeout(f"no result after {self.timeout:g} s (the extraction was stopped)")
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                code = proc.wait()
                self._kill()
                if code < 0:
                    raise PageCrashed(f"the extraction process died (signal {-code})")
                raise PageCrashed(f"the extraction process ended (exit {code})")
            buf += chunk

    def close(self) -> None:
        proc, self._proc = self._proc, None
        if proc is None:
            return
        try:
            proc.stdin.close()  # EOF: the child's loop returns
            proc.wait(timeout=5)
        except (OSError, subprocess.TimeoutExpired):
            pass
        self._proc = proc
        self._kill()

    def __enter__(self) -> Sandbox:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
