"""Step 1, ``embeddings``: every document's unit vector, an output of its own.

``OUT.side/_work/embeddings/part-NNNNN.parquet`` per input partition: ``doc`` (the document number, see
:mod:`curate.stages.dedup`), ``id``, ``weight`` (what the document already stands for:
``dup_cluster_size`` of an earlier dedup, else 1) and ``vector``, a fixed-size list of float32 (or
float16, ``--dtype``) of unit length (zero for a document without a token). Readable with pandas or
pyarrow; a later run given ``--embeddings DIR`` reads them instead of embedding again (same input, same
``--blocksize``: the parts must line up with the input partitions, which the ``clusters`` step checks).
"""

from __future__ import annotations

import os

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from curate.stages import dedup
from curate.stages.dedup import keep as keeping

VECTOR = "vector"
#: documents encoded at once by a static model (its batches are only a memory bound)
STATIC_BATCH = 4096


def vector_column(vectors: np.ndarray, dtype: str) -> pa.Array:
    """(n, dim) floats as one fixed-size list array of ``dtype``."""
    n, dim = vectors.shape
    values = pa.array(np.ascontiguousarray(vectors, dtype=np.dtype(dtype)).reshape(-1))
    return pa.FixedSizeListArray.from_arrays(values, dim) if n or dim else pa.array([], pa.list_(values.type, dim))


def vectors_of(table: pa.Table, column: str = VECTOR) -> np.ndarray:
    """The (n, dim) float32 matrix of a table's fixed-size list column."""
    col = table.column(column)
    dim = col.type.list_size
    if table.num_rows == 0:
        return np.zeros((0, dim), dtype=np.float32)
    flat = col.combine_chunks().flatten().to_numpy(zero_copy_only=False)
    return flat.astype(np.float32, copy=False).reshape(-1, dim)


def embed_frame(df, partition: int, encoder, dtype: str) -> pa.Table:
    """The embeddings table of input partition ``partition`` (rows not dropped upstream)."""
    pos = dedup.good_rows(df)
    texts = df["text"].iloc[pos].fillna("").astype(str).tolist()
    step = STATIC_BATCH if encoder.kind == "static" else max(1, encoder.batch_size) * 16
    vectors = np.zeros((len(texts), encoder.dim), dtype=np.float32)
    for start in range(0, len(texts), step):
        vectors[start:start + step] = encoder.encode(texts[start:start + step])
    return pa.table({
        "doc": pa.array(dedup.doc_numbers(partition, pos), pa.int64()),
        "id": pa.array(df["id"].iloc[pos].astype(str).tolist(), pa.string()),
        "weight": pa.array(keeping.weights(df, pos), pa.int64()),
        VECTOR: vector_column(vectors, dtype),
    })


def embed_task(inputs, i: int, folder, settings) -> dict:
    """Read input partition ``i``, embed it, write its part (the model is loaded once per process)."""
    from curate.stages.dedup.semantic import encoders

    encoder = encoders.load(os.path.abspath(settings.model), settings.model_stamp, settings.max_tokens,
                            settings.batch_size)
    table = embed_frame(inputs.read(i), i, encoder, settings.dtype)
    return dedup.save_table(table, folder, i)


def embedding_parts(folder) -> list[str]:
    """The part files of an embeddings folder (this run's step or ``--embeddings DIR``), in order."""
    return dedup.list_parts(folder)


def part_rows(paths) -> list[int]:
    """Rows of each part, from the Parquet footers."""
    return [pq.ParquetFile(p).metadata.num_rows for p in paths]


def part_dim(path: str) -> int:
    return pq.read_schema(path).field(VECTOR).type.list_size
