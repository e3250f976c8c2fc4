"""``download_commoncrawl``: WARC files of Common Crawl snapshots, extracted into documents.

``curate download commoncrawl --snapshots CC-MAIN-2023-50[,CC-MAIN-...] [--limit N] [--base-url URL]
--output DIR [--keep-raw [--raw-dir RAW]] [--max-inflight N] [--algorithm resiliparse|justext|trafilatura]``

For each snapshot, ``<base>/crawl-data/<snapshot>/warc.paths.gz`` lists the snapshot's WARC files
(paths relative to the base URL; the listing is read into memory, never landed). The first N of
all snapshots' lists, in snapshot order (all of them without ``--limit``), are streamed into the
extractor of ``curate extract warc`` (:mod:`curate.stages.download.base`).
"""

from __future__ import annotations

import posixpath
import re
import zlib
from dataclasses import dataclass, field

from curate.stages.download.base import DownloadSettings, FetchJob, check_limit, run_download
from curate.stages.download.http import get_bytes
from curate.stages.errors import DataError, SettingsError
from curate.stages.extract.html import ALGORITHMS
from curate.stages.stage import Stage, check_choice

#: Common Crawl's public HTTPS endpoint
DEFAULT_BASE_URL = "https://data.commoncrawl.org"
_SNAPSHOT = re.compile(r"^CC-MAIN-\d{4}-\d{2}$")


@dataclass(frozen=True)
class DownloadCommonCrawlSettings(DownloadSettings):
    snapshots: tuple[str, ...] = field(default=(), metadata={
        "help": "snapshots, comma-separated (required)", "metavar": "CC-MAIN-YYYY-WW[,...]"})
    limit: int | None = field(default=None, metadata={"help": "download the first N WARC files (default: all)",
                                                      "metavar": "N"})
    base_url: str = field(default=DEFAULT_BASE_URL, metadata={"help": "Common Crawl endpoint or mirror",
                                                              "metavar": "URL"})
    algorithm: str = field(default="resiliparse", metadata={"help": "boilerplate removal algorithm",
                                                            "choices": ALGORITHMS})

    def __post_init__(self):
        super().__post_init__()
        if not self.snapshots:
            raise SettingsError("snapshots: give at least one, e.g. --snapshots CC-MAIN-2023-50")
        for s in self.snapshots:
            if not _SNAPSHOT.match(s):
                raise SettingsError(f"snapshots: {s!r} is not a snapshot name such as CC-MAIN-2023-50")
        check_limit(self)
        check_choice(self, "algorithm")
        if not self.base_url.startswith(("http://", "https://")):
            raise SettingsError(f"base_url must be an http(s):// URL; got {self.base_url!r}")


#: largest warc.paths.gz read (a snapshot's is ~200 KiB for ~90,000 files)
MAX_LISTING_BYTES = 64 << 20


def read_listing(data: bytes, source: str) -> list[str]:
    """The WARC paths in a warc.paths.gz file's bytes."""
    from curate.stages.extract.archive import gunzip_bounded

    try:
        text = gunzip_bounded(data, 16 * MAX_LISTING_BYTES).decode("utf-8")
    except (OSError, EOFError, UnicodeDecodeError, ValueError, zlib.error) as e:
        raise DataError(f"{source}: not a readable warc.paths.gz listing: {e}") from e
    return [line.strip() for line in text.splitlines() if line.strip()]


def plan(settings: DownloadCommonCrawlSettings) -> list[FetchJob]:
    """The WARC files to stream."""
    base = settings.base_url.rstrip("/")
    options = settings.download_options()
    jobs: list[FetchJob] = []
    for snapshot in settings.snapshots:
        url = f"{base}/crawl-data/{snapshot}/warc.paths.gz"
        for rel in read_listing(get_bytes(url, options, MAX_LISTING_BYTES), url):
            name = posixpath.basename(rel)
            jobs.append(FetchJob(url=f"{base}/{rel.lstrip('/')}", name=name, kind="warc"))
            if settings.limit is not None and len(jobs) >= settings.limit:
                return jobs
    return jobs


class DownloadCommonCrawlStage(Stage):
    """Common Crawl snapshots: warc.paths.gz, the first N WARC files, extracted into documents."""

    name = "download_commoncrawl"
    needs = ()

    def columns(self, settings):
        from curate.stages.stage import Columns

        # the extractors' columns depend on what the files turn out to be: the chain check stops here
        return Columns(unknown=True)
    Settings = DownloadCommonCrawlSettings
    cli = ("download", "commoncrawl")
    help = "download Common Crawl WARC files and extract documents"
    reads_raw_files = True
    takes_input = False

    def run(self, settings, ctx):
        from curate.stages.extract.warc import ExtractWarcSettings

        return run_download(self, settings, ctx, plan(settings),
                            {"warc": ExtractWarcSettings(algorithm=settings.algorithm)}, settings.download_options())
