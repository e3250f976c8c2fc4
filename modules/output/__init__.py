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

import logging
import os

from curate.stages.errors import DataError
from curate.stages.output.files import (
    RAW_SIDECAR as RAW_SIDECAR,
    _Abandon as _Abandon,
    _HashingWriter as _HashingWriter,
    atomic_write as atomic_write,
    file_checksum as file_checksum,
    remove_raw as remove_raw,
)
from curate.stages.output.lock import (
    _LOCK_RE as _LOCK_RE,
    DEFAULT_LOCK_TIMEOUT as DEFAULT_LOCK_TIMEOUT,
    HEARTBEAT as HEARTBEAT,
    Lock as Lock,
    lock_timeout as lock_timeout,
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
from curate.stages.output.unit import (
    Output as Output,
)
from curate.stages.output.verify import (
    unlisted as unlisted,
    verify_unit as verify_unit,
)
from curate.stages.paths import glob_paths

log = logging.getLogger(__name__)


# --------------------------------------------------------------------------- writing with a checksum


# --------------------------------------------------------------------------- files outside a unit


# --------------------------------------------------------------------------- the output


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


# --------------------------------------------------------------------------- verifying what a unit lists


