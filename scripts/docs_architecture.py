"""Draw the house from the code: who imports whom, per package, as a Mermaid diagram in
``docs/architecture.md`` (between the ``imports`` markers), and check the rules the drawing shows.

    python scripts/docs_architecture.py            # write the diagram
    python scripts/docs_architecture.py --check    # exit 1 when the diagram is stale or a rule is broken

Rules (issue 32): stages (``curate.stages``) never import ``curate.app`` or the top-level ``curate``
package; no two modules import each other, directly or around a longer circle (imports inside
functions count: they are dependencies all the same); ``curate.app`` uses only public names of stages.
"""

from __future__ import annotations

import ast
import re
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "architecture.md"
START, END = "<!-- imports:start (scripts/docs_architecture.py writes this) -->", "<!-- imports:end -->"
ROOTS = {"app": "curate.app", "modules": "curate.stages", "curate": "curate"}


def module_name(path: Path) -> str:
    rel = path.relative_to(ROOT).with_suffix("")
    parts = list(rel.parts)
    parts[0] = ROOTS[parts[0]]
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def modules() -> dict[str, Path]:
    found = {}
    for top in ROOTS:
        for path in sorted((ROOT / top).rglob("*.py")):
            found[module_name(path)] = path
    return found


def imports(path: Path, name: str, known: set[str]) -> set[tuple[str, str]]:
    """(imported module, name used from it or '') of every curate import in the file."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name.split(".")[0] == "curate":
                    out.add((a.name, ""))
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(up + ([base] if base else []))
            if base.split(".")[0] != "curate":
                continue
            for a in node.names:
                sub = f"{base}.{a.name}"
                out.add((sub, "") if sub in known else (base, a.name))
    return out


def graph() -> tuple[dict[str, set[str]], list[str]]:
    """Module -> the curate modules it imports; the rule breaches found on the way."""
    mods = modules()
    known = set(mods)
    edges: dict[str, set[str]] = defaultdict(set)
    problems = []
    for name, path in mods.items():
        for target, used in imports(path, name, known):
            if target == name:
                continue
            edges[name].add(target)
            if name.startswith("curate.stages") and (target == "curate" or target.startswith("curate.app")):
                problems.append(f"{path.relative_to(ROOT)}: a stage module imports {target}")
            if name.startswith("curate.app") and target.startswith("curate.stages") and used.startswith("_") \
                    and not used.startswith("__"):
                problems.append(f"{path.relative_to(ROOT)}: uses the private name {used} of {target}")
    return edges, problems


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of two or more modules (Tarjan, iterative)."""
    index, low, on, stack, out, counter = {}, {}, set(), [], [], [0]
    nodes = sorted(set(edges) | {t for ts in edges.values() for t in ts})
    for root in nodes:
        if root in index:
            continue
        work = [(root, iter(sorted(edges.get(root, ()))))]
        index[root] = low[root] = counter[0]
        counter[0] += 1
        stack.append(root)
        on.add(root)
        while work:
            node, it = work[-1]
            advanced = False
            for nxt in it:
                if nxt not in index:
                    index[nxt] = low[nxt] = counter[0]
                    counter[0] += 1
                    stack.append(nxt)
                    on.add(nxt)
                    work.append((nxt, iter(sorted(edges.get(nxt, ())))))
                    advanced = True
                    break
                if nxt in on:
                    low[node] = min(low[node], index[nxt])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == node:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))
    return out


def package_of(module: str) -> str:
    parts = module.split(".")
    if parts[:2] == ["curate", "stages"] and len(parts) > 3:
        return ".".join(parts[:4]) if len(parts) > 4 and parts[2] == "dedup" and parts[3] in ("fuzzy", "semantic") else ".".join(parts[:3])
    if parts[:2] == ["curate", "app"] and len(parts) > 3:
        return ".".join(parts[:3])
    return ".".join(parts[:2]) if len(parts) > 1 else module


def diagram(edges: dict[str, set[str]]) -> str:
    pkg_edges: dict[tuple[str, str], int] = defaultdict(int)
    for src, targets in edges.items():
        for t in targets:
            a, b = package_of(src), package_of(t)
            if a != b and not (a == "curate" or b == "curate"):
                pkg_edges[(a, b)] += 1
    names = sorted({p for e in pkg_edges for p in e})
    ids = {n: re.sub(r"\W", "_", n) for n in names}
    lines = ["```mermaid", "graph LR"]
    for n in names:
        lines.append(f'  {ids[n]}["{n}"]')
    for (a, b), n in sorted(pkg_edges.items()):
        lines.append(f"  {ids[a]} -->|{n}| {ids[b]}")
    lines.append("```")
    return "\n".join(lines)


def render() -> tuple[str, list[str]]:
    edges, problems = graph()
    for comp in cycles(edges):
        problems.append("an import circle: " + " -> ".join(comp))
    body = (f"{START}\n\nWho imports whom, per package (the number: how many module-level dependencies), drawn "
            "from the code by `scripts/docs_architecture.py`; `tests/test_docs.py` fails when it is stale, when "
            "a stage imports `curate.app` or the top-level `curate`, or when modules import each other in a "
            f"circle.\n\n{diagram(edges)}\n\n{END}")
    return body, problems


def main(argv) -> int:
    body, problems = render()
    text = DOC.read_text(encoding="utf-8")
    if START in text:
        new = text[:text.index(START)] + body + text[text.index(END) + len(END):]
    else:
        new = text.rstrip("\n") + "\n\n## Who imports whom\n\n" + body + "\n"
    if "--check" in argv:
        if new != text:
            problems.append(f"{DOC.relative_to(ROOT)}: the import diagram is stale: run scripts/docs_architecture.py")
        for p in problems:
            print(p, file=sys.stderr)
        return 1 if problems else 0
    DOC.write_text(new, encoding="utf-8")
    for p in problems:
        print(p, file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
