"""``--cluster mpi``: a Dask cluster made of the ranks of an ``mpirun``/``srun``.

Rank 0 runs the scheduler, rank 1 the client that runs the job and ranks 2.. the workers (what
dask-mpi does, written out here to add what it lacks: TLS, loss handling). Rank 0 makes a fresh CA
and certificate and hands them to the other ranks over MPI, then every rank leaves MPI, so that a
dead worker is only a lost Dask worker. At the end the client tells every rank the job is over,
retires the workers, then stops the scheduler: exit 0 everywhere and no CommClosedError tracebacks.
When the job rank or the scheduler is lost instead, every other rank stops within seconds with
EXIT_CLUSTER_LOST. Ranks other than 1 never return: they raise :class:`NotClientRank` with their
exit code.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import sys

from curate.app.cluster_client import announce
from curate.app.cluster_security import _security_fields, cluster_security, local_dashboard_address
from curate.app.cluster_settings import ClusterSettings
from curate.stages.errors import CurateError, SettingsError

log = logging.getLogger("curate.cluster")


class NotClientRank(Exception):
    """Raised on MPI ranks other than 1 once their scheduler or worker has finished: 0 when the job
    rank ended the cluster, EXIT_CLUSTER_LOST when the scheduler or the job rank was lost."""

    def __init__(self, exit_code: int = 0):
        super().__init__(exit_code)
        self.exit_code = exit_code


class WorldTooSmall(SettingsError):
    """Every rank finds this at once; only rank 0 reports it."""


#: a rank whose cluster lost its scheduler or its job rank exits with this code
EXIT_CLUSTER_LOST = 3
#: after its Dask server has stopped, a rank is gone within this many seconds, even when a task
#: thread is still busy (Python would otherwise wait for it at exit)
EXIT_GRACE_SECONDS = 10
#: the scheduler stops when no job rank has connected within this time
JOB_START_TIMEOUT = 120
#: how long the job waits for all MPI workers to join before it starts with those that did
WORKERS_JOIN_TIMEOUT = 120


class ClusterLost(CurateError):
    """The scheduler (or the connection to it) is gone: the job cannot go on; re-submit to resume."""

    exit_code = EXIT_CLUSTER_LOST


def _node_address(interface: str | None, towards: str | None = None) -> str:
    """The IPv4 address this node is reached at: the interface's, else the one that routes to
    ``towards`` (the scheduler, for workers) or to the outside world, else the first one that is
    not loopback (compute nodes often have no default route), else 127.0.0.1 (one machine)."""
    import warnings

    import psutil
    from distributed.utils import get_ip, get_ip_interface

    if interface:
        try:
            return get_ip_interface(interface)
        except ValueError as e:
            raise SettingsError(f"--interface {interface}: {e}") from None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        ip = get_ip(towards) if towards else get_ip()
    if not ip.startswith("127."):
        return ip
    up = {name for name, st in psutil.net_if_stats().items() if st.isup}
    for name, addrs in sorted(psutil.net_if_addrs().items()):
        for a in addrs:
            if name in up and a.family == socket.AF_INET and not a.address.startswith("127."):
                return a.address
    return "127.0.0.1"


def _set_exit_deadline(code: int, seconds: float = EXIT_GRACE_SECONDS) -> None:
    """Make sure this process is gone ``seconds`` from now with ``code``, whatever still runs."""
    import threading

    def hard_exit():
        with contextlib.suppress(Exception):
            sys.stderr.flush()
            sys.stdout.flush()
        os._exit(code)

    t = threading.Timer(seconds, hard_exit)
    t.daemon = True
    t.start()


JOB_WATCH = "curate-job-watch"


def _job_watch(start_timeout: float):
    """Scheduler plugin on rank 0: when the job rank's client goes away before it said the job is
    over (the process died or was killed, or its node went silent past the TCP timeout), or never
    connects, stop the scheduler; the workers then lose it and stop too. Nobody idles until the
    allocation's time limit."""
    import asyncio

    from distributed.diagnostics.plugin import SchedulerPlugin

    class JobWatch(SchedulerPlugin):
        name = JOB_WATCH

        def __init__(self):
            self.job_client: str | None = None
            self.done = False
            self.lost: str | None = None
            self.scheduler = None

        async def start(self, scheduler):
            self.scheduler = scheduler
            asyncio.get_running_loop().call_later(start_timeout, self._check_started)

        def _check_started(self):
            if self.job_client is None and not self.done:
                self._stop(f"no job rank connected within {start_timeout:.0f}s")

        def add_client(self, scheduler, client):
            # the job rank's client is the first to connect (workers only make clients of their own
            # later, inside tasks); it confirms itself through _watch_job right after
            if self.job_client is None:
                self.job_client = client

        def remove_client(self, scheduler, client):
            if client == self.job_client and not self.done:
                self._stop("the job rank (MPI rank 1) disconnected before the job finished")

        def _stop(self, why: str):
            if self.lost is None and self.scheduler is not None:
                self.lost = why
                log.error("%s; stopping the Dask cluster", why)
                asyncio.ensure_future(self.scheduler.close(reason="curate-job-lost"))

    return JobWatch()


def _watch_job(client_id: str, dask_scheduler=None) -> None:
    dask_scheduler.plugins[JOB_WATCH].job_client = client_id


def _mark_done(dask_scheduler=None) -> None:
    """Tell rank 0 that the job is over: the scheduler stopping now is the plan, not a loss."""
    dask_scheduler.plugins[JOB_WATCH].done = True


def _mark_worker_done(dask_worker=None) -> None:
    """Tell a worker rank that the job is over: its exit code will be 0."""
    dask_worker.curate_job_done = True


def _dashboard_address(requested: str | None) -> str:
    # Dask's dashboard has no authentication: by default only the scheduler node itself reaches it
    return local_dashboard_address(requested)


def _warm_scheduler() -> None:
    """Import what the graphs the scheduler unpickles name (Dask's DataFrame functions: shuffles, the
    dedup steps), now, while the workers import theirs on their nodes: else the first stage with a
    shuffle paid it on the head (1.3 CPU-s, 5 s of a quarter-core head node in the emulated sweep)."""
    import importlib

    for name in ("pandas", "pyarrow", "dask.dataframe"):
        importlib.import_module(name)


async def _run_scheduler(comm, security, settings: ClusterSettings, host: str) -> int:
    from distributed import Scheduler

    watch = _job_watch(JOB_START_TIMEOUT)
    dashboard = _dashboard_address(settings.dashboard_address)
    async with Scheduler(host=host, protocol="tls", security=security, dashboard_address=dashboard) as scheduler:
        await scheduler.register_scheduler_plugin(watch, name=JOB_WATCH, idempotent=False)
        http = scheduler.http_server
        dash_port = http.port if http is not None else None
        dash_host = dashboard.rpartition(":")[0]
        dash_host = host if dash_host in ("", "0.0.0.0", "[::]") else dash_host
        comm.bcast({"address": scheduler.address, "node": socket.gethostname(), "dashboard_host": dash_host,
                    "dashboard_port": dash_port}, root=0)
        _mpi_done()
        _warm_scheduler()
        await scheduler.finished()
    return 0 if watch.done and watch.lost is None else EXIT_CLUSTER_LOST


async def _run_worker(info: dict, security, settings: ClusterSettings, rank: int) -> int:
    from distributed import Worker
    from distributed.comm import get_address_host

    host = _node_address(settings.interface, towards=get_address_host(info["address"]))
    # a worker's HTTP server (Prometheus metrics, health) has no authentication either: loopback only
    async with Worker(info["address"], host=host, protocol="tls", security=security, name=rank,
                      dashboard_address="127.0.0.1:0",
                      nthreads=settings.threads_per_worker, memory_limit=settings.memory_limit or "auto",
                      local_directory=settings.local_directory) as worker:
        await worker.finished()
    return 0 if getattr(worker, "curate_job_done", False) else EXIT_CLUSTER_LOST


def _mpi_done() -> None:
    """Leave MPI as soon as the cluster's addresses and certificates are exchanged.

    After MPI_Finalize a rank is a plain process to the launcher: under srun a worker rank that dies
    later (OOM killer, SIGKILL, a node's trouble) no longer makes the PMIx server abort the whole
    step, and the others do not hang in MPI_Finalize's fence waiting for it at the end.
    """
    from mpi4py import MPI

    if not MPI.Is_finalized():
        MPI.Finalize()


@contextlib.contextmanager
def _mpi(settings: ClusterSettings):
    try:
        from mpi4py import MPI
    except ImportError as e:  # pragma: no cover - mpi4py is a dependency
        raise SettingsError(f"--cluster mpi needs mpi4py: {e}") from e
    import asyncio

    comm = MPI.COMM_WORLD
    size, rank = comm.Get_size(), comm.Get_rank()
    if size < 3:
        raise WorldTooSmall(
            f"--cluster mpi needs at least 3 MPI ranks (scheduler, job, one worker); got {size}"
        )
    from distributed import Client
    from distributed.security import Security

    # rank 0 makes the cluster's CA and certificate and hands them over MPI: only the ranks of this
    # job ever hold them
    fields = comm.bcast(_security_fields(cluster_security()) if rank == 0 else None, root=0)
    security = Security(require_encryption=True, **fields)
    if rank == 0:
        code = asyncio.run(_run_scheduler(comm, security, settings, _node_address(settings.interface)))
        _exit_rank(code)
    info = comm.bcast(None, root=0)
    _mpi_done()
    if rank != 1:
        _exit_rank(asyncio.run(_run_worker(info, security, settings, rank)))

    client = Client(info["address"], security=security)
    job_over = _watch_scheduler(client, info["node"])
    try:
        client.run_on_scheduler(_watch_job, client.id)
        from curate.app.worker_warm import import_all

        import_all(settings.worker_imports, call=False)  # the job's modules, while the workers start on their nodes
        if settings.workers is not None:
            log.warning("--workers %d is ignored with --cluster mpi: the workers are MPI ranks 2..%d; "
                        "launch more ranks to get more workers", settings.workers, size - 1)
        with contextlib.suppress(Exception):
            client.wait_for_workers(size - 2, timeout=WORKERS_JOIN_TIMEOUT)
        client.wait_for_workers(1, timeout=WORKERS_JOIN_TIMEOUT)
        announce(client, f"MPI cluster: {size} ranks, scheduler {info['address']} on {info['node']} (TLS)",
                 mpi_info=info)
        yield client
    except BaseException as e:
        if _scheduler_lost(client):
            _set_exit_deadline(EXIT_CLUSTER_LOST)
            raise ClusterLost(
                f"lost the Dask scheduler (MPI rank 0 on {info['node']}); every rank stops; "
                "submit the same command again to resume from the finished stages"
            ) from e
        raise
    finally:
        job_over.set()
        if _scheduler_lost(client):
            with contextlib.suppress(Exception):
                client.close(timeout=2)
        else:
            _shutdown_quietly(client)


def _watch_scheduler(client, node: str):
    """On the job rank: once the scheduler is gone, give the job EXIT_GRACE_SECONDS to fail and
    unwind by itself (its error names the loss), then end the process with EXIT_CLUSTER_LOST.

    Without this the job rank can sit out distributed's reconnection timeout (30 s) in whatever
    still talks to the scheduler on the way out (the performance report, for one). Returns the event
    that switches the watch off when the job ends on its own.
    """
    import threading
    import time

    job_over = threading.Event()

    def watch():
        while not job_over.wait(0.5):
            if _scheduler_lost(client):
                deadline = time.monotonic() + EXIT_GRACE_SECONDS
                while time.monotonic() < deadline:
                    if job_over.wait(0.5):
                        return
                print(f"curate: error: lost the Dask scheduler (MPI rank 0 on {node}); every rank stops; "
                      "submit the same command again to resume from the finished stages", file=sys.stderr,
                      flush=True)
                os._exit(EXIT_CLUSTER_LOST)

    threading.Thread(target=watch, name="curate-scheduler-watch", daemon=True).start()
    return job_over


def _scheduler_lost(client) -> bool:
    return client.status not in ("running", "newly-created")


def _exit_rank(code: int):
    """End a scheduler or worker rank with ``code``. MPI is over by now (:func:`_mpi_done`), so nothing
    needs the interpreter's teardown, which freed every object of pandas, Arrow, numba and distributed
    for about 0.6 CPU-s of each rank: the rank ends as ``curate`` itself does (:func:`exit_now`: threads
    joined, exit handlers run, streams flushed). Before that (a rank that failed early) it unwinds."""
    _set_exit_deadline(code)
    if code:
        log.error("the Dask cluster stopped before the job finished; this rank exits with code %d", code)
    from mpi4py import MPI

    if MPI.Is_finalized():
        from curate.app.exit import exit_now

        exit_now(code)
    raise NotClientRank(code)


def _shutdown_quietly(client, timeout: float = 30.0) -> None:
    """Tell every rank the job is over, close the workers and wait until they are gone, then stop
    the scheduler.

    In that order no rank is left talking to a closed socket, so the log stays free of the
    CommClosedError tracebacks that plain dask-mpi prints at exit, and every rank exits with 0.
    """
    import time

    with contextlib.suppress(Exception):
        client.run_on_scheduler(_mark_done)
    with contextlib.suppress(Exception):
        client.run(_mark_worker_done, on_error="ignore")
    with contextlib.suppress(Exception):
        client.retire_workers(close_workers=True, remove=False)
        deadline = time.monotonic() + timeout
        while client.scheduler_info(n_workers=-1)["workers"] and time.monotonic() < deadline:
            time.sleep(0.1)
    for name in ("distributed.comm", "distributed.core", "distributed.batched", "distributed.client"):
        logging.getLogger(name).setLevel(logging.CRITICAL)
    with contextlib.suppress(Exception):
        client.shutdown()
    with contextlib.suppress(Exception):
        client.close()
