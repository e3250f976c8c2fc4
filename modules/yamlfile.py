"""Reading the YAML files a user hands curate (job files, filter chains): strictly, with one-line errors.

``yaml.safe_load`` accepts three things that make a settings file mean something other than what it
shows: a key given twice (the last one silently wins: ``stages:`` twice runs only the second list),
anchors and aliases (an "alias bomb" of a few hundred bytes expands to gigabytes), and any bytes at
all (a binary file fails deep inside the parser). Settings files need none of these, so each is
refused with the file and the line. A file is read whole, but never more than ``MAX_BYTES``.
"""

from __future__ import annotations

import os

from curate.stages.errors import SettingsError

#: a settings file is small; this bounds what a wrong path (a dataset, a device) can cost
MAX_BYTES = 16 << 20


def _loader():
    import yaml

    class StrictLoader(yaml.SafeLoader):
        def compose_node(self, parent, index):
            event = self.peek_event()
            if isinstance(event, yaml.AliasEvent) or getattr(event, "anchor", None) is not None:
                kind, sign = ("aliases", "*") if isinstance(event, yaml.AliasEvent) else ("anchors", "&")
                raise _Refused(f"line {event.start_mark.line + 1}: YAML {kind} are not allowed in settings "
                               f"({sign}{event.anchor})")
            return super().compose_node(parent, index)

        def construct_mapping(self, node, deep=False):
            seen = {}
            for key_node, _ in node.value:
                key = self.construct_object(key_node, deep=True)
                try:
                    first = seen.get(key)
                except TypeError:  # an unhashable key: the base class says so
                    break
                if first is not None:
                    raise _Refused(f"line {key_node.start_mark.line + 1}: duplicate key {_short(key)} "
                                   f"(first on line {first})")
                seen[key] = key_node.start_mark.line + 1
            return super().construct_mapping(node, deep)

    return StrictLoader


class _Refused(Exception):
    pass


def _short(value, limit: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + "..."


def load_yaml(path: str, what: str):
    """The parsed document of the settings file ``path``; SettingsError "``what`` ``path``: ..." otherwise."""
    import yaml

    where = f"{what} {path}"
    if os.path.isdir(path):
        raise SettingsError(f"{where}: is a directory, not a YAML file")
    try:
        with open(path, "rb") as f:
            data = f.read(MAX_BYTES + 1)
    except FileNotFoundError:
        raise SettingsError(f"{where}: no such file") from None
    except OSError as e:
        raise SettingsError(f"{where}: cannot be read ({e.strerror or type(e).__name__})") from None
    if len(data) > MAX_BYTES:
        raise SettingsError(f"{where}: larger than {MAX_BYTES >> 20} MiB; not a settings file")
    nul = data.find(b"\0")
    if nul >= 0:
        raise SettingsError(f"{where}: a binary file (NUL byte at offset {nul}), not YAML")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data[:e.start].count(b"\n") + 1
        raise SettingsError(f"{where} line {line}: not UTF-8 text (byte {e.start})") from None
    try:
        return yaml.load(text, Loader=_loader())  # noqa: S506 - a SafeLoader subclass
    except _Refused as e:
        raise SettingsError(f"{where} {e}") from None
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        line = f" line {mark.line + 1}" if mark else ""
        problem = getattr(e, "problem", None) or str(e).splitlines()[0]
        raise SettingsError(f"{where}{line}: not valid YAML ({problem})") from None
