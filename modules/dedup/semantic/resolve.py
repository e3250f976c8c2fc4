"""Steps 6-7, ``resolve`` and ``audit``: the removals whose chain leaves their cluster.

With ``--probes`` > 1 a member can be removed for a *witness*: an earlier document whose home is
another cluster (see :mod:`.compare`). Its chain of nearest documents then continues in the witness's
home, which another task decided; so does the weight that members chaining to the witness bring to the
document that finally keeps them. The ``duplicates`` step writes those links (``_work/links/``: each
removed member whose chain ends at a witness, and each witness that members chain to, with the weight
they carry), and:

* ``resolve`` (one task) follows each witness to its final kept document: the witness itself when its
  home kept it, else the end of its own chain (looked up in the ``duplicates`` parts, again when that
  chain too ends at a witness; every step goes to an earlier document in the ``--keep`` order, so it
  ends). It writes rank-1 rows beside the ``duplicates`` step's rank-0 ones: a removed member's final
  ``kept_id``, and the weight each final kept document gains. Its memory is the links, not the removals.
* ``audit`` (a task per comparison range) writes ``_duplicates/``: the range's removals with their final
  ``kept_id``.

Without witnesses both steps write empty parts.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow.parquet as pq

from curate.stages import dedup

AUDIT_COLUMNS = ["id", "kept_id", "cosine", "cluster", "nearest_id"]


def _lookup(dup_paths, docs: set) -> dict:
    """doc -> (removed, kept_doc, kept_id, via) of the listed members among ``docs``."""
    found = {}
    wanted = sorted(docs)
    for p in dup_paths:
        t = pq.read_table(p, columns=["doc", "removed", "kept_doc", "kept_id", "via"],
                          filters=[("doc", "in", wanted)])
        for d, r, k, kid, v in zip(*(t.column(c).to_pylist() for c in t.column_names)):
            found[d] = (r, k, kid, v)
    return found


def final_kept(dup_paths, names: dict) -> dict:
    """doc -> (final kept doc, its id) of each witness document in ``names`` (doc -> id)."""
    final: dict[int, tuple[int, str]] = {}
    step: dict[int, int] = {}  # a witness removed for yet another witness: the next one
    pending = set(names)
    while pending:
        found = _lookup(dup_paths, pending)
        nxt = set()
        for e in pending:
            removed, kept_doc, kept_id, via = found.get(e, (False, e, names[e], False))
            if not removed:
                final[e] = (e, names[e])
            elif not via:
                final[e] = (kept_doc, kept_id)
            else:
                step[e] = kept_doc
                names.setdefault(kept_doc, kept_id)
                if kept_doc not in final and kept_doc not in step:
                    nxt.add(kept_doc)
        pending = nxt
    for e in step:
        chain = [e]
        while chain[-1] not in final:
            chain.append(step[chain[-1]])
        for c in chain:
            final[c] = final[chain[-1]]
    return final


def resolve_task(dup_paths, link_paths, folder) -> dict:
    links = dedup.load_parts(tuple(link_paths)) if link_paths else pd.DataFrame(
        {"doc": [], "id": [], "end_doc": [], "end_id": [], "carry": []})
    carry = links["carry"].to_numpy(dtype=np.int64)
    via, carriers = links[carry == 0], links[carry > 0]
    names = dict(zip(via["end_doc"].tolist(), via["end_id"].tolist()))
    names.update(zip(carriers["doc"].tolist(), carriers["id"].tolist()))
    final = final_kept(dup_paths, names)
    relinked = [final[e] for e in via["end_doc"].tolist()]
    gains = [final[w] for w in carriers["doc"].tolist()]
    from curate.stages.dataset import STRING

    rows = pd.DataFrame({
        "doc": np.array(via["doc"].tolist() + [d for d, _ in gains], dtype=np.int64),
        "kept_id": pd.array([i for _, i in relinked] + [None] * len(gains), dtype=STRING),
        "removed": np.array([True] * len(via) + [False] * len(gains)),
        "size": np.concatenate([np.zeros(len(via), np.int64), carriers["carry"].to_numpy(dtype=np.int64)]),
        "rank": np.ones(len(via) + len(gains), dtype=np.int8)})
    return dedup.save_part(rows, folder, 0)


def audit_task(candidates: str, resolved: str, audit, j: int) -> dict:
    """``_duplicates/part-j``: range j's removals, each with its final kept id."""
    trail = dedup.load_part(candidates)
    if trail["via"].any():
        relinks = pd.read_parquet(resolved, columns=["doc", "kept_id", "removed"])
        relinks = relinks[relinks["removed"]].set_index("doc")["kept_id"]
        via = trail["via"].to_numpy()
        trail = trail.copy()
        trail.loc[via, "kept_id"] = relinks.reindex(trail.loc[via, "doc"]).to_numpy()
    return dedup.save_part(trail[AUDIT_COLUMNS].reset_index(drop=True), audit, j)
