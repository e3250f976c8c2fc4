"""The FastWARC path of the WARC reader (modules/extract/warcfast.py) against the Python framer
(WarcReader, the oracle): the same Items, record counts and stream state (offsets, gzip members,
damage, errors) on well-formed files, where every record comes from FastWARC, and on broken ones,
where it hands over and one bad record still costs exactly one record."""

import bz2
import gzip
import io

import pytest

from curate.stages.extract import warcfast
from curate.stages.extract.archive import open_stream
from curate.stages.extract.warcfast import FastWarcReader, warc_reader
from curate.stages.extract.warcreader import WarcReader
from tests.rawdata import RUST_BOOK, damaged_warc, warc_record, write_warc

pytestmark = pytest.mark.skipif(warcfast.ArchiveIterator is None, reason="needs FastWARC 2")

MAX = 10 << 20
GOOD = b"<html><body><p>" + b"A paragraph about tomatoes and the garden in summer. " * 4 + b"</p></body></html>"


def _page(i: int) -> bytes:
    return GOOD.replace(b"tomatoes", f"tomatoes number {i}".encode())


def _records(n: int = 6, **bad) -> list[bytes]:
    """n response records; ``bad``: index -> extra Content-Length (a lying record)."""
    return [warc_record(f"http://x/{i}", _page(i), extra_length=bad.get(f"r{i}", 0)) for i in range(n)]


def _varied() -> list[bytes]:
    """Records of every shape a well-formed file has: types, an empty block, a block holding a WARC
    header line (a WARC served over HTTP), binary bytes, a WARC/1.1 record."""
    inner = b"WARC/1.0\r\nWARC-Type: response\r\nContent-Length: 5\r\n\r\nhello\r\n\r\n"
    v11 = warc_record("http://x/v11", _page(9)).replace(b"WARC/1.0", b"WARC/1.1", 1)
    return [
        warc_record("http://x/info", b"software: curate\r\n", record_type="warcinfo"),
        warc_record("http://x/0", _page(0)),
        warc_record("http://x/req", b"GET / HTTP/1.1\r\nHost: x\r\n\r\n", record_type="request"),
        warc_record("http://x/empty", b"", record_type="metadata"),
        warc_record("http://x/nested", b"<pre>" + inner + b"</pre>"),
        warc_record("http://x/bin", bytes(range(256)) * 3, content_type="application/octet-stream"),
        warc_record("http://x/404", _page(4), status=404),
        v11,
    ]


def _gz(records: list[bytes]) -> bytes:
    return b"".join(gzip.compress(r, mtime=0) for r in records)


def _state(stream):
    return stream.tell(), list(stream.member_starts), [vars(d) for d in stream.damage], repr(stream.error)


def _python(data: bytes, max_block: int = MAX):
    stream = open_stream(io.BytesIO(data), resync=True)
    reader = WarcReader(stream, max_block, stream.member_starts if stream.compressed else None)
    return list(reader), reader.records, _state(stream)


def _fast(source, max_block: int = MAX):
    stream = open_stream(io.BytesIO(source) if isinstance(source, bytes) else source, resync=True)
    reader = warc_reader(stream, max_block)
    assert isinstance(reader, FastWarcReader)
    items = list(reader)
    return (items, reader.records, _state(stream)), reader.proved


def _same(data: bytes, max_block: int = MAX) -> tuple[list, int]:
    """The Items of both paths (asserted equal, with counts and stream state); and how many FastWARC gave."""
    want = _python(data, max_block)
    got, proved = _fast(data, max_block)
    assert got[0] == want[0]
    assert got[1:] == want[1:]
    return want[0], proved


def _urls(items, kind="record"):
    return [it.headers.get("WARC-Target-URI") for it in items if it.kind == kind]


# --------------------------------------------------------------------------- well formed: all FastWARC


@pytest.mark.parametrize("compress", [False, True], ids=["warc", "warc.gz"])
def test_well_formed_files_give_the_same_items_by_both_paths(compress):
    records = _varied()
    data = _gz(records) if compress else b"".join(records)
    items, proved = _same(data)
    assert [it.kind for it in items] == ["record"] * len(records)
    assert proved == len(records)  # every record from FastWARC, proved
    assert b"<pre>WARC/1.0\r\n" in items[4].block  # a header line inside a block is no record
    assert items[3].block == b"" and items[3].length == 0


def test_the_real_rust_book_file_by_both_paths():
    data = RUST_BOOK.read_bytes()
    items, proved = _same(data)
    assert len(items) > 40 and proved == len(items)
    assert {it.headers["WARC-Type"] for it in items} == {"response"}
    plain, proved = _same(gzip.decompress(data))
    assert plain == items and proved == len(items)


def test_warcio_reads_the_same_records():
    warcio = pytest.importorskip("warcio.archiveiterator")
    data = _gz(_varied())
    items, _ = _same(data)
    theirs = [(r.rec_headers.get_header("WARC-Target-URI"), r.raw_stream.read())
              for r in warcio.ArchiveIterator(io.BytesIO(data))]
    assert theirs == [(it.headers["WARC-Target-URI"], it.block) for it in items]


def test_a_non_seekable_stream_with_short_reads():
    class Trickle:  # an HTTP body: read(n) hands out at most 1000 bytes, no seek, no tell
        def __init__(self, data):
            self._f = io.BytesIO(data)

        def read(self, n=-1):
            return self._f.read(min(n, 1000) if n and n > 0 else 1000)

        def close(self):
            pass

    data = _gz(_records(5))
    got, proved = _fast(Trickle(data))
    assert got == _python(data) and proved == 5


# --------------------------------------------------------------------------- broken: one record lost, none swallowed


@pytest.mark.parametrize("compress", [False, True], ids=["warc", "warc.gz"])
@pytest.mark.parametrize("lie", [10**9, 400, -30, -200], ids=["past-eof", "too-large", "too-small", "far-too-small"])
def test_a_wrong_content_length_costs_exactly_that_record(compress, lie):
    records = _records(6, r3=lie)
    items, proved = _same(_gz(records) if compress else b"".join(records))
    assert _urls(items) == [f"http://x/{i}" for i in (0, 1, 2, 4, 5)]
    assert [it.kind for it in items if it.kind != "record"] == ["malformed"]
    # a record is yielded once the one after it is proved: 0 and 1 by FastWARC, 2 on by WarcReader
    assert proved == 2


@pytest.mark.parametrize("compress", [False, True], ids=["warc", "warc.gz"])
def test_garbage_between_records(compress):
    records = _records(5)
    junk = b"stray bytes\x00\xff" * 5
    if compress:
        data = _gz(records[:2]) + junk + _gz(records[2:])
    else:
        data = b"".join(records[:2]) + junk + b"".join(records[2:])
    items, proved = _same(data)
    assert proved == 0  # record 1 is not followed by a record: WarcReader from record 0 on
    assert _urls(items) == [f"http://x/{i}" for i in range(5)]
    # in a .warc.gz, bytes that are no gzip member are a damaged member, which the stream reports
    assert [it.kind for it in items].count("garbage") == (0 if compress else 1)


@pytest.mark.parametrize("compress", [False, True], ids=["warc", "warc.gz"])
@pytest.mark.parametrize("cut", [3, 60, 400])
def test_a_truncated_tail(compress, cut):
    records = _records(4)
    pieces = [gzip.compress(r, mtime=0) for r in records] if compress else records
    data = b"".join(pieces)
    items, _ = _same(data[:-cut])
    whole = sum(1 for k in range(1, 5) if len(b"".join(pieces[:k])) <= len(data) - cut)
    assert _urls(items)[:whole] == [f"http://x/{i}" for i in range(whole)] and whole >= 2


@pytest.mark.parametrize("keep", [5, 0.5, -6], ids=["in-gzip-header", "in-deflate-data", "in-trailer"])
def test_a_damaged_gzip_member(tmp_path, keep):
    damaged_warc(tmp_path / "d.warc.gz", _records(6), 2, keep)
    data = (tmp_path / "d.warc.gz").read_bytes()
    items, proved = _same(data)
    assert proved == 0  # record 1's successor is damaged: WarcReader from record 0 on
    stream = open_stream(io.BytesIO(data), resync=True)
    list(warc_reader(stream, MAX))
    assert len(stream.damage) == 1  # the damaged member is reported at the same offsets as by WarcReader
    # records 0, 1 and 3-5 are whole; record 2's member is damaged (the stream reports it, the
    # extractor rejects what began in it)
    assert {"http://x/0", "http://x/1", "http://x/3", "http://x/4", "http://x/5"} <= set(_urls(items))


def test_garbage_before_the_first_record_and_after_the_last():
    records = _records(3)
    _same(b"junk\r\n" + b"".join(records))
    _same(b"".join(records) + b"\0" * 100)
    items, proved = _same(_gz(records) + b"\0" * 512)
    assert _urls(items) == ["http://x/0", "http://x/1", "http://x/2"] and proved == 1
    _same(gzip.compress(b"junk\r\n", mtime=0) + _gz(records))


@pytest.mark.parametrize("compress", [False, True], ids=["warc", "warc.gz"])
def test_an_oversized_block_goes_to_the_python_framer(compress):
    records = _records(2) + [warc_record("http://x/big", b"x" * 50_000)] + _records(5)[2:]
    items, proved = _same(_gz(records) if compress else b"".join(records), max_block=10_000)
    assert [it.kind for it in items] == ["record", "record", "oversized", "record", "record", "record"]
    assert proved == 1


@pytest.mark.parametrize("compress", [False, True], ids=["warc", "warc.gz"])
@pytest.mark.parametrize("header", [b"X-Odd:value", b"X-Odd:  value ", b"X-Odd: a\r\n  folded", b"X-Odd: a\nX-B: b",
                                    b"X-Odd: a\rb", b"X-Odd: caf\xc3\xa9 \xff", b"X-Odd: \xc2\xa0a\xc2\xa0",
                                    b"no colon here", b": no name", b"content-length: 7", b"Content-Length: 7"])
def test_headers_not_written_canonically_are_read_as_the_python_framer_reads_them(compress, header):
    # FastWARC trims, folds continuation lines and drops lines without a colon, and its header is
    # rebuilt canonically: where that is not the file's bytes the proof fails and WarcReader reads on
    # (an unparsable header stays malformed); where it is, the Item is the same either way
    records = _records(4)
    records[2] = records[2].replace(b"\r\nWARC-Date:", b"\r\n" + header + b"\r\nWARC-Date:", 1)
    items, proved = _same(_gz(records) if compress else b"".join(records))
    assert len(items) == 4 and proved in (1, 4)


def test_a_whole_file_gzip_and_bz2_are_read_by_the_python_framer():
    records = _records(4)
    items, proved = _same(gzip.compress(b"".join(records), mtime=0))
    assert proved == 0 and _urls(items) == [f"http://x/{i}" for i in range(4)]
    stream = open_stream(io.BytesIO(bz2.compress(b"".join(records))), resync=True)
    assert isinstance(warc_reader(stream, MAX), WarcReader)


def test_empty_and_not_a_warc():
    assert _same(b"") == ([], 0)
    _same(b"just some text\r\n")
    _same(gzip.compress(b"just some text\r\n"))


def test_a_read_error_mid_file_ends_the_stream_as_before():
    data = _gz(_records(6))

    class Broken(io.RawIOBase):
        def __init__(self):
            self._f = io.BytesIO(data)

        def readable(self):
            return True

        def read(self, n=-1):
            if self._f.tell() > len(data) // 2:
                raise OSError("connection reset")
            return self._f.read(min(n, 700) if n and n > 0 else 700)

    got, _ = _fast(Broken())
    stream = open_stream(Broken(), resync=True)
    reader = WarcReader(stream, MAX, stream.member_starts)
    assert got == (list(reader), reader.records, _state(stream))
    assert "connection reset" in got[2][3]


def test_fastwarc_failing_hands_over(monkeypatch):
    records = _records(5)
    real = warcfast.ArchiveIterator

    class PanicException(BaseException):  # what a Rust panic in FastWARC raises
        pass

    def panicking(stream, **kw):
        for i, rec in enumerate(real(stream, **kw)):
            if i == 3:
                raise PanicException("boom")
            yield rec

    monkeypatch.setattr(warcfast, "ArchiveIterator", panicking)
    items, proved = _same(_gz(records))
    assert _urls(items) == [f"http://x/{i}" for i in range(5)] and proved == 1


def test_without_fastwarc_2_the_python_framer_reads_all(monkeypatch):
    monkeypatch.setattr(warcfast, "ArchiveIterator", None)
    stream = open_stream(io.BytesIO(_gz(_records(2))), resync=True)
    assert isinstance(warc_reader(stream, MAX), WarcReader)


def test_the_extract_stage_output_is_the_same_by_both_paths(tmp_path, monkeypatch):
    from curate.stages.extract import RawFile
    from curate.stages.extract.warc import ExtractWarcSettings, extract_warc_file

    records = _varied() + _records(4, r2=50)
    path = write_warc(tmp_path / "x.warc.gz", records)
    settings = ExtractWarcSettings(extract_timeout=0, language_id="none")
    fast = extract_warc_file(RawFile(str(path), path.name), settings, "skip")
    monkeypatch.setattr(warcfast, "ArchiveIterator", None)
    slow = extract_warc_file(RawFile(str(path), path.name), settings, "skip")
    assert fast.equals(slow) and len(fast) > 3


@pytest.mark.parametrize("compress", [False, True], ids=["warc", "warc.gz"])
def test_random_damage_gives_the_same_items_by_both_paths(compress):
    # flips, cuts, insertions, deletions and repeats anywhere (headers, blocks, gzip headers and
    # trailers): whatever FastWARC proves before the damage, the Items are WarcReader's
    import random

    rng = random.Random(48)
    records = _varied()[:5] + _records(4)
    clean = _gz(records) if compress else b"".join(records)
    handed_over = 0
    for _ in range(120):
        data = bytearray(clean)
        for _ in range(rng.randint(1, 3)):
            at, op = rng.randrange(len(data)), rng.choice(["flip", "cut", "insert", "delete", "repeat"])
            if op == "flip":
                data[at] ^= 1 << rng.randrange(8)
            elif op == "cut":
                del data[at:]
            elif op == "insert":
                data[at:at] = rng.choice([b"\r\n", b"x", b"WARC/1.0\r\n", b"\x1f\x8b\x08\x00"])
            elif op == "delete":
                del data[at:at + rng.randint(1, 20)]
            else:
                src = rng.randrange(len(data))
                data[at:at] = data[src:src + rng.randint(1, 300)]
            if not data:
                break
        _, proved = _same(bytes(data))
        handed_over += 0 < proved < len(records)
    assert handed_over > 20  # FastWARC read some records, WarcReader the rest


def _parse_headers_before(data: bytes) -> dict | None:
    """parse_headers as it was before it was made faster: the reference for the test below."""
    headers: dict[str, str] = {}
    last = None
    for line in data.decode("utf-8", "replace").split("\r\n")[1:]:
        name, sep, value = line.partition(":")
        if not sep or not name.strip():
            if line[:1] in (" ", "\t") and last is not None:
                headers[last] += " " + line.strip()
                continue
            return None
        if name[:1] in (" ", "\t") and last is not None:
            headers[last] += " " + line.strip()
            continue
        last = name.strip()
        headers[last] = value.strip()
    return headers


def test_parse_headers_is_unchanged_on_odd_headers():
    import random

    from curate.stages.extract.warcreader import parse_headers

    rng = random.Random(48)
    pieces = ["A", "b-c", ":", " ", "\t", "\r\n", "\n", "\r", "x y", "\xa0", "é", "::", "Content-Length", "7"]
    for _ in range(3000):
        lines = ["".join(rng.choice(pieces) for _ in range(rng.randint(0, 5))) for _ in range(rng.randint(0, 4))]
        data = "\r\n".join(["WARC/1.0", *lines]).encode() + rng.choice([b"", b"\xff", b"\xc3"])
        assert parse_headers(data) == _parse_headers_before(data), data
