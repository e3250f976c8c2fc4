"""Weigh select's own expression language against a well-kept library (issue 32, point 4).

    python jobs/weigh_select.py [ROWS]      # default 1,000,000 rows; about half a minute

The candidate: the ``--where`` text parsed by sqlglot (DuckDB dialect), every node outside an
allow-list refused, then evaluated either with pyarrow.compute (Kleene and/or) or by DuckDB with
external access disabled. Three questions, each printed as a table: (a) speed on a generated frame,
median of 3; (b) the error messages for malformed and hostile expressions; (c) which documents each
keeps (null logic). A prototype: sqlglot is not a dependency of curate.
"""

from __future__ import annotations

import statistics
import sys
import time

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

# (curate's syntax, the same condition in SQL): from curate's tests and docs
CASES = [
    ("score_word_count >= 50 and language in ('en', 'de')", "score_word_count >= 50 and language in ('en', 'de')"),
    ("score_word_count >= 50 and score_numbers <= 0.15", "score_word_count >= 50 and score_numbers <= 0.15"),
    ("not (score_numbers < 0.5)", "not (score_numbers < 0.5)"),
    ("score_numbers != 0.5", "score_numbers <> 0.5"),
    ("1 / score_numbers > 5", "1 / score_numbers > 5"),
    ("ok or score_word_count * 2 > 300", "ok or score_word_count * 2 > 300"),
    ("language not in ('en', 'de') or language is null", "language not in ('en', 'de') or language is null"),
]
# malformed and hostile: (what, curate's syntax, SQL)
BAD = [
    ("unknown column", "score_wrd_count >= 50", "score_wrd_count >= 50"),
    ("wrong type", "language >= 50", "language >= 50"),
    ("function not allowed", "lower(language) == 'en'", "lower(language) = 'en'"),
    ("file access", "read_csv('/etc/passwd') is not null", "(select count(*) from read_csv('/etc/passwd')) > 0"),
    ("second statement", "score_numbers > 0; drop table t", "score_numbers > 0; drop table t"),
    ("deep nesting", "(" * 3000 + "score_numbers > 0" + ")" * 3000, "(" * 3000 + "score_numbers > 0" + ")" * 3000),
    ("syntax", "score_word_count >= and 5", "score_word_count >= and 5"),
]


def frame(n: int) -> pd.DataFrame:
    rng = np.random.default_rng(0)
    words = rng.integers(0, 500, n).astype(np.float64)
    words[rng.random(n) < 0.05] = np.nan
    numbers = rng.random(n).round(3)  # 0.0 and 0.5 occur: division by zero, equality
    numbers[rng.random(n) < 0.05] = np.nan
    langs = np.array(["en", "de", "fr", "zu", None], dtype=object)[rng.integers(0, 5, n)]
    ok = pd.array(rng.random(n) < 0.3, dtype="boolean")
    ok[rng.random(n) < 0.1] = pd.NA
    return pd.DataFrame({"score_word_count": words, "score_numbers": numbers,
                         "language": pd.array(langs, dtype=pd.StringDtype("pyarrow")), "ok": ok})


# --------------------------------------------------------------------------- the candidate


def sql_tree(text: str, columns):
    import sqlglot
    from sqlglot import exp

    allowed = (exp.And, exp.Or, exp.Not, exp.Paren, exp.EQ, exp.NEQ, exp.LT, exp.LTE, exp.GT, exp.GTE, exp.In,
               exp.Is, exp.Null, exp.Add, exp.Sub, exp.Mul, exp.Div, exp.Neg, exp.Column, exp.Identifier,
               exp.Literal, exp.Boolean)
    tree = sqlglot.parse_one(text, dialect="duckdb")
    for node in tree.walk():
        if not isinstance(node, allowed):
            raise ValueError(f"{type(node).__name__} is not allowed: {node.sql('duckdb')[:60]}")
    for col in tree.find_all(exp.Column):
        if col.name not in columns:
            raise ValueError(f"unknown column {col.name!r}")
    return tree


def arrow_eval(node, t: pa.Table):
    from sqlglot import exp

    binary = {exp.EQ: "equal", exp.NEQ: "not_equal", exp.LT: "less", exp.LTE: "less_equal", exp.GT: "greater",
              exp.GTE: "greater_equal", exp.Add: "add", exp.Sub: "subtract", exp.Mul: "multiply",
              exp.Div: "divide", exp.And: "and_kleene", exp.Or: "or_kleene"}
    if isinstance(node, exp.Column):
        return t[node.name]
    if isinstance(node, exp.Literal):
        return pa.scalar(node.this if node.is_string else float(node.this))
    if isinstance(node, exp.Paren):
        return arrow_eval(node.this, t)
    if isinstance(node, exp.Neg):
        return pc.negate(arrow_eval(node.this, t))
    if isinstance(node, exp.Not):
        return pc.invert(arrow_eval(node.this, t))
    if isinstance(node, exp.Is):
        return pc.is_null(arrow_eval(node.this, t))
    if isinstance(node, exp.In):
        a = arrow_eval(node.this, t)
        hit = pc.is_in(a, value_set=pa.array([arrow_eval(v, t).as_py() for v in node.expressions]))
        return pc.if_else(pc.is_valid(a), hit, pa.scalar(None, pa.bool_()))  # SQL: null IN (...) is null
    return getattr(pc, binary[type(node)])(arrow_eval(node.left, t), arrow_eval(node.right, t))


def sqlglot_arrow(df: pd.DataFrame, text: str) -> np.ndarray:
    from sqlglot import exp

    tree = sql_tree(text, df.columns)
    cols = sorted({c.name for c in tree.find_all(exp.Column)})
    table = pa.Table.from_pandas(df[cols], preserve_index=False)  # NaN becomes null here
    return pc.fill_null(arrow_eval(tree, table), False).to_numpy(zero_copy_only=False)


def duckdb_con():
    import duckdb

    con = duckdb.connect(config={"enable_external_access": False})
    con.execute("SET lock_configuration = true")
    return con


def sqlglot_duckdb(df: pd.DataFrame, text: str, con) -> np.ndarray:
    tree = sql_tree(text, df.columns)
    con.register("t", df)
    return np.asarray(con.execute(f"SELECT ({tree.sql('duckdb')}) IS TRUE AS k FROM t").fetchnumpy()["k"])


def curate_select(df: pd.DataFrame, text: str) -> np.ndarray:
    from curate.stages.select import compile_expression, schema_of

    return compile_expression(text, schema_of(df), "select: where").truth(df)[0]


def median_s(fn, *args) -> tuple[float, object]:
    times, out = [], None
    for _ in range(3):
        t0 = time.perf_counter()
        out = fn(*args)
        times.append(time.perf_counter() - t0)
    return statistics.median(times), out


def first_line(e: BaseException) -> str:
    msg = str(e).replace("\x1b[4m", "").replace("\x1b[0m", "").strip().splitlines() or [""]
    return f"{type(e).__name__}: {msg[0]}"[:150]


def main(argv) -> int:
    n = int(argv[0]) if argv else 1_000_000
    df = frame(n)
    con = duckdb_con()
    curate_select(df.head(10), CASES[0][0])  # imports, warm caches
    sqlglot_arrow(df.head(10), CASES[0][1])
    sqlglot_duckdb(df.head(10), CASES[0][1], con)
    print(f"(a) speed, {n:,} rows, median of 3 (parse + check + evaluate; seconds) and (c) documents kept")
    print(f"{'expression':52} {'curate':>7} {'sg+arrow':>8} {'sg+duckdb':>9}   kept: curate / arrow / duckdb")
    for ours, sql in CASES:
        tc, kc = median_s(curate_select, df, ours)
        ta, ka = median_s(sqlglot_arrow, df, sql)
        td, kd = median_s(sqlglot_duckdb, df, sql, con)
        flag = "" if kc.sum() == ka.sum() == kd.sum() and (kc == ka).all() and (kc == kd).all() else "  DIFFER"
        print(f"{ours[:52]:52} {tc:7.3f} {ta:8.3f} {td:9.3f}   {kc.sum():,} / {ka.sum():,} / {kd.sum():,}{flag}")
    import sqlglot

    from curate.stages.select import parse

    uncached = getattr(parse, "__wrapped__", parse)  # parse keeps an lru_cache: time the parser itself
    t_ours = statistics.median(median_s(lambda: [uncached(o) for o, _ in CASES])[0] for _ in range(3))
    t_sg = statistics.median(median_s(lambda: [sqlglot.parse_one(s, dialect="duckdb") for _, s in CASES])[0]
                             for _ in range(3))
    print(f"parsing alone, per expression: curate {t_ours / len(CASES) * 1e6:.0f} us, sqlglot {t_sg / len(CASES) * 1e6:.0f} us")

    print("\n(b) errors: curate (before any work) | sqlglot + allow-list | DuckDB given the SQL as it is")
    small = df.head(1000)
    con.register("small", small)
    for what, ours, sql in BAD:
        print(f"- {what}")
        for name, fn in (("curate", lambda o=ours: curate_select(small, o)),
                         ("sqlglot", lambda s=sql: sqlglot_arrow(small, s)),
                         ("duckdb", lambda s=sql: con.execute(f"SELECT count(*) FROM small WHERE {s}").fetchall())):
            try:
                print(f"    {name:8} accepted: {fn()!r}"[:150])
            except BaseException as e:  # noqa: B036 - RecursionError and friends are the point
                print(f"    {name:8} {first_line(e)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
