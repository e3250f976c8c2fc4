"""How the ``curate`` process ends once a command is over (:func:`exit_now`)."""

from __future__ import annotations

import os
import sys


def exit_now(code: int) -> None:
    """End the process as the interpreter would, minus its teardown: after a run, freeing the
    objects of every imported module (pandas, Arrow, numba, distributed) took about 1 s of a tiny
    job's 5, for nothing. Non-daemon threads are joined and the exit handlers run (logging flushes,
    temporary folders go) exactly as at a normal exit; every output file was closed by its writer."""
    import atexit
    import threading

    # what the interpreter's exit does first: tell thread pools to stop (their workers are not daemon
    # threads and wait for work otherwise), then join every non-daemon thread
    threading._shutdown()
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (BrokenPipeError, ValueError):  # a reader that left; a stream a library closed
            pass
    os._exit(code)


def in_mpi() -> bool:
    """Whether this process is still inside MPI: then it must exit normally, since mpi4py calls
    MPI_Finalize from the interpreter's teardown (Py_AtExit). A rank that has left MPI
    (``cluster_mpi._mpi_done``) need not."""
    mpi = sys.modules.get("mpi4py.MPI")
    return mpi is not None and mpi.Is_initialized() and not mpi.Is_finalized()
