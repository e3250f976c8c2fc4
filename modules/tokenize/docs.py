"""Document sidecars: which document every sequence, segment or token range of a token output is.

The formats are documented beside their writers: a tokenize pair's ``PREFIX_NNNNN.docs.parquet``
in ``writer.py``, a merged pair's in ``merge.py``, packed rows' ``_docs/`` in ``pack.py`` and token
shards' ``_docs/`` in ``shards.py``. They share the columns ``id`` (string, never null) and ``url``
(string, only when the tokenized dataset had a ``url`` column), are plain Parquet tables (zstd, no
pandas metadata) written through ``curate.stages.output.Output`` (journaled, XXH3-128 checksummed,
listed in the manifest) and are named by the manifest: a unit whose manifest has ``docs_columns``
has a sidecar for every data file, named in its ``files`` entry (``docs``). A manifest without
``docs_columns`` was written before sidecars existed.

This module holds what the writers, the consumers and ``verify`` share: the names, the schema,
reading a sidecar back checked against its checksum, and :func:`content_digest`, which identifies
a sidecar's rows independently of how Parquet encoded them (how ``verify`` checks that a merged
sidecar is the concatenation of its inputs).
"""

from __future__ import annotations

import io

import numpy as np

from curate.stages.errors import DataError

DOCS_SUFFIX = ".docs.parquet"
#: the folder of packed rows' and shards' sidecars: Parquet and ``np.load`` globs of the data files
#: (``DIR/*.parquet``, ``shard_train_*``) and Parquet dataset readers (which skip ``_`` paths) miss it
DOCS_DIR = "_docs"
ID_COLUMNS = ("id", "url")


def docs_name(pair: str) -> str:
    """A tokenize or merged pair's sidecar: ``PREFIX_NNNNN.docs.parquet`` beside ``.bin``/``.idx``."""
    return pair + DOCS_SUFFIX


def docs_dir_name(data_file: str) -> str:
    """Packed rows' or a shard's sidecar: ``_docs/<file name without its extension>.parquet``."""
    return f"{DOCS_DIR}/{data_file.rsplit('.', 1)[0]}.parquet"


def schema(columns, extra=()):
    """``columns`` (``id``, maybe ``url``) as strings, then ``extra`` (name, Arrow type) pairs."""
    import pyarrow as pa

    return pa.schema([(c, pa.string()) for c in columns] + list(extra))


def write_table(out, rel: str, table) -> dict:
    """Write a sidecar through ``out`` (an ``Output``); its record, with ``rows``."""
    import pyarrow.parquet as pq

    with out.open(rel) as f:
        pq.write_table(table, f, compression="zstd")
    return {**f.record, "rows": table.num_rows}


def read_checked(fs, path: str, checksum: str | None, rows: int | None, what: str):
    """(bytes, table) of the sidecar at ``path``; DataError naming it when it is missing, its
    XXH3-128 is not ``checksum``, it is not Parquet or it does not hold ``rows`` rows (``what`` says
    of what)."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    import xxhash

    try:
        data = fs.cat_file(path)
    except FileNotFoundError:
        raise DataError(f"{path}: missing: the document sidecar of {what}") from None
    if checksum and xxhash.xxh3_128_hexdigest(data) != checksum:
        raise DataError(f"{path}: checksum: XXH3-128 differs from its manifest (the document ids of {what} "
                        "changed since they were written)")
    try:
        table = pq.read_table(io.BytesIO(data))
    except (OSError, pa.ArrowException) as e:
        raise DataError(f"{path}: parse: not a readable Parquet file ({str(e).splitlines()[0][:200]})") from None
    if rows is not None and table.num_rows != rows:
        raise DataError(f"{path}: rows: {table.num_rows}, but {what} has {rows}")
    return data, table


def content_digest(table) -> str:
    """XXH3-128 of a table of string columns, whatever the Parquet encoding or row groups: per column, in
    order, its name, each value's UTF-8 length (little-endian int64, -1 for null) and the values'
    bytes. Equal for a slice of a concatenation and the table that was concatenated there."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import xxhash

    h = xxhash.xxh3_128()
    for name in table.column_names:
        col = table.column(name).combine_chunks().cast(pa.large_string())
        lengths = pc.binary_length(col).fill_null(-1).to_numpy(zero_copy_only=False).astype("<i8")
        h.update(name.encode() + b"\0")
        h.update(lengths.tobytes())
        if len(col) and col.buffers()[2] is not None:
            offsets = np.frombuffer(col.buffers()[1], dtype="<i8")[col.offset:col.offset + len(col) + 1]
            h.update(memoryview(col.buffers()[2])[int(offsets[0]):int(offsets[-1])])
    return h.hexdigest()
