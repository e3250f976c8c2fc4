"""A job file read and checked completely, before any cluster starts: its stages, each with settings.

A job is a YAML mapping: ``stages`` (each a stage name, or a one-key mapping of the name to its
settings and an optional ``input`` of its own), the job's ``input``, ``output``, ``io`` settings and a
``name`` (else the file's stem) that owns the job's output root. Every setting is validated here, so
a mistake in stage 5 is refused before stage 1 runs.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from curate.stages import registry
from curate.stages.errors import SettingsError
from curate.stages.settings import shown
from curate.stages.stage import IOSettings, coerce, settings_from_mapping
from curate.stages.yamlfile import load_yaml


@dataclass(frozen=True)
class StageSpec:
    name: str
    settings: object
    input: tuple[str, ...] | None = None  # None: the previous stage's output


@dataclass(frozen=True)
class Job:
    stages: tuple[StageSpec, ...]
    input: tuple[str, ...] = ()
    output: str | None = None
    io: IOSettings = field(default_factory=IOSettings)
    source: str = "<job>"
    #: owns the job's output root (its 'name', else the job file's stem)
    name: str = "job"


def _as_inputs(value, where: str) -> tuple[str, ...]:
    if isinstance(value, str):
        return (value,)
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return tuple(value)
    raise SettingsError(f"{where} must be a path or a list of paths; got {shown(value)}")


def load_job(path: str, io_overrides: dict | None = None) -> Job:
    """Parse and validate a job YAML file completely (before any cluster starts)."""
    doc = load_yaml(path, "job file")
    if not isinstance(doc, dict):
        raise SettingsError(f"job file {path}: expected a mapping with 'stages'")
    unknown = sorted(set(doc) - {"input", "output", "io", "stages", "name", "description"})
    job_name = coerce(doc.get("name") or os.path.splitext(os.path.basename(path))[0], str, f"{path}: name")
    if unknown:
        raise SettingsError(f"job file {path}: unknown key {unknown[0]!r}")
    io_values = dict(doc.get("io") or {})
    io_values.update({k: v for k, v in (io_overrides or {}).items() if v is not None})
    io = settings_from_mapping(IOSettings, io_values, f"{path}: io")
    raw_stages = doc.get("stages")
    if not isinstance(raw_stages, list) or not raw_stages:
        raise SettingsError(f"job file {path}: 'stages' must be a non-empty list")
    stages = []
    for k, entry in enumerate(raw_stages, start=1):
        if isinstance(entry, str):
            name, values = entry, {}
        elif isinstance(entry, dict) and len(entry) == 1:
            name, values = next(iter(entry.items()))
            values = dict(values or {})
        else:
            raise SettingsError(f"job file {path}: stage {k} must be a name or a one-key mapping")
        where = f"{path}: stage {k} ({name})"
        stage_input = _as_inputs(values.pop("input"), f"{where}.input") if "input" in values else None
        try:
            cls = registry.get(name)
        except SettingsError as e:
            raise SettingsError(f"job file {path}: stage {k}: {e}") from None
        stages.append(StageSpec(name, settings_from_mapping(cls.Settings, values, where), stage_input))
    job_input = _as_inputs(doc["input"], f"{path}: input") if "input" in doc else ()
    if not job_input and stages[0].input is None and registry.get(stages[0].name).takes_input:
        raise SettingsError(f"job file {path}: no 'input' for the first stage")
    output = doc.get("output")
    if output is not None:
        output = coerce(output, str, f"{path}: output")
    return Job(tuple(stages), job_input, output, io, path, job_name)


def relative_path_hint(path: str) -> str:
    """Where a relative path of the job file at ``path`` is looked for, when the job runs from another
    folder and a path it names is missing here but present beside the job file: the rule is the one
    of the command line (relative to the folder curate runs in), and the error should say so."""
    import glob

    folder = os.path.dirname(os.path.abspath(path))
    here = os.getcwd()
    if folder == here:
        return ""
    try:
        doc = load_yaml(path, "job file")
    except Exception:  # the job file's own error is reported as it is
        return ""

    def strings(node):
        if isinstance(node, str):
            yield node
        elif isinstance(node, dict):
            for v in node.values():
                yield from strings(v)
        elif isinstance(node, list):
            for v in node:
                yield from strings(v)

    for s in strings(doc):
        if not s or "://" in s or os.path.isabs(s) or "\n" in s or len(s) > 4096:
            continue
        if not glob.glob(s) and glob.glob(os.path.join(folder, s)):
            return (f" (relative paths in a job file are taken from the folder curate runs in, {here}; "
                    f"{s!r} is beside the job file: write {os.path.join(folder, s)!r}, or run curate from {folder})")
    return ""
