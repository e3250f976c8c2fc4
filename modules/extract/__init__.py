"""Extraction: raw files (WARC, Wikipedia XML dumps, arXiv source tarballs) into document datasets.

Every extractor follows one pattern: the stage lists its input files (:func:`raw_inputs`), builds a
Dask DataFrame with ``dd.from_map`` (one input file per partition) over a pure function
``extract_<kind>_file(raw, settings, on_error) -> pandas.DataFrame`` that streams the file record by
record, and hands it to :func:`curate.stages.dataset.write_dataset`. A bad record becomes a row with a
``_reason`` (and a ``_detail`` naming the file and position), so the writer puts it in ``_rejects/``
and counts it; the rest of the file is kept. A file that cannot be opened at all fails the run with
its name, or with ``--on-error skip`` becomes one rejected row (:func:`file_failure`).
"""

from __future__ import annotations

import glob as globlib
import os
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from curate.stages.errors import DataError, SettingsError
from curate.stages.paths import glob_files

if TYPE_CHECKING:
    import pandas as pd

_BLANK_RUNS = re.compile(r"\n{3,}")
#: what tidy_text changes: a line ending in a space or tab, or three newlines in a row (the regex
#: engine scans for its first literal, the newline, and looks around only there)
_UNTIDY = re.compile(r"\n(?:\n\n|(?<=[ \t]\n))")


def tidy_text(text: str) -> str:
    """Trailing spaces off every line, at most one blank line in a row, no blank ends (every extractor).

    Each step runs only when a cheap test says it has work to do: on resiliparse output the two
    regular expressions cost a third as much as the extraction itself. The test is one pass that
    looks only at the newlines (three substring tests scanned every character three times: 15 us
    of a 4,000-character page with one non-Latin-1 character, 2 us this way)."""
    if _UNTIDY.search(text) is None:
        return text.strip()
    if " \n" in text or "\t\n" in text:
        text = "\n".join([line.rstrip(" \t") for line in text.split("\n")])
    if "\n\n\n" in text:
        text = _BLANK_RUNS.sub("\n\n", text)
    return text.strip()


@dataclass(frozen=True)
class RawFile:
    """One input file of an extractor: its path and the name used in ids and messages."""

    path: str
    #: the path relative to the common folder of all inputs (stable whatever the working directory)
    name: str


def raw_inputs(specs, suffixes: tuple[str, ...], what: str) -> list[RawFile]:
    """Files named by paths, directories (searched recursively for ``suffixes``) or globs; sorted.

    A file named explicitly is taken whatever its suffix; directories and globs only yield files
    ending in one of ``suffixes`` (``.part`` files of unfinished downloads never match).
    """
    if isinstance(specs, (str, os.PathLike)):
        specs = [specs]
    files: list[str] = []
    for spec in map(str, specs):
        if os.path.isfile(spec):
            files.append(spec)
        elif os.path.isdir(spec):
            found = sorted(
                os.path.join(root, f)
                for root, dirs, names in os.walk(spec)
                for f in names
                if f.lower().endswith(suffixes) and not f.startswith(".")
            )
            if not found:
                raise SettingsError(f"input {spec}: no {what} files ({', '.join(suffixes)}) in this directory")
            files.extend(found)
        elif globlib.has_magic(spec):
            found = [p for p in glob_files(spec) if p.lower().endswith(suffixes)]
            if not found:
                raise SettingsError(f"input {spec}: no {what} file ({', '.join(suffixes)}) matches")
            files.extend(found)
        else:
            raise SettingsError(f"input {spec}: no such file or directory")
    if not files:
        raise SettingsError(f"no {what} input files given")
    # each real file once: two names of one file (a link, a loop) would read it twice
    real: dict[str, str] = {}
    for f in files:
        real.setdefault(os.path.realpath(f), os.path.abspath(f))
    unique = list(real.values())
    root = os.path.commonpath([os.path.dirname(f) for f in unique])
    return [RawFile(f, os.path.relpath(f, root)) for f in unique]


def frame(rows: list[dict], meta: pd.DataFrame) -> pd.DataFrame:
    """Rows (dicts) as a frame with exactly ``meta``'s columns and dtypes."""
    import pandas as pd  # here: the extraction sandbox's child imports this package and never needs pandas

    df = pd.DataFrame.from_records(rows, columns=list(meta.columns)) if rows else meta.iloc[:0].copy()
    return df.astype(meta.dtypes.to_dict())


def file_failure(raw: RawFile, on_error: str, reason: str, error, meta: pd.DataFrame) -> pd.DataFrame:
    """A whole file is unusable: fail the run naming it, or (``on_error="skip"``) one rejected row."""
    message = f"{raw.path}: {reason}: {error}"
    if on_error != "skip":
        raise DataError(f"{message} (use --on-error skip to reject this file and go on)")
    row = {c: None for c in meta.columns}
    row.update(id=raw.name, text="", _reason=reason, _detail=message)
    if "source" in meta.columns:
        row["source"] = raw.name
    return frame([row], meta)


def reject(row: dict, reason: str, detail: str) -> dict:
    """``row`` marked as rejected (a copy)."""
    return {**row, "_reason": reason, "_detail": detail}


def from_files(fn, files: list[RawFile], meta: pd.DataFrame, label: str, **kwargs):
    """One partition per input file, ``fn(raw, **kwargs)``, made in the task that writes it
    (:class:`curate.stages.dataset.Made`; small files several a task, by their bytes). ``label``: what
    the files are, for messages."""
    from curate.stages.dataset import made_from
    from curate.stages.dataset.groups import path_bytes

    sizes = path_bytes(f.path for f in files)
    return made_from(fn, files, meta, sizes=[sizes[f.path] for f in files], **kwargs)
