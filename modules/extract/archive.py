"""Reading untrusted compressed files and archives safely.

Two tools:

- :func:`open_stream`: a file's decompressed bytes (gzip, bzip2 or plain, told by the magic number)
  as a stream that *ends* where the file breaks (truncated, corrupt) instead of raising, and keeps
  the error in ``.error``. Readers that buffer ahead (FastWARC, expat) would otherwise lose the
  good records already read into the failing block. Multi-member gzip (one member per WARC record)
  and multi-stream bzip2 (Wikipedia's multistream dumps) are followed to the end. With
  ``resync=True`` (WARC) a damaged gzip member does not end the stream: reading goes on at the next
  gzip header after the damaged member's start (``1f 8b 08``, searched in the compressed bytes the
  broken member swallowed, then further on), and the damage is kept in ``.damage`` with its
  compressed offsets. Only when no member follows does the stream end as above.
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
from collections import deque
from dataclasses import dataclass

#: compressed bytes read from the file per step
CHUNK = 1 << 18
#: most bytes one decompression step may produce, so a highly compressible block stays bounded
OUT_CAP = 1 << 22
#: compressed bytes of the current gzip member kept to search for the next member if it breaks (a
#: Common Crawl member is one record, far smaller); of a larger member only the last ones are kept
MAX_RESYNC_BYTES = 16 << 20
#: how every gzip member starts: the magic number and the deflate method
GZIP_MAGIC = b"\x1f\x8b\x08"


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


class _Truncated(EOFError):
    """The file ends inside a compressed member."""


@dataclass
class Damage:
    """A damaged gzip member that a ``resync`` stream went past."""

    start: int  # compressed offset of the damaged member
    resumed: int  # compressed offset of the member reading went on with
    out_start: int  # decompressed offset of the damaged member's first byte
    out_end: int  # decompressed offset where the next member's bytes begin
    error: str


def sniff_compression(head: bytes) -> str | None:
    if head.startswith(b"\x1f\x8b"):
        return "gzip"
    if head.startswith(b"BZh"):
        return "bz2"
    return None


class GuardedStream:
    """Decompressed bytes of a file; a break in the file ends the stream and is kept in ``error``."""

    def __init__(self, raw, codec: str | None, head: bytes = b"", resync: bool = False):
        self.codec = codec
        self._raw = raw
        self._head = head  # bytes already read from ``raw`` to sniff the format
        self._codec = _CODECS[codec] if codec else None
        self._member = self._codec() if self._codec else None
        self._fed = False  # the current compressed member has received input
        self._resync = resync and codec == "gzip"
        self._raw_pos = 0  # compressed bytes read from ``raw``
        self._fed_to = 0  # compressed offset after the last byte handed to a decompressor
        self._member_at = 0  # compressed offset of the current member
        self._pending = b""  # compressed bytes to feed again after a restart, before reading on
        self._window: deque[tuple[int, bytes]] = deque()  # (offset, chunk) since the member began
        self._window_bytes = 0
        #: damaged gzip members read past (``resync``), in order
        self.damage: list[Damage] = []
        self._buf = bytearray()  # decompressed bytes not yet handed out
        self._pos = 0
        self._produced = 0
        #: decompressed offset where each compressed member (gzip member, bz2 stream) begins
        self.member_starts: list[int] = []
        self._done = False
        self.error: Exception | None = None

    def source(self) -> tuple[bytes, object]:
        """The compressed file as it stands, for a reader that decompresses it itself (FastWARC):
        the bytes read to sniff its format, then the file object. Only before the first read;
        :meth:`resume` hands the rest back."""
        assert not self._produced and not self._raw_pos, "the stream has been read"
        head, self._head = self._head, b""
        return head, self._raw

    def resume(self, raw, raw_pos: int, out_pos: int, member_starts: list[int]) -> None:
        """Go on from where another reader of :meth:`source` stopped: ``raw`` holds the file's bytes
        from compressed offset ``raw_pos`` on, a member start whose first byte is decompressed offset
        ``out_pos``; ``member_starts`` are the members before it. Every offset stays one of the whole
        file (``tell``, ``member_starts``, ``damage``), as if this stream had read it all."""
        self.__init__(raw, self.codec, b"", self._resync)
        self._raw_pos = self._fed_to = self._member_at = raw_pos
        self._pos = self._produced = out_pos
        self.member_starts = member_starts

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
            # only the decompressor's own failures: a source that cannot be read is no damaged member
            if self._resync and isinstance(e, (zlib.error, _Truncated)) and self._restart(e):
                return b""
            self.error, self._done = e, True
            return b""
        self._produced += len(block)
        return block

    def _read_raw(self, size: int) -> bytes:
        if self._head:
            block, self._head = self._head, b""
        else:
            block = self._raw.read(size)
        if block and self._resync:
            self._window.append((self._raw_pos, block))
            self._window_bytes += len(block)
            while self._window_bytes > MAX_RESYNC_BYTES and len(self._window) > 1:
                self._window_bytes -= len(self._window.popleft()[1])
        self._raw_pos += len(block)
        return block

    def _input(self) -> bytes:
        """The next compressed bytes for the decompressor: those taken back by a restart, then new ones."""
        if self._pending:
            data, self._pending = self._pending, b""
        else:
            data = self._read_raw(CHUNK)
        self._fed_to += len(data)
        return data

    def _start_member(self, at: int) -> None:
        self._member = self._codec()
        self._fed = False
        self._member_at = at
        window = self._window
        while window and window[0][0] + len(window[0][1]) <= at:
            self._window_bytes -= len(window.popleft()[1])

    def _feed_member(self, data: bytes) -> bytes:
        if not self._fed:
            self.member_starts.append(self._produced)
            self._fed = True
        return self._member.feed(data)

    def _inflate_block(self) -> bytes:
        m = self._member
        if m.eof:  # a member is finished: the next one starts with the bytes it did not use
            rest = m.unused
            self._start_member(self._fed_to - len(rest))
            if rest:
                return self._feed_member(rest)
            m = self._member
        else:
            held = m.more()
            if held:
                return held
        block = self._input()
        if not block:
            self._done = True
            if self._fed and not m.eof:
                raise _Truncated("the file ends inside a compressed block (truncated)")
            return b""
        return self._feed_member(block)

    # -- resynchronising after a damaged gzip member

    def _restart(self, error: Exception) -> bool:
        """Go on at the next gzip header after the broken member's start; False when none follows."""
        at = self._find_member(self._member_at + 1)
        if at is None:
            return False
        self.damage.append(Damage(self._member_at, at, self.member_starts[-1], self._produced, str(error)))
        self._pending = b"".join(c for _, c in self._window)[at - self._window[0][0]:]
        self._fed_to = at
        self._start_member(at)
        self._done = False
        return True

    def _find_member(self, after: int) -> int | None:
        """Compressed offset of the first gzip header at or after ``after`` (bytes already read,
        then further on); None at the end of the file."""
        i = 0
        carry, carry_at = b"", 0  # the end of the previous chunk: a header may straddle two
        while True:
            if i < len(self._window):
                at, chunk = self._window[i]
                i += 1
            else:
                chunk = self._read_raw(CHUNK)
                if not chunk:
                    return None
                at, i = self._raw_pos - len(chunk), len(self._window)
            data, base = (carry + chunk, carry_at) if carry_at + len(carry) == at else (chunk, at)
            pos = max(after - base, 0)
            while (k := data.find(GZIP_MAGIC, pos)) >= 0:
                # the flag byte's reserved bits are zero in any real header
                if k + 3 >= len(data) or not data[k + 3] & 0xE0:
                    return base + k
                pos = k + 1
            carry = data[-2:]
            carry_at = base + len(data) - len(carry)

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


def open_stream(source, resync: bool = False) -> GuardedStream:
    """Decompressed bytes (gzip, bzip2 or none, by magic number) of a path or of a binary file-like
    object (anything with ``read(n)``: a local file, an HTTP response, an fsspec file; it is read
    sequentially, never seeked, and closed with the stream); OSError if a path cannot be opened.
    ``resync``: go on after a damaged gzip member (see the module docstring)."""
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
    return GuardedStream(f, sniff_compression(head), head, resync)


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
