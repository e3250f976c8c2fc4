"""``curate filters``: every filter a chain can name, with what it scores and its default thresholds."""

from __future__ import annotations

HELP = "list every filter a chain can name: what it scores, its default thresholds and other settings"


def add_arguments(p) -> None:
    p.add_argument("name", nargs="?", help="one filter: its settings in full")


def rows() -> list[tuple[str, str, str, str]]:
    """(name, what it scores, keeps, other settings with defaults) of every filter; a filter whose
    module cannot be imported here (a missing optional dependency) says so instead."""
    import dataclasses

    from curate.app.cli import plain
    from curate.stages.filters import FILTERS, get_filter

    out = []
    for kind in FILTERS:
        try:
            cls = get_filter(kind)
        except ImportError as e:
            out.append((kind, f"(not available here: {e})", "", ""))
            continue
        doc = " ".join(plain(cls.__doc__ or "").strip().split("\n\n")[0].split())
        fields = {f.name: f for f in dataclasses.fields(cls) if f.init}
        keeps = []
        for bound, word in (("min", ">"), ("max", "<")):
            value = fields[bound].default if bound in fields else None
            if value is not None:
                strict = getattr(cls, f"strict_{bound}", False)
                keeps.append(f"{word}{'' if strict else '='} {value:g}" if isinstance(value, float) else
                             f"{word}{'' if strict else '='} {value}")
        other = [f"{n}={_default(f)}" for n, f in fields.items() if n not in ("name", "min", "max")]
        out.append((kind, doc, " and ".join(keeps) or "(set min or max)", ", ".join(other)))
    return out


def _default(f) -> str:
    import dataclasses

    if f.default is not dataclasses.MISSING:
        return repr(f.default)
    if f.default_factory is not dataclasses.MISSING:
        return repr(f.default_factory())
    return "(required)"


def main(args) -> int:
    from curate.stages.errors import SettingsError
    from curate.stages.filters import FILTERS

    table = rows()
    if args.name:
        if args.name not in FILTERS:
            import difflib

            near = difflib.get_close_matches(args.name, list(FILTERS), n=1)
            hint = f"; did you mean {near[0]!r}?" if near else ""
            raise SettingsError(f"unknown filter {args.name!r}{hint} (curate filters lists them)")
        name, doc, keeps, other = next(r for r in table if r[0] == args.name)
        print(f"{name}: {doc}\n  keeps: score {keeps}\n  settings: {other or '-'}")
        return 0
    wide = max(len(r[0]) for r in table)
    for name, doc, keeps, other in table:
        print(f"{name.ljust(wide)}  {doc}")
        print(f"{'':{wide}}  keeps: score {keeps}" + (f"; {other}" if other else ""))
    print("\na chain YAML lists filters: `- {filter: NAME, min: X, max: Y}`; `curate filters NAME` shows one")
    return 0
