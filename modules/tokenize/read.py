"""Reading a token set: the output of ``curate tokenize`` as input to ``pack`` and ``shards``.

A token set is one ownership unit of a tokenize output directory: ``_manifest.json`` and
``_SUCCESS`` for the default prefix ``part``, ``manifest.<prefix>.json`` and ``_SUCCESS.<prefix>``
for another prefix (see ``modules/output.py``). Its manifest names every pair (``files``: name, set,
partition, documents, tokens), the tokenizer, the vocabulary size, the dtype and whether a BOS was
prepended and an EOD appended to every document. That is all a consumer needs to know before it
opens a single ``.bin``. A token set written since document sidecars exist (``docs_columns`` in its
manifest) names each pair's sidecar too (:meth:`TokenSet.docs`): document k of a pair is row k.

Memory: :meth:`TokenSet.tokens` maps a local ``.bin`` (``np.memmap``): the operating system pages in
only what is read, so a consumer that walks a pair document by document holds its index (12 bytes
per document) and the documents it is working on, not the pair. A remote pair (``s3://...``) is read
whole, so there a pair must fit in memory (one tokenize partition).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from curate.stages.errors import DataError, SettingsError
from curate.stages.tokenize import megatron


@dataclass(frozen=True)
class PairInfo:
    """One ``.bin``/``.idx`` pair of a token set, as the manifest describes it."""

    name: str  # file name without extension: part_00000
    set: str  # train, validation, test (without --split: train)
    documents: int
    tokens: int
    docs: str | None = None  # its document sidecar (None: the token set predates sidecars)
    docs_xxh3_128: str | None = None


@dataclass(frozen=True)
class TokenSet:
    """A finished tokenize unit: where its pairs are and what its tokens mean. Picklable."""

    url: str  # the directory (local path or fsspec URL)
    prefix: str  # the tokenize --prefix (unit); "part" is the directory's default unit
    pairs: tuple[PairInfo, ...]
    vocab_size: int
    dtype: str  # dtype of the .bin files (uint16 or int32)
    eod_id: int | None  # the tokenizer's end-of-document id (None: it has none)
    bos_id: int | None  # the tokenizer's beginning-of-sequence id (None: it has none)
    add_bos: bool  # every document starts with bos_id
    append_eod: bool  # every document ends with eod_id
    tokenizer: str | None  # the tokenizer name (to decode), as tokenize recorded it
    fingerprint: str | None
    docs_columns: tuple[str, ...] | None = None  # the sidecars' columns; None: no sidecars (older token set)

    @property
    def documents(self) -> int:
        return sum(p.documents for p in self.pairs)

    @property
    def total_tokens(self) -> int:
        return sum(p.tokens for p in self.pairs)

    def sets(self) -> list[str]:
        return sorted({p.set for p in self.pairs}, key=lambda s: (s != "train", s))

    def path(self, rel: str) -> str:
        return self.url.rstrip("/") + "/" + rel

    def index(self, pair: PairInfo) -> megatron.Index:
        """The parsed ``.idx`` of ``pair``, checked against itself and the ``.bin`` size."""
        import fsspec

        fs, root = fsspec.core.url_to_fs(self.path(pair.name + ".idx"))
        index = megatron.parse_index(fs.cat_file(root), self.path(pair.name + ".idx"))
        bin_path = self.path(pair.name + ".bin")
        problems = megatron.check_pair(index, int(fs.size(fsspec.core.url_to_fs(bin_path)[1])), bin_path)
        if problems:
            raise DataError(problems[0])
        if index.documents != pair.documents or index.tokens != pair.tokens:
            raise DataError(f"{self.path(pair.name + '.idx')}: {index.documents} documents / {index.tokens} "
                            f"tokens, but the manifest says {pair.documents} / {pair.tokens}")
        return index

    def docs(self, pair: PairInfo):
        """(bytes, Arrow table) of ``pair``'s document sidecar, checked against its manifest: its
        checksum, one row per document. DataError naming the file otherwise."""
        import fsspec

        from curate.stages.tokenize.docs import read_checked

        if pair.docs is None:
            raise DataError(f"{self.path(pair.name + '.idx')}: no document sidecar in the token set's manifest")
        fs, root = fsspec.core.url_to_fs(self.path(pair.docs))
        return read_checked(fs, root, pair.docs_xxh3_128, pair.documents, f"pair {pair.name}")

    def tokens(self, pair: PairInfo, index: megatron.Index) -> np.ndarray:
        """All tokens of ``pair`` as one array (memory-mapped when local: nothing is read yet)."""
        import fsspec

        path = self.path(pair.name + ".bin")
        dtype = index.dtype.newbyteorder("<")
        if "://" not in self.url or self.url.startswith("file://"):
            local = path[len("file://"):] if path.startswith("file://") else path
            if index.tokens == 0:
                return np.zeros(0, dtype=dtype)
            return np.memmap(local, dtype=dtype, mode="r", shape=(index.tokens,))
        fs, root = fsspec.core.url_to_fs(path)
        return np.frombuffer(fs.cat_file(root), dtype=dtype)


def document_bounds(index: megatron.Index) -> tuple[np.ndarray, np.ndarray]:
    """(first token, length) of every document of a pair (int64). A document is the sequences
    ``[idx[k], idx[k+1])``, contiguous in the ``.bin`` because pointers are running sums."""
    cum = np.zeros(index.sequence_count + 1, dtype=np.int64)
    np.cumsum(index.sequence_lengths, out=cum[1:])
    doc_idx = index.document_indices.astype(np.int64)
    return cum[doc_idx[:-1]], cum[doc_idx[1:]] - cum[doc_idx[:-1]]


def open_token_set(path: str, prefix: str | None = None, allow_incomplete: bool = False) -> TokenSet:
    """The token set in directory ``path`` (the only unit there, or ``prefix``); SettingsError naming
    the directory when it is not a finished tokenize output."""
    import fsspec

    from curate.stages.output import Output, units_in

    if not isinstance(path, str) or not path:
        raise SettingsError(f"input {path!r}: expected a tokenize output directory")
    out = Output.at(path)
    fs, root = fsspec.core.url_to_fs(out.url)
    if not fs.isdir(root):
        raise SettingsError(f"input {path}: not a directory (expected a tokenize output directory)")
    listing = out.listing()
    units = [u for u in units_in(listing)
             if (Output(out.url, u).read_json(Output(out.url, u).manifest_name) or {}).get("stage") == "tokenize"]
    if prefix is not None:
        unit = "" if prefix == "part" else prefix
        if unit not in units:
            shown = ", ".join(u or "part" for u in units) or "none"
            raise SettingsError(f"input {path}: no token set with prefix {prefix!r} (found: {shown})")
    elif len(units) == 1:
        unit = units[0]
    elif not units:
        raise SettingsError(f"input {path}: not a tokenize output (no _manifest.json of stage 'tokenize')")
    else:
        raise SettingsError(f"input {path}: holds several token sets ({', '.join(u or 'part' for u in units)}); "
                            "choose one with --input-prefix")
    unit_out = Output(out.url, unit)
    manifest = unit_out.manifest() or {}
    if not unit_out.complete() and not allow_incomplete:
        raise SettingsError(f"input {path}: no {unit_out.success_name} (an unfinished tokenize run?); "
                            "pass --allow-incomplete to read it anyway")
    try:
        pairs = tuple(PairInfo(f["name"], f.get("set") or "train", int(f["documents"]), int(f["tokens"]),
                               f.get("docs"), f.get("docs_xxh3_128"))
                      for f in manifest["files"])
        vocab = int(manifest["vocab_size"])
        dtype = str(manifest["dtype"])
    except (KeyError, TypeError, ValueError) as e:
        raise DataError(f"{unit_out.path(unit_out.manifest_name)}: not a tokenize manifest ({e!r} missing or wrong)") \
            from None
    tok = manifest.get("tokenizer") or {}
    return TokenSet(
        url=out.url, prefix=unit or "part", pairs=pairs, vocab_size=vocab, dtype=dtype,
        eod_id=manifest.get("eod_id"), bos_id=manifest.get("bos_id"),
        add_bos=bool(manifest.get("add_bos")), append_eod=bool(manifest.get("append_eod")),
        tokenizer=tok.get("name") if isinstance(tok, dict) else None,
        fingerprint=manifest.get("fingerprint"),
        docs_columns=tuple(manifest["docs_columns"]) if manifest.get("docs_columns") else None,
    )


def one_input(inputs, stage: str) -> str:
    """The single directory a token-set stage reads."""
    inputs = list(inputs)
    if len(inputs) != 1:
        raise SettingsError(f"{stage}: --input must be one tokenize output directory; got {len(inputs)} inputs")
    return inputs[0]


# --------------------------------------------------------------------------- checks of consumer formats


@dataclass
class CheckReport:
    """What ``verify`` of a packed-rows or shards output found (``modules/pack/checks.py``, ``shards_verify.py``).

    ``problems``: one line each, ``FILE: CHECK: detail``. ``summary``: lines describing a sound
    output. ``notes``: what a sound output lacks. ``first``: (what, its first tokens) to show. ``tokenizer``: the name to decode them with.
    """

    problems: list
    summary: list
    first: tuple | None = None
    tokenizer: str | None = None
    vocab_size: int | None = None
    vocab_source: str = ""
    notes: list = field(default_factory=list)  # said on success too (an output without sidecars)

    @property
    def ok(self) -> bool:
        return not self.problems


def vocab_for_check(vocab_size: int | None, tokenizer, manifest: dict | None,
                    manifest_name: str = "_manifest.json") -> tuple[int | None, str]:
    """The vocabulary size ids are checked against, and where it came from (flag, tokenizer, manifest:
    ``manifest_name``, the file's name, which an earlier curate called manifest.json)."""
    if vocab_size is not None:
        return vocab_size, "--vocab-size"
    if tokenizer is not None:
        return tokenizer.vocab_size, f"tokenizer {tokenizer.spec}"
    if manifest and manifest.get("vocab_size") is not None:
        return int(manifest["vocab_size"]), manifest_name
    return None, "unknown (ids checked against the dtype only)"


def listed_files(out, manifest: dict | None, suffix: str, problems: list) -> list[dict]:
    """The data files (``suffix``) a finished output lists, each checked present with its size;
    the sentinel, the manifest and stray data files beside them are problems too."""
    from curate.stages.output import is_temporary

    if not out.complete():
        problems.append(f"{out.path(out.success_name)}: missing _SUCCESS: the run did not finish")
    if manifest is None:
        problems.append(f"{out.path(out.manifest_name)}: missing manifest")
        return []
    listing = out.listing()
    records = [r for r in manifest.get("outputs", []) if r["path"].endswith(suffix) and "/" not in r["path"]]
    present = []
    for r in records:
        if r["path"] not in listing:
            problems.append(f"{out.path(r['path'])}: missing: listed in {out.manifest_name}")
        elif listing[r["path"]] != r["bytes"]:
            problems.append(f"{out.path(r['path'])}: size: {listing[r['path']]} bytes, "
                            f"{out.manifest_name} says {r['bytes']}")
        else:
            present.append(r)
    names = {r["path"] for r in records}
    for rel in sorted(listing):
        if rel.endswith(suffix) and "/" not in rel and rel not in names and not is_temporary(rel):
            problems.append(f"{out.path(rel)}: unlisted: no manifest here names this file (a stray or foreign file)")
    return sorted(present, key=lambda r: r["path"])
