"""semantic_dedup's comparison rules against brute force over all pairs, and block by block."""

import numpy as np
import pytest

from curate.stages.dedup.semantic import compare


def planted(n=300, dim=16, copies=120, seed=0, noise=0.02):
    """Unit rows: n - copies random ones, then copies of earlier rows with a little noise (chains too)."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, dim)).astype(np.float32)
    for i in rng.choice(np.arange(20, n), size=copies, replace=False):
        x[i] = x[rng.integers(0, i)] + noise * rng.standard_normal(dim).astype(np.float32)
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    return x[rng.permutation(n)]


def brute_nemo(x, t):
    sims = x @ x.T
    removed = np.zeros(len(x), bool)
    nearest = np.arange(len(x))
    for i in range(1, len(x)):
        j = int(np.argmax(sims[i, :i]))
        nearest[i] = j
        removed[i] = sims[i, j] >= t
    return removed, nearest


def brute_greedy(x, t):
    sims = x @ x.T
    kept, removed, ref = [], np.zeros(len(x), bool), np.arange(len(x))
    for i in range(len(x)):
        hit = [j for j in kept if sims[i, j] >= t]
        if hit:
            removed[i], ref[i] = True, hit[0]
        else:
            kept.append(i)
    return removed, ref


@pytest.mark.parametrize("block", [16, 50, 1024])
def test_nemo_rule_is_brute_force_for_any_block(block):
    x = planted()
    t = np.float32(0.99)
    removed, kept, nearest, cosine = compare.decide(x, t, block, "nemo")
    want, near = brute_nemo(x, t)
    assert removed.sum() > 30 and (removed == want).all()
    assert (nearest[removed] == near[removed]).all()
    assert (kept[~removed] == np.flatnonzero(~removed)).all() and not removed[kept].any()
    assert (cosine[removed] >= t).all() and (cosine[~removed] == 0).all()


@pytest.mark.parametrize("block", [16, 50, 1024])
def test_greedy_rule_is_brute_force_for_any_block(block):
    x = planted(seed=1)
    t = np.float32(0.99)
    removed, kept, _, cosine = compare.decide(x, t, block, "greedy")
    want, ref = brute_greedy(x, t)
    assert removed.sum() > 30 and (removed == want).all() and (kept == ref).all()
    assert np.allclose(cosine[removed], np.einsum("ij,ij->i", x[removed], x[kept[removed]]), atol=1e-6)


@pytest.mark.parametrize("rule", ["nemo", "greedy"])
def test_no_two_kept_members_are_within_eps(rule):
    x = planted(seed=2, noise=0.05)
    t = np.float32(0.98)
    removed, _, _, _ = compare.decide(x, t, 32, rule)
    k = x[~removed]
    sims = k @ k.T
    np.fill_diagonal(sims, -1)
    assert sims.max() < t


def test_greedy_removes_a_subset_of_nemo():
    # a chain a ~ b ~ c with a and c apart: nemo removes b and c, greedy keeps c (b was removed)
    a = np.array([1.0, 0.0], np.float32)
    ang = np.arccos(0.995)
    b = np.array([np.cos(ang), np.sin(ang)], np.float32)
    c = np.array([np.cos(2 * ang), np.sin(2 * ang)], np.float32)
    x = np.stack([a, b, c])
    t = np.float32(0.99)
    assert compare.decide(x, t, 16, "nemo")[0].tolist() == [False, True, True]
    assert compare.decide(x, t, 16, "greedy")[0].tolist() == [False, True, False]
    # the nemo-removed c is listed for the kept a, through its nearest b
    removed, kept, nearest, _ = compare.decide(x, t, 16, "nemo")
    assert kept.tolist() == [0, 0, 0] and nearest.tolist() == [0, 0, 1]


def test_plan_ranges_cover_every_cluster_in_order():
    sizes = np.array([5, 0, 7, 30, 1, 1, 1, 2])
    ranges = compare.plan_ranges(sizes, 8)
    assert ranges[0][0] == 0 and ranges[-1][1] == len(sizes)
    assert all(a < b and b == c for (a, b), (c, _) in zip(ranges, ranges[1:]))
    assert (3, 4) in ranges  # a cluster larger than the budget goes alone
