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
``finditer`` without a Python object per match) that keeps the GIL.

The ``regex`` package measures its limit in the process's CPU time, reading that clock (a system call, 1
us here and several on a slow virtual machine) once per match: ``x*`` on 400,000 characters is 400,000
reads, which is what timed a plain document out on CI. So each document's budget is its limit plus twice
the measured cost of one read per possible match (``clock_cost``, measured once per process): the
pattern's own work still has its limit. That read's cost grows with the process's threads (the kernel
sums them at each read: 0.75 us with one, 2.5 us with 200 idle ones), and every thread counts against
that clock, so a match that passes its budget is judged on its own thread's time: if that time, less the
clock's cost measured again now for every possible match, is under the limit, the match was crowded out
or the clock got dearer, not slow, and it runs again with a budget from the new cost, four times larger
at each try (up to 3 times). A document that still passes its limit
ends the run (exit 1) naming the pattern and the document, unless ``on_timeout: drop`` asks to reject
such documents as ``nan`` (counted, this filter named in ``_detail``). Nothing is dropped by a guess in
silence.
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
#: a match that passed its budget (the process's CPU time) without its own thread's work passing the
#: limit runs again with a larger budget, up to this many times
STARVED_RETRIES = 3


@functools.lru_cache(maxsize=64)
def compiled(pattern: str, ignore_case: bool):
    import regex

    return regex.compile(pattern, regex.VERSION0 | (regex.IGNORECASE if ignore_case else 0))


@functools.lru_cache(maxsize=1)
def clock_cost() -> float:
    """``measure_clock_cost`` once per process: the first try's budget."""
    return measure_clock_cost()


def measure_clock_cost() -> float:
    """Seconds of CPU the ``regex`` package's time limit costs per match (it reads the process's CPU
    clock at each, a cost that grows with the process's threads): the least of three timings of 5,000
    empty matches with a limit and without."""
    import regex

    rx, text = regex.compile("", regex.VERSION0), " " * 4_999
    best = float("inf")
    for _ in range(3):
        t0 = time.thread_time()
        rx.subn("", text, timeout=3600.0)
        t1 = time.thread_time()
        rx.subn("", text)
        best = min(best, (t1 - t0) - (time.thread_time() - t1))
    return max(best, 0.0) / 5_000


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

    def budget(self, text: str) -> float:
        """The ``regex`` timeout for ``text``: its limit plus twice the clock's cost for every possible
        match (one per character, and the empty one at its end)."""
        return self.limit(text) + 2 * (len(text) + 1) * clock_cost()

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
        limit, budget = self.limit(text), self.budget(text)
        for _ in range(STARVED_RETRIES + 1):
            started = time.thread_time()
            try:
                # one C call for every match (finditer's spans exactly: a test checks it)
                stripped, count = rx.subn("", text, timeout=budget)
                break
            except TimeoutError:
                # the budget is the process's CPU time, dearer to read with more threads: judged on this
                # thread's time less every possible read at today's cost, the pattern's own work
                reads = (len(text) + 1) * measure_clock_cost()
                if time.thread_time() - started - reads >= limit:
                    return float("nan")
                budget = 4 * max(budget, limit + 2 * reads)
        else:
            return float("nan")
        if self.measure == "count":
            return float(count)
        return (len(text) - len(stripped)) / len(text) if text else 0.0
