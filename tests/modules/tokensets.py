"""Token sets made by hand for the pack and shards tests: exactly the ids a test wants, in pairs
written through the output abstraction with a manifest shaped like ``curate tokenize``'s."""

from __future__ import annotations

import hashlib
import json

import numpy as np

from curate.stages.output import Output
from curate.stages.tokenize import megatron


def make_token_set(folder, pairs, vocab_size=1000, eod_id=None, bos_id=None, add_bos=False, append_eod=False,
                   dtype=None, prefix="part", sets=None, tokenizer=None, docs=True):
    """``pairs``: a list (one per pair) of lists of documents (lists of ids, stored as given).
    Document k of pair P has the id ``P-k`` in its sidecar; ``docs=False`` writes a token set as
    curate did before sidecars."""
    import pyarrow as pa

    from curate.stages.tokenize.docs import docs_name, write_table

    dtype = np.dtype(dtype or megatron.token_dtype(vocab_size))
    unit = "" if prefix == "part" else prefix
    out = Output.at(folder, unit)
    out.begin({"kind": "stage", "stage": "tokenize", "job": None})
    records, files = [], []
    for i, documents in enumerate(pairs):
        set_name = sets[i] if sets else None
        name = f"{set_name if set_name and prefix == 'part' else prefix}_{i:05d}"
        lengths = np.array([len(d) for d in documents], dtype=np.int64)
        flat = (np.concatenate([np.asarray(d, dtype=np.int64) for d in documents]) if documents
                else np.zeros(0, np.int64))
        records.append(out.write_bytes(name + ".bin", flat.astype(dtype.newbyteorder("<")).tobytes()))
        records.append(out.write_bytes(name + ".idx", megatron.index_bytes(lengths, dtype)))
        files.append({"name": name, "set": set_name, "partition": i, "documents": len(documents),
                      "tokens": int(lengths.sum()), "bytes": int(lengths.sum()) * dtype.itemsize})
        if docs:
            ids = pa.array([f"{name}-{k}" for k in range(len(documents))], pa.string())
            records.append(write_table(out, docs_name(name), pa.table({"id": ids})))
            files[-1].update(docs=records[-1]["path"], docs_xxh3_128=records[-1]["xxh3_128"])
    fp = hashlib.sha256(json.dumps([pairs, vocab_size, eod_id, bos_id, add_bos, append_eod, str(dtype)],
                                   default=str).encode()).hexdigest()[:16]
    manifest = {"stage": "tokenize", "owner": {"kind": "stage", "stage": "tokenize", "job": None},
                "fingerprint": fp, "vocab_size": vocab_size, "dtype": str(dtype), "eod_id": eod_id,
                "bos_id": bos_id, "add_bos": add_bos, "append_eod": append_eod, "files": files,
                "tokenizer": {"name": tokenizer}, **({"docs_columns": ["id"]} if docs else {})}
    out.finish(manifest, records)
    return str(folder)
