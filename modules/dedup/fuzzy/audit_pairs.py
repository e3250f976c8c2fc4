"""The close pairs of the audit's sample (issue 42, point 2): every pair of sets whose true Jaccard is
at or above the threshold, exactly the pairs comparing all n(n-1)/2 would find, without comparing them.

An exact similarity join by prefix filtering (AllPairs, Bayardo et al. 2007; PPJoin's prefix): order
every element of the sample by one global order, rarest first (the number of sets holding it, then its
value). A pair with Jaccard >= t has an overlap of at least ceil(t * |x|) and of ceil(t * |y|), so the
first |x| - ceil(t * |x|) + 1 elements of x and the first |y| - ceil(t * |y|) + 1 of y share one. Only
pairs sharing a prefix element are candidates, and only those whose sizes allow the threshold
(min >= t * max); each candidate is compared with the same function and the same comparison as the
brute force (``jaccard_indexed(...) >= threshold``), so the close pairs and their similarities are the
same, bit for bit. Rarest first makes prefixes mostly of elements no other set holds (they make no
candidate and are not indexed): on ~500-word pages, a few thousand candidates instead of 2M pairs.

The bounds are computed with ``t * (1 - 1e-9)``: the brute force's ``inter / union >= t`` rounds the
quotient, so a pair can pass with an exact ratio a hair below t; the relaxed bound still counts it
(it costs a few more candidates, never a missed pair). A near-duplicate cloud in the sample (many
sets sharing their prefixes) makes up to n(n-1)/2 candidates, as many as the brute force compares:
they are made and compared in chunks of at most :data:`CHUNK` pairs, so memory stays that of the
sample's sets plus one chunk.
"""

from __future__ import annotations

import numpy as np
from numba import njit

#: candidate pairs made and compared at a time (about 24 bytes each: two indices and a similarity)
CHUNK = 1 << 20
#: the bounds' relative slack below the threshold (far above float64 rounding, far below any real gap)
SLACK = 1e-9


def close_pairs(values: np.ndarray, offsets: np.ndarray, threshold: float,
                chunk: int = CHUNK) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(ia, ib, jac): the pairs ia[k] < ib[k] of the sets (values, offsets) (each sorted, distinct) whose
    ``jaccard_indexed`` similarity jac[k] is >= ``threshold``, in (ia, ib) order."""
    from curate.stages.dedup.shingles import jaccard_indexed

    values = np.asarray(values, dtype=np.uint64)
    offsets = np.asarray(offsets, dtype=np.int64)
    n = len(offsets) - 1
    low = threshold * (1.0 - SLACK)
    chunk = max(int(chunk), n, 1)  # a probe's candidates fit in one chunk: every call makes progress
    out_a = np.empty(chunk, dtype=np.int64)
    out_b = np.empty(chunk, dtype=np.int64)
    if n < 2:
        return np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.float64)
    if not low > 0.0:  # t <= 0 (every pair passes) or NaN (none does): the brute force's answer, in chunks

        def make(x):
            return _every_pair(x, chunk, n, out_a, out_b)
    else:
        size = np.diff(offsets)
        pre_off, pre_rank, post_start, post_doc = _index(values, offsets, size, low)
        mark = np.full(n, -1, dtype=np.int64)

        def make(x):
            return _candidates(x, chunk, pre_off, pre_rank, post_start, post_doc, size, low, mark, out_a, out_b)

    parts_a, parts_b, parts_j = [], [], []
    x = 0
    while x < n:
        x, k = make(x)
        jac = jaccard_indexed(values, offsets, out_a[:k], values, offsets, out_b[:k])
        close = jac >= threshold  # the brute force's own comparison, on its own similarity
        parts_a.append(out_a[:k][close])
        parts_b.append(out_b[:k][close])
        parts_j.append(jac[close])
    ia, ib, jac = np.concatenate(parts_a), np.concatenate(parts_b), np.concatenate(parts_j)
    order = np.lexsort((ib, ia))
    return ia[order], ib[order], jac[order]


def _index(values, offsets, size, low):
    """The prefixes and their inverted index: (pre_off, pre_rank) the indexed prefix elements of each set
    (CSR by set, as ranks in the global order), (post_start, post_doc) the sets holding each rank in
    their prefix (CSR by rank, sets ascending)."""
    distinct, inverse, counts = np.unique(values, return_inverse=True, return_counts=True)
    # the global order: rarest first, then by value (``distinct`` is sorted, the sort stable)
    rank_of = np.empty(len(distinct), dtype=np.int64)
    rank_of[np.argsort(counts, kind="stable")] = np.arange(len(distinct), dtype=np.int64)
    ranks = rank_of[inverse.reshape(-1)]
    single = int((counts == 1).sum())  # ranks below this belong to one set: never a shared element
    # prefix lengths, conservative (see the module doc); empty sets have none
    need = np.ceil(size.astype(np.float64) * low)
    plen = np.clip(size - need + 1, 0, size).astype(np.int64)
    pre_off, pre_rank = _prefixes(ranks, offsets, plen, single)
    by_rank = np.argsort(pre_rank, kind="stable")  # sets ascending within a rank (pre_rank is set-major)
    post_doc = np.repeat(np.arange(len(size), dtype=np.int64), np.diff(pre_off))[by_rank]
    post_start = np.zeros(len(distinct) + 1, dtype=np.int64)
    np.cumsum(np.bincount(pre_rank, minlength=len(distinct)), out=post_start[1:])
    return pre_off, pre_rank, post_start, post_doc


@njit(cache=True)
def _prefixes(ranks, offsets, plen, single):
    """Each set's first ``plen`` ranks in the global order, less those below ``single`` (held by that set
    alone: they match nothing, so they count in the prefix but are not indexed)."""
    n = len(offsets) - 1
    total = 0
    for d in range(n):
        total += plen[d]
    out = np.empty(total, dtype=np.int64)
    off = np.zeros(n + 1, dtype=np.int64)
    o = 0
    for d in range(n):
        if plen[d] > 0:
            mine = np.sort(ranks[offsets[d]:offsets[d + 1]])
            for j in range(plen[d]):
                if mine[j] >= single:
                    out[o] = mine[j]
                    o += 1
        off[d + 1] = o
    return off, out[:o]


@njit(cache=True)
def _candidates(x, cap, pre_off, pre_rank, post_start, post_doc, size, low, mark, out_a, out_b):
    """The candidate pairs (x, y > x) of sets x onwards, into out_a/out_b: y shares an indexed prefix
    element with x, and their sizes allow the threshold. Stops before a set whose candidates might not
    fit in ``cap``; returns (the next set, the pairs made). ``mark[y] == x``: y already is x's candidate."""
    n = len(size)
    k = 0
    while x < n and k + (n - 1 - x) <= cap:
        for e in range(pre_off[x], pre_off[x + 1]):
            r = pre_rank[e]
            s, t = post_start[r], post_start[r + 1]
            q = s + np.searchsorted(post_doc[s:t], x, side="right")  # the sets after x
            for j in range(q, t):
                y = post_doc[j]
                if mark[y] != x:
                    mark[y] = x
                    lo, hi = min(size[x], size[y]), max(size[x], size[y])
                    if lo >= hi * low:  # Jaccard <= min / max: a smaller ratio can't reach the threshold
                        out_a[k] = x
                        out_b[k] = y
                        k += 1
        x += 1
    return x, k


@njit(cache=True)
def _every_pair(x, cap, n, out_a, out_b):
    """Every pair (x, y > x) of sets x onwards, as :func:`_candidates` makes them (chunks of <= cap)."""
    k = 0
    while x < n and k + (n - 1 - x) <= cap:
        for y in range(x + 1, n):
            out_a[k] = x
            out_b[k] = y
            k += 1
        x += 1
    return x, k
