"""What every download stage shares: settings, the download tasks, and extraction of what came down.

A download stage plans a list of :class:`FetchJob` (URL, file name, which extractor reads it) on
the client, then:

1. downloads them as Dask tasks, one per file (:func:`modules.download.http.download`: resumable,
   skipped when already complete from the same URL, at most ``concurrency`` at once per worker) into
   ``raw_dir`` (default ``<output>/_raw``, which a re-run after a crash reuses; each file has a
   ``<name>.url`` sidecar naming its URL);
2. extracts every file into one partition (``dd.from_map``) with the extractor of its kind, and
   writes the dataset (``write_dataset``); a file that could not be downloaded becomes one
   ``download_failed`` reject under ``--on-error skip``, and fails the run naming its URL otherwise;
3. deletes the raw files (and their sidecars) unless ``keep_raw``.

The manifest gets a ``download`` section: files, bytes, how many were downloaded, resumed, skipped
(already there) or failed.
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

from modules.download.http import DownloadError, DownloadOptions, download, remove_download
from modules.errors import SettingsError
from modules.extract import RawFile, file_failure, frame, from_files
from modules.stage import check_range

log = logging.getLogger("curate.download")

RAW_DEFAULT = "_raw"


@dataclass(frozen=True)
class DownloadSettings:
    """Settings every download stage has (each stage's Settings extends this)."""

    raw_dir: str = field(default="", metadata={
        "help": "where downloaded files go (default: OUTPUT/_raw)", "metavar": "RAW"})
    keep_raw: bool = field(default=False, metadata={"help": "keep the downloaded files after extraction"})
    retries: int = field(default=5, metadata={"help": "failed attempts in a row before a download gives up",
                                              "metavar": "N"})
    backoff: float = field(default=1.0, metadata={"help": "seconds before the first retry (doubles each time)",
                                                  "metavar": "SECONDS"})
    timeout: float = field(default=60.0, metadata={"help": "seconds to connect, and between two reads",
                                                   "metavar": "SECONDS"})
    concurrency: int = field(default=4, metadata={"help": "downloads at once per worker", "metavar": "N"})

    def __post_init__(self):
        check_range(self, "retries", 0, 100)
        check_range(self, "backoff", 0.0, 3600.0)
        check_range(self, "timeout", 0.01, 3600.0)
        check_range(self, "concurrency", 1, 1024)

    def download_options(self, **extra) -> DownloadOptions:
        return DownloadOptions(retries=self.retries, backoff=self.backoff, timeout=self.timeout,
                               concurrency=self.concurrency, **extra)


@dataclass(frozen=True)
class FetchJob:
    url: str
    #: file name under the raw directory (unique within one stage run)
    name: str
    #: the extractor that reads it: "warc" | "wikipedia" | "arxiv"
    kind: str
    size: int | None = None
    sha1: str | None = None


@dataclass(frozen=True)
class Fetched:
    """A job after its download task: the local path, or the error."""

    job: FetchJob
    path: str | None
    error: str | None = None


def check_limit(settings) -> None:
    if settings.limit is not None and settings.limit < 1:
        raise SettingsError(f"limit must be at least 1; got {settings.limit}")


def read_url_list(source: str, options) -> list[str]:
    """URLs listed one per line in a local file or at an http(s) URL (blank lines, # comments skipped)."""
    from modules.download.http import get_bytes

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
    # absolute: workers may not share the client's working directory
    return os.path.abspath(settings.raw_dir or os.path.join(ctx.output, RAW_DEFAULT))


def fetch(job: FetchJob, folder: str, options: DownloadOptions, on_error: str) -> dict:
    """One download task; returns its outcome as a dict (an error only under on_error=skip)."""
    dest = os.path.join(folder, job.name)
    try:
        r = download(job.url, dest, options, expected_size=job.size, sha1=job.sha1)
    except DownloadError as e:
        if on_error != "skip":
            raise
        log.warning("%s", e)
        return {"url": job.url, "path": None, "status": "failed", "bytes": 0, "error": str(e)}
    return {"url": job.url, "path": r.path, "status": r.status, "bytes": r.bytes, "error": None}


# --------------------------------------------------------------------------- extraction


def _extractor(kind: str):
    """(per-file function, its empty frame, the settings class) for one kind of raw file."""
    if kind == "warc":
        from modules.extract.warc import ExtractWarcSettings, extract_warc_file, warc_meta

        return extract_warc_file, warc_meta(), ExtractWarcSettings
    if kind == "wikipedia":
        from modules.extract.wikipedia import ExtractWikipediaSettings, extract_wikipedia_file, wikipedia_meta

        return extract_wikipedia_file, wikipedia_meta(), ExtractWikipediaSettings
    if kind == "arxiv":
        from modules.extract.arxiv import ExtractArxivSettings, arxiv_meta, extract_arxiv_file

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


def extract_fetched(item: Fetched, extract_settings: dict, schema: pd.DataFrame, on_error: str) -> pd.DataFrame:
    """The documents of one downloaded file, in the stage's schema (pure apart from reading the file)."""
    raw = RawFile(item.path or item.job.name, item.job.name)
    if item.error is not None:
        return file_failure(raw, "skip", "download_failed", item.error, schema)
    fn, _, _ = _extractor(item.job.kind)
    df = fn(raw, extract_settings[item.job.kind], on_error)
    return frame([], schema) if df.empty else df.reindex(columns=schema.columns).astype(schema.dtypes.to_dict())


def run_download(stage, settings, ctx, jobs: list[FetchJob], extract_settings: dict,
                 options: DownloadOptions, listings: tuple[str, ...] = ()) -> dict:
    """Download ``jobs`` (Dask tasks), extract them (one partition each), write the dataset.

    ``listings`` are files the planning step downloaded (``warc.paths.gz``); they go with the raw
    files unless ``keep_raw``.
    """
    import dask

    from modules.dataset import write_dataset

    if not jobs:
        raise SettingsError(f"{stage.name}: nothing to download (the listing is empty)")
    names = [j.name for j in jobs]
    if len(set(names)) != len(names):
        raise SettingsError(f"{stage.name}: two downloads would have the same file name")
    folder = raw_dir(settings, ctx)
    os.makedirs(folder, exist_ok=True)
    on_error = ctx.io.on_error
    tasks = [dask.delayed(fetch, pure=False)(job, folder, options, on_error,
                                              dask_key_name=f"download-{stage.name}-{i:05d}")
             for i, job in enumerate(jobs)]
    log.info("%s: %d file(s) to %s", stage.name, len(jobs), folder)
    outcomes = list(ctx.run_compute(*tasks))
    fetched = [Fetched(job, o["path"], o["error"]) for job, o in zip(jobs, outcomes)]
    kinds = sorted({j.kind for j in jobs})
    extract_settings = {k: extract_settings.get(k) or _extractor(k)[2]() for k in kinds}
    meta = union_meta(kinds)
    ddf = from_files(extract_fetched, fetched, meta, f"extract-{stage.name}",
                     extract_settings=extract_settings, schema=meta, on_error=on_error)
    summary = {
        "files": len(jobs),
        "bytes": int(sum(o["bytes"] for o in outcomes)),
        **{s: sum(o["status"] == s for o in outcomes) for s in ("downloaded", "resumed", "skipped", "failed")},
        "raw_dir": os.path.abspath(folder),
        "kept_raw": bool(settings.keep_raw),
    }
    manifest = write_dataset(ddf, ctx, stage=stage.name, settings=settings, extra={"download": summary})
    if not settings.keep_raw:
        for path in [item.path for item in fetched] + list(listings):
            if path:
                remove_download(path)
        _remove_if_empty(folder)
    return manifest


def _remove_if_empty(folder: str) -> None:
    try:
        os.rmdir(folder)
    except OSError:  # not empty: .part files of failed downloads, or other files of the user's
        pass
