"""LSH banding: the (bands, rows) choice and one 64-bit bucket key per document and band.

Two documents become candidates when all ``rows`` values of some band of their signatures agree;
with Jaccard similarity ``s`` that happens with probability ``1 - (1 - s**rows) ** bands``.

``recall_params`` is the default: the most rows per band such that a pair exactly at the threshold
is a candidate with probability >= 0.99 (0.8 -> 21 x 6 of 128 permutations); false candidates are
then removed by the true-Jaccard check. ``optimal_params`` is datasketch's rule (``MinHashLSH(threshold,
num_perm)``): the grid search over every ``bands * rows <= num_perm`` minimising the equally weighted
areas of false positives (below the threshold) and false negatives (above it) under that curve.

A bucket key is a 64-bit hash of the band's values seeded with the band number, so equal bands of
different band numbers never share a bucket; with 64 bits, unrelated bands collide with probability
about ``n**2 / 2**65`` (negligible for billions of documents).
"""

from __future__ import annotations

import functools

import numpy as np


def candidate_probability(s, bands: int, rows: int):
    """Probability that two documents of Jaccard similarity ``s`` share at least one bucket."""
    return 1.0 - (1.0 - np.asarray(s, dtype=float) ** rows) ** bands


def _integrals(threshold: float, num_perm: int, points: int = 4001):
    """(bands, rows, false-positive area, false-negative area) for every bands x rows <= num_perm.

    The areas under the candidate-probability curve below and above the threshold are integrated
    with Simpson's rule on ``points`` nodes (odd); the integrand is a polynomial in s, smooth, so
    this matches datasketch's ``scipy.integrate.quad`` to ~1e-12 in a few milliseconds instead of the
    1.3 s that ~700 adaptive quadratures take."""
    pairs = np.array([(b, r) for b in range(1, num_perm + 1) for r in range(1, num_perm // b + 1)], dtype=float)
    b, r = pairs[:, :1], pairs[:, 1:]

    def simpson(lo: float, hi: float, f) -> np.ndarray:
        s = np.linspace(lo, hi, points)
        w = np.ones(points)
        w[1:-1:2], w[2:-1:2] = 4.0, 2.0
        return (f(s[None, :]) * w).sum(axis=1) * (hi - lo) / (3.0 * (points - 1))

    fp = simpson(0.0, threshold, lambda s: 1.0 - (1.0 - s ** r) ** b)
    fn = simpson(threshold, 1.0, lambda s: (1.0 - s ** r) ** b)
    return pairs[:, 0].astype(int), pairs[:, 1].astype(int), fp, fn


@functools.lru_cache(maxsize=64)
def optimal_params(threshold: float, num_perm: int, false_positive_weight: float = 0.5,
                   false_negative_weight: float = 0.5) -> tuple[int, int]:
    """(bands, rows) minimising the weighted false positive + false negative areas (datasketch's rule)."""
    bands, rows, fp, fn = _integrals(threshold, num_perm)
    k = int(np.argmin(fp * false_positive_weight + fn * false_negative_weight))  # first minimum, as datasketch
    return int(bands[k]), int(rows[k])


#: the default recall target: a pair at exactly the threshold becomes a candidate with this probability
RECALL_TARGET = 0.99


@functools.lru_cache(maxsize=64)
def recall_params(threshold: float, num_perm: int, target: float = RECALL_TARGET) -> tuple[int, int]:
    """(bands, rows): the most rows per band (fewest false candidates) for which a pair of Jaccard
    similarity ``threshold`` is a candidate with probability >= ``target``, with as many bands as
    fit in ``num_perm``. (datasketch's rule weighs misses and false candidates equally and at 0.8
    picks 9 x 13, which finds a pair at 0.85 only 69% of the time; false candidates cost only the
    time of the false-positive check, misses cost duplicates left in the data.)"""
    for rows in range(num_perm, 0, -1):
        bands = num_perm // rows
        if float(candidate_probability(threshold, bands, rows)) >= target:
            return bands, rows
    return num_perm, 1


_M1 = np.uint64(0xFF51AFD7ED558CCD)
_M2 = np.uint64(0xC4CEB9FE1A85EC53)
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_S33 = np.uint64(33)


def _fmix64(h: np.ndarray) -> np.ndarray:
    h = h ^ (h >> _S33)
    h = h * _M1
    h = h ^ (h >> _S33)
    h = h * _M2
    return h ^ (h >> _S33)


def band_keys(signatures: np.ndarray, bands: int, rows: int) -> np.ndarray:
    """uint64 bucket keys of shape (n, bands) for uint32 signatures of shape (n, >= bands * rows)."""
    sig = np.asarray(signatures)
    if sig.ndim != 2 or sig.shape[1] < bands * rows:
        raise ValueError(f"band_keys: signatures of shape {sig.shape} cannot hold {bands} bands x {rows} rows")
    sig = sig.astype(np.uint64, copy=False)
    keys = np.empty((sig.shape[0], bands), dtype=np.uint64)
    with np.errstate(over="ignore"):
        for band in range(bands):
            h = np.full(sig.shape[0], _fmix64(np.uint64(band + 1) * _GOLDEN), dtype=np.uint64)
            for col in range(band * rows, (band + 1) * rows):
                # mix each value in before the next: the key depends on the order of the values
                h = _fmix64(h ^ sig[:, col]) + _GOLDEN
            keys[:, band] = _fmix64(h)
    return keys
