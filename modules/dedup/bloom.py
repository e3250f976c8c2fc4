"""A Bloom filter of 64-bit hashes, for span dedup's one-pass mode (``--bloom``).

Sized the textbook way for ``capacity`` distinct items and a false-positive rate ``p``:
``m = ceil(-capacity * ln p / ln(2)^2)`` bits and ``k = max(1, round(m / capacity * ln 2))`` bit
positions per item. After ``n`` distinct insertions the probability that an item never inserted tests
positive is ``(1 - exp(-k n / m))^k`` (:func:`false_positive_rate`), which is ``p`` at ``n = capacity`` and
grows beyond it; ``tests/modules/dedup/test_spans.py`` measures it on random hashes against this formula.
The rate now is also measured from the filter itself, its share of set bits to the power ``k``
(:meth:`BloomFilter.estimated_rate`; bits are counted as they are set): span dedup stops before a
lookup once that passes ``--bloom-max-fp``.

The ``k`` positions come from the item's 64-bit hash by double hashing (Kirsch and Mitzenmacher 2006):
``(h + i * g) mod m`` with ``g`` a second, odd 64-bit value mixed from ``h`` (SplitMix64's finaliser),
which costs no extra hashing of the text and keeps the rate of ``k`` independent functions.
"""

from __future__ import annotations

import math

import numpy as np

#: the largest filter curate allocates (bits): 64 GiB; beyond, the settings are refused
MAX_BITS = 64 * 8 << 30
#: hashes looked up or inserted at once: their k positions (8 bytes each) stay a few MB
CHUNK = 1 << 15


def size_for(capacity: int, p: float) -> tuple[int, int]:
    """(bits, hash functions) for ``capacity`` items at false-positive rate ``p``."""
    m = max(64, math.ceil(-capacity * math.log(p) / math.log(2) ** 2))
    k = max(1, round(m / capacity * math.log(2)))
    return m, k


def false_positive_rate(m: int, k: int, n: int) -> float:
    """Probability that an item not inserted tests positive after ``n`` distinct insertions."""
    return (1.0 - math.exp(-k * n / m)) ** k


def _mix(h: np.ndarray) -> np.ndarray:
    """SplitMix64's finaliser: a second 64-bit value from the first, well spread."""
    with np.errstate(over="ignore"):
        z = h + np.uint64(0x9E3779B97F4A7C15)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return z ^ (z >> np.uint64(31))


class BloomFilter:
    """``m`` bits (a numpy byte array), ``k`` positions per item; items are uint64 hashes."""

    def __init__(self, capacity: int, p: float):
        self.capacity, self.p = int(capacity), float(p)
        self.m, self.k = size_for(self.capacity, self.p)
        self.bits = np.zeros((self.m + 7) // 8, dtype=np.uint8)
        self.inserted = 0
        #: bits set, counted as they are set (a popcount of the whole filter per check would cost its size)
        self.ones = 0

    @property
    def nbytes(self) -> int:
        return int(self.bits.nbytes)

    def _positions(self, hashes) -> np.ndarray:
        h = np.asarray(hashes, dtype=np.uint64)
        g = _mix(h) | np.uint64(1)
        i = np.arange(self.k, dtype=np.uint64)
        with np.errstate(over="ignore"):
            return (h[:, None] + i[None, :] * g[:, None]) % np.uint64(self.m)

    def contains(self, hashes) -> np.ndarray:
        """Bool per hash: all its bits are set (inserted before, or a false positive)."""
        h = np.asarray(hashes, dtype=np.uint64)
        out = np.zeros(len(h), dtype=bool)
        for a in range(0, len(h), CHUNK):
            pos = self._positions(h[a:a + CHUNK])
            byte = self.bits[(pos >> np.uint64(3)).astype(np.int64)]
            out[a:a + CHUNK] = ((byte >> (pos & np.uint64(7)).astype(np.uint8)) & np.uint8(1)).all(axis=1)
        return out

    def add(self, hashes) -> None:
        """Insert ``hashes`` (the caller inserts each distinct item once; ``inserted`` counts them)."""
        h = np.asarray(hashes, dtype=np.uint64)
        for a in range(0, len(h), CHUNK):
            pos = self._positions(h[a:a + CHUNK]).ravel()
            at = (pos >> np.uint64(3)).astype(np.int64)
            touched = np.unique(at)
            before = int(np.bitwise_count(self.bits[touched]).sum(dtype=np.int64))
            np.bitwise_or.at(self.bits, at, np.left_shift(np.uint8(1), (pos & np.uint64(7)).astype(np.uint8)))
            self.ones += int(np.bitwise_count(self.bits[touched]).sum(dtype=np.int64)) - before
        self.inserted += len(h)

    def estimated_rate(self) -> float:
        """The false-positive rate now, from the share of bits set: an item never inserted tests positive
        when its ``k`` bits are all set, ``fill ** k``. Measured, so it holds whatever was inserted (the
        formula of :func:`false_positive_rate` assumes ``inserted`` distinct items)."""
        return (self.ones / self.m) ** self.k

    def fill(self) -> float:
        """Share of bits set."""
        step = 1 << 26  # counted in 64 MiB slices: no copy of the whole filter
        ones = sum(int(np.bitwise_count(self.bits[i:i + step]).sum(dtype=np.int64))
                   for i in range(0, len(self.bits), step))
        return ones / (8 * len(self.bits))

    def describe(self) -> dict:
        """What the manifest records: size, hash functions, items and the false-positive rate they imply."""
        return {"capacity": self.capacity, "target_false_positive_rate": self.p, "bits": self.m,
                "bytes": self.nbytes, "hash_functions": self.k, "inserted": self.inserted,
                "false_positive_rate_at_end": false_positive_rate(self.m, self.k, self.inserted),
                "estimated_false_positive_rate_at_end": self.estimated_rate()}
