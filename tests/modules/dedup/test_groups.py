"""How per-partition steps of compact rows are split into tasks (``dedup.group_tasks``): every input
partition's part exactly once, in order, in at least as many tasks as there are threads (never more
than partitions), whatever the shuffled groups; and the same parts whatever the split."""

import dask
import numpy as np
import pandas as pd
import pytest

from curate.stages import dedup


def _routed(partitions: int, groups: int):
    docs = np.array([(p << dedup.DOC_SHIFT) + k for p in range(partitions) for k in range(p % 3)], dtype=np.int64)
    frame = pd.DataFrame({"doc": docs, "x": np.arange(len(docs))})
    import dask.dataframe as dd

    return dedup.route_to_groups(dd.from_pandas(frame, npartitions=2), "doc", partitions, groups), frame


def _part(routed, p, tag):
    rows = routed.rows()
    return {"partition": p, "rows": len(rows), "docs": rows["doc"].tolist(), "tag": tag}


@pytest.mark.parametrize("partitions,groups,at_least", [(7, 1, 2), (7, 1, 1), (7, 3, 2), (5, 1, 9), (1, 1, 4),
                                                        (12, 2, 8)])
def test_every_partition_once_in_order_in_enough_tasks(partitions, groups, at_least):
    routed, frame = _routed(partitions, groups)
    tasks = dedup.group_tasks(routed, _part, ("t",), at_least)
    # more than twice the threads where the partitions allow: Dask then spreads them (root-ish)
    assert min(partitions, 2 * at_least + 1) <= len(tasks) <= partitions
    results = dask.compute(*tasks, scheduler="sync")
    flat = [s for r in results for s in r]
    assert [s["partition"] for s in flat] == list(range(partitions))
    # brute force: partition p's rows are the frame's rows of documents numbered in p
    for s in flat:
        want = frame[(frame["doc"].to_numpy() >> dedup.DOC_SHIFT) == s["partition"]]["doc"].tolist()
        assert s["docs"] == want and s["tag"] == "t"


def test_the_split_never_changes_a_part():
    routed, _ = _routed(9, 2)
    one = [s for r in dask.compute(*dedup.group_tasks(routed, _part, ("t",), 1), scheduler="sync") for s in r]
    many = [s for r in dask.compute(*dedup.group_tasks(routed, _part, ("t",), 9), scheduler="sync") for s in r]
    assert one == many


def test_a_step_of_few_rows_runs_one_task_per_group_and_the_same_parts():
    """dedup.spread: below SPREAD_ROWS rows a step is not split over the threads (at 6 quarter-core
    nodes, 13 tasks for a step of no rows cost more than its work); from there it is."""
    from curate.stages.dedup.routing import SPREAD_ROWS

    assert dedup.spread(6, SPREAD_ROWS - 1) == 0 and dedup.spread(6, SPREAD_ROWS) == 6
    assert dedup.spread(None, 0) == 0
    routed, _ = _routed(9, 2)
    few = dedup.group_tasks(routed, _part, ("t",), dedup.spread(6, 10))
    assert len(few) == len(dedup.runs_of(routed)) == 2
    assert dedup.split_runs(routed, 0) == dedup.runs_of(routed)
    many = dedup.group_tasks(routed, _part, ("t",), 6)
    assert [s for r in dask.compute(*few, scheduler="sync") for s in r] == \
        [s for r in dask.compute(*many, scheduler="sync") for s in r]


def test_small_shuffles_of_compact_rows_move_as_tasks_and_the_users_method_wins():
    """A shuffle into a few COMPACT_BYTES partitions skips P2P's per-run cost; a large one keeps Dask's
    default; a method set in Dask's config is never overridden."""
    import dask

    from curate.stages import dedup

    assert dedup.shuffle_method(1) == "tasks"
    assert dedup.shuffle_method(dedup.TASKS_SHUFFLE_PARTITIONS) == "tasks"
    assert dedup.shuffle_method(dedup.TASKS_SHUFFLE_PARTITIONS + 1) is None
    with dask.config.set({"dataframe.shuffle.method": "p2p"}):
        assert dedup.shuffle_method(1) is None


def _where(routed, p):
    import time

    from distributed import get_worker

    time.sleep(0.2)  # long enough that a thread is busy when the next task is placed
    return {"partition": p, "rows": len(routed.rows()), "worker": get_worker().address}


def test_the_tasks_of_one_group_spread_over_the_workers_not_beside_its_frame():
    """At 6 quarter-core nodes a verify step's six tasks, all reading one shuffled group, ran one after
    the other on the worker that held it: Dask places a task beside its data. More than twice the
    cluster's threads and its scheduler counts them root-ish, each to the next free thread."""
    from distributed import Client, LocalCluster

    routed, _ = _routed(12, 1)
    with LocalCluster(n_workers=3, threads_per_worker=1, processes=False, dashboard_address=None) as cluster, \
            Client(cluster) as client:
        tasks = dedup.group_tasks(routed, _where, (), 3)
        results = client.gather(client.compute(tasks))
    flat = [s for r in results for s in r]
    assert len(tasks) == 7 and [s["partition"] for s in flat] == list(range(12))
    assert len({s["worker"] for s in flat}) == 3


def test_a_p2p_shuffle_sends_its_inputs_in_pieces_and_gives_the_same_partitions():
    """P2P's transfer of a partition holds about ten times its bytes (fuzzy dedup's bucket shuffle lifted
    a worker 520 MiB at 1M documents): its inputs go in P2P_PIECES pieces. The rows of each output
    partition are the same set as the tasks shuffle's (brute force: the frame's rows by hash)."""
    import dask.dataframe as dd
    from distributed import Client, LocalCluster

    rng = np.random.default_rng(5)
    frame = pd.DataFrame({"bucket": rng.integers(0, 2**63, 4000, dtype=np.uint64),
                          "doc": np.arange(4000, dtype=np.int64)})
    ddf = dd.from_pandas(frame, npartitions=3)
    width = dedup.TASKS_SHUFFLE_PARTITIONS + 2
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=False, dashboard_address=None) as cluster, \
            Client(cluster):
        shuffled = dedup.shuffle(ddf, "bucket", width)
        keys = [str(k) for k in shuffled.__dask_graph__().keys()]
        assert sum("shuffle-transfer" in k for k in keys) == 3 * dedup.P2P_PIECES
        p2p = [sorted(p["doc"]) for p in dask.compute(*shuffled.to_delayed())]
    with dask.config.set({"dataframe.shuffle.method": "tasks"}):
        tasks = [sorted(p["doc"]) for p in dask.compute(*dedup.shuffle(ddf, "bucket", width).to_delayed(),
                                                         scheduler="sync")]
    assert p2p == tasks and sorted(d for p in p2p for d in p) == list(range(4000))


def test_a_shuffle_into_one_partition_is_its_inputs_in_order_with_no_shuffle_tasks():
    """Every row to one partition: the inputs concatenated in order, exactly the frame a tasks shuffle
    into one gives (rows and their order, so every part written from it has the same bytes), without
    the shuffle's split, group and getitem tasks per input."""
    import dask.dataframe as dd

    rng = np.random.default_rng(7)
    frame = pd.DataFrame({"h1": rng.integers(0, 2**63, 900, dtype=np.uint64), "doc": np.arange(900, dtype=np.int64)})
    ddf = dd.from_pandas(frame, npartitions=6)
    one = dedup.shuffle(ddf, "h1", 1)
    assert one.npartitions == 1
    keys = [str(k) for k in one.__dask_graph__().keys()]
    assert not any("shuffle" in k for k in keys), keys
    with dask.config.set(scheduler="sync"):
        got = one.compute()
        shuffled = ddf.shuffle(on="h1", npartitions=1, shuffle_method="tasks").compute()
    pd.testing.assert_frame_equal(got.reset_index(drop=True), shuffled.reset_index(drop=True))
    pd.testing.assert_frame_equal(got.reset_index(drop=True), frame)
