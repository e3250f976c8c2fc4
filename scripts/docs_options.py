"""Write every stage's options into its family page of the docs (docs/stages/*.md), from the stages'
own Settings dataclasses, so the pages cannot drift from the code.

    .venv/bin/python scripts/docs_options.py           # rewrite the "Options" sections
    .venv/bin/python scripts/docs_options.py --check   # exit 1 naming the page that is out of date

Each page holds its tables between ``<!-- options:start -->`` and ``<!-- options:end -->``;
``tests/test_docs.py`` runs the check.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
START, END = "<!-- options:start -->", "<!-- options:end -->"
#: family page -> its stages, in the order the page shows them
FAMILIES = {
    "download-extract.md": ["download_commoncrawl", "download_wikipedia", "download_arxiv", "download_urls",
                            "extract_warc", "extract_wikipedia", "extract_arxiv"],
    "clean-filter.md": ["normalize", "clean", "redact", "filter", "tag", "select", "bucket"],
    "datasets.md": ["decontaminate", "blend", "split_documents", "join_documents", "add_id", "shuffle"],
    "dedup.md": ["exact_dedup", "fuzzy_dedup", "semantic_dedup", "url_dedup", "paragraph_dedup", "line_dedup", "sentence_dedup",
                 "substring_dedup", "rehydrate"],
    "tokenize.md": ["tokenize"],
    "pack-shards.md": ["pack", "shards"],
}


def _default(f) -> str:
    if f.default is not dataclasses.MISSING:
        value = f.default
    elif f.default_factory is not dataclasses.MISSING:
        value = f.default_factory()
    else:
        return "required"
    if value is None or value == "" or value == ():
        return "-"
    if isinstance(value, bool):
        return "on" if value else "off"
    if isinstance(value, tuple):
        value = ",".join(map(str, value))
    text = str(value)
    return f"`{text}`" if len(text) <= 40 else f"`{text[:37]}...`"


def _cell(text: str) -> str:
    return " ".join(str(text).split()).replace("|", "\\|")


def stage_tables(names: list[str]) -> str:
    from curate.stages import registry

    out = []
    for name in names:
        cls = registry.get(name)
        words = " ".join(cls.cli or (name,))
        out += [f"### `curate {words}` (`{name}` in a job)", "", _cell(cls.help) + ".", "", _columns_line(name), ""]
        fields = [f for f in dataclasses.fields(cls.Settings) if f.init]
        if not fields:
            out += ["No settings of its own.", ""]
            continue
        out += [*option_rows(cls.Settings), ""]
    return "\n".join(out).rstrip() + "\n"


def _columns_line(name: str) -> str:
    """The stage's declared columns (``curate stages --columns``), with its default settings."""
    from curate.app.cli import stage_columns_rows

    _stage, needs, adds, removes = next(r for r in stage_columns_rows() if r[0] == name)
    return f"Columns: needs {needs}; adds {adds}" + (f"; removes {removes}" if removes != "-" else "") + "."


def option_rows(cls) -> list[str]:
    out = ["| option (CLI) | job YAML key | default | what it does |", "|---|---|---|---|"]
    for f in dataclasses.fields(cls):
        if not f.init:
            continue
        flag = "--" + f.name.replace("_", "-")
        choices = f.metadata.get("choices")
        helptext = f.metadata.get("help", "")
        if choices:
            helptext += f" (one of: {', '.join(map(str, choices))})"
        out.append(f"| `{flag}` | `{f.name}` | {_default(f)} | {_cell(helptext)} |")
    return out


def io_table() -> str:
    from curate.stages.stage import IOSettings

    return "\n".join(option_rows(IOSettings)) + "\n"


def index_table() -> str:
    from curate.stages import registry

    rows = ["| stage | command | what it does |", "|---|---|---|"]
    for name in registry.available():
        cls = registry.get(name)
        rows.append(f"| `{name}` | `curate {' '.join(cls.cli or (name,))}` | {_cell(cls.help)} |")
    return "\n".join(rows) + "\n"


def rendered(page: Path, names: list[str] | None) -> str:
    text = page.read_text(encoding="utf-8")
    if names == ["*"]:  # the stages' index: one line per stage
        block = f"{START}\n{index_table()}{END}"
    elif names is None:  # running.md: what every stage reads and writes with
        block = (f"{START}\n## Input and output options\n\nEvery stage takes these, as CLI flags or in a job's "
                 f"`io:` (generated from `IOSettings` by `scripts/docs_options.py`).\n\n{io_table()}{END}")
    else:
        block = (f"{START}\n## Options\n\nEvery setting, as a CLI flag and as a job YAML key (generated from the "
                 f"stages' Settings by `scripts/docs_options.py`). Every stage also takes the input/output "
                 f"options of [running](../running.md) (`--format`, `--on-error`, `--blocksize`, ...).\n\n"
                 f"{stage_tables(names)}{END}")
    if START in text:
        head, rest = text.split(START, 1)
        tail = rest.split(END, 1)[1]
        return head + block + tail
    return text.rstrip() + "\n\n" + block + "\n"


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--check", action="store_true", help="exit 1 when a page is out of date; write nothing")
    args = p.parse_args()
    from curate.stages import registry

    placed = {n for names in FAMILIES.values() for n in names}
    missing = sorted(set(registry.available()) - placed)
    if missing:
        print(f"docs_options: stages without a family page: {', '.join(missing)} (add them to FAMILIES)",
              file=sys.stderr)
        return 1
    stale = []
    pages = [(ROOT / "docs" / "stages" / name, names) for name, names in FAMILIES.items()]
    for page, names in [*pages, (ROOT / "docs" / "running.md", None), (ROOT / "docs" / "stages" / "index.md", ["*"])]:
        new = rendered(page, names)
        if new != page.read_text(encoding="utf-8"):
            stale.append(page)
            if not args.check:
                page.write_text(new, encoding="utf-8")
    if args.check and stale:
        print(f"docs_options: out of date: {', '.join(str(p.relative_to(ROOT)) for p in stale)}; "
              "run .venv/bin/python scripts/docs_options.py", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
