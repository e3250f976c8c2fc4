"""A batch of token sequences framed as Megatron sequences: ``[bos] tokens [eod]``, range-checked.

Pure numpy: no tokenizer, no files. Every id is checked against the vocabulary and the dtype before
anything is written, so a wrong tokenizer or dtype fails naming the document instead of wrapping
around silently.
"""

from __future__ import annotations

import itertools

import numpy as np


class TokenRangeError(ValueError):
    """A token id that does not fit: ``document`` is its position in the batch."""

    def __init__(self, document: int, detail: str):
        super().__init__(f"document {document}: {detail}")
        self.document = document
        self.detail = detail


def frame_documents(lists, dtype, vocab_size: int, eod_id: int | None = None, bos_id: int | None = None,
                    keep_empty: bool = False):
    """Token sequences of a batch (lists or integer arrays) -> (tokens as ``dtype``, one length per
    non-empty document, mask of the empty documents).

    Each non-empty document becomes ``[bos] ids [eod]``. With ``keep_empty`` an empty document is a
    sequence too (``[bos] [eod]``, possibly of length 0) and none is reported empty. Raises :class:`TokenRangeError` when an
    id is negative, ``>= vocab_size`` or does not fit ``dtype``: never a silent wrap-around.
    """
    dtype = np.dtype(dtype)
    raw = np.fromiter(map(len, lists), dtype=np.int64, count=len(lists))
    if len(lists) and all(isinstance(x, np.ndarray) for x in lists):
        flat = np.concatenate(lists)
    else:
        flat = np.fromiter(itertools.chain.from_iterable(lists), dtype=np.int64, count=int(raw.sum()))
    limit = min(vocab_size, int(np.iinfo(dtype).max) + 1)
    if len(flat) and (int(flat.max()) >= limit or int(flat.min()) < 0):
        pos = int(np.argmax((flat >= limit) | (flat < 0)))
        doc = int(np.searchsorted(np.cumsum(raw), pos, side="right"))
        raise TokenRangeError(doc, f"token id {int(flat[pos])} is outside [0, {limit}) "
                                   f"(vocabulary size {vocab_size}, dtype {dtype})")
    empty = raw == 0 if not keep_empty else np.zeros(len(raw), dtype=bool)
    extra = (bos_id is not None) + (eod_id is not None)
    lengths = raw[~empty] + extra
    if extra == 0:
        return flat.astype(dtype), lengths, empty
    out = np.empty(int(lengths.sum()), dtype=dtype)
    ends = np.cumsum(lengths)
    starts = ends - lengths
    content = np.ones(len(out), dtype=bool)
    if bos_id is not None:
        out[starts] = bos_id
        content[starts] = False
    if eod_id is not None:
        out[ends - 1] = eod_id
        content[ends - 1] = False
    out[content] = flat
    return out, lengths, empty
