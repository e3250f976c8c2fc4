"""Which raw files are curate's: the ``<dest>.url`` sidecar beside every download.

The sidecar names the (redacted) URL whose bytes are at ``dest`` or in ``dest.part``; it is written
atomically before the first byte of a URL lands, so a file or ``.part`` is only skipped or resumed
when its sidecar names the same URL. A file without a sidecar is the user's: it is never
overwritten or deleted (:class:`ForeignFile`), and a download is deleted sidecar last, since the
sidecar is what makes the file curate's.
"""

from __future__ import annotations

import os
import threading

from curate.stages.errors import SettingsError
from curate.stages.output import RAW_SIDECAR, remove_raw
from curate.stages.secrets import redact_url

#: sidecar beside a download naming its URL: ``<dest>.url``
SOURCE_SUFFIX = RAW_SIDECAR


class ForeignFile(SettingsError):
    """A file where a download would go that curate did not download (no sidecar): left alone."""


def check_not_foreign(dest: str) -> None:
    """Refuse (:class:`ForeignFile`) when ``dest`` or its ``.part`` exists without a sidecar: curate
    did not download it, so it is the user's and stays untouched."""
    for path in (dest, dest + ".part"):
        if os.path.exists(path) and not os.path.exists(dest + SOURCE_SUFFIX):
            raise ForeignFile(f"{path}: not downloaded by curate (no {SOURCE_SUFFIX} sidecar); "
                              "curate never overwrites or deletes it: move it or choose another --raw-dir")


def foreign_files(folder: str, names) -> list[str]:
    """The files among ``names`` (and their ``.part``) in ``folder`` that curate did not download."""
    found = []
    for name in names:
        dest = os.path.join(folder, name)
        if os.path.exists(dest + SOURCE_SUFFIX):
            continue
        found += [p for p in (dest, dest + ".part") if os.path.lexists(p)]
    return found


def source_url(dest: str) -> str | None:
    """The (redacted) URL whose bytes are at ``dest`` (or ``dest.part``), from its sidecar; None if unknown."""
    try:
        with open(dest + SOURCE_SUFFIX, encoding="utf-8") as f:
            return f.read().strip() or None
    except (OSError, UnicodeDecodeError):
        return None


def _write_source(dest: str, url: str) -> None:
    tmp = f"{dest}{SOURCE_SUFFIX}.tmp-{os.getpid()}-{threading.get_ident()}"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(redact_url(url) + "\n")
    os.replace(tmp, dest + SOURCE_SUFFIX)


def remove_download(dest: str) -> None:
    """Delete a downloaded file and its sidecar (either may be missing)."""
    for path in (dest, dest + SOURCE_SUFFIX):  # the sidecar last: it is what makes the file curate's
        if os.path.exists(path):
            remove_raw(path, dest)
