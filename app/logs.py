"""One log format for curate and Dask alike: time, host, MPI rank, level, logger, message."""

from __future__ import annotations

import logging
import os
import socket
import sys

RANK_VARIABLES = ("OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK", "SLURM_PROCID")


def rank() -> int:
    for var in RANK_VARIABLES:
        if os.environ.get(var, "").isdigit():
            return int(os.environ[var])
    return 0


def log_format() -> str:
    # host and rank are fixed for a process, so they go into the format itself; distributed
    # reads the same string from its config, which worker processes inherit through the environment.
    return f"%(asctime)s {socket.gethostname()} r{rank()} %(levelname)s %(name)s: %(message)s"


def setup(level: str = "INFO") -> None:
    fmt = log_format()
    os.environ["DASK_DISTRIBUTED__ADMIN__LOG_FORMAT"] = fmt
    if level != "DEBUG":
        # Dask's INFO lines (every worker start, every connection) drown ours; DEBUG shows them.
        # Set through the environment so that worker processes inherit it.
        os.environ.setdefault("DASK_LOGGING__DISTRIBUTED", "warning")
    root = logging.getLogger()
    for h in list(root.handlers):
        root.removeHandler(h)
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter(fmt))
    handler.addFilter(RedactFilter())
    root.addHandler(handler)
    root.setLevel(level)
    # distributed installs its own handler at import; make it use ours so every line looks the same
    for name in ("distributed", "dask_mpi"):
        lg = logging.getLogger(name)
        for h in lg.handlers:
            h.setFormatter(logging.Formatter(fmt))
            if not any(isinstance(f, RedactFilter) for f in h.filters):
                h.addFilter(RedactFilter())
    if level != "DEBUG":
        # distributed may already be imported (and have set its loggers to INFO) in this process
        for name in list(logging.root.manager.loggerDict):
            if name.split(".")[0] in ("distributed", "dask_mpi"):
                logging.getLogger(name).setLevel(logging.WARNING)
        quiet_noisy_loggers()


class RedactFilter(logging.Filter):
    """No credentials in a log line: URLs' passwords and signed query parameters become ``***``."""

    def filter(self, record: logging.LogRecord) -> bool:
        from curate.stages.secrets import redact_url

        message = record.getMessage()
        clean = redact_url(message)
        if clean != message:
            record.msg, record.args = clean, None
        return True


#: the P2P shuffle reports every shuffle's start and end as a WARNING; distributed's comm sizes each
#: message with sizeof, which hits its recursion limit on deeply nested task graphs, logs a WARNING
#: and then handles the message correctly anyway
NOISY = ("distributed.shuffle", "distributed.sizeof")


def quiet_noisy_loggers() -> None:
    """Raise the noisy loggers to ERROR (in this process; app.cluster does it on every worker too)."""
    for name in [*NOISY, *(n for n in logging.root.manager.loggerDict if n.startswith(NOISY))]:
        logging.getLogger(name).setLevel(logging.ERROR)
