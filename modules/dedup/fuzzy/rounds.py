"""Step 7 of fuzzy dedup: the rounds that decide each component (``refine/round-NN``), as steps.

The rule is in :mod:`.decide` (and in plain words in the package doc); here is how each round runs
in memory bounded by partitions. Everything shuffled is a compact row (document numbers, ids, keys);
similarities are computed where the first document of a pair lives, from shingle sets read by byte
ranges (:mod:`.verify`); no text is read.

- Round 1, on the ``members`` step (every component within one partition): components of two joined
  by a verified edge are decided without sets (the edge is the check); the members of the others go
  through the three steps of every round.
- Round k on the members round k - 1 left undecided (round 1: all of them), in three steps:
  ``refine/round-NN-pairs`` (the undecided members, shuffled on the component; each member paired
  with the candidates of its component), ``refine/round-NN-close`` (the pairs at their members'
  input partitions: those at or above the threshold) and ``refine/round-NN`` (the members and the
  close pairs, shuffled on the component again: :func:`.decide.decide_round`). Every shuffle has as
  many partitions as the input.

Every document is decided once and for good: keeping again a document removed earlier would keep it
beside the document it was removed for, which it is close to.

Rounds stop when no member is undecided, or after ``MAX_REFINE_ROUNDS`` (the rest are kept).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from curate.stages import dedup
from curate.stages.dedup.fuzzy.decide import (
    MAX_REFINE_ROUNDS,
    MEMBER_COLUMNS,
    candidate_pairs,
    decide_pairs,
    decide_round,
    hub_first,
    split_pairs,
)
from curate.stages.dedup.fuzzy.verify import close_pairs


def _round_stats(out: pd.DataFrame, folder, i: int) -> dict:
    stats = dedup.save_part(out, folder, i)
    stats["undecided"] = int((~out["decided"]).sum())
    return stats


def _decide_pairs_task(df, folder, i, threshold):
    return _round_stats(decide_pairs(df, threshold), folder, i)


def _pairs_task(df, folder, i, hub):
    return dedup.save_part(candidate_pairs(df, hub), folder, i)


def _close_task(pairs, p, store, threshold, folder):
    if isinstance(pairs, dedup.Routed):
        pairs = pairs.rows()
    return dedup.save_part(close_pairs(pairs[["doc", "cand", "comp"]], "doc", "cand", p, store, threshold), folder, p)


def _decide_round_task(df, k, last, folder, i, hub):
    cand = df["cand"].to_numpy()
    members = df[cand == UNDECIDED].drop(columns=["cand"])
    return _round_stats(decide_round(members, df[cand >= 0][["doc", "cand"]], k, last, hub), folder, i)


#: ``cand`` of the member rows that travel with a round's close pairs
UNDECIDED = -1


def refine_removals(steps, store, settings, joint, partitions: int):
    """The rounds over the members of every component (the module doc); returns (a Dask
    DataFrame of every member's decision, the number of rounds). ``partitions``: input partitions of
    the joint numbering (the indexes' and this run's)."""
    import dask.dataframe as dd

    from curate.stages.dataset import STRING

    columns = MEMBER_COLUMNS + (["tier"] if joint.bases else [])
    hub = hub_first(settings.keep)
    # partitions of every shuffle, however many rounds: as many as the members' bytes ask for
    width = dedup.compact_partitions(steps.path("members"))
    i64 = pd.Series([], dtype="int64")
    meta = pd.DataFrame({"doc": i64, "comp": i64, "id": pd.Series([], dtype=STRING),
                         "key": pd.Series([], dtype="float64"), "weight": i64, **({"tier": i64} if joint.bases else {})})
    members, rounds = dedup.read_compact(steps.path("members")), []
    # components of two joined by a verified edge are decided in round 1 without sets
    two = members.map_partitions(split_pairs, True, meta=members._meta)
    undecided = members.map_partitions(split_pairs, False, meta=members._meta)[columns]
    for k in range(1, MAX_REFINE_ROUNDS + 1):
        last, name = k == MAX_REFINE_ROUNDS, f"refine/round-{k:02d}"
        if k > 1:
            previous = dedup.read_compact(rounds[-1])
            undecided = previous[~previous["decided"]].rename(columns={"component": "comp"})[columns]
        paired = steps.run(f"{name}-pairs", lambda folder, u=undecided: _pairs_tasks(folder, u, width, hub))
        pairs = steps.path(f"{name}-pairs")
        threads = dedup.spread(steps.ctx.slots, paired["rows"])
        steps.run(f"{name}-close", lambda folder, q=pairs, t=threads: _close_tasks(folder, q, store, settings.threshold,
                                                                                partitions, t))
        close = steps.path(f"{name}-close")
        info = steps.run(name, lambda folder, u=undecided, c=close, k=k, last=last, t=two if k == 1 else None:
                         _decide_round_tasks(folder, u, c, k, last, meta, width, hub, t, settings.threshold))
        rounds.append(steps.path(name))
        if sum(p["undecided"] for p in info["parts"]) == 0:
            break
    files = [f for d in rounds for f in dedup.list_parts(d)]
    decisions = dd.from_map(dedup.load_part, files, meta=dedup.load_part(files[0]).iloc[:0],
                            enforce_metadata=False, divisions=[None] * (len(files) + 1))
    return decisions[decisions["decided"]], len(rounds)


def _pairs_tasks(folder, undecided, width, hub):
    import dask

    task = dask.delayed(_pairs_task, pure=False)
    by_comp = dedup.shuffle(undecided, "comp", width)
    return [task(part, folder, i, hub) for i, part in enumerate(by_comp.to_delayed())]


def _close_tasks(folder, pairs, store, threshold, partitions, threads):
    routed = dedup.route_to_groups(dedup.read_compact(pairs), "doc", partitions, dedup.compact_partitions(pairs))
    return dedup.group_tasks(routed, _close_task, (store, threshold, folder), threads)


def _decide_round_tasks(folder, undecided, close, k, last, meta, width, hub, two=None, threshold=None):
    import dask
    import dask.dataframe as dd

    near = dedup.read_compact(close)
    near = near.map_partitions(_as_member_rows, meta, meta=meta.assign(cand=meta["doc"]))
    rows = dd.concat([undecided.assign(cand=np.int64(UNDECIDED)), near], ignore_unknown_divisions=True)
    task = dask.delayed(_decide_round_task, pure=False)
    by_comp = dedup.shuffle(rows, "comp", width)
    tasks = [task(part, k, last, folder, i, hub) for i, part in enumerate(by_comp.to_delayed())]
    if two is not None:  # round 1: the components of two, after the others' parts
        pair = dask.delayed(_decide_pairs_task, pure=False)
        tasks += [pair(part, folder, len(tasks) + i, threshold) for i, part in enumerate(two.to_delayed())]
    return tasks


def _as_member_rows(close: pd.DataFrame, meta: pd.DataFrame) -> pd.DataFrame:
    """Close pairs (doc, cand, comp) in the columns of member rows (the rest empty), to travel with them."""
    out = {c: pd.Series(np.zeros(len(close)), dtype=meta[c].dtype) if c not in ("id",) else
           pd.Series([None] * len(close), dtype=meta[c].dtype) for c in meta.columns}
    out["doc"] = close["doc"].to_numpy(dtype=np.int64)
    out["comp"] = close["comp"].to_numpy(dtype=np.int64)
    frame = pd.DataFrame(out)
    return frame.assign(cand=close["cand"].to_numpy(dtype=np.int64))
