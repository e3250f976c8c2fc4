"""Getting a Dask cluster: the only place in curate that creates a client.

``--cluster`` chooses, the same for every subcommand:

- ``local`` (default): a LocalCluster, one single-threaded worker process per core, a memory
  limit per worker, the dashboard on 127.0.0.1:8787 (or a free port when that one is taken).
- ``mpi``: under ``mpirun``/``srun``. ``dask_mpi.initialize()`` makes rank 0 the scheduler, rank 1
  the client that runs the job and ranks 2.. the workers. At the end the client retires the workers
  before it stops the scheduler, so no rank sees a closed connection (plain dask-mpi stops the
  scheduler first and the workers print CommClosedError tracebacks).
- a scheduler file path, or ``tcp://host:port``: attach to a running cluster (never shut it down).
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import sys
from dataclasses import dataclass

from modules.errors import SettingsError

log = logging.getLogger("curate.cluster")

DEFAULT_DASHBOARD_PORT = 8787


class NotClientRank(Exception):
    """Raised on MPI ranks other than 1 once their scheduler or worker has finished."""


class WorldTooSmall(SettingsError):
    """Every rank finds this at once; only rank 0 reports it."""


@dataclass(frozen=True)
class ClusterSettings:
    mode: str = "local"
    workers: int | None = None
    threads_per_worker: int = 1
    memory_limit: str | None = None  # per worker; default: the machine's memory split evenly
    dashboard_address: str | None = None
    local_directory: str | None = None

    def __post_init__(self):
        if self.workers is not None and self.workers < 1:
            raise SettingsError(f"--workers must be at least 1; got {self.workers}")
        if self.threads_per_worker < 1:
            raise SettingsError(f"--threads-per-worker must be at least 1; got {self.threads_per_worker}")
        if self.memory_limit not in (None, "auto"):
            from dask.utils import parse_bytes

            try:
                parse_bytes(self.memory_limit)
            except (ValueError, TypeError):
                raise SettingsError(f"--memory-limit must be a size such as 4GiB; got {self.memory_limit!r}") from None
        if self.mode not in ("local", "mpi") and not self.mode.startswith(("tcp://", "tls://", "ucx://")):
            if not os.path.isfile(self.mode):
                raise SettingsError(
                    f"--cluster {self.mode!r}: not local, mpi, a tcp:// address or an existing scheduler file"
                )


def _port_free(host: str, port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind((host, port))
        except OSError:
            return False
    return True


def local_dashboard_address(requested: str | None) -> str:
    if requested:
        return requested
    if _port_free("127.0.0.1", DEFAULT_DASHBOARD_PORT):
        return f"127.0.0.1:{DEFAULT_DASHBOARD_PORT}"
    log.info("port %d is taken; the dashboard gets a free port", DEFAULT_DASHBOARD_PORT)
    return "127.0.0.1:0"


def _memory_per_worker(n: int, requested: str | None):
    if requested:
        return requested
    from distributed.system import MEMORY_LIMIT

    return int(MEMORY_LIMIT * 0.9 / n)


@contextlib.contextmanager
def connect(settings: ClusterSettings):
    """Yield a connected ``distributed.Client``; tear down whatever was started here afterwards."""
    if settings.mode == "local":
        with _local(settings) as client:
            yield client
    elif settings.mode == "mpi":
        with _mpi(settings) as client:
            yield client
    else:
        from distributed import Client

        kwargs = {"address": settings.mode} if "://" in settings.mode else {"scheduler_file": settings.mode}
        with Client(**kwargs) as client:
            announce(client, f"attached to {client.scheduler.address}")
            yield client


@contextlib.contextmanager
def _local(settings: ClusterSettings):
    from distributed import Client, LocalCluster

    n = settings.workers or os.cpu_count() or 1
    cluster = LocalCluster(
        n_workers=n,
        threads_per_worker=settings.threads_per_worker,
        processes=True,
        host="127.0.0.1",
        dashboard_address=local_dashboard_address(settings.dashboard_address),
        memory_limit=_memory_per_worker(n, settings.memory_limit),
        local_directory=settings.local_directory,
    )
    try:
        with Client(cluster) as client:
            announce(client, f"local cluster: {n} worker(s) x {settings.threads_per_worker} thread(s)")
            yield client
    finally:
        cluster.close()


@contextlib.contextmanager
def _mpi(settings: ClusterSettings):
    try:
        from mpi4py import MPI
    except ImportError as e:  # pragma: no cover - mpi4py is a dependency
        raise SettingsError(f"--cluster mpi needs mpi4py: {e}") from e
    size = MPI.COMM_WORLD.Get_size()
    if size < 3:
        raise WorldTooSmall(
            f"--cluster mpi needs at least 3 MPI ranks (scheduler, job, one worker); got {size}"
        )
    from dask_mpi import initialize
    from distributed import Client

    is_client = initialize(
        nthreads=settings.threads_per_worker,
        memory_limit=settings.memory_limit or "auto",
        dashboard_address=settings.dashboard_address or f":{DEFAULT_DASHBOARD_PORT}",
        local_directory=settings.local_directory,
        exit=False,
    )
    if not is_client:
        raise NotClientRank()
    client = Client()
    try:
        client.wait_for_workers(1, timeout=120)
        announce(client, f"MPI cluster: {size} ranks, {size - 2} worker(s)", tunnel=True)
        yield client
    finally:
        _shutdown_quietly(client)


def _shutdown_quietly(client, timeout: float = 30.0) -> None:
    """Close the workers and wait until they are gone, then stop the scheduler.

    In that order no rank is left talking to a closed socket, so the log stays free of the
    CommClosedError tracebacks that plain dask-mpi prints at exit.
    """
    import time

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


class _HideExpectedFailures(logging.Filter):
    """Drop a worker's 'Compute Failed' report unless --debug.

    The client prints one line for the failure and exits with it; the worker's copy would only add
    a traceback (of bad data, a full disk, a failed download) before that line.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        msg = record.getMessage()
        # every task failure reaches the client, which prints one line for it (app.errors); the
        # worker's traceback is kept only with --debug (CURATE_DEBUG, set by app.cli)
        return not msg.startswith("Compute Failed") or bool(os.environ.get("CURATE_DEBUG"))


def install_log_filters(client) -> None:
    """On every worker, present and future (a worker plugin runs on each): hide expected failures
    and quiet the noisy loggers, as app.logs does in this process."""
    from distributed.diagnostics.plugin import WorkerPlugin

    class QuietWorkerLogs(WorkerPlugin):
        name = "curate-quiet-worker-logs"

        def setup(self, worker):
            from app.logs import quiet_noisy_loggers

            logging.getLogger("distributed.worker").addFilter(_HideExpectedFailures())
            from app.errors import hide_dask_tracebacks

            hide_dask_tracebacks()
            if logging.getLogger("distributed").getEffectiveLevel() > logging.DEBUG:
                quiet_noisy_loggers()

    client.register_plugin(QuietWorkerLogs())


def announce(client, what: str, tunnel: bool = False) -> None:
    """Print the dashboard address (and how to tunnel to it) at start."""
    install_log_filters(client)
    link = client.dashboard_link
    log.info("%s; dashboard: %s", what, link)
    print(f"curate: dashboard at {link}", file=sys.stderr, flush=True)
    if tunnel:
        from urllib.parse import urlparse

        u = urlparse(link)
        print(
            f"curate: from your machine: ssh -N -L {u.port}:{u.hostname}:{u.port} <login-node>, "
            f"then open http://localhost:{u.port}/status",
            file=sys.stderr,
            flush=True,
        )
