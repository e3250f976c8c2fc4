"""HTML to plain text: charset decoding and boilerplate removal by a selectable algorithm.

Decoding trusts a declared charset first (the HTTP header's, then the page's ``<meta>``), even
with a few undecodable bytes (replaced, when under 1% of the page); pages without a usable
declaration go to uchardet's guess (resiliparse) and then UTF-8. A page nothing decodes with
less than 1% damage is rejected as undecodable.

Algorithms (``ALGORITHMS``):

- ``resiliparse``: resiliparse's main-content heuristics (fast, C++), with NeMo Curator's
  arguments; the default. NeMo's stop-word post-filter then keeps only lines whose share of stop
  words of the page's language is at least ``min_stopword_density`` (0.32; see
  :func:`stopword_lines`).
- ``justext``: jusText with NeMo Curator's parameters (length_low 70, length_high 200,
  stopwords_low 0.30, stopwords_high 0.32, max_link_density 0.2, max_heading_distance 200) and its
  sequence (context-free classes copied before the context-sensitive revision).
- ``trafilatura``: trafilatura's extractor, comments excluded.

Stop lists, as NeMo Curator picks them (:func:`stoplists`): CLD2 identifies the language of the
whole page (markup skipped); jusText's list of that language is used, except Latin's (NeMo drops
it). A page in a language without a list is dropped by default (``unlisted_languages``); pages in
Thai, Chinese, Japanese and Korean keep every paragraph (jusText) or line (resiliparse), NeMo's
rule for languages written without spaces.

Every algorithm returns paragraphs separated by blank lines, or "" when nothing is left.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping

from curate.stages.extract import tidy_text

ALGORITHMS = ("resiliparse", "justext", "trafilatura")

#: NeMo Curator's jusText parameters
JUSTEXT = {
    "length_low": 70,
    "length_high": 200,
    "stopwords_low": 0.30,
    "stopwords_high": 0.32,
    "max_link_density": 0.2,
    "max_heading_distance": 200,
}

#: ISO 639-1 code (as py3langid answers) -> jusText stop-list name
JUSTEXT_STOPLISTS = {
    "af": "Afrikaans", "an": "Aragonese", "ar": "Arabic", "az": "Azerbaijani", "be": "Belarusian",
    "bg": "Bulgarian", "bn": "Bengali", "br": "Breton", "bs": "Bosnian", "ca": "Catalan", "cs": "Czech",
    "cy": "Welsh", "da": "Danish", "de": "German", "el": "Greek", "en": "English", "eo": "Esperanto",
    "es": "Spanish", "et": "Estonian", "eu": "Basque", "fa": "Persian", "fi": "Finnish", "fr": "French",
    "fy": "West_Frisian", "ga": "Irish", "gl": "Galician", "gu": "Gujarati", "he": "Hebrew", "hi": "Hindi",
    "hr": "Croatian", "ht": "Haitian", "hu": "Hungarian", "hy": "Armenian", "id": "Indonesian", "ig": "Igbo",
    "is": "Icelandic", "it": "Italian", "jv": "Javanese", "ka": "Georgian", "kk": "Kazakh", "kn": "Kannada",
    "ko": "Korean", "ku": "Kurdish", "ky": "Kyrgyz", "la": "Latin", "lb": "Luxembourgish", "lt": "Lithuanian",
    "lv": "Latvian", "mk": "Macedonian", "ml": "Malayalam", "mr": "Marathi", "ms": "Malay", "mt": "Maltese",
    "ne": "Nepali", "nl": "Dutch", "nn": "Norwegian_Nynorsk", "no": "Norwegian_Bokmal", "oc": "Occitan",
    "pl": "Polish", "pt": "Portuguese", "qu": "Quechua", "ro": "Romanian", "ru": "Russian", "sk": "Slovak",
    "sl": "Slovenian", "sq": "Albanian", "sr": "Serbian", "sv": "Swedish", "sw": "Swahili", "ta": "Tamil",
    "te": "Telugu", "tk": "Turkmen", "tl": "Tagalog", "tr": "Turkish", "uk": "Ukrainian", "ur": "Urdu",
    "uz": "Uzbek", "vi": "Vietnamese", "vo": "Volapuk", "wa": "Walloon", "yo": "Yoruba",
}

_META_CHARSET = re.compile(rb"""<meta[^>]{0,200}?charset\s*=\s*["']?\s*([a-zA-Z0-9_.:\-]+)""", re.IGNORECASE)
#: how much of a page the <meta> charset is looked for in (the HTML spec says the first 1024 bytes;
#: real pages put it later, after long comments or scripts)
META_WINDOW = 4096


class UndecodableError(ValueError):
    """No charset decodes the page."""


@functools.lru_cache(maxsize=256)
def _normalise_charset(name: str | None) -> str | None:
    if not name:
        return None
    from resiliparse.parse.encoding import map_encoding_to_html5

    mapped = map_encoding_to_html5(name.strip().strip("\"'"))
    return mapped or None


def _replaced_ratio_ok(text: str) -> bool:
    return text.count("\ufffd") * 100 <= len(text)


def decode_html(data: bytes, header_charset: str | None = None) -> tuple[str, str]:
    """(text, charset used); raises UndecodableError naming the charsets tried.

    A declared charset (HTTP header, then <meta>) is trusted first, even with a few bad bytes
    (replaced, if under 1% of the page): a guess would turn a UTF-8 page with one stray byte into
    mojibake. Only pages without a usable declaration are left to detection.
    """
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    first = _normalise_charset(header_charset)
    if first:  # the common case: the header's charset decodes the page (tried first below anyway)
        try:
            return data.decode(first), first
        except (UnicodeDecodeError, LookupError):
            pass
    # here, not at the top: an import statement costs 1.6 us even when the module is loaded, and most
    # pages return above
    from resiliparse.parse.encoding import detect_encoding

    meta = _META_CHARSET.search(data, 0, META_WINDOW)
    declared = [_normalise_charset(header_charset),
                _normalise_charset(meta.group(1).decode("ascii") if meta else None)]
    declared = list(dict.fromkeys(c for c in declared if c))
    tried = []
    for charset in declared:
        tried.append(charset)
        try:
            return data.decode(charset), charset
        except (UnicodeDecodeError, LookupError):
            continue
    for charset in declared:
        try:
            text = data.decode(charset, errors="replace")
        except LookupError:
            continue
        if _replaced_ratio_ok(text):
            return text, f"{charset} (with replacements)"
    for charset in dict.fromkeys([detect_encoding(data), "utf-8"]):
        if charset in tried:
            continue
        tried.append(charset)
        try:
            return data.decode(charset), charset
        except (UnicodeDecodeError, LookupError):
            continue
    text = data.decode("utf-8", errors="replace")
    if _replaced_ratio_ok(text):
        return text, "utf-8 (with replacements)"
    raise UndecodableError(f"no charset decodes the page (tried {', '.join(tried)})")


@functools.cache
def _plain_text():
    """resiliparse's extract_plain_text, imported on first use (an import statement per page cost 1.5 us)."""
    from resiliparse.extract.html2text import extract_plain_text

    return extract_plain_text


def extract_resiliparse(html: str, tidy: bool = True) -> str:
    # NeMo Curator's arguments; comments=False would also drop headings whose id merely contains
    # "comment" (resiliparse matches class and id names)
    text = _plain_text()(html, main_content=True, alt_texts=False, links=False,
                         form_fields=False, noscript=False, comments=True)
    return tidy_text(text) if tidy else text


def stopword_lines(text: str, stoplist: frozenset[str], min_density: float) -> str:
    """The lines of ``text`` whose share of stop words is at least ``min_density`` (NeMo Curator's
    post-filter of resiliparse output: words split on whitespace, compared case-sensitively, as
    NeMo does), tidied as :func:`curate.stages.extract.tidy_text` does (paragraph breaks are kept)."""
    kept: list[str] = []
    contains = stoplist.__contains__
    for line in text.split("\n"):
        words = line.split()
        if not words:
            if kept and kept[-1]:
                kept.append("")  # one paragraph break
        elif sum(map(contains, words)) / len(words) >= min_density:  # NeMo's comparison, to the last bit
            kept.append(line.rstrip(" \t"))
    return "\n".join(kept).strip()


@functools.cache
def justext_stoplist(language: str) -> frozenset[str]:
    """jusText's stop list for an ISO code; empty when jusText has none."""
    import justext

    name = JUSTEXT_STOPLISTS.get(language)
    return justext.get_stoplist(name) if name else frozenset()


#: cld2's language name -> jusText's stop-list name, where they differ (NeMo Curator's table)
_CLD2_NAMES = {"Haitian": "HAITIAN_CREOLE", "Norwegian_Bokmal": "NORWEGIAN",
               "Norwegian_Nynorsk": "NORWEGIAN_N", "Waray_Waray": "WARAY_PHILIPPINES"}
#: languages written without spaces between words: no stop-word test (NeMo keeps every paragraph)
NON_SPACED = frozenset({"THAI", "CHINESE", "JAPANESE", "KOREAN"})


@functools.cache
def stoplists(with_latin: bool = False) -> Stoplists:
    """jusText's stop lists keyed by cld2's upper-case language name, as NeMo Curator keys them.

    Latin is left out unless asked for (NeMo removes it: it "yields a lot of low quality
    documents"). Thai, Chinese and Japanese have no jusText list: they are non-spaced languages,
    whose pages are kept without a stop-word test (:data:`NON_SPACED`)."""
    return Stoplists(with_latin)


class Stoplists(Mapping):
    """The stop lists, each read when a page first needs it: reading all of them took 0.24 CPU-s,
    paid by every sandbox child, of which a run on one language needs one list."""

    def __init__(self, with_latin: bool):
        import justext

        self._names: dict[str, str | None] = {
            _CLD2_NAMES.get(name, name.upper()): name
            for name in justext.get_stoplists() if name != "Latin" or with_latin}
        for name in NON_SPACED:
            self._names.setdefault(name, None)
        self._lists: dict[str, frozenset[str]] = {}

    def __getitem__(self, key: str) -> frozenset[str]:
        found = self._lists.get(key)
        if found is None:
            import justext

            name = self._names[key]
            found = self._lists[key] = frozenset() if name is None else frozenset(justext.get_stoplist(name))
        return found

    def __iter__(self):
        return iter(self._names)

    def __len__(self) -> int:
        return len(self._names)


def extract_justext(html: str, stoplist: frozenset[str] | None = None, keep_all: bool = False) -> str:
    """jusText in NeMo Curator's sequence: context-free classes, copied into ``class_type``, then
    the context-sensitive revision (jusText's own revision copies each class only as it reaches it,
    so a heading never sees the good paragraph after it).

    ``stoplist``: the page language's list (None: identify the language on the paragraphs and use
    its list, the stop-word test off when jusText has none). ``keep_all``: keep every paragraph
    (NeMo's rule for non-spaced languages)."""
    import justext.core as jt
    import lxml.etree

    try:
        dom = jt.preprocessor(jt.html_to_dom(html))
        paragraphs = jt.ParagraphMaker.make_paragraphs(dom)
    except (lxml.etree.ParserError, ValueError) as e:
        # an empty or tag-less document: lxml has nothing to build a tree from
        if "empty" in str(e).lower():
            return ""
        raise
    if not paragraphs:
        return ""
    if stoplist is None:
        from curate.stages.extract.language import identify

        stoplist = justext_stoplist(identify(" ".join(p.text for p in paragraphs))[0])
    params = dict(JUSTEXT)
    if not stoplist:
        params.update(stopwords_low=0.0, stopwords_high=0.0)
    heading_distance = params.pop("max_heading_distance")
    jt.classify_paragraphs(paragraphs, stoplist, no_headings=False, **params)
    for p in paragraphs:
        p.class_type = p.cf_class
    jt.revise_paragraph_classification(paragraphs, heading_distance)
    return tidy_text("\n\n".join(p.text for p in paragraphs if keep_all or not p.is_boilerplate))


def extract_trafilatura(html: str) -> str:
    import trafilatura

    text = trafilatura.extract(html, include_comments=False, include_tables=True, deduplicate=False,
                               with_metadata=False, output_format="txt")
    return tidy_text(text or "")


_EXTRACTORS = {
    "resiliparse": extract_resiliparse,
    "justext": extract_justext,
    "trafilatura": extract_trafilatura,
}


def extract_text(html: str, algorithm: str = "resiliparse") -> str:
    """Main text of an HTML page by ``algorithm`` ("" when the page has none)."""
    try:
        fn = _EXTRACTORS[algorithm]
    except KeyError:
        raise ValueError(f"algorithm must be one of {', '.join(ALGORITHMS)}; got {algorithm!r}") from None
    return fn(html)
