"""Writing files with a checksum computed on the way (no second read), and the atomic writes of files outside any unit (raw downloads beside their .url sidecar)."""

from __future__ import annotations

import contextlib
import io
import os

from curate.stages.output.names import TMP_MARK


class _HashingWriter(io.RawIOBase):
    """Passes bytes to ``raw`` and hashes them on the way: the checksum costs no second read."""

    def __init__(self, raw):
        import xxhash

        self.raw = raw
        self.hash = xxhash.xxh3_128()
        # jobs/bench_output.py measures the cost of the checksum by turning it off; nothing else may
        self._hashing = os.environ.get("CURATE_BENCH_NO_CHECKSUM") != "1"
        self.bytes = 0
        self.abandoned = False
        self.record: dict | None = None

    def abandon(self) -> None:
        """Leave nothing behind when the ``Output.open`` block ends."""
        self.abandoned = True

    def writable(self) -> bool:
        return True

    def write(self, data) -> int:
        view = memoryview(data).cast("B")
        n = self.raw.write(view)
        n = len(view) if n is None else n
        if n != len(view):  # a raw file that wrote less: finish the rest so nothing is lost or unhashed
            rest = view[n:]
            while len(rest):
                k = self.raw.write(rest) or 0
                rest = rest[k:]
        if self._hashing:
            self.hash.update(view)
        self.bytes += len(view)
        return len(view)

    def tell(self) -> int:
        return self.bytes

    def seekable(self) -> bool:
        return False

    def flush(self) -> None:
        self.raw.flush()

    def close(self) -> None:  # the owner closes ``raw``; closing this wrapper only stops writes
        if not self.closed:
            self.raw.flush()
        super().close()


class _Abandon(Exception):
    pass


def file_checksum(f, chunk: int = 8 << 20) -> tuple[int, str]:
    """(size, xxh3-128 hex) of an open binary file, read to the end."""
    import xxhash

    h, n = xxhash.xxh3_128(), 0
    while True:
        data = f.read(chunk)
        if not data:
            return n, h.hexdigest()
        h.update(data)
        n += len(data)


#: sidecar beside a raw download naming its URL (``<name>.url``): what makes a raw file curate's
RAW_SIDECAR = ".url"


def atomic_write(path: str, write) -> None:
    """Call ``write(tmp_path)`` then rename to ``path`` (a local file that is not part of a unit: a
    plot, a cache); the temporary is removed on failure."""
    tmp = os.path.join(os.path.dirname(path), f".{os.path.basename(path)}{TMP_MARK}{os.getpid()}")
    try:
        write(tmp)
        os.replace(tmp, path)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.remove(tmp)


def remove_raw(path: str, dest: str) -> None:
    """Delete a raw download curate owns: ``dest``, its ``.part`` or its sidecar, only while the
    ``<dest>.url`` sidecar (written by curate before the first byte) proves curate fetched it."""
    if path not in (dest, dest + ".part", dest + RAW_SIDECAR) or not os.path.exists(dest + RAW_SIDECAR):
        raise RuntimeError(f"{path}: not a download of curate's (no {RAW_SIDECAR} sidecar); refusing to delete it")
    with contextlib.suppress(FileNotFoundError):
        os.remove(path)
