"""A remote file (``http(s)://`` or ``s3://``) read once, front to back, as a binary file object.

:class:`RemoteStream` is what the download stages hand to the extractors instead of a local file:
the bytes go from the socket through the extractor's decompressor and parser, and nothing lands
on disk. Memory is one read (``chunk_bytes`` at most) plus whatever the extractor holds (one
record); it does not grow with the file.

Resuming. After a dropped connection, a timeout, a 5xx/429 answer or a too slow attempt (the
policy of :mod:`curate.stages.download.http`: exponential backoff, ``retries`` failures in a row without
progress, ``deadline``, ``min_rate``), the stream asks for the rest with ``Range: bytes=<pos>-``,
where ``<pos>`` is the exact count of bytes already handed to the reader, and carries on. The
reader never sees the break: a cut inside a gzip member or inside a WARC record is invisible to it,
so no record is lost and none is read twice. A 206 answer whose first bytes are the file's first
bytes again (a server that answers Range with the file from its start) ends the stream with a
:class:`TransientDownloadError` before any of them reaches the reader or the kept ``.part``. ``s3://`` is read by ranged GETs of ``s3_block_bytes``
(8 MiB: few requests, bounded memory), each starting where the reader is. A server that ignores Range (200) is read from the start and the bytes
already delivered are skipped. A remote file that changed meanwhile (another length or ETag) ends
the stream with a :class:`DownloadError`: its records could not be put together.

Keeping the raw file (``keep=<raw_dir>/<name>``). The bytes are also appended to ``<name>.part``
as they stream (the ``<name>.url`` sidecar, written before the first byte, names the redacted URL;
a URL that never sends a byte leaves neither), and renamed to ``<name>`` once complete and verified. A later stream of the same URL reads a complete ``<name>``
from disk without a request, or replays ``<name>.part`` and goes on over the network from its end.

Verification: the length (Content-Length / Content-Range / S3 size, and the listing's size) and
the listing's SHA-1 are checked when the last byte is read; :meth:`RemoteStream.finish` reads to
the end for a reader that stopped early (tar padding), so a file is verified and kept whole.

An error that ends the stream is raised from ``read`` (a :class:`DownloadError`, never an
``OSError``, so a reader cannot mistake it for a truncated file) and also kept in ``error``.

What the stream cannot see, its owner asks when the reader found the file cut short
(:mod:`curate.stages.download.base`): :meth:`RemoteStream.more_after_end` asks whether the server has
bytes past the end (an answer whose Content-Length is shorter than the file ends early and looks
complete), and :meth:`RemoteStream.discard_kept` removes a kept copy that cannot be trusted.
"""

from __future__ import annotations

import hashlib
import logging
import os
import time

from curate.stages.download.http import (
    _CONTENT_RANGE,
    _UNSATISFIED_RANGE,
    RETRY_STATUS,
    SOURCE_SUFFIX,
    DownloadError,
    DownloadOptions,
    Pace,
    TransientDownloadError,
    _Remote,
    _remote,
    _retry_after,
    _s3_transient,
    _Slow,
    _Transient,
    _wait,
    _write_source,
    check_not_foreign,
    describe,
    read_some,
    s3_filesystem,
    source_url,
)
from curate.stages.errors import DataError
from curate.stages.output import remove_raw
from curate.stages.secrets import redact_url

log = logging.getLogger("curate.download")

#: first bytes of a file compared with the start of an answer to Range (a server that restarts at
#: byte 0); fewer are compared near the end, none when fewer than RESTART_MIN would be
RESTART_CHECK = 256
RESTART_MIN = 64


class RemoteStream:
    """``read(n)`` over a remote file with exact resumption; see the module docstring.

    Nothing happens on construction; the first ``read`` connects. ``status`` ends as
    ``downloaded``, ``resumed`` (a Range request continued it, or a kept ``.part`` was replayed) or
    ``reused`` (a complete kept copy was read from disk).
    """

    def __init__(self, url: str, options: DownloadOptions | None = None, *, expected_size: int | None = None,
                 sha1: str | None = None, keep: str | None = None):
        self.url = url
        self.shown = redact_url(url)
        self.options = options or DownloadOptions()
        self.expected_size = expected_size
        self.sha1 = sha1.lower() if sha1 else None
        self.keep = keep
        #: bytes handed to the reader so far (and the offset of the next Range request)
        self.pos = 0
        self.total: int | None = None
        self.status = "downloaded"
        self.attempts = 0
        self.failures = 0
        self.error: Exception | None = None
        self.eof = False
        self.started = time.monotonic()
        self._etag: str | None = None
        self._opened = False
        self._resp = None
        self._session = None
        self._fs = None
        self._pace: Pace | None = None
        self._progress = False
        self._local = None  # a kept file (or .part) replayed before the network
        self._local_left = 0
        self._part = None  # append handle of <keep>.part
        self._block = memoryview(b"")  # S3: the last ranged GET's bytes, handed out from _block_at
        self._block_at = 0
        self._first = b""  # the file's first RESTART_CHECK bytes
        self._ahead = b""  # bytes of an answer read to check them, not yet delivered
        self._keeping = False
        self._sha1 = hashlib.sha1() if self.sha1 else None
        self._xxh = None
        if keep:
            import xxhash

            self._xxh = xxhash.xxh3_128()

    # ----------------------------------------------------------------- file object

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return False

    def writable(self) -> bool:
        return False

    def tell(self) -> int:
        return self.pos

    @property
    def closed(self) -> bool:
        return False

    def close(self) -> None:
        """A reader closing the stream when it is done: the owner still drains it (:meth:`finish`)."""

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def read(self, n: int = -1) -> bytes:
        """``n`` bytes (fewer only at the end); ``n < 0``: the rest of the file."""
        if self.error is not None:
            raise self.error
        out = bytearray()
        try:
            while n is None or n < 0 or len(out) < n:
                data = self._next(self.options.chunk_bytes if n is None or n < 0 else n - len(out))
                if not data:
                    break
                out += data
        except Exception as e:
            self.error = e
            raise
        return bytes(out)

    def readinto(self, buf) -> int:
        data = self.read(len(buf))
        buf[: len(data)] = data
        return len(data)

    # ----------------------------------------------------------------- owner's side

    def finish(self) -> dict:
        """Read to the end (verifying and keeping the file), then release; the outcome as a dict."""
        while not self.eof:
            if not self.read(self.options.chunk_bytes) and not self.eof:
                break
        self.release()
        return self.outcome()

    def outcome(self) -> dict:
        return {"url": self.shown, "status": "failed" if self.error else self.status, "bytes": self.pos,
                "attempts": self.attempts, "seconds": round(time.monotonic() - self.started, 3),
                "error": None if self.error is None else str(self.error)}

    def kept_records(self) -> list[tuple[str, int, str]]:
        """(path, bytes, xxh3-128) of the kept file once complete (for the output's manifest)."""
        if not self.keep or not self.eof or self.error is not None:
            return []
        return [(self.keep, self.pos, self._xxh.hexdigest())]

    def more_after_end(self) -> bool:
        """Whether the server holds bytes past the end of this stream: an answer whose Content-Length
        is shorter than the file ends early and looks complete. One Range request, asked only about
        a file its reader found cut short; a file truncated on the server answers 416. A
        :class:`TransientDownloadError` when the server's answer does not tell."""
        import requests
        import urllib3

        if not self.url.startswith(("http://", "https://")) or self.status == "reused":
            return False
        t = self.options.timeout
        try:
            with requests.get(self.url, headers={"Accept-Encoding": "identity", "Range": f"bytes={self.pos}-"},
                              stream=True, timeout=(t, t)) as r:
                if r.status_code == 416:
                    return False
                if r.status_code == 206:
                    return True
                length = r.headers.get("Content-Length", "")
                if r.status_code == 200 and length.isdigit():  # a server that ignores Range
                    return int(length) > self.pos
                why = f"HTTP {r.status_code} {r.reason}" + (" without a Content-Length" if r.status_code == 200 else "")
        except (requests.RequestException, urllib3.exceptions.HTTPError) as e:
            why = describe(e)
        raise TransientDownloadError(f"{self.shown}: cut short at byte {self.pos}, and asking the server "
                                     f"whether the file goes on failed: {why}")

    def discard_kept(self) -> None:
        """Remove the kept copy and ``.part`` of a transfer that cannot be trusted, so that a later
        run fetches the file anew instead of reusing it (the sidecar stays: it names the URL)."""
        self.release()
        if self.keep and os.path.exists(self.keep + SOURCE_SUFFIX):
            for path in (self.keep, self.keep + ".part"):
                if os.path.exists(path):
                    remove_raw(path, self.keep)

    def release(self) -> None:
        """Close the connection and files; a kept ``.part`` stays (a later run resumes it)."""
        self._close_response()
        if self._session is not None:
            self._session.close()
            self._session = None
        for f in (self._local, self._part):
            if f is not None:
                f.close()
        self._local = self._part = None

    # ----------------------------------------------------------------- internals

    def _open(self) -> None:
        """Where the bytes come from: a kept copy, a kept .part plus the network, or the network."""
        self._opened = True
        if not self.keep:
            return
        dest, part = self.keep, self.keep + ".part"
        check_not_foreign(dest)
        same = source_url(dest) == self.shown
        if same and os.path.exists(dest):
            size = os.path.getsize(dest)
            if self.expected_size is None or size == self.expected_size:
                self._local, self._local_left, self.total = open(dest, "rb"), size, size
                self.status = "reused"
                return
            log.warning("%s: %d bytes kept but %d expected; downloading again", dest, size, self.expected_size)
        if same and os.path.exists(part):
            size = os.path.getsize(part)
            if size:
                self._local, self._local_left = open(part, "rb"), size
                self.status = "resumed"
        else:
            for path in (dest, part):  # ours (the sidecar says so) but of another URL
                if os.path.exists(path):
                    remove_raw(path, dest)
        if os.path.exists(dest):
            remove_raw(dest, dest)
        self._keeping = True  # .part (and sidecar) opened at the first byte: a 404 leaves nothing

    def _start_part(self) -> None:
        """The sidecar naming the URL, then ``.part`` open for appending: before the first byte."""
        part = self.keep + ".part"
        if source_url(self.keep) != self.shown:
            os.makedirs(os.path.dirname(os.path.abspath(self.keep)), exist_ok=True)
            _write_source(self.keep, self.url)
        self._part = open(part, "ab")

    def _next(self, want: int) -> bytes:
        if not self._opened:
            self._open()
        if self.eof:
            return b""
        if self._local is not None:
            data = self._local.read(min(want, self._local_left, self.options.chunk_bytes))
            if data:
                self._local_left -= len(data)
                self._deliver(data, local=True)
                return data
            self._local.close()
            self._local = None
            if self.status == "reused":
                self._at_end()
                return b""
        if self.url.startswith("s3://"):
            return self._next_s3(want)
        if self.url.startswith(("http://", "https://")):
            return self._next_http(want)
        raise DownloadError(f"{self.shown}: unsupported URL scheme (expected http://, https:// or s3://)")

    def _deliver(self, data: bytes, local: bool = False) -> None:
        if self.pos < RESTART_CHECK:
            self._first += data[:RESTART_CHECK - self.pos]
        if not local and self._keeping:
            if self._part is None:
                self._start_part()
            self._part.write(data)
        self.pos += len(data)
        if self._sha1 is not None:
            self._sha1.update(data)
        if self._xxh is not None:
            self._xxh.update(data)

    def _failed(self, error: Exception) -> None:
        """One failed attempt: count it (progress resets the count, slowness does not), back off."""
        self._close_response()
        if self._progress and not isinstance(error, _Slow):
            self.failures = 0
        self._progress = False
        self.failures += 1
        if self.pos and self.status == "downloaded":
            self.status = "resumed"
        _wait(self.url, self.failures, error, self.options)

    def _close_response(self) -> None:
        if self._resp is not None:
            self._resp.close()
            self._resp = None

    def _check_total(self, total: int | None, etag: str | None) -> None:
        if self.expected_size is not None and total is not None and total != self.expected_size:
            raise DownloadError(f"{self.shown}: {total} bytes but the listing says {self.expected_size}")
        if self.total is not None and total is not None and total != self.total:
            raise TransientDownloadError(f"{self.shown}: the remote file changed while streaming "
                                         f"({self.total} bytes, now {total})")
        if self._etag and etag and etag != self._etag:
            raise TransientDownloadError(f"{self.shown}: the remote file changed while streaming "
                                         f"(ETag {self._etag}, now {etag})")
        self.total = total if total is not None else self.total
        self._etag = etag or self._etag

    def _at_end(self) -> None:
        """The last byte was read: verify, keep the file, release the connection."""
        self._close_response()
        if self.total is not None and self.pos != self.total:
            raise DownloadError(f"{self.shown}: ended at byte {self.pos} of {self.total}")
        if self.expected_size is not None and self.pos != self.expected_size:
            raise DownloadError(f"{self.shown}: got {self.pos} bytes but the listing says {self.expected_size}")
        if self._sha1 is not None and self._sha1.hexdigest() != self.sha1:
            if self._keeping:
                if self._part is not None:
                    self._part.close()
                    self._part = None
                self._keeping = False
                if os.path.exists(self.keep + ".part"):
                    remove_raw(self.keep + ".part", self.keep)  # ours, and corrupt
            raise DownloadError(f"{self.shown}: SHA-1 differs from the listing's {self.sha1} (corrupt download)")
        if self._keeping:
            if self._part is None:  # an empty file, or a .part complete already
                self._start_part()
            self._part.close()
            self._part = None
            self._keeping = False
            os.replace(self.keep + ".part", self.keep)
        self.eof = True

    # ----------------------------------------------------------------- HTTP

    def _next_http(self, want: int) -> bytes:
        import requests
        import urllib3

        transient = (requests.ConnectionError, requests.Timeout, requests.exceptions.ChunkedEncodingError,
                     urllib3.exceptions.HTTPError, _Transient)
        while True:
            try:
                if self._resp is None:
                    self._connect_http()
                    if self.eof:
                        return b""
                data = self._ahead or read_some(self._resp.raw, min(want, self.options.chunk_bytes))
                self._ahead = b""
                if not data:
                    if self.total is not None and self.pos < self.total:
                        raise _Transient(f"connection ended at byte {self.pos} of {self.total}")
                    self._at_end()
                    return b""
                if self.total is not None and self.pos + len(data) > self.total:
                    raise TransientDownloadError(f"{self.shown}: more bytes than the {self.total} announced")
                self._pace.add(len(data))
                self._deliver(data)
                self._progress = True
                if self.total is not None and self.pos == self.total:
                    self._at_end()
                return data
            except transient as e:
                self._failed(e)

    def _connect_http(self) -> None:
        import requests

        if self._session is None:
            self._session = requests.Session()
        self.attempts += 1
        headers = {"Accept-Encoding": "identity"}
        if self.pos:
            headers["Range"] = f"bytes={self.pos}-"
        t = self.options.timeout
        r = self._session.get(self.url, headers=headers, stream=True, timeout=(t, t))
        self._resp = r
        self._pace = Pace(self.options)
        code = r.status_code
        etag = r.headers.get("ETag")
        if code == 416 and self.pos:
            m = _UNSATISFIED_RANGE.match(r.headers.get("Content-Range", ""))
            if m and int(m.group(1)) == self.pos:
                self._check_total(self.pos, None)
                self._at_end()  # everything was read already
                return
            raise TransientDownloadError(f"{self.shown}: HTTP 416 for bytes {self.pos}- (the remote file changed?)")
        if code in RETRY_STATUS:
            raise _Transient(f"HTTP {code} {r.reason}", _retry_after(r.headers.get("Retry-After")))
        if code >= 400:
            raise DownloadError(f"{self.shown}: HTTP {code} {r.reason}")
        if code == 206:
            m = _CONTENT_RANGE.match(r.headers.get("Content-Range", ""))
            if not m or int(m.group(1)) != self.pos:
                raise _Transient(f"bad Content-Range {r.headers.get('Content-Range')!r} for bytes {self.pos}-")
            self._check_total(None if m.group(3) == "*" else int(m.group(3)), etag)
            self._ahead = self._continues()
        elif code == 200:
            length = r.headers.get("Content-Length", "")
            self._check_total(int(length) if length.isdigit() else None, etag)
            if self.pos:
                log.info("%s: the server ignores Range; skipping the %d bytes already read", self.shown, self.pos)
                self._skip(self.pos)
        else:
            raise DownloadError(f"{self.shown}: unexpected HTTP {code} {r.reason}")

    def _continues(self) -> bytes:
        """The first bytes of an answer to Range, read to check that they are not the file's first
        bytes again; a :class:`TransientDownloadError` when they are."""
        n = min(len(self._first), self.pos, (self.total if self.total is not None else self.pos + RESTART_CHECK)
                - self.pos)
        if n < RESTART_MIN:
            return b""
        got = bytearray()
        while len(got) < n:
            data = read_some(self._resp.raw, n - len(got))
            if not data:
                break
            got += data
        if got == self._first[:n]:
            raise TransientDownloadError(f"{self.shown}: the answer to Range bytes={self.pos}- starts over with "
                                         f"the file's first {n} bytes (the server ignores the range it confirms)")
        return bytes(got)

    def _skip(self, n: int) -> None:
        """Drop the first ``n`` bytes of a full answer (a server that ignored Range)."""
        left = n
        while left:
            data = read_some(self._resp.raw, min(left, self.options.chunk_bytes))
            if not data:
                raise _Transient(f"connection ended at byte {n - left} while skipping to {n}")
            self._pace.add(len(data))
            left -= len(data)

    # ----------------------------------------------------------------- S3

    def _next_s3(self, want: int) -> bytes:
        if self._block_at < len(self._block):  # served from the block fetched last
            data = bytes(self._block[self._block_at:self._block_at + want])
            self._block_at += len(data)
            self._deliver(data)
            if self.pos == self.total:
                self._at_end()
            return data
        key = self.url[len("s3://"):]
        while True:
            try:
                try:
                    if self._fs is None:
                        self._fs = s3_filesystem(self.options)
                    if self.total is None:
                        self.attempts += 1
                        info = _remote(self._fs.info, key)
                        self._check_total(int(info["size"]), info.get("ETag"))
                    if self.pos >= self.total:
                        self._at_end()
                        return b""
                    end = min(self.pos + self.options.s3_block_bytes, self.total)
                    data = _remote(self._fs.cat_file, key, start=self.pos, end=end)
                    if len(data) != end - self.pos:
                        raise _Transient(f"short read at byte {self.pos}: {len(data)} of {end - self.pos}")
                except _Remote as r:
                    error = r.error
                    if _s3_transient(error):
                        raise _Transient(str(error)) from error
                    if isinstance(error, (FileNotFoundError, PermissionError)):
                        raise DownloadError(f"{self.shown}: {type(error).__name__}: {redact_url(error)}") from error
                    # no credentials, a bad endpoint: every file would fail alike, so the run stops
                    raise DataError(f"{self.shown}: {type(error).__name__}: {redact_url(error)}") from error
                self._progress = True
                self._block, self._block_at = memoryview(data), 0
                return self._next_s3(want)
            except _Transient as e:
                self._failed(e)


def kept_name(path: str) -> str:
    """The sidecar of a kept raw file."""
    return path + SOURCE_SUFFIX
