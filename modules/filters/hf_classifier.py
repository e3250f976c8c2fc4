"""``hf_classifier``: a Hugging Face sequence-classification model as a filter or a tagger (CPU).

    filters:
      - {filter: hf_classifier, name: edu, model: /models/fineweb-edu-classifier, min: 3}   # regression head
      - {filter: hf_classifier, name: toxic, model: /models/toxicity, label: toxic, max: 0.2}  # a label's probability

FineWeb-Edu-style quality classifiers are sequence-classification models: a directory with
``config.json``, the weights and the tokenizer files. The score of a document is, for a model with one
output (a regression head, FineWeb-Edu), that output; for a model with several, the softmax probability
of ``label`` (a name from ``id2label``, or an index); an empty text scores NaN (nothing to classify:
no threshold keeps it). Texts are truncated to ``max_length`` tokens and
scored in batches of ``batch_size`` on the CPU, one torch thread per task (the cluster already runs a
task per core). Several classifiers in one chain, each with its own ``name``, give one score column each
through ``tag`` (an ensemble; ``bucket`` combines them).

Needs torch: ``pip install 'curate-llm[hf]'`` (the ``[dev]`` extra includes it). The model is loaded
once per process; its files' sizes and times are part of the chain's fingerprint, so a retrained model
reruns the stage.
"""

from __future__ import annotations

import functools
import json
import os
from dataclasses import dataclass, field
from typing import ClassVar

import numpy as np

from curate.stages.errors import SettingsError
from curate.stages.filters.base import Filter, Texts
from curate.stages.paths import folder_stamp as _stamp
from curate.stages.stage import check_range


@functools.lru_cache(maxsize=4)
def _load(directory: str, stamp: str):
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    torch.set_num_threads(1)
    tokenizer = AutoTokenizer.from_pretrained(directory)
    model = AutoModelForSequenceClassification.from_pretrained(directory)
    model.eval()
    return tokenizer, model


@dataclass(frozen=True)
class HFClassifier(Filter):
    """A Hugging Face sequence-classification model's score (see the module docstring)."""

    kind: ClassVar[str] = "hf_classifier"
    expensive: ClassVar[bool] = True
    threshold_range: ClassVar[tuple] = (None, None)  # logits and regression outputs are not ratios

    min: float | None = 0.5
    model: str = field(default="", metadata={"help": "a Hugging Face model directory (config.json, weights, tokenizer)"})
    label: str | None = field(default=None, metadata={"help": "the label whose probability is the score "
                                                               "(several outputs); None for a regression head"})
    max_length: int = field(default=512, metadata={"help": "tokens per text (longer texts are truncated)"})
    batch_size: int = field(default=32, metadata={"help": "texts per forward pass"})
    #: the model files' sizes and times: a retrained model changes the chain's fingerprint
    model_stamp: str = field(default="", init=False)

    def __post_init__(self):
        super().__post_init__()
        check_range(self, "max_length", 1)
        check_range(self, "batch_size", 1)
        if not self.model or not os.path.isdir(self.model):
            raise SettingsError(f"model: no such directory {self.model!r} (a Hugging Face model directory)")
        config_path = os.path.join(self.model, "config.json")
        try:
            with open(config_path, encoding="utf-8") as f:
                config = json.load(f)
        except FileNotFoundError:
            raise SettingsError(f"model {self.model}: no config.json: not a Hugging Face model directory") from None
        except (OSError, ValueError) as e:
            raise SettingsError(f"model {self.model}: config.json is not readable JSON ({e})") from None
        self._label_index(config)  # a label the model does not have fails now, not on a worker
        try:
            import torch  # noqa: F401
        except ImportError:
            raise SettingsError("hf_classifier needs torch: pip install 'curate-llm[hf]'") from None
        object.__setattr__(self, "model_stamp", _stamp(self.model))

    def _label_index(self, config: dict) -> int | None:
        n = int(config.get("num_labels") or len(config.get("id2label") or {}) or 2)
        if n == 1:
            if self.label is not None:
                raise SettingsError(f"model {self.model}: one output (a regression head): give no label")
            return None
        names = {str(v): int(k) for k, v in (config.get("id2label") or {}).items()}
        if self.label is None:
            raise SettingsError(f"model {self.model}: {n} outputs: name the label to score "
                                f"(one of: {', '.join(names) or ', '.join(map(str, range(n)))})")
        if self.label in names:
            return names[self.label]
        if self.label.isdigit() and int(self.label) < n:
            return int(self.label)
        raise SettingsError(f"model {self.model}: no label {self.label!r} (labels: {', '.join(names) or n})")

    def score_texts(self, t: Texts) -> np.ndarray:
        import torch

        tokenizer, model = _load(os.path.abspath(self.model), self.model_stamp)
        index = self._label_index(model.config.to_dict())
        texts = [x or "" for x in t.arr.to_pylist()]
        # a text without any token has nothing to classify: NaN, which no threshold keeps
        out = np.full(len(texts), np.nan, dtype=np.float64)
        rows = [i for i, x in enumerate(texts) if x.strip()]
        with torch.inference_mode():
            for start in range(0, len(rows), self.batch_size):
                chunk = rows[start:start + self.batch_size]
                batch = tokenizer([texts[i] for i in chunk], truncation=True, max_length=self.max_length,
                                  padding=True, return_tensors="pt")
                if batch["input_ids"].shape[1] == 0:
                    continue
                logits = model(**batch).logits.float()
                scores = logits[:, 0] if index is None else torch.softmax(logits, dim=-1)[:, index]
                out[chunk] = scores.numpy()
        return out
