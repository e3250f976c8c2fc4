"""Hand a stream (a :class:`curate.stages.download.stream.RemoteStream`) to an extractor's public entry point.

The extractors (``extract_<kind>_file(raw, settings, on_error)``) take a file object as
``fileobj=`` where :mod:`curate.stages.extract` offers it: then the stream goes straight in. An
extractor that still only opens ``raw.path`` gets a path-like string that carries the stream
(:class:`StreamPath`): the ``open`` that ``curate.stages.extract.archive`` and ``curate.stages.extract.arxiv``
look up in their module namespace is replaced, once, by one that returns the carried stream for
such a path and calls the built-in ``open`` for every other argument. Those readers read a few
bytes to sniff the format and seek back to 0, which :class:`Rewindable` allows (the first
``REWIND_BYTES``, kept in memory). This is a bridge for readers that predate file objects; it goes
as soon as every extractor takes ``fileobj``.
"""

from __future__ import annotations

import builtins
import inspect
import threading

#: bytes a reader may read before seeking back to the start (format sniffing reads 4 to 1,024)
REWIND_BYTES = 64 << 10

_SHIM_LOCK = threading.Lock()
_SHIMMED: set[str] = set()


class StreamPath(str):
    """A ``RawFile.path`` (the redacted URL, used in messages) carrying the stream to read."""

    fileobj = None


class Rewindable:
    """A forward-only file object that may go back to byte 0 while it has read few bytes."""

    def __init__(self, raw):
        self.raw = raw
        #: every byte read so far, while going back is still possible (None after REWIND_BYTES)
        self._head: bytearray | None = bytearray()
        self._replay = 0  # position in _head (the stream's position while _head is kept)

    def read(self, n: int = -1) -> bytes:
        parts = []
        head = self._head
        if head is not None and self._replay < len(head):
            end = len(head) if n is None or n < 0 else min(len(head), self._replay + n)
            parts.append(bytes(head[self._replay:end]))
            if n is not None and n >= 0:
                n -= end - self._replay
            self._replay = end
        if n is None or n != 0:
            data = self.raw.read(-1 if n is None else n)
            if head is not None:
                head += data
                self._replay = len(head)
                if len(head) > REWIND_BYTES:
                    self._head = None
            parts.append(data)
        return b"".join(parts)

    def seek(self, offset: int, whence: int = 0) -> int:
        if offset == 0 and whence == 0 and self._head is not None:
            self._replay = 0
            return 0
        raise OSError("this stream can only go back to its start, and only before reading far")

    def tell(self) -> int:
        return self._replay if self._head is not None else self.raw.tell()

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return False

    def close(self) -> None:
        self.raw.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def _open(file, *args, **kwargs):
    carried = getattr(file, "fileobj", None)
    if isinstance(file, StreamPath) and carried is not None:
        return carried
    return builtins.open(file, *args, **kwargs)


def _install(module_name: str) -> None:
    import importlib

    with _SHIM_LOCK:
        if module_name not in _SHIMMED:
            module = importlib.import_module(module_name)
            module.open = _open  # a module global shadows the built-in for that module only
            _SHIMMED.add(module_name)


def takes_fileobj(fn) -> bool:
    return "fileobj" in inspect.signature(fn).parameters


def extract_stream(fn, raw, settings, on_error: str, stream, not_found):
    """``fn(raw, settings, on_error)`` reading ``stream`` instead of ``raw.path``.

    ``not_found(raw)`` is the frame for a stream the path-only reader found empty of records and
    then tried to ``stat`` (a path that does not exist on disk)."""
    from curate.stages.extract import RawFile

    if takes_fileobj(fn):
        return fn(raw, settings, on_error, fileobj=stream)
    for name in ("curate.stages.extract.archive", fn.__module__):
        _install(name)
    path = StreamPath(raw.path)
    path.fileobj = Rewindable(stream)
    try:
        return fn(RawFile(path, raw.name), settings, on_error)
    except FileNotFoundError as e:
        if e.filename == path:
            return not_found(raw)
        raise
