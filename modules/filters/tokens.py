"""Filters that need a tokenizer: token count (NeMo Curator's ``TokenCountFilter``) and tokenizer
fertility of source code (its ``TokenizerFertilityFilter``).

``tokenizer`` is a ``TOK`` as ``curate tokenize`` takes it (a Hugging Face directory or name, or
``tiktoken:ENCODING``), loaded once per worker process. Counts never include special tokens: the
text is encoded as the tokenize stage encodes it, so a ``token_count`` threshold means the same
number of tokens the Megatron files will hold (plus eod/bos). NeMo's ``TokenCountFilter`` calls
``tokenizer.encode``, which for most Hugging Face tokenizers adds special tokens (a bos, say).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

import numpy as np

from curate.stages.errors import SettingsError
from curate.stages.filters.base import Filter, Texts, ratio

#: documents per encode call
ENCODE_BATCH = 1000


def token_counts(spec: str, t: Texts) -> np.ndarray:
    from curate.stages.tokenize.load import load_tokenizer

    tok = load_tokenizer(spec)
    texts = t.arr.to_pylist()
    out = np.zeros(len(texts), dtype=np.float64)
    for start in range(0, len(texts), ENCODE_BATCH):
        seqs = tok.encode_sequences(texts[start:start + ENCODE_BATCH])
        out[start:start + len(seqs)] = [len(s) for s in seqs]
    return out


def check_loadable_in(chain) -> None:
    """Before any work (a job's preflight, ``--dry-run``): every hub tokenizer of a filter chain is in
    the cache or reachable, as tokenize checks its own (``check_spec`` in the settings checks the rest).
    Else an offline run refused it only after the stages before the filter had run."""
    from curate.stages.tokenize.load import check_loadable

    for f in chain:
        if isinstance(f, _TokenizerFilter):
            check_loadable(f.tokenizer)


@dataclass(frozen=True)
class _TokenizerFilter(Filter):
    expensive: ClassVar[bool] = True
    tokenizer: str = field(default="", metadata={
        "help": "TOK as in tokenize: Hugging Face directory or name, or tiktoken:ENCODING"})

    def __post_init__(self):
        super().__post_init__()
        if not self.tokenizer:
            raise SettingsError("tokenizer: a TOK is required (e.g. tiktoken:cl100k_base)")
        from curate.stages.tokenize.load import check_spec

        check_spec(self.tokenizer)


@dataclass(frozen=True)
class TokenCount(_TokenizerFilter):
    """Number of tokens (no special tokens added)."""

    kind: ClassVar[str] = "token_count"
    threshold_range: ClassVar[tuple] = (0, None)

    def score_texts(self, t: Texts):
        return token_counts(self.tokenizer, t)


@dataclass(frozen=True)
class CodeTokenizerFertility(_TokenizerFilter):
    """Characters per token; -1 for a document without tokens (NeMo's definition). Code the tokenizer
    splits into very short pieces (minified, base64, tables of numbers) scores low."""

    kind: ClassVar[str] = "code_tokenizer_fertility"
    threshold_range: ClassVar[tuple] = (None, None)
    min: float | None = 2.5

    def score_texts(self, t: Texts):
        return ratio(t.nchar, token_counts(self.tokenizer, t), empty=-1.0)
