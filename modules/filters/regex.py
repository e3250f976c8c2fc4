"""``regex``: how much of a document a regular expression matches; the default (``max: 0``) drops every
document it matches at all, as datatrove's ``RegexFilter``.

``{filter: regex, pattern: '(?i)copyright', max: 0}``. The pattern is Python's ``re`` syntax, run by the
``regex`` package (the same syntax in its ``re``-compatible mode, with a time limit), compiled once per
process. The score (``measure``) is the number of non-overlapping matches (``count``, the default) or the
share of the document's characters inside them (``share``). A pattern that does not compile is refused
before any work, naming it. A document whose matching takes longer than ``timeout`` seconds (a pattern
that backtracks catastrophically on it) scores NaN: it is rejected as ``nan`` with this filter named,
never kept or dropped by a guess.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import ClassVar

import numpy as np

from curate.stages.errors import SettingsError
from curate.stages.filters.base import Filter, Texts


@functools.lru_cache(maxsize=64)
def compiled(pattern: str, ignore_case: bool):
    import regex

    return regex.compile(pattern, regex.VERSION0 | (regex.IGNORECASE if ignore_case else 0))


@dataclass(frozen=True)
class Regex(Filter):
    """Matches of ``pattern`` (Python re syntax): their count, or the share of characters inside them
    (``measure: share``); the default drops any document it matches (datatrove's RegexFilter)."""

    kind: ClassVar[str] = "regex"
    threshold_range: ClassVar[tuple] = (0, None)
    pattern: str = field(default="", metadata={"help": "the regular expression (Python re syntax)"})
    ignore_case: bool = field(default=False, metadata={"help": "match letters of either case"})
    # not "score": that is every filter's method
    measure: str = field(default="count", metadata={
        "choices": ("count", "share"),
        "help": "count: matches in the document; share: its characters inside matches"})
    timeout: float = field(default=1.0, metadata={"help": "seconds of matching per document before it scores NaN"})

    def __post_init__(self):
        if self.min is None and self.max is None:
            object.__setattr__(self, "max", 0)
        super().__post_init__()
        from curate.stages.stage import check_choice, check_range

        check_choice(self, "measure")
        check_range(self, "timeout", 0.001, 3600.0)
        if not isinstance(self.ignore_case, bool):
            raise SettingsError(f"ignore_case must be true or false; got {self.ignore_case!r}")
        if not isinstance(self.pattern, str) or not self.pattern:
            raise SettingsError("pattern must be a non-empty regular expression")
        import regex

        try:
            compiled(self.pattern, self.ignore_case)
        except (regex.error, ValueError, OverflowError) as e:
            raise SettingsError(f"pattern {self.pattern!r} does not compile: {e}") from None

    def default_name(self) -> str:
        return "regex"

    def score_texts(self, t: Texts):
        rx = compiled(self.pattern, self.ignore_case)
        out = np.empty(t.n, dtype=np.float64)
        for i, text in enumerate(t.arr.to_pylist()):
            out[i] = self._score(rx, text or "")
        return out

    def _score(self, rx, text: str) -> float:
        try:
            spans = [m.span() for m in rx.finditer(text, timeout=self.timeout)]
        except TimeoutError:
            return float("nan")
        if self.measure == "count":
            return float(len(spans))
        return sum(b - a for a, b in spans) / len(text) if text else 0.0
