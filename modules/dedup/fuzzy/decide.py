"""The decision rule of fuzzy dedup as pure pandas functions: the members of each component, what each
round of representatives decides (the rule: the package doc; the steps that run the rounds:
:mod:`.rounds`) and the ``duplicates`` step (kept ids, cluster sizes, the audit rows)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from curate.stages import dedup
from curate.stages.dedup import keep as keeping

#: what a member of a component carries: its rank (key, id, doc) and what it stands for (weight)
MEMBER_COLUMNS = ["doc", "comp", "id", "key", "weight"]


def attach_ids(comps: pd.DataFrame, sig_path: str, verified_path: str | None = None) -> pd.DataFrame:
    """(doc, comp, id, key, weight[, loose]): the components of one input partition's documents, with
    their ids, keep keys and weights (and, given the partition's verified edges, whether a document
    joined by a loose edge: :func:`.verify.verified_edges`)."""
    comps = comps.drop_duplicates("doc")
    ids = dedup.load_part(sig_path, ["doc", "id", "key", "weight"])
    out = comps.merge(ids, on="doc", how="left", validate="one_to_one")
    return with_loose(out, verified_path) if verified_path is not None else out


def with_loose(members: pd.DataFrame, verified_path: str) -> pd.DataFrame:
    edges = dedup.load_part(verified_path, ["u", "loose"])
    loose = edges["u"].to_numpy(dtype=np.int64)[edges["loose"].to_numpy(dtype=bool)]
    return members.assign(loose=np.isin(members["doc"].to_numpy(dtype=np.int64), loose))


def component_duplicates(df: pd.DataFrame) -> pd.DataFrame:
    """Per component: the kept id (the first by the keep rank: key, smallest id, document number) and
    who is removed (without the false-positive check: all the others)."""
    from curate.stages.dataset import STRING

    df = keeping.rank_order(df, ("comp",))
    first = df.groupby("comp", sort=False)
    kept_doc = first["doc"].transform("first").to_numpy()
    return pd.DataFrame({
        "doc": df["doc"].to_numpy(dtype=np.int64),
        "id": df["id"].to_numpy(),
        "component": df["comp"].to_numpy(dtype=np.int64),
        "kept_id": first["id"].transform("first").to_numpy(),
        "kept_doc": kept_doc.astype(np.int64),
        "removed": df["doc"].to_numpy() != kept_doc,
        "weight": df["weight"].to_numpy(dtype=np.int64),
    }).astype({"id": STRING, "kept_id": STRING})


def group_sizes(df: pd.DataFrame) -> np.ndarray:
    """int64 per row: on a kept document, its weight plus the weights of the documents removed for it
    (every member of its component must be in ``df``); 0 on a removed one."""
    total = df.groupby("kept_doc", sort=False)["weight"].transform("sum").to_numpy(dtype=np.int64)
    return np.where(df["removed"].to_numpy(dtype=bool), 0, total)


# --------------------------------------------------------------------------- false-positive check of removals
# Edges that pass the check are similar pairs, but a component is their transitive closure: along a
# chain A ~ B ~ C, A and C can be far apart. With the check on, a document is removed only when its
# own similarity to the document it is removed for reaches the threshold. Round 1 keeps each
# component's first member by the keep rank and removes the members close to it; every later round
# compares the undecided members with a few candidates (undecided ones and pool documents, sampled
# by a hash of their document numbers) and decides every candidate (the rule in words: the package
# doc). A component of n undecided members costs at most n x (MAX_CANDIDATES + POOL_SIZE)
# comparisons a round.

#: after this many rounds the still undecided documents are kept (never removed unverified); the
#: doubling candidates decide a chain of L documents in about log2(L) rounds, so this is a safety net
MAX_REFINE_ROUNDS = 32
#: candidates per component in round 2, doubling each round up to MAX_CANDIDATES (which bounds a round's
#: comparisons: at most MAX_CANDIDATES per undecided document)
FIRST_CANDIDATES, MAX_CANDIDATES = 8, 64
#: documents of a component a later round may keep again (its pool, :func:`member_pool`), all of them
#: candidates of each round: the more, the likelier the pool holds a hub close to nearly every member
POOL_SIZE = 64


def candidates_in_round(k: int) -> int:
    return min(FIRST_CANDIDATES << max(k - 2, 0), MAX_CANDIDATES)


#: comparisons a round may spend on one component: a component of n undecided members has at least
#: min(n, PAIR_BUDGET // n) candidates, so one of up to 1,024 is decided whole in the round (every member a
#: candidate), and a larger one as fast as its budget allows (2^20 pairs: 24 MiB of compact rows, about
#: a CPU-second of set merges). Without it the 500 mutually far copies a cloud of 100,000 leaves after
#: round 2 took one round per 64 of them.
PAIR_BUDGET = 1 << 20


def candidates_per_member(df: pd.DataFrame, k: int) -> np.ndarray:
    """int64 per row of ``df`` (doc, comp: every undecided member of its components): how many
    candidates round ``k`` picks in the row's component: candidates_in_round(k), or more for a small
    component (PAIR_BUDGET)."""
    n = df.groupby("comp", sort=False)["doc"].transform("size").to_numpy(dtype=np.int64)
    return np.maximum(candidates_in_round(k), np.minimum(n, PAIR_BUDGET // np.maximum(n, 1)))


def doc_hash(docs) -> np.ndarray:
    """uint64 per document number (splitmix64's finaliser): the order candidates are sampled in. A pure
    function of the number, so an ``--against`` run, whose documents keep the joint run's numbers,
    samples the same candidates."""
    x = np.asarray(docs, dtype=np.int64).view(np.uint64).copy()
    with np.errstate(over="ignore"):
        x ^= x >> np.uint64(30)
        x *= np.uint64(0xBF58476D1CE4E5B9)
        x ^= x >> np.uint64(27)
        x *= np.uint64(0x94D049BB133111EB)
        x ^= x >> np.uint64(31)
    return x


def pick_candidates(df: pd.DataFrame, r) -> np.ndarray:
    """bool per row of ``df`` (doc, comp: every undecided member of its components): the ``r`` members
    of each component with the smallest :func:`doc_hash` (``r``: a number, or one per row, the same
    within a component)."""
    h = doc_hash(df["doc"].to_numpy(dtype=np.int64))
    comp = df["comp"].to_numpy(dtype=np.int64)
    order = np.lexsort((h, comp))
    starts = np.r_[0, np.flatnonzero(np.diff(comp[order])) + 1] if len(order) else np.zeros(0, np.int64)
    nth = np.arange(len(order)) - np.repeat(starts, np.diff(np.r_[starts, len(order)]))
    out = np.zeros(len(df), dtype=bool)
    limit = np.asarray(r)[order] if np.ndim(r) else r
    out[order[nth < limit]] = True
    return out


def candidate_pairs(df: pd.DataFrame, k: int) -> pd.DataFrame:
    """(doc, cand, comp) for round ``k``: every undecided member of ``df`` (rows with ``pool`` False; all
    of its components) with each candidate of its component (:func:`decide_round`) but itself. Rows
    with ``pool`` True are the components' pool documents (:func:`member_pool`)."""
    rows = df[["doc", "comp"]].astype("int64")
    in_pool = df["pool"].to_numpy(dtype=bool) if "pool" in df.columns else np.zeros(len(df), dtype=bool)
    members = rows[~in_pool]
    pool = rows[in_pool & rows["comp"].isin(members["comp"]).to_numpy() & ~rows["doc"].isin(members["doc"]).to_numpy()]
    picked = pick_candidates(members, candidates_per_member(members, k))
    cands = pd.concat([members[picked], pool[pick_candidates(pool, POOL_SIZE)]],
                      ignore_index=True)
    pairs = members.merge(cands.rename(columns={"doc": "cand"}), on="comp", how="inner")
    pairs = pairs[pairs["doc"].to_numpy() != pairs["cand"].to_numpy()]
    return pairs[["doc", "cand", "comp"]].reset_index(drop=True)


def trimmed_pool(df: pd.DataFrame) -> pd.DataFrame:
    """The pool rows of ``df`` (as :func:`candidate_pairs`) of components that still have undecided
    members: the next round's pool, so a round's work follows the undecided documents."""
    in_pool = df["pool"].to_numpy(dtype=bool)
    live = df["comp"].isin(df["comp"][~in_pool]).to_numpy()
    return df[in_pool & live].drop(columns=["pool"]).reset_index(drop=True)


def pick_representatives(df: pd.DataFrame) -> pd.DataFrame:
    """(doc, comp, id, key, weight, rep, rep_id): each undecided member with its component's first
    member by the keep rank (key, smallest id, document number)."""
    df = keeping.rank_order(df, ("comp",))
    first = df.groupby("comp", sort=False)
    columns = [c for c in (*MEMBER_COLUMNS, "tier") if c in df.columns]
    return df[columns].assign(rep=first["doc"].transform("first").to_numpy(dtype=np.int64),
                              rep_id=first["id"].transform("first").to_numpy())


def split_pairs(df: pd.DataFrame, pairs: bool) -> pd.DataFrame:
    """The members of components of exactly two documents joined by a verified edge (``pairs``), or of
    the others (larger ones, and pairs joined by a loose edge, which are compared like them)."""
    groups = df.groupby("comp", sort=False)
    two = groups["doc"].transform("size").to_numpy() == 2
    if "loose" in df.columns:
        two &= ~groups["loose"].transform("any").to_numpy(dtype=bool)
    return df[two == pairs]


def decide_pairs(df: pd.DataFrame, threshold: float) -> pd.DataFrame:
    """Decisions for components of two documents, without their texts: such a component is one edge
    that passed the true-Jaccard check, so the larger id is removed for the smaller. (About nine in
    ten components are pairs; they no longer fetch two texts per member.)"""
    return decide(pick_representatives(df).assign(jaccard=1.0), threshold, last=True)


def decide(df: pd.DataFrame, threshold: float, last: bool) -> pd.DataFrame:
    """(doc, id, component, kept_id, kept_doc, removed, decided, key, weight) after one round."""
    from curate.stages.dataset import STRING

    df = keeping.rank_order(df, ("comp",))
    close = df["jaccard"].to_numpy() >= threshold
    is_rep = df["doc"].to_numpy() == df["rep"].to_numpy()
    doc = df["doc"].to_numpy(dtype=np.int64)
    out = pd.DataFrame({
        "doc": doc,
        "id": df["id"].to_numpy(),
        "component": df["comp"].to_numpy(dtype=np.int64),
        "kept_id": np.where(close, df["rep_id"].to_numpy(), df["id"].to_numpy()),
        "kept_doc": np.where(close, df["rep"].to_numpy(dtype=np.int64), doc),
        "removed": close & ~is_rep,
        "decided": close | last,
        "key": df["key"].to_numpy(dtype=np.float64) if "key" in df.columns else np.zeros(len(df)),
        "weight": df["weight"].to_numpy(dtype=np.int64) if "weight" in df.columns else np.ones(len(df), np.int64),
    })
    if "tier" in df.columns:
        out["tier"] = df["tier"].to_numpy()
    out["round"] = np.int64(1)
    return out.astype({"id": STRING, "kept_id": STRING})


#: a removed document is kept again (promoted) in a later round when it is close to at least this many
#: undecided members that no document kept so far in the round is close to
PROMOTE_MIN = 2


def decide_round(members: pd.DataFrame, pool: pd.DataFrame, close: pd.DataFrame, k: int, last: bool) -> pd.DataFrame:
    """Round ``k`` >= 2: decisions, as :func:`decide`, for ``members`` (doc, comp, id, key, weight[, tier]:
    every undecided member of their components) and for the documents of ``pool`` (their components'
    :func:`member_pool`) it keeps again, given ``close`` (doc, cand: the pairs of :func:`candidate_pairs`
    whose true Jaccard reaches the threshold).

    The candidates are the :func:`candidates_per_member` undecided members and POOL_SIZE pool documents not
    undecided of smallest :func:`doc_hash`. They are taken in turn, those close to the most undecided
    members first (then by rank): an undecided one is kept unless close to one kept before it; a pool
    document (removed in an earlier round, for a document it is close to) is kept again when it is
    close to at least PROMOTE_MIN undecided members no kept candidate is close to yet. Then every
    undecided member close to a kept candidate is removed for the first of them by rank; the rest
    stay undecided (kept when ``last``)."""
    from curate.stages.dataset import STRING

    columns = [c for c in members.columns if c not in ("cand",)]
    undecided = set(members["doc"].to_numpy(dtype=np.int64).tolist())
    pool = pool[pool["comp"].isin(members["comp"]) & ~pool["doc"].isin(undecided)][columns]
    m = pd.concat([members[columns].assign(_u=True), pool.assign(_u=False)], ignore_index=True)
    m = keeping.rank_order(m, ("comp",)).reset_index(drop=True)  # rows in rank order within components
    n = len(m)
    doc = m["doc"].to_numpy(dtype=np.int64)
    comp = m["comp"].to_numpy(dtype=np.int64)
    is_u = m["_u"].to_numpy(dtype=bool)
    is_cand = np.zeros(n, dtype=bool)
    at = np.flatnonzero(is_u)
    is_cand[at[pick_candidates(m.iloc[at], candidates_per_member(m.iloc[at], k))]] = True
    at = np.flatnonzero(~is_u)
    is_cand[at[pick_candidates(m.iloc[at], POOL_SIZE)]] = True
    row = pd.Series(np.arange(n), index=doc)
    x = row.reindex(close["doc"].to_numpy(dtype=np.int64)).to_numpy()
    y = row.reindex(close["cand"].to_numpy(dtype=np.int64)).to_numpy()
    known = ~(np.isnan(x) | np.isnan(y)) if len(x) else np.zeros(0, dtype=bool)
    x, y = x[known].astype(np.int64), y[known].astype(np.int64)
    keep = is_u[x] & is_cand[y]
    x, y = x[keep], y[keep]
    # the candidates' turns: most undecided members close to them first (a cloud's hub before its edge)
    cover = np.bincount(y, minlength=n) + (is_cand & is_u)
    order = np.lexsort((np.arange(n), -cover, comp))
    order = order[is_cand[order]]
    nth = np.full(n, -1, dtype=np.int64)
    nth[order] = m.iloc[order].groupby("comp", sort=False).cumcount().to_numpy()
    kept = np.zeros(n, dtype=bool)
    covered = np.zeros(n, dtype=bool)
    for j in range(int(nth.max()) + 1 if n else 0):
        turn = nth[y] == j
        live = np.bincount(y[turn & ~covered[x]], minlength=n)
        new = (nth == j) & np.where(is_u, ~covered, live >= PROMOTE_MIN)
        kept |= new
        covered |= new
        covered[x[turn & new[y]]] = True
    # every undecided member close to a kept candidate: removed for the first of them by rank
    to_kept = kept[y] & ~kept[x]
    first = np.full(n, n, dtype=np.int64)
    np.minimum.at(first, x[to_kept], y[to_kept])
    removed = is_u & ~kept & (first < n)
    emit = is_u | kept  # the undecided members, and the pool documents kept again
    kept_row = np.where(removed, first, np.arange(n))
    out = pd.DataFrame({
        "doc": doc,
        "id": m["id"].to_numpy(),
        "component": comp,
        "kept_id": m["id"].to_numpy()[kept_row],
        "kept_doc": doc[kept_row],
        "removed": removed,
        "decided": kept | removed | last,
        "key": m["key"].to_numpy(dtype=np.float64),
        "weight": m["weight"].to_numpy(dtype=np.int64),
    })
    if "tier" in m.columns:
        out["tier"] = m["tier"].to_numpy()
    out["round"] = np.int64(k)
    return out[emit].reset_index(drop=True).astype({"id": STRING, "kept_id": STRING})


def member_pool(df: pd.DataFrame) -> pd.DataFrame:
    """The documents a later round may keep again (promote): of each component of three or more, its
    POOL_SIZE members of smallest :func:`doc_hash` (member columns)."""
    columns = [c for c in (*MEMBER_COLUMNS, "tier") if c in df.columns]
    size = df.groupby("comp", sort=False)["doc"].transform("size").to_numpy()
    big = df[size >= 3][columns]
    return big[pick_candidates(big, POOL_SIZE)].reset_index(drop=True)


def _members_task(df, folder, i, pool=None):
    stats = dedup.save_part(keeping.rank_order(df, ("comp",)), folder, i)
    stats["components"] = int(df["comp"].nunique())
    if pool is not None:
        stats["outputs"] = stats.get("outputs", []) + dedup.save_part(member_pool(df), pool, i).get("outputs", [])
    return stats


def _duplicates_task(df, folder, audit, i, joint=None):
    if "round" in df.columns:  # a document a later round kept again (promoted): its last decision holds
        df = df.sort_values("round", kind="stable").drop_duplicates("doc", keep="last")
    out = df if "component" in df.columns else component_duplicates(df)
    out = out.assign(size=group_sizes(out))
    columns = ["doc", "id", "component", "kept_id", "removed", "size"]
    mine = out
    if joint is not None and joint.bases:  # an --against run: the indexes' members are decided too
        out = out.assign(kept_in=joint.labels_of(out["kept_doc"].to_numpy(dtype=np.int64)))
        columns.append("kept_in")
        mine = out[joint.mine(out["doc"].to_numpy(dtype=np.int64))]
    audit_stats = dedup.save_part(mine[columns].drop(columns=["doc", "size"]), audit, i)
    stats = dedup.save_part(out[columns], folder, i)
    stats["outputs"] = stats.get("outputs", []) + audit_stats.get("outputs", [])
    stats["mine"] = len(mine)
    stats["removed"] = int(mine["removed"].sum())
    stats["kept"] = int((~mine["removed"]).sum())
    if "kept_in" in mine.columns:
        stats["removed_for_index"] = int((mine["removed"] & mine["kept_in"].notna()).sum())
    return stats
