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
from curate.stages.settings import settings_dict

log = logging.getLogger(__name__)


# --------------------------------------------------------------------------- input discovery


# --------------------------------------------------------------------------- reading


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
