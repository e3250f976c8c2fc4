"""A KenLM model file checked from its header, without KenLM: what the perplexity filter refuses
before any work (settings are read at job load, so ``curate run --dry-run`` refuses too).

KenLM itself meets a broken model only when a worker loads it, after the stages before the filter
ran, and says so as a raw ``UnicodeDecodeError``, a crash, or an allocation of whatever the header
claims (a ``2e9``-unigram header asks for 36 GB). So, from the first and last bytes of the file:

- ARPA (plain, or ``.gz``/``.bz2``/``.xz``, which KenLM reads too): blank or ``#`` lines, the
  ``\\data\\`` line, ``ngram N=COUNT`` lines for N = 1, 2, ... in order, then ``\\1-grams:``; an
  uncompressed file has its ``\\end\\`` line near its end (a truncated one does not). Each n-gram
  line takes at least ``2N + 2`` bytes (a log probability, a tab, N words of a byte, N - 1 spaces, a
  newline), so the counts must fit in the file (a compressed one: in :data:`MAX_RATIO` times its
  size, far above what n-gram text compresses to).
- KenLM binary (``build_binary``): the magic and test values ``lm/binary_format.cc`` writes (version
  5, little-endian, 64-bit: another build's file is refused as KenLM would), a model type KenLM
  knows, an order of at least 1, and counts the file can hold: every unigram takes 8 bytes or more
  (its probability and backoff) and every longer n-gram at least a bit.

What the header cannot show (a damaged n-gram line in the middle) KenLM reports when it loads; the
filter turns that into one line naming the file too.
"""

from __future__ import annotations

import os
import struct

#: the ARPA header (``\data\`` and its counts) ends within this many bytes
HEADER_BYTES = 1 << 16
#: an uncompressed ARPA file's ``\end\`` line lies within its last this many bytes
TAIL_BYTES = 4096
#: a compressed ARPA file holds at most this many times its size (deflate's own limit is 1032:1)
MAX_RATIO = 1032
COMPRESSED = {b"\x1f\x8b": "gzip", b"BZh": "bz2", b"\xfd7zXZ\x00": "xz"}

# lm/binary_format.cc: the magic, padded to 8 bytes, then test values (floats 0, 1, -0.5; word
# indices 1, 2^32 - 1 and padding 0; a 64-bit 1); then order, probing multiplier, model type, has
# vocabulary, search version (20 bytes); then one 64-bit count per order
BINARY_PREFIX = b"mmap lm http://kheafield.com/code"
BINARY_INCOMPLETE = b"mmap lm http://kheafield.com/code incomplete\n"
BINARY_SANITY = b"mmap lm http://kheafield.com/code format version 5\n\0".ljust(56, b"\0") + \
    struct.pack("<fffIIIQ", 0.0, 1.0, -0.5, 1, 0xFFFFFFFF, 0, 1)
BINARY_FIXED = struct.Struct("<B3xfiB3xI")
MODEL_TYPES = 6  # probing, rest probing, trie, quantized trie, array trie, quantized array trie


class ModelFileError(ValueError):
    """What is wrong with a model file, said without its path (the caller names it)."""


def check_model_file(path: str) -> str:
    """``"arpa"`` or ``"binary"`` when ``path``'s header is sound; else :class:`ModelFileError`."""
    size = os.path.getsize(path)
    if size == 0:
        raise ModelFileError("empty file")
    with open(path, "rb") as f:
        head = f.read(HEADER_BYTES)
        f.seek(max(size - TAIL_BYTES, 0))
        tail = f.read()
    if head.startswith(BINARY_PREFIX):
        _check_binary(head, size)
        return "binary"
    kind = next((k for magic, k in COMPRESSED.items() if head.startswith(magic)), None)
    counts = _arpa_counts(_decompressed_head(path, kind) if kind else head)
    if not kind and b"\\end\\" not in (line.strip() for line in tail.split(b"\n")[1 if size > TAIL_BYTES else 0:]):
        raise ModelFileError("ARPA without its closing \\end\\ line (truncated?)")
    room = size * MAX_RATIO if kind else size
    need = sum(count * (2 * n + 2) for n, count in enumerate(counts, start=1))
    if need > room:
        raise ModelFileError(f"its header claims {_claims(counts)}, at least {need:,} bytes of n-gram lines, but "
                             f"the file is {size:,} bytes{' compressed' if kind else ''}")
    return "arpa"


def _claims(counts: list[int]) -> str:
    return ", ".join(f"{c:,} {n}-grams" for n, c in enumerate(counts, start=1))


def _decompressed_head(path: str, kind: str) -> bytes:
    import bz2
    import gzip
    import lzma

    opener = {"gzip": gzip.open, "bz2": bz2.open, "xz": lzma.open}[kind]
    try:
        with opener(path, "rb") as f:
            return f.read(HEADER_BYTES)
    except (OSError, EOFError, lzma.LZMAError) as e:
        raise ModelFileError(f"{kind}-compressed, but it does not decompress ({e})") from None


def _arpa_counts(head: bytes) -> list[int]:
    """The n-gram counts of an ARPA header (``\\data\\``, ``ngram N=COUNT`` lines, ``\\1-grams:``)."""
    lines = iter(head.split(b"\n"))
    # KenLM skips blank lines and comments (#) before \data\
    line = next((x.strip() for x in lines if x.strip() and not x.startswith(b"#")), b"")
    if line != b"\\data\\":
        raise ModelFileError("neither an ARPA model (its first line is not \\data\\) nor a KenLM binary (no KenLM "
                             "magic)")
    counts = []
    for raw in lines:
        line = raw.strip()
        if not line:
            if counts:
                break
            continue
        text = line.decode("ascii", "replace")
        name, eq, value = text.partition("=")
        if not (eq and name.split() == ["ngram", str(len(counts) + 1)] and value.strip().isdigit()):
            raise ModelFileError(f"ARPA header line {text[:80]!r} is not 'ngram {len(counts) + 1}=COUNT'")
        counts.append(int(value))
    else:
        raise ModelFileError(f"ARPA header does not end within its first {HEADER_BYTES:,} bytes")
    if not counts or counts[0] < 1:
        raise ModelFileError("ARPA header without unigrams ('ngram 1=COUNT' of at least 1)")
    if next((x.strip() for x in lines if x.strip()), b"") != b"\\1-grams:":
        raise ModelFileError("ARPA header not followed by the \\1-grams: section")
    return counts


def _check_binary(head: bytes, size: int) -> None:
    if head.startswith(BINARY_INCOMPLETE):
        raise ModelFileError("a KenLM binary that did not finish building")
    if len(head) < len(BINARY_SANITY) + BINARY_FIXED.size:
        raise ModelFileError(f"a KenLM binary cut short ({size} bytes, shorter than its header)")
    if head[:len(BINARY_SANITY)] != BINARY_SANITY:
        raise ModelFileError("a KenLM binary of another version or machine (its test values differ from "
                             "format version 5 on little-endian 64-bit): rebuild it from the ARPA file")
    order, multiplier, model_type, _vocab, _version = BINARY_FIXED.unpack_from(head, len(BINARY_SANITY))
    if order < 1 or not 0 <= model_type < MODEL_TYPES or not multiplier >= 1.0:
        raise ModelFileError(f"a KenLM binary whose header is broken (order {order}, model type {model_type}, "
                             f"probing multiplier {multiplier})")
    start = len(BINARY_SANITY) + BINARY_FIXED.size
    header = -(-(start + 8 * order) // 8) * 8
    if size < header:
        raise ModelFileError(f"a KenLM binary cut short ({size} bytes, shorter than its {header}-byte header)")
    counts = list(struct.unpack_from(f"<{order}Q", head, start))
    need = 8 * counts[0] + -(-sum(counts[1:]) // 8)
    if counts[0] < 1 or need > size - header:
        raise ModelFileError(f"its header claims {_claims(counts)}, at least {need:,} bytes, but the file is "
                             f"{size:,} bytes")
