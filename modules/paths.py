"""Local globs that end: ``**`` over a tree with symlink loops reads each real file once.

Python's ``glob.glob(pattern, recursive=True)`` follows directory symlinks without remembering where
it has been: one ``loop -> .`` makes it list every file dozens of times (until the path is too long),
two loops make it run for hours. Here a ``**`` pattern is matched by one walk that enters each real
directory (device, inode) at most once on any path from the root (a link back to an ancestor is a
loop: cut, with a warning naming it), and matches the
path below the pattern's fixed part segment by segment, with ``glob``'s rules: ``*``, ``?`` and
``[...]`` within a segment, ``**`` for any number of segments, and names starting with ``.`` matched
only by a segment that starts with ``.``. Patterns without ``**`` cannot loop and go to ``glob``.
"""

from __future__ import annotations

import fnmatch
import functools
import glob as globlib
import logging
import os
import re

log = logging.getLogger("curate")


def glob_paths(pattern: str) -> list[str]:
    """Paths (files and directories) matching a local ``pattern``, sorted; loop-safe for ``**``."""
    if "**" not in pattern:
        return sorted(globlib.glob(pattern))
    parts = pattern.split(os.sep)
    fixed = []
    for part in parts:
        if globlib.has_magic(part):
            break
        fixed.append(part)
    root = os.sep.join(fixed) or ("/" if pattern.startswith(os.sep) else ".")
    rest = tuple(parts[len(fixed):])
    if not os.path.isdir(root):
        return []
    return sorted(_walk(root, rest, pattern))


def glob_files(pattern: str) -> list[str]:
    """Regular files (or links to them) matching ``pattern``, sorted; loop-safe for ``**``."""
    return [p for p in glob_paths(pattern) if os.path.isfile(p)]


def _walk(root: str, rest: tuple[str, ...], pattern: str) -> list[str]:
    hits = [root] if _match(rest, ()) else []
    st = os.stat(root)
    # a loop is a folder that is its own ancestor: only those are cut, so a folder reached by two
    # different paths is listed under both, as glob lists it (readers keep each real file once)
    stack = [(root, (), frozenset({(st.st_dev, st.st_ino)}))]
    while stack:
        folder, rel, ancestors = stack.pop()
        try:
            entries = sorted(os.scandir(folder), key=lambda e: e.name)
        except OSError:  # unreadable or vanished: glob skips it too
            continue
        for entry in entries:
            segs = (*rel, entry.name)
            if _match(rest, segs):
                hits.append(os.path.join(folder, entry.name))
            try:
                if not entry.is_dir() or not _may_descend(rest, segs):  # is_dir follows links, as glob does
                    continue
                info = entry.stat()
            except OSError:
                continue
            key = (info.st_dev, info.st_ino)
            if key in ancestors:
                log.warning("input %s: %s is a symlink loop (-> %s); each file below it is read once",
                            pattern, entry.path, os.readlink(entry.path) if entry.is_symlink() else "itself")
                continue
            stack.append((entry.path, segs, ancestors | {key}))
    return hits


@functools.lru_cache(maxsize=1024)
def _segment(pat: str):
    return re.compile(fnmatch.translate(pat)).match


def _seg_ok(pat: str, name: str) -> bool:
    if name.startswith(".") and not pat.startswith("."):
        return False
    return bool(_segment(pat)(name))


def _match(pats: tuple[str, ...], segs: tuple[str, ...]) -> bool:
    if not pats:
        return not segs
    if pats[0] == "**":
        if _match(pats[1:], segs):
            return True
        return bool(segs) and not segs[0].startswith(".") and _match(pats, segs[1:])
    return bool(segs) and _seg_ok(pats[0], segs[0]) and _match(pats[1:], segs[1:])


def _may_descend(pats: tuple[str, ...], segs: tuple[str, ...]) -> bool:
    """Could a path below ``segs`` still match ``pats``? (``segs`` names a directory.)"""
    if not segs:
        return bool(pats)
    if not pats:
        return False
    if pats[0] == "**":
        return not segs[0].startswith(".") and _may_descend(pats, segs[1:]) or _may_descend(pats[1:], segs)
    return _seg_ok(pats[0], segs[0]) and _may_descend(pats[1:], segs[1:])


def folder_stamp(directory: str) -> str:
    """Names, sizes and modification times of a folder's files: a model folder whose files change gets
    another stamp, so a cache keyed by it (or a fingerprint holding it) sees the change."""
    parts = []
    for name in sorted(os.listdir(directory)):
        path = os.path.join(directory, name)
        if os.path.isfile(path):
            st = os.stat(path)
            parts.append(f"{name}:{st.st_size}:{st.st_mtime_ns}")
    return ";".join(parts)
