"""Filters score first, then decide.

A filter is a frozen dataclass of parameters (its YAML entry) with ``score(text) -> float`` and
``keep(score) -> bool``. The thresholds are the ``min``/``max`` fields every filter has, so a chain's
YAML, the manifest and the report's plot all show the same numbers. ``keep`` works on a float and on
an array of floats alike.

Scoring a partition document by document would be far too slow in Python, so filters actually
implement ``score_texts(texts)``: vectorised over a :class:`~curate.stages.filters.texts.Texts`, one
batch of documents and the pieces filters share (``texts.py``). ``score(text)`` is that same code on
a batch of one, so the two can never disagree.

:class:`ScoreFilter` (``apply.py``) applies a chain: a document is dropped with the reason of the
*first* filter in chain order that rejects it; :meth:`ScoreFilter.tag` scores and drops nothing.

A document with nothing to measure (empty, or whitespace only) never divides by zero: each filter
gives it a fixed score, for ratio filters one that rejects it (as NeMo Curator does).

This module keeps the protocol and the chain read from YAML; the rest lives beside it, one concern
a module, and every name stays importable from here, where filters, stages and tests import it:
``texts`` (what filters measure: :class:`Texts`, :class:`Pieces`, ``to_arrow``, ``ratio``) and
``apply`` (:class:`ScoreFilter`, ``with_columns``, ``BATCH_BYTES``).
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, field
from typing import ClassVar

import numpy as np
import pandas as pd

from curate.stages.dataset import STRING
from curate.stages.errors import SettingsError
from curate.stages.filters.apply import (
    BATCH_BYTES as BATCH_BYTES,
    ScoreFilter as ScoreFilter,
    with_columns as with_columns,
)
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
        from curate.stages.settings import did_you_mean

        raise SettingsError(f"{where}: unknown filter {kind!r} (known: {', '.join(sorted(FILTERS))})"
                            f"{did_you_mean(kind, FILTERS)}")
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
        specs.append({"filter": kind, **spelled(flt)})
    return tuple(specs)


def spelled(flt) -> dict:
    """Every parameter of a filter, as the manifest and the fingerprint see it; a parameter added later
    with the old behaviour as its default (``metadata={"spelled_when_set": True}``) only when set, so
    that outputs made before it keep their fingerprints."""
    values = dataclasses.asdict(flt)
    for f in dataclasses.fields(flt):
        if f.metadata.get("spelled_when_set") and values.get(f.name) == f.default:
            values.pop(f.name)
    return values


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


def resolve_path(path: str, where: str) -> str:
    """A model/data path from a chain file, checked to exist (one line naming the option)."""
    if not os.path.exists(path):
        raise SettingsError(f"{where}: no such file {path!r}")
    return path
