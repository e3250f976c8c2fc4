"""An accuracy audit of every fuzzy run (issue 33, point 3): how well did this run's LSH and checks do?

A uniform sample of the run's documents (``--audit-sample``, default 2,000: the documents with the
smallest hash of their number, so the same on every rerun) is compared all against all with the true
Jaccard similarity of their shingle sets (the sets the run wrote, read by byte ranges: no text is
read again). Only the pairs at or above the threshold matter, and an exact similarity join finds them
(:mod:`.audit_pairs`: prefix filtering), the same pairs as comparing all n(n-1)/2 would. Against that
truth:

- **recall**: of the sampled pairs at or above the threshold, the share the run deduplicated: put in
  one component and removed at least one of (two documents kept side by side are still a near
  duplicate in the output, whatever component they share);
- **precision**: of the sampled documents the run removed, the share whose true similarity to the
  document they were removed for (``kept_id``) reaches the threshold.

Each with its 95% Wilson interval and the counts it rests on (pairs are rare in a uniform sample of a
large corpus, so the interval says how much the figure means). Also the distribution of component
sizes over the whole run. The cost is bounded by the sample: 0.12 CPU-second at 2,000 pages of ~550
shingles with a tenth near copies (comparing all 2M pairs took 8.7; ``jobs/bench_dedup.py audit``),
up to those n(n-1)/2 comparisons only when the sample is one cloud of near copies; the sample's sets
in memory, one chunk of candidate pairs, and one compact pass over the run's decisions. No peer
reports its own dedup accuracy; this goes to the manifest (``dedup.audit``) and the HTML report.
"""

from __future__ import annotations

import math
import time

import numpy as np

#: the documents audited by default; 0 turns the audit off
SAMPLE = 2000
#: component sizes are counted in these bins (upper bounds; the last is open)
SIZE_BINS = (2, 3, 5, 10, 100, 1000, 10_000)


def wilson(k: int, n: int, z: float = 1.96) -> list[float] | None:
    """The 95% Wilson score interval of a proportion k/n (None without observations)."""
    if n <= 0:
        return None
    p = k / n
    d = 1 + z * z / n
    c = (p + z * z / (2 * n)) / d
    h = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / d
    return [round(max(0.0, c - h), 4), round(min(1.0, c + h), 4)]


def _mix(x: np.ndarray) -> np.ndarray:
    """A 64-bit hash of document numbers (splitmix64's finaliser): the sample's order."""
    x = x.astype(np.uint64) + np.uint64(0x9E3779B97F4A7C15)
    x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return x ^ (x >> np.uint64(31))


def sample_docs(store, partitions: range, k: int) -> np.ndarray:
    """The ``k`` document numbers with the smallest hash among every document with a set (each part's
    own k smallest first: one small read per partition)."""
    best = np.zeros(0, dtype=np.int64)
    for p in partitions:
        docs = store.table(p)[0]
        if not len(docs):
            continue
        mine = docs[np.argsort(_mix(docs), kind="stable")[:k]]
        both = np.concatenate([best, mine])
        best = both[np.argsort(_mix(both), kind="stable")[:k]]
    return np.sort(best)


def sets_of(store, docs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(values, offsets) of the sets of ``docs`` (any partitions, repeats allowed), in the order of
    ``docs``; each distinct set is read once (no read exceeds its partition's sets)."""
    docs = np.asarray(docs, dtype=np.int64)
    unique, back = np.unique(docs, return_inverse=True)
    values, offsets = _sets_of_unique(store, unique)
    counts = np.diff(offsets)[back]
    out_offsets = np.zeros(len(docs) + 1, dtype=np.int64)
    np.cumsum(counts, out=out_offsets[1:])
    take = np.repeat(offsets[:-1][back] - out_offsets[:-1], counts) + np.arange(out_offsets[-1])
    return values[take], out_offsets


def _sets_of_unique(store, docs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    from curate.stages import dedup

    parts = docs >> dedup.DOC_SHIFT
    chunks: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
    for p in np.unique(parts):
        at = np.flatnonzero(parts == p)
        values, offsets = store.read(int(p), docs[at])
        chunks.append((at, values, offsets))
    counts = np.zeros(len(docs), dtype=np.int64)
    for at, _v, off in chunks:
        counts[at] = np.diff(off)
    offsets = np.zeros(len(docs) + 1, dtype=np.int64)
    np.cumsum(counts, out=offsets[1:])
    values = np.empty(int(offsets[-1]), dtype=np.uint64)
    for at, v, off in chunks:
        for j, i in enumerate(at):
            values[offsets[i]:offsets[i + 1]] = v[off[j]:off[j + 1]]
    return values, offsets


def audit_sample(store, partitions: range, threshold: float, k: int = SAMPLE) -> tuple:
    """What the audit needs of the run before its decisions, from its sets alone: (the sample, its sets'
    values and offsets, its close pairs ia and ib, the seconds it took). A cluster computes it beside the
    steps after the signatures, which are one task each and leave the other workers idle."""
    started = time.perf_counter()
    docs, values, offsets, ia, ib, seconds = _sample_of(store, sample_docs(store, partitions, k), threshold)
    return docs, values, offsets, ia, ib, time.perf_counter() - started


def audit(store, partitions: range, decisions, threshold: float, k: int = SAMPLE, docs=None, sample=None) -> dict:
    """The audit entry of the manifest. ``decisions``: (doc, component, kept_doc, removed) of every
    member of every component (numpy arrays); documents outside them are alone. ``docs``: the sample,
    when the caller drew it already (:func:`sample_docs` reads every partition's table); ``sample``:
    :func:`audit_sample`'s result, when the caller has it."""
    from curate.stages.dedup import shingles

    started = time.perf_counter()
    if sample is None:
        sample = audit_sample(store, partitions, threshold, k) if docs is None else \
            _sample_of(store, docs, threshold)
    docs, values, offsets, ia, ib, before = sample
    n = len(docs)
    doc, comp, kept, removed = decisions
    order = np.argsort(doc)
    pos = np.searchsorted(doc[order], docs)
    found = pos < len(doc)
    found[found] = doc[order][pos[found]] == docs[found]
    comp_of = np.full(n, -1, dtype=np.int64)
    comp_of[found] = comp[order][pos[found]]
    same = (comp_of[ia] >= 0) & (comp_of[ia] == comp_of[ib])
    was_removed = np.zeros(n, dtype=bool)
    was_removed[found] = removed[order][pos[found]]
    # a pair is found when the run removed one of its documents: both kept is a miss even in one component
    found_pairs = same & (was_removed[ia] | was_removed[ib])
    true_pairs, hits = len(ia), int(found_pairs.sum())
    # precision: every sampled document the run removed, against the document it was removed for
    kept_of = np.zeros(n, dtype=np.int64)
    kept_of[found] = kept[order][pos[found]]
    rem = np.flatnonzero(was_removed)
    good = 0
    if len(rem):
        kv, ko = sets_of(store, kept_of[rem])
        sims = shingles.jaccard_indexed(values, offsets, rem, kv, ko, np.arange(len(rem)))
        good = int((sims >= threshold).sum())
    return {
        "sample": n, "pairs": n * (n - 1) // 2, "true_pairs": true_pairs,
        "recall": round(hits / true_pairs, 4) if true_pairs else None, "recall_ci": wilson(hits, true_pairs),
        "removed_in_sample": int(len(rem)),
        "precision": round(good / len(rem), 4) if len(rem) else None, "precision_ci": wilson(good, len(rem)),
        "seconds": round(before + time.perf_counter() - started, 3),
    }


def _sample_of(store, docs: np.ndarray, threshold: float) -> tuple:
    from curate.stages.dedup.fuzzy import audit_pairs

    started = time.perf_counter()
    values, offsets = sets_of(store, docs)
    # recall needs only the close pairs: an exact similarity join finds them without comparing all pairs
    ia, ib, _jac = audit_pairs.close_pairs(values, offsets, threshold)
    return docs, values, offsets, ia, ib, time.perf_counter() - started


def audit_run(store, partitions: range, duplicates: tuple[str, ...], threshold: float, k: int,
              sample=None) -> tuple[dict, dict]:
    """(the audit entry, the component size histogram) of a finished run (its ``duplicates`` parts);
    ``sample``: :func:`audit_sample`'s result, computed earlier."""
    sample = audit_sample(store, partitions, threshold, k) if sample is None else sample
    decided, sizes = decisions_of(duplicates, sample[0])
    return audit(store, partitions, decided, threshold, k, sample=sample), sizes


def size_histogram(sizes: np.ndarray) -> dict[str, int]:
    """Components by size: {"2": n, "3-4": n, ..., ">=10000": n}."""
    out: dict[str, int] = {}
    bounds = list(SIZE_BINS)
    for lo, hi in zip(bounds, bounds[1:]):
        label = str(lo) if hi == lo + 1 else f"{lo}-{hi - 1}"
        out[label] = int(((sizes >= lo) & (sizes < hi)).sum())
    out[f">={bounds[-1]}"] = int((sizes >= bounds[-1]).sum())
    return out


def decisions_of(files, docs: np.ndarray):
    """(doc, component, kept_doc, removed) of the sampled ``docs`` from the run's ``duplicates`` parts,
    and the component size histogram of the whole run; one part in memory at a time (a component
    lives in one part: they were shuffled on it)."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    want = pa.array(np.asarray(docs, dtype=np.int64))
    rows, sizes = [], np.zeros(0, dtype=np.int64)
    for path in files:
        t = pq.read_table(path, columns=["doc", "id", "component", "kept_id", "removed"])
        comp = t.column("component").to_numpy()
        _u, counts = np.unique(comp, return_counts=True)
        sizes = np.concatenate([sizes, counts])
        mine = t.filter(pc.is_in(t.column("doc"), value_set=want))
        if not mine.num_rows:
            continue
        # the kept document's number: the member of the same component whose id is the kept id
        kept_ids = pc.unique(mine.column("kept_id"))
        keepers = t.filter(pc.is_in(t.column("id"), value_set=kept_ids))
        by = {(c, i): d for c, i, d in zip(keepers.column("component").to_pylist(), keepers.column("id").to_pylist(),
                                           keepers.column("doc").to_pylist())}
        kept = [by.get((c, i), d) for c, i, d in zip(mine.column("component").to_pylist(),
                                                    mine.column("kept_id").to_pylist(), mine.column("doc").to_pylist())]
        rows.append((mine.column("doc").to_numpy(), mine.column("component").to_numpy(), np.asarray(kept, np.int64),
                     mine.column("removed").to_numpy(zero_copy_only=False).astype(bool)))
    if rows:
        doc, comp, kept, removed = (np.concatenate(c) for c in zip(*rows))
    else:
        doc = comp = kept = np.zeros(0, dtype=np.int64)
        removed = np.zeros(0, dtype=bool)
    return (doc.astype(np.int64), comp.astype(np.int64), kept, removed), size_histogram(sizes)
