"""Substring and character-histogram filters (NeMo Curator's ``SubstringFilter`` and NLLB's histogram
filter); split from :mod:`curate.stages.filters.heuristic`."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

import numpy as np

from curate.stages.errors import SettingsError
from curate.stages.filters.base import Filter, Texts, ratio
from curate.stages.stage import check_range


@dataclass(frozen=True)
class Substring(Filter):
    """1 when ``substring`` occurs at ``position`` (anywhere, at the start, at the end), else 0.
    The default keeps matching documents, as NeMo Curator's ``SubstringFilter``; ``max: 0`` drops them
    (``min`` is 1 only when neither threshold is given)."""

    kind: ClassVar[str] = "substring"
    substring: str = field(default="", metadata={"help": "the exact text to look for (case-sensitive)"})
    position: str = field(default="any", metadata={"choices": ("any", "prefix", "suffix")})

    def __post_init__(self):
        if self.min is None and self.max is None:
            object.__setattr__(self, "min", 1)
        super().__post_init__()
        from curate.stages.stage import check_choice

        if not isinstance(self.substring, str) or not self.substring:
            raise SettingsError("substring must be a non-empty string")
        check_choice(self, "position")

    def score_texts(self, t: Texts):
        import pyarrow.compute as pc

        fn = {"any": pc.match_substring, "prefix": pc.starts_with, "suffix": pc.ends_with}[self.position]
        return fn(t.arr, self.substring).to_numpy(zero_copy_only=False).astype(np.float64)


def histogram_chars(path: str, coverage: float, text_field: str = "text") -> str:
    """The most frequent characters of a sample that together make ``coverage`` of its characters
    (whitespace included), most frequent first: fairseq's clean histograms, built from the user's text.

    ``path`` is plain UTF-8 text, or JSONL (``.jsonl``/``.jsonl.gz``) whose ``text_field`` values are read.
    """
    import gzip
    import json
    from collections import Counter

    counts: Counter = Counter()
    opener = gzip.open if path.endswith(".gz") else open
    try:
        with opener(path, "rt", encoding="utf-8") as f:
            if ".jsonl" in path or ".ndjson" in path:
                for n, line in enumerate(f, 1):
                    if line.strip():
                        try:
                            counts.update(json.loads(line)[text_field])
                        except (ValueError, KeyError, TypeError) as e:
                            raise SettingsError(f"histogram sample {path} line {n}: no {text_field!r} text ({e})") from None
            else:
                for line in f:
                    counts.update(line)
    except FileNotFoundError:
        raise SettingsError(f"sample: no such file {path!r}") from None
    except UnicodeDecodeError as e:
        raise SettingsError(f"sample {path}: not UTF-8 ({e})") from None
    total = sum(counts.values())
    if not total:
        raise SettingsError(f"sample {path}: no characters to build a histogram from")
    chars, seen = [], 0
    for ch, c in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])):
        if seen >= coverage * total:
            break
        chars.append(ch)
        seen += c
    return "".join(chars)


@dataclass(frozen=True)
class Histogram(Filter):
    """Share of the document's characters (whitespace at the ends not counted, as NeMo) that belong to
    the language's character histogram: a cheap language check (NLLB; NeMo Curator's ``HistogramFilter``).

    The histogram is built from ``sample``, trusted text of the language the user gives (no download):
    its most frequent characters up to ``coverage`` of all its characters. NeMo keeps a document
    whose share is above the threshold (0.8), so ``min`` is strict here too. The characters are part
    of the chain's settings, so a new sample reruns the stage.
    """

    kind: ClassVar[str] = "histogram"
    strict_min: ClassVar[bool] = True
    min: float | None = 0.8
    sample: str = field(default="", metadata={"help": "UTF-8 text or JSONL of the language (the histogram source)"})
    coverage: float = field(default=0.99, metadata={"help": "share of the sample's characters the histogram covers"})
    text_field: str = field(default="text", metadata={"help": "JSONL sample: the field holding text"})
    chars: str = field(default="", metadata={
        "help": "the histogram itself; filled in from sample when the chain is read (workers never reread it)"})

    def __post_init__(self):
        super().__post_init__()
        check_range(self, "coverage", 0.5, 1.0)
        if not self.chars:
            if not self.sample:
                raise SettingsError("sample: a file of text in the language is required")
            object.__setattr__(self, "chars", histogram_chars(self.sample, self.coverage, self.text_field))

    def score_texts(self, t: Texts):
        import pyarrow.compute as pc

        outside = "[^" + "".join(f"\\x{{{ord(c):x}}}" for c in self.chars) + "]"
        inside = pc.utf8_length(pc.replace_substring_regex(pc.utf8_trim_whitespace(t.arr), outside, ""))
        return ratio(inside.to_numpy(), t.nchar, empty=0.0)
