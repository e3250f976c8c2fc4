"""``perplexity``: how surprising a document is to an n-gram language model, CCNet's recipe.

``{filter: perplexity, model: en.arpa.bin, tokenizer: en.sp.model, max: 1000}``. Each line (paragraph)
of the document is normalised as CCNet normalises it (lower-cased, accents removed, digits to 0, Unicode
punctuation to ASCII, non-printing characters dropped; ``normalize: false`` to score the text as it is), cut into
SentencePiece pieces (``tokenizer``; without one, whitespace words) and scored by a KenLM model
(``model``: ARPA or KenLM binary, with its begin and end of sentence). The document's perplexity is
``10 ** (-sum of log10 scores / (pieces + one end per line))``, CCNet's formula; larger is more
surprising. Used by ``tag``, it is the perplexity signal CCNet buckets by (head, middle, tail).

Model and tokenizer are local files, loaded once per process, never downloaded; both libraries are an
extra: ``pip install 'curate-llm[perplexity]'``. A document with no text to score scores NaN (rejected
as ``nan``, with this filter named); one past a float's range (a model of absurd log probabilities)
scores ``inf``.

Where the settings are read (job load, so ``--dry-run`` and before any stage), the model's header is
checked without KenLM (:mod:`curate.stages.filters.lm_header`: an empty, random, truncated or absurd
file is refused naming it) and the SentencePiece model is opened; KenLM loads the model itself only in
the workers, and what it alone finds fails naming the file too.
"""

from __future__ import annotations

import functools
import os
import re
import unicodedata
from dataclasses import dataclass, field
from typing import ClassVar

import numpy as np

from curate.stages.errors import DataError, SettingsError
from curate.stages.filters.base import Filter, Texts

# CCNet's text_normalizer: the punctuation it maps to ASCII, and the non-printing characters it drops
UNICODE_PUNCT = {"，": ",", "。": ". ", "、": ",", "„": '"', "”": '"', "“": '"', "«": '"', "»": '"', "１": '"',
                 "」": '"', "「": '"', "《": '"', "》": '"', "´": "'", "∶": ":", "：": ":", "？": "?", "！": "!",
                 "（": "(", "）": ")", "；": ";", "–": "-", "—": " - ", "．": ". ", "～": "~", "’": "'", "…": "...",
                 "━": "-", "〈": "<", "〉": ">", "【": "[", "】": "]", "％": "%", "►": "-"}
_PUNCT = re.compile(f"[{''.join(UNICODE_PUNCT)}]")
_NON_PRINTING = re.compile(f"[{''.join(map(chr, [*range(0, 32), *range(127, 160)]))}]")
_DIGITS = re.compile(r"\d")
#: 10 ** x overflows a float from here on
FLOAT_EXPONENT = 308


def normalize(line: str) -> str:
    """A line as CCNet scores it: stripped, lower-cased, accents removed, digits 0, punctuation ASCII,
    non-printing characters dropped."""
    line = line.strip().lower()
    line = "".join(c for c in unicodedata.normalize("NFD", line) if unicodedata.category(c) != "Mn")
    line = _DIGITS.sub("0", line)
    line = _PUNCT.sub(lambda m: UNICODE_PUNCT[m.group(0)], line)
    return _NON_PRINTING.sub("", line)


def _missing(what: str) -> SettingsError:
    return SettingsError(f"perplexity needs {what}: install it with pip install 'curate-llm[perplexity]'")


@functools.lru_cache(maxsize=64)
def _model_problem(path: str, size: int, mtime_ns: int) -> str | None:
    """What :func:`~curate.stages.filters.lm_header.check_model_file` finds wrong (None: nothing); per
    version of the file, as every partition builds the chain again."""
    from curate.stages.filters.lm_header import ModelFileError, check_model_file

    try:
        check_model_file(path)
    except ModelFileError as e:
        return str(e)
    except OSError as e:
        return f"cannot be read ({e.strerror or e})"
    return None


def check_model(path: str) -> None:
    """The model's header, before any work (no KenLM needed): one line naming the file."""
    st = os.stat(path)
    problem = _model_problem(os.path.abspath(path), st.st_size, st.st_mtime_ns)
    if problem:
        raise SettingsError(f"model {path}: {problem}")


def _cannot_load(what: str, path: str, e: Exception) -> str:
    detail = (str(e).strip().splitlines() or [type(e).__name__])[0][:300]
    return f"{what} {path}: cannot be loaded ({type(e).__name__}: {detail})"


@functools.lru_cache(maxsize=8)
def load_model(path: str):
    try:
        import kenlm
    except ImportError:
        raise _missing("KenLM (kenlm)") from None
    try:
        return kenlm.Model(path)
    except Exception as e:  # what its header could not show: KenLM's own error, with the file named
        raise DataError(_cannot_load("model", path, e)) from None


@functools.lru_cache(maxsize=8)
def load_tokenizer(path: str):
    try:
        import sentencepiece
    except ImportError:
        raise _missing("SentencePiece (sentencepiece)") from None
    try:
        return sentencepiece.SentencePieceProcessor(model_file=path)
    except Exception as e:  # SentencePiece's RuntimeError names no file
        raise DataError(_cannot_load("tokenizer", path, e)) from None


@dataclass(frozen=True)
class Perplexity(Filter):
    """Perplexity of the document under a KenLM model of SentencePiece pieces (CCNet); larger is more
    surprising."""

    kind: ClassVar[str] = "perplexity"
    expensive: ClassVar[bool] = True
    threshold_range: ClassVar[tuple] = (0, None)
    model: str = field(default="", metadata={"help": "a KenLM model file (ARPA or binary)"})
    tokenizer: str | None = field(default=None, metadata={"help": "a SentencePiece model file (default: "
                                                                 "whitespace words)"})
    normalize: bool = field(default=True, metadata={"help": "normalise lines as CCNet does before scoring"})

    def __post_init__(self):
        super().__post_init__()
        for name in ("model", "tokenizer"):
            path = getattr(self, name)
            if name == "model" and not path:
                raise SettingsError("model must name a KenLM model file")
            if path is not None and not os.path.isfile(path):
                raise SettingsError(f"{name}: no such file {path!r}")
        if not isinstance(self.normalize, bool):
            raise SettingsError(f"normalize must be true or false; got {self.normalize!r}")
        # here, where settings are read (job load, --dry-run), not when the first document reaches
        # the filter after the stages before it ran; KenLM loads the model only then (it may be GBs)
        check_model(self.model)
        for module, what in (("kenlm", "KenLM (kenlm)"), *((("sentencepiece", "SentencePiece (sentencepiece)"),)
                                                          if self.tokenizer else ())):
            import importlib.util

            if importlib.util.find_spec(module) is None:
                raise _missing(what)
        if self.tokenizer:  # small: opened here whole (once per process)
            try:
                load_tokenizer(self.tokenizer)
            except DataError as e:
                raise SettingsError(str(e)) from None

    def score_texts(self, t: Texts):
        lm = load_model(self.model)
        sp = load_tokenizer(self.tokenizer) if self.tokenizer else None
        out = np.empty(t.n, dtype=np.float64)
        for i, text in enumerate(t.arr.to_pylist()):
            out[i] = self.perplexity(text or "", lm, sp)
        return out

    def perplexity(self, text: str, lm, sp) -> float:
        log_score, length = 0.0, 0
        for line in text.split("\n"):
            line = normalize(line) if self.normalize else line.strip()
            if not line:
                continue
            pieces = sp.encode(line, out_type=str) if sp is not None else line.split()
            log_score += lm.score(" ".join(pieces), bos=True, eos=True)
            length += len(pieces) + 1
        if not length:
            return float("nan")
        exponent = -log_score / length
        # a model of absurd log probabilities: beyond a float, the most surprising there is
        return 10.0 ** exponent if exponent < FLOAT_EXPONENT else float("inf")
