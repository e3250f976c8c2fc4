"""Names inside an output: units and their control files, temporaries, links, and paths read from manifests and journals (which must stay inside their unit)."""

from __future__ import annotations

import os
import re

from curate.stages.errors import SettingsError

CHECKSUM = "xxh3_128"


TMP_MARK = ".curate-tmp-"


#: folders a job root holds besides its stage outputs: written by curate, owned by the job
JOB_FOLDERS = ("_reports",)


#: ``_reports/`` (Dask performance reports, the HTML report) is curate's in any output directory
_UNIT_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


_CONTROL_RE = re.compile(r"^(_?manifest(\.[^/]+)?\.json|_SUCCESS(\.[^/]+)?|_LOCK(\.[^/]+)?)$")


_STATE_RE = re.compile(r"^(_state(\.[^/]+)?|_reports)/")


#: the sibling folder of an output that holds its side outputs: ``OUT/03-filter.side/`` beside ``OUT/03-filter/``
SIDE_SUFFIX = ".side"


#: first folders of the paths that live in the side folder (``_state.<unit>`` too): every one may hold
#: Parquet that a reader of the stage folder would count as documents
SIDE_FOLDERS = ("_rejects", "_duplicates", "_work", "_state")


def is_side(rel: str) -> bool:
    """``rel`` (a path inside a unit, as manifests and journals write it) lives in the side folder."""
    first = rel.split("/", 1)[0]
    return first in SIDE_FOLDERS or first.startswith("_state.")


def side_of(url: str) -> str:
    """The side folder of the output ``url``: its sibling named after it."""
    return url.rstrip("/") + SIDE_SUFFIX


def side_strays(url: str) -> list[str]:
    """Paths of what the local side folder of the output ``url`` holds besides side folders (sorted)."""
    side = side_of(url)
    if is_remote(url) or not os.path.isdir(side) or os.path.islink(side):
        return []
    with os.scandir(side) as entries:
        return sorted(e.path for e in entries if not is_side(e.name + "/") and not is_temporary(e.name))


def side_glob(folder: str, name: str, pattern: str = "part-*") -> list[str]:
    """The files matching ``pattern`` in the side folder ``name`` (``_rejects``) of the local output
    ``folder``: beside it, or inside it where an earlier curate wrote them; sorted by name."""
    import glob

    found = glob.glob(os.path.join(side_of(folder.rstrip(os.sep)), name, pattern))
    found += glob.glob(os.path.join(folder, name, pattern))
    return sorted(found, key=os.path.basename)


class OwnershipError(SettingsError):
    """A refusal to touch something curate does not own (exit 2, before any work)."""


class LockedError(SettingsError):
    """Another live run holds the output."""


def is_remote(url: str) -> bool:
    return "://" in str(url) and not str(url).startswith("file://")


def is_temporary(rel: str) -> bool:
    return TMP_MARK in rel.rsplit("/", 1)[-1]


def refuse_link(root: str, path: str, how: str = "") -> None:
    """Refuse (OwnershipError) to write, rename, delete (or, ``how="reads"``, read) the local ``path``
    when a folder or file between the output ``root`` (itself not checked) and it is a symbolic link:
    it may lead out of the output. A ``path`` outside ``root`` is the user's own choice and is not
    checked (paths from manifests never get here: :func:`check_rel`)."""
    if is_remote(root):
        return  # an object store has no links
    root = os.path.abspath(root)
    rel = os.path.relpath(os.path.abspath(path), root)
    if rel == os.curdir or rel == os.pardir or rel.startswith(os.pardir + os.sep):
        return
    current = root
    for part in rel.split(os.sep):
        current = os.path.join(current, part)
        if os.path.islink(current):
            raise OwnershipError(link_refusal(root, current, reads=how == "reads"))


def link_target(link: str) -> str:
    try:
        return os.readlink(link)
    except OSError:  # removed meanwhile: the link is still named
        return "?"


def side_link_refusal(url: str, side: str) -> str:
    return (f"{side}: a symbolic link (to {link_target(side)}) or a file where curate keeps the side files of "
            f"the output {url}; curate never writes through a link: remove it or choose another output directory")


def link_refusal(root: str, link: str, more: str = "", reads: bool = False) -> str:
    what = "reads, writes, renames or deletes" if reads else "writes, renames or deletes"
    return (f"{link}: a symbolic link (to {link_target(link)}) inside the output {root}{more}; curate never "
            f"{what} through a link (it may lead out of the output): remove the link or "
            "choose another output directory")


def check_rel(rel, where: str) -> str:
    """``rel`` when it names a file inside its output: relative, '/'-separated, no empty, ``.`` or
    ``..`` part. Paths in manifests and journals are data a hostile or careless hand may have written;
    joined unchecked, ``../victim/data.parquet`` or ``/etc/x`` would lead out of the unit. (A trailing
    '/' names a folder.)"""
    name = rel[:-1] if isinstance(rel, str) and rel.endswith("/") else rel
    if (not isinstance(name, str) or not name or name.startswith("/") or "\\" in name or "\x00" in name
            or "://" in name or any(p in ("", ".", "..") for p in name.split("/"))):
        raise OwnershipError(f"{where}: path {rel!r} leads out of its output (absolute, '..' or empty "
                             "parts); curate never reads, writes or deletes through such a path")
    return rel


#: lists of file records in manifests and journal records, and the keys of theirs that name files
_RECORD_LISTS = ("outputs", "files", "pairs")


_RECORD_KEYS = ("path", "docs", "pair", "name")


def check_paths(record, where: str):
    """``record`` (a manifest or a journal record) when every file it names stays inside its unit
    (:func:`check_rel`): file records' ``path``, ``docs``, ``pair`` and tokenize's ``name``, an
    intent's ``paths``, a job's stage ``output`` folders; OwnershipError naming the first that does not."""
    if not isinstance(record, dict):
        return record
    lists = [record.get(k) for k in _RECORD_LISTS]
    stats = record.get("stats")
    if isinstance(stats, dict):
        lists += [stats.get(k) for k in _RECORD_LISTS]
    for items in lists:
        for item in items if isinstance(items, list) else ():
            if isinstance(item, dict):
                for k in _RECORD_KEYS:
                    if k in item and item[k] is not None:
                        check_rel(item[k], where)
    for rel in record.get("paths") or () if isinstance(record.get("paths"), list) else ():
        check_rel(rel, where)
    for stage in record.get("stages") or () if isinstance(record.get("stages"), list) else ():
        if isinstance(stage, dict) and "output" in stage:  # a job root's stage folders
            check_rel(stage["output"], where)
    return record


def is_control(rel: str) -> bool:
    """Files that say what a directory is rather than hold data: manifests, sentinels, locks, journals."""
    return bool(_CONTROL_RE.match(rel) or _STATE_RE.match(rel))


def unit_files(unit: str) -> dict[str, str]:
    """The control names of a unit: manifest, success, state folder, lock."""
    if unit and not _UNIT_RE.match(unit):
        raise SettingsError(f"output unit must be letters, digits, '.', '-' or '_'; got {unit!r}")
    suffix = f".{unit}" if unit else ""
    return {
        # "_": Arrow, pandas, DuckDB, polars and Spark skip it when they read the folder as a dataset
        "manifest": f"_manifest{suffix}.json",
        "legacy_manifest": f"manifest{suffix}.json",  # what curate wrote before: read, kept when rewritten
        "success": f"_SUCCESS{suffix}",
        "state": f"_state{suffix}",
        "lock": f"_LOCK{suffix}",
    }


def units_in(listing) -> list[str]:
    """Units that have a manifest or a journal in a directory listing (relative paths)."""
    found = set()
    for rel in listing:
        m = re.match(r"^_?manifest(?:\.([^/]+))?\.json$", rel) or re.match(r"^_state(?:\.([^/]+))?/", rel)
        if m:
            found.add(m.group(1) or "")
    return sorted(found)
