"""Every stage by its registered name, as ``module:Class``.

The job YAML and the CLI both look stages up here. Entries are imported lazily so that
``curate --help`` stays fast and a stage's heavy libraries load only when it runs.
"""

from __future__ import annotations

import importlib
import importlib.util

from modules.errors import SettingsError

STAGES: dict[str, str] = {
    "normalize": "modules.normalize:NormalizeStage",
    # download and extraction (issue: download/extract)
    "download_commoncrawl": "modules.download.commoncrawl:DownloadCommonCrawlStage",
    "download_wikipedia": "modules.download.wikipedia:DownloadWikipediaStage",
    "download_arxiv": "modules.download.arxiv:DownloadArxivStage",
    "download_urls": "modules.download.urls:DownloadUrlsStage",
    "extract_warc": "modules.extract.warc:ExtractWarcStage",
    "extract_wikipedia": "modules.extract.wikipedia:ExtractWikipediaStage",
    "extract_arxiv": "modules.extract.arxiv:ExtractArxivStage",
    # cleaning and filtering
    "clean": "modules.clean:CleanStage",
    "redact": "modules.redact:RedactStage",
    "filter": "modules.filters.stage:FilterStage",
    "decontaminate": "modules.decontaminate:DecontaminateStage",
    "split_documents": "modules.split_join:SplitDocumentsStage",
    "join_documents": "modules.split_join:JoinDocumentsStage",
    "add_id": "modules.add_id:AddIdStage",
    # deduplication
    "exact_dedup": "modules.dedup.exact:ExactDedupStage",
    "fuzzy_dedup": "modules.dedup.fuzzy:FuzzyDedupStage",
    # the product
    "shuffle": "modules.shuffle:ShuffleStage",
    "blend": "modules.blend:BlendStage",
    "tokenize": "modules.tokenize.writer:TokenizeStage",
    "pack": "modules.pack:PackStage",
    "shards": "modules.shards:ShardsStage",
}


def _exists(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:  # the parent package is not there either
        return False


def available() -> list[str]:
    """Registered stages whose module exists in this checkout."""
    return [name for name, target in STAGES.items() if _exists(target.split(":")[0])]


def get(name: str):
    """The stage class registered under ``name``."""
    target = STAGES.get(name)
    if target is None or name not in available():
        raise SettingsError(f"unknown stage {name!r} (known: {', '.join(available())})")
    module, cls = target.split(":")
    return getattr(importlib.import_module(module), cls)
