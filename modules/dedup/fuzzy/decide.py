"""Steps 6-8 of fuzzy dedup: the members of each component, the rounds that decide them (the decision
rule, see the package doc) and the ``duplicates`` step (kept ids, cluster sizes, the audit rows)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from curate.stages import dedup
from curate.stages.dedup import keep as keeping
from curate.stages.dedup.fuzzy.against import Joint
from curate.stages.dedup.fuzzy.settings import FuzzyDedupSettings
from curate.stages.dedup.fuzzy.verify import similarities

#: what a member of a component carries: its rank (key, id, doc) and what it stands for (weight)
MEMBER_COLUMNS = ["doc", "comp", "id", "key", "weight"]


def attach_ids(comps: pd.DataFrame, sig_path: str) -> pd.DataFrame:
    """(doc, comp, id, key, weight): the components of one input partition's documents, with their
    ids, keep keys and weights."""
    comps = comps.drop_duplicates("doc")
    ids = dedup.load_part(sig_path, ["doc", "id", "key", "weight"])
    return comps.merge(ids, on="doc", how="left", validate="one_to_one")


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
# own similarity to the kept document reaches the threshold. Each round, the undecided members of
# every component take the smallest of them as representative; members close enough to it are
# removed (kept_id = the representative), the representative is kept, the others stay undecided.
# Most components are decided in one round; a chain needs about one round per threshold-sized step.

#: after this many rounds the still undecided documents are kept (never removed unverified)
MAX_REFINE_ROUNDS = 16


def pick_representatives(df: pd.DataFrame) -> pd.DataFrame:
    """(doc, comp, id, key, weight, rep, rep_id): each undecided member with its component's first
    member by the keep rank (key, smallest id, document number)."""
    df = keeping.rank_order(df, ("comp",))
    first = df.groupby("comp", sort=False)
    columns = [c for c in (*MEMBER_COLUMNS, "tier") if c in df.columns]
    return df[columns].assign(rep=first["doc"].transform("first").to_numpy(dtype=np.int64),
                              rep_id=first["id"].transform("first").to_numpy())


def split_pairs(df: pd.DataFrame, pairs: bool) -> pd.DataFrame:
    """The members of components of exactly two documents (``pairs``) or of the larger ones."""
    size = df.groupby("comp", sort=False)["doc"].transform("size").to_numpy()
    return df[(size == 2) == pairs]


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
    return out.astype({"id": STRING, "kept_id": STRING})


def _members_task(df, folder, i):
    stats = dedup.save_part(keeping.rank_order(df, ("comp",)), folder, i)
    stats["components"] = int(df["comp"].nunique())
    return stats


def _decide_task(df, folder, i, threshold, last):
    out = decide(df, threshold, last)
    stats = dedup.save_part(out, folder, i)
    stats["undecided"] = int((~out["decided"]).sum())
    return stats


def _decide_pairs_task(df, folder, i, threshold):
    out = decide_pairs(df, threshold)
    stats = dedup.save_part(out, folder, i)
    stats["undecided"] = 0
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


def _with_self_similarity(df: pd.DataFrame) -> pd.DataFrame:
    jac = df["jaccard"].to_numpy().copy()
    jac[df["doc"].to_numpy() == df["rep"].to_numpy()] = 1.0
    return df.assign(jaccard=jac)


def refine_removals(steps, inputs, settings: FuzzyDedupSettings, joint: Joint | None = None):
    """Rounds of representatives (``refine/round-NN`` steps) over the members of every component;
    returns (a Dask DataFrame of every member's decision, the number of rounds)."""
    import dask
    import dask.dataframe as dd

    from curate.stages.dataset import STRING
    from curate.stages.dedup.components import EDGE_META

    joint = joint or Joint()
    columns = MEMBER_COLUMNS + (["tier"] if joint.bases else [])
    reps_meta = pd.DataFrame({"doc": EDGE_META["u"], "comp": EDGE_META["u"], "id": pd.Series([], dtype=STRING),
                              "key": pd.Series([], dtype="float64"), "weight": EDGE_META["u"],
                              **({"tier": EDGE_META["u"]} if joint.bases else {}),
                              "rep": EDGE_META["u"], "rep_id": pd.Series([], dtype=STRING)})
    source, rounds = steps.path("members"), []
    for k in range(1, MAX_REFINE_ROUNDS + 1):
        def refine(folder, source=source, last=(k == MAX_REFINE_ROUNDS)):
            undecided = dedup.read_parts(source)
            pairs = []
            if "decided" in undecided.columns:
                undecided = undecided[~undecided["decided"]].rename(columns={"component": "comp"})
                undecided = undecided[columns]
            else:  # round 1, on the members (every component within one partition): pairs need no text
                pair = dask.delayed(_decide_pairs_task, pure=False)
                pairs = [pair(part, folder, i, settings.threshold) for i, part in enumerate(
                    undecided.map_partitions(split_pairs, True, meta=undecided._meta).to_delayed())]
                undecided = undecided.map_partitions(split_pairs, False, meta=undecided._meta)
            reps = undecided.map_partitions(pick_representatives, meta=reps_meta)
            parts, meta = similarities(reps, "doc", "rep", inputs, joint, settings)
            mark = dask.delayed(_with_self_similarity, pure=True)
            checked = dd.from_delayed([mark(p) for p in parts], meta=meta,
                                      divisions=[None] * (len(parts) + 1), verify_meta=False)
            task = dask.delayed(_decide_task, pure=False)
            return pairs + [task(part, folder, len(pairs) + i, settings.threshold, last)
                            for i, part in enumerate(checked.shuffle(on="comp").to_delayed())]

        name = f"refine/round-{k:02d}"
        info = steps.run(name, refine)
        source = steps.path(name)
        rounds.append(source)
        if sum(p["undecided"] for p in info["parts"]) == 0:
            break
    files = [f for d in rounds for f in dedup.list_parts(d)]
    decisions = dd.from_map(dedup.load_part, files, meta=dedup.load_part(files[0]).iloc[:0],
                            enforce_metadata=False, divisions=[None] * (len(files) + 1))
    return decisions[decisions["decided"]], len(rounds)
