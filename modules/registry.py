"""Every stage by its registered name, as ``module:Class``.

The job YAML and the CLI both look stages up here. Entries are imported lazily so that
``curate --help`` stays fast and a stage's heavy libraries load only when it runs.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util

from curate.stages.errors import SettingsError

STAGES: dict[str, str] = {
    "normalize": "curate.stages.normalize:NormalizeStage",
    # download and extraction (issue: download/extract)
    "download_commoncrawl": "curate.stages.download.commoncrawl:DownloadCommonCrawlStage",
    "download_wikipedia": "curate.stages.download.wikipedia:DownloadWikipediaStage",
    "download_arxiv": "curate.stages.download.arxiv:DownloadArxivStage",
    "download_urls": "curate.stages.download.urls:DownloadUrlsStage",
    "extract_warc": "curate.stages.extract.warc:ExtractWarcStage",
    "extract_wikipedia": "curate.stages.extract.wikipedia:ExtractWikipediaStage",
    "extract_arxiv": "curate.stages.extract.arxiv:ExtractArxivStage",
    # cleaning and filtering
    "clean": "curate.stages.clean:CleanStage",
    "redact": "curate.stages.redact:RedactStage",
    "filter": "curate.stages.filters.stage:FilterStage",
    "tag": "curate.stages.tag:TagStage",
    "select": "curate.stages.select:SelectStage",
    "decontaminate": "curate.stages.decontaminate:DecontaminateStage",
    "split_documents": "curate.stages.split_join:SplitDocumentsStage",
    "join_documents": "curate.stages.split_join:JoinDocumentsStage",
    "add_id": "curate.stages.add_id:AddIdStage",
    # deduplication
    "exact_dedup": "curate.stages.dedup.exact:ExactDedupStage",
    "fuzzy_dedup": "curate.stages.dedup.fuzzy.stage:FuzzyDedupStage",
    "url_dedup": "curate.stages.dedup.urls:UrlDedupStage",
    "paragraph_dedup": "curate.stages.dedup.spans:ParagraphDedupStage",
    "line_dedup": "curate.stages.dedup.spans:LineDedupStage",
    "sentence_dedup": "curate.stages.dedup.spans:SentenceDedupStage",
    "substring_dedup": "curate.stages.dedup.substrings:SubstringDedupStage",
    "semantic_dedup": "curate.stages.dedup.semantic.stage:SemanticDedupStage",
    # the product
    "rehydrate": "curate.stages.rehydrate:RehydrateStage",
    "bucket": "curate.stages.bucket:BucketStage",
    "shuffle": "curate.stages.shuffle:ShuffleStage",
    "blend": "curate.stages.blend:BlendStage",
    "tokenize": "curate.stages.tokenize.writer:TokenizeStage",
    "pack": "curate.stages.pack:PackStage",
    "shards": "curate.stages.shards:ShardsStage",
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
    """The stage class registered under ``name``, or a user's own stage named ``module:Class``."""
    if ":" in name:
        cls = user_class(name, "stage", _stage_base())
        word = getattr(cls, "name", None)
        if not isinstance(word, str) or not word or not all(c.isalnum() or c in "_-" for c in word):
            raise SettingsError(f"stage {name!r}: set the class attribute name (letters, digits, _ and -; it "
                                "names the stage's folder)")
        return cls
    target = STAGES.get(name)
    # this stage's module only: available() looks for every stage's, importing their packages (50 ms)
    if target is None or not _exists(target.split(":")[0]):
        import difflib

        near = difflib.get_close_matches(str(name), available(), n=1)
        hint = f"; did you mean {near[0]!r}?" if near else ""
        raise SettingsError(f"unknown stage {name!r} (known: {', '.join(available())}; "
                            f"or a stage of your own as module:Class){hint}")
    module, cls = target.split(":")
    return getattr(importlib.import_module(module), cls)


def recorded(name, allowed=(), where: str = "") -> type:
    """The stage class a manifest names, for rerunning it (``curate reproduce``). A manifest is data:
    only a registered stage, or a user's own class the user named (``allowed``: ``module:Class``
    targets from the command line), is imported; a ``module:Class`` written in a file never is."""
    for target in allowed:
        cls = get(target)  # named by the user: importing it is their choice
        if name in (target, cls.name):
            return cls
    if isinstance(name, str) and ":" not in name and name in STAGES:
        return get(name)
    raise SettingsError(f"{where}: stage {name!r} is not a registered stage; curate never imports code a manifest "
                        "names (a stage of your own is rerun when you name it: --stage-class module:Class)")


def _stage_base():
    from curate.stages.stage import Stage

    return Stage


#: while set (:func:`only_named`), the ``module:Class`` targets that may be imported; None: any the
#: user wrote in a job file, a chain or the command line
_NAMED: frozenset | None = None


@contextlib.contextmanager
def only_named(targets):
    """Within: a user's class is imported only when its ``module:Class`` is among ``targets`` (what
    the user named on the command line). For commands that take settings from manifests, which are
    data: a filter chain or stage a manifest leads to must not import code of a file's choosing."""
    global _NAMED
    before, _NAMED = _NAMED, frozenset(targets)
    try:
        yield
    finally:
        _NAMED = before


def user_class(target: str, what: str, base: type):
    """The class ``module:Class`` (a user's own stage or filter), checked to subclass ``base``."""
    module, _, qualname = target.partition(":")
    if not module or not qualname:
        raise SettingsError(f"{what} {target!r}: expected module:Class")
    if _NAMED is not None and target not in _NAMED:
        raise SettingsError(f"{what} {target!r}: code named by a file is imported only when you name it "
                            "(--stage-class module:Class)")
    try:
        obj = importlib.import_module(module)
    except ImportError as e:
        raise SettingsError(f"{what} {target!r}: cannot import {module!r} ({e})") from None
    except SyntaxError as e:  # the user's file: a setting to fix, exit 2 naming the line
        raise SettingsError(f"{what} {target!r}: {e.filename}, line {e.lineno}: {e.msg}") from None
    for part in qualname.split("."):
        obj = getattr(obj, part, None)
        if obj is None:
            raise SettingsError(f"{what} {target!r}: {module!r} has no {qualname!r}")
    if not (isinstance(obj, type) and issubclass(obj, base)):
        raise SettingsError(f"{what} {target!r}: not a subclass of curate's {base.__name__}")
    return obj
