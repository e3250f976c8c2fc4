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
import json
import logging
import os
import socket
import time

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
from curate.stages.dataset.read_jsonl import (
    _iter_jsonl as _iter_jsonl,
    _read_jsonl_piece as _read_jsonl_piece,
)
from curate.stages.dataset.read_parquet import (
    _read_parquet_piece as _read_parquet_piece,
    _schema_sample as _schema_sample,
)
from curate.stages.errors import DataError
from curate.stages.settings import IOSettings, parse_bytes, settings_dict

log = logging.getLogger(__name__)


# --------------------------------------------------------------------------- input discovery


# --------------------------------------------------------------------------- reading


def read_dataset(specs, io_settings: IOSettings | None = None, rejects_dir: str | None = None):
    """A Dask DataFrame over the inputs, one partition per piece (``dd.from_map``)."""
    import dask.dataframe as dd

    io_settings = io_settings or IOSettings()
    files = expand_named(specs, allow_incomplete=io_settings.allow_incomplete)
    pieces = plan_pieces(files, parse_bytes(io_settings.blocksize, "blocksize"))
    schema = infer_meta(pieces, io_settings)
    # every partition is conformed to the schema (``schema=``); ``meta=`` only tells Dask what to expect
    return dd.from_map(
        read_piece, pieces, io_settings=io_settings, schema=schema, meta=schema, enforce_metadata=False,
        label="read", divisions=[None] * (len(pieces) + 1),
    )


def infer_meta(pieces: list[Piece], io_settings: IOSettings, max_pieces: int = 16) -> pd.DataFrame:
    """The dataset's schema: from the first readable Parquet file, or from up to ``SCHEMA_SAMPLE``
    records of the first JSONL pieces that have any (an empty first file does not decide the schema).

    A Parquet file whose footer cannot be read fails here naming it, or with ``on_error="skip"`` is
    passed over (``read_piece`` makes it one reject record)."""
    first = pieces[0]
    if first.kind == "parquet":
        import pyarrow.parquet as pq

        paths = list(dict.fromkeys(p.path for p in pieces if p.kind == "parquet"))[:max_pieces]
        for path in paths:
            try:
                schema = pq.ParquetFile(parquet_source(path)).schema_arrow
            except Exception as e:
                if io_settings.on_error != "skip":
                    raise DataError(f"{path}: corrupt_file: cannot read Parquet: {_one_line(e)} "
                                    "(use --on-error skip to make it a reject record)") from None
                continue
            return _standardise(_schema_sample(schema, io_settings), first, io_settings, meta=None).iloc[:0]
        return _standardise(_records_frame([]), first, io_settings, meta=None).iloc[:0]
    records = []
    limit = _explicit_budget(io_settings) or SCHEMA_LINE_LIMIT
    files = list(dict.fromkeys(p.path for p in pieces))[:max_pieces]
    starts = {}
    for p in pieces:
        starts.setdefault(p.path, p)
    known: set | None = None
    for path in files:
        # the first file with records decides the schema; every other file's first records add only the
        # columns that file alone has (a key that first appears in the third file must not vanish
        # silently), while a known column keeps its type (a later file that changes it is named)
        budget = SCHEMA_SAMPLE if known is None else SCHEMA_PEEK
        taken = 0
        for _, _, _, rec in _iter_jsonl(starts[path], limit):
            if isinstance(rec, dict) and _record_problem(rec, io_settings) is None:
                rec = _converted(rec, io_settings)
                if known is not None:
                    rec = {k: v for k, v in rec.items() if k not in known}
                if rec:
                    records.append(rec)
                taken += 1
                if taken >= budget:
                    break
        if records and known is None:
            known = {k for r in records for k in r}
    return _standardise(_records_frame(records), first, io_settings, meta=None).iloc[:0]


def read_piece(piece: Piece, io_settings: IOSettings, schema: pd.DataFrame | None = None) -> pd.DataFrame:
    """Read one piece into a pandas frame with the dataset's schema (pure apart from reading the file)."""
    if piece.kind == "parquet":
        return _read_parquet_piece(piece, io_settings, schema)
    return _read_jsonl_piece(piece, io_settings, schema)


# what the reader checks before it builds frames: a document's type, its id's type and its size


# --------------------------------------------------------------------------- marking drops


# --------------------------------------------------------------------------- writing


def part_name(i: int, fmt: str) -> str:
    return f"part-{i:05d}.{'parquet' if fmt == 'parquet' else 'jsonl'}"


def atomic_write(path: str, write) -> None:
    """Local files that are not part of an output (see :func:`curate.stages.output.atomic_write`)."""
    from curate.stages.output import atomic_write as write_atomically

    write_atomically(path, write)


def write_json(path: str, obj) -> None:
    def _w(p):
        with open(p, "w", encoding="utf-8") as f:
            json.dump(obj, f, indent=2, sort_keys=False, default=str)
            f.write("\n")

    atomic_write(path, _w)


def stage_output(ctx, unit: str = ""):
    """The :class:`curate.stages.output.Output` a stage writes (``ctx.output``)."""
    from curate.stages.output import Output

    return Output.at(ctx.output, unit)


def stage_owner(ctx, stage: str) -> dict:
    return getattr(ctx, "owner", None) or {"kind": "stage", "stage": stage}


def write_partition(df: pd.DataFrame, i: int, out, fmt: str, reject_columns=None, run: str = "",
                    count_details: tuple[str, ...] = ()) -> dict:
    """Write partition ``i`` (kept rows, and rejected rows into _rejects/) through ``out``, journaled;
    return its counts and file records. For the reasons in ``count_details`` the rejected rows are
    also counted per ``_detail`` (``select``'s failed clause: a few distinct values, unlike the
    file and line of a reader's reject)."""
    kept, rejected = split_rejects(df)
    key = f"part-{i:05d}"
    names = [part_name(i, fmt)] + ([f"{REJECTS}/{part_name(i, fmt)}"] if len(rejected) else [])
    out.intend(key, names)
    files = [out.write_frame(names[0], kept, fmt)]
    dropped = {}
    if len(rejected):
        cols = [c for c in rejected.columns if reject_columns is None or c in reject_columns or c in INTERNAL]
        files.append(out.write_frame(names[1], rejected[cols], fmt))
        dropped = {str(k): int(v) for k, v in rejected[REASON].value_counts().items()}
    stats = {"partition": i, "in": len(df), "out": len(kept), "dropped": dropped}
    if count_details:
        stats["details"] = detail_counts(rejected, count_details)
    out.record_done(key, run, files, stats=stats)
    return {**stats, "outputs": files}


def detail_counts(rejected: pd.DataFrame, reasons) -> dict[str, dict[str, int]]:
    """{reason: {detail: rows}} of the rejected rows with one of ``reasons``."""
    if not len(rejected) or DETAIL not in rejected.columns:
        return {}
    mine = rejected[rejected[REASON].isin(list(reasons))]
    counts: dict[str, dict[str, int]] = {}
    for (reason, detail), n in mine.groupby([REASON, DETAIL], dropna=False, observed=True).size().items():
        counts.setdefault(str(reason), {})["" if pd.isna(detail) else str(detail)] = int(n)
    return counts


def write_dataset(ddf, ctx, *, stage: str, settings, reject_columns=None, extra: dict | None = None,
                  records: list[dict] | None = None, count_details: tuple[str, ...] = ()) -> dict:
    """Write every partition (one task each), then manifest.json, then _SUCCESS.

    Partitions a killed run of the same settings finished (journal records of this fingerprint whose
    files are all there) are not recomputed. ``records`` are further files the stage wrote into its
    output (dedup intermediates), listed in the manifest with the parts.
    """
    import dask

    started = time.time()
    out = stage_output(ctx)
    out.begin(stage_owner(ctx, stage))
    fmt = ctx.io.format
    parts = ddf.to_delayed()
    listing = out.listing()
    done = {}
    if not ctx.force:
        for i in range(len(parts)):
            rec = out.finished(f"part-{i:05d}", ctx.fingerprint, listing)
            if rec is not None:
                done[i] = {**rec["stats"], "outputs": rec["files"]}
    if done:
        log.info("%s: %d of %d partitions already written; skipped", ctx.output, len(done), len(parts))
    tasks = [
        dask.delayed(write_partition, pure=False)(part, i, out, fmt, reject_columns, ctx.fingerprint,
                                                   count_details, dask_key_name=f"write-{stage}-{i:05d}")
        for i, part in enumerate(parts) if i not in done
    ]
    stats = sorted([*done.values(), *ctx.run_compute(*tasks)], key=lambda s: s["partition"])
    schema = {c: str(t) for c, t in ddf._meta.dtypes.items() if c not in INTERNAL}
    return finish_output(ctx, stage=stage, settings=settings, partition_stats=stats, schema=schema,
                         started=started, extra=extra, records=records)


def finish_output(ctx, *, stage: str, settings, partition_stats: list[dict], schema: dict | None,
                  started: float, extra: dict | None = None, records: list[dict] | None = None,
                  unit: str = "", run: str | None = None) -> dict:
    """Write manifest.json (listing every file with size and checksum) and then ``_SUCCESS``."""
    dropped: dict[str, int] = {}
    details: dict[str, dict[str, int]] = {}
    for s in partition_stats:
        for k, v in s.get("dropped", {}).items():
            dropped[k] = dropped.get(k, 0) + v
        for reason, per in s.get("details", {}).items():
            mine = details.setdefault(reason, {})
            for detail, v in per.items():
                mine[detail] = mine.get(detail, 0) + v
    finished = time.time()
    if getattr(ctx, "started", None):
        started = min(started, ctx.started)
    manifest = {
        "stage": stage,
        "owner": stage_owner(ctx, stage),
        "fingerprint": ctx.fingerprint,
        "settings": settings_dict(settings),
        "io": settings_dict(ctx.io),
        "input": list(ctx.input),
        "output": ctx.output if "://" in ctx.output else os.path.abspath(ctx.output),
        "counts": {
            "in": int(sum(s.get("in", 0) for s in partition_stats)),
            "out": int(sum(s.get("out", 0) for s in partition_stats)),
            "dropped": dict(sorted(dropped.items())),
            **({"details": {r: dict(sorted(d.items(), key=lambda kv: (-kv[1], kv[0])))
                            for r, d in sorted(details.items())}} if details else {}),
        },
        "partitions": len(partition_stats),
        "schema": schema,
        "timings": {
            "started": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(started)) + "Z",
            "finished": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(finished)) + "Z",
            "seconds": round(finished - started, 3),
        },
        "host": socket.gethostname(),
    }
    if extra:
        manifest.update(extra)
    files = [f for s in partition_stats for f in s.get("outputs", [])]
    return stage_output(ctx, unit).finish(manifest, files + list(records or []), run=run)
