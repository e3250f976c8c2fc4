"""Connected components of the duplicate graph, labelled by their smallest document number.

Two paths with the same result, a ``(doc, comp)`` row for every document that has an edge, where
``comp`` is the smallest document number of its component:

- **distributed** (any size): alternating large-star / small-star (Kiveris et al., "Connected
  Components in MapReduce and Beyond", SoCC 2014) on Dask DataFrames. Each operation is one shuffle
  of the edge list on a node column followed by a pandas group-by within each partition, and every
  operation's output is written under ``_work/components/round-NN-large|small/``, so no worker ever
  holds more than a partition of edges and the task graph stays one round deep. The fixed point is
  a star per component centred on its minimum; it is detected when a round leaves the edge
  multiset unchanged (row count and two independent 64-bit sums of edge hashes).
- **in memory**: when the edge list is small (``in_memory_edges``), one task runs union-find on it
  (numba, :mod:`.union_find`, imported by that task only), always linking the larger root under the
  smaller, so roots are the minima too.

Edges are stored as ``(u, v)`` with ``u > v`` (child, parent): undirected, one orientation.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from curate.stages import dedup

#: a safety net: large-star/small-star needs O(log^2 n) rounds; reaching this is a bug
MAX_ROUNDS = 64
EDGE_META = pd.DataFrame({"u": pd.Series([], dtype="int64"), "v": pd.Series([], dtype="int64")})


def canonical(u, v) -> pd.DataFrame:
    """Edges as (u, v) with u > v, without self loops or repeats, sorted."""
    u = np.asarray(u, dtype=np.int64)
    v = np.asarray(v, dtype=np.int64)
    keep = u != v
    hi, lo = np.maximum(u, v)[keep], np.minimum(u, v)[keep]
    if len(hi):
        pairs = np.unique(np.stack([hi, lo], axis=1), axis=0)
        hi, lo = pairs[:, 0], pairs[:, 1]
    return pd.DataFrame({"u": hi.astype(np.int64), "v": lo.astype(np.int64)})


def both_directions(edges: pd.DataFrame) -> pd.DataFrame:
    """(src, dst) rows for both orientations of every edge (the input of large-star)."""
    return pd.DataFrame({
        "src": np.concatenate([edges["u"].to_numpy(), edges["v"].to_numpy()]).astype(np.int64),
        "dst": np.concatenate([edges["v"].to_numpy(), edges["u"].to_numpy()]).astype(np.int64),
    })


def large_star(directed: pd.DataFrame) -> pd.DataFrame:
    """Every neighbour larger than a node is linked to the smallest of the node's closed neighbourhood.

    ``directed`` holds all (src, dst) rows of the nodes of this partition (shuffled on src)."""
    src = directed["src"].to_numpy(dtype=np.int64)
    dst = directed["dst"].to_numpy(dtype=np.int64)
    m = np.minimum(directed.groupby("src", sort=False)["dst"].transform("min").to_numpy(dtype=np.int64), src)
    big = dst > src
    return canonical(dst[big], m[big])


def small_star(edges: pd.DataFrame) -> pd.DataFrame:
    """A node and its smaller neighbours are all linked to the smallest of them.

    ``edges`` holds all (u, v), u > v, rows of the nodes u of this partition (shuffled on u)."""
    u = edges["u"].to_numpy(dtype=np.int64)
    v = edges["v"].to_numpy(dtype=np.int64)
    m = edges.groupby("u", sort=False)["v"].transform("min").to_numpy(dtype=np.int64)
    return canonical(np.concatenate([v, u]), np.concatenate([m, m]))


_C1 = np.uint64(0x9E3779B97F4A7C15)
_C2 = np.uint64(0xC2B2AE3D27D4EB4F)


def _mix(x: np.ndarray) -> np.ndarray:
    x = x ^ (x >> np.uint64(31))
    x = x * np.uint64(0x7FB5D329728EA185)
    x = x ^ (x >> np.uint64(27))
    x = x * np.uint64(0x81DADEF4BC2DD44D)
    return x ^ (x >> np.uint64(33))


def edge_checksum(edges: pd.DataFrame) -> dict:
    """Rows and two 64-bit sums of edge hashes (order-free), to compare edge multisets."""
    u = edges["u"].to_numpy(dtype=np.int64).view(np.uint64)
    v = edges["v"].to_numpy(dtype=np.int64).view(np.uint64)
    with np.errstate(over="ignore"):
        a = int(np.sum(_mix(u * _C1 + v), dtype=np.uint64))
        b = int(np.sum(_mix((v * _C2) ^ _mix(u)), dtype=np.uint64))
    return {"rows": len(edges), "sum_a": a, "sum_b": b}


def _save_with_checksum(df: pd.DataFrame, folder: str, i: int) -> dict:
    stats = dedup.save_part(df, folder, i)
    stats.update(edge_checksum(df))
    return stats


def _fingerprint(info: dict) -> tuple[int, int, int]:
    parts = info["parts"]
    mask = (1 << 64) - 1
    return (sum(p["rows"] for p in parts), sum(p["sum_a"] for p in parts) & mask,
            sum(p["sum_b"] for p in parts) & mask)


def components_in_memory(u, v) -> pd.DataFrame:
    """(doc, comp) for every node of the edges, comp = the smallest node of its component."""
    u = np.asarray(u, dtype=np.int64)
    v = np.asarray(v, dtype=np.int64)
    nodes = np.unique(np.concatenate([u, v]))
    if not len(nodes):
        return pd.DataFrame({"doc": pd.Series([], dtype="int64"), "comp": pd.Series([], dtype="int64")})
    from curate.stages.dedup.union_find import union_find

    root = union_find(np.searchsorted(nodes, u), np.searchsorted(nodes, v), len(nodes))
    return pd.DataFrame({"doc": nodes, "comp": nodes[root]})


def _in_memory_task(files: list[str], folder: str) -> dict:
    frames = [dedup.load_part(f, ["u", "v"]) for f in files]
    edges = pd.concat(frames, ignore_index=True) if frames else EDGE_META
    return dedup.save_part(components_in_memory(edges["u"], edges["v"]), folder, 0)


def star_components(edges: pd.DataFrame) -> pd.DataFrame:
    """(doc, comp) rows of a converged star graph: each child with its root, each root with itself."""
    u = edges["u"].to_numpy(dtype=np.int64)
    v = edges["v"].to_numpy(dtype=np.int64)
    roots = np.unique(v)
    return pd.DataFrame({"doc": np.concatenate([u, roots]), "comp": np.concatenate([v, roots])})


# --------------------------------------------------------------------------- the step


def run(steps: dedup.Steps, edges_step, out_step: str, in_memory_edges: int) -> dict:
    """Write ``(doc, comp)`` parts to ``out_step`` from the edges of ``edges_step`` (a step, or a list of
    steps whose edges together are the graph); return how (path, rounds, edges)."""
    import dask
    import dask.dataframe as dd

    sources = [edges_step] if isinstance(edges_step, str) else list(edges_step)
    n_edges = sum(steps.done(s)["rows"] for s in sources)
    if in_memory_edges > 0 and n_edges <= in_memory_edges:
        files = [f for s in sources for f, _, rows in dedup.part_records(steps.path(s)) if rows != 0]
        steps.run(out_step, lambda folder: [dask.delayed(_in_memory_task, pure=False)(files, folder)])
        return {"path": "in-memory", "rounds": 0, "edges": n_edges}

    current = sources
    previous = None
    for k in range(1, MAX_ROUNDS + 1):
        large = f"{out_step}/round-{k:02d}-large"
        small = f"{out_step}/round-{k:02d}-small"
        parts = [dedup.read_parts(steps.path(c), columns=["u", "v"]) for c in current]
        src = dd.concat(parts, ignore_unknown_divisions=True) if len(parts) > 1 else parts[0]
        directed = src.map_partitions(both_directions, meta=pd.DataFrame({"src": EDGE_META["u"],
                                                                          "dst": EDGE_META["v"]}))
        shuffled = directed.shuffle(on="src")
        steps.run(large, lambda folder, s=shuffled: dedup.save_tasks(s, folder, large_star))
        shuffled = dedup.read_parts(steps.path(large)).shuffle(on="u")
        info = steps.run(small, lambda folder, s=shuffled: [
            dask.delayed(_small_star_save, pure=False)(part, folder, i) for i, part in enumerate(s.to_delayed())
        ])
        now = _fingerprint(info)
        if now == previous:
            break
        previous, current = now, [small]
    else:
        raise RuntimeError(f"connected components did not converge in {MAX_ROUNDS} rounds")
    final = dedup.read_parts(steps.path(small))
    steps.run(out_step, lambda folder: dedup.save_tasks(final, folder, star_components))
    return {"path": "distributed", "rounds": k, "edges": n_edges}


def _small_star_save(part: pd.DataFrame, folder: str, i: int) -> dict:
    return _save_with_checksum(small_star(part), folder, i)
