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
# chain A ~ B ~ C, A and C can be far apart. With the check on, a document is removed only for a kept
# document it is itself close to (true Jaccard >= threshold), never kept beside a member of its
# component it is close to, and never removed for one --keep ranks after it (a worse tier or key).
# Rounds decide each component: every round takes candidates (its undecided members with the best
# (tier, key), sampled by a hash of their document numbers among equal ones; under --keep smallest-id
# the smallest ids), compares every undecided member with every candidate and takes the candidates in
# turn, by (tier, key), then those close to the most undecided members of equal (tier, key) first (a
# cloud's hub before its edge; not under smallest-id), then by id: a candidate is kept unless close to
# one kept before it; every member close to a kept candidate is removed for the first of them. A
# decision is final: keeping again a removed document would keep it beside the document it was removed
# for. The rule in words and why it holds: the package doc. A component of n undecided members costs at
# most n x max(CANDIDATES, PAIR_BUDGET / n) comparisons a round.

#: after this many rounds the still undecided documents are kept (never removed unverified); every
#: component of up to 1,024 undecided members is decided whole in one round (PAIR_BUDGET), so this
#: is a safety net
MAX_REFINE_ROUNDS = 32
#: candidates per component and round (more in a small component: PAIR_BUDGET): the more, the likelier
#: they hold a hub close to nearly every member of a cloud of near copies
CANDIDATES = 64
#: comparisons a round may spend on one component: a component of n undecided members has at least
#: min(n, PAIR_BUDGET // n) candidates, so one of up to 1,024 is decided whole in the round (every member a
#: candidate), and a larger one as fast as its budget allows (2^20 pairs: 24 MiB of compact rows, about
#: a CPU-second of set merges).
PAIR_BUDGET = 1 << 20


def hub_first(keep: str) -> bool:
    """Whether ``--keep keep`` lets, among the members it ranks equal, the one close to the most others
    go first: every policy but ``smallest-id``, which keeps the smallest id of a group whatever the
    others are close to, so that a run against a saved index keeps what the joint run keeps when the
    index's ids are the smaller ones (a hub counts the new documents close to it there, not here)."""
    return keeping.parse(keep).kind != "smallest-id"


def candidates_per_member(df: pd.DataFrame) -> np.ndarray:
    """int64 per row of ``df`` (doc, comp: every undecided member of its components): how many
    candidates a round picks in the row's component: CANDIDATES, or more for a small component
    (PAIR_BUDGET)."""
    n = df.groupby("comp", sort=False)["doc"].transform("size").to_numpy(dtype=np.int64)
    return np.maximum(CANDIDATES, np.minimum(n, PAIR_BUDGET // np.maximum(n, 1)))


def doc_hash(docs) -> np.ndarray:
    """uint64 per document number (splitmix64's finaliser): the order candidates of equal rank are
    sampled in. A pure function of the number, so an ``--against`` run, whose documents keep the joint
    run's numbers, samples the same candidates."""
    x = np.asarray(docs, dtype=np.int64).view(np.uint64).copy()
    with np.errstate(over="ignore"):
        x ^= x >> np.uint64(30)
        x *= np.uint64(0xBF58476D1CE4E5B9)
        x ^= x >> np.uint64(27)
        x *= np.uint64(0x94D049BB133111EB)
        x ^= x >> np.uint64(31)
    return x


def _column(df: pd.DataFrame, name: str, dtype) -> np.ndarray:
    return df[name].to_numpy(dtype=dtype) if name in df.columns else np.zeros(len(df), dtype=dtype)


def candidate_ranks(df: pd.DataFrame, hub: bool = True) -> np.ndarray:
    """int64 per row of ``df`` (doc, comp[, id, tier, key]: every undecided member of its components):
    its place in its component by (tier, key, :func:`doc_hash`, doc), 0 for the first. Candidates are
    the first: those --keep prefers, a hash sample among equal ones (not the smallest ids: a cloud's
    hub is as likely to be any copy). Without ``hub`` (``smallest-id``) by the keep rank (tier, key,
    id, doc): the members take turns by id, so the candidates are the smallest ids, whichever round."""
    doc = df["doc"].to_numpy(dtype=np.int64)
    comp = df["comp"].to_numpy(dtype=np.int64)
    if hub:
        order = np.lexsort((doc, doc_hash(doc), _column(df, "key", np.float64), _column(df, "tier", np.int64), comp))
    else:
        order = rank_positions(df)
    starts = np.r_[0, np.flatnonzero(np.diff(comp[order])) + 1] if len(order) else np.zeros(0, np.int64)
    out = np.empty(len(order), dtype=np.int64)
    out[order] = np.arange(len(order)) - np.repeat(starts, np.diff(np.r_[starts, len(order)]))
    return out


def rank_positions(df: pd.DataFrame) -> np.ndarray:
    """Positions of the rows of ``df`` by component, then the keep rank (tier, key, id, doc)."""
    columns = [c for c in ("comp", *keeping.RANK) if c in df.columns]
    return keeping.rank_order(df[columns].reset_index(drop=True), ("comp",)).index.to_numpy(dtype=np.int64)


def pick_candidates(df: pd.DataFrame, hub: bool = True) -> np.ndarray:
    """bool per row of ``df`` (as :func:`candidate_ranks`): the candidates of a round, the
    :func:`candidates_per_member` first of each component by :func:`candidate_ranks`."""
    return candidate_ranks(df, hub) < candidates_per_member(df)


def candidate_pairs(df: pd.DataFrame, hub: bool = True) -> pd.DataFrame:
    """(doc, cand, comp): every undecided member of ``df`` (all of its components) with each candidate
    (:func:`pick_candidates`) but itself, a pair of two candidates once (``doc`` the later one). Built
    with numpy, not a merge: a giant component's pairs are the most rows any task of a round holds."""
    doc = df["doc"].to_numpy(dtype=np.int64)
    comp = df["comp"].to_numpy(dtype=np.int64)
    rank = candidate_ranks(df, hub)
    is_cand = rank < candidates_per_member(df)
    cands = np.flatnonzero(is_cand)
    cands = cands[np.lexsort((rank[cands], comp[cands]))]  # by component, then rank: 0, 1, ... r - 1
    comps, first = np.unique(comp[cands], return_index=True)
    count = np.diff(np.r_[first, len(cands)])
    at = np.searchsorted(comps, comp)  # every component has a candidate: its first member
    # a candidate pairs with the candidates before it (as many as its rank), any other member with all
    n = np.where(is_cand, rank, count[at]) if len(doc) else np.zeros(0, dtype=np.int64)
    member = np.repeat(np.arange(len(doc)), n)
    nth = np.arange(len(member)) - np.repeat(np.cumsum(n) - n, n)
    cand = cands[np.repeat(first[at], n) + nth]
    return pd.DataFrame({"doc": doc[member], "cand": doc[cand], "comp": comp[member]})


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
    that passed the true-Jaccard check, so the second by rank is removed for the first. (About nine in
    ten components are pairs; they no longer fetch two texts per member.)"""
    return decide(pick_representatives(df).assign(jaccard=1.0), threshold, last=True)


def decide(df: pd.DataFrame, threshold: float, last: bool) -> pd.DataFrame:
    """(doc, id, component, kept_id, kept_doc, removed, decided, key, weight) after round 1: the first
    member (``rep``) kept, the members close to it removed for it."""
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


def decide_round(members: pd.DataFrame, close: pd.DataFrame, k: int, last: bool, hub: bool = True) -> pd.DataFrame:
    """Round ``k``: decisions, as :func:`decide`, for ``members`` (doc, comp, id, key, weight[, tier]:
    every undecided member of their components) given ``close`` (doc, cand: the pairs of
    :func:`candidate_pairs` whose true Jaccard reaches the threshold).

    The candidates (:func:`pick_candidates`) take turns by (tier, key), then (``hub``, every --keep but
    smallest-id) the most undecided members of equal (tier, key) close to them first, then (id, doc):
    one is kept unless close to a candidate kept before it. Then every member close to a kept
    candidate is removed for the first of them in turn; the rest stay undecided (kept when ``last``).
    Why no two kept members are close and no member is removed for one --keep ranks after it: nothing
    kept in an earlier round is close to an undecided member (it was compared with it and would have
    removed it), a candidate is compared with every other, and a candidate's turn comes after every
    candidate of better (tier, key), which are all the members of better (tier, key) (candidates are
    the first by it)."""
    from curate.stages.dataset import STRING

    m = keeping.rank_order(members.drop(columns=["cand"], errors="ignore"), ("comp",)).reset_index(drop=True)
    n = len(m)
    doc = m["doc"].to_numpy(dtype=np.int64)
    comp = m["comp"].to_numpy(dtype=np.int64)
    is_cand = pick_candidates(m, hub)
    row = pd.Series(np.arange(n), index=doc)
    x = row.reindex(close["doc"].to_numpy(dtype=np.int64)).to_numpy()
    y = row.reindex(close["cand"].to_numpy(dtype=np.int64)).to_numpy()
    known = ~(np.isnan(x) | np.isnan(y)) if len(x) else np.zeros(0, dtype=bool)
    x, y = x[known].astype(np.int64), y[known].astype(np.int64)
    ok = is_cand[y] & (x != y) & (comp[x] == comp[y])
    x, y = x[ok], y[ok]
    both = is_cand[x]  # two candidates were compared once: the pair counts both ways
    code = np.unique(np.concatenate([x * n + y, y[both] * n + x[both]]))
    x, y = code // max(n, 1), code % max(n, 1)
    # the candidates' turns: (tier, key), then (hub) cover (a cloud's hub before its edge), then the rank.
    # Cover counts the close members --keep ranks equal, not worse ones: against an index, new documents
    # close to an indexed one (tier 0) do not change the indexed documents' turns (its own run's decisions)
    tier, key = _column(m, "tier", np.int64), _column(m, "key", np.float64)
    if hub:
        peers = (tier[x] == tier[y]) & (key[x] == key[y])
        cover = np.bincount(y[peers], minlength=n) + 1
    else:  # smallest-id: the rank alone (``m`` is in rank order)
        cover = np.ones(n, dtype=np.int64)
    order = np.lexsort((np.arange(n), -cover, key, tier, comp))
    order = order[is_cand[order]]
    at = np.full(n, n, dtype=np.int64)  # a candidate's place in ``order`` (components in turn)
    at[order] = np.arange(len(order))
    starts = np.r_[0, np.flatnonzero(np.diff(comp[order])) + 1] if len(order) else np.zeros(0, np.int64)
    turn = np.full(n, -1, dtype=np.int64)
    turn[order] = np.arange(len(order)) - np.repeat(starts, np.diff(np.r_[starts, len(order)]))
    # every component's j-th candidate at once: kept unless covered; a kept one covers the members close to it
    by_turn = np.argsort(turn[y], kind="stable")
    x, y = x[by_turn], y[by_turn]
    turns = int(turn.max()) + 1 if n else 0
    pair_at = np.searchsorted(turn[y], np.arange(turns + 1))
    cand_rows = order[np.argsort(turn[order], kind="stable")]
    cand_at = np.searchsorted(turn[cand_rows], np.arange(turns + 1))
    kept = np.zeros(n, dtype=bool)
    covered = np.zeros(n, dtype=bool)
    for j in range(turns):
        rows = cand_rows[cand_at[j]:cand_at[j + 1]]
        kept[rows[~covered[rows]]] = True
        xs, ys = x[pair_at[j]:pair_at[j + 1]], y[pair_at[j]:pair_at[j + 1]]
        covered[xs[kept[ys]]] = True
    # every member close to a kept candidate: removed for the first of them in turn
    to_kept = kept[y] & ~kept[x]
    first = np.full(n, len(order), dtype=np.int64)
    np.minimum.at(first, x[to_kept], at[y[to_kept]])
    removed = ~kept & (first < len(order))
    kept_row = np.arange(n)
    kept_row[removed] = order[first[removed]]
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
    return out.astype({"id": STRING, "kept_id": STRING})


def _members_task(df, folder, i):
    stats = dedup.save_part(keeping.rank_order(df, ("comp",)), folder, i)
    stats["components"] = int(df["comp"].nunique())
    return stats


def _duplicates_task(df, folder, audit, i, joint=None):
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
