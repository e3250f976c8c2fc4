"""Deduplication: exact (``exact_dedup``) and fuzzy MinHash-LSH (``fuzzy_dedup``).

Both stages first identify, then remove. Every step reads Parquet and writes Parquet under
``OUT/_work/<step>/`` (one ``part-NNNNN.parquet`` per partition, then a ``_SUCCESS`` file holding the
stage fingerprint), so a killed run resumes at the first incomplete step and every intermediate can
be inspected with pandas.

Documents are addressed by a 64-bit *document number* instead of their string id while the steps
run: ``doc = input partition << 32 | row within the partition``. Shuffles then move integers, and
the final step can send each removal back to the input partition it came from with one range
partitioning (``route_to_input``) instead of joining on strings.

This module holds what both stages share: the step runner, Parquet part I/O, routing to input
partitions and the removal step.
"""

from __future__ import annotations

import glob
import json
import logging
import os
import shutil
import time

import numpy as np
import pandas as pd

from modules.stage import REASON

log = logging.getLogger(__name__)

#: bits of a document number that hold the row within its input partition
DOC_SHIFT = 32
ROW_MASK = (1 << DOC_SHIFT) - 1
WORK = "_work"
DUPLICATES = "_duplicates"
STEP_DONE = "_SUCCESS"


def doc_numbers(partition: int, positions) -> np.ndarray:
    return (np.int64(partition) << np.int64(DOC_SHIFT)) + np.asarray(positions, dtype=np.int64)


def part_path(folder: str, i: int) -> str:
    return os.path.join(folder, f"part-{i:05d}.parquet")


def list_parts(folder: str) -> list[str]:
    return sorted(glob.glob(os.path.join(folder, "part-*.parquet")))


def save_part(df: pd.DataFrame, folder: str, i: int) -> dict:
    """Write one partition of a step (atomically); return its row count for the step's stats."""
    from modules.dataset import write_frame

    os.makedirs(folder, exist_ok=True)
    write_frame(df, part_path(folder, i), "parquet")
    return {"partition": i, "rows": len(df)}


def save_table(table, folder: str, i: int) -> dict:
    """Write one partition given as a pyarrow Table (no pandas metadata: plain Arrow types)."""
    import pyarrow.parquet as pq

    from modules.dataset import atomic_write

    os.makedirs(folder, exist_ok=True)
    atomic_write(part_path(folder, i), lambda p: pq.write_table(table, p))
    return {"partition": i, "rows": table.num_rows}


def load_part(path: str, columns=None) -> pd.DataFrame:
    return pd.read_parquet(path, columns=columns)


def read_parts(folder: str, columns=None):
    """A Dask DataFrame over a step's part files, exactly one partition per file (no regrouping)."""
    import dask.dataframe as dd

    files = list_parts(folder)
    if not files:
        raise FileNotFoundError(f"{folder}: no part files")
    meta = load_part(files[0], columns).iloc[:0]
    return dd.from_map(load_part, files, columns=columns, meta=meta, enforce_metadata=False,
                       label="read-step", divisions=[None] * (len(files) + 1))


class Steps:
    """Runs the steps of one stage under ``OUT/_work/``, skipping those already complete.

    A step is complete when its folder has ``_SUCCESS`` holding this run's fingerprint (settings,
    input and I/O options), so a rerun with other settings never picks up stale intermediates.
    """

    def __init__(self, ctx):
        self.ctx = ctx
        self.root = os.path.join(ctx.output, WORK)
        self.timings: dict[str, dict] = {}
        if ctx.force and os.path.isdir(self.root):
            log.info("%s: --force: intermediates recomputed", ctx.output)
            shutil.rmtree(self.root)

    def path(self, name: str) -> str:
        return os.path.join(self.root, name)

    def done(self, name: str) -> dict | None:
        try:
            with open(os.path.join(self.path(name), STEP_DONE), encoding="utf-8") as f:
                info = json.load(f)
        except (FileNotFoundError, json.JSONDecodeError):
            return None
        return info if info.get("fingerprint") == self.ctx.fingerprint else None

    def run(self, name: str, build, extra_dirs=()) -> dict:
        """Run step ``name`` unless complete. ``build(folder)`` returns delayed tasks that each write
        one part and return a stats dict; the step's info (rows, per-part stats) is returned."""
        from modules.dataset import write_json

        started = time.perf_counter()
        info = self.done(name)
        if info is not None:
            log.info("step %s: complete, skipped", name)
            self.timings[name] = {"seconds": 0.0, "skipped": True, "rows": info["rows"]}
            return info
        folder = self.path(name)
        for d in (folder, *extra_dirs):
            clear_parts(d)
        os.makedirs(folder, exist_ok=True)
        tasks = build(folder)
        stats = list(self.ctx.run_compute(*tasks)) if tasks else []
        info = {"fingerprint": self.ctx.fingerprint, "rows": int(sum(s.get("rows", 0) for s in stats)),
                "parts": stats}
        write_json(os.path.join(folder, STEP_DONE), info)
        seconds = time.perf_counter() - started
        self.timings[name] = {"seconds": round(seconds, 3), "skipped": False, "rows": info["rows"]}
        log.info("step %s: %d rows in %.1fs", name, info["rows"], seconds)
        return info


def clear_parts(folder: str) -> None:
    """Remove a step's sentinel first, then its parts (not its subfolders)."""
    done = os.path.join(folder, STEP_DONE)
    if os.path.exists(done):
        os.remove(done)
    for p in glob.glob(os.path.join(folder, "part-*")) + glob.glob(os.path.join(folder, ".part-*")):
        os.remove(p)


def save_tasks(ddf, folder: str, prepare=None) -> list:
    """One delayed write per partition of ``ddf`` (optionally through ``prepare(df)`` first)."""
    import dask

    write = dask.delayed(_prepare_and_save, pure=False)
    return [write(part, prepare, folder, i) for i, part in enumerate(ddf.to_delayed())]


def _prepare_and_save(df, prepare, folder, i):
    return save_part(prepare(df) if prepare is not None else df, folder, i)


def route_to_input(ddf, column: str, npartitions: int) -> list:
    """Delayed pandas frames, frame ``p`` holding the rows whose document number in ``column`` lies in
    input partition ``p``, sorted by it (one range-partitioning shuffle)."""
    divisions = [p << DOC_SHIFT for p in range(npartitions)] + [(npartitions << DOC_SHIFT) - 1]
    routed = ddf.set_index(column, divisions=divisions, sort=True)
    return [part for part in routed.reset_index().to_delayed()]


def good_rows(df: pd.DataFrame) -> np.ndarray:
    """Positions of the rows that take part in dedup: not already dropped upstream (bad input lines)."""
    if REASON in df.columns:
        return np.flatnonzero(df[REASON].isna().to_numpy())
    return np.arange(len(df))


def mark_removed(df: pd.DataFrame, removed: pd.DataFrame, reason: str) -> pd.DataFrame:
    """``df`` (input partition) with the rows listed in ``removed`` (doc, kept_id) marked as dropped.

    ``_detail`` names the kept document, so ``_rejects/`` says what each removed document duplicated.
    Only rows not already dropped take part in dedup, so every listed row is still undropped here.
    """
    from modules.dataset import DETAIL, STRING, mark_dropped

    rows = removed["doc"].to_numpy(dtype=np.int64) & ROW_MASK
    mask = np.zeros(len(df), dtype=bool)
    mask[rows] = True
    out = mark_dropped(df, mask, reason)
    detail = np.full(len(df), None, dtype=object)
    detail[rows] = ("duplicate of " + removed["kept_id"].astype(str)).to_numpy()
    current = out[DETAIL] if DETAIL in out.columns else pd.Series(pd.NA, index=out.index, dtype=STRING)
    return out.assign(**{DETAIL: current.mask(mask, pd.Series(detail, index=out.index)).astype(STRING)})


class Inputs:
    """The input partitions, readable one at a time inside a task.

    Tasks that combine an input partition with the result of a shuffle read the partition
    themselves: were it a separate task, the scheduler would load input partitions while the
    shuffle runs and hold them all, so a worker's memory would grow with the dataset."""

    def __init__(self, ctx, ddf):
        from modules import dataset
        from modules.stage import parse_bytes

        files = dataset.expand_named(ctx.input, allow_incomplete=ctx.io.allow_incomplete)
        self.pieces = dataset.plan_pieces(files, parse_bytes(ctx.io.blocksize, "blocksize"))
        if len(self.pieces) != ddf.npartitions:
            raise RuntimeError(f"{len(self.pieces)} input pieces for {ddf.npartitions} partitions")
        self.io = ctx.io
        self.meta = ddf._meta

    def __len__(self) -> int:
        return len(self.pieces)

    def read(self, i: int) -> pd.DataFrame:
        """Input partition ``i``, exactly as ``read_dataset`` makes it (so row positions agree)."""
        from modules.dataset import read_piece

        return read_piece(self.pieces[i], self.io, self.meta)


def _mark_task(inputs: Inputs, i: int, removed: pd.DataFrame, reason: str) -> pd.DataFrame:
    return mark_removed(inputs.read(i), removed, reason)


def removal_frame(inputs: Inputs, steps: Steps, duplicates_step: str, reason: str):
    """The input dataset (same partitions) with the removed documents of ``duplicates_step`` marked."""
    import dask
    import dask.dataframe as dd

    removed = read_parts(steps.path(duplicates_step), columns=["doc", "kept_id", "removed"])
    removed = removed[removed["removed"]][["doc", "kept_id"]]
    routed = route_to_input(removed, "doc", len(inputs))
    mark = dask.delayed(_mark_task, pure=True)
    parts = [mark(inputs, i, r, reason) for i, r in enumerate(routed)]
    return dd.from_delayed(parts, meta=inputs.meta, divisions=[None] * (len(parts) + 1), verify_meta=False)
