"""Reading one JSONL piece (a byte range, compressed or not) line by line into a frame: broken lines become rejects naming file and line, lone surrogates are repaired."""

from __future__ import annotations

import gzip
import io
import json
import re

import pandas as pd

from curate.stages.dataset.budget import document_budget, format_size
from curate.stages.dataset.checks import TooLarge, _converted, _record_problem, reserved_problem
from curate.stages.dataset.contract import OFFSET
from curate.stages.dataset.discover import is_url, open_input
from curate.stages.dataset.frames import _records_frame, _reject_row, _standardise, _with_rejects
from curate.stages.dataset.pieces import Piece
from curate.stages.errors import DataError
from curate.stages.settings import IOSettings


def _open_bytes(path: str):
    lower = path.lower()
    if lower.endswith(".gz"):
        if not is_url(path):
            return gzip.open(path, "rb")
        g = gzip.GzipFile(fileobj=open_input(path), mode="rb")
        g.myfileobj = g.fileobj  # GzipFile closes ``myfileobj`` with itself, as gzip.open(filename) arranges
        return g
    if lower.endswith(".zst"):
        import zstandard

        return io.BufferedReader(zstandard.ZstdDecompressor().stream_reader(open_input(path), closefd=True))
    return open_input(path)


_LONE_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")


def _iter_jsonl(piece: Piece, limit: int | None = None):
    """(byte offset, line index in the piece, raw line, parsed record or an Exception) per non-blank line.

    A line longer than ``limit`` bytes is read past in chunks, never held, and comes as a
    :class:`TooLarge` with an empty raw line.

    JSON may escape lone UTF-16 surrogates (``"\\ud83d"`` without its partner), common in crawled
    data; Python decodes them into strings that cannot be written as UTF-8, so they become U+FFFD.
    """
    try:
        f = _sized_readline(_open_bytes(piece.path))
    except OSError as e:
        raise DataError(f"{piece.path}: cannot open: {e}") from e
    with f:
        pos = piece.start
        if pos > 0:
            f.seek(pos - 1)
            pos += _read_line(f, limit)[1] - 1  # the line that straddles the boundary belongs to the previous piece
        index = -1
        while piece.end < 0 or pos < piece.end:
            try:
                line, length = _read_line(f, limit)
            except (OSError, EOFError) as e:  # truncated gzip / zstd stream
                yield pos, index + 1, b"", DataError(f"{piece.path}: truncated or corrupt compressed stream: {e}")
                return
            if not length:
                return
            index += 1
            offset, pos = pos, pos + length
            if line is None:
                yield offset, index, b"", TooLarge(length)
                continue
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
            except UnicodeDecodeError as e:
                rec = e
            except ValueError as e:
                rec = e
            if isinstance(rec, dict) and _LONE_SURROGATE_ESCAPE.search(line):
                rec = {k: _repair_surrogates(v) if isinstance(v, str) else v for k, v in rec.items()}
            yield offset, index, line, rec


def _sized_readline(f):
    """``f``, or ``f`` buffered when its ``readline`` takes no size (fsspec's remote files)."""
    if isinstance(f, (io.BufferedIOBase, io.RawIOBase)):
        return f
    return io.BufferedReader(f, buffer_size=1 << 20)


def _read_line(f, limit: int | None) -> tuple[bytes | None, int]:
    """(the next line, its length in bytes); the line is None when it is longer than ``limit``
    (newline excluded): then it is consumed in 1 MiB chunks and only its length is kept."""
    if limit is None:
        line = f.readline()
        return line, len(line)
    line = f.readline(limit + 1)
    if len(line) <= limit or line.endswith(b"\n"):
        return line, len(line)
    n = len(line)
    while True:
        chunk = f.readline(1 << 20)
        n += len(chunk)
        if not chunk or chunk.endswith(b"\n"):
            return None, n


_SURROGATE = re.compile("[\ud800-\udfff]")


def _repair_surrogates(text: str) -> str:
    return _SURROGATE.sub("\ufffd", text)


class _LineNumbers:
    """1-based file line numbers for a piece, counting the lines before it only once, on first need."""

    def __init__(self, piece: Piece):
        self.piece = piece
        self.before: int | None = None

    def __call__(self, index: int) -> int:
        if self.before is None:
            self.before = _count_newlines(self.piece.path, self.piece.start) if self.piece.start else 0
            if self.piece.start:
                # the piece starts at the first line that begins at or after its start offset
                self.before += 0 if _byte_before(self.piece.path, self.piece.start) == b"\n" else 1
        return self.before + index + 1


def _count_newlines(path: str, upto: int) -> int:
    with _open_bytes(path) as f:
        n, done = 0, 0
        while done < upto:
            chunk = f.read(min(1 << 20, upto - done))
            if not chunk:
                break
            n += chunk.count(b"\n")
            done += len(chunk)
    return n


def _byte_before(path: str, offset: int) -> bytes:
    with _open_bytes(path) as f:
        f.seek(offset - 1)
        return f.read(1)


def _read_jsonl_piece(piece: Piece, io_settings: IOSettings, meta) -> pd.DataFrame:
    good, bad = [], []
    skip = io_settings.on_error == "skip"
    line_number = _LineNumbers(piece)
    budget, source = document_budget(io_settings)
    convert = io_settings.convert_ids
    for offset, index, line, rec in _iter_jsonl(piece, budget):
        problem = _record_problem(rec, io_settings)
        if problem is None:
            if OFFSET in rec:  # would be overwritten below, unseen by the frame's check
                raise DataError(f"{piece.path} line {line_number(index)}: reserved_column: "
                                f"{reserved_problem([OFFSET], io_settings)}")
            good.append({**(_converted(rec, io_settings) if convert else rec), OFFSET: offset})
            continue
        reason, msg = problem
        if reason == "too_large":
            msg = f"a {msg} is larger than the {format_size(budget)} per document ({source})"
        where = f"{piece.path} line {line_number(index)}"
        if not skip:
            raise DataError(f"{where}: {reason}: {msg} (use --on-error skip to write such lines to _rejects/)")
        bad.append(_reject_row(f"{piece.name}:{offset}", line.decode("utf-8", errors="replace").rstrip("\n"),
                               reason, f"{where}: {msg}"))
    frame = _records_frame(good)
    # the schema check before any work sees the first records only: a reserved key further on fails here
    reserved = reserved_problem([c for c in frame.columns if c != OFFSET], io_settings)
    if reserved is not None:
        raise DataError(f"{piece.path}: reserved_column: {reserved}")
    return _with_rejects(_standardise(frame, piece, io_settings, meta), bad)
