"""Normalised text and its shingles, as the MinHash signatures and the true Jaccard see them (the
definitions are in :mod:`curate.stages.dedup.minhash`'s docstring).

The readable reference (:func:`normalise_text`, :func:`shingles`) and the compiled pieces the
kernels share (:func:`normalise`'s separator pass, a shingle's byte spans, the count that sizes
their buffers) sit together so that the two cannot drift apart.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from curate.stages.dedup.hashing import U0, U1, U2, U3, U4, U6, U12, U18

WORD, CHAR = "word", "char"

#: code points that separate words: Unicode punctuation (P*), symbols (S*), separators (Z*) and
#: controls (Cc, which include tab and newline). Planes 4-13 and 15-16 hold none of them.
_SEPARATOR_CATEGORIES = ("P", "S", "Z")
_separator_table = None


def _build_separator_table() -> np.ndarray:
    import unicodedata

    table = np.zeros(0x110000, dtype=np.uint8)
    for cp in (*range(0x40000), *range(0xE0000, 0xE1000)):
        cat = unicodedata.category(chr(cp))
        if cat[0] in _SEPARATOR_CATEGORIES or cat == "Cc":
            table[cp] = 1
    return table


def separator_table() -> np.ndarray:
    """uint8[0x110000]: 1 where the code point is a separator.

    Building it takes 266k ``unicodedata`` calls (0.2-0.4 s), paid by every worker process of every
    run; so it is kept, bit-packed (139 KB), in ``__pycache__`` beside this file (where numba caches
    the kernels), keyed by the Unicode version of this Python, and rebuilt when absent or unreadable."""
    global _separator_table
    if _separator_table is None:
        import os
        import unicodedata

        cache = os.path.join(os.path.dirname(os.path.abspath(__file__)), "__pycache__",
                             f"separators-{unicodedata.unidata_version}.bin")
        try:
            with open(cache, "rb") as f:
                packed = np.frombuffer(f.read(), dtype=np.uint8)
            table = np.unpackbits(packed)[:0x110000]
            if len(table) != 0x110000:
                raise ValueError("truncated")
        except (OSError, ValueError):
            table = _build_separator_table()
            try:  # best effort (a read-only install just rebuilds): temp file, then an atomic rename
                os.makedirs(os.path.dirname(cache), exist_ok=True)
                tmp = f"{cache}.{os.getpid()}.tmp"
                with open(tmp, "wb") as f:
                    f.write(np.packbits(table).tobytes())
                os.replace(tmp, cache)
            except OSError:
                pass
        _separator_table = np.ascontiguousarray(table, dtype=np.uint8)
    return _separator_table


# --------------------------------------------------------------------------- normalisation


def as_large_strings(values):
    """A pyarrow LargeStringArray (one chunk, nulls as empty strings) from a Series/array/list."""
    import pyarrow as pa

    if isinstance(values, (pa.Array, pa.ChunkedArray)):
        arr = values
    elif hasattr(values, "array"):  # pandas Series
        arr = pa.array(values.array) if not isinstance(values.array, np.ndarray) else pa.array(values.to_numpy())
    else:
        arr = pa.array(list(values), type=pa.large_string())
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks() if arr.num_chunks else pa.array([], type=pa.large_string())
    if arr.type != pa.large_string():
        arr = arr.cast(pa.large_string())
    if arr.null_count:
        arr = arr.fill_null("")
    return arr


def normalise(values):
    """Normalised texts (see the module docstring) as a pyarrow LargeStringArray.

    Lowercasing is Arrow's ``utf8_lower``; the separator pass is one compiled loop over the bytes
    (a regex replacement in Arrow runs at ~50 MB/s and would dominate the MinHash step)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    arr = as_large_strings(pc.utf8_lower(as_large_strings(values)))
    data, offsets = _buffers(arr)
    out = np.empty(max(len(data), 1), dtype=np.uint8)
    out_offsets = np.empty(len(arr) + 1, dtype=np.int64)
    _collapse_separators(data, offsets, separator_table(), out, out_offsets)
    return pa.LargeStringArray.from_buffers(len(arr), pa.py_buffer(out_offsets),
                                            pa.py_buffer(out[: out_offsets[-1]]))


def normalise_text(text: str) -> str:
    return normalise([text])[0].as_py()


def shingles(text: str, ngram: int = 5, kind: str = WORD) -> list[str]:
    """The shingles of one text, in order, repeats included (the readable reference of the kernel)."""
    norm = normalise_text(text)
    if not norm:
        return []
    units = norm.split(" ") if kind == WORD else list(norm)
    sep = " " if kind == WORD else ""
    if len(units) < ngram:
        return [norm]
    return [sep.join(units[i:i + ngram]) for i in range(len(units) - ngram + 1)]


def _buffers(arr):
    """(UTF-8 bytes as uint8, int64 offsets) of a LargeStringArray, zero-copy."""
    offsets = np.frombuffer(arr.buffers()[1], dtype=np.int64)[arr.offset: arr.offset + len(arr) + 1]
    data_buf = arr.buffers()[2]
    data = np.frombuffer(data_buf, dtype=np.uint8) if data_buf is not None else np.zeros(1, np.uint8)
    if len(data) == 0:
        data = np.zeros(1, np.uint8)
    return data, offsets


# --------------------------------------------------------------------------- compiled kernels
# Module-level so numba can cache the machine code next to this file (closures are not cached);
# compiling happens on the first call, not at import.


@njit(cache=True)
def _collapse_separators(data, offsets, table, out, out_offsets):
    """Copy each text, every run of separator code points -> one space, no leading/trailing space.

    Unsigned indices: no negative-index checks in this byte loop."""
    o = U0
    for d in range(len(offsets) - 1):
        out_offsets[d] = o
        i, e = np.uint64(offsets[d]), np.uint64(offsets[d + 1])
        pending = U0  # a separator run follows a word: write one space before the next word
        seen = U0  # a word has been written (no leading space)
        while i < e:
            b0 = data[i]
            n = U1
            if b0 < 0x80:
                # branch-free: word boundaries are unpredictable and mispredictions dominated this loop
                # (stores may land one past the last kept byte; out has room, they are overwritten)
                sep = np.uint64(table[b0])
                keep = U1 - sep
                out[o] = 32
                o += keep & pending
                out[o] = b0
                o += keep
                pending = sep & seen
                seen = seen | keep
                i += U1
                continue
            if (b0 >> 5) == 6 and i + U1 < e:
                cp, n = (np.uint64(b0 & 0x1F) << U6) | np.uint64(data[i + U1] & 0x3F), U2
            elif (b0 >> 4) == 14 and i + U2 < e:
                cp = (np.uint64(b0 & 0x0F) << U12) | (np.uint64(data[i + U1] & 0x3F) << U6) \
                    | np.uint64(data[i + U2] & 0x3F)
                n = U3
            elif (b0 >> 3) == 30 and i + U3 < e:
                cp = (np.uint64(b0 & 0x07) << U18) | (np.uint64(data[i + U1] & 0x3F) << U12) \
                    | (np.uint64(data[i + U2] & 0x3F) << U6) | np.uint64(data[i + U3] & 0x3F)
                n = U4
            else:  # not reachable for valid UTF-8 (Arrow strings are validated); keep the byte
                cp = np.uint64(0x41)
            if cp < 0x110000 and table[cp]:
                pending = seen
            else:
                if pending:
                    out[o] = 32
                    o += U1
                    pending = U0
                for k in range(n):
                    out[o + k] = data[i + k]
                o += n
                seen = U1
            i += n
    out_offsets[len(offsets) - 1] = o


@njit(cache=True)
def _shingle_spans(data, s0, e0, ngram, word, out_start, out_end):
    """Byte spans of the shingles of normalised text data[s0:e0] into out_start/out_end (each with
    room for one more than the number of words or code points); returns their number.

    The positions of the spaces (words) or code point starts (characters) are collected without
    branches first (word boundaries are unpredictable), then turned into spans in place."""
    if e0 <= s0:
        return 0
    k = 0
    if word:  # normalised: words are separated by exactly one space
        for i in range(s0, e0):
            out_end[k] = i
            k += np.int64(data[i] == 32)
        out_end[k] = e0
        words = k + 1
        if words < ngram:
            out_start[0], out_end[0] = s0, e0
            return 1
        m = words - ngram + 1
        out_start[0] = s0
        for j in range(1, m):
            out_start[j] = out_end[j - 1] + 1
        for j in range(m):
            out_end[j] = out_end[j + ngram - 1]
        return m
    for i in range(s0, e0):
        out_start[k] = i
        k += np.int64((data[i] & 0xC0) != 0x80)  # a code point starts here
    if k < ngram:
        out_start[0], out_end[0] = s0, e0
        return 1
    m = k - ngram + 1
    for j in range(m - 1):
        out_end[j] = out_start[j + ngram]
    out_end[m - 1] = e0
    return m


@njit(cache=True)
def _count_units(data, s0, e0, word):
    """Upper bound of the number of shingles: words (spaces + 1) or code points."""
    n = 0
    if word:
        for i in range(s0, e0):
            if data[i] == 32:
                n += 1
        return n + 1
    for i in range(s0, e0):
        if (data[i] & 0xC0) != 0x80:
            n += 1
    return n + 1
