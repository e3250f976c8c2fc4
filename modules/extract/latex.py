"""LaTeX sources of a paper to its text (the LaTeX body, as RedPajama's arXiv subset keeps it).

Steps: strip comments (``%`` to end of line, ``comment`` environments) from every file; find the
main file (the one with ``\\begin{document}``, preferring ``\\documentclass``, a conventional name
and then size); inline ``\\input``/``\\include``/``\\subfile`` recursively (only files of the same
paper are ever looked up: nothing touches the disk); keep the body between ``\\begin{document}``
and ``\\end{document}`` (the preamble goes); remove the bibliography; squeeze blank lines. Section
commands, environments and math stay as they are.
"""

from __future__ import annotations

import posixpath
import re

from curate.stages.extract import tidy_text

TEX_SUFFIXES = (".tex", ".ltx", ".latex")
#: how deep \input may nest (a file including itself is stopped earlier, by the cycle check)
MAX_DEPTH = 20
#: most files one paper may inline (real papers input tens, at most hundreds)
MAX_INCLUDES = 10_000
MAIN_NAMES = ("main", "ms", "paper", "article", "manuscript")

_COMMENT_LINE = re.compile(r"(?m)^[ \t]*%.*\n")
# a % not escaped by a backslash (an even number of backslashes before it is not an escape)
_COMMENT_TAIL = re.compile(r"(?m)(?<!\\)((?:\\\\)*)%.*$")
_COMMENT_ENV = re.compile(r"\\begin\{comment\}.*?\\end\{comment\}", re.DOTALL)
_BEGIN_DOC = re.compile(r"\\begin\s*\{document\}")
_END_DOC = re.compile(r"\\end\s*\{document\}")
_DOCCLASS = re.compile(r"\\document(?:class|style)\b")
_INPUT = re.compile(r"\\(?:input|include|subfile)\s*\{\s*([^{}]+?)\s*\}|\\input\s+([^\s{}\\%]+)")
_BIBLIOGRAPHY = re.compile(
    r"\\begin\{thebibliography\}.*?(?:\\end\{thebibliography\}|$)"
    r"|\\bibliography\s*\{[^}]*\}"
    r"|\\bibliographystyle\s*\{[^}]*\}"
    r"|\\addbibresource\s*(?:\[[^\]]*\])?\s*\{[^}]*\}"
    r"|\\printbibliography\b(?:\[[^\]]*\])?",
    re.DOTALL,
)
_MAKETITLE = re.compile(r"\\maketitle\b")
_LOOKS_LIKE_TEX = re.compile(r"\\(?:documentclass|documentstyle|begin\s*\{document\}|section|chapter|input)\b")


def is_tex_name(name: str) -> bool:
    return name.lower().endswith(TEX_SUFFIXES)


def looks_like_tex(text: str) -> bool:
    """Whether a lone file (a gzip'd single-file submission) is LaTeX at all (not PostScript, PDF...)."""
    return bool(_LOOKS_LIKE_TEX.search(text))


def decode_tex(data: bytes) -> str:
    """TeX sources are UTF-8 or, in older papers, Latin-1 (which decodes any byte)."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return data.decode("latin-1")


def strip_comments(tex: str) -> str:
    tex = _COMMENT_ENV.sub("", tex)
    tex = _COMMENT_LINE.sub("", tex)
    return _COMMENT_TAIL.sub(r"\1", tex)


def find_main(files: dict[str, str]) -> str | None:
    """Name of the main file among comment-free sources, or None when none is a document."""
    candidates = [n for n, t in files.items() if _BEGIN_DOC.search(t)]
    if not candidates:
        candidates = [n for n, t in files.items() if _DOCCLASS.search(t)]
    if not candidates:
        return next(iter(files)) if len(files) == 1 else None

    def rank(name):
        stem = posixpath.splitext(posixpath.basename(name))[0].lower()
        return (bool(_DOCCLASS.search(files[name])), stem in MAIN_NAMES, len(files[name]), name)

    return max(candidates, key=rank)


def _resolve(ref: str, current: str, files: dict[str, str]) -> str | None:
    ref = ref.strip().strip("\"'")
    for base in (posixpath.dirname(current), ""):
        path = posixpath.normpath(posixpath.join(base, ref))
        for cand in (path, path + ".tex"):
            if cand in files:
                return cand
    return None


class InputBomb(ValueError):
    """Inlining \\input/\\include would blow up (a file inputting the next twice, 20 levels deep)."""


def inline_inputs(name: str, files: dict[str, str], max_chars: int | None = None,
                  max_includes: int = MAX_INCLUDES) -> str:
    """``files[name]`` with every \\input/\\include of a file of the paper replaced by its content.

    The text is built piece by piece so that a paper whose inlined text would pass ``max_chars``
    (or that inlines more than ``max_includes`` files, which bounds the work even when the files
    are empty) raises :class:`InputBomb` as soon as it does, instead of growing exponentially.
    """
    pieces: list[str] = []
    size = includes = 0

    def emit(piece: str) -> None:
        nonlocal size
        size += len(piece)
        if max_chars is not None and size > max_chars:
            raise InputBomb(f"inlined \\input files exceed {max_chars} characters")
        pieces.append(piece)

    def walk(current: str, stack: tuple[str, ...]) -> None:
        nonlocal includes
        text = files[current]
        pos = 0
        for m in _INPUT.finditer(text):
            emit(text[pos:m.start()])
            pos = m.end()
            target = _resolve(m.group(1) or m.group(2), current, files)
            if target is None or target in stack or len(stack) > MAX_DEPTH:
                continue  # a missing file (a figure, a .sty, a generated .bbl) or a cycle
            includes += 1
            if includes > max_includes:
                raise InputBomb(f"more than {max_includes} \\input/\\include files inlined")
            walk(target, (*stack, target))
        emit(text[pos:])

    walk(name, (name,))
    return "".join(pieces)


def body(tex: str) -> str:
    """Between \\begin{document} and \\end{document} (the whole text when there is no such marker)."""
    begin = _BEGIN_DOC.search(tex)
    if begin:
        tex = tex[begin.end():]
    end = _END_DOC.search(tex)
    return tex[: end.start()] if end else tex


def tidy(tex: str) -> str:
    tex = _BIBLIOGRAPHY.sub("", tex)
    return tidy_text(_MAKETITLE.sub("", tex))


def paper_text(sources: dict[str, bytes], max_chars: int | None = None) -> str | None:
    """The text of a paper from its TeX files (name -> bytes); None when no file is a document.

    :class:`InputBomb` when inlining its inputs passes ``max_chars`` (or too many files)."""
    files = {name: strip_comments(decode_tex(data)) for name, data in sources.items()}
    main = find_main(files)
    if main is None:
        return None
    return tidy(body(inline_inputs(main, files, max_chars)))
