"""The extraction sandbox's child process, and what both sides of it share (frames, the clock).

The child is ``python -c "...serve()"`` (see :mod:`curate.stages.extract.sandbox` for the parent). It:

- dies with its parent: ``prctl(PR_SET_PDEATHSIG, SIGKILL)`` on Linux (a kill of curate, even
  SIGKILL, takes the child with it while it is deep in a page), and exits at once if the parent is
  already gone; elsewhere a thread watches the parent;
- ignores SIGINT: a Ctrl-C reaches the whole process group, and whether pages stop is the parent's
  decision (a child that died of it would make its page look like a crash);
- sets ``RLIMIT_AS`` and imports the function it will run (``CURATE_SANDBOX_PRELOAD``), then says
  ``ready``; a failure there (a memory bound too small to import the extractor) is sent as one
  ``failed`` frame with the reason, so the parent can refuse the setting by name;
- stamps, in a small shared memory page (the *clock*), which call of the current batch it is running
  and since when (``time.monotonic_ns``, one clock for every process on the machine). The parent times
  each page from its own start: the child's start-up, imports and the pages before it are never
  counted against a page.
"""

from __future__ import annotations

import functools
import importlib
import mmap
import os
import pickle
import signal
import struct
import sys
import time

HEADER = struct.Struct("<Q")
#: the clock: (batch number, call of that batch running or IDLE, that call's start in monotonic ns)
CLOCK = struct.Struct("<qqq")
IDLE = -1
#: the child sends its answers in groups at most this far apart (and at a batch's end)
FLUSH_SECONDS = 0.05
#: ... or once this many answer bytes are waiting (what the child holds beyond a page stays small)
FLUSH_BYTES = 1 << 20
PR_SET_PDEATHSIG = 1


def frame(obj) -> bytes:
    data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    return HEADER.pack(len(data)) + data


def read_exact(stream, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = stream.read(n - len(buf))
        if not chunk:
            raise EOFError
        buf += chunk
    return bytes(buf)


@functools.lru_cache(maxsize=32)
def function(target: str):
    module, _, name = target.partition(":")
    return getattr(importlib.import_module(module), name)


class Clock:
    """The shared page: the child writes :data:`CLOCK` records, the parent reads them."""

    def __init__(self, fd: int):
        self.map = mmap.mmap(fd, mmap.PAGESIZE)

    @classmethod
    def create(cls) -> tuple[Clock, int]:
        """A new clock and the descriptor the child maps it from (the caller closes it once passed)."""
        if hasattr(os, "memfd_create"):
            fd = os.memfd_create("curate-sandbox-clock")
        else:  # no memfd (macOS): a nameless temporary file serves the same
            import tempfile

            with tempfile.TemporaryFile(prefix="curate-sandbox-") as f:  # unnamed from the start on POSIX
                fd = os.dup(f.fileno())
        os.ftruncate(fd, mmap.PAGESIZE)
        return cls(fd), fd

    def stamp(self, batch: int, call: int) -> None:
        CLOCK.pack_into(self.map, 0, batch, call, time.monotonic_ns())

    def read(self) -> tuple[int, int, int]:
        # two equal reads in a row: never a record torn by a write in between
        a, b = CLOCK.unpack_from(self.map), CLOCK.unpack_from(self.map)
        while a != b:
            a, b = b, CLOCK.unpack_from(self.map)
        return a

    def close(self) -> None:
        self.map.close()


def _die_with_parent(parent: int) -> None:
    if sys.platform.startswith("linux"):
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_SET_PDEATHSIG)")
    else:  # a thread cannot stop a library that holds the GIL, but it ends every pure-Python hang
        import threading

        def watch():
            while os.getppid() == parent:
                time.sleep(0.5)
            os._exit(0)

        threading.Thread(target=watch, daemon=True).start()
    if parent and os.getppid() != parent:  # the parent went before the signal was asked for
        os._exit(0)


def serve() -> None:
    """The child's loop: read (function, args) frames from stdin, answer on stdout, until EOF."""
    _die_with_parent(int(os.environ.get("CURATE_SANDBOX_PARENT") or 0))
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    stdin, stdout = sys.stdin.buffer, sys.stdout.fileno()  # answers are written whole, unbuffered
    sys.stdout = sys.stderr  # a library that prints must not corrupt the frames
    try:
        memory = int(os.environ.get("CURATE_SANDBOX_MEMORY") or 0)
        if memory:  # set here, not in a preexec_fn: those are unsafe in a threaded parent (a Dask worker)
            import resource

            resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
        clock = Clock(int(os.environ["CURATE_SANDBOX_CLOCK"]))
        if os.environ.get("CURATE_SANDBOX_PRELOAD"):
            function(os.environ["CURATE_SANDBOX_PRELOAD"])
        ready = frame(("ready", os.getpid()))
    except BaseException as e:  # the parent refuses the limits with this reason; nothing was served
        _write_all(stdout, frame(("failed", f"{type(e).__name__}: {e}")))
        os._exit(3)
    _write_all(stdout, ready)
    batch = 0
    while True:
        try:
            (n,) = HEADER.unpack(read_exact(stdin, HEADER.size))
        except EOFError:
            return
        batch += 1
        unpacked = _read_batch(stdin, n)
        if unpacked is None:  # the parent sends the pages again in smaller batches, or calls the page too large
            _write_all(stdout, frame(("unread", None)))
            continue
        target, calls = unpacked
        fn = function(target)
        out = bytearray()  # answers not yet sent: one write per group, not one per page
        flushed = time.monotonic()
        for k, args in enumerate(calls):
            clock.stamp(batch, k)
            _answer(fn, args, out)
            last = k == len(calls) - 1
            # answers go out every FLUSH_SECONDS, and at the batch's end: the parent wakes once per group,
            # not once per page (a page that hangs holds back the last few: the parent runs those again)
            now = time.monotonic()
            if last or now - flushed >= FLUSH_SECONDS or len(out) >= FLUSH_BYTES:
                # idle while writing: a parent busy reading its input (it overlaps that with this batch)
                # may leave the pipe full for a while, and that wait is no page's time
                clock.stamp(batch, IDLE)
                _write_all(stdout, out)
                out.clear()
                flushed = now
        unpacked = calls = args = None  # not held while the next batch is read: the bound counts both


def _write_all(fd: int, data) -> None:
    with memoryview(data) as view:
        while view:
            view = view[os.write(fd, view):]


def _read_batch(stdin, n: int):
    """The batch frame's (target, calls), or None when it does not fit in the memory bound (its bytes
    are read and dropped, so the next frame is found where it starts)."""
    got = 0
    try:
        buf = bytearray(n)
        with memoryview(buf) as view:
            while got < n:
                k = stdin.readinto(view[got:])
                if not k:
                    raise EOFError
                got += k
        return pickle.loads(buf)
    except MemoryError:
        buf = None
        while got < n:
            chunk = stdin.read(min(n - got, 1 << 16))
            if not chunk:
                raise EOFError from None
            got += len(chunk)
        return None


def _answer(fn, args, out: bytearray) -> None:
    """The frame answering one call, added to ``out``: ("ok", result), ("memory", None) or ("error",
    exception). The pickle goes in after its length, not joined to it first (one copy of the page's
    text less)."""
    try:
        data = pickle.dumps(("ok", fn(*args)), protocol=pickle.HIGHEST_PROTOCOL)
    except MemoryError:  # also when the result is too big to pickle under the bound
        data = None
    except Exception as e:  # the caller's to judge: sent back as itself when it pickles
        try:
            pickle.loads(pickle.dumps(e))  # both ways: an exception whose __init__ takes other args fails
            data = pickle.dumps(("error", e), protocol=pickle.HIGHEST_PROTOCOL)
        except MemoryError:
            data = None
        except Exception:
            data = pickle.dumps(("error", RuntimeError(f"{type(e).__name__}: {e}")), protocol=pickle.HIGHEST_PROTOCOL)
    if data is None:
        data = pickle.dumps(("memory", None), protocol=pickle.HIGHEST_PROTOCOL)
    out += HEADER.pack(len(data))
    out += data
