"""The verify gate behind ``curate verify``: is a tokenized output safe to hand to Megatron?

A target is a tokenize output directory (local or an fsspec URL) or a single pair named by its
prefix (``out/merged`` for ``out/merged.bin`` + ``out/merged.idx``). Every problem is one line
``FILE: CHECK: detail``. The checks:

- ownership: every pair belongs to a complete unit (``_manifest.json`` + ``_SUCCESS``, or for
  ``--prefix web`` ``manifest.web.json`` + ``_SUCCESS.web``; a merged pair ``merged.bin`` has
  ``manifest.merged.json``); a pair no manifest lists is a stray (a copy, another run's pair, a merge
  written inside the set); every file a manifest names is present;
- per pair, documents, tokens and bytes equal the manifest's, and the XXH3-128 checksums of its
  ``.bin`` and ``.idx`` equal the ones recorded while writing (the ``.bin`` is read once anyway, for
  the token ids, so this costs no extra read): a flipped token, a zeroed ``.bin`` of the right size
  or tokens moved between documents are caught;
- every ``.bin`` has its ``.idx`` and the reverse; no file is empty;
- the index header: magic, version, dtype code; its size matches its counts;
- lengths, pointers and document indices agree with each other and with the ``.bin`` size;
- every pair of a set has the same dtype (and the manifest's);
- the manifest's own fields against what its pairs hold (:func:`check_manifest`, one line per field):
  ``dtype`` the ``.idx`` header's (which the ``.bin`` size confirms), ``totals``, ``sets`` and
  ``counts.out`` the sums of the ``.idx`` counts, ``vocab_size`` and ``tokenizer.vocab_size`` equal,
  the dtype's (Megatron's rule) and above the largest id; ``curate erase`` runs the checks that read
  no ``.bin`` before it carries a manifest forward (:func:`unit_problems`);
- every token id is below the vocabulary size (``--vocab-size``, else the ``--tokenizer``'s, else
  the manifest's) and not negative; this reads every ``.bin`` once, in chunks;
- every pair's document sidecar (``PREFIX.docs.parquet``, format in ``writer.py``): present, its
  XXH3-128 the manifest's, the manifest's columns as strings, no null id, one row per sequence of
  the ``.idx``; for a merged pair, the rows of each input equal that input's sidecar (by the
  :func:`~curate.stages.tokenize.docs.content_digest` merge recorded). A unit written before sidecars
  existed (no ``docs_columns`` in its manifest) still verifies, with a note saying its tokens cannot
  be traced to documents; a lone pair without a manifest is checked against its sidecar when one
  lies beside it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

import numpy as np

from curate.stages.errors import SettingsError
from curate.stages.tokenize import megatron
from curate.stages.tokenize.verify_manifest import check_manifest
from curate.stages.tokenize.writer import PAIR_RE


@dataclass
class Pair:
    name: str  # file name without .bin/.idx
    set: str  # PREFIX of PREFIX_00000, else the name itself
    has_bin: bool
    has_idx: bool
    bin_size: int = 0
    dtype_code: int | None = None
    #: what a sound pair's files hold (set by check_structure; largest id by check_tokens)
    documents: int = 0
    tokens: int = 0
    idx_bytes: int = 0
    largest: int | None = None


@dataclass
class Target:
    fs: object
    folder: str  # the directory that holds the pairs
    is_dir: bool  # a whole output directory (else a single pair)
    pairs: list[Pair]
    manifest: dict | None
    problems: list[str] = field(default_factory=list)
    #: unit -> its manifest; pair name -> (unit, the manifest's entry for it)
    units: dict[str, dict] = field(default_factory=dict)
    listed: dict[str, tuple[str, dict]] = field(default_factory=dict)
    #: checksum mismatches per pair: reported only when nothing more specific was found for the pair
    mismatches: dict[str, list[str]] = field(default_factory=dict)
    #: what a sound target lacks (units without document sidecars), said on success too
    notes: list[str] = field(default_factory=list)

    def path(self, name: str) -> str:
        return self.folder.rstrip("/") + "/" + name

    def entry(self, pair: str) -> dict | None:
        return self.listed.get(pair, (None, None))[1]


def _split_name(name: str) -> str:
    m = PAIR_RE.match(name + ".bin")
    return m.group("prefix") if m else name


def _load_units(fs, root: str, names: list[str], target: Target) -> None:
    """Read every unit manifest among ``names`` (files of the folder) into ``target``."""
    import re

    from curate.stages.output import check_paths, unit_files

    for base in sorted(names):
        m = re.match(r"^_?manifest(?:\.(.+))?\.json$", base)
        if not m:
            continue
        unit = m.group(1) or ""
        try:
            manifest = json.loads(fs.cat_file(root + "/" + base))
        except ValueError as e:
            target.problems.append(f"{root}/{base}: manifest: not valid JSON ({e})")
            continue
        stage = manifest.get("stage") or (manifest.get("owner") or {}).get("stage")  # a running one names its owner
        if stage not in ("tokenize", "merge"):
            continue
        check_paths(manifest, f"{root}/{base}")
        target.units[unit] = manifest
        for f in manifest.get("files") or []:
            if isinstance(f, dict) and f.get("name"):
                target.listed[f["name"]] = (unit, f)
        success = unit_files(unit)["success"]
        manifest["_complete"] = success in names
        manifest["_name"] = base  # what problems name: an earlier curate's manifest.json too


def discover(path: str, prefix: str | None = None) -> Target:
    """Find the pairs of a directory or a single pair, and the manifests that own them; problems so
    far: sentinels, strays, partners, files a manifest lists that are missing."""
    import fsspec

    from curate.stages.output import unit_files

    fs, root = fsspec.core.url_to_fs(path)
    fs.invalidate_cache()  # a remote listing cached by this process may predate the run
    root = root.rstrip("/") if root not in ("/", "") else root
    if fs.isdir(root):
        names, files = {}, []
        for entry in fs.ls(root, detail=True):
            if entry["type"] != "file":
                continue
            base = entry["name"].rstrip("/").rsplit("/", 1)[-1]
            files.append(base)
            for ext in (".bin", ".idx"):
                if base.endswith(ext) and not base.startswith("."):
                    names.setdefault(base[: -len(ext)], set()).add(ext)
        pairs = [Pair(n, _split_name(n), ".bin" in e, ".idx" in e) for n, e in sorted(names.items())]
        target = Target(fs, root, True, pairs, None)
        _load_units(fs, root, files, target)
    else:
        has_bin, has_idx = fs.exists(root + ".bin"), fs.exists(root + ".idx")
        if not (has_bin or has_idx):
            raise SettingsError(f"{path}: no such directory, and no {path}.bin or {path}.idx")
        folder, name = root.rsplit("/", 1)
        folder = folder or "/"
        target = Target(fs, folder, False, [Pair(name, name, has_bin, has_idx)], None)
        files = [unit_files(name)[k] for k in ("manifest", "success") if fs.exists(folder + "/" + unit_files(name)[k])]
        _load_units(fs, folder, files, target)
        target.units = {u: m for u, m in target.units.items() if u == name}
        target.listed = {n: v for n, v in target.listed.items() if v[0] == name}
    if prefix is not None:
        known = sorted({p.set for p in target.pairs} | set(target.units))
        target.pairs = [p for p in target.pairs if p.set == prefix or target.listed.get(p.name, ("",))[0] == prefix]
        if not target.pairs and prefix not in target.units:
            raise SettingsError(f"{path}: no pairs with prefix {prefix!r} (found: {', '.join(known) or 'none'})")
    # the units whose pairs are checked: those owning a selected pair, or the one named by --prefix
    owners = {target.listed[p.name][0] for p in target.pairs if p.name in target.listed}
    if prefix is not None and prefix in target.units:
        owners.add(prefix)
    if prefix is None and target.is_dir:
        owners |= set(target.units)
    if len(owners) == 1:
        target.manifest = target.units[next(iter(owners))]
    for unit in sorted(owners):
        manifest = target.units[unit]
        names = unit_files(unit)
        if not manifest.get("_complete"):
            target.problems.append(f"{target.path(names['success'])}: missing {names['success']}: the run did not finish")
        present = {p.name for p in target.pairs}
        for f in manifest.get("files") or []:
            selected = prefix is None or _split_name(f.get("name", "")) == prefix or unit == prefix
            if f.get("name") not in present and selected:
                target.problems.append(f"{target.path(f.get('name', '?') + '.bin')}: missing: listed in "
                                       f"{manifest.get('_name', names['manifest'])}")
    if target.is_dir and not target.units:
        target.problems.append(f"{target.path('_manifest.json')}: missing manifest: not a curate token set "
                               "(nothing says which pairs belong to it)")
    elif target.is_dir or target.units:
        for p in target.pairs:
            if p.name not in target.listed:
                target.problems.append(
                    f"{target.path(p.name + '.bin')}: stray pair: listed in no manifest here (a copy, another "
                    "run's pair or a merge written inside the set)")
    emptied = [m for m in target.units.values() if m.get("_complete") and not m.get("files")]
    if not target.pairs and not (emptied and len(emptied) == len(target.units)):
        target.problems.append(f"{path}: no pairs: no .bin/.idx files here")
    elif not target.pairs:
        # a finished token set without documents (every one filtered out before tokenize, or erased)
        # holds no pair, as tokenize writes none: its manifest says so, and that is complete, not broken
        target.notes.append(f"{path}: no documents: the run that wrote it had none left to tokenize "
                            "(its manifest lists no pairs)")
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
    raw = target.fs.cat_file(idx_path)
    entry = target.entry(p.name)
    if entry and entry.get("idx_xxh3_128"):
        import xxhash

        if xxhash.xxh3_128_hexdigest(raw) != entry["idx_xxh3_128"]:
            target.mismatches.setdefault(p.name, []).append(f"{idx_path}: checksum: XXH3-128 differs from the one recorded when it was "
                                   "written (the file changed since)")
    try:
        index = megatron.parse_index(raw, idx_path)
    except megatron.IndexFormatError as e:
        target.problems.append(str(e))
        return None
    p.bin_size = int(target.fs.size(bin_path))
    found = megatron.check_pair(index, p.bin_size, bin_path)
    target.problems.extend(found)
    if found:
        return None
    p.dtype_code, p.documents, p.tokens, p.idx_bytes = index.dtype_code, index.documents, index.tokens, len(raw)
    if entry:
        for what, have in (("documents", index.documents), ("tokens", index.tokens), ("bytes", p.bin_size),
                           ("idx_bytes", len(raw))):
            if what in entry and entry[what] != have:
                where = idx_path if what == "idx_bytes" else bin_path
                target.problems.append(f"{where}: {what}: {have}, but the manifest says {entry[what]}")
    owner = target.listed.get(p.name, (None,))[0]
    manifest = target.units.get(owner) or target.manifest or {}
    expected = manifest.get("dtype_code")
    if expected is not None and index.dtype_code != expected:
        target.problems.append(
            f"{idx_path}: dtype code: {index.dtype_code} ({index.dtype}), but {manifest.get('_name', '_manifest.json')} says "
            f"{expected} ({megatron.DTYPES.get(expected)})"
        )
    return index


def unit_problems(folder: str, unit: str, manifest: dict, manifest_name: str) -> list[str]:
    """A token unit's pairs (index structure, ``.bin`` sizes, per-pair counts) and its manifest's fields
    against them, reading no ``.bin``: what ``curate erase`` checks before it trusts the manifest
    (it rewrites pairs and carries the manifest's fields forward)."""
    import fsspec

    fs, root = fsspec.core.url_to_fs(folder)
    manifest = {**manifest, "_name": manifest_name}
    target = Target(fs, root.rstrip("/") or "/", True, [], manifest, units={unit: manifest})
    for f in manifest.get("files") or []:
        if isinstance(f, dict) and f.get("name"):
            target.listed[f["name"]] = (unit, f)
            has_bin, has_idx = (fs.exists(target.path(f["name"] + ext)) for ext in (".bin", ".idx"))
            target.pairs.append(Pair(f["name"], _split_name(f["name"]), has_bin, has_idx))
    for p in target.pairs:
        check_structure(target, p)
    check_dtypes(target)
    check_manifest(target, unit)
    return target.problems


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
    if index.dtype.kind not in "iu":  # float arrays (not tokens): only the checksum applies
        limit = float("inf")
    else:
        limit = vocab_size if vocab_size is not None else np.iinfo(index.dtype).max + 1
    bin_path = target.path(p.name + ".bin")
    import xxhash

    hasher = xxhash.xxh3_128()
    counter = megatron.IdCounts()
    with target.fs.open(bin_path, "rb") as f:
        bad, first, largest = megatron.scan_range(f, index.dtype, limit, hasher=hasher, counter=counter)
    p.largest = largest if index.dtype.kind in "iu" else None
    check_one_id(target, bin_path, counter.top())
    entry = target.entry(p.name)
    if entry and entry.get("bin_xxh3_128") and hasher.hexdigest() != entry["bin_xxh3_128"]:
        target.mismatches.setdefault(p.name, []).append(f"{bin_path}: checksum: XXH3-128 differs from the one recorded when it was "
                               "written (the tokens changed since)")
    if bad:
        lengths = index.sequence_lengths.astype(np.int64)
        seq = int(np.searchsorted(np.cumsum(lengths), first, side="right"))
        doc = int(np.searchsorted(index.document_indices, seq, side="right")) - 1
        what = f">= the vocabulary size {vocab_size}" if vocab_size is not None else "negative"
        target.problems.append(
            f"{bin_path}: token id range: {bad} token ids {what} (first at token {first}, document {doc}; "
            f"largest id {largest})"
        )


#: a pair this long whose most common id is more than ONE_ID_SHARE of its tokens is refused: an
#: end-of-document id is at most half of any pair (every document has a token besides it), and the
#: commonest word of real text is a few percent; a tokenizer without a vocabulary writes [UNK] and little else
ONE_ID_TOKENS, ONE_ID_SHARE = 256, 0.5


def check_one_id(target: Target, bin_path: str, top: tuple[int, int, int] | None) -> None:
    """A problem when one id makes up most of a pair's tokens."""
    if top is None:
        return
    token, count, total = top
    if total >= ONE_ID_TOKENS and count > ONE_ID_SHARE * total:
        target.problems.append(
            f"{bin_path}: one id: id {token} is {count / total:.1%} of its {total} tokens (a tokenizer without a "
            "vocabulary turns every word into [UNK]: check the tokenizer the pair was written with)")


def check_docs(target: Target, p: Pair, index: megatron.Index) -> None:
    """The pair's document sidecar against its manifest and its ``.idx`` (see the module doc)."""
    import io

    import pyarrow as pa
    import pyarrow.parquet as pq
    import xxhash

    from curate.stages.output import unit_files
    from curate.stages.tokenize import docs

    owner = target.listed.get(p.name, (None,))[0]
    manifest = target.units.get(owner) if owner is not None else None
    entry = target.entry(p.name) or {}
    columns = (manifest or {}).get("docs_columns")
    path = target.path(entry.get("docs") or docs.docs_name(p.name))
    try:
        raw = target.fs.cat_file(path)
    except FileNotFoundError:
        if columns:
            target.problems.append(f"{path}: missing: the document sidecar of pair {p.name}, listed in "
                                   f"{unit_files(owner)['manifest']}")
        elif manifest is not None:
            note = (f"{target.path(unit_files(owner)['manifest'])}: no document sidecars (written before curate "
                    "recorded them): its tokens cannot be traced to document ids; tokenize again to add them")
            if note not in target.notes:
                target.notes.append(note)
        else:
            target.notes.append(f"{target.path(p.name)}: no manifest and no document sidecar: its tokens cannot be "
                                "traced to document ids")
        return
    if entry.get("docs_xxh3_128") and xxhash.xxh3_128_hexdigest(raw) != entry["docs_xxh3_128"]:
        target.mismatches.setdefault(p.name, []).append(
            f"{path}: checksum: XXH3-128 differs from the one recorded when it was written (the document ids of "
            f"pair {p.name} changed since)")
    try:
        table = pq.read_table(io.BytesIO(raw))
    except (OSError, pa.ArrowException) as e:
        target.problems.append(f"{path}: parse: not a readable Parquet file ({str(e).splitlines()[0][:200]})")
        return
    wanted = list(columns) if columns else ["id", *(["url"] if "url" in table.column_names else [])]
    if table.column_names != wanted or any(not pa.types.is_string(t) and not pa.types.is_large_string(t)
                                           for t in table.schema.types):
        target.problems.append(f"{path}: columns: {table.schema.to_string(show_schema_metadata=False)!r}, "
                               f"expected {', '.join(wanted)} as strings")
        return
    if table.column("id").null_count:
        target.problems.append(f"{path}: id: {table.column('id').null_count} null ids")
    if table.num_rows != index.sequence_count:
        target.problems.append(f"{path}: rows: {table.num_rows}, but {p.name}.idx has {index.sequence_count} "
                               f"sequences: the sidecar disagrees with pair {p.name}")
        return
    inputs = (manifest or {}).get("input_docs")
    if inputs is None:
        return
    start = 0
    for source in inputs:
        piece = table.slice(start, source["rows"])
        if piece.num_rows != source["rows"] or docs.content_digest(piece) != source["content_xxh3_128"]:
            target.problems.append(f"{path}: concatenation: rows {start}..{start + source['rows'] - 1} are not "
                                   f"the document sidecar of {source['name']}, the merge input they came from")
            return
        start += source["rows"]
    if start != table.num_rows:
        target.problems.append(f"{path}: concatenation: {table.num_rows} rows, but the merge inputs had {start}")


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
    def notes(self) -> list[str]:
        return self.target.notes

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
        from curate.stages.output import unit_files

        unit = next((u for u, m in target.units.items() if m is target.manifest), "")
        vocab_size, source = int(target.manifest["vocab_size"]), target.manifest.get("_name", unit_files(unit)["manifest"])
    else:
        source = "unknown (ids checked against the dtype only)"
    sets: dict[str, dict] = {}
    first = None
    # the first document shown is document 0 of the first pair of the main set
    for p in sorted(target.pairs, key=lambda p: (p.set not in ("part", "train"), p.name)):
        s = sets.setdefault(p.set, {"files": 0, "documents": 0, "tokens": 0, "bytes": 0, "dtype": set()})
        s["files"] += 1
        before = len(target.problems)
        index = check_structure(target, p)
        if index is not None:
            check_tokens(target, p, index, vocab_size)
            check_docs(target, p, index)
        if len(target.problems) == before:
            target.problems.extend(target.mismatches.get(p.name, []))
        if index is None:
            continue
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
    for unit in sorted({target.listed[p.name][0] for p in target.pairs if p.name in target.listed}):
        check_manifest(target, unit, vocab_size)
    for s in sets.values():
        s["dtype"] = ",".join(sorted(s["dtype"])) or "?"
    return Report(target, vocab_size, source, dict(sorted(sets.items())), first)
