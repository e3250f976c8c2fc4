"""Saved dedup indexes: ``--save-index IDX`` writes one, ``--against IDX [IDX ...]`` deduplicates new data
against them without reading the data they were made from.

An index is a curate output of its own (owner stage ``dedup_index``): ``_manifest.json`` lists every
file with its XXH3-128 checksum, ``_SUCCESS`` comes last, a killed run resumes from its journal, and
``curate verify IDX`` checks it like any output. Its tables are Parquet parts, partitioned so that no
step ever reads an index whole: a run meets part ``i`` of a table in one task, after routing its own
rows there (:func:`part_of`, one range shuffle)::

    exact   hashes/part-NNNNN.parquet      (h1, h2, id)          one row per distinct text the run kept: the
                                                                 128-bit hash's halves and the kept id; by part_of(h1)
    fuzzy   buckets/part-NNNNN.parquet     (bucket, center, second)  one row per LSH bucket key: its two
                                                                 smallest document numbers (the anchors of its
                                                                 star edges; second -1: one document); by part_of(bucket)
            components/part-NNNNN.parquet  (comp, doc)           every member of every component of two or
                                                                 more (comp: its smallest document); by part_of(comp)
            labels/part-PPPPP.parquet      (doc, comp, removed)  the same members, by input partition PPPPP
            docs/part-PPPPP.parquet        (doc, id, key, sig, start, count)  every document with shingles,
                                                                 kept or removed, by input partition PPPPP: its keep
                                                                 key, MinHash signature and where its shingle set is
            shingles/part-PPPPP.u64        raw little-endian uint64: each document's shingle set (sorted distinct
                                                                 64-bit hashes, what the true-Jaccard check compares;
                                                                 the texts are not kept) at [start, start + count);
                                                                 read by byte ranges (:func:`read_sets`), so a run
                                                                 that compares a few documents reads little of it

``NNNNN`` runs over the index's ``parts`` (the number of input partitions of the run that started it),
``PPPPP`` over its ``partitions``: documents keep the numbers their run gave them (``input partition
<< 32 | row``). The manifest's ``index`` entry records the format (:data:`FORMATS`), the curate version,
the kind, the settings that made it (:func:`settings_record`), ``parts``, ``partitions``, ``tiers``
(the partition where each run's documents end: one for a first index, one more per ``--against`` run
saved on top), the documents, the input it was made from (its identity, as fingerprints see it) and the
indexes it contains.

``--save-index`` on an ``--against`` run writes the index of the union: the bases' documents first
(their numbers and tiers unchanged, further bases shifted after them), then the new ones; each table
part ``i`` is the first base's part ``i`` merged with the rows routed to it (the fuzzy ``docs`` and
``shingles`` parts of the first base are copied byte for byte, checked against its checksums). So a
team keeps one index per corpus and replaces it with each snapshot; the union costs one pass over the
index's files, no signatures are recomputed.

Refused before any work (exit 2, one line, nothing written; :func:`open_index`): an index that is
missing, not a curate output, another stage's output, incomplete (no ``_SUCCESS``), of another format
or curate version's format, damaged (a file missing, of another size or checksum, or a file its
manifest does not list), of the other dedup kind, made with other settings (each difference named),
made from this run's own input, given twice or inside another given index; a ``--save-index`` that is
a symbolic link, not a directory, holds a link, is an input, an ``--against`` index or overlaps the output.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from curate.stages.errors import SettingsError

STAGE = "dedup_index"
#: the layout above, per kind; an index of another format is refused naming both (fuzzy 2: buckets keep
#: their second anchor)
FORMATS = {"exact": 1, "fuzzy": 2}
OWNER = {"kind": "stage", "stage": STAGE, "job": None}
TABLES = {"exact": ("hashes",), "fuzzy": ("buckets", "components", "labels", "docs", "shingles")}
#: tables partitioned by part_of (the others by input partition)
HASHED = ("hashes", "buckets", "components")

_M1 = np.uint64(0xFF51AFD7ED558CCD)
_M2 = np.uint64(0xC4CEB9FE1A85EC53)


#: the fuzzy index's shingle sets: one raw file per input partition (see the module doc)
SHINGLES = "shingles"


def part_name(table: str, i: int) -> str:
    return f"{table}/part-{i:05d}." + ("u64" if table == SHINGLES else "parquet")


def part_of(values, n: int) -> np.ndarray:
    """int64 index part in [0, n) of 64-bit keys (bucket keys, hash halves, component numbers): their
    murmur3 finaliser modulo n, so keys that are themselves sequential spread evenly too."""
    h = np.asarray(values).astype(np.uint64, copy=True)
    with np.errstate(over="ignore"):
        h ^= h >> np.uint64(33)
        h *= _M1
        h ^= h >> np.uint64(33)
        h *= _M2
        h ^= h >> np.uint64(33)
    return (h % np.uint64(n)).astype(np.int64)


def curate_version() -> str:
    from curate.stages.versions import curate_version as version

    return version()


def settings_record(kind: str, settings, bands: int | None = None, rows: int | None = None) -> dict:
    """What makes an index's rows comparable with a run's: every setting that changes hashes, bucket
    keys, shingles, similarity or components (not the keep policy: indexed documents always win)."""
    if kind == "exact":
        return {"hash": settings.hash}
    return {"num_perm": settings.num_perm, "bands": bands, "rows": rows, "ngram": settings.ngram,
            "shingle": settings.shingle, "seed": settings.seed, "threshold": settings.threshold,
            "false_positive_check": settings.false_positive_check}


def differences(theirs: dict, ours: dict) -> list[str]:
    return [f"{k} {theirs.get(k)!r} (this run: {ours[k]!r})" for k in ours if theirs.get(k) != ours[k]]


@dataclass(frozen=True)
class Index:
    """A checked index as one run reads it (picklable). ``offset`` (input partitions) and ``tier0`` are
    where this run puts its documents: after the indexes given before it."""

    label: str  # as the user named it: in _detail and messages
    url: str
    info: dict = field(hash=False)
    offset: int = 0
    tier0: int = 0

    @property
    def kind(self) -> str:
        return self.info["kind"]

    @property
    def parts(self) -> int:
        return int(self.info["parts"])

    @property
    def partitions(self) -> int:
        return int(self.info.get("partitions", 0))

    @property
    def tiers(self) -> list[int]:
        return [int(t) for t in self.info.get("tiers", [])]

    def rel(self, table: str, i: int) -> str:
        return part_name(table, i)

    def slim(self) -> Index:
        """This index without its history (inputs, sources, contained indexes): what tasks need."""
        import dataclasses

        keep = ("format", "kind", "id", "parts", "partitions", "tiers")
        return dataclasses.replace(self, info={k: self.info[k] for k in keep if k in self.info})

    def path(self, table: str, i: int) -> str:
        from curate.stages.output import Output

        return Output(self.url).url_of(self.rel(table, i))

    def read(self, table: str, i: int, columns=None) -> pd.DataFrame:
        return pd.read_parquet(self.path(table, i), columns=columns)

    def shifted(self, frame: pd.DataFrame, columns=("doc",)) -> pd.DataFrame:
        """``frame`` with its document numbers (``columns``) moved to this run's numbering."""
        if not self.offset:
            return frame
        from curate.stages.dedup import DOC_SHIFT

        return frame.assign(**{c: frame[c].to_numpy(dtype=np.int64) + (self.offset << DOC_SHIFT) for c in columns})


def read_sets(ix: Index, i: int, docs: np.ndarray):
    """The shingle sets of documents ``docs`` (the index's own numbers, all in its input partition
    ``i``, any order) as a pyarrow list<uint64> array in that order (:func:`set_buffers`)."""
    import pyarrow as pa

    values, offsets = set_buffers(ix, i, docs)
    return pa.LargeListArray.from_arrays(pa.array(offsets), pa.array(values, type=pa.uint64()))


def set_buffers(ix: Index, i: int, docs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(values, offsets) of the shingle sets of documents ``docs`` of the index's input partition ``i``:
    reads the part's (doc, start, count) columns and, of its shingles file, only the byte ranges that
    hold those sets (:func:`curate.stages.dedup.shingles.read_ranges`), so a run touching a few
    documents of a large index reads little of it."""
    import pyarrow.parquet as pq

    from curate.stages.dedup import shingles
    from curate.stages.output import Output

    table = pq.read_table(ix.path("docs", i), columns=["doc", "start", "count"])
    start, count = shingles.locate(table.column("doc").to_numpy(), table.column("start").to_numpy(),
                                   table.column("count").to_numpy(), docs, f"{ix.path('docs', i)} (an index)")
    with Output(ix.url).open_read(ix.rel(SHINGLES, i)) as f:
        return shingles.read_ranges(f, start, count, f"{ix.path(SHINGLES, i)} (an index)")


# --------------------------------------------------------------------------- before any work


def open_index(path: str, kind: str, record: dict, flag: str = "--against", verify: bool = True) -> Index:
    """The index at ``path``, checked (see the module doc); SettingsError with one line otherwise.
    ``verify=False`` (a run, after its checks passed): its files are not read again."""
    from curate.stages.errors import DataError
    from curate.stages.output import Output, unlisted, verify_unit

    where = f"{flag} {path}"
    if "://" not in path and not os.path.isdir(path):
        raise SettingsError(f"{where}: no such directory")
    out = Output.at(path)
    try:
        manifest = out.manifest()
    except DataError as e:
        raise SettingsError(f"{where}: not a curate dedup index ({e})") from None
    if manifest is None:
        raise SettingsError(f"{where}: not a curate dedup index (no _manifest.json)")
    stage = (manifest.get("owner") or {}).get("stage") or manifest.get("stage")
    if stage != STAGE:
        raise SettingsError(f"{where}: not a dedup index but the output of stage {stage!r}; pass the directory "
                            "--save-index wrote")
    if not out.complete():
        raise SettingsError(f"{where}: incomplete (no _SUCCESS: the run writing it did not finish); rerun it")
    info = manifest.get("index") or {}
    want = FORMATS.get(info.get("kind"), FORMATS[kind])
    if info.get("format") != want:
        raise SettingsError(f"{where}: index format {info.get('format')!r} (written by curate "
                            f"{info.get('curate_version', '?')}); this curate {curate_version()} reads format {want}: "
                            "rebuild the index with this version")
    if info.get("kind") != kind:
        raise SettingsError(f"{where}: an index of {info.get('kind')} dedup, not of {kind} dedup")
    check_fields(info, manifest, out, where)
    diff = differences(info.get("settings") or {}, record)
    if diff:
        raise SettingsError(f"{where}: made with other settings: {', '.join(diff)}; use the index's settings "
                            "or rebuild it")
    if not verify:
        return Index(path, out.url, info)
    listing = out.listing()
    problems = verify_unit(out, checksums=True, listing=listing)
    problems += [f"{out.path(rel)}: unlisted: not written by curate" for rel in unlisted(out, listing)]
    problems += [f"{out.path(rel)}: link" for rel in out.links()]
    if problems:
        more = f" (and {len(problems) - 1} more; curate verify --checksums {path} lists them)" if len(problems) > 1 else ""
        raise SettingsError(f"{where}: damaged: {problems[0]}{more}")
    return Index(path, out.url, info)


#: the largest number of parts or input partitions an index may claim (a hostile 2^40 is refused)
MAX_PARTS = 1_000_000


def _digest(obj) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def content_digest(records) -> str:
    """SHA-256 over the index's files (path, size, checksum): what its ``index`` entry says it holds."""
    return _digest(sorted((r["path"], r["bytes"], r.get("xxh3_128")) for r in records))


def check_fields(info: dict, manifest: dict, out, where: str) -> None:
    """The ``index`` entry's identity and every field, each a one-line refusal: the entry's own SHA-256
    (``sha256``, over the rest of it) and the digest of the files it lists (``content``), so a manifest
    edited to match altered or swapped parts no longer matches itself; ``parts``, ``partitions``,
    ``tiers`` and ``documents`` in range and consistent with the files listed."""
    def bad(field, why):
        return SettingsError(f"{where}: its index entry's {field} {info.get(field)!r} {why} (damaged or edited: "
                             "rebuild the index)")

    if "sha256" not in info or "content" not in info:
        raise SettingsError(f"{where}: its index entry carries no digests (written by an earlier curate, or "
                            "edited): rebuild the index")
    if _digest({k: v for k, v in info.items() if k != "sha256"}) != info["sha256"]:
        raise bad("sha256", "is not the digest of the entry: the manifest was edited")
    if content_digest(manifest.get("outputs") or []) != info["content"]:
        raise bad("content", "is not the digest of the files the manifest lists: files were swapped or edited")
    exact = info.get("kind") == "exact"  # hashes only: no input partitions, no tiers
    for name, low, high in (("parts", 1, MAX_PARTS), ("partitions", 0 if exact else 1, 0 if exact else MAX_PARTS),
                            ("documents", 0, 2**62)):
        value = info.get(name)
        if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
            raise bad(name, "is out of range")
    tiers = info.get("tiers")
    ok = isinstance(tiers, list) and all(isinstance(t, int) and not isinstance(t, bool) for t in tiers)
    if exact:
        ok = ok and tiers == []
    else:
        ok = ok and bool(tiers) and tiers[0] >= 1 and tiers[-1] == info["partitions"] and \
            all(b > a for a, b in zip(tiers, tiers[1:]))
    if not ok:
        raise bad("tiers", f"is not an increasing list ending at partitions ({info['partitions']})")
    listed = [r["path"] for r in manifest.get("outputs") or []]
    for table in TABLES.get(info.get("kind"), ()):
        n = sum(1 for rel in listed if rel.startswith(table + "/"))
        want = info["parts"] if table in HASHED else info["partitions"]
        if n != want:
            raise bad("parts" if table in HASHED else "partitions", f"does not match the {n} {table}/ files listed")


def check_against(paths, kind: str, record: dict, inputs, verify: bool = True) -> list[Index]:
    """Every ``--against`` index checked, with this run's offsets and tiers (see :class:`Index`)."""
    from curate.stages import dataset

    if not paths:
        return []  # nothing to check, and a job's later input may not exist yet (on an object store too)
    indexes, offset, tier = [], 0, 0
    own = dataset.input_identity(inputs, allow_incomplete=True) if inputs else []
    seen: dict[str, str] = {}
    for path in paths:
        ix = open_index(path, kind, record, verify=verify)
        ident = ix.info.get("id")
        if ident in seen:
            raise SettingsError(f"--against {path}: the same index as {seen[ident]}; give each index once")
        for other_id, other in seen.items():
            if other_id in ix.info.get("contains", []):
                raise SettingsError(f"--against {path}: already holds {other} (saved from a run against it); "
                                    f"pass {path} alone")
        for earlier in indexes:
            if ident in earlier.info.get("contains", []):
                raise SettingsError(f"--against {earlier.label}: already holds {path} (saved from a run against "
                                    f"it); pass {earlier.label} alone")
        seen[ident] = path
        sources = ix.info.get("sources", [])
        if any(s in sources for s in own):
            raise SettingsError(f"--against {path}: an index of this run's own input ({', '.join(inputs)}): every "
                                "document would be removed; pass the index of another snapshot")
        indexes.append(Index(path, ix.url, ix.info, offset, tier))
        offset += ix.partitions
        tier += len(ix.tiers) or 1
    return indexes


def check_save(path: str | None, inputs, against, output: str | None = None) -> None:
    """Refuse a ``--save-index`` that is a symbolic link or holds one (:func:`check_save_links`), is an
    input or an index read, overlaps the output, or is a directory curate did not write as an index."""
    if not path:
        return
    from curate.stages.output import Output, check_claim, check_not_input

    check_save_links(path)
    for ix in against:
        if os.path.abspath(ix) == os.path.abspath(path):
            raise SettingsError(f"--save-index {path}: also read by --against; write the new index elsewhere "
                                "(it holds the old one too)")
    check_not_input(path, list(inputs) + list(against), flag="--save-index")
    if output is not None and "://" not in path + output:
        a, b = os.path.realpath(path), os.path.realpath(output)
        if a == b or a.startswith(b + os.sep) or b.startswith(a + os.sep):
            raise SettingsError(f"--save-index {path}: overlaps the output {output}; write the index elsewhere")
    try:
        check_claim(Output.at(path), OWNER)
    except SettingsError as e:  # the claim names the directory as --output; here it is the index's
        raise type(e)(str(e).replace("--output ", "--save-index ", 1)) from None


def check_save_links(path: str) -> None:
    """Refuse (OwnershipError, one line naming ``path``) a local ``--save-index`` that is a symbolic
    link (to a folder or a file, dangling or not), anything but a directory, or a directory with a link
    anywhere below it. The index is one of the run's outputs, like its ``_rejects/`` or ``_work/``, and
    is refused as they are: written through a link it would land in a folder curate does not own (a
    dangling link failed mid-run before, after the dedup was done). The folders above ``path`` are the
    user's own layout, as they are for ``--output``."""
    from curate.stages.output import Output, OwnershipError, is_remote, link_target

    if is_remote(path):
        return  # an object store has no links
    name = path[len("file://"):] if path.startswith("file://") else path
    name = name.rstrip(os.sep) or name  # "IDX/" would follow the link
    if os.path.islink(name):
        raise OwnershipError(f"--save-index {path}: a symbolic link (to {link_target(name)}); curate never writes "
                             "an index through a link (it may lead to a folder curate does not own): remove the "
                             "link or name a directory")
    if os.path.lexists(name) and not os.path.isdir(name):
        raise OwnershipError(f"--save-index {path}: exists and is not a directory")
    links = Output.at(name).links()
    if links:
        link = os.path.join(os.path.abspath(name), *links[0].split("/"))
        more = f" (and {len(links) - 1} more)" if len(links) > 1 else ""
        raise OwnershipError(f"--save-index {path}: {link} is a symbolic link (to {link_target(link)}){more}; curate "
                             "never writes, renames or deletes through a link (it may lead out of the index): "
                             "remove the link or choose another directory")


# --------------------------------------------------------------------------- writing


def info_entry(kind: str, record: dict, *, parts: int, partitions: int, tiers: list[int], documents: int,
               ctx, bases: list[Index], keep: str, extra: dict | None = None) -> dict:
    """The manifest's ``index`` entry (see the module doc)."""
    from curate.stages import dataset

    sources = [s for b in bases for s in b.info.get("sources", [])]
    sources += dataset.input_identity(ctx.input, ctx.io.allow_incomplete)
    contains = sorted({c for b in bases for c in (b.info.get("id"), *b.info.get("contains", []))})
    return {"format": FORMATS[kind], "curate_version": curate_version(), "kind": kind, "id": ctx.fingerprint,
            "settings": record, "keep": keep, "parts": parts, "partitions": partitions, "tiers": tiers,
            "documents": documents, "input": list(ctx.input), "sources": sources, "contains": contains,
            "bases": [b.label for b in bases], **(extra or {})}


def finish(steps, info: dict) -> dict:
    """Write the index's manifest (every table part, with checksums, and the entry's digests: see
    :func:`check_fields`) and then ``_SUCCESS``."""
    import time

    records = steps.records()
    info = {**info, "content": content_digest(records)}
    info["sha256"] = _digest(info)
    manifest = {"stage": STAGE, "owner": OWNER, "fingerprint": steps.ctx.fingerprint, "index": info,
                "timings": {"finished": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}, "steps": steps.timings}
    return steps.out.finish(manifest, records, run=steps.ctx.fingerprint)


def write_table(frame: pd.DataFrame, folder, i: int, sort=None) -> dict:
    """One index part (``sort``: its columns, for row-group statistics and merge order); its stats."""
    import pyarrow as pa

    from curate.stages import dedup

    frame = frame.sort_values(list(sort), kind="stable") if sort else frame
    stats = dedup.save_table(pa.Table.from_pandas(frame.reset_index(drop=True), preserve_index=False), folder, i)
    for r in stats.get("outputs", []):
        r["rows"] = len(frame)
    return stats


def routed_rows(frames, column: str, parts: int) -> list:
    """Delayed frames: the rows of the Dask DataFrames ``frames`` routed to index part ``part_of(column)``."""
    import dask.dataframe as dd

    from curate.stages import dedup

    rows = dd.concat(frames) if len(frames) > 1 else frames[0]
    rows = rows.map_partitions(lambda df: df.assign(_part=part_of(df[column].to_numpy(), parts)),
                               meta=rows._meta.assign(_part=pd.Series([], dtype="int64")))
    return dedup.route_to_parts(rows, "_part", parts)


def base_frames(bases: list[Index], table: str, columns, shift=(), tier: bool = False) -> list:
    """Dask DataFrames of ``table`` of every base but the first (which is merged part by part), moved to
    this run's numbering (the ``shift`` columns) and, with ``tier``, tagged with their first tier."""
    import dask.dataframe as dd

    frames = []
    for b in bases[1:]:
        files = [b.path(table, i) for i in range(b.parts if table in HASHED else b.partitions)]
        meta = read_shifted(files[0], b, columns, shift, tier).iloc[:0]
        frame = dd.from_map(read_shifted, files, base=b, columns=columns, shift=shift, tier=tier, meta=meta,
                            enforce_metadata=False, divisions=[None] * (len(files) + 1))
        frames.append(frame)
    return frames


def read_shifted(path: str, base: Index, columns, shift=(), tier: bool = False) -> pd.DataFrame:
    frame = base.shifted(pd.read_parquet(path, columns=columns), shift)
    return frame.assign(tier=np.int64(base.tier0)) if tier else frame


def lock(path: str):
    """The lock a run holds on the index it writes, for its whole life."""
    from curate.stages.output import Lock, Output

    return Lock(Output.at(path), "curate dedup --save-index")


def listed_files(base: Index) -> dict[str, dict]:
    """The file records of a base's manifest by path (read once, on the client)."""
    from curate.stages.output import Output

    return {r["path"]: r for r in (Output(base.url).manifest() or {}).get("outputs", [])}


def copy_part(base: Index, table: str, i: int, folder, j: int, listed: dict | None) -> dict:
    """Part ``i`` of a base's table, copied byte for byte to part ``j`` of ``folder``; a copy whose bytes
    differ from ``listed`` (its record in the base's manifest) is refused (DataError naming the file)."""
    from curate.stages.errors import DataError
    from curate.stages.output import CHECKSUM, Output

    src = Output(base.url)
    rel = base.rel(table, i)
    with src.open_read(rel) as f, folder.out.open(f"{folder.rel}/{part_name(table, j).split('/', 1)[1]}") as sink:
        for chunk in iter(lambda: f.read(8 << 20), b""):
            sink.write(chunk)
    if listed is None or sink.record[CHECKSUM] != listed[CHECKSUM]:
        raise DataError(f"{src.path(rel)}: checksum: changed since the index was checked; rerun")
    rows = listed.get("rows")
    return {"partition": j, "rows": rows or 0, "outputs": [{**sink.record, **({"rows": rows} if rows is not None else {})}]}
