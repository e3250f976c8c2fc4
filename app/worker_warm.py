"""A new worker imports what the job's tasks will need before it joins the cluster.

A worker process starts with little imported; its first task then paid pandas, pyarrow, Dask's
DataFrame module and the stage's own modules (numba's kernels for fuzzy dedup): about 2 CPU-seconds,
on every worker, inside the first stage. So a worker is given this module as a Dask preload
(``distributed.worker.preload``, set by :func:`curate.app.cluster.connect` when the settings name
modules: the runner names the job's for MPI clusters, whose workers start on their own nodes while
the client plans) and imports the job's modules as it starts, before it registers with the scheduler: never at the
same time as a task, so no two threads of the worker import the same modules at once (a circular
import between two such threads can fail one of them). Under MPI the client rank meanwhile imports
the same modules itself while the workers start, on their own nodes (:mod:`curate.app.cluster_mpi`).
Only imports, and a stage's once-per-process set-up it names as ``module:function`` (numba's
registries for fuzzy dedup's kernels): no child process, no model, no data (the extraction sandbox's
child still starts with the first page).
"""

from __future__ import annotations

import importlib
import logging

log = logging.getLogger("curate.worker")

#: the Dask config key naming the modules (set by the client, read by each worker)
KEY = "curate.worker-imports"
#: what every job's tasks import: the partitions' types, Parquet, the task graphs' own functions
COMMON = ("pandas", "pyarrow.parquet", "dask.dataframe", "curate.stages.dataset.write")


def job_imports(stages) -> tuple[str, ...]:
    """The modules the tasks of these stage classes import: COMMON, each stage's module and the
    modules it names in ``worker_imports``."""
    names = list(COMMON)
    for cls in stages:
        names += [cls.__module__, *getattr(cls, "worker_imports", ())]
    return tuple(dict.fromkeys(names))


def dask_setup(worker=None) -> None:
    import dask

    import_all(tuple(dask.config.get(KEY, default=()) or ()))


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
