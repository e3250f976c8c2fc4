"""Filters score first, then decide.

A filter is a frozen dataclass of parameters (its YAML entry) with ``score(text) -> float`` and
``keep(score) -> bool``. The thresholds are the ``min``/``max`` fields every filter has, so a chain's
YAML, the manifest and the report's plot all show the same numbers. ``keep`` works on a float and on
an array of floats alike.

Scoring a partition document by document would be far too slow in Python, so filters actually
implement ``score_texts(texts)``: vectorised over a :class:`~curate.stages.filters.texts.Texts`, one
batch of documents and the pieces filters share (``texts.py``). ``score(text)`` is that same code on
a batch of one, so the two can never disagree.

:class:`ScoreFilter` applies a chain: every filter scores every document (vectorised filters are
cheap; filters that call a model per document, ``expensive = True``, only score documents that are
still kept), a document is dropped with the reason of the *first* filter in chain order that
rejects it, and with ``keep_scores`` each filter's score lands in a ``score_<reason>`` column.
:meth:`ScoreFilter.tag` is the other half of ``tag``/``select`` (``modules/tag.py``): every filter
scores every document, nothing is dropped.

A document with nothing to measure (empty, or whitespace only) never divides by zero: each filter
gives it a fixed score, for ratio filters one that rejects it (as NeMo Curator does).

This module keeps the protocol; what filters measure lives beside it, in ``texts`` (:class:`Texts`,
:class:`Pieces`, ``to_arrow``, ``ratio``), and every name stays importable from here, where every
filter imports it.
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, field
from typing import ClassVar

import numpy as np
import pandas as pd

from curate.stages.dataset import INTERNAL, STRING, mark_dropped
from curate.stages.errors import SettingsError
from curate.stages.filters.texts import (
    Pieces as Pieces,
    Texts,
    ratio as ratio,
    to_arrow as to_arrow,
)
from curate.stages.stage import check_range, settings_from_mapping

SCORE_PREFIX = "score_"
#: ``tag``'s column for the decision of a filter that does not decide by threshold alone
KEEP_PREFIX = "keep_"
#: a batch of about this many bytes of text is featurised at once (bounds the flat word arrays)
BATCH_BYTES = 32 * 1024 * 1024


# --------------------------------------------------------------------------- the filter protocol


@dataclass(frozen=True)
class Filter:
    """Base of every filter. Subclasses set ``kind`` and implement ``score_texts``."""

    #: the name used in chain YAML (``filter: word_count``)
    kind: ClassVar[str] = ""
    #: True for filters that call a model per document: they only score documents still kept
    expensive: ClassVar[bool] = False
    #: keep needs score > min (instead of >=) / score < max (instead of <=)
    strict_min: ClassVar[bool] = False
    strict_max: ClassVar[bool] = False
    #: the column ``score(value)`` and ``score_texts`` read
    input_column: ClassVar[str] = "text"
    #: the values min/max may take (most scores are ratios)
    threshold_range: ClassVar[tuple] = (0, 1)

    name: str | None = field(default=None, metadata={"help": "drop reason and score column suffix"})
    min: float | None = field(default=None, metadata={"help": "keep documents scoring at least this"})
    max: float | None = field(default=None, metadata={"help": "keep documents scoring at most this"})

    def __post_init__(self):
        if self.min is None and self.max is None:
            raise SettingsError("needs a threshold: min or max")
        for name in ("min", "max"):
            value = getattr(self, name)
            if value is not None and not isinstance(value, (int, float)):
                raise SettingsError(f"{name} must be a number; got {value!r}")
            check_range(self, name, *self.threshold_range)
        if self.min is not None and self.max is not None and self.min > self.max:
            raise SettingsError(f"min ({self.min}) is above max ({self.max})")
        if self.name is not None and not _valid_name(self.name):
            raise SettingsError(f"name must be letters, digits and _ (it names a column); got {self.name!r}")

    # what the chain sees -----------------------------------------------------------------------

    @property
    def reason(self) -> str:
        """The drop reason, also the score column's suffix."""
        return self.name or self.default_name()

    def default_name(self) -> str:
        return self.kind

    @property
    def score_column(self) -> str:
        return SCORE_PREFIX + self.reason

    @property
    def threshold_decides(self) -> bool:
        """True when ``keep`` is exactly the min/max test on the score (so a ``select`` expression
        over the score column can make the same decision). Filters deciding by more (a seeded
        draw, a user's ``keep_document``) say False; ``tag`` then stores their decision as well."""
        return True

    @property
    def decision_column(self) -> str:
        """Where ``tag`` stores the decision of a filter that does not decide by threshold alone."""
        return KEEP_PREFIX + self.reason

    def describe(self) -> dict:
        """What the manifest records (the report marks min/max on the plot)."""
        params = {k: v for k, v in dataclasses.asdict(self).items() if k not in ("name", "min", "max")}
        return {"filter": self.kind, "reason": self.reason, "column": self.score_column, "min": self.min,
                "max": self.max, "strict_min": self.strict_min, "strict_max": self.strict_max,
                "params": params}

    # scoring -----------------------------------------------------------------------------------

    def score_texts(self, texts: Texts) -> np.ndarray:
        raise NotImplementedError

    def score_frame(self, df: pd.DataFrame, texts: Texts) -> np.ndarray:
        """Scores of one batch; ``texts`` is ``df['text']`` featurised. Filters reading another
        column override this."""
        return self.score_texts(texts)

    def evaluate(self, df: pd.DataFrame, texts: Texts) -> tuple[np.ndarray, dict[str, pd.Series]]:
        """(scores, extra columns for the output). Filters that tag documents (the detected license,
        the language) return the tags here, computed in the same pass as the score."""
        return self.score_frame(df, texts), {}

    def score(self, value) -> float:
        """The score of one document (its text, or the filter's input column value)."""
        frame = pd.DataFrame({self.input_column: pd.Series([value], dtype=STRING)})
        texts = Texts(frame["text"]) if "text" in frame else Texts([""])
        return float(self.score_frame(frame, texts)[0])

    # deciding ----------------------------------------------------------------------------------

    def keep(self, score):
        """True to keep a document with this score (a float, or an array of them)."""
        score = np.asarray(score, dtype=np.float64)
        ok = ~np.isnan(score)
        if self.min is not None:
            ok &= (score > self.min) if self.strict_min else (score >= self.min)
        if self.max is not None:
            ok &= (score < self.max) if self.strict_max else (score <= self.max)
        return bool(ok) if ok.ndim == 0 else ok

    def keep_frame(self, scores: np.ndarray, df: pd.DataFrame) -> np.ndarray:
        """Keep mask for a batch; filters whose decision needs more than the score override it."""
        return self.keep(scores)


def _valid_name(name: str) -> bool:
    return bool(name) and all(c.isalnum() or c == "_" for c in name) and name.isascii()


# --------------------------------------------------------------------------- chains


def filter_class(kind: str, where: str):
    from curate.stages.filters import FILTERS, get_filter

    if isinstance(kind, str) and ":" in kind:  # a user's own filter, module:Class
        from curate.stages.registry import user_class

        return user_class(kind, f"{where}: filter", Filter)
    if kind not in FILTERS:
        raise SettingsError(f"{where}: unknown filter {kind!r} (known: {', '.join(sorted(FILTERS))})")
    return get_filter(kind)


def parse_chain(doc, where: str) -> tuple[dict, ...]:
    """Validate a chain (the parsed YAML) and return it normalised: one dict per filter with every
    parameter spelled out, so the manifest and the fingerprint see the values actually used."""
    entries = doc.get("filters") if isinstance(doc, dict) else doc
    if isinstance(doc, dict):
        unknown = sorted(set(doc) - {"filters", "description"})
        if unknown:
            raise SettingsError(f"{where}: unknown key {unknown[0]!r} (expected 'filters')")
    if not isinstance(entries, list) or not entries:
        raise SettingsError(f"{where}: 'filters' must be a non-empty list")
    specs, seen = [], {}
    for i, entry in enumerate(entries, start=1):
        if not isinstance(entry, dict) or "filter" not in entry:
            raise SettingsError(f"{where}: filter {i} must be a mapping with a 'filter' key; got {entry!r}")
        params = dict(entry)
        kind = params.pop("filter")
        cls = filter_class(kind, f"{where}: filter {i}")
        flt = settings_from_mapping(cls, params, f"{where}: filter {i} ({kind})")
        if flt.reason in seen:
            raise SettingsError(f"{where}: filter {i} ({kind}) has the same name {flt.reason!r} as filter "
                                f"{seen[flt.reason]}; give one of them a different 'name'")
        seen[flt.reason] = i
        specs.append({"filter": kind, **dataclasses.asdict(flt)})
    return tuple(specs)


def load_chain(path: str) -> tuple[dict, ...]:
    """Read and validate a chain YAML file (strictly, once: :func:`curate.stages.yamlfile.load_yaml`)."""
    from curate.stages.yamlfile import load_yaml

    return parse_chain(load_yaml(path, "filter config"), f"filter config {path}")


def build_chain(specs) -> list[Filter]:
    """Filter objects from normalised specs (as ``parse_chain`` returns them)."""
    out = []
    for spec in specs:
        params = dict(spec)
        cls = filter_class(params.pop("filter"), "filter chain")
        hints = {f.name for f in dataclasses.fields(cls) if f.init}
        out.append(cls(**{k: (tuple(v) if isinstance(v, list) else v) for k, v in params.items() if k in hints}))
    return out


# --------------------------------------------------------------------------- applying a chain


class ScoreFilter:
    """Applies a chain of filters to a frame: scores, drop reasons, optional score columns."""

    def __init__(self, filters: list[Filter], keep_scores: bool = False, batch_bytes: int = BATCH_BYTES):
        if not filters:
            raise SettingsError("a filter chain needs at least one filter")
        self.filters = list(filters)
        self.keep_scores = keep_scores
        self.batch_bytes = batch_bytes

    def batches(self, df: pd.DataFrame) -> list[slice]:
        """Row ranges of about ``batch_bytes`` of text each (a huge document gets a batch of its own)."""
        if len(df) == 0:
            return [slice(0, 0)]
        sizes = df["text"].str.len().fillna(0).to_numpy(dtype=np.int64)
        ends = np.cumsum(sizes)
        cuts, start, base = [], 0, 0
        while start < len(df):
            stop = int(np.searchsorted(ends, base + self.batch_bytes, side="right"))
            stop = max(stop, start + 1)
            cuts.append(slice(start, stop))
            base = ends[stop - 1]
            start = stop
        return cuts

    def evaluate(self, df: pd.DataFrame, every: bool = False) -> tuple[dict, dict, dict]:
        """(scores, keeps, tags) of a frame: per filter reason its float64 scores and its own keep
        decisions, and the extra columns filters tag documents with (``language``, ``license``).

        ``every=False`` (filter): an expensive filter scores only the documents every earlier filter
        kept; the others get NaN and count as kept by it. ``every=True`` (tag): every filter scores
        every document. Scores do not depend on which other documents are scored with them, so a
        document's scores by the filters up to the first one rejecting it are the same either way."""
        n = len(df)
        scores = {f.reason: np.full(n, np.nan) for f in self.filters}
        keeps = {f.reason: np.ones(n, dtype=bool) for f in self.filters}
        notes: dict[str, list] = {}
        for sl in self.batches(df):
            part = df.iloc[sl]
            texts = Texts(part["text"])
            alive = np.ones(len(part), dtype=bool)
            for f in self.filters:
                if f.expensive and not every and not alive.all():
                    rows = np.flatnonzero(alive)
                    sub = part.iloc[rows]
                    s_sub, extra = f.evaluate(sub, Texts(sub["text"]))
                    s_sub = np.asarray(s_sub, dtype=np.float64)
                    s = np.full(len(part), np.nan)
                    s[rows] = s_sub
                    k = np.ones(len(part), dtype=bool)
                    # the filter's own tags (the language it identified) are part of its decision
                    k[rows] = f.keep_frame(s_sub, sub.assign(**extra) if extra else sub)
                    extra = {c: v.reindex(part.index) for c, v in extra.items()}
                else:
                    s, extra = f.evaluate(part, texts)
                    s = np.asarray(s, dtype=np.float64)
                    k = np.asarray(f.keep_frame(s, part.assign(**extra) if extra else part), dtype=bool)
                scores[f.reason][sl] = s
                keeps[f.reason][sl] = k
                alive &= k
                for col, values in extra.items():
                    notes.setdefault(col, []).append(values)
        tags = {col: pd.concat(parts) if parts else pd.Series([], dtype=STRING) for col, parts in notes.items()}
        return scores, keeps, tags

    def apply(self, df: pd.DataFrame) -> pd.DataFrame:
        scores, keeps, added = self.evaluate(df)
        out = df
        for f in self.filters:  # chain order: a document gets the reason of the first filter rejecting it
            out = mark_dropped(out, ~keeps[f.reason], f.reason)
        if self.keep_scores:
            for f in self.filters:
                added[f.score_column] = pd.Series(scores[f.reason], index=df.index, dtype="float64")
        return with_columns(out, added)

    def tag(self, df: pd.DataFrame) -> pd.DataFrame:
        """``df`` with every filter's score column (and, for a filter deciding by more than a
        threshold, its ``keep_<reason>`` decision), every document scored by every filter, none dropped."""
        scores, keeps, added = self.evaluate(df, every=True)
        for f in self.filters:
            added[f.score_column] = pd.Series(scores[f.reason], index=df.index, dtype="float64")
            if not f.threshold_decides:
                added[f.decision_column] = pd.Series(keeps[f.reason], index=df.index, dtype="bool")
        return with_columns(df, added)


def with_columns(df: pd.DataFrame, added: dict[str, pd.Series]) -> pd.DataFrame:
    """``df`` with the ``added`` columns (aligned by position) before the internal ones; a column
    already there is replaced where it is."""
    if not added:
        return df
    reason_cols = [c for c in INTERNAL if c in df.columns]
    body = df.drop(columns=reason_cols).assign(**{c: v.set_axis(df.index) for c, v in added.items()})
    return pd.concat([body, df[reason_cols]], axis=1)


def resolve_path(path: str, where: str) -> str:
    """A model/data path from a chain file, checked to exist (one line naming the option)."""
    if not os.path.exists(path):
        raise SettingsError(f"{where}: no such file {path!r}")
    return path
