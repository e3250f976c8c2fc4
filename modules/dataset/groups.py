"""How many input partitions one Dask task makes and writes: runs of consecutive partitions set by their
bytes, so that a stage's tasks grow with the data's bytes, not with its file count.

Every task costs the head (the client and the scheduler) about the same, a few milliseconds, whatever
it carries: 96 files of 60 pages cost it four times what 24 files of 240 pages do. So where partitions
are small, one task makes and writes several of them, one after the other (a worker holds one
partition at a time), until it has read about :data:`TASK_BYTES` of input; and a stage keeps at least
:data:`TASKS_PER_SLOT` tasks per worker thread, so that small inputs still spread over the cluster and
a slow task can be balanced. Partitions of ``TASK_BYTES`` or more are one task each, as before. Spark
packs small files into read tasks the same way (``spark.sql.files.maxPartitionBytes``).

Which task writes a partition changes nothing in it: partition ``i`` of the output is made from
partition ``i`` of the input alone, and every partition's file, journal record and counts are what one
task per partition wrote, for any grouping, worker count or execution mode.
"""

from __future__ import annotations

import os

#: a task makes partitions until it has read about this many bytes of input (partitions larger than
#: this are one task each)
TASK_BYTES = 32 << 20
#: a stage keeps at least this many tasks per worker thread (where it has that many partitions)
TASKS_PER_SLOT = 4


def task_groups(sizes: list[int], slots: int | None, task_bytes: int = TASK_BYTES,
                per_slot: int = TASKS_PER_SLOT) -> list[list[int]]:
    """Runs of consecutive indexes of ``sizes`` (each partition's input bytes), one task each: about
    ``task_bytes`` a run, at least ``per_slot`` x ``slots`` runs (where there are that many), runs of
    about equal bytes. Sizes that are all 0 count as equal."""
    n = len(sizes)
    if n == 0:
        return []
    sizes = [max(0, int(s)) for s in sizes]
    total = sum(sizes)
    if total == 0:
        sizes, total = [1] * n, n
    want = min(n, max(1, -(-total // max(1, task_bytes)), per_slot * max(1, slots or 1)))
    if want >= n:
        return [[i] for i in range(n)]
    # partition i joins the run its middle byte falls in: runs are consecutive, of about total / want
    # bytes each, and a partition larger than that is a run of its own
    runs: list[list[int]] = []
    last, before = -1, 0
    for i, s in enumerate(sizes):
        k = min(want - 1, int((before + s / 2) * want // total))
        if k != last:
            runs.append([])
            last = k
        runs[-1].append(i)
        before += s
    return runs


def path_bytes(paths) -> dict[str, int]:
    """Size of each distinct local file of ``paths``; a remote or missing file's is not looked up and
    counts as :data:`TASK_BYTES` (a task of its own, as before partitions were grouped)."""
    sizes: dict[str, int] = {}
    for p in paths:
        if p not in sizes:
            try:
                sizes[p] = os.path.getsize(p) if "://" not in p else TASK_BYTES
            except OSError:
                sizes[p] = TASK_BYTES
    return sizes


def piece_bytes(pieces) -> list[int]:
    """Input bytes of each :class:`~curate.stages.dataset.pieces.Piece`: its byte range, or its file's
    size shared among the file's pieces (Parquet row groups)."""
    sizes = path_bytes(p.path for p in pieces)
    per_file: dict[str, int] = {}
    for p in pieces:
        per_file[p.path] = per_file.get(p.path, 0) + 1
    out = []
    for p in pieces:
        if p.end is not None and p.end >= 0:
            out.append(max(0, p.end - p.start))
        else:
            out.append(sizes[p.path] // per_file[p.path])
    return out
