"""A page that makes an extractor hang or eat memory costs a reject, not the run.

Extraction libraries (resiliparse, jusText and trafilatura on lxml, mwparserfromhell, our LaTeX
cleaner) run on untrusted pages; pathological markup can make them loop for minutes, take gigabytes
or crash the process. A Python thread cannot be stopped and a Dask worker's thread is not the main
thread (no ``SIGALRM``), so the pages of one task are extracted in a child process of its own
(:mod:`curate.stages.extract.sandbox_child`, which also says how it dies with its parent):

- :class:`Sandbox` starts ``python -c "...serve()"`` (a plain subprocess: Dask worker processes are
  daemons and may not use multiprocessing) with ``RLIMIT_AS`` set to ``memory`` bytes and one thread
  per native library, and talks to it over its stdin/stdout in length-prefixed pickle frames: the
  function (``module:name``), the arguments, then the result or the exception.
- **Each page has ``timeout`` seconds from its own start**, read from the clock the child stamps as it
  begins each call: the child's start-up, its imports and the pages before it are never counted (a
  cold start gives the same output as a warm one). At the timeout the child is killed (``SIGKILL``)
  and the page is :class:`PageTimeout`, once: the pages whose answers the child still held go to
  the next child and are not judged again. One exception, for what the clock cannot see: the first
  page a sandbox ever runs may time out on first-use costs inside the library (stop lists, models
  loaded on the first call); such a page is tried once more, alone, in a fresh child, before it is a
  reject (at most one retry per sandbox, so ten hanging pages cost eleven timeouts, not twenty).
- A ``MemoryError`` in the child is :class:`PageTooLarge`; a child that dies in a page (the kernel's
  OOM killer, a segfault in a C library) is :class:`PageCrashed`. The task goes on with its next page.
- Any other exception of the function comes back as itself (re-raised in the parent), so the
  callers' reject logic is unchanged.
- The replacement child is started while a page that is likely to time out still runs (at half its
  timeout), so a kill is followed by the next page at once, not by a child's start-up.
- A child that cannot start (a memory bound too small to import the extractor) is
  :class:`SandboxError`, never a page reject: :func:`probe_limits` refuses such settings before any
  work. When the process exits (SIGINT included) every child is killed first and running calls end
  with :class:`SandboxError`, so the worker threads are not waited for.

A thread's child serves every task of that thread (:func:`sandbox_for`), so its start (~0.4 s) is
paid once per worker thread, not per file. Pages go to it in batches, one frame each way per batch of
64 pages, and come back one by one, each within the timeout (:meth:`Sandbox.map`). A caller with more
to read overlaps the two: :meth:`Sandbox.submit` sends a batch and returns, :meth:`Sandbox.collect`
takes its results (one batch in flight; a page found past its timeout then is a timeout all the same).
The parent's end of one child (process, pipes, frames) is :mod:`curate.stages.extract.sandbox_pipe`.
"""

from __future__ import annotations

import pickle
import threading
import time

from curate.stages.extract.sandbox_child import HEADER, function
from curate.stages.extract.sandbox_pipe import (
    START_SECONDS,
    STOPPING as _STOPPING,
    Child as _Child,
    SandboxError,
    exit_reason as _exit,
)

#: how often the parent looks at the clock while no call of its batch has begun yet
POLL_SECONDS = 0.05


def timeout_field(what: str = "page"):
    """The ``extract_timeout`` setting every extract stage has (the same help, default and bounds)."""
    from dataclasses import field

    return field(default=5.0, metadata={
        "help": f"seconds one {what} may take to extract, from the start of its own extraction, before it is a "
                f"timeout reject ({what}s are extracted in a child process of the task); 0: no sandbox, "
                f"extract in the task's own process",
        "metavar": "SECONDS"})


def memory_field(what: str = "page"):
    from dataclasses import field

    return field(default="2GiB", metadata={
        "help": f"address space of the extraction process; a {what} that needs more is a too_large reject "
                f"(a size too small to start the process is refused before any work)",
        "metavar": "SIZE"})


def check_limits(settings) -> None:
    """Validate ``extract_timeout`` and ``extract_memory`` (in a Settings' ``__post_init__``)."""
    from curate.stages.settings import check_range, parse_bytes

    check_range(settings, "extract_timeout", 0.0, 3600.0)
    parse_bytes(settings.extract_memory, "extract_memory")


def probe_limits(settings, target: str) -> None:
    """Refuse, before any work, an ``extract_memory`` under which the child cannot start and import
    ``target`` (every page would be lost): one line naming the option (a stage's ``check``)."""
    from curate.stages.errors import SettingsError
    from curate.stages.settings import parse_bytes

    if not settings.extract_timeout:
        return
    key = (parse_bytes(settings.extract_memory, "extract_memory"), target)
    if key in _PROBED:  # a job checks before the cluster starts and again as it runs: one child is enough
        return
    box = Sandbox(settings.extract_timeout, key[0])
    try:
        box.start(target)
    except SandboxError as e:
        why = e.reason.removeprefix("it could not start: ")
        raise SettingsError(f"--extract-memory {settings.extract_memory}: too small for the extraction "
                            f"process to start ({why}); give it more (the default is 2GiB)") from None
    finally:
        box.close()
    _PROBED.add(key)


#: (memory bound, target) pairs a child started under in this process (a start costs about a second
#: of the client's CPU, three times per run before: the dry run's check, the job's, the stage's)
_PROBED: set = set()


_LOCAL = threading.local()
_ALL: list[Sandbox] = []  # every shared child this process started, killed as it exits


def sandbox_for(settings) -> Sandbox:
    """This thread's Sandbox for the settings' timeout and memory bound (in-process when
    ``extract_timeout`` is 0). Shared by every task the thread runs, so a worker starts its child once,
    not once per file; the caller must not close it (it stops when the process exits, and dies with
    its parent)."""
    from curate.stages.settings import parse_bytes

    key = (settings.extract_timeout, parse_bytes(settings.extract_memory, "extract_memory"))
    boxes = getattr(_LOCAL, "boxes", None)
    if boxes is None:
        boxes = _LOCAL.boxes = {}
    box = boxes.get(key)
    if box is None:
        box = boxes[key] = Sandbox(*key)
        if not _ALL:
            _at_exit(_stop_all)
        _ALL.append(box)
    return box


def _at_exit(fn) -> None:
    """Run ``fn`` as the interpreter exits, before it waits for the worker threads (``threading``'s
    own exit hooks, as concurrent.futures uses): a thread waiting on a page must not hold up a Ctrl-C."""
    register = getattr(threading, "_register_atexit", None)
    try:
        if register is not None:
            register(fn)
            return
    except RuntimeError:  # the interpreter is already shutting down
        pass
    import atexit

    atexit.register(fn)


def _stop_all() -> None:
    _STOPPING.set()
    for box in list(_ALL):
        box.kill_children()


class PageTimeout(Exception):
    """The extractor did not finish within the timeout (the child was killed)."""


class PageTooLarge(Exception):
    """The extractor ran out of the memory bound."""


class PageCrashed(Exception):
    """The child died while extracting (a signal: a crash, the kernel's OOM killer)."""


class _Ran(Exception):
    """Internal: the child is gone (or must go) after ``answered`` answers of its batch; ``call`` is the
    call of the batch that was running (None: none was); ``code`` its exit code, or "memory"."""

    def __init__(self, call: int | None, timed_out: bool, code=None):
        self.call, self.timed_out, self.code = call, timed_out, code
        self.answered = 0


class Sandbox:
    """A child process that runs ``module:function`` calls with a timeout and a memory bound;
    with ``timeout`` 0 the calls run in this process, unguarded (no child is started)."""

    def __init__(self, timeout: float, memory: int | None):
        self.timeout = timeout
        self.memory = memory
        self._child: _Child | None = None
        self._spare: _Child | None = None  # started ahead, for when the current child is killed
        self._lock = threading.Lock()  # the owner thread and the exit hook both touch the children
        self.started = 0  # children started, for tests and the manifest
        self.retried = False  # the one retry of a first page that timed out (see the module's docstring)
        self._warm = False  # some child of this sandbox has answered a call
        #: the batch submit() sent and collect() has not taken: (target, calls, _Ran if the send failed)
        self._pending: tuple | None = None

    @property
    def _proc(self):
        """The current child's process (jobs/bench_sandbox.py reads its CPU time)."""
        return None if self._child is None else self._child.proc

    def _new(self, target: str | None) -> _Child:
        with self._lock:
            if _STOPPING.is_set():
                raise SandboxError("curate is exiting")
            child = _Child(self.memory, target)
            self.started += 1
            return child

    def start(self, target: str | None = None) -> None:
        """The current child, started and ready (``target`` imported in it)."""
        if self._child is None or self._child.proc.poll() is not None:
            self._drop()
            spare, self._spare = self._spare, None
            self._child = spare if spare is not None and spare.proc.poll() is None else self._new(target)
            if spare is not None and spare is not self._child:
                spare.close()
        self._child.wait_ready()

    def _drop(self) -> None:
        child, self._child = self._child, None
        if child is not None:
            child.close()

    def kill_children(self) -> None:
        """Kill the children from any thread (the exit hook); the owner thread reaps them."""
        with self._lock:
            for child in (self._child, self._spare):
                if child is not None:
                    child.kill()

    def call(self, target: str, *args):
        """``target(*args)`` in the child; PageTimeout / PageTooLarge / PageCrashed when it fails so."""
        result = self.map(target, [args])[0]
        if isinstance(result, BaseException):
            raise result
        return result

    def map(self, target: str, calls: list[tuple]) -> list:
        """``target(*args)`` for each ``args`` of ``calls``, each within the timeout from its own start:
        the results, an exception instance in place of a call that failed (PageTimeout, PageTooLarge,
        PageCrashed, or the function's own). The calls go to the child in one frame and come back one
        by one, so a batch costs one round trip, not one per page; after a call that kills the child
        the rest go to a fresh one."""
        self.submit(target, calls)
        return self.collect()

    def submit(self, target: str, calls: list[tuple]) -> None:
        """Send ``calls`` to the child and return at once: the caller reads its next input while the
        child works, and :meth:`collect` takes the results (as :meth:`map` returns them). One batch at
        a time: collect it before the next submit. While nobody collects, a page's timeout still runs
        from its own start: a page found past it at collect time is a timeout like any other."""
        if self._pending is not None:
            raise RuntimeError("a batch is already in flight: collect() it first")
        self._pending = (target, calls, None)
        if not self.timeout or not calls:
            return
        try:
            self.start(target)
            self._send(target, calls, list(range(len(calls))))
        except _Ran as ran:  # the child died before reading: collect() starts another, as map would
            self._pending = (target, calls, ran)
        except BaseException:
            self._pending = None
            self._drop()
            raise

    def abandon(self) -> None:
        """Forget the batch in flight, if any (its caller failed): the child goes, so that its answers
        never reach the next batch."""
        if self._pending is not None:
            self._pending = None
            self._drop()

    def collect(self) -> list:
        """The results of the batch :meth:`submit` sent (see :meth:`map`)."""
        if self._pending is None:
            raise RuntimeError("no batch in flight: submit() one first")
        (target, calls, failed), self._pending = self._pending, None
        if not self.timeout:
            fn = function(target)
            out = []
            for args in calls:
                try:
                    out.append(fn(*args))
                except Exception as e:
                    out.append(e)
            return out
        results: list = [None] * len(calls)
        todo = list(range(len(calls)))  # calls without a result, in order
        idle_deaths, alone, one_by_one = 0, False, False
        sent = True  # the first part, all of them, went in submit()
        while todo:
            # a retried first page goes alone; after a batch too big for the bound, every page does
            part = todo[:1] if alone or one_by_one else todo
            try:
                if failed is not None:
                    failed, ran = None, failed
                    raise ran
                if not sent:
                    self.start(target)
                    self._send(target, calls, part)
                sent = False
                self._receive(target, calls, part, results)
            except _Ran as ran:
                self._drop()
                if _STOPPING.is_set():
                    raise SandboxError("curate is exiting: the pages in hand were not extracted") from None
                rest, idle_deaths, alone = self._after(ran, part, results, idle_deaths)
                one_by_one = one_by_one or ran.code == "split"
                todo = rest + todo[len(part):]
                continue
            except BaseException:  # an interrupt mid-batch: its answers must not reach the next batch
                self._drop()
                raise
            todo, alone = todo[len(part):], False
        return results

    def _after(self, ran: _Ran, part: list[int], results: list, idle_deaths: int):
        """The calls of ``part`` still to run after the child went away while running them (the one
        that was running gets its result), the deaths outside a page so far, whether the first goes alone."""
        if ran.code == "split":
            return part, idle_deaths, False
        if ran.call is None:  # between calls: not a page's doing
            if idle_deaths:
                raise SandboxError(f"it died twice while no page was running ({_exit(ran.code)})")
            return part[ran.answered:], idle_deaths + 1, False
        k = part[ran.call]
        # the answers it held back (those calls ran to the end: they are not judged again), the calls after
        rest = part[ran.answered:ran.call] + part[ran.call + 1:]
        if ran.timed_out:
            if not self.retried and not self._warm:
                self.retried = True  # a cold first page: once more, alone, in a fresh child
                return [k] + rest, 0, True
            results[k] = PageTimeout(f"no result after {self.timeout:g} s (the extraction was stopped)")
        elif ran.code == "memory":
            results[k] = PageTooLarge(f"more than the {self.memory / 2**20:,.0f} MiB bound")
        else:
            results[k] = PageCrashed(f"the extraction process died ({_exit(ran.code)})" if ran.code < 0
                                     else f"the extraction process ended ({_exit(ran.code)})")
        return rest, 0, False

    def _send(self, target: str, calls: list[tuple], part: list[int]) -> None:
        """``part``'s calls to the current child, in one frame. _Ran when it is gone."""
        child = self._child
        child.batch += 1
        try:
            data = pickle.dumps((target, [calls[k] for k in part]), protocol=pickle.HIGHEST_PROTOCOL)
            # the length, then the pickle as it is: a frame made by joining them copied every page once more
            child.proc.stdin.write(HEADER.pack(len(data)))
            child.proc.stdin.write(data)
            child.proc.stdin.flush()
        except OSError:  # it died before reading: its exit says why (the next start too, if it cannot start)
            raise _Ran(None, False, child.proc.wait()) from None

    def _receive(self, target: str, calls: list[tuple], part: list[int], results: list) -> None:
        """The answers to ``part``'s calls, sent to the current child, in order. _Ran when the child is
        gone, killed at a timeout, or to be replaced after a page that ran out of memory."""
        child = self._child
        for pos, k in enumerate(part):
            try:
                kind, value = self._answer(child, target, pos)
                if kind == "unread" and len(part) > 1:  # the batch did not fit: its pages go one by one
                    raise _Ran(None, False, "split")
                if kind in ("memory", "unread"):  # a child that hit the bound may be fragmented: start afresh
                    raise _Ran(pos, False, "memory")
            except _Ran as ran:
                ran.answered = pos
                raise
            self._warm = True
            results[k] = value

    def _answer(self, child: _Child, target: str, pos: int):
        """The next answer frame of the child: waits while the clock says a call is running and
        within its timeout, or while no call of the batch has begun (reading it, importing)."""
        timeout_ns = int(self.timeout * 1e9)
        idle_since = time.monotonic()
        while True:
            answer = child.take()
            if answer is not None:
                return answer
            batch, call, began = child.clock.read()
            now = time.monotonic_ns()
            if batch == child.batch and call >= pos:  # (call pos - 1 until the child stamps pos)
                idle_since = time.monotonic()
                left = began + timeout_ns - now
                if left <= 0:
                    child.kill()
                    raise _Ran(call, True)
                if left < timeout_ns / 2:
                    self._prestart(target)
                    wait = left / 1e9
                else:  # wake at half the timeout to start the replacement, then at the timeout
                    wait = (left - timeout_ns / 2) / 1e9 + 1e-3
            else:
                if time.monotonic() - idle_since > START_SECONDS:
                    child.kill()
                    raise SandboxError(f"no page began within {START_SECONDS:g} s of the batch")
                wait = POLL_SECONDS
            try:
                child.read(wait)
            except EOFError:
                code = child.proc.wait()
                batch, call, _ = child.clock.read()
                raise _Ran(call if batch == child.batch and call >= pos else None, False, code) from None

    def _prestart(self, target: str) -> None:
        if self._spare is None:
            self._spare = self._new(target)

    def close(self) -> None:
        self._pending = None
        for child in (self._child, self._spare):
            if child is not None:
                child.close(graceful=child is self._child)
        self._child = self._spare = None

    def __enter__(self) -> Sandbox:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
