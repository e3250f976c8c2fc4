"""Text cut into units below the document (paragraphs, lines, sentences), their hashes, and texts
rewritten without some of them: the pure part of span dedup (:mod:`.spans`), also used by
substring dedup (:mod:`.substrings`) to cut byte ranges out of texts.

Units and their separators:

- ``paragraph``: text between blank lines (a newline, then lines holding only spaces);
- ``line``: text between newlines;
- ``sentence``: text up to ``. ! ?`` (then optional closing quotes or brackets) followed by
  whitespace, or up to a newline (a heading without a full stop is a sentence of its own). A regular
  expression, not a trained splitter ("e.g. this" splits after "e.g."): the same rule on every
  document is what dedup needs, and C4's NLTK splitter is neither fast nor stable across versions.

A unit is the stretch between two separators that holds something other than whitespace; units are
numbered from 0 in the order they appear. How a unit is hashed (its *key*): its words (``str.split``)
joined by one space, so spaces, tabs, line breaks inside a paragraph and a trailing ``\\r`` never make
two copies differ; case, punctuation and every other character count. The hash is XXH3-64 of the
key's UTF-8 bytes. A sentence *span* (C4's rule) is three consecutive sentences of one document; its key
is the three keys joined by one space, and span ``k`` covers sentences ``k, k+1, k+2``.

Removing units keeps the rest of the text byte for byte: a removed unit goes with the separator after
it (the one before it when it is the last unit), so neither a gap of blank lines nor a dangling
separator is left behind where a unit was.
"""

from __future__ import annotations

import re

import numpy as np

UNITS = ("paragraph", "line", "sentence")
#: sentences per span in sentence mode (C4: "any three-sentence span occurring more than once")
SENTENCES_PER_SPAN = 3

_SEPARATORS = {
    # a separator ends at a newline: the next unit keeps its indentation (code, verse)
    "paragraph": re.compile(r"\n(?:[^\S\n]*\n)+"),
    "line": re.compile(r"\n"),
    # after . ! ? (and up to one closing quote or bracket) horizontal whitespace; or line breaks
    "sentence": re.compile(r"(?:(?<=[.!?])|(?<=[.!?][\"'\u201d\u2019)\]]))[^\S\n]+|[^\S\n]*\n(?:[^\S\n]*\n)*"),
}
_NON_SPACE = re.compile(r"\S")


def units(text: str, unit: str) -> list[tuple[int, int]]:
    """(start, end) character offsets of the units of ``text`` that hold a non-space character."""
    out, pos = [], 0
    for m in _SEPARATORS[unit].finditer(text):
        if m.start() > pos and _NON_SPACE.search(text, pos, m.start()):
            out.append((pos, m.start()))
        pos = max(pos, m.end())
    if pos < len(text) and _NON_SPACE.search(text, pos):
        out.append((pos, len(text)))
    return out


def key(text: str) -> str:
    """How a unit is compared: its words joined by one space."""
    return " ".join(text.split())


def hash_key(k: str) -> int:
    import xxhash

    return xxhash.xxh3_64_intdigest(k.encode("utf-8", "surrogatepass"))


def spans(text: str, unit: str, min_words: int) -> tuple[list[tuple[int, int]], list[tuple[int, int, int]]]:
    """The units of ``text`` and its spans that have at least ``min_words`` words, as
    ``(span index, hash, words)``. A span is a unit, or (``sentence``) three consecutive sentences;
    spans with fewer words are never hashed, so they are never removed nor make another one removed."""
    cut = units(text, unit)
    keys = [key(text[a:b]) for a, b in cut]
    words = [k.count(" ") + 1 for k in keys]  # a key is non-empty: words are its spaces + 1
    out = []
    if unit == "sentence":
        n = SENTENCES_PER_SPAN
        for k in range(len(keys) - n + 1):
            w = sum(words[k:k + n])
            if w >= min_words:
                out.append((k, hash_key(" ".join(keys[k:k + n])), w))
    else:
        for k, (kk, w) in enumerate(zip(keys, words)):
            if w >= min_words:
                out.append((k, hash_key(kk), w))
    return cut, out


def width(unit: str) -> int:
    """Units per span."""
    return SENTENCES_PER_SPAN if unit == "sentence" else 1


def covered_units(span_indices, unit: str) -> np.ndarray:
    """Indices of the units that spans cover (sorted, distinct)."""
    idx = np.asarray(span_indices, dtype=np.int64)
    if unit == "sentence":
        idx = (idx[:, None] + np.arange(SENTENCES_PER_SPAN)).ravel()
    return np.unique(idx)


def removed_units(later, count: int, unit: str) -> np.ndarray:
    """The units to remove from a document of ``count`` units (sorted, distinct): those its ``later``
    spans (later occurrences, by span index) cover and none of its other windows covers. Every other
    window is the first occurrence of its span (repeated or not) or too short to be hashed, and keeping
    it whole is what makes every distinct span of the input stay whole somewhere: periodic text (ABABAB
    holds ABA at 0 and 2, BAB at 1 and 3; cutting sentences 2 to 5 would leave neither), or e3 = S2 S3
    S4 S0 after e2 = S1 S2 S3 S4 (cutting the repeated S2 S3 S4 whole would lose S3 S4 S0). Without
    overlapping windows (lines, paragraphs) that is every later occurrence, as in the plain rule."""
    later = np.unique(np.asarray(later, dtype=np.int64))
    others = np.setdiff1d(np.arange(max(count - width(unit) + 1, 0)), later, assume_unique=True)
    return np.setdiff1d(covered_units(later, unit), covered_units(others, unit), assume_unique=True)


def removal_ranges(cut: list[tuple[int, int]], removed) -> list[tuple[int, int]]:
    """Character ranges to delete for removing units ``removed`` (sorted distinct indices into
    ``cut``): each run of consecutive removed units with the separator after it, or, for the run that
    ends the text, with the separator before it."""
    ranges = []
    last = len(cut) - 1
    idx = [int(k) for k in removed]
    i = 0
    while i < len(idx):
        j = i
        while j + 1 < len(idx) and idx[j + 1] == idx[j] + 1:
            j += 1
        a, b = idx[i], idx[j]
        if b < last:
            ranges.append((cut[a][0], cut[b + 1][0]))
        elif a > 0:
            ranges.append((cut[a - 1][1], cut[b][1]))
        else:
            ranges.append((cut[a][0], cut[b][1]))
        i = j + 1
    return ranges


def merge_ranges(ranges) -> list[tuple[int, int]]:
    """Sorted, non-overlapping ranges covering the same positions (touching ranges joined)."""
    out: list[tuple[int, int]] = []
    for a, b in sorted(ranges):
        if out and a <= out[-1][1]:
            if b > out[-1][1]:
                out[-1] = (out[-1][0], b)
        else:
            out.append((a, b))
    return out


def cut_ranges(text, ranges):
    """``text`` (a str or bytes) without the positions in ``ranges`` (sorted, non-overlapping)."""
    parts, pos = [], 0
    for a, b in ranges:
        parts.append(text[pos:a])
        pos = b
    parts.append(text[pos:])
    return text[:0].join(parts)


def utf8_len(text: str) -> int:
    return len(text.encode("utf-8", "surrogatepass"))
