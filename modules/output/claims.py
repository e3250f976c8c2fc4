"""Claims before any work: who owns an output (its manifest's owner), whether this run may write there, and that an output is not (inside) one of its inputs."""

from __future__ import annotations

import os

from curate.stages.errors import DataError
from curate.stages.output.lock import _LOCK_RE
from curate.stages.output.names import (
    _STATE_RE,
    JOB_FOLDERS,
    SIDE_SUFFIX,
    OwnershipError,
    is_remote,
    is_temporary,
    link_refusal,
    side_link_refusal,
    side_of,
    side_strays,
    units_in,
)
from curate.stages.output.unit import Output
from curate.stages.paths import glob_paths


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
    _check_side(out)
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
        control |= {other.names["manifest"], other.names["legacy_manifest"], other.success_name, other.names["lock"]}
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


def _check_side(out: Output) -> None:
    """The side folder is the output's too (see :mod:`curate.stages.output`): refuse it when it is a
    link, holds anything but side folders, or when the output is itself another output's side folder."""
    if out.url.endswith(SIDE_SUFFIX):
        main = Output(out.url[:-len(SIDE_SUFFIX)])
        if manifest_owner(_safe_manifest(main)) is not None:
            raise OwnershipError(f"--output {out.url}: the side folder of the curate output {main.url} "
                                 "(its rejects, duplicates, work and journal); choose another output directory")
    side = out.side_url
    if out.remote or not os.path.lexists(side):
        return
    if os.path.islink(side) or not os.path.isdir(side):
        raise OwnershipError(side_link_refusal(out.url, side))
    foreign = side_strays(out.url)
    if foreign:
        raise OwnershipError(f"--output {out.url}: {foreign[0]}: not a side file of curate's "
                             "(rejects, duplicates, work, journal); curate never overwrites or deletes files it did "
                             "not write: remove it or choose another output directory")


def _safe_manifest(out: Output) -> dict | None:
    try:
        return out.manifest()
    except DataError:
        return None


def _stage_dir_of_job(out: Output, name: str, owner: dict) -> bool:
    """``name`` is a stage folder of this job, or the side folder of one."""
    if name.endswith(SIDE_SUFFIX):
        name = name[:-len(SIDE_SUFFIX)]
    sub = Output(out.url.rstrip("/") + "/" + name)
    theirs = manifest_owner(sub.manifest())
    return bool(theirs) and theirs.get("job") == owner.get("job")


def _real(path: str) -> str:
    return os.path.realpath(os.path.abspath(path))


def _inside(child: str, parent: str) -> bool:
    return child == parent or child.startswith(parent.rstrip(os.sep) + os.sep)


def check_not_input(output: str, inputs, flag: str = "--output") -> None:
    """Refuse an output (or its side folder) that is an input, contains one, or lies inside an input directory."""
    if is_remote(output):
        out = output.rstrip("/")
        for spec in inputs:
            s = str(spec).rstrip("/")
            if is_remote(s) and (s == out or s.startswith(out + "/") or out.startswith(s + "/")):
                raise OwnershipError(f"{flag} {output}: overlaps the input {spec}; choose another directory")
        return
    _check_not_input(_real(output), inputs, output, flag)
    # the side folder is written (and erase rewrites it) like the output itself
    _check_not_input(side_of(_real(output)), inputs, output, flag)


def _check_not_input(out: str, inputs, output: str, flag: str) -> None:
    import glob as globlib

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
