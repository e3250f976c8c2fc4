"""``curate reproduce OUT [--sample K]``: would the same run give the same bytes today?

For every stage output under OUT (a job root's stages in order, or one stage output), the stage is
run again from what its manifest recorded (stage, settings, input/output settings, inputs) into a
scratch folder, and the checksums of the files it writes are compared with the manifest's:

- a per-document stage (one whose ``run`` is :class:`~curate.stages.stage.MapStage`'s: normalize,
  clean, redact, select, ...) reruns ``K`` partitions drawn at random (``--seed``), each read, transformed
  and written exactly as the stage writes it (:func:`curate.stages.dataset.write_partition`): the
  part and its rejects are compared;
- any other stage (extraction, filter's scored sample, dedup, shuffle, tokenize, pack, shards) is rerun
  whole, and ``K`` of its files drawn at random are compared (all of them with ``--sample 0``).

A difference is reported with the stage folder, the file, both checksums and the library versions
that changed since the run (the manifests record them: :mod:`curate.stages.versions`); a settings file
whose content changed (a filter chain) and an input that is gone are reported as such. OUT is only
read; the scratch folder is removed unless ``--keep-scratch``.
"""

from __future__ import annotations

import dataclasses
import os
import random
from dataclasses import dataclass, field

from curate.stages.errors import SettingsError


@dataclass
class StageCheck:
    folder: str
    stage: str
    how: str = ""  # "partitions 3, 7 of 12" | "whole stage, 5 of 40 files"
    compared: int = 0
    differences: list[tuple[str, str, str]] = field(default_factory=list)  # (file, recorded, now)
    problems: list[str] = field(default_factory=list)
    versions: dict = field(default_factory=dict)
    erasures: list = field(default_factory=list)  # what curate erase recorded in the manifest since the run

    @property
    def ok(self) -> bool:
        return not self.differences and not self.problems


def stage_outputs(root: str) -> list[str]:
    """The stage outputs under ``root``: a job root's stages in order, else ``root`` itself."""
    from curate.stages.dataset import read_manifest

    manifest = read_manifest(root)
    if manifest is None:
        raise SettingsError(f"{root}: no _manifest.json (not a finished curate output)")
    if "stages" in manifest and "stage" not in manifest:
        return [os.path.join(root, s["output"]) for s in manifest["stages"]]
    return [root]


def _settings(cls, recorded: dict, where: str):
    from curate.stages.stage import settings_dict, settings_from_mapping

    init = {f.name for f in dataclasses.fields(cls) if f.init}
    settings = settings_from_mapping(cls, {k: v for k, v in recorded.items() if k in init}, where)
    now = settings_dict(settings)
    changed = sorted(k for k in recorded if k not in init and now.get(k) != recorded.get(k))
    return settings, changed


def stage_class(folder: str, allowed=()):
    """The class of the stage that wrote ``folder``: a registered one, or one the user named
    (:func:`curate.stages.registry.recorded`); None when the manifest names none."""
    from curate.stages import registry
    from curate.stages.dataset import read_manifest
    from curate.stages.output import Output

    name = (read_manifest(folder) or {}).get("stage")
    return registry.recorded(name, allowed, os.path.join(folder, Output.at(folder).manifest_name)) if name else None


def check_stage(folder: str, sample: int, seed: int, scratch: str, compute=None, allowed=()) -> StageCheck:
    from curate.stages.dataset import read_manifest
    from curate.stages.settings import IOSettings
    from curate.stages.versions import changed

    manifest = read_manifest(folder) or {}
    name = manifest.get("stage")
    check = StageCheck(os.path.basename(folder.rstrip("/")), name or "?")
    check.versions = changed(manifest.get("versions"))
    check.erasures = list(manifest.get("erasures") or [])
    if not name or "settings" not in manifest:
        check.problems.append("the manifest records no stage and settings (written before reproduce existed?)")
        return check
    cls = stage_class(folder, allowed)
    settings, settings_changed = _settings(cls.Settings, manifest["settings"], f"{folder}: settings")
    for key in settings_changed:
        check.problems.append(f"settings: {key} differs from the run's (a settings file changed since?)")
    io = _settings(IOSettings, manifest.get("io") or {}, f"{folder}: io")[0]
    inputs = tuple(manifest.get("input") or ())
    gone = [i for i in inputs if "://" not in i and not os.path.exists(i) and not _globbed(i)]
    if gone:
        check.problems.append(f"input gone: {', '.join(gone)}")
        return check
    recorded = {r["path"]: r for r in manifest.get("outputs", [])}
    rng = random.Random(seed)
    from curate.stages.stage import MapStage

    if issubclass(cls, MapStage) and cls.run is MapStage.run:
        _partitions(cls, settings, io, inputs, manifest, recorded, sample, rng, scratch, check)
    else:
        _whole(cls, settings, io, inputs, recorded, sample, rng, scratch, check, compute)
    return check


def _globbed(spec: str) -> bool:
    from curate.stages.paths import glob_paths

    return bool(glob_paths(spec))


def _partitions(cls, settings, io, inputs, manifest, recorded, sample, rng, scratch, check) -> None:
    from curate.stages import dataset
    from curate.stages.output import Output

    ddf = dataset.read_dataset(inputs, io, rejects_dir=scratch)
    parts = cls().apply(ddf, settings).to_delayed()
    n = len(parts)
    chosen = sorted(rng.sample(range(n), min(sample, n))) if sample else list(range(n))
    check.how = f"partitions {', '.join(map(str, chosen))} of {n}"
    out = Output.at(scratch)
    for i in chosen:
        stats = dataset.write_partition(parts[i].compute(), i, out, io.format, cls.reject_columns,
                                        manifest.get("fingerprint", ""))
        for rec in stats["outputs"]:
            _compare(rec, recorded.get(rec["path"]), check)


def _whole(cls, settings, io, inputs, recorded, sample, rng, scratch, check, compute) -> None:
    from curate.stages.dataset import read_manifest
    from curate.stages.output import Output
    from curate.stages.stage import StageContext

    name = cls.name
    unit = "" if getattr(settings, "prefix", "part") == "part" or name != "tokenize" else settings.prefix
    ctx = StageContext(input=inputs, output=scratch, io=io, fingerprint="reproduce", compute=compute,
                       force=True, owner={"kind": "stage", "stage": name, "job": None})
    cls().run(settings, ctx)
    now = {r["path"]: r for r in (Output.at(scratch, unit).manifest() or read_manifest(scratch) or {}).get("outputs", [])}
    # the data files: what the stage wrote for its readers (not its journal or manifest)
    paths = sorted(p for p in recorded if not p.startswith(("_state", "_reports")))
    chosen = sorted(rng.sample(paths, min(sample, len(paths)))) if sample else paths
    check.how = f"whole stage, {len(chosen)} of {len(paths)} files"
    for path in chosen:
        rec = now.get(path)
        if rec is None:
            check.compared += 1
            check.differences.append((path, recorded[path].get("xxh3_128", "?"), "(not written)"))
        else:
            _compare(rec, recorded[path], check)


def _compare(rec: dict, then: dict | None, check: StageCheck) -> None:
    check.compared += 1
    if then is None:
        check.differences.append((rec["path"], "(not in the manifest)", rec["xxh3_128"]))
    elif then.get("xxh3_128") != rec["xxh3_128"]:
        check.differences.append((rec["path"], then.get("xxh3_128", "?"), rec["xxh3_128"]))
