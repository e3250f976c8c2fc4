"""``select``: keep the documents whose columns satisfy an expression; the "decide later" of
tag-then-select (``modules/tag.py`` is the "tag first").

    curate select --where "score_word_count >= 50 and language in ('en', 'de')" --input IN --output OUT

The expression is a small language of its own, tokenized and parsed here into a tree that is
evaluated on whole columns with numpy and Arrow. It is never given to ``eval``, ``DataFrame.query``
or anything else with Python's semantics: a name is a column and nothing else, and there are no
calls, attributes, subscripts or keywords beyond the ones below, so ``__import__('os')`` is a syntax
error like any other.

The language
------------

- **values**: column names (ASCII letters, digits and ``_``, not starting with a digit; any other
  name in backquotes: `` `my col` ``), numbers (``50``, ``0.25``, ``1e-5``: every number is a float64,
  integer columns included, so integers beyond 2**53 lose precision), strings in single or double
  quotes (escapes ``\\\\ \\' \\" \\n \\t``).
- **types**: number (integer and float columns), string (string columns), boolean (boolean columns,
  and every comparison). A column of anything else (lists, mixed JSON values) cannot be used.
- **operators**, loosest first (each level is left-associative)::

      or
      and
      not
      ==  !=  <  <=  >  >=  in (...)  not in (...)  is null  is not null   (one per operand: no chains)
      +  -
      *  /
      - (unary), + (unary)
      ( ... )

  ``+ - * /`` take numbers; ``/`` is always float division (no integer division). Comparisons take
  two numbers or two strings; strings compare by Unicode code point (as Python and Arrow do).
  ``x in (v1, v2, ...)`` takes literals of x's type. ``and``/``or``/``not`` take booleans, and the
  whole expression must be one. Keywords are case-insensitive (``AND`` works too).
- **missing values** are SQL's three-valued logic: a NaN or null number, a null string, NaN from
  arithmetic (``0 * inf``) and a division by zero are all *null*; arithmetic with null is null; a
  comparison or ``in`` with a null operand is *unknown*; ``not unknown`` is unknown; ``false and
  unknown`` is false, ``true or unknown`` is true, every other mix with unknown is unknown. A document
  is kept only when the expression is *true*: a document without a score never passes a test on it,
  however the test is written (``not (score_x < 0.5)`` drops it as ``score_x >= 0.5`` does, where
  plain IEEE logic would keep it). ``x is null`` / ``x is not null`` ask about it (always true or
  false). This is also how ``filter`` treats a NaN score: rejected.

Errors: a syntax error (with its character position), an unknown column (with the columns there
are) and a type mismatch are SettingsErrors (exit 2, one line) raised before any work: the syntax
when the settings are made, the columns and types by :meth:`SelectStage.check` against the input's
schema (its manifest, the Parquet footer, or the JSONL records the reader samples for its schema),
and again, authoritative, against the schema the run reads, before anything is written.

Drops: a dropped document's reason is ``select`` and its ``_detail`` is the first *clause* it did not
satisfy (false or unknown), as written in the expression. The clauses are the operands of the
top-level ``and`` chain, left to right; parentheses make a group one clause (``(a and b) and c``
has two: ``(a and b)`` and ``c``); an expression that is not an ``and`` is one clause. The manifest
counts drops per clause (``counts.details.select``).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from curate.stages.dataset import DETAIL, REASON, STRING, mark_dropped
from curate.stages.select.parse import (
    clauses as clauses,
    columns_of as columns_of,
    parse as parse,
    source as source,
)
from curate.stages.select.tokens import (
    BOOL as BOOL,
    COMPARISONS as COMPARISONS,
    KEYWORDS as KEYWORDS,
    NUMBER as NUMBER,
    OTHER as OTHER,
    REASON_SELECT as REASON_SELECT,
    STRING_T as STRING_T,
    SelectSyntaxError as SelectSyntaxError,
    Token as Token,
    _syntax as _syntax,
    _tokens as _tokens,
    tokenize as tokenize,
)
from curate.stages.select.tree import (
    MAX_DEPTH as MAX_DEPTH,
    MAX_NESTING as MAX_NESTING,
    And as And,
    Arith as Arith,
    Col as Col,
    Compare as Compare,
    In as In,
    IsNull as IsNull,
    Neg as Neg,
    Node as Node,
    Not as Not,
    Num as Num,
    Or as Or,
    Str as Str,
    _too_deep as _too_deep,
)
from curate.stages.select.types import (
    kind_of_dtype as kind_of_dtype,
    kind_of_dtype_name as kind_of_dtype_name,
    schema_of as schema_of,
    typecheck as typecheck,
)
from curate.stages.stage import MapStage

# --------------------------------------------------------------------------- tokens


# --------------------------------------------------------------------------- the tree


# --------------------------------------------------------------------------- types


# --------------------------------------------------------------------------- evaluation


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


def select_frame(df: pd.DataFrame, where: str) -> pd.DataFrame:
    """``df`` with the rows that do not satisfy ``where`` marked dropped: reason ``select``, detail
    the first clause they failed. Pure: ``df`` is not changed."""
    import pyarrow as pa

    compiled = compile_expression(where, schema_of(df), "select: where")
    failed = compiled.first_failed(df)
    for col in (REASON, DETAIL):
        if col not in df.columns:
            df = df.assign(**{col: pd.Series(pd.NA, index=df.index, dtype=STRING)})
    newly = (failed >= 0) & df[REASON].isna().to_numpy()
    if not newly.any():
        return df
    out = mark_dropped(df, newly, REASON_SELECT)
    codes = pa.array(failed, mask=~newly)
    texts = pa.DictionaryArray.from_arrays(codes, pa.array(compiled.clause_texts, pa.large_string()))
    detail = pd.Series(pd.arrays.ArrowStringArray(texts.cast(pa.large_string())), index=df.index).astype(STRING)
    out[DETAIL] = df[DETAIL].astype(STRING).mask(newly, detail)
    if list(out.columns[-2:]) != [REASON, DETAIL]:
        rest = [c for c in out.columns if c not in (REASON, DETAIL)]
        out = out[[*rest, REASON, DETAIL]]
    return out


# --------------------------------------------------------------------------- the input's schema, before any work


def input_schema(spec: str) -> tuple[dict[str, str | None], str] | None:
    """(column -> kind, where it was read) of a dataset input without reading its documents: a
    curate output's manifest, a Parquet footer, or the JSON values of the records the reader samples
    for its schema (the first :data:`~curate.stages.dataset.SCHEMA_SAMPLE` of the first file; a key
    that is null in all of them says nothing about its type yet). None when the input is not there
    yet (a later stage of a job): the run checks it then."""
    from curate.stages import dataset

    if "://" not in spec and not os.path.exists(spec) and not dataset.globlib.has_magic(spec):
        return None
    if os.path.isdir(spec) or "://" in spec:
        manifest = dataset.read_manifest(spec)
        if manifest and isinstance(manifest.get("schema"), dict):
            schema = {str(c): kind_of_dtype_name(str(t)) for c, t in manifest["schema"].items()}
            return _with_id_text(schema), f"{spec} ({dataset.MANIFEST})"
    files = dataset.expand_named([spec], allow_incomplete=True)
    path = files[0][0]
    if dataset._kind(path) == "parquet":
        import pyarrow.parquet as pq

        arrow = pq.ParquetFile(dataset.parquet_source(path)).schema_arrow
        return _with_id_text({name: _arrow_kind(t) for name, t in zip(arrow.names, arrow.types)}), path
    kinds: dict[str, set] = {}
    records = 0
    # the records the reader samples for its schema (dataset.infer_meta): most of the first file, the
    # first ones of each further file
    known = None
    for piece in dataset.plan_pieces(files[:16], 1 << 62):
        if piece.start:
            continue
        if records and known is None:
            known = set(kinds)
        budget, taken = (dataset.SCHEMA_SAMPLE if known is None else dataset.SCHEMA_PEEK), 0
        for _, _, _, rec in dataset._iter_jsonl(piece, dataset.SCHEMA_LINE_LIMIT):
            if not isinstance(rec, dict):
                continue  # a broken line: the reader names it
            for k, v in rec.items():
                if known is None or str(k) not in known:  # later files add columns, as the reader's schema
                    kinds.setdefault(str(k), set()).add(_json_kind(v))
            records += 1
            taken += 1
            if taken >= budget:
                break
    schema = {k: _merged_kind(v) for k, v in kinds.items()}
    if len(files) == 1:
        return _with_id_text(schema), f"{path} (its first {records} records)"
    return _with_id_text(schema), f"{path} and {len(files[:16]) - 1} more file(s) (their first {records} records)"


def _merged_kind(kinds: set) -> str | None:
    """The kind of a JSON key over the sampled records, as the reader's dtype inference decides it."""
    kinds = kinds - {None}
    if not kinds:
        return None
    return kinds.pop() if len(kinds) == 1 else OTHER


def _with_id_text(schema: dict) -> dict:
    # every dataset has them once read (the text field renamed to text, ids generated when missing)
    return {**schema, "id": STRING_T, "text": STRING_T}


def _arrow_kind(t) -> str:
    import pyarrow as pa

    if pa.types.is_dictionary(t):
        t = t.value_type
    if pa.types.is_boolean(t):
        return BOOL
    if pa.types.is_integer(t) or pa.types.is_floating(t):
        return NUMBER
    if pa.types.is_string(t) or pa.types.is_large_string(t) or getattr(pa.types, "is_string_view", bool)(t):
        return STRING_T
    if pa.types.is_null(t):
        return None
    return OTHER


def _json_kind(v) -> str | None:
    if v is None:
        return None
    if isinstance(v, bool):
        return BOOL
    if isinstance(v, (int, float)):
        return NUMBER
    if isinstance(v, str):
        return STRING_T
    return OTHER


# --------------------------------------------------------------------------- the stage


@dataclass(frozen=True)
class SelectSettings:
    where: str = field(metadata={
        "help": "keep documents for which this is true: comparisons, and/or/not, in (...), is null, + - * /, "
                "parentheses, columns, numbers, 'strings' (see modules/select.py); e.g. "
                "\"score_word_count >= 50 and language in ('en', 'de')\"", "metavar": "EXPR"})

    def __post_init__(self):
        try:
            parse(self.where)
        except SelectSyntaxError as e:
            raise SelectSyntaxError(f"where: {e}") from None


class SelectStage(MapStage):
    """Keep the documents whose columns satisfy --where, e.g. "score_word_count >= 50 and language in
    ('en', 'de')". The language: == != < <= > >=, and or not, in (...), not in (...), is [not] null,
    + - * / (float division; by zero: null), parentheses, column names (`other names` in backquotes),
    numbers and 'strings'. NaN and null compare as unknown (SQL), and only true keeps a document. A
    dropped document's reason is select, its detail the first top-level and-clause it failed.
    Details: modules/select.py."""

    name = "select"
    Settings = SelectSettings
    help = "keep documents whose columns (tag's scores, metadata) satisfy an expression; drops as 'select'"

    def check(self, settings: SelectSettings, inputs) -> None:
        for spec in inputs[:1]:  # the dataset's schema is its first input's
            found = input_schema(spec)
            if found is not None:
                schema, origin = found
                compile_expression(settings.where, schema, "select: where", f"input {origin}")

    def transform(self, df: pd.DataFrame, settings: SelectSettings) -> pd.DataFrame:
        return select_frame(df, settings.where)

    def output_meta(self, meta: pd.DataFrame, settings) -> pd.DataFrame:
        return meta

    def run(self, settings: SelectSettings, ctx) -> dict:
        from curate.stages import dataset

        ddf = dataset.read_dataset(ctx.input, ctx.io, rejects_dir=ctx.output)
        # the schema the run reads decides, before anything is written
        compiled = compile_expression(settings.where, schema_of(ddf._meta), "select: where", f"input {ctx.input[0]}")
        out = self.apply(ddf, settings)
        extra = {"select": {"where": settings.where, "clauses": list(compiled.clause_texts),
                            "columns": list(compiled.columns)}}
        return dataset.write_dataset(out, ctx, stage=self.name, settings=settings, extra=extra,
                                     count_details=(REASON_SELECT,))
