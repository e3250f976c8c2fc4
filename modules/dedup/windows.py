"""Token windows for exact-substring dedup (:mod:`.substrings`): tokens, the 64-bit hash of every
window of ``W`` consecutive tokens, first occurrences, candidate runs and their exact verification,
and removed token ranges turned into byte ranges. Pure numpy; no Python loop per token or window.

Window hashes are a polynomial rolling hash over random 64-bit values of the token ids, mod 2^64,
computed for every window at once from prefix sums (``B`` odd, so it has an inverse mod 2^64), then
mixed (SplitMix64's finaliser) so that the shuffle's partitioning sees well-spread bits. A hash only
proposes a match: every candidate is compared token by token before anything is removed.
"""

from __future__ import annotations

import functools

import numpy as np

#: the rolling hash's base (odd) and its inverse mod 2^64
BASE = 0x9E3779B97F4A7C15
BASE_INV = pow(BASE, -1, 1 << 64)
SEED = 0x5EED_0033


@functools.lru_cache(maxsize=4)
def token_tables(encoding: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(bytes per token id, whether the token starts inside a UTF-8 character, a random 64-bit value
    per id) for a tiktoken encoding's ordinary tokens; loaded once per process."""
    from curate.stages.tokenize.load import load_tokenizer

    enc = load_tokenizer(encoding)._enc
    ranks = enc._mergeable_ranks
    n = max(ranks.values()) + 1
    length = np.zeros(n, dtype=np.int64)
    inside = np.zeros(n, dtype=bool)
    for token, rank in ranks.items():
        length[rank] = len(token)
        inside[rank] = (token[0] & 0xC0) == 0x80
    values = np.random.default_rng(SEED).integers(0, 2**64 - 1, size=n, dtype=np.uint64, endpoint=True)
    return length, inside, values


#: documents tokenized at a time (:func:`tokenize`)
TOKENIZE_BATCH = 1000


def tokenize(texts: list, encoding: str) -> tuple[np.ndarray, np.ndarray]:
    """(all tokens of ``texts`` as one uint32 array, offsets: document ``d``'s at ``[offsets[d],
    offsets[d+1])``). A document whose tokens do not add up to its UTF-8 bytes (it cannot happen for
    valid text; checked so that a removal can never cut at a wrong byte) gets no tokens."""
    from curate.stages.tokenize.load import load_tokenizer

    tok = load_tokenizer(encoding)
    length = token_tables(encoding)[0]
    out = []
    # a batch at a time: the encoder returns Python ints (about 36 bytes a token), which a whole 32 MiB
    # partition would hold at once (~300 MB) beside its arrays
    for b in range(0, len(texts), TOKENIZE_BATCH):
        batch = texts[b:b + TOKENIZE_BATCH]
        seqs = tok.encode_sequences([t if isinstance(t, str) else "" for t in batch])
        for text, ids in zip(batch, seqs):
            ids = np.asarray(ids, dtype=np.uint32)
            nbytes = len(text.encode("utf-8", "surrogatepass")) if isinstance(text, str) else 0
            out.append(ids if int(length[ids].sum()) == nbytes else ids[:0])
        del seqs
    sizes = np.array([len(a) for a in out], dtype=np.int64)
    offsets = np.zeros(len(out) + 1, dtype=np.int64)
    np.cumsum(sizes, out=offsets[1:])
    flat = np.concatenate(out) if out else np.zeros(0, dtype=np.uint32)
    return flat.astype(np.uint32, copy=False), offsets


def _mix(z: np.ndarray) -> np.ndarray:
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


#: documents are hashed in groups of about this many tokens, so the hash's temporaries stay small
HASH_CHUNK = 1 << 18


def window_hashes(tokens: np.ndarray, offsets: np.ndarray, width: int, values: np.ndarray):
    """(hash, document index, position) of every window of ``width`` tokens that lies inside one
    document, in (document, position) order: windows never cross a document boundary. 16 bytes per
    window, written in place group by group (no second copy)."""
    counts = np.maximum(np.diff(offsets) - width + 1, 0)
    total = int(counts.sum())
    h = np.empty(total, dtype=np.uint64)
    doc = np.empty(total, dtype=np.int32)
    pos = np.empty(total, dtype=np.int32)
    at, a = 0, 0
    while a < len(counts):
        b = int(np.searchsorted(offsets, offsets[a] + HASH_CHUNK, side="right"))
        b = min(max(b - 1, a + 1), len(counts))  # whole documents, at least one
        ch, cd, cp = _chunk_hashes(tokens, offsets, a, b, width, values)
        h[at:at + len(ch)], doc[at:at + len(ch)], pos[at:at + len(ch)] = ch, cd, cp
        at += len(ch)
        a = b
    return h, doc, pos


def _chunk_hashes(tokens, offsets, a: int, b: int, width: int, values):
    """Window hashes of documents ``a`` to ``b - 1``."""
    base = int(offsets[a])
    sub = tokens[base:int(offsets[b])]
    sizes = np.diff(offsets[a:b + 1])
    counts = np.maximum(sizes - width + 1, 0)
    total = int(counts.sum())
    doc = np.repeat(np.arange(a, b, dtype=np.int32), counts)
    first = np.zeros(len(counts), dtype=np.int64)
    np.cumsum(counts[:-1], out=first[1:])
    pos = np.arange(total, dtype=np.int64) - np.repeat(first, counts)
    if not total:
        return np.zeros(0, dtype=np.uint64), doc, pos.astype(np.int32)
    start = offsets[doc] - base + pos  # window start in ``sub``
    n = len(sub)
    with np.errstate(over="ignore"):
        inv = np.full(n, BASE_INV, dtype=np.uint64)
        inv[0] = 1
        inv = np.cumprod(inv, dtype=np.uint64)  # BASE_INV^i
        prefix = np.zeros(n + 1, dtype=np.uint64)
        np.cumsum(values[sub] * inv, dtype=np.uint64, out=prefix[1:])
        del inv
        power = np.full(n, BASE, dtype=np.uint64)
        power[0] = 1
        power = np.cumprod(power, dtype=np.uint64)  # BASE^i
        # sum_i x[s+i] * BASE^(width-1-i): the window's polynomial, independent of where it starts
        h = (prefix[start + width] - prefix[start]) * power[start + width - 1]
        h = _mix(h)
    return h, doc, pos.astype(np.int32)


def first_of_hash(h: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For rows in (document, position) order: (rows that are the first of their hash; for every row,
    the row of its hash's first). Indices are int32 (a partition holds fewer than 2^31 windows)."""
    n = len(h)
    if not n:
        return np.zeros(0, dtype=np.int32), np.zeros(0, dtype=np.int32)
    order = np.argsort(h, kind="stable").astype(np.int32)
    sh = h[order]
    new = np.empty(n, dtype=bool)
    new[0] = True
    np.not_equal(sh[1:], sh[:-1], out=new[1:])
    del sh
    heads = order[new]  # the first row of each hash (stable sort: the smallest row)
    group = np.cumsum(new, dtype=np.int32)
    group -= 1
    first = np.empty(n, dtype=np.int32)
    first[order] = heads[group]
    heads.sort()
    return heads, first


def runs(doc, pos, first_doc, first_pos) -> dict:
    """Candidate windows (sorted by document, position) joined into runs: consecutive windows of one
    document matched to consecutive windows of one earlier document. A run of ``n`` windows claims
    ``n + width - 1`` tokens equal."""
    doc, pos = np.asarray(doc, dtype=np.int64), np.asarray(pos, dtype=np.int64)
    first_doc, first_pos = np.asarray(first_doc, dtype=np.int64), np.asarray(first_pos, dtype=np.int64)
    if not len(doc):
        z = np.zeros(0, dtype=np.int64)
        return {"doc": z, "start": z, "windows": z, "first_doc": z, "first_start": z}
    brk = np.r_[True, (doc[1:] != doc[:-1]) | (pos[1:] != pos[:-1] + 1)
                | (first_doc[1:] != first_doc[:-1]) | (first_pos[1:] != first_pos[:-1] + 1)]
    starts = np.flatnonzero(brk)
    return {"doc": doc[starts], "start": pos[starts], "windows": np.diff(np.r_[starts, len(doc)]),
            "first_doc": first_doc[starts], "first_start": first_pos[starts]}


def window_ranges(mask: np.ndarray, start: int, width: int) -> list[tuple[int, int]]:
    """Token ranges (from ``start``) covered by the windows ``k`` of a run with ``mask[k]``, merged where
    they overlap or touch."""
    ks = np.flatnonzero(mask)
    if not len(ks):
        return []
    new = np.r_[True, ks[1:] > ks[:-1] + width]
    firsts = np.flatnonzero(new)
    lasts = np.r_[firsts[1:] - 1, len(ks) - 1]
    return list(zip((start + ks[firsts]).tolist(), (start + ks[lasts] + width).tolist()))


def verify_windows(a: np.ndarray, b: np.ndarray, start: int, width: int):
    """(token ranges (from ``start``) of the windows of a run whose tokens ``a`` equal the earlier
    occurrence's ``b`` exactly; those of the windows that do not: a hash collision, or nothing fetched).
    The first are repeats; the second are kept whole, since one of them may be the first occurrence
    of its own content, which the hash paired with another."""
    n = len(a) - width + 1
    if n <= 0:
        return [], []
    if len(a) != len(b):
        ok = np.zeros(n, dtype=bool)
    else:
        bad = np.r_[0, np.cumsum(a != b)]
        ok = (bad[width:] - bad[:-width]) == 0  # window k covers a[k:k+width]
    return window_ranges(ok, start, width), window_ranges(~ok, start, width)


def verified(a: np.ndarray, b: np.ndarray, start: int, width: int) -> list[tuple[int, int]]:
    """Token ranges (from ``start``) of the windows of a run whose tokens ``a`` equal the earlier
    occurrence's ``b`` exactly: all of it when they agree, only the agreeing windows when a hash
    collision slipped in."""
    return verify_windows(a, b, start, width)[0]


def removed_tokens(remove, keep, n: int) -> tuple[list[tuple[int, int]], int]:
    """(the token ranges of a document of ``n`` tokens to remove: those ``remove`` covers (later
    occurrences) less those ``keep`` covers (first occurrences of repeated windows, and windows whose
    verification failed), sorted and merged; the tokens of ``remove`` that ``keep`` saved)."""
    def cover(ranges):
        d = np.zeros(n + 1, dtype=np.int32)
        if ranges:
            r = np.asarray(ranges, dtype=np.int64).reshape(-1, 2)
            np.add.at(d, r[:, 0], 1)
            np.add.at(d, r[:, 1], -1)
        return np.cumsum(d[:n]) > 0

    later, first = cover(remove), cover(keep)
    cut = later & ~first
    edges = np.flatnonzero(np.diff(np.r_[False, cut, False].astype(np.int8)))
    return list(zip(edges[0::2].tolist(), edges[1::2].tolist())), int((later & first).sum())


def byte_ranges(ids: np.ndarray, ranges, length: np.ndarray, inside: np.ndarray) -> list[tuple[int, int]]:
    """Byte ranges of the token ranges (sorted, merged) of one document with tokens ``ids``. A range
    that would start or end inside a UTF-8 character (cl100k splits some characters over tokens) is
    shrunk to whole characters: less is removed, the text stays valid."""
    if not ranges:
        return []
    off = np.r_[0, np.cumsum(length[ids])]
    mid = inside[ids]
    n = len(ids)
    out = []
    for a, b in ranges:
        while a < b and mid[a]:
            a += 1
        while b > a and b < n and mid[b]:
            b -= 1
        if a < b:
            out.append((int(off[a]), int(off[b])))
    return out
