"""What cluster a run asks for: ``--cluster`` and the worker flags as one validated value, and
``auto`` made concrete from the input's size (:func:`resolve_auto`). Nothing here starts anything:
:func:`curate.app.cluster.connect` does, from these settings.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace

from curate.stages.errors import SettingsError


@dataclass(frozen=True)
class ClusterSettings:
    mode: str = "auto"
    workers: int | None = None
    threads_per_worker: int = 1
    memory_limit: str | None = None  # per worker; default: the machine's memory split evenly
    dashboard_address: str | None = None
    local_directory: str | None = None
    interface: str | None = None  # mpi: the network interface the scheduler and workers listen on
    #: why ``auto`` became this mode (:func:`resolve_auto`), logged when the cluster starts: after the
    #: refusals and the lock, so that a refusal stays one line
    auto_reason: str | None = None
    #: modules each worker imports as it starts (:mod:`curate.app.worker_warm`): the job's, under MPI
    worker_imports: tuple[str, ...] = ()

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
        if self.mode not in ("auto", "local", "mpi", "threads") and not self.mode.startswith(("tcp://", "tls://", "ucx://")):
            if not os.path.isfile(self.mode):
                raise SettingsError(
                    f"--cluster {self.mode!r}: not auto, local, mpi, threads, a tcp:// address or an existing scheduler file"
                )


#: ``--cluster auto`` runs in this process up to this many input bytes: below it, starting worker
#: processes (spawn, imports, TLS, the tokenizer loaded once per worker) costs more than they save
AUTO_THREADS_BYTES = 64 << 20


def resolve_auto(settings: ClusterSettings, input_bytes: int | None) -> ClusterSettings:
    """``auto`` made concrete for a run whose input is ``input_bytes`` on disk (None: unknown, e.g.
    URLs or downloads); any other mode is returned as it is. :func:`curate.app.cluster.connect` logs
    the choice."""
    if settings.mode != "auto":
        return settings
    sized = [flag for flag, value in (("--workers", settings.workers), ("--memory-limit", settings.memory_limit),
                                      ("--dashboard-address", settings.dashboard_address),
                                      ("--local-directory", settings.local_directory)) if value is not None]
    if sized:
        mode, why = "local", f"{sized[0]} given"
    elif input_bytes is None:
        mode, why = "local", "input size unknown (URLs or downloads)"
    elif input_bytes > AUTO_THREADS_BYTES:
        mode, why = "local", f"input {input_bytes / 2**20:,.1f} MiB > {AUTO_THREADS_BYTES >> 20} MiB"
    else:
        mode, why = "threads", f"input {input_bytes / 2**20:,.1f} MiB <= {AUTO_THREADS_BYTES >> 20} MiB"
    return replace(settings, mode=mode, auto_reason=why)
