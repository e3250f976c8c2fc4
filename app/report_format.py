"""How numbers read on the HTML page of a run: counts with thousands separators, bytes in kB/MB/GB,
proportions as percentages.

The values come from manifests, which a user or another program may have written: anything that is
not a number is shown as it is (HTML-escaped: the page puts these strings in its markup as they are),
rather than failing the whole report with "Unknown format code '%'" naming no field and no file.
"""

from __future__ import annotations

import html


def _number(x) -> bool:
    return isinstance(x, (int, float))


def _as_is(x) -> str:
    return html.escape(str(x))


def _fmt(n) -> str:
    if n is None:
        return "-"
    if not _number(n):
        return _as_is(n)
    if isinstance(n, float):
        return f"{n:,.1f}"
    return f"{n:,}"


def _rate(x) -> str:
    """A rate with enough digits to be read: 12,345, 56.7, 0.42 (not "0")."""
    if x is None:
        return "-"
    if not _number(x):
        return _as_is(x)
    if abs(x) >= 100:
        return f"{x:,.0f}"
    if abs(x) >= 1:
        return f"{x:.1f}"
    return f"{x:.2g}"


def _bytes(n) -> str:
    if n is None:
        return "-"
    if not _number(n):
        return _as_is(n)
    for unit in ("B", "kB", "MB", "GB", "TB"):
        if abs(n) < 1000 or unit == "TB":
            return f"{n:,.0f} {unit}" if unit == "B" else f"{n:,.1f} {unit}"
        n /= 1000
    return str(n)


def _share(x) -> str:
    """A proportion of the manifest (rounded there to 4 places) as a percentage with every one of them."""
    if x is None:
        return "-"
    return f"{x:.2%}" if _number(x) else _as_is(x)


def _interval(ci) -> str:
    if not ci:
        return "-"
    if not isinstance(ci, (list, tuple)) or len(ci) != 2:
        return _as_is(ci)
    return f"{_share(ci[0])} – {_share(ci[1])}"
