"""How rows reach the tasks of a dedup step: routed back to their input partitions (one range
partitioning: document numbers carry the partition), in groups of consecutive partitions that one
shuffled frame serves (:class:`Routed`), and how many tasks a step of such groups runs
(:func:`group_tasks`: spread over the cluster's threads where its rows are enough work)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

#: a step of routed groups is split over the cluster's threads (:func:`split_runs`) only from this many
#: rows: below, its work is less than the round trips of the tasks it would add. At 48,000 pages
#: (no near copies) the members' step ran 13 tasks for no rows at 6 nodes, 0.50 s against 0.28 at 1
SPREAD_ROWS = 50_000


def spread(slots: int | None, rows: int) -> int | None:
    """The threads a step of ``rows`` routed rows spreads its groups over (:func:`split_runs`): the
    cluster's, or none (one task per group) when the rows are fewer than :data:`SPREAD_ROWS`."""
    return slots if rows >= SPREAD_ROWS else 0


#: bits of a document number that hold the row within its input partition (the rest: the partition)
DOC_SHIFT = 32
ROW_MASK = (1 << DOC_SHIFT) - 1


#: a shuffle of compact rows into at most this many partitions (COMPACT_BYTES each) moves them as Dask
#: tasks, not through P2P: P2P's fixed cost per shuffle (a run started and ended on every worker, its
#: barrier) outweighed moving a few hundred MiB, and it grows with the workers
TASKS_SHUFFLE_PARTITIONS = 8


def shuffle_method(npartitions: int) -> str | None:
    """The method for a shuffle of compact rows into ``npartitions``: "tasks" for a small one, else Dask's
    default (P2P on a cluster); a method the user set in Dask's config always wins."""
    import dask

    if dask.config.get("dataframe.shuffle.method", None) is not None:
        return None
    return "tasks" if npartitions <= TASKS_SHUFFLE_PARTITIONS else None


def route_to_input(ddf, column: str, npartitions: int) -> list:
    """Delayed pandas frames, frame ``p`` holding the rows whose document number in ``column`` lies in
    input partition ``p``, sorted by it (one range-partitioning shuffle)."""
    divisions = [p << DOC_SHIFT for p in range(npartitions)] + [(npartitions << DOC_SHIFT) - 1]
    routed = ddf.set_index(column, divisions=divisions, sort=True)
    return [part for part in routed.reset_index().to_delayed()]


@dataclass(frozen=True)
class Routed:
    """The rows routed to input partition ``partition``: they sit in ``frame``, the shuffled frame of a
    group of consecutive input partitions, sorted by ``column`` (a document number). A task takes its
    own with :meth:`rows`; Dask passes the group's frame in place of the delayed one (it unpacks
    dataclasses), so one shuffled partition serves every input partition of its group."""

    frame: object
    column: str
    partition: int

    def rows(self) -> pd.DataFrame:
        values = self.frame[self.column].to_numpy(dtype=np.int64)
        lo, hi = np.searchsorted(values, [self.partition << DOC_SHIFT, (self.partition + 1) << DOC_SHIFT])
        return self.frame.iloc[lo:hi].reset_index(drop=True)


def route_to_groups(ddf, column: str, npartitions: int, groups: int) -> list[Routed]:
    """What :func:`route_to_input` gives, as :class:`Routed` rows of each input partition, shuffled into
    ``groups`` partitions of consecutive input partitions (one range-partitioning shuffle; a compact
    step passes :func:`compact_partitions` of its rows)."""
    per = -(-max(npartitions, 1) // max(1, min(groups, npartitions)))
    starts = list(range(0, npartitions, per))
    divisions = [p << DOC_SHIFT for p in starts] + [(npartitions << DOC_SHIFT) - 1]
    routed = ddf.set_index(column, divisions=divisions, sort=True, shuffle_method=shuffle_method(len(starts)))
    parts = routed.reset_index().to_delayed()
    return [Routed(parts[p // per], column, p) for p in range(npartitions)]


def runs_of(routed: list[Routed]) -> list[list[int]]:
    """The input partitions of each group of :func:`route_to_groups`'s result, in order: a step whose
    work per partition is small runs one task per group."""
    runs: list[list[int]] = []
    for p, r in enumerate(routed):
        if runs and routed[runs[-1][0]].frame is r.frame:
            runs[-1].append(p)
        else:
            runs.append([p])
    return runs


def group_tasks(routed: list[Routed], task, args: tuple, at_least: int | None) -> list:
    """Delayed tasks that call ``task(routed[p], p, *args)`` (one part's stats) for every input
    partition ``p``: one per run of partitions that share a shuffled group (:func:`runs_of`), split
    further into more than twice ``at_least`` (the cluster's threads) where there are that many
    partitions, so that a step of little data still runs on every thread. Twice and one: tasks that
    share one group's frame go to the worker that holds it, one after the other (at 6 quarter-core
    nodes a verify step's six tasks ran on one worker), unless Dask's scheduler counts them root-ish,
    a group of more tasks than twice its threads, and gives each to the next free thread. Each returns
    its parts' stats (:meth:`Steps.run` takes the lists); the parts are the same however the
    partitions are split."""
    from curate.stages.dataset.task_args import delayed_call

    # the routed rows' frames are lifted out of the arguments: Dask's own search of 24 Routed rows
    # sharing one frame cost the head 0.2 CPU-s for one task (task_args)
    return [delayed_call(_each_partition, task, [routed[p] for p in run], run, args)
            for run in split_runs(routed, at_least)]


def split_runs(routed: list[Routed], at_least: int | None) -> list[list[int]]:
    """:func:`runs_of`, the longest halved until there are more than twice ``at_least`` (or one per
    partition): the tasks of :func:`group_tasks`, and of any step that makes one result per run.
    ``at_least`` 0: the runs as they are (:func:`spread`: too few rows to be worth more tasks)."""
    runs = runs_of(routed)
    if at_least == 0:
        return runs
    want = min(len(routed), 2 * max(1, at_least or 1) + 1)
    while len(runs) < want:  # halve the longest run until there are enough
        k = max(range(len(runs)), key=lambda j: len(runs[j]))
        run = runs.pop(k)
        runs[k:k] = [run[:len(run) // 2], run[len(run) // 2:]]
    return runs


def input_tasks(inputs, task, calls: list[tuple]) -> list:
    """Delayed tasks that call ``task(*calls[i])`` (one part's stats) for every input partition ``i``:
    several small partitions a task, by their bytes (:mod:`curate.stages.dataset.groups`), one after
    the other. Each returns its partitions' stats (:meth:`Steps.run` takes the lists)."""
    import dask

    from curate.stages.dataset.groups import task_groups
    from curate.stages.dataset.write import Opaque

    each = dask.delayed(_each_call, pure=False)
    # the calls hold no delayed object: Dask need not search them (Opaque)
    return [each(task, Opaque([calls[i] for i in run])) for run in task_groups(list(inputs.sizes()), inputs.slots)]


def _each_call(task, calls) -> list[dict]:
    from curate.stages.dataset.write import unwrap

    return [task(*c) for c in unwrap(calls)]


def _each_partition(task, routed, partitions, args) -> list[dict]:
    return [task(r, p, *args) for r, p in zip(routed, partitions)]


def route_to_parts(ddf, column: str, nparts: int) -> list:
    """Delayed pandas frames, frame ``i`` holding the rows whose ``column`` (an integer in [0, nparts))
    is ``i``, without it (one range-partitioning shuffle: how rows meet a saved index's part ``i``)."""
    routed = ddf.set_index(column, divisions=list(range(nparts + 1)), sort=True)
    return [part for part in routed.reset_index(drop=True).to_delayed()]
