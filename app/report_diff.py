"""What differs between the two texts of a duplicate pair, word by word, for the report's pair tables.

difflib's SequenceMatcher over the words, with its junk heuristic off (it treats words as frequent
as "the" as junk, which misaligns prose). Bounded: the first :data:`DIFF_CHARS` of each text are
compared, and each side is shown as a window of :data:`WINDOW` characters starting a little before the
pair's first difference, so a difference at a page's end shows too. Texts are data, possibly markup
made to look like the page's own: :func:`to_html` escapes every piece, and the only tags it writes are
its ``<mark>``s.
"""

from __future__ import annotations

import difflib
import html
import re

#: characters of each text compared (SequenceMatcher's time grows with the product of the word counts)
DIFF_CHARS = 20_000
#: characters of each side shown, and of them before the first difference
WINDOW = 600
CONTEXT = 120


def _tokens(text: str) -> list[str]:
    return re.findall(r"\s+|\S+", text)


def word_diff(a: str, b: str) -> tuple[dict, dict]:
    """The window of each text to show, as ``{"runs": [[piece, differs], ...], "cut_start", "cut_end"}``:
    words of ``a`` that ``b`` lacks (or has in another place) differ, and the reverse; the pieces
    joined give the window's text exactly."""
    ta, tb = _tokens(a[:DIFF_CHARS]), _tokens(b[:DIFF_CHARS])
    wa = [i for i, t in enumerate(ta) if not t.isspace()]
    wb = [i for i, t in enumerate(tb) if not t.isspace()]
    sm = difflib.SequenceMatcher(None, [ta[i] for i in wa], [tb[i] for i in wb], autojunk=False)
    da, db = [False] * len(ta), [False] * len(tb)
    first = None  # word positions in a and in b where the first difference starts
    for op, i1, i2, j1, j2 in sm.get_opcodes():
        if op == "equal":
            continue
        first = first or (i1, j1)
        for k in range(i1, i2):
            da[wa[k]] = True
        for k in range(j1, j2):
            db[wb[k]] = True
    anchors = (0, 0) if first is None else (_offset(ta, wa, first[0]), _offset(tb, wb, first[1]))
    return (_window(ta, da, anchors[0], len(a) > DIFF_CHARS),
            _window(tb, db, anchors[1], len(b) > DIFF_CHARS))


def _offset(tokens: list[str], words: list[int], k: int) -> int:
    """Character offset of the k-th word (the text's end for k past the last word)."""
    end = words[k] if k < len(words) else len(tokens)
    return sum(len(t) for t in tokens[:end])


def _window(tokens: list[str], differs: list[bool], anchor: int, longer: bool) -> dict:
    # whitespace between two differing words differs too, so a changed phrase is one mark
    for i, t in enumerate(tokens):
        if t.isspace() and 0 < i < len(tokens) - 1 and differs[i - 1] and differs[i + 1]:
            differs[i] = True
    start = max(0, anchor - CONTEXT)
    end = start + WINDOW
    runs: list[list] = []
    pos = 0
    for t, d in zip(tokens, differs):
        lo, hi = max(pos, start), min(pos + len(t), end)
        if lo < hi:
            piece = t[lo - pos:hi - pos]
            if runs and runs[-1][1] == d:
                runs[-1][0] += piece
            else:
                runs.append([piece, d])
        pos += len(t)
    return {"runs": runs, "cut_start": start > 0, "cut_end": end < pos or longer}


def to_html(side: dict, mark: str) -> str:
    """The window as HTML: every piece escaped, the differing ones in ``<mark class=MARK>``."""
    body = "".join(f"<mark class='{mark}'>{html.escape(p)}</mark>" if d else html.escape(p) for p, d in side["runs"])
    return ("\u2026" if side["cut_start"] else "") + body + ("\u2026" if side["cut_end"] else "")
