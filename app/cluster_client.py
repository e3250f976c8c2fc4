"""A new client's first words: worker log filters installed on every worker, and one banner of the
cluster, its workers and how to reach the dashboard. Every way of getting a client (local, MPI,
attached) ends here.
"""

from __future__ import annotations

import logging
import os
import sys

log = logging.getLogger("curate.cluster")


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
            from curate.app.logs import quiet_noisy_loggers

            logging.getLogger("distributed.worker").addFilter(_HideExpectedFailures())
            from curate.app.errors import hide_dask_tracebacks

            hide_dask_tracebacks()
            if logging.getLogger("distributed").getEffectiveLevel() > logging.DEBUG:
                quiet_noisy_loggers()

    client.register_plugin(QuietWorkerLogs())


def announce(client, what: str, mpi_info: dict | None = None) -> None:
    """Print the cluster, its workers and the dashboard address (and how to tunnel to it) at start."""
    install_log_filters(client)
    log.info("%s", what)
    workers = client.scheduler_info(n_workers=-1)["workers"]
    hosts: dict[str, int] = {}
    for addr in workers:
        from distributed.comm import get_address_host

        host = get_address_host(addr)
        hosts[host] = hosts.get(host, 0) + 1
    print(f"curate: {what}; {len(workers)} worker(s) on {len(hosts)} node(s): "
          + ", ".join(f"{h} ({n})" for h, n in sorted(hosts.items())), file=sys.stderr, flush=True)
    if mpi_info is None:
        link = client.dashboard_link
        print(f"curate: dashboard at {link}", file=sys.stderr, flush=True)
        return
    port, host, node = mpi_info["dashboard_port"], mpi_info["dashboard_host"], mpi_info["node"]
    if port is None:
        return
    print(f"curate: dashboard at http://{host}:{port}/status on {node} (rank 0's node)", file=sys.stderr, flush=True)
    if host.startswith("127."):
        print(f"curate: the dashboard has no authentication, so it listens on {node}'s loopback only; "
              f"from your machine: ssh -J <login-node> -L {port}:localhost:{port} {node}, "
              f"then open http://localhost:{port}/status", file=sys.stderr, flush=True)
    else:
        print(f"curate: warning: the dashboard (no authentication) listens on {host}:{port}, as "
              "--dashboard-address asked: anyone who reaches that address sees it", file=sys.stderr, flush=True)
