"""``download_arxiv``: arXiv source tarballs, extracted into papers.

``curate download arxiv [--limit N] [--source s3://arxiv/src | URL-list] --output DIR``

``--source`` is either an S3 prefix holding arXiv's bulk ``arXiv_src_*.tar`` files (the default,
``s3://arxiv/src``: a requester-pays bucket, so AWS credentials are needed and the transfer is
billed to them), or a URL list: a local file or an http(s) URL of a text file with one tarball URL
per line (``#`` comments allowed). The first N tarballs (sorted by name for S3, in list order
otherwise) are streamed (S3: ranged GETs) into the extractor of ``curate extract arxiv``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from curate.stages.download.base import (
    DownloadSettings,
    FetchJob,
    check_limit,
    read_url_list,
    run_download,
    unique_names,
    url_file_name,
)
from curate.stages.download.http import s3_filesystem
from curate.stages.errors import DataError, SettingsError
from curate.stages.stage import Stage, parse_bytes

DEFAULT_SOURCE = "s3://arxiv/src"
BULK_PATTERN = "arXiv_src_*.tar"


@dataclass(frozen=True)
class DownloadArxivSettings(DownloadSettings):
    limit: int | None = field(default=None, metadata={"help": "only the first N tarballs", "metavar": "N"})
    source: str = field(default=DEFAULT_SOURCE, metadata={
        "help": "S3 prefix of arXiv_src_*.tar files, or a file/URL listing tarball URLs",
        "metavar": "s3://arxiv/src|URL-list", "input_file": True})  # a local list counts in the fingerprint
    requester_pays: bool = field(default=True, metadata={
        "help": "S3: bill the transfer to your AWS credentials (arXiv's bucket needs it); "
                "--no-requester-pays reads anonymously"})
    s3_endpoint_url: str = field(default="", metadata={"help": "S3-compatible endpoint (default: AWS)",
                                                       "metavar": "URL"})
    max_member_bytes: str = field(default="256MiB", metadata={"help": "largest archive member read", "metavar": "SIZE"})
    max_inflated_bytes: str = field(default="256MiB", metadata={"help": "largest inflated paper", "metavar": "SIZE"})

    def __post_init__(self):
        super().__post_init__()
        check_limit(self)
        if not self.source:
            raise SettingsError("source must be an s3:// prefix or a URL list")
        parse_bytes(self.max_member_bytes, "max_member_bytes")
        parse_bytes(self.max_inflated_bytes, "max_inflated_bytes")


def plan(settings: DownloadArxivSettings) -> list[FetchJob]:
    options = settings.download_options(requester_pays=settings.requester_pays,
                                        s3_endpoint_url=settings.s3_endpoint_url)
    if settings.source.startswith("s3://"):
        fs = s3_filesystem(options)
        prefix = settings.source[len("s3://"):].rstrip("/")
        try:
            keys = sorted(fs.glob(f"{prefix}/{BULK_PATTERN}"))
        except (PermissionError, FileNotFoundError, OSError) as e:
            raise DataError(f"{settings.source}: cannot list {BULK_PATTERN}: {e}") from e
        if not keys:
            raise DataError(f"{settings.source}: no {BULK_PATTERN} files")
        urls = [f"s3://{k}" for k in keys]
    else:
        urls = read_url_list(settings.source, options)
    if settings.limit is not None:
        urls = urls[: settings.limit]
    return [FetchJob(url=u, name=url_file_name(u), kind="arxiv") for u in urls]


class DownloadArxivStage(Stage):
    """arXiv source tarballs (S3 bulk files or a URL list), extracted into papers."""

    name = "download_arxiv"
    needs = ()

    def columns(self, settings):
        from curate.stages.stage import Columns

        # the extractors' columns depend on what the files turn out to be: the chain check stops here
        return Columns(unknown=True)
    Settings = DownloadArxivSettings
    cli = ("download", "arxiv")
    help = "download arXiv source tarballs and extract papers"
    reads_raw_files = True
    takes_input = False

    def run(self, settings, ctx):
        from curate.stages.extract.arxiv import ExtractArxivSettings

        jobs = unique_names(plan(settings))
        extract = ExtractArxivSettings(max_member_bytes=settings.max_member_bytes,
                                       max_inflated_bytes=settings.max_inflated_bytes)
        options = settings.download_options(requester_pays=settings.requester_pays,
                                            s3_endpoint_url=settings.s3_endpoint_url)
        return run_download(self, settings, ctx, jobs, {"arxiv": extract}, options)
