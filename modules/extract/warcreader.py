"""WARC records from a decompressed byte stream, each checked to end where the next one begins.

A WARC record is ``WARC/1.x`` + header lines + a blank line, then exactly ``Content-Length``
bytes of block, then ``\\r\\n\\r\\n`` (ISO 28500). A reader that trusts Content-Length blindly
(FastWARC, warcio) loses every record after one whose length is wrong: too large, it swallows the
records behind it; too small, the reader lands inside the block. This reader checks each record's
end (the two CRLF, then the next ``WARC/`` header or the end of the stream; in a .warc.gz also that
no gzip member starts inside the record, as every Common Crawl record is its own member). A record
that fails is reported as ``malformed`` and reading resumes at the next ``WARC/1.0`` (or 1.1)
header line after the record's header (in a .warc.gz: at the next member); bytes that belong to no
record (before the first, or between a record's CRLF CRLF and the next header) are reported as one
``garbage`` item. Nothing is lost silently. A damaged gzip member is the stream's to skip
(:func:`curate.stages.extract.archive.open_stream` with ``resync``): the reader only sees a member
start where decompression went on, and frames the record cut short there like any other.

Where the file is well formed, :mod:`curate.stages.extract.warcfast` reads it with FastWARC (its
C-speed inflate is most of the gain) and proves that each record is exactly what this reader would
have made of the same bytes; it hands the stream to this reader from the first record it cannot
prove, so the checks above decide every record either way.

Memory is bounded: a block over ``max_block`` bytes is skipped in chunks, never held (only its
first ``HTTP_PEEK`` bytes are kept, for the HTTP status and content type); a header is at most
``MAX_HEADER`` bytes. One known ambiguity: an oversized block that itself contains a WARC record
header line (a WARC file served over HTTP) is split there.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

#: largest WARC header block (Common Crawl's are under 1 KiB)
MAX_HEADER = 64 << 10
#: bytes of an oversized block kept to read its HTTP headers
HTTP_PEEK = 64 << 10
#: decompressed bytes read per step
READ = 1 << 20
#: a record header line, "WARC/1.0" or "WARC/1.1" (stray bytes may run into it without a line break)
_CANDIDATE = re.compile(rb"WARC/1\.[01]\r?\n")
_CHARSET = re.compile(r"""charset\s*=\s*["']?([^\s;"',]+)""", re.IGNORECASE)


@dataclass
class Item:
    """One record (or run of stray bytes) of the stream.

    ``kind``: ``record`` (well framed), ``oversized`` (well framed, block over ``max_block``: only
    its head is in ``block``), ``truncated`` (the stream ends inside the block), ``malformed``
    (unparsable header, or a Content-Length that does not match where the next record starts) or
    ``garbage`` (bytes before the first or between records that no header claims).
    """

    kind: str
    start: int  # offset of the record in the decompressed stream
    end: int  # offset after it (after the skipped bytes, for malformed and garbage)
    headers: dict | None = None
    length: int = 0  # the declared Content-Length
    block: bytes = b""
    detail: str = ""


def parse_headers(data: bytes) -> dict | None:
    """Header lines (after the version line) as a dict; None when a line is not ``Name: value``."""
    headers: dict[str, str] = {}
    last = None
    for line in data.decode("utf-8", "replace").split("\r\n")[1:]:
        name, sep, value = line.partition(":")
        key = name.strip()
        if sep and key and (last is None or name[0] not in " \t"):
            headers[key] = value.strip()
            last = key
        elif line[:1] in (" ", "\t") and last is not None:  # a folded continuation line (colon or not)
            headers[last] += " " + line.strip()
        else:
            return None
    return headers


def header(headers: dict, name: str) -> str | None:
    """A header's value, whatever the case of its name."""
    value = headers.get(name)
    if value is None:
        lower = name.lower()
        for k, v in headers.items():
            if k.lower() == lower:
                return v
    return value


@dataclass
class Http:
    status: int
    content_type: str  # the media type, lowercase, without parameters
    charset: str | None
    payload: int  # where the payload starts in the block


_CONTENT_TYPE = re.compile(rb"\ncontent-type[ \t]*:[ \t]*([^\r\n]*)", re.IGNORECASE)


def parse_http(block: bytes) -> Http | None:
    """The HTTP response head of a response record's block; None when it is not one."""
    end, sep = block.find(b"\r\n\r\n", 0, HTTP_PEEK), 4
    if end < 0:
        end, sep = block.find(b"\n\n", 0, HTTP_PEEK), 2
        if end < 0:
            return None
    first = block.find(b"\n", 0, end)
    status = block[: first if first >= 0 else end].split(None, 2)
    if len(status) < 2 or not status[0].startswith(b"HTTP/") or not status[1].isdigit():
        return None
    m = _CONTENT_TYPE.search(block, 0, end)
    content_type = m.group(1).decode("latin-1").strip() if m else ""
    mime, _, params = content_type.partition(";")
    c = _CHARSET.search(params) if params else None
    return Http(int(status[1]), mime.strip().lower(), c.group(1) if c else None, end + sep)


class WarcReader:
    """:class:`Item` s of a decompressed WARC stream (``read(n)``), in order.

    ``member_starts``: a list the stream keeps growing with the decompressed offset of each gzip
    member (:class:`curate.stages.extract.archive.GuardedStream`), or None for an uncompressed file.
    ``start``: the stream offset of the first byte ``read`` returns (a stream resumed mid-file).
    """

    def __init__(self, stream, max_block: int, member_starts: list[int] | None = None, start: int = 0):
        self._stream = stream
        self._buf = bytearray()
        self._base = start  # stream offset of _buf[0]
        self._eof = False
        self._max_block = max_block
        self._members = member_starts
        self._member_i = 0  # members before this index start before the current record
        #: records whose header could be parsed (malformed ones included)
        self.records = 0

    # -- buffer, in stream offsets
    def _fill(self, upto: int) -> None:
        """Read until the buffer reaches stream offset ``upto`` or the stream ends."""
        while self._base + len(self._buf) < upto and not self._eof:
            data = self._stream.read(max(READ, upto - self._base - len(self._buf)))
            if not data:
                self._eof = True
            self._buf += data

    def _drop(self, upto: int) -> None:
        """Forget everything before stream offset ``upto``."""
        del self._buf[: upto - self._base]
        self._base = upto

    @property
    def _limit(self) -> int:
        return self._base + len(self._buf)

    def _slice(self, a: int, b: int) -> bytes:
        return bytes(self._buf[a - self._base: b - self._base])

    def _next_member(self, after: int) -> int | None:
        """First gzip member start strictly after ``after`` that has been read, if any."""
        members = self._members
        if not members or len(members) < 2:  # one member: a whole-file gzip, no record boundaries
            return None
        i = self._member_i
        while i < len(members) and members[i] <= after:
            i += 1
        self._member_i = i
        return members[i] if i < len(members) else None

    def _find_header(self, after: int) -> int | None:
        """Stream offset of the next header line after ``after``, reading (and dropping what
        lies before it) as needed; None at the end of the stream (everything then dropped)."""
        pos = after
        while True:
            m = _CANDIDATE.search(self._buf, max(pos - self._base, 0))
            if m:
                return self._base + m.start()
            if self._eof:
                self._drop(self._limit)
                return None
            keep = max(self._limit - 16, pos)  # a header line may straddle two reads
            self._drop(max(keep, self._base))
            pos = keep
            self._fill(self._limit + READ)

    def _resync(self, start: int, after: int) -> int:
        """Where reading resumes after a bad record at ``start``: the next gzip member or the next
        header line after ``after``; the end of the stream when there is none."""
        member = self._next_member(start)
        if member is not None:
            self._fill(member)
            self._drop(min(member, self._limit))
            return self._base
        found = self._find_header(after)
        if found is None:
            return self._limit
        self._drop(found)
        return found

    def _ends_at(self, end: int) -> str:
        """How the block ends at ``end``: "ok" (CRLF CRLF, then a header or nothing), "crlf" (CRLF
        CRLF, then something else) or "bad"."""
        self._fill(end + 16)
        tail = self._slice(end, end + 16)
        if not tail.startswith(b"\r\n\r\n"):
            return "bad"
        rest = tail[4:].lstrip(b"\r\n")
        return "ok" if rest.startswith(b"WARC/"[: len(rest)]) else "crlf"  # "" (the end) included

    def _good_end(self, body: int, end: int, member: int | None) -> bool:
        """The record's block really ends at ``end``.

        CRLF CRLF followed by stray bytes still ends it when no record header starts inside the
        block (the stray bytes are then reported on their own); a Content-Length that is too small
        would have to land exactly on a CRLF CRLF of the block."""
        if member is not None and member < end + 4:
            return False
        how = self._ends_at(end)
        return how == "ok" or (how == "crlf" and self._search(body, end) is None)

    # -- records
    def __iter__(self):
        while True:
            self._fill(self._base + 8)
            # blank lines between records are tolerated
            buf, lead = self._buf, 0
            while lead < len(buf) and buf[lead] in (10, 13):
                lead += 1
            if lead:
                self._drop(self._base + lead)
                continue
            if not self._buf:
                return
            start = self._base
            if not self._buf.startswith(b"WARC/"):
                end = self._resync(start, start)
                yield Item("garbage", start, end, detail=f"{end - start} bytes that belong to no WARC record")
                continue
            yield from self._record(start)

    def _record(self, start: int):
        self._fill(start + MAX_HEADER)
        head_end = self._buf.find(b"\r\n\r\n", 0, MAX_HEADER)
        headers = parse_headers(self._slice(start, start + head_end)) if head_end >= 0 else None
        length = header(headers, "Content-Length") if headers is not None else None
        self.records += 1
        if headers is None or length is None or not length.strip().isdigit():
            why = ("no end of header within the first 64 KiB" if head_end < 0 else
                   "unparsable WARC header" if headers is None else "no valid Content-Length")
            end = self._resync(start, start + 1)
            yield Item("malformed", start, end, headers, detail=why)
            return
        length = int(length)
        body = start + head_end + 4
        end = body + length
        if length > self._max_block:
            yield from self._oversized(start, headers, length, body, end)
            return
        self._fill(end + 16)
        member = self._next_member(start)
        if self._limit < end:  # the stream ends inside the block
            found = member if member is not None and member < self._limit else self._search(body, self._limit)
            if found is not None:
                end_at = self._resync(start, body)
                yield Item("malformed", start, end_at, headers, length,
                           detail=f"Content-Length {length} runs past the next record at byte {end_at}")
                return
            block = self._slice(body, self._limit)
            self._drop(self._limit)
            yield Item("truncated", start, self._base, headers, length, block,
                       detail=f"the block has {len(block)} of {length} bytes")
            return
        if self._good_end(body, end, member):
            block = self._slice(body, end)
            self._drop(end + 4)
            yield Item("record", start, end + 4, headers, length, block)
            return
        end_at = self._resync(start, body)
        yield Item("malformed", start, end_at, headers, length,
                   detail=f"its Content-Length {length} does not match: the next record starts at byte {end_at}")

    def _search(self, a: int, b: int) -> int | None:
        m = _CANDIDATE.search(self._buf, max(a - self._base, 0), b - self._base)
        return self._base + m.start() if m else None

    def _oversized(self, start: int, headers: dict, length: int, body: int, end: int):
        """A block too large to hold: skipped in chunks, watching for a record starting inside it."""
        self._fill(body + HTTP_PEEK)
        peek = self._slice(body, min(end, body + HTTP_PEEK))
        pos = body
        while True:
            stop = min(end, self._limit)
            member = self._next_member(start)
            found = member if member is not None and member < stop else self._search(pos, stop)
            if found is not None:
                self._drop(found)
                yield Item("malformed", start, found, headers, length,
                           detail=f"its Content-Length {length} runs past the next record at byte {found}")
                return
            if stop >= end or self._eof:
                break
            keep = max(stop - 16, pos)
            self._drop(keep)
            pos = keep
            self._fill(self._limit + READ)
        if self._limit < end:
            self._drop(self._limit)
            yield Item("truncated", start, self._base, headers, length, peek,
                       detail=f"the stream ends inside a block of {length} bytes")
            return
        if self._ends_at(end) != "bad":  # a header inside would have been found while skipping
            self._drop(end + 4)
            yield Item("oversized", start, end + 4, headers, length, peek)
            return
        end_at = self._resync(start, end - 16)
        yield Item("malformed", start, end_at, headers, length,
                   detail=f"its Content-Length {length} does not match: the next record starts at byte {end_at}")
