"""The expression language's tokens: numbers, strings, column names, keywords and operators, with their positions; syntax errors name the character."""

from __future__ import annotations

from dataclasses import dataclass

from curate.stages.errors import SettingsError

REASON_SELECT = "select"


NUMBER, STRING_T, BOOL = "number", "string", "boolean"


#: a column of another kind (lists, mixed JSON values, dates): it exists, but select cannot use it
OTHER = "other"


KEYWORDS = ("and", "or", "not", "in", "is", "null")


COMPARISONS = ("==", "!=", "<=", ">=", "<", ">")


_SYMBOLS = ("==", "!=", "<=", ">=", "<", ">", "+", "-", "*", "/", "(", ")", ",")


_ESCAPES = {"\\": "\\", "'": "'", '"': '"', "n": "\n", "t": "\t"}


#: ASCII only: str.isdigit() would take other scripts' digits, and float() reads them
_DIGITS = frozenset("0123456789")


class SelectSyntaxError(SettingsError):
    """The expression does not parse."""


def _syntax(text: str, pos: int, what: str) -> SelectSyntaxError:
    near = text[pos:pos + 20]
    shown = f" (at {near!r})" if near else " (at the end)"
    return SelectSyntaxError(f"syntax error at character {pos + 1}{shown}: {what}")


@dataclass(frozen=True)
class Token:
    kind: str  # "num" | "str" | "name" | "kw" | "op" | "end"
    value: object
    start: int
    end: int


def tokenize(text: str) -> list[Token]:
    """The tokens of ``text``; anything outside the language is a SelectSyntaxError naming its position."""
    return list(_tokens(text))


def _tokens(text: str):
    """Tokens one by one: the parser pulls them as it goes, so the first error in the text is the
    one reported, whether the tokenizer or the parser finds it."""
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c.isspace():
            i += 1
            continue
        start = i
        if c in _DIGITS or (c == "." and i + 1 < n and text[i + 1] in _DIGITS):
            j = i
            while j < n and text[j] in _DIGITS:
                j += 1
            if j < n and text[j] == ".":
                j += 1
                while j < n and text[j] in _DIGITS:
                    j += 1
            if j < n and text[j] in "eE":
                k = j + 1
                if k < n and text[k] in "+-":
                    k += 1
                if k < n and text[k] in _DIGITS:
                    while k < n and text[k] in _DIGITS:
                        k += 1
                    j = k
                else:
                    raise _syntax(text, j, "an exponent needs digits, e.g. 1e-5")
            if j < n and (text[j].isalnum() or text[j] in "_."):
                raise _syntax(text, start, "not a number")
            yield Token("num", float(text[i:j]), start, j)
            i = j
        elif c.isascii() and (c.isalpha() or c == "_"):
            j = i
            while j < n and text[j].isascii() and (text[j].isalnum() or text[j] == "_"):
                j += 1
            word = text[i:j]
            if word.lower() in KEYWORDS:
                yield Token("kw", word.lower(), start, j)
            else:
                yield Token("name", word, start, j)
            i = j
        elif c == "`":
            j = text.find("`", i + 1)
            if j < 0:
                raise _syntax(text, start, "a `quoted column name` is not closed")
            if j == i + 1:
                raise _syntax(text, start, "an empty column name")
            yield Token("name", text[i + 1:j], start, j + 1)
            i = j + 1
        elif c in "'\"":
            chars, j = [], i + 1
            while True:
                if j >= n:
                    raise _syntax(text, start, "a string is not closed")
                d = text[j]
                if d == c:
                    break
                if d == "\\":
                    if j + 1 >= n or text[j + 1] not in _ESCAPES:
                        raise _syntax(text, j, "unknown escape (known: \\\\ \\' \\\" \\n \\t)")
                    chars.append(_ESCAPES[text[j + 1]])
                    j += 2
                    continue
                chars.append(d)
                j += 1
            yield Token("str", "".join(chars), start, j + 1)
            i = j + 1
        else:
            op = next((s for s in _SYMBOLS if text.startswith(s, i)), None)
            if op is None:
                hint = {"=": "compare with ==", "&": "write and", "|": "write or", "!": "write not",
                        ".": "attributes are not part of the language (a column name with a dot: `a.b`)",
                        "[": "subscripts are not part of the language", "%": "no modulo operator"}.get(c, "")
                raise _syntax(text, start, f"unexpected {c!r}" + (f": {hint}" if hint else ""))
            yield Token("op", op, start, start + len(op))
            i += len(op)
    yield Token("end", None, n, n)
