"""Token sets made by hand for the pack and shards tests: exactly the ids a test wants, in pairs
written through the output abstraction with a manifest shaped like ``curate tokenize``'s."""

from __future__ import annotations

import hashlib
import json

import numpy as np

from curate.stages.output import Output
from curate.stages.tokenize import megatron


def make_token_set(folder, pairs, vocab_size=1000, eod_id=None, bos_id=None, add_bos=False, append_eod=False,
                   dtype=None, prefix="part", sets=None, tokenizer=None):
    """``pairs``: a list (one per pair) of lists of documents (lists of ids, stored as given)."""
    dtype = np.dtype(dtype or megatron.token_dtype(vocab_size))
    unit = "" if prefix == "part" else prefix
    out = Output.at(folder, unit)
    out.begin({"kind": "stage", "stage": "tokenize", "job": None})
    records, files = [], []
    for i, docs in enumerate(pairs):
        set_name = sets[i] if sets else None
        name = f"{set_name if set_name and prefix == 'part' else prefix}_{i:05d}"
        lengths = np.array([len(d) for d in docs], dtype=np.int64)
        flat = np.concatenate([np.asarray(d, dtype=np.int64) for d in docs]) if docs else np.zeros(0, np.int64)
        records.append(out.write_bytes(name + ".bin", flat.astype(dtype.newbyteorder("<")).tobytes()))
        records.append(out.write_bytes(name + ".idx", megatron.index_bytes(lengths, dtype)))
        files.append({"name": name, "set": set_name, "partition": i, "documents": len(docs),
                      "tokens": int(lengths.sum()), "bytes": int(lengths.sum()) * dtype.itemsize})
    fp = hashlib.sha256(json.dumps([pairs, vocab_size, eod_id, bos_id, add_bos, append_eod, str(dtype)],
                                   default=str).encode()).hexdigest()[:16]
    manifest = {"stage": "tokenize", "owner": {"kind": "stage", "stage": "tokenize", "job": None},
                "fingerprint": fp, "vocab_size": vocab_size, "dtype": str(dtype), "eod_id": eod_id,
                "bos_id": bos_id, "add_bos": add_bos, "append_eod": append_eod, "files": files,
                "tokenizer": {"name": tokenizer}}
    out.finish(manifest, records)
    return str(folder)
