"""Connected components: large-star/small-star (per-partition pandas functions) against union-find."""

import numpy as np
import pandas as pd
import pytest

from curate.stages.dedup import components as cc


def _partitions(df, column, n):
    """Split a frame as a shuffle on ``column`` would (every row of a node in one partition)."""
    idx = pd.util.hash_array(df[column].to_numpy()) % n
    return [df[idx == i] for i in range(n)]


def star_star(edges: pd.DataFrame, nparts: int) -> tuple[pd.DataFrame, int]:
    """The distributed algorithm, with the shuffles simulated in memory; returns (doc, comp), rounds."""
    current, previous, rounds = cc.canonical(edges["u"], edges["v"]), None, 0
    while rounds < cc.MAX_ROUNDS:
        rounds += 1
        directed = cc.both_directions(current)
        large = pd.concat([cc.large_star(p) for p in _partitions(directed, "src", nparts)])
        small = [cc.small_star(p) for p in _partitions(large, "u", nparts)]
        now = sum((np.array(list(cc.edge_checksum(s).values()), dtype=object) for s in small), start=0)
        now = (now[0], now[1] % 2**64, now[2] % 2**64)
        current = pd.concat(small, ignore_index=True)
        if now == previous:
            break
        previous = now
    out = cc.star_components(current).drop_duplicates("doc")
    return out.sort_values("doc").reset_index(drop=True), rounds


def test_union_find_labels_are_minima():
    got = cc.components_in_memory([5, 7, 3, 10, 11], [7, 3, 9, 11, 12])
    assert dict(zip(got["doc"], got["comp"])) == {3: 3, 5: 3, 7: 3, 9: 3, 10: 10, 11: 10, 12: 10}
    assert cc.components_in_memory([], []).empty


def test_canonical():
    got = cc.canonical([1, 2, 2, 3, 4], [2, 1, 1, 3, 0])
    assert got.to_dict("list") == {"u": [2, 4], "v": [1, 0]}


@pytest.mark.parametrize("seed", range(6))
def test_star_star_equals_union_find(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(20, 300))
    m = int(rng.integers(5, 2 * n))
    nodes = rng.choice(2**40, n, replace=False).astype(np.int64)  # sparse, large ids as document numbers are
    u, v = nodes[rng.integers(0, n, m)], nodes[rng.integers(0, n, m)]
    if seed == 0:  # a long path, the worst case for label propagation
        order = np.sort(nodes)[::-1]
        u, v = order[:-1], order[1:]
    edges = cc.canonical(u, v)  # no self loops, as in the pipeline
    expected = cc.components_in_memory(edges["u"], edges["v"])
    got, rounds = star_star(edges, nparts=3)
    pd.testing.assert_frame_equal(got, expected, check_dtype=False)
    assert rounds < 20
