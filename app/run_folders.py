"""The folders of a run as the report reads them: a job root's stage folders, one stage folder, their
manifests (paths in them checked: they are data), and how a filter's thresholds read. Shared by
``curate report`` and the HTML page, so neither imports the other."""

from __future__ import annotations

import glob
import json
import os
import re

from curate.stages.errors import DataError, SettingsError
from curate.stages.output import check_paths


def manifest_file(folder: str) -> str:
    """A stage folder's manifest: ``_manifest.json``, or ``manifest.json`` as an earlier curate wrote it."""
    new = os.path.join(folder, "_manifest.json")
    old = os.path.join(folder, "manifest.json")
    return old if not os.path.isfile(new) and os.path.isfile(old) else new


def stage_dirs(folder: str) -> list[str]:
    manifest = manifest_file(folder)
    if os.path.isfile(manifest) and (load_manifest(folder).get("owner") or {}).get("kind") != "job":
        return [folder]  # one stage's output (a job's root has a manifest of its own: its stages follow)
    if not os.path.isdir(folder):
        raise SettingsError(f"report: {folder}: no such folder")
    subs = sorted(d for d in glob.glob(os.path.join(folder, "*"))
                  if re.match(r"\d\d-", os.path.basename(d)) and os.path.isfile(manifest_file(d)))
    if not subs:
        raise SettingsError(f"report: {folder}: no _manifest.json, and no NN-stage folders with one")
    return subs


def load_manifest(folder: str) -> dict:
    path = manifest_file(folder)
    try:
        with open(path, encoding="utf-8") as f:
            manifest = json.load(f)
    except ValueError as e:
        raise DataError(f"{path}: not valid JSON: {e}") from None
    return check_paths(manifest, path)


def threshold_text(f: dict) -> str:
    parts = []
    if f.get("min") is not None:
        parts.append(f"{'>' if f.get('strict_min') else '>='} {f['min']:g}")
    if f.get("max") is not None:
        parts.append(f"{'<' if f.get('strict_max') else '<='} {f['max']:g}")
    return " and ".join(parts) or "-"
