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

The child lives as long as the task (one file), so its start (~0.3 s) is paid once per file; each
page costs one round trip of its bytes through two pipes (tens of microseconds for a typical page).
"""

from __future__ import annotations

import functools
import importlib
import os
import pickle
import select
import signal
import struct
import subprocess
import sys
import time

_HEADER = struct.Struct("<Q")


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


def sandbox_for(settings) -> Sandbox:
    """The Sandbox of a task of an extract stage (in-process when ``extract_timeout`` is 0)."""
    from curate.stages.settings import parse_bytes

    return Sandbox(settings.extract_timeout, parse_bytes(settings.extract_memory, "extract_memory"))


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


def _write(stream, obj) -> None:
    data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    stream.write(_HEADER.pack(len(data)))
    stream.write(data)
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
        target, args = pickle.loads(_read_exact(stdin, n))
        try:
            answer = ("ok", _function(target)(*args))
        except MemoryError:
            answer = ("memory", None)
        except Exception as e:  # the caller's to judge: sent back as itself when it pickles
            try:
                pickle.loads(pickle.dumps(e))  # both ways: an exception whose __init__ takes other args fails here
                answer = ("error", e)
            except Exception:
                answer = ("error", RuntimeError(f"{type(e).__name__}: {e}"))
        _write(stdout, answer)


class Sandbox:
    """A child process that runs ``module:function`` calls with a timeout and a memory bound;
    with ``timeout`` 0 the calls run in this process, unguarded (no child is started)."""

    def __init__(self, timeout: float, memory: int | None):
        self.timeout = timeout
        self.memory = memory
        self._proc: subprocess.Popen | None = None
        self.started = 0  # children started, for tests and the manifest

    def _start(self) -> subprocess.Popen:
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p),
               # one thread per native library: thread pools reserve address space the bound counts
               "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
               "CURATE_SANDBOX_MEMORY": str(self.memory or 0)}
        self._proc = subprocess.Popen(
            [sys.executable, "-c", "from curate.stages.extract.sandbox import serve; serve()"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env)
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
        if not self.timeout:
            return _function(target)(*args)
        proc = self._proc if self._proc is not None and self._proc.poll() is None else self._start()
        try:
            _write(proc.stdin, (target, args))
        except (BrokenPipeError, OSError):  # it died before reading (e.g. the bound is too small to start)
            code = proc.wait()
            self._kill()
            raise PageCrashed(f"the extraction process ended before the page (exit {code})") from None
        deadline = time.monotonic() + self.timeout
        out = proc.stdout
        fd = out.fileno()
        data = bytearray()
        need = _HEADER.size
        header_done = False
        while len(data) < need:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                self._kill()
                raise PageTimeout(f"no result after {self.timeout:g} s (the extraction was stopped)")
            chunk = os.read(fd, max(need - len(data), 1 << 16))
            if not chunk:
                code = proc.wait()
                self._kill()
                if code < 0:
                    raise PageCrashed(f"the extraction process died (signal {-code})")
                raise PageCrashed(f"the extraction process ended (exit {code})")
            data += chunk
            if not header_done and len(data) >= _HEADER.size:
                (n,) = _HEADER.unpack(bytes(data[:_HEADER.size]))
                del data[:_HEADER.size]
                need, header_done = n, True
        kind, value = pickle.loads(bytes(data))
        if kind == "ok":
            return value
        if kind == "memory":
            self._kill()  # a child that hit the bound may be left fragmented: start afresh
            raise PageTooLarge(f"more than the {self.memory / 2**20:,.0f} MiB bound")
        raise value

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
