"""The type checker: every column's kind (number, string, boolean) from the frame or the input's schema; operands that do not fit are refused with their position."""

from __future__ import annotations

import pandas as pd

from curate.stages.dataset import DETAIL, REASON
from curate.stages.errors import SettingsError
from curate.stages.select.parse import source
from curate.stages.select.tokens import BOOL, NUMBER, OTHER, STRING_T
from curate.stages.select.tree import And, Arith, Col, Compare, In, IsNull, Neg, Node, Not, Num, Or, Str


def kind_of_dtype(dtype) -> str:
    """number / string / boolean / other, for a pandas dtype."""
    from pandas.api import types as t

    if t.is_bool_dtype(dtype):
        return BOOL
    if t.is_numeric_dtype(dtype) and not t.is_complex_dtype(dtype):
        return NUMBER
    if t.is_string_dtype(dtype) and not t.is_object_dtype(dtype):
        return STRING_T
    return OTHER


def kind_of_dtype_name(name: str) -> str | None:
    """The kind of a dtype as a manifest writes it (``float64``, ``string``, ...), None if unknown."""
    try:
        return kind_of_dtype(pd.api.types.pandas_dtype(name))
    except (TypeError, ValueError):
        return None


def schema_of(df: pd.DataFrame) -> dict[str, str]:
    return {str(c): kind_of_dtype(t) for c, t in df.dtypes.items() if c not in (REASON, DETAIL)}


def typecheck(text: str, node: Node, schema: dict[str, str | None], where: str = "", origin: str = "") -> str:
    """The type of the expression over ``schema`` (column -> kind, None for not known yet); an unknown
    column, a column of no usable kind or a type mismatch is a SettingsError naming it (``where``: the
    option, ``origin``: the input the schema is from)."""
    prefix = f"{where}: " if where else ""
    of = f" of {origin}" if origin else ""

    def name_of(kind):
        return {NUMBER: "a number", STRING_T: "a string", BOOL: "a condition"}.get(kind, "of unknown type")

    def mismatch(n, what):
        return SettingsError(f"{prefix}type mismatch in {source(text, n)!r}: {what}")

    def t(n) -> str | None:
        if isinstance(n, Num):
            return NUMBER
        if isinstance(n, Str):
            return STRING_T
        if isinstance(n, Col):
            if n.name not in schema:
                known = sorted(schema)
                listed = ", ".join(known[:30]) + (f", ... ({len(known)} in all)" if len(known) > 30 else "")
                raise SettingsError(f"{prefix}unknown column {n.name!r} (the columns{of}: {listed})")
            kind = schema[n.name]
            if kind == OTHER:
                raise SettingsError(f"{prefix}column {n.name!r}{of} holds neither numbers, strings nor booleans; "
                                    "select cannot compare it")
            return kind
        if isinstance(n, Neg):
            k = t(n.operand)
            if k not in (NUMBER, None):
                raise mismatch(n, f"- takes a number, {source(text, n.operand)!r} is {name_of(k)}")
            return NUMBER
        if isinstance(n, Arith):
            for side in (n.left, n.right):
                k = t(side)
                if k not in (NUMBER, None):
                    raise mismatch(n, f"{n.op} takes numbers, {source(text, side)!r} is {name_of(k)}")
            return NUMBER
        if isinstance(n, Compare):
            a, b = t(n.left), t(n.right)
            for side, k in ((n.left, a), (n.right, b)):
                if k == BOOL:
                    raise mismatch(n, f"{n.op} compares numbers or strings, {source(text, side)!r} is a condition")
            if a is not None and b is not None and a != b:
                raise mismatch(n, f"{source(text, n.left)!r} is {name_of(a)}, {source(text, n.right)!r} is {name_of(b)}")
            return BOOL
        if isinstance(n, In):
            k = t(n.operand)
            kinds = {NUMBER if isinstance(v, float) else STRING_T for v in n.values}
            if len(kinds) > 1:
                raise mismatch(n, "the list mixes numbers and strings")
            if k == BOOL:
                raise mismatch(n, f"in takes a number or a string, {source(text, n.operand)!r} is a condition")
            if k is not None and kinds != {k}:
                raise mismatch(n, f"{source(text, n.operand)!r} is {name_of(k)}, the list holds "
                                  f"{'numbers' if kinds == {NUMBER} else 'strings'}")
            return BOOL
        if isinstance(n, IsNull):
            t(n.operand)
            return BOOL
        if isinstance(n, Not):
            k = t(n.operand)
            if k not in (BOOL, None):
                raise mismatch(n, f"not takes a condition, {source(text, n.operand)!r} is {name_of(k)}")
            return BOOL
        if isinstance(n, (And, Or)):
            word = "and" if isinstance(n, And) else "or"
            for op in n.operands:
                k = t(op)
                if k not in (BOOL, None):
                    raise mismatch(n, f"{word} takes conditions, {source(text, op)!r} is {name_of(k)}")
            return BOOL
        raise TypeError(f"unknown node {type(n).__name__}")  # pragma: no cover

    kind = t(node)
    if kind not in (BOOL, None):
        raise SettingsError(f"{prefix}the expression is {name_of(kind)}, not a condition "
                            f"(e.g. {source(text, node)} > 0)")
    return kind or BOOL
