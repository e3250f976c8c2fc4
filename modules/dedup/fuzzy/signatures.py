"""Steps 1-2 of fuzzy dedup: each input partition's MinHash signatures and shingle sets (the one step
that reads texts), then its LSH band keys."""

from __future__ import annotations

import numpy as np
import pandas as pd

from curate.stages import dedup
from curate.stages.dedup import keep as keeping
from curate.stages.dedup.fuzzy.settings import FuzzyDedupSettings


def signature_table(df: pd.DataFrame, partition: int, settings: FuzzyDedupSettings, where: str = ""):
    """The table of :func:`signatures_and_sets` alone."""
    return signatures_and_sets(df, partition, settings, where)[0]


def signatures_and_sets(df: pd.DataFrame, partition: int, settings: FuzzyDedupSettings, where: str = ""):
    """(table, values) for the documents of one input partition that have shingles: the Arrow table
    (doc, id, sig, key, weight, start, count) and the uint64 values of their shingle sets, one after
    the other in document order (``key``: the keep policy's, smaller is kept; ``weight``: what the
    document stands for; the set of a row is ``values[start:start + count]``, see
    :mod:`curate.stages.dedup.shingles`), computed in one pass over the shingles."""
    import pyarrow as pa

    from curate.stages.dataset import STRING
    from curate.stages.dedup import shingles

    pos = dedup.good_rows(df)
    sig, counts, values, offsets = shingles.signatures_and_sets(df["text"].iloc[pos], settings.num_perm, settings.seed,
                                                                settings.ngram, settings.shingle)
    keep = counts > 0
    offsets = np.r_[offsets[:-1][keep], offsets[-1]]  # documents without shingles have empty sets: no gap
    sig = np.ascontiguousarray(sig[keep])
    width = 4 * settings.num_perm
    arr = pa.FixedSizeBinaryArray.from_buffers(pa.binary(width), len(sig), [None, pa.py_buffer(sig.astype("<u4"))])
    ids = pa.array(df["id"].iloc[pos[keep]].astype(STRING).array)
    rows = pos[keep]
    key = keeping.keys(df, rows, keeping.parse(settings.keep), where or f"input partition {partition}")
    table = pa.table({"doc": pa.array(dedup.doc_numbers(partition, rows)), "id": ids, "sig": arr,
                      "key": pa.array(key, type=pa.float64()), "weight": pa.array(keeping.weights(df, rows)),
                      "start": pa.array(offsets[:-1] - offsets[0]), "count": pa.array(np.diff(offsets))})
    return table, values[offsets[0]:offsets[-1]]


def read_signatures(path: str, num_perm: int) -> tuple[np.ndarray, np.ndarray]:
    """(doc numbers, uint32 signatures (n, num_perm)) of one signatures part."""
    import pyarrow.parquet as pq

    table = pq.read_table(path, columns=["doc", "sig"])
    return table.column("doc").to_numpy(), _signatures(table.column("sig"), num_perm)


def _signatures(column, num_perm: int) -> np.ndarray:
    """uint32 (n, num_perm) of a ``sig`` column (fixed-size binary, little-endian)."""
    col = column.combine_chunks()
    if len(col) == 0:
        return np.zeros((0, num_perm), dtype=np.uint32)
    flat = np.frombuffer(col.buffers()[1], dtype="<u4")
    return flat[col.offset * num_perm:(col.offset + len(col)) * num_perm].reshape(-1, num_perm)


def buckets_of(doc: np.ndarray, sig: np.ndarray, bands: int, rows: int) -> pd.DataFrame:
    """(bucket, doc): one row per document and band (``bands`` x ``rows`` resolved on the client)."""
    from curate.stages.dedup.lsh import band_keys

    keys = band_keys(sig, bands, rows)
    return pd.DataFrame({"bucket": keys.ravel(), "doc": np.repeat(doc.astype(np.int64), bands)})


def _signatures_task(df, i, folder, sets_folder, settings, where="", buckets=None):
    """Signatures part ``i`` and, beside it, the partition's shingle sets (``sets_folder``) and, given
    ``buckets`` (folder, part number, bands, rows), its LSH band keys: one task, not two per partition."""
    from curate.stages.dedup import shingles

    table, values = signatures_and_sets(df, i, settings, where)
    record = shingles.write_sets(sets_folder.out, f"{sets_folder.rel}/{shingles.part_name(i)}", values)
    stats = dedup.save_table(table, folder, i)
    stats["outputs"] = stats.get("outputs", []) + [record]  # no rows: a raw file (curate verify counts Parquet's)
    stats["set_values"] = len(values)
    if buckets is not None:
        where_to, part, bands, rows = buckets
        sig = _signatures(table.column("sig"), settings.num_perm)
        keys = dedup.save_part(buckets_of(table.column("doc").to_numpy(), sig, bands, rows), where_to, part)
        stats["outputs"] += keys.get("outputs", [])
        stats["bucket_rows"] = keys["rows"]
    return stats
