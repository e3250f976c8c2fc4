"""MediaWiki wikitext to plain text with mwparserfromhell.

Removed: templates (infoboxes, navboxes, citations), ``<ref>`` and other invisible tags, tables
(unless ``tables=True``: then each cell's text is kept, one cell per line), galleries, file/image links, category links, interlanguage links, magic words (``__NOTOC__``) and
HTML comments. Kept: headings (as their own line), paragraphs, list items, and the visible text
of links and of formatting (bold, italic).
"""

from __future__ import annotations

import re

from curate.stages.extract import tidy_text

#: namespace names that mean "file" or "category" on every wiki, whatever its language
DEFAULT_DROP_NAMESPACES = frozenset({"file", "image", "media", "category"})
#: tags whose whole content goes (tables are tags too: wiki ``{| |}`` markup parses as <table>)
DROP_TAGS = frozenset({"ref", "references", "table", "gallery", "imagemap", "timeline", "graph",
                       "templatedata", "score", "math", "chem", "syntaxhighlight", "source", "mapframe"})

_TABLE_TAGS = frozenset({"table"})
_CELL_TAGS = frozenset({"td", "th", "caption", "tr"})
_MAGIC_WORDS = re.compile(r"__[A-Z]+__")
_INTERLANGUAGE = re.compile(r"^[a-z]{2,3}(?:-[a-z]+){0,2}$")
_EDGE_SPACE = re.compile(r"(?m)^[ \t]+|[ \t]+$")
_SPACE_RUNS = re.compile(r"[ \t]{2,}")
#: lines left with nothing but punctuation once their content went (e.g. "()" of a removed template)
_EMPTY_LINE = re.compile(r"(?m)^[ \t]*[\-–—*#:;,.()\[\]|][ \t\-–—*#:;,.()\[\]|]*\n")


def _drop_link(title: str, drop_namespaces: frozenset[str]) -> bool:
    if title.startswith(":"):  # [[:Category:X]] is a visible link to the category page
        return False
    prefix, sep, _ = title.partition(":")
    if not sep:
        return False
    prefix = prefix.strip().lower()
    return prefix in drop_namespaces or bool(_INTERLANGUAGE.match(prefix))


def _remove(code, node) -> None:
    try:
        code.remove(node)
    except ValueError:  # already gone with an enclosing node
        pass


def _cells_on_lines(code) -> None:
    """A line break after every table cell and row, so cells are not run together (strip_code
    trims the newlines inside a tag). Walks the tag tree once: ``insert_after`` would search the
    whole page for every cell."""
    from mwparserfromhell.nodes import Tag, Text

    stack = [code]
    while stack:
        wikicode = stack.pop()
        nodes = wikicode.nodes
        for i in range(len(nodes) - 1, -1, -1):
            node = nodes[i]
            if isinstance(node, Tag) and node.contents is not None:
                stack.append(node.contents)
                if str(node.tag).strip().lower() in _CELL_TAGS:
                    nodes.insert(i + 1, Text("\n"))


def wikitext_to_text(wikitext: str, drop_namespaces: frozenset[str] = DEFAULT_DROP_NAMESPACES,
                     tables: bool = False) -> str:
    """Plain text of a page's wikitext; ``drop_namespaces`` are lowercase file/category prefixes;
    ``tables``: keep table cell text."""
    import mwparserfromhell

    code = mwparserfromhell.parse(wikitext)
    for link in code.filter_wikilinks(recursive=True):
        title = str(link.title).strip()
        if _drop_link(title, drop_namespaces):
            _remove(code, link)
        elif title.startswith(":") and link.text is None:
            link.title = title[1:]  # [[:Category:X]] shows as "Category:X"
    drop = DROP_TAGS - _TABLE_TAGS if tables else DROP_TAGS
    for tag in code.filter_tags(recursive=True):
        if str(tag.tag).strip().lower() in drop:
            _remove(code, tag)
    if tables:
        _cells_on_lines(code)
    for template in code.filter_templates(recursive=False):
        _remove(code, template)
    text = code.strip_code(normalize=True, collapse=True, keep_template_params=False)
    text = _MAGIC_WORDS.sub("", text)
    text = _SPACE_RUNS.sub(" ", text)
    text = _EDGE_SPACE.sub("", text) + "\n"
    text = _EMPTY_LINE.sub("", text)
    return tidy_text(text)
