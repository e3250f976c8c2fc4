"""``extract_warc``: WARC files (gzip or not) to documents.

Only ``response`` records with HTTP status 200 and an HTML content type are documents. Each is
decoded (charset from the HTTP header, the page's ``<meta>`` or detection), stripped of boilerplate
by the chosen algorithm (:mod:`modules.extract.html`) and labelled with its language
(:mod:`modules.extract.language`). Other record types (request, metadata, warcinfo, revisit) are not
documents and are passed over.

Rows: ``id`` (the WARC-Record-ID without its angle brackets: stable across re-runs), ``text``,
``url``, ``warc_record_id``, ``warc_date``, ``language``, ``language_score``, ``source`` (the WARC
file's name).

Rejected records (``_reason``): ``http_status`` (not 200), ``not_html``, ``too_large`` (over
``max_record_bytes``), ``malformed_record`` (unparsable WARC or HTTP headers), ``truncated_record``
(payload shorter than its Content-Length), ``undecodable``, ``extract_error`` (the extractor
failed on the page), ``no_text`` (nothing left after boilerplate removal), and one
``truncated_file`` row when a compressed stream breaks off (the records before it are kept).

The file is streamed: FastWARC parses records from a stream that decompresses gzip member by member
(:func:`modules.extract.archive.open_stream`); one record's payload is in memory at a time.
"""

from __future__ import annotations

import bisect
import os
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from modules.dataset import STRING
from modules.extract import RawFile, file_failure, frame, from_files, raw_inputs, reject
from modules.extract.archive import open_stream
from modules.extract.html import ALGORITHMS, UndecodableError, decode_html, extract_text
from modules.extract.language import identify
from modules.stage import Stage, check_choice, parse_bytes

WARC_SUFFIXES = (".warc", ".warc.gz")
HTML_TYPES = ("text/html", "application/xhtml+xml")
COLUMNS = ("id", "text", "url", "warc_record_id", "warc_date", "language", "language_score", "source")


@dataclass(frozen=True)
class ExtractWarcSettings:
    algorithm: str = field(default="resiliparse", metadata={
        "help": "boilerplate removal algorithm", "choices": ALGORITHMS})
    max_record_bytes: str = field(default="10MiB", metadata={
        "help": "records with a larger payload are rejected as too_large", "metavar": "SIZE"})

    def __post_init__(self):
        check_choice(self, "algorithm")
        parse_bytes(self.max_record_bytes, "max_record_bytes")


def warc_meta() -> pd.DataFrame:
    columns = {c: pd.Series([], dtype=STRING) for c in COLUMNS}
    columns["language_score"] = pd.Series([], dtype="float64")
    columns["_reason"] = pd.Series([], dtype=STRING)
    columns["_detail"] = pd.Series([], dtype=STRING)
    return pd.DataFrame(columns)


def extract_warc_file(raw: RawFile, settings: ExtractWarcSettings, on_error: str = "raise") -> pd.DataFrame:
    """Every HTML response record of one WARC file as a row (pure apart from reading the file)."""
    from fastwarc.warc import ArchiveIterator, WarcRecordType

    RESPONSE = int(WarcRecordType.response)
    # in quirks mode FastWARC yields an unparsable record with no type (or "unknown") and goes on
    MALFORMED = (int(WarcRecordType.no_type), int(WarcRecordType.unknown))
    meta = warc_meta()
    try:
        stream = open_stream(raw.path)
    except OSError as e:
        return file_failure(raw, on_error, "unreadable_file", e, meta)
    max_bytes = parse_bytes(settings.max_record_bytes, "max_record_bytes")
    rows: list[dict] = []
    starts: list[int] = []  # where every record begins (uncompressed offsets)
    row_at: dict[int, int] = {}  # record start -> its row
    try:
        for rec in ArchiveIterator(stream, parse_http=True, quirks_mode=True, stream_detect=False):
            starts.append(rec.stream_pos)
            kind = int(rec.record_type)
            if kind == RESPONSE:
                row_at[rec.stream_pos] = len(rows)
                rows.append(_response_row(rec, raw, settings.algorithm, max_bytes))
            elif kind in MALFORMED:
                rows.append(_malformed_row(rec, raw))
    finally:
        stream.close()
    seen = len(starts)
    _check_members(stream.intact_member_starts(), starts, row_at, rows, raw)
    if stream.error is not None:
        if not stream.tell():
            return file_failure(raw, on_error, "unreadable_file", stream.error, meta)
        rows.append({
            "id": f"{raw.name}:truncated", "text": "", "source": raw.name,
            "_reason": "truncated_file",
            "_detail": f"{raw.path}: the compressed stream breaks off after {seen} records: {stream.error}",
        })
    elif not seen and os.path.getsize(raw.path) > 0:
        return file_failure(raw, on_error, "not_a_warc", "no WARC record found", meta)
    return frame(rows, meta)


def _check_members(members: list[int], starts: list[int], row_at: dict[int, int], rows: list[dict],
                   raw: RawFile) -> None:
    """Catch records whose Content-Length is wrong, using the gzip member boundaries.

    A .warc.gz holds one record per gzip member, so every member starts a record and no record
    runs across a member boundary. A record with too large a Content-Length swallows the records
    after it (FastWARC cannot know); its row and each swallowed record become malformed_record.
    """
    if len(members) < 2:
        return
    known = set(starts)
    for i, pos in enumerate(starts):
        end = starts[i + 1] if i + 1 < len(starts) else float("inf")
        inner = members[bisect.bisect_right(members, pos): bisect.bisect_left(members, end)]
        if not inner:
            continue
        if pos in row_at:
            k = row_at[pos]
            rows[k] = reject({**rows[k], "text": ""}, "malformed_record",
                             f"{raw.path}: record at uncompressed byte {pos}: its Content-Length runs past "
                             f"its gzip member into {len(inner)} more")
        for m in inner:
            if m not in known:
                rows.append({"id": f"{raw.name}:{m}", "text": "", "source": raw.name, "_reason": "malformed_record",
                             "_detail": f"{raw.path}: record at uncompressed byte {m}: swallowed by the record at "
                                        f"byte {pos}, whose Content-Length is wrong"})


def _malformed_row(rec, raw: RawFile) -> dict:
    pos = rec.stream_pos
    return {"id": f"{raw.name}:{pos}", "text": "", "source": raw.name, "_reason": "malformed_record",
            "_detail": f"{raw.path}: record at uncompressed byte {pos}: unparsable WARC header"}


def _response_row(rec, raw: RawFile, algorithm: str, max_bytes: int) -> dict:
    headers = rec.headers
    pos = rec.stream_pos
    record_id = headers.get("WARC-Record-ID") or ""
    row = {
        "id": record_id.strip("<>") or f"{raw.name}:{pos}",
        "text": None,
        "url": headers.get("WARC-Target-URI"),
        "warc_record_id": record_id or None,
        "warc_date": headers.get("WARC-Date"),
        "language": None,
        "language_score": np.nan,
        "source": raw.name,
    }
    where = f"{raw.path}: record {record_id or '?'} at uncompressed byte {pos}"
    http = rec.http_headers if rec.is_http else None
    status = getattr(http, "status_code", None) if http is not None else None
    if status is None:
        return reject(row, "malformed_record", f"{where}: no parsable HTTP response header")
    if status != 200:
        return reject(row, "http_status", f"{where}: HTTP status {status}")
    content_type = (rec.http_content_type or "").strip().lower()
    if content_type not in HTML_TYPES:
        return reject(row, "not_html", f"{where}: content type {content_type or 'missing'}")
    if rec.content_length > max_bytes:
        return reject(row, "too_large", f"{where}: payload of {rec.content_length} bytes > {max_bytes}")
    payload = rec.reader.read()
    if len(payload) < rec.content_length:
        return reject(row, "truncated_record",
                      f"{where}: payload has {len(payload)} of {rec.content_length} bytes")
    try:
        html, _ = decode_html(payload, rec.http_charset)
    except UndecodableError as e:
        return reject(row, "undecodable", f"{where}: {e}")
    try:
        text = extract_text(html, algorithm)
    except Exception as e:  # a library failing on one page must not lose the file: reject the page, say why
        return reject(row, "extract_error", f"{where}: {algorithm}: {type(e).__name__}: {e}")
    if not text:
        return reject({**row, "text": ""}, "no_text", f"{where}: no text left after {algorithm}")
    language, score = identify(text)
    return {**row, "text": text, "language": language, "language_score": score}


class ExtractWarcStage(Stage):
    """WARC files (gzip or not) to documents: HTML responses, boilerplate removed, language identified."""

    name = "extract_warc"
    Settings = ExtractWarcSettings
    cli = ("extract", "warc")
    help = "WARC files to documents (HTML text extraction, language id)"
    reads_raw_files = True

    def run(self, settings, ctx):
        from modules.dataset import write_dataset

        files = raw_inputs(ctx.input, WARC_SUFFIXES, "WARC")
        ddf = from_files(extract_warc_file, files, warc_meta(), "extract-warc",
                         settings=settings, on_error=ctx.io.on_error)
        return write_dataset(ddf, ctx, stage=self.name, settings=settings)
