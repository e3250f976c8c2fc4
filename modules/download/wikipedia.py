"""``download_wikipedia``: a Wikipedia dump's pages-articles files, extracted into articles.

``curate download wikipedia --language en [--dump-date YYYYMMDD] [--base-url URL] --output DIR``

The dump's ``<base>/<lang>wiki/<date>/dumpstatus.json`` names the pages-articles files (job
``articlesdump``) with their sizes and SHA-1s, which the downloads are checked against. Without
``--dump-date`` the newest dump whose articles job is ``done`` is taken (the dates come from the
``<base>/<lang>wiki/`` index page). The files are streamed (bz2 decompressed on the fly) into the
extractor of ``curate extract wikipedia``; size and SHA-1 are checked at the last byte.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

from curate.stages.download.base import DownloadSettings, FetchJob, check_limit, run_download
from curate.stages.download.http import get_bytes
from curate.stages.errors import DataError, SettingsError
from curate.stages.stage import Stage

DEFAULT_BASE_URL = "https://dumps.wikimedia.org"
#: the pages-articles files (split into several on big wikis)
ARTICLES_JOB = "articlesdump"
#: how many of the newest dump dates are looked at for a finished one
MAX_DATES = 5
_DATE_LINK = re.compile(r'href="(\d{8})/?"')


@dataclass(frozen=True)
class DownloadWikipediaSettings(DownloadSettings):
    language: str = field(default="en", metadata={"help": "wiki language code (en, bg, zh-yue, ...)",
                                                  "metavar": "CODE"})
    dump_date: str = field(default="", metadata={"help": "dump date (default: the newest finished dump)",
                                                 "metavar": "YYYYMMDD"})
    base_url: str = field(default=DEFAULT_BASE_URL, metadata={"help": "dumps site or mirror", "metavar": "URL"})
    limit: int | None = field(default=None, metadata={"help": "only the first N pages-articles files",
                                                      "metavar": "N"})

    def __post_init__(self):
        super().__post_init__()
        if not re.fullmatch(r"[a-z][a-z\-]{0,15}", self.language):
            raise SettingsError(f"language must be a wiki language code such as en or zh-yue; got {self.language!r}")
        if self.dump_date and not re.fullmatch(r"\d{8}", self.dump_date):
            raise SettingsError(f"dump_date must be YYYYMMDD; got {self.dump_date!r}")
        if not self.base_url.startswith(("http://", "https://")):
            raise SettingsError(f"base_url must be an http(s):// URL; got {self.base_url!r}")
        check_limit(self)

    @property
    def wiki(self) -> str:
        return f"{self.language.replace('-', '_')}wiki"


def _json(url: str, options) -> dict:
    try:
        return json.loads(get_bytes(url, options))
    except ValueError as e:
        raise DataError(f"{url}: not valid JSON: {e}") from e


def dump_dates(settings: DownloadWikipediaSettings, options) -> list[str]:
    """Dump dates listed on the wiki's index page, newest first."""
    url = f"{settings.base_url.rstrip('/')}/{settings.wiki}/"
    page = get_bytes(url, options).decode("utf-8", errors="replace")
    dates = sorted(set(_DATE_LINK.findall(page)), reverse=True)
    if not dates:
        raise DataError(f"{url}: no dump dates listed")
    return dates


def plan(settings: DownloadWikipediaSettings) -> tuple[str, list[FetchJob]]:
    """(the dump date, its pages-articles files)."""
    base = settings.base_url.rstrip("/")
    options = settings.download_options()
    dates = [settings.dump_date] if settings.dump_date else dump_dates(settings, options)[:MAX_DATES]
    seen = []
    for date in dates:
        status_url = f"{base}/{settings.wiki}/{date}/dumpstatus.json"
        job = _json(status_url, options).get("jobs", {}).get(ARTICLES_JOB, {})
        state = job.get("status", "missing")
        if state == "done" and job.get("files"):
            files = job["files"]
            break
        seen.append(f"{date} ({state})")
    else:
        raise DataError(f"{base}/{settings.wiki}/: no finished {ARTICLES_JOB} among {', '.join(seen)}")
    jobs = []
    for name in sorted(files, key=_natural):
        info = files[name] or {}
        rel = info.get("url") or f"/{settings.wiki}/{date}/{name}"
        url = rel if rel.startswith(("http://", "https://")) else base + "/" + rel.lstrip("/")
        jobs.append(FetchJob(url=url, name=name, kind="wikipedia", size=info.get("size"), sha1=info.get("sha1")))
    if settings.limit is not None:
        jobs = jobs[: settings.limit]
    return date, jobs


def _natural(name: str):
    # pages-articles2 before pages-articles10
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", name)]


class DownloadWikipediaStage(Stage):
    """A Wikipedia dump (dumpstatus.json): pages-articles files, extracted into articles."""

    name = "download_wikipedia"
    needs = ()

    def columns(self, settings):
        from curate.stages.stage import Columns

        # the extractors' columns depend on what the files turn out to be: the chain check stops here
        return Columns(unknown=True)
    Settings = DownloadWikipediaSettings
    cli = ("download", "wikipedia")
    help = "download a Wikipedia dump and extract its articles"
    reads_raw_files = True
    takes_input = False

    def run(self, settings, ctx):
        from curate.stages.extract.wikipedia import ExtractWikipediaSettings

        _, jobs = plan(settings)
        return run_download(self, settings, ctx, jobs,
                            {"wikipedia": ExtractWikipediaSettings(language=settings.language)},
                            settings.download_options())
