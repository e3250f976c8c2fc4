"""The outputs under the erase's roots (units: stage outputs, token sets, packed rows, shards, job roots), their locks and the refusals before any work."""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass, field

from curate.stages.erase.request import Request
from curate.stages.errors import SettingsError
from curate.stages.output import (
    Lock,
    Output,
    OwnershipError,
    check_claim,
    is_remote,
    manifest_owner,
    units_in,
)

#: the order units are erased in: token sets after the datasets, their consumers after them, jobs last
RANK = {"dataset": 0, "tokens": 1, "pack": 2, "shards": 2, "job": 3}


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
    if os.path.isdir(out.side_url):  # a unit with only a journal keeps it there
        top |= {f"{e.name}/": 0 for e in os.scandir(out.side_url) if e.is_dir()}
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
            raise OwnershipError(f"{root}: not a curate output (no _manifest.json); erase changes only what curate wrote")
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
        if status != "erasing" and not u.out.complete() and not _ours(u, request):
            raise SettingsError(f"{u.out.path(u.out.success_name)}: missing: the run did not finish; erase changes "
                                "only finished outputs (finish or remove the run first)")
        if u.kind == "merge":
            raise SettingsError(f"{u.where}: a merged pair (curate merge): erase its token set, then merge again")
        if u.kind in ("tokens", "pack", "shards") and not u.manifest.get("docs_columns"):
            raise SettingsError(f"{u.where}: written before document sidecars: its tokens cannot be traced to "
                                "documents; tokenize (and pack, shards) again, then erase")
        if u.kind == "tokens" and status != "erasing":
            _check_token_manifest(u)
        if u.stage == "dedup_index" and (u.manifest.get("index") or {}).get("kind") == "fuzzy":
            raise SettingsError(f"{u.where}: a fuzzy dedup index (--save-index): erase cannot rewrite its "
                                "MinHash signatures and shingle sets; remove the index and save it again from the "
                                "erased outputs, or leave it out of the erase (docs/erase.md); nothing changed")
        for r in u.manifest.get("outputs") or []:
            if not _erasable(u.kind, r["path"]):
                raise SettingsError(f"{u.out.path(r['path'])}: erase cannot rewrite this file (not a document, "
                                    "token or row file it knows, e.g. a raw download); remove it or leave its "
                                    "output out of the erase; nothing changed")


def _check_token_manifest(u: Unit) -> None:
    """Erase carries a token set's manifest forward (dtype, vocabulary, counts) and rewrites its pairs
    by their indexes: one that disagrees with its files is refused, not propagated. Only before the
    erase changed the unit: after, its files are this erase's, not the manifest's."""
    from curate.stages.tokenize.verify import unit_problems

    problems = unit_problems(u.out.url, u.out.unit, u.manifest, u.out.manifest_name)
    if problems:
        more = f" (and {len(problems) - 1} more; curate verify lists them)" if len(problems) > 1 else ""
        raise SettingsError(f"{problems[0]}{more}: the manifest disagrees with its pairs; erase would carry it "
                            "forward; nothing changed")


def _ours(u: Unit, request: Request) -> bool:
    """The unit holds this request's plan in its journal: a killed erase of it got this far (its
    ``_SUCCESS`` may be gone while the manifest still says complete), so a rerun finishes it."""
    rec = u.out.journal_record(request.key)
    return bool(rec) and rec.get("run") == request.sha256


def _sets_locator(rel: str) -> str | None:
    from curate.stages.dedup import shingles

    return shingles.locator_of(rel)


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


def scan_files(u: Unit) -> list[str]:
    """The files of a unit whose rows name documents."""
    records = [r["path"] for r in u.manifest.get("outputs") or []]
    if u.manifest.get("status") == "erasing":  # a killed erase may have removed a _rejects/ file left empty
        records = [rel for rel in records if u.out.exists(rel)]
    if u.kind == "dataset":
        return [rel for rel in records if rel.endswith((".parquet", ".jsonl"))]
    if u.kind == "tokens":
        return [rel for rel in records if rel.endswith((".parquet", ".jsonl"))]
    if u.kind in ("pack", "shards"):
        return [rel for rel in records if rel.startswith("_docs/")]
    return []
