"""The verify gate behind ``curate verify``: is a tokenized output safe to hand to Megatron?

A target is a tokenize output directory (local or an fsspec URL) or a single pair named by its
prefix (``out/merged`` for ``out/merged.bin`` + ``out/merged.idx``). Every problem is one line
``FILE: CHECK: detail``. The checks:

- ``_SUCCESS`` present (directories only); every file named in ``manifest.json`` present;
- every ``.bin`` has its ``.idx`` and the reverse; no file is empty;
- the index header: magic, version, dtype code; its size matches its counts;
- lengths, pointers and document indices agree with each other and with the ``.bin`` size;
- every pair of a set has the same dtype (and the manifest's);
- every token id is below the vocabulary size (``--vocab-size``, else the ``--tokenizer``'s, else
  the manifest's) and not negative; this reads every ``.bin`` once, in chunks.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

import numpy as np

from modules.dataset import MANIFEST, SUCCESS
from modules.errors import SettingsError
from modules.tokenize import megatron
from modules.tokenize.writer import PAIR_RE


@dataclass
class Pair:
    name: str  # file name without .bin/.idx
    set: str  # PREFIX of PREFIX_00000, else the name itself
    has_bin: bool
    has_idx: bool
    bin_size: int = 0
    dtype_code: int | None = None


@dataclass
class Target:
    fs: object
    folder: str  # the directory that holds the pairs
    is_dir: bool  # a whole output directory (else a single pair)
    pairs: list[Pair]
    manifest: dict | None
    problems: list[str] = field(default_factory=list)

    def path(self, name: str) -> str:
        return self.folder.rstrip("/") + "/" + name


def _split_name(name: str) -> str:
    m = PAIR_RE.match(name + ".bin")
    return m.group("prefix") if m else name


def discover(path: str, prefix: str | None = None) -> Target:
    """Find the pairs of a directory or a single pair; problems so far: sentinel, partners, manifest."""
    import fsspec

    fs, root = fsspec.core.url_to_fs(path)
    fs.invalidate_cache()  # a remote listing cached by this process may predate the run
    root = root.rstrip("/") if root not in ("/", "") else root
    if fs.isdir(root):
        names = {}
        for entry in fs.ls(root, detail=True):
            if entry["type"] != "file":
                continue
            base = entry["name"].rstrip("/").rsplit("/", 1)[-1]
            for ext in (".bin", ".idx"):
                if base.endswith(ext) and not base.startswith("."):
                    names.setdefault(base[: -len(ext)], set()).add(ext)
        pairs = [Pair(n, _split_name(n), ".bin" in e, ".idx" in e) for n, e in sorted(names.items())]
        target = Target(fs, root, True, pairs, None)
        if fs.exists(root + "/" + MANIFEST):
            try:
                target.manifest = json.loads(fs.cat_file(root + "/" + MANIFEST))
            except ValueError as e:
                target.problems.append(f"{root}/{MANIFEST}: manifest: not valid JSON ({e})")
        if not fs.exists(root + "/" + SUCCESS):
            target.problems.append(f"{root}/{SUCCESS}: missing _SUCCESS: the run did not finish")
        listed = (target.manifest or {}).get("files") or []
        present = {p.name for p in pairs}
        for f in listed:
            if f.get("name") not in present and (prefix is None or _split_name(f.get("name", "")) == prefix):
                target.problems.append(f"{root}/{f.get('name')}.bin: missing: listed in manifest.json")
    else:
        has_bin, has_idx = fs.exists(root + ".bin"), fs.exists(root + ".idx")
        if not (has_bin or has_idx):
            raise SettingsError(f"{path}: no such directory, and no {path}.bin or {path}.idx")
        folder, name = root.rsplit("/", 1)
        target = Target(fs, folder or "/", False, [Pair(name, name, has_bin, has_idx)], None)
    if prefix is not None:
        known = sorted({p.set for p in target.pairs})
        target.pairs = [p for p in target.pairs if p.set == prefix]
        if not target.pairs:
            raise SettingsError(f"{path}: no pairs with prefix {prefix!r} (found: {', '.join(known) or 'none'})")
    if not target.pairs:
        target.problems.append(f"{path}: no pairs: no .bin/.idx files here")
    for p in target.pairs:
        if not p.has_idx:
            target.problems.append(f"{target.path(p.name + '.idx')}: missing partner: {p.name}.bin has no .idx")
        if not p.has_bin:
            target.problems.append(f"{target.path(p.name + '.bin')}: missing partner: {p.name}.idx has no .bin")
    return target


def check_structure(target: Target, p: Pair) -> megatron.Index | None:
    """Parse one pair's index and compare it with its ``.bin``; the index when it is sound.

    Pairs are checked one at a time and their indexes not kept, so memory follows the largest
    index, not the whole output.
    """
    if not (p.has_bin and p.has_idx):
        return None
    idx_path, bin_path = target.path(p.name + ".idx"), target.path(p.name + ".bin")
    try:
        index = megatron.parse_index(target.fs.cat_file(idx_path), idx_path)
    except megatron.IndexFormatError as e:
        target.problems.append(str(e))
        return None
    p.bin_size = int(target.fs.size(bin_path))
    found = megatron.check_pair(index, p.bin_size, bin_path)
    target.problems.extend(found)
    if found:
        return None
    p.dtype_code = index.dtype_code
    expected = (target.manifest or {}).get("dtype_code")
    if expected is not None and index.dtype_code != expected:
        target.problems.append(
            f"{idx_path}: dtype code: {index.dtype_code} ({index.dtype}), but manifest.json says "
            f"{expected} ({megatron.DTYPES.get(expected)})"
        )
    return index


def check_dtypes(target: Target) -> None:
    """Every pair of a set has the same dtype."""
    codes: dict[str, set[int]] = {}
    for p in target.pairs:
        if p.dtype_code is not None:
            codes.setdefault(p.set, set()).add(p.dtype_code)
    for set_name, found in codes.items():
        if len(found) > 1:
            target.problems.append(
                f"{target.folder}: dtype code: pairs of {set_name!r} mix dtypes "
                f"{', '.join(str(megatron.DTYPES[c]) for c in sorted(found))}"
            )


def check_tokens(target: Target, p: Pair, index: megatron.Index, vocab_size: int | None) -> None:
    """Every id in ``[0, vocab_size)`` (only ``>= 0`` when the vocabulary size is unknown)."""
    if index.dtype.kind not in "iu":
        return
    limit = vocab_size if vocab_size is not None else np.iinfo(index.dtype).max + 1
    bin_path = target.path(p.name + ".bin")
    with target.fs.open(bin_path, "rb") as f:
        bad, first, largest = megatron.scan_range(f, index.dtype, limit)
    if bad:
        lengths = index.sequence_lengths.astype(np.int64)
        seq = int(np.searchsorted(np.cumsum(lengths), first, side="right"))
        doc = int(np.searchsorted(index.document_indices, seq, side="right")) - 1
        what = f">= the vocabulary size {vocab_size}" if vocab_size is not None else "negative"
        target.problems.append(
            f"{bin_path}: token id range: {bad} token ids {what} (first at token {first}, document {doc}; "
            f"largest id {largest})"
        )


@dataclass
class Report:
    target: Target
    vocab_size: int | None
    vocab_source: str
    sets: dict[str, dict]
    first: tuple[str, int, np.ndarray] | None  # pair name, tokens in document 0, its first tokens

    @property
    def problems(self) -> list[str]:
        return self.target.problems

    @property
    def ok(self) -> bool:
        return not self.problems


def verify(path: str, vocab_size: int | None = None, tokenizer=None, prefix: str | None = None,
           first_tokens: int = 64) -> Report:
    """Run every check on ``path``; ``tokenizer`` is a loaded tokenizer (for its vocabulary size) or None."""
    target = discover(path, prefix)
    if vocab_size is not None:
        source = "--vocab-size"
    elif tokenizer is not None:
        vocab_size, source = tokenizer.vocab_size, f"tokenizer {tokenizer.spec}"
    elif target.manifest and target.manifest.get("vocab_size") is not None:
        vocab_size, source = int(target.manifest["vocab_size"]), "manifest.json"
    else:
        source = "unknown (ids checked against the dtype only)"
    sets: dict[str, dict] = {}
    first = None
    # the first document shown is document 0 of the first pair of the main set
    for p in sorted(target.pairs, key=lambda p: (p.set not in ("part", "train"), p.name)):
        s = sets.setdefault(p.set, {"files": 0, "documents": 0, "tokens": 0, "bytes": 0, "dtype": set()})
        s["files"] += 1
        index = check_structure(target, p)
        if index is None:
            continue
        check_tokens(target, p, index, vocab_size)
        s["documents"] += index.documents
        s["tokens"] += index.tokens
        s["bytes"] += p.bin_size
        s["dtype"].add(str(index.dtype))
        if first is None and index.documents > 0:
            with target.fs.open(target.path(p.name + ".bin"), "rb") as f:
                tokens = megatron.read_document(f, index, 0, limit=first_tokens)
            start, end = int(index.document_indices[0]), int(index.document_indices[1])
            first = (p.name, int(index.sequence_lengths[start:end].sum()), tokens)
    check_dtypes(target)
    for s in sets.values():
        s["dtype"] = ",".join(sorted(s["dtype"])) or "?"
    return Report(target, vocab_size, source, dict(sorted(sets.items())), first)
