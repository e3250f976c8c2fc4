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
    _rejects/part-00000.parquet  rows with a _reason (only partitions that had any)
    manifest.json              stage, settings, input, counts in/out/dropped by reason, schema, timings
    _SUCCESS                   empty, written last; readers refuse a directory without it

A generated id (when the input has none) is ``<file>:<byte offset of the line>``, the file named
relative to the input spec that found it: stable across re-runs, independent of the block size and
of the other inputs.
"""

from __future__ import annotations

import glob as globlib
import logging

import numpy as np
import pandas as pd

from curate.stages.dataset.budget import (
    DOCUMENT_SHARE as DOCUMENT_SHARE,
    SCHEMA_LINE_LIMIT as SCHEMA_LINE_LIMIT,
    _explicit_budget as _explicit_budget,
    document_budget as document_budget,
    format_size as format_size,
    worker_memory_limit as worker_memory_limit,
)
from curate.stages.dataset.checks import (
    TooLarge as TooLarge,
    _column_problem as _column_problem,
    _converted as _converted,
    _is_string_type as _is_string_type,
    _one_line as _one_line,
    _record_problem as _record_problem,
)
from curate.stages.dataset.contract import (
    DETAIL as DETAIL,
    INTERNAL as INTERNAL,
    JSONL_SUFFIXES as JSONL_SUFFIXES,
    MANIFEST as MANIFEST,
    PARQUET_SUFFIXES as PARQUET_SUFFIXES,
    REASON as REASON,
    REJECTS as REJECTS,
    SCHEMA_PEEK as SCHEMA_PEEK,
    SCHEMA_SAMPLE as SCHEMA_SAMPLE,
    STRING as STRING,
    SUCCESS as SUCCESS,
)
from curate.stages.dataset.discover import (
    _kind as _kind,
    expand_inputs as expand_inputs,
    expand_named as expand_named,
    input_identity as input_identity,
    is_complete as is_complete,
    is_url as is_url,
    open_input as open_input,
    read_manifest as read_manifest,
    url_fs as url_fs,
)
from curate.stages.dataset.frames import (
    _records_frame as _records_frame,
    _reject_row as _reject_row,
    _standardise as _standardise,
    _with_rejects as _with_rejects,
    mark_dropped as mark_dropped,
    split_rejects as split_rejects,
)
from curate.stages.dataset.pieces import (
    Piece as Piece,
    parquet_source as parquet_source,
    plan_pieces as plan_pieces,
)
from curate.stages.dataset.read import (
    infer_meta as infer_meta,
    read_dataset as read_dataset,
    read_piece as read_piece,
)
from curate.stages.dataset.read_jsonl import (
    _iter_jsonl as _iter_jsonl,
    _read_jsonl_piece as _read_jsonl_piece,
)
from curate.stages.dataset.read_parquet import (
    _read_parquet_piece as _read_parquet_piece,
    _schema_sample as _schema_sample,
)
from curate.stages.dataset.write import (
    atomic_write as atomic_write,
    detail_counts as detail_counts,
    finish_output as finish_output,
    part_name as part_name,
    stage_output as stage_output,
    stage_owner as stage_owner,
    write_dataset as write_dataset,
    write_json as write_json,
    write_partition as write_partition,
)

log = logging.getLogger(__name__)


# --------------------------------------------------------------------------- input discovery


# --------------------------------------------------------------------------- reading


# what the reader checks before it builds frames: a document's type, its id's type and its size


# --------------------------------------------------------------------------- marking drops


# --------------------------------------------------------------------------- writing


