"""Filters of your own: :class:`DocumentFilter`, scored one document at a time in Python."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from curate.stages.errors import SettingsError
from curate.stages.filters.base import Filter, Texts, _valid_name


@dataclass(frozen=True)
class DocumentFilter(Filter):
    """A filter of your own, one document at a time: implement ``score_document(text) -> float`` and
    either give a threshold (``min``/``max``, as every filter) or override ``keep_document(score) ->
    bool``. Subclass it as a frozen dataclass; its fields are its YAML parameters. Use it from Python
    (``curate.Step("filter", ...)`` with a chain naming it) or from any chain YAML as
    ``{filter: "your.module:YourFilter", ...}``; the module must be importable on every worker.

    It is a plain Python loop over the batch: fine for a model call per document, slower than the
    built-in vectorised filters for cheap scores."""

    #: any values: a score of your own is not a ratio unless you say so
    threshold_range: ClassVar[tuple] = (None, None)

    def __post_init__(self):
        if type(self).keep_document is DocumentFilter.keep_document:
            super().__post_init__()  # needs min or max
        elif self.name is not None and not _valid_name(self.name):
            raise SettingsError(f"name must be letters, digits and _ (it names a column); got {self.name!r}")

    def default_name(self) -> str:
        if self.kind:
            return self.kind
        name = type(self).__name__
        return "".join(f"_{c.lower()}" if c.isupper() else c for c in name).lstrip("_")

    @property
    def threshold_decides(self) -> bool:
        return type(self).keep_document is DocumentFilter.keep_document

    def score_document(self, text: str) -> float:
        raise NotImplementedError

    def keep_document(self, score: float) -> bool:
        return bool(Filter.keep(self, score))

    def score_texts(self, texts: Texts) -> np.ndarray:
        return np.array([float(self.score_document(t)) for t in texts.arr.to_pylist()], dtype=np.float64)

    def keep(self, score):
        if type(self).keep_document is DocumentFilter.keep_document:
            return Filter.keep(self, score)
        score = np.asarray(score, dtype=np.float64)
        out = np.array([not np.isnan(s) and bool(self.keep_document(float(s))) for s in score.ravel()], dtype=bool)
        return bool(out[0]) if score.ndim == 0 else out.reshape(score.shape)
