"""Writing a stage's output: each partition's part and rejects through Output, then the manifest (counts by reason, schema, timings), then _SUCCESS."""

from __future__ import annotations

import json
import logging
import os
import re
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass

import pandas as pd

from curate.stages.dataset.contract import DETAIL, INTERNAL, REASON, REJECTS
from curate.stages.dataset.frames import split_rejects

# a task's arguments Dask need not search: defined beside delayed_call, named here as before
from curate.stages.dataset.task_args import Opaque as Opaque, unwrap as unwrap
from curate.stages.settings import settings_dict

log = logging.getLogger('curate.stages.dataset')


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
                    count_details: tuple[str, ...] = (), prepare=None) -> dict:
    """Write partition ``i`` (kept rows, and rejected rows into _rejects/) through ``out``, journaled;
    return its counts and file records. For the reasons in ``count_details`` the rejected rows are
    also counted per ``_detail`` (``select``'s failed clause: a few distinct values, unlike the
    file and line of a reader's reject). ``prepare(df) -> (df, side)``: the frame to write, and what
    the stage learns from the partition on the way (the filters' score sample), in the stats as ``side``."""
    side = None
    if prepare is not None:
        df, side = prepare(df)
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
    return {**stats, "outputs": files, **({"side": side} if prepare is not None else {})}


def _write_mapped(df, out, fmt, reject_columns, run, count_details, prepare, partition_info=None) -> dict:
    return write_partition(df, partition_info["number"], out, fmt, reject_columns, run, count_details, prepare)


def group_key(name: str, partitions: list[int]) -> str:
    """A task's key naming its partitions: ``NAME-00003``, or ``NAME-00012-00023`` for several (a killed
    worker's message names them: :class:`curate.app.errors.WorkerKilled`)."""
    first, last = partitions[0], partitions[-1]
    return f"{name}-{first:05d}" if len(partitions) == 1 else f"{name}-{first:05d}-{last:05d}"


def is_write_key(key) -> bool:
    """Whether a Dask task key is one of :func:`write_dataset`'s partition writes (its result: the
    partition's counts). Dask fuses the write with the tasks that make the partition and names the
    fused task after all of them: ``('read_parquet-clean-write-<token>', 3)``; a :class:`Made`
    partition's write is ``write-<stage>-00003``."""
    name = str(key[0] if isinstance(key, tuple) else key)
    return name.startswith("write-") or re.sub(r"-[0-9a-f]{32}$", "", name).split("-")[-1] == "write"


@dataclass(frozen=True)
class Made:
    """A stage's output partitions made by a function rather than read through a Dask DataFrame:
    partition ``i`` is ``make(*args[i])``, called inside its write task, so that making and writing a
    partition is one Dask task (a frame of delayed partitions is four: the task, Dask's container and
    alias tasks, and the write). ``args`` may hold delayed objects (they are computed first);
    ``meta`` is the partitions' schema."""

    make: Callable
    args: list
    meta: pd.DataFrame
    #: each partition's input bytes (:mod:`.groups`: how many partitions one task makes); None: not
    #: known, one task per partition
    sizes: tuple[int, ...] | None = None
    #: whether ``args`` may hold delayed objects; False: Dask is not made to search them (:class:`Opaque`)
    lazy: bool = True

    @property
    def npartitions(self) -> int:
        return len(self.args)

    @property
    def _meta(self) -> pd.DataFrame:  # as a Dask DataFrame's, for the manifest's schema
        return self.meta

    def then(self, fn: Callable, *extra, meta: pd.DataFrame) -> Made:
        """Partition ``i`` is ``fn(self's partition i, *extra)``, made in the same task."""
        return Made(_then, [(self.make, a, fn, extra) for a in self.args], meta, self.sizes, self.lazy)


def _then(make, args, fn, extra):
    return fn(make(*args), *extra)


def made_from(fn: Callable, items: list, meta: pd.DataFrame, sizes=None, **kwargs) -> Made:
    """As ``dd.from_map(fn, items, **kwargs)``: partition ``i`` is ``fn(items[i], **kwargs)``."""
    import functools

    make = functools.partial(fn, **kwargs) if kwargs else fn
    return Made(make, [(item,) for item in items], meta, tuple(sizes) if sizes is not None else None, lazy=False)


def _make_and_write_group(make, args, partitions, out, fmt, reject_columns, run, count_details, prepare,
                          combine=None):
    """A group's write results; with ``combine``, one collection (:func:`_collect`) whose sides are
    combined here, so that a collecting task merges FAN_IN sides of a bounded size whatever the
    groups' partitions (1M pages: 64 groups of 7 partitions' score samples in one task, 1.2 GB)."""
    # one partition at a time: a worker holds one partition of the group, never the group
    results = [write_partition(make(*a), i, out, fmt, reject_columns, run, count_details, prepare)
               for a, i in zip(unwrap(args), partitions)]
    return _collect(results, combine) if combine is not None else results


#: write results a collecting task merges: the client gathers one result per FAN_IN partitions
FAN_IN = 64


def _collect(results: list, combine) -> dict:
    """Write results (a partition's, a group's list of them, or earlier collections) as one: their
    stats, and their sides combined, in partition order."""
    stats, sides = [], []
    for r in [x for result in results for x in (result if isinstance(result, list) else [result])]:
        if "stats" in r:
            stats += r["stats"]
            sides.append(r["side"])
        else:
            sides.append(r.pop("side"))
            stats.append(r)
    return {"stats": stats, "side": combine(sides)}


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
                  records: list[dict] | None = None, count_details: tuple[str, ...] = (),
                  prepare=None, combine=None, on_side=None, dropped_columns: tuple[str, ...] = (),
                  docs_in: int | None = None) -> dict:
    """Write every partition (one task each), then _manifest.json, then _SUCCESS. ``ddf``: a Dask
    DataFrame, or :class:`Made` partitions.

    Partitions a killed run of the same settings finished (journal records of this fingerprint whose
    files are all there) are not recomputed. ``records`` are further files the stage wrote into its
    output (dedup intermediates), listed in the manifest with the parts.

    ``prepare`` (see :func:`write_partition`) with ``combine(sides) -> side``: the written partitions'
    sides are combined in tasks, ``FAN_IN`` at a time, and the client gets one, which ``on_side``
    receives before the manifest is written (the partitions resumed from a killed run have none);
    ``dropped_columns``: what ``prepare`` leaves out, not in the manifest's schema. ``docs_in``: the
    documents the stage read, where its partitions hold more rows than that (blend's copies).
    ``extra`` may be a function returning the dict, called once the partitions are written (what a
    computation started beside the writes found: :meth:`curate.stages.stage.StageContext.run_beside`).
    """
    import dask

    started = time.time()
    out = stage_output(ctx)
    out.begin(stage_owner(ctx, stage))
    fmt = ctx.io.format
    # a partition is made and written in one task (read, transform, write), several small ones a task
    # (Made partitions, by their bytes), so the scheduler and the client see few tasks and small results
    listing = out.listing()
    done = {}
    if not ctx.force:
        for i in range(ddf.npartitions):
            rec = out.finished(f"part-{i:05d}", ctx.fingerprint, listing)
            if rec is not None:
                done[i] = {**rec["stats"], "outputs": rec["files"]}
    if done:
        log.info("%s: %d of %d partitions already written; skipped", ctx.output, len(done), ddf.npartitions)
    todo = [i for i in range(ddf.npartitions) if i not in done]
    if isinstance(ddf, Made):
        # small partitions: several a task, by their bytes (:mod:`.groups`); the parts are the same
        from curate.stages.dataset.groups import TASK_BYTES, task_groups
        from curate.stages.dataset.task_args import delayed_call

        # unknown sizes: a task each, as before
        sizes = [ddf.sizes[i] for i in todo] if ddf.sizes is not None else [TASK_BYTES] * len(todo)
        tasks = []
        for run_ in task_groups(sizes, getattr(ctx, "slots", None)):
            mine = [todo[j] for j in run_]
            args = [ddf.args[i] for i in mine]
            # delayed objects in lazy args are lifted out (task_args): Dask's own search of them is quadratic
            tasks.append(delayed_call(_make_and_write_group, ddf.make, args if ddf.lazy else Opaque(args), mine, out,
                                      fmt, reject_columns, ctx.fingerprint, count_details, prepare,
                                      combine if prepare is not None else None,
                                      dask_key_name=group_key(f"write-{stage}", mine)))
    else:
        parts = ddf.map_partitions(_write_mapped, out, fmt, reject_columns, ctx.fingerprint, count_details,
                                   prepare, meta=pd.DataFrame(), enforce_metadata=False, align_dataframes=False,
                                   partition_info=True, token="write").to_delayed()
        tasks = [parts[i] for i in todo]
    if prepare is not None and tasks:
        collect = dask.delayed(_collect, pure=False)
        while len(tasks) > 1:
            tasks = [collect(tasks[k:k + FAN_IN], combine) for k in range(0, len(tasks), FAN_IN)]
        (top,) = ctx.run_compute(*tasks)
        if not isinstance(top, dict) or "stats" not in top:  # one task: its own result
            top = _collect([top], combine)
        on_side(top["side"])
        written = top["stats"]
    else:
        written = [s for r in ctx.run_compute(*tasks) for s in (r if isinstance(r, list) else [r])]
    stats = sorted([*done.values(), *written], key=lambda s: s["partition"])
    schema = {c: str(t) for c, t in ddf._meta.dtypes.items() if c not in INTERNAL and c not in dropped_columns}
    if callable(extra):
        extra = extra()
    return finish_output(ctx, stage=stage, settings=settings, partition_stats=stats, schema=schema,
                         started=started, extra=extra, records=records, docs_in=docs_in)


def finish_output(ctx, *, stage: str, settings, partition_stats: list[dict], schema: dict | None,
                  started: float, extra: dict | None = None, records: list[dict] | None = None,
                  unit: str = "", run: str | None = None, docs_in: int | None = None) -> dict:
    """Write _manifest.json (listing every file with size and checksum) and then ``_SUCCESS``."""
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
            "in": int(sum(s.get("in", 0) for s in partition_stats)) if docs_in is None else int(docs_in),
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
