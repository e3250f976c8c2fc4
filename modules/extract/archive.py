"""Reading untrusted compressed files and archives safely.

Two tools:

- :func:`open_stream`: a file's decompressed bytes (gzip, bzip2 or plain, told by the magic number)
  as a stream that *ends* where the file breaks (truncated, corrupt) instead of raising, and keeps
  the error in ``.error``. Readers that buffer ahead (FastWARC, expat) would otherwise lose the
  good records already read into the failing block. Multi-member gzip (one member per WARC record)
  and multi-stream bzip2 (Wikipedia's multistream dumps) are followed to the end.
- :func:`iter_tar` and :func:`gunzip_bounded`: tar members and gzip payloads read into memory under
  limits. A member whose path is absolute or climbs out of its folder (``../../etc/x``), a link
  (symbolic or hard: never followed), a member over ``max_member_bytes`` and a gzip payload that
  inflates beyond its bound (a decompression bomb) are reported as rejected members with a reason;
  nothing is ever written to disk. Pax and GNU long-name headers are bounded too
  (``max_header_bytes``): Python's ``tarfile`` would read a header of any declared size into memory.
"""

from __future__ import annotations

import bz2
import os
import posixpath
import tarfile
import zlib
from dataclasses import dataclass

#: compressed bytes read from the file per step
CHUNK = 1 << 18
#: most bytes one decompression step may produce, so a highly compressible block stays bounded
OUT_CAP = 1 << 22


class _Gzip:
    def __init__(self):
        self.d = zlib.decompressobj(wbits=31)

    def feed(self, data: bytes) -> bytes:
        return self.d.decompress(data, OUT_CAP)

    def more(self) -> bytes:
        """Output still held back by OUT_CAP, without new input ("" when none)."""
        return self.d.decompress(self.d.unconsumed_tail, OUT_CAP) if self.d.unconsumed_tail else b""

    @property
    def eof(self) -> bool:
        return self.d.eof

    @property
    def unused(self) -> bytes:
        return self.d.unused_data


class _Bz2:
    def __init__(self):
        self.d = bz2.BZ2Decompressor()

    def feed(self, data: bytes) -> bytes:
        return self.d.decompress(data, OUT_CAP)

    def more(self) -> bytes:
        return b"" if self.d.needs_input or self.d.eof else self.d.decompress(b"", OUT_CAP)

    @property
    def eof(self) -> bool:
        return self.d.eof

    @property
    def unused(self) -> bytes:
        return self.d.unused_data


_CODECS = {"gzip": _Gzip, "bz2": _Bz2}


def sniff_compression(head: bytes) -> str | None:
    if head.startswith(b"\x1f\x8b"):
        return "gzip"
    if head.startswith(b"BZh"):
        return "bz2"
    return None


class GuardedStream:
    """Decompressed bytes of a file; a break in the file ends the stream and is kept in ``error``."""

    def __init__(self, raw, codec: str | None, head: bytes = b""):
        self._raw = raw
        self._head = head  # bytes already read from ``raw`` to sniff the format
        self._codec = _CODECS[codec] if codec else None
        self._member = self._codec() if self._codec else None
        self._fed = False  # the current compressed member has received input
        self._buf = bytearray()  # decompressed bytes not yet handed out
        self._pos = 0
        self._produced = 0
        #: decompressed offset where each compressed member (gzip member, bz2 stream) begins
        self.member_starts: list[int] = []
        #: start of the member the stream broke in (truncated, or garbage where a member should
        #: begin); None when the break fell between members or there was none
        self.broken_member: int | None = None
        self._done = False
        self.error: Exception | None = None

    def read(self, size=-1) -> bytes:
        size = CHUNK if size is None or size < 0 else size
        buf = self._buf
        while len(buf) < size and not self._done:
            buf += self._next_block(size - len(buf))
        data = bytes(buf[:size])
        del buf[:size]  # cheap: a bytearray drops its head without moving the rest
        self._pos += len(data)
        return data

    def _next_block(self, want: int) -> bytes:
        try:
            if self._member is None:
                block = self._read_raw(max(want, CHUNK))
                self._done = not block
            else:
                block = self._inflate_block()
        except (EOFError, OSError, ValueError, zlib.error) as e:
            self.error, self._done = e, True
            if self._member is not None and self._fed and not self._member.eof:
                self.broken_member = self.member_starts[-1]
            return b""
        self._produced += len(block)
        return block

    def _read_raw(self, size: int) -> bytes:
        if self._head:
            block, self._head = self._head, b""
            return block
        return self._raw.read(size)

    def _feed_member(self, data: bytes) -> bytes:
        if not self._fed:
            self.member_starts.append(self._produced)
            self._fed = True
        return self._member.feed(data)

    def _inflate_block(self) -> bytes:
        m = self._member
        if m.eof:  # a member is finished: the next one starts with the bytes it did not use
            rest = m.unused
            self._member = m = self._codec()
            self._fed = False
            if rest:
                return self._feed_member(rest)
        else:
            held = m.more()
            if held:
                return held
        block = self._read_raw(CHUNK)
        if not block:
            self._done = True
            if self._fed and not m.eof:
                raise EOFError("the file ends inside a compressed block (truncated)")
            return b""
        return self._feed_member(block)

    def intact_member_starts(self) -> list[int]:
        """``member_starts`` without the member the stream broke in: that one never ended, so its
        start says nothing about where the record before it ends."""
        return self.member_starts[:-1] if self.broken_member is not None else list(self.member_starts)

    @property
    def compressed(self) -> bool:
        return self._codec is not None

    def tell(self) -> int:
        """Decompressed bytes delivered so far."""
        return self._pos

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return False

    def close(self) -> None:
        self._raw.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def open_stream(source) -> GuardedStream:
    """Decompressed bytes (gzip, bzip2 or none, by magic number) of a path or of a binary file-like
    object (anything with ``read(n)``: a local file, an HTTP response, an fsspec file; it is read
    sequentially, never seeked, and closed with the stream); OSError if a path cannot be opened."""
    f = open(source, "rb") if isinstance(source, (str, os.PathLike)) else source
    try:
        head = b""
        while len(head) < 4:  # a network stream may hand out fewer bytes than asked
            more = f.read(4 - len(head))
            if not more:
                break
            head += more
    except OSError:
        f.close()
        raise
    return GuardedStream(f, sniff_compression(head), head)


# --------------------------------------------------------------------------- tar and gzip members


@dataclass(frozen=True)
class Limits:
    """Bounds on what an archive may make us hold in memory."""

    #: largest single member (compressed size as stored in the tar)
    max_member_bytes: int = 256 << 20
    #: largest inflated payload (a gzip'd paper, or the sum of one inner tarball's files)
    max_inflated_bytes: int = 256 << 20
    #: most members of an inner tarball
    max_members: int = 10_000
    #: largest pax extended header or GNU long-name/long-link block (real ones are a few hundred bytes)
    max_header_bytes: int = 1 << 20


@dataclass(frozen=True)
class Member:
    """One tar member: its data, or why it was not read (``reason`` and ``detail``)."""

    name: str
    data: bytes | None = None
    reason: str | None = None
    detail: str | None = None


class ArchiveBomb(ValueError):
    """An archive inflates beyond its bound."""


class HeaderTooLarge(tarfile.TarError):
    """A pax or long-name header declares more bytes than the bound.

    Not a ``tarfile.HeaderError``: tarfile would turn that into "bad header" and keep reading."""


def _bounded_tarinfo(max_header: int):
    """A TarInfo class that refuses pax and GNU long-name headers over ``max_header`` bytes *before*
    tarfile reads them (it reads the whole declared size at once)."""

    class BoundedTarInfo(tarfile.TarInfo):
        def _check(self, what: str) -> None:
            if self.size > max_header:
                raise HeaderTooLarge(f"{what} header of {self.size} bytes > {max_header}")

        def _proc_gnulong(self, tar):
            self._check("GNU long-name")
            return super()._proc_gnulong(tar)

        def _proc_pax(self, tar):
            self._check("pax")
            return super()._proc_pax(tar)

    return BoundedTarInfo


def safe_member_name(name: str) -> str | None:
    """The member's normalised relative path, or None when it is absolute or escapes its folder."""
    name = name.replace("\\", "/")
    if name.startswith("/") or (len(name) > 1 and name[1] == ":"):
        return None
    norm = posixpath.normpath(name)
    if norm == ".." or norm.startswith("../"):
        return None
    return norm


def iter_tar(fileobj, limits: Limits, *, mode: str = "r|*", max_total: int | None = None, want=None):
    """Tar members in stream order as :class:`Member` (regular files only; directories are skipped).

    ``fileobj`` is read sequentially (``r|*``: any compression, no seeking). A truncated or corrupt
    archive ends the iteration with a member whose reason is ``truncated_archive``. ``max_total``
    bounds the sum of the members' sizes (an inner tarball inflated from a gzip). ``want(name)``
    picks the members whose data is read; the others are skipped unread (but still counted, and
    still reported when unsafe).
    """
    total = 0
    count = 0
    try:
        tar = tarfile.open(fileobj=fileobj, mode=mode, tarinfo=_bounded_tarinfo(limits.max_header_bytes))
    except HeaderTooLarge as e:
        yield Member("", reason="oversized_header", detail=f"{e}; the archive is not read further")
        return
    except (tarfile.TarError, EOFError, OSError, zlib.error) as e:
        yield Member("", reason="truncated_archive", detail=f"not a readable tar archive: {e}")
        return
    with tar:
        while True:
            try:
                info = tar.next()
            except HeaderTooLarge as e:
                # the header's blocks are not read, so where the next member starts is unknown
                yield Member("", reason="oversized_header", detail=f"{e}; the rest of the archive is skipped")
                return
            except (tarfile.TarError, EOFError, OSError, zlib.error) as e:
                yield Member("", reason="truncated_archive", detail=f"archive breaks off: {e}")
                return
            if info is None:
                return
            count += 1
            if count > limits.max_members:
                yield Member(info.name, reason="too_many_members",
                             detail=f"more than {limits.max_members} members; the rest is skipped")
                return
            if info.isdir():
                continue
            if info.issym() or info.islnk():
                yield Member(info.name, reason="link_member",
                             detail=f"{'symbolic' if info.issym() else 'hard'} link to {info.linkname!r} (not followed)")
                continue
            if not info.isfile():
                yield Member(info.name, reason="special_member", detail="not a regular file")
                continue
            safe = safe_member_name(info.name)
            if safe is None:
                yield Member(info.name, reason="unsafe_path", detail=f"member path {info.name!r} escapes the archive")
                continue
            total += info.size
            if max_total is not None and total > max_total:
                yield Member(safe, reason="decompression_bomb",
                             detail=f"archive contents exceed {max_total} bytes")
                return
            if want is not None and not want(safe):
                continue
            if info.size > limits.max_member_bytes:
                yield Member(safe, reason="too_large",
                             detail=f"member of {info.size} bytes > {limits.max_member_bytes}")
                continue
            try:
                f = tar.extractfile(info)
                data = f.read() if f is not None else b""
            except (tarfile.TarError, EOFError, OSError, zlib.error) as e:
                yield Member(safe, reason="truncated_archive", detail=f"member {info.name!r} breaks off: {e}")
                return
            if len(data) != info.size:
                yield Member(safe, reason="truncated_archive",
                             detail=f"member {info.name!r} has {len(data)} of {info.size} bytes")
                return
            yield Member(safe, data=data)


def gunzip_bounded(data: bytes, max_bytes: int) -> bytes:
    """Inflate a gzip payload; ArchiveBomb if it would exceed ``max_bytes``, EOFError if truncated."""
    d = zlib.decompressobj(wbits=31)
    out = d.decompress(data, max_bytes + 1)
    if len(out) > max_bytes or d.unconsumed_tail:
        raise ArchiveBomb(f"inflates beyond {max_bytes} bytes (compressed {len(data)})")
    if not d.eof:
        raise EOFError("gzip payload is truncated")
    return out
