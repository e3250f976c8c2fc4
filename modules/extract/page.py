"""What the extraction sandbox's child runs per page: an HTML payload to its text and language.

Kept apart from :mod:`curate.stages.extract.warc` so that the child imports no pandas, numpy or
pyarrow: the child is a fresh interpreter per worker thread, and those imports were 0.5 of its 0.6
CPU-seconds of start-up (paid again on every added worker). The child receives :class:`PageSettings`,
not the stage's settings, for the same reason: unpickling those would import the stage's module.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from curate.stages.extract import tidy_text
from curate.stages.extract.html import (
    NON_SPACED,
    UndecodableError,
    decode_html,
    extract_justext,
    extract_resiliparse,
    extract_text,
    stoplists,
    stopword_lines,
)
from curate.stages.extract.language import SAMPLE_CHARS, detect, identify, identify_lid176


def _preload() -> None:
    """The libraries every page uses, imported with this module: the child imports it before it says
    ready, so an ``--extract-memory`` too small for them is refused before any work (see
    :func:`curate.stages.extract.sandbox.probe_limits`), not found on the first page."""
    import justext  # noqa: F401
    import pycld2  # noqa: F401
    import resiliparse.extract.html2text  # noqa: F401
    import resiliparse.parse.encoding  # noqa: F401


_preload()


@dataclass(frozen=True)
class PageSettings:
    """What a page's extraction reads of ``ExtractWarcSettings`` (the same names)."""

    algorithm: str
    min_stopword_density: float
    unlisted_languages: str
    language_id: str

    @classmethod
    def of(cls, settings) -> PageSettings:
        return cls(settings.algorithm, settings.min_stopword_density, settings.unlisted_languages,
                   settings.language_id)


@functools.lru_cache(maxsize=4)
def _extractor_for(settings: PageSettings) -> PageExtractor:
    return PageExtractor(settings)


#: (settings, its extractor) of the last page_outcome call: a batch's pages share one unpickled settings
#: object, and hashing it for the cache on every page was a microsecond of each
#: (one tuple, read and replaced whole: safe if threads ever call it)
_LAST: tuple = (None, None)


def page_outcome(settings: PageSettings, payload: bytes, charset: str | None) -> tuple:
    """:meth:`PageExtractor.outcome`, with one extractor per settings and process (the sandbox's child),
    its text as UTF-8 bytes.

    Bytes because the parent's Arrow column takes them as they are: a str crossing the pipe was
    encoded to UTF-8 by pickle here, decoded into a str by the parent and encoded again for Arrow
    (8 us of a 4,000-character page that is not Latin-1, a tenth of the parent's work per page)."""
    global _LAST
    last = _LAST
    if last[0] is not settings:
        last = _LAST = (settings, _extractor_for(settings))
    outcome = last[1].outcome(payload, charset)
    text = outcome[2]
    if text:
        try:
            return outcome[0], outcome[1], text.encode(), outcome[3]
        except UnicodeEncodeError:  # a lone surrogate: the str, for the frame to refuse as it always has
            pass
    return outcome


def page_row(row: dict, where: str, outcome: tuple) -> dict:
    """The row of a page from its :meth:`PageExtractor.outcome` (a copy of ``row``)."""
    return fill_row({**row}, where, outcome)


def fill_row(row: dict, where: str, outcome: tuple) -> dict:
    """:func:`page_row` in place: ``row`` itself, filled. Its text may be UTF-8 bytes
    (:func:`page_outcome`), which only a frame built by Arrow takes (``warc.rows_frame``)."""
    reason, message, text, language = outcome
    if text is not None:
        row["text"] = text
    if language is not None:
        row["language"], row["language_score"] = language
    if reason is not None:
        row["_reason"], row["_detail"] = reason, f"{where}: {message}"
    return row


class PageExtractor:
    """HTML payload -> text and language, the way NeMo Curator does it (see the module docstring)."""

    def __init__(self, settings: PageSettings):
        self.algorithm = settings.algorithm
        self.density = settings.min_stopword_density if settings.algorithm == "resiliparse" else 0.0
        self.language_id = settings.language_id
        #: the stop lists are needed: jusText always, resiliparse when it filters lines
        self.uses_stoplists = settings.algorithm == "justext" or self.density > 0
        self.stoplists = stoplists(with_latin=settings.unlisted_languages == "keep") if self.uses_stoplists else {}
        self.drop_unlisted = settings.unlisted_languages == "drop"

    def row(self, row: dict, payload, charset: str | None, where: str) -> dict:
        """``row`` (the caller's, filled in place) for the page."""
        return fill_row(row, where, self.outcome(payload, charset))

    def outcome(self, payload, charset: str | None) -> tuple:
        """What the page gives, without its row (so that little crosses the sandbox's pipe):
        ``(reason, message, text, language)``: the reject reason and its message (None, None for a
        document), the text (None: the row's stays) and (language, score) (None: the row's stay).
        :func:`page_row` makes the row of it."""
        try:
            html, _ = decode_html(bytes(payload), charset)
        except UndecodableError as e:
            return "undecodable", str(e), None, None
        try:
            if self.algorithm == "justext":
                text, detected = self._justext(html)
            elif self.density > 0:
                text, detected = self._filtered_resiliparse(html)
            else:
                text, detected = extract_text(html, self.algorithm), None
        except _NoStoplist as e:
            language = e.detected
            return ("no_stoplist", f"language {language[0].title()} has no stop list "
                                   f"(--unlisted-languages keep extracts it without the stop-word test)",
                    None, (language[1], language[2]))
        except MemoryError:  # the sandbox's bound: too_large there, not a library's error
            raise
        except Exception as e:  # a library failing on one page must not lose the file: reject the page, say why
            return "extract_error", f"{self.algorithm}: {type(e).__name__}: {e}", None, None
        if not text:
            return "no_text", f"no text left after {self.algorithm}", "", None
        if self.language_id == "none":
            return None, None, text, None
        if self.language_id == "langid":
            language, score = identify(text)
        elif self.language_id == "lid176":
            [(language, score)] = identify_lid176([text])
        else:
            if detected is None:
                detected = detect(text[:SAMPLE_CHARS])
            _, language, score = detected
        return None, None, text, (language, score)

    def _stoplist(self, detected, has_text) -> frozenset[str]:
        """The stop list of the detected language; _NoStoplist when there is none and such pages are
        dropped (a page without any text is left to become no_text instead)."""
        stoplist = self.stoplists.get(detected[0])
        if stoplist is None:
            if self.drop_unlisted and (detected[0] != "UNKNOWN" or has_text()):
                raise _NoStoplist(detected)
            stoplist = frozenset()
        return stoplist

    def _justext(self, html: str):
        # as NeMo Curator: CLD2 on the whole page picks the stop list
        detected = detect(html, html=True)
        stoplist = self._stoplist(detected, lambda: bool(extract_text(html, "resiliparse")))
        return extract_justext(html, stoplist, keep_all=detected[0] in NON_SPACED), detected

    def _filtered_resiliparse(self, html: str):
        # as NeMo Curator: CLD2 on the whole page picks the stop list. (CLD2 on the extracted text
        # is a third cheaper but disagrees with NeMo on 4 of our 430 parity pages: translated pages
        # whose navigation is English, and API indexes it cannot name.)
        detected = detect(html, html=True)
        raw = extract_resiliparse(html, tidy=False)
        if not raw.strip():
            return "", None
        stoplist = self._stoplist(detected, lambda: True)
        if not stoplist or detected[0] in NON_SPACED:
            return tidy_text(raw), detected
        return stopword_lines(raw, stoplist, self.density), detected


class _NoStoplist(Exception):
    def __init__(self, detected):
        super().__init__(detected[0])
        self.detected = detected
