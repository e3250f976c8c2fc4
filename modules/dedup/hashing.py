"""The shingle hash, compiled: xxh32 of a byte range (bit-exact with ``xxhash.xxh32_intdigest``) and
the MurmurHash3 finalizer ``fmix32`` that pre-mixes it before the MinHash permutations.

Written out for numba rather than called from the xxhash package: the signature and Jaccard kernels
hash every shingle straight from the partition's Arrow buffers, with no Python call per shingle.
The unsigned constants (``U1``, ``U8``, ...) are shared with the other kernels of dedup, which index
bytes the same way.
"""

from __future__ import annotations

import numpy as np
from numba import njit

# Module-level so numba can cache the machine code next to this file (closures are not cached);
# compiling happens on the first call, not at import.

M32 = np.uint64(0xFFFFFFFF)
P1 = np.uint64(0x9E3779B1)
P2 = np.uint64(0x85EBCA77)
P3 = np.uint64(0xC2B2AE3D)
P4 = np.uint64(0x27D4EB2F)
P5 = np.uint64(0x165667B1)
NEG_P1 = np.uint64((1 << 32) - 0x9E3779B1)
F1 = np.uint64(0x85EBCA6B)
F2 = np.uint64(0xC2B2AE35)
U0, U1, U2, U3, U4, U6, U8, U12, U13, U15, U16, U18, U24, U32 = (np.uint64(x) for x in (0, 1, 2, 3, 4, 6, 8, 12, 13, 15, 16, 18, 24, 32))

@njit(inline="always")
def _rotl(x, r):
    return ((x << np.uint64(r)) | (x >> np.uint64(32 - r))) & M32

@njit(inline="always")
def _read32(data, i):
    return (np.uint64(data[i]) | (np.uint64(data[i + U1]) << U8) | (np.uint64(data[i + U2]) << U16)
            | (np.uint64(data[i + U3]) << U24))

@njit(inline="always")
def _xround(acc, value):
    acc = (acc + value * P2) & M32
    return (_rotl(acc, 13) * P1) & M32

@njit(cache=True)
def _xxh32(data, start, end, seed):
    """xxh32 of data[start:end] (bit-exact with the reference implementation).

    Indices are unsigned so numba emits no negative-index wraparound checks (~20% faster)."""
    seed = np.uint64(seed) & M32
    i = np.uint64(start)
    e = np.uint64(end)
    length = e - i
    if length >= 16:
        v1 = (seed + P1 + P2) & M32
        v2 = (seed + P2) & M32
        v3 = seed
        v4 = (seed + NEG_P1) & M32
        while i + U16 <= e:
            v1 = _xround(v1, _read32(data, i))
            v2 = _xround(v2, _read32(data, i + U4))
            v3 = _xround(v3, _read32(data, i + U8))
            v4 = _xround(v4, _read32(data, i + U12))
            i += U16
        h = (_rotl(v1, 1) + _rotl(v2, 7) + _rotl(v3, 12) + _rotl(v4, 18)) & M32
    else:
        h = (seed + P5) & M32
    h = (h + (length & M32)) & M32
    while i + U4 <= e:
        h = (h + _read32(data, i) * P3) & M32
        h = (_rotl(h, 17) * P4) & M32
        i += U4
    while i < e:
        h = (h + np.uint64(data[i]) * P5) & M32
        h = (_rotl(h, 11) * P1) & M32
        i += U1
    h ^= h >> U15
    h = (h * P2) & M32
    h ^= h >> U13
    h = (h * P3) & M32
    h ^= h >> U16
    return h


@njit(inline="always")
def _fmix32(h):
    h ^= h >> U16
    h = (h * F1) & M32
    h ^= h >> U13
    h = (h * F2) & M32
    h ^= h >> U16
    return h


def xxh32(data: bytes, seed: int = 0) -> int:
    """The kernel's xxh32 called from Python (for tests; equals ``xxhash.xxh32_intdigest``)."""
    buf = np.frombuffer(data, dtype=np.uint8) if data else np.zeros(1, np.uint8)
    return int(_xxh32(buf, 0, len(data), seed))


def warm() -> None:
    """Load numba's own registries now, not in the first task that calls a kernel.

    A process's first call of any compiled kernel, even one cached on disk, first registers every
    typing and lowering registry numba has (importing ``numba.np.arraymath``, which looks for BLAS in
    ``scipy.linalg``): about 0.45 CPU-s, after which a cached kernel loads in about 0.02. On a node of
    a quarter core that was 1.8 s on the critical path of fuzzy dedup's signatures, on every worker;
    a worker preload (:mod:`curate.app.worker_warm`) calls this before the worker joins instead."""
    from numba.core.registry import cpu_target

    cpu_target.target_context.refresh()
    cpu_target.typing_context.refresh()
