"""The parser: recursive descent, one method per precedence level (loosest first), nesting bounded; the clauses and columns of a parsed expression."""

from __future__ import annotations

import dataclasses
import functools

from curate.stages.select.tokens import COMPARISONS, SelectSyntaxError, Token, _syntax, _tokens
from curate.stages.select.tree import (
    MAX_DEPTH,
    MAX_NESTING,
    And,
    Arith,
    Col,
    Compare,
    In,
    IsNull,
    Neg,
    Node,
    Not,
    Num,
    Or,
    Str,
    _too_deep,
)


class _Parser:
    """Recursive descent, one method per precedence level (loosest first)."""

    def __init__(self, text: str):
        self.text = text
        self.stream = _tokens(text)
        self.tokens: list[Token] = []
        self.i = 0
        self.level = 0  # parentheses, not and signs open around the token being parsed

    def nest(self, t: Token):
        self.level += 1
        if self.level > MAX_NESTING:
            self.fail(f"nested too deeply (more than {MAX_NESTING} levels of parentheses, not and signs)", t)

    def peek(self, k: int = 0) -> Token:
        while len(self.tokens) <= self.i + k:
            t = next(self.stream, None)
            if t is None:  # past the end: the end token again
                return self.tokens[-1]
            self.tokens.append(t)
        return self.tokens[self.i + k]

    @property
    def tok(self) -> Token:
        return self.peek()

    def take(self) -> Token:
        t = self.peek()
        self.i += 1
        return t

    def at(self, kind: str, value=None) -> bool:
        t = self.tok
        return t.kind == kind and (value is None or t.value == value)

    def fail(self, what: str, tok: Token | None = None):
        raise _syntax(self.text, (tok or self.tok).start, what)

    def expect(self, kind: str, value, what: str) -> Token:
        if not self.at(kind, value):
            self.fail(f"expected {what}, found {self.describe(self.tok)}")
        return self.take()

    @staticmethod
    def describe(t: Token) -> str:
        if t.kind == "end":
            return "the end"
        return {"num": "a number", "str": "a string", "name": f"column {t.value!r}"}.get(t.kind, repr(t.value))

    def parse(self) -> Node:
        if self.at("end"):
            self.fail("the expression is empty")
        node = self.or_()
        if not self.at("end"):
            t = self.tok
            if t.kind == "op" and t.value == "(":
                self.fail("calls are not part of the language")
            if t.kind == "op" and t.value in COMPARISONS:
                self.fail("comparisons do not chain: write a < b and b < c")
            self.fail(f"unexpected {self.describe(t)}")
        return node

    def or_(self) -> Node:
        parts = [self.and_()]
        while self.at("kw", "or"):
            self.take()
            parts.append(self.and_())
        return parts[0] if len(parts) == 1 else Or(parts[0].start, parts[-1].end, tuple(parts))

    def and_(self) -> Node:
        parts = [self.not_()]
        while self.at("kw", "and"):
            self.take()
            parts.append(self.not_())
        return parts[0] if len(parts) == 1 else And(parts[0].start, parts[-1].end, tuple(parts))

    def not_(self) -> Node:
        if self.at("kw", "not"):
            t = self.take()
            self.nest(t)
            operand = self.not_()
            self.level -= 1
            return Not(t.start, operand.end, operand)
        return self.comparison()

    def comparison(self) -> Node:
        left = self.sum_()
        t = self.tok
        if t.kind == "op" and t.value in COMPARISONS:
            self.take()
            right = self.sum_()
            if self.tok.kind == "op" and self.tok.value in COMPARISONS:
                self.fail("comparisons do not chain: write a < b and b < c")
            return Compare(left.start, right.end, t.value, left, right)
        if t.kind == "kw" and t.value == "is":
            self.take()
            negated = self.at("kw", "not")
            if negated:
                self.take()
            end = self.expect("kw", "null", "null after is").end
            return IsNull(left.start, end, left, negated)
        negated = t.kind == "kw" and t.value == "not" and self.peek(1).kind == "kw" and self.peek(1).value == "in"
        if negated:
            self.take()
        if self.at("kw", "in"):
            self.take()
            self.expect("op", "(", "( after in")
            values = [self.literal()]
            while self.at("op", ","):
                self.take()
                if self.at("op", ")"):
                    break
                values.append(self.literal())
            end = self.expect("op", ")", ", or ) in the list").end
            return In(left.start, end, left, tuple(values), negated)
        return left

    def literal(self):
        sign = 1.0
        if self.at("op", "-") and self.peek(1).kind == "num":
            self.take()
            sign = -1.0
        t = self.tok
        if t.kind == "num":
            self.take()
            return sign * t.value
        if t.kind == "str" and sign > 0:
            self.take()
            return t.value
        self.fail(f"an in (...) list holds numbers or strings, not {self.describe(t)}")

    def sum_(self) -> Node:
        left = self.product()
        while self.tok.kind == "op" and self.tok.value in ("+", "-"):
            op = self.take().value
            right = self.product()
            left = Arith(left.start, right.end, op, left, right)
        return left

    def product(self) -> Node:
        left = self.unary()
        while self.tok.kind == "op" and self.tok.value in ("*", "/"):
            op = self.take().value
            right = self.unary()
            left = Arith(left.start, right.end, op, left, right)
        return left

    def unary(self) -> Node:
        if self.tok.kind == "op" and self.tok.value in ("-", "+"):
            t = self.take()
            self.nest(t)
            operand = self.unary()
            self.level -= 1
            return Neg(t.start, operand.end, operand) if t.value == "-" else operand
        return self.primary()

    def primary(self) -> Node:
        t = self.tok
        if t.kind == "num":
            self.take()
            return Num(t.start, t.end, t.value)
        if t.kind == "str":
            self.take()
            return Str(t.start, t.end, t.value)
        if t.kind == "name":
            self.take()
            if self.at("op", "("):
                self.fail("calls are not part of the language")
            return Col(t.start, t.end, t.value)
        if t.kind == "op" and t.value == "(":
            self.take()
            self.nest(t)
            if self.at("op", ")"):
                self.fail("empty parentheses")
            inner = self.or_()
            close = self.expect("op", ")", ")")
            self.level -= 1
            # the parentheses belong to the node: spans stay substrings of balanced text
            return dataclasses.replace(inner, start=t.start, end=close.end)
        if t.kind == "kw":
            self.fail(f"{t.value!r} is a keyword: write `{t.value}` for a column of that name")
        self.fail(f"expected a column, a number, a string or (, found {self.describe(t)}")


@functools.lru_cache(maxsize=64)
def parse(text: str) -> Node:
    """The tree of an expression (SelectSyntaxError with the position when it does not parse)."""
    if not isinstance(text, str):
        raise SelectSyntaxError(f"the expression must be a string; got {type(text).__name__}")
    node = _Parser(text).parse()
    deep = _too_deep(node)
    if deep is not None:
        raise _syntax(text, deep.start, f"nested too deeply (an expression tree more than {MAX_DEPTH} levels deep, "
                                        "e.g. a chain of that many + or *): split it or use fewer levels")
    return node


def clauses(node: Node) -> list[Node]:
    """The operands of the top-level ``and`` chain; parentheses make a group one clause."""
    return list(node.operands) if isinstance(node, And) else [node]


def source(text: str, node: Node) -> str:
    """The characters of ``node`` as written (its own parentheses included)."""
    return text[node.start:node.end]


def columns_of(node: Node) -> list[str]:
    """Columns the expression reads, in order of first use."""
    seen: dict[str, None] = {}

    def walk(n):
        if isinstance(n, Col):
            seen.setdefault(n.name)
        for v in vars(n).values():
            if isinstance(v, Node):
                walk(v)
            elif isinstance(v, tuple):
                for x in v:
                    if isinstance(x, Node):
                        walk(x)

    walk(node)
    return list(seen)
