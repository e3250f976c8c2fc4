"""Applying a chain of filters to a partition: scores, drop reasons, score columns.

:class:`ScoreFilter` applies a chain: every filter scores every document (vectorised filters are
cheap; filters that call a model per document, ``expensive = True``, only score documents that are
still kept), a document is dropped with the reason of the *first* filter in chain order that
rejects it, and with ``keep_scores`` each filter's score lands in a ``score_<reason>`` column.
:meth:`ScoreFilter.tag` is the other half of ``tag``/``select`` (``modules/tag.py``): every filter
scores every document, nothing is dropped.

A partition is featurised in batches of about ``BATCH_BYTES`` of text (one
:class:`~curate.stages.filters.texts.Texts` each), which bounds the flat word arrays.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from curate.stages.dataset import DETAIL, INTERNAL, REASON, STRING, mark_dropped
from curate.stages.errors import SettingsError
from curate.stages.filters.texts import Texts

#: a batch of about this many bytes of text is featurised at once (bounds the flat word arrays)
BATCH_BYTES = 32 * 1024 * 1024


class ScoreFilter:
    """Applies a chain of filters to a frame: scores, drop reasons, optional score columns.

    ``filters``: :class:`~curate.stages.filters.base.Filter` objects, in chain order (not imported
    here: base.py re-exports this class, and a module importing it back would close a circle)."""

    def __init__(self, filters: list, keep_scores: bool = False, batch_bytes: int = BATCH_BYTES):
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
                    k[rows] = f.keep_frame(s_sub, sub.assign(**extra) if extra else sub) & ~np.isnan(s_sub)
                    extra = {c: v.reindex(part.index) for c, v in extra.items()}
                else:
                    s, extra = f.evaluate(part, texts)
                    s = np.asarray(s, dtype=np.float64)
                    # a NaN score (no words to average, a model without an answer) rejects: no threshold holds it
                    k = np.asarray(f.keep_frame(s, part.assign(**extra) if extra else part), dtype=bool) & ~np.isnan(s)
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
            nan = ~keeps[f.reason] & np.isnan(scores[f.reason])  # a filter that did not score it keeps it
            out = mark_dropped(out, ~keeps[f.reason] & ~nan, f.reason)
            if nan.any():
                out = _mark_nan(out, nan, f.reason)
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


#: the reason of a document dropped because a filter's score for it is NaN (``_detail`` names the filter)
NAN_REASON = "nan"


def _mark_nan(df: pd.DataFrame, mask: np.ndarray, reason: str) -> pd.DataFrame:
    """``df`` with the rows of ``mask`` not dropped yet marked ``nan``, their detail naming the filter."""
    fresh = pd.Series(mask, index=df.index) & df[REASON].isna()
    out = mark_dropped(df, fresh, NAN_REASON)
    detail = out[DETAIL] if DETAIL in out.columns else pd.Series(pd.NA, index=out.index, dtype=STRING)
    return out.assign(**{DETAIL: detail.mask(fresh, f"{reason}: the score is NaN").astype(STRING)})


def with_columns(df: pd.DataFrame, added: dict[str, pd.Series]) -> pd.DataFrame:
    """``df`` with the ``added`` columns (aligned by position) before the internal ones; a column
    already there is replaced where it is."""
    if not added:
        return df
    reason_cols = [c for c in INTERNAL if c in df.columns]
    body = df.drop(columns=reason_cols).assign(**{c: v.set_axis(df.index) for c, v in added.items()})
    return pd.concat([body, df[reason_cols]], axis=1)
