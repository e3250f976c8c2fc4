"""A new worker imports what the job's tasks will need before it joins the cluster.

A worker process starts with little imported; its first task then paid pandas, pyarrow, Dask's
DataFrame module (for the stages whose tasks need it) and the stage's own modules (numba's kernels
for fuzzy dedup): about 2 CPU-seconds, on every worker, inside the first stage. So a worker is given
this module as a Dask preload (``distributed.worker.preload``, set by
:func:`curate.app.cluster.connect`; the runner names the job's modules for MPI clusters, whose workers
start on their own nodes while the client plans) and imports the job's modules as it starts, before
it registers with the scheduler: never at the same time as a task, so no two threads of the worker
import the same modules at once (a circular import between two such threads can fail one of them).
Under MPI the client rank meanwhile imports the same modules itself while the workers start, on
their own nodes (:mod:`curate.app.cluster_mpi`).
Only imports, and a stage's once-per-process set-up it names as ``module:function`` (numba's
registries for fuzzy dedup's kernels): no child process, no model, no data (the extraction sandbox's
child still starts with the first page).

Every worker a local cluster spawns gets this preload, with or without modules: once the worker has
closed, its process ends as ``curate`` itself does (:func:`end_without_teardown`).
"""

from __future__ import annotations

import importlib
import logging

log = logging.getLogger("curate.worker")

#: the Dask config key naming the modules (set by the client, read by each worker)
KEY = "curate.worker-imports"
#: what every job's tasks import: the partitions' types, Parquet, the write tasks' own functions
COMMON = ("pandas", "pyarrow.parquet", "curate.stages.dataset.write")
#: Dask's DataFrame module (about 0.9 CPU-s, with dask.array, scipy and fsspec that it imports), for
#: the stages whose tasks run its code: shuffles (P2P's own functions import it) and reads through
#: ``dd.from_map`` (dedup's compact rows)
DATAFRAME = "dask.dataframe"
#: modules of stages whose tasks run none of it although they have a ``run`` of their own: extraction
#: (one stream-extract-write task per file), tokenize (a task reads its own piece), filter (made
#: partitions, its score sample combined by curate's functions). A job of extract_warc, clean, filter
#: and tokenize on a local cluster imports no dask.dataframe on its worker (tests/app/test_worker_warm.py)
NO_DATAFRAME = ("curate.stages.extract.", "curate.stages.tokenize.", "curate.stages.filters.stage")


def plain_tasks(cls) -> bool:
    """Whether the tasks of stage class ``cls`` run no dask.dataframe code on a worker: a per-document
    stage that keeps MapStage's own ``run`` and ``apply`` (its tasks make and write partitions, with no
    DataFrame collection), or one of :data:`NO_DATAFRAME`'s. Any other stage may build a collection
    (tag and redact read one, join_documents' ``apply`` groups one), so its workers import it."""
    from curate.stages.stage import MapStage

    if cls.__module__.startswith(NO_DATAFRAME):
        return True
    return issubclass(cls, MapStage) and cls.run is MapStage.run and cls.apply is MapStage.apply


def job_imports(stages) -> tuple[str, ...]:
    """The modules the tasks of these stage classes import: COMMON, dask.dataframe unless every stage's
    tasks are plain (:func:`plain_tasks`), each stage's module and the modules it names in
    ``worker_imports``."""
    stages = list(stages)
    names = [*COMMON, *(() if all(plain_tasks(cls) for cls in stages) else (DATAFRAME,))]
    for cls in stages:
        names += [cls.__module__, *getattr(cls, "worker_imports", ())]
    return tuple(dict.fromkeys(names))


def dask_setup(worker=None) -> None:
    import dask

    import_all(tuple(dask.config.get(KEY, default=()) or ()))
    end_without_teardown()


#: the worker of this process has closed (:func:`dask_teardown`): what is left is the process's exit
_closed = False


def dask_teardown(worker=None) -> None:
    global _closed
    _closed = True


def end_without_teardown() -> None:
    """Make a spawned worker process end, once its worker has closed, without the interpreter's
    teardown: freeing every object of pandas, Arrow, numba, dask.dataframe and distributed cost a local
    worker about 0.6 of its 3.8 CPU-s over an empty partition. multiprocessing ends such a process with
    ``sys.exit(exitcode)`` from its main thread; that one call becomes :func:`curate.app.exit.exit_now`
    (threads joined, every exit handler run, streams flushed, the same code), as for ``curate`` itself.
    Any other ``sys.exit`` (a task's, in a worker thread; any before the worker closed) raises
    SystemExit as before. An MPI rank is not a multiprocessing child: it ends in ``cluster_mpi``."""
    import multiprocessing
    import sys
    import threading

    if multiprocessing.parent_process() is None or getattr(sys.exit, "curate_exit", False):
        return
    original = sys.exit

    def exit(code=None):
        if _closed and isinstance(code, int) and threading.current_thread() is threading.main_thread():
            from curate.app.exit import exit_now

            exit_now(code)
        original(code)

    exit.curate_exit = True
    sys.exit = exit


def import_all(modules, call: bool = True) -> None:
    """Import each module; of a ``module:function`` entry also call the function (unless not ``call``:
    the client imports a job's modules, but pays no worker's once-per-process costs)."""
    for entry in modules:
        name, _, function = entry.partition(":")
        try:
            module = importlib.import_module(name)
            if function and call:
                getattr(module, function)()
        except Exception as e:  # not lost: the task that imports it raises the same error, in its context
            log.debug("worker warm-up: %s failed: %s", entry, e)
