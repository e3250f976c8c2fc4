"""Blocklists: a URL filter with datatrove's ``URLFilter`` rules, and C4's bad-words rule.

Nothing is downloaded: the user points at the lists.

``url_blocklist`` reads its lists in the UT1 layout (the Université Toulouse 1 Capitole blacklists
that datatrove and FineWeb use): a folder with one folder per category (``adult/``, ``gambling/``,
...), each holding ``domains`` and ``urls`` files, one entry per line, ``#`` starting a comment.
Optional word lists (one word per line) give the banned words. The score is the number of the first
rule the document's URL (its ``column``, default ``url``) breaks, checked in datatrove's order, 0 when
it breaks none; the default ``max: 0`` keeps only documents that break none:

    1 domain       the registered domain (eTLD+1, from the public suffix list tldextract ships; a host
                   without a public suffix is its own) is listed
    2 subdomain    the full host name is listed in ``domains``
    3 url          the URL is listed in ``urls`` (as written, or without its scheme and a leading ``www.``:
                   UT1 lists URLs without a scheme; datatrove compares the URL as written only)
    4 word         a URL word (split on anything but ASCII letters and digits) is a banned word
    5 soft words   at least ``soft_word_threshold`` URL words are soft-banned words
    6 subword      a banned subword occurs in the URL lower-cased with everything but letters and
                   digits removed

Words are compared lower-cased (datatrove lower-cases its lists but not the URL's words, so a
``/XXX/`` path would pass there). A document without a URL scores 0 (nothing to block).

``bad_words`` is C4's rule: a document is dropped when it contains a word of the List of Dirty,
Naughty, Obscene, and Otherwise Bad Words (LDNOOBW) of its language. ``lists`` is a folder in that
repository's layout: one file per language code (``en``, ``de``, ``ja`` ...), one word or phrase per
line. The language is the document's ``language_column`` (what ``extract --language-id`` and the
language filter write), else ``language``; a document whose language has no list scores 0. The
score is the number of distinct listed words the text contains, matched as whole words of the
lower-cased text (C4: ``(?:\\W|^)word(?:\\W|$)``), or as substrings for languages written without
spaces (``ja``, ``zh``, ``th``, ``ko``, as FineWeb-2 does). Default ``max: 0``.

Lists are read once per process, streamed line by line (a 10-million-line list is held once, as a
set); a file that is not UTF-8 fails naming the file and line when the chain is loaded, before any
work.
"""

from __future__ import annotations

import functools
import os
import re
from dataclasses import dataclass, field
from typing import ClassVar

import numpy as np
import pandas as pd

from curate.stages.dataset import STRING
from curate.stages.errors import DataError, SettingsError
from curate.stages.filters.base import Filter, Texts
from curate.stages.stage import check_range

_SPLIT = re.compile(r"[^a-zA-Z0-9]+")
_RULES = ("domain", "subdomain", "url", "word", "soft words", "subword")
#: languages written without spaces between words: their words are matched as substrings
_NO_SPACES = ("ja", "zh", "th", "ko", "my", "km", "lo")


def _normalize(text: str) -> str:
    return _SPLIT.sub("", text).lower()


def read_lines(path: str, normalize: bool = False) -> frozenset[str]:
    """The entries of a list file (``#`` comments and blank lines skipped), checked to be UTF-8."""
    out = set()
    try:
        with open(path, "rb") as f:
            for n, raw in enumerate(f, start=1):
                try:
                    line = raw.decode("utf-8").strip()
                except UnicodeDecodeError as e:
                    raise SettingsError(f"blocklist {path} line {n}: not UTF-8 text (byte {e.start})") from None
                if not line or line.startswith("#"):
                    continue
                line = _normalize(line) if normalize else line.lower()
                if line:
                    out.add(line)
    except FileNotFoundError:
        raise SettingsError(f"blocklist {path}: no such file") from None
    except IsADirectoryError:
        raise SettingsError(f"blocklist {path}: is a directory, not a list file") from None
    return frozenset(out)


@functools.lru_cache(maxsize=16)
def _cached(path: str, normalize: bool, mtime_ns: int, size: int) -> frozenset[str]:
    return read_lines(path, normalize)


def load_list(path: str | None, normalize: bool = False) -> frozenset[str]:
    """A list file, read once per process (and again when the file changes)."""
    if not path:
        return frozenset()
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise SettingsError(f"blocklist {path}: no such file") from None
    return _cached(os.path.abspath(path), normalize, st.st_mtime_ns, st.st_size)


def ut1_files(folder: str, categories: tuple[str, ...], kind: str) -> list[str]:
    """The ``kind`` (domains|urls) files of the chosen categories of a UT1 folder."""
    if not os.path.isdir(folder):
        raise SettingsError(f"blocklist {folder}: no such folder (expected the UT1 layout: CATEGORY/domains, CATEGORY/urls)")
    found = sorted(d for d in os.listdir(folder) if os.path.isdir(os.path.join(folder, d)))
    chosen = list(categories) or found
    missing = [c for c in chosen if c not in found]
    if missing:
        raise SettingsError(f"blocklist {folder}: no category {missing[0]!r} (found: {', '.join(found) or 'none'})")
    return [p for c in chosen if os.path.isfile(p := os.path.join(folder, c, kind))]


@functools.lru_cache(maxsize=1)
def _extractor():
    import tldextract

    # the public suffix list snapshot tldextract ships: never fetched, never cached on disk
    return tldextract.TLDExtract(suffix_list_urls=(), cache_dir=None)


@functools.lru_cache(maxsize=4)
def _url_tables(flt) -> dict[str, frozenset[str]]:
    # once per process and filter: the union of the category lists is built once, not per batch
    return flt._build_tables()


@dataclass(frozen=True)
class UrlBlocklist(Filter):
    """datatrove's URLFilter rules over the lists you give (see the module docstring)."""

    kind: ClassVar[str] = "url_blocklist"
    threshold_range: ClassVar[tuple] = (0, len(_RULES))

    max: float | None = 0
    lists: str | None = field(default=None, metadata={"help": "a folder in the UT1 layout (CATEGORY/domains, CATEGORY/urls)"})
    categories: tuple[str, ...] = field(default=(), metadata={"help": "UT1 categories to use (default: all)"})
    domains: str | None = field(default=None, metadata={"help": "a file of more domains, one per line"})
    urls: str | None = field(default=None, metadata={"help": "a file of more URLs, one per line"})
    banned_words: str | None = field(default=None, metadata={"help": "a file of banned URL words"})
    soft_banned_words: str | None = field(default=None, metadata={"help": "a file of soft-banned URL words"})
    banned_subwords: str | None = field(default=None, metadata={"help": "a file of banned URL subwords"})
    soft_word_threshold: int = 2
    column: str = "url"

    def __post_init__(self):
        super().__post_init__()
        check_range(self, "soft_word_threshold", 1)
        if not any((self.lists, self.domains, self.urls, self.banned_words, self.soft_banned_words,
                    self.banned_subwords)):
            raise SettingsError("url_blocklist needs at least one list: lists (a UT1 folder), domains, urls, "
                                "banned_words, soft_banned_words or banned_subwords")
        self._tables()  # every file read and checked now, before any work

    @property
    def input_column(self) -> str:
        return self.column

    def _tables(self) -> dict[str, frozenset[str]]:
        return _url_tables(self)

    def _build_tables(self) -> dict[str, frozenset[str]]:
        domains, urls = set(load_list(self.domains)), set(load_list(self.urls))
        if self.lists:
            for path in ut1_files(self.lists, self.categories, "domains"):
                domains |= load_list(path)
            for path in ut1_files(self.lists, self.categories, "urls"):
                urls |= load_list(path)
        return {"domains": frozenset(domains), "urls": frozenset(urls),
                "words": load_list(self.banned_words, normalize=True),
                "soft": load_list(self.soft_banned_words, normalize=True),
                "subwords": load_list(self.banned_subwords, normalize=True)}

    def rule(self, url: str, t: dict) -> int:
        """The number of the first rule ``url`` breaks (1-6), 0 for none."""
        if not url:
            return 0
        from urllib.parse import urlsplit

        host = (urlsplit(url if "://" in url else "//" + url).hostname or "").lower()
        info = _extractor()(host)
        # tldextract 5.3 renamed registered_domain (both are the eTLD+1); a host without a public
        # suffix (an intranet name, a reserved TLD) is its own registered domain
        registered = (info.top_domain_under_public_suffix if hasattr(info, "top_domain_under_public_suffix")
                      else info.registered_domain) or host
        if registered.lower() in t["domains"]:
            return 1
        if host in t["domains"]:
            return 2
        bare = re.sub(r"^[a-zA-Z][a-zA-Z0-9+.-]*://", "", url)
        bare = bare[4:] if bare.lower().startswith("www.") else bare
        if url.lower() in t["urls"] or bare.lower() in t["urls"]:
            return 3
        words = {w.lower() for w in _SPLIT.split(url) if w}
        if words & t["words"]:
            return 4
        if len(words & t["soft"]) >= self.soft_word_threshold:
            return 5
        if t["subwords"]:
            flat = _normalize(url)
            if any(s in flat for s in t["subwords"]):
                return 6
        return 0

    def score_frame(self, df: pd.DataFrame, texts: Texts) -> np.ndarray:
        if self.column not in df.columns:
            raise DataError(f"filter {self.reason}: the dataset has no {self.column!r} column "
                            f"(columns: {', '.join(map(str, df.columns))}); set 'column' in the chain")
        tables = self._tables()
        urls = df[self.column].astype(STRING).fillna("").tolist()
        return np.array([self.rule(u, tables) for u in urls], dtype=np.float64)


@functools.lru_cache(maxsize=64)
def _pattern(path: str, mtime_ns: int, size: int, substring: bool):
    words = sorted(read_lines(path), key=len, reverse=True)
    if not words:
        return None
    alternation = "|".join(re.escape(w) for w in words)
    return re.compile(f"(?:{alternation})" if substring else rf"(?:\W|^)({alternation})(?:\W|$)")


@dataclass(frozen=True)
class BadWords(Filter):
    """C4's bad-words rule with the LDNOOBW lists of each language (see the module docstring)."""

    kind: ClassVar[str] = "bad_words"
    threshold_range: ClassVar[tuple] = (0, None)

    max: float | None = 0
    lists: str = field(default="", metadata={"help": "a folder of LDNOOBW lists: one file per language code"})
    language: str | None = field(default=None, metadata={"help": "the language of documents without a language column"})
    language_column: str = "language"

    def __post_init__(self):
        super().__post_init__()
        if not self.lists or not os.path.isdir(self.lists):
            raise SettingsError(f"bad_words: lists must be a folder of LDNOOBW lists (one file per language); "
                                f"got {self.lists!r}")
        for name in self.languages():
            self._compiled(name)  # every list read and checked now, before any work
        if self.language is not None and self.language not in self.languages():
            raise SettingsError(f"bad_words: no list for language {self.language!r} in {self.lists} "
                                f"(found: {', '.join(self.languages()) or 'none'})")

    def languages(self) -> list[str]:
        return sorted(f for f in os.listdir(self.lists) if os.path.isfile(os.path.join(self.lists, f))
                      and not f.startswith(".") and "." not in f)

    def _compiled(self, lang: str):
        path = os.path.join(self.lists, lang)
        if not os.path.isfile(path):
            return None
        st = os.stat(path)
        return _pattern(os.path.abspath(path), st.st_mtime_ns, st.st_size, lang.split("-")[0] in _NO_SPACES)

    def score_frame(self, df: pd.DataFrame, texts: Texts) -> np.ndarray:
        n = len(df)
        if self.language_column in df.columns:
            langs = df[self.language_column].astype(STRING).fillna(self.language or "").tolist()
        else:
            langs = [self.language or ""] * n
        text = df["text"].astype(STRING).fillna("").str.lower().tolist()
        scores = np.zeros(n, dtype=np.float64)
        for i, (lang, t) in enumerate(zip(langs, text)):
            pattern = self._compiled(lang) if lang else None
            if pattern is None:
                continue
            found = pattern.findall(t)
            scores[i] = len({m if isinstance(m, str) else m[0] for m in found})
        return scores
