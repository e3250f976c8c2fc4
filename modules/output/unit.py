"""One ownership unit of an output directory (Output): reading, checksummed atomic writes, the resume journal, what it owns, deleting only that, begin and finish."""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import secrets
from dataclasses import dataclass

from curate.stages.errors import DataError
from curate.stages.output.files import _Abandon, _HashingWriter
from curate.stages.output.names import (
    _CONTROL_RE,
    _STATE_RE,
    CHECKSUM,
    TMP_MARK,
    OwnershipError,
    check_paths,
    check_rel,
    is_remote,
    is_side,
    is_temporary,
    refuse_link,
    side_link_refusal,
    side_of,
    unit_files,
)


@dataclass(frozen=True)
class Output:
    """A unit of an output directory; picklable (the filesystem object is made where it is used)."""

    url: str
    unit: str = ""

    @classmethod
    def at(cls, path, unit: str = "") -> Output:
        path = str(path)
        if path.startswith("file://"):
            path = path[len("file://"):]
        unit_files(unit)  # validates the name
        return cls(path.rstrip("/") if is_remote(path) else os.path.abspath(path), unit)

    # ----------------------------------------------------------------- names and the file system

    @property
    def remote(self) -> bool:
        return is_remote(self.url)

    @property
    def names(self) -> dict[str, str]:
        return unit_files(self.unit)

    @property
    def manifest_name(self) -> str:
        """``_manifest.json`` (the folder reads as a dataset in other tools), or ``manifest.json`` for a
        unit an earlier curate wrote and nobody has rerun: read, verified and erased under that name."""
        names = self.names
        if not self.exists(names["manifest"]) and self.exists(names["legacy_manifest"]):
            return names["legacy_manifest"]
        return names["manifest"]

    @property
    def success_name(self) -> str:
        return self.names["success"]

    @property
    def state_dir(self) -> str:
        return self.names["state"]

    @property
    def side_url(self) -> str:
        """The sibling folder that holds the unit's side outputs (see :func:`is_side`)."""
        return side_of(self.url)

    def fs(self, url: str | None = None):
        """(fsspec filesystem, root path inside it) of the output (or of ``url``, its side folder)."""
        import fsspec

        fs, root = fsspec.core.url_to_fs(url or self.url)
        return fs, root.rstrip("/") or "/"

    def _base(self, rel: str) -> str:
        """The folder ``rel`` lives in: the output, or for a side path its side folder, unless an
        earlier curate wrote it inside the output and no run has moved it yet (read and rewritten there)."""
        if not rel or not is_side(rel) or self._inside(rel):
            return self.url
        return self.side_url

    def _inside(self, rel: str) -> bool:
        parts = rel.rstrip("/").split("/")
        if not self.remote:
            path = os.path.join(self.url, *parts)
            if os.path.isdir(path) and not os.path.islink(path):
                # a folder left inside with temporaries only (a killed run's) holds nothing to read there
                return any(not is_temporary(f) for _root, _dirs, files in os.walk(path) for f in files)
            return os.path.lexists(path)
        fs, root = self.fs()
        return fs.exists(root + "/" + "/".join(parts))

    def path(self, rel: str) -> str:
        if rel:
            check_rel(rel, self.url)
        return self._join(self._base(rel), rel)

    def _join(self, base: str, rel: str) -> str:
        if not self.remote:
            return os.path.join(base, *rel.split("/"))
        return self.fs(base)[1] + "/" + rel

    def url_of(self, rel: str) -> str:
        """``rel`` as a path or URL that any process (pandas, pyarrow, fsspec) can open."""
        return self.path(rel) if not self.remote else f"{self._base(rel)}/{rel}"

    def exists(self, rel: str = "") -> bool:
        if not self.remote:
            return os.path.exists(self.path(rel) if rel else self.url)
        fs, root = self.fs()
        return fs.exists(root + ("/" + rel if rel else ""))

    def size(self, rel: str) -> int:
        if not self.remote:
            return os.path.getsize(self.path(rel))
        return int(self.fs()[0].size(self.path(rel)))

    def read_bytes(self, rel: str) -> bytes:
        if not self.remote:
            self._refuse_link(rel, "reads")
            with open(self.path(rel), "rb") as f:
                return f.read()
        return self.fs()[0].cat_file(self.path(rel))

    def open_read(self, rel: str):
        if not self.remote:
            self._refuse_link(rel, "reads")
            return open(self.path(rel), "rb")
        return self.fs()[0].open(self.path(rel), "rb")

    def read_json(self, rel: str) -> dict | None:
        try:
            data = self.read_bytes(rel)
        except FileNotFoundError:
            return None
        try:
            return json.loads(data)
        except ValueError as e:
            raise DataError(f"{self.path(rel)}: not valid JSON ({e})") from None

    def listing(self) -> dict[str, int]:
        """Every file below the directory and the side paths of its side folder (relative path with '/'
        -> size), whatever unit owns them; a side path still inside the directory wins (:meth:`_base`)."""
        found = self._walk(self.url)
        for rel, size in self._walk(self.side_url).items():
            if is_side(rel):
                found.setdefault(rel, size)
        return found

    def _walk(self, url: str) -> dict[str, int]:
        if not self.remote:
            out = {}
            if not os.path.isdir(url):
                return out
            for root, _dirs, files in os.walk(url):
                rel_root = os.path.relpath(root, url)
                for f in files:
                    rel = f if rel_root == "." else f"{rel_root}/{f}".replace(os.sep, "/")
                    try:
                        out[rel] = os.lstat(os.path.join(root, f)).st_size
                    except FileNotFoundError:  # removed while we looked (a temporary being renamed)
                        continue
            return out
        fs, root = self.fs(url)
        fs.invalidate_cache()
        try:
            found = fs.find(root, detail=True)
        except FileNotFoundError:
            return {}
        return {name[len(root) + 1:]: int(info.get("size") or 0) for name, info in found.items()
                if info.get("type") == "file" and name.startswith(root + "/")}

    def links(self) -> list[str]:
        """Symbolic links below a local output (relative paths, sorted; a linked folder is not
        entered). curate makes none; see the module doc."""
        if self.remote:
            return []
        side = self.side_url
        beside = _links_below(side) if os.path.isdir(side) and not os.path.islink(side) else []
        return sorted(set(_links_below(self.url)) | {rel for rel in beside if is_side(rel)})

    def _refuse_link(self, rel: str, how: str = "") -> None:
        if not self.remote:
            self._refuse_link_in(self._base(rel), rel, how)

    def _refuse_link_in(self, base: str, rel: str, how: str = "") -> None:
        if base != self.url and os.path.islink(base):  # the user named the output, not its sibling
            raise OwnershipError(side_link_refusal(self.url, base))
        refuse_link(base, self._join(base, rel), how)

    # ----------------------------------------------------------------- writing

    @contextlib.contextmanager
    def open(self, rel: str):
        """A binary file to write ``rel`` through; on a clean exit the file is in place and
        ``sink.record`` holds its path, size and checksum. On an error, or after
        ``sink.abandon()`` (nothing worth keeping was written), nothing is left behind and the
        record is None."""
        final = self.path(rel)
        if self.remote:
            fs = self.fs()[0]
            raw = fs.open(final, "wb")
            sink = _HashingWriter(raw)
            try:
                yield sink
                if sink.abandoned:
                    raise _Abandon
                sink.close()
                raw.close()  # the PUT happens here; the object appears whole or not at all
            except BaseException as e:
                with contextlib.suppress(Exception):
                    raw.discard() if hasattr(raw, "discard") else None
                if isinstance(e, _Abandon):
                    sink.record = None
                    return
                raise
        else:
            self._refuse_link(rel)  # before makedirs, which would create folders through a link
            folder = os.path.dirname(final)
            os.makedirs(folder, exist_ok=True)
            tmp = os.path.join(folder, f".{os.path.basename(final)}{TMP_MARK}{os.getpid()}-{secrets.token_hex(4)}")
            raw = open(tmp, "wb")
            sink = _HashingWriter(raw)
            try:
                yield sink
                if sink.abandoned:
                    raise _Abandon
                sink.close()
                raw.close()
                os.replace(tmp, final)
            except BaseException as e:
                raw.close()
                with contextlib.suppress(FileNotFoundError):
                    os.remove(tmp)
                if isinstance(e, _Abandon):
                    sink.record = None
                    return
                raise
        sink.record = {"path": rel, "bytes": sink.bytes, CHECKSUM: sink.hash.hexdigest()}

    def write_bytes(self, rel: str, data: bytes) -> dict:
        with self.open(rel) as f:
            f.write(data)
        return f.record

    def write_json(self, rel: str, obj) -> dict:
        text = json.dumps(obj, indent=2, default=str) + "\n"
        return self.write_bytes(rel, text.encode("utf-8"))

    def write_frame(self, rel: str, df, fmt: str) -> dict:
        """One dataset part (Parquet or JSONL); the record carries its row count."""
        df = df.reset_index(drop=True)
        with self.open(rel) as f:
            if fmt == "parquet":
                import pyarrow as pa
                import pyarrow.parquet as pq

                pq.write_table(pa.Table.from_pandas(_same_strings(df), preserve_index=False), f)
            else:
                text = io.TextIOWrapper(f, encoding="utf-8", newline="")
                # double_precision=15: pandas' default (10) would round metadata floats
                df.to_json(text, orient="records", lines=True, force_ascii=False, double_precision=15)
                text.flush()
                text.detach()
        return {**f.record, "rows": len(df)}

    # ----------------------------------------------------------------- the journal

    def _state_rel(self, key: str) -> str:
        if not re.match(r"^[A-Za-z0-9][A-Za-z0-9._-]*$", key):
            raise ValueError(f"journal key {key!r}")
        return f"{self.state_dir}/{key}.json"

    def intend(self, key: str, paths, **info) -> None:
        """Record that this task is about to write ``paths`` (before the first byte of them); ``info``
        is what a resumed task needs to know of its plan (``curate erase``)."""
        self.write_json(self._state_rel(key), {"key": key, "status": "writing", "paths": sorted(paths), **info})

    def record_done(self, key: str, run: str, files: list[dict], **info) -> dict:
        """Record a finished task: its run key, its file records and what it returned."""
        rec = {"key": key, "status": "done", "run": run, "files": files, **info}
        self.write_json(self._state_rel(key), rec)
        return rec

    def record_pending(self, key: str, run: str, **info) -> dict:
        """Record a task of this run that must run again (a transient failure): never finished, kept
        by :meth:`finish` with the run's done records, so a rerun of the same run key redoes it."""
        rec = {"key": key, "status": "pending", "run": run, "files": [], **info}
        self.write_json(self._state_rel(key), rec)
        return rec

    def forget(self, key: str) -> None:
        """Remove the journal record ``key`` (a finished task whose record is no longer needed)."""
        self.remove(self._state_rel(key))

    def journal(self) -> dict[str, dict]:
        """Every journal record of the unit, by key (unreadable records count as intents of nothing)."""
        prefix = self.state_dir + "/"
        out = {}
        for rel in self.listing():
            if rel.startswith(prefix) and rel.endswith(".json") and not is_temporary(rel):
                key = rel[len(prefix):-len(".json")]
                try:
                    out[key] = check_paths(self.read_json(rel), self.path(rel)) or {}
                except DataError:
                    out[key] = {}
        return out

    def journal_record(self, key: str) -> dict | None:
        try:
            return check_paths(self.read_json(self._state_rel(key)), self.path(self._state_rel(key)))
        except DataError:
            return None

    def finished(self, key: str, run: str, listing: dict[str, int] | None = None) -> dict | None:
        """The done record of ``key`` for run ``run`` when every file it lists is present with its size.

        With a ``listing`` a key without a record file costs no request (a first run on an object
        store would otherwise ask once per partition)."""
        if listing is not None and self._state_rel(key) not in listing:
            return None
        try:
            rec = check_paths(self.read_json(self._state_rel(key)), self.path(self._state_rel(key)))
        except DataError:
            return None
        if not rec or rec.get("status") != "done" or rec.get("run") != run:
            return None
        listing = self.listing() if listing is None else listing
        for f in rec.get("files", []):
            if listing.get(f["path"]) != f["bytes"]:
                return None
        return rec

    # ----------------------------------------------------------------- ownership

    def manifest(self) -> dict | None:
        return check_paths(self.read_json(self.manifest_name), self.path(self.manifest_name))

    def owned(self, listing: dict[str, int] | None = None) -> set[str]:
        """Files this unit may overwrite or delete: those its manifest or journal names."""
        listing = self.listing() if listing is None else listing
        return _owned_by(self, listing)

    def remove(self, rel: str, owned: set[str] | None = None) -> None:
        """Delete ``rel``, which must be this unit's (listed by it) or a temporary."""
        if not is_temporary(rel) and rel not in (owned if owned is not None else self.owned()) \
                and rel not in (self.success_name, self.names["manifest"], self.names["legacy_manifest"]):
            raise RuntimeError(f"{self.path(rel)}: not written by this output; refusing to delete it")
        if not self.remote:
            self._refuse_link(rel)
            with contextlib.suppress(FileNotFoundError):
                os.remove(self.path(rel))
        else:
            fs = self.fs()[0]
            with contextlib.suppress(FileNotFoundError):
                fs.rm_file(self.path(rel))

    def discard(self) -> None:
        """Delete everything this unit wrote (what its manifest and journal list, its temporaries, the
        manifest and ``_SUCCESS``), data first, then the folders left empty; nothing else. For a scratch
        output curate made and no longer needs (``curate reproduce``)."""
        listing = self.listing()
        owned = self.owned(listing)
        journal = {rel for rel in owned if rel.startswith(self.state_dir + "/")}
        for rel in sorted(rel for rel in listing if (rel in owned or is_temporary(rel)) and rel not in journal):
            self.remove(rel, owned)
        for rel in (self.success_name, self.names["manifest"], self.names["legacy_manifest"], *sorted(journal)):
            if rel in listing:
                self.remove(rel, owned)
        if not self.remote:  # the folders this left empty, deepest first; a non-empty one stays
            for top in (self.url, self.side_url):
                for root, _dirs, _files in sorted(os.walk(top), key=lambda t: -len(t[0])):
                    with contextlib.suppress(OSError):
                        os.rmdir(root)

    def begin(self, owner: dict) -> None:
        """Start (or resume) writing the unit: the sentinel goes first, then a manifest that names
        the owner and keeps the previous run's file list (those files are still ours to replace)."""
        if not self.remote:
            os.makedirs(self.url, exist_ok=True)
        self.remove(self.success_name)
        previous = self.manifest() or {}
        kept = _manifest_paths(previous)
        legacy = self.manifest_name == self.names["legacy_manifest"]
        self.write_json(self.names["manifest"], {
            "curate_output": 1, "owner": owner, "status": "running", "unit": self.unit,
            "previous_outputs": sorted(kept),
        })
        if legacy:  # a rerun of an output an earlier curate wrote: from now on under the new name
            self.remove(self.names["legacy_manifest"])
        if not self.remote:  # a killed run's half-written files (an object store has none)
            self._remove_temporaries(self.listing())
        self.move_side()  # after the temporaries: the side folders it empties inside go too

    def move_side(self) -> None:
        """Move the side files an earlier curate wrote inside the directory to the side folder, under the
        lock, so that readers of the directory see documents only from now on. Only this unit's: another
        unit's files (tokenize prefixes share ``_rejects/``) move when that unit runs; until then
        :meth:`_base` finds each file where it is."""
        inside = [rel for rel in self._walk(self.url) if is_side(rel) and not is_temporary(rel)]
        owned = self.owned() if inside else set()
        for rel in sorted(rel for rel in inside if rel in owned):
            self._refuse_link(rel)
            source, target = self._join(self.url, rel), self._join(self.side_url, rel)
            if not self.remote:
                self._refuse_link_in(self.side_url, rel)
                os.makedirs(os.path.dirname(target), exist_ok=True)
                os.replace(source, target)
            else:
                self.fs()[0].mv(source, target)
        if not self.remote and os.path.isdir(self.url):  # the side folders left empty inside the directory
            with os.scandir(self.url) as entries:
                tops = [e.path for e in entries if is_side(e.name + "/") and e.is_dir(follow_symlinks=False)]
            for top in tops:
                for root, _dirs, _files in sorted(os.walk(top), key=lambda t: -len(t[0])):
                    with contextlib.suppress(OSError):
                        os.rmdir(root)

    def _remove_temporaries(self, listing: dict[str, int], owned: set[str] | None = None) -> None:
        """Remove the temporaries of this unit's files; the caller holds the unit's lock, so none is
        being written."""
        temporaries = sorted(rel for rel in listing if is_temporary(rel))
        if not temporaries:
            return  # the common case: no need to read the journal
        owned = self.owned(listing) if owned is None else owned
        for rel in temporaries:
            if _belongs_to(self, rel, owned):
                self.remove(rel, owned)

    def finish(self, manifest: dict, records: list[dict], run: str | None = None) -> dict:
        """Delete what the unit owned but this run did not write, then write the manifest (listing
        ``records``), prune the journal to this run's records, and write ``_SUCCESS`` last."""
        listing = self.listing()
        owned = self.owned(listing)
        wanted = {r["path"] for r in records}
        for rel in sorted(owned - wanted):
            if not _STATE_RE.match(rel) and not _CONTROL_RE.match(rel):
                self.remove(rel, owned)
        self._remove_temporaries(listing, owned)
        running = self.manifest() or {}
        from curate.stages.versions import output_versions

        manifest = {"owner": running.get("owner"), **manifest, "curate_output": 1, "status": "complete",
                    "unit": self.unit, "versions": output_versions(),
                    "outputs": sorted(records, key=lambda r: r["path"])}
        self.write_json(self.manifest_name, manifest)
        # the journal of this run stays (a rerun after a lost _SUCCESS resumes from it, and redoes
        # its pending tasks); records of other runs and unfinished intents go
        run = run or manifest.get("fingerprint")
        for key, rec in self.journal().items():
            if rec.get("status") not in ("done", "pending") or rec.get("run") != run:
                self.remove(self._state_rel(key), owned)
        self.write_bytes(self.success_name, b"")
        return manifest

    def complete(self) -> bool:
        return self.exists(self.success_name)

    def missing(self, manifest: dict | None) -> list[str]:
        """The files ``manifest`` lists that are not there (deleted by hand since): such an output is
        not up to date, whatever its fingerprint says."""
        listed = [r["path"] for r in (manifest or {}).get("outputs", []) if isinstance(r, dict) and "path" in r]
        if not listed:
            return []
        there = self.listing()  # one walk (one request on an object store), not one per file
        return sorted(p for p in listed if p not in there)


def _links_below(url: str) -> list[str]:
    found = []
    if not os.path.isdir(url):
        return found
    folders = [""]
    while folders:
        rel_root = folders.pop()
        with os.scandir(os.path.join(url, *rel_root.split("/"))) as entries:
            for e in entries:
                rel = f"{rel_root}/{e.name}" if rel_root else e.name
                if e.is_symlink():
                    found.append(rel)
                elif e.is_dir():
                    folders.append(rel)
    return found


def _manifest_paths(manifest: dict) -> set[str]:
    paths = {r["path"] for r in manifest.get("outputs", []) if isinstance(r, dict) and "path" in r}
    paths |= set(manifest.get("previous_outputs", []))
    return paths


def _owned_by(out: Output, listing: dict[str, int]) -> set[str]:
    owned = _manifest_paths(out.manifest() or {})
    prefix = out.state_dir + "/"
    for rel in listing:
        if rel.startswith(prefix):
            owned.add(rel)
    prefixes = []
    for rec in out.journal().values():
        for p in rec.get("paths", []):
            if p.endswith("/"):
                prefixes.append(p)
            else:
                owned.add(p)
        owned |= {f["path"] for f in rec.get("files", []) if isinstance(f, dict) and "path" in f}
    if prefixes:  # a task that writes a whole folder (a dedup step) records the folder
        owned |= {rel for rel in listing if rel.startswith(tuple(prefixes))}
    return owned


def _belongs_to(out: Output, rel: str, owned: set[str]) -> bool:
    """A temporary is the unit's when the final name it stands for is (or will be) the unit's. Not the
    lock's (its heartbeat writes one now and then) nor another unit's manifest, written meanwhile."""
    folder, _, name = rel.rpartition("/")
    final = name[1:name.index(TMP_MARK)] if name.startswith(".") and TMP_MARK in name else name
    final_rel = f"{folder}/{final}" if folder else final
    return final_rel in owned or final_rel.startswith(out.state_dir + "/") \
        or final_rel in (out.names["manifest"], out.names["legacy_manifest"], out.success_name)


def _same_strings(df):
    """``df`` with pandas' default ``str`` columns (NaN for missing, what a frame built in this process
    has) as Dask's ``string[pyarrow]`` (NA for missing, what a frame from a cluster worker has): the
    same Arrow data either way, but a different dtype in the file's pandas metadata, so the same
    input gave other bytes in-process than on a cluster (``curate reproduce`` found "differences")."""
    import pandas as pd

    loose = [c for c, t in df.dtypes.items() if isinstance(t, pd.StringDtype) and t.na_value is not pd.NA]
    return df.astype({c: pd.StringDtype("pyarrow") for c in loose}) if loose else df
