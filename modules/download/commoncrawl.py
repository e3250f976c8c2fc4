"""``download_commoncrawl``: WARC files of Common Crawl snapshots, extracted into documents.

``curate download commoncrawl --snapshots CC-MAIN-2023-50[,CC-MAIN-...] [--limit N] [--base-url URL]
--output DIR [--raw-dir RAW] [--keep-raw] [--algorithm resiliparse|justext|trafilatura]``

For each snapshot, ``<base>/crawl-data/<snapshot>/warc.paths.gz`` lists the snapshot's WARC files
(paths relative to the base URL). The first N of all snapshots' lists, in snapshot order (all of
them without ``--limit``), are downloaded and extracted like ``curate extract warc`` does.
"""

from __future__ import annotations

import gzip
import os
import posixpath
import re
from dataclasses import dataclass, field

from modules.download.base import DownloadSettings, FetchJob, check_limit, raw_dir, run_download
from modules.download.http import download
from modules.errors import DataError, SettingsError
from modules.extract.html import ALGORITHMS
from modules.stage import Stage, check_choice

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


def read_listing(path: str, source: str) -> list[str]:
    """The WARC paths in a warc.paths.gz file."""
    try:
        with gzip.open(path, "rt", encoding="utf-8") as f:
            return [line.strip() for line in f if line.strip()]
    except (OSError, EOFError, UnicodeDecodeError) as e:
        raise DataError(f"{source}: not a readable warc.paths.gz listing: {e}") from e


def plan(settings: DownloadCommonCrawlSettings, folder: str) -> tuple[list[FetchJob], list[str]]:
    """(the WARC files to fetch, the listing files fetched to find them)."""
    base = settings.base_url.rstrip("/")
    options = settings.download_options()
    jobs: list[FetchJob] = []
    listings: list[str] = []
    for snapshot in settings.snapshots:
        url = f"{base}/crawl-data/{snapshot}/warc.paths.gz"
        # a snapshot's listing never changes once published: a copy from an earlier run is reused
        local = download(url, os.path.join(folder, f"{snapshot}.warc.paths.gz"), options).path
        listings.append(local)
        for rel in read_listing(local, url):
            name = posixpath.basename(rel)
            jobs.append(FetchJob(url=f"{base}/{rel.lstrip('/')}", name=name, kind="warc"))
            if settings.limit is not None and len(jobs) >= settings.limit:
                return jobs, listings
    return jobs, listings


class DownloadCommonCrawlStage(Stage):
    """Common Crawl snapshots: warc.paths.gz, the first N WARC files, extracted into documents."""

    name = "download_commoncrawl"
    Settings = DownloadCommonCrawlSettings
    cli = ("download", "commoncrawl")
    help = "download Common Crawl WARC files and extract documents"
    reads_raw_files = True
    takes_input = False

    def run(self, settings, ctx):
        from modules.extract.warc import ExtractWarcSettings

        folder = raw_dir(settings, ctx)
        os.makedirs(folder, exist_ok=True)
        jobs, listings = plan(settings, folder)
        return run_download(self, settings, ctx, jobs, {"warc": ExtractWarcSettings(algorithm=settings.algorithm)},
                            settings.download_options(), listings=tuple(listings))
