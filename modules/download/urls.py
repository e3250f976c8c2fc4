"""``download_urls``: any list of file URLs, each extracted by the extractor that fits its type.

``curate download urls --list FILE --output DIR``

Each file is streamed into its extractor (:mod:`curate.stages.download.base`). The list has one
``http(s)://`` or ``s3://`` URL per line (blank lines and ``#`` comments are
skipped). The file type comes from the URL's file name:

- ``.warc``, ``.warc.gz``: WARC (as ``curate extract warc``);
- ``.xml``, ``.xml.bz2``, ``.xml.gz``, ``*.xml-p1p41242.bz2`` (a dump part): Wikipedia dump;
- ``.tar``, ``.tar.gz``, ``.tgz``, ``.gz``: arXiv source.

A URL of any other type is a usage error, reported before anything is downloaded. The dataset has
the union of the extractors' columns (a column a file's extractor does not fill is null).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from curate.stages.download.base import (
    DownloadSettings,
    FetchJob,
    read_url_list,
    run_download,
    unique_names,
    url_file_name,
)
from curate.stages.errors import SettingsError
from curate.stages.extract.html import ALGORITHMS
from curate.stages.stage import Stage, check_choice

_WIKI = re.compile(r"\.xml(?:-p\d+p\d+)?(?:\.bz2|\.gz)?$")


def kind_of(name: str) -> str | None:
    """Which extractor reads a file, from its name; None when none does."""
    lower = name.lower()
    if lower.endswith((".warc", ".warc.gz")):
        return "warc"
    if _WIKI.search(lower):
        return "wikipedia"
    if lower.endswith((".tar", ".tar.gz", ".tgz", ".gz")):
        return "arxiv"
    return None


@dataclass(frozen=True)
class DownloadUrlsSettings(DownloadSettings):
    list: str = field(default="", metadata={"help": "file with one URL per line (required)", "metavar": "FILE",
                                            "input_file": True})  # its contents count in the fingerprint
    algorithm: str = field(default="resiliparse", metadata={"help": "HTML extraction algorithm for WARC files",
                                                            "choices": ALGORITHMS})
    requester_pays: bool = field(default=False, metadata={"help": "s3:// URLs: bill the transfer to your AWS "
                                                          "credentials (default: anonymous)"})
    s3_endpoint_url: str = field(default="", metadata={"help": "S3-compatible endpoint for s3:// URLs",
                                                       "metavar": "URL"})

    def __post_init__(self):
        super().__post_init__()
        if not self.list:
            raise SettingsError("list: give the file of URLs, e.g. --list urls.txt")
        check_choice(self, "algorithm")


def plan(settings: DownloadUrlsSettings) -> list[FetchJob]:
    options = settings.download_options()
    jobs = []
    for i, url in enumerate(read_url_list(settings.list, options), start=1):
        if not url.startswith(("http://", "https://", "s3://")):
            raise SettingsError(f"{settings.list} line {i}: {url!r} is not an http(s):// or s3:// URL")
        name = url_file_name(url)
        kind = kind_of(name)
        if kind is None:
            raise SettingsError(f"{settings.list} line {i}: {url}: unknown file type "
                                "(expected .warc[.gz], .xml[.bz2|.gz], .tar[.gz], .tgz or .gz)")
        jobs.append(FetchJob(url=url, name=name, kind=kind))
    if not jobs:
        raise SettingsError(f"{settings.list}: no URLs")
    return unique_names(jobs)


class DownloadUrlsStage(Stage):
    """Files from a list of URLs (WARC, Wikipedia dumps, arXiv sources), each extracted by type."""

    name = "download_urls"
    needs = ()

    def columns(self, settings):
        from curate.stages.stage import Columns

        # the extractors' columns depend on what the files turn out to be: the chain check stops here
        return Columns(unknown=True)
    Settings = DownloadUrlsSettings
    cli = ("download", "urls")
    help = "download a list of file URLs and extract each by its type"
    reads_raw_files = True
    takes_input = False

    def run(self, settings, ctx):
        from curate.stages.extract.warc import ExtractWarcSettings

        jobs = plan(settings)
        options = settings.download_options(requester_pays=settings.requester_pays,
                                            s3_endpoint_url=settings.s3_endpoint_url)
        return run_download(self, settings, ctx, jobs, {"warc": ExtractWarcSettings(algorithm=settings.algorithm)},
                            options)
