"""The rows whose key another row has too: the only rows a duplicate group or an LSH bucket's edges
can come from. Most keys of a corpus are one document's, so a step finds these rows with one
unstable sort of the keys and then orders them alone, not every row, by its full rank."""

from __future__ import annotations

import numpy as np


def rows_sharing(keys: np.ndarray) -> np.ndarray:
    """Positions, ascending, of the entries of ``keys`` equal to another entry. Ascending, so that the
    rows they pick keep their order (a stable sort of them gives what a stable sort of every row did)."""
    order = np.argsort(keys)
    ordered = keys[order]
    same = ordered[1:] == ordered[:-1]
    shared = np.zeros(len(keys), dtype=bool)
    shared[1:] |= same
    shared[:-1] |= same
    return np.sort(order[shared])
