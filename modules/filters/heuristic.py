"""Heuristic quality filters for natural-language text.

The first group follows NeMo Curator's English heuristics (mostly from Gopher, Rae et al. 2021, and
C4) with its default thresholds (``jobs/filters/heuristic_en.yaml``). The second group is C4's
document rules (Raffel et al. 2020) and FineWeb's (Penedo et al. 2024), used by
``jobs/filters/c4_fineweb.yaml``.

Definitions, where they differ from the reference code:
- words are ``str.split()`` words; lines are split on ``\\n``; NeMo's "sentences" are the
  non-blank lines; paragraphs are split on ``\\n\\n`` and blank ones are not counted.
- symbols-to-words counts words that are mostly ``#`` characters or are an ellipsis (NeMo counts
  runs of ``#`` instead of characters, so ``###`` was never a symbol word).
- top n-grams: characters of the most frequent word n-gram times its count, over the document's
  characters, as Gopher defines it; 0 when no n-gram repeats. On a tie in count curate takes the
  longest n-gram, datatrove the first seen (``Counter.most_common``) and NeMo the first in its
  dictionary: the scores differ only when equally frequent n-grams differ in length.
- duplicate n-grams: characters of the words covered by any repeated occurrence of an n-gram
  (plus the spaces between covered neighbours), over the document's characters.
- C4 counts sentences with NLTK; here a sentence is a run ending in ``. ! ?`` (at least one per
  kept line). C4's line *edit* (the lines it keeps) is not a document filter: see the clean
  stage's ``c4_lines``. C4's bad-words list is not included.
- FineWeb's newline ratio divides by NLTK tokens; here tokens are runs of letters/digits and
  single punctuation marks, which is close.

Every score is computed for the whole batch with Arrow kernels and numpy; there is no Python code
per document, line or word.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

import numpy as np

from curate.stages.filters.base import Filter, Texts, ratio
from curate.stages.filters.c4_fineweb import (
    C4_POLICY_SUBSTRINGS as C4_POLICY_SUBSTRINGS,
    END_MARKS as END_MARKS,
    C4CurlyBracket as C4CurlyBracket,
    C4LoremIpsum as C4LoremIpsum,
    C4Sentences as C4Sentences,
    FineWebCharDuplicates as FineWebCharDuplicates,
    FineWebLinePunctuation as FineWebLinePunctuation,
    FineWebNewlineRatio as FineWebNewlineRatio,
    FineWebShortLines as FineWebShortLines,
    alternation as alternation,
    re2_escape as re2_escape,
)
from curate.stages.filters.words import HELP as WORDS_HELP, check_language

ELLIPSIS_MARKS = ("...", "[...]", "…", "(...)", "[…]", "-»", "read more..", "read more")
BULLETS = "•‣⁃⁌⁍∙○●◘◦⦾⦿"
COMMON_ENGLISH_WORDS = ("the", "be", "to", "of", "and", "that", "have", "with")
#: NeMo Curator's ``policy_substrings`` (utils/constants.py), in its order: C4's list, three more short
#: phrases and five whole cookie banners (lower case); a paragraph holding one is boilerplate
POLICY_SUBSTRINGS = (
    "terms of use", "privacy policy", "cookie policy", "uses cookies", "privacy overview", "use of cookies",
    "use cookies", "privacy & cookies policy", "privacy and cookies policy",
    "this website uses cookies to improve your experience while you navigate through the website. out of "
    "these cookies, the cookies that are categorized as necessary are stored on your browser as they are "
    "essential for the working of basic functionalities of the website. we also use third-party cookies that "
    "help us analyze and understand how you use this website. these cookies will be stored in your browser "
    "only with your consent. you also have the option to opt-out of these cookies. but opting out of some of "
    "these cookies may have an effect on your browsing experience.",
    "necessary cookies are absolutely essential for the website to function properly. this category only "
    "includes cookies that ensures basic functionalities and security features of the website. these cookies "
    "do not store any personal information.",
    "any cookies that may not be particularly necessary for the website to function and is used specifically "
    "to collect user personal data via analytics, ads, other embedded contents are termed as non-necessary "
    "cookies. it is mandatory to procure user consent prior to running these cookies on your website.",
    "this site uses cookies, including for analytics, personalization, and advertising purposes. for more "
    "information or to change your cookie settings, click here.",
    "if you continue to browse this site without changing your cookie settings, you agree to this use. "
    "acceptread more",
)
# NeMo Curator's URL pattern as fixed by its PR #1880 (issue #1601): `-` is a literal, so a URL no
# longer runs on through `<`, `>`, `;`, `:`, `=` ... ; ``legacy``: the original, where `$-_` was a
# character range (U+0024-U+005F), for scores equal to NeMo Curator before the fix
URL_PATTERNS = {
    "nemo": r"http[s]?://(?:[a-zA-Z]|[0-9]|[$\-_@.&+]|[!*\(\),]|(?:%[0-9a-fA-F][0-9a-fA-F]))+",
    "legacy": r"http[s]?://(?:[a-zA-Z]|[0-9]|[$-_@.&+]|[!*\(\),]|(?:%[0-9a-fA-F][0-9a-fA-F]))+",
}
URL_CHARS = {"nemo": r"[a-zA-Z0-9$\-_@.&+!*\(\),%]", "legacy": r"[a-zA-Z0-9$-_@.&+!*\(\),%]"}
URL_PATTERN_HELP = ("nemo: NeMo Curator's URL pattern as fixed for its issue 1601 (a URL stops at < > ; : =); "
                    "legacy: the pattern before that fix")
ALNUM = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789\n?!,."


# --------------------------------------------------------------------------- character ratios


@dataclass(frozen=True)
class NonAlphaNumeric(Filter):
    """Share of characters outside NeMo's alphanumeric set ``[a-zA-Z0-9\\n?!,.]``."""

    kind: ClassVar[str] = "non_alpha_numeric"
    max: float | None = 0.25

    def score_texts(self, t: Texts):
        return ratio(t.nchar - t.count_ascii(ALNUM), t.nchar, empty=1.0)


@dataclass(frozen=True)
class Numbers(Filter):
    """Share of characters that are digits."""

    kind: ClassVar[str] = "numbers"
    max: float | None = 0.15

    def score_texts(self, t: Texts):
        return ratio(t.count_ascii("0123456789"), t.nchar, empty=1.0)


@dataclass(frozen=True)
class Urls(Filter):
    """Share of characters inside URLs."""

    kind: ClassVar[str] = "urls"
    max: float | None = 0.2
    url_pattern: str = field(default="nemo", metadata={"choices": tuple(URL_PATTERNS), "help": URL_PATTERN_HELP})

    def __post_init__(self):
        super().__post_init__()
        from curate.stages.stage import check_choice

        check_choice(self, "url_pattern")

    def score_texts(self, t: Texts):
        return ratio(t.matched_chars(URL_PATTERNS[self.url_pattern]), t.nchar, empty=1.0)


@dataclass(frozen=True)
class WhiteSpace(Filter):
    """Share of characters that are spaces, tabs, newlines, carriage returns or backspaces."""

    kind: ClassVar[str] = "whitespace"
    max: float | None = 0.25

    def score_texts(self, t: Texts):
        return ratio(t.count_ascii(" \t\n\r\b"), t.nchar, empty=1.0)


@dataclass(frozen=True)
class Parentheses(Filter):
    """Share of characters that are brackets: ``(){}[]⟨⟩``."""

    kind: ClassVar[str] = "parentheses"
    max: float | None = 0.1

    def score_texts(self, t: Texts):
        return ratio(t.count_ascii("(){}[]") + t.count("[⟨⟩]"), t.nchar, empty=1.0)


# --------------------------------------------------------------------------- words


@dataclass(frozen=True)
class SymbolsToWords(Filter):
    """Share of words that are mostly ``#`` or are an ellipsis."""

    kind: ClassVar[str] = "symbols_to_words"
    max: float | None = 0.1
    language: str | None = field(default=None, metadata={"help": WORDS_HELP, "spelled_when_set": True})

    def __post_init__(self):
        super().__post_init__()
        check_language(self)

    def score_texts(self, t: Texts):
        t = t.in_language(self.language)
        import pyarrow as pa
        import pyarrow.compute as pc

        w = t.words
        hashes = pc.count_substring(w.values, "#").to_numpy()
        ellipsis = pc.is_in(w.values, value_set=pa.array(ELLIPSIS_MARKS, pa.large_string()))
        symbol = (hashes / np.maximum(w.length, 1) > 0.5) | ellipsis.to_numpy(zero_copy_only=False)
        return ratio(w.sum(symbol), w.count, empty=1.0)


@dataclass(frozen=True)
class LongestWord(Filter):
    """Length of the longest word, in characters (0 for a document without words)."""

    kind: ClassVar[str] = "longest_word"
    threshold_range: ClassVar[tuple] = (0, None)
    max: float | None = 1000
    language: str | None = field(default=None, metadata={"help": WORDS_HELP, "spelled_when_set": True})

    def __post_init__(self):
        super().__post_init__()
        check_language(self)

    def score_texts(self, t: Texts):
        t = t.in_language(self.language)
        return t.words.max(t.words.length, empty=0.0)


@dataclass(frozen=True)
class WordCount(Filter):
    """Number of words."""

    kind: ClassVar[str] = "word_count"
    threshold_range: ClassVar[tuple] = (0, None)
    min: float | None = 50
    max: float | None = 100000
    language: str | None = field(default=None, metadata={"help": WORDS_HELP, "spelled_when_set": True})

    def __post_init__(self):
        super().__post_init__()
        check_language(self)

    def score_texts(self, t: Texts):
        t = t.in_language(self.language)
        return t.words.count.astype(np.float64)


@dataclass(frozen=True)
class MeanWordLength(Filter):
    """Mean word length in characters (0 for a document without words)."""

    kind: ClassVar[str] = "mean_word_length"
    threshold_range: ClassVar[tuple] = (0, None)
    min: float | None = 3
    max: float | None = 10
    language: str | None = field(default=None, metadata={"help": WORDS_HELP, "spelled_when_set": True})

    def __post_init__(self):
        super().__post_init__()
        check_language(self)

    def score_texts(self, t: Texts):
        t = t.in_language(self.language)
        w = t.words
        return ratio(w.sum(w.length), w.count, empty=0.0)


@dataclass(frozen=True)
class CommonEnglishWords(Filter):
    """Number of words among the, be, to, of, and, that, have, with (lower case only, on purpose:
    shouting documents score low)."""

    kind: ClassVar[str] = "common_english_words"
    threshold_range: ClassVar[tuple] = (0, None)
    min: float | None = 2

    def score_texts(self, t: Texts):
        import pyarrow as pa
        import pyarrow.compute as pc

        w = t.words
        hit = pc.is_in(w.values, value_set=pa.array(COMMON_ENGLISH_WORDS, pa.large_string()))
        return w.sum(hit.to_numpy(zero_copy_only=False))


@dataclass(frozen=True)
class WordsWithAlphabets(Filter):
    """Share of words with at least one letter."""

    kind: ClassVar[str] = "words_with_alphabets"
    min: float | None = 0.8
    language: str | None = field(default=None, metadata={"help": WORDS_HELP, "spelled_when_set": True})

    def __post_init__(self):
        super().__post_init__()
        check_language(self)

    def score_texts(self, t: Texts):
        t = t.in_language(self.language)
        w = t.words
        return ratio(w.sum(w.match(r"\pL")), w.count, empty=0.0)


# --------------------------------------------------------------------------- lines and paragraphs


@dataclass(frozen=True)
class Bullets(Filter):
    """Share of non-blank lines that start with a bullet character."""

    kind: ClassVar[str] = "bullets"
    max: float | None = 0.9

    def score_texts(self, t: Texts):
        import pyarrow.compute as pc

        lines = t.nonblank_lines
        bullet = pc.match_substring_regex(lines.stripped, f"^[{BULLETS}]").to_numpy(zero_copy_only=False)
        return ratio(lines.sum(bullet), lines.count, empty=1.0)


@dataclass(frozen=True)
class Punctuation(Filter):
    """Share of non-blank lines ("sentences") that do not end with . ? ! " or '."""

    kind: ClassVar[str] = "punctuation"
    max: float | None = 0.85

    def score_texts(self, t: Texts):
        import pyarrow.compute as pc

        lines = t.nonblank_lines
        ends = pc.match_substring_regex(lines.stripped, END_MARKS + "$").to_numpy(zero_copy_only=False)
        return ratio(lines.sum(~ends), lines.count, empty=1.0)


@dataclass(frozen=True)
class Ellipsis(Filter):
    """Share of non-blank lines that end with an ellipsis (``...``, ``…``, ``read more``, ...)."""

    kind: ClassVar[str] = "ellipsis"
    max: float | None = 0.3

    def score_texts(self, t: Texts):
        import pyarrow.compute as pc

        lines = t.nonblank_lines
        lower = pc.utf8_lower(lines.stripped)
        ends = pc.match_substring_regex(lower, alternation(ELLIPSIS_MARKS) + "$").to_numpy(zero_copy_only=False)
        return ratio(lines.sum(ends), lines.count, empty=1.0)


def _nonblank_paragraphs(t: Texts):
    import pyarrow.compute as pc

    paras = t.paragraphs
    return paras.where(pc.utf8_length(paras.stripped).to_numpy() > 0)


@dataclass(frozen=True)
class BoilerplateStrings(Filter):
    """Share of paragraphs with one of NeMo's policy phrases (cookie banners included); 1.0 when
    "lorem ipsum" appears. As in NeMo, every piece between ``\\n\\n`` counts as a paragraph, blank ones
    too; a document without any text scores 1.0."""

    kind: ClassVar[str] = "boilerplate_strings"
    max: float | None = 0.4

    def score_texts(self, t: Texts):
        import pyarrow.compute as pc

        paras = t.paragraphs
        lower = pc.utf8_lower(paras.values)
        policy = pc.match_substring_regex(lower, alternation(POLICY_SUBSTRINGS)).to_numpy(zero_copy_only=False)
        score = ratio(paras.sum(policy), paras.count, empty=1.0)
        blank = t.memo("nonblank_paragraphs", _nonblank_paragraphs).count == 0
        return np.where(t.contains("lorem ipsum", lower=True) | blank, 1.0, score)


@dataclass(frozen=True)
class RepeatedLines(Filter):
    """Unique non-blank lines over non-blank lines (low means repetitive)."""

    kind: ClassVar[str] = "repeated_lines"
    min: float | None = 0.7

    def score_texts(self, t: Texts):
        lines = t.nonblank_lines
        return ratio(lines.sum(lines.first), lines.count, empty=0.0)


@dataclass(frozen=True)
class RepeatedLinesChar(Filter):
    """Characters in unique non-blank lines over characters in all of them."""

    kind: ClassVar[str] = "repeated_lines_char"
    min: float | None = 0.8

    def score_texts(self, t: Texts):
        lines = t.nonblank_lines
        return ratio(lines.sum(lines.length * lines.first), lines.sum(lines.length), empty=0.0)


@dataclass(frozen=True)
class RepeatedParagraphs(Filter):
    """Unique paragraphs over paragraphs."""

    kind: ClassVar[str] = "repeated_paragraphs"
    min: float | None = 0.7

    def score_texts(self, t: Texts):
        paras = t.memo("nonblank_paragraphs", _nonblank_paragraphs)
        return ratio(paras.sum(paras.first), paras.count, empty=0.0)


@dataclass(frozen=True)
class RepeatedParagraphsChar(Filter):
    """Characters in unique paragraphs over characters in all of them."""

    kind: ClassVar[str] = "repeated_paragraphs_char"
    min: float | None = 0.8

    def score_texts(self, t: Texts):
        paras = t.memo("nonblank_paragraphs", _nonblank_paragraphs)
        return ratio(paras.sum(paras.length * paras.first), paras.sum(paras.length), empty=0.0)


# --------------------------------------------------------------------------- URLs


@dataclass(frozen=True)
class PornographicUrls(Filter):
    """1 when a URL in the document contains "porn", else 0."""

    kind: ClassVar[str] = "pornographic_urls"
    max: float | None = 0
    url_pattern: str = field(default="nemo", metadata={"choices": tuple(URL_PATTERNS), "help": URL_PATTERN_HELP})

    def __post_init__(self):
        super().__post_init__()
        from curate.stages.stage import check_choice

        check_choice(self, "url_pattern")

    def score_texts(self, t: Texts):
        return t.contains(r"https?://" + URL_CHARS[self.url_pattern] + "*porn", lower=True).astype(np.float64)


# --------------------------------------------------------------------------- C4


# --------------------------------------------------------------------------- FineWeb
