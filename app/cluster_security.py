"""Who can reach a cluster curate starts: TLS with mutual authentication for every connection, and
the dashboard, which has no authentication, on loopback unless ``--dashboard-address`` says
otherwise. The local and the MPI cluster take both from here, so they cannot drift apart.
"""

from __future__ import annotations

import logging
import socket

log = logging.getLogger("curate.cluster")

DEFAULT_DASHBOARD_PORT = 8787


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


def cluster_security():
    """A fresh certificate authority, key and certificate, in memory, for one cluster's lifetime.

    Every connection (scheduler, workers, client) is TLS and both ends must present a certificate
    signed by this CA (distributed sets CERT_REQUIRED on both sides), so a process without it can
    neither listen in nor connect. The PEM text never touches a file of ours; distributed writes the
    certificate and key for a moment into a 0700 temporary folder of the user's to load them into
    an SSL context, and deletes it at once.
    """
    from distributed.security import Security

    return Security.temporary()


def _security_fields(security) -> dict:
    names = ("tls_ca_file", "tls_client_key", "tls_client_cert", "tls_scheduler_key", "tls_scheduler_cert",
             "tls_worker_key", "tls_worker_cert")
    return {name: getattr(security, name) for name in names}
