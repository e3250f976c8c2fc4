"""Language filter: keep documents in the listed languages, identified with enough confidence.

When the input already has ``language`` and ``language_score`` columns (from extraction), they are
used as they are; documents without them are identified with py3langid (its model ships inside
the package), on the first ``max_chars`` characters. The output always carries both columns, so a
later stage can use them. The score is the identification probability when the language is one of
``languages``, else 0.
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


@dataclass(frozen=True)
class LanguageFilter(Filter):
    """Probability of the document's language when it is one of ``languages``, else 0."""

    kind: ClassVar[str] = "language"
    expensive: ClassVar[bool] = True
    min: float | None = 0.65
    languages: tuple[str, ...] = field(default=("en",), metadata={"help": "ISO 639-1 codes to keep"})
    max_chars: int = field(default=5000, metadata={"help": "identify on this many first characters"})

    def __post_init__(self):
        super().__post_init__()
        if not self.languages:
            raise SettingsError("languages must list at least one language code, e.g. [en]")
        check_range(self, "max_chars", 1)

    def evaluate(self, df: pd.DataFrame, t: Texts):
        lang = df["language"].astype(STRING) if "language" in df.columns else pd.Series(
            pd.NA, index=df.index, dtype=STRING)
        prob = pd.to_numeric(df["language_score"], errors="coerce").astype("float64") if (
            "language_score" in df.columns) else pd.Series(np.nan, index=df.index)
        todo = (lang.isna() | prob.isna()).to_numpy()
        if todo.any():
            found_lang, found_prob = identify(df["text"][todo], self.max_chars)
            lang = lang.mask(todo, found_lang.reindex(df.index))
            prob = prob.mask(todo, found_prob.reindex(df.index))
        score = np.where(lang.isin(self.languages).fillna(False).to_numpy(dtype=bool), prob.to_numpy(), 0.0)
        return score, {"language": lang.astype(STRING), "language_score": prob.astype("float64")}

    def score_texts(self, t: Texts):
        text = pd.Series(pd.arrays.ArrowStringArray(t.arr))
        return self.evaluate(pd.DataFrame({"text": text}), t)[0]
