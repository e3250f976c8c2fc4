"""Step 7 of fuzzy dedup: the rounds that decide each component (``refine/round-NN``), as steps.

The rule is in :mod:`.decide` (and in plain words in the package doc); here is how each round runs
in memory bounded by partitions. Everything shuffled is a compact row (document numbers, ids, keys);
similarities are computed where the first document of a pair lives, from shingle sets read by byte
ranges (:mod:`.verify`); no text is read.

- Round 1, on the ``members`` step (every component within one partition, in rank order):
  components of two joined by a verified edge are decided without sets; every member of the others
  is paired with its first member by rank, the pairs go to the members' input partitions, where
  their similarity is computed and each member decided on its own row.
- Round k >= 2 on the members round k - 1 left undecided, in three steps:
  ``refine/round-NN-pairs`` (the undecided members and the pool, shuffled on the component; each
  member paired with the candidates of its component; beside it ``-pool``, the pool of the
  components still undecided, which the next round reads instead of the whole pool),
  ``refine/round-NN-close`` (the pairs at their members' input partitions: those at or above the
  threshold) and ``refine/round-NN`` (the members, the pool and the close pairs, shuffled on the
  component again: :func:`.decide.decide_round`). Every shuffle has as many partitions as the input.

A document a round keeps again (promotes) was decided removed by an earlier round: its last decision
(the ``round`` column) is the one the ``duplicates`` step keeps.

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
    decide,
    decide_pairs,
    decide_round,
    pick_representatives,
    split_pairs,
    trimmed_pool,
)
from curate.stages.dedup.fuzzy.verify import close_pairs, pair_jaccard


def first_round(df: pd.DataFrame, p: int, store, threshold: float, last: bool) -> pd.DataFrame:
    """Round 1 for the members of input partition ``p`` (with ``rep``, their component's first member):
    their similarity to it (1 for the first member itself) and what it decides."""
    doc = df["doc"].to_numpy(dtype=np.int64)
    rep = df["rep"].to_numpy(dtype=np.int64)
    jac = np.ones(len(df), dtype=np.float64)
    other = doc != rep
    jac[other] = pair_jaccard(doc[other], rep[other], p, store)
    return decide(df.assign(jaccard=jac), threshold, last)


def _round_stats(out: pd.DataFrame, folder, i: int) -> dict:
    stats = dedup.save_part(out, folder, i)
    stats["undecided"] = int((~out["decided"]).sum())
    return stats


def _first_round_task(df, p, store, threshold, last, folder, i):
    return _round_stats(first_round(df, p, store, threshold, last), folder, i)


def _decide_pairs_task(df, folder, i, threshold):
    return _round_stats(decide_pairs(df, threshold), folder, i)


def _pairs_task(df, k, folder, pool, i):
    stats = dedup.save_part(candidate_pairs(df, k), folder, i)
    stats["outputs"] = stats.get("outputs", []) + dedup.save_part(trimmed_pool(df), pool, i).get("outputs", [])
    return stats


def _close_task(pairs, p, store, threshold, folder):
    return dedup.save_part(close_pairs(pairs[["doc", "cand", "comp"]], "doc", "cand", p, store, threshold), folder, p)


def _decide_round_task(df, k, last, folder, i):
    cand = df["cand"].to_numpy()
    members = df[cand == UNDECIDED].drop(columns=["cand"])
    pool = df[cand == POOL].drop(columns=["cand"])
    out = decide_round(members, pool, df[cand >= 0][["doc", "cand"]], k, last)
    stats = _round_stats(out, folder, i)
    stats["kept_again"] = int((~out["doc"].isin(members["doc"])).sum())
    return stats


#: ``cand`` of the member rows that travel with a round's close pairs: undecided members, pool documents
UNDECIDED, POOL = -1, -2


def refine_removals(steps, store, settings, joint, partitions: int):
    """Rounds of representatives over the members of every component (the module doc); returns (a Dask
    DataFrame of every member's decision, the number of rounds). ``partitions``: input partitions of
    the joint numbering (the indexes' and this run's)."""
    import dask.dataframe as dd

    from curate.stages.dataset import STRING

    columns = MEMBER_COLUMNS + (["tier"] if joint.bases else [])
    width = max(len(store.sig_files), 1)  # partitions of every shuffle: this run's, however many rounds
    i64 = pd.Series([], dtype="int64")
    meta = pd.DataFrame({"doc": i64, "comp": i64, "id": pd.Series([], dtype=STRING),
                         "key": pd.Series([], dtype="float64"), "weight": i64, **({"tier": i64} if joint.bases else {})})
    source, pool, rounds = steps.path("members"), steps.side("pool", "members"), []
    for k in range(1, MAX_REFINE_ROUNDS + 1):
        last, name = k == MAX_REFINE_ROUNDS, f"refine/round-{k:02d}"
        if k == 1:
            info = steps.run(name, lambda folder, s=source, last=last: _first_round_tasks(
                folder, s, store, settings.threshold, last, partitions, meta))
        else:
            previous = dedup.read_parts(source)
            undecided = previous[~previous["decided"]].rename(columns={"component": "comp"})[columns]
            pool_rows = dedup.read_parts(pool)[columns]
            pool = steps.side(f"{name}-pool", f"{name}-pairs")
            steps.run(f"{name}-pairs", lambda folder, u=undecided, q=pool_rows, k=k, out=pool: _pairs_tasks(
                folder, u, q, k, out, width), extra_dirs=(pool,))
            pairs = steps.path(f"{name}-pairs")
            steps.run(f"{name}-close", lambda folder, q=pairs: _close_tasks(folder, q, store, settings.threshold,
                                                                         partitions))
            close = steps.path(f"{name}-close")
            info = steps.run(name, lambda folder, u=undecided, q=pool, c=close, k=k, last=last: _decide_round_tasks(
                folder, u, dedup.read_parts(q)[columns], c, k, last, meta, width))
        source = steps.path(name)
        rounds.append(source)
        if sum(p["undecided"] for p in info["parts"]) == 0:
            break
    files = [f for d in rounds for f in dedup.list_parts(d)]
    decisions = dd.from_map(dedup.load_part, files, meta=dedup.load_part(files[0]).iloc[:0],
                            enforce_metadata=False, divisions=[None] * (len(files) + 1))
    return decisions[decisions["decided"]], len(rounds)


def _first_round_tasks(folder, source, store, threshold, last, partitions, meta):
    import dask

    members = dedup.read_parts(source)
    pair = dask.delayed(_decide_pairs_task, pure=False)
    tasks = [pair(part, folder, i, threshold) for i, part in enumerate(
        members.map_partitions(split_pairs, True, meta=members._meta).to_delayed())]
    larger = members.map_partitions(split_pairs, False, meta=members._meta)
    reps = larger.map_partitions(pick_representatives, meta=meta.assign(rep=meta["doc"], rep_id=meta["id"]))
    task = dask.delayed(_first_round_task, pure=False)
    return tasks + [task(r, p, store, threshold, last, folder, len(tasks) + p)
                    for p, r in enumerate(dedup.route_to_input(reps, "doc", partitions))]


def _pairs_tasks(folder, undecided, pool, k, pool_out, width):
    import dask
    import dask.dataframe as dd

    rows = dd.concat([undecided.assign(pool=False), pool.assign(pool=True)], ignore_unknown_divisions=True)
    task = dask.delayed(_pairs_task, pure=False)
    by_comp = rows.shuffle(on="comp", npartitions=width)
    return [task(part, k, folder, pool_out, i) for i, part in enumerate(by_comp.to_delayed())]


def _close_tasks(folder, pairs, store, threshold, partitions):
    import dask

    routed = dedup.route_to_input(dedup.read_parts(pairs), "doc", partitions)
    task = dask.delayed(_close_task, pure=False)
    return [task(part, p, store, threshold, folder) for p, part in enumerate(routed)]


def _decide_round_tasks(folder, undecided, pool, close, k, last, meta, width):
    import dask
    import dask.dataframe as dd

    near = dedup.read_parts(close)
    near = near.map_partitions(_as_member_rows, meta, meta=meta.assign(cand=meta["doc"]))
    rows = dd.concat([undecided.assign(cand=np.int64(UNDECIDED)), pool.assign(cand=np.int64(POOL)), near],
                     ignore_unknown_divisions=True)
    task = dask.delayed(_decide_round_task, pure=False)
    by_comp = rows.shuffle(on="comp", npartitions=width)
    return [task(part, k, last, folder, i) for i, part in enumerate(by_comp.to_delayed())]


def _as_member_rows(close: pd.DataFrame, meta: pd.DataFrame) -> pd.DataFrame:
    """Close pairs (doc, cand, comp) in the columns of member rows (the rest empty), to travel with them."""
    out = {c: pd.Series(np.zeros(len(close)), dtype=meta[c].dtype) if c not in ("id",) else
           pd.Series([None] * len(close), dtype=meta[c].dtype) for c in meta.columns}
    out["doc"] = close["doc"].to_numpy(dtype=np.int64)
    out["comp"] = close["comp"].to_numpy(dtype=np.int64)
    frame = pd.DataFrame(out)
    return frame.assign(cand=close["cand"].to_numpy(dtype=np.int64))
