"""Getting a Dask cluster: the only place in curate that creates a client.

``--cluster`` chooses, the same for every subcommand:

- ``local``: a LocalCluster, one single-threaded worker process per core, a memory
  limit per worker, the dashboard on 127.0.0.1:8787 (or a free port when that one is taken).
- ``mpi``: under ``mpirun``/``srun``: rank 0 the scheduler, rank 1 the job, ranks 2.. the workers,
  over TLS, with lost ranks handled and a quiet shutdown (:mod:`curate.app.cluster_mpi`).
- ``auto`` (default): ``threads`` when the run's input is small (at most ``AUTO_THREADS_BYTES``
  on disk) and no worker was sized (``--workers``, ``--memory-limit``, ``--dashboard-address``,
  ``--local-directory``), else ``local``; the log says which and why (:func:`resolve_auto`).
- ``threads``: no cluster at all: Dask's threaded scheduler in this process (``--workers`` threads,
  default one per core). Nothing listens, nothing is spawned; no dashboard, no live page, no Dask
  performance report (the HTML report is still written). For small runs and notebooks.
- a scheduler file path, or ``tcp://``/``tls://host:port``: attach to a running cluster (never shut
  it down).

Every cluster curate starts speaks TLS with mutual authentication (``cluster_security``): a process
without the cluster's certificate can neither connect nor listen in. The dashboard (HTTP, no
authentication) listens on 127.0.0.1 of the scheduler's machine unless ``--dashboard-address`` says
otherwise.

This module keeps the choice (:func:`connect`) and the local cluster; the rest lives beside it, one
concern a module, and every name stays importable from here: ``cluster_settings`` (what a run asks
for), ``cluster_security`` (TLS, the dashboard's address), ``cluster_mpi`` (the MPI cluster) and
``cluster_client`` (a new client's worker log filters and banner).
"""

from __future__ import annotations

import contextlib
import logging
import os

from curate.app.cluster_client import (
    announce as announce,
    install_log_filters as install_log_filters,
)
from curate.app.cluster_mpi import (
    EXIT_CLUSTER_LOST as EXIT_CLUSTER_LOST,
    EXIT_GRACE_SECONDS as EXIT_GRACE_SECONDS,
    JOB_START_TIMEOUT as JOB_START_TIMEOUT,
    JOB_WATCH as JOB_WATCH,
    WORKERS_JOIN_TIMEOUT as WORKERS_JOIN_TIMEOUT,
    ClusterLost as ClusterLost,
    NotClientRank as NotClientRank,
    WorldTooSmall as WorldTooSmall,
    _mpi,
    _node_address as _node_address,
)
from curate.app.cluster_security import (
    DEFAULT_DASHBOARD_PORT as DEFAULT_DASHBOARD_PORT,
    cluster_security as cluster_security,
    local_dashboard_address as local_dashboard_address,
)
from curate.app.cluster_settings import (
    AUTO_THREADS_BYTES as AUTO_THREADS_BYTES,
    ClusterSettings,
    resolve_auto as resolve_auto,
)

log = logging.getLogger("curate.cluster")

#: Dask's periodic self-observation, made less frequent: every server (scheduler, worker, nanny,
#: client) checks its event loop every 20 ms and samples its system every 500 ms, and every worker
#: profiles its threads every 10 ms. Idle, that cost a scheduler and two workers about 5% of a core,
#: which on a head node of a quarter core is a fifth of it, and every worker pays it for the whole
#: run. Defaults only: a user's Dask config or DASK_* variables still decide (turn the profiler back
#: on with DASK_DISTRIBUTED__WORKER__PROFILE__ENABLED=True for the performance report's profile).
LEAN_DASK = {"distributed": {
    "worker": {"profile": {"enabled": False}},
    "admin": {"tick": {"interval": "500ms"}, "system-monitor": {"interval": "2s", "gil": {"enabled": False}}},
}}


def lean_dask() -> None:
    """Apply :data:`LEAN_DASK` as Dask's defaults in this process (its local workers get them with the
    rest of the config; each MPI rank applies them itself)."""
    import dask
    import distributed  # noqa: F401  (its defaults first, so that these replace them)

    user = dask.config.collect()  # the user's YAML files and DASK_* variables, without the defaults
    mine = {"distributed": {
        part: {k: v for k, v in values.items() if k not in user.get("distributed", {}).get(part, {})}
        for part, values in LEAN_DASK["distributed"].items()}}
    # a user's own value wins even where it equals Dask's default (which update_defaults would replace)
    dask.config.update_defaults(mine)


def warm_workers(modules: tuple[str, ...]) -> None:
    """Workers started from here on import ``modules`` as they start (:mod:`curate.app.worker_warm`):
    Dask's ``distributed.worker.preload`` gets that module, after any preload of the user's. It is
    there also without modules: a spawned worker's process then ends without the interpreter's
    teardown (:func:`curate.app.worker_warm.end_without_teardown`)."""
    import dask

    from curate.app import worker_warm

    dask.config.set({worker_warm.KEY: list(modules)})  # empty: a later cluster in this process warms nothing
    preload = list(dask.config.get("distributed.worker.preload", default=[]) or [])
    if worker_warm.__name__ not in preload:
        preload.append(worker_warm.__name__)
    dask.config.set({"distributed.worker.preload": preload})


def _memory_per_worker(n: int, requested: str | None):
    if requested:
        return requested
    from distributed.system import MEMORY_LIMIT

    return int(MEMORY_LIMIT * 0.9 / n)


@contextlib.contextmanager
def connect(settings: ClusterSettings):
    """Yield a connected ``distributed.Client`` (None for ``threads``: no cluster); tear down whatever
    was started here afterwards. An ``auto`` not resolved by the caller (:func:`resolve_auto`, which
    knows the input) is a local cluster."""
    if settings.mode == "auto":
        settings = resolve_auto(settings, None)
    if settings.auto_reason:
        log.info("cluster: auto chose %s (%s; --cluster local|threads to choose)", settings.mode, settings.auto_reason)
    if settings.mode == "threads":
        import dask
        import dask.threaded

        threads = settings.workers or os.cpu_count() or 1
        log.info("no cluster: Dask's threaded scheduler in this process, %d threads (nothing listens)", threads)
        # the function, not the name "threads": given a name, dask.compute imports distributed (0.3 s)
        # to look for a client first
        with dask.config.set(scheduler=dask.threaded.get, num_workers=threads):
            yield None
    elif settings.mode == "local":
        lean_dask()
        warm_workers(settings.worker_imports)
        with _local(settings) as client:
            yield client
    elif settings.mode == "mpi":
        lean_dask()
        warm_workers(settings.worker_imports)
        with _mpi(settings) as client:
            yield client
    else:
        from distributed import Client

        if settings.workers is not None:
            log.warning("--workers %d is ignored when attaching to a running cluster (%s): it has the "
                        "workers it was started with", settings.workers, settings.mode)
        # a tls:// scheduler: Client takes the certificates from dask's config (distributed.comm.tls.*)
        kwargs = {"address": settings.mode} if "://" in settings.mode else {"scheduler_file": settings.mode}
        with Client(**kwargs) as client:
            announce(client, f"attached to {client.scheduler.address}")
            yield client


@contextlib.contextmanager
def _local(settings: ClusterSettings):
    from distributed import Client

    from curate.app import signals

    n = settings.workers or os.cpu_count() or 1
    cluster = None
    try:
        # the nannies and workers inherit the held signals: Ctrl-C to the process group or SIGTERM to
        # every process of a SLURM step reach only this process, which stops them; a signal during
        # the start is delivered once ``cluster`` can be closed
        with signals.held():
            cluster = _start_local(settings, n)
        with Client(cluster) as client:
            announce(client, f"local cluster: {n} worker(s) x {settings.threads_per_worker} thread(s), "
                             f"scheduler {client.scheduler.address} (TLS)")
            yield client
    except KeyboardInterrupt:
        _quiet_distributed()  # the cancelled tasks and closing comms would each log a traceback
        raise
    finally:
        if cluster is not None:
            _close_local(cluster)


def _quiet_distributed() -> None:
    for name in ("distributed", "tornado", "asyncio"):
        logging.getLogger(name).setLevel(logging.CRITICAL)


def _start_local(settings: ClusterSettings, n: int):
    from distributed import LocalCluster

    return LocalCluster(
        n_workers=n,
        threads_per_worker=settings.threads_per_worker,
        processes=True,
        host="127.0.0.1",
        # other users of a shared login node reach 127.0.0.1 too: TLS with a certificate that only
        # this process and its workers hold (handed to the worker processes when they are spawned)
        protocol="tls://",
        security=cluster_security(),
        dashboard_address=local_dashboard_address(settings.dashboard_address),
        memory_limit=_memory_per_worker(n, settings.memory_limit),
        local_directory=settings.local_directory,
    )


def _close_local(cluster) -> None:
    """Stop a LocalCluster; on an overloaded machine a worker process may outlive the nannies' few
    seconds' grace: they kill it, and the timeout that follows is reported as one warning line
    instead of failing a job whose output is complete."""
    tornado_log = logging.getLogger("tornado.application")  # logs the same timeout with a traceback
    level = tornado_log.level
    tornado_log.setLevel(logging.CRITICAL)
    try:
        cluster.close()
    except TimeoutError:
        log.warning("the local cluster did not stop in time; its worker processes were killed")
    finally:
        tornado_log.setLevel(level)
