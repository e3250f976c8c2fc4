"""How numbers read on the HTML page of a run: counts with thousands separators, bytes in kB/MB/GB,
proportions as percentages."""

from __future__ import annotations


def _fmt(n) -> str:
    if n is None:
        return "-"
    if isinstance(n, float):
        return f"{n:,.1f}"
    return f"{n:,}"


def _bytes(n) -> str:
    if n is None:
        return "-"
    for unit in ("B", "kB", "MB", "GB", "TB"):
        if abs(n) < 1000 or unit == "TB":
            return f"{n:,.0f} {unit}" if unit == "B" else f"{n:,.1f} {unit}"
        n /= 1000
    return str(n)


def _share(x) -> str:
    """A proportion of the manifest (rounded there to 4 places) as a percentage with every one of them."""
    return "-" if x is None else f"{x:.2%}"


def _interval(ci) -> str:
    return "-" if not ci else f"{_share(ci[0])} – {_share(ci[1])}"
