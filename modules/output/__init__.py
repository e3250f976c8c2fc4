"""Outputs curate owns: the one place that creates, writes, records, locks and deletes output files.

Every stage, the dedup steps, tokenize, merge, shuffle and the job runner write through an
:class:`Output`: a directory (local path or fsspec URL) and, inside it, an ownership *unit*. A unit
is the whole directory (``unit=""``, every stage) or a named part of it (tokenize ``--prefix web``),
so ``web_*`` and ``code_*`` pairs live side by side in one folder, each with its own files::

    unit ""                      unit "web"
    manifest.json                manifest.web.json     what the unit is (owner), what it wrote
    _SUCCESS                     _SUCCESS.web          written last: the unit is complete
    _state/<key>.json            _state.web/<key>.json resume journal (one record per task)
    _LOCK                        _LOCK.web             held by the run writing the unit

Writing. :meth:`Output.open` hands out a file object that computes the XXH3-128 checksum of what
passes through it (no second read). Locally it writes ``.<name>.curate-tmp-<pid>-<random>`` and
renames it to the final name when closed without error; on an object store it writes the final
key directly (a PUT of the whole object, multipart for large ones, visible only when complete).
Each closed file yields a record ``{"path", "bytes", "xxh3_128"}`` (plus ``"rows"`` for a
dataset part).

The journal. A task that writes files first records its *intent* (the names it is about to write)
under ``_state/``, then writes them, then records them as *done* with their records and whatever
the task returns. So every file curate ever put in a directory is named by the manifest or by a
journal record written before the file itself: that is what ownership means here. Resume logic
(finished partitions, finished dedup steps) reads the same journal: a done record whose run key
matches and whose files are present with their sizes is not redone. A *pending* record (a download
that failed for now) is never finished: the next run of the same key redoes it.

Deleting. :meth:`Output.remove` removes only files that a manifest or journal record of the unit
lists, and temporaries (the ``.curate-tmp-`` mark). Nothing else in curate deletes output files.
A run removes its unit's temporaries that a killed run left when it begins, and again when it
finishes.

Links. curate never writes, renames or deletes through a symbolic link inside an output: a linked
``_rejects/`` or ``_state/`` may lead to a folder of someone else's. A local output with a link
anywhere below it is refused before any work (:func:`check_claim`), and every write and delete
checks the folders between the output and its file again (:func:`refuse_link`). The output
directory itself may be a link (the user named it); what lies below it may not.

Claiming (:func:`check_claim`, before any work): an empty or missing directory is always fine. A
non-empty one must hold a curate manifest of the same owner (stage name, or job name for a job
root) for this unit, or other units of the same stage (tokenize prefixes); every file in it must be
owned by some unit. Anything else is refused with one line naming a foreign file.

Locking (:class:`Lock`): a run holds ``_LOCK`` for its whole life, created with ``O_EXCL`` and
naming host, pid, start time and a heartbeat refreshed every ``HEARTBEAT`` seconds (``flock`` alone
is unreliable on NFS/Lustre). Another run on the same unit, on a directory above it or on one
below it fails at once, naming the holder. A lock whose holder is gone (same host: the pid is dead;
any host: no heartbeat for ``lock_timeout()`` seconds, default 120, ``CURATE_LOCK_TIMEOUT``
overrides) is taken over with a warning.
"""

from __future__ import annotations

import contextlib
import io
import json
import logging
import os
import re
import secrets
import socket
import threading
import time
from dataclasses import dataclass

from curate.stages.errors import DataError, SettingsError
from curate.stages.output.files import (
    RAW_SIDECAR as RAW_SIDECAR,
    _Abandon as _Abandon,
    _HashingWriter as _HashingWriter,
    atomic_write as atomic_write,
    file_checksum as file_checksum,
    remove_raw as remove_raw,
)
from curate.stages.output.names import (
    _CONTROL_RE as _CONTROL_RE,
    _STATE_RE as _STATE_RE,
    CHECKSUM as CHECKSUM,
    JOB_FOLDERS as JOB_FOLDERS,
    TMP_MARK as TMP_MARK,
    LockedError as LockedError,
    OwnershipError as OwnershipError,
    check_paths as check_paths,
    check_rel as check_rel,
    is_control as is_control,
    is_remote as is_remote,
    is_temporary as is_temporary,
    link_refusal as link_refusal,
    link_target as link_target,
    refuse_link as refuse_link,
    unit_files as unit_files,
    units_in as units_in,
)
from curate.stages.paths import glob_paths

log = logging.getLogger(__name__)

HEARTBEAT = 15.0
DEFAULT_LOCK_TIMEOUT = 120.0
#: the locks :meth:`Lock._check_others` looks at: a unit's, or one in a folder of it (a job's stage)
_LOCK_RE = re.compile(r"^([^/]+/)?_LOCK(\.[^/]+)?$")


def lock_timeout() -> float:
    value = os.environ.get("CURATE_LOCK_TIMEOUT")
    try:
        return float(value) if value else DEFAULT_LOCK_TIMEOUT
    except ValueError:
        raise SettingsError(f"CURATE_LOCK_TIMEOUT must be a number of seconds; got {value!r}") from None


# --------------------------------------------------------------------------- writing with a checksum


# --------------------------------------------------------------------------- files outside a unit


# --------------------------------------------------------------------------- the output


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
        return self.names["manifest"]

    @property
    def success_name(self) -> str:
        return self.names["success"]

    @property
    def state_dir(self) -> str:
        return self.names["state"]

    def fs(self):
        """(fsspec filesystem, root path inside it)."""
        import fsspec

        fs, root = fsspec.core.url_to_fs(self.url)
        return fs, root.rstrip("/") or "/"

    def path(self, rel: str) -> str:
        if rel:
            check_rel(rel, self.url)
        if not self.remote:
            return os.path.join(self.url, *rel.split("/"))
        return self.fs()[1] + "/" + rel

    def url_of(self, rel: str) -> str:
        """``rel`` as a path or URL that any process (pandas, pyarrow, fsspec) can open."""
        return self.path(rel) if not self.remote else f"{self.url}/{rel}"

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
        """Every file below the directory (relative path with '/' -> size), whatever unit owns it."""
        if not self.remote:
            out = {}
            if not os.path.isdir(self.url):
                return out
            for root, _dirs, files in os.walk(self.url):
                rel_root = os.path.relpath(root, self.url)
                for f in files:
                    rel = f if rel_root == "." else f"{rel_root}/{f}".replace(os.sep, "/")
                    try:
                        out[rel] = os.lstat(os.path.join(root, f)).st_size
                    except FileNotFoundError:  # removed while we looked (a temporary being renamed)
                        continue
            return out
        fs, root = self.fs()
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
        found = []
        if self.remote or not os.path.isdir(self.url):
            return found
        folders = [""]
        while folders:
            rel_root = folders.pop()
            with os.scandir(os.path.join(self.url, *rel_root.split("/"))) as entries:
                for e in entries:
                    rel = f"{rel_root}/{e.name}" if rel_root else e.name
                    if e.is_symlink():
                        found.append(rel)
                    elif e.is_dir():
                        folders.append(rel)
        return sorted(found)

    def _refuse_link(self, rel: str, how: str = "") -> None:
        if not self.remote:
            refuse_link(self.url, self.path(rel), how)

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

                pq.write_table(pa.Table.from_pandas(df, preserve_index=False), f)
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
                and rel not in (self.success_name, self.manifest_name):
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
        for rel in (self.success_name, self.manifest_name, *sorted(journal)):
            if rel in listing:
                self.remove(rel, owned)
        if not self.remote:  # the folders this left empty, deepest first; a non-empty one stays
            for root, _dirs, _files in sorted(os.walk(self.url), key=lambda t: -len(t[0])):
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
        self.write_json(self.manifest_name, {
            "curate_output": 1, "owner": owner, "status": "running", "unit": self.unit,
            "previous_outputs": sorted(kept),
        })
        if not self.remote:  # a killed run's half-written files (an object store has none)
            self._remove_temporaries(self.listing())

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
        or final_rel in (out.manifest_name, out.success_name)


# --------------------------------------------------------------------------- claims


def describe_owner(owner: dict | None) -> str:
    if not owner:
        return "nobody (not a curate output)"
    if owner.get("kind") == "job":
        return f"job {owner.get('job')!r}"
    return f"stage {owner.get('stage')!r}" + (f" of job {owner['job']!r}" if owner.get("job") else "")


def manifest_owner(manifest: dict | None) -> dict | None:
    """The owner a manifest names (manifests of older curate versions name only their stage)."""
    if not manifest:
        return None
    if isinstance(manifest.get("owner"), dict):
        return manifest["owner"]
    if "stage" in manifest:
        return {"kind": "stage", "stage": manifest["stage"]}
    return None


def same_owner(a: dict | None, b: dict | None) -> bool:
    if not a or not b or a.get("kind", "stage") != b.get("kind", "stage"):
        return False
    if a.get("kind") == "job":
        return a.get("job") == b.get("job")
    return a.get("stage") == b.get("stage")


def check_claim(out: Output, owner: dict) -> None:
    """Refuse (OwnershipError naming a file) to write ``out`` unless it is empty, missing, or ours,
    and refuse any symbolic link below it (see the module doc)."""
    links = out.links()
    if links:
        more = f" (and {len(links) - 1} more)" if len(links) > 1 else ""
        raise OwnershipError(link_refusal(out.url, out.path(links[0]), more))
    listing = out.listing()
    if not listing:
        return
    where = out.url
    others = {u: o for u, o in ((u, Output(out.url, u)) for u in units_in(listing))
              if manifest_owner(_safe_manifest(o)) is not None or any(r.startswith(o.state_dir + "/") for r in listing)}
    own = others.get(out.unit)
    if own is not None:
        theirs = manifest_owner(own.manifest())
        if theirs is not None and not same_owner(theirs, owner):
            raise OwnershipError(
                f"--output {where}: written by {describe_owner(theirs)}, not {describe_owner(owner)}; "
                "choose another output directory")
    for unit, other in others.items():
        if unit == out.unit:
            continue
        theirs = manifest_owner(other.manifest())
        if theirs is not None and (owner.get("kind") == "job" or theirs.get("stage") != owner.get("stage")):
            raise OwnershipError(
                f"--output {where}: holds the output of {describe_owner(theirs)} "
                f"({other.manifest_name}); choose another output directory")
    owned: set[str] = set()
    control: set[str] = set()
    for other in others.values():
        owned |= other.owned(listing)
        control |= {other.manifest_name, other.success_name, other.names["lock"]}
    foreign = []
    for rel in sorted(listing):
        if rel in owned or rel in control or is_temporary(rel) or _STATE_RE.match(rel):
            continue
        if _LOCK_RE.match(rel):
            continue  # a lock here or one folder down: the lock check says who holds it
        if owner.get("kind") == "job" and rel.split("/", 1)[0] in JOB_FOLDERS:
            continue
        if owner.get("kind") == "job" and "/" in rel and _stage_dir_of_job(out, rel.split("/", 1)[0], owner):
            continue  # a stage output of this job: its own claim checks it
        foreign.append(rel)
    if foreign:
        more = f" (and {len(foreign) - 1} more)" if len(foreign) > 1 else ""
        what = "not a curate output" if not others else "holds files curate did not write"
        raise OwnershipError(
            f"--output {where}: {what}: {out.path(foreign[0])}{more}; curate never overwrites or deletes "
            "files it did not write: choose an empty or new directory")


def _safe_manifest(out: Output) -> dict | None:
    try:
        return out.manifest()
    except DataError:
        return None


def _stage_dir_of_job(out: Output, name: str, owner: dict) -> bool:
    sub = Output(out.url.rstrip("/") + "/" + name)
    theirs = manifest_owner(sub.manifest())
    return bool(theirs) and theirs.get("job") == owner.get("job")


# --------------------------------------------------------------------------- overlap with inputs


def _real(path: str) -> str:
    return os.path.realpath(os.path.abspath(path))


def _inside(child: str, parent: str) -> bool:
    return child == parent or child.startswith(parent.rstrip(os.sep) + os.sep)


def check_not_input(output: str, inputs, flag: str = "--output") -> None:
    """Refuse an output that is an input, contains one, or lies inside an input directory."""
    import glob as globlib

    if is_remote(output):
        out = output.rstrip("/")
        for spec in inputs:
            s = str(spec).rstrip("/")
            if is_remote(s) and (s == out or s.startswith(out + "/") or out.startswith(s + "/")):
                raise OwnershipError(f"{flag} {output}: overlaps the input {spec}; choose another directory")
        return
    out = _real(output)
    for spec in map(str, inputs):
        if is_remote(spec):
            continue
        if globlib.has_magic(spec):
            # a glob names files, not a directory: the output may sit beside them, not above them
            files = glob_paths(spec)
            dirs = [p for p in files if os.path.isdir(p)]
        elif os.path.isdir(spec):
            files, dirs = [], [spec]
        else:
            files, dirs = [spec], []
        for d in dirs:
            d = _real(d)
            if _inside(out, d) or _inside(d, out):
                what = "is the input directory" if out == d else (
                    "lies inside the input directory" if _inside(out, d) else "contains the input directory")
                raise OwnershipError(f"{flag} {output}: {what} {spec}; choose a directory outside the inputs")
        for f in files:
            if _inside(_real(f), out):
                raise OwnershipError(f"{flag} {output}: contains the input {f}; choose a directory outside the inputs")


# --------------------------------------------------------------------------- the lock


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, someone else's
        return True
    return True


class Lock:
    """``_LOCK`` of a unit for the life of a run (see the module doc). Use as a context manager."""

    def __init__(self, out: Output, what: str = "curate"):
        self.out = out
        self.rel = out.names["lock"]
        self.what = what
        self.token = secrets.token_hex(8)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def _info(self) -> dict:
        return {"host": socket.gethostname(), "pid": os.getpid(), "token": self.token, "what": self.what,
                "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "heartbeat": time.time()}

    @staticmethod
    def stale(info: dict | None, age: float) -> str | None:
        """Why a lock is stale (its holder is gone), or None when it is alive."""
        if not info:
            return f"unreadable lock, {age:.0f}s old" if age > lock_timeout() else None
        if info.get("host") == socket.gethostname() and isinstance(info.get("pid"), int) \
                and not _pid_alive(info["pid"]):
            return f"pid {info['pid']} on {info['host']} is gone"
        if age > lock_timeout():
            return f"no heartbeat from {info.get('host')} pid {info.get('pid')} for {age:.0f}s"
        return None

    @staticmethod
    def holder(info: dict | None) -> str:
        if not info:
            return "an unknown run"
        return f"{info.get('what', 'curate')} (host {info.get('host')}, pid {info.get('pid')}, since {info.get('started')})"

    def _read(self, path: str) -> tuple[dict | None, float]:
        try:
            with open(path, encoding="utf-8") as f:
                text = f.read()
            age = time.time() - os.stat(path).st_mtime
        except FileNotFoundError:
            return None, 0.0
        try:
            info = json.loads(text)
        except ValueError:
            info = None
        if info and isinstance(info.get("heartbeat"), (int, float)):
            age = min(age, time.time() - info["heartbeat"])
        return info, age

    def _check_others(self) -> None:
        """Live locks on directories above this one, or on units/directories below it."""
        base = self.out.url
        paths = []
        parent = os.path.dirname(base)
        while parent and parent != os.path.dirname(parent):
            paths.extend(sorted(_glob_locks(parent, top_only=True)))
            parent = os.path.dirname(parent)
        # other units of this directory (tokenize prefixes) may be written at the same time
        paths.extend(p for p in sorted(_glob_locks(base, top_only=False)) if os.path.dirname(p) != base)
        for path in paths:
            info, age = self._read(path)
            if info is None and age == 0.0:
                continue
            if self.stale(info, age) is None:
                raise LockedError(f"--output {base}: {path} is held by {self.holder(info)}; "
                                  "wait for it to finish (one writer per output)")

    @property
    def path(self) -> str:
        return self.out.path(self.rel)

    def acquire(self) -> Lock:
        if self.out.remote:  # object stores have no O_EXCL; the lock is advisory there
            log.debug("%s: remote output, no lock file", self.out.url)
            return self
        os.makedirs(self.out.url, exist_ok=True)
        self._check_others()
        for _ in range(2):
            try:
                fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
            except FileExistsError:
                info, age = self._read(self.path)
                why = self.stale(info, age)
                if why is None:
                    raise LockedError(f"--output {self.out.url}: locked by {self.holder(info)} ({self.path}); "
                                      "wait for it to finish (one writer per output)") from None
                log.warning("%s: taking over a stale lock (%s)", self.path, why)
                with contextlib.suppress(FileNotFoundError):
                    os.remove(self.path)
                continue
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                json.dump(self._info(), f)
            break
        else:
            raise LockedError(f"--output {self.out.url}: could not take the lock {self.path}")
        info, _ = self._read(self.path)
        if not info or info.get("token") != self.token:  # lost a takeover race
            raise LockedError(f"--output {self.out.url}: locked by {self.holder(info)} ({self.path})")
        self._thread = threading.Thread(target=self._beat, name="curate-lock-heartbeat", daemon=True)
        self._thread.start()
        return self

    def _beat(self) -> None:
        while not self._stop.wait(HEARTBEAT):
            info, _ = self._read(self.path)
            if not info or info.get("token") != self.token:
                log.warning("%s: the lock was taken over by %s", self.path, self.holder(info))
                return
            tmp = self.path + f"{TMP_MARK}{os.getpid()}"
            with open(tmp, "w", encoding="utf-8") as f:
                json.dump({**info, "heartbeat": time.time()}, f)
            os.replace(tmp, self.path)

    def release(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None
            info, _ = self._read(self.path)
            if info and info.get("token") == self.token:
                with contextlib.suppress(FileNotFoundError):
                    os.remove(self.path)

    def __enter__(self) -> Lock:
        return self.acquire()

    def __exit__(self, *exc) -> None:
        self.release()


def _glob_locks(folder: str, top_only: bool) -> list[str]:
    """Lock files directly in ``folder`` and, unless ``top_only``, in its sub-directories (one level)."""
    found = []
    try:
        with os.scandir(folder) as entries:
            for e in entries:
                if e.is_file() and re.match(r"^_LOCK(\.[^/]+)?$", e.name):
                    found.append(e.path)
                elif not top_only and e.is_dir():
                    with contextlib.suppress(OSError), os.scandir(e.path) as sub:
                        found.extend(s.path for s in sub if s.is_file() and re.match(r"^_LOCK(\.[^/]+)?$", s.name))
    except (FileNotFoundError, NotADirectoryError):
        pass
    return found


# --------------------------------------------------------------------------- verifying what a unit lists


def verify_unit(out: Output, checksums: bool = False, listing: dict[str, int] | None = None) -> list[str]:
    """Problems of one unit against its manifest, one line each: ``FILE: CHECK: detail``.

    Every listed file present with its size (and, with ``checksums``, its XXH3-128 re-read); a data
    part's row count equal to the manifest's; the unit complete (manifest status, ``_SUCCESS``); for
    a dataset, the parts' rows adding up to the manifest's ``counts.out`` and the rejects' rows to
    the dropped documents.
    """
    listing = out.listing() if listing is None else listing
    problems = []
    try:
        manifest = out.manifest()
    except DataError as e:
        return [str(e)]
    if manifest is None:
        return [f"{out.path(out.manifest_name)}: missing manifest: not a curate output"]
    if out.success_name not in listing:
        problems.append(f"{out.path(out.success_name)}: missing {out.success_name}: the run did not finish")
    if manifest.get("curate_output") and manifest.get("status") != "complete":
        problems.append(f"{out.path(out.manifest_name)}: status: {manifest.get('status')!r}, not complete")
    records = manifest.get("outputs")
    if records is None and manifest.get("status") == "running":  # begin() wrote it; the run never finished
        return [f"{out.path(out.manifest_name)}: status: 'running': the run did not finish (killed, or still "
                "running); run it again to finish it"]
    if records is None:
        return problems + [f"{out.path(out.manifest_name)}: outputs: the manifest lists no files (written by an "
                           "older curate?); rerun the stage"]
    part_rows, reject_rows = 0, 0
    links = set(out.links())
    for r in records:
        rel = r["path"]
        if rel in links or any(rel.startswith(link + "/") for link in links):
            problems.append(f"{out.path(rel)}: a symbolic link (or below one): curate never reads through a link")
            continue
        if rel not in listing:
            problems.append(f"{out.path(rel)}: missing: listed in {out.manifest_name}")
            continue
        if listing[rel] != r["bytes"]:
            problems.append(f"{out.path(rel)}: size: {listing[rel]} bytes, {out.manifest_name} says {r['bytes']}")
            continue
        if checksums:
            with out.open_read(rel) as f:
                _, digest = file_checksum(f)
            if digest != r.get(CHECKSUM):
                problems.append(f"{out.path(rel)}: checksum: XXH3-128 {digest} differs from {out.manifest_name}")
                continue
        if "rows" in r:
            try:
                rows = _count_rows(out, rel)
            except Exception as e:  # a damaged part: the one line says so
                problems.append(f"{out.path(rel)}: unreadable: {type(e).__name__}: {e}")
                continue
            if rows != r["rows"]:
                problems.append(f"{out.path(rel)}: rows: {rows}, {out.manifest_name} says {r['rows']}")
            if "/" not in rel:
                part_rows += r["rows"]
            elif rel.startswith("_rejects/"):
                reject_rows += r["rows"]
    counts = manifest.get("counts") or {}
    if manifest.get("schema") is not None and "out" in counts and not problems:
        if part_rows != counts["out"]:
            problems.append(f"{out.path(out.manifest_name)}: counts: the parts hold {part_rows} rows, "
                            f"counts.out says {counts['out']}")
        dropped = sum((counts.get("dropped") or {}).values())
        if reject_rows != dropped:
            problems.append(f"{out.path(out.manifest_name)}: counts: _rejects/ holds {reject_rows} rows, "
                            f"{dropped} documents were dropped")
    return problems


def _count_rows(out: Output, rel: str) -> int:
    if rel.endswith(".parquet"):
        import pyarrow.parquet as pq

        with out.open_read(rel) as f:
            return pq.ParquetFile(f).metadata.num_rows
    if rel.endswith((".jsonl", ".ndjson")):
        n, size = 0, 0
        with out.open_read(rel) as f:
            for chunk in iter(lambda: f.read(8 << 20), b""):
                n += chunk.count(b"\n")
                size += len(chunk)
        # pandas writes an empty frame as one newline: a part without documents, not one blank record
        return 0 if size == 1 and n == 1 else n
    raise ValueError("not a data part")


def unlisted(out: Output, listing: dict[str, int] | None = None) -> list[str]:
    """Files in the directory that no unit's manifest or journal names (strays, foreign files)."""
    listing = out.listing() if listing is None else listing
    owned: set[str] = set()
    for unit in units_in(listing):
        owned |= Output(out.url, unit).owned(listing)
    return [rel for rel in sorted(listing) if rel not in owned and not is_control(rel)]
