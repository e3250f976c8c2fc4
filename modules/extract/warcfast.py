"""WARC records read by FastWARC where each one is proved to be what :class:`WarcReader` makes of it.

Why: FastWARC inflates and frames a Common Crawl .warc.gz about twice as fast as Python's zlib and
our framing, and the inflate is most of that gap. But it trusts Content-Length (the loss that
:mod:`curate.stages.extract.warcreader` exists to prevent), and it does not show what our framing
decides on: the raw header bytes (it trims names and values, folds continuation lines, drops lines
without a colon), the bytes between records (it skips blank lines), where gzip members start in the decompressed stream
(its ``stream_pos`` on a .warc.gz is the member's *compressed* offset) or a cut-off file (it just
ends). So its records are taken only with a proof, and WarcReader decides everything else.

The proof: FastWARC's parse of a record is rebuilt as the bytes a writer would have written
(``WARC/1.x`` CRLF, ``Name: value`` CRLF for each header, CRLF, the block, CRLF CRLF), and

- in a .warc.gz the record must be one whole gzip member: from its ``stream_pos`` to the next
  record's (or to the end of the file), with that member's trailer (CRC-32 and length of its
  bytes, which FastWARC checks against what it inflated) matching the rebuilt bytes;
- in a .warc the file must hold the rebuilt bytes there, byte for byte.

The first record must start at offset 0, each next one where the previous ended. Those are then the
very bytes WarcReader would frame: a header ending at the first CRLF CRLF, a Content-Length (read by
the same code) equal to the block, CRLF CRLF, and no gzip member starting inside. WarcReader also
looks at what follows (``WARC/`` or the end), so a record is yielded only once the next one is
proved too, or the file ends right after it. Its Item is then the one WarcReader would yield.

From the first record without a proof (a mismatch, a block over ``max_block``, FastWARC raising,
bytes left after the last record, a file that is not one member per record), the stream goes to
WarcReader at the start of the oldest record not yet yielded, a member boundary: decompression
resumes there on the compressed bytes kept since (:meth:`GuardedStream.resume`), every offset still
the whole file's, so its Items, rejects and damage reports are those of a WarcReader run from the
start. FastWARC is not taken up again in that file.

Limit: CRC-32 is a proof for any .warc.gz not crafted to collide it (a .warc is compared byte for
byte); in one made to collide it, a record's header can come out the way FastWARC reads it rather
than the way WarcReader would.
"""

from __future__ import annotations

import struct
import zlib

from curate.stages.extract.archive import GuardedStream
from curate.stages.extract.warcreader import MAX_HEADER, Item, WarcReader, header, parse_headers

try:  # FastWARC 2 (resiliparse 2): HeaderMap.items_bytes and status_line_bytes give the parse as bytes
    from fastwarc.warc import ArchiveIterator, HeaderMap

    if not (hasattr(HeaderMap, "items_bytes") and hasattr(HeaderMap, "status_line_bytes")):
        raise ImportError("FastWARC without byte headers")
except ImportError:  # an older FastWARC: WarcReader alone, as before
    ArchiveIterator = None

_CRLF2 = b"\r\n\r\n"
#: a gzip member's last 8 bytes: CRC-32 and length (mod 2**32) of its decompressed bytes
_TRAILER = struct.Struct("<II")
#: the smallest gzip member: header 10 bytes, an empty deflate block 2, trailer 8
_MIN_MEMBER = 20
#: compressed bytes read from the file per step
READ = 1 << 16


def warc_reader(stream, max_block: int):
    """The reader of an :func:`~curate.stages.extract.archive.open_stream` stream not read yet: FastWARC
    with proofs (:class:`FastWarcReader`) for gzip'd and plain WARC, :class:`WarcReader` otherwise.
    Either has ``records`` and yields the same Items."""
    if (ArchiveIterator is not None and isinstance(stream, GuardedStream) and stream.codec in ("gzip", None)
            and not stream.tell()):
        return FastWarcReader(stream, max_block)
    return WarcReader(stream, max_block, stream.member_starts if stream.compressed else None)


class FastWarcReader:
    """:class:`Item` s of a WARC file (a fresh :class:`GuardedStream`), as :class:`WarcReader` yields
    them: FastWARC's where proved, WarcReader's from the first record that is not (module docstring)."""

    def __init__(self, stream: GuardedStream, max_block: int):
        self._stream = stream
        self._max_block = max_block
        self._gzip = stream.codec == "gzip"
        #: records whose header could be parsed (as WarcReader counts them)
        self.records = 0
        #: records yielded from FastWARC (the rest came from WarcReader)
        self.proved = 0
        self._at = 0  # compressed offset of the oldest record not yet yielded
        self._out = 0  # its decompressed offset
        self._members: list[int] = []  # decompressed offsets of the members yielded

    def __iter__(self):
        head, raw = self._stream.source()
        tee = _Tee(head, raw)
        yield from self._proved(tee)
        at, out = self._at, self._out
        self._stream.resume(tee.replay(at), at, out, self._members)
        reader = WarcReader(self._stream, self._max_block, self._members if self._gzip else None, out)
        done = self.records
        for item in reader:
            self.records = done + reader.records
            yield item
        self.records = done + reader.records

    def _proved(self, tee: _Tee):
        gzip = self._gzip
        pending: list[tuple] = []  # records read, not yet yielded; all but the last proved
        it = ArchiveIterator(tee, parse_http=False)
        while True:
            try:
                rec = next(it, None)
                if rec is None:  # FastWARC's end: the last record's must be the file's
                    end, new = tee.end(), None
                else:
                    end, new = rec.stream_pos, self._rebuild(rec)
            except BaseException as e:
                # FastWARC's Rust panics are BaseExceptions (pyo3's PanicException): WarcReader decides
                if not isinstance(e, Exception) and type(e).__name__ != "PanicException":
                    raise
                return
            if end is None:  # FastWARC left bytes unread or reading the file failed
                return
            if pending:  # the last record read ends where this one starts: prove it
                start, head, block, _, length, crc = pending[-1]
                n = len(head) + length + 4
                if gzip:
                    if end - start < _MIN_MEMBER or end > tee.base + len(tee.buf):
                        return
                    stored, size = _TRAILER.unpack_from(tee.buf, end - 8 - tee.base)
                    if stored != crc or size != n & 0xFFFFFFFF:
                        return
                else:
                    buf, a = tee.buf, start - tee.base
                    if not (end - start == n and buf.startswith(head, a) and buf.startswith(block, a + len(head))
                            and buf.startswith(_CRLF2, a + n - 4)):
                        return
                # all pending records are proved: yield each whose successor is proved too, or is
                # the end of the file
                last = 0 if new is None and end == tee.size else 1
                while len(pending) > last:
                    yield self._take(pending, end, tee)
            elif end != self._at:  # bytes before the first record
                return
            if new is None:  # the end of the file, or a record without a proof
                return
            pending.append((end, *new))

    def _take(self, pending: list[tuple], end: int, tee: _Tee) -> Item:
        """The Item of the first pending record, proved; ``end``: where the last pending one ends."""
        _, head, block, headers, length, _ = pending.pop(0)
        out = self._out
        self._out = out + len(head) + length + 4
        self._at = pending[0][0] if pending else end
        tee.release(self._at)
        if self._gzip:
            self._members.append(out)
        self.records += 1
        self.proved += 1
        return Item("record", out, self._out, headers, length, block)

    def _rebuild(self, rec) -> tuple | None:
        """(header bytes as a writer would have written FastWARC's parse, block, headers, length,
        CRC-32 of the whole record) or None when WarcReader would not frame it as such a record."""
        h = rec.headers
        status = h.status_line_bytes
        if not status or not status.startswith(b"WARC/"):
            return None
        head = b"\r\n".join([status, *map(b": ".join, h.items_bytes()), b"", b""])
        if len(head) > MAX_HEADER or head.find(_CRLF2) != len(head) - 4:
            return None
        headers = parse_headers(head[:-4])
        length = header(headers, "Content-Length") if headers is not None else None
        if length is None or not length.strip().isdigit():
            return None
        try:
            length = int(length)
        except ValueError:  # a digit int() does not take: WarcReader's to fail on
            return None
        if length > self._max_block or length != rec.content_length:
            return None
        block = rec.reader.read()
        if len(block) != length:
            return None
        crc = zlib.crc32(_CRLF2, zlib.crc32(block, zlib.crc32(head))) if self._gzip else 0
        return head, block, headers, length, crc


class _Tee:
    """The compressed file as FastWARC reads it (``read``, ``tell``), keeping every byte from the
    oldest record not yet yielded on: for the gzip trailers, and for WarcReader to go on from there."""

    def __init__(self, head: bytes, raw):
        self._raw = raw
        self.buf = bytearray(head)
        self.base = 0  # file offset of buf[0]
        self._pos = 0  # file offset of the next byte for FastWARC
        self._eof = False
        self._error: Exception | None = None  # what reading the file raised: raised again by the replay

    def tell(self) -> int:
        return self._pos

    def read(self, size: int = -1) -> bytes:
        size = READ if size is None or size < 0 else size
        self._fill(self._pos + size)
        a = self._pos - self.base
        with memoryview(self.buf) as view:  # one copy, and the buffer free to resize after
            data = bytes(view[a:a + size])
        self._pos += len(data)
        return data

    def close(self) -> None:
        """The file stays open: the replay reads on."""

    def _fill(self, upto: int) -> None:
        # a network stream may return fewer bytes than asked: FastWARC gets full reads until the end
        while self.base + len(self.buf) < upto and not self._eof:
            try:
                data = self._raw.read(max(upto - self.base - len(self.buf), READ))
            except Exception as e:  # the stream's to report, where a WarcReader run would meet it
                self._error, data = e, b""
            if not data:
                self._eof = True
            self.buf += data

    @property
    def size(self) -> int | None:
        """The file's size, once read to its end without an error."""
        return self.base + len(self.buf) if self._eof and self._error is None else None

    def end(self) -> int | None:
        """The file's size if FastWARC has read all of it, else None (bytes it left, or an error)."""
        self._fill(self._pos + 1)
        size = self.size
        return size if size == self._pos else None

    def release(self, upto: int) -> None:
        """Forget the bytes before file offset ``upto``."""
        del self.buf[: upto - self.base]
        self.base = upto

    def replay(self, start: int) -> _Replay:
        self.release(start)
        buf, self.buf = self.buf, bytearray()
        return _Replay(buf, self._raw, self._error, self._eof)


class _Replay:
    """The file from a kept offset on: the kept bytes, then the rest of the file (then the error
    reading it raised, if it did)."""

    def __init__(self, kept: bytearray, raw, error: Exception | None, eof: bool):
        self._kept = kept
        self._raw = raw
        self._error = error
        self._eof = eof

    def read(self, size: int = -1) -> bytes:
        if self._kept:
            size = len(self._kept) if size is None or size < 0 else size
            with memoryview(self._kept) as view:
                data = bytes(view[:size])
            del self._kept[:size]
            return data
        if self._error is not None:
            error, self._error = self._error, None
            raise error
        return b"" if self._eof else self._raw.read(size)

    def close(self) -> None:
        self._raw.close()
