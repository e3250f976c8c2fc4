"""select: the expression language (hand-checked cases, a brute-force oracle on random expressions,
refusals), the pure pandas function, then the stage on two partitions and the CLI."""

from __future__ import annotations

import json
import math
import os
import random

import pandas as pd
import pytest

from curate.stages import select
from curate.stages.dataset import STRING
from curate.stages.errors import SettingsError
from curate.stages.select import (
    SelectSettings,
    SelectStage,
    SelectSyntaxError,
    compile_expression,
    parse,
    schema_of,
    select_frame,
)
from tests.conftest import curate, read_output, run_stage, side, write_jsonl

NAN = float("nan")
INF = float("inf")


def frame():
    return pd.DataFrame({
        "id": pd.array(["a", "b", "c", "d", "e"], dtype=STRING),
        "text": pd.array(["one", "two", "three", "four", ""], dtype=STRING),
        "x": [0.5, NAN, 0.9, 0.1, 0.0],
        "n": pd.array([1, None, 3, 50, 0], dtype="Int64"),
        "lang": pd.array(["en", None, "de", "fr", "Zu"], dtype=STRING),
        "ok": pd.array([True, False, None, True, False], dtype="boolean"),
    })


def kept(expr, df=None):
    df = frame() if df is None else df
    t, _ = compile_expression(expr, schema_of(df)).truth(df)
    return "".join(df["id"][t])


# --------------------------------------------------------------------------- hand-checked cases


@pytest.mark.parametrize("expr,ids", [
    ("x >= 0.5", "ac"),
    ("x > 0.5", "c"),
    ("x == 0.5", "a"),
    ("x != 0.5", "cde"),          # NaN != 0.5 is unknown, not true (IEEE would say true)
    ("not x < 0.5", "ac"),        # not (unknown) is unknown: b is dropped either way
    ("not (x >= 0.5)", "de"),
    ("x is null", "b"),
    ("x is not null", "acde"),
    ("x < 0.5 or x is null", "bde"),
    ("n >= 3", "cd"),             # an integer column is a number; NA is null
    ("n * 2 == 100", "d"),
    ("n / 2 == 1.5", "c"),        # / is float division
    ("1 / x > 5", "d"),           # 1/0 is null, not inf: e is dropped
    ("x / 0 is null", "abcde"),
    ("1 + 2 * 3 == 7", "abcde"),  # * before +
    ("(1 + 2) * 3 == 9", "abcde"),
    ("10 - 4 - 3 == 3", "abcde"),  # left-associative
    ("2 * -x < -0.5", "ac"),      # unary minus
    ("-n + 1 == 0", "a"),
    ("1e-1 < x and x < 1E0", "ac"),
    (".5 == x", "a"),
    ("lang == 'en'", "a"),
    ('lang == "de"', "c"),
    ("lang in ('en', 'de')", "ac"),
    ("lang in ('en', 'de',)", "ac"),
    ("lang not in ('en', 'de')", "de"),   # null is in no list and out of none
    ("not lang in ('en')", "cde"),
    ("lang < 'a'", "e"),                  # code point order: 'Z' < 'a'
    ("lang >= 'e'", "ad"),
    ("lang is null", "b"),
    ("n in (1, 3, -2)", "ac"),
    ("n not in (1, 3)", "de"),
    ("ok", "ad"),
    ("not ok", "be"),
    ("ok and x > 0.2", "a"),
    ("ok or x > 0.8", "acd"),             # c: unknown or true
    ("ok is null", "c"),
    ("(x > 0.2) is null", "b"),
    ("x > 0.2 or ok and n > 10", "acd"),  # and binds tighter than or
    ("(x > 0.2 or ok) and n > 10", "d"),
    ("not ok and not x > 0.2", "e"),      # not binds tighter than and
    ("X >= 0.5 AND `x` >= 0.5", None),    # keywords are case-insensitive; names are not
    ("`x` >= 0.5 AND x < 1", "ac"),
    ("text == ''", "e"),
    ("'a' < 'b'", "abcde"),
    ("'é' > 'z'", "abcde"),
])
def test_hand_checked(expr, ids):
    if ids is None:
        with pytest.raises(SettingsError, match="unknown column 'X'"):
            kept(expr)
        return
    assert kept(expr) == ids


def test_three_valued_logic_table():
    # p: true, false, unknown for rows a, b, c; q likewise in every combination
    df = pd.DataFrame({"p": [1.0, 1, 1, 0, 0, 0, NAN, NAN, NAN], "q": [1.0, 0, NAN] * 3})
    cases = {
        "p > 0 and q > 0": ["T", "F", "U", "F", "F", "F", "U", "F", "U"],
        "p > 0 or q > 0": ["T", "T", "T", "T", "F", "U", "T", "U", "U"],
        "not (p > 0)": ["F", "F", "F", "T", "T", "T", "U", "U", "U"],
    }
    for expr, want in cases.items():
        t, f = compile_expression(expr, schema_of(df)).truth(df)
        got = ["T" if a else "F" if b else "U" for a, b in zip(t, f)]
        assert got == want, expr


def test_infinities_compare_but_nan_from_arithmetic_is_null():
    df = pd.DataFrame({"x": [INF, -INF, 1.0]})
    assert kept("x > 1e308", df.assign(id=list("abc"))) == "a"
    assert kept("x - x is null", df.assign(id=list("abc"))) == "ab"  # inf - inf


def test_clauses_and_first_failed():
    df = frame()
    c = compile_expression("x >= 0.2 and (lang == 'en' or ok) and n > 0", schema_of(df))
    assert c.clause_texts == ("x >= 0.2", "(lang == 'en' or ok)", "n > 0")
    assert c.first_failed(df).tolist() == [-1, 0, 1, 0, 0]
    assert compile_expression("(a > 1 and b > 1) and c > 1", {"a": "number", "b": "number", "c": "number"}
                              ).clause_texts == ("(a > 1 and b > 1)", "c > 1")
    assert compile_expression("a > 1 or b > 1", {"a": "number", "b": "number"}).clause_texts == ("a > 1 or b > 1",)


def test_strings_and_escapes():
    df = pd.DataFrame({"id": list("abc"), "s": pd.array(["it's", 'say "hi"', "tab\there"], dtype=STRING)})
    assert kept(r"s == 'it\'s'", df) == "a"
    assert kept(r"""s == "say \"hi\"" """, df) == "b"
    assert kept(r"s == 'tab\there'", df) == "c"
    assert kept(r"s in ('x', 'say \"hi\"')", df) == "b"


def test_object_string_columns_and_plain_bool():
    df = pd.DataFrame({"id": list("abc"), "s": pd.Series(["x", 1, "x"], dtype=object), "b": [True, False, True]})
    # an object column (mixed JSON values, as the reader infers them) is not a string column
    with pytest.raises(SettingsError, match="column 's' holds neither"):
        kept("s == 'x'", df)
    assert kept("b", df) == "ac"
    assert kept("not b", df) == "b"


# --------------------------------------------------------------------------- refusals


@pytest.mark.parametrize("expr,pos,words", [
    ("", 1, "empty"),
    ("x >", 4, "expected a column"),
    ("x >= 0.5 and", 13, "expected a column"),
    ("(x > 1", 7, "expected )"),
    ("x > 1)", 6, "unexpected ')'"),
    ("x = 1", 3, "compare with =="),
    ("x > 1 && y", 7, "unexpected '&'"),
    ("x > 1 || y", 7, "unexpected '|'"),
    ("!x", 1, "write not"),
    ("0 < x < 1", 7, "do not chain"),
    ("x in 1", 6, "( after in"),
    ("x in ()", 7, "numbers or strings"),
    ("x in (y)", 7, "numbers or strings"),
    ("x is 1", 6, "null after is"),
    ("'abc", 1, "not closed"),
    ("`abc", 1, "not closed"),
    ("``", 1, "empty column name"),
    ("s == 'a\\q'", 8, "unknown escape"),
    ("1e", 2, "exponent"),
    ("1.2.3 > x", 1, "not a number"),
    ("2x > 1", 1, "not a number"),
    ("x > 1 y", 7, "column 'y'"),
    ("and > 1", 1, "keyword"),
    ("x % 2 == 0", 3, "modulo"),
    ("()", 2, "empty parentheses"),
    ("x ≥ 1", 3, "unexpected '≥'"),
    ("x > ٣", 5, "unexpected '٣'"),   # an Arabic-Indic digit: float() would read it, the language does not
])
def test_syntax_errors_name_the_position(expr, pos, words):
    with pytest.raises(SelectSyntaxError) as e:
        parse(expr)
    assert f"character {pos}" in str(e.value) and words in str(e.value)
    assert "\n" not in str(e.value)


@pytest.mark.parametrize("expr,words", [
    ("__import__('os')", "calls are not part"),
    ("__import__('os').system('touch pwned') == 0", "calls are not part"),
    ("open('/etc/passwd')", "calls are not part"),
    ("exec(\"x\")", "calls are not part"),
    ("x.__class__", "attributes are not part"),
    ("x.real > 1", "attributes are not part"),
    ("().__class__", "empty parentheses"),
    ("x[0] > 1", "subscripts"),
    ("lambda: 1", "unexpected ':'"),
    ("[c for c in x]", "unexpected '['"),
    ("{'a': 1}", "unexpected '{'"),
    ("x > 1; import os", "unexpected ';'"),
    ("x if x else 1", "column 'if'"),
    ("@x", "unexpected '@'"),
    ("x > 1 # comment", "unexpected '#'"),
    ("x ** 2 > 1", "expected a column"),
])
def test_python_is_not_the_language(expr, words, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SelectSyntaxError, match="syntax error at character") as e:
        SelectSettings(where=expr)
    assert words in str(e.value)
    assert not os.listdir(tmp_path)


@pytest.mark.parametrize("expr,words", [
    ("nope > 1", "unknown column 'nope' (the columns: id, lang, n, ok, text, x)"),
    ("lang > 1", "type mismatch in 'lang > 1': 'lang' is a string, '1' is a number"),
    ("x == 'en'", "type mismatch in \"x == 'en'\": 'x' is a number, \"'en'\" is a string"),
    ("lang + 1 > 2", "+ takes numbers, 'lang' is a string"),
    ("-lang > 2", "- takes a number, 'lang' is a string"),
    ("x in ('a', 'b')", "'x' is a number, the list holds strings"),
    ("lang in (1, 2)", "'lang' is a string, the list holds numbers"),
    ("x in (1, 'b')", "mixes numbers and strings"),
    ("ok > 1", "compares numbers or strings, 'ok' is a condition"),
    ("ok in (1)", "in takes a number or a string"),
    ("(x > 1) + 1 > 0", "+ takes numbers, '(x > 1)' is a condition"),
    ("not x", "not takes a condition, 'x' is a number"),
    ("x and ok", "and takes conditions, 'x' is a number"),
    ("lang or ok", "or takes conditions, 'lang' is a string"),
    ("x + 1", "the expression is a number, not a condition"),
    ("lang", "the expression is a string, not a condition"),
])
def test_type_errors_name_the_clause(expr, words):
    df = frame()
    with pytest.raises(SettingsError) as e:
        compile_expression(expr, schema_of(df), "where", "input IN")
    assert words.replace("(the columns:", "(the columns of input IN:") in str(e.value)
    assert str(e.value).startswith("where: ")


# --------------------------------------------------------------------------- an oracle on random expressions

# The oracle is written here, independently of modules/select.py: its own expression trees, its own
# printer (minimal parentheses by its own precedence table, plus random extra ones), and a row-by-row
# Python evaluation with explicit SQL semantics (None is null / unknown).

NUM_COLS = ("x", "y", "i")
STR_COLS = ("s", "t")
BOOL_COLS = ("b", "c")
PREC = {"or": 1, "and": 2, "not": 3, "cmp": 4, "+": 5, "-": 5, "*": 6, "/": 6, "neg": 7, "atom": 8}


def random_frame(rng, n=60):
    nums = [NAN, INF, -INF, 0.0, -0.0, 1.0, 2.0, 0.5, -3.0, 1e-9, 7.25, 100.0]
    strs = [None, "", "a", "b", "Z", "é", "ab", "a b", "日本"]
    return pd.DataFrame({
        "id": [f"r{k}" for k in range(n)],
        "x": [rng.choice(nums) for _ in range(n)],
        "y": [rng.choice(nums) for _ in range(n)],
        "i": pd.array([rng.choice([None, -2, 0, 1, 3, 7]) for _ in range(n)], dtype="Int64"),
        "s": pd.array([rng.choice(strs) for _ in range(n)], dtype=STRING),
        "t": pd.array([rng.choice(strs) for _ in range(n)], dtype=STRING),
        "b": pd.array([rng.choice([True, False, None]) for _ in range(n)], dtype="boolean"),
        "c": [rng.choice([True, False]) for _ in range(n)],
    })


def gen_num(rng, depth):
    k = rng.random()
    if depth <= 0 or k < 0.35:
        return ("col", rng.choice(NUM_COLS)) if rng.random() < 0.6 else ("num", rng.choice([0.0, 1.0, 0.5, 2.0, 1e-9, 3.0, 100.0]))
    if k < 0.45:
        return ("neg", gen_num(rng, depth - 1))
    return (rng.choice("+-*/"), gen_num(rng, depth - 1), gen_num(rng, depth - 1))


def gen_str(rng):
    return ("col", rng.choice(STR_COLS)) if rng.random() < 0.7 else ("str", rng.choice(["", "a", "b", "Z", "é", "ab"]))


def gen_bool(rng, depth):
    k = rng.random()
    if depth <= 0 or k < 0.4:
        j = rng.random()
        if j < 0.4:
            return ("cmp", rng.choice(["==", "!=", "<", "<=", ">", ">="]), gen_num(rng, 2), gen_num(rng, 2))
        if j < 0.55:
            return ("cmp", rng.choice(["==", "!=", "<", "<=", ">", ">="]), gen_str(rng), gen_str(rng))
        if j < 0.65:
            return ("in", gen_num(rng, 1), tuple(rng.sample([0.0, 1.0, 2.0, 3.0, -2.0, 7.0, 0.5], 3)), rng.random() < 0.5)
        if j < 0.75:
            return ("in", gen_str(rng), tuple(rng.sample(["", "a", "b", "Z", "é"], 2)), rng.random() < 0.5)
        if j < 0.85:
            return ("isnull", rng.choice([gen_num(rng, 1), gen_str(rng), ("col", rng.choice(BOOL_COLS))]), rng.random() < 0.5)
        return ("col", rng.choice(BOOL_COLS))
    if k < 0.55:
        return ("not", gen_bool(rng, depth - 1))
    return (rng.choice(["and", "or"]), [gen_bool(rng, depth - 1) for _ in range(rng.randint(2, 3))])


def prec(node):
    kind = node[0]
    if kind in ("col", "num", "str"):
        return PREC["atom"] if not (kind == "num" and node[1] < 0) else PREC["neg"]
    if kind in ("cmp", "in", "isnull"):
        return PREC["cmp"]
    return PREC[kind]


def show(node, rng):
    """Source text, parenthesised where precedence needs it, and sometimes where it does not."""
    kind = node[0]

    def sub(child, need):
        text = show(child, rng)
        if prec(child) < need or (prec(child) == need and child[0] in ("and", "or") and need <= 2) \
                or rng.random() < 0.15:
            return f"({text})"
        return text

    if kind == "col":
        return node[1] if rng.random() < 0.8 else f"`{node[1]}`"
    if kind == "num":
        return repr(node[1])
    if kind == "str":
        return "'" + node[1].replace("\\", "\\\\").replace("'", "\\'") + "'"
    if kind == "neg":
        return "-" + sub(node[1], PREC["neg"])
    if kind in "+-*/":
        p = PREC[kind]
        return f"{sub(node[1], p)} {kind} {sub(node[2], p + 1)}"  # left-associative: right side binds tighter
    if kind == "cmp":
        return f"{sub(node[2], PREC['+'])} {node[1]} {sub(node[3], PREC['+'])}"
    if kind == "in":
        items = ", ".join(show(("num", v) if isinstance(v, float) else ("str", v), rng) for v in node[2])
        return f"{sub(node[1], PREC['+'])} {'not in' if node[3] else 'in'} ({items})"
    if kind == "isnull":
        return f"{sub(node[1], PREC['+'])} is {'not null' if node[2] else 'null'}"
    if kind == "not":
        return "not " + sub(node[1], PREC["not"])
    word = kind if rng.random() < 0.8 else kind.upper()
    # an and inside an and (or an or inside an or) keeps its parentheses: the clauses are the top-level operands
    return f" {word} ".join(sub(c, PREC[kind] + 1) for c in node[1])


def oracle(node, row):
    kind = node[0]
    if kind == "col":
        v = row[node[1]]
        if v is None or v is pd.NA or (isinstance(v, float) and math.isnan(v)):
            return None
        return float(v) if node[1] in NUM_COLS else (bool(v) if node[1] in BOOL_COLS else str(v))
    if kind in ("num", "str"):
        return node[1]
    if kind == "neg":
        v = oracle(node[1], row)
        return None if v is None else -v
    if kind in "+-*/":
        a, b = oracle(node[1], row), oracle(node[2], row)
        if a is None or b is None:
            return None
        if kind == "/" and b == 0:
            return None
        r = {"+": lambda: a + b, "-": lambda: a - b, "*": lambda: a * b, "/": lambda: a / b}[kind]()
        return None if math.isnan(r) else r
    if kind == "cmp":
        a, b = oracle(node[2], row), oracle(node[3], row)
        if a is None or b is None:
            return None
        return {"==": a == b, "!=": a != b, "<": a < b, "<=": a <= b, ">": a > b, ">=": a >= b}[node[1]]
    if kind == "in":
        a = oracle(node[1], row)
        if a is None:
            return None
        return (a in node[2]) != node[3]
    if kind == "isnull":
        return (oracle(node[1], row) is None) != node[2]
    if kind == "not":
        v = oracle(node[1], row)
        return None if v is None else not v
    values = [oracle(c, row) for c in node[1]]
    if kind == "and":
        return False if False in values else (None if None in values else True)
    return True if True in values else (None if None in values else False)


def test_random_expressions_against_the_oracle():
    rng = random.Random(20)
    df = random_frame(rng)
    rows = df.to_dict("records")
    schema = schema_of(df)
    checked = 0
    for _ in range(400):
        node = gen_bool(rng, rng.randint(1, 4))
        text = show(node, rng)
        compiled = compile_expression(text, schema)
        t, f = compiled.truth(df)
        want = [oracle(node, r) for r in rows]
        assert [True if a else False if b else None for a, b in zip(t, f)] == want, text
        if node[0] == "and" and not text.startswith("("):
            first = [next((k for k, c in enumerate(node[1]) if oracle(c, r) is not True), -1) for r in rows]
            assert compiled.first_failed(df).tolist() == first, text
            assert len(compiled.clause_texts) == len(node[1])
        checked += 1
    assert checked == 400


# --------------------------------------------------------------------------- the pure function


def test_select_frame_marks_reason_and_first_clause_without_touching_input():
    df = frame().assign(_reason=pd.array([None, None, None, "upstream", None], dtype=STRING),
                        _detail=pd.array([None, None, None, "why", None], dtype=STRING))
    before = df.copy()
    out = select_frame(df, "x >= 0.2 and lang != 'de'")
    pd.testing.assert_frame_equal(df, before)
    assert out["_reason"].fillna("-").tolist() == ["-", "select", "select", "upstream", "select"]
    assert out["_detail"].fillna("-").tolist() == ["-", "x >= 0.2", "lang != 'de'", "why", "x >= 0.2"]
    assert list(out.columns) == list(df.columns)
    assert str(out["_detail"].dtype) == str(STRING) and str(out["_reason"].dtype) == str(STRING)


def test_select_frame_keeps_everything_and_empty():
    df = frame().assign(_reason=pd.array([None] * 5, dtype=STRING), _detail=pd.array([None] * 5, dtype=STRING))
    pd.testing.assert_frame_equal(select_frame(df, "x is null or x >= 0"), df)
    empty = df.iloc[:0]
    assert len(select_frame(empty, "x > 1")) == 0


def test_select_frame_refuses_unknown_column():
    with pytest.raises(SettingsError, match="unknown column 'score_nope'"):
        select_frame(frame(), "score_nope > 1")


# --------------------------------------------------------------------------- the stage


DOCS = [{"id": f"d{i}", "text": f"document {i}", "score": [0.1, 0.5, None, 0.9][i % 4],
         "lang": ["en", "de", "fr"][i % 3]} for i in range(40)]


@pytest.fixture
def two_files(tmp_path):
    write_jsonl(tmp_path / "in" / "a.jsonl", DOCS[:20])
    write_jsonl(tmp_path / "in" / "b.jsonl", DOCS[20:])
    return tmp_path


def test_stage_two_partitions_counts_clauses(two_files):
    tmp = two_files
    m = run_stage("select", {"where": "score >= 0.5 and lang in ('en', 'de')"}, str(tmp / "in" / "*.jsonl"), tmp / "out")
    want = [d for d in DOCS if d["score"] is not None and d["score"] >= 0.5 and d["lang"] in ("en", "de")]
    out = read_output(tmp / "out")
    assert out["id"].tolist() == [d["id"] for d in want]
    assert m["partitions"] == 2
    first = {}
    for d in DOCS:
        if d not in want:
            c = "score >= 0.5" if d["score"] is None or d["score"] < 0.5 else "lang in ('en', 'de')"
            first[c] = first.get(c, 0) + 1
    assert m["counts"]["dropped"] == {"select": 40 - len(want)}
    assert m["counts"]["details"] == {"select": first}
    assert m["select"]["clauses"] == ["score >= 0.5", "lang in ('en', 'de')"]
    rejects = pd.concat(pd.read_parquet(p) for p in sorted((side(tmp / "out", "_rejects")).glob("*.parquet")))
    assert set(rejects["_reason"]) == {"select"} and rejects["text"].notna().all()
    assert rejects.set_index("id")["_detail"].to_dict()["d2"] == "score >= 0.5"  # score null


def test_stage_resumes_with_clause_counts(two_files, caplog):
    import logging

    tmp = two_files
    first = run_stage("select", {"where": "score > 0.2"}, str(tmp / "in" / "*.jsonl"), tmp / "out")
    # an interrupted run: the partitions' journal records survive, _SUCCESS does not
    os.remove(tmp / "out" / "_SUCCESS")
    with caplog.at_level(logging.INFO):
        again = run_stage("select", {"where": "score > 0.2"}, str(tmp / "in" / "*.jsonl"), tmp / "out")
    assert "2 of 2 partitions already written; skipped" in caplog.text
    assert again["counts"] == first["counts"] and again["counts"]["details"] == {"select": {"score > 0.2": 20}}


def test_dask_equals_pandas(two_files):
    import dask.dataframe as dd

    df = pd.DataFrame(DOCS).astype({"id": STRING, "text": STRING, "lang": STRING, "score": "float64"}).assign(
        _reason=pd.array([None] * 40, dtype=STRING), _detail=pd.array([None] * 40, dtype=STRING))
    settings = SelectSettings(where="score < 0.6 or lang == 'fr'")
    got = SelectStage().apply(dd.from_pandas(df, npartitions=3), settings).compute()
    pd.testing.assert_frame_equal(got.reset_index(drop=True), SelectStage().transform(df, settings).reset_index(drop=True))


@pytest.mark.parametrize("fmt", ["parquet", "jsonl"])
def test_check_reads_the_schema_before_any_work(two_files, fmt):
    tmp = two_files
    src = tmp / "in" / "a.jsonl"
    if fmt == "parquet":
        pd.DataFrame(DOCS).to_parquet(tmp / "in.parquet")
        src = tmp / "in.parquet"
    stage = SelectStage()
    stage.check(SelectSettings(where="score > 0 and lang == 'en'"), (str(src),))
    with pytest.raises(SettingsError, match=rf"where: unknown column 'scor' \(the columns of input {src}"):
        stage.check(SelectSettings(where="scor > 0"), (str(src),))
    with pytest.raises(SettingsError, match="type mismatch in 'lang > 0'"):
        stage.check(SelectSettings(where="lang > 0"), (str(src),))
    stage.check(SelectSettings(where="x > 1"), (str(tmp / "later" / "stage"),))  # not there yet: run() checks


def test_check_samples_jsonl_as_the_reader_does(tmp_path):
    # the first record lacks the column; the reader's schema (its first records) has it
    src = write_jsonl(tmp_path / "in.jsonl", [{"id": "a", "text": "x"}, {"id": "b", "text": "y", "score": 0.5},
                                               {"id": "c", "text": "z", "score": None, "mixed": 1},
                                               {"id": "d", "text": "w", "mixed": "one"}])
    SelectStage().check(SelectSettings(where="score > 0.2"), (str(src),))
    with pytest.raises(SettingsError, match=r"'score' is a number, \"'a'\" is a string"):
        SelectStage().check(SelectSettings(where="score == 'a'"), (str(src),))
    with pytest.raises(SettingsError, match=r"column 'mixed' of input .*in.jsonl \(its first 4 records\) holds neither"):
        SelectStage().check(SelectSettings(where="mixed == 1"), (str(src),))
    m = run_stage("select", {"where": "score > 0.2"}, src, tmp_path / "out")
    assert m["counts"]["out"] == 1


def test_check_uses_a_curate_outputs_manifest(two_files):
    tmp = two_files
    run_stage("normalize", {}, str(tmp / "in" / "*.jsonl"), tmp / "norm")
    with pytest.raises(SettingsError, match=r"unknown column 'x' \(the columns of input .*norm \(_manifest.json\): "
                                            r"id, lang, score, text\)"):
        SelectStage().check(SelectSettings(where="x > 1"), (str(tmp / "norm"),))
    with pytest.raises(SettingsError, match="'score' is a number, \"'a'\" is a string"):
        SelectStage().check(SelectSettings(where="score == 'a'"), (str(tmp / "norm"),))


def test_run_refuses_before_writing(two_files):
    tmp = two_files
    with pytest.raises(SettingsError, match="unknown column 'nope'"):
        run_stage("select", {"where": "nope > 1"}, str(tmp / "in" / "*.jsonl"), tmp / "out")
    assert not (tmp / "out").exists()


def test_job_select_error_in_a_later_stage_writes_nothing_for_it(two_files):
    from curate.app.runner import load_job, run_job

    tmp = two_files
    job = tmp / "job.yaml"
    job.write_text(f"input: {tmp / 'in' / '*.jsonl'}\nstages:\n  - normalize: {{}}\n"
                   "  - select: {where: \"lang == 'en' and nope > 1\"}\n")
    with pytest.raises(SettingsError, match="where: unknown column 'nope'"):
        run_job(load_job(str(job)), str(tmp / "out"))
    sel = tmp / "out" / "02-select"
    assert not sel.exists() or not [p for p in sel.iterdir() if not p.name.startswith("_LOCK")]


# --------------------------------------------------------------------------- the CLI


@pytest.mark.parametrize("where,words", [
    ("score >", "select: where: syntax error at character 8"),
    ("__import__('os').system('touch PWNED')", "calls are not part of the language"),
    ("nope >= 1", "select: where: unknown column 'nope' (the columns of input"),
    ("lang > 0.5", "select: where: type mismatch in 'lang > 0.5': 'lang' is a string, '0.5' is a number"),
])
def test_cli_refusals_are_one_line_exit_2_nothing_written(two_files, where, words):
    tmp = two_files
    out = tmp / "out"
    proc = curate("select", "--where", where, "--input", tmp / "in" / "a.jsonl", "--output", out,
                  "--cluster", "threads", check=False)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.strip().count("\n") == 0
    assert words in proc.stderr
    assert not out.exists()
    assert not (tmp / "PWNED").exists() and not os.path.exists("PWNED")


def test_cli_runs(two_files):
    tmp = two_files
    curate("select", "--where", "score is null", "--input", tmp / "in" / "*.jsonl", "--output", tmp / "out",
           "--cluster", "threads")
    m = json.loads((tmp / "out" / "_manifest.json").read_text())
    assert m["counts"]["out"] == 10 and m["counts"]["details"] == {"select": {"score is null": 30}}


# --------------------------------------------------------------------------- depth (issue 29, point 8)


@pytest.mark.parametrize("text,where", [
    ("(" * 125 + "a > 1" + ")" * 125, 65),
    ("not " * 1000 + "a > 1", 1 + 4 * 64),
    ("a" + " + a" * 1000 + " > 1", None),
    ("-" * 500 + "a > 1", 65),
])
def test_deep_expressions_are_syntax_errors_with_a_position(text, where):
    with pytest.raises(select.SelectSyntaxError, match=r"syntax error at character \d+ .*nested too deeply") as e:
        select.parse(text)
    if where is not None:
        assert f"at character {where} " in str(e.value)


def test_deep_but_allowed_expressions_evaluate():
    df = pd.DataFrame({"a": [1.0, 2.0, None]})
    text = "(" * 30 + "a" + " + a" * 150 + " > 200" + ")" * 30  # 30 + 30 levels of nesting, a tree 182 deep
    out = select.select_frame(df, "not " * 31 + text)  # not (151 a > 200): a = 1 passes, a = 2 fails, null fails
    assert out["_reason"].isna().tolist() == [True, False, False]


def test_a_deep_expression_through_the_cli_exits_2(tmp_path, capsys):
    from curate.app import cli
    from tests.conftest import write_jsonl

    write_jsonl(tmp_path / "in.jsonl", [{"id": "a", "text": "x", "n": 1}])
    code = cli.main(["select", "--input", str(tmp_path / "in.jsonl"), "--output", str(tmp_path / "out"),
                     "--where", "(" * 200 + "n > 0" + ")" * 200])
    assert code == 2
    err = capsys.readouterr().err.strip()
    assert "nested too deeply" in err and "\n" not in err


def test_a_column_only_later_files_hold_is_seen_by_the_check_and_kept(tmp_path):
    """Issue 29, point 10: the schema came from the first JSONL file only, so ``score`` (in b.jsonl
    alone) was unknown to select and dropped from b's rows by the reader."""
    write_jsonl(tmp_path / "in" / "a.jsonl", [{"id": "a", "text": "x"}, {"id": "b", "text": "y"}])
    write_jsonl(tmp_path / "in" / "b.jsonl", [{"id": "c", "text": "z", "score": 5}, {"id": "d", "text": "w", "score": 0}])
    out = tmp_path / "out"
    run_stage("select", {"where": "score > 1"}, [str(tmp_path / "in" / "*.jsonl")], out, format="parquet")
    kept = read_output(out)
    assert kept["id"].tolist() == ["c"] and kept["score"].tolist() == [5]
