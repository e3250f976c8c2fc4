"""``curate erase``: remove documents from every curate output under a root, in place.

    curate erase ROOT [ROOT ...] (--ids FILE | --urls FILE | --domains FILE) [--dry-run]

A ROOT is a job's output root (its manifest lists its stage folders) or one output directory
(every unit in it: tokenize ``--prefix`` sets share a folder). The request file holds one id, URL or
domain per line (UTF-8, surrounding whitespace and blank lines ignored). A document is erased when

- ``--ids``: its ``id`` is listed, or it is a piece of a listed document: ``ID#k`` (the segments of
  ``split_documents`` and the fragments of ``decontaminate``), a ``document_id`` column, or the
  column ``add_id --keep-original-as`` kept the old id in;
- ``--urls``: its ``url`` is listed (exactly);
- ``--domains``: the host of its ``url`` is a listed domain or below it (``example.com`` erases
  ``a.example.com``).

Files without the matched column (dedup ``_rejects/`` hold only ids, token sidecars may have no
``url``) are matched by the ids those rules resolve to anywhere under the roots (repeated until no
new id turns up), and dedup intermediates (``_work/``) by the document numbers (``doc``, ``u``,
``v``) that files of the same output give those ids.

What is rewritten, each file through :class:`curate.stages.output.Output` (temporary, rename,
checksum) and only when it holds an erased document:

- fuzzy dedup's shingle sets (``_work/shingles/*.u64``, raw): the erased documents' values zeroed in
  place (the file keeps its size, so the other documents' places stay true);
- dataset parts, ``_rejects/``, ``_duplicates/`` and ``_work/`` Parquet: the rows dropped with Arrow
  (and dedup's references to an erased document replaced, below), the file written again with the
  compression it had (JSONL: the other lines kept byte for byte). A part is what the stage writes
  without those documents in its input partition: per-document stages never look at another document. A ``_rejects/`` file left empty is removed (stages write
  none then); every other file stays, possibly empty, as the stages leave theirs.
- token pairs: the other sequences' bytes copied in order, the ``.idx`` recomputed
  (:func:`curate.stages.tokenize.megatron.index_bytes`), the sidecar's rows dropped: the pair tokenize
  writes without those documents (a pair left without documents is removed, as tokenize writes none).
- packed rows: every pair whose input pair changed, or moved (a pair before it was removed: the
  pair's number seeds its row order and ``pack_id``), is packed again by ``pack``'s own writer.
- token shards: from the first shard that held an erased token on, every shard is written again
  by ``shards``' own writer (the tokens after it shift; shards after the new last one are removed).
  So packed rows and shards are what ``pack`` and ``shards`` write from the erased token set.

Each changed unit's manifest gets the new sizes, checksums, rows and counts (``counts``, tokenize's
``files``/``sets``/``totals``, pack's and shards' whole summaries) and an ``erasures`` record
``{"at", "request_sha256", "documents", "by"}``: when, the SHA-256 of the request file, how many
documents were erased from the unit, and the kind; never what was erased. A job root's manifest gets
the stages' new counts and its own record. Fingerprints stay: a rerun of the job skips the erased
stages rather than recomputing them from inputs that still hold the documents.

Order of work, so that a killed erase resumes (run the same command again) and a second run
changes nothing:

1. Refusals, before anything is written (exit 2, one line): an unreadable or empty request, a line
   that is not UTF-8 or not a domain; a ROOT that is not curate's (no manifest, files no manifest
   lists, a symbolic link: :func:`curate.stages.output.check_claim`); an unfinished output; files
   erase cannot rewrite (raw downloads, merged pairs, token outputs without document sidecars);
   packed rows or shards whose token set is not part of this erase or changed since; shards left
   without tokens; another run holding a lock (named). Every unit's lock is taken for the whole erase.
2. The request is resolved to ids. Entries that match nothing anywhere are reported and nothing is
   changed (exit 1), unless a manifest under the roots records this request (an erase done
   before, resumed or repeated: then what is left is erased, and nothing when nothing is).
3. Every affected unit gets a journal record ``erase-<sha256[:16]>`` (the files it will rewrite, its
   ids and document numbers: what a resumed run needs once the files no longer show them; removed
   when the unit is done), loses its ``_SUCCESS`` and is marked ``"status": "erasing"``.
4. Unit by unit (datasets, token sets, packed rows and shards, job roots): rewrite, then the manifest,
   then ``_SUCCESS``, then the journal record goes. A rewritten file no longer matches, a pair's
   files are written ``.bin``, ``.idx``, sidecar (a file whose checksum is no longer the manifest's was
   written already), packed rows and shards are rebuilt from the erased token set; so every step can
   run again.

Where the result differs from a fresh run without the documents: a dedup stage keeps one document
of a duplicate group; erase never brings back a document an erased one displaced (a fresh run would
keep its duplicate instead). The other members stay rejected, but no row names the erased document
any more: their ``_detail`` becomes "duplicate of an erased document" and their ``kept_id`` null (in
``_duplicates/`` and ``_work/``). Dedup intermediates (``_work/``) keep the document numbers of the
original run. ``counts.in`` drops by the erased rows (for ``split_documents`` and
``join_documents``, which count segments on one side, a fresh run's would differ). Stage statistics
besides counts (filter score samples, dedup step sizes) describe the original run. Inputs curate did
not write (the job's WARC files, a user's JSONL) are never touched: rerunning a job with ``--force``
brings the documents back.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import logging
import os
import re
import time
import urllib.parse
from collections import Counter
from dataclasses import dataclass, field

import numpy as np

from curate.stages.errors import DataError, SettingsError
from curate.stages.output import (
    CHECKSUM,
    Lock,
    Output,
    OwnershipError,
    check_claim,
    file_checksum,
    is_remote,
    manifest_owner,
    units_in,
)

log = logging.getLogger(__name__)

BY = ("ids", "urls", "domains")
#: the order units are erased in: token sets after the datasets, their consumers after them, jobs last
RANK = {"dataset": 0, "tokens": 1, "pack": 2, "shards": 2, "job": 3}
#: columns that name the document a row is (or is a piece of)
ID, URL, DOCUMENT_ID, REASON = "id", "url", "document_id", "_reason"
#: dedup names the document each removed duplicate was removed for; erase replaces an erased one's id
KEPT_ID, DETAIL, DUPLICATE_OF = "kept_id", "_detail", "duplicate of "
ERASED_DETAIL = "duplicate of an erased document"
#: dedup intermediates address documents by number (input partition << 32 | row)
NUMBERS = ("doc", "u", "v")
_PIECE = r"(#\d+)+$"
_DOMAIN = re.compile(r"^(?=.{1,253}$)([a-z0-9_]([a-z0-9_-]{0,61}[a-z0-9_])?)(\.[a-z0-9_]([a-z0-9_-]{0,61}[a-z0-9_])?)*$")


# --------------------------------------------------------------------------- the request


@dataclass(frozen=True)
class Request:
    path: str
    by: str  # ids | urls | domains
    entries: tuple[str, ...]
    sha256: str  # of the file's bytes: what the manifests record

    @property
    def key(self) -> str:
        """The journal key of this request's work in a unit."""
        return f"erase-{self.sha256[:16]}"


def read_request(path: str, by: str) -> Request:
    """The entries of a request file; SettingsError naming the file (and line) when it is unreadable,
    empty, not UTF-8 or (``domains``) holds something that is not a domain name."""
    if by not in BY:
        raise SettingsError(f"erase: by must be one of {', '.join(BY)}; got {by!r}")
    flag = f"--{by}"
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        raise SettingsError(f"{flag} {path}: cannot read ({e.strerror})") from None
    entries = []
    for n, raw in enumerate(data.split(b"\n"), 1):
        try:
            line = raw.decode("utf-8").strip()
        except UnicodeDecodeError as e:
            raise SettingsError(f"{flag} {path} line {n}: not UTF-8 (byte {e.start + 1} of the line)") from None
        if not line:
            continue
        if by == "domains":
            line = line.lower().rstrip(".")
            if not _DOMAIN.match(line):
                raise SettingsError(f"{flag} {path} line {n}: {line!r} is not a domain name (give hosts such as "
                                    "example.com, without scheme, port or path)")
        entries.append(line)
    if not entries:
        raise SettingsError(f"{flag} {path}: empty: no {by} to erase")
    return Request(os.path.abspath(path), by, tuple(dict.fromkeys(entries)), hashlib.sha256(data).hexdigest())


def host_of(url: str | None) -> str | None:
    if not url:
        return None
    try:
        host = urllib.parse.urlsplit(url).hostname
    except ValueError:
        return None
    return host.rstrip(".") if host else None


# --------------------------------------------------------------------------- matching rows


def _strings(column):
    import pyarrow as pa

    return column.combine_chunks().cast(pa.large_string()) if column.num_chunks else pa.array([], pa.large_string())


def _isin(column, values) -> np.ndarray:
    import pyarrow.compute as pc

    if not len(values) or not len(column):
        return np.zeros(len(column), dtype=bool)
    return pc.is_in(column, value_set=values).fill_null(False).to_numpy(zero_copy_only=False)


class Matcher:
    """Which rows of a table are erased documents (see the module doc)."""

    def __init__(self, request: Request, ids, aliases=()):
        import pyarrow as pa

        self.request = request
        self.ids = frozenset(ids)
        self.aliases = tuple(aliases)
        self._ids = pa.array(sorted(self.ids), pa.large_string())
        self._entries = pa.array(list(request.entries), pa.large_string())
        self._details = pa.array([DUPLICATE_OF + i for i in sorted(self.ids)], pa.large_string())
        self._domains = frozenset(request.entries) if request.by == "domains" else frozenset()

    def columns(self) -> tuple[str, ...]:
        return (ID, URL, DOCUMENT_ID, *self.aliases)

    def mask(self, table) -> np.ndarray:
        import pyarrow as pa
        import pyarrow.compute as pc

        m = np.zeros(table.num_rows, dtype=bool)
        names = table.column_names
        if len(self._ids):
            if ID in names:
                ids = _strings(table[ID])
                m |= _isin(ids, self._ids) | _isin(pc.replace_substring_regex(ids, _PIECE, ""), self._ids)
            for c in (DOCUMENT_ID, *self.aliases):
                if c in names:
                    m |= _isin(_strings(table[c]), self._ids)
        if URL in names and self.request.by == "urls":
            m |= _isin(_strings(table[URL]), self._entries)
        elif URL in names and self.request.by == "domains":
            m |= _isin(_strings(table[URL]), pa.array(list(self._hits(table[URL])), pa.large_string()))
        return m

    def _hits(self, column) -> dict[str, str]:
        """The distinct URLs of ``column`` whose host is a listed domain or below one -> that domain."""
        import pyarrow.compute as pc

        hits = {}
        for url in pc.unique(_strings(column)).to_pylist():
            labels = (host_of(url) or "").split(".")
            domain = next((d for d in (".".join(labels[k:]) for k in range(len(labels))) if d in self._domains), None)
            if domain:
                hits[url] = domain
        return hits

    def found(self, table) -> set[str]:
        """The request's entries that rows of ``table`` match."""
        import pyarrow.compute as pc

        names = table.column_names
        if self.request.by == "domains":
            if URL not in names:
                return set()
            return set(self._hits(table[URL]).values())
        found = set()
        for c in [URL] if self.request.by == "urls" else [ID, DOCUMENT_ID, *self.aliases]:
            if c in names:
                values = pc.unique(_strings(table[c]))
                found |= self._present(values)
                if c == ID:
                    found |= self._present(pc.unique(pc.replace_substring_regex(values, _PIECE, "")))
        return found

    def references(self, table) -> np.ndarray:
        """Rows of other documents that name an erased one as the duplicate they were removed for
        (dedup's ``kept_id`` and ``_detail``)."""
        m = np.zeros(table.num_rows, dtype=bool)
        if KEPT_ID in table.column_names:
            m |= _isin(_strings(table[KEPT_ID]), self._ids)
        if DETAIL in table.column_names:
            m |= _isin(_strings(table[DETAIL]), self._details)
        return m

    def scrub(self, table):
        """``table`` with the references to erased documents replaced: ``kept_id`` null, ``_detail``
        "duplicate of an erased document"; and how many rows changed."""
        import pyarrow as pa
        import pyarrow.compute as pc

        n = int(self.references(table).sum())
        for name, values, new in ((KEPT_ID, self._ids, None), (DETAIL, self._details, ERASED_DETAIL)):
            if n and name in table.column_names:
                k = table.column_names.index(name)
                column = table.column(k).combine_chunks()
                hit = pa.array(_isin(_strings(table[name]), values))
                column = pc.if_else(hit, pa.scalar(new, column.type), column)
                table = table.set_column(k, table.schema.field(k), column)
        return table, n

    def _present(self, values) -> set[str]:
        return set(_where(self._entries, _isin(self._entries, values)))


def _where(column, mask: np.ndarray) -> list:
    """The non-null values of ``column`` where ``mask`` is set."""
    import pyarrow as pa

    if not mask.any():
        return []
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    return [v for v in column.filter(pa.array(mask)).to_pylist() if v is not None]


def numbers_mask(table, numbers) -> np.ndarray:
    """Rows of a dedup intermediate that name one of the document ``numbers`` (``doc``, ``u`` or ``v``)."""
    import pyarrow as pa

    m = np.zeros(table.num_rows, dtype=bool)
    if not len(numbers):
        return m
    values = pa.array(np.asarray(sorted(numbers), dtype=np.int64))
    for c in NUMBERS:
        if c in table.column_names:
            m |= _isin(table[c].combine_chunks().cast(pa.int64()), values)
    return m


# --------------------------------------------------------------------------- reading and writing files


def read_table(out: Output, rel: str, columns=None):
    """A Parquet or JSONL file of ``out`` as an Arrow table (only ``columns`` that it has, when given;
    JSONL values as strings: the id columns are strings by the dataset contract)."""
    import pyarrow.parquet as pq

    if rel.endswith(".parquet"):
        with out.open_read(rel) as f:
            pf = pq.ParquetFile(f)
            names = pf.schema_arrow.names
            wanted = None if columns is None else [c for c in columns if c in names]
            return pf.read(columns=wanted)
    return _jsonl_table(_jsonl_lines(out.read_bytes(rel)), columns)


def _jsonl_lines(data: bytes) -> list[bytes]:
    return [line for line in data.split(b"\n") if line.strip()]


def _jsonl_table(lines: list[bytes], columns=None):
    import pyarrow as pa

    records = [json.loads(line) for line in lines]
    names = list(dict.fromkeys(k for r in records for k in r))
    wanted = names if columns is None else [c for c in columns if c in names]

    def text(v):
        return None if v is None else v if isinstance(v, str) else json.dumps(v)

    return pa.table({c: pa.array([text(r.get(c)) for r in records], pa.large_string()) for c in wanted})


def rewrite_table(out: Output, rel: str, mask_fn, drop_empty: bool, matcher: Matcher | None = None,
                  adjust=None) -> dict | str | None:
    """Write ``rel`` again without the rows ``mask_fn(table)`` marks, and the rest's references to
    erased documents replaced (``matcher.scrub``); its new record (with rows), the string "removed"
    when nothing is left and ``drop_empty``, or None when nothing changes."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    if rel.endswith(".parquet"):
        pf = pq.ParquetFile(io.BytesIO(out.read_bytes(rel)))
        compression = "snappy"
        if pf.metadata.num_row_groups and pf.metadata.num_columns:
            compression = pf.metadata.row_group(0).column(0).compression.lower()
            compression = "none" if compression == "uncompressed" else compression
        table = pf.read()
        erase = mask_fn(table)
        kept = table.filter(pa.array(~erase)).combine_chunks()
        kept, scrubbed = matcher.scrub(kept) if matcher is not None else (kept, 0)
        adjusted = adjust(kept) if adjust is not None else kept
        if not erase.any() and not scrubbed and adjusted is kept:
            return None
        kept = adjusted
        if drop_empty and kept.num_rows == 0:
            out.remove(rel)
            return "removed"
        with out.open(rel) as f:
            pq.write_table(kept, f, compression=compression)
        return {**f.record, "rows": kept.num_rows}
    lines = _jsonl_lines(out.read_bytes(rel))
    table = _jsonl_table(lines)
    erase = mask_fn(table)
    scrubbed = np.zeros(len(lines), dtype=bool)
    if matcher is not None and table.num_rows:
        scrubbed = matcher.references(table) & ~erase
    if not erase.any() and not scrubbed.any():
        return None
    kept = [_scrubbed_line(line) if s else line for line, e, s in zip(lines, erase, scrubbed) if not e]
    if drop_empty and not kept:
        out.remove(rel)
        return "removed"
    # what pandas' to_json(lines=True) writes: each record and a newline; for no record, one newline
    with out.open(rel) as f:
        f.write(b"".join(line + b"\n" for line in kept) if kept else b"\n")
    return {**f.record, "rows": len(kept)}


def _scrubbed_line(line: bytes) -> bytes:
    """A JSONL record with its reference to an erased document replaced, encoded as pandas encodes it."""
    import pandas as pd

    record = json.loads(line)
    if KEPT_ID in record:
        record[KEPT_ID] = None
    if str(record.get(DETAIL, "")).startswith(DUPLICATE_OF):
        record[DETAIL] = ERASED_DETAIL
    text = pd.DataFrame([record]).to_json(orient="records", lines=True, force_ascii=False, double_precision=15)
    return text.strip("\n").encode("utf-8")


def disk_record(out: Output, rel: str) -> dict:
    """A file's record read back (a file an earlier, killed erase wrote)."""
    with out.open_read(rel) as f:
        size, digest = file_checksum(f)
    return {"path": rel, "bytes": size, CHECKSUM: digest}


# --------------------------------------------------------------------------- outputs


@dataclass
class Unit:
    """One ownership unit under the roots: a stage output, a tokenize prefix, a job root."""

    out: Output
    kind: str  # dataset | tokens | pack | shards | job | merge
    manifest: dict
    job: Unit | None = None  # the job root this is a stage of
    stages: list = field(default_factory=list)  # a job root's stage units
    plan: dict | None = None  # what this erase does to it (None: nothing)
    resumed: bool = False  # the plan comes from the journal of a killed erase

    @property
    def where(self) -> str:
        return self.out.path(self.out.manifest_name) if self.out.unit else self.out.url

    @property
    def stage(self) -> str | None:
        return self.manifest.get("stage")


def _kind(manifest: dict) -> str:
    owner = manifest_owner(manifest) or {}
    if owner.get("kind") == "job":
        return "job"
    return {"tokenize": "tokens", "pack": "pack", "shards": "shards", "merge": "merge"}.get(manifest.get("stage"),
                                                                                          "dataset")


def _units_of(folder: str) -> list[Unit]:
    out = Output.at(folder)
    # the folder's own names are enough to find its units (a manifest, or a journal folder)
    top = {(f"{e.name}/" if e.is_dir() else e.name): 0 for e in os.scandir(out.url)}
    units = []
    for name in units_in(top):
        o = Output(out.url, name)
        units.append(Unit(o, "", o.manifest() or {}))
    for u in units:
        u.kind = _kind(u.manifest)
    return units


def discover(roots) -> list[Unit]:
    """Every unit under the roots (a job root's stages first, then the root), each once."""
    found: dict[tuple[str, str], Unit] = {}
    for root in roots:
        root = str(root)
        if is_remote(root):
            raise SettingsError(f"{root}: erase works on local outputs only (copy the output here, erase, copy back)")
        if not os.path.isdir(root):
            raise SettingsError(f"{root}: no such directory (give a job root or an output directory)")
        units = _units_of(root)
        if not units:
            raise OwnershipError(f"{root}: not a curate output (no manifest.json); erase changes only what curate wrote")
        for u in units:
            if u.kind == "job":
                for stage in u.manifest.get("stages") or []:
                    folder = u.out.path(stage["output"])
                    subs = _units_of(folder) if os.path.isdir(folder) else []
                    if not subs:
                        raise OwnershipError(f"{folder}: listed by the job's manifest but not a curate output")
                    for s in subs:
                        s = found.setdefault((s.out.url, s.out.unit), s)
                        s.job = u
                        u.stages.append(s)
            found.setdefault((u.out.url, u.out.unit), u)
    return sorted(found.values(), key=lambda u: RANK.get(u.kind, 0))


def lock_all(units: list[Unit], request: Request, stack: contextlib.ExitStack) -> None:
    """Hold the lock of every unit (a job root's covers its stages) until ``stack`` closes."""
    seen = set()
    for u in units:
        target = u.job.out if u.job is not None else u.out
        if (target.url, target.unit) not in seen:
            seen.add((target.url, target.unit))
            stack.enter_context(Lock(target, f"curate erase {request.path}"))


def check_units(units: list[Unit], request: Request) -> None:
    """The refusals of step 1 of the module doc (OwnershipError / SettingsError naming the file)."""
    for u in units:
        if not u.manifest:
            raise OwnershipError(f"{u.where}: no curate manifest (an unfinished first run?); nothing changed")
        check_claim(u.out, manifest_owner(u.manifest))
        status = u.manifest.get("status")
        if status == "erasing" and u.manifest.get("erasing") != request.sha256:
            raise SettingsError(f"{u.where}: an erase of another request (sha256 {u.manifest.get('erasing')}) "
                                "was interrupted here; run that erase again to finish it first")
        if status != "erasing" and not u.out.complete():
            raise SettingsError(f"{u.out.path(u.out.success_name)}: missing: the run did not finish; erase changes "
                                "only finished outputs (finish or remove the run first)")
        if u.kind == "merge":
            raise SettingsError(f"{u.where}: a merged pair (curate merge): erase its token set, then merge again")
        if u.kind in ("tokens", "pack", "shards") and not u.manifest.get("docs_columns"):
            raise SettingsError(f"{u.where}: written before document sidecars: its tokens cannot be traced to "
                                "documents; tokenize (and pack, shards) again, then erase")
        for r in u.manifest.get("outputs") or []:
            if not _erasable(u.kind, r["path"]):
                raise SettingsError(f"{u.out.path(r['path'])}: erase cannot rewrite this file (not a document, "
                                    "token or row file it knows, e.g. a raw download); remove it or leave its "
                                    "output out of the erase; nothing changed")


def _erasable(kind: str, rel: str) -> bool:
    if kind == "dataset":  # and fuzzy dedup's shingle sets, beside the signatures they belong to
        return rel.endswith((".parquet", ".jsonl")) or (rel.startswith("_work/") and _sets_locator(rel) is not None)
    if kind == "tokens":
        return rel.endswith((".bin", ".idx", ".parquet", ".jsonl"))
    if kind == "pack":
        return rel.endswith(".parquet")
    if kind == "shards":
        return rel.endswith((".npy", ".parquet"))
    return False


def _sets_locator(rel: str) -> str | None:
    from curate.stages.dedup import shingles

    return shingles.locator_of(rel)


def scan_files(u: Unit) -> list[str]:
    """The files of a unit whose rows name documents."""
    records = [r["path"] for r in u.manifest.get("outputs") or []]
    if u.kind == "dataset":
        return [rel for rel in records if rel.endswith((".parquet", ".jsonl"))]
    if u.kind == "tokens":
        return [rel for rel in records if rel.endswith((".parquet", ".jsonl"))]
    if u.kind in ("pack", "shards"):
        return [rel for rel in records if rel.startswith("_docs/")]
    return []


# --------------------------------------------------------------------------- resolving the request


def _aliases(units: list[Unit]) -> list[str]:
    """Columns where ``add_id --keep-original-as`` kept a previous id."""
    return sorted({u.manifest.get("settings", {}).get("keep_original_as") for u in units
                   if u.stage == "add_id"} - {None})


def resolve(units: list[Unit], request: Request, known=()) -> tuple[Matcher, list[str]]:
    """(the matcher of every erased row, the request's entries that match nothing). ``known``: ids a
    killed erase of this request resolved (the files may no longer show them)."""
    aliases = _aliases(units)
    ids = set(known) | (set(request.entries) if request.by == "ids" else set())
    found: set[str] = set()
    first = True
    while True:
        matcher = Matcher(request, ids, aliases)
        new: set[str] = set()
        for u in units:
            for rel in scan_files(u):
                table = read_table(u.out, rel, matcher.columns())
                if first:
                    found |= matcher.found(table)
                m = matcher.mask(table)
                if ID in table.column_names:
                    new.update(_where(_strings(table[ID]), m))
        first = False
        if new <= ids:
            return matcher, [e for e in request.entries if e not in found]
        ids |= new


# --------------------------------------------------------------------------- planning


CLUSTER_SIZE = "dup_cluster_size"


def cluster_shrinks(units: list[Unit], matcher: Matcher) -> dict[int, dict[str, int]]:
    """Per unit (by ``id``), how much each kept document's ``dup_cluster_size`` falls: by the erased
    documents a dedup stage removed for it (its ``_duplicates/``), in that stage's output and in the
    outputs after it in the same job (the column travels on), so the parts equal a run without them."""
    out: dict[int, dict[str, int]] = {}
    for u in units:
        if u.kind != "dataset" or u.stage not in ("exact_dedup", "fuzzy_dedup"):
            continue
        shrink: dict[str, int] = {}
        for rel in scan_files(u):
            if not rel.startswith("_duplicates/"):
                continue
            table = read_table(u.out, rel, (*matcher.columns(), KEPT_ID, "removed"))
            if KEPT_ID not in table.column_names or "removed" not in table.column_names:
                continue
            erased = matcher.mask(table) & np.asarray(table["removed"].to_pylist(), dtype=bool)
            kept_ids = table[KEPT_ID].to_pylist()
            ids = table[ID].to_pylist()
            gone = set(_where(table[ID], matcher.mask(table)))
            for i in np.flatnonzero(erased):
                k = kept_ids[i]
                if k is not None and k not in gone and k != ids[i]:
                    shrink[k] = shrink.get(k, 0) + 1
        if not shrink:
            continue
        later = [u]
        if u.job is not None and u in u.job.stages:
            later = u.job.stages[u.job.stages.index(u):]
        for v in later:
            mine = out.setdefault(id(v), {})
            for k, n in shrink.items():
                mine[k] = mine.get(k, 0) + n
    return out


def shrink_sizes(table, shrink: dict[str, int]):
    """``table`` with ``dup_cluster_size`` lowered per ``shrink`` (id -> documents erased from its
    cluster); the table itself when nothing changes."""
    import pyarrow as pa

    if not shrink or CLUSTER_SIZE not in table.column_names or ID not in table.column_names:
        return table
    ids = table[ID].to_pylist()
    minus = np.array([shrink.get(i, 0) for i in ids], dtype=np.int64)
    if not minus.any():
        return table
    col = table[CLUSTER_SIZE]
    values = np.asarray(col.to_pylist(), dtype=object)
    new = [None if v is None else int(v) - int(m) for v, m in zip(values, minus)]
    k = table.column_names.index(CLUSTER_SIZE)
    return table.set_column(k, table.schema.field(k), pa.array(new, type=col.type))


def plan_unit(u: Unit, matcher: Matcher, shrink: dict[str, int] | None = None) -> dict | None:
    """What erasing ``matcher``'s documents does to ``u``; None when it holds none of them."""
    numbers: set[int] = set()
    if u.kind == "dataset":  # the numbers dedup intermediates give the erased documents
        for rel in scan_files(u):
            table = read_table(u.out, rel, (*matcher.columns(), "doc"))
            if ID in table.column_names and "doc" in table.column_names:
                numbers.update(_where(table["doc"], matcher.mask(table)))
    sidecars = {f.get("docs"): f for f in u.manifest.get("files") or []} if u.kind == "tokens" else {}
    ids: set[str] = set()
    files, pairs, first_shard, stream_tokens = [], [], None, 0
    for rel in scan_files(u):  # one file in memory at a time (its id columns only)
        table = read_table(u.out, rel, (*matcher.columns(), REASON, KEPT_ID, DETAIL, *NUMBERS, "length"))
        m = matcher.mask(table) | numbers_mask(table, numbers)
        references = int((matcher.references(table) & ~m).sum())
        shrinks = bool(shrink) and ID in table.column_names and not rel.startswith(("_duplicates/", "_work/")) \
            and any(i in shrink for i in _where(table[ID], ~m))
        if not m.any() and not references and not shrinks:
            continue
        if ID in table.column_names:
            ids.update(_where(table[ID], m))
        if rel in sidecars:
            pairs.append(_plan_pair(u, sidecars[rel], m))
        elif u.kind in ("dataset", "tokens"):
            reasons = Counter(_where(table[REASON], m)) if REASON in table.column_names else Counter()
            files.append({"path": rel, "rows": int(m.sum()), "reasons": dict(reasons), "references": references})
        elif u.kind == "shards":
            k = _shard_number(u, rel)
            first_shard = k if first_shard is None else min(first_shard, k)
            stream_tokens += int(table["length"].combine_chunks().to_numpy()[m].sum())
    if numbers:  # shingle sets of the documents dedup numbered: a raw file, located by its signatures part
        for rel in [r["path"] for r in u.manifest.get("outputs") or [] if r["path"].startswith("_work/")]:
            locator = _sets_locator(rel)
            if locator is not None:
                docs = read_table(u.out, locator, ("doc",))["doc"].to_numpy()
                hit = int(np.isin(docs, np.asarray(sorted(numbers), dtype=np.int64)).sum())
                if hit:
                    files.append({"path": rel, "rows": hit, "reasons": {}, "references": 0, "sets": locator})
    if not ids and not files and not pairs:
        return None
    if shrink:
        files = [{**f, "shrink": True} if not f["path"].startswith(("_duplicates/", "_work/", "_rejects/")) else f
                 for f in files]
    paths = [f["path"] for f in files] + [rel for p in pairs for rel in (p["pair"] + ".bin", p["pair"] + ".idx", p["path"])]
    plan = {"paths": paths, "files": files, "pairs": pairs, "ids": sorted(ids), "numbers": sorted(numbers),
            "documents": len(ids), "by": matcher.request.by, "shrink": dict(sorted((shrink or {}).items()))}
    if u.kind == "shards":
        plan.update(first_shard=first_shard, stream_tokens=stream_tokens)
    return plan


def _plan_pair(u: Unit, entry: dict, erase: np.ndarray) -> dict:
    from curate.stages.tokenize import megatron

    name = entry["name"]
    index = megatron.parse_index(u.out.read_bytes(name + ".idx"), u.out.path(name + ".idx"))
    if index.sequence_count != len(erase):
        raise DataError(f"{u.out.path(entry['docs'])}: rows: {len(erase)}, but {name}.idx has {index.sequence_count} "
                        f"sequences (the sidecar disagrees with its pair; curate verify names it); nothing changed")
    if not np.array_equal(index.document_indices, np.arange(index.sequence_count + 1)):
        raise DataError(f"{u.out.path(name + '.idx')}: documents of several sequences: not a pair tokenize wrote; "
                        "nothing changed")
    lengths = index.sequence_lengths.astype(np.int64)
    return {"pair": name, "path": entry["docs"], "sequences": int(erase.sum()), "kept": int((~erase).sum()),
            "tokens": int(lengths[erase].sum())}


def _shard_number(u: Unit, rel: str) -> int:
    for k, s in enumerate(u.manifest.get("shards") or []):
        if s.get("docs") == rel:
            return k
    raise DataError(f"{u.out.path(rel)}: no shard of {u.out.manifest_name} names this sidecar")


def check_consumers(units: list[Unit]) -> None:
    """Packed rows and shards are rebuilt from their token set: it must be part of this erase and be
    the one they were made from; shards must keep tokens to shard."""
    tokens = {(u.out.url, u.out.unit): u for u in units if u.kind == "tokens"}
    for u in units:
        if u.kind not in ("pack", "shards") or u.plan is None:
            continue
        source = u.manifest.get("input_token_set") or {}
        prefix = source.get("prefix") or "part"
        ts = tokens.get((Output.at(source.get("url", "")).url, "" if prefix == "part" else prefix))
        if ts is None:
            raise SettingsError(f"{u.where}: made from the token set {source.get('url')} (prefix {prefix}), which "
                                "this erase does not include: add it (or its job root) to the command")
        if ts.manifest.get("fingerprint") != source.get("fingerprint"):
            raise SettingsError(f"{u.where}: made from an earlier version of {ts.where} (its fingerprint changed "
                                f"since): run {u.stage} again instead of erasing it")
        if u.kind == "shards" and not u.resumed:
            totals = u.manifest.get("totals") or {}
            left = int(totals.get("tokens", 0)) - int(u.plan.get("stream_tokens", 0))
            size = int(u.manifest.get("shard_tokens") or 1)
            if left <= 0 or int(u.manifest.get("holdout_shards", 0)) >= -(-left // size):
                raise SettingsError(f"{u.where}: erasing leaves {max(left, 0):,} tokens, too few for one training "
                                    "shard after the held-out ones; remove the output (or run shards again) instead")


# --------------------------------------------------------------------------- rewriting


def apply_dataset(u: Unit, matcher: Matcher, written: dict) -> None:
    numbers = set(u.plan["numbers"])
    for f in u.plan["files"]:
        rel = f["path"]
        if not u.out.exists(rel):
            continue  # an empty _rejects/ file a killed erase removed
        if f.get("sets"):
            from curate.stages.dedup import shingles

            rec = shingles.erase_sets(u.out, rel, f["sets"], numbers)
            if rec is not None:
                written[rel] = rec
            continue
        adjust = (lambda t: shrink_sizes(t, u.plan.get("shrink") or {})) if f.get("shrink") else None
        rec = rewrite_table(u.out, rel, lambda t: matcher.mask(t) | numbers_mask(t, numbers),
                            drop_empty=rel.startswith("_rejects/"), matcher=matcher, adjust=adjust)
        if isinstance(rec, dict):
            written[rel] = rec


def apply_tokens(u: Unit, matcher: Matcher, written: dict) -> None:
    entries = {f["name"]: f for f in u.manifest.get("files") or []}
    for p in u.plan["pairs"]:
        rewrite_pair(u.out, entries[p["pair"]], matcher, written)
    apply_dataset(u, matcher, written)


def rewrite_pair(out: Output, entry: dict, matcher: Matcher, written: dict) -> None:
    """Drop the erased sequences of one tokenize pair: ``.bin``, ``.idx``, then the sidecar, each
    step skipped when a killed erase did it already (its checksum is no longer the manifest's)."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    import xxhash

    from curate.stages.tokenize import docs, megatron

    name = entry["name"]
    bin_rel, idx_rel, docs_rel = name + ".bin", name + ".idx", entry["docs"]
    if not out.exists(docs_rel):
        return  # the whole pair was erased (its sidecar goes last)
    raw = out.read_bytes(docs_rel)
    if xxhash.xxh3_128_hexdigest(raw) != entry["docs_xxh3_128"]:
        return  # written already
    table = pq.read_table(io.BytesIO(raw))
    erase = matcher.mask(table)
    if not erase.any():
        return
    keep = ~erase
    if not keep.any():  # tokenize writes no pair without documents
        for rel in (bin_rel, idx_rel, docs_rel):
            if out.exists(rel):
                out.remove(rel)
        return
    idx_raw = out.read_bytes(idx_rel)
    if xxhash.xxh3_128_hexdigest(idx_raw) == entry["idx_xxh3_128"]:
        index = megatron.parse_index(idx_raw, out.path(idx_rel))
        lengths = index.sequence_lengths.astype(np.int64)
        if lengths[erase].sum() and out.size(bin_rel) == index.bin_size:
            written[bin_rel] = copy_sequences(out, bin_rel, index, keep)
        written[idx_rel] = out.write_bytes(idx_rel, megatron.index_bytes(lengths[keep], index.dtype))
    written[docs_rel] = docs.write_table(out, docs_rel, table.filter(pa.array(keep)).combine_chunks())


def copy_sequences(out: Output, rel: str, index, keep: np.ndarray, chunk: int = 8 << 20) -> dict:
    """Write ``rel`` (a ``.bin``) again with only the sequences ``keep`` marks, copied in order."""
    edges = np.diff(np.r_[0, keep.astype(np.int8), 0])
    starts, stops = np.flatnonzero(edges == 1), np.flatnonzero(edges == -1)
    pointers = index.sequence_pointers.astype(np.int64)
    sizes = index.sequence_lengths.astype(np.int64) * index.dtype.itemsize
    with out.open_read(rel) as src, out.open(rel) as dst:
        for a, b in zip(starts.tolist(), stops.tolist()):
            pos, end = int(pointers[a]), int(pointers[b - 1] + sizes[b - 1])
            src.seek(pos)
            while pos < end:
                data = src.read(min(chunk, end - pos))
                if not data:
                    raise DataError(f"{out.path(rel)}: ends at byte {pos}, its index says {end}")
                dst.write(data)
                pos += len(data)
    return dst.record


def apply_pack(u: Unit, written: dict) -> dict:
    """Pack again every pair whose input pair changed or moved; the stage's summary of the result."""
    from curate.stages import pack
    from curate.stages.dataset import REJECTS
    from curate.stages.settings import settings_from_mapping
    from curate.stages.tokenize.read import open_token_set

    m = u.out.manifest()
    source = m["input_token_set"]
    ts = open_token_set(source["url"], source.get("prefix"))
    settings = settings_from_mapping(pack.PackSettings, m["settings"], u.where)
    plan = pack.resolve_plan(settings, ts)
    records = {r["path"]: r for r in m["outputs"]}
    before = {f["pair"]: (i, f) for i, f in enumerate(m["files"])}
    stats = []
    for i, pair in enumerate(ts.pairs):
        k, f = before.get(pair.name, (None, None))
        if k == i and records.get(f["docs"], {}).get(CHECKSUM) == pair.docs_xxh3_128:
            rels = (f["name"], f["docs"], f"{REJECTS}/{pair.name}.parquet")
            stats.append({"partition": i, "in": f["documents"], "out": f["documents"] - f["dropped"],
                          "dropped": {pack.TOO_LONG: f["dropped"]} if f["dropped"] else {}, "file": f,
                          "outputs": [records[r] for r in rels if r in records]})
        else:
            stats.append(pack.pack_pair(ts, i, plan, u.out, m["fingerprint"]))
            written.update({r["path"]: r for r in stats[-1]["outputs"]})
    _drop_unlisted(u, stats, [p.name for p in ts.pairs])
    extra = pack._manifest_extra(ts, settings, plan, stats, m.get("resumed_partitions", 0))
    return {**extra, "counts": _counts(stats), "outputs": [r for s in stats for r in s["outputs"]]}


def apply_shards(u: Unit, written: dict) -> dict:
    """Write again every shard from the first one that held an erased token; the stage's summary."""
    from curate.stages import shards
    from curate.stages.settings import settings_from_mapping
    from curate.stages.tokenize.read import open_token_set

    m = u.out.manifest()
    source = m["input_token_set"]
    ts = open_token_set(source["url"], source.get("prefix"))
    settings = settings_from_mapping(shards.ShardsSettings, m["settings"], u.where)
    plan = shards.resolve_stream(settings, ts)
    lengths = shards.stream_lengths(plan.pairs, plan.add_eot)
    planned = shards.plan_shards(lengths, settings.shard_tokens, settings.holdout_shards, settings.name)
    records = {r["path"]: r for r in m["outputs"]}
    before = m.get("shards") or []
    stats = []
    for s in planned:
        if s.index < u.plan["first_shard"]:  # the stream before the first erased token is unchanged
            e = before[s.index]
            stats.append({**e, "shard": s.index, "outputs": [records[e["name"]], records[e["docs"]]]})
        else:
            stats.append(shards.write_shard(ts, s, plan, u.out, m["fingerprint"]))
            written.update({r["path"]: r for r in stats[-1]["outputs"]})
    _drop_unlisted(u, stats, [s.name[:-len(".npy")] for s in planned])
    documents = sum(p.documents for p in plan.pairs)
    extra = shards.manifest_extra(settings, plan, ts, stats, m.get("resumed_partitions", 0))
    return {**extra, "counts": {"in": documents, "out": documents, "dropped": {}},
            "outputs": [r for s in stats for r in s["outputs"]]}


def _drop_unlisted(u: Unit, stats: list[dict], keys: list[str]) -> None:
    """Remove the files (and journal records) of the unit that the rebuilt summary no longer lists:
    rows of a pair that is gone, a ``too_long`` reject no longer written, shards past the new last."""
    keep = {r["path"] for s in stats for r in s["outputs"]}
    for r in u.out.manifest()["outputs"]:
        if r["path"] not in keep and u.out.exists(r["path"]):
            u.out.remove(r["path"])
    for key, rec in u.out.journal().items():
        if key not in keys and not key.startswith("erase-") and rec.get("status") == "done":
            u.out.forget(key)


def _counts(stats: list[dict]) -> dict:
    dropped: Counter = Counter()
    for s in stats:
        dropped.update(s.get("dropped") or {})
    return {"in": int(sum(s.get("in", 0) for s in stats)), "out": int(sum(s.get("out", 0) for s in stats)),
            "dropped": dict(sorted(dropped.items()))}


# --------------------------------------------------------------------------- manifests


def _updated_records(u: Unit, m: dict, written: dict) -> None:
    """The manifest's file records of the planned files: new size, checksum and rows, or gone."""
    outputs = {r["path"]: r for r in m["outputs"]}
    removed_rows = {f["path"]: f["rows"] for f in u.plan["files"]}
    removed_rows.update({p["path"]: p["sequences"] for p in u.plan["pairs"]})
    for rel in u.plan["paths"]:
        old = outputs.get(rel)
        if old is None:
            continue
        if not u.out.exists(rel):
            del outputs[rel]
            continue
        new = {**old, **(written.get(rel) or disk_record(u.out, rel))}
        if "rows" in old:
            new["rows"] = old["rows"] - removed_rows.get(rel, 0)
        outputs[rel] = new
    m["outputs"] = sorted(outputs.values(), key=lambda r: r["path"])


def _updated_counts(u: Unit, m: dict) -> None:
    counts = dict(m.get("counts") or {})
    dropped = Counter(counts.get("dropped") or {})
    for f in u.plan["files"]:
        if "/" not in f["path"]:  # a part: kept documents
            counts["out"] = counts.get("out", 0) - f["rows"]
            counts["in"] = counts.get("in", 0) - f["rows"]
        elif f["path"].startswith("_rejects/"):
            counts["in"] = counts.get("in", 0) - f["rows"]
            dropped.subtract(f["reasons"])
    sequences = sum(p["sequences"] for p in u.plan["pairs"])
    if sequences:
        counts["out"] = counts.get("out", 0) - sequences
        counts["in"] = counts.get("in", 0) - sequences
    counts["dropped"] = {k: v for k, v in sorted(dropped.items()) if v > 0}
    m["counts"] = counts


def _updated_token_files(u: Unit, m: dict) -> None:
    """Tokenize's per-pair entries, sets and totals after the planned pairs lost sequences."""
    records = {r["path"]: r for r in m["outputs"]}
    plans = {p["pair"]: p for p in u.plan["pairs"]}
    itemsize = np.dtype(m["dtype"]).itemsize
    files = []
    for f in m["files"]:
        p = plans.get(f["name"])
        if p is None:
            files.append(f)
            continue
        if p["kept"] == 0:
            continue
        b, i, d = records[f["name"] + ".bin"], records[f["name"] + ".idx"], records[f["docs"]]
        tokens = f["tokens"] - p["tokens"]
        files.append({**f, "documents": f["documents"] - p["sequences"], "tokens": tokens, "bytes": tokens * itemsize,
                      "idx_bytes": i["bytes"], "bin_xxh3_128": b[CHECKSUM], "idx_xxh3_128": i[CHECKSUM],
                      "docs_xxh3_128": d[CHECKSUM]})
    m["files"] = files
    for name, s in (m.get("sets") or {}).items():
        fs = [f for f in files if (f.get("set") or "train") == name]
        s.update(files=len(fs), **{k: int(sum(f[k] for f in fs)) for k in ("documents", "tokens", "bytes")})
    m["totals"] = {k: int(sum(f[k] for f in files)) for k in ("documents", "tokens", "bytes")}


def _record(u: Unit, request: Request) -> dict:
    return {"at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "request_sha256": request.sha256,
            "documents": u.plan["documents"], "by": request.by}


def _finished(manifest: dict, request: Request) -> bool:
    return manifest.get("status") == "complete" and \
        (manifest.get("erasures") or [{}])[-1].get("request_sha256") == request.sha256


def mark(u: Unit, request: Request) -> None:
    """Step 3 of the module doc: the unit's plan in its journal, then it is no longer complete."""
    if not u.resumed:
        u.out.intend(request.key, u.plan.get("paths", []), run=request.sha256, plan=u.plan)
    u.out.remove(u.out.success_name)
    m = u.out.manifest()
    if m.get("status") != "erasing":
        u.out.write_json(u.out.manifest_name, {**m, "status": "erasing", "erasing": request.sha256})


def finish(u: Unit, request: Request, summary: dict | None, written: dict) -> dict:
    """Write the unit's manifest (records, counts, the erasure record), then ``_SUCCESS``, then drop
    its plan from the journal."""
    m = u.out.manifest()
    if m.get("status") == "erasing":
        m.pop("erasing", None)
        if u.kind in ("dataset", "tokens"):
            _updated_records(u, m, written)
            _updated_counts(u, m)
            if u.kind == "tokens":
                _updated_token_files(u, m)
        elif u.kind in ("pack", "shards"):
            m.update(summary)
            m["outputs"] = sorted(m["outputs"], key=lambda r: r["path"])
        elif u.kind == "job":
            for stage in m.get("stages") or []:
                sub = Output.at(u.out.path(stage["output"])).manifest() or {}
                stage["counts"] = sub.get("counts", stage.get("counts"))
        m["erasures"] = [*m.get("erasures", []), _record(u, request)]
        m["status"] = "complete"
        u.out.write_json(u.out.manifest_name, m)
    u.out.write_bytes(u.out.success_name, b"")
    u.out.forget(request.key)
    u.manifest = m
    return m


# --------------------------------------------------------------------------- the whole erase


@dataclass
class Outcome:
    request: Request
    units: list  # (where, kind, documents) of each changed unit
    unknown: list[str]  # entries that matched nothing
    refused: bool = False  # nothing changed because of ``unknown``
    already: list[str] = field(default_factory=list)  # manifests recording this request before
    dry_run: bool = False


def erase(roots, request: Request, dry_run: bool = False, before_job_finish=None) -> Outcome:
    """Erase the request's documents under ``roots`` (see the module doc); what was done.
    ``before_job_finish(job_root)`` runs while a changed job root is still locked (the app
    rebuilds the job's HTML report there)."""
    units = discover(roots)
    with contextlib.ExitStack() as stack:
        lock_all(units, request, stack)
        units = discover(roots)  # again under the locks: a run may have finished meanwhile
        check_units(units, request)
        stored = {}
        for u in units:
            rec = u.out.journal_record(request.key)
            if rec and rec.get("run") == request.sha256 and rec.get("plan") is not None:
                stored[id(u)] = rec["plan"]
        known = {i for p in stored.values() for i in p.get("ids", [])}
        matcher, unknown = resolve(units, request, known)
        already = [u.where for u in units if any(e.get("request_sha256") == request.sha256
                                                 for e in u.manifest.get("erasures") or [])]
        if unknown and not already and not stored:
            return Outcome(request, [], unknown, refused=True)
        shrinks = cluster_shrinks(units, matcher)
        for u in units:
            if u.kind == "job":
                continue
            u.plan = stored.get(id(u)) or plan_unit(u, matcher, shrinks.get(id(u)) or {})
            u.resumed = id(u) in stored
        for u in units:
            if u.kind == "job":
                ids = {i for s in u.stages if s.plan for i in s.plan["ids"]}
                if any(s.plan for s in u.stages) or id(u) in stored:
                    u.plan = stored.get(id(u)) or {"paths": [], "files": [], "pairs": [], "ids": [],
                                                   "documents": len(ids), "by": request.by}
                    u.resumed = id(u) in stored
        changed = [u for u in units if u.plan is not None]
        check_consumers(units)
        outcome = Outcome(request, [(u.where, u.kind, u.plan["documents"]) for u in changed], unknown,
                          already=already, dry_run=dry_run)
        if dry_run:
            return outcome
        # a unit whose manifest a killed erase already finished only lacks its _SUCCESS
        done = {id(u) for u in changed if u.resumed and _finished(u.out.manifest(), request)}
        for u in changed:  # every plan is on disk before any document file changes
            if id(u) not in done:
                mark(u, request)
        for u in changed:
            if id(u) in done:
                finish(u, request, None, {})
                continue
            written: dict = {}
            summary = None
            if u.kind == "dataset":
                apply_dataset(u, matcher, written)
            elif u.kind == "tokens":
                apply_tokens(u, matcher, written)
            elif u.kind == "pack":
                summary = apply_pack(u, written)
            elif u.kind == "shards":
                summary = apply_shards(u, written)
            elif u.kind == "job" and before_job_finish is not None:
                before_job_finish(u.out.url)
            finish(u, request, summary, written)
            log.debug("erase: %s: %d documents erased", u.where, u.plan["documents"])
        return outcome
