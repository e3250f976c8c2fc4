"""The signals a run stops for: Ctrl-C (SIGINT) and SIGTERM (what SLURM sends at a time limit or on
``scancel``, and what ``kill`` sends), both handled the same way, at every moment of a run.

- Both raise in the main thread (SIGTERM as :class:`Terminated`, a ``KeyboardInterrupt``), so every
  ``finally`` runs: the cluster is stopped, locks are released, the journal says where to resume. The
  CLI prints one line and exits 130 (SIGINT) or 143 (SIGTERM).
- While a local cluster starts, both are held (:func:`held`): the worker processes started then
  have them blocked, so a terminal's Ctrl-C (sent to the whole process group) or SLURM's SIGTERM to
  every process of the step reaches only curate, which stops them. A signal that comes during the
  start is raised when it ends, once the cluster can be stopped, instead of dropped.
- A ``KeyboardInterrupt`` raised inside a garbage-collection callback (distributed installs one) is
  printed and dropped by Python; :func:`_unraisable` raises it again in the main thread, and
  :func:`check` (between stages, at the end of a command) stops a run whose interrupt was lost anyway.
"""

from __future__ import annotations

import contextlib
import signal
import sys
import threading

STOPS = (signal.SIGINT, signal.SIGTERM)
#: the libraries whose logging a stopping run silences
#: (distributed's logging config gives some child loggers a level of their own, so they are named too:
#: its sync() can log a NameError from its cancel callback through "tornado.application" when the
#: signal lands before its future exists)
QUIETED = ("distributed", "distributed.client", "distributed.gc", "tornado", "tornado.application", "asyncio")

#: the signal received, if any (reset by :func:`handled`)
_received: int | None = None


class Terminated(KeyboardInterrupt):
    """SIGTERM, handled as Ctrl-C is."""


class AfterStages(KeyboardInterrupt):
    """A stop that came once every stage had finished, while the reports were written."""

    def __init__(self, terminated: bool, output: str):
        super().__init__()
        self.terminated, self.output = terminated, output


class TerminatedAfterStages(AfterStages, Terminated):
    pass


def after_stages(e: BaseException, output: str) -> AfterStages:
    cls = TerminatedAfterStages if isinstance(e, Terminated) else AfterStages
    return cls(isinstance(e, Terminated), output)


def exit_code(e: BaseException) -> int:
    return 128 + signal.SIGTERM if isinstance(e, Terminated) else 130


def message(e: BaseException) -> str:
    what = "terminated (SIGTERM)" if isinstance(e, Terminated) else "interrupted"
    if isinstance(e, AfterStages):
        return (f"curate: {what} while the run's reports were written; every stage had finished and its output "
                f"is complete (curate report {e.output} writes the page again)")
    return f"curate: {what}"


def _interrupt(signum: int):
    return Terminated() if signum == signal.SIGTERM else KeyboardInterrupt()


def _handler(signum, frame):
    global _received
    _received = signum
    _quiet_libraries()
    raise _interrupt(signum)


def _quiet_libraries() -> None:
    """The run is stopping: what distributed, tornado and asyncio log from now on (cancelled gathers,
    "Task exception was never retrieved" with an AllExit traceback, closing comms) is its echo, not
    news. Quieted here, at the signal, not once the exception reaches the cluster's context: a gather's
    task can be collected and logged on the way there."""
    import logging

    for name in QUIETED:
        logging.getLogger(name).setLevel(logging.CRITICAL)


def _unraisable(hook):
    def unraisable(args):
        if isinstance(args.exc_value, KeyboardInterrupt) and threading.current_thread() is threading.main_thread():
            import _thread

            # dropped where it was raised (a gc callback): raised again in the main thread from another
            # thread once the callback is over (raised from here, it would be dropped once more)
            threading.Timer(0.05, _thread.interrupt_main, args=(_received or signal.SIGINT,)).start()
            return
        hook(args)
    return unraisable


@contextlib.contextmanager
def handled():
    """SIGINT and SIGTERM raise in the main thread for the duration (elsewhere: nothing changes)."""
    global _received
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    import logging

    _received = None
    levels = {name: logging.getLogger(name).level for name in QUIETED}
    before = {s: signal.signal(s, _handler) for s in STOPS}
    hook = sys.unraisablehook
    sys.unraisablehook = _unraisable(hook)
    try:
        yield
    finally:
        sys.unraisablehook = hook
        for s, h in before.items():
            signal.signal(s, h)
        for name, level in levels.items():  # the process may go on (the Python API, tests)
            logging.getLogger(name).setLevel(level)


def check() -> None:
    """Raise the interrupt again when one was received but lost (swallowed by a library)."""
    if _received is not None:
        raise _interrupt(_received)


@contextlib.contextmanager
def held():
    """SIGINT and SIGTERM held for the duration: the threads and processes started meanwhile (the
    local cluster's IO loop, which spawns its worker processes, and so the workers) inherit them
    blocked, for good; one that arrives meanwhile is raised when the duration ends, once what was
    started can be stopped."""
    global _received
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    from multiprocessing import resource_tracker

    # started here, or the first process started within would start it, and its start unblocks both
    # signals in that thread (multiprocessing's ensure_running)
    resource_tracker.ensure_running()
    got: list[int] = []
    # threads started earlier may take the signal: Python then runs this in the main thread
    handlers = {s: signal.signal(s, lambda signum, frame: got.append(signum)) for s in STOPS}
    mask = signal.pthread_sigmask(signal.SIG_BLOCK, STOPS)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)  # one pending in this thread comes now
        for s, h in handlers.items():
            signal.signal(s, h)
    if got:
        _received = got[0]
        raise _interrupt(got[0])
