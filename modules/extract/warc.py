"""``extract_warc``: WARC files (gzip or not) to documents.

Only ``response`` records with HTTP status 200 and an HTML content type are documents. Each is
decoded (charset from the HTTP header, the page's ``<meta>`` or detection), stripped of boilerplate
by the chosen algorithm the way NeMo Curator 0.9 does it (:mod:`curate.stages.extract.html`: CLD2 names
the page's language, which picks the stop list; jusText in NeMo's sequence; resiliparse followed by
NeMo's stop-word line filter) and labelled with its language (:mod:`curate.stages.extract.language`).
Other record types (request, metadata, warcinfo, revisit) are not documents and are passed over.

Rows: ``id`` (the WARC-Record-ID without its angle brackets: stable across re-runs), ``text``,
``url``, ``warc_record_id``, ``warc_date``, ``language``, ``language_score``, ``source`` (the WARC
file's name).

Rejected records (``_reason``): ``http_status`` (not 200), ``not_html``, ``too_large`` (over
``max_record_bytes``), ``malformed_record`` (unparsable WARC or HTTP headers, a Content-Length that
does not match where the next record starts, or bytes no record claims), ``truncated_record``
(payload shorter than its Content-Length), ``undecodable``, ``no_stoplist`` (a language without a
stop list, with ``unlisted_languages: drop``), ``extract_error`` (the extractor failed on the page),
``no_text`` (nothing left after boilerplate removal), ``corrupt_record`` (its gzip member is
damaged: the record, or the member when no record header could be read, named by the compressed
byte offset of the member; reading goes on at the next member, and under ``--on-error raise`` the
stage fails naming the file and that offset), and one ``truncated_file`` row when a compressed
stream breaks off with no member after the break (the records before it are kept).

The file is streamed (:func:`curate.stages.extract.archive.open_stream`, from a path or any binary
file-like object) and framed by :class:`curate.stages.extract.warcreader.WarcReader`, which checks every
record's end and resynchronises after a bad one, or, where its records are proved well framed, read by
FastWARC (:mod:`curate.stages.extract.warcfast`: the same records, faster); a record's payload or two
are in memory at a time.
"""

from __future__ import annotations

import bisect
import pickle
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from curate.stages.dataset import STRING
from curate.stages.errors import DataError
from curate.stages.extract import RawFile, file_failure, from_files, raw_inputs, reject
from curate.stages.extract.archive import open_stream
from curate.stages.extract.html import ALGORITHMS
from curate.stages.extract.page import PageExtractor, PageSettings, fill_row, page_outcome, page_row  # noqa: F401
from curate.stages.extract.sandbox import check_limits, memory_field, timeout_field
from curate.stages.extract.warcfast import warc_reader
from curate.stages.extract.warcreader import header, parse_http
from curate.stages.stage import Stage, check_choice, check_range, parse_bytes

WARC_SUFFIXES = (".warc", ".warc.gz")
HTML_TYPES = ("text/html", "application/xhtml+xml")
COLUMNS = ("id", "text", "url", "warc_record_id", "warc_date", "language", "language_score", "source")


@dataclass(frozen=True)
class ExtractWarcSettings:
    algorithm: str = field(default="resiliparse", metadata={
        "help": "boilerplate removal algorithm", "choices": ALGORITHMS})
    max_record_bytes: str = field(default="10MiB", metadata={
        "help": "records with a larger payload are rejected as too_large", "metavar": "SIZE"})
    min_stopword_density: float = field(default=0.32, metadata={
        "help": "resiliparse: keep only lines with at least this share of stop words of the page's "
                "language (NeMo Curator's post-filter and default); 0 keeps every line", "metavar": "SHARE"})
    unlisted_languages: str = field(default="drop", metadata={
        "help": "pages in a language without a jusText stop list (and Latin), with justext or a "
                "stop-word density: drop (as NeMo Curator; reject no_stoplist) or keep (stop-word "
                "test off)", "choices": ("drop", "keep")})
    language_id: str = field(default="cld2", metadata={
        "help": "language column: cld2 (fast; the detection that picks the stop list), langid "
                "(py3langid on the kept text, slower), lid176 (fastText LID-176 on the kept text) or none",
        "choices": ("cld2", "langid", "lid176", "none")})
    extract_timeout: float = timeout_field("page")
    extract_memory: str = memory_field("page")

    def __post_init__(self):
        check_choice(self, "algorithm")
        check_choice(self, "unlisted_languages")
        check_choice(self, "language_id")
        if self.language_id == "lid176":
            from curate.stages.extract.language import lid176_path

            lid176_path()  # the model is there, or one line saying how to get it, before any work
        check_range(self, "min_stopword_density", 0.0, 1.0)
        parse_bytes(self.max_record_bytes, "max_record_bytes")
        check_limits(self)


#: what the sandbox's child runs per page (a test points it at a wrapper that hangs): only the payload
#: goes to it and only the outcome comes back (the row stays here)
PAGE_OUTCOME = "curate.stages.extract.page:page_outcome"


class SandboxedPages:
    """:class:`PageExtractor` in a child process (:mod:`curate.stages.extract.sandbox`): a page that
    hangs or takes too much memory is a ``timeout`` / ``too_large`` reject and the file goes on.

    Pages go in batches, and one batch is in the child while the caller reads and frames the records
    of the next (:meth:`Sandbox.submit`): the child's extraction and the parent's reading overlap."""

    #: pages sent to the child in one frame (one round trip), or fewer when their bytes reach BATCH_BYTES
    BATCH_PAGES = 64
    BATCH_BYTES = 16 << 20

    def __init__(self, settings: ExtractWarcSettings):
        from curate.stages.extract.sandbox import sandbox_for

        self.settings = settings
        self.page = PageSettings.of(settings)  # what the child unpickles: nothing heavy to import
        self.sandbox = sandbox_for(settings)  # the thread's child, shared with its other tasks
        self._rows: list[tuple[dict, str]] = []  # (row, where) of the pages queued
        self._calls: list[tuple] = []  # their calls
        self._bytes = 0
        self._sent: list[tuple[dict, str]] | None = None  # the batch in the child, not yet collected

    def row(self, row: dict, payload, charset: str | None, where: str) -> dict:
        """``row`` itself, which :meth:`flush` (or a later call) fills with the page's outcome (the
        caller keeps it in order)."""
        self._rows.append((row, where))
        # the payload pickled straight from the record's block (the child gets bytes): a copy of each
        # page made here first cost 1.3 us
        self._calls.append((self.page, pickle.PickleBuffer(payload), charset))
        self._bytes += len(payload)
        if len(self._calls) >= self.BATCH_PAGES or self._bytes >= self.BATCH_BYTES:
            self._collect()  # the child serves one batch at a time
            self._submit()
        return row

    def flush(self) -> None:
        """Every page given so far has its row."""
        self._collect()
        self._submit()
        self._collect()

    def _submit(self) -> None:
        rows, calls = self._rows, self._calls
        self._rows, self._calls, self._bytes = [], [], 0
        if calls:
            self.sandbox.submit(PAGE_OUTCOME, calls)
            self._sent = rows

    def _collect(self) -> None:
        from curate.stages.extract.sandbox import PageCrashed, PageTimeout, PageTooLarge

        rows, self._sent = self._sent, None
        if not rows:
            return
        results = self.sandbox.collect()
        algorithm = self.settings.algorithm
        for (row, where), result in zip(rows, results):
            if type(result) is tuple:  # an outcome: by far the most pages
                fill_row(row, where, result)
            elif isinstance(result, PageTimeout):
                row["_reason"], row["_detail"] = "timeout", f"{where}: {algorithm}: {result}"
            elif isinstance(result, PageTooLarge):
                row["_reason"], row["_detail"] = "too_large", f"{where}: {algorithm}: {result} (--extract-memory)"
            elif isinstance(result, PageCrashed):
                row["_reason"], row["_detail"] = "extract_error", f"{where}: {algorithm}: {result}"
            elif isinstance(result, BaseException):
                raise result
            else:
                fill_row(row, where, result)

    def close(self) -> None:
        """The file is done, or failed: a batch still in the child is dropped with it (the child stays
        for the thread's next file unless it held such a batch)."""
        self._rows, self._calls, self._bytes = [], [], 0
        if self._sent is not None:
            self._sent = None
            self.sandbox.abandon()


def page_extractor(settings: ExtractWarcSettings):
    """What extracts a file's pages: sandboxed unless ``extract_timeout`` is 0."""
    return SandboxedPages(settings) if settings.extract_timeout > 0 else PageExtractor(settings)


def warc_meta() -> pd.DataFrame:
    columns = {c: pd.Series([], dtype=STRING) for c in COLUMNS}
    columns["language_score"] = pd.Series([], dtype="float64")
    columns["_reason"] = pd.Series([], dtype=STRING)
    columns["_detail"] = pd.Series([], dtype=STRING)
    return pd.DataFrame(columns)


def rows_frame(rows: list[dict], meta: pd.DataFrame) -> pd.DataFrame:
    """:func:`curate.stages.extract.frame` of the rows, each string column made by Arrow straight from
    the rows' values, a text given as UTF-8 bytes (the sandbox's) taken as it is: the same frame,
    without a str made of every text and encoded again (pandas' ``astype`` did both)."""
    import pyarrow as pa

    if not rows:
        return meta.iloc[:0].copy()
    columns = {}
    for name, dtype in meta.dtypes.items():
        values = [row.get(name) for row in rows]
        if dtype == STRING:
            # from_pandas: NaN is null, as astype makes it NA. Texts as bytes (the sandbox's) go in as binary,
            # then cast: Arrow checks the UTF-8 of the whole column at once (2 us a 4,000-character page,
            # 3.5 us value by value); strs (in process) go in as strings (binary costs them 1.2 us more)
            binary = name == "text" and any(type(v) is bytes for v in values)
            array = pa.array(values, type=pa.large_binary() if binary else pa.large_string(), from_pandas=True)
            columns[name] = pd.arrays.ArrowStringArray(pa.chunked_array([array.cast(pa.large_string())]))
        else:
            columns[name] = np.array(values, dtype=dtype)  # language_score: None (a reject's) is NaN
    return pd.DataFrame(columns)


def extract_warc_file(raw: RawFile, settings: ExtractWarcSettings, on_error: str = "raise",
                      fileobj=None) -> pd.DataFrame:
    """Every HTML response record of one WARC file as a row (pure apart from reading the file).

    ``fileobj``: read this binary file-like object (an HTTP or S3 stream, read sequentially and
    closed here) instead of opening ``raw.path``; ``raw`` still names the file in ids and messages.
    """
    meta = warc_meta()
    try:
        stream = open_stream(raw.path if fileobj is None else fileobj, resync=True)
    except OSError as e:
        return file_failure(raw, on_error, "unreadable_file", e, meta)
    max_bytes = parse_bytes(settings.max_record_bytes, "max_record_bytes")
    page = page_extractor(settings)
    try:
        return _extract_records(raw, settings, on_error, stream, page, max_bytes, meta)
    finally:
        if isinstance(page, SandboxedPages):
            page.close()


def _extract_records(raw, settings, on_error, stream, page, max_bytes, meta) -> pd.DataFrame:
    rows: list[dict] = []
    starts: list[int] = []  # the uncompressed offset of each row's record, ascending
    with stream:
        reader = warc_reader(stream, max_bytes)
        for item in reader:
            if stream.damage and on_error != "skip":  # the run fails: no need to extract the rest
                break
            if item.kind == "garbage":
                rows.append({"id": f"{raw.name}:{item.start}", "text": "", "source": raw.name,
                             "_reason": "malformed_record",
                             "_detail": f"{raw.path}: uncompressed bytes {item.start}-{item.end}: {item.detail}"})
                starts.append(item.start)
                continue
            row = _item_row(item, raw, page, max_bytes)
            if row is not None:
                rows.append(row)
                starts.append(item.start)
    if isinstance(page, SandboxedPages):
        page.flush()  # the pages still queued: their rows are placeholders until now
    if stream.damage:
        if on_error != "skip":
            d = stream.damage[0]
            raise DataError(f"{raw.path}: gzip member at compressed byte {d.start} is damaged ({d.error}) "
                            f"(use --on-error skip to reject its record and read on from the next member, "
                            f"at compressed byte {d.resumed})")
        rows = _damaged(rows, starts, stream.damage, raw)
    if stream.error is not None:
        if not stream.tell():
            return file_failure(raw, on_error, "unreadable_file", stream.error, meta)
        rows.append({
            "id": f"{raw.name}:truncated", "text": "", "source": raw.name,
            "_reason": "truncated_file",
            "_detail": f"{raw.path}: the compressed stream breaks off after {reader.records} records: {stream.error}",
        })
    elif not reader.records and stream.tell() > 0:
        return file_failure(raw, on_error, "not_a_warc", "no WARC record found", meta)
    return rows_frame(rows, meta)


def _damage(d) -> str:
    return (f"gzip member at compressed byte {d.start} is damaged ({d.error}); "
            f"reading goes on at the next member, at compressed byte {d.resumed}")


def _damaged(rows: list[dict], starts: list[int], damage, raw: RawFile) -> list[dict]:
    """Rows of the records that began in a damaged gzip member become ``corrupt_record`` rejects
    (their bytes cannot be trusted); a damaged member in which no record began gets a row of its own."""
    rows = list(rows)
    alone = []
    for d in damage:
        inside = range(bisect.bisect_left(starts, d.out_start), bisect.bisect_left(starts, d.out_end))
        for i in inside:
            rows[i] = reject({**rows[i], "text": ""}, "corrupt_record",
                             f"{raw.path}: record at uncompressed byte {starts[i]}: {_damage(d)}")
        if not inside:
            alone.append((d.out_start, {"id": f"{raw.name}:member-{d.start}", "text": "", "source": raw.name,
                                        "_reason": "corrupt_record", "_detail": f"{raw.path}: {_damage(d)}"}))
    # in file order; a member without a record before the record that starts where it ended
    order = sorted([(s, 0, k) for k, (s, _) in enumerate(alone)] + [(s, 1, i) for i, s in enumerate(starts)])
    return [alone[k][1] if kind == 0 else rows[k] for _, kind, k in order]


def _item_row(item, raw: RawFile, page: PageExtractor, max_bytes: int) -> dict | None:
    """The row of one record: a document, a reject, or None for a record that is not a document."""
    headers = item.headers or {}
    kind = (header(headers, "WARC-Type") or "").strip().lower()
    if item.kind == "malformed" or not kind:
        row = _base_row(headers, raw, item.start)
        return reject(row, "malformed_record", f"{raw.path}: record at uncompressed byte {item.start}: "
                                               f"{item.detail or 'no WARC-Type'}")
    if kind != "response":
        return None  # request, metadata, warcinfo, revisit...: not documents
    row = _base_row(headers, raw, item.start)
    where = f"{raw.path}: record {row['warc_record_id'] or '?'} at uncompressed byte {item.start}"
    http = parse_http(item.block)
    if http is None:
        if item.kind == "truncated":
            return reject(row, "truncated_record", f"{where}: {item.detail}")
        return reject(row, "malformed_record", f"{where}: no parsable HTTP response header")
    if http.status != 200:
        return reject(row, "http_status", f"{where}: HTTP status {http.status}")
    if http.content_type not in HTML_TYPES:
        return reject(row, "not_html", f"{where}: content type {http.content_type or 'missing'}")
    if item.kind == "oversized" or item.length > max_bytes:
        return reject(row, "too_large", f"{where}: record of {item.length} bytes > {max_bytes}")
    if item.kind == "truncated":
        return reject(row, "truncated_record", f"{where}: {item.detail}")
    return page.row(row, memoryview(item.block)[http.payload:], http.charset, where)


def _base_row(headers: dict, raw: RawFile, pos: int) -> dict:
    record_id = header(headers, "WARC-Record-ID") or ""
    return {
        "id": record_id.strip("<>") or f"{raw.name}:{pos}",
        "text": "",
        "url": header(headers, "WARC-Target-URI"),
        "warc_record_id": record_id or None,
        "warc_date": header(headers, "WARC-Date"),
        "language": None,
        "language_score": np.nan,
        "source": raw.name,
    }


class ExtractWarcStage(Stage):
    """WARC files (gzip or not) to documents: HTML responses, boilerplate removed, language identified."""

    name = "extract_warc"
    needs = ()
    makes = COLUMNS
    Settings = ExtractWarcSettings
    cli = ("extract", "warc")
    help = "WARC files to documents (HTML text extraction, language id)"
    reads_raw_files = True
    reads = ("files",)  # never an earlier stage's documents: first in a job, or an input of its own

    def check_output(self, settings, inputs, output) -> None:
        # here, not in check: a job runs this for every stage, also one whose input a download makes
        from curate.stages.extract.sandbox import probe_limits

        probe_limits(settings, PAGE_OUTCOME)  # an --extract-memory the child cannot start in, refused now

    def run(self, settings, ctx):
        from curate.stages.dataset import write_dataset

        files = raw_inputs(ctx.input, WARC_SUFFIXES, "WARC")
        ddf = from_files(extract_warc_file, files, warc_meta(), "extract-warc",
                         settings=settings, on_error=ctx.io.on_error)
        return write_dataset(ddf, ctx, stage=self.name, settings=settings)
