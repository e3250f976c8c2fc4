"""The dataset contract: reading and writing document datasets.

A document dataset is a Dask DataFrame with at least ``id`` (string, unique, stable across re-runs)
and ``text`` (string), plus metadata columns (``url``, ``source``, ``language``, ...).

Reading (``read_dataset``) takes files, directories or globs of JSONL (``.jsonl``, ``.jsonl.gz``,
``.jsonl.zst``) or Parquet. Every frame it returns carries two internal columns, ``_reason`` and
``_detail``, that are NA for good rows. With ``on_error="skip"`` a bad input line becomes a row whose
``_reason`` says why (``invalid_json``, ``invalid_utf8``, ``not_an_object``, ``missing_text``, ``bad_type``
for a text that is not a string, ``bad_id`` for an id that is not one, ``too_large`` for a document
beyond the per-document memory budget, ``corrupt_file`` for a Parquet file that cannot be read: one
record naming it) and whose ``_detail`` names the file and line (row); with ``on_error="raise"`` it
fails the run with that same line. Types are checked per Parquet file, before rows are built.
Stages mark the rows they drop the same way (:func:`mark_dropped`).

Writing (``write_dataset``) produces one directory per stage::

    part-00000.parquet ...     one file per partition, each written to a temp name then renamed
    _rejects/part-00000.parquet  rows with a _reason (only partitions that had any), in the side
                                 folder beside the stage's (OUT.side/, see curate.stages.output)
    _manifest.json              stage, settings, input, counts in/out/dropped by reason, schema, timings
    _SUCCESS                   empty, written last; readers refuse a directory without it

A generated id (when the input has none) is ``<file>:<byte offset of the line>``, the file named
relative to the input spec that found it: stable across re-runs, independent of the block size and
of the other inputs.
"""

from __future__ import annotations

import glob as globlib  # noqa: F401 (callers ask dataset.globlib.has_magic)

# the package's parts, one concern each; their public names are importable from here
from curate.stages.dataset.budget import (
    DOCUMENT_SHARE,
    SCHEMA_LINE_LIMIT,
    document_budget,
    format_size,
    worker_memory_limit,
)
from curate.stages.dataset.checks import TooLarge, _column_problem
from curate.stages.dataset.contract import (
    DETAIL,
    INTERNAL,
    JSONL_SUFFIXES,
    MANIFEST,
    PARQUET_SUFFIXES,
    REASON,
    REJECTS,
    SCHEMA_PEEK,
    SCHEMA_SAMPLE,
    STRING,
    SUCCESS,
)
from curate.stages.dataset.discover import (
    _glob_root,
    _kind,
    expand_inputs,
    expand_named,
    input_identity,
    is_complete,
    is_url,
    open_input,
    read_manifest,
    url_fs,
)
from curate.stages.dataset.frames import mark_dropped, split_rejects
from curate.stages.dataset.pieces import Piece, parquet_source, plan_pieces
from curate.stages.dataset.read import infer_meta, read_dataset, read_made, read_piece, read_pieces
from curate.stages.dataset.read_jsonl import _iter_jsonl
from curate.stages.dataset.write import (
    Made,
    atomic_write,
    detail_counts,
    finish_output,
    made_from,
    part_name,
    stage_output,
    stage_owner,
    write_dataset,
    write_json,
    write_partition,
)

__all__ = [
    "DETAIL", "DOCUMENT_SHARE", "INTERNAL", "JSONL_SUFFIXES", "MANIFEST", "Made", "PARQUET_SUFFIXES", "REASON", "REJECTS",
    "SCHEMA_LINE_LIMIT", "SCHEMA_PEEK", "SCHEMA_SAMPLE", "STRING", "SUCCESS", "Piece", "TooLarge", "_column_problem",
    "_glob_root", "_iter_jsonl", "_kind", "atomic_write", "detail_counts", "document_budget", "expand_inputs",
    "expand_named", "finish_output", "format_size", "infer_meta", "input_identity", "is_complete", "is_url",
    "made_from", "mark_dropped", "open_input", "parquet_source", "part_name", "plan_pieces", "read_dataset", "read_manifest",
    "read_made", "read_piece", "read_pieces", "split_rejects", "stage_output", "stage_owner", "url_fs",
    "worker_memory_limit",
    "write_dataset", "write_json", "write_partition",
]
