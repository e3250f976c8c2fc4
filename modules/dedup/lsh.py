"""LSH banding: the (bands, rows) choice and one 64-bit bucket key per document and band.

Two documents become candidates when all ``rows`` values of some band of their signatures agree;
with Jaccard similarity ``s`` that happens with probability ``1 - (1 - s**rows) ** bands``.

``optimal_params`` is datasketch's rule (``MinHashLSH(threshold, num_perm)``): the grid search over
every ``bands * rows <= num_perm`` minimising the equally weighted areas of false positives (below
the threshold) and false negatives (above it) under that curve.

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


@functools.lru_cache(maxsize=64)
def optimal_params(threshold: float, num_perm: int, false_positive_weight: float = 0.5,
                   false_negative_weight: float = 0.5) -> tuple[int, int]:
    """(bands, rows) minimising the weighted false positive + false negative areas (datasketch's rule)."""
    from scipy.integrate import quad

    best, opt = float("inf"), (0, 0)
    for b in range(1, num_perm + 1):
        for r in range(1, num_perm // b + 1):
            fp, _ = quad(lambda s, b=b, r=r: 1 - (1 - s ** float(r)) ** float(b), 0.0, threshold)
            fn, _ = quad(lambda s, b=b, r=r: 1 - (1 - (1 - s ** float(r)) ** float(b)), threshold, 1.0)
            err = fp * false_positive_weight + fn * false_negative_weight
            if err < best:
                best, opt = err, (b, r)
    return opt


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
