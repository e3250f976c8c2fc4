"""Word n-gram repetition (Gopher, as NeMo Curator has it): the most frequent n-gram's share of the
characters, and the characters covered by repeated n-grams; split from :mod:`curate.stages.filters.heuristic`
(its module docstring gives the definitions and where curate differs from the peers)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

import numpy as np

from curate.stages.filters.base import Filter, Texts, ratio
from curate.stages.filters.words import HELP as WORDS_HELP, check_language
from curate.stages.stage import check_range


@dataclass(frozen=True)
class _NGramFilter(Filter):
    n: int = field(default=2, metadata={"help": "n-gram size in words"})
    language: str | None = field(default=None, metadata={"help": WORDS_HELP, "spelled_when_set": True})

    def __post_init__(self):
        super().__post_init__()
        check_range(self, "n", 1, 100)
        check_language(self)

    def score_texts(self, t: Texts):
        return self.score_words(t.in_language(self.language))

    def _too_short(self, t: Texts, score: np.ndarray) -> np.ndarray:
        """Documents with fewer than n words score 1.0, as in NeMo Curator (nothing to measure)."""
        return np.where(t.words.count < self.n, 1.0, score)

    def _gram_chars(self, t: Texts) -> np.ndarray:
        """Characters of the n-gram starting at each word position (words plus the n-1 spaces)."""
        cum = t.word_cumlen
        w = len(cum) - 1
        out = np.zeros(w, dtype=np.int64)
        m = w - self.n + 1
        if m > 0:
            out[:m] = cum[self.n:self.n + m] - cum[:m] + (self.n - 1)
        return out


@dataclass(frozen=True)
class TopNGrams(_NGramFilter):
    """Characters taken by the most frequent word n-gram (count x length) over all characters."""

    kind: ClassVar[str] = "top_ngrams"
    max: float | None = 0.2

    def default_name(self) -> str:
        return f"top_{self.n}grams"

    def score_words(self, t: Texts):
        import pandas as pd

        pos, keys = t.ngrams(self.n)
        top = np.ones(t.n, dtype=np.int64)  # an n-gram that occurs once: no repetition
        best = np.zeros(t.n, dtype=np.int64)
        if len(pos):
            ids = pd.factorize(keys)[0]
            counts = np.bincount(ids)[ids]
            chars = self._gram_chars(t)[pos]
            d = t.words.doc[pos]
            starts = np.flatnonzero(np.r_[True, d[1:] != d[:-1]])
            top[d[starts]] = np.maximum.reduceat(counts, starts)
            # among each document's most frequent n-grams, the longest
            best[d[starts]] = np.maximum.reduceat(np.where(counts == top[d], chars, 0), starts)
        repeated = np.where(top >= 2, top * best, 0)
        return self._too_short(t, ratio(repeated, t.nchar, empty=1.0))


@dataclass(frozen=True)
class DuplicateNGrams(_NGramFilter):
    """Characters of words covered by repeated word n-grams over all characters."""

    kind: ClassVar[str] = "duplicate_ngrams"
    n: int = 5
    max: float | None = 0.15

    def default_name(self) -> str:
        return f"duplicate_{self.n}grams"

    def score_words(self, t: Texts):
        import pandas as pd

        pos, keys = t.ngrams(self.n)
        words = t.words
        w = len(words)
        repeat = np.zeros(w, dtype=bool)  # a later occurrence of an n-gram seen before in the document
        repeat[pos[pd.Series(keys).duplicated(keep="first").to_numpy()]] = True
        # word j is covered when a repeated n-gram starts in (j-n, j]; n-grams never cross a
        # document boundary, so neither does the cover
        covered = repeat.copy()
        for k in range(1, min(self.n, w)):
            covered[k:] |= repeat[:w - k]
        chars = words.sum(words.length * covered)
        if w > 1:
            joined = covered[1:] & covered[:-1] & (words.doc[1:] == words.doc[:-1])
            chars += np.bincount(words.doc[1:], weights=joined, minlength=t.n)
        return self._too_short(t, ratio(chars, t.nchar, empty=1.0))


