"""Local encoders: a static model (model2vec's folder) or a Hugging Face encoder, both to unit vectors.

A **static model** is a matrix of token vectors: ``model.safetensors`` holding ``embeddings`` (model2vec;
``embedding.weight`` in sentence-transformers' static layout), optionally ``weights`` (per token) and
``mapping`` (token id -> row, vocabulary quantisation), ``tokenizer.json`` and ``config.json``. A
document's vector is the mean of its tokens' vectors, exactly as ``model2vec.StaticModel.encode``: no
special tokens, the unknown token left out, at most ``max_tokens`` tokens (the text first cut to
``max_tokens`` x the median token length in characters, as model2vec does), zero when no token is left.
model2vec normalises only when the config says ``normalize``; curate always does (every comparison is
a cosine), so the result is model2vec's normalised vector. Our reader (safetensors + tokenizers, one
``np.add.reduceat`` per batch) needs no model2vec and is measured against it by ``jobs/bench_semantic.py``.

A **Hugging Face encoder** (``config.json`` with a ``model_type``, ``*.safetensors``, a tokenizer) runs
with ``transformers.AutoModel`` on the CPU: mean pooling over the attention mask of the last hidden
state, ``max_tokens`` tokens, ``batch_size`` documents per forward pass (sorted by length, so padding is
short). Weights only from safetensors (``use_safetensors=True``), never remote code, never a hub.
"""

from __future__ import annotations

import functools
import json
import os
import struct

import numpy as np

from curate.stages.errors import SettingsError

TOKENIZER_FILES = ("tokenizer.json", "vocab.txt", "tokenizer.model", "vocab.json")
STATIC_KEYS = ("embeddings", "embedding.weight")


def _safetensors_files(path: str) -> list[str]:
    return sorted(f for f in os.listdir(path) if f.endswith(".safetensors"))


def tensor_names(file: str) -> list[str]:
    """The tensor names of a safetensors file, from its JSON header (the weights are not read)."""
    with open(file, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        if n > 100 << 20:
            raise SettingsError(f"{file}: not a safetensors file (header of {n} bytes)")
        header = json.loads(f.read(n))
    return [k for k in header if k != "__metadata__"]


def model_kind(path: str) -> str:
    """``static`` or ``transformer``; a SettingsError naming what the folder lacks when it is neither."""
    if not os.path.isdir(path):
        raise SettingsError(f"model: no such directory {path!r} (a local encoder folder)")
    files = _safetensors_files(path)
    tokenizers = [f for f in TOKENIZER_FILES if os.path.isfile(os.path.join(path, f))]
    missing = ([] if files else ["a *.safetensors file (weights; pickled .bin weights are never loaded)"]) + \
              ([] if tokenizers else ["a tokenizer (tokenizer.json, vocab.txt, tokenizer.model or vocab.json)"])
    if missing:
        raise SettingsError(f"model {path}: no {' and no '.join(missing)}")
    try:
        names = tensor_names(os.path.join(path, files[0]))
    except (OSError, ValueError, struct.error) as e:
        raise SettingsError(f"model {path}: {files[0]} is not readable safetensors ({e})") from None
    if any(k in names for k in STATIC_KEYS):
        if "tokenizer.json" not in tokenizers:
            raise SettingsError(f"model {path}: a static model needs tokenizer.json")
        return "static"
    try:
        with open(os.path.join(path, "config.json"), encoding="utf-8") as f:
            config = json.load(f)
    except FileNotFoundError:
        raise SettingsError(f"model {path}: no config.json and no 'embeddings' tensor: neither a Hugging Face "
                            "encoder nor a static model") from None
    except (OSError, ValueError) as e:
        raise SettingsError(f"model {path}: config.json is not readable JSON ({e})") from None
    if not config.get("model_type"):
        raise SettingsError(f"model {path}: config.json has no model_type and {files[0]} no 'embeddings' tensor")
    return "transformer"


def stamp(path: str) -> str:
    """The model folder's stamp: a changed model changes the fingerprint."""
    from curate.stages.paths import folder_stamp

    return folder_stamp(path)


def normalise(x: np.ndarray) -> np.ndarray:
    """Rows scaled to unit length (float32); a zero row stays zero."""
    x = np.asarray(x, dtype=np.float32)
    norm = np.linalg.norm(x, axis=1, keepdims=True)
    return x / np.where(norm > 0, norm, 1).astype(np.float32)


class StaticEncoder:
    """A static model's documents vectors (see the module doc)."""

    kind = "static"

    def __init__(self, path: str, max_tokens: int):
        from safetensors.numpy import load_file
        from tokenizers import Tokenizer

        tensors = load_file(os.path.join(path, "model.safetensors" if os.path.isfile(
            os.path.join(path, "model.safetensors")) else _safetensors_files(path)[0]))
        key = next(k for k in STATIC_KEYS if k in tensors)
        self.vectors = tensors[key].astype(np.float32)
        self.weights = tensors.get("weights")
        self.mapping = tensors.get("mapping")
        self.tokenizer = Tokenizer.from_file(os.path.join(path, "tokenizer.json"))
        self.tokenizer.no_padding()
        self.tokenizer.enable_truncation(max_tokens)
        self.max_tokens = max_tokens
        self.unk = _unk_id(self.tokenizer)
        vocab = self.tokenizer.get_vocab()
        self.median_chars = int(np.median([len(t) for t in vocab])) if vocab else 1
        self.dim = int(self.vectors.shape[1])

    def encode(self, texts: list[str]) -> np.ndarray:
        from scipy import sparse

        cut = self.max_tokens * self.median_chars
        encodings = self.tokenizer.encode_batch_fast([t[:cut] for t in texts], add_special_tokens=False)
        ids = [e.ids for e in encodings]
        if self.unk is not None:
            ids = [[t for t in x if t != self.unk] if self.unk in x else x for x in ids]
        counts = np.fromiter((len(x) for x in ids), dtype=np.int64, count=len(ids))
        flat = np.fromiter((t for x in ids for t in x), dtype=np.int64, count=int(counts.sum()))
        # the mean as one sparse product (documents x tokens, 1/count each): no (tokens x dim) temporary
        share = np.repeat(1.0 / np.maximum(counts, 1), counts).astype(np.float32)
        if self.weights is not None:
            share *= self.weights[flat].astype(np.float32)
        columns = flat if self.mapping is None else self.mapping[flat]
        indptr = np.concatenate([[0], np.cumsum(counts)])
        mean = sparse.csr_matrix((share, columns, indptr), shape=(len(ids), len(self.vectors)))
        out = np.asarray(mean @ self.vectors, dtype=np.float32)
        return normalise(out)


def _unk_id(tokenizer) -> int | None:
    """The unknown token's id (model2vec leaves it out: needed for word-level vocabularies)."""
    model = tokenizer.model
    if hasattr(model, "unk_token"):
        token = model.unk_token
        return None if token is None else tokenizer.token_to_id(token)
    return json.loads(tokenizer.to_str())["model"].get("unk_id")


class TransformerEncoder:
    """A Hugging Face encoder's mean-pooled last hidden state (see the module doc)."""

    kind = "transformer"

    def __init__(self, path: str, max_tokens: int, batch_size: int):
        from transformers import AutoModel, AutoTokenizer

        self.tokenizer = AutoTokenizer.from_pretrained(path, local_files_only=True, trust_remote_code=False)
        self.model = AutoModel.from_pretrained(path, local_files_only=True, trust_remote_code=False,
                                               use_safetensors=True).eval()
        self.max_tokens = max_tokens
        self.batch_size = batch_size
        self.dim = int(self.model.config.hidden_size)

    def encode(self, texts: list[str]) -> np.ndarray:
        import torch

        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        order = sorted(range(len(texts)), key=lambda i: (len(texts[i]), i))  # short padding per batch
        with torch.inference_mode():
            for start in range(0, len(order), self.batch_size):
                rows = order[start:start + self.batch_size]
                batch = self.tokenizer([texts[i] for i in rows], truncation=True, max_length=self.max_tokens,
                                       padding=True, return_tensors="pt")
                hidden = self.model(**batch).last_hidden_state.float()
                mask = batch["attention_mask"].unsqueeze(-1).to(hidden.dtype)
                pooled = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1)
                out[rows] = pooled.numpy()
        return normalise(out)


@functools.lru_cache(maxsize=2)
def load(path: str, model_stamp: str, max_tokens: int, batch_size: int):
    """The encoder of a folder, loaded once per process (and again when its files change: ``stamp``)."""
    if model_kind(path) == "static":
        return StaticEncoder(path, max_tokens)
    return TransformerEncoder(path, max_tokens, batch_size)
