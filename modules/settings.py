"""Settings: the I/O settings every stage shares, and turning YAML/CLI values into settings objects.

Settings are plain frozen dataclasses. The same class serves job YAML and CLI flags
(``settings_from_mapping`` for YAML, ``app/cli.py`` builds flags from the fields), so they cannot drift.
Validation lives in ``__post_init__`` and raises :class:`SettingsError` naming the bad value.
This module imports nothing of curate's but the errors, so every other module can use it.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import types
import typing
from dataclasses import dataclass, field
from typing import Any

from curate.stages.errors import SettingsError


@dataclass(frozen=True)
class IOSettings:
    """How a stage reads its input and writes its output; shared by every stage."""

    format: str = field(default="parquet", metadata={"help": "output format", "choices": ("parquet", "jsonl")})
    on_error: str = field(
        default="raise",
        metadata={"help": "bad input records: fail, or skip them into _rejects/", "choices": ("raise", "skip")},
    )
    allow_incomplete: bool = field(default=False, metadata={"help": "read a dataset directory without _SUCCESS"})
    blocksize: str = field(default="128MiB", metadata={"help": "target input bytes per partition"})
    text_field: str = field(default="text", metadata={"help": "input field that holds the document text"})
    id_field: str = field(default="id", metadata={"help": "input field that holds the document id"})
    #: ids must be strings: 1 and "1" would otherwise become the same id, a dict id its repr
    convert_ids: bool = field(default=False, metadata={
        "help": "accept integer ids, written as their decimal string (7 -> \"7\"); other non-string ids "
                "(floats, booleans, objects, lists) are rejected either way as bad_id"})
    max_document_bytes: str | int = field(default="auto", metadata={
        "help": "largest input document (JSONL line, single-row Parquet row group) a worker reads; "
                "auto: 1/8 of the worker's memory limit (none without a limit)"})

    def __post_init__(self):
        check_choice(self, "format")
        check_choice(self, "on_error")
        parse_bytes(self.blocksize, "blocksize")
        if self.max_document_bytes != "auto":
            parse_bytes(self.max_document_bytes, "max_document_bytes")


def check_choice(settings, name: str) -> None:
    choices = _field(settings, name).metadata.get("choices")
    value = getattr(settings, name)
    if choices and value not in choices:
        raise SettingsError(f"{name} must be one of {', '.join(map(str, choices))}; got {shown(value)}")


def check_range(settings, name: str, lo=None, hi=None) -> None:
    value = getattr(settings, name)
    if value is None:
        return
    if (lo is not None and value < lo) or (hi is not None and value > hi):
        bounds = f"{'' if lo is None else lo}..{'' if hi is None else hi}"
        raise SettingsError(f"{name} must be in {bounds}; got {shown(value)}")


def _field(settings, name):
    for f in dataclasses.fields(settings):
        if f.name == name:
            return f
    raise KeyError(name)


_UNITS = {"b": 1, "k": 1000, "kb": 1000, "kib": 1024, "m": 1000**2, "mb": 1000**2, "mib": 1024**2,
          "g": 1000**3, "gb": 1000**3, "gib": 1024**3, "t": 1000**4, "tb": 1000**4, "tib": 1024**4}


def parse_bytes(value, name: str) -> int:
    """'128MiB' -> 134217728; a number is taken as bytes."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    text = str(value).strip().lower().replace(" ", "")
    num = text.rstrip("abcdefghijklmnopqrstuvwxyz")
    unit = text[len(num):] or "b"
    try:
        n = int(float(num) * _UNITS[unit])
    except (ValueError, KeyError, OverflowError):  # NaN, a unit we do not know, inf and 1e400
        raise SettingsError(f"{name} must be a size such as 128MiB; got {shown(value)}") from None
    if n <= 0:
        raise SettingsError(f"{name} must be positive; got {shown(value)}")
    return n


def field_types(cls) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def shown(value, limit: int = 80) -> str:
    """``repr(value)``, cut to ``limit`` characters: an error line names a value, it does not print it whole."""
    text = repr(value)
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text):,} characters)"


def coerce(value, tp, where: str):
    """Check (and gently convert) one setting value from YAML or a CLI string to the declared type."""
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        inner = [a for a in args if a is not type(None)]
        errors = []
        for a in inner:
            try:
                return coerce(value, a, where)
            except SettingsError as e:
                errors.append(e)
        raise errors[0]
    if tp is Any:
        return value
    if tp is bool:
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.lower() in ("true", "yes", "on", "1", "false", "no", "off", "0"):
            return value.lower() in ("true", "yes", "on", "1")
        raise SettingsError(f"{where} must be true or false; got {shown(value)}")
    if tp is int:
        if isinstance(value, bool):
            raise SettingsError(f"{where} must be an integer; got {shown(value)}")
        if isinstance(value, int):
            return value
        if isinstance(value, str):
            try:
                return int(value)
            except ValueError:
                pass
        raise SettingsError(f"{where} must be an integer; got {shown(value)}")
    if tp is float:
        number = None
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            number = float(value)
        elif isinstance(value, str):
            try:
                number = float(value)
            except ValueError:
                pass
        if number is None:
            raise SettingsError(f"{where} must be a number; got {shown(value)}")
        if math.isnan(number):  # every comparison with NaN is false: a filter with min .nan drops everything
            raise SettingsError(f"{where} must be a number, not NaN")
        return number
    if tp is str:
        if isinstance(value, str):
            return value
        raise SettingsError(f"{where} must be a string; got {shown(value)}")
    if origin in (tuple, list):
        if isinstance(value, str):
            value = [v.strip() for v in value.split(",") if v.strip()]
        if not isinstance(value, (list, tuple)):
            raise SettingsError(f"{where} must be a list; got {shown(value)}")
        item = args[0] if args else Any
        return tuple(coerce(v, item, f"{where}[{i}]") for i, v in enumerate(value))
    if origin is dict or tp is dict:
        if not isinstance(value, dict):
            raise SettingsError(f"{where} must be a mapping; got {shown(value)}")
        kt, vt = args if args else (Any, Any)
        return {coerce(k, kt, where): coerce(v, vt, f"{where}.{k}") for k, v in value.items()}
    return value


def did_you_mean(word, choices) -> str:
    """``"; did you mean 'x'?"`` for the choice closest to a mistyped ``word``, or ``""``."""
    import difflib

    near = difflib.get_close_matches(str(word), sorted(choices), n=1)
    return f"; did you mean {near[0]!r}?" if near else ""


def settings_from_mapping(cls, mapping: dict | None, where: str):
    """Build a Settings instance from YAML/CLI values; unknown keys and wrong types are SettingsErrors."""
    mapping = dict(mapping or {})
    hints = field_types(cls)
    names = {f.name for f in dataclasses.fields(cls) if f.init}
    unknown = sorted(set(mapping) - names)
    if unknown:
        known = ", ".join(sorted(names)) or "none"
        raise SettingsError(f"{where}: unknown setting {unknown[0]!r} (known: {known})"
                            f"{did_you_mean(unknown[0], names)}")
    values = {}
    for f in dataclasses.fields(cls):
        if f.name not in mapping or not f.init:
            continue
        parse = f.metadata.get("parse")
        raw = mapping[f.name]
        if parse is not None and isinstance(raw, str):
            try:
                raw = parse(raw)
            except SettingsError as e:
                raise SettingsError(f"{where}.{f.name}: {e}") from None
        values[f.name] = coerce(raw, hints[f.name], f"{where}.{f.name}")
    try:
        return cls(**values)
    except SettingsError as e:
        raise SettingsError(f"{where}: {e}") from None


def settings_dict(settings) -> dict:
    """JSON-friendly dict of a settings object (tuples become lists)."""
    return json.loads(json.dumps(dataclasses.asdict(settings), default=str))


def settings_files(settings) -> list[str]:
    """Local files named by settings fields marked ``metadata={"input_file": True}`` (a URL list, say;
    a tuple of paths, such as dedup's saved indexes, names one each; a directory counts by its manifest).

    Their contents are input too: the runner counts them in the fingerprint, so editing one reruns
    the stage even though the setting's value (the path) did not change.
    """
    import os

    found = []
    for f in dataclasses.fields(settings):
        if not f.metadata.get("input_file"):
            continue
        value = getattr(settings, f.name)
        for path in (value if isinstance(value, tuple) else (value,)):
            if isinstance(path, str) and (os.path.isfile(path) or (isinstance(value, tuple) and os.path.isdir(path))):
                found.append(path)
    return found


#: stages whose rule changed in a way their settings do not show, and the rule's version: counted in
#: the fingerprint, so an output written under the earlier rule is never taken as up to date (fuzzy
#: dedup's smallest-id was the hub-first rule; sentence dedup cut unique spans; URL keys merged pages).
#: Also where a stage's intermediates changed layout, so a killed run's are never resumed from (fuzzy
#: 3: the band keys are written by the signatures step)
RULES = {"fuzzy_dedup": 3, "sentence_dedup": 2, "url_dedup": 2}


def fingerprint(stage: str, settings, input_identity, io: IOSettings) -> str:
    """Stable hash of what determines a stage's output: its name, settings, input and output format.

    Only the I/O options that change the output files are included (allow_incomplete does not).
    """
    payload = {
        "stage": stage,
        "settings": settings_dict(settings),
        "input": input_identity,
        "io": {k: getattr(io, k) for k in ("format", "on_error", "blocksize", "text_field", "id_field")},
    }
    if stage in RULES:
        payload["rule"] = RULES[stage]
    # newer options count only when set, so that existing outputs keep their fingerprints
    payload["io"].update({k: getattr(io, k) for k, default in (("convert_ids", False), ("max_document_bytes", "auto"))
                          if getattr(io, k) != default})
    blob = json.dumps(payload, sort_keys=True, default=str).encode()
    return hashlib.sha256(blob).hexdigest()[:16]
