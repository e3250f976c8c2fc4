"""Quality classifier filter: a fastText model scores each document.

The model comes from ``curate train-classifier`` (or any fastText supervised model, e.g. one trained
with NeMo Curator); the score is the probability of ``label``. Text is given to the model as NeMo
Curator gives it (one line, case kept); ``lowercase: true`` is for models trained on lower-cased text. It is loaded once per worker process. Two ways to decide:

- ``mode: threshold`` keeps documents with score >= ``min``.
- ``mode: pareto`` is NeMo Curator's (and GPT-3's) sampling: keep when a Pareto(``alpha``) draw
  exceeds 1 - score, so low-scoring documents survive now and then and the kept set stays diverse.
  The draw is a hash of (``seed``, document id), so the result does not depend on partitioning or
  on how many workers ran it.
"""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass, field
from typing import ClassVar

import numpy as np
import pandas as pd

from curate.stages.errors import SettingsError
from curate.stages.filters.base import Filter, Texts
from curate.stages.stage import check_choice, check_range


def fasttext_lines(texts, lowercase: bool = False) -> list[str]:
    """Texts as fastText reads them, for training and scoring alike: one line, ``__label__`` removed.

    As NeMo Curator's ``FastTextQualityFilter`` prepares them (newlines and ``__label__`` become
    spaces; runs of whitespace are one fastText delimiter either way), so a model trained the NeMo
    way scores the same here. Case is kept: fastText's word and n-gram features are case-sensitive,
    and a model trained on cased text scores lower-cased text very differently. ``lowercase`` is for
    models trained on lower-cased text.
    """
    import pyarrow.compute as pc

    from curate.stages.filters.base import to_arrow

    arr = to_arrow(texts)
    if lowercase:
        arr = pc.utf8_lower(arr)
    arr = pc.replace_substring(arr, "__label__", " ")
    arr = pc.utf8_trim_whitespace(pc.replace_substring_regex(arr, r"\s+", " "))
    return arr.to_pylist()


@functools.lru_cache(maxsize=4)
def load_model(path: str, mtime_ns: int):
    """The fastText model at ``path``, once per process (mtime in the key: a retrained model reloads)."""
    import fasttext

    return fasttext.load_model(path)


def uniform_draws(ids: pd.Series, seed: int) -> np.ndarray:
    """A number in [0, 1) per id, from a seeded hash of the id: the same for the same (seed, id)."""
    key = f"{seed:016d}"[-16:]
    h = pd.util.hash_pandas_object(ids.astype(str), index=False, hash_key=key).to_numpy(dtype=np.uint64)
    return (h >> np.uint64(11)).astype(np.float64) / float(1 << 53)


@dataclass(frozen=True)
class ClassifierFilter(Filter):
    """Probability of ``label`` under the fastText model."""

    kind: ClassVar[str] = "classifier"
    expensive: ClassVar[bool] = True
    min: float | None = 0.5
    model: str = field(default="", metadata={"help": "fastText model file (.bin)"})
    label: str = field(default="__label__hq", metadata={"help": "the label whose probability is the score"})
    mode: str = field(default="threshold", metadata={"choices": ("threshold", "pareto")})
    alpha: float = field(default=3.0, metadata={"help": "pareto mode: shape (higher keeps fewer low scores)"})
    seed: int = field(default=42, metadata={"help": "pareto mode: seed of the per-document draws"})
    lowercase: bool = field(default=False, metadata={
        "help": "lower-case text before predicting (only for models trained on lower-cased text; NeMo does not)"})
    #: size and modification time of the model file: a retrained model changes the chain's
    #: fingerprint, so the stage reruns
    model_stamp: str = field(default="", init=False)

    def __post_init__(self):
        super().__post_init__()
        if not self.model:
            raise SettingsError("model: the path of a fastText model is required")
        if not os.path.isfile(self.model):
            raise SettingsError(f"model: no such file {self.model!r}")
        st = os.stat(self.model)
        object.__setattr__(self, "model_stamp", f"{st.st_size}-{st.st_mtime_ns}")
        check_choice(self, "mode")
        check_range(self, "alpha", 1e-9)

    def describe(self) -> dict:
        out = super().describe()
        if self.mode == "pareto":  # no fixed threshold to draw on a plot
            out["min"] = out["max"] = None
        return out

    def score_texts(self, t: Texts):
        model = load_model(os.path.abspath(self.model), os.stat(self.model).st_mtime_ns)
        lines = fasttext_lines(t.arr, self.lowercase)
        out = np.zeros(len(lines))
        todo = [i for i, line in enumerate(lines) if line]
        if todo:
            labels, probs = model.predict([lines[i] for i in todo], k=-1)
            for i, labs, ps in zip(todo, labels, probs):
                for lab, p in zip(labs, ps):
                    if lab == self.label:
                        out[i] = p
                        break
        return np.clip(out, 0.0, 1.0)

    @property
    def threshold_decides(self) -> bool:
        return self.mode == "threshold"

    def pareto_keep(self, scores, draws) -> np.ndarray:
        pareto = (1.0 - np.asarray(draws)) ** (-1.0 / self.alpha) - 1.0
        return pareto > 1.0 - np.asarray(scores, dtype=np.float64)

    def keep(self, score):
        if self.mode == "threshold":
            return super().keep(score)
        score = np.asarray(score, dtype=np.float64)
        draws = np.random.default_rng(self.seed).random(score.shape)
        out = self.pareto_keep(score, draws)
        return bool(out) if out.ndim == 0 else out

    def keep_frame(self, scores, df: pd.DataFrame):
        if self.mode == "threshold":
            return super().keep(scores)
        ids = df["id"] if "id" in df.columns else pd.Series(np.arange(len(df)), index=df.index)
        return self.pareto_keep(scores, uniform_draws(ids, self.seed))
