"""Deduplication: exact (``exact_dedup``) and fuzzy MinHash-LSH (``fuzzy_dedup``).

Both stages first identify, then remove. Every step reads Parquet and writes Parquet under
``OUT.side/_work/<step>/`` (one ``part-NNNNN.parquet`` per partition; the side folder beside the stage
folder ``OUT/``, see :mod:`curate.stages.output`) through the stage's output, which
journals each finished step with this run's fingerprint, so a killed run resumes at the first
incomplete step; the final manifest lists every intermediate (with checksums), and each can be
inspected with pandas.

Documents are addressed by a 64-bit *document number* instead of their string id while the steps
run: ``doc = input partition << 32 | row within the partition``. Shuffles then move integers, and
the final step can send each removal back to the input partition it came from with one range
partitioning (``route_to_input``) instead of joining on strings.

This module holds what both stages share: the step runner, Parquet part I/O and the shuffles of
compact rows; how rows reach their tasks (routing to input partitions, tasks per group) is
:mod:`.routing`, the removal step :mod:`.removal`.

**Tasks follow bytes, not partitions.** The steps between reading texts and writing the dataset move
compact rows (hashes, bucket keys, edges, document numbers), a few dozen bytes per document. Each
task of those steps reads, and each shuffle writes, about ``COMPACT_BYTES`` of such rows
(:func:`read_compact`, :func:`compact_partitions`), and rows routed back to the input partitions
travel in groups of consecutive partitions (:func:`route_to_groups`, each consumer taking its own
rows out of its group: :class:`Routed`). So the scheduler sees a handful of tasks per input partition
(those that read or write its documents) and one per ``COMPACT_BYTES`` of rows elsewhere, however
finely the input is cut.
"""

from __future__ import annotations

import contextlib
import glob
import logging
import os
import time
from dataclasses import dataclass

import numpy as np
import pandas as pd

from curate.stages.dataset import REASON

# how rows reach the tasks (routing.py), re-exported: callers say dedup.route_to_groups and so on
from curate.stages.dedup.routing import (
    DOC_SHIFT as DOC_SHIFT,
    ROW_MASK as ROW_MASK,
    TASKS_SHUFFLE_PARTITIONS as TASKS_SHUFFLE_PARTITIONS,
    Routed as Routed,
    group_tasks as group_tasks,
    input_tasks as input_tasks,
    route_to_groups as route_to_groups,
    route_to_input as route_to_input,
    route_to_parts as route_to_parts,
    runs_of as runs_of,
    shuffle_method as shuffle_method,
    split_runs as split_runs,
    spread as spread,
)
from curate.stages.output import Output, is_temporary

log = logging.getLogger(__name__)

WORK = "_work"
DUPLICATES = "_duplicates"


def doc_numbers(partition: int, positions) -> np.ndarray:
    return (np.int64(partition) << np.int64(DOC_SHIFT)) + np.asarray(positions, dtype=np.int64)


@dataclass(frozen=True)
class StepFolder:
    """A folder of the stage's output that a step writes (``_work/<step>``, ``_duplicates``).

    Picklable; behaves as its path (``os.fspath``/``str``) for code that only reads, and writes go
    through the stage's :class:`curate.stages.output.Output`, so every part is journaled and checksummed.
    """

    out: Output
    rel: str
    #: the step whose journal record lists this folder's parts, when it is not the folder's own
    step: str | None = None

    def __fspath__(self) -> str:
        return self.out.url_of(self.rel)

    def __str__(self) -> str:
        return self.out.url_of(self.rel)

    def part(self, i: int) -> str:
        return f"{self.rel}/part-{i:05d}.parquet"


def part_path(folder, i: int) -> str:
    return os.path.join(os.fspath(folder), f"part-{i:05d}.parquet")


def list_parts(folder) -> list[str]:
    """The part files of a step (from its journal record when it is a StepFolder), in order."""
    if isinstance(folder, StepFolder):
        rec = folder.out.journal_record(_step_key(folder.step or folder.rel)) or {}
        rels = sorted(f["path"] for f in rec.get("files", [])
                      if f["path"].startswith(folder.rel + "/") and f["path"].endswith(".parquet"))
        return [folder.out.url_of(r) for r in rels]
    return sorted(glob.glob(os.path.join(folder, "part-*.parquet")))


def save_part(df: pd.DataFrame, folder, i: int) -> dict:
    """Write one partition of a step; return its row count and file record for the step's stats."""
    if isinstance(folder, StepFolder):
        record = folder.out.write_frame(folder.part(i), df, "parquet")
        return {"partition": i, "rows": len(df), "outputs": [record]}
    from curate.stages.dataset import atomic_write

    os.makedirs(folder, exist_ok=True)
    frame = df.reset_index(drop=True)
    atomic_write(part_path(folder, i), lambda p: frame.to_parquet(p, index=False))
    return {"partition": i, "rows": len(df)}


def save_table(table, folder, i: int) -> dict:
    """Write one partition given as a pyarrow Table (no pandas metadata: plain Arrow types)."""
    import pyarrow.parquet as pq

    if isinstance(folder, StepFolder):
        with folder.out.open(folder.part(i)) as f:
            pq.write_table(table, f)
        # the record carries its rows as write_frame's do, so a step resumed from the journal lists them too
        return {"partition": i, "rows": table.num_rows, "outputs": [{**f.record, "rows": table.num_rows}]}
    from curate.stages.dataset import atomic_write

    os.makedirs(folder, exist_ok=True)
    atomic_write(part_path(folder, i), lambda p: pq.write_table(table, p))
    return {"partition": i, "rows": table.num_rows}


def load_part(path: str, columns=None) -> pd.DataFrame:
    return pd.read_parquet(path, columns=columns)


#: Parquet bytes of compact rows that one task of a compact step reads, or one partition of its
#: shuffle holds (a worker's peak grew about 12 bytes per byte of it from 250k to 1M pages, when it
#: was 64 MiB): how a step's task count follows its bytes, and what bounds a dedup worker's peak
COMPACT_BYTES = 16 << 20


def part_records(folder) -> list[tuple[str, int, int | None]]:
    """(path, bytes, rows) of a step's part files, in order; rows None where the journal does not say
    (a plain folder)."""
    if isinstance(folder, StepFolder):
        rec = folder.out.journal_record(_step_key(folder.step or folder.rel)) or {}
        rows = sorted((f["path"], int(f.get("bytes", 0)), f.get("rows")) for f in rec.get("files", [])
                      if f["path"].startswith(folder.rel + "/") and f["path"].endswith(".parquet"))
        return [(folder.out.url_of(r), n, k) for r, n, k in rows]
    return [(f, os.path.getsize(f), None) for f in list_parts(folder)]


def nonempty(records: list[tuple[str, int, int | None]]) -> list[tuple[str, int, int | None]]:
    """The records of parts with rows (the first of them all when none has: a frame's columns). A step
    writes a part per partition, and reading a few hundred empty ones in one task cost a quarter core
    about a second per step."""
    return [r for r in records if r[2] != 0] or records[:1]


def compact_partitions(folder) -> int:
    """How many partitions a shuffle of a step's rows gets: one per ``COMPACT_BYTES`` of its parts."""
    total = sum(n for _, n, _ in part_records(folder))
    return max(1, -(-total // COMPACT_BYTES))


#: a P2P shuffle's input partitions are cut in this many pieces (by rows, in order) before they are
#: sent: P2P's transfer of one holds about ten times its bytes at once (merged onto the output numbers,
#: an Arrow table, a sorted copy, the serialised shards). Fuzzy dedup's bucket shuffle at 1M documents
#: (13 partitions of 26 MB) lifted a worker 520 MiB above its start; in quarters, 250 MiB, and in the
#: same time (a tasks shuffle keeps every piece in memory until it is merged: no gain there)
P2P_PIECES = 4


def shuffle(ddf, on: str, npartitions: int):
    """``ddf.shuffle(on, npartitions)`` of compact rows, by :func:`shuffle_method`; into one partition the
    inputs concatenated; through P2P, each input partition sent in :data:`P2P_PIECES` pieces."""
    from dask.dataframe.dask_expr._shuffle import get_default_shuffle_method

    if npartitions == 1:
        # the inputs concatenated in order: what a tasks shuffle into one gives, without its split,
        # group and getitem tasks per input (a step's tasks cost the head, whatever the node count)
        return ddf.repartition(npartitions=1)
    method = shuffle_method(npartitions)
    if (method or get_default_shuffle_method()) == "p2p":
        ddf = ddf.repartition(npartitions=ddf.npartitions * P2P_PIECES)
    return ddf.shuffle(on=on, npartitions=npartitions, shuffle_method=method)


def _groups(sizes: list[int], budget: int) -> list[list[int]]:
    """Consecutive runs of indexes whose sizes add up to about ``budget`` (each run at least one)."""
    groups, run, used = [], [], 0
    for i, n in enumerate(sizes):
        if run and used + n > budget:
            groups.append(run)
            run, used = [], 0
        run.append(i)
        used += n
    return groups + [run] if run else groups


def load_parts(paths: tuple[str, ...], columns=None) -> pd.DataFrame:
    """Several part files of a step as one frame (empty ones left out, so their column types, which an
    empty part may write differently, never change the others')."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    def opened(path):  # a remote part through fsspec, as pandas (load_part) opens it
        if "://" not in str(path):
            return contextlib.nullcontext(path)
        import fsspec

        return fsspec.open(path, "rb")

    def rows(path) -> int:
        with opened(path) as f:
            return pq.read_metadata(f).num_rows

    def table(path):
        with opened(path) as f:
            return pq.read_table(f, columns=columns)

    # the footers say which parts hold rows: a part is read once, whichever way it is read
    full = [p for p in paths if rows(p)]
    if len(full) <= 1:
        return load_part((full or paths)[0], columns)
    tables = [table(p) for p in full]
    try:
        # one conversion to pandas, not one a part: a compact step's one task reads every part of a
        # step (24 at 48,000 pages), and on a quarter core each conversion was 10 ms of the stage's
        # serial time (the frame is what pd.concat of the parts gave: tests/modules/dedup)
        table = pa.concat_tables(tables)
    except pa.ArrowInvalid:  # parts whose types differ (a column all null in one): pandas reconciles
        return pd.concat([load_part(p, columns) for p in full], ignore_index=True)
    return table.to_pandas().reset_index(drop=True)


def read_compact(folder, columns=None):
    """A Dask DataFrame over a step's part files of compact rows, each partition a run of consecutive
    files of about ``COMPACT_BYTES`` (a step of 80,000 small parts is read by a handful of tasks)."""
    import dask.dataframe as dd

    records = part_records(folder)
    if not records:
        raise FileNotFoundError(f"{os.fspath(folder)}: no part files")
    meta = load_part(records[0][0], columns).iloc[:0]
    records = nonempty(records)  # rows are what is read: an empty part adds none
    runs = [tuple(records[i][0] for i in g) for g in _groups([n for _, n, _ in records], COMPACT_BYTES)]
    return dd.from_map(load_parts, runs, columns=columns, meta=meta, enforce_metadata=False,
                       label="read-compact", divisions=[None] * (len(runs) + 1))


def read_parts(folder, columns=None):
    """A Dask DataFrame over a step's part files, exactly one partition per file (no regrouping)."""
    import dask.dataframe as dd

    files = list_parts(folder)
    if not files:
        raise FileNotFoundError(f"{os.fspath(folder)}: no part files")
    meta = load_part(files[0], columns).iloc[:0]
    return dd.from_map(load_part, files, columns=columns, meta=meta, enforce_metadata=False,
                       label="read-step", divisions=[None] * (len(files) + 1))


def _step_key(rel: str) -> str:
    return "step-" + rel.strip("/").replace("/", "-")


class Steps:
    """Runs the steps of one stage under ``OUT.side/_work/``, skipping those already complete.

    Each step is one journal entry of the stage's output (:mod:`curate.stages.output`): its folders are
    recorded before the first part is written, and its part files (with checksums), row counts and
    per-part stats when it is done. A step is complete when its record carries this run's
    fingerprint (settings, input and I/O options) and its files are all there, so a rerun with
    other settings never picks up stale intermediates. ``--force`` recomputes every step.
    """

    def __init__(self, ctx, stage: str | None = None, out: Output | None = None, root: str = WORK,
                 owner: dict | None = None):
        """The steps of ``ctx``'s stage under ``OUT/<root>/``; or, given ``out`` and its ``owner``, the
        tables of another output this run writes (a saved index: ``root=""``)."""
        from curate.stages.dataset import stage_output, stage_owner

        self.ctx = ctx
        self.out = out or stage_output(ctx)
        self.root = root
        self.out.begin(owner or stage_owner(ctx, stage or "dedup"))
        self.timings: dict[str, dict] = {}
        self._records: dict[str, list[dict]] = {}
        self._infos: dict[str, dict] = {}
        # what the output held when the stage began: a step writes only its own folders, so this says
        # for every later step whether an earlier run left it done or left files to clear. Each step
        # had walked the whole output twice and read every journal record (a quarter-core head node
        # paid about 0.1 CPU-s a fuzzy stage for it, 0.4 s of its serial time)
        self._listing = self.out.listing()

    def path(self, name: str) -> StepFolder:
        return StepFolder(self.out, f"{self.root}/{name}" if self.root else name)

    def folder(self, rel: str) -> StepFolder:
        """Another folder of the output a step writes into (``_duplicates``)."""
        return StepFolder(self.out, rel)

    def side(self, name: str, step: str) -> StepFolder:
        """A folder of parts that step ``step`` writes beside its own (``extra_dirs``), readable by name."""
        return StepFolder(self.out, self.path(name).rel, step=self.path(step).rel)

    def done(self, name: str) -> dict | None:
        if name in self._infos:  # run or found complete by this process
            return self._infos[name]
        if self.ctx.force:
            return None
        rec = self.out.finished(_step_key(self.path(name).rel), self.ctx.fingerprint, self._listing)
        return rec["info"] if rec else None

    def records(self) -> list[dict]:
        """File records of every step of this run, for the stage's manifest."""
        return [r for recs in self._records.values() for r in recs]

    def run(self, name: str, build, extra_dirs=()) -> dict:
        """Run step ``name`` unless complete. ``build(folder)`` returns delayed tasks that each write
        one part and return a stats dict (or several, :func:`group_tasks`, and their list); the step's
        info (rows, per-part stats) is returned."""
        started = time.perf_counter()
        folder = self.path(name)
        key = _step_key(folder.rel)
        if not (self.ctx.force and name not in self._records):
            rec = self.out.finished(key, self.ctx.fingerprint, self._listing)
            if rec is not None:
                log.info("step %s: complete, skipped", name)
                self._records[name] = rec["files"]
                self._infos[name] = rec["info"]
                self.timings[name] = {"seconds": 0.0, "skipped": True, "rows": rec["info"]["rows"]}
                return rec["info"]
        dirs = [folder.rel, *(d.rel if isinstance(d, StepFolder) else d for d in extra_dirs)]
        self._clear(key, dirs)
        self.out.intend(key, [d + "/" for d in dirs])
        tasks = build(folder)
        stats = []
        for s in self.ctx.run_compute(*tasks) if tasks else ():  # a task of several parts: their list
            stats += s if isinstance(s, list) else [s]
        files = [f for s in stats for f in s.pop("outputs", [])]
        info = {"rows": int(sum(s.get("rows", 0) for s in stats)), "parts": stats}
        self.out.record_done(key, self.ctx.fingerprint, files, info=info)
        self._records[name] = files
        self._infos[name] = info
        seconds = time.perf_counter() - started
        self.timings[name] = {"seconds": round(seconds, 3), "skipped": False, "rows": info["rows"]}
        log.info("step %s: %d rows in %.1fs", name, info["rows"], seconds)
        return info

    def _clear(self, key: str, dirs: list[str]) -> None:
        """Remove what an earlier run wrote into the step's folders (only files the output owns)."""
        if not any(rel.rpartition("/")[0] in dirs for rel in self._listing):
            return  # the output held nothing there when the stage began: a first run's every step
        listing = self.out.listing()
        owned = self.out.owned(listing)
        for rel in sorted(listing):
            folder, _, _name = rel.rpartition("/")
            # only the folder's own files: a step's sub-folders are other steps (components rounds)
            if folder in dirs and (rel in owned or is_temporary(rel)):
                self.out.remove(rel, owned)


def save_tasks(ddf, folder: str, prepare=None) -> list:
    """One delayed write per partition of ``ddf`` (optionally through ``prepare(df)`` first)."""
    import dask

    write = dask.delayed(_prepare_and_save, pure=False)
    return [write(part, prepare, folder, i) for i, part in enumerate(ddf.to_delayed())]


def _prepare_and_save(df, prepare, folder, i):
    return save_part(prepare(df) if prepare is not None else df, folder, i)


def good_rows(df: pd.DataFrame) -> np.ndarray:
    """Positions of the rows that take part in dedup: not already dropped upstream (bad input lines)."""
    if REASON in df.columns:
        return np.flatnonzero(df[REASON].isna().to_numpy())
    return np.arange(len(df))


class Inputs:
    """The input partitions, readable one at a time inside a task.

    Tasks that combine an input partition with the result of a shuffle read the partition
    themselves: were it a separate task, the scheduler would load input partitions while the
    shuffle runs and hold them all, so a worker's memory would grow with the dataset."""

    def __init__(self, ctx, ddf=None):
        """The pieces of ``ctx``'s input (those of ``ddf``, a ``read_dataset`` of it, when given)."""
        from curate.stages import dataset
        from curate.stages.stage import parse_bytes

        if ddf is None:  # without a Dask DataFrame: the pieces and the schema, planned once
            self.meta, self.pieces = dataset.read_pieces(ctx.input, ctx.io)
        else:
            files = dataset.expand_named(ctx.input, allow_incomplete=ctx.io.allow_incomplete)
            self.pieces = dataset.plan_pieces(files, parse_bytes(ctx.io.blocksize, "blocksize"))
            if len(self.pieces) != ddf.npartitions:
                raise RuntimeError(f"{len(self.pieces)} input pieces for {ddf.npartitions} partitions")
            self.meta = ddf._meta
        self.io = ctx.io
        self.slots = getattr(ctx, "slots", None)  # worker threads: tasks to keep (:func:`input_tasks`)

    def __len__(self) -> int:
        return len(self.pieces)

    def only(self, i: int) -> Inputs:
        """What a task of input partition ``i`` is given: this with that one piece, so that a task's
        payload does not grow with the dataset's partition count (it did, as the whole list)."""
        one = object.__new__(Inputs)
        one.pieces, one.io, one.meta, one.slots = {i: self.pieces[i]}, self.io, self.meta, self.slots
        return one

    def sizes(self) -> tuple[int, ...]:
        """Each input partition's bytes (how many partitions one task takes: :func:`input_tasks`)."""
        from curate.stages.dataset.groups import piece_bytes

        return tuple(piece_bytes([self.pieces[i] for i in range(len(self.pieces))]))

    def read(self, i: int) -> pd.DataFrame:
        """Input partition ``i``, exactly as ``read_dataset`` makes it (so row positions agree)."""
        from curate.stages.dataset import read_piece

        return read_piece(self.pieces[i], self.io, self.meta)
