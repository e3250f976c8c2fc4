"""What every download stage shares: settings, the streaming tasks, and extraction of what streams in.

A download stage plans a list of :class:`FetchJob` (URL, file name, which extractor reads it) on
the client, then runs one Dask task per file (:func:`stream_file`) that

1. streams the file (:class:`curate.stages.download.stream.RemoteStream`: HTTP(S) or S3, resumed at the
   exact byte after a dropped connection) straight into the extractor of its kind; no raw byte
   lands on disk, unless ``keep_raw``: then the bytes are also written, as they stream, to
   ``raw_dir`` (default ``<output>/_raw``), where a later run reads a complete file instead of
   downloading it, or replays an unfinished ``.part`` and goes on from its end;
2. writes the file's documents as partition ``i`` of the stage output
   (:func:`curate.stages.dataset.write_partition`);
3. records the download in the output's journal (key ``fetch-<i>``, with the kept raw files when
   they live inside the output).

At most ``max_inflight`` such tasks stream at once per worker (a per-process semaphore, whatever
the worker's thread count), so a cluster opens at most workers x max_inflight connections.

Resuming a killed run: a file whose partition and fetch record are finished in the journal (same
settings fingerprint, files present with their sizes) is not streamed again; the others start over
(or resume from their kept ``.part``).

A file that cannot be fetched becomes one ``download_failed`` reject under ``--on-error skip`` (its
partial documents are dropped, so a file counts whole or not at all), and fails the run naming its
(redacted) URL otherwise. A failure that may pass (the retries ran out on connection errors,
timeouts, 408/429/5xx or transfers cut short: :class:`curate.stages.download.http.TransientDownloadError`)
leaves the file *pending*: its fetch record says so instead of finished, the manifest counts it
(``pending``, and ``download.pending_files``), the stage still writes ``_SUCCESS`` (its output is
whole for every other file) but is never "up to date", so running the same command again fetches
exactly the pending files and merges their documents; a permanent failure (another 4xx, a size or
SHA-1 that differs from the listing) stays a final reject. Two faults of the transfer that look
like a broken file are transient failures too: an answer to Range that starts over at byte 0 (caught
by :class:`curate.stages.download.stream.RemoteStream` before a byte of it is read), and an answer
whose Content-Length is shorter than the file (the reader finds the file cut short, and one Range
request past its end finds more: the kept copy is removed). A file truncated on the server (it
answers 416 past its end) is read as a local file is: its records up to the break, then a
``truncated_file`` reject.

``raw_dir`` ownership: a file there that curate did not download (no ``<name>.url`` sidecar) is
never read, overwritten or deleted; with ``keep_raw`` a run that would write such a name is refused
before any work (exit 2, listing them). Nothing in ``raw_dir`` is ever deleted but curate's own
corrupt ``.part`` files.

The manifest gets a ``download`` section: files, bytes, how many were downloaded, resumed, reused
(a kept copy), finished by an earlier run, failed, and of those still pending.
"""

from __future__ import annotations

import collections
import dataclasses
import hashlib
import logging
import os
import posixpath
import urllib.parse
from dataclasses import dataclass, field

import pandas as pd

from curate.stages.download.http import (
    DownloadError,
    DownloadOptions,
    ForeignFile,
    TransientDownloadError,
    _slot,
    foreign_files,
)
from curate.stages.errors import SettingsError
from curate.stages.extract import RawFile, file_failure, frame
from curate.stages.secrets import redact_url
from curate.stages.stage import check_range, parse_bytes

log = logging.getLogger("curate.download")

RAW_DEFAULT = "_raw"


@dataclass(frozen=True)
class DownloadSettings:
    """Settings every download stage has (each stage's Settings extends this)."""

    raw_dir: str = field(default="", metadata={
        "help": "with --keep-raw: where raw files are kept (default: OUTPUT/_raw)", "metavar": "RAW"})
    keep_raw: bool = field(default=False, metadata={
        "help": "also write each raw file to RAW as it streams (a later run reuses it); "
                "default: nothing lands on disk"})
    retries: int = field(default=5, metadata={"help": "failed attempts in a row before a download gives up",
                                              "metavar": "N"})
    backoff: float = field(default=1.0, metadata={"help": "seconds before the first retry (doubles each time)",
                                                  "metavar": "SECONDS"})
    timeout: float = field(default=60.0, metadata={"help": "seconds to connect, and between two reads",
                                                   "metavar": "SECONDS"})
    deadline: float = field(default=3600.0, metadata={
        "help": "seconds one attempt at a file may last before it is dropped and resumed (0: none)",
        "metavar": "SECONDS"})
    min_rate: str = field(default="1KiB", metadata={
        "help": "per second: an attempt slower than this over 30 s is dropped and resumed (0: none)",
        "metavar": "SIZE"})
    max_inflight: int = field(default=4, metadata={"help": "files streamed at once per worker", "metavar": "N"})

    def __post_init__(self):
        check_range(self, "retries", 0, 100)
        check_range(self, "backoff", 0.0, 3600.0)
        check_range(self, "timeout", 0.01, 3600.0)
        check_range(self, "deadline", 0.0, 7 * 86400.0)
        check_range(self, "max_inflight", 1, 1024)
        self.min_rate_bytes()
        if self.raw_dir and "://" in self.raw_dir:
            raise SettingsError(f"raw_dir must be a local folder; got {redact_url(self.raw_dir)!r}")

    def download_options(self, **extra) -> DownloadOptions:
        return DownloadOptions(retries=self.retries, backoff=self.backoff, timeout=self.timeout,
                               max_inflight=self.max_inflight, deadline=self.deadline,
                               min_rate=self.min_rate_bytes(), **extra)

    def min_rate_bytes(self) -> int:
        return 0 if self.min_rate.strip() in ("0", "0B") else parse_bytes(self.min_rate, "min_rate")


@dataclass(frozen=True)
class FetchJob:
    url: str
    #: file name under the raw directory (unique within one stage run)
    name: str
    #: the extractor that reads it: "warc" | "wikipedia" | "arxiv"
    kind: str
    size: int | None = None
    sha1: str | None = None

    def __repr__(self) -> str:
        # Dask prints a failed task's arguments ("Compute Failed ... args: (FetchJob(...") in worker logs
        return (f"FetchJob(url={redact_url(self.url)!r}, name={self.name!r}, kind={self.kind!r}, "
                f"size={self.size!r}, sha1={self.sha1!r})")


def check_limit(settings) -> None:
    if settings.limit is not None and settings.limit < 1:
        raise SettingsError(f"limit must be at least 1; got {settings.limit}")


def read_url_list(source: str, options) -> list[str]:
    """URLs listed one per line in a local file or at an http(s) URL (blank lines, # comments skipped)."""
    from curate.stages.download.http import get_bytes

    if source.startswith(("http://", "https://")):
        text = get_bytes(source, options).decode("utf-8")
    else:
        try:
            with open(source, encoding="utf-8") as f:
                text = f.read()
        except OSError as e:
            raise SettingsError(f"URL list {source}: {e.strerror or e}") from None
    return [line.strip() for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#")]


def url_file_name(url: str) -> str:
    """The file name at the end of a URL's path (percent-decoded)."""
    # decoded before taking the last segment, so %2F cannot smuggle a path out of the raw folder
    path = urllib.parse.unquote(urllib.parse.urlparse(url).path).replace("\\", "/")
    name = posixpath.basename(path)
    return name if name not in ("", ".", "..") else "download"


def unique_names(jobs: list[FetchJob]) -> list[FetchJob]:
    """Jobs whose file names collide (the same name at two URLs) get a short hash of their URL as prefix.

    The name of a URL does not depend on its place in the list, so a re-run with the list
    reordered or extended finds its files again. A URL listed twice is fetched once.
    """
    seen: set[str] = set()
    unique = []
    for j in jobs:
        if j.url in seen:
            log.warning("%s is listed more than once; fetched once", j.url)
            continue
        seen.add(j.url)
        unique.append(j)
    counts = collections.Counter(j.name for j in unique)
    return [dataclasses.replace(j, name=f"{hashlib.sha1(j.url.encode()).hexdigest()[:10]}-{j.name}")
            if counts[j.name] > 1 else j for j in unique]


def raw_dir(settings, ctx) -> str:
    """Where kept raw files go (absolute: workers may not share the client's working directory)."""
    if settings.raw_dir:
        return os.path.abspath(settings.raw_dir)
    if "://" in str(ctx.output):
        raise SettingsError("--keep-raw with an object-store --output needs a local --raw-dir")
    return os.path.abspath(os.path.join(ctx.output, RAW_DEFAULT))


def check_raw_dir(folder: str, jobs: list[FetchJob]) -> None:
    """Refuse (exit 2, before any work) to write names in ``folder`` that hold files curate did not
    download; list them."""
    found = foreign_files(folder, [j.name for j in jobs])
    if found:
        more = f" (and {len(found) - 3} more)" if len(found) > 3 else ""
        raise ForeignFile(f"--raw-dir {folder}: {', '.join(found[:3])}{more}: not downloaded by curate "
                          "(no .url sidecar); curate never overwrites or deletes them: move them or choose "
                          "another --raw-dir")


# --------------------------------------------------------------------------- extraction


def _extractor(kind: str):
    """(per-file function, its empty frame, the settings class) for one kind of raw file."""
    if kind == "warc":
        from curate.stages.extract.warc import ExtractWarcSettings, extract_warc_file, warc_meta

        return extract_warc_file, warc_meta(), ExtractWarcSettings
    if kind == "wikipedia":
        from curate.stages.extract.wikipedia import (
            ExtractWikipediaSettings,
            extract_wikipedia_file,
            wikipedia_meta,
        )

        return extract_wikipedia_file, wikipedia_meta(), ExtractWikipediaSettings
    if kind == "arxiv":
        from curate.stages.extract.arxiv import ExtractArxivSettings, arxiv_meta, extract_arxiv_file

        return extract_arxiv_file, arxiv_meta(), ExtractArxivSettings
    raise ValueError(f"no extractor for {kind!r}")


def union_meta(kinds) -> pd.DataFrame:
    """The empty frame whose columns are every extractor's (id, text first; _reason, _detail last).

    With one kind it is that extractor's own frame, columns in its order."""
    kinds = list(kinds)
    if len(kinds) == 1:
        return _extractor(kinds[0])[1]
    columns: dict[str, object] = {}
    for kind in kinds:
        meta = _extractor(kind)[1]
        for c in meta.columns:
            columns.setdefault(c, meta[c].dtype)
    order = ["id", "text", *[c for c in columns if c not in ("id", "text", "_reason", "_detail")], "_reason", "_detail"]
    return pd.DataFrame({c: pd.Series([], dtype=columns[c]) for c in order})


def _conform(df: pd.DataFrame, schema: pd.DataFrame) -> pd.DataFrame:
    return frame([], schema) if df.empty else df.reindex(columns=schema.columns).astype(schema.dtypes.to_dict())


def _not_found(kind: str, on_error: str, schema: pd.DataFrame):
    what = {"warc": "not_a_warc", "wikipedia": "not_a_dump", "arxiv": "not_an_archive"}.get(kind, "unreadable_file")
    return lambda raw: file_failure(raw, on_error, what, "no record found", schema)


#: rejects that say a file ended too soon
CUT_SHORT = ("truncated_file", "truncated_archive")


def stream_extract(job: FetchJob, extract_settings, schema: pd.DataFrame, options: DownloadOptions,
                   on_error: str, keep: str | None) -> tuple[pd.DataFrame, dict, list]:
    """Stream one file through its extractor: (its documents in ``schema``, the download's outcome,
    the kept raw files as (path, bytes, xxh3)). Pure apart from the network (and ``keep``)."""
    from curate.stages.download.adapter import extract_stream
    from curate.stages.download.stream import RemoteStream

    stream = RemoteStream(job.url, options, expected_size=job.size, sha1=job.sha1, keep=keep)
    raw = RawFile(stream.shown, job.name)
    fn = _extractor(job.kind)[0]
    try:
        try:
            df = extract_stream(fn, raw, extract_settings, on_error, stream, _not_found(job.kind, on_error, schema))
            if stream.error is not None:  # the extractor met the error and took it for the end of its file
                raise stream.error
            outcome = stream.finish()
            _check_end(df, stream)
        finally:
            stream.release()
    except DownloadError as e:
        if on_error != "skip":
            raise
        log.warning("%s", e)
        transient = isinstance(e, TransientDownloadError)
        outcome = {**stream.outcome(), "status": "failed", "error": redact_url(e), "transient": transient}
        why = f"{redact_url(e)}{' (transient: running the same command again retries it)' if transient else ''}"
        return file_failure(raw, "skip", "download_failed", why, schema), outcome, []
    return _conform(df, schema), outcome, stream.kept_records()


def _check_end(df: pd.DataFrame, stream) -> None:
    """A file its reader found cut short, whose server has more bytes (an answer whose Content-Length
    is shorter than the file looks complete): the transfer's fault, a transient failure; its kept
    copy goes. A file truncated on the server keeps its rejects, as it would on disk."""
    cut = df["_reason"].isin(CUT_SHORT)
    if cut.any() and stream.more_after_end():
        stream.discard_kept()
        raise TransientDownloadError(f"{df.loc[cut, '_detail'].iloc[0]}; but the answer ended at byte {stream.pos} "
                                     "(its Content-Length) and the server has more")


def stream_file(job: FetchJob, i: int, out, extract_settings, schema: pd.DataFrame, options: DownloadOptions,
                on_error: str, keep_dir: str | None, keep_rel: str | None, fmt: str, run: str) -> dict:
    """One task: stream file ``i`` into its extractor, write partition ``i``, journal the fetch
    (as pending after a transient failure, so that a rerun fetches it again)."""
    from curate.stages.dataset import write_partition
    from curate.stages.output import file_checksum

    key = f"fetch-{i:05d}"
    keep = os.path.join(keep_dir, job.name) if keep_dir else None
    kept_rels = [f"{keep_rel}/{job.name}{s}" for s in ("", ".url", ".part")] if keep and keep_rel else []
    with _slot(options.max_inflight):
        if kept_rels:  # the raw files are the output's: claimed before their first byte
            out.intend(key, kept_rels)
        df, outcome, kept = stream_extract(job, extract_settings, schema, options, on_error, keep)
    stats = write_partition(df, i, out, fmt, run=run)
    records = []
    if kept_rels:
        for path, size, xxh in kept:
            records.append({"path": f"{keep_rel}/{job.name}", "bytes": size, "xxh3_128": xxh})
            with open(path + ".url", "rb") as f:
                n, digest = file_checksum(f)
            records.append({"path": f"{keep_rel}/{job.name}.url", "bytes": n, "xxh3_128": digest})
    # the paths stay claimed: a .part of a failed file is still the output's (finish removes it)
    if outcome.get("transient"):
        out.record_pending(key, run, download=outcome, paths=sorted(kept_rels))
    else:
        out.record_done(key, run, records, download=outcome, paths=sorted(kept_rels))
    return {**stats, "outputs": stats["outputs"] + records, "download": outcome}


def run_download(stage, settings, ctx, jobs: list[FetchJob], extract_settings: dict,
                 options: DownloadOptions) -> dict:
    """Stream ``jobs`` into their extractors (one Dask task each), write the dataset."""
    import time

    import dask

    from curate.stages.dataset import INTERNAL, finish_output, stage_output, stage_owner

    if not jobs:
        raise SettingsError(f"{stage.name}: nothing to download (the listing is empty)")
    names = [j.name for j in jobs]
    if len(set(names)) != len(names):
        raise SettingsError(f"{stage.name}: two downloads would have the same file name")
    on_error = ctx.io.on_error
    keep_dir = keep_rel = None
    if settings.keep_raw:
        keep_dir = raw_dir(settings, ctx)
        check_raw_dir(keep_dir, jobs)
        if "://" not in str(ctx.output):
            rel = os.path.relpath(keep_dir, os.path.abspath(ctx.output))
            if not rel.startswith(".."):  # inside the output: its files are the output's, journaled
                keep_rel = rel.replace(os.sep, "/")
    kinds = sorted({j.kind for j in jobs})
    extract_settings = {k: extract_settings.get(k) or _extractor(k)[2]() for k in kinds}
    meta = union_meta(kinds)
    started = time.time()
    out = stage_output(ctx)
    out.begin(stage_owner(ctx, stage.name))
    listing = out.listing()
    done = {}
    if not ctx.force:
        for i in range(len(jobs)):
            part = out.finished(f"part-{i:05d}", ctx.fingerprint, listing)
            fetched = part and out.finished(f"fetch-{i:05d}", ctx.fingerprint, listing)
            if fetched:
                done[i] = {**part["stats"], "outputs": part["files"] + fetched["files"],
                           "download": {**fetched.get("download", {}), "status": "finished"}}
    if done:
        log.info("%s: %d of %d files finished by an earlier run; skipped", ctx.output, len(done), len(jobs))
    fmt = ctx.io.format
    tasks = [dask.delayed(stream_file, pure=False)(
        job, i, out, extract_settings[job.kind], meta, options, on_error, keep_dir, keep_rel, fmt,
        ctx.fingerprint, dask_key_name=f"stream-{stage.name}-{i:05d}")
        for i, job in enumerate(jobs) if i not in done]
    log.info("%s: streaming %d file(s)%s", stage.name, len(tasks), f", keeping them in {keep_dir}" if keep_dir else "")
    stats = sorted([*done.values(), *ctx.run_compute(*tasks)], key=lambda s: s["partition"])
    outcomes = [s.pop("download") for s in stats]
    pending = [o["url"] for o in outcomes if o.get("transient")]
    summary = {
        "files": len(jobs),
        "bytes": int(sum(o.get("bytes", 0) for o in outcomes)),
        **{s: sum(o.get("status") == s for o in outcomes)
           for s in ("downloaded", "resumed", "reused", "finished", "failed")},
        "pending": len(pending),
        "pending_files": pending,
        "max_inflight": options.max_inflight,
        "kept_raw": bool(settings.keep_raw),
        **({"raw_dir": keep_dir} if keep_dir else {}),
    }
    if pending:
        log.warning("%s: %d of %d files failed for now (transient) and are pending; run the same command "
                    "again to fetch them", stage.name, len(pending), len(jobs))
    schema = {c: str(t) for c, t in meta.dtypes.items() if c not in INTERNAL}
    return finish_output(ctx, stage=stage.name, settings=redacted_settings(settings), partition_stats=stats,
                         schema=schema, started=started, extra={"download": summary, "pending": len(pending)})


def redacted_settings(settings):
    """``settings`` with credentials out of every URL-like value (``--base-url https://u:pw@mirror``),
    as the manifest shows them."""
    changes = {}
    for f in dataclasses.fields(settings):
        value = getattr(settings, f.name)
        if isinstance(value, str) and redact_url(value) != value:
            changes[f.name] = redact_url(value)
    return dataclasses.replace(settings, **changes) if changes else settings
