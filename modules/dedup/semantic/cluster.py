"""Steps 2-4: the fit sample, spherical k-means on it, every document assigned to its nearest centroid.

* ``sample`` (per embeddings part): the documents whose seeded 64-bit hash of the id falls below
  ``fit_sample / documents`` of the hash range: deterministic, about ``fit_sample`` of them, the same
  for any partitioning (a hash of the id, not of the document number, which follows the partitioning).
* ``centroids`` (one task): spherical k-means on the sample: k-means++ seeding in batches (numpy's
  generator of ``--seed``), then Lloyd rounds on unit vectors, each centroid the normalised mean of its
  members, until no member moves, the mean cosine gains less than ``TOL`` of itself, or ``MAX_ROUNDS``;
  an empty cluster is re-seeded with the member farthest from its centroid. Written to ``_work/centroids/part-00000.parquet`` (cluster, vector).
* ``clusters`` (per embeddings part): each document's cluster, its home (the largest cosine to a
  centroid; ties: the lower cluster), ``distance`` = 1 - that cosine, and its ``key`` in the ``--keep``
  order (ranked by key, then id, then document number); with ``--probes P`` also a ``witness`` row in
  each of its P - 1 next nearest clusters, with the home's distance and key. The rows, with their
  vectors, sorted by (cluster, key, id, doc) in row groups of ``ROW_GROUP`` rows, so the comparison of a
  range of clusters reads only the row groups that hold them; beside them ``_work/sizes/``: (cluster,
  rows, members) per part.
"""

from __future__ import annotations

import logging

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import xxhash

from curate.stages import dedup
from curate.stages.dedup.semantic.embed import VECTOR, vector_column, vectors_of

log = logging.getLogger(__name__)

#: Lloyd rounds at most (NeMo Curator's max_iter) and the relative gain of the objective that ends them
MAX_ROUNDS = 100
TOL = 1e-4
#: batches of the k-means++ seeding (each a product of the sample with k / SEED_ROUNDS seeds)
SEED_ROUNDS = 16
#: rows of the cluster-sorted parts' row groups (what a comparison task skips or reads)
ROW_GROUP = 4096
#: rows of one similarity matrix against the centroids (memory: CHUNK x clusters floats)
CHUNK = 8192


def id_hashes(ids, seed: int) -> np.ndarray:
    """uint64 seeded hash of each id (xxh64 of its UTF-8 bytes)."""
    return np.fromiter((xxhash.xxh64_intdigest(str(i).encode("utf-8", "surrogatepass"), seed) for i in ids),
                       dtype=np.uint64, count=len(ids))


def clusters_for(documents: int, requested: int) -> int:
    """The clusters a job of ``documents`` uses: ``requested``, or documents // 10 (at least 1) when it
    has fewer than requested x 10."""
    if documents >= requested * 10:
        return requested
    used = max(1, documents // 10)
    log.info("semantic_dedup: %d documents, fewer than %d clusters x 10: using %d clusters", documents,
             requested, used)
    return used


def sample_limit(documents: int, fit_sample: int) -> int:
    """The hash below which a document is in the fit sample (2**64 - 1: every document)."""
    if documents <= fit_sample:
        return (1 << 64) - 1
    return int((fit_sample / documents) * (1 << 64))


def sample_task(path: str, limit: int, seed: int, folder, i: int) -> dict:
    table = pq.read_table(path, columns=["doc", "id", VECTOR])
    keep = id_hashes(table.column("id").to_pylist(), seed) <= np.uint64(limit)
    return dedup.save_table(table.filter(pa.array(keep)).select(["doc", VECTOR]), folder, i)


def _sims(x: np.ndarray, centroids: np.ndarray):
    """(best cluster, its cosine) of each row, CHUNK rows of similarities at a time."""
    best = np.zeros(len(x), dtype=np.int32)
    cos = np.zeros(len(x), dtype=np.float32)
    for s in range(0, len(x), CHUNK):
        sims = x[s:s + CHUNK] @ centroids.T
        best[s:s + CHUNK] = sims.argmax(1)
        cos[s:s + CHUNK] = sims[np.arange(len(sims)), best[s:s + CHUNK]]
    return best, cos


def _seed(x: np.ndarray, k: int, rng) -> np.ndarray:
    """k-means++ seeding in SEED_ROUNDS batches (squared distance 2 - 2 cos on unit vectors): each batch
    draws its seeds without replacement in proportion to the squared distance to the nearest seed so far,
    so the cost is one (rows x k) product, as one Lloyd round, rather than k passes over the sample.
    Duplicates of one point are never two seeds while there are other points."""
    centers = np.empty((k, x.shape[1]), dtype=np.float32)
    centers[0] = x[int(rng.integers(len(x)))]
    d2 = np.maximum(2.0 - 2.0 * (x @ centers[0]).astype(np.float64), 0.0)
    have, batch = 1, max(1, -(-k // SEED_ROUNDS))
    while have < k:
        far = np.flatnonzero(d2 > 0)
        if not len(far):  # every point is a seed already: the rest are copies (re-seeded by fit)
            picks = rng.integers(len(x), size=k - have)
        else:
            p = d2[far] / d2[far].sum()
            picks = far[rng.choice(len(far), size=min(batch, k - have, len(far)), replace=False, p=p)]
            _, first = np.unique(x[picks], axis=0, return_index=True)  # one seed per distinct point
            picks = picks[np.sort(first)]
        centers[have:have + len(picks)] = x[picks]
        d2 = np.minimum(d2, np.maximum(2.0 - 2.0 * (x @ x[picks].T).max(1).astype(np.float64), 0.0))
        have += len(picks)
    return centers


def fit(x: np.ndarray, k: int, seed: int, rounds: int = MAX_ROUNDS, tol: float = TOL) -> tuple[np.ndarray, int]:
    """Spherical k-means of unit rows ``x``: (unit centroids (k, dim) float32, Lloyd rounds run). Rounds
    end at ``rounds``, when no member moves, or when the mean cosine to the centroids grew by less than
    ``tol`` of itself (cuML's relative tolerance on the objective)."""
    from scipy import sparse

    from curate.stages.dedup.semantic.encoders import normalise

    rng = np.random.default_rng(seed)
    k = max(1, min(k, len(x)))
    centroids = normalise(_seed(x, k, rng))
    labels, score = None, -np.inf
    done = 0
    while done < rounds:
        done += 1
        new, cos = _sims(x, centroids)
        now = float(cos.astype(np.float64).mean())
        if labels is not None and (np.array_equal(new, labels) or now - score <= tol * abs(score)):
            break
        labels, score = new, now
        # the members' sums as one sparse (k x rows) product: no per-row scatter
        sums = np.asarray(sparse.csr_matrix((np.ones(len(x), np.float32), (labels, np.arange(len(x)))),
                                            shape=(k, len(x))) @ x, dtype=np.float32)
        counts = np.bincount(labels, minlength=k)
        for empty in np.flatnonzero(counts == 0):  # the member farthest from its centroid starts it anew
            far = int(np.argmin(cos))
            sums[empty] = x[far]
            cos[far] = np.inf
        centroids = normalise(sums)
    return centroids, done


def centroids_task(sample_paths, k: int, seed: int, folder) -> dict:
    tables = [pq.read_table(p) for p in sample_paths]
    x = np.concatenate([vectors_of(t) for t in tables]) if tables else np.zeros((0, 1), np.float32)
    if len(x) == 0:
        raise ValueError("semantic_dedup: the fit sample is empty")
    centroids, rounds = fit(x, k, seed)
    table = pa.table({"cluster": pa.array(np.arange(len(centroids), dtype=np.int32)),
                      VECTOR: vector_column(centroids, "float32")})
    stats = dedup.save_table(table, folder, 0)
    stats.update({"sample": int(len(x)), "clusters": int(len(centroids)), "rounds": rounds})
    return stats


def read_centroids(path: str) -> np.ndarray:
    return vectors_of(pq.read_table(path))


def keys(ids, distance: np.ndarray, keep: str, seed: int) -> np.ndarray:
    """float64 rank of each member in its cluster under ``--keep`` (smaller first: kept)."""
    if keep == "hard":
        return -distance.astype(np.float64)
    if keep == "easy":
        return distance.astype(np.float64)
    if keep == "random":
        return id_hashes(ids, seed ^ 0x5EED).astype(np.float64)
    return np.zeros(len(distance))  # smallest-id: the id decides


def _top(x: np.ndarray, centroids: np.ndarray, probes: int):
    """(clusters, cosines), each (rows, probes): the ``probes`` nearest centroids of each row, nearest
    first (ties: the lower cluster), CHUNK rows of similarities at a time."""
    p = min(probes, len(centroids))
    best = np.zeros((len(x), p), dtype=np.int32)
    cos = np.zeros((len(x), p), dtype=np.float32)
    for s in range(0, len(x), CHUNK):
        sims = x[s:s + CHUNK] @ centroids.T
        rows = np.arange(len(sims))
        for q in range(p):  # p argmax passes (the lower cluster on equal cosines), not a sort of every row
            top = sims.argmax(1)
            best[s:s + CHUNK, q] = top
            cos[s:s + CHUNK, q] = sims[rows, top]
            if q + 1 < p:
                sims[rows, top] = -np.inf
    return best, cos


def assign_table(table: pa.Table, centroids: np.ndarray, keep: str, seed: int, partition: int,
                 probes: int = 1) -> pa.Table:
    """The rows of an embeddings part with cluster, distance and key, sorted by (cluster, key, id, doc):
    each document once in its nearest cluster (its home) and, with ``probes`` > 1, as a ``witness`` row
    in each of its next nearest clusters. The distance and key are the home's in every row, so all rows
    of one document share one place in the ``--keep`` order."""
    docs = table.column("doc").to_numpy()
    if len(docs) and np.any((docs >> dedup.DOC_SHIFT) != partition):
        raise ValueError(f"embeddings part {partition} holds documents of another partition: the embeddings "
                         "folder does not line up with this input (same input, same --blocksize)")
    x = vectors_of(table)
    top, cos = _top(x, centroids, probes)
    distance = (np.float32(1) - cos[:, 0]).astype(np.float32)
    ids = table.column("id").to_pylist()
    key = pa.array(keys(ids, distance, keep, seed))
    parts = []
    for p in range(top.shape[1]):
        parts.append(pa.table({"doc": table.column("doc"), "id": table.column("id"),
                               "cluster": pa.array(top[:, p], pa.int32()), "distance": pa.array(distance),
                               "key": key, "weight": table.column("weight"),
                               "witness": pa.array(np.full(len(x), p > 0)), VECTOR: table.column(VECTOR)}))
    out = pa.concat_tables(parts) if len(parts) > 1 else parts[0]
    order = pc.sort_indices(out, sort_keys=[("cluster", "ascending"), ("key", "ascending"),
                                            ("id", "ascending"), ("doc", "ascending")])
    return out.take(order)


def assign_task(path: str, centroids_path: str, keep: str, seed: int, folder, sizes, i: int, k: int,
                probes: int = 1) -> dict:
    table = assign_table(pq.read_table(path), read_centroids(centroids_path), keep, seed, i, probes)
    stats = _save_grouped(table, folder, i)
    cluster = table.column("cluster").to_numpy()
    rows = np.bincount(cluster, minlength=k)
    members = np.bincount(cluster[~table.column("witness").to_numpy(zero_copy_only=False)], minlength=k)
    nz = np.flatnonzero(rows)
    sized = dedup.save_table(pa.table({"cluster": pa.array(nz.astype(np.int32)),
                                       "rows": pa.array(rows[nz].astype(np.int64)),
                                       "members": pa.array(members[nz].astype(np.int64))}), sizes, i)
    stats["outputs"] = stats.get("outputs", []) + sized.get("outputs", [])
    return stats


def _save_grouped(table: pa.Table, folder, i: int) -> dict:
    """save_table with row groups of ROW_GROUP rows (their statistics let readers skip clusters)."""
    if isinstance(folder, dedup.StepFolder):
        with folder.out.open(folder.part(i)) as f:
            pq.write_table(table, f, row_group_size=ROW_GROUP)
        return {"partition": i, "rows": table.num_rows, "outputs": [{**f.record, "rows": table.num_rows}]}
    return dedup.save_table(table, folder, i)


def cluster_sizes(size_paths, k: int) -> tuple[np.ndarray, np.ndarray]:
    """(rows, members) of every cluster over all parts: rows count the witness rows too (what a
    comparison reads), members only the documents whose home it is."""
    rows, members = np.zeros(k, dtype=np.int64), np.zeros(k, dtype=np.int64)
    for p in size_paths:
        t = pq.read_table(p)
        c = t.column("cluster").to_numpy()
        np.add.at(rows, c, t.column("rows").to_numpy())
        np.add.at(members, c, t.column("members").to_numpy())
    return rows, members
