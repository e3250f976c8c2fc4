"""Evaluating a checked expression on whole columns (Arrow compute and numpy), with SQL's three-valued null logic; the first failed clause of each row."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from curate.stages.select.parse import columns_of, parse, source
from curate.stages.select.tokens import BOOL, NUMBER
from curate.stages.select.tree import And, Arith, Col, Compare, In, IsNull, Neg, Node, Not, Num, Or, Str
from curate.stages.select.types import kind_of_dtype, typecheck


class _Frame:
    """The columns of a frame as the evaluator wants them, each converted once."""

    def __init__(self, df: pd.DataFrame):
        self.df = df
        self.n = len(df)
        self.cache: dict[str, object] = {}

    def column(self, name: str):
        if name not in self.cache:
            s = self.df[name]
            kind = kind_of_dtype(s.dtype)
            if kind == NUMBER:
                value = s.to_numpy(dtype=np.float64, na_value=np.nan)
            elif kind == BOOL:
                known = s.notna().to_numpy(dtype=bool)
                v = s.fillna(False).to_numpy(dtype=bool) if not known.all() else s.to_numpy(dtype=bool)
                value = (v & known, ~v & known)
            else:
                value = _arrow_strings(s)
            self.cache[name] = value
        return self.cache[name]


def _arrow_strings(s: pd.Series):
    import pyarrow as pa

    arr = pa.array(s.array) if isinstance(s.dtype, pd.StringDtype) else pa.array(s, type=pa.large_string(),
                                                                                   from_pandas=True)
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    if arr.type != pa.large_string():  # one string type: two columns compare without casting each time
        arr = arr.cast(pa.large_string())
    return arr


def _is_arrow(x) -> bool:
    return hasattr(x, "type") and hasattr(x, "is_valid")


def _truth(x, n: int):
    """(true, false) masks of length n from Kleene pairs or a scalar pair."""
    t, f = x
    return np.broadcast_to(t, (n,)), np.broadcast_to(f, (n,))


_NP_COMPARE = {"==": np.equal, "!=": np.not_equal, "<": np.less, "<=": np.less_equal, ">": np.greater,
               ">=": np.greater_equal}


_PC_COMPARE = {"==": "equal", "!=": "not_equal", "<": "less", "<=": "less_equal", ">": "greater",
               ">=": "greater_equal"}


_PY_COMPARE = {"==": lambda a, b: a == b, "!=": lambda a, b: a != b, "<": lambda a, b: a < b,
               "<=": lambda a, b: a <= b, ">": lambda a, b: a > b, ">=": lambda a, b: a >= b}


def _eval(node: Node, fr: _Frame):
    """A number (float64 array or float, NaN = null), a string (Arrow array or str), or a condition
    (a pair of bool arrays or bools: definitely true, definitely false; neither = unknown)."""
    if isinstance(node, Num):
        return node.value
    if isinstance(node, Str):
        return node.value
    if isinstance(node, Col):
        return fr.column(node.name)
    if isinstance(node, Neg):
        return -_eval(node.operand, fr)
    if isinstance(node, Arith):
        a, b = _eval(node.left, fr), _eval(node.right, fr)
        with np.errstate(all="ignore"):
            if node.op == "+":
                return np.add(a, b)
            if node.op == "-":
                return np.subtract(a, b)
            if node.op == "*":
                return np.multiply(a, b)
            out = np.divide(a, b)
            return np.where(np.equal(b, 0), np.nan, out) if np.ndim(out) else (np.nan if b == 0 else float(out))
    if isinstance(node, Compare):
        a, b = _eval(node.left, fr), _eval(node.right, fr)
        if isinstance(a, str) or isinstance(b, str) or _is_arrow(a) or _is_arrow(b):
            return _compare_strings(node.op, a, b)
        with np.errstate(invalid="ignore"):
            known = ~(np.isnan(a) | np.isnan(b))
            c = _NP_COMPARE[node.op](a, b)
        return c & known, ~c & known
    if isinstance(node, In):
        a = _eval(node.operand, fr)
        if isinstance(a, str) or _is_arrow(a):
            hit, known = _in_strings(a, node.values)
        else:
            known = ~np.isnan(a)
            hit = np.isin(a, np.array(node.values, dtype=np.float64))
        hit = hit & known
        miss = ~hit & known
        return (miss, hit) if node.negated else (hit, miss)
    if isinstance(node, IsNull):
        a = _eval(node.operand, fr)
        if isinstance(a, tuple):
            null = ~(a[0] | a[1])
        elif isinstance(a, str):
            null = np.False_
        elif _is_arrow(a):
            null = a.is_null().to_numpy(zero_copy_only=False)
        else:
            null = np.isnan(a)
        return (~null, null) if node.negated else (null, ~null)
    if isinstance(node, Not):
        t, f = _eval(node.operand, fr)
        return f, t
    if isinstance(node, And):
        t, f = _eval(node.operands[0], fr)
        for op in node.operands[1:]:
            t2, f2 = _eval(op, fr)
            t, f = t & t2, f | f2
        return t, f
    if isinstance(node, Or):
        t, f = _eval(node.operands[0], fr)
        for op in node.operands[1:]:
            t2, f2 = _eval(op, fr)
            t, f = t | t2, f & f2
        return t, f
    raise TypeError(f"unknown node {type(node).__name__}")  # pragma: no cover


def _compare_strings(op: str, a, b):
    import pyarrow as pa
    import pyarrow.compute as pc

    if isinstance(a, str) and isinstance(b, str):
        c = _PY_COMPARE[op](a, b)
        return np.bool_(c), np.bool_(not c)
    a = a if _is_arrow(a) else pa.scalar(a, pa.large_string())
    b = b if _is_arrow(b) else pa.scalar(b, pa.large_string())
    res = getattr(pc, _PC_COMPARE[op])(a, b)
    t = pc.fill_null(res, False).to_numpy(zero_copy_only=False)
    f = pc.fill_null(pc.invert(res), False).to_numpy(zero_copy_only=False)
    return t, f


def _in_strings(a, values):
    import pyarrow as pa
    import pyarrow.compute as pc

    if isinstance(a, str):
        return np.bool_(a in values), np.True_
    hit = pc.is_in(a, value_set=pa.array(list(values), pa.large_string()))
    return pc.fill_null(hit, False).to_numpy(zero_copy_only=False), a.is_valid().to_numpy(zero_copy_only=False)


@dataclass(frozen=True)
class Compiled:
    """An expression parsed and type-checked for one schema."""

    text: str
    node: Node
    clauses: tuple[Node, ...]
    clause_texts: tuple[str, ...]
    columns: tuple[str, ...]

    def truth(self, df: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
        """(true, false) per row: the three-valued result of the whole expression."""
        return _truth(_eval(self.node, _Frame(df)), len(df))

    def first_failed(self, df: pd.DataFrame) -> np.ndarray:
        """Per row, the index of the first clause that is not true, -1 when every clause is."""
        fr = _Frame(df)
        failed = np.full(len(df), -1, dtype=np.int64)
        for i in range(len(self.clauses) - 1, -1, -1):  # backwards: the first failure is written last
            t, _ = _truth(_eval(self.clauses[i], fr), len(df))
            failed[~t] = i
        return failed


def compile_expression(text: str, schema: dict[str, str | None], where: str = "", origin: str = "") -> Compiled:
    """Parse ``text`` and check it against ``schema`` (SettingsError naming what is wrong)."""
    node = parse(text)
    typecheck(text, node, schema, where, origin)
    parts = tuple(clauses(node))
    return Compiled(text, node, parts, tuple(source(text, c) for c in parts), tuple(columns_of(node)))
