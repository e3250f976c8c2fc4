"""C4's and FineWeb's line rules (lorem ipsum, curly brackets, sentences; line punctuation, short lines, duplicated characters, newlines), each reading exactly the lines its docs name; the sentence-end marks and the regex alternation they share with the heuristics."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from curate.stages.filters.base import Filter, Texts, ratio
from curate.stages.stage import check_range

END_MARKS = "[.?!\"']"


#: C4's line-removal list (``_POLICY_SUBSTRINGS`` in TensorFlow Datasets' c4_utils), used by the C4
#: filters and by ``clean --remove-boilerplate-lines``
C4_POLICY_SUBSTRINGS = ("terms of use", "privacy policy", "cookie policy", "uses cookies", "use of cookies",
                        "use cookies")


def re2_escape(text: str) -> str:
    """Escape regex metacharacters for RE2 (Python's re.escape also escapes spaces, which RE2 rejects)."""
    return "".join("\\" + c if c in ".^$*+?{}[]\\|()" else c for c in text)


def alternation(strings) -> str:
    return "(?:" + "|".join(re2_escape(s) for s in strings) + ")"


def _c4_lines(t: Texts) -> dict:
    """C4's line rules, shared by the three C4 filters: which lines count, and each filter's own flag."""
    import pyarrow.compute as pc

    lines = t.lines
    text = pc.replace_substring_regex(lines.stripped, r"\[\d*\]|\[edit\]|\[citation needed\]", "")
    lower = pc.utf8_lower(text)
    length = pc.utf8_length(text).to_numpy()
    nwords = pc.list_value_length(pc.utf8_split_whitespace(text)).to_numpy()
    nwords = np.where(length == 0, 0, nwords)

    def has(arr, pattern):
        return pc.match_substring_regex(arr, pattern).to_numpy(zero_copy_only=False)

    ends = has(text, END_MARKS + "$") & ~has(text, r"\.\.\.$")
    long_word = np.zeros(len(lines), dtype=bool)
    for i in np.flatnonzero(length > 1000):  # rare: only lines longer than any allowed word
        long_word[i] = any(len(w) > 1000 for w in text[int(i)].as_py().split())
    candidate = ends & (nwords >= 3) & ~long_word
    lorem = candidate & has(lower, "lorem ipsum")
    javascript = candidate & has(lower, "javascript")
    curly = candidate & ~javascript & has(text, r"\{")
    policy = candidate & has(lower, alternation(C4_POLICY_SUBSTRINGS))
    kept = candidate & ~javascript & ~policy  # C4's filter with filter_curly_bracket=False counts { lines
    sentences = np.maximum(pc.count_substring_regex(text, r"[.!?]+[\"')\]]*(?:\s|$)").to_numpy(), 1)
    return {"lines": lines, "lorem": lorem, "curly": curly, "sentences": np.where(kept, sentences, 0)}


@dataclass(frozen=True)
class C4LoremIpsum(Filter):
    """1 when a line C4 would keep contains "lorem ipsum" (C4 drops the page)."""

    kind: ClassVar[str] = "c4_lorem_ipsum"
    max: float | None = 0

    def score_texts(self, t: Texts):
        c4 = t.memo("c4_lines", _c4_lines)
        return (c4["lines"].sum(c4["lorem"]) > 0).astype(np.float64)


@dataclass(frozen=True)
class C4CurlyBracket(Filter):
    """1 when a line C4 would keep (ends with punctuation, 3+ words) contains ``{``: C4's guard
    against code. Code blocks themselves rarely end with a full stop, so they do not count."""

    kind: ClassVar[str] = "c4_curly_bracket"
    max: float | None = 0

    def score_texts(self, t: Texts):
        c4 = t.memo("c4_lines", _c4_lines)
        return (c4["lines"].sum(c4["curly"]) > 0).astype(np.float64)


@dataclass(frozen=True)
class C4Sentences(Filter):
    """Sentences in the lines C4 keeps (end with . ? ! " ', 3+ words, no javascript or policy text; ``{`` too)."""

    kind: ClassVar[str] = "c4_sentences"
    threshold_range: ClassVar[tuple] = (0, None)
    min: float | None = 5

    def score_texts(self, t: Texts):
        c4 = t.memo("c4_lines", _c4_lines)
        return c4["lines"].sum(c4["sentences"])


@dataclass(frozen=True)
class FineWebLinePunctuation(Filter):
    """Share of lines (blank ones included) ending with . ' " ! ?; FineWeb drops <= 0.12."""

    kind: ClassVar[str] = "fineweb_line_punctuation"
    strict_min: ClassVar[bool] = True
    min: float | None = 0.12

    def score_texts(self, t: Texts):
        lines = t.lines
        return ratio(lines.sum(lines.match(END_MARKS + "$")), lines.count, empty=0.0)


@dataclass(frozen=True)
class FineWebShortLines(Filter):
    """Share of lines (blank ones included) of at most ``short_line_length`` characters; FineWeb drops >= 0.67."""

    kind: ClassVar[str] = "fineweb_short_lines"
    strict_max: ClassVar[bool] = True
    max: float | None = 0.67
    short_line_length: int = 30

    def __post_init__(self):
        super().__post_init__()
        check_range(self, "short_line_length", 0)

    def score_texts(self, t: Texts):
        lines = t.lines
        return ratio(lines.sum(lines.length <= self.short_line_length), lines.count, empty=1.0)


@dataclass(frozen=True)
class FineWebCharDuplicates(Filter):
    """Characters in repeated non-blank lines (every copy after the first) over the document's
    characters without newlines; FineWeb drops >= 0.01."""

    kind: ClassVar[str] = "fineweb_char_duplicates"
    strict_max: ClassVar[bool] = True
    max: float | None = 0.01

    def score_texts(self, t: Texts):
        lines = t.nonblank_lines
        dup = lines.sum(lines.length * ~lines.first)
        return ratio(dup, t.nchar - t.count_ascii("\n"), empty=1.0)


@dataclass(frozen=True)
class FineWebNewlineRatio(Filter):
    """Newlines per word token (FineWeb's list-like document rule); FineWeb drops > 0.3."""

    kind: ClassVar[str] = "fineweb_newline_ratio"
    max: float | None = 0.3

    def score_texts(self, t: Texts):
        tokens = t.count(r"[\pL\pN_]+|[^\pL\pN_\s]")
        return ratio(t.count_ascii("\n"), tokens, empty=1.0)
