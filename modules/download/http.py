"""The one resumable downloader, for ``http(s)://`` and ``s3://`` URLs.

``download(url, dest, options)``:

- A file already at ``dest`` is complete (only a finished download is ever renamed there): it is
  skipped without a request when its sidecar ``dest + ".url"`` names the same URL (and its size
  agrees with the listing's, when given). The sidecar is written (atomically) before the first byte
  of a URL reaches ``dest + ".part"``, so it names the URL of whatever bytes are at ``dest`` or in
  ``.part``; a file with the same name from another URL (or with no sidecar) is downloaded again,
  and a ``.part`` file is only resumed when its sidecar names the same URL.
- Bytes go to ``dest + ".part"``. After a dropped connection, a timeout or a 5xx/429 answer the
  download waits (exponential backoff, or the server's Retry-After) and goes on from the end of the
  ``.part`` file with an HTTP ``Range`` request, so a run that was killed also resumes there. A
  server that ignores Range (answers 200) makes it start over cleanly.
- The length is checked against Content-Length / Content-Range (and the listing's size and SHA-1
  when given); only then is ``.part`` renamed to ``dest``.
- ``retries`` bounds the failures in a row that made no progress; a failure after new bytes
  arrived starts the count again. Other 4xx answers fail at once. Failures raise
  :class:`DownloadError` naming the URL; giving up on failures that may pass (connection errors,
  timeouts, 408/429/5xx, a transfer cut short) raises its subclass :class:`TransientDownloadError`,
  so a later run knows to try that URL again.
- ``s3://`` goes through s3fs: anonymous, or with the caller's credentials and the requester-pays
  flag (arXiv's bucket). Resuming is ranged reads from the ``.part`` size, chunk by chunk. Only
  transport errors, timeouts and 5xx/throttling answers are retried; a missing key or a refusal is
  a :class:`DownloadError`; anything else (no credentials, our own disk full or read-only) stops
  the run with a :class:`DataError` naming the URL, since every file would fail alike.
- Slow servers: ``timeout`` bounds the wait for each read, ``deadline`` one attempt at a file
  (seconds, 0 = none) and ``min_rate`` the transfer rate (bytes per second averaged over
  ``rate_window`` seconds, 0 = none), so a server trickling one byte a second cannot hold a
  download forever. An attempt over either bound fails like a dropped connection and is resumed
  with Range; such a failure counts towards ``retries`` even when bytes arrived (a trickle is not
  progress), so a server that stays too slow ends the download with a :class:`DownloadError`.
- At most ``max_inflight`` downloads or streams run at once in one process (one Dask worker),
  whatever its thread count: the slots are a per-process semaphore, the only state this module keeps.
- No secrets are written or printed: every message and the sidecar carry the URL through
  :func:`curate.stages.secrets.redact_url` (the sidecar holds the redacted URL, which stays the same
  when a pre-signed URL is signed again). A file or ``.part`` at ``dest`` without a sidecar is not
  curate's: it is never overwritten or deleted (:class:`ForeignFile`).

:mod:`curate.stages.download.stream` reads a URL as a file object with the same policy, without landing it.

What both share lives beside this module, one concern a module, and every name stays importable
from here, where stream, base, the benches and the tests import it: ``retry`` (the policy: options,
errors, the pace of an attempt, backoff, the slots) and ``sidecar`` (the ``.url`` sidecar that makes
a raw file curate's).

Bytes are saved as served (``Accept-Encoding: identity``, no transparent decompression): a
``.warc.gz`` stays gzip.
"""

from __future__ import annotations

import errno
import hashlib
import logging
import os
import re
import time
from dataclasses import dataclass

from curate.stages.download.retry import (
    RETRY_STATUS,
    DownloadError,
    DownloadOptions,
    Pace,
    TransientDownloadError as TransientDownloadError,
    _slot,
    _Slow,
    _Transient,
    _wait,
    describe as describe,
    read_some,
)
from curate.stages.download.sidecar import (
    SOURCE_SUFFIX as SOURCE_SUFFIX,
    ForeignFile as ForeignFile,
    _write_source,
    check_not_foreign,
    foreign_files as foreign_files,
    remove_download as remove_download,
    source_url,
)
from curate.stages.errors import DataError
from curate.stages.output import remove_raw
from curate.stages.secrets import redact_url

log = logging.getLogger("curate.download")

_CONTENT_RANGE = re.compile(r"bytes\s+(\d+)-(\d+)/(\d+|\*)")
_UNSATISFIED_RANGE = re.compile(r"bytes\s+\*/(\d+)")


@dataclass(frozen=True)
class DownloadResult:
    url: str
    path: str
    #: downloaded | resumed (a Range request continued a partial file) | skipped (already complete)
    status: str
    bytes: int
    attempts: int
    seconds: float


# --------------------------------------------------------------------------- entry point


def download(url: str, dest: str, options: DownloadOptions | None = None, *, expected_size: int | None = None,
             sha1: str | None = None) -> DownloadResult:
    """Fetch ``url`` to ``dest`` (resumable, verified); see the module docstring."""
    options = options or DownloadOptions()
    started = time.monotonic()
    part = dest + ".part"
    shown = redact_url(url)
    check_not_foreign(dest)
    same_source = source_url(dest) == shown
    if os.path.exists(dest):
        size = os.path.getsize(dest)
        if not same_source:
            log.info("%s: not known to come from %s; downloading again", dest, shown)
        elif expected_size is None or size == expected_size:
            return DownloadResult(url, dest, "skipped", size, 0, 0.0)
        else:
            log.warning("%s: %d bytes on disk but %d expected; downloading again", dest, size, expected_size)
        remove_raw(dest, dest)
    os.makedirs(os.path.dirname(os.path.abspath(dest)), exist_ok=True)
    if not same_source:
        if os.path.exists(part):  # bytes of another URL (or of unknown origin): never continue them
            log.info("%s: partial download of another URL; starting over", part)
            remove_raw(part, dest)
        _write_source(dest, url)
    with _slot(max(1, options.max_inflight)):
        if url.startswith("s3://"):
            status, attempts = _fetch_s3(url, part, options)
        elif url.startswith(("http://", "https://")):
            status, attempts = _fetch_http(url, part, options)
        else:
            raise DownloadError(f"{shown}: unsupported URL scheme (expected http://, https:// or s3://)")
    size = os.path.getsize(part)
    if expected_size is not None and size != expected_size:
        remove_raw(part, dest)
        raise DownloadError(f"{shown}: got {size} bytes but the listing says {expected_size}")
    if sha1 and _sha1(part) != sha1.lower():
        remove_raw(part, dest)
        raise DownloadError(f"{shown}: SHA-1 differs from the listing's {sha1} (corrupt download, removed)")
    os.replace(part, dest)
    return DownloadResult(url, dest, status, size, attempts, round(time.monotonic() - started, 3))


def _sha1(path: str) -> str:
    h = hashlib.sha1()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _size(path: str) -> int:
    return os.path.getsize(path) if os.path.exists(path) else 0


# --------------------------------------------------------------------------- HTTP


def _retry_after(value: str | None) -> float | None:
    try:
        return float(value) if value is not None else None
    except ValueError:
        return None  # an HTTP date: use our own backoff


def _fetch_http(url: str, part: str, options: DownloadOptions) -> tuple[str, int]:
    import requests
    import urllib3

    transient = (requests.ConnectionError, requests.Timeout, requests.exceptions.ChunkedEncodingError,
                 urllib3.exceptions.HTTPError, _Transient)
    resumed = False
    failures = attempts = 0
    high_water = _size(part)  # progress means the .part file grew past anything seen before
    with requests.Session() as session:
        while True:
            attempts += 1
            try:
                resumed |= _http_attempt(session, url, part, options)
                return ("resumed" if resumed else "downloaded"), attempts
            except transient as e:
                size = _size(part)
                failures = 0 if size > high_water and not isinstance(e, _Slow) else failures
                high_water = max(high_water, size)
                failures += 1
                _wait(url, failures, e, options)


def _http_attempt(session, url: str, part: str, options: DownloadOptions) -> bool:
    """One request; True when it continued a partial file (206). Raises _Transient to retry."""
    offset = _size(part)
    headers = {"Accept-Encoding": "identity"}
    if offset:
        headers["Range"] = f"bytes={offset}-"
    with session.get(url, headers=headers, stream=True, timeout=(options.timeout, options.timeout)) as r:
        code = r.status_code
        if code == 416 and offset:
            m = _UNSATISFIED_RANGE.match(r.headers.get("Content-Range", ""))
            if m and int(m.group(1)) == offset:
                return True  # the .part file was already complete
            remove_raw(part, part[:-len(".part")])
            raise _Transient(f"HTTP 416 for bytes {offset}- (the remote file changed?); starting over")
        if code in RETRY_STATUS:
            raise _Transient(f"HTTP {code} {r.reason}", _retry_after(r.headers.get("Retry-After")))
        if code >= 400:
            raise DownloadError(f"{redact_url(url)}: HTTP {code} {r.reason}")
        if code == 206:
            m = _CONTENT_RANGE.match(r.headers.get("Content-Range", ""))
            if not m or int(m.group(1)) != offset:
                remove_raw(part, part[:-len(".part")])
                raise _Transient(f"bad Content-Range {r.headers.get('Content-Range')!r} for bytes {offset}-")
            total = None if m.group(3) == "*" else int(m.group(3))
            mode, continued = "ab", True
        elif code == 200:
            length = r.headers.get("Content-Length")
            total = int(length) if length and length.isdigit() else None
            if offset:
                log.info("%s: the server ignores Range; starting over", redact_url(url))
            mode, continued = "wb", False
        else:
            raise DownloadError(f"{redact_url(url)}: unexpected HTTP {code} {r.reason}")
        pace = Pace(options)
        with open(part, mode) as f:
            while True:
                chunk = read_some(r.raw, options.chunk_bytes)
                if not chunk:
                    break
                f.write(chunk)
                pace.add(len(chunk))
        size = _size(part)
        if total is not None and size != total:
            if size > total:
                remove_raw(part, part[:-len(".part")])
            raise _Transient(f"connection ended at byte {size} of {total}")
        return continued


def get_bytes(url: str, options: DownloadOptions | None = None, max_bytes: int = 64 << 20) -> bytes:
    """A small document (a listing, dumpstatus.json), with the same retries; never cached.

    The body is read in chunks and the answer abandoned as soon as it passes ``max_bytes`` (or
    announces a larger Content-Length), so a huge or endless answer never fills the memory."""
    import requests
    import urllib3

    options = options or DownloadOptions()
    failures = 0
    too_large = DownloadError(f"{redact_url(url)}: larger than {max_bytes} bytes")
    while True:
        try:
            with requests.get(url, timeout=(options.timeout, options.timeout), stream=True) as r:
                if r.status_code in RETRY_STATUS:
                    raise _Transient(f"HTTP {r.status_code} {r.reason}", _retry_after(r.headers.get("Retry-After")))
                if r.status_code >= 400:
                    raise DownloadError(f"{redact_url(url)}: HTTP {r.status_code} {r.reason}")
                length = r.headers.get("Content-Length", "")
                if length.isdigit() and int(length) > max_bytes:
                    raise too_large
                body = bytearray()
                pace = Pace(options)
                while True:
                    chunk = read_some(r.raw, min(options.chunk_bytes, max_bytes + 1), decode=True)
                    if not chunk:
                        break
                    body += chunk
                    if len(body) > max_bytes:
                        raise too_large
                    pace.add(len(chunk))
                return bytes(body)
        except (requests.ConnectionError, requests.Timeout, requests.exceptions.ChunkedEncodingError,
                urllib3.exceptions.HTTPError, _Transient) as e:
            failures += 1
            _wait(url, failures, e, options)


# --------------------------------------------------------------------------- S3


def s3_filesystem(options: DownloadOptions):
    """s3fs, anonymous unless requester-pays (which needs the caller's credentials)."""
    import s3fs

    kwargs = {"anon": not options.requester_pays, "requester_pays": options.requester_pays}
    if options.s3_endpoint_url:
        kwargs["client_kwargs"] = {"endpoint_url": options.s3_endpoint_url}
    return s3fs.S3FileSystem(**kwargs)


class _Remote(Exception):
    """An error S3 (or the way to it) raised, told apart from errors of our own .part file."""

    def __init__(self, error: Exception):
        super().__init__(str(error))
        self.error = error


def _remote(fn, *args, **kwargs):
    try:
        return fn(*args, **kwargs)
    except Exception as e:
        raise _Remote(e) from e


def _fetch_s3(url: str, part: str, options: DownloadOptions) -> tuple[str, int]:
    fs = s3_filesystem(options)
    key = url[len("s3://"):]
    failures = attempts = 0
    resumed = False
    total = None
    while True:
        attempts += 1
        try:
            if total is None:
                total = int(_remote(fs.info, key)["size"])
            offset = _size(part)
            if offset > total:
                remove_raw(part, part[:-len(".part")])
                offset = 0
            resumed |= offset > 0
            with open(part, "ab") as f:
                while offset < total:
                    end = min(offset + options.chunk_bytes, total)
                    data = _remote(fs.cat_file, key, start=offset, end=end)
                    if len(data) != end - offset:
                        raise _Transient(f"short read at byte {offset}: {len(data)} of {end - offset}")
                    f.write(data)
                    f.flush()
                    offset = end
                    failures = 0
            return ("resumed" if resumed else "downloaded"), attempts
        except _Transient as e:
            error = e
        except _Remote as r:
            error = r.error
            if not _s3_transient(error):
                if isinstance(error, (FileNotFoundError, PermissionError)):  # no such key, access denied
                    raise DownloadError(f"{redact_url(url)}: {type(error).__name__}: {redact_url(error)}") from error
                # missing credentials, a bad endpoint...: every file would fail alike, so the run
                # stops here (even under --on-error skip) rather than rejecting them one by one
                raise DataError(f"{redact_url(url)}: {type(error).__name__}: {redact_url(error)}") from error
        except OSError as e:  # our own disk (full, read-only): not worth a retry, nor a per-file reject
            raise DataError(f"{redact_url(url)}: cannot write {part}: {e}") from e
        failures += 1
        _wait(url, failures, error, options)


#: S3 error codes worth retrying (throttling, the service busy or failing for now)
_S3_RETRY_CODES = frozenset({"InternalError", "ServiceUnavailable", "SlowDown", "RequestTimeout",
                             "RequestTimeoutException", "Throttling", "ThrottlingException",
                             "RequestThrottled", "RequestLimitExceeded", "BandwidthLimitExceeded"})


#: errno values s3fs gives the 500 and 503 answers it translates into OSError
_S3_BUSY_ERRNOS = frozenset({getattr(errno, "EREMOTEIO", errno.EIO), errno.EBUSY})


def _causes(error: BaseException):
    """The error and the errors it was raised from (s3fs turns botocore's errors into OSError)."""
    seen = set()
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        yield error
        error = error.__cause__


def _s3_transient(error: Exception) -> bool:
    """A transport failure, a timeout or a 5xx/throttling answer: worth another attempt."""
    import aiohttp
    import botocore.exceptions as boto

    for e in _causes(error):
        if isinstance(e, (_Transient, TimeoutError, ConnectionError, boto.ConnectionError, boto.HTTPClientError,
                          boto.IncompleteReadError, boto.ResponseStreamingError)):
            return True
        if isinstance(e, boto.ClientError):
            status = e.response.get("ResponseMetadata", {}).get("HTTPStatusCode") or 0
            return status >= 500 or status == 429 or e.response.get("Error", {}).get("Code") in _S3_RETRY_CODES
        if isinstance(e, aiohttp.ClientResponseError):
            return e.status >= 500 or e.status == 429
        if isinstance(e, aiohttp.ClientError):  # connection refused or reset, payload cut short
            return True
        if isinstance(e, OSError) and e.errno in _S3_BUSY_ERRNOS:  # s3fs's words for 5xx and SlowDown
            return True
    return False
