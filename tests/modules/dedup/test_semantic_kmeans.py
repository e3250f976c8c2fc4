"""semantic_dedup's spherical k-means (cluster.fit): seeding, stopping, empty clusters, determinism."""

import numpy as np

from curate.stages.dedup.semantic import cluster


def blobs(centres=12, per=40, dim=16, spread=0.05, seed=0):
    """Unit rows around ``centres`` random unit directions: (rows, the blob of each row)."""
    rng = np.random.default_rng(seed)
    c = rng.standard_normal((centres, dim)).astype(np.float32)
    c /= np.linalg.norm(c, axis=1, keepdims=True)
    label = np.repeat(np.arange(centres), per)
    x = c[label] + spread * rng.standard_normal((len(label), dim)).astype(np.float32)
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    order = rng.permutation(len(x))
    return x[order], label[order]


def test_seeds_are_distinct_points_of_the_sample():
    x, _ = blobs()
    x = np.concatenate([x, np.repeat(x[:3], 50, axis=0)])  # heavy copies of three points
    seeds = cluster._seed(x, 60, np.random.default_rng(1))
    assert len(np.unique(seeds, axis=0)) == 60
    assert all((x == s).all(1).any() for s in seeds)


def test_fewer_distinct_points_than_clusters_still_gives_k_seeds():
    x = np.repeat(np.eye(4, dtype=np.float32), 10, axis=0)
    seeds = cluster._seed(x, 7, np.random.default_rng(0))
    assert seeds.shape == (7, 4) and len(np.unique(seeds, axis=0)) == 4


def test_fit_recovers_separated_blobs():
    x, label = blobs()
    centroids, rounds = cluster.fit(x, 12, seed=3)
    assert 1 <= rounds < cluster.MAX_ROUNDS
    assigned, cos = cluster._sims(x, centroids)
    # k-means may end in a local optimum (two blobs merged, another split), but nearly every blob is
    # one cluster of its own
    whole = sum(len(np.unique(assigned[label == b])) == 1 for b in range(12))
    assert whole >= 10
    purity = sum(np.bincount(label[assigned == c]).max() for c in np.unique(assigned)) / len(x)
    assert purity >= 0.9 and np.allclose(np.linalg.norm(centroids, axis=1), 1, atol=1e-5)


def test_fit_is_deterministic_and_seeded():
    x, _ = blobs(seed=5)
    a, ra = cluster.fit(x, 20, seed=7)
    b, rb = cluster.fit(x, 20, seed=7)
    assert ra == rb and np.array_equal(a, b)
    c, _ = cluster.fit(x, 20, seed=8)
    assert not np.array_equal(a, c)


def test_rounds_stop_at_the_limit_and_on_small_gains():
    x, _ = blobs(centres=30, per=20, spread=0.6, seed=2)  # overlapping: many rounds before nothing moves
    _, one = cluster.fit(x, 30, seed=0, rounds=1)
    assert one == 1
    _, exact = cluster.fit(x, 30, seed=0, tol=0.0)
    _, loose = cluster.fit(x, 30, seed=0, tol=0.05)
    assert loose < exact


def test_no_cluster_is_left_empty_while_points_remain():
    x, _ = blobs(centres=3, per=30, spread=0.01)
    centroids, _ = cluster.fit(x, 10, seed=0)
    assigned, _ = cluster._sims(x, centroids)
    assert len(centroids) == 10 and len(np.unique(assigned)) >= 3
