"""How large one document may be on this worker (a share of its memory limit), and sizes as people read them."""

from __future__ import annotations

from curate.stages.settings import IOSettings, parse_bytes

#: the share of a worker's memory limit one document may take: the raw line, the parsed string, the
#: frame's Arrow copy and a stage's output each hold it once, beside the worker's own baseline
DOCUMENT_SHARE = 8


#: longest line the client reads while sampling JSONL for the schema (longer lines are not sampled)
SCHEMA_LINE_LIMIT = 64 << 20


def _explicit_budget(io_settings: IOSettings) -> int | None:
    if io_settings.max_document_bytes == "auto":
        return None
    return parse_bytes(io_settings.max_document_bytes, "max_document_bytes")


def document_budget(io_settings: IOSettings) -> tuple[int | None, str]:
    """(largest document in bytes, or None for no limit; what sets it) for the worker running this.

    ``auto`` is 1/``DOCUMENT_SHARE`` of this worker's memory limit: a document beyond it would kill
    the worker while its frames are built, so the reader refuses it first, naming file and line.
    Outside a Dask worker (the synchronous scheduler, the client) there is no limit to derive from.
    """
    explicit = _explicit_budget(io_settings)
    if explicit is not None:
        return explicit, f"--max-document-bytes {io_settings.max_document_bytes}"
    limit = worker_memory_limit()
    if not limit:
        return None, ""
    return limit // DOCUMENT_SHARE, (f"1/{DOCUMENT_SHARE} of the worker memory limit {format_size(limit)}; "
                                     "raise --memory-limit, or set --max-document-bytes")


def worker_memory_limit() -> int | None:
    """The memory limit of the Dask worker running this task, if any."""
    import sys

    if "distributed" not in sys.modules:  # not on a worker: do not import distributed for nothing
        return None
    from distributed import get_worker

    try:
        worker = get_worker()
    except ValueError:
        return None
    return getattr(getattr(worker, "memory_manager", None), "memory_limit", None) or None


def format_size(n: float) -> str:
    """1536 -> '1.5 KiB'."""
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if n < 1024 or unit == "TiB":
            return f"{int(n)} B" if unit == "B" else f"{n:.1f} {unit}".replace(".0 ", " ")
        n /= 1024
    return f"{n} B"  # pragma: no cover
