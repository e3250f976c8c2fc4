"""``regex``: how much of a document a regular expression matches; the default (``max: 0``) drops every
document it matches at all, as datatrove's ``RegexFilter``.

``{filter: regex, pattern: '(?i)copyright', max: 0}``. The pattern is Python's ``re`` syntax, run by the
``regex`` package (the same syntax in its ``re``-compatible mode, with a time limit), compiled once per
process. The score (``measure``) is the number of non-overlapping matches (``count``, the default) or the
share of the document's characters inside them (``share``). A pattern that does not compile is refused
before any work, naming it.

The time limit is there for runaway patterns (catastrophic backtracking), never for long documents: a
document gets ``timeout`` seconds per started ``TIMEOUT_UNIT`` (100,000) characters, so 1 MB of prose
has 10 s where any linear pattern needs well under one, and the whole match runs in one C call
(``subn``: the count is its substitutions, the share the characters it removed, the same spans as
``finditer`` without a Python object per match) that keeps the GIL, so another thread of the worker
cannot eat its time. The limit is on the match's CPU time: a match that passed it in wall time with
less than half of it in CPU (a thread starved on a loaded machine) runs again with more wall time (up
to 3 times). A document that still passes its limit ends the run (exit 1) naming the pattern
and the document, unless ``on_timeout: drop`` asks to reject such documents as ``nan`` (counted, this
filter named in ``_detail``). Nothing is dropped by a guess in silence.
"""

from __future__ import annotations

import functools
import time
from dataclasses import dataclass, field
from typing import ClassVar

import numpy as np

from curate.stages.errors import DataError, SettingsError
from curate.stages.filters.base import Filter, Texts

#: characters per ``timeout`` of matching time: the limit grows with the document
TIMEOUT_UNIT = 100_000
#: a match that passed its (wall-clock) limit having used less than this share of it in CPU time was
#: starved, not slow: it runs again with four times the wall time, up to this many times
STARVED_SHARE = 0.5
STARVED_RETRIES = 3


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
    timeout: float = field(default=1.0, metadata={
        "help": "seconds of matching per started 100,000 characters of a document (a runaway pattern, "
                "not a long document, passes it)"})
    on_timeout: str = field(default="fail", metadata={
        "choices": ("fail", "drop"),
        "help": "a document past the time limit: fail (end the run naming pattern and document) or drop "
                "(reject it as nan)"})

    def __post_init__(self):
        if self.min is None and self.max is None:
            object.__setattr__(self, "max", 0)
        super().__post_init__()
        from curate.stages.stage import check_choice, check_range

        check_choice(self, "measure")
        check_choice(self, "on_timeout")
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

    def limit(self, text: str) -> float:
        """Seconds of matching ``text`` may take: ``timeout`` per started ``TIMEOUT_UNIT`` characters."""
        return self.timeout * max(1, -(-len(text) // TIMEOUT_UNIT))

    def score_frame(self, df, t: Texts):
        rx = compiled(self.pattern, self.ignore_case)
        out = np.empty(t.n, dtype=np.float64)
        for i, text in enumerate(t.arr.to_pylist()):
            out[i] = self._score(rx, text or "")
            if np.isnan(out[i]) and self.on_timeout == "fail":
                ident = df["id"].iloc[i] if "id" in df.columns else f"row {i}"
                raise DataError(
                    f"filter {self.reason}: pattern {self.pattern!r} ran past its time limit "
                    f"({self.limit(text or ''):g} s for {len(text or '')} characters) on document {ident!r}: "
                    f"it backtracks on it; fix the pattern, or set on_timeout: drop to reject such documents as nan")
        return out

    def _score(self, rx, text: str) -> float:
        limit = budget = self.limit(text)
        for _ in range(STARVED_RETRIES + 1):
            started = time.thread_time()
            try:
                # one C call for every match (finditer's spans exactly: a test checks it)
                stripped, count = rx.subn("", text, timeout=budget)
                break
            except TimeoutError:
                # the limit is on the pattern's CPU time: a match that used less than it passed its wall
                # time on a thread starved of the CPU (a loaded machine), so it runs again with more
                if time.thread_time() - started >= STARVED_SHARE * limit:
                    return float("nan")
                budget *= 4
        else:
            return float("nan")
        if self.measure == "count":
            return float(count)
        return (len(text) - len(stripped)) / len(text) if text else 0.0
