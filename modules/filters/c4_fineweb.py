"""C4's and FineWeb's line rules (lorem ipsum, curly brackets, sentences; line punctuation, short lines, duplicated characters, newlines), each reading exactly the lines its docs name; the sentence-end marks and the regex alternation they share with the heuristics."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

import numpy as np

from curate.stages.filters.base import Filter, Texts, ratio
from curate.stages.stage import check_range

END_MARKS = "[.?!\"']"

# FineWeb's line rules come in two versions. ``original``: the rules as FineWeb was built (datatrove's
# first FineWebQualityFilter): every line counts, blank ones included, the sentence ends are . ' " ! ?,
# and a document is dropped at the threshold (<= 0.12, >= 0.67, >= 0.01). ``datatrove``: datatrove's
# current version (0.10): blank lines are left out, the sentence ends are its TERMINAL_PUNCTUATION
# (below, the same 159 characters), and a document is dropped only past the threshold (< 0.12,
# > 0.67, > 0.01).
VARIANTS = ("original", "datatrove")
VARIANT_HELP = ("original: FineWeb's rules as FineWeb was built (blank lines count, . ' \" ! ?, dropped at "
                "the threshold); datatrove: datatrove 0.10's (blank lines left out, its 159 sentence ends, "
                "dropped past the threshold)")

# datatrove.utils.text.TERMINAL_PUNCTUATION (datatrove 0.10.1, Apache-2.0), sorted: data, not code
DATATROVE_TERMINAL_PUNCTUATION = (
    "!.?\u0589\u061d\u061e\u061f\u06d4\u0700\u0701\u0702\u07f9\u0837\u0839\u083d\u083e\u0964\u0965"
    "\u104a\u104b\u1362\u1367\u1368\u166e\u1735\u1736\u17d4\u17d5\u17d6\u17d9\u17da\u1803\u1809\u1944"
    "\u1945\u1aa8\u1aa9\u1aaa\u1aab\u1b5a\u1b5b\u1b5e\u1b5f\u1b7d\u1b7e\u1c3b\u1c3c\u1c7e\u1c7f\u203c"
    "\u203d\u2047\u2048\u2049\u2e2e\u2e3c\u2e53\u2e54\u3002\ua4ff\ua60e\ua60f\ua6f3\ua6f7\ua876\ua877"
    "\ua8ce\ua8cf\ua92f\ua9c8\ua9c9\uaa5d\uaa5e\uaa5f\uaaf0\uaaf1\uabeb\ufe52\ufe56\ufe57\uff01\uff0e"
    "\uff1f\uff61\U00010a56\U00010a57\U00010f55\U00010f56\U00010f57\U00010f58\U00010f59\U00010f86"
    "\U00010f87\U00010f88\U00010f89\U00011047\U00011048\U000110be\U000110bf\U000110c0\U000110c1"
    "\U00011141\U00011142\U00011143\U000111c5\U000111c6\U000111cd\U000111de\U000111df\U00011238"
    "\U00011239\U0001123b\U0001123c\U000112a9\U0001144b\U0001144c\U000115c2\U000115c3\U000115c9"
    "\U000115ca\U000115cb\U000115cc\U000115cd\U000115ce\U000115cf\U000115d0\U000115d1\U000115d2"
    "\U000115d3\U000115d4\U000115d5\U000115d6\U000115d7\U00011641\U00011642\U0001173c\U0001173d"
    "\U0001173e\U00011944\U00011946\U00011a42\U00011a43\U00011a9b\U00011a9c\U00011c41\U00011c42"
    "\U00011ef7\U00011ef8\U00011f43\U00011f44\U00016a6e\U00016a6f\U00016af5\U00016b37\U00016b38"
    "\U00016b44\U00016e98\U0001bc9f\U0001da88"
)


def _class(chars: str) -> str:
    """An RE2 character class of exactly ``chars``."""
    return "[" + "".join("\\" + c if c in "\\]^-[" else c for c in chars) + "]"


class _Variant:
    """The ``variant`` setting of FineWeb's line rules (see VARIANTS): strictness follows it."""

    def __post_init__(self):
        super().__post_init__()
        from curate.stages.stage import check_choice

        check_choice(self, "variant")

    @property
    def _lines(self):
        return "nonblank_lines" if self.variant == "datatrove" else "lines"


#: C4's line-removal list (``_POLICY_SUBSTRINGS`` in TensorFlow Datasets' c4_utils), used by the C4
#: filters and by ``clean --c4-lines`` and ``clean --remove-boilerplate-lines``
C4_POLICY_SUBSTRINGS = ("terms of use", "privacy policy", "cookie policy", "uses cookies", "use of cookies",
                        "use cookies")


def re2_escape(text: str) -> str:
    """Escape regex metacharacters for RE2 (Python's re.escape also escapes spaces, which RE2 rejects)."""
    return "".join("\\" + c if c in ".^$*+?{}[]\\|()" else c for c in text)


def alternation(strings) -> str:
    return "(?:" + "|".join(re2_escape(s) for s in strings) + ")"


#: the Wikipedia citations C4 removes from a line: ``\p{Nd}`` is what C4's Python ``\d`` matches (any
#: decimal digit), RE2's ``\d`` is ASCII only
C4_CITATIONS = r"\[\p{Nd}*\]|\[edit\]|\[citation needed\]"


def c4_line_rules(stripped) -> dict:
    """C4's line rules (TensorFlow Datasets' ``c4_utils.clean_page``) on an Arrow array of lines already
    stripped of surrounding whitespace, shared by the C4 filters and ``clean --c4-lines``.

    ``text`` is each line without its citations; ``candidate`` marks the lines C4 reads on (no word
    over 1000 characters, checked before the citations go; ends with . ? ! " ' but not ...; 3+ words,
    counted after); ``lorem``, ``javascript``, ``curly``, ``policy`` are candidates with each rule's
    phrase, ``curly`` only where javascript did not already remove the line (C4's order)."""
    import pyarrow.compute as pc

    text = pc.replace_substring_regex(stripped, C4_CITATIONS, "")
    # Python's lower() makes İ "i" + a combining dot, Arrow a plain "i": "JAVASCRİPT" is not C4's javascript
    lower = pc.utf8_lower(pc.replace_substring(text, "\u0130", "i\u0307"))
    # trimmed: a citation at the start leaves a space, where Arrow's split (not str.split) finds an empty word
    words = pc.utf8_trim_whitespace(text)
    nwords = pc.list_value_length(pc.utf8_split_whitespace(words)).to_numpy()
    nwords = np.where(pc.utf8_length(words).to_numpy() == 0, 0, nwords)

    def has(arr, pattern):
        return pc.match_substring_regex(arr, pattern).to_numpy(zero_copy_only=False)

    ends = has(text, END_MARKS + "$") & ~has(text, r"\.\.\.$")
    long_word = np.zeros(len(stripped), dtype=bool)
    for i in np.flatnonzero(pc.utf8_length(stripped).to_numpy() > 1000):  # rare: longer than any allowed word
        long_word[i] = any(len(w) > 1000 for w in stripped[int(i)].as_py().split())
    candidate = ends & (nwords >= 3) & ~long_word
    javascript = candidate & has(lower, "javascript")
    return {"text": text, "candidate": candidate, "lorem": candidate & has(lower, "lorem ipsum"),
            "javascript": javascript, "curly": candidate & ~javascript & has(text, r"\{"),
            "policy": candidate & has(lower, alternation(C4_POLICY_SUBSTRINGS))}


def _c4_lines(t: Texts) -> dict:
    """C4's line rules, shared by the three C4 filters: which lines count, and each filter's own flag."""
    import pyarrow.compute as pc

    lines = t.lines
    c4 = c4_line_rules(lines.stripped)
    kept = c4["candidate"] & ~c4["javascript"] & ~c4["policy"]  # C4 without its curly rule counts { lines
    sentences = np.maximum(pc.count_substring_regex(c4["text"], r"[.!?]+[\"')\]]*(?:\s|$)").to_numpy(), 1)
    return {"lines": lines, "lorem": c4["lorem"], "curly": c4["curly"],
            "sentences": np.where(kept, sentences, 0)}


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
class FineWebLinePunctuation(_Variant, Filter):
    """Share of lines (blank ones included) ending with . ' " ! ?; FineWeb drops <= 0.12
    (``variant: datatrove``: non-blank lines ending with any of its sentence ends, dropped < 0.12)."""

    kind: ClassVar[str] = "fineweb_line_punctuation"
    min: float | None = 0.12
    variant: str = field(default="original", metadata={"choices": VARIANTS, "help": VARIANT_HELP,
                                                                 "spelled_when_set": True})

    @property
    def strict_min(self) -> bool:
        return self.variant == "original"

    def score_texts(self, t: Texts):
        lines = getattr(t, self._lines)
        ends = END_MARKS if self.variant == "original" else _class(DATATROVE_TERMINAL_PUNCTUATION)
        return ratio(lines.sum(lines.match(ends + "$")), lines.count, empty=0.0)


@dataclass(frozen=True)
class FineWebShortLines(_Variant, Filter):
    """Share of lines (blank ones included) of at most ``short_line_length`` characters; FineWeb drops >= 0.67
    (``variant: datatrove``: of non-blank lines, dropped > 0.67)."""

    kind: ClassVar[str] = "fineweb_short_lines"
    max: float | None = 0.67
    short_line_length: int = 30
    variant: str = field(default="original", metadata={"choices": VARIANTS, "help": VARIANT_HELP,
                                                                 "spelled_when_set": True})

    def __post_init__(self):
        super().__post_init__()
        check_range(self, "short_line_length", 0)

    @property
    def strict_max(self) -> bool:
        return self.variant == "original"

    def score_texts(self, t: Texts):
        lines = getattr(t, self._lines)
        return ratio(lines.sum(lines.length <= self.short_line_length), lines.count, empty=1.0)


@dataclass(frozen=True)
class FineWebCharDuplicates(_Variant, Filter):
    """Characters in repeated non-blank lines (every copy after the first) over the document's
    characters without newlines; FineWeb drops >= 0.01 (``variant: datatrove``: > 0.01)."""

    kind: ClassVar[str] = "fineweb_char_duplicates"
    max: float | None = 0.01
    variant: str = field(default="original", metadata={"choices": VARIANTS, "help": VARIANT_HELP,
                                                                 "spelled_when_set": True})

    @property
    def strict_max(self) -> bool:
        return self.variant == "original"

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
