"""Union-find over edge endpoints (numba): the in-memory path of :mod:`.components`.

Its own module so that :mod:`.components` imports no numba: a task graph names the functions of
``components``, and the scheduler imports a function's module to read the graph. Importing numba
there cost a quarter-core head 0.56 s in the middle of fuzzy dedup (the ``components`` step of the
48,000-page sweep at 6 nodes).
"""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True)
def _find(parent, x):
    while parent[x] != x:
        parent[x] = parent[parent[x]]
        x = parent[x]
    return x


@njit(cache=True)
def union_find(a, b, n):
    """The root of each of ``n`` nodes given edges ``a[k] - b[k]``: always the smallest node of its
    component (the larger root is linked under the smaller)."""
    parent = np.arange(n)
    for k in range(len(a)):
        ra = _find(parent, a[k])
        rb = _find(parent, b[k])
        if ra < rb:
            parent[rb] = ra
        elif rb < ra:
            parent[ra] = rb
    for i in range(n):
        parent[i] = _find(parent, i)
    return parent
