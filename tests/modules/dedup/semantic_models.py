"""Encoders for the semantic dedup tests, built offline: nothing is downloaded.

``static_model``: model2vec's folder format (model.safetensors with ``embeddings``, tokenizer.json,
config.json) from a seeded random matrix and a WordLevel tokenizer trained on the texts given.
``tiny_bert``: a randomly initialised one-layer BERT saved with safetensors, and its WordPiece vocabulary.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

WORDS = ("river valley water sand stone sea plain people travel trade bread flour salt yeast oven crust "
         "library book member room study group quiet weekday sunday loan title online").split()


def texts_vocabulary(texts) -> list[str]:
    words = sorted({w for t in texts for w in t.lower().split()} | set(WORDS))
    return words


def static_model(folder, texts=(), dim: int = 32, seed: int = 0, vectors: np.ndarray | None = None) -> Path:
    """A model2vec-format static model whose vocabulary holds every word of ``texts`` (lower-cased)."""
    from safetensors.numpy import save_file
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    vocab = {"[UNK]": 0, "[PAD]": 1}
    for w in texts_vocabulary(texts):
        vocab.setdefault(w, len(vocab))
    tok = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tok.normalizer = normalizers.Lowercase()
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.save(str(folder / "tokenizer.json"))
    if vectors is None:
        vectors = np.random.default_rng(seed).standard_normal((len(vocab), dim)).astype(np.float32)
    save_file({"embeddings": vectors.astype(np.float32)}, str(folder / "model.safetensors"))
    (folder / "config.json").write_text(json.dumps({"model_type": "model2vec", "architectures": ["StaticModel"],
                                                    "normalize": True, "hidden_dim": int(vectors.shape[1])}))
    return folder


def tiny_bert(folder, texts=(), hidden: int = 32, seed: int = 0) -> Path:
    """A randomly initialised BERT (1 layer, ``hidden`` wide) with a WordPiece tokenizer, safetensors only."""
    import torch
    from transformers import BertConfig, BertModel, BertTokenizerFast

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *texts_vocabulary(texts)]
    (folder / "vocab.txt").write_text("\n".join(vocab) + "\n")
    BertTokenizerFast(vocab_file=str(folder / "vocab.txt")).save_pretrained(str(folder))
    torch.manual_seed(seed)
    config = BertConfig(vocab_size=len(vocab), hidden_size=hidden, num_hidden_layers=1, num_attention_heads=2,
                        intermediate_size=2 * hidden, max_position_embeddings=128)
    BertModel(config).eval().save_pretrained(str(folder), safe_serialization=True)
    return folder
